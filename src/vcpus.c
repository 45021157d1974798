// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVMSTATS_LIST_VCPUS: the vCPUs of a VM and the host thread that runs each.
 *
 * KVM records, per vCPU, the thread that last entered KVM_RUN on it
 * (vcpu->pid: a struct pid reference, replaced when another thread runs
 * the vCPU).  That is the one fact a host agent cannot get elsewhere: which
 * thread of a VMM is which vCPU, so that the scheduler's own accounting of
 * that thread (/proc/<tid>/schedstat) can be read as the vCPU's CPU time
 * and run-queue wait.  The reference is taken under whatever guards
 * vcpu->pid on this kernel (RCU, or KVM's pid_lock rwlock, whose writer
 * holds it only to swap the pointer), never under vcpu->mutex, which a
 * vCPU in KVM_RUN holds for as long as it runs.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "kvmstats.h"

/* What the caller may know of the thread behind @pid (a reference or NULL). */
static void kvmstats_vcpu_thread(struct pid *pid, struct kvmstats_vcpu *v)
{
	bool alive;

	if (!pid) {
		v->flags = KVMSTATS_VCPU_NEVER_RUN;
		return;
	}
	rcu_read_lock();
	alive = pid_task(pid, PIDTYPE_PID);
	rcu_read_unlock();
	if (!alive) {
		/* Its number may already belong to another thread. */
		v->flags = KVMSTATS_VCPU_TID_EXITED;
		return;
	}
	v->tid = pid_vnr(pid);
	if (!v->tid)
		v->flags = KVMSTATS_VCPU_TID_HIDDEN;
}

/* What the VM file's callback collects, under the file table's lock. */
struct kvmstats_vcpus_query {
	struct kvmstats_vcpu *v;	/* @room entries */
	struct pid **pid;		/* @room entries, references */
	unsigned int room;
	unsigned int nr;		/* online vCPUs */
};

/*
 * Runs under the locks that keep the VM file open (so the VM and its
 * vCPUs are alive: KVM frees vCPUs only with their VM): no VM reference
 * is taken, and nothing here sleeps.
 */
static int kvmstats_vcpus_collect(void *ctx, struct file *file)
{
	struct kvmstats_vcpus_query *q = ctx;
	struct kvm *kvm = file->private_data;
	unsigned int i;

	/* Only indexes below online_vcpus are published vCPUs. */
	q->nr = atomic_read(&kvm->online_vcpus);
	for (i = 0; i < q->nr && i < q->room; i++) {
		struct kvm_vcpu *vcpu = kvm_get_vcpu(kvm, i);

		if (!vcpu)
			return -ENOENT;
		q->v[i].index = i;
		q->v[i].vcpu_id = vcpu->vcpu_id;
		q->pid[i] = kvmstats_vcpu_get_pid(vcpu);
	}
	return 0;
}

/*
 * KVMSTATS_LIST_VCPUS.  The answer is collected into arrays sized by the
 * caller's room (at most KVM_MAX_VCPUS entries, charged to the caller) and
 * copied out after the locks are dropped.
 */
long kvmstats_list_vcpus(struct kvmstats_vcpu_list __user *ulist)
{
	struct kvmstats_vcpus_query q = {};
	struct kvmstats_vcpu_list list;
	struct kvmstats_fd_request req;
	unsigned int i, n;
	long ret;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if ((list.flags & ~KVMSTATS_FD_PIDFD) || list.reserved[0] ||
	    list.reserved[1])
		return -EINVAL;

	q.room = min_t(u32, list.nr, KVM_MAX_VCPUS);
	q.v = kvcalloc(q.room, sizeof(*q.v), GFP_KERNEL_ACCOUNT);
	q.pid = kvcalloc(q.room, sizeof(*q.pid), GFP_KERNEL_ACCOUNT);
	if (q.room && (!q.v || !q.pid)) {
		ret = -ENOMEM;
		goto out;
	}

	req = (struct kvmstats_fd_request) {
		.pid = list.pid,
		.fd = list.fd,
		.vcpu = -1,
		.flags = list.flags,
	};
	ret = kvmstats_find_vm(&req, kvmstats_vcpus_collect, &q);
	n = min(q.nr, q.room);
	for (i = 0; !ret && i < n; i++) {
		kvmstats_vcpu_thread(q.pid[i], &q.v[i]);
		if (copy_to_user(&ulist->vcpus[i], &q.v[i], sizeof(q.v[i])))
			ret = -EFAULT;
	}
	if (!ret && put_user(q.nr, &ulist->nr))
		ret = -EFAULT;
	if (!ret && q.nr > list.nr)
		ret = -E2BIG;
out:
	for (i = 0; q.pid && i < q.room; i++)
		put_pid(q.pid[i]);
	kvfree(q.pid);
	kvfree(q.v);
	return ret;
}
