// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats export: Prometheus text exposition, on stdout or over HTTP(S)
 * (the server is in http.c).
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

/*
 * What stays between scrapes: the object array and the rendering cache
 * (names, labels, HELP/TYPE, le texts and the output buffer), so a scrape
 * in steady state allocates nothing and formats only the values.
 */
static struct obj *objs;
static size_t objs_room;
static struct prom_cache *cache;
static unsigned long cache_gen;

/* Sample every VM and vCPU of @h and render them: *@text, *@len bytes. */
static int scrape(struct host *h, const regex_t *filter, const char **text,
		  size_t *len)
{
	size_t i, n = 0;
	unsigned int c;
	int err;

	err = host_refresh(h);
	if (!err)
		host_drop_exited(h);
	if (!err)
		err = host_sample(h);
	if (err)
		return err;
	if (!cache) {
		cache = prom_cache_new();
		if (!cache)
			return -ENOMEM;
		cache_gen = h->gen;
	}
	if (h->gen != cache_gen) {
		/* Files were freed and opened: their addresses may be reused. */
		prom_cache_reset(cache);
		cache_gen = h->gen;
	}
	for (i = 0; i < h->nvms; i++) {
		const struct vmrec *v = &h->vms[i];

		if (n + 1 + v->nv > objs_room) {
			size_t room = 2 * (n + 1 + v->nv) + 16;
			struct obj *o = realloc(objs, room * sizeof(*objs));

			if (!o)
				return -ENOMEM;
			objs = o;
			objs_room = room;
		}
		objs[n++] = (struct obj){ v->pid, v->fd, -1, v->vm, v->cur };
		for (c = 0; c < v->nv; c++)
			objs[n++] = (struct obj){ v->pid, v->fd, (int)c,
						  v->vcpu[c], v->vcur[c] };
	}
	return prom_cache_render(cache, objs, n, filter, text, len);
}

static void scrape_fini(void)
{
	prom_cache_free(cache);
	cache = NULL;
	free(objs);
	objs = NULL;
	objs_room = 0;
}

/* http.c's view of scrape(): one complete exposition per call. */
struct scrape_args {
	struct host *h;
	const regex_t *filter;
};

static int scrape_cb(void *ctx, const char **text, size_t *len)
{
	struct scrape_args *a = ctx;

	return scrape(a->h, a->filter, text, len);
}

static void usage_export(FILE *f)
{
	fputs("Usage: kvmstats export [-f REGEX] [--listen ADDR:PORT]... [--web.config.file FILE]\n"
	      "                       [--web.max-connections N] [--max-requests N]\n"
	      "Print the statistics of every VM and vCPU in the Prometheus text\n"
	      "exposition format (for node_exporter's textfile collector), or serve\n"
	      "them over HTTP or HTTPS at /metrics.\n"
	      "  -f REGEX                  only statistics whose KVM name matches\n"
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
		{ "listen", required_argument, NULL, 'l' },
		{ "web.listen-address", required_argument, NULL, 'l' },
		{ "web.config.file", required_argument, NULL, 'w' },
		{ "web.max-connections", required_argument, NULL, 'c' },
		{ "max-requests", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct http_opts ho = { .max_connections = 512, .max_requests = -1 };
	struct scrape_args sa;
	regex_t re, *filter = NULL;
	struct host h;
	int c, err, devfd, rc;
	long n;
	char *end;

	while ((c = getopt_long(argc, argv, "f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (filter)
				regfree(filter);
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
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
			usage_export(stdout);
			return EXIT_OK;
		default:
			usage_export(stderr);
			goto usage;
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
	devfd = host_stats_dir() ? -1 : open_device();
	err = host_init(&h, devfd);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		rc = exit_for(err);
		goto out_filter;
	}
	if (!ho.nlisten) {
		const char *text;
		size_t len;

		err = scrape(&h, filter, &text, &len);
		if (!err && fwrite(text, 1, len, stdout) != len)
			err = -errno;
		rc = EXIT_OK;
		if (err) {
			errmsg("export: %s", kvmstats_strerror(err));
			rc = exit_for(err);
		} else if (fflush(stdout)) {
			errmsg("export: writing the output: %s",
			       strerror(errno));
			rc = EXIT_FAIL;
		}
	} else {
		sa = (struct scrape_args){ &h, filter };
		rc = http_serve(&ho, scrape_cb, &sa);
	}
	scrape_fini();
	host_fini(&h);
	if (devfd >= 0)
		close(devfd);
out_filter:
	if (filter)
		regfree(filter);
	return rc;
usage:
	if (filter)
		regfree(filter);
	return EXIT_USAGE;
}
