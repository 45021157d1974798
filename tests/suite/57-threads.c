// SPDX-License-Identifier: GPL-2.0-only
/*
 * The kvmstats tool's vCPU threads against real VMs (issue 19):
 *   - the thread `show --json` names for each vCPU is the one that runs
 *     it: vCPU threads that name themselves (their tid and name), a vCPU
 *     moved to another thread between runs, a vCPU never run, a thread
 *     that has exited;
 *   - what the scheduler gave them: a vCPU thread pinned to one CPU next
 *     to a busy competitor pinned to the same CPU waits about as much as
 *     the competitor runs, and runs about the rest of the time, measured
 *     side by side with the threads' own /proc/TID/schedstat, which
 *     brackets the tool's figures exactly; `top -s wait` puts that vCPU
 *     first, with WAIT% and CPU% as measured;
 *   - a reader in another pid namespace: with the host's /proc the tool
 *     says proc-other-ns (the device's thread ids are the namespace's,
 *     /proc's are not) and reads nothing; with the namespace's own /proc
 *     it reads the figures of the namespace's thread id;
 *   - a reader that /proc does not show the thread to (hidepid=invisible,
 *     as nobody): the device still names the thread, its figures are
 *     proc-hidden;
 *   - a real QEMU (-name guest=...,debug-threads=on -uuid ...): its name
 *     and UUID in list --json, kvm_vm_info and show's selection, and the
 *     threads named "CPU n/KVM" are the ones the device reports.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "kvmstats_util.h"
#include "json_check.h"
#include "nested_qemu.h"

#define TOOL	"/usr/bin/kvmstats"
#define OUT_MAX (1 << 20)
#define KICK	SIGUSR2

static char out[OUT_MAX];

/* Run @cmd with /bin/sh; stdout into out[]; the exit status. */
static int run(const char *cmd)
{
	return run_capture(cmd, out, sizeof(out));
}

/* ------------------------------------------------ the tool's JSON */

/* What show --json says of one vCPU's thread. */
struct jthread {
	bool found;
	long tid; /* -1: null */
	char comm[64], state[32];
	double cpu, wait; /* -1: absent */
	long timeslices, last_cpu;
};

/* The text of key @key ("\"tid\": ") in @obj .. @end, or NULL. */
static const char *jkey(const char *obj, const char *end, const char *key)
{
	const char *p = strstr(obj, key);

	return p && p < end ? p + strlen(key) : NULL;
}

/* The thread object of vCPU @vcpu in show --json's @text. */
static struct jthread jthread_of(const char *text, int vcpu)
{
	struct jthread t = { .tid = -1, .cpu = -1, .wait = -1, .last_cpu = -1 };
	const char *p, *q, *end;
	char key[48];

	snprintf(key, sizeof(key), "\"vcpu\": %d, ", vcpu);
	p = strstr(text, key);
	p = p ? strstr(p, "\"thread\": {") : NULL;
	end = p ? strchr(p, '}') : NULL;
	if (!end)
		return t;
	t.found = true;
	if ((q = jkey(p, end, "\"tid\": ")) && strncmp(q, "null", 4))
		t.tid = strtol(q, NULL, 10);
	if ((q = jkey(p, end, "\"comm\": \"")))
		snprintf(t.comm, sizeof(t.comm), "%.*s", (int)strcspn(q, "\""),
			 q);
	if ((q = jkey(p, end, "\"state\": \"")))
		snprintf(t.state, sizeof(t.state), "%.*s",
			 (int)strcspn(q, "\""), q);
	if ((q = jkey(p, end, "\"cpu-seconds\": ")))
		t.cpu = strtod(q, NULL);
	if ((q = jkey(p, end, "\"wait-seconds\": ")))
		t.wait = strtod(q, NULL);
	if ((q = jkey(p, end, "\"timeslices\": ")))
		t.timeslices = strtol(q, NULL, 10);
	if ((q = jkey(p, end, "\"last-cpu\": ")))
		t.last_cpu = strtol(q, NULL, 10);
	return t;
}

/* show PID:FD --vcpu all --json -f '^thread$' into out[]: its status. */
static int show_threads(pid_t pid, int fd)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 TOOL " show %d:%d --vcpu all --json -f '^thread$'", pid, fd);
	return run(cmd);
}

/* ------------------------------------------------ /proc, read here */

/* /proc/@pid/task/@tid/schedstat's cpu and wait ns; false if unreadable. */
static bool schedstat(pid_t pid, pid_t tid, uint64_t *cpu, uint64_t *wait)
{
	char path[96];
	unsigned long long c, w;
	FILE *f;
	bool ok;

	/* Fault 57-schedstat: every read of it fails. */
	if (test_fault("57-schedstat"))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", pid, tid);
	f = fopen(path, "re");
	ok = f && fscanf(f, "%llu %llu", &c, &w) == 2;
	if (f)
		fclose(f);
	if (ok) {
		*cpu = c;
		*wait = w;
	}
	return ok;
}

/* ------------------------------------------------ vCPU threads */

/*
 * A vCPU thread of our own: names itself @name, pins itself to @cpu
 * (-1: anywhere), runs its vCPU until told to stop (GUEST_SPIN) or to
 * its HLT (GUEST_HLT), then waits to be told to end.
 */
struct vthread {
	struct vcpu *vcpu;
	const char *name;
	int cpu;
	pthread_t th;
	volatile pid_t tid;
	volatile int ran, stop, done;
	int go[2];
};

static void on_kick(int sig)
{
	(void)sig;
}

static void *vthread_fn(void *arg)
{
	struct vthread *v = arg;
	char c;

	prctl(PR_SET_NAME, v->name, 0, 0, 0);
	if (v->cpu >= 0)
		pin_self_to(v->cpu);
	v->tid = sys_gettid();
	for (;;) {
		int r;

		__atomic_store_n(&v->ran, 1, __ATOMIC_SEQ_CST);
		if (v->stop)
			break;
		r = __vcpu_run(v->vcpu);
		if (vcpu_exit_is_end(v->vcpu, r) || (r < 0 && r != -EINTR))
			break;
	}
	__atomic_store_n(&v->done, 1, __ATOMIC_SEQ_CST);
	if (read(v->go[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static void vthread_start(struct vthread *v, struct vcpu *vcpu,
			  enum guest_prog prog, const char *name, int cpu)
{
	memset(v, 0, sizeof(*v));
	v->vcpu = vcpu;
	v->name = name;
	v->cpu = cpu;
	if (pipe(v->go))
		tap_bail("pipe: %s", strerror(errno));
	vcpu_load_prog(vcpu, prog, 0);
	vcpu->run->immediate_exit = 0;
	if (pthread_create(&v->th, NULL, vthread_fn, v))
		tap_bail("pthread_create failed");
	while (!__atomic_load_n(&v->ran, __ATOMIC_SEQ_CST))
		msleep(1);
	msleep(50); /* in KVM_RUN by now (a HLT is done, a spin runs) */
}

/* Out of KVM_RUN (a spinning vCPU is kicked out); the thread waits on. */
static void vthread_leave(struct vthread *v)
{
	v->stop = 1;
	__atomic_store_n(&v->vcpu->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&v->done, __ATOMIC_SEQ_CST)) {
		pthread_kill(v->th, KICK);
		msleep(5);
	}
	v->vcpu->run->immediate_exit = 0;
}

static void vthread_end(struct vthread *v)
{
	vthread_leave(v);
	if (write(v->go[1], "x", 1) != 1)
		tap_bail("write: %s", strerror(errno));
	pthread_join(v->th, NULL);
	close(v->go[0]);
	close(v->go[1]);
	thread_wait_released(v->tid);
}

/* ------------------------------------------------ who runs each vCPU */

static void check_names_and_moves(void)
{
	struct vthread a, b, m;
	struct jthread t0, t1;
	struct vm *vm, *idle;
	int rc;

	vm = vm_create(2, NULL);
	idle = vm_create(1, NULL);
	vthread_start(&a, vm->vcpus[0], GUEST_HLT, "vmm-vcpu0", -1);
	vthread_start(&b, vm->vcpus[1], GUEST_SPIN, "vmm-vcpu1", -1);

	rc = show_threads(getpid(), vm->fd);
	t0 = jthread_of(out, 0);
	t1 = jthread_of(out, 1);
	tap_check(rc == 0 && json_valid(out),
		  "show --json -f '^thread$' exits 0 and parses (%d)", rc);
	tap_check(
		t0.tid == a.tid && !strcmp(t0.comm, "vmm-vcpu0") &&
			t0.cpu > 0 && t0.timeslices > 0 && t0.last_cpu >= 0,
		"vCPU 0: the thread that named itself vmm-vcpu0 and ran it to its HLT (tid %ld comm %s, want %d; cpu %.6f s, %ld timeslices, last CPU %ld)",
		t0.tid, t0.comm, a.tid, t0.cpu, t0.timeslices, t0.last_cpu);
	tap_check(
		t1.tid == b.tid && !strcmp(t1.comm, "vmm-vcpu1") && t1.cpu > 0,
		"vCPU 1: its spinning thread vmm-vcpu1, answered while it is in KVM_RUN (tid %ld comm %s, want %d)",
		t1.tid, t1.comm, b.tid);
	rc = show_threads(getpid(), idle->fd);
	t0 = jthread_of(out, 0);
	tap_check(
		rc == 0 && t0.found && t0.tid == -1 &&
			!strcmp(t0.state, "never-run") && t0.cpu < 0,
		"a vCPU never run: tid null, state never-run, no figures (%s)",
		t0.state);

	/* vCPU 0 moves to another thread when that thread runs it. */
	vthread_start(&m, vm->vcpus[0], GUEST_HLT, "vmm-mover", -1);
	rc = show_threads(getpid(), vm->fd);
	t0 = jthread_of(out, 0);
	tap_check(
		rc == 0 && t0.tid == m.tid && m.tid != a.tid &&
			!strcmp(t0.comm, "vmm-mover"),
		"vCPU 0 moved between runs: now the thread vmm-mover that ran it next (tid %ld comm %s, want %d)",
		t0.tid, t0.comm, m.tid);
	rc = run(TOOL " top --batch -n 1 -d 0.5 --per vcpu -f '^exits$'");
	tap_check(rc == 0, "top --batch with moving threads exits 0");
	vthread_end(&m);
	rc = show_threads(getpid(), vm->fd);
	t0 = jthread_of(out, 0);
	tap_check(rc == 0 && t0.tid == -1 && !strcmp(t0.state, "exited"),
		  "its thread exits: tid null, state exited (%s)", t0.state);
	vthread_end(&a);
	vthread_end(&b);
	vm_free(idle);
	vm_free(vm);
}

/* ------------------------------------------------ what it was given */

/* A process spinning on CPU @cpu until killed. */
static pid_t competitor(int cpu)
{
	pid_t p = fork();

	if (p == 0) {
		prctl(PR_SET_NAME, "competitor", 0, 0, 0);
		pin_self_to(cpu);
		for (;;)
			;
	}
	return p;
}

/* The row of @obj in the last report of top --batch's @text. */
static const char *top_row(const char *text, const char *obj, int *rank)
{
	const char *last = text, *p, *q;
	char key[96];

	while ((p = strstr(last + 1, "# kvmstats top ")))
		last = p;
	snprintf(key, sizeof(key), "\n%s ", obj);
	p = strstr(last, key);
	*rank = 0;
	if (!p)
		return NULL;
	/* Rows start after the header line, the report's second. */
	q = strchr(last, '\n');
	for (q = q ? strchr(q + 1, '\n') : NULL; q && q < p;
	     q = strchr(q + 1, '\n'))
		(*rank)++;
	return p + 1;
}

static void check_steal(void)
{
	uint64_t c0[2] = { 0 }, w0[2] = { 0 }, c1[2] = { 0 }, w1[2] = { 0 };
	uint64_t cc0 = 0, cw0 = 0, cc1 = 0, cw1 = 0, t0, t1;
	uint64_t b_c = 0, b_w = 0, a_c = 0, a_w = 0;
	bool bracket, window;
	struct vthread v[2];
	struct jthread j;
	double dt, wait1, cpu1, wait0, comp, tcpu = -1, twait = -1;
	char obj[64];
	const char *row;
	int i, rank, rc;
	struct vm *vm;
	pid_t comp_pid;
	cpu_set_t all;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		tap_skip("the guest has one CPU",
			 "a vCPU waiting for a competitor");
		return;
	}
	sched_getaffinity(0, sizeof(all), &all);
	pin_self_to(0);
	vm = vm_create(2, NULL);
	/* vCPU 0 alone on CPU 0 (with this test, mostly asleep); vCPU 1 on
	 * CPU 1 with a competitor that never sleeps. */
	vthread_start(&v[0], vm->vcpus[0], GUEST_SPIN, "steal-vcpu0", 0);
	vthread_start(&v[1], vm->vcpus[1], GUEST_SPIN, "steal-vcpu1", 1);
	comp_pid = competitor(1);
	msleep(1000); /* settle */

	/* The tool's figures, bracketed by two direct reads. */
	bracket = schedstat(getpid(), v[1].tid, &b_c, &b_w);
	rc = show_threads(getpid(), vm->fd);
	bracket &= schedstat(getpid(), v[1].tid, &a_c, &a_w);
	j = jthread_of(out, 1);
	if (!bracket)
		tap_diag("/proc/%d/task/%d/schedstat unreadable", getpid(),
			 v[1].tid);
	tap_check(
		bracket && rc == 0 && j.tid == v[1].tid &&
			j.cpu * 1e9 >= (double)b_c - 1 &&
			j.cpu * 1e9 <= (double)a_c + 1 &&
			j.wait * 1e9 >= (double)b_w - 1 &&
			j.wait * 1e9 <= (double)a_w + 1 && j.last_cpu == 1,
		"show: vCPU 1's cpu %.9f s and wait %.9f s lie between two reads of /proc/%d/task/%d/schedstat around it (cpu %.9f .. %.9f, wait %.9f .. %.9f), last CPU %ld (pinned to 1)",
		j.cpu, j.wait, getpid(), v[1].tid, b_c / 1e9, a_c / 1e9,
		b_w / 1e9, a_w / 1e9, j.last_cpu);

	/* Rates over a window, side by side. */
	t0 = now_ns();
	window = true;
	for (i = 0; i < 2; i++)
		window &= schedstat(getpid(), v[i].tid, &c0[i], &w0[i]);
	window &= schedstat(comp_pid, comp_pid, &cc0, &cw0);
	snprintf(obj, sizeof(obj), "%d:%d/1", getpid(), vm->fd);
	{
		char cmd[256];

		snprintf(
			cmd, sizeof(cmd),
			TOOL
			" top --batch -n 2 -d 2 --per vcpu -s wait -f '^exits$' %d",
			getpid());
		rc = run(cmd);
	}
	for (i = 0; i < 2; i++)
		window &= schedstat(getpid(), v[i].tid, &c1[i], &w1[i]);
	window &= schedstat(comp_pid, comp_pid, &cc1, &cw1);
	t1 = now_ns();
	if (!window)
		tap_diag(
			"a schedstat of the vCPU threads or the competitor was unreadable");
	dt = (double)(t1 - t0);
	wait1 = (double)(w1[1] - w0[1]) / dt;
	cpu1 = (double)(c1[1] - c0[1]) / dt;
	wait0 = (double)(w1[0] - w0[0]) / dt;
	comp = (double)(cc1 - cc0) / dt;
	tap_diag(
		"over %.1f s: vCPU 1 ran %.3f and waited %.3f of a CPU, the competitor ran %.3f; vCPU 0 ran %.3f and waited %.3f",
		dt / 1e9, cpu1, wait1, comp, (double)(c1[0] - c0[0]) / dt,
		wait0);
	/*
	 * The two share CPU 1 fairly, and vCPU 1 waits at least while the
	 * competitor runs; it may wait longer where the kernel's own threads
	 * take part of CPU 1 (a KASAN kernel's took a sixth).
	 */
	tap_check(
		window && wait1 > 0.2 && comp > 0.2 && wait1 > comp * 0.75 &&
			cpu1 > comp * 0.75 && cpu1 < comp * 1.33,
		"/proc: vCPU 1 shares CPU 1 with its competitor and waits while it runs (vCPU ran %.3f, waited %.3f; competitor ran %.3f of a CPU)",
		cpu1, wait1, comp);
	tap_check(
		window && cpu1 + wait1 > 0.85 && cpu1 + wait1 < 1.05,
		"/proc: vCPU 1, always runnable, runs or waits all the time (%.3f + %.3f)",
		cpu1, wait1);
	/* CPU 0 also runs this test and the tool it starts (slow under
	 * TCG: 0.17 to 0.32 of a CPU seen), so vCPU 0 waits some; it must
	 * still wait less than the vCPU that shares its CPU with a
	 * competitor that never sleeps. */
	tap_check(
		window && wait0 < wait1,
		"/proc: vCPU 0, alone on CPU 0 but for this test and the tool, waits less than vCPU 1 (%.3f < %.3f)",
		wait0, wait1);

	row = top_row(out, obj, &rank);
	if (row)
		sscanf(row, "%*s %*s %*s %*s %lf %lf", &tcpu, &twait);
	tap_check(
		rc == 0 && row && rank == 0,
		"top -s wait --per vcpu: the vCPU that waits comes first (%s row %d)",
		obj, rank);
	/*
	 * top's figures against the kernel's, for the window around it: the
	 * vCPU's own wait and run time from schedstat.  Its wait is at least
	 * the competitor's share; it is more where the kernel's threads and
	 * the tool take part of CPU 1 too (under load, or on a KASAN
	 * kernel: 0.60 waited against 0.39 the competitor ran, seen), so the
	 * competitor bounds it from below only.
	 */
	tap_check(
		window && twait > 100 * comp * 0.75 &&
			twait > 100 * wait1 * 0.75 &&
			twait < 100 * wait1 * 1.33 &&
			tcpu > 100 * cpu1 * 0.75 && tcpu < 100 * cpu1 * 1.33,
		"top: its WAIT%% %.1f about what the vCPU waited (%.1f%%) and at least the competitor's share of the CPU (%.1f%%), its CPU%% %.1f about what it ran (%.1f%%)",
		twait, 100 * wait1, 100 * comp, tcpu, 100 * cpu1);
	if (tap_failures())
		tap_diag("top output:\n%s", out);

	kill(comp_pid, SIGKILL);
	waitpid(comp_pid, NULL, 0);
	vthread_end(&v[0]);
	vthread_end(&v[1]);
	vm_free(vm);
	sched_setaffinity(0, sizeof(all), &all);
}

/* ------------------------------------------------ other views of /proc */

/*
 * In a new pid namespace: a VMM (pid 1 there) whose vCPU thread ran, and
 * the tool asked about it, first with the host's /proc, then with the
 * namespace's own.  Reports "TID STATE1 TID2 CPU2 SSCPU_BEFORE SSCPU_AFTER".
 */
static int pidns_vmm(int wfd)
{
	struct vthread t;
	struct jthread j1, j2;
	uint64_t bc = 0, bw, ac = 0, aw;
	struct vm *vm;

	vm = vm_create(1, NULL);
	vthread_start(&t, vm->vcpus[0], GUEST_HLT, "ns-vcpu0", -1);
	show_threads(1, vm->fd);
	j1 = jthread_of(out, 0);
	if (unshare(CLONE_NEWNS) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV, NULL)) {
		dprintf(wfd, "setup %s\n", strerror(errno));
		return 1;
	}
	schedstat(1, t.tid, &bc, &bw);
	show_threads(1, vm->fd);
	schedstat(1, t.tid, &ac, &aw);
	j2 = jthread_of(out, 0);
	dprintf(wfd, "%d %ld %s %ld %.9f %llu %llu\n", t.tid, j1.tid,
		j1.state[0] ? j1.state : "-", j2.tid, j2.cpu,
		(unsigned long long)bc, (unsigned long long)ac);
	vthread_end(&t);
	vm_free(vm);
	return 0;
}

static void check_other_pidns(void)
{
	int pfd[2], st, tid = -1;
	long t1 = -2, t2 = -2;
	unsigned long long bc = 0, ac = 0;
	char buf[512] = "", state[64] = "";
	double cpu2 = -1;
	pid_t mid;
	ssize_t n;

	if (pipe(pfd))
		tap_bail("pipe: %s", strerror(errno));
	mid = tap_fork();
	if (mid == 0) {
		pid_t vmm;

		close(pfd[0]);
		if (unshare(CLONE_NEWPID)) {
			dprintf(pfd[1], "setup unshare: %s\n", strerror(errno));
			_exit(1);
		}
		vmm = fork();
		if (vmm == 0)
			_exit(pidns_vmm(pfd[1]));
		waitpid(vmm, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 2);
	}
	close(pfd[1]);
	n = read(pfd[0], buf, sizeof(buf) - 1);
	close(pfd[0]);
	waitpid(mid, &st, 0);
	if (n > 0)
		buf[n] = '\0';
	if (!strncmp(buf, "setup ", 6)) {
		tap_fail("a reader in another pid namespace: %s", buf);
		return;
	}
	sscanf(buf, "%d %ld %63s %ld %lf %llu %llu", &tid, &t1, state, &t2,
	       &cpu2, &bc, &ac);
	tap_check(
		tid > 1 && t1 == tid && !strcmp(state, "proc-other-ns"),
		"another pid namespace, the host's /proc: the device names the namespace's thread id %ld (want %d) and the tool reads nothing, proc-other-ns (%s)",
		t1, tid, state);
	tap_check(
		t2 == tid && cpu2 * 1e9 >= (double)bc - 1 &&
			cpu2 * 1e9 <= (double)ac + 1 && cpu2 > 0,
		"another pid namespace with its own /proc: thread %ld's figures, between two reads of its schedstat there (cpu %.9f in %.9f .. %.9f)",
		t2, cpu2, bc / 1e9, ac / 1e9);
}

/*
 * As nobody, in a mount namespace whose /proc is mounted hidepid=invisible
 * and whose /dev/kvmstats is a node nobody may open (the host's stays
 * 0600): show --json of our VM.
 */
static void check_hidepid(void)
{
	struct vthread t;
	struct jthread j;
	struct stat st;
	char cmd[256];
	int pfd[2], status;
	pid_t c;
	ssize_t n;
	struct vm *vm;

	if (stat("/dev/kvmstats", &st)) {
		tap_fail("stat /dev/kvmstats: %s", strerror(errno));
		return;
	}
	vm = vm_create(1, NULL);
	vthread_start(&t, vm->vcpus[0], GUEST_HLT, "hid-vcpu0", -1);
	if (pipe(pfd))
		tap_bail("pipe: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd),
		 TOOL " show %d:%d --vcpu all --json -f '^thread$'", getpid(),
		 vm->fd);
	c = tap_fork();
	if (c == 0) {
		close(pfd[0]);
		dup2(pfd[1], 1);
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", "/tmp", "tmpfs", 0, NULL) ||
		    mknod("/tmp/kvmstats", S_IFCHR | 0666, st.st_rdev) ||
		    chmod("/tmp/kvmstats", 0666) ||
		    mount("/tmp/kvmstats", "/dev/kvmstats", NULL, MS_BIND,
			  NULL) ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV,
			  "hidepid=invisible") ||
		    setgid(65534) || setuid(65534)) {
			printf("setup: %s\n", strerror(errno));
			_exit(1);
		}
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	{
		size_t len = 0;

		while (len + 1 < sizeof(out) &&
		       (n = read(pfd[0], out + len, sizeof(out) - 1 - len)) > 0)
			len += (size_t)n;
		out[len] = '\0';
	}
	close(pfd[0]);
	waitpid(c, &status, 0);
	j = jthread_of(out, 0);
	tap_check(
		WIFEXITED(status) && !WEXITSTATUS(status) && j.tid == t.tid &&
			!strcmp(j.state, "proc-hidden") && j.cpu < 0,
		"as nobody under hidepid=invisible: the device names the thread (%ld, want %d), its figures are proc-hidden, none made up (%s)",
		j.tid, t.tid, j.state);
	if (tap_failures())
		tap_diag("tool said: %s", out);
	vthread_end(&t);
	vm_free(vm);
}

/* ------------------------------------------------ a real QEMU */

/* The tid of QEMU @pid's thread named @comm, or 0. */
static pid_t qemu_thread(pid_t pid, const char *comm)
{
	char path[384], name[64];
	struct dirent *e;
	pid_t found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", pid,
			 e->d_name);
		f = fopen(path, "re");
		if (f && fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			if (!strcmp(name, comm))
				found = atoi(e->d_name);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

static void check_qemu(void)
{
	static const char uuid[] = "0f6c2a7e-5b1d-4c3e-9a8f-21d4e6b7c9a0";
	static const char UUID[] = "0F6C2A7E-5B1D-4C3E-9A8F-21D4E6B7C9A0";
	const char *argv[32] = {
		NESTED_QEMU, "-name",	    "guest=kvmstats-q,debug-threads=on",
		"-uuid",     UUID,	    "-accel",
		"kvm",	     "-cpu",	    "host",
		"-smp",	     "2",	    "-m",
		"32",	     "-nodefaults", "-display",
		"none",	     "-monitor",    "none",
	};
	char want[512], cmd[256];
	pid_t q, cpu[2] = { 0, 0 };
	struct jthread j[2];
	int i, n, rc, fd = -1;
	const char *why;
	char *p;

	for (n = 0; argv[n]; n++)
		;
	why = nested_qemu_boot(argv + n, &i);
	if (why) {
		tap_skip(why, "a real QEMU's name, UUID and vCPU threads");
		return;
	}
	q = fork();
	if (q == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		execv(NESTED_QEMU, (char *const *)argv);
		_exit(127);
	}
	/* Until both vCPU threads have entered KVM_RUN (slow under TCG). */
	for (i = 0; i < 1200; i++) {
		if (!cpu[0])
			cpu[0] = qemu_thread(q, "CPU 0/KVM");
		if (!cpu[1])
			cpu[1] = qemu_thread(q, "CPU 1/KVM");
		if (cpu[0] && cpu[1] && run(TOOL " list --json") == 0 &&
		    (p = strstr(out, "\"name\": \"kvmstats-q\""))) {
			char *f = p;

			while (f > out && strncmp(f, "\"fd\": ", 6))
				f--;
			fd = atoi(f + 6);
			snprintf(cmd, sizeof(cmd),
				 TOOL
				 " show %s --vcpu all --json -f '^thread$'",
				 UUID);
			if (run(cmd) == 0) {
				j[0] = jthread_of(out, 0);
				j[1] = jthread_of(out, 1);
				if (j[0].tid > 0 && j[1].tid > 0)
					break;
			}
		}
		if (waitpid(q, NULL, WNOHANG) == q) {
			q = 0;
			break;
		}
		msleep(100);
	}
	if (!q || i == 1200) {
		tap_fail("QEMU runs its two vCPUs within 120 s (threads %d %d)",
			 cpu[0], cpu[1]);
		if (q) {
			kill(q, SIGKILL);
			waitpid(q, NULL, 0);
		}
		return;
	}
	tap_pass("QEMU (-accel kvm, nested) runs its two vCPUs");
	run(TOOL " list --json");
	snprintf(
		want, sizeof(want),
		"\"pid\": %d, \"fd\": %d, \"vcpus\": 2, \"comm\": \"" NESTED_QEMU_COMM
		"\", \"name\": \"kvmstats-q\", \"uuid\": \"%s\"}",
		q, fd, uuid);
	tap_check(
		strstr(out, want) != NULL,
		"list --json: QEMU's guest= name and its -uuid in lower case (%s)",
		want);
	run(TOOL " export -f '^exits$'");
	snprintf(
		want, sizeof(want),
		"\nkvm_vm_info{name=\"kvmstats-q\",uuid=\"%s\",pid=\"%d\",fd=\"%d\",uid=\"0\",comm=\"" NESTED_QEMU_COMM
		"\",id=\"kvm-",
		uuid, q, fd);
	tap_check(strstr(out, want) != NULL,
		  "export: kvm_vm_info of QEMU's VM has name and uuid");
	for (i = 0; i < 2; i++) {
		char comm[32];

		snprintf(comm, sizeof(comm), "CPU %d/KVM", i);
		tap_check(
			j[i].tid == cpu[i] && !strcmp(j[i].comm, comm) &&
				j[i].cpu > 0,
			"show %s (the UUID, upper case): vCPU %d's thread is QEMU's \"%s\" (tid %ld, want %d; %.6f s on a CPU)",
			UUID, i, comm, j[i].tid, cpu[i], j[i].cpu);
	}
	rc = run(TOOL " show kvmstats-q");
	tap_check(rc == 0 && strstr(out, ", guest kvmstats-q, uuid ") != NULL,
		  "show by guest name: the VM header names guest and uuid");
	kill(q, SIGTERM);
	waitpid(q, NULL, 0);
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_kick };

	kvm_test_init();
	sigaction(KICK, &sa, NULL);
	if (access(TOOL, X_OK)) {
		tap_skip("no " TOOL " in the guest", "the tool's vCPU threads");
		return tap_exit();
	}
	close(kvmstats_open());
	check_names_and_moves();
	check_steal();
	check_other_pidns();
	check_hidepid();
	check_qemu();
	return tap_exit();
}
