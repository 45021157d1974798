/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Who a VM is: its VMM process (pid, command name, command line), what
 * QEMU was told to call it (-name, -uuid), and how a user names it on the
 * command line.  Every command (list, schema, show, top, export) asks
 * here, so a VM is called the same everywhere.
 *
 * Everything here is read from the VMM's /proc/PID directory, or, with
 * KVMSTATS_STATS_DIR, from the synthetic host's DIR/PID-FD, whose files
 * have the same names and formats (see kvmstats(1), ENVIRONMENT).  This
 * file calls nothing of the rest of the tool but escape.c (how a name is
 * shown): the commands and host.c call it, never the other way round.
 */
#ifndef KVMSTATS_IDENTITY_H
#define KVMSTATS_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

struct kvmstats_sched;
struct kvmstats_vcpu_info;
struct kvmstats_vmref;
struct source;

/* QEMU's canonical UUID text: 8-4-4-4-12 hex digits and a NUL. */
#define UUID_LEN 37

struct vm_identity {
	char comm[32];	     /* the VMM's command name; "?" if unreadable */
	char name[128];	     /* QEMU's -name (guest=), or "" */
	char uuid[UUID_LEN]; /* QEMU's -uuid in lower case, or "" */
	/*
	 * A KubeVirt VM (identity_kubevirt_split()): its namespace, and where
	 * in name[] the VM's own name starts; "" and 0 for any other VM.
	 */
	char ns[64];
	unsigned int name_at;
	bool has_uid;	  /* uid is known */
	unsigned int uid; /* the VMM's effective user id (/proc/PID/status) */
};

/* The guest's name without KubeVirt's namespace: what the labels call it. */
static inline const char *identity_vm_name(const struct vm_identity *id)
{
	return id->name + id->name_at;
}

/*
 * KubeVirt's virt-launcher names the QEMU guest NAMESPACE_VM (its
 * VMINamespaceKeyFunc), where NAMESPACE is a Kubernetes namespace (a DNS
 * label: 1 to 63 of [a-z0-9-], a letter or digit at each end) and VM a
 * VirtualMachineInstance's name (a DNS subdomain: 1 to 253 of [a-z0-9.-],
 * a letter or digit at each end), neither of which can hold a '_'.  If
 * @name has that form, its namespace into @ns (@len bytes of room) and
 * the offset of the VM's name in @name; else 0.
 */
size_t identity_kubevirt_split(const char *name, char *ns, size_t len);

/*
 * QEMU's guest name and UUID from its command line (@len bytes of
 * NUL-separated arguments, as /proc/PID/cmdline has them), into @id's
 * name and uuid (both "" when absent).  As QEMU reads them: "-name foo",
 * "-name guest=foo,debug-threads=on" (the first item without a key is the
 * guest name; ",," is a comma) and "-uuid 8-4-4-4-12", "--name" and
 * "--uuid" alike, the last one given winning; a -uuid QEMU would refuse
 * is ignored.
 */
void identity_parse_cmdline(const char *cmdline, size_t len,
			    struct vm_identity *id);

/*
 * Who VM @pid:@fd of @src is: its VMM's comm and, from its command line,
 * QEMU's name and UUID; its owner (the effective uid of its status); and,
 * for a VMM in a Kubernetes pod (its cgroup is under kubepods) whose
 * guest name has KubeVirt's form, the namespace apart from the name.
 * What cannot be read stays "?" (comm), "" or unknown (uid).
 */
void identity_read(const struct source *src, int pid, int fd,
		   struct vm_identity *id);

/*
 * Does @sel, as a user gives it on the command line, select VM @pid:@fd
 * called @id?  @sel is a pid (every VM of that process), PID:FD, a QEMU
 * guest name (as it is, or as the text output shows it escaped) or a
 * UUID (in any case); NULL selects every VM.  Numbers name pids, never
 * guest names.  @id may be NULL when identity_sel_is_pid(@sel).
 */
bool identity_selects(const char *sel, int pid, int fd,
		      const struct vm_identity *id);

/* Does @sel look like a pid or PID:FD (not a guest name or UUID)? */
bool identity_sel_is_pid(const char *sel);

/*
 * The host thread that runs each vCPU of VM @pid:@fd, listed by @nr_vcpus
 * vCPUs: from the device (through @ref when there is one), or from the
 * synthetic host's DIR/PID-FD/vcpus, one line per vCPU in index order,
 * "VCPU_ID TID FLAGS" as KVMSTATS_LIST_VCPUS gives them (without the
 * file, or for lines it lacks, KVMSTATS_VCPU_UNKNOWN).  The count and a
 * malloc()ed array, or -errno (as kvmstats_list_vcpus()).
 */
int identity_vcpu_threads(const struct source *src, struct kvmstats_vmref *ref,
			  int pid, int fd, unsigned int nr_vcpus,
			  struct kvmstats_vcpu_info **out);

/*
 * What the scheduler gave thread @tid of VM @pid:@fd's VMM:
 * kvmstats_thread_sched() on /proc, or kvmstats_thread_sched_at() on the
 * synthetic host's DIR/PID-FD (task/TID/schedstat and stat).  0 or -errno.
 */
int identity_thread_sched(const struct source *src, int pid, int fd, int tid,
			  unsigned int flags, struct kvmstats_sched *out);

/* The thread's name (task/TID/comm, "CPU 0/KVM" for QEMU), or "". */
void identity_thread_comm(const struct source *src, int pid, int fd, int tid,
			  char *buf, size_t len);

/*
 * Why a vCPU's thread (device @flags) or its figures (@err from
 * identity_thread_sched()) are not known: a word for JSON and a phrase
 * for people, or NULL for both when they are known (@flags 0, @err 0).
 *   never-run       no thread has run the vCPU yet
 *   exited          the thread that last ran it has exited
 *   hidden          the thread is not in the reader's pid namespace
 *   unknown         the kvmstats module cannot say (API version < 3)
 *   proc-hidden     /proc hides the thread (hidepid=)
 *   proc-other-ns   /proc is another pid namespace's
 *   no-proc         there is no /proc
 *   no-schedstat    the kernel keeps no scheduler statistics
 *   error           reading them failed otherwise
 */
const char *identity_thread_state(unsigned int flags, int err);
const char *identity_thread_why(unsigned int flags, int err);

#endif /* KVMSTATS_IDENTITY_H */
