// SPDX-License-Identifier: GPL-2.0-only
/*
 * Open files as /proc shows them: see proc_files.h.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>

#include "proc_files.h"

struct pfd {
	pid_t tid;
	int fd;
};

static int kcmp_file(const struct pfd *a, const struct pfd *b)
{
	return (int)syscall(SYS_kcmp, a->tid, b->tid, KCMP_FILE, a->fd, b->fd);
}

static int kcmp_err;

/* qsort order: kcmp's order of the files, then (tid, fd). */
static int pfd_cmp(const void *pa, const void *pb)
{
	const struct pfd *a = pa, *b = pb;
	int r = kcmp_file(a, b);

	if (r < 0) {
		kcmp_err = -errno;
		r = 0;
	}
	if (r == 1)
		return -1;
	if (r == 2)
		return 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->fd < b->fd ? -1 : a->fd > b->fd;
}

/*
 * @want ending in ':' or '-' ("anon_inode:kvm-vcpu:", "anon_inode:kvmstats-")
 * names a family, matched as a prefix; any other names one file type
 * exactly: "anon_inode:kvm-vm" is not "anon_inode:kvm-vm-stats", the VM's
 * own stats fd, which a VMM may hold for a moment.
 */
static bool name_matches(const char *link, const char *want)
{
	size_t n = strlen(want);

	if (n && (want[n - 1] == ':' || want[n - 1] == '-'))
		return !strncmp(link, want, n);
	return !strcmp(link, want);
}

/* Appends the matching fds of task @tid's fd table (dir @dir) to *@v. */
static int collect(const char *dir, pid_t tid, const char *prefix,
		   struct pfd **v, size_t *n, size_t *cap)
{
	char path[PATH_MAX], link[256], want[128];
	struct dirent *e;
	DIR *d = opendir(dir);
	ssize_t len;

	if (!d)
		return -errno;
	snprintf(want, sizeof(want), "anon_inode:%s", prefix);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue; /* closed meanwhile */
		link[len] = '\0';
		if (!name_matches(link, want))
			continue;
		if (*n == *cap) {
			struct pfd *nv;

			*cap = *cap ? 2 * *cap : 64;
			nv = realloc(*v, *cap * sizeof(**v));
			if (!nv) {
				closedir(d);
				return -ENOMEM;
			}
			*v = nv;
		}
		(*v)[*n].tid = tid;
		(*v)[*n].fd = atoi(e->d_name);
		(*n)++;
	}
	closedir(d);
	return 0;
}

/*
 * Sorts @v by file; the number of distinct files, or -errno.  With @first,
 * also the first fd of each file's run (its lowest, for one task's table),
 * at most @max of them, their number in *@nfirst.
 */
static long distinct(struct pfd *v, size_t n, int *first, int max, int *nfirst)
{
	size_t i;
	long c = 0;

	kcmp_err = 0;
	qsort(v, n, sizeof(*v), pfd_cmp);
	if (kcmp_err)
		return kcmp_err;
	for (i = 0; i < n; i++) {
		int r = i ? kcmp_file(&v[i - 1], &v[i]) : 1;

		if (r < 0)
			return -errno;
		if (!r)
			continue;
		c++;
		if (first && *nfirst < max)
			first[(*nfirst)++] = v[i].fd;
	}
	return c;
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int proc_anon_fds(pid_t pid, const char *prefix, int *fds, int max)
{
	struct pfd *v = NULL;
	size_t n = 0, cap = 0;
	char dir[64];
	long c;
	int r, k = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	r = collect(dir, pid, prefix, &v, &n, &cap);
	if (r < 0) {
		free(v);
		return r;
	}
	c = distinct(v, n, fds, max, &k);
	free(v);
	if (c < 0)
		return (int)c;
	if (k)
		qsort(fds, k, sizeof(*fds), int_cmp);
	return (int)c;
}

static long files_all_once(const char *prefix)
{
	struct pfd *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *p, *t;
	DIR *procd, *taskd;
	char dir[96];
	long c;
	int r = 0;

	procd = opendir("/proc");
	if (!procd)
		return -errno;
	while (r >= 0 && (p = readdir(procd))) {
		pid_t pid = atoi(p->d_name);

		if (pid <= 0)
			continue;
		snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
		taskd = opendir(dir);
		if (!taskd)
			continue; /* gone meanwhile */
		while (r >= 0 && (t = readdir(taskd))) {
			pid_t tid = atoi(t->d_name);

			if (tid <= 0)
				continue;
			snprintf(dir, sizeof(dir), "/proc/%d/task/%d/fd", pid,
				 tid);
			/* A task gone meanwhile, or with no table. */
			if (collect(dir, tid, prefix, &v, &n, &cap) == -ENOMEM)
				r = -ENOMEM;
		}
		closedir(taskd);
	}
	closedir(procd);
	if (r < 0) {
		free(v);
		return r;
	}
	c = distinct(v, n, NULL, 0, NULL);
	free(v);
	return c;
}

long proc_anon_files_all(const char *prefix)
{
	long c;
	int i;

	/* A task that exits or closes an fd under kcmp: look again. */
	for (i = 0; i < 5; i++) {
		c = files_all_once(prefix);
		if (c != -ESRCH && c != -EBADF)
			break;
	}
	return c;
}

long proc_kvmstats_files(void)
{
	return proc_anon_files_all("kvmstats-");
}
