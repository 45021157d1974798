/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * `kvmstats export --listen`: serving the exposition over HTTP(S).
 */
#ifndef KVMSTATS_HTTP_H
#define KVMSTATS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_LISTEN 8
/* fds of one listen address besides its connections: socket, epolls, ITCs */
#define HTTP_FDS_PER_ADDR 16

struct http_opts {
	const char *listen[HTTP_MAX_LISTEN]; /* ADDR:PORT, a server each */
	size_t nlisten;
	bool systemd_socket;	    /* serve the sockets of LISTEN_FDS */
	bool serving;		    /* listen addresses or systemd's sockets */
	const char *telemetry_path; /* /metrics */
	const char *web_config;	    /* exporter-toolkit web config, or NULL */
	unsigned int max_connections; /* per listen address */
	unsigned int max_per_client;  /* from one client address; 0: no limit */
	unsigned int max_in_flight; /* /metrics requests at once; 0: no limit */
	long max_requests; /* exit after that many connections; -1: never */
	/*
	 * Set, before the first scrape, to the fds the server may hold at
	 * most (its sockets and connections, on every listener it serves),
	 * which the scrapes leave alone.
	 */
	size_t *fd_reserve;
};

/*
 * Render a complete exposition into *@text (valid until the next call),
 * *@len bytes; 0, or -errno and *@text a line saying what failed.  Called
 * from one thread at a time.
 */
typedef int (*http_render_fn)(void *ctx, const char **text, size_t *len);

/*
 * 0 when @addr is a listen address http_serve() takes (ADDR:PORT, where
 * ADDR may be a host name, resolved when the server starts), else -EINVAL.
 */
int http_check_listen(const char *addr);

/*
 * Serve /metrics (one @render per scrape, shared by the requests that
 * wait for it) and a landing page at / until SIGINT or SIGTERM, or until
 * max_requests connections have closed.  Prints its own errors; returns
 * an exit status (EXIT_OK, EXIT_USAGE for a bad web config, EXIT_LISTEN,
 * EXIT_FAIL).
 */
int http_serve(const struct http_opts *o, http_render_fn render, void *ctx);

#endif /* KVMSTATS_HTTP_H */
