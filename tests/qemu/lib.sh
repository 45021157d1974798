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

# Copy module $2 (file name without .ko) of kernel $1 to directory $3 as an
# uncompressed .ko, whichever compression Debian used for it.  With a
# fourth argument "optional", a kernel without the module is no error.
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
}

# Nested KVM is usable when the host's vendor module says so and /dev/kvm
# really creates a VM ($1: the compiled kvm-probe).  Sets KS_ACCEL, KS_CPU,
# KS_VENDOR (the guest's vendor module) and KS_ACCEL_WHY.
# KVMSTATS_ACCEL=tcg|kvm forces a choice (kvm still has to work).
ks_pick_accel()
{
	local probe=$1 nested="" vendor="" p

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
	KS_CPU=max
	KS_VENDOR=kvm_amd
	if [ "${KVMSTATS_ACCEL:-}" = tcg ]; then
		KS_ACCEL_WHY="forced by KVMSTATS_ACCEL=tcg"
	elif [ -z "$nested" ]; then
		KS_ACCEL_WHY="no kvm_intel/kvm_amd with nested=1 on the host"
	else
		KS_ACCEL_WHY="$nested has nested=1 but /dev/kvm cannot create a VM"
	fi
}
