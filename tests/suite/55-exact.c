// SPDX-License-Identifier: GPL-2.0-only
/*
 * Naming VMs exactly.
 *
 *  - KVMSTATS_LIST_PIDFD lists one process's VMs as LIST_VMS does, and a
 *    pidfd names a process for good: after its pid is reused (forced with
 *    clone3()'s set_tid in a pid namespace of our own), asking by pid reaches the
 *    newcomer's VM, asking by the old pidfd reaches nothing (ESRCH).
 *  - LIST_VMS lists a VM once even when other processes share its
 *    creator's address space: a vfork() child (what posix_spawn makes)
 *    holding copies of the parent's fds, and a clone(CLONE_VM) sibling.
 *  - A process whose thread-group leader is on its way out, held by the
 *    guest helper between exit_mm() and exit_files() (the leader then has
 *    a file table and no address space) while another thread runs the VM,
 *    is still listed and still answers GET_STATS_FD.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "fault.h"
#include "kvmstats_util.h"
#include "proc_files.h"
#include "../qemu/guest-module/ksg_test.h"

static int dev;

static int count_vm(const struct kvmstats_vm *vms, int n, pid_t pid, int fd)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += vms[i].pid == pid && (fd < 0 || vms[i].fd == fd);
	return c;
}

/*
 * LIST_PIDFD's entries of @pid against two sources: what /proc shows of its
 * fd table (each "anon_inode:kvm-vm" file once, at its lowest fd, in fd
 * order, and as many vCPUs in all as it holds "anon_inode:kvm-vcpu:" files),
 * which does not ask kvmstats, and LIST_VMS's entries of @pid, entry for
 * entry.
 */
static void check_same_as_list(int pidfd, pid_t pid, const char *what)
{
	struct kvmstats_vm *all = NULL, *one = NULL;
	int n, m, i, j = 0, nproc, nvcpus, fds[16];
	bool same, fault = test_fault("55-pidfd-fd");
	unsigned int vcpus = 0;

	n = kvmstats_list_vms(dev, &all);
	m = __kvmstats_list_pidfd(dev, pidfd, &one);
	/*
	 * Fault 55-pidfd-fd: the first entry's fd off by 100 in both lists,
	 * as a module that misnames the fd in every listing would be.
	 */
	for (i = 0; fault && i < n; i++)
		if (all[i].pid == pid) {
			all[i].fd += 100;
			if (m > 0)
				one[0].fd += 100;
			break;
		}
	nproc = proc_anon_fds(pid, "kvm-vm", fds, 16);
	nvcpus = proc_anon_fds(pid, "kvm-vcpu:", NULL, 0);
	same = m == nproc && nproc >= 0 && nproc <= 16;
	for (i = 0; same && i < m; i++) {
		same = one[i].pid == pid && one[i].fd == fds[i];
		vcpus += one[i].nr_vcpus;
	}
	same = same && (int)vcpus == nvcpus;
	if (!same)
		for (i = 0; i < m; i++)
			tap_diag("LIST_PIDFD: pid %d fd %d, %u vCPUs",
				 one[i].pid, one[i].fd, one[i].nr_vcpus);
	tap_check(
		same,
		"%s: LIST_PIDFD gives the kvm-vm files /proc/%d/fd shows, each at its lowest fd, in fd order, and its %d kvm-vcpu files' vCPUs (%d VMs by /proc, got %d)",
		what, (int)pid, nvcpus, nproc, m);

	same = m == count_vm(all, n, pid, -1);
	for (i = 0; same && i < n; i++)
		if (all[i].pid == pid)
			same = !memcmp(&all[i], &one[j++], sizeof(all[i]));
	tap_check(
		same,
		"%s: LIST_PIDFD gives exactly LIST_VMS's %d entries of pid %d (got %d)",
		what, count_vm(all, n, pid, -1), (int)pid, m);
	free(all);
	free(one);
}

static void check_list_pidfd(void)
{
	struct kvmstats_pidfd_list l = { 0 };
	struct vm *a = vm_create(2, NULL), *b = vm_create(0, NULL);
	struct kvmstats_vm *vms = NULL;
	int self = pidfd_open_or_fail(getpid()), dup_a, n, r, pfd, zfd;
	struct child_vmm c;
	pid_t z;

	dup_a = dup(a->fd);
	check_same_as_list(self, getpid(), "own process (2 VMs, a dup)");
	n = __kvmstats_list_pidfd(dev, self, &vms);
	tap_check(count_vm(vms, n, getpid(), a->fd) == 1 &&
			  count_vm(vms, n, getpid(), b->fd) == 1,
		  "own pidfd lists VM a at fd %d and VM b at fd %d", a->fd,
		  b->fd);
	free(vms);

	child_vmm_start(&c, 1, NULL, 3);
	pfd = pidfd_open_or_fail(c.info.pid);
	check_same_as_list(pfd, c.info.pid, "child VMM");
	n = __kvmstats_list_pidfd(dev, pfd, &vms);
	tap_check(
		n == 1 && vms[0].pid == c.info.pid &&
			vms[0].fd == c.info.vm_fd && vms[0].nr_vcpus == 1,
		"child VMM's pidfd: its one VM at fd %d with 1 vCPU (%d entries)",
		c.info.vm_fd, n);
	free(vms);

	/* Errors. */
	l.pidfd = self;
	l.nr = 0;
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, &l) ? -errno : 0;
	tap_check(r == -E2BIG && l.nr == 2,
		  "LIST_PIDFD nr 0 on 2 VMs: E2BIG and nr 2 (got %d, nr %u)", r,
		  l.nr);
	l.nr = 4;
	l.flags = 1;
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, &l) ? -errno : 0;
	tap_check(r == -EINVAL, "LIST_PIDFD flags 1: EINVAL (got %d)", r);
	l.flags = 0;
	l.reserved = 1;
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, &l) ? -errno : 0;
	tap_check(r == -EINVAL, "LIST_PIDFD reserved 1: EINVAL (got %d)", r);
	l.reserved = 0;
	l.pidfd = a->fd;
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, &l) ? -errno : 0;
	tap_check(r == -EINVAL, "LIST_PIDFD on a VM fd: EINVAL (got %d)", r);
	l.pidfd = 999;
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, &l) ? -errno : 0;
	tap_check(r == -EBADF, "LIST_PIDFD on an unused fd: EBADF (got %d)", r);
	r = ioctl(dev, KVMSTATS_LIST_PIDFD, NULL) ? -errno : 0;
	tap_check(r == -EFAULT, "LIST_PIDFD NULL: EFAULT (got %d)", r);

	z = tap_fork();
	if (!z) {
		pause();
		_exit(0);
	}
	zfd = pidfd_open_or_fail(z);
	n = __kvmstats_list_pidfd(dev, zfd, &vms);
	tap_check(n == 0, "a process without VMs: 0 entries (got %d)", n);
	if (n >= 0)
		free(vms);
	kill(z, SIGKILL);
	waitpid(z, NULL, 0);
	n = __kvmstats_list_pidfd(dev, zfd, &vms);
	tap_check(n == -ESRCH, "a reaped process's pidfd: ESRCH (got %d)", n);

	close(zfd);
	child_vmm_kill(&c);
	n = __kvmstats_list_pidfd(dev, pfd, &vms);
	tap_check(n == -ESRCH, "a killed VMM's pidfd: ESRCH (got %d)", n);
	child_vmm_close_fds(&c);
	close(pfd);
	close(dup_a);
	close(self);
	vm_free(a);
	vm_free(b);
}

/* ---- pid reuse ---- */

/*
 * A VMM whose VM ends up at fd @want_fd: tells @sock its creator tid, then
 * waits to be killed.
 */
static void reuse_vmm(int sock, int want_fd)
{
	struct vm *v = vm_create(1, NULL);
	pid_t tid = v->creator_tid;

	if (dup2(v->fd, want_fd) < 0)
		_exit(3);
	if (write(sock, &tid, sizeof(tid)) != sizeof(tid))
		_exit(4);
	pause();
	_exit(0);
}

/*
 * Start a reuse_vmm() child, with pid @want if non-zero: clone3()'s
 * set_tid, which a pid namespace's init may use for its own namespace.
 */
static pid_t start_reuse_vmm(int want_fd, pid_t want, pid_t *tid)
{
	struct clone_args args = { .exit_signal = SIGCHLD };
	int sv[2];
	pid_t p;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	if (want) {
		args.set_tid = (uintptr_t)&want;
		args.set_tid_size = 1;
	}
	fflush(stdout);
	p = syscall(SYS_clone3, &args, sizeof(args));
	if (!p) {
		close(sv[0]);
		reuse_vmm(sv[1], want_fd);
	}
	close(sv[1]);
	if (p > 0 && read(sv[0], tid, sizeof(*tid)) != sizeof(*tid))
		p = -1;
	close(sv[0]);
	return p;
}

/* The id string of the stats fd @fd, or "" */
static void stats_fd_id(int fd, char *id, size_t len)
{
	struct kvm_stats_header h;

	id[0] = 0;
	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    pread(fd, id, len - 1, h.id_offset) <= 0)
		return;
	id[len - 1] = 0;
}

/* The id of the VM at fd @fd of the process @pidfd holds, or "". */
static void vm_id_by_pidfd(int pidfd, int fd, char *id, size_t len)
{
	int s = __kvmstats_get_stats_fd_pidfd(dev, pidfd, fd, -1);

	stats_fd_id(s, id, len);
	if (s >= 0)
		close(s);
}

/* In a new pid namespace, as its init: force pid reuse. */
static int pid_reuse_ns_init(void)
{
	char id_a[64], id_b[64], got[64];
	pid_t a, b, tid;
	int pfd_a, pfd_b, fd;

	a = start_reuse_vmm(100, 0, &tid);
	if (a < 0)
		return 10;
	pfd_a = pidfd_open_or_fail(a);
	vm_id_by_pidfd(pfd_a, 100, id_a, sizeof(id_a));
	tap_check(!strncmp(id_a, "kvm-", 4), "ns: VMM A's VM by its pidfd (%s)",
		  id_a);

	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	b = start_reuse_vmm(100, a, &tid);
	tap_check(b == a, "ns: VMM B got VMM A's pid %d (got %d)", (int)a,
		  (int)b);
	pfd_b = pidfd_open_or_fail(b);
	vm_id_by_pidfd(pfd_b, 100, id_b, sizeof(id_b));
	tap_check(!strncmp(id_b, "kvm-", 4) && strcmp(id_a, id_b),
		  "ns: VMM B's VM is another VM (%s, A's was %s)", id_b, id_a);

	fd = __kvmstats_get_stats_fd(dev, a, 100, -1);
	stats_fd_id(fd, got, sizeof(got));
	tap_check(
		!strcmp(got, id_b),
		"ns: by the reused pid %d, VMM B's VM (%s, got %s): a pid names whoever has it now",
		(int)a, id_b, got);
	if (fd >= 0)
		close(fd);
	fd = __kvmstats_get_stats_fd_pidfd(dev, pfd_a, 100, -1);
	tap_check(
		fd == -ESRCH,
		"ns: by VMM A's pidfd after the reuse: ESRCH, never B's VM (got %d)",
		fd);
	if (fd >= 0)
		close(fd);
	fd = __kvmstats_get_stats_fd_pidfd(dev, pfd_a, 100, 0);
	tap_check(fd == -ESRCH, "ns: vCPU 0 by A's pidfd: ESRCH (got %d)", fd);
	if (fd >= 0)
		close(fd);
	kill(b, SIGKILL);
	waitpid(b, NULL, 0);
	close(pfd_a);
	close(pfd_b);
	return 0;
}

static void check_pid_reuse(void)
{
	pid_t init;
	int st = 0;

	fflush(stdout);
	if (unshare(CLONE_NEWPID)) {
		tap_check(0, "unshare(CLONE_NEWPID): %s", strerror(errno));
		return;
	}
	init = fork();
	if (!init)
		_exit(pid_reuse_ns_init() ? 1 : tap_exit());
	waitpid(init, &st, 0);
	tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
		  "the pid-reuse namespace passed all its checks (status %#x)",
		  st);
}

/* ---- address spaces shared across processes ---- */

struct sharer {
	int to_lister;	 /* the sharer says it is there */
	int from_lister; /* the lister says it is done */
};

static int sharer_fn(void *arg)
{
	struct sharer *s = arg;
	char c = 'x';

	/* Shares our memory: only system calls and our own stack here. */
	if (syscall(SYS_write, s->to_lister, &c, 1) != 1)
		syscall(SYS_exit, 1);
	syscall(SYS_read, s->from_lister, &c, 1);
	syscall(SYS_exit, 0);
	return 0;
}

/*
 * The lister (forked before): once the sharer is there, list, and report
 * back in @res: how often the VM at (@pid, @fd) appears, and how many
 * entries name the sharer.
 */
static pid_t start_lister(int go_rd, int done_wr, int res_wr, pid_t pid, int fd)
{
	pid_t p;

	p = tap_fork();
	if (!p) {
		struct kvmstats_vm *vms = NULL;
		int n, res[3];
		char c;

		if (read(go_rd, &c, 1) != 1)
			_exit(1);
		n = kvmstats_list_vms(dev, &vms);
		res[0] = count_vm(vms, n, pid, fd);
		res[1] = n - count_vm(vms, n, pid, -1);
		res[2] = n;
		if (write(res_wr, res, sizeof(res)) != sizeof(res))
			_exit(2);
		if (write(done_wr, &c, 1) != 1)
			_exit(3);
		_exit(0);
	}
	return p;
}

static void check_shared_mm(unsigned long flags, const char *what)
{
	struct vm *v = vm_create(1, NULL);
	struct kvmstats_vm *before = NULL;
	int go[2], done[2], res[2], r[3] = { -1, -1, -1 }, n;
	struct sharer s;
	pid_t lister, sharer;
	char *stack;
	int st;

	n = kvmstats_list_vms(dev, &before);
	if (pipe2(go, O_CLOEXEC) || pipe2(done, O_CLOEXEC) ||
	    pipe2(res, O_CLOEXEC))
		tap_bail("pipe: %s", strerror(errno));
	lister = start_lister(go[0], done[1], res[1], getpid(), v->fd);
	s.to_lister = go[1];
	s.from_lister = done[0];
	stack = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	/* Without CLONE_FILES: the sharer holds copies of our fds. */
	sharer = clone(sharer_fn, stack + 65536, flags | SIGCHLD, &s);
	if (sharer < 0)
		tap_bail("clone: %s", strerror(errno));
	waitpid(sharer, &st, 0);
	waitpid(lister, NULL, 0);
	if (read(res[0], r, sizeof(r)) != sizeof(r))
		tap_diag("the lister reported nothing");
	tap_check(
		r[0] == 1,
		"%s: the VM is listed exactly once, under its creator (%d times)",
		what, r[0]);
	tap_check(r[2] == n,
		  "%s: no entry under the sharer, %d in all as before (%d)",
		  what, n, r[2]);
	munmap(stack, 65536);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	close(res[0]);
	close(res[1]);
	free(before);
	vm_free(v);
}

/* ---- the leader's exit window ---- */

static int window_ctl[2];

/*
 * The held leader spins in a kprobe handler, interrupts off, on its CPU:
 * a task woken onto that CPU waits out the hold.  So the window VMM (its
 * leader and its vCPU thread) runs on the last CPU, this test on CPU 0.
 *
 * A VMM whose leader exits first: the VM and a thread running it stay.
 * Reports its VM fd, then the leader leaves with exit(2) (the thread only).
 */
static void window_vmm(int ksg)
{
	struct vm *v;
	int fd;

	pin_self_to(sysconf(_SC_NPROCESSORS_ONLN) - 1);
	v = vm_create(1, NULL);
	fd = v->fd;

	vcpu_load_prog(v->vcpus[0], GUEST_IO_LOOP, 0);
	vcpu_thread_start(v->vcpus[0]);
	vcpu_thread_wait_running(v->vcpus[0]);
	if (ioctl(ksg, KSG_TEST_HOLD_EXIT, getpid()))
		_exit(2);
	if (write(window_ctl[1], &fd, sizeof(fd)) != sizeof(fd))
		_exit(3);
	syscall(SYS_exit, 0);
}

static void check_exit_window(void)
{
	int ksg = ksg_test_open(), vmfd = -1, i, n, fd, pfd;
	struct kvmstats_vm *vms = NULL;
	uint64_t a, b;
	cpu_set_t all;
	pid_t p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		tap_skip(
			"the guest has one CPU",
			"the VMM's leader held between exit_mm and exit_files (the hold spins on a CPU of its own)");
		close(ksg);
		return;
	}
	sched_getaffinity(0, sizeof(all), &all);
	pin_self_to(0);
	if (pipe2(window_ctl, O_CLOEXEC))
		tap_bail("pipe: %s", strerror(errno));
	p = tap_fork();
	if (!p)
		window_vmm(ksg);
	if (read(window_ctl[0], &vmfd, sizeof(vmfd)) != sizeof(vmfd))
		tap_bail("the window VMM did not start");
	pfd = pidfd_open_or_fail(p);
	for (i = 0; i < 3000 && ioctl(ksg, KSG_TEST_HELD) != 1; i++)
		usleep(1000);
	tap_check(i < 3000,
		  "the VMM's leader is held between exit_mm and exit_files");

	/* In the window. */
	n = kvmstats_list_vms(dev, &vms);
	tap_check(
		count_vm(vms, n, p, vmfd) == 1,
		"in the window: LIST_VMS lists the VM under %d at fd %d (%d times)",
		(int)p, vmfd, count_vm(vms, n, p, vmfd));
	free(vms);
	fd = __kvmstats_get_stats_fd(dev, p, vmfd, 0);
	tap_check(fd >= 0, "in the window: GET_STATS_FD by pid works (%d)", fd);
	n = __kvmstats_list_pidfd(dev, pfd, &vms);
	tap_check(n == 1, "in the window: LIST_PIDFD lists it (%d)", n);
	if (n >= 0)
		free(vms);
	tap_check(ioctl(ksg, KSG_TEST_HELD) == 1,
		  "the leader was still held after those calls");
	ioctl(ksg, KSG_TEST_RELEASE);

	/* After: the leader is a zombie, the thread runs the VM on. */
	n = kvmstats_list_vms(dev, &vms);
	tap_check(count_vm(vms, n, p, vmfd) == 1,
		  "leader gone, thread running: still listed once (%d)",
		  count_vm(vms, n, p, vmfd));
	free(vms);
	if (fd >= 0) {
		a = stats_read_stat(fd, STAT_IO_EXITS);
		b = stats_wait_above(fd, STAT_IO_EXITS, a, 5000);
		tap_check(
			b > a,
			"leader gone: the VM still runs and is read live (" STAT_IO_EXITS
			" %llu -> %llu)",
			(unsigned long long)a, (unsigned long long)b);
		close(fd);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	close(pfd);
	close(window_ctl[0]);
	close(window_ctl[1]);
	close(ksg);
	sched_setaffinity(0, sizeof(all), &all);
}

int main(void)
{
	kvm_test_init();
	dev = kvmstats_open();

	check_list_pidfd();
	check_shared_mm(CLONE_VM | CLONE_VFORK, "a vfork child (posix_spawn)");
	check_shared_mm(CLONE_VM, "a clone(CLONE_VM) sibling");
	check_exit_window();
	check_pid_reuse();

	close(dev);
	return tap_exit();
}
