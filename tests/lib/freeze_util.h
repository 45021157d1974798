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
 *
 * When kvmstats lets a VM go: it holds one reference per VM with open
 * stats files, and gives it back once it is the VM's last (the VMM exited,
 * or closed every fd of the VM, and nobody else holds one: a native stats
 * fd, a VM fd copy, a vCPU fd), or once the VM's last stats file closes.
 * A scan every 100 ms finds the first case; the files are frozen then
 * (each reads its own copy of the values of that moment), and after an RCU
 * grace period the reference goes back, from a thread of the VMM (task
 * work) while one runs in the VM's address space, else from the module's
 * worker, at the latest a second later if that thread sleeps in the
 * kernel.  KVM's destroy event is sent from inside that release, before
 * live_vms drops: so every check of these counters polls.
 */
#ifndef KVMSTATS_TEST_FREEZE_UTIL_H
#define KVMSTATS_TEST_FREEZE_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

#include "kvmstats_util.h"

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

/*
 * KVM's own count of its live VMs, which each event reports as COUNT=
 * (after a destroy: without the VM destroyed).  Read by making a
 * throwaway VM (no vCPU, no memory) in this thread and closing it: the
 * COUNT of its destroy event is the number of the other VMs.  -errno if
 * no VM can be made or the event does not come within 5 s.  Where KVM is
 * built in (arm64) this is what says that KVM freed a test's VMs; where
 * it is a module, the vendor module's refcount says it without a VM.
 */
long kvm_live_vms(void);

/* /sys/module/kvmstats/parameters/@name, -1 if unreadable. */
long kvmstats_param(const char *name);
long kvmstats_live_vms(void);

/*
 * Polls live_vms every 10 ms until it is @want or @timeout_ms pass;
 * returns the last value.  The counter settles a few hundred ms after the
 * event that lets a VM go (above): a scan period, a grace period and KVM's
 * teardown.
 */
long kvmstats_wait_live_vms(long want, unsigned int timeout_ms);

/*
 * Is @after the file @before as KVM's teardown of the VMM's address space
 * leaves it?  When a VMM's address space goes (exit or exec), KVM's MMU
 * notifier release zaps every mapping of the guest: the page counts
 * (pages_4k, pages_2m, pages_1g: every stat named pages_*) drop to 0, and
 * nothing else changes.  Header, id, descriptors and every other value
 * must be byte-identical (a vCPU file has no such stats: identical).
 * 80-lifetime checks that premise on native fds held across a death, on
 * the same kernel; here it judges kvmstats' files, frozen after such a
 * teardown.  Prints the first difference as a diagnostic.
 */
bool stats_blob_torn_down(const struct stats_blob *before,
			  const struct stats_blob *after, const char *what);

/*
 * Start of a lifetime test: waits (up to @timeout_ms) until kvmstats
 * holds no VM left over by earlier programs, so that live_vms and the
 * vendor module's refcount have stable bases.  Prints how long it took;
 * returns live_vms (0 unless it timed out).
 */
long kvmstats_wait_settled(unsigned int timeout_ms);

#endif /* KVMSTATS_TEST_FREEZE_UTIL_H */
