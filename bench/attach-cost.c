// SPDX-License-Identifier: GPL-2.0-only
/*
 * What attaching to a VM costs its VMM, and how fast VMs are given back
 * (docs/design.md; issue 17).  Run in the test guest by bench/attach-cost
 * and by make bench.
 *
 * Attaching: a VM's first stats file makes its tracker, and the close of
 * its last gives the tracker's VM reference back; a further file of the
 * same VM does neither.  Neither touches the VMM's address space (the
 * module of 718b7de registered an MMU notifier there at the first file,
 * mmap_lock for writing and mm_take_all_locks(), which grew with the VMM's
 * mappings), so the cost of a first file must not depend on the VMM's
 * VMAs, and the VMM's page faults must not notice.
 *
 * A child VMM makes a VM with one vCPU and, to look like a real VMM, a
 * number of extra VMAs with anonymous memory in them, and a thread of it
 * faults pages in all along, timing each fault.  This process then spends
 * alternate windows (ABBA) doing one of three things as fast as it can:
 *
 *   quiet    nothing;
 *   first    open and close the VM's stats file while it is the VM's only
 *            one (each open registers, each close unregisters);
 *   further  the same while another stats file of the VM stays open.
 *
 * Printed: opens per window and the cost of one, and the VMM's page-fault
 * latency (median, 99th percentile, largest) in each kind of window.  All
 * times are TCG-emulated: the ratios are the result.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/kvm.h>

#include "../include/uapi/linux/kvmstats.h"

#define WINDOW_NS   700000000ULL /* one window */
#define LIVE_VMS    "/sys/module/kvmstats/parameters/live_vms"
#define ROUNDS	    4	      /* of ABBA windows for first/further */
#define FAULT_PAGES 4096      /* the fault thread's region */
#define MAX_SAMPLES (1 << 20) /* per kind of window */

enum { QUIET, FIRST, FURTHER, NR_KINDS };
static const char *const kind_name[NR_KINDS] = { "quiet", "first", "further" };

/* Shared with the child VMM. */
struct shared {
	volatile int ready, stop, kind, vm_fd;
	volatile uint32_t nr[NR_KINDS];
	uint32_t ns[NR_KINDS][MAX_SAMPLES];
};

static struct shared *sh;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "tracker-cost: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* The VMM's fault thread: touch fresh pages, time each touch. */
static void *fault_thread(void *arg)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem;
	int i;

	(void)arg;
	mem = mmap(NULL, FAULT_PAGES * page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	/* A fault a page, not one for 512 of them. */
	madvise(mem, FAULT_PAGES * page, MADV_NOHUGEPAGE);
	while (!sh->stop) {
		for (i = 0; i < FAULT_PAGES && !sh->stop; i++) {
			int k = sh->kind;
			uint64_t t0 = now_ns();
			uint32_t n;

			mem[i * page] = 1;
			n = sh->nr[k];
			if (n < MAX_SAMPLES) {
				sh->ns[k][n] = (uint32_t)(now_ns() - t0);
				sh->nr[k] = n + 1;
			}
		}
		madvise(mem, FAULT_PAGES * page, MADV_DONTNEED);
	}
	return NULL;
}

static void vmm(int nr_vmas)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kvm_userspace_memory_region r = { 0 };
	pthread_t t;
	void *guest;
	int kvm, vm, i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm: %s", strerror(errno));
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		die("KVM_CREATE_VM: %s", strerror(errno));
	guest = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (guest == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	r.memory_size = 2 << 20;
	r.userspace_addr = (uintptr_t)guest;
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) ||
	    ioctl(vm, KVM_CREATE_VCPU, 0) < 0)
		die("VM setup: %s", strerror(errno));
	/* Separate VMAs (alternate protections never merge), each touched. */
	for (i = 0; i < nr_vmas; i++) {
		int prot = i & 1 ? PROT_READ : PROT_READ | PROT_WRITE;
		char *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			die("mmap %d: %s", i, strerror(errno));
		p[0] = 1;
		mprotect(p, page, prot);
	}
	if (pthread_create(&t, NULL, fault_thread, NULL))
		die("pthread_create");
	sh->vm_fd = vm;
	sh->ready = 1;
	pthread_join(t, NULL);
	_exit(0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int stats_fd(int dev, pid_t pid)
{
	struct kvmstats_fd_request req = {
		.pid = pid,
		.fd = sh->vm_fd,
		.vcpu = -1,
	};
	int fd = ioctl(dev, KVMSTATS_GET_STATS_FD, &req);

	if (fd < 0)
		die("KVMSTATS_GET_STATS_FD: %s", strerror(errno));
	return fd;
}

/* One window of @kind: returns the opens made, their time in *ns. */
static unsigned long window(int dev, pid_t pid, int kind, uint64_t *ns)
{
	unsigned long opens = 0;
	uint64_t t0, end;
	int keep = -1;

	if (kind == FURTHER)
		keep = stats_fd(dev, pid);
	sh->kind = kind;
	t0 = now_ns();
	end = t0 + WINDOW_NS;
	if (kind == QUIET) {
		while (now_ns() < end)
			usleep(1000);
	} else {
		while (now_ns() < end) {
			close(stats_fd(dev, pid));
			opens++;
		}
	}
	*ns += now_ns() - t0;
	sh->kind = QUIET;
	if (keep >= 0)
		close(keep);
	return opens;
}

static void level(int dev, int nr_vmas)
{
	static const int abba[4] = { FIRST, FURTHER, FURTHER, FIRST };
	unsigned long opens[NR_KINDS] = { 0 };
	uint64_t ns[NR_KINDS] = { 0 };
	double open_us[NR_KINDS];
	pid_t pid;
	int r, k;

	memset(sh, 0, sizeof(*sh));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid)
		vmm(nr_vmas);
	while (!sh->ready)
		usleep(1000);
	usleep(200000);
	for (r = 0; r < ROUNDS; r++) {
		opens[QUIET] += window(dev, pid, QUIET, &ns[QUIET]);
		for (k = 0; k < 4; k++)
			opens[abba[k]] +=
				window(dev, pid, abba[k], &ns[abba[k]]);
	}
	sh->stop = 1;
	waitpid(pid, NULL, 0);

	for (k = FIRST; k <= FURTHER; k++)
		open_us[k] = ns[k] / 1e3 / (opens[k] ? opens[k] : 1);
	printf("# VMM with %d extra VMAs: %lu first opens in %.1f s, %lu further opens in %.1f s\n",
	       nr_vmas, opens[FIRST], ns[FIRST] / 1e9, opens[FURTHER],
	       ns[FURTHER] / 1e9);
	printf("open_close_us_first_%dvmas=%.1f\n", nr_vmas, open_us[FIRST]);
	printf("open_close_us_further_%dvmas=%.1f\n", nr_vmas,
	       open_us[FURTHER]);
	printf("open_close_ratio_first_vs_further_%dvmas=%.2f\n", nr_vmas,
	       open_us[FIRST] / open_us[FURTHER]);
	for (k = 0; k < NR_KINDS; k++) {
		uint32_t n = sh->nr[k];

		if (!n) {
			printf("# no faults timed in %s windows\n",
			       kind_name[k]);
			continue;
		}
		qsort(sh->ns[k], n, sizeof(uint32_t), cmp_u32);
		printf("vmm_fault_us_%s_%dvmas: n=%u median=%.1f p99=%.1f max=%.1f\n",
		       kind_name[k], nr_vmas, n, sh->ns[k][n / 2] / 1e3,
		       sh->ns[k][n - 1 - n / 100] / 1e3,
		       sh->ns[k][n - 1] / 1e3);
	}
	fflush(stdout);
}

/* ---- giving back ---- */

static long live_vms(void)
{
	char buf[32] = "";
	int fd = open(LIVE_VMS, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		die(LIVE_VMS ": %s", strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

struct cycle {
	volatile int ready, close, closed;
	volatile uint64_t closed_ns; /* when the VMM's last close returned */
	int vm_fd[1000];
};

static void raise_nofile(void)
{
	struct rlimit rl = { 8192, 8192 };

	if (setrlimit(RLIMIT_NOFILE, &rl))
		die("RLIMIT_NOFILE: %s", strerror(errno));
}

/* A VMM of @n VMs with a vCPU each, that lives on after closing them. */
static void cycle_vmm(struct cycle *c, int n)
{
	int kvm, vcpu[1000], i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	raise_nofile();
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		c->vm_fd[i] = ioctl(kvm, KVM_CREATE_VM, 0);
		vcpu[i] = c->vm_fd[i] < 0 ?
				  -1 :
				  ioctl(c->vm_fd[i], KVM_CREATE_VCPU, 0);
		if (vcpu[i] < 0)
			die("VM %d: %s", i, strerror(errno));
	}
	c->ready = 1;
	while (!c->close)
		usleep(1000);
	for (i = 0; i < n; i++) {
		close(vcpu[i]);
		close(c->vm_fd[i]);
	}
	c->closed_ns = now_ns();
	c->closed = 1;
	/* Lives on, back in user space every millisecond. */
	for (;;)
		usleep(1000);
}

/*
 * @n VMs of a living VMM, each with one of our stats files (@with_files),
 * closed by the VMM: how long until kvmstats has given every one back
 * (live_vms back to its base), and how long the VMM's closes took.
 */
static void cycle(int dev, int n, bool with_files)
{
	static int fds[1000];
	struct cycle *c;
	long base = live_vms(), v;
	uint64_t t0, gone = 0;
	pid_t pid;
	int i;

	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(c, 0, sizeof(*c));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid)
		cycle_vmm(c, n);
	while (!c->ready)
		usleep(1000);
	for (i = 0; with_files && i < n; i++) {
		struct kvmstats_fd_request req = {
			.pid = pid,
			.fd = c->vm_fd[i],
			.vcpu = -1,
		};

		fds[i] = ioctl(dev, KVMSTATS_GET_STATS_FD, &req);
		if (fds[i] < 0)
			die("KVMSTATS_GET_STATS_FD %d: %s", i, strerror(errno));
	}
	t0 = now_ns();
	c->close = 1;
	while (!c->closed)
		usleep(100);
	if (with_files) {
		while ((v = live_vms()) != base) {
			if (now_ns() - c->closed_ns > 60000000000ULL)
				die("%d VMs still held after 60 s (live_vms %ld)",
				    n, v);
			usleep(1000);
		}
		gone = now_ns();
	}
	if (with_files) {
		printf("giveback_%d_s=%.3f\n", n, (gone - c->closed_ns) / 1e9);
		printf("giveback_%d_vms_per_s=%.0f\n", n,
		       n / ((gone - c->closed_ns) / 1e9));
		printf("giveback_%d_vmm_close_s=%.3f\n", n,
		       (c->closed_ns - t0) / 1e9);
		for (i = 0; i < n; i++)
			close(fds[i]);
	} else {
		printf("native_%d_vmm_close_s=%.3f\n", n,
		       (c->closed_ns - t0) / 1e9);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	munmap(c, sizeof(*c));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int dev, i;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	dev = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	if (dev < 0)
		die(KVMSTATS_DEVICE ": %s", strerror(errno));
	setvbuf(stdout, NULL, _IOLBF, 0);
	raise_nofile();
	for (i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "giveback=", 9)) {
			int n = atoi(argv[i] + 9);

			printf("# %d VMs of a living VMM, each with a stats file of ours, closed by the VMM\n",
			       n);
			cycle(dev, n, false);
			cycle(dev, n, true);
		} else {
			level(dev, atoi(argv[i]));
		}
	}
	return 0;
}
