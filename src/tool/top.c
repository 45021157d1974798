// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats top: totals and rates per second, live (plain ANSI escapes, no
 * curses: the guest binary is static), in batch reports or as a log.
 *
 * Its habits are kvm_stat's, which people on a KVM host already type: the
 * default view sums every VM of the host per statistic, x drills down to
 * per VM and per vCPU rows, p and g pick a VM by pid or guest name, f
 * filters, r resets, o sorts, s sets the interval, h helps; the flags
 * -1/--once/--batch (one report), -l, -L FILE, -c/--csv (the log as CSV),
 * -z, -p, -g, -f help and -s mean what they mean there (kvmstats(1) has
 * the table).
 *
 * Rows are laid out to the data: each column as wide as its widest cell,
 * the whole as wide as the terminal allows.  Narrower than that, the gaps
 * shrink first, then the name columns (cut with a ~), never the numbers;
 * no line is drawn wider than the terminal, so nothing wraps or scrolls
 * but what the scroll keys move.
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

enum view { VIEW_HOST, VIEW_VM, VIEW_VCPU };
enum sort_key { SORT_RATE, SORT_TOTAL, SORT_NAME, SORT_WAIT, SORT_CPU, NSORT };

static const char *const sort_names[NSORT] = { "rate", "total", "name", "wait",
					       "cpu" };

/* A VM's label: its guest name, escaped, or PID:FD. */
#define LABEL_MAX 160

struct row {
	const char *label; /* the VM's (labels[]); NULL in the host view */
	const char *stat;  /* the statistic's name */
	const char *name;  /* the raw guest name, "" if none (CSV) */
	int pid, fd, vcpu; /* vcpu -1: the VM, or its vCPUs summed */
	bool vcpu_stat;	   /* a statistic of the vCPU table */
	bool exited;
	uint64_t total; /* since the reset, for cumulative statistics */
	double rate;	/* per second, over the last interval */
	int64_t delta;	/* the change over the last interval (the log) */
	/*
	 * What the scheduler gave the object's vCPU thread (a VM's: all its
	 * vCPUs' threads) over the interval, in CPUs: 1 is one CPU all the
	 * time.  < 0: not known (and in the host view).  The same on every
	 * row of the object.
	 */
	double cpu, wait;
};

/*
 * Which VMs are shown: every one, a VM as the command line names it (a
 * pid, PID:FD, guest name or UUID: identity.c decides), those of a pid
 * (-p, key p) or those with a guest name (-g, key g).
 */
struct selection {
	enum { SEL_ALL, SEL_VM, SEL_PID, SEL_GUEST } kind;
	int pid, fd; /* fd -1: every VM of pid */
	char text[256];
};

/* -l and -L: kvm_stat's logging mode. */
struct log {
	bool on, csv, skip_zero;
	const char *path; /* -L FILE, or NULL: standard output */
	FILE *f;
	char **cols; /* the statistics logged, fixed at the first record */
	bool *col_vcpu;
	size_t ncols;
	unsigned long lines; /* records since the last banner */
};

struct top {
	struct host host;
	struct selection sel;
	enum view view;
	enum sort_key sort;
	regex_t re;
	regex_t *filter;
	char filter_text[1024];
	double interval;
	struct row *rows;
	size_t nrows, room;
	struct row **order; /* the rows sorted (pointers: cheap to move) */
	size_t order_room;
	char (*labels)[LABEL_MAX]; /* per host.vms[] index */
	size_t labels_room;
	size_t scroll; /* the first row on screen */
	size_t shown;  /* rows that fit on the screen last drawn */
	char msg[256]; /* shown instead of the key help until the next key */
	time_t reset_at;
	FILE *csv; /* --report-csv */
	struct log log;
};

static volatile sig_atomic_t stop_sig, resized, reopen;
static struct termios saved_tio;
static bool tty_raw;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static void on_hup_log(int sig)
{
	(void)sig;
	reopen = 1;
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

/* ------------------------------------------------------------ selection */

static int parse_pid(const char *s, int *pid, int *fd)
{
	char *end;
	long p, f = -1;

	p = strtol(s, &end, 10);
	if (end == s || p < 1 || p > INT32_MAX)
		return -1;
	if (*end == ':') {
		const char *fs = end + 1;

		f = strtol(fs, &end, 10);
		if (end == fs || f < 0 || f > INT32_MAX)
			return -1;
	}
	if (*end)
		return -1;
	*pid = (int)p;
	*fd = (int)f;
	return 0;
}

/* @text as a selection of @kind; "" selects every VM; -1 if no pid. */
static int make_selection(struct selection *s, const char *text, int kind)
{
	struct selection n = { .kind = kind };

	snprintf(n.text, sizeof(n.text), "%s", text);
	if (!text[0])
		n.kind = SEL_ALL;
	else if (kind == SEL_PID && parse_pid(text, &n.pid, &n.fd))
		return -1;
	*s = n;
	return 0;
}

static bool vm_selected(const struct selection *s, const struct vmrec *v)
{
	switch (s->kind) {
	case SEL_ALL:
		return true;
	case SEL_VM:
		return identity_selects(s->text, v->pid, v->fd, &v->id);
	case SEL_PID:
		return v->pid == s->pid && (s->fd < 0 || v->fd == s->fd);
	case SEL_GUEST:
		return guest_name_is(v->id.name, s->text);
	}
	return false;
}

static size_t count_selected(const struct top *t, const struct selection *s)
{
	size_t i, n = 0;

	for (i = 0; i < t->host.nvms; i++)
		n += vm_selected(s, &t->host.vms[i]);
	return n;
}

/* ----------------------------------------------------------------- rows */

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

/* The change of @s over the last interval, where there is a rate. */
static int64_t delta_of(const struct kvmstats_stat *s, const struct objrec *o,
			bool alive)
{
	if (!alive || !o->fresh || !o->t_prev)
		return 0;
	return (int64_t)(kvmstats_value(s, o->cur, 0) -
			 kvmstats_value(s, o->prev, 0));
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
			/* a sum without one is not the VM's */
			*cpu = *wait = -1;
			return;
		}
		*cpu += a;
		*wait += b;
	}
}

/* @s's value in @o, counted from the reset for a cumulative statistic. */
static uint64_t total_of(const struct kvmstats_stat *s, const struct objrec *o)
{
	uint64_t v = kvmstats_value(s, o->cur, 0), b;

	if (!o->base || s->type != KVMSTATS_CUMULATIVE)
		return v;
	b = kvmstats_value(s, o->base, 0);
	return v >= b ? v - b : 0;
}

/*
 * Add @s of @o to the sum @r: counts and times add up, peaks take the
 * highest, booleans count where they are true.  In the host view an
 * exited VM adds only what it did (cumulative statistics): its gauges
 * describe nothing that is still there.
 */
static void add_to(struct row *r, const struct kvmstats_stat *s,
		   const struct objrec *o, bool alive, bool host)
{
	uint64_t v = total_of(s, o);

	if (host && !alive && s->type != KVMSTATS_CUMULATIVE)
		return;
	if (s->unit == KVMSTATS_UNIT_BOOLEAN)
		v = v != 0;
	if (s->type == KVMSTATS_PEAK)
		r->total = v > r->total ? v : r->total;
	else /* saturating: never a small number for a huge one */
		r->total = r->total + v < v ? UINT64_MAX : r->total + v;
	r->rate += rate_of(s, o, alive);
	r->delta += delta_of(s, o, alive);
}

/* Rows for the scalar stats of object @o (the VM, or vCPU @vcpu) of @v. */
static void add_rows(struct top *t, const struct vmrec *v, const char *label,
		     int vcpu, const struct objrec *o)
{
	unsigned int i, nr = kvmstats_file_num_stats(o->file);
	bool alive = v->state == VM_OPEN;
	double cpu, wait;

	row_threads(v, vcpu, &cpu, &wait);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);
		struct row *r;

		if (kvmstats_is_hist(s) || !name_matches(t->filter, s->name))
			continue;
		r = new_row(t);
		if (!r)
			return;
		*r = (struct row){ .cpu = cpu,
				   .wait = wait,
				   .label = label,
				   .stat = s->name,
				   .name = v->id.name,
				   .pid = v->pid,
				   .fd = v->fd,
				   .vcpu = vcpu,
				   .vcpu_stat = vcpu >= 0,
				   .exited = !alive,
				   .total = total_of(s, o),
				   .rate = rate_of(s, o, alive),
				   .delta = delta_of(s, o, alive) };
	}
}

/*
 * Per-VM view: the VM's vCPU stats summed over its vCPUs (the rate is the
 * sum of the vCPUs' rates, each over its own interval), only when every
 * vCPU was read this time: a sum without one is not the VM's.
 */
static void add_vcpu_sums(struct top *t, const struct vmrec *v,
			  const char *label)
{
	const struct kvmstats_file *f0 = v->vcpu[0].file;
	unsigned int i, c, nr = kvmstats_file_num_stats(f0);
	bool alive = v->state == VM_OPEN;
	double cpu, wait;

	for (c = 0; alive && c < v->nv; c++)
		if (!v->vcpu[c].fresh)
			return;
	if (alive && v->nv < v->nr_vcpus)
		return;
	row_threads(v, -1, &cpu, &wait);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f0, i);
		struct row *r;

		if (kvmstats_is_hist(s) || !name_matches(t->filter, s->name))
			continue;
		r = new_row(t);
		if (!r)
			return;
		*r = (struct row){ .label = label,
				   .stat = s->name,
				   .name = v->id.name,
				   .pid = v->pid,
				   .fd = v->fd,
				   .vcpu = -1,
				   .vcpu_stat = true,
				   .exited = !alive,
				   .cpu = cpu,
				   .wait = wait };
		for (c = 0; c < v->nv; c++) {
			const struct kvmstats_stat *sc =
				kvmstats_file_stat(v->vcpu[c].file, i);

			if (!sc || strcmp(sc->name, s->name))
				continue; /* a vCPU with another table: leave it out */
			add_to(r, sc, &v->vcpu[c], alive, false);
		}
	}
}

/*
 * Host view: the row of statistic @s (of the vCPU table or not), found
 * through @hint (the row the same index gave last time) or by name.
 */
static struct row *host_row(struct top *t, const struct kvmstats_stat *s,
			    bool vcpu_stat, size_t *hint)
{
	struct row *r;
	size_t i;

	if (*hint < t->nrows && t->rows[*hint].vcpu_stat == vcpu_stat &&
	    !strcmp(t->rows[*hint].stat, s->name))
		return &t->rows[*hint];
	for (i = 0; i < t->nrows; i++) {
		if (t->rows[i].vcpu_stat == vcpu_stat &&
		    !strcmp(t->rows[i].stat, s->name)) {
			*hint = i;
			return &t->rows[i];
		}
	}
	r = new_row(t);
	if (!r)
		return NULL;
	*r = (struct row){ .stat = s->name,
			   .name = "",
			   .vcpu = -1,
			   .vcpu_stat = vcpu_stat,
			   .cpu = -1,
			   .wait = -1 };
	*hint = (size_t)(r - t->rows);
	return r;
}

/* Host view: add the scalar stats of @o to the host's rows. */
static void host_add(struct top *t, const struct objrec *o, bool vcpu_stat,
		     bool alive, size_t **hints, size_t *nhints)
{
	unsigned int i, nr = kvmstats_file_num_stats(o->file);

	if (nr > *nhints) {
		size_t *a = realloc(*hints, nr * sizeof(**hints));

		if (!a)
			return;
		for (i = (unsigned int)*nhints; i < nr; i++)
			a[i] = SIZE_MAX;
		*hints = a;
		*nhints = nr;
	}
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);
		struct row *r;

		if (kvmstats_is_hist(s) || !name_matches(t->filter, s->name))
			continue;
		r = host_row(t, s, vcpu_stat, &(*hints)[i]);
		if (r)
			add_to(r, s, o, alive, true);
	}
}

/* Each VM's label: its guest name when no other VM has it, else PID:FD. */
static void make_labels(struct top *t)
{
	size_t i, j;

	if (t->host.nvms > t->labels_room) {
		void *a = realloc(t->labels, t->host.nvms * sizeof(*t->labels));

		if (!a)
			return;
		t->labels = a;
		t->labels_room = t->host.nvms;
	}
	for (i = 0; i < t->host.nvms; i++) {
		const struct vmrec *v = &t->host.vms[i];
		bool unique = v->id.name[0] != '\0';

		for (j = 0; unique && j < t->host.nvms; j++)
			unique = j == i ||
				 strcmp(t->host.vms[j].id.name, v->id.name);
		if (unique)
			esc(v->id.name, t->labels[i], LABEL_MAX);
		else
			snprintf(t->labels[i], LABEL_MAX, "%d:%d", v->pid,
				 v->fd);
	}
}

static enum sort_key sort_by;

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = *(const struct row *const *)a;
	const struct row *y = *(const struct row *const *)b;
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
	c = strcmp(x->stat, y->stat);
	return c ? c : (int)x->vcpu_stat - (int)y->vcpu_stat;
}

static void build_rows(struct top *t)
{
	size_t i, *hint_vm = NULL, *hint_vcpu = NULL, nhvm = 0, nhvcpu = 0;
	unsigned int c;

	t->nrows = 0;
	make_labels(t);
	for (i = 0; i < t->host.nvms && t->labels_room >= t->host.nvms; i++) {
		const struct vmrec *v = &t->host.vms[i];
		bool alive = v->state == VM_OPEN;
		const char *label = t->labels[i];

		/* Exited VMs keep their last values; left out ones are counted. */
		if (!vm_selected(&t->sel, v) ||
		    (!alive && v->state != VM_EXITED))
			continue;
		if (v->vm.file && v->vm.t_cur && (v->vm.fresh || !alive)) {
			if (t->view == VIEW_HOST)
				host_add(t, &v->vm, false, alive, &hint_vm,
					 &nhvm);
			else
				add_rows(t, v, label, -1, &v->vm);
		}
		if (!v->nv)
			continue;
		if (t->view == VIEW_VM) {
			add_vcpu_sums(t, v, label);
			continue;
		}
		for (c = 0; c < v->nv; c++) {
			if (!v->vcpu[c].t_cur || (!v->vcpu[c].fresh && alive))
				continue;
			if (t->view == VIEW_HOST)
				host_add(t, &v->vcpu[c], true, alive,
					 &hint_vcpu, &nhvcpu);
			else
				add_rows(t, v, label, (int)c, &v->vcpu[c]);
		}
	}
	free(hint_vm);
	free(hint_vcpu);
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
		qsort(t->order, t->nrows, sizeof(*t->order), row_cmp);
}

/* Start the totals of every object over from its latest sample (key r). */
static void reset_totals(struct top *t)
{
	size_t i, sz;
	unsigned int c;

	for (i = 0; i < t->host.nvms; i++) {
		struct vmrec *v = &t->host.vms[i];
		struct objrec *o;

		for (c = 0; c <= v->nv; c++) {
			o = c == v->nv ? &v->vm : &v->vcpu[c];
			if (!o->file || !o->t_cur)
				continue;
			sz = kvmstats_file_data_size(o->file);
			if (!o->base)
				o->base = malloc(sz ? sz : 1);
			if (o->base)
				memcpy(o->base, o->cur, sz);
		}
	}
	t->reset_at = time(NULL);
}

/* ---------------------------------------------------------------- text */

static const char *view_name(enum view v)
{
	return v == VIEW_HOST ? "host" : v == VIEW_VM ? "VM" : "vCPU";
}

static const char *sort_name(enum sort_key k)
{
	return sort_names[k];
}

/* An interval as few digits as say it: 1s, 0.5s, 0.25s, 0.125s. */
static void interval_str(double d, char *buf, size_t len)
{
	char *p;

	snprintf(buf, len, "%.3f", d);
	p = buf + strlen(buf) - 1;
	while (*p == '0')
		*p-- = '\0';
	if (*p == '.')
		*p = '\0';
	snprintf(buf + strlen(buf), len - strlen(buf), "s");
}

/* Columns taken by @s: its characters (it is escaped: UTF-8, no controls). */
static size_t width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

/* The bytes of the first @w characters of @s. */
static size_t bytes_for(const char *s, size_t w)
{
	const char *p = s;

	while (*p && w) {
		p++;
		while (((unsigned char)*p & 0xc0) == 0x80)
			p++;
		w--;
	}
	return (size_t)(p - s);
}

static void count_vms(const struct top *t, size_t *alive, size_t *exited)
{
	size_t i;

	*alive = *exited = 0;
	for (i = 0; i < t->host.nvms; i++) {
		if (!vm_selected(&t->sel, &t->host.vms[i]))
			continue;
		if (t->host.vms[i].state == VM_OPEN)
			(*alive)++;
		else if (t->host.vms[i].state == VM_EXITED)
			(*exited)++;
	}
}

/*
 * What the last sample did not serve, as " failed 1/2 left-out 3/12"
 * (VMs/vCPUs), into @buf; "" when all was served.
 */
static void not_served(const struct top *t, char *buf, size_t len)
{
	const struct host_counts *n = &t->host.n;
	int k = 0;

	buf[0] = '\0';
	if (n->failed_vms || n->failed_vcpus)
		k = snprintf(buf, len, " failed %u/%u", n->failed_vms,
			     n->failed_vcpus);
	if (k >= 0 && (size_t)k < len && (n->left_vms || n->left_vcpus))
		snprintf(buf + k, len - (size_t)k, " left-out %u/%u",
			 n->left_vms, n->left_vcpus);
}

/* A row's label cell: "web1", "1000:10/3", "db (exited)". */
static void label_cell(const struct row *r, char *buf, size_t len)
{
	char suffix[32] = "";

	if (r->vcpu >= 0)
		snprintf(suffix, sizeof(suffix), "/%d", r->vcpu);
	if (r->exited)
		snprintf(suffix + strlen(suffix),
			 sizeof(suffix) - strlen(suffix), " (exited)");
	snprintf(buf, len, "%s%s", r->label ? r->label : "", suffix);
}

static void rate_str(double rate, char *buf, size_t len)
{
	snprintf(buf, len, "%.1f", rate == 0 ? 0.0 : rate);
}

/*
 * Column widths, and the gap between columns.  The per-VM and per-vCPU
 * views (@label) also have CPU% and WAIT%, of width @pw.
 */
struct layout {
	bool label;
	size_t lw, sw, tw, rw, pw, gap;
};

/* @cpus as a percentage of one CPU, "-" when not known. */
static void percent_str(double cpus, char *buf, size_t len)
{
	if (cpus < 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f", 100 * cpus);
}

static const char *label_head(const struct top *t)
{
	return t->view == VIEW_VCPU ? "VM/VCPU" : "VM";
}

/*
 * Each column as wide as its widest cell (of every row, so that scrolling
 * does not move them), then narrowed to @cols: the gaps first, then the
 * label and statistic columns down to 10 and to 6 characters, never the
 * numbers.
 */
static void layout(const struct top *t, size_t cols, struct layout *l)
{
	size_t i, need, over, cut;
	size_t *cuts[2];
	char buf[LABEL_MAX + 64];

	*l = (struct layout){ .label = t->view != VIEW_HOST,
			      .sw = 4,
			      .tw = 5,
			      .rw = 6,
			      .pw = 5,
			      .gap = 2 };
	l->lw = l->label ? strlen(label_head(t)) : 0;
	for (i = 0; i < t->nrows; i++) {
		const struct row *r = &t->rows[i];
		size_t w;

		if (l->label) {
			label_cell(r, buf, sizeof(buf));
			w = width(buf);
			l->lw = w > l->lw ? w : l->lw;
		}
		w = width(r->stat);
		l->sw = w > l->sw ? w : l->sw;
		if (l->sw > 256)
			l->sw = 256; /* KVM's are under 48: no more is needed */
		w = (size_t)snprintf(buf, sizeof(buf), "%llu",
				     (unsigned long long)r->total);
		l->tw = w > l->tw ? w : l->tw;
		rate_str(r->rate, buf, sizeof(buf));
		w = strlen(buf);
		l->rw = w > l->rw ? w : l->rw;
		if (!l->label)
			continue;
		percent_str(r->cpu, buf, sizeof(buf));
		w = strlen(buf);
		l->pw = w > l->pw ? w : l->pw;
		percent_str(r->wait, buf, sizeof(buf));
		w = strlen(buf);
		l->pw = w > l->pw ? w : l->pw;
	}
	need = (l->label ? l->lw + 2 * l->pw + 3 * l->gap : 0) + l->sw + l->tw +
	       l->rw + 2 * l->gap;
	if (need > cols && l->gap > 1) {
		need -= l->label ? 5 : 2;
		l->gap = 1;
	}
	cuts[0] = &l->lw;
	cuts[1] = &l->sw;
	for (cut = 10; cut >= 6 && need > cols; cut -= 4) {
		for (i = 0; i < 2 && need > cols; i++) {
			if ((i == 0 && !l->label) || *cuts[i] <= cut)
				continue;
			over = need - cols;
			if (over > *cuts[i] - cut)
				over = *cuts[i] - cut;
			*cuts[i] -= over;
			need -= over;
		}
	}
}

/* @s left-aligned in @w columns at @p, cut with a ~ if wider; the end. */
static char *put_left(char *p, const char *s, size_t w)
{
	size_t sw = width(s), n;

	if (sw > w) {
		n = w ? bytes_for(s, w - 1) : 0;
		memcpy(p, s, n);
		p += n;
		if (w)
			*p++ = '~';
		return p;
	}
	n = strlen(s);
	memcpy(p, s, n);
	p += n;
	while (sw++ < w)
		*p++ = ' ';
	return p;
}

/* @s right-aligned in a field of @w at @p; returns the end. */
static char *put_right(char *p, const char *s, size_t w)
{
	size_t n = strlen(s);

	while (w-- > n)
		*p++ = ' ';
	memcpy(p, s, n);
	return p + n;
}

static char *put_gap(char *p, size_t gap)
{
	while (gap--)
		*p++ = ' ';
	return p;
}

/*
 * The label cell of @r into @l->lw columns: when it is too wide, its
 * name is cut and the "/N (exited)" suffix kept.
 */
static char *put_label(char *p, const struct row *r, const struct layout *l)
{
	char cell[LABEL_MAX + 64], name[LABEL_MAX + 8];
	size_t cw, sw;

	label_cell(r, cell, sizeof(cell));
	cw = width(cell);
	sw = cw - width(r->label ? r->label : "");
	if (cw <= l->lw || l->lw < sw + 2)
		return put_left(p, cell, l->lw);
	snprintf(name, sizeof(name), "%.*s~",
		 (int)bytes_for(r->label, l->lw - sw - 1), r->label);
	memcpy(p, name, strlen(name));
	p += strlen(name);
	p = put_left(p, cell + strlen(r->label), sw);
	return p;
}

/* One row, at most @cols columns (the full screen) and a newline. */
static void print_row(FILE *out, const struct row *r, const struct layout *l,
		      size_t cols)
{
	char line[2048], num[64], *p = line;

	if (l->label) {
		p = put_label(p, r, l);
		p = put_gap(p, l->gap);
	}
	p = put_left(p, r->stat, l->sw);
	p = put_gap(p, l->gap);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)r->total);
	p = put_right(p, num, l->tw);
	p = put_gap(p, l->gap);
	rate_str(r->rate, num, sizeof(num));
	p = put_right(p, num, l->rw);
	if (l->label) {
		p = put_gap(p, l->gap);
		percent_str(r->cpu, num, sizeof(num));
		p = put_right(p, num, l->pw);
		p = put_gap(p, l->gap);
		percent_str(r->wait, num, sizeof(num));
		p = put_right(p, num, l->pw);
	}
	*p = '\0';
	if (width(line) > cols)
		p = line + bytes_for(line, cols);
	*p++ = '\n';
	fwrite(line, 1, (size_t)(p - line), out);
}

static void print_head(FILE *out, const struct top *t, const struct layout *l,
		       size_t cols)
{
	char line[512], *p = line;

	if (l->label) {
		p = put_left(p, label_head(t), l->lw);
		p = put_gap(p, l->gap);
	}
	p = put_left(p, "STAT", l->sw);
	p = put_gap(p, l->gap);
	p = put_right(p, "TOTAL", l->tw);
	p = put_gap(p, l->gap);
	p = put_right(p, "RATE/s", l->rw);
	if (l->label) {
		p = put_gap(p, l->gap);
		p = put_right(p, "CPU%", l->pw);
		p = put_gap(p, l->gap);
		p = put_right(p, "WAIT%", l->pw);
	}
	*p = '\0';
	fprintf(out, "%.*s", (int)(strlen(line) < cols ? strlen(line) : cols),
		line);
}

static void print_batch(struct top *t)
{
	size_t i, alive, exited;
	char when[32], ns[128];
	time_t now = time(NULL);
	struct layout l;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	count_vms(t, &alive, &exited);
	not_served(t, ns, sizeof(ns));
	printf("# kvmstats top %s interval %.3fs VMs %zu exited %zu view %s sort %s%s\n",
	       when, t->interval, alive, exited,
	       t->view == VIEW_HOST ? "host" :
	       t->view == VIEW_VM   ? "vm" :
				      "vcpu",
	       sort_name(t->sort), ns);
	layout(t, SIZE_MAX, &l);
	print_head(stdout, t, &l, SIZE_MAX);
	putchar('\n');
	for (i = 0; i < t->nrows; i++)
		print_row(stdout, t->order[i], &l, SIZE_MAX);
	putchar('\n');
	fflush(stdout);
}

/* ---------------------------------------------------------- the screen */

/*
 * The title: its parts in order, as many on a line as fit, a part wider
 * than the screen cut with "...".  Returns the lines written.
 */
static size_t draw_title(struct top *t, size_t cols)
{
	char parts[10][1100], when[32], iv[32], ns[128];
	size_t alive, exited, n = 0, i, lines = 0, lw = 0;
	time_t now = time(NULL);

	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	count_vms(t, &alive, &exited);
	not_served(t, ns, sizeof(ns));
	interval_str(t->interval, iv, sizeof(iv));
	snprintf(parts[n++], sizeof(parts[0]), "kvmstats top");
	snprintf(parts[n++], sizeof(parts[0]), "%s", when);
	snprintf(parts[n++], sizeof(parts[0]), "every %s", iv);
	if (exited)
		snprintf(parts[n++], sizeof(parts[0]), "VMs: %zu, %zu exited%s",
			 alive, exited, ns);
	else
		snprintf(parts[n++], sizeof(parts[0]), "VMs: %zu%s", alive, ns);
	snprintf(parts[n++], sizeof(parts[0]), "view: %s", view_name(t->view));
	snprintf(parts[n++], sizeof(parts[0]), "sort: %s", sort_name(t->sort));
	if (t->sel.kind != SEL_ALL) {
		char e[sizeof(parts[0]) - 8];

		snprintf(parts[n++], sizeof(parts[0]), "%s: %s",
			 t->sel.kind == SEL_PID	  ? "pid" :
			 t->sel.kind == SEL_GUEST ? "guest" :
						    "VM",
			 esc(t->sel.text, e, sizeof(e)));
	}
	if (t->reset_at) {
		strftime(when, sizeof(when), "%H:%M:%S",
			 localtime(&t->reset_at));
		snprintf(parts[n++], sizeof(parts[0]), "reset %s", when);
	}
	{
		char e[sizeof(parts[0]) - 10];

		snprintf(parts[n++], sizeof(parts[0]), "filter: %s",
			 t->filter ? esc(t->filter_text, e, sizeof(e)) : "-");
	}
	for (i = 0; i < n; i++) {
		size_t pw = width(parts[i]);

		if (lw && lw + 2 + pw <= cols) {
			printf("  %s", parts[i]);
			lw += 2 + pw;
			continue;
		}
		if (lw) {
			putchar('\n');
			lines++;
		}
		if (pw > cols && cols > 3) {
			printf("%.*s...", (int)bytes_for(parts[i], cols - 3),
			       parts[i]);
			lw = cols;
		} else {
			fputs(parts[i], stdout);
			lw = pw;
		}
	}
	putchar('\n');
	return lines + 1;
}

static const char key_help[] =
	"h help  q quit  f filter  p/g VM  x view  o sort  r reset  s interval";

/*
 * The full screen: title, header, the rows that fit from t->scroll on and
 * the bottom line: @prompt and the text typed (@typed), or t->msg, or the
 * keys, with the rows shown of how many.  No line is wider than the
 * terminal, so none wraps and nothing scrolls.
 */
static void draw(struct top *t, const char *prompt, const char *typed)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	char bottom[1400], pos[64] = "";
	size_t i, lines, cols, head, bw;
	struct layout l;

	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	if (ws.ws_row < 6)
		ws.ws_row = 6;
	if (ws.ws_col < 20)
		ws.ws_col = 20;
	cols = ws.ws_col;
	fputs("\033[H\033[2J", stdout);
	head = draw_title(t, cols);
	layout(t, cols, &l);
	fputs("\033[7m", stdout);
	print_head(stdout, t, &l, cols);
	fputs("\033[0m\n", stdout);
	lines = (size_t)ws.ws_row > head + 2 ? (size_t)ws.ws_row - head - 2 : 1;
	t->shown = lines;
	if (t->scroll + lines > t->nrows)
		t->scroll = t->nrows > lines ? t->nrows - lines : 0;
	for (i = t->scroll; i < t->nrows && i < t->scroll + lines; i++)
		print_row(stdout, t->order[i], &l, cols);
	printf("\033[%d;1H", ws.ws_row);
	if (t->nrows > lines)
		snprintf(pos, sizeof(pos), "%zu-%zu/%zu", t->scroll + 1, i,
			 t->nrows);
	bw = cols - 1 - (pos[0] ? strlen(pos) + 1 : 0);
	if (prompt) {
		char e[1100];
		size_t pl = strlen(prompt) + 2, tw;

		esc(typed, e, sizeof(e));
		tw = width(e);
		/* A long entry shows its end, where the typing is. */
		if (pl + tw > cols - 1 && cols - 1 > pl + 3)
			snprintf(bottom, sizeof(bottom), "%s: ...%s", prompt,
				 e + bytes_for(e, tw - (cols - 1 - pl - 3)));
		else
			snprintf(bottom, sizeof(bottom), "%s: %s", prompt, e);
		pos[0] = '\0';
		bw = cols - 1;
	} else if (t->msg[0]) {
		snprintf(bottom, sizeof(bottom), "%s", t->msg);
	} else {
		snprintf(bottom, sizeof(bottom), "%s", key_help);
		/* Whole keys only: cut at the last gap that fits. */
		while (width(bottom) > bw) {
			char *gap = strstr(bottom, "  "), *next;

			if (!gap)
				break;
			while ((next = strstr(gap + 2, "  ")))
				gap = next;
			*gap = '\0';
		}
	}
	if (width(bottom) > bw)
		bottom[bytes_for(bottom, bw)] = '\0';
	/* The last line without a newline: a newline there would scroll. */
	fputs(bottom, stdout);
	if (pos[0])
		printf("%*s%s", (int)(cols - 1 - width(bottom) - strlen(pos)),
		       "", pos);
	fflush(stdout);
}

static const char *const help_lines[] = {
	"kvmstats top: keys",
	"",
	"  f      filter the statistics (extended regex)",
	"  p      one VM by pid (PID or PID:FD)",
	"  g      one VM by guest name",
	"  c      clear the filter and the VM",
	"  x, v   view: host, per VM, per vCPU",
	"  o      sort: rate, total, name",
	"  r      reset the totals to 0",
	"  s      set the interval (+ doubles, - halves)",
	"  Up, Down, PgUp, PgDn, Home, End  scroll",
	"  h, ?   this help",
	"  q      quit",
	"",
	"Any key goes back.",
};

static void draw_help(void)
{
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	size_t i, n = sizeof(help_lines) / sizeof(help_lines[0]);

	ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
	fputs("\033[H\033[2J", stdout);
	for (i = 0; i < n && i + 1 < ws.ws_row; i++)
		printf("%.*s\n", ws.ws_col > 1 ? ws.ws_col - 1 : 1,
		       help_lines[i]);
	fflush(stdout);
}

/* ------------------------------------------------------------------ keys */

enum {
	KEY_NONE = -1,
	KEY_QUIT = -2, /* end of input, or a signal */
	KEY_ESC = 27,
	KEY_UP = 256,
	KEY_DOWN,
	KEY_PGUP,
	KEY_PGDN,
	KEY_HOME,
	KEY_END,
};

/*
 * One key: a byte, or an escape sequence (the cursor keys, Page Up and
 * Down, Home and End as xterm-like terminals send them, in either cursor
 * mode), or ESC alone when nothing follows within 50 ms.  KEY_NONE for a
 * signal that does not stop us, or a sequence we do not know.
 */
static int read_key(void)
{
	unsigned char c, seq[16];
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	size_t n = 0;
	ssize_t r;

	r = read(STDIN_FILENO, &c, 1);
	if (r < 0 && errno == EINTR && !stop_sig)
		return KEY_NONE;
	if (r != 1 || stop_sig)
		return KEY_QUIT;
	if (c != 27)
		return c;
	/* The rest of a sequence arrives at once; a lone ESC does not. */
	while (n < sizeof(seq) && poll(&p, 1, 50) > 0) {
		if (read(STDIN_FILENO, &seq[n], 1) != 1)
			break;
		n++;
		if (n >= 2 && seq[n - 1] >= 0x40 && seq[n - 1] <= 0x7e)
			break; /* the final byte */
	}
	if (!n)
		return KEY_ESC;
	if (n == 2 && (seq[0] == '[' || seq[0] == 'O')) {
		switch (seq[1]) {
		case 'A':
			return KEY_UP;
		case 'B':
			return KEY_DOWN;
		case 'H':
			return KEY_HOME;
		case 'F':
			return KEY_END;
		}
	}
	if (n == 3 && seq[0] == '[' && seq[2] == '~') {
		switch (seq[1]) {
		case '1':
		case '7':
			return KEY_HOME;
		case '4':
		case '8':
			return KEY_END;
		case '5':
			return KEY_PGUP;
		case '6':
			return KEY_PGDN;
		}
	}
	return KEY_NONE;
}

/*
 * A line typed on the bottom line after @prompt, into @buf: Enter takes
 * it, Escape cancels (false), Backspace erases a character.
 */
static bool read_line(struct top *t, const char *prompt, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (;;) {
		int k;

		draw(t, prompt, buf);
		k = read_key();
		if (k == KEY_NONE) {
			resized = 0; /* a new size: the loop redraws */
			continue;
		}
		if (k == KEY_QUIT || k == KEY_ESC)
			return false;
		if (k == '\r' || k == '\n')
			return true;
		if (k == 127 || k == 8) {
			/* A whole UTF-8 character. */
			while (n > 0 &&
			       ((unsigned char)buf[--n] & 0xc0) == 0x80)
				;
			buf[n] = '\0';
		} else if (k >= 32 && k < 256 && k != 127 && n + 1 < len) {
			buf[n++] = (char)k;
			buf[n] = '\0';
		}
	}
}

/* How many scalar statistics of the open files pass @re; -1: no file. */
static long scalars_matching(const struct top *t, const regex_t *re)
{
	long n = 0;
	bool files = false;
	size_t i;
	unsigned int c, k;

	for (i = 0; i < t->host.nvms; i++) {
		const struct vmrec *v = &t->host.vms[i];

		for (c = 0; c <= v->nv; c++) {
			const struct kvmstats_file *f =
				c == v->nv ? v->vm.file : v->vcpu[c].file;

			if (!f)
				continue;
			files = true;
			for (k = 0; k < kvmstats_file_num_stats(f); k++) {
				const struct kvmstats_stat *s =
					kvmstats_file_stat(f, k);

				n += !kvmstats_is_hist(s) &&
				     name_matches(re, s->name);
			}
			if (n)
				return n;
		}
	}
	return files ? n : -1;
}

/* The same against the module's tables, where the source has them. */
static long table_scalars_matching(const struct source *src, const regex_t *re)
{
	struct kvmstats_file *f;
	long n = -1;
	unsigned int k;
	int vcpu;

	for (vcpu = 0; vcpu < 2; vcpu++) {
		if (source_schema(src, vcpu, &f))
			return n;
		n = n < 0 ? 0 : n;
		for (k = 0; k < kvmstats_file_num_stats(f); k++) {
			const struct kvmstats_stat *s =
				kvmstats_file_stat(f, k);

			n += !kvmstats_is_hist(s) && name_matches(re, s->name);
		}
		kvmstats_file_free(f);
	}
	return n;
}

/* A new filter; one that does not compile or matches nothing is refused. */
static void set_filter(struct top *t, const char *text)
{
	char e[120];
	regex_t re;
	int err = 0;

	if (text[0]) {
		err = regcomp(&re, text, REG_EXTENDED | REG_NOSUB);
		if (err) {
			char why[96];

			regerror(err, &re, why, sizeof(why));
			snprintf(t->msg, sizeof(t->msg),
				 "bad regex '%.40s%s': %s",
				 esc(text, e, sizeof(e)),
				 strlen(text) > 40 ? "..." : "", why);
			return;
		}
		if (scalars_matching(t, &re) == 0) {
			snprintf(
				t->msg, sizeof(t->msg),
				"no statistic matches '%.40s%s' (see kvmstats schema)",
				esc(text, e, sizeof(e)),
				strlen(text) > 40 ? "..." : "");
			regfree(&re);
			return;
		}
	}
	if (t->filter)
		regfree(&t->re);
	t->filter = NULL;
	t->filter_text[0] = '\0';
	t->scroll = 0;
	if (!text[0])
		return;
	t->re = re;
	t->filter = &t->re;
	snprintf(t->filter_text, sizeof(t->filter_text), "%s", text);
}

/* A new VM selection (keys p and g); one that matches no VM is refused. */
static void set_selection(struct top *t, const char *text, bool guest)
{
	struct selection s;
	char e[120];

	if (make_selection(&s, text, guest ? SEL_GUEST : SEL_PID)) {
		snprintf(t->msg, sizeof(t->msg),
			 "'%.40s' is not a pid or PID:FD",
			 esc(text, e, sizeof(e)));
		return;
	}
	if (s.kind != SEL_ALL && !count_selected(t, &s)) {
		snprintf(t->msg, sizeof(t->msg),
			 "no VM %s '%.40s' (kvmstats list shows them)",
			 guest ? "has the guest name" : "matches",
			 esc(text, e, sizeof(e)));
		return;
	}
	t->sel = s;
	t->scroll = 0;
}

static bool parse_interval(const char *s, double *out)
{
	char *end;
	double d = strtod(s, &end);

	if (end == s || *end || !(d >= 0.1) || d > 3600)
		return false;
	*out = d;
	return true;
}

/* Handle one key; returns false to quit. */
static bool key(struct top *t, int k)
{
	char line[sizeof(t->filter_text)], e[64];
	size_t page = t->shown ? t->shown : 1;
	size_t last = t->nrows > page ? t->nrows - page : 0;

	t->msg[0] = '\0';
	switch (k) {
	case 'q':
	case 'Q':
	case KEY_QUIT:
		return false;
	case 'o':
		t->sort = (t->sort + 1) % NSORT;
		break;
	case 'x':
	case 'v':
		t->view = (t->view + 1) % 3;
		t->scroll = 0;
		break;
	case 'f':
		if (read_line(t, "filter (extended regex, empty: none)", line,
			      sizeof(line)))
			set_filter(t, line);
		break;
	case 'p':
		if (read_line(t, "pid (PID or PID:FD, empty: every VM)", line,
			      sizeof(line)))
			set_selection(t, line, false);
		break;
	case 'g':
		if (read_line(t, "guest name (empty: every VM)", line,
			      sizeof(line)))
			set_selection(t, line, true);
		break;
	case 'c':
		set_filter(t, "");
		t->sel = (struct selection){ .kind = SEL_ALL };
		break;
	case 'r':
		reset_totals(t);
		break;
	case 's':
		if (read_line(t, "interval in seconds (0.1 to 3600)", line,
			      sizeof(line)) &&
		    line[0] && !parse_interval(line, &t->interval))
			snprintf(
				t->msg, sizeof(t->msg),
				"'%.40s': not an interval of 0.1 to 3600 seconds",
				esc(line, e, sizeof(e)));
		break;
	case '+':
		if (t->interval < 60)
			t->interval *= 2;
		break;
	case '-':
		if (t->interval > 0.2)
			t->interval /= 2;
		break;
	case 'h':
	case '?':
		for (;;) {
			draw_help();
			k = read_key();
			if (k != KEY_NONE)
				break;
		}
		if (k == KEY_QUIT)
			return false;
		break;
	case KEY_DOWN:
		t->scroll = t->scroll < last ? t->scroll + 1 : last;
		break;
	case KEY_UP:
		t->scroll = t->scroll ? t->scroll - 1 : 0;
		break;
	case KEY_PGDN:
	case ' ':
		t->scroll = t->scroll + page < last ? t->scroll + page : last;
		break;
	case KEY_PGUP:
		t->scroll = t->scroll > page ? t->scroll - page : 0;
		break;
	case KEY_HOME:
		t->scroll = 0;
		break;
	case KEY_END:
		t->scroll = last;
		break;
	}
	return true;
}

/* ------------------------------------------------------------ CSV, log */

/* A CSV field: escaped for a terminal, quoted if it holds , or ". */
static void csv_field(FILE *f, const char *s)
{
	char e[4 * 128 + 1];
	const char *p;

	esc(s, e, sizeof(e));
	if (!strpbrk(e, ",\"")) {
		fputs(e, f);
		return;
	}
	fputc('"', f);
	for (p = e; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p, f);
	}
	fputc('"', f);
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

		fprintf(t->csv, "%lld.%03ld,", (long long)ts.tv_sec,
			ts.tv_nsec / 1000000);
		if (t->view != VIEW_HOST) {
			fprintf(t->csv, "%d,%d,", r->pid, r->fd);
			csv_field(t->csv, r->name);
		} else {
			fputs(",,", t->csv);
		}
		fputc(',', t->csv);
		if (r->vcpu >= 0)
			fprintf(t->csv, "%d", r->vcpu);
		fprintf(t->csv, ",%s,%llu,%.3f,%s,", r->stat,
			(unsigned long long)r->total, r->rate,
			t->view == VIEW_HOST ? "" :
			r->exited	     ? "exited" :
					       "running");
		if (r->cpu >= 0)
			fprintf(t->csv, "%.4f,%.4f\n", r->cpu, r->wait);
		else
			fputs(",\n", t->csv);
	}
	fflush(t->csv);
}

/* The log's file (-L, appended to), or standard output; 0 or -errno. */
static int log_open(struct log *lg)
{
	if (!lg->path) {
		lg->f = stdout;
		return 0;
	}
	lg->f = fopen(lg->path, "ae");
	if (!lg->f)
		return -errno;
	setvbuf(lg->f, NULL, _IOLBF, 0);
	return 0;
}

static size_t log_width(const char *name)
{
	size_t n = strlen(name);

	return n > 10 ? n : 10;
}

/*
 * The banner: the names of the statistics.  Every 20 records in the
 * plain format (as vmstat and kvm_stat do), once in CSV, and in a CSV
 * file only when the file is empty, so that appending keeps it one table.
 */
static void log_banner(struct log *lg)
{
	size_t i;

	if (lg->csv && lg->path && ftell(lg->f) > 0)
		return;
	if (lg->csv) {
		fputs("time", lg->f);
		for (i = 0; i < lg->ncols; i++)
			fprintf(lg->f, ",%s", lg->cols[i]);
	} else {
		fprintf(lg->f, "%-19s", "time");
		for (i = 0; i < lg->ncols; i++)
			fprintf(lg->f, " %*s", (int)log_width(lg->cols[i]),
				lg->cols[i]);
	}
	fputc('\n', lg->f);
	lg->lines = 0;
}

/* The statistics logged: those of the first record with any, by name. */
static int log_columns(struct top *t)
{
	struct log *lg = &t->log;
	size_t i, j;

	if (lg->ncols || !t->nrows)
		return 0;
	lg->cols = calloc(t->nrows, sizeof(*lg->cols));
	lg->col_vcpu = calloc(t->nrows, sizeof(*lg->col_vcpu));
	if (!lg->cols || !lg->col_vcpu)
		return -ENOMEM;
	for (i = 0; i < t->nrows; i++) {
		const struct row *r = &t->rows[i];

		for (j = lg->ncols;
		     j > 0 && strcmp(lg->cols[j - 1], r->stat) > 0; j--) {
			lg->cols[j] = lg->cols[j - 1];
			lg->col_vcpu[j] = lg->col_vcpu[j - 1];
		}
		lg->cols[j] = strdup(r->stat);
		lg->col_vcpu[j] = r->vcpu_stat;
		if (!lg->cols[j])
			return -ENOMEM;
		lg->ncols++;
	}
	log_banner(lg);
	return 0;
}

/*
 * One record: the time, then for each statistic its change over the
 * interval summed over the VMs shown, as kvm_stat's log does; left out
 * with -z when every change is 0.
 */
static void log_record(struct top *t)
{
	struct log *lg = &t->log;
	int64_t *v;
	bool any = false;
	char when[32];
	time_t now = time(NULL);
	size_t i, j;

	if (log_columns(t) || !lg->ncols)
		return;
	v = calloc(lg->ncols, sizeof(*v));
	if (!v)
		return;
	for (i = 0; i < t->nrows; i++) {
		const struct row *r = &t->rows[i];

		for (j = 0; j < lg->ncols; j++) {
			if (lg->col_vcpu[j] == r->vcpu_stat &&
			    !strcmp(lg->cols[j], r->stat)) {
				v[j] += r->delta;
				any |= r->delta != 0;
				break;
			}
		}
	}
	if (!any && lg->skip_zero) {
		free(v);
		return;
	}
	if (!lg->csv && lg->lines && lg->lines % 20 == 0)
		log_banner(lg);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	fputs(when, lg->f);
	for (j = 0; j < lg->ncols; j++) {
		if (lg->csv)
			fprintf(lg->f, ",%lld", (long long)v[j]);
		else
			fprintf(lg->f, " %*lld", (int)log_width(lg->cols[j]),
				(long long)v[j]);
	}
	fputc('\n', lg->f);
	fflush(lg->f);
	lg->lines++;
	free(v);
}

/* ------------------------------------------------------------ -f help */

/* kvm_stat's -f help: the statistics top can show (the scalar ones). */
static int list_stats(const struct source *src, const char *sel)
{
	struct kvmstats_file *vmf, *vcf;
	bool tables;
	unsigned int i, k;
	int rc;

	rc = schema_files(src, "top", sel, true, true, &vmf, &vcf, &tables);
	if (rc)
		return rc;
	for (k = 0; k < 2; k++) {
		const struct kvmstats_file *f = k ? vcf : vmf;

		if (!f)
			continue;
		printf("%s%s statistics:\n", k && vmf ? "\n" : "",
		       k ? "vCPU" : "VM");
		for (i = 0; i < kvmstats_file_num_stats(f); i++) {
			const struct kvmstats_stat *s =
				kvmstats_file_stat(f, i);

			if (!kvmstats_is_hist(s))
				printf("  %s\n", s->name);
		}
	}
	kvmstats_file_free(vmf);
	kvmstats_file_free(vcf);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ main */

static void usage_top(FILE *f)
{
	fputs("Usage: kvmstats top [VM] [-d|-s SECONDS] [--per host|vm|vcpu]\n"
	      "                    [-s KEY] [-f REGEX|help] [-p PID[:FD]] [-g NAME]\n"
	      "                    [--batch|-1] [-n N] [-l|-L FILE [-c|--csv] [-z]]\n"
	      "                    [--report-csv FILE]\n"
	      "Live totals and rates per second of the scalar statistics, summed over\n"
	      "every VM of the host (or VM: PID, PID:FD, QEMU guest name or UUID), per\n"
	      "VM or per vCPU.  New VMs appear as they start; VMs whose process exited\n"
	      "stay, marked (exited).  Per VM and per vCPU, CPU% and WAIT% are the time\n"
	      "the host threads of the row's vCPU (or VM) ran, and waited runnable for\n"
	      "a CPU (the guest's steal), in % of one CPU.\n"
	      "  -d, -s, --interval SECONDS  time between samples (default 1, 0.1 .. 3600)\n"
	      "  --per host|vm|vcpu      every VM summed (host, default), per VM, per vCPU\n"
	      "  -s, --sort KEY          rate (default), total, name, or the vCPU threads'\n"
	      "                          wait or cpu (the CPU% and WAIT% columns)\n"
	      "  -f REGEX                only statistics whose name matches; help: list them\n"
	      "  -p, --pid PID[:FD]      only the VMs of that process (or that VM)\n"
	      "  -g, --guest NAME        only the VMs with that QEMU guest name\n"
	      "  -1, --once, --batch     one plain text report after one interval, as\n"
	      "                          kvm_stat's; with -n N, N reports\n"
	      "  -n N                    stop after N reports (or screens); reports\n"
	      "                          go on until stopped when the output is not a\n"
	      "                          terminal\n"
	      "  -l, --log               a line per interval, like vmstat: the change of\n"
	      "                          each statistic, summed over the VMs shown\n"
	      "  -L, --log-to-file FILE  the same, appended to FILE (SIGHUP reopens it)\n"
	      "  -c, --csv               the log as CSV (with -l or -L)\n"
	      "  -z, --skip-zero-records leave out log lines where nothing changed\n"
	      "  --report-csv FILE       also write every report's rows to FILE as CSV\n"
	      "Keys: h help, q quit, f filter, p pid, g guest, c clear, x view, o sort,\n"
	      "r reset, s interval, + and -, arrows, PgUp, PgDn, Home, End scroll.\n",
	      f);
}

/* The status for a failed refresh, said. */
static int refresh_error(const struct source *src, int err)
{
	if (err == -ENOENT || err == -ENOTDIR)
		return source_list_error(src, err);
	errmsg("top: %s", kvmstats_strerror(err));
	return exit_for(err);
}

enum {
	OPT_CSV = 256,
	OPT_REPORT_CSV,
	OPT_PER,
};

/*
 * The forms whose meaning changed to kvm_stat's (issue 28), refused with
 * what to type instead.  Returns EXIT_USAGE.
 */
static int old_form(const char *what)
{
	if (!strcmp(what, "-b"))
		errmsg("top: -b is gone: --batch (or -1) is kvm_stat's, one report; -n N makes it N, and reports go on until stopped when the output is not a terminal");
	else if (!strcmp(what, "--csv=FILE"))
		errmsg("top: --csv takes no FILE: as kvm_stat's, it is a switch that writes the log of -l or -L as CSV (-L FILE --csv); --report-csv FILE writes every report's rows");
	else
		errmsg("top: %s is kvm_stat's switch for the log of -l or -L (-l --csv, -L FILE --csv); --report-csv FILE writes every report's rows as CSV",
		       what);
	return EXIT_USAGE;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interval", required_argument, NULL, 'd' },
		{ "set-delay", required_argument, NULL, 'd' },
		{ "per", required_argument, NULL, OPT_PER },
		{ "sort", required_argument, NULL, 'S' },
		{ "filter", required_argument, NULL, 'f' },
		{ "fields", required_argument, NULL, 'f' },
		{ "pid", required_argument, NULL, 'p' },
		{ "guest", required_argument, NULL, 'g' },
		{ "batch", no_argument, NULL, '1' },
		{ "once", no_argument, NULL, '1' },
		{ "log", no_argument, NULL, 'l' },
		{ "log-to-file", required_argument, NULL, 'L' },
		{ "skip-zero-records", no_argument, NULL, 'z' },
		{ "csv", optional_argument, NULL, OPT_CSV },
		{ "report-csv", required_argument, NULL, OPT_REPORT_CSV },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct top t = { .interval = 1.0 };
	const char *csv = NULL, *sel = NULL, *after_csv = NULL,
		   *csv_flag = NULL;
	bool batch = false, fields_help = false, sel_guest = false;
	long count = -1, done = 0, reports = -1;
	struct sigaction sa = { .sa_handler = on_signal };
	struct source src;
	char *end;
	int c, err, nsel = 0, rc = EXIT_OK;

	/*
	 * The word after --csv: a FILE, as --csv took one before it became
	 * kvm_stat's switch, when no VM is called so (said below).
	 */
	for (c = 1; c + 1 < argc; c++)
		if (!strcmp(argv[c], "--csv") && argv[c + 1][0] != '-')
			after_csv = argv[c + 1];
	while ((c = getopt_long(argc, argv, ":d:s:f:p:g:b1n:lL:czh", opts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			/* kvm_stat's -s is the interval; a word sorts. */
			if (strspn(optarg, "0123456789.") != strlen(optarg))
				goto sort;
			/* fall through */
		case 'd':
			if (!parse_interval(optarg, &t.interval)) {
				errmsg("top: bad interval '%s' (0.1 .. 3600 seconds)",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_PER:
			if (!strcmp(optarg, "host")) {
				t.view = VIEW_HOST;
			} else if (!strcmp(optarg, "vm")) {
				t.view = VIEW_VM;
			} else if (!strcmp(optarg, "vcpu")) {
				t.view = VIEW_VCPU;
			} else {
				errmsg("top: --per wants host, vm or vcpu, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'S':
sort:
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
			if (t.filter)
				regfree(t.filter);
			t.filter = NULL;
			if (!strcmp(optarg, "help")) {
				fields_help = true;
				break;
			}
			fields_help = false;
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
		case 'p':
			if (make_selection(&t.sel, optarg, SEL_PID)) {
				errmsg("top: -p wants a pid or PID:FD, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			nsel++;
			break;
		case 'g':
			make_selection(&t.sel, optarg, SEL_GUEST);
			sel_guest = true;
			nsel++;
			break;
		case 'b':
			return old_form("-b");
		case '1':
			batch = true;
			count = 1;
			break;
		case 'n':
			reports = strtol(optarg, &end, 10);
			if (end == optarg || *end || reports < 1) {
				errmsg("top: -n wants a positive count, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'l':
			t.log.on = true;
			break;
		case 'L':
			t.log.on = true;
			t.log.path = optarg;
			break;
		case 'c':
			t.log.csv = true;
			csv_flag = csv_flag ? csv_flag : "-c";
			break;
		case 'z':
			t.log.skip_zero = true;
			break;
		case OPT_CSV:
			if (optarg)
				return old_form("--csv=FILE");
			t.log.csv = true;
			csv_flag = "--csv";
			break;
		case OPT_REPORT_CSV:
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
	if (optind < argc) {
		sel = argv[optind];
		make_selection(&t.sel, sel, SEL_VM);
		nsel++;
	}
	if (nsel > 1) {
		errmsg("top: one VM selection at a time (VM, -p or -g)");
		return EXIT_USAGE;
	}
	if (reports > 0)
		count = reports; /* -n N, whether or not --batch says 1 */
	if (t.log.csv && !t.log.on)
		return old_form(csv_flag);
	if (t.log.skip_zero && !t.log.on) {
		errmsg("top: -z needs -l or -L");
		return EXIT_USAGE;
	}
	if (t.log.on) {
		batch = true;	    /* the log is the output */
		t.view = VIEW_HOST; /* a column per statistic, summed */
	}
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		batch = true; /* no terminal to draw on: plain reports */
	/* A report or a screen is one write (each ends in fflush()). */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);

	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	source_init(&src);
	if (fields_help) {
		rc = list_stats(&src,
				t.sel.kind == SEL_ALL ? NULL : t.sel.text);
		source_fini(&src);
		return rc;
	}
	if (csv) {
		t.csv = fopen(csv, "we");
		if (!t.csv) {
			errmsg("top: --report-csv %s: %s", csv,
			       strerror(errno));
			source_fini(&src);
			return EXIT_FAIL;
		}
		fputs("time,pid,fd,name,vcpu,stat,total,rate,state,cpu,wait\n",
		      t.csv);
	}
	err = host_init(&t.host, &src);
	if (!err)
		err = host_refresh(&t.host);
	/* A first sample, so that the first report has rates. */
	if (!err)
		err = host_sample(&t.host);
	if (err) {
		rc = refresh_error(&src, err);
		goto out;
	}
	if (t.sel.kind != SEL_ALL && !count_selected(&t, &t.sel)) {
		if (sel_guest)
			errmsg("top: no VM has the guest name '%s' (see kvmstats list)",
			       t.sel.text);
		else if (sel && sel == after_csv)
			errmsg("top: no VM matches '%s' (see kvmstats list); --csv takes no FILE: as kvm_stat's, it writes the log as CSV (-L FILE --csv), and --report-csv FILE writes every report's rows",
			       t.sel.text);
		else
			errmsg("no VM matches '%s' (see kvmstats list)",
			       t.sel.text);
		rc = EXIT_NOVM;
		goto out;
	}
	if (t.filter) {
		long n = scalars_matching(&t, t.filter);

		if (n < 0)
			n = table_scalars_matching(&src, t.filter);
		if (n == 0) {
			rc = no_match("top", "", t.filter_text);
			goto out;
		}
	}
	if (t.log.on) {
		err = log_open(&t.log);
		if (err) {
			errmsg("top: -L %s: %s", t.log.path, strerror(-err));
			rc = EXIT_FAIL;
			goto out;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (t.log.path) {
		/* logrotate's way: SIGHUP reopens the log. */
		struct sigaction ha = { .sa_handler = on_hup_log };

		sigaction(SIGHUP, &ha, NULL);
	} else {
		sigaction(SIGHUP, &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
	if (!batch) {
		struct sigaction wa = { .sa_handler = on_winch };

		sigaction(SIGWINCH, &wa,
			  NULL); /* no SA_RESTART: poll() returns */
		tty_setup();
		/* Messages would spoil the screen: said when it is gone. */
		t.host.queue_msgs = tty_raw;
		build_rows(&t);
		draw(&t, NULL, NULL);
	}

	while (!stop_sig && (count < 0 || done < count)) {
		double next = now_mono() + t.interval;
		bool quit = false;

		/* Wait out the interval; keys redraw at once. */
		for (;;) {
			double left = next - now_mono();
			struct pollfd p = { .fd = STDIN_FILENO,
					    .events = POLLIN };
			int r, k;

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
				draw(&t, NULL, NULL);
			}
			if (r <= 0)
				continue;
			k = read_key();
			if (k == KEY_NONE)
				continue;
			if (!key(&t, k)) {
				quit = true;
				break;
			}
			build_rows(&t);
			draw(&t, NULL, NULL);
		}
		if (quit || stop_sig)
			break;
		if (reopen && t.log.path) {
			reopen = 0;
			fclose(t.log.f);
			err = log_open(&t.log);
			if (err) {
				errmsg("top: -L %s: %s", t.log.path,
				       strerror(-err));
				rc = EXIT_FAIL;
				break;
			}
			if (t.log.ncols)
				log_banner(&t.log);
		}
		err = host_refresh(&t.host);
		if (!err)
			err = host_sample(&t.host);
		if (err) {
			tty_restore();
			host_flush_msgs(&t.host);
			rc = refresh_error(&src, err);
			break;
		}
		build_rows(&t);
		write_csv(&t);
		if (t.log.on)
			log_record(&t);
		else if (batch)
			print_batch(&t);
		else
			draw(&t, NULL, NULL);
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
		errmsg("top: --report-csv %s: %s", csv, strerror(errno));
		rc = rc ? rc : EXIT_FAIL;
	}
	if (t.log.f && t.log.f != stdout && fclose(t.log.f)) {
		errmsg("top: -L %s: %s", t.log.path, strerror(errno));
		rc = rc ? rc : EXIT_FAIL;
	}
	host_fini(&t.host);
	source_fini(&src);
	free(t.rows);
	free(t.order);
	free(t.labels);
	while (t.log.ncols)
		free(t.log.cols[--t.log.ncols]);
	free(t.log.cols);
	free(t.log.col_vcpu);
	if (t.filter)
		regfree(t.filter);
	if (stop_sig == SIGINT || stop_sig == SIGTERM || stop_sig == SIGHUP)
		return rc ? rc : (batch && count > 0 ? EXIT_INTR : EXIT_OK);
	return rc;
}
