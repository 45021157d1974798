// SPDX-License-Identifier: GPL-2.0-only
/*
 * samplevm: a tiny VMM whose vCPUs run, halt and sleep in a pattern you can
 * watch with `kvmstats top`.
 *
 * Each vCPU cycles through three phases:
 *
 *   run    the guest loops on "out %al,$0x10": every iteration is an I/O
 *          exit, so exits and io_exits climb fast;
 *   halt   the guest executes hlt once: halt_exits goes up by one;
 *   sleep  the vCPU thread does not enter the guest at all: nothing moves.
 *
 *        run (RUN_MS)        halt     sleep (SLEEP_MS)
 *   |=====================|   .   |--------------------|=====...
 *
 * vCPU i starts its cycle i * STAGGER_MS late, so the vCPUs of one VM are
 * visibly out of step.  The guest is 16-bit real mode code in one 64 KiB
 * memory slot; there is no in-kernel irqchip, so hlt always exits to us.
 *
 * Usage: samplevm [-c VCPUS] [-r RUN_MS] [-s SLEEP_MS] [-g STAGGER_MS]
 * Runs until killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/kvm.h>

#define MEM_SIZE  0x10000
#define CODE_LOOP 0x1000 /* 1: out %al,$0x10; jmp 1b */
#define CODE_HLT  0x1010 /* 2: hlt; jmp 2b */
#define MAX_VCPUS 16

static int vm_fd;
static size_t run_size;
static unsigned int run_ms = 400, sleep_ms = 600, stagger_ms = 250;

struct vcpu {
	int index;
	int fd;
	struct kvm_run *run;
};

static void die(const char *what)
{
	fprintf(stderr, "samplevm: %s: %s\n", what, strerror(errno));
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

static void set_rip(struct vcpu *v, uint64_t rip)
{
	struct kvm_regs regs;

	memset(&regs, 0, sizeof(regs));
	regs.rip = rip;
	regs.rflags = 0x2;
	if (ioctl(v->fd, KVM_SET_REGS, &regs))
		die("KVM_SET_REGS");
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

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	unsigned int reason;

	sleep_ms_(v->index * stagger_ms);
	for (;;) {
		uint64_t end = now_ms() + run_ms;

		set_rip(v, CODE_LOOP);
		do {
			reason = enter(v);
			if (reason != KVM_EXIT_IO) {
				fprintf(stderr,
					"samplevm: vCPU %d: unexpected exit %u\n",
					v->index, reason);
				exit(1);
			}
		} while (now_ms() < end);

		set_rip(v, CODE_HLT);
		reason = enter(v);
		if (reason != KVM_EXIT_HLT) {
			fprintf(stderr,
				"samplevm: vCPU %d: expected HLT, got exit %u\n",
				v->index, reason);
			exit(1);
		}
		sleep_ms_(sleep_ms);
	}
	return NULL;
}

static void add_vcpu(struct vcpu *v, int index)
{
	struct kvm_sregs sregs;

	v->index = index;
	v->fd = ioctl(vm_fd, KVM_CREATE_VCPU, index);
	if (v->fd < 0)
		die("KVM_CREATE_VCPU");
	v->run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd,
		      0);
	if (v->run == MAP_FAILED)
		die("mmap kvm_run");
	if (ioctl(v->fd, KVM_GET_SREGS, &sregs))
		die("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs))
		die("KVM_SET_SREGS");
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
	static const uint8_t loop[] = { 0xe6, 0x10, 0xeb, 0xfc };
	static const uint8_t halt[] = { 0xf4, 0xeb, 0xfd };
	struct kvm_userspace_memory_region region;
	static struct vcpu vcpus[MAX_VCPUS];
	unsigned int nr_vcpus = 2, i;
	pthread_t thread;
	int kvm_fd, opt;
	uint8_t *mem;

	while ((opt = getopt(argc, argv, "c:r:s:g:h")) != -1) {
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
			fprintf(stderr,
				"usage: samplevm [-c VCPUS] [-r RUN_MS] [-s SLEEP_MS] [-g STAGGER_MS]\n");
			return 2;
		}
	}
	if (!nr_vcpus)
		nr_vcpus = 1;

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
	memcpy(mem + CODE_LOOP, loop, sizeof(loop));
	memcpy(mem + CODE_HLT, halt, sizeof(halt));
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
