/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Driving real KVM VMs from a test program.
 *
 * Two layers, as in KVM's selftests:
 *   __name(...)  raw call: returns >= 0 or -errno, never prints or exits;
 *   name(...)    asserting wrapper: on failure prints "not ok - <IOCTL>
 *                failed: <errno>" naming the ioctl, and exits the test.
 *
 * Guests are snippets of a few instructions loaded at GUEST_CODE in a small
 * memory slot at guest physical 0.  On x86 they run in real mode, DS points
 * past the slot so that a store through DS is an MMIO exit, and "I/O" is a
 * port write.  On arm64 they run at EL1 with the MMU off: "I/O" and "MMIO"
 * are both stores outside every slot (two addresses, told apart by the run
 * loop), a program ends with PSCI SYSTEM_OFF (hvc #0, KVM_EXIT_SYSTEM_EVENT)
 * where x86 ends with HLT, and every exception vector stores to a third
 * address, so a guest fault is an exit the run loop reports instead of a
 * vCPU that KVM re-enters forever.
 */
#ifndef KVMSTATS_TEST_KVM_UTIL_H
#define KVMSTATS_TEST_KVM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <linux/kvm.h>

#include "tap.h"

#define GUEST_MEM_SIZE 0x10000 /* one slot, guest physical 0..64K */
#define GUEST_CODE     0x1000  /* x86: CS:IP = 0000:1000 */
#define VM_MAX_VCPUS   16
#if defined(__x86_64__)
#define GUEST_MMIO_SEG 0x2000 /* DS base 0x20000: not backed */
#define GUEST_IO_PORT  0x10
#elif defined(__aarch64__)
#define GUEST_VECTORS	 0x800	    /* VBAR_EL1: 16 entries of 0x80 bytes */
#define GUEST_IO_ADDR	 0x10000000 /* outside the slot: the "I/O" stores */
#define GUEST_MMIO_ADDR	 0x20000000 /* outside the slot: the MMIO stores */
#define GUEST_FAULT_ADDR 0x30000000 /* stored to by every exception vector */
#else
#error "the test guests know x86-64 and arm64 only"
#endif

/*
 * The vCPU statistics the guest programs move, by architecture:
 * STAT_IO_EXITS counts GUEST_IO_COUNT's and GUEST_IO_LOOP's exits,
 * STAT_MMIO_EXITS GUEST_MMIO_COUNT's, STAT_END_EXITS one per program end
 * (each GUEST_HLT, and the end of the counting programs).  On arm64 the
 * first two are the same statistic (STAT_IO_IS_MMIO): both are stores that
 * KVM hands to userspace.
 */
#if defined(__x86_64__)
#define STAT_IO_EXITS	"io_exits"
#define STAT_MMIO_EXITS "mmio_exits"
#define STAT_END_EXITS	"halt_exits"
#define STAT_IO_IS_MMIO 0
#define GUEST_END_NAME	"HLT"
/* A halting vCPU stays halted across wakes (HLT, STAT_END_EXITS once). */
#define GUEST_HALT_REENTERS 0
#else
#define STAT_IO_EXITS	    "mmio_exit_user"
#define STAT_MMIO_EXITS	    "mmio_exit_user"
#define STAT_END_EXITS	    "hvc_exit_stat"
#define STAT_IO_IS_MMIO	    1
#define GUEST_END_NAME	    "PSCI SYSTEM_OFF"
/* A halting vCPU suspends again after each wake (one more HVC). */
#define GUEST_HALT_REENTERS 1
#endif

/* "end" is HLT on x86, PSCI SYSTEM_OFF on arm64. */
enum guest_prog {
	GUEST_HLT,	  /* end */
	GUEST_IO_LOOP,	  /* 1: out %al,$0x10 (str w0,[IO]); jmp 1b */
	GUEST_IO_COUNT,	  /* n port writes (stores to IO), then end */
	GUEST_MMIO_COUNT, /* n stores to DS:0 (to MMIO), then end */
	GUEST_SPIN,	  /* 1: jmp 1b */
	GUEST_CLI_HLT,	  /* cli; 1: hlt; jmp 1b (arm64: PSCI CPU_SUSPEND
			   * loop): blocks in KVM (irqchip VMs on x86) */
};

struct vcpu {
	struct vm *vm;
	int fd;
	int id;	   /* vcpu_id given to KVM_CREATE_VCPU */
	int index; /* creation order */
	struct kvm_run *run;
	size_t run_size;
	pid_t creator_tid;

	/* Exits seen by the run loop, and the thread that runs it. */
	unsigned long nr_io, nr_mmio, nr_hlt;
	pthread_t thread;
	bool thread_started;
	volatile int stop;
	volatile int in_run; /* set just before the thread's first KVM_RUN */
	int thread_err;	     /* -errno from the thread's loop, 0 if fine */

	/* Halting vCPUs of irqchip VMs (vcpu_halt_start()). */
	volatile pid_t tid; /* the vCPU thread's tid, once it runs */
	volatile unsigned long nr_intr; /* KVM_RUN returns with EINTR */
	unsigned long halt_wakes;	/* wakes of a vCPU seen asleep in KVM */
	unsigned long halt_wakes_unsure; /* wakes without that certainty */
};

struct vm {
	int kvm_fd; /* /dev/kvm */
	int fd;
	void *mem;
	int nr_vcpus;
	pid_t creator_tid;
	bool irqchip; /* KVM_CREATE_IRQCHIP done (vm_create_irqchip) */
	struct vcpu *vcpus[VM_MAX_VCPUS];
};

/* Raw layer: -errno on failure. */
int __kvm_open(void);
int __vm_create(struct vm **out);
int __vm_add_vcpu(struct vm *vm, int id, struct vcpu **out);
int __vcpu_load_prog(struct vcpu *vcpu, enum guest_prog prog, unsigned int n);
int __vcpu_run(struct vcpu *vcpu); /* one KVM_RUN; returns exit_reason */
/* Is exit_reason @reason of the last KVM_RUN the guest program's end? */
bool vcpu_exit_is_end(struct vcpu *vcpu, int reason);
int __vm_get_stats_fd(struct vm *vm); /* native KVM_GET_STATS_FD */
int __vcpu_get_stats_fd(struct vcpu *vcpu);
void vm_free(struct vm *vm); /* closes every fd, frees memory */

/* Asserting layer. */
struct vm *vm_create(int nr_vcpus, const int *ids);
struct vcpu *vm_add_vcpu(struct vm *vm, int id);
void vcpu_load_prog(struct vcpu *vcpu, enum guest_prog prog, unsigned int n);
/* KVM_RUN until the program's end; counts IO/MMIO exits; fails on
 * anything else. */
void vcpu_run_to_hlt(struct vcpu *vcpu);
int vm_get_stats_fd(struct vm *vm);
int vcpu_get_stats_fd(struct vcpu *vcpu);

/* Convenience: program every vCPU with @prog and run each to HLT. */
void vm_run_all_to_hlt(struct vm *vm, enum guest_prog prog, unsigned int n);

/*
 * vCPU threads: the thread loops on KVM_RUN (resuming after IO/MMIO exits)
 * until vcpu_thread_stop(), which kicks it out of the guest with a signal
 * and immediate_exit.  A HLT ends the loop on its own.
 */
void vcpu_thread_start(struct vcpu *vcpu);
void vcpu_thread_stop(struct vcpu *vcpu);
/* After pthread_join(): wait until the kernel has released thread @tid. */
void thread_wait_released(pid_t tid);
/* Wait until the thread has entered KVM_RUN at least once. */
void vcpu_thread_wait_running(struct vcpu *vcpu);

/* Run the calling thread on CPU @cpu only (threads it starts inherit it). */
void pin_self_to(int cpu);

/*
 * VMs whose vCPUs halt in the kernel.  On x86 that takes an in-kernel
 * irqchip (PIC, IOAPIC and local APICs; created with KVM_CREATE_IRQCHIP
 * before the vCPUs, which are all set runnable): a HLT no longer exits to
 * userspace but blocks the vCPU thread in the kernel (kvm_vcpu_halt ->
 * kvm_vcpu_block), which is what fills halt_wait_ns and halt_wait_hist.
 * With interrupts disabled nothing but a signal wakes it: KVM_RUN then
 * returns EINTR, and the next KVM_RUN blocks again.  On arm64 the VM needs
 * no irqchip: the guest's PSCI CPU_SUSPEND blocks in the kernel
 * (kvm_vcpu_wfi -> kvm_vcpu_halt) with every interrupt masked; after a
 * signal's EINTR the next KVM_RUN resumes after the HVC, whose loop makes
 * (and counts, hvc_exit_stat) the next.
 */
int __vm_create_irqchip(struct vm **out);
struct vm *vm_create_irqchip(int nr_vcpus);

/*
 * vcpu_halt_start(): load GUEST_CLI_HLT and start the vCPU thread; returns
 * once the vCPU sleeps in the halt wait.  vcpu_halt_wake(): wait until it
 * sleeps there, wake it with a signal and wait for the EINTR.  Each wake
 * of a vCPU known to be asleep (its /proc wchan in kvm_vcpu_*: off the run
 * queue, past the point where KVM counts the wait) ends exactly one
 * halt_wait_hist sample; halt_wakes counts those, halt_wakes_unsure the
 * wakes sent after only the `blocking` stat and a pause said so (wchan not
 * readable).  vcpu_thread_stop() ends the thread: if it was asleep, that
 * is one more sample.
 */
void vcpu_halt_start(struct vcpu *vcpu);
/* 0 once the vCPU sleeps in KVM's halt wait (wchan), -ETIMEDOUT. */
int __vcpu_wait_halted(struct vcpu *vcpu, unsigned int timeout_ms);
void vcpu_halt_wake(struct vcpu *vcpu);

/*
 * Start of every test that creates VMs: tap_init(), then a keeper.
 *
 * KVM flips a static key (preempt notifiers) whenever the host's number of
 * VMs goes from 0 to 1 and back, which live-patches the scheduler's text;
 * under QEMU's TCG that patching races with the other vCPU often enough to
 * crash the guest ("Oops: int3" in __schedule) or hang it.  The keeper, a
 * child process holding one idle VM for the life of the test, keeps the
 * count above 0 so the test's own VMs never flip the key.  It has its own
 * pid, so it never shows up as one of the test's VMs.  When the harness's
 * ksg_pin module is loaded (it holds the key for the whole boot), no
 * keeper is started.
 */
void kvm_test_init(void);
void vm_keeper_start(void);
void vm_keeper_stop(void); /* before unloading modules */

pid_t sys_gettid(void);
uint64_t now_ns(void);
void msleep(unsigned int ms);

/* Generic asserting ioctl: prints the command's name on failure. */
long __test_ioctl_assert(int fd, unsigned long cmd, const char *name,
			 unsigned long arg, const char *file, int line);
#define test_ioctl(fd, cmd, arg)                                           \
	__test_ioctl_assert(fd, cmd, #cmd, (unsigned long)(arg), __FILE__, \
			    __LINE__)

/* Raw ioctl returning the result or -errno. */
static inline long __test_ioctl(int fd, unsigned long cmd, unsigned long arg)
{
	long r = ioctl(fd, cmd, arg);

	return r < 0 ? -errno : r;
}

#endif /* KVMSTATS_TEST_KVM_UTIL_H */
