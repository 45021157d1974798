/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kvmstats tool: shared definitions of the subcommands.
 */
#ifndef KVMSTATS_TOOL_H
#define KVMSTATS_TOOL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "libkvmstats.h"
#include "render.h"

/* Exit statuses, one per class of failure (documented in kvmstats(1)). */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	 /* a read or another system call failed */
	EXIT_USAGE = 2,	 /* bad command line: option, number, regex */
	EXIT_NODEV = 3,	 /* no /dev/kvmstats: module not loaded */
	EXIT_PERM = 4,	 /* permission denied */
	EXIT_NOVM = 5,	 /* no VM or vCPU matches the selection */
	EXIT_GONE = 6,	 /* the VM exited while it was being read */
	EXIT_LISTEN = 7, /* export --listen: cannot serve the address */
	EXIT_INTR = 8,	 /* interrupted by a signal */
};

/* A VM being followed: its files, and two samples of each. */
struct vmrec {
	int pid;
	int fd;
	unsigned int nr_vcpus;
	char comm[32];
	char name[128]; /* QEMU -name, or "" */
	bool alive;
	bool listed;   /* seen in the latest list */
	double t_open; /* when its first sample was taken */
	struct kvmstats_file *vm;
	void *cur, *prev; /* VM samples */
	unsigned int nv;  /* vCPU files open */
	struct kvmstats_file **vcpu;
	void **vcur, **vprev;
};

struct host {
	int devfd;
	const char *
		dir; /* KVMSTATS_STATS_DIR: recorded files instead of the device */
	struct vmrec *vms;
	size_t nvms;
	struct kvmstats_sweep *sweep;
	struct kvmstats_sample *samples;
	size_t nsamples;
	double t_cur, t_prev; /* CLOCK_MONOTONIC seconds of the samples */
	unsigned long
		gen; /* bumped whenever a file is opened, closed or freed */
};

/* Helpers in main.c. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int exit_for(int err);
int open_device(void);
int compile_filter(const char *re, regex_t *out);
void proc_names(int pid, char *comm, size_t commlen, char *name,
		size_t namelen);
double now_mono(void);

/* host.c: follow every VM of the host (or those @match accepts). */
int host_init(struct host *h, int devfd);
const char *host_stats_dir(void); /* KVMSTATS_STATS_DIR, or NULL */
int host_refresh(struct host *h);
int host_sample(struct host *h);
void host_drop_exited(struct host *h);
void host_fini(struct host *h);

int cmd_top(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif /* KVMSTATS_TOOL_H */
