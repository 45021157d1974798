// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVMSTATS_LIST_VCPUS: each vCPU's index and id, and the host thread that
 * last entered KVM_RUN on it, as the thread ids the test itself knows (the
 * main thread, vCPU threads, a thread a vCPU moved to).  A vCPU never run,
 * one whose thread exited, one whose thread another pid namespace cannot
 * see; answered while a vCPU spins in KVM_RUN (KVM's vcpu->mutex held);
 * E2BIG, by pidfd, and the request's errors.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "fault.h"
#include "kvmstats_util.h"

static int list(int dev, int pid, int fd, unsigned int flags,
		struct kvmstats_vcpu **v)
{
	int n = __kvmstats_list_vcpus(dev, pid, fd, flags, v);

	if (n < 0)
		tap_diag("LIST_VCPUS(pid %d, fd %d, flags %#x): %s", pid, fd,
			 flags, strerror(-n));
	return n;
}

/* A thread that runs vCPU @vcpu to its HLT, then waits to be told to end. */
struct mover {
	struct vcpu *vcpu;
	pthread_t thread;
	volatile pid_t tid;
	volatile int ran;
	int go[2];
};

static void *mover_fn(void *arg)
{
	struct mover *m = arg;
	char c;

	m->tid = sys_gettid();
	vcpu_run_to_hlt(m->vcpu);
	__atomic_store_n(&m->ran, 1, __ATOMIC_SEQ_CST);
	if (read(m->go[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static void mover_start(struct mover *m, struct vcpu *vcpu)
{
	m->vcpu = vcpu;
	m->ran = 0;
	if (pipe(m->go))
		tap_bail("pipe: %s", strerror(errno));
	vcpu_load_prog(vcpu, GUEST_HLT, 0);
	if (pthread_create(&m->thread, NULL, mover_fn, m))
		tap_bail("pthread_create failed");
	while (!__atomic_load_n(&m->ran, __ATOMIC_SEQ_CST))
		msleep(1);
}

static void mover_end(struct mover *m)
{
	if (write(m->go[1], "x", 1) != 1)
		tap_bail("write: %s", strerror(errno));
	pthread_join(m->thread, NULL);
	close(m->go[0]);
	close(m->go[1]);
}

/* In a new pid namespace, through the VM fd inherited from the parent. */
static int hidden_child(int vm_fd)
{
	struct kvmstats_vcpu *v = NULL;
	int dev, n, i, bad = 0;

	dev = kvmstats_open();
	n = list(dev, 0, vm_fd, 0, &v);
	for (i = 0; i < n; i++)
		if (v[i].tid || !(v[i].flags & KVMSTATS_VCPU_TID_HIDDEN))
			bad++;
	printf("%d %d\n", n, bad);
	fflush(stdout);
	free(v);
	return 0;
}

static void other_pidns(struct vm *vm)
{
	int out[2], status, n = -1, bad = -1;
	pid_t middle;
	char buf[64] = "";
	ssize_t len;

	if (pipe(out))
		tap_bail("pipe: %s", strerror(errno));
	middle = tap_fork();
	if (!middle) {
		pid_t gc;

		dup2(out[1], STDOUT_FILENO);
		if (unshare(CLONE_NEWPID))
			_exit(2);
		gc = fork();
		if (!gc)
			_exit(hidden_child(vm->fd));
		waitpid(gc, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
	}
	close(out[1]);
	len = read(out[0], buf, sizeof(buf) - 1);
	close(out[0]);
	waitpid(middle, &status, 0);
	if (len > 0)
		buf[len] = 0;
	if (sscanf(buf, "%d %d", &n, &bad) != 2)
		tap_diag("child said: %s", buf);
	tap_check(
		WIFEXITED(status) && !WEXITSTATUS(status) && n == 2 && bad == 0,
		"another pid namespace: both vCPUs listed, their threads HIDDEN with tid 0 (n %d, wrong %d)",
		n, bad);
}

int main(void)
{
	static const int ids[] = { 0, 7 };
	struct kvmstats_vcpu_list req;
	struct kvmstats_vcpu *v = NULL;
	struct mover m;
	struct vm *vm;
	int dev, n, pidfd;
	uint64_t t0;

	kvm_test_init();
	dev = kvmstats_open();
	vm = vm_create(2, ids);

	n = list(dev, 0, vm->fd, 0, &v);
	tap_eq(n, 2, "a VM of 2 vCPUs lists 2");
	if (n == 2) {
		tap_check(v[0].index == 0 && v[0].vcpu_id == 0 &&
				  v[1].index == 1 && v[1].vcpu_id == 7,
			  "indexes 0, 1 and vcpu ids 0, 7 (got %u/%u, %u/%u)",
			  v[0].index, v[0].vcpu_id, v[1].index, v[1].vcpu_id);
		tap_check(
			!v[0].tid && v[0].flags == KVMSTATS_VCPU_NEVER_RUN &&
				!v[1].tid &&
				v[1].flags == KVMSTATS_VCPU_NEVER_RUN,
			"before KVM_RUN: tid 0 and NEVER_RUN (flags %#x, %#x)",
			v[0].flags, v[1].flags);
	} else {
		tap_fail("indexes 0, 1 and vcpu ids 0, 7 (LIST_VCPUS: %d)", n);
		tap_fail("before KVM_RUN: tid 0 and NEVER_RUN (LIST_VCPUS: %d)",
			 n);
	}
	free(v);

	/* vCPU 0 run here, vCPU 1 spinning in a thread of its own. */
	vcpu_load_prog(vm->vcpus[0], GUEST_HLT, 0);
	vcpu_run_to_hlt(vm->vcpus[0]);
	vcpu_load_prog(vm->vcpus[1], GUEST_SPIN, 0);
	vcpu_thread_start(vm->vcpus[1]);
	vcpu_thread_wait_running(vm->vcpus[1]);

	t0 = now_ns();
	n = list(dev, getpid(), vm->fd, 0, &v);
	/* Fault 56-list-running: as if LIST_VCPUS failed here. */
	if (test_fault("56-list-running"))
		n = -EIO;
	tap_check(now_ns() - t0 < 5000000000ull,
		  "answered while vCPU 1 spins in KVM_RUN (%llu ms)",
		  (unsigned long long)((now_ns() - t0) / 1000000));
	if (n == 2) {
		tap_check(
			v[0].tid == sys_gettid() && !v[0].flags,
			"vCPU 0: the main thread that ran it (tid %d, want %d, flags %#x)",
			v[0].tid, sys_gettid(), v[0].flags);
		tap_check(
			v[1].tid == vm->vcpus[1]->tid && !v[1].flags,
			"vCPU 1: its vCPU thread (tid %d, want %d, flags %#x)",
			v[1].tid, vm->vcpus[1]->tid, v[1].flags);
	} else {
		tap_fail("vCPU 0: the main thread that ran it (LIST_VCPUS: %d)",
			 n);
		tap_fail("vCPU 1: its vCPU thread (LIST_VCPUS: %d)", n);
	}
	free(v);

	/* Room for one: E2BIG with the count. */
	memset(&req, 0, sizeof(req));
	req.fd = vm->fd;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_check(n == -E2BIG && req.nr == 2,
		  "no room: E2BIG and nr 2 (got %d, nr %u)", n, req.nr);

	/* By pidfd. */
	pidfd = pidfd_open_or_fail(getpid());
	n = list(dev, pidfd, vm->fd, KVMSTATS_FD_PIDFD, &v);
	tap_check(n == 2 && v[1].tid == vm->vcpus[1]->tid,
		  "by pidfd: the same threads (n %d)", n);
	free(v);
	close(pidfd);

	other_pidns(vm);

	/* vCPU 1's thread exits: EXITED, tid 0. */
	vcpu_thread_stop(vm->vcpus[1]);
	n = list(dev, 0, vm->fd, 0, &v);
	tap_check(
		n == 2 && !v[1].tid && v[1].flags == KVMSTATS_VCPU_TID_EXITED,
		"vCPU 1's thread has exited: tid 0, EXITED (tid %d, flags %#x)",
		n == 2 ? v[1].tid : -1, n == 2 ? v[1].flags : 0);
	free(v);

	/* vCPU 0 moves to another thread when that thread runs it. */
	mover_start(&m, vm->vcpus[0]);
	n = list(dev, 0, vm->fd, 0, &v);
	tap_check(
		n == 2 && v[0].tid == m.tid && m.tid != sys_gettid(),
		"vCPU 0 moved to the thread that ran it next (tid %d, want %d)",
		n == 2 ? v[0].tid : -1, m.tid);
	free(v);
	mover_end(&m);

	/* The request's own errors, then those of naming the VM. */
	memset(&req, 0, sizeof(req));
	req.fd = vm->fd;
	req.flags = 2;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_eq(n, -EINVAL, "unknown flag: EINVAL");
	req.flags = 0;
	req.reserved[1] = 1;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_eq(n, -EINVAL, "non-zero reserved: EINVAL");
	req.reserved[1] = 0;
	req.fd = 999;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_eq(n, -EBADF, "fd not open: EBADF");
	req.fd = dev;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_eq(n, -EINVAL, "own fd that is not a VM file: EINVAL");
	req.fd = vm->fd;
	req.pid = 0x3fffffff;
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS, (unsigned long)&req);
	tap_eq(n, -ESRCH, "no such process: ESRCH");
	n = __test_ioctl(dev, KVMSTATS_LIST_VCPUS,
			 (unsigned long)bad_address());
	tap_eq(n, -EFAULT, "bad pointer: EFAULT");

	vm_free(vm);
	close(dev);
	return tap_exit();
}
