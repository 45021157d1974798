// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stats fd outlives its VM's fds and its VMM.  After the VM and vCPU
 * fds are closed (the VMM alive) it still reads live values, identical to
 * native fds.  Once the VMM exits or is SIGKILLed its files are frozen:
 * the VM file keeps exactly what it read just before the death (what the
 * native fd read then too; KVM's own release of the address space, which
 * runs after the freeze, may still change the native one), the vCPU files
 * stay identical to native fds that outlived the VMM, and kvmstats lets
 * the VM go.  Frozen files are unchanged while other VMs reuse the dead
 * one's memory.  Four threads read across the VMM's SIGKILL without a
 * single error.  A VMM stopped with SIGSTOP never delays a read.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "kvmstats_util.h"

#define NR_READERS 4
#define NR_VCPUS   2

static long base_vms;

/*
 * Describe how the native VM file changed between @before and @after
 * (KVM's release of the VMM's address space zaps the guest mappings).
 */
static void diag_native_change(const struct stats_blob *before,
			       const struct stats_blob *after)
{
	if (before->size == after->size &&
	    !memcmp(before->data, after->data, before->size))
		tap_diag("the native VM file did not change at the death");
	else
		stats_blob_equal(
			before, after,
			"the native VM file, before and after the death "
			"(KVM's doing)");
}

static void check_own_vm_closed(int dev)
{
	int ours_vm, ours_vcpu, native_vm, native_vcpu;
	struct vm *vm;

	vm = vm_create(1, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 77);
	ours_vm = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	ours_vcpu = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native_vm = vm_get_stats_fd(vm);
	native_vcpu = vcpu_get_stats_fd(vm->vcpus[0]);
	vm_free(vm); /* closes the VM, vCPU and /dev/kvm fds */

	tap_eq(stats_read_stat(ours_vcpu, STAT_IO_EXITS), 77,
	       "own VM closed: vCPU stats fd still reads " STAT_IO_EXITS " 77");
	stats_fds_identical(ours_vm, native_vm,
			    "own VM closed: VM file identical to native");
	stats_fds_identical(ours_vcpu, native_vcpu,
			    "own VM closed: vCPU file identical to native");
	close(ours_vm);
	close(ours_vcpu);
	close(native_vm);
	close(native_vcpu);
}

static void check_vmm_exit(int dev)
{
	static struct stats_blob before, native_before, after, native_after;
	int ours[NR_VCPUS + 1], i;
	struct child_vmm c;
	long v;

	child_vmm_start(&c, NR_VCPUS, NULL, 31);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	close(c.vm_fd); /* the native stats fds hold the VM now */
	c.vm_fd = -1;
	stats_read_all(ours[0], &before, "VM stats");
	stats_read_all(c.native_vm_stats, &native_before, "native VM stats");
	tap_check(stats_blob_equal(&before, &native_before, "before the exit"),
		  "before the VMM exits: VM file identical to its native fd");
	tap_eq(child_vmm_exit(&c), 0, "child VMM exited normally");
	for (i = 0; i < NR_VCPUS; i++)
		tap_eq(stats_read_stat(ours[i + 1], STAT_IO_EXITS), 31,
		       "after the VMM exited: vCPU %d reads " STAT_IO_EXITS
		       " 31",
		       i);
	stats_read_all(ours[0], &after, "VM stats");
	tap_check(stats_blob_equal(&before, &after, "after the exit"),
		  "after the VMM exited: VM file still reads what it (and "
		  "the native fd) read just before");
	stats_read_all(c.native_vm_stats, &native_after, "native VM stats");
	diag_native_change(&native_before, &native_after);
	for (i = 0; i < NR_VCPUS; i++) {
		char what[96];

		snprintf(
			what, sizeof(what),
			"after the VMM exited: vCPU %d file identical to its native fd",
			i);
		stats_fds_identical(ours[i + 1], c.native_vcpu_stats[i], what);
	}
	v = kvmstats_wait_live_vms(base_vms, 10000);
	tap_check(v == base_vms,
		  "after the VMM exited: kvmstats holds its VM no more, native "
		  "fds do (live_vms %ld, want %ld)",
		  v, base_vms);
	for (i = 0; i <= NR_VCPUS; i++)
		close(ours[i]);
	close(c.native_vm_stats);
	for (i = 0; i < NR_VCPUS; i++)
		close(c.native_vcpu_stats[i]);
}

/*
 * Only our stats fds hold an exited VMM's VM, so KVM destroys it (they do
 * not keep it).  Other VMs then come and go, reusing the dead VM's memory:
 * the files must stay byte-identical to a snapshot taken before the exit.
 */
static void check_sole_holder(int dev)
{
	static struct stats_blob snap[NR_VCPUS + 1], now;
	int ours[NR_VCPUS + 1], i, n, bad = 0;
	struct child_vmm c;
	int uev = kvm_uevent_open();

	child_vmm_start(&c, NR_VCPUS, NULL, 57);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	child_vmm_close_fds(&c);
	/* Every vCPU has halted: nothing moves until the exit. */
	for (i = 0; i <= NR_VCPUS; i++)
		stats_read_all(ours[i], &snap[i], "snapshot");
	tap_eq(child_vmm_exit(&c), 0,
	       "child VMM exited; only our stats fds referred to its VM");
	n = kvm_uevent_wait(uev, "destroy", c.info.vm_creator_tid, 1, 15000);
	tap_check(n == 1, "and KVM destroyed it (uevent EVENT=destroy PID=%d)",
		  c.info.vm_creator_tid);
	close(uev);
	tap_eq(stats_value(&snap[1], STAT_IO_EXITS, 0), 57,
	       "the dead VMM's vCPU 0 read " STAT_IO_EXITS " 57");

	for (i = 0; i < 20; i++) {
		struct vm *vm = vm_create(2, NULL);

		vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 3 + i);
		vm_free(vm);
	}
	for (i = 0; i <= NR_VCPUS; i++) {
		stats_read_all(ours[i], &now, "after churn");
		bad += !stats_blob_equal(&snap[i], &now, "after churn");
		close(ours[i]);
	}
	tap_eq(bad, 0,
	       "after 20 other VMs came and went, the dead VMM's VM and vCPU "
	       "files read the snapshot taken before its exit");
}

struct reader {
	pthread_t thread;
	int fds[NR_VCPUS + 1];
	size_t sizes[NR_VCPUS + 1];
	volatile int *stop;
	volatile int *dead;
	unsigned long reads, reads_after_death, errors, went_back;
};

static uint64_t io_exits_of(const struct stats_blob *b)
{
	return stats_value(b, STAT_IO_EXITS, 0);
}

static void *reader_fn(void *arg)
{
	struct reader *r = arg;
	struct stats_blob *b = malloc(sizeof(*b));
	uint64_t last[NR_VCPUS + 1] = { 0 };

	while (!*r->stop) {
		int i;

		for (i = 0; i <= NR_VCPUS; i++) {
			ssize_t n = pread(r->fds[i], b->data, r->sizes[i], 0);

			if (n != (ssize_t)r->sizes[i]) {
				r->errors++;
				continue;
			}
			b->size = n;
			r->reads++;
			if (*r->dead)
				r->reads_after_death++;
			if (i > 0) {
				uint64_t v = io_exits_of(b);

				if (v < last[i])
					r->went_back++;
				last[i] = v;
			}
		}
	}
	free(b);
	return NULL;
}

static void check_sigkill(int dev)
{
	static struct stats_blob blob, vm_before, native_before;
	long v;
	struct reader readers[NR_READERS];
	volatile int stop = 0, dead = 0;
	uint64_t a, b, x, y;
	unsigned long errors = 0, after = 0, back = 0;
	int ours[NR_VCPUS + 1], i, j;
	struct child_vmm c;

	child_vmm_start(&c, NR_VCPUS, NULL, 1);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	close(c.vm_fd);
	c.vm_fd = -1;
	child_vmm_run_io_loop(&c);

	memset(readers, 0, sizeof(readers));
	for (i = 0; i < NR_READERS; i++) {
		for (j = 0; j <= NR_VCPUS; j++) {
			readers[i].fds[j] = ours[j];
			stats_read_all(ours[j], &blob, "stats fd");
			readers[i].sizes[j] = blob.size;
		}
		readers[i].stop = &stop;
		readers[i].dead = &dead;
		pthread_create(&readers[i].thread, NULL, reader_fn,
			       &readers[i]);
	}

	msleep(200);
	a = stats_read_stat(ours[1], STAT_IO_EXITS);
	b = stats_wait_above(ours[1], STAT_IO_EXITS, a, 5000);
	tap_check(b > a,
		  "while the VMM runs: " STAT_IO_EXITS " grows (%llu -> %llu)",
		  (unsigned long long)a, (unsigned long long)b);

	/* The guest's OUT loop touches no memory: VM stats stand still. */
	stats_read_all(ours[0], &vm_before, "VM stats");
	stats_read_all(c.native_vm_stats, &native_before, "native VM stats");
	tap_check(stats_blob_equal(&vm_before, &native_before, "before"),
		  "just before SIGKILL: VM file identical to native");
	kill(c.info.pid, SIGKILL);
	waitpid(c.info.pid, NULL, 0);
	dead = 1;
	close(c.sock);
	msleep(300);
	x = stats_read_stat(ours[1], STAT_IO_EXITS);
	msleep(300);
	y = stats_read_stat(ours[1], STAT_IO_EXITS);
	stop = 1;
	for (i = 0; i < NR_READERS; i++) {
		pthread_join(readers[i].thread, NULL);
		errors += readers[i].errors;
		after += readers[i].reads_after_death;
		back += readers[i].went_back;
		tap_diag("reader %d: %lu reads, %lu after SIGKILL, %lu errors",
			 i, readers[i].reads, readers[i].reads_after_death,
			 readers[i].errors);
	}
	tap_eq(errors, 0,
	       "%d reader threads: no failed or short read across SIGKILL",
	       NR_READERS);
	tap_check(after > 0,
		  "readers kept reading after the VMM died (%lu reads)", after);
	/* A torn u64 copy is allowed (no snapshot), so only report it. */
	tap_diag("readers saw " STAT_IO_EXITS " go backwards %lu times", back);
	tap_check(x == y && x >= b,
		  "after SIGKILL " STAT_IO_EXITS " is frozen (%llu, %llu)",
		  (unsigned long long)x, (unsigned long long)y);
	for (i = 0; i < NR_VCPUS; i++) {
		char what[96];

		snprintf(
			what, sizeof(what),
			"after SIGKILL: vCPU %d file identical to the dead VMM's native fd",
			i);
		stats_fds_identical(ours[i + 1], c.native_vcpu_stats[i], what);
	}
	stats_read_all(ours[0], &blob, "VM stats");
	tap_check(stats_blob_equal(&vm_before, &blob, "after SIGKILL"),
		  "after SIGKILL: VM file still reads what it (and the native "
		  "fd) read just before");
	stats_read_all(c.native_vm_stats, &blob, "native VM stats");
	diag_native_change(&native_before, &blob);
	v = kvmstats_wait_live_vms(base_vms, 10000);
	tap_check(v == base_vms,
		  "after SIGKILL: kvmstats holds its VM no more (live_vms %ld, "
		  "want %ld)",
		  v, base_vms);
	for (i = 0; i <= NR_VCPUS; i++)
		close(ours[i]);
	close(c.native_vm_stats);
	for (i = 0; i < NR_VCPUS; i++)
		close(c.native_vcpu_stats[i]);
}

static void alarm_handler(int sig)
{
	static const char msg[] =
		"not ok - a kvmstats call blocked for 10 s on a SIGSTOPped VMM\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(2);
}

static void check_sigstop(int dev)
{
	static struct stats_blob blob;
	struct kvmstats_vm *vms = NULL;
	struct child_vmm c;
	uint64_t t0, t1;
	int ours, vm_ours;
	ssize_t r;

	child_vmm_start(&c, 1, NULL, 1);
	child_vmm_spin(&c);
	kill(c.info.pid, SIGSTOP);
	msleep(200);

	signal(SIGALRM, alarm_handler);
	alarm(10);
	t0 = now_ns();
	ours = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, 0);
	vm_ours = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd, -1);
	r = __stats_read_all(ours, &blob);
	if (r > 0)
		r = __stats_read_all(vm_ours, &blob);
	kvmstats_list_vms(dev, &vms);
	t1 = now_ns();
	alarm(0);
	free(vms);
	tap_check(r > 0, "SIGSTOPped VMM: open, read and list work");
	tap_check(t1 - t0 < 2000000000ull,
		  "SIGSTOPped VMM: they took < 2 s (%llu us)",
		  (unsigned long long)(t1 - t0) / 1000);
	kill(c.info.pid, SIGCONT);
	child_vmm_kill(&c);
	child_vmm_close_fds(&c);
	close(ours);
	close(vm_ours);
}

int main(void)
{
	int dev;

	kvm_test_init();
	dev = kvmstats_open();
	base_vms = kvmstats_wait_settled(60000);
	tap_check(base_vms == 0,
		  "kvmstats holds no VM of earlier programs (live_vms %ld)",
		  base_vms);
	check_own_vm_closed(dev);
	check_vmm_exit(dev);
	check_sole_holder(dev);
	check_sigkill(dev);
	check_sigstop(dev);
	close(dev);
	return tap_exit();
}
