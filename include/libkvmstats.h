/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libkvmstats - read KVM binary statistics through /dev/kvmstats
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
 *             descriptor or block out of bounds, unknown type or unit,
 *             missing NUL terminator, short file);
 *   -EINVAL   a bad argument (NULL pointer, buffer too small, ...);
 *   -EIO      a data read returned fewer bytes than the data block;
 *   anything else comes from the system call that failed.
 *
 * Thread-safety.  The functions keep no global state.  A struct
 * kvmstats_file is immutable once adopted, so any number of threads may
 * read samples from one file at the same time (each into its own buffer)
 * and query its descriptors.  A struct kvmstats_sweep holds scratch memory:
 * use one per thread.  Freeing an object while another thread uses it is,
 * as usual, the caller's bug.
 *
 * File descriptors.  The library opens every fd it creates O_CLOEXEC.
 * kvmstats_file_open() and kvmstats_file_adopt() give the stats fd to the
 * struct kvmstats_file, which closes it in kvmstats_file_free() (unless
 * adopted with KVMSTATS_ADOPT_BORROW).  If adopting fails, the fd was not
 * taken: it is still the caller's to close.  The /dev/kvmstats fd returned
 * by kvmstats_open_device() is the caller's; the library never closes it.
 * A stats fd keeps its VM's memory alive in the kernel until it is closed,
 * so close the files of VMs that have exited.
 */
#ifndef LIBKVMSTATS_H
#define LIBKVMSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIBKVMSTATS_VERSION_MAJOR 1
#define LIBKVMSTATS_VERSION_MINOR 0

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

/* One statistic, as its descriptor describes it. */
struct kvmstats_stat {
	const char *name; /* NUL-terminated, owned by the file */
	enum kvmstats_type type;
	enum kvmstats_unit unit;
	enum kvmstats_base base;
	int exponent;	   /* e.g. -9 with SECONDS/POW10: nanoseconds */
	unsigned int size; /* number of u64 values: 1, or histogram buckets */
	unsigned int bucket_size; /* linear histograms only, else 0 */
	unsigned int offset; /* byte offset of the values in the data block */
	uint32_t flags;	     /* the raw descriptor flags */
};

/* One VM, as listed by /dev/kvmstats (same layout as struct kvmstats_vm). */
struct kvmstats_vm_info {
	int32_t pid;	   /* the VMM process, in the caller's pid namespace */
	int32_t fd;	   /* its VM fd number */
	uint32_t nr_vcpus; /* online vCPUs */
	uint32_t flags;
};

struct kvmstats_file;
struct kvmstats_sweep;

/* Open /dev/kvmstats (O_RDONLY | O_CLOEXEC): an fd, or -errno. */
int kvmstats_open_device(void);

/* KVMSTATS_GET_API_VERSION on @devfd: the version, or -errno. */
int kvmstats_api_version(int devfd);

/*
 * List the VMs visible to the caller.  On success returns their number and
 * sets *@vms to a malloc()ed array the caller frees with free() (NULL when
 * there are none).  Retries with a bigger array while the host grows under
 * it (E2BIG); gives up with -EAGAIN after a bounded number of tries.
 */
int kvmstats_list_vms(int devfd, struct kvmstats_vm_info **vms);

/*
 * A new stats fd (O_RDONLY | O_CLOEXEC) for VM fd @fd of process @pid, or
 * for its vCPU index @vcpu (-1: the VM itself), or -errno: -ESRCH (no such
 * process), -EBADF (no such fd), -EINVAL (not a VM fd), -ENOENT (no such
 * vCPU).  The fd is the caller's.
 */
int kvmstats_get_stats_fd(int devfd, pid_t pid, int fd, int vcpu);

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

/* Number of statistics, and statistic @i (NULL if out of range). */
unsigned int kvmstats_file_num_stats(const struct kvmstats_file *file);
const struct kvmstats_stat *kvmstats_file_stat(const struct kvmstats_file *file,
					       unsigned int i);

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
 * the sample @data.  Bounds are not checked: @i < @stat->size.
 */
static inline uint64_t kvmstats_value(const struct kvmstats_stat *stat,
				      const void *data, unsigned int i)
{
	uint64_t v;
	const unsigned char *p = (const unsigned char *)data + stat->offset +
				 (size_t)i * sizeof(v);

	__builtin_memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * Sweeps: sample many files at once.  For kvmstats fds the data blocks are
 * read with KVMSTATS_READ_BATCH on @devfd, KVMSTATS_BATCH_MAX reads per
 * system call; native KVM fds, or every fd when @devfd is -1 or the module
 * lacks the ioctl (ENOTTY), are read with one pread(2) each.
 */
struct kvmstats_sample {
	const struct kvmstats_file *file; /* in */
	void *buf;  /* in: at least kvmstats_file_data_size() bytes */
	size_t len; /* in: room in buf */
	int result; /* out: 0, or -errno as kvmstats_file_read() */
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
 * arguments are bad.  No allocation.
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
 *   in both, the last bucket has no upper bound: *@hi is INFINITY.
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
