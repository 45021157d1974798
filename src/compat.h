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
#include <linux/kvm_types.h>
#include <linux/types.h>

/*
 * The supported window is enforced by Kbuild (the 6.1 and 6.12 series) and
 * dkms.conf; what is left to check is the configuration.
 */
#if !defined(CONFIG_X86_64)
#error "kvmstats: only x86-64 hosts are supported"
#endif
#if !IS_ENABLED(CONFIG_KVM)
#error "kvmstats: this kernel is built without KVM"
#endif
/* LIST_VMS relies on KVM's MMU notifier to skip non-VMM processes. */
#if !IS_ENABLED(CONFIG_MMU_NOTIFIER)
#error "kvmstats: this kernel is built without MMU notifiers"
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

#endif /* _KVMSTATS_COMPAT_H */
