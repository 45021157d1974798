// SPDX-License-Identifier: GPL-2.0-only
/*
 * A kvmstats stats fd behaves as a file exactly like KVM's own stats fd:
 * pread at every offset and length (across block boundaries), sequential
 * read, 0 at and after EOF, EINVAL for a negative offset, an lseek that
 * succeeds without moving, O_RDONLY|O_CLOEXEC, write EBADF, mmap ENODEV,
 * ioctls ENOTTY, dup'd fds and several fds per object.  Each behaviour is
 * checked on our fd and on the native fd, and they must agree.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "kvmstats_util.h"

static struct stats_blob whole;

/* pread of every (offset, length) pair, compared with the native fd. */
static void check_pread_everywhere(int ours, int native, const char *what)
{
	static const size_t lens[] = { 1,  3,  8,   13,	  24,
				       47, 64, 100, 1000, STATS_FILE_MAX };
	static uint8_t a[STATS_FILE_MAX], b[STATS_FILE_MAX];
	size_t off, i, nr = 0, bad = 0;

	stats_read_all(native, &whole, what);
	for (off = 0; off <= whole.size + 16; off++) {
		for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			ssize_t ra, rb;

			memset(a, 0xa5, lens[i]);
			memset(b, 0x5a, lens[i]);
			ra = pread(ours, a, lens[i], off);
			rb = pread(native, b, lens[i], off);
			nr++;
			if (ra == rb && (ra <= 0 || !memcmp(a, b, ra)))
				continue;
			if (bad++ < 5)
				tap_diag(
					"%s: pread(%zu @ %zu): ours %zd, native %zd",
					what, lens[i], off, ra, rb);
		}
	}
	tap_diag("%s: %zu preads compared, file size %zu", what, nr,
		 whole.size);
	tap_check(!bad, "%s: pread at every offset and length matches native",
		  what);
}

/* read() in chunks of @chunk from a fresh fd; returns bytes or -1. */
static ssize_t read_sequential(int fd, size_t chunk, uint8_t *out)
{
	size_t total = 0;

	for (;;) {
		ssize_t r = read(fd, out + total, chunk);

		if (r < 0)
			return -1;
		if (r == 0)
			return total;
		total += r;
		if (total > STATS_FILE_MAX - chunk)
			return -1;
	}
}

static void check_sequential(int dev, int vmfd, int vcpu, int native,
			     const char *what)
{
	static uint8_t a[STATS_FILE_MAX];
	static const size_t chunks[] = { 1, 7, 24, 100, 4096 };
	size_t i;

	stats_read_all(native, &whole, what);
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		int fd = kvmstats_get_stats_fd(dev, 0, vmfd, vcpu);
		ssize_t n = read_sequential(fd, chunks[i], a);
		uint8_t c;

		tap_check(
			n == (ssize_t)whole.size && !memcmp(a, whole.data, n),
			"%s: sequential read in %zu-byte chunks returns the whole file",
			what, chunks[i]);
		tap_eq(read(fd, &c, 1), 0, "%s: read after EOF returns 0",
		       what);
		close(fd);
	}
}

static void check_file_behaviour(int ours, int native, const char *what)
{
	void *volatile null_buf = NULL;
	uint8_t buf[64];
	off_t o_ours, o_native;
	void *p;
	long r;
	int fl_ours, fl_native;

	tap_eq(pread(ours, buf, 8, whole.size), 0, "%s: pread at EOF returns 0",
	       what);
	tap_eq(pread(ours, buf, 8, whole.size + 1000000), 0,
	       "%s: pread far past EOF returns 0", what);
	tap_eq(pread(ours, buf, 0, 0), 0, "%s: pread of 0 bytes returns 0",
	       what);

	errno = 0;
	r = pread(ours, buf, 8, -1);
	tap_check(r == -1 && errno == EINVAL,
		  "%s: pread at offset -1 fails with EINVAL (got %ld, %s)",
		  what, r, strerror(errno));
	errno = 0;
	r = pread(native, buf, 8, -1);
	tap_diag("%s: native pread at -1: %ld (%s)", what, r, strerror(errno));

	/* lseek succeeds and does not move: noop llseek. */
	tap_eq(read(ours, buf, 10), 10, "%s: read 10 bytes", what);
	o_ours = lseek(ours, 100, SEEK_SET);
	tap_eq(read(native, buf, 10), 10, "%s: native: read 10 bytes", what);
	o_native = lseek(native, 100, SEEK_SET);
	tap_check(
		o_ours == o_native,
		"%s: lseek(100, SEEK_SET) returns what native returns (%lld vs %lld)",
		what, (long long)o_ours, (long long)o_native);
	tap_eq(lseek(ours, 0, SEEK_CUR), 10,
	       "%s: lseek did not move the offset (read advanced it to 10)",
	       what);
	tap_eq(lseek(ours, 0, SEEK_END), lseek(native, 0, SEEK_END),
	       "%s: lseek(SEEK_END) returns what native returns", what);
	r = read(ours, buf, 14);
	tap_check(r == 14 && !memcmp(buf, whole.data + 10, 14),
		  "%s: the next read continues at offset 10", what);

	/* Flags. */
	tap_check(fcntl(ours, F_GETFD) == FD_CLOEXEC, "%s: fd is close-on-exec",
		  what);
	fl_ours = fcntl(ours, F_GETFL);
	fl_native = fcntl(native, F_GETFL);
	tap_check((fl_ours & O_ACCMODE) == O_RDONLY,
		  "%s: file is O_RDONLY (F_GETFL 0%o)", what, fl_ours);
	tap_check(fl_ours == fl_native,
		  "%s: F_GETFL equals native (0%o vs 0%o)", what, fl_ours,
		  fl_native);

	errno = 0;
	r = write(ours, buf, 8);
	tap_check(r == -1 && errno == EBADF,
		  "%s: write fails with EBADF (got %ld, %s)", what, r,
		  strerror(errno));
	{
		int e_ours, e_native;
		long rn;

		errno = 0;
		r = pwrite(ours, buf, 8, 0);
		e_ours = errno;
		errno = 0;
		rn = pwrite(native, buf, 8, 0);
		e_native = errno;
		tap_check(r == -1 && rn == -1 && e_ours == e_native,
			  "%s: pwrite fails as on native (%s vs %s)", what,
			  strerror(e_ours), strerror(e_native));
	}

	errno = 0;
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, ours, 0);
	tap_check(p == MAP_FAILED && errno == ENODEV,
		  "%s: mmap fails with ENODEV (got %s)", what,
		  p == MAP_FAILED ? strerror(errno) : "a mapping");
	if (p != MAP_FAILED)
		munmap(p, 4096);
	errno = 0;
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, native, 0);
	tap_diag("%s: native mmap: %s", what,
		 p == MAP_FAILED ? strerror(errno) : "a mapping");

	errno = 0;
	r = ioctl(ours, KVMSTATS_GET_API_VERSION, 0);
	tap_check(
		r == -1 && errno == ENOTTY,
		"%s: ioctl KVMSTATS_GET_API_VERSION on it fails with ENOTTY (got %ld, %s)",
		what, r, strerror(errno));
	errno = 0;
	r = ioctl(ours, KVM_GET_STATS_FD, 0);
	tap_check(
		r == -1 && errno == ENOTTY,
		"%s: ioctl KVM_GET_STATS_FD on it fails with ENOTTY (got %ld, %s)",
		what, r, strerror(errno));
	errno = 0;
	r = ioctl(ours, FIONREAD, buf);
	tap_diag("%s: FIONREAD: %ld (%s)", what, r, strerror(errno));

	errno = 0;
	r = pread(ours, null_buf, 8, 0);
	tap_check(r == -1 && errno == EFAULT,
		  "%s: pread into NULL fails with EFAULT (got %ld, %s)", what,
		  r, strerror(errno));
	errno = 0;
	r = pread(ours, bad_address(), 8, 0);
	tap_check(r == -1 && errno == EFAULT,
		  "%s: pread into an inaccessible page fails with EFAULT",
		  what);
}

static void check_fd_copies(int dev, int vmfd, int vcpu, int native,
			    const char *what)
{
	char name[128];
	int a, b, d;

	a = kvmstats_get_stats_fd(dev, 0, vmfd, vcpu);
	b = kvmstats_get_stats_fd(dev, 0, vmfd, vcpu);
	tap_check(a != b, "%s: two GET_STATS_FD calls give two fds", what);
	d = dup(a);
	snprintf(name, sizeof(name), "%s: second fd identical to native", what);
	stats_fds_identical(b, native, name);
	snprintf(name, sizeof(name), "%s: dup'd fd identical to native", what);
	stats_fds_identical(d, native, name);
	close(a);
	snprintf(name, sizeof(name),
		 "%s: dup'd fd still identical after closing the original",
		 what);
	stats_fds_identical(d, native, name);
	snprintf(name, sizeof(name),
		 "%s: second fd still identical after closing the first", what);
	stats_fds_identical(b, native, name);
	close(d);
	close(b);
	errno = 0;
	tap_check(fcntl(b, F_GETFD) == -1 && errno == EBADF,
		  "%s: closed fd is gone (F_GETFD EBADF)", what);
}

int main(void)
{
	int dev, vm_native, vcpu_native, ours_vm, ours_vcpu;
	struct vm *vm;

	kvm_test_init();
	dev = kvmstats_open();
	vm = vm_create(2, (const int[]){ 0, 3 });
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 50);

	vm_native = vm_get_stats_fd(vm);
	vcpu_native = vcpu_get_stats_fd(vm->vcpus[1]);
	ours_vm = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	ours_vcpu = kvmstats_get_stats_fd(dev, 0, vm->fd, 1);

	check_pread_everywhere(ours_vm, vm_native, "VM");
	check_pread_everywhere(ours_vcpu, vcpu_native, "vCPU");

	check_sequential(dev, vm->fd, -1, vm_native, "VM");
	check_sequential(dev, vm->fd, 1, vcpu_native, "vCPU");

	stats_read_all(vm_native, &whole, "VM");
	check_file_behaviour(ours_vm, vm_native, "VM");
	stats_read_all(vcpu_native, &whole, "vCPU");
	check_file_behaviour(ours_vcpu, vcpu_native, "vCPU");

	check_fd_copies(dev, vm->fd, -1, vm_native, "VM");
	check_fd_copies(dev, vm->fd, 1, vcpu_native, "vCPU");

	close(ours_vm);
	close(ours_vcpu);
	close(vm_native);
	close(vcpu_native);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
