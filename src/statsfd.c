// SPDX-License-Identifier: GPL-2.0-only
/*
 * Stats files: what KVM_GET_STATS_FD returns, for any VM or vCPU.
 *
 * The read path copies the header and descriptors from the layout, the id
 * from the file and the data block from where the file's source points
 * (vm.c): the live struct kvm / struct kvm_vcpu statistics while someone
 * but kvmstats holds the VM, the file's own frozen copy after.  Like KVM's
 * own stats fd it takes no lock, allocates nothing and never waits for the
 * VM or its vCPUs; the data pointer is loaded with preemption disabled, an
 * RCU-sched read side, so that a freeze can tell when no reader uses the
 * live data any more, and nothing in that section sleeps.  While the data
 * pointer is live, the VM's tracker holds a VM reference, and KVM frees a
 * VM and its vCPUs only when the last reference goes (kvm_destroy_vm());
 * vCPUs are never freed alone.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/file.h>
#include <linux/fsnotify.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/sched/xacct.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

atomic_t kvmstats_live_files = ATOMIC_INIT(0);

/*
 * Copy @len bytes at @off of @src's data block to @ubuf.
 *
 * The data pointer is only good inside a read-side section, where nothing
 * may sleep: preemption is disabled, which synchronize_rcu() waits for
 * (one out-of-line call fewer each way than rcu_read_lock() on a
 * preemptible kernel, and a freeze's wait is the same grace period).
 * Besides, a reader whose buffer faults could sleep for as long as it
 * likes (userfaultfd, FUSE, slow storage), and a freeze waits for every
 * reader that may still use a live pointer before it gives the VM back. So
 * the copy to user memory is made with page faults disabled: a buffer that
 * is mapped and writable (the usual case) takes it in one go, as KVM's own
 * read does; what faults goes through a small bounce buffer on the stack,
 * filled inside the section with plain loads and copied to the user
 * outside it.
 *
 * Each copy from the data block is made inside a read section of
 * @src->seq, and made again if a freeze ran meanwhile: a copy that is not
 * repeated returned nothing newer than the frozen copy every later read
 * returns (vm.c, kvmstats_source_freeze()).  A freeze between two chunks
 * is harmless for the same reason.  A reader only spins while a freeze on
 * another CPU copies one data block, with preemption disabled.
 */
static int kvmstats_copy_data(const struct kvmstats_source *src,
			      char __user *ubuf, size_t off, size_t len)
{
	u64 bounce[32];
	unsigned long left;
	unsigned int seq;
	size_t n;

	if (!access_ok(ubuf, len))
		return -EFAULT;
	preempt_disable();
	pagefault_disable();
	do {
		const void *from;

		seq = read_seqcount_begin(&src->seq);
		from = rcu_dereference_sched(src->data) + off;
		kvmstats_debug_read_delay();
		left = __copy_to_user_inatomic(ubuf, from, len);
		kvmstats_read_done();
	} while (read_seqcount_retry(&src->seq, seq));
	pagefault_enable();
	preempt_enable();

	off += len - left;
	ubuf += len - left;
	for (len = left; len; off += n, ubuf += n, len -= n) {
		n = min(len, sizeof(bounce));
		preempt_disable();
		do {
			seq = read_seqcount_begin(&src->seq);
			memcpy(bounce, rcu_dereference_sched(src->data) + off,
			       n);
			kvmstats_read_done();
		} while (read_seqcount_retry(&src->seq, seq));
		preempt_enable();
		if (copy_to_user(ubuf, bounce, n))
			return -EFAULT;
	}
	return 0;
}

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
		const void *src;	/* NULL: the data block, see below */
		size_t start;
		size_t len;
	} block[] = {
		{ &l->header, 0, sizeof(l->header) },
		{ sf->id, l->header.id_offset, l->header.name_size },
		{ l->desc, l->header.desc_offset, l->desc_size },
		{ NULL, l->header.data_offset, l->data_size },
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
		if (!block[i].src) {
			if (kvmstats_copy_data(&sf->src, buf + (from - start),
					       from - block[i].start, to - from))
				return -EFAULT;
		} else if (copy_to_user(buf + (from - start),
					block[i].src + (from - block[i].start),
					to - from)) {
			return -EFAULT;
		}
	}
	*pos = end;
	return end - start;
}

static ssize_t kvmstats_file_read(struct file *file, char __user *buf,
				  size_t size, loff_t *pos)
{
	return kvmstats_copy(file->private_data, buf, size, pos);
}

static void kvmstats_file_free(struct kvmstats_file *sf)
{
	kvmstats_source_fini(&sf->src);
	kfree(sf);
}

static int kvmstats_file_release(struct inode *inode, struct file *file)
{
	struct kvmstats_file *sf = file->private_data;

	pr_debug("released a stats file of %s\n", sf->id);
	kvmstats_source_detach(&sf->src);
	kvmstats_file_free(sf);
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
 * A stats file of layout @l, not yet attached or installed: until it is
 * attached it reads as a frozen file of zeros.
 */
static struct kvmstats_file *kvmstats_file_alloc(const struct kvmstats_layout *l)
{
	struct kvmstats_file *sf = kzalloc(sizeof(*sf), GFP_KERNEL_ACCOUNT);

	if (!sf)
		return NULL;
	if (kvmstats_source_init(&sf->src, l->data_size)) {
		kfree(sf);
		return NULL;
	}
	sf->layout = l;
	return sf;
}

/*
 * An fd for @sf, whose data pointer is set: KVM's own order, with
 * fd_install() last, so that no error path has to take back an installed
 * fd.  On failure @sf is the caller's.
 */
static int kvmstats_file_install(struct kvmstats_file *sf, const char *name)
{
	struct file *file;
	int fd;

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0)
		return fd;
	file = anon_inode_getfile(name, &kvmstats_file_fops, sf, O_RDONLY);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		return PTR_ERR(file);
	}
	/* Pseudo files do not get FMODE_PREAD by themselves. */
	file->f_mode |= FMODE_PREAD;
	atomic_inc(&kvmstats_live_files);
	pr_debug("created a stats file of %s\n", sf->id);
	fd_install(fd, file);
	return fd;
}

/*
 * Make a stats file for the VM named by @req (@req->vcpu < 0) or for its
 * vCPU number @req->vcpu, and return its fd.  A VM reference dropped here
 * (the vCPU does not exist, an allocation failed) may be the VM's last if
 * its VMM closed its fds meanwhile: KVM then destroys the VM in the
 * caller's context, as when the last holder of one of its own stats files
 * closes it.
 */
int kvmstats_stats_fd(const struct kvmstats_fd_request *req)
{
	char name[sizeof("kvmstats-vcpu:") + 11];
	struct kvmstats_vm_ref ref;
	struct kvmstats_file *sf;
	const void *live;
	int ret;

	sf = kvmstats_file_alloc(req->vcpu < 0 ? &kvmstats_vm_layout :
						 &kvmstats_vcpu_layout);
	if (!sf)
		return -ENOMEM;

	ret = kvmstats_get_vm(req, &ref);
	if (ret)
		goto err_free;

	if (req->vcpu < 0) {
		memcpy(sf->id, ref.kvm->stats_id, sizeof(sf->id));
		live = &ref.kvm->stat;
		strscpy(name, "kvmstats-vm", sizeof(name));
	} else {
		/* Only indexes below online_vcpus are published vCPUs. */
		struct kvm_vcpu *v = NULL;

		if (req->vcpu < atomic_read(&ref.kvm->online_vcpus))
			v = kvm_get_vcpu(ref.kvm, req->vcpu);
		if (!v) {
			kvmstats_vm_ref_put(&ref);
			ret = -ENOENT;
			goto err_free;
		}
		memcpy(sf->id, v->stats_id, sizeof(sf->id));
		live = &v->stat;
		snprintf(name, sizeof(name), "kvmstats-vcpu:%d", v->vcpu_id);
	}
	ret = kvmstats_source_attach(&sf->src, &ref, live);
	if (ret)
		goto err_free;

	/* From here on the tracker holds the VM; detaching gives it back. */
	ret = kvmstats_file_install(sf, name);
	if (ret < 0) {
		kvmstats_source_detach(&sf->src);
		goto err_free;
	}
	return ret;

err_free:
	kvmstats_file_free(sf);
	return ret;
}

/*
 * A file laid out as a stats file, with the header and descriptors of
 * @l, the id @id and a data block of zeros (KVMSTATS_GET_SCHEMA_FD): it
 * belongs to no VM, and reads exactly as a frozen stats file does.
 */
int kvmstats_schema_fd(const struct kvmstats_layout *l, const char *id)
{
	struct kvmstats_file *sf = kvmstats_file_alloc(l);
	int ret;

	if (!sf)
		return -ENOMEM;
	strscpy(sf->id, id, sizeof(sf->id));
	ret = kvmstats_file_install(sf, "kvmstats-schema");
	if (ret < 0)
		kvmstats_file_free(sf);
	return ret;
}

/*
 * vfs_read() for a stats file, which READ_BATCH cannot call (it is not
 * exported): pread(2)'s checks in pread(2)'s order, the LSM's read hook
 * and the access event for inotify/fanotify included.
 */
static ssize_t kvmstats_vfs_read(struct file *file, char __user *buf,
				 size_t count, loff_t *pos)
{
	ssize_t ret;

	if (!(file->f_mode & FMODE_PREAD))
		return -ESPIPE;
	if (!(file->f_mode & FMODE_READ))
		return -EBADF;
	if (!access_ok(buf, count))
		return -EFAULT;
	ret = rw_verify_area(READ, file, pos, count);
	if (ret)
		return ret;
	count = min_t(size_t, count, MAX_RW_COUNT);
	ret = kvmstats_copy(file->private_data, buf, count, pos);
	if (ret > 0) {
		fsnotify_access(file);
		add_rchar(current, ret);
	}
	inc_syscr(current);
	return ret;
}

/* One op of a batch: pread(2) on a stats fd. */
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
	else
		ret = kvmstats_vfs_read(fd_file(f), buf, op->len, &pos);
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
		/* Up to 4096 ops: let others run on a kernel without preemption. */
		cond_resched();
	}
	return 0;
}
