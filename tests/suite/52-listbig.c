// SPDX-License-Identifier: GPL-2.0-only
/*
 * LIST_VMS against large file tables (issue 17, review item 5): a process's
 * table is walked in chunks (the file-table lock held for at most 256 open
 * fds, at most 32 VM files gathered at a time), and nothing the module
 * allocates is sized by what another process holds.
 *
 *  - 40 VMs of one process, their fds scattered among 3000 other fds and
 *    each dup'd again higher up: each listed once, at its lowest fd, by
 *    LIST_VMS and LIST_PIDFD, and E2BIG's count exact.
 *  - A process holding 500,000 fds, all dups of one VM fd: the VM listed
 *    once, at the lowest, and the kernel's vmalloc use during the listing
 *    (sampled from /proc/meminfo by another thread) does not grow with the
 *    table: the old module's per-process array grew to one entry per dup.
 *  - A lister SIGKILLed in the middle of that walk dies.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "kvmstats_util.h"

#define NR_VMS	   40
#define NR_PAD	   3000
#define NR_DUPS	   500000
#define VMALLOC_MB 2 /* growth allowed while listing the big table */

static int dev;

struct target {
	pid_t pid;
	int sock;
	int lowest[NR_VMS]; /* each VM's lowest fd in the target */
	int nr;
};

static int raise_nofile(rlim_t n)
{
	struct rlimit rl = { n, n };

	return setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0;
}

/* A child that makes the table, reports the lowest fds, then waits. */
static void target_start(struct target *t, int big)
{
	int sv[2];
	char c;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		tap_bail("socketpair: %s", strerror(errno));
	t->pid = tap_fork();
	if (!t->pid) {
		int lowest[NR_VMS], i, nr = big ? 1 : NR_VMS, null;
		struct vm *vm;

		close(sv[0]);
		if (raise_nofile(NR_DUPS + 1024))
			_exit(3);
		null = open("/dev/null", O_RDONLY);
		for (i = 0; i < nr; i++) {
			vm = vm_create(0, NULL);
			lowest[i] = vm->fd;
			/* Other files between the VM fds, across chunks. */
			if (!big) {
				int k;

				for (k = 0; k < NR_PAD / NR_VMS; k++)
					if (dup(null) < 0)
						_exit(4);
				if (dup2(vm->fd, 100000 + i) < 0)
					_exit(5);
			}
		}
		if (big) {
			for (i = 0; i < NR_DUPS; i++)
				if (dup2(lowest[0], 1000 + i) < 0)
					_exit(6);
		}
		if (write(sv[1], lowest, nr * sizeof(int)) !=
		    (ssize_t)(nr * sizeof(int)))
			_exit(7);
		if (read(sv[1], &c, 1) < 0)
			_exit(8);
		_exit(0);
	}
	close(sv[1]);
	t->sock = sv[0];
	t->nr = big ? 1 : NR_VMS;
	if (read(t->sock, t->lowest, t->nr * sizeof(int)) !=
	    (ssize_t)(t->nr * sizeof(int)))
		tap_bail("the target did not make its table");
}

static void target_end(struct target *t)
{
	close(t->sock);
	waitpid(t->pid, NULL, 0);
}

/* The entries of @pid in @vms, checked against the lowest fds. */
static void check_entries(const struct kvmstats_vm *vms, int n,
			  const struct target *t, const char *what)
{
	int found = 0, wrong = 0, i, k;

	for (i = 0; i < n; i++) {
		if (vms[i].pid != t->pid)
			continue;
		found++;
		for (k = 0; k < t->nr; k++)
			if (vms[i].fd == t->lowest[k])
				break;
		if (k == t->nr)
			wrong++;
	}
	tap_check(
		found == t->nr && !wrong,
		"%s: %d entries of the target, %d at an fd that is not a VM's lowest (want %d, 0)",
		what, found, wrong, t->nr);
}

static void case_scattered(void)
{
	struct kvmstats_vm_list *l;
	struct kvmstats_vm *vms;
	struct target t;
	int n, pidfd, r;
	uint32_t total;

	target_start(&t, 0);
	n = kvmstats_list_vms(dev, &vms);
	check_entries(vms, n, &t,
		      "40 scattered VMs, dup'd higher up: LIST_VMS");
	free(vms);

	pidfd = pidfd_open_or_fail(t.pid);
	n = __kvmstats_list_pidfd(dev, pidfd, &vms);
	check_entries(vms, n, &t, "40 scattered VMs: LIST_PIDFD");
	free(vms);
	close(pidfd);

	l = calloc(1, sizeof(*l));
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)l);
	total = l->nr;
	n = kvmstats_list_vms(dev, &vms);
	tap_check(r == -E2BIG && total == (uint32_t)n,
		  "E2BIG with room 0: the count is exact (%u, listed %d)",
		  total, n);
	free(vms);
	free(l);
	target_end(&t);
}

/* ---- the big table ---- */

static long vmalloc_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmallocUsed: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static volatile int sampling;
static long peak_kb;

static void *sampler(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&sampling, __ATOMIC_SEQ_CST)) {
		long kb = vmalloc_kb();

		if (kb > peak_kb)
			peak_kb = kb;
	}
	return NULL;
}

static void case_big(void)
{
	struct kvmstats_vm *vms;
	struct target t;
	pthread_t th;
	long base_kb;
	uint64_t t0;
	int n, status;
	pid_t lister;

	target_start(&t, 1);
	base_kb = vmalloc_kb();
	peak_kb = base_kb;
	sampling = 1;
	if (pthread_create(&th, NULL, sampler, NULL))
		tap_bail("pthread_create failed");
	t0 = now_ns();
	n = kvmstats_list_vms(dev, &vms);
	tap_diag("LIST_VMS over a process with %d fds: %.1f ms", NR_DUPS + 4,
		 (now_ns() - t0) / 1e6);
	__atomic_store_n(&sampling, 0, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	check_entries(vms, n, &t, "500,000 dups of one VM fd: LIST_VMS");
	free(vms);
	tap_check(
		peak_kb - base_kb < VMALLOC_MB * 1024,
		"listing 500,000 dups: vmalloc grew by %ld kB at most (under %d MB)",
		peak_kb - base_kb, VMALLOC_MB);

	/* A lister killed in the middle of the walk dies. */
	lister = tap_fork();
	if (!lister) {
		for (;;)
			kvmstats_list_vms(dev, &vms);
	}
	msleep(200);
	t0 = now_ns();
	kill(lister, SIGKILL);
	waitpid(lister, &status, 0);
	tap_check(
		WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		"a lister SIGKILLed during the walk dies (%.1f ms after the signal)",
		(now_ns() - t0) / 1e6);
	target_end(&t);
}

int main(void)
{
	kvm_test_init();
	dev = kvmstats_open();
	if (raise_nofile(NR_DUPS + 1024))
		tap_bail("RLIMIT_NOFILE %d: %s", NR_DUPS + 1024,
			 strerror(errno));
	case_scattered();
	case_big();
	close(dev);
	return tap_exit();
}
