// SPDX-License-Identifier: GPL-2.0-only
/*
 * Exit 0 if this host's /dev/kvm is a KVM that can create a VM, 1 otherwise.
 *
 * Used by the harness to choose between -accel kvm and TCG: a /dev/kvm node
 * alone proves nothing (some sandboxes expose one that is not hardware KVM,
 * or that the caller may not open).
 */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
	int kvm, vm;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		perror("kvm-probe: open /dev/kvm");
		return 1;
	}
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		fprintf(stderr, "kvm-probe: unexpected KVM API version\n");
		return 1;
	}
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0) {
		perror("kvm-probe: KVM_CREATE_VM");
		return 1;
	}
	close(vm);
	close(kvm);
	return 0;
}
