// SPDX-License-Identifier: GPL-2.0-only
/*
 * The test library's guests, measured by KVM itself: every later test
 * takes for granted that GUEST_IO_COUNT n moves STAT_IO_EXITS by exactly
 * n, that a program ends with one STAT_END_EXITS, that a looping vCPU
 * can be stopped and that a halting one sleeps in the kernel.  This
 * checks it against the VM's and vCPUs' own KVM_GET_STATS_FD files, on
 * either architecture, with no kvmstats involved (so it also runs where
 * the module does not load).
 */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "fault.h"
#include "kvm_util.h"
#include "kvmstats_util.h"
#include "tap.h"

static const char *const generic_vcpu_stats[] = {
	"halt_successful_poll",
	"halt_attempted_poll",
	"halt_poll_invalid",
	"halt_wakeup",
	"halt_poll_success_ns",
	"halt_poll_fail_ns",
	"halt_wait_ns",
	"halt_poll_success_hist",
	"halt_poll_fail_hist",
	"halt_wait_hist",
	"blocking",
};

static void check_tables(struct vm *vm, int vm_stats, int vcpu_stats)
{
	struct stats_blob blob;
	const char *names[] = { STAT_IO_EXITS, STAT_MMIO_EXITS, STAT_END_EXITS,
				"exits" };
	bool all = true;
	size_t i;

	stats_read_all(vm_stats, &blob, "native VM stats");
	/* Fault 05-format: the last descriptor's name emptied. */
	if (test_fault("05-format"))
		((struct kvm_stats_desc *)stats_desc(
			 &blob, (int)stats_header(&blob)->num_desc - 1))
			->name[0] = '\0';
	tap_check(stats_check_format(&blob, "native VM file"),
		  "the native VM file keeps KVM's format invariants");
	tap_diag("VM file: %u statistics, id %s", stats_header(&blob)->num_desc,
		 stats_id(&blob));
	tap_check(stats_find(&blob, "remote_tlb_flush") != NULL,
		  "the VM file has the generic remote_tlb_flush");

	stats_read_all(vcpu_stats, &blob, "native vCPU stats");
	tap_check(stats_check_format(&blob, "native vCPU file"),
		  "the native vCPU file keeps KVM's format invariants");
	tap_diag("vCPU file: %u statistics, id %s",
		 stats_header(&blob)->num_desc, stats_id(&blob));
	for (i = 0;
	     i < sizeof(generic_vcpu_stats) / sizeof(*generic_vcpu_stats);
	     i++) {
		/* Fault 05-generic: looks for a name no kernel has. */
		const char *name = i == 0 && test_fault("05-generic") ?
					   "no_such_generic_stat" :
					   generic_vcpu_stats[i];

		if (!stats_find(&blob, name)) {
			tap_diag("the vCPU file lacks the generic %s", name);
			all = false;
		}
	}
	tap_check(all, "the vCPU file has the 11 generic statistics");
	for (i = 0; i < sizeof(names) / sizeof(*names); i++)
		tap_check(stats_find(&blob, names[i]) != NULL,
			  "the vCPU file has %s", names[i]);
	(void)vm;
}

static void check_counts(struct vm *vm, int stats0, int stats1)
{
	struct vcpu *v0 = vm->vcpus[0], *v1 = vm->vcpus[1];
	uint64_t io0;

	tap_eq(stats_read_stat(stats0, STAT_IO_EXITS), 0, "fresh vCPU: %s is 0",
	       STAT_IO_EXITS);

	vcpu_load_prog(v0, GUEST_IO_COUNT, 37);
	vcpu_run_to_hlt(v0);
	tap_eq(v0->nr_io, 37, "GUEST_IO_COUNT 37: the VMM saw 37 I/O exits");
	io0 = stats_read_stat(stats0, STAT_IO_EXITS);
	tap_eq(io0, 37, "GUEST_IO_COUNT 37: %s is 37", STAT_IO_EXITS);
	tap_eq(stats_read_stat(stats0, STAT_END_EXITS), 1,
	       "the program's end (%s): %s is 1", GUEST_END_NAME,
	       STAT_END_EXITS);

	vcpu_load_prog(v0, GUEST_MMIO_COUNT, 11);
	vcpu_run_to_hlt(v0);
	tap_eq(v0->nr_mmio, 11,
	       "GUEST_MMIO_COUNT 11: the VMM saw 11 MMIO exits");
	tap_eq(stats_read_stat(stats0, STAT_MMIO_EXITS),
	       11 + (STAT_IO_IS_MMIO ? io0 : 0),
	       "GUEST_MMIO_COUNT 11: %s grew by 11", STAT_MMIO_EXITS);
	if (!STAT_IO_IS_MMIO)
		tap_eq(stats_read_stat(stats0, STAT_IO_EXITS), 37,
		       "%s unchanged by the MMIO guest", STAT_IO_EXITS);
	tap_eq(stats_read_stat(stats0, STAT_END_EXITS), 2,
	       "a second program's end: %s is 2", STAT_END_EXITS);
	tap_check(stats_read_stat(stats0, "exits") >= 37 + 11 + 2,
		  "exits counts at least every exit the VMM saw");

	/* On arm64 vCPU 0's SYSTEM_OFF stopped every vCPU of the VM. */
	vcpu_load_prog(v1, GUEST_IO_COUNT, 5);
	vcpu_run_to_hlt(v1);
	tap_eq(stats_read_stat(stats1, STAT_IO_EXITS), 5,
	       "vCPU 1 after vCPU 0's end: GUEST_IO_COUNT 5 reads %s 5",
	       STAT_IO_EXITS);
	tap_eq(stats_read_stat(stats0, STAT_IO_EXITS),
	       io0 + (STAT_IO_IS_MMIO ? 11 : 0),
	       "vCPU 0's %s untouched by vCPU 1", STAT_IO_EXITS);
}

static void check_threads(struct vm *vm, int stats1)
{
	struct vcpu *v1 = vm->vcpus[1];
	uint64_t a, b, before;

	before = stats_read_stat(stats1, STAT_IO_EXITS);
	v1->nr_io = 0;
	vcpu_load_prog(v1, GUEST_IO_LOOP, 0);
	vcpu_thread_start(v1);
	vcpu_thread_wait_running(v1);
	a = stats_read_stat(stats1, STAT_IO_EXITS);
	b = stats_wait_above(stats1, STAT_IO_EXITS, a, 5000);
	tap_check(b > a, "GUEST_IO_LOOP in a thread: %s grows (%llu -> %llu)",
		  STAT_IO_EXITS, (unsigned long long)a, (unsigned long long)b);
	vcpu_thread_stop(v1);
	tap_eq(v1->thread_err, 0, "the loop's thread stopped without error");
	tap_eq(stats_read_stat(stats1, STAT_IO_EXITS) - before, v1->nr_io,
	       "stopped: %s grew by the I/O exits the VMM saw", STAT_IO_EXITS);

	vcpu_load_prog(v1, GUEST_SPIN, 0);
	vcpu_thread_start(v1);
	vcpu_thread_wait_running(v1);
	msleep(100);
	vcpu_thread_stop(v1);
	tap_eq(v1->thread_err, 0,
	       "GUEST_SPIN: the spinning vCPU's thread is stopped by a signal");
}

static void check_halt(void)
{
	struct vm *vm = vm_create_irqchip(1);
	struct vcpu *v = vm->vcpus[0];
	struct stats_blob blob;
	uint64_t waits = 0;
	int stats, i;

	stats = vcpu_get_stats_fd(v);
	vcpu_halt_start(v);
	tap_check(!__vcpu_wait_halted(v, 10000),
		  "GUEST_CLI_HLT: the vCPU thread sleeps in KVM (wchan)");
	tap_eq(stats_read_stat(stats, "blocking"), 1, "asleep: blocking is 1");
	tap_diag(
		"halting vCPU: %s %llu, halt_attempted_poll %llu, "
		"halt_successful_poll %llu, halt_poll_invalid %llu, "
		"halt_wakeup %llu",
		STAT_END_EXITS,
		(unsigned long long)stats_read_stat(stats, STAT_END_EXITS),
		(unsigned long long)stats_read_stat(stats,
						    "halt_attempted_poll"),
		(unsigned long long)stats_read_stat(stats,
						    "halt_successful_poll"),
		(unsigned long long)stats_read_stat(stats, "halt_poll_invalid"),
		(unsigned long long)stats_read_stat(stats, "halt_wakeup"));
	for (i = 0; i < 3; i++)
		vcpu_halt_wake(v);
	stats_read_all(stats, &blob, "native vCPU stats");
	{
		const struct kvm_stats_desc *d =
			stats_find(&blob, "halt_wait_hist");

		for (i = 0; d && i < (int)d->size; i++)
			waits += stats_value(&blob, "halt_wait_hist", i);
	}
	tap_check(waits >= 3,
		  "3 wakes: halt_wait_hist has at least 3 samples (%llu)",
		  (unsigned long long)waits);
	tap_eq(v->nr_intr, 3, "each wake was one KVM_RUN returning EINTR");
	vcpu_thread_stop(v);
	tap_eq(stats_read_stat(stats, "blocking"), 0, "stopped: blocking is 0");
	close(stats);
	vm_free(vm);
}

int main(void)
{
	struct utsname u;
	struct vm *vm;
	int vm_stats, stats0, stats1;

	kvm_test_init();
	uname(&u);
	tap_diag("guest programs for %s", u.machine);

	vm = vm_create(2, NULL);
	vm_stats = vm_get_stats_fd(vm);
	stats0 = vcpu_get_stats_fd(vm->vcpus[0]);
	stats1 = vcpu_get_stats_fd(vm->vcpus[1]);

	check_tables(vm, vm_stats, stats0);
	check_counts(vm, stats0, stats1);
	check_threads(vm, stats1);
	close(vm_stats);
	close(stats0);
	close(stats1);
	vm_free(vm);

	check_halt();
	return tap_exit();
}
