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
#include <math.h>
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
				(unsigned long long)kvmstats_value(s, o->data, 0),
				*unit ? " " : "", unit);
			continue;
		}
		{
			unsigned long long total = 0;

			for (b = 0; b < s->size; b++)
				total += kvmstats_value(s, o->data, b);
			fprintf(out, "  %-32s %s, %u buckets, %llu samples%s%s\n",
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

void text_schema(FILE *out, const struct kvmstats_file *f, const regex_t *filter)
{
	unsigned int i, nr = kvmstats_file_num_stats(f);

	fprintf(out, "  %-32s %-16s %-8s %4s %4s %5s %6s %6s\n", "NAME", "TYPE",
		"UNIT", "BASE", "EXP", "SIZE", "BUCKET", "OFFSET");
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f, i);
		const char *u = kvmstats_unit_name(s->unit);

		if (!name_matches(filter, s->name))
			continue;
		fprintf(out, "  %-32s %-16s %-8s %4d %4d %5u %6u %6u\n", s->name,
			kvmstats_type_name(s->type), u ? u : "none",
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

		fprintf(out, "%s\n  {\"provider\": \"kvm\", \"target\": \"%s\", ",
			k ? "," : "", o->vcpu >= 0 ? "vcpu" : "vm");
		fprintf(out, "\"pid\": %d, \"fd\": %d, ", o->pid, o->fd);
		if (o->vcpu >= 0)
			fprintf(out, "\"vcpu\": %d, ", o->vcpu);
		fputs("\"id\": ", out);
		json_string(out, kvmstats_file_id(o->file));
		fputs(", \"stats\": [", out);
		for (i = 0; i < nr; i++) {
			const struct kvmstats_stat *s = kvmstats_file_stat(o->file, i);

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
						(unsigned long long)kvmstats_value(s, o->data, b));
				fputc(']', out);
			} else if (s->unit == KVMSTATS_UNIT_BOOLEAN) {
				fputs(kvmstats_value(s, o->data, 0) ? "true" : "false", out);
			} else {
				fprintf(out, "%llu",
					(unsigned long long)kvmstats_value(s, o->data, 0));
			}
			fputc('}', out);
		}
		fprintf(out, "%s]}", first ? "" : "\n  ");
	}
	fputs(n ? "\n]\n" : "]\n", out);
}

static void json_schema_one(FILE *out, const char *target,
			    const struct kvmstats_file *f, const regex_t *filter)
{
	unsigned int i, nr = kvmstats_file_num_stats(f);
	bool first = true;

	fprintf(out, "\n  {\"provider\": \"kvm\", \"target\": \"%s\", \"stats\": [",
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

static void prom_label_value(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(out, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", out);
		else
			fputc(*s, out);
	}
}

static void prom_labels(FILE *out, const struct obj *o, const char *le)
{
	fprintf(out, "{pid=\"%d\",fd=\"%d\",id=\"", o->pid, o->fd);
	prom_label_value(out, kvmstats_file_id(o->file));
	fputc('"', out);
	if (o->vcpu >= 0)
		fprintf(out, ",vcpu=\"%d\"", o->vcpu);
	if (le)
		fprintf(out, ",le=\"%s\"", le);
	fputc('}', out);
}

/* The stat called @name in @o, trying index @hint first. */
static const struct kvmstats_stat *stat_of(const struct obj *o, const char *name,
					   unsigned int hint)
{
	const struct kvmstats_stat *s = kvmstats_file_stat(o->file, hint);
	int i;

	if (s && !strcmp(s->name, name))
		return s;
	i = kvmstats_file_find(o->file, name);
	return i < 0 ? NULL : kvmstats_file_stat(o->file, (unsigned int)i);
}

static void prom_family(FILE *out, const struct kvmstats_stat *proto,
			bool vcpu, unsigned int hint, const struct obj *objs,
			size_t n)
{
	const char *u = kvmstats_unit_name(proto->unit);
	const char *ptype;
	char name[160], unit[32];
	size_t k;

	prom_name(proto, vcpu, name, sizeof(name));
	raw_unit(proto, unit, sizeof(unit));
	if (kvmstats_is_hist(proto))
		ptype = "histogram";
	else if (proto->type == KVMSTATS_CUMULATIVE)
		ptype = "counter";
	else
		ptype = "gauge";
	fprintf(out, "# HELP %s KVM %s statistic %s (%s%s%s%s%s).\n", name,
		vcpu ? "vCPU" : "VM", proto->name, kvmstats_type_name(proto->type),
		u ? ", " : "", u ? u : "", *unit && strcmp(unit, "s") ? ", raw unit " : "",
		*unit && strcmp(unit, "s") ? unit : "");
	fprintf(out, "# TYPE %s %s\n", name, ptype);

	for (k = 0; k < n; k++) {
		const struct obj *o = &objs[k];
		const struct kvmstats_stat *s;
		char num[64];
		unsigned int b;

		if ((o->vcpu >= 0) != vcpu)
			continue;
		s = stat_of(o, proto->name, hint);
		if (!s || s->type != proto->type || s->size != proto->size ||
		    s->flags != proto->flags || s->exponent != proto->exponent ||
		    s->bucket_size != proto->bucket_size)
			continue;
		if (!kvmstats_is_hist(s)) {
			uint64_t v = kvmstats_value(s, o->data, 0);

			if (s->unit == KVMSTATS_UNIT_BOOLEAN)
				snprintf(num, sizeof(num), "%d", v ? 1 : 0);
			else
				kvmstats_scale_str(s, v, num, sizeof(num));
			fputs(name, out);
			prom_labels(out, o, NULL);
			fprintf(out, " %s\n", num);
			continue;
		}
		{
			unsigned long long cum = 0;
			char le[64];

			for (b = 0; b < s->size; b++) {
				double lo, hi;

				cum += kvmstats_value(s, o->data, b);
				kvmstats_bucket_bounds(s, b, &lo, &hi);
				if (isinf(hi))
					snprintf(le, sizeof(le), "+Inf");
				else if (hi - 1 <= 9007199254740992.0)
					kvmstats_scale_str(s, (uint64_t)hi - 1, le,
							   sizeof(le));
				else
					snprintf(le, sizeof(le), "%.17g",
						 kvmstats_scale(s, hi - 1));
				fprintf(out, "%s_bucket", name);
				prom_labels(out, o, le);
				fprintf(out, " %llu\n", cum);
			}
			fprintf(out, "%s_count", name);
			prom_labels(out, o, NULL);
			fprintf(out, " %llu\n", cum);
		}
	}
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

void prom_render(FILE *out, const struct obj *objs, size_t n,
		 const regex_t *filter)
{
	int pass;

	/* VM families first, then vCPU families; each family once. */
	for (pass = 0; pass < 2; pass++) {
		bool vcpu = pass == 1;
		size_t k;

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
					       stat_of(&objs[j], s->name, i);
				if (seen)
					continue;
				prom_family(out, s, vcpu, i, objs + k, n - k);
			}
		}
	}
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
			const char *v = p, *vend = p + strnlen(p, (size_t)(end - p));
			size_t o = 0;

			/* The value is a list of key=value; "guest=" or a bare first. */
			while (v < vend) {
				const char *s = v;
				char item[256];
				size_t il = 0;

				while (s < vend && il + 1 < sizeof(item)) {
					if (*s == ',' && s + 1 < vend && s[1] == ',') {
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
