// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats: KVM's binary statistics for every VM on the host.
 *
 * /dev/kvmstats lists the VMs the caller's pid namespace can see and hands
 * out stats fds for any of them or their vCPUs; see
 * include/uapi/linux/kvmstats.h for the interface and docs/design.md for
 * why it is built this way.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

static long kvmstats_ioctl_get_stats_fd(struct kvmstats_fd_request __user *ureq)
{
	struct kvmstats_fd_request req;

	if (copy_from_user(&req, ureq, sizeof(req)))
		return -EFAULT;
	if ((req.flags & ~KVMSTATS_FD_PIDFD) || req.reserved[0] ||
	    req.reserved[1] || req.vcpu < -1)
		return -EINVAL;
	return kvmstats_stats_fd(&req);
}

static long kvmstats_ioctl_get_schema_fd(struct kvmstats_schema_request __user *ureq)
{
	struct kvmstats_schema_request req;

	if (copy_from_user(&req, ureq, sizeof(req)))
		return -EFAULT;
	if ((req.flags & ~KVMSTATS_SCHEMA_VCPU) || req.reserved0 ||
	    req.reserved[0] || req.reserved[1] || req.reserved[2])
		return -EINVAL;
	if (req.flags & KVMSTATS_SCHEMA_VCPU)
		return kvmstats_schema_fd(&kvmstats_vcpu_layout,
					  "kvmstats-schema/vcpu");
	return kvmstats_schema_fd(&kvmstats_vm_layout, "kvmstats-schema");
}

static long kvmstats_dev_ioctl(struct file *file, unsigned int cmd,
			       unsigned long arg)
{
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case KVMSTATS_GET_API_VERSION:
		return arg ? -EINVAL : KVMSTATS_API_VERSION;
	case KVMSTATS_LIST_VMS:
		return kvmstats_list_vms(argp);
	case KVMSTATS_GET_STATS_FD:
		return kvmstats_ioctl_get_stats_fd(argp);
	case KVMSTATS_READ_BATCH:
		return kvmstats_read_batch(argp);
	case KVMSTATS_LIST_PIDFD:
		return kvmstats_list_pidfd(argp);
	case KVMSTATS_LIST_VCPUS:
		return kvmstats_list_vcpus(argp);
	case KVMSTATS_GET_SCHEMA_FD:
		return kvmstats_ioctl_get_schema_fd(argp);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations kvmstats_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kvmstats_dev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

/* Root only: a udev rule may hand the node to a group (see README). */
static struct miscdevice kvmstats_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kvmstats",
	.fops = &kvmstats_dev_fops,
	.mode = 0600,
};

static int kvmstats_counter_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops kvmstats_counter_ops = {
	.get = kvmstats_counter_get,
};

module_param_cb(live_files, &kvmstats_counter_ops, &kvmstats_live_files, 0444);
MODULE_PARM_DESC(live_files, "Stats files currently open (read-only)");
module_param_cb(live_vms, &kvmstats_counter_ops, &kvmstats_live_vms, 0444);
MODULE_PARM_DESC(live_vms, "VMs kvmstats holds a reference on (read-only)");

#ifdef KVMSTATS_DEBUG
/*
 * Debug builds (KVMSTATS_DEBUG=y): widen the window between loading a
 * file's data pointer and copying from it, for the test that races reads
 * with a freeze.  The next read by thread read_delay_tid (as the initial
 * pid namespace numbers it) busy-waits, then the knob is back at 0; reads
 * by anyone else are not delayed.
 */
static int kvmstats_read_delay_ms;
module_param_named(read_delay_ms, kvmstats_read_delay_ms, int, 0644);
MODULE_PARM_DESC(read_delay_ms,
		 "Debug builds: busy-wait this long in the read section of read_delay_tid's next read");
static int kvmstats_read_delay_tid;
module_param_named(read_delay_tid, kvmstats_read_delay_tid, int, 0644);
MODULE_PARM_DESC(read_delay_tid, "Debug builds: the thread whose next read is delayed");

void kvmstats_debug_read_delay(void)
{
	u64 end;
	int ms;

	if (READ_ONCE(kvmstats_read_delay_tid) != task_pid_nr(current))
		return;
	ms = xchg(&kvmstats_read_delay_ms, 0);
	if (ms <= 0)
		return;
	/*
	 * By the clock, not mdelay(): under QEMU's TCG, 6.1's calibrated
	 * delay loop ran 3000 ms in 11.
	 */
	end = ktime_get_mono_fast_ns() + (u64)ms * NSEC_PER_MSEC;
	while (ktime_get_mono_fast_ns() < end)
		cpu_relax();
}

/* How many VMs have been frozen since load: the same test waits for one. */
static atomic_t kvmstats_freezes = ATOMIC_INIT(0);
module_param_cb(freezes, &kvmstats_counter_ops, &kvmstats_freezes, 0444);
MODULE_PARM_DESC(freezes, "Debug builds: VMs frozen since load (read-only)");

void kvmstats_debug_froze(void)
{
	atomic_inc(&kvmstats_freezes);
}
#endif

static int __init kvmstats_init(void)
{
	int ret;

	ret = kvmstats_layouts_init();
	if (ret)
		return ret;
	ret = kvmstats_vm_init();
	if (ret)
		goto err_layouts;
	ret = misc_register(&kvmstats_dev);
	if (ret)
		goto err_vm;
	return 0;

err_vm:
	kvmstats_vm_exit();
err_layouts:
	kvmstats_layouts_exit();
	return ret;
}

static void __exit kvmstats_exit(void)
{
	misc_deregister(&kvmstats_dev);
	kvmstats_vm_exit();
	kvmstats_layouts_exit();
}

module_init(kvmstats_init);
module_exit(kvmstats_exit);

MODULE_DESCRIPTION("KVM binary statistics for every VM on the host");
MODULE_LICENSE("GPL");
MODULE_VERSION(KVMSTATS_VERSION);
