// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libkvmstats: parse a KVM stats file once, then sample it with one pread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kvmstats.h>

#include "libkvmstats.h"

/*
 * The on-disk layout, written out here rather than taken from <linux/kvm.h>
 * so the library builds against any uapi headers.  This is the ABI.
 */
struct stats_header {
	uint32_t flags;
	uint32_t name_size;
	uint32_t num_desc;
	uint32_t id_offset;
	uint32_t desc_offset;
	uint32_t data_offset;
};

struct stats_desc {
	uint32_t flags;
	int16_t exponent;
	uint16_t size;
	uint32_t offset;
	uint32_t bucket_size;
	/* char name[name_size] follows */
};

#define TYPE_MASK  0xfu
#define UNIT_SHIFT 4
#define UNIT_MASK  (0xfu << UNIT_SHIFT)
#define BASE_SHIFT 8
#define BASE_MASK  (0xfu << BASE_SHIFT)

/* Sanity limits: far above anything KVM produces, far below trouble. */
#define MAX_NAME_SIZE  4096u
#define MAX_DESC_BYTES (16u << 20)
#define MAX_DATA_BYTES (64u << 20)

#define LIST_TRIES 16

struct kvmstats_file {
	int fd;
	bool borrowed;
	bool vcpu;
	int no_batch; /* set once a batch read refused this fd */
	uint32_t data_offset;
	size_t data_size;
	unsigned int nr;
	struct kvmstats_stat *stats;
	char *names; /* nr * name_size bytes */
	char *id;
};

struct kvmstats_sweep {
	int devfd;
	bool no_batch; /* the module has no KVMSTATS_READ_BATCH */
	size_t max;
	size_t batched;
	struct kvmstats_read_op *ops;
	size_t *index; /* ops[k] reads samples[index[k]] */
};

int kvmstats_open_device(void)
{
	int fd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int kvmstats_api_version(int devfd)
{
	int r = ioctl(devfd, KVMSTATS_GET_API_VERSION, 0);

	return r < 0 ? -errno : r;
}

int kvmstats_list_vms(int devfd, struct kvmstats_vm_info **vms)
{
	struct kvmstats_vm_list *list = NULL;
	uint32_t room = 64;
	int tries;

	if (!vms)
		return -EINVAL;
	*vms = NULL;
	_Static_assert(sizeof(struct kvmstats_vm_info) ==
			       sizeof(struct kvmstats_vm),
		       "kvmstats_vm_info mirrors kvmstats_vm");

	for (tries = 0; tries < LIST_TRIES; tries++) {
		struct kvmstats_vm_list *n;
		uint32_t nr;

		n = realloc(list, sizeof(*list) + room * sizeof(list->vms[0]));
		if (!n) {
			free(list);
			return -ENOMEM;
		}
		list = n;
		list->nr = room;
		list->flags = 0;
		if (ioctl(devfd, KVMSTATS_LIST_VMS, list) == 0) {
			nr = list->nr;
			if (nr == 0) {
				free(list);
				return 0;
			}
			/* Hand back a plain array: move the entries down. */
			memmove(list, list->vms, nr * sizeof(list->vms[0]));
			*vms = (struct kvmstats_vm_info *)list;
			return (int)nr;
		}
		if (errno != E2BIG) {
			int err = -errno;

			free(list);
			return err;
		}
		/* Ask for what was needed plus slack for VMs being born. */
		nr = list->nr;
		room = nr + nr / 4 + 8;
	}
	free(list);
	return -EAGAIN;
}

int kvmstats_get_stats_fd(int devfd, pid_t pid, int fd, int vcpu)
{
	struct kvmstats_fd_request req = {
		.pid = pid,
		.fd = fd,
		.vcpu = vcpu,
	};
	int r = ioctl(devfd, KVMSTATS_GET_STATS_FD, &req);

	return r < 0 ? -errno : r;
}

/* pread exactly @len bytes, or fail: -errno, or -EBADMSG if short. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EBADMSG;
		done += (size_t)r;
	}
	return 0;
}

/* Do [a, a+alen) and [b, b+blen) overlap?  (Empty ranges never do.) */
static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	if (!alen || !blen)
		return false;
	return a < b + blen && b < a + alen;
}

static int check_desc(const struct stats_desc *d)
{
	unsigned int type = d->flags & TYPE_MASK;
	unsigned int unit = (d->flags & UNIT_MASK) >> UNIT_SHIFT;
	unsigned int base = (d->flags & BASE_MASK) >> BASE_SHIFT;

	if (type > KVMSTATS_LOG_HIST || unit > KVMSTATS_UNIT_BOOLEAN ||
	    base > KVMSTATS_BASE_POW2)
		return -EBADMSG;
	switch (unit) {
	case KVMSTATS_UNIT_NONE:
	case KVMSTATS_UNIT_BYTES:
	case KVMSTATS_UNIT_CYCLES:
		if (d->exponent < 0)
			return -EBADMSG;
		break;
	case KVMSTATS_UNIT_SECONDS:
		if (d->exponent > 0)
			return -EBADMSG;
		break;
	case KVMSTATS_UNIT_BOOLEAN:
		if (d->exponent != 0 || type == KVMSTATS_LOG_HIST)
			return -EBADMSG;
		break;
	}
	if (d->size == 0)
		return -EBADMSG;
	if ((type == KVMSTATS_LINEAR_HIST) != (d->bucket_size != 0))
		return -EBADMSG;
	/* Scalars are one value each (api.rst); we rely on it. */
	if (type <= KVMSTATS_PEAK && d->size != 1)
		return -EBADMSG;
	return 0;
}

static void file_release(struct kvmstats_file *f)
{
	free(f->stats);
	free(f->names);
	free(f->id);
	free(f);
}

int kvmstats_file_adopt(int statsfd, unsigned int flags,
			struct kvmstats_file **file)
{
	struct stats_header h;
	struct kvmstats_file *f;
	unsigned char *descs = NULL;
	void *probe = NULL;
	uint64_t stride, desc_bytes, data_size = 0;
	unsigned int i;
	int err;

	if (!file || statsfd < 0 || (flags & ~KVMSTATS_ADOPT_BORROW))
		return -EINVAL;
	*file = NULL;

	err = pread_all(statsfd, &h, sizeof(h), 0);
	if (err)
		return err;

	/* The header: what kvm_binary_stats_test checks, and bounds. */
	if (h.name_size == 0 || h.name_size > MAX_NAME_SIZE)
		return -EBADMSG;
	if (h.id_offset < sizeof(h) || h.desc_offset < sizeof(h) ||
	    h.data_offset < sizeof(h))
		return -EBADMSG;
	stride = sizeof(struct stats_desc) + h.name_size;
	desc_bytes = stride * h.num_desc;
	if (desc_bytes > MAX_DESC_BYTES)
		return -EBADMSG;
	if (overlap(h.id_offset, h.name_size, h.desc_offset, desc_bytes))
		return -EBADMSG;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = statsfd;
	f->borrowed = flags & KVMSTATS_ADOPT_BORROW;
	f->data_offset = h.data_offset;
	f->nr = h.num_desc;

	f->id = malloc(h.name_size);
	if (!f->id) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, f->id, h.name_size, h.id_offset);
	if (err)
		goto err_free;
	if (strnlen(f->id, h.name_size) == h.name_size) {
		err = -EBADMSG;
		goto err_free;
	}
	f->vcpu = strstr(f->id, "/vcpu-") != NULL;

	f->stats = calloc(h.num_desc ? h.num_desc : 1, sizeof(*f->stats));
	f->names = calloc(h.num_desc ? h.num_desc : 1, h.name_size);
	descs = malloc(desc_bytes ? desc_bytes : 1);
	if (!f->stats || !f->names || !descs) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, descs, desc_bytes, h.desc_offset);
	if (err)
		goto err_free;

	for (i = 0; i < h.num_desc; i++) {
		const unsigned char *p = descs + i * stride;
		struct kvmstats_stat *s = &f->stats[i];
		char *name = f->names + (size_t)i * h.name_size;
		struct stats_desc d;
		uint64_t end;

		memcpy(&d, p, sizeof(d));
		memcpy(name, p + sizeof(d), h.name_size);
		if (strnlen(name, h.name_size) == h.name_size || !name[0]) {
			err = -EBADMSG;
			goto err_free;
		}
		err = check_desc(&d);
		if (err)
			goto err_free;
		s->name = name;
		s->flags = d.flags;
		s->type = d.flags & TYPE_MASK;
		s->unit = (d.flags & UNIT_MASK) >> UNIT_SHIFT;
		s->base = (d.flags & BASE_MASK) >> BASE_SHIFT;
		s->exponent = d.exponent;
		s->size = d.size;
		s->bucket_size = d.bucket_size;
		s->offset = d.offset;
		end = (uint64_t)d.offset + (uint64_t)d.size * 8;
		if (end > data_size)
			data_size = end;
	}
	if (data_size > MAX_DATA_BYTES ||
	    data_size < (uint64_t)h.num_desc * 8) {
		err = -EBADMSG;
		goto err_free;
	}
	if (overlap(h.data_offset, data_size, h.desc_offset, desc_bytes) ||
	    overlap(h.data_offset, data_size, h.id_offset, h.name_size) ||
	    overlap(h.data_offset, data_size, 0, sizeof(h)) ||
	    overlap(h.desc_offset, desc_bytes, 0, sizeof(h)) ||
	    overlap(h.id_offset, h.name_size, 0, sizeof(h))) {
		err = -EBADMSG;
		goto err_free;
	}
	f->data_size = data_size;

	/* The data block must be there in full. */
	probe = malloc(data_size ? data_size : 1);
	if (!probe) {
		err = -ENOMEM;
		goto err_free;
	}
	err = pread_all(statsfd, probe, data_size, h.data_offset);
	if (err)
		goto err_free;

	free(probe);
	free(descs);
	*file = f;
	return 0;

err_free:
	free(probe);
	free(descs);
	file_release(f);
	return err;
}

int kvmstats_file_open(int devfd, pid_t pid, int fd, int vcpu,
		       struct kvmstats_file **file)
{
	int sfd = kvmstats_get_stats_fd(devfd, pid, fd, vcpu);
	int err;

	if (sfd < 0)
		return sfd;
	err = kvmstats_file_adopt(sfd, 0, file);
	if (err)
		close(sfd);
	return err;
}

void kvmstats_file_free(struct kvmstats_file *file)
{
	if (!file)
		return;
	if (!file->borrowed)
		close(file->fd);
	file_release(file);
}

int kvmstats_file_fd(const struct kvmstats_file *file)
{
	return file->fd;
}

const char *kvmstats_file_id(const struct kvmstats_file *file)
{
	return file->id;
}

int kvmstats_file_is_vcpu(const struct kvmstats_file *file)
{
	return file->vcpu;
}

unsigned int kvmstats_file_num_stats(const struct kvmstats_file *file)
{
	return file->nr;
}

const struct kvmstats_stat *kvmstats_file_stat(const struct kvmstats_file *file,
					       unsigned int i)
{
	return i < file->nr ? &file->stats[i] : NULL;
}

int kvmstats_file_find(const struct kvmstats_file *file, const char *name)
{
	unsigned int i;

	for (i = 0; i < file->nr; i++)
		if (!strcmp(file->stats[i].name, name))
			return (int)i;
	return -ENOENT;
}

size_t kvmstats_file_data_size(const struct kvmstats_file *file)
{
	return file->data_size;
}

int kvmstats_file_read(const struct kvmstats_file *file, void *buf, size_t len)
{
	ssize_t r;

	if (!buf || len < file->data_size)
		return -EINVAL;
	do {
		r = pread(file->fd, buf, file->data_size, file->data_offset);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return (size_t)r == file->data_size ? 0 : -EIO;
}

int kvmstats_sweep_new(int devfd, size_t max_batch,
		       struct kvmstats_sweep **sweep)
{
	struct kvmstats_sweep *s;

	if (!sweep)
		return -EINVAL;
	if (max_batch == 0 || max_batch > KVMSTATS_BATCH_MAX)
		max_batch = KVMSTATS_BATCH_MAX;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->devfd = devfd;
	s->no_batch = devfd < 0;
	s->max = max_batch;
	s->ops = calloc(max_batch, sizeof(*s->ops));
	s->index = calloc(max_batch, sizeof(*s->index));
	if (!s->ops || !s->index) {
		kvmstats_sweep_free(s);
		return -ENOMEM;
	}
	*sweep = s;
	return 0;
}

void kvmstats_sweep_free(struct kvmstats_sweep *sweep)
{
	if (!sweep)
		return;
	free(sweep->ops);
	free(sweep->index);
	free(sweep);
}

size_t kvmstats_sweep_batched(const struct kvmstats_sweep *sweep)
{
	return sweep->batched;
}

static void sample_pread(struct kvmstats_sample *s)
{
	s->result = kvmstats_file_read(s->file, s->buf, s->len);
}

/* One KVMSTATS_READ_BATCH of @n queued ops; false if the ioctl is missing. */
static bool flush_batch(struct kvmstats_sweep *sw,
			struct kvmstats_sample *samples, size_t n)
{
	struct kvmstats_read_batch b = {
		.nr = (uint32_t)n,
		.ops = (uintptr_t)sw->ops,
	};
	size_t k;

	if (ioctl(sw->devfd, KVMSTATS_READ_BATCH, &b) < 0) {
		/* A module without the ioctl, or a refusal as a whole. */
		if (errno == ENOTTY || errno == EINVAL)
			sw->no_batch = true;
		for (k = 0; k < n; k++)
			sample_pread(&samples[sw->index[k]]);
		return false;
	}
	for (k = 0; k < n; k++) {
		struct kvmstats_sample *s = &samples[sw->index[k]];
		int32_t r = sw->ops[k].result;

		if (r == -EINVAL) {
			/* Not one of ours (a native fd): pread it from now on. */
			__atomic_store_n(
				&((struct kvmstats_file *)s->file)->no_batch, 1,
				__ATOMIC_RELAXED);
			sample_pread(s);
		} else if (r < 0) {
			s->result = r;
		} else {
			s->result = (size_t)r == s->file->data_size ? 0 : -EIO;
			sw->batched++;
		}
	}
	return true;
}

int kvmstats_sweep_run(struct kvmstats_sweep *sweep,
		       struct kvmstats_sample *samples, size_t nr)
{
	size_t i, n = 0, failed = 0;

	if (!sweep || (!samples && nr))
		return -EINVAL;
	sweep->batched = 0;
	for (i = 0; i < nr; i++) {
		struct kvmstats_sample *s = &samples[i];
		const struct kvmstats_file *f = s->file;
		struct kvmstats_read_op *op;

		if (!f || !s->buf || s->len < f->data_size) {
			s->result = -EINVAL;
			continue;
		}
		if (sweep->no_batch ||
		    __atomic_load_n(&f->no_batch, __ATOMIC_RELAXED)) {
			sample_pread(s);
			continue;
		}
		op = &sweep->ops[n];
		memset(op, 0, sizeof(*op));
		op->fd = f->fd;
		op->offset = f->data_offset;
		op->buf = (uintptr_t)s->buf;
		op->len = (uint32_t)f->data_size;
		sweep->index[n++] = i;
		if (n == sweep->max) {
			flush_batch(sweep, samples, n);
			n = 0;
		}
	}
	if (n)
		flush_batch(sweep, samples, n);
	for (i = 0; i < nr; i++)
		if (samples[i].result)
			failed++;
	return (int)failed;
}

const char *kvmstats_type_name(enum kvmstats_type type)
{
	switch (type) {
	case KVMSTATS_CUMULATIVE:
		return "cumulative";
	case KVMSTATS_INSTANT:
		return "instant";
	case KVMSTATS_PEAK:
		return "peak";
	case KVMSTATS_LINEAR_HIST:
		return "linear-histogram";
	case KVMSTATS_LOG_HIST:
		return "log2-histogram";
	}
	return "unknown";
}

const char *kvmstats_unit_name(enum kvmstats_unit unit)
{
	switch (unit) {
	case KVMSTATS_UNIT_NONE:
		return NULL;
	case KVMSTATS_UNIT_BYTES:
		return "bytes";
	case KVMSTATS_UNIT_SECONDS:
		return "seconds";
	case KVMSTATS_UNIT_CYCLES:
		return "cycles";
	case KVMSTATS_UNIT_BOOLEAN:
		return "boolean";
	}
	return NULL;
}

int kvmstats_is_hist(const struct kvmstats_stat *stat)
{
	return stat->type == KVMSTATS_LINEAR_HIST ||
	       stat->type == KVMSTATS_LOG_HIST;
}

double kvmstats_scale_factor(const struct kvmstats_stat *stat)
{
	double b = stat->base == KVMSTATS_BASE_POW2 ? 2.0 : 10.0;

	return pow(b, stat->exponent);
}

double kvmstats_scale(const struct kvmstats_stat *stat, double raw)
{
	/* Divide for negative exponents: 1500 / 1e9 rounds better than * 1e-9. */
	if (stat->exponent < 0) {
		double b = stat->base == KVMSTATS_BASE_POW2 ? 2.0 : 10.0;

		return raw / pow(b, -stat->exponent);
	}
	return raw * kvmstats_scale_factor(stat);
}

int kvmstats_scale_str(const struct kvmstats_stat *stat, uint64_t raw,
		       char *buf, size_t len)
{
	char digits[32], out[96];
	int n, e = stat->exponent;

	if (!buf && len)
		return -EINVAL;
	if (e == 0)
		return snprintf(buf, len, "%llu", (unsigned long long)raw);
	if (stat->base == KVMSTATS_BASE_POW2) {
		if (e > 0 && e < 64 && raw <= (UINT64_MAX >> e))
			return snprintf(buf, len, "%llu",
					(unsigned long long)(raw << e));
		return snprintf(buf, len, "%.17g", kvmstats_scale(stat, raw));
	}
	n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)raw);
	if (e > 0) {
		if (raw == 0)
			return snprintf(buf, len, "0");
		if (e > 40)
			return snprintf(buf, len, "%.17g",
					kvmstats_scale(stat, raw));
		return snprintf(buf, len, "%s%0*d", digits, e, 0);
	}
	/* Negative exponent: move the decimal point -e places left. */
	e = -e;
	if (e > 40)
		return snprintf(buf, len, "%.17g", kvmstats_scale(stat, raw));
	if (n > e) {
		snprintf(out, sizeof(out), "%.*s.%s", n - e, digits,
			 digits + n - e);
	} else {
		snprintf(out, sizeof(out), "0.%0*d%s", e - n, 0, digits);
		if (e == n)
			snprintf(out, sizeof(out), "0.%s", digits);
	}
	/* Trim trailing zeros and a bare point. */
	n = (int)strlen(out);
	while (n > 0 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n > 0 && out[n - 1] == '.')
		out[--n] = '\0';
	return snprintf(buf, len, "%s", out);
}

int kvmstats_bucket_bounds(const struct kvmstats_stat *stat, unsigned int i,
			   double *lo, double *hi)
{
	double l, h;

	if (!kvmstats_is_hist(stat) || i >= stat->size)
		return -EINVAL;
	if (stat->type == KVMSTATS_LINEAR_HIST) {
		l = (double)i * stat->bucket_size;
		h = (double)(i + 1) * stat->bucket_size;
	} else {
		l = i == 0 ? 0.0 : ldexp(1.0, (int)i - 1);
		h = ldexp(1.0, (int)i);
	}
	if (i == stat->size - 1)
		h = INFINITY;
	if (lo)
		*lo = l;
	if (hi)
		*hi = h;
	return 0;
}

const char *kvmstats_strerror(int err)
{
	const char *s;

	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EBADMSG:
		return "malformed KVM stats file";
	case ENOTTY:
		return "request not supported (not /dev/kvmstats, or an older kvmstats module)";
	}
	s = strerrordesc_np(err);
	return s ? s : "unknown error";
}
