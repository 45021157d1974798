// SPDX-License-Identifier: GPL-2.0-only
/*
 * The fixed part of KVM's stats files (header and descriptors), learned
 * from the running KVM (probe.c), and the proof that it can be served
 * exactly.
 *
 * A stats file is the header, the id, the descriptors and the data block;
 * kvmstats copies the data block from &kvm->stat or &vcpu->stat, and the id
 * from kvm->stats_id or vcpu->stats_id, whose types and offsets come from
 * the headers it was built against.  The header and descriptors come from
 * the running kernel.  So before serving anything, kvmstats proves that
 * the two agree, and refuses to load with the reason if they do not.  It
 * never serves numbers it cannot vouch for:
 *
 *  - the header has the shape every binary-stats kernel gives it (id right
 *    after the header, descriptors after the id, data after them), and the
 *    data block of KVM's file is exactly as large as the headers' stat
 *    struct;
 *  - the id in KVM's file is the stats_id the headers' struct kvm and
 *    struct kvm_vcpu hold for the same VM and vCPU: the headers place the
 *    fields where the running kernel does;
 *  - every descriptor is well formed and inside the stat struct, and
 *    together they tile the headers' struct kvm_vm_stat / kvm_vcpu_stat
 *    exactly: no hole, no overlap.  A struct that grew or shrank between
 *    the headers and the running kernel leaves a descriptor outside or a
 *    hole inside;
 *  - every generic statistic, expanded here from the headers' own
 *    KVM_GENERIC_*_STATS() lists by the kernel's STATS_DESC_*() macros, is
 *    in the running table with the same flags, exponent, size, offset and
 *    bucket size: the headers and the running KVM place them alike.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/build_bug.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "kvmstats.h"

struct kvmstats_layout kvmstats_vm_layout __ro_after_init;
struct kvmstats_layout kvmstats_vcpu_layout __ro_after_init;

static struct kvmstats_ktable kvmstats_vm_table, kvmstats_vcpu_table;

static const struct kvm_stats_header *
kvmstats_table_header(const struct kvmstats_ktable *t)
{
	return t->image;
}

static const void *kvmstats_table_desc(const struct kvmstats_ktable *t)
{
	return t->image + kvmstats_table_header(t)->desc_offset;
}

/* The generic statistics, as the headers see them. */
static const struct kvmstats_kdesc kvmstats_vm_generic[] = {
	KVM_GENERIC_VM_STATS()
};

static const struct kvmstats_kdesc kvmstats_vcpu_generic[] = {
	KVM_GENERIC_VCPU_STATS()
};

/* The wire format: a 16-byte descriptor followed by its name. */
#define KVMSTATS_DESC_SIZE (offsetof(struct kvm_stats_desc, name) + KVM_STATS_NAME_SIZE)
static_assert(sizeof(struct kvmstats_kdesc) == KVMSTATS_DESC_SIZE);
static_assert(offsetof(struct kvmstats_kdesc, name) ==
	      offsetof(struct kvm_stats_desc, name));
static_assert(sizeof_field(struct kvm, stats_id) == KVM_STATS_NAME_SIZE);
static_assert(sizeof_field(struct kvm_vcpu, stats_id) == KVM_STATS_NAME_SIZE);

static const struct kvm_stats_desc *kvmstats_desc(const void *table, u32 i)
{
	return table + (size_t)i * KVMSTATS_DESC_SIZE;
}

static const char *kvmstats_desc_name(const struct kvm_stats_desc *d)
{
	return (const char *)d + offsetof(struct kvm_stats_desc, name);
}

static int kvmstats_check_header(const struct kvmstats_ktable *t,
				 size_t data_size, const char *what)
{
	const struct kvm_stats_header *h = t->image;
	size_t desc_size;

	if (t->size < sizeof(*h)) {
		pr_err("%s stats: the running KVM's file is only %zu bytes\n",
		       what, t->size);
		return -EINVAL;
	}
	desc_size = (size_t)h->num_desc * KVMSTATS_DESC_SIZE;
	if (h->flags || h->name_size != KVM_STATS_NAME_SIZE ||
	    h->id_offset != sizeof(*h) ||
	    h->desc_offset != h->id_offset + h->name_size ||
	    h->data_offset != h->desc_offset + desc_size || !h->num_desc ||
	    h->data_offset > t->size) {
		pr_err("%s stats: the running KVM's header has a shape kvmstats does not know\n",
		       what);
		return -EINVAL;
	}
	if (t->size - h->data_offset != data_size) {
		pr_err("%s stats: the running KVM's data block is %zu bytes, the headers' stat struct %zu: the headers are not this kernel's\n",
		       what, t->size - h->data_offset, data_size);
		return -EINVAL;
	}
	if (memcmp(t->image + h->id_offset, t->struct_id, h->name_size)) {
		pr_err("%s stats: the id in KVM's file is not the one the headers' struct holds: the headers are not this kernel's\n",
		       what);
		return -EINVAL;
	}
	return 0;
}

/* The descriptors tile the @data_size bytes of the stat struct exactly. */
static int kvmstats_check_tiling(const struct kvmstats_ktable *t,
				 size_t data_size, const char *what)
{
	u32 i, nr = kvmstats_table_header(t)->num_desc;
	const void *desc = kvmstats_table_desc(t);
	size_t slots = data_size / sizeof(u64);
	unsigned long *used;
	int ret = -EINVAL;

	if (!data_size || data_size % sizeof(u64))
		return -EINVAL;
	used = bitmap_zalloc(slots, GFP_KERNEL);
	if (!used)
		return -ENOMEM;

	for (i = 0; i < nr; i++) {
		const struct kvm_stats_desc *d = kvmstats_desc(desc, i);
		const char *name = kvmstats_desc_name(d);
		size_t first = d->offset / sizeof(u64);

		if (strnlen(name, KVM_STATS_NAME_SIZE) == KVM_STATS_NAME_SIZE ||
		    !name[0] || !d->size || d->offset % sizeof(u64)) {
			pr_err("%s stats: descriptor %u is malformed\n", what, i);
			goto out;
		}
		if (first + d->size > slots) {
			pr_err("%s stats: %s lies outside the headers' stat struct (%zu bytes): the headers are not this kernel's\n",
			       what, name, data_size);
			goto out;
		}
		if (find_next_bit(used, first + d->size, first) < first + d->size) {
			pr_err("%s stats: %s overlaps another statistic\n",
			       what, name);
			goto out;
		}
		bitmap_set(used, first, d->size);
	}
	if (!bitmap_full(used, slots)) {
		pr_err("%s stats: the descriptors leave part of the headers' stat struct (%zu bytes) undescribed: the headers are not this kernel's\n",
		       what, data_size);
		goto out;
	}
	ret = 0;
out:
	bitmap_free(used);
	return ret;
}

/* The headers' generic statistics are in the running table, alike. */
static int kvmstats_check_generic(const struct kvmstats_ktable *t,
				  const struct kvmstats_kdesc *generic,
				  size_t nr_generic, const char *what)
{
	u32 i, nr = kvmstats_table_header(t)->num_desc;
	const void *desc = kvmstats_table_desc(t);
	size_t g;

	for (g = 0; g < nr_generic; g++) {
		const struct kvm_stats_desc *want = (const void *)&generic[g];
		const char *name = kvmstats_desc_name(want);

		for (i = 0; i < nr; i++) {
			const struct kvm_stats_desc *d = kvmstats_desc(desc, i);

			if (!strncmp(kvmstats_desc_name(d), name,
				     KVM_STATS_NAME_SIZE))
				break;
		}
		if (i == nr) {
			pr_err("%s stats: the running KVM has no %s, which the headers have\n",
			       what, name);
			return -EINVAL;
		}
		if (memcmp(kvmstats_desc(desc, i), want,
			   offsetof(struct kvm_stats_desc, name))) {
			pr_err("%s stats: the running KVM and the headers describe %s differently\n",
			       what, name);
			return -EINVAL;
		}
	}
	return 0;
}

static int kvmstats_layout_init(struct kvmstats_layout *l,
				const struct kvmstats_ktable *t,
				size_t data_size,
				const struct kvmstats_kdesc *generic,
				size_t nr_generic, const char *what)
{
	int ret;

	ret = kvmstats_check_header(t, data_size, what);
	if (!ret)
		ret = kvmstats_check_tiling(t, data_size, what);
	if (!ret)
		ret = kvmstats_check_generic(t, generic, nr_generic, what);
	if (ret)
		return ret;

	l->header = *kvmstats_table_header(t);
	l->desc = kvmstats_table_desc(t);
	l->desc_size = l->header.data_offset - l->header.desc_offset;
	l->data_size = data_size;
	l->file_size = t->size;
	return 0;
}

int kvmstats_layouts_init(void)
{
	int ret;

	ret = kvmstats_kvm_init(&kvmstats_vm_table, &kvmstats_vcpu_table);
	if (ret)
		return ret;
	ret = kvmstats_layout_init(&kvmstats_vm_layout, &kvmstats_vm_table,
				   sizeof(struct kvm_vm_stat),
				   kvmstats_vm_generic,
				   ARRAY_SIZE(kvmstats_vm_generic), "VM");
	if (!ret)
		ret = kvmstats_layout_init(&kvmstats_vcpu_layout,
					   &kvmstats_vcpu_table,
					   sizeof(struct kvm_vcpu_stat),
					   kvmstats_vcpu_generic,
					   ARRAY_SIZE(kvmstats_vcpu_generic),
					   "vCPU");
	if (ret) {
		pr_err("this kernel's KVM statistics cannot be served exactly; not loading\n");
		kvmstats_kvm_exit(&kvmstats_vm_table, &kvmstats_vcpu_table);
		return ret;
	}
	pr_info("serving the running KVM's %u VM and %u vCPU statistics\n",
		kvmstats_vm_layout.header.num_desc,
		kvmstats_vcpu_layout.header.num_desc);
	return 0;
}

void kvmstats_layouts_exit(void)
{
	kvmstats_kvm_exit(&kvmstats_vm_table, &kvmstats_vcpu_table);
}
