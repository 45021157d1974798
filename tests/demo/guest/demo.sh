#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# make demo, in the guest: start the samples, show what kvmstats sees.
# The same on x86 and arm64: statistics that only one architecture has are
# picked from what the running kernel lists (kvmstats schema).

step()
{
	echo
	echo "\$ $*"
	"$@"
}

/demo/start-samples
if ! command -v kvmstats > /dev/null; then
	echo "kvmstats: the tool is not built yet (make tool-static); sample VMs:"
	pidof samplevm qemu-system-x86_64
	exit 0
fi

# Every statistic name of the running kernel, one a line.
names=$(kvmstats schema | awk '/^  / && $1 != "NAME" { print $1 }')

# The first of the names given that this kernel has.
first()
{
	for n in "$@"; do
		if echo "$names" | grep -qx "$n"; then
			echo "$n"
			return
		fi
	done
}

# A -f filter for those of the names given that this kernel has.
only()
{
	re=""
	for n in "$@"; do
		if echo "$names" | grep -qx "$n"; then
			re="${re:+$re|}$n"
		fi
	done
	echo "^($re)\$"
}

# What a samplevm's run phase moves (x86: port I/O; arm64, which has no
# io_exits: MMIO handled by the VMM) and what its halt adds one to (hlt
# exits to the VMM; WFI, in which arm64's KVM blocks the vCPU until the VMM
# signals its thread, so blocking and halt_wait_ns move there too).
io=$(first io_exits mmio_exit_user)
halt=$(first halt_exits wfi_exit_stat)

qemu=""
# Let the nested QEMU get into SeaBIOS first (slow under TCG): up to 60 s.
if pidof qemu-system-x86_64 > /dev/null; then
	qemu=seabios-demo
	i=0
	while [ $i -lt 120 ] && ! grep -q 'Running on KVM' /tmp/samples/seabios.log 2> /dev/null; do
		sleep 0.5
		i=$((i + 1))
	done
fi
sleep 2
step kvmstats list
# The vCPUs on the guest's two CPUs: which got a CPU, and which waited
# for one (the steal their guests see).
step kvmstats top --batch -d 2 -n 1 --per vcpu -s wait -f '^exits$'
if [ -n "$qemu" ]; then
	step kvmstats show "$qemu" --vcpu all -f '^thread$'
fi
pid=$(pidof samplevm | tr ' ' '\n' | sort -n | head -n 1)
step kvmstats show "$pid" --vcpu all -f "$(only exits "$io" "$halt" halt_wait_ns blocking)"
if [ -n "$qemu" ]; then
	step kvmstats show "$qemu" -a -f "$(only exits "$io" "$halt" halt_wakeup pf_taken)"
fi
# Each samplevm vCPU runs (the first statistic climbs), halts once (the
# second + 1) and sleeps (nothing moves); the nested QEMU's SeaBIOS, where
# there is one, shows real-guest stats.
step kvmstats top --batch -d 1 -n 3 --per vcpu -f "$(only "$io" "$halt")"
# The host view (the default, as kvm_stat's): every VM summed per statistic.
step kvmstats top -1 -d 2 -f "$(only exits "$io" "$halt" halt_wakeup halt_wait_ns pf_taken)"
if [ -s /tmp/samples/seabios.log ]; then
	echo
	echo "# the nested QEMU's SeaBIOS log (first lines):"
	tr -d '\r' < /tmp/samples/seabios.log | head -n 8
fi
