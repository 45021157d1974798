// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stand-in VMM for demos of the kvmstats tool in the test guest (which
 * has no QEMU): "demo-vmm -name NAME [-smp N]" creates a VM with N vCPUs
 * (default 2); vCPU 0 loops on port writes, the others halt after a few.
 * It parses -name like QEMU's command line so `kvmstats list` shows it.
 * Runs until killed.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvm_util.h"

int main(int argc, char **argv)
{
	int i, n = 2;
	struct vm *vm;

	for (i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-smp"))
			n = atoi(argv[i + 1]);
	if (n < 1 || n > VM_MAX_VCPUS)
		n = 2;
	vm = vm_create(n, NULL);
	for (i = 1; i < n; i++) {
		vcpu_load_prog(vm->vcpus[i], GUEST_IO_COUNT, 5 + i);
		vcpu_run_to_hlt(vm->vcpus[i]);
	}
	vcpu_load_prog(vm->vcpus[0], GUEST_IO_LOOP, 0);
	vcpu_thread_start(vm->vcpus[0]);
	for (;;)
		pause();
}
