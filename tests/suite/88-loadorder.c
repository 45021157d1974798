// SPDX-License-Identifier: GPL-2.0-only
/*
 * Load order and unload.
 *
 *  1. kvmstats learns KVM's tables at load by asking KVM (a VM and a vCPU
 *     of its own, in the loading process), so it refuses to load while
 *     KVM is not usable: with kvmstats and kvm_amd (kvm_intel) unloaded,
 *     finit_module(kvmstats) fails with ENODEV and logs one line saying
 *     why.  Loaded after the vendor module, it serves VMs, and the VM it
 *     made is gone once the load returns (create and destroy uevents from
 *     this process, the vendor refcount back to 0).  It then stays loaded
 *     across an unload and reload of the vendor module with no VM alive:
 *     the device opened before keeps answering, and serves a VM created
 *     after the reload.
 *  2. kvmstats unloaded and reloaded while a VMM's vCPUs run: the new
 *     module serves the running VM and its counters grow.
 *  3. A VMM exits while its native VM stats fd (passed over to us) and our
 *     stats fds hold its VM: the vendor module stays pinned (on 6.12, by
 *     kvmstats' reference: the native fd pins only kvm).  Once the native
 *     fd closes, KVM destroys the VM under our fds, the vendor module
 *     unloads and loads again while they stay open and read what they
 *     read then (the VM file what the native fd read last, the vCPU file
 *     what it read before the exit); kvmstats itself is refused until
 *     they are closed.
 *
 * Where KVM is built in (arm64) there is no vendor module: KVM is always
 * usable, so the refusal and everything that unloads the vendor module
 * is a SKIP, and KVM's own count of live VMs stands for its refcount.
 *
 * The guest contract's modules (irqbypass, kvm, ccp, vendor, kvmstats)
 * are all loaded again at the end, whatever happened.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "rel_util.h"

static const char *vendor;
static const char *vendor_ko;

static long refcnt_arg(const char *name)
{
	return rel_kvm_pins(name);
}

static bool busy(int r)
{
	return r == -EAGAIN || r == -EBUSY;
}

#define REFUSAL                                                           \
	"kvmstats: KVM is not usable here (/dev/kvm: -ENOENT): kvmstats " \
	"loads after KVM (kvm_amd, kvm_intel, or KVM built in)"

/*
 * Kernel log records since rel_kmsg_open() whose message is @line; how
 * many of those were logged at KERN_ERR, and how many other records of
 * kvmstats ("kvmstats: ...") there were.
 */
static int kmsg_count(int fd, const char *line, int *nr_err, int *nr_other)
{
	size_t len = strlen(line);
	char rec[8192];
	int n = 0;

	*nr_err = *nr_other = 0;
	for (;;) {
		ssize_t r = read(fd, rec, sizeof(rec) - 1);
		const char *msg;

		if (r < 0 && errno == EPIPE)
			continue;
		if (r <= 0)
			break;
		rec[r] = 0;
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		if (strncmp(msg, line, len) || (msg[len] && msg[len] != '\n')) {
			if (!strncmp(msg, "kvmstats: ", 10)) {
				(*nr_other)++;
				tap_diag("kernel log: %.*s",
					 (int)strcspn(msg, "\n"), msg);
			}
			continue;
		}
		n++;
		*nr_err += (atoi(rec) & 7) == 3;
	}
	return n;
}

static void order(void)
{
	struct kvmstats_vm *list;
	struct child_vmm c;
	int dev, r, s, n, err, other, kmsg, uev;
	long ref, v;

	r = rel_unload_module_wait("kvmstats", 3000);
	tap_check(r == 0, "rmmod kvmstats (%s)", r ? strerror(-r) : "ok");
	if (!vendor) {
		tap_skip("KVM is built in: it cannot be unloaded, so kvmstats "
			 "never meets a KVM that is not usable",
			 "kvmstats refuses to load without KVM (ENODEV, one "
			 "line at KERN_ERR)");
		goto load;
	}
	r = rel_unload_module_wait(vendor, 5000);
	if (!tap_check(r == 0, "rmmod %s with no VM left (%s)", vendor,
		       r ? strerror(-r) : "ok"))
		return;
	tap_check(open("/dev/kvm", O_RDWR | O_CLOEXEC) < 0,
		  "/dev/kvm is absent without %s", vendor);

	kmsg = rel_kmsg_open();
	r = rel_load_module("kvmstats.ko");
	tap_check(r == -ENODEV && !rel_module_loaded("kvmstats"),
		  "kvmstats refuses to load without %s: ENODEV (%s)", vendor,
		  r ? strerror(-r) : "it loaded");
	n = kmsg_count(kmsg, REFUSAL, &err, &other);
	close(kmsg);
	tap_check(n == 1 && err == 1 && other == 0,
		  "and logs why in one line, as an error: \"%s\" (%d such "
		  "lines, %d at KERN_ERR; %d other lines of kvmstats)",
		  REFUSAL, n, err, other);
	tap_check(access(KVMSTATS_DEVICE, F_OK), "no %s without %s",
		  KVMSTATS_DEVICE, vendor);
	if (!r)
		rel_unload_module("kvmstats");

	r = rel_load_module(vendor_ko);
	if (!tap_check(r == 0, "%s loads (%s)", vendor,
		       r ? strerror(-r) : "ok"))
		return;
load:
	uev = kvm_uevent_open();
	r = rel_load_module("kvmstats.ko");
	if (!tap_check(r == 0, "kvmstats loads after %s (%s)",
		       vendor ? vendor : "KVM", r ? strerror(-r) : "ok")) {
		close(uev);
		return;
	}
	/* Its VM was made and destroyed in this process, by this thread. */
	n = kvm_uevent_wait(uev, "create", sys_gettid(), 1, 5000);
	n += kvm_uevent_wait(uev, "destroy", sys_gettid(), 1, 5000);
	close(uev);
	ref = rel_wait_value(refcnt_arg, vendor, 0, 5000);
	v = kvmstats_live_vms();
	tap_check(n == 2 && ref == 0 && v == 0,
		  "the VM kvmstats made at load to learn KVM's tables is gone "
		  "(create and destroy uevents of this thread: %d of 2; %s "
		  "%ld, live_vms %ld)",
		  n, rel_kvm_what(vendor), ref, v);
	dev = __kvmstats_open();
	if (!tap_check(dev >= 0, "/dev/kvmstats opens"))
		return;
	tap_check(__kvmstats_api_version(dev, 0) == KVMSTATS_API_VERSION,
		  "GET_API_VERSION works");

	/* The vendor module goes and comes back under a loaded kvmstats. */
	if (!vendor) {
		tap_skip("KVM is built in: no vendor module to unload",
			 "kvmstats and its open device stay across an rmmod "
			 "and reload of the vendor module");
		goto serve;
	}
	r = rel_unload_module_wait(vendor, 5000);
	tap_check(r == 0 && !rel_module_loaded(vendor),
		  "rmmod %s with kvmstats loaded, its device open, no VM "
		  "alive (%s)",
		  vendor, r ? strerror(-r) : "ok");
	tap_check(
		rel_module_loaded("kvmstats") &&
			__kvmstats_api_version(dev, 0) == KVMSTATS_API_VERSION,
		"kvmstats stays loaded without %s, its device answers", vendor);
	n = __kvmstats_list_vms(dev, &list);
	tap_check(n == 0, "LIST_VMS without %s: no VMs (%d)", vendor, n);
	if (n >= 0)
		free(list);
	r = rel_load_module(vendor_ko);
	if (!tap_check(r == 0, "%s loads again under kvmstats (%s)", vendor,
		       r ? strerror(-r) : "ok")) {
		close(dev);
		return;
	}
serve:
	child_vmm_start(&c, 2, NULL, 9);
	s = __kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, -1);
	if (tap_check(s >= 0,
		      "the device opened before %s serves a VM created "
		      "after (%s)",
		      vendor ? "the vendor module went" : "that VM existed",
		      s < 0 ? strerror(-s) : "ok")) {
		stats_fds_identical(s, c.native_vm_stats,
				    "its VM stats equal KVM_GET_STATS_FD's");
		close(s);
	}
	s = __kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 1);
	if (tap_check(s >= 0, "and its vCPU 1")) {
		stats_fds_identical(
			s, c.native_vcpu_stats[1],
			"its vCPU 1 stats equal KVM_GET_STATS_FD's");
		tap_eq(stats_read_stat(s, STAT_IO_EXITS), 9,
		       "its vCPU 1 reads " STAT_IO_EXITS " 9");
		close(s);
	}
	close(dev);
	child_vmm_exit(&c);
	child_vmm_close_fds(&c);
}

static void reload_while_running(void)
{
	uint64_t a, b;
	struct child_vmm c;
	int dev, r, s;

	child_vmm_start(&c, 2, NULL, 0);
	child_vmm_run_io_loop(&c);
	dev = kvmstats_open();
	s = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 0);
	a = stats_read_stat(s, STAT_IO_EXITS);
	close(s);
	close(dev);

	r = rel_unload_module_wait("kvmstats", 3000);
	tap_check(r == 0, "rmmod kvmstats while a VMM's vCPUs run (%s)",
		  r ? strerror(-r) : "ok");
	r = rel_load_module("kvmstats.ko");
	tap_check(r == 0, "and load it again (%s)", r ? strerror(-r) : "ok");
	dev = kvmstats_open();
	s = __kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 0);
	if (tap_check(s >= 0, "the reloaded module serves the running VM (%s)",
		      s < 0 ? strerror(-s) : "ok")) {
		uint64_t c2;

		b = stats_read_stat(s, STAT_IO_EXITS);
		c2 = stats_wait_above(s, STAT_IO_EXITS, b, 5000);
		tap_check(
			c2 > b && b > a,
			"its " STAT_IO_EXITS
			" keep growing across the reload (%llu -> %llu -> %llu)",
			(unsigned long long)a, (unsigned long long)b,
			(unsigned long long)c2);
		close(s);
	}
	close(dev);
	child_vmm_exit(&c);
	child_vmm_close_fds(&c);
}

static void exited_vmm_frees(void)
{
	static struct stats_blob before, last, now;
	struct child_vmm c;
	int dev, r, s[2], i, nat, bad = 0;
	long ref;

	child_vmm_start(&c, 2, NULL, 4);
	dev = kvmstats_open();
	s[0] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, -1);
	s[1] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 1);
	close(dev);
	/* Of what the VMM sent, only its native VM stats fd stays open. */
	nat = c.native_vm_stats;
	close(c.vm_fd);
	c.vm_fd = -1;
	for (i = 0; i < 2; i++)
		close(c.native_vcpu_stats[i]);
	stats_read_all(s[1], &before, "vCPU 1 before the exit");
	if (vendor) {
		r = rel_unload_module(vendor);
		tap_check(busy(r) && rel_module_loaded(vendor),
			  "rmmod %s refused while the VMM lives with its VM "
			  "(%s)",
			  vendor, r ? strerror(-r) : "it was unloaded");
	}
	tap_eq(child_vmm_exit(&c), 0, "the VMM exits");

	stats_fds_identical(s[0], nat,
			    "the VMM dead, its native VM stats fd open: our VM "
			    "file identical to it");
	msleep(500);
	ref = rel_kvm_pins(vendor);
	if (vendor) {
		r = rel_unload_module(vendor);
		tap_check(busy(r) && rel_module_loaded(vendor),
			  "rmmod %s refused while that native fd and our 2 "
			  "stats fds hold the dead VMM's VM (refcnt %ld; %s)",
			  vendor, ref, r ? strerror(-r) : "it was unloaded");
		if (!r)
			tap_bail("%s was unloaded under a live VM", vendor);
	} else {
		/* KVM cannot go: what holds instead is that the VM lives. */
		tap_check(ref == 1,
			  "that native fd and our 2 stats fds keep the dead "
			  "VMM's VM alive 500 ms after the exit (%s %ld)",
			  rel_kvm_what(vendor), ref);
	}

	stats_read_all(nat, &last, "native VM stats");
	close(nat);
	ref = rel_wait_value(refcnt_arg, vendor, 0, 15000);
	tap_check(ref == 0,
		  "the native fd closed, our 2 stats fds of its VM open: %s "
		  "drops to 0 (%ld): the VM was destroyed",
		  rel_kvm_what(vendor), ref);
	if (vendor) {
		r = rel_unload_module_wait(vendor, 5000);
		tap_check(r == 0 && !rel_module_loaded(vendor),
			  "rmmod %s works with the stats fds still open (%s)",
			  vendor, r ? strerror(-r) : "ok");
	} else {
		tap_skip("KVM is built in: no vendor module to unload",
			 "rmmod of the vendor module works with the stats fds "
			 "of its destroyed VM open");
	}
	r = rel_unload_module("kvmstats");
	tap_check(busy(r) && rel_module_loaded("kvmstats"),
		  "rmmod kvmstats refused while they are open (%s)",
		  r ? strerror(-r) : "it was unloaded");
	if (!r)
		tap_bail("kvmstats was unloaded under open stats fds");
	if (vendor) {
		r = rel_load_module(vendor_ko);
		tap_check(r == 0, "%s loads again under them (%s)", vendor,
			  r ? strerror(-r) : "ok");
	}
	for (i = 0; i < 2; i++) {
		stats_read_all(s[i], &now, "after the reload");
		bad += !stats_blob_equal(i ? &before : &last, &now,
					 "after the reload");
		close(s[i]);
	}
	tap_check(bad == 0,
		  "the VM fd still reads what the native fd read last, the "
		  "vCPU 1 fd what it read before the exit (%d differ)",
		  bad);
	r = rel_unload_module_wait("kvmstats", 3000);
	tap_check(r == 0, "rmmod kvmstats works once they are closed (%s)",
		  r ? strerror(-r) : "ok");
}

int main(void)
{
	long ref;
	int kmsg, bad;
	struct vm *vm;
	int dev, s;

	tap_init();
	vendor = rel_vendor();
	vendor_ko = rel_vendor_ko(vendor);
	kmsg = rel_kmsg_open();
	/* kvmstats lets VMs go from a work item: let earlier ones go first. */
	if (kvmstats_wait_settled(60000))
		tap_bail("kvmstats still holds VMs of earlier programs");
	ref = rel_kvm_pins(vendor);
	if (ref != 0)
		tap_bail("%s is %ld at the start: something still holds a VM",
			 rel_kvm_what(vendor), ref);

	order();
	rel_restore_modules();
	/*
	 * A keeper VM (tests/suite/FINDINGS.md) where the vendor module need
	 * not be unloaded: VM creation and destruction then never flip KVM's
	 * static key under TCG.  The other phases need the vendor module free.
	 */
	vm_keeper_start();
	reload_while_running();
	vm_keeper_stop();
	rel_restore_modules();
	exited_vmm_frees();

	bad = rel_restore_modules();
	if (vendor)
		tap_check(
			bad == 0 && rel_module_loaded("irqbypass") &&
				rel_module_loaded("kvm") &&
				(rel_module_loaded("ccp") ||
				 !rel_module_shipped("ccp.ko")) &&
				rel_module_loaded(vendor) &&
				rel_module_loaded("kvmstats"),
			"irqbypass, kvm, ccp (where shipped), %s and kvmstats loaded at the end",
			vendor);
	else
		tap_check(bad == 0 && rel_module_loaded("kvmstats"),
			  "kvmstats loaded at the end (KVM is built in)");
	vm = vm_create(1, NULL);
	dev = kvmstats_open();
	s = __kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	tap_check(s >= 0, "and they work together (GET_STATS_FD: %s)",
		  s < 0 ? strerror(-s) : "ok");
	if (s >= 0)
		close(s);
	close(dev);
	vm_free(vm);
	rel_kmsg_check(kmsg, "load order");
	return tap_exit();
}
