// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libkvmstats: parse a KVM stats file once, then sample it with one pread.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kvmstats.h>

#include "libkvmstats.h"

/* The Makefile passes the release from the VERSION file. */
#ifndef KVMSTATS_RELEASE
#error "build with -DKVMSTATS_RELEASE=... (see the Makefile)"
#endif
#if KVMSTATS_RELEASE_MAJOR != LIBKVMSTATS_VERSION_MAJOR ||     \
	KVMSTATS_RELEASE_MINOR != LIBKVMSTATS_VERSION_MINOR || \
	KVMSTATS_RELEASE_PATCH != LIBKVMSTATS_VERSION_PATCH
#error "VERSION and the LIBKVMSTATS_VERSION_* macros of libkvmstats.h disagree"
#endif

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434 /* the same on every architecture */
#endif

_Static_assert(sizeof(void *) != 8 || sizeof(struct kvmstats_stat) == 64,
	       "struct kvmstats_stat never changes size");
_Static_assert(sizeof(struct kvmstats_vm_info) == 32,
	       "struct kvmstats_vm_info never changes size");
_Static_assert(sizeof(void *) != 8 || sizeof(struct kvmstats_sample) == 64,
	       "struct kvmstats_sample never changes size");
_Static_assert(sizeof(struct kvmstats_vcpu_info) == 32,
	       "struct kvmstats_vcpu_info never changes size");
_Static_assert(sizeof(struct kvmstats_sched) == 64,
	       "struct kvmstats_sched never changes size");
_Static_assert((KVMSTATS_VCPU_UNKNOWN &
		(KVMSTATS_VCPU_NEVER_RUN | KVMSTATS_VCPU_TID_EXITED |
		 KVMSTATS_VCPU_TID_HIDDEN)) == 0,
	       "the library's vCPU flag is none of the device's");

/*
 * The on-disk layout, written out here rather than taken from <linux/kvm.h>
 * so the library builds against any uapi headers.  This is the ABI.
 */
struct stats_header {
	uint32_t flags;
	uint32_t name_size;
	uint32_t num_desc;
	uint32_t id_offset;
	uint32_t desc_offset;
	uint32_t data_offset;
};

struct stats_desc {
	uint32_t flags;
	int16_t exponent;
	uint16_t size;
	uint32_t offset;
	uint32_t bucket_size;
	/* char name[name_size] follows */
};

#define TYPE_MASK  0xfu
#define UNIT_SHIFT 4
#define UNIT_MASK  (0xfu << UNIT_SHIFT)
#define BASE_SHIFT 8
#define BASE_MASK  (0xfu << BASE_SHIFT)
/* Flag bits KVM has not defined: a descriptor with any is not understood. */
#define KNOWN_FLAGS (TYPE_MASK | UNIT_MASK | BASE_MASK)

/* Sanity limits: far above anything KVM produces, far below trouble. */
#define MAX_NAME_SIZE  4096u
#define MAX_DESC_BYTES (16u << 20)
#define MAX_DATA_BYTES (64u << 20)

#define LIST_TRIES 16

struct kvmstats_file {
	int fd;
	bool borrowed;
	bool vcpu;
	int no_batch; /* set once a batch read refused this fd */
	uint32_t data_offset;
	size_t data_size;
	unsigned int nr, nskipped;
	struct kvmstats_stat *stats;
	struct kvmstats_stat *skipped; /* descriptors not understood */
	char *names;		       /* num_desc * name_size bytes */
	char *id;
};

/* How a struct kvmstats_vmref asks for stats fds. */
enum vmref_mode {
	BY_PIDFD, /* KVMSTATS_FD_PIDFD: race-free */
	BY_PID,	  /* version 1 device: pid, checked against the pidfd */
	NATIVE,	  /* KVMSTATS_VMREF_NATIVE: pidfd_getfd(), no device */
};

static int native_get_stats_fd(int pidfd, pid_t pid, int fd, int vcpu);
static int native_vmref_open(struct kvmstats_vmref *r);

struct kvmstats_vmref {
	int devfd;
	pid_t pid;
	int fd;
	int pidfd; /* -1: none */
	int mode;  /* enum vmref_mode; BY_PIDFD -> BY_PID once, atomically */
	unsigned int nr_vcpus;
};

struct kvmstats_sweep {
	int devfd;
	bool no_batch; /* the module has no KVMSTATS_READ_BATCH */
	size_t max;
	size_t batched;
	struct kvmstats_read_op *ops;
	size_t *index; /* ops[k] reads samples[index[k]] */
};

const char *kvmstats_version(void)
{
	return KVMSTATS_RELEASE;
}

unsigned int kvmstats_version_number(void)
{
	return (KVMSTATS_RELEASE_MAJOR << 16) | (KVMSTATS_RELEASE_MINOR << 8) |
	       KVMSTATS_RELEASE_PATCH;
}

int kvmstats_open_device(void)
{
	int fd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int kvmstats_api_version(int devfd)
{
	int r = ioctl(devfd, KVMSTATS_GET_API_VERSION, 0);

	return r < 0 ? -errno : r;
}

/*
 * One listing ioctl (KVMSTATS_LIST_VMS, or KVMSTATS_LIST_PIDFD of @pidfd
 * when it is >= 0), retried with more room while it says E2BIG; the
 * entries copied into a fresh array of struct kvmstats_vm_info.
 */
static int list_common(int devfd, int pidfd, struct kvmstats_vm_info **vms)
{
	union {
		struct kvmstats_vm_list all;
		struct kvmstats_pidfd_list one;
	} *l = NULL;
	struct kvmstats_vm_info *out;
	struct kvmstats_vm *ents;
	uint32_t room = 64, nr, i;
	size_t head = pidfd >= 0 ? sizeof(l->one) : sizeof(l->all);
	int tries, r;

	if (!vms)
		return -EINVAL;
	*vms = NULL;
	for (tries = 0; tries < LIST_TRIES; tries++) {
		void *n = realloc(l, head + room * sizeof(struct kvmstats_vm));

		if (!n) {
			free(l);
			return -ENOMEM;
		}
		l = n;
		memset(l, 0, head);
		if (pidfd >= 0) {
			l->one.pidfd = pidfd;
			l->one.nr = room;
			r = ioctl(devfd, KVMSTATS_LIST_PIDFD, &l->one);
			nr = l->one.nr;
			ents = l->one.vms;
		} else {
			l->all.nr = room;
			r = ioctl(devfd, KVMSTATS_LIST_VMS, &l->all);
			nr = l->all.nr;
			ents = l->all.vms;
		}
		if (r == 0)
			break;
		if (errno != E2BIG) {
			r = -errno;
			free(l);
			return r;
		}
		/* Ask for what was needed plus slack for VMs being born. */
		room = nr + nr / 4 + 8;
	}
	if (tries == LIST_TRIES) {
		free(l);
		return -EAGAIN;
	}
	if (nr == 0) {
		free(l);
		return 0;
	}
	out = calloc(nr, sizeof(*out));
	if (!out) {
		free(l);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		out[i].pid = ents[i].pid;
		out[i].fd = ents[i].fd;
		out[i].nr_vcpus = ents[i].nr_vcpus;
		out[i].flags = ents[i].flags;
	}
	free(l);
	*vms = out;
	return (int)nr;
}

int kvmstats_list_vms(int devfd, struct kvmstats_vm_info **vms)
{
	return list_common(devfd, -1, vms);
}

int kvmstats_list_pidfd(int devfd, int pidfd, struct kvmstats_vm_info **vms)
{
	if (pidfd < 0) {
		if (vms)
			*vms = NULL;
		return -EBADF;
	}
	return list_common(devfd, pidfd, vms);
}

static int get_stats_fd(int devfd, int pid, unsigned int flags, int fd,
			int vcpu)
{
	struct kvmstats_fd_request req = {
		.pid = pid,
		.fd = fd,
		.vcpu = vcpu,
		.flags = flags,
	};
	int r = ioctl(devfd, KVMSTATS_GET_STATS_FD, &req);

	return r < 0 ? -errno : r;
}

int kvmstats_get_stats_fd(int devfd, pid_t pid, int fd, int vcpu)
{
	return get_stats_fd(devfd, pid, 0, fd, vcpu);
}

int kvmstats_get_stats_fd_pidfd(int devfd, int pidfd, int fd, int vcpu)
{
	return get_stats_fd(devfd, pidfd, KVMSTATS_FD_PIDFD, fd, vcpu);
}

/* ---------------------------------------------------------- vCPU threads */

/*
 * KVMSTATS_LIST_VCPUS for (@pid or pidfd, @fd), retried with the room the
 * device asks for while vCPUs are being added; a fresh array of struct
 * kvmstats_vcpu_info.
 */
static int list_vcpus(int devfd, int pid, unsigned int flags, int fd,
		      struct kvmstats_vcpu_info **vcpus)
{
	struct kvmstats_vcpu_list *l = NULL;
	struct kvmstats_vcpu_info *out;
	uint32_t room = 8, nr = 0, i;
	int tries, r;

	for (tries = 0; tries < LIST_TRIES; tries++) {
		void *n = realloc(l, sizeof(*l) + room * sizeof(l->vcpus[0]));

		if (!n) {
			free(l);
			return -ENOMEM;
		}
		l = n;
		memset(l, 0, sizeof(*l));
		l->pid = pid;
		l->fd = fd;
		l->flags = flags;
		l->nr = room;
		r = ioctl(devfd, KVMSTATS_LIST_VCPUS, l);
		nr = l->nr;
		if (r == 0)
			break;
		if (errno != E2BIG) {
			r = -errno;
			free(l);
			return r;
		}
		room = nr + 4;
	}
	if (tries == LIST_TRIES) {
		free(l);
		return -EAGAIN;
	}
	if (nr == 0) {
		free(l);
		return 0;
	}
	out = calloc(nr, sizeof(*out));
	if (!out) {
		free(l);
		return -ENOMEM;
	}
	for (i = 0; i < nr; i++) {
		out[i].index = l->vcpus[i].index;
		out[i].vcpu_id = l->vcpus[i].vcpu_id;
		out[i].tid = l->vcpus[i].tid;
		out[i].flags = l->vcpus[i].flags;
	}
	free(l);
	*vcpus = out;
	return (int)nr;
}

static int find_vm(const struct kvmstats_vm_info *vms, int n, pid_t pid, int fd,
		   unsigned int *nr_vcpus);

/*
 * A device without KVMSTATS_LIST_VCPUS: the VM's vCPUs as its listing
 * (@pidfd's, or the host's for @pid) counts them, their threads unknown.
 */
static int unknown_vcpus(int devfd, int pidfd, pid_t pid, int fd,
			 struct kvmstats_vcpu_info **vcpus)
{
	struct kvmstats_vm_info *vms = NULL;
	struct kvmstats_vcpu_info *out;
	unsigned int nr = 0, i;
	int n, err;

	n = pidfd >= 0 ? kvmstats_list_pidfd(devfd, pidfd, &vms) :
			 kvmstats_list_vms(devfd, &vms);
	if (n < 0)
		return n;
	/* pid is unused by pidfd: the listing is of that one process. */
	if (pidfd >= 0 && n > 0)
		pid = vms[0].pid;
	err = find_vm(vms, n, pid, fd, &nr);
	free(vms);
	if (err)
		return -ENOTTY; /* not at its lowest fd, or not listed: unknown */
	if (!nr)
		return 0;
	out = calloc(nr, sizeof(*out));
	if (!out)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		out[i].index = i;
		out[i].flags = KVMSTATS_VCPU_UNKNOWN;
	}
	*vcpus = out;
	return (int)nr;
}

int kvmstats_list_vcpus(int devfd, pid_t pid, int fd,
			struct kvmstats_vcpu_info **vcpus)
{
	int n;

	if (!vcpus)
		return -EINVAL;
	*vcpus = NULL;
	n = list_vcpus(devfd, pid, 0, fd, vcpus);
	if (n == -ENOTTY)
		n = unknown_vcpus(devfd, -1, pid, fd, vcpus);
	return n;
}

int kvmstats_list_vcpus_pidfd(int devfd, int pidfd, int fd,
			      struct kvmstats_vcpu_info **vcpus)
{
	int n;

	if (!vcpus)
		return -EINVAL;
	*vcpus = NULL;
	if (pidfd < 0)
		return -EBADF;
	n = list_vcpus(devfd, pidfd, KVMSTATS_FD_PIDFD, fd, vcpus);
	if (n == -ENOTTY)
		n = unknown_vcpus(devfd, pidfd, 0, fd, vcpus);
	return n;
}

/* ---------------------------------------------------------------- vmref */

/* Find (pid, fd) in @vms; its vCPU count, or -ESRCH / -EBADF. */
static int find_vm(const struct kvmstats_vm_info *vms, int n, pid_t pid, int fd,
		   unsigned int *nr_vcpus)
{
	bool pid_seen = false;
	int i;

	for (i = 0; i < n; i++) {
		if (vms[i].pid != pid)
			continue;
		pid_seen = true;
		if (vms[i].fd == fd) {
			*nr_vcpus = vms[i].nr_vcpus;
			return 0;
		}
	}
	return pid_seen ? -EBADF : -ESRCH;
}

/* 1 if the process of @pidfd has exited, 0 if not, or -errno. */
static int pidfd_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int r;

	do {
		r = poll(&p, 1, 0);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (p.revents & POLLNVAL)
		return -EBADF;
	return r > 0;
}

int kvmstats_vmref_open(int devfd, pid_t pid, int fd, unsigned int flags,
			struct kvmstats_vmref **ref)
{
	struct kvmstats_vm_info *vms = NULL;
	struct kvmstats_vmref *r;
	int n, err;

	if (!ref || pid <= 0 || fd < 0 ||
	    (flags & ~(KVMSTATS_VMREF_PID | KVMSTATS_VMREF_NATIVE)) ||
	    (flags & KVMSTATS_VMREF_PID && flags & KVMSTATS_VMREF_NATIVE))
		return -EINVAL;
	*ref = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->devfd = devfd;
	r->pid = pid;
	r->fd = fd;
	r->pidfd = -1;
	r->mode = BY_PID;
	if (flags & KVMSTATS_VMREF_NATIVE) {
		r->mode = NATIVE;
		err = native_vmref_open(r);
		if (err)
			goto err_free;
		*ref = r;
		return 0;
	}
	if (!(flags & KVMSTATS_VMREF_PID)) {
		r->pidfd = (int)syscall(__NR_pidfd_open, pid, 0);
		if (r->pidfd < 0) {
			err = -errno;
			r->pidfd = -1;
			if (err != -ENOSYS)
				goto err_free;
		}
	}
	if (r->pidfd >= 0) {
		n = kvmstats_list_pidfd(devfd, r->pidfd, &vms);
		if (n >= 0) {
			r->mode = BY_PIDFD;
			err = find_vm(vms, n, pid, fd, &r->nr_vcpus);
			/* The pidfd's process is @pid: no such fd is EBADF. */
			if (err == -ESRCH)
				err = -EBADF;
			goto out;
		}
		if (n != -ENOTTY) {
			err = n;
			goto err_free;
		}
	}
	/* Pid addressing: a version 1 device, or no pidfd. */
	n = kvmstats_list_vms(devfd, &vms);
	if (n < 0) {
		err = n;
		goto err_free;
	}
	err = find_vm(vms, n, pid, fd, &r->nr_vcpus);
	if (!err && r->pidfd >= 0 && pidfd_exited(r->pidfd) != 0)
		err = -ESRCH; /* listed under a pid that has gone since */
out:
	free(vms);
	if (err)
		goto err_free;
	*ref = r;
	return 0;

err_free:
	if (r->pidfd >= 0)
		close(r->pidfd);
	free(r);
	return err;
}

void kvmstats_vmref_free(struct kvmstats_vmref *ref)
{
	if (!ref)
		return;
	if (ref->pidfd >= 0)
		close(ref->pidfd);
	free(ref);
}

pid_t kvmstats_vmref_pid(const struct kvmstats_vmref *ref)
{
	return ref->pid;
}

int kvmstats_vmref_fd(const struct kvmstats_vmref *ref)
{
	return ref->fd;
}

int kvmstats_vmref_pidfd(const struct kvmstats_vmref *ref)
{
	return ref->pidfd;
}

int kvmstats_vmref_by_pidfd(const struct kvmstats_vmref *ref)
{
	int mode = __atomic_load_n(&ref->mode, __ATOMIC_RELAXED);

	return mode == BY_PIDFD || mode == NATIVE;
}

int kvmstats_vmref_native(const struct kvmstats_vmref *ref)
{
	return ref->mode == NATIVE;
}

unsigned int kvmstats_vmref_nr_vcpus(const struct kvmstats_vmref *ref)
{
	return ref->nr_vcpus;
}

int kvmstats_vmref_get_stats_fd(struct kvmstats_vmref *ref, int vcpu)
{
	int sfd, gone;

	if (!ref)
		return -EINVAL;
	if (ref->mode == NATIVE)
		return native_get_stats_fd(ref->pidfd, ref->pid, ref->fd, vcpu);
	if (kvmstats_vmref_by_pidfd(ref)) {
		sfd = kvmstats_get_stats_fd_pidfd(ref->devfd, ref->pidfd,
						  ref->fd, vcpu);
		if (sfd != -EINVAL)
			return sfd;
		/*
		 * EINVAL is a device that does not know the flag (our pidfd
		 * is a pidfd and @vcpu >= -1 passes, so nothing else of the
		 * request is wrong) -- or a @vcpu < -1 from the caller.
		 */
		if (vcpu < -1)
			return sfd;
		__atomic_store_n(&ref->mode, BY_PID, __ATOMIC_RELAXED);
	}
	sfd = kvmstats_get_stats_fd(ref->devfd, ref->pid, ref->fd, vcpu);
	if (sfd < 0 || ref->pidfd < 0)
		return sfd;
	/*
	 * Alive after the ioctl: the pid named the pidfd's process all along,
	 * so the stats fd is of the process we hold.
	 */
	gone = pidfd_exited(ref->pidfd);
	if (gone) {
		close(sfd);
		return gone < 0 ? gone : -ESRCH;
	}
	return sfd;
}

int kvmstats_vmref_file_open(struct kvmstats_vmref *ref, int vcpu,
			     unsigned int adopt_flags,
			     struct kvmstats_file **file)
{
	int sfd, err;

	if (!file)
		return -EINVAL;
	*file = NULL;
	sfd = kvmstats_vmref_get_stats_fd(ref, vcpu);
	if (sfd < 0)
		return sfd;
	err = kvmstats_file_adopt(sfd, adopt_flags, file);
	if (err)
		close(sfd);
	return err;
}

int kvmstats_vmref_exited(const struct kvmstats_vmref *ref)
{
	if (!ref)
		return -EINVAL;
	if (ref->pidfd < 0)
		return -EOPNOTSUPP;
	return pidfd_exited(ref->pidfd);
}

int kvmstats_vmref_list_vcpus(struct kvmstats_vmref *ref,
			      struct kvmstats_vcpu_info **vcpus)
{
	int n, gone;

	if (!ref || !vcpus)
		return -EINVAL;
	*vcpus = NULL;
	if (ref->mode == NATIVE) {
		n = kvmstats_native_list_vcpus(ref->pid, ref->fd, vcpus);
	} else if (kvmstats_vmref_by_pidfd(ref)) {
		return kvmstats_list_vcpus_pidfd(ref->devfd, ref->pidfd,
						 ref->fd, vcpus);
	} else {
		n = kvmstats_list_vcpus(ref->devfd, ref->pid, ref->fd, vcpus);
	}
	if (n < 0 || ref->pidfd < 0)
		return n;
	/* Alive after the ioctl: the pid named the pidfd's process. */
	gone = pidfd_exited(ref->pidfd);
	if (gone) {
		free(*vcpus);
		*vcpus = NULL;
		return gone < 0 ? gone : -ESRCH;
	}
	return n;
}

/* ------------------------------------------------- scheduler figures */

/*
 * Read a small file @name under @dirfd into @buf (NUL-terminated): its
 * length, or -errno.
 */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t len)
{
	size_t n = 0;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, len - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* An unsigned decimal at *@p (after spaces); advances *@p.  false: none. */
static bool next_u64(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	while (*s == ' ')
		s++;
	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*v = x;
	return true;
}

/* Errors of openat() under a task directory, as the header says them. */
static int task_errno(int err)
{
	return err == -ENOENT ? -ESRCH : err == -EPERM ? -EACCES : err;
}

int kvmstats_thread_sched_at(int dirfd, pid_t tid, unsigned int flags,
			     struct kvmstats_sched *sched)
{
	char path[64], buf[1024];
	const char *p;
	uint64_t v[3];
	ssize_t n;
	int tfd, i;

	if (!sched || tid <= 0 || (flags & ~KVMSTATS_SCHED_LAST_CPU))
		return -EINVAL;
	memset(sched, 0, sizeof(*sched));
	sched->last_cpu = -1;
	snprintf(path, sizeof(path), "task/%d", (int)tid);
	tfd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (tfd < 0)
		return task_errno(-errno);
	/* The thread is there: a missing schedstat is a kernel without. */
	n = read_at(tfd, "schedstat", buf, sizeof(buf));
	if (n == -ENOENT) {
		close(tfd);
		return -EOPNOTSUPP;
	}
	if (n < 0) {
		close(tfd);
		return task_errno((int)n);
	}
	p = buf;
	for (i = 0; i < 3; i++) {
		if (!next_u64(&p, &v[i])) {
			close(tfd);
			return -EBADMSG;
		}
	}
	/*
	 * A kernel whose scheduler statistics are off prints "0 0 0"; a
	 * thread that has run (the device names only those) has run for
	 * some time, so that is no figure.
	 */
	if (!v[0] && !v[1] && !v[2]) {
		close(tfd);
		return -EOPNOTSUPP;
	}
	sched->cpu_ns = v[0];
	sched->wait_ns = v[1];
	sched->timeslices = v[2];
	if (flags & KVMSTATS_SCHED_LAST_CPU) {
		uint64_t cpu = 0;

		n = read_at(tfd, "stat", buf, sizeof(buf));
		if (n < 0) {
			close(tfd);
			return task_errno((int)n);
		}
		/*
		 * Field 2 is the command name in parentheses and may hold
		 * anything, ')' and spaces too: count from the last ')'.
		 * The next is field 3; field 39 is the CPU it last ran on.
		 */
		p = strrchr(buf, ')');
		if (!p) {
			close(tfd);
			return -EBADMSG;
		}
		p++;
		for (i = 3; i <= 39 && p; i++) {
			while (*p == ' ')
				p++;
			if (i == 39)
				break;
			p = strchr(p, ' ');
		}
		if (!p || !next_u64(&p, &cpu) || cpu > INT32_MAX) {
			close(tfd);
			return -EBADMSG;
		}
		sched->last_cpu = (int32_t)cpu;
	}
	close(tfd);
	return 0;
}

/*
 * Is /proc the caller's pid namespace's?  0 if so; -EXDEV if its
 * /proc/self is another pid (or none: the caller has no pid there);
 * -ENOENT without a procfs at /proc.
 */
static int proc_is_ours(void)
{
	char link[32];
	struct statfs fs;
	ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);

	if (n < 0) {
		if (statfs("/proc", &fs) ||
		    fs.f_type != 0x9fa0 /* PROC_SUPER_MAGIC */)
			return -ENOENT;
		return -EXDEV;
	}
	link[n] = '\0';
	return strtol(link, NULL, 10) == (long)getpid() ? 0 : -EXDEV;
}

int kvmstats_thread_sched(pid_t pid, pid_t tid, unsigned int flags,
			  struct kvmstats_sched *sched)
{
	char path[32];
	int dfd, err;

	if (!sched || pid <= 0 || tid <= 0 ||
	    (flags & ~KVMSTATS_SCHED_LAST_CPU))
		return -EINVAL;
	memset(sched, 0, sizeof(*sched));
	sched->last_cpu = -1;
	err = proc_is_ours();
	if (err)
		return err;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		err = -errno;
		if (err != -ENOENT)
			return task_errno(err);
		/*
		 * No /proc/PID: gone, or hidden by hidepid=invisible.  The
		 * pid namespace is /proc's (checked above), so kill() of
		 * signal 0 tells which: it finds a process /proc hides.
		 */
		if (kill(pid, 0) && errno == ESRCH)
			return -ESRCH;
		return -EACCES;
	}
	err = kvmstats_thread_sched_at(dfd, tid, flags, sched);
	close(dfd);
	return err;
}

/* ---------------------------------------------------------------- files */

/* pread exactly @len bytes, or fail: -errno, or -EBADMSG if short. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EBADMSG;
		done += (size_t)r;
	}
	return 0;
}

/* Do [a, a+alen) and [b, b+blen) overlap?  (Empty ranges never do.) */
static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	if (!alen || !blen)
		return false;
	return a < b + blen && b < a + alen;
}

/*
 * Does the library understand @d?  The checks of kvm_binary_stats_test: a
 * known type, unit and base, no other flag bits, an exponent whose sign
 * fits the unit, one value for scalars, a bucket size for linear
 * histograms only.  A descriptor failing them is well formed but beyond
 * what this library knows (a newer kernel's): it is skipped, not fatal.
 */
static bool desc_known(const struct stats_desc *d)
{
	unsigned int type = d->flags & TYPE_MASK;
	unsigned int unit = (d->flags & UNIT_MASK) >> UNIT_SHIFT;
	unsigned int base = (d->flags & BASE_MASK) >> BASE_SHIFT;

	if ((d->flags & ~KNOWN_FLAGS) || type > KVMSTATS_LOG_HIST ||
	    unit > KVMSTATS_UNIT_BOOLEAN || base > KVMSTATS_BASE_POW2)
		return false;
	switch (unit) {
	case KVMSTATS_UNIT_NONE:
	case KVMSTATS_UNIT_BYTES:
	case KVMSTATS_UNIT_CYCLES:
		if (d->exponent < 0)
			return false;
		break;
	case KVMSTATS_UNIT_SECONDS:
		if (d->exponent > 0)
			return false;
		break;
	case KVMSTATS_UNIT_BOOLEAN:
		if (d->exponent != 0 || type == KVMSTATS_LOG_HIST)
			return false;
		break;
	}
	if ((type == KVMSTATS_LINEAR_HIST) != (d->bucket_size != 0))
		return false;
	/* Scalars are one value each (api.rst); we rely on it. */
	if (type <= KVMSTATS_PEAK && d->size != 1)
		return false;
	return true;
}

static void file_release(struct kvmstats_file *f)
{
	free(f->stats);
	free(f->skipped);
	free(f->names);
	free(f->id);
	free(f);
}

int kvmstats_file_adopt(int statsfd, unsigned int flags,
			struct kvmstats_file **file)
{
	struct stats_header h;
	struct kvmstats_file *f;
	unsigned char *descs = NULL;
	void *probe = NULL;
	uint64_t stride, desc_bytes, data_size = 0;
	unsigned int i;
	int err;

	if (!file || statsfd < 0 || (flags & ~KVMSTATS_ADOPT_BORROW))
		return -EINVAL;
	*file = NULL;

	err = pread_all(statsfd, &h, sizeof(h), 0);
	if (err)
		return err;

	/* The header: what kvm_binary_stats_test checks, and bounds. */
	if (h.name_size == 0 || h.name_size > MAX_NAME_SIZE)
		return -EBADMSG;
	if (h.id_offset < sizeof(h) || h.desc_offset < sizeof(h) ||
	    h.data_offset < sizeof(h))
		return -EBADMSG;
	stride = sizeof(struct stats_desc) + h.name_size;
	desc_bytes = stride * h.num_desc;
	if (desc_bytes > MAX_DESC_BYTES)
		return -EBADMSG;
	if (overlap(h.id_offset, h.name_size, h.desc_offset, desc_bytes))
		return -EBADMSG;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = statsfd;
	f->borrowed = flags & KVMSTATS_ADOPT_BORROW;
	f->data_offset = h.data_offset;

	f->id = malloc(h.name_size);
	if (!f->id) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, f->id, h.name_size, h.id_offset);
	if (err)
		goto err_free;
	if (strnlen(f->id, h.name_size) == h.name_size) {
		err = -EBADMSG;
		goto err_free;
	}
	f->vcpu = strstr(f->id, "/vcpu-") != NULL;

	f->stats = calloc(h.num_desc ? h.num_desc : 1, sizeof(*f->stats));
	f->skipped = calloc(h.num_desc ? h.num_desc : 1, sizeof(*f->skipped));
	f->names = calloc(h.num_desc ? h.num_desc : 1, h.name_size);
	descs = malloc(desc_bytes ? desc_bytes : 1);
	if (!f->stats || !f->skipped || !f->names || !descs) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, descs, desc_bytes, h.desc_offset);
	if (err)
		goto err_free;

	f->nr = 0;
	for (i = 0; i < h.num_desc; i++) {
		const unsigned char *p = descs + i * stride;
		char *name = f->names + (size_t)i * h.name_size;
		struct kvmstats_stat *s;
		struct stats_desc d;
		uint64_t end;
		bool known;

		memcpy(&d, p, sizeof(d));
		memcpy(name, p + sizeof(d), h.name_size);
		/* What makes the file unreadable is fatal; the rest skips. */
		if (strnlen(name, h.name_size) == h.name_size || !name[0] ||
		    d.size == 0) {
			err = -EBADMSG;
			goto err_free;
		}
		known = desc_known(&d);
		s = known ? &f->stats[f->nr++] : &f->skipped[f->nskipped++];
		s->name = name;
		s->flags = d.flags;
		s->type = d.flags & TYPE_MASK;
		s->unit = (d.flags & UNIT_MASK) >> UNIT_SHIFT;
		s->base = (d.flags & BASE_MASK) >> BASE_SHIFT;
		s->exponent = d.exponent;
		s->size = d.size;
		s->bucket_size = d.bucket_size;
		s->offset = d.offset;
		if (!known)
			continue; /* not read: no part of the data block */
		end = (uint64_t)d.offset + (uint64_t)d.size * 8;
		if (end > data_size)
			data_size = end;
	}
	if (data_size > MAX_DATA_BYTES || data_size < (uint64_t)f->nr * 8) {
		err = -EBADMSG;
		goto err_free;
	}
	if (overlap(h.data_offset, data_size, h.desc_offset, desc_bytes) ||
	    overlap(h.data_offset, data_size, h.id_offset, h.name_size) ||
	    overlap(h.data_offset, data_size, 0, sizeof(h)) ||
	    overlap(h.desc_offset, desc_bytes, 0, sizeof(h)) ||
	    overlap(h.id_offset, h.name_size, 0, sizeof(h))) {
		err = -EBADMSG;
		goto err_free;
	}
	f->data_size = data_size;

	/* The data block must be there in full. */
	probe = malloc(data_size ? data_size : 1);
	if (!probe) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, probe, data_size, h.data_offset);
	if (err)
		goto err_free;

	free(probe);
	free(descs);
	*file = f;
	return 0;

err_free:
	free(probe);
	free(descs);
	file_release(f);
	return err;
}

int kvmstats_file_open(int devfd, pid_t pid, int fd, int vcpu,
		       struct kvmstats_file **file)
{
	int sfd = kvmstats_get_stats_fd(devfd, pid, fd, vcpu);
	int err;

	if (sfd < 0)
		return sfd;
	err = kvmstats_file_adopt(sfd, 0, file);
	if (err)
		close(sfd);
	return err;
}

void kvmstats_file_free(struct kvmstats_file *file)
{
	if (!file)
		return;
	if (!file->borrowed)
		close(file->fd);
	file_release(file);
}

int kvmstats_file_fd(const struct kvmstats_file *file)
{
	return file->fd;
}

const char *kvmstats_file_id(const struct kvmstats_file *file)
{
	return file->id;
}

int kvmstats_file_is_vcpu(const struct kvmstats_file *file)
{
	return file->vcpu;
}

unsigned int kvmstats_file_num_stats(const struct kvmstats_file *file)
{
	return file->nr;
}

const struct kvmstats_stat *kvmstats_file_stat(const struct kvmstats_file *file,
					       unsigned int i)
{
	return i < file->nr ? &file->stats[i] : NULL;
}

unsigned int kvmstats_file_num_skipped(const struct kvmstats_file *file)
{
	return file->nskipped;
}

const struct kvmstats_stat *
kvmstats_file_skipped(const struct kvmstats_file *file, unsigned int i)
{
	return i < file->nskipped ? &file->skipped[i] : NULL;
}

int kvmstats_file_find(const struct kvmstats_file *file, const char *name)
{
	unsigned int i;

	for (i = 0; i < file->nr; i++)
		if (!strcmp(file->stats[i].name, name))
			return (int)i;
	return -ENOENT;
}

size_t kvmstats_file_data_size(const struct kvmstats_file *file)
{
	return file->data_size;
}

uint64_t kvmstats_value(const struct kvmstats_stat *stat, const void *data,
			unsigned int i)
{
	const unsigned char *p = (const unsigned char *)data + stat->offset +
				 (size_t)i * sizeof(uint64_t);
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

int kvmstats_file_read(const struct kvmstats_file *file, void *buf, size_t len)
{
	ssize_t r;

	if (!buf || len < file->data_size)
		return -EINVAL;
	do {
		r = pread(file->fd, buf, file->data_size, file->data_offset);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return (size_t)r == file->data_size ? 0 : -EIO;
}

int kvmstats_sweep_new(int devfd, size_t max_batch,
		       struct kvmstats_sweep **sweep)
{
	struct kvmstats_sweep *s;

	if (!sweep)
		return -EINVAL;
	if (max_batch == 0 || max_batch > KVMSTATS_BATCH_MAX)
		max_batch = KVMSTATS_BATCH_MAX;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->devfd = devfd;
	s->no_batch = devfd < 0;
	s->max = max_batch;
	s->ops = calloc(max_batch, sizeof(*s->ops));
	s->index = calloc(max_batch, sizeof(*s->index));
	if (!s->ops || !s->index) {
		kvmstats_sweep_free(s);
		return -ENOMEM;
	}
	*sweep = s;
	return 0;
}

void kvmstats_sweep_free(struct kvmstats_sweep *sweep)
{
	if (!sweep)
		return;
	free(sweep->ops);
	free(sweep->index);
	free(sweep);
}

size_t kvmstats_sweep_batched(const struct kvmstats_sweep *sweep)
{
	return sweep->batched;
}

static void sample_pread(struct kvmstats_sample *s)
{
	s->result = kvmstats_file_read(s->file, s->buf, s->len);
}

/* One KVMSTATS_READ_BATCH of @n queued ops; false if the ioctl is missing. */
static bool flush_batch(struct kvmstats_sweep *sw,
			struct kvmstats_sample *samples, size_t n)
{
	struct kvmstats_read_batch b = {
		.nr = (uint32_t)n,
		.ops = (uintptr_t)sw->ops,
	};
	size_t k;

	if (ioctl(sw->devfd, KVMSTATS_READ_BATCH, &b) < 0) {
		/* A module without the ioctl, or a refusal as a whole. */
		if (errno == ENOTTY || errno == EINVAL)
			sw->no_batch = true;
		for (k = 0; k < n; k++)
			sample_pread(&samples[sw->index[k]]);
		return false;
	}
	for (k = 0; k < n; k++) {
		struct kvmstats_sample *s = &samples[sw->index[k]];
		int32_t r = sw->ops[k].result;

		if (r == -EINVAL) {
			/* Not one of ours (a native fd): pread it from now on. */
			__atomic_store_n(
				&((struct kvmstats_file *)s->file)->no_batch, 1,
				__ATOMIC_RELAXED);
			sample_pread(s);
		} else if (r < 0) {
			s->result = r;
		} else {
			s->result = (size_t)r == s->file->data_size ? 0 : -EIO;
			sw->batched++;
		}
	}
	return true;
}

int kvmstats_sweep_run(struct kvmstats_sweep *sweep,
		       struct kvmstats_sample *samples, size_t nr)
{
	size_t i, n = 0, failed = 0;

	if (!sweep || (!samples && nr))
		return -EINVAL;
	sweep->batched = 0;
	for (i = 0; i < nr; i++) {
		struct kvmstats_sample *s = &samples[i];
		const struct kvmstats_file *f = s->file;
		struct kvmstats_read_op *op;

		if (!f || !s->buf || s->len < f->data_size || s->reserved0 ||
		    s->reserved[0] || s->reserved[1] || s->reserved[2] ||
		    s->reserved[3]) {
			s->result = -EINVAL;
			continue;
		}
		if (sweep->no_batch ||
		    __atomic_load_n(&f->no_batch, __ATOMIC_RELAXED)) {
			sample_pread(s);
			continue;
		}
		op = &sweep->ops[n];
		memset(op, 0, sizeof(*op));
		op->fd = f->fd;
		op->offset = f->data_offset;
		op->buf = (uintptr_t)s->buf;
		op->len = (uint32_t)f->data_size;
		sweep->index[n++] = i;
		if (n == sweep->max) {
			flush_batch(sweep, samples, n);
			n = 0;
		}
	}
	if (n)
		flush_batch(sweep, samples, n);
	for (i = 0; i < nr; i++)
		if (samples[i].result)
			failed++;
	return (int)failed;
}

const char *kvmstats_type_name(enum kvmstats_type type)
{
	switch (type) {
	case KVMSTATS_CUMULATIVE:
		return "cumulative";
	case KVMSTATS_INSTANT:
		return "instant";
	case KVMSTATS_PEAK:
		return "peak";
	case KVMSTATS_LINEAR_HIST:
		return "linear-histogram";
	case KVMSTATS_LOG_HIST:
		return "log2-histogram";
	}
	return "unknown";
}

const char *kvmstats_unit_name(enum kvmstats_unit unit)
{
	switch (unit) {
	case KVMSTATS_UNIT_NONE:
		return NULL;
	case KVMSTATS_UNIT_BYTES:
		return "bytes";
	case KVMSTATS_UNIT_SECONDS:
		return "seconds";
	case KVMSTATS_UNIT_CYCLES:
		return "cycles";
	case KVMSTATS_UNIT_BOOLEAN:
		return "boolean";
	}
	return NULL;
}

int kvmstats_is_hist(const struct kvmstats_stat *stat)
{
	return stat->type == KVMSTATS_LINEAR_HIST ||
	       stat->type == KVMSTATS_LOG_HIST;
}

double kvmstats_scale_factor(const struct kvmstats_stat *stat)
{
	double b = stat->base == KVMSTATS_BASE_POW2 ? 2.0 : 10.0;

	return pow(b, stat->exponent);
}

double kvmstats_scale(const struct kvmstats_stat *stat, double raw)
{
	/* Divide for negative exponents: 1500 / 1e9 rounds better than * 1e-9. */
	if (stat->exponent < 0) {
		double b = stat->base == KVMSTATS_BASE_POW2 ? 2.0 : 10.0;

		return raw / pow(b, -stat->exponent);
	}
	return raw * kvmstats_scale_factor(stat);
}

int kvmstats_scale_str(const struct kvmstats_stat *stat, uint64_t raw,
		       char *buf, size_t len)
{
	char digits[32], out[96];
	int n, e = stat->exponent;

	if (!buf && len)
		return -EINVAL;
	if (e == 0)
		return snprintf(buf, len, "%llu", (unsigned long long)raw);
	if (stat->base == KVMSTATS_BASE_POW2) {
		if (e > 0 && e < 64 && raw <= (UINT64_MAX >> e))
			return snprintf(buf, len, "%llu",
					(unsigned long long)(raw << e));
		return snprintf(buf, len, "%.17g", kvmstats_scale(stat, raw));
	}
	n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)raw);
	if (e > 0) {
		if (raw == 0)
			return snprintf(buf, len, "0");
		if (e > 40)
			return snprintf(buf, len, "%.17g",
					kvmstats_scale(stat, raw));
		return snprintf(buf, len, "%s%0*d", digits, e, 0);
	}
	/* Negative exponent: move the decimal point -e places left. */
	e = -e;
	if (e > 40)
		return snprintf(buf, len, "%.17g", kvmstats_scale(stat, raw));
	if (n > e) {
		snprintf(out, sizeof(out), "%.*s.%s", n - e, digits,
			 digits + n - e);
	} else {
		snprintf(out, sizeof(out), "0.%0*d%s", e - n, 0, digits);
		if (e == n)
			snprintf(out, sizeof(out), "0.%s", digits);
	}
	/* Trim trailing zeros and a bare point. */
	n = (int)strlen(out);
	while (n > 0 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n > 0 && out[n - 1] == '.')
		out[--n] = '\0';
	return snprintf(buf, len, "%s", out);
}

int kvmstats_bucket_bounds(const struct kvmstats_stat *stat, unsigned int i,
			   double *lo, double *hi)
{
	double l, h;

	if (!kvmstats_is_hist(stat) || i >= stat->size)
		return -EINVAL;
	if (stat->type == KVMSTATS_LINEAR_HIST) {
		l = (double)i * stat->bucket_size;
		h = (double)(i + 1) * stat->bucket_size;
	} else {
		l = i == 0 ? 0.0 : ldexp(1.0, (int)i - 1);
		h = ldexp(1.0, (int)i);
	}
	if (i == stat->size - 1)
		h = INFINITY;
	if (lo)
		*lo = l;
	if (hi)
		*hi = h;
	return 0;
}

/* --------------------------------------------------------------- native */

/*
 * Without the module: where the kernel lets any holder of a VM or vCPU fd
 * ask it for KVM_GET_STATS_FD (the series in upstream/), a copy of the
 * VMM's fd taken with pidfd_getfd(2) is enough.  The VMs are found in
 * /proc/PID/fd of the processes the caller may inspect (the same ptrace
 * check pidfd_getfd() makes), as the links "anon_inode:kvm-vm" and
 * "anon_inode:kvm-vcpu:ID" that KVM's anonymous files show.
 *
 * What /proc does not say, and how it is guessed:
 *   - which VM a vCPU fd belongs to: in a process with one VM (every VMM
 *     we know of), that VM; with several, the VM whose fd is the closest
 *     below the vCPU's (the order in which a VMM makes a VM, then its
 *     vCPUs);
 *   - the vCPU index: vCPUs are numbered in the order of their fds, the
 *     order KVM_CREATE_VCPU made them in (the module's index is KVM's own);
 *   - one VM held by several processes (fork, SCM_RIGHTS, a monitor's own
 *     copy) is listed once, at the process whose thread made it (the VM's
 *     stats id "kvm-TID") when there is one, else at the lowest pid; two
 *     fds are the same file when kcmp(2) says so.
 */

#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438 /* the same on every architecture */
#endif
#define NATIVE_KCMP_FILE	0		/* <linux/kcmp.h> */
#define NATIVE_KVM_CREATE_VM	_IO(0xae, 0x01) /* <linux/kvm.h> */
#define NATIVE_KVM_GET_STATS_FD _IO(0xae, 0xce) /* <linux/kvm.h> */

#define NATIVE_VM_LINK	 "anon_inode:kvm-vm"
#define NATIVE_VCPU_LINK "anon_inode:kvm-vcpu:"

struct native_fd {
	int fd;
	int vcpu_id; /* -1 for a VM fd */
	int vm;	     /* a vCPU's VM: its index in the VM array, or -1 */
};

struct native_proc {
	int pid;
	struct native_fd *vms, *vcpus;
	unsigned int nr_vms, nr_vcpus;
};

static void native_proc_free(struct native_proc *p)
{
	free(p->vms);
	free(p->vcpus);
	p->vms = p->vcpus = NULL;
	p->nr_vms = p->nr_vcpus = 0;
}

static bool same_file(int pid1, int fd1, int pid2, int fd2)
{
	return syscall(SYS_kcmp, pid1, pid2, NATIVE_KCMP_FILE, fd1, fd2) == 0;
}

static int push_fd(struct native_fd **a, unsigned int *n, int fd, int vcpu_id)
{
	void *p = realloc(*a, (*n + 1) * sizeof(**a));

	if (!p)
		return -ENOMEM;
	*a = p;
	(*a)[*n].fd = fd;
	(*a)[*n].vcpu_id = vcpu_id;
	(*a)[*n].vm = -1;
	(*n)++;
	return 0;
}

/* What fd @name of /proc/PID/fd (@dirfd) is: 0 VM, 1 vCPU, -1 neither. */
static int native_kind(int dirfd, const char *name, int *vcpu_id)
{
	char link[64];
	ssize_t n = readlinkat(dirfd, name, link, sizeof(link) - 1);
	char *end;
	long id;

	if (n <= 0)
		return -1;
	link[n] = '\0';
	if (!strcmp(link, NATIVE_VM_LINK))
		return 0;
	if (strncmp(link, NATIVE_VCPU_LINK, strlen(NATIVE_VCPU_LINK)))
		return -1;
	errno = 0;
	id = strtol(link + strlen(NATIVE_VCPU_LINK), &end, 10);
	if (errno || *end || id < 0 || id > INT32_MAX)
		return -1;
	*vcpu_id = (int)id;
	return 1;
}

/*
 * The VM and vCPU fds of process @pid, a VM file held at several fds
 * counted once (at its lowest), each vCPU given its VM.  0, or -ESRCH (no
 * such process), -EPERM (the caller may not inspect it), -ENOMEM.
 */
static int native_scan_pid(int pid, struct native_proc *p)
{
	char path[64];
	struct dirent *e;
	unsigned int i, j;
	int dfd, kind, id, err = 0;
	DIR *d;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? -ESRCH :
		       errno == EACCES ? -EPERM :
					 -errno;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -ENOMEM;
	}
	while (!err && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		kind = native_kind(dfd, e->d_name, &id);
		if (kind == 0)
			err = push_fd(&p->vms, &p->nr_vms, atoi(e->d_name), -1);
		else if (kind == 1)
			err = push_fd(&p->vcpus, &p->nr_vcpus, atoi(e->d_name),
				      id);
	}
	closedir(d);
	if (err) {
		native_proc_free(p);
		return err;
	}
	/* In fd order (readdir gives it, but nothing promises it). */
	for (i = 1; i < p->nr_vms; i++)
		for (j = i; j > 0 && p->vms[j - 1].fd > p->vms[j].fd; j--) {
			struct native_fd t = p->vms[j];

			p->vms[j] = p->vms[j - 1];
			p->vms[j - 1] = t;
		}
	for (i = 1; i < p->nr_vcpus; i++)
		for (j = i; j > 0 && p->vcpus[j - 1].fd > p->vcpus[j].fd; j--) {
			struct native_fd t = p->vcpus[j];

			p->vcpus[j] = p->vcpus[j - 1];
			p->vcpus[j - 1] = t;
		}
	/* One entry per file: dup()ed fds of one VM or vCPU go. */
	for (i = 0; i < p->nr_vms; i++)
		for (j = i + 1; j < p->nr_vms;)
			if (same_file(pid, p->vms[i].fd, pid, p->vms[j].fd))
				memmove(&p->vms[j], &p->vms[j + 1],
					(--p->nr_vms - j) * sizeof(*p->vms));
			else
				j++;
	for (i = 0; i < p->nr_vcpus; i++)
		for (j = i + 1; j < p->nr_vcpus;)
			if (same_file(pid, p->vcpus[i].fd, pid, p->vcpus[j].fd))
				memmove(&p->vcpus[j], &p->vcpus[j + 1],
					(--p->nr_vcpus - j) *
						sizeof(*p->vcpus));
			else
				j++;
	/* Each vCPU to the closest VM fd below it, or the first VM. */
	for (i = 0; i < p->nr_vcpus && p->nr_vms; i++) {
		int vm = 0;

		for (j = 0; j < p->nr_vms; j++)
			if (p->vms[j].fd < p->vcpus[i].fd)
				vm = (int)j;
		p->vcpus[i].vm = vm;
	}
	return 0;
}

static unsigned int native_count_vcpus(const struct native_proc *p, int vm)
{
	unsigned int i, n = 0;

	for (i = 0; i < p->nr_vcpus; i++)
		n += p->vcpus[i].vm == vm;
	return n;
}

/* The fd of vCPU index @vcpu of VM @vm in @p, or -ENOENT. */
static int native_vcpu_fd(const struct native_proc *p, int vm, int vcpu,
			  int *vcpu_id)
{
	unsigned int i;
	int k = 0;

	for (i = 0; i < p->nr_vcpus; i++) {
		if (p->vcpus[i].vm != vm)
			continue;
		if (k++ == vcpu) {
			*vcpu_id = p->vcpus[i].vcpu_id;
			return p->vcpus[i].fd;
		}
	}
	return -ENOENT;
}

static int native_find_vm(const struct native_proc *p, int fd)
{
	unsigned int i;

	for (i = 0; i < p->nr_vms; i++)
		if (p->vms[i].fd == fd)
			return (int)i;
	return p->nr_vms || p->nr_vcpus ? -EINVAL : -EBADF;
}

/*
 * KVM_GET_STATS_FD on a copy of fd @fd of the process of @pidfd (@pid),
 * checked to be the file expected (@vcpu_id -1: a VM, else that vCPU):
 * the stats fd, or -errno; -EIO is the kernel refusing (an older kernel,
 * or a dead VM).
 */
static int native_stats_fd(int pidfd, int fd, int vcpu_id)
{
	char self[64], link[64];
	int copy, sfd, kind, id = -1, err;
	ssize_t n;

	copy = (int)syscall(__NR_pidfd_getfd, pidfd, fd, 0);
	if (copy < 0)
		return -errno;
	/* The fd may have been closed and reused since /proc showed it. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", copy);
	n = readlink(self, link, sizeof(link) - 1);
	kind = -1;
	if (n > 0) {
		link[n] = '\0';
		if (!strcmp(link, NATIVE_VM_LINK))
			kind = 0;
		else if (!strncmp(link, NATIVE_VCPU_LINK,
				  strlen(NATIVE_VCPU_LINK)))
			kind = 1, id = atoi(link + strlen(NATIVE_VCPU_LINK));
	}
	if (kind != (vcpu_id < 0 ? 0 : 1) || (kind == 1 && id != vcpu_id)) {
		close(copy);
		return vcpu_id < 0 ? -EBADF : -ENOENT;
	}
	sfd = ioctl(copy, NATIVE_KVM_GET_STATS_FD, 0);
	err = sfd < 0 ? -errno : 0;
	close(copy);
	return err ? err : sfd;
}

static int native_pidfd_open(int pid)
{
	int pidfd = (int)syscall(__NR_pidfd_open, pid, 0);

	return pidfd < 0 ? -errno : pidfd;
}

/* As kvmstats_native_get_stats_fd(), through @pidfd of process @pid. */
static int native_get_stats_fd(int pidfd, pid_t pid, int fd, int vcpu)
{
	struct native_proc p;
	int vm, vfd, id = -1, sfd, gone;

	if (pid <= 0 || fd < 0 || vcpu < -1)
		return -EINVAL;
	sfd = native_scan_pid(pid, &p);
	if (sfd < 0)
		return sfd;
	vm = native_find_vm(&p, fd);
	if (vm < 0) {
		native_proc_free(&p);
		return vm;
	}
	vfd = vcpu < 0 ? fd : native_vcpu_fd(&p, vm, vcpu, &id);
	native_proc_free(&p);
	if (vfd < 0)
		return vfd;
	sfd = native_stats_fd(pidfd, vfd, id);
	if (sfd < 0)
		return sfd;
	/* Alive after the copy: the pid named the pidfd's process. */
	gone = pidfd_exited(pidfd);
	if (gone) {
		close(sfd);
		return gone < 0 ? gone : -ESRCH;
	}
	return sfd;
}

int kvmstats_native_get_stats_fd(pid_t pid, int fd, int vcpu)
{
	int pidfd, sfd;

	if (pid <= 0)
		return -EINVAL;
	pidfd = native_pidfd_open(pid);
	if (pidfd < 0)
		return pidfd;
	sfd = native_get_stats_fd(pidfd, pid, fd, vcpu);
	close(pidfd);
	return sfd;
}

/* The id of a stats fd ("kvm-TID"), read into @id; 0 or -errno. */
static int native_stats_id(int sfd, char *id, size_t len)
{
	struct stats_header h;

	if (pread_all(sfd, &h, sizeof(h), 0) ||
	    pread_all(sfd, id, len - 1, h.id_offset))
		return -EIO;
	id[len - 1] = '\0';
	return 0;
}

/* 1 if the thread that made the VM at (@pid, @fd) is one of @pid's. */
static int native_is_creator(int pid, int fd)
{
	char id[64], path[96];
	int sfd, tid;

	sfd = kvmstats_native_get_stats_fd(pid, fd, -1);
	if (sfd < 0)
		return 0;
	if (native_stats_id(sfd, id, sizeof(id)) ||
	    sscanf(id, "kvm-%d", &tid) != 1) {
		close(sfd);
		return 0;
	}
	close(sfd);
	snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, tid);
	return access(path, F_OK) == 0;
}

struct native_vm {
	int pid, fd;
	unsigned int nr_vcpus;
	bool drop;
};

int kvmstats_native_list_vms(struct kvmstats_vm_info **vms)
{
	struct native_vm *all = NULL;
	struct kvmstats_vm_info *out;
	unsigned int n = 0, i, j, k;
	struct dirent *e;
	DIR *d;
	int err = 0;

	if (!vms)
		return -EINVAL;
	*vms = NULL;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (!err && (e = readdir(d))) {
		struct native_proc p;
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || e->d_name[0] == '0')
			continue;
		if (native_scan_pid((int)pid, &p))
			continue; /* gone, or not ours to inspect */
		for (i = 0; i < p.nr_vms && !err; i++) {
			void *a = realloc(all, (n + 1) * sizeof(*all));

			if (!a) {
				err = -ENOMEM;
				break;
			}
			all = a;
			all[n].pid = (int)pid;
			all[n].fd = p.vms[i].fd;
			all[n].nr_vcpus = native_count_vcpus(&p, (int)i);
			all[n].drop = false;
			n++;
		}
		native_proc_free(&p);
	}
	closedir(d);
	if (err) {
		free(all);
		return err;
	}
	/* A VM held by several processes: keep the one that made it. */
	for (i = 0; i < n; i++) {
		if (all[i].drop)
			continue;
		for (j = i + 1; j < n; j++) {
			if (all[j].drop || all[j].pid == all[i].pid ||
			    !same_file(all[i].pid, all[i].fd, all[j].pid,
				       all[j].fd))
				continue;
			k = native_is_creator(all[j].pid, all[j].fd) &&
					    !native_is_creator(all[i].pid,
							       all[i].fd) ?
				    i :
				    j;
			all[k].drop = true;
			if (k == i)
				break;
		}
	}
	for (i = k = 0; i < n; i++)
		k += !all[i].drop;
	if (!k) {
		free(all);
		return 0;
	}
	out = calloc(k, sizeof(*out));
	if (!out) {
		free(all);
		return -ENOMEM;
	}
	for (i = j = 0; i < n; i++) {
		if (all[i].drop)
			continue;
		out[j].pid = all[i].pid;
		out[j].fd = all[i].fd;
		out[j].nr_vcpus = all[i].nr_vcpus;
		j++;
	}
	free(all);
	*vms = out;
	return (int)k;
}

int kvmstats_native_list_vcpus(pid_t pid, int fd,
			       struct kvmstats_vcpu_info **vcpus)
{
	struct kvmstats_vcpu_info *out;
	struct native_proc p;
	unsigned int i, k = 0, nr;
	int vm, err;

	if (!vcpus || pid <= 0 || fd < 0)
		return -EINVAL;
	*vcpus = NULL;
	err = native_scan_pid(pid, &p);
	if (err)
		return err;
	vm = native_find_vm(&p, fd);
	if (vm < 0) {
		native_proc_free(&p);
		return vm;
	}
	nr = native_count_vcpus(&p, vm);
	if (!nr) {
		native_proc_free(&p);
		return 0;
	}
	out = calloc(nr, sizeof(*out));
	if (!out) {
		native_proc_free(&p);
		return -ENOMEM;
	}
	for (i = 0; i < p.nr_vcpus; i++) {
		if (p.vcpus[i].vm != vm)
			continue;
		out[k].index = k;
		out[k].vcpu_id = (uint32_t)p.vcpus[i].vcpu_id;
		out[k].flags = KVMSTATS_VCPU_NATIVE;
		k++;
	}
	native_proc_free(&p);
	*vcpus = out;
	return (int)nr;
}

/*
 * No VM to ask: make one in a child (its own address space) and ask for its
 * stats fd from here.  1, 0 (EIO: refused), or -errno: -ENODEV without
 * /dev/kvm, -EPERM where even a child may not be inspected.
 */
static int native_probe_own(void)
{
	int kvm, sv[2], pidfd, vmfd = -1, r;
	char done = 1;
	pid_t child;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return -ENODEV;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		r = -errno;
		close(kvm);
		return r;
	}
	child = fork();
	if (child < 0) {
		r = -errno;
		close(kvm);
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	if (!child) {
		/* Async-signal-safe calls only: the caller may be threaded. */
		vmfd = ioctl(kvm, NATIVE_KVM_CREATE_VM, 0);
		if (write(sv[1], &vmfd, sizeof(vmfd)) == sizeof(vmfd))
			(void)!read(sv[1], &done, 1);
		_exit(0);
	}
	close(kvm);
	close(sv[1]);
	r = read(sv[0], &vmfd, sizeof(vmfd)) == sizeof(vmfd) ? 0 : -EIO;
	if (!r && vmfd < 0)
		r = -ENODEV; /* the child could not make a VM */
	if (!r) {
		pidfd = native_pidfd_open(child);
		r = pidfd;
		if (pidfd >= 0) {
			r = native_stats_fd(pidfd, vmfd, -1);
			close(pidfd);
			if (r >= 0) {
				close(r);
				r = 1;
			} else if (r == -EIO) {
				r = 0;
			}
		}
	}
	(void)!write(sv[0], &done, 1);
	close(sv[0]);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	return r;
}

/*
 * A kernel with the change refuses only a dead VM (KVM marks a VM dead
 * after an internal error), so EIO from the VMs of three processes is the
 * kernel's answer; asking every VM of a big host would cost a scan of
 * each VMM's fds per VM.
 */
#define NATIVE_PROBE_REFUSALS 3

int kvmstats_native_probe(unsigned int flags)
{
	struct kvmstats_vm_info *vms = NULL;
	int n, i, sfd, refused = 0;
	pid_t last = 0;

	n = kvmstats_native_list_vms(&vms);
	for (i = 0; i < n && refused < NATIVE_PROBE_REFUSALS; i++) {
		if (vms[i].pid == getpid() || vms[i].pid == last)
			continue; /* our own VMs prove nothing */
		sfd = kvmstats_native_get_stats_fd(vms[i].pid, vms[i].fd, -1);
		if (sfd >= 0) {
			close(sfd);
			free(vms);
			return 1;
		}
		if (sfd == -EIO) {
			refused++;
			last = vms[i].pid;
		}
	}
	free(vms);
	if (refused)
		return 0;
	if (flags & ~KVMSTATS_PROBE_ASK_ONLY)
		return -EINVAL;
	if (flags & KVMSTATS_PROBE_ASK_ONLY)
		return -ENOENT;
	return native_probe_own();
}

/* kvmstats_vmref_open() with KVMSTATS_VMREF_NATIVE: the pidfd, the VM. */
static int native_vmref_open(struct kvmstats_vmref *r)
{
	struct native_proc p;
	int vm, err;

	r->pidfd = native_pidfd_open(r->pid);
	if (r->pidfd < 0) {
		err = r->pidfd;
		r->pidfd = -1;
		return err;
	}
	err = native_scan_pid(r->pid, &p);
	if (err)
		return err;
	vm = native_find_vm(&p, r->fd);
	if (vm >= 0)
		r->nr_vcpus = native_count_vcpus(&p, vm);
	native_proc_free(&p);
	if (vm < 0)
		return vm == -EINVAL ? -EBADF : vm;
	/* Scanned under a pid that has gone since? */
	err = pidfd_exited(r->pidfd);
	return err ? (err < 0 ? err : -ESRCH) : 0;
}

const char *kvmstats_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EBADMSG:
		return "malformed KVM stats file";
	case ENOTTY:
		return "request not supported (not /dev/kvmstats, or an older kvmstats module)";
	case EXDEV:
		return "/proc is another pid namespace's";
	}
	s = strerrordesc_np(err);
	return s ? s : "unknown error";
}
