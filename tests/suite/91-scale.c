// SPDX-License-Identifier: GPL-2.0-only
/*
 * Issue 12: a host with a thousand vCPUs.  NR_VMMS child VMMs make
 * NR_VMS VMs of NR_VCPUS vCPUs each (a vCPU costs KVM memory, not guest
 * memory: only every RUN_EVERY-th VM has a memory slot, and its first
 * RUN_VCPUS vCPUs run a guest that makes a known number of port writes and
 * halts; the other vCPUs never run).  Then:
 *
 *   - LIST_VMS lists every VM exactly once, at its fd, with its vCPUs;
 *   - every VM and vCPU file (all of them, no sample) read through
 *     kvmstats is byte-identical to the native KVM_GET_STATS_FD file,
 *     which the child VMM makes and passes over a socket, and every vCPU
 *     shows the exact io_exits its guest made;
 *   - `kvmstats list`, `show --vcpu all`, `top --batch` and `export`, run
 *     under the guest's default open file limit, each cover every VM and
 *     vCPU, with the native values, exit 0 and say nothing on stderr;
 *   - a VMM (with NR_VMS / NR_VMMS VMs) SIGKILLed while `export --listen`
 *     sweeps is dropped from the next scrape (no series, not counted,
 *     no read error) and marked exited in `top`, not served as alive;
 *   - once the VMMs are gone, kvmstats gives back its reference to every
 *     VM, and a VM released after that is let go of within seconds (the
 *     programs after this one unload kvm_amd).
 *
 * The test itself never holds more than a VM's worth of stats fds: its
 * fds are its own, and what the tool may use is the tool's limit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "freeze_util.h"
#include "kvmstats_util.h"

#define NR_VMMS	    5
#define VMS_PER_VMM 50
#define NR_VMS	    (NR_VMMS * VMS_PER_VMM)
#define NR_VCPUS    4
#define RUN_EVERY   5 /* VMs 0, 5, 10, ... of each VMM run a guest */
#define RUN_VCPUS   2 /* on their vCPUs 0 and 1 */
#define VICTIM	    (NR_VMMS - 1)

#define TOOL	    "/usr/bin/kvmstats"
#define TOOL_ERR    "/tmp/kvmstats-scale.err"
#define TOP_OUT	    "/tmp/kvmstats-scale-top.txt"
#define EXPORT_PORT 9479

/* What a child VMM says once its VMs exist: their VM fds. */
struct vmm_hello {
	int err; /* 0, or -errno of the step that failed */
	int vm_fd[VMS_PER_VMM];
};

enum { REQ_NATIVE = 1, REQ_EXIT };

struct vmm_req {
	int op;
	int vm; /* REQ_NATIVE: which of its VMs */
};

struct vmm {
	pid_t pid;
	int sock;
	bool dead;
	struct vmm_hello hello;
};

/* One VM as the test knows it, with the native values of its vCPUs. */
struct vmrec {
	int vmm;
	int fd;
	uint64_t io_exits[NR_VCPUS], exits[NR_VCPUS];
	unsigned int seen[NR_VCPUS]; /* per tool check: times seen */
	unsigned int seen_vm;
};

static struct vmm vmms[NR_VMMS];
static struct vmrec vms[NR_VMS];
static unsigned int host_vms, host_vcpus; /* all VMs of the guest */

/* The port writes the guest of VM @g's vCPU @c makes (0: it never runs). */
static unsigned int io_count(int g, int c)
{
	if ((g % VMS_PER_VMM) % RUN_EVERY || c >= RUN_VCPUS)
		return 0;
	return 1 + (unsigned int)(g * NR_VCPUS + c) % 17;
}

/* ------------------------------------------------------------ the VMMs */

/* A VM that never runs: no memory, no kvm_run mapping. */
static int bare_vm(int kvm, int *vcpu_fd)
{
	int vm, c;

	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return -errno;
	for (c = 0; c < NR_VCPUS; c++) {
		vcpu_fd[c] = ioctl(vm, KVM_CREATE_VCPU, c);
		if (vcpu_fd[c] < 0)
			return -errno;
	}
	return vm;
}

static void __attribute__((noreturn)) vmm_main(int k, int sock)
{
	static int vcpu_fd[VMS_PER_VMM][NR_VCPUS];
	struct vmm_hello hello = { 0 };
	struct vmm_req req;
	int kvm, j, c, g;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (sock > 3)
		syscall(SYS_close_range, 3, sock - 1, 0);
	syscall(SYS_close_range, sock + 1, ~0u, 0);
	kvm = __kvm_open();
	hello.err = kvm < 0 ? kvm : 0;
	for (j = 0; !hello.err && j < VMS_PER_VMM; j++) {
		g = k * VMS_PER_VMM + j;
		if (io_count(g, 0)) {
			struct vm *vm = vm_create(NR_VCPUS, NULL);

			for (c = 0; c < RUN_VCPUS; c++) {
				vcpu_load_prog(vm->vcpus[c], GUEST_IO_COUNT,
					       io_count(g, c));
				vcpu_run_to_hlt(vm->vcpus[c]);
			}
			for (c = 0; c < NR_VCPUS; c++)
				vcpu_fd[j][c] = vm->vcpus[c]->fd;
			hello.vm_fd[j] = vm->fd;
		} else {
			hello.vm_fd[j] = bare_vm(kvm, vcpu_fd[j]);
			if (hello.vm_fd[j] < 0)
				hello.err = hello.vm_fd[j];
		}
	}
	if (write(sock, &hello, sizeof(hello)) != sizeof(hello))
		_exit(2);
	for (;;) {
		int fds[1 + NR_VCPUS], n = 0;

		if (read(sock, &req, sizeof(req)) != sizeof(req) ||
		    req.op != REQ_NATIVE)
			_exit(0);
		j = req.vm;
		fds[n] = ioctl(hello.vm_fd[j], KVM_GET_STATS_FD, 0);
		n += fds[n] >= 0;
		for (c = 0; c < NR_VCPUS; c++) {
			fds[n] = ioctl(vcpu_fd[j][c], KVM_GET_STATS_FD, 0);
			n += fds[n] >= 0;
		}
		/* Fewer fds than asked for tells the parent it failed. */
		if (send_fds(sock, &n, sizeof(n), fds, n) < 0)
			_exit(3);
		while (n--)
			close(fds[n]);
	}
}

static void start_vmms(void)
{
	int sv[2], k, j;

	for (k = 0; k < NR_VMMS; k++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			tap_bail("socketpair: %s", strerror(errno));
		vmms[k].pid = tap_fork();
		if (!vmms[k].pid) {
			close(sv[0]);
			vmm_main(k, sv[1]);
		}
		close(sv[1]);
		vmms[k].sock = sv[0];
	}
	/* They make their VMs side by side; then each says which fds. */
	for (k = 0; k < NR_VMMS; k++) {
		struct vmm_hello *h = &vmms[k].hello;

		if (read(vmms[k].sock, h, sizeof(*h)) != sizeof(*h))
			tap_bail("child VMM %d died making its VMs",
				 vmms[k].pid);
		if (h->err)
			tap_bail("child VMM %d could not make its VMs: %s",
				 vmms[k].pid, strerror(-h->err));
		for (j = 0; j < VMS_PER_VMM; j++) {
			vms[k * VMS_PER_VMM + j].vmm = k;
			vms[k * VMS_PER_VMM + j].fd = h->vm_fd[j];
		}
	}
}

/* The native stats fds of VM @g (VM file first): 1 + NR_VCPUS of them. */
static void native_fds(int g, int *fds)
{
	struct vmm *m = &vmms[vms[g].vmm];
	struct vmm_req req = { REQ_NATIVE, g % VMS_PER_VMM };
	int n = 0, got;

	if (write(m->sock, &req, sizeof(req)) != sizeof(req))
		tap_bail("child VMM %d: request failed", m->pid);
	got = recv_fds(m->sock, &n, sizeof(n), fds, 1 + NR_VCPUS);
	if (got != 1 + NR_VCPUS || n != got)
		tap_bail("child VMM %d: KVM_GET_STATS_FD of VM %d: %d fds",
			 m->pid, vms[g].fd, got);
}

static void stop_vmm(int k, bool kill_it)
{
	struct vmm_req req = { REQ_EXIT, 0 };

	if (kill_it)
		kill(vmms[k].pid, SIGKILL);
	else if (write(vmms[k].sock, &req, sizeof(req)) != sizeof(req))
		tap_diag("child VMM %d: exit request failed", vmms[k].pid);
	waitpid(vmms[k].pid, NULL, 0);
	close(vmms[k].sock);
	vmms[k].dead = true;
}

/* Our VM (pid, fd), or -1. */
static int find_vm(int pid, int fd)
{
	int k, j;

	for (k = 0; k < NR_VMMS; k++) {
		if (vmms[k].pid != pid)
			continue;
		for (j = 0; j < VMS_PER_VMM; j++)
			if (vmms[k].hello.vm_fd[j] == fd)
				return k * VMS_PER_VMM + j;
	}
	return -1;
}

static bool our_pid(int pid)
{
	int k;

	for (k = 0; k < NR_VMMS; k++)
		if (vmms[k].pid == pid)
			return true;
	return false;
}

static void clear_seen(void)
{
	int g;

	for (g = 0; g < NR_VMS; g++) {
		memset(vms[g].seen, 0, sizeof(vms[g].seen));
		vms[g].seen_vm = 0;
	}
}

/* VMs and vCPUs of live VMMs not seen exactly once (VMs only if @vm_too). */
static void count_unseen(bool vm_too, unsigned int *bad_vms,
			 unsigned int *bad_vcpus)
{
	int g, c;

	*bad_vms = *bad_vcpus = 0;
	for (g = 0; g < NR_VMS; g++) {
		if (vmms[vms[g].vmm].dead)
			continue;
		*bad_vms += vm_too && vms[g].seen_vm != 1;
		for (c = 0; c < NR_VCPUS; c++)
			*bad_vcpus += vms[g].seen[c] != 1;
	}
}

/* --------------------------------------------------- checks on the module */

static long mem_available_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void check_list(int dev)
{
	struct kvmstats_vm *l = NULL;
	unsigned int ours = 0, bad = 0;
	int i, n, g;

	n = kvmstats_list_vms(dev, &l);
	clear_seen();
	host_vms = (unsigned int)n;
	host_vcpus = 0;
	for (i = 0; i < n; i++) {
		host_vcpus += l[i].nr_vcpus;
		if (!our_pid(l[i].pid))
			continue;
		ours++;
		g = find_vm(l[i].pid, l[i].fd);
		if (g < 0 || l[i].nr_vcpus != NR_VCPUS)
			bad++;
		else
			vms[g].seen_vm++;
	}
	for (g = 0; g < NR_VMS; g++)
		bad += vms[g].seen_vm != 1;
	tap_diag("LIST_VMS: %d VMs with %u vCPUs on the guest, %u of ours", n,
		 host_vcpus, ours);
	tap_check(
		ours == NR_VMS && !bad,
		"LIST_VMS lists each of the %d VMs exactly once, at its fd, with %d vCPUs",
		NR_VMS, NR_VCPUS);
	free(l);
}

static void check_files(int dev)
{
	static struct stats_blob a, b;
	unsigned int bad_vm = 0, bad_vcpu = 0, bad_io = 0, ran = 0;
	int fds[1 + NR_VCPUS], ours[1 + NR_VCPUS], g, o;
	uint64_t t0 = now_ns();

	for (g = 0; g < NR_VMS; g++) {
		struct vmrec *v = &vms[g];
		pid_t pid = vmms[v->vmm].pid;

		/*
		 * A VM's files open together, as an agent holds them: one
		 * tracker in kvmstats for the VM, not one per file.
		 */
		native_fds(g, fds);
		for (o = 0; o <= NR_VCPUS; o++) {
			ours[o] =
				__kvmstats_get_stats_fd(dev, pid, v->fd, o - 1);
			if (ours[o] < 0)
				tap_diag("GET_STATS_FD(%d, %d, %d): %s", pid,
					 v->fd, o - 1, strerror(-ours[o]));
		}
		for (o = 0; o <= NR_VCPUS; o++) {
			bool same = false;

			if (ours[o] >= 0) {
				stats_read_all(ours[o], &a, "ours");
				stats_read_all(fds[o], &b, "native");
				same = stats_blob_equal(&a, &b, "stats file");
				close(ours[o]);
			}
			close(fds[o]);
			if (!o) {
				bad_vm += !same;
				continue;
			}
			bad_vcpu += !same;
			v->io_exits[o - 1] = stats_value(&b, STAT_IO_EXITS, 0);
			v->exits[o - 1] = stats_value(&b, "exits", 0);
			ran += io_count(g, o - 1) != 0;
			bad_io += v->io_exits[o - 1] != io_count(g, o - 1);
		}
	}
	tap_diag("compared %d VM and %d vCPU files (all of them) in %llu ms",
		 NR_VMS, NR_VMS * NR_VCPUS,
		 (unsigned long long)(now_ns() - t0) / 1000000);
	tap_eq(bad_vm, 0, "all %d VM files byte-identical to native", NR_VMS);
	tap_eq(bad_vcpu, 0, "all %d vCPU files byte-identical to native",
	       NR_VMS * NR_VCPUS);
	tap_eq(bad_io, 0,
	       "every vCPU's " STAT_IO_EXITS
	       " is its guest's (%u ran 1..17 port writes, %u never ran: 0)",
	       ran, NR_VMS * NR_VCPUS - ran);
}

/* ------------------------------------------------------------- the tool */

struct text {
	char *p;
	size_t len, room;
};

static void text_add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->room) {
		size_t room = 2 * (t->len + n + 1) + 65536;
		char *p = realloc(t->p, room);

		if (!p)
			tap_bail("out of memory for the tool's output");
		t->p = p;
		t->room = room;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_read_fd(struct text *t, int fd)
{
	char buf[65536];
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0)
		text_add(t, buf, (size_t)r);
}

/*
 * The first line of TOOL_ERR, or "": what the tool said on stderr, but for
 * the exporter's line saying where it listens.
 */
static const char *tool_stderr(void)
{
	static char line[512];
	FILE *f = fopen(TOOL_ERR, "re");

	line[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strstr(line, ": export: serving http on "))
			break;
		line[0] = '\0';
	}
	if (f)
		fclose(f);
	return line;
}

/* Run the tool with @args; its stdout in @t; the exit status. */
static int run_tool(const char *args, struct text *t)
{
	char cmd[512];
	uint64_t t0 = now_ns();
	FILE *p;
	int st;

	t->len = 0;
	text_add(t, "", 0);
	snprintf(cmd, sizeof(cmd), "exec " TOOL " %s 2>" TOOL_ERR, args);
	p = popen(cmd, "r");
	if (!p)
		tap_bail("popen: %s", strerror(errno));
	text_read_fd(t, fileno(p));
	st = pclose(p);
	tap_diag("kvmstats %s: %zu bytes in %llu ms", args, t->len,
		 (unsigned long long)(now_ns() - t0) / 1000000);
	if (tool_stderr()[0])
		tap_diag("kvmstats %s said: %s", args, tool_stderr());
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The line at *@pos (NUL-terminated in place), or NULL at the end. */
static char *lines_next(char **pos)
{
	char *s = *pos, *nl;

	if (!s || !*s)
		return NULL;
	nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		*pos = nl + 1;
	} else {
		*pos = s + strlen(s);
	}
	return s;
}

static void check_tool_list(struct text *t)
{
	unsigned int rows = 0, bad_vms, bad_vcpus, vcpus;
	char *pos, *line;
	int rc, pid, fd, g;

	rc = run_tool("list", t);
	clear_seen();
	pos = t->p;
	lines_next(&pos); /* the header */
	while ((line = lines_next(&pos))) {
		if (sscanf(line, "%d %d %u", &pid, &fd, &vcpus) != 3)
			continue;
		rows++;
		g = find_vm(pid, fd);
		if (g >= 0 && vcpus == NR_VCPUS)
			vms[g].seen_vm++;
	}
	count_unseen(true, &bad_vms, &bad_vcpus);
	tap_check(rc == 0 && !tool_stderr()[0],
		  "kvmstats list exits 0 (%d) and says nothing on stderr", rc);
	tap_check(
		rows == host_vms && !bad_vms,
		"kvmstats list: %u rows for the guest's %u VMs, each of ours once with %d vCPUs",
		rows, host_vms, NR_VCPUS);
}

static void check_tool_show(struct text *t)
{
	unsigned int bad_vms, bad_vcpus, wrong = 0;
	int rc, g = -1, c = -1, pid, fd, vc;
	unsigned long long v;
	char *pos, *line, name[64];

	rc = run_tool("show --vcpu all -f '^(exits|" STAT_IO_EXITS ")$'", t);
	clear_seen();
	pos = t->p;
	while ((line = lines_next(&pos))) {
		if (sscanf(line, "vCPU %d of VM %d:%d ", &vc, &pid, &fd) == 3) {
			g = find_vm(pid, fd);
			c = vc;
			if (g >= 0 && c >= 0 && c < NR_VCPUS)
				vms[g].seen[c]++;
			else
				g = -1;
			continue;
		}
		if (g < 0 || sscanf(line, " %63s %llu", name, &v) != 2)
			continue;
		if (!strcmp(name, "exits"))
			wrong += v != vms[g].exits[c];
		else if (!strcmp(name, STAT_IO_EXITS))
			wrong += v != vms[g].io_exits[c];
	}
	count_unseen(false, &bad_vms, &bad_vcpus);
	tap_check(
		rc == 0 && !tool_stderr()[0],
		"kvmstats show --vcpu all exits 0 (%d) and says nothing on stderr",
		rc);
	tap_check(
		!bad_vcpus && !wrong,
		"kvmstats show --vcpu all: each of the %d vCPUs once, exits and " STAT_IO_EXITS
		" as native (%u missing or repeated, %u values wrong)",
		NR_VMS * NR_VCPUS, bad_vcpus, wrong);
}

static void check_tool_top(struct text *t)
{
	unsigned int bad_vms, bad_vcpus, wrong = 0, vms_alive = 0, exited = 0;
	int rc, g, pid, fd, c;
	unsigned long long total;
	char *pos, *line, name[64];
	bool head_ok = false;
	double rate;

	rc = run_tool("top --batch -n 1 -d 0.1 --per vcpu -f '^" STAT_IO_EXITS
		      "$'",
		      t);
	clear_seen();
	pos = t->p;
	while ((line = lines_next(&pos))) {
		const char *h = strstr(line, " VMs ");

		if (!strncmp(line, "# kvmstats top ", 15) && h) {
			head_ok = sscanf(h, " VMs %u exited %u", &vms_alive,
					 &exited) == 2 &&
				  !strstr(line, "failed") &&
				  !strstr(line, "left-out");
			continue;
		}
		if (sscanf(line, "%d:%d/%d %63s %llu %lf", &pid, &fd, &c, name,
			   &total, &rate) != 6)
			continue;
		g = find_vm(pid, fd);
		if (g < 0 || c < 0 || c >= NR_VCPUS)
			continue;
		vms[g].seen[c]++;
		wrong += strcmp(name, STAT_IO_EXITS) ||
			 total != vms[g].io_exits[c] || rate != 0;
	}
	count_unseen(false, &bad_vms, &bad_vcpus);
	tap_check(
		rc == 0 && !tool_stderr()[0],
		"kvmstats top --batch exits 0 (%d) and says nothing on stderr",
		rc);
	tap_check(
		head_ok && vms_alive == host_vms && !exited,
		"kvmstats top --batch: its header counts the guest's %u VMs (%u), none exited, none failed or left out",
		host_vms, vms_alive);
	tap_check(
		!bad_vcpus && !wrong,
		"kvmstats top --batch --per vcpu: each of the %d vCPUs once, " STAT_IO_EXITS
		" as native, rate 0 (%u missing or repeated, %u wrong)",
		NR_VMS * NR_VCPUS, bad_vcpus, wrong);
}

struct prom {
	long long vms, vcpus, left[4], errors;
	unsigned int exits_series, wrong;
	unsigned int victim_series, victim_wrong; /* of the dead VMM's VMs */
};

/* An exposition's lines about our VMs and the exporter's self-metrics. */
static void parse_prom(struct text *t, struct prom *p)
{
	static const char *const left[4] = {
		"kvmstats_exporter_left_out{target=\"vm\",reason=\"fd_limit\"} %lld",
		"kvmstats_exporter_left_out{target=\"vcpu\",reason=\"fd_limit\"} %lld",
		"kvmstats_exporter_left_out{target=\"vm\",reason=\"error\"} %lld",
		"kvmstats_exporter_left_out{target=\"vcpu\",reason=\"error\"} %lld",
	};
	unsigned long long v;
	char *pos = t->p, *line;
	int pid, fd, c, g, i;

	memset(p, 0, sizeof(*p));
	p->vms = p->vcpus = p->errors = -1;
	for (i = 0; i < 4; i++)
		p->left[i] = -1;
	clear_seen();
	while ((line = lines_next(&pos))) {
		uint64_t want;
		bool io;

		if (sscanf(line, "kvm_vm_info{pid=\"%d\",fd=\"%d\"", &pid,
			   &fd) == 2) {
			g = find_vm(pid, fd);
			if (g >= 0)
				vms[g].seen_vm++;
			continue;
		}
		io = sscanf(line,
			    "kvm_vcpu_" STAT_IO_EXITS
			    "_total{vm=\"%d:%d\",vcpu=\"%d\"} %llu",
			    &pid, &fd, &c, &v) == 4;
		if (!io &&
		    sscanf(line,
			   "kvm_vcpu_exits_total{vm=\"%d:%d\",vcpu=\"%d\"} %llu",
			   &pid, &fd, &c, &v) == 4) {
			p->exits_series++;
		} else if (!io) {
			if (sscanf(line, "kvmstats_exporter_vms %lld",
				   &p->vms) == 1 ||
			    sscanf(line, "kvmstats_exporter_vcpus %lld",
				   &p->vcpus) == 1 ||
			    sscanf(line,
				   "kvmstats_exporter_read_errors_total %lld",
				   &p->errors) == 1)
				continue;
			for (i = 0; i < 4; i++)
				if (sscanf(line, left[i], &p->left[i]) == 1)
					break;
			continue;
		}
		g = find_vm(pid, fd);
		if (g < 0 || c < 0 || c >= NR_VCPUS)
			continue;
		want = io ? vms[g].io_exits[c] : vms[g].exits[c];
		if (vmms[vms[g].vmm].dead) {
			p->victim_series++;
			p->victim_wrong += v != want;
			continue;
		}
		if (io)
			vms[g].seen[c]++;
		p->wrong += v != want;
	}
}

static bool prom_whole(const struct prom *p, unsigned int nvms,
		       unsigned int nvcpus)
{
	return p->vms == nvms && p->vcpus == nvcpus && !p->left[0] &&
	       !p->left[1] && !p->left[2] && !p->left[3] && !p->errors;
}

static void check_tool_export(struct text *t)
{
	unsigned int bad_vms, bad_vcpus;
	struct prom p;
	int rc;

	/* Every vCPU statistic per vCPU: the check reads io_exits of each. */
	rc = run_tool("export --per vcpu", t);
	parse_prom(t, &p);
	count_unseen(true, &bad_vms, &bad_vcpus);
	tap_check(rc == 0 && !tool_stderr()[0],
		  "kvmstats export exits 0 (%d) and says nothing on stderr",
		  rc);
	tap_check(
		prom_whole(&p, host_vms, host_vcpus),
		"kvmstats export: self-metrics count the guest's %u VMs and %u vCPUs (%lld, %lld), nothing left out, no read error",
		host_vms, host_vcpus, p.vms, p.vcpus);
	tap_check(
		!bad_vms && !bad_vcpus && !p.wrong &&
			p.exits_series == host_vcpus,
		"kvmstats export: kvm_vm_info once per VM, each of the %d vCPUs once, exits and " STAT_IO_EXITS
		" as native (%u VMs and %u vCPUs missing or repeated, %u wrong)",
		NR_VMS * NR_VCPUS, bad_vms, bad_vcpus, p.wrong);
}

/* ------------------------------------------- a VMM dies during a sweep */

static int connect_exporter(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(EXPORT_PORT) };
	int s, i;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Up to 120 s: it starts beside a top over every VM, under TCG. */
	for (i = 0; i < 1200; i++) {
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -1;
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		close(s);
		msleep(100);
	}
	return -1;
}

static const char get_req[] = "GET /metrics HTTP/1.0\r\n\r\n";

/* The body of the response on @s into @t (empty unless 200 OK). */
static void read_scrape(int s, struct text *t)
{
	char *body;

	t->len = 0;
	text_add(t, "", 0);
	text_read_fd(t, s);
	close(s);
	/* An HTTP/1.1 server answers a 1.0 request with its own version. */
	body = strstr(t->p, "\r\n\r\n");
	if (strncmp(t->p, "HTTP/1.", 7) || strncmp(t->p + 8, " 200 ", 5) ||
	    !body) {
		t->len = 0;
		t->p[0] = '\0';
		return;
	}
	body += 4;
	t->len -= (size_t)(body - t->p);
	memmove(t->p, body, t->len + 1);
}

static bool scrape(struct text *t)
{
	int s = connect_exporter();

	if (s < 0 || write(s, get_req, sizeof(get_req) - 1) !=
			     (ssize_t)sizeof(get_req) - 1) {
		if (s >= 0)
			close(s);
		return false;
	}
	read_scrape(s, t);
	return t->len > 0;
}

static pid_t spawn(const char *out, char *const argv[])
{
	pid_t pid;
	int fd;

	pid = tap_fork();
	if (!pid) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		fd = open(TOOL_ERR, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static unsigned int count_str(const char *path, const char *s)
{
	struct text t = { 0 };
	unsigned int n = 0;
	const char *p;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	text_add(&t, "", 0);
	text_read_fd(&t, fd);
	close(fd);
	for (p = t.p; (p = strstr(p, s)); p++)
		n++;
	free(t.p);
	return n;
}

/* Reports `top --batch` has finished in @path (each ends with a blank line). */
static unsigned int top_reports(const char *path)
{
	return count_str(path, "\n\n");
}

/* Wait up to @secs for @path to hold @n finished reports. */
static bool wait_reports(const char *path, unsigned int n, int secs)
{
	int i;

	for (i = 0; i < secs * 10; i++) {
		if (top_reports(path) >= n)
			return true;
		msleep(100);
	}
	return false;
}

/*
 * The last complete report of TOP_OUT (per VM, -f ^exits$): every VM of
 * the dead VMM once, marked exited, its last total, rate 0; every other
 * VM of ours once, unmarked, its total.  Header: @alive and @exited.
 */
static void check_top_after(unsigned int alive, unsigned int exited)
{
	unsigned int bad_vms = 0, wrong = 0, dead_rows = 0, a = 0, x = 0;
	struct text t = { 0 };
	char *pos, *line, *last = NULL, *p, *end;
	int fd = open(TOP_OUT, O_RDONLY | O_CLOEXEC), pid, vfd, g, c, n;
	bool head_ok = false;

	text_add(&t, "", 0);
	if (fd >= 0) {
		text_read_fd(&t, fd);
		close(fd);
	}
	/* A report ends with an empty line; take the last that did. */
	for (p = t.p; (p = strstr(p, "# kvmstats top ")); p++) {
		end = strstr(p, "\n\n");
		if (end)
			last = p;
	}
	if (last)
		last[strstr(last, "\n\n") - last + 1] = '\0';
	clear_seen();
	pos = last;
	while (pos && (line = lines_next(&pos))) {
		unsigned long long total;
		char name[64], mark[16];
		uint64_t sum = 0;
		double rate;
		bool dead;

		if (!strncmp(line, "# kvmstats top ", 15)) {
			p = strstr(line, " VMs ");
			head_ok = p &&
				  sscanf(p, " VMs %u exited %u", &a, &x) == 2;
			continue;
		}
		n = sscanf(line, "%d:%d (%15[a-z]) %63s %llu %lf", &pid, &vfd,
			   mark, name, &total, &rate);
		if (n != 6) {
			mark[0] = '\0';
			n = sscanf(line, "%d:%d %63s %llu %lf", &pid, &vfd,
				   name, &total, &rate);
			if (n != 5)
				continue;
		}
		g = find_vm(pid, vfd);
		if (g < 0)
			continue;
		vms[g].seen_vm++;
		for (c = 0; c < NR_VCPUS; c++)
			sum += vms[g].exits[c];
		dead = vmms[vms[g].vmm].dead;
		dead_rows += dead;
		wrong += strcmp(name, "exits") || total != sum || rate != 0 ||
			 dead != !strcmp(mark, "exited");
	}
	for (g = 0; g < NR_VMS; g++)
		bad_vms += vms[g].seen_vm != 1;
	tap_check(
		head_ok && a == alive && x == exited,
		"kvmstats top, the report after the kill: VMs %u exited %u (header: %u, %u)",
		alive, exited, a, x);
	tap_check(
		last && !bad_vms && !wrong && dead_rows == VMS_PER_VMM,
		"kvmstats top, the report after the kill: the dead VMM's %d VMs marked (exited) with their last totals, the others running, each once (%u missing or repeated, %u wrong)",
		VMS_PER_VMM, bad_vms, wrong);
	free(t.p);
}

static void check_kill_during_sweep(void)
{
	char port[32];
	char *exp_argv[] = { TOOL,
			     "export",
			     "--listen",
			     port,
			     "--test.exit-after-connections",
			     "3",
			     "--per",
			     "vcpu",
			     "--log.level",
			     "warn",
			     "-f",
			     "^(exits|" STAT_IO_EXITS ")$",
			     NULL };
	/* Reports to TOP_OUT until stopped (--batch is one report). */
	char *top_argv[] = { TOOL, "top", "-d",	     "0.5", "--per",
			     "vm", "-f",  "^exits$", NULL };
	unsigned int bad_vms, bad_vcpus, before;
	unsigned int alive_vms = host_vms - VMS_PER_VMM;
	unsigned int alive_vcpus = host_vcpus - VMS_PER_VMM * NR_VCPUS;
	struct text t = { 0 };
	pid_t exporter, top;
	struct prom p;
	int s, st;
	uint64_t t0;

	if (system("ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null")) {
		/* The loopback may already be up; carry on. */
	}
	snprintf(port, sizeof(port), "127.0.0.1:%d", EXPORT_PORT);
	unlink(TOOL_ERR);
	exporter = spawn("/dev/null", exp_argv);
	top = spawn(TOP_OUT, top_argv);

	tap_check(scrape(&t), "export --listen: first scrape");
	parse_prom(&t, &p);
	count_unseen(true, &bad_vms, &bad_vcpus);
	tap_check(
		prom_whole(&p, host_vms, host_vcpus) && !bad_vms &&
			!bad_vcpus && !p.wrong,
		"export --listen, before the kill: all %u VMs and %u vCPUs, each of ours once with its values",
		host_vms, host_vcpus);
	if (!wait_reports(TOP_OUT, 1, 60))
		tap_diag("top printed no report in 60 s");

	/* The next scrape, and the VMM killed while it sweeps. */
	s = connect_exporter();
	if (s < 0 || write(s, get_req, sizeof(get_req) - 1) !=
			     (ssize_t)sizeof(get_req) - 1)
		tap_bail("cannot send the second scrape");
	t0 = now_ns();
	stop_vmm(VICTIM, true);
	before = top_reports(TOP_OUT);
	read_scrape(s, &t);
	parse_prom(&t, &p);
	tap_diag(
		"VMM %d (%d VMs) SIGKILLed as the scrape was asked for; the scrape ended %llu ms later and served %u of the dead VMM's %d vCPUs",
		vmms[VICTIM].pid, VMS_PER_VMM,
		(unsigned long long)(now_ns() - t0) / 1000000,
		p.victim_series / 2, VMS_PER_VMM * NR_VCPUS);
	tap_check(
		t.len && !p.victim_wrong,
		"export --listen, the scrape during the kill: the dead VMM's vCPUs served with their final values or not at all (%u wrong)",
		p.victim_wrong);

	tap_check(scrape(&t), "export --listen: the scrape after the kill");
	parse_prom(&t, &p);
	count_unseen(true, &bad_vms, &bad_vcpus);
	tap_check(
		!p.victim_series && !p.wrong && !bad_vms && !bad_vcpus,
		"export --listen, after the kill: no series of the dead VMM's %d VMs, every other VM and vCPU once with its values (%u series of the dead, %u missing)",
		VMS_PER_VMM, p.victim_series, bad_vcpus);
	tap_check(
		prom_whole(&p, alive_vms, alive_vcpus),
		"export --listen, after the kill: self-metrics count %u VMs and %u vCPUs (%lld, %lld), nothing left out, no read error (%lld)",
		alive_vms, alive_vcpus, p.vms, p.vcpus, p.errors);
	waitpid(exporter, &st, 0);
	tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
		  "export --listen exits 0 after its 3 scrapes");

	/* A report that top began after the kill: two more than then. */
	wait_reports(TOP_OUT, before + 2, 60);
	kill(top, SIGTERM);
	waitpid(top, &st, 0);
	tap_check(WIFEXITED(st) && !WEXITSTATUS(st),
		  "top (reports to a file) ends with status 0 on SIGTERM");
	check_top_after(alive_vms, VMS_PER_VMM);
	tap_check(!tool_stderr()[0],
		  "export --listen and top said nothing on stderr (%s)",
		  tool_stderr());
	free(t.p);
}

/*
 * Every stats file of this program and of the tool runs has closed and
 * every VMM is gone: kvmstats froze each VM it was the last to hold and
 * gives the references back after a grace period, in batches, from its
 * worker.  Wait until kvmstats holds no more VM than at the start; then
 * close the only stats file of one more VM, of this program and alive
 * (the worker drops that reference too), and time how long it waits
 * behind what is still being given back.
 */
static void check_released(int dev, long live0)
{
	uint64_t t0 = now_ns(), t1;
	struct vm *vm;
	long v;
	int fd;

	v = kvmstats_wait_live_vms(live0, 150000);
	t1 = now_ns();
	tap_check(
		v == live0,
		"kvmstats gives back its reference to every VM (live_vms %ld, %ld at the start; %.1f s)",
		v, live0, (t1 - t0) / 1e9);
	vm = vm_create(1, NULL);
	fd = kvmstats_get_stats_fd(dev, 0, vm->fd, -1);
	v = kvmstats_live_vms();
	close(fd);
	t0 = now_ns();
	v = kvmstats_wait_live_vms(live0, 150000);
	tap_diag(
		"a VM whose only stats fd closed then was let go of %.2f s later",
		(now_ns() - t0) / 1e9);
	tap_check(v == live0,
		  "a VM released after the sweep is let go of (live_vms %ld)",
		  v);
	vm_free(vm);
}

int main(void)
{
	struct kvmstats_vm *l = NULL;
	struct text t = { 0 };
	unsigned int left = 0;
	struct rlimit rl;
	long mem0, mem1, live0;
	uint64_t t0 = now_ns(), t1;
	int dev, k, i, n;

	kvm_test_init();
	dev = kvmstats_open();
	live0 = kvmstats_wait_settled(60000);
	getrlimit(RLIMIT_NOFILE, &rl);
	tap_diag(
		"open file limit: soft %llu, hard %llu; following every VM takes %d fds (2 + vCPUs a VM)",
		(unsigned long long)rl.rlim_cur,
		(unsigned long long)rl.rlim_max, NR_VMS * (2 + NR_VCPUS));

	mem0 = mem_available_kb();
	start_vmms();
	mem1 = mem_available_kb();
	t1 = now_ns();
	tap_diag(
		"%d VMMs made %d VMs x %d vCPUs (%d vCPUs ran) in %llu ms; MemAvailable %ld -> %ld MB (%ld KB a vCPU, its VM's share included)",
		NR_VMMS, NR_VMS, NR_VCPUS, NR_VMS / RUN_EVERY * RUN_VCPUS,
		(unsigned long long)(t1 - t0) / 1000000, mem0 / 1024,
		mem1 / 1024, (mem0 - mem1) / (NR_VMS * NR_VCPUS));
	tap_pass("%d child VMMs made %d VMs with %d vCPUs each", NR_VMMS,
		 NR_VMS, NR_VCPUS);

	check_list(dev);
	check_files(dev);

	if (access(TOOL, X_OK)) {
		tap_skip("no " TOOL " in the guest",
			 "the tool covers every VM and vCPU");
	} else {
		check_tool_list(&t);
		check_tool_show(&t);
		check_tool_top(&t);
		check_tool_export(&t);
		check_kill_during_sweep();
	}

	for (k = 0; k < NR_VMMS; k++)
		if (!vmms[k].dead)
			stop_vmm(k, false);
	n = kvmstats_list_vms(dev, &l);
	for (i = 0; i < n; i++)
		left += our_pid(l[i].pid);
	tap_eq(left, 0, "once the VMMs are gone, none of their VMs is listed");
	free(l);
	check_released(dev, live0);
	free(t.p);
	close(dev);
	tap_diag("total %llu ms",
		 (unsigned long long)(now_ns() - t0) / 1000000);
	return tap_exit();
}
