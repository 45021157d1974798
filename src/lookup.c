// SPDX-License-Identifier: GPL-2.0-only
/*
 * Finding VMs: by (pid or pidfd, fd), and per process or host-wide for the
 * listing ioctls.
 *
 * KVM keeps its VM list (vm_list, under kvm_lock) to itself, so kvmstats
 * finds VMs the way /proc does: through the file tables of the processes
 * the caller can see.  A VM file is recognised by kvmstats_is_vm_file()
 * (the test file_is_kvm() makes); its private_data is then the struct kvm.
 *
 * A process is seen through its threads.  They share one address space,
 * and normally one file table, but do_exit() drops a thread's mm before
 * its files: a thread on its way out may have files and no mm.  So the
 * address space is taken from any thread that still has one, and the file
 * table from any thread that still has one.
 *
 * Locking: a thread's ->mm and ->files are read under its task_lock(), and
 * a file table is looked at under its file_lock.  Both are spinlocks, so
 * the callbacks only look and take references that cannot sleep:
 * kvm_get_kvm_safe() and try_module_get().  A file found in a table is
 * open, and an open VM file holds a VM reference, so the VM is alive while
 * the callback runs.  No lock of KVM's is ever taken.
 *
 * The work under a file table's lock is bounded whatever the table holds:
 * a process may make its table as large as its fd limit (one dup2() to fd
 * 524287 does it under systemd's default hard limit), so an fd is looked
 * up by its index, and a walk goes by the table's bitmap of open fds, a
 * bounded number of slots and open files at a time, dropping the locks
 * between chunks.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/hash.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

void kvmstats_vm_ref_put(struct kvmstats_vm_ref *ref)
{
	/* Destroying the VM may run the vendor module's code: put it last. */
	kvm_put_kvm(ref->kvm);
	module_put(ref->vendor);
}

/*
 * The process @nr in the caller's pid namespace (0: the caller), with a
 * reference.  Only thread-group ids name a process; other thread ids are
 * not found.
 */
static struct task_struct *kvmstats_get_process(pid_t nr)
{
	struct task_struct *task;

	if (!nr)
		nr = task_tgid_vnr(current);
	rcu_read_lock();
	task = pid_task(find_vpid(nr), PIDTYPE_TGID);
	if (task)
		get_task_struct(task);
	rcu_read_unlock();
	return task;
}

/*
 * The struct pid that @file refers to if it is a pidfd, else NULL.  pidfd
 * operations are not exported, so a pidfd is known by where it lives: on
 * pidfs (6.9 and later), whose files are all pidfds and keep their pid in
 * the inode; before pidfs, as an anonymous inode the kernel named
 * "[pidfd]", with the pid as private_data.  Userspace can create neither.
 */
static struct pid *kvmstats_pidfd_pid(const struct file *file)
{
	const struct inode *inode = file_inode(file);

	switch (inode->i_sb->s_magic) {
	case PID_FS_MAGIC:
		return file->f_op == inode->i_fop ? inode->i_private : NULL;
	case ANON_INODE_FS_MAGIC:
		if (!strcmp(file->f_path.dentry->d_name.name, "[pidfd]"))
			return file->private_data;
		return NULL;
	default:
		return NULL;
	}
}

/*
 * The process that the caller's pidfd @pidfd refers to (a thread's pidfd
 * stands for its process), with a reference, if it is visible in the
 * caller's pid namespace.  Else NULL with *@err set.
 */
static struct task_struct *kvmstats_get_pidfd_process(int pidfd, int *err)
{
	struct task_struct *task = NULL;
	struct fd f = fdget(pidfd);
	struct pid *pid;

	if (!fd_file(f)) {
		*err = -EBADF;
		return NULL;
	}
	pid = kvmstats_pidfd_pid(fd_file(f));
	if (!pid) {
		*err = -EINVAL;
		goto out;
	}
	rcu_read_lock();
	task = pid_task(pid, PIDTYPE_PID);
	if (task) {
		task = task->group_leader;
		if (task_tgid_nr_ns(task, task_active_pid_ns(current)))
			get_task_struct(task);
		else
			task = NULL;
	}
	rcu_read_unlock();
	if (!task)
		*err = -ESRCH;
out:
	fdput(f);
	return task;
}

/*
 * The address space of process @leader, from any thread that still has
 * one, pinned with mmgrab() (for identity: never used as an address space);
 * NULL when no thread has one left.
 */
static struct mm_struct *kvmstats_process_mm(struct task_struct *leader)
{
	struct mm_struct *mm = NULL;
	struct task_struct *t;

	rcu_read_lock();
	for_each_thread(leader, t) {
		task_lock(t);
		mm = t->mm;
		if (mm)
			mmgrab(mm);
		task_unlock(t);
		if (mm)
			break;
	}
	rcu_read_unlock();
	return mm;
}

/*
 * Call @fn(@files, @ctx) with the file table of process @leader, taken
 * from any thread that still has one, locked.  -ESRCH if none has: the
 * process has exited.
 */
static int kvmstats_with_files(struct task_struct *leader,
			       int (*fn)(struct files_struct *files, void *ctx),
			       void *ctx)
{
	struct task_struct *t;
	int ret = -ESRCH;

	rcu_read_lock();
	for_each_thread(leader, t) {
		task_lock(t);
		if (t->files) {
			spin_lock(&t->files->file_lock);
			ret = fn(t->files, ctx);
			spin_unlock(&t->files->file_lock);
			task_unlock(t);
			break;
		}
		task_unlock(t);
	}
	rcu_read_unlock();
	return ret;
}

/*
 * The file in slot @fd of @fdt, the table of @files, locked.  fd_install()
 * fills a slot without the lock (but during a resize), so the slot is
 * loaded as an RCU pointer, as iterate_fd() does.
 */
static struct file *kvmstats_fdt_file(struct files_struct *files,
				      struct fdtable *fdt, unsigned int fd)
{
	return rcu_dereference_check_fdtable(files, fdt->fd[fd]);
}

/*
 * May the caller learn what @task's fds are?  That is for those who could
 * ptrace it.  ptrace_may_access() is not exported, so this asks for more:
 * the caller's own process, or CAP_SYS_PTRACE in the target's user
 * namespace (checked without auditing: asking is not an attempt to trace).
 */
static bool kvmstats_may_probe(struct task_struct *task)
{
	bool ret;

	if (same_thread_group(task, current))
		return true;
	rcu_read_lock();
	ret = ns_capable_noaudit(__task_cred(task)->user_ns, CAP_SYS_PTRACE);
	rcu_read_unlock();
	return ret;
}

/* ----- by (pid or pidfd, fd) ----- */

struct kvmstats_fd_query {
	unsigned int fd;
	int (*fn)(void *ctx, struct file *file);
	void *ctx;
	int err;		/* what @fn returned */
};

enum {
	KVMSTATS_FOUND = 1,
	KVMSTATS_NOT_OPEN,
	KVMSTATS_NOT_VM,
	KVMSTATS_FN_FAILED,
};

/* Look at fd @q->fd of @files, and call @q->fn if it is a VM file. */
static int kvmstats_match_fd(struct files_struct *files, void *ctx)
{
	struct kvmstats_fd_query *q = ctx;
	/* One slot, looked up by index (bounded and masked against Spectre). */
	struct file *file = files_lookup_fd_locked(files, q->fd);

	if (!file)
		return KVMSTATS_NOT_OPEN;
	if (!kvmstats_is_vm_file(file))
		return KVMSTATS_NOT_VM;
	/* An open VM file holds a VM reference: the VM is alive here. */
	q->err = q->fn(q->ctx, file);
	return q->err ? KVMSTATS_FN_FAILED : KVMSTATS_FOUND;
}

/*
 * Find the VM file open as @req->fd in the process @req->pid names (a pid
 * of the caller's pid namespace, or a pidfd with KVMSTATS_FD_PIDFD), and
 * call @fn on it under the locks that keep it open.
 */
int kvmstats_find_vm(const struct kvmstats_fd_request *req,
		     int (*fn)(void *ctx, struct file *file), void *ctx)
{
	struct kvmstats_fd_query q = { .fd = req->fd, .fn = fn, .ctx = ctx };
	struct task_struct *task;
	bool precise;
	int ret;

	if (req->flags & KVMSTATS_FD_PIDFD) {
		task = kvmstats_get_pidfd_process(req->pid, &ret);
		if (!task)
			return ret;
	} else {
		task = kvmstats_get_process(req->pid);
		if (!task)
			return -ESRCH;
	}
	precise = kvmstats_may_probe(task);
	/* A negative fd still needs a live process: ESRCH comes first. */
	if (req->fd < 0)
		q.fd = UINT_MAX;
	ret = kvmstats_with_files(task, kvmstats_match_fd, &q);
	put_task_struct(task);

	switch (ret) {
	case KVMSTATS_FOUND:
		return 0;
	case KVMSTATS_NOT_OPEN:
		return -EBADF;
	case KVMSTATS_NOT_VM:
		return precise ? -EINVAL : -EBADF;
	case KVMSTATS_FN_FAILED:
		return q.err;
	default:
		/* -ESRCH: exited meanwhile. */
		if (WARN_ON_ONCE(ret >= 0))
			return -EIO;
		return ret;
	}
}

static int kvmstats_take_vm(void *ctx, struct file *file)
{
	struct kvmstats_vm_ref *ref = ctx;
	struct module *owner;
	struct kvm *kvm;

	/*
	 * Where the VM file's owner is the vendor module (6.12 and later),
	 * the VM file pins it but a VM reference alone does not, and
	 * destroying the VM runs its code: take the module too.  Where the VM
	 * file has no owner (6.1), KVM pinned the vendor module for the VM's
	 * life in kvm_create_vm(), so the VM reference pins it; where KVM is
	 * built in, there is no module at all.
	 */
	owner = file->f_op->owner;
	if (!try_module_get(owner))
		return -ENODEV;
	kvm = file->private_data;
	if (!kvm_get_kvm_safe(kvm)) {
		module_put(owner);
		return -EBADF;
	}
	ref->kvm = kvm;
	ref->vendor = owner;
	return 0;
}

/*
 * Take a reference on the VM whose VM file is open as @req->fd in the
 * process @req names.
 */
int kvmstats_get_vm(const struct kvmstats_fd_request *req,
		    struct kvmstats_vm_ref *ref)
{
	return kvmstats_find_vm(req, kvmstats_take_vm, ref);
}

/* ----- listing ----- */

/*
 * A process's file table is walked in chunks: the file-table lock is held
 * for at most KVMSTATS_SCAN_SLOTS slots of its open-fd bitmap and
 * KVMSTATS_SCAN_FDS open files at a time, and between chunks the walk may
 * be preempted or ended by a fatal signal.  A chunk also ends when
 * KVMSTATS_SCAN_VMS VM files have been found in it: the caller's array
 * gets them before the walk goes on.  A table of 524,288 slots with three
 * open fds is 8 chunks, each a scan of 1,024 words of its bitmap.
 */
#define KVMSTATS_SCAN_SLOTS	65536
#define KVMSTATS_SCAN_FDS	256
#define KVMSTATS_SCAN_VMS	32
/* The set of listed VMs holds this many, or as many as the caller's room. */
#define KVMSTATS_SEEN_MIN	1024

struct kvmstats_found {
	const struct kvm *kvm;	/* identity only: never dereferenced */
	u32 fd;
	u32 nr_vcpus;
};

/* One chunk of a process's walk. */
struct kvmstats_scan {
	struct mm_struct *mm;		/* the process's */
	struct kvmstats_found *found;	/* KVMSTATS_SCAN_VMS entries */
	unsigned int nr;
	unsigned int next;		/* where the next chunk starts */
	bool more;
};

/*
 * The VMs already listed by this call, by identity: a VM appears once, at
 * its creator's lowest fd for it, even when several processes share its
 * creator's address space (a vfork() child until it execs, a
 * clone(CLONE_VM) sibling): the first of them in pid order lists it.  An
 * open-addressing set of (VM, address space) pairs, grown outside the
 * walk's spinlocks, with room for at most KVMSTATS_SEEN_MIN VMs or as many
 * as the caller's array, whichever is more: beyond that, VMs are only
 * counted (see kvmstats_seen_add()).
 *
 * Nothing pins a listed VM between processes: it may be destroyed and a
 * new VM allocated at its address before the walk is over.  Each entry
 * therefore pins its address space (mmgrab(), dropped when the call ends),
 * so that no other address space can take that address during the call,
 * and a VM is a duplicate only if it has the same address and the same
 * address space as one listed.  A new VM of another process is never taken
 * for an old one; only a process that shares the address space of an
 * earlier one and creates a VM where one of that space's VMs was freed,
 * both within one call, could be missed by that call.
 */
struct kvmstats_seen_vm {
	const struct kvm *kvm;	/* identity only: never dereferenced */
	struct mm_struct *mm;	/* pinned while in the set */
};

struct kvmstats_seen {
	struct kvmstats_seen_vm *slot;
	unsigned int bits;
	unsigned int nr;
	unsigned int cap;	/* at most this many entries: the caller's room */
};

static int kvmstats_seen_grow(struct kvmstats_seen *s)
{
	unsigned int bits = s->slot ? s->bits + 1 : 6;
	struct kvmstats_seen_vm *old = s->slot;
	unsigned int i, size = 1U << s->bits;

	s->slot = kvcalloc(1UL << bits, sizeof(*s->slot), GFP_KERNEL_ACCOUNT);
	if (!s->slot) {
		s->slot = old;
		return -ENOMEM;
	}
	s->bits = bits;
	for (i = 0; old && i < size; i++) {
		if (old[i].kvm) {
			unsigned long h = hash_ptr(old[i].kvm, bits);

			while (s->slot[h].kvm)
				h = (h + 1) & ((1UL << bits) - 1);
			s->slot[h] = old[i];
		}
	}
	kvfree(old);
	return 0;
}

/*
 * Add (@kvm, @mm) to @s: 1 if it is new, 0 if it was there, or -ENOMEM.
 * Once the set is full (more VMs than KVMSTATS_SEEN_MIN and than the
 * caller has room for), further VMs are reported new without being added:
 * the listing fails with E2BIG then, and its count may include a VM more
 * than once (a dup'd fd of it), never less than once.
 */
static int kvmstats_seen_add(struct kvmstats_seen *s, const struct kvm *kvm,
			     struct mm_struct *mm)
{
	unsigned long h, mask;

	if (s->slot) {
		mask = (1UL << s->bits) - 1;
		for (h = hash_ptr(kvm, s->bits); s->slot[h].kvm;
		     h = (h + 1) & mask)
			if (s->slot[h].kvm == kvm && s->slot[h].mm == mm)
				return 0;
	}
	if (s->nr >= s->cap)
		return 1;
	/* At most half full, so probes stay short. */
	if ((!s->slot || 2 * (s->nr + 1) > (1U << s->bits)) &&
	    kvmstats_seen_grow(s))
		return -ENOMEM;
	mask = (1UL << s->bits) - 1;
	for (h = hash_ptr(kvm, s->bits); s->slot[h].kvm; h = (h + 1) & mask)
		;
	mmgrab(mm);
	s->slot[h].kvm = kvm;
	s->slot[h].mm = mm;
	s->nr++;
	return 1;
}

static void kvmstats_seen_fini(struct kvmstats_seen *s)
{
	unsigned int i;

	for (i = 0; s->slot && i < 1U << s->bits; i++)
		if (s->slot[i].kvm)
			mmdrop(s->slot[i].mm);
	kvfree(s->slot);
}

/*
 * One chunk of a walk of @files, from fd @s->next: the VM files created in
 * @s->mm (listed under their creator only: not dups passed to others).
 */
static int kvmstats_scan_chunk(struct files_struct *files, void *ctx)
{
	struct kvmstats_scan *s = ctx;
	struct fdtable *fdt = files_fdtable(files);
	unsigned int fd, end, visited = 0;

	if (s->next >= fdt->max_fds) {
		s->more = false;
		return 0;
	}
	end = s->next + min(fdt->max_fds - s->next, KVMSTATS_SCAN_SLOTS);
	for (fd = find_next_bit(fdt->open_fds, end, s->next); fd < end;
	     fd = find_next_bit(fdt->open_fds, end, fd + 1)) {
		struct file *file = kvmstats_fdt_file(files, fdt, fd);
		const struct kvm *kvm;

		/* Reserved by get_unused_fd_flags(), not yet installed. */
		if (!file)
			continue;
		if (kvmstats_is_vm_file(file)) {
			kvm = file->private_data;
			if (kvm->mm == s->mm) {
				s->found[s->nr].kvm = kvm;
				s->found[s->nr].fd = fd;
				s->found[s->nr].nr_vcpus =
					atomic_read(&kvm->online_vcpus);
				s->nr++;
			}
		}
		if (s->nr == KVMSTATS_SCAN_VMS ||
		    ++visited == KVMSTATS_SCAN_FDS) {
			s->next = fd + 1;
			s->more = true;
			return 0;
		}
	}
	s->next = end;
	s->more = end < fdt->max_fds;
	return 0;
}

/* One listing: where the entries go, and what has been listed. */
struct kvmstats_lister {
	struct kvmstats_vm __user *uvms;
	u32 room;
	u32 total;
	struct kvmstats_scan scan;
	struct kvmstats_seen seen;
};

static int kvmstats_lister_init(struct kvmstats_lister *l,
				struct kvmstats_vm __user *uvms, u32 room)
{
	memset(l, 0, sizeof(*l));
	l->uvms = uvms;
	l->room = room;
	l->seen.cap = max_t(u32, room, KVMSTATS_SEEN_MIN);
	l->scan.found = kmalloc_array(KVMSTATS_SCAN_VMS, sizeof(*l->scan.found),
				      GFP_KERNEL_ACCOUNT);
	return l->scan.found ? 0 : -ENOMEM;
}

static void kvmstats_lister_fini(struct kvmstats_lister *l)
{
	kfree(l->scan.found);
	kvmstats_seen_fini(&l->seen);
}

/* Give the caller the VMs of the chunk just walked. */
static int kvmstats_list_chunk(struct kvmstats_lister *l, pid_t nr)
{
	unsigned int i;
	int ret;

	for (i = 0; i < l->scan.nr; i++) {
		const struct kvmstats_found *f = &l->scan.found[i];
		struct kvmstats_vm vm = {
			.pid = nr,
			.fd = f->fd,
			.nr_vcpus = f->nr_vcpus,
		};

		/* Found only under its creator: l->scan.mm is kvm->mm. */
		ret = kvmstats_seen_add(&l->seen, f->kvm, l->scan.mm);
		if (ret < 0)
			return ret;
		if (!ret)
			continue;	/* a dup, or listed under another process */
		if (l->total < l->room &&
		    copy_to_user(&l->uvms[l->total], &vm, sizeof(vm)))
			return -EFAULT;
		l->total++;
	}
	return 0;
}

/* Between chunks and processes: let others run, stop for a fatal signal. */
static int kvmstats_list_pause(void)
{
	cond_resched();
	return fatal_signal_pending(current) ? -EINTR : 0;
}

/*
 * List the VMs created by @task, whose pid in the caller's namespace is
 * @nr, chunk by chunk.  A process with no address space left created no
 * VM that it can list; one with no file table left has exited.
 */
static int kvmstats_list_process(struct kvmstats_lister *l,
				 struct task_struct *task, pid_t nr)
{
	struct kvmstats_scan *s = &l->scan;
	int ret;

	s->mm = kvmstats_process_mm(task);
	if (!s->mm)
		return 0;
	s->next = 0;
	do {
		s->nr = 0;
		s->more = false;
		ret = kvmstats_with_files(task, kvmstats_scan_chunk, s);
		if (ret < 0)
			break;		/* exited meanwhile: nothing to list */
		ret = kvmstats_list_chunk(l, nr);
		if (!ret && s->more)
			ret = kvmstats_list_pause();
	} while (!ret && s->more);
	mmdrop(s->mm);
	s->mm = NULL;
	return ret == -ESRCH ? 0 : ret;
}

/* Report the count; E2BIG if the entries did not fit. */
static long kvmstats_list_done(struct kvmstats_lister *l, u32 __user *unr)
{
	if (put_user(l->total, unr))
		return -EFAULT;
	return l->total > l->room ? -E2BIG : 0;
}

/*
 * KVMSTATS_LIST_VMS.  Processes are visited in pid order of the caller's
 * namespace, as /proc lists them, one at a time and with no lock held
 * between them; the entries go straight to the caller's array.  Every pid
 * visited, a thread's as well as a process's, is a point where the walk
 * may be preempted or ended by a fatal signal.
 */
long kvmstats_list_vms(struct kvmstats_vm_list __user *ulist)
{
	struct pid_namespace *ns = task_active_pid_ns(current);
	struct kvmstats_vm_list list;
	struct kvmstats_lister l;
	pid_t nr = 1;
	long ret;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if (list.flags)
		return -EINVAL;
	ret = kvmstats_lister_init(&l, ulist->vms, list.nr);
	if (ret)
		goto out;

	for (;; nr++) {
		struct task_struct *task = NULL;
		struct pid *pid;

		rcu_read_lock();
		pid = find_ge_pid(nr, ns);
		if (pid) {
			nr = pid_nr_ns(pid, ns);
			task = pid_task(pid, PIDTYPE_TGID);
			if (task)
				get_task_struct(task);
		}
		rcu_read_unlock();
		if (!pid)
			break;
		if (task) {
			ret = kvmstats_list_process(&l, task, nr);
			put_task_struct(task);
			if (ret)
				goto out;
		}
		ret = kvmstats_list_pause();
		if (ret)
			goto out;
	}
	ret = kvmstats_list_done(&l, &ulist->nr);
out:
	kvmstats_lister_fini(&l);
	return ret;
}

/* KVMSTATS_LIST_PIDFD: the same, for the one process a pidfd holds. */
long kvmstats_list_pidfd(struct kvmstats_pidfd_list __user *ulist)
{
	struct kvmstats_pidfd_list list;
	struct kvmstats_lister l;
	struct task_struct *task;
	long ret;
	int err;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if (list.flags || list.reserved)
		return -EINVAL;
	task = kvmstats_get_pidfd_process(list.pidfd, &err);
	if (!task)
		return err;
	ret = kvmstats_lister_init(&l, ulist->vms, list.nr);
	if (!ret)
		ret = kvmstats_list_process(&l, task, task_tgid_vnr(task));
	if (!ret)
		ret = kvmstats_list_done(&l, &ulist->nr);
	kvmstats_lister_fini(&l);
	put_task_struct(task);
	return ret;
}
