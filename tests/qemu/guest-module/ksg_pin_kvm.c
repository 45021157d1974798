// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test-guest helper, loaded right after kvm.ko: keep KVM's
 * kvm_has_noapic_vcpu static key enabled for the whole boot.
 *
 * KVM enables that key when the first vCPU without an in-kernel local APIC
 * is created and disables it when the last one goes, and each flip
 * live-patches kvm.ko's text.  The suite's VMs have no in-kernel irqchip, so
 * every test program would flip it, with the same multi-threaded TCG hazard
 * ksg_pin.c describes.  With the key held on, lapic_in_kernel() always looks
 * at the vCPU's APIC pointer, the correct (slower) path for every vCPU, so
 * nothing the tests observe changes.  It pins kvm.ko (a symbol dependency),
 * which no test unloads; it never blocks unloading kvm_amd or kvmstats.
 */
#include <linux/jump_label.h>
#include <linux/module.h>

/* Exported by kvm.ko; declared in arch/x86/kvm/lapic.h, not in the headers. */
extern struct static_key_false kvm_has_noapic_vcpu;

static int __init ksg_pin_kvm_init(void)
{
	static_branch_inc(&kvm_has_noapic_vcpu);
	return 0;
}

static void __exit ksg_pin_kvm_exit(void)
{
	static_branch_dec(&kvm_has_noapic_vcpu);
}

module_init(ksg_pin_kvm_init);
module_exit(ksg_pin_kvm_exit);
MODULE_DESCRIPTION("kvmstats test guest: keep kvm_has_noapic_vcpu enabled");
MODULE_LICENSE("GPL");
