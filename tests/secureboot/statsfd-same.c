// SPDX-License-Identifier: GPL-2.0-only
/*
 * The Secure Boot lane's check that kvmstats serves what KVM serves: a VM
 * with one vCPU that never runs (so no statistic moves), its stats files
 * from KVM_GET_STATS_FD and from /dev/kvmstats read whole and compared
 * byte for byte (header, id, descriptors, data), for the VM and the vCPU;
 * and the VM in KVMSTATS_LIST_VMS.  Then the kvmstats tool, given as the
 * argument, lists this process's VM and shows it.  TAP lines on stdout.
 *
 * Usage: statsfd-same [KVMSTATS_TOOL]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kvm.h>
#include <linux/kvmstats.h>

static int failed;

static void ok(int cond, const char *fmt, const char *what, const char *why)
{
	printf("%sok - ", cond ? "" : "not ");
	printf(fmt, what);
	if (!cond && why)
		printf(" (%s)", why);
	printf("\n");
	if (!cond)
		failed++;
}

/* The whole stats file: read from 0 until EOF. */
static ssize_t read_all(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	while (n < size) {
		r = pread(fd, buf + n, size - n, n);
		if (r < 0)
			return -errno;
		if (!r)
			break;
		n += r;
	}
	return n;
}

static void compare(int native, int ours, const char *what)
{
	static char a[1 << 20], b[1 << 20], c[1 << 20];
	ssize_t na, nb, nc;
	char why[160];
	int tries;

	for (tries = 0; tries < 5; tries++) {
		na = read_all(native, a, sizeof(a));
		nb = read_all(ours, b, sizeof(b));
		nc = read_all(native, c, sizeof(c));
		/* Nothing runs, but if KVM's own two reads differ, retry. */
		if (na == nc && na > 0 && !memcmp(a, c, na))
			break;
	}
	snprintf(why, sizeof(why), "KVM %zd bytes, kvmstats %zd bytes%s", na,
		 nb, na == nb && na > 0 ? ", contents differ" : "");
	ok(na > 0 && na == nb && !memcmp(a, b, na),
	   "%s: /dev/kvmstats's stats file is byte-identical to KVM_GET_STATS_FD's",
	   what, why);
}

int main(int argc, char **argv)
{
	struct kvmstats_fd_request req;
	struct kvmstats_vm_list *list;
	int kvm, vm, vcpu, dev, nat, ours, found;
	char cmd[256], line[512];
	unsigned int i;
	FILE *p;

	setvbuf(stdout, NULL, _IOLBF, 0);
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	vm = kvm < 0 ? -1 : ioctl(kvm, KVM_CREATE_VM, 0);
	vcpu = vm < 0 ? -1 : ioctl(vm, KVM_CREATE_VCPU, 0);
	ok(vcpu >= 0, "%s", "a VM with one vCPU from /dev/kvm",
	   strerror(errno));
	dev = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	ok(dev >= 0, "%s", "/dev/kvmstats opens", strerror(errno));
	if (vcpu < 0 || dev < 0)
		return 1;

	memset(&req, 0, sizeof(req));
	req.fd = vm;
	req.vcpu = -1;
	nat = ioctl(vm, KVM_GET_STATS_FD, NULL);
	ours = ioctl(dev, KVMSTATS_GET_STATS_FD, &req);
	ok(nat >= 0 && ours >= 0, "%s", "the VM's stats fds (KVM's, kvmstats')",
	   strerror(errno));
	if (nat >= 0 && ours >= 0)
		compare(nat, ours, "VM");
	req.vcpu = 0;
	nat = ioctl(vcpu, KVM_GET_STATS_FD, NULL);
	ours = ioctl(dev, KVMSTATS_GET_STATS_FD, &req);
	ok(nat >= 0 && ours >= 0, "%s",
	   "the vCPU's stats fds (KVM's, kvmstats')", strerror(errno));
	if (nat >= 0 && ours >= 0)
		compare(nat, ours, "vCPU 0");

	list = calloc(1, sizeof(*list) + 64 * sizeof(list->vms[0]));
	list->nr = 64;
	found = 0;
	if (ioctl(dev, KVMSTATS_LIST_VMS, list) >= 0)
		for (i = 0; i < list->nr && i < 64; i++)
			found |= list->vms[i].pid == getpid() &&
				 list->vms[i].fd == vm &&
				 list->vms[i].nr_vcpus == 1;
	ok(found, "%s", "KVMSTATS_LIST_VMS lists this VM with its one vCPU",
	   NULL);

	if (argc > 1) {
		found = 0;
		snprintf(cmd, sizeof(cmd), "%s list 2>&1", argv[1]);
		p = popen(cmd, "r");
		snprintf(cmd, sizeof(cmd), "%d", getpid());
		while (p && fgets(line, sizeof(line), p)) {
			printf("# %s", line);
			found |= !!strstr(line, cmd);
		}
		ok(p && !pclose(p) && found, "%s",
		   "kvmstats list lists this process's VM", NULL);
		snprintf(cmd, sizeof(cmd), "%s show %d 2>&1", argv[1],
			 getpid());
		found = 0;
		p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p)) {
			if (found++ < 12)
				printf("# %s", line);
		}
		ok(p && !pclose(p) && found > 1, "%s",
		   "kvmstats show PID shows the VM's statistics", NULL);
	}
	return failed ? 1 : 0;
}
