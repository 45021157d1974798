// SPDX-License-Identifier: GPL-2.0-only
/*
 * No read returns a value that a later read takes back (issue 17, review
 * item 4), with the window widened on purpose: a debug build of kvmstats
 * (KVMSTATS_DEBUG=y, /modules/kvmstats-debug.ko, which make check builds
 * for every kernel) busy-waits read_delay_ms inside the read section of
 * the next read by thread read_delay_tid (this test's reader: a read by
 * anyone else in the guest is not delayed and leaves the knob alone), after it loaded the file's data pointer and before it copies.
 * Meanwhile the VM is frozen, and then changes:
 *
 *  - VMM closes every fd of the VM and lives on: kvmstats freezes the VM
 *    (its "freezes" counter says when), then the VMM unmaps the guest's
 *    memory, and KVM zaps the VM's page tables (pages_4k drops, seen live
 *    in KVM's debugfs where there is one).  The delayed read must return
 *    what every read after it returns: the frozen values.
 *  - VMM SIGKILLed: KVM tears the VM's MMU down at the VMM's exit, before
 *    its files close; kvmstats freezes after that, with the values KVM
 *    left (pages_4k 0).  The delayed read returns either what the VM had
 *    before the exit (if it copied before KVM's teardown, which may itself
 *    wait for the delayed reader's RCU section) or what every later read
 *    returns, never the teardown's values while later reads return older
 *    ones, as 718b7de's module did.
 *
 * The delayed reader spins with preemption disabled, so it runs alone on
 * the last CPU and everything else (this test, the VMM) on CPU 0: a task
 * woken onto the reader's CPU would wait out the delay, and the VMM's
 * close would end after the read instead of inside it.
 *
 * The test swaps the debug build in for the normal module and back.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "freeze_util.h"
#include "kvmstats_util.h"
#include "rel_util.h"

#define DELAY_MS  3000
#define FREEZE_MS 2000 /* well inside DELAY_MS */

static int dev;

static long param(const char *name)
{
	return kvmstats_param(name);
}

static int set_param(const char *name, long v)
{
	char buf[64];
	int fd, n;

	snprintf(buf, sizeof(buf), "/sys/module/kvmstats/parameters/%s", name);
	fd = open(buf, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%ld", v);
	n = write(fd, buf, n) == n ? 0 : -errno;
	close(fd);
	return n;
}

/* Delay the calling thread's next read by @ms; nobody else's. */
static int set_delay(int ms)
{
	int err = set_param("read_delay_tid", gettid());

	return err ? err : set_param("read_delay_ms", ms);
}

/* ---- a VMM that lets go of its VM in steps ---- */

enum {
	CMD_CLOSE = 'c', /* close the VM and vCPU fds, unmap kvm_run */
	CMD_UNMAP = 'u', /* unmap the guest's memory */
};

struct vmm {
	pid_t pid;
	int sock;
	int vm_fd;
};

static void vmm_main(int sock, void *arg __attribute__((unused)))
{
	struct vm *vm = vm_create(1, NULL);
	struct vcpu *vcpu = vm->vcpus[0];
	char cmd;

	vcpu_load_prog(vcpu, GUEST_IO_COUNT, 20);
	vcpu_run_to_hlt(vcpu);
	if (write(sock, &vm->fd, sizeof(vm->fd)) != sizeof(vm->fd))
		_exit(2);
	while (read(sock, &cmd, 1) == 1) {
		if (cmd == CMD_CLOSE) {
			munmap(vcpu->run, vcpu->run_size);
			close(vcpu->fd);
			close(vm->fd);
			close(vm->kvm_fd);
		} else if (cmd == CMD_UNMAP) {
			munmap(vm->mem, GUEST_MEM_SIZE);
		}
		if (write(sock, "k", 1) != 1)
			_exit(2);
	}
	_exit(0);
}

static void vmm_start(struct vmm *v)
{
	v->pid = child_fork(&v->sock, vmm_main, NULL, false);
	if (read(v->sock, &v->vm_fd, sizeof(v->vm_fd)) != sizeof(v->vm_fd))
		tap_bail("the VMM made no VM");
}

static void vmm_end(struct vmm *v)
{
	close(v->sock);
	waitpid(v->pid, NULL, 0);
}

/* ---- the delayed reader ---- */

struct reader {
	int fd;
	pthread_t thread;
	struct stats_blob blob;
	ssize_t len;
	int err;
	uint64_t t0, t1; /* the read's start and end */
	volatile int started, done;
};

static int reader_cpu;

static void *reader_fn(void *arg)
{
	struct reader *r = arg;

	pin_self_to(reader_cpu);
	r->err = set_delay(DELAY_MS);
	r->t0 = now_ns();
	__atomic_store_n(&r->started, 1, __ATOMIC_SEQ_CST);
	if (!r->err)
		r->len = __stats_read_all(r->fd, &r->blob);
	r->t1 = now_ns();
	__atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void reader_start(struct reader *r, int fd)
{
	r->fd = fd;
	r->started = r->done = 0;
	if (pthread_create(&r->thread, NULL, reader_fn, r))
		tap_bail("pthread_create failed");
	while (!__atomic_load_n(&r->started, __ATOMIC_SEQ_CST))
		msleep(1);
	if (r->err)
		tap_bail("read_delay_tid, read_delay_ms: %s",
			 strerror(-r->err));
	/* Well inside its read section by now. */
	msleep(300);
}

/* The read took the delay: the window the test needs was there. */
static void check_delayed(struct reader *r, const char *when)
{
	double ms = (r->t1 - r->t0) / 1e6;

	tap_check(
		ms >= DELAY_MS,
		"%s: the read was delayed in its read section (%.0f ms, want >= %d)",
		when, ms, DELAY_MS);
}

/* The freezes counter past @before, and how long that took. */
static bool wait_freeze(long before, const char *when)
{
	uint64_t t0 = now_ns(), deadline = t0 + FREEZE_MS * 1000000ull;
	long f;

	while ((f = param("freezes")) == before && now_ns() < deadline)
		msleep(10);
	tap_diag("%s: freezes %ld -> %ld after %.0f ms", when, before, f,
		 (now_ns() - t0) / 1e6);
	return f > before;
}

/* KVM's own live value of a VM statistic, from debugfs; -1 without it. */
static long debugfs_stat(pid_t pid, int vm_fd, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/%s", pid,
		 vm_fd, name);
	return rel_read_long(path);
}

/*
 * Whether the VM file has the page counts (pages_4k) that KVM's MMU
 * teardown and unmaps move after a freeze: x86's.  arm64's VM file has
 * only remote_tlb_flush and remote_tlb_flush_requests, which its stage-2
 * unmaps do not count (they invalidate the TLB themselves), so there no
 * VM statistic moves once a VM is frozen: no read can be taken back, and
 * the race is not there to provoke.
 */
#define NO_PAGE_COUNTS                                                     \
	"this KVM's VM file has no page counts (pages_4k): nothing in it " \
	"moves after a freeze"

static bool has_page_counts(int fd)
{
	static struct stats_blob blob;

	stats_read_all(fd, &blob, "VM");
	return stats_find(&blob, "pages_4k") != NULL;
}

static void check_no_revert(struct reader *r, int fd, const char *when)
{
	static struct stats_blob later;

	pthread_join(r->thread, NULL);
	if (!tap_check(r->len > 0, "%s: the delayed read succeeded (%zd)", when,
		       r->len))
		return;
	check_delayed(r, when);
	stats_read_all(fd, &later, "a later read");
	tap_check(
		stats_blob_equal(&r->blob, &later, when),
		"%s: the delayed read returned what the reads after it return",
		when);
	tap_diag("%s: pages_4k %llu in the delayed read, %llu after", when,
		 (unsigned long long)stats_value(&r->blob, "pages_4k", 0),
		 (unsigned long long)stats_value(&later, "pages_4k", 0));
}

static void case_close_then_unmap(void)
{
	const char *when = "VMM closed its fds, then unmapped the guest";
	struct reader r;
	long frz, live;
	uint64_t frozen, t0;
	struct vmm v;
	int fd;

	vmm_start(&v);
	fd = kvmstats_get_stats_fd(dev, v.pid, v.vm_fd, -1);
	if (!has_page_counts(fd)) {
		tap_skip(NO_PAGE_COUNTS, "%s: reads racing the freeze", when);
		goto out;
	}
	tap_check(stats_read_stat(fd, "pages_4k") > 0,
		  "%s: the guest's memory is mapped (pages_4k %llu)", when,
		  (unsigned long long)stats_read_stat(fd, "pages_4k"));

	reader_start(&r, fd);
	frz = param("freezes");
	t0 = now_ns();
	child_send(v.sock, v.pid, CMD_CLOSE);
	tap_diag("%s: the VMM's close took %.0f ms", when,
		 (now_ns() - t0) / 1e6);
	tap_check(wait_freeze(frz, when) && !r.done,
		  "%s: frozen while the delayed read is in its read section",
		  when);
	child_send(v.sock, v.pid, CMD_UNMAP);
	live = debugfs_stat(v.pid, v.vm_fd, "pages_4k");
	check_no_revert(&r, fd, when);
	frozen = stats_read_stat(fd, "pages_4k");
	if (live >= 0)
		tap_check(
			(uint64_t)live != frozen,
			"%s: the VM changed after its freeze (pages_4k live %ld, frozen %llu): the window was real",
			when, live, (unsigned long long)frozen);
	else
		tap_skip("no debugfs: KVM's live values cannot be seen",
			 "%s: the VM changed after its freeze", when);
out:
	close(fd);
	vmm_end(&v);
}

static void case_sigkill(void)
{
	const char *when = "VMM SIGKILLed";
	static struct stats_blob before, later;
	struct reader r;
	struct vmm v;
	long frz;
	int fd;

	vmm_start(&v);
	fd = kvmstats_get_stats_fd(dev, v.pid, v.vm_fd, -1);
	if (!has_page_counts(fd)) {
		tap_skip(NO_PAGE_COUNTS, "%s: reads racing the freeze", when);
		close(fd);
		vmm_end(&v);
		return;
	}
	stats_read_all(fd, &before, "before the kill");
	reader_start(&r, fd);
	frz = param("freezes");
	kill(v.pid, SIGKILL);
	waitpid(v.pid, NULL, 0);
	close(v.sock);
	tap_check(wait_freeze(frz, when), "%s: frozen", when);
	pthread_join(r.thread, NULL);
	if (!tap_check(r.len > 0, "%s: the delayed read succeeded (%zd)", when,
		       r.len))
		goto out;
	check_delayed(&r, when);
	stats_read_all(fd, &later, "a later read");
	tap_eq(stats_value(&later, "pages_4k", 0), 0,
	       "%s: frozen after KVM's teardown of the VM's MMU", when);
	tap_diag(
		"%s: pages_4k %llu before the kill, %llu in the delayed read, %llu after",
		when, (unsigned long long)stats_value(&before, "pages_4k", 0),
		(unsigned long long)stats_value(&r.blob, "pages_4k", 0),
		(unsigned long long)stats_value(&later, "pages_4k", 0));
	tap_check(
		(r.blob.size == later.size &&
		 !memcmp(r.blob.data, later.data, later.size)) ||
			(r.blob.size == before.size &&
			 !memcmp(r.blob.data, before.data, before.size)),
		"%s: the delayed read returned the VM before its exit or what every later read returns",
		when);
out:
	close(fd);
}

int main(void)
{
	const char *vendor = rel_vendor();
	int r;

	kvm_test_init();
	reader_cpu = sysconf(_SC_NPROCESSORS_ONLN) - 1;
	if (reader_cpu < 1) {
		tap_skip(
			"the guest has one CPU",
			"reads racing a freeze (the delayed reader needs a CPU of its own)");
		return tap_exit();
	}
	pin_self_to(0);
	if (!rel_module_shipped("kvmstats-debug.ko")) {
		tap_skip(
			"no debug build of kvmstats in the guest (make check builds one)",
			"reads racing a freeze");
		return tap_exit();
	}
	kvmstats_wait_settled(10000);
	r = rel_unload_module_wait("kvmstats", 10000);
	if (!r)
		r = rel_load_module("kvmstats-debug.ko");
	if (!tap_check(!r && param("freezes") >= 0,
		       "the debug build of kvmstats is loaded (%s)",
		       r ? strerror(-r) : "ok"))
		goto out;
	dev = kvmstats_open();

	case_close_then_unmap();
	case_sigkill();

	close(dev);
	kvmstats_wait_settled(10000);
	r = rel_unload_module_wait("kvmstats", 10000);
	tap_check(!r, "the debug build unloads (%s)", r ? strerror(-r) : "ok");
out:
	r = rel_restore_modules();
	tap_check(!r && rel_module_loaded("kvmstats") &&
			  (!vendor || rel_module_loaded(vendor)),
		  "the normal modules are back");
	return tap_exit();
}
