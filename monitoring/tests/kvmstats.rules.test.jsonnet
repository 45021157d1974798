// SPDX-License-Identifier: GPL-2.0-only
//
// promtool test rules for the mixin's rules and alerts, rendered by make
// monitoring into tests/kvmstats.rules.test.yml, which
// `promtool test rules monitoring/tests/*.yml` runs as it is shipped.
// Each recording rule against values worked out by hand, and each alert
// with series that make it fire and series that must not.  The expected
// summaries, templated from labels and values, are written out here; the
// constant annotations (description, runbook) are the mixin's own.
local mixin = import '../mixin.libsonnet';
local alerts = {
  [r.alert]: r
  for g in mixin.prometheusAlerts.groups
  for r in g.rules
};

// The annotations alert @name must have, with @summary.
local annotations(name, summary) = {
  summary: summary,
  description: alerts[name].annotations.description,
  runbook: alerts[name].annotations.runbook,
};

// A libvirt guest, a KubeVirt VM and a VM without a name (vm="PID:FD"),
// as the exporter labels them by default.
local web1 = 'job="kvmstats",instance="h1:9477",name="web1",uuid="6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10"';
local h2vm = 'job="kvmstats",instance="h2:9477",vm="7:9"';

{
  rule_files: ['../rules/kvmstats.rules.yml', '../rules/kvmstats.alerts.yml'],
  evaluation_interval: '1m',
  tests: [
    // ------------------------------------------------- recording rules
    {
      interval: '1m',
      input_series: [
        // Two vCPUs of one VM: 1000 and 3000 exits a second.
        { series: 'kvm_vcpu_exits_total{%s,vcpu="0"}' % web1, values: '0+60000x20' },
        { series: 'kvm_vcpu_exits_total{%s,vcpu="1"}' % web1, values: '0+180000x20' },
        // Halt polling, both vCPUs: 100 polls a second, 25 of them successful.
        { series: 'kvm_vcpu_halt_attempted_poll_total{%s,vcpu="0"}' % web1, values: '0+3000x20' },
        { series: 'kvm_vcpu_halt_attempted_poll_total{%s,vcpu="1"}' % web1, values: '0+3000x20' },
        { series: 'kvm_vcpu_halt_successful_poll_total{%s,vcpu="0"}' % web1, values: '0+1500x20' },
        { series: 'kvm_vcpu_halt_successful_poll_total{%s,vcpu="1"}' % web1, values: '0+0x20' },
        // 0.1 and 0.2 s a second polling in vain, 0.05 with success, 0.5 waiting.
        { series: 'kvm_vcpu_halt_poll_fail_seconds_total{%s,vcpu="0"}' % web1, values: '0+6x20' },
        { series: 'kvm_vcpu_halt_poll_fail_seconds_total{%s,vcpu="1"}' % web1, values: '0+12x20' },
        { series: 'kvm_vcpu_halt_poll_success_seconds_total{%s,vcpu="0"}' % web1, values: '0+3x20' },
        { series: 'kvm_vcpu_halt_wait_seconds_total{%s,vcpu="0"}' % web1, values: '0+30x20' },
        // A VM without a name, its statistic summed by the exporter (--per
        // vm): the VM rules see no difference.
        { series: 'kvm_vcpu_exits_total{%s}' % h2vm, values: '0+240000x20' },
        // Another job's series are not the mixin's business.
        { series: 'kvm_vcpu_exits_total{job="other",instance="h9:1",name="x",vcpu="0"}', values: '0+60000x20' },
        // vCPU threads: 0.75 and 0.25 s of CPU a second, 0.125 s of
        // run-queue delay.
        { series: 'kvm_vcpu_cpu_seconds_total{%s,vcpu="0"}' % web1, values: '0+45x20' },
        { series: 'kvm_vcpu_cpu_seconds_total{%s,vcpu="1"}' % web1, values: '0+15x20' },
        { series: 'kvm_vcpu_delay_seconds_total{%s,vcpu="0"}' % web1, values: '0+7.5x20' },
      ],
      promql_expr_test: [
        {
          expr: 'kvm_vcpu:exits:rate5m',
          eval_time: '10m',
          exp_samples: [
            // 1000 and 4000 to within a unit in the last place: promtool
            // 2.42 compares exactly what rate() computes.
            { labels: 'kvm_vcpu:exits:rate5m{%s,vcpu="0"}' % web1, value: 1000.0000000000001 },
            { labels: 'kvm_vcpu:exits:rate5m{%s,vcpu="1"}' % web1, value: 3000 },
            { labels: 'kvm_vcpu:exits:rate5m{%s}' % h2vm, value: 4000.0000000000005 },
          ],
        },
        {
          expr: 'kvm_vm:exits:rate5m',
          eval_time: '10m',
          exp_samples: [
            { labels: 'kvm_vm:exits:rate5m{%s}' % web1, value: 4000 },
            { labels: 'kvm_vm:exits:rate5m{%s}' % h2vm, value: 4000.0000000000005 },
          ],
        },
        {
          expr: 'kvm_vm:halt_poll_success:ratio5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:halt_poll_success:ratio5m{%s}' % web1, value: 0.25 }],
        },
        {
          expr: 'kvm_vm:halt_poll_fail_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:halt_poll_fail_seconds:rate5m{%s}' % web1, value: 0.30000000000000004 }],
        },
        {
          expr: 'kvm_vm:halt_poll_success_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:halt_poll_success_seconds:rate5m{%s}' % web1, value: 0.05 }],
        },
        {
          expr: 'kvm_vm:halt_wait_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:halt_wait_seconds:rate5m{%s}' % web1, value: 0.5 }],
        },
        {
          expr: 'kvm_vcpu:cpu_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [
            { labels: 'kvm_vcpu:cpu_seconds:rate5m{%s,vcpu="0"}' % web1, value: 0.75 },
            { labels: 'kvm_vcpu:cpu_seconds:rate5m{%s,vcpu="1"}' % web1, value: 0.25 },
          ],
        },
        {
          expr: 'kvm_vcpu:delay_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vcpu:delay_seconds:rate5m{%s,vcpu="0"}' % web1, value: 0.125 }],
        },
        {
          expr: 'kvm_vm:cpu_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:cpu_seconds:rate5m{%s}' % web1, value: 1 }],
        },
        {
          expr: 'kvm_vm:delay_seconds:rate5m',
          eval_time: '10m',
          exp_samples: [{ labels: 'kvm_vm:delay_seconds:rate5m{%s}' % web1, value: 0.125 }],
        },
      ],
    },

    // -------------------------------------------- KvmstatsExporterDown
    {
      interval: '1m',
      input_series: [
        { series: 'up{job="kvmstats",instance="h1:9477"}', values: '0x10' },
        { series: 'up{job="kvmstats",instance="h2:9477"}', values: '1x10' },
        // Down for 3 minutes only.
        { series: 'up{job="kvmstats",instance="h3:9477"}', values: '1 0 0 0 1 1 1 1 1 1 1' },
        // Another job's target is not this alert's business.
        { series: 'up{job="node",instance="h4:9100"}', values: '0x10' },
      ],
      alert_rule_test: [
        { eval_time: '3m', alertname: 'KvmstatsExporterDown', exp_alerts: [] },
        {
          eval_time: '7m',
          alertname: 'KvmstatsExporterDown',
          exp_alerts: [{
            exp_labels: { severity: 'critical', job: 'kvmstats', instance: 'h1:9477' },
            exp_annotations: annotations('KvmstatsExporterDown', 'kvmstats exporter on h1:9477 cannot be scraped'),
          }],
        },
      ],
    },

    // ------------------------------------------- KvmstatsScrapeFailing
    {
      interval: '1m',
      input_series: [
        { series: 'kvmstats_exporter_scrape_success{job="kvmstats",instance="h1:9477"}', values: '0x10' },
        { series: 'kvmstats_exporter_scrape_success{job="kvmstats",instance="h2:9477"}', values: '1x10' },
        // The module loaded after two minutes.
        { series: 'kvmstats_exporter_scrape_success{job="kvmstats",instance="h3:9477"}', values: '0 0 1 1 1 1 1 1 1 1 1' },
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'KvmstatsScrapeFailing', exp_alerts: [] },
        {
          eval_time: '8m',
          alertname: 'KvmstatsScrapeFailing',
          exp_alerts: [{
            exp_labels: { severity: 'critical', job: 'kvmstats', instance: 'h1:9477' },
            exp_annotations: annotations('KvmstatsScrapeFailing', 'kvmstats exporter on h1:9477 cannot read the VMs'),
          }],
        },
      ],
    },

    // ---------------------------------------------- KvmstatsVMsLeftOut
    {
      interval: '1m',
      input_series: [
        { series: 'kvmstats_exporter_left_out{job="kvmstats",instance="h1:9477",target="vm",reason="fd_limit"}', values: '3x30' },
        { series: 'kvmstats_exporter_left_out{job="kvmstats",instance="h1:9477",target="vcpu",reason="error"}', values: '0x30' },
        // A read that failed for five minutes, then worked again.
        { series: 'kvmstats_exporter_left_out{job="kvmstats",instance="h2:9477",target="vcpu",reason="error"}', values: '1x4 0x25' },
      ],
      alert_rule_test: [
        { eval_time: '10m', alertname: 'KvmstatsVMsLeftOut', exp_alerts: [] },
        {
          eval_time: '20m',
          alertname: 'KvmstatsVMsLeftOut',
          exp_alerts: [{
            exp_labels: { severity: 'warning', job: 'kvmstats', instance: 'h1:9477', target: 'vm', reason: 'fd_limit' },
            exp_annotations: annotations('KvmstatsVMsLeftOut', '3 vms on h1:9477 are not reported (fd_limit)'),
          }],
        },
      ],
    },

    // ------------------------------------------------ KvmVcpuExitStorm
    {
      interval: '1m',
      input_series: [
        // A KubeVirt VM: 300,000 exits a second on vCPU 3, 1,000 on vCPU 0.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",namespace="default",name="testvm",vcpu="3"}', values: '0+18000000x30' },
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",namespace="default",name="testvm",vcpu="0"}', values: '0+60000x30' },
        // A VM of 8 vCPUs at 37,500 each, summed by an exporter run with
        // --per vm: 300,000 a second, but no vCPU in a storm.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h3:9477",name="big"}', values: '0+18000000x30' },
        // A burst of 5 minutes is not a storm.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h2:9477",vm="5:6",vcpu="0"}', values: '0+18000000x5 90000000x25' },
      ],
      alert_rule_test: [
        { eval_time: '8m', alertname: 'KvmVcpuExitStorm', exp_alerts: [] },
        {
          eval_time: '20m',
          alertname: 'KvmVcpuExitStorm',
          exp_alerts: [{
            exp_labels: { severity: 'warning', job: 'kvmstats', instance: 'h1:9477', namespace: 'default', name: 'testvm', vcpu: '3' },
            exp_annotations: annotations('KvmVcpuExitStorm', 'vCPU 3 of VM default/testvm on h1:9477 exits 300k times a second'),
          }],
        },
      ],
    },

    // ---------------------------------------- KvmHaltPollingWastingCpu
    {
      interval: '1m',
      input_series: [
        // VM db of one of two VMMs that claim the name (so vm="PID:FD"):
        // half a CPU polling in vain, 10 % of the polls successful.
        { series: 'kvm_vcpu_halt_poll_fail_seconds_total{job="kvmstats",instance="h1:9477",name="db",vm="1:10",vcpu="0"}', values: '0+30x40' },
        { series: 'kvm_vcpu_halt_successful_poll_total{job="kvmstats",instance="h1:9477",name="db",vm="1:10",vcpu="0"}', values: '0+600x40' },
        { series: 'kvm_vcpu_halt_attempted_poll_total{job="kvmstats",instance="h1:9477",name="db",vm="1:10",vcpu="0"}', values: '0+6000x40' },
        // The other db: as much CPU, but 90 % of the polls pay off.
        { series: 'kvm_vcpu_halt_poll_fail_seconds_total{job="kvmstats",instance="h1:9477",name="db",vm="2:10",vcpu="0"}', values: '0+30x40' },
        { series: 'kvm_vcpu_halt_successful_poll_total{job="kvmstats",instance="h1:9477",name="db",vm="2:10",vcpu="0"}', values: '0+5400x40' },
        { series: 'kvm_vcpu_halt_attempted_poll_total{job="kvmstats",instance="h1:9477",name="db",vm="2:10",vcpu="0"}', values: '0+6000x40' },
        // A VM without a name: polls that fail, but only 1 % of a CPU in them.
        { series: 'kvm_vcpu_halt_poll_fail_seconds_total{job="kvmstats",instance="h1:9477",vm="3:10",vcpu="0"}', values: '0+0.6x40' },
        { series: 'kvm_vcpu_halt_successful_poll_total{job="kvmstats",instance="h1:9477",vm="3:10",vcpu="0"}', values: '0+600x40' },
        { series: 'kvm_vcpu_halt_attempted_poll_total{job="kvmstats",instance="h1:9477",vm="3:10",vcpu="0"}', values: '0+6000x40' },
      ],
      alert_rule_test: [
        { eval_time: '12m', alertname: 'KvmHaltPollingWastingCpu', exp_alerts: [] },
        {
          eval_time: '25m',
          alertname: 'KvmHaltPollingWastingCpu',
          exp_alerts: [{
            exp_labels: { severity: 'warning', job: 'kvmstats', instance: 'h1:9477', name: 'db', vm: '1:10' },
            exp_annotations: annotations('KvmHaltPollingWastingCpu', 'VM db (1:10) on h1:9477 spends 50% of a CPU polling for wake-ups that do not come'),
          }],
        },
      ],
    },

    // ------------------------------------------------ KvmVmStatsFrozen
    {
      interval: '1m',
      input_series: [
        // VM frozen1: its exits stop after 10 minutes, its VMM is there.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",name="frozen1",vcpu="0"}', values: '0+500x10 5000x50' },
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",name="frozen1",vcpu="1"}', values: '0+700x10 7000x50' },
        { series: 'kvm_vm_info{job="kvmstats",instance="h1:9477",name="frozen1",pid="1",fd="10",uid="107",comm="qemu-system-x86",id="kvm-1"}', values: '1x60' },
        // A VM without a name: one vCPU still, the other exiting: running.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",vm="2:10",vcpu="0"}', values: '5000x60' },
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",vm="2:10",vcpu="1"}', values: '0+600x60' },
        { series: 'kvm_vm_info{job="kvmstats",instance="h1:9477",pid="2",fd="10",vm="2:10",uid="0",comm="samplevm",id="kvm-2"}', values: '1x60' },
        // Still, and no kvm_vm_info: not a VM the exporter follows.
        { series: 'kvm_vcpu_exits_total{job="kvmstats",instance="h1:9477",name="gone",vcpu="0"}', values: '5000x60' },
      ],
      alert_rule_test: [
        // Flat from 10m: the 15-minute window from 25m, firing from 40m.
        { eval_time: '35m', alertname: 'KvmVmStatsFrozen', exp_alerts: [] },
        {
          eval_time: '41m',
          alertname: 'KvmVmStatsFrozen',
          exp_alerts: [{
            exp_labels: { severity: 'warning', job: 'kvmstats', instance: 'h1:9477', name: 'frozen1' },
            exp_annotations: annotations('KvmVmStatsFrozen', 'No vCPU of VM frozen1 on h1:9477 has exited for 30 minutes (15 if it is new), and its VMM lives'),
          }],
        },
      ],
    },
  ],
}
