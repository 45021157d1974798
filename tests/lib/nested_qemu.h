/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The real QEMU that 57-threads and 58-qmp run nested with -accel kvm
 * (tests/qemu/payload puts it in the guest), and what its guest boots:
 *   x86_64: Debian's qemu-system-x86_64 booting SeaBIOS, which halts and
 *           takes timer interrupts; the AP waits for its SIPI;
 *   arm64:  Debian's qemu-system-aarch64, -machine virt, no firmware: a
 *           few instructions loaded with -kernel.  CPU 0 starts CPU 1
 *           (PSCI CPU_ON); each then halts in WFI (no interrupts: it
 *           stays halted until QEMU kicks its thread).
 */
#ifndef KVMSTATS_TEST_NESTED_QEMU_H
#define KVMSTATS_TEST_NESTED_QEMU_H

#if defined(__x86_64__)
#define NESTED_QEMU	 "/usr/bin/qemu-system-x86_64"
#define NESTED_QEMU_COMM "qemu-system-x86" /* comm: 15 characters */
#elif defined(__aarch64__)
#define NESTED_QEMU	 "/usr/bin/qemu-system-aarch64"
#define NESTED_QEMU_COMM "qemu-system-aar"
#else
#define NESTED_QEMU	 "none"
#define NESTED_QEMU_COMM "none"
#endif

#define NESTED_QEMU_MAX_BOOT_ARGS 4

/*
 * Whether the payload has the nested QEMU and what its guest boots; if
 * not, NULL, else why not (a tap_skip() reason).  Fills @argv with the
 * arguments that choose the machine and boot the guest (up to
 * NESTED_QEMU_MAX_BOOT_ARGS, NULL-terminated after them) and @n with
 * their count.  On arm64 it writes the guest's image to a file.
 */
const char *nested_qemu_boot(const char **argv, int *n);

#endif
