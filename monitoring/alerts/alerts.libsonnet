// SPDX-License-Identifier: GPL-2.0-only
//
// Alerts, each with a runbook: what to look at first, and what usually
// fixes it.  The thresholds are _config's: starting points, to be set
// from what your hosts show.
{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'kvmstats.alerts',
        rules: [
          {
            alert: 'KvmstatsExporterDown',
            expr: 'up{%(kvmstatsSelector)s} == 0' % $._config,
            'for': '5m',
            labels: { severity: $._config.criticalSeverity },
            annotations: {
              summary: 'kvmstats exporter on {{ $labels.instance }} cannot be scraped',
              description: 'Prometheus has not scraped this exporter for 5 minutes: there are no KVM statistics of its host.',
              runbook: |||
                1. systemctl status kvmstats-exporter (or .socket) on the host: is it
                   running, and listening where Prometheus scrapes?  journalctl -u
                   kvmstats-exporter shows its log (logfmt).
                2. From the Prometheus host: curl -v https://HOST:9477/metrics.  A 400
                   "this port serves HTTPS" means the scrape config says http; a TLS
                   alert names what the exporter refused (its log has a line with
                   your address and the reason); 401 means the basic auth user or
                   password is wrong.
                3. Exit status 2 in the unit's status: a bad command line or web
                   config (the log names the file, line and key).
              |||,
            },
          },
          {
            alert: 'KvmstatsScrapeFailing',
            expr: 'kvmstats_exporter_scrape_success{%(kvmstatsSelector)s} == 0' % $._config,
            'for': '5m',
            labels: { severity: $._config.criticalSeverity },
            annotations: {
              summary: 'kvmstats exporter on {{ $labels.instance }} cannot read the VMs',
              description: 'The exporter answers, but /dev/kvmstats is missing or unreadable: no VM is reported.',
              runbook: |||
                1. The exporter's log has the reason, once ("cannot read the VMs").
                2. No such file: the module is not loaded.  modprobe kvmstats, and
                   /etc/modules-load.d/kvmstats.conf for the next boot; after a
                   kernel upgrade check that DKMS built it (dkms status).
                3. Permission denied: the message names the device's group and mode.
                   The udev rule 60-kvmstats.rules gives it to the group kvmstats;
                   the packaged unit runs with SupplementaryGroups=kvmstats.
              |||,
            },
          },
          {
            alert: 'KvmstatsVMsLeftOut',
            expr: 'sum by (%(hostBy)s, target, reason) (kvmstats_exporter_left_out{%(kvmstatsSelector)s}) > 0' % ($._config { hostBy: std.join(', ', $._config.hostLabels) }),
            'for': '15m',
            labels: { severity: $._config.warningSeverity },
            annotations: {
              summary: '{{ $value }} {{ $labels.target }}s on {{ $labels.instance }} are not reported ({{ $labels.reason }})',
              description: 'VMs or vCPUs are listed but left out of every scrape: their statistics are missing from every rule and dashboard.',
              runbook: |||
                reason="fd_limit": a VM takes 2 + vCPUs file descriptors; raise
                LimitNOFILE= of the unit (process_max_fds shows the limit).
                reason="error": opening or reading their stats files fails; the
                exporter's log names the VM and the error.
              |||,
            },
          },
          {
            alert: 'KvmVcpuExitStorm',
            // Per vCPU only: an exporter run with --per vm sums a VM's
            // vCPUs, and that sum is not one vCPU's rate.
            expr: 'kvm_vcpu:exits:rate5m{%(kvmstatsSelector)s,vcpu!=""} > %(exitStormThreshold)d' % $._config,
            'for': $._config.exitStormFor,
            labels: { severity: $._config.warningSeverity },
            annotations: {
              summary: 'vCPU {{ $labels.vcpu }} of VM %(vmName)s on {{ $labels.instance }} exits {{ $value | humanize }} times a second' % $._config,
              description: 'A vCPU leaving the guest this often spends its time in the host (each exit costs microseconds), not in the guest.',
              runbook: |||
                1. Which exits: the dashboard's per-VM exit reasons, or on the host
                   kvmstats top NAME --per vcpu (io_exits, mmio_exits, halt_exits,
                   irq_window_exits ... on x86; mmio_exit_user, wfi_exit_stat ... on
                   arm64).
                2. io or mmio exits: an emulated device polled in a loop (a guest
                   driver without virtio, or a timer/port the guest spins on).
                   halt exits with halt polling off: an idle guest with a high
                   timer rate.  irq/nmi window exits: an interrupt storm in the
                   guest.
                3. The threshold (%(exitStormThreshold)d a second) is a starting point:
                   set it from what your workloads show on the dashboard.
              ||| % $._config,
            },
          },
          {
            alert: 'KvmHaltPollingWastingCpu',
            expr: |||
              kvm_vm:halt_poll_fail_seconds:rate5m{%(kvmstatsSelector)s} > %(haltPollWasteCpuThreshold)g
                and on (%(vmBy)s) kvm_vm:halt_poll_success:ratio5m{%(kvmstatsSelector)s} < %(haltPollSuccessRatioThreshold)g
            ||| % $._config,
            'for': '15m',
            labels: { severity: $._config.warningSeverity },
            annotations: {
              summary: 'VM %(vmName)s on {{ $labels.instance }} spends {{ $value | humanizePercentage }} of a CPU polling for wake-ups that do not come' % $._config,
              description: 'Halt polling spins a host CPU before sleeping; most polls of this VM fail, so that CPU time is lost to other VMs.',
              runbook: |||
                1. Halt polling pays off when wake-ups come within microseconds;
                   this VM's do not (success ratio below 50 %).
                2. Lower or disable it for this VM (QEMU: -accel kvm,halt-poll-ns=0,
                   or KVM_CAP_HALT_POLL), or host-wide with the halt_poll_ns module
                   parameter of kvm; guests with cpuidle-haltpoll poll themselves.
                3. Compare kvm_vm:halt_poll_success_seconds:rate5m: CPU that polling
                   did save a wake-up for.
              |||,
            },
          },
          {
            alert: 'KvmVmStatsFrozen',
            expr: |||
              sum by (%(vmBy)s) (increase(kvm_vcpu_exits_total{%(kvmstatsSelector)s}[%(frozenWindow)s])) == 0
                and on (%(vmBy)s) kvm_vm_info{%(kvmstatsSelector)s}
            ||| % $._config,
            'for': '15m',
            labels: { severity: $._config.warningSeverity },
            annotations: {
              summary: 'No vCPU of VM %(vmName)s on {{ $labels.instance }} has exited for 30 minutes (15 if it is new), and its VMM lives' % $._config,
              description: 'Even an idle guest exits for its timer interrupts: vCPUs that never exit are not being run.  The VMM process still holds the VM (the exporter drops VMs whose process exited).',
              runbook: |||
                1. Paused on purpose?  QEMU: virsh domstate / query-status says
                   "paused"; a migration or snapshot in progress pauses too.
                2. Otherwise the VMM is stuck: its vCPU threads are not in KVM_RUN.
                   kvmstats list shows the VM; kvm_vm_info has its VMM's pid: check
                   its threads (top -H -p PID, cat /proc/PID/task/*/stack as root)
                   and its log.
                3. If the VM is gone for its owner but its VMM lingers, the VMM is
                   leaking it: restarting that process frees it.
              |||,
            },
          },
        ],
      },
    ],
  },
}
