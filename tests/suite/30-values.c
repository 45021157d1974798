// SPDX-License-Identifier: GPL-2.0-only
/*
 * Values from real guests, read through kvmstats:
 *  - a guest doing exactly N port writes then HLT: io_exits == N and
 *    halt_exits == 1, equal to the native fd;
 *  - a guest doing exactly M MMIO writes: mmio_exits == M;
 *  - counters growing while a vCPU thread runs a port-I/O loop;
 *  - a read returning promptly while a vCPU spins in KVM_RUN ("jmp ."),
 *    while native KVM_GET_STATS_FD on that vCPU blocks on vcpu->mutex.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "kvmstats_util.h"

#define IO_EXITS   1000
#define MMIO_EXITS 300

static void check_exact_counts(int dev)
{
	int ours, native, ours_vm, native_vm;
	struct vm *vm;
	uint64_t v;

	vm = vm_create(1, NULL);
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	native = vcpu_get_stats_fd(vm->vcpus[0]);
	tap_eq(stats_read_stat(ours, STAT_IO_EXITS), 0,
	       "fresh vCPU: " STAT_IO_EXITS " is 0");

	vcpu_load_prog(vm->vcpus[0], GUEST_IO_COUNT, IO_EXITS);
	vcpu_run_to_hlt(vm->vcpus[0]);
	tap_eq(vm->vcpus[0]->nr_io, IO_EXITS, "VMM saw %d KVM_EXIT_IO (sanity)",
	       IO_EXITS);
	v = stats_read_stat(ours, STAT_IO_EXITS);
	tap_eq(v, IO_EXITS,
	       STAT_IO_EXITS " read through kvmstats is exactly %d", IO_EXITS);
	tap_eq(v, stats_read_stat(native, STAT_IO_EXITS),
	       STAT_IO_EXITS " equals the native fd's");
	tap_eq(stats_read_stat(ours, STAT_END_EXITS), 1,
	       STAT_END_EXITS " is exactly 1");
	tap_check(stats_read_stat(ours, "exits") >= IO_EXITS + 1,
		  "exits >= " STAT_IO_EXITS " + " STAT_END_EXITS);

	vcpu_load_prog(vm->vcpus[0], GUEST_MMIO_COUNT, MMIO_EXITS);
	vcpu_run_to_hlt(vm->vcpus[0]);
	tap_eq(vm->vcpus[0]->nr_mmio, MMIO_EXITS,
	       "VMM saw %d KVM_EXIT_MMIO (sanity)", MMIO_EXITS);
	tap_eq(stats_read_stat(ours, STAT_MMIO_EXITS),
	       MMIO_EXITS + (STAT_IO_IS_MMIO ? IO_EXITS : 0),
	       STAT_MMIO_EXITS " read through kvmstats grew by exactly %d",
	       MMIO_EXITS);
	if (STAT_IO_IS_MMIO)
		tap_eq(stats_read_stat(ours, STAT_IO_EXITS),
		       IO_EXITS + MMIO_EXITS,
		       STAT_IO_EXITS " counts both guests' stores");
	else
		tap_eq(stats_read_stat(ours, STAT_IO_EXITS), IO_EXITS,
		       STAT_IO_EXITS " unchanged by the MMIO guest");
	tap_eq(stats_read_stat(ours, STAT_END_EXITS), 2,
	       STAT_END_EXITS " is now 2");
	stats_fds_identical(ours, native,
			    "vCPU file identical to native after the guests");

	ours_vm = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	native_vm = vm_get_stats_fd(vm);
	stats_fds_identical(ours_vm, native_vm,
			    "VM file identical to native after the guests");

	close(ours_vm);
	close(native_vm);
	close(ours);
	close(native);
	vm_free(vm);
}

static void check_growing(int dev)
{
	uint64_t a, b, c;
	struct vm *vm;
	struct vcpu *vcpu;
	int ours, native;

	vm = vm_create(1, NULL);
	vcpu = vm->vcpus[0];
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	vcpu_load_prog(vcpu, GUEST_IO_LOOP, 0);
	vcpu_thread_start(vcpu);
	vcpu_thread_wait_running(vcpu);

	a = stats_read_stat(ours, STAT_IO_EXITS);
	b = stats_wait_above(ours, STAT_IO_EXITS, a, 5000);
	c = stats_wait_above(ours, STAT_IO_EXITS, b, 5000);
	tap_diag(STAT_IO_EXITS " while running: %llu, %llu, %llu",
		 (unsigned long long)a, (unsigned long long)b,
		 (unsigned long long)c);
	tap_check(a < b && b < c,
		  STAT_IO_EXITS " grows while the vCPU runs a port-I/O loop");

	vcpu_thread_stop(vcpu);
	tap_eq(vcpu->thread_err, 0, "vCPU thread ran without error");
	native = vcpu_get_stats_fd(vcpu);
	a = stats_read_stat(ours, STAT_IO_EXITS);
	tap_eq(a, vcpu->nr_io,
	       "after stopping: " STAT_IO_EXITS
	       " equals the exits the VMM saw");
	tap_eq(a, stats_read_stat(native, STAT_IO_EXITS),
	       "after stopping: " STAT_IO_EXITS " equals native");
	stats_fds_identical(ours, native,
			    "after stopping: vCPU file identical to native");
	close(native);
	close(ours);
	vm_free(vm);
}

/*
 * Native KVM_GET_STATS_FD on a running vCPU, from another thread: @started
 * is set right before the call, @done right after it returns.
 */
struct native_call {
	struct vcpu *vcpu;
	bool fault;
	volatile pid_t tid;
	volatile int started, done;
	int fd;
};

static void *native_thread(void *arg)
{
	struct native_call *nc = arg;

	nc->tid = sys_gettid();
	__atomic_store_n(&nc->started, 1, __ATOMIC_SEQ_CST);
	/* Fault 30-native-unblocked: the VM's file, behind no vCPU mutex. */
	nc->fd = nc->fault ? __vm_get_stats_fd(nc->vcpu->vm) :
			     __vcpu_get_stats_fd(nc->vcpu);
	__atomic_store_n(&nc->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Thread @tid's state letter and wchan, for the record. */
static void task_where(pid_t tid, char *state, char *wchan, size_t len)
{
	char path[64], buf[512], *p;
	int fd;
	ssize_t n;

	*state = '?';
	snprintf(wchan, len, "?");
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ')
			*state = p[2];
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, wchan, len - 1);
	if (fd >= 0)
		close(fd);
	if (n > 0)
		wchan[n] = '\0';
}

static void alarm_handler(int sig)
{
	static const char msg[] =
		"not ok - a kvmstats read blocked for 10 s while the vCPU was in KVM_RUN\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(2);
}

static void check_prompt_while_spinning(int dev)
{
	static struct stats_blob blob;
	struct native_call nc = { 0 };
	char state, wchan[64];
	pthread_t thr;
	struct vcpu *vcpu;
	struct vm *vm;
	uint64_t t0, t1, t2;
	int ours, ours_vm, i;
	ssize_t r;

	vm = vm_create(1, NULL);
	vcpu = vm->vcpus[0];
	vcpu_load_prog(vcpu, GUEST_SPIN, 0);
	vcpu_thread_start(vcpu);
	vcpu_thread_wait_running(vcpu);

	/* Show that the vCPU really holds vcpu->mutex in KVM_RUN. */
	nc.vcpu = vcpu;
	nc.fault = test_fault("30-native-unblocked");
	pthread_create(&thr, NULL, native_thread, &nc);
	/*
	 * Blocked, not merely not yet run: the thread has entered the call
	 * and not come back 300 ms later.
	 */
	for (i = 0; i < 1000 && !nc.started; i++)
		msleep(10);
	msleep(300);
	task_where(nc.tid, &state, wchan, sizeof(wchan));
	tap_check(
		nc.started && !nc.done,
		"native KVM_GET_STATS_FD on the spinning vCPU is blocked (vCPU is in KVM_RUN): in the call for 300 ms (started %d, done %d, state %c, wchan %s)",
		nc.started, nc.done, state, wchan);

	signal(SIGALRM, alarm_handler);
	alarm(10);
	t0 = now_ns();
	ours = kvmstats_get_stats_fd(dev, 0, vm->fd, 0);
	t1 = now_ns();
	r = __stats_read_all(ours, &blob);
	t2 = now_ns();
	ours_vm = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	r = r < 0 ? r : __stats_read_all(ours_vm, &blob);
	alarm(0);
	tap_diag("open took %llu us, read %llu us",
		 (unsigned long long)(t1 - t0) / 1000,
		 (unsigned long long)(t2 - t1) / 1000);
	tap_check(r > 0,
		  "vCPU and VM files read while the vCPU spins in KVM_RUN");
	tap_check(t2 - t0 < 2000000000ull,
		  "open + read of the spinning vCPU's file took < 2 s");
	tap_check(
		!nc.done,
		"native call still blocked after our read: the vCPU stayed in KVM_RUN");

	vcpu_thread_stop(vcpu);
	pthread_join(thr, NULL);
	tap_check(
		nc.fd >= 0,
		"native KVM_GET_STATS_FD completed once the vCPU left KVM_RUN");
	if (nc.fd >= 0) {
		stats_fds_identical(
			ours, nc.fd,
			"spinning vCPU's file identical to native once stopped");
		close(nc.fd);
	}
	close(ours);
	close(ours_vm);
	vm_free(vm);
}

int main(void)
{
	int dev;

	kvm_test_init();
	dev = kvmstats_open();
	check_exact_counts(dev);
	check_growing(dev);
	check_prompt_while_spinning(dev);
	close(dev);
	return tap_exit();
}
