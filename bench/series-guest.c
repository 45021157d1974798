// SPDX-License-Identifier: GPL-2.0-only
/*
 * The guest half of bench/series-budget: 100 VMs of 8 vCPUs (real ones,
 * through /dev/kvm; each vCPU did 10 port writes and halted), and two
 * `kvmstats export --listen` on them, side by side: the defaults on port
 * 9477, every series (--per vcpu --collector.histograms) on 9478.  The
 * host scrapes both through QEMU's forwards and asks, on the control port
 * 9479, for the CPU time each exporter has used (/proc/PID/stat) and its
 * resident set.  One command per connection, one JSON line back:
 *
 *   hello   the VMs and vCPUs, the exporters' pids
 *   cpu     {"defaults": {"cpu_us": N, "rss_kb": N}, "all": {...}}
 *   quit    stop the exporters and exit
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmstats_util.h"

#define VMS	     100
#define VCPUS	     8
#define CONTROL_PORT 9479

static pid_t start_exporter(const char *port, int everything)
{
	pid_t p = fork();

	if (p == 0) {
		char listen[32];

		snprintf(listen, sizeof(listen), ":%s", port);
		if (everything)
			execl("/usr/bin/kvmstats", "kvmstats", "export",
			      "--listen", listen, "--log.level", "warn",
			      "--per", "vcpu", "--collector.histograms",
			      (char *)NULL);
		else
			execl("/usr/bin/kvmstats", "kvmstats", "export",
			      "--listen", listen, "--log.level", "warn",
			      (char *)NULL);
		_exit(127);
	}
	return p;
}

/* utime + stime in microseconds, and VmRSS, of @pid. */
static void usage_of(pid_t pid, unsigned long long *cpu_us,
		     unsigned long *rss_kb)
{
	unsigned long long ut = 0, st = 0;
	char path[64], buf[1024], *p;
	FILE *f;

	*cpu_us = 0;
	*rss_kb = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2,
		       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		       &ut, &st);
	if (f)
		fclose(f);
	*cpu_us = (ut + st) * 1000000ull /
		  (unsigned long long)sysconf(_SC_CLK_TCK);
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "VmRSS: %lu", rss_kb) == 1)
			break;
	if (f)
		fclose(f);
}

int main(void)
{
	const char *t = getenv("KVMSTATS_TEST_TIMEOUT");
	int budget = (t ? atoi(t) : 600) - 10;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(CONTROL_PORT) };
	struct rlimit rl = { 8192, 8192 };
	struct vm *vms[VMS];
	int ls, one = 1, i, st;
	uint64_t deadline, t0;
	pid_t def, all;

	tap_init();
	kvm_test_init();
	if (setrlimit(RLIMIT_NOFILE, &rl))
		tap_bail("RLIMIT_NOFILE 8192: %m");
	t0 = now_ns();
	for (i = 0; i < VMS; i++) {
		vms[i] = vm_create(VCPUS, NULL);
		vm_run_all_to_hlt(vms[i], GUEST_IO_COUNT, 10);
	}
	tap_pass("%d VMs of %d vCPUs made and run to HLT in %.1f s", VMS, VCPUS,
		 (now_ns() - t0) / 1e9);
	if (system("ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null")) {
		/* The loopback may already be up. */
	}
	def = start_exporter("9477", 0);
	all = start_exporter("9478", 1);
	ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 4))
		tap_bail("control port %d: %m", CONTROL_PORT);

	deadline = now_ns() + (uint64_t)budget * 1000000000ull;
	for (;;) {
		struct pollfd p = { .fd = ls, .events = POLLIN };
		unsigned long long cd, ca;
		unsigned long rd, ra;
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
			fprintf(f,
				"{\"pid\":%d,\"vms\":%d,\"vcpus\":%d,\"defaults\":%d,\"all\":%d}\n",
				getpid(), VMS, VMS * VCPUS, def, all);
		} else if (!strcmp(cmd, "cpu")) {
			usage_of(def, &cd, &rd);
			usage_of(all, &ca, &ra);
			fprintf(f,
				"{\"defaults\":{\"cpu_us\":%llu,\"rss_kb\":%lu},\"all\":{\"cpu_us\":%llu,\"rss_kb\":%lu}}\n",
				cd, rd, ca, ra);
		} else if (!strcmp(cmd, "quit")) {
			kill(def, SIGTERM);
			kill(all, SIGTERM);
			waitpid(def, &st, 0);
			tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
				  "the default exporter exits 0 (status %#x)",
				  st);
			waitpid(all, &st, 0);
			tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
				  "the other exporter exits 0 (status %#x)",
				  st);
			fprintf(f, "{\"bye\":true}\n");
			fclose(f);
			break;
		} else {
			fprintf(f, "{\"error\":\"unknown command\"}\n");
		}
		fclose(f);
	}
	close(ls);
	for (i = 0; i < VMS; i++)
		vm_free(vms[i]);
	return tap_exit();
}
