// SPDX-License-Identifier: GPL-2.0-only
//
// Recording rules.  A VM is (hostLabels, vmLabels) of _config; every vCPU
// rate is summed by those, so the rules give the same answer whether the
// exporter serves a statistic per vCPU or already summed per VM (export
// --per auto, vm or vcpu).  Only names every architecture's KVM has:
// exits and the generic halt-polling statistics.
{
  prometheusRules+:: {
    groups+: [
      {
        name: 'kvmstats.rules',
        rules: [
          // Exits a second, per vCPU and per VM.
          {
            record: 'kvm_vcpu:exits:rate5m',
            expr: 'rate(kvm_vcpu_exits_total{%(kvmstatsSelector)s}[5m])' % $._config,
          },
          {
            record: 'kvm_vm:exits:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_exits_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
          // Halt polling: the share of polls that caught a wake-up, and
          // the CPU (seconds a second: a fraction of a CPU) spent polling
          // in vain and with success, and asleep.
          {
            record: 'kvm_vm:halt_poll_success:ratio5m',
            expr: |||
              sum by (%(vmBy)s) (rate(kvm_vcpu_halt_successful_poll_total{%(kvmstatsSelector)s}[5m]))
                / sum by (%(vmBy)s) (rate(kvm_vcpu_halt_attempted_poll_total{%(kvmstatsSelector)s}[5m]))
            ||| % $._config,
          },
          {
            record: 'kvm_vm:halt_poll_fail_seconds:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_halt_poll_fail_seconds_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
          {
            record: 'kvm_vm:halt_poll_success_seconds:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_halt_poll_success_seconds_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
          {
            record: 'kvm_vm:halt_wait_seconds:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_halt_wait_seconds_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
          // What the scheduler gave each vCPU's host thread, seconds a
          // second: time on a CPU, and run-queue delay (runnable, waiting
          // for a CPU: the steal its guest sees).
          {
            record: 'kvm_vcpu:cpu_seconds:rate5m',
            expr: 'rate(kvm_vcpu_cpu_seconds_total{%(kvmstatsSelector)s}[5m])' % $._config,
          },
          {
            record: 'kvm_vcpu:delay_seconds:rate5m',
            expr: 'rate(kvm_vcpu_delay_seconds_total{%(kvmstatsSelector)s}[5m])' % $._config,
          },
          {
            record: 'kvm_vm:cpu_seconds:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_cpu_seconds_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
          {
            record: 'kvm_vm:delay_seconds:rate5m',
            expr: 'sum by (%(vmBy)s) (rate(kvm_vcpu_delay_seconds_total{%(kvmstatsSelector)s}[5m]))' % $._config,
          },
        ],
      },
    ],
  },
}
