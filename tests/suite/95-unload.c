// SPDX-License-Identifier: GPL-2.0-only
/*
 * Module lifetime: while a stats fd holds a VM whose VMM has exited,
 * neither kvmstats nor the vendor module ($KVMSTATS_VENDOR) can be
 * unloaded, and the fd keeps reading; once it is closed both unload.
 * Then both are loaded back from $KVMSTATS_MODDIR (vendor first) and the
 * device works again.  Runs late: a failure here can leave modules out.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "kvmstats_util.h"

static bool loaded(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/module/%s/initstate", name);
	return !stat(path, &st);
}

static int unload(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

/* Unloads, retrying briefly while the module is still busy. */
static int unload_retry(const char *name)
{
	int i, r = 0;

	for (i = 0; i < 30; i++) {
		r = unload(name);
		if (r != -EBUSY && r != -EAGAIN)
			break;
		msleep(100);
	}
	return r;
}

static int load(const char *dir, const char *file)
{
	char path[256];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	return r;
}

static bool refused(int r)
{
	return r == -EBUSY || r == -EAGAIN;
}

int main(void)
{
	const char *vendor = getenv("KVMSTATS_VENDOR");
	const char *moddir = getenv("KVMSTATS_MODDIR");
	char vendor_file[64], *p;
	int dev, ours_vm, ours_vcpu, native, i, r;
	struct child_vmm c;
	struct vm *vm;

	kvm_test_init();
	if (!vendor || !moddir) {
		tap_skip(
			"KVMSTATS_VENDOR/KVMSTATS_MODDIR not set: not in the test guest",
			"module unload and reload");
		return 0;
	}
	snprintf(vendor_file, sizeof(vendor_file), "%s.ko", vendor);
	for (p = vendor_file; *p; p++)
		if (*p == '_')
			*p = '-';
	if (!tap_check(loaded("kvmstats") && loaded(vendor),
		       "kvmstats and %s are loaded", vendor))
		return tap_exit();

	dev = kvmstats_open();
	child_vmm_start(&c, 1, NULL, 3);
	ours_vm = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, -1);
	ours_vcpu = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 0);
	child_vmm_close_fds(&c); /* the VM fd and native fds it sent */
	tap_eq(child_vmm_exit(&c), 0,
	       "VMM exited; only our stats fds hold its VM");
	close(dev);	  /* the device fd must not be what pins us */
	vm_keeper_stop(); /* its VM would pin the vendor module */

	r = unload("kvmstats");
	tap_check(
		refused(r),
		"delete_module(kvmstats) refused while a stats fd is open (got %s)",
		r ? strerror(-r) : "success");
	r = unload(vendor);
	tap_check(refused(r),
		  "delete_module(%s) refused while a stats fd is open (got %s)",
		  vendor, r ? strerror(-r) : "success");
	tap_eq(stats_read_stat(ours_vcpu, "io_exits"), 3,
	       "the stats fd still reads io_exits 3 after the refusals");
	{
		static struct stats_blob blob;

		stats_read_all(ours_vm, &blob, "VM");
		tap_check(stats_check_format(&blob, "VM"),
			  "the VM stats fd still reads a well-formed file");
	}

	close(ours_vm);
	r = unload(vendor);
	tap_check(
		refused(r),
		"delete_module(%s) still refused while one vCPU stats fd is open (got %s)",
		vendor, r ? strerror(-r) : "success");
	close(ours_vcpu);

	r = unload_retry(vendor);
	tap_check(r == 0,
		  "delete_module(%s) succeeds once the fds are closed (got %s)",
		  vendor, r ? strerror(-r) : "success");
	r = unload_retry("kvmstats");
	tap_check(
		r == 0,
		"delete_module(kvmstats) succeeds once the fds are closed (got %s)",
		r ? strerror(-r) : "success");

	/* Put everything back. */
	if (!loaded(vendor)) {
		r = load(moddir, vendor_file);
		tap_check(r == 0, "finit_module(%s/%s) (got %s)", moddir,
			  vendor_file, r ? strerror(-r) : "success");
	}
	if (!loaded("kvmstats")) {
		r = load(moddir, "kvmstats.ko");
		tap_check(r == 0, "finit_module(%s/kvmstats.ko) (got %s)",
			  moddir, r ? strerror(-r) : "success");
	}
	for (i = 0; i < 50 && access(KVMSTATS_DEVICE, F_OK); i++)
		msleep(100);

	dev = __kvmstats_open();
	if (!tap_check(dev >= 0, "%s opens after reloading", KVMSTATS_DEVICE))
		return tap_exit();
	tap_eq(__kvmstats_api_version(dev, 0), KVMSTATS_API_VERSION,
	       "GET_API_VERSION after reloading");
	vm = vm_create(1, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 8);
	ours_vcpu = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native = vcpu_get_stats_fd(vm->vcpus[0]);
	stats_fds_identical(
		ours_vcpu, native,
		"after reloading: a new VM's vCPU file identical to native");
	tap_eq(stats_read_stat(ours_vcpu, "io_exits"), 8,
	       "after reloading: io_exits 8");
	close(ours_vcpu);
	close(native);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
