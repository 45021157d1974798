// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVMSTATS_READ_BATCH: each op reads exactly what pread would, for many
 * fds at once; per-op errors (-EBADF, -EINVAL for native stats fds, other
 * files, flags and offsets, -EFAULT for bad buffers) leave the other ops
 * alone; the batch fails as a whole only for its own fields, an
 * unreadable op array or an unwritable result.  Like pread, an op that
 * reads bytes is accounted to the task's I/O and is an access event for
 * inotify (the same fsnotify hook).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>

#include "kvmstats_util.h"

#define NR_VMS	 3
#define NR_VCPUS 2
#define NR_FDS	 (NR_VMS * (NR_VCPUS + 1))

static int dev;

static int batch(struct kvmstats_read_op *ops, uint32_t nr)
{
	return __kvmstats_read_batch(dev, ops, nr);
}

/* rchar and syscr of this process (/proc/self/io). */
static void io_counts(unsigned long long *rchar, unsigned long long *syscr)
{
	char line[128];
	FILE *f = fopen("/proc/self/io", "r");

	*rchar = *syscr = 0;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "rchar: %llu", rchar);
		sscanf(line, "syscr: %llu", syscr);
	}
	if (f)
		fclose(f);
}

/* Whether an IN_ACCESS event arrived on @ino within 2 s. */
static bool access_event(int ino)
{
	struct pollfd p = { .fd = ino, .events = POLLIN };

	return poll(&p, 1, 2000) == 1;
}

/*
 * READ_BATCH tells the rest of the kernel what pread tells it: the task's
 * I/O accounting (rchar, syscr) and inotify's access event.  Every
 * anonymous-inode file shares one inode, and reading the inotify fd is
 * itself an access to it, so the watch is one-shot and armed just before
 * the read it is to see.
 */
static void check_accounting(int fd)
{
	unsigned long long r0, s0, r1, s1, r2, s2;
	struct kvmstats_read_op op = { .fd = fd };
	char buf[64], path[64];
	bool by_pread, by_batch;
	int ino;

	op.buf = (uint64_t)(uintptr_t)buf;
	op.len = sizeof(buf);
	io_counts(&r0, &s0);
	if (pread(fd, buf, sizeof(buf), 0) != sizeof(buf))
		tap_diag("pread: %s", strerror(errno));
	io_counts(&r1, &s1);
	batch(&op, 1);
	io_counts(&r2, &s2);
	/* Reading /proc/self/io is itself a read: subtract the first's. */
	tap_check(
		op.result == sizeof(buf) && r2 - r1 == r1 - r0 &&
			s2 - s1 == s1 - s0,
		"a READ_BATCH op is accounted as a pread (rchar +%llu, syscr +%llu; pread +%llu, +%llu)",
		r2 - r1, s2 - s1, r1 - r0, s1 - s0);

	ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (ino < 0 ||
	    inotify_add_watch(ino, path, IN_ACCESS | IN_ONESHOT) < 0) {
		tap_check(0, "inotify watch on a stats fd: %s",
			  strerror(errno));
		return;
	}
	if (pread(fd, buf, sizeof(buf), 0) != sizeof(buf))
		tap_diag("pread: %s", strerror(errno));
	by_pread = access_event(ino);
	close(ino);
	ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ino < 0 ||
	    inotify_add_watch(ino, path, IN_ACCESS | IN_ONESHOT) < 0) {
		tap_check(0, "inotify watch on a stats fd: %s",
			  strerror(errno));
		return;
	}
	batch(&op, 1);
	by_batch = access_event(ino);
	tap_check(
		op.result == sizeof(buf) && by_batch == by_pread,
		"a READ_BATCH op is an access event for inotify exactly when a pread is (%s, pread %s)",
		by_batch ? "event" : "none", by_pread ? "event" : "none");
	if (!by_pread)
		tap_diag(
			"this kernel sends no access events for anonymous inodes");
	close(ino);
}

int main(void)
{
	static uint8_t bufs[NR_FDS * 2][STATS_FILE_MAX];
	static struct stats_blob blob;
	struct kvmstats_read_op ops[NR_FDS * 2 + 16], *many;
	int fds[NR_FDS], native, pipefd[2], unused, i, n, r;
	struct kvmstats_read_batch b;
	struct vm *vms[NR_VMS];
	uint8_t *p, small[64];
	bool ok;

	kvm_test_init();
	dev = kvmstats_open();
	for (i = 0; i < NR_VMS; i++) {
		vms[i] = vm_create(NR_VCPUS, NULL);
		vm_run_all_to_hlt(vms[i], GUEST_IO_COUNT, 10 + i);
	}
	n = 0;
	for (i = 0; i < NR_VMS; i++) {
		int j;

		fds[n++] = kvmstats_get_stats_fd(dev, 0, vms[i]->fd, -1);
		for (j = 0; j < NR_VCPUS; j++)
			fds[n++] = kvmstats_get_stats_fd(dev, 0, vms[i]->fd, j);
	}

	/* Whole files, and a partial read across blocks, for every fd. */
	memset(ops, 0, sizeof(ops));
	for (i = 0; i < NR_FDS; i++) {
		ops[2 * i].fd = fds[i];
		ops[2 * i].buf = (unsigned long)bufs[2 * i];
		ops[2 * i].len = STATS_FILE_MAX;
		ops[2 * i].result = 0x7777;
		ops[2 * i + 1].fd = fds[i];
		ops[2 * i + 1].offset = 20 + i;
		ops[2 * i + 1].buf = (unsigned long)bufs[2 * i + 1];
		ops[2 * i + 1].len = 1100 + i;
		ops[2 * i + 1].result = 0x7777;
	}
	r = batch(ops, NR_FDS * 2);
	tap_eq(r, 0, "batch of %d ops over %d fds succeeds", NR_FDS * 2,
	       NR_FDS);
	ok = true;
	for (i = 0; i < NR_FDS; i++) {
		static uint8_t ref[STATS_FILE_MAX];
		ssize_t len;

		stats_read_all(fds[i], &blob, "stats fd");
		if (ops[2 * i].result != (int)blob.size ||
		    memcmp(bufs[2 * i], blob.data, blob.size)) {
			tap_diag("fd %d whole: result %d, pread size %zu",
				 fds[i], ops[2 * i].result, blob.size);
			ok = false;
		}
		len = pread(fds[i], ref, 1100 + i, 20 + i);
		if (ops[2 * i + 1].result != len ||
		    memcmp(bufs[2 * i + 1], ref, len)) {
			tap_diag("fd %d partial: result %d, pread %zd", fds[i],
				 ops[2 * i + 1].result, len);
			ok = false;
		}
	}
	tap_check(ok, "every op's result and bytes equal pread's");

	/* Live data: the io_exits of each vCPU as pread sees it. */
	ok = true;
	for (i = 0; i < NR_VMS; i++) {
		uint64_t v;

		memcpy(&blob.data, bufs[2 * (i * 3 + 1)],
		       ops[2 * (i * 3 + 1)].result);
		blob.size = ops[2 * (i * 3 + 1)].result;
		v = stats_value(&blob, STAT_IO_EXITS, 0);
		if (v != (uint64_t)(10 + i)) {
			tap_diag("VM %d vCPU 0: " STAT_IO_EXITS
				 " %llu in the batch buffer",
				 i, (unsigned long long)v);
			ok = false;
		}
	}
	tap_check(ok, "batch buffers carry each guest's exact " STAT_IO_EXITS);

	/* The batch does not move the file offset (pread semantics). */
	tap_eq(read(fds[0], small, 24), 24,
	       "read after batch starts at offset 0");
	stats_read_all(fds[0], &blob, "fd 0");
	tap_check(!memcmp(small, blob.data, 24), "and returns the header");

	/* Per-op results at and past EOF, and per-op errors. */
	if (pipe(pipefd))
		tap_bail("pipe: %s", strerror(errno));
	native = vm_get_stats_fd(vms[0]);
	unused = 900;
	while (fcntl(unused, F_GETFD) != -1)
		unused++;
	memset(ops, 0, sizeof(ops));
	for (i = 0; i < 13; i++) {
		ops[i].fd = fds[1];
		ops[i].buf = (unsigned long)bufs[i];
		ops[i].len = 64;
		ops[i].result = 0x7777;
	}
	stats_read_all(fds[1], &blob, "vCPU");
	ops[0].offset = blob.size;		   /* EOF: 0 */
	ops[1].offset = blob.size + 12345;	   /* past EOF: 0 */
	ops[2].fd = unused;			   /* -EBADF */
	ops[3].fd = -1;				   /* -EBADF */
	ops[4].fd = native;			   /* -EINVAL */
	ops[5].fd = pipefd[0];			   /* -EINVAL */
	ops[6].flags = 1;			   /* -EINVAL */
	ops[7].buf = 0;				   /* -EFAULT */
	ops[8].buf = (unsigned long)bad_address(); /* -EFAULT */
	ops[9].offset = 1ull << 63;		   /* -EINVAL */
	ops[10].offset = blob.size - 10;	   /* 10 */
	ops[11].fd = dev;			   /* -EINVAL */
	ops[12].len = 0;			   /* 0 */
	/* a good op after all the bad ones */
	ops[13].fd = fds[1];
	ops[13].buf = (unsigned long)bufs[13];
	ops[13].len = 100;
	ops[13].offset = 2000;
	ops[13].result = 0x7777;
	r = batch(ops, 14);
	tap_eq(r, 0, "batch with failing ops still returns 0");
	tap_eq(ops[0].result, 0, "op at EOF: 0");
	tap_eq(ops[1].result, 0, "op past EOF: 0");
	tap_eq(ops[2].result, -EBADF, "op on an unused fd: -EBADF");
	tap_eq(ops[3].result, -EBADF, "op on fd -1: -EBADF");
	tap_eq(ops[4].result, -EINVAL, "op on a native KVM stats fd: -EINVAL");
	tap_eq(ops[5].result, -EINVAL, "op on a pipe: -EINVAL");
	tap_eq(ops[6].result, -EINVAL, "op with flags 1: -EINVAL");
	tap_eq(ops[7].result, -EFAULT, "op with a NULL buf: -EFAULT");
	tap_eq(ops[8].result, -EFAULT, "op with an inaccessible buf: -EFAULT");
	tap_eq(ops[9].result, -EINVAL, "op at offset 1<<63: -EINVAL");
	tap_eq(ops[10].result, 10, "op straddling EOF: the 10 bytes left");
	tap_check(!memcmp(bufs[10], blob.data + blob.size - 10, 10),
		  "and they are the file's last 10 bytes");
	tap_eq(ops[11].result, -EINVAL, "op on the /dev/kvmstats fd: -EINVAL");
	tap_eq(ops[12].result, 0, "op of 0 bytes: 0");
	tap_eq(ops[13].result, 100, "good op after the failing ones: 100");
	tap_check(!memcmp(bufs[13], blob.data + 2000, 100),
		  "and its bytes equal pread's");

	/* Batch-level errors. */
	memset(ops, 0, sizeof(ops));
	ops[0].fd = fds[0];
	ops[0].buf = (unsigned long)bufs[0];
	ops[0].len = 24;
	ops[0].result = 0x7777;
	memset(&b, 0, sizeof(b));
	b.nr = 1;
	b.ops = (unsigned long)ops;
	b.flags = 1;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EINVAL && ops[0].result == 0x7777,
		  "batch flags 1: EINVAL, no op attempted (got %d)", r);
	b.flags = 0;
	b.reserved[0] = 1;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EINVAL && ops[0].result == 0x7777,
		  "batch reserved[0] 1: EINVAL (got %d)", r);
	b.reserved[0] = 0;
	b.reserved[1] = 1;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EINVAL && ops[0].result == 0x7777,
		  "batch reserved[1] 1: EINVAL (got %d)", r);
	b.reserved[1] = 0;
	b.nr = KVMSTATS_BATCH_MAX + 1;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EINVAL && ops[0].result == 0x7777,
		  "batch nr KVMSTATS_BATCH_MAX + 1: EINVAL (got %d)", r);
	b.nr = 0xffffffff;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EINVAL, "batch nr 0xffffffff: EINVAL (got %d)", r);
	b.nr = 1;
	b.ops = 0;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EFAULT, "batch ops NULL: EFAULT (got %d)", r);
	b.ops = (unsigned long)bad_address();
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EFAULT, "batch ops inaccessible: EFAULT (got %d)", r);
	b.nr = 0;
	b.ops = 0;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_diag("batch of 0 ops with ops NULL: %d", r);

	/* Ops readable but their results not writable. */
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(p, ops, sizeof(ops[0]));
	mprotect(p, 4096, PROT_READ);
	b.nr = 1;
	b.ops = (unsigned long)p;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EFAULT,
		  "batch whose results cannot be written: EFAULT (got %d)", r);
	munmap(p, 4096);

	/* The second op unreadable: EFAULT, the first one run and written. */
	p = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	many = (void *)(p + 4096 - sizeof(*many));
	memset(many, 0, sizeof(*many));
	many->fd = fds[0];
	many->buf = (unsigned long)bufs[0];
	many->len = 24;
	many->result = 0x7777;
	mprotect(p + 4096, 4096, PROT_NONE);
	b.nr = 2;
	b.ops = (unsigned long)many;
	r = __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b);
	tap_check(r == -EFAULT,
		  "batch whose second op is unreadable: EFAULT (got %d)", r);
	tap_eq(many->result, 24,
	       "and the first op was run and its result written");
	munmap(p, 8192);

	/* The largest batch. */
	many = calloc(KVMSTATS_BATCH_MAX, sizeof(*many));
	for (i = 0; i < KVMSTATS_BATCH_MAX; i++) {
		many[i].fd = fds[i % NR_FDS];
		many[i].buf = (unsigned long)bufs[i % (NR_FDS * 2)];
		many[i].len = 24;
		many[i].offset = 0;
		many[i].result = 0x7777;
	}
	r = batch(many, KVMSTATS_BATCH_MAX);
	ok = r == 0;
	for (i = 0; i < KVMSTATS_BATCH_MAX; i++)
		ok &= many[i].result == 24;
	tap_check(
		ok,
		"batch of KVMSTATS_BATCH_MAX (%d) ops: every op read 24 bytes",
		KVMSTATS_BATCH_MAX);
	free(many);

	check_accounting(fds[0]);
	close(native);
	close(pipefd[0]);
	close(pipefd[1]);
	for (i = 0; i < NR_FDS; i++)
		close(fds[i]);
	for (i = 0; i < NR_VMS; i++)
		vm_free(vms[i]);
	close(dev);
	return tap_exit();
}
