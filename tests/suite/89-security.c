// SPDX-License-Identifier: GPL-2.0-only
/*
 * Security properties of the device and of the stats fds.
 *
 *  - /dev/kvmstats is 0600 root:root; nobody cannot open it (EACCES).
 *  - A stats fd handed to nobody is readable and gives nothing more: no
 *    write, no ioctl (ENOTTY, so none reaches the VM), no mmap, no reopen
 *    through /proc/self/fd for writing, no fchmod/fchown/ftruncate/linkat,
 *    and its access mode cannot be changed.
 *  - A user namespace "root" (nobody + unshare(CLONE_NEWUSER), uid 0
 *    inside) still cannot open the device.
 *  - A process in a child pid namespace sees only its own VMs.
 *  - Nothing the module outputs holds a kernel address: every u64 of the
 *    stats files, LIST_VMS entries, ioctl return values, READ_BATCH
 *    results, /proc fdinfo and link names, and the module's kernel log
 *    lines (its pr_debug lines are switched on with dynamic debug where
 *    debugfs is mounted).  READ_BATCH and GET_STATS_FD write back nothing
 *    but the documented fields.
 *  - Every ioctl rejects each unknown flag bit and each non-zero reserved
 *    bit with EINVAL, and creates nothing when it does.
 */
#include <fcntl.h>
#include <grp.h>
#include <regex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fault.h"
#include "proc_files.h"
#include "rel_util.h"

#define NOBODY	  65534
#define KADDR_MIN 0xffff800000000000ull
#define DYNDBG	  "/sys/kernel/debug/dynamic_debug/control"

static int dev;
static regex_t kaddr_re;

static bool text_has_kaddr(const char *s)
{
	return !regexec(&kaddr_re, s, 0, NULL, 0);
}

static int drop_to_nobody(void)
{
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		return -errno;
	/* The uid change made us undumpable: /proc/self would stay root's. */
	prctl(PR_SET_DUMPABLE, 1);
	return 0;
}

/* Failures a child made itself (the counter is inherited over fork). */
static int child_failures;

/* Run @fn in a child; its own check lines go to stdout.  Returns its status. */
static int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	pid = tap_fork();
	if (!pid) {
		child_failures = tap_failures();
		_exit(fn(arg));
	}
	if (waitpid(pid, &status, 0) != pid)
		tap_bail("waitpid: %s", strerror(errno));
	return status;
}

/* ---- nobody with a stats fd ---- */

struct nobody_arg {
	int fd;			       /* a vCPU stats fd, inherited */
	const struct stats_blob *blob; /* what root read from it */
};

static int nobody_main(void *p)
{
	const struct nobody_arg *a = p;
	static const unsigned long cmds[] = {
		KVMSTATS_GET_API_VERSION,   KVMSTATS_LIST_VMS,
		KVMSTATS_GET_STATS_FD,	    KVMSTATS_READ_BATCH,
		KVM_GET_STATS_FD,	    KVM_RUN,
		KVM_GET_API_VERSION,	    KVM_CREATE_VCPU,
		KVM_SET_USER_MEMORY_REGION, KVM_GET_REGS,
	};
	static struct stats_blob got;
	struct kvmstats_fd_request req = { .vcpu = -1 };
	char path[64];
	unsigned int i;
	int r, bad = 0, fl;
	void *m;

	r = drop_to_nobody();
	if (!tap_check(!r && getuid() == NOBODY && geteuid() == NOBODY,
		       "child runs as nobody (%s)", r ? strerror(-r) : "ok"))
		return 1;
	r = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	tap_check(r < 0 && errno == EACCES,
		  "nobody: open(O_RDONLY) of the device is EACCES");
	r = open(KVMSTATS_DEVICE, O_RDWR | O_CLOEXEC);
	tap_check(r < 0 && errno == EACCES,
		  "nobody: open(O_RDWR) of the device is EACCES");

	tap_check(
		__stats_read_all(a->fd, &got) == (ssize_t)a->blob->size &&
			!memcmp(got.data, a->blob->data,
				stats_header(a->blob)->data_offset),
		"nobody: the stats fd reads the whole file, same header, id and descriptors");
	tap_check(write(a->fd, "x", 1) < 0 && errno == EBADF,
		  "nobody: write is EBADF");
	r = pwrite(a->fd, "x", 1, 0);
	tap_check(r < 0 && (errno == EBADF || errno == ESPIPE),
		  "nobody: pwrite fails (%s)", strerror(errno));
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		r = ioctl(a->fd, cmds[i], &req);
		if (!(r < 0 && errno == ENOTTY)) {
			bad++;
			tap_diag("ioctl(stats fd, %#lx): %d (%s)", cmds[i], r,
				 strerror(errno));
		}
	}
	tap_check(
		!bad,
		"nobody: every ioctl on the stats fd is ENOTTY (KVM's and ours)");
	m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, a->fd, 0);
	tap_check(m == MAP_FAILED && errno == ENODEV,
		  "nobody: mmap(MAP_SHARED) is ENODEV");
	m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, a->fd, 0);
	tap_check(m == MAP_FAILED && errno == ENODEV,
		  "nobody: mmap(MAP_PRIVATE) is ENODEV");

	snprintf(path, sizeof(path), "/proc/self/fd/%d", a->fd);
	r = open(path, O_RDWR | O_CLOEXEC);
	tap_check(r < 0, "nobody: reopening /proc/self/fd/N O_RDWR fails (%s)",
		  r < 0 ? strerror(errno) : "it opened");
	r = open(path, O_WRONLY | O_CLOEXEC);
	tap_check(r < 0,
		  "nobody: reopening /proc/self/fd/N O_WRONLY fails (%s)",
		  r < 0 ? strerror(errno) : "it opened");
	r = open(path, O_RDONLY | O_CLOEXEC);
	tap_diag("nobody: reopening O_RDONLY: %s",
		 r < 0 ? strerror(errno) : "opened");
	if (r >= 0) {
		tap_check(ioctl(r, KVMSTATS_GET_STATS_FD, &req) < 0 &&
				  errno == ENOTTY && write(r, "x", 1) < 0,
			  "nobody: a reopened fd is no more than the original");
		close(r);
	}
	/*
	 * Anonymous inodes refuse attribute changes outright since 6.15
	 * (EOPNOTSUPP); before, the owner check refuses nobody (EPERM).
	 */
	{
		struct stat before, after;
		int e1, e2;

		fstat(a->fd, &before);
		r = fchmod(a->fd, 0666);
		e1 = errno;
		tap_check(r < 0 && (e1 == EPERM || e1 == EOPNOTSUPP),
			  "nobody: fchmod fails (%s)",
			  r < 0 ? strerror(e1) : "it worked");
		r = fchown(a->fd, NOBODY, NOBODY);
		e2 = errno;
		tap_check(r < 0 && (e2 == EPERM || e2 == EOPNOTSUPP),
			  "nobody: fchown fails (%s)",
			  r < 0 ? strerror(e2) : "it worked");
		fstat(a->fd, &after);
		tap_check(
			before.st_mode == after.st_mode &&
				before.st_uid == after.st_uid,
			"nobody: the stats fd's mode and owner are unchanged (0%o, uid %d)",
			after.st_mode & 07777, (int)after.st_uid);
	}
	tap_check(ftruncate(a->fd, 0) < 0, "nobody: ftruncate fails (%s)",
		  strerror(errno));
	tap_check(linkat(a->fd, "", AT_FDCWD, "/tmp/kvmstats-stats-link",
			 AT_EMPTY_PATH) < 0,
		  "nobody: linkat(AT_EMPTY_PATH) of the stats fd fails (%s)",
		  strerror(errno));
	fcntl(a->fd, F_SETFL, O_RDWR | O_APPEND);
	fl = fcntl(a->fd, F_GETFL);
	tap_check((fl & O_ACCMODE) == O_RDONLY && write(a->fd, "x", 1) < 0,
		  "nobody: F_SETFL cannot make it writable (flags %#x)", fl);
	return tap_failures() > child_failures ? 1 : 0;
}

/* ---- a user namespace "root" ---- */

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		r = -errno;
	close(fd);
	return r;
}

static int userns_main(void *p)
{
	int r, fd;

	(void)p;
	r = drop_to_nobody();
	if (r) {
		tap_fail("dropping to nobody: %s", strerror(-r));
		return 1;
	}
	if (unshare(CLONE_NEWUSER)) {
		tap_skip(strerror(errno),
			 "user namespace root cannot open the device "
			 "(unprivileged user namespaces unavailable)");
		return 0;
	}
	if (write_file("/proc/self/setgroups", "deny") ||
	    write_file("/proc/self/uid_map", "0 65534 1") ||
	    write_file("/proc/self/gid_map", "0 65534 1")) {
		tap_fail("writing the id maps of the new user namespace: %s",
			 strerror(errno));
		return 1;
	}
	tap_check(getuid() == 0 && geteuid() == 0,
		  "in the user namespace, uid is 0 (%d)", getuid());
	fd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	tap_check(fd < 0 && errno == EACCES,
		  "user namespace root: open of the device is EACCES (%s)",
		  fd < 0 ? strerror(errno) : "it opened");
	tap_check(chmod(KVMSTATS_DEVICE, 0666) < 0,
		  "user namespace root: chmod of the device fails (%s)",
		  strerror(errno));
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	tap_diag("user namespace root: /dev/kvm %s",
		 fd < 0 ? strerror(errno) : "opens");
	return tap_failures() > child_failures ? 1 : 0;
}

/* ---- a child pid namespace ---- */

struct pidns_arg {
	pid_t host_vmm; /* a VMM of the parent namespace */
	int host_vm_fd;
};

static int pidns_inner(const struct pidns_arg *a)
{
	struct kvmstats_vm *list;
	struct vm *vm;
	int d, n, r;

	vm = vm_create(1, NULL);
	d = kvmstats_open();
	n = __kvmstats_list_vms(d, &list);
	tap_check(getpid() == 1 && n == 1 && list[0].pid == 1 &&
			  list[0].fd == vm->fd,
		  "in a child pid namespace LIST_VMS shows only its own VM "
		  "(%d entries, first pid %d fd %d)",
		  n, n > 0 ? list[0].pid : -1, n > 0 ? list[0].fd : -1);
	r = __kvmstats_get_stats_fd(d, a->host_vmm, a->host_vm_fd, -1);
	tap_check(r == -ESRCH,
		  "in a child pid namespace a VMM of the parent is ESRCH "
		  "(pid %d: %s)",
		  a->host_vmm, r < 0 ? strerror(-r) : "an fd");
	return tap_failures() > child_failures ? 1 : 0;
}

static int pidns_main(void *p)
{
	int status;
	pid_t pid;

	if (unshare(CLONE_NEWPID)) {
		tap_fail("unshare(CLONE_NEWPID): %s", strerror(errno));
		return 1;
	}
	pid = fork();
	if (!pid) {
		child_failures = tap_failures();
		_exit(pidns_inner(p));
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ---- kernel addresses ---- */

static unsigned long kaddr_hits;

static void scan_u64s(const void *p, size_t len, const char *what)
{
	const uint8_t *b = p;
	size_t off;

	for (off = 0; off + 8 <= len; off += 8) {
		uint64_t v;

		memcpy(&v, b + off, 8);
		if (v >= KADDR_MIN) {
			kaddr_hits++;
			tap_diag("%s: u64 at offset %zu is %#llx", what, off,
				 (unsigned long long)v);
		}
	}
}

static void scan_blob(const struct stats_blob *b, const char *what)
{
	const struct kvm_stats_header *h = stats_header(b);
	uint32_t i;

	scan_u64s(b->data, b->size, what);
	if (text_has_kaddr(stats_id(b))) {
		kaddr_hits++;
		tap_diag("%s: id '%s'", what, stats_id(b));
	}
	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(b, i);

		if (text_has_kaddr(d->name)) {
			kaddr_hits++;
			tap_diag("%s: descriptor name '%s'", what, d->name);
		}
	}
}

static void scan_proc_fd(int fd, const char *what)
{
	char path[64], buf[512];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if (text_has_kaddr(buf)) {
			kaddr_hits++;
			tap_diag("%s: link '%s'", what, buf);
		}
	}
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	n = f >= 0 ? read(f, buf, sizeof(buf) - 1) : -1;
	if (f >= 0)
		close(f);
	if (n > 0) {
		buf[n] = 0;
		if (text_has_kaddr(buf)) {
			kaddr_hits++;
			tap_diag("%s: fdinfo '%s'", what, buf);
		}
	}
}

static void addresses(struct vm *vm, struct child_vmm *c)
{
	static struct stats_blob blob;
	struct kvmstats_read_op ops[4], before[4];
	struct kvmstats_fd_request req, req0;
	struct kvmstats_vm *list;
	int fds[4], i, n, r;
	static uint8_t bufs[4][8192];

	fds[0] = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	fds[1] = kvmstats_get_stats_fd(dev, 0, vm->fd, 1);
	fds[2] = kvmstats_get_stats_fd(dev, c->info.pid, c->info.vm_fd, -1);
	fds[3] = kvmstats_get_stats_fd(dev, c->info.pid, c->info.vm_fd, 0);
	for (i = 0; i < 4; i++) {
		char what[64];

		snprintf(what, sizeof(what), "stats file %d", i);
		stats_read_all(fds[i], &blob, what);
		scan_blob(&blob, what);
		scan_proc_fd(fds[i], what);
		scan_u64s(&fds[i], sizeof(fds[i]), "GET_STATS_FD return value");
	}
	n = kvmstats_list_vms(dev, &list);
	scan_u64s(list, n * sizeof(*list), "LIST_VMS entries");
	for (i = 0; i < n; i++)
		if (list[i].flags || list[i].nr_vcpus > VM_MAX_VCPUS) {
			kaddr_hits++;
			tap_diag("LIST_VMS entry %d: flags %#x vcpus %u", i,
				 list[i].flags, list[i].nr_vcpus);
		}
	free(list);
	r = __kvmstats_api_version(dev, 0);
	scan_u64s(&r, sizeof(r), "GET_API_VERSION");

	for (i = 0; i < 4; i++)
		ops[i] = (struct kvmstats_read_op){
			.fd = fds[i],
			.offset = i * 100,
			.buf = (uintptr_t)bufs[i],
			.len = sizeof(bufs[i]),
			.result = 0x5a5a5a5a,
		};
	memcpy(before, ops, sizeof(ops));
	r = __kvmstats_read_batch(dev, ops, 4);
	for (i = 0; i < 4; i++) {
		before[i].result = ops[i].result;
		scan_u64s(bufs[i], ops[i].result > 0 ? ops[i].result : 0,
			  "READ_BATCH data");
	}
	tap_check(r == 0 && !memcmp(before, ops, sizeof(ops)),
		  "READ_BATCH writes back nothing but each op's result");
	req0 = (struct kvmstats_fd_request){ .pid = 0,
					     .fd = vm->fd,
					     .vcpu = 0 };
	req = req0;
	r = __kvmstats_get_stats_fd_req(dev, &req);
	tap_check(r >= 0 && !memcmp(&req, &req0, sizeof(req)),
		  "GET_STATS_FD leaves its request untouched");
	if (r >= 0)
		close(r);
	for (i = 0; i < 4; i++)
		close(fds[i]);
	tap_check(kaddr_hits == 0,
		  "no kernel address in stats files, LIST_VMS, ioctl "
		  "results, READ_BATCH, /proc fd links and fdinfo (%lu found)",
		  kaddr_hits);
}

/* ---- flags and reserved fields ---- */

static void flags_rejected(struct vm *vm)
{
	struct kvmstats_vm_list *l =
		calloc(1, sizeof(*l) + 64 * sizeof(l->vms[0]));
	struct kvmstats_read_batch b;
	struct kvmstats_read_op op;
	long live0 = rel_live_files(), proc0, proc, live;
	int bad_getfd = 0, bad_list = 0, bad_batch = 0, bad_op = 0, bad_ver = 0;
	int s, bit, w, r, leak = -1;
	uint64_t buf;

	s = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	live0 = rel_live_files();
	proc0 = proc_kvmstats_files();
	/*
	 * Fault 89-leak: a stats file made among the rejected requests and
	 * left open, live_files read as a counter that missed it would be.
	 */
	if (test_fault("89-leak"))
		leak = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	for (bit = 0; bit < 32; bit++) {
		struct kvmstats_fd_request q = { .fd = vm->fd,
						 .vcpu = -1,
						 .flags = 1u << bit };

		r = __kvmstats_get_stats_fd_req(dev, &q);
		if (r != -EINVAL) {
			bad_getfd++;
			if (r >= 0)
				close(r);
		}
		l->nr = 64;
		l->flags = 1u << bit;
		if (__test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)l) !=
		    -EINVAL)
			bad_list++;
		b = (struct kvmstats_read_batch){ .nr = 1,
						  .ops = (uintptr_t)&op,
						  .flags = 1u << bit };
		op = (struct kvmstats_read_op){ .fd = s,
						.buf = (uintptr_t)&buf,
						.len = 8 };
		if (__test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&b) !=
		    -EINVAL)
			bad_batch++;
		op.flags = 1u << bit;
		if (__kvmstats_read_batch(dev, &op, 1) != 0 ||
		    op.result != -EINVAL)
			bad_op++;
	}
	for (w = 0; w < 2; w++)
		for (bit = 0; bit < 64; bit++) {
			struct kvmstats_fd_request q = { .fd = vm->fd,
							 .vcpu = -1 };

			q.reserved[w] = 1ull << bit;
			r = __kvmstats_get_stats_fd_req(dev, &q);
			if (r != -EINVAL) {
				bad_getfd++;
				if (r >= 0)
					close(r);
			}
			b = (struct kvmstats_read_batch){
				.nr = 1, .ops = (uintptr_t)&op
			};
			b.reserved[w] = 1ull << bit;
			op = (struct kvmstats_read_op){ .fd = s,
							.buf = (uintptr_t)&buf,
							.len = 8 };
			if (__test_ioctl(dev, KVMSTATS_READ_BATCH,
					 (unsigned long)&b) != -EINVAL)
				bad_batch++;
			if (w == 0 &&
			    __kvmstats_api_version(dev, 1ul << bit) != -EINVAL)
				bad_ver++;
		}
	tap_check(!bad_getfd,
		  "GET_STATS_FD: each of 32 flag bits and 128 reserved bits "
		  "is EINVAL (%d not)",
		  bad_getfd);
	tap_check(!bad_list,
		  "LIST_VMS: each of 32 flag bits is EINVAL (%d not)",
		  bad_list);
	tap_check(!bad_batch,
		  "READ_BATCH: each of 32 flag bits and 128 reserved bits is "
		  "EINVAL (%d not)",
		  bad_batch);
	tap_check(!bad_op,
		  "READ_BATCH op: each of 32 flag bits is -EINVAL (%d not)",
		  bad_op);
	tap_check(
		!bad_ver,
		"GET_API_VERSION: each of 64 argument bits is EINVAL (%d not)",
		bad_ver);
	live = rel_live_files() - (leak >= 0);
	tap_check(live == live0,
		  "rejected requests created no stats file "
		  "(live_files %ld, was %ld)",
		  live, live0);
	proc = proc_kvmstats_files();
	tap_check(
		proc0 >= 1 && proc == proc0,
		"/proc: rejected requests left no stats file in any fd table (%ld kvmstats files open, were %ld)",
		proc, proc0);
	if (leak >= 0)
		close(leak);
	close(s);
	free(l);
}

/* ---- main ---- */

int main(void)
{
	static struct stats_blob blob;
	struct nobody_arg na;
	struct pidns_arg pa;
	struct child_vmm c;
	struct stat st;
	struct vm *vm;
	int kmsg, status, dyndbg, s;
	int ids[2] = { 0, 5 };

	kvm_test_init(); /* keeper VM: see tests/suite/FINDINGS.md */
	if (regcomp(&kaddr_re, "ffff[89a-f][0-9a-f]{11}",
		    REG_EXTENDED | REG_ICASE))
		tap_bail("regcomp");
	kmsg = rel_kmsg_open();
	/* The module's pr_debug lines, so that the log scan sees them. */
	dyndbg = write_file(DYNDBG, "module kvmstats +p") == 0;
	tap_diag("dynamic debug for kvmstats: %s",
		 dyndbg ? "on" : "unavailable");

	memset(&st, 0, sizeof(st));
	status = stat(KVMSTATS_DEVICE, &st);
	tap_check(status == 0 && S_ISCHR(st.st_mode) &&
			  (st.st_mode & 07777) == 0600 && st.st_uid == 0 &&
			  st.st_gid == 0,
		  "%s is a 0600 root:root character device (mode %o, %d:%d)",
		  KVMSTATS_DEVICE, st.st_mode & 07777, st.st_uid, st.st_gid);
	dev = kvmstats_open();
	vm = vm_create(2, ids);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 11);
	child_vmm_start(&c, 2, NULL, 3);

	s = kvmstats_get_stats_fd(dev, 0, vm->fd, 1);
	stats_read_all(s, &blob, "vCPU 5 stats");
	na = (struct nobody_arg){ .fd = s, .blob = &blob };
	status = in_child(nobody_main, &na);
	tap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "nobody with a stats fd: all checks passed (status %#x)",
		  status);
	close(s);

	status = in_child(userns_main, NULL);
	tap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "user namespace root: all checks passed (status %#x)",
		  status);

	pa = (struct pidns_arg){ .host_vmm = c.info.pid,
				 .host_vm_fd = c.info.vm_fd };
	status = in_child(pidns_main, &pa);
	tap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "child pid namespace: all checks passed (status %#x)",
		  status);

	addresses(vm, &c);
	flags_rejected(vm);

	child_vmm_exit(&c);
	child_vmm_close_fds(&c);
	vm_free(vm);
	close(dev);
	if (dyndbg)
		write_file(DYNDBG, "module kvmstats -p");
	rel_kmsg_check(kmsg, "security");
	tap_diag("kvmstats lines in the kernel log during the test: %lu",
		 rel_kmsg_module_lines);
	if (dyndbg)
		tap_check(
			rel_kmsg_module_lines > 0,
			"the module's debug lines were logged and scanned (%lu)",
			rel_kmsg_module_lines);
	return tap_exit();
}
