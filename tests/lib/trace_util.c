// SPDX-License-Identifier: GPL-2.0-only
/*
 * A kprobe event with a stack trace trigger on kvm_arch_destroy_vm(); see
 * trace_util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>

#include "kvm_util.h"
#include "trace_util.h"

static int write_file(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | flags);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static char tracing[64];
static char group[32];
/* /proc/sys/debug/kprobes-optimization before setup, or -1. */
static int optimization = -1;

#define KPROBES_OPTIMIZATION "/proc/sys/debug/kprobes-optimization"

/*
 * An optimized kprobe (a jump to a trampoline) unwinds no further than
 * the trampoline on some kernels: on the debug kernel of make check-debug
 * the stack ended there, 5 frames, with none of the callers a test looks
 * for.  Breakpoint kprobes unwind from the trap's registers.  Off while
 * the probes exist; destroy_trace_teardown() puts the old value back.
 */
static void optimization_off(void)
{
	char buf[8] = "";
	int fd = open(KPROBES_OPTIMIZATION, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (read(fd, buf, sizeof(buf) - 1) > 0)
		optimization = atoi(buf);
	close(fd);
	write_file(KPROBES_OPTIMIZATION, "0", 0);
}

static void tracing_path(char *buf, size_t len, const char *fmt,
			 const char *arg)
{
	char name[128];

	snprintf(name, sizeof(name), fmt, arg);
	snprintf(buf, len, "%s/%s", tracing, name);
}

/* Add the kprobe event @grp/@name on @func, replacing a stale one. */
static int add_event(const char *name, const char *func)
{
	char path[192], def[128];

	tracing_path(path, sizeof(path), "%s", "kprobe_events");
	snprintf(def, sizeof(def), "-:%s/%s\n", group, name);
	write_file(path, def, O_APPEND);
	snprintf(def, sizeof(def), "p:%s/%s %s\n", group, name, func);
	return write_file(path, def, O_APPEND);
}

static int enable_event(const char *name, const char *what)
{
	char path[192], rel[96];

	snprintf(rel, sizeof(rel), "events/%s/%s/%s", group, name, what);
	tracing_path(path, sizeof(path), "%s", rel);
	return write_file(path, what[0] == 't' ? "stacktrace" : "1", 0);
}

int destroy_trace_setup(const char *grp)
{
	static const char *const dirs[] = { "/sys/kernel/tracing",
					    "/sys/kernel/debug/tracing" };
	char path[192];
	unsigned int i;
	int r;

	snprintf(group, sizeof(group), "%s", grp);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/kprobe_events", dirs[i]);
		if (!access(path, W_OK))
			break;
	}
	if (i == 2) {
		/* debugfs=off: tracefs has a mount point of its own. */
		if (mount("nodev", dirs[0], "tracefs", 0, NULL))
			return -errno;
		i = 0;
	}
	snprintf(tracing, sizeof(tracing), "%s", dirs[i]);
	optimization_off();
	r = add_event("destroy", "kvm_arch_destroy_vm");
	if (!r)
		r = add_event("borrow", "kthread_use_mm");
	if (!r)
		r = enable_event("destroy", "trigger");
	if (!r)
		r = enable_event("destroy", "enable");
	if (!r)
		r = enable_event("borrow", "enable");
	return r;
}

void destroy_trace_teardown(void)
{
	char path[192], def[64];
	static const char *const names[] = { "destroy", "borrow" };
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(def, sizeof(def), "events/%s/%s/enable", group,
			 names[i]);
		tracing_path(path, sizeof(path), "%s", def);
		write_file(path, "0", 0);
	}
	tracing_path(path, sizeof(path), "events/%s/destroy/trigger", group);
	write_file(path, "!stacktrace", 0);
	for (i = 0; i < 2; i++) {
		tracing_path(path, sizeof(path), "%s", "kprobe_events");
		snprintf(def, sizeof(def), "-:%s/%s\n", group, names[i]);
		write_file(path, def, O_APPEND);
	}
	if (optimization >= 0) {
		snprintf(def, sizeof(def), "%d", optimization);
		write_file(KPROBES_OPTIMIZATION, def, 0);
	}
}

void destroy_trace_clear(void)
{
	char path[192];

	tracing_path(path, sizeof(path), "%s", "trace");
	write_file(path, "", O_TRUNC);
}

static void task_comm(pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		buf[strcspn(buf, "\n")] = 0;
	}
}

/*
 * "comm-TID [CPU] ...": the task and CPU of a trace line, in place;
 * false if the line has none.
 */
static bool line_task(char *line, char **comm, pid_t *tid, int *cpu)
{
	char *bracket = strstr(line, " ["), *dash, *task = line;

	if (!bracket)
		return false;
	*cpu = atoi(bracket + 2);
	*bracket = 0;
	while (*task == ' ')
		task++;
	dash = strrchr(task, '-');
	if (!dash)
		return false;
	*dash = 0;
	*tid = atoi(dash + 1);
	*comm = task;
	return true;
}

/*
 * The trace: an event line
 *   "           comm-TID     [CPU] ....  TIME: destroy: (...)"
 * then, from the trigger, a line "comm-TID [CPU] ... <stack trace>" and one
 * " => func" per frame.  The stack goes to the last destroy of the same
 * task on the same CPU that has none yet: with several CPUs destroying at
 * once, the lines of their events and stacks may interleave.
 */
static int trace_scan(struct destroy *d, int max, int *borrows)
{
	char path[192], line[512];
	struct destroy *cur = NULL;
	int n = 0, cpu, i;
	char *comm;
	pid_t tid;
	FILE *f;

	*borrows = 0;
	tracing_path(path, sizeof(path), "%s", "trace");
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *fn;

		if (line[0] == '#')
			continue;
		fn = strstr(line, " => ");
		if (fn && line[0] == ' ' && fn == line) {
			if (cur && cur->depth < TRACE_STACK_MAX) {
				fn += 4;
				fn[strcspn(fn, "\n")] = 0;
				snprintf(cur->stack[cur->depth++],
					 sizeof(cur->stack[0]), "%.63s", fn);
			}
			continue;
		}
		if (strstr(line, " borrow:")) {
			(*borrows)++;
			continue;
		}
		if (strstr(line, "<stack trace>")) {
			cur = NULL;
			if (!line_task(line, &comm, &tid, &cpu))
				continue;
			for (i = (n < max ? n : max) - 1; i >= 0; i--) {
				if (d[i].tid == tid && d[i].cpu == cpu &&
				    !d[i].depth) {
					cur = &d[i];
					break;
				}
			}
			continue;
		}
		if (!strstr(line, " destroy:"))
			continue;
		cur = NULL;
		if (!line_task(line, &comm, &tid, &cpu))
			continue;
		if (n++ >= max)
			continue;
		memset(&d[n - 1], 0, sizeof(d[0]));
		d[n - 1].tid = tid;
		d[n - 1].cpu = cpu;
		snprintf(d[n - 1].comm, sizeof(d[0].comm), "%.31s", comm);
		/* "<...>": the tracer has no name saved for it; a kworker lives on. */
		if (!strcmp(d[n - 1].comm, "<...>"))
			task_comm(tid, d[n - 1].comm, sizeof(d[0].comm));
	}
	fclose(f);
	return n;
}

int destroy_trace_read(struct destroy *d, int max)
{
	int borrows;

	return trace_scan(d, max, &borrows);
}

int destroy_trace_borrows(void)
{
	struct destroy d[1];
	int borrows, r = trace_scan(d, 0, &borrows);

	return r < 0 ? r : borrows;
}

int destroy_trace_wait(struct destroy *d, int max, int want,
		       unsigned int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int n;

	for (;;) {
		n = destroy_trace_read(d, max);
		/* The stack follows its event line: give it a moment. */
		if (n >= want && (want > max || d[want - 1].depth))
			return n;
		if (now_ns() > deadline)
			return n;
		msleep(20);
	}
}

/* The index of @func on @d's stack, innermost first, or -1. */
static int stack_index(const struct destroy *d, const char *func)
{
	size_t len = strlen(func);
	int i;

	for (i = 0; i < d->depth; i++)
		if (!strncmp(d->stack[i], func, len) &&
		    (d->stack[i][len] == 0 || d->stack[i][len] == '+' ||
		     d->stack[i][len] == ' ' || d->stack[i][len] == '.'))
			return i;
	return -1;
}

bool destroy_on_stack(const struct destroy *d, const char *func)
{
	return stack_index(d, func) >= 0;
}

bool destroy_stack_whole(const struct destroy *d)
{
	int i = stack_index(d, "kvm_arch_destroy_vm");

	return i >= 0 && d->depth >= i + 3;
}

bool destroy_in_foreign_task_work(const struct destroy *d)
{
	return destroy_on_stack(d, "task_work_run") &&
	       !destroy_on_stack(d, "__fput");
}

void destroy_diag(const struct destroy *d, const char *what)
{
	int i;

	tap_diag("%s: kvm_arch_destroy_vm ran in %s-%d, %d frames:", what,
		 d->comm, d->tid, d->depth);
	for (i = 0; i < d->depth && i < 16; i++)
		tap_diag("   => %s", d->stack[i]);
}
