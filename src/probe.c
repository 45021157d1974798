// SPDX-License-Identifier: GPL-2.0-only
/*
 * What kvmstats needs of KVM and KVM keeps to itself, learned at load the
 * way any process may learn it: by asking KVM.
 *
 *   the header and descriptors of a VM and of a vCPU stats file
 *   KVM's VM file operations (what makes a file a VM file)
 *
 * Every VM of a running KVM has the same stats header and descriptors, and
 * so has every vCPU: KVM builds them once, from its own tables.  So module
 * init, in the context of the process loading the module (modprobe, as
 * root), opens /dev/kvm, creates a VM and one vCPU, asks each for its stats
 * fd (KVM_GET_STATS_FD, allowed: the VM belongs to this very process) and
 * reads the two files whole.  Their bytes are what kvmstats serves, so a
 * kernel whose KVM adds, removes or reorders statistics is served exactly,
 * with no table of kvmstats' own to go stale; desc.c proves that they
 * describe the stat structs of the headers kvmstats was built against.
 * The VM file KVM returned carries KVM's VM file operations, and
 * kvmstats_is_vm_file() compares a file's operations with them: exactly the
 * test file_is_kvm() makes, which newer kernels export to KVM's own modules
 * only.  No process can make a file with those operations but through
 * KVM_CREATE_VM, and a file's private_data is read only after the test.
 *
 * KVM copies a stats file to user memory only (copy_to_user(); the files
 * have no read_iter, so kernel_read() refuses them), so the files are read
 * into a page mapped for the purpose in the loading process.  The fds KVM
 * installs are closed at once; the files are put when init is done and the
 * VM is destroyed as the loading process returns to user space, like any
 * VM whose last fd goes.
 *
 * Each fd lives in the loader's file table, which other threads of the
 * loader may share and change before the file is taken from it; so each
 * file taken is checked to be the one KVM made: an anonymous-inode file
 * with the name KVM gives it ("kvm-vm", "kvm-vcpu:0", "kvm-vm-stats",
 * "kvm-vcpu-stats:0": only KVM names such files), the vCPU one of that VM
 * and each stats file one of that VM or vCPU.  Anything else is refused
 * (-EBADF), and nothing is learned from it.
 *
 * What loading does to the host: one VM with one vCPU exists for the
 * duration of module init, in the loading process (KVM sends a create and
 * a destroy uevent for it, and its stats_id names the loading thread); on
 * kernels that enable hardware virtualization only while a VM exists
 * (6.x x86 without enable_virt_at_load, or with it off), virtualization is
 * enabled for it and disabled again when no other VM exists.  The ioctls
 * go through the security hooks a process's ioctl would (the LSM sees the
 * loading process create a VM), and an LSM or device cgroup that refuses
 * the loader /dev/kvm or KVM_CREATE_VM is reported as such.
 *
 * Where KVM is not usable at load (no /dev/kvm: the vendor module is not
 * loaded, or the CPU or firmware offers no virtualization), there are no
 * VMs to serve either: kvmstats refuses to load with one line saying so.
 * Everything learned belongs to kvm.ko or the kernel, which stays while
 * kvmstats is loaded: kvmstats uses kvm's exports.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/kdev_t.h>
#include <linux/major.h>
#include <linux/miscdevice.h>
#include <linux/security.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

/* Larger than any stats file a KVM serves: 64 KiB is a thousand stats. */
#define KVMSTATS_PROBE_FILE_MAX	(64 * 1024)

const struct file_operations *kvmstats_kvm_vm_fops __ro_after_init;

/* An ioctl on @file as a process's ioctl(2) makes it, LSM hook included. */
static long kvmstats_probe_ioctl(struct file *file, unsigned int cmd,
				 unsigned long arg)
{
	long ret;

	if (!file->f_op->unlocked_ioctl)
		return -ENOTTY;
	ret = security_file_ioctl(file, cmd, arg);
	if (ret)
		return ret;
	return file->f_op->unlocked_ioctl(file, cmd, arg);
}

/* Is @file an anonymous-inode file named @name, as KVM makes its files? */
static bool kvmstats_probe_is(const struct file *file, const char *name)
{
	return file_inode(file)->i_sb->s_magic == ANON_INODE_FS_MAGIC &&
	       !strcmp(file->f_path.dentry->d_name.name, name);
}

/*
 * The file that KVM installed as @fd (or the error KVM returned), with a
 * reference of ours, provided it is an anonymous-inode file named @name
 * whose private data is @priv (unless NULL); the fd itself is closed at
 * once.
 */
static struct file *kvmstats_probe_take(long fd, const char *name,
					const void *priv)
{
	struct file *file;

	if (fd < 0)
		return ERR_PTR(fd);
	file = fget(fd);
	close_fd(fd);
	if (!file)
		return ERR_PTR(-EBADF);
	if (!kvmstats_probe_is(file, name) ||
	    (priv && file->private_data != priv)) {
		pr_err("fd %ld is not the file KVM made (%s): another thread of the loader replaced it; not loading\n",
		       fd, name);
		fput(file);
		return ERR_PTR(-EBADF);
	}
	return file;
}

/* Read the stats file @stats whole into @t, through the user page @ubuf. */
static int kvmstats_probe_read(struct file *stats, char __user *ubuf,
			       struct kvmstats_ktable *t, const char *what)
{
	size_t size = 0;
	loff_t pos = 0;
	char *buf;
	ssize_t n;
	int ret = 0;

	buf = kvmalloc(KVMSTATS_PROBE_FILE_MAX, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	while ((n = stats->f_op->read(stats, ubuf, PAGE_SIZE, &pos)) > 0) {
		if (size + n > KVMSTATS_PROBE_FILE_MAX) {
			pr_err("%s stats: KVM's file is larger than %u bytes; not loading\n",
			       what, KVMSTATS_PROBE_FILE_MAX);
			ret = -EFBIG;
			goto out;
		}
		if (copy_from_user(buf + size, ubuf, n)) {
			ret = -EFAULT;
			goto out;
		}
		size += n;
	}
	if (n < 0) {
		pr_err("%s stats: reading KVM's file failed (%pe); not loading\n", what,
		       ERR_PTR(n));
		ret = n;
		goto out;
	}
	t->image = kmemdup(buf, size, GFP_KERNEL);
	t->size = size;
	if (!t->image)
		ret = -ENOMEM;
out:
	kvfree(buf);
	return ret;
}

/*
 * KVM_GET_STATS_FD on @file (a VM or vCPU file), whose stats file is
 * named @name, read into @t.
 */
static int kvmstats_probe_stats(struct file *file, const char *name,
				char __user *ubuf, struct kvmstats_ktable *t,
				const char *what)
{
	struct file *stats;
	int ret;

	stats = kvmstats_probe_take(kvmstats_probe_ioctl(file, KVM_GET_STATS_FD,
							 0),
				    name, file->private_data);
	if (IS_ERR(stats)) {
		pr_err("%s stats: KVM_GET_STATS_FD failed (%pe); not loading\n",
		       what, stats);
		return PTR_ERR(stats);
	}
	ret = stats->f_op->read ? kvmstats_probe_read(stats, ubuf, t, what) :
				  -EINVAL;
	fput(stats);
	return ret;
}

/* Is @file the KVM device, misc 10:232? */
static bool kvmstats_is_kvm_dev(const struct file *file)
{
	const struct inode *inode = file_inode(file);

	return S_ISCHR(inode->i_mode) &&
	       inode->i_rdev == MKDEV(MISC_MAJOR, KVM_MINOR);
}

/* What the refusal @err means, for the one line that says so. */
static const char *kvmstats_probe_why(long err)
{
	if (err == -EACCES || err == -EPERM)
		return "denied by the security policy (an LSM or the device cgroup)";
	return "refused by KVM";
}

static int kvmstats_probe_vm(struct file *dev, char __user *ubuf,
			     struct kvmstats_ktable *vm,
			     struct kvmstats_ktable *vcpu)
{
	struct file *vm_file, *vcpu_file;
	const struct kvm_vcpu *v;
	const struct kvm *kvm;
	int ret;

	vm_file = kvmstats_probe_take(kvmstats_probe_ioctl(dev, KVM_CREATE_VM,
							   0),
				      "kvm-vm", NULL);
	if (IS_ERR(vm_file)) {
		pr_err("KVM_CREATE_VM: %s (%pe); not loading\n",
		       kvmstats_probe_why(PTR_ERR(vm_file)), vm_file);
		return PTR_ERR(vm_file);
	}
	kvm = vm_file->private_data;
	vcpu_file = kvmstats_probe_take(kvmstats_probe_ioctl(vm_file,
							     KVM_CREATE_VCPU,
							     0),
					"kvm-vcpu:0", NULL);
	if (!IS_ERR(vcpu_file) &&
	    ((const struct kvm_vcpu *)vcpu_file->private_data)->kvm != kvm) {
		pr_err("the vCPU file is not of the VM KVM made; not loading\n");
		fput(vcpu_file);
		vcpu_file = ERR_PTR(-EBADF);
	}
	if (IS_ERR(vcpu_file)) {
		pr_err("KVM_CREATE_VCPU: %s (%pe); not loading\n",
		       kvmstats_probe_why(PTR_ERR(vcpu_file)), vcpu_file);
		ret = PTR_ERR(vcpu_file);
		goto out_vm;
	}
	v = vcpu_file->private_data;

	ret = kvmstats_probe_stats(vm_file, "kvm-vm-stats", ubuf, vm, "VM");
	if (!ret)
		ret = kvmstats_probe_stats(vcpu_file, "kvm-vcpu-stats:0", ubuf,
					   vcpu, "vCPU");
	if (!ret) {
		/*
		 * KVM made these two files, so their private data are its VM
		 * and vCPU: the ids where the headers place them, for desc.c
		 * to compare with the ids in KVM's own files.
		 */
		memcpy(vm->struct_id, kvm->stats_id, sizeof(vm->struct_id));
		memcpy(vcpu->struct_id, v->stats_id, sizeof(vcpu->struct_id));
		kvmstats_kvm_vm_fops = vm_file->f_op;
	}
	fput(vcpu_file);
out_vm:
	fput(vm_file);
	return ret;
}

int kvmstats_kvm_init(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu)
{
	unsigned long uaddr;
	struct file *dev;
	int ret;

	dev = filp_open("/dev/kvm", O_RDWR | O_CLOEXEC, 0);
	if (IS_ERR(dev)) {
		if (PTR_ERR(dev) == -EACCES || PTR_ERR(dev) == -EPERM)
			pr_err("/dev/kvm: %s (%pe); not loading\n",
			       kvmstats_probe_why(PTR_ERR(dev)), dev);
		else
			pr_err("KVM is not usable here (/dev/kvm: %pe): kvmstats loads after KVM (kvm_amd, kvm_intel, or KVM built in)\n",
			       dev);
		return PTR_ERR(dev) == -EACCES || PTR_ERR(dev) == -EPERM ?
		       PTR_ERR(dev) : -ENODEV;
	}
	if (!kvmstats_is_kvm_dev(dev)) {
		pr_err("/dev/kvm is not the KVM device (misc %d:%d); not loading\n",
		       MISC_MAJOR, KVM_MINOR);
		ret = -ENODEV;
		goto out_dev;
	}

	uaddr = vm_mmap(NULL, 0, PAGE_SIZE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, 0);
	if (IS_ERR_VALUE(uaddr)) {
		ret = (long)uaddr;
		goto out_dev;
	}
	ret = kvmstats_probe_vm(dev, (char __user *)uaddr, vm, vcpu);
	vm_munmap(uaddr, PAGE_SIZE);
out_dev:
	filp_close(dev, NULL);
	if (ret)
		kvmstats_kvm_exit(vm, vcpu);
	return ret;
}

void kvmstats_kvm_exit(struct kvmstats_ktable *vm, struct kvmstats_ktable *vcpu)
{
	kfree(vm->image);
	kfree(vcpu->image);
	vm->image = NULL;
	vcpu->image = NULL;
}
