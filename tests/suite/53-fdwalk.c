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
 * and the answers are right: the sparse VMM's VM listed once, at its
 * lowest fd; its dup in the last slot answers GET_STATS_FD (a stats file
 * byte-identical to the one by the lowest fd); the slot past the table,
 * and fds far beyond it, are EBADF.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define SLOTS  524288
#define ROUNDS 40
#define FLAT   25.0

static int dev;

struct vmm {
	pid_t pid;
	int sock;
	int vm_fd;
	int pidfd;
};

/* arg: non-NULL for the sparse table. */
static void vmm_main(int sock, void *arg)
{
	struct rlimit rl = { SLOTS, SLOTS };
	struct vm *vm = vm_create(1, NULL);
	char c;

	if (arg) {
		if (setrlimit(RLIMIT_NOFILE, &rl) ||
		    dup2(vm->fd, SLOTS - 1) != SLOTS - 1)
			_exit(2);
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

static uint64_t time_list(const struct vmm *v, int *nr, int *fd)
{
	struct list_req r = { .l = { .nr = 4, .pidfd = v->pidfd } };
	uint64_t t0 = now_ns(), t;

	if (ioctl(dev, KVMSTATS_LIST_PIDFD, &r.l))
		tap_bail("KVMSTATS_LIST_PIDFD: %s", strerror(errno));
	t = now_ns() - t0;
	*nr = r.l.nr;
	*fd = r.l.nr ? (int)r.vms[0].fd : -1;
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
	tap_check(dense && ratio <= FLAT,
		  "%s costs the same whatever the table's size: sparse/dense %.2f (at most %.1f)",
		  what, ratio, FLAT);
}

int main(void)
{
	uint64_t l_dense = UINT64_MAX, l_sparse = UINT64_MAX;
	uint64_t b_dense = UINT64_MAX, b_sparse = UINT64_MAX, t;
	static struct stats_blob low, high;
	int nr, fd, err, i, a, b, bad_err = 0, bad_list = 0;
	struct vmm dense, sparse;

	kvm_test_init();
	dev = kvmstats_open();
	vmm_start(&dense, false);
	vmm_start(&sparse, true);
	tap_diag("tables: dense %ld slots, sparse %ld slots", fdsize(dense.pid),
		 fdsize(sparse.pid));
	tap_check(fdsize(sparse.pid) >= SLOTS,
		  "the sparse VMM's table has %d slots (%ld)", SLOTS,
		  fdsize(sparse.pid));

	for (i = 0; i < ROUNDS; i++) {
		t = time_list(&dense, &nr, &fd);
		l_dense = t < l_dense ? t : l_dense;
		bad_list += nr != 1 || fd != dense.vm_fd;
		t = time_list(&sparse, &nr, &fd);
		l_sparse = t < l_sparse ? t : l_sparse;
		bad_list += nr != 1 || fd != sparse.vm_fd;
		t = time_badfd(&dense, 1000, &err);
		b_dense = t < b_dense ? t : b_dense;
		bad_err += err != EBADF;
		t = time_badfd(&sparse, 1000, &err);
		b_sparse = t < b_sparse ? t : b_sparse;
		bad_err += err != EBADF;
	}
	tap_check(!bad_list,
		  "LIST_PIDFD lists each VMM's VM once, at its lowest fd (%d wrong answers)",
		  bad_list);
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
		tap_check(!strcmp(stats_id(&low), stats_id(&high)) &&
				  stats_header(&low)->num_desc ==
					  stats_header(&high)->num_desc,
			  "both name the same VM (%s)", stats_id(&low));
		close(b);
	}
	close(a);
	tap_eq(__kvmstats_get_stats_fd(dev, sparse.pid, SLOTS, -1), -EBADF,
	       "GET_STATS_FD of the slot past the table: EBADF");
	tap_eq(__kvmstats_get_stats_fd(dev, sparse.pid, 0x7fffffff, -1), -EBADF,
	       "GET_STATS_FD of fd INT_MAX: EBADF");

	vmm_stop(&dense);
	vmm_stop(&sparse);
	close(dev);
	return tap_exit();
}
