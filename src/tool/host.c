// SPDX-License-Identifier: GPL-2.0-only
/*
 * Following every VM of the host over time, for `top` and `export`.
 *
 * The stats fds are adopted borrowed: when a VM leaves the list (its process
 * exited) we close the fd at once, so we never keep a dead VM's memory
 * pinned, yet keep the file object for its descriptors and last values.
 *
 * With KVMSTATS_STATS_DIR set, the host is a directory instead of
 * /dev/kvmstats (for tests and profiling on machines without the module):
 * each subdirectory PID-FD is a VM whose files vm, vcpu0, vcpu1, ... are
 * stats files (recorded ones, say), read again at every sample; a
 * subdirectory that disappears is a VM that exited.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

int host_init(struct host *h, int devfd)
{
	int err;

	memset(h, 0, sizeof(*h));
	h->devfd = devfd;
	h->dir = host_stats_dir();
	err = kvmstats_sweep_new(h->dir ? -1 : devfd, 0, &h->sweep);
	return err;
}

const char *host_stats_dir(void)
{
	const char *d = getenv("KVMSTATS_STATS_DIR");

	return d && *d ? d : NULL;
}

static int dir_stats_fd(const char *dir, int pid, int fd, int vcpu)
{
	char path[4096];
	int sfd;

	if (vcpu < 0)
		snprintf(path, sizeof(path), "%s/%d-%d/vm", dir, pid, fd);
	else
		snprintf(path, sizeof(path), "%s/%d-%d/vcpu%d", dir, pid, fd,
			 vcpu);
	sfd = open(path, O_RDONLY | O_CLOEXEC);
	return sfd < 0 ? -errno : sfd;
}

/* The VMs of a stats directory, as kvmstats_list_vms() would list them. */
static int dir_list_vms(const char *dir, struct kvmstats_vm_info **out)
{
	struct kvmstats_vm_info *list = NULL;
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	*out = NULL;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct kvmstats_vm_info info = { 0 };
		char path[4096];
		void *a;
		int pid, fd, end = 0;

		if (sscanf(e->d_name, "%d-%d%n", &pid, &fd, &end) != 2 ||
		    e->d_name[end])
			continue;
		info.pid = pid;
		info.fd = fd;
		for (;;) {
			snprintf(path, sizeof(path), "%s/%s/vcpu%u", dir,
				 e->d_name, info.nr_vcpus);
			if (access(path, R_OK))
				break;
			info.nr_vcpus++;
		}
		a = realloc(list, (size_t)(n + 1) * sizeof(*list));
		if (!a) {
			free(list);
			closedir(d);
			return -ENOMEM;
		}
		list = a;
		list[n++] = info;
	}
	closedir(d);
	*out = list;
	return n;
}

static int open_borrowed(const struct host *h, int pid, int fd, int vcpu,
			 struct kvmstats_file **f)
{
	int sfd = h->dir ? dir_stats_fd(h->dir, pid, fd, vcpu) :
			   kvmstats_get_stats_fd(h->devfd, pid, fd, vcpu);
	int err;

	if (sfd < 0)
		return sfd;
	err = kvmstats_file_adopt(sfd, KVMSTATS_ADOPT_BORROW, f);
	if (err)
		close(sfd);
	return err;
}

static void free_file(struct kvmstats_file *f, bool alive)
{
	if (!f)
		return;
	if (alive)
		close(kvmstats_file_fd(f));
	kvmstats_file_free(f);
}

static void vm_close_fds(struct vmrec *v)
{
	unsigned int i;

	if (!v->alive)
		return;
	if (v->vm)
		close(kvmstats_file_fd(v->vm));
	for (i = 0; i < v->nv; i++)
		close(kvmstats_file_fd(v->vcpu[i]));
	v->alive = false;
}

static void vm_free(struct vmrec *v)
{
	unsigned int i;

	for (i = 0; i < v->nv; i++) {
		free_file(v->vcpu[i], v->alive);
		free(v->vcur[i]);
		free(v->vprev[i]);
	}
	free_file(v->vm, v->alive);
	free(v->vcpu);
	free(v->vcur);
	free(v->vprev);
	free(v->cur);
	free(v->prev);
	memset(v, 0, sizeof(*v));
}

/* Open vCPUs nv .. nr_vcpus-1 of @v.  New samples start equal (rate 0). */
static int vm_grow(struct host *h, struct vmrec *v)
{
	while (v->nv < v->nr_vcpus) {
		unsigned int i = v->nv;
		struct kvmstats_file *f;
		size_t sz;
		int err;

		err = open_borrowed(h, v->pid, v->fd, (int)i, &f);
		if (err)
			return err;
		if (!(i & (i - 1)) || i == 0) {
			/* Grow the arrays in powers of two. */
			size_t room = i ? 2 * (size_t)i : 1;
			void *a = realloc(v->vcpu, room * sizeof(*v->vcpu));

			if (a)
				v->vcpu = a;
			a = a ? realloc(v->vcur, room * sizeof(*v->vcur)) :
				NULL;
			if (a)
				v->vcur = a;
			a = a ? realloc(v->vprev, room * sizeof(*v->vprev)) :
				NULL;
			if (!a) {
				free_file(f, true);
				return -ENOMEM;
			}
			v->vprev = a;
		}
		sz = kvmstats_file_data_size(f);
		v->vcpu[i] = f;
		v->vcur[i] = calloc(1, sz ? sz : 1);
		v->vprev[i] = calloc(1, sz ? sz : 1);
		if (!v->vcur[i] || !v->vprev[i]) {
			free(v->vcur[i]);
			free(v->vprev[i]);
			free_file(f, true);
			return -ENOMEM;
		}
		/* Take a first sample so the first rate is 0, not the total. */
		kvmstats_file_read(f, v->vcur[i], sz);
		memcpy(v->vprev[i], v->vcur[i], sz);
		v->nv++;
		h->gen++;
	}
	return 0;
}

static int vm_new(struct host *h, const struct kvmstats_vm_info *info,
		  struct vmrec *v)
{
	size_t sz;
	int err;

	memset(v, 0, sizeof(*v));
	v->pid = info->pid;
	v->fd = info->fd;
	v->nr_vcpus = info->nr_vcpus;
	proc_names(v->pid, v->comm, sizeof(v->comm), v->name, sizeof(v->name));
	err = open_borrowed(h, v->pid, v->fd, -1, &v->vm);
	if (err)
		return err;
	v->alive = true;
	sz = kvmstats_file_data_size(v->vm);
	v->cur = calloc(1, sz ? sz : 1);
	v->prev = calloc(1, sz ? sz : 1);
	if (!v->cur || !v->prev) {
		vm_free(v);
		return -ENOMEM;
	}
	kvmstats_file_read(v->vm, v->cur, sz);
	memcpy(v->prev, v->cur, sz);
	v->t_open = now_mono();
	err = vm_grow(h, v);
	v->nr_vcpus = v->nv;
	if (err == -ENOMEM) {
		vm_free(v);
		return err;
	}
	return 0;
}

int host_refresh(struct host *h)
{
	struct kvmstats_vm_info *list;
	size_t i, j;
	int n, err;

	n = h->dir ? dir_list_vms(h->dir, &list) :
		     kvmstats_list_vms(h->devfd, &list);
	if (n < 0)
		return n;
	for (i = 0; i < h->nvms; i++)
		h->vms[i].listed = false;
	for (j = 0; j < (size_t)n; j++) {
		struct vmrec *v = NULL;

		for (i = 0; i < h->nvms; i++) {
			if (h->vms[i].alive && h->vms[i].pid == list[j].pid &&
			    h->vms[i].fd == list[j].fd) {
				v = &h->vms[i];
				break;
			}
		}
		if (v) {
			v->listed = true;
			if (list[j].nr_vcpus > v->nv) {
				/* Short of what is listed: retried next time. */
				v->nr_vcpus = list[j].nr_vcpus;
				vm_grow(h, v);
				v->nr_vcpus = v->nv;
			}
			continue;
		}
		v = realloc(h->vms, (h->nvms + 1) * sizeof(*h->vms));
		if (!v) {
			free(list);
			return -ENOMEM;
		}
		h->vms = v;
		err = vm_new(h, &list[j], &h->vms[h->nvms]);
		h->gen++;
		if (err)
			continue; /* gone between the list and the open */
		h->vms[h->nvms].listed = true;
		h->nvms++;
	}
	free(list);
	/* Not listed any more: the process has exited.  Let go of the VM. */
	for (i = 0; i < h->nvms; i++)
		if (!h->vms[i].listed && h->vms[i].alive) {
			vm_close_fds(&h->vms[i]);
			h->gen++;
		}
	return 0;
}

static int add_sample(struct host *h, size_t *k, const struct kvmstats_file *f,
		      void *buf)
{
	if (*k == h->nsamples) {
		size_t room = h->nsamples ? 2 * h->nsamples : 64;
		void *a = realloc(h->samples, room * sizeof(*h->samples));

		if (!a)
			return -ENOMEM;
		h->samples = a;
		h->nsamples = room;
	}
	h->samples[*k].file = f;
	h->samples[*k].buf = buf;
	h->samples[*k].len = kvmstats_file_data_size(f);
	h->samples[*k].result = 0;
	(*k)++;
	return 0;
}

int host_sample(struct host *h)
{
	size_t i, k = 0;
	unsigned int c;
	int err;

	for (i = 0; i < h->nvms; i++) {
		struct vmrec *v = &h->vms[i];
		void *t;

		if (!v->alive)
			continue;
		t = v->prev, v->prev = v->cur, v->cur = t;
		err = add_sample(h, &k, v->vm, v->cur);
		for (c = 0; !err && c < v->nv; c++) {
			t = v->vprev[c], v->vprev[c] = v->vcur[c],
			v->vcur[c] = t;
			err = add_sample(h, &k, v->vcpu[c], v->vcur[c]);
		}
		if (err)
			return err;
	}
	h->t_prev = h->t_cur;
	h->t_cur = now_mono();
	err = kvmstats_sweep_run(h->sweep, h->samples, k);
	return err < 0 ? err : 0;
}

void host_drop_exited(struct host *h)
{
	size_t i, j = 0;

	for (i = 0; i < h->nvms; i++) {
		if (h->vms[i].alive) {
			h->vms[j++] = h->vms[i];
		} else {
			vm_free(&h->vms[i]);
			h->gen++;
		}
	}
	h->nvms = j;
}

void host_fini(struct host *h)
{
	size_t i;

	for (i = 0; i < h->nvms; i++)
		vm_free(&h->vms[i]);
	free(h->vms);
	free(h->samples);
	kvmstats_sweep_free(h->sweep);
	memset(h, 0, sizeof(*h));
}
