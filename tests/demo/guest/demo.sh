#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# make demo, in the guest: start the samples, show what kvmstats sees.

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

# Let the nested QEMU get into SeaBIOS first (slow under TCG): up to 60 s.
if pidof qemu-system-x86_64 > /dev/null; then
	i=0
	while [ $i -lt 120 ] && ! grep -q 'Running on KVM' /tmp/samples/seabios.log 2> /dev/null; do
		sleep 0.5
		i=$((i + 1))
	done
fi
sleep 2
step kvmstats list
# Nine vCPUs on the guest's two CPUs: which got a CPU, and which waited
# for one (the steal their guests see).
step kvmstats top --batch -d 2 -n 1 --per vcpu -s wait -f '^exits$'
step kvmstats show seabios-demo --vcpu all -f '^thread$'
pid=$(pidof samplevm | tr ' ' '\n' | sort -n | head -n 1)
step kvmstats show "$pid" --vcpu all -f '^(exits|io_exits|halt_exits|blocking)$'
step kvmstats show seabios-demo -a -f '^(exits|io_exits|halt_exits|halt_wakeup|pf_taken)$'
# Each samplevm vCPU runs (io_exits climb), halts once (halt_exits + 1) and
# sleeps (nothing moves); the nested QEMU's SeaBIOS shows real-guest stats.
step kvmstats top --batch -d 1 -n 3 --per vcpu -f '^(io_exits|halt_exits)$'
# The host view (the default, as kvm_stat's): every VM summed per statistic.
step kvmstats top -1 -d 2 -f '^(exits|io_exits|halt_exits|halt_wakeup|pf_taken)$'
if [ -s /tmp/samples/seabios.log ]; then
	echo
	echo "# the nested QEMU's SeaBIOS log (first lines):"
	tr -d '\r' < /tmp/samples/seabios.log | head -n 8
fi
