// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats top: totals and rates per second, per VM or per vCPU, live
 * (plain ANSI escapes, no curses: the guest binary is static) or in batch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

enum sort_key { SORT_RATE, SORT_TOTAL, SORT_NAME, SORT_WAIT, SORT_CPU, NSORT };

struct row {
	char obj[48];
	const char *name;
	int pid, fd, vcpu; /* vcpu -1: the VM (or the sum of its vCPUs) */
	uint64_t total;
	double rate;
	/*
	 * What the scheduler gave the object's vCPU thread (a VM's: all its
	 * vCPUs' threads) over the interval, in CPUs: 1 is one CPU all the
	 * time.  < 0: not known.  The same on every row of the object.
	 */
	double cpu, wait;
	bool exited;
};

struct top {
	struct host host;
	const char *sel;
	bool per_vcpu;
	enum sort_key sort;
	regex_t re;
	regex_t *filter;
	char filter_text[1024];
	double interval;
	struct row *rows;
	size_t nrows, room;
	char msg[160]; /* shown instead of the key help until the next key */
	struct row **order; /* the rows sorted (pointers: cheap to move) */
	size_t order_room;
	FILE *csv;
};

static volatile sig_atomic_t stop_sig, resized;
static struct termios saved_tio;
static bool tty_raw;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static void tty_restore(void)
{
	if (!tty_raw)
		return;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	tty_raw = false;
}

static void tty_setup(void)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &saved_tio))
		return;
	t = saved_tio;
	t.c_lflag &= ~(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t))
		return;
	tty_raw = true;
	atexit(tty_restore);
	fputs("\033[?1049h\033[?25l", stdout);
}

static bool vm_selected(const struct top *t, const struct vmrec *v)
{
	return identity_selects(t->sel, v->pid, v->fd, &v->id);
}

static struct row *new_row(struct top *t)
{
	if (t->nrows == t->room) {
		size_t room = t->room ? 2 * t->room : 256;
		struct row *r = realloc(t->rows, room * sizeof(*r));

		if (!r)
			return NULL;
		t->rows = r;
		t->room = room;
	}
	memset(&t->rows[t->nrows], 0, sizeof(t->rows[0]));
	return &t->rows[t->nrows++];
}

/*
 * The rate of @s over the last two good samples of @o (0 without two, or
 * when the VM has exited).
 */
static double rate_of(const struct kvmstats_stat *s, const struct objrec *o,
		      bool alive)
{
	double dt = o->t_cur - o->t_prev;

	if (!alive || !o->fresh || !o->t_prev || dt <= 0)
		return 0;
	return ((double)kvmstats_value(s, o->cur, 0) -
		(double)kvmstats_value(s, o->prev, 0)) /
	       dt;
}

/*
 * The CPU and wait rates of the thread of vCPU @c of @v over the last two
 * good samples, in CPUs (seconds per second); false without two.
 */
static bool thread_rates(const struct vmrec *v, unsigned int c, double *cpu,
			 double *wait)
{
	const struct thrrec *r = c < v->nthr ? &v->thr[c] : NULL;
	double dt;

	if (!r || v->state != VM_OPEN || !r->fresh || !r->t_prev)
		return false;
	dt = r->t_cur - r->t_prev;
	if (dt <= 0)
		return false;
	*cpu = (double)(r->cpu_ns - r->prev_cpu_ns) / 1e9 / dt;
	*wait = (double)(r->wait_ns - r->prev_wait_ns) / 1e9 / dt;
	return true;
}

/* The rates of vCPU @vcpu's thread, or of all of @v's (@vcpu -1). */
static void row_threads(const struct vmrec *v, int vcpu, double *cpu,
			double *wait)
{
	unsigned int c;
	double a, b;

	*cpu = *wait = -1;
	if (vcpu >= 0) {
		if (thread_rates(v, (unsigned int)vcpu, &a, &b))
			*cpu = a, *wait = b;
		return;
	}
	if (!v->nr_vcpus)
		return;
	*cpu = *wait = 0;
	for (c = 0; c < v->nr_vcpus; c++) {
		if (!thread_rates(v, c, &a, &b)) {
			*cpu = *wait =
				-1; /* a sum without one is not the VM's */
			return;
		}
		*cpu += a;
		*wait += b;
	}
}

/* Rows for the scalar stats of object @o (the VM, or vCPU @vcpu) of @v. */
static void add_rows(struct top *t, const struct vmrec *v, int vcpu,
		     const struct objrec *o)
{
	double cpu, wait;

	unsigned int i, nr = kvmstats_file_num_stats(o->file);
	bool alive = v->state == VM_OPEN;
	char obj[sizeof(t->rows[0].obj)];

	if (vcpu >= 0)
		snprintf(obj, sizeof(obj), "%d:%d/%d", v->pid, v->fd, vcpu);
	else
		snprintf(obj, sizeof(obj), "%d:%d", v->pid, v->fd);
	row_threads(v, vcpu, &cpu, &wait);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);
		struct row *r;

		if (kvmstats_is_hist(s) || !name_matches(t->filter, s->name))
			continue;
		r = new_row(t);
		if (!r)
			return;
		memcpy(r->obj, obj, sizeof(obj));
		r->name = s->name;
		r->pid = v->pid;
		r->fd = v->fd;
		r->vcpu = vcpu;
		r->exited = !alive;
		r->total = kvmstats_value(s, o->cur, 0);
		r->rate = rate_of(s, o, alive);
		r->cpu = cpu;
		r->wait = wait;
	}
}

/*
 * Per-VM view: the VM's vCPU stats summed over its vCPUs (the rate is the
 * sum of the vCPUs' rates, each over its own interval), only when every
 * vCPU was read this time: a sum without one is not the VM's.
 */
static void add_vcpu_sums(struct top *t, const struct vmrec *v)
{
	const struct kvmstats_file *f0 = v->vcpu[0].file;
	unsigned int i, c, nr = kvmstats_file_num_stats(f0);
	bool alive = v->state == VM_OPEN;
	char obj[sizeof(t->rows[0].obj)];
	double cpu, wait;

	for (c = 0; alive && c < v->nv; c++)
		if (!v->vcpu[c].fresh)
			return;
	row_threads(v, -1, &cpu, &wait);
	if (alive && v->nv < v->nr_vcpus)
		return;
	snprintf(obj, sizeof(obj), "%d:%d", v->pid, v->fd);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f0, i);
		uint64_t total = 0;
		double rate = 0;
		struct row *r;

		if (kvmstats_is_hist(s) || !name_matches(t->filter, s->name))
			continue;
		for (c = 0; c < v->nv; c++) {
			const struct kvmstats_stat *sc =
				kvmstats_file_stat(v->vcpu[c].file, i);

			if (!sc || strcmp(sc->name, s->name))
				continue; /* a vCPU with another table: leave it out */
			total += kvmstats_value(sc, v->vcpu[c].cur, 0);
			rate += rate_of(sc, &v->vcpu[c], alive);
		}
		r = new_row(t);
		if (!r)
			return;
		memcpy(r->obj, obj, sizeof(obj));
		r->name = s->name;
		r->pid = v->pid;
		r->fd = v->fd;
		r->vcpu = -1;
		r->exited = !alive;
		r->total = total;
		r->rate = rate;
		r->cpu = cpu;
		r->wait = wait;
	}
}

static enum sort_key sort_by;

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int c;

	if (sort_by == SORT_RATE && x->rate != y->rate)
		return x->rate < y->rate ? 1 : -1;
	if (sort_by == SORT_TOTAL && x->total != y->total)
		return x->total < y->total ? 1 : -1;
	/* Highest first; not known (< 0) after every known one. */
	if (sort_by == SORT_WAIT && x->wait != y->wait)
		return x->wait < y->wait ? 1 : -1;
	if (sort_by == SORT_CPU && x->cpu != y->cpu)
		return x->cpu < y->cpu ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->fd != y->fd)
		return x->fd < y->fd ? -1 : 1;
	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	c = strcmp(x->name, y->name);
	return c;
}

static int row_ptr_cmp(const void *a, const void *b)
{
	return row_cmp(*(const struct row *const *)a,
		       *(const struct row *const *)b);
}

static void build_rows(struct top *t)
{
	size_t i;
	unsigned int c;

	t->nrows = 0;
	for (i = 0; i < t->host.nvms; i++) {
		const struct vmrec *v = &t->host.vms[i];
		bool alive = v->state == VM_OPEN;

		/* Exited VMs keep their last values; left out ones are counted. */
		if (!vm_selected(t, v) || (!alive && v->state != VM_EXITED))
			continue;
		if (v->vm.file && v->vm.t_cur && (v->vm.fresh || !alive))
			add_rows(t, v, -1, &v->vm);
		if (!v->nv)
			continue;
		if (!t->per_vcpu) {
			add_vcpu_sums(t, v);
			continue;
		}
		for (c = 0; c < v->nv; c++)
			if (v->vcpu[c].t_cur && (v->vcpu[c].fresh || !alive))
				add_rows(t, v, (int)c, &v->vcpu[c]);
	}
	if (t->nrows > t->order_room) {
		struct row **o = realloc(t->order, t->nrows * sizeof(*o));

		if (!o) {
			t->nrows = 0;
			return;
		}
		t->order = o;
		t->order_room = t->nrows;
	}
	for (i = 0; i < t->nrows; i++)
		t->order[i] = &t->rows[i];
	sort_by = t->sort;
	if (t->nrows)
		qsort(t->order, t->nrows, sizeof(*t->order), row_ptr_cmp);
}

static const char *const sort_names[NSORT] = { "rate", "total", "name", "wait",
					       "cpu" };

static const char *sort_name(enum sort_key k)
{
	return sort_names[k];
}

static void count_vms(const struct top *t, size_t *alive, size_t *exited)
{
	size_t i;

	*alive = *exited = 0;
	for (i = 0; i < t->host.nvms; i++) {
		if (!vm_selected(t, &t->host.vms[i]))
			continue;
		if (t->host.vms[i].state == VM_OPEN)
			(*alive)++;
		else if (t->host.vms[i].state == VM_EXITED)
			(*exited)++;
	}
}

/* @s (@n bytes) left-aligned in a field of @w at @p; returns the end. */
static char *put_left(char *p, const char *s, size_t n, size_t w)
{
	memcpy(p, s, n);
	p += n;
	while (n++ < w)
		*p++ = ' ';
	return p;
}

/* @s (@n bytes) right-aligned in a field of @w at @p; returns the end. */
static char *put_right(char *p, const char *s, size_t n, size_t w)
{
	while (w-- > n)
		*p++ = ' ';
	memcpy(p, s, n);
	return p + n;
}

/* " %6.1f" of @cpus as a percentage of one CPU, or "      -". */
static char *put_percent(char *p, double cpus)
{
	char num[32];
	int k;

	*p++ = ' ';
	if (cpus < 0)
		return put_right(p, "-", 1, 6);
	k = snprintf(num, sizeof(num), "%.1f", 100 * cpus);
	return put_right(p, num, k > 0 && k < 16 ? (size_t)k : 0, 6);
}

/*
 * One row as "%-22s %-32s %20llu %14.1f %6.1f %6.1f\n" would print it
 * (object with " (exited)"; CPU% and WAIT% "-" when not known), without
 * printf for the usual values: a total is an integer, a rate mostly 0 or
 * whole; other rates go through snprintf.
 */
static void print_row(FILE *out, const struct row *r, size_t cols)
{
	char line[512], num[64], *p = line, *d;
	size_t n = strlen(r->obj), nl = strlen(r->name);
	uint64_t v = r->total;

	if (nl > 256)
		nl = 256;
	memcpy(num, r->obj, n);
	if (r->exited) {
		memcpy(num + n, " (exited)", 9);
		n += 9;
	}
	p = put_left(p, num, n, 22);
	*p++ = ' ';
	p = put_left(p, r->name, nl, 32);
	*p++ = ' ';
	d = num + sizeof(num);
	do {
		*--d = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	p = put_right(p, d, (size_t)(num + sizeof(num) - d), 20);
	*p++ = ' ';
	if (r->rate == 0 && !signbit(r->rate)) {
		n = 3;
		memcpy(num, "0.0", 3);
	} else if (r->rate > 0 && r->rate < 9007199254740992.0 &&
		   r->rate == (double)(uint64_t)r->rate) {
		v = (uint64_t)r->rate;
		d = num + sizeof(num) - 2;
		memcpy(d, ".0", 2);
		do {
			*--d = (char)('0' + v % 10);
			v /= 10;
		} while (v);
		n = (size_t)(num + sizeof(num) - d);
		memmove(num, d, n);
	} else {
		int k = snprintf(num, sizeof(num), "%.1f", r->rate);

		n = k < 0		     ? 0 :
		    (size_t)k >= sizeof(num) ? sizeof(num) - 1 :
					       (size_t)k;
	}
	p = put_right(p, num, n, 14);
	p = put_percent(p, r->cpu);
	p = put_percent(p, r->wait);
	if ((size_t)(p - line) > cols)
		p = line + cols; /* the full screen: no line may wrap */
	*p++ = '\n';
	fwrite(line, 1, (size_t)(p - line), out);
}

/*
 * What the last sample did not serve, as " failed 1/2 left-out 3/12"
 * (VMs/vCPUs): into @buf, or printed when @buf is NULL.  Nothing when all
 * was served.
 */
static void not_served(const struct top *t, char *buf, size_t len)
{
	const struct host_counts *n = &t->host.n;
	char out[128];
	int k = 0;

	out[0] = '\0';
	if (n->failed_vms || n->failed_vcpus)
		k += snprintf(out + k, sizeof(out) - (size_t)k, " failed %u/%u",
			      n->failed_vms, n->failed_vcpus);
	if (n->left_vms || n->left_vcpus)
		snprintf(out + k, sizeof(out) - (size_t)k, " left-out %u/%u",
			 n->left_vms, n->left_vcpus);
	if (buf)
		snprintf(buf, len, "%s", out);
	else
		fputs(out, stdout);
}

static void print_batch(struct top *t)
{
	size_t i, alive, exited;
	char when[32];
	time_t now = time(NULL);

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	count_vms(t, &alive, &exited);
	printf("# kvmstats top %s interval %.3fs VMs %zu exited %zu view %s sort %s",
	       when, t->interval, alive, exited, t->per_vcpu ? "vcpu" : "vm",
	       sort_name(t->sort));
	not_served(t, NULL, 0);
	putchar('\n');
	printf("%-22s %-32s %20s %14s %6s %6s\n", "OBJECT", "STAT", "TOTAL",
	       "RATE/s", "CPU%", "WAIT%");
	for (i = 0; i < t->nrows; i++)
		print_row(stdout, t->order[i], SIZE_MAX);
	putchar('\n');
	fflush(stdout);
}

/* printf() at most @cols columns (ASCII) of a line, then a newline. */
static void put_line(size_t cols, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put_line(size_t cols, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	fwrite(line, 1, (size_t)n < cols ? (size_t)n : cols, stdout);
	putchar('\n');
}

/*
 * The full screen: title, header, as many rows as fit and the key help
 * (or @prompt, or t->msg) on the last line.  No line is longer than the
 * terminal is wide, so none wraps and nothing scrolls.
 */
static void draw(struct top *t, const char *prompt)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	size_t i, alive, exited, lines, cols, title, flen;
	char when[32], head[1200], ns[128];
	time_t now = time(NULL);

	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (ws.ws_row < 6)
		ws.ws_row = 6;
	if (ws.ws_col < 20)
		ws.ws_col = 20;
	cols = ws.ws_col;
	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	count_vms(t, &alive, &exited);
	not_served(t, ns, sizeof(ns));
	fputs("\033[H\033[2J", stdout);
	/*
	 * The title, and the filter after it when it fits; else the filter
	 * gets a line of its own, cut only if it is wider than the screen.
	 */
	snprintf(
		head, sizeof(head),
		"kvmstats top  %s  every %.1fs  VMs: %zu running, %zu exited%s  view: %s  sort: %s",
		when, t->interval, alive, exited, ns,
		t->per_vcpu ? "per vCPU" : "per VM", sort_name(t->sort));
	title = strlen(head);
	flen = strlen(t->filter ? t->filter_text : "-");
	if (title + 10 + flen <= cols) {
		put_line(cols, "%s  filter: %s", head,
			 t->filter ? t->filter_text : "-");
		title = 1;
	} else {
		put_line(cols, "%s", head);
		if (10 + flen <= cols)
			put_line(cols, "filter: %s",
				 t->filter ? t->filter_text : "-");
		else
			put_line(cols, "filter: %.*s...", (int)(cols - 13),
				 t->filter_text);
		title = 2;
	}
	snprintf(head, sizeof(head), "%-22s %-32s %20s %14s %6s %6s", "OBJECT",
		 "STAT", "TOTAL", "RATE/s", "CPU%", "WAIT%");
	fputs("\033[7m", stdout);
	fwrite(head, 1, strlen(head) < cols ? strlen(head) : cols, stdout);
	fputs("\033[0m\n", stdout);
	lines = (size_t)ws.ws_row - 2 - title;
	for (i = 0; i < t->nrows && i < lines; i++)
		print_row(stdout, t->order[i], cols);
	printf("\033[%d;1H", ws.ws_row);
	if (prompt) {
		size_t pl = strlen(prompt), room = cols > 42 ? cols - 42 : 1;

		/* A long pattern shows its end, where the typing is. */
		snprintf(head, sizeof(head),
			 "filter (extended regex, empty: none): %s%s",
			 pl > room ? "..." : "",
			 pl > room ? prompt + pl - room + 3 : prompt);
	} else if (t->msg[0]) {
		snprintf(head, sizeof(head), "%s", t->msg);
	} else {
		snprintf(
			head, sizeof(head),
			"q quit  s sort  v per-VM/per-vCPU  f filter  +/- interval");
	}
	/* The last line without a newline: a newline there would scroll. */
	fwrite(head, 1, strlen(head) < cols - 1 ? strlen(head) : cols - 1,
	       stdout);
	fflush(stdout);
}

static void write_csv(struct top *t)
{
	struct timespec ts;
	size_t i;

	if (!t->csv)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	for (i = 0; i < t->nrows; i++) {
		const struct row *r = t->order[i];

		fprintf(t->csv, "%lld.%03ld,%d,%d,", (long long)ts.tv_sec,
			ts.tv_nsec / 1000000, r->pid, r->fd);
		if (r->vcpu >= 0)
			fprintf(t->csv, "%d", r->vcpu);
		fprintf(t->csv, ",%s,%llu,%.3f,%s,", r->name,
			(unsigned long long)r->total, r->rate,
			r->exited ? "exited" : "running");
		if (r->cpu >= 0)
			fprintf(t->csv, "%.4f,%.4f", r->cpu, r->wait);
		else
			fputc(',', t->csv);
		fputc('\n', t->csv);
	}
	fflush(t->csv);
}

/* Read a filter line in raw mode; false on ESC. */
static bool read_filter(struct top *t, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (;;) {
		char c;

		ssize_t r;

		draw(t, buf);
		r = read(STDIN_FILENO, &c, 1);
		if (r < 0 && errno == EINTR && !stop_sig) {
			resized = 0; /* a new size: the loop redraws */
			continue;
		}
		if (r != 1 || stop_sig)
			return false;
		if (c == '\r' || c == '\n')
			return true;
		if (c == 27)
			return false;
		if ((c == 127 || c == 8) && n > 0)
			buf[--n] = '\0';
		else if (c >= 32 && c < 127 && n + 1 < len) {
			buf[n++] = c;
			buf[n] = '\0';
		}
	}
}

/* A new filter; a bad pattern keeps the old one and says why. */
static void set_filter(struct top *t, const char *text)
{
	regex_t re;
	int err = 0;

	if (text[0]) {
		err = regcomp(&re, text, REG_EXTENDED | REG_NOSUB);
		if (err) {
			char why[96];

			regerror(err, &re, why, sizeof(why));
			snprintf(t->msg, sizeof(t->msg),
				 "bad regex '%.40s%s': %s", text,
				 strlen(text) > 40 ? "..." : "", why);
			return;
		}
	}
	if (t->filter)
		regfree(&t->re);
	t->filter = NULL;
	t->filter_text[0] = '\0';
	if (!text[0])
		return;
	t->re = re;
	t->filter = &t->re;
	snprintf(t->filter_text, sizeof(t->filter_text), "%s", text);
}

/* Handle one key; returns false to quit. */
static bool key(struct top *t, char c)
{
	char line[sizeof(t->filter_text)];

	t->msg[0] = '\0';
	switch (c) {
	case 'q':
	case 'Q':
		return false;
	case 's':
		t->sort = (t->sort + 1) % NSORT;
		break;
	case 'v':
		t->per_vcpu = !t->per_vcpu;
		break;
	case 'f':
		if (read_filter(t, line, sizeof(line)))
			set_filter(t, line);
		break;
	case '+':
		if (t->interval < 60)
			t->interval *= 2;
		break;
	case '-':
		if (t->interval > 0.2)
			t->interval /= 2;
		break;
	}
	return true;
}

static void usage_top(FILE *f)
{
	fputs("Usage: kvmstats top [VM] [-d SECONDS] [--per vm|vcpu] [-s KEY]\n"
	      "                    [-f REGEX] [--batch [-n N]] [--csv FILE]\n"
	      "Live totals and rates per second of the scalar statistics of every VM\n"
	      "(or of VM: PID, PID:FD, QEMU guest name or UUID).  New VMs appear as\n"
	      "they start; VMs whose process exited stay, marked (exited).  CPU% and\n"
	      "WAIT% are the time the host threads of the row's vCPU (or VM) ran, and\n"
	      "waited runnable for a CPU (the guest's steal), in % of one CPU.\n"
	      "  -d, --interval SECONDS  time between samples (default 1, >= 0.1)\n"
	      "  --per vm|vcpu           a VM's vCPU stats summed (vm, default) or per vCPU\n"
	      "  -s, --sort KEY          rate (default), total, name, or the vCPU threads'\n"
	      "                          wait or cpu (the CPU% and WAIT% columns)\n"
	      "  -f REGEX                only statistics whose name matches\n"
	      "  -b, --batch             plain text reports instead of the full screen\n"
	      "  -n N                    stop after N reports\n"
	      "  --csv FILE              also log every report to FILE as CSV\n"
	      "Keys: q quit, s sort, v per VM/per vCPU, f filter, + and - interval.\n",
	      f);
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'd' },
		{ "per", required_argument, NULL, 'p' },
		{ "sort", required_argument, NULL, 's' },
		{ "filter", required_argument, NULL, 'f' },
		{ "batch", no_argument, NULL, 'b' },
		{ "csv", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct top t = { .interval = 1.0 };
	const char *csv = NULL;
	bool batch = false;
	long count = -1, done = 0;
	struct sigaction sa = { .sa_handler = on_signal };
	struct source src;
	char *end;
	int c, err, rc = EXIT_OK;

	while ((c = getopt_long(argc, argv, ":d:s:f:bn:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			t.interval = strtod(optarg, &end);
			if (end == optarg || *end || !(t.interval >= 0.1) ||
			    t.interval > 3600) {
				errmsg("top: bad interval '%s' (0.1 .. 3600 seconds)",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'p':
			if (!strcmp(optarg, "vm")) {
				t.per_vcpu = false;
			} else if (!strcmp(optarg, "vcpu")) {
				t.per_vcpu = true;
			} else {
				errmsg("top: --per wants vm or vcpu, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			for (t.sort = 0; t.sort < NSORT; t.sort++)
				if (!strcmp(optarg, sort_names[t.sort]))
					break;
			if (t.sort == NSORT) {
				errmsg("top: --sort wants rate, total, name, wait or cpu, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'f':
			if (strlen(optarg) >= sizeof(t.filter_text)) {
				errmsg("top: the filter is longer than %zu characters",
				       sizeof(t.filter_text) - 1);
				return EXIT_USAGE;
			}
			if (compile_filter(optarg, &t.re))
				return EXIT_USAGE;
			t.filter = &t.re;
			snprintf(t.filter_text, sizeof(t.filter_text), "%s",
				 optarg);
			break;
		case 'b':
			batch = true;
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (end == optarg || *end || count < 1) {
				errmsg("top: -n wants a positive count, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'c':
			csv = optarg;
			break;
		case 'h':
			usage_top(stdout);
			return EXIT_OK;
		default:
			return bad_option("top", c, argv);
		}
	}
	if (argc - optind > 1) {
		errmsg("top: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	t.sel = optind < argc ? argv[optind] : NULL;
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		batch = true; /* no terminal to draw on: plain reports */
	/* A report or a screen is one write (each ends in fflush()). */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);

	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	source_init(&src);
	if (csv) {
		t.csv = fopen(csv, "we");
		if (!t.csv) {
			errmsg("top: --csv %s: %s", csv, strerror(errno));
			source_fini(&src);
			return EXIT_FAIL;
		}
		fputs("time,pid,fd,vcpu,stat,total,rate,state,cpu,wait\n",
		      t.csv);
	}
	err = host_init(&t.host, &src);
	if (!err)
		err = host_refresh(&t.host);
	/* A first sample, so that the first report has rates. */
	if (!err)
		err = host_sample(&t.host);
	if (err) {
		rc = err == -ENOENT || err == -ENOTDIR ?
			     source_list_error(&src, err) :
			     (errmsg("top: %s", kvmstats_strerror(err)),
			      exit_for(err));
		goto out;
	}
	if (t.sel) {
		size_t i, n = 0;

		for (i = 0; i < t.host.nvms; i++)
			n += vm_selected(&t, &t.host.vms[i]);
		if (!n) {
			errmsg("no VM matches '%s' (see kvmstats list)", t.sel);
			rc = EXIT_NOVM;
			goto out;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!batch) {
		struct sigaction wa = { .sa_handler = on_winch };

		sigaction(SIGWINCH, &wa,
			  NULL); /* no SA_RESTART: poll() returns */
		tty_setup();
		/* Messages would spoil the screen: said when it is gone. */
		t.host.queue_msgs = tty_raw;
		build_rows(&t);
		draw(&t, NULL);
	}

	while (!stop_sig && (count < 0 || done < count)) {
		double next = now_mono() + t.interval;
		bool quit = false;

		/* Wait out the interval; keys redraw at once. */
		for (;;) {
			double left = next - now_mono();
			struct pollfd p = { .fd = STDIN_FILENO,
					    .events = POLLIN };
			int r;

			if (left <= 0 || stop_sig)
				break;
			if (batch) {
				struct timespec ts = {
					.tv_sec = (time_t)left,
					.tv_nsec =
						(long)((left - (time_t)left) *
						       1e9)
				};

				nanosleep(&ts, NULL);
				continue;
			}
			r = poll(&p, 1, (int)(left * 1000) + 1);
			if (resized) {
				/* The terminal changed size: redraw to fit it now. */
				resized = 0;
				draw(&t, NULL);
			}
			if (r > 0) {
				char ch;

				ssize_t n = read(STDIN_FILENO, &ch, 1);

				if (n < 0 && errno == EINTR)
					continue;
				if (n != 1 || !key(&t, ch)) {
					quit = true;
					break;
				}
				build_rows(&t);
				draw(&t, NULL);
			}
		}
		if (quit || stop_sig)
			break;
		err = host_refresh(&t.host);
		if (!err)
			err = host_sample(&t.host);
		if (err) {
			tty_restore();
			host_flush_msgs(&t.host);
			rc = err == -ENOENT || err == -ENOTDIR ?
				     source_list_error(&src, err) :
				     (errmsg("top: %s", kvmstats_strerror(err)),
				      exit_for(err));
			break;
		}
		build_rows(&t);
		write_csv(&t);
		if (batch)
			print_batch(&t);
		else
			draw(&t, NULL);
		done++;
	}
	tty_restore();
	host_flush_msgs(&t.host);
	/* A bounded batch run is one-shot: say it was not whole. */
	if (!rc && batch && count > 0 && done == count &&
	    (t.host.n.left_vms || t.host.n.left_vcpus))
		rc = EXIT_PARTIAL;
out:
	if (t.csv && fclose(t.csv)) {
		errmsg("top: --csv %s: %s", csv, strerror(errno));
		rc = rc ? rc : EXIT_FAIL;
	}
	host_fini(&t.host);
	source_fini(&src);
	free(t.rows);
	free(t.order);
	if (t.filter)
		regfree(t.filter);
	if (stop_sig == SIGINT || stop_sig == SIGTERM || stop_sig == SIGHUP)
		return rc ? rc : (batch && count > 0 ? EXIT_INTR : EXIT_OK);
	return rc;
}
