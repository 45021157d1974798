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
 * not hold.  _count is the sum of the buckets (exact); KVM keeps no sum, so
 * there is no _sum.
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

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_'))
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

void text_stats(FILE *out, const struct obj *o, const regex_t *filter)
{
	unsigned int i, b, nr = kvmstats_file_num_stats(o->file);

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
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void json_results(FILE *out, const struct obj *objs, size_t n,
		  const regex_t *filter)
{
	size_t k;

	fputs("[", out);
	for (k = 0; k < n; k++) {
		const struct obj *o = &objs[k];
		unsigned int i, b, nr = kvmstats_file_num_stats(o->file);
		bool first = true;

		fprintf(out,
			"%s\n  {\"provider\": \"kvm\", \"target\": \"%s\", ",
			k ? "," : "", o->vcpu >= 0 ? "vcpu" : "vm");
		fprintf(out, "\"pid\": %d, \"fd\": %d, ", o->pid, o->fd);
		if (o->vcpu >= 0)
			fprintf(out, "\"vcpu\": %d, ", o->vcpu);
		fputs("\"id\": ", out);
		json_string(out, kvmstats_file_id(o->file));
		fputs(", \"stats\": [", out);
		for (i = 0; i < nr; i++) {
			const struct kvmstats_stat *s =
				kvmstats_file_stat(o->file, i);

			if (!name_matches(filter, s->name))
				continue;
			fprintf(out, "%s\n    {\"name\": ", first ? "" : ",");
			first = false;
			json_string(out, s->name);
			fputs(", \"value\": ", out);
			if (kvmstats_is_hist(s)) {
				fputc('[', out);
				for (b = 0; b < s->size; b++)
					fprintf(out, "%s%llu", b ? ", " : "",
						(unsigned long long)
							kvmstats_value(
								s, o->data, b));
				fputc(']', out);
			} else if (s->unit == KVMSTATS_UNIT_BOOLEAN) {
				fputs(kvmstats_value(s, o->data, 0) ? "true" :
								      "false",
				      out);
			} else {
				fprintf(out, "%llu",
					(unsigned long long)kvmstats_value(
						s, o->data, 0));
			}
			fputc('}', out);
		}
		fprintf(out, "%s]}", first ? "" : "\n  ");
	}
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
 * (object, descriptor) pairs it has lines for, and per object its label
 * text.  None of that changes for an fd, so a struct prom_cache keeps the
 * plan between scrapes and only the values are formatted each time, into
 * a buffer the cache also keeps.  The plan is rebuilt when the objects
 * change (other files, or prom_cache_reset()).
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

static void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !buf_room(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
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

static void prom_label_value(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"') {
			char e[2] = { '\\', *s };

			buf_add(b, e, 2);
		} else if (*s == '\n') {
			buf_add(b, "\\n", 2);
		} else {
			buf_add(b, s, 1);
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

struct member {
	size_t obj;	   /* index into the objects */
	unsigned int stat; /* descriptor index in that object's file */
};

struct family {
	char *head;  /* "# HELP ...\n# TYPE ...\n" */
	char *name;  /* the family name, or NAME_bucket for histograms */
	char *count; /* histograms: NAME_count */
	size_t name_len, count_len;
	char **le; /* histograms: ",le=\"X\"} " per bucket */
	size_t *le_len;
	unsigned int nle;
	bool hist, boolean;
	struct member *m;
	size_t nm;
};

struct objplan {
	const struct kvmstats_file *file;
	int pid, fd, vcpu;
	char *labels; /* "{pid=\"..\",fd=\"..\",id=\"..\"[,vcpu=\"..\"]" */
	size_t labels_len;
};

struct prom_cache {
	bool valid;
	const regex_t *filter;
	struct objplan *o;
	size_t no;
	struct family *f;
	size_t nf;
	struct buf out;
};

struct prom_cache *prom_cache_new(void)
{
	return calloc(1, sizeof(struct prom_cache));
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
	c->f = NULL;
	c->o = NULL;
	c->nf = c->no = 0;
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

/* The family of @proto (desc @hint of objs[k]) over objs[k..n). */
static bool plan_family(struct family *fam, const struct kvmstats_stat *proto,
			bool vcpu, unsigned int hint, const struct obj *objs,
			size_t k, size_t n)
{
	const char *u = kvmstats_unit_name(proto->unit);
	const char *ptype;
	char name[160], unit[32];
	struct buf b = { 0 };
	size_t j;

	memset(fam, 0, sizeof(*fam));
	prom_name(proto, vcpu, name, sizeof(name));
	raw_unit(proto, unit, sizeof(unit));
	fam->hist = kvmstats_is_hist(proto);
	fam->boolean = proto->unit == KVMSTATS_UNIT_BOOLEAN;
	if (fam->hist)
		ptype = "histogram";
	else if (proto->type == KVMSTATS_CUMULATIVE)
		ptype = "counter";
	else
		ptype = "gauge";
	buf_printf(&b, "# HELP %s KVM %s statistic %s (%s%s%s%s%s).\n", name,
		   vcpu ? "vCPU" : "VM", proto->name,
		   kvmstats_type_name(proto->type), u ? ", " : "", u ? u : "",
		   *unit && strcmp(unit, "s") ? ", raw unit " : "",
		   *unit && strcmp(unit, "s") ? unit : "");
	buf_printf(&b, "# TYPE %s %s\n", name, ptype);
	fam->head = buf_take(&b, NULL);
	memset(&b, 0, sizeof(b));
	buf_printf(&b, "%s%s", name, fam->hist ? "_bucket" : "");
	fam->name = buf_take(&b, &fam->name_len);
	if (!fam->head || !fam->name)
		return false;
	if (fam->hist) {
		unsigned int i;

		memset(&b, 0, sizeof(b));
		buf_printf(&b, "%s_count", name);
		fam->count = buf_take(&b, &fam->count_len);
		fam->le = calloc(proto->size, sizeof(*fam->le));
		fam->le_len = calloc(proto->size, sizeof(*fam->le_len));
		if (!fam->count || !fam->le || !fam->le_len)
			return false;
		fam->nle = proto->size;
		for (i = 0; i < proto->size; i++) {
			char le[64];
			double lo, hi;

			kvmstats_bucket_bounds(proto, i, &lo, &hi);
			if (isinf(hi))
				snprintf(le, sizeof(le), "+Inf");
			else if (hi - 1 <= 9007199254740992.0)
				kvmstats_scale_str(proto, (uint64_t)hi - 1, le,
						   sizeof(le));
			else
				snprintf(le, sizeof(le), "%.17g",
					 kvmstats_scale(proto, hi - 1));
			memset(&b, 0, sizeof(b));
			buf_printf(&b, ",le=\"%s\"} ", le);
			fam->le[i] = buf_take(&b, &fam->le_len[i]);
			if (!fam->le[i])
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

		if ((o->vcpu >= 0) != vcpu)
			continue;
		idx = stat_index(o->file, proto->name, hint);
		if (idx < 0)
			continue;
		s = kvmstats_file_stat(o->file, (unsigned int)idx);
		if (s->type != proto->type || s->size != proto->size ||
		    s->flags != proto->flags ||
		    s->exponent != proto->exponent ||
		    s->bucket_size != proto->bucket_size)
			continue;
		fam->m[fam->nm++] = (struct member){ j, (unsigned int)idx };
	}
	return true;
}

/* Same descriptor names and flags, in the same order? */
static bool same_layout(const struct kvmstats_file *a,
			const struct kvmstats_file *b)
{
	unsigned int i, nr = kvmstats_file_num_stats(a);

	if (a == b)
		return true;
	if (nr != kvmstats_file_num_stats(b))
		return false;
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *x = kvmstats_file_stat(a, i);
		const struct kvmstats_stat *y = kvmstats_file_stat(b, i);

		if (x->flags != y->flags || x->size != y->size ||
		    strcmp(x->name, y->name))
			return false;
	}
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

static bool plan_build(struct prom_cache *c, const struct obj *objs, size_t n,
		       const regex_t *filter)
{
	size_t k, room = 0;
	int pass;

	prom_cache_reset(c);
	c->filter = filter;
	c->o = calloc(n ? n : 1, sizeof(*c->o));
	if (!c->o)
		return false;
	c->no = n;
	for (k = 0; k < n; k++) {
		const struct obj *o = &objs[k];
		struct buf b = { 0 };

		c->o[k] = (struct objplan){ o->file, o->pid, o->fd,
					    o->vcpu, NULL,   0 };
		buf_printf(&b, "{pid=\"%d\",fd=\"%d\",id=\"", o->pid, o->fd);
		prom_label_value(&b, kvmstats_file_id(o->file));
		buf_add(&b, "\"", 1);
		if (o->vcpu >= 0)
			buf_printf(&b, ",vcpu=\"%d\"", o->vcpu);
		c->o[k].labels = buf_take(&b, &c->o[k].labels_len);
		if (!c->o[k].labels)
			return false;
	}

	/* VM families first, then vCPU families; each family once. */
	for (pass = 0; pass < 2; pass++) {
		bool vcpu = pass == 1;
		const struct obj *first = NULL;

		for (k = 0; k < n; k++) {
			const struct obj *o = &objs[k];
			unsigned int i, nr;

			if ((o->vcpu >= 0) != vcpu)
				continue;
			/* The usual case: every VM (vCPU) has the same table. */
			if (first && same_layout(first->file, o->file))
				continue;
			if (!first)
				first = o;
			nr = kvmstats_file_num_stats(o->file);
			for (i = 0; i < nr; i++) {
				const struct kvmstats_stat *s =
					kvmstats_file_stat(o->file, i);
				size_t j;
				bool seen = false;

				if (!name_matches(filter, s->name))
					continue;
				/* Emitted already by an earlier object? */
				for (j = 0; j < k && !seen; j++)
					seen = (objs[j].vcpu >= 0) == vcpu &&
					       stat_index(objs[j].file, s->name,
							  i) >= 0;
				if (seen)
					continue;
				if (c->nf == room) {
					size_t r = room ? 2 * room : 64;
					struct family *f =
						realloc(c->f, r * sizeof(*f));

					if (!f)
						return false;
					c->f = f;
					room = r;
				}
				c->nf++;
				if (!plan_family(&c->f[c->nf - 1], s, vcpu, i,
						 objs, k, n))
					return false;
			}
		}
	}
	c->valid = true;
	return true;
}

static void emit(struct prom_cache *c, const struct obj *objs)
{
	struct buf *b = &c->out;
	size_t i, j;

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
				if (f->boolean)
					*p++ = v ? '1' : '0';
				else
					p += scaled_str(s, v, p);
				*p++ = '\n';
				b->len = (size_t)(p - b->p);
				continue;
			}
			for (k = 0; k <= f->nle; k++) {
				const char *name =
					k < f->nle ? f->name : f->count;
				size_t nl =
					k < f->nle ? f->name_len : f->count_len;

				if (k < f->nle)
					cum += kvmstats_value(s, o->data, k);
				if (!buf_room(b, nl + op->labels_len + 80 + 22))
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
				p += u64_str(cum, p);
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
	if (c->out.failed)
		return -ENOMEM;
	*text = c->out.p ? c->out.p : "";
	*len = c->out.len;
	return 0;
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

/*
 * QEMU's guest name from its command line (NUL-separated arguments):
 * "-name foo", "-name foo,debug-threads=on" or "-name guest=foo,...",
 * where ",," stands for a comma.  Returns 1 if found, else 0.
 */
int parse_guest_name(const char *cmdline, size_t len, char *name,
		     size_t namelen)
{
	const char *p = cmdline, *end = cmdline + len;

	while (p < end) {
		size_t l = strnlen(p, (size_t)(end - p));
		const char *arg = p;

		p += l + 1;
		if ((strcmp(arg, "-name") && strcmp(arg, "--name")) || p >= end)
			continue;
		{
			const char *v = p,
				   *vend = p + strnlen(p, (size_t)(end - p));
			size_t o = 0;

			/* The value is a list of key=value; "guest=" or a bare first. */
			while (v < vend) {
				const char *s = v;
				char item[256];
				size_t il = 0;

				while (s < vend && il + 1 < sizeof(item)) {
					if (*s == ',' && s + 1 < vend &&
					    s[1] == ',') {
						item[il++] = ',';
						s += 2;
						continue;
					}
					if (*s == ',')
						break;
					item[il++] = *s++;
				}
				item[il] = '\0';
				while (s < vend && *s != ',')
					s++;
				if (s < vend)
					s++;
				if (!strncmp(item, "guest=", 6)) {
					snprintf(name, namelen, "%s", item + 6);
					return 1;
				}
				if (v == p && !strchr(item, '=')) {
					snprintf(name, namelen, "%s", item);
					o = 1;
				}
				v = s;
			}
			if (o)
				return 1;
		}
	}
	return 0;
}
