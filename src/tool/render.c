// SPDX-License-Identifier: GPL-2.0-only
/*
 * Text, JSON and Prometheus rendering of KVM stats samples.
 *
 * JSON follows QMP's query-stats / query-stats-schemas: StatsResult
 * {provider, stats: [{name, value}]} with pid, fd and vcpu where QEMU has
 * qom-path; values are raw (unscaled) like QEMU's: a number, true/false for
 * boolean units, a list for histograms, bucket 0 first.
 *
 * Prometheus: kvm_<vm|vcpu>_<name> with the raw unit replaced by the base
 * unit (_ns -> _seconds), _total on counters, histograms as cumulative
 * buckets.  A KVM bucket holds the integer raw values lo .. hi-1, so its
 * inclusive Prometheus bound is le = hi - 1 (converted to the base unit):
 * exact, where le = hi would claim values equal to hi that the bucket does
 * not hold.  _count is the sum of the buckets (exact); _sum only where KVM
 * keeps the exact sum in a sibling counter (hist_sums[] below).  Labels:
 * what names the VM across restarts (by default its QEMU guest name, with
 * KubeVirt's namespace, and UUID; prom_cache_set_vm_labels()), vm="PID:FD"
 * where those do not tell it from every other VM, vcpu; kvm_vm_info
 * carries the rest (pid, fd, owner, command name, KVM's id string).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

bool name_matches(const regex_t *filter, const char *name)
{
	return !filter || regexec(filter, name, 0, NULL, 0) == 0;
}

static const char *pow10_prefix(int e)
{
	switch (e) {
	case 0:
		return "";
	case -3:
		return "m";
	case -6:
		return "u";
	case -9:
		return "n";
	case -12:
		return "p";
	case 3:
		return "k";
	case 6:
		return "M";
	case 9:
		return "G";
	}
	return NULL;
}

static const char *pow2_prefix(int e)
{
	switch (e) {
	case 0:
		return "";
	case 10:
		return "Ki";
	case 20:
		return "Mi";
	case 30:
		return "Gi";
	case 40:
		return "Ti";
	}
	return NULL;
}

void raw_unit(const struct kvmstats_stat *s, char *buf, size_t len)
{
	const char *sym, *p;

	switch (s->unit) {
	case KVMSTATS_UNIT_SECONDS:
		sym = "s";
		break;
	case KVMSTATS_UNIT_BYTES:
		sym = "B";
		break;
	case KVMSTATS_UNIT_CYCLES:
		sym = "cycles";
		break;
	default:
		sym = "";
		break;
	}
	p = s->base == KVMSTATS_BASE_POW2 ? pow2_prefix(s->exponent) :
					    pow10_prefix(s->exponent);
	if (!p)
		snprintf(buf, len, "x%d^%d%s%s",
			 s->base == KVMSTATS_BASE_POW2 ? 2 : 10, s->exponent,
			 *sym ? " " : "", sym);
	else
		snprintf(buf, len, "%s%s", p, sym);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

void prom_name(const struct kvmstats_stat *s, bool vcpu, char *buf, size_t len)
{
	char base[128];
	const char *unit = NULL;
	size_t n, i;

	snprintf(base, sizeof(base), "%s", s->name);
	for (i = 0; base[i]; i++) {
		char c = base[i];

		/* snake_case: Prometheus's lint rejects camelCase */
		if (c >= 'A' && c <= 'Z')
			base[i] = (char)(c - 'A' + 'a');
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			   c == '_'))
			base[i] = '_';
	}
	n = strlen(base);
	/* Drop a raw-unit suffix: the base unit is appended below. */
	switch (s->unit) {
	case KVMSTATS_UNIT_SECONDS:
		unit = "_seconds";
		if (ends_with(base, "_ns") || ends_with(base, "_us") ||
		    ends_with(base, "_ms"))
			base[n - 3] = '\0';
		else if (ends_with(base, "_seconds"))
			base[n - 8] = '\0';
		break;
	case KVMSTATS_UNIT_BYTES:
		unit = "_bytes";
		if (ends_with(base, "_bytes"))
			base[n - 6] = '\0';
		break;
	case KVMSTATS_UNIT_CYCLES:
		unit = "_cycles";
		if (ends_with(base, "_cycles"))
			base[n - 7] = '\0';
		break;
	default:
		break;
	}
	snprintf(buf, len, "kvm_%s_%s%s%s", vcpu ? "vcpu" : "vm", base,
		 unit ? unit : "",
		 s->type == KVMSTATS_CUMULATIVE ? "_total" : "");
}

/* Bound of a bucket as text in the raw unit ("inf" for the open end). */
static void bound_str(double v, char *buf, size_t len)
{
	if (isinf(v))
		snprintf(buf, len, "inf");
	else
		snprintf(buf, len, "%.0f", v);
}

/* @ns as exact decimal seconds: 1500 -> "0.0000015", 2e9 -> "2". */
static size_t ns_seconds(uint64_t ns, char *out, size_t len)
{
	unsigned long long sec = ns / 1000000000u, frac = ns % 1000000000u;
	int n, digits = 9;

	if (!frac)
		return (size_t)snprintf(out, len, "%llu", sec);
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	n = snprintf(out, len, "%llu.%0*llu", sec, digits, frac);
	return n < 0 ? 0 : (size_t)n;
}

/*
 * show's line for a vCPU's thread: "thread  TID (COMM): cpu S s, wait S s,
 * N timeslices, last CPU C", or why they are not known.
 */
static void text_thread(FILE *out, const struct obj_thread *t)
{
	char comm[4 * 64], cpu[32], wait[32];

	fprintf(out, "  %-32s ", THREAD_PSEUDO_STAT);
	if (!t->tid) {
		fprintf(out, "- (%s)\n", t->why ? t->why : "none");
		return;
	}
	fprintf(out, "%d", t->tid);
	if (t->comm && t->comm[0])
		fprintf(out, " (%s)", esc(t->comm, comm, sizeof(comm)));
	if (!t->has_sched) {
		fprintf(out, ": %s\n", t->why ? t->why : "figures not known");
		return;
	}
	ns_seconds(t->cpu_ns, cpu, sizeof(cpu));
	ns_seconds(t->wait_ns, wait, sizeof(wait));
	fprintf(out, ": cpu %s s, wait %s s, %llu timeslices", cpu, wait,
		(unsigned long long)t->timeslices);
	if (t->last_cpu >= 0)
		fprintf(out, ", last CPU %d", t->last_cpu);
	fputc('\n', out);
}

void text_stats(FILE *out, const struct obj *o, const regex_t *filter)
{
	unsigned int i, b, nr = kvmstats_file_num_stats(o->file);

	if (o->thread && name_matches(filter, THREAD_PSEUDO_STAT))
		text_thread(out, o->thread);

	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);
		char unit[32];

		if (!name_matches(filter, s->name))
			continue;
		raw_unit(s, unit, sizeof(unit));
		if (s->unit == KVMSTATS_UNIT_BOOLEAN && !kvmstats_is_hist(s)) {
			fprintf(out, "  %-32s %s\n", s->name,
				kvmstats_value(s, o->data, 0) ? "yes" : "no");
			continue;
		}
		if (!kvmstats_is_hist(s)) {
			fprintf(out, "  %-32s %llu%s%s\n", s->name,
				(unsigned long long)kvmstats_value(s, o->data,
								   0),
				*unit ? " " : "", unit);
			continue;
		}
		{
			unsigned long long total = 0;

			for (b = 0; b < s->size; b++)
				total += kvmstats_value(s, o->data, b);
			fprintf(out,
				"  %-32s %s, %u buckets, %llu samples%s%s\n",
				s->name, kvmstats_type_name(s->type), s->size,
				total, *unit ? ", bounds in " : "", unit);
		}
		for (b = 0; b < s->size; b++) {
			uint64_t v = kvmstats_value(s, o->data, b);
			char lo[32], hi[32];
			double l, h;

			if (!v)
				continue;
			kvmstats_bucket_bounds(s, b, &l, &h);
			bound_str(l, lo, sizeof(lo));
			bound_str(h, hi, sizeof(hi));
			fprintf(out, "    [%u] [%s, %s) %llu\n", b, lo, hi,
				(unsigned long long)v);
		}
	}
}

void skip_reason(const struct kvmstats_file *f, const struct kvmstats_stat *s,
		 int pid, int fd, char *buf, size_t len)
{
	char why[160];

	if (s->flags & ~0xfffu)
		snprintf(why, sizeof(why), "flag bits %#x unknown",
			 s->flags & ~0xfffu);
	else if (s->type > KVMSTATS_LOG_HIST)
		snprintf(why, sizeof(why), "type %u unknown",
			 (unsigned int)s->type);
	else if (s->unit > KVMSTATS_UNIT_BOOLEAN)
		snprintf(why, sizeof(why), "unit %u unknown",
			 (unsigned int)s->unit);
	else if (s->base > KVMSTATS_BASE_POW2)
		snprintf(why, sizeof(why), "base %u unknown",
			 (unsigned int)s->base);
	else
		snprintf(
			why, sizeof(why),
			"%s, unit %s, exponent %d, size %u and bucket size %u do not go together",
			kvmstats_type_name(s->type),
			kvmstats_unit_name(s->unit) ?
				kvmstats_unit_name(s->unit) :
				"none",
			s->exponent, s->size, s->bucket_size);
	snprintf(
		buf, len,
		"%s statistic %s of VM %d:%d skipped, not understood by this kvmstats: %s (descriptor flags %#x)",
		kvmstats_file_is_vcpu(f) ? "vCPU" : "VM", s->name, pid, fd, why,
		s->flags);
}

void text_schema(FILE *out, const struct kvmstats_file *f,
		 const regex_t *filter)
{
	unsigned int i, nr = kvmstats_file_num_stats(f);

	fprintf(out, "  %-32s %-16s %-8s %4s %4s %5s %6s %6s\n", "NAME", "TYPE",
		"UNIT", "BASE", "EXP", "SIZE", "BUCKET", "OFFSET");
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f, i);
		const char *u = kvmstats_unit_name(s->unit);

		if (!name_matches(filter, s->name))
			continue;
		fprintf(out, "  %-32s %-16s %-8s %4d %4d %5u %6u %6u\n",
			s->name, kvmstats_type_name(s->type), u ? u : "none",
			s->base == KVMSTATS_BASE_POW2 ? 2 : 10, s->exponent,
			s->size, s->bucket_size, s->offset);
	}
}

void json_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', out);
	while (*p) {
		size_t n = utf8_seq_len(p);

		if (n == 0) {
			fputs("\\ufffd", out); /* not UTF-8: U+FFFD */
			p++;
		} else if (n > 1 && !hidden_char(utf8_code_point(p, n))) {
			fwrite(p, 1, n, out);
			p += n;
		} else if (n > 1) {
			/* Allowed raw in JSON, not in a terminal: see escape.c. */
			fprintf(out, "\\u%04x",
				(unsigned int)utf8_code_point(p, n));
			p += n;
		} else if (*p == '"' || *p == '\\') {
			fprintf(out, "\\%c", *p++);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(out, "\\u%04x", *p++);
		} else {
			fputc(*p++, out);
		}
	}
	fputc('"', out);
}

/*
 * ", \"thread\": {...}": tid (null when none), comm, and cpu-seconds,
 * wait-seconds (exact decimals), timeslices and last-cpu, or the state
 * that says why they are not known.
 */
static void json_thread(FILE *out, const struct obj_thread *t)
{
	char cpu[32], wait[32];

	fputs(", \"thread\": {\"tid\": ", out);
	if (t->tid)
		fprintf(out, "%d", t->tid);
	else
		fputs("null", out);
	if (t->tid && t->comm) {
		fputs(", \"comm\": ", out);
		json_string(out, t->comm);
	}
	if (t->has_sched) {
		ns_seconds(t->cpu_ns, cpu, sizeof(cpu));
		ns_seconds(t->wait_ns, wait, sizeof(wait));
		fprintf(out,
			", \"cpu-seconds\": %s, \"wait-seconds\": %s, \"timeslices\": %llu",
			cpu, wait, (unsigned long long)t->timeslices);
		if (t->last_cpu >= 0)
			fprintf(out, ", \"last-cpu\": %d", t->last_cpu);
	} else {
		fputs(", \"state\": ", out);
		json_string(out, t->state ? t->state : "error");
	}
	fputc('}', out);
}

void json_result(FILE *out, const struct obj *o, const regex_t *filter,
		 bool first)
{
	unsigned int i, b, nr = kvmstats_file_num_stats(o->file);
	bool none = true;

	fprintf(out, "%s\n  {\"provider\": \"kvm\", \"target\": \"%s\", ",
		first ? "" : ",", o->vcpu >= 0 ? "vcpu" : "vm");
	fprintf(out, "\"pid\": %d, \"fd\": %d, ", o->pid, o->fd);
	if (o->vcpu >= 0)
		fprintf(out, "\"vcpu\": %d, ", o->vcpu);
	fputs("\"id\": ", out);
	json_string(out, kvmstats_file_id(o->file));
	/* What `list --json` says of the VM, so that no join is needed. */
	if (o->name) {
		fputs(", \"name\": ", out);
		json_string(out, o->name);
	}
	if (o->comm) {
		fputs(", \"comm\": ", out);
		json_string(out, o->comm);
	}
	if (o->uuid) {
		fputs(", \"uuid\": ", out);
		json_string(out, o->uuid);
	}
	if (o->thread && name_matches(filter, THREAD_PSEUDO_STAT))
		json_thread(out, o->thread);
	fputs(", \"stats\": [", out);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);

		if (!name_matches(filter, s->name))
			continue;
		fprintf(out, "%s\n    {\"name\": ", none ? "" : ",");
		none = false;
		json_string(out, s->name);
		fputs(", \"value\": ", out);
		if (kvmstats_is_hist(s)) {
			fputc('[', out);
			for (b = 0; b < s->size; b++)
				fprintf(out, "%s%llu", b ? ", " : "",
					(unsigned long long)kvmstats_value(
						s, o->data, b));
			fputc(']', out);
		} else if (s->unit == KVMSTATS_UNIT_BOOLEAN) {
			fputs(kvmstats_value(s, o->data, 0) ? "true" : "false",
			      out);
		} else {
			fprintf(out, "%llu",
				(unsigned long long)kvmstats_value(s, o->data,
								   0));
		}
		fputc('}', out);
	}
	fprintf(out, "%s]}", none ? "" : "\n  ");
}

void json_results(FILE *out, const struct obj *objs, size_t n,
		  const regex_t *filter)
{
	size_t k;

	fputs("[", out);
	for (k = 0; k < n; k++)
		json_result(out, &objs[k], filter, k == 0);
	fputs(n ? "\n]\n" : "]\n", out);
}

static void json_schema_one(FILE *out, const char *target,
			    const struct kvmstats_file *f,
			    const regex_t *filter)
{
	unsigned int i, nr = kvmstats_file_num_stats(f);
	bool first = true;

	fprintf(out,
		"\n  {\"provider\": \"kvm\", \"target\": \"%s\", \"stats\": [",
		target);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f, i);
		const char *u = kvmstats_unit_name(s->unit);

		if (!name_matches(filter, s->name))
			continue;
		fprintf(out, "%s\n    {\"name\": ", first ? "" : ",");
		first = false;
		json_string(out, s->name);
		fprintf(out, ", \"type\": \"%s\"", kvmstats_type_name(s->type));
		if (u)
			fprintf(out, ", \"unit\": \"%s\"", u);
		if (s->exponent)
			fprintf(out, ", \"base\": %d",
				s->base == KVMSTATS_BASE_POW2 ? 2 : 10);
		fprintf(out, ", \"exponent\": %d", s->exponent);
		if (s->type == KVMSTATS_LINEAR_HIST)
			fprintf(out, ", \"bucket-size\": %u", s->bucket_size);
		fputc('}', out);
	}
	fprintf(out, "%s]}", first ? "" : "\n  ");
}

void json_schemas(FILE *out, const struct kvmstats_file *vm,
		  const struct kvmstats_file *vcpu, const regex_t *filter)
{
	fputs("[", out);
	if (vm)
		json_schema_one(out, "vm", vm, filter);
	if (vm && vcpu)
		fputc(',', out);
	if (vcpu)
		json_schema_one(out, "vcpu", vcpu, filter);
	fputs(vm || vcpu ? "\n]\n" : "]\n", out);
}

/*
 * The exposition is rendered from a plan: the families in output order,
 * each with its HELP/TYPE lines, names, histogram `le` label texts and the
 * (object, descriptor) pairs it has lines for, per object its label text,
 * and the kvm_vm_info family whole.  None of that changes for an fd, so a
 * struct prom_cache keeps the plan between scrapes and only the values are
 * formatted each time, into a buffer the cache also keeps.  The plan is
 * rebuilt when the objects change (other files, or prom_cache_reset()).
 *
 * The plan also keeps the output valid, for `promtool check metrics`
 * too, whatever the descriptors say:
 *   - two statistics whose names sanitise to the same metric name (or
 *     whose series names meet): the first keeps the name, the other is
 *     left out and counted;
 *   - a name Prometheus's lint rules reject (an abbreviated unit such as
 *     _ms, a type word such as _gauge, _count on a gauge, ...; see
 *     prom_name_rejected()) is left out and counted;
 *   - a histogram whose upper bounds round to the same `le` text, or
 *     overflow a double (a log2 histogram of more than 1024 buckets):
 *     only the last bucket of each run of equal bounds gets a line, and
 *     buckets without a finite bound fold into +Inf; the counts stay
 *     cumulative, so nothing is lost;
 *   - label values and HELP text are valid UTF-8 (an invalid byte becomes
 *     U+FFFD) with \, " and newline escaped.
 */
struct buf {
	char *p;
	size_t len, cap;
	bool failed;
};

static bool buf_room(struct buf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->len + more <= b->cap)
		return true;
	if (b->failed)
		return false;
	cap = b->cap ? b->cap : 65536;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void buf_add(struct buf *b, const void *s, size_t n)
{
	if (buf_room(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0 || !buf_room(b, (size_t)n + 1))
		return;
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

static void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

/* Decimal digits of @v at the end of @end; returns where they start. */
static char *u64_digits(uint64_t v, char *end)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

/* @v in decimal into @out (room for 21); returns the length. */
static size_t u64_str(uint64_t v, char *out)
{
	char tmp[24], *p = u64_digits(v, tmp + sizeof(tmp));
	size_t n = (size_t)(tmp + sizeof(tmp) - p);

	memcpy(out, p, n);
	return n;
}

/*
 * kvmstats_scale_str() of @raw into @out (room for 64), without printf in
 * the cases KVM has (exponent 0, negative powers of ten down to 10^-19,
 * positive powers of two); byte for byte the same text.
 */
static size_t scaled_str(const struct kvmstats_stat *s, uint64_t raw, char *out)
{
	static const uint64_t p10[20] = {
		1ull,
		10ull,
		100ull,
		1000ull,
		10000ull,
		100000ull,
		1000000ull,
		10000000ull,
		100000000ull,
		1000000000ull,
		10000000000ull,
		100000000000ull,
		1000000000000ull,
		10000000000000ull,
		100000000000000ull,
		1000000000000000ull,
		10000000000000000ull,
		100000000000000000ull,
		1000000000000000000ull,
		10000000000000000000ull,
	};
	int e = s->exponent;

	if (e == 0)
		return u64_str(raw, out);
	if (s->base == KVMSTATS_BASE_POW10 && e < 0 && e >= -19) {
		uint64_t q = raw / p10[-e], r = raw % p10[-e];
		size_t n = u64_str(q, out);
		int i;

		if (!r)
			return n;
		while (r % 10 == 0) {
			r /= 10;
			e++;
		}
		out[n++] = '.';
		for (i = -e - 1; i >= 0; i--) {
			out[n + (size_t)i] = (char)('0' + r % 10);
			r /= 10;
		}
		return n + (size_t)-e;
	}
	if (s->base == KVMSTATS_BASE_POW2 && e > 0 && e < 64 &&
	    raw <= (UINT64_MAX >> e))
		return u64_str(raw << e, out);
	{
		int n = kvmstats_scale_str(s, raw, out, 64);

		return n < 0 ? 0 : n > 63 ? 63 : (size_t)n;
	}
}

size_t utf8_seq_len(const unsigned char *p)
{
	unsigned char c = p[0];
	uint32_t cp;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) /* a NUL ends here too */
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0; /* overlong, beyond Unicode, or a surrogate */
	return n;
}

/*
 * @s as a label value (@label) or HELP text: valid UTF-8, invalid bytes as
 * U+FFFD; backslash and newline escaped, and in labels the double quote.
 */
/*
 * @s for a HELP line, or (@label) as a label value.  A label value is
 * what a VMM's owner chose (its command line, command name, a stats
 * directory's id string) and ends up in Grafana's legends and alert
 * texts: control characters (C0, DEL, C1) and the characters that reorder
 * or hide text (bidi overrides and isolates, zero-width ones) are left
 * out of it; bytes that are not UTF-8 become U+FFFD either way.
 */
static void prom_escape(struct buf *b, const char *s, bool label)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = utf8_seq_len(p);

		if (n == 0) {
			buf_add(b, "\xef\xbf\xbd", 3);
			p++;
		} else if (label &&
			   (n > 1 ? hidden_char(utf8_code_point(p, n)) :
				    *p < 0x20 || *p == 0x7f)) {
			p += n; /* stripped */
		} else if (n > 1) {
			buf_add(b, p, n);
			p += n;
		} else if (*p == '\\' || (label && *p == '"')) {
			char e[2] = { '\\', (char)*p++ };

			buf_add(b, e, 2);
		} else if (*p == '\n') {
			buf_add(b, "\\n", 2);
			p++;
		} else {
			buf_add(b, p++, 1);
		}
	}
}

/* The stat called @name in @file, trying index @hint first; its index or -1. */
static int stat_index(const struct kvmstats_file *file, const char *name,
		      unsigned int hint)
{
	const struct kvmstats_stat *s = kvmstats_file_stat(file, hint);
	int i;

	if (s && !strcmp(s->name, name))
		return (int)hint;
	i = kvmstats_file_find(file, name);
	return i < 0 ? -1 : i;
}

/*
 * The histograms whose sum KVM keeps exactly, in a counter of the same
 * vCPU.  kvm_vcpu_halt() and update_halt_poll_stats() in virt/kvm/
 * kvm_main.c (6.1 and 6.12) add the very same nanoseconds, in the same
 * place, to each counter and to its histogram:
 *     stats->halt_poll_success_ns += poll_ns;
 *     KVM_STATS_LOG_HIST_UPDATE(stats->halt_poll_success_hist, poll_ns);
 * (likewise _fail_, and halt_wait_ns/halt_wait_hist with cur - poll_end).
 * No other histogram has such a counter, so only these get a _sum.  The
 * two are read in one pread but not atomically: a scrape can see the sum
 * one observation ahead of the buckets.  One thing can part them: root
 * writing 0 to the counter's debugfs file (kvm_stat_data_clear) zeroes
 * the counter, and the same on the histogram's file zeroes only its
 * bucket 0; either is a counter reset Prometheus sees on that series.
 */
static const struct {
	const char *hist, *sum;
} hist_sums[] = {
	{ "halt_poll_success_hist", "halt_poll_success_ns" },
	{ "halt_poll_fail_hist", "halt_poll_fail_ns" },
	{ "halt_wait_hist", "halt_wait_ns" },
};

/* The index in @file of the exact sum of histogram @h, or -1. */
static int hist_sum_index(const struct kvmstats_file *file,
			  const struct kvmstats_stat *h)
{
	const struct kvmstats_stat *s;
	size_t i;
	int idx;

	if (h->type != KVMSTATS_LOG_HIST)
		return -1;
	for (i = 0; i < sizeof(hist_sums) / sizeof(hist_sums[0]); i++) {
		if (strcmp(h->name, hist_sums[i].hist))
			continue;
		idx = kvmstats_file_find(file, hist_sums[i].sum);
		s = kvmstats_file_stat(file, idx < 0 ? 0 : (unsigned int)idx);
		if (idx >= 0 && s->type == KVMSTATS_CUMULATIVE &&
		    s->unit == h->unit && s->base == h->base &&
		    s->exponent == h->exponent)
			return idx;
	}
	return -1;
}

/*
 * Would `promtool check metrics` reject family @name of Prometheus type
 * @ptype ("counter", "gauge", "histogram")?  Its lint rules, in our words:
 * no '_'-separated word that abbreviates a unit (ns, ms, s, kb, h, ...),
 * names a metric type, or is a unit that is not a base unit (minutes,
 * bits, kilobytes, ...); "_total" on counters only; "_count", "_sum" and
 * "_bucket" on histograms only.  prom_name() already writes snake_case.
 */
static bool prom_name_rejected(const char *name, const char *ptype)
{
	static const char *const bad_words[] = {
		"s",	  "ms",	       "us",	  "ns",		"sec",
		"b",	  "kb",	       "mb",	  "gb",		"tb",
		"pb",	  "m",	       "h",	  "d",		"counter",
		"gauge",  "histogram", "summary", "minutes",	"hours",
		"days",	  "weeks",     "kelvins", "fahrenheit", "rankine",
		"inches", "yards",     "miles",	  "bits",	"calories",
		"pounds", "ounces",
	};
	static const char *const prefixes[] = {
		"pico", "nano",	 "micro", "milli", "centi", "deci",
		"deca", "hecto", "kilo",  "kibi",  "mega",  "mibi",
		"giga", "gibi",	 "tera",  "tebi",  "peta",  "pebi",
	};
	static const char *const units[] = {
		"amperes", "bytes",  "celsius", "grams",   "joules",
		"kelvin",  "meters", "metres",	"seconds", "volts",
		"minutes", "hours",  "days",	"weeks",   "bits",
	};
	bool hist = !strcmp(ptype, "histogram");
	const char *w = name;
	size_t i, j;

	if (strcmp(ptype, "counter") ? ends_with(name, "_total") :
				       !ends_with(name, "_total"))
		return true;
	if (!hist && (ends_with(name, "_count") || ends_with(name, "_sum") ||
		      ends_with(name, "_bucket")))
		return true;
	while (*w) {
		size_t l = strcspn(w, "_");

		for (i = 0; i < sizeof(bad_words) / sizeof(bad_words[0]); i++)
			if (strlen(bad_words[i]) == l &&
			    !strncmp(w, bad_words[i], l))
				return true;
		for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			size_t pl = strlen(prefixes[i]);

			if (l <= pl || strncmp(w, prefixes[i], pl))
				continue;
			for (j = 0; j < sizeof(units) / sizeof(units[0]); j++)
				if (strlen(units[j]) == l - pl &&
				    !strncmp(w + pl, units[j], l - pl))
					return true;
		}
		w += l;
		w += *w == '_';
	}
	return false;
}

struct member {
	size_t obj;	   /* index into the objects */
	unsigned int stat; /* descriptor index in that object's file */
	int sum;	   /* histograms: the index of the exact sum, or -1 */
};

struct family {
	char *head;  /* "# HELP ...\n# TYPE ...\n" */
	char *name;  /* the family name, or NAME_bucket for histograms */
	char *count; /* histograms: NAME_count */
	char *sum;   /* histograms with an exact sum: NAME_sum, else NULL */
	size_t name_len, count_len, sum_len;
	char **le; /* histograms: ",le=\"X\"} " per bucket, NULL: folded */
	size_t *le_len;
	unsigned int nle;
	bool hist, boolean, summed;
	struct member *m;
	size_t nm;
};

struct objplan {
	const struct kvmstats_file *file;
	int pid, fd, vcpu;
	char *labels; /* "{name=\"..\",uuid=\"..\"[,vm=\"..\"][,vcpu=\"..\"]" */
	size_t labels_len;
};

/*
 * A VM of the objects (they come grouped by VM): objs[first .. end - 1];
 * the labels that name it (ident: text of the labels prom_cache's
 * vm_labels pick, as they are rendered), and whether they do not tell it
 * from every other VM of the objects (need_vm: none of them, or another
 * VM's are the same), so that its series also get vm="PID:FD".
 */
struct vmplan {
	size_t first, end;
	char *ident;
	bool need_vm;
};

/* A set of strings (a few hundred at most): linear search is enough. */
struct strset {
	char **s;
	size_t n, room;
};

/* Add @s (@kind as a one-character prefix); 1 if new, 0 if there, -1 ENOMEM. */
static int strset_add(struct strset *set, char kind, const char *s)
{
	size_t i, l = strlen(s);
	char *c;

	for (i = 0; i < set->n; i++)
		if (set->s[i][0] == kind && !strcmp(set->s[i] + 1, s))
			return 0;
	if (set->n == set->room) {
		size_t room = set->room ? 2 * set->room : 64;
		char **a = realloc(set->s, room * sizeof(*a));

		if (!a)
			return -1;
		set->s = a;
		set->room = room;
	}
	c = malloc(l + 2);
	if (!c)
		return -1;
	c[0] = kind;
	memcpy(c + 1, s, l + 1);
	set->s[set->n++] = c;
	return 1;
}

static bool strset_has(const struct strset *set, char kind, const char *s)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		if (set->s[i][0] == kind && !strcmp(set->s[i] + 1, s))
			return true;
	return false;
}

static void strset_free(struct strset *set)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		free(set->s[i]);
	free(set->s);
	memset(set, 0, sizeof(*set));
}

struct prom_cache {
	bool valid;
	const regex_t *filter;
	prom_keep_fn keep;
	void *keep_ctx;
	struct objplan *o;
	size_t no;
	struct family *f;
	size_t nf;
	char *info; /* the kvm_vm_info family, text and values */
	size_t info_len;
	struct prom_skipped skipped;
	struct buf out;
	unsigned int vm_labels; /* VML_* */
};

struct prom_cache *prom_cache_new(void)
{
	struct prom_cache *c = calloc(1, sizeof(struct prom_cache));

	if (c)
		c->vm_labels = VML_DEFAULT;
	return c;
}

void prom_cache_set_vm_labels(struct prom_cache *c, unsigned int labels)
{
	c->vm_labels = labels;
	c->valid = false;
}

static const struct {
	const char *name;
	unsigned int bit;
} vm_label_names[] = {
	{ "name", VML_NAME },
	{ "uuid", VML_UUID },
	{ "pid", VML_PID },
	{ "fd", VML_FD },
};

int vm_labels_parse(const char *list, unsigned int *out)
{
	const char *p = list;
	unsigned int bits = 0;

	while (*p) {
		size_t n = strcspn(p, ","), i;

		for (i = 0;
		     i < sizeof(vm_label_names) / sizeof(vm_label_names[0]);
		     i++)
			if (strlen(vm_label_names[i].name) == n &&
			    !strncmp(p, vm_label_names[i].name, n))
				break;
		if (i == sizeof(vm_label_names) / sizeof(vm_label_names[0]))
			return -EINVAL;
		bits |= vm_label_names[i].bit;
		p += n;
		if (*p == ',' && !*++p)
			return -EINVAL; /* a trailing comma */
	}
	if (!bits)
		return -EINVAL;
	*out = bits;
	return 0;
}

void prom_cache_set_keep(struct prom_cache *c, prom_keep_fn keep, void *ctx)
{
	c->keep = keep;
	c->keep_ctx = ctx;
	c->valid = false;
}

void prom_cache_reset(struct prom_cache *c)
{
	size_t i;
	unsigned int b;

	for (i = 0; i < c->nf; i++) {
		struct family *f = &c->f[i];

		free(f->head);
		free(f->name);
		free(f->count);
		free(f->sum);
		for (b = 0; b < f->nle; b++)
			free(f->le[b]);
		free(f->le);
		free(f->le_len);
		free(f->m);
	}
	free(c->f);
	for (i = 0; i < c->no; i++)
		free(c->o[i].labels);
	free(c->o);
	free(c->info);
	c->f = NULL;
	c->o = NULL;
	c->info = NULL;
	c->info_len = 0;
	c->nf = c->no = 0;
	memset(&c->skipped, 0, sizeof(c->skipped));
	c->valid = false;
}

void prom_cache_free(struct prom_cache *c)
{
	if (!c)
		return;
	prom_cache_reset(c);
	free(c->out.p);
	free(c);
}

static char *buf_take(struct buf *b, size_t *len)
{
	char *p;

	buf_add(b, "", 1);
	if (b->failed) {
		free(b->p);
		return NULL;
	}
	p = b->p;
	if (len)
		*len = b->len - 1;
	return p;
}

static bool obj_is_vcpu(const struct obj *o)
{
	return o->vcpu != -1; /* a vCPU, or every vCPU of a VM summed */
}

/*
 * The `le` texts of histogram @proto into @fam: the inclusive raw bound
 * hi - 1 of each bucket in the base unit, except buckets folded into a
 * later line (see the comment at the top).
 */
static bool plan_le(struct family *fam, const struct kvmstats_stat *proto)
{
	double next = INFINITY;
	unsigned int i;

	fam->le = calloc(proto->size, sizeof(*fam->le));
	fam->le_len = calloc(proto->size, sizeof(*fam->le_len));
	if (!fam->le || !fam->le_len)
		return false;
	fam->nle = proto->size;
	for (i = proto->size; i-- > 0;) {
		struct buf b = { 0 };
		char le[64];
		double lo, hi, v;

		kvmstats_bucket_bounds(proto, i, &lo, &hi);
		if (i == proto->size - 1) {
			snprintf(le, sizeof(le), "+Inf");
		} else {
			if (isinf(hi))
				continue; /* no finite bound: folds into +Inf */
			if (hi - 1 <= 9007199254740992.0)
				kvmstats_scale_str(proto, (uint64_t)hi - 1, le,
						   sizeof(le));
			else
				snprintf(le, sizeof(le), "%.17g",
					 kvmstats_scale(proto, hi - 1));
			v = strtod(le, NULL);
			if (!(v < next))
				continue; /* the same bound as a later line */
			next = v;
		}
		buf_printf(&b, ",le=\"%s\"} ", le);
		fam->le[i] = buf_take(&b, &fam->le_len[i]);
		if (!fam->le[i])
			return false;
	}
	return true;
}

/*
 * The family of @proto (desc @hint of objs[k]) over objs[k..n), unless a
 * name it needs is taken (*@taken) or Prometheus would reject its name
 * (*@bad).  Members whose descriptor differs from @proto are left out
 * (*@conflict).  False: out of memory.
 */
static bool plan_family(const struct prom_cache *c, struct family *fam,
			const struct kvmstats_stat *proto, unsigned int hint,
			const struct obj *objs, size_t k, size_t n,
			struct strset *names, bool *taken, bool *bad,
			bool *conflict)
{
	const struct obj *first = &objs[k];
	bool vcpu = obj_is_vcpu(first);
	const char *u = kvmstats_unit_name(proto->unit);
	const char *ptype, *how = "";
	char name[160], unit[32], series[200];
	struct buf b = { 0 };
	bool all_sums = true;
	size_t j;
	int i;

	memset(fam, 0, sizeof(*fam));
	*taken = *bad = *conflict = false;
	/* The family's kind of object (VM, vCPU or vCPU sum): its first kept. */
	for (j = k; c->keep && j < n; j++) {
		const struct obj *o = &objs[j];
		int idx;

		if (obj_is_vcpu(o) != vcpu)
			continue;
		idx = stat_index(o->file, proto->name, hint);
		if (idx >= 0 &&
		    c->keep(c->keep_ctx, o,
			    kvmstats_file_stat(o->file, (unsigned int)idx)))
			break;
	}
	if (c->keep && j == n)
		return true; /* no object has series of it: no family */
	first = &objs[j < n ? j : k];
	prom_name(proto, vcpu, name, sizeof(name));
	raw_unit(proto, unit, sizeof(unit));
	fam->hist = kvmstats_is_hist(proto);
	fam->boolean = proto->unit == KVMSTATS_UNIT_BOOLEAN;
	fam->summed = first->vcpu == OBJ_VCPUS;
	if (fam->hist)
		ptype = "histogram";
	else if (proto->type == KVMSTATS_CUMULATIVE)
		ptype = "counter";
	else
		ptype = "gauge";

	if (prom_name_rejected(name, ptype)) {
		*bad = true;
		return true;
	}
	/* The names the family's lines use: all free, or none taken. */
	{
		static const char *const hsuffix[] = { "", "_bucket", "_count",
						       "_sum" };

		for (i = 0; i < (fam->hist ? 4 : 1); i++) {
			snprintf(series, sizeof(series), "%s%s", name,
				 hsuffix[i]);
			if (strset_has(names, 'n', series)) {
				*taken = true;
				return true;
			}
		}
		for (i = 0; i < (fam->hist ? 4 : 1); i++) {
			snprintf(series, sizeof(series), "%s%s", name,
				 hsuffix[i]);
			if (strset_add(names, 'n', series) < 0)
				return false;
		}
	}

	fam->m = malloc((n - k) * sizeof(*fam->m));
	if (!fam->m)
		return false;
	for (j = k; j < n; j++) {
		const struct obj *o = &objs[j];
		const struct kvmstats_stat *s;
		int idx;

		if (obj_is_vcpu(o) != vcpu)
			continue;
		idx = stat_index(o->file, proto->name, hint);
		if (idx < 0)
			continue;
		s = kvmstats_file_stat(o->file, (unsigned int)idx);
		if (c->keep && !c->keep(c->keep_ctx, o, s))
			continue;
		if (s->type != proto->type || s->size != proto->size ||
		    s->flags != proto->flags ||
		    s->exponent != proto->exponent ||
		    s->bucket_size != proto->bucket_size) {
			*conflict = true;
			continue;
		}
		fam->m[fam->nm] = (struct member){ j, (unsigned int)idx, -1 };
		if (fam->hist) {
			fam->m[fam->nm].sum = hist_sum_index(o->file, s);
			all_sums = all_sums && fam->m[fam->nm].sum >= 0;
		}
		fam->nm++;
	}

	if (fam->summed)
		how = proto->type == KVMSTATS_PEAK ?
			      ", the highest of the VM's vCPUs" :
			      ", summed over the VM's vCPUs";
	buf_printf(&b, "# HELP %s KVM %s statistic ", name,
		   vcpu ? "vCPU" : "VM");
	prom_escape(&b, proto->name, false);
	buf_printf(&b, " (%s%s%s%s%s%s).\n", kvmstats_type_name(proto->type),
		   u ? ", " : "", u ? u : "",
		   *unit && strcmp(unit, "s") ? ", raw unit " : "",
		   *unit && strcmp(unit, "s") ? unit : "", how);
	buf_printf(&b, "# TYPE %s %s\n", name, ptype);
	fam->head = buf_take(&b, NULL);
	memset(&b, 0, sizeof(b));
	buf_printf(&b, "%s%s", name, fam->hist ? "_bucket" : "");
	fam->name = buf_take(&b, &fam->name_len);
	if (!fam->head || !fam->name)
		return false;
	if (!fam->hist)
		return true;
	memset(&b, 0, sizeof(b));
	buf_printf(&b, "%s_count", name);
	fam->count = buf_take(&b, &fam->count_len);
	if (!fam->count)
		return false;
	if (all_sums && fam->nm) {
		memset(&b, 0, sizeof(b));
		buf_printf(&b, "%s_sum", name);
		fam->sum = buf_take(&b, &fam->sum_len);
		if (!fam->sum)
			return false;
	}
	return plan_le(fam, proto);
}

/* Same descriptors (understood and skipped), in the same order? */
static bool same_layout(const struct kvmstats_file *a,
			const struct kvmstats_file *b)
{
	unsigned int i, nr = kvmstats_file_num_stats(a);

	if (a == b)
		return true;
	if (nr != kvmstats_file_num_stats(b) ||
	    kvmstats_file_num_skipped(a) != kvmstats_file_num_skipped(b))
		return false;
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *x = kvmstats_file_stat(a, i);
		const struct kvmstats_stat *y = kvmstats_file_stat(b, i);

		if (x->flags != y->flags || x->size != y->size ||
		    strcmp(x->name, y->name))
			return false;
	}
	for (i = 0; i < kvmstats_file_num_skipped(a); i++)
		if (strcmp(kvmstats_file_skipped(a, i)->name,
			   kvmstats_file_skipped(b, i)->name))
			return false;
	return true;
}

static bool plan_valid(const struct prom_cache *c, const struct obj *objs,
		       size_t n, const regex_t *filter)
{
	size_t k;

	if (!c->valid || c->no != n || c->filter != filter)
		return false;
	for (k = 0; k < n; k++)
		if (c->o[k].file != objs[k].file ||
		    c->o[k].pid != objs[k].pid || c->o[k].fd != objs[k].fd ||
		    c->o[k].vcpu != objs[k].vcpu)
			return false;
	return true;
}

/* ,KEY="VALUE" (the first without its comma), the value escaped. */
static void put_label(struct buf *b, const char *key, const char *value)
{
	buf_printf(b, "%s%s=\"", b->len ? "," : "", key);
	prom_escape(b, value, true);
	buf_add(b, "\"", 1);
}

/*
 * The labels that name @o's VM across restarts, as @labels (VML_*) picks
 * them, rendered, into @b: namespace and name, uuid, pid, fd.  Nothing for
 * a label the VM has no value for.
 */
static void ident_labels(struct buf *b, const struct obj *o,
			 unsigned int labels)
{
	char num[16];

	if ((labels & VML_NAME) && o->ns && o->ns[0])
		put_label(b, "namespace", o->ns);
	if ((labels & VML_NAME) && o->name && o->name[0])
		put_label(b, "name", o->name);
	if ((labels & VML_UUID) && o->uuid && o->uuid[0])
		put_label(b, "uuid", o->uuid);
	if (labels & VML_PID) {
		snprintf(num, sizeof(num), "%d", o->pid);
		put_label(b, "pid", num);
	}
	if (labels & VML_FD) {
		snprintf(num, sizeof(num), "%d", o->fd);
		put_label(b, "fd", num);
	}
}

static int vmplan_cmp(const void *a, const void *b)
{
	const struct vmplan *x = *(const struct vmplan *const *)a;
	const struct vmplan *y = *(const struct vmplan *const *)b;

	return strcmp(x->ident, y->ident);
}

static void vmplans_free(struct vmplan *vp, size_t nvp)
{
	size_t i;

	for (i = 0; i < nvp; i++)
		free(vp[i].ident);
	free(vp);
}

/*
 * The VMs of @objs (*@nvp of them, malloc()ed, NULL on failure), each
 * with its identity labels, and which need vm="PID:FD" besides: a VM
 * without any, or whose labels another VM of the scrape has too (two
 * VMMs that claim one guest name, or VMs of one VMM).  Every VM that
 * shares them gets it, not all but one: which of them is the guest the
 * name means is not the exporter's to guess (kvm_vm_info has their uid).
 */
static struct vmplan *plan_vms(const struct prom_cache *c,
			       const struct obj *objs, size_t n, size_t *nvp)
{
	struct vmplan *vp = calloc(n ? n : 1, sizeof(*vp)), **order = NULL;
	size_t k, j, nv = 0;

	*nvp = 0;
	if (!vp)
		return NULL;
	for (k = 0; k < n; k = j) {
		struct buf b = { 0 };

		for (j = k; j < n && objs[j].pid == objs[k].pid &&
			    objs[j].fd == objs[k].fd;
		     j++)
			;
		ident_labels(&b, &objs[k], c->vm_labels);
		vp[nv] = (struct vmplan){ .first = k, .end = j };
		vp[nv].ident = buf_take(&b, NULL);
		if (!vp[nv].ident) {
			vmplans_free(vp, nv);
			return NULL;
		}
		vp[nv].need_vm = !vp[nv].ident[0];
		nv++;
	}
	order = malloc((nv ? nv : 1) * sizeof(*order));
	if (!order) {
		vmplans_free(vp, nv);
		return NULL;
	}
	for (k = 0; k < nv; k++)
		order[k] = &vp[k];
	qsort(order, nv, sizeof(*order), vmplan_cmp);
	for (k = 0; k + 1 < nv; k++) {
		if (!strcmp(order[k]->ident, order[k + 1]->ident))
			order[k]->need_vm = order[k + 1]->need_vm = true;
	}
	free(order);
	*nvp = nv;
	return vp;
}

/*
 * The labels of objs[k] of VM @vm: {its identity labels, vm="PID:FD"
 * where they do not tell it apart, vcpu (vCPUs)}.
 */
static bool plan_labels(struct objplan *op, const struct obj *o,
			const struct vmplan *vm)
{
	struct buf b = { 0 };

	*op = (struct objplan){ o->file, o->pid, o->fd, o->vcpu, NULL, 0 };
	buf_add(&b, "{", 1);
	buf_str(&b, vm->ident);
	if (vm->need_vm)
		buf_printf(&b, "%svm=\"%d:%d\"", vm->ident[0] ? "," : "",
			   o->pid, o->fd);
	if (o->vcpu >= 0)
		buf_printf(&b, ",vcpu=\"%d\"", o->vcpu);
	op->labels = buf_take(&b, &op->labels_len);
	return op->labels != NULL;
}

/*
 * kvm_vm_info: one series of value 1 per VM, with the labels its series
 * have (the identity labels, vm where they have it) and what does not fit
 * on every series: the guest name and UUID whatever the series carry, the
 * VMM's pid and VM fd, the VMM's owner (effective uid), its command name
 * and KVM's id string of the VM file.
 */
static bool plan_info(struct prom_cache *c, const struct obj *objs,
		      const struct vmplan *vp, size_t nvp)
{
	struct buf b = { 0 };
	size_t i, j;

	if (!nvp)
		return true;
	buf_str(&b, "# HELP kvm_vm_info A VM: the labels its series have, and "
		    "its QEMU guest name (with KubeVirt's namespace) and UUID, "
		    "its VMM's pid, VM fd, owner (uid) and command name, KVM's "
		    "id string; always 1.\n"
		    "# TYPE kvm_vm_info gauge\n");
	for (i = 0; i < nvp; i++) {
		const struct obj *o = &objs[vp[i].first], *vm = NULL;
		struct buf l = { 0 };
		char num[32];
		char *text;

		for (j = vp[i].first; j < vp[i].end; j++)
			if (objs[j].vcpu == -1)
				vm = &objs[j];
		/* Every identity label, in the series' order. */
		ident_labels(&l, o, VML_NAME | VML_UUID | VML_PID | VML_FD);
		if (vp[i].need_vm) {
			snprintf(num, sizeof(num), "%d:%d", o->pid, o->fd);
			put_label(&l, "vm", num);
		}
		if (o->has_uid) {
			snprintf(num, sizeof(num), "%u", o->uid);
			put_label(&l, "uid", num);
		}
		if (o->comm)
			put_label(&l, "comm", o->comm);
		if (vm)
			put_label(&l, "id", kvmstats_file_id(vm->file));
		text = buf_take(&l, NULL);
		if (!text) {
			free(b.p);
			return false;
		}
		buf_printf(&b, "kvm_vm_info{%s} 1\n", text);
		free(text);
	}
	c->info = buf_take(&b, &c->info_len);
	return c->info != NULL;
}

/*
 * What the scheduler gave each vCPU's host thread (struct obj_thread),
 * after the KVM families: not KVM statistics, so -f does not pick them.
 */
static const struct {
	const char *name, *help;
	bool wait;
} thread_fams[] = {
	{ "kvm_vcpu_cpu_seconds_total",
	  "Time the host thread that runs the vCPU spent on a CPU (/proc schedstat)",
	  false },
	{ "kvm_vcpu_delay_seconds_total",
	  "Time the host thread that runs the vCPU was runnable but waited on a run queue for a CPU (run-queue delay: the steal its guest sees; /proc schedstat)",
	  true },
};

/*
 * Does the VM of objs[k] have objects of single vCPUs?  Then its thread
 * figures are per vCPU only (--per auto): never both ways.
 */
static bool vm_has_vcpus(const struct obj *objs, size_t n, size_t k)
{
	size_t j;

	for (j = k; j > 0 && objs[j - 1].pid == objs[k].pid &&
		    objs[j - 1].fd == objs[k].fd;
	     j--)
		;
	for (; j < n && objs[j].pid == objs[k].pid && objs[j].fd == objs[k].fd;
	     j++)
		if (objs[j].vcpu >= 0)
			return true;
	return false;
}

static void emit_threads(struct prom_cache *c, const struct obj *objs)
{
	struct buf *b = &c->out;
	size_t f, k;

	for (f = 0; f < sizeof(thread_fams) / sizeof(thread_fams[0]); f++) {
		bool head = false;

		for (k = 0; k < c->no; k++) {
			const struct obj_thread *t = objs[k].thread;
			const struct objplan *op = &c->o[k];
			size_t nl = strlen(thread_fams[f].name);
			char *p;

			if (!t || !t->has_sched || !obj_is_vcpu(&objs[k]) ||
			    (objs[k].vcpu == OBJ_VCPUS &&
			     vm_has_vcpus(objs, c->no, k)))
				continue;
			if (!head) {
				buf_printf(
					b,
					"# HELP %s %s%s; carried on across a move to another thread.\n# TYPE %s counter\n",
					thread_fams[f].name,
					thread_fams[f].help,
					objs[k].vcpu == OBJ_VCPUS ?
						", summed over the VM's vCPUs" :
						"",
					thread_fams[f].name);
				head = true;
			}
			if (!buf_room(b, nl + op->labels_len + 2 + 32 + 1))
				return;
			p = b->p + b->len;
			memcpy(p, thread_fams[f].name, nl);
			p += nl;
			memcpy(p, op->labels, op->labels_len);
			p += op->labels_len;
			*p++ = '}';
			*p++ = ' ';
			p += ns_seconds(thread_fams[f].wait ? t->wait_ns :
							      t->cpu_ns,
					p, 32);
			*p++ = '\n';
			b->len = (size_t)(p - b->p);
		}
	}
}

static bool plan_build(struct prom_cache *c, const struct obj *objs, size_t n,
		       const regex_t *filter)
{
	struct strset names = { 0 }, seen = { 0 }, unknown = { 0 };
	struct vmplan *vp = NULL;
	size_t k, room = 0, nvp = 0, v;
	bool ok = false;
	int pass;

	prom_cache_reset(c);
	c->filter = filter;
	c->o = calloc(n ? n : 1, sizeof(*c->o));
	if (!c->o)
		return false;
	c->no = n;
	vp = plan_vms(c, objs, n, &nvp);
	if (!vp)
		goto out;
	for (v = 0; v < nvp; v++)
		for (k = vp[v].first; k < vp[v].end; k++)
			if (!plan_labels(&c->o[k], &objs[k], &vp[v]))
				goto out;
	if (!plan_info(c, objs, vp, nvp) ||
	    strset_add(&names, 'n', "kvm_vm_info") < 0)
		goto out;
	/*
	 * The vCPU threads' families keep their names whatever a kernel
	 * calls its statistics: a KVM statistic that would take one of them
	 * is a name collision.
	 */
	for (k = 0; k < sizeof(thread_fams) / sizeof(thread_fams[0]); k++)
		if (strset_add(&names, 'n', thread_fams[k].name) < 0)
			goto out;

	/* VM families first, then vCPU families; each family once. */
	for (pass = 0; pass < 2; pass++) {
		bool vcpu = pass == 1;
		char kind = vcpu ? 'c' : 'v';
		const struct obj *first = NULL;

		for (k = 0; k < n; k++) {
			const struct obj *o = &objs[k];
			unsigned int i, nr;

			if (obj_is_vcpu(o) != vcpu)
				continue;
			/* The usual case: every VM (vCPU) has the same table. */
			if (first && same_layout(first->file, o->file))
				continue;
			if (!first)
				first = o;
			for (i = 0; i < kvmstats_file_num_skipped(o->file);
			     i++) {
				const char *nm =
					kvmstats_file_skipped(o->file, i)->name;
				int r;

				if (!name_matches(filter, nm))
					continue;
				r = strset_add(&unknown, kind, nm);
				if (r < 0)
					goto out;
				c->skipped.unknown += r;
			}
			nr = kvmstats_file_num_stats(o->file);
			for (i = 0; i < nr; i++) {
				const struct kvmstats_stat *s =
					kvmstats_file_stat(o->file, i);
				bool taken, bad, conflict;
				int r;

				if (!name_matches(filter, s->name))
					continue;
				/* Planned already from an earlier object? */
				r = strset_add(&seen, kind, s->name);
				if (r < 0)
					goto out;
				if (!r)
					continue;
				if (c->nf == room) {
					size_t rm = room ? 2 * room : 64;
					struct family *f =
						realloc(c->f, rm * sizeof(*f));

					if (!f)
						goto out;
					c->f = f;
					room = rm;
				}
				c->nf++;
				if (!plan_family(c, &c->f[c->nf - 1], s, i,
						 objs, k, n, &names, &taken,
						 &bad, &conflict))
					goto out;
				c->skipped.conflict += conflict;
				c->skipped.collision += taken;
				c->skipped.bad_name += bad;
				if (taken || bad || !c->f[c->nf - 1].head)
					c->nf--;
			}
		}
	}
	c->valid = true;
	ok = true;
out:
	vmplans_free(vp, nvp);
	strset_free(&names);
	strset_free(&seen);
	strset_free(&unknown);
	return ok;
}

static void emit(struct prom_cache *c, const struct obj *objs)
{
	struct buf *b = &c->out;
	size_t i, j;

	buf_add(b, c->info, c->info_len);
	for (i = 0; i < c->nf; i++) {
		const struct family *f = &c->f[i];

		buf_str(b, f->head);
		for (j = 0; j < f->nm; j++) {
			const struct obj *o = &objs[f->m[j].obj];
			const struct objplan *op = &c->o[f->m[j].obj];
			const struct kvmstats_stat *s =
				kvmstats_file_stat(o->file, f->m[j].stat);
			uint64_t cum = 0;
			unsigned int k;
			char *p;

			if (!f->hist) {
				uint64_t v = kvmstats_value(s, o->data, 0);

				/* name labels "} " value "\n" */
				if (!buf_room(b, f->name_len + op->labels_len +
							 2 + 64 + 1))
					return;
				p = b->p + b->len;
				memcpy(p, f->name, f->name_len);
				p += f->name_len;
				memcpy(p, op->labels, op->labels_len);
				p += op->labels_len;
				*p++ = '}';
				*p++ = ' ';
				if (f->boolean && !f->summed)
					*p++ = v ? '1' : '0';
				else
					p += scaled_str(s, v, p);
				*p++ = '\n';
				b->len = (size_t)(p - b->p);
				continue;
			}
			for (k = 0; k <= f->nle + 1; k++) {
				const char *name = f->name;
				size_t nl = f->name_len;

				if (k < f->nle) {
					cum += kvmstats_value(s, o->data, k);
					if (!f->le[k])
						continue;
				} else if (k == f->nle) {
					name = f->count;
					nl = f->count_len;
				} else if (f->sum) {
					name = f->sum;
					nl = f->sum_len;
				} else {
					break;
				}
				if (!buf_room(b, nl + op->labels_len + 80 + 64))
					return;
				p = b->p + b->len;
				memcpy(p, name, nl);
				p += nl;
				memcpy(p, op->labels, op->labels_len);
				p += op->labels_len;
				if (k < f->nle) {
					memcpy(p, f->le[k], f->le_len[k]);
					p += f->le_len[k];
				} else {
					*p++ = '}';
					*p++ = ' ';
				}
				if (k <= f->nle) {
					p += u64_str(cum, p);
				} else {
					const struct kvmstats_stat *ss =
						kvmstats_file_stat(
							o->file,
							(unsigned int)f->m[j]
								.sum);

					p += scaled_str(
						ss,
						kvmstats_value(ss, o->data, 0),
						p);
				}
				*p++ = '\n';
				b->len = (size_t)(p - b->p);
			}
		}
	}
}

int prom_cache_render(struct prom_cache *c, const struct obj *objs, size_t n,
		      const regex_t *filter, const char **text, size_t *len)
{
	c->out.len = 0;
	c->out.failed = false;
	if (!plan_valid(c, objs, n, filter) &&
	    !plan_build(c, objs, n, filter)) {
		prom_cache_reset(c);
		return -ENOMEM;
	}
	emit(c, objs);
	emit_threads(c, objs);
	if (c->out.failed)
		return -ENOMEM;
	*text = c->out.p ? c->out.p : "";
	*len = c->out.len;
	return 0;
}

void prom_cache_skipped(const struct prom_cache *c, struct prom_skipped *out)
{
	*out = c->skipped;
}

int prom_cache_printf(struct prom_cache *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(&c->out, fmt, ap);
	va_end(ap);
	return c->out.failed ? -ENOMEM : 0;
}

int prom_cache_label(struct prom_cache *c, const char *value)
{
	prom_escape(&c->out, value, true);
	return c->out.failed ? -ENOMEM : 0;
}

const char *prom_cache_text(const struct prom_cache *c, size_t *len)
{
	*len = c->out.len;
	return c->out.p ? c->out.p : "";
}

void prom_render(FILE *out, const struct obj *objs, size_t n,
		 const regex_t *filter)
{
	struct prom_cache *c = prom_cache_new();
	const char *text;
	size_t len;

	if (c && !prom_cache_render(c, objs, n, filter, &text, &len))
		fwrite(text, 1, len, out);
	prom_cache_free(c);
}
