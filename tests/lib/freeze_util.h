/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the lifetime tests watch besides the stats files themselves:
 *
 *  - KVM's VM uevents.  kvm_uevent_notify_change() (virt/kvm/kvm_main.c)
 *    sends a KOBJ_CHANGE on /dev/kvm's device with EVENT=create from
 *    KVM_CREATE_VM and EVENT=destroy from kvm_destroy_vm(), both with
 *    PID=<kvm->userspace_pid>, the global thread id of the thread that
 *    created the VM.  A destroy event is the kernel's own word that the
 *    last reference on a VM is gone.
 *  - kvmstats' counters in /sys/module/kvmstats/parameters: live_vms (VMs
 *    kvmstats holds a reference on) and live_files (open stats files).
 */
#ifndef KVMSTATS_TEST_FREEZE_UTIL_H
#define KVMSTATS_TEST_FREEZE_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

/* A NETLINK_KOBJECT_UEVENT socket on the kernel's group; -errno. */
int __kvm_uevent_open(void);
int kvm_uevent_open(void); /* fails the test if it cannot */

/*
 * Reads kernel uevents for up to @timeout_ms, until @n KVM events
 * EVENT=@event (create or destroy) with PID=@pid have arrived; returns how
 * many did (events of other VMs are dropped).
 */
int kvm_uevent_wait(int sock, const char *event, pid_t pid, int n,
		    unsigned int timeout_ms);

/* Drops every uevent queued on @sock; returns how many. */
int kvm_uevent_drain(int sock);

/* /sys/module/kvmstats/parameters/@name, -1 if unreadable. */
long kvmstats_param(const char *name);
long kvmstats_live_vms(void);

/*
 * Polls live_vms every 10 ms until it is @want or @timeout_ms pass;
 * returns the last value.  kvmstats drops a VM's reference from a work
 * item (after its last stats file closes, or once the VMM's address space
 * is gone), so the counter settles a little after the event.
 */
long kvmstats_wait_live_vms(long want, unsigned int timeout_ms);

/*
 * Start of a lifetime test: waits (up to @timeout_ms) until kvmstats
 * holds no VM left over by earlier programs, so that live_vms and the
 * vendor module's refcount have stable bases.  Prints how long it took;
 * returns live_vms (0 unless it timed out).
 */
long kvmstats_wait_settled(unsigned int timeout_ms);

#endif /* KVMSTATS_TEST_FREEZE_UTIL_H */
