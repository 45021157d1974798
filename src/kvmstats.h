/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef _KVMSTATS_H
#define _KVMSTATS_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/kvm_host.h>
#include <linux/rcupdate.h>
#include <linux/seqlock.h>
#include <uapi/linux/kvmstats.h>

#include "compat.h"

/* ----- main.c: a debug build's knobs ----- */

#ifdef KVMSTATS_DEBUG
void kvmstats_debug_read_delay(void);
void kvmstats_debug_froze(void);
#else
static inline void kvmstats_debug_read_delay(void)
{
}

static inline void kvmstats_debug_froze(void)
{
}
#endif

/* ----- probe.c: what is learned from the running KVM ----- */

/*
 * A stats file of the running KVM, read whole at load (header, id,
 * descriptors, data), and the stats_id the headers' struct kvm or struct
 * kvm_vcpu held for the same VM or vCPU.
 */
struct kvmstats_ktable {
	void *image;
	size_t size;
	char struct_id[KVM_STATS_NAME_SIZE];
};

int kvmstats_kvm_init(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu);
void kvmstats_kvm_exit(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu);

/* KVM's VM file operations, learned at load (probe.c). */
extern const struct file_operations *kvmstats_kvm_vm_fops;

/*
 * Is @file a KVM VM file?  file_is_kvm()'s own test.  Inline: the
 * listing makes it for every open fd of every process it walks.
 */
static inline bool kvmstats_is_vm_file(const struct file *file)
{
	return file && file->f_op == kvmstats_kvm_vm_fops;
}

/* ----- desc.c: the fixed part of a stats file ----- */

/*
 * The fixed part of a stats file: its header, descriptors and sizes.  One
 * layout describes every VM and one every vCPU of the running kernel.
 */
struct kvmstats_layout {
	struct kvm_stats_header header;
	const void *desc;
	size_t desc_size;
	size_t data_size;
	size_t file_size;
};

extern struct kvmstats_layout kvmstats_vm_layout;
extern struct kvmstats_layout kvmstats_vcpu_layout;

int kvmstats_layouts_init(void);
void kvmstats_layouts_exit(void);

/* ----- lookup.c: finding VMs ----- */

/*
 * A VM found through a process's VM file: a reference on the VM and one on
 * the module whose code destroys it (NULL where the VM reference pins that
 * module by itself).
 */
struct kvmstats_vm_ref {
	struct kvm *kvm;
	struct module *vendor;
};

/* Drop @ref: where it is the VM's last, KVM destroys the VM right here. */
void kvmstats_vm_ref_put(struct kvmstats_vm_ref *ref);

long kvmstats_list_vms(struct kvmstats_vm_list __user *ulist);
long kvmstats_list_pidfd(struct kvmstats_pidfd_list __user *ulist);

/*
 * Find the VM file open as @req->fd in the process @req names, and call
 * @fn(@ctx, file) on it, under the locks that keep it open (spinlocks:
 * @fn must not sleep).  @fn returns 0 or a negative errno.
 */
int kvmstats_find_vm(const struct kvmstats_fd_request *req,
		     int (*fn)(void *ctx, struct file *file), void *ctx);
int kvmstats_get_vm(const struct kvmstats_fd_request *req,
		    struct kvmstats_vm_ref *ref);

/* ----- vcpus.c: the vCPUs of a VM and their threads ----- */

long kvmstats_list_vcpus(struct kvmstats_vcpu_list __user *ulist);

/* ----- vm.c: where a stats file's data comes from, live or frozen ----- */

struct kvmstats_tracker;

/*
 * Where a stats file reads its data block: the live &kvm->stat or
 * &vcpu->stat while someone but kvmstats holds the VM, @frozen once nobody
 * does.  vm.c alone switches @data; readers (statsfd.c) only load it, with
 * preemption disabled (an RCU-sched read side: synchronize_rcu() waits for
 * them), and copy from it inside a read section of @seq, which the switch
 * writes.  The two fields a read touches come first; @frozen is allocated
 * apart, so that the files of a sweep pack densely.
 */
struct kvmstats_source {
	const void __rcu *data;
	seqcount_t seq;
	const void *live;
	void *frozen;			/* @size bytes */
	size_t size;
	struct kvmstats_tracker *vm;	/* while live; under vm.c's lock */
	struct list_head vm_node;	/* in vm->sources */
};

extern atomic_t kvmstats_live_vms;

int kvmstats_source_init(struct kvmstats_source *src, size_t size);
void kvmstats_source_fini(struct kvmstats_source *src);
int kvmstats_source_attach(struct kvmstats_source *src,
			   struct kvmstats_vm_ref *ref, const void *live);
void kvmstats_source_detach(struct kvmstats_source *src);
int kvmstats_vm_init(void);
void kvmstats_vm_exit(void);

/* ----- statsfd.c: stats files ----- */

/*
 * A stats file: its layout, its id and where its data block comes from.
 * Reads take no lock and never wait for the VM.
 */
struct kvmstats_file {
	const struct kvmstats_layout *layout;
	struct kvmstats_source src;
	char id[KVM_STATS_NAME_SIZE];
};

extern atomic_t kvmstats_live_files;

int kvmstats_stats_fd(const struct kvmstats_fd_request *req);
int kvmstats_schema_fd(const struct kvmstats_layout *l, const char *id);
long kvmstats_read_batch(struct kvmstats_read_batch __user *ubatch);

#endif /* _KVMSTATS_H */
