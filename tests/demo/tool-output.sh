#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Capture real output of every kvmstats subcommand in the test guest, for
# the README: tests/demo/tool-output.sh [KERNEL] > docs/tool-output.txt
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kernel=${1:-6.12}
b=$root/build/demo
rel=$("$root/tests/kernels" "$kernel")
mkdir -p "$b/payload/usr/bin"
make -s -C "$root" tool-static module KVER="$rel" >&2
make -s -C "$root/tests/suite" O="$root/build/tests/bin" >&2
cc -O2 -Wall -Wextra -D_GNU_SOURCE -I"$root/tests/lib" -o "$b/payload/usr/bin/demo-vmm" \
	"$root/tests/demo/demo-vmm.c" "$root"/build/tests/bin/.lib/*.o -static -pthread
cp "$root/build/tool-static/kvmstats" "$b/payload/usr/bin/kvmstats"
cat > "$b/payload/usr/bin/demo" <<'DEMO'
#!/bin/sh
demo-vmm -name guest=web1,debug-threads=on -smp 2 &
demo-vmm -name db -smp 1 &
sleep 3
# Both VMMs' threads on CPU 0: their looping vCPUs wait for each other.
for p in $(pidof demo-vmm); do taskset -a -p 1 "$p" > /dev/null; done
sleep 1
run() { echo "\$ $*"; "$@"; echo; }
run kvmstats list
run kvmstats top --batch -n 1 -d 2 --per vcpu -s wait -f '^exits$'
run kvmstats show web1 --vcpu all -f '^thread$'
run kvmstats schema --vcpu -f '^(exits|io_exits|halt_wait_ns|halt_wait_hist|blocking)$'
run kvmstats schema --vm --json -f '^(pages_4k|max_mmu_rmap_size)$'
run kvmstats show web1 -f '^(remote_tlb_flush|pages_4k|max_mmu_rmap_size)$'
run kvmstats show web1 --vcpu all -f '^(exits|io_exits|halt_exits|halt_wait_ns|halt_wait_hist|blocking)$'
run kvmstats show db --vcpu 0 --json -f '^(io_exits|halt_wait_hist|blocking|guest_mode)$'
run kvmstats top -1 -f '^(exits|io_exits|halt_exits|halt_wait_ns|pages_4k|blocking)$'
run kvmstats top -1 --per vm -f '^(exits|io_exits|pages_4k)$'
run kvmstats top --batch -n 1 -d 1 --per vcpu -f '^(exits|io_exits|halt_exits)$'
run kvmstats top -l -n 3 -f '^(exits|io_exits|halt_exits)$'
run kvmstats top -f help
echo "\$ kvmstats export --per vcpu --collector.histograms -f '^(io_exits|halt_wait_ns|halt_wait_hist|blocking|pages_4k)$' | head -n 40"
kvmstats export --per vcpu --collector.histograms -f '^(io_exits|halt_wait_ns|halt_wait_hist|blocking|pages_4k)$' | head -n 40
echo
run kvmstats show no-such-guest || echo "(exit status $?)"
DEMO
chmod +x "$b/payload/usr/bin/demo"
"$root/tests/qemu/run-guest" --kernel "$kernel" --payload "$b/payload" --cmd demo \
	--timeout 120 --out "$b/guest" >&2
cat "$b/guest/output.txt"
