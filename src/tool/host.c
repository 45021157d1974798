// SPDX-License-Identifier: GPL-2.0-only
/*
 * Where VMs come from (struct source, for every command) and following
 * them over time (struct host, for `top` and `export`).
 *
 * The source is /dev/kvmstats, or KVM itself where the kernel gives any
 * holder of a VM's fds its stats (the native path, see source_path()), or
 * with KVMSTATS_STATS_DIR set a directory
 * standing for the host (for tests and profiling on machines without the
 * module): each subdirectory PID-FD is a VM whose files vm, vcpu0, vcpu1,
 * ... are stats files (recorded ones, say), read again at every sample,
 * with optionally comm and cmdline files in the format of /proc/PID/
 * (identity.c reads those); a subdirectory that disappears is a VM that
 * exited.  schema/vm and schema/vcpu, if there, stand for the module's
 * own descriptor tables.
 *
 * A followed VM of the device holds a struct kvmstats_vmref: its pidfd
 * names the process without a race when stats fds are opened, and tells
 * when the VMM has exited, so the next refresh lets go of it before it is
 * sampled again.  The stats fds are adopted borrowed: when a VM exits we
 * close them at once, so we never keep a dead VM's memory pinned, yet keep
 * the file objects for their descriptors and last values.
 *
 * Each sample also asks which thread runs each vCPU (one KVMSTATS_LIST_VCPUS
 * per VM) and reads what the scheduler gave it (one /proc read per vCPU);
 * see struct thrrec for the counters that come of it.
 *
 * Every object keeps its latest good sample and the one before, each with
 * its time.  A read that fails leaves the object out of this sample (it is
 * not fresh) and counted; its old values are never passed off as new, and
 * the next good read is compared with the last good one, over the time
 * between them.
 *
 * File descriptors: a VM takes one stats fd, one per vCPU and (device) one
 * pidfd.  The host holds at most fd_budget of them: the soft limit less
 * the fds open at host_init() and FD_RESERVE.  A VM that does not fit
 * whole is left out (and retried at each refresh), and so are vCPUs added
 * later that do not fit; both are counted and said in one line.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <linux/kvmstats.h>

#include "tool.h"

/* ---------------------------------------------------------------- source */

/* CAP_SYS_PTRACE in the effective set: every VMM may be inspected. */
static bool may_ptrace_all(void)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff & (1ULL << 19); /* CAP_SYS_PTRACE */
}

/*
 * Which path: KVMSTATS_PATH=module or native forces one; auto (or unset)
 * takes the native path where the kernel allows it (asked, never guessed
 * from its version: kvmstats_native_probe()) and the caller may inspect
 * every VMM (CAP_SYS_PTRACE), or where there is no device; else the
 * device.  The native path sees only the VMMs the caller may ptrace, the
 * device every VM its group may read: a user who reads the device through
 * its group keeps the device.
 */
void source_path(struct source *src)
{
	const char *d = getenv("KVMSTATS_STATS_DIR");
	const char *p = getenv("KVMSTATS_PATH");
	int probe, dev;

	src->dir = d && *d ? d : NULL;
	src->devfd = -1;
	src->native = false;
	if (src->dir) {
		snprintf(src->why, sizeof(src->why),
			 "KVMSTATS_STATS_DIR is set");
		return;
	}
	if (p && !strcmp(p, "module")) {
		snprintf(src->why, sizeof(src->why), "KVMSTATS_PATH=module");
		return;
	}
	if (p && !strcmp(p, "native")) {
		src->native = true;
		snprintf(src->why, sizeof(src->why), "KVMSTATS_PATH=native");
		return;
	}
	if (p && *p && strcmp(p, "auto")) {
		errmsg("KVMSTATS_PATH=%s: use module, native or auto", p);
		exit(EXIT_USAGE);
	}
	/*
	 * Once per process (an exporter retrying a missing device would ask
	 * again).  With the device there and no VM to ask, take the device
	 * rather than make a VM just to ask: that VM would show in the
	 * listings of everyone else reading the device meanwhile.
	 */
	static int asked = 2;

	if (asked == 2) {
		dev = kvmstats_open_device();
		if (dev >= 0)
			close(dev);
		asked = kvmstats_native_probe(
			dev >= 0 ? KVMSTATS_PROBE_ASK_ONLY : 0);
		if (asked == -ENOENT)
			asked = 3;
	}
	if (asked == 3) {
		snprintf(
			src->why, sizeof(src->why),
			"no VM to ask whether the kernel gives other processes stats fds, and the device is there");
		return;
	}
	probe = asked;
	if (probe != 1) {
		snprintf(
			src->why, sizeof(src->why), "%s",
			probe == 0 ?
				"the kernel refuses KVM_GET_STATS_FD to other processes than a VM's creator" :
				"whether the kernel gives other processes stats fds could not be asked");
		if (probe < 0)
			snprintf(src->why + strlen(src->why),
				 sizeof(src->why) - strlen(src->why), " (%s)",
				 kvmstats_strerror(probe));
		return;
	}
	if (may_ptrace_all()) {
		src->native = true;
		snprintf(
			src->why, sizeof(src->why),
			"the kernel gives any holder of a VM's fds its stats, and this process may inspect every VMM");
		return;
	}
	dev = kvmstats_open_device();
	if (dev >= 0) {
		close(dev);
		snprintf(
			src->why, sizeof(src->why),
			"the kernel would allow it, but without CAP_SYS_PTRACE only the device shows every VM");
		return;
	}
	src->native = true;
	snprintf(
		src->why, sizeof(src->why),
		"the kernel gives any holder of a VM's fds its stats, and there is no device (only the VMMs this user may ptrace)");
}

const char *source_name(const struct source *src)
{
	if (src->dir)
		return "KVMSTATS_STATS_DIR";
	return src->native ? "KVM (no module)" : "/dev/kvmstats";
}

void source_init(struct source *src)
{
	source_path(src);
	if (!src->dir && !src->native)
		src->devfd = open_device();
}

int source_open(struct source *src)
{
	source_path(src);
	if (src->dir || src->native)
		return 0;
	src->devfd = kvmstats_open_device();
	if (src->devfd < 0) {
		int err = src->devfd;

		src->devfd = -1;
		return err;
	}
	return 0;
}

void source_fini(struct source *src)
{
	if (src->devfd >= 0)
		close(src->devfd);
	src->devfd = -1;
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
			if (access(path, F_OK))
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
	/* In (pid, fd) order, as the device lists them. */
	for (int i = 1; i < n; i++) {
		struct kvmstats_vm_info t = list[i];
		int j = i;

		while (j > 0 &&
		       (list[j - 1].pid > t.pid ||
			(list[j - 1].pid == t.pid && list[j - 1].fd > t.fd))) {
			list[j] = list[j - 1];
			j--;
		}
		list[j] = t;
	}
	*out = list;
	return n;
}

int source_list(const struct source *src, struct kvmstats_vm_info **vms)
{
	if (src->dir)
		return dir_list_vms(src->dir, vms);
	if (src->native)
		return kvmstats_native_list_vms(vms);
	return kvmstats_list_vms(src->devfd, vms);
}

int source_list_error(const struct source *src, int err)
{
	if (src->dir) {
		errmsg("KVMSTATS_STATS_DIR %s: %s", src->dir,
		       kvmstats_strerror(err));
		return err == -ENOENT || err == -ENOTDIR ? EXIT_NODEV :
							   exit_for(err);
	}
	errmsg("listing VMs (%s): %s", source_name(src),
	       kvmstats_strerror(err));
	return exit_for(err);
}

int source_vmref(const struct source *src, int pid, int fd,
		 struct kvmstats_vmref **ref)
{
	*ref = NULL;
	if (src->dir)
		return 0; /* its pids are made up: nothing to hold */
	if (src->native)
		return kvmstats_vmref_open(-1, pid, fd, KVMSTATS_VMREF_NATIVE,
					   ref);
	return kvmstats_vmref_open(src->devfd, pid, fd, 0, ref);
}

int source_file_open(const struct source *src, struct kvmstats_vmref *ref,
		     int pid, int fd, int vcpu, unsigned int flags,
		     struct kvmstats_file **f)
{
	char path[4096];
	int sfd, err;

	*f = NULL;
	if (ref)
		return kvmstats_vmref_file_open(ref, vcpu, flags, f);
	if (src->native) {
		sfd = kvmstats_native_get_stats_fd(pid, fd, vcpu);
	} else if (!src->dir) {
		sfd = kvmstats_get_stats_fd(src->devfd, pid, fd, vcpu);
	} else {
		if (vcpu < 0)
			snprintf(path, sizeof(path), "%s/%d-%d/vm", src->dir,
				 pid, fd);
		else
			snprintf(path, sizeof(path), "%s/%d-%d/vcpu%d",
				 src->dir, pid, fd, vcpu);
		sfd = open(path, O_RDONLY | O_CLOEXEC);
		if (sfd < 0)
			sfd = -errno;
		/* As the device says it: no VM is ESRCH, no vCPU ENOENT. */
		if (sfd == -ENOENT && vcpu < 0)
			sfd = -ESRCH;
	}
	if (sfd < 0)
		return sfd;
	err = kvmstats_file_adopt(sfd, flags, f);
	if (err)
		close(sfd);
	return err;
}

int source_schema(const struct source *src, bool vcpu, struct kvmstats_file **f)
{
	char path[4096];
	int sfd, err;

	*f = NULL;
	if (src->native)
		return -EOPNOTSUPP; /* KVM gives its tables with a VM only */
	if (!src->dir) {
		/* The module's own tables (API 4); -ENOTTY from an older one. */
		struct kvmstats_schema_request req = {
			.flags = vcpu ? KVMSTATS_SCHEMA_VCPU : 0,
		};

		sfd = ioctl(src->devfd, KVMSTATS_GET_SCHEMA_FD, &req);
		if (sfd < 0)
			return errno == ENOTTY || errno == EINVAL ?
				       -EOPNOTSUPP :
				       -errno;
	} else {
		snprintf(path, sizeof(path), "%s/schema/%s", src->dir,
			 vcpu ? "vcpu" : "vm");
		sfd = open(path, O_RDONLY | O_CLOEXEC);
		if (sfd < 0)
			return -errno;
	}
	err = kvmstats_file_adopt(sfd, 0, f);
	if (err)
		close(sfd);
	return err;
}

/* -------------------------------------------------------------- messages */

static void host_msg(struct host *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Say @fmt on standard error now, or, while the full screen of `top` is
 * up, keep it for host_flush_msgs() (at most 100; then a count).
 */
static void host_msg(struct host *h, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	void *a;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!h->queue_msgs) {
		errmsg("%s", line);
		return;
	}
	if (h->nmsgs >= 100) {
		h->nmsgs++;
		return;
	}
	a = realloc(h->msgs, (h->nmsgs + 1) * sizeof(*h->msgs));
	if (!a)
		return;
	h->msgs = a;
	h->msgs[h->nmsgs] = strdup(line);
	if (h->msgs[h->nmsgs])
		h->nmsgs++;
}

void host_flush_msgs(struct host *h)
{
	size_t i;

	for (i = 0; i < h->nmsgs && i < 100; i++) {
		errmsg("%s", h->msgs[i]);
		free(h->msgs[i]);
	}
	if (h->nmsgs > 100)
		errmsg("(%zu more messages)", h->nmsgs - 100);
	free(h->msgs);
	h->msgs = NULL;
	h->nmsgs = 0;
}

static void host_say(void *ctx, const char *line)
{
	host_msg(ctx, "%s", line);
}

/* ------------------------------------------------------------------ host */

/* fds open now (those of /proc/self/fd, less the one reading it). */
static size_t fds_in_use(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 16;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0;
}

int host_init(struct host *h, const struct source *src)
{
	struct rlimit rl;
	size_t used;

	memset(h, 0, sizeof(*h));
	h->src = *src;
	used = fds_in_use() + FD_RESERVE;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_cur = 1024;
	h->nofile = rl.rlim_cur == RLIM_INFINITY ? (unsigned long)-1 :
						   (unsigned long)rl.rlim_cur;
	h->fd_budget = h->nofile > used ? h->nofile - used : 0;
	h->threads = true;
	return kvmstats_sweep_new(src->dir ? -1 : src->devfd, 0, &h->sweep);
}

static bool is_fd_limit(int err)
{
	return err == -EMFILE || err == -ENFILE;
}

/* The VM or its process is gone: not an error, it just is not there. */
static bool is_gone(int err)
{
	return err == -ESRCH || err == -EBADF;
}

static void obj_free(struct host *h, struct objrec *o, bool fd_open)
{
	if (o->file) {
		if (fd_open) {
			close(kvmstats_file_fd(o->file));
			h->nfds--;
		}
		kvmstats_file_free(o->file);
		h->gen++;
	}
	free(o->cur);
	free(o->prev);
	free(o->base);
	memset(o, 0, sizeof(*o));
}

/* Open the VM (@vcpu -1) or vCPU file of @v into @o. */
static int obj_open(struct host *h, struct vmrec *v, int vcpu, struct objrec *o)
{
	size_t sz;
	int err;

	memset(o, 0, sizeof(*o));
	if (h->nfds + 1 > h->fd_budget)
		return -EMFILE;
	err = source_file_open(&h->src, v->ref, v->pid, v->fd, vcpu,
			       KVMSTATS_ADOPT_BORROW, &o->file);
	if (err)
		return err;
	h->nfds++;
	h->gen++;
	skipped_msgs(o->file, v->pid, v->fd, host_say, h);
	sz = kvmstats_file_data_size(o->file);
	o->cur = calloc(1, sz ? sz : 1);
	o->prev = calloc(1, sz ? sz : 1);
	if (!o->cur || !o->prev) {
		obj_free(h, o, true);
		return -ENOMEM;
	}
	return 0;
}

/* Close every fd of @v (its process exited, or we are done with it). */
static void vm_close_fds(struct host *h, struct vmrec *v)
{
	unsigned int i;

	if (v->state != VM_OPEN)
		return;
	if (v->vm.file) {
		close(kvmstats_file_fd(v->vm.file));
		h->nfds--;
	}
	for (i = 0; i < v->nv; i++) {
		close(kvmstats_file_fd(v->vcpu[i].file));
		h->nfds--;
	}
	if (v->ref) {
		h->nfds -= kvmstats_vmref_pidfd(v->ref) >= 0;
		kvmstats_vmref_free(v->ref);
		v->ref = NULL;
	}
	v->state = VM_EXITED;
	h->gen++;
}

static void vm_free(struct host *h, struct vmrec *v)
{
	bool open = v->state == VM_OPEN;
	unsigned int i;

	for (i = 0; i < v->nv; i++)
		obj_free(h, &v->vcpu[i], open);
	obj_free(h, &v->vm, open);
	if (v->ref) {
		h->nfds -= kvmstats_vmref_pidfd(v->ref) >= 0;
		kvmstats_vmref_free(v->ref);
	}
	free(v->vcpu);
	free(v->sum);
	free(v->thr);
	memset(v, 0, sizeof(*v));
}

/* Open vCPUs nv .. nr_vcpus-1 of @v; v->vcpu_err says why any are not. */
static void vm_grow(struct host *h, struct vmrec *v)
{
	int err = 0;

	while (v->nv < v->nr_vcpus) {
		if (v->nv == v->vroom) {
			unsigned int room = v->vroom ? 2 * v->vroom : 4;
			void *a = realloc(v->vcpu, room * sizeof(*v->vcpu));

			if (!a) {
				err = -ENOMEM;
				break;
			}
			v->vcpu = a;
			v->vroom = room;
		}
		err = obj_open(h, v, (int)v->nv, &v->vcpu[v->nv]);
		if (err)
			break;
		v->nv++;
	}
	if (err && err != v->vcpu_err && !is_fd_limit(err) && !is_gone(err)) {
		h->n.errors++;
		host_msg(h, "VM %d:%d vCPU %u: %s", v->pid, v->fd, v->nv,
			 kvmstats_strerror(err));
	}
	v->vcpu_err = err;
}

/*
 * Open @v (listed with @nr_vcpus vCPUs): its vmref, VM file and vCPUs,
 * only if they all fit the fd budget.  0, or -errno; v->state says what
 * became of it.
 */
static int vm_open(struct host *h, struct vmrec *v, unsigned int nr_vcpus)
{
	bool device = !h->src.dir;
	int err;

	v->nr_vcpus = nr_vcpus;
	if (h->nfds + device + 1 + nr_vcpus > h->fd_budget) {
		v->state = VM_LEFT_OUT;
		return -EMFILE;
	}
	err = source_vmref(&h->src, v->pid, v->fd, &v->ref);
	if (!err && v->ref)
		h->nfds += kvmstats_vmref_pidfd(v->ref) >= 0;
	/* The names once the pidfd holds the process (no pid reuse). */
	if (!err)
		identity_read(&h->src, v->pid, v->fd, &v->id);
	if (!err && v->ref && kvmstats_vmref_exited(v->ref) == 1)
		err = -ESRCH;
	if (!err)
		err = obj_open(h, v, -1, &v->vm);
	if (err) {
		if (v->ref) {
			h->nfds -= kvmstats_vmref_pidfd(v->ref) >= 0;
			kvmstats_vmref_free(v->ref);
			v->ref = NULL;
		}
		v->state = is_fd_limit(err) ? VM_LEFT_OUT : VM_FAILED;
		return err;
	}
	v->state = VM_OPEN;
	vm_grow(h, v);
	return 0;
}

/* Mark the VMs whose process has exited (readable pidfd) as exited. */
static void poll_exits(struct host *h)
{
	struct pollfd *p;
	size_t i, n = 0;

	p = calloc(h->nvms ? h->nvms : 1, sizeof(*p));
	if (!p)
		return; /* the next listing notices them */
	for (i = 0; i < h->nvms; i++) {
		const struct vmrec *v = &h->vms[i];

		p[i].fd = -1;
		if (v->state == VM_OPEN && v->ref &&
		    kvmstats_vmref_pidfd(v->ref) >= 0) {
			p[i].fd = kvmstats_vmref_pidfd(v->ref);
			p[i].events = POLLIN;
			n++;
		}
	}
	if (n && poll(p, h->nvms, 0) > 0)
		for (i = 0; i < h->nvms; i++)
			if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP)))
				vm_close_fds(h, &h->vms[i]);
	free(p);
}

/* The line saying what the open file limit left out, in h->left_msg. */
static void left_out_msg(struct host *h)
{
	char vms[160] = "", vcpus[160] = "", msg[sizeof(h->left_msg)];
	unsigned int lv = 0, lc = 0, nvm = 0, nvc = 0, total_vcpus = 0;
	size_t i, o1 = 0, o2 = 0;

	for (i = 0; i < h->nvms; i++) {
		const struct vmrec *v = &h->vms[i];

		if (v->state == VM_EXITED)
			continue;
		total_vcpus += v->nr_vcpus;
		if (v->state == VM_LEFT_OUT) {
			lv++;
			lc += v->nr_vcpus;
			if (nvm++ < 3)
				o1 += (size_t)snprintf(vms + o1,
						       sizeof(vms) - o1,
						       " %d:%d", v->pid, v->fd);
		} else if (v->state == VM_OPEN && is_fd_limit(v->vcpu_err)) {
			lc += v->nr_vcpus - v->nv;
			if (nvc++ < 3)
				o2 += (size_t)snprintf(
					vcpus + o2, sizeof(vcpus) - o2,
					" %d:%d/%u-%u", v->pid, v->fd, v->nv,
					v->nr_vcpus - 1);
		}
	}
	msg[0] = '\0';
	if (lv || lc)
		snprintf(
			msg, sizeof(msg),
			"open file limit (%lu) reached: left out %u of %zu VMs%s%s and %u of %u vCPUs%s%s; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=)",
			h->nofile, lv, h->nvms, vms, nvm > 3 ? " ..." : "", lc,
			total_vcpus, vcpus, nvc > 3 ? " ..." : "");
	if (strcmp(msg, h->left_msg)) {
		snprintf(h->left_msg, sizeof(h->left_msg), "%s", msg);
		if (msg[0])
			host_msg(h, "%s", msg);
	}
}

int host_refresh(struct host *h)
{
	struct kvmstats_vm_info *list;
	size_t i, j, k, next = 0;
	int n, err;

	n = source_list(&h->src, &list);
	if (n < 0)
		return n;
	for (i = 0; i < h->nvms; i++)
		h->vms[i].listed = false;
	for (j = 0; j < (size_t)n; j++) {
		struct vmrec *v = NULL;

		/*
		 * The list is in (pid, fd) order, and so, but for VMs added
		 * since, are the VMs we follow: look from the one after the
		 * last found, so that a refresh takes a step per VM, not one
		 * per VM and VM followed.
		 */
		for (k = 0; k < h->nvms; k++) {
			i = next + k < h->nvms ? next + k : next + k - h->nvms;
			if (h->vms[i].state != VM_EXITED &&
			    h->vms[i].pid == list[j].pid &&
			    h->vms[i].fd == list[j].fd) {
				v = &h->vms[i];
				next = i + 1;
				break;
			}
		}
		if (v && v->state == VM_OPEN) {
			v->listed = true;
			if (list[j].nr_vcpus > v->nv) {
				v->nr_vcpus = list[j].nr_vcpus;
				vm_grow(h, v);
			}
			continue;
		}
		if (!v) {
			v = realloc(h->vms, (h->nvms + 1) * sizeof(*h->vms));
			if (!v) {
				free(list);
				return -ENOMEM;
			}
			h->vms = v;
			v = &h->vms[h->nvms++];
			memset(v, 0, sizeof(*v));
			v->pid = list[j].pid;
			v->fd = list[j].fd;
			v->state = VM_FAILED;
			h->gen++;
		}
		/* New, or left out or failed before: (re)try. */
		v->listed = true;
		{
			enum vmstate before = v->state;
			int before_err = v->vcpu_err;

			err = vm_open(h, v, list[j].nr_vcpus);
			if (err && is_gone(err))
				v->listed = false; /* exited since the list */
			else if (err && !is_fd_limit(err)) {
				h->n.errors++;
				if (before != VM_FAILED || before_err != err)
					host_msg(h, "VM %d:%d: %s", v->pid,
						 v->fd, kvmstats_strerror(err));
				v->vcpu_err = err;
			}
		}
	}
	free(list);
	/* Not listed any more: the process has exited.  Let go of the VM. */
	for (i = 0, j = 0; i < h->nvms; i++) {
		struct vmrec *v = &h->vms[i];

		if (!v->listed && v->state == VM_OPEN)
			vm_close_fds(h, v);
		if (!v->listed && v->state != VM_OPEN &&
		    v->state != VM_EXITED) {
			vm_free(h, v); /* never opened: nothing to show */
			h->gen++;
			continue;
		}
		if (i != j)
			h->vms[j] = *v;
		j++;
	}
	h->nvms = j;
	poll_exits(h);
	left_out_msg(h);
	return 0;
}

/* What each sample of a sweep is of. */
struct sample_ref {
	struct objrec *o;
	const struct vmrec *v;
	int vcpu;
};

static int add_sample(struct host *h, size_t *k, const struct vmrec *v,
		      int vcpu, struct objrec *o)
{
	void *t;

	if (*k == h->nsamples) {
		size_t room = h->nsamples ? 2 * h->nsamples : 64;
		void *a = realloc(h->samples, room * sizeof(*h->samples));

		if (!a)
			return -ENOMEM;
		h->samples = a;
		a = realloc(h->sref, room * sizeof(*h->sref));
		if (!a)
			return -ENOMEM;
		h->sref = a;
		h->nsamples = room;
	}
	/* Read into the older buffer; it becomes cur if the read works. */
	t = o->prev, o->prev = o->cur, o->cur = t;
	memset(&h->samples[*k], 0, sizeof(h->samples[*k]));
	h->samples[*k].file = o->file;
	h->samples[*k].buf = o->cur;
	h->samples[*k].len = kvmstats_file_data_size(o->file);
	h->sref[*k] = (struct sample_ref){ o, v, vcpu };
	(*k)++;
	return 0;
}

/* Say a read failure when an object starts failing (not at every sweep). */
static void read_failed(struct host *h, const struct sample_ref *r, int err)
{
	h->n.errors++;
	if (r->o->err == err)
		return;
	if (r->vcpu < 0)
		host_msg(h, "VM %d:%d: reading: %s (left out while it fails)",
			 r->v->pid, r->v->fd, kvmstats_strerror(err));
	else
		host_msg(
			h,
			"VM %d:%d vCPU %d: reading: %s (left out while it fails)",
			r->v->pid, r->v->fd, r->vcpu, kvmstats_strerror(err));
}

/* host->n for what the latest refresh and sample served and did not. */
static void count(struct host *h)
{
	struct host_counts *c = &h->n;
	unsigned int i, x;

	c->vms = c->vcpus = c->left_vms = c->left_vcpus = 0;
	c->failed_vms = c->failed_vcpus = 0;
	for (i = 0; i < h->nvms; i++) {
		const struct vmrec *v = &h->vms[i];

		switch (v->state) {
		case VM_EXITED:
			continue;
		case VM_LEFT_OUT:
			c->left_vms++;
			c->left_vcpus += v->nr_vcpus;
			continue;
		case VM_FAILED:
			c->failed_vms++;
			c->failed_vcpus += v->nr_vcpus;
			continue;
		case VM_OPEN:
			break;
		}
		if (v->vm.fresh)
			c->vms++;
		else
			c->failed_vms++;
		for (x = 0; x < v->nv; x++) {
			if (v->vcpu[x].fresh)
				c->vcpus++;
			else
				c->failed_vcpus++;
		}
		if (is_fd_limit(v->vcpu_err))
			c->left_vcpus += v->nr_vcpus - v->nv;
		else
			c->failed_vcpus += v->nr_vcpus - v->nv;
	}
}

/* New figures @sc of thread @t at @now: the counters move on. */
static void thread_account(struct thrrec *t, const struct kvmstats_sched *sc,
			   double now)
{
	if (!t->t_cur) {
		t->cpu_ns = sc->cpu_ns;
		t->wait_ns = sc->wait_ns;
		t->t_prev = 0;
	} else {
		t->prev_cpu_ns = t->cpu_ns;
		t->prev_wait_ns = t->wait_ns;
		t->t_prev = t->t_cur;
		/* Another thread: what it got before now is not this vCPU's. */
		if (t->fig_tid == t->tid) {
			if (sc->cpu_ns > t->fig_cpu)
				t->cpu_ns += sc->cpu_ns - t->fig_cpu;
			if (sc->wait_ns > t->fig_wait)
				t->wait_ns += sc->wait_ns - t->fig_wait;
		}
	}
	t->sched = *sc;
	t->fig_tid = t->tid;
	t->fig_cpu = sc->cpu_ns;
	t->fig_wait = sc->wait_ns;
	t->t_cur = now;
	t->fresh = true;
}

/* Which thread runs each vCPU of @v now, and what the scheduler gave it. */
static void sample_threads(struct host *h, struct vmrec *v, double now)
{
	struct kvmstats_vcpu_info *info = NULL;
	unsigned int i;
	int n;

	n = identity_vcpu_threads(&h->src, v->ref, v->pid, v->fd, v->nr_vcpus,
				  &info);
	if (n > 0 && (unsigned int)n > v->nthr) {
		struct thrrec *a = realloc(v->thr, (size_t)n * sizeof(*a));

		if (!a) {
			free(info);
			n = -ENOMEM;
		} else {
			memset(a + v->nthr, 0,
			       ((size_t)n - v->nthr) * sizeof(*a));
			v->thr = a;
			v->nthr = (unsigned int)n;
		}
	}
	for (i = 0; i < v->nthr; i++) {
		struct thrrec *t = &v->thr[i];
		struct kvmstats_sched sc;

		t->fresh = false;
		if (n < 0 || i >= (unsigned int)n) {
			t->err = n < 0 ? n : -ENOENT;
			continue;
		}
		t->tid = info[i].tid;
		t->flags = info[i].flags;
		t->err = 0;
		if (!t->tid)
			continue; /* the flags say why */
		t->err = identity_thread_sched(&h->src, v->pid, v->fd, t->tid,
					       0, &sc);
		if (!t->err)
			thread_account(t, &sc, now);
	}
	free(info);
}

bool host_thread_sum(const struct vmrec *v, uint64_t *cpu_ns, uint64_t *wait_ns)
{
	unsigned int i;

	*cpu_ns = *wait_ns = 0;
	if (!v->nr_vcpus || v->nthr < v->nr_vcpus)
		return false;
	for (i = 0; i < v->nr_vcpus; i++) {
		if (!v->thr[i].fresh)
			return false;
		*cpu_ns += v->thr[i].cpu_ns;
		*wait_ns += v->thr[i].wait_ns;
	}
	return true;
}

int host_sample(struct host *h)
{
	size_t i, k = 0;
	unsigned int x;
	double now;
	int err;

	for (i = 0; i < h->nvms; i++) {
		struct vmrec *v = &h->vms[i];

		if (v->state != VM_OPEN)
			continue;
		err = add_sample(h, &k, v, -1, &v->vm);
		for (x = 0; !err && x < v->nv; x++)
			err = add_sample(h, &k, v, (int)x, &v->vcpu[x]);
		if (err) {
			/* Nothing is read: undo the swaps, nothing is fresh. */
			for (i = 0; i < k; i++) {
				struct objrec *o = h->sref[i].o;
				void *t = o->prev;

				o->prev = o->cur, o->cur = t;
			}
			k = 0;
			break;
		}
	}
	if (!err)
		err = kvmstats_sweep_run(h->sweep, h->samples, k);
	now = now_mono();
	for (i = 0; i < k; i++) {
		const struct sample_ref *r = &h->sref[i];
		struct objrec *o = r->o;
		int res = err < 0 ? err : h->samples[i].result;

		if (res) {
			void *t = o->prev;

			/* cur stays the last good sample; prev is spoilt. */
			o->prev = o->cur, o->cur = t;
			o->t_prev = 0;
			o->fresh = false;
			read_failed(h, r, res);
		} else {
			o->t_prev = o->t_cur;
			o->t_cur = now;
			o->fresh = true;
		}
		o->err = res;
	}
	for (i = 0; h->threads && i < h->nvms; i++)
		if (h->vms[i].state == VM_OPEN)
			sample_threads(h, &h->vms[i], now);
	if (err < 0) {
		/* Whatever was not swapped in: not fresh either. */
		for (i = 0; i < h->nvms; i++) {
			h->vms[i].vm.fresh = false;
			for (x = 0; x < h->vms[i].nv; x++)
				h->vms[i].vcpu[x].fresh = false;
		}
	}
	count(h);
	return err < 0 ? err : 0;
}

void host_drop_exited(struct host *h)
{
	size_t i, j = 0;

	for (i = 0; i < h->nvms; i++) {
		if (h->vms[i].state != VM_EXITED) {
			h->vms[j++] = h->vms[i];
		} else {
			vm_free(h, &h->vms[i]);
			h->gen++;
		}
	}
	h->nvms = j;
}

int host_vcpu_sum(struct vmrec *v)
{
	const struct kvmstats_file *f0;
	unsigned int c, i, b, nr;
	size_t sz;

	if (v->state != VM_OPEN || !v->nv || v->nv < v->nr_vcpus)
		return -EAGAIN;
	f0 = v->vcpu[0].file;
	sz = kvmstats_file_data_size(f0);
	for (c = 0; c < v->nv; c++)
		if (!v->vcpu[c].fresh ||
		    kvmstats_file_data_size(v->vcpu[c].file) != sz ||
		    kvmstats_file_num_stats(v->vcpu[c].file) !=
			    kvmstats_file_num_stats(f0))
			return -EAGAIN;
	if (v->sum_size < sz) {
		void *a = realloc(v->sum, sz);

		if (!a)
			return -ENOMEM;
		v->sum = a;
		v->sum_size = sz;
	}
	memset(v->sum, 0, sz);
	nr = kvmstats_file_num_stats(f0);
	for (i = 0; i < nr; i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f0, i);
		uint64_t *out = (uint64_t *)((char *)v->sum + s->offset);

		for (c = 0; c < v->nv; c++) {
			const struct kvmstats_stat *sc =
				kvmstats_file_stat(v->vcpu[c].file, i);

			if (sc->flags != s->flags || sc->size != s->size ||
			    sc->offset != s->offset ||
			    strcmp(sc->name, s->name))
				return -EAGAIN; /* not one layout: no sum */
			for (b = 0; b < s->size; b++) {
				uint64_t x =
					kvmstats_value(sc, v->vcpu[c].cur, b);

				if (s->type == KVMSTATS_PEAK)
					out[b] = x > out[b] ? x : out[b];
				else
					out[b] += x;
			}
		}
	}
	return 0;
}

void host_fini(struct host *h)
{
	size_t i;

	for (i = 0; i < h->nvms; i++)
		vm_free(h, &h->vms[i]);
	free(h->vms);
	free(h->samples);
	free(h->sref);
	kvmstats_sweep_free(h->sweep);
	host_flush_msgs(h);
	memset(h, 0, sizeof(*h));
}
