// SPDX-License-Identifier: GPL-2.0-only
/*
 * Finding VMs: by (pid, fd), and host-wide for KVMSTATS_LIST_VMS.
 *
 * KVM keeps its VM list (vm_list, under kvm_lock) to itself, so kvmstats
 * finds VMs the way /proc does: through the file tables of the processes
 * the caller can see.  A VM file is recognised by file_is_kvm(), which KVM
 * exports for exactly this purpose; its private_data is then the struct kvm.
 *
 * Locking: a process's file table is walked with iterate_fd(), under the
 * owning thread's task_lock() (which keeps ->files and ->mm in place) and
 * the table's file_lock.  Both are spinlocks, so the callbacks only look and
 * take references that cannot sleep: kvm_get_kvm_safe() and
 * try_module_get().  A file found in the table is open, and an open VM file
 * holds a VM reference, so the VM is alive while the callback runs.  No
 * lock of KVM's is ever taken.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fdtable.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
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
 * Could this address space have created a VM that is still alive?  KVM
 * registers an MMU notifier on the creating process's mm in kvm_create_vm()
 * (VM creation fails if it cannot), and an mm's notifier subscriptions, once
 * allocated, live until the mm itself is freed.  So an mm without them has
 * no live VM, and the host-wide scan can skip the file table of every
 * process that is not a VMM (nearly all of them) without missing any VM.
 */
static bool kvmstats_maybe_vmm(const struct mm_struct *mm)
{
	return mm && READ_ONCE(mm->notifier_subscriptions);
}

/*
 * Call iterate_fd(@fn, @ctx) from fd @first on the file table of process
 * @leader, under task_lock() of a thread that still has one (the leader
 * may have exited before its threads).  -ESRCH if no thread has a file
 * table left, i.e. the process has exited.  *@mm is the process's address
 * space as seen under that lock, for identity comparisons only.  With
 * @vmm_only, processes that cannot have created a live VM are not walked
 * (and 0 is returned).
 */
static int kvmstats_iterate_process(struct task_struct *leader,
				    unsigned int first, bool vmm_only,
				    int (*fn)(const void *, struct file *,
					      unsigned int),
				    const void *ctx, struct mm_struct **mm)
{
	struct task_struct *t;
	int ret = -ESRCH;

	rcu_read_lock();
	for_each_thread(leader, t) {
		task_lock(t);
		if (t->files) {
			*mm = t->mm;
			if (vmm_only && !kvmstats_maybe_vmm(t->mm))
				ret = 0;
			else
				ret = iterate_fd(t->files, first, fn, ctx);
			task_unlock(t);
			break;
		}
		task_unlock(t);
	}
	rcu_read_unlock();
	return ret;
}

/* ----- by (pid, fd) ----- */

struct kvmstats_fd_query {
	unsigned int fd;
	struct kvmstats_vm_ref *ref;
};

enum {
	KVMSTATS_FOUND = 1,
	KVMSTATS_NOT_OPEN,
	KVMSTATS_NOT_VM,
	KVMSTATS_NO_MODULE,
};

static int kvmstats_match_fd(const void *ctx, struct file *file,
			     unsigned int fd)
{
	const struct kvmstats_fd_query *q = ctx;
	struct module *owner;
	struct kvm *kvm;

	/* iterate_fd() moves on to the next open fd: stop there. */
	if (fd != q->fd)
		return KVMSTATS_NOT_OPEN;
	if (!file_is_kvm(file))
		return KVMSTATS_NOT_VM;

	/*
	 * Where the VM file's owner is the vendor module (6.12), the VM file
	 * pins it but a VM reference alone does not, and destroying the VM
	 * runs its code: take the module too.  Where the owner is NULL (6.1),
	 * the VM reference pins the vendor module by itself.
	 */
	owner = file->f_op->owner;
	if (!try_module_get(owner))
		return KVMSTATS_NO_MODULE;
	kvm = file->private_data;
	if (!kvm_get_kvm_safe(kvm)) {
		module_put(owner);
		return KVMSTATS_NOT_VM;
	}
	q->ref->kvm = kvm;
	q->ref->vendor = owner;
	return KVMSTATS_FOUND;
}

/*
 * Take a reference on the VM whose VM file is open as @fd in process @pid
 * of the caller's pid namespace.
 */
int kvmstats_get_vm(pid_t pid, int fd, struct kvmstats_vm_ref *ref)
{
	struct kvmstats_fd_query q = { .fd = fd, .ref = ref };
	struct task_struct *task;
	struct mm_struct *mm;
	int ret;

	task = kvmstats_get_process(pid);
	if (!task)
		return -ESRCH;
	/*
	 * A negative fd still needs a live process (ESRCH comes first):
	 * starting the walk at UINT_MAX visits no fd and reports "not open".
	 */
	ret = kvmstats_iterate_process(task, fd < 0 ? UINT_MAX : fd, false,
				       kvmstats_match_fd, &q, &mm);
	put_task_struct(task);

	switch (ret) {
	case KVMSTATS_FOUND:
		return 0;
	case 0:			/* nothing open at or above @fd */
	case KVMSTATS_NOT_OPEN:
		return -EBADF;
	case KVMSTATS_NOT_VM:
		return -EINVAL;
	case KVMSTATS_NO_MODULE:
		return -ENODEV;
	default:
		return ret;
	}
}

/* ----- host-wide ----- */

struct kvmstats_found {
	const struct kvm *kvm;	/* identity only: never dereferenced */
	u32 fd;
	u32 nr_vcpus;
};

struct kvmstats_scan {
	struct mm_struct *mm;
	struct kvmstats_found *found;
	unsigned int nr;
	unsigned int room;
	bool overflow;
};

struct kvmstats_scan_ctx {
	struct kvmstats_scan *scan;
};

static int kvmstats_scan_fd(const void *ctx, struct file *file,
			    unsigned int fd)
{
	struct kvmstats_scan *s = ((const struct kvmstats_scan_ctx *)ctx)->scan;
	const struct kvm *kvm;
	unsigned int i;

	if (!file_is_kvm(file))
		return 0;
	kvm = file->private_data;
	/* Listed under its creator only: not dups passed to others. */
	if (!s->mm || kvm->mm != s->mm)
		return 0;
	/* Fds come in increasing order: the first one seen is the lowest. */
	for (i = 0; i < s->nr; i++)
		if (s->found[i].kvm == kvm)
			return 0;
	if (s->nr == s->room) {
		s->overflow = true;
		return 1;
	}
	s->found[s->nr].kvm = kvm;
	s->found[s->nr].fd = fd;
	s->found[s->nr].nr_vcpus = atomic_read(&kvm->online_vcpus);
	s->nr++;
	return 0;
}

/*
 * Collect the VMs created by process @task into @s, growing @s->found as
 * needed (the walk runs under spinlocks, so it restarts after growing).
 */
static int kvmstats_scan_process(struct task_struct *task,
				 struct kvmstats_scan *s)
{
	const struct kvmstats_scan_ctx ctx = { .scan = s };
	int ret;

	for (;;) {
		s->nr = 0;
		s->overflow = false;
		s->mm = NULL;
		ret = kvmstats_iterate_process(task, 0, true, kvmstats_scan_fd,
					       &ctx, &s->mm);
		if (ret == -ESRCH)
			return 0;	/* exited: it has no VMs to list */
		if (!s->overflow)
			return 0;

		kvfree(s->found);
		s->room *= 2;
		s->found = kvmalloc_array(s->room, sizeof(*s->found),
					  GFP_KERNEL);
		if (!s->found)
			return -ENOMEM;
	}
}

/*
 * KVMSTATS_LIST_VMS.  Processes are visited in pid order of the caller's
 * namespace, as /proc lists them, one at a time and with no lock held
 * between them; the entries go straight to the caller's array.
 */
long kvmstats_list_vms(struct kvmstats_vm_list __user *ulist)
{
	struct pid_namespace *ns = task_active_pid_ns(current);
	struct kvmstats_scan s = { .room = 16 };
	struct kvmstats_vm_list list;
	u32 room, total = 0;
	pid_t nr = 1;
	long ret = 0;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if (list.flags)
		return -EINVAL;
	room = list.nr;

	s.found = kvmalloc_array(s.room, sizeof(*s.found), GFP_KERNEL);
	if (!s.found)
		return -ENOMEM;

	for (;; nr++) {
		struct task_struct *task = NULL;
		struct pid *pid;
		unsigned int i;

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
		if (!task)
			continue;

		ret = kvmstats_scan_process(task, &s);
		put_task_struct(task);
		if (ret)
			goto out;

		for (i = 0; i < s.nr; i++, total++) {
			struct kvmstats_vm vm = {
				.pid = nr,
				.fd = s.found[i].fd,
				.nr_vcpus = s.found[i].nr_vcpus,
			};

			if (total < room &&
			    copy_to_user(&ulist->vms[total], &vm, sizeof(vm))) {
				ret = -EFAULT;
				goto out;
			}
		}

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto out;
		}
		cond_resched();
	}

	if (put_user(total, &ulist->nr))
		ret = -EFAULT;
	else if (total > room)
		ret = -E2BIG;
out:
	kvfree(s.found);
	return ret;
}
