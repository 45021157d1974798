// SPDX-License-Identifier: GPL-2.0-only
/*
 * Harness selftest module: loaded only inside a throwaway QEMU guest, it
 * does one bad thing on load, chosen with action=:
 *
 *   warn    a kernel WARN (with panic_on_warn=1 the guest panics)
 *   freeze  every CPU spins with interrupts off: the guest goes silent
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/smp.h>
#include <linux/string.h>

static char *action = "warn";
module_param(action, charp, 0444);
MODULE_PARM_DESC(action, "warn or freeze");

static void ksg_spin(void *unused)
{
	for (;;)
		cpu_relax();
}

static int __init ksg_init(void)
{
	if (!strcmp(action, "warn")) {
		WARN(1, "deliberate warning from the harness selftest\n");
		return 0;
	}
	if (!strcmp(action, "freeze")) {
		pr_info("freezing every CPU\n");
		on_each_cpu(ksg_spin, NULL, 0);
		return 0;
	}
	return -EINVAL;
}

static void __exit ksg_exit(void)
{
}

module_init(ksg_init);
module_exit(ksg_exit);
MODULE_DESCRIPTION("kvmstats test harness selftest: misbehaves on purpose");
MODULE_LICENSE("GPL");
