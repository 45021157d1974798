// SPDX-License-Identifier: GPL-2.0-only
/*
 * A VM given back while its VMM runs another VM (issue 26).
 *
 * One VMM thread, as in KVM's selftests and in VMMs that run micro-VMs on
 * the calling thread: it makes VM A (one vCPU spinning in the guest) and
 * VM B, lets a monitoring agent take a stats file of B and nothing else,
 * closes every fd of B and enters KVM_RUN on A's vCPU for RUN_S seconds,
 * until a timer signal it armed itself ends it.  B is then held by
 * kvmstats alone, and is given back while A runs.
 *
 * Before issue 26, kvmstats handed B's last reference to the thread that
 * created B with task work, which runs inside KVM_RUN at a guest exit
 * (xfer_to_guest_mode_work()), with A's vCPU loaded and its mutex held:
 * B was torn down inside A's run loop.  Here a kprobe event with a stack
 * trace on kvm_arch_destroy_vm() shows where B dies:
 *
 *  - B is destroyed while A runs, and kvm_arch_vcpu_ioctl_run is not on
 *    the stack, nor task work (but a file release's: __fput()), and it is
 *    not the VMM's thread;
 *  - A's KVM_RUN ends once, as its VMM asked: EINTR from its own timer,
 *    after RUN_S seconds, with the vCPU's exit reason KVM_EXIT_INTR;
 *  - the agent's file of B reads B frozen, the same twice.
 *
 * The harness's console scan and 99-dmesg see that the kernel said
 * nothing.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "kvmstats_util.h"
#include "trace_util.h"

#define RUN_S 4

struct report {
	int b_fd;	   /* B's VM fd, in the VMM */
	int runs;	   /* KVM_RUN calls on A */
	int err;	   /* errno of the last */
	int exit_reason;   /* A's run->exit_reason after it */
	uint64_t elapsed;  /* ns in KVM_RUN */
	int other_signals; /* signals but the timer's */
};

static volatile sig_atomic_t fired;

static void on_timer(int sig)
{
	(void)sig;
	fired = 1;
}

/* The VMM: one thread for everything. */
static void vmm_main(int sock, void *arg)
{
	struct report rep = { 0 };
	struct sigevent sev = { 0 };
	struct itimerspec its = { .it_value.tv_sec = RUN_S };
	struct sigaction sa = { .sa_handler = on_timer };
	struct vm *a, *b;
	timer_t timer;
	uint64_t t0;
	char go;
	long r;

	(void)arg;
	a = vm_create(1, NULL);
	vcpu_load_prog(a->vcpus[0], GUEST_SPIN, 0);
	b = vm_create(1, NULL);
	vcpu_load_prog(b->vcpus[0], GUEST_IO_COUNT, 3);
	vcpu_run_to_hlt(b->vcpus[0]);

	rep.b_fd = b->fd;
	if (write(sock, &rep.b_fd, sizeof(rep.b_fd)) != sizeof(rep.b_fd) ||
	    read(sock, &go, 1) != 1)
		_exit(2);

	/* The agent holds a stats file of B: let B go, run A. */
	vm_free(b);
	if (sigaction(SIGALRM, &sa, NULL))
		_exit(2);
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGALRM;
	sev._sigev_un._tid = sys_gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer))
		_exit(2);
	t0 = now_ns();
	if (timer_settime(timer, 0, &its, NULL))
		_exit(2);
	do {
		rep.runs++;
		r = __vcpu_run(a->vcpus[0]);
		if (r < 0 && !fired && r == -EINTR)
			rep.other_signals++;
	} while (!fired && rep.runs < 1000);
	rep.elapsed = now_ns() - t0;
	rep.err = r < 0 ? (int)-r : 0;
	rep.exit_reason = a->vcpus[0]->run->exit_reason;
	if (write(sock, &rep, sizeof(rep)) != sizeof(rep) ||
	    read(sock, &go, 1) != 1)
		_exit(2);
	vm_free(a);
	_exit(0);
}

int main(void)
{
	static struct stats_blob b1, b2;
	struct destroy d[3];
	struct report rep;
	int dev, sock, fd, n, r, status;
	pid_t vmm;

	kvm_test_init();
	dev = kvmstats_open();
	kvmstats_wait_settled(10000);
	r = destroy_trace_setup("kvmstats84");
	if (r) {
		tap_fail("a kprobe event on kvm_arch_destroy_vm (%s)",
			 strerror(-r));
		return tap_exit();
	}
	tap_pass("a kprobe event with stack traces on kvm_arch_destroy_vm");

	vmm = child_fork(&sock, vmm_main, NULL, false);
	if (read(sock, &rep.b_fd, sizeof(rep.b_fd)) != sizeof(rep.b_fd))
		tap_bail("the VMM made no VM");
	fd = kvmstats_get_stats_fd(dev, vmm, rep.b_fd, -1);
	stats_read_all(fd, &b1, "B, live");
	destroy_trace_clear();
	if (write(sock, "g", 1) != 1 ||
	    read(sock, &rep, sizeof(rep)) != sizeof(rep))
		tap_bail("the VMM did not report its run");

	/* A is still alive (its VMM waits for us): one destroy, B's. */
	destroy_trace_wait(d, 3, 1, 2000);
	msleep(200);
	n = destroy_trace_read(d, 3);
	if (tap_check(n == 1,
		      "B destroyed while its VMM ran A (%d destroys in %d s)",
		      n, RUN_S)) {
		destroy_diag(&d[0], "B");
		tap_check(
			destroy_stack_whole(&d[0]),
			"B's destroy has a whole stack: kvm_arch_destroy_vm and its callers (%d frames)",
			d[0].depth);
		tap_check(!destroy_on_stack(&d[0], "kvm_arch_vcpu_ioctl_run") &&
				  !destroy_on_stack(&d[0], "kvm_vcpu_ioctl"),
			  "B was not torn down inside A's KVM_RUN");
		tap_check(
			!destroy_in_foreign_task_work(&d[0]) && d[0].tid != vmm,
			"B was not destroyed by task work nor in the VMM's thread (%s-%d, VMM %d)",
			d[0].comm, d[0].tid, vmm);
	}
	tap_check(
		rep.runs == 1 && rep.err == EINTR &&
			rep.exit_reason == KVM_EXIT_INTR,
		"A's KVM_RUN ended once, as its VMM asked: EINTR from its timer (%d calls, errno %d, exit reason %d)",
		rep.runs, rep.err, rep.exit_reason);
	tap_check(
		rep.elapsed >= RUN_S * 1000000000ull && !rep.other_signals,
		"A ran %.2f s of the %d its VMM asked for, no other interruption (%d)",
		rep.elapsed / 1e9, RUN_S, rep.other_signals);

	stats_read_all(fd, &b1, "B, frozen");
	msleep(50);
	stats_read_all(fd, &b2, "B, frozen again");
	tap_check(stats_blob_equal(&b1, &b2, "B"),
		  "the agent's file of B reads B frozen");

	if (write(sock, "q", 1) != 1)
		tap_fail("the VMM's socket is broken");
	tap_check(waitpid(vmm, &status, 0) == vmm && WIFEXITED(status) &&
			  !WEXITSTATUS(status),
		  "the VMM exits with status 0 (%#x)", status);
	close(fd);
	close(sock);
	destroy_trace_teardown();
	close(dev);
	return tap_exit();
}
