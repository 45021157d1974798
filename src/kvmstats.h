/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef _KVMSTATS_H
#define _KVMSTATS_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/kvm_host.h>
#include <uapi/linux/kvmstats.h>

#include "compat.h"

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

extern const struct kvmstats_layout kvmstats_vm_layout;
extern const struct kvmstats_layout kvmstats_vcpu_layout;

int kvmstats_check_layouts(void);

/*
 * A VM found through a process's VM file: a reference on the VM and one on
 * the module whose code destroys it (NULL where the VM reference pins that
 * module by itself).
 */
struct kvmstats_vm_ref {
	struct kvm *kvm;
	struct module *vendor;
};

void kvmstats_vm_ref_put(struct kvmstats_vm_ref *ref);

long kvmstats_list_vms(struct kvmstats_vm_list __user *ulist);
int kvmstats_get_vm(pid_t pid, int fd, struct kvmstats_vm_ref *ref);

int kvmstats_stats_fd(struct kvmstats_vm_ref *ref, int vcpu);
long kvmstats_read_batch(struct kvmstats_read_batch __user *ubatch);

extern atomic_t kvmstats_live_files;

#endif /* _KVMSTATS_H */
