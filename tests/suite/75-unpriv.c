// SPDX-License-Identifier: GPL-2.0-only
/*
 * Policy: /dev/kvmstats is 0600 root:root, so a process that dropped to
 * nobody cannot open it (EACCES), yet a stats fd handed to it by root,
 * inherited by fork or passed with SCM_RIGHTS, stays readable.  Handed the
 * device itself (as a group member would open it), nobody reads root's
 * VM, but learns nothing more of root's fds than /proc would tell it:
 * "not open" and "open, not a VM" are one answer, EBADF.
 */
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define NOBODY	 65534
#define IO_EXITS 42

/* Root's side, as numbers the child may ask about. */
static pid_t root_pid;
static int root_vm_fd, root_other_fd, root_unused_fd;

static void expect_errno(int dev, pid_t pid, int fd, int want, const char *what)
{
	int r = __kvmstats_get_stats_fd(dev, pid, fd, -1);

	if (r >= 0)
		close(r);
	tap_check(r == -want, "as nobody: %s: %s (got %s)", what,
		  strerror(want), r >= 0 ? "an fd" : strerror(-r));
}

/* As nobody, with the device root opened. */
static void no_probing(int dev)
{
	int p[2], r;

	r = __kvmstats_get_stats_fd(dev, root_pid, root_vm_fd, 0);
	tap_check(r >= 0 && stats_read_stat(r, STAT_IO_EXITS) == IO_EXITS,
		  "as nobody with the device: root's VM is readable (%s)",
		  r >= 0 ? "ok" : strerror(-r));
	if (r >= 0)
		close(r);
	expect_errno(
		dev, root_pid, root_other_fd, EBADF,
		"root's open non-VM fd (a native stats fd) answers as not open");
	expect_errno(dev, root_pid, root_unused_fd, EBADF,
		     "root's unused fd number");
	expect_errno(dev, root_pid, 0, EBADF, "root's stdin");
	if (pipe(p))
		return;
	expect_errno(dev, 0, p[0], EINVAL,
		     "its own pipe: its own fds are its to know");
	close(p[0]);
	close(p[1]);
}

static int unprivileged(int inherited, int sock)
{
	static struct stats_blob a, b;
	int fd, received = -1;
	char c;

	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)) {
		tap_fail("dropping to nobody: %s", strerror(errno));
		return 1;
	}
	tap_check(geteuid() == NOBODY && getegid() == NOBODY,
		  "child runs as nobody (uid %d gid %d)", geteuid(), getegid());

	errno = 0;
	fd = open(KVMSTATS_DEVICE, O_RDONLY);
	tap_check(fd < 0 && errno == EACCES,
		  "as nobody: open(%s, O_RDONLY) fails with EACCES (got %s)",
		  KVMSTATS_DEVICE, fd < 0 ? strerror(errno) : "an fd");
	if (fd >= 0)
		close(fd);
	errno = 0;
	fd = open(KVMSTATS_DEVICE, O_RDWR);
	tap_check(fd < 0 && errno == EACCES,
		  "as nobody: open(%s, O_RDWR) fails with EACCES",
		  KVMSTATS_DEVICE);
	if (fd >= 0)
		close(fd);

	tap_eq(stats_read_stat(inherited, STAT_IO_EXITS), IO_EXITS,
	       "as nobody: the stats fd inherited from root reads " STAT_IO_EXITS
	       " %d",
	       IO_EXITS);

	/* Tell root we dropped privileges, then receive a fresh stats fd. */
	c = 'd';
	{
		int got[2] = { -1, -1 };

		if (write(sock, &c, 1) != 1 ||
		    recv_fds(sock, &c, 1, got, 2) != 2) {
			tap_fail(
				"as nobody: no stats fd received over SCM_RIGHTS");
			return 1;
		}
		received = got[0];
		no_probing(got[1]);
		close(got[1]);
	}
	tap_eq(stats_read_stat(received, STAT_IO_EXITS), IO_EXITS,
	       "as nobody: a stats fd received over SCM_RIGHTS reads " STAT_IO_EXITS
	       " %d",
	       IO_EXITS);
	stats_read_all(inherited, &a, "inherited");
	stats_read_all(received, &b, "received");
	tap_check(a.size > 0 &&
			  stats_blob_equal(&a, &b, "inherited vs received"),
		  "as nobody: both fds read the same whole file");
	close(received);
	return tap_failures() ? 1 : 0;
}

int main(void)
{
	int dev, ours, fresh, native, sv[2], status;
	struct stat st;
	struct vm *vm;
	pid_t pid;
	char c;

	kvm_test_init();
	if (!tap_check(stat(KVMSTATS_DEVICE, &st) == 0, "%s exists",
		       KVMSTATS_DEVICE))
		return tap_exit();
	tap_check((st.st_mode & 07777) == 0600 && st.st_uid == 0 &&
			  st.st_gid == 0 && S_ISCHR(st.st_mode),
		  "%s is a 0600 root:root character device (mode 0%o, %d:%d)",
		  KVMSTATS_DEVICE, st.st_mode & 07777, st.st_uid, st.st_gid);

	dev = kvmstats_open();
	vm = vm_create(1, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, IO_EXITS);
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native = vcpu_get_stats_fd(vm->vcpus[0]);
	stats_fds_identical(ours, native,
			    "root: vCPU file identical to native");

	root_pid = getpid();
	root_vm_fd = vm->fd;
	root_other_fd = native;
	root_unused_fd = 1000;
	while (fcntl(root_unused_fd, F_GETFD) != -1)
		root_unused_fd++;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		tap_bail("socketpair: %s", strerror(errno));
	pid = tap_fork();
	if (!pid) {
		close(sv[0]);
		close(dev);
		_exit(unprivileged(ours, sv[1]));
	}
	close(sv[1]);
	if (read(sv[0], &c, 1) == 1) {
		int both[2];

		fresh = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
		both[0] = fresh;
		both[1] = dev;
		if (send_fds(sv[0], "f", 1, both, 2))
			tap_fail("sending the stats fd: %s", strerror(errno));
		close(fresh);
	} else {
		tap_fail("the unprivileged child did not report");
	}
	waitpid(pid, &status, 0);
	tap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the unprivileged child passed all its checks (status 0x%x)",
		  status);
	close(sv[0]);
	close(native);
	close(ours);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
