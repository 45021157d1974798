// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stats fd outlives its VM's fds and its VMM, and kvmstats holds the VM
 * only while someone else does too.
 *
 *  - This program closes its VM, vCPU and /dev/kvm fds but keeps native
 *    stats fds: the VM lives, and our files read live values identical to
 *    native, however long.  Once it closes the native fds too (and lives
 *    on), kvmstats' reference is the VM's last: KVM destroys the VM with
 *    our files open, and they read what the native fds read last.
 *  - A child VMM exits while native stats fds it passed over hold its VM:
 *    our files stay live and identical to them (KVM's teardown of the
 *    VMM's address space changed the native VM file in its page counts
 *    only, to 0: the premise stats_blob_torn_down() judges by), and
 *    kvmstats keeps its one reference; once the native fds close, KVM
 *    destroys the VM and our files read exactly what they last read.
 *  - A child VMM exits while only our files hold its VM: KVM destroys it,
 *    and the files hold the values of the moment kvmstats became its only
 *    holder, after the teardown: the vCPU files what they read before the
 *    exit, the VM file that with page counts 0 (what a native fd held
 *    across the death reads).  They are unchanged while 20 other VMs
 *    reuse the dead one's memory.
 *  - Four threads read across a running VMM's SIGKILL, and then across the
 *    freeze when the native fds that kept the VM close, without a single
 *    error; after the death the values stand still and equal native.
 *  - A VMM stopped with SIGSTOP never delays a read.
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
#define UEVENT_MS  15000 /* KVM's destroy event once the last holder goes */
#define SETTLE_MS  15000 /* live_vms back to its base */
#define HOLD_MS	   500	 /* five of kvmstats' scans for VMs only it holds */

static long base_vms;
static int uev;

/*
 * After the last holder but kvmstats let go of a VM created by @creator:
 * kvmstats gives its reference back (live_vms) and KVM destroys the VM
 * (uevent).  live_vms first: it drops once the VM is destroyed.
 */
static void check_let_go(pid_t creator, const char *when)
{
	long v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	int n = kvm_uevent_wait(uev, "destroy", creator, 1, UEVENT_MS);

	tap_check(n == 1,
		  "%s: KVM destroys the VM under our open files (uevent "
		  "EVENT=destroy PID=%d)",
		  when, creator);
	tap_check(v == base_vms,
		  "%s: kvmstats holds it no more (live_vms %ld, want %ld)",
		  when, v, base_vms);
}

/*
 * @nr of our files read @want, three times over 300 ms: a frozen file
 * never changes.
 */
static void check_reads(const int *fds, const struct stats_blob *want, int nr,
			const char *what)
{
	static struct stats_blob now;
	int r, i, bad = 0;

	for (r = 0; r < 3; r++) {
		for (i = 0; i < nr; i++) {
			stats_read_all(fds[i], &now, what);
			bad += !stats_blob_equal(&want[i], &now, what);
		}
		msleep(100);
	}
	tap_check(bad == 0, "%s (%d of %d reads differ)", what, bad, 3 * nr);
}

static void check_own_vm_closed(int dev)
{
	static struct stats_blob last[2];
	int ours[2], native[2], i;
	struct vm *vm;
	pid_t creator;
	long v;

	kvm_uevent_drain(uev);
	vm = vm_create(1, NULL);
	creator = vm->creator_tid;
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 77);
	ours[0] = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	ours[1] = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native[0] = vm_get_stats_fd(vm);
	native[1] = vcpu_get_stats_fd(vm->vcpus[0]);
	vm_free(vm); /* closes the VM, vCPU and /dev/kvm fds */

	tap_eq(stats_read_stat(ours[1], STAT_IO_EXITS), 77,
	       "own VM closed: vCPU stats fd still reads " STAT_IO_EXITS " 77");
	stats_fds_identical(ours[0], native[0],
			    "own VM closed: VM file identical to native");
	stats_fds_identical(ours[1], native[1],
			    "own VM closed: vCPU file identical to native");
	msleep(HOLD_MS);
	v = kvmstats_live_vms();
	tap_check(v == base_vms + 1,
		  "own VM closed, its native stats fds open: kvmstats still "
		  "holds the VM %d ms later (live_vms %ld, want %ld)",
		  HOLD_MS, v, base_vms + 1);
	stats_fds_identical(ours[0], native[0],
			    "and the VM file is still identical to native");
	for (i = 0; i < 2; i++) {
		stats_read_all(native[i], &last[i], "native");
		close(native[i]);
	}
	check_let_go(creator, "own VM's native stats fds closed too");
	check_reads(ours, last, 2,
		    "then our VM and vCPU files read what the native fds read "
		    "last");
	close(ours[0]);
	close(ours[1]);
}

static void check_vmm_exit(int dev)
{
	static struct stats_blob before, native_before, after, native_after;
	static struct stats_blob last[NR_VCPUS + 1];
	int ours[NR_VCPUS + 1], native[NR_VCPUS + 1], i;
	struct child_vmm c;
	long v;

	child_vmm_start(&c, NR_VCPUS, NULL, 31);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	native[0] = c.native_vm_stats;
	for (i = 0; i < NR_VCPUS; i++)
		native[i + 1] = c.native_vcpu_stats[i];
	close(c.vm_fd); /* the native stats fds hold the VM now */
	c.vm_fd = -1;
	stats_read_all(ours[0], &before, "VM stats");
	stats_read_all(native[0], &native_before, "native VM stats");
	tap_check(stats_blob_equal(&before, &native_before, "before the exit"),
		  "before the VMM exits: VM file identical to its native fd");
	tap_eq(child_vmm_exit(&c), 0, "child VMM exited normally");
	for (i = 0; i < NR_VCPUS; i++)
		tap_eq(stats_read_stat(ours[i + 1], STAT_IO_EXITS), 31,
		       "after the VMM exited: vCPU %d reads " STAT_IO_EXITS
		       " 31",
		       i);
	stats_read_all(native[0], &native_after, "native VM stats");
	tap_check(
		stats_blob_torn_down(&native_before, &native_after,
				     "native VM file across the exit"),
		"KVM's teardown at the exit changed the native VM file in "
		"its page counts only, to 0 (pages_4k %llu -> %llu)",
		(unsigned long long)stats_value(&native_before, "pages_4k", 0),
		(unsigned long long)stats_value(&native_after, "pages_4k", 0));
	stats_read_all(ours[0], &after, "VM stats");
	tap_check(stats_blob_equal(&native_after, &after, "after the exit"),
		  "after the VMM exited: VM file identical to the native fd "
		  "that holds the VM");
	for (i = 0; i < NR_VCPUS; i++) {
		char what[96];

		snprintf(
			what, sizeof(what),
			"after the VMM exited: vCPU %d file identical to its native fd",
			i);
		stats_fds_identical(ours[i + 1], native[i + 1], what);
	}
	msleep(HOLD_MS);
	v = kvmstats_live_vms();
	tap_check(v == base_vms + 1,
		  "while native fds hold the dead VMM's VM, kvmstats keeps its "
		  "one reference (live_vms %ld, want %ld)",
		  v, base_vms + 1);
	for (i = 0; i <= NR_VCPUS; i++) {
		stats_read_all(native[i], &last[i], "native");
		close(native[i]);
	}
	check_let_go(c.info.vm_creator_tid, "the native fds closed");
	check_reads(ours, last, NR_VCPUS + 1,
		    "then our VM and vCPU files read what the native fds read "
		    "last");
	for (i = 0; i <= NR_VCPUS; i++)
		close(ours[i]);
}

/*
 * Only our stats fds hold an exited VMM's VM, so KVM destroys it (they do
 * not keep it).  Other VMs then come and go, reusing the dead VM's memory:
 * the files must stay byte-identical to what they read once it was gone.
 */
static void check_sole_holder(int dev)
{
	static struct stats_blob snap[NR_VCPUS + 1], frozen[NR_VCPUS + 1];
	static struct stats_blob now;
	int ours[NR_VCPUS + 1], i, bad = 0;
	struct child_vmm c;

	child_vmm_start(&c, NR_VCPUS, NULL, 57);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	child_vmm_close_fds(&c);
	/* Every vCPU has halted: nothing moves until the exit. */
	for (i = 0; i <= NR_VCPUS; i++)
		stats_read_all(ours[i], &snap[i], "snapshot");
	tap_eq(stats_value(&snap[1], STAT_IO_EXITS, 0), 57,
	       "the VMM's vCPU 0 read " STAT_IO_EXITS " 57");
	tap_eq(child_vmm_exit(&c), 0,
	       "child VMM exited; only our stats fds referred to its VM");
	check_let_go(c.info.vm_creator_tid, "VMM exited, only our files held "
					    "its VM");
	for (i = 0; i <= NR_VCPUS; i++)
		stats_read_all(ours[i], &frozen[i], "frozen");
	for (i = 1; i <= NR_VCPUS; i++)
		bad += !stats_blob_equal(&snap[i], &frozen[i], "vCPU file");
	tap_eq(bad, 0,
	       "frozen once only kvmstats held the VM: the vCPU files read "
	       "what they read before the exit");
	tap_check(stats_blob_torn_down(&snap[0], &frozen[0], "VM file"),
		  "and the VM file what it read before the exit, but with the "
		  "page counts KVM's teardown left (pages_4k %llu -> %llu), as "
		  "a native fd held across the exit reads",
		  (unsigned long long)stats_value(&snap[0], "pages_4k", 0),
		  (unsigned long long)stats_value(&frozen[0], "pages_4k", 0));

	bad = 0;
	for (i = 0; i < 20; i++) {
		struct vm *vm = vm_create(2, NULL);

		vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 3 + i);
		vm_free(vm);
	}
	for (i = 0; i <= NR_VCPUS; i++) {
		stats_read_all(ours[i], &now, "after churn");
		bad += !stats_blob_equal(&frozen[i], &now, "after churn");
		close(ours[i]);
	}
	tap_eq(bad, 0,
	       "after 20 other VMs came and went, the dead VMM's VM and vCPU "
	       "files read what they read once it was destroyed");
}

struct reader {
	pthread_t thread;
	int fds[NR_VCPUS + 1];
	size_t sizes[NR_VCPUS + 1];
	volatile int *stop;
	volatile int *dead;
	volatile int *frozen;
	unsigned long reads, reads_after_death, reads_after_freeze, errors;
	unsigned long went_back;
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
			if (*r->frozen)
				r->reads_after_freeze++;
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
	static struct stats_blob last[NR_VCPUS + 1];
	struct reader readers[NR_READERS];
	volatile int stop = 0, dead = 0, frozen = 0;
	uint64_t a, b, x, y;
	unsigned long errors = 0, after = 0, after_freeze = 0, back = 0;
	int ours[NR_VCPUS + 1], native[NR_VCPUS + 1], i, j, n;
	struct child_vmm c;
	long v;

	child_vmm_start(&c, NR_VCPUS, NULL, 1);
	for (i = 0; i <= NR_VCPUS; i++)
		ours[i] = kvmstats_get_stats_fd(dev, c.info.pid, c.info.vm_fd,
						i - 1);
	native[0] = c.native_vm_stats;
	for (i = 0; i < NR_VCPUS; i++)
		native[i + 1] = c.native_vcpu_stats[i];
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
		readers[i].frozen = &frozen;
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
	stats_read_all(native[0], &native_before, "native VM stats");
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
	tap_check(x == y && x >= b,
		  "after SIGKILL " STAT_IO_EXITS " stands still (%llu, %llu)",
		  (unsigned long long)x, (unsigned long long)y);
	for (i = 0; i < NR_VCPUS; i++) {
		char what[96];

		snprintf(
			what, sizeof(what),
			"after SIGKILL: vCPU %d file identical to the dead VMM's native fd",
			i);
		stats_fds_identical(ours[i + 1], native[i + 1], what);
	}
	stats_read_all(native[0], &last[0], "native VM stats");
	tap_check(stats_blob_torn_down(&native_before, &last[0],
				       "native VM file across SIGKILL"),
		  "KVM's teardown at SIGKILL changed the native VM file in its "
		  "page counts only");
	stats_read_all(ours[0], &blob, "VM stats");
	tap_check(stats_blob_equal(&last[0], &blob, "after SIGKILL"),
		  "after SIGKILL: VM file identical to the native fd that "
		  "holds the VM");
	v = kvmstats_live_vms();
	tap_check(v == base_vms + 1,
		  "after SIGKILL, while the native fds hold the VM: kvmstats "
		  "keeps its reference (live_vms %ld, want %ld)",
		  v, base_vms + 1);

	/* The readers read on while the native fds close: the freeze. */
	for (i = 0; i <= NR_VCPUS; i++) {
		stats_read_all(native[i], &last[i], "native");
		close(native[i]);
	}
	v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	frozen = 1;
	n = kvm_uevent_wait(uev, "destroy", c.info.vm_creator_tid, 1,
			    UEVENT_MS);
	msleep(300);
	stop = 1;
	for (i = 0; i < NR_READERS; i++) {
		pthread_join(readers[i].thread, NULL);
		errors += readers[i].errors;
		after += readers[i].reads_after_death;
		after_freeze += readers[i].reads_after_freeze;
		back += readers[i].went_back;
		tap_diag("reader %d: %lu reads, %lu after SIGKILL, %lu after "
			 "the freeze, %lu errors",
			 i, readers[i].reads, readers[i].reads_after_death,
			 readers[i].reads_after_freeze, readers[i].errors);
	}
	tap_check(n == 1 && v == base_vms,
		  "the native fds closed: KVM destroyed the VM (uevent: %d) "
		  "and kvmstats holds it no more (live_vms %ld, want %ld)",
		  n, v, base_vms);
	tap_eq(errors, 0,
	       "%d reader threads: no failed or short read across SIGKILL and "
	       "the freeze",
	       NR_READERS);
	tap_check(after > 0 && after_freeze > 0,
		  "readers kept reading after the VMM died (%lu reads) and "
		  "after the freeze (%lu)",
		  after, after_freeze);
	/* A torn u64 copy is allowed (no snapshot), so only report it. */
	tap_diag("readers saw " STAT_IO_EXITS " go backwards %lu times", back);
	check_reads(ours, last, NR_VCPUS + 1,
		    "frozen: our VM and vCPU files read what the native fds "
		    "read last");
	for (i = 0; i <= NR_VCPUS; i++)
		close(ours[i]);
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
	uev = kvm_uevent_open();
	base_vms = kvmstats_wait_settled(60000);
	tap_check(base_vms == 0,
		  "kvmstats holds no VM of earlier programs (live_vms %ld)",
		  base_vms);
	check_own_vm_closed(dev);
	check_vmm_exit(dev);
	check_sole_holder(dev);
	check_sigkill(dev);
	check_sigstop(dev);
	close(uev);
	close(dev);
	return tap_exit();
}
