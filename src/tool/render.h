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

/* struct obj.vcpu of the sum of every vCPU of a VM (export --per vm). */
#define OBJ_VCPUS (-2)

/*
 * The host thread of a vCPU object (or, summed, of a VM's vCPUs) and what
 * the scheduler gave it.  show and the JSON print the thread's own
 * figures; the exposition the host's counters (struct thrrec).
 */
struct obj_thread {
	int tid;	  /* 0: none (state says why) */
	const char *comm; /* its name, or "" / NULL */
	/* identity_thread_state() and _why(): NULL when the figures are known */
	const char *state, *why;
	bool has_sched; /* the figures below are known */
	uint64_t cpu_ns, wait_ns, timeslices;
	int last_cpu; /* -1: not known */
};

/*
 * The name the thread figures go by for -f (show's thread line and JSON
 * object), as if they were one more statistic.
 */
#define THREAD_PSEUDO_STAT "thread"

/*
 * One sampled stats object: a VM (vcpu == -1), one of its vCPUs (the
 * index), or all its vCPUs summed (OBJ_VCPUS: file is one of them, for the
 * layout, and data the sums; booleans count the vCPUs where true, peaks
 * take the highest).  Objects of one VM come one after the other.
 */
struct obj {
	int pid;
	int fd;
	int vcpu;
	const struct kvmstats_file *file;
	const void *data; /* a sample of file's data block */
	/*
	 * QEMU guest name, "" or NULL: none; for a KubeVirt VM, the VM's
	 * name without its namespace (ns).
	 */
	const char *name;
	const char *ns;			 /* KubeVirt's namespace, or ""/NULL */
	const char *comm;		 /* the VMM's command name, or NULL */
	const char *uuid;		 /* QEMU's -uuid, "" or NULL: none */
	bool has_uid;			 /* uid is known */
	unsigned int uid;		 /* the VMM's effective user id */
	const struct obj_thread *thread; /* vCPUs: its thread, or NULL */
};

/* Does @name pass @filter (NULL: everything passes)? */
bool name_matches(const regex_t *filter, const char *name);

/* The raw unit of a stat, as a short suffix: "ns", "KiB", "cycles", "". */
void raw_unit(const struct kvmstats_stat *s, char *buf, size_t len);

/*
 * Prometheus family name: kvm_vcpu_halt_wait_seconds_total, ...; lower
 * case, anything but [a-z0-9_] becomes _.
 */
void prom_name(const struct kvmstats_stat *s, bool vcpu, char *buf, size_t len);

/* Text: "name  value unit" lines (histograms: one line per non-empty bucket). */
void text_stats(FILE *out, const struct obj *o, const regex_t *filter);

/*
 * The line saying that libkvmstats skipped statistic @s of file @f of VM
 * @pid:@fd, and why (kvmstats_file_skipped()).
 */
void skip_reason(const struct kvmstats_file *f, const struct kvmstats_stat *s,
		 int pid, int fd, char *buf, size_t len);

/* Text: the descriptor table. */
void text_schema(FILE *out, const struct kvmstats_file *f,
		 const regex_t *filter);

/*
 * One StatsResult object, after a comma unless @first: the caller prints
 * the "[" before the first and "\n]\n" ("]\n" if none) after the last.
 */
void json_result(FILE *out, const struct obj *o, const regex_t *filter,
		 bool first);

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
 * others allocated (a file's address can be reused), or when a guest or
 * command name may have changed.  On success *@text (valid until the next
 * call) holds *@len bytes; else -ENOMEM.  Not thread-safe: one cache per
 * thread, or a lock.
 */
struct prom_cache;
struct prom_cache *prom_cache_new(void);
void prom_cache_reset(struct prom_cache *c);
void prom_cache_free(struct prom_cache *c);

/*
 * Which objects a statistic has series for, beyond the filter: @keep
 * (NULL: all) is asked once per object and statistic when the cache plans
 * an exposition, and a family has only the objects it keeps (none: no
 * family).  It must answer the same for the same object and statistic
 * for as long as the cache lives; export's collectors and its per-vCPU /
 * per-VM split are such a policy.
 */
typedef bool (*prom_keep_fn)(void *ctx, const struct obj *o,
			     const struct kvmstats_stat *s);
void prom_cache_set_keep(struct prom_cache *c, prom_keep_fn keep, void *ctx);

/*
 * Which labels name a VM on its series (export --vm-labels): by default
 * what a guest keeps across restarts of its VMM, its QEMU guest name (a
 * KubeVirt VM's as namespace and name) and UUID; pid and fd are the
 * VMM's, new at every restart.  A VM whose labels are empty, or the same
 * as another VM's in one exposition, also gets vm="PID:FD" on its series
 * (and kvm_vm_info), so that no two VMs share a series.  kvm_vm_info
 * always has every one of them.
 */
enum {
	VML_NAME = 1 << 0, /* name, and namespace (KubeVirt) */
	VML_UUID = 1 << 1,
	VML_PID = 1 << 2,
	VML_FD = 1 << 3,
	VML_DEFAULT = VML_NAME | VML_UUID,
};
void prom_cache_set_vm_labels(struct prom_cache *c, unsigned int labels);
/* "name,uuid,pid,fd" (any of them, in any order) into VML_* bits. */
int vm_labels_parse(const char *list, unsigned int *out);
int prom_cache_render(struct prom_cache *c, const struct obj *objs, size_t n,
		      const regex_t *filter, const char **text, size_t *len);

/*
 * Statistics the last rendering left out, each counted once per name and
 * kind (VM or vCPU): not understood by libkvmstats (kvmstats_file_skipped),
 * a metric name another statistic took first, a metric name Prometheus's
 * lint rules reject, or a descriptor that differs from the same
 * statistic's in another object.
 */
struct prom_skipped {
	unsigned int unknown;
	unsigned int collision;
	unsigned int bad_name;
	unsigned int conflict;
};
void prom_cache_skipped(const struct prom_cache *c, struct prom_skipped *out);

/*
 * Append to the text of the last prom_cache_render(): printf text, or a
 * label value (escaped, valid UTF-8).  0 or -ENOMEM.  prom_cache_text()
 * gives the whole text (valid until the next call on the cache).
 */
int prom_cache_printf(struct prom_cache *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int prom_cache_label(struct prom_cache *c, const char *value);
const char *prom_cache_text(const struct prom_cache *c, size_t *len);

/*
 * Length of the valid UTF-8 sequence at @p (1 to 4; 1 for ASCII), or 0 if
 * the bytes there are not valid UTF-8 (overlong, surrogate, truncated).
 */
size_t utf8_seq_len(const unsigned char *p);

/*
 * escape.c: text a VM's owner controls (comm, cmdline, QEMU's -name, the
 * id string of a file from a stats directory), safe for a terminal:
 * backslash, newline, tab and CR as \\ \n \t \r, other control bytes and
 * bytes that are not UTF-8 as \xHH, C1 controls and characters that
 * reorder or hide text (bidi overrides, zero-width) as \uHHHH.  Outside a
 * UTF-8 locale every byte above 0x7f is \xHH.  text_escape_init() reads the
 * locale (LC_CTYPE); text_escape_utf8() sets it for tests.
 */
void text_escape_init(void);
void text_escape_utf8(bool on);
/* Into @out (@room bytes, NUL-terminated, whole escapes only); its length. */
size_t text_escape(char *out, size_t room, const char *s);
/* text_escape() into @buf, returned: for printf arguments. */
const char *esc(const char *s, char *buf, size_t len);
void fput_escaped(FILE *f, const char *s);
/* The code point of the valid UTF-8 sequence of @n bytes at @p. */
uint32_t utf8_code_point(const unsigned char *p, size_t n);
/* Valid UTF-8 that must not reach a terminal as it is (C1, bidi, ...). */
bool hidden_char(uint32_t cp);
/* Is @name (raw) the guest name @sel, as typed raw or as shown escaped? */
bool guest_name_is(const char *name, const char *sel);

/* A JSON string literal (with quotes); invalid UTF-8 becomes U+FFFD. */
void json_string(FILE *out, const char *s);

#endif /* KVMSTATS_RENDER_H */
