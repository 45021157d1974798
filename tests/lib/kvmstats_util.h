/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * /dev/kvmstats calls, stats-file parsing, and child VMMs.
 *
 * Raw layer (__name) returns >= 0 or -errno; the asserting layer prints the
 * ioctl's name and errno as a "not ok" line and exits the test.
 */
#ifndef KVMSTATS_TEST_KVMSTATS_UTIL_H
#define KVMSTATS_TEST_KVMSTATS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/kvm.h>

#include "../../include/uapi/linux/kvmstats.h"
#include "kvm_util.h"

/* The encoded argument sizes must match the structs (as KVM selftests do). */
_Static_assert(_IOC_SIZE(KVMSTATS_LIST_VMS) == sizeof(struct kvmstats_vm_list),
	       "KVMSTATS_LIST_VMS size");
_Static_assert(_IOC_SIZE(KVMSTATS_GET_STATS_FD) ==
		       sizeof(struct kvmstats_fd_request),
	       "KVMSTATS_GET_STATS_FD size");
_Static_assert(_IOC_SIZE(KVMSTATS_READ_BATCH) ==
		       sizeof(struct kvmstats_read_batch),
	       "KVMSTATS_READ_BATCH size");
_Static_assert(_IOC_SIZE(KVMSTATS_LIST_PIDFD) ==
		       sizeof(struct kvmstats_pidfd_list),
	       "KVMSTATS_LIST_PIDFD size");
_Static_assert(_IOC_SIZE(KVMSTATS_LIST_VCPUS) ==
		       sizeof(struct kvmstats_vcpu_list),
	       "KVMSTATS_LIST_VCPUS size");
_Static_assert(_IOC_SIZE(KVMSTATS_GET_SCHEMA_FD) ==
		       sizeof(struct kvmstats_schema_request),
	       "KVMSTATS_GET_SCHEMA_FD size");

/* ---- the device ---- */
int __kvmstats_open(void); /* O_RDONLY | O_CLOEXEC */
int kvmstats_open(void);   /* fails the test if missing */
int __kvmstats_api_version(int dev, unsigned long arg);
int __kvmstats_get_stats_fd(int dev, pid_t pid, int fd, int vcpu);
int __kvmstats_get_stats_fd_req(int dev, struct kvmstats_fd_request *req);
int kvmstats_get_stats_fd(int dev, pid_t pid, int fd, int vcpu);
/*
 * LIST_VMS into a malloc'd list, growing it on E2BIG.  *out is the list,
 * to be freed by the caller; returns the number of VMs or -errno.
 */
int __kvmstats_list_vms(int dev, struct kvmstats_vm **out);
int kvmstats_list_vms(int dev, struct kvmstats_vm **out);
int __kvmstats_read_batch(int dev, struct kvmstats_read_op *ops, uint32_t nr);
/* GET_STATS_FD with KVMSTATS_FD_PIDFD. */
int __kvmstats_get_stats_fd_pidfd(int dev, int pidfd, int fd, int vcpu);
/* LIST_PIDFD into a malloc'd list, as __kvmstats_list_vms. */
int __kvmstats_list_pidfd(int dev, int pidfd, struct kvmstats_vm **out);
/*
 * KVMSTATS_LIST_VCPUS for (@pid, @fd) (@flags: 0 or KVMSTATS_FD_PIDFD, then
 * @pid is a pidfd): the number of vCPUs, their entries in a malloc'd *@out
 * (retrying on E2BIG), or -errno.
 */
int __kvmstats_list_vcpus(int dev, int pid, int fd, unsigned int flags,
			  struct kvmstats_vcpu **out);

/* ---- pidfds and the guest's test helper (/dev/ksg_test) ---- */
/* pidfd_open(2); -errno on failure. */
int __pidfd_open(pid_t pid, unsigned int flags);
int pidfd_open_or_fail(pid_t pid);
/* The helper's device, opened O_RDWR; fails the test if missing. */
int ksg_test_open(void);
/* A new impostor VM file (an anon-inode file named "kvm-vm"). */
int ksg_impostor(int ksg);

/* ---- stats files ---- */
#define STATS_FILE_MAX (64 * 1024)

/* The whole file, read with pread from offset 0 until EOF. */
struct stats_blob {
	size_t size;
	uint8_t data[STATS_FILE_MAX];
};

/* Returns the size read or -errno. */
ssize_t __stats_read_all(int fd, struct stats_blob *blob);
void stats_read_all(int fd, struct stats_blob *blob, const char *what);

/* Header and descriptor accessors on a blob. */
const struct kvm_stats_header *stats_header(const struct stats_blob *blob);
const char *stats_id(const struct stats_blob *blob);
const struct kvm_stats_desc *stats_desc(const struct stats_blob *blob, int i);
const struct kvm_stats_desc *stats_find(const struct stats_blob *blob,
					const char *name);
/* Value @idx (bucket) of stat @name, -1ull if not found. */
uint64_t stats_value(const struct stats_blob *blob, const char *name, int idx);
/* Read a stat by name straight from a stats fd (parses the fd's header). */
int __stats_read_stat(int fd, const char *name, uint64_t *val);
uint64_t stats_read_stat(int fd, const char *name);
/*
 * Poll stat @name of @fd every 10 ms until it exceeds @above or @timeout_ms
 * pass; returns the last value read.  For "it grows" checks on a busy TCG
 * host, where a vCPU thread may not run for a while: the check stays as
 * strict, only the wait is bounded instead of fixed.
 */
uint64_t stats_wait_above(int fd, const char *name, uint64_t above,
			  unsigned int timeout_ms);

/*
 * Checks the upstream format invariants (kvm_binary_stats_test) on a blob;
 * each problem is printed as a diagnostic.  Returns true if all hold.
 */
bool stats_check_format(const struct stats_blob *blob, const char *what);

/*
 * Compares two blobs byte for byte; on a difference prints the first
 * differing offset, the block it is in and, for data, the stat's name.
 */
bool stats_blob_equal(const struct stats_blob *a, const struct stats_blob *b,
		      const char *what);
/* Reads both fds and compares them as a check line "<what>". */
bool stats_fds_identical(int ours, int native, const char *what);

/* ---- child VMMs ---- */
struct child_vmm_info {
	pid_t pid; /* as the parent's pid namespace numbers it */
	int vm_fd; /* the VM fd's number in the child */
	int nr_vcpus;
	int vcpu_fds[VM_MAX_VCPUS];
	int vcpu_ids[VM_MAX_VCPUS];
	pid_t vm_creator_tid;
};

/*
 * Fork a child that runs @fn(@sock, @arg), which must not return, on its
 * end of a stream socketpair; returns its pid and sets *@sock to ours.
 * With @keep_none the child first closes every other fd it inherited (the
 * device, the test's stats fds), so that it holds nothing of the test's.
 */
pid_t child_fork(int *sock, void (*fn)(int sock, void *arg), void *arg,
		 bool keep_none);
/* Send child @pid the one-byte command @cmd on @sock; wait for one byte. */
void child_send(int sock, pid_t pid, char cmd);

struct child_vmm {
	struct child_vmm_info info;
	int sock; /* parent's end of the socketpair */
	/* Received from the child with SCM_RIGHTS: */
	int vm_fd;	     /* a copy of the child's VM fd */
	int native_vm_stats; /* the child's KVM_GET_STATS_FD on the VM */
	int native_vcpu_stats[VM_MAX_VCPUS];
	bool running; /* vCPU threads running in the child */
};

/*
 * Forks a child that creates a VM with @nr_vcpus vCPUs (ids @ids, or
 * 0..n-1), runs each to HLT after @io_exits port writes (0: just HLT),
 * opens native stats fds, sends them and a copy of its VM fd to the parent,
 * then serves commands until told to exit.
 */
void child_vmm_start(struct child_vmm *c, int nr_vcpus, const int *ids,
		     unsigned int io_exits);
/* Commands; each waits for the child's acknowledgement. */
void child_vmm_run_io_loop(struct child_vmm *c); /* threads, forever */
void child_vmm_spin(struct child_vmm *c);	 /* threads in jmp . */
void child_vmm_stop_vcpus(struct child_vmm *c);
/*
 * The child closes every fd of its VM (vm_free()) and lives on, its only
 * thread back in read(2) on the socket, asleep; it then only exits.
 */
void child_vmm_free_vm(struct child_vmm *c);
/* Tells the child to exit and reaps it; returns its exit status. */
int child_vmm_exit(struct child_vmm *c);
/* SIGKILLs the child and reaps it. */
void child_vmm_kill(struct child_vmm *c);
/* Closes the fds received from the child. */
void child_vmm_close_fds(struct child_vmm *c);

/*
 * Run @cmd with /bin/sh, its stdout into @buf (NUL-terminated, cut at
 * @size - 1 bytes); its exit status, 128 + the signal that killed it, or
 * -1 if it could not be started.
 */
int run_capture(const char *cmd, char *buf, size_t size);

/* ---- fd passing ---- */
int send_fds(int sock, const void *data, size_t len, const int *fds, int nr);
/* Returns the number of fds received (<= max) or -errno. */
int recv_fds(int sock, void *data, size_t len, int *fds, int max);

/*
 * A page-sized address range the process cannot touch: a PROT_NONE
 * reservation that nothing else will ever be mapped into.
 */
void *bad_address(void);

#endif /* KVMSTATS_TEST_KVMSTATS_UTIL_H */
