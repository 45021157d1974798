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
 *  - a stat added to the x86 part fails the build (the size assertions);
 *  - at load, kvmstats_check_layouts() proves that the descriptors tile the
 *    stat structs exactly, with no hole and no overlap, and refuses to load
 *    otherwise;
 *  - the kernel window in compat.h keeps out kernels whose x86.c may order
 *    or type the same fields differently, and the test suite compares every
 *    byte against KVM_GET_STATS_FD on each supported kernel.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/build_bug.h>
#include <linux/string.h>

#include "kvmstats.h"

/*
 * The x86 statistics that follow the generic ones, in the order of x86.c's
 * tables.  C: cumulative counter, I: instant counter, P: peak counter,
 * B: instant boolean.
 */
#define KVMSTATS_X86_VM_STATS(C, I, P)					\
	C(mmu_shadow_zapped) C(mmu_pte_write) C(mmu_pde_zapped)		\
	C(mmu_flooded) C(mmu_recycled) C(mmu_cache_miss)		\
	I(mmu_unsync) I(pages_4k) I(pages_2m) I(pages_1g)		\
	I(nx_lpage_splits)						\
	P(max_mmu_rmap_size) P(max_mmu_page_hash_collisions)

#define KVMSTATS_X86_VCPU_STATS(C, B)					\
	C(pf_taken) C(pf_fixed) C(pf_emulate) C(pf_spurious) C(pf_fast)	\
	C(pf_mmio_spte_created) C(pf_guest) C(tlb_flush) C(invlpg)	\
	C(exits) C(io_exits) C(mmio_exits) C(signal_exits)		\
	C(irq_window_exits) C(nmi_window_exits) C(l1d_flush)		\
	C(halt_exits) C(request_irq_exits) C(irq_exits)			\
	C(host_state_reload) C(fpu_reload) C(insn_emulation)		\
	C(insn_emulation_fail) C(hypercalls) C(irq_injections)		\
	C(nmi_injections) C(req_event) C(nested_run)			\
	C(directed_yield_attempted) C(directed_yield_successful)	\
	C(preemption_reported) C(preemption_other) B(guest_mode)	\
	C(notify_window_exits)

#define VM_C(stat) STATS_DESC_COUNTER(VM, stat),
#define VM_I(stat) STATS_DESC_ICOUNTER(VM, stat),
#define VM_P(stat) STATS_DESC_PCOUNTER(VM, stat),
#define VCPU_C(stat) STATS_DESC_COUNTER(VCPU, stat),
#define VCPU_B(stat) STATS_DESC_IBOOLEAN(VCPU, stat),
#define COUNT_ONE(stat) + 1

static const struct kvmstats_kdesc kvmstats_vm_desc[] = {
	KVM_GENERIC_VM_STATS(),
	KVMSTATS_X86_VM_STATS(VM_C, VM_I, VM_P)
};

static const struct kvmstats_kdesc kvmstats_vcpu_desc[] = {
	KVM_GENERIC_VCPU_STATS(),
	KVMSTATS_X86_VCPU_STATS(VCPU_C, VCPU_B)
};

/* Every x86 stat is one u64: the x86 lists must cover the x86 fields. */
static_assert(sizeof(struct kvm_vm_stat) == sizeof(struct kvm_vm_stat_generic) +
	      sizeof(u64) * (0 KVMSTATS_X86_VM_STATS(COUNT_ONE, COUNT_ONE, COUNT_ONE)));
static_assert(sizeof(struct kvm_vcpu_stat) == sizeof(struct kvm_vcpu_stat_generic) +
	      sizeof(u64) * (0 KVMSTATS_X86_VCPU_STATS(COUNT_ONE, COUNT_ONE)));

/* The wire format: a 16-byte descriptor followed by its name. */
static_assert(sizeof(struct kvmstats_kdesc) ==
	      offsetof(struct kvm_stats_desc, name) + KVM_STATS_NAME_SIZE);
static_assert(sizeof_field(struct kvm, stats_id) == KVM_STATS_NAME_SIZE);
static_assert(sizeof_field(struct kvm_vcpu, stats_id) == KVM_STATS_NAME_SIZE);

#define KVMSTATS_LAYOUT(table, stat_struct)				\
{									\
	.header = {							\
		.flags = 0,						\
		.name_size = KVM_STATS_NAME_SIZE,			\
		.num_desc = ARRAY_SIZE(table),				\
		.id_offset = sizeof(struct kvm_stats_header),		\
		.desc_offset = sizeof(struct kvm_stats_header) +	\
			       KVM_STATS_NAME_SIZE,			\
		.data_offset = sizeof(struct kvm_stats_header) +	\
			       KVM_STATS_NAME_SIZE + sizeof(table),	\
	},								\
	.desc = table,							\
	.desc_size = sizeof(table),					\
	.data_size = sizeof(stat_struct),				\
	.file_size = sizeof(struct kvm_stats_header) +			\
		     KVM_STATS_NAME_SIZE + sizeof(table) +		\
		     sizeof(stat_struct),				\
}

const struct kvmstats_layout kvmstats_vm_layout =
	KVMSTATS_LAYOUT(kvmstats_vm_desc, struct kvm_vm_stat);
const struct kvmstats_layout kvmstats_vcpu_layout =
	KVMSTATS_LAYOUT(kvmstats_vcpu_desc, struct kvm_vcpu_stat);

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
