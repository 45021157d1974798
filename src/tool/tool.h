/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kvmstats tool: shared definitions of the subcommands.
 */
#ifndef KVMSTATS_TOOL_H
#define KVMSTATS_TOOL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "identity.h"
#include "libkvmstats.h"
#include "render.h"

/* Exit statuses, one per class of failure (documented in kvmstats(1)). */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	  /* a read or another system call failed */
	EXIT_USAGE = 2,	  /* bad command line: option, number, regex */
	EXIT_NODEV = 3,	  /* no /dev/kvmstats (or KVMSTATS_STATS_DIR) */
	EXIT_PERM = 4,	  /* permission denied */
	EXIT_NOVM = 5,	  /* no VM or vCPU matches the selection */
	EXIT_GONE = 6,	  /* the VM exited while it was being read */
	EXIT_LISTEN = 7,  /* export --listen: cannot serve the address */
	EXIT_INTR = 8,	  /* interrupted by a signal */
	EXIT_PARTIAL = 9, /* VMs or vCPUs left out: too many open files */
};

/*
 * File descriptors the tool keeps free for everything but stats files and
 * pidfds: reading /proc, the CSV log, the exporter's listening socket and
 * its client connections.  The rest of RLIMIT_NOFILE (raised to the hard
 * limit at start) is the budget for following VMs.
 */
#define FD_RESERVE 64

/*
 * Where the VMs come from: /dev/kvmstats, or (KVMSTATS_STATS_DIR) a
 * directory of stats files standing for the host; see host.c.  Every
 * command reads VMs through these functions.
 */
struct source {
	int devfd;	 /* /dev/kvmstats, or -1 with a directory or natively */
	const char *dir; /* KVMSTATS_STATS_DIR, or NULL */
	/*
	 * No module: KVM_GET_STATS_FD on copies of the VMMs' fds, where the
	 * kernel allows it (kvmstats_native_*(); see source_path()).
	 */
	bool native;
	char why[200]; /* why this path: for --version and messages */
};

/* One stats object followed over time: a VM or one of its vCPUs. */
struct objrec {
	struct kvmstats_file *file; /* NULL: not open */
	void *cur, *prev;	    /* the latest good sample, the one before */
	double t_cur, t_prev;	    /* when they were read; 0: no such sample */
	int err;		    /* the latest read: 0, or -errno */
	bool fresh;		    /* cur is from the latest host_sample() */
	void *base; /* top's reset: the sample totals count from, or NULL */
};

/*
 * The host thread that runs a vCPU, and what the scheduler gave it,
 * followed over time (host.c).  cpu_ns and wait_ns are counters that
 * never go back: the thread's own /proc figures for as long as one thread
 * runs the vCPU (its whole life, in a VMM that gives each vCPU a thread
 * of its own), and when the vCPU moves to another thread they carry on
 * with what that thread gets from then on (the interval of the move adds
 * nothing).
 */
struct thrrec {
	int tid;	    /* the device's latest answer; 0: see flags */
	unsigned int flags; /* its KVMSTATS_VCPU_* (why tid is 0) */
	int err; /* why the latest read of the figures failed, or 0 */
	struct kvmstats_sched sched;	    /* the latest figures read */
	uint64_t cpu_ns, wait_ns;	    /* the counters, now */
	uint64_t prev_cpu_ns, prev_wait_ns; /* at the good sample before */
	double t_cur, t_prev;		    /* when; 0: no such sample */
	bool fresh;		    /* figures from the latest host_sample() */
	int fig_tid;		    /* the thread the counters follow */
	uint64_t fig_cpu, fig_wait; /* its own figures at t_cur */
};

enum vmstate {
	VM_OPEN,     /* followed: its files are open */
	VM_EXITED,   /* its process exited: fds closed, last values kept */
	VM_LEFT_OUT, /* not opened: the open file limit (retried) */
	VM_FAILED,   /* not opened: an error (retried) */
};

/* A VM being followed. */
struct vmrec {
	int pid;
	int fd;
	unsigned int nr_vcpus; /* as last listed */
	struct vm_identity id; /* read once its vmref holds the process */
	enum vmstate state;
	bool listed;  /* seen in the latest list */
	int vcpu_err; /* why vCPUs nv .. nr_vcpus-1 are not open */
	struct kvmstats_vmref *ref; /* the device's VMs: its pidfd */
	struct objrec vm;
	unsigned int nv, vroom; /* vCPUs 0 .. nv-1 are open */
	struct objrec *vcpu;
	void *sum; /* host_vcpu_sum() */
	size_t sum_size;
	struct thrrec *thr; /* vCPU i's thread (host->threads) */
	unsigned int nthr;
};

/* What the latest host_refresh() and host_sample() served and did not. */
struct host_counts {
	unsigned int vms, vcpus;	       /* sampled */
	unsigned int left_vms, left_vcpus;     /* left out: open file limit */
	unsigned int failed_vms, failed_vcpus; /* an open or read failed */
	unsigned long long errors; /* failed opens and reads since host_init */
};

struct sample_ref;

struct host {
	struct source src;
	struct vmrec *vms;
	size_t nvms;
	struct kvmstats_sweep *sweep;
	struct kvmstats_sample *samples;
	struct sample_ref *sref; /* what each sample is of */
	size_t nsamples;
	unsigned long
		gen; /* bumped whenever a file is opened, closed or freed */
	size_t nfds; /* stats fds and pidfds held */
	size_t fd_budget;     /* how many may be held */
	unsigned long nofile; /* the soft RLIMIT_NOFILE at host_init() */
	struct host_counts n;
	bool threads;	 /* follow the vCPUs' threads too (default) */
	bool queue_msgs; /* keep messages for host_flush_msgs() */
	char **msgs;
	size_t nmsgs;
	char left_msg[512]; /* the latest open-file-limit message */
};

/* util.c: what every part of the tool uses. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int exit_for(int err);
int open_device(void);
/* Why /dev/kvmstats could not be opened (-@err), with what to do. */
void device_error(int err, char *buf, size_t len);
int compile_filter(const char *re, regex_t *out);
double now_mono(void);
void raise_nofile(void);
bool first_time(const char *key);
void skipped_msgs(const struct kvmstats_file *f, int pid, int fd,
		  void (*say)(void *ctx, const char *line), void *ctx);
/*
 * "CMD: no WHATstatistic matches -f 'RE' (kvmstats schema lists them)";
 * returns EXIT_NOVM.
 */
int no_match(const char *cmd, const char *what, const char *re);
/* The descriptors `schema` shows (main.c); 0 or an exit status, said. */
int schema_files(const struct source *src, const char *cmd, const char *sel,
		 bool want_vm, bool want_vcpu, struct kvmstats_file **vmf,
		 struct kvmstats_file **vcf, bool *tables);
/* The one-line complaint about an unknown option; returns EXIT_USAGE. */
int bad_option(const char *cmd, int c, char **argv);

/* host.c: the source of VMs. */
void source_init(struct source *src); /* exits if there is none */
/* What @src reads, in a few words: "/dev/kvmstats", ... */
const char *source_name(const struct source *src);
/* The path source_init() would take, and why, without opening it. */
void source_path(struct source *src);
/* The same without exiting: 0, or -errno (src->devfd stays -1). */
int source_open(struct source *src);
int source_list(const struct source *src, struct kvmstats_vm_info **vms);
int source_vmref(const struct source *src, int pid, int fd,
		 struct kvmstats_vmref **ref);
int source_file_open(const struct source *src, struct kvmstats_vmref *ref,
		     int pid, int fd, int vcpu, unsigned int flags,
		     struct kvmstats_file **f);
/*
 * The descriptor table of every VM (@vcpu false) or vCPU (true) of the
 * host, without a VM: the module's own tables.  KVMSTATS_STATS_DIR's
 * schema/vm and schema/vcpu; -EOPNOTSUPP from the device, which has no call
 * for it yet; -ENOENT without them.
 */
int source_schema(const struct source *src, bool vcpu,
		  struct kvmstats_file **f);
/* Print why listing failed ("KVMSTATS_STATS_DIR /x: ..."); an exit status. */
int source_list_error(const struct source *src, int err);
void source_fini(struct source *src);

/* host.c: follow every VM of the host over time, for `top` and `export`. */
int host_init(struct host *h, const struct source *src);
int host_refresh(struct host *h);
int host_sample(struct host *h);
void host_drop_exited(struct host *h);
/* Sum @v's fresh vCPU samples into v->sum; -EAGAIN if not all are fresh. */
int host_vcpu_sum(struct vmrec *v);
/*
 * The thread counters (struct thrrec) of @v's vCPUs summed; false unless
 * every vCPU's are from the latest sample.
 */
bool host_thread_sum(const struct vmrec *v, uint64_t *cpu_ns,
		     uint64_t *wait_ns);
void host_flush_msgs(struct host *h);
void host_fini(struct host *h);

/*
 * export.c: which series an exposition has (kvmstats(1), SERIES BUDGET).
 * Collectors pick kinds of statistics; per picks how vCPU statistics are
 * grouped: PER_AUTO has the few a per-vCPU view needs (exits, halt
 * polling) per vCPU and every other one summed per VM.
 */
enum export_per { PER_AUTO, PER_VM, PER_VCPU };
enum {
	COLL_VM = 1 << 0,	  /* VM statistics */
	COLL_VCPU = 1 << 1,	  /* vCPU statistics */
	COLL_HISTOGRAMS = 1 << 2, /* histograms, of the above */
	COLL_DEFAULT = COLL_VM | COLL_VCPU,
};

struct export_select {
	const regex_t *include; /* -f, or NULL */
	const regex_t *exclude; /* --exclude, or NULL */
	enum export_per per;
	unsigned int collectors;
	unsigned int vm_labels;	  /* --vm-labels: VML_* */
	bool no_exporter_metrics; /* --web.disable-exporter-metrics */
};

/* Is vCPU statistic @name one PER_AUTO serves per vCPU? */
bool export_per_vcpu_stat(const char *name);

/*
 * export.c: what the exporter keeps between scrapes.  scrape() is the seam
 * the HTTP server calls (see its comment in export.c for thread safety).
 */
struct scrape {
	struct host host;
	struct source *src;
	bool serving;	    /* --listen: a missing source is logged */
	bool ready;	    /* host_init() done: the source opened */
	size_t fd_reserve;  /* fds kept for the server's sockets */
	int src_err;	    /* why the source cannot be read, or 0 */
	char src_what[160]; /* what was being read */
	char err_text[320]; /* a failed scrape, said in the 500's body */
	struct export_select sel;
	struct prom_cache *cache;
	unsigned long cache_gen;
	struct obj *objs;
	struct obj_thread *thr; /* objs[k].thread, for vCPU objects */
	size_t objs_room;
	size_t nobjs; /* objects the last scrape rendered */
	unsigned long long scrapes;
};

int scrape_init(struct scrape *s, struct source *src,
		const struct export_select *sel);
int scrape(struct scrape *s, const char **text, size_t *len);
void scrape_fini(struct scrape *s);

int cmd_top(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif /* KVMSTATS_TOOL_H */
