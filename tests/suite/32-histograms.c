// SPDX-License-Identifier: GPL-2.0-only
/*
 * Histograms with real data.  A VM with an in-kernel irqchip whose vCPU
 * runs "cli; hlt" blocks in the kernel's halt wait, and each signal to its
 * thread ends one wait: halt_wait_ns and halt_wait_hist fill up (the
 * other suite programs halt to userspace, where every histogram stays 0).
 *
 * Exact, and asserted:
 *  - read while the vCPU sleeps (nothing changes then), our fd and the
 *    native one are byte-identical, and every halt_wait_hist bucket equal;
 *  - the buckets sum to the number of waits woken (each wake of a vCPU
 *    seen off the run queue in kvm_vcpu_block ends exactly one sample);
 *  - halt_wait_ns, the sum of the same samples, lies between the sum of
 *    the sampled buckets' lower bounds and that of their upper bounds;
 *  - halt_exits is 1 (the HLT ran once; every later KVM_RUN blocks again
 *    without entering the guest) and `blocking` is 1 while it sleeps.
 * Not exact, so not asserted: which bucket a wait falls in (it is a time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmstats_util.h"

static struct stats_blob ours_blob, native_blob;

int main(void)
{
	const struct kvm_stats_desc *d;
	unsigned int wakes =
		getenv("KVMSTATS_LONG") &&
				!strcmp(getenv("KVMSTATS_LONG"), "1") ?
			64 :
			12;
	unsigned long long sum = 0, lo = 0, hi = 0, wait_ns;
	bool unbounded = false, same = true;
	struct vcpu *vcpu;
	struct vm *vm;
	int dev, ours, native, b;
	unsigned int i;

	kvm_test_init();
	dev = kvmstats_open();
	vm = vm_create_irqchip(1);
	vcpu = vm->vcpus[0];
	/* Both fds before the thread: native GET_STATS_FD waits for vcpu->mutex. */
	native = vcpu_get_stats_fd(vcpu);
	ours = kvmstats_get_stats_fd(dev, getpid(), vm->fd, 0);

	vcpu_halt_start(vcpu);
	for (i = 0; i < wakes; i++)
		vcpu_halt_wake(vcpu);
	if (__vcpu_wait_halted(vcpu, 5000))
		tap_diag("vCPU not seen asleep before the reads");
	stats_read_all(ours, &ours_blob, "our vCPU stats");
	stats_read_all(native, &native_blob, "native vCPU stats");
	tap_check(
		stats_blob_equal(&ours_blob, &native_blob, "vCPU stats"),
		"irqchip VM, vCPU asleep in HLT: our fd equals the native fd byte for byte");

	d = stats_find(&native_blob, "halt_wait_hist");
	if (!d) {
		tap_fail("the vCPU stats have halt_wait_hist");
		return tap_exit();
	}
	for (b = 0; b < d->size; b++) {
		unsigned long long n =
			stats_value(&native_blob, "halt_wait_hist", b);
		unsigned long long o =
			stats_value(&ours_blob, "halt_wait_hist", b);

		if (n != o) {
			tap_diag("halt_wait_hist[%d]: ours %llu, native %llu",
				 b, o, n);
			same = false;
		}
		if (n)
			tap_diag("halt_wait_hist[%d] = %llu", b, n);
		sum += n;
		/* Log2 bucket b holds [2^(b-1), 2^b) ns; bucket 0 holds 0; the last has no top. */
		lo += n * (b ? 1ull << (b - 1) : 0);
		if (b == d->size - 1 && n)
			unbounded = true;
		else
			hi += n * ((1ull << b) - 1);
	}
	tap_check(
		same,
		"halt_wait_hist: all %u buckets of our fd equal the native fd's",
		d->size);
	tap_check(sum > 0, "halt_wait_hist has samples (%llu)", sum);
	if (vcpu->halt_wakes_unsure) {
		tap_diag(
			"%lu wakes were sent without seeing the vCPU asleep (wchan)",
			vcpu->halt_wakes_unsure);
		tap_check(
			sum >= vcpu->halt_wakes &&
				sum <= vcpu->halt_wakes +
						vcpu->halt_wakes_unsure,
			"halt_wait_hist samples (%llu) within the wakes (%lu..%lu)",
			sum, vcpu->halt_wakes,
			vcpu->halt_wakes + vcpu->halt_wakes_unsure);
	} else {
		tap_eq(sum, vcpu->halt_wakes,
		       "halt_wait_hist buckets sum to the %lu waits woken by a signal",
		       vcpu->halt_wakes);
	}
	wait_ns = stats_value(&native_blob, "halt_wait_ns", 0);
	tap_check(
		wait_ns >= lo && (unbounded || wait_ns <= hi),
		"halt_wait_ns %llu lies within the sampled buckets' bounds [%llu, %s%llu]",
		wait_ns, lo, unbounded ? ">" : "", hi);
	if (GUEST_HALT_REENTERS)
		tap_eq(stats_value(&native_blob, STAT_END_EXITS, 0),
		       1 + vcpu->nr_intr,
		       STAT_END_EXITS " is 1 + %lu: each KVM_RUN after a "
				      "wake suspends again",
		       vcpu->nr_intr);
	else
		tap_eq(stats_value(&native_blob, STAT_END_EXITS, 0), 1,
		       STAT_END_EXITS
		       " is 1: one " GUEST_END_NAME
		       ", each later KVM_RUN blocks again in the kernel");
	tap_eq(stats_value(&ours_blob, "blocking", 0), 1,
	       "blocking is 1 while the vCPU sleeps in the halt wait");
	tap_eq(vcpu->nr_intr, wakes,
	       "each of the %u signals ended KVM_RUN with EINTR", wakes);

	vcpu_thread_stop(vcpu);
	close(ours);
	close(native);
	vm_free(vm);
	close(dev);
	return tap_exit();
}
