// SPDX-License-Identifier: GPL-2.0-only
/*
 * Where and when kvmstats gives a VM back (issue 17): once its reference is
 * the VM's last, the VM is destroyed where KVM itself would destroy it.
 *
 * The destroy is observed from outside the module: a kprobe event on
 * kvm_arch_destroy_vm() records the task that runs it.
 *
 *  - A VMM that closes every fd of a VM and lives on (active: it returns
 *    to user space every few ms) destroys it in its own thread, the one
 *    that created the VM, while kvmstats' files stay open; the files then
 *    read a frozen copy that never changes.
 *  - The same when kvmstats' files are the VM's last holders and are
 *    closed: the agent's close does not destroy the VM, the VMM does.
 *  - A VMM that exits: the VM is destroyed by kvmstats' worker, never by
 *    the agent that still holds stats files.
 *  - A VMM whose threads all sleep in the kernel: the worker gives the VM
 *    back after the hand-over timeout, and when the VMM wakes, nothing
 *    more happens (the module's reference count returns to its base).
 *  - Where KVM maps private memslots into the VMM (x86 VMX, AVIC), the
 *    VMM's mappings are back to their count after cycling VMs under
 *    monitoring; elsewhere a SKIP says so.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "kvmstats_util.h"
#include "rel_util.h"

#define DESTROY_MS 15000 /* generous: TCG, and the hand-over timeout */
#define EVENT	   "kvmstats82/destroy"

static int dev;
static long base_vms;
static char tracing[64];

/* ---- the destroy context, from a kprobe event ---- */

static int write_file(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static int tracing_path(char *buf, size_t len, const char *name)
{
	return snprintf(buf, len, "%s/%s", tracing, name) < (int)len ? 0 : -1;
}

static int trace_setup(void)
{
	static const char *const dirs[] = { "/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing" };
	char path[160];
	unsigned int i;
	int r;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/kprobe_events", dirs[i]);
		if (!access(path, W_OK))
			break;
	}
	if (i == 2) {
		/* debugfs=off: tracefs has a mount point of its own. */
		if (mount("nodev", dirs[0], "tracefs", 0, NULL))
			return -errno;
		i = 0;
	}
	snprintf(tracing, sizeof(tracing), "%s", dirs[i]);
	tracing_path(path, sizeof(path), "kprobe_events");
	r = write_file(path, "p:" EVENT " kvm_arch_destroy_vm\n", O_APPEND);
	if (r)
		return r;
	tracing_path(path, sizeof(path), "events/" EVENT "/enable");
	return write_file(path, "1", 0);
}

static void trace_teardown(void)
{
	char path[160];

	tracing_path(path, sizeof(path), "events/" EVENT "/enable");
	write_file(path, "0", 0);
	tracing_path(path, sizeof(path), "kprobe_events");
	write_file(path, "-:" EVENT "\n", O_APPEND);
}

static void trace_clear(void)
{
	char path[160];

	tracing_path(path, sizeof(path), "trace");
	write_file(path, "", O_TRUNC);
}

struct destroy {
	pid_t tid;
	char comm[32];
};

static void task_comm(pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		buf[strcspn(buf, "\n")] = 0;
	}
}

/* The destroys recorded since trace_clear(), at most @max. */
static int trace_read(struct destroy *d, int max)
{
	char path[160], line[512];
	int n = 0;
	FILE *f;

	tracing_path(path, sizeof(path), "trace");
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (n < max && fgets(line, sizeof(line), f)) {
		char *task = line, *bracket, *dash;

		if (line[0] == '#' || !strstr(line, "destroy:"))
			continue;
		/* "           comm-TID     [CPU] ....  TIME: destroy: (...)" */
		bracket = strstr(line, " [");
		if (!bracket)
			continue;
		*bracket = 0;
		while (*task == ' ')
			task++;
		dash = strrchr(task, '-');
		if (!dash)
			continue;
		*dash = 0;
		d[n].tid = atoi(dash + 1);
		snprintf(d[n].comm, sizeof(d[n].comm), "%.31s", task);
		/* "<...>": the tracer has no name saved for it; a kworker lives on. */
		if (!strcmp(d[n].comm, "<...>"))
			task_comm(d[n].tid, d[n].comm, sizeof(d[n].comm));
		n++;
	}
	fclose(f);
	return n;
}

static int trace_wait(struct destroy *d, int want, unsigned int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int n;

	for (;;) {
		n = trace_read(d, want);
		if (n >= want || now_ns() > deadline)
			return n;
		msleep(20);
	}
}

/* ---- a VMM that answers commands and returns to user space often ---- */

enum {
	CMD_NEW = 'n',	 /* a VM with one vCPU, run to HLT once */
	CMD_FREE = 'z',	 /* close every fd of it, unmap its memory */
	CMD_SLEEP = 's', /* every thread asleep in the kernel until woken */
	CMD_QUIT = 'q',
};

struct vmm {
	pid_t pid;
	int sock;
	int wake[2]; /* CMD_SLEEP waits for a byte here */
	int vm_fd;   /* the current VM's fd number in the VMM */
};

static void vmm_main(int sock, void *arg)
{
	int wake = *(const int *)arg;
	struct vm *vm = NULL;
	char cmd;

	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN };

		/* Back in user space every 10 ms: task work runs here. */
		if (poll(&p, 1, 10) <= 0)
			continue;
		if (read(sock, &cmd, 1) != 1)
			_exit(0);
		switch (cmd) {
		case CMD_NEW:
			vm = vm_create(1, NULL);
			vcpu_load_prog(vm->vcpus[0], GUEST_IO_COUNT, 3);
			vcpu_run_to_hlt(vm->vcpus[0]);
			if (write(sock, &vm->fd, sizeof(vm->fd)) !=
			    sizeof(vm->fd))
				_exit(2);
			continue;
		case CMD_FREE:
			vm_free(vm);
			vm = NULL;
			break;
		case CMD_SLEEP:
			if (write(sock, "k", 1) != 1 || read(wake, &cmd, 1) < 0)
				_exit(2);
			continue;
		case CMD_QUIT:
			_exit(0);
		}
		if (write(sock, "k", 1) != 1)
			_exit(2);
	}
}

static void vmm_start(struct vmm *v)
{
	if (pipe2(v->wake, O_CLOEXEC))
		tap_bail("pipe: %s", strerror(errno));
	v->pid = child_fork(&v->sock, vmm_main, &v->wake[0], false);
}

static void vmm_new_vm(struct vmm *v)
{
	char cmd = CMD_NEW;

	if (write(v->sock, &cmd, 1) != 1 ||
	    read(v->sock, &v->vm_fd, sizeof(v->vm_fd)) != sizeof(v->vm_fd))
		tap_bail("VMM %d made no VM", v->pid);
}

static void vmm_quit(struct vmm *v)
{
	char cmd = CMD_QUIT;

	if (write(v->sock, &cmd, 1) != 1)
		tap_diag("VMM %d: its socket is broken", v->pid);
	waitpid(v->pid, NULL, 0);
	close(v->sock);
	close(v->wake[0]);
	close(v->wake[1]);
}

static int vmm_maps(pid_t pid)
{
	char path[64], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n;
}

/* ---- the cases ---- */

/* Our two stats files of the VMM's current VM. */
static void open_files(const struct vmm *v, int fds[2])
{
	fds[0] = kvmstats_get_stats_fd(dev, v->pid, v->vm_fd, -1);
	fds[1] = kvmstats_get_stats_fd(dev, v->pid, v->vm_fd, 0);
}

static void check_destroyed_by(const char *when, pid_t want_tid,
			       bool want_worker)
{
	struct destroy d[4];
	int n = trace_wait(d, 1, DESTROY_MS);
	long vms;

	if (!tap_check(n == 1, "%s: KVM destroyed the VM (%d destroys seen)",
		       when, n))
		return;
	tap_diag("%s: kvm_arch_destroy_vm ran in %s-%d", when, d[0].comm,
		 d[0].tid);
	if (want_worker)
		tap_check(
			d[0].tid != want_tid && d[0].tid != getpid() &&
				!strncmp(d[0].comm, "kworker", 7),
			"%s: destroyed by kvmstats' worker (%s-%d), not by the agent (%d) or the VMM (%d)",
			when, d[0].comm, d[0].tid, getpid(), want_tid);
	else
		tap_check(
			d[0].tid == want_tid,
			"%s: destroyed in the VMM's own thread %d (ran in %s-%d)",
			when, want_tid, d[0].comm, d[0].tid);
	vms = kvmstats_wait_live_vms(base_vms, DESTROY_MS);
	tap_check(vms == base_vms, "%s: live_vms back to %ld (%ld)", when,
		  base_vms, vms);
}

static void frozen_check(int fds[2], const char *when)
{
	static struct stats_blob a, b;
	int i;

	for (i = 0; i < 2; i++) {
		stats_read_all(fds[i], &a, "frozen");
		msleep(50);
		stats_read_all(fds[i], &b, "frozen again");
		tap_check(stats_blob_equal(&a, &b, when),
			  "%s: %s file reads the same frozen bytes twice", when,
			  i ? "vCPU" : "VM");
	}
}

static void case_vmm_lives(void)
{
	struct vmm v;
	int fds[2];

	vmm_start(&v);
	vmm_new_vm(&v);
	open_files(&v, fds);
	trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	check_destroyed_by("VMM closed its fds and lives on", v.pid, false);
	frozen_check(fds, "VMM closed its fds and lives on");
	close(fds[0]);
	close(fds[1]);

	/* Our files are the last holders, and we close them at once. */
	vmm_new_vm(&v);
	open_files(&v, fds);
	trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	close(fds[0]);
	close(fds[1]);
	check_destroyed_by("the agent closes the last stats files", v.pid,
			   false);
	vmm_quit(&v);
}

static void case_vmm_exits(void)
{
	struct vmm v;
	int fds[2];

	vmm_start(&v);
	vmm_new_vm(&v);
	open_files(&v, fds);
	trace_clear();
	kill(v.pid, SIGKILL);
	waitpid(v.pid, NULL, 0);
	check_destroyed_by("VMM SIGKILLed", v.pid, true);
	frozen_check(fds, "VMM SIGKILLed");
	close(fds[0]);
	close(fds[1]);
	close(v.sock);
	close(v.wake[0]);
	close(v.wake[1]);
}

static void case_vmm_sleeps(void)
{
	long base_ref = rel_refcnt("kvmstats"), ref;
	struct vmm v;
	int fds[2];

	vmm_start(&v);
	vmm_new_vm(&v);
	open_files(&v, fds);
	close(fds[1]);
	trace_clear();
	/* Back to back: it is asleep before the next scan hands it over. */
	child_send(v.sock, v.pid, CMD_FREE);
	child_send(v.sock, v.pid, CMD_SLEEP);
	check_destroyed_by("VMM asleep in the kernel", v.pid, true);
	close(fds[0]);

	/* It wakes: the task work left for it runs and does nothing. */
	if (write(v.wake[1], "w", 1) != 1)
		tap_bail("write: %s", strerror(errno));
	ref = rel_wait_value(rel_refcnt, "kvmstats", base_ref, DESTROY_MS);
	tap_check(
		ref == base_ref,
		"VMM woke: kvmstats' refcnt back to %ld, the task work left for the VMM gone (%ld)",
		base_ref, ref);
	tap_check(trace_read((struct destroy[2]){}, 2) == 1,
		  "VMM woke: nothing destroyed twice");
	vmm_quit(&v);
}

/*
 * KVM's private memslots (x86: the APIC access page, the identity map and
 * TSS) are mapped into the VMM and unmapped only in the VMM's own context.
 */
static void case_private_memslots(void)
{
	int m0, m1, m_end, fds[2], i;
	struct destroy d[2];
	struct vmm v;

	vmm_start(&v);
	m0 = vmm_maps(v.pid);
	vmm_new_vm(&v);
	m1 = vmm_maps(v.pid);
	child_send(v.sock, v.pid, CMD_FREE);
	tap_diag(
		"VMM mappings: %d before a VM, %d with it (the VM's memory and kvm_run are 2)",
		m0, m1);
	if (m1 - m0 <= 2) {
		tap_skip(
			"this platform's KVM maps no private memslots into the VMM (x86 SVM without AVIC, arm64)",
			"the VMM's mappings after cycling VMs under monitoring");
		vmm_quit(&v);
		return;
	}
	for (i = 0; i < 5; i++) {
		vmm_new_vm(&v);
		open_files(&v, fds);
		trace_clear();
		child_send(v.sock, v.pid, CMD_FREE);
		trace_wait(d, 1, DESTROY_MS);
		close(fds[0]);
		close(fds[1]);
	}
	m_end = vmm_maps(v.pid);
	tap_check(
		m_end == m0,
		"after 5 VMs cycled under monitoring the VMM has its %d mappings (%d)",
		m0, m_end);
	vmm_quit(&v);
}

int main(void)
{
	int r;

	kvm_test_init();
	dev = kvmstats_open();
	base_vms = kvmstats_wait_settled(10000);
	r = trace_setup();
	if (r) {
		tap_fail("a kprobe event on kvm_arch_destroy_vm (%s)",
			 strerror(-r));
		return tap_exit();
	}
	tap_pass("a kprobe event on kvm_arch_destroy_vm in %s", tracing);

	case_vmm_lives();
	case_vmm_exits();
	case_vmm_sleeps();
	case_private_memslots();

	trace_teardown();
	close(dev);
	return tap_exit();
}
