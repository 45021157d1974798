// SPDX-License-Identifier: GPL-2.0-only
/*
 * samplevm: a tiny VMM whose vCPUs run, halt and sleep in a pattern you can
 * watch with `kvmstats top`.
 *
 * Each vCPU cycles through three phases:
 *
 *   run    every iteration of the guest's loop is an exit to us, so exits
 *          climb fast: on x86 "out %al,$0x10", an I/O exit (io_exits); on
 *          arm64 a store to an address no memory slot backs, an MMIO exit
 *          (mmio_exit_user);
 *   halt   x86: the guest executes hlt once, which exits to us at once
 *          (halt_exits + 1); arm64: the guest executes wfi, and KVM keeps
 *          the vCPU blocked in it (blocking is 1, halt_wait_ns grows,
 *          wfi_exit_stat + 1) until a timer signals the vCPU thread
 *          HALT_MS later and KVM_RUN returns EINTR (signal_exits + 1);
 *   sleep  the vCPU thread does not enter the guest at all: nothing moves.
 *
 *        run (RUN_MS)        halt     sleep (SLEEP_MS)
 *   |=====================|   .   |--------------------|=====...
 *
 * vCPU i starts its cycle i * STAGGER_MS late, so the vCPUs of one VM are
 * visibly out of step.  The guest is a few instructions in one 64 KiB
 * memory slot (x86: 16-bit real mode; arm64: EL1, MMU off); there is no
 * in-kernel irqchip, so hlt always exits to us, and nothing but a signal
 * ends an arm64 wfi.
 *
 * Usage: samplevm [-c VCPUS] [-r RUN_MS] [-s SLEEP_MS] [-g STAGGER_MS]
 *        (arm64 also: [-w HALT_MS], default 200, 0 for no halt phase)
 * Runs until killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/kvm.h>

#define MEM_SIZE  0x10000
#define MAX_VCPUS 16

static int vm_fd;
static size_t run_size;
static unsigned int run_ms = 400, sleep_ms = 600, stagger_ms = 250;

struct vcpu {
	int index;
	int fd;
	struct kvm_run *run;
	timer_t timer; /* arm64: ends the halt phase */
};

static void die(const char *what)
{
	fprintf(stderr, "samplevm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void unexpected(struct vcpu *v, const char *phase, unsigned int reason)
{
	fprintf(stderr,
		"samplevm: vCPU %d: unexpected exit %u in the %s phase\n",
		v->index, reason, phase);
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms_(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Enter the guest once; returns the exit reason. */
static unsigned int enter(struct vcpu *v)
{
	while (ioctl(v->fd, KVM_RUN, 0)) {
		if (errno != EINTR && errno != EAGAIN)
			die("KVM_RUN");
	}
	return v->run->exit_reason;
}

#if defined(__x86_64__)
#define EXIT_RUN  KVM_EXIT_IO
#define CODE_LOOP 0x1000 /* 1: out %al,$0x10; jmp 1b */
#define CODE_HLT  0x1010 /* 2: hlt; jmp 2b */

static void set_rip(struct vcpu *v, uint64_t rip)
{
	struct kvm_regs regs;

	memset(&regs, 0, sizeof(regs));
	regs.rip = rip;
	regs.rflags = 0x2;
	if (ioctl(v->fd, KVM_SET_REGS, &regs))
		die("KVM_SET_REGS");
}

static void arch_init_mem(uint8_t *mem)
{
	static const uint8_t loop[] = { 0xe6, 0x10, 0xeb, 0xfc };
	static const uint8_t halt[] = { 0xf4, 0xeb, 0xfd };

	memcpy(mem + CODE_LOOP, loop, sizeof(loop));
	memcpy(mem + CODE_HLT, halt, sizeof(halt));
}

static void arch_init_vcpu(struct vcpu *v)
{
	struct kvm_sregs sregs;

	if (ioctl(v->fd, KVM_GET_SREGS, &sregs))
		die("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs))
		die("KVM_SET_SREGS");
}

static void arch_thread_init(struct vcpu *v)
{
	(void)v;
}

static void start_run(struct vcpu *v)
{
	set_rip(v, CODE_LOOP);
}

static void halt(struct vcpu *v)
{
	unsigned int reason;

	set_rip(v, CODE_HLT);
	reason = enter(v);
	if (reason != KVM_EXIT_HLT)
		unexpected(v, "halt", reason);
}

static int arch_option(int opt, const char *arg)
{
	(void)opt;
	(void)arg;
	return -1;
}

#define ARCH_OPTS  ""
#define ARCH_USAGE ""
#elif defined(__aarch64__)
/*
 * A64, at the same addresses in every VM: QEMU's TCG, which runs these
 * guests when the demo's guest is itself emulated, finds translated code
 * by address and may hand one VM another's (tests/lib/kvm_util.c).
 */
#define EXIT_RUN     KVM_EXIT_MMIO
#define CODE_VECTORS 0x0800   /* 16 x "1: str w0, [x2]; b 1b" */
#define CODE_LOOP    0x1000   /* 1: str w0, [x1]; b 1b */
#define CODE_WFI     0x1010   /* 2: wfi; b 2b */
#define MMIO_RUN     0x100000 /* x1: no memory slot, every store exits */
#define MMIO_FAULT   0x100100 /* x2: an exception vector ran */
#define WAKE_SIGNAL  SIGUSR1

#define CORE_REG(r)                                            \
	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | \
	 KVM_REG_ARM_CORE_REG(r))
#define VBAR_EL1 ARM64_SYS_REG(3, 0, 12, 0, 0)

#ifndef sigev_notify_thread_id /* glibc before 2.41 */
#define sigev_notify_thread_id _sigev_un._tid
#endif

static unsigned int halt_ms = 200;
static __thread struct kvm_run *thread_run;
static __thread volatile sig_atomic_t woken;

static void set_reg(struct vcpu *v, uint64_t id, uint64_t val)
{
	struct kvm_one_reg reg = { .id = id, .addr = (uintptr_t)&val };

	if (ioctl(v->fd, KVM_SET_ONE_REG, &reg))
		die("KVM_SET_ONE_REG");
}

/*
 * A store the last KVM_RUN handed us is completed, and the PC moved past
 * it, on the next KVM_RUN: do that now with immediate_exit (the guest does
 * not run), or the first instruction at a new PC would be skipped.
 */
static void set_pc(struct vcpu *v, uint64_t pc)
{
	if (v->run->exit_reason == KVM_EXIT_MMIO) {
		v->run->immediate_exit = 1;
		if (!ioctl(v->fd, KVM_RUN, 0) || errno != EINTR)
			die("KVM_RUN (completing an MMIO store)");
		v->run->immediate_exit = 0;
		v->run->exit_reason = KVM_EXIT_INTR;
	}
	set_reg(v, CORE_REG(regs.pc), pc);
}

static void arch_init_mem(uint8_t *mem)
{
	static const uint32_t vector[] = { 0xb9000040, 0x17ffffff };
	static const uint32_t loop[] = { 0xb9000020, 0x17ffffff };
	static const uint32_t wfi[] = { 0xd503207f, 0x17ffffff };
	int i;

	for (i = 0; i < 16; i++)
		memcpy(mem + CODE_VECTORS + i * 0x80, vector, sizeof(vector));
	memcpy(mem + CODE_LOOP, loop, sizeof(loop));
	memcpy(mem + CODE_WFI, wfi, sizeof(wfi));
}

static void arch_init_vcpu(struct vcpu *v)
{
	struct kvm_vcpu_init init;

	memset(&init, 0, sizeof(init));
	if (ioctl(vm_fd, KVM_ARM_PREFERRED_TARGET, &init))
		die("KVM_ARM_PREFERRED_TARGET");
	if (ioctl(v->fd, KVM_ARM_VCPU_INIT, &init))
		die("KVM_ARM_VCPU_INIT");
	/* KVM_ARM_VCPU_INIT leaves EL1h with D, A, I and F masked. */
	set_reg(v, VBAR_EL1, CODE_VECTORS);
	set_reg(v, CORE_REG(regs.regs[1]), MMIO_RUN);
	set_reg(v, CORE_REG(regs.regs[2]), MMIO_FAULT);
}

/*
 * The timer's signal makes the next (or the current) KVM_RUN of this
 * thread return EINTR: immediate_exit covers a signal that arrives just
 * before KVM_RUN, which would otherwise block in wfi for good.
 */
static void wake(int sig)
{
	(void)sig;
	woken = 1;
	thread_run->immediate_exit = 1;
}

static void arch_thread_init(struct vcpu *v)
{
	struct sigevent sev;

	thread_run = v->run;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = WAKE_SIGNAL;
	sev.sigev_notify_thread_id = syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &v->timer))
		die("timer_create");
}

static void start_run(struct vcpu *v)
{
	set_pc(v, CODE_LOOP);
}

static void halt(struct vcpu *v)
{
	struct itimerspec its;

	if (!halt_ms)
		return;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = halt_ms / 1000;
	its.it_value.tv_nsec = (long)(halt_ms % 1000) * 1000000;
	set_pc(v, CODE_WFI);
	woken = 0;
	if (timer_settime(v->timer, 0, &its, NULL))
		die("timer_settime");
	while (!woken) {
		if (!ioctl(v->fd, KVM_RUN, 0))
			unexpected(v, "halt", v->run->exit_reason);
		if (errno != EINTR && errno != EAGAIN)
			die("KVM_RUN");
	}
	v->run->immediate_exit = 0;
}

static unsigned int arg_uint(const char *s, unsigned int max);

static int arch_option(int opt, const char *arg)
{
	if (opt != 'w')
		return -1;
	halt_ms = arg_uint(arg, 3600000);
	return 0;
}

#define ARCH_OPTS  "w:"
#define ARCH_USAGE " [-w HALT_MS]"
#else
#error "samplevm: x86_64 or aarch64 guests only"
#endif

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	unsigned int reason;

	arch_thread_init(v);
	sleep_ms_(v->index * stagger_ms);
	for (;;) {
		uint64_t end = now_ms() + run_ms;

		start_run(v);
		do {
			reason = enter(v);
			if (reason != EXIT_RUN)
				unexpected(v, "run", reason);
		} while (now_ms() < end);

		halt(v);
		sleep_ms_(sleep_ms);
	}
	return NULL;
}

static void add_vcpu(struct vcpu *v, int index)
{
	v->index = index;
	v->fd = ioctl(vm_fd, KVM_CREATE_VCPU, index);
	if (v->fd < 0)
		die("KVM_CREATE_VCPU");
	v->run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
		      0);
	if (v->run == MAP_FAILED)
		die("mmap kvm_run");
	arch_init_vcpu(v);
}

static unsigned int arg_uint(const char *s, unsigned int max)
{
	char *end;
	unsigned long n = strtoul(s, &end, 10);

	if (!*s || *end || n > max) {
		fprintf(stderr, "samplevm: bad number '%s'\n", s);
		exit(2);
	}
	return n;
}

int main(int argc, char **argv)
{
	struct kvm_userspace_memory_region region;
	static struct vcpu vcpus[MAX_VCPUS];
	unsigned int nr_vcpus = 2, i;
	pthread_t thread;
	int kvm_fd, opt;
	uint8_t *mem;

	while ((opt = getopt(argc, argv, "c:r:s:g:h" ARCH_OPTS)) != -1) {
		switch (opt) {
		case 'c':
			nr_vcpus = arg_uint(optarg, MAX_VCPUS);
			break;
		case 'r':
			run_ms = arg_uint(optarg, 3600000);
			break;
		case 's':
			sleep_ms = arg_uint(optarg, 3600000);
			break;
		case 'g':
			stagger_ms = arg_uint(optarg, 3600000);
			break;
		default:
			if (!arch_option(opt, optarg))
				break;
			fprintf(stderr,
				"usage: samplevm [-c VCPUS] [-r RUN_MS] [-s SLEEP_MS] [-g STAGGER_MS]" ARCH_USAGE
				"\n");
			return 2;
		}
	}
	if (!nr_vcpus)
		nr_vcpus = 1;

#ifdef WAKE_SIGNAL
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = wake;
		if (sigaction(WAKE_SIGNAL, &sa, NULL))
			die("sigaction");
	}
#endif
	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		die("/dev/kvm");
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm_fd < 0)
		die("KVM_CREATE_VM");
	run_size = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if ((long)run_size <= 0)
		die("KVM_GET_VCPU_MMAP_SIZE");

	mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap guest memory");
	arch_init_mem(mem);
	memset(&region, 0, sizeof(region));
	region.memory_size = MEM_SIZE;
	region.userspace_addr = (uintptr_t)mem;
	if (ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &region))
		die("KVM_SET_USER_MEMORY_REGION");

	for (i = 0; i < nr_vcpus; i++)
		add_vcpu(&vcpus[i], i);
	for (i = 0; i < nr_vcpus; i++) {
		errno = pthread_create(&thread, NULL, vcpu_thread, &vcpus[i]);
		if (errno)
			die("pthread_create");
	}
	printf("samplevm: pid %d, %u vCPUs: run %u ms, halt, sleep %u ms, stagger %u ms\n",
	       getpid(), nr_vcpus, run_ms, sleep_ms, stagger_ms);
	fflush(stdout);
	for (;;)
		pause();
}
