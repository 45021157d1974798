// SPDX-License-Identifier: GPL-2.0-only
/*
 * Every kvmstats stats file is byte-identical to the one KVM's own
 * KVM_GET_STATS_FD returns for the same VM or vCPU: header, id,
 * descriptors and data, with the vCPUs stopped.
 *
 *  - our own VM, addressed as pid 0 and as our own pid;
 *  - vCPUs with sparse ids (0 and 5), addressed by index;
 *  - a dup of our VM fd;
 *  - a VM in a child VMM, addressed by the child's pid; the child opens
 *    the native fds and passes them to us;
 *  - the child's VM through the copy of its VM fd we received.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmstats_util.h"

static struct stats_blob blob;

static void check_pair(int dev, pid_t pid, int vmfd, int vcpu, int native,
		       const char *what)
{
	char name[160];
	int ours;

	ours = kvmstats_get_stats_fd(dev, pid, vmfd, vcpu);
	snprintf(name, sizeof(name), "%s: whole file identical to native",
		 what);
	stats_fds_identical(ours, native, name);

	stats_read_all(ours, &blob, what);
	tap_check(stats_check_format(&blob, what),
		  "%s: upstream format invariants hold", what);
	close(ours);
}

static void check_id(int dev, pid_t pid, int vmfd, int vcpu, const char *expect,
		     const char *what)
{
	int ours = kvmstats_get_stats_fd(dev, pid, vmfd, vcpu);
	bool ok;

	stats_read_all(ours, &blob, what);
	ok = !strcmp(stats_id(&blob), expect);
	if (!ok)
		tap_diag("id \"%.48s\", expected \"%s\"", stats_id(&blob),
			 expect);
	tap_check(ok, "%s: id is \"%s\"", what, expect);
	close(ours);
}

int main(void)
{
	static const int ids[] = { 0, 5 };
	struct child_vmm child;
	int dev, vm_native, vcpu_native[2], i, dupfd;
	char what[128], expect[64];
	struct vm *vm;

	kvm_test_init();
	dev = kvmstats_open();

	vm = vm_create(2, ids);
	/* Give the data block something to show: exits on both vCPUs. */
	vcpu_load_prog(vm->vcpus[0], GUEST_IO_COUNT, 37);
	vcpu_run_to_hlt(vm->vcpus[0]);
	vcpu_load_prog(vm->vcpus[1], GUEST_MMIO_COUNT, 11);
	vcpu_run_to_hlt(vm->vcpus[1]);

	vm_native = vm_get_stats_fd(vm);
	for (i = 0; i < 2; i++)
		vcpu_native[i] = vcpu_get_stats_fd(vm->vcpus[i]);

	stats_read_all(vm_native, &blob, "native VM");
	tap_check(stats_check_format(&blob, "native VM"),
		  "native VM file passes the format checks (sanity)");

	check_pair(dev, 0, vm->fd, -1, vm_native, "own VM via pid 0");
	check_pair(dev, getpid(), vm->fd, -1, vm_native, "own VM via own pid");
	for (i = 0; i < 2; i++) {
		snprintf(what, sizeof(what),
			 "own vCPU index %d (id %d) via pid 0", i, ids[i]);
		check_pair(dev, 0, vm->fd, i, vcpu_native[i], what);
		snprintf(what, sizeof(what),
			 "own vCPU index %d (id %d) via own pid", i, ids[i]);
		check_pair(dev, getpid(), vm->fd, i, vcpu_native[i], what);
	}

	snprintf(expect, sizeof(expect), "kvm-%d", vm->creator_tid);
	check_id(dev, 0, vm->fd, -1, expect, "own VM");
	snprintf(expect, sizeof(expect), "kvm-%d/vcpu-5",
		 vm->vcpus[1]->creator_tid);
	check_id(dev, 0, vm->fd, 1, expect, "own vCPU index 1");

	dupfd = dup(vm->fd);
	check_pair(dev, 0, dupfd, -1, vm_native, "own VM via a dup'd VM fd");
	check_pair(dev, 0, dupfd, 1, vcpu_native[1],
		   "own vCPU index 1 via a dup'd VM fd");
	close(dupfd);

	/* A VM in another process, with its own native fds. */
	child_vmm_start(&child, 3, (const int[]){ 0, 1, 7 }, 23);
	tap_diag("child VMM pid %d, VM fd %d", child.info.pid,
		 child.info.vm_fd);
	check_pair(dev, child.info.pid, child.info.vm_fd, -1,
		   child.native_vm_stats, "child's VM via its pid");
	for (i = 0; i < 3; i++) {
		snprintf(what, sizeof(what),
			 "child's vCPU index %d (id %d) via its pid", i,
			 child.info.vcpu_ids[i]);
		check_pair(dev, child.info.pid, child.info.vm_fd, i,
			   child.native_vcpu_stats[i], what);
	}
	snprintf(expect, sizeof(expect), "kvm-%d", child.info.pid);
	check_id(dev, child.info.pid, child.info.vm_fd, -1, expect,
		 "child's VM");
	snprintf(expect, sizeof(expect), "kvm-%d/vcpu-7", child.info.pid);
	check_id(dev, child.info.pid, child.info.vm_fd, 2, expect,
		 "child's vCPU index 2");

	/* The gap kvmstats fills: KVM refuses a VM fd from another mm. */
	{
		long r = __test_ioctl(child.vm_fd, KVM_GET_STATS_FD, 0);

		if (r >= 0)
			close(r);
		tap_check(
			r == -EIO,
			"native KVM_GET_STATS_FD on the child's VM fd from our process fails with EIO (got %ld)",
			r);
	}

	/* Its VM fd, received over SCM_RIGHTS, addressed in our process. */
	check_pair(dev, 0, child.vm_fd, -1, child.native_vm_stats,
		   "child's VM via the VM fd it passed us (pid 0)");
	check_pair(dev, 0, child.vm_fd, 2, child.native_vcpu_stats[2],
		   "child's vCPU index 2 via the VM fd it passed us");

	tap_eq(child_vmm_exit(&child), 0, "child VMM exited cleanly");
	child_vmm_close_fds(&child);

	close(vm_native);
	for (i = 0; i < 2; i++)
		close(vcpu_native[i]);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
