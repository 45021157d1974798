// SPDX-License-Identifier: GPL-2.0-only
/*
 * The kvmstats tool against real VMs: `schema` without a VM says why it
 * cannot answer from the device yet; `show`, `show --json` and `export`
 * print, for a halted vCPU, exactly the values of KVM's own stats fd;
 * the JSON parses and names the VMM's comm; `top --batch` shows a running
 * vCPU's io_exits rate above zero and a halted one's at zero, its host
 * view their sum and its log (-l) the running vCPU's exits per interval;
 * a VM started after `top` appears and is marked when its process exits; bad input gets distinct exit
 * statuses; `export --listen` answers HTTP and survives a client that
 * hangs up.  Leaves an `export` capture and the raw vCPU stats file in
 * $KVMSTATS_ARTIFACTS/tool/ for the host's promtool check.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "kvmstats_util.h"
#include "json_check.h"

#define TOOL "/usr/bin/kvmstats"

static bool native; /* no /dev/kvmstats: the tool's native path */
#define OUT_MAX (1 << 20)

static char out[OUT_MAX];

/* Run @cmd with /bin/sh; stdout into out[]; the exit status. */
static int run(const char *cmd)
{
	return run_capture(cmd, out, sizeof(out));
}

/* Exact nanoseconds from a decimal count of seconds ("0.0000015"). */
static bool seconds_to_ns(const char *s, uint64_t *ns)
{
	uint64_t ip = 0, fp = 0;
	int digits = 0;

	if (!isdigit((unsigned char)*s))
		return false;
	while (isdigit((unsigned char)*s))
		ip = ip * 10 + (uint64_t)(*s++ - '0');
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s) && digits < 9) {
			fp = fp * 10 + (uint64_t)(*s++ - '0');
			digits++;
		}
		if (isdigit((unsigned char)*s))
			return false;
	}
	while (digits++ < 9)
		fp *= 10;
	*ns = ip * 1000000000ull + fp;
	return *s == '\0' || isspace((unsigned char)*s);
}

/* The Prometheus family name the tool must use for a descriptor. */
static void prom_family(const struct kvm_stats_desc *d, char *buf, size_t len)
{
	char base[64];
	size_t n;
	const char *unit = "";

	snprintf(base, sizeof(base), "%s", d->name);
	n = strlen(base);
	if ((d->flags & KVM_STATS_UNIT_MASK) == KVM_STATS_UNIT_SECONDS) {
		unit = "_seconds";
		if (n > 3 && !strcmp(base + n - 3, "_ns"))
			base[n - 3] = '\0';
	}
	snprintf(buf, len, "kvm_vcpu_%s%s%s", base, unit,
		 (d->flags & KVM_STATS_TYPE_MASK) == KVM_STATS_TYPE_CUMULATIVE ?
			 "_total" :
			 "");
}

static bool is_hist(const struct kvm_stats_desc *d)
{
	uint32_t t = d->flags & KVM_STATS_TYPE_MASK;

	return t == KVM_STATS_TYPE_LOG_HIST || t == KVM_STATS_TYPE_LINEAR_HIST;
}

static void save_artifact(const char *name, const void *data, size_t len)
{
	const char *dir = getenv("KVMSTATS_ARTIFACTS");
	char path[512];
	int fd;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/tool", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/tool/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len)
		tap_diag("cannot save %s", path);
	if (fd >= 0)
		close(fd);
}

/*
 * Each non-empty bucket of histogram @d in `show` text: the line
 * "    [b] [lo, hi) count" under the stat's header line, the header's
 * sample total, and no line for an empty bucket.
 */
static int check_show_hist(const char *text, const struct stats_blob *native,
			   const struct kvm_stats_desc *d,
			   unsigned long long *total)
{
	const char *p, *end;
	char head[96], want[128];
	int b, bad = 0;

	snprintf(head, sizeof(head), "\n  %s ", d->name);
	p = strstr(text, head);
	if (!p) {
		tap_diag("show: no histogram %s", d->name);
		return 1;
	}
	end = strstr(p + 1, "\n  ");
	while (end && !strncmp(end, "\n    [", 6))
		end = strstr(end + 1, "\n  ");
	*total = 0;
	for (b = 0; b < d->size; b++)
		*total += stats_value(native, d->name, b);
	snprintf(want, sizeof(want), ", %llu samples", *total);
	if (!strstr(p, want) || (end && strstr(p, want) > end)) {
		tap_diag("show: %s: want %llu samples", d->name, *total);
		bad++;
	}
	for (b = 0; b < d->size; b++) {
		unsigned long long v = stats_value(native, d->name, b);
		char lo[32], hi[32];
		const char *q;

		if ((d->flags & KVM_STATS_TYPE_MASK) ==
		    KVM_STATS_TYPE_LOG_HIST) {
			snprintf(lo, sizeof(lo), "%llu",
				 b ? 1ull << (b - 1) : 0ull);
			snprintf(hi, sizeof(hi), "%llu", 1ull << b);
		} else {
			snprintf(lo, sizeof(lo), "%llu",
				 (unsigned long long)b * d->bucket_size);
			snprintf(hi, sizeof(hi), "%llu",
				 (unsigned long long)(b + 1) * d->bucket_size);
		}
		if (b == d->size - 1)
			snprintf(hi, sizeof(hi), "inf");
		snprintf(want, sizeof(want), "\n    [%d] [%s, %s) %llu\n", b,
			 lo, hi, v);
		q = strstr(p, want);
		if (v && (!q || (end && q > end))) {
			tap_diag("show: %s: no line %s", d->name, want + 1);
			bad++;
		}
		snprintf(want, sizeof(want), "\n    [%d] ", b);
		q = strstr(p, want);
		if (!v && q && (!end || q < end)) {
			tap_diag("show: %s: a line for empty bucket %d",
				 d->name, b);
			bad++;
		}
	}
	return bad;
}

/*
 * The exposition's family for histogram @d of vCPU 0 (labels @labels)
 * against the native data: every cumulative bucket, le = hi - 1 of the
 * KVM bucket in seconds (exact), +Inf and _count.
 */
static int check_prom_hist(const char *text, const struct stats_blob *native,
			   const struct kvm_stats_desc *d, const char *labels)
{
	char fam[128], key[512];
	unsigned long long cum = 0;
	const char *p;
	int b, bad = 0;

	prom_family(d, fam, sizeof(fam));
	for (b = 0; b < d->size; b++) {
		uint64_t le_ns = 0;

		cum += stats_value(native, d->name, b);
		snprintf(key, sizeof(key), "\n%s_bucket%s,le=\"", fam, labels);
		p = text;
		for (int k = 0; p && k <= b; k++) {
			p = strstr(p + 1, key);
		}
		if (!p) {
			tap_diag("export: %s: no bucket line %d", fam, b);
			return bad + 1;
		}
		p += strlen(key);
		if (b == d->size - 1) {
			if (strncmp(p, "+Inf\"}", 6)) {
				tap_diag(
					"export: %s: the last bucket is not +Inf",
					fam);
				bad++;
			}
		} else {
			uint64_t hi =
				(d->flags & KVM_STATS_TYPE_MASK) ==
						KVM_STATS_TYPE_LOG_HIST ?
					1ull << b :
					(uint64_t)(b + 1) * d->bucket_size;

			char le[64];
			size_t n = strcspn(p, "\"");

			snprintf(le, sizeof(le), "%.*s",
				 (int)(n < sizeof(le) ? n : sizeof(le) - 1), p);
			if (!seconds_to_ns(le, &le_ns) || le_ns != hi - 1) {
				tap_diag(
					"export: %s bucket %d: le %.*s, want %llu ns",
					fam, b, (int)strcspn(p, "\""), p,
					(unsigned long long)(hi - 1));
				bad++;
			}
		}
		p = strchr(p, '}');
		if (!p || strtoull(p + 1, NULL, 10) != cum) {
			tap_diag("export: %s bucket %d: want cumulative %llu",
				 fam, b, cum);
			bad++;
		}
	}
	snprintf(key, sizeof(key), "\n%s_count%s} %llu\n", fam, labels, cum);
	if (!strstr(text, key)) {
		tap_diag("export: no line %s", key + 1);
		bad++;
	}
	return bad;
}

/*
 * show, show --json and export of vCPU 0 of @vm against its native fd
 * @nfd (opened by the caller: native GET_STATS_FD waits for the vCPU's
 * mutex, held by a vCPU thread in KVM_RUN).  @what names the VM in the
 * check lines.  The vCPU must not change meanwhile (halted, or asleep in
 * the kernel's halt wait).  With @hists, histograms are checked bucket by
 * bucket in the text and the exposition too, and at least one must have
 * samples.  With @save, the export and the raw file go to the artifacts.
 */
static void check_values(struct vm *vm, int nfd, const char *what, bool hists,
			 bool save)
{
	static struct stats_blob native;
	const struct kvm_stats_header *h;
	char cmd[256], fam[128], line[256], *export_out, *show_out;
	int i, rc, scalars = 0, bad_show = 0, bad_json = 0, bad_prom = 0;
	int nhist = 0, bad_hshow = 0, bad_hprom = 0;
	unsigned long long samples = 0;

	stats_read_all(nfd, &native, "native vCPU 0 stats");
	h = stats_header(&native);

	/* Text. */
	snprintf(cmd, sizeof(cmd), TOOL " show %d:%d --vcpu 0", getpid(),
		 vm->fd);
	rc = run(cmd);
	tap_eq(rc, 0, "%s: show %d:%d --vcpu 0 exits 0", what, getpid(),
	       vm->fd);
	show_out = strdup(out);
	for (i = 0; i < (int)h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(&native, i);
		uint64_t v = stats_value(&native, d->name, 0);
		char *p;

		if (is_hist(d))
			continue;
		scalars++;
		snprintf(line, sizeof(line), "\n  %s ", d->name);
		p = strstr(out, line);
		if (p)
			p += strlen(line) + strspn(p + strlen(line), " ");
		if ((d->flags & KVM_STATS_UNIT_MASK) ==
		    KVM_STATS_UNIT_BOOLEAN) {
			const char *want = v ? "yes" : "no";

			if (!p || strncmp(p, want, strlen(want))) {
				tap_diag("show: %s: want %s", d->name, want);
				bad_show++;
			}
		} else if (!p || strtoull(p, NULL, 10) != v) {
			tap_diag("show: %s: want %llu", d->name,
				 (unsigned long long)v);
			bad_show++;
		}
	}
	tap_check(!bad_show && scalars > 0,
		  "%s: show: %d scalar values equal the native fd's", what,
		  scalars);
	if (hists) {
		for (i = 0; i < (int)h->num_desc; i++) {
			const struct kvm_stats_desc *d = stats_desc(&native, i);
			unsigned long long total = 0;

			if (!is_hist(d))
				continue;
			nhist++;
			bad_hshow +=
				check_show_hist(show_out, &native, d, &total);
			if (total)
				tap_diag("%s: %s has %llu samples", what,
					 d->name, total);
			samples += total;
		}
		tap_check(
			nhist > 0 && samples > 0,
			"%s: the vCPU's histograms have samples (%llu in %d histograms)",
			what, samples, nhist);
		tap_check(
			!bad_hshow,
			"%s: show: every bucket of the %d histograms (totals, [lo, hi) bounds, counts) equals the native fd's",
			what, nhist);
	}
	free(show_out);

	/* JSON. */
	snprintf(cmd, sizeof(cmd), TOOL " show %d:%d --vcpu 0 --json", getpid(),
		 vm->fd);
	rc = run(cmd);
	tap_check(rc == 0 && json_valid(out),
		  "%s: show --json exits 0 and parses as JSON", what);
	{
		char comm[64] = "", want[160];
		FILE *f = fopen("/proc/self/comm", "re");

		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		snprintf(
			want, sizeof(want),
			"\"id\": \"%s\", \"name\": \"\", \"comm\": \"%s\", \"uuid\": \"\", ",
			stats_id(&native), comm);
		tap_check(
			comm[0] && strstr(out, want),
			"%s: show --json names the VMM's comm (%s), no guest name or UUID",
			what, comm);
	}
	for (i = 0; i < (int)h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(&native, i);
		char want[2048];
		size_t n;
		int b;

		n = (size_t)snprintf(want, sizeof(want),
				     "{\"name\": \"%s\", \"value\": ", d->name);
		if (is_hist(d)) {
			n += (size_t)snprintf(want + n, sizeof(want) - n, "[");
			for (b = 0; b < d->size; b++)
				n += (size_t)snprintf(
					want + n, sizeof(want) - n, "%s%llu",
					b ? ", " : "",
					(unsigned long long)stats_value(
						&native, d->name, b));
			snprintf(want + n, sizeof(want) - n, "]}");
		} else if ((d->flags & KVM_STATS_UNIT_MASK) ==
			   KVM_STATS_UNIT_BOOLEAN) {
			snprintf(want + n, sizeof(want) - n, "%s}",
				 stats_value(&native, d->name, 0) ? "true" :
								    "false");
		} else {
			snprintf(want + n, sizeof(want) - n, "%llu}",
				 (unsigned long long)stats_value(&native,
								 d->name, 0));
		}
		if (!strstr(out, want)) {
			tap_diag("json: missing %s", want);
			bad_json++;
		}
	}
	tap_check(
		!bad_json,
		"%s: show --json: all %u values (histograms bucket 0 first) equal the native fd's",
		what, h->num_desc);

	/* Prometheus. */
	/* Every series: per vCPU, with the histograms (not the default). */
	rc = run(TOOL " export --per vcpu --collector.histograms");
	tap_check(rc == 0 &&
			  strstr(out, "# TYPE kvm_vcpu_exits_total counter\n"),
		  "%s: export exits 0 and has kvm_vcpu_exits_total", what);
	export_out = strdup(out);
	for (i = 0; i < (int)h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(&native, i);
		uint64_t v = stats_value(&native, d->name, 0), got;
		char *p;

		if (is_hist(d))
			continue;
		prom_family(d, fam, sizeof(fam));
		snprintf(line, sizeof(line), "\n%s{vm=\"%d:%d\",vcpu=\"0\"} ",
			 fam, getpid(), vm->fd);
		p = strstr(export_out, line);
		if (!p) {
			tap_diag("export: no line %s", line + 1);
			bad_prom++;
			continue;
		}
		p += strlen(line);
		if ((d->flags & KVM_STATS_UNIT_MASK) ==
		    KVM_STATS_UNIT_SECONDS) {
			if (!seconds_to_ns(p, &got) || got != v) {
				tap_diag("export: %s: want %llu ns", fam,
					 (unsigned long long)v);
				bad_prom++;
			}
		} else if ((d->flags & KVM_STATS_UNIT_MASK) ==
			   KVM_STATS_UNIT_BOOLEAN) {
			if (strtoull(p, NULL, 10) != (v ? 1 : 0))
				bad_prom++;
		} else if (strtoull(p, NULL, 10) != v) {
			tap_diag("export: %s: want %llu", fam,
				 (unsigned long long)v);
			bad_prom++;
		}
	}
	tap_check(
		!bad_prom,
		"%s: export: %d scalar values equal the native fd's (ns exact as seconds)",
		what, scalars);
	{
		/* The VM's info series: command name and KVM's id string. */
		char comm[64] = "", want[256];
		FILE *cf = fopen("/proc/self/comm", "re");

		if (cf && fgets(comm, sizeof(comm), cf))
			comm[strcspn(comm, "\n")] = '\0';
		if (cf)
			fclose(cf);
		snprintf(
			want, sizeof(want),
			"\nkvm_vm_info{pid=\"%d\",fd=\"%d\",vm=\"%d:%d\",uid=\"%u\",comm=\"%s\",id=\"kvm-%d\"} 1\n",
			getpid(), vm->fd, getpid(), vm->fd, geteuid(), comm,
			getpid());
		tap_check(
			strstr(export_out, want) != NULL,
			"%s: export: kvm_vm_info{pid, fd, vm, uid, comm, id} of the VM is 1",
			what);
		if (!strstr(export_out, want))
			tap_diag("no line %s", want + 1);
	}
	if (hists) {
		char labels[256];

		snprintf(labels, sizeof(labels), "{vm=\"%d:%d\",vcpu=\"0\"",
			 getpid(), vm->fd);
		for (i = 0; i < (int)h->num_desc; i++) {
			const struct kvm_stats_desc *d = stats_desc(&native, i);

			if (is_hist(d))
				bad_hprom += check_prom_hist(
					export_out, &native, d, labels);
		}
		tap_check(
			!bad_hprom,
			"%s: export: every bucket of the %d histograms (cumulative, le = hi - 1 in seconds, +Inf, _count) equals the native fd's",
			what, nhist);
	}
	{
		/* --per vm: the vCPU statistics summed over the VM's vCPU(s). */
		uint64_t v = stats_value(&native, STAT_IO_EXITS, 0);

		rc = run(TOOL " export --per vm -f '^" STAT_IO_EXITS "$'");
		snprintf(line, sizeof(line),
			 "\nkvm_vcpu_" STAT_IO_EXITS
			 "_total{vm=\"%d:%d\"} %llu\n",
			 getpid(), vm->fd, (unsigned long long)v);
		tap_check(rc == 0 && strstr(out, line) &&
				  !strstr(out, "vcpu=\""),
			  "%s: export --per vm: " STAT_IO_EXITS
			  " of the VM's vCPU summed, no vcpu label (%llu)",
			  what, (unsigned long long)v);
	}
	if (!save) {
		free(export_out);
		return;
	}
	save_artifact("metrics.prom", export_out, strlen(export_out));
	save_artifact("vcpu0.stats", native.data, native.size);
	{
		/*
		 * The capture's size and families as written here, for the
		 * host (tests/host/promtool) to refuse an empty or cut one.
		 */
		const char *p = export_out;
		int types = 0;

		for (; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
			types += !strncmp(p, "# TYPE ", 7);
		snprintf(line, sizeof(line),
			 "pid=%d\nfd=%d\nvcpu=0\nid=%s\nbytes=%zu\ntypes=%d\n",
			 getpid(), vm->fd, stats_id(&native),
			 strlen(export_out), types);
	}
	save_artifact("target.txt", line, strlen(line));
	free(export_out);
}

/* The RATE/s column of "<obj> <stat> <total> <rate>" in the last report. */
static bool top_rate(const char *text, const char *obj, const char *stat,
		     double *rate)
{
	const char *last = text, *p;
	char key[128];
	bool found = false;

	while ((p = strstr(last + 1, "# kvmstats top ")))
		last = p;
	snprintf(key, sizeof(key), "\n%s ", obj);
	for (p = strstr(last, key); p; p = strstr(p + 1, key)) {
		char o[64], s[64];
		unsigned long long total;

		if (sscanf(p + 1, "%63s %63s %llu %lf", o, s, &total, rate) ==
			    4 &&
		    !strcmp(s, stat)) {
			found = true;
			break;
		}
	}
	return found;
}

static void check_top(struct vm *halted, struct vm *running)
{
	char cmd[256], obj[64];
	double rate = -1;
	bool found;
	int rc;

	snprintf(cmd, sizeof(cmd),
		 TOOL " top --batch -n 2 -d 1 --per vcpu -f '^" STAT_IO_EXITS
		      "$' %d",
		 getpid());
	rc = run(cmd);
	tap_eq(rc, 0, "top --batch -n 2 exits 0");
	snprintf(obj, sizeof(obj), "%d:%d/0", getpid(), running->fd);
	found = top_rate(out, obj, STAT_IO_EXITS, &rate);
	tap_check(found && rate > 0,
		  "top --batch: the running vCPU's " STAT_IO_EXITS
		  " rate is above 0 (%.1f/s)",
		  rate);
	rate = -1;
	snprintf(obj, sizeof(obj), "%d:%d/0", getpid(), halted->fd);
	found = top_rate(out, obj, STAT_IO_EXITS, &rate);
	tap_check(found && rate == 0,
		  "top --batch: the halted vCPU's " STAT_IO_EXITS
		  " rate is 0 (%.1f/s)",
		  rate);
	if (tap_failures())
		tap_diag("top output:\n%s", out);

	/*
	 * The host view (the default) of this process's two VMs: one row of
	 * io_exits, their sum, moving with the running vCPU.
	 */
	snprintf(cmd, sizeof(cmd),
		 TOOL " top -1 -d 1 -p %d -f '^" STAT_IO_EXITS "$'", getpid());
	rc = run(cmd);
	{
		unsigned long long total = 0;
		const char *row = strstr(out, "\n" STAT_IO_EXITS " ");

		rate = -1;
		found = row && sscanf(row, " " STAT_IO_EXITS " %llu %lf",
				      &total, &rate) == 2;
		tap_check(
			rc == 0 && found && rate > 0 &&
				total > GUEST_IO_COUNT &&
				strstr(out, " VMs 2 exited 0 view host "),
			"top -1 -p PID: the host view sums both VMs' " STAT_IO_EXITS
			" (%llu, %.1f/s)",
			total, rate);
	}
	/* kvm_stat's log: the events of each interval. */
	snprintf(cmd, sizeof(cmd),
		 TOOL " top -l -n 2 -d 0.5 -p %d:%d -f '^(" STAT_IO_EXITS
		      "|" STAT_END_EXITS ")$'",
		 getpid(), running->fd);
	rc = run(cmd);
	{
		long long io[2] = { -1, -1 }, halts[2] = { -1, -1 };
		const char *p = strchr(out, '\n');
		int k;

		for (k = 0; k < 2 && p; k++, p = strchr(p + 1, '\n'))
			if (sscanf(p + 1, "%*s %*s %lld %lld", &halts[k],
				   &io[k]) != 2)
				break;
		tap_check(rc == 0 && !strncmp(out, "time ", 5) && io[0] > 0 &&
				  io[1] > 0 && halts[0] == 0 && halts[1] == 0,
			  "top -l: the running vCPU's " STAT_IO_EXITS
			  " in each interval (%lld, %lld), no halts",
			  io[0], io[1]);
	}
	if (tap_failures())
		tap_diag("top output:\n%s", out);
}

/* Wait up to @secs for @needle in file @path. */
static bool wait_for(const char *path, const char *needle, int secs)
{
	static char buf[OUT_MAX];
	int i;

	for (i = 0; i < secs * 10; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = '\0';
			if (strstr(buf, needle))
				return true;
		}
		msleep(100);
	}
	return false;
}

static void check_top_lifecycle(void)
{
	const char *path = "/tmp/kvmstats-top.txt";
	/* Fault 70-tool-top-exit: an interval top refuses (exit 2). */
	const char *interval = test_fault("70-tool-top-exit") ? "0" : "0.5";
	struct child_vmm c;
	char needle[64];
	pid_t top;
	int st;

	top = fork();
	if (top == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		/* Reports to a file until stopped (--batch is one report). */
		execl(TOOL, "kvmstats", "top", "-d", interval, "--per", "vm",
		      "-f", "^exits$", (char *)NULL);
		_exit(127);
	}
	msleep(1200);
	child_vmm_start(&c, 1, NULL, 3);
	snprintf(needle, sizeof(needle), "\n%d:%d ", c.info.pid, c.info.vm_fd);
	tap_check(wait_for(path, needle, 20),
		  "top: a VM started after top appears in it");
	child_vmm_close_fds(&c);
	child_vmm_kill(&c);
	snprintf(needle, sizeof(needle), "\n%d:%d (exited) ", c.info.pid,
		 c.info.vm_fd);
	tap_check(wait_for(path, needle, 20),
		  "top: the VM is marked (exited) once its process is gone");
	kill(top, SIGTERM);
	waitpid(top, &st, 0);
	tap_check(
		WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"top (reports to a file) ends cleanly on SIGTERM: exit 0 (%s %d)",
		WIFEXITED(st) ? "status" : "signal",
		WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/*
 * Whether this guest has loopback networking at all, asked of the kernel
 * with a listener of our own: only without it may an exporter's test skip.
 */
static bool loopback_works(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l, c = -1, s = -1;
	bool ok;

	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ok = l >= 0 && !bind(l, (struct sockaddr *)&a, sizeof(a)) &&
	     !listen(l, 1) && !getsockname(l, (struct sockaddr *)&a, &len);
	if (ok) {
		c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ok = c >= 0 && !connect(c, (struct sockaddr *)&a, sizeof(a));
	}
	if (ok) {
		s = accept(l, NULL, NULL);
		ok = s >= 0;
	}
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	if (l >= 0)
		close(l);
	return ok;
}

/*
 * Waits up to @secs for child @pid; SIGTERMs it (and waits) if it has not
 * exited by then.  Describes its end in @how; true if it exited 0 by itself.
 */
static bool reap_exporter(pid_t pid, int secs, char *how, size_t len)
{
	bool killed = false;
	int st = 0, i;

	for (i = 0; waitpid(pid, &st, WNOHANG) == 0; i++) {
		if (i >= secs * 10) {
			killed = true;
			kill(pid, SIGTERM);
			waitpid(pid, &st, 0);
			break;
		}
		msleep(100);
	}
	if (killed)
		snprintf(how, len,
			 "still running after %d s; on SIGTERM: ", secs);
	else
		how[0] = '\0';
	snprintf(how + strlen(how), len - strlen(how), "%s %d",
		 WIFEXITED(st) ? "exit status" : "signal",
		 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return !killed && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/*
 * @argv as uid and gid 65534 with no groups, its stderr (and with
 * @with_stdout its stdout too) into out[]; its exit status.
 * /dev/kvmstats is root:root 0600 in the guest (no udev).
 */
static int run_as_nobody(char *const argv[], bool with_stdout)
{
	size_t n = 0;
	ssize_t r;
	int p[2], st;
	pid_t pid;

	out[0] = '\0';
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		if (with_stdout)
			dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(125);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while (n + 1 < sizeof(out) &&
	       (r = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * Permission denied on the device names its owner, mode and the udev
 * rule; the exporter, not allowed to read it, serves
 * kvmstats_exporter_scrape_success 0 and says why, once.
 */
static void check_no_permission(void)
{
	char *list[] = { TOOL, "list", NULL };
	char *exp[] = { TOOL,
			"export",
			"--listen",
			"127.0.0.1:9479",
			"--test.exit-after-connections",
			"2",
			NULL };
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(9479),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[65536], how[96];
	size_t n = 0;
	ssize_t r;
	int rc, s = -1, i;
	bool exited;
	pid_t srv;

	rc = run_as_nobody(list, false);
	tap_check(
		rc == 4 && strstr(out, "/dev/kvmstats: Permission denied") &&
			strstr(out, "belongs to the group ") &&
			strstr(out, ", mode 0600") &&
			strstr(out, "udev rule 60-kvmstats.rules"),
		"list as an unprivileged user: exit 4 (%d), the message names the group, mode and udev rule",
		rc);
	if (rc != 4 || !strstr(out, "udev rule 60-kvmstats.rules") ||
	    !strstr(out, "belongs to the group ") ||
	    !strstr(out, "/dev/kvmstats: Permission denied"))
		tap_diag("as nobody, list said: %s", out);

	if (system("ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null")) {
		/* The loopback may already be up. */
	}
	/* Fault 70-tool-unpriv-exit: the exporter waits for a third client. */
	if (test_fault("70-tool-unpriv-exit"))
		exp[5] = "3";
	srv = fork();
	if (srv == 0) {
		char *const *argv = exp;
		int fd = open("/tmp/unpriv-exporter.log",
			      O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0 || setgroups(0, NULL) ||
		    setgid(65534) || setuid(65534))
			_exit(125);
		execv(argv[0], argv);
		_exit(127);
	}
	for (i = 0; i < 50; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(s);
		s = -1;
		msleep(100);
	}
	if (s >= 0 && write(s, "GET /metrics HTTP/1.0\r\n\r\n", 25) == 25)
		while (n + 1 < sizeof(buf) &&
		       (r = read(s, buf + n, sizeof(buf) - 1 - n)) > 0)
			n += (size_t)r;
	buf[n] = '\0';
	if (s >= 0)
		close(s);
	/* The second connection ends it. */
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)))
		kill(srv, SIGTERM);
	close(s);
	exited = reap_exporter(srv, 10, how, sizeof(how));
	tap_check(
		!strncmp(buf, "HTTP/1.1 200 OK", 15) &&
			strstr(buf, "\nkvmstats_exporter_scrape_success 0\n") &&
			!strstr(buf, "\nkvm_vcpu_"),
		"export --listen without permission on the device keeps serving: 200, kvmstats_exporter_scrape_success 0, no KVM series");
	tap_check(exited,
		  "... and exits 0 after --test.exit-after-connections 2 (%s)",
		  how);
	rc = run("cat /tmp/unpriv-exporter.log");
	tap_check(rc == 0 && strstr(out, "level=error") &&
			  strstr(out, "cannot read the VMs") &&
			  strstr(out, "Permission denied") &&
			  strstr(out, "udev rule"),
		  "... and logs why, at error, with the udev rule");
	if (!strstr(out, "udev rule"))
		tap_diag("%s", out);
}

/*
 * Which path the tool takes (--version's second line), and why: the module
 * where the kernel refuses KVM_GET_STATS_FD to other processes (every
 * stock kernel, with the device), the native path where there is no
 * device (the native configuration, whose kernel allows it).
 */
static void check_path(void)
{
	int rc = run(TOOL " --version");
	const char *line = strchr(out, '\n');

	line = line ? line + 1 : "";
	if (native)
		tap_check(
			rc == 0 && !strncmp(line, "stats path: native (", 20),
			"--version: the native path, without /dev/kvmstats (%.*s)",
			(int)strcspn(line, "\n"), line);
	else
		tap_check(
			rc == 0 && !strncmp(line, "stats path: module (", 20) &&
				strstr(line,
				       "the kernel refuses KVM_GET_STATS_FD to other processes"),
			"--version: the module, the kernel asked and refusing other processes (%.*s)",
			(int)strcspn(line, "\n"), line);
}

/*
 * The native path's privilege: ptrace rights over each VMM.  As nobody
 * (no CAP_SYS_PTRACE, another user than this VMM's), it lists none of
 * root's VMs and cannot open one.
 */
static void check_native_unprivileged(struct vm *vm)
{
	char pidfd[32];
	char *list[] = { "/bin/env", "KVMSTATS_PATH=native", TOOL, "list",
			 NULL };
	char *show[] = { "/bin/env", "KVMSTATS_PATH=native",
			 TOOL,	     "show",
			 pidfd,	     NULL };
	char line[64];
	int rc;

	snprintf(pidfd, sizeof(pidfd), "%d:%d", getpid(), vm->fd);
	snprintf(line, sizeof(line), "\n%-8d %5d ", getpid(), vm->fd);
	rc = run_as_nobody(list, true);
	tap_check(
		rc == 0 && !strstr(out, line),
		"native list as an unprivileged user: exit 0 (%d), none of root's VMs",
		rc);
	rc = run_as_nobody(show, true);
	tap_check(
		rc != 0 && strstr(out, "kvmstats: "),
		"native show of root's VM as an unprivileged user fails, and says so (%d: %.*s)",
		rc, (int)strcspn(out, "\n"), out);
}

static void check_errors(struct vm *vm)
{
	char cmd[256];

	tap_eq(run(TOOL " show 999999 2>/dev/null"), 5,
	       "show of an unknown VM exits 5");
	tap_eq(run(TOOL " show no-such-guest 2>/dev/null"), 5,
	       "show of an unknown guest name exits 5");
	snprintf(cmd, sizeof(cmd), TOOL " show %d:%d --vcpu 9 2>/dev/null",
		 getpid(), vm->fd);
	tap_eq(run(cmd), 5, "show of a vCPU the VM lacks exits 5");
	tap_eq(run(TOOL " show -f '(' 2>/dev/null"), 2, "a bad regex exits 2");
	tap_eq(run(TOOL " frobnicate 2>/dev/null"), 2,
	       "an unknown command exits 2");
	tap_eq(run(TOOL " show --frob 2>&1"), 2, "an unknown option exits 2");
	tap_check(
		!strncmp(out, "kvmstats: show: unknown option '--frob'", 39) &&
			strchr(out, '\n') == out + strlen(out) - 1,
		"an unknown option is one line starting kvmstats:");
	tap_eq(run(TOOL " top -d 0 2>/dev/null"), 2, "a bad interval exits 2");
	tap_eq(run(TOOL " list --help"), 0, "list --help exits 0");
	run(TOOL " list");
	snprintf(cmd, sizeof(cmd), "\n%-8d %5d %6u  ", getpid(), vm->fd, 1u);
	tap_check(strstr(out, cmd) != NULL,
		  "list shows this process's VM with 1 vCPU");
}

static void check_http(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(9477) };
	char buf[4096], how[96];
	size_t n = 0;
	pid_t srv;
	int s, i;
	ssize_t r;

	if (system("ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null")) {
		/* The loopback may already be up; carry on. */
	}
	if (!loopback_works()) {
		tap_skip(
			"no loopback networking in this guest (a listener of our own on 127.0.0.1 takes no connection)",
			"export --listen serves /metrics");
		return;
	}
	srv = fork();
	if (srv == 0) {
		/* Fault 70-tool-exporter: an exporter that dies at once. */
		if (test_fault("70-tool-exporter"))
			_exit(1);
		execl(TOOL, "kvmstats", "export", "--listen", "127.0.0.1:9477",
		      "--test.exit-after-connections", "2", (char *)NULL);
		_exit(127);
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* A client that connects and hangs up at once. */
	for (i = 0, s = -1; i < 50; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(s, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(s);
		s = -1;
		msleep(100);
	}
	if (s < 0) {
		/* The loopback works: the exporter is at fault. */
		reap_exporter(srv, 0, how, sizeof(how));
		tap_fail(
			"export --listen serves /metrics: it took no connection on 127.0.0.1:9477 within 5 s (%s)",
			how);
		return;
	}
	close(s);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&a, sizeof(a))) {
		tap_fail("export --listen survives a client that hangs up");
		reap_exporter(srv, 0, how, sizeof(how));
		tap_diag("the exporter: %s", how);
		close(s);
		return;
	}
	tap_pass("export --listen survives a client that hangs up");
	if (write(s, "GET /metrics HTTP/1.0\r\n\r\n", 25) != 25)
		tap_diag("short write to the exporter");
	while (n + 1 < sizeof(buf) &&
	       (r = read(s, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(s);
	/* An HTTP/1.1 server answers a 1.0 request with its own version. */
	tap_check(!strncmp(buf, "HTTP/1.1 200 OK", 15) &&
			  strstr(buf, "# TYPE kvm_"),
		  "export --listen serves /metrics");
	tap_check(
		reap_exporter(srv, 10, how, sizeof(how)),
		"export --listen exits 0 after --test.exit-after-connections (%s)",
		how);
}

int main(void)
{
	struct vm *halted, *running, *hvm;
	int dev, nfd, i;

	tap_init();
	if (access(TOOL, X_OK)) {
		tap_skip("no " TOOL " in the guest", "kvmstats tool tests");
		return tap_exit();
	}
	/*
	 * No /dev/kvmstats: the native configuration (a kernel with the
	 * upstream/ series, no module), where the tool must take the native
	 * path.  Everything below then checks that path against KVM's own
	 * fds, as it checks the module's elsewhere.
	 */
	native = access("/dev/kvmstats", F_OK) != 0;
	if (!native) {
		dev = kvmstats_open();
		close(dev);
	}

	/*
	 * No VM yet: the module's own tables (KVMSTATS_GET_SCHEMA_FD); the
	 * native path has no tables without a VM.
	 */
	if (native) {
		tap_eq(run(TOOL " schema 2>&1"), 5,
		       "schema without a VM exits 5");
		tap_check(
			!strcmp(out,
				"kvmstats: schema: no VM this process may inspect to read the descriptors from (without the module, KVM gives them only with a VM: start one)\n"),
			"schema without a VM says why, on one line");
	} else {
		tap_eq(run(TOOL " schema 2>&1"), 0,
		       "schema without a VM exits 0");
		tap_check(
			strstr(out, "from the module's tables") &&
				strstr(out, "remote_tlb_flush") &&
				strstr(out, "halt_wait_hist"),
			"schema without a VM lists the module's VM and vCPU tables");
	}

	halted = vm_create(1, NULL);
	vm_run_all_to_hlt(halted, GUEST_IO_COUNT, 17);
	/* With a VM to ask: the tool asks the kernel, it does not guess. */
	check_path();
	nfd = vcpu_get_stats_fd(halted->vcpus[0]);
	check_values(halted, nfd, "halted vCPU", false, false);
	close(nfd);
	check_errors(halted);
	if (native)
		check_native_unprivileged(halted);
	else
		check_no_permission();

	/*
	 * Histograms with data: an in-kernel irqchip VM whose vCPU sleeps in
	 * the kernel's halt wait, woken by signals (halt_wait_ns and
	 * halt_wait_hist).  Its export and raw file are the artifacts the
	 * host's promtool check works on.
	 */
	hvm = vm_create_irqchip(1);
	nfd = vcpu_get_stats_fd(hvm->vcpus[0]);
	vcpu_halt_start(hvm->vcpus[0]);
	for (i = 0; i < 12; i++)
		vcpu_halt_wake(hvm->vcpus[0]);
	/*
	 * Compare only once the vCPU is out of KVM_RUN: asleep in the halt
	 * wait it is not quiescent (a stray wake-up moves halt_wakeup and
	 * host_state_reload between the native read and the tool's, seen on
	 * 6.1).  Its histograms keep their samples.
	 */
	vcpu_thread_stop(hvm->vcpus[0]);
	check_values(hvm, nfd, "irqchip vCPU after halts in the kernel", true,
		     true);
	close(nfd);
	vm_free(hvm);

	running = vm_create(1, NULL);
	vcpu_load_prog(running->vcpus[0], GUEST_IO_LOOP, 0);
	vcpu_thread_start(running->vcpus[0]);
	vcpu_thread_wait_running(running->vcpus[0]);
	check_top(halted, running);
	vcpu_thread_stop(running->vcpus[0]);

	check_top_lifecycle();
	check_http();

	vm_free(running);
	vm_free(halted);
	return tap_exit();
}
