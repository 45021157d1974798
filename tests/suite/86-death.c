// SPDX-License-Identifier: GPL-2.0-only
/*
 * VMM deaths under load.
 *
 * Child VMMs (100, 1000 with KVMSTATS_LONG=1; KVMSTATS_DEATHS overrides),
 * a few alive at a time, each with four vCPUs: one looping on port I/O,
 * one spinning in the guest, one halted, one never run.  A third of them
 * are stopped with SIGSTOP.  Each is killed with SIGKILL at a random
 * moment (some while still creating their VM) while 8 reader threads
 * pread and READ_BATCH the stats fds of their VM and vCPUs, and another
 * thread runs LIST_VMS in a loop.  Every read must succeed with the whole
 * file, before and after the death.  After it nothing runs the VM, and
 * within a few hundred ms kvmstats, its only holder, freezes the files
 * with the values of that moment: so from the death until we close them
 * (0 to 20 ms later, for a quarter of the VMMs 300 to 500 ms, past the
 * freeze; the last ones once kvmstats holds none of their VMs) the files
 * read the same.  The dead pid is ESRCH, and nothing is leaked or logged.
 * Once the last VMMs are dead, with their stats fds still open, kvmstats
 * holds none of their VMs (live_vms) and KVM has destroyed them all (the
 * vendor module's refcount, where KVM is built in KVM's own count of live
 * VMs, is back to its base).
 *
 * Seeded: KVMSTATS_DEATH_SEED replays the schedule.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "rel_util.h"

#define SLOTS	    4
#define NR_VCPUS    4
#define NR_FDS	    (NR_VCPUS + 1) /* the VM's and each vCPU's */
#define READERS	    8
#define MAX_REPORTS 20

enum slot_state { S_EMPTY, S_STARTING, S_ALIVE, S_DEAD };

struct slot {
	pthread_rwlock_t lock; /* readers vs. closing the fds */
	enum slot_state state;
	pid_t pid;
	int vm_fd;	   /* its number in the child */
	int ready_fd;	   /* read end of its ready pipe, or -1 */
	int fds[NR_FDS];   /* stats fds; -1 when not obtained */
	volatile int dead; /* SIGKILLed (readers count reads after) */
	uint64_t kill_at, close_at, dead_at;
	uint8_t last[NR_FDS][8192]; /* read just after the death */
	ssize_t last_len[NR_FDS];
	bool stopped;
	bool early; /* to be killed while it creates its VM */
};

static struct slot slots[SLOTS];
static int dev;
static size_t size_vm, size_vcpu;
static volatile int stop;
static struct rng sched_rng;

static unsigned long reads, reads_after_death, read_fail, batches, batch_fail;
static unsigned long lists, list_fail, reports;
static uint64_t max_read_ns;
static pthread_mutex_t stat_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *fmt, ...) __printf(1, 2);
static void report(const char *fmt, ...)
{
	va_list ap;
	char msg[400];

	if (__atomic_fetch_add(&reports, 1, __ATOMIC_RELAXED) >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tap_diag("%s", msg);
}

/* ---- the child VMM ---- */

static void __attribute__((noreturn)) vmm_main(int ready_fd, bool spin)
{
	struct vm *vm = vm_create(NR_VCPUS, NULL);
	int fd = vm->fd;

	vcpu_load_prog(vm->vcpus[0], GUEST_IO_LOOP, 0);
	vcpu_thread_start(vm->vcpus[0]);
	/* Half of the VMMs have a second vCPU in the guest, spinning. */
	if (spin) {
		vcpu_load_prog(vm->vcpus[1], GUEST_SPIN, 0);
		vcpu_thread_start(vm->vcpus[1]);
	}
	vcpu_load_prog(vm->vcpus[2], GUEST_HLT, 0);
	vcpu_run_to_hlt(vm->vcpus[2]);
	/* vCPU 3 never runs. */
	if (write(ready_fd, &fd, sizeof(fd)) != sizeof(fd))
		_exit(2);
	for (;;)
		pause();
}

/*
 * Fork a VMM into @s.  It creates its VM while the main loop goes on with
 * the other slots; early kills hit it somewhere in that creation.
 */
static void spawn(struct slot *s, bool early_kill)
{
	int pfd[2], i;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK))
		tap_bail("pipe: %s", strerror(errno));
	pid = tap_fork();
	if (!pid) {
		close(pfd[0]);
		close(dev);
		vmm_main(pfd[1], rng_chance(&sched_rng, 50));
	}
	close(pfd[1]);
	s->pid = pid;
	s->dead = 0;
	s->stopped = false;
	s->early = early_kill;
	s->vm_fd = -1;
	s->ready_fd = pfd[0]; /* closed after the kill: no SIGPIPE */
	for (i = 0; i < NR_FDS; i++)
		s->fds[i] = -1;
	s->kill_at = now_ns() + rng_below(&sched_rng, 20) * 1000000ull;
	s->state = S_STARTING;
}

/* A starting VMM: once it is ready, take its stats fds.  True if it is. */
static bool poll_ready(struct slot *s)
{
	int vmfd, i;
	ssize_t n = read(s->ready_fd, &vmfd, sizeof(vmfd));

	if (n < 0 && errno == EAGAIN)
		return false;
	if (n != sizeof(vmfd))
		tap_bail("VMM %d died before it was ready", s->pid);
	close(s->ready_fd);
	s->ready_fd = -1;
	s->vm_fd = vmfd;
	if (rng_chance(&sched_rng, 33)) {
		kill(s->pid, SIGSTOP);
		s->stopped = true;
	}
	pthread_rwlock_wrlock(&s->lock);
	for (i = 0; i < NR_FDS; i++) {
		int r = __kvmstats_get_stats_fd(dev, s->pid, vmfd, i - 1);

		if (r < 0)
			tap_bail(
				"GET_STATS_FD(pid %d, fd %d, vcpu %d) of a live VMM: %s",
				s->pid, vmfd, i - 1, strerror(-r));
		s->fds[i] = r;
	}
	s->state = S_ALIVE;
	pthread_rwlock_unlock(&s->lock);
	s->kill_at = now_ns() + rng_below(&sched_rng, 40) * 1000000ull;
	return true;
}

/* ---- readers ---- */

static void *reader(void *arg)
{
	struct rng r = { .s = (uint64_t)(uintptr_t)arg *
			      0x9e3779b97f4a7c15ull };
	static __thread uint8_t buf[2][8192];
	unsigned long n = 0, after = 0, nb = 0;

	while (!stop) {
		struct slot *s = &slots[rng_below(&r, SLOTS)];
		int i, dead;

		pthread_rwlock_rdlock(&s->lock);
		if ((s->state != S_ALIVE && s->state != S_DEAD) ||
		    s->fds[0] < 0) {
			pthread_rwlock_unlock(&s->lock);
			sched_yield();
			continue;
		}
		dead = s->dead;
		if (rng_chance(&r, 70)) {
			uint64_t t0 = now_ns(), dt;
			ssize_t got;
			size_t want;

			i = rng_below(&r, NR_FDS);
			want = i ? size_vcpu : size_vm;
			got = pread(s->fds[i], buf[0], sizeof(buf[0]), 0);
			dt = now_ns() - t0;
			if (dt > max_read_ns)
				max_read_ns = dt; /* racy max: good enough */
			n++;
			after += dead;
			if (got != (ssize_t)want) {
				__atomic_fetch_add(&read_fail, 1,
						   __ATOMIC_RELAXED);
				report("pread of %s stats of VMM %d (%s): %zd (%s), want %zu",
				       i ? "vCPU" : "VM", s->pid,
				       dead ? "dead" : "alive", got,
				       got < 0 ? strerror(errno) : "short",
				       want);
			}
		} else {
			struct kvmstats_read_op ops[NR_FDS];
			int ret;

			for (i = 0; i < NR_FDS; i++)
				ops[i] = (struct kvmstats_read_op){
					.fd = s->fds[i],
					.buf = (uintptr_t)buf[i & 1],
					.len = sizeof(buf[0]),
				};
			ret = __kvmstats_read_batch(dev, ops, NR_FDS);
			nb++;
			n += NR_FDS;
			after += dead ? NR_FDS : 0;
			for (i = 0; i < NR_FDS; i++) {
				size_t want = i ? size_vcpu : size_vm;

				if (ret || ops[i].result != (int)want) {
					__atomic_fetch_add(&batch_fail, 1,
							   __ATOMIC_RELAXED);
					report("READ_BATCH on VMM %d (%s): ioctl %d, op %d: %d, want %zu",
					       s->pid, dead ? "dead" : "alive",
					       ret, i, ops[i].result, want);
					break;
				}
			}
		}
		pthread_rwlock_unlock(&s->lock);
		/* Hammer, but leave the 2 guest CPUs some room for the VMMs. */
		if ((n & 7) == 0)
			usleep(500);
	}
	pthread_mutex_lock(&stat_lock);
	reads += n;
	reads_after_death += after;
	batches += nb;
	pthread_mutex_unlock(&stat_lock);
	return NULL;
}

static void *lister(void *arg)
{
	(void)arg;
	while (!stop) {
		struct kvmstats_vm *list;
		int n = __kvmstats_list_vms(dev, &list), i;

		lists++;
		if (n < 0) {
			list_fail++;
			report("LIST_VMS failed: %s", strerror(-n));
			continue;
		}
		for (i = 0; i < n; i++)
			if (list[i].nr_vcpus > NR_VCPUS || list[i].flags ||
			    (i && (list[i].pid < list[i - 1].pid ||
				   (list[i].pid == list[i - 1].pid &&
				    list[i].fd <= list[i - 1].fd)))) {
				list_fail++;
				report("LIST_VMS entry %d: pid %d fd %d vcpus %u flags %#x",
				       i, list[i].pid, list[i].fd,
				       list[i].nr_vcpus, list[i].flags);
				break;
			}
		free(list);
		usleep(1000);
	}
	return NULL;
}

/* ---- main ---- */

static unsigned long frozen_bad, esrch_bad, deaths, held_long, compared;
static const char *vendor;

static long refcnt_arg(const char *name)
{
	return rel_kvm_pins(name);
}

static void kill_slot(struct slot *s)
{
	static uint8_t a[8192], b[8192];
	int status, r;

	kill(s->pid, SIGKILL);
	if (waitpid(s->pid, &status, 0) != s->pid)
		tap_bail("waitpid(%d): %s", s->pid, strerror(errno));
	s->dead = 1;
	deaths++;
	if (s->ready_fd >= 0)
		close(s->ready_fd);
	s->ready_fd = -1;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		report("VMM %d ended with status %#x, not by SIGKILL", s->pid,
		       status);

	/* The pid is gone: ESRCH (it cannot be reused while we hold nothing). */
	if (s->vm_fd >= 0) {
		r = __kvmstats_get_stats_fd(dev, s->pid, s->vm_fd, -1);
		if (r >= 0)
			close(r);
		if (r != -ESRCH) {
			esrch_bad++;
			report("GET_STATS_FD on reaped VMM %d: %d, want -ESRCH",
			       s->pid, r);
		}
	}
	/* Standing still: two reads of every file, 2 ms apart, are equal. */
	if (s->fds[0] >= 0) {
		int i;

		for (i = 0; i < NR_FDS; i++) {
			ssize_t x = pread(s->fds[i], a, sizeof(a), 0), y;

			msleep(2);
			y = pread(s->fds[i], b, sizeof(b), 0);
			if (x <= 0 || x != y || memcmp(a, b, x)) {
				frozen_bad++;
				report("stats %d of dead VMM %d changed or failed (%zd, %zd)",
				       i, s->pid, x, y);
			}
			memcpy(s->last[i], b, sizeof(b));
			s->last_len[i] = y;
		}
	}
	s->state = S_DEAD;
	s->dead_at = now_ns();
	/* A quarter stay open past kvmstats' freeze (a 100 ms scan). */
	if (rng_chance(&sched_rng, 25))
		s->close_at = s->dead_at +
			      (300 + rng_below(&sched_rng, 200)) * 1000000ull;
	else
		s->close_at =
			s->dead_at + rng_below(&sched_rng, 20) * 1000000ull;
}

/* Until we close them, a dead VMM's files read what they read at its death. */
static void close_slot(struct slot *s)
{
	static uint8_t now[8192];
	int i;

	if (s->state == S_DEAD && s->fds[0] >= 0) {
		compared++;
		held_long += now_ns() - s->dead_at >= 300000000ull;
		for (i = 0; i < NR_FDS; i++) {
			ssize_t n = pread(s->fds[i], now, sizeof(now), 0);

			if (n != s->last_len[i] || memcmp(now, s->last[i], n)) {
				frozen_bad++;
				report("stats %d of dead VMM %d changed %.0f ms after its death (%zd, %zd)",
				       i, s->pid, (now_ns() - s->dead_at) / 1e6,
				       n, s->last_len[i]);
			}
		}
	}
	pthread_rwlock_wrlock(&s->lock);
	for (i = 0; i < NR_FDS; i++)
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	for (i = 0; i < NR_FDS; i++)
		s->fds[i] = -1;
	s->state = S_EMPTY;
	pthread_rwlock_unlock(&s->lock);
}

/* The sizes of a VM and a vCPU stats file, from a VM of our own. */
static void learn_sizes(void)
{
	struct stats_blob *blob = malloc(sizeof(*blob));
	struct vm *vm = vm_create(1, NULL);
	int fd;

	fd = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	stats_read_all(fd, blob, "VM stats");
	size_vm = blob->size;
	close(fd);
	fd = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	stats_read_all(fd, blob, "vCPU stats");
	size_vcpu = blob->size;
	close(fd);
	vm_free(vm);
	free(blob);
}

int main(void)
{
	unsigned long target =
		rel_env_num("KVMSTATS_DEATHS", rel_long() ? 1000 : 100);
	unsigned long budget_s = rel_env_num("KVMSTATS_TEST_TIMEOUT", 120) -
				 50; /* settling before, teardown: < 25 s */
	uint64_t seed = rel_seed("KVMSTATS_DEATH_SEED"), start, deadline;
	pthread_rwlockattr_t attr;
	pthread_t rd[READERS], ls;
	unsigned long spawned = 0, early = 0, stopped = 0;
	uint64_t t_start = now_ns();
	long live, vms, ref, base_vms, base_ref;
	int i, kmsg, open_fds = 0;

	kvm_test_init(); /* keeper VM: see tests/suite/FINDINGS.md */
	vendor = rel_vendor();
	base_vms = kvmstats_wait_settled(60000);
	if (base_vms)
		tap_bail("kvmstats still holds %ld VMs of earlier programs",
			 base_vms);
	base_ref = rel_kvm_pins(vendor);
	sched_rng.s = seed;
	tap_diag(
		"seed 0x%016llx, %lu deaths (replay: KVMSTATS_DEATH_SEED=0x%016llx)",
		(unsigned long long)seed, target, (unsigned long long)seed);
	kmsg = rel_kmsg_open();
	dev = kvmstats_open();
	learn_sizes();
	tap_diag("stats file sizes: VM %zu, vCPU %zu", size_vm, size_vcpu);

	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (i = 0; i < SLOTS; i++) {
		pthread_rwlock_init(&slots[i].lock, &attr);
		slots[i].state = S_EMPTY;
		slots[i].fds[0] = -1;
	}
	for (i = 0; i < READERS; i++)
		pthread_create(&rd[i], NULL, reader,
			       (void *)(uintptr_t)(seed + i + 1));
	pthread_create(&ls, NULL, lister, NULL);

	start = now_ns();
	deadline = t_start + budget_s * 1000000000ull;
	while (deaths < target && now_ns() < deadline) {
		for (i = 0; i < SLOTS; i++) {
			struct slot *s = &slots[i];
			uint64_t now = now_ns();

			if (s->state == S_EMPTY && spawned < target) {
				bool e = rng_chance(&sched_rng, 10);

				spawn(s, e);
				spawned++;
				early += e;
			} else if (s->state == S_STARTING) {
				if (s->early && now >= s->kill_at)
					kill_slot(s);
				else if (poll_ready(s))
					stopped += s->stopped;
			} else if (s->state == S_ALIVE && now >= s->kill_at) {
				kill_slot(s);
			} else if (s->state == S_DEAD && now >= s->close_at) {
				close_slot(s);
			}
		}
		msleep(1);
	}
	for (i = 0; i < SLOTS; i++) {
		if (slots[i].state == S_ALIVE || slots[i].state == S_STARTING)
			kill_slot(&slots[i]);
		if (slots[i].state == S_DEAD && slots[i].fds[0] >= 0)
			open_fds += NR_FDS;
	}
	/* Every VMM is dead; the readers go on with the last ones' fds. */
	vms = kvmstats_wait_live_vms(base_vms, 20000);
	ref = rel_wait_value(refcnt_arg, vendor, base_ref, 20000);
	for (i = 0; i < SLOTS; i++)
		if (slots[i].state == S_DEAD)
			close_slot(&slots[i]);
	stop = 1;
	for (i = 0; i < READERS; i++)
		pthread_join(rd[i], NULL);
	pthread_join(ls, NULL);

	tap_diag(
		"%lu VMMs, %lu killed while creating their VM, %lu SIGSTOPped; "
		"%.1f s",
		spawned, early, stopped, (now_ns() - start) / 1e9);
	tap_diag(
		"%lu reads (%lu in %lu READ_BATCHes), %lu of them after the VMM's "
		"death; %lu LIST_VMS; slowest pread %.1f ms",
		reads, batches * NR_FDS, batches, reads_after_death, lists,
		max_read_ns / 1e6);
	tap_check(deaths >= target,
		  "%lu VMM deaths by SIGKILL within %lu s (wanted %lu)", deaths,
		  budget_s, target);
	tap_check(
		reads_after_death > 0 && read_fail == 0,
		"every pread returned the whole file, before and after the deaths "
		"(%lu failed)",
		read_fail);
	tap_check(batches > 0 && batch_fail == 0,
		  "every READ_BATCH op returned the whole file (%lu failed)",
		  batch_fail);
	tap_check(lists > 0 && list_fail == 0,
		  "LIST_VMS never failed (%lu calls, %lu bad)", lists,
		  list_fail);
	tap_check(frozen_bad == 0 && held_long > 0,
		  "stats of a dead VMM read the same from its death until they "
		  "are closed, across the freeze (%lu bad; %lu VMMs compared, "
		  "%lu of them 300 ms or more after the death)",
		  frozen_bad, compared, held_long);
	tap_check(vms == base_vms,
		  "every VMM dead, %d of their stats fds still open: kvmstats "
		  "holds none of their VMs (live_vms %ld, base %ld)",
		  open_fds, vms, base_vms);
	tap_check(ref == base_ref,
		  "and KVM destroyed every VM under them (%s %ld, base %ld)",
		  rel_kvm_what(vendor), ref, base_ref);
	tap_check(esrch_bad == 0,
		  "GET_STATS_FD on a reaped VMM is ESRCH (%lu bad)", esrch_bad);
	/* Scheduling under TCG costs up to a second or two; a read that
	 * waited for a stopped VMM would never come back at all. */
	tap_check(max_read_ns < 10000000000ull,
		  "no pread waited for a VMM (slowest %.1f ms < 10 s)",
		  max_read_ns / 1e6);
	close(dev);
	live = rel_wait_value(rel_live_files_arg, NULL, 0, 3000);
	tap_check(live == 0, "live_files is 0 afterwards (%ld)", live);
	rel_kmsg_check(kmsg, "deaths under load");
	return tap_exit();
}
