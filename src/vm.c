// SPDX-License-Identifier: GPL-2.0-only
/*
 * The VMs behind open stats files, and how kvmstats gives them back.
 *
 * A stats file reads its VM's or vCPU's statistics live, straight from
 * struct kvm / struct kvm_vcpu, which needs a reference on the VM.  But a
 * VM reference keeps everything the VM holds (guest memory pinned by SEV,
 * its ASID, page tables, KVM's hold on hardware virtualization, the vendor
 * module), and only the last reference lets kvm_destroy_vm() give it back.
 * So kvmstats holds a VM only while someone else does too:
 *
 *   - Every VM with open stats files has a tracker (struct
 *     kvmstats_tracker) holding the one VM reference its files read
 *     through.
 *   - Every way to run or change a VM goes through a file of KVM's that
 *     holds a reference of its own (the VM file, a vCPU file, a device
 *     file, a guest_memfd, KVM's own stats fds), and a new reference can
 *     only be taken from one of those, or by kvm_get_kvm_safe() from KVM's
 *     debugfs, which reads the VM but cannot run it.  So once the tracker's
 *     reference is the VM's last (the VMM exited, or closed every fd of the
 *     VM and lives on), the VM can never run again.  KVM has no hook that
 *     says so, so while any VM is tracked a work item looks every
 *     KVMSTATS_SCAN_PERIOD for trackers whose VM has users_count 1, a read
 *     that needs no lock: a count of 1 cannot rise again but through
 *     debugfs.
 *   - Such a VM is frozen: each file's data is copied into the file's own
 *     buffer and the file switched to it (statsfd.c says why no read then
 *     ever sees a value that a later read takes back).  After
 *     synchronize_rcu() no reader holds a live pointer, and the reference
 *     is given back, where KVM would have dropped it itself.
 *   - Natively, the VMM's last close of a VM runs kvm_destroy_vm() in that
 *     VMM thread (fput()'s task work), and only there, with current->mm ==
 *     kvm->mm, does x86 KVM unmap its private memslots from the VMM (the
 *     APIC access page, the identity map and TSS).  So the reference goes to
 *     a thread of the VMM, with task_work_add(TWA_RESUME): the thread that
 *     created the VM if it lives, else the first thread of the process the
 *     VM was found in; it drops it on its next return to user space.  Where no
 *     thread of the VMM still runs in the VM's address space (the VMM has
 *     exited: KVM too then destroys the VM without it), or the chosen
 *     thread has not got there within KVMSTATS_HANDOVER_TIMEOUT (a thread
 *     asleep in the kernel), the module's worker drops it, with the VM's
 *     address space borrowed (kthread_use_mm()) while it still has users.
 *   - A tracker whose last file closes while others still hold the VM just
 *     drops its reference, from the worker: that destroys nothing.  If it
 *     is the VM's last by the time the worker gets there (the VMM closed
 *     its fds meanwhile), it goes to a VMM thread as above.
 *
 * Nothing here touches the VMM's address space or locks: no notifier is
 * registered on it and its mmap lock is never taken, so attaching a stats
 * file costs the same whatever the VMM maps.
 *
 * kvmstats_vm_lock (a mutex, never taken by readers) guards the table of
 * trackers, their file lists, the freeze and the lists of trackers being
 * given back.  A tracker is freed when its last user goes: the tracker
 * itself, and a task work queued for it (struct kvmstats_tracker.users).
 * A queued task work runs code of this module, so it holds a reference on
 * the module (try_module_get(), which fails once the module is going), and
 * module exit waits for a task-RCU grace period, after which no task is
 * still between that module_put() and its return.  task_work_cancel() is
 * not exported, so a task work stays queued until its thread next returns
 * to user space, even after the worker gave the reference back for it: a
 * VMM thread asleep in the kernel keeps the module in use until it wakes
 * (kvmstats_handed_over counts such task works; rmmod says EBUSY).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/workqueue.h>

#include "kvmstats.h"

atomic_t kvmstats_live_vms = ATOMIC_INIT(0);
atomic_t kvmstats_handed_over = ATOMIC_INIT(0);

/* How often VMs that only kvmstats still holds are looked for. */
#define KVMSTATS_SCAN_PERIOD		(HZ / 10)
/* How long a VMM thread has to drop a reference handed to it. */
#define KVMSTATS_HANDOVER_TIMEOUT	HZ

enum kvmstats_vm_state {
	KVMSTATS_VM_LIVE,	/* in the table, its files read live */
	KVMSTATS_VM_GOING,	/* out of it: its reference is being given back */
};

struct kvmstats_tracker {
	struct kvmstats_vm_ref ref;	/* what live files read through */
	struct pid *vmm;		/* the VMM process it was found in, or NULL */
	enum kvmstats_vm_state state;
	struct hlist_node node;		/* in kvmstats_vms while LIVE */
	struct list_head files;		/* live stats files */
	struct list_head going_node;	/* on kvmstats_going or kvmstats_handed */
	struct callback_head twork;	/* handed to a VMM thread */
	const struct task_struct *target; /* that thread: identity only */
	unsigned long handed_at;	/* jiffies: handed, or last progress */
	bool given;			/* the reference has been given back */
	refcount_t users;		/* the tracker itself, a queued twork */
};

static DEFINE_MUTEX(kvmstats_vm_lock);
/* The module's own queue: module exit waits for it, and only for it. */
static struct workqueue_struct *kvmstats_wq;
static DEFINE_HASHTABLE(kvmstats_vms, 8);
static LIST_HEAD(kvmstats_going);	/* waiting for readers, then handed */
static LIST_HEAD(kvmstats_handed);	/* handed to a VMM thread, not given */

static void kvmstats_give(struct work_struct *work);
static DECLARE_WORK(kvmstats_give_work, kvmstats_give);
static void kvmstats_scan(struct work_struct *work);
static DECLARE_DELAYED_WORK(kvmstats_scan_work, kvmstats_scan);

static struct kvmstats_tracker *kvmstats_vm_find(const struct kvm *kvm)
{
	struct kvmstats_tracker *vm;

	lockdep_assert_held(&kvmstats_vm_lock);
	hash_for_each_possible(kvmstats_vms, vm, node, (unsigned long)kvm)
		if (vm->ref.kvm == kvm)
			return vm;
	return NULL;
}

static void kvmstats_tracker_put(struct kvmstats_tracker *vm)
{
	if (refcount_dec_and_test(&vm->users)) {
		put_pid(vm->vmm);
		kfree(vm);
	}
}

/*
 * Drop the tracker's VM reference (and the vendor module's after it: the
 * VM's destruction runs its code).  From a kernel thread, where it is the
 * VM's last, with the VM's address space borrowed while it has users, so
 * that KVM unmaps from it what it mapped there for the VM, as it does when
 * the VMM drops the last reference itself.
 */
static void kvmstats_give_ref(struct kvmstats_tracker *vm)
{
	struct mm_struct *mm = vm->ref.kvm->mm;
	bool borrowed = false;

	if ((current->flags & PF_KTHREAD) && !current->mm &&
	    refcount_read(&vm->ref.kvm->users_count) == 1 &&
	    mmget_not_zero(mm)) {
		kthread_use_mm(mm);
		borrowed = true;
	}
	kvmstats_vm_ref_put(&vm->ref);
	if (borrowed) {
		kthread_unuse_mm(mm);
		mmput(mm);
	}
	atomic_dec(&kvmstats_live_vms);
}

/* Start the scan unless it is due sooner already. */
static void kvmstats_scan_soon(unsigned long delay)
{
	lockdep_assert_held(&kvmstats_vm_lock);
	if (!delayed_work_pending(&kvmstats_scan_work))
		queue_delayed_work(kvmstats_wq, &kvmstats_scan_work, delay);
}

/*
 * @t is giving references back: the others handed to it are not late.  A
 * thread that runs many task works in a row (the VMs of a VMM that let
 * many go at once) destroys them one after another, as its own closes
 * would have; the hand-over timeout is for a thread that never gets to
 * them.
 */
static void kvmstats_handed_progress(const struct task_struct *t)
{
	struct kvmstats_tracker *vm;

	lockdep_assert_held(&kvmstats_vm_lock);
	list_for_each_entry(vm, &kvmstats_handed, going_node)
		if (vm->target == t)
			vm->handed_at = jiffies;
}

/* The task work a VMM thread runs on its way back to user space. */
static void kvmstats_twork(struct callback_head *head)
{
	struct kvmstats_tracker *vm = container_of(head, struct kvmstats_tracker,
						   twork);
	bool mine;

	atomic_dec(&kvmstats_handed_over);
	mutex_lock(&kvmstats_vm_lock);
	/* An exiting thread runs task work after it dropped its mm. */
	mine = !vm->given && current->mm == vm->ref.kvm->mm;
	if (mine)
		kvmstats_handed_progress(current);
	if (mine) {
		vm->given = true;
		list_del_init(&vm->going_node);
	} else if (!vm->given) {
		/* Not here after all: the worker takes it at once. */
		vm->handed_at = jiffies - KVMSTATS_HANDOVER_TIMEOUT;
		mod_delayed_work(kvmstats_wq, &kvmstats_scan_work, 0);
	}
	mutex_unlock(&kvmstats_vm_lock);

	if (mine) {
		kvmstats_give_ref(vm);
		kvmstats_tracker_put(vm);	/* no longer on a list */
	}
	kvmstats_tracker_put(vm);		/* the task work's */
	module_put(THIS_MODULE);
}

/*
 * Does @t run in @mm, and will it return to user space?  Not a kernel
 * thread, nor a kernel worker the VMM's threads spawned (io_uring's, or
 * KVM's own NX huge page recovery thread, a vhost task on the 7.x kernels
 * here): the recovery thread runs task work when it is signalled to stop,
 * and a VM destroyed there would wait for that very thread to exit.
 */
static bool kvmstats_runs_in(struct task_struct *t, struct mm_struct *mm)
{
	bool ret;

	if (t->flags & (PF_EXITING | PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER))
		return false;
	task_lock(t);
	ret = t->mm == mm;
	task_unlock(t);
	return ret;
}

/*
 * A thread of @vm's VMM to drop its reference, with a task reference, or
 * NULL: the thread that created the VM (kvm->userspace_pid, a thread id of
 * the initial pid namespace), else the first thread of the process the VM
 * was found in, its leader unless that has exited, provided it still runs
 * in the VM's address space.  Those are the threads least likely to be
 * running a vCPU of another VM: task work runs inside KVM_RUN too (at a
 * guest exit, with that vCPU's mutex held), and a VM destroyed there would
 * take locks that KVM orders outside a vCPU's mutex.
 */
static struct task_struct *kvmstats_vmm_thread(struct kvmstats_tracker *vm)
{
	struct mm_struct *mm = vm->ref.kvm->mm;
	struct task_struct *t, *leader, *found = NULL;

	rcu_read_lock();
	t = pid_task(find_pid_ns(vm->ref.kvm->userspace_pid, &init_pid_ns),
		     PIDTYPE_PID);
	if (t && kvmstats_runs_in(t, mm))
		found = t;
	leader = !found && vm->vmm ? pid_task(vm->vmm, PIDTYPE_TGID) : NULL;
	if (leader) {
		for_each_thread(leader, t) {
			if (kvmstats_runs_in(t, mm)) {
				found = t;
				break;
			}
		}
	}
	if (found)
		get_task_struct(found);
	rcu_read_unlock();
	return found;
}

/* Hand @vm's reference to a thread of its VMM: true if one took it. */
static bool kvmstats_hand_over(struct kvmstats_tracker *vm)
{
	struct task_struct *t = kvmstats_vmm_thread(vm);
	int ret;

	if (!t)
		return false;
	if (!try_module_get(THIS_MODULE)) {
		put_task_struct(t);
		return false;
	}
	refcount_inc(&vm->users);
	init_task_work(&vm->twork, kvmstats_twork);
	atomic_inc(&kvmstats_handed_over);

	/* On the list first: the thread may run it at once. */
	mutex_lock(&kvmstats_vm_lock);
	vm->target = t;
	vm->handed_at = jiffies;
	list_add_tail(&vm->going_node, &kvmstats_handed);
	kvmstats_scan_soon(KVMSTATS_HANDOVER_TIMEOUT);
	ret = task_work_add(t, &vm->twork, TWA_RESUME);
	if (ret)
		list_del_init(&vm->going_node);
	mutex_unlock(&kvmstats_vm_lock);
	put_task_struct(t);
	if (ret) {
		atomic_dec(&kvmstats_handed_over);
		refcount_dec(&vm->users);
		module_put(THIS_MODULE);
	}
	return !ret;
}

/* Trackers whose files are frozen or closed: give their references back. */
static void kvmstats_give(struct work_struct *work)
{
	struct kvmstats_tracker *vm, *tmp;
	LIST_HEAD(list);

	mutex_lock(&kvmstats_vm_lock);
	list_splice_init(&kvmstats_going, &list);
	mutex_unlock(&kvmstats_vm_lock);
	if (list_empty(&list))
		return;

	/* Readers that loaded a live pointer before a freeze are done. */
	synchronize_rcu();

	list_for_each_entry_safe(vm, tmp, &list, going_node) {
		list_del_init(&vm->going_node);
		/*
		 * Where others still hold the VM (the last stats file of a
		 * live VM closed), there is nothing to destroy: drop the
		 * reference here.  Should the VMM close its last fd of the
		 * VM at this very moment, the VM is destroyed here, with its
		 * address space borrowed.
		 */
		if (refcount_read(&vm->ref.kvm->users_count) == 1 &&
		    kvmstats_hand_over(vm))
			continue;
		kvmstats_give_ref(vm);
		kvmstats_tracker_put(vm);
	}
}

/* Serve every file of @vm from its own copy from now on. */
static void kvmstats_vm_freeze(struct kvmstats_tracker *vm)
{
	struct kvmstats_file *sf, *tmp;

	lockdep_assert_held(&kvmstats_vm_lock);
	list_for_each_entry_safe(sf, tmp, &vm->files, vm_node) {
		list_del(&sf->vm_node);
		sf->vm = NULL;
		kvmstats_file_freeze(sf);
	}
	kvmstats_debug_froze();
}

/* Take @vm out of the table and give its reference back. */
static void kvmstats_vm_going(struct kvmstats_tracker *vm)
{
	lockdep_assert_held(&kvmstats_vm_lock);
	hash_del(&vm->node);
	vm->state = KVMSTATS_VM_GOING;
	list_add_tail(&vm->going_node, &kvmstats_going);
	queue_work(kvmstats_wq, &kvmstats_give_work);
}

/*
 * Every few ticks while anything is tracked or handed over: freeze the VMs
 * whose only reference is the tracker's, and give back, from here, the
 * references a VMM thread has not dropped in time.
 */
static void kvmstats_scan(struct work_struct *work)
{
	struct kvmstats_tracker *vm, *next;
	struct hlist_node *tmp;
	unsigned int bkt;
	LIST_HEAD(late);

	mutex_lock(&kvmstats_vm_lock);
	hash_for_each_safe(kvmstats_vms, bkt, tmp, vm, node) {
		if (refcount_read(&vm->ref.kvm->users_count) != 1)
			continue;
		kvmstats_vm_freeze(vm);
		kvmstats_vm_going(vm);
	}
	list_for_each_entry_safe(vm, next, &kvmstats_handed, going_node) {
		if (time_before(jiffies,
				vm->handed_at + KVMSTATS_HANDOVER_TIMEOUT))
			continue;
		vm->given = true;
		list_move_tail(&vm->going_node, &late);
	}
	if (!hash_empty(kvmstats_vms))
		kvmstats_scan_soon(KVMSTATS_SCAN_PERIOD);
	else if (!list_empty(&kvmstats_handed))
		kvmstats_scan_soon(KVMSTATS_HANDOVER_TIMEOUT);
	mutex_unlock(&kvmstats_vm_lock);

	list_for_each_entry_safe(vm, next, &late, going_node) {
		list_del_init(&vm->going_node);
		pr_debug("gave back %s from the worker: no VMM thread took it\n",
			 vm->ref.kvm->stats_id);
		kvmstats_give_ref(vm);
		kvmstats_tracker_put(vm);
	}
}

struct kvmstats_tracker *kvmstats_vm_alloc(void)
{
	struct kvmstats_tracker *vm = kzalloc(sizeof(*vm), GFP_KERNEL_ACCOUNT);

	if (vm) {
		INIT_LIST_HEAD(&vm->files);
		INIT_LIST_HEAD(&vm->going_node);
		refcount_set(&vm->users, 1);
	}
	return vm;
}

void kvmstats_vm_free(struct kvmstats_tracker *vm)
{
	kfree(vm);
}

/*
 * Attach the new, not yet installed stats file @sf to the VM whose
 * reference the caller found in @ref, in the process @vmm (a struct pid of
 * ours, or NULL): @sf then reads live through the VM's tracker.  @spare is
 * a tracker from kvmstats_vm_alloc(), used if the VM has none yet and
 * freed otherwise.  Takes over @ref, @vmm and @spare; cannot fail.
 */
void kvmstats_vm_attach(struct kvmstats_file *sf, struct kvmstats_vm_ref *ref,
			struct pid *vmm, struct kvmstats_tracker *spare)
{
	struct kvmstats_tracker *vm;

	mutex_lock(&kvmstats_vm_lock);
	vm = kvmstats_vm_find(ref->kvm);
	if (vm) {
		/*
		 * The tracker's reference serves this file too.  A tracker in
		 * the table holds its reference at least until it leaves the
		 * table, under the lock we hold: ours is not the last, and
		 * kvm_put_kvm() only drops it.
		 */
		kvm_put_kvm(ref->kvm);
		module_put(ref->vendor);
		put_pid(vmm);
		kvmstats_vm_free(spare);
	} else {
		vm = spare;
		vm->ref = *ref;
		vm->vmm = vmm;
		vm->state = KVMSTATS_VM_LIVE;
		hash_add(kvmstats_vms, &vm->node, (unsigned long)vm->ref.kvm);
		atomic_inc(&kvmstats_live_vms);
		kvmstats_scan_soon(KVMSTATS_SCAN_PERIOD);
	}
	list_add_tail(&sf->vm_node, &vm->files);
	sf->vm = vm;
	mutex_unlock(&kvmstats_vm_lock);
}

/*
 * Give back @ref, found for a stats file that will not be made, as a
 * tracker's reference is given back (it may be the VM's last): through
 * the VM's tracker if it has one, else through @spare.  Takes over @ref,
 * @vmm and @spare.
 */
void kvmstats_vm_release(struct kvmstats_vm_ref *ref, struct pid *vmm,
			 struct kvmstats_tracker *spare)
{
	mutex_lock(&kvmstats_vm_lock);
	if (kvmstats_vm_find(ref->kvm)) {
		/* Not the last, as in kvmstats_vm_attach(). */
		kvm_put_kvm(ref->kvm);
		module_put(ref->vendor);
		put_pid(vmm);
		kvmstats_vm_free(spare);
	} else {
		spare->ref = *ref;
		spare->vmm = vmm;
		spare->state = KVMSTATS_VM_GOING;
		atomic_inc(&kvmstats_live_vms);
		list_add_tail(&spare->going_node, &kvmstats_going);
		queue_work(kvmstats_wq, &kvmstats_give_work);
	}
	mutex_unlock(&kvmstats_vm_lock);
}

/* @sf is being released: the last file of a live VM gives its tracker up. */
void kvmstats_vm_detach(struct kvmstats_file *sf)
{
	struct kvmstats_tracker *vm;

	mutex_lock(&kvmstats_vm_lock);
	vm = sf->vm;
	if (vm) {
		list_del(&sf->vm_node);
		sf->vm = NULL;
		if (list_empty(&vm->files))
			kvmstats_vm_going(vm);
	}
	mutex_unlock(&kvmstats_vm_lock);
}

int kvmstats_vm_init(void)
{
	kvmstats_wq = alloc_workqueue("kvmstats", WQ_UNBOUND, 0);
	return kvmstats_wq ? 0 : -ENOMEM;
}

/*
 * Module exit: no file is open and no task work is queued (each holds a
 * module reference), so no tracker is live, and the handed-over ones left
 * are those whose task work ran where it could not give the reference
 * back.  Let the worker give back what is left, then wait until no task is
 * still on its way out of kvmstats_twork().
 */
void kvmstats_vm_exit(void)
{
	flush_work(&kvmstats_give_work);
	/* A task work that ran where it could not give leaves it to the scan. */
	mod_delayed_work(kvmstats_wq, &kvmstats_scan_work, 0);
	flush_delayed_work(&kvmstats_scan_work);
	cancel_delayed_work_sync(&kvmstats_scan_work);
	destroy_workqueue(kvmstats_wq);
	WARN_ON(!hash_empty(kvmstats_vms) || !list_empty(&kvmstats_going) ||
		!list_empty(&kvmstats_handed));
	synchronize_rcu_tasks();
}
