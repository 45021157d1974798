// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats export: Prometheus text exposition, on stdout or over HTTP.
 *
 * What is scraped and how it is rendered lives behind one function,
 * scrape() (see its comment), which the HTTP side calls per request.
 *
 * The server is single-threaded and bounded: one client at a time, a
 * request of at most 8 KiB read within a few seconds, a response written
 * with a send timeout, and MSG_NOSIGNAL so a client that hangs up costs
 * an EPIPE, not the process.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tool.h"

#define REQ_MAX		  8192
#define CLIENT_TIMEOUT_MS 5000

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

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
				 .name = v->name,
				 .comm = v->comm };
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

/* Parse "ADDR:PORT", "[V6]:PORT" or ":PORT" into @ss. */
static int parse_listen(const char *s, struct sockaddr_storage *ss,
			socklen_t *len)
{
	char host[128];
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port < 0 || port > 65535)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		size_t l = strlen(host);

		if (l < 2 || host[l - 1] != ']')
			return -1;
		host[l - 1] = '\0';
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return -1;
		*len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		if (!host[0] || !strcmp(host, "*"))
			a4->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (!strcmp(host, "localhost"))
			a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -1;
		*len = sizeof(*a4);
	}
	return 0;
}

static void send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t r = send(fd, buf, len, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return; /* the client went away or stalled: drop it */
		buf += r;
		len -= (size_t)r;
	}
}

static void respond(int fd, const char *status, const char *type,
		    const char *body, size_t len)
{
	char head[256];
	int n = snprintf(
		head, sizeof(head),
		"HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		"Connection: close\r\n\r\n",
		status, type, len);

	send_all(fd, head, (size_t)n);
	send_all(fd, body, len);
}

/* Read the request head (bounded in size and time); 0, or -1 to drop. */
static int read_request(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, CLIENT_TIMEOUT_MS) <= 0)
			return -1;
		r = recv(fd, buf + n, len - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return 0;
	}
	return -1;
}

static void serve_one(int cfd, struct scrape *sc)
{
	struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_MS / 1000 };
	char req[REQ_MAX];
	const char *body;
	size_t blen = 0;
	int err;

	setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (read_request(cfd, req, sizeof(req)))
		return;
	if (strncmp(req, "GET ", 4) && strncmp(req, "HEAD ", 5)) {
		respond(cfd, "405 Method Not Allowed", "text/plain",
			"GET only\n", 9);
		return;
	}
	{
		char *path = strchr(req, ' ') + 1;
		size_t plen = strcspn(path, " ?\r\n");

		if (!(plen == 8 && !strncmp(path, "/metrics", 8))) {
			static const char page[] =
				"kvmstats exporter: metrics at /metrics\n";

			respond(cfd, plen == 1 ? "200 OK" : "404 Not Found",
				"text/plain", page, sizeof(page) - 1);
			return;
		}
	}
	err = scrape(sc, &body, &blen);
	if (err) {
		char msg[160];
		int n = snprintf(msg, sizeof(msg), "kvmstats: %s\n",
				 kvmstats_strerror(err));

		respond(cfd, "500 Internal Server Error", "text/plain", msg,
			(size_t)n);
	} else {
		respond(cfd, "200 OK",
			"text/plain; version=0.0.4; charset=utf-8", body,
			!strncmp(req, "HEAD ", 5) ? 0 : blen);
	}
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
	fputs("Usage: kvmstats export [-f REGEX] [--per vm|vcpu] [--listen ADDR:PORT [--max-requests N]]\n"
	      "Print the statistics of every VM and vCPU in the Prometheus text\n"
	      "exposition format (for node_exporter's textfile collector), or serve\n"
	      "them over HTTP at /metrics.\n"
	      "  -f REGEX             only statistics whose KVM name matches\n"
	      "  --per vm|vcpu        vCPU statistics summed per VM, or per vCPU (default)\n"
	      "  --listen ADDR:PORT   serve HTTP (e.g. 127.0.0.1:9477, :9477, [::1]:9477)\n"
	      "  --max-requests N     exit after answering N requests\n",
	      f);
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "per", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "max-requests", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct sigaction sa = { .sa_handler = on_signal };
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	const char *listen_at = NULL;
	regex_t re, *filter = NULL;
	long max_req = -1, served = 0;
	bool per_vm = false;
	struct source src;
	struct scrape sc;
	int c, err, lfd, one = 1, rc = EXIT_OK;
	char *end;

	while ((c = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			break;
		case 'p':
			if (strcmp(optarg, "vm") && strcmp(optarg, "vcpu")) {
				errmsg("export: --per wants vm or vcpu, not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			per_vm = !strcmp(optarg, "vm");
			break;
		case 'l':
			listen_at = optarg;
			if (parse_listen(optarg, &ss, &sslen)) {
				errmsg("export: bad --listen address '%s' (want ADDR:PORT)",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'm':
			max_req = strtol(optarg, &end, 10);
			if (end == optarg || *end || max_req < 1) {
				errmsg("export: --max-requests wants a positive count");
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage_export(stdout);
			return EXIT_OK;
		default:
			return bad_option("export", c, argv);
		}
	}
	if (optind < argc) {
		errmsg("export: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	source_init(&src);
	err = scrape_init(&sc, &src, filter, per_vm);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		scrape_fini(&sc);
		source_fini(&src);
		return exit_for(err);
	}
	if (!listen_at) {
		rc = export_once(&sc, &src);
		if (filter)
			regfree(filter);
		return rc;
	}

	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&ss, sslen) || listen(lfd, 16)) {
		errmsg("export: cannot listen on %s: %s", listen_at,
		       strerror(errno));
		return EXIT_LISTEN;
	}
	while (!stop_sig && (max_req < 0 || served < max_req)) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			errmsg("export: accept: %s", strerror(errno));
			rc = EXIT_FAIL;
			break;
		}
		serve_one(cfd, &sc);
		close(cfd);
		served++;
	}
	close(lfd);
	scrape_fini(&sc);
	source_fini(&src);
	if (filter)
		regfree(filter);
	return rc;
}
