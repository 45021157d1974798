// SPDX-License-Identifier: GPL-2.0-only
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "nested_qemu.h"

#if defined(__x86_64__)
#define BIOS "/usr/share/seabios/bios-256k.bin"

const char *nested_qemu_boot(const char **argv, int *n)
{
	if (access(NESTED_QEMU, X_OK) || access(BIOS, R_OK))
		return "no QEMU in the guest payload (KVMSTATS_PAYLOAD_QEMU=0?)";
	argv[0] = "-bios";
	argv[1] = BIOS;
	argv[2] = NULL;
	*n = 2;
	return NULL;
}
#elif defined(__aarch64__)
#define IMAGE "/tmp/kvmstats-nested-guest.img"

/*
 * A64, assembled once with binutils and written down here.  QEMU loads a
 * raw image (no arm64 Image header) at RAM + 0x80000 and enters it at EL1,
 * MMU off, on CPU 0; the others are off until PSCI CPU_ON.  Each vCPU
 * then halts in WFI for good: no interrupt is ever enabled, and KVM wakes
 * a vCPU in WFI only for an interrupt its GIC would signal (an armed timer
 * alone does not), so only a signal (QEMU's kick: pause, quit) takes it
 * out of KVM_RUN, and it halts again when it comes back.
 */
static const uint32_t guest[] = {
	0xd53800a5, /* entry: mrs	x5, mpidr_el1 */
	0x92401ca5, /* and	x5, x5, #0xff */
	0xb50000e5, /* cbnz	x5, loop: CPU 1 */
	0xd2800060, /* mov	x0, #0x3 */
	0xf2b88000, /* movk	x0, #0xc400, lsl #16: CPU_ON (64-bit) */
	0xd2800021, /* mov	x1, #1: MPIDR of CPU 1 */
	0x10ffff42, /* adr	x2, entry */
	0xd2800003, /* mov	x3, #0 */
	0xd4000002, /* hvc	#0 */
	0xd503207f, /* loop: wfi */
	0x17ffffff, /* b	loop */
};

const char *nested_qemu_boot(const char **argv, int *n)
{
	FILE *f;
	bool ok;

	if (access(NESTED_QEMU, X_OK))
		return "no QEMU in the guest payload (KVMSTATS_PAYLOAD_QEMU=0?)";
	f = fopen(IMAGE, "we");
	if (!f)
		return "cannot write " IMAGE;
	ok = fwrite(guest, sizeof(guest), 1, f) == 1;
	if (fclose(f) || !ok)
		return "cannot write " IMAGE;
	argv[0] = "-machine";
	argv[1] = "virt,gic-version=host";
	argv[2] = "-kernel";
	argv[3] = IMAGE;
	argv[4] = NULL;
	*n = 4;
	return NULL;
}
#else
const char *nested_qemu_boot(const char **argv, int *n)
{
	argv[0] = NULL;
	*n = 0;
	return "no nested QEMU for this architecture in the guest payload";
}
#endif
