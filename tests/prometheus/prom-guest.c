// SPDX-License-Identifier: GPL-2.0-only
/*
 * The guest half of tests/host/50-prometheus: VMs with known statistics,
 * `kvmstats export` serving them over TLS with basic auth on port 9477, and
 * a control port (9478) on which the host asks for KVM's own values (each
 * VM's native KVM_GET_STATS_FD, read by this process, their VMM) at the
 * moments it chooses.  One command per connection, one JSON line back:
 *
 *   hello   pid, and per VM its fd, vCPUs and KVM ids (VM, vCPU 0)
 *   start   start vCPU 0 of the "io" VM (an `out` loop): io_exits climbs
 *   sample  io_exits of that vCPU now
 *   stop    stop it; io_exits now, and the halt_wait_hist buckets of the
 *           "halt" VM's vCPU 0 (frozen since before the exporter started)
 *   steal-start  pin this process's and the exporter's threads to CPU 0,
 *           run the "steal" VM's vCPU in a thread pinned to CPU 1 and a
 *           competitor process spinning on CPU 1 (issue 19)
 *   steal-sample the competitor's time on a CPU and the vCPU thread's
 *           time on a CPU and waiting for one, from /proc, now
 *   steal-stop   end both
 *   quit    stop the exporter (its exit status is in the answer) and exit
 *
 * Runs until quit, or gives up after KVMSTATS_TEST_TIMEOUT - 10 seconds.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmstats_util.h"

#define CONTROL_PORT 9478

static struct stats_blob blob;

static uint64_t native(int fd, const char *name)
{
	stats_read_all(fd, &blob, name);
	return stats_value(&blob, name, 0);
}

static void vm_json(FILE *f, const char *name, struct vm *vm, int sfd,
		    const char *sep)
{
	char vm_id[64];
	int vfd = vm_get_stats_fd(vm);

	stats_read_all(vfd, &blob, "VM");
	snprintf(vm_id, sizeof(vm_id), "%s", stats_id(&blob));
	close(vfd);
	stats_read_all(sfd, &blob, "vCPU 0");
	fprintf(f,
		"\"%s\":{\"fd\":%d,\"vcpus\":%d,\"vm_id\":\"%s\",\"vcpu0_id\":\"%s\"}%s",
		name, vm->fd, vm->nr_vcpus, vm_id, stats_id(&blob), sep);
}

/* ---- the steal scenario: a vCPU that waits for a competitor ---- */

static struct vcpu *steal_vcpu;
static pthread_t steal_th;
static volatile pid_t steal_tid;
static volatile int steal_stop;
static pid_t steal_comp = -1;

static void pin(pid_t tid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(tid, sizeof(set), &set);
}

/* Every thread of process @pid onto CPU @cpu. */
static void pin_process(pid_t pid, int cpu)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			pin(atoi(e->d_name), cpu);
	if (d)
		closedir(d);
}

static void on_kick(int sig)
{
	(void)sig;
}

static void *steal_fn(void *arg)
{
	(void)arg;
	pin(0, 1);
	steal_tid = sys_gettid();
	while (!steal_stop) {
		int r = __vcpu_run(steal_vcpu);

		if (r < 0 && r != -EINTR)
			break;
	}
	return NULL;
}

/* /proc/@pid/task/@tid/schedstat's time on a CPU and waiting, ns. */
static void schedstat(pid_t pid, pid_t tid, unsigned long long *cpu,
		      unsigned long long *wait)
{
	char path[96];
	FILE *f;

	*cpu = *wait = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%llu %llu", cpu, wait) != 2)
		tap_diag("cannot read %s", path);
	if (f)
		fclose(f);
}

static void steal_start(pid_t exporter)
{
	struct sigaction sa = { .sa_handler = on_kick };

	sigaction(SIGUSR2, &sa, NULL);
	pin_process(getpid(), 0);
	pin_process(exporter, 0);
	steal_stop = 0;
	if (pthread_create(&steal_th, NULL, steal_fn, NULL))
		tap_bail("pthread_create failed");
	steal_comp = fork();
	if (steal_comp == 0) {
		int fd;

		/* Not the control connection: its answer ends at its close. */
		for (fd = 3; fd < 1024; fd++)
			close(fd);
		pin(0, 1);
		for (;;)
			;
	}
	while (!steal_tid)
		msleep(1);
}

static void steal_end(void)
{
	if (steal_comp > 0) {
		kill(steal_comp, SIGKILL);
		waitpid(steal_comp, NULL, 0);
		steal_comp = -1;
	}
	if (!steal_tid)
		return;
	steal_stop = 1;
	steal_vcpu->run->immediate_exit = 1;
	pthread_kill(steal_th, SIGUSR2);
	pthread_join(steal_th, NULL);
	steal_tid = 0;
}

static pid_t start_exporter(void)
{
	pid_t p = fork();

	if (p == 0) {
		int fd = open("/artifacts/exporter.log",
			      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0)
			dup2(fd, 2);
		/* Every series: the checks read per-vCPU histograms. */
		execl("/usr/bin/kvmstats", "kvmstats", "export", "--listen",
		      ":9477", "--web.config.file", "/e2e/web.yml", "--per",
		      "vcpu", "--collector.histograms", (char *)NULL);
		_exit(127);
	}
	return p;
}

int main(void)
{
	const char *t = getenv("KVMSTATS_TEST_TIMEOUT");
	int budget = (t ? atoi(t) : 240) - 10;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(CONTROL_PORT) };
	struct vm *io, *halt, *two, *steal;
	int io_fd, halt_fd, two_fd, steal_fd, ls, one = 1, i, st;
	uint64_t deadline;
	pid_t exporter;

	tap_init();
	kvm_test_init();

	/* "io": one vCPU, an out loop once the host says start. */
	io = vm_create(1, NULL);
	vcpu_load_prog(io->vcpus[0], GUEST_IO_LOOP, 0);
	io_fd = vcpu_get_stats_fd(io->vcpus[0]);
	/* "halt": an irqchip vCPU woken 12 times from HLT, then stopped. */
	halt = vm_create_irqchip(1);
	halt_fd = vcpu_get_stats_fd(halt->vcpus[0]);
	vcpu_halt_start(halt->vcpus[0]);
	for (i = 0; i < 12; i++)
		vcpu_halt_wake(halt->vcpus[0]);
	vcpu_thread_stop(halt->vcpus[0]);
	/* "two": two vCPUs that did 100 port writes each and halted. */
	two = vm_create(2, NULL);
	vm_run_all_to_hlt(two, GUEST_IO_COUNT, 100);
	two_fd = vcpu_get_stats_fd(two->vcpus[0]);
	/* "steal": one vCPU that spins once the host says steal-start. */
	steal = vm_create(1, NULL);
	vcpu_load_prog(steal->vcpus[0], GUEST_SPIN, 0);
	steal_fd = vcpu_get_stats_fd(steal->vcpus[0]);
	steal_vcpu = steal->vcpus[0];

	exporter = start_exporter();
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 4))
		tap_bail("control port %d: %m", CONTROL_PORT);
	tap_pass("VMs created, exporter started (pid %d), control on :%d",
		 exporter, CONTROL_PORT);

	deadline = now_ns() + (uint64_t)budget * 1000000000ull;
	for (;;) {
		struct pollfd p = { .fd = ls, .events = POLLIN };
		char cmd[32] = "";
		ssize_t n;
		FILE *f;
		int c;

		if (now_ns() > deadline)
			tap_bail("no quit from the host within %d s", budget);
		if (poll(&p, 1, 1000) <= 0)
			continue;
		c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		n = read(c, cmd, sizeof(cmd) - 1);
		if (n <= 0) {
			close(c);
			continue;
		}
		cmd[strcspn(cmd, "\r\n")] = '\0';
		f = fdopen(c, "w");
		if (!f) {
			close(c);
			continue;
		}
		if (!strcmp(cmd, "hello")) {
			fprintf(f, "{\"pid\":%d,", getpid());
			vm_json(f, "io", io, io_fd, ",");
			vm_json(f, "halt", halt, halt_fd, ",");
			vm_json(f, "two", two, two_fd, ",");
			vm_json(f, "steal", steal, steal_fd, "}\n");
		} else if (!strcmp(cmd, "start")) {
			vcpu_thread_start(io->vcpus[0]);
			vcpu_thread_wait_running(io->vcpus[0]);
			fprintf(f, "{\"io_exits\":%llu}\n",
				(unsigned long long)native(io_fd, "io_exits"));
		} else if (!strcmp(cmd, "sample")) {
			fprintf(f, "{\"io_exits\":%llu}\n",
				(unsigned long long)native(io_fd, "io_exits"));
		} else if (!strcmp(cmd, "stop")) {
			const struct kvm_stats_desc *d;
			int b;

			vcpu_thread_stop(io->vcpus[0]);
			fprintf(f, "{\"io_exits\":%llu,",
				(unsigned long long)native(io_fd, "io_exits"));
			stats_read_all(halt_fd, &blob, "halt vCPU");
			d = stats_find(&blob, "halt_wait_hist");
			if (!d)
				tap_bail("no halt_wait_hist in this kernel");
			fprintf(f,
				"\"halt_wait_hist\":{\"exponent\":%d,\"type\":%u,\"bucket_size\":%u,\"buckets\":[",
				d->exponent, d->flags & KVM_STATS_TYPE_MASK,
				d->bucket_size);
			for (b = 0; b < d->size; b++)
				fprintf(f, "%s%llu", b ? "," : "",
					(unsigned long long)stats_value(
						&blob, "halt_wait_hist", b));
			fprintf(f, "]}}\n");
		} else if (!strcmp(cmd, "steal-start")) {
			steal_start(exporter);
			fprintf(f, "{\"tid\":%d,\"competitor\":%d}\n",
				steal_tid, steal_comp);
		} else if (!strcmp(cmd, "steal-sample")) {
			unsigned long long cc, cw, vc, vw;
			uint64_t t0 = now_ns();

			schedstat(steal_comp, steal_comp, &cc, &cw);
			schedstat(getpid(), steal_tid, &vc, &vw);
			fprintf(f,
				"{\"guest_ns\":%llu,\"competitor_cpu_ns\":%llu,\"vcpu_cpu_ns\":%llu,\"vcpu_wait_ns\":%llu}\n",
				(unsigned long long)((t0 + now_ns()) / 2), cc,
				vc, vw);
		} else if (!strcmp(cmd, "steal-stop")) {
			steal_end();
			fprintf(f, "{}\n");
		} else if (!strcmp(cmd, "quit")) {
			kill(exporter, SIGTERM);
			waitpid(exporter, &st, 0);
			tap_check(
				WIFEXITED(st) && WEXITSTATUS(st) == 0,
				"the exporter exits 0 on SIGTERM (status %#x)",
				st);
			fprintf(f, "{\"exporter_status\":%d}\n", st);
			fclose(f);
			break;
		} else {
			fprintf(f, "{\"error\":\"unknown command\"}\n");
		}
		fclose(f);
	}
	close(ls);
	close(io_fd);
	close(halt_fd);
	close(two_fd);
	steal_end();
	close(steal_fd);
	vm_free(steal);
	vm_free(two);
	vm_free(halt);
	vm_free(io);
	return tap_exit();
}
