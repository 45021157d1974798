// SPDX-License-Identifier: GPL-2.0-only
/*
 * A VMM shape for tests/host/15-native: on this host's /dev/kvm, VMs with
 * vCPUs that never run, laid out as the native listing has to untangle
 * them, then it sleeps until killed.  Prints one line per VM it made:
 * "vm PID FD NR_VCPUS".
 *
 *   native-vmm two    two VMs in one process, each VM's vCPUs made right
 *                     after it (2 and 3 vCPUs), and a dup() of the first
 *                     VM's fd at a higher number;
 *   native-vmm fork   one VM with 1 vCPU made by a parent that then forks a
 *                     child holding copies of both fds (the VM must be
 *                     listed once, by the parent that made it).
 *
 * Exit status NO_VM (77), with a line "native-vmm: cannot create a VM here:
 * ..." on stderr, means this host cannot make a VM at all (no usable
 * /dev/kvm, or KVM_CREATE_VM refused): the one case tests/host/15-native
 * skips.  Any other end before the VMs are printed is a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NO_VM 77

static void no_vm(const char *what)
{
	fprintf(stderr, "native-vmm: cannot create a VM here: %s: %s\n", what,
		strerror(errno));
	exit(NO_VM);
}

static int vm_with_vcpus(int kvm, int nr)
{
	int vm = ioctl(kvm, KVM_CREATE_VM, 0), i;

	if (vm < 0)
		no_vm("KVM_CREATE_VM");
	for (i = 0; i < nr; i++)
		if (ioctl(vm, KVM_CREATE_VCPU, i) < 0) {
			/* A host that makes VMs makes their vCPUs. */
			perror("native-vmm: KVM_CREATE_VCPU");
			exit(1);
		}
	return vm;
}

int main(int argc, char **argv)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC), a, b;

	if (kvm < 0)
		no_vm("/dev/kvm");
	if (argc == 2 && !strcmp(argv[1], "two")) {
		a = vm_with_vcpus(kvm, 2);
		b = vm_with_vcpus(kvm, 3);
		if (dup(a) < 0)
			return 1;
		printf("vm %d %d 2\nvm %d %d 3\n", getpid(), a, getpid(), b);
	} else if (argc == 2 && !strcmp(argv[1], "fork")) {
		a = vm_with_vcpus(kvm, 1);
		printf("vm %d %d 1\n", getpid(), a);
		fflush(stdout);
		if (fork() == 0) {
			printf("child %d\n", getpid());
			fflush(stdout);
			pause();
			return 0;
		}
	} else {
		fprintf(stderr, "usage: native-vmm two|fork\n");
		return 2;
	}
	fflush(stdout);
	pause();
	return 0;
}
