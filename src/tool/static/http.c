// SPDX-License-Identifier: GPL-2.0-only
/*
 * The HTTP server of the static build (make tool-static): there is none.
 * Debian ships no static p11-kit or libunistring, so GnuTLS, and with it
 * libmicrohttpd, cannot be linked statically; the static tool prints the
 * exposition on stdout and leaves serving it to the dynamic one.
 */
#include "../http.h"
#include "../tool.h"

int http_check_listen(const char *addr)
{
	(void)addr;
	return 0;
}

int http_serve(const struct http_opts *o, http_render_fn render, void *ctx)
{
	(void)o;
	(void)render;
	(void)ctx;
	errmsg("export: this kvmstats is the static build, without the HTTP server (build it with make tool)");
	return EXIT_LISTEN;
}
