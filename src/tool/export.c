// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats export: Prometheus text exposition, on stdout or over HTTP.
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

static void serve_one(int cfd, struct host *h, const regex_t *filter)
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
	err = scrape(h, filter, &body, &blen);
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

static void usage_export(FILE *f)
{
	fputs("Usage: kvmstats export [-f REGEX] [--listen ADDR:PORT [--max-requests N]]\n"
	      "Print the statistics of every VM and vCPU in the Prometheus text\n"
	      "exposition format (for node_exporter's textfile collector), or serve\n"
	      "them over HTTP at /metrics.\n"
	      "  -f REGEX             only statistics whose KVM name matches\n"
	      "  --listen ADDR:PORT   serve HTTP (e.g. 127.0.0.1:9477, :9477, [::1]:9477)\n"
	      "  --max-requests N     exit after answering N requests\n",
	      f);
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
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
	struct host h;
	int c, err, devfd, lfd, one = 1, rc = EXIT_OK;
	char *end;

	while ((c = getopt_long(argc, argv, "f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
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
			usage_export(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		errmsg("export: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	/* KVMSTATS_STATS_DIR: a directory of stats files stands for the host. */
	devfd = host_stats_dir() ? -1 : open_device();
	err = host_init(&h, devfd);
	if (err) {
		errmsg("export: %s", kvmstats_strerror(err));
		return exit_for(err);
	}
	if (!listen_at) {
		const char *text;
		size_t len;

		err = scrape(&h, filter, &text, &len);
		if (!err && fwrite(text, 1, len, stdout) != len)
			err = -errno;
		scrape_fini();
		host_fini(&h);
		if (devfd >= 0)
			close(devfd);
		if (err) {
			errmsg("export: %s", kvmstats_strerror(err));
			return exit_for(err);
		}
		if (fflush(stdout)) {
			errmsg("export: writing the output: %s",
			       strerror(errno));
			return EXIT_FAIL;
		}
		return EXIT_OK;
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
		serve_one(cfd, &h, filter);
		close(cfd);
		served++;
	}
	close(lfd);
	scrape_fini();
	host_fini(&h);
	if (devfd >= 0)
		close(devfd);
	return rc;
}
