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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/kvm.h>

#include "libkvmstats.h"
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
				(struct obj){ pid, vfd, c ? (int)c - 1 : -1, f,
					      sy->bufs[k] };
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
			{ .pid = 1234, .fd = 10, .vcpu = -1, .file = vm },
			{ .pid = 1234, .fd = 10, .vcpu = 0, .file = vc },
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
				     "kvm_vcpu_io_exits_total{pid=\"1234\",fd=\"10\",id=\"kvm-1235/vcpu-0\",vcpu=\"0\"} 424242\n"),
		      "Prometheus counter with _total and pid/fd/id/vcpu labels");
		check(strstr(p,
			     "# TYPE kvm_vcpu_halt_wait_seconds_total counter\n") &&
			      strstr(p,
				     "kvm_vcpu_halt_wait_seconds_total{pid=\"1234\",fd=\"10\",id=\"kvm-1235/vcpu-0\",vcpu=\"0\"} 0.0000015\n"),
		      "Prometheus: _ns counter becomes _seconds_total, exact value");
		check(strstr(p, "# TYPE kvm_vm_max_mmu_rmap_size gauge\n") &&
			      strstr(p,
				     "kvm_vm_max_mmu_rmap_size{pid=\"1234\",fd=\"10\",id=\"kvm-1234\"} 1014\n") &&
			      strstr(p, "# TYPE kvm_vcpu_blocking gauge\n") &&
			      strstr(p,
				     "kvm_vcpu_blocking{pid=\"1234\",fd=\"10\",id=\"kvm-1235/vcpu-0\",vcpu=\"0\"} 1\n"),
		      "Prometheus: peak and boolean as gauges, boolean 0/1");
		q = strstr(
			p,
			"# TYPE kvm_vcpu_halt_wait_hist_seconds histogram\n");
		check(q && strstr(q, "kvm_vcpu_halt_wait_hist_seconds_bucket{pid=\"1234\",fd=\"10\",id=\"kvm-1235/vcpu-0\",vcpu=\"0\",le=\"0\"} 2\n") &&
			      strstr(q, "le=\"0.000000001\"} 5\n") &&
			      strstr(q, "le=\"0.000001023\"} 5\n") &&
			      strstr(q, "le=\"0.000002047\"} 12\n") &&
			      strstr(q, "le=\"+Inf\"} 13\n") &&
			      strstr(q,
				     "kvm_vcpu_halt_wait_hist_seconds_count{pid=\"1234\",fd=\"10\",id=\"kvm-1235/vcpu-0\",vcpu=\"0\"} 13\n"),
		      "Prometheus histogram: cumulative buckets, le in seconds, +Inf, _count");
		check(!strstr(p, "_sum"), "Prometheus: no invented _sum");
		{
			/* Every family has HELP and TYPE, each once. */
			char *line, *save, *copy = strdup(p);
			int help = 0, type = 0;

			for (line = strtok_r(copy, "\n", &save); line;
			     line = strtok_r(NULL, "\n", &save)) {
				help += !strncmp(line, "# HELP ", 7);
				type += !strncmp(line, "# TYPE ", 7);
			}
			check(help == 60 && type == 60,
			      "Prometheus: HELP and TYPE for each of the 60 families (%d, %d)",
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
		struct obj o = { 1, 3, -1, f, b };
		char *p;

		kvmstats_file_read(f, b, sizeof(b));
		p = render(prom_render, &o, 1);
		check(strstr(p,
			     "kvm_vm_lin_bytes_bucket{pid=\"1\",fd=\"3\",id=\"kvm-1\",le=\"9216\"} 1\n") &&
			      strstr(p, "le=\"29696\"} 6\n") &&
			      strstr(p, "le=\"+Inf\"} 10\n"),
		      "Prometheus linear histogram: le = (i+1)*bucket_size - 1 raw, in bytes");
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
	EXPECT_BAD("type 5", DESC(0)->flags = 5);
	EXPECT_BAD("unit 5", DESC(0)->flags = 0x50);
	EXPECT_BAD("base 2", DESC(0)->flags = 0x200);
	EXPECT_BAD("seconds with a positive exponent", DESC(1)->exponent = 3);
	EXPECT_BAD("a count with a negative exponent", DESC(0)->exponent = -1);
	EXPECT_BAD("a boolean log histogram", DESC(1)->flags = 0x044;
		   DESC(1)->exponent = 0);
	EXPECT_BAD("size 0", DESC(0)->size = 0);
	EXPECT_BAD("a scalar with size 2", DESC(0)->size = 2);
	EXPECT_BAD("bucket_size on a log histogram", DESC(1)->bucket_size = 4);
	EXPECT_BAD("a linear histogram without bucket_size",
		   DESC(1)->flags = 0x023);
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

static void test_guest_name(void)
{
	static const char a[] = "qemu-system-x86_64\0-m\0512\0-name\0demo\0";
	static const char b[] = "qemu\0-name\0guest=web,,1,debug-threads=on\0";
	static const char c[] = "qemu\0-name\0db,process=x\0";
	static const char d[] = "qemu\0-m\0-name";
	char n[64] = "";
	bool ok;

	ok = parse_guest_name(a, sizeof(a), n, sizeof(n)) && !strcmp(n, "demo");
	ok = ok && parse_guest_name(b, sizeof(b), n, sizeof(n)) &&
	     !strcmp(n, "web,1");
	ok = ok && parse_guest_name(c, sizeof(c), n, sizeof(n)) &&
	     !strcmp(n, "db");
	ok = ok && !parse_guest_name(d, sizeof(d), n, sizeof(n));
	check(ok,
	      "QEMU -name parsing: plain, guest=, ',,' escape, options, missing");
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
	char *text = slurp(prom), id_label[256], target[64] = "";
	struct kvmstats_file *f;
	unsigned char *data;
	unsigned int i, b, families = 0;
	unsigned long long samples = 0;
	int fd = open(stats, O_RDONLY | O_CLOEXEC);

	if (!text || fd < 0 || kvmstats_file_adopt(fd, 0, &f)) {
		check(0, "read %s and %s", prom, stats);
		return 1;
	}
	data = malloc(kvmstats_file_data_size(f));
	kvmstats_file_read(f, data, kvmstats_file_data_size(f));
	snprintf(id_label, sizeof(id_label), "id=\"%s\"", kvmstats_file_id(f));
	{
		/*
		 * target.txt next to the stats file names the object's pid and
		 * fd: VMs made by one thread share an id, so match all three.
		 */
		char tpath[600], *t, *sl;
		int pid = -1, vfd = -1;

		snprintf(tpath, sizeof(tpath), "%s", stats);
		sl = strrchr(tpath, '/');
		snprintf(sl ? sl + 1 : tpath,
			 sizeof(tpath) - (size_t)(sl ? sl + 1 - tpath : 0),
			 "target.txt");
		t = slurp(tpath);
		if (t && sscanf(t, "pid=%d fd=%d", &pid, &vfd) == 2)
			snprintf(id_label, sizeof(id_label),
				 "{pid=\"%d\",fd=\"%d\",id=\"%s\"", pid, vfd,
				 kvmstats_file_id(f));
		free(t);
	}
	for (i = 0; i < kvmstats_file_num_stats(f); i++) {
		const struct kvmstats_stat *s = kvmstats_file_stat(f, i);
		char fam[128], head[160];
		unsigned long long cum = 0;
		bool ok = true;
		const char *p;

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
		for (b = 0; b < s->size && ok; b++) {
			char key[200];
			const char *q = p, *le;
			double want_le = 0, got_le;
			unsigned long long got;

			cum += kvmstats_value(s, data, b);
			if (b + 1 < s->size) {
				double hi = s->type == KVMSTATS_LOG_HIST ?
						    ldexp(1.0, (int)b) :
						    (double)(b + 1) *
							    s->bucket_size;

				want_le = kvmstats_scale(s, hi - 1);
			}
			/* The bucket line of this object with the b-th le. */
			snprintf(key, sizeof(key), "\n%s_bucket{", fam);
			for (unsigned int k = 0; k <= b; k++) {
				do {
					q = strstr(q + 1, key);
				} while (q && (!strstr(q, id_label) ||
					       strstr(q, id_label) >
						       strchr(q + 1, '\n')));
				if (!q)
					break;
			}
			if (!q) {
				printf("# %s: no bucket line %u\n", fam, b);
				ok = false;
				break;
			}
			le = strstr(q, "le=\"");
			if (!le) {
				ok = false;
				break;
			}
			le += 4;
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
			char key[200];
			const char *q;

			char key2[512];

			/* This object's _count line (its labels, or its id). */
			snprintf(key, sizeof(key), "\n%s_count{", fam);
			snprintf(key2, sizeof(key2), "\n%s_count%s", fam,
				 id_label);
			q = strstr(p, id_label[0] == '{' ? key2 : key);
			while (q && id_label[0] != '{' && !strstr(q, id_label))
				q = strstr(q + 1, key);
			if (q && id_label[0] != '{' &&
			    strstr(q, id_label) > strchr(q + 1, '\n'))
				q = NULL;
			ok = q &&
			     strtoull(strchr(q, '}') + 1, NULL, 10) == cum &&
			     !strstr(text, "_sum{");
		}
		check(ok,
		      "%s matches the raw data bucket by bucket (%u buckets, %llu samples)",
		      fam, s->size, cum);
		samples += cum;
	}
	snprintf(target, sizeof(target), "%u", families);
	check(families > 0, "the raw file has histograms to check (%s)",
	      target);
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
	test_guest_name();
	test_native();
	test_golden(dir);
	printf("# libkvmstats unit tests: %d passed, %d failed\n", passes,
	       failures);
	return failures ? 1 : 0;
}
