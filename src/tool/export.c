// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats export: Prometheus text exposition, on stdout or over HTTP(S).
 *
 * What is scraped and how it is rendered lives behind one function,
 * scrape() (see its comment), which the HTTP server (http.c) calls from
 * one thread at a time, for every request waiting when a scrape starts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "tool.h"

static int self_metrics(struct scrape *s, double t0, unsigned int vms,
			size_t vcpus);

/*
 * The vCPU statistics the default (PER_AUTO) serves per vCPU: the exit
 * count and the halt-polling ones, which every architecture's KVM has
 * (kvm_vcpu_stat_generic, and `exits` on x86 and arm64).  A per-vCPU
 * exit storm or a vCPU that wastes its halt polling shows in these; every
 * other vCPU statistic is summed per VM.  A name a kernel lacks is simply
 * not there.
 */
static const char *const per_vcpu_stats[] = {
	"exits",
	"blocking",
	"halt_successful_poll",
	"halt_attempted_poll",
	"halt_poll_invalid",
	"halt_wakeup",
	"halt_poll_success_ns",
	"halt_poll_fail_ns",
	"halt_wait_ns",
};

bool export_per_vcpu_stat(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(per_vcpu_stats) / sizeof(per_vcpu_stats[0]); i++)
		if (!strcmp(name, per_vcpu_stats[i]))
			return true;
	return false;
}

/* The renderer's question: does object @o get series of statistic @st? */
static bool keep_stat(void *ctx, const struct obj *o,
		      const struct kvmstats_stat *st)
{
	const struct export_select *sel = ctx;
	bool hist = kvmstats_is_hist(st);

	if (sel->exclude && name_matches(sel->exclude, st->name))
		return false;
	if (hist && !(sel->collectors & COLL_HISTOGRAMS))
		return false;
	if (o->vcpu == -1)
		return sel->collectors & COLL_VM;
	if (!(sel->collectors & COLL_VCPU))
		return false;
	if (sel->per != PER_AUTO)
		return true;
	/* Each statistic per vCPU or summed per VM, never both. */
	return (o->vcpu == OBJ_VCPUS) !=
	       (!hist && export_per_vcpu_stat(st->name));
}

int scrape_init(struct scrape *s, struct source *src,
		const struct export_select *sel)
{
	memset(s, 0, sizeof(*s));
	s->src = src;
	s->sel = *sel;
	s->cache = prom_cache_new();
	if (!s->cache)
		return -ENOMEM;
	prom_cache_set_keep(s->cache, keep_stat, &s->sel);
	prom_cache_set_vm_labels(s->cache, sel->vm_labels);
	return 0;
}

void scrape_fini(struct scrape *s)
{
	prom_cache_free(s->cache);
	free(s->objs);
	free(s->thr);
	if (s->ready)
		host_fini(&s->host);
	memset(s, 0, sizeof(*s));
}

/* Room for @more objects after the first @n. */
static int objs_room(struct scrape *s, size_t n, size_t more)
{
	struct obj_thread *t;
	size_t room;
	struct obj *o;

	if (n + more <= s->objs_room)
		return 0;
	room = 2 * (n + more) + 16;
	o = realloc(s->objs, room * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->objs = o;
	t = realloc(s->thr, room * sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->thr = t;
	s->objs_room = room;
	return 0;
}

/* A missing or unreadable source: scraped as a failure, not an error. */
static bool source_unavailable(int err)
{
	return err == -ENOENT || err == -ENOTDIR || err == -ENODEV ||
	       err == -ENXIO || err == -EACCES || err == -EPERM;
}

/*
 * Note the state of the source (@err 0: readable), and log a change: an
 * exporter whose device is missing keeps serving, and says so once.
 */
static void source_state(struct scrape *s, int err, const char *what)
{
	if (err == s->src_err || !s->serving) {
		s->src_err = err;
		return;
	}
	if (err && source_unavailable(err)) {
		char why[1024];

		if (s->src->dir)
			snprintf(why, sizeof(why), "KVMSTATS_STATS_DIR %s: %s",
				 s->src->dir, strerror(-err));
		else
			device_error(err, why, sizeof(why));
		logmsg(LOG_ERROR,
		       "export: cannot read the VMs, serving kvmstats_exporter_scrape_success 0 until it can: %s",
		       why);
	} else if (err) {
		logmsg(LOG_ERROR, "export: %s: %s", what, strerror(-err));
	} else if (s->src_err) {
		logmsg(LOG_INFO, "export: the VMs can be read again (%s)",
		       what);
	}
	s->src_err = err;
	snprintf(s->src_what, sizeof(s->src_what), "%s", what);
}

/* Open the source and follow its VMs, once it can be opened. */
static int scrape_ready(struct scrape *s)
{
	int err;

	if (s->ready)
		return 0;
	if (s->src->devfd < 0 && !s->src->dir) {
		err = source_open(s->src);
		if (err)
			return err;
	}
	err = host_init(&s->host, s->src);
	if (err) {
		host_fini(&s->host);
		return err;
	}
	s->host.fd_budget = s->host.fd_budget > s->fd_reserve ?
				    s->host.fd_budget - s->fd_reserve :
				    0;
	s->ready = true;
	return 0;
}

/*
 * The seam between what is scraped and how it is served: list the VMs
 * again, sample every VM and vCPU, and render one complete exposition
 * (the KVM families, then the exporter's own), *@text of *@len bytes.
 * A source that is missing or unreadable (no /dev/kvmstats, permission
 * denied) is not an error: the exposition then has only the exporter's
 * own families, kvmstats_exporter_scrape_success 0 among them.  Else 0,
 * or -errno when nothing could be listed or memory ran out; then *@text
 * is a line saying what failed (s->err_text).  VMs and vCPUs that could
 * not be opened or read are left out of the text and counted in it,
 * never served with old values.
 *
 * Not thread-safe: @s holds the followed VMs, the rendering cache and the
 * output buffer.  Callers on several threads serialize scrape() with a
 * mutex of their own.  *@text stays valid until the next scrape() or
 * scrape_fini() on @s: copy it before letting go of the mutex.
 */
int scrape(struct scrape *s, const char **text, size_t *len)
{
	struct host *h = &s->host;
	const char *what = s->src->dir ?
				   "listing the VMs of KVMSTATS_STATS_DIR" :
			   s->src->native ? "listing the VMs (no module)" :
					    "listing the VMs of /dev/kvmstats";
	bool vcpu_objs =
		     (s->sel.collectors & COLL_VCPU) && s->sel.per != PER_VM,
	     sum_objs =
		     (s->sel.collectors & COLL_VCPU) && s->sel.per != PER_VCPU;
	double t0 = now_mono();
	size_t i, n = 0, vcpus = 0;
	unsigned int c, vms = 0;
	int err;

	*text = s->err_text;
	*len = 0;
	err = scrape_ready(s);
	if (err)
		what = "opening /dev/kvmstats";
	if (!err)
		err = host_refresh(h);
	if (!err)
		host_drop_exited(h);
	if (!err) {
		what = "reading the VMs' statistics";
		err = host_sample(h);
	}
	if (err && source_unavailable(err)) {
		source_state(s, err, what);
		prom_cache_render(s->cache, NULL, 0, s->sel.include, text, len);
		goto self;
	}
	if (err) {
		source_state(s, err, what);
		snprintf(s->err_text, sizeof(s->err_text),
			 "kvmstats: scrape failed: %s%s%s: %s\n", what,
			 s->src->dir ? " " : "", s->src->dir ? s->src->dir : "",
			 kvmstats_strerror(err));
		*len = strlen(s->err_text);
		return err;
	}
	source_state(s, 0, source_name(s->src));
	if (h->gen != s->cache_gen) {
		/* Files were freed and opened: their addresses may be reused. */
		prom_cache_reset(s->cache);
		s->cache_gen = h->gen;
	}
	for (i = 0; i < h->nvms; i++) {
		struct vmrec *v = &h->vms[i];
		struct obj o = { .pid = v->pid,
				 .fd = v->fd,
				 .name = identity_vm_name(&v->id),
				 .ns = v->id.ns,
				 .comm = v->id.comm,
				 .uuid = v->id.uuid,
				 .has_uid = v->id.has_uid,
				 .uid = v->id.uid };
		size_t first = n, fresh = 0;
		bool summed = false;

		if (v->state != VM_OPEN)
			continue;
		if (objs_room(s, n, 2 + v->nv))
			return -ENOMEM;
		if (v->vm.fresh) {
			s->objs[n] = o;
			s->objs[n].vcpu = -1;
			s->objs[n].file = v->vm.file;
			s->objs[n++].data = v->vm.cur;
		}
		/* A VM with a vCPU left out gets no (untrue) sum. */
		if (sum_objs && !host_vcpu_sum(v)) {
			s->thr[n] = (struct obj_thread){ 0 };
			s->thr[n].has_sched = host_thread_sum(
				v, &s->thr[n].cpu_ns, &s->thr[n].wait_ns);
			s->objs[n] = o;
			s->objs[n].vcpu = OBJ_VCPUS;
			s->objs[n].file = v->vcpu[0].file;
			s->objs[n++].data = v->sum;
			summed = true;
		}
		for (c = 0; vcpu_objs && c < v->nv; c++) {
			const struct thrrec *t =
				c < v->nthr ? &v->thr[c] : NULL;

			if (!v->vcpu[c].fresh)
				continue;
			/* The host's counters (struct thrrec), when fresh. */
			s->thr[n] = (struct obj_thread){
				.tid = t ? t->tid : 0,
				.has_sched = t && t->fresh,
				.cpu_ns = t ? t->cpu_ns : 0,
				.wait_ns = t ? t->wait_ns : 0,
			};
			s->objs[n] = o;
			s->objs[n].vcpu = (int)c;
			s->objs[n].file = v->vcpu[c].file;
			s->objs[n++].data = v->vcpu[c].cur;
			fresh++;
		}
		vcpus += summed ? v->nv : fresh;
		vms += n > first;
	}
	/* s->thr may have moved while it grew: point at it now. */
	for (i = 0; i < n; i++)
		if (s->objs[i].vcpu != -1)
			s->objs[i].thread = &s->thr[i];
	s->nobjs = n;
	err = prom_cache_render(s->cache, s->objs, n, s->sel.include, text,
				len);
	if (err) {
		snprintf(
			s->err_text, sizeof(s->err_text),
			"kvmstats: scrape failed: rendering the exposition: %s\n",
			kvmstats_strerror(err));
		*text = s->err_text;
		*len = strlen(s->err_text);
		return err;
	}
self:
	err = self_metrics(s, t0, vms, vcpus);
	if (err) {
		snprintf(
			s->err_text, sizeof(s->err_text),
			"kvmstats: scrape failed: rendering the exporter's own metrics: %s\n",
			kvmstats_strerror(err));
		*text = s->err_text;
		*len = strlen(s->err_text);
		return err;
	}
	s->scrapes++;
	*text = prom_cache_text(s->cache, len);
	return 0;
}

/*
 * process_*: what Prometheus' client libraries export about a process, from
 * /proc/self: CPU time, memory, fds (open fds are this exporter's limiting
 * resource: one per VM and per vCPU), start time.
 */
static int process_metrics(struct prom_cache *c)
{
	static double start = -1;
	unsigned long long utime = 0, stime = 0, starttime = 0;
	unsigned long vsize = 0;
	long rss = 0, tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	size_t fds = 0;
	struct rlimit rl;
	char buf[1024], *p;
	struct dirent *e;
	FILE *f;
	DIR *d;

	f = fopen("/proc/self/stat", "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
			sscanf(p + 2,
			       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
			       &utime, &stime, &starttime, &vsize, &rss);
		fclose(f);
	}
	if (start < 0) {
		/* Boot time from /proc/stat's btime, plus the start in ticks. */
		unsigned long long btime = 0;

		f = fopen("/proc/stat", "re");
		while (f && fgets(buf, sizeof(buf), f))
			if (sscanf(buf, "btime %llu", &btime) == 1)
				break;
		if (f)
			fclose(f);
		start = (double)btime + (double)starttime / (double)tck;
	}
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d)))
		fds += e->d_name[0] != '.';
	if (d) {
		closedir(d);
		fds--; /* the one reading it */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_cur = 0;
	return prom_cache_printf(
		c,
		"# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
		"# TYPE process_cpu_seconds_total counter\n"
		"process_cpu_seconds_total %.2f\n"
		"# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
		"# TYPE process_resident_memory_bytes gauge\n"
		"process_resident_memory_bytes %ld\n"
		"# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
		"# TYPE process_virtual_memory_bytes gauge\n"
		"process_virtual_memory_bytes %lu\n"
		"# HELP process_open_fds Number of open file descriptors.\n"
		"# TYPE process_open_fds gauge\n"
		"process_open_fds %zu\n"
		"# HELP process_max_fds Maximum number of open file descriptors.\n"
		"# TYPE process_max_fds gauge\n"
		"process_max_fds %.17g\n"
		"# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
		"# TYPE process_start_time_seconds gauge\n"
		"process_start_time_seconds %.2f\n",
		(double)(utime + stime) / (double)tck, rss * page, vsize, fds,
		rl.rlim_cur == RLIM_INFINITY ? 1.8446744073709552e19 :
					       (double)rl.rlim_cur,
		start);
}

/* The exporter's own families, after the KVM ones. */
static int self_metrics(struct scrape *s, double t0, unsigned int vms,
			size_t vcpus)
{
	static const struct host_counts none;
	const struct host_counts *hc = s->ready ? &s->host.n : &none;
	struct prom_cache *c = s->cache;
	struct prom_skipped sk;
	int err;

	prom_cache_skipped(c, &sk);
	if (!s->sel.no_exporter_metrics) {
		/*
		 * Not in a one-shot export: node_exporter's textfile collector
		 * would find its own process_* there.
		 */
		err = s->serving ? process_metrics(c) : 0;
		if (!err)
			err = prom_cache_printf(
				c,
				"# HELP kvmstats_exporter_build_info The kvmstats exporter's release; always 1.\n"
				"# TYPE kvmstats_exporter_build_info gauge\n"
				"kvmstats_exporter_build_info{version=\"%s\",libkvmstats=\"%s\"} 1\n",
				KVMSTATS_RELEASE, kvmstats_version());
		if (err)
			return err;
	}
	return prom_cache_printf(
		c,
		"# HELP kvmstats_exporter_scrape_success 1 when this scrape could list and read the VMs, 0 when the device (or KVMSTATS_STATS_DIR) is missing or unreadable; the exporter logs why.\n"
		"# TYPE kvmstats_exporter_scrape_success gauge\n"
		"kvmstats_exporter_scrape_success %d\n"
		"# HELP kvmstats_exporter_scrape_duration_seconds Time this scrape took to list, sample and render the VMs.\n"
		"# TYPE kvmstats_exporter_scrape_duration_seconds gauge\n"
		"kvmstats_exporter_scrape_duration_seconds %.6f\n"
		"# HELP kvmstats_exporter_vms VMs with series in this scrape.\n"
		"# TYPE kvmstats_exporter_vms gauge\n"
		"kvmstats_exporter_vms %u\n"
		"# HELP kvmstats_exporter_vcpus vCPUs whose statistics are in this scrape (per VM or per vCPU).\n"
		"# TYPE kvmstats_exporter_vcpus gauge\n"
		"kvmstats_exporter_vcpus %zu\n"
		"# HELP kvmstats_exporter_left_out VMs and vCPUs listed but left out of this scrape: fd_limit (the open file limit), error (opening or reading failed).\n"
		"# TYPE kvmstats_exporter_left_out gauge\n"
		"kvmstats_exporter_left_out{target=\"vm\",reason=\"fd_limit\"} %u\n"
		"kvmstats_exporter_left_out{target=\"vcpu\",reason=\"fd_limit\"} %u\n"
		"kvmstats_exporter_left_out{target=\"vm\",reason=\"error\"} %u\n"
		"kvmstats_exporter_left_out{target=\"vcpu\",reason=\"error\"} %u\n"
		"# HELP kvmstats_exporter_read_errors_total Opens and reads of stats files that failed since the exporter started.\n"
		"# TYPE kvmstats_exporter_read_errors_total counter\n"
		"kvmstats_exporter_read_errors_total %llu\n"
		"# HELP kvmstats_exporter_stats_skipped KVM statistics left out of this scrape: unknown (not understood by libkvmstats), name_collision (another statistic has its metric name), bad_name (a metric name Prometheus rejects), conflict (its descriptor differs between VMs or vCPUs).\n"
		"# TYPE kvmstats_exporter_stats_skipped gauge\n"
		"kvmstats_exporter_stats_skipped{reason=\"unknown\"} %u\n"
		"kvmstats_exporter_stats_skipped{reason=\"name_collision\"} %u\n"
		"kvmstats_exporter_stats_skipped{reason=\"bad_name\"} %u\n"
		"kvmstats_exporter_stats_skipped{reason=\"conflict\"} %u\n",
		s->src_err ? 0 : 1, now_mono() - t0, vms, vcpus, hc->left_vms,
		hc->left_vcpus, hc->failed_vms, hc->failed_vcpus, hc->errors,
		sk.unknown, sk.collision, sk.bad_name, sk.conflict);
}

/* http.c's view of scrape(). */
static int scrape_cb(void *ctx, const char **text, size_t *len)
{
	return scrape(ctx, text, len);
}

/*
 * One scrape to standard output.  Exit status: 0 when every listed VM and
 * vCPU is in it, 9 when the open file limit left some out, 1 when an open
 * or a read failed (the rest is printed either way).
 */
/* Did the last scrape read a statistic that --filter lets through? */
static bool filter_matched(const struct scrape *sc)
{
	size_t k, i;

	for (k = 0; k < sc->nobjs; k++) {
		const struct kvmstats_file *f = sc->objs[k].file;

		for (i = 0; f && i < kvmstats_file_num_stats(f); i++)
			if (name_matches(sc->sel.include,
					 kvmstats_file_stat(f, i)->name))
				return true;
	}
	return false;
}

static int export_once(struct scrape *sc, struct source *src,
		       const char *filter_text)
{
	const struct host_counts *hc = &sc->host.n;
	const char *text;
	size_t len;
	int err, rc = EXIT_OK;

	err = scrape(sc, &text, &len);
	if (!err && sc->src_err) {
		rc = source_list_error(src, sc->src_err);
	} else if (err) {
		fputs(text, stderr);
		rc = exit_for(err);
	} else if (fwrite(text, 1, len, stdout) != len) {
		errmsg("export: writing the output: %s", strerror(errno));
		rc = EXIT_FAIL;
	} else if (hc->left_vms || hc->left_vcpus) {
		rc = EXIT_PARTIAL;
	} else if (hc->failed_vms || hc->failed_vcpus) {
		rc = EXIT_FAIL;
	} else if (sc->sel.include && sc->nobjs && !filter_matched(sc)) {
		/* Statistics were read, and none of them was asked for. */
		rc = no_match("export", "", filter_text);
	}
	scrape_fini(sc);
	source_fini(src);
	if (fflush(stdout)) {
		errmsg("export: writing the output: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return rc;
}

/* The collectors: --collector.NAME, --no-collector.NAME. */
static const struct {
	const char *name;
	unsigned int bit;
	const char *what;
} collectors[] = {
	{ "vm", COLL_VM, "VM statistics (default on)" },
	{ "vcpu", COLL_VCPU, "vCPU statistics (default on)" },
	{ "histograms", COLL_HISTOGRAMS,
	  "histograms of the above, 34 series each (default off)" },
};
#define NCOLL (sizeof(collectors) / sizeof(collectors[0]))

static void usage_export(FILE *f)
{
	size_t i;

	fputs("Usage: kvmstats export [-f REGEX] [--exclude REGEX] [--per auto|vm|vcpu]\n"
	      "                       [--[no-]collector.NAME]... [--collector.disable-defaults]\n"
	      "                       [--vm-labels LABEL,...]\n"
	      "                       [--listen ADDR:PORT | --web.systemd-socket]...\n"
	      "                       [--web.config.file FILE] [--web.telemetry-path PATH]\n"
	      "                       [--web.max-connections N] [--web.max-connections-per-client N]\n"
	      "                       [--web.max-requests N] [--web.disable-exporter-metrics]\n"
	      "                       [--log.level LEVEL] [--log.format logfmt|json]\n"
	      "Print the statistics of every VM and vCPU in the Prometheus text\n"
	      "exposition format (for node_exporter's textfile collector), or serve\n"
	      "them over HTTP or HTTPS at /metrics.\n"
	      "  -f REGEX                  only statistics whose KVM name matches\n"
	      "  --exclude REGEX           leave out statistics whose KVM name matches\n"
	      "  --per auto|vm|vcpu        vCPU statistics: exits and halt polling per vCPU,\n"
	      "                            the rest summed per VM (auto, the default), all\n"
	      "                            summed per VM, or all per vCPU\n"
	      "  --collector.NAME          turn a collector on (--no-collector.NAME: off):\n",
	      f);
	for (i = 0; i < NCOLL; i++)
		fprintf(f, "      %-22s%s\n", collectors[i].name,
			collectors[i].what);
	fputs("  --collector.disable-defaults  only the collectors turned on by name\n"
	      "  --vm-labels LABEL,...     what names a VM on its series: name (and KubeVirt's\n"
	      "                            namespace), uuid, pid, fd (default name,uuid: what a\n"
	      "                            guest keeps across restarts); vm=\"PID:FD\" is added\n"
	      "                            where they do not tell VMs apart\n"
	      "  --listen ADDR:PORT        serve (e.g. 127.0.0.1:9477, [::1]:9477, a host name's\n"
	      "                            address, or :9477 for every address); repeatable;\n"
	      "                            alias --web.listen-address\n"
	      "  --web.systemd-socket      serve the sockets systemd passes (socket activation)\n"
	      "  --web.config.file FILE    TLS and basic auth, in exporter-toolkit's format;\n"
	      "                            SIGHUP and changed files reload it\n"
	      "  --web.telemetry-path PATH where the metrics are (default /metrics)\n"
	      "  --web.max-connections N   open connections per listen address (default 512)\n"
	      "  --web.max-connections-per-client N  from one client address (default 32;\n"
	      "                            0: no limit)\n"
	      "  --web.max-requests N      /metrics requests at once, more get 503 (default 40;\n"
	      "                            0: no limit)\n"
	      "  --web.disable-exporter-metrics  no process_* or kvmstats_exporter_build_info\n"
	      "  --log.level LEVEL         debug, info (default), warn or error\n"
	      "  --log.format FORMAT       logfmt (default) or json\n"
	      "  --version                 the version, as node_exporter's --version says it\n"
	      "  --test.exit-after-connections N  (for tests) exit 0 after N connections\n",
	      f);
}

enum {
	OPT_EXCLUDE = 0x100,
	OPT_SYSTEMD,
	OPT_TELEMETRY,
	OPT_NO_EXPORTER,
	OPT_LOG_LEVEL,
	OPT_LOG_FORMAT,
	OPT_EXIT_AFTER,
	OPT_MAX_REQUESTS,
	OPT_DISABLE_DEFAULTS,
	OPT_PER_CLIENT,
	OPT_IN_FLIGHT,
	OPT_VERSION,
	OPT_VM_LABELS,
	OPT_COLL_ON = 0x200, /* + collector index */
	OPT_COLL_OFF = OPT_COLL_ON + 0x40,
};

int cmd_export(int argc, char **argv)
{
	static const struct option fixed[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "exclude", required_argument, NULL, OPT_EXCLUDE },
		{ "per", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "web.listen-address", required_argument, NULL, 'l' },
		{ "web.systemd-socket", no_argument, NULL, OPT_SYSTEMD },
		{ "web.config.file", required_argument, NULL, 'w' },
		{ "web.telemetry-path", required_argument, NULL,
		  OPT_TELEMETRY },
		{ "web.max-connections", required_argument, NULL, 'c' },
		{ "web.max-connections-per-client", required_argument, NULL,
		  OPT_PER_CLIENT },
		{ "web.max-requests", required_argument, NULL, OPT_IN_FLIGHT },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "web.disable-exporter-metrics", no_argument, NULL,
		  OPT_NO_EXPORTER },
		{ "log.level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "log.format", required_argument, NULL, OPT_LOG_FORMAT },
		{ "test.exit-after-connections", required_argument, NULL,
		  OPT_EXIT_AFTER },
		{ "max-requests", required_argument, NULL, OPT_MAX_REQUESTS },
		{ "collector.disable-defaults", no_argument, NULL,
		  OPT_DISABLE_DEFAULTS },
		{ "vm-labels", required_argument, NULL, OPT_VM_LABELS },
		{ "help", no_argument, NULL, 'h' },
	};
	struct option opts[sizeof(fixed) / sizeof(fixed[0]) + 2 * NCOLL + 1];
	char names[2 * NCOLL][48];
	struct http_opts ho = { .max_connections = 512,
				.max_per_client = 32,
				.max_in_flight = 40,
				.max_requests = -1,
				.telemetry_path = "/metrics" };
	struct export_select sel = { .per = PER_AUTO,
				     .vm_labels = VML_DEFAULT };
	unsigned int on = 0, off = 0;
	bool no_defaults = false;
	enum log_level level = LOG_INFO;
	enum log_format format = LOG_LOGFMT;
	regex_t re, ex, *filter = NULL, *exclude = NULL;
	const char *filter_text = NULL;
	struct source src;
	struct scrape sc;
	int c, err, rc = EXIT_USAGE;
	size_t i, no = 0;
	long n;
	char *end;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		opts[no++] = fixed[i];
	for (i = 0; i < NCOLL; i++) {
		snprintf(names[2 * i], sizeof(names[0]), "collector.%s",
			 collectors[i].name);
		snprintf(names[2 * i + 1], sizeof(names[0]), "no-collector.%s",
			 collectors[i].name);
		opts[no++] = (struct option){ names[2 * i], no_argument, NULL,
					      OPT_COLL_ON + (int)i };
		opts[no++] = (struct option){ names[2 * i + 1], no_argument,
					      NULL, OPT_COLL_OFF + (int)i };
	}
	opts[no] = (struct option){ 0 };

	while ((c = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
		if (c >= OPT_COLL_ON && c < OPT_COLL_ON + (int)NCOLL) {
			on |= collectors[c - OPT_COLL_ON].bit;
			off &= ~collectors[c - OPT_COLL_ON].bit;
			continue;
		}
		if (c >= OPT_COLL_OFF && c < OPT_COLL_OFF + (int)NCOLL) {
			off |= collectors[c - OPT_COLL_OFF].bit;
			on &= ~collectors[c - OPT_COLL_OFF].bit;
			continue;
		}
		switch (c) {
		case 'f':
		case OPT_EXCLUDE: {
			regex_t **slot = c == 'f' ? &filter : &exclude;

			if (*slot)
				regfree(*slot);
			*slot = NULL;
			if (compile_filter(optarg, c == 'f' ? &re : &ex))
				goto out;
			*slot = c == 'f' ? &re : &ex;
			if (c == 'f')
				filter_text = optarg;
			break;
		}
		case 'p':
			if (!strcmp(optarg, "auto"))
				sel.per = PER_AUTO;
			else if (!strcmp(optarg, "vm"))
				sel.per = PER_VM;
			else if (!strcmp(optarg, "vcpu"))
				sel.per = PER_VCPU;
			else {
				errmsg("export: --per wants auto, vm or vcpu, not '%s'",
				       optarg);
				goto out;
			}
			break;
		case 'l':
			if (ho.nlisten == HTTP_MAX_LISTEN) {
				errmsg("export: at most %d listen addresses",
				       HTTP_MAX_LISTEN);
				goto out;
			}
			if (http_check_listen(optarg)) {
				errmsg("export: bad --listen address '%s' (want ADDR:PORT, HOST:PORT, [V6ADDR]:PORT or :PORT)",
				       optarg);
				goto out;
			}
			ho.listen[ho.nlisten++] = optarg;
			break;
		case OPT_SYSTEMD:
			ho.systemd_socket = true;
			break;
		case 'w':
			ho.web_config = optarg;
			break;
		case OPT_TELEMETRY:
			if (optarg[0] != '/' || !strcmp(optarg, "/") ||
			    strlen(optarg) > 200 ||
			    optarg[strspn(
				    optarg,
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-")]) {
				errmsg("export: --web.telemetry-path wants a path of letters, digits and /._- that starts with / and is not /, not '%s'",
				       optarg);
				goto out;
			}
			ho.telemetry_path = optarg;
			break;
		case OPT_NO_EXPORTER:
			sel.no_exporter_metrics = true;
			break;
		case OPT_LOG_LEVEL:
			if (log_parse_level(optarg, &level)) {
				errmsg("export: --log.level wants debug, info, warn or error, not '%s'",
				       optarg);
				goto out;
			}
			break;
		case OPT_LOG_FORMAT:
			if (log_parse_format(optarg, &format)) {
				errmsg("export: --log.format wants logfmt or json, not '%s'",
				       optarg);
				goto out;
			}
			break;
		case OPT_MAX_REQUESTS:
			errmsg("export: --max-requests is now --test.exit-after-connections (it makes the exporter exit; it is not a limit on requests)");
			goto out;
		case OPT_DISABLE_DEFAULTS:
			no_defaults = true;
			break;
		case OPT_VM_LABELS:
			if (vm_labels_parse(optarg, &sel.vm_labels)) {
				errmsg("export: --vm-labels wants a list of name, uuid, pid and fd, not '%s'",
				       optarg);
				goto out;
			}
			break;
		case 'c':
		case OPT_EXIT_AFTER:
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (end == optarg || *end || errno || n < 1 ||
			    n > 1000000) {
				errmsg("export: --%s wants a positive count",
				       c == 'c' ?
					       "web.max-connections" :
					       "test.exit-after-connections");
				goto out;
			}
			if (c == 'c')
				ho.max_connections = (unsigned int)n;
			else
				ho.max_requests = n;
			break;
		case OPT_PER_CLIENT:
		case OPT_IN_FLIGHT:
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (end == optarg || *end || errno || n < 0 ||
			    n > 1000000) {
				errmsg("export: --%s wants a count, 0 for no limit",
				       c == OPT_PER_CLIENT ?
					       "web.max-connections-per-client" :
					       "web.max-requests");
				goto out;
			}
			if (c == OPT_PER_CLIENT)
				ho.max_per_client = (unsigned int)n;
			else
				ho.max_in_flight = (unsigned int)n;
			break;
		case OPT_VERSION:
			/* prometheus/common's version.Print() first line. */
			printf("kvmstats, version %s (libkvmstats %s)\n",
			       KVMSTATS_RELEASE, kvmstats_version());
			rc = EXIT_OK;
			goto out;
		case 'h':
			usage_export(stdout);
			rc = EXIT_OK;
			goto out;
		default:
			rc = bad_option("export", c, argv);
			goto out;
		}
	}
	if (optind < argc) {
		errmsg("export: unexpected argument '%s'", argv[optind]);
		goto out;
	}
	if (!ho.nlisten && !ho.systemd_socket &&
	    (ho.web_config || ho.max_requests > 0 ||
	     strcmp(ho.telemetry_path, "/metrics"))) {
		errmsg("export: --web.* and --test.* options need --listen or --web.systemd-socket");
		goto out;
	}
	if (ho.nlisten && ho.systemd_socket) {
		errmsg("export: --web.systemd-socket takes its addresses from systemd: no --listen with it");
		goto out;
	}
	sel.collectors = ((no_defaults ? 0 : COLL_DEFAULT) | on) & ~off;
	sel.include = filter;
	sel.exclude = exclude;
	ho.serving = ho.nlisten || ho.systemd_socket;
	if (ho.serving)
		log_setup(level, format);

	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	if (ho.serving) {
		/* A missing device is a failed scrape, not the end (scrape()). */
		source_open(&src);
	} else {
		source_init(&src);
	}
	err = scrape_init(&sc, &src, &sel);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		scrape_fini(&sc);
		source_fini(&src);
		rc = exit_for(err);
	} else if (!ho.serving) {
		rc = export_once(&sc, &src, filter_text);
	} else {
		/* The server's sockets come out of the budget for stats fds. */
		sc.serving = true;
		ho.fd_reserve = &sc.fd_reserve;
		rc = http_serve(&ho, scrape_cb, &sc);
		scrape_fini(&sc);
		source_fini(&src);
	}
out:
	if (filter)
		regfree(filter);
	if (exclude)
		regfree(exclude);
	return rc;
}
