// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVMSTATS_LIST_VMS: each VM once, under the process that created it, at
 * the lowest fd number it holds for it; ordered by (pid, fd); nr_vcpus
 * right; E2BIG with the needed count; dup'd, inherited and passed fds add
 * no entries (but GET_STATS_FD accepts them); a VM whose creator exited
 * disappears from the list while a stats fd keeps it readable.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define HUGE_NR (1 << 20)

static int dev;

struct listing {
	struct kvmstats_vm *vms;
	int nr;
};

static void list_now(struct listing *l)
{
	free(l->vms);
	l->vms = NULL;
	l->nr = kvmstats_list_vms(dev, &l->vms);
}

static int count_pid(const struct listing *l, pid_t pid)
{
	int i, n = 0;

	for (i = 0; i < l->nr; i++)
		n += l->vms[i].pid == pid;
	return n;
}

static const struct kvmstats_vm *find(const struct listing *l, pid_t pid,
				      int fd)
{
	int i;

	for (i = 0; i < l->nr; i++)
		if (l->vms[i].pid == pid && l->vms[i].fd == fd)
			return &l->vms[i];
	return NULL;
}

static void dump(const struct listing *l)
{
	int i;

	for (i = 0; i < l->nr; i++)
		tap_diag("  vm[%d]: pid %d fd %d nr_vcpus %u flags %u", i,
			 l->vms[i].pid, l->vms[i].fd, l->vms[i].nr_vcpus,
			 l->vms[i].flags);
}

static void check_entry(const struct listing *l, pid_t pid, int fd,
			unsigned int nr_vcpus, const char *what)
{
	const struct kvmstats_vm *v = find(l, pid, fd);

	if (!tap_check(v != NULL, "%s: listed as (pid %d, fd %d)", what, pid,
		       fd)) {
		dump(l);
		return;
	}
	tap_eq(v->nr_vcpus, nr_vcpus, "%s: nr_vcpus is %u", what, nr_vcpus);
	tap_eq(v->flags, 0, "%s: flags is 0", what);
}

static void check_sorted(const struct listing *l)
{
	bool ok = true;
	int i;

	for (i = 1; i < l->nr; i++) {
		const struct kvmstats_vm *a = &l->vms[i - 1], *b = &l->vms[i];

		if (a->pid > b->pid || (a->pid == b->pid && a->fd >= b->fd))
			ok = false;
	}
	if (!ok)
		dump(l);
	tap_check(ok, "list is strictly ordered by (pid, fd) (%d entries)",
		  l->nr);
}

static void check_e2big(void)
{
	struct kvmstats_vm_list *list;
	uint32_t needed;
	uint8_t *p;
	int r;

	list = calloc(1, sizeof(*list) + 4096 * sizeof(list->vms[0]));
	list->nr = 0;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == -E2BIG, "nr 0: E2BIG (got %d)", r);
	needed = list->nr;
	tap_check(needed >= 4, "E2BIG sets nr to the number needed (%u)",
		  needed);

	list->nr = needed - 1;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == -E2BIG && list->nr == needed,
		  "nr = needed - 1: E2BIG and nr = %u (got %d, nr %u)", needed,
		  r, list->nr);

	list->nr = needed;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == 0 && list->nr == needed,
		  "nr = needed: success with nr %u (got %d, nr %u)", needed, r,
		  list->nr);

	list->nr = needed + 100;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == 0 && list->nr == needed,
		  "nr larger than needed: success with nr %u (got %d, nr %u)",
		  needed, r, list->nr);

	list->nr = 4;
	list->flags = 1;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == -EINVAL, "flags 1: EINVAL (got %d)", r);
	list->flags = 0x80000000;
	list->nr = 0;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == -EINVAL,
		  "flags 0x80000000 with nr 0: EINVAL, before E2BIG (got %d)",
		  r);
	free(list);

	/* A huge nr is fine: there is no limit but nr. */
	list = calloc(1, sizeof(*list) + HUGE_NR * sizeof(list->vms[0]));
	list->nr = HUGE_NR;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == 0 && list->nr == needed,
		  "nr %d: success with nr %u (got %d, nr %u)", HUGE_NR, needed,
		  r, list->nr);
	free(list);

	/* Header readable, entries not writable. */
	p = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mprotect(p + 4096, 4096, PROT_NONE);
	list = (void *)(p + 4096 - sizeof(*list));
	list->nr = needed;
	list->flags = 0;
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
	tap_check(r == -EFAULT, "entries array unwritable: EFAULT (got %d)", r);
	munmap(p, 8192);
}

int main(void)
{
	struct child_vmm c1, c2, c3;
	struct listing l = { 0 };
	pid_t me = getpid(), heir;
	int placeholder, lowfd, ours, ours_c2, native, hold[2], i;
	struct vm *a, *b, *c;
	char ch;

	kvm_test_init();
	dev = kvmstats_open();

	list_now(&l);
	tap_eq(count_pid(&l, me), 0,
	       "no VM listed for us before we create one");

	a = vm_create(3, NULL);
	b = vm_create(0, NULL);
	placeholder = open("/dev/null", O_RDONLY);
	c = vm_create(1, NULL);
	close(placeholder);
	lowfd = dup(c->fd); /* takes the placeholder's lower number */
	tap_check(lowfd < c->fd, "dup of VM c got a lower fd (%d < %d)", lowfd,
		  c->fd);

	list_now(&l);
	check_entry(&l, me, a->fd, 3, "own VM a (3 vCPUs)");
	check_entry(&l, me, b->fd, 0, "own VM b (0 vCPUs)");
	check_entry(&l, me, lowfd, 1, "own VM c at its lowest fd (a dup)");
	tap_check(!find(&l, me, c->fd),
		  "own VM c not listed again at its higher fd");
	tap_eq(count_pid(&l, me), 3, "exactly 3 entries for our 3 VMs");
	check_sorted(&l);

	/* nr_vcpus follows KVM_CREATE_VCPU. */
	vm_add_vcpu(b, 4);
	list_now(&l);
	check_entry(&l, me, b->fd, 1, "VM b after adding a vCPU");
	vm_add_vcpu(b, 9);
	list_now(&l);
	check_entry(&l, me, b->fd, 2, "VM b after adding a second vCPU");

	/* A child VMM; we also hold a copy of its VM fd. */
	child_vmm_start(&c1, 2, NULL, 0);
	list_now(&l);
	check_entry(&l, c1.info.pid, c1.info.vm_fd, 2, "child VMM's VM");
	tap_eq(count_pid(&l, c1.info.pid), 1, "child VMM has exactly 1 entry");
	tap_check(!find(&l, me, c1.vm_fd),
		  "the child's VM fd passed to us adds no entry for us");
	tap_eq(count_pid(&l, me), 3, "still exactly 3 entries for us");
	check_sorted(&l);

	/* A forked child inheriting our VM fds is not listed... */
	if (pipe(hold))
		tap_bail("pipe: %s", strerror(errno));
	heir = tap_fork();
	if (!heir) {
		close(hold[1]);
		if (read(hold[0], &ch, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(hold[0]);
	list_now(&l);
	tap_eq(count_pid(&l, heir), 0,
	       "a child that inherited our VM fds by fork has no entries");
	tap_eq(count_pid(&l, me), 3, "and we still have exactly 3");
	/* ...but GET_STATS_FD accepts its (pid, fd). */
	ours = __kvmstats_get_stats_fd(dev, heir, a->fd, 2);
	tap_check(ours >= 0,
		  "GET_STATS_FD(heir pid, inherited VM fd, vcpu 2) works");
	if (ours >= 0) {
		native = vcpu_get_stats_fd(a->vcpus[2]);
		stats_fds_identical(
			ours, native,
			"through the heir: vCPU file identical to native");
		close(native);
		close(ours);
	}
	close(hold[1]);
	waitpid(heir, NULL, 0);

	check_e2big();

	/* A VM whose creator exited: only our stats fd holds it. */
	child_vmm_start(&c2, 1, NULL, 17);
	ours_c2 = kvmstats_get_stats_fd(dev, c2.info.pid, c2.info.vm_fd, 0);
	child_vmm_close_fds(&c2);
	tap_eq(child_vmm_exit(&c2), 0, "child VMM 2 exited");
	list_now(&l);
	tap_eq(count_pid(&l, c2.info.pid), 0,
	       "the exited child's VM is no longer listed");
	tap_eq(stats_read_stat(ours_c2, STAT_IO_EXITS), 17,
	       "its stats fd still reads (" STAT_IO_EXITS " 17)");
	close(ours_c2);

	/* A VM whose creator exited, held by its VM fd in our process. */
	child_vmm_start(&c3, 2, NULL, 9);
	tap_eq(child_vmm_exit(&c3), 0, "child VMM 3 exited");
	list_now(&l);
	tap_eq(count_pid(&l, c3.info.pid), 0, "child VMM 3's VM is not listed");
	tap_check(!find(&l, me, c3.vm_fd),
		  "nor under us, who hold its VM fd (documented blind spot)");
	tap_eq(count_pid(&l, me), 3, "we still have exactly 3 entries");
	for (i = -1; i < 2; i++) {
		char what[96];

		ours = __kvmstats_get_stats_fd(dev, 0, c3.vm_fd, i);
		snprintf(
			what, sizeof(what),
			"exited child's VM, vcpu %d, via the VM fd we hold: identical to native",
			i);
		if (!tap_check(ours >= 0,
			       "GET_STATS_FD(0, received VM fd, vcpu %d) works",
			       i))
			continue;
		stats_fds_identical(ours,
				    i < 0 ? c3.native_vm_stats :
					    c3.native_vcpu_stats[i],
				    what);
		close(ours);
	}
	child_vmm_close_fds(&c3);

	/* Our VMs go away when we close them. */
	close(lowfd);
	list_now(&l);
	check_entry(&l, me, c->fd, 1,
		    "VM c at its remaining fd after closing the dup");
	vm_free(c);
	vm_free(b);
	list_now(&l);
	tap_eq(count_pid(&l, me), 1, "closing VMs b and c leaves 1 entry");
	child_vmm_exit(&c1);
	child_vmm_close_fds(&c1);
	vm_free(a);
	list_now(&l);
	tap_eq(count_pid(&l, me), 0, "no entries for us after closing all VMs");
	tap_eq(count_pid(&l, c1.info.pid), 0,
	       "no entries for child VMM 1 after it exited");
	free(l.vms);
	close(dev);
	return tap_exit();
}
