/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * kvmstats - KVM binary statistics for every VM on the host
 *
 * /dev/kvmstats hands out read-only file descriptors whose contents are,
 * byte for byte, what the running kernel's own KVM_GET_STATS_FD ioctl
 * returns for the same VM or vCPU.  Unlike KVM_GET_STATS_FD, which KVM only
 * answers for the process that created the VM, the device answers for any VM
 * whose process is visible in the caller's pid namespace.
 *
 * Who may open the device is decided by the mode of its node alone.  The
 * module creates it 0600 root:root; a packaging udev rule may hand it to a
 * group.  Opening it O_RDONLY is enough for every ioctl below.  A stats fd
 * is an ordinary file: it may be passed to a less privileged process
 * (SCM_RIGHTS, fork) and stays readable there.  It grants nothing else.
 *
 * Ioctl magic: 0xBE.  It is unassigned in Documentation/userspace-api/ioctl/
 * ioctl-number.rst of every kernel kvmstats supports, and it is deliberately
 * not KVMIO (0xAE): a kvmstats command sent to a KVM fd, or a KVM command
 * sent to /dev/kvmstats, fails with ENOTTY instead of meaning something.
 *
 * Every ioctl checks its sizes, flags and reserved fields before anything
 * else: non-zero flags or reserved fields are EINVAL, an unreadable or
 * unwritable argument is EFAULT, an unknown command is ENOTTY.  No value the
 * device returns is, or is derived from, a kernel address.
 *
 *
 * KVMSTATS_GET_API_VERSION		_IO(0xBE, 0x00)
 *
 *	Returns KVMSTATS_API_VERSION.  The argument must be 0 (EINVAL).
 *	Version 2 added KVMSTATS_LIST_PIDFD and KVMSTATS_FD_PIDFD, version 3
 *	KVMSTATS_LIST_VCPUS, version 4 KVMSTATS_GET_SCHEMA_FD; everything of
 *	earlier versions is unchanged.
 *
 *
 * KVMSTATS_LIST_VMS			_IOWR(0xBE, 0x01, struct kvmstats_vm_list)
 *
 *	Lists the VMs of the host as the caller's pid namespace sees them.
 *	Each VM appears once, under the process whose address space created it
 *	(the process that issued KVM_CREATE_VM), at the lowest fd number that
 *	process holds for it, provided the process is visible in the caller's
 *	pid namespace.  @pid is the thread-group id in that namespace.  Entries
 *	are ordered by (pid, fd).
 *
 *	@nr is the room in @vms on input and the number of VMs on output.  If
 *	the VMs do not fit, the ioctl fails with E2BIG and sets @nr to the
 *	number needed; the contents of @vms are then unspecified.  The set of
 *	VMs changes at any time, so callers retry with a larger array.  The
 *	entries are written to @vms as processes are visited; the kernel keeps
 *	no copy of them, so there is no limit but @nr.
 *
 *	A process is seen through all its threads: its address space through
 *	any thread that still has it, its file table through any that still
 *	has one, so a leader exiting before its other threads (it drops its
 *	address space before its files) does not hide the process.  A VM
 *	is listed once even where processes share its creator's address
 *	space: under the first of them in pid order that holds a VM fd of it
 *	(a vfork() child, as posix_spawn() makes, or a clone(CLONE_VM)
 *	sibling comes after its creator unless pids have wrapped around).
 *
 *	Blind spots, by design: a VM is not listed when its creating process
 *	has exited (even while other processes or stats fds keep it alive),
 *	when the creating process holds it only through vCPU, device or stats
 *	fds, or when only a process it was passed to holds its VM fd.  Such a
 *	VM is still reachable with KVMSTATS_GET_STATS_FD through any (pid, fd)
 *	whose fd is its VM file.  Both ioctls see the file table shared by
 *	the process's threads: a thread that unshared its file table
 *	(CLONE_THREAD without CLONE_FILES, or unshare(CLONE_FILES)) holds fds
 *	kvmstats does not see.
 *
 *	Cost, worst case: time linear in the pids of the caller's namespace
 *	and in the open fds of the processes that have an address space, plus
 *	a scan of each such process's bitmap of open fds (one bit per slot of
 *	its file table); a process's file-table lock is held for at most 256
 *	of its open fds and 65536 slots at a time, and between those chunks
 *	and between pids the call may be preempted and ends on a fatal
 *	signal.  Memory: a fixed 768 bytes and a
 *	set of the VMs listed, at most 32 bytes per VM for as many VMs as @nr
 *	or 1024, whichever is more, charged to the caller; never sized by what
 *	another process holds.  Past that set's size VMs are counted but not
 *	remembered: with more than 1024 VMs on the host and @nr too small, the
 *	count E2BIG returns may include a VM twice (a dup'd fd, a shared
 *	address space), never fewer VMs than there are, and a retry with that
 *	room lists them exactly.
 *
 *	Errors: EINVAL (@flags), EFAULT, E2BIG (see above), ENOMEM, EINTR (a
 *	fatal signal arrived during the walk: the caller is dying anyway).
 *
 *
 * KVMSTATS_GET_STATS_FD		_IOW(0xBE, 0x02, struct kvmstats_fd_request)
 *
 *	Returns a new stats fd for the VM whose VM file is open as @fd in
 *	process @pid (0: the calling process), or for its vCPU number @vcpu.
 *	With KVMSTATS_FD_PIDFD in @flags, @pid is instead a pidfd open in the
 *	calling process (see KVMSTATS_LIST_PIDFD), and the process is the one
 *	it refers to, whatever its pid has become.
 *	@vcpu is the vCPU index, 0 .. nr_vcpus - 1 in creation order (not the
 *	vcpu_id chosen at KVM_CREATE_VCPU), or -1 for the VM's own statistics.
 *	@fd may be any fd number of that process whose file is a KVM VM file,
 *	including a dup or an fd received from another process.
 *
 *	No probing: whether an fd of another process is open, and what it is,
 *	is for those who could ptrace that process to know.  Only a caller
 *	with CAP_SYS_PTRACE in the target's user namespace is told EINVAL for
 *	an open fd that is not a VM file; everyone else gets EBADF for both
 *	"not open" and "not a VM file".
 *
 *	Errors, checked in this order:
 *	  EINVAL  @flags other than KVMSTATS_FD_PIDFD, non-zero @reserved, or
 *	          @vcpu < -1;
 *	  EBADF   (KVMSTATS_FD_PIDFD) @pid is not an open fd of the caller;
 *	  EINVAL  (KVMSTATS_FD_PIDFD) @pid is open but is not a pidfd;
 *	  ESRCH   no process @pid in the caller's pid namespace, @pid is a
 *	          thread id that is not its thread group's id, or the process
 *	          has exited or (pidfd) is not visible in that namespace;
 *	  EBADF   @fd is negative or not open in that process, or (see No
 *	          probing) is open but not a KVM VM file;
 *	  EINVAL  @fd is open but is not a KVM VM file (a vCPU fd, /dev/kvm,
 *	          a stats fd, a pipe...), to a caller with CAP_SYS_PTRACE over
 *	          the process;
 *	  ENOENT  @vcpu >= the VM's number of online vCPUs;
 *	  ENODEV  the module owning the VM file is being unloaded (cannot
 *	          happen while the VM file is open; listed for completeness);
 *	  EMFILE, ENFILE, ENOMEM  as for open(2).
 *	It never waits for the VM or its process: nothing of the VMM's
 *	address space is locked, and no lock of KVM's is taken.
 *
 *
 * KVMSTATS_LIST_PIDFD			_IOWR(0xBE, 0x04, struct kvmstats_pidfd_list)
 *
 *	Lists the VMs of one process, the one @pidfd refers to (a pidfd from
 *	pidfd_open(2) or clone(CLONE_PIDFD), open in the calling process),
 *	exactly as KVMSTATS_LIST_VMS would list that process's VMs: each VM it
 *	created once, at its lowest fd for it.  @vms[i].pid is the process's
 *	pid in the caller's pid namespace.  @nr works as for KVMSTATS_LIST_VMS
 *	(E2BIG with the count needed).
 *
 *	This is how a VM is named without a race: a pid can be reused between
 *	KVMSTATS_LIST_VMS and any later call, a pidfd cannot.  Take the pids
 *	from KVMSTATS_LIST_VMS, open a pidfd for each, list that process's VMs
 *	with this ioctl, and ask KVMSTATS_GET_STATS_FD with
 *	KVMSTATS_FD_PIDFD: every answer is then about the process the pidfd
 *	holds.  (A VMM may itself close a VM fd and reuse its number for a new
 *	VM; the stats file's id string tells the VMs apart.)
 *
 *	Errors, checked in this order:
 *	  EINVAL  non-zero @flags or @reserved;
 *	  EFAULT;
 *	  EBADF   @pidfd is not an open fd of the caller;
 *	  EINVAL  @pidfd is open but is not a pidfd;
 *	  ESRCH   the process has exited, or is not visible in the caller's
 *	          pid namespace;
 *	  E2BIG, ENOMEM, EINTR as for KVMSTATS_LIST_VMS.
 *
 *
 * KVMSTATS_LIST_VCPUS			_IOWR(0xBE, 0x05, struct kvmstats_vcpu_list)
 *
 *	Lists the vCPUs of one VM, named by (@pid or pidfd, @fd) exactly as
 *	KVMSTATS_GET_STATS_FD names it, with the host thread that runs each:
 *	for vCPU index i (0 .. nr_vcpus - 1, the @vcpu of KVMSTATS_GET_STATS_FD)
 *	@vcpus[i] has its @vcpu_id (the id given to KVM_CREATE_VCPU) and @tid,
 *	the thread that last entered KVM_RUN on it, as a thread id of the
 *	caller's pid namespace.  KVM records that thread itself (it is what
 *	KVM's debugfs shows as a vCPU's "pid"), so this works for any VMM:
 *	/proc/<tid>/schedstat then has the scheduler's figures for that vCPU
 *	(time on a CPU, time waiting for one).  @tid is 0 when there is no such
 *	thread to name, and @flags then says why:
 *	  KVMSTATS_VCPU_NEVER_RUN   no thread has entered KVM_RUN on it yet;
 *	  KVMSTATS_VCPU_TID_EXITED  that thread has exited;
 *	  KVMSTATS_VCPU_TID_HIDDEN  that thread is not visible in the caller's
 *	                            pid namespace.
 *	A vCPU moves to another thread only when that thread enters KVM_RUN,
 *	so @tid names the thread running the vCPU now, or the last one that
 *	did.  The answer is read without taking vcpu->mutex (which KVM_RUN
 *	holds) and never waits for the VM.
 *
 *	@nr is the room in @vcpus on input and the VM's number of online vCPUs
 *	on output.  If they do not fit, the ioctl fails with E2BIG and sets @nr
 *	to the number needed (@vcpus is then unspecified).
 *
 *	Errors: EINVAL (@flags other than KVMSTATS_FD_PIDFD, non-zero
 *	@reserved), EFAULT, then those of KVMSTATS_GET_STATS_FD for naming the
 *	VM, in its order (EBADF, EINVAL, ESRCH, EBADF/EINVAL for @fd), then
 *	E2BIG.
 *
 *
 * KVMSTATS_GET_SCHEMA_FD		_IOW(0xBE, 0x06, struct kvmstats_schema_request)
 *
 *	Returns a new read-only fd laid out as a stats fd (see below) whose
 *	header and descriptors are, byte for byte, those every VM's stats fd
 *	carries (@flags 0) or every vCPU's (KVMSTATS_SCHEMA_VCPU): the running
 *	KVM's own, which the module learned when it loaded.  Its id is
 *	"kvmstats-schema" or "kvmstats-schema/vcpu" and its data block is all
 *	zeros.  No VM is needed: this is how a tool describes the statistics
 *	before any VM runs.
 *
 *	Errors: EFAULT; EINVAL (@flags other than KVMSTATS_SCHEMA_VCPU,
 *	non-zero @reserved0 or @reserved); EMFILE, ENFILE, ENOMEM as for
 *	open(2).
 *
 *
 * KVMSTATS_READ_BATCH			_IOWR(0xBE, 0x03, struct kvmstats_read_batch)
 *
 *	Reads from many kvmstats stats fds of the calling process in one call,
 *	each exactly as pread(2) would (same bytes, same per-op errors, checked
 *	in the same order, through the same LSM read permission hook, the same
 *	inotify/fanotify access event and the same I/O accounting), so a
 *	telemetry sweep of a whole host costs one system call instead of one
 *	per VM and vCPU.  Like pread, it takes no lock and allocates nothing.
 *	Each op's @result is set to the number of bytes read (0 at or past the
 *	end of the file) or to a negative errno:
 *	  -EBADF   @fd is not open;
 *	  -EINVAL  @fd is not a kvmstats stats fd (native KVM stats fds are not
 *	           accepted: read them with pread), @flags is non-zero or
 *	           @offset is above the largest file offset;
 *	  -EFAULT  @buf is not a user address range of @len bytes, or is not
 *	           writable where bytes are copied;
 *	  -EINVAL  @offset + @len is above the largest file offset;
 *	  -EACCES, -EPERM  an LSM refused the read, as it would refuse pread.
 *	Ops are run in order.  The ioctl returns 0 once every op has a result.
 *	It fails with EINVAL before any op is run for non-zero @flags or
 *	@reserved or @nr greater than KVMSTATS_BATCH_MAX, and with EFAULT when
 *	an op cannot be read or its @result cannot be written back; the ops
 *	before that one have then been run and their results written.
 *
 *
 * The stats fd
 *
 *	Its contents are those of KVM_GET_STATS_FD, laid out as described by
 *	struct kvm_stats_header in <linux/kvm.h>:
 *
 *	  0            id_offset    desc_offset                data_offset
 *	  +------------+------------+--------------------------+----------...
 *	  | header     | id string  | num_desc descriptors of  | the stats
 *	  | (24 bytes) | (name_size)| sizeof(kvm_stats_desc) + | (u64 each,
 *	  |            |            | name_size bytes each     | by offset)
 *	  +------------+------------+--------------------------+----------...
 *
 *	The header, id and descriptors never change for the life of the fd;
 *	the data block is read live from the VM or vCPU, without any lock, so
 *	each u64 is current but the block is not an atomic snapshot (exactly
 *	as with KVM's own fd).
 *
 *	The id string is copied from KVM: "kvm-<tid>" for a VM and
 *	"kvm-<tid>/vcpu-<vcpu_id>" for a vCPU, where <tid> is the thread id, in
 *	the initial pid namespace, of the thread that created the VM or vCPU.
 *	Inside a container it is therefore a host thread id, not a pid of the
 *	container, and for a vCPU it is usually the vCPU thread's id.
 *
 *	File behaviour matches KVM's stats fd: pread(2) at any offset and
 *	length; read(2) advances the file offset; 0 at and past the end of the
 *	file; EINVAL for a negative offset; lseek(2) succeeds without moving
 *	the offset (as KVM's noop llseek does: re-read with pread).  The fd is
 *	O_RDONLY and close-on-exec; write(2) fails with EBADF, mmap(2) with
 *	ENODEV and any ioctl with ENOTTY.
 *
 *	A stats fd never keeps a dead VM alive.  kvmstats holds one reference
 *	on a VM for all its stats fds, and only while someone else holds the
 *	VM too (its VMM's VM or vCPU fds, KVM's own stats fds, a copy of the
 *	VM fd in another process): reads are then live, and the VM (and,
 *	where KVM's VM file pins it, the vendor module kvm_amd or kvm_intel)
 *	cannot go away.  Once kvmstats' reference is the VM's last one (its
 *	process exited, or closed every fd of the VM and lives on), the VM can
 *	never run again, and within about 100 ms kvmstats notices: every stats
 *	fd of the VM and its vCPUs then serves a copy of the values of that
 *	moment, and kvmstats gives its reference back in its own context (its
 *	worker, or the thread that closes the VM's last stats fd, or that of
 *	a GET_STATS_FD that fails after finding the VM), as KVM gives back a
 *	VM whose last holder is not its VMM; nothing runs in a thread of the
 *	VMM.  For a VMM that exited, the copy's values are those after
 *	KVM's teardown of the VM's page tables at the VMM's exit, exactly what
 *	a native stats fd held across the exit reads.  Reads keep working and
 *	the values stay frozen; no read ever returns a value that a later
 *	read takes back.  While any stats fd is open, kvmstats itself cannot
 *	be unloaded.
 */
#ifndef _UAPI_LINUX_KVMSTATS_H
#define _UAPI_LINUX_KVMSTATS_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KVMSTATS_API_VERSION	4

#define KVMSTATS_DEVICE		"/dev/kvmstats"

/* Largest number of ops in one KVMSTATS_READ_BATCH. */
#define KVMSTATS_BATCH_MAX	4096

/* One VM, as the caller's pid namespace sees it. */
struct kvmstats_vm {
	__s32 pid;		/* process (thread-group id) holding the VM fd */
	__s32 fd;		/* the VM fd's number in that process */
	__u32 nr_vcpus;		/* online vCPUs */
	__u32 flags;		/* 0 for now */
};

struct kvmstats_vm_list {
	__u32 nr;		/* in: room in vms[]; out: number of VMs */
	__u32 flags;		/* must be 0 */
	struct kvmstats_vm vms[];
};

struct kvmstats_fd_request {
	__s32 pid;		/* 0: the calling process */
	__s32 fd;		/* a VM fd number in that process */
	__s32 vcpu;		/* -1: the VM; else vCPU index 0..nr_vcpus-1 */
	__u32 flags;		/* 0 or KVMSTATS_FD_PIDFD */
	__u64 reserved[2];	/* must be 0 */
};

/* kvmstats_fd_request.flags: @pid is a pidfd of the caller, not a pid. */
#define KVMSTATS_FD_PIDFD	(1U << 0)

struct kvmstats_pidfd_list {
	__s32 pidfd;		/* a pidfd of the calling process */
	__u32 flags;		/* must be 0 */
	__u32 nr;		/* in: room in vms[]; out: number of VMs */
	__u32 reserved;		/* must be 0 */
	struct kvmstats_vm vms[];
};

struct kvmstats_read_op {
	__s32 fd;		/* a kvmstats stats fd of the calling process */
	__u32 flags;		/* must be 0 */
	__u64 offset;		/* file offset to read at */
	__u64 buf;		/* user address of the destination */
	__u32 len;		/* bytes to read */
	__s32 result;		/* out: bytes read, or -errno */
};

struct kvmstats_read_batch {
	__u32 nr;		/* number of ops, <= KVMSTATS_BATCH_MAX */
	__u32 flags;		/* must be 0 */
	__u64 ops;		/* user address of struct kvmstats_read_op[nr] */
	__u64 reserved[2];	/* must be 0 */
};

/* One vCPU of a VM, and the host thread that runs it. */
struct kvmstats_vcpu {
	__u32 index;		/* 0 .. nr_vcpus - 1 */
	__u32 vcpu_id;		/* the id given to KVM_CREATE_VCPU */
	__s32 tid;		/* thread that last entered KVM_RUN, or 0 */
	__u32 flags;		/* KVMSTATS_VCPU_*: why @tid is 0 */
};

/* kvmstats_vcpu.flags */
#define KVMSTATS_VCPU_NEVER_RUN		(1U << 0)
#define KVMSTATS_VCPU_TID_EXITED	(1U << 1)
#define KVMSTATS_VCPU_TID_HIDDEN	(1U << 2)

struct kvmstats_vcpu_list {
	__s32 pid;		/* as in struct kvmstats_fd_request */
	__s32 fd;		/* a VM fd number in that process */
	__u32 flags;		/* 0 or KVMSTATS_FD_PIDFD */
	__u32 nr;		/* in: room in vcpus[]; out: online vCPUs */
	__u64 reserved[2];	/* must be 0 */
	struct kvmstats_vcpu vcpus[];
};

struct kvmstats_schema_request {
	__u32 flags;		/* 0 or KVMSTATS_SCHEMA_VCPU */
	__u32 reserved0;	/* must be 0 */
	__u64 reserved[3];	/* must be 0 */
};

/* kvmstats_schema_request.flags: the vCPU table, not the VM's. */
#define KVMSTATS_SCHEMA_VCPU	(1U << 0)

#define KVMSTATS_IO		0xBE

#define KVMSTATS_GET_API_VERSION _IO(KVMSTATS_IO, 0x00)
#define KVMSTATS_LIST_VMS	_IOWR(KVMSTATS_IO, 0x01, struct kvmstats_vm_list)
#define KVMSTATS_GET_STATS_FD	_IOW(KVMSTATS_IO, 0x02, struct kvmstats_fd_request)
#define KVMSTATS_READ_BATCH	_IOWR(KVMSTATS_IO, 0x03, struct kvmstats_read_batch)
#define KVMSTATS_LIST_PIDFD	_IOWR(KVMSTATS_IO, 0x04, struct kvmstats_pidfd_list)
#define KVMSTATS_LIST_VCPUS	_IOWR(KVMSTATS_IO, 0x05, struct kvmstats_vcpu_list)
#define KVMSTATS_GET_SCHEMA_FD	_IOW(KVMSTATS_IO, 0x06, struct kvmstats_schema_request)

#endif /* _UAPI_LINUX_KVMSTATS_H */
