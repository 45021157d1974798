// SPDX-License-Identifier: GPL-2.0-only
/*
 * A small VM driver for the kvmstats tests: see kvm_util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kvm_util.h"

#define KICK_SIGNAL	 SIGUSR1
#define VCPU_CODE_STRIDE 0x100

/* What a KVM_RUN's exit means for the guest programs. */
enum guest_exit {
	EXIT_IO,    /* a port write (x86), a store to GUEST_IO_ADDR (arm64) */
	EXIT_MMIO,  /* an MMIO store */
	EXIT_END,   /* the program's end: HLT, PSCI SYSTEM_OFF */
	EXIT_FAULT, /* arm64: an exception vector ran */
	EXIT_OTHER,
};

/* Per architecture, below. */
static void arch_vm_init(struct vm *vm);
static int arch_vcpu_init(struct vm *vm, int fd);

pid_t sys_gettid(void)
{
	return syscall(SYS_gettid);
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void msleep(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

long __test_ioctl_assert(int fd, unsigned long cmd, const char *name,
			 unsigned long arg, const char *file, int line)
{
	long r = ioctl(fd, cmd, arg);

	if (r < 0) {
		int e = errno;

		tap_bail("%s on fd %d failed: errno %d (%s) [%s:%d]", name, fd,
			 e, strerror(e), file, line);
	}
	return r;
}

int __kvm_open(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int __vm_create(struct vm **out)
{
	struct kvm_userspace_memory_region region = { 0 };
	struct vm *vm;
	int r;

	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	vm->fd = -1;
	vm->kvm_fd = __kvm_open();
	if (vm->kvm_fd < 0) {
		r = vm->kvm_fd;
		goto err_free;
	}
	r = __test_ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (r < 0)
		goto err_kvm;
	vm->fd = r;
	vm->creator_tid = sys_gettid();

#if defined(__x86_64__)
	/* Needed by VMX without unrestricted guest, harmless on SVM. */
	r = __test_ioctl(vm->fd, KVM_SET_TSS_ADDR, 0xfffbd000);
	if (r < 0)
		goto err_vm;
#endif

	vm->mem = mmap(NULL, GUEST_MEM_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (vm->mem == MAP_FAILED) {
		r = -errno;
		vm->mem = NULL;
		goto err_vm;
	}
	region.slot = 0;
	region.guest_phys_addr = 0;
	region.memory_size = GUEST_MEM_SIZE;
	region.userspace_addr = (unsigned long)vm->mem;
	r = __test_ioctl(vm->fd, KVM_SET_USER_MEMORY_REGION,
			 (unsigned long)&region);
	if (r < 0)
		goto err_vm;
	arch_vm_init(vm);
	*out = vm;
	return 0;

err_vm:
	if (vm->mem)
		munmap(vm->mem, GUEST_MEM_SIZE);
	close(vm->fd);
err_kvm:
	close(vm->kvm_fd);
err_free:
	free(vm);
	return r;
}

int __vm_add_vcpu(struct vm *vm, int id, struct vcpu **out)
{
	struct vcpu *vcpu;
	long size;
	int r;

	if (vm->nr_vcpus >= VM_MAX_VCPUS)
		return -ENOSPC;
	vcpu = calloc(1, sizeof(*vcpu));
	if (!vcpu)
		return -ENOMEM;
	size = __test_ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (size < 0) {
		r = size;
		goto err_free;
	}
	r = __test_ioctl(vm->fd, KVM_CREATE_VCPU, id);
	if (r < 0)
		goto err_free;
	vcpu->fd = r;
	vcpu->run = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 vcpu->fd, 0);
	if (vcpu->run == MAP_FAILED) {
		r = -errno;
		close(vcpu->fd);
		goto err_free;
	}
	r = arch_vcpu_init(vm, vcpu->fd);
	if (r < 0) {
		munmap(vcpu->run, size);
		close(vcpu->fd);
		goto err_free;
	}
	vcpu->run_size = size;
	vcpu->vm = vm;
	vcpu->id = id;
	vcpu->index = vm->nr_vcpus;
	vcpu->creator_tid = sys_gettid();
	vm->vcpus[vm->nr_vcpus++] = vcpu;
	*out = vcpu;
	return 0;

err_free:
	free(vcpu);
	return r;
}

#if defined(__x86_64__)
static void arch_vm_init(struct vm *vm)
{
	(void)vm;
}

static int arch_vcpu_init(struct vm *vm, int fd)
{
	(void)vm;
	(void)fd;
	return 0;
}

static const uint8_t *guest_code(enum guest_prog prog, unsigned int n,
				 uint8_t *buf, size_t *len)
{
	static const uint8_t hlt[] = { 0xf4, 0xeb, 0xfe };
	static const uint8_t io_loop[] = { 0xe6, GUEST_IO_PORT, 0xeb, 0xfc };
	static const uint8_t spin[] = { 0xeb, 0xfe };
	static const uint8_t cli_hlt[] = { 0xfa, 0xf4, 0xeb, 0xfd };
	static const uint8_t io_count[] = {
		0xb9, 0,
		0,		     /* mov $n, %cx */
		0xe6, GUEST_IO_PORT, /* 1: out %al, $port */
		0x49,		     /* dec %cx */
		0x75, 0xfb,	     /* jnz 1b */
		0xf4,		     /* hlt */
		0xeb, 0xfe,	     /* jmp . */
	};
	static const uint8_t mmio_count[] = {
		0xb9, 0,    0, /* mov $n, %cx */
		0xa2, 0,    0, /* 1: mov %al, %ds:0 */
		0x49,	       /* dec %cx */
		0x75, 0xfa,    /* jnz 1b */
		0xf4,	       /* hlt */
		0xeb, 0xfe,    /* jmp . */
	};

	switch (prog) {
	case GUEST_HLT:
		*len = sizeof(hlt);
		return hlt;
	case GUEST_IO_LOOP:
		*len = sizeof(io_loop);
		return io_loop;
	case GUEST_SPIN:
		*len = sizeof(spin);
		return spin;
	case GUEST_CLI_HLT:
		*len = sizeof(cli_hlt);
		return cli_hlt;
	case GUEST_IO_COUNT:
		memcpy(buf, io_count, sizeof(io_count));
		*len = sizeof(io_count);
		break;
	case GUEST_MMIO_COUNT:
		memcpy(buf, mmio_count, sizeof(mmio_count));
		*len = sizeof(mmio_count);
		break;
	default:
		return NULL;
	}
	buf[1] = n & 0xff;
	buf[2] = (n >> 8) & 0xff;
	return buf;
}

static int arch_vcpu_start(struct vcpu *vcpu, unsigned long code,
			   unsigned int n)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int r;

	(void)n; /* in the code itself */
	r = __test_ioctl(vcpu->fd, KVM_GET_SREGS, (unsigned long)&sregs);
	if (r < 0)
		return r;
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	sregs.ds.base = GUEST_MMIO_SEG << 4;
	sregs.ds.selector = GUEST_MMIO_SEG;
	r = __test_ioctl(vcpu->fd, KVM_SET_SREGS, (unsigned long)&sregs);
	if (r < 0)
		return r;

	memset(&regs, 0, sizeof(regs));
	regs.rip = code;
	regs.rflags = 0x2;
	return __test_ioctl(vcpu->fd, KVM_SET_REGS, (unsigned long)&regs);
}

static enum guest_exit classify_exit(struct vcpu *vcpu, int reason)
{
	(void)vcpu;
	switch (reason) {
	case KVM_EXIT_IO:
		return EXIT_IO;
	case KVM_EXIT_MMIO:
		return EXIT_MMIO;
	case KVM_EXIT_HLT:
		return EXIT_END;
	default:
		return EXIT_OTHER;
	}
}
#elif defined(__aarch64__)
/*
 * A64, assembled once with binutils and written down here.  The VMM sets
 * x0 = n, x1 = GUEST_IO_ADDR, x2 = GUEST_MMIO_ADDR, x3 = GUEST_FAULT_ADDR.
 */
#define A64_END                                                         \
	0xd2800100,	    /* mov	x0, #0x8 */                          \
		0xf2b08000, /* movk	x0, #0x8400, lsl #16: SYSTEM_OFF */ \
		0xd4000002, /* hvc	#0 */                                \
		0x14000000  /* b	. */

static const uint32_t a64_vector[] = {
	0xf900007f, /* str	xzr, [x3] */
	0x14000000, /* b	. */
};

#define ONE_REG_CORE(r)                                        \
	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE | \
	 KVM_REG_ARM_CORE_REG(r))
#define ONE_REG_VBAR_EL1       ARM64_SYS_REG(3, 0, 12, 0, 0)
/* EL1h, with D, A, I and F masked: what KVM_ARM_VCPU_INIT leaves. */
#define A64_PSTATE_EL1H_MASKED 0x3c5

static void arch_vm_init(struct vm *vm)
{
	int i;

	for (i = 0; i < 16; i++)
		memcpy((uint8_t *)vm->mem + GUEST_VECTORS + i * 0x80,
		       a64_vector, sizeof(a64_vector));
}

static int set_one_reg(int fd, uint64_t id, uint64_t val)
{
	struct kvm_one_reg reg = { .id = id, .addr = (unsigned long)&val };

	return __test_ioctl(fd, KVM_SET_ONE_REG, (unsigned long)&reg);
}

/* KVM_ARM_VCPU_INIT with PSCI 0.2, so that SYSTEM_OFF is an exit. */
static int arch_vcpu_init(struct vm *vm, int fd)
{
	struct kvm_vcpu_init init;
	int r;

	memset(&init, 0, sizeof(init));
	r = __test_ioctl(vm->fd, KVM_ARM_PREFERRED_TARGET,
			 (unsigned long)&init);
	if (r < 0)
		return r;
	init.features[0] |= 1u << KVM_ARM_VCPU_PSCI_0_2;
	r = __test_ioctl(fd, KVM_ARM_VCPU_INIT, (unsigned long)&init);
	if (r < 0)
		return r;
	return set_one_reg(fd, ONE_REG_VBAR_EL1, GUEST_VECTORS);
}

static const uint8_t *guest_code(enum guest_prog prog, unsigned int n,
				 uint8_t *buf, size_t *len)
{
	static const uint32_t end[] = { A64_END };
	static const uint32_t io_loop[] = {
		0xb9000020, /* 1: str	w0, [x1] */
		0x17ffffff, /* b	1b */
	};
	static const uint32_t io_count[] = {
		0xb9000020, /* 1: str	w0, [x1] */
		0xf1000400, /* subs	x0, x0, #1 */
		0x54ffffc1, /* b.ne	1b */
		A64_END,
	};
	static const uint32_t mmio_count[] = {
		0xb9000040, /* 1: str	w0, [x2] */
		0xf1000400, /* subs	x0, x0, #1 */
		0x54ffffc1, /* b.ne	1b */
		A64_END,
	};
	static const uint32_t spin[] = { 0x14000000 /* b . */ };
	/*
	 * Not WFI: 6.1's KVM stops trapping WFI while the vCPU thread is
	 * alone on its CPU, and the vCPU then waits in the CPU instead of
	 * in KVM.  PSCI CPU_SUSPEND (standby) is an HVC, always trapped,
	 * which KVM emulates with the same kvm_vcpu_wfi().
	 */
	static const uint32_t suspend_loop[] = {
		0xd5034fdf, /* msr	daifset, #0xf */
		0xd2800020, /* 1: mov	x0, #0x1 */
		0xf2b88000, /* movk	x0, #0xc400, lsl #16: CPU_SUSPEND */
		0xd2800001, /* mov	x1, #0: standby */
		0xd4000002, /* hvc	#0 */
		0x17fffffc, /* b	1b */
	};
	const uint32_t *code;

	(void)n; /* in x0 */
	switch (prog) {
	case GUEST_HLT:
		code = end;
		*len = sizeof(end);
		break;
	case GUEST_IO_LOOP:
		code = io_loop;
		*len = sizeof(io_loop);
		break;
	case GUEST_IO_COUNT:
		code = io_count;
		*len = sizeof(io_count);
		break;
	case GUEST_MMIO_COUNT:
		code = mmio_count;
		*len = sizeof(mmio_count);
		break;
	case GUEST_SPIN:
		code = spin;
		*len = sizeof(spin);
		break;
	case GUEST_CLI_HLT:
		code = suspend_loop;
		*len = sizeof(suspend_loop);
		break;
	default:
		return NULL;
	}
	memcpy(buf, code, *len);
	return buf;
}

static int arch_vcpu_start(struct vcpu *vcpu, unsigned long code,
			   unsigned int n)
{
	/* A SYSTEM_OFF stopped every vCPU of the VM: start this one. */
	struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };
	const struct {
		uint64_t id, val;
	} regs[] = {
		{ ONE_REG_CORE(regs.regs[0]), n },
		{ ONE_REG_CORE(regs.regs[1]), GUEST_IO_ADDR },
		{ ONE_REG_CORE(regs.regs[2]), GUEST_MMIO_ADDR },
		{ ONE_REG_CORE(regs.regs[3]), GUEST_FAULT_ADDR },
		{ ONE_REG_CORE(regs.pstate), A64_PSTATE_EL1H_MASKED },
		{ ONE_REG_CORE(regs.pc), code },
	};
	size_t i;
	int r;

	/*
	 * A store the last KVM_RUN handed us (a loop stopped by
	 * immediate_exit) completes on the next entry, which moves the PC
	 * past it: the new PC's first instruction would be skipped.
	 * Complete it now without running the guest.
	 */
	if (vcpu->run->exit_reason == KVM_EXIT_MMIO) {
		vcpu->run->immediate_exit = 1;
		r = __test_ioctl(vcpu->fd, KVM_RUN, 0);
		vcpu->run->immediate_exit = 0;
		if (r < 0 && r != -EINTR)
			return r;
		vcpu->run->exit_reason = KVM_EXIT_INTR;
	}
	r = __test_ioctl(vcpu->fd, KVM_SET_MP_STATE, (unsigned long)&mp);
	for (i = 0; r >= 0 && i < sizeof(regs) / sizeof(regs[0]); i++)
		r = set_one_reg(vcpu->fd, regs[i].id, regs[i].val);
	return r;
}

static enum guest_exit classify_exit(struct vcpu *vcpu, int reason)
{
	struct kvm_run *run = vcpu->run;

	switch (reason) {
	case KVM_EXIT_MMIO:
		if (run->mmio.phys_addr == GUEST_IO_ADDR)
			return EXIT_IO;
		if (run->mmio.phys_addr == GUEST_MMIO_ADDR)
			return EXIT_MMIO;
		if (run->mmio.phys_addr == GUEST_FAULT_ADDR)
			return EXIT_FAULT;
		return EXIT_OTHER;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN)
			return EXIT_END;
		return EXIT_OTHER;
	default:
		return EXIT_OTHER;
	}
}
#endif

bool vcpu_exit_is_end(struct vcpu *vcpu, int reason)
{
	return reason >= 0 && classify_exit(vcpu, reason) == EXIT_END;
}

int __vcpu_load_prog(struct vcpu *vcpu, enum guest_prog prog, unsigned int n)
{
#if defined(__x86_64__)
	/* The code holds n: each vCPU has its own. */
	unsigned long code = GUEST_CODE + vcpu->index * VCPU_CODE_STRIDE;
#else
	/*
	 * One address per program, the same in every VM (n is in x0).
	 * QEMU's TCG, which runs these guests here, looks translated code
	 * up by virtual PC first and does not tell VMs apart there: a new
	 * VM whose vCPU starts where an earlier VM ran other code executed
	 * the earlier VM's (seen on 6.1: a CPU_SUSPEND loop at 0x1000 ran
	 * as the GUEST_IO_COUNT a VM freed before had there).  With each
	 * address always holding the same instructions, that cannot matter.
	 */
	unsigned long code = GUEST_CODE + prog * VCPU_CODE_STRIDE;
#endif
	const uint8_t *bytes;
	uint8_t buf[64];
	size_t len;

	if ((prog == GUEST_IO_COUNT || prog == GUEST_MMIO_COUNT) &&
	    (n < 1 || n > 0xffff))
		return -EINVAL;
	bytes = guest_code(prog, n, buf, &len);
	if (!bytes)
		return -EINVAL;
	memcpy((uint8_t *)vcpu->vm->mem + code, bytes, len);
	return arch_vcpu_start(vcpu, code, n);
}

int __vcpu_run(struct vcpu *vcpu)
{
	long r = __test_ioctl(vcpu->fd, KVM_RUN, 0);

	if (r < 0)
		return r;
	return vcpu->run->exit_reason;
}

int __vm_get_stats_fd(struct vm *vm)
{
	return __test_ioctl(vm->fd, KVM_GET_STATS_FD, 0);
}

int __vcpu_get_stats_fd(struct vcpu *vcpu)
{
	return __test_ioctl(vcpu->fd, KVM_GET_STATS_FD, 0);
}

void vm_free(struct vm *vm)
{
	int i;

	if (!vm)
		return;
	for (i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *vcpu = vm->vcpus[i];

		if (vcpu->thread_started)
			vcpu_thread_stop(vcpu);
		munmap(vcpu->run, vcpu->run_size);
		close(vcpu->fd);
		free(vcpu);
	}
	if (vm->mem)
		munmap(vm->mem, GUEST_MEM_SIZE);
	close(vm->fd);
	close(vm->kvm_fd);
	free(vm);
}

struct vm *vm_create(int nr_vcpus, const int *ids)
{
	struct vm *vm;
	int i, r;

	r = __vm_create(&vm);
	if (r == -ENOENT || r == -ENODEV || r == -ENXIO)
		tap_bail("/dev/kvm unavailable: %s (is kvm and %s loaded?)",
			 strerror(-r),
			 getenv("KVMSTATS_VENDOR") &&
					 *getenv("KVMSTATS_VENDOR") ?
				 getenv("KVMSTATS_VENDOR") :
				 "its vendor module");
	if (r < 0)
		tap_bail("creating a VM (KVM_CREATE_VM and memory) failed: %s",
			 strerror(-r));
	for (i = 0; i < nr_vcpus; i++)
		vm_add_vcpu(vm, ids ? ids[i] : i);
	return vm;
}

struct vcpu *vm_add_vcpu(struct vm *vm, int id)
{
	struct vcpu *vcpu;
	int r;

	r = __vm_add_vcpu(vm, id, &vcpu);
	if (r < 0)
		tap_bail("KVM_CREATE_VCPU(id %d) failed: errno %d (%s)", id, -r,
			 strerror(-r));
	return vcpu;
}

void vcpu_load_prog(struct vcpu *vcpu, enum guest_prog prog, unsigned int n)
{
	int r = __vcpu_load_prog(vcpu, prog, n);

	if (r < 0)
		tap_bail("loading guest program %d on vCPU %d "
			 "(x86: KVM_GET_SREGS/KVM_SET_SREGS/KVM_SET_REGS, "
			 "arm64: KVM_SET_MP_STATE/KVM_SET_ONE_REG) failed: %s",
			 prog, vcpu->id, strerror(-r));
}

static const char *exit_name(unsigned int reason)
{
	switch (reason) {
	case KVM_EXIT_IO:
		return "KVM_EXIT_IO";
	case KVM_EXIT_MMIO:
		return "KVM_EXIT_MMIO";
	case KVM_EXIT_HLT:
		return "KVM_EXIT_HLT";
	case KVM_EXIT_SHUTDOWN:
		return "KVM_EXIT_SHUTDOWN";
	case KVM_EXIT_FAIL_ENTRY:
		return "KVM_EXIT_FAIL_ENTRY";
	case KVM_EXIT_INTERNAL_ERROR:
		return "KVM_EXIT_INTERNAL_ERROR";
	case KVM_EXIT_UNKNOWN:
		return "KVM_EXIT_UNKNOWN";
	case KVM_EXIT_SYSTEM_EVENT:
		return "KVM_EXIT_SYSTEM_EVENT";
	default:
		return "?";
	}
}

void vcpu_run_to_hlt(struct vcpu *vcpu)
{
	for (;;) {
		int r = __vcpu_run(vcpu);

		if (r == -EINTR)
			continue;
		if (r < 0)
			tap_bail("KVM_RUN on vCPU %d failed: errno %d (%s)",
				 vcpu->id, -r, strerror(-r));
		switch (classify_exit(vcpu, r)) {
		case EXIT_IO:
			vcpu->nr_io++;
			break;
		case EXIT_MMIO:
			vcpu->nr_mmio++;
			break;
		case EXIT_END:
			vcpu->nr_hlt++;
			return;
		case EXIT_FAULT:
			tap_bail(
				"KVM_RUN on vCPU %d: the guest took an exception",
				vcpu->id);
		default:
			tap_bail("KVM_RUN on vCPU %d: unexpected exit %d (%s)",
				 vcpu->id, r, exit_name(r));
		}
	}
}

int vm_get_stats_fd(struct vm *vm)
{
	int fd = __vm_get_stats_fd(vm);

	if (fd < 0)
		tap_bail("KVM_GET_STATS_FD on VM fd %d failed: errno %d (%s)",
			 vm->fd, -fd, strerror(-fd));
	return fd;
}

int vcpu_get_stats_fd(struct vcpu *vcpu)
{
	int fd = __vcpu_get_stats_fd(vcpu);

	if (fd < 0)
		tap_bail(
			"KVM_GET_STATS_FD on vCPU %d fd %d failed: errno %d (%s)",
			vcpu->id, vcpu->fd, -fd, strerror(-fd));
	return fd;
}

void vm_run_all_to_hlt(struct vm *vm, enum guest_prog prog, unsigned int n)
{
	int i;

	for (i = 0; i < vm->nr_vcpus; i++) {
		vcpu_load_prog(vm->vcpus[i], prog, n);
		vcpu_run_to_hlt(vm->vcpus[i]);
	}
}

static void kick_handler(int sig)
{
	(void)sig;
}

static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void kick_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler; /* no SA_RESTART: KVM_RUN gets EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(KICK_SIGNAL, &sa, NULL);
}

static void *vcpu_thread_fn(void *arg)
{
	struct vcpu *vcpu = arg;

	vcpu->tid = sys_gettid();
	vcpu->in_run = 1;
	while (!vcpu->stop) {
		int r = __vcpu_run(vcpu);

		if (r == -EINTR) {
			__atomic_add_fetch(&vcpu->nr_intr, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		if (r < 0) {
			vcpu->thread_err = r;
			break;
		}
		r = classify_exit(vcpu, r);
		if (r == EXIT_IO) {
			vcpu->nr_io++;
		} else if (r == EXIT_MMIO) {
			vcpu->nr_mmio++;
		} else if (r == EXIT_END) {
			vcpu->nr_hlt++;
			break;
		} else {
			vcpu->thread_err = -EPROTO;
			break;
		}
	}
	__atomic_store_n(&vcpu->in_run, 2, __ATOMIC_SEQ_CST);
	return NULL;
}

void vcpu_thread_start(struct vcpu *vcpu)
{
	int r;

	pthread_once(&kick_once, kick_install);
	vcpu->stop = 0;
	vcpu->in_run = 0;
	vcpu->thread_err = 0;
	vcpu->run->immediate_exit = 0;
	r = pthread_create(&vcpu->thread, NULL, vcpu_thread_fn, vcpu);
	if (r)
		tap_bail("pthread_create for vCPU %d: %s", vcpu->id,
			 strerror(r));
	vcpu->thread_started = true;
}

void vcpu_thread_wait_running(struct vcpu *vcpu)
{
	while (!__atomic_load_n(&vcpu->in_run, __ATOMIC_SEQ_CST))
		msleep(1);
	/* Give it time to actually enter the guest. */
	msleep(50);
}

/*
 * pthread_join() returns when the thread's tid word is cleared, which the
 * kernel does before it releases the thread (its pid, /proc/self/task/TID):
 * wait for that too, so that what the kernel says of the thread afterwards
 * is "exited".
 */
void thread_wait_released(pid_t tid)
{
	uint64_t deadline = now_ns() + 10ull * 1000000000ull;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
	while (!access(path, F_OK)) {
		if (now_ns() > deadline) {
			tap_diag("thread %d still in /proc 10 s after it ended",
				 (int)tid);
			return;
		}
		msleep(1);
	}
}

void vcpu_thread_stop(struct vcpu *vcpu)
{
	uint64_t deadline = now_ns() + 10ull * 1000000000ull;

	if (!vcpu->thread_started)
		return;
	vcpu->stop = 1;
	__atomic_store_n(&vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&vcpu->in_run, __ATOMIC_SEQ_CST) != 2) {
		if (now_ns() > deadline)
			tap_bail("vCPU %d thread did not leave KVM_RUN in 10s",
				 vcpu->id);
		pthread_kill(vcpu->thread, KICK_SIGNAL);
		msleep(5);
	}
	pthread_join(vcpu->thread, NULL);
	if (vcpu->tid)
		thread_wait_released(vcpu->tid);
	vcpu->thread_started = false;
	vcpu->run->immediate_exit = 0;
	if (vcpu->thread_err)
		tap_diag(
			"vCPU %d thread ended with error %d (%s), exit reason %u",
			vcpu->id, vcpu->thread_err, strerror(-vcpu->thread_err),
			vcpu->run->exit_reason);
}

int __vm_create_irqchip(struct vm **out)
{
	struct vm *vm;
	int r = __vm_create(&vm);

	if (r < 0)
		return r;
#if defined(__x86_64__)
	r = __test_ioctl(vm->fd, KVM_CREATE_IRQCHIP, 0);
	if (r < 0) {
		vm_free(vm);
		return r;
	}
#endif
	vm->irqchip = true;
	*out = vm;
	return 0;
}

struct vm *vm_create_irqchip(int nr_vcpus)
{
	struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_RUNNABLE };
	struct vm *vm;
	int i, r;

	r = __vm_create_irqchip(&vm);
	if (r < 0)
		tap_bail(
			"creating a VM with an in-kernel irqchip (KVM_CREATE_VM, "
			"KVM_CREATE_IRQCHIP) failed: %s",
			strerror(-r));
	for (i = 0; i < nr_vcpus; i++) {
		struct vcpu *vcpu = vm_add_vcpu(vm, i);

		/*
		 * x86's APs would wait for INIT/SIPI: make every vCPU
		 * runnable (arm64's start so without PSCI's POWER_OFF).
		 */
		test_ioctl(vcpu->fd, KVM_SET_MP_STATE, &mp);
	}
	return vm;
}

/* Is the vCPU thread asleep in KVM's halt wait?  1 yes, 0 no, -errno. */
static int vcpu_asleep_in_kvm(struct vcpu *vcpu)
{
	char path[64], buf[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan",
		 (int)vcpu->tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	/*
	 * wchan is non-zero only for a task off the run queue; the kernel
	 * names the first function outside the scheduler: kvm_vcpu_block
	 * (or kvm_vcpu_halt where it is inlined).
	 */
	return !strncmp(buf, "kvm_vcpu_", 9);
}

int __vcpu_wait_halted(struct vcpu *vcpu, unsigned int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	while (!vcpu->tid || vcpu_asleep_in_kvm(vcpu) != 1) {
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		msleep(1);
	}
	return 0;
}

void vcpu_halt_start(struct vcpu *vcpu)
{
	if (!vcpu->vm->irqchip)
		tap_bail("vcpu_halt_start: the VM has no in-kernel irqchip");
	vcpu_load_prog(vcpu, GUEST_CLI_HLT, 0);
	vcpu->tid = 0;
	vcpu->nr_intr = 0;
	vcpu->halt_wakes = vcpu->halt_wakes_unsure = 0;
	vcpu_thread_start(vcpu);
	vcpu_thread_wait_running(vcpu);
	if (__vcpu_wait_halted(vcpu, 10000))
		tap_diag("vCPU %d: not seen asleep in KVM (wchan) within 10 s",
			 vcpu->id);
}

void vcpu_halt_wake(struct vcpu *vcpu)
{
	unsigned long before =
		__atomic_load_n(&vcpu->nr_intr, __ATOMIC_SEQ_CST);
	bool sure = false;
	uint64_t deadline;
	int i;

	/* Once wchan never showed it asleep, do not wait seconds each time. */
	if (!(vcpu->halt_wakes_unsure && !vcpu->halt_wakes))
		sure = !__vcpu_wait_halted(vcpu, 3000);
	if (sure) {
		vcpu->halt_wakes++;
	} else {
		msleep(50);
		vcpu->halt_wakes_unsure++;
	}
	deadline = now_ns() + 10ull * 1000000000ull;
	for (i = 0; __atomic_load_n(&vcpu->nr_intr, __ATOMIC_SEQ_CST) == before;
	     i++) {
		/* Unsure: the signal may have come between two KVM_RUNs. */
		if (i == 0 || (!sure && i % 100 == 0))
			pthread_kill(vcpu->thread, KICK_SIGNAL);
		if (now_ns() > deadline)
			tap_bail(
				"vCPU %d: KVM_RUN did not return EINTR within 10 s "
				"of a signal",
				vcpu->id);
		if (vcpu->thread_err)
			tap_bail("vCPU %d thread failed: %s", vcpu->id,
				 strerror(-vcpu->thread_err));
		msleep(1);
	}
}

static pid_t keeper_pid, keeper_owner;

void vm_keeper_stop(void)
{
	if (!keeper_pid || getpid() != keeper_owner)
		return;
	kill(keeper_pid, SIGKILL);
	waitpid(keeper_pid, NULL, 0);
	keeper_pid = 0;
}

void vm_keeper_start(void)
{
	static bool registered;
	int p[2];
	pid_t pid;
	char c = 0;

	if (keeper_pid)
		return;
	if (pipe2(p, O_CLOEXEC))
		tap_bail("pipe2: %s", strerror(errno));
	pid = tap_fork();
	if (!pid) {
		struct vm *vm;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (p[1] > 3)
			syscall(SYS_close_range, 3, p[1] - 1, 0);
		syscall(SYS_close_range, p[1] + 1, ~0u, 0);
		c = __vm_create(&vm) ? 'e' : 'k';
		if (write(p[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1 || c != 'k')
		tap_diag(
			"keeper VM could not be created: VM creation will flip KVM's static key");
	close(p[0]);
	keeper_pid = pid;
	keeper_owner = getpid();
	if (!registered) {
		atexit(vm_keeper_stop);
		registered = true;
	}
}

void kvm_test_init(void)
{
	tap_init();
	/* The harness's ksg_pin module holds the key itself. */
	if (access("/sys/module/ksg_pin", F_OK))
		vm_keeper_start();
}

void pin_self_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		tap_bail("sched_setaffinity(%d): %s", cpu, strerror(errno));
}
