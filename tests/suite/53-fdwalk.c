// SPDX-License-Identifier: GPL-2.0-only
/*
 * Bounded work per call against a sparse file table (issue 26, item 4).
 *
 * A process may make its file table as large as its fd limit with one
 * dup2(): a table of 524,288 slots holding four files.  kvmstats used to
 * walk such a table slot by slot under its lock (iterate_fd()) for every
 * LIST and for every GET_STATS_FD naming an fd that is not open; it now
 * looks an fd up by its index and walks the bitmap of open fds.
 *
 * Two child VMMs, each with one VM and one vCPU, alike but for their
 * tables: the dense one's has a few dozen slots, the sparse one's 524,288
 * (the VM fd dup'd to the last slot).  Measured side by side, interleaved,
 * the least of ROUNDS calls each (what a call costs when nothing else
 * runs):
 *
 *  - LIST_PIDFD of each, and GET_STATS_FD of an fd that is not open;
 *  - the sparse one costs at most FLAT times the dense one, for a table
 *    8,192 times as large: the bitmap scan costs a few microseconds under
 *    TCG.  The module that walked every slot took 96 times as long for
 *    LIST_PIDFD and 202 times for GET_STATS_FD (6.1, TCG).
 *
 * and the answers are right: the sparse VMM's first VM listed once, at its
 * lowest fd, and two more whose only VM fds are in slot 65,536 (past the
 * walk's first chunk) and in the last slot but one; the first VM's dup in
 * the last slot answers GET_STATS_FD (a stats file byte-identical to the
 * one by the lowest fd); the slot past the table, and fds far beyond it,
 * are EBADF.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define SLOTS	524288
#define HIGH_VM 65536 /* past the first chunk of the walk */
#define ROUNDS	40
#define FLAT	25.0

static int dev;

struct vmm {
	pid_t pid;
	int sock;
	int vm_fd;
	int pidfd;
};

/* Put @vm's only VM fd at @fd. */
static void move_vm_fd(struct vm *vm, int fd)
{
	if (dup2(vm->fd, fd) != fd || close(vm->fd))
		_exit(2);
	vm->fd = fd;
}

/*
 * arg: non-NULL for the sparse table: its first VM's fd is dup'd to the
 * last slot, and two more VMs have their only VM fds in slot HIGH_VM and
 * in the last slot but one, so that a walk must reach them.
 */
static void vmm_main(int sock, void *arg)
{
	struct rlimit rl = { SLOTS, SLOTS };
	struct vm *vm = vm_create(1, NULL);
	char c;

	if (arg) {
		if (setrlimit(RLIMIT_NOFILE, &rl) ||
		    dup2(vm->fd, SLOTS - 1) != SLOTS - 1)
			_exit(2);
		move_vm_fd(vm_create(1, NULL), SLOTS - 2);
		move_vm_fd(vm_create(1, NULL), HIGH_VM);
	}
	if (write(sock, &vm->fd, sizeof(vm->fd)) != sizeof(vm->fd))
		_exit(2);
	if (read(sock, &c, 1) < 0)
		_exit(2);
	_exit(0);
}

static void vmm_start(struct vmm *v, bool sparse)
{
	v->pid = child_fork(&v->sock, vmm_main, sparse ? v : NULL, false);
	if (read(v->sock, &v->vm_fd, sizeof(v->vm_fd)) != sizeof(v->vm_fd))
		tap_bail("VMM %d made no VM", v->pid);
	v->pidfd = pidfd_open_or_fail(v->pid);
}

static void vmm_stop(struct vmm *v)
{
	int status;

	if (write(v->sock, "q", 1) != 1)
		tap_diag("VMM %d: its socket is broken", v->pid);
	tap_check(waitpid(v->pid, &status, 0) == v->pid && WIFEXITED(status) &&
			  !WEXITSTATUS(status),
		  "VMM %d exits with status 0 (%#x)", v->pid, status);
	close(v->sock);
	close(v->pidfd);
}

/* Table size of @pid as the kernel reports it: /proc/PID/status FDSize. */
static long fdsize(pid_t pid)
{
	char path[64], line[256];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "FDSize: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

struct list_req {
	struct kvmstats_pidfd_list l;
	struct kvmstats_vm vms[4];
};

/* LIST_PIDFD of @v: its time, and whether it lists exactly @want. */
static uint64_t time_list(const struct vmm *v, const int *want, int nr,
			  bool *right)
{
	struct list_req r = { .l = { .nr = 4, .pidfd = v->pidfd } };
	uint64_t t0 = now_ns(), t;
	int i;

	if (ioctl(dev, KVMSTATS_LIST_PIDFD, &r.l))
		tap_bail("KVMSTATS_LIST_PIDFD: %s", strerror(errno));
	t = now_ns() - t0;
	*right = (int)r.l.nr == nr;
	for (i = 0; *right && i < nr; i++)
		*right = (int)r.vms[i].fd == want[i] && r.vms[i].nr_vcpus == 1;
	return t;
}

static uint64_t time_badfd(const struct vmm *v, int fd, int *err)
{
	uint64_t t0 = now_ns(), t;
	int r = __kvmstats_get_stats_fd(dev, v->pid, fd, -1);

	t = now_ns() - t0;
	*err = r < 0 ? -r : 0;
	if (r >= 0)
		close(r);
	return t;
}

static void compare(const char *what, uint64_t dense, uint64_t sparse)
{
	double ratio = dense ? (double)sparse / dense : 0;

	tap_diag("%s: dense table %.1f us, sparse table %.1f us (least of %d)",
		 what, dense / 1e3, sparse / 1e3, ROUNDS);
	tap_check(
		dense && ratio <= FLAT,
		"%s costs the same whatever the table's size: sparse/dense %.2f (at most %.1f)",
		what, ratio, FLAT);
}

int main(void)
{
	uint64_t l_dense = UINT64_MAX, l_sparse = UINT64_MAX;
	uint64_t b_dense = UINT64_MAX, b_sparse = UINT64_MAX, t;
	static struct stats_blob low, high;
	int err, i, a, b, bad_err = 0, bad_list = 0, want_sparse[3];
	struct vmm dense, sparse;
	bool right;

	kvm_test_init();
	dev = kvmstats_open();
	vmm_start(&dense, false);
	vmm_start(&sparse, true);
	tap_diag("tables: dense %ld slots, sparse %ld slots", fdsize(dense.pid),
		 fdsize(sparse.pid));
	tap_check(fdsize(sparse.pid) >= SLOTS,
		  "the sparse VMM's table has %d slots (%ld)", SLOTS,
		  fdsize(sparse.pid));

	/* In fd order: the first VM once, at its lowest fd; the two others. */
	want_sparse[0] = sparse.vm_fd;
	want_sparse[1] = HIGH_VM;
	want_sparse[2] = SLOTS - 2;
	for (i = 0; i < ROUNDS; i++) {
		t = time_list(&dense, &dense.vm_fd, 1, &right);
		l_dense = t < l_dense ? t : l_dense;
		bad_list += !right;
		t = time_list(&sparse, want_sparse, 3, &right);
		l_sparse = t < l_sparse ? t : l_sparse;
		bad_list += !right;
		t = time_badfd(&dense, 1000, &err);
		b_dense = t < b_dense ? t : b_dense;
		bad_err += err != EBADF;
		t = time_badfd(&sparse, 1000, &err);
		b_sparse = t < b_sparse ? t : b_sparse;
		bad_err += err != EBADF;
	}
	tap_check(
		!bad_list,
		"LIST_PIDFD lists each VM once, at its lowest fd: the sparse VMM's in slots %d, %d and %d (%d wrong answers)",
		want_sparse[0], HIGH_VM, SLOTS - 2, bad_list);
	tap_check(!bad_err, "GET_STATS_FD of an fd not open: EBADF (%d wrong)",
		  bad_err);
	compare("LIST_PIDFD", l_dense, l_sparse);
	compare("GET_STATS_FD of an fd not open", b_dense, b_sparse);

	a = kvmstats_get_stats_fd(dev, sparse.pid, sparse.vm_fd, -1);
	b = __kvmstats_get_stats_fd(dev, sparse.pid, SLOTS - 1, -1);
	if (tap_check(b >= 0, "GET_STATS_FD of the VM's dup in slot %d (%s)",
		      SLOTS - 1, b < 0 ? strerror(-b) : "ok")) {
		stats_read_all(a, &low, "by the lowest fd");
		stats_read_all(b, &high, "by the last slot");
		tap_check(
			stats_blob_equal(&low, &high, "dup"),
			"its file is byte-identical to the one by the lowest fd (the VM never ran)");
		close(b);
	}
	close(a);
	b = __kvmstats_get_stats_fd(dev, sparse.pid, SLOTS - 2, 0);
	tap_check(
		b >= 0,
		"GET_STATS_FD of the vCPU of the VM whose only fd is slot %d (%s)",
		SLOTS - 2, b < 0 ? strerror(-b) : "ok");
	if (b >= 0)
		close(b);
	tap_eq(__kvmstats_get_stats_fd(dev, sparse.pid, SLOTS, -1), -EBADF,
	       "GET_STATS_FD of the slot past the table: EBADF");
	tap_eq(__kvmstats_get_stats_fd(dev, sparse.pid, 0x7fffffff, -1), -EBADF,
	       "GET_STATS_FD of fd INT_MAX: EBADF");

	vmm_stop(&dense);
	vmm_stop(&sparse);
	close(dev);
	return tap_exit();
}
