// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test-guest helper: keep the preempt-notifier static key enabled for the
 * whole boot.
 *
 * KVM enables that key when the first VM is created and disables it when the
 * last one is destroyed, and each flip live-patches __schedule() on every CPU.
 * Under QEMU's multi-threaded TCG, a vCPU can still run the breakpoint that
 * the patching protocol plants after the patch is complete, and the guest
 * dies with "Oops: int3" in __schedule: an emulator artefact, seen when the
 * suite creates and destroys VMs quickly.  Holding one extra enable makes
 * the key constant, so the suite's VM churn patches nothing there.  The key
 * only decides whether (empty) notifier lists are walked, so nothing the
 * tests observe changes.  It uses no KVM symbol and never blocks unloading
 * kvm, kvm_amd or kvmstats.
 */
#include <linux/module.h>
#include <linux/preempt.h>

static int __init ksg_pin_init(void)
{
	preempt_notifier_inc();
	return 0;
}

static void __exit ksg_pin_exit(void)
{
	preempt_notifier_dec();
}

module_init(ksg_pin_init);
module_exit(ksg_pin_exit);
MODULE_DESCRIPTION("kvmstats test guest: keep the preempt notifier key enabled");
MODULE_LICENSE("GPL");
