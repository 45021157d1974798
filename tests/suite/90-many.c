// SPDX-License-Identifier: GPL-2.0-only
/*
 * 100 VMs alive at once: each runs a guest, is listed exactly once, and
 * its VM and vCPU files read through kvmstats are identical to native;
 * then all are destroyed and the list forgets them.  kvmstats holds each
 * VM once while a stats file of it is open (live_vms settles at 100 with
 * one file of each open), gives every reference back once they close
 * (the VMs alive), and KVM destroys all 100 when this program closes
 * their fds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "freeze_util.h"
#include "kvmstats_util.h"

#define NR_VMS 100

int main(void)
{
	unsigned long bad_vm = 0, bad_vcpu = 0, bad_io = 0, missing = 0;
	static struct stats_blob a, b;
	struct kvmstats_vm *vms = NULL;
	struct vm *vm[NR_VMS];
	pid_t me = getpid(), creator;
	uint64_t t0 = now_ns();
	int dev, i, j, n, mine, uev, keep[NR_VMS];
	long base, v;

	kvm_test_init();
	dev = kvmstats_open();
	uev = kvm_uevent_open();
	base = kvmstats_wait_settled(60000);
	for (i = 0; i < NR_VMS; i++) {
		vm[i] = vm_create(1, NULL);
		vcpu_load_prog(vm[i]->vcpus[0], GUEST_IO_COUNT, 1 + i % 13);
		vcpu_run_to_hlt(vm[i]->vcpus[0]);
	}
	tap_diag("created and ran %d VMs in %llu ms", NR_VMS,
		 (unsigned long long)(now_ns() - t0) / 1000000);
	tap_pass("created %d VMs, each ran its guest to HLT", NR_VMS);

	n = kvmstats_list_vms(dev, &vms);
	mine = 0;
	for (j = 0; j < n; j++)
		mine += vms[j].pid == me;
	tap_eq(mine, NR_VMS, "LIST_VMS shows exactly our %d VMs", NR_VMS);
	for (i = 0; i < NR_VMS; i++) {
		int hits = 0;

		for (j = 0; j < n; j++)
			hits += vms[j].pid == me && vms[j].fd == vm[i]->fd &&
				vms[j].nr_vcpus == 1;
		missing += hits != 1;
	}
	tap_eq(missing, 0,
	       "each VM listed exactly once, at its fd, with 1 vCPU");
	free(vms);

	for (i = 0; i < NR_VMS; i++) {
		int ours, native;

		ours = kvmstats_get_stats_fd(dev, 0, vm[i]->fd, -1);
		native = vm_get_stats_fd(vm[i]);
		stats_read_all(ours, &a, "ours");
		stats_read_all(native, &b, "native");
		bad_vm += !stats_blob_equal(&a, &b, "VM file");
		close(ours);
		close(native);

		ours = kvmstats_get_stats_fd(dev, me, vm[i]->fd, 0);
		native = vcpu_get_stats_fd(vm[i]->vcpus[0]);
		stats_read_all(ours, &a, "ours");
		stats_read_all(native, &b, "native");
		bad_vcpu += !stats_blob_equal(&a, &b, "vCPU file");
		bad_io += stats_value(&a, STAT_IO_EXITS, 0) !=
			  (uint64_t)(1 + i % 13);
		keep[i] = ours;
		close(native);
	}
	tap_eq(bad_vm, 0, "all %d VM files identical to native", NR_VMS);
	tap_eq(bad_vcpu, 0, "all %d vCPU files identical to native", NR_VMS);
	tap_eq(bad_io, 0, "every vCPU shows its guest's exact " STAT_IO_EXITS);
	/*
	 * Each VM's file closed before its vCPU file was taken: that
	 * reference may still be on its way back, counted, for a moment.
	 */
	v = kvmstats_live_vms();
	tap_diag("live_vms %ld + %ld right after the 200 files were taken",
		 base, v - base);
	v = kvmstats_wait_live_vms(base + NR_VMS, 30000);
	tap_check(v == base + NR_VMS,
		  "with a vCPU file of each open, kvmstats holds each VM once "
		  "(live_vms %ld + %ld)",
		  base, v - base);
	for (i = 0; i < NR_VMS; i++)
		close(keep[i]);
	v = kvmstats_wait_live_vms(base, 30000);
	tap_check(v == base,
		  "their files closed, the VMs alive: kvmstats gives every "
		  "reference back (live_vms %ld, base %ld)",
		  v, base);

	creator = vm[0]->creator_tid;
	kvm_uevent_drain(uev);
	for (i = 0; i < NR_VMS; i++)
		vm_free(vm[i]);
	n = kvm_uevent_wait(uev, "destroy", creator, NR_VMS, 30000);
	tap_eq(n, NR_VMS,
	       "closing their fds destroys all %d VMs (destroy uevents)",
	       NR_VMS);
	n = kvmstats_list_vms(dev, &vms);
	mine = 0;
	for (j = 0; j < n; j++)
		mine += vms[j].pid == me;
	tap_eq(mine, 0, "after destroying them, no VM of ours is listed");
	free(vms);
	tap_diag("total %llu ms",
		 (unsigned long long)(now_ns() - t0) / 1000000);
	close(uev);
	close(dev);
	return tap_exit();
}
