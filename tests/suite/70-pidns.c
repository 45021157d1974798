// SPDX-License-Identifier: GPL-2.0-only
/*
 * Pid-namespace isolation, both ways.  A grandchild that is pid 1 of a new
 * pid namespace (unshare(CLONE_NEWPID) + fork) sees only its namespace's
 * VMs in LIST_VMS, numbered as its namespace numbers them, and cannot
 * address a pid of the parent namespace (ESRCH).  The parent sees the
 * grandchild's VM under its pid in the parent namespace, and the id string
 * carries that host thread id.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define IO_EXITS 5

struct gc_report {
	int vm_fd;
	int nr_vcpus;
};

static int grandchild(pid_t parent, int parent_vm_fd, int report_fd, int go_fd)
{
	struct kvmstats_vm *vms = NULL;
	struct gc_report rep;
	int dev, n, ours, native, i;
	struct vm *vm;
	char c;

	tap_check(getpid() == 1,
		  "in the new namespace: we are pid 1 (getpid %d)", getpid());
	dev = kvmstats_open();
	vm = vm_create(2, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, IO_EXITS);

	n = kvmstats_list_vms(dev, &vms);
	for (i = 0; i < n; i++)
		tap_diag("  ns list[%d]: pid %d fd %d nr_vcpus %u", i,
			 vms[i].pid, vms[i].fd, vms[i].nr_vcpus);
	tap_eq(n, 1, "in the new namespace: LIST_VMS shows exactly 1 VM");
	if (n >= 1) {
		tap_eq(vms[0].pid, 1,
		       "in the new namespace: listed under pid 1");
		tap_eq(vms[0].fd, vm->fd, "in the new namespace: at our VM fd");
		tap_eq(vms[0].nr_vcpus, 2,
		       "in the new namespace: with 2 vCPUs");
	}
	free(vms);

	n = __kvmstats_get_stats_fd(dev, parent, parent_vm_fd, -1);
	tap_check(n == -ESRCH,
		  "in the new namespace: the parent's pid %d is ESRCH (got %d)",
		  parent, n);
	n = __kvmstats_get_stats_fd(dev, 2, vm->fd, -1);
	tap_check(n == -ESRCH, "in the new namespace: pid 2 is ESRCH (got %d)",
		  n);

	ours = kvmstats_get_stats_fd(dev, 1, vm->fd, 1);
	native = vcpu_get_stats_fd(vm->vcpus[1]);
	stats_fds_identical(
		ours, native,
		"in the new namespace: own vCPU via pid 1 identical to native");
	close(ours);
	close(native);
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	native = vm_get_stats_fd(vm);
	stats_fds_identical(
		ours, native,
		"in the new namespace: own VM via pid 0 identical to native");
	close(ours);
	close(native);

	/* The parent's VM fd, inherited by fork, is still an fd of ours. */
	ours = __kvmstats_get_stats_fd(dev, 0, parent_vm_fd, -1);
	tap_check(
		ours >= 0,
		"in the new namespace: the inherited parent VM fd is usable via pid 0");
	if (ours >= 0)
		close(ours);

	rep.vm_fd = vm->fd;
	rep.nr_vcpus = 2;
	if (write(report_fd, &rep, sizeof(rep)) != sizeof(rep))
		return 1;
	if (read(go_fd, &c, 1) < 0)
		return 1;
	vm_free(vm);
	close(dev);
	return tap_failures() ? 1 : 0;
}

int main(void)
{
	int pid_pipe[2], report[2], go[2], dev, ours, n, status, i;
	struct kvmstats_vm *vms = NULL;
	pid_t parent = getpid(), middle, gc = 0;
	struct gc_report rep;
	char expect[64];
	struct vm *vm;
	bool found = false;
	static struct stats_blob blob;

	kvm_test_init();
	dev = kvmstats_open();
	vm = vm_create(1, NULL);

	if (pipe(pid_pipe) || pipe(report) || pipe(go))
		tap_bail("pipe: %s", strerror(errno));
	middle = tap_fork();
	if (!middle) {
		pid_t g;

		if (unshare(CLONE_NEWPID)) {
			tap_fail("unshare(CLONE_NEWPID): %s", strerror(errno));
			_exit(1);
		}
		g = fork();
		if (g < 0)
			_exit(1);
		if (!g)
			_exit(grandchild(parent, vm->fd, report[1], go[0]));
		if (write(pid_pipe[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		if (waitpid(g, &status, 0) < 0)
			_exit(1);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	}
	close(pid_pipe[1]);
	close(report[1]);
	close(go[0]);
	if (read(pid_pipe[0], &gc, sizeof(gc)) != sizeof(gc) ||
	    read(report[0], &rep, sizeof(rep)) != sizeof(rep)) {
		tap_fail("the namespaced child did not report");
		goto out;
	}
	tap_diag("grandchild: pid %d in our namespace, VM fd %d", gc,
		 rep.vm_fd);

	n = kvmstats_list_vms(dev, &vms);
	for (i = 0; i < n; i++) {
		if (vms[i].pid == gc) {
			found = true;
			tap_eq(vms[i].fd, rep.vm_fd,
			       "parent: the grandchild's VM listed at its fd");
			tap_eq(vms[i].nr_vcpus, rep.nr_vcpus,
			       "parent: with its 2 vCPUs");
		}
		tap_check(
			vms[i].pid != 1,
			"parent: no entry uses the namespace's pid 1 (entry %d)",
			i);
	}
	tap_check(
		found,
		"parent: LIST_VMS shows the grandchild's VM under its host pid %d",
		gc);
	free(vms);

	ours = kvmstats_get_stats_fd(dev, gc, rep.vm_fd, -1);
	stats_read_all(ours, &blob, "grandchild VM");
	snprintf(expect, sizeof(expect), "kvm-%d", gc);
	tap_check(
		!strcmp(stats_id(&blob), expect),
		"parent: its id is \"%s\", the host thread id (got \"%.48s\")",
		expect, stats_id(&blob));
	close(ours);
	ours = kvmstats_get_stats_fd(dev, gc, rep.vm_fd, 1);
	tap_eq(stats_read_stat(ours, STAT_IO_EXITS), IO_EXITS,
	       "parent: its vCPU 1 via the host pid shows " STAT_IO_EXITS " %d",
	       IO_EXITS);
	stats_read_all(ours, &blob, "grandchild vCPU");
	snprintf(expect, sizeof(expect), "kvm-%d/vcpu-1", gc);
	tap_check(!strcmp(stats_id(&blob), expect),
		  "parent: its vCPU id is \"%s\" (got \"%.48s\")", expect,
		  stats_id(&blob));
	close(ours);

out:
	if (write(go[1], "g", 1) != 1)
		tap_diag("could not release the grandchild");
	close(go[1]);
	if (waitpid(middle, &status, 0) < 0)
		tap_bail("waitpid: %s", strerror(errno));
	tap_check(
		WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"the namespaced grandchild passed all its checks (status 0x%x)",
		status);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
