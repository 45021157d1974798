/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libkvmstats - read KVM binary statistics through /dev/kvmstats, or
 * without it where the kernel lets any holder of a VM's fds read them
 *
 * A stats file (from /dev/kvmstats or from KVM's own KVM_GET_STATS_FD) is a
 * header, an id string, a table of descriptors and a data block of u64
 * values.  The first three never change for the life of the fd, so the
 * library reads and checks them once, when the fd is adopted; every sample
 * after that is one pread(2) of the data block into memory the caller owns.
 * Nothing is allocated and nothing is parsed on the sampling path.
 *
 * Errors.  Every function that can fail returns a negative errno value
 * (-ENOENT, -EBADMSG, ...) and leaves errno alone; kvmstats_strerror()
 * turns one into a sentence.  The library never prints and never exits.
 *   -EBADMSG  the file is not a well-formed stats file (bad header, a
 *             descriptor or block out of bounds, missing NUL terminator,
 *             short file).  A descriptor that is well formed but that this
 *             library does not understand (a newer kernel's type, unit,
 *             base or flag) is not an error: see kvmstats_file_skipped();
 *   -EINVAL   a bad argument (NULL pointer, buffer too small, ...);
 *   -EIO      a data read returned fewer bytes than the data block;
 *   anything else comes from the system call that failed.
 *
 * Thread-safety.  The functions keep no global state.  A struct
 * kvmstats_file is immutable once adopted, so any number of threads may
 * read samples from one file at the same time (each into its own buffer)
 * and query its descriptors; the same holds for a struct kvmstats_vmref.
 * A struct kvmstats_sweep holds scratch memory: use one per thread.
 * Freeing an object while another thread uses it is, as usual, the
 * caller's bug.
 *
 * File descriptors.  The library opens every fd it creates O_CLOEXEC.
 * kvmstats_file_open() and kvmstats_file_adopt() give the stats fd to the
 * struct kvmstats_file, which closes it in kvmstats_file_free() (unless
 * adopted with KVMSTATS_ADOPT_BORROW).  If adopting fails, the fd was not
 * taken: it is still the caller's to close.  The /dev/kvmstats fd returned
 * by kvmstats_open_device() is the caller's; the library never closes it.
 * A stats fd keeps its VM's memory alive in the kernel until it is closed,
 * so close the files of VMs that have exited.
 *
 * How many fds.  Following a VM takes one stats fd for the VM, one per
 * vCPU, and one pidfd for its struct kvmstats_vmref: 2 + vCPUs.  A host of
 * 300 VMs with 4 vCPUs each needs 1800, above the usual soft limit of
 * 1024.  Long-running users should raise their soft RLIMIT_NOFILE to the
 * hard limit at start (setrlimit(2); the library never changes limits),
 * must not use select(2) on fds above FD_SETSIZE (1024), and should treat
 * -EMFILE from the functions below as "left out", not as a VM's failure.
 */
#ifndef LIBKVMSTATS_H
#define LIBKVMSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header: the kvmstats release (the VERSION file) it
 * comes from.  kvmstats_version() and kvmstats_version_number() give the
 * library's at run time, which may be newer.
 */
#define LIBKVMSTATS_VERSION_MAJOR 0
#define LIBKVMSTATS_VERSION_MINOR 1
#define LIBKVMSTATS_VERSION_PATCH 0
#define LIBKVMSTATS_VERSION_NUMBER           \
	((LIBKVMSTATS_VERSION_MAJOR << 16) | \
	 (LIBKVMSTATS_VERSION_MINOR << 8) | LIBKVMSTATS_VERSION_PATCH)

/*
 * Growing without breaking callers.  libkvmstats.so.1 keeps its ABI: every
 * symbol carries a version (LIBKVMSTATS_1; the vCPU threads and their
 * scheduler figures came in LIBKVMSTATS_1.1, ...), and the public structs
 * below never change size.  Each ends in reserved space; a later release
 * gives new members that space, and code compiled against this header
 * keeps working with it.  Why reserved space rather than opaque handles
 * or a size field: most of them are arrays the caller indexes (the VM and
 * vCPU lists, the samples of a sweep), which only a fixed
 * element size keeps simple and cheap, and kvmstats_stat is read field by
 * field on every sample, where an accessor call per field would cost more
 * than the read.  The rules:
 *   - struct kvmstats_stat is only ever made by the library and handed out
 *     by const pointer; its reserved words are zero;
 *   - struct kvmstats_vm_info and struct kvmstats_vcpu_info arrays, and
 *     struct kvmstats_sched, are filled by the library; reserved words are
 *     zero;
 *   - struct kvmstats_sample is filled by the caller: its reserved words
 *     must be zero (a designated initializer or memset does it), else the
 *     sample fails with -EINVAL, so that a member a later release defines
 *     is never silently ignored by an older library.
 * Everything else (struct kvmstats_file, struct kvmstats_sweep, struct
 * kvmstats_vmref) is opaque and reached through functions.
 */

/* What a statistic counts; the names match QEMU's StatsType. */
enum kvmstats_type {
	KVMSTATS_CUMULATIVE = 0, /* only grows: a counter */
	KVMSTATS_INSTANT = 1,	 /* current value: a gauge */
	KVMSTATS_PEAK = 2, /* highest value seen: a gauge that never falls */
	KVMSTATS_LINEAR_HIST = 3, /* size buckets of bucket_size each */
	KVMSTATS_LOG_HIST = 4,	  /* size buckets of powers of two */
};

/* The unit of a value (or of a histogram's bucket bounds). */
enum kvmstats_unit {
	KVMSTATS_UNIT_NONE = 0,
	KVMSTATS_UNIT_BYTES = 1,
	KVMSTATS_UNIT_SECONDS = 2,
	KVMSTATS_UNIT_CYCLES = 3,
	KVMSTATS_UNIT_BOOLEAN = 4,
};

/* Raw value * base^exponent is the value in the unit. */
enum kvmstats_base {
	KVMSTATS_BASE_POW10 = 0,
	KVMSTATS_BASE_POW2 = 1,
};

/*
 * One statistic, as its descriptor describes it.  Made by the library only
 * (see "Growing" above); 64 bytes on LP64.
 */
struct kvmstats_stat {
	const char *name; /* NUL-terminated, owned by the file */
	enum kvmstats_type type;
	enum kvmstats_unit unit;
	enum kvmstats_base base;
	int exponent;	   /* e.g. -9 with SECONDS/POW10: nanoseconds */
	unsigned int size; /* number of u64 values: 1, or histogram buckets */
	unsigned int bucket_size; /* linear histograms only, else 0 */
	unsigned int offset;  /* byte offset of the values in the data block */
	uint32_t flags;	      /* the raw descriptor flags */
	uint32_t reserved[6]; /* zero */
};

/* One VM, as listed by /dev/kvmstats.  32 bytes. */
struct kvmstats_vm_info {
	int32_t pid;	   /* the VMM process, in the caller's pid namespace */
	int32_t fd;	   /* its VM fd number */
	uint32_t nr_vcpus; /* online vCPUs */
	uint32_t flags;	   /* the device's flags for the entry (0 today) */
	uint32_t reserved[4]; /* zero */
};

/*
 * One vCPU of a VM and the host thread that last ran it, as listed by
 * /dev/kvmstats (KVMSTATS_LIST_VCPUS, API version 3; LIBKVMSTATS_1.1).
 * 32 bytes.
 */
struct kvmstats_vcpu_info {
	uint32_t index;	  /* 0 .. nr_vcpus - 1: the @vcpu of the stats calls */
	uint32_t vcpu_id; /* the id given to KVM_CREATE_VCPU */
	/*
	 * The thread that last entered KVM_RUN on it, as a thread id of the
	 * caller's pid namespace; 0 when there is none to name, and then
	 * flags says why: KVMSTATS_VCPU_NEVER_RUN, _TID_EXITED or
	 * _TID_HIDDEN (the device's, <linux/kvmstats.h>), or
	 * KVMSTATS_VCPU_UNKNOWN (the library's).
	 */
	int32_t tid;
	uint32_t flags;
	uint32_t reserved[4]; /* zero */
};

/*
 * kvmstats_vcpu_info.flags, set by the library (never by the device): the
 * device is older than KVMSTATS_LIST_VCPUS (API version < 3), so neither
 * the thread nor the vcpu_id is known (tid and vcpu_id are 0).
 */
#define KVMSTATS_VCPU_UNKNOWN (1U << 31)

/*
 * kvmstats_vcpu_info.flags, set by the library: listed without the module
 * (kvmstats_native_list_vcpus()); vcpu_id is known, the thread is not.
 */
#define KVMSTATS_VCPU_NATIVE (1U << 30)

/*
 * What the scheduler gave a thread, from /proc (LIBKVMSTATS_1.1): the
 * figures libvirt calls a vCPU's time and delay.  64 bytes.
 */
struct kvmstats_sched {
	uint64_t cpu_ns; /* time it ran on a CPU (schedstat's 1st field) */
	/*
	 * Time it was runnable but waiting on a run queue for a CPU
	 * (schedstat's 2nd field): for a vCPU thread, the steal its guest
	 * sees.
	 */
	uint64_t wait_ns;
	uint64_t timeslices; /* times it was put on a CPU (3rd field) */
	/* The CPU it last ran on (stat's field 39); -1 if not asked for. */
	int32_t last_cpu;
	uint32_t reserved0;   /* zero */
	uint64_t reserved[4]; /* zero */
};

/* kvmstats_thread_sched() flags: also read last_cpu (one more file). */
#define KVMSTATS_SCHED_LAST_CPU 0x1

struct kvmstats_file;
struct kvmstats_sweep;
struct kvmstats_vmref;

/*
 * The library's version at run time: "0.1.0", and the same as
 * (major << 16) | (minor << 8) | patch, comparable with
 * LIBKVMSTATS_VERSION_NUMBER.
 */
const char *kvmstats_version(void);
unsigned int kvmstats_version_number(void);

/* Open /dev/kvmstats (O_RDONLY | O_CLOEXEC): an fd, or -errno. */
int kvmstats_open_device(void);

/*
 * KVMSTATS_GET_API_VERSION on @devfd: the version, or -errno.  Version 2
 * adds pidfd addressing (KVMSTATS_LIST_PIDFD, KVMSTATS_FD_PIDFD), version
 * 3 the vCPUs' threads (KVMSTATS_LIST_VCPUS).
 */
int kvmstats_api_version(int devfd);

/*
 * List the VMs visible to the caller.  On success returns their number and
 * sets *@vms to a malloc()ed array the caller frees with free() (NULL when
 * there are none).  Retries with a bigger array while the host grows under
 * it (E2BIG); gives up with -EAGAIN after a bounded number of tries.
 */
int kvmstats_list_vms(int devfd, struct kvmstats_vm_info **vms);

/*
 * The same for the one process @pidfd refers to (KVMSTATS_LIST_PIDFD, API
 * version 2): its VMs, each at its lowest fd for it.  -ENOTTY from a
 * version 1 device; -ESRCH once the process has exited.
 */
int kvmstats_list_pidfd(int devfd, int pidfd, struct kvmstats_vm_info **vms);

/*
 * A new stats fd (O_RDONLY | O_CLOEXEC) for VM fd @fd of process @pid, or
 * for its vCPU index @vcpu (-1: the VM itself), or -errno: -ESRCH (no such
 * process), -EBADF (no such fd, or not a VM fd when the caller may not
 * ptrace the process), -EINVAL (not a VM fd), -ENOENT (no such vCPU).  The
 * fd is the caller's.
 */
int kvmstats_get_stats_fd(int devfd, pid_t pid, int fd, int vcpu);

/*
 * The same, naming the process by @pidfd, a pidfd of the caller
 * (KVMSTATS_FD_PIDFD, API version 2): the answer is about the process the
 * pidfd refers to even if its pid has been reused.  -EINVAL from a version
 * 1 device (it knows no flags).
 */
int kvmstats_get_stats_fd_pidfd(int devfd, int pidfd, int fd, int vcpu);

/*
 * The vCPUs of VM fd @fd of process @pid and the thread that runs each
 * (KVMSTATS_LIST_VCPUS, API version 3; LIBKVMSTATS_1.1): returns their
 * number and sets *@vcpus to a malloc()ed array in index order, which the
 * caller frees with free() (NULL when there are none); or -errno as
 * kvmstats_get_stats_fd().  A vCPU's tid is the thread that last entered
 * KVM_RUN on it, so it names the thread running the vCPU now or the last
 * one that did; the answer is read without waiting for the VM.
 *
 * On a device older than version 3 (-ENOTTY for the ioctl) the vCPUs come
 * from the VM listing instead, each flagged KVMSTATS_VCPU_UNKNOWN with tid
 * and vcpu_id 0; if the listing does not have the VM at @fd (it lists each
 * VM at its lowest fd), the answer is -ENOTTY.
 */
int kvmstats_list_vcpus(int devfd, pid_t pid, int fd,
			struct kvmstats_vcpu_info **vcpus);

/*
 * The same, naming the process by @pidfd, a pidfd of the caller
 * (KVMSTATS_FD_PIDFD).  On a version 2 device the fallback lists with
 * KVMSTATS_LIST_PIDFD; a version 1 device gives -ENOTTY.
 */
int kvmstats_list_vcpus_pidfd(int devfd, int pidfd, int fd,
			      struct kvmstats_vcpu_info **vcpus);

/*
 * A VM named without races: struct kvmstats_vmref holds a pidfd of the VM's
 * process (pidfd_open(2)), checks with KVMSTATS_LIST_PIDFD that this very
 * process has the VM at @fd, and from then on asks for stats fds through
 * the pidfd, so a pid reused after the VMM exits can never hand out
 * another process's VM.  The pidfd also tells when the VMM has exited
 * (kvmstats_vmref_exited(), or poll(2) its fd: readable once it exited).
 *
 * Fallbacks, each taken once, at open or at the first stats fd: a version
 * 1 device (-ENOTTY from KVMSTATS_LIST_PIDFD, or -EINVAL for the
 * KVMSTATS_FD_PIDFD flag) makes the reference address the VM by pid: the
 * VM is confirmed with KVMSTATS_LIST_VMS instead, and each stats fd is
 * kept only if the pidfd shows the process still alive after the ioctl
 * (then the pid still named it).  A kernel without pidfd_open(2) (ENOSYS),
 * or KVMSTATS_VMREF_PID in @flags, gives pid addressing without a pidfd,
 * where a pid reused between the listing and the open cannot be told
 * apart (the stats file's id string still names the VM's creator).
 *
 * @fd must be the fd the device lists for the VM (its lowest for it):
 * otherwise -EBADF.  Other errors: -ESRCH (no such process, or it has
 * exited), -EMFILE and friends (the pidfd), and those of the ioctls.
 * @devfd stays the caller's and must stay open while @ref is used.
 */
#define KVMSTATS_VMREF_PID 0x1 /* address by pid, hold no pidfd */
/*
 * Without the device (LIBKVMSTATS_1.2): confirm the VM in /proc/@pid/fd and
 * get stats fds through copies of the VMM's fds, as
 * kvmstats_native_get_stats_fd() does, via the pidfd; @devfd is not used
 * (pass -1).  An older library refuses the flag with -EINVAL.
 */
#define KVMSTATS_VMREF_NATIVE 0x2

int kvmstats_vmref_open(int devfd, pid_t pid, int fd, unsigned int flags,
			struct kvmstats_vmref **ref);
void kvmstats_vmref_free(struct kvmstats_vmref *ref);

pid_t kvmstats_vmref_pid(const struct kvmstats_vmref *ref);
int kvmstats_vmref_fd(const struct kvmstats_vmref *ref);

/* The pidfd (owned by @ref), or -1 when it holds none. */
int kvmstats_vmref_pidfd(const struct kvmstats_vmref *ref);

/* 1 if stats fds are asked for through the pidfd, 0 if by pid. */
int kvmstats_vmref_by_pidfd(const struct kvmstats_vmref *ref);

/* 1 if @ref was opened KVMSTATS_VMREF_NATIVE (LIBKVMSTATS_1.2). */
int kvmstats_vmref_native(const struct kvmstats_vmref *ref);

/* The number of vCPUs the device listed when @ref was opened. */
unsigned int kvmstats_vmref_nr_vcpus(const struct kvmstats_vmref *ref);

/*
 * A stats fd for the VM (@vcpu -1) or its vCPU @vcpu, the caller's; or
 * -errno as kvmstats_get_stats_fd(), -ESRCH once the process has exited.
 */
int kvmstats_vmref_get_stats_fd(struct kvmstats_vmref *ref, int vcpu);

/* kvmstats_vmref_get_stats_fd() then kvmstats_file_adopt(@adopt_flags). */
int kvmstats_vmref_file_open(struct kvmstats_vmref *ref, int vcpu,
			     unsigned int adopt_flags,
			     struct kvmstats_file **file);

/*
 * 1 if the VM's process has exited, 0 if it runs, -EOPNOTSUPP when @ref
 * holds no pidfd; never blocks.
 */
int kvmstats_vmref_exited(const struct kvmstats_vmref *ref);

/*
 * The vCPUs of @ref's VM and their threads, as kvmstats_list_vcpus()
 * (LIBKVMSTATS_1.1), through the pidfd when @ref has one.  By pid, the
 * answer is kept only if the pidfd shows the process alive after the
 * ioctl, as for stats fds: -ESRCH once the process has exited.  The tids
 * are those of the caller's pid namespace; kvmstats_thread_sched() of
 * (kvmstats_vmref_pid(), tid) reads what the scheduler gave each.
 */
int kvmstats_vmref_list_vcpus(struct kvmstats_vmref *ref,
			      struct kvmstats_vcpu_info **vcpus);

/*
 * What the scheduler gave thread @tid of process @pid (both ids of the
 * caller's pid namespace, as kvmstats_list_vcpus() gives them), read from
 * /proc/@pid/task/@tid/schedstat and, with KVMSTATS_SCHED_LAST_CPU in
 * @flags, /proc/@pid/task/@tid/stat (LIBKVMSTATS_1.1).  Going through
 * the process's task directory means a tid reused by a thread of another
 * process is never read.  0 and *@sched filled, or -errno, which says why
 * the figures are not known (never zeros made up):
 *   -ESRCH       the thread (or its process) has exited, or @tid is not
 *                a thread of @pid;
 *   -EACCES      /proc hides it from the caller (mounted with hidepid=):
 *                the process exists but /proc will not show it;
 *   -EXDEV       /proc is another pid namespace's (its /proc/self is not
 *                the caller), so its ids are not the caller's;
 *   -ENOENT      there is no /proc;
 *   -EOPNOTSUPP  the kernel keeps no such figures (no schedstat file, or
 *                one of zeros for a thread that has run: scheduler
 *                statistics off);
 *   -EBADMSG     a file did not parse; -EINVAL for bad arguments.
 * Two or three system calls per file; no allocation.
 */
int kvmstats_thread_sched(pid_t pid, pid_t tid, unsigned int flags,
			  struct kvmstats_sched *sched);

/*
 * The same from a directory laid out like /proc/PID, open as @dirfd
 * (its task/@tid/schedstat and task/@tid/stat): for recorded hosts and
 * tests.  -ESRCH when task/@tid is not there, -EACCES when it cannot be
 * read; no pid namespace check (the directory is the caller's word).
 */
int kvmstats_thread_sched_at(int dirfd, pid_t tid, unsigned int flags,
			     struct kvmstats_sched *sched);

/*
 * Without the module (LIBKVMSTATS_1.2).  Where the kernel lets any holder
 * of a VM or vCPU fd ask it for KVM_GET_STATS_FD (not a version: a kernel
 * either has it or refuses with EIO, see kvmstats_native_probe()), a stats
 * file of another process's VM is KVM's own: KVM_GET_STATS_FD on a copy of
 * the VMM's fd taken with pidfd_getfd(2).  The VMs are those in
 * /proc/PID/fd of the processes the caller may inspect, so this needs
 * ptrace rights over each VMM (PTRACE_MODE_ATTACH_REALCREDS: root, or the
 * VMM's own user where Yama allows it, or CAP_SYS_PTRACE), where the
 * module needs only read access to /dev/kvmstats.
 *
 * /proc does not say which VM a vCPU fd is of, nor KVM's index of a vCPU:
 * a process's vCPU fds go to its VM when it has one (as every VMM we know
 * of), else each to the VM with the closest fd below it; vCPU indexes
 * follow the fds' order, the order they were created in.  One VM held by
 * several processes is listed once, by its creator when that is one of
 * them.  Errors: -ESRCH (no such process), -EPERM (the caller may not
 * inspect it), -EBADF (no such fd), -EINVAL (not a VM fd), -ENOENT (no
 * such vCPU), -EIO (the kernel refuses: it predates the change, or the VM
 * is dead).
 */

/*
 * Whether the running kernel gives other processes stats fds: 1 yes, 0 no
 * (it refused with EIO), or -errno when it cannot tell.  Asks the VMs
 * kvmstats_native_list_vms() finds, one a process: 1 at the first that
 * answers, 0 once the VMs of three processes (or of all there are, if
 * fewer) refused with EIO, which a kernel with the change does only for a
 * VM KVM marked dead; with none that answers either way, makes a VM of
 * its own in a child process (a fork(2) and /dev/kvm, which must open:
 * else -ENODEV) and asks for that one's, unless @flags has
 * KVMSTATS_PROBE_ASK_ONLY (then -ENOENT: no VM to ask).  Never looks at
 * the kernel's version.
 */
#define KVMSTATS_PROBE_ASK_ONLY 0x1 /* never make a VM to ask */

int kvmstats_native_probe(unsigned int flags);

/* The VMs, as kvmstats_list_vms() gives them; no device needed. */
int kvmstats_native_list_vms(struct kvmstats_vm_info **vms);

/* A stats fd for VM fd @fd of @pid, or its vCPU index @vcpu (-1: the VM). */
int kvmstats_native_get_stats_fd(pid_t pid, int fd, int vcpu);

/*
 * The vCPUs of VM fd @fd of @pid, as kvmstats_list_vcpus() gives them,
 * flagged KVMSTATS_VCPU_NATIVE: their vcpu_id is known (the vCPU fd's name
 * says it), the thread that runs each is not (tid 0).
 */
int kvmstats_native_list_vcpus(pid_t pid, int fd,
			       struct kvmstats_vcpu_info **vcpus);

/* kvmstats_file_adopt() flags */
#define KVMSTATS_ADOPT_BORROW 0x1 /* do not close the fd in _free() */

/*
 * Read and check the header, id and descriptors of @statsfd (one of ours
 * or a native KVM_GET_STATS_FD fd) and make a file object of it.  Returns
 * 0 and sets *@file, or -errno (then the fd is left open and untouched).
 * Malformed files are rejected with -EBADMSG before anything is read out
 * of bounds.  Allocates; not for the sampling path.
 */
int kvmstats_file_adopt(int statsfd, unsigned int flags,
			struct kvmstats_file **file);

/* kvmstats_get_stats_fd() followed by kvmstats_file_adopt(). */
int kvmstats_file_open(int devfd, pid_t pid, int fd, int vcpu,
		       struct kvmstats_file **file);

/* Close the fd (unless borrowed) and free @file.  NULL is ignored. */
void kvmstats_file_free(struct kvmstats_file *file);

/* The stats fd. */
int kvmstats_file_fd(const struct kvmstats_file *file);

/* The id string: "kvm-<tid>" for a VM, "kvm-<tid>/vcpu-<id>" for a vCPU. */
const char *kvmstats_file_id(const struct kvmstats_file *file);

/* 1 if the id names a vCPU ("/vcpu-" in it), 0 for a VM. */
int kvmstats_file_is_vcpu(const struct kvmstats_file *file);

/*
 * Number of statistics, and statistic @i (NULL if out of range).  Only
 * the statistics the library understands are here; see below for the
 * others.
 */
unsigned int kvmstats_file_num_stats(const struct kvmstats_file *file);
const struct kvmstats_stat *kvmstats_file_stat(const struct kvmstats_file *file,
					       unsigned int i);

/*
 * The statistics left out above: well-formed descriptors whose type, unit
 * or base has a value this library does not know, that set flag bits it
 * does not know, or whose combination it does not understand (an exponent
 * whose sign does not fit the unit, a boolean histogram, a linear
 * histogram without a bucket size, a scalar with several values, ...), as
 * a newer kernel may add.  Their name, raw flags, size and offset are
 * those of the descriptor; type, unit and base are the raw field values.
 * They are not in kvmstats_file_data_size() and cannot be found by name.
 * The rest of the file is served as usual.
 */
unsigned int kvmstats_file_num_skipped(const struct kvmstats_file *file);
const struct kvmstats_stat *
kvmstats_file_skipped(const struct kvmstats_file *file, unsigned int i);

/* Index of the statistic called @name, or -ENOENT. */
int kvmstats_file_find(const struct kvmstats_file *file, const char *name);

/*
 * Size in bytes of the data block: the end of the furthest statistic.
 * Sample buffers must be at least this big.
 */
size_t kvmstats_file_data_size(const struct kvmstats_file *file);

/*
 * Take a sample: one pread(2) of the data block into @buf (@len bytes of
 * room, at least kvmstats_file_data_size()).  0, or -errno; -EIO if the
 * read came back short.  No allocation, no locks, no parsing.
 */
int kvmstats_file_read(const struct kvmstats_file *file, void *buf, size_t len);

/*
 * Value @i (0 for a scalar, the bucket index for a histogram) of @stat in
 * the sample @data.  Bounds are not checked: @i < @stat->size.  A plain
 * function (not inline), so that bindings can call it.
 */
uint64_t kvmstats_value(const struct kvmstats_stat *stat, const void *data,
			unsigned int i);

/*
 * Sweeps: sample many files at once.  For kvmstats fds the data blocks are
 * read with KVMSTATS_READ_BATCH on @devfd, KVMSTATS_BATCH_MAX reads per
 * system call; native KVM fds, or every fd when @devfd is -1 or the module
 * lacks the ioctl (ENOTTY), are read with one pread(2) each.  64 bytes on
 * LP64; see "Growing" for the reserved words.
 */
struct kvmstats_sample {
	const struct kvmstats_file *file; /* in */
	void *buf;	      /* in: at least kvmstats_file_data_size() bytes */
	size_t len;	      /* in: room in buf */
	int result;	      /* out: 0, or -errno as kvmstats_file_read() */
	uint32_t reserved0;   /* in: must be 0 */
	uint64_t reserved[4]; /* in: must be 0 */
};

/*
 * A sweep context: scratch room for up to @max_batch reads per ioctl (0:
 * KVMSTATS_BATCH_MAX).  @devfd stays the caller's.  0 or -errno.
 */
int kvmstats_sweep_new(int devfd, size_t max_batch,
		       struct kvmstats_sweep **sweep);
void kvmstats_sweep_free(struct kvmstats_sweep *sweep);

/*
 * Read every sample in @samples[0..@nr).  Returns the number of samples
 * whose result is not 0 (so 0 when all were read), or -errno if the
 * arguments are bad.  A sample whose buffer is too small or whose reserved
 * words are not zero gets -EINVAL.  No allocation.
 */
int kvmstats_sweep_run(struct kvmstats_sweep *sweep,
		       struct kvmstats_sample *samples, size_t nr);

/* How many reads the last kvmstats_sweep_run() batched (for statistics). */
size_t kvmstats_sweep_batched(const struct kvmstats_sweep *sweep);

/* Names: QEMU's StatsType ("cumulative", ..., "log2-histogram"). */
const char *kvmstats_type_name(enum kvmstats_type type);
/* QEMU's StatsUnit ("bytes", "seconds", "cycles", "boolean"); NULL: none. */
const char *kvmstats_unit_name(enum kvmstats_unit unit);

/* 1 for the two histogram types, else 0. */
int kvmstats_is_hist(const struct kvmstats_stat *stat);

/* base^exponent: what a raw value is multiplied by to get the unit. */
double kvmstats_scale_factor(const struct kvmstats_stat *stat);

/* A raw value in the base unit: 1500 with exponent -9 is 1.5e-6 seconds. */
double kvmstats_scale(const struct kvmstats_stat *stat, double raw);

/*
 * The same, written exactly in decimal where that is possible (POW10, and
 * POW2 with a non-negative exponent): 1500 ns gives "0.0000015".  Other
 * cases fall back to "%.17g".  Returns the length as snprintf() would, or
 * -EINVAL.
 */
int kvmstats_scale_str(const struct kvmstats_stat *stat, uint64_t raw,
		       char *buf, size_t len);

/*
 * Bounds of histogram bucket @i in raw units (apply kvmstats_scale() for
 * the base unit), as the kernel fills them (kvm_stats_*_hist_update()):
 *   linear: bucket i holds [i*bucket_size, (i+1)*bucket_size);
 *   log2:   bucket 0 holds [0, 1), bucket i >= 1 holds [2^(i-1), 2^i)
 *           (the bucket index is fls64(value));
 *   in both, the last bucket has no upper bound: *@hi is INFINITY, and so
 *   is any bound too big for a double (log2 buckets past 1024).
 * Values are integers, so the bucket holds exactly the raw values lo ..
 * hi - 1.  Returns 0, or -EINVAL if @stat is no histogram or @i >= size.
 */
int kvmstats_bucket_bounds(const struct kvmstats_stat *stat, unsigned int i,
			   double *lo, double *hi);

/* A sentence for -errno (or errno) @err.  Never NULL; thread-safe. */
const char *kvmstats_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* LIBKVMSTATS_H */
