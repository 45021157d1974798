// SPDX-License-Identifier: GPL-2.0-only
/*
 * Where kvmstats gives a VM back (issue 26): once its reference is the
 * VM's last, the VM is destroyed in kvmstats' own context, as KVM destroys
 * a VM whose last holder is not its VMM (a debugfs reader, a process that
 * was passed a stats fd): by the module's worker, or by whoever closes the
 * last stats file.  Never in a thread of the VMM, which kvmstats does not
 * pick, wake or borrow from.
 *
 * The destroy is observed from outside the module: a kprobe event on
 * kvm_arch_destroy_vm() records the task that runs it and its stack.
 *
 *  - A VMM that closes every fd of a VM and lives on (active: it returns
 *    to user space every 10 ms): the VM is destroyed by kvmstats' worker,
 *    not by the VMM, within 5 s (in a few hundred ms under TCG), and no
 *    kernel thread borrows an address space meanwhile (a kprobe on
 *    kthread_use_mm()); the files then read a frozen copy.
 *  - The same, then the agent closes the last stats files at once: the VM
 *    is destroyed by the agent's close or by the worker, never by the VMM.
 *  - A VMM asleep in the kernel: the same, as promptly: nothing waits for
 *    it.
 *  - A SIGKILLed VMM: by the worker, never by the agent holding files.
 *  - What a VMM keeps mapped after a give-back (x86 KVM unmaps its private
 *    memslots only in the VMM's own context): the same as after another
 *    process closes the VM's last native stats fd, KVM's own behaviour for
 *    a foreign last holder.  The figure is printed; on SVM without AVIC
 *    and on arm64 KVM maps no such pages, and both are 0.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "kvmstats_util.h"
#include "trace_util.h"

/* The scan runs every 100 ms; TCG and the RCU grace period take the rest. */
#define DESTROY_MS 5000

static int dev;
static long base_vms;

/* ---- a VMM that answers commands and returns to user space often ---- */

enum {
	CMD_NEW = 'n',	  /* a VM with one vCPU, run to HLT once */
	CMD_NATIVE = 'v', /* send the VM's native VM stats fd */
	CMD_FREE = 'z',	  /* close every fd of it, unmap its memory */
	CMD_SLEEP = 's',  /* asleep in read(2) until woken */
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
	int fd;
	char cmd;

	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN };

		/* Back in user space every 10 ms. */
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
		case CMD_NATIVE:
			fd = vm_get_stats_fd(vm);
			if (send_fds(sock, "k", 1, &fd, 1) < 0)
				_exit(2);
			close(fd);
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

static int vmm_native_fd(struct vmm *v)
{
	char cmd = CMD_NATIVE, ack;
	int fd = -1;

	if (write(v->sock, &cmd, 1) != 1 ||
	    recv_fds(v->sock, &ack, 1, &fd, 1) != 1)
		tap_bail("VMM %d sent no native stats fd", v->pid);
	return fd;
}

static void vmm_close(struct vmm *v)
{
	close(v->sock);
	close(v->wake[0]);
	close(v->wake[1]);
}

static void vmm_quit(struct vmm *v)
{
	char cmd = CMD_QUIT;
	int status;

	if (write(v->sock, &cmd, 1) != 1)
		tap_diag("VMM %d: its socket is broken", v->pid);
	if (waitpid(v->pid, &status, 0) != v->pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		tap_fail("VMM %d did not exit with status 0 (%#x)", v->pid,
			 status);
	vmm_close(v);
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

enum destroyer {
	BY_WORKER,	    /* kvmstats' worker, a kworker */
	BY_AGENT_OR_WORKER, /* this process's close, or the worker */
};

static bool is_worker(const struct destroy *d)
{
	return !strncmp(d->comm, "kworker", 7);
}

/*
 * The one destroy since the last clear happened where @want says, never in
 * the VMM @vmm or inside KVM_RUN, and live_vms is back to its base.
 */
static void check_destroyed(const char *when, pid_t vmm, enum destroyer want)
{
	struct destroy d[4];
	int n = destroy_trace_wait(d, 4, 1, DESTROY_MS), borrows;
	bool where;
	long vms;

	/* Anything more would come right after: a VM destroyed twice. */
	msleep(200);
	n = destroy_trace_read(d, 4);
	if (!tap_check(n == 1,
		       "%s: KVM destroyed the VM within %d ms (%d seen)", when,
		       DESTROY_MS, n))
		return;
	destroy_diag(&d[0], when);
	if (want == BY_WORKER)
		where = is_worker(&d[0]) && d[0].tid != getpid();
	else
		where = is_worker(&d[0]) || d[0].tid == getpid();
	tap_check(where, "%s: destroyed by %s (ran in %s-%d; agent %d, VMM %d)",
		  when,
		  want == BY_WORKER ? "kvmstats' worker" :
				      "the agent's close or kvmstats' worker",
		  d[0].comm, d[0].tid, getpid(), vmm);
	tap_check(
		d[0].tid != vmm && !destroy_in_foreign_task_work(&d[0]),
		"%s: not in the VMM's thread, nor in task work but a file's release",
		when);
	tap_check(destroy_stack_whole(&d[0]) &&
			  !destroy_on_stack(&d[0], "kvm_arch_vcpu_ioctl_run"),
		  "%s: not inside KVM_RUN (a whole stack of %d frames)", when,
		  d[0].depth);
	borrows = destroy_trace_borrows();
	tap_check(
		borrows == 0,
		"%s: no kernel thread borrowed an address space (%d kthread_use_mm() calls)",
		when, borrows);
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
	destroy_trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	check_destroyed("VMM closed its fds and lives on", v.pid, BY_WORKER);
	frozen_check(fds, "VMM closed its fds and lives on");
	close(fds[0]);
	close(fds[1]);

	/* Our files are the last holders, and we close them at once. */
	vmm_new_vm(&v);
	open_files(&v, fds);
	destroy_trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	close(fds[0]);
	close(fds[1]);
	check_destroyed("the agent closes the last stats files", v.pid,
			BY_AGENT_OR_WORKER);
	vmm_quit(&v);
}

static void case_vmm_sleeps(void)
{
	struct vmm v;
	int fds[2];

	vmm_start(&v);
	vmm_new_vm(&v);
	open_files(&v, fds);
	destroy_trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	child_send(v.sock, v.pid, CMD_SLEEP);
	check_destroyed("VMM asleep in the kernel", v.pid, BY_WORKER);
	frozen_check(fds, "VMM asleep in the kernel");
	close(fds[0]);
	close(fds[1]);
	if (write(v.wake[1], "w", 1) != 1)
		tap_bail("write: %s", strerror(errno));
	msleep(100);
	tap_check(destroy_trace_read((struct destroy[2]){}, 2) == 1,
		  "VMM woke: nothing destroyed twice");
	vmm_quit(&v);
}

static void case_vmm_exits(void)
{
	struct vmm v;
	int fds[2];

	vmm_start(&v);
	vmm_new_vm(&v);
	open_files(&v, fds);
	destroy_trace_clear();
	kill(v.pid, SIGKILL);
	waitpid(v.pid, NULL, 0);
	check_destroyed("VMM SIGKILLed", v.pid, BY_WORKER);
	frozen_check(fds, "VMM SIGKILLed");
	close(fds[0]);
	close(fds[1]);
	vmm_close(&v);
}

/*
 * What the VMM keeps mapped once a VM it let go is destroyed by someone
 * else: by kvmstats' worker, against by this process closing the VM's
 * last native stats fd (KVM's own give-back by a foreign holder).
 */
static void case_left_mapped(void)
{
	int m0, m_ours, m_native, fds[2], nfd;
	struct destroy d[2];
	struct vmm v;

	vmm_start(&v);
	m0 = vmm_maps(v.pid);

	vmm_new_vm(&v);
	open_files(&v, fds);
	destroy_trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	destroy_trace_wait(d, 2, 1, DESTROY_MS);
	close(fds[0]);
	close(fds[1]);
	m_ours = vmm_maps(v.pid);

	vmm_new_vm(&v);
	nfd = vmm_native_fd(&v);
	destroy_trace_clear();
	child_send(v.sock, v.pid, CMD_FREE);
	close(nfd);
	tap_check(
		destroy_trace_wait(d, 2, 1, DESTROY_MS) == 1 &&
			d[0].tid == getpid(),
		"native: the agent's close of the last native stats fd destroyed the VM (in %s-%d)",
		d[0].comm, d[0].tid);
	m_native = vmm_maps(v.pid);

	tap_diag(
		"VMM mappings: %d before, %d after kvmstats gave a VM back, %d after a native stats fd's holder did",
		m0, m_ours, m_native);
	tap_check(
		m_ours - m0 == m_native - m_ours,
		"the VMM keeps what KVM leaves to a foreign holder: %d mappings per VM, as native (%d)",
		m_ours - m0, m_native - m_ours);
	vmm_quit(&v);
}

int main(void)
{
	int r;

	kvm_test_init();
	dev = kvmstats_open();
	base_vms = kvmstats_wait_settled(10000);
	r = destroy_trace_setup("kvmstats82");
	if (r) {
		tap_fail("a kprobe event on kvm_arch_destroy_vm (%s)",
			 strerror(-r));
		return tap_exit();
	}
	tap_pass("a kprobe event with stack traces on kvm_arch_destroy_vm");

	case_vmm_lives();
	case_vmm_sleeps();
	case_vmm_exits();
	case_left_mapped();

	destroy_trace_teardown();
	close(dev);
	return tap_exit();
}
