// SPDX-License-Identifier: GPL-2.0-only
/*
 * Module lifetime.  kvmstats holds a VM (and where the VM file's owner is
 * the vendor module, that module: $KVMSTATS_VENDOR, whose code destroys
 * the VM) while its stats fds are open and someone else holds the VM too.
 *
 *  - The VMM (this program) closes its VM and vCPU fds but keeps a native
 *    stats fd: with our stats fds open neither the vendor module nor
 *    kvmstats can be unloaded, and the fds keep reading.  Once the native
 *    fd closes too, kvmstats' reference is the VM's last: it gives it back
 *    (from its worker) and the vendor module unloads while
 *    our vCPU stats fd is still open and reads on, frozen.
 *  - A child VMM dies with only our stats fds holding its VM: kvmstats
 *    lets it go, the vendor module unloads with them open, and they read
 *    the values of the moment kvmstats became the only holder (the vCPU
 *    file what it read before the death, the VM file that as KVM's
 *    teardown of the address space left it), unchanged by the unload;
 *    kvmstats does not unload until they are closed.
 *
 * Then both are loaded back from $KVMSTATS_MODDIR (vendor first) and the
 * device works again.  Runs late: a failure here can leave modules out.
 *
 * Where KVM is built in ($KVMSTATS_VENDOR empty: arm64) only kvmstats can
 * be unloaded; instead of the vendor module's refusals and unloads, KVM's
 * own count of live VMs (kvm_live_vms()) shows the VM alive, then
 * destroyed under our open fds.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "freeze_util.h"
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

/*
 * Unloads, retrying for up to 15 s while the module is still busy: what
 * pinned it goes a few hundred ms after its VM's last holder but kvmstats
 * (more under TCG on a loaded host).
 */
static int unload_retry(const char *name)
{
	int i, r = 0;

	for (i = 0; i < 150; i++) {
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

/*
 * Where KVM is built in (no vendor module: @vendor empty) nothing can be
 * unloaded but kvmstats; what the vendor module's refusals and unloads
 * stand for, that the VM is alive or destroyed, is read from KVM's own
 * count of live VMs instead.
 */
static long kvm_vms_after(long want)
{
	long v = kvm_live_vms();
	int i;

	for (i = 0; i < 150 && v != want; i++) {
		msleep(100);
		v = kvm_live_vms();
	}
	return v;
}

/* Phase 1: the VMM lives (it is us). */
static void vmm_alive(const char *vendor, const char *moddir,
		      const char *vendor_file)
{
	static struct stats_blob blob, before;
	int dev, ours_vm, ours_vcpu, native, r;
	struct vm *vm;
	long v;

	dev = kvmstats_open();
	vm = vm_create(1, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 3);
	ours_vm = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	ours_vcpu = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native = vm_get_stats_fd(vm);
	vm_free(vm);	  /* the VM, vCPU and /dev/kvm fds */
	close(dev);	  /* the device fd must not be what pins us */
	vm_keeper_stop(); /* its VM would pin the vendor module */

	msleep(500);
	v = kvmstats_live_vms();
	tap_check(v == 1,
		  "VMM alive, its VM and vCPU fds closed, a native stats fd "
		  "open: kvmstats holds the VM 500 ms later (live_vms %ld)",
		  v);
	r = unload("kvmstats");
	tap_check(
		refused(r),
		"VMM alive: delete_module(kvmstats) refused while a stats fd is open (got %s)",
		r ? strerror(-r) : "success");
	if (*vendor) {
		r = unload(vendor);
		tap_check(refused(r),
			  "VMM alive: delete_module(%s) refused while a native "
			  "stats fd and ours hold its VM (got %s)",
			  vendor, r ? strerror(-r) : "success");
		if (!r)
			tap_diag("%s unloaded under a live VM: closing the fds "
				 "may crash",
				 vendor);
	} else {
		v = kvm_live_vms();
		tap_check(v == 1,
			  "VMM alive: a native stats fd and ours keep its VM "
			  "alive in KVM (KVM is built in; its count of live "
			  "VMs %ld)",
			  v);
	}
	tap_eq(stats_read_stat(ours_vcpu, STAT_IO_EXITS), 3,
	       "VMM alive: the vCPU stats fd still reads " STAT_IO_EXITS
	       " 3 after the "
	       "refusals");
	stats_read_all(ours_vm, &blob, "VM");
	tap_check(stats_check_format(&blob, "VM"),
		  "VMM alive: the VM stats fd still reads a well-formed file");

	close(ours_vm);
	if (*vendor) {
		r = unload(vendor);
		tap_check(
			refused(r),
			"VMM alive: delete_module(%s) still refused with one vCPU stats fd and the native fd open (got %s)",
			vendor, r ? strerror(-r) : "success");
	}
	stats_read_all(ours_vcpu, &before, "vCPU");
	close(native);
	if (*vendor) {
		r = unload_retry(vendor);
		tap_check(r == 0,
			  "VMM alive, the native fd closed too: kvmstats lets "
			  "the VM go and delete_module(%s) succeeds with our "
			  "vCPU stats fd open (got %s)",
			  vendor, r ? strerror(-r) : "success");
	} else {
		v = kvm_vms_after(0);
		tap_check(
			v == 0,
			"VMM alive, the native fd closed too: kvmstats lets "
			"the VM go and KVM destroys it with our vCPU stats fd "
			"open (its count of live VMs %ld)",
			v);
	}
	stats_read_all(ours_vcpu, &blob, "vCPU");
	tap_check(stats_blob_equal(&before, &blob, "vCPU"),
		  "VMM alive: that fd reads on, what it read before");
	r = unload("kvmstats");
	tap_check(refused(r),
		  "VMM alive: delete_module(kvmstats) still refused while it "
		  "is open (got %s)",
		  r ? strerror(-r) : "success");
	if (!r)
		tap_bail("kvmstats was unloaded under an open stats fd");
	close(ours_vcpu);
	if (*vendor && !loaded(vendor)) {
		r = load(moddir, vendor_file);
		tap_check(r == 0, "finit_module(%s/%s) (got %s)", moddir,
			  vendor_file, r ? strerror(-r) : "success");
	}
}

/* Phase 2: the VMM is dead; our stats fds of its VM stay open. */
static void vmm_dead(const char *vendor)
{
	static struct stats_blob before[2], frozen[2], now;
	int dev, ours[2], i, r, bad = 0;
	struct child_vmm c;
	long v;

	dev = kvmstats_open();
	child_vmm_start(&c, 1, NULL, 3);
	ours[0] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, -1);
	ours[1] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 0);
	child_vmm_close_fds(&c); /* the VM fd and native fds it sent */
	close(dev);
	for (i = 0; i < 2; i++)
		stats_read_all(ours[i], &before[i], "before the exit");
	tap_eq(child_vmm_exit(&c), 0, "VMM exited; our stats fds stay open");
	v = kvmstats_wait_live_vms(0, 15000);
	tap_eq(v, 0, "VMM dead: kvmstats lets its VM go under our open fds");
	for (i = 0; i < 2; i++)
		stats_read_all(ours[i], &frozen[i], "frozen");
	tap_check(stats_blob_torn_down(&before[0], &frozen[0], "VM") &&
			  stats_blob_equal(&before[1], &frozen[1], "vCPU"),
		  "VMM dead: the vCPU fd reads what it read before the exit, "
		  "the VM fd that with page counts 0 (KVM's teardown)");

	if (*vendor) {
		r = unload_retry(vendor);
		tap_check(r == 0,
			  "VMM dead: delete_module(%s) succeeds with its stats "
			  "fds open (got %s)",
			  vendor, r ? strerror(-r) : "success");
	} else {
		v = kvm_vms_after(0);
		tap_check(v == 0,
			  "VMM dead: KVM destroyed its VM with its stats fds "
			  "open (KVM is built in; its count of live VMs %ld)",
			  v);
	}
	r = unload("kvmstats");
	tap_check(refused(r),
		  "VMM dead: delete_module(kvmstats) refused while they are "
		  "open (got %s)",
		  r ? strerror(-r) : "success");
	if (!r)
		tap_bail("kvmstats was unloaded under open stats fds");
	for (i = 0; i < 2; i++) {
		stats_read_all(ours[i], &now, "after the unloads");
		bad += !stats_blob_equal(&frozen[i], &now, "after the unloads");
	}
	tap_check(bad == 0,
		  "VMM dead: the VM and vCPU fds still read what they read "
		  "once it was let go (%d differ)",
		  bad);
	tap_eq(stats_read_stat(ours[1], STAT_IO_EXITS), 3,
	       "VMM dead: the vCPU fd reads " STAT_IO_EXITS " 3");
	close(ours[0]);
	close(ours[1]);
	r = unload_retry("kvmstats");
	tap_check(
		r == 0,
		"delete_module(kvmstats) succeeds once the fds are closed (got %s)",
		r ? strerror(-r) : "success");
}

int main(void)
{
	const char *vendor = getenv("KVMSTATS_VENDOR");
	const char *moddir = getenv("KVMSTATS_MODDIR");
	char vendor_file[64], *p;
	int dev, ours_vcpu, native, i, r;
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
	if (!tap_check(loaded("kvmstats") && (!*vendor || loaded(vendor)),
		       "kvmstats and %s are loaded",
		       *vendor ? vendor : "KVM (built in)"))
		return tap_exit();
	/* kvmstats lets VMs go from a work item: let earlier ones go first. */
	tap_eq(kvmstats_wait_settled(60000), 0,
	       "kvmstats holds no VM of earlier programs");

	vmm_alive(vendor, moddir, vendor_file);
	vmm_dead(vendor);

	/* Put everything back. */
	if (*vendor && !loaded(vendor)) {
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
	tap_eq(stats_read_stat(ours_vcpu, STAT_IO_EXITS), 8,
	       "after reloading: " STAT_IO_EXITS " 8");
	close(ours_vcpu);
	close(native);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
