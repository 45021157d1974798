// SPDX-License-Identifier: GPL-2.0-only
/*
 * Seeded ioctl and file-operation fuzzer for /dev/kvmstats and its stats fds.
 *
 * Every call gets a random action: one of our ioctls or a command near ours
 * (other numbers, sizes and directions of magic 0xBE, KVM's 0xAE), with
 * random sizes, random pointers (valid, misaligned, NULL, unmapped, kernel
 * half, non-canonical, straddling a guard page, read-only) and random
 * pids, fds, vCPU indexes, flags and reserved fields.  The (pid, fd) pairs
 * include real VMs (ours, a dup, a child VMM's, a copy of the child's VM fd),
 * vCPU fds, /dev/kvm, eventfd, epoll, timerfd, pipes, stats fds and freshly
 * closed fds.  Stats fds get random read/pread/lseek/mmap/write/ioctl/poll.
 *
 * An oracle predicts the result wherever the documentation determines it
 * (e.g. flags != 0 -> EINVAL, an fd that is not open -> EBADF) and accepts
 * the documented set elsewhere; READ_BATCH ops are compared with pread(2)
 * on the same arguments, since the header promises the same bytes and the
 * same per-op errors.  Stats fds the fuzzer makes are counted against the
 * module's live_files and, independently of the module, against the
 * kvmstats files /proc shows in every fd table; the kernel log must stay
 * clean.
 *
 * Replay: KVMSTATS_FUZZ_SEED=<printed seed> (and KVMSTATS_FUZZ_CALLS=<n>).
 * Size: 10^5 calls, 10^6 with KVMSTATS_LONG=1.
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "fault.h"
#include "proc_files.h"
#include "rel_util.h"

#define PAGE	    4096ul
#define POOL_MAX    12 /* kvmstats stats fds kept open */
#define BUF_PAGES   16 /* data buffers before their guard page */
#define OPS_PAGES   33 /* room for KVMSTATS_BATCH_MAX ops + slack */
#define MAX_REPORTS 25

/* Allowed outcomes: a bit per errno we care about, bit 0 for success. */
#define R_OK_	    (1ull << 0)
#define R(e)	    (1ull << (e))
#define R_ANY_GETFD (R_OK_ | R(ESRCH) | R(EBADF) | R(EINVAL) | R(ENOENT))

static int dev;
static struct rng rng;
static uint64_t call_nr;
static unsigned long user_max; /* highest valid user address */

/* Memory arenas. */
static uint8_t *sarea;	     /* one RW page + guard: ioctl structs */
static uint8_t *ro_w, *ro_r; /* one page: RW alias and RO view */
static uint8_t *bufs;	     /* BUF_PAGES RW + guard: read buffers */
static uint8_t *opsarea;     /* OPS_PAGES RW + guard: READ_BATCH ops */

/* The cast. */
static struct vm *vm;
static struct child_vmm child;
static pid_t thread_tid, reaped_pid, self_pid;
static int vm_dup, native_vm_stats, native_vcpu_stats;
static int self_pidfd, child_pidfd, impostor_fd;
static int other_fds[24], nr_other;
static int closed_fds[8], nr_closed;
static long pid_max;
static struct kvm_stats_header vm_hdr, vcpu_hdr;

/* Expected LIST_VMS content. */
static struct kvmstats_vm expect_list[8];
static int expect_nr;

struct pooled {
	int fd;
	bool vcpu;
	loff_t fpos;		 /* where read(2) continues */
	struct stats_blob *blob; /* contents at creation */
};
static struct pooled pool[POOL_MAX];
static int pool_nr;

/* Statistics per action. */
enum act {
	A_GETFD,
	A_LIST,
	A_BATCH,
	A_VERSION,
	A_OTHER_CMD,
	A_FILEOP,
	A_POOL,
	A_NR
};
static const char *const act_name[A_NR] = {
	"GET_STATS_FD",	   "LIST_VMS",	     "READ_BATCH",
	"GET_API_VERSION", "other commands", "stats fd file operations",
	"stats fd churn",
};
static unsigned long act_calls[A_NR], act_bad[A_NR];
static unsigned long fds_made, batch_ops, batch_mismatch, live_bad, proc_bad;
static unsigned long reports;

static void bad(enum act a, const char *fmt, ...) __printf(2, 3);
static void bad(enum act a, const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	act_bad[a]++;
	if (reports++ >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tap_diag("call %llu (%s): %s", (unsigned long long)call_nr, act_name[a],
		 msg);
}

/*
 * One sample, at call @done, of a count of the open stats files (@what,
 * @got) against the pool's: a difference is counted in *@bad and reported.
 */
static void sample_open_files(unsigned long done, const char *what, long got,
			      unsigned long *bad)
{
	if (got == pool_nr)
		return;
	(*bad)++;
	if (reports++ < MAX_REPORTS)
		tap_diag("call %lu: %s %ld, we hold %d", done, what, got,
			 pool_nr);
}

static const char *res_str(long r, char *buf, size_t len)
{
	if (r >= 0)
		snprintf(buf, len, "%ld", r);
	else
		snprintf(buf, len, "-%s", strerrorname_np(-r) ?: "?");
	return buf;
}

static bool allowed(uint64_t set, long r)
{
	if (r >= 0)
		return set & R_OK_;
	if (-r >= 64)
		return false;
	return set & R(-r);
}

/* ---- pointers ---- */

enum ptrk {
	PK_VALID,
	PK_MISALIGNED,
	PK_NULL,
	PK_UNMAPPED,
	PK_KERNEL,
	PK_NONCANON,
	PK_STRADDLE,
	PK_RDONLY,
	PK_NR
};

static const uint64_t kernel_addrs[] = {
	0xffff888000000000ull, 0xffffffff81000000ull, 0xffffc90000000000ull,
	0xffffea0000000000ull, 0xfffffffffffff000ull, 0xffffffffffffffffull,
	0xffff800000000000ull, 0xffffffffff600000ull,
};

static enum ptrk pick_ptrk(void)
{
	uint64_t x = rng_below(&rng, 100);

	if (x < 62)
		return PK_VALID;
	if (x < 70)
		return PK_MISALIGNED;
	if (x < 75)
		return PK_NULL;
	if (x < 80)
		return PK_UNMAPPED;
	if (x < 86)
		return PK_KERNEL;
	if (x < 89)
		return PK_NONCANON;
	if (x < 95)
		return PK_STRADDLE;
	return PK_RDONLY;
}

static uint64_t kernel_addr(void)
{
	uint64_t a = kernel_addrs[rng_below(
		&rng, sizeof(kernel_addrs) / sizeof(kernel_addrs[0]))];

	/* An offset, but never one that wraps around to user addresses. */
	if (a < 0xfffffffffffff000ull && rng_chance(&rng, 50))
		a += rng_below(&rng, 4096) & ~7ull;
	return a;
}

/*
 * Place a struct of @size bytes with contents @src for an ioctl argument.
 * Returns the address to pass; *@readable is how many leading bytes the
 * kernel can read, *@writable how many it can write (SIZE_MAX: plenty).
 */
static uint64_t place_struct(enum ptrk k, const void *src, size_t size,
			     size_t *readable, size_t *writable)
{
	uint8_t *p;
	size_t off, n;

	switch (k) {
	case PK_VALID:
	case PK_MISALIGNED:
		off = (k == PK_VALID ?
			       8 * rng_below(&rng, 16) :
			       1 + rng_below(&rng, 7) + 8 * rng_below(&rng, 8));
		p = sarea + off;
		memcpy(p, src, size);
		*readable = *writable = PAGE - off;
		return (uint64_t)(uintptr_t)p;
	case PK_STRADDLE:
		n = 1 + rng_below(&rng, size > 1 ?
						size - 1 :
						1); /* bytes before the guard */
		p = sarea + PAGE - n;
		memcpy(p, src, n);
		*readable = *writable = n;
		return (uint64_t)(uintptr_t)p;
	case PK_RDONLY:
		off = 8 * rng_below(&rng, 32);
		memcpy(ro_w + off, src, size);
		*readable = PAGE - off;
		*writable = 0;
		return (uint64_t)(uintptr_t)(ro_r + off);
	case PK_NULL:
		*readable = *writable = 0;
		return 0;
	case PK_UNMAPPED:
		*readable = *writable = 0;
		return (uint64_t)(uintptr_t)bad_address() +
		       8 * rng_below(&rng, 64);
	case PK_KERNEL:
		*readable = *writable = 0;
		return kernel_addr();
	default:
		*readable = *writable = 0;
		return rng_chance(&rng, 50) ?
			       0x0000800000000000ull :
			       0x8000000000000000ull +
				       8 * rng_below(&rng, 1 << 20);
	}
}

/*
 * A user buffer for reads.  *@avail is how many bytes the kernel can write
 * there; *@access_ok says whether access_ok() passes for @len bytes: -1
 * when that depends on the kernel (addresses between the user limit and
 * the kernel half).
 */
static uint64_t place_buf(enum ptrk k, uint64_t len, size_t *avail,
			  int *access_ok)
{
	uint64_t a;
	size_t off;

	switch (k) {
	case PK_VALID:
	case PK_MISALIGNED:
		off = rng_below(&rng, BUF_PAGES * PAGE);
		if (k == PK_VALID)
			off &= ~7ul;
		a = (uint64_t)(uintptr_t)(bufs + off);
		*avail = BUF_PAGES * PAGE - off;
		break;
	case PK_STRADDLE:
		off = BUF_PAGES * PAGE - 1 - rng_below(&rng, 5000);
		a = (uint64_t)(uintptr_t)(bufs + off);
		*avail = BUF_PAGES * PAGE - off;
		break;
	case PK_RDONLY:
		a = (uint64_t)(uintptr_t)ro_r + rng_below(&rng, PAGE);
		*avail = 0;
		break;
	case PK_NULL:
		a = 0;
		*avail = 0;
		break;
	case PK_UNMAPPED:
		a = (uint64_t)(uintptr_t)bad_address() + rng_below(&rng, PAGE);
		*avail = 0;
		break;
	case PK_KERNEL:
		*avail = 0;
		*access_ok = 0;
		return kernel_addr();
	default:
		a = rng_chance(&rng, 50) ?
			    0x0000800000000000ull :
			    0x8000000000000000ull + rng_below(&rng, 1 << 20);
		*avail = 0;
		*access_ok = a >= 0x8000000000000000ull ? 0 : -1;
		return a;
	}
	*access_ok = a + len >= a && a + len <= user_max + 1;
	return a;
}

/* ---- the oracle's view of fd tables ---- */

enum fdkind { FK_NONE, FK_VM, FK_OTHER };

static enum fdkind fd_kind(pid_t pid, int fd)
{
	char path[64], link[128];
	ssize_t n;

	if (fd < 0)
		return FK_NONE;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return FK_NONE;
	link[n] = 0;
	/* The guest helper's impostor is named like a VM file. */
	if (pid == self_pid && fd == impostor_fd)
		return FK_OTHER;
	return strcmp(link, "anon_inode:kvm-vm") ? FK_OTHER : FK_VM;
}

/*
 * One more fd for the zoo pick_fd() draws from.  Bounded: a write past the
 * array lands on the variables after it (on arm64, the pidfds' numbers).
 */
static void add_other(int fd)
{
	if (nr_other == (int)(sizeof(other_fds) / sizeof(other_fds[0])))
		tap_bail("the fd zoo holds %d fds: make other_fds larger",
			 nr_other);
	other_fds[nr_other++] = fd;
}

/* Every VM in this guest during the fuzz has exactly this many vCPUs. */
#define FUZZ_VCPUS 2

static int pick_fd(void)
{
	uint64_t x = rng_below(&rng, 100);

	if (x < 14)
		return rng_chance(&rng, 50) ? vm->fd : vm_dup;
	if (x < 20)
		return child.vm_fd;
	if (x < 26)
		return child.info.vm_fd; /* a number in the child */
	if (x < 30)
		return vm->vcpus[rng_below(&rng, vm->nr_vcpus)]->fd;
	if (x < 34)
		return child.info.vcpu_fds[rng_below(&rng, FUZZ_VCPUS)];
	if (x < 50)
		return other_fds[rng_below(&rng, nr_other)];
	if (x < 58 && pool_nr)
		return pool[rng_below(&rng, pool_nr)].fd;
	if (x < 66 && nr_closed)
		return closed_fds[rng_below(&rng, nr_closed)];
	if (x < 72)
		return -(int)rng_below(&rng, 4) - 1;
	if (x < 76)
		return rng_chance(&rng, 50) ? INT_MAX : INT_MIN;
	if (x < 80)
		return (int)rng_next(&rng);
	return (int)rng_below(&rng, 64);
}

static pid_t pick_pid(void)
{
	uint64_t x = rng_below(&rng, 100);

	if (x < 25)
		return 0;
	if (x < 40)
		return self_pid;
	if (x < 62)
		return child.info.pid;
	if (x < 66)
		return 1;
	if (x < 71)
		return thread_tid;
	if (x < 75)
		return reaped_pid;
	if (x < 80)
		return -(pid_t)rng_below(&rng, 100) - 1;
	if (x < 85)
		return rng_chance(&rng, 50) ?
			       INT_MAX :
			       (pid_t)(pid_max + rng_below(&rng, 1000));
	return (pid_t)rng_below(&rng, 400) + 1;
}

/* What GET_STATS_FD may return for @q (whose bytes were all readable). */
static uint64_t getfd_oracle(const struct kvmstats_fd_request *q)
{
	pid_t pid = q->pid;
	enum fdkind k;

	if ((q->flags & ~KVMSTATS_FD_PIDFD) || q->reserved[0] ||
	    q->reserved[1] || q->vcpu < -1)
		return R(EINVAL);
	if (q->flags & KVMSTATS_FD_PIDFD) {
		/* @pid is an fd of ours: a pidfd, or not open, or not one. */
		if (q->pid == self_pidfd)
			pid = self_pid;
		else if (q->pid == child_pidfd)
			pid = child.info.pid;
		else
			return fd_kind(self_pid, q->pid) == FK_NONE ? R(EBADF) :
								      R(EINVAL);
	} else if (pid == 0) {
		pid = self_pid;
	}
	if (pid < 0 || pid >= pid_max || pid == thread_tid || pid == reaped_pid)
		return R(ESRCH);
	if (pid != self_pid && pid != child.info.pid && pid != 1)
		return R_ANY_GETFD; /* some process of the guest, or none */
	/*
	 * The guest's init opens and closes fds of its own (command
	 * substitutions, the harness's timers) while we look: its fds are
	 * open or not at the moment of the call, never VMs.
	 */
	if (pid == 1)
		return q->fd < 0 ? R(EBADF) : R(EBADF) | R(EINVAL);
	k = fd_kind(pid, q->fd);
	if (k == FK_NONE)
		return R(EBADF);
	if (k == FK_OTHER)
		return R(EINVAL);
	if (q->vcpu >= FUZZ_VCPUS)
		return R(ENOENT);
	return R_OK_;
}

/* ---- the pool of kvmstats stats fds ---- */

static void pool_add(int fd, bool vcpu)
{
	struct pooled *p;

	if (pool_nr == POOL_MAX) {
		close(fd);
		return;
	}
	p = &pool[pool_nr];
	if (!p->blob)
		p->blob = malloc(sizeof(*p->blob));
	if (!p->blob)
		tap_bail("out of memory");
	if (__stats_read_all(fd, p->blob) <= 0)
		tap_bail("cannot read a fresh stats fd %d", fd);
	p->fd = fd;
	p->vcpu = vcpu;
	p->fpos = 0;
	pool_nr++;
}

static void note_closed(int fd)
{
	if (nr_closed < (int)(sizeof(closed_fds) / sizeof(closed_fds[0])))
		closed_fds[nr_closed++] = fd;
	else
		closed_fds[rng_below(&rng, nr_closed)] = fd;
}

static void pool_close(int i)
{
	struct stats_blob *b = pool[i].blob;

	close(pool[i].fd);
	note_closed(pool[i].fd);
	pool[i] = pool[pool_nr - 1];
	pool[pool_nr - 1].blob = b;
	pool_nr--;
}

static struct pooled *pool_find(int fd)
{
	int i;

	for (i = 0; i < pool_nr; i++)
		if (pool[i].fd == fd)
			return &pool[i];
	return NULL;
}

/* Non-data bytes of @p at [off, off + n) must match its creation blob. */
static bool static_bytes_match(const struct pooled *p, uint64_t off,
			       const uint8_t *got, size_t n)
{
	const struct kvm_stats_header *h = stats_header(p->blob);
	size_t end = off + n;

	if (end > h->data_offset)
		end = h->data_offset;
	if (off >= end)
		return true;
	return !memcmp(got, p->blob->data + off, end - off);
}

/* A new stats fd from GET_STATS_FD: check what it is, then keep or close. */
static void check_new_fd(int fd, const struct kvmstats_fd_request *q)
{
	const struct kvm_stats_header *want = q->vcpu < 0 ? &vm_hdr : &vcpu_hdr;
	struct kvm_stats_header h;
	int fdfl = fcntl(fd, F_GETFD), fl = fcntl(fd, F_GETFL);

	fds_made++;
	if (!(fdfl & FD_CLOEXEC) || (fl & O_ACCMODE) != O_RDONLY)
		bad(A_GETFD, "new stats fd %d: fd flags %#x, file flags %#x",
		    fd, fdfl, fl);
	if (pread(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    memcmp(&h, want, sizeof(h)))
		bad(A_GETFD, "new stats fd for vcpu %d has a wrong header",
		    q->vcpu);
	if (pool_nr < POOL_MAX && rng_chance(&rng, 30))
		pool_add(fd, q->vcpu >= 0);
	else {
		close(fd);
		note_closed(fd);
	}
}

/* ---- actions ---- */

static void act_getfd(void)
{
	struct kvmstats_fd_request q = { 0 };
	size_t readable, writable;
	enum ptrk k = pick_ptrk();
	uint64_t arg, set;
	char b1[32];
	long r;

	q.pid = pick_pid();
	q.fd = pick_fd();
	switch (rng_below(&rng, 10)) {
	case 0:
		q.vcpu = (int)rng_next(&rng);
		break;
	case 1:
		q.vcpu = -2 - (int)rng_below(&rng, 3);
		break;
	case 2:
		q.vcpu = FUZZ_VCPUS + (int)rng_below(&rng, 20);
		break;
	default:
		q.vcpu = (int)rng_below(&rng, FUZZ_VCPUS + 1) - 1;
		break;
	}
	if (rng_chance(&rng, 12))
		q.flags = 1u << rng_below(&rng, 32);
	if (rng_chance(&rng, 6))
		q.reserved[rng_below(&rng, 2)] = 1ull << rng_below(&rng, 64);
	if (rng_chance(&rng, 2))
		q.flags = (uint32_t)rng_next(&rng);
	if (rng_chance(&rng, 15)) {
		/* By pidfd: ours, the child's, or any other fd. */
		q.flags = KVMSTATS_FD_PIDFD;
		switch (rng_below(&rng, 4)) {
		case 0:
			q.pid = self_pidfd;
			break;
		case 1:
			q.pid = child_pidfd;
			break;
		default:
			q.pid = pick_fd();
			break;
		}
	}

	arg = place_struct(k, &q, sizeof(q), &readable, &writable);
	r = __test_ioctl(dev, KVMSTATS_GET_STATS_FD, arg);
	set = readable < sizeof(q) ? R(EFAULT) : getfd_oracle(&q);
	if (!allowed(set, r))
		bad(A_GETFD,
		    "pid %d fd %d vcpu %d flags %#x reserved %#llx/%#llx "
		    "ptr kind %d: got %s, allowed mask %#llx",
		    q.pid, q.fd, q.vcpu, q.flags,
		    (unsigned long long)q.reserved[0],
		    (unsigned long long)q.reserved[1], k,
		    res_str(r, b1, sizeof(b1)), (unsigned long long)set);
	if (r >= 0)
		check_new_fd((int)r, &q);
}

/* KVMSTATS_LIST_PIDFD: our pidfd, the child's, or any other fd. */
static void act_list_pidfd(void)
{
	struct kvmstats_pidfd_list *l = (void *)bufs;
	struct kvmstats_vm want[8];
	uint32_t room = rng_below(&rng, 3);
	int i, nwant = 0;
	uint64_t set;
	pid_t pid = 0;
	char b1[32];
	long r;

	memset(l, 0xa5, 4096);
	memset(l, 0, sizeof(*l));
	switch (rng_below(&rng, 3)) {
	case 0:
		l->pidfd = self_pidfd;
		pid = self_pid;
		break;
	case 1:
		l->pidfd = child_pidfd;
		pid = child.info.pid;
		break;
	default:
		l->pidfd = pick_fd();
		if (l->pidfd == self_pidfd)
			pid = self_pid;
		else if (l->pidfd == child_pidfd)
			pid = child.info.pid;
		break;
	}
	if (rng_chance(&rng, 10))
		l->flags = 1u << rng_below(&rng, 32);
	if (rng_chance(&rng, 10))
		l->reserved = 1u << rng_below(&rng, 32);
	l->nr = room;
	for (i = 0; pid && i < expect_nr; i++)
		if (expect_list[i].pid == pid)
			want[nwant++] = expect_list[i];

	r = __test_ioctl(dev, KVMSTATS_LIST_PIDFD, (uint64_t)(uintptr_t)l);
	if (l->flags || l->reserved)
		set = R(EINVAL);
	else if (!pid)
		set = fd_kind(self_pid, l->pidfd) == FK_NONE ? R(EBADF) :
							       R(EINVAL);
	else
		set = room < (uint32_t)nwant ? R(E2BIG) : R_OK_;
	if (!allowed(set, r)) {
		bad(A_LIST,
		    "LIST_PIDFD pidfd %d flags %#x reserved %#x: got %s, allowed mask %#llx",
		    l->pidfd, l->flags, l->reserved, res_str(r, b1, sizeof(b1)),
		    (unsigned long long)set);
		return;
	}
	if ((r == 0 || r == -E2BIG) && l->nr != (uint32_t)nwant)
		bad(A_LIST, "LIST_PIDFD nr out %u, expected %d", l->nr, nwant);
	if (r == 0 && memcmp(l->vms, want, nwant * sizeof(want[0])))
		bad(A_LIST, "LIST_PIDFD entries differ from the expected list");
}

static void act_list(void)
{
	struct kvmstats_vm_list hdr = { 0 };
	size_t readable, writable, room_bytes;
	enum ptrk k = pick_ptrk();
	uint64_t arg, set;
	struct kvmstats_vm_list *out;
	char b1[32];
	uint32_t fit;
	long r;

	switch (rng_below(&rng, 6)) {
	case 0:
		hdr.nr = 0;
		break;
	case 1:
		hdr.nr = (uint32_t)rng_next(&rng);
		break;
	case 2:
		hdr.nr = 65536 + (uint32_t)rng_below(&rng, 3) - 1;
		break;
	default:
		hdr.nr = (uint32_t)rng_below(&rng, 2 * expect_nr + 2);
		break;
	}
	if (rng_chance(&rng, 12))
		hdr.flags = 1u << rng_below(&rng, 32);

	/* The list goes in the big buffer area for valid pointers. */
	if (k == PK_VALID || k == PK_MISALIGNED) {
		size_t off = rng_below(&rng, 64) * 8 +
			     (k == PK_MISALIGNED ? 1 + rng_below(&rng, 7) : 0);

		memset(bufs + off, 0xa5, 4096);
		memcpy(bufs + off, &hdr, sizeof(hdr));
		arg = (uint64_t)(uintptr_t)(bufs + off);
		readable = writable = BUF_PAGES * PAGE - off;
	} else if (k == PK_STRADDLE) {
		/* Header readable or not, entries into the guard page. */
		size_t n = rng_chance(&rng, 50) ?
				   sizeof(hdr) + 16 * rng_below(&rng, 2) :
				   1 + rng_below(&rng, sizeof(hdr) - 1);
		uint8_t *p = bufs + BUF_PAGES * PAGE - n;

		memcpy(p, &hdr, n < sizeof(hdr) ? n : sizeof(hdr));
		arg = (uint64_t)(uintptr_t)p;
		readable = writable = n;
	} else {
		arg = place_struct(k, &hdr, sizeof(hdr), &readable, &writable);
	}

	if (rng_chance(&rng, 25)) {
		act_list_pidfd();
		return;
	}
	r = __test_ioctl(dev, KVMSTATS_LIST_VMS, arg);
	fit = hdr.nr < (uint32_t)expect_nr ? hdr.nr : (uint32_t)expect_nr;
	room_bytes = sizeof(hdr) + (size_t)fit * sizeof(struct kvmstats_vm);
	if (readable < sizeof(hdr))
		set = R(EFAULT);
	else if (hdr.flags)
		set = R(EINVAL);
	else if (writable < room_bytes)
		set = R(EFAULT);
	else if (hdr.nr < (uint32_t)expect_nr)
		set = R(E2BIG);
	else
		set = R_OK_;
	if (!allowed(set, r)) {
		bad(A_LIST,
		    "nr %u flags %#x ptr kind %d: got %s, allowed mask %#llx",
		    hdr.nr, hdr.flags, k, res_str(r, b1, sizeof(b1)),
		    (unsigned long long)set);
		return;
	}
	out = (struct kvmstats_vm_list *)(uintptr_t)arg;
	if ((r == 0 || r == -E2BIG) && out->nr != (uint32_t)expect_nr)
		bad(A_LIST, "nr out %u, expected %d", out->nr, expect_nr);
	if (r == 0 &&
	    memcmp(out->vms, expect_list, expect_nr * sizeof(expect_list[0])))
		bad(A_LIST, "entries differ from the expected list");
}

/* One op of a batch, and its own copy of what we asked. */
struct opdesc {
	enum ptrk bk;
	size_t avail;
	int access_ok;
};

static int pick_batch_fd(void)
{
	if (pool_nr && rng_chance(&rng, 70))
		return pool[rng_below(&rng, pool_nr)].fd;
	return pick_fd();
}

static void act_batch(void)
{
	static struct kvmstats_read_op want[KVMSTATS_BATCH_MAX];
	static struct opdesc od[KVMSTATS_BATCH_MAX];
	static uint8_t saved[8192];
	struct kvmstats_read_batch b = { 0 };
	size_t readable, writable, ops_room = 0;
	enum ptrk bk = pick_ptrk(), ok_ = pick_ptrk();
	struct kvmstats_read_op *ops;
	uint64_t arg, set, x;
	bool ops_rw = false;
	char b1[32], b2[32];
	uint32_t i, nr;
	long r;

	x = rng_below(&rng, 100);
	if (x < 5)
		nr = 0;
	else if (x < 75)
		nr = 1 + rng_below(&rng, 8);
	else if (x < 88)
		nr = 9 + rng_below(&rng, 120);
	else if (x < 89)
		nr = KVMSTATS_BATCH_MAX;
	else
		nr = KVMSTATS_BATCH_MAX + 1 + rng_below(&rng, 1u << 31);
	b.nr = nr;
	if (rng_chance(&rng, 8))
		b.flags = 1u << rng_below(&rng, 32);
	if (rng_chance(&rng, 5))
		b.reserved[rng_below(&rng, 2)] = 1ull << rng_below(&rng, 64);

	/* The ops array. */
	if (nr > KVMSTATS_BATCH_MAX)
		nr = 0; /* rejected before any op: build none */
	switch (ok_) {
	case PK_VALID:
	case PK_MISALIGNED:
	case PK_STRADDLE: {
		size_t total = OPS_PAGES * PAGE,
		       need = (size_t)nr * sizeof(*ops);
		size_t off;

		if (ok_ == PK_STRADDLE && nr)
			off = total - need + 8 * rng_below(&rng, nr * 4 + 1);
		else
			off = (total - need > 64 ? rng_below(&rng, 8) * 8 : 0) +
			      (ok_ == PK_MISALIGNED && total - need > 64 ?
				       1 + rng_below(&rng, 7) :
				       0);
		if (off > total)
			off = total;
		ops = (struct kvmstats_read_op *)(opsarea + off);
		ops_room = (total - off) / sizeof(*ops);
		ops_rw = true;
		break;
	}
	default: {
		/* Read-only or unusable: build the ops in the RO page's alias. */
		size_t n;

		ops = (struct kvmstats_read_op *)ro_w;
		n = PAGE / sizeof(*ops);
		ops_room = ok_ == PK_RDONLY ? n : 0;
		break;
	}
	}

	for (i = 0; i < nr; i++) {
		struct kvmstats_read_op op = { 0 };

		op.fd = pick_batch_fd();
		if (rng_chance(&rng, 6))
			op.flags = 1u << rng_below(&rng, 32);
		switch (rng_below(&rng, 12)) {
		case 0:
			op.offset = rng_next(&rng);
			break;
		case 1:
			op.offset = (uint64_t)LLONG_MAX - rng_below(&rng, 4096);
			break;
		case 2:
			op.offset = 5000 + rng_below(&rng, 100000);
			break;
		default:
			op.offset = rng_below(&rng, 4200);
			break;
		}
		switch (rng_below(&rng, 10)) {
		case 0:
			op.len = (uint32_t)rng_next(&rng);
			break;
		case 1:
			op.len = 0;
			break;
		default:
			op.len = (uint32_t)rng_below(&rng, 4500);
			break;
		}
		od[i].bk = pick_ptrk();
		op.buf = place_buf(od[i].bk, op.len, &od[i].avail,
				   &od[i].access_ok);
		op.result = (int32_t)0x5a5a5a5a;
		want[i] = op;
		if (ops_rw && i < ops_room)
			ops[i] = op;
		else if (!ops_rw && i < PAGE / sizeof(op))
			((struct kvmstats_read_op *)ro_w)[i] = op;
	}
	if (!ops_rw && ok_ == PK_RDONLY)
		b.ops = (uint64_t)(uintptr_t)ro_r;
	else if (ops_rw)
		b.ops = (uint64_t)(uintptr_t)ops;
	else if (ok_ == PK_NULL)
		b.ops = 0;
	else if (ok_ == PK_UNMAPPED)
		b.ops = (uint64_t)(uintptr_t)bad_address();
	else if (ok_ == PK_KERNEL)
		b.ops = kernel_addr();
	else
		b.ops = 0x8000000000000000ull;

	arg = place_struct(bk, &b, sizeof(b), &readable, &writable);
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, arg);

	if (readable < sizeof(b))
		set = R(EFAULT);
	else if (b.flags || b.reserved[0] || b.reserved[1] ||
		 b.nr > KVMSTATS_BATCH_MAX)
		set = R(EINVAL);
	else if (nr == 0)
		set = R_OK_;
	else if (!ops_rw || ops_room < nr)
		set = R(EFAULT);
	else
		set = R_OK_;
	if (!allowed(set, r)) {
		bad(A_BATCH,
		    "nr %u flags %#x reserved %#llx/%#llx ptr kinds %d/%d: "
		    "got %s, allowed mask %#llx",
		    b.nr, b.flags, (unsigned long long)b.reserved[0],
		    (unsigned long long)b.reserved[1], bk, ok_,
		    res_str(r, b1, sizeof(b1)), (unsigned long long)set);
		return;
	}
	if (r != 0)
		return;

	/* Each op against the documentation and against pread(2). */
	for (i = 0; i < nr; i++) {
		const struct kvmstats_read_op *w = &want[i];
		int32_t got = ops[i].result;
		struct pooled *p = pool_find(w->fd);
		bool overlap = false;
		long pr;
		uint32_t j;

		batch_ops++;
		if (w->flags || w->offset > (uint64_t)LLONG_MAX) {
			/* EINVAL; EBADF is as right when the fd is not open either. */
			if (got != -EINVAL &&
			    !(got == -EBADF &&
			      fd_kind(self_pid, w->fd) == FK_NONE))
				bad(A_BATCH,
				    "op %u (fd %d flags %#x offset %#llx): %d, "
				    "expected -EINVAL",
				    i, w->fd, w->flags,
				    (unsigned long long)w->offset, got);
			continue;
		}
		if (!p) {
			int want_r = fd_kind(self_pid, w->fd) == FK_NONE ?
					     -EBADF :
					     -EINVAL;

			if (got != want_r)
				bad(A_BATCH,
				    "op %u (fd %d, not a kvmstats fd): %d, expected %d",
				    i, w->fd, got, want_r);
			continue;
		}
		/* Bytes first (pread below overwrites them), if no other op wrote there. */
		overlap = nr > 16;
		for (j = 0; j < nr && !overlap; j++)
			if (j != i && want[j].buf < w->buf + w->len &&
			    w->buf < want[j].buf + want[j].len)
				overlap = true;
		if (got > 0 && !overlap && od[i].avail >= (size_t)got &&
		    (size_t)got <= sizeof(saved)) {
			memcpy(saved, (void *)(uintptr_t)w->buf, got);
			if (!static_bytes_match(p, w->offset, saved, got))
				bad(A_BATCH,
				    "op %u: bytes differ from the file's", i);
		}
		pr = pread(w->fd, (void *)(uintptr_t)w->buf, w->len,
			   (off_t)w->offset);
		if (pr < 0)
			pr = -errno;
		if (pr != got) {
			/* Counted once, by its own check line, not in act_bad. */
			if (batch_mismatch++ < 8)
				tap_diag(
					"call %llu: op %u (fd %d offset %#llx len %u buf %#llx kind %d): "
					"READ_BATCH %s, pread %s",
					(unsigned long long)call_nr, i, w->fd,
					(unsigned long long)w->offset, w->len,
					(unsigned long long)w->buf, od[i].bk,
					res_str(got, b1, sizeof(b1)),
					res_str(pr, b2, sizeof(b2)));
		}
	}
}

static void act_version(void)
{
	unsigned long arg = rng_chance(&rng, 40) ? 0 :
			    rng_chance(&rng, 50) ? rng_next(&rng) :
						   kernel_addr();
	long r = __test_ioctl(dev, KVMSTATS_GET_API_VERSION, arg);
	long want = arg ? -EINVAL : KVMSTATS_API_VERSION;
	char b1[32];

	if (r != want)
		bad(A_VERSION, "arg %#lx: got %s, expected %ld", arg,
		    res_str(r, b1, sizeof(b1)), want);
}

/* Random bytes for the arguments of commands that have none of ours. */
static uint8_t junk[64];

static unsigned long random_cmd(void)
{
	static const unsigned int dirs[] = {
		_IOC_NONE,
		_IOC_READ,
		_IOC_WRITE,
		_IOC_READ | _IOC_WRITE,
	};
	unsigned int type = rng_chance(&rng, 70) ? KVMSTATS_IO : 0xAE;
	unsigned int nr = rng_chance(&rng, 60) ? rng_below(&rng, 8) :
						 rng_below(&rng, 256);
	unsigned int size = rng_chance(&rng, 50) ?
				    (unsigned int[]){
					    0, 8, 16, 24, 32, 40, 64
				    }[rng_below(&rng, 7)] :
				    rng_below(&rng, 1u << 14);

	return _IOC(dirs[rng_below(&rng, 4)], type, nr, size);
}

static bool is_our_cmd(unsigned long cmd)
{
	return cmd == KVMSTATS_GET_API_VERSION || cmd == KVMSTATS_LIST_VMS ||
	       cmd == KVMSTATS_GET_STATS_FD || cmd == KVMSTATS_READ_BATCH ||
	       cmd == KVMSTATS_LIST_PIDFD || cmd == KVMSTATS_LIST_VCPUS ||
	       cmd == KVMSTATS_GET_SCHEMA_FD;
}

static void act_other_cmd(void)
{
	unsigned long cmd;
	uint64_t arg;
	size_t readable, writable;
	char b1[32];
	long r;

	do
		cmd = random_cmd();
	while (is_our_cmd(cmd));
	arg = place_struct(pick_ptrk(), junk, sizeof(junk), &readable,
			   &writable);
	r = __test_ioctl(dev, cmd, arg);
	*(uint64_t *)junk = rng_next(&rng);
	if (r != -ENOTTY)
		bad(A_OTHER_CMD, "cmd %#lx: got %s, expected -ENOTTY", cmd,
		    res_str(r, b1, sizeof(b1)));
}

/* Expected result of reading @len bytes at @pos of @p into a buffer. */
static uint64_t read_oracle(const struct pooled *p, int64_t pos, uint64_t len,
			    size_t avail, int access_ok, bool is_pread,
			    long *want_n)
{
	uint64_t size = p->blob->size, n;

	*want_n = -1;
	if (is_pread && pos < 0)
		return R(EINVAL);
	n = (uint64_t)pos >= size ? 0 : size - pos;
	if (len < n)
		n = len;
	/* vfs_read(): access_ok() first, then the offset range, then ->read. */
	if (access_ok == 0)
		return R(EFAULT);
	if ((int64_t)((uint64_t)pos + len) < 0)
		return R(EINVAL) | (access_ok < 0 ? R(EFAULT) : 0);
	if (access_ok < 0 && n == 0)
		return R(EFAULT) | R_OK_;
	if (n > avail)
		return R(EFAULT);
	*want_n = n;
	return R_OK_;
}

static void act_fileop(void)
{
	struct pooled *p;
	uint64_t len, set, pos;
	size_t avail;
	int access_ok, fd;
	enum ptrk k;
	long r, want_n;
	char b1[32];

	if (!pool_nr)
		return;
	p = &pool[rng_below(&rng, pool_nr)];
	fd = p->fd;
	len = rng_chance(&rng, 10) ? rng_below(&rng, 1ull << 33) :
				     rng_below(&rng, 4500);
	k = pick_ptrk();

	switch (rng_below(&rng, 12)) {
	case 0:
	case 1: { /* read(2) */
		uint64_t a = place_buf(k, len, &avail, &access_ok);

		set = read_oracle(p, p->fpos, len, avail, access_ok, false,
				  &want_n);
		r = read(fd, (void *)(uintptr_t)a, len);
		r = r < 0 ? -errno : r;
		if (!allowed(set, r) || (want_n >= 0 && r >= 0 && r != want_n))
			bad(A_FILEOP,
			    "read(fd %d at %lld, len %#llx, kind %d): got %s, "
			    "expected %ld (mask %#llx)",
			    fd, (long long)p->fpos, (unsigned long long)len, k,
			    res_str(r, b1, sizeof(b1)), want_n,
			    (unsigned long long)set);
		if (r > 0) {
			if (!static_bytes_match(p, p->fpos,
						(void *)(uintptr_t)a, r))
				bad(A_FILEOP,
				    "read: bytes differ from the file's");
			p->fpos += r;
		}
		break;
	}
	case 2:
	case 3:
	case 4: { /* pread(2) */
		uint64_t a = place_buf(k, len, &avail, &access_ok);

		switch (rng_below(&rng, 8)) {
		case 0:
			pos = rng_next(&rng);
			break;
		case 1:
			pos = (uint64_t)LLONG_MAX - rng_below(&rng, 8192);
			break;
		case 2:
			pos = -(int64_t)rng_below(&rng, 100) - 1;
			break;
		default:
			pos = rng_below(&rng, 4200);
			break;
		}
		set = read_oracle(p, (int64_t)pos, len, avail, access_ok, true,
				  &want_n);
		r = pread(fd, (void *)(uintptr_t)a, len, (off_t)pos);
		r = r < 0 ? -errno : r;
		if (!allowed(set, r) || (want_n >= 0 && r >= 0 && r != want_n))
			bad(A_FILEOP,
			    "pread(fd %d, len %#llx, pos %#llx, kind %d): got "
			    "%s, expected %ld (mask %#llx)",
			    fd, (unsigned long long)len,
			    (unsigned long long)pos, k,
			    res_str(r, b1, sizeof(b1)), want_n,
			    (unsigned long long)set);
		if (r > 0 &&
		    !static_bytes_match(p, pos, (void *)(uintptr_t)a, r))
			bad(A_FILEOP, "pread: bytes differ from the file's");
		break;
	}
	case 5: { /* lseek(2): never moves */
		int whence = rng_below(&rng, 7);
		off_t off = rng_chance(&rng, 50) ?
				    (off_t)rng_below(&rng, 5000) :
				    (off_t)rng_next(&rng);

		r = lseek(fd, off, whence);
		r = r < 0 ? -errno : r;
		if (whence > SEEK_HOLE ? r != -EINVAL : r != p->fpos)
			bad(A_FILEOP,
			    "lseek(fd %d, %lld, %d): got %s, f_pos is %lld", fd,
			    (long long)off, whence, res_str(r, b1, sizeof(b1)),
			    (long long)p->fpos);
		break;
	}
	case 6: { /* mmap(2) */
		int prot = (int)rng_below(&rng, 8);
		int flags = rng_chance(&rng, 50) ? MAP_SHARED : MAP_PRIVATE;
		void *m = mmap(NULL, PAGE * (1 + rng_below(&rng, 2)), prot,
			       flags, fd, rng_below(&rng, 2) * PAGE);

		if (m != MAP_FAILED) {
			bad(A_FILEOP,
			    "mmap(prot %d flags %#x) of a stats fd succeeded",
			    prot, flags);
			munmap(m, PAGE);
		} else if (errno != ENODEV && errno != EACCES &&
			   errno != EPERM) {
			bad(A_FILEOP, "mmap(prot %d flags %#x): errno %d", prot,
			    flags, errno);
		}
		break;
	}
	case 7: { /* write(2), pwrite(2) */
		uint64_t a = place_buf(k, len, &avail, &access_ok);

		bool pw = rng_chance(&rng, 50);

		/* pwrite(2) checks FMODE_PWRITE, which a stats fd lacks, first. */
		r = pw ? pwrite(fd, (void *)(uintptr_t)a, len,
				rng_below(&rng, 4096)) :
			 write(fd, (void *)(uintptr_t)a, len);
		r = r < 0 ? -errno : r;
		if (r != -EBADF && !(pw && r == -ESPIPE))
			bad(A_FILEOP,
			    "%s to a stats fd: got %s, expected -EBADF",
			    pw ? "pwrite" : "write",
			    res_str(r, b1, sizeof(b1)));
		break;
	}
	case 8: { /* ioctl(2) */
		unsigned long cmd = rng_chance(&rng, 30) ?
					    (unsigned long[]){
						    KVMSTATS_GET_API_VERSION,
						    KVMSTATS_LIST_VMS,
						    KVMSTATS_GET_STATS_FD,
						    KVMSTATS_READ_BATCH,
						    KVM_GET_STATS_FD,
						    KVM_GET_API_VERSION,
						    KVM_RUN,
						    KVM_CREATE_VCPU
					    }[rng_below(&rng, 8)] :
					    random_cmd();
		size_t readable, writable;
		uint64_t arg = place_struct(k, junk, sizeof(junk), &readable,
					    &writable);

		r = __test_ioctl(fd, cmd, arg);
		if (r != -ENOTTY)
			bad(A_FILEOP,
			    "ioctl(stats fd, %#lx): got %s, expected -ENOTTY",
			    cmd, res_str(r, b1, sizeof(b1)));
		break;
	}
	case 9: { /* poll(2): no ->poll, so the default mask */
		struct pollfd pfd = { .fd = fd,
				      .events = POLLIN | POLLOUT | POLLPRI };

		r = poll(&pfd, 1, 0);
		if (r != 1 ||
		    (pfd.revents & (POLLIN | POLLOUT)) != (POLLIN | POLLOUT) ||
		    (pfd.revents & (POLLERR | POLLNVAL | POLLHUP)))
			bad(A_FILEOP, "poll: %ld, revents %#x", r, pfd.revents);
		break;
	}
	case 10: { /* epoll: a file without ->poll cannot be added */
		r = epoll_ctl(other_fds[1], EPOLL_CTL_ADD, fd,
			      &(struct epoll_event){ .events = EPOLLIN });
		r = r < 0 ? -errno : r;
		if (r != -EPERM) {
			bad(A_FILEOP,
			    "epoll_ctl(ADD stats fd): got %s, expected -EPERM",
			    res_str(r, b1, sizeof(b1)));
			if (r == 0)
				epoll_ctl(other_fds[1], EPOLL_CTL_DEL, fd,
					  NULL);
		}
		break;
	}
	default: { /* ftruncate/fallocate/fsync-ish: must fail or be harmless */
		r = ftruncate(fd, rng_below(&rng, 8192));
		r = r < 0 ? -errno : r;
		if (r != -EINVAL && r != -EBADF)
			bad(A_FILEOP, "ftruncate(stats fd): got %s",
			    res_str(r, b1, sizeof(b1)));
		break;
	}
	}
}

static void act_pool(void)
{
	if (pool_nr && rng_chance(&rng, 50)) {
		pool_close(rng_below(&rng, pool_nr));
		return;
	}
	if (pool_nr < POOL_MAX) {
		int vcpu = (int)rng_below(&rng, FUZZ_VCPUS + 1) - 1;
		bool theirs = rng_chance(&rng, 50);
		int fd = __kvmstats_get_stats_fd(
			dev, theirs ? child.info.pid : 0,
			theirs ? child.info.vm_fd : vm->fd, vcpu);

		if (fd < 0)
			bad(A_POOL, "GET_STATS_FD(%s VM, vcpu %d): %s",
			    theirs ? "the child's" : "our", vcpu,
			    strerror(-fd));
		else {
			fds_made++;
			pool_add(fd, vcpu >= 0);
		}
	}
}

/*
 * Deterministic regression checks for what the fuzzer found: a READ_BATCH
 * op must fail exactly as pread(2) does when pread fails before reading
 * (access_ok() on the buffer, offset + length past the largest offset),
 * even when there is nothing to copy.
 */
static void regressions(void)
{
	static const struct {
		const char *what;
		uint64_t offset, buf;
		uint32_t len;
	} cases[] = {
		{ "kernel-half buffer at end of file", 1 << 20,
		  0xffff888000000000ull, 64 },
		{ "kernel-half buffer, length 0", 0, 0xffffffff81000000ull, 0 },
		{ "offset + length past the largest offset",
		  (uint64_t)LLONG_MAX - 8, 0, 64 },
	};
	unsigned int i;
	int fd = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kvmstats_read_op op = {
			.fd = fd,
			.offset = cases[i].offset,
			.buf = cases[i].buf ? cases[i].buf :
					      (uint64_t)(uintptr_t)bufs,
			.len = cases[i].len,
		};
		long pr = pread(fd, (void *)(uintptr_t)op.buf, op.len,
				(off_t)op.offset);
		int r = __kvmstats_read_batch(dev, &op, 1);
		char b1[32], b2[32], b3[32];

		pr = pr < 0 ? -errno : pr;
		tap_check(
			r == 0 && op.result == pr,
			"regression: READ_BATCH op with %s fails as pread does "
			"(READ_BATCH %s, op %s, pread %s)",
			cases[i].what, res_str(r, b1, sizeof(b1)),
			res_str(op.result, b2, sizeof(b2)),
			res_str(pr, b3, sizeof(b3)));
	}
	close(fd);
	note_closed(fd);
}

/* ---- setup ---- */

static void *idle_thread(void *arg)
{
	(void)arg;
	__atomic_store_n(&thread_tid, sys_gettid(), __ATOMIC_SEQ_CST);
	for (;;)
		pause();
	return NULL;
}

static void *map_or_bail(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		tap_bail("mmap: %s", strerror(errno));
	return p;
}

static void setup(void)
{
	struct kvmstats_vm *list;
	struct stats_blob *blob;
	pthread_t th;
	int memfd, pfd[2], sv[2], i, n;
	pid_t pid;
	FILE *f;
	char line[4096];

	self_pid = getpid();
	pid_max = rel_read_long("/proc/sys/kernel/pid_max");
	if (pid_max <= 0)
		pid_max = 4194304;
#if defined(__aarch64__)
	/*
	 * arm64's access_ok() takes what lies below 1 << VA_BITS: 48 or
	 * (Debian's 6.12 and later, on a CPU with 52-bit addresses, as
	 * QEMU's max is) 52.  A mapping asked for above 1 << 48 tells which.
	 */
	{
		void *hi =
			mmap((void *)(1ul << 50), PAGE, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			     -1, 0);

		user_max = (1ul << 48) - 1;
		if (hi != MAP_FAILED) {
			user_max = (1ul << 52) - 1;
			munmap(hi, PAGE);
		}
	}
	(void)f;
	(void)line;
#else
	user_max = (1ul << 47) - PAGE - 1;
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && strstr(line, " la57")) {
			user_max = (1ul << 56) - PAGE - 1;
			break;
		}
	if (f)
		fclose(f);
#endif

	sarea = map_or_bail(2 * PAGE, PROT_READ | PROT_WRITE);
	mprotect(sarea + PAGE, PAGE, PROT_NONE);
	bufs = map_or_bail((BUF_PAGES + 1) * PAGE, PROT_READ | PROT_WRITE);
	mprotect(bufs + BUF_PAGES * PAGE, PAGE, PROT_NONE);
	opsarea = map_or_bail((OPS_PAGES + 1) * PAGE, PROT_READ | PROT_WRITE);
	mprotect(opsarea + OPS_PAGES * PAGE, PAGE, PROT_NONE);
	memfd = memfd_create("fuzz-ro", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, PAGE))
		tap_bail("memfd: %s", strerror(errno));
	ro_w = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ro_r = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, memfd, 0);
	if (ro_w == MAP_FAILED || ro_r == MAP_FAILED)
		tap_bail("mmap memfd: %s", strerror(errno));
	bad_address();

	dev = kvmstats_open();
	vm = vm_create(FUZZ_VCPUS, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 3);
	vm_dup = dup(vm->fd);
	child_vmm_start(&child, FUZZ_VCPUS, NULL, 5);

	native_vm_stats = vm_get_stats_fd(vm);
	native_vcpu_stats = vcpu_get_stats_fd(vm->vcpus[0]);
	blob = malloc(sizeof(*blob));
	stats_read_all(native_vm_stats, blob, "native VM stats");
	vm_hdr = *stats_header(blob);
	stats_read_all(native_vcpu_stats, blob, "native vCPU stats");
	vcpu_hdr = *stats_header(blob);
	free(blob);

	/* Other files, anon-inode and not. */
	add_other(eventfd(0, EFD_CLOEXEC));
	add_other(epoll_create1(EPOLL_CLOEXEC));
	add_other(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
	if (pipe2(pfd, O_CLOEXEC))
		tap_bail("pipe: %s", strerror(errno));
	add_other(pfd[0]);
	add_other(pfd[1]);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		tap_bail("socketpair: %s", strerror(errno));
	add_other(sv[0]);
	add_other(open("/dev/null", O_RDWR | O_CLOEXEC));
	add_other(memfd);
	add_other(vm->kvm_fd);
	add_other(dev);
	add_other(native_vm_stats);
	add_other(native_vcpu_stats);
	add_other(child.native_vm_stats);
	add_other(open("/proc/self/status", O_RDONLY | O_CLOEXEC));
	self_pidfd = pidfd_open_or_fail(self_pid);
	child_pidfd = pidfd_open_or_fail(child.info.pid);
	add_other(self_pidfd);
	add_other(child_pidfd);
	{
		int ksg = ksg_test_open();

		impostor_fd = ksg_impostor(ksg);
		close(ksg);
		add_other(impostor_fd);
	}
	for (i = 0; i < nr_other; i++)
		if (other_fds[i] < 0)
			tap_bail("setting up the fd zoo: %s", strerror(errno));
	for (i = 0; i < 4; i++) {
		int fd = eventfd(0, EFD_CLOEXEC);

		close(fd);
		note_closed(fd);
	}

	if (pthread_create(&th, NULL, idle_thread, NULL))
		tap_bail("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		msleep(1);
	pid = fork();
	if (!pid)
		_exit(0);
	waitpid(pid, NULL, 0);
	reaped_pid = pid;

	/*
	 * What LIST_VMS must say all along: our VM, the child VMM's, and the
	 * keeper's (kvm_test_init(): a child of ours holding an idle VM).
	 */
	n = kvmstats_list_vms(dev, &list);
	{
		bool ours = false, theirs = false, strangers = false;

		for (i = 0; i < n; i++) {
			char path[64];
			long ppid = -1;
			FILE *st;

			if (list[i].pid == self_pid &&
			    list[i].fd == (vm->fd < vm_dup ? vm->fd : vm_dup) &&
			    list[i].nr_vcpus == FUZZ_VCPUS)
				ours = true;
			else if (list[i].pid == child.info.pid &&
				 list[i].fd == child.info.vm_fd &&
				 list[i].nr_vcpus == FUZZ_VCPUS)
				theirs = true;
			else {
				snprintf(path, sizeof(path), "/proc/%d/stat",
					 list[i].pid);
				st = fopen(path, "r");
				if (!st ||
				    fscanf(st, "%*d (%*[^)]) %*c %ld", &ppid) !=
					    1 ||
				    ppid != self_pid)
					strangers = true;
				if (st)
					fclose(st);
			}
		}
		if (!tap_check(
			    ours && theirs && !strangers && n <= 8,
			    "setup: LIST_VMS shows our VM, the child VMM's and "
			    "only our keeper's besides (%d entries)",
			    n)) {
			for (i = 0; i < n; i++)
				tap_diag("listed: pid %d fd %d vcpus %u",
					 list[i].pid, list[i].fd,
					 list[i].nr_vcpus);
			tap_bail(
				"unexpected VMs on the guest: cannot fuzz with an exact oracle");
		}
	}
	memcpy(expect_list, list, n * sizeof(*list));
	expect_nr = n;
	free(list);
}

int main(void)
{
	uint64_t seed = rel_seed("KVMSTATS_FUZZ_SEED");
	unsigned long calls = rel_env_num("KVMSTATS_FUZZ_CALLS",
					  rel_long() ? 1000000 : 100000);
	unsigned long budget_s =
		rel_env_num("KVMSTATS_TEST_TIMEOUT", 120) * 3 / 4;
	uint64_t start, deadline;
	long live0, live, proc;
	int kmsg, a, leak = -1;
	unsigned long done;

	kvm_test_init(); /* keeper VM: see tests/suite/FINDINGS.md */
	rng.s = seed;
	tap_diag(
		"seed 0x%016llx, %lu calls (replay: KVMSTATS_FUZZ_SEED=0x%016llx "
		"KVMSTATS_FUZZ_CALLS=%lu)",
		(unsigned long long)seed, calls, (unsigned long long)seed,
		calls);
	kmsg = rel_kmsg_open();
	live0 = rel_live_files();
	tap_check(live0 == 0, "live_files is 0 before the fuzz (%ld)", live0);
	proc = proc_kvmstats_files();
	tap_check(
		proc == 0,
		"/proc: no kvmstats stats file open in any fd table before the fuzz (%ld)",
		proc);
	setup();
	regressions();
	/*
	 * Fault 85-leak: a stats file held outside the pool through the
	 * fuzz, and live_files read as a counter that missed it would be.
	 */
	if (test_fault("85-leak")) {
		/* At fd 1000 up: out of the numbers the fuzzer picks from. */
		a = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
		leak = fcntl(a, F_DUPFD_CLOEXEC, 1000);
		close(a);
	}

	start = now_ns();
	deadline = start + budget_s * 1000000000ull;
	for (done = 0; done < calls; done++) {
		uint64_t x = rng_below(&rng, 100);
		enum act act;

		call_nr = done;
		if (x < 28)
			act = A_GETFD;
		else if (x < 36)
			act = A_LIST;
		else if (x < 52)
			act = A_BATCH;
		else if (x < 56)
			act = A_VERSION;
		else if (x < 64)
			act = A_OTHER_CMD;
		else if (x < 94)
			act = A_FILEOP;
		else
			act = A_POOL;
		act_calls[act]++;
		switch (act) {
		case A_GETFD:
			act_getfd();
			break;
		case A_LIST:
			act_list();
			break;
		case A_BATCH:
			act_batch();
			break;
		case A_VERSION:
			act_version();
			break;
		case A_OTHER_CMD:
			act_other_cmd();
			break;
		case A_FILEOP:
			act_fileop();
			break;
		default:
			act_pool();
			break;
		}
		if (done % 4096 == 4095) {
			sample_open_files(done, "live_files",
					  rel_live_files() - (leak >= 0),
					  &live_bad);
			sample_open_files(done, "kvmstats files open by /proc",
					  proc_kvmstats_files(), &proc_bad);
			if (now_ns() > deadline)
				break;
		}
	}
	tap_diag("%lu calls in %.1f s; %lu stats fds made; %lu READ_BATCH ops",
		 done, (now_ns() - start) / 1e9, fds_made, batch_ops);
	tap_check(done >= calls, "made all %lu calls within %lu s (made %lu)",
		  calls, budget_s, done);
	for (a = 0; a < A_NR; a++)
		tap_check(!act_bad[a],
			  "%s: every result as documented (%lu calls, %lu bad)",
			  act_name[a], act_calls[a], act_bad[a]);
	tap_check(
		!batch_mismatch,
		"READ_BATCH ops give what pread(2) gives on the same arguments "
		"(%lu ops, %lu differ)",
		batch_ops, batch_mismatch);
	tap_check(!live_bad,
		  "live_files equals the stats fds we hold at every sample");
	tap_check(
		!proc_bad,
		"/proc: the kvmstats files open in all fd tables are the stats fds we hold at every sample (%lu samples differ)",
		proc_bad);
	if (leak >= 0)
		close(leak);

	/* Everything closed: the count goes back to zero. */
	while (pool_nr)
		pool_close(0);
	close(native_vm_stats);
	close(native_vcpu_stats);
	child_vmm_exit(&child);
	child_vmm_close_fds(&child);
	close(vm_dup);
	vm_free(vm);
	close(dev);
	live = rel_wait_value(rel_live_files_arg, NULL, 0, 3000);
	tap_check(live == 0, "live_files is 0 once every fd is closed (%ld)",
		  live);
	proc = proc_kvmstats_files();
	tap_check(
		proc == 0,
		"/proc: no kvmstats stats file open in any fd table once every fd is closed (%ld)",
		proc);
	tap_check(rel_live_files() >= 0, "kvmstats still loaded and answering");
	rel_kmsg_check(kmsg, "fuzz");
	tap_diag("seed 0x%016llx", (unsigned long long)seed);
	return tap_exit();
}
