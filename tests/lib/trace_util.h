/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where KVM destroys a VM, seen from outside kvmstats: a kprobe event on
 * kvm_arch_destroy_vm() with a stack trace trigger.  Each destroy is
 * recorded with the task that ran it and the kernel stack it ran on, so a
 * test can tell the module's worker from a VMM's thread, and a teardown
 * inside KVM_RUN (kvm_arch_vcpu_ioctl_run on the stack) from one outside.
 * A second event counts calls of kthread_use_mm(): a kernel thread
 * borrowing an address space, as kvmstats once did to destroy a VM.
 */
#ifndef KVMSTATS_TEST_TRACE_UTIL_H
#define KVMSTATS_TEST_TRACE_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

#define TRACE_STACK_MAX 48

struct destroy {
	pid_t tid;
	int cpu;
	char comm[32];
	int depth;
	char stack[TRACE_STACK_MAX][64]; /* innermost first */
};

/*
 * Create the kprobe events @group/destroy on kvm_arch_destroy_vm, with a
 * stack trace on each hit, and @group/borrow on kthread_use_mm, in tracefs
 * (mounted if debugfs is off); an event of that name left by an earlier
 * run is replaced.  Returns 0 or -errno.
 */
int destroy_trace_setup(const char *group);
void destroy_trace_teardown(void);
/* Forget the events recorded so far. */
void destroy_trace_clear(void);
/*
 * The destroys recorded since the last clear: fills at most @max of @d and
 * returns how many there are (which may be more than @max).
 */
int destroy_trace_read(struct destroy *d, int max);
/* The same, waiting up to @timeout_ms until there are @want. */
int destroy_trace_wait(struct destroy *d, int max, int want,
		       unsigned int timeout_ms);
/* kthread_use_mm() calls recorded since the last clear, or -errno. */
int destroy_trace_borrows(void);
/* Is @func on @d's stack? */
bool destroy_on_stack(const struct destroy *d, const char *func);
/*
 * Does @d's stack go past the probe into the callers, so that what is not
 * on it was not there: kvm_arch_destroy_vm() itself and at least two
 * frames below it (kvm_destroy_vm(), inlined into kvm_put_kvm() on some
 * builds, and whoever dropped the last reference).  A stack that stops at
 * the probe's trampoline would pass every "not on the stack".
 */
bool destroy_stack_whole(const struct destroy *d);
/*
 * Did @d run in task work other than a file's release (__fput(), which
 * runs a process's own close in its own task work)?  kvmstats once queued
 * task work of its own on VMM threads to destroy VMs there.
 */
bool destroy_in_foreign_task_work(const struct destroy *d);
/* Print @d's task and stack as TAP diagnostics, prefixed with @what. */
void destroy_diag(const struct destroy *d, const char *what);

#endif /* KVMSTATS_TEST_TRACE_UTIL_H */
