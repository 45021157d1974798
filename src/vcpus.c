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

long kvmstats_list_vcpus(struct kvmstats_vcpu_list __user *ulist)
{
	struct kvmstats_vcpu_list list;
	struct kvmstats_fd_request req;
	struct kvmstats_vm_ref ref;
	unsigned int i, nr;
	long ret = 0;

	if (copy_from_user(&list, ulist, sizeof(list)))
		return -EFAULT;
	if ((list.flags & ~KVMSTATS_FD_PIDFD) || list.reserved[0] ||
	    list.reserved[1])
		return -EINVAL;

	req = (struct kvmstats_fd_request) {
		.pid = list.pid,
		.fd = list.fd,
		.vcpu = -1,
		.flags = list.flags,
	};
	ret = kvmstats_get_vm(&req, &ref);
	if (ret)
		return ret;

	/* Only indexes below online_vcpus are published vCPUs. */
	nr = atomic_read(&ref.kvm->online_vcpus);
	for (i = 0; i < nr && i < list.nr; i++) {
		struct kvm_vcpu *vcpu = kvm_get_vcpu(ref.kvm, i);
		struct kvmstats_vcpu v = { .index = i };
		struct pid *pid;

		if (!vcpu)
			break;
		v.vcpu_id = vcpu->vcpu_id;
		pid = kvmstats_vcpu_get_pid(vcpu);
		kvmstats_vcpu_thread(pid, &v);
		put_pid(pid);
		if (copy_to_user(&ulist->vcpus[i], &v, sizeof(v))) {
			ret = -EFAULT;
			goto out;
		}
	}
	if (put_user(nr, &ulist->nr))
		ret = -EFAULT;
	else if (nr > list.nr)
		ret = -E2BIG;
out:
	kvmstats_vm_ref_put(&ref);
	return ret;
}
