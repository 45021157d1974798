/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Everything that differs between the kernels kvmstats builds against lives
 * here.  Kbuild passes the results of its feature tests (greps of the
 * headers being built against) as KVMSTATS_COMPAT_* macros, which only this
 * header reads; no file looks at a version number.
 */
#ifndef _KVMSTATS_COMPAT_H
#define _KVMSTATS_COMPAT_H

#include <linux/file.h>
#include <linux/kvm_host.h>
#include <linux/kvm_types.h>
#include <linux/magic.h>
#include <linux/pid.h>
#include <linux/types.h>

/*
 * What the module cannot do without (KVM, with binary stats) is refused by
 * Kbuild with the reason; this only catches a build that bypassed it.
 */
#if !IS_ENABLED(CONFIG_KVM)
#error "kvmstats: this kernel has no KVM (see Kbuild)"
#endif

/*
 * The element type of the descriptor tables, shaped the way the kernel's
 * STATS_DESC_*() initializers expect.  Until upstream's "Remove subtle
 * 'struct kvm_stats_desc' pseudo-overlay" (in 6.12.83, not in 6.1) they
 * initialize a wrapper, { desc, name }; since then a plain
 * struct kvm_stats_desc, which carries its name itself under __KERNEL__.
 * The kernel's own wrapper embeds a struct with a flexible array, so the
 * wrapper is restated here without one.  The bytes are the same either way.
 */
#ifdef KVMSTATS_COMPAT_WRAPPED_DESC
struct kvmstats_kdesc {
	struct {
		__u32 flags;
		__s16 exponent;
		__u16 size;
		__u32 offset;
		__u32 bucket_size;
	} desc;
	char name[KVM_STATS_NAME_SIZE];
};
#else
#define kvmstats_kdesc kvm_stats_desc
#endif

/* struct fd became opaque, with fd_file() to reach its file, in 6.12. */
#ifndef KVMSTATS_COMPAT_HAVE_FD_FILE
#define fd_file(f) ((f).file)
#endif

/*
 * The thread that last ran a vCPU, with a reference (or NULL): vcpu->pid
 * is RCU-protected until 7.x, where KVM guards it with an rwlock instead
 * (held for writing only to swap the pointer).
 */
#ifdef KVMSTATS_COMPAT_VCPU_PID_LOCK
static inline struct pid *kvmstats_vcpu_get_pid(struct kvm_vcpu *vcpu)
{
	struct pid *pid;

	read_lock(&vcpu->pid_lock);
	pid = get_pid(vcpu->pid);
	read_unlock(&vcpu->pid_lock);
	return pid;
}
#else
static inline struct pid *kvmstats_vcpu_get_pid(struct kvm_vcpu *vcpu)
{
	struct pid *pid;

	rcu_read_lock();
	pid = get_pid(rcu_dereference(vcpu->pid));
	rcu_read_unlock();
	return pid;
}
#endif

/* User workers (vhost and io_uring threads) came in 6.4: none before. */
#ifndef PF_USER_WORKER
#define PF_USER_WORKER 0
#endif

/*
 * After a reader's copy of a data block, before it checks the sequence
 * again: nothing where stores become visible to all other CPUs at once
 * (multi-copy atomic: x86, arm64, s390, RISC-V), where smp_rmb() in
 * read_seqcount_retry() orders the check after the copy for every
 * observer; a full barrier elsewhere (POWER), or a reader could see a
 * vCPU's store that the freezing CPU does not (vm.c).
 */
#if defined(CONFIG_X86) || defined(CONFIG_ARM64) || defined(CONFIG_S390) || \
	defined(CONFIG_RISCV)
#define kvmstats_read_done() do { } while (0)
#else
/* Not multi-copy atomic: the copy before the check, for every CPU. */
#define kvmstats_read_done() smp_mb()
#endif

/* pidfs, where pidfds live since 6.9; its magic is uapi. */
#ifndef PID_FS_MAGIC
#define PID_FS_MAGIC 0x50494446
#endif

#endif /* _KVMSTATS_COMPAT_H */
