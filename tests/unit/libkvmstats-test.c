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
#include "tool.h"
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
	/*
	 * What each object's file was written from, for the checks that
	 * work the exposition out without the library: its descriptors (as
	 * the test wrote them), their number, its data block and its id.
	 */
	struct dsc **descs;
	unsigned int *ndescs;
	uint64_t **raw;
	char **ids;
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
	sy->descs = calloc(room, sizeof(*sy->descs));
	sy->ndescs = calloc(room, sizeof(*sy->ndescs));
	sy->raw = calloc(room, sizeof(*sy->raw));
	sy->ids = calloc(room, sizeof(*sy->ids));
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
			sy->descs[k] = malloc(nd * sizeof(*d));
			memcpy(sy->descs[k], d, nd * sizeof(*d));
			sy->ndescs[k] = nd;
			sy->raw[k] = malloc(dsize);
			memcpy(sy->raw[k], data, dsize);
			sy->ids[k] = strdup(id);
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
		free(sy->descs[k]);
		free(sy->raw[k]);
		free(sy->ids[k]);
	}
	free(sy->objs);
	free(sy->bufs);
	free(sy->descs);
	free(sy->ndescs);
	free(sy->raw);
	free(sy->ids);
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
				     "kvm_vcpu_io_exits_total{name=\"web\\\"1\",vcpu=\"0\"} 424242\n"),
		      "Prometheus counter with _total and name/vcpu labels (name escaped): a named VM needs no pid or fd");
		check(strstr(p,
			     "# TYPE kvm_vcpu_halt_wait_seconds_total counter\n") &&
			      strstr(p,
				     "kvm_vcpu_halt_wait_seconds_total{name=\"web\\\"1\",vcpu=\"0\"} 0.0000015\n"),
		      "Prometheus: _ns counter becomes _seconds_total, exact value");
		check(strstr(p, "# TYPE kvm_vm_max_mmu_rmap_size gauge\n") &&
			      strstr(p,
				     "kvm_vm_max_mmu_rmap_size{name=\"web\\\"1\"} 1014\n") &&
			      strstr(p, "# TYPE kvm_vcpu_blocking gauge\n") &&
			      strstr(p,
				     "kvm_vcpu_blocking{name=\"web\\\"1\",vcpu=\"0\"} 1\n"),
		      "Prometheus: peak and boolean as gauges, boolean 0/1");
		check(strstr(p,
			     "# TYPE kvm_vm_info gauge\n"
			     "kvm_vm_info{name=\"web\\\"1\",pid=\"1234\",fd=\"10\",comm=\"qemu\\\\x\",id=\"kvm-1234\"} 1\n") &&
			      !strstr(p, "id=\"kvm-1235/vcpu-0\""),
		      "Prometheus: kvm_vm_info has pid, fd, name, comm and id; no series repeats the id");
		q = strstr(
			p,
			"# TYPE kvm_vcpu_halt_wait_hist_seconds histogram\n");
		check(q && strstr(q, "kvm_vcpu_halt_wait_hist_seconds_bucket{name=\"web\\\"1\",vcpu=\"0\",le=\"0\"} 2\n") &&
			      strstr(q, "le=\"0.000000001\"} 5\n") &&
			      strstr(q, "le=\"0.000001023\"} 5\n") &&
			      strstr(q, "le=\"0.000002047\"} 12\n") &&
			      strstr(q, "le=\"+Inf\"} 13\n") &&
			      strstr(q,
				     "kvm_vcpu_halt_wait_hist_seconds_count{name=\"web\\\"1\",vcpu=\"0\"} 13\n"),
		      "Prometheus histogram: cumulative buckets, le in seconds, +Inf, _count");
		check(q && strstr(q,
				  "kvm_vcpu_halt_wait_hist_seconds_sum{name=\"web\\\"1\",vcpu=\"0\"} 0.0000015\n"),
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
			     "kvm_vm_lin_bytes_bucket{vm=\"1:3\",le=\"9216\"} 1\n") &&
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

/* ------------------------------------------- the exposition, worked out */

/*
 * What follows checks an exposition against what it must be, worked out
 * here from first principles and never from the renderer or the library:
 *   - a stats file is read as the KVM binary stats format defines it
 *     (struct kvm_stats_header and struct kvm_stats_desc of <linux/kvm.h>:
 *     type, unit and base in the flags, a value is raw * base^exponent),
 *     or, for the synthetic host, taken from the descriptors and data
 *     this program wrote;
 *   - a histogram's buckets from KVM's definition: log2, bucket 0 holds 0
 *     and bucket i the values 2^(i-1) .. 2^i - 1 (the kernel files a value
 *     at index fls64(value), the last bucket taking the rest); linear,
 *     bucket i holds i * bucket_size .. (i + 1) * bucket_size - 1; so the
 *     inclusive bound le of bucket i is 2^i - 1 or (i + 1) * bucket_size
 *     - 1, in raw units;
 *   - every number in exact decimal, by integer arithmetic on decimal
 *     digits: no double, no kvmstats_scale();
 *   - the names and labels as kvmstats(1), PROMETHEUS NAMES, says them;
 *   - the exposition read by a parser of the text format written here,
 *     labels as sets, values compared as exact decimals.
 */

#define DEC_DIGITS 800

/*
 * @raw * @base^@exp (base 10 or 2) as exact decimal text into @out: no
 * leading zeros, no trailing zeros after the point, no exponent.
 */
static void exact_decimal(uint64_t raw, int base, int exp, char *out,
			  size_t len)
{
	unsigned char d[DEC_DIGITS] = { 0 }; /* little-endian decimal digits */
	int nd = 0, point = 0, i, k, mul, times;
	char *p = out;

	for (; raw; raw /= 10)
		d[nd++] = (unsigned char)(raw % 10);
	if (base == 10 && exp > 0) {
		memmove(d + exp, d, (size_t)nd);
		memset(d, 0, (size_t)exp);
		nd += nd ? exp : 0;
	} else if (base == 10) {
		point = -exp;
	}
	if (base == 2) {
		/* 2^e, or 2^-e = 5^e / 10^e. */
		mul = exp >= 0 ? 2 : 5;
		times = exp >= 0 ? exp : -exp;
		point = exp >= 0 ? 0 : -exp;
		for (k = 0; k < times; k++) {
			int carry = 0;

			for (i = 0; i < nd || carry; i++) {
				int v = (i < nd ? d[i] : 0) * mul + carry;

				d[i] = (unsigned char)(v % 10);
				carry = v / 10;
				if (i >= nd)
					nd = i + 1;
			}
		}
	}
	/* Trailing zeros after the point go. */
	while (point > 0 && nd > 0 && d[0] == 0) {
		memmove(d, d + 1, (size_t)--nd);
		point--;
	}
	if (nd <= point) {
		*p++ = '0';
	} else {
		for (i = nd - 1; i >= point; i--)
			*p++ = (char)('0' + d[i]);
	}
	if (point > 0 && nd > 0) {
		*p++ = '.';
		for (i = point - 1; i >= 0; i--)
			*p++ = (char)('0' + (i < nd ? d[i] : 0));
	}
	*p = '\0';
	(void)len;
}

/*
 * A number as the exposition writes it ([-]digits[.digits][e[+-]digits],
 * or +Inf) in the form of exact_decimal(), into @out; false if it is not
 * one.  So that any exact way of writing a value passes, and no rounded
 * one does.
 */
static bool canonical_number(const char *s, char *out, size_t len)
{
	char digits[DEC_DIGITS];
	int nd = 0, point = -1, e = 0, i, lead, end;
	char *p = out;

	if (!strcmp(s, "+Inf") || !strcmp(s, "-Inf") || !strcmp(s, "NaN")) {
		snprintf(out, len, "%s", s);
		return true;
	}
	if (*s == '-')
		return false; /* nothing here is negative */
	for (; *s; s++) {
		if (isdigit((unsigned char)*s) && nd < DEC_DIGITS - 1)
			digits[nd++] = *s;
		else if (*s == '.' && point < 0)
			point = nd;
		else
			break;
	}
	if (*s == 'e' || *s == 'E')
		e = (int)strtol(s + 1, (char **)&s, 10);
	if (*s || !nd)
		return false;
	if (point < 0)
		point = nd;
	point += e; /* digits[0 .. point-1] are the integer part */
	for (lead = 0; lead < nd - 1 && lead < point - 1 && digits[lead] == '0';
	     lead++)
		;
	for (end = nd; end > point && end > 0 && digits[end - 1] == '0'; end--)
		;
	if (point <= 0) {
		*p++ = '0';
	} else {
		for (i = lead; i < point; i++)
			*p++ = i < end ? digits[i] : '0';
	}
	if (end > point) {
		*p++ = '.';
		for (i = point < 0 ? point : point; i < end; i++)
			*p++ = i < 0 ? '0' : digits[i];
	}
	*p = '\0';
	if (!strcmp(out, "") || !strcmp(out, "."))
		snprintf(out, len, "0");
	return true;
}

/* One sample line of an exposition: its name, labels and value. */
struct sample {
	char *name;
	char *labels; /* KEY=VALUE, unescaped, sorted, separated by \x1e */
	char *value;  /* canonical_number() */
	bool seen;    /* matched by an expectation */
};

struct expo {
	struct sample *s;
	size_t n;
	char **types; /* "NAME TYPE" of each TYPE line */
	char **helps; /* NAME of each HELP line */
	size_t ntypes, nhelps;
	bool bad; /* a line that does not parse */
	char why[256];
};

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The labels {K="V",...} at *@pp (after the '{'), unescaped (\\, \", \n),
 * as sorted KEY=VALUE\x1e... into a malloc()ed string; *@pp after '}'.
 */
static char *parse_labels(const char **pp)
{
	char *pairs[64], *out;
	const char *p = *pp;
	size_t np = 0, i, total = 1;

	while (*p && *p != '}') {
		char buf[2048];
		size_t n = 0;

		while (*p && *p != '=' && n < sizeof(buf) - 2)
			buf[n++] = *p++;
		if (*p != '=' || p[1] != '"' || np == 64)
			return NULL;
		buf[n++] = '=';
		p += 2;
		while (*p && *p != '"' && n < sizeof(buf) - 1) {
			if (*p == '\\') {
				p++;
				buf[n++] = *p == 'n' ? '\n' : *p;
				if (*p)
					p++;
				continue;
			}
			buf[n++] = *p++;
		}
		if (*p != '"')
			return NULL;
		p++;
		buf[n] = '\0';
		pairs[np++] = strdup(buf);
		if (*p == ',')
			p++;
	}
	if (*p != '}')
		return NULL;
	*pp = p + 1;
	qsort(pairs, np, sizeof(pairs[0]), str_cmp);
	for (i = 0; i < np; i++)
		total += strlen(pairs[i]) + 1;
	out = calloc(1, total);
	for (i = 0; i < np; i++) {
		strcat(out, pairs[i]);
		strcat(out, "\x1e");
		free(pairs[i]);
	}
	return out;
}

static void expo_parse(const char *text, struct expo *x)
{
	const char *line = text;

	memset(x, 0, sizeof(*x));
	while (line && *line) {
		const char *nl = strchr(line, '\n'), *p;
		char *l =
			strndup(line, nl ? (size_t)(nl - line) : strlen(line));
		char num[DEC_DIGITS + 8];

		line = nl ? nl + 1 : NULL;
		if (!strncmp(l, "# TYPE ", 7)) {
			x->types = realloc(x->types,
					   (x->ntypes + 1) * sizeof(*x->types));
			x->types[x->ntypes++] = strdup(l + 7);
		} else if (!strncmp(l, "# HELP ", 7)) {
			x->helps = realloc(x->helps,
					   (x->nhelps + 1) * sizeof(*x->helps));
			x->helps[x->nhelps++] =
				strndup(l + 7, strcspn(l + 7, " "));
		} else if (l[0] && l[0] != '#') {
			struct sample sm = { 0 };

			p = l + strcspn(l, "{ ");
			sm.name = strndup(l, (size_t)(p - l));
			if (*p == '{') {
				p++;
				sm.labels = parse_labels(&p);
			} else {
				sm.labels = strdup("");
			}
			if (!sm.labels || *p != ' ' ||
			    !canonical_number(p + 1, num, sizeof(num))) {
				if (!x->bad)
					snprintf(x->why, sizeof(x->why),
						 "cannot parse: %.200s", l);
				x->bad = true;
				free(sm.name);
				free(sm.labels);
				free(l);
				continue;
			}
			sm.value = strdup(num);
			x->s = realloc(x->s, (x->n + 1) * sizeof(*x->s));
			x->s[x->n++] = sm;
		}
		free(l);
	}
}

static void expo_free(struct expo *x)
{
	size_t i;

	for (i = 0; i < x->n; i++) {
		free(x->s[i].name);
		free(x->s[i].labels);
		free(x->s[i].value);
	}
	for (i = 0; i < x->ntypes; i++)
		free(x->types[i]);
	for (i = 0; i < x->nhelps; i++)
		free(x->helps[i]);
	free(x->s);
	free(x->types);
	free(x->helps);
}

/* The sample @name{@labels} (sorted KEY=VALUE\x1e...), or NULL. */
static struct sample *expo_find(struct expo *x, const char *name,
				const char *labels)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		if (!strcmp(x->s[i].name, name) &&
		    !strcmp(x->s[i].labels, labels))
			return &x->s[i];
	return NULL;
}

/* Is there a TYPE line "@name @type", and a HELP line of @name, once each? */
static bool expo_family(const struct expo *x, const char *name,
			const char *type)
{
	size_t i, n = strlen(name), types = 0, helps = 0;
	bool found = false;

	for (i = 0; i < x->ntypes; i++) {
		if (strncmp(x->types[i], name, n) || x->types[i][n] != ' ')
			continue;
		types++;
		found |= !strcmp(x->types[i] + n + 1, type);
	}
	for (i = 0; i < x->nhelps; i++)
		helps += !strcmp(x->helps[i], name);
	return types == 1 && found && helps == 1;
}

/* A label set: pairs KEY, VALUE, ... (NULL-terminated), sorted, joined. */
static void label_set(char *out, size_t len, const char *const *kv)
{
	const char *pairs[32];
	char buf[32][600];
	size_t n = 0, i;

	for (; kv[0]; kv += 2) {
		snprintf(buf[n], sizeof(buf[n]), "%s=%s", kv[0], kv[1]);
		pairs[n] = buf[n];
		n++;
	}
	qsort(pairs, n, sizeof(pairs[0]), str_cmp);
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		strncat(out, pairs[i], len - strlen(out) - 2);
		strncat(out, "\x1e", len - strlen(out) - 1);
	}
}

/* kvmstats(1), PROMETHEUS NAMES: the family name of statistic @d. */
static void family_name(const struct dsc *d, bool vcpu, char *out, size_t len)
{
	static const struct {
		uint32_t unit;
		const char *base, *raw[4];
	} units[] = {
		{ 0x20, "_seconds", { "_ns", "_us", "_ms", "_seconds" } },
		{ 0x10, "_bytes", { "_bytes" } },
		{ 0x30, "_cycles", { "_cycles" } },
	};
	char name[128];
	const char *suffix = "";
	size_t i, j, n;

	snprintf(name, sizeof(name), "%s", d->name);
	for (i = 0; name[i]; i++)
		name[i] = (char)tolower((unsigned char)name[i]);
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if ((d->flags & 0xf0) != units[i].unit)
			continue;
		suffix = units[i].base;
		for (j = 0; j < 4 && units[i].raw[j]; j++) {
			n = strlen(name);
			if (n > strlen(units[i].raw[j]) &&
			    !strcmp(name + n - strlen(units[i].raw[j]),
				    units[i].raw[j])) {
				name[n - strlen(units[i].raw[j])] = '\0';
				break;
			}
		}
	}
	snprintf(out, len, "kvm_%s_%s%s%s", vcpu ? "vcpu" : "vm", name, suffix,
		 (d->flags & 0xf) == 0 ? "_total" : "");
}

/*
 * Every series statistic @d of one object (raw data block @raw, whose
 * descriptors are @all, @nall of them) must have in @x, with the labels
 * @labels (KEY, VALUE, ... without vcpu) and vcpu @vcpu (-1: none).
 * Marks the samples it finds; prints what is wrong; false then.
 */
static bool expect_stat(struct expo *x, const struct dsc *d,
			const struct dsc *all, unsigned int nall,
			const uint64_t *raw, const char *const *labels,
			int vcpu)
{
	const char *kv[40];
	char fam[160], name[200], set[2048], want[DEC_DIGITS], vc[16], cnt[32];
	unsigned int type = d->flags & 0xf, b, i;
	int base = (d->flags & 0xf00) == 0x100 ? 2 : 10, k = 0;
	uint64_t cum = 0;
	struct sample *s;
	bool ok = true;

	family_name(d, vcpu >= 0, fam, sizeof(fam));
	for (; labels[k]; k++)
		kv[k] = labels[k];
	if (vcpu >= 0) {
		snprintf(vc, sizeof(vc), "%d", vcpu);
		kv[k++] = "vcpu";
		kv[k++] = vc;
	}
	kv[k] = kv[k + 1] = kv[k + 2] = NULL;
	if (type < 3) {
		uint64_t v = raw[d->offset / 8];

		if ((d->flags & 0xf0) == 0x40)
			snprintf(want, sizeof(want), "%d", v != 0);
		else
			exact_decimal(v, base, d->exponent, want, sizeof(want));
		label_set(set, sizeof(set), kv);
		s = expo_find(x, fam, set);
		if (!s || strcmp(s->value, want)) {
			printf("# %s of %s: %s, want %s\n", fam, set,
			       s ? s->value : "no sample", want);
			return false;
		}
		s->seen = true;
		return expo_family(x, fam, type == 0 ? "counter" : "gauge") ||
		       (printf("# %s: no HELP and TYPE %s\n", fam,
			       type == 0 ? "counter" : "gauge"),
			false);
	}
	/* A histogram: its buckets, _count and, for three, _sum. */
	for (b = 0; b < d->size && ok; b++) {
		cum += raw[d->offset / 8 + b];
		if (b + 1 == d->size) {
			snprintf(want, sizeof(want), "+Inf");
		} else {
			uint64_t hi =
				type == 4 ? 1ull << b :
					    (uint64_t)(b + 1) * d->bucket_size;

			exact_decimal(hi - 1, base, d->exponent, want,
				      sizeof(want));
		}
		kv[k] = "le";
		kv[k + 1] = want;
		label_set(set, sizeof(set), kv);
		snprintf(name, sizeof(name), "%s_bucket", fam);
		s = expo_find(x, name, set);
		snprintf(cnt, sizeof(cnt), "%llu", (unsigned long long)cum);
		if (!s || strcmp(s->value, cnt)) {
			printf("# %s bucket %u (le %s): %s, want %s\n", fam, b,
			       want, s ? s->value : "no sample", cnt);
			ok = false;
		} else {
			s->seen = true;
		}
	}
	kv[k] = NULL;
	label_set(set, sizeof(set), kv);
	snprintf(name, sizeof(name), "%s_count", fam);
	s = expo_find(x, name, set);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)cum);
	if (ok && (!s || strcmp(s->value, want))) {
		printf("# %s: %s, want %s\n", name, s ? s->value : "none",
		       want);
		ok = false;
	} else if (s) {
		s->seen = true;
	}
	/* KVM adds the same ns to these three and to their counters. */
	{
		static const char *const sums[][2] = {
			{ "halt_wait_hist", "halt_wait_ns" },
			{ "halt_poll_success_hist", "halt_poll_success_ns" },
			{ "halt_poll_fail_hist", "halt_poll_fail_ns" },
		};
		const struct dsc *sd = NULL;

		for (i = 0; i < 3; i++)
			if (!strcmp(d->name, sums[i][0]))
				for (b = 0; b < nall; b++)
					if (!strcmp(all[b].name, sums[i][1]))
						sd = &all[b];
		snprintf(name, sizeof(name), "%s_sum", fam);
		s = expo_find(x, name, set);
		if (sd) {
			exact_decimal(raw[sd->offset / 8],
				      (sd->flags & 0xf00) == 0x100 ? 2 : 10,
				      sd->exponent, want, sizeof(want));
			if (ok && (!s || strcmp(s->value, want))) {
				printf("# %s: %s, want %s\n", name,
				       s ? s->value : "none", want);
				ok = false;
			} else if (s) {
				s->seen = true;
			}
		} else if (s) {
			printf("# %s: a _sum KVM does not keep\n", name);
			ok = false;
		}
	}
	if (ok && !expo_family(x, fam, "histogram")) {
		printf("# %s: no HELP and TYPE histogram\n", fam);
		ok = false;
	}
	return ok;
}

/*
 * A stats file decoded as the format defines it (header, descriptors,
 * data), without the library: into @d (room for @room), the count; the
 * data block and the id into *@raw and @id.  -1 if it does not decode.
 */
static int decode_stats(const unsigned char *buf, size_t size, struct dsc *d,
			unsigned int room, const uint64_t **raw, char *id,
			size_t idlen)
{
	struct kvm_stats_header h;
	unsigned int i;

	if (size < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	if (h.num_desc > room || h.data_offset > size ||
	    h.desc_offset + (size_t)h.num_desc * (16 + h.name_size) > size ||
	    h.id_offset + h.name_size > size)
		return -1;
	snprintf(id, idlen, "%.*s", (int)h.name_size,
		 (const char *)buf + h.id_offset);
	for (i = 0; i < h.num_desc; i++) {
		const unsigned char *p =
			buf + h.desc_offset + (size_t)i * (16 + h.name_size);
		struct kvm_stats_desc kd;

		memcpy(&kd, p, 16);
		d[i] = (struct dsc){ (const char *)p + 16,
				     kd.flags,
				     kd.exponent,
				     kd.size,
				     kd.offset,
				     kd.bucket_size };
	}
	*raw = (const uint64_t *)(buf + h.data_offset);
	return (int)h.num_desc;
}

/*
 * --check-histograms PROM STATS: every histogram of the stats file STATS
 * (a raw vCPU file saved in the guest by tests/suite/70-tool) against its
 * family in the exposition PROM, bucket by bucket, worked out from first
 * principles (above): cumulative counts, le bounds, +Inf, _count and the
 * exact _sum of the three halt histograms.  target.txt next to STATS
 * names the object: pid, fd and vCPU index; the test VMM has no guest
 * name or UUID, so its series are labelled vm="PID:FD" and vcpu.
 */
static char *slurp_n(const char *path, size_t *n)
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
	if (n)
		*n = len;
	return buf;
}

static char *slurp(const char *path)
{
	return slurp_n(path, NULL);
}

static int check_histograms(const char *prom, const char *stats)
{
	size_t size = 0;
	char *text = slurp(prom), *file = slurp_n(stats, &size), tpath[600], *t,
	     *sl, vm[32], id[64];
	struct dsc d[256];
	const uint64_t *raw;
	unsigned int i, families = 0, sums = 0;
	unsigned long long samples = 0;
	int n, pid = -1, vfd = -1, vc = -1;
	struct expo x;

	n = text && file ? decode_stats((unsigned char *)file, size, d, 256,
					&raw, id, sizeof(id)) :
			   -1;
	if (n < 0) {
		check(0, "read %s and decode %s", prom, stats);
		return 1;
	}
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
	snprintf(vm, sizeof(vm), "%d:%d", pid, vfd);
	expo_parse(text, &x);
	check(!x.bad, "the exposition parses%s%s", x.bad ? ": " : "", x.why);
	for (i = 0; i < (unsigned int)n; i++) {
		const char *labels[] = { "vm", vm, NULL };
		unsigned int b;
		unsigned long long cum = 0;
		char fam[160];
		bool sum;

		if ((d[i].flags & 0xf) < 3)
			continue;
		families++;
		for (b = 0; b < d[i].size; b++)
			cum += raw[d[i].offset / 8 + b];
		family_name(&d[i], true, fam, sizeof(fam));
		sum = !strncmp(d[i].name, "halt_", 5) &&
		      strstr(d[i].name, "_hist");
		check(expect_stat(&x, &d[i], d, (unsigned int)n, raw, labels,
				  vc),
		      "%s matches the raw data bucket by bucket (%u buckets, %llu samples%s)",
		      fam, d[i].size, cum, sum ? ", exact _sum" : "");
		sums += sum;
		samples += cum;
	}
	check(families > 0, "the raw file has histograms to check (%u)",
	      families);
	check(sums == 3, "the three halt histograms have their exact _sum (%u)",
	      sums);
	check(samples > 0,
	      "a histogram of the raw file has samples (%llu; the guest captures an irqchip vCPU woken from HLT)",
	      samples);
	expo_free(&x);
	free(file);
	free(text);
	return failures ? 1 : 0;
}

/*
 * The exposition of a small synthetic host (two 6.12 VMs of two vCPUs,
 * the first with a QEMU guest name and UUID, and a VM with an escaped id
 * and another vCPU layout: a linear histogram of KiB, a statistic less),
 * every sample of it worked out from the descriptors and data this
 * program wrote: each statistic of each object once, with its labels and
 * its exact value, each family's HELP and TYPE, kvm_vm_info per VM, and
 * no sample more.  (Before issue 28 this was a copy of the renderer's own
 * output, compared byte for byte.)
 */
static void test_exposition(void)
{
	struct synth sy;
	struct expo x;
	char *text;
	size_t k, unseen = 0, nexp = 0, before;
	bool ok = true, info_ok = true;

	synth_make(&sy, 2, 2, true, NULL);
	text = render(prom_render, sy.objs, sy.n);
	expo_parse(text, &x);
	check(!x.bad, "the synthetic host's exposition parses%s%s",
	      x.bad ? ": " : "", x.why);
	for (k = 0; k < sy.n; k++) {
		const struct obj *o = &sy.objs[k];
		char pid[16], fd[16], vm[32], set[2048];
		const char *ident_named[] = { "name", "web1", "uuid",
					      SYNTH_UUID, NULL };
		const char *ident_vm[] = { "vm", vm, NULL };
		const char *const *ident =
			o->pid == 1000 ? ident_named : ident_vm;
		unsigned int i;

		snprintf(pid, sizeof(pid), "%d", o->pid);
		snprintf(fd, sizeof(fd), "%d", o->fd);
		snprintf(vm, sizeof(vm), "%d:%d", o->pid, o->fd);
		for (i = 0; i < sy.ndescs[k]; i++) {
			before = nexp;
			if (!expect_stat(&x, &sy.descs[k][i], sy.descs[k],
					 sy.ndescs[k], sy.raw[k], ident,
					 o->vcpu)) {
				printf("# object %zu (%d:%d vCPU %d): statistic %s\n",
				       k, o->pid, o->fd, o->vcpu,
				       sy.descs[k][i].name);
				ok = false;
			}
			nexp = before + 1;
		}
		if (o->vcpu == -1) {
			/* kvm_vm_info: every identity label, and the rest. */
			const char *named[] = { "name", "web1",
						"uuid", SYNTH_UUID,
						"pid",	pid,
						"fd",	fd,
						"comm", "qemu-system-x86",
						"id",	sy.ids[k],
						NULL };
			const char *unnamed[] = {
				"pid", pid,	  "fd",	  fd,
				"vm",  vm,	  "comm", "qemu-system-x86",
				"id",  sy.ids[k], NULL
			};
			struct sample *s;

			label_set(set, sizeof(set),
				  o->pid == 1000 ? named : unnamed);
			s = expo_find(&x, "kvm_vm_info", set);
			if (!s || strcmp(s->value, "1")) {
				printf("# kvm_vm_info of %s: %s\n", vm,
				       s ? s->value : "no such series");
				info_ok = false;
			} else {
				s->seen = true;
			}
		}
	}
	for (k = 0; k < x.n; k++) {
		if (!x.s[k].seen) {
			if (unseen++ < 5)
				printf("# a sample no statistic accounts for: %s{%s} %s\n",
				       x.s[k].name, x.s[k].labels,
				       x.s[k].value);
		}
	}
	check(ok,
	      "every statistic of every object of the synthetic host has its series, labels and exact value, worked out from the descriptors and data written (%zu samples)",
	      x.n);
	check(info_ok && expo_family(&x, "kvm_vm_info", "gauge"),
	      "kvm_vm_info: one series of 1 per VM, with its name and UUID or vm=\"PID:FD\", pid, fd, comm and KVM's id (escaped id read back whole)");
	check(!unseen, "no sample beyond those (%zu unaccounted for)", unseen);
	expo_free(&x);
	free(text);
	synth_free(&sy);
}

/*
 * exact_decimal() and canonical_number() against values worked out by
 * hand: the oracle's own arithmetic checked before it judges anything.
 */
static void test_exact_decimal(void)
{
	static const struct {
		uint64_t raw;
		int base, exp;
		const char *want;
	} cases[] = {
		{ 0, 10, -9, "0" },
		{ 1500, 10, -9, "0.0000015" },
		{ 1000000000, 10, -9, "1" },
		{ 1023, 10, -9, "0.000001023" },
		{ 123456789012ull, 10, -9, "123.456789012" },
		{ UINT64_MAX, 10, -9, "18446744073.709551615" },
		{ 7, 10, 3, "7000" },
		{ 3, 2, 20, "3145728" },
		{ 15, 2, 10, "15360" },
		{ UINT64_MAX, 2, 10, "18889465931478580853760" },
		{ 1, 2, -3, "0.125" },
		{ 42, 10, 0, "42" },
	};
	static const struct {
		const char *in, *want;
	} nums[] = {
		{ "0.000001023", "0.000001023" },
		{ "1.023e-06", "0.000001023" },
		{ "1e-09", "0.000000001" },
		{ "15360", "15360" },
		{ "1.536e4", "15360" },
		{ "007.50", "7.5" },
		{ "+Inf", "+Inf" },
		{ "0", "0" },
		{ "0.0", "0" },
	};
	char out[DEC_DIGITS];
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		exact_decimal(cases[i].raw, cases[i].base, cases[i].exp, out,
			      sizeof(out));
		if (strcmp(out, cases[i].want)) {
			printf("# %llu * %d^%d = %s, want %s\n",
			       (unsigned long long)cases[i].raw, cases[i].base,
			       cases[i].exp, out, cases[i].want);
			ok = false;
		}
	}
	for (i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (!canonical_number(nums[i].in, out, sizeof(out)) ||
		    strcmp(out, nums[i].want)) {
			printf("# %s read as %s, want %s\n", nums[i].in, out,
			       nums[i].want);
			ok = false;
		}
	}
	check(ok && !canonical_number("1.5x", out, sizeof(out)),
	      "the checks' exact decimals: raw * base^exponent by hand, and numbers read back exactly");
}

/*
 * Issue 28: series named by what a guest keeps across restarts.  VMs of
 * one exposition: a libvirt-like one with a name and UUID, a KubeVirt one
 * (namespace and name), two VMMs of two users claiming one name, one
 * without a name, a name with a right-to-left override and escape
 * sequences; each vCPU object, as export's default and with
 * --vm-labels pid,fd.
 */
static void test_vm_labels(void)
{
	static const struct dsc d[] = { { "exits", 0x000, 0, 1, 0, 0 } };
	static const char uuid[] = "6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10";
	uint64_t data[1] = { 5 };
	struct image im = build("kvm-1/vcpu-0", d, 1, 8, data);
	struct kvmstats_file *f;
	int fd = image_fd(&im, NULL, "ident");
	struct obj o[6];
	struct prom_cache *c;
	const char *text;
	unsigned int bits = 0;
	size_t len, i;
	char *t;

	free(im.buf);
	if (kvmstats_file_adopt(fd, 0, &f)) {
		check(0, "adopt the vCPU file for the identity labels");
		return;
	}
	o[0] = (struct obj){ .pid = 100,
			     .fd = 10,
			     .name = "web1",
			     .uuid = uuid,
			     .comm = "qemu-system-x86",
			     .has_uid = true,
			     .uid = 64055 };
	o[1] = (struct obj){ .pid = 200,
			     .fd = 20,
			     .name = "vm1",
			     .ns = "default",
			     .comm = "qemu-kvm",
			     .has_uid = true,
			     .uid = 107 };
	o[2] = (struct obj){ .pid = 300,
			     .fd = 30,
			     .name = "db",
			     .comm = "qemu",
			     .has_uid = true,
			     .uid = 1000 };
	o[3] = (struct obj){ .pid = 400,
			     .fd = 40,
			     .name = "db",
			     .comm = "qemu",
			     .has_uid = true,
			     .uid = 1001 };
	o[4] = (struct obj){ .pid = 500, .fd = 50, .comm = "samplevm" };
	o[5] = (struct obj){ .pid = 600,
			     .fd = 60,
			     .name = "ev\xe2\x80\xaeil\x1b[31m\x7f\xc2\x9bx\n",
			     .comm = "q\tx" };
	for (i = 0; i < 6; i++) {
		o[i].vcpu = 0;
		o[i].file = f;
		o[i].data = data;
	}
	c = prom_cache_new();
	if (prom_cache_render(c, o, 6, NULL, &text, &len)) {
		check(0, "render the identity objects");
		return;
	}
	t = strndup(text, len);
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{name=\"web1\",uuid=\"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10\",vcpu=\"0\"} 5\n") &&
		      !strstr(t, "pid=\"100\",fd=\"10\",vcpu"),
	      "a VM's series carry its guest name and UUID, not its VMM's pid and fd");
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{namespace=\"default\",name=\"vm1\",vcpu=\"0\"} 5\n") !=
		      NULL,
	      "KubeVirt's VM: namespace and name labels");
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{name=\"db\",vm=\"300:30\",vcpu=\"0\"} 5\n") &&
		      strstr(t,
			     "\nkvm_vcpu_exits_total{name=\"db\",vm=\"400:40\",vcpu=\"0\"} 5\n") &&
		      strstr(t,
			     "\nkvm_vm_info{name=\"db\",pid=\"300\",fd=\"30\",vm=\"300:30\",uid=\"1000\",comm=\"qemu\"} 1\n") &&
		      strstr(t,
			     "\nkvm_vm_info{name=\"db\",pid=\"400\",fd=\"40\",vm=\"400:40\",uid=\"1001\",comm=\"qemu\"} 1\n"),
	      "two VMMs claiming one name: both get vm=\"PID:FD\" (neither keeps the bare name), kvm_vm_info tells their owners apart by uid");
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{vm=\"500:50\",vcpu=\"0\"} 5\n") &&
		      strstr(t,
			     "\nkvm_vm_info{pid=\"500\",fd=\"50\",vm=\"500:50\",comm=\"samplevm\"} 1\n"),
	      "a VM without a name or UUID: vm=\"PID:FD\"; kvm_vm_info without a uid it does not know");
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{name=\"evil[31mx\",vcpu=\"0\"} 5\n") &&
		      strstr(t, "comm=\"qx\"") && !strstr(t, "\xe2\x80\xae") &&
		      !strstr(t, "\x1b") && !strstr(t, "\xc2\x9b"),
	      "labels from a VMM's command line lose control characters (C0, DEL, C1) and the right-to-left override");
	check(strstr(t,
		     "\nkvm_vm_info{name=\"web1\",uuid=\"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10\",pid=\"100\",fd=\"10\",uid=\"64055\",comm=\"qemu-system-x86\"} 1\n") &&
		      strstr(t,
			     "\nkvm_vm_info{namespace=\"default\",name=\"vm1\",pid=\"200\",fd=\"20\",uid=\"107\",comm=\"qemu-kvm\"} 1\n"),
	      "kvm_vm_info: the series' labels, pid, fd and the VMM's uid");
	free(t);

	check(!vm_labels_parse("pid,fd", &bits) && bits == (VML_PID | VML_FD) &&
		      !vm_labels_parse("uuid", &bits) && bits == VML_UUID &&
		      !vm_labels_parse("name,uuid,pid,fd", &bits) &&
		      bits == (VML_NAME | VML_UUID | VML_PID | VML_FD) &&
		      vm_labels_parse("", &bits) &&
		      vm_labels_parse("name,", &bits) &&
		      vm_labels_parse("name,vm", &bits) &&
		      vm_labels_parse("names", &bits),
	      "--vm-labels: any of name, uuid, pid, fd; nothing else");
	prom_cache_set_vm_labels(c, VML_PID | VML_FD);
	if (prom_cache_render(c, o, 6, NULL, &text, &len)) {
		check(0, "render the identity objects with pid,fd");
		return;
	}
	t = strndup(text, len);
	check(strstr(t,
		     "\nkvm_vcpu_exits_total{pid=\"300\",fd=\"30\",vcpu=\"0\"} 5\n") &&
		      strstr(t,
			     "\nkvm_vcpu_exits_total{pid=\"100\",fd=\"10\",vcpu=\"0\"} 5\n") &&
		      !strstr(t, "vm=\"") &&
		      strstr(t,
			     "\nkvm_vm_info{name=\"web1\",uuid=\"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10\",pid=\"100\",fd=\"10\",uid=\"64055\",comm=\"qemu-system-x86\"} 1\n"),
	      "--vm-labels pid,fd: the series keyed on pid and fd (no vm needed); kvm_vm_info unchanged");
	free(t);
	prom_cache_set_vm_labels(c, VML_UUID);
	if (!prom_cache_render(c, o, 6, NULL, &text, &len)) {
		t = strndup(text, len);
		check(strstr(t,
			     "\nkvm_vcpu_exits_total{uuid=\"6b1fd3c2-0d34-4e2a-9c1b-3f0e8a6b2d10\",vcpu=\"0\"} 5\n") &&
			      strstr(t,
				     "\nkvm_vcpu_exits_total{vm=\"200:20\",vcpu=\"0\"} 5\n"),
		      "--vm-labels uuid: VMs without a UUID get vm=\"PID:FD\"");
		free(t);
	}
	prom_cache_free(c);
	kvmstats_file_free(f);
}

/* put_file() from further down, for the identity's stats directory. */
static void put_file(const char *dir, const char *name, const char *text);

/*
 * KubeVirt's NAMESPACE_VM, split only for a VMM in a Kubernetes pod and
 * only in that form; the owner from the status file (effective uid).
 */
static void test_identity_kubevirt(const char *dir)
{
	static const struct {
		const char *name, *ns;
		size_t at;
	} cases[] = {
		{ "default_testvm", "default", 8 },
		{ "kube-system_vm.a-1", "kube-system", 12 },
		{ "db_1", "db", 3 },
		{ "nounderscore", "", 0 },
		{ "Default_vm", "", 0 },
		{ "ns_Vm", "", 0 },
		{ "-ns_vm", "", 0 },
		{ "ns-_vm", "", 0 },
		{ "ns_vm_2", "", 0 },
		{ "_vm", "", 0 },
		{ "ns_", "", 0 },
		{ "ns_vm.", "", 0 },
		{ "ns_v\xe2\x80\xaem", "", 0 },
		{ "a234567890123456789012345678901234567890123456789012345678901234_vm",
		  "", 0 },
	};
	struct source src = { .devfd = -1 };
	struct vm_identity id;
	char ns[64], sub[600], top[600];
	size_t i, at;
	bool ok = true;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ns[0] = '\0';
		at = identity_kubevirt_split(cases[i].name, ns, sizeof(ns));
		if (at != cases[i].at || (at && strcmp(ns, cases[i].ns))) {
			printf("# %s: split at %zu (%s), want %zu (%s)\n",
			       cases[i].name, at, at ? ns : "", cases[i].at,
			       cases[i].ns);
			ok = false;
		}
	}
	check(ok,
	      "KubeVirt's NAMESPACE_VM: a DNS label, '_', a DNS subdomain; nothing else is split");
	if (!dir)
		return;
	snprintf(top, sizeof(top), "%s/ident", dir);
	mkdir(top, 0755);
	src.dir = top;
	snprintf(sub, sizeof(sub), "%s/ident/10-3", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/ident/10-3/cgroup", dir);
	unlink(sub); /* from an earlier run */
	snprintf(sub, sizeof(sub), "%s/ident/10-3", dir);
	{
		/* put_file() writes a C string: the cmdline needs its NULs. */
		char path[700];
		static const char cl[] =
			"qemu\0-name\0guest=default_testvm,debug-threads=on\0";
		int f;

		snprintf(path, sizeof(path), "%s/cmdline", sub);
		f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (f < 0 || write(f, cl, sizeof(cl) - 1) != sizeof(cl) - 1)
			check(0, "write %s", path);
		if (f >= 0)
			close(f);
	}
	put_file(
		sub, "status",
		"Name:\tqemu-kvm\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t0\t107\t107\t107\nGid:\t107\t107\t107\t107\n");
	identity_read(&src, 10, 3, &id);
	check(!strcmp(id.name, "default_testvm") && !id.ns[0] &&
		      !strcmp(identity_vm_name(&id), "default_testvm") &&
		      id.has_uid && id.uid == 107,
	      "outside a Kubernetes pod, default_testvm keeps its name whole; the owner is the effective uid (107)");
	put_file(
		sub, "cgroup",
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-2.scope\n");
	identity_read(&src, 10, 3, &id);
	check(!strcmp(id.ns, "default") &&
		      !strcmp(identity_vm_name(&id), "testvm") &&
		      !strcmp(id.name, "default_testvm"),
	      "in a Kubernetes pod (cgroup kubepods), KubeVirt's default_testvm is namespace default, name testvm");
	snprintf(sub, sizeof(sub), "%s/ident/10-3/status", dir);
	unlink(sub);
	identity_read(&src, 10, 3, &id);
	check(!id.has_uid, "no status file: the owner is not known");
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
		/*
		 * Private from /proc down, not from /: in a chroot (a
		 * scratch root of tests/qemu/fresh) / is no mount point, and
		 * changing its propagation is EINVAL.
		 */
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/proc", NULL, MS_REC | MS_PRIVATE, NULL) ||
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
		     "kvm_vm_big_seconds_count{name=\"bad\xef\xbf\xbd(name\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"} 2000\n") !=
		      NULL,
	      "a name that is not UTF-8 becomes U+FFFD, a newline in it is left out");
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
	check(strstr(p, "kvm_vcpu_blocking{vm=\"1:3\"} 3\n") &&
		      strstr(p, "kvm_vcpu_exits_total{vm=\"1:3\"} 12\n") &&
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
	test_exact_decimal();
	test_exposition();
	test_vm_labels();
	test_identity_kubevirt(dir);
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
