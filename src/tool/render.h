/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Rendering of stats samples: text, QMP-style JSON, Prometheus exposition.
 * Kept apart from the subcommands so the host unit tests can check it.
 */
#ifndef KVMSTATS_RENDER_H
#define KVMSTATS_RENDER_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "libkvmstats.h"

/* One sampled stats object: a VM (vcpu == -1) or one of its vCPUs. */
struct obj {
	int pid;
	int fd;
	int vcpu;
	const struct kvmstats_file *file;
	const void *data; /* a sample of file's data block */
};

/* Does @name pass @filter (NULL: everything passes)? */
bool name_matches(const regex_t *filter, const char *name);

/* The raw unit of a stat, as a short suffix: "ns", "KiB", "cycles", "". */
void raw_unit(const struct kvmstats_stat *s, char *buf, size_t len);

/* Prometheus family name: kvm_vcpu_halt_wait_seconds_total, ... */
void prom_name(const struct kvmstats_stat *s, bool vcpu, char *buf, size_t len);

/* Text: "name  value unit" lines (histograms: one line per non-empty bucket). */
void text_stats(FILE *out, const struct obj *o, const regex_t *filter);

/* Text: the descriptor table. */
void text_schema(FILE *out, const struct kvmstats_file *f,
		 const regex_t *filter);

/* JSON array of StatsResult objects (one per object). */
void json_results(FILE *out, const struct obj *objs, size_t n,
		  const regex_t *filter);

/* JSON array of StatsSchema objects; @vm or @vcpu may be NULL. */
void json_schemas(FILE *out, const struct kvmstats_file *vm,
		  const struct kvmstats_file *vcpu, const regex_t *filter);

/* Prometheus text exposition (format 0.0.4) of @objs, grouped by family. */
void prom_render(FILE *out, const struct obj *objs, size_t n,
		 const regex_t *filter);

/*
 * The same exposition, rendered from a cache that keeps, between calls,
 * what never changes for an fd: family names, HELP and TYPE lines,
 * histogram le labels, each object's label text, and the output buffer.
 * The cache notices other objects (files, pid, fd, vcpu) or another
 * filter; call prom_cache_reset() when files may have been freed and
 * others allocated (a file's address can be reused).  On success *@text
 * (valid until the next call) holds *@len bytes; else -ENOMEM.
 */
struct prom_cache;
struct prom_cache *prom_cache_new(void);
void prom_cache_reset(struct prom_cache *c);
void prom_cache_free(struct prom_cache *c);
int prom_cache_render(struct prom_cache *c, const struct obj *objs, size_t n,
		      const regex_t *filter, const char **text, size_t *len);

/*
 * QEMU's guest name from a NUL-separated command line: "-name foo",
 * "-name foo,debug-threads=on" or "-name guest=foo,...".  1 if found.
 */
int parse_guest_name(const char *cmdline, size_t len, char *name,
		     size_t namelen);

/* A JSON string literal (with quotes). */
void json_string(FILE *out, const char *s);

#endif /* KVMSTATS_RENDER_H */
