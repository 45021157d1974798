// SPDX-License-Identifier: GPL-2.0-only
/*
 * Every errno of KVMSTATS_GET_STATS_FD, KVMSTATS_GET_API_VERSION and the
 * generic ioctl checks, and the order in which GET_STATS_FD applies them:
 * request fields, then pid (or pidfd), then fd, then vCPU.  Files that
 * only look like VM files (a memfd or a file named kvm-vm, the guest
 * helper's anonymous-inode "kvm-vm" with a poisoned private_data) are
 * refused like any other non-VM file.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

static int dev;

static const char *errname(int e)
{
	switch (e) {
	case 0:
		return "success";
	case EINVAL:
		return "EINVAL";
	case ESRCH:
		return "ESRCH";
	case EBADF:
		return "EBADF";
	case ENOENT:
		return "ENOENT";
	case EFAULT:
		return "EFAULT";
	case ENOTTY:
		return "ENOTTY";
	case E2BIG:
		return "E2BIG";
	case EIO:
		return "EIO";
	case EPERM:
		return "EPERM";
	case EACCES:
		return "EACCES";
	default:
		return strerror(e);
	}
}

static void expect_req(struct kvmstats_fd_request *req, int want,
		       const char *what)
{
	int r = __kvmstats_get_stats_fd_req(dev, req);

	if (r >= 0)
		close(r);
	tap_check(r == -want, "GET_STATS_FD %s: %s (got %s)", what,
		  errname(want), r >= 0 ? "an fd" : errname(-r));
}

static void expect(pid_t pid, int fd, int vcpu, int want, const char *what)
{
	struct kvmstats_fd_request req = { .pid = pid, .fd = fd, .vcpu = vcpu };

	expect_req(&req, want, what);
}

static void expect_pidfd(int pidfd, int fd, int vcpu, int want,
			 const char *what)
{
	struct kvmstats_fd_request req = {
		.pid = pidfd,
		.fd = fd,
		.vcpu = vcpu,
		.flags = KVMSTATS_FD_PIDFD,
	};
	char buf[160];

	snprintf(buf, sizeof(buf), "(pidfd) %s", what);
	expect_req(&req, want, buf);
}

/*
 * KVMSTATS_FD_PIDFD: the pidfd's own errors (not open: EBADF, not a
 * pidfd: EINVAL, its process gone: ESRCH) come before the fd's, and a
 * pidfd of a live process addresses it like its pid.
 */
static void check_pidfd(pid_t me, struct vm *vm, int pipe_rd, int unused)
{
	int self = pidfd_open_or_fail(me), native, ours, memfd, zpidfd, r;
	pid_t zombie;
	siginfo_t si;

	ours = __kvmstats_get_stats_fd_pidfd(dev, self, vm->fd, -1);
	native = vm_get_stats_fd(vm);
	tap_check(ours >= 0, "(pidfd) own pidfd + VM fd gives an fd (%s)",
		  ours >= 0 ? "ok" : errname(-ours));
	if (ours >= 0)
		stats_fds_identical(
			ours, native,
			"(pidfd) that VM file is identical to native");
	close(native);
	ours = __kvmstats_get_stats_fd_pidfd(dev, self, vm->fd, 1);
	native = vcpu_get_stats_fd(vm->vcpus[1]);
	if (ours >= 0)
		stats_fds_identical(
			ours, native,
			"(pidfd) vCPU 1 file is identical to native");
	else
		tap_check(0, "(pidfd) own pidfd + vcpu 1 gives an fd (%s)",
			  errname(-ours));
	close(native);

	memfd = memfd_create("pidfd", MFD_CLOEXEC);
	expect_pidfd(unused, vm->fd, -1, EBADF, "an unused fd as the pidfd");
	expect_pidfd(-1, vm->fd, -1, EBADF, "-1 as the pidfd");
	expect_pidfd(pipe_rd, vm->fd, -1, EINVAL, "a pipe as the pidfd");
	expect_pidfd(memfd, vm->fd, -1, EINVAL, "a memfd as the pidfd");
	expect_pidfd(vm->fd, vm->fd, -1, EINVAL, "the VM fd as the pidfd");
	expect_pidfd(dev, vm->fd, -1, EINVAL, "/dev/kvmstats as the pidfd");
	expect_pidfd(self, unused, -1, EBADF, "own pidfd + an unused fd");
	expect_pidfd(self, pipe_rd, -1, EINVAL, "own pidfd + a pipe");
	expect_pidfd(self, vm->fd, 7, ENOENT, "own pidfd + vcpu 7");

	/* A process that exited: a zombie, then reaped. */
	zombie = tap_fork();
	if (!zombie) {
		pause();
		_exit(0);
	}
	zpidfd = pidfd_open_or_fail(zombie);
	kill(zombie, SIGKILL);
	waitid(P_PID, zombie, &si, WEXITED | WNOWAIT);
	expect_pidfd(zpidfd, vm->fd, -1, ESRCH, "pidfd of a zombie");
	waitpid(zombie, NULL, 0);
	expect_pidfd(zpidfd, vm->fd, -1, ESRCH, "pidfd of a reaped process");

	/* Order: request fields, then the pidfd, then the fd, then vCPU. */
	{
		struct kvmstats_fd_request req = {
			.pid = unused,
			.fd = -1,
			.vcpu = -2,
			.flags = KVMSTATS_FD_PIDFD,
		};

		expect_req(&req, EINVAL,
			   "(pidfd) vcpu -2 + unused pidfd: request first");
		req.vcpu = 99;
		req.flags |= 4;
		expect_req(&req, EINVAL,
			   "(pidfd) flag 4 + unused pidfd: request first");
	}
	expect_pidfd(unused, pipe_rd, 99, EBADF,
		     "unused pidfd + pipe + vcpu 99: pidfd first");
	expect_pidfd(memfd, -1, 99, EINVAL,
		     "memfd as pidfd + fd -1: the pidfd's type before the fd");
	expect_pidfd(zpidfd, -1, 99, ESRCH,
		     "reaped pidfd + fd -1: the process before the fd");
	expect_pidfd(self, -1, 99, EBADF, "own pidfd + fd -1: fd before vcpu");

	/* A thread's pidfd (PIDFD_THREAD, Linux 6.9) stands for its process. */
	r = __pidfd_open(gettid(), O_EXCL /* PIDFD_THREAD */);
	if (r >= 0) {
		ours = __kvmstats_get_stats_fd_pidfd(dev, r, vm->fd, -1);
		tap_check(ours >= 0,
			  "(pidfd) a thread pidfd of this process works (%s)",
			  ours >= 0 ? "ok" : errname(-ours));
		if (ours >= 0)
			close(ours);
		close(r);
	} else {
		tap_diag(
			"pidfd_open(PIDFD_THREAD): %s: this kernel predates thread pidfds",
			errname(-r));
	}
	close(zpidfd);
	close(memfd);
	close(self);
}

static pid_t a_pid_that_is_free(void)
{
	pid_t pid = fork();

	if (!pid)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid; /* reaped: free until the pid space wraps */
}

static void *idle_thread(void *arg)
{
	pid_t *tid = arg;

	__atomic_store_n(tid, sys_gettid(), __ATOMIC_SEQ_CST);
	pause();
	return NULL;
}

int main(void)
{
	struct kvmstats_fd_request req;
	int pipefd[2], native, ours, kvmfd, unused, regfile;
	pid_t me = getpid(), freepid, zombie, thread_tid = 0;
	struct vm *vm, *vm0;
	pthread_t thr;
	long r;

	kvm_test_init();
	dev = kvmstats_open();
	vm = vm_create(2, (const int[]){ 0, 5 });
	vm0 = vm_create(0, NULL);

	/* GET_API_VERSION */
	tap_eq(__kvmstats_api_version(dev, 0), KVMSTATS_API_VERSION,
	       "GET_API_VERSION returns %d", KVMSTATS_API_VERSION);
	r = __kvmstats_api_version(dev, 1);
	tap_check(r == -EINVAL,
		  "GET_API_VERSION with a non-zero argument: EINVAL (got %s)",
		  r >= 0 ? "success" : errname(-r));

	/* Unknown commands. */
	r = __test_ioctl(dev, _IO(KVMSTATS_IO, 0x7f), 0);
	tap_check(r == -ENOTTY, "unknown kvmstats command: ENOTTY (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, _IOW(KVMSTATS_IO, 0x02, struct kvmstats_vm), 0);
	tap_check(r == -ENOTTY,
		  "GET_STATS_FD number with the wrong size: ENOTTY (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, _IOR(KVMSTATS_IO, 0x00, int), 0);
	tap_check(
		r == -ENOTTY,
		"GET_API_VERSION number with a direction and size: ENOTTY (got %s)",
		r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, KVM_GET_API_VERSION, 0);
	tap_check(r == -ENOTTY,
		  "KVM_GET_API_VERSION on /dev/kvmstats: ENOTTY (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, KVM_GET_STATS_FD, 0);
	tap_check(r == -ENOTTY,
		  "KVM_GET_STATS_FD on /dev/kvmstats: ENOTTY (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(vm->fd, KVMSTATS_GET_STATS_FD, 0);
	tap_diag("KVMSTATS_GET_STATS_FD sent to a KVM VM fd: %s (KVM's answer)",
		 r >= 0 ? "success" : errname(-r));

	/* Sanity: the valid requests work. */
	ours = __kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	tap_check(ours >= 0,
		  "valid request (pid 0, VM fd, vcpu -1) gives an fd");
	if (ours >= 0)
		close(ours);
	ours = __kvmstats_get_stats_fd(dev, me, vm->fd, 1);
	tap_check(ours >= 0,
		  "valid request (own pid, VM fd, vcpu 1) gives an fd");

	/* EINVAL: request fields. */
	memset(&req, 0, sizeof(req));
	req.fd = vm->fd;
	req.vcpu = -1;
	req.flags = 2;
	expect_req(&req, EINVAL, "flags 2 (the first undefined bit)");
	req.flags = 0x80000000;
	expect_req(&req, EINVAL, "flags 0x80000000");
	req.flags = ~KVMSTATS_FD_PIDFD;
	expect_req(&req, EINVAL, "every undefined flag");
	req.flags = 0;
	req.reserved[0] = 1;
	expect_req(&req, EINVAL, "reserved[0] 1");
	req.reserved[0] = 0;
	req.reserved[1] = 1ull << 63;
	expect_req(&req, EINVAL, "reserved[1] 1<<63");
	expect(0, vm->fd, -2, EINVAL, "vcpu -2");
	expect(0, vm->fd, INT_MIN, EINVAL, "vcpu INT_MIN");

	/* ESRCH */
	freepid = a_pid_that_is_free();
	expect(freepid, vm->fd, -1, ESRCH, "pid of a reaped process");
	expect(4194304 + 1, 3, -1, ESRCH, "pid above pid_max");
	pthread_create(&thr, NULL, idle_thread, &thread_tid);
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		msleep(1);
	expect(thread_tid, vm->fd, -1, ESRCH,
	       "tid of a non-leader thread of this process");
	{
		/* A zombie that held a VM fd as the same number. */
		int sv[2];
		char c;

		if (pipe(sv))
			tap_bail("pipe: %s", strerror(errno));
		zombie = tap_fork();
		if (!zombie) {
			struct vm *cvm = vm_create(1, NULL);

			if (dup2(cvm->fd, 200) < 0)
				_exit(1);
			c = 'x';
			if (write(sv[1], &c, 1) != 1)
				_exit(1);
			_exit(0);
		}
		close(sv[1]);
		if (read(sv[0], &c, 1) != 1)
			tap_diag("zombie child did not report");
		close(sv[0]);
		/* Wait for it to exit without reaping it. */
		{
			siginfo_t si;

			waitid(P_PID, zombie, &si, WEXITED | WNOWAIT);
		}
		expect(zombie, 200, -1, ESRCH,
		       "pid of an exited, unreaped process (zombie)");
		expect(zombie, 200, 0, ESRCH, "zombie, vcpu 0");
		waitpid(zombie, NULL, 0);
		expect(zombie, 200, -1, ESRCH,
		       "pid of the same process once reaped");
	}
	expect(-5, vm->fd, -1, ESRCH, "pid -5");

	/* EBADF */
	expect(0, -1, -1, EBADF, "fd -1");
	expect(0, INT_MIN, -1, EBADF, "fd INT_MIN");
	unused = 900;
	while (fcntl(unused, F_GETFD) != -1)
		unused++;
	expect(0, unused, -1, EBADF, "an unused fd number (pid 0)");
	expect(me, unused, -1, EBADF, "an unused fd number (own pid)");
	expect(0, 1 << 30, -1, EBADF, "fd 1<<30");

	/* EINVAL: not a VM file. */
	if (pipe(pipefd))
		tap_bail("pipe: %s", strerror(errno));
	kvmfd = vm->kvm_fd;
	native = vm_get_stats_fd(vm);
	regfile = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	expect(0, vm->vcpus[0]->fd, -1, EINVAL, "a vCPU fd");
	expect(0, vm->vcpus[0]->fd, 0, EINVAL, "a vCPU fd, vcpu 0");
	expect(0, kvmfd, -1, EINVAL, "a /dev/kvm fd");
	expect(0, native, -1, EINVAL, "a native stats fd");
	if (ours >= 0)
		expect(0, ours, -1, EINVAL, "a kvmstats stats fd");
	expect(0, pipefd[0], -1, EINVAL, "a pipe");
	expect(0, dev, -1, EINVAL, "the /dev/kvmstats fd");
	expect(0, regfile, -1, EINVAL, "a procfs file");

	/* EINVAL: files that only look like VM files. */
	{
		int ksg = ksg_test_open();
		int impostor = ksg_impostor(ksg);
		int memfd = memfd_create("kvm-vm", MFD_CLOEXEC);
		int named =
			open("/tmp/kvm-vm", O_RDWR | O_CREAT | O_CLOEXEC, 0600);

		expect(0, impostor, -1, EINVAL,
		       "an anonymous-inode file named kvm-vm (the helper's impostor)");
		expect(0, impostor, 0, EINVAL, "the impostor, vcpu 0");
		expect(me, impostor, -1, EINVAL, "the impostor, own pid");
		expect(0, memfd, -1, EINVAL, "a memfd named kvm-vm");
		expect(0, named, -1, EINVAL, "a regular file named kvm-vm");
		close(impostor);
		close(memfd);
		close(named);
		unlink("/tmp/kvm-vm");
		close(ksg);
	}

	/* ENOENT */
	expect(0, vm->fd, 2, ENOENT, "vcpu == nr_vcpus (2)");
	expect(0, vm->fd, 5, ENOENT, "vcpu 5: the vcpu_id, not an index");
	expect(0, vm->fd, INT_MAX, ENOENT, "vcpu INT_MAX");
	expect(0, vm0->fd, 0, ENOENT, "vcpu 0 of a VM without vCPUs");
	ours = __kvmstats_get_stats_fd(dev, 0, vm0->fd, -1);
	tap_check(ours >= 0, "VM without vCPUs: its VM file is available");
	if (ours >= 0)
		close(ours);

	/* Precedence: request fields, then pid, then fd, then vCPU. */
	memset(&req, 0, sizeof(req));
	req.pid = freepid;
	req.fd = -1;
	req.vcpu = 99;
	req.flags = 2;
	expect_req(&req, EINVAL, "flags 2 + free pid + fd -1: request first");
	req.flags = 0;
	req.reserved[1] = 1;
	expect_req(&req, EINVAL, "reserved + free pid + fd -1: request first");
	req.reserved[1] = 0;
	expect(freepid, -1, -2, EINVAL,
	       "vcpu -2 + free pid + fd -1: request first");
	expect(freepid, -1, 99, ESRCH,
	       "free pid + fd -1 + vcpu 99: pid before fd");
	expect(freepid, pipefd[0], 99, ESRCH,
	       "free pid + pipe + vcpu 99: pid before fd");
	expect(thread_tid, -1, 99, ESRCH, "thread tid + fd -1: pid before fd");
	expect(0, -1, 99, EBADF, "fd -1 + vcpu 99: fd before vcpu");
	expect(0, unused, 99, EBADF, "unused fd + vcpu 99: fd before vcpu");
	expect(0, pipefd[0], 99, EINVAL, "pipe + vcpu 99: fd type before vcpu");
	expect(0, vm->vcpus[1]->fd, 99, EINVAL,
	       "vCPU fd + vcpu 99: fd type before vcpu");

	check_pidfd(me, vm, pipefd[0], unused);

	/* EFAULT */
	r = __test_ioctl(dev, KVMSTATS_GET_STATS_FD, 0);
	tap_check(r == -EFAULT,
		  "GET_STATS_FD with a NULL argument: EFAULT (got %s)",
		  r >= 0 ? "an fd" : errname(-r));
	r = __test_ioctl(dev, KVMSTATS_GET_STATS_FD,
			 (unsigned long)bad_address());
	tap_check(r == -EFAULT,
		  "GET_STATS_FD with an unmapped argument: EFAULT (got %s)",
		  r >= 0 ? "an fd" : errname(-r));
	{
		/* A request that runs off the end of a readable page. */
		uint8_t *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct kvmstats_fd_request *tail;

		mprotect(p + 4096, 4096, PROT_NONE);
		tail = (void *)(p + 4096 - 12);
		memset(tail, 0, 12);
		tail->fd = vm->fd;
		tail->vcpu = -1;
		r = __test_ioctl(dev, KVMSTATS_GET_STATS_FD,
				 (unsigned long)tail);
		tap_check(
			r == -EFAULT,
			"GET_STATS_FD with a request straddling into an unmapped page: EFAULT (got %s)",
			r >= 0 ? "an fd" : errname(-r));
		if (r >= 0)
			close(r);
		munmap(p, 8192);
	}
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, 0);
	tap_check(r == -EFAULT,
		  "LIST_VMS with a NULL argument: EFAULT (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)bad_address());
	tap_check(r == -EFAULT,
		  "LIST_VMS with an unmapped argument: EFAULT (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, 0);
	tap_check(r == -EFAULT,
		  "READ_BATCH with a NULL argument: EFAULT (got %s)",
		  r >= 0 ? "success" : errname(-r));
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH,
			 (unsigned long)bad_address());
	tap_check(r == -EFAULT,
		  "READ_BATCH with an unmapped argument: EFAULT (got %s)",
		  r >= 0 ? "success" : errname(-r));

	/* Nothing above leaked a usable fd or broke the device. */
	stats_fds_identical(
		kvmstats_get_stats_fd(dev, 0, vm->fd, -1), native,
		"after all error cases the VM file is still identical to native");

	close(native);
	close(regfile);
	close(pipefd[0]);
	close(pipefd[1]);
	vm_free(vm);
	vm_free(vm0);
	close(dev);
	return tap_exit();
}
