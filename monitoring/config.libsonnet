// SPDX-License-Identifier: GPL-2.0-only
//
// The kvmstats mixin's settings.  Override them when you import the mixin:
//
//   (import 'kvmstats-mixin/mixin.libsonnet') + {
//     _config+:: { kvmstatsSelector: 'job="kvm"' },
//   }
{
  _config+:: {
    // Selects the kvmstats exporter's series; inserted between {} in
    // every query of the rules, alerts and dashboard.
    kvmstatsSelector: 'job="kvmstats"',

    // Where the exporter runs: Prometheus' job and target labels.
    hostLabels: ['job', 'instance'],

    // What names a VM on one host.  By default the exporter keys a VM's
    // series on what the guest keeps across restarts: its QEMU guest name
    // (KubeVirt's as namespace and name) and UUID, and adds vm="PID:FD"
    // where those do not tell VMs apart (kvmstats(1), VM labels).  With
    // export --vm-labels pid,fd, set this to ['pid', 'fd'].
    vmLabels: ['namespace', 'name', 'uuid', 'vm'],

    // How an alert names a VM (a Go template over the VM labels).
    vmName: '{{ with $labels.namespace }}{{ . }}/{{ end }}{{ or $labels.name $labels.uuid $labels.vm $labels.pid }}{{ if and $labels.vm (or $labels.name $labels.uuid) }} ({{ $labels.vm }}){{ end }}',

    // KvmVcpuExitStorm: exits a second of one vCPU, for how long.
    exitStormThreshold: 200000,
    exitStormFor: '10m',

    // KvmHaltPollingWastingCpu: CPU (seconds a second) a VM spends polling
    // in vain, while fewer than this share of its polls succeed.
    haltPollWasteCpuThreshold: 0.25,
    haltPollSuccessRatioThreshold: 0.5,

    // KvmVmStatsFrozen: no exit of any vCPU over this window.
    frozenWindow: '15m',

    // Severities.
    criticalSeverity: 'critical',
    warningSeverity: 'warning',

    // The dashboard.
    dashboardUid: 'kvmstats',
    dashboardTitle: 'KVM (kvmstats)',
    dashboardTags: ['kvm', 'kvmstats', 'kvmstats-mixin'],
    dashboardRefresh: '1m',
    dashboardTimeFrom: 'now-3h',

    // Derived: grouping lists for PromQL.
    vmBy:: std.join(', ', self.hostLabels + self.vmLabels),
  },
}
