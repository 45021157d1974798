/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Open files as /proc shows them, an oracle that does not ask kvmstats:
 * the anon-inode files in processes' fd tables, by the name their link
 * reads ("anon_inode:kvm-vm", "anon_inode:kvmstats-vcpu:3"), each file
 * counted once however many fds (dup(), fork(), SCM_RIGHTS, shared
 * tables) refer to it: kcmp(KCMP_FILE) orders and equates them.
 */
#ifndef KVMSTATS_TEST_PROC_FILES_H
#define KVMSTATS_TEST_PROC_FILES_H

#include <sys/types.h>

/*
 * The distinct files of process @pid whose link is "anon_inode:" followed
 * by @prefix (a family when it ends in ':' or '-', such as "kvm-vcpu:",
 * else exactly that name: "kvm-vm" is not "kvm-vm-stats"), each at its
 * lowest fd: those fds ascending in @fds (at most
 * @max of them).  Returns how many, or -errno.
 */
int proc_anon_fds(pid_t pid, const char *prefix, int *fds, int max);

/*
 * The distinct files whose link is "anon_inode:" followed by @prefix in the
 * fd table of every task in /proc (an open file no table holds, such as
 * one in flight in a socket, is not seen).  Returns how many, or -errno.
 */
long proc_anon_files_all(const char *prefix);

/* Every kvmstats stats file open anywhere: proc_anon_files_all("kvmstats-"). */
long proc_kvmstats_files(void);

#endif /* KVMSTATS_TEST_PROC_FILES_H */
