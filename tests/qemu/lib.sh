# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash disable=SC2034 # variables set here are used by the callers
#
# Shared helpers for the harness scripts in tests/qemu/.  Sourced, never run.

KS_ROOT=${KS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
KS_BUILD=${KS_BUILD:-$KS_ROOT/build}
KS_QEMU=$KS_ROOT/tests/qemu

ks_msg()
{
	printf 'kvmstats-harness: %s\n' "$*" >&2
}

ks_die()
{
	ks_msg "error: $*"
	exit 1
}

# Boot configurations: name -> extra kernel command line.  A new configuration
# is one line here plus its name in KVMSTATS_CONFIGS (see tests/qemu/check).
ks_config_cmdline()
{
	case "$1" in
	default)	echo "" ;;
	nodebugfs)	echo "debugfs=off" ;;
	*)		return 1 ;;
	esac
}

# Where a kernel's files are once scripts/kernel has prepared it: on the
# host for Debian 12's kernels, unpacked in their suite's chroot for others.
ks_vmlinuz()
{
	"$KS_ROOT/scripts/kernel" vmlinuz "$1"
}

ks_moddir()
{
	"$KS_ROOT/scripts/kernel" moddir "$1"
}

# Where the harness's second serial channel (results, never the console)
# lives in the guest: x86's second 16550, or on arm64's virt board, which has
# one PL011, a virtio serial port named ksg.results (tests/qemu/init finds
# its /dev/vportNpM).
ks_results_chan()
{
	case "$1" in
	arm64)	echo virtio:ksg.results ;;
	*)	echo /dev/ttyS1 ;;
	esac
}

# Copy module $2 (file name without .ko) of kernel $1 to directory $3 as an
# uncompressed .ko, whichever compression Debian used for it, and print
# its name.  With a fourth argument "optional", a kernel without the module
# (or with it built in) is no error, and nothing is printed.
ks_copy_module()
{
	local rel=$1 name=$2 dst=$3 src

	src=$(find "$(ks_moddir "$rel")" -name "$name.ko" -o -name "$name.ko.xz" \
		-o -name "$name.ko.zst" -o -name "$name.ko.gz" | head -n 1)
	if [ -z "$src" ] && [ "${4:-}" = optional ]; then
		return 0
	fi
	[ -n "$src" ] || ks_die "module $name not found for kernel $rel"
	case "$src" in
	*.ko)		cp "$src" "$dst/$name.ko" ;;
	*.ko.xz)	xz -dc "$src" > "$dst/$name.ko" ;;
	*.ko.zst)	zstd -qdc "$src" > "$dst/$name.ko" ;;
	*.ko.gz)	gzip -dc "$src" > "$dst/$name.ko" ;;
	esac
	echo "$name"
}

# The Debian architecture of a release (amd64, arm64).
ks_arch()
{
	"$KS_ROOT/scripts/kernel" arch "$1"
}

# Nested KVM is usable when the host's vendor module says so and /dev/kvm
# really creates a VM ($1: the compiled kvm-probe).  Sets KS_ACCEL, KS_CPU,
# KS_VENDOR (the guest's vendor module; empty where KVM is built in) and
# KS_ACCEL_WHY.  KVMSTATS_ACCEL=tcg|kvm forces a choice (kvm still has to
# work).  $2 is the guest's architecture (default amd64).
ks_pick_accel()
{
	local probe=$1 arch=${2:-amd64} nested="" vendor="" p

	if [ "$arch" = arm64 ]; then
		[ "${KVMSTATS_ACCEL:-tcg}" = tcg ] ||
			ks_die "KVMSTATS_ACCEL=$KVMSTATS_ACCEL: an arm64 guest runs only under TCG on this $(uname -m) host"
		# The virt board's guest gets EL2 (virtualization=on in
		# ks_qemu_arm64): KVM comes up inside in VHE mode.  Pointer
		# authentication with QEMU's own cheap algorithm (pauth-impdef)
		# instead of the architected QARMA: the same instructions, a
		# fraction of TCG's cost.  arm64 patches kernel text under
		# stop_machine(), with every CPU held, so multi-threaded TCG
		# has none of x86's int3 race (see below): one host thread a
		# vCPU unless KVMSTATS_TCG_THREAD says otherwise.
		KS_ACCEL=tcg,thread=${KVMSTATS_TCG_THREAD:-multi}
		KS_CPU=max,pauth-impdef=on
		KS_VENDOR=""
		KS_ACCEL_WHY="arm64 guest on an $(uname -m) host: TCG, EL2 for the guest's KVM"
		return 0
	fi

	for p in kvm_intel kvm_amd; do
		if [ -r "/sys/module/$p/parameters/nested" ]; then
			case "$(cat "/sys/module/$p/parameters/nested")" in
			Y|y|1)	nested=$p ;;
			esac
		fi
	done
	if [ "${KVMSTATS_ACCEL:-}" != tcg ] && [ -n "$nested" ] && "$probe" 2>/dev/null; then
		vendor=$nested
		KS_ACCEL=kvm
		KS_CPU=host
		KS_VENDOR=$vendor
		KS_ACCEL_WHY="host has $nested with nested=1 and a working /dev/kvm"
		return 0
	fi
	if [ "${KVMSTATS_ACCEL:-}" = kvm ]; then
		ks_die "KVMSTATS_ACCEL=kvm, but the host has no nested-capable KVM"
	fi
	# TCG's "max" CPU emulates AMD SVM, so the guest runs kvm-amd.
	# One host thread runs both guest vCPUs (thread=single): with QEMU's
	# multi-threaded TCG, a vCPU sometimes executes the int3 that kernel
	# text patching (static keys: KVM's, the scheduler's) leaves behind
	# for an instant, and the guest dies with "Oops: int3" (seen even at
	# the single flip ksg_pin makes at boot).  KVMSTATS_TCG_THREAD=multi
	# trades that for speed.
	KS_ACCEL=tcg,thread=${KVMSTATS_TCG_THREAD:-single}
	KS_CPU=${KVMSTATS_CPU:-max}
	KS_VENDOR=kvm_amd
	if [ "${KVMSTATS_ACCEL:-}" = tcg ]; then
		KS_ACCEL_WHY="forced by KVMSTATS_ACCEL=tcg"
	elif [ -z "$nested" ]; then
		KS_ACCEL_WHY="no kvm_intel/kvm_amd with nested=1 on the host"
	else
		KS_ACCEL_WHY="$nested has nested=1 but /dev/kvm cannot create a VM"
	fi
}
