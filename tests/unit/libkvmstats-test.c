// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Host unit tests of libkvmstats and of the tool's rendering, on stats
 * files written here: the x86 VM and vCPU layouts of Debian's 6.1 and 6.12
 * kernels (identical; see kernel-internals notes, section 3.2), a linear
 * histogram, and malformed files.  With /dev/kvm, also a native
 * KVM_GET_STATS_FD fd.  Prints unnumbered "ok - " / "not ok - " lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kvm.h>
#include <linux/kvmstats.h>

#include "libkvmstats.h"
#include "identity.h"
#include "render.h"
#include "json_check.h"

static int failures, passes;

static int check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok" : "not ok");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (ok)
		passes++;
	else
		failures++;
	return ok;
}

/* ---------------------------------------------------------- file images */

struct dsc {
	const char *name;
	uint32_t flags;
	int16_t exponent;
	uint16_t size;
	uint32_t offset;
	uint32_t bucket_size;
};

#define C(n, off)                       \
	{                               \
#n, 0x000, 0, 1, off, 0 \
	}

static const struct dsc vm_descs[] = {
	C(remote_tlb_flush, 0),
	C(remote_tlb_flush_requests, 8),
	C(mmu_shadow_zapped, 16),
	C(mmu_pte_write, 24),
	C(mmu_pde_zapped, 32),
	C(mmu_flooded, 40),
	C(mmu_recycled, 48),
	C(mmu_cache_miss, 56),
	{ "mmu_unsync", 0x001, 0, 1, 64, 0 },
	{ "pages_4k", 0x001, 0, 1, 72, 0 },
	{ "pages_2m", 0x001, 0, 1, 80, 0 },
	{ "pages_1g", 0x001, 0, 1, 88, 0 },
	{ "nx_lpage_splits", 0x001, 0, 1, 96, 0 },
	{ "max_mmu_rmap_size", 0x002, 0, 1, 112, 0 },
	{ "max_mmu_page_hash_collisions", 0x002, 0, 1, 104, 0 },
};

static const char *const vcpu_tail[] = {
	"pf_taken",
	"pf_fixed",
	"pf_emulate",
	"pf_spurious",
	"pf_fast",
	"pf_mmio_spte_created",
	"pf_guest",
	"tlb_flush",
	"invlpg",
	"exits",
	"io_exits",
	"mmio_exits",
	"signal_exits",
	"irq_window_exits",
	"nmi_window_exits",
	"l1d_flush",
	"halt_exits",
	"request_irq_exits",
	"irq_exits",
	"host_state_reload",
	"fpu_reload",
	"insn_emulation",
	"insn_emulation_fail",
	"hypercalls",
	"irq_injections",
	"nmi_injections",
	"req_event",
	"nested_run",
	"directed_yield_attempted",
	"directed_yield_successful",
	"preemption_reported",
	"preemption_other",
};

static struct dsc vcpu_descs[45];

static void make_vcpu_descs(void)
{
	static const struct dsc head[] = {
		C(halt_successful_poll, 0),
		C(halt_attempted_poll, 8),
		C(halt_poll_invalid, 16),
		C(halt_wakeup, 24),
		{ "halt_poll_success_ns", 0x020, -9, 1, 32, 0 },
		{ "halt_poll_fail_ns", 0x020, -9, 1, 40, 0 },
		{ "halt_wait_ns", 0x020, -9, 1, 48, 0 },
		{ "halt_poll_success_hist", 0x024, -9, 32, 56, 0 },
		{ "halt_poll_fail_hist", 0x024, -9, 32, 312, 0 },
		{ "halt_wait_hist", 0x024, -9, 32, 568, 0 },
		{ "blocking", 0x041, 0, 1, 824, 0 },
	};
	unsigned int i;

	memcpy(vcpu_descs, head, sizeof(head));
	for (i = 0; i < 32; i++)
		vcpu_descs[11 + i] =
			(struct dsc){ vcpu_tail[i], 0, 0, 1, 832 + 8 * i, 0 };
	vcpu_descs[43] = (struct dsc){ "guest_mode", 0x041, 0, 1, 1088, 0 };
	vcpu_descs[44] =
		(struct dsc){ "notify_window_exits", 0, 0, 1, 1096, 0 };
}

/* A stats file image laid out as KVM does: header, id, descs, data. */
struct image {
	unsigned char *buf;
	size_t size;
	uint32_t data_offset;
};

static struct image build(const char *id, const struct dsc *d, unsigned int n,
			  size_t data_size, const uint64_t *data)
{
	const uint32_t name_size = 48, stride = 16 + name_size;
	struct kvm_stats_header h = {
		.name_size = name_size,
		.num_desc = n,
		.id_offset = 24,
		.desc_offset = 24 + name_size,
		.data_offset = 24 + name_size + stride * n,
	};
	struct image im;
	unsigned int i;

	im.size = h.data_offset + data_size;
	im.buf = calloc(1, im.size);
	im.data_offset = h.data_offset;
	memcpy(im.buf, &h, sizeof(h));
	strncpy((char *)im.buf + 24, id, name_size - 1);
	for (i = 0; i < n; i++) {
		unsigned char *p = im.buf + h.desc_offset + i * stride;
		struct kvm_stats_desc kd = {
			.flags = d[i].flags,
			.exponent = d[i].exponent,
			.size = d[i].size,
			.offset = d[i].offset,
			.bucket_size = d[i].bucket_size,
		};

		memcpy(p, &kd, 16);
		strncpy((char *)p + 16, d[i].name, name_size - 1);
	}
	if (data)
		memcpy(im.buf + h.data_offset, data, data_size);
	return im;
}

/* The image as an fd: a file under @dir when given, else a memfd. */
static int image_fd(const struct image *im, const char *dir, const char *name)
{
	char path[512];
	int fd;

	if (dir) {
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	} else {
		fd = memfd_create(name, MFD_CLOEXEC);
	}
	if (fd < 0 || write(fd, im->buf, im->size) != (ssize_t)im->size) {
		perror(name);
		exit(1);
	}
	return fd;
}

/* ------------------------------------------------------------- helpers */

static unsigned int fls64_(uint64_t v)
{
	return v ? 64 - (unsigned int)__builtin_clzll(v) : 0;
}

static char *render(void (*fn)(FILE *, const struct obj *, size_t,
			       const regex_t *),
		    const struct obj *o, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, o, n, NULL);
	fclose(f);
	return buf;
}

/* Occurrences of @needle in @text. */
static int count_lines(const char *text, const char *needle)
{
	int n = 0;

	for (text = strstr(text, needle); text; text = strstr(text + 1, needle))
		n++;
	return n;
}

/* ------------------------------------------------- synthetic host sets */

static uint64_t synth_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Values of every magnitude: zeros, small counts, ns near and past 1 s. */
static void synth_fill(const struct dsc *d, unsigned int n, uint64_t *data,
		       uint64_t seed)
{
	unsigned int i, b;

	for (i = 0; i < n; i++) {
		for (b = 0; b < d[i].size; b++) {
			uint64_t r = synth_rand(&seed), v;

			switch (r % 8) {
			case 0:
			case 1:
				v = 0;
				break;
			case 2:
				v = r >> 60;
				break;
			case 3:
				v = (r >> 20) % 1000000000ull;
				break;
			case 4:
				v = r >> 1;
				break;
			case 5:
				v = UINT64_MAX - (r >> 62);
				break;
			default:
				v = (r >> 8) % 100000;
				break;
			}
			if ((d[i].flags & 0xf0) == 0x40)
				v &= 1;
			if (d[i].size > 1)
				v %= 1000;
			data[d[i].offset / 8 + b] = v;
		}
	}
}

struct synth {
	size_t n;
	struct obj *objs;
	unsigned char **bufs;
};

/*
 * @vms VMs of @vcpus vCPUs each in the 6.12 layouts, every object its own
 * memfd-backed file, deterministic values.  With @odd, also a VM whose id
 * needs escaping and whose vCPU has an extra linear histogram and lacks a
 * stat (other layouts, family order).  With @dir, the files are
 * @dir/PID-FD/vm and vcpuN (a KVMSTATS_STATS_DIR for the tool), else memfds.
 */
#define SYNTH_UUID "6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10"

static void synth_make(struct synth *sy, unsigned int vms, unsigned int vcpus,
		       bool odd, const char *dir)
{
	size_t room = (size_t)vms * (1 + vcpus) + (odd ? 2 : 0), k = 0;
	unsigned int v, c;

	make_vcpu_descs();
	sy->objs = calloc(room, sizeof(*sy->objs));
	sy->bufs = calloc(room, sizeof(*sy->bufs));
	for (v = 0; v < vms + (odd ? 1 : 0); v++) {
		bool special = v == vms;
		int pid = 1000 + 37 * (int)v, vfd = 10 + (int)(v % 7);

		for (c = 0; c <= (special ? 1 : vcpus); c++) {
			struct dsc dd[46];
			uint64_t data[160] = { 0 };
			const struct dsc *d = c ? vcpu_descs : vm_descs;
			unsigned int nd = c ? 45 : 15;
			size_t dsize = c ? 1104 : 120;
			struct kvmstats_file *f;
			struct image im;
			char id[64];
			int fd;

			if (special && c) {
				memcpy(dd, vcpu_descs, sizeof(vcpu_descs));
				dd[3] = (struct dsc){
					"lin_hist_bytes", 0x113, 10, 4, 1104, 16
				};
				d = dd;
				nd = 45;
				dsize = 1136;
			}
			if (special)
				snprintf(id, sizeof(id),
					 c ? "kvm-\"q\\%d\"/vcpu-0" :
					     "kvm-\"q\\%d\"",
					 pid);
			else if (c)
				snprintf(id, sizeof(id), "kvm-%d/vcpu-%u",
					 pid + 1, c - 1);
			else
				snprintf(id, sizeof(id), "kvm-%d", pid + 1);
			synth_fill(d, nd, data, k * 7919 + 1);
			im = build(id, d, nd, dsize, data);
			if (dir) {
				char sub[512], name[64];

				snprintf(sub, sizeof(sub), "%s/%d-%d", dir, pid,
					 vfd);
				mkdir(sub, 0755);
				snprintf(name, sizeof(name),
					 c ? "vcpu%u" : "vm", c - 1);
				fd = image_fd(&im, sub, name);
			} else {
				fd = image_fd(&im, NULL, "synth");
			}
			free(im.buf);
			if (kvmstats_file_adopt(fd, 0, &f)) {
				fprintf(stderr, "synth: adopt failed\n");
				exit(1);
			}
			sy->bufs[k] = malloc(kvmstats_file_data_size(f));
			kvmstats_file_read(f, sy->bufs[k],
					   kvmstats_file_data_size(f));
			sy->objs[k] =
				(struct obj){ .pid = pid,
					      .fd = vfd,
					      .vcpu = c ? (int)c - 1 : -1,
					      .file = f,
					      .data = sy->bufs[k],
					      .name = v == 0 ? "web1" : NULL,
					      .comm = "qemu-system-x86",
					      .uuid = v == 0 ? SYNTH_UUID :
							       NULL };
			k++;
		}
	}
	sy->n = k;
}

static void synth_free(struct synth *sy)
{
	size_t k;

	for (k = 0; k < sy->n; k++) {
		kvmstats_file_free((struct kvmstats_file *)sy->objs[k].file);
		free(sy->bufs[k]);
	}
	free(sy->objs);
	free(sy->bufs);
}

/*
 * --render-bench VMS VCPUS SCRAPES OUT: render the exposition of a
 * synthetic host SCRAPES times (the last into OUT) with one cache, the way
 * `export --listen` does, for profiling (valgrind --tool=callgrind).
 */
static int render_bench(int argc, char **argv)
{
	struct synth sy;
	long scrapes = atol(argv[4]), i;
	FILE *out = fopen(argv[5], "w");

	(void)argc;
	if (!out)
		return 1;
	synth_make(&sy, (unsigned int)atoi(argv[2]),
		   (unsigned int)atoi(argv[3]), false, NULL);
	struct prom_cache *c = prom_cache_new();

	for (i = 0; i < scrapes; i++) {
		const char *text;
		size_t len;

		if (prom_cache_render(c, sy.objs, sy.n, NULL, &text, &len))
			return 1;
		if (i == scrapes - 1)
			fwrite(text, 1, len, out);
	}
	prom_cache_free(c);
	fclose(out);
	synth_free(&sy);
	return 0;
}

/* --------------------------------------------------------------- tests */

static void test_layouts(const char *dir)
{
	uint64_t vmdata[15], vcpudata[138];
	struct kvmstats_file *vm, *vc;
	const struct kvmstats_stat *s;
	struct image im;
	unsigned char buf[2048];
	unsigned int i;
	int fd, err, idx;
	bool ok;

	for (i = 0; i < 15; i++)
		vmdata[i] = 1000 + i;
	for (i = 0; i < 138; i++)
		vcpudata[i] = 0;
	vcpudata[48 / 8] = 1500;   /* halt_wait_ns */
	vcpudata[568 / 8 + 0] = 2; /* halt_wait_hist[0] */
	vcpudata[568 / 8 + 1] = 3;
	vcpudata[568 / 8 + 11] = 7;	       /* [1024, 2048) ns */
	vcpudata[568 / 8 + 31] = 1;	       /* [2^30, inf) */
	vcpudata[824 / 8] = 1;		       /* blocking */
	vcpudata[(832 + 8 * 10) / 8] = 424242; /* io_exits */

	im = build("kvm-1234", vm_descs, 15, 120, vmdata);
	check(im.data_offset == 1032 && im.size == 1152,
	      "the 6.12 VM image has data_offset 1032 and 1152 bytes");
	fd = image_fd(&im, dir, "vm-6.12.stats");
	free(im.buf);
	err = kvmstats_file_adopt(fd, 0, &vm);
	check(!err, "adopt the 6.12 VM layout (%s)", kvmstats_strerror(err));
	if (err)
		return;
	check(kvmstats_file_num_stats(vm) == 15 &&
		      kvmstats_file_data_size(vm) == 120,
	      "VM: 15 stats, 120-byte data block");
	check(!strcmp(kvmstats_file_id(vm), "kvm-1234") &&
		      !kvmstats_file_is_vcpu(vm),
	      "VM: id kvm-1234, not a vCPU");
	idx = kvmstats_file_find(vm, "max_mmu_rmap_size");
	s = kvmstats_file_stat(vm, idx);
	check(idx == 13 && s->offset == 112 && s->type == KVMSTATS_PEAK,
	      "VM: max_mmu_rmap_size is desc 13, peak, at offset 112 (out of order)");
	err = kvmstats_file_read(vm, buf, sizeof(buf));
	check(!err && kvmstats_value(s, buf, 0) == 1014,
	      "VM: sample read by offset, not by descriptor order");
	check(kvmstats_file_read(vm, buf, 119) == -EINVAL,
	      "VM: a buffer smaller than the data block is -EINVAL");
	check(kvmstats_file_find(vm, "nope") == -ENOENT,
	      "find of an unknown name is -ENOENT");

	make_vcpu_descs();
	im = build("kvm-1235/vcpu-0", vcpu_descs, 45, 1104, vcpudata);
	check(im.data_offset == 2952 && im.size == 4056,
	      "the 6.12 vCPU image has data_offset 2952 and 4056 bytes");
	fd = image_fd(&im, dir, "vcpu-6.12.stats");
	free(im.buf);
	err = kvmstats_file_adopt(fd, 0, &vc);
	check(!err, "adopt the 6.12 vCPU layout (%s)", kvmstats_strerror(err));
	if (err)
		return;
	check(kvmstats_file_num_stats(vc) == 45 &&
		      kvmstats_file_data_size(vc) == 1104 &&
		      kvmstats_file_is_vcpu(vc),
	      "vCPU: 45 stats, 1104-byte data block, a vCPU");
	err = kvmstats_file_read(vc, buf, sizeof(buf));
	check(!err, "vCPU: one pread of the data block");

	s = kvmstats_file_stat(vc, kvmstats_file_find(vc, "halt_wait_hist"));
	check(s && s->type == KVMSTATS_LOG_HIST &&
		      s->unit == KVMSTATS_UNIT_SECONDS && s->exponent == -9 &&
		      s->size == 32 && s->bucket_size == 0 && s->offset == 568,
	      "vCPU: halt_wait_hist is a 32-bucket log2 histogram of ns at 568");
	check(!strcmp(kvmstats_type_name(s->type), "log2-histogram") &&
		      !strcmp(kvmstats_unit_name(s->unit), "seconds") &&
		      !kvmstats_unit_name(KVMSTATS_UNIT_NONE),
	      "type and unit names are QEMU's");
	s = kvmstats_file_stat(vc, kvmstats_file_find(vc, "blocking"));
	check(s && s->unit == KVMSTATS_UNIT_BOOLEAN &&
		      s->type == KVMSTATS_INSTANT,
	      "vCPU: blocking is an instant boolean");

	/* Scaling. */
	s = kvmstats_file_stat(vc, kvmstats_file_find(vc, "halt_wait_ns"));
	{
		char t[64];

		check(fabs(kvmstats_scale(s, 1500) - 1.5e-6) < 1e-18 &&
			      kvmstats_scale_factor(s) == 1e-9,
		      "scale: 1500 ns is 1.5e-6 s");
		kvmstats_scale_str(s, 1500, t, sizeof(t));
		ok = !strcmp(t, "0.0000015");
		kvmstats_scale_str(s, 123456789012ull, t, sizeof(t));
		ok = ok && !strcmp(t, "123.456789012");
		kvmstats_scale_str(s, 1000000000ull, t, sizeof(t));
		ok = ok && !strcmp(t, "1");
		kvmstats_scale_str(s, 0, t, sizeof(t));
		ok = ok && !strcmp(t, "0");
		kvmstats_scale_str(s, 7, t, sizeof(t));
		check(ok && !strcmp(t, "0.000000007"),
		      "scale_str writes ns exactly in seconds");
	}
	{
		struct kvmstats_stat mib = { .name = "x",
					     .unit = KVMSTATS_UNIT_BYTES,
					     .base = KVMSTATS_BASE_POW2,
					     .exponent = 20,
					     .size = 1 };
		char t[64];

		kvmstats_scale_str(&mib, 3, t, sizeof(t));
		check(!strcmp(t, "3145728") &&
			      kvmstats_scale(&mib, 3) == 3145728.0,
		      "scale: 3 MiB (POW2, exponent 20) is 3145728 bytes");
	}

	/* Log2 bounds against the kernel's rule: index = min(fls64(v), size-1). */
	s = kvmstats_file_stat(vc, kvmstats_file_find(vc, "halt_wait_hist"));
	{
		static const uint64_t vals[] = { 0,
						 1,
						 2,
						 3,
						 4,
						 7,
						 8,
						 1023,
						 1024,
						 1025,
						 (1ull << 29) + 5,
						 1ull << 30,
						 1ull << 40,
						 UINT64_MAX };
		double lo, hi;

		ok = true;
		for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			unsigned int b = fls64_(vals[i]);

			if (b > s->size - 1)
				b = s->size - 1;
			kvmstats_bucket_bounds(s, b, &lo, &hi);
			if (!((double)vals[i] >= lo && (double)vals[i] < hi)) {
				printf("# value %llu in bucket %u but bounds [%g, %g)\n",
				       (unsigned long long)vals[i], b, lo, hi);
				ok = false;
			}
		}
		check(ok,
		      "log2 bounds hold every value where kvm_stats_log_hist_update puts it");
		kvmstats_bucket_bounds(s, 0, &lo, &hi);
		ok = lo == 0 && hi == 1;
		kvmstats_bucket_bounds(s, 1, &lo, &hi);
		ok = ok && lo == 1 && hi == 2;
		kvmstats_bucket_bounds(s, 11, &lo, &hi);
		ok = ok && lo == 1024 && hi == 2048;
		kvmstats_bucket_bounds(s, 31, &lo, &hi);
		ok = ok && lo == 1073741824.0 && isinf(hi);
		check(ok,
		      "log2 bounds: [0,1), [1,2), [1024,2048), last [2^30, inf)");
		check(kvmstats_bucket_bounds(s, 32, &lo, &hi) == -EINVAL,
		      "bucket index past the end is -EINVAL");
	}

	/* Rendering: JSON and Prometheus. */
	{
		struct obj objs[2] = {
			{ .pid = 1234,
			  .fd = 10,
			  .vcpu = -1,
			  .file = vm,
			  .name = "web\"1",
			  .comm = "qemu\\x" },
			{ .pid = 1234,
			  .fd = 10,
			  .vcpu = 0,
			  .file = vc,
			  .name = "web\"1",
			  .comm = "qemu\\x" },
		};
		unsigned char vmbuf[256];
		char *j, *p, *q;

		kvmstats_file_read(vm, vmbuf, sizeof(vmbuf));
		objs[0].data = vmbuf;
		objs[1].data = buf;
		j = render(json_results, objs, 2);
		check(json_valid(j), "show --json output is valid JSON");
		check(strstr(j,
			     "\"name\": \"halt_wait_hist\", \"value\": [2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,") !=
			      NULL,
		      "JSON histogram list runs from bucket 0 upward");
		check(strstr(j, "\"name\": \"blocking\", \"value\": true") &&
			      strstr(j,
				     "\"name\": \"guest_mode\", \"value\": false"),
		      "JSON booleans are true/false");
		check(strstr(j, "\"name\": \"io_exits\", \"value\": 424242") &&
			      strstr(j,
				     "\"pid\": 1234, \"fd\": 10, \"vcpu\": 0") &&
			      strstr(j, "\"provider\": \"kvm\""),
		      "JSON scalars raw, with provider, pid, fd and vcpu");
		check(count_lines(
			      j,
			      "\"id\": \"kvm-1234\", \"name\": \"web\\\"1\", \"comm\": \"qemu\\\\x\", \"stats\"") ==
				      1 &&
			      count_lines(
				      j,
				      "\"id\": \"kvm-1235/vcpu-0\", \"name\": \"web\\\"1\", \"comm\": \"qemu\\\\x\", \"stats\"") ==
				      1,
		      "JSON objects carry the guest name and comm, escaped");
		free(j);
		{
			char *sb = NULL;
			size_t sl = 0;
			FILE *f = open_memstream(&sb, &sl);

			json_schemas(f, vm, vc, NULL);
			fclose(f);
			check(json_valid(sb) &&
				      strstr(sb,
					     "{\"name\": \"halt_wait_ns\", \"type\": \"cumulative\", \"unit\": \"seconds\", \"base\": 10, \"exponent\": -9}") &&
				      strstr(sb,
					     "{\"name\": \"exits\", \"type\": \"cumulative\", \"exponent\": 0}"),
			      "schema --json is valid and follows StatsSchemaValue");
			free(sb);
		}

		p = render(prom_render, objs, 2);
		if (dir) {
			char path[512];
			FILE *f;

			snprintf(path, sizeof(path), "%s/synthetic.prom", dir);
			f = fopen(path, "w");
			if (f) {
				fputs(p, f);
				fclose(f);
			}
		}
		check(strstr(p, "# TYPE kvm_vcpu_io_exits_total counter\n") &&
			      strstr(p,
				     "kvm_vcpu_io_exits_total{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\"} 424242\n"),
		      "Prometheus counter with _total and pid/fd/name/vcpu labels (name escaped)");
		check(strstr(p,
			     "# TYPE kvm_vcpu_halt_wait_seconds_total counter\n") &&
			      strstr(p,
				     "kvm_vcpu_halt_wait_seconds_total{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\"} 0.0000015\n"),
		      "Prometheus: _ns counter becomes _seconds_total, exact value");
		check(strstr(p, "# TYPE kvm_vm_max_mmu_rmap_size gauge\n") &&
			      strstr(p,
				     "kvm_vm_max_mmu_rmap_size{pid=\"1234\",fd=\"10\",name=\"web\\\"1\"} 1014\n") &&
			      strstr(p, "# TYPE kvm_vcpu_blocking gauge\n") &&
			      strstr(p,
				     "kvm_vcpu_blocking{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\"} 1\n"),
		      "Prometheus: peak and boolean as gauges, boolean 0/1");
		check(strstr(p,
			     "# TYPE kvm_vm_info gauge\n"
			     "kvm_vm_info{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",comm=\"qemu\\\\x\",id=\"kvm-1234\"} 1\n") &&
			      !strstr(p, "id=\"kvm-1235/vcpu-0\""),
		      "Prometheus: kvm_vm_info has pid, fd, name, comm and id; no series repeats the id");
		q = strstr(
			p,
			"# TYPE kvm_vcpu_halt_wait_hist_seconds histogram\n");
		check(q && strstr(q, "kvm_vcpu_halt_wait_hist_seconds_bucket{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\",le=\"0\"} 2\n") &&
			      strstr(q, "le=\"0.000000001\"} 5\n") &&
			      strstr(q, "le=\"0.000001023\"} 5\n") &&
			      strstr(q, "le=\"0.000002047\"} 12\n") &&
			      strstr(q, "le=\"+Inf\"} 13\n") &&
			      strstr(q,
				     "kvm_vcpu_halt_wait_hist_seconds_count{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\"} 13\n"),
		      "Prometheus histogram: cumulative buckets, le in seconds, +Inf, _count");
		check(q && strstr(q,
				  "kvm_vcpu_halt_wait_hist_seconds_sum{pid=\"1234\",fd=\"10\",name=\"web\\\"1\",vcpu=\"0\"} 0.0000015\n"),
		      "Prometheus: halt_wait_hist has _sum = halt_wait_ns in seconds (KVM adds both together)");
		check(strstr(p,
			     "kvm_vcpu_halt_poll_success_hist_seconds_sum{") &&
			      strstr(p,
				     "kvm_vcpu_halt_poll_fail_hist_seconds_sum{") &&
			      count_lines(p, "_sum{") == 3,
		      "Prometheus: exactly the three halt histograms have a _sum");
		{
			/* Every family has HELP and TYPE, each once. */
			char *line, *save, *copy = strdup(p);
			int help = 0, type = 0;

			for (line = strtok_r(copy, "\n", &save); line;
			     line = strtok_r(NULL, "\n", &save)) {
				help += !strncmp(line, "# HELP ", 7);
				type += !strncmp(line, "# TYPE ", 7);
			}
			check(help == 61 && type == 61,
			      "Prometheus: HELP and TYPE for each of the 60 families and kvm_vm_info (%d, %d)",
			      help, type);
			free(copy);
		}
		free(p);
	}

	/* Sweeps without the device: pread for every file. */
	{
		unsigned char b1[256], b2[2048];
		struct kvmstats_sample smp[2] = {
			{ .file = vm, .buf = b1, .len = sizeof(b1) },
			{ .file = vc, .buf = b2, .len = sizeof(b2) },
		};
		struct kvmstats_sweep *sw;
		int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		err = kvmstats_sweep_new(-1, 0, &sw);
		check(!err && kvmstats_sweep_run(sw, smp, 2) == 0 &&
			      !smp[0].result && !smp[1].result &&
			      !memcmp(b2, buf, 1104) &&
			      kvmstats_sweep_batched(sw) == 0,
		      "sweep without /dev/kvmstats falls back to pread");
		kvmstats_sweep_free(sw);
		err = kvmstats_sweep_new(nullfd, 1, &sw);
		memset(b2, 0, sizeof(b2));
		check(!err && kvmstats_sweep_run(sw, smp, 2) == 0 &&
			      !memcmp(b2, buf, 1104),
		      "sweep falls back to pread when the ioctl is missing (ENOTTY)");
		smp[1].len = 100;
		check(kvmstats_sweep_run(sw, smp, 2) == 1 &&
			      smp[1].result == -EINVAL,
		      "sweep reports a too-small buffer per sample");
		kvmstats_sweep_free(sw);
		close(nullfd);
	}
	kvmstats_file_free(vm);
	kvmstats_file_free(vc);
}

static void test_linear(void)
{
	static const struct dsc d[] = {
		{ "lin", 0x003 | 0x010 | 0x100, 10, 4, 0, 10 },
	};
	uint64_t data[4] = { 1, 2, 3, 4 };
	struct image im = build("kvm-1", d, 1, 32, data);
	struct kvmstats_file *f;
	const struct kvmstats_stat *s;
	double lo, hi;
	bool ok;
	int fd = image_fd(&im, NULL, "lin");

	free(im.buf);
	if (!check(!kvmstats_file_adopt(fd, 0, &f),
		   "adopt a linear histogram of KiB"))
		return;
	s = kvmstats_file_stat(f, 0);
	kvmstats_bucket_bounds(s, 0, &lo, &hi);
	ok = lo == 0 && hi == 10;
	kvmstats_bucket_bounds(s, 2, &lo, &hi);
	ok = ok && lo == 20 && hi == 30;
	kvmstats_bucket_bounds(s, 3, &lo, &hi);
	ok = ok && lo == 30 && isinf(hi);
	check(ok, "linear bounds: [0,10), [20,30), last [30, inf)");
	check(kvmstats_scale(s, 10) == 10240.0,
	      "linear KiB bound 10 is 10240 bytes");
	{
		unsigned char b[32];
		struct obj o = {
			.pid = 1, .fd = 3, .vcpu = -1, .file = f, .data = b
		};
		char *p;

		kvmstats_file_read(f, b, sizeof(b));
		p = render(prom_render, &o, 1);
		check(strstr(p,
			     "kvm_vm_lin_bytes_bucket{pid=\"1\",fd=\"3\",le=\"9216\"} 1\n") &&
			      strstr(p, "le=\"29696\"} 6\n") &&
			      strstr(p, "le=\"+Inf\"} 10\n"),
		      "Prometheus linear histogram: le = (i+1)*bucket_size - 1 raw, in bytes");
		check(!strstr(p, "_sum"),
		      "Prometheus: no _sum where KVM keeps no exact sum");
		free(p);
	}
	kvmstats_file_free(f);
}

/* Each malformed image must be rejected with -EBADMSG. */
static void test_malformed(void)
{
	static const struct dsc good[] = {
		{ "a", 0x000, 0, 1, 0, 0 },
		{ "h", 0x024, -9, 4, 8, 0 },
	};
	uint64_t data[5] = { 0 };
	struct dsc d[2];
	struct image im;
	struct kvm_stats_header *h;
	struct kvmstats_file *f;
	int fd, err;

#define EXPECT_BAD(what, mutate)                                            \
	do {                                                                \
		memcpy(d, good, sizeof(good));                              \
		im = build("kvm-9", d, 2, 40, data);                        \
		h = (struct kvm_stats_header *)im.buf;                      \
		(void)h;                                                    \
		mutate;                                                     \
		fd = image_fd(&im, NULL, "bad");                            \
		free(im.buf);                                               \
		err = kvmstats_file_adopt(fd, 0, &f);                       \
		check(err == -EBADMSG && fcntl(fd, F_GETFD) >= 0,           \
		      "malformed: %s is -EBADMSG, fd left open (%d)", what, \
		      err);                                                 \
		if (!err)                                                   \
			kvmstats_file_free(f);                              \
		else                                                        \
			close(fd);                                          \
	} while (0)

#define DESC(i) ((struct kvm_stats_desc *)(im.buf + h->desc_offset + (i)*64))
	memcpy(d, good, sizeof(good));
	im = build("kvm-9", d, 2, 40, data);
	fd = image_fd(&im, NULL, "good");
	free(im.buf);
	err = kvmstats_file_adopt(fd, 0, &f);
	check(!err, "the well-formed base image is accepted");
	if (!err)
		kvmstats_file_free(f);

	EXPECT_BAD("a truncated header", im.size = 20);
	EXPECT_BAD("name_size 0", h->name_size = 0);
	EXPECT_BAD("id_offset inside the header", h->id_offset = 8);
	EXPECT_BAD("an id without NUL", memset(im.buf + 24, 'x', 48));
	EXPECT_BAD("descriptors overlapping the data",
		   h->data_offset = h->desc_offset + 64);
	EXPECT_BAD("descriptors past the end of the file",
		   h->desc_offset = 100000);
	EXPECT_BAD("a huge num_desc", h->num_desc = 0x7fffffff);
	EXPECT_BAD("a name without NUL", memset(DESC(0)->name, 'y', 48));
	EXPECT_BAD("an empty name", DESC(0)->name[0] = 0);
	EXPECT_BAD("size 0", DESC(0)->size = 0);

	/*
	 * Well formed but not understood (a newer kernel's type, unit, base
	 * or flag, or a combination kvm_binary_stats_test rejects): that
	 * statistic is skipped on its own and the rest of the file served.
	 */
#define EXPECT_SKIP(what, which, mutate)                                    \
	do {                                                                \
		const struct kvmstats_stat *sk, *kept;                      \
		unsigned char smp[64];                                      \
		memcpy(d, good, sizeof(good));                              \
		data[0] = 77;                                               \
		im = build("kvm-9", d, 2, 40, data);                        \
		h = (struct kvm_stats_header *)im.buf;                      \
		mutate;                                                     \
		fd = image_fd(&im, NULL, "skip");                           \
		free(im.buf);                                               \
		err = kvmstats_file_adopt(fd, 0, &f);                       \
		if (!check(!err,                                            \
			   "not understood: %s: the file is adopted (%s)",  \
			   what, kvmstats_strerror(err))) {                 \
			close(fd);                                          \
			break;                                              \
		}                                                           \
		sk = kvmstats_file_skipped(f, 0);                           \
		kept = kvmstats_file_stat(f, 0);                            \
		check(kvmstats_file_num_stats(f) == 1 &&                    \
			      kvmstats_file_num_skipped(f) == 1 && sk &&    \
			      !strcmp(sk->name, good[which].name) &&        \
			      !strcmp(kept->name, good[!(which)].name) &&   \
			      kvmstats_file_find(f, good[which].name) ==    \
				      -ENOENT &&                            \
			      !kvmstats_file_skipped(f, 1),                 \
		      "not understood: %s: only that statistic is skipped", \
		      what);                                                \
		check(!kvmstats_file_read(f, smp, sizeof(smp)) &&           \
			      kvmstats_file_data_size(f) ==                 \
				      ((which) ? 8u : 40u) &&               \
			      ((which) ||                                   \
			       kvmstats_value(kept, smp, 0) == 0) &&        \
			      (!(which) ||                                  \
			       kvmstats_value(kept, smp, 0) == 77),         \
		      "not understood: %s: the rest reads (data size %zu)", \
		      what, kvmstats_file_data_size(f));                    \
		kvmstats_file_free(f);                                      \
	} while (0)

	EXPECT_SKIP("type 5", 0, DESC(0)->flags = 5);
	EXPECT_SKIP("unit 5", 0, DESC(0)->flags = 0x50);
	EXPECT_SKIP("base 2", 0, DESC(0)->flags = 0x200);
	EXPECT_SKIP("an unknown flag bit", 1, DESC(1)->flags |= 0x1000);
	EXPECT_SKIP("seconds with a positive exponent", 1,
		    DESC(1)->exponent = 3);
	EXPECT_SKIP("a count with a negative exponent", 0,
		    DESC(0)->exponent = -1);
	EXPECT_SKIP("a boolean log histogram", 1, DESC(1)->flags = 0x044;
		    DESC(1)->exponent = 0);
	EXPECT_SKIP("a scalar with size 2", 0, DESC(0)->size = 2);
	EXPECT_SKIP("bucket_size on a log histogram", 1,
		    DESC(1)->bucket_size = 4);
	EXPECT_SKIP("a linear histogram without bucket_size", 1,
		    DESC(1)->flags = 0x023);
	{
		/* The raw fields of a skipped descriptor are kept. */
		const struct kvmstats_stat *sk;

		memcpy(d, good, sizeof(good));
		im = build("kvm-9", d, 2, 40, data);
		h = (struct kvm_stats_header *)im.buf;
		DESC(0)->flags = 0x750;
		fd = image_fd(&im, NULL, "skip");
		free(im.buf);
		err = kvmstats_file_adopt(fd, 0, &f);
		sk = err ? NULL : kvmstats_file_skipped(f, 0);
		check(sk && sk->unit == 5 && sk->base == 7 && sk->type == 0 &&
			      sk->flags == 0x750 && sk->size == 1,
		      "a skipped descriptor keeps its raw type, unit, base and flags");
		if (err)
			close(fd);
		else
			kvmstats_file_free(f);
	}
	EXPECT_BAD("a stat past the end of the data", DESC(1)->offset = 4000);
	EXPECT_BAD("a short data block", im.size -= 8);
	EXPECT_BAD("data overlapping the header", h->data_offset = 8);

	check(kvmstats_file_adopt(-1, 0, &f) == -EINVAL,
	      "adopt of fd -1 is -EINVAL");
	check(!strcmp(kvmstats_strerror(-EBADMSG),
		      "malformed KVM stats file") &&
		      strlen(kvmstats_strerror(-ENOENT)) > 0 &&
		      kvmstats_strerror(99999),
	      "kvmstats_strerror explains -errno values");
}

/* identity_parse_cmdline() of @len bytes: name and uuid as expected? */
static bool ident_is(const char *cmdline, size_t len, const char *name,
		     const char *uuid)
{
	struct vm_identity id = { .name = "stale", .uuid = "stale" };

	identity_parse_cmdline(cmdline, len, &id);
	if (!strcmp(id.name, name) && !strcmp(id.uuid, uuid))
		return true;
	printf("# cmdline of %zu bytes: name '%s' uuid '%s', want '%s' '%s'\n",
	       len, id.name, id.uuid, name, uuid);
	return false;
}

#define IDENT_IS(s, name, uuid) ident_is(s, sizeof(s), name, uuid)

static void test_identity(void)
{
	static const char a[] = "qemu-system-x86_64\0-m\0512\0-name\0demo\0";
	static const char b[] = "qemu\0-name\0guest=web,,1,debug-threads=on\0";
	static const char c[] = "qemu\0-name\0db,process=x\0";
	static const char d[] = "qemu\0-m\0-name";
	static const char e[] = "qemu\0-name\0guest=vm1,debug-threads=on\0-S\0"
				"-uuid\0"
				"6B1FD3C2-0D34-4E2A-9C1B-3F0E8A6B2D10\0-smp\0"
				"2\0";
	static const char f[] = "qemu\0--name\0first\0--uuid\0"
				"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10\0"
				"-name\0debug-threads=on,guest=last\0";
	static const char g[] = "qemu\0-uuid\0not-a-uuid\0-uuid\0"
				"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d1\0";
	static const char h[] = "qemu\0-name\0x=1,debug-threads=on\0";
	static const char uuid[] = "6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10";
	struct vm_identity id = { .comm = "qemu", .name = "web1" };
	bool ok;

	ok = IDENT_IS(a, "demo", "");
	ok = IDENT_IS(b, "web,1", "") && ok;
	ok = IDENT_IS(c, "db", "") && ok;
	ok = IDENT_IS(d, "", "") && ok;
	check(ok,
	      "QEMU -name parsing: plain, guest=, ',,' escape, options, missing");
	ok = IDENT_IS(e, "vm1", uuid);
	ok = IDENT_IS(f, "last", uuid) && ok;
	ok = IDENT_IS(g, "", "") && ok;
	ok = IDENT_IS(h, "", "") && ok;
	check(ok,
	      "QEMU -uuid parsing: lower case, --name/--uuid, the last given wins, malformed UUIDs and a first item with a key ignored");
	snprintf(id.uuid, sizeof(id.uuid), "%s", uuid);
	ok = identity_selects(NULL, 5, 3, NULL) &&
	     identity_selects("5", 5, 3, NULL) &&
	     identity_selects("5:3", 5, 3, NULL) &&
	     !identity_selects("5:4", 5, 3, &id) &&
	     !identity_selects("6", 5, 3, &id) &&
	     identity_selects("web1", 5, 3, &id) &&
	     !identity_selects("web", 5, 3, &id) &&
	     identity_selects("6B1FD3C2-0D34-4E2A-9C1B-3F0E8A6B2D10", 5, 3,
			      &id) &&
	     identity_sel_is_pid("5:3") && !identity_sel_is_pid("5:x") &&
	     !identity_sel_is_pid("web1") && !identity_sel_is_pid(NULL);
	check(ok,
	      "selecting a VM: pid, PID:FD, guest name, UUID in any case; numbers are pids");
}

/* A native KVM_GET_STATS_FD fd, when this host has /dev/kvm. */
static void test_native(void)
{
	struct kvmstats_file *f;
	int kvm, vm, sfd, err;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		printf("ok - adopt a native KVM_GET_STATS_FD fd # SKIP no /dev/kvm\n");
		return;
	}
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	sfd = vm < 0 ? -1 : ioctl(vm, KVM_GET_STATS_FD, 0);
	if (sfd < 0) {
		printf("ok - adopt a native KVM_GET_STATS_FD fd # SKIP %s\n",
		       strerror(errno));
		goto out;
	}
	err = kvmstats_file_adopt(sfd, 0, &f);
	if (check(!err, "adopt a native KVM_GET_STATS_FD VM fd (%s)",
		  kvmstats_strerror(err))) {
		unsigned char buf[4096];
		struct kvmstats_sample smp = { .file = f,
					       .buf = buf,
					       .len = sizeof(buf) };
		struct kvmstats_sweep *sw;
		int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		check(!strncmp(kvmstats_file_id(f), "kvm-", 4) &&
			      kvmstats_file_num_stats(f) > 0 &&
			      !kvmstats_file_read(f, buf, sizeof(buf)),
		      "native fd: id kvm-..., descriptors, one data read");
		kvmstats_sweep_new(nullfd, 0, &sw);
		check(kvmstats_sweep_run(sw, &smp, 1) == 0,
		      "native fd sampled by a sweep");
		kvmstats_sweep_free(sw);
		close(nullfd);
		kvmstats_file_free(f);
	} else {
		close(sfd);
	}
out:
	if (vm >= 0)
		close(vm);
	close(kvm);
}

/*
 * --check-histograms PROM STATS: every histogram of the stats file STATS
 * (a raw file saved in the guest) against its family in the exposition
 * PROM, bucket by bucket: cumulative counts, le bounds in seconds (the
 * inclusive integer bound (hi - 1) of each KVM bucket), +Inf and _count.
 * Independent of the renderer: names and bounds are worked out here.
 */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int c;

	if (!f)
		return NULL;
	m = open_memstream(&buf, &len);
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(m);
	fclose(f);
	return buf;
}

static int check_histograms(const char *prom, const char *stats)
{
	char *text = slurp(prom), labels[256], tpath[600], *t, *sl;
	struct kvmstats_file *f;
	unsigned char *data;
	unsigned int i, b, families = 0, sums = 0;
	unsigned long long samples = 0;
	int fd = open(stats, O_RDONLY | O_CLOEXEC), pid = -1, vfd = -1, vc = -1;

	if (!text || fd < 0 || kvmstats_file_adopt(fd, 0, &f)) {
		check(0, "read %s and %s", prom, stats);
		return 1;
	}
	data = malloc(kvmstats_file_data_size(f));
	kvmstats_file_read(f, data, kvmstats_file_data_size(f));
	/*
	 * target.txt next to the stats file names the object: its labels are
	 * {pid, fd, vcpu} (the guest's test VMM has no -name).
	 */
	snprintf(tpath, sizeof(tpath), "%s", stats);
	sl = strrchr(tpath, '/');
	snprintf(sl ? sl + 1 : tpath,
		 sizeof(tpath) - (size_t)(sl ? sl + 1 - tpath : 0),
		 "target.txt");
	t = slurp(tpath);
	if (!t || sscanf(t, "pid=%d fd=%d vcpu=%d", &pid, &vfd, &vc) != 3) {
		check(0, "read pid, fd and vcpu from %s", tpath);
		free(t);
		return 1;
	}
	free(t);
	snprintf(labels, sizeof(labels), "{pid=\"%d\",fd=\"%d\",vcpu=\"%d\"",
		 pid, vfd, vc);
	for (i = 0; i < kvmstats_file_num_stats(f); i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f, i);
		char fam[128], head[160], key[512];
		unsigned long long cum = 0;
		const char *p, *q;
		bool ok = true;
		int sum_idx = -1;

		if (!kvmstats_is_hist(s))
			continue;
		families++;
		snprintf(fam, sizeof(fam), "kvm_%s_%s%s",
			 kvmstats_file_is_vcpu(f) ? "vcpu" : "vm", s->name,
			 s->unit == KVMSTATS_UNIT_SECONDS ? "_seconds" : "");
		snprintf(head, sizeof(head), "# TYPE %s histogram\n", fam);
		p = strstr(text, head);
		if (!p) {
			check(0, "histogram %s is in the exposition", fam);
			continue;
		}
		/* This object's bucket lines, in order. */
		snprintf(key, sizeof(key), "\n%s_bucket%s,le=\"", fam, labels);
		q = p;
		for (b = 0; b < s->size && ok; b++) {
			double want_le = 0, got_le;
			unsigned long long got;
			const char *le;

			cum += kvmstats_value(s, data, b);
			if (b + 1 < s->size) {
				double hi = s->type == KVMSTATS_LOG_HIST ?
						    ldexp(1.0, (int)b) :
						    (double)(b + 1) *
							    s->bucket_size;

				want_le = kvmstats_scale(s, hi - 1);
			}
			q = strstr(q + 1, key);
			if (!q) {
				printf("# %s: no bucket line %u\n", fam, b);
				ok = false;
				break;
			}
			le = q + strlen(key);
			if (b + 1 == s->size) {
				ok = !strncmp(le, "+Inf\"", 5);
			} else {
				got_le = strtod(le, NULL);
				ok = fabs(got_le - want_le) <=
				     1e-12 * (want_le > 1 ? want_le : 1);
			}
			got = strtoull(strchr(le, '}') + 1, NULL, 10);
			if (!ok || got != cum) {
				printf("# %s bucket %u: le %.*s count %llu, want le %.17g count %llu\n",
				       fam, b, (int)strcspn(le, "\""), le, got,
				       want_le, cum);
				ok = false;
			}
		}
		if (ok) {
			snprintf(key, sizeof(key), "\n%s_count%s} %llu\n", fam,
				 labels, cum);
			ok = strstr(p, key) != NULL;
			if (!ok)
				printf("# no line %s", key + 1);
		}
		/* _sum exactly for the three halt histograms, from the counter. */
		if (!strcmp(s->name, "halt_wait_hist"))
			sum_idx = kvmstats_file_find(f, "halt_wait_ns");
		else if (!strcmp(s->name, "halt_poll_success_hist"))
			sum_idx = kvmstats_file_find(f, "halt_poll_success_ns");
		else if (!strcmp(s->name, "halt_poll_fail_hist"))
			sum_idx = kvmstats_file_find(f, "halt_poll_fail_ns");
		snprintf(key, sizeof(key), "\n%s_sum%s} ", fam, labels);
		q = strstr(p, key);
		if (ok && sum_idx >= 0) {
			const struct kvmstats_stat *ss =
				kvmstats_file_stat(f, (unsigned int)sum_idx);
			char want[64];

			kvmstats_scale_str(ss, kvmstats_value(ss, data, 0),
					   want, sizeof(want));
			ok = q &&
			     !strncmp(q + strlen(key), want, strlen(want)) &&
			     q[strlen(key) + strlen(want)] == '\n';
			if (!ok)
				printf("# %s_sum: want %s\n", fam, want);
			sums += ok;
		} else if (ok && q) {
			printf("# %s has a _sum KVM does not keep\n", fam);
			ok = false;
		}
		check(ok,
		      "%s matches the raw data bucket by bucket (%u buckets, %llu samples%s)",
		      fam, s->size, cum, sum_idx >= 0 ? ", exact _sum" : "");
		samples += cum;
	}
	check(families > 0, "the raw file has histograms to check (%u)",
	      families);
	check(sums == 3, "the three halt histograms have their exact _sum (%u)",
	      sums);
	check(samples > 0,
	      "a histogram of the raw file has samples (%llu; the guest captures an irqchip vCPU woken from HLT)",
	      samples);
	kvmstats_file_free(f);
	free(data);
	free(text);
	return failures ? 1 : 0;
}

/*
 * The exposition of a small synthetic host (two 6.12 VMs with two vCPUs,
 * and a VM with an escaped id and another vCPU layout) pinned byte for
 * byte: tests/unit/exposition-6.12.prom, found from this binary's place
 * (build/unit/ -> tests/unit/).  The output goes to DIR for a diff.
 */
static void test_golden(const char *dir)
{
	char exe[512], path[600], *want = NULL, *got;
	struct synth sy;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f;

	if (n > 0) {
		char *p;

		exe[n] = '\0';
		p = strstr(exe, "/build/unit/");
		if (p) {
			*p = '\0';
			snprintf(path, sizeof(path),
				 "%s/tests/unit/exposition-6.12.prom", exe);
			want = slurp(path);
		}
	}
	synth_make(&sy, 2, 2, true, NULL);
	got = render(prom_render, sy.objs, sy.n);
	if (dir) {
		snprintf(path, sizeof(path), "%s/exposition-6.12.prom", dir);
		f = fopen(path, "w");
		if (f) {
			fputs(got, f);
			fclose(f);
		}
	}
	if (!want)
		check(0,
		      "exposition pinned: read tests/unit/exposition-6.12.prom");
	else
		check(!strcmp(got, want),
		      "exposition of the synthetic host equals tests/unit/exposition-6.12.prom byte for byte");
	free(want);
	free(got);
	synth_free(&sy);
}

/* ------------------------------------------------- library ABI, version */

/* The VERSION file, found from this binary's place (build/unit/). */
static char *release_file(void)
{
	char exe[512], path[600];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *p, *v;

	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	p = strstr(exe, "/build/unit/");
	if (!p)
		return NULL;
	*p = '\0';
	snprintf(path, sizeof(path), "%s/VERSION", exe);
	v = slurp(path);
	if (v)
		v[strcspn(v, "\n")] = '\0';
	return v;
}

static void test_abi(void)
{
	uint64_t (*value)(const struct kvmstats_stat *, const void *,
			  unsigned int) = kvmstats_value;
	struct kvmstats_stat st = { .name = "x", .size = 2, .offset = 8 };
	uint64_t data[3] = { 1, 2, 3 };
	char *release = release_file();
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", LIBKVMSTATS_VERSION_MAJOR,
		 LIBKVMSTATS_VERSION_MINOR, LIBKVMSTATS_VERSION_PATCH);
	check(release && !strcmp(kvmstats_version(), release) &&
		      !strcmp(kvmstats_version(), want),
	      "kvmstats_version() is the VERSION file's release (%s, file %s, header %s)",
	      kvmstats_version(), release ? release : "?", want);
	check(kvmstats_version_number() == LIBKVMSTATS_VERSION_NUMBER &&
		      kvmstats_version_number() ==
			      (unsigned int)((LIBKVMSTATS_VERSION_MAJOR << 16) |
					     (LIBKVMSTATS_VERSION_MINOR << 8) |
					     LIBKVMSTATS_VERSION_PATCH),
	      "kvmstats_version_number() is (major << 16) | (minor << 8) | patch (%#x)",
	      kvmstats_version_number());
	free(release);
	check(sizeof(struct kvmstats_stat) == 64 &&
		      sizeof(struct kvmstats_vm_info) == 32 &&
		      sizeof(struct kvmstats_sample) == 64,
	      "public structs keep their sizes: stat 64, vm_info 32, sample 64 (%zu, %zu, %zu)",
	      sizeof(struct kvmstats_stat), sizeof(struct kvmstats_vm_info),
	      sizeof(struct kvmstats_sample));
	check(value(&st, data, 0) == 2 && value(&st, data, 1) == 3,
	      "kvmstats_value is a callable function: value 0 and bucket 1");
}

/* ------------------------------------------------------ a fake device */

/*
 * The unit tests link with -Wl,--wrap=ioctl, so every ioctl of the
 * library on fake_dev lands here: a /dev/kvmstats of API version
 * fake_api (1: no pidfd ioctls) whose VMs are fake_vms, held by real
 * processes (children of this one), with stats files of the 6.12 layouts.
 * GET_STATS_FD resolves a pidfd through /proc/self/fdinfo, as the module
 * does through the pidfd's struct pid.
 */
int __real_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...);

static int fake_dev = -1, fake_api = 2, fake_gets;
static bool fake_no_flag; /* v2 that refuses KVMSTATS_FD_PIDFD anyway */
static unsigned int fake_last_flags;
static struct kvmstats_vm fake_vms[128];
static unsigned int fake_nvms;
/* LIST_VCPUS (API 3): vCPU i of every VM has tid fake_tid[i]. */
static int32_t fake_tid[32];
static uint32_t fake_vflags[32];

/* The pid a pidfd of ours refers to; -1 once exited, -2 if no pidfd. */
static int fdinfo_pid(int pidfd)
{
	char path[64], *t, *p;
	int pid = -2;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	t = slurp(path);
	p = t ? strstr(t, "\nPid:") : NULL;
	if (p)
		pid = atoi(p + 5);
	free(t);
	return pid;
}

static int fake_stats_fd(bool vcpu)
{
	uint64_t data[160] = { 0 };
	struct image im;
	int fd;

	make_vcpu_descs();
	data[(832 + 8 * 10) / 8] = 4242; /* io_exits */
	im = vcpu ? build("kvm-7/vcpu-0", vcpu_descs, 45, 1104, data) :
		    build("kvm-7", vm_descs, 15, 120, data);
	fd = image_fd(&im, NULL, "fake-stats");
	free(im.buf);
	return fd;
}

static int fake_list(uint32_t *nr, struct kvmstats_vm *out, int pid)
{
	uint32_t n = 0, i;

	for (i = 0; i < fake_nvms; i++) {
		if (pid >= 0 && fake_vms[i].pid != pid)
			continue;
		if (n < *nr)
			out[n] = fake_vms[i];
		n++;
	}
	if (n > *nr) {
		*nr = n;
		errno = E2BIG;
		return -1;
	}
	*nr = n;
	return 0;
}

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fake_dev < 0 || fd != fake_dev)
		return __real_ioctl(fd, req, arg);
	switch (req) {
	case KVMSTATS_GET_API_VERSION:
		return fake_api;
	case KVMSTATS_LIST_VMS: {
		struct kvmstats_vm_list *l = arg;

		return fake_list(&l->nr, l->vms, -1);
	}
	case KVMSTATS_LIST_PIDFD: {
		struct kvmstats_pidfd_list *l = arg;
		int pid;

		if (fake_api < 2)
			break;
		pid = fdinfo_pid(l->pidfd);
		if (pid < 0) {
			errno = pid == -1 ? ESRCH : EINVAL;
			return -1;
		}
		return fake_list(&l->nr, l->vms, pid);
	}
	case KVMSTATS_GET_STATS_FD: {
		struct kvmstats_fd_request *r = arg;
		int pid = r->pid;
		unsigned int i;

		fake_gets++;
		fake_last_flags = r->flags;
		if (r->flags &
		    ~(fake_api >= 2 && !fake_no_flag ? KVMSTATS_FD_PIDFD :
						       0u)) {
			errno = EINVAL;
			return -1;
		}
		if (r->flags & KVMSTATS_FD_PIDFD) {
			pid = fdinfo_pid(r->pid);
			if (pid < 0) {
				errno = pid == -1 ? ESRCH : EINVAL;
				return -1;
			}
		}
		for (i = 0; i < fake_nvms; i++)
			if (fake_vms[i].pid == pid && fake_vms[i].fd == r->fd)
				break;
		if (i == fake_nvms) {
			errno = kill(pid, 0) && errno == ESRCH ? ESRCH : EBADF;
			return -1;
		}
		if (r->vcpu >= (int)fake_vms[i].nr_vcpus) {
			errno = ENOENT;
			return -1;
		}
		return fake_stats_fd(r->vcpu >= 0);
	}
	case KVMSTATS_LIST_VCPUS: {
		struct kvmstats_vcpu_list *l = arg;
		int pid = l->pid;
		unsigned int i, c;

		if (fake_api < 3)
			break;
		fake_last_flags = l->flags;
		if (l->flags & KVMSTATS_FD_PIDFD) {
			pid = fdinfo_pid(l->pid);
			if (pid < 0) {
				errno = pid == -1 ? ESRCH : EINVAL;
				return -1;
			}
		}
		for (i = 0; i < fake_nvms; i++)
			if (fake_vms[i].pid == pid && fake_vms[i].fd == l->fd)
				break;
		if (i == fake_nvms) {
			errno = kill(pid, 0) && errno == ESRCH ? ESRCH : EBADF;
			return -1;
		}
		if (l->nr < fake_vms[i].nr_vcpus) {
			l->nr = fake_vms[i].nr_vcpus;
			errno = E2BIG;
			return -1;
		}
		l->nr = fake_vms[i].nr_vcpus;
		for (c = 0; c < l->nr; c++)
			l->vcpus[c] = (struct kvmstats_vcpu){
				c, 3 * c, fake_tid[c % 32], fake_vflags[c % 32]
			};
		return 0;
	}
	}
	errno = ENOTTY;
	return -1;
}

/* A child that just waits to be killed: a VMM for the fake device. */
static pid_t sleeper(void)
{
	pid_t p = fork();

	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

static void reap(pid_t p)
{
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

/* kvmstats_vmref_open() of @pid, @fd: its error; a ref made is freed. */
static int vmref_open_err(pid_t pid, int fd, unsigned int flags)
{
	struct kvmstats_vmref *ref = NULL;
	int err = kvmstats_vmref_open(fake_dev, pid, fd, flags, &ref);

	kvmstats_vmref_free(ref);
	return err;
}

static void test_fake_device(void)
{
	struct kvmstats_vm_info *vms = NULL;
	struct kvmstats_vmref *ref = NULL;
	struct kvmstats_file *f = NULL;
	pid_t a, b;
	unsigned char buf[2048];
	int n, err, i, probe;
	bool ok;

	fake_dev = open("/dev/null", O_RDONLY | O_CLOEXEC);
	probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (probe < 0 && errno == ENOSYS) {
		/* No pidfd_open (valgrind has none): pid addressing, no pidfd. */
		a = sleeper();
		fake_vms[0] = (struct kvmstats_vm){ a, 10, 2, 0 };
		fake_nvms = 1;
		err = kvmstats_vmref_open(fake_dev, a, 10, 0, &ref);
		check(!err && kvmstats_vmref_pidfd(ref) == -1 &&
			      !kvmstats_vmref_by_pidfd(ref) &&
			      kvmstats_vmref_nr_vcpus(ref) == 2 &&
			      kvmstats_vmref_exited(ref) == -EOPNOTSUPP,
		      "vmref without pidfd_open (ENOSYS): pid addressing, no pidfd (%s)",
		      kvmstats_strerror(err));
		err = ref ? kvmstats_vmref_get_stats_fd(ref, 1) : -1;
		check(err >= 0 && fake_last_flags == 0,
		      "vmref without pidfd_open: GET_STATS_FD by pid");
		if (err >= 0)
			close(err);
		kvmstats_vmref_free(ref);
		reap(a);
		printf("ok - the pidfd paths of vmref # SKIP pidfd_open(2) is ENOSYS here\n");
		close(fake_dev);
		fake_dev = -1;
		return;
	}
	if (probe >= 0)
		close(probe);
	a = sleeper();
	b = sleeper();
	/* Many VMs: more than the first try's room (64), E2BIG, retry. */
	for (i = 0; i < 100; i++)
		fake_vms[i] = (struct kvmstats_vm){ 100000 + i, 5, 1, 0 };
	fake_vms[100] = (struct kvmstats_vm){ a, 10, 2, 0 };
	fake_vms[101] = (struct kvmstats_vm){ b, 11, 1, 0 };
	fake_nvms = 102;
	n = kvmstats_list_vms(fake_dev, &vms);
	ok = n == 102 && vms;
	for (i = 0; ok && i < n; i++)
		ok = vms[i].pid == fake_vms[i].pid &&
		     vms[i].fd == fake_vms[i].fd &&
		     vms[i].nr_vcpus == fake_vms[i].nr_vcpus &&
		     !vms[i].reserved[0] && !vms[i].reserved[3];
	check(ok,
	      "list_vms: 102 VMs through E2BIG and a retry, reserved words zero (%d)",
	      n);
	free(vms);

	/* API version 2: race-free, by pidfd. */
	fake_api = 2;
	err = kvmstats_vmref_open(fake_dev, a, 10, 0, &ref);
	check(!err && kvmstats_vmref_by_pidfd(ref) &&
		      kvmstats_vmref_pidfd(ref) >= 0 &&
		      kvmstats_vmref_nr_vcpus(ref) == 2 &&
		      kvmstats_vmref_pid(ref) == a &&
		      kvmstats_vmref_fd(ref) == 10,
	      "vmref (API 2): confirmed with LIST_PIDFD, 2 vCPUs, addressed by pidfd (%s)",
	      kvmstats_strerror(err));
	if (!err) {
		err = kvmstats_vmref_file_open(ref, 1, 0, &f);
		check(!err && fake_last_flags == KVMSTATS_FD_PIDFD &&
			      kvmstats_file_is_vcpu(f) &&
			      !kvmstats_file_read(f, buf, sizeof(buf)) &&
			      kvmstats_value(kvmstats_file_stat(
						     f, kvmstats_file_find(
								f, "io_exits")),
					     buf, 0) == 4242,
		      "vmref (API 2): vCPU 1 opened with KVMSTATS_FD_PIDFD and read (%s)",
		      kvmstats_strerror(err));
		kvmstats_file_free(f);
		check(kvmstats_vmref_get_stats_fd(ref, 2) == -ENOENT,
		      "vmref: a vCPU the VM lacks is -ENOENT");
		check(kvmstats_vmref_exited(ref) == 0,
		      "vmref: the pidfd says the VMM runs");
		reap(a);
		check(kvmstats_vmref_exited(ref) == 1,
		      "vmref: the pidfd says the VMM exited once it is gone");
		check(kvmstats_vmref_get_stats_fd(ref, -1) == -ESRCH,
		      "vmref (API 2): no stats fd once the VMM exited (-ESRCH)");
		kvmstats_vmref_free(ref);
	}
	check(kvmstats_vmref_open(fake_dev, b, 99, 0, &ref) == -EBADF && !ref,
	      "vmref: an fd that is not the process's VM is -EBADF");
	check(kvmstats_vmref_open(fake_dev, a, 10, 0, &ref) == -ESRCH,
	      "vmref: an exited process is -ESRCH");

	/* A version 2 device that refuses the flag: falls back to pid. */
	fake_no_flag = true;
	err = kvmstats_vmref_open(fake_dev, b, 11, 0, &ref);
	if (!err) {
		int sfd = kvmstats_vmref_get_stats_fd(ref, 0);

		check(sfd >= 0 && fake_last_flags == 0 &&
			      !kvmstats_vmref_by_pidfd(ref),
		      "vmref: EINVAL for KVMSTATS_FD_PIDFD falls back to the pid, once (%s)",
		      sfd < 0 ? kvmstats_strerror(sfd) : "ok");
		if (sfd >= 0)
			close(sfd);
		kvmstats_vmref_free(ref);
	} else {
		check(0, "vmref: open for the flag fallback (%s)",
		      kvmstats_strerror(err));
	}
	fake_no_flag = false;

	/* API version 1: ENOTTY for LIST_PIDFD, pid addressing. */
	fake_api = 1;
	a = sleeper();
	fake_vms[100].pid = a;
	err = kvmstats_vmref_open(fake_dev, a, 10, 0, &ref);
	check(!err && !kvmstats_vmref_by_pidfd(ref) &&
		      kvmstats_vmref_pidfd(ref) >= 0 &&
		      kvmstats_vmref_nr_vcpus(ref) == 2,
	      "vmref (API 1): LIST_PIDFD is ENOTTY: confirmed with LIST_VMS, addressed by pid, pidfd kept (%s)",
	      kvmstats_strerror(err));
	if (!err) {
		int before = fake_gets,
		    sfd = kvmstats_vmref_get_stats_fd(ref, -1);

		check(sfd >= 0 && fake_last_flags == 0 &&
			      fake_gets == before + 1,
		      "vmref (API 1): GET_STATS_FD by pid, no flag");
		if (sfd >= 0)
			close(sfd);
		reap(a);
		/* The fake still lists the pid: only the pidfd can tell. */
		sfd = kvmstats_vmref_get_stats_fd(ref, -1);
		check(sfd == -ESRCH && fake_gets == before + 2,
		      "vmref (API 1): a stats fd got after the VMM exited is closed, -ESRCH (%d)",
		      sfd);
		kvmstats_vmref_free(ref);
	}
	check(vmref_open_err(99999999, 10, 0) == -ESRCH,
	      "vmref (API 1): a pid the device does not list is -ESRCH");
	err = kvmstats_vmref_open(fake_dev, b, 11, KVMSTATS_VMREF_PID, &ref);
	check(!err && kvmstats_vmref_pidfd(ref) == -1 &&
		      kvmstats_vmref_exited(ref) == -EOPNOTSUPP,
	      "vmref: KVMSTATS_VMREF_PID holds no pidfd; exited() is -EOPNOTSUPP");
	kvmstats_vmref_free(ref);
	check(vmref_open_err(b, 11, 0x80) == -EINVAL,
	      "vmref: unknown flags are -EINVAL");
	fake_api = 2;
	reap(b);
	close(fake_dev);
	fake_dev = -1;
}

/* Do @v[0..@n) look as the fake lists them (tids, flags, ids)? */
static bool vcpus_are(const struct kvmstats_vcpu_info *v, int n, int want)
{
	int i;

	if (n != want || (n && !v))
		return false;
	for (i = 0; i < n; i++)
		if (v[i].index != (uint32_t)i || v[i].vcpu_id != 3u * i ||
		    v[i].tid != fake_tid[i % 32] ||
		    v[i].flags != fake_vflags[i % 32] || v[i].reserved[0] ||
		    v[i].reserved[3])
			return false;
	return true;
}

/* Are @v[0..@n) the fallback's: index only, UNKNOWN, no tid or id? */
static bool vcpus_unknown(const struct kvmstats_vcpu_info *v, int n, int want)
{
	int i;

	if (n != want || (n && !v))
		return false;
	for (i = 0; i < n; i++)
		if (v[i].index != (uint32_t)i || v[i].vcpu_id || v[i].tid ||
		    v[i].flags != KVMSTATS_VCPU_UNKNOWN)
			return false;
	return true;
}

/* LIST_VCPUS through the fake device, and the older devices' fallback. */
static void test_fake_vcpus(void)
{
	struct kvmstats_vcpu_info *v = NULL;
	struct kvmstats_vmref *ref = NULL;
	pid_t a = sleeper();
	int n, pidfd, err, i;

	fake_dev = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (i = 0; i < 32; i++) {
		fake_tid[i] = 5000 + i;
		fake_vflags[i] = 0;
	}
	fake_tid[1] = 0;
	fake_vflags[1] = KVMSTATS_VCPU_NEVER_RUN;
	fake_tid[2] = 0;
	fake_vflags[2] = KVMSTATS_VCPU_TID_HIDDEN;
	fake_vms[0] = (struct kvmstats_vm){ a, 10, 3, 0 };
	fake_vms[1] = (struct kvmstats_vm){ a, 12, 20, 0 };
	fake_nvms = 2;

	fake_api = 3;
	n = kvmstats_list_vcpus(fake_dev, a, 10, &v);
	check(vcpus_are(v, n, 3) && fake_last_flags == 0,
	      "list_vcpus (API 3): index, vcpu_id, tid and the device's flags of each vCPU, reserved words zero (%d)",
	      n);
	free(v);
	n = kvmstats_list_vcpus(fake_dev, a, 12, &v);
	check(vcpus_are(v, n, 20),
	      "list_vcpus: 20 vCPUs, more than the first try's room, through E2BIG (%d)",
	      n);
	free(v);
	check(kvmstats_list_vcpus(fake_dev, a, 11, &v) == -EBADF && !v,
	      "list_vcpus: an fd that is no VM of the process is the device's -EBADF");
	pidfd = (int)syscall(SYS_pidfd_open, a, 0);
	n = kvmstats_list_vcpus_pidfd(fake_dev, pidfd, 10, &v);
	check(vcpus_are(v, n, 3) && fake_last_flags == KVMSTATS_FD_PIDFD,
	      "list_vcpus_pidfd: asked with KVMSTATS_FD_PIDFD (%d)", n);
	free(v);
	check(kvmstats_list_vcpus_pidfd(fake_dev, -1, 10, &v) == -EBADF &&
		      kvmstats_list_vcpus(fake_dev, a, 10, NULL) == -EINVAL,
	      "list_vcpus: no pidfd is -EBADF, no result pointer -EINVAL");
	err = kvmstats_vmref_open(fake_dev, a, 10, 0, &ref);
	n = err ? err : kvmstats_vmref_list_vcpus(ref, &v);
	check(vcpus_are(v, n, 3) && fake_last_flags == KVMSTATS_FD_PIDFD,
	      "vmref_list_vcpus: through the vmref's pidfd (%d)", n);
	free(v);

	/* API 2: no LIST_VCPUS; the vCPUs from the listing, threads unknown. */
	fake_api = 2;
	n = kvmstats_list_vcpus(fake_dev, a, 10, &v);
	check(vcpus_unknown(v, n, 3),
	      "list_vcpus (API 2, ENOTTY): 3 vCPUs from LIST_VMS, each KVMSTATS_VCPU_UNKNOWN with tid and vcpu_id 0 (%d)",
	      n);
	free(v);
	n = kvmstats_list_vcpus_pidfd(fake_dev, pidfd, 12, &v);
	check(vcpus_unknown(v, n, 20),
	      "list_vcpus_pidfd (API 2): 20 vCPUs from LIST_PIDFD, UNKNOWN (%d)",
	      n);
	free(v);
	n = ref ? kvmstats_vmref_list_vcpus(ref, &v) : -1;
	check(vcpus_unknown(v, n, 3),
	      "vmref_list_vcpus (API 2): UNKNOWN threads (%d)", n);
	free(v);
	check(kvmstats_list_vcpus(fake_dev, a, 11, &v) == -ENOTTY && !v,
	      "list_vcpus (API 2): a VM the listing does not have at that fd is -ENOTTY");
	fake_api = 1;
	check(kvmstats_list_vcpus_pidfd(fake_dev, pidfd, 10, &v) == -ENOTTY,
	      "list_vcpus_pidfd (API 1): -ENOTTY");
	n = kvmstats_list_vcpus(fake_dev, a, 10, &v);
	check(vcpus_unknown(v, n, 3),
	      "list_vcpus (API 1): from LIST_VMS, UNKNOWN (%d)", n);
	free(v);

	/* By pid (the vmref fell back): kept only while the pidfd lives. */
	fake_api = 3;
	kvmstats_vmref_free(ref);
	ref = NULL;
	err = kvmstats_vmref_open(fake_dev, a, 10, KVMSTATS_VMREF_PID, &ref);
	n = err ? err : kvmstats_vmref_list_vcpus(ref, &v);
	check(vcpus_are(v, n, 3) && fake_last_flags == 0,
	      "vmref_list_vcpus by pid: LIST_VCPUS by pid (%d)", n);
	free(v);
	kvmstats_vmref_free(ref);
	ref = NULL;
	fake_api = 1;
	err = kvmstats_vmref_open(fake_dev, a, 10, 0, &ref);
	fake_api = 3;
	reap(a);
	/* The fake still lists the pid: only the pidfd can tell. */
	n = err ? err : kvmstats_vmref_list_vcpus(ref, &v);
	check(n == -ESRCH && !v,
	      "vmref_list_vcpus by pid with a pidfd: -ESRCH once the VMM exited (%d)",
	      n);
	kvmstats_vmref_free(ref);
	close(pidfd);
	fake_api = 2;
	fake_nvms = 0;
	close(fake_dev);
	fake_dev = -1;
}

/* Write @text to @dir/@name. */
static void put_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		fprintf(stderr, "cannot write %s\n", path);
	if (fd >= 0)
		close(fd);
}

/* The three numbers of /proc/self/task/@tid/schedstat, read here. */
static bool own_schedstat(pid_t tid, unsigned long long v[3])
{
	char path[64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	f = fopen(path, "re");
	ok = f && fscanf(f, "%llu %llu %llu", &v[0], &v[1], &v[2]) == 3;
	if (f)
		fclose(f);
	return ok;
}

static volatile int spin_stop;

static void *spinner(void *arg)
{
	*(volatile pid_t *)arg = (pid_t)syscall(SYS_gettid);
	while (!spin_stop)
		;
	return NULL;
}

/*
 * In a child: kvmstats_thread_sched() of a thread of the parent after
 * @how: "pidns" (a new pid namespace, with the host's /proc) or "hidepid"
 * (a procfs with hidepid=invisible, as nobody).  Its result, or 1 when
 * the setup itself failed (then @why says why).
 */
static int sched_in_child(const char *how, pid_t pid, pid_t tid, char *why,
			  size_t len)
{
	int pfd[2], st, r = 1;
	pid_t c;

	if (pipe(pfd))
		return 1;
	c = fork();
	if (c == 0) {
		struct kvmstats_sched sc;
		int res = 1;

		close(pfd[0]);
		if (!strcmp(how, "pidns")) {
			if (unshare(CLONE_NEWPID) &&
			    unshare(CLONE_NEWUSER | CLONE_NEWPID)) {
				dprintf(pfd[1], "1 unshare(CLONE_NEWPID): %s",
					strerror(errno));
				_exit(0);
			}
			c = fork();
			if (c == 0) {
				res = kvmstats_thread_sched(pid, tid, 0, &sc);
				dprintf(pfd[1], "%d", res);
				_exit(0);
			}
			waitpid(c, NULL, 0);
			_exit(0);
		}
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV,
			  "hidepid=invisible")) {
			dprintf(pfd[1], "1 a hidepid procfs: %s",
				strerror(errno));
			_exit(0);
		}
		if (setgid(65534) || setuid(65534)) {
			dprintf(pfd[1], "1 setuid(65534): %s", strerror(errno));
			_exit(0);
		}
		res = kvmstats_thread_sched(pid, tid, 0, &sc);
		dprintf(pfd[1], "%d", res);
		_exit(0);
	}
	close(pfd[1]);
	{
		char buf[256] = "";
		ssize_t n = read(pfd[0], buf, sizeof(buf) - 1);

		if (n > 0) {
			buf[n] = '\0';
			r = atoi(buf);
			if (r == 1 && strchr(buf, ' '))
				snprintf(why, len, "%s", strchr(buf, ' ') + 1);
		}
	}
	close(pfd[0]);
	waitpid(c, &st, 0);
	return r;
}

/* kvmstats_thread_sched() on this host's /proc and on crafted directories. */
static void test_thread_sched(const char *dir)
{
	struct kvmstats_sched sc, sc2;
	unsigned long long before[3], after[3];
	pthread_t th;
	volatile pid_t tid = 0;
	char sub[512], why[256] = "";
	pid_t me = getpid(), other;
	int err, dfd;

	/* A thread of ours that runs: its figures, as /proc has them. */
	if (pthread_create(&th, NULL, spinner, (void *)&tid)) {
		check(0, "thread_sched: start a spinning thread");
		return;
	}
	while (!tid)
		usleep(1000);
	usleep(100000);
	own_schedstat(tid, before);
	err = kvmstats_thread_sched(me, tid, KVMSTATS_SCHED_LAST_CPU, &sc);
	own_schedstat(tid, after);
	check(!err && sc.cpu_ns >= before[0] && sc.cpu_ns <= after[0] &&
		      sc.wait_ns >= before[1] && sc.wait_ns <= after[1] &&
		      sc.timeslices >= before[2] && sc.timeslices <= after[2] &&
		      sc.cpu_ns > 0 && sc.last_cpu >= 0 &&
		      sc.last_cpu < sysconf(_SC_NPROCESSORS_CONF) &&
		      !sc.reserved0 && !sc.reserved[3],
	      "thread_sched: a spinning thread's cpu, wait and timeslices between two direct reads of its schedstat, last CPU %d of %ld (%s, %llu ns on CPU)",
	      sc.last_cpu, sysconf(_SC_NPROCESSORS_CONF),
	      kvmstats_strerror(err), (unsigned long long)sc.cpu_ns);
	usleep(100000);
	err = kvmstats_thread_sched(me, tid, 0, &sc2);
	check(!err && sc2.cpu_ns > sc.cpu_ns && sc2.last_cpu == -1,
	      "thread_sched: its CPU time grows while it spins; last_cpu -1 when not asked for");
	spin_stop = 1;
	pthread_join(th, NULL);
	/* The join returns before the kernel has released the thread. */
	snprintf(sub, sizeof(sub), "/proc/self/task/%d", tid);
	for (int i = 0; i < 200 && !access(sub, F_OK); i++)
		usleep(5000);
	check(kvmstats_thread_sched(me, tid, 0, &sc) == -ESRCH,
	      "thread_sched: a thread that has exited is -ESRCH");
	other = sleeper();
	check(kvmstats_thread_sched(me, other, 0, &sc) == -ESRCH,
	      "thread_sched: a tid that is not a thread of the process (another process's) is -ESRCH");
	reap(other);
	check(kvmstats_thread_sched(other, other, 0, &sc) == -ESRCH,
	      "thread_sched: a process that has exited is -ESRCH");
	check(kvmstats_thread_sched(me, me, 0x2, &sc) == -EINVAL &&
		      kvmstats_thread_sched(0, me, 0, &sc) == -EINVAL &&
		      kvmstats_thread_sched(me, me, 0, NULL) == -EINVAL,
	      "thread_sched: unknown flags, pid 0 and no result are -EINVAL");

	/* Another pid namespace, /proc still the host's: -EXDEV. */
	err = sched_in_child("pidns", me, me, why, sizeof(why));
	if (err == 1)
		printf("ok - thread_sched from another pid namespace # SKIP %s\n",
		       why);
	else
		check(err == -EXDEV,
		      "thread_sched from another pid namespace with this /proc: -EXDEV, not another process's figures (%s)",
		      kvmstats_strerror(err));
	/* A procfs mounted hidepid=invisible, read as nobody: -EACCES. */
	err = sched_in_child("hidepid", me, me, why, sizeof(why));
	if (err == 1)
		printf("ok - thread_sched under hidepid # SKIP %s\n", why);
	else
		check(err == -EACCES,
		      "thread_sched of root's thread, as nobody, under hidepid=invisible: -EACCES (%s)",
		      kvmstats_strerror(err));

	/* A directory laid out like /proc/PID. */
	if (!dir)
		return;
	snprintf(sub, sizeof(sub), "%s/proc-like", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/proc-like/task", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/proc-like/task/42", dir);
	mkdir(sub, 0755);
	put_file(sub, "schedstat", "123456789 2000 17\n");
	put_file(
		sub, "stat",
		"42 (CPU 0/KVM) ) x) S 1 42 42 0 -1 4194368 0 0 0 0 10 20 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 -1 3 0 0 0 0 0\n");
	snprintf(sub, sizeof(sub), "%s/proc-like/task/43", dir);
	mkdir(sub, 0755);
	put_file(sub, "schedstat", "0 0 0\n");
	snprintf(sub, sizeof(sub), "%s/proc-like/task/44", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/proc-like/task/45", dir);
	mkdir(sub, 0755);
	put_file(sub, "schedstat", "12 x\n");
	snprintf(sub, sizeof(sub), "%s/proc-like", dir);
	dfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	err = kvmstats_thread_sched_at(dfd, 42, KVMSTATS_SCHED_LAST_CPU, &sc);
	check(!err && sc.cpu_ns == 123456789 && sc.wait_ns == 2000 &&
		      sc.timeslices == 17 && sc.last_cpu == 3,
	      "thread_sched_at: schedstat's three fields, and field 39 of a stat whose command name holds ') ' (%s, cpu %d)",
	      kvmstats_strerror(err), sc.last_cpu);
	check(kvmstats_thread_sched_at(dfd, 41, 0, &sc) == -ESRCH,
	      "thread_sched_at: no task/TID is -ESRCH");
	check(kvmstats_thread_sched_at(dfd, 43, 0, &sc) == -EOPNOTSUPP &&
		      kvmstats_thread_sched_at(dfd, 44, 0, &sc) == -EOPNOTSUPP,
	      "thread_sched_at: a schedstat of zeros, or none, is -EOPNOTSUPP (no scheduler statistics), never zeros");
	check(kvmstats_thread_sched_at(dfd, 45, 0, &sc) == -EBADMSG &&
		      kvmstats_thread_sched_at(dfd, 43, KVMSTATS_SCHED_LAST_CPU,
					       &sc) == -EOPNOTSUPP,
	      "thread_sched_at: a schedstat that does not parse is -EBADMSG");
	close(dfd);
}

/* A sample whose reserved words are not zero is refused. */
static void test_sample_reserved(void)
{
	static const struct dsc d[] = { { "a", 0, 0, 1, 0, 0 } };
	uint64_t data[1] = { 5 }, out[1];
	struct image im = build("kvm-1", d, 1, 8, data);
	struct kvmstats_sample smp = { 0 };
	struct kvmstats_sweep *sw;
	struct kvmstats_file *f;
	int fd = image_fd(&im, NULL, "res");

	free(im.buf);
	if (kvmstats_file_adopt(fd, 0, &f) || kvmstats_sweep_new(-1, 0, &sw)) {
		check(0, "sample reserved words: set up");
		return;
	}
	smp.file = f;
	smp.buf = out;
	smp.len = sizeof(out);
	check(kvmstats_sweep_run(sw, &smp, 1) == 0 && !smp.result &&
		      out[0] == 5,
	      "a zeroed sample is read");
	smp.reserved[2] = 1;
	check(kvmstats_sweep_run(sw, &smp, 1) == 1 && smp.result == -EINVAL,
	      "a sample with a reserved word set is -EINVAL");
	kvmstats_sweep_free(sw);
	kvmstats_file_free(f);
}

/* ------------------------------------------- rendering: crafted files */

/*
 * A VM file that breaks naive rendering: two names that sanitise to one
 * metric (foo-bar, foo_bar), two that meet after the unit (x_ns and
 * x_seconds, both seconds), a gauge that takes a histogram's _count name,
 * a log2 histogram of 2000 buckets, and an id that is not UTF-8.
 */
static const struct dsc crafted_descs[] = {
	{ "foo-bar", 0x000, 0, 1, 0, 0 },
	{ "foo_bar", 0x000, 0, 1, 8, 0 },
	{ "x_ns", 0x020, -9, 1, 16, 0 },
	{ "x_seconds", 0x020, 0, 1, 24, 0 },
	{ "hh_seconds_count", 0x001, 0, 1, 32, 0 },
	{ "hh", 0x024, -9, 4, 40, 0 },
	{ "big", 0x024, -9, 2000, 72, 0 },
	{ "odd_unit", 0x050, 0, 1, 16072, 0 },
	{ "wait_ms", 0x000, 0, 1, 16080, 0 },
	{ "y_gauge", 0x001, 0, 1, 16088, 0 },
	{ "MixedCase", 0x000, 0, 1, 16096, 0 },
};
#define CRAFTED_DATA (16096 + 8)

static struct image crafted_image(void)
{
	static uint64_t data[CRAFTED_DATA / 8];
	unsigned int i;

	for (i = 0; i < 2000; i++)
		data[72 / 8 + i] = 1;
	data[40 / 8 + 3] = 5;
	return build("kvm-\xff\xfe/odd", crafted_descs, 11, CRAFTED_DATA, data);
}

/* Parse le="X" of each bucket line of @fam for one object. */
static bool les_increasing(const char *text, const char *fam, int *lines,
			   int *infs, unsigned long long *last)
{
	char key[128];
	const char *p;
	double prev = -INFINITY;
	bool ok = true;

	snprintf(key, sizeof(key), "\n%s_bucket{", fam);
	*lines = *infs = 0;
	for (p = strstr(text, key); p; p = strstr(p + 1, key)) {
		const char *le = strstr(p, "le=\"");
		double v;

		if (!le)
			return false;
		le += 4;
		v = !strncmp(le, "+Inf", 4) ? INFINITY : strtod(le, NULL);
		*infs += isinf(v);
		if (!(v > prev))
			ok = false;
		prev = v;
		(*lines)++;
		*last = strtoull(strchr(le, '}') + 1, NULL, 10);
	}
	return ok;
}

static void test_crafted(const char *dir)
{
	struct image im = crafted_image();
	struct kvmstats_file *f;
	unsigned char *data = malloc(CRAFTED_DATA);
	struct prom_skipped sk;
	struct prom_cache *c = prom_cache_new();
	const char *text;
	unsigned long long last = 0;
	int fd = image_fd(&im, NULL, "crafted"), lines = 0, infs = 0;
	size_t len;
	char *copy;
	bool ok;

	free(im.buf);
	if (kvmstats_file_adopt(fd, 0, &f)) {
		check(0, "adopt the crafted file");
		return;
	}
	kvmstats_file_read(f, data, CRAFTED_DATA);
	{
		struct obj o = { .pid = 7,
				 .fd = 3,
				 .vcpu = -1,
				 .file = f,
				 .data = data,
				 .name = "bad\xc3(name\xed\xa0\x80\n",
				 .comm = "c\xf8omm" };

		if (prom_cache_render(c, &o, 1, NULL, &text, &len)) {
			check(0, "render the crafted file");
			return;
		}
	}
	copy = strndup(text, len);
	if (dir) {
		char path[512];
		FILE *out;

		snprintf(path, sizeof(path), "%s/crafted.prom", dir);
		out = fopen(path, "w");
		if (out) {
			fputs(copy, out);
			fclose(out);
		}
	}
	prom_cache_skipped(c, &sk);
	check(count_lines(copy, "# HELP kvm_vm_foo_bar_total ") == 1 &&
		      count_lines(copy, "# HELP kvm_vm_x_seconds_total ") ==
			      1 &&
		      strstr(copy, "statistic foo-bar (") &&
		      strstr(copy, "statistic x_ns ("),
	      "names that sanitise to one metric: the first keeps it, one HELP each");
	check(!strstr(copy, "kvm_vm_hh_seconds_count gauge") &&
		      count_lines(copy, "\nkvm_vm_hh_seconds_count{") == 1 &&
		      strstr(copy, "# TYPE kvm_vm_hh_seconds histogram") &&
		      !strstr(copy, "wait_ms") && !strstr(copy, "y_gauge"),
	      "names promtool rejects (a gauge ending _count, _ms, _gauge) are left out");
	check(strstr(copy, "# TYPE kvm_vm_mixedcase_total counter\n") != NULL,
	      "a camelCase name is written in lower case");
	check(sk.collision == 2 && sk.bad_name == 3 && sk.unknown == 1 &&
		      sk.conflict == 0,
	      "skipped: 2 name collisions, 3 bad names, 1 not understood (%u, %u, %u, %u)",
	      sk.collision, sk.bad_name, sk.unknown, sk.conflict);
	ok = les_increasing(copy, "kvm_vm_big_seconds", &lines, &infs, &last);
	/* Buckets 0 .. 1023 have a finite bound (2^1023 ns); +Inf the rest. */
	check(ok && infs == 1 && last == 2000 && lines == 1025,
	      "a 2000-bucket log2 histogram: 1025 lines, le strictly increasing, one +Inf holding all 2000 (%d lines, %d +Inf, %llu)",
	      lines, infs, last);
	check(strstr(copy,
		     "kvm_vm_big_seconds_count{pid=\"7\",fd=\"3\",name=\"bad\xef\xbf\xbd(name\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\\n\"} 2000\n") !=
		      NULL,
	      "a name that is not UTF-8 becomes U+FFFD, newline escaped");
	check(strstr(copy,
		     "comm=\"c\xef\xbf\xbdomm\",id=\"kvm-\xef\xbf\xbd\xef\xbf\xbd/odd\"} 1\n") !=
		      NULL,
	      "kvm_vm_info: comm and id that are not UTF-8 become U+FFFD");
	free(copy);
	prom_cache_free(c);
	kvmstats_file_free(f);
	free(data);
}

/* Per VM (OBJ_VCPUS): the summed block renders booleans as counts. */
static void test_vcpu_sum_render(void)
{
	static const struct dsc d[] = {
		{ "blocking", 0x041, 0, 1, 0, 0 },
		{ "exits", 0x000, 0, 1, 8, 0 },
		{ "most", 0x002, 0, 1, 16, 0 },
	};
	uint64_t data[3] = { 3, 12, 9 };
	struct image im = build("kvm-1/vcpu-0", d, 3, 24, data);
	struct kvmstats_file *f;
	int fd = image_fd(&im, NULL, "sum");
	char *p;

	free(im.buf);
	if (kvmstats_file_adopt(fd, 0, &f)) {
		check(0, "adopt the vCPU file for sums");
		return;
	}
	{
		struct obj o = { .pid = 1,
				 .fd = 3,
				 .vcpu = OBJ_VCPUS,
				 .file = f,
				 .data = data };

		p = render(prom_render, &o, 1);
	}
	check(strstr(p, "kvm_vcpu_blocking{pid=\"1\",fd=\"3\"} 3\n") &&
		      strstr(p,
			     "kvm_vcpu_exits_total{pid=\"1\",fd=\"3\"} 12\n") &&
		      strstr(p,
			     "statistic exits (cumulative, summed over the VM's vCPUs)") &&
		      strstr(p,
			     "statistic most (peak, the highest of the VM's vCPUs)") &&
		      !strstr(p, "vcpu=\""),
	      "per VM: no vcpu label, booleans count the vCPUs, HELP says summed or highest");
	free(p);
	kvmstats_file_free(f);
}

/*
 * --write-crafted DIR: a KVMSTATS_STATS_DIR with one VM (7-3) whose VM
 * file is the crafted one above and whose comm and cmdline are not UTF-8,
 * for the host tests' promtool check of the tool's own output.
 */
static int write_crafted(const char *dir)
{
	static const char cmdline[] = "qemu\0-name\0gu\xff\xc3st\0";
	struct image im = crafted_image();
	char sub[512];
	int fd;

	mkdir(dir, 0755);
	snprintf(sub, sizeof(sub), "%s/7-3", dir);
	mkdir(sub, 0755);
	fd = image_fd(&im, sub, "vm");
	close(fd);
	free(im.buf);
	snprintf(sub, sizeof(sub), "%s/7-3/comm", dir);
	fd = open(sub, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "q\xfe\n", 3) != 3)
		return 1;
	close(fd);
	snprintf(sub, sizeof(sub), "%s/7-3/cmdline", dir);
	fd = open(sub, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, cmdline, sizeof(cmdline) - 1) !=
			      (ssize_t)sizeof(cmdline) - 1)
		return 1;
	close(fd);
	return 0;
}

/* text_escape() of @in is @want, and json_string() of it @json. */
static void escape_case(const char *what, const char *in, const char *want,
			const char *json)
{
	char out[256], *j = NULL;
	size_t jl = 0;
	FILE *f = open_memstream(&j, &jl);

	text_escape(out, sizeof(out), in);
	json_string(f, in);
	fclose(f);
	check(!strcmp(out, want) && (!json || !strcmp(j, json)),
	      "escape: %s (text %s, json %s)", what, out, j);
	free(j);
}

static void test_escape(void)
{
	char small[5];

	text_escape_utf8(true);
	escape_case("plain text is left alone", "web1 db-2_x", "web1 db-2_x",
		    "\"web1 db-2_x\"");
	escape_case("ESC of a colour sequence", "a\033[31mRED\033[0m",
		    "a\\x1b[31mRED\\x1b[0m", "\"a\\u001b[31mRED\\u001b[0m\"");
	escape_case("newline, tab, CR, backslash", "a\nb\tc\rd\\e",
		    "a\\nb\\tc\\rd\\\\e", "\"a\\u000ab\\u0009c\\u000dd\\\\e\"");
	escape_case("BEL and DEL", "\a\x7f", "\\x07\\x7f",
		    "\"\\u0007\\u007f\"");
	escape_case("bytes that are not UTF-8", "gu\xff\xc3st\xe2\x82",
		    "gu\\xff\\xc3st\\xe2\\x82",
		    "\"gu\\ufffd\\ufffdst\\ufffd\\ufffd\"");
	escape_case("overlong and surrogate sequences", "\xc0\xaf\xed\xa0\x80",
		    "\\xc0\\xaf\\xed\\xa0\\x80", NULL);
	escape_case("UTF-8 letters pass in a UTF-8 locale",
		    "gr\xc3\xbc\xc3\x9f"
		    "e \xe6\x97\xa5",
		    "gr\xc3\xbc\xc3\x9f"
		    "e \xe6\x97\xa5",
		    "\"gr\xc3\xbc\xc3\x9f"
		    "e \xe6\x97\xa5\"");
	escape_case("a C1 CSI (U+009B) is escaped",
		    "x\xc2\x9b"
		    "2Jy",
		    "x\\u009b2Jy", "\"x\\u009b2Jy\"");
	escape_case("bidi override and isolate, zero width space, BOM",
		    "a\xe2\x80\xae"
		    "b\xe2\x81\xa6"
		    "c\xe2\x80\x8b"
		    "d\xef\xbb\xbf",
		    "a\\u202eb\\u2066c\\u200bd\\ufeff",
		    "\"a\\u202eb\\u2066c\\u200bd\\ufeff\"");
	check(text_escape(small, sizeof(small), "ab\033cd") == 2 &&
		      !strcmp(small, "ab"),
	      "escape: an escape that does not fit is left out whole (%s)",
	      small);
	check(guest_name_is("a\nb", "a\nb") && guest_name_is("a\nb", "a\\nb") &&
		      !guest_name_is("a\nb", "a") && !guest_name_is("", ""),
	      "escape: a guest name is found raw or as shown escaped");
	text_escape_utf8(false);
	escape_case("outside a UTF-8 locale every byte above 0x7f is \\xHH",
		    "gr\xc3\xbc\xc2\x9b", "gr\\xc3\\xbc\\xc2\\x9b",
		    "\"gr\xc3\xbc\\u009b\"");
	text_escape_utf8(true);
}

/*
 * --write-schema DIR: DIR/schema/vm and DIR/schema/vcpu, the 6.12 tables
 * as the module's own (a KVMSTATS_STATS_DIR that describes its statistics
 * without a VM), values all 0.
 */
static int write_schema(const char *dir)
{
	char sub[512];
	struct image im;

	make_vcpu_descs();
	mkdir(dir, 0755);
	snprintf(sub, sizeof(sub), "%s/schema", dir);
	mkdir(sub, 0755);
	im = build("kvm-schema", vm_descs, 15, 120, NULL);
	close(image_fd(&im, sub, "vm"));
	free(im.buf);
	im = build("kvm-schema/vcpu", vcpu_descs, 45, 1104, NULL);
	close(image_fd(&im, sub, "vcpu"));
	free(im.buf);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;

	if (argc == 5 && !strcmp(argv[1], "--write-host")) {
		/* --write-host DIR VMS VCPUS: a synthetic KVMSTATS_STATS_DIR. */
		struct synth sy;

		mkdir(argv[2], 0755);
		synth_make(&sy, (unsigned int)atoi(argv[3]),
			   (unsigned int)atoi(argv[4]), false, argv[2]);
		synth_free(&sy);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--write-schema"))
		return write_schema(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "--write-crafted"))
		return write_crafted(argv[2]);
	if (argc == 6 && !strcmp(argv[1], "--render-bench"))
		return render_bench(argc, argv);
	if (argc == 4 && !strcmp(argv[1], "--check-histograms")) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		return check_histograms(argv[2], argv[3]);
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (dir)
		mkdir(dir, 0755);
	test_layouts(dir);
	test_linear();
	test_malformed();
	test_identity();
	test_escape();
	test_native();
	test_golden(dir);
	test_abi();
	test_fake_device();
	test_fake_vcpus();
	test_thread_sched(dir);
	test_sample_reserved();
	test_crafted(dir);
	test_vcpu_sum_render();
	printf("# libkvmstats unit tests: %d passed, %d failed\n", passes,
	       failures);
	return failures ? 1 : 0;
}
