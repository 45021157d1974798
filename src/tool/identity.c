// SPDX-License-Identifier: GPL-2.0-only
/*
 * Who a VM is; see identity.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "identity.h"
#include "libkvmstats.h"
#include "tool.h"

#include <linux/kvmstats.h>

/*
 * How much of a command line is read.  libvirt puts -name and -uuid near
 * the start of QEMU's, but a command line can be long (ARG_MAX), and a
 * -name further on must not be missed for want of room.
 */
#define CMDLINE_MAX (256 * 1024)

/* Is @s QEMU's UUID text (8-4-4-4-12 hex digits)? */
static bool is_uuid(const char *s, size_t n)
{
	size_t i;

	if (n != UUID_LEN - 1)
		return false;
	for (i = 0; i < n; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

/* @s into @out (@len bytes of room), cut if it does not fit. */
static void copy_cut(char *out, size_t len, const char *s)
{
	size_t n = strnlen(s, len - 1);

	memcpy(out, s, n);
	out[n] = '\0';
}

/*
 * The value of a -name argument, @v .. @vend: a list of items separated
 * by commas (",," stands for a comma), each KEY=VALUE but for the first,
 * which may be a bare value standing for guest=.  The guest name into
 * @name if the list sets one (then true).
 */
static bool name_value(const char *v, const char *vend, char *name,
		       size_t namelen)
{
	bool first = true, found = false;

	while (v < vend) {
		char item[sizeof(((struct vm_identity *)0)->name) + 8];
		size_t il = 0;

		while (v < vend) {
			char c = *v;

			if (c == ',' && v + 1 < vend && v[1] == ',') {
				v += 2;
			} else if (c == ',') {
				break;
			} else {
				v++;
			}
			if (il + 1 < sizeof(item))
				item[il++] = c; /* a longer name is cut */
		}
		item[il] = '\0';
		if (v < vend)
			v++; /* the separating comma */
		if (!strncmp(item, "guest=", 6)) {
			copy_cut(name, namelen, item + 6);
			found = true;
		} else if (first && !strchr(item, '=')) {
			copy_cut(name, namelen, item);
			found = true;
		}
		first = false;
	}
	return found;
}

void identity_parse_cmdline(const char *cmdline, size_t len,
			    struct vm_identity *id)
{
	const char *p = cmdline, *end = cmdline + len;

	id->name[0] = '\0';
	id->uuid[0] = '\0';
	while (p < end) {
		const char *arg = p, *v;
		size_t vl;

		p += strnlen(p, (size_t)(end - p)) + 1;
		if (p >= end)
			break; /* an option without its value */
		if (arg[0] == '-' && arg[1] == '-')
			arg++;
		v = p;
		vl = strnlen(v, (size_t)(end - v));
		if (!strcmp(arg, "-name")) {
			name_value(v, v + vl, id->name, sizeof(id->name));
			p += vl + 1;
		} else if (!strcmp(arg, "-uuid")) {
			if (is_uuid(v, vl)) {
				size_t i;

				for (i = 0; i < vl; i++)
					id->uuid[i] = (char)tolower(
						(unsigned char)v[i]);
				id->uuid[vl] = '\0';
			}
			p += vl + 1;
		}
	}
}

/*
 * Up to @len - 1 bytes of file @leaf of VM @pid:@fd's VMM (/proc/PID/LEAF,
 * or DIR/PID-FD/LEAF for a stats directory) into @buf, NUL-terminated;
 * the count, or -1.
 */
static ssize_t read_vmm_file(const struct source *src, int pid, int fd,
			     const char *leaf, char *buf, size_t len)
{
	char path[4096];
	size_t n = 0;
	int f;

	if (src->dir)
		snprintf(path, sizeof(path), "%s/%d-%d/%s", src->dir, pid, fd,
			 leaf);
	else
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, leaf);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	while (n + 1 < len) {
		ssize_t r = read(f, buf + n, len - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(f);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* Is @s .. @end a run of [a-z0-9] and @more, a letter or digit at each end? */
static bool dns_word(const char *s, const char *end, const char *more)
{
	const char *p;

	if (s == end || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)end[-1]))
		return false;
	for (p = s; p < end; p++)
		if (!(islower((unsigned char)*p) ||
		      isdigit((unsigned char)*p)) &&
		    !strchr(more, *p))
			return false;
	return true;
}

size_t identity_kubevirt_split(const char *name, char *ns, size_t len)
{
	const char *us = strchr(name, '_'), *end = name + strlen(name);

	if (!us || us - name > 63 || end - (us + 1) > 253 ||
	    (size_t)(us - name) >= len || !dns_word(name, us, "-") ||
	    !dns_word(us + 1, end, "-."))
		return 0;
	memcpy(ns, name, (size_t)(us - name));
	ns[us - name] = '\0';
	return (size_t)(us + 1 - name);
}

/* The effective uid of a /proc/PID/status text: its "Uid:" line's second. */
static bool status_euid(const char *status, unsigned int *uid)
{
	const char *p =
		strncmp(status, "Uid:", 4) ? strstr(status, "\nUid:") : status;
	unsigned int r, e;

	if (p && *p == '\n')
		p++;
	if (!p || sscanf(p + 4, "%u %u", &r, &e) != 2)
		return false;
	*uid = e;
	return true;
}

void identity_read(const struct source *src, int pid, int fd,
		   struct vm_identity *id)
{
	char *buf = malloc(CMDLINE_MAX);
	ssize_t n;

	snprintf(id->comm, sizeof(id->comm), "?");
	id->name[0] = '\0';
	id->uuid[0] = '\0';
	id->ns[0] = '\0';
	id->name_at = 0;
	id->has_uid = false;
	if (!buf)
		return;
	n = read_vmm_file(src, pid, fd, "comm", buf, sizeof(id->comm));
	if (n > 0) {
		/* The kernel ends it in a newline; the name may hold others. */
		if (buf[n - 1] == '\n')
			buf[n - 1] = '\0';
		copy_cut(id->comm, sizeof(id->comm), buf);
	}
	n = read_vmm_file(src, pid, fd, "cmdline", buf, CMDLINE_MAX);
	if (n > 0)
		identity_parse_cmdline(buf, (size_t)n, id);
	n = read_vmm_file(src, pid, fd, "status", buf, 8192);
	if (n > 0)
		id->has_uid = status_euid(buf, &id->uid);
	/*
	 * KubeVirt's NAMESPACE_VM, in a pod: a libvirt guest on a host of
	 * its own may well be called db_1, and keeps its name whole.
	 */
	if (id->name[0] &&
	    identity_kubevirt_split(id->name, id->ns, sizeof(id->ns))) {
		n = read_vmm_file(src, pid, fd, "cgroup", buf, 65536);
		if (n > 0 && strstr(buf, "kubepods"))
			id->name_at = (unsigned int)identity_kubevirt_split(
				id->name, id->ns, sizeof(id->ns));
		else
			id->ns[0] = '\0';
	}
	free(buf);
}

/* A decimal number 0 .. INT_MAX in @s .. @end, whole. */
static bool parse_num(const char *s, const char *end, int *out)
{
	long long v = 0;

	if (s == end)
		return false;
	for (; s < end; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
		v = v * 10 + (*s - '0');
		if (v > INT_MAX)
			return false;
	}
	*out = (int)v;
	return true;
}

/* @sel as PID (fd -1) or PID:FD: true if it is one. */
static bool sel_pid(const char *sel, int *pid, int *fd)
{
	const char *colon = strchr(sel, ':'), *end = sel + strlen(sel);

	*fd = -1;
	if (!colon)
		return parse_num(sel, end, pid) && *pid > 0;
	return parse_num(sel, colon, pid) && *pid > 0 &&
	       parse_num(colon + 1, end, fd);
}

bool identity_sel_is_pid(const char *sel)
{
	int pid, fd;

	return sel && sel_pid(sel, &pid, &fd);
}

bool identity_selects(const char *sel, int pid, int fd,
		      const struct vm_identity *id)
{
	int spid, sfd;

	if (!sel)
		return true;
	if (sel_pid(sel, &spid, &sfd))
		return spid == pid && (sfd < 0 || sfd == fd);
	if (!id)
		return false;
	if (id->uuid[0] && !strcasecmp(id->uuid, sel))
		return true;
	return guest_name_is(id->name, sel); /* raw, or as shown escaped */
}

int identity_vcpu_threads(const struct source *src, struct kvmstats_vmref *ref,
			  int pid, int fd, unsigned int nr_vcpus,
			  struct kvmstats_vcpu_info **out)
{
	struct kvmstats_vcpu_info *v;
	char buf[16384];
	const char *p;
	unsigned int i;
	ssize_t n;

	*out = NULL;
	if (!src->dir) {
		if (ref)
			return kvmstats_vmref_list_vcpus(ref, out);
		if (src->native)
			return kvmstats_native_list_vcpus(pid, fd, out);
		return kvmstats_list_vcpus(src->devfd, pid, fd, out);
	}
	if (!nr_vcpus)
		return 0;
	v = calloc(nr_vcpus, sizeof(*v));
	if (!v)
		return -ENOMEM;
	n = read_vmm_file(src, pid, fd, "vcpus", buf, sizeof(buf));
	p = n > 0 ? buf : NULL;
	for (i = 0; i < nr_vcpus; i++) {
		unsigned int id, flags;
		int tid, used = 0;

		v[i].index = i;
		v[i].flags = KVMSTATS_VCPU_UNKNOWN;
		if (!p ||
		    sscanf(p, "%u %d %u%n", &id, &tid, &flags, &used) != 3)
			continue;
		v[i].vcpu_id = id;
		v[i].tid = tid > 0 ? tid : 0;
		v[i].flags = flags;
		p = strchr(p + used, '\n');
		if (p)
			p++;
	}
	*out = v;
	return (int)nr_vcpus;
}

int identity_thread_sched(const struct source *src, int pid, int fd, int tid,
			  unsigned int flags, struct kvmstats_sched *out)
{
	char path[4096];
	int dfd, err;

	if (!src->dir)
		return kvmstats_thread_sched(pid, tid, flags, out);
	snprintf(path, sizeof(path), "%s/%d-%d", src->dir, pid, fd);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -ESRCH;
	err = kvmstats_thread_sched_at(dfd, tid, flags, out);
	close(dfd);
	return err;
}

void identity_thread_comm(const struct source *src, int pid, int fd, int tid,
			  char *buf, size_t len)
{
	char leaf[64];
	ssize_t n;

	snprintf(leaf, sizeof(leaf), "task/%d/comm", tid);
	n = read_vmm_file(src, pid, fd, leaf, buf, len);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	if (buf[n - 1] == '\n')
		buf[n - 1] = '\0';
}

static const struct {
	const char *state, *why;
} thread_states[] = {
	{ "never-run", "never run" },
	{ "exited", "its thread has exited" },
	{ "hidden", "its thread is not in this pid namespace" },
	{ "unknown",
	  "not known (a kvmstats module older than API version 3, or a stats directory without vcpus)" },
	{ "proc-hidden", "/proc hides its thread (hidepid=)" },
	{ "proc-other-ns", "/proc is another pid namespace's" },
	{ "no-proc", "no /proc" },
	{ "no-schedstat", "the kernel keeps no scheduler statistics" },
	{ "error", "reading its figures failed" },
	{ "native",
	  "not known without the module (KVM does not say which thread runs a vCPU)" },
};

/* Which of thread_states[] (@flags, @err) is; -1: none, all is known. */
static int thread_state(unsigned int flags, int err)
{
	if (flags & KVMSTATS_VCPU_UNKNOWN)
		return 3;
	if (flags & KVMSTATS_VCPU_NATIVE)
		return 9;
	if (flags & KVMSTATS_VCPU_NEVER_RUN)
		return 0;
	if (flags & KVMSTATS_VCPU_TID_EXITED)
		return 1;
	if (flags & KVMSTATS_VCPU_TID_HIDDEN)
		return 2;
	if (flags)
		return 8;
	switch (err) {
	case 0:
		return -1;
	case -ESRCH:
		return 1;
	case -EACCES:
	case -EPERM:
		return 4;
	case -EXDEV:
		return 5;
	case -ENOENT:
		return 6;
	case -EOPNOTSUPP:
		return 7;
	}
	return 8;
}

const char *identity_thread_state(unsigned int flags, int err)
{
	int i = thread_state(flags, err);

	return i < 0 ? NULL : thread_states[i].state;
}

const char *identity_thread_why(unsigned int flags, int err)
{
	int i = thread_state(flags, err);

	return i < 0 ? NULL : thread_states[i].why;
}
