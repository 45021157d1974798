// SPDX-License-Identifier: GPL-2.0-only
/*
 * The VMs behind open stats files, and what happens when their VMM goes.
 *
 * A stats file reads its VM's or vCPU's statistics live, straight from
 * struct kvm / struct kvm_vcpu, which needs a reference on the VM.  But a
 * VM reference keeps everything the VM holds (guest memory pinned by SEV,
 * its ASID, page tables, KVM's hold on hardware virtualization, the vendor
 * module), and only the last reference lets kvm_destroy_vm() give it back.
 * So kvmstats holds one only while the VM can still change, and no longer:
 *
 *   - Every VM with open stats files has a tracker here (struct
 *     kvmstats_tracker) with the one VM reference its files read through, and
 *     an MMU notifier on the address space of the process that created the
 *     VM (kvm->mm).
 *   - When that address space is torn down (its last user exits or execs),
 *     the notifier's ->release runs.  KVM refuses every ioctl from another
 *     address space, so the VM can never run again: its statistics are
 *     final.  ->release copies each file's data into the file's own buffer
 *     (allocated with the file, so freezing cannot fail) and switches the
 *     file to it; then a work item waits for readers of the old pointers
 *     and drops the VM and vendor module references.  kvm_destroy_vm()
 *     then runs as if kvmstats were not there, when the VMM's own fds go.
 *   - A tracker is registered after its VM was created, so its ->release
 *     runs before KVM's own notifier for that VM flushes the VM's MMU: the
 *     frozen values are those the VMM's last moment left.
 *   - A VMM can also let a VM go and live on: close every fd of it (VM,
 *     vCPUs, KVM's own stats fds, ...), each of which holds a VM reference.
 *     Then the tracker's reference is the VM's last, nothing can reach the
 *     VM to run it again, and nothing tells us: KVM has no hook for it.  So
 *     while any VM is tracked, a deferrable work item looks once a second
 *     for VMs whose only reference is ours, and freezes them the same way.
 *
 * The read path takes no lock: a reader loads the file's data pointer in
 * an RCU read-side section and copies from it with page faults disabled
 * (statsfd.c), so nothing in the section sleeps.  The switch is a pointer
 * store; the references go only after synchronize_rcu(), when no reader
 * can still hold the old pointer, and no reader, however slow its buffer,
 * can hold a dead VM back.
 *
 * kvmstats_vm_lock (a mutex, never taken by readers) guards the table of
 * trackers, their file lists and the switch itself.  Trackers are torn
 * down by two work items, which need no lock of ours while they give back
 * references and unregister notifiers, so ->release (called by the mm
 * code, which waits for it) may always take the mutex.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "kvmstats.h"

atomic_t kvmstats_live_vms = ATOMIC_INIT(0);

enum kvmstats_vm_state {
	KVMSTATS_VM_NEW,	/* being set up by kvmstats_vm_attach() */
	KVMSTATS_VM_LIVE,	/* in the table, its files read live */
	KVMSTATS_VM_REAPED,	/* on the reap list */
};

struct kvmstats_tracker {
	struct kvmstats_vm_ref ref;	/* what live files read through */
	struct mmu_notifier mn;		/* on the creator's mm */
	bool registered;		/* mn is registered */
	bool released;			/* the creator's mm is gone */
	enum kvmstats_vm_state state;
	struct hlist_node node;		/* in kvmstats_vms while LIVE */
	struct list_head files;		/* live stats files */
	struct list_head reap_node;	/* on kvmstats_reap_list */
};

static DEFINE_MUTEX(kvmstats_vm_lock);
/* The reaper's own queue: module exit waits for it, and only for it. */
static struct workqueue_struct *kvmstats_wq;
static DEFINE_HASHTABLE(kvmstats_vms, 8);
static LIST_HEAD(kvmstats_reap_list);
static LIST_HEAD(kvmstats_unregister_list);

static void kvmstats_reap(struct work_struct *work);
static DECLARE_WORK(kvmstats_reap_work, kvmstats_reap);
static void kvmstats_unregister(struct work_struct *work);
static DECLARE_WORK(kvmstats_unregister_work, kvmstats_unregister);
static void kvmstats_orphans(struct work_struct *work);
static DECLARE_DEFERRABLE_WORK(kvmstats_orphans_work, kvmstats_orphans);

/* How often a VM that only kvmstats still holds is looked for. */
#define KVMSTATS_ORPHAN_PERIOD	HZ

static struct kvmstats_tracker *kvmstats_vm_find(const struct kvm *kvm)
{
	struct kvmstats_tracker *vm;

	lockdep_assert_held(&kvmstats_vm_lock);
	hash_for_each_possible(kvmstats_vms, vm, node, (unsigned long)kvm)
		if (vm->ref.kvm == kvm)
			return vm;
	return NULL;
}

/* Give @vm to the reaper, which drops what it holds and frees it. */
static void kvmstats_vm_reap(struct kvmstats_tracker *vm)
{
	lockdep_assert_held(&kvmstats_vm_lock);
	if (vm->state == KVMSTATS_VM_LIVE)
		hash_del(&vm->node);
	vm->state = KVMSTATS_VM_REAPED;
	list_add_tail(&vm->reap_node, &kvmstats_reap_list);
	queue_work(kvmstats_wq, &kvmstats_reap_work);
}

/* Serve @sf's data from its own copy from now on. */
static void kvmstats_freeze_file(struct kvmstats_file *sf)
{
	memcpy(sf->frozen, sf->live, sf->layout->data_size);
	rcu_assign_pointer(sf->data, (const void *)sf->frozen);
	sf->vm = NULL;
}

/* The VM can never run again: freeze every file of it, let it go. */
static void kvmstats_vm_freeze(struct kvmstats_tracker *vm, const char *why)
{
	struct kvmstats_file *sf, *tmp;

	lockdep_assert_held(&kvmstats_vm_lock);
	list_for_each_entry_safe(sf, tmp, &vm->files, vm_node) {
		list_del(&sf->vm_node);
		kvmstats_freeze_file(sf);
	}
	pr_debug("froze the statistics of %s (%s)\n", vm->ref.kvm->stats_id,
		 why);
	kvmstats_vm_reap(vm);
}

/* The creator's address space is going. */
static void kvmstats_mn_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct kvmstats_tracker *vm = container_of(mn, struct kvmstats_tracker, mn);

	mutex_lock(&kvmstats_vm_lock);
	vm->released = true;
	if (vm->state == KVMSTATS_VM_LIVE)
		kvmstats_vm_freeze(vm, "its creator's address space is gone");
	mutex_unlock(&kvmstats_vm_lock);
}

/*
 * Freeze the VMs whose only reference is the tracker's.  Every way to run
 * a VM again goes through a file that holds a reference of its own (the
 * VM file, a vCPU file, a guest_memfd, KVM's stats fds), and a new
 * reference can only be taken from one of those, or by kvm_get_kvm_safe()
 * from debugfs, which reads but cannot run the VM.  So a count of one,
 * read without a lock, is final for the VM's statistics: freezing on it
 * at worst races with a debugfs reader, which then reads live values that
 * no longer change.
 */
static void kvmstats_orphans(struct work_struct *work)
{
	struct kvmstats_tracker *vm;
	struct hlist_node *tmp;
	unsigned int bkt;

	mutex_lock(&kvmstats_vm_lock);
	hash_for_each_safe(kvmstats_vms, bkt, tmp, vm, node)
		if (refcount_read(&vm->ref.kvm->users_count) == 1)
			kvmstats_vm_freeze(vm, "only kvmstats holds it");
	if (!hash_empty(kvmstats_vms))
		queue_delayed_work(kvmstats_wq, &kvmstats_orphans_work,
				   KVMSTATS_ORPHAN_PERIOD);
	mutex_unlock(&kvmstats_vm_lock);
}

static const struct mmu_notifier_ops kvmstats_mn_ops = {
	.release = kvmstats_mn_release,
};

static void kvmstats_reap(struct work_struct *work)
{
	struct kvmstats_tracker *vm;
	LIST_HEAD(list);

	mutex_lock(&kvmstats_vm_lock);
	list_splice_init(&kvmstats_reap_list, &list);
	mutex_unlock(&kvmstats_vm_lock);
	if (list_empty(&list))
		return;

	/* Readers that loaded a live pointer before a freeze are done. */
	synchronize_rcu();

	list_for_each_entry(vm, &list, reap_node) {
		if (vm->ref.kvm) {
			kvmstats_vm_ref_put(&vm->ref);
			vm->ref.kvm = NULL;
			atomic_dec(&kvmstats_live_vms);
		}
	}

	/*
	 * Unregistering a notifier waits for a grace period of the mm code's
	 * own, one tracker at a time.  That is the other work item's job, so
	 * that VMs given up while it runs are given back without waiting
	 * behind it.
	 */
	mutex_lock(&kvmstats_vm_lock);
	list_splice_tail(&list, &kvmstats_unregister_list);
	mutex_unlock(&kvmstats_vm_lock);
	queue_work(kvmstats_wq, &kvmstats_unregister_work);
}

static void kvmstats_unregister(struct work_struct *work)
{
	struct kvmstats_tracker *vm, *tmp;
	LIST_HEAD(list);

	mutex_lock(&kvmstats_vm_lock);
	list_splice_init(&kvmstats_unregister_list, &list);
	mutex_unlock(&kvmstats_vm_lock);

	list_for_each_entry_safe(vm, tmp, &list, reap_node) {
		if (vm->registered)
			mmu_notifier_unregister(&vm->mn, vm->mn.mm);
		kfree(vm);
	}
}

static void kvmstats_vm_add_file(struct kvmstats_tracker *vm,
				 struct kvmstats_file *sf)
{
	list_add_tail(&sf->vm_node, &vm->files);
	sf->vm = vm;
}

/*
 * Attach the new, not yet installed stats file @sf to its VM, whose
 * reference the caller found in @ref: @sf then reads live through the VM's
 * tracker, or is frozen at once if the VM's creator has already gone.
 * Takes over @ref on success; on failure leaves it to the caller.
 */
int kvmstats_vm_attach(struct kvmstats_file *sf, struct kvmstats_vm_ref *ref)
{
	struct mm_struct *mm = ref->kvm->mm;
	struct kvmstats_tracker *vm, *new;
	int ret;

	mutex_lock(&kvmstats_vm_lock);
	vm = kvmstats_vm_find(ref->kvm);
	if (vm)
		kvmstats_vm_add_file(vm, sf);
	mutex_unlock(&kvmstats_vm_lock);
	if (vm) {
		/* The tracker's reference serves this file too. */
		kvmstats_vm_ref_put(ref);
		return 0;
	}

	new = kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
	if (!new)
		return -ENOMEM;
	INIT_LIST_HEAD(&new->files);
	new->mn.ops = &kvmstats_mn_ops;

	/*
	 * Registering needs a user of the mm; with none left, the creator
	 * is gone.  Our user may be the last (the VMM exiting meanwhile):
	 * then the address space is torn down, and ->release run, by a work
	 * item rather than in this ioctl.
	 */
	if (mmget_not_zero(mm)) {
		ret = mmu_notifier_register(&new->mn, mm);
		mmput_async(mm);
		if (ret) {
			kfree(new);
			return ret;
		}
		new->registered = true;
	} else {
		new->released = true;
	}

	mutex_lock(&kvmstats_vm_lock);
	vm = kvmstats_vm_find(ref->kvm);
	if (vm || new->released) {
		/* Another file raced us here, or the creator is gone. */
		if (vm)
			kvmstats_vm_add_file(vm, sf);
		else
			kvmstats_freeze_file(sf);
		if (new->registered)
			kvmstats_vm_reap(new);
		else
			kfree(new);
		mutex_unlock(&kvmstats_vm_lock);
		kvmstats_vm_ref_put(ref);
		return 0;
	}
	new->ref = *ref;
	new->state = KVMSTATS_VM_LIVE;
	hash_add(kvmstats_vms, &new->node, (unsigned long)new->ref.kvm);
	kvmstats_vm_add_file(new, sf);
	atomic_inc(&kvmstats_live_vms);
	/* Does nothing if it is already queued. */
	queue_delayed_work(kvmstats_wq, &kvmstats_orphans_work,
			   KVMSTATS_ORPHAN_PERIOD);
	mutex_unlock(&kvmstats_vm_lock);
	return 0;
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
			kvmstats_vm_reap(vm);
	}
	mutex_unlock(&kvmstats_vm_lock);
}

int kvmstats_vm_init(void)
{
	kvmstats_wq = alloc_workqueue("kvmstats", WQ_UNBOUND, 0);
	return kvmstats_wq ? 0 : -ENOMEM;
}

/* Module exit: every file is gone; wait for the work items' last runs. */
void kvmstats_vm_exit(void)
{
	/* Each queues the next: the orphan search, the reaper, unregistering. */
	cancel_delayed_work_sync(&kvmstats_orphans_work);
	flush_work(&kvmstats_reap_work);
	destroy_workqueue(kvmstats_wq);
	WARN_ON(!hash_empty(kvmstats_vms));
}
