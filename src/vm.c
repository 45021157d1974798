// SPDX-License-Identifier: GPL-2.0-only
/*
 * The VMs behind open stats files, and where their data comes from.
 *
 * A stats file reads its VM's or vCPU's statistics live, straight from
 * struct kvm / struct kvm_vcpu, which needs a reference on the VM.  But a
 * VM reference keeps everything the VM holds (guest memory pinned by SEV,
 * its ASID, page tables, KVM's hold on hardware virtualization, the vendor
 * module), and only the last reference lets kvm_destroy_vm() give it back.
 * So kvmstats holds a VM only while someone else does too:
 *
 *   - Every VM with live stats files has a tracker (struct
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
 *     buffer and the file switched to it (kvmstats_source_freeze() says why
 *     no read then ever sees a value that a later read takes back).  After
 *     synchronize_rcu() no reader holds a live pointer, and the reference
 *     is dropped by the module's own workqueue, one work item per VM, so
 *     that KVM's teardowns, which mostly wait for RCU, overlap.
 *   - A tracker whose last file closes while the VM is still live drops its
 *     reference right there, in the context of whoever closed the file, as
 *     KVM's own stats file does; no reader can be using it any more.  If it
 *     is the VM's last (the VMM has just closed its fds, and the scan has
 *     not come by), KVM destroys the VM there.
 *
 * So a VM that kvmstats holds last is destroyed in kvmstats' worker or in
 * the thread that closes the last stats file, never in a VMM thread chosen
 * for it: kvmstats queues no task work on other tasks and borrows no
 * address space.  That is what KVM does whenever its last reference is
 * held by anyone but the VMM (a debugfs reader, another process that was
 * passed a stats fd), and what it costs is the same: only when the VMM
 * itself drops the last reference (current->mm == kvm->mm) does x86 KVM
 * unmap its private memslots (the APIC access page, the identity map and
 * TSS, where KVM uses them) from the VMM, so after such a give-back the
 * VMM keeps those few pages mapped until it exits or unmaps them
 * (docs/design.md has the figures).
 *
 * Nothing here touches the VMM's address space or locks: no notifier is
 * registered on it and its mmap lock is never taken, so attaching a stats
 * file costs the same whatever the VMM maps.
 *
 * kvmstats_vm_lock (a mutex, never taken by readers) guards the table of
 * trackers, their source lists and the freeze.  A VM reference is never
 * dropped under it: destroying a VM sleeps for long.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "kvmstats.h"

atomic_t kvmstats_live_vms = ATOMIC_INIT(0);

/* How often VMs that only kvmstats still holds are looked for. */
#define KVMSTATS_SCAN_PERIOD	(HZ / 10)
/*
 * How many VMs the worker gives back at once: the workqueue's default
 * bound (256).  KVM's teardown of a VM mostly waits (rcu_barrier() in
 * x86's MMU teardown, SRCU cleanup), and concurrent waits are served by
 * the same grace periods: under TCG, 100 VMs took 0.59 s with 16 at once
 * and 0.28 to 0.34 s with this; 1,000 took 7.3 s and 3.7 s, where the
 * teardowns' own CPU time is what is left.
 */
#define KVMSTATS_PUT_ACTIVE	0

struct kvmstats_tracker {
	struct kvmstats_vm_ref ref;	/* what live sources read through */
	struct hlist_node node;		/* in kvmstats_vms while live */
	struct list_head sources;	/* live sources of this VM */
	struct list_head going_node;	/* frozen, waiting for readers */
	struct work_struct put_work;	/* gives ref back */
};

static DEFINE_MUTEX(kvmstats_vm_lock);
/* The scan: one work item, ordered with itself. */
static struct workqueue_struct *kvmstats_wq;
/* Where references are given back, many at once (KVMSTATS_PUT_ACTIVE). */
static struct workqueue_struct *kvmstats_put_wq;
static DEFINE_HASHTABLE(kvmstats_vms, 8);

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

/* Drop @vm's reference and free it: no source reads through it any more. */
static void kvmstats_vm_put(struct kvmstats_tracker *vm)
{
	kvmstats_vm_ref_put(&vm->ref);
	atomic_dec(&kvmstats_live_vms);
	kfree(vm);
}

static void kvmstats_vm_put_work(struct work_struct *work)
{
	kvmstats_vm_put(container_of(work, struct kvmstats_tracker, put_work));
}

/*
 * Serve @src from its own copy from now on.
 *
 * The copy is taken inside the write section of @src->seq, after a full
 * barrier: write_seqcount_begin() orders this CPU's stores only, and
 * without the barrier the loads of the copy could be satisfied before
 * readers on other CPUs see the sequence change (store-to-load
 * reordering, which x86 does too).  A reader could then copy a newer live
 * value, find the sequence unchanged and return it, and every later read
 * would return the older frozen one.  With the barrier, a read that is
 * not repeated copied the live block before the frozen copy was taken, and
 * every later read returns values at least that recent: no read returns a
 * value that a later read takes back, even where the VM still changes
 * after its freeze (a VMM that closed every fd of it still unmaps its
 * memory).  tests/host/25-freeze-model checks this order against a model
 * of x86's memory ordering.
 *
 * The argument needs the vCPU's store that a reader saw to be seen by the
 * freezing CPU too once it has been seen by one other CPU: multi-copy
 * atomicity, which x86, arm64, s390 and RISC-V have.  Elsewhere (POWER) the
 * reader puts a full barrier after its copy (kvmstats_read_done()).
 */
static void kvmstats_source_freeze(struct kvmstats_source *src)
{
	preempt_disable();
	write_seqcount_begin(&src->seq);
	/* The sequence change is seen before the copy's loads: see above. */
	smp_mb();
	memcpy(src->frozen, src->live, src->size);
	rcu_assign_pointer(src->data, (const void *)src->frozen);
	write_seqcount_end(&src->seq);
	preempt_enable();
}

/* Freeze every source of @vm and take it out of the table (it goes). */
static void kvmstats_vm_freeze(struct kvmstats_tracker *vm)
{
	struct kvmstats_source *src, *tmp;

	lockdep_assert_held(&kvmstats_vm_lock);
	list_for_each_entry_safe(src, tmp, &vm->sources, vm_node) {
		list_del_init(&src->vm_node);
		src->vm = NULL;
		kvmstats_source_freeze(src);
	}
	hash_del(&vm->node);
	kvmstats_debug_froze();
}

/* Start the scan unless it is due sooner already. */
static void kvmstats_scan_soon(void)
{
	lockdep_assert_held(&kvmstats_vm_lock);
	if (!delayed_work_pending(&kvmstats_scan_work))
		queue_delayed_work(kvmstats_wq, &kvmstats_scan_work,
				   KVMSTATS_SCAN_PERIOD);
}

/*
 * Every KVMSTATS_SCAN_PERIOD while anything is tracked: freeze the VMs
 * whose only reference is the tracker's, wait until no reader can still
 * hold a live pointer to them, and give their references back.
 */
static void kvmstats_scan(struct work_struct *work)
{
	struct kvmstats_tracker *vm, *next;
	struct hlist_node *tmp;
	unsigned int bkt;
	LIST_HEAD(going);

	mutex_lock(&kvmstats_vm_lock);
	hash_for_each_safe(kvmstats_vms, bkt, tmp, vm, node) {
		if (refcount_read(&vm->ref.kvm->users_count) != 1)
			continue;
		kvmstats_vm_freeze(vm);
		list_add_tail(&vm->going_node, &going);
	}
	if (!hash_empty(kvmstats_vms))
		kvmstats_scan_soon();
	mutex_unlock(&kvmstats_vm_lock);

	if (list_empty(&going))
		return;
	/* Readers that loaded a live pointer before a freeze are done. */
	synchronize_rcu();
	list_for_each_entry_safe(vm, next, &going, going_node) {
		list_del(&vm->going_node);
		INIT_WORK(&vm->put_work, kvmstats_vm_put_work);
		queue_work(kvmstats_put_wq, &vm->put_work);
	}
}

int kvmstats_source_init(struct kvmstats_source *src, size_t size)
{
	src->frozen = kzalloc(size, GFP_KERNEL_ACCOUNT);
	if (!src->frozen)
		return -ENOMEM;
	src->size = size;
	src->live = src->frozen;
	RCU_INIT_POINTER(src->data, (const void *)src->frozen);
	seqcount_init(&src->seq);
	INIT_LIST_HEAD(&src->vm_node);
	return 0;
}

void kvmstats_source_fini(struct kvmstats_source *src)
{
	kfree(src->frozen);
}

/*
 * Read @src live from @live, part of the VM that @ref holds, through the
 * VM's tracker.  Takes over @ref, also on failure (-ENOMEM), when it is
 * dropped here.  @src is not yet visible to readers.
 */
int kvmstats_source_attach(struct kvmstats_source *src,
			   struct kvmstats_vm_ref *ref, const void *live)
{
	struct kvmstats_tracker *vm, *spare;

	spare = kzalloc(sizeof(*spare), GFP_KERNEL_ACCOUNT);
	if (!spare) {
		kvmstats_vm_ref_put(ref);
		return -ENOMEM;
	}

	src->live = live;
	RCU_INIT_POINTER(src->data, live);
	mutex_lock(&kvmstats_vm_lock);
	vm = kvmstats_vm_find(ref->kvm);
	if (!vm) {
		vm = spare;
		spare = NULL;
		vm->ref = *ref;
		INIT_LIST_HEAD(&vm->sources);
		hash_add(kvmstats_vms, &vm->node, (unsigned long)vm->ref.kvm);
		atomic_inc(&kvmstats_live_vms);
		kvmstats_scan_soon();
	}
	list_add_tail(&src->vm_node, &vm->sources);
	src->vm = vm;
	mutex_unlock(&kvmstats_vm_lock);

	if (spare) {
		/*
		 * The tracker's reference serves this source too.  It holds
		 * it while the tracker has sources (this one, until it is
		 * detached), and no freeze takes it while ours is held:
		 * dropping ours destroys nothing.
		 */
		kvm_put_kvm(ref->kvm);
		module_put(ref->vendor);
		kfree(spare);
	}
	return 0;
}

/*
 * @src's file is being released, or was never installed: if it still
 * reads live and is its VM's last such source, the VM's reference is
 * dropped here.  Nobody reads @src any more.
 */
void kvmstats_source_detach(struct kvmstats_source *src)
{
	struct kvmstats_tracker *vm, *last = NULL;

	mutex_lock(&kvmstats_vm_lock);
	vm = src->vm;
	if (vm) {
		list_del_init(&src->vm_node);
		src->vm = NULL;
		if (list_empty(&vm->sources)) {
			hash_del(&vm->node);
			last = vm;
		}
	}
	mutex_unlock(&kvmstats_vm_lock);
	if (last)
		kvmstats_vm_put(last);
}

int kvmstats_vm_init(void)
{
	kvmstats_wq = alloc_workqueue("kvmstats", WQ_UNBOUND, 1);
	kvmstats_put_wq = alloc_workqueue("kvmstats_put", WQ_UNBOUND,
					  KVMSTATS_PUT_ACTIVE);
	if (!kvmstats_wq || !kvmstats_put_wq) {
		kvmstats_vm_exit();
		return -ENOMEM;
	}
	return 0;
}

/*
 * Module exit: no file is open (each pins the module), so no tracker is in
 * the table; wait for the scan and for the references it gives back.
 */
void kvmstats_vm_exit(void)
{
	cancel_delayed_work_sync(&kvmstats_scan_work);
	if (kvmstats_put_wq)
		destroy_workqueue(kvmstats_put_wq);
	if (kvmstats_wq)
		destroy_workqueue(kvmstats_wq);
	WARN_ON(!hash_empty(kvmstats_vms));
}
