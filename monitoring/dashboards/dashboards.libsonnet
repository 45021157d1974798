// SPDX-License-Identifier: GPL-2.0-only
//
// The Grafana dashboard: host overview, per VM, per vCPU, the vCPU
// threads' CPU and run-queue delay.  Plain JSON objects, no grafonnet:
// nothing to vendor.  Queries use the recording rules where there is one.
local ds = { type: 'prometheus', uid: '${datasource}' };

// A panel of @type at @pos ([x, y, w, h]) with targets [expr, legend].
local panel(type, title, description, unit, pos, targets) = {
  type: type,
  title: title,
  [if description != '' then 'description']: description,
  datasource: ds,
  gridPos: { x: pos[0], y: pos[1], w: pos[2], h: pos[3] },
  fieldConfig: { defaults: { unit: unit }, overrides: [] },
  options: if type == 'stat' then {
    reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
    colorMode: 'value',
  } else {
    legend: { displayMode: 'list', placement: 'bottom' },
    tooltip: { mode: 'multi' },
  },
  targets: [
    {
      refId: std.char(std.codepoint('A') + i),
      expr: targets[i][0],
      legendFormat: targets[i][1],
      datasource: ds,
    }
    for i in std.range(0, std.length(targets) - 1)
  ],
};

local row(title, y) = {
  type: 'row',
  title: title,
  collapsed: false,
  gridPos: { x: 0, y: y, w: 24, h: 1 },
  panels: [],
};

// A query variable over @query's @label, "All" by default.
local variable(name, label, query, labelName) = {
  name: name,
  label: label,
  type: 'query',
  datasource: ds,
  query: { query: 'label_values(%s, %s)' % [query, labelName], refId: name },
  definition: 'label_values(%s, %s)' % [query, labelName],
  refresh: 2,
  includeAll: true,
  multi: true,
  allValue: '.*',
  current: { selected: true, text: ['All'], value: ['$__all'] },
  sort: 1,
};

{
  grafanaDashboards+:: {
    local c = $._config,
    local host = 'job=~"$job",instance=~"$instance"',
    local vm = host + ',name=~"$name"',
    local vmLegend = '{{instance}} {{namespace}} {{name}} {{vm}}',
    local vcpuLegend = '{{namespace}} {{name}} {{vm}}/{{vcpu}}',
    local exitReasons = [
      ['io_exits', 'io (x86)'],
      ['mmio_exits', 'mmio (x86)'],
      ['halt_exits', 'hlt (x86)'],
      ['irq_exits', 'external interrupt (x86)'],
      ['irq_window_exits', 'interrupt window (x86)'],
      ['signal_exits', 'signal'],
      ['mmio_exit_user', 'mmio to the VMM (arm64)'],
      ['mmio_exit_kernel', 'mmio in the kernel (arm64)'],
      ['wfi_exit_stat', 'wfi (arm64)'],
      ['wfe_exit_stat', 'wfe (arm64)'],
      ['hvc_exit_stat', 'hvc (arm64)'],
    ],
    local panels = [
      row('Host overview', 0),
      panel('stat', 'VMs', 'VMs with series in the last scrape, per host.', 'short', [0, 1, 6, 4], [
        ['sum by (instance) (kvmstats_exporter_vms{%s})' % host, '{{instance}}'],
      ]),
      panel('stat', 'vCPUs', 'vCPUs whose statistics are in the last scrape.', 'short', [6, 1, 6, 4], [
        ['sum by (instance) (kvmstats_exporter_vcpus{%s})' % host, '{{instance}}'],
      ]),
      panel('stat', 'Exporter scrape success', "0 while /dev/kvmstats is missing or unreadable (alert KvmstatsScrapeFailing); the exporter's log says why.", 'short', [12, 1, 6, 4], [
        ['min by (instance) (kvmstats_exporter_scrape_success{%s})' % host, '{{instance}}'],
      ]),
      panel('stat', 'Exporter up', 'Prometheus reaches the exporter (alert KvmstatsExporterDown).', 'short', [18, 1, 6, 4], [
        ['min by (instance) (up{%s})' % host, '{{instance}}'],
      ]),
      panel('timeseries', 'Exits a second, per host', 'Every vCPU exit to the host (kvm_vcpu_exits_total), summed per host.', 'ops', [0, 5, 12, 8], [
        ['sum by (instance) (kvm_vm:exits:rate5m{%s})' % host, '{{instance}}'],
      ]),
      panel('timeseries', 'Top 10 VMs by exits a second', 'With the VMM command name from kvm_vm_info.', 'ops', [12, 5, 12, 8], [
        ['topk(10, kvm_vm:exits:rate5m{%s} * on (%s) group_left (comm) kvm_vm_info)' % [vm, c.vmBy], vmLegend + ' ({{comm}})'],
      ]),
      panel('timeseries', 'Halt polling CPU, per host', 'Host CPU spent polling for a wake-up before a vCPU sleeps, as a share of one CPU (alert KvmHaltPollingWastingCpu).', 'percentunit', [0, 13, 12, 8], [
        ['sum by (instance) (kvm_vm:halt_poll_fail_seconds:rate5m{%s})' % host, '{{instance}} in vain'],
        ['sum by (instance) (kvm_vm:halt_poll_success_seconds:rate5m{%s})' % host, '{{instance}} successful'],
      ]),
      panel('timeseries', 'Exporter: left out, errors, fds', 'VMs and vCPUs listed but not served (alert KvmstatsVMsLeftOut), failed reads, and open fds against the limit: a VM takes 2 + vCPUs fds.', 'short', [12, 13, 12, 8], [
        ['sum by (instance, target, reason) (kvmstats_exporter_left_out{%s})' % host, '{{instance}} {{target}}s left out ({{reason}})'],
        ['rate(kvmstats_exporter_read_errors_total{%s}[$__rate_interval])' % host, '{{instance}} read errors/s'],
        ['process_open_fds{%s} / process_max_fds{%s}' % [host, host], '{{instance}} share of fds open'],
      ]),
      panel('timeseries', 'Scrape duration', 'Time the exporter took to list, sample and render the VMs.', 's', [0, 21, 24, 6], [
        ['kvmstats_exporter_scrape_duration_seconds{%s}' % host, '{{instance}}'],
      ]),
      row('Per VM', 27),
      panel('timeseries', 'Exits a second', 'Every exit of the VM, its vCPUs summed.', 'ops', [0, 28, 12, 8], [
        ['kvm_vm:exits:rate5m{%s}' % vm, vmLegend],
      ]),
      panel('timeseries', 'Exit reasons, per VM', "Each architecture's KVM counts its own exit reasons; the names this host's kernel lacks have no data. Summed per VM whatever --per the exporter runs with.", 'ops', [12, 28, 12, 8], [
        ['sum by (%s) (rate(kvm_vcpu_%s_total{%s}[$__rate_interval]))' % [c.vmBy, r[0], vm], '{{namespace}} {{name}} {{vm}} ' + r[1]]
        for r in exitReasons
      ]),
      panel('timeseries', 'Halt-poll success ratio', 'Polls that caught a wake-up before the vCPU slept.', 'percentunit', [0, 36, 12, 8], [
        ['kvm_vm:halt_poll_success:ratio5m{%s}' % vm, vmLegend],
      ]),
      panel('timeseries', 'Halted vCPUs: polling and waiting', "Seconds a second (shares of a vCPU) that the VM's halted vCPUs spent polling and asleep.", 'percentunit', [12, 36, 12, 8], [
        ['kvm_vm:halt_poll_fail_seconds:rate5m{%s}' % vm, vmLegend + ' polling in vain'],
        ['kvm_vm:halt_poll_success_seconds:rate5m{%s}' % vm, vmLegend + ' polling with success'],
        ['kvm_vm:halt_wait_seconds:rate5m{%s}' % vm, vmLegend + ' asleep'],
      ]),
      panel('timeseries', 'Guest memory mapped, pages', "x86: pages of each size in KVM's page tables for the VM (no data elsewhere).", 'short', [0, 44, 12, 8], [
        ['kvm_vm_pages_4k{%s}' % vm, vmLegend + ' 4k'],
        ['kvm_vm_pages_2m{%s}' % vm, vmLegend + ' 2M'],
        ['kvm_vm_pages_1g{%s}' % vm, vmLegend + ' 1G'],
      ]),
      panel('timeseries', 'Remote TLB flushes a second', '', 'ops', [12, 44, 12, 8], [
        ['rate(kvm_vm_remote_tlb_flush_total{%s}[$__rate_interval])' % vm, vmLegend],
      ]),
      row('Per vCPU', 52),
      panel('timeseries', 'Exits a second, per vCPU', "Per vCPU in the exporter's default; alert KvmVcpuExitStorm.", 'ops', [0, 53, 12, 8], [
        ['kvm_vcpu:exits:rate5m{%s}' % vm, vcpuLegend],
      ]),
      panel('timeseries', 'Halt polling in vain, per vCPU', '', 'percentunit', [12, 53, 12, 8], [
        ['rate(kvm_vcpu_halt_poll_fail_seconds_total{%s}[$__rate_interval])' % vm, vcpuLegend],
      ]),
      panel('timeseries', 'Blocking vCPUs', '1 while the vCPU is blocked in the host (halted, waiting for a wake-up).', 'short', [0, 61, 12, 8], [
        ['kvm_vcpu_blocking{%s}' % vm, vcpuLegend],
      ]),
      panel('timeseries', 'Halt wait, per vCPU', '', 'percentunit', [12, 61, 12, 8], [
        ['rate(kvm_vcpu_halt_wait_seconds_total{%s}[$__rate_interval])' % vm, vcpuLegend],
      ]),
      row('vCPU threads: CPU and run-queue delay', 69),
      panel('timeseries', 'vCPU run-queue delay (steal), per host', 'Time the vCPU threads were runnable but waited for a host CPU, in shares of one CPU: what the guests see as steal.', 'percentunit', [0, 70, 8, 8], [
        ['sum by (instance) (kvm_vm:delay_seconds:rate5m{%s})' % host, '{{instance}}'],
      ]),
      panel('timeseries', 'CPU and delay, per VM', "The VM's vCPU threads summed (1 is one whole host CPU).", 'percentunit', [8, 70, 8, 8], [
        ['kvm_vm:cpu_seconds:rate5m{%s}' % vm, vmLegend + ' on a CPU'],
        ['kvm_vm:delay_seconds:rate5m{%s}' % vm, vmLegend + ' waiting'],
      ]),
      panel('timeseries', 'CPU and delay, per vCPU', "Each vCPU's host thread (kvm_vcpu_cpu_seconds_total, kvm_vcpu_delay_seconds_total), where the module names the threads.", 'percentunit', [16, 70, 8, 8], [
        ['kvm_vcpu:cpu_seconds:rate5m{%s}' % vm, vcpuLegend + ' on a CPU'],
        ['kvm_vcpu:delay_seconds:rate5m{%s}' % vm, vcpuLegend + ' waiting'],
      ]),
    ],

    'kvmstats.json': {
      uid: c.dashboardUid,
      title: c.dashboardTitle,
      description: 'KVM statistics of every VM and vCPU, from the kvmstats exporter: hosts, VMs, vCPUs. Queries use the recording rules of the kvmstats mixin (monitoring/).',
      tags: c.dashboardTags,
      timezone: 'browser',
      editable: true,
      schemaVersion: 37,
      version: 1,
      time: { from: c.dashboardTimeFrom, to: 'now' },
      refresh: c.dashboardRefresh,
      annotations: { list: [] },
      links: [],
      templating: {
        list: [
          {
            name: 'datasource',
            label: 'Data source',
            type: 'datasource',
            query: 'prometheus',
            current: {},
            hide: 0,
          },
          variable('job', 'Job', 'kvmstats_exporter_vms{%s}' % c.kvmstatsSelector, 'job'),
          variable('instance', 'Host', 'kvmstats_exporter_vms{%s,job=~"$job"}' % c.kvmstatsSelector, 'instance'),
          variable('name', 'Guest', 'kvm_vm_info{%s,job=~"$job",instance=~"$instance"}' % c.kvmstatsSelector, 'name'),
        ],
      },
      panels: [panels[i] { id: i + 1 } for i in std.range(0, std.length(panels) - 1)],
    },
  },
}
