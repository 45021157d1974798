// SPDX-License-Identifier: GPL-2.0-only
/*
 * Stats files: what KVM_GET_STATS_FD returns, for any VM or vCPU.
 *
 * The read path copies straight from the live struct kvm / struct kvm_vcpu
 * the file was made for, exactly like KVM's own stats fd: no lock, no
 * allocation, nothing that waits for the VM or its vCPUs.  It is safe
 * because the file holds a reference on the VM (users_count), and KVM frees
 * a VM and all of its vCPUs only when that count drops to zero, in
 * kvm_destroy_vm().  vCPUs are never freed individually, so a vCPU pointer
 * taken while the VM reference is held stays valid for as long as it is.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/file.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

atomic_t kvmstats_live_files = ATOMIC_INIT(0);

struct kvmstats_file {
	const struct kvmstats_layout *layout;
	const char *id;			/* kvm->stats_id or vcpu->stats_id */
	const void *data;		/* &kvm->stat or &vcpu->stat */
	struct kvmstats_vm_ref ref;	/* keeps the above alive */
};

/*
 * A stats file is four blocks back to back (see the uapi header):
 *
 *   [ header | id | descriptors | data ]
 *
 * Copy the part of [*pos, *pos + size) that lies inside the file, block by
 * block.  Same contract as KVM's kvm_stats_read(): any offset and length, 0
 * at or past the end, -EFAULT (with *pos untouched) if the user buffer
 * faults.
 */
static ssize_t kvmstats_copy(const struct kvmstats_file *sf, char __user *buf,
			     size_t size, loff_t *pos)
{
	const struct kvmstats_layout *l = sf->layout;
	const struct {
		const void *src;
		size_t start;
		size_t len;
	} block[] = {
		{ &l->header, 0, sizeof(l->header) },
		{ sf->id, l->header.id_offset, l->header.name_size },
		{ l->desc, l->header.desc_offset, l->desc_size },
		{ sf->data, l->header.data_offset, l->data_size },
	};
	size_t start, end;
	unsigned int i;

	if (*pos < 0)
		return -EINVAL;
	if (*pos >= l->file_size)
		return 0;
	start = *pos;
	end = start + min(size, l->file_size - start);

	for (i = 0; i < ARRAY_SIZE(block); i++) {
		size_t from = max(start, block[i].start);
		size_t to = min(end, block[i].start + block[i].len);

		if (from >= to)
			continue;
		if (copy_to_user(buf + (from - start),
				 block[i].src + (from - block[i].start),
				 to - from))
			return -EFAULT;
	}
	*pos = end;
	return end - start;
}

static ssize_t kvmstats_file_read(struct file *file, char __user *buf,
				  size_t size, loff_t *pos)
{
	return kvmstats_copy(file->private_data, buf, size, pos);
}

static int kvmstats_file_release(struct inode *inode, struct file *file)
{
	struct kvmstats_file *sf = file->private_data;

	pr_debug("released a stats file of %s\n", sf->id);
	kvmstats_vm_ref_put(&sf->ref);
	kfree(sf);
	atomic_dec(&kvmstats_live_files);
	return 0;
}

/* As KVM's: reads only, and an llseek that never moves (use pread). */
static const struct file_operations kvmstats_file_fops = {
	.owner = THIS_MODULE,
	.read = kvmstats_file_read,
	.release = kvmstats_file_release,
	.llseek = noop_llseek,
};

/*
 * Make a stats file for the VM in @ref (@vcpu < 0) or for its vCPU number
 * @vcpu, and return its fd.  On success the file owns @ref; on failure
 * @ref is left to the caller.
 */
int kvmstats_stats_fd(struct kvmstats_vm_ref *ref, int vcpu)
{
	char name[sizeof("kvmstats-vcpu:") + 11];
	struct kvmstats_file *sf;
	struct file *file;
	int fd;

	sf = kzalloc(sizeof(*sf), GFP_KERNEL_ACCOUNT);
	if (!sf)
		return -ENOMEM;

	if (vcpu < 0) {
		sf->layout = &kvmstats_vm_layout;
		sf->id = ref->kvm->stats_id;
		sf->data = &ref->kvm->stat;
		strscpy(name, "kvmstats-vm", sizeof(name));
	} else {
		/* Only indexes below online_vcpus are published vCPUs. */
		struct kvm_vcpu *v = NULL;

		if (vcpu < atomic_read(&ref->kvm->online_vcpus))
			v = kvm_get_vcpu(ref->kvm, vcpu);
		if (!v) {
			kfree(sf);
			return -ENOENT;
		}
		sf->layout = &kvmstats_vcpu_layout;
		sf->id = v->stats_id;
		sf->data = &v->stat;
		snprintf(name, sizeof(name), "kvmstats-vcpu:%d", v->vcpu_id);
	}

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		kfree(sf);
		return fd;
	}
	file = anon_inode_getfile(name, &kvmstats_file_fops, sf, O_RDONLY);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		kfree(sf);
		return PTR_ERR(file);
	}
	/* Pseudo files do not get FMODE_PREAD by themselves. */
	file->f_mode |= FMODE_PREAD;
	sf->ref = *ref;
	atomic_inc(&kvmstats_live_files);
	pr_debug("created a stats file of %s\n", sf->id);
	fd_install(fd, file);
	return fd;
}

/*
 * One op of a batch, with pread(2)'s checks in pread(2)'s order: the
 * offset, the fd, the buffer (even when nothing would be copied), then the
 * range.
 */
static int kvmstats_read_op(const struct kvmstats_read_op *op)
{
	char __user *buf = u64_to_user_ptr(op->buf);
	loff_t pos = op->offset;
	struct fd f;
	ssize_t ret;

	if (op->flags || op->offset > LLONG_MAX)
		return -EINVAL;
	f = fdget(op->fd);
	if (!fd_file(f))
		return -EBADF;
	if (fd_file(f)->f_op != &kvmstats_file_fops)
		ret = -EINVAL;
	else if (!access_ok(buf, op->len))
		ret = -EFAULT;
	else if ((loff_t)(op->offset + op->len) < 0)
		ret = -EINVAL;
	else
		ret = kvmstats_copy(fd_file(f)->private_data, buf, op->len,
				    &pos);
	fdput(f);
	return ret;
}

/*
 * Fill many buffers from many stats files in one system call: a host-wide
 * sweep then costs one syscall rather than one per VM and vCPU.  Lock-free
 * and allocation-free like a single read.
 */
long kvmstats_read_batch(struct kvmstats_read_batch __user *ubatch)
{
	struct kvmstats_read_op __user *uops;
	struct kvmstats_read_batch batch;
	struct kvmstats_read_op op;
	u32 i;

	if (copy_from_user(&batch, ubatch, sizeof(batch)))
		return -EFAULT;
	if (batch.flags || batch.reserved[0] || batch.reserved[1] ||
	    batch.nr > KVMSTATS_BATCH_MAX)
		return -EINVAL;

	uops = u64_to_user_ptr(batch.ops);
	for (i = 0; i < batch.nr; i++) {
		if (copy_from_user(&op, &uops[i], sizeof(op)))
			return -EFAULT;
		if (put_user(kvmstats_read_op(&op), &uops[i].result))
			return -EFAULT;
	}
	return 0;
}
