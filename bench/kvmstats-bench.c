// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats-bench: what reading KVM statistics through /dev/kvmstats costs,
 * measured side by side with the alternatives, in one run (issues 5, 12).
 *
 *   1. per read: pread of a stats fd from /dev/kvmstats against pread of the
 *      native KVM_GET_STATS_FD fd of the same VM or vCPU (a child process
 *      is the VMM, so it can have both), interleaved rounds;
 *   2. at 0, 1, 4, 16, 64 and 250 VMs x 4 vCPUs, the VMs made by MAX_VMS
 *      forked child VMMs that all exist from the start (a VM each, made
 *      when its level comes), so the number of processes stays fixed:
 *        - KVMSTATS_LIST_VMS (against the number of VMs);
 *        - host sweep: kvmstats one pread per fd, kvmstats
 *          KVMSTATS_READ_BATCH, debugfs the way kvm_stat reads it, and the
 *          native fds three ways: all read by this process (the same
 *          files and buffers as ours), each VMM reading its own in turn,
 *          and each VMM re-reading its own warm (the lower bound);
 *        - tool cost, when /usr/bin/kvmstats exists: CPU time of
 *          `kvmstats export --listen` per scrape and of `kvmstats top
 *          --batch` per refresh, and the exporter's resident set;
 *   3. KVMSTATS_LIST_VMS with the 250 VMs among 100, 1000 and 5000 idle
 *      processes holding IDLE_FDS open fds each (against processes);
 *   4. one VMM process holding 1 to 250 VMs: KVMSTATS_LIST_PIDFD of it and
 *      KVMSTATS_LIST_VMS (against VMs in one process).
 *
 * Output: '# ' diagnostics, a table, and name=value lines.  Benchmarks print
 * figures and never judge them: the exit status only says whether the
 * program could run.  Every absolute time is whatever the machine it ran on
 * gives; under QEMU TCG they are emulated times and only ratios carry over.
 *
 * Usage: kvmstats-bench [-q] [-l] [-s] [-n] [-t TOOL]
 *   -q        quick: fewer rounds and sizes (for trying the program out)
 *   -l        LIST_VMS only (to compare module builds)
 *   -s        host sweeps and their growth only (to compare module builds)
 *   -n        no ftrace of LIST_VMS
 *   -t TOOL   the kvmstats tool (default /usr/bin/kvmstats)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <linux/kvm.h>

#include "../include/uapi/linux/kvmstats.h"

#define NR_VCPUS    4 /* per VM in the sweep */
#define MAX_VMS	    250
#define FDS_PER_VM  (1 + NR_VCPUS)
#define MAX_FILES   (MAX_VMS * FDS_PER_VM)
#define STATS_MAX   65536 /* larger than any stats file */
#define IDLE_FDS    32	  /* open fds of each idle process */
#define MAX_DEBUGFS 256	  /* stat files per debugfs VM dir */
#define DEBUGFS_KVM "/sys/kernel/debug/kvm"

static bool quick;
static bool list_only;
static bool sweep_only;
static bool do_trace = true;
static const char *tool_path = "/usr/bin/kvmstats";
static int devfd; /* /dev/kvmstats */
static pid_t main_pid;
static int kvmfd; /* /dev/kvm */

static void settle(void);

/* ------------------------------------------------------------------ */
/* small helpers */

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("# kvmstats-bench: fatal: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	kill(0, SIGKILL);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of @n values (sorts a copy). */
static double median(const double *v, int n)
{
	double s[n];

	memcpy(s, v, sizeof(s));
	qsort(s, n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Minimum and maximum, for the spread shown next to a median. */
static void range(const double *v, int n, double *lo, double *hi)
{
	int i;

	*lo = *hi = v[0];
	for (i = 1; i < n; i++) {
		if (v[i] < *lo)
			*lo = v[i];
		if (v[i] > *hi)
			*hi = v[i];
	}
}

static void xwrite(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die("write to a pipe: %s", strerror(errno));
}

static void xread(int fd, void *buf, size_t len)
{
	ssize_t r = read(fd, buf, len);

	/* A helper whose parent has gone just leaves. */
	if (!r && getpid() != main_pid)
		_exit(0);
	if (r != (ssize_t)len)
		die("read from a pipe: %zd (%s)", r,
		    r < 0 ? strerror(errno) : "short");
}

/* ------------------------------------------------------------------ */
/* stats files */

struct sfile {
	int fd;
	uint32_t data_offset;
	uint32_t data_size;
	uint32_t file_size;
};

static uint8_t scratch[STATS_MAX];

static void sfile_init(struct sfile *f, int fd, const char *what)
{
	struct kvm_stats_header h;
	ssize_t r;

	f->fd = fd;
	if (pread(fd, &h, sizeof(h), 0) != sizeof(h))
		die("%s: cannot read the header: %s", what, strerror(errno));
	r = pread(fd, scratch, sizeof(scratch), 0);
	if (r <= (ssize_t)h.data_offset)
		die("%s: file of %zd bytes, data at %u", what, r,
		    h.data_offset);
	f->data_offset = h.data_offset;
	f->file_size = r;
	f->data_size = r - h.data_offset;
}

static int ours_stats_fd(pid_t pid, int fd, int vcpu)
{
	struct kvmstats_fd_request req = { .pid = pid, .fd = fd, .vcpu = vcpu };
	int r = ioctl(devfd, KVMSTATS_GET_STATS_FD, &req);

	if (r < 0)
		die("KVMSTATS_GET_STATS_FD(%d, %d, %d): %s", pid, fd, vcpu,
		    strerror(errno));
	return r;
}

/* ------------------------------------------------------------------ */
/* a VM with NR_VCPUS vCPUs, made by this process */

struct vmm {
	int vm;
	int vcpu[NR_VCPUS];
	struct sfile native[FDS_PER_VM]; /* [0]: VM, [1 + i]: vCPU i */
};

static void vmm_create(struct vmm *m, int nr_vcpus)
{
	int i, fd;

	m->vm = ioctl(kvmfd, KVM_CREATE_VM, 0);
	if (m->vm < 0)
		die("KVM_CREATE_VM: %s", strerror(errno));
	for (i = 0; i < nr_vcpus; i++) {
		m->vcpu[i] = ioctl(m->vm, KVM_CREATE_VCPU, i);
		if (m->vcpu[i] < 0)
			die("KVM_CREATE_VCPU %d: %s", i, strerror(errno));
	}
	fd = ioctl(m->vm, KVM_GET_STATS_FD, 0);
	if (fd < 0)
		die("KVM_GET_STATS_FD (VM): %s", strerror(errno));
	sfile_init(&m->native[0], fd, "native VM fd");
	for (i = 0; i < nr_vcpus; i++) {
		fd = ioctl(m->vcpu[i], KVM_GET_STATS_FD, 0);
		if (fd < 0)
			die("KVM_GET_STATS_FD (vCPU): %s", strerror(errno));
		sfile_init(&m->native[1 + i], fd, "native vCPU fd");
	}
}

#define DATA_BUF 2048 /* room for any data block */

/*
 * One pread of every data block, each into its own buffer (an agent keeps
 * the last values of every file to compute rates): a sweep.
 */
static void read_data_blocks(const struct sfile *f, int n,
			     uint8_t (*buf)[DATA_BUF])
{
	int i;

	for (i = 0; i < n; i++)
		if (pread(f[i].fd, buf[i], f[i].data_size, f[i].data_offset) !=
		    (ssize_t)f[i].data_size)
			die("pread of a data block: %s", strerror(errno));
}

/* ------------------------------------------------------------------ */
/* 1. per read */

enum { R_DATA, R_FULL };

static double per_read_ns(const struct sfile *f, int kind, long n)
{
	size_t len = kind == R_DATA ? f->data_size : f->file_size;
	off_t off = kind == R_DATA ? f->data_offset : 0;
	uint64_t t0;
	long i;

	t0 = now_ns();
	for (i = 0; i < n; i++)
		if (pread(f->fd, scratch, len, off) != (ssize_t)len)
			die("pread: %s", strerror(errno));
	return (double)(now_ns() - t0) / n;
}

struct pair_result {
	double ours, native, ratio, lo, hi;
};

/*
 * Rounds of reads through @a and @b.  A round is BLOCKS blocks of @n reads,
 * interleaved ABBA ABBA ...; each side's time per read in the round is the
 * median of its blocks, so a block the host's scheduler interrupted (the
 * machine is shared, and a preempted TCG vCPU keeps its guest clock
 * running) does not move it.  Results: medians over rounds of those times
 * and of the per-round ratios a/b.
 */
#define BLOCKS 16

#define PAIR_ROUNDS (quick ? 11 : 41)

/* @n operations of side @side (0: A, 1: B) of a pair; ns per operation. */
typedef double (*pair_block_fn)(const void *ctx, int side, long n);

/* The rounds above, of blocks of @n operations each. */
static struct pair_result abba_pair(pair_block_fn block, const void *ctx,
				    long n)
{
	int rounds = PAIR_ROUNDS, r, j;
	double ta[rounds], tb[rounds], ratio[rounds];
	double ba[BLOCKS / 2], bb[BLOCKS / 2];
	struct pair_result res;

	for (r = 0; r < rounds; r++) {
		for (j = 0; j < BLOCKS; j++) {
			if (j % 4 == 0 || j % 4 == 3)
				ba[j / 2] = block(ctx, 0, n);
			else
				bb[j / 2] = block(ctx, 1, n);
		}
		ta[r] = median(ba, BLOCKS / 2);
		tb[r] = median(bb, BLOCKS / 2);
		ratio[r] = ta[r] / tb[r];
	}
	res.ours = median(ta, rounds);
	res.native = median(tb, rounds);
	res.ratio = median(ratio, rounds);
	range(ratio, rounds, &res.lo, &res.hi);
	return res;
}

struct pread_pair_ctx {
	const struct sfile *f[2];
	int kind;
};

static double pread_block(const void *ctx, int side, long n)
{
	const struct pread_pair_ctx *c = ctx;

	return per_read_ns(c->f[side], c->kind, n);
}

static struct pair_result pread_pair(const struct sfile *a,
				     const struct sfile *b, int kind)
{
	struct pread_pair_ctx c = { { a, b }, kind };
	struct pair_result res;
	long n;

	/* Calibrate: blocks of about 0.25 ms, short next to a time slice. */
	per_read_ns(a, kind, 100);
	n = 0.25e6 / per_read_ns(a, kind, 1000);
	if (n < 8)
		n = 8;

	res = abba_pair(pread_block, &c, n);
	printf("# per read: %d rounds of %d ABBA-interleaved blocks of %ld reads\n",
	       PAIR_ROUNDS, BLOCKS, n);
	return res;
}

static struct pair_result p_vcpu, p_vm, p_full, p_control;

/* In a child process of its own: see bench_pread(). */
static void bench_pread_child(struct pair_result *res)
{
	struct sfile ours_vm, ours_vcpu;
	struct vmm m;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	vmm_create(&m, 1);
	sfile_init(&ours_vm, ours_stats_fd(0, m.vm, -1), "our VM fd");
	sfile_init(&ours_vcpu, ours_stats_fd(0, m.vm, 0), "our vCPU fd");
	if (ours_vm.file_size != m.native[0].file_size ||
	    ours_vcpu.file_size != m.native[1].file_size)
		die("file sizes differ from the native fds");
	printf("# VM stats file %u bytes (data %u at %u), vCPU %u bytes (data %u at %u)\n",
	       ours_vm.file_size, ours_vm.data_size, ours_vm.data_offset,
	       ours_vcpu.file_size, ours_vcpu.data_size, ours_vcpu.data_offset);

	p_vcpu = pread_pair(&ours_vcpu, &m.native[1], R_DATA);
	p_vm = pread_pair(&ours_vm, &m.native[0], R_DATA);
	p_full = pread_pair(&ours_vcpu, &m.native[1], R_FULL);
	/* Control: the native fd against itself shows the noise floor. */
	p_control = pread_pair(&m.native[1], &m.native[1], R_DATA);

	printf("pread_ns_ours_vcpu_data_tcg=%.0f\n", p_vcpu.ours);
	printf("pread_ns_native_vcpu_data_tcg=%.0f\n", p_vcpu.native);
	printf("pread_ratio_vs_native=%.3f\n", p_vcpu.ratio);
	printf("pread_ns_ours_vm_data_tcg=%.0f\n", p_vm.ours);
	printf("pread_ns_native_vm_data_tcg=%.0f\n", p_vm.native);
	printf("pread_ratio_vs_native_vm=%.3f\n", p_vm.ratio);
	printf("pread_ns_ours_vcpu_full_tcg=%.0f\n", p_full.ours);
	printf("pread_ns_native_vcpu_full_tcg=%.0f\n", p_full.native);
	printf("pread_ratio_vs_native_full=%.3f\n", p_full.ratio);
	printf("pread_ratio_native_vs_itself=%.3f\n", p_control.ratio);
	fflush(stdout);
	res[0] = p_vcpu;
	res[1] = p_vm;
	res[2] = p_full;
	res[3] = p_control;
	_exit(0);
}

/*
 * The VMM has both fds, so it is the one that reads: a child process,
 * because a process that made a VM keeps the MMU notifier KVM put on its
 * address space, and LIST_VMS walks the fds of every such process -- this
 * one will hold 1250 stats fds, which no monitoring agent's walk would see.
 */
static void bench_pread(void)
{
	struct pair_result *res;
	int status;
	pid_t pid;

	res = mmap(NULL, 4 * sizeof(*res), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid)
		bench_pread_child(res);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		die("the per-read benchmark failed");
	p_vcpu = res[0];
	p_vm = res[1];
	p_full = res[2];
	p_control = res[3];
	munmap(res, 4 * sizeof(*res));
}

/* ------------------------------------------------------------------ */
/* child VMMs */

enum { CMD_SWEEP = 1, CMD_SWEEP_ONCE, CMD_CREATE, CMD_EXIT };

struct child_cmd {
	int op;
	int n;
};

struct child_hello {
	pid_t pid;
	int vm_fd;
	int native_fd[FDS_PER_VM]; /* its native stats fds, VM first */
};

struct child {
	pid_t pid;
	int vm_fd;    /* in the child */
	int to, from; /* command and reply pipes */
	int nr_debugfs;
	char **debugfs; /* its stat files, as kvm_stat lists them */
};

static struct child kids[MAX_VMS];
static int nr_kids; /* children started */
static int nr_vms;  /* children 0 .. nr_vms - 1 have their VM */

/*
 * A child VMM: it exists from the start, makes its VM (NR_VCPUS vCPUs)
 * when told to, and then times sweeps of its own native fds on request.
 */
static void child_main(int in, int out)
{
	static uint8_t buf[FDS_PER_VM][DATA_BUF] __attribute__((aligned(4096)));
	struct child_hello hello;
	struct child_cmd cmd;
	struct vmm m;
	uint64_t t0, ns;
	int i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	xread(in, &cmd, sizeof(cmd));
	if (cmd.op != CMD_CREATE)
		_exit(0);
	kvmfd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvmfd < 0)
		die("/dev/kvm: %s", strerror(errno));
	vmm_create(&m, NR_VCPUS);
	hello.pid = getpid();
	hello.vm_fd = m.vm;
	for (i = 0; i < FDS_PER_VM; i++)
		hello.native_fd[i] = m.native[i].fd;
	xwrite(out, &hello, sizeof(hello));
	for (;;) {
		xread(in, &cmd, sizeof(cmd));
		if (cmd.op == CMD_SWEEP_ONCE) {
			/* One sweep, as it comes: its turn in a host sweep. */
			t0 = now_ns();
			read_data_blocks(m.native, FDS_PER_VM, buf);
			ns = now_ns() - t0;
			xwrite(out, &ns, sizeof(ns));
			continue;
		}
		if (cmd.op != CMD_SWEEP)
			_exit(0);
		/*
		 * The lower bound: the owner reads its own native fds, warm
		 * (one untimed sweep first: this process was asleep).
		 */
		read_data_blocks(m.native, FDS_PER_VM, buf);
		{
			double t[cmd.n];

			for (i = 0; i < cmd.n; i++) {
				t0 = now_ns();
				read_data_blocks(m.native, FDS_PER_VM, buf);
				t[i] = now_ns() - t0;
			}
			ns = median(t, cmd.n);
		}
		xwrite(out, &ns, sizeof(ns));
	}
}

static int zygote_to, zygote_from;

/* A child VMM, without its VM yet. */
static void start_child(struct child *c)
{
	int p1[2], p2[2], in, out;

	if (pipe(p1) || pipe(p2))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	c->pid = fork();
	if (c->pid < 0)
		die("fork: %s", strerror(errno));
	if (!c->pid) {
		/*
		 * Only its own pipes: not the other VMMs', the zygote's,
		 * /dev/kvmstats nor any stats fd (it reopens /dev/kvm).
		 */
		in = fcntl(p1[0], F_DUPFD, 3000);
		out = fcntl(p2[1], F_DUPFD, 3001);
		if (in < 0 || out < 0)
			die("F_DUPFD: %s", strerror(errno));
		syscall(SYS_close_range, 3, 2999, 0);
		syscall(SYS_close_range, out + 1, ~0u, 0);
		child_main(in, out);
	}
	close(p1[0]);
	close(p2[1]);
	c->to = p1[1];
	c->from = p2[0];
	c->vm_fd = -1;
}

/* Children nr_vms .. @k - 1 make their VMs, side by side. */
/*
 * Every child's native stats fds, copied into this process (pidfd_getfd):
 * a KVM stats fd reads the same in any process, so this process can sweep
 * the VMs' native files exactly as it sweeps ours, the same files through
 * the same buffers, with no VMM to wake (M_NATIVE_ONE).
 */
static struct sfile natives[MAX_FILES];

static void take_natives(int k, const struct child_hello *hello)
{
	int pidfd, i, fd;

	pidfd = syscall(SYS_pidfd_open, hello->pid, 0);
	if (pidfd < 0)
		die("pidfd_open: %s", strerror(errno));
	for (i = 0; i < FDS_PER_VM; i++) {
		fd = syscall(SYS_pidfd_getfd, pidfd, hello->native_fd[i], 0);
		if (fd < 0)
			die("pidfd_getfd: %s", strerror(errno));
		sfile_init(&natives[k * FDS_PER_VM + i], fd,
			   "a VMM's native stats fd");
	}
	close(pidfd);
}

static void make_vms(int k)
{
	struct child_cmd cmd = { CMD_CREATE, 0 };
	struct child_hello hello;
	uint64_t t0 = now_ns();
	int i;

	if (k <= nr_vms)
		return;
	for (i = nr_vms; i < k; i++)
		xwrite(kids[i].to, &cmd, sizeof(cmd));
	for (i = nr_vms; i < k; i++) {
		xread(kids[i].from, &hello, sizeof(hello));
		kids[i].vm_fd = hello.vm_fd;
		take_natives(i, &hello);
	}
	printf("# %d more child VMMs made their VMs with %d vCPUs each in %.1f s\n",
	       k - nr_vms, NR_VCPUS, (now_ns() - t0) / 1e9);
}

/*
 * Native sweep of the first @k VMs: each child times @n sweeps of its own
 * fds and reports the median; the sum is the time per host sweep.
 */
static uint64_t native_sweep_ns(int k, int n)
{
	struct child_cmd cmd = { CMD_SWEEP, n };
	uint64_t ns, sum = 0;
	int i;

	for (i = 0; i < k; i++) {
		xwrite(kids[i].to, &cmd, sizeof(cmd));
		xread(kids[i].from, &ns, sizeof(ns));
		sum += ns;
	}
	return sum;
}

/*
 * Native sweep of the first @k VMs taken in turn: each child times one
 * sweep of its own fds, the next child then its own, and so on; @n such
 * host sweeps, and their median.  Between two reads of a file all the
 * other VMs' files are read, as in a READ_BATCH sweep of the same VMs, so
 * the memory each sweep touches is the same; the wakeup of each VMM is
 * not timed (it is a real sweep's cost, but not a read's).
 */
static uint64_t native_rr_sweep_ns(int k, int n)
{
	struct child_cmd cmd = { CMD_SWEEP_ONCE, 1 };
	double t[n];
	uint64_t ns, sum;
	int i, j;

	for (j = 0; j < n; j++) {
		sum = 0;
		for (i = 0; i < k; i++) {
			xwrite(kids[i].to, &cmd, sizeof(cmd));
			xread(kids[i].from, &ns, sizeof(ns));
			sum += ns;
		}
		t[j] = sum;
	}
	return median(t, n);
}

/* The regular files of <debugfs>/kvm/<pid>-<fd>/, as kvm_stat finds them. */
static void list_debugfs(struct child *c)
{
	char dir[128], path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d;

	snprintf(dir, sizeof(dir), DEBUGFS_KVM "/%d-%d", c->pid, c->vm_fd);
	d = opendir(dir);
	c->debugfs = calloc(MAX_DEBUGFS, sizeof(char *));
	c->nr_debugfs = 0;
	if (!d)
		return;
	while ((de = readdir(d)) && c->nr_debugfs < MAX_DEBUGFS) {
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (de->d_name[0] == '.' || stat(path, &st) ||
		    !S_ISREG(st.st_mode))
			continue;
		c->debugfs[c->nr_debugfs++] = strdup(path);
	}
	closedir(d);
}

/* ------------------------------------------------------------------ */
/* 2. host sweep */

static struct sfile ours[MAX_FILES]; /* VM then its vCPUs, VM by VM */
static struct kvmstats_read_op ops[MAX_FILES];
static uint8_t batch_buf[MAX_FILES][DATA_BUF] __attribute__((aligned(4096)));

/* Our stats fds of the VMs of children @from .. @to - 1. */
static void open_ours(int from, int to)
{
	struct kvmstats_vm_list *list;
	unsigned int i, j, nr = from * FDS_PER_VM;
	int k;

	list = calloc(1, sizeof(*list) + 1024 * sizeof(list->vms[0]));
	list->nr = 1024;
	if (ioctl(devfd, KVMSTATS_LIST_VMS, list))
		die("KVMSTATS_LIST_VMS: %s", strerror(errno));
	/* Found as an agent finds them: by listing; then in child order. */
	for (k = from; k < to; k++) {
		for (i = 0; i < list->nr; i++)
			if (list->vms[i].pid == kids[k].pid &&
			    list->vms[i].fd == kids[k].vm_fd)
				break;
		if (i == list->nr || list->vms[i].nr_vcpus != NR_VCPUS)
			die("LIST_VMS does not show VM %d-%d with %d vCPUs",
			    kids[k].pid, kids[k].vm_fd, NR_VCPUS);
		for (j = 0; j < FDS_PER_VM; j++, nr++) {
			sfile_init(&ours[nr],
				   ours_stats_fd(kids[k].pid, kids[k].vm_fd,
						 (int)j - 1),
				   "our stats fd");
			if (ours[nr].data_size > sizeof(batch_buf[0]))
				die("data block of %u bytes",
				    ours[nr].data_size);
			ops[nr].fd = ours[nr].fd;
			ops[nr].offset = ours[nr].data_offset;
			ops[nr].buf = (uintptr_t)batch_buf[nr];
			ops[nr].len = ours[nr].data_size;
		}
	}
	free(list);
}

/* The same buffers for single and batched reads. */
static void sweep_single(int k)
{
	read_data_blocks(ours, k * FDS_PER_VM, batch_buf);
}

static void batch_run(struct kvmstats_read_op *o, int nr)
{
	struct kvmstats_read_batch b = {
		.nr = nr,
		.ops = (uintptr_t)o,
	};

	if (ioctl(devfd, KVMSTATS_READ_BATCH, &b))
		die("KVMSTATS_READ_BATCH: %s", strerror(errno));
}

static void sweep_batched(int k)
{
	batch_run(ops, k * FDS_PER_VM);
}

/*
 * Three controls for the growth of a sweep's cost (bench_growth): the
 * same number of ops, with less memory touched.  ops_files: every file,
 * but into the FDS_PER_VM buffers of the first VM; ops_word: the same,
 * reading only the first 8 bytes of each data block (the file objects,
 * not the statistics); ops_same: the first VM's files over and over, into
 * those same buffers (the code path alone).
 */
static struct kvmstats_read_op ops_files[MAX_FILES], ops_word[MAX_FILES];
static struct kvmstats_read_op ops_same[MAX_FILES];

static void make_controls(void)
{
	int i;

	for (i = 0; i < MAX_FILES; i++) {
		ops_files[i] = ops[i];
		ops_files[i].buf = ops[i % FDS_PER_VM].buf;
		ops_word[i] = ops_files[i];
		ops_word[i].len = 8;
		ops_same[i] = ops[i % FDS_PER_VM];
	}
}

static void check_batched(int k)
{
	int i;

	sweep_batched(k);
	for (i = 0; i < k * FDS_PER_VM; i++)
		if (ops[i].result != (int)ops[i].len)
			die("READ_BATCH op %d: result %d, wanted %u", i,
			    ops[i].result, ops[i].len);
}

/* kvm_stat's way: open, read to EOF, close, for every stat file. */
static void sweep_debugfs(int k)
{
	char buf[256];
	int i, j, fd;

	for (i = 0; i < k; i++) {
		for (j = 0; j < kids[i].nr_debugfs; j++) {
			fd = open(kids[i].debugfs[j], O_RDONLY);
			if (fd < 0)
				die("open %s: %s", kids[i].debugfs[j],
				    strerror(errno));
			while (read(fd, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
	}
}

enum {
	M_DEBUGFS,
	M_SINGLE,
	M_BATCHED,
	M_NATIVE,
	M_NATIVE_RR,
	M_NATIVE_ONE,
	NR_METHODS
};
static const char *const method_name[NR_METHODS] = {
	"debugfs", "single", "batched", "native", "native_rr", "native_one",
};

static const int sweep_sizes[] = { 1, 4, 16, 64, 250 };
#define NR_SIZES ((int)(sizeof(sweep_sizes) / sizeof(sweep_sizes[0])))

struct sweep_result {
	int k;
	bool debugfs;
	double ns[NR_METHODS];			/* median per sweep */
	double speedup_single, speedup_batched; /* debugfs / ours */
	double ratio_single, ratio_batched;	/* ours / native */
	double ratio_batched_rr;		/* ours / native in turn */
	double ratio_batched_one;      /* ours / native in one process */
	double pair, pair_control;     /* the same, ABBA pairs */
	double pair_ours, pair_native; /* their medians, ns */
	double sp_lo, sp_hi;
};

static struct sweep_result sweeps[NR_SIZES];
static int nr_sweeps;

/*
 * Time per sweep of method @m over the first @k VMs: @n sweeps, each timed
 * on its own, and their median (a sweep the host's scheduler interrupted
 * does not move it).  The native sweeps are timed by the children, @n at a
 * time, and summed.
 */
static double time_method(int m, int k, int n)
{
	double t[n];
	uint64_t t0;
	int i;

	if (m == M_NATIVE)
		return native_sweep_ns(k, n);
	if (m == M_NATIVE_RR)
		return native_rr_sweep_ns(k, n);
	for (i = 0; i < n; i++) {
		t0 = now_ns();
		switch (m) {
		case M_DEBUGFS:
			sweep_debugfs(k);
			break;
		case M_SINGLE:
			sweep_single(k);
			break;
		case M_BATCHED:
			sweep_batched(k);
			break;
		case M_NATIVE_ONE:
			read_data_blocks(natives, k * FDS_PER_VM, batch_buf);
			break;
		}
		t[i] = now_ns() - t0;
	}
	return median(t, n);
}

/* @n sweeps of method @m (M_BATCHED or M_NATIVE_ONE) of @k VMs, ns each. */
static double sweep_block(int m, int k, long n)
{
	uint64_t t0 = now_ns();
	long i;

	for (i = 0; i < n; i++) {
		if (m == M_BATCHED)
			sweep_batched(k);
		else
			read_data_blocks(natives, k * FDS_PER_VM, batch_buf);
	}
	return (double)(now_ns() - t0) / n;
}

struct sweep_pair_ctx {
	int m[2];
	int k;
};

static double sweep_pair_block(const void *ctx, int side, long n)
{
	const struct sweep_pair_ctx *c = ctx;

	return sweep_block(c->m[side], c->k, n);
}

/*
 * The issue-17 criterion, measured as a pair: READ_BATCH against the same
 * VMs' native fds read by this process, in rounds of BLOCKS blocks
 * interleaved ABBA ABBA ... (as per read), so that each of the two runs
 * right after the other over the same statistics and the same buffers,
 * and a moment of the shared host weighs on both.  @a and @b name the
 * methods: the control pairs native with itself.
 */
static struct pair_result sweep_pair(int a, int b, int k)
{
	struct sweep_pair_ctx c = { { a, b }, k };
	int n;

	/* Blocks of about 1 ms, at least one sweep. */
	sweep_block(a, k, 1);
	n = 1e6 / sweep_block(a, k, 1);
	if (n < 1)
		n = 1;
	return abba_pair(sweep_pair_block, &c, n);
}

static void bench_sweep_pair(struct sweep_result *res, int k)
{
	struct pair_result p = sweep_pair(M_BATCHED, M_NATIVE_ONE, k);
	struct pair_result c = sweep_pair(M_NATIVE_ONE, M_NATIVE_ONE, k);

	res->pair = p.ratio;
	res->pair_control = c.ratio;
	res->pair_ours = p.ours;
	res->pair_native = p.native;
	printf("sweep_pair_us_batched_%dx%d_tcg=%.1f\n", k, NR_VCPUS,
	       p.ours / 1000);
	printf("sweep_pair_us_native_one_%dx%d_tcg=%.1f\n", k, NR_VCPUS,
	       p.native / 1000);
	printf("sweep_pair_ratio_batched_vs_native_one_%dx%d=%.3f\n", k,
	       NR_VCPUS, p.ratio);
	printf("sweep_pair_ratio_control_%dx%d=%.3f\n", k, NR_VCPUS, c.ratio);
	printf("# sweep pair %dx%d: %d rounds, ratio range %.3f..%.3f, control %.3f..%.3f\n",
	       k, NR_VCPUS, PAIR_ROUNDS, p.lo, p.hi, c.lo, c.hi);
}

static void bench_sweep_size(struct sweep_result *res, int k)
{
	/* A debugfs sweep of 250 VMs takes about a second under TCG. */
	int rounds = quick ? 7 : k >= 250 ? 21 : 31, r, m, i;
	double t[NR_METHODS][rounds], sps[rounds], spb[rounds];
	double rs[rounds], rb[rounds], rr[rounds], ro[rounds];
	int n[NR_METHODS];
	double once;

	res->k = k;
	res->debugfs = true;
	for (i = 0; i < k; i++)
		if (!kids[i].nr_debugfs)
			res->debugfs = false;
	check_batched(k);

	/*
	 * About 3 ms per measurement (short windows are seldom hit by the
	 * host's scheduler; the median drops those that are), at least one
	 * sweep.
	 */
	for (m = 0; m < NR_METHODS; m++) {
		if (m == M_DEBUGFS && !res->debugfs) {
			n[m] = 0;
			continue;
		}
		time_method(m, k, 1);
		once = time_method(m, k, 1);
		n[m] = 3e6 / once;
		/*
		 * At least 5 sweeps of ours and native's, so that the median
		 * drops the first sweep after another method's (debugfs's
		 * opens and closes leave the emulated TLB and the caches
		 * cold; the 3 ms budget allows one sweep from 64 VMs up).
		 */
		if (n[m] < (m == M_DEBUGFS ? 1 : 5))
			n[m] = m == M_DEBUGFS ? 1 : 5;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < NR_METHODS; i++) {
			/* Rotate the order from round to round. */
			m = (i + r) % NR_METHODS;
			t[m][r] = n[m] ? time_method(m, k, n[m]) : 0;
		}
		sps[r] = t[M_DEBUGFS][r] / t[M_SINGLE][r];
		spb[r] = t[M_DEBUGFS][r] / t[M_BATCHED][r];
		rs[r] = t[M_SINGLE][r] / t[M_NATIVE][r];
		rb[r] = t[M_BATCHED][r] / t[M_NATIVE][r];
		rr[r] = t[M_BATCHED][r] / t[M_NATIVE_RR][r];
		ro[r] = t[M_BATCHED][r] / t[M_NATIVE_ONE][r];
	}
	for (m = 0; m < NR_METHODS; m++)
		res->ns[m] = median(t[m], rounds);
	res->speedup_single = median(sps, rounds);
	res->speedup_batched = median(spb, rounds);
	res->ratio_single = median(rs, rounds);
	res->ratio_batched = median(rb, rounds);
	res->ratio_batched_rr = median(rr, rounds);
	res->ratio_batched_one = median(ro, rounds);
	range(sps, rounds, &res->sp_lo, &res->sp_hi);

	printf("# sweep %dx%d: %d rounds; sweeps per measurement: debugfs %d, single %d, batched %d, native %d; %d debugfs files per VM\n",
	       k, NR_VCPUS, rounds, n[M_DEBUGFS], n[M_SINGLE], n[M_BATCHED],
	       n[M_NATIVE], kids[0].nr_debugfs);
	for (m = 0; m < NR_METHODS; m++)
		if (m != M_DEBUGFS || res->debugfs)
			printf("sweep_us_%s_%dx%d_tcg=%.1f\n", method_name[m],
			       k, NR_VCPUS, res->ns[m] / 1000);
	if (res->debugfs) {
		printf("sweep_speedup_vs_debugfs_%dx%d_single=%.1f\n", k,
		       NR_VCPUS, res->speedup_single);
		printf("sweep_speedup_vs_debugfs_%dx%d_batched=%.1f\n", k,
		       NR_VCPUS, res->speedup_batched);
	} else {
		printf("# no debugfs VM directories: no speedup vs debugfs\n");
	}
	printf("sweep_ratio_vs_native_%dx%d=%.3f\n", k, NR_VCPUS,
	       res->ratio_single);
	printf("sweep_ratio_vs_native_%dx%d_batched=%.3f\n", k, NR_VCPUS,
	       res->ratio_batched);
	printf("sweep_ratio_vs_native_rr_%dx%d_batched=%.3f\n", k, NR_VCPUS,
	       res->ratio_batched_rr);
	printf("sweep_ratio_vs_native_one_%dx%d_batched=%.3f\n", k, NR_VCPUS,
	       res->ratio_batched_one);
	bench_sweep_pair(res, k);
	fflush(stdout);
}

/* Children nr_vms .. @k - 1 make their VMs; we find and open them. */
static void grow_vms(int k)
{
	int i;

	if (k <= nr_vms)
		return;
	make_vms(k);
	for (i = nr_vms; i < k; i++)
		list_debugfs(&kids[i]);
	open_ours(nr_vms, k);
	nr_vms = k;
}

/*
 * Growth: the per-vCPU cost of a sweep of the first 1, 16, 64 and 250 VMs,
 * measured side by side (the sizes rotated within each round, all VMs
 * existing throughout), so that the ratios between sizes are not those
 * of two moments of a shared host.
 */
static const int growth_sizes[] = { 1, 16, 64, 250 };
#define NR_GROWTH ((int)(sizeof(growth_sizes) / sizeof(growth_sizes[0])))

struct growth_result {
	double ns_per_vcpu[NR_GROWTH]; /* median over rounds */
	double ratio[NR_GROWTH];       /* to the smallest size, per round */
	double ratio_250_16;	       /* 250 against 16, per round */
	double lo, hi;		       /* spread of ratio_250_16 */
};

/*
 * [0] READ_BATCH, [1] one pread per fd, and the controls of
 * make_controls(): READ_BATCH into shared buffers, of 8 bytes of each
 * file, and of the same files over and over.
 */
enum { G_BATCHED, G_SINGLE, G_FILES, G_SAME, G_WORD, G_PAGES, NR_G };
static const char *const growth_name[NR_G] = {
	"batched",
	"single",
	"batched_shared_buffers",
	"batched_same_files",
	"batched_8_bytes",
	"machine_3_pages",
};

/*
 * The emulated machine itself, without kvmstats: one 8-byte load from
 * each of PAGES_PER_FILE distinct 4 KiB pages per file of the sweep, about
 * as many pages as a READ_BATCH op touches (the struct file, kvmstats'
 * file object, the VM's or vCPU's statistics).
 */
#define PAGES_PER_FILE 3
static uint8_t page_buf[MAX_FILES * PAGES_PER_FILE][4096]
	__attribute__((aligned(4096)));

volatile uint64_t page_sink; /* keeps the loads */

static void touch_pages(int k)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < k * FDS_PER_VM * PAGES_PER_FILE; i++)
		sum += *(volatile uint64_t *)page_buf[i];
	page_sink = sum;
}
static struct growth_result growth[NR_G];

/* Median ns of @n sweeps of method @m over @k VMs' worth of files. */
static double growth_time(int m, int k, int n)
{
	double t[n];
	uint64_t t0;
	int i;

	if (m == G_BATCHED || m == G_SINGLE)
		return time_method(m == G_BATCHED ? M_BATCHED : M_SINGLE, k, n);
	for (i = 0; i < n; i++) {
		t0 = now_ns();
		if (m == G_PAGES) {
			touch_pages(k);
			t[i] = now_ns() - t0;
			continue;
		}
		batch_run(m == G_FILES ? ops_files :
			  m == G_WORD  ? ops_word :
					 ops_same,
			  k * FDS_PER_VM);
		t[i] = now_ns() - t0;
	}
	return median(t, n);
}

static void bench_growth(void)
{
	int rounds = quick ? 11 : 41, r, i, j, m, n[NR_GROWTH];
	double t[NR_GROWTH][rounds], rt[NR_GROWTH][rounds], r16[rounds];

	make_controls();
	memset(page_buf, 1, sizeof(page_buf));
	for (m = 0; m < NR_G; m++) {
		struct growth_result *g = &growth[m];

		for (i = 0; i < NR_GROWTH; i++) {
			growth_time(m, growth_sizes[i], 1);
			n[i] = 3e6 / growth_time(m, growth_sizes[i], 1);
			if (n[i] < 1)
				n[i] = 1;
		}
		for (r = 0; r < rounds; r++) {
			for (j = 0; j < NR_GROWTH; j++) {
				i = (j + r) % NR_GROWTH;
				t[i][r] =
					growth_time(m, growth_sizes[i], n[i]) /
					(growth_sizes[i] * NR_VCPUS);
			}
			for (i = 0; i < NR_GROWTH; i++)
				rt[i][r] = t[i][r] / t[0][r];
			r16[r] = t[NR_GROWTH - 1][r] / t[1][r];
		}
		for (i = 0; i < NR_GROWTH; i++) {
			g->ns_per_vcpu[i] = median(t[i], rounds);
			g->ratio[i] = median(rt[i], rounds);
			printf("growth_sweep_%s_ns_per_vcpu_%dx%d_tcg=%.1f\n",
			       growth_name[m], growth_sizes[i], NR_VCPUS,
			       g->ns_per_vcpu[i]);
			printf("growth_sweep_%s_ratio_%dx%d=%.3f\n",
			       growth_name[m], growth_sizes[i], NR_VCPUS,
			       g->ratio[i]);
		}
		g->ratio_250_16 = median(r16, rounds);
		range(r16, rounds, &g->lo, &g->hi);
		printf("growth_sweep_%s_per_vcpu_250_vs_16=%.3f\n",
		       growth_name[m], g->ratio_250_16);
		printf("# growth, %s: %d rounds; sweeps per measurement %d, %d, %d, %d; 250 vs 16 per round %.3f..%.3f\n",
		       growth_name[m], rounds, n[0], n[1], n[2], n[3], g->lo,
		       g->hi);
	}
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* the tool */

struct tool_result {
	bool have;
	double us; /* per refresh, steady state */
	double lo, hi;
	char why[200];
};

/* The tool at one number of VMs. */
struct tool_size {
	int k;
	struct tool_result export, top, oneshot;
	double rss_kb, hwm_kb; /* the exporter's, after its scrapes */
	long bytes;	       /* of a scrape */
};

static const int tool_sizes[] = { 1, 16, 64, 250 };
#define NR_TOOL ((int)(sizeof(tool_sizes) / sizeof(tool_sizes[0])))
static struct tool_size tools[NR_TOOL];
static int nr_tools;

/* One row of the tool-cost table: "<what><how>" and its figure, or why not. */
static void print_tool_row(const struct tool_result *r, const char *what,
			   const char *how)
{
	char label[64];

	if (!r->have) {
		printf("  %-34s missing: %s\n", what, r->why);
		return;
	}
	snprintf(label, sizeof(label), "%s%s", what, how);
	printf("  %-34s %10.0f us (rounds %.0f..%.0f)\n", label, r->us, r->lo,
	       r->hi);
}

#define EXPORT_PORT 9477

static pid_t spawn(char *const argv[])
{
	pid_t pid;
	int fd;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		fd = open("/dev/null", O_RDWR);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Reaps @pid; returns its user+system CPU time in µs, -1 if it failed. */
static double reap_cpu_us(pid_t pid, int *status)
{
	struct rusage ru;

	if (wait4(pid, status, 0, &ru) != pid)
		die("wait4: %s", strerror(errno));
	if (!WIFEXITED(*status) || WEXITSTATUS(*status))
		return -1;
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
}

/* The loopback interface is down in a bare initramfs. */
static void loopback_up(void)
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return;
	strncpy(ifr.ifr_name, "lo", sizeof(ifr.ifr_name) - 1);
	if (!ioctl(s, SIOCGIFFLAGS, &ifr) && !(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
}

/* One GET /metrics; returns the bytes of the response, -1 on failure. */
static long scrape_once(void)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(EXPORT_PORT),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	static const char req[] =
		"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
	long total = 0;
	ssize_t r;
	int s, tries;

	for (tries = 0; tries < 3000; tries++) {
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -1;
		if (!connect(s, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(s);
		s = -1;
		usleep(10000); /* the server is still starting */
	}
	if (s < 0)
		return -1;
	if (write(s, req, sizeof(req) - 1) != sizeof(req) - 1) {
		close(s);
		return -1;
	}
	while ((r = read(s, scratch, sizeof(scratch))) > 0)
		total += r;
	close(s);
	return total;
}

/* VmRSS and VmHWM of @pid, kB. */
static void proc_rss(pid_t pid, double *rss, double *hwm)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	*rss = *hwm = 0;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmRSS: %lf", rss);
		sscanf(line, "VmHWM: %lf", hwm);
	}
	if (f)
		fclose(f);
}

static struct tool_size *cur_tool;

/*
 * `kvmstats export --listen` answering @n scrapes: its CPU time, µs; its
 * resident set just before the last scrape goes to cur_tool.
 */
static double export_run(int n)
{
	char port[32], cnt[16];
	/* Every series, as before the defaults were cut (issue 20). */
	char *argv[] = { (char *)tool_path,
			 "export",
			 "--listen",
			 port,
			 "--per",
			 "vcpu",
			 "--collector.histograms",
			 "--test.exit-after-connections",
			 cnt,
			 NULL };
	int i, status;
	pid_t pid;
	long bytes;

	snprintf(port, sizeof(port), "127.0.0.1:%d", EXPORT_PORT);
	snprintf(cnt, sizeof(cnt), "%d", n);
	pid = spawn(argv);
	for (i = 0; i < n; i++) {
		if (i == n - 1 && n > 1)
			proc_rss(pid, &cur_tool->rss_kb, &cur_tool->hwm_kb);
		bytes = scrape_once();
		if (bytes <= 0) {
			kill(pid, SIGKILL);
			reap_cpu_us(pid, &status);
			return -1;
		}
		cur_tool->bytes = bytes;
	}
	return reap_cpu_us(pid, &status);
}

/* `kvmstats top --batch -n @n -d 0.1`: its CPU time, µs. */
static double top_run(int n)
{
	char cnt[16];
	char *argv[] = { (char *)tool_path,
			 "top",
			 "--batch",
			 "-n",
			 cnt,
			 "-d",
			 "0.1",
			 NULL };
	int status;

	snprintf(cnt, sizeof(cnt), "%d", n);
	return reap_cpu_us(spawn(argv), &status);
}

static double oneshot_run(int n)
{
	char *argv[] = { (char *)tool_path, "export", NULL };
	int status;

	(void)n;
	return reap_cpu_us(spawn(argv), &status);
}

/*
 * CPU per refresh in steady state: a run doing 1 + @many refreshes minus a
 * run doing 1 (start-up, listing, opening and parsing every stats file are
 * paid once and cancel out), divided by @many; median of @rounds rounds.
 */
static void tool_cost(struct tool_result *res, const char *what,
		      double (*run)(int n), int many, int rounds)
{
	double d[rounds], one, lots;
	int r;

	for (r = 0; r < rounds; r++) {
		one = run(1);
		lots = run(1 + many);
		if (one < 0 || lots < 0) {
			snprintf(res->why, sizeof(res->why),
				 "`%s` failed in the guest", what);
			return;
		}
		d[r] = (lots - one) / many;
	}
	res->have = true;
	res->us = median(d, rounds);
	range(d, rounds, &res->lo, &res->hi);
}

/* The tool's CPU time and memory with the first @k VMs up. */
static void bench_tool(int k)
{
	int rounds = quick ? 3 : (k >= 250 ? 3 : 5), r;
	struct tool_size *t = &tools[nr_tools++];
	double d[rounds];

	t->k = k;
	cur_tool = t;
	if (access(tool_path, X_OK)) {
		snprintf(t->export.why, sizeof(t->export.why),
			 "%s is not in the guest (the tool did not build)",
			 tool_path);
		strcpy(t->top.why, t->export.why);
		strcpy(t->oneshot.why, t->export.why);
	} else {
		loopback_up();
		/* Enough scrapes to stand out of a start-up's noise. */
		tool_cost(&t->export, "kvmstats export --listen", export_run,
			  k <= 1  ? 100 :
			  k <= 16 ? 20 :
				    10,
			  rounds);
		tool_cost(&t->top, "kvmstats top --batch", top_run,
			  k >= 64 ? 10 : 20, rounds);
		for (r = 0; r < rounds; r++) {
			d[r] = oneshot_run(0);
			if (d[r] < 0)
				break;
		}
		if (r == rounds) {
			t->oneshot.have = true;
			t->oneshot.us = median(d, rounds);
			range(d, rounds, &t->oneshot.lo, &t->oneshot.hi);
		} else {
			strcpy(t->oneshot.why,
			       "`kvmstats export` failed in the guest");
		}
	}
	if (t->export.have) {
		printf("# export at %dx%d: %ld bytes per scrape over HTTP\n", k,
		       NR_VCPUS, t->bytes);
		printf("export_cpu_us_per_scrape_%dx%d=%.0f\n", k, NR_VCPUS,
		       t->export.us);
		printf("export_rss_kb_%dx%d=%.0f\n", k, NR_VCPUS, t->rss_kb);
		printf("export_hwm_kb_%dx%d=%.0f\n", k, NR_VCPUS, t->hwm_kb);
	} else {
		printf("# MISSING export_cpu_us_per_scrape_%dx%d: %s\n", k,
		       NR_VCPUS, t->export.why);
	}
	if (t->top.have)
		printf("top_cpu_us_per_refresh_%dx%d=%.0f\n", k, NR_VCPUS,
		       t->top.us);
	else
		printf("# MISSING top_cpu_us_per_refresh_%dx%d: %s\n", k,
		       NR_VCPUS, t->top.why);
	if (t->oneshot.have)
		printf("export_oneshot_cpu_us_%dx%d=%.0f\n", k, NR_VCPUS,
		       t->oneshot.us);
	else
		printf("# MISSING export_oneshot_cpu_us_%dx%d: %s\n", k,
		       NR_VCPUS, t->oneshot.why);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* LIST_VMS among idle processes */

/*
 * The zygote is forked first, while this process is small, and forks the
 * idle processes on request, so each of them costs little memory.  Its
 * commands: spawn N idle processes holding F fds; grow (every idle process
 * opens F more fds); kill them all.  Each is acknowledged once done.
 */
enum { Z_SPAWN = 1, Z_GROW, Z_KILL };

struct zcmd {
	int op;
	int n;
	int nfds;
};

static volatile sig_atomic_t grow_fds;

static void on_grow(int sig)
{
	(void)sig;
	grow_fds = 1;
}

static void open_null(int n)
{
	int j;

	for (j = 0; j < n; j++)
		if (open("/dev/null", O_RDONLY) < 0)
			_exit(1);
}

static void idle_main(int ack, int nfds, int grow)
{
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	open_null(nfds);
	xwrite(ack, "r", 1);
	sigemptyset(&none);
	for (;;) {
		sigsuspend(&none);
		if (grow_fds) {
			grow_fds = 0;
			open_null(grow);
			xwrite(ack, "g", 1);
		}
	}
}

static void zygote_main(int in, int out)
{
	static pid_t pids[8192];
	struct sigaction sa = { .sa_handler = on_grow };
	sigset_t block;
	int nr = 0, i, ack[2];
	struct zcmd cmd;
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (pipe(ack))
		die("pipe: %s", strerror(errno));
	/* Idle processes take SIGUSR1 only in sigsuspend(): no races. */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	for (;;) {
		xread(in, &cmd, sizeof(cmd));
		switch (cmd.op) {
		case Z_SPAWN:
			for (i = 0; i < cmd.n && nr < 8192; i++) {
				pid_t pid = fork();

				if (pid < 0)
					die("fork of idle process %d: %s", nr,
					    strerror(errno));
				if (!pid) {
					close(in);
					close(out);
					close(ack[0]);
					idle_main(ack[1], cmd.nfds, IDLE_FDS);
				}
				pids[nr++] = pid;
			}
			for (i = 0; i < cmd.n; i++)
				xread(ack[0], &c, 1);
			break;
		case Z_GROW:
			for (i = 0; i < nr; i++)
				kill(pids[i], SIGUSR1);
			for (i = 0; i < nr; i++)
				xread(ack[0], &c, 1);
			break;
		case Z_KILL:
			for (i = 0; i < nr; i++)
				kill(pids[i], SIGKILL);
			for (i = 0; i < nr; i++)
				waitpid(pids[i], NULL, 0);
			nr = 0;
			break;
		}
		xwrite(out, &cmd, sizeof(cmd));
	}
}

static void start_zygote(void)
{
	int p1[2], p2[2];
	pid_t pid;

	if (pipe(p1) || pipe(p2))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		close(p1[1]);
		close(p2[0]);
		zygote_main(p1[0], p2[1]);
	}
	close(p1[0]);
	close(p2[1]);
	zygote_to = p1[1];
	zygote_from = p2[0];
}

static void zygote(int op, int n, int nfds)
{
	struct zcmd cmd = { op, n, nfds };

	xwrite(zygote_to, &cmd, sizeof(cmd));
	xread(zygote_from, &cmd, sizeof(cmd));
	sleep(1); /* let the guest settle before measuring */
}

/* Processes and open fds on the host, from /proc. */
static void count_host(long *procs, long *fds)
{
	char path[300];
	struct dirent *de, *fe;
	DIR *d, *fd;

	*procs = *fds = 0;
	d = opendir("/proc");
	if (!d)
		die("opendir /proc: %s", strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
		fd = opendir(path);
		if (!fd)
			continue;
		(*procs)++;
		while ((fe = readdir(fd)))
			if (fe->d_name[0] != '.')
				(*fds)++;
		closedir(fd);
	}
	closedir(d);
}
struct list_result {
	int idle;
	long procs, fds;
	double ms, lo, hi;
	int vms;
};

static struct list_result lists[4], fdvar[2];
static int nr_lists;

static struct kvmstats_vm_list *vm_list;

static double list_once(void)
{
	uint64_t t0;

	vm_list->nr = 1024;
	vm_list->flags = 0;
	t0 = now_ns();
	if (ioctl(devfd, KVMSTATS_LIST_VMS, vm_list))
		die("KVMSTATS_LIST_VMS: %s", strerror(errno));
	return (now_ns() - t0) / 1e6;
}

static void measure_list(struct list_result *res, int idle)
{
	int rounds = quick ? 9 : 101, r;
	double t[rounds];

	res->idle = idle;
	count_host(&res->procs, &res->fds);
	for (r = 0; r < rounds; r++)
		t[r] = list_once();
	res->vms = vm_list->nr;
	res->ms = median(t, rounds);
	range(t, rounds, &res->lo, &res->hi);
	printf("# LIST_VMS: %d idle processes, %ld processes and %ld open fds on the host, %d VMs listed: median %.3f ms of %d (%.3f..%.3f)\n",
	       idle, res->procs, res->fds, res->vms, res->ms, rounds, res->lo,
	       res->hi);
	fflush(stdout);
}

/*
 * LIST_VMS against the number of VMs: at each level of the child VMMs,
 * which all exist from the start (so the processes are the same at every
 * level; a VMM without its VM yet has no MMU notifier and costs what any
 * process costs).
 */
static const int list_levels[] = { 0, 1, 4, 16, 64, 250 };
#define NR_LEVELS ((int)(sizeof(list_levels) / sizeof(list_levels[0])))
static struct list_result vlists[NR_LEVELS];
static int nr_vlists;

static void measure_list_level(int k)
{
	struct list_result *res = &vlists[nr_vlists++];

	if (!vm_list)
		vm_list = calloc(1, sizeof(*vm_list) +
					    1024 * sizeof(vm_list->vms[0]));
	measure_list(res, 0);
	if (res->vms != k)
		die("LIST_VMS lists %d VMs, wanted %d", res->vms, k);
	printf("list_vms_ms_%dvms=%.3f\n", k, res->ms);
	printf("list_vms_ms_fastest_%dvms=%.3f\n", k, res->lo);
	printf("list_vms_procs_%dvms=%ld\n", k, res->procs);
	fflush(stdout);
}

/*
 * LIST_VMS and LIST_PIDFD against the number of VMs in one process: a VMM
 * of its own, holding only /dev/kvm and VM fds (VMs without vCPUs: the
 * cost of a VM fd in the walk, not of its vCPUs' fds).
 */
static const int lone_levels[] = { 1, 16, 64, 250 };
#define NR_LONE ((int)(sizeof(lone_levels) / sizeof(lone_levels[0])))

struct lone_result {
	int v;
	double pidfd_us, pidfd_lo; /* LIST_PIDFD: median, fastest */
	double list_us, list_lo;   /* LIST_VMS of the whole host */
};

static struct lone_result lone[NR_LONE];
static double lone_base_us, lone_base_lo; /* LIST_VMS without it */

static void lone_main(int in, int out)
{
	int have = 0, want, kvm;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm: %s", strerror(errno));
	for (;;) {
		xread(in, &want, sizeof(want));
		for (; have < want; have++)
			if (ioctl(kvm, KVM_CREATE_VM, 0) < 0)
				die("KVM_CREATE_VM %d: %s", have,
				    strerror(errno));
		xwrite(out, &have, sizeof(have));
	}
}

/* Median and fastest of LIST_PIDFD (@pidfd >= 0) or LIST_VMS calls, µs. */
static void time_listing(int pidfd, int want, double *med, double *lo)
{
	int rounds = quick ? 9 : 101, r;
	struct kvmstats_pidfd_list *pl;
	double t[rounds], hi;
	uint64_t t0;

	pl = calloc(1, sizeof(*pl) + 1024 * sizeof(pl->vms[0]));
	for (r = 0; r < rounds; r++) {
		if (pidfd >= 0) {
			memset(pl, 0, sizeof(*pl));
			pl->pidfd = pidfd;
			pl->nr = 1024;
			t0 = now_ns();
			if (ioctl(devfd, KVMSTATS_LIST_PIDFD, pl))
				die("KVMSTATS_LIST_PIDFD: %s", strerror(errno));
			t[r] = (now_ns() - t0) / 1e3;
			if ((int)pl->nr != want)
				die("LIST_PIDFD lists %u VMs, wanted %d",
				    pl->nr, want);
		} else {
			t[r] = list_once() * 1e3;
		}
	}
	free(pl);
	*med = median(t, rounds);
	range(t, rounds, lo, &hi);
}

/*
 * Giving VMs back: kvmstats holds a reference on a VM while any of its
 * stats files is open, and gives it back from a work item once the last
 * one closes (then unregisters the MMU notifier it had put on the VMM's
 * address space).  Close the files of 16, then 48, then 186 VMs at once
 * and time until live_vms says kvmstats let go of them; then, each time,
 * open and close one VM file and time how long that VM waits behind the
 * rest of the work.
 */
static const int release_levels[] = { 16, 64, 250 };
#define NR_RELEASE ((int)(sizeof(release_levels) / sizeof(release_levels[0])))

struct release_result {
	int n;		 /* VMs let go of at once */
	double ms;	 /* until live_vms dropped by n */
	double probe_ms; /* one more VM released just after */
	bool timed_out;
};

static struct release_result releases[NR_RELEASE];
static int nr_releases;

static long live_vms(void)
{
	FILE *f = fopen("/sys/module/kvmstats/parameters/live_vms", "re");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* ms until live_vms is @want (-1 after 120 s). */
static double wait_live_vms(long want)
{
	uint64_t t0 = now_ns();

	while (live_vms() != want) {
		if (now_ns() - t0 > 120e9)
			return -1;
		usleep(1000);
	}
	return (now_ns() - t0) / 1e6;
}

/*
 * Before a measurement: the tool runs just before opened and closed the
 * files of every VM, and kvmstats gives those VMs back from a work item;
 * wait until it holds only the VMs whose files we keep open, so that its
 * work does not run beside the measurement.
 */
static void settle(void)
{
	uint64_t t0 = now_ns();
	double ms;

	if (live_vms() < 0)
		return;
	ms = wait_live_vms(nr_vms);
	if (ms < 0)
		printf("# kvmstats still holds %ld VMs (we hold %d) after 120 s\n",
		       live_vms(), nr_vms);
	else if (now_ns() - t0 > 10000000)
		printf("# waited %.0f ms for kvmstats to give back the VMs of the tool runs\n",
		       ms);
	usleep(200000); /* and its notifiers' unregistering */
}

static void bench_release(void)
{
	int i, j, from = 0, fd;
	long base;

	if (live_vms() < 0) {
		printf("# no /sys/module/kvmstats/parameters/live_vms: release not measured\n");
		return;
	}
	for (i = 0; i < NR_RELEASE && release_levels[i] <= nr_vms; i++) {
		struct release_result *r = &releases[nr_releases++];
		int to = release_levels[i];

		r->n = to - from;
		base = live_vms();
		for (j = from * FDS_PER_VM; j < to * FDS_PER_VM; j++)
			close(ours[j].fd);
		r->ms = wait_live_vms(base - r->n);
		fd = ours_stats_fd(kids[0].pid, kids[0].vm_fd, -1);
		close(fd);
		r->probe_ms = wait_live_vms(base - r->n);
		r->timed_out = r->ms < 0 || r->probe_ms < 0;
		printf("# released %d VMs at once: live_vms down by %d after %.1f ms; one VM released next waited %.1f ms\n",
		       r->n, r->n, r->ms, r->probe_ms);
		printf("release_ms_%dvms=%.1f\n", r->n, r->ms);
		printf("release_us_per_vm_%dvms=%.0f\n", r->n,
		       r->ms * 1e3 / r->n);
		printf("release_next_vm_waits_ms_after_%dvms=%.1f\n", r->n,
		       r->probe_ms);
		from = to;
	}
	fflush(stdout);
}

static void bench_lone(void)
{
	int p1[2], p2[2], i, have, pidfd;
	pid_t pid;

	time_listing(-1, 0, &lone_base_us, &lone_base_lo);
	printf("lone_list_vms_base_us=%.1f\n", lone_base_us);
	if (pipe(p1) || pipe(p2))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (!pid) {
		int in = fcntl(p1[0], F_DUPFD, 3000);
		int out = fcntl(p2[1], F_DUPFD, 3001);

		if (in < 0 || out < 0)
			die("F_DUPFD: %s", strerror(errno));
		syscall(SYS_close_range, 3, 2999, 0);
		syscall(SYS_close_range, out + 1, ~0u, 0);
		lone_main(in, out);
	}
	close(p1[0]);
	close(p2[1]);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		die("pidfd_open: %s", strerror(errno));
	for (i = 0; i < NR_LONE; i++) {
		struct lone_result *l = &lone[i];

		l->v = lone_levels[i];
		xwrite(p1[1], &l->v, sizeof(l->v));
		xread(p2[0], &have, sizeof(have));
		time_listing(pidfd, l->v, &l->pidfd_us, &l->pidfd_lo);
		time_listing(-1, 0, &l->list_us, &l->list_lo);
		printf("# one process with %d VMs: LIST_PIDFD median %.1f us (fastest %.1f), LIST_VMS of the host %.1f us (fastest %.1f)\n",
		       l->v, l->pidfd_us, l->pidfd_lo, l->list_us, l->list_lo);
		printf("lone_list_pidfd_us_%dvms=%.1f\n", l->v, l->pidfd_us);
		printf("lone_list_pidfd_ns_per_vm_%dvms=%.1f\n", l->v,
		       l->pidfd_us * 1e3 / l->v);
		printf("lone_list_vms_us_%dvms=%.1f\n", l->v, l->list_us);
	}
	/* What each VM after the first adds: a constant if it is linear. */
	for (i = 1; i < NR_LONE; i++)
		printf("lone_list_pidfd_us_above1_per_vm_%dvms=%.4f\n",
		       lone[i].v,
		       (lone[i].pidfd_us - lone[0].pidfd_us) / (lone[i].v - 1));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(pidfd);
	close(p1[1]);
	close(p2[0]);
	fflush(stdout);
}

static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = write(fd, val, strlen(val));
	close(fd);
	return r == (ssize_t)strlen(val) ? 0 : -1;
}

static int append_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = write(fd, val, strlen(val));
	close(fd);
	return r == (ssize_t)strlen(val) ? 0 : -1;
}

/*
 * One LIST_VMS under the function_graph tracer, its trace saved to
 * $KVMSTATS_ARTIFACTS/list-trace.txt (bench/report summarises it).  The
 * tracer's own cost inflates every call it sees: only proportions count.
 */
static void trace_list(void)
{
	/* LIST_VMS's own code and everything it calls per process and fd. */
	static const char *const traced[] = {
		"kvmstats_*",
		"iterate_fd",
		"file_is_kvm",
		"find_ge_pid",
		"pid_nr_ns",
		"pid_task",
		"__put_task_struct",
		"__cond_resched",
		"_raw_spin_lock",
		"_raw_spin_unlock",
		"__rcu_read_lock",
		"__rcu_read_unlock",
		"kvfree",
		"__kvmalloc_node",
		"__kvmalloc_node_noprof",
		"task_active_pid_ns",
	};
	static const char *const roots[] = {
		"/sys/kernel/tracing",
		"/sys/kernel/debug/tracing",
	};
	const char *dir = getenv("KVMSTATS_ARTIFACTS");
	char path[PATH_MAX], dst[PATH_MAX], buf[65536];
	const char *t = NULL;
	int i, in, out;
	bool cpu1;
	ssize_t r;

	if (!dir || !do_trace)
		return;
	for (i = 0; i < 2 && !t; i++) {
		snprintf(path, sizeof(path), "%s/current_tracer", roots[i]);
		if (!access(path, W_OK))
			t = roots[i];
	}
	if (!t) {
		printf("# no tracefs: LIST_VMS not traced\n");
		return;
	}
#define TW(file, val)                                                     \
	do {                                                              \
		snprintf(path, sizeof(path), "%s/%s", t, file);           \
		if (write_str(path, val))                                 \
			printf("# tracefs: cannot write %s to %s\n", val, \
			       path);                                     \
	} while (0)
	/*
	 * Switching tracers patches kernel text.  Under TCG with two vCPUs
	 * the other vCPU can run a stale translation of a patched site and
	 * die on its int3 (seen once: "Oops: int3" in kmem_cache_alloc), so
	 * only one CPU is online while the tracer is switched.
	 */
	cpu1 = !write_str("/sys/devices/system/cpu/cpu1/online", "0");
	TW("tracing_on", "0");
	TW("current_tracer", "nop");
	TW("buffer_size_kb", "32768");
	/*
	 * Only the functions of interest are patched: enabling the graph
	 * tracer on every function patches tens of thousands of call sites,
	 * which under TCG takes long enough for the soft-lockup watchdog
	 * (seen on 6.1).
	 */
	snprintf(path, sizeof(path), "%s/set_ftrace_filter", t);
	write_str(path, "");
	for (i = 0; i < (int)(sizeof(traced) / sizeof(traced[0])); i++)
		if (append_str(path, traced[i]))
			printf("# tracefs: %s cannot be traced\n", traced[i]);
	TW("set_graph_function", "kvmstats_list_vms");
	TW("options/funcgraph-tail", "1");
	TW("options/funcgraph-proc", "0");
	TW("current_tracer", "function_graph");
	TW("trace", "");
	TW("tracing_on", "1");
	list_once();
	TW("tracing_on", "0");
	snprintf(path, sizeof(path), "%s/trace", t);
	snprintf(dst, sizeof(dst), "%s/list-trace.txt", dir);
	in = open(path, O_RDONLY);
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	while (in >= 0 && out >= 0 && (r = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, r) != r)
			break;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	TW("current_tracer", "nop");
	TW("buffer_size_kb", "1408");
	TW("set_graph_function", "");
	TW("set_ftrace_filter", "");
#undef TW
	if (cpu1 && write_str("/sys/devices/system/cpu/cpu1/online", "1"))
		printf("# cannot bring cpu1 back online\n");
	printf("# traced one LIST_VMS with function_graph: list-trace.txt\n");
}

static void bench_list(void)
{
	static const int levels[] = { 100, 1000, 5000 };
	double sx = 0, sy = 0, sxx = 0, sxy = 0, slope, icpt, n, per_fd,
	       per_proc;
	int i, have = 0;
	uint64_t t0;

	/*
	 * Per fd or per process?  1000 idle processes with no fds beyond
	 * stdin, stdout, stderr and a pipe, then the same processes with
	 * IDLE_FDS more each: the difference is the cost of the fds alone.
	 */
	zygote(Z_SPAWN, 1000, 0);
	measure_list(&fdvar[0], 1000);
	zygote(Z_GROW, 0, 0);
	measure_list(&fdvar[1], 1000);
	zygote(Z_KILL, 0, 0);
	per_fd = (fdvar[1].ms - fdvar[0].ms) * 1e6 /
		 (fdvar[1].fds - fdvar[0].fds);
	printf("list_ns_per_fd_tcg=%.1f\n", per_fd);
	/* The fastest call is the one the host's scheduler left alone. */
	printf("list_ns_per_fd_fastest_tcg=%.1f\n",
	       (fdvar[1].lo - fdvar[0].lo) * 1e6 /
		       (fdvar[1].fds - fdvar[0].fds));

	measure_list(&lists[nr_lists++], 0);
	per_proc = (fdvar[0].ms - lists[0].ms) * 1e6 /
		   (fdvar[0].procs - lists[0].procs);
	printf("list_ns_per_process_4fds_tcg=%.0f\n", per_proc);
	printf("list_ns_per_process_4fds_fastest_tcg=%.0f\n",
	       (fdvar[0].lo - lists[0].lo) * 1e6 /
		       (fdvar[0].procs - lists[0].procs));

	for (i = 0; i < 3; i++) {
		if (quick && levels[i] > 1000)
			break;
		t0 = now_ns();
		zygote(Z_SPAWN, levels[i] - have, IDLE_FDS);
		have = levels[i];
		printf("# %d idle processes with %d fds each ready (%.1f s)\n",
		       have, IDLE_FDS, (now_ns() - t0) / 1e9);
		measure_list(&lists[nr_lists++], have);
		printf("list_ms_%dvms_%dprocs=%.3f\n", nr_vms, have,
		       lists[nr_lists - 1].ms);
		printf("list_ms_fastest_%dvms_%dprocs=%.3f\n", nr_vms, have,
		       lists[nr_lists - 1].lo);
		if (have == 100)
			trace_list();
	}
	zygote(Z_KILL, 0, 0);

	/* Least squares over the ladder: time against open fds. */
	n = nr_lists;
	for (i = 0; i < nr_lists; i++) {
		sx += lists[i].fds;
		sy += lists[i].ms * 1e6;
		sxx += (double)lists[i].fds * lists[i].fds;
		sxy += lists[i].fds * lists[i].ms * 1e6;
	}
	slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
	icpt = (sy - slope * sx) / n;
	printf("list_fit_ns_per_open_fd_tcg=%.1f\n", slope);
	printf("list_fit_intercept_ms_tcg=%.3f\n", icpt / 1e6);
	for (i = 0; i < nr_lists; i++)
		printf("# fit at %ld fds: %.3f ms predicted, %.3f ms measured\n",
		       lists[i].fds, (icpt + slope * lists[i].fds) / 1e6,
		       lists[i].ms);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* cost growth, and the tables */

static const struct tool_size *tool_at(int k)
{
	int i;

	for (i = 0; i < nr_tools; i++)
		if (tools[i].k == k)
			return &tools[i];
	return NULL;
}

static const struct list_result *vlist_at(int k)
{
	int i;

	for (i = 0; i < nr_vlists; i++)
		if (vlists[i].vms == k)
			return &vlists[i];
	return NULL;
}

/*
 * One line of the growth table: the cost per unit at each size of
 * growth_sizes[] (@per[i], NAN: not measured) as a ratio to the smallest
 * size, and 250 against 16.
 */
static void growth_row(const char *label, const double *per)
{
	int i;

	printf("  %-40s", label);
	for (i = 0; i < NR_GROWTH; i++) {
		if (isnan(per[i]) || isnan(per[0]) || per[0] <= 0)
			printf(" %8s", "-");
		else
			printf(" %8.3f", per[i] / per[0]);
	}
	if (isnan(per[3]) || isnan(per[1]) || per[1] <= 0)
		printf(" %9s\n", "-");
	else
		printf(" %9.3f\n", per[3] / per[1]);
}

#define NR_GROWTH_ROWS 10

/* Per-unit costs at each growth size, into @per (NAN where not measured). */
static void growth_values(int what, double *per)
{
	int i;

	for (i = 0; i < NR_GROWTH; i++) {
		int k = growth_sizes[i];
		const struct tool_size *t = tool_at(k);
		const struct list_result *l = vlist_at(k), *l0 = vlist_at(0);

		per[i] = NAN;
		switch (what) {
		case 0: /* READ_BATCH, per vCPU */
		case 1: /* one pread per fd, per vCPU */
		case 2: /* READ_BATCH into shared buffers */
		case 3: /* READ_BATCH of the same files */
			per[i] = growth[what].ns_per_vcpu[i];
			break;
		case 4: /* LIST_VMS per VM, fixed processes */
			if (l)
				per[i] = l->ms / k;
			break;
		case 5: /* the same, above the host without VMs */
			if (l && l0)
				per[i] = (l->ms - l0->ms) / k;
			break;
		case 6: /* LIST_PIDFD per VM, one process */
			per[i] = lone[i].pidfd_us / lone[i].v;
			break;
		case 7:
			if (t && t->export.have)
				per[i] = t->export.us / (k * NR_VCPUS);
			break;
		case 8:
			if (t && t->export.have)
				per[i] = t->rss_kb / (k * NR_VCPUS);
			break;
		case 9:
			if (t && t->top.have)
				per[i] = t->top.us / (k * NR_VCPUS);
			break;
		}
	}
}

static void print_growth(void)
{
	static const char *const rows[] = {
		"READ_BATCH sweep, per vCPU",
		"one pread per fd, per vCPU",
		"  control: READ_BATCH into 5 buffers",
		"  control: READ_BATCH of 5 files again",
		"LIST_VMS, per VM (fixed processes)",
		"  the same, above the host without VMs",
		"LIST_PIDFD, per VM (all in one process)",
		"export CPU per scrape, per vCPU (guest)",
		"export RSS, per vCPU (guest)",
		"top CPU per refresh, per vCPU (guest)",
	};
	double per[NR_GROWTH];
	unsigned int r;

	printf("\nCost growth: cost per unit as a ratio to the smallest size (1.0 = linear; above 1 bends up)\n");
	printf("  %-40s %8s %8s %8s %8s %9s\n", "measure", "1x4", "16x4",
	       "64x4", "250x4", "250 vs 16");
	for (r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		growth_values((int)r, per);
		growth_row(rows[r], per);
	}
	printf("  (the sweeps side by side in one set of rounds; the rest level by level)\n");
}

/* The name=value lines of the growth table (print_growth has the text). */
static void growth_lines(void)
{
	static const char *const keys[] = {
		"growth_read_batch",
		"growth_pread",
		"growth_read_batch_shared_buffers",
		"growth_read_batch_same_files",
		"growth_list_vms",
		"growth_list_vms_above_empty",
		"growth_list_pidfd_one_process",
		"growth_export_cpu_guest",
		"growth_export_rss_guest",
		"growth_top_cpu_guest",
	};
	double per[NR_GROWTH];
	unsigned int r;
	int i;

	for (r = 0; r < sizeof(keys) / sizeof(keys[0]); r++) {
		growth_values((int)r, per);
		for (i = 0; i < NR_GROWTH; i++)
			if (!isnan(per[i]) && !isnan(per[0]) && per[0] > 0)
				printf("%s_ratio_%dx%d=%.3f\n", keys[r],
				       growth_sizes[i], NR_VCPUS,
				       per[i] / per[0]);
		if (!isnan(per[3]) && !isnan(per[1]) && per[1] > 0)
			printf("%s_250_vs_16=%.3f\n", keys[r], per[3] / per[1]);
	}
	fflush(stdout);
}

static void print_table(void)
{
	int i;

	printf("\n");
	printf("kvmstats benchmark (all absolute times are TCG-emulated)\n\n");
	printf("Per read (median ns per pread, %s)\n",
	       "our fd vs KVM_GET_STATS_FD");
	printf("  %-22s %10s %10s %8s %17s\n", "read", "ours", "native",
	       "ratio", "round ratios");
	printf("  %-22s %10.0f %10.0f %8.3f %8.3f..%-8.3f\n", "vCPU data block",
	       p_vcpu.ours, p_vcpu.native, p_vcpu.ratio, p_vcpu.lo, p_vcpu.hi);
	printf("  %-22s %10.0f %10.0f %8.3f %8.3f..%-8.3f\n", "VM data block",
	       p_vm.ours, p_vm.native, p_vm.ratio, p_vm.lo, p_vm.hi);
	printf("  %-22s %10.0f %10.0f %8.3f %8.3f..%-8.3f\n", "vCPU full file",
	       p_full.ours, p_full.native, p_full.ratio, p_full.lo, p_full.hi);
	printf("  %-22s %10.0f %10.0f %8.3f %8.3f..%-8.3f\n",
	       "control: native/native", p_control.ours, p_control.native,
	       p_control.ratio, p_control.lo, p_control.hi);

	printf("\nHost sweep (median us per sweep of every VM and vCPU data block)\n");
	printf("  %-6s %10s %10s %10s %10s %10s %10s %9s %9s %8s %8s %8s %8s\n",
	       "VMsx4", "debugfs", "single", "batched", "native", "in turn",
	       "one proc", "x single", "x batched", "single/n", "batch/n",
	       "b/turn", "b/one");
	for (i = 0; i < nr_sweeps; i++) {
		const struct sweep_result *s = &sweeps[i];

		printf("  %-6d %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %9.1f %9.1f %8.2f %8.2f %8.2f %8.2f\n",
		       s->k, s->ns[M_DEBUGFS] / 1000, s->ns[M_SINGLE] / 1000,
		       s->ns[M_BATCHED] / 1000, s->ns[M_NATIVE] / 1000,
		       s->ns[M_NATIVE_RR] / 1000, s->ns[M_NATIVE_ONE] / 1000,
		       s->speedup_single, s->speedup_batched, s->ratio_single,
		       s->ratio_batched, s->ratio_batched_rr,
		       s->ratio_batched_one);
	}
	printf("  (/n: against native, each VMM re-reading its own warm; b/turn: batched\n"
	       "  against the VMMs in turn; b/one: against every native fd read by one\n"
	       "  process, from the rotated rounds above)\n");
	printf("\nREAD_BATCH against every native fd read by one process, ABBA pairs\n");
	printf("  %-6s %10s %10s %8s %8s\n", "VMsx4", "batched", "one proc",
	       "ratio", "control");
	for (i = 0; i < nr_sweeps; i++)
		printf("  %-6d %10.1f %10.1f %8.3f %8.3f\n", sweeps[i].k,
		       sweeps[i].pair_ours / 1000, sweeps[i].pair_native / 1000,
		       sweeps[i].pair, sweeps[i].pair_control);

	printf("\nSweep cost per vCPU, sizes side by side (median ns per vCPU; the VM file of each VM included)\n");
	printf("  %-22s %9s %9s %9s %9s %10s %15s\n", "method", "1x4", "16x4",
	       "64x4", "250x4", "250 vs 16", "rounds 250/16");
	for (i = 0; i < NR_G; i++)
		printf("  %-22s %9.0f %9.0f %9.0f %9.0f %10.3f %7.3f..%-7.3f\n",
		       i == G_BATCHED ? "READ_BATCH" :
		       i == G_SINGLE  ? "one pread per fd" :
		       i == G_FILES   ? "READ_BATCH, 5 buffers" :
		       i == G_WORD    ? "READ_BATCH, 8 bytes" :
		       i == G_PAGES   ? "machine: 3 pages/file" :
					"READ_BATCH, 5 files",
		       growth[i].ns_per_vcpu[0], growth[i].ns_per_vcpu[1],
		       growth[i].ns_per_vcpu[2], growth[i].ns_per_vcpu[3],
		       growth[i].ratio_250_16, growth[i].lo, growth[i].hi);

	printf("\nKVMSTATS_LIST_VMS against VMs (%d child VMMs exist throughout; median of %d calls)\n",
	       MAX_VMS, quick ? 9 : 101);
	printf("  %-6s %8s %9s %10s %10s %12s\n", "VMs", "procs", "open fds",
	       "median ms", "fastest", "us per VM");
	for (i = 0; i < nr_vlists; i++) {
		const struct list_result *l = &vlists[i];
		int k = l->vms;

		printf("  %-6d %8ld %9ld %10.3f %10.3f", k, l->procs, l->fds,
		       l->ms, l->lo);
		if (k)
			printf(" %12.2f\n", l->ms * 1e3 / k);
		else
			printf(" %12s\n", "-");
	}

	printf("\nKVMSTATS_LIST_VMS against processes (%d VMs; idle processes hold %d fds each)\n",
	       nr_vms, IDLE_FDS);
	printf("  %-10s %8s %9s %10s %19s %10s\n", "idle procs", "procs",
	       "open fds", "median ms", "min..max ms", "ns per fd");
	for (i = 0; i < nr_lists; i++)
		printf("  %-10d %8ld %9ld %10.3f %9.3f..%-9.3f %10.1f\n",
		       lists[i].idle, lists[i].procs, lists[i].fds, lists[i].ms,
		       lists[i].lo, lists[i].hi,
		       lists[i].ms * 1e6 / lists[i].fds);
	printf("  per fd or per process: 1000 idle processes with 4 fds each: %.3f ms, fastest %.3f (%ld fds on the host);\n"
	       "  the same with %d more fds each: %.3f ms, fastest %.3f (%ld fds)\n",
	       fdvar[0].ms, fdvar[0].lo, fdvar[0].fds, IDLE_FDS, fdvar[1].ms,
	       fdvar[1].lo, fdvar[1].fds);

	printf("\nOne process holding N VMs (no vCPUs): KVMSTATS_LIST_PIDFD of it, and LIST_VMS of the host (us)\n");
	printf("  %-6s %12s %10s %12s %14s %16s\n", "VMs", "LIST_PIDFD",
	       "fastest", "ns per VM", "LIST_VMS", "LIST_VMS - base");
	for (i = 0; i < NR_LONE; i++)
		printf("  %-6d %12.1f %10.1f %12.1f %14.1f %16.1f\n", lone[i].v,
		       lone[i].pidfd_us, lone[i].pidfd_lo,
		       lone[i].pidfd_us * 1e3 / lone[i].v, lone[i].list_us,
		       lone[i].list_us - lone_base_us);

	printf("\nGiving VMs back: the stats files of N VMs closed at once\n");
	printf("  %-6s %14s %12s %22s\n", "VMs", "until let go", "per VM",
	       "next VM released waits");
	for (i = 0; i < nr_releases; i++)
		printf("  %-6d %11.1f ms %9.0f us %19.1f ms\n", releases[i].n,
		       releases[i].ms, releases[i].ms * 1e3 / releases[i].n,
		       releases[i].probe_ms);

	printf("\nTool CPU time (user+system; per refresh in steady state) and the exporter's memory\n");
	for (i = 0; i < nr_tools; i++) {
		char what[64];

		printf("  at %dx%d:\n", tools[i].k, NR_VCPUS);
		snprintf(what, sizeof(what), "kvmstats export --listen");
		print_tool_row(&tools[i].export, what, ", scrape");
		print_tool_row(&tools[i].top, "kvmstats top --batch",
			       ", refresh");
		if (tools[i].oneshot.have)
			print_tool_row(&tools[i].oneshot, "kvmstats export",
				       ", whole run");
		if (tools[i].export.have)
			printf("  %-34s %10.0f kB (peak %.0f kB; %ld bytes a scrape)\n",
			       "export --listen resident set", tools[i].rss_kb,
			       tools[i].hwm_kb, tools[i].bytes);
	}
	print_growth();
	printf("\n");
	fflush(stdout);
}

/* Machine-readable copies of the tables, for the plot. */
static void write_data(void)
{
	const char *dir = getenv("KVMSTATS_ARTIFACTS");
	double per[NR_GROWTH_ROWS][NR_GROWTH];
	char path[PATH_MAX];
	FILE *f;
	int i, r;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/sweep.dat", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f,
			"# vms debugfs_us single_us batched_us native_us native_rr_us native_one_us\n");
		for (i = 0; i < nr_sweeps; i++)
			fprintf(f, "%d %.3f %.3f %.3f %.3f %.3f %.3f\n",
				sweeps[i].k, sweeps[i].ns[M_DEBUGFS] / 1000,
				sweeps[i].ns[M_SINGLE] / 1000,
				sweeps[i].ns[M_BATCHED] / 1000,
				sweeps[i].ns[M_NATIVE] / 1000,
				sweeps[i].ns[M_NATIVE_RR] / 1000,
				sweeps[i].ns[M_NATIVE_ONE] / 1000);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/list.dat", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "# idle procs fds median_ms min_ms\n");
		for (i = 0; i < nr_lists; i++)
			fprintf(f, "%d %ld %ld %.4f %.4f\n", lists[i].idle,
				lists[i].procs, lists[i].fds, lists[i].ms,
				lists[i].lo);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/vlist.dat", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "# vms procs fds median_ms min_ms\n");
		for (i = 0; i < nr_vlists; i++)
			fprintf(f, "%d %ld %ld %.4f %.4f\n", vlists[i].vms,
				vlists[i].procs, vlists[i].fds, vlists[i].ms,
				vlists[i].lo);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/lone.dat", dir);
	f = fopen(path, "w");
	if (f) {
		fprintf(f,
			"# vms list_pidfd_us list_pidfd_min_us list_vms_us\n");
		for (i = 0; i < NR_LONE; i++)
			fprintf(f, "%d %.2f %.2f %.2f\n", lone[i].v,
				lone[i].pidfd_us, lone[i].pidfd_lo,
				lone[i].list_us);
		fclose(f);
	}
	/* Ratios to the smallest size, "nan" where not measured. */
	snprintf(path, sizeof(path), "%s/growth.dat", dir);
	f = fopen(path, "w");
	if (f) {
		for (r = 0; r < NR_GROWTH_ROWS; r++)
			growth_values(r, per[r]);
		fprintf(f,
			"# vcpus read_batch pread read_batch_shared_buffers read_batch_same_files list_vms list_vms_above_empty list_pidfd_one_process export_cpu rss top_cpu\n");
		for (i = 0; i < NR_GROWTH; i++) {
			fprintf(f, "%d", growth_sizes[i] * NR_VCPUS);
			for (r = 0; r < NR_GROWTH_ROWS; r++)
				fprintf(f, " %.4f", per[r][i] / per[r][0]);
			fprintf(f, "\n");
		}
		fclose(f);
	}
}

/* Call and return costs depend on these; TCG pays for every extra branch. */
static void print_mitigations(void)
{
	static const char *const v[] = {
		"spectre_v2",
		"retbleed",
		"spec_rstack_overflow",
	};
	char path[128], line[256];
	unsigned int i;
	FILE *f;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/vulnerabilities/%s", v[i]);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f))
			printf("# guest %s: %s", v[i], line);
		fclose(f);
	}
}

static bool is_tool_size(int k)
{
	int i;

	for (i = 0; i < NR_TOOL; i++)
		if (tool_sizes[i] == k)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns();
	struct rlimit rl;
	int c, i, k;

	while ((c = getopt(argc, argv, "qlsnt:")) != -1) {
		switch (c) {
		case 'q':
			quick = true;
			break;
		case 'l':
			list_only = true;
			break;
		case 's':
			sweep_only = true;
			break;
		case 'n':
			do_trace = false;
			break;
		case 't':
			tool_path = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: kvmstats-bench [-q] [-l] [-s] [-n] [-t TOOL]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	main_pid = getpid();
	/* 250 VMs are 1250 stats fds, and 500 pipes to their VMMs. */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	start_zygote();
	kvmfd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvmfd < 0)
		die("/dev/kvm: %s", strerror(errno));
	devfd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	if (devfd < 0)
		die(KVMSTATS_DEVICE ": %s", strerror(errno));

	{
		FILE *v = fopen("/proc/sys/kernel/osrelease", "r");
		char rel[128] = "?";

		if (v && fgets(rel, sizeof(rel), v))
			rel[strcspn(rel, "\n")] = 0;
		if (v)
			fclose(v);
		printf("bench_kernel=%s\n", rel);
		printf("bench_cpus=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
	}
	print_mitigations();

	/*
	 * Every child VMM first, without a VM: the processes on the host are
	 * then the same at every level.  KVM flips a static key (preempt
	 * notifiers) when the number of VMs goes 0 -> 1 or 1 -> 0, which
	 * under multi-threaded TCG can crash the guest (tests/suite/
	 * FINDINGS.md): the harness's ksg_pin holds the key, and child 0's VM
	 * comes first and stays to the end.
	 */
	for (i = 0; i < MAX_VMS; i++)
		start_child(&kids[i]);
	nr_kids = MAX_VMS;
	printf("# started %d child VMMs in %.1f s\n", nr_kids,
	       (now_ns() - t0) / 1e9);
	vm_list = calloc(1, sizeof(*vm_list) + 1024 * sizeof(vm_list->vms[0]));
	if (!sweep_only)
		measure_list_level(0);
	grow_vms(1);
	if (!list_only && !sweep_only)
		bench_pread();

	for (i = 1; i < NR_LEVELS; i++) {
		k = list_levels[i];
		if (quick && k == 4)
			continue;
		grow_vms(k);
		settle();
		if (!sweep_only)
			measure_list_level(k);
		if (list_only)
			continue;
		bench_sweep_size(&sweeps[nr_sweeps++], k);
		if (is_tool_size(k) && !sweep_only)
			bench_tool(k);
	}
	if (sweep_only) {
		settle();
		bench_growth();
		growth_lines();
		printf("# total %.0f s\n", (now_ns() - t0) / 1e9);
		return 0;
	}
	settle();
	if (!list_only)
		bench_growth();
	bench_list();
	bench_lone();
	if (!list_only)
		bench_release();
	print_table();
	growth_lines();
	write_data();
	printf("# total %.0f s\n", (now_ns() - t0) / 1e9);
	fflush(stdout);

	/* The idle processes and the VMMs die with us (PDEATHSIG). */
	return 0;
}
