// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test-guest helper: /dev/ksg_test (see ksg_test.h) makes the situations
 * the suite checks kvmstats against and a process cannot make by itself:
 *
 *  - an impostor VM file: an anonymous-inode file named "kvm-vm", as KVM's
 *    are, with operations of its own and a poisoned private_data, which
 *    kvmstats must refuse without ever reading that pointer;
 *  - a process whose thread-group leader is held in do_exit() between
 *    exit_mm() and exit_files() (a kprobe on exit_files() spins there), the
 *    window in which the leader has a file table but no address space while
 *    its other threads go on running the VM.
 *
 * It uses no KVM or kvmstats symbol, so it never keeps them from unloading.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/kprobes.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/poison.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/timekeeping.h>

#include "ksg_test.h"

#define KSG_HOLD_MAX_NS (3 * NSEC_PER_SEC)

static pid_t ksg_hold_tgid;	/* in the initial pid namespace */
static bool ksg_held;
static bool ksg_release;

static int ksg_exit_files(struct kprobe *p, struct pt_regs *regs)
{
	u64 start;

	if (!READ_ONCE(ksg_hold_tgid) || current->tgid != READ_ONCE(ksg_hold_tgid) ||
	    !thread_group_leader(current))
		return 0;
	WRITE_ONCE(ksg_hold_tgid, 0);
	WRITE_ONCE(ksg_held, true);
	start = ktime_get_mono_fast_ns();
	while (!READ_ONCE(ksg_release) &&
	       ktime_get_mono_fast_ns() - start < KSG_HOLD_MAX_NS)
		cpu_relax();
	WRITE_ONCE(ksg_held, false);
	return 0;
}

static struct kprobe ksg_kprobe = {
	.symbol_name = "exit_files",
	.pre_handler = ksg_exit_files,
};

static int ksg_impostor_release(struct inode *inode, struct file *file)
{
	return 0;
}

static const struct file_operations ksg_impostor_fops = {
	.owner = THIS_MODULE,
	.release = ksg_impostor_release,
	.llseek = noop_llseek,
};

static long ksg_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	switch (cmd) {
	case KSG_TEST_IMPOSTOR:
		return anon_inode_getfd("kvm-vm", &ksg_impostor_fops,
					(void *)POISON_POINTER_DELTA + 0xdead000,
					O_RDWR | O_CLOEXEC);
	case KSG_TEST_HOLD_EXIT:
		WRITE_ONCE(ksg_release, false);
		WRITE_ONCE(ksg_hold_tgid, (pid_t)arg);
		return 0;
	case KSG_TEST_HELD:
		return READ_ONCE(ksg_held);
	case KSG_TEST_RELEASE:
		WRITE_ONCE(ksg_hold_tgid, 0);
		WRITE_ONCE(ksg_release, true);
		return 0;
	default:
		return -ENOTTY;
	}
}

static const struct file_operations ksg_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = ksg_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice ksg_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "ksg_test",
	.fops = &ksg_fops,
	.mode = 0600,
};

static int __init ksg_test_init(void)
{
	int ret;

	ret = register_kprobe(&ksg_kprobe);
	if (ret) {
		pr_err("cannot probe exit_files: %d\n", ret);
		return ret;
	}
	ret = misc_register(&ksg_dev);
	if (ret)
		unregister_kprobe(&ksg_kprobe);
	return ret;
}

static void __exit ksg_test_exit(void)
{
	misc_deregister(&ksg_dev);
	unregister_kprobe(&ksg_kprobe);
}

module_init(ksg_test_init);
module_exit(ksg_test_exit);
MODULE_DESCRIPTION("kvmstats test guest: impostor VM files and a held exit window");
MODULE_LICENSE("GPL");
