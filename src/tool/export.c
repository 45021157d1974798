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
#include <unistd.h>

#include "http.h"
#include "tool.h"

static int self_metrics(struct scrape *s, double t0, unsigned int vms,
			size_t vcpus);

int scrape_init(struct scrape *s, const struct source *src,
		const regex_t *filter, bool per_vm)
{
	memset(s, 0, sizeof(*s));
	s->filter = filter;
	s->per_vm = per_vm;
	s->cache = prom_cache_new();
	if (!s->cache)
		return -ENOMEM;
	return host_init(&s->host, src);
}

void scrape_fini(struct scrape *s)
{
	prom_cache_free(s->cache);
	free(s->objs);
	host_fini(&s->host);
	memset(s, 0, sizeof(*s));
}

/* Room for @more objects after the first @n. */
static int objs_room(struct scrape *s, size_t n, size_t more)
{
	size_t room;
	struct obj *o;

	if (n + more <= s->objs_room)
		return 0;
	room = 2 * (n + more) + 16;
	o = realloc(s->objs, room * sizeof(*o));
	if (!o)
		return -ENOMEM;
	s->objs = o;
	s->objs_room = room;
	return 0;
}

/*
 * The seam between what is scraped and how it is served: list the VMs
 * again, sample every VM and vCPU, and render one complete exposition
 * (the KVM families, then the exporter's own), *@text of *@len bytes.
 * 0, or -errno when nothing could be listed or memory ran out (then
 * there is no text).  VMs and vCPUs that could not be opened or read are
 * left out of the text and counted in it, never served with old values.
 *
 * Not thread-safe: @s holds the followed VMs, the rendering cache and the
 * output buffer.  Callers on several threads serialize scrape() with a
 * mutex of their own.  *@text stays valid until the next scrape() or
 * scrape_fini() on @s: copy it before letting go of the mutex.
 */
int scrape(struct scrape *s, const char **text, size_t *len)
{
	struct host *h = &s->host;
	double t0 = now_mono();
	size_t i, n = 0, vcpus = 0;
	unsigned int c, vms = 0;
	int err;

	err = host_refresh(h);
	if (!err)
		host_drop_exited(h);
	if (!err)
		err = host_sample(h);
	if (err)
		return err;
	if (h->gen != s->cache_gen) {
		/* Files were freed and opened: their addresses may be reused. */
		prom_cache_reset(s->cache);
		s->cache_gen = h->gen;
	}
	for (i = 0; i < h->nvms; i++) {
		struct vmrec *v = &h->vms[i];
		struct obj o = { .pid = v->pid,
				 .fd = v->fd,
				 .name = v->id.name,
				 .comm = v->id.comm,
				 .uuid = v->id.uuid };
		size_t first = n;

		if (v->state != VM_OPEN)
			continue;
		if (objs_room(s, n, 1 + v->nv))
			return -ENOMEM;
		if (v->vm.fresh) {
			s->objs[n] = o;
			s->objs[n].vcpu = -1;
			s->objs[n].file = v->vm.file;
			s->objs[n++].data = v->vm.cur;
		}
		if (s->per_vm && !host_vcpu_sum(v)) {
			s->objs[n] = o;
			s->objs[n].vcpu = OBJ_VCPUS;
			s->objs[n].file = v->vcpu[0].file;
			s->objs[n++].data = v->sum;
			vcpus += v->nv;
		}
		/* Per VM, a VM with a vCPU left out gets no (untrue) sum. */
		for (c = 0; !s->per_vm && c < v->nv; c++) {
			if (!v->vcpu[c].fresh)
				continue;
			s->objs[n] = o;
			s->objs[n].vcpu = (int)c;
			s->objs[n].file = v->vcpu[c].file;
			s->objs[n++].data = v->vcpu[c].cur;
			vcpus++;
		}
		vms += n > first;
	}
	err = prom_cache_render(s->cache, s->objs, n, s->filter, text, len);
	if (!err)
		err = self_metrics(s, t0, vms, vcpus);
	if (err)
		return err;
	s->scrapes++;
	*text = prom_cache_text(s->cache, len);
	return 0;
}

/* The exporter's own families, after the KVM ones. */
static int self_metrics(struct scrape *s, double t0, unsigned int vms,
			size_t vcpus)
{
	const struct host_counts *hc = &s->host.n;
	struct prom_cache *c = s->cache;
	struct prom_skipped sk;

	prom_cache_skipped(c, &sk);
	return prom_cache_printf(
		c,
		"# HELP kvmstats_exporter_build_info The kvmstats exporter's release; always 1.\n"
		"# TYPE kvmstats_exporter_build_info gauge\n"
		"kvmstats_exporter_build_info{version=\"%s\",libkvmstats=\"%s\"} 1\n"
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
		KVMSTATS_RELEASE, kvmstats_version(), now_mono() - t0, vms,
		vcpus, hc->left_vms, hc->left_vcpus, hc->failed_vms,
		hc->failed_vcpus, hc->errors, sk.unknown, sk.collision,
		sk.bad_name, sk.conflict);
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
static int export_once(struct scrape *sc, struct source *src)
{
	const struct host_counts *hc = &sc->host.n;
	const char *text;
	size_t len;
	int err, rc = EXIT_OK;

	err = scrape(sc, &text, &len);
	if (err == -ENOENT || err == -ENOTDIR) {
		rc = source_list_error(src, err);
		err = 0;
	} else if (!err && fwrite(text, 1, len, stdout) != len) {
		err = -errno;
	} else if (!err && (hc->left_vms || hc->left_vcpus)) {
		rc = EXIT_PARTIAL;
	} else if (!err && (hc->failed_vms || hc->failed_vcpus)) {
		rc = EXIT_FAIL;
	}
	scrape_fini(sc);
	source_fini(src);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		return exit_for(err);
	}
	if (fflush(stdout)) {
		errmsg("export: writing the output: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return rc;
}

static void usage_export(FILE *f)
{
	fputs("Usage: kvmstats export [-f REGEX] [--per vm|vcpu] [--listen ADDR:PORT]...\n"
	      "                       [--web.config.file FILE] [--web.max-connections N]\n"
	      "                       [--max-requests N]\n"
	      "Print the statistics of every VM and vCPU in the Prometheus text\n"
	      "exposition format (for node_exporter's textfile collector), or serve\n"
	      "them over HTTP or HTTPS at /metrics.\n"
	      "  -f REGEX                  only statistics whose KVM name matches\n"
	      "  --per vm|vcpu             vCPU statistics summed per VM, or per vCPU (default)\n"
	      "  --listen ADDR:PORT        serve (e.g. 127.0.0.1:9477, [::1]:9477, or :9477 for\n"
	      "                            every address); repeatable; alias --web.listen-address\n"
	      "  --web.config.file FILE    TLS and basic auth, in exporter-toolkit's format\n"
	      "  --web.max-connections N   open connections per address (default 512)\n"
	      "  --max-requests N          exit after N connections have closed\n",
	      f);
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "per", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "web.listen-address", required_argument, NULL, 'l' },
		{ "web.config.file", required_argument, NULL, 'w' },
		{ "web.max-connections", required_argument, NULL, 'c' },
		{ "max-requests", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct http_opts ho = { .max_connections = 512, .max_requests = -1 };
	regex_t re, *filter = NULL;
	bool per_vm = false;
	struct source src;
	struct scrape sc;
	int c, err, rc;
	long n;
	char *end;

	while ((c = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (filter)
				regfree(filter);
			filter = NULL;
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			break;
		case 'p':
			if (strcmp(optarg, "vm") && strcmp(optarg, "vcpu")) {
				errmsg("export: --per wants vm or vcpu, not '%s'",
				       optarg);
				goto usage;
			}
			per_vm = !strcmp(optarg, "vm");
			break;
		case 'l':
			if (ho.nlisten == HTTP_MAX_LISTEN) {
				errmsg("export: at most %d listen addresses",
				       HTTP_MAX_LISTEN);
				goto usage;
			}
			if (http_check_listen(optarg)) {
				errmsg("export: bad --listen address '%s' (want ADDR:PORT, [V6ADDR]:PORT or :PORT)",
				       optarg);
				goto usage;
			}
			ho.listen[ho.nlisten++] = optarg;
			break;
		case 'w':
			ho.web_config = optarg;
			break;
		case 'c':
		case 'm':
			errno = 0;
			n = strtol(optarg, &end, 10);
			if (end == optarg || *end || errno || n < 1 ||
			    n > 1000000) {
				errmsg("export: --%s wants a positive count",
				       c == 'c' ? "web.max-connections" :
						  "max-requests");
				goto usage;
			}
			if (c == 'c')
				ho.max_connections = (unsigned int)n;
			else
				ho.max_requests = n;
			break;
		case 'h':
			if (filter)
				regfree(filter);
			usage_export(stdout);
			return EXIT_OK;
		default:
			if (filter)
				regfree(filter);
			return bad_option("export", c, argv);
		}
	}
	if (optind < argc) {
		errmsg("export: unexpected argument '%s'", argv[optind]);
		goto usage;
	}
	if (!ho.nlisten && (ho.web_config || ho.max_requests > 0)) {
		errmsg("export: --web.config.file and --max-requests need --listen");
		goto usage;
	}
	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	source_init(&src);
	err = scrape_init(&sc, &src, filter, per_vm);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		scrape_fini(&sc);
		source_fini(&src);
		rc = exit_for(err);
	} else if (!ho.nlisten) {
		rc = export_once(&sc, &src);
	} else {
		/* The server's sockets come out of the budget for stats fds. */
		size_t socks =
			ho.nlisten * (ho.max_connections + HTTP_FDS_PER_ADDR);

		sc.host.fd_budget = sc.host.fd_budget > socks ?
					    sc.host.fd_budget - socks :
					    0;
		rc = http_serve(&ho, scrape_cb, &sc);
		scrape_fini(&sc);
		source_fini(&src);
	}
	if (filter)
		regfree(filter);
	return rc;
usage:
	if (filter)
		regfree(filter);
	return EXIT_USAGE;
}
