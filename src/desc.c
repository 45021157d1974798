// SPDX-License-Identifier: GPL-2.0-only
/*
 * The header and descriptors of KVM's stats files, rebuilt for the kernel
 * being compiled against.
 *
 * KVM's own tables (kvm_vm_stats_desc[] and kvm_vcpu_stats_desc[] in
 * arch/x86/kvm/x86.c) are not exported, so kvmstats builds its own from the
 * same ingredients: the generic part comes from the KVM_GENERIC_*_STATS()
 * lists in <linux/kvm_host.h>, the x86 part from the lists below, and every
 * descriptor is expanded by the kernel's own STATS_DESC_*() macros, which
 * take each offset from offsetof() on the headers' struct kvm_vm_stat and
 * struct kvm_vcpu_stat.  What stops this from ever serving wrong numbers:
 *
 *  - a stat renamed or removed in the headers fails the build (offsetof);
 *  - a stat added to the x86 part fails the build (the count assertions);
 *  - at load, kvmstats_check_layouts() proves that the descriptors tile the
 *    stat structs exactly, with no hole and no overlap, and refuses to load
 *    otherwise;
 *  - the kernel window in Kbuild keeps out kernels whose x86.c may order
 *    or type the same fields differently, and the test suite compares every
 *    byte against KVM_GET_STATS_FD on each supported kernel.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/build_bug.h>
#include <linux/string.h>

#include "kvmstats.h"

/*
 * The x86 parts, in the order of x86.c's tables; every x86 statistic is a
 * single u64.
 */
static const struct kvmstats_kdesc kvmstats_vm_desc[] = {
	KVM_GENERIC_VM_STATS(),
	STATS_DESC_COUNTER(VM, mmu_shadow_zapped),
	STATS_DESC_COUNTER(VM, mmu_pte_write),
	STATS_DESC_COUNTER(VM, mmu_pde_zapped),
	STATS_DESC_COUNTER(VM, mmu_flooded),
	STATS_DESC_COUNTER(VM, mmu_recycled),
	STATS_DESC_COUNTER(VM, mmu_cache_miss),
	STATS_DESC_ICOUNTER(VM, mmu_unsync),
	STATS_DESC_ICOUNTER(VM, pages_4k),
	STATS_DESC_ICOUNTER(VM, pages_2m),
	STATS_DESC_ICOUNTER(VM, pages_1g),
	STATS_DESC_ICOUNTER(VM, nx_lpage_splits),
	STATS_DESC_PCOUNTER(VM, max_mmu_rmap_size),
	STATS_DESC_PCOUNTER(VM, max_mmu_page_hash_collisions),
};

static const struct kvmstats_kdesc kvmstats_vcpu_desc[] = {
	KVM_GENERIC_VCPU_STATS(),
	STATS_DESC_COUNTER(VCPU, pf_taken),
	STATS_DESC_COUNTER(VCPU, pf_fixed),
	STATS_DESC_COUNTER(VCPU, pf_emulate),
	STATS_DESC_COUNTER(VCPU, pf_spurious),
	STATS_DESC_COUNTER(VCPU, pf_fast),
	STATS_DESC_COUNTER(VCPU, pf_mmio_spte_created),
	STATS_DESC_COUNTER(VCPU, pf_guest),
	STATS_DESC_COUNTER(VCPU, tlb_flush),
	STATS_DESC_COUNTER(VCPU, invlpg),
	STATS_DESC_COUNTER(VCPU, exits),
	STATS_DESC_COUNTER(VCPU, io_exits),
	STATS_DESC_COUNTER(VCPU, mmio_exits),
	STATS_DESC_COUNTER(VCPU, signal_exits),
	STATS_DESC_COUNTER(VCPU, irq_window_exits),
	STATS_DESC_COUNTER(VCPU, nmi_window_exits),
	STATS_DESC_COUNTER(VCPU, l1d_flush),
	STATS_DESC_COUNTER(VCPU, halt_exits),
	STATS_DESC_COUNTER(VCPU, request_irq_exits),
	STATS_DESC_COUNTER(VCPU, irq_exits),
	STATS_DESC_COUNTER(VCPU, host_state_reload),
	STATS_DESC_COUNTER(VCPU, fpu_reload),
	STATS_DESC_COUNTER(VCPU, insn_emulation),
	STATS_DESC_COUNTER(VCPU, insn_emulation_fail),
	STATS_DESC_COUNTER(VCPU, hypercalls),
	STATS_DESC_COUNTER(VCPU, irq_injections),
	STATS_DESC_COUNTER(VCPU, nmi_injections),
	STATS_DESC_COUNTER(VCPU, req_event),
	STATS_DESC_COUNTER(VCPU, nested_run),
	STATS_DESC_COUNTER(VCPU, directed_yield_attempted),
	STATS_DESC_COUNTER(VCPU, directed_yield_successful),
	STATS_DESC_COUNTER(VCPU, preemption_reported),
	STATS_DESC_COUNTER(VCPU, preemption_other),
	STATS_DESC_IBOOLEAN(VCPU, guest_mode),
	STATS_DESC_COUNTER(VCPU, notify_window_exits),
};

/* The number of descriptors a generic list expands to. */
#define KVMSTATS_NR_GENERIC(list)					\
	(sizeof((const struct kvmstats_kdesc[]){ list }) /		\
	 sizeof(struct kvmstats_kdesc))

/* One descriptor per x86 field: a field added to the headers stops the build. */
static_assert(ARRAY_SIZE(kvmstats_vm_desc) -
	      KVMSTATS_NR_GENERIC(KVM_GENERIC_VM_STATS()) ==
	      (sizeof(struct kvm_vm_stat) -
	       sizeof(struct kvm_vm_stat_generic)) / sizeof(u64));
static_assert(ARRAY_SIZE(kvmstats_vcpu_desc) -
	      KVMSTATS_NR_GENERIC(KVM_GENERIC_VCPU_STATS()) ==
	      (sizeof(struct kvm_vcpu_stat) -
	       sizeof(struct kvm_vcpu_stat_generic)) / sizeof(u64));

/* The wire format: a 16-byte descriptor followed by its name. */
static_assert(sizeof(struct kvmstats_kdesc) ==
	      offsetof(struct kvm_stats_desc, name) + KVM_STATS_NAME_SIZE);
static_assert(offsetof(struct kvmstats_kdesc, name) ==
	      offsetof(struct kvm_stats_desc, name));
static_assert(sizeof_field(struct kvm, stats_id) == KVM_STATS_NAME_SIZE);
static_assert(sizeof_field(struct kvm_vcpu, stats_id) == KVM_STATS_NAME_SIZE);

/* Header and id come first, then the descriptors, then the data. */
#define KVMSTATS_DESC_OFFSET (sizeof(struct kvm_stats_header) + KVM_STATS_NAME_SIZE)

const struct kvmstats_layout kvmstats_vm_layout = {
	.header = {
		.flags = 0,
		.name_size = KVM_STATS_NAME_SIZE,
		.num_desc = ARRAY_SIZE(kvmstats_vm_desc),
		.id_offset = sizeof(struct kvm_stats_header),
		.desc_offset = KVMSTATS_DESC_OFFSET,
		.data_offset = KVMSTATS_DESC_OFFSET + sizeof(kvmstats_vm_desc),
	},
	.desc = kvmstats_vm_desc,
	.desc_size = sizeof(kvmstats_vm_desc),
	.data_size = sizeof(struct kvm_vm_stat),
	.file_size = KVMSTATS_DESC_OFFSET + sizeof(kvmstats_vm_desc) +
		     sizeof(struct kvm_vm_stat),
};

const struct kvmstats_layout kvmstats_vcpu_layout = {
	.header = {
		.flags = 0,
		.name_size = KVM_STATS_NAME_SIZE,
		.num_desc = ARRAY_SIZE(kvmstats_vcpu_desc),
		.id_offset = sizeof(struct kvm_stats_header),
		.desc_offset = KVMSTATS_DESC_OFFSET,
		.data_offset = KVMSTATS_DESC_OFFSET + sizeof(kvmstats_vcpu_desc),
	},
	.desc = kvmstats_vcpu_desc,
	.desc_size = sizeof(kvmstats_vcpu_desc),
	.data_size = sizeof(struct kvm_vcpu_stat),
	.file_size = KVMSTATS_DESC_OFFSET + sizeof(kvmstats_vcpu_desc) +
		     sizeof(struct kvm_vcpu_stat),
};

/* Large enough for struct kvm_vcpu_stat (138 u64s on 6.1 and 6.12). */
#define KVMSTATS_MAX_SLOTS 256

static int kvmstats_check_layout(const struct kvmstats_layout *l,
				 const struct kvmstats_kdesc *table,
				 const char *what)
{
	DECLARE_BITMAP(used, KVMSTATS_MAX_SLOTS);
	size_t slots = l->data_size / sizeof(u64);
	u32 i;

	if (l->data_size % sizeof(u64) || slots > KVMSTATS_MAX_SLOTS) {
		pr_err("%s stats: unexpected size %zu\n", what, l->data_size);
		return -EINVAL;
	}
	bitmap_zero(used, KVMSTATS_MAX_SLOTS);

	for (i = 0; i < l->header.num_desc; i++) {
		/* Both element types start with the wire descriptor. */
		const struct kvm_stats_desc *d = (const void *)&table[i];
		const char *name = (const char *)d +
				   offsetof(struct kvm_stats_desc, name);
		u32 first = d->offset / sizeof(u64);

		if (!d->size || d->offset % sizeof(u64) ||
		    first + d->size > slots ||
		    strnlen(name, KVM_STATS_NAME_SIZE) == KVM_STATS_NAME_SIZE) {
			pr_err("%s stats: descriptor %u is malformed\n", what, i);
			return -EINVAL;
		}
		if (find_next_bit(used, first + d->size, first) < first + d->size) {
			pr_err("%s stats: %s overlaps another statistic\n",
			       what, name);
			return -EINVAL;
		}
		bitmap_set(used, first, d->size);
	}
	if (bitmap_weight(used, slots) != slots) {
		pr_err("%s stats: the descriptors do not cover the statistics\n",
		       what);
		return -EINVAL;
	}
	return 0;
}

/*
 * Refuse to load unless the tables describe the stat structs exactly; the
 * compile-time checks above cannot see into the generic lists.
 */
int kvmstats_check_layouts(void)
{
	int ret;

	ret = kvmstats_check_layout(&kvmstats_vm_layout, kvmstats_vm_desc, "VM");
	if (ret)
		return ret;
	return kvmstats_check_layout(&kvmstats_vcpu_layout, kvmstats_vcpu_desc,
				     "vCPU");
}
