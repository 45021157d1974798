/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Everything that differs between the kernels kvmstats builds against lives
 * here.  Kbuild force-includes this header in every module source and
 * passes the results of its feature tests (greps of the headers being built
 * against) as KVMSTATS_COMPAT_* macros; no other file looks at a version.
 */
#ifndef _KVMSTATS_COMPAT_H
#define _KVMSTATS_COMPAT_H

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

/*
 * The element type of KVM's descriptor tables.  Until upstream's "Remove
 * subtle 'struct kvm_stats_desc' pseudo-overlay" (in 6.12.83, not in 6.1)
 * the name lived in a wrapper, struct _kvm_stats_desc; since then
 * struct kvm_stats_desc carries it itself under __KERNEL__.  The bytes are
 * the same either way.
 */
#ifdef KVMSTATS_COMPAT_WRAPPED_DESC
#define kvmstats_kdesc _kvm_stats_desc
#else
#define kvmstats_kdesc kvm_stats_desc
#endif

/* struct fd became opaque, with fd_file() to reach its file, in 6.12. */
#ifndef KVMSTATS_COMPAT_HAVE_FD_FILE
#define fd_file(f) ((f).file)
#endif

#endif /* _KVMSTATS_COMPAT_H */
