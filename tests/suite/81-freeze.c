// SPDX-License-Identifier: GPL-2.0-only
/*
 * Freezing (issues 13 and 17): a stats fd never keeps a dead VMM's VM alive.
 *
 * kvmstats holds one reference on a VM with open stats files (and, where
 * the VM file's owner is the vendor module, one on that module) as long as
 * someone else holds the VM too: the VMM's VM or vCPU fds, a copy of them
 * in another process, a native stats fd.  Once its reference is the last
 * (the VMM exited, exec'd, or closed every fd of the VM; nobody else holds
 * one), the VM can never run again: within a few hundred ms the files
 * switch to a copy of the values of that moment and kvmstats gives the
 * reference back, so KVM destroys the VM.  For a VMM that died, that
 * moment is after KVM's teardown of its address space: the vCPU files
 * read what they read before the death, the VM file that with its page
 * counts 0 (stats_blob_torn_down(); 80-lifetime checks it on native fds).
 *
 *  - A child VMM with 3 vCPUs that did 40 port writes each is SIGKILLed
 *    while only our stats fds hold its VM: KVM's destroy uevent arrives,
 *    the vendor module's refcount and live_vms return to their bases, and
 *    the fds (byte-identical to KVM_GET_STATS_FD's files before the death)
 *    read the values after the teardown, unchanged from then on, through
 *    pread and READ_BATCH.  The vendor module can then be unloaded under
 *    the open fds (they still read the same), kvmstats cannot, and a
 *    reloaded vendor module serves new VMs.  Where KVM is built in
 *    (arm64) KVM's own count of live VMs stands for the refcount, and
 *    there is nothing to unload (a SKIP).
 *  - A VMM whose VM lives is never frozen: its io_exits keep growing after
 *    a child it forked exits, after a vfork()ed child execs and exits, and
 *    after its main thread exits with the vCPU thread still running (a
 *    new fd can then still be taken); SIGKILL then freezes it.
 *  - A clone(CLONE_VM) sibling process keeps running the VM after the
 *    VMM process is SIGKILLed: not frozen until the sibling dies too.
 *  - A VMM that execs loses its VM and vCPU fds (close-on-exec), after the
 *    teardown of its old address space: frozen and given back.
 *  - Two VMs of one VMM, the second created after our fds for the first
 *    exist: at the VMM's death the one only our files hold is frozen and
 *    destroyed, the one our copies of its fds hold stays live (identical
 *    to its native fds) until they close, then freezes with those values.
 *  - A stats fd taken after the VMM died, through a VM fd copy that keeps
 *    the VM alive, is live: it joins kvmstats' one reference, which it
 *    keeps when the fds taken before the death close, until the copy
 *    closes; then it freezes and KVM destroys the VM.
 *  - A reader asleep in a page fault on its own buffer (userfaultfd) does
 *    not hold back the release of a dead VMM's VM.
 *  - A VMM that closes every fd of a VM and lives on lets it go: while its
 *    vCPU fds are open (the VM fd closed) the VM is live, after that KVM
 *    destroys it within a few seconds and our fds read its last values;
 *    the VMM and its other VM are untouched.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>
#include <pthread.h>

#include "freeze_util.h"
#include "rel_util.h"

#define MAX_VCPUS  4
#define MAX_FDS	   (MAX_VCPUS + 1) /* the VM's, then each vCPU's */
#define UEVENT_MS  15000	   /* KVM's destroy event after a death */
#define SETTLE_MS  15000	   /* counters back to their bases */
#define FROZEN_RDS 100		   /* reads of each file per frozen check */
#define HOLD_MS	   500		   /* five of kvmstats' scans for lone VMs */

static int dev, uev;
static const char *vendor, *vendor_ko;
static long base_ref, base_vms;

static long refcnt_arg(const char *name)
{
	return rel_kvm_pins(name);
}

/* ---- our stats fds of one VM and what they read ---- */

struct files {
	int nr; /* 1 + vCPUs */
	int fd[MAX_FDS];
	struct stats_blob a[MAX_FDS]; /* the snapshot: what they should read */
};

static void files_open(struct files *f, pid_t pid, int vm_fd, int nr_vcpus)
{
	int i;

	f->nr = nr_vcpus + 1;
	for (i = 0; i < f->nr; i++)
		f->fd[i] = kvmstats_get_stats_fd(dev, pid, vm_fd, i - 1);
}

static void files_snapshot(struct files *f)
{
	int i;

	for (i = 0; i < f->nr; i++)
		stats_read_all(f->fd[i], &f->a[i], "snapshot");
}

static void files_close(struct files *f)
{
	int i;

	for (i = 0; i < f->nr; i++)
		close(f->fd[i]);
	f->nr = 0;
}

static const char *file_name(int i, char *buf, size_t len)
{
	if (i)
		snprintf(buf, len, "vCPU %d file", i - 1);
	else
		snprintf(buf, len, "VM file");
	return buf;
}

/* Each file's snapshot byte-identical to the native file's contents now. */
static void files_vs_native(struct files *f, const int *native,
			    const char *when)
{
	static struct stats_blob nb;
	char what[160], name[32];
	int i;

	for (i = 0; i < f->nr; i++) {
		snprintf(what, sizeof(what), "%s: %s identical to native", when,
			 file_name(i, name, sizeof(name)));
		stats_read_all(native[i], &nb, "native");
		tap_check(stats_blob_equal(&f->a[i], &nb, what), "%s", what);
	}
}

/*
 * Every fd reads its snapshot, @rounds times each with pread and once more
 * all together with READ_BATCH.  Only the first difference is described.
 */
static void files_read_a(struct files *f, int rounds, const char *when)
{
	static struct stats_blob now;
	static uint8_t bbuf[MAX_FDS][STATS_FILE_MAX];
	struct kvmstats_read_op ops[MAX_FDS];
	int i, r, reads = 0, bad = 0, ret;

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < f->nr; i++) {
			ssize_t n = __stats_read_all(f->fd[i], &now);

			reads++;
			if (n >= 0 && now.size == f->a[i].size &&
			    !memcmp(now.data, f->a[i].data, now.size))
				continue;
			if (!bad++) {
				if (n < 0)
					tap_diag("%s: pread: %s", when,
						 strerror(-n));
				else
					stats_blob_equal(&f->a[i], &now, when);
			}
		}
	}
	for (i = 0; i < f->nr; i++)
		ops[i] = (struct kvmstats_read_op){
			.fd = f->fd[i],
			.buf = (uintptr_t)bbuf[i],
			.len = f->a[i].size,
		};
	ret = __kvmstats_read_batch(dev, ops, f->nr);
	for (i = 0; i < f->nr; i++) {
		reads++;
		if (!ret && ops[i].result == (int)f->a[i].size &&
		    !memcmp(bbuf[i], f->a[i].data, f->a[i].size))
			continue;
		if (!bad++)
			tap_diag("%s: READ_BATCH %d, op %d result %d", when,
				 ret, i, ops[i].result);
	}
	tap_check(bad == 0,
		  "%s: %d reads of the %d files (pread and READ_BATCH) all "
		  "equal the snapshot (%d differ)",
		  when, reads, f->nr, bad);
}

/*
 * The files of a VM whose VMM died, read now against the snapshot taken
 * before the death: the vCPU files unchanged, the VM file as KVM's
 * teardown of the VMM's address space leaves it.  What they read becomes
 * the snapshot.
 */
static void files_after_death(struct files *f, const char *when)
{
	static struct stats_blob now;
	char what[160], name[32];
	int i, bad = 0;

	for (i = 0; i < f->nr; i++) {
		snprintf(what, sizeof(what), "%s: %s", when,
			 file_name(i, name, sizeof(name)));
		stats_read_all(f->fd[i], &now, what);
		if (i)
			bad += !stats_blob_equal(&f->a[i], &now, what);
		else
			bad += !stats_blob_torn_down(&f->a[i], &now, what);
		f->a[i] = now;
	}
	tap_check(bad == 0,
		  "%s: the vCPU files read what they read before the death, "
		  "the VM file that with page counts 0 (%d of %d files not)",
		  when, bad, f->nr);
}

/* The VM is gone from kvmstats and from KVM: the counters and the event. */
static void check_released(pid_t creator, int nr_vms, const char *when)
{
	long v, ref;
	int n;

	n = kvm_uevent_wait(uev, "destroy", creator, nr_vms, UEVENT_MS);
	tap_check(n == nr_vms,
		  "%s: KVM destroyed the VM%s (uevent EVENT=destroy PID=%d: "
		  "%d of %d within %d s)",
		  when, nr_vms > 1 ? "s" : "", creator, n, nr_vms,
		  UEVENT_MS / 1000);
	v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	tap_check(v == base_vms, "%s: live_vms back to %ld (%ld)", when,
		  base_vms, v);
	ref = rel_wait_value(refcnt_arg, vendor, base_ref, SETTLE_MS);
	tap_check(ref == base_ref, "%s: %s back to %ld (%ld)", when,
		  rel_kvm_what(vendor), base_ref, ref);
}

/* ---- a VMM of our own making: several VMs, forks, exec, leader exit ---- */

enum {
	FZ_NEW_VM = 'n',      /* a: vCPUs, b: port writes of vCPU 0 (+1 each) */
	FZ_IO_LOOP = 'r',     /* a: VM index: its vCPU threads loop on OUT */
	FZ_FORK = 'f',	      /* fork a child that exits at once */
	FZ_VFORK_EXEC = 'v',  /* vfork a child that execs and exits */
	FZ_LEADER_EXIT = 'l', /* ack, then the main thread exits alone */
	FZ_EXEC = 'e',	      /* ack, then exec (--idle): new address space */
	FZ_CLONE_VM = 'c', /* a: VM index: a clone(CLONE_VM) runs its vCPU 0 */
	FZ_CLOSE_VM_FD = 'x', /* a: VM index: close the VM fd only */
	FZ_FREE_VM = 'z',     /* a: VM index: stop its vCPUs, close every fd */
};

struct fz_cmd {
	int op, a, b;
};

struct fz_info {
	int vm_fd; /* its number in the VMM */
	int nr_vcpus;
	pid_t creator_tid;
};

struct fz_vm {
	struct fz_info info;
	int vm_fd;	     /* a copy, received */
	int native[MAX_FDS]; /* KVM_GET_STATS_FD's, received */
};

struct fz_vmm {
	pid_t pid;
	int sock;
	int nr_vms;
	struct fz_vm vm[2];
};

static void fz_child_new_vm(int sock, struct vm **out, int nr_vcpus,
			    int io_base)
{
	struct vm *vm = vm_create(nr_vcpus, NULL);
	int fds[MAX_FDS + 1], i;
	struct fz_info info;

	for (i = 0; i < nr_vcpus; i++) {
		vcpu_load_prog(vm->vcpus[i], GUEST_IO_COUNT, io_base + i);
		vcpu_run_to_hlt(vm->vcpus[i]);
	}
	info.vm_fd = vm->fd;
	info.nr_vcpus = nr_vcpus;
	info.creator_tid = vm->creator_tid;
	fds[0] = vm->fd;
	fds[1] = vm_get_stats_fd(vm);
	for (i = 0; i < nr_vcpus; i++)
		fds[2 + i] = vcpu_get_stats_fd(vm->vcpus[i]);
	if (send_fds(sock, &info, sizeof(info), fds, nr_vcpus + 2))
		_exit(2);
	for (i = 1; i < nr_vcpus + 2; i++)
		close(fds[i]);
	*out = vm;
}

static void fz_child_io_loop(struct vm *vm)
{
	int i;

	for (i = 0; i < vm->nr_vcpus; i++) {
		vcpu_load_prog(vm->vcpus[i], GUEST_IO_LOOP, 0);
		vcpu_thread_start(vm->vcpus[i]);
	}
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_thread_wait_running(vm->vcpus[i]);
}

/*
 * A process of its own (not a thread) sharing the VMM's address space:
 * KVM accepts its KVM_RUN (same kvm->mm).  It shares the VMM's TLS too,
 * so it makes raw system calls only.
 */
static int fz_sibling_run(void *arg)
{
	int fd = *(int *)arg;

	for (;;)
		syscall(SYS_ioctl, fd, KVM_RUN, 0);
	return 0;
}

static int fz_child_clone_vm(struct vm *vm)
{
	static int vcpu_fd;
	size_t size = 64 * 1024;
	void *stack;

	vcpu_load_prog(vm->vcpus[0], GUEST_IO_LOOP, 0);
	vcpu_fd = vm->vcpus[0]->fd;
	stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	return clone(fz_sibling_run, (char *)stack + size, CLONE_VM | SIGCHLD,
		     &vcpu_fd);
}

static int fz_child_wait(pid_t pid)
{
	int status;

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

/* As posix_spawn() does: the child borrows the VMM's address space. */
static int __attribute__((noinline)) fz_child_vfork_exec(void)
{
	pid_t pid = vfork();

	if (!pid) {
		execl("/proc/self/exe", "81-freeze", "--exit", (char *)NULL);
		_exit(127);
	}
	return fz_child_wait(pid);
}

static void __attribute__((noreturn))
fz_child(int sock, void *arg __attribute__((unused)))
{
	struct vm *vms[2] = { NULL, NULL };
	int nr = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		struct fz_cmd cmd;
		int ack = 0;
		pid_t pid;

		if (read(sock, &cmd, sizeof(cmd)) != sizeof(cmd))
			_exit(0); /* the test is gone */
		switch (cmd.op) {
		case FZ_NEW_VM:
			if (nr == 2)
				_exit(4);
			fz_child_new_vm(sock, &vms[nr++], cmd.a, cmd.b);
			continue; /* the fds were the answer */
		case FZ_IO_LOOP:
			fz_child_io_loop(vms[cmd.a]);
			break;
		case FZ_FORK:
			pid = fork();
			if (!pid)
				_exit(0);
			ack = fz_child_wait(pid);
			break;
		case FZ_VFORK_EXEC:
			ack = fz_child_vfork_exec();
			break;
		case FZ_LEADER_EXIT:
			if (write(sock, &ack, sizeof(ack)) != sizeof(ack))
				_exit(3);
			syscall(SYS_exit, 0); /* this thread only */
			_exit(5);
		case FZ_CLONE_VM:
			ack = fz_child_clone_vm(vms[cmd.a]);
			break;
		case FZ_CLOSE_VM_FD:
			ack = close(vms[cmd.a]->fd);
			vms[cmd.a]->fd = -1;
			break;
		case FZ_FREE_VM:
			vm_free(vms[cmd.a]);
			vms[cmd.a] = NULL;
			break;
		case FZ_EXEC:
			if (write(sock, &ack, sizeof(ack)) != sizeof(ack))
				_exit(3);
			execl("/proc/self/exe", "81-freeze", "--idle",
			      (char *)NULL);
			_exit(127);
		default:
			_exit(6);
		}
		if (write(sock, &ack, sizeof(ack)) != sizeof(ack))
			_exit(3);
	}
}

static void fz_start(struct fz_vmm *v)
{
	memset(v, 0, sizeof(*v));
	/* Keep nothing of ours: not the device, not our stats fds. */
	v->pid = child_fork(&v->sock, fz_child, NULL, true);
}

/* Sends a command and returns the VMM's answer. */
static int fz_cmd(struct fz_vmm *v, int op, int a, int b)
{
	struct fz_cmd cmd = { op, a, b };
	int ack;

	if (write(v->sock, &cmd, sizeof(cmd)) != sizeof(cmd) ||
	    read(v->sock, &ack, sizeof(ack)) != sizeof(ack))
		tap_bail("VMM %d did not answer command '%c'", v->pid, op);
	return ack;
}

static struct fz_vm *fz_new_vm(struct fz_vmm *v, int nr_vcpus, int io_base)
{
	struct fz_cmd cmd = { FZ_NEW_VM, nr_vcpus, io_base };
	struct fz_vm *vm = &v->vm[v->nr_vms];
	int fds[MAX_FDS + 1], n, i;

	if (write(v->sock, &cmd, sizeof(cmd)) != sizeof(cmd))
		tap_bail("VMM %d: command pipe broken", v->pid);
	n = recv_fds(v->sock, &vm->info, sizeof(vm->info), fds, nr_vcpus + 2);
	if (n != nr_vcpus + 2)
		tap_bail("VMM %d did not send its VM's fds (%d)", v->pid, n);
	vm->vm_fd = fds[0];
	for (i = 0; i <= nr_vcpus; i++)
		vm->native[i] = fds[1 + i];
	v->nr_vms++;
	return vm;
}

/* Close the VM fd copy and the native stats fds: they hold the VM too. */
static void fz_close_copies(struct fz_vm *vm)
{
	int i;

	close(vm->vm_fd);
	for (i = 0; i <= vm->info.nr_vcpus; i++)
		close(vm->native[i]);
}

static void fz_kill(struct fz_vmm *v)
{
	kill(v->pid, SIGKILL);
	if (waitpid(v->pid, NULL, 0) != v->pid)
		tap_bail("waitpid(%d): %s", v->pid, strerror(errno));
	if (v->sock >= 0)
		close(v->sock);
	v->sock = -1;
}

/* A process's state letter in /proc/<pid>/stat, or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* ---- the checks ---- */

/*
 * Two VMs of one VMM, the second created after our fds for the first.
 * Our copies of the first VM's fds outlive the VMM; the second VM has
 * only our stats files.
 */
static void check_two_vms(void)
{
	static struct files f[2];
	struct fz_vmm v;
	struct fz_vm *vm;
	char what[96];
	pid_t creator;
	long lv;
	int i, j, n;

	fz_start(&v);
	vm = fz_new_vm(&v, 2, 11);
	files_open(&f[0], v.pid, vm->info.vm_fd, 2);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "two VMs: our 3 fds of the first VM: live_vms %ld + 1",
	       base_vms);
	vm = fz_new_vm(&v, 3, 31);
	files_open(&f[1], v.pid, vm->info.vm_fd, 3);
	tap_eq(kvmstats_live_vms(), base_vms + 2,
	       "two VMs: and 4 of the second, created after: live_vms %ld + 2",
	       base_vms);
	for (j = 0; j < 2; j++) {
		files_snapshot(&f[j]);
		snprintf(what, sizeof(what), "two VMs: VM %d before the death",
			 j);
		files_vs_native(&f[j], v.vm[j].native, what);
		for (i = 1; i < f[j].nr; i++)
			tap_eq(stats_value(&f[j].a[i], STAT_IO_EXITS, 0),
			       (j ? 31 : 11) + i - 1,
			       "two VMs: VM %d vCPU %d: " STAT_IO_EXITS " %d",
			       j, i - 1, (j ? 31 : 11) + i - 1);
	}
	creator = v.vm[0].info.creator_tid;
	fz_close_copies(&v.vm[1]);
	fz_kill(&v);

	/* Both VMs have the same creator: count its destroy events. */
	lv = kvmstats_wait_live_vms(base_vms + 1, SETTLE_MS);
	n = kvm_uevent_wait(uev, "destroy", creator, 2, 3000);
	tap_check(n == 1 && lv == base_vms + 1,
		  "two VMs, VMM SIGKILLed: KVM destroyed the VM only our files "
		  "held and not the one our copies hold (%d destroy events, "
		  "live_vms %ld + %ld)",
		  n, base_vms, lv - base_vms);
	files_after_death(&f[1], "two VMs: the second VM's files, frozen");
	files_read_a(&f[1], FROZEN_RDS, "two VMs: the second VM's fds");
	files_after_death(&f[0], "two VMs: the first VM's files, live");
	files_vs_native(&f[0], v.vm[0].native,
			"two VMs: the first VM after the death, its native fds "
			"open");

	fz_close_copies(&v.vm[0]);
	check_released(creator, 1, "two VMs: our copies of the first closed");
	files_read_a(&f[0], FROZEN_RDS,
		     "two VMs: the first VM's fds, frozen with what its native "
		     "fds read last");
	files_read_a(&f[1], 10, "two VMs: the second VM's fds, still");
	files_close(&f[0]);
	files_close(&f[1]);
}

/*
 * A VMM's VM stays live through its forked children's exits and its main
 * thread's exit; only the death of its last thread freezes it.
 */
static void check_never_frozen_alive(void)
{
	static struct stats_blob b, c;
	uint64_t x, y, z;
	struct fz_vmm v;
	struct fz_vm *vm;
	struct files f;
	int i, st, late, bad = 0;
	char s = 0;

	fz_start(&v);
	vm = fz_new_vm(&v, 2, 5);
	files_open(&f, v.pid, vm->info.vm_fd, 2);
	fz_close_copies(vm);
	fz_cmd(&v, FZ_IO_LOOP, 0, 0);

	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(y > x, "live VMM: " STAT_IO_EXITS " grows (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);

	st = fz_cmd(&v, FZ_FORK, 0, 0);
	tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
		  "the VMM forked a child, which exited (status %#x)", st);
	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	z = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(z > x && x >= y,
		  "after its forked child exited: " STAT_IO_EXITS
		  " keeps growing "
		  "(%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)z);

	st = fz_cmd(&v, FZ_VFORK_EXEC, 0, 0);
	tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
		  "the VMM vforked a child that exec'd and exited (status %#x)",
		  st);
	x = stats_read_stat(f.fd[2], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[2], STAT_IO_EXITS, x, 5000);
	tap_check(y > x,
		  "after its vforked child exec'd and exited: " STAT_IO_EXITS
		  " keeps "
		  "growing (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);

	fz_cmd(&v, FZ_LEADER_EXIT, 0, 0);
	for (i = 0; i < 500 && (s = proc_state(v.pid)) != 'Z'; i++)
		msleep(10);
	tap_check(s == 'Z', "the VMM's main thread exited (state %c)",
		  s ? s : '?');
	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(y > x,
		  "main thread gone, vCPU threads running: " STAT_IO_EXITS
		  " keeps "
		  "growing (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "main thread gone: kvmstats still holds the VM");
	late = __kvmstats_get_stats_fd(dev, v.pid, vm->info.vm_fd, 0);
	if (tap_check(late >= 0,
		      "main thread gone: a new vCPU fd can be taken (%s)",
		      late < 0 ? strerror(-late) : "ok")) {
		x = stats_read_stat(late, STAT_IO_EXITS);
		y = stats_wait_above(late, STAT_IO_EXITS, x, 5000);
		tap_check(y > x,
			  "and its " STAT_IO_EXITS " grows (%llu -> %llu)",
			  (unsigned long long)x, (unsigned long long)y);
		tap_eq(kvmstats_live_vms(), base_vms + 1,
		       "and it joined the VM's reference (live_vms)");
	}

	fz_kill(&v);
	check_released(vm->info.creator_tid, 1, "running VMM SIGKILLed");
	/* Running at the kill: no snapshot before; frozen from here on. */
	for (i = 0; i < f.nr; i++) {
		int r;

		stats_read_all(f.fd[i], &b, "after the kill");
		for (r = 0; r < 30; r++) {
			msleep(10);
			stats_read_all(f.fd[i], &c, "after the kill");
			if (!stats_blob_equal(&b, &c, "frozen")) {
				bad++;
				break;
			}
		}
	}
	tap_check(bad == 0,
		  "running VMM SIGKILLed: its 3 files read the same 31 times "
		  "over 300 ms (%d changed)",
		  bad);
	if (late >= 0) {
		stats_read_all(late, &c, "late fd");
		stats_read_all(f.fd[1], &b, "vCPU 0");
		tap_check(stats_blob_equal(&b, &c, "late fd"),
			  "the fd taken after the main thread exited is frozen "
			  "with the others");
		close(late);
	}
	files_close(&f);
}

/*
 * The VM lives as long as its address space has a user: a clone(CLONE_VM)
 * sibling (a process, not a thread) keeps running it after the VMM
 * process itself is SIGKILLed; the sibling's death freezes it.
 */
static void check_clone_vm_sibling(void)
{
	static struct files f;
	struct fz_vmm v;
	struct fz_vm *vm;
	uint64_t x, y;
	pid_t sib;
	char s;

	fz_start(&v);
	vm = fz_new_vm(&v, 2, 3);
	files_open(&f, v.pid, vm->info.vm_fd, 2);
	fz_close_copies(vm);
	sib = fz_cmd(&v, FZ_CLONE_VM, 0, 0);
	if (sib <= 0)
		tap_bail("the VMM could not clone(CLONE_VM) a sibling");
	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(
		y > x,
		"a clone(CLONE_VM) sibling of the VMM runs its vCPU 0: " STAT_IO_EXITS
		" grows (%llu -> %llu)",
		(unsigned long long)x, (unsigned long long)y);
	fz_kill(&v);
	s = proc_state(sib);
	tap_check(s && s != 'Z',
		  "the VMM process is SIGKILLed and reaped, "
		  "its sibling lives on (state %c)",
		  s ? s : '?');
	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(y > x,
		  "VMM process dead, address space alive: " STAT_IO_EXITS
		  " keeps "
		  "growing (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "VMM process dead, address space alive: kvmstats still holds "
	       "the VM");
	kill(sib, SIGKILL);
	if (waitpid(sib, NULL, 0) != sib) /* we are the subreaper */
		tap_bail("waitpid(%d): %s", sib, strerror(errno));
	check_released(vm->info.creator_tid, 1, "the sibling SIGKILLed too");
	files_snapshot(&f);
	files_read_a(&f, FROZEN_RDS, "sibling dead: our fds (frozen)");
	files_close(&f);
}

/*
 * A VMM that execs loses its address space, then its VM and vCPU fds
 * (close-on-exec): its VM is frozen and let go.
 */
static void check_exec(void)
{
	static struct files f;
	struct pollfd pfd;
	struct fz_vmm v;
	struct fz_vm *vm;
	char buf[8], s;
	ssize_t n = -1;

	fz_start(&v);
	vm = fz_new_vm(&v, 2, 13);
	files_open(&f, v.pid, vm->info.vm_fd, 2);
	files_snapshot(&f);
	files_vs_native(&f, vm->native, "exec: before");
	fz_close_copies(vm);
	fz_cmd(&v, FZ_EXEC, 0, 0);
	/* Our end sees EOF once exec has closed the VMM's (close-on-exec). */
	pfd = (struct pollfd){ .fd = v.sock, .events = POLLIN };
	if (poll(&pfd, 1, 10000) == 1)
		n = read(v.sock, buf, sizeof(buf));
	s = proc_state(v.pid);
	tap_check(n == 0 && s && s != 'Z',
		  "the VMM exec'd and lives on (EOF %s, state %c)",
		  n == 0 ? "seen" : "not seen", s ? s : '?');
	check_released(vm->info.creator_tid, 1, "VMM exec'd");
	files_after_death(&f, "exec: our files, frozen once the exec closed "
			      "the VMM's fds of its VM");
	files_read_a(&f, FROZEN_RDS, "exec: our fds");
	fz_kill(&v);
	files_read_a(&f, 10, "exec: once the new image is killed too");
	files_close(&f);
}

/*
 * A VM whose creator is gone but which a VM fd copy keeps alive: a stats
 * fd taken then is live and joins kvmstats' one reference, which stays
 * for it when the fds taken before the death close, until the copy goes.
 */
static void check_late_fd(void)
{
	static struct files f, late;
	struct child_vmm c;
	int i, bad = 0;
	long v;

	child_vmm_start(&c, 2, NULL, 23);
	files_open(&f, c.info.pid, c.info.vm_fd, 2);
	files_snapshot(&f);
	close(c.native_vm_stats);
	for (i = 0; i < 2; i++)
		close(c.native_vcpu_stats[i]);
	child_vmm_kill(&c);
	msleep(HOLD_MS);
	v = kvmstats_live_vms();
	tap_check(v == base_vms + 1,
		  "late fd: VMM killed, our VM fd copy keeps its VM: kvmstats "
		  "still holds it %d ms later (live_vms %ld + %ld)",
		  HOLD_MS, base_vms, v - base_vms);
	files_after_death(&f, "late fd: the fds taken before the death, live");
	files_open(&late, 0, c.vm_fd, 2);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "late fd: 3 fds taken through the copy join kvmstats' one "
	       "reference of the VM");
	for (i = 0; i < late.nr; i++) {
		static struct stats_blob b;

		stats_read_all(late.fd[i], &b, "late fd");
		bad += !stats_blob_equal(&f.a[i], &b, "late fd");
	}
	tap_check(bad == 0,
		  "late fd: its 3 files read what the fds taken before the "
		  "death read (%d differ)",
		  bad);
	files_snapshot(&late);
	files_close(&f);
	msleep(HOLD_MS);
	v = kvmstats_live_vms();
	tap_check(v == base_vms + 1,
		  "late fd: the fds taken before the death closed, the late "
		  "ones keep kvmstats' reference (live_vms %ld + %ld)",
		  base_vms, v - base_vms);
	files_read_a(&late, 3, "late fd: the fds taken after it, live");
	close(c.vm_fd);
	check_released(c.info.vm_creator_tid, 1, "late fd: the copy closed");
	files_read_a(&late, 10,
		     "late fd: the fds taken after the death, "
		     "frozen");
	files_close(&late);
}

/*
 * The main case: SIGKILL, KVM destroys the VM under our open fds, the
 * vendor module comes and goes under them, kvmstats stays pinned.
 */
static void check_kill_and_unload(void)
{
	static struct files f;
	const char *again =
		vendor ? "reloaded vendor module" : "after the death";
	struct child_vmm c;
	int r, i, nat, ours, s0;
	struct vm *vm;
	char what[96];
	long v;

	child_vmm_start(&c, 3, NULL, 40);
	files_open(&f, c.info.pid, c.info.vm_fd, 3);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "4 stats fds of one VM: live_vms %ld + 1", base_vms);
	files_snapshot(&f);
	{
		int native[MAX_FDS];

		native[0] = c.native_vm_stats;
		for (i = 0; i < 3; i++)
			native[i + 1] = c.native_vcpu_stats[i];
		files_vs_native(&f, native, "before the death");
	}
	for (i = 1; i < 4; i++)
		tap_eq(stats_value(&f.a[i], STAT_IO_EXITS, 0), 40,
		       "before the death: vCPU %d " STAT_IO_EXITS " 40", i - 1);
	tap_diag("snapshot A: VM pages_4k %llu, mmu_shadow_zapped %llu",
		 (unsigned long long)stats_value(&f.a[0], "pages_4k", 0),
		 (unsigned long long)stats_value(&f.a[0], "mmu_shadow_zapped",
						 0));
	child_vmm_close_fds(&c);
	files_read_a(&f, 3,
		     "with only our fds holding the VM, before the death");

	child_vmm_kill(&c);
	check_released(c.info.vm_creator_tid, 1, "VMM SIGKILLed");
	files_after_death(&f, "after the death");
	files_read_a(&f, FROZEN_RDS, "after the death");

	/*
	 * The vendor module: its VM is gone, nothing of ours pins it.  Where
	 * KVM is built in there is none to unload: that the VM is gone is
	 * what check_released() saw in KVM's own count.
	 */
	vm_keeper_stop();
	if (vendor) {
		r = rel_unload_module_wait(vendor, 5000);
		tap_check(r == 0 && !rel_module_loaded(vendor),
			  "delete_module(%s) succeeds with our 4 fds of its "
			  "dead VM open (%s)",
			  vendor, r ? strerror(-r) : "ok");
		files_read_a(&f, 10, "with the vendor module unloaded");
	} else {
		tap_skip("KVM is built in: no vendor module to unload",
			 "delete_module(vendor module) under our fds of its "
			 "dead VM");
	}
	r = rel_unload_module("kvmstats");
	tap_check((r == -EAGAIN || r == -EBUSY) &&
			  rel_module_loaded("kvmstats"),
		  "delete_module(kvmstats) refused while they are open (%s)",
		  r ? strerror(-r) : "it was unloaded");
	if (!r)
		tap_bail("kvmstats was unloaded under open stats fds");

	if (vendor) {
		r = rel_load_module(vendor_ko);
		tap_check(r == 0, "finit_module(%s) loads it back (%s)",
			  vendor_ko, r ? strerror(-r) : "ok");
	}
	if (access("/sys/module/ksg_pin", F_OK))
		vm_keeper_start();
	vm = vm_create(2, NULL);
	vm_run_all_to_hlt(vm, GUEST_IO_COUNT, 9);
	s0 = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	nat = vm_get_stats_fd(vm);
	snprintf(what, sizeof(what), "%s: a new VM's file identical to native",
		 again);
	stats_fds_identical(s0, nat, what);
	close(nat);
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, 1);
	nat = vcpu_get_stats_fd(vm->vcpus[1]);
	snprintf(what, sizeof(what), "%s: its vCPU 1 file identical to native",
		 again);
	stats_fds_identical(ours, nat, what);
	tap_eq(stats_read_stat(ours, STAT_IO_EXITS), 9,
	       "%s: its vCPU 1 " STAT_IO_EXITS " 9", again);
	tap_eq(kvmstats_live_vms(), base_vms + 1,
	       "%s: live_vms counts the new VM", again);
	files_read_a(&f, 10, "the dead VM's fds, next to a new VM");
	close(nat);
	close(ours);
	close(s0);
	vm_free(vm);
	files_close(&f);
	v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	tap_check(v == base_vms, "every fd closed: live_vms back to %ld (%ld)",
		  base_vms, v);
}

/* ---- a reader stalled inside a read ---- */

struct stalled {
	pthread_t thread;
	int fd;
	void *buf;
	size_t len;
	ssize_t ret;
};

static void *stalled_read(void *arg)
{
	struct stalled *r = arg;

	r->ret = pread(r->fd, r->buf, r->len, 0);
	return NULL;
}

/*
 * A reader whose buffer faults (here: a userfaultfd page nobody fills)
 * sleeps inside its read.  That must not hold back the release of a dead
 * VMM's VM: the VM is another VMM's business, not this reader's.
 */
static void check_stalled_reader(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { 0 };
	struct uffdio_zeropage zero = { 0 };
	static struct files f;
	struct stalled r = { 0 };
	struct uffd_msg msg;
	struct pollfd pfd;
	struct child_vmm c;
	size_t len = 64 * 1024;
	int uffd, n, got_fault = 0;
	long v;

	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
		tap_skip("no userfaultfd in this kernel",
			 "a reader stalled in a page fault does not hold back "
			 "a dead VMM's VM");
		if (uffd >= 0)
			close(uffd);
		return;
	}
	r.buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r.buf == MAP_FAILED)
		tap_bail("mmap: %s", strerror(errno));
	reg.range.start = (uintptr_t)r.buf;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg))
		tap_bail("UFFDIO_REGISTER: %s", strerror(errno));

	child_vmm_start(&c, 1, NULL, 7);
	files_open(&f, c.info.pid, c.info.vm_fd, 1);
	files_snapshot(&f);
	child_vmm_close_fds(&c);

	/* A read of the vCPU file into the untouched buffer: it faults. */
	r.fd = f.fd[1];
	r.len = f.a[1].size;
	pthread_create(&r.thread, NULL, stalled_read, &r);
	pfd = (struct pollfd){ .fd = uffd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) == 1 && read(uffd, &msg, sizeof(msg)) > 0 &&
	    msg.event == UFFD_EVENT_PAGEFAULT)
		got_fault = 1;
	tap_check(got_fault, "a pread of a stats fd sleeps in a page fault on "
			     "its buffer (userfaultfd)");

	child_vmm_kill(&c);
	n = kvm_uevent_wait(uev, "destroy", c.info.vm_creator_tid, 1,
			    UEVENT_MS);
	/* KVM sends the uevent from inside the reference kvmstats drops. */
	v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	tap_check(n == 1 && v == base_vms,
		  "with that reader asleep, a dead VMM's VM is still released "
		  "(destroy uevent: %s within %d s, live_vms %ld)",
		  n ? "yes" : "no", UEVENT_MS / 1000, v);

	/* Wake the reader: its read completes with the file. */
	zero.range.start = (uintptr_t)r.buf;
	zero.range.len = len;
	if (ioctl(uffd, UFFDIO_ZEROPAGE, &zero))
		tap_diag("UFFDIO_ZEROPAGE: %s", strerror(errno));
	pthread_join(r.thread, NULL);
	tap_check(r.ret == (ssize_t)r.len && !memcmp(r.buf, f.a[1].data, r.len),
		  "the woken reader's pread returns the whole vCPU file as "
		  "before the death (%zd)",
		  r.ret);
	if (n != 1) {
		n = kvm_uevent_wait(uev, "destroy", c.info.vm_creator_tid, 1,
				    UEVENT_MS);
		tap_diag("once the reader woke, the VM was %sreleased",
			 n == 1 ? "" : "still not ");
	}
	v = kvmstats_wait_live_vms(base_vms, SETTLE_MS);
	tap_check(v == base_vms, "stalled reader: live_vms back to %ld (%ld)",
		  base_vms, v);
	files_after_death(&f, "stalled reader: our fds, frozen");
	files_read_a(&f, 10, "stalled reader: our fds");
	files_close(&f);
	munmap(r.buf, len);
	close(uffd);
}

/*
 * A VMM that lets a VM go and lives on: the VM fd closed first (the vCPU
 * fds keep the VM, which keeps running), then everything.  Its other VM,
 * whose fds it keeps, stays live.
 */
static void check_vmm_lets_go(void)
{
	static struct files f, g;
	struct fz_vmm v;
	struct fz_vm *vm, *keep;
	uint64_t x, y;
	char s;
	long lv;
	int n;

	fz_start(&v);
	vm = fz_new_vm(&v, 2, 41);
	keep = fz_new_vm(&v, 1, 61);
	files_open(&f, v.pid, vm->info.vm_fd, 2);
	files_open(&g, v.pid, keep->info.vm_fd, 1);
	files_snapshot(&f);
	files_vs_native(&f, vm->native, "VMM lets a VM go: before");
	fz_close_copies(vm);
	fz_close_copies(keep);
	fz_cmd(&v, FZ_IO_LOOP, 0, 0);
	n = fz_cmd(&v, FZ_CLOSE_VM_FD, 0, 0);
	tap_check(n == 0, "VMM lets a VM go: it closed the VM fd (%d)", n);

	/* Longer than two periods of the module's search for such VMs. */
	msleep(2500);
	x = stats_read_stat(f.fd[1], STAT_IO_EXITS);
	y = stats_wait_above(f.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(y > x,
		  "VM fd closed, vCPU fds open and running: " STAT_IO_EXITS
		  " keeps "
		  "growing (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);
	tap_eq(kvmstats_live_vms(), base_vms + 2,
	       "VM fd closed: kvmstats still holds both VMs");

	fz_cmd(&v, FZ_FREE_VM, 0, 0);
	/* Its vCPUs are stopped and every fd closed: the values are final. */
	files_snapshot(&f);
	n = kvm_uevent_wait(uev, "destroy", vm->info.creator_tid, 1, UEVENT_MS);
	tap_check(n == 1,
		  "VMM closed every fd of the VM: KVM destroyed it (uevent "
		  "EVENT=destroy: %d of 1 within %d s)",
		  n, UEVENT_MS / 1000);
	lv = kvmstats_wait_live_vms(base_vms + 1, SETTLE_MS);
	tap_check(lv == base_vms + 1,
		  "and kvmstats holds only the VMM's other VM (live_vms %ld)",
		  lv);
	files_read_a(&f, FROZEN_RDS, "VMM let the VM go: our fds");
	s = proc_state(v.pid);
	tap_check(s && s != 'Z', "the VMM lives on (state %c)", s ? s : '?');

	x = stats_read_stat(g.fd[1], STAT_IO_EXITS);
	fz_cmd(&v, FZ_IO_LOOP, 1, 0);
	y = stats_wait_above(g.fd[1], STAT_IO_EXITS, x, 5000);
	tap_check(y > x,
		  "its other VM is live: " STAT_IO_EXITS
		  " grows (%llu -> %llu)",
		  (unsigned long long)x, (unsigned long long)y);

	fz_kill(&v);
	check_released(keep->info.creator_tid, 1,
		       "VMM that let a VM go, SIGKILLed");
	files_close(&f);
	files_close(&g);
}

int main(int argc, char **argv)
{
	long live, settled;

	/* The VMM's exec'd images (check_exec, check_never_frozen_alive). */
	if (argc > 1 && !strcmp(argv[1], "--exit"))
		return 0;
	if (argc > 1 && !strcmp(argv[1], "--idle")) {
		for (;;)
			pause();
	}

	/* Orphans of our VMMs (a clone(CLONE_VM) sibling) come back to us. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	kvm_test_init();
	vendor = rel_vendor();
	vendor_ko = rel_vendor_ko(vendor);
	dev = kvmstats_open();
	uev = kvm_uevent_open();
	settled = kvmstats_wait_settled(60000);
	tap_check(settled == 0,
		  "kvmstats holds no VM of earlier programs (live_vms %ld)",
		  settled);
	base_vms = settled;
	base_ref = rel_kvm_pins(vendor);
	live = rel_live_files();
	tap_diag("bases: live_vms %ld, %s %ld, live_files %ld", base_vms,
		 rel_kvm_what(vendor), base_ref, live);

	check_two_vms();
	check_never_frozen_alive();
	check_clone_vm_sibling();
	check_exec();
	check_late_fd();
	check_kill_and_unload();
	check_stalled_reader();
	check_vmm_lets_go();

	tap_eq(rel_live_files(), live, "live_files back to %ld at the end",
	       live);
	close(uev);
	close(dev);
	return tap_exit();
}
