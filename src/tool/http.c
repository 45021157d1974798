// SPDX-License-Identifier: GPL-2.0-only
/*
 * The exporter's HTTP(S) server, on libmicrohttpd.
 *
 * libmicrohttpd (Debian's libmicrohttpd12) does the HTTP/1.1 protocol, TLS
 * (through GnuTLS), connection limits and idle timeouts; a small pool of
 * its threads runs an epoll loop each, so a slow, silent or hostile
 * client holds one connection slot and never a thread.  Nothing slow runs
 * on those threads: a request that needs a scrape or a bcrypt check is
 * suspended and handed to one of two worker threads, which resume it when
 * its answer is ready.
 *
 *   MHD threads (epoll)            scraper thread           verifier thread
 *   ------------------             --------------           ---------------
 *   GET /metrics: suspend, queue -> take every waiting
 *                                  request, render once,
 *                                  gzip once if one asks,
 *   resume: queue the shared  <--  resume them all
 *   result (refcounted buffer)
 *   Basic auth not in the cache: suspend, queue  ------->  crypt_r (bcrypt),
 *                                                <-------  cache, resume
 *
 * A request is answered by the first scrape that starts after it
 * arrived; every request waiting when a scrape starts shares its result.
 * Scrapes are therefore serialized (the renderer is not thread-safe) and
 * never stale by more than one scrape.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "http.h"
#include "log.h"
#include "tool.h"
#include "webconfig.h"

#define IDLE_TIMEOUT_S 30	  /* a connection silent this long is closed */
#define CONN_MEMORY    (16 << 10) /* per connection: request head + buffers */
#define CRED_CACHE     64	  /* verified (user, password) pairs kept */
#define MAX_POOL       4	  /* MHD threads per address */

static const char metrics_type[] = "text/plain; version=0.0.4; charset=utf-8";
/* The telemetry path is made of [A-Za-z0-9/._-] (export.c checks it). */
static const char landing_fmt[] =
	"<!DOCTYPE html>\n"
	"<html><head><meta charset=\"utf-8\"><title>kvmstats exporter</title></head>\n"
	"<body><h1>kvmstats exporter</h1>\n"
	"<p>KVM statistics of every VM and vCPU on this host, in the Prometheus text format.</p>\n"
	"<p><a href=\"%s\">Metrics</a></p>\n"
	"</body></html>\n";
static char landing_page[sizeof(landing_fmt) + 256];

/* One scrape's answer, shared by every request that waited for it. */
struct result {
	unsigned int refs;
	unsigned int status;
	char *body;
	size_t len;
	char *gz; /* body compressed with gzip, when a request asked */
	size_t gzlen;
};

enum rq_state {
	RQ_NEW,
	RQ_AUTH_DONE, /* the verifier set auth_ok */
	RQ_SCRAPED,   /* the scraper set res (NULL: out of memory) */
	RQ_REFUSED,   /* the server is stopping */
};

struct request {
	struct MHD_Connection *conn;
	enum rq_state state;
	bool authed;
	bool auth_ok;
	bool gzip;
	char *user, *pass; /* for the verifier */
	struct result *res;
	struct request *next;
};

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct request *head, **tail;
	bool stop;
	bool started;
	pthread_t thread;
};

struct cred {
	unsigned char mac[32]; /* HMAC-SHA256 of user NUL password */
	bool used, ok;
	unsigned long stamp;
};

static struct server {
	struct web_config *wc;
	gnutls_x509_trust_list_t trust; /* client CAs, to verify clients */
	http_render_fn render;
	void *ctx;
	const char *telemetry_path;
	struct queue scrapes, auths;
	struct MHD_Daemon *d[HTTP_MAX_LISTEN];
	size_t nd;
	int wake[2]; /* self-pipe: signals and --test.exit-after-connections end the wait */
	long max_conns;
	unsigned long closed;
	unsigned char mac_key[32];
	pthread_mutex_t cache_lock;
	struct cred cache[CRED_CACHE];
	unsigned long cache_clock;
	/* MHD's messages: the last one (for start errors), a rate limit */
	pthread_mutex_t log_lock;
	char log_last[256];
	time_t log_window;
	unsigned int log_count;
} srv = {
	.scrapes = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER },
	.auths = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER },
	.wake = { -1, -1 },
	.cache_lock = PTHREAD_MUTEX_INITIALIZER,
	.log_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* ------------------------------------------------------------------ */
/* Listen addresses                                                    */

struct listen_addr {
	struct sockaddr_storage ss;
	unsigned int flags; /* MHD_USE_IPv6, MHD_USE_DUAL_STACK or 0 */
};

/*
 * "HOST:PORT": an IPv4 address or localhost (127.0.0.1); "[V6]:PORT";
 * ":PORT" every address, IPv4 and IPv6, like Go's listeners (and so
 * node_exporter's --web.listen-address=:9100), as is "[::]:PORT";
 * "0.0.0.0:PORT" every IPv4 address only.
 */
static int parse_listen(const char *s, struct listen_addr *a)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a->ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&a->ss;
	const char *colon = strrchr(s, ':');
	char host[INET6_ADDRSTRLEN + 2];
	size_t hl;
	char *end;
	long port;

	if (!colon)
		return -EINVAL;
	hl = (size_t)(colon - s);
	if (hl >= sizeof(host))
		return -EINVAL;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || errno || port < 0 || port > 65535)
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(a, 0, sizeof(*a));
	if (!host[0]) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		a6->sin6_addr = in6addr_any;
		a->flags = MHD_USE_DUAL_STACK;
		return 0;
	}
	if (host[0] == '[') {
		if (hl < 3 || host[hl - 1] != ']')
			return -EINVAL;
		host[hl - 1] = '\0';
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return -EINVAL;
		a->flags = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ?
				   MHD_USE_DUAL_STACK :
				   MHD_USE_IPv6;
		return 0;
	}
	a4->sin_family = AF_INET;
	a4->sin_port = htons((uint16_t)port);
	if (!strcmp(host, "localhost"))
		a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

int http_check_listen(const char *addr)
{
	struct listen_addr a;

	return parse_listen(addr, &a);
}

/* A dual-stack wildcard on a host without IPv6 becomes 0.0.0.0. */
static void listen_fallback(struct listen_addr *a)
{
	struct sockaddr_in6 a6 = *(struct sockaddr_in6 *)&a->ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&a->ss;
	int fd;

	if (a->flags != MHD_USE_DUAL_STACK)
		return;
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		close(fd);
		return;
	}
	memset(&a->ss, 0, sizeof(a->ss));
	a4->sin_family = AF_INET;
	a4->sin_port = a6.sin6_port;
	a4->sin_addr.s_addr = htonl(INADDR_ANY);
	a->flags = 0;
}

/* ------------------------------------------------------------------ */
/* Results and queues                                                  */

static struct result *result_get(struct result *r)
{
	__atomic_add_fetch(&r->refs, 1, __ATOMIC_RELAXED);
	return r;
}

static void result_put(struct result *r)
{
	if (r && !__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL)) {
		free(r->body);
		free(r->gz);
		free(r);
	}
}

/* MHD's free callback of a response made from a result. */
static void result_release(void *cls)
{
	result_put(cls);
}

/* Queue @rq for @q's thread; false when the server is stopping. */
static bool queue_push(struct queue *q, struct request *rq)
{
	bool ok;

	pthread_mutex_lock(&q->lock);
	ok = !q->stop;
	if (ok) {
		rq->next = NULL;
		*q->tail = rq;
		q->tail = &rq->next;
		pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

/* Every queued request, oldest first; NULL once stopped and empty. */
static struct request *queue_take(struct queue *q)
{
	struct request *batch;

	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->stop)
		pthread_cond_wait(&q->cond, &q->lock);
	batch = q->head;
	q->head = NULL;
	q->tail = &q->head;
	pthread_mutex_unlock(&q->lock);
	return batch;
}

static void queue_stop(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	if (q->started)
		pthread_join(q->thread, NULL);
	q->started = false;
}

/*
 * Suspend @rq's connection and hand it to @q's thread, which resumes it.
 * When the server is stopping, resume at once: the next call answers 503.
 */
static enum MHD_Result hand_off(struct queue *q, struct request *rq)
{
	MHD_suspend_connection(rq->conn);
	if (!queue_push(q, rq)) {
		rq->state = RQ_REFUSED;
		MHD_resume_connection(rq->conn);
	}
	return MHD_YES;
}

/* ------------------------------------------------------------------ */
/* Scrapes                                                             */

static int gzip_body(struct result *r)
{
	z_stream z = { 0 };
	uLong room;
	int zr;

	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	room = deflateBound(&z, (uLong)r->len);
	r->gz = malloc(room);
	if (!r->gz) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)r->body;
	z.avail_in = (uInt)r->len;
	z.next_out = (Bytef *)r->gz;
	z.avail_out = (uInt)room;
	zr = deflate(&z, Z_FINISH);
	r->gzlen = room - z.avail_out;
	deflateEnd(&z);
	if (zr != Z_STREAM_END) {
		free(r->gz);
		r->gz = NULL;
		return -EIO;
	}
	return 0;
}

static struct result *scrape_once(bool want_gzip)
{
	struct result *r = calloc(1, sizeof(*r));
	const char *text;
	size_t len;
	int err;

	if (!r)
		return NULL;
	r->refs = 1;
	text = NULL;
	err = srv.render(srv.ctx, &text, &len);
	if (err) {
		char msg[160];

		if (!text || !len) {
			len = (size_t)snprintf(msg, sizeof(msg),
					       "kvmstats: scrape failed: %s\n",
					       kvmstats_strerror(err));
			text = msg;
		}
		r->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		logmsg(LOG_ERROR, "export: %.*s", (int)(len - 1), text);
	} else {
		r->status = MHD_HTTP_OK;
	}
	r->body = malloc(len ? len : 1);
	if (!r->body) {
		free(r);
		return NULL;
	}
	memcpy(r->body, text, len);
	r->len = len;
	/* Not worth it for an error message; a failure sends it plain. */
	if (want_gzip && r->status == MHD_HTTP_OK)
		gzip_body(r);
	return r;
}

static void *scraper(void *arg)
{
	struct request *batch, *rq, *next;

	(void)arg;
	while ((batch = queue_take(&srv.scrapes))) {
		struct result *res;
		bool want_gzip = false;

		for (rq = batch; rq; rq = rq->next)
			want_gzip |= rq->gzip;
		res = scrape_once(want_gzip);
		for (rq = batch; rq; rq = next) {
			next = rq->next;
			rq->res = res ? result_get(res) : NULL;
			rq->state = RQ_SCRAPED;
			/* MHD may complete and free rq from here on. */
			MHD_resume_connection(rq->conn);
		}
		result_put(res);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Basic auth                                                          */

static bool ct_equal(const void *a, const void *b, size_t len)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;
	size_t i;

	for (i = 0; i < len; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

static int cred_mac(const char *user, const char *pass, unsigned char *mac)
{
	size_t ul = strlen(user), pl = strlen(pass);
	char *msg = malloc(ul + pl + 1);
	int r;

	if (!msg)
		return -ENOMEM;
	memcpy(msg, user, ul + 1);
	memcpy(msg + ul + 1, pass, pl);
	r = gnutls_hmac_fast(GNUTLS_MAC_SHA256, srv.mac_key,
			     sizeof(srv.mac_key), msg, ul + 1 + pl, mac);
	explicit_bzero(msg, ul + pl + 1);
	free(msg);
	return r < 0 ? -EIO : 0;
}

/* 1 verified, 0 refused, -ENOENT not cached. */
static int cache_lookup(const unsigned char *mac)
{
	int i, found = -ENOENT;

	pthread_mutex_lock(&srv.cache_lock);
	for (i = 0; i < CRED_CACHE; i++) {
		struct cred *c = &srv.cache[i];

		if (c->used && ct_equal(c->mac, mac, sizeof(c->mac))) {
			c->stamp = ++srv.cache_clock;
			found = c->ok;
		}
	}
	pthread_mutex_unlock(&srv.cache_lock);
	return found;
}

/*
 * Remember a verdict.  The victim is a free slot, else the least recently
 * used refusal, else the least recently used success: a client trying
 * many passwords cannot push out the credentials that work.
 */
static void cache_store(const unsigned char *mac, bool ok)
{
	struct cred *victim = NULL;
	int i;

	pthread_mutex_lock(&srv.cache_lock);
	for (i = 0; i < CRED_CACHE; i++) {
		struct cred *c = &srv.cache[i];

		if (!c->used) {
			victim = c;
			break;
		}
		if (!victim || (victim->ok && !c->ok) ||
		    (victim->ok == c->ok && c->stamp < victim->stamp))
			victim = c;
	}
	memcpy(victim->mac, mac, sizeof(victim->mac));
	victim->used = true;
	victim->ok = ok;
	victim->stamp = ++srv.cache_clock;
	pthread_mutex_unlock(&srv.cache_lock);
}

/*
 * bcrypt, one check at a time (each costs 2^cost rounds: ~0.25 s at cost
 * 12).  An unknown user is checked against a configured user's hash and
 * refused, so that the answer takes as long as for a wrong password.
 */
static bool verify_password(struct crypt_data *cd, const char *user,
			    const char *pass)
{
	const struct web_user *u = web_config_user(srv.wc, user);
	const char *hash = u ? u->hash : srv.wc->users[0].hash;
	const char *out = crypt_r(pass, hash, cd);
	bool ok;

	ok = out && strlen(out) == strlen(hash) &&
	     ct_equal(out, hash, strlen(hash));
	explicit_bzero(cd, sizeof(*cd));
	return u && ok;
}

static void wipe_creds(struct request *rq)
{
	if (rq->pass)
		explicit_bzero(rq->pass, strlen(rq->pass));
	free(rq->pass);
	free(rq->user);
	rq->pass = rq->user = NULL;
}

static void *verifier(void *arg)
{
	struct crypt_data *cd = calloc(1, sizeof(*cd));
	struct request *batch, *rq, *next;

	(void)arg;
	while ((batch = queue_take(&srv.auths))) {
		for (rq = batch; rq; rq = next) {
			unsigned char mac[32];
			int cached;

			next = rq->next;
			if (cred_mac(rq->user, rq->pass, mac)) {
				rq->auth_ok = false;
			} else if ((cached = cache_lookup(mac)) >= 0) {
				/* A request queued before ours had the same. */
				rq->auth_ok = cached;
			} else {
				rq->auth_ok =
					cd &&
					verify_password(cd, rq->user, rq->pass);
				if (cd)
					cache_store(mac, rq->auth_ok);
			}
			wipe_creds(rq);
			rq->state = RQ_AUTH_DONE;
			MHD_resume_connection(rq->conn);
		}
	}
	free(cd);
	return NULL;
}

enum { AUTH_OK, AUTH_FAIL, AUTH_PENDING };

static int check_auth(struct request *rq)
{
	char *pass = NULL, *user;
	unsigned char mac[32];
	int cached, ret = AUTH_FAIL;

	user = MHD_basic_auth_get_username_password(rq->conn, &pass);
	if (!user)
		goto out;
	if (cred_mac(user, pass ? pass : "", mac))
		goto out;
	cached = cache_lookup(mac);
	if (cached >= 0) {
		ret = cached ? AUTH_OK : AUTH_FAIL;
		goto out;
	}
	rq->user = strdup(user);
	rq->pass = strdup(pass ? pass : "");
	if (!rq->user || !rq->pass) {
		wipe_creds(rq);
		goto out;
	}
	hand_off(&srv.auths, rq);
	ret = AUTH_PENDING;
out:
	if (pass) {
		explicit_bzero(pass, strlen(pass));
		MHD_free(pass);
	}
	if (user)
		MHD_free(user);
	return ret;
}

/* ------------------------------------------------------------------ */
/* TLS client certificates                                             */

static bool san_allowed(gnutls_x509_crt_t crt)
{
	unsigned int seq;

	for (seq = 0;; seq++) {
		unsigned char buf[1024];
		char ip[INET6_ADDRSTRLEN];
		size_t size = sizeof(buf) - 1, i;
		unsigned int critical;
		const char *v = (const char *)buf;
		int type = gnutls_x509_crt_get_subject_alt_name(
			crt, seq, buf, &size, &critical);

		if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			return false;
		if (type == GNUTLS_E_SHORT_MEMORY_BUFFER)
			continue;
		if (type < 0)
			return false;
		if (type == GNUTLS_SAN_IPADDRESS) {
			if (!inet_ntop(size == 4 ? AF_INET : AF_INET6, buf, ip,
				       sizeof(ip)) ||
			    (size != 4 && size != 16))
				continue;
			v = ip;
		} else if (type == GNUTLS_SAN_DNSNAME ||
			   type == GNUTLS_SAN_RFC822NAME ||
			   type == GNUTLS_SAN_URI) {
			buf[size] = '\0';
		} else {
			continue;
		}
		for (i = 0; i < srv.wc->nsans; i++)
			if (!strcmp(v, srv.wc->allowed_sans[i]))
				return true;
	}
}

/*
 * Called by GnuTLS during the handshake once the client's certificate
 * has arrived; non-zero ends the handshake with an alert, as Go's
 * crypto/tls does for a certificate it refuses.
 */
static int verify_client(gnutls_session_t s)
{
	const struct web_config *wc = srv.wc;
	unsigned int n = 0, i, status = 0;
	const gnutls_datum_t *raw = gnutls_certificate_get_peers(s, &n);
	gnutls_x509_crt_t chain[16];
	int ret = -1;

	if (!raw || !n)
		return (wc->client_auth == WEB_REQUIRE_ANY_CLIENT_CERT ||
			wc->client_auth == WEB_REQUIRE_AND_VERIFY_CLIENT_CERT ||
			wc->nsans) ?
			       -1 :
			       0;
	if (n > 16)
		n = 16;
	for (i = 0; i < n; i++) {
		if (gnutls_x509_crt_init(&chain[i]) < 0)
			break;
		if (gnutls_x509_crt_import(chain[i], &raw[i],
					   GNUTLS_X509_FMT_DER) < 0) {
			gnutls_x509_crt_deinit(chain[i]);
			break;
		}
	}
	if (i < n)
		goto out;
	if (wc->client_auth == WEB_VERIFY_CLIENT_CERT_IF_GIVEN ||
	    wc->client_auth == WEB_REQUIRE_AND_VERIFY_CLIENT_CERT) {
		gnutls_typed_vdata_st vd = {
			.type = GNUTLS_DT_KEY_PURPOSE_OID,
			.data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
		};

		if (gnutls_x509_trust_list_verify_crt2(srv.trust, chain, n, &vd,
						       1, 0, &status,
						       NULL) < 0 ||
		    status)
			goto out;
	}
	if (wc->nsans && !san_allowed(chain[0]))
		goto out;
	ret = 0;
out:
	while (i--)
		gnutls_x509_crt_deinit(chain[i]);
	return ret;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)sctx;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED && srv.wc && srv.wc->tls &&
	    srv.wc->client_auth != WEB_NO_CLIENT_CERT) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
		gnutls_session_t s = ci ? ci->tls_session : NULL;
		bool require =
			srv.wc->client_auth == WEB_REQUIRE_ANY_CLIENT_CERT ||
			srv.wc->client_auth ==
				WEB_REQUIRE_AND_VERIFY_CLIENT_CERT;

		/* No session: MHD_USE_TLS is off, nothing to protect. */
		if (s) {
			gnutls_certificate_server_set_request(
				s, require ? GNUTLS_CERT_REQUIRE :
					     GNUTLS_CERT_REQUEST);
			gnutls_session_set_verify_function(s, verify_client);
		}
	}
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED && srv.max_conns > 0 &&
	    __atomic_add_fetch(&srv.closed, 1, __ATOMIC_RELAXED) ==
		    (unsigned long)srv.max_conns) {
		if (write(srv.wake[1], "m", 1) < 0) {
			/* The pipe is never full: one byte per reason. */
		}
	}
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */

static void add_headers(struct MHD_Response *resp)
{
	size_t i;

	for (i = 0; srv.wc && i < srv.wc->nheaders; i++)
		MHD_add_response_header(resp, srv.wc->headers[i].name,
					srv.wc->headers[i].value);
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status,
			       const char *type, const char *body,
			       const char *allow)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Basic realm=\"kvmstats\"");
	add_headers(resp);
	r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result respond_text(struct MHD_Connection *c,
				    unsigned int status, const char *body)
{
	return respond(c, status, "text/plain; charset=utf-8", body, NULL);
}

static enum MHD_Result send_result(struct request *rq)
{
	struct result *r = rq->res;
	bool gz = rq->gzip && r && r->gz;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!r)
		return respond_text(rq->conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "kvmstats: out of memory\n");
	resp = MHD_create_response_from_buffer_with_free_callback_cls(
		gz ? r->gzlen : r->len, gz ? r->gz : r->body, result_release,
		r);
	if (!resp)
		return MHD_NO;
	rq->res = NULL; /* the response holds the reference now */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				r->status == MHD_HTTP_OK ?
					metrics_type :
					"text/plain; charset=utf-8");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY,
				MHD_HTTP_HEADER_ACCEPT_ENCODING);
	if (gz)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING,
					"gzip");
	add_headers(resp);
	ret = MHD_queue_response(rq->conn, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/*
 * Accept-Encoding (RFC 9110 12.5.3): gzip (or x-gzip) with a non-zero
 * q-value, or * with one and gzip not refused by name.
 */
static bool accepts_gzip(struct MHD_Connection *c)
{
	const char *p = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    "Accept-Encoding");
	int gzip = -1, star = -1;

	while (p && *p) {
		size_t n;
		double q = 1;
		const char *semi, *end;

		p += strspn(p, " \t,");
		n = strcspn(p, " \t;,");
		end = p + strcspn(p, ",");
		semi = memchr(p, ';', (size_t)(end - p));
		while (semi) {
			const char *v = semi + 1 + strspn(semi + 1, " \t");

			if ((v[0] == 'q' || v[0] == 'Q') && v[1] == '=')
				q = strtod(v + 2, NULL);
			semi = memchr(v, ';', (size_t)(end - v));
		}
		if ((n == 4 && !strncasecmp(p, "gzip", 4)) ||
		    (n == 6 && !strncasecmp(p, "x-gzip", 6)))
			gzip = q > 0;
		else if (n == 1 && *p == '*')
			star = q > 0;
		p = end;
	}
	return gzip >= 0 ? gzip : star > 0;
}

static enum MHD_Result serve(struct request *rq, const char *url,
			     const char *method)
{
	struct MHD_Connection *c = rq->conn;
	bool get = !strcmp(method, MHD_HTTP_METHOD_GET),
	     head = !strcmp(method, MHD_HTTP_METHOD_HEAD);

	if (rq->state == RQ_REFUSED)
		return respond_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "kvmstats: shutting down\n");
	if (srv.wc && srv.wc->nusers && !rq->authed) {
		if (rq->state == RQ_AUTH_DONE) {
			rq->state = RQ_NEW;
			if (!rq->auth_ok)
				return respond_text(c, MHD_HTTP_UNAUTHORIZED,
						    "Unauthorized\n");
		} else {
			switch (check_auth(rq)) {
			case AUTH_PENDING:
				return MHD_YES;
			case AUTH_FAIL:
				return respond_text(c, MHD_HTTP_UNAUTHORIZED,
						    "Unauthorized\n");
			}
		}
		rq->authed = true;
	}
	if (!strcmp(url, srv.telemetry_path)) {
		if (!get && !head)
			return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				       "text/plain; charset=utf-8",
				       "Method Not Allowed\n", "GET, HEAD");
		if (rq->state == RQ_SCRAPED)
			return send_result(rq);
		/*
		 * HEAD scrapes too: its Content-Length (and Content-Encoding)
		 * are those GET would send at this moment, as RFC 9110 asks.
		 */
		rq->gzip = accepts_gzip(c);
		return hand_off(&srv.scrapes, rq);
	}
	if (!strcmp(url, "/")) {
		if (!get && !head)
			return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				       "text/plain; charset=utf-8",
				       "Method Not Allowed\n", "GET, HEAD");
		return respond(c, MHD_HTTP_OK, "text/html; charset=utf-8",
			       landing_page, NULL);
	}
	return respond_text(c, MHD_HTTP_NOT_FOUND, "Not Found\n");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)version;
	(void)upload;
	if (!rq) {
		/*
		 * The first call only has the head.  Answering now would make
		 * libmicrohttpd close the connection (it cannot know what
		 * follows); the next call comes once the request is complete.
		 */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->conn = c;
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a request body means nothing here */
		return MHD_YES;
	}
	return serve(rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (!rq)
		return;
	result_put(rq->res);
	wipe_creds(rq);
	free(rq);
	*con_cls = NULL;
}

/* MHD's messages on stderr, at most 20 a minute (hostile clients). */
static void on_log(void *cls, const char *fmt, va_list ap)
{
	time_t now = time(NULL);
	char msg[256];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	pthread_mutex_lock(&srv.log_lock);
	snprintf(srv.log_last, sizeof(srv.log_last), "%s", msg);
	if (now / 60 != srv.log_window) {
		if (srv.log_count > 20)
			errmsg("export: %u more messages from libmicrohttpd in the last minute",
			       srv.log_count - 20);
		srv.log_window = now / 60;
		srv.log_count = 0;
	}
	if (++srv.log_count <= 20)
		errmsg("export: %s", msg);
	pthread_mutex_unlock(&srv.log_lock);
}

/* ------------------------------------------------------------------ */
/* The server                                                          */

static void on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	if (write(srv.wake[1], "s", 1) < 0) {
		/* Nothing to do: one byte is enough. */
	}
	errno = saved;
}

static unsigned int pool_size(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_POOL ? MAX_POOL : (unsigned int)n;
}

static struct MHD_Daemon *start_one(const struct http_opts *o,
				    struct listen_addr *a)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			     a->flags;
	struct MHD_OptionItem opts[24];
	size_t n = 0;

#define OPT(o_, v_, p_) \
	(opts[n++] = (struct MHD_OptionItem){ (o_), (intptr_t)(v_), (p_) })
	/* The logger first, or MHD's own logs what comes before. */
	OPT(MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL);
	OPT(MHD_OPTION_SOCK_ADDR, 0, &a->ss);
	OPT(MHD_OPTION_THREAD_POOL_SIZE, pool_size(), NULL);
	OPT(MHD_OPTION_CONNECTION_LIMIT, o->max_connections, NULL);
	OPT(MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL);
	OPT(MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY, NULL);
	OPT(MHD_OPTION_LISTEN_BACKLOG_SIZE, SOMAXCONN, NULL);
	OPT(MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL);
	OPT(MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL);
	OPT(MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL);
	if (srv.wc && srv.wc->tls) {
		flags |= MHD_USE_TLS;
		OPT(MHD_OPTION_HTTPS_MEM_CERT, 0, srv.wc->cert_pem);
		OPT(MHD_OPTION_HTTPS_MEM_KEY, 0, srv.wc->key_pem);
		OPT(MHD_OPTION_HTTPS_PRIORITIES, 0, srv.wc->priorities);
		/* The CA names a client is told it may choose from. */
		if (srv.wc->client_ca_pem)
			OPT(MHD_OPTION_HTTPS_MEM_TRUST, 0,
			    srv.wc->client_ca_pem);
	}
	OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
				MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static int load_config(const char *path)
{
	char err[512];
	int r = web_config_load(path, &srv.wc, err, sizeof(err));

	if (r) {
		errmsg("export: --web.config.file %s", err);
		return r;
	}
	if (srv.wc->client_ca_pem) {
		gnutls_datum_t ca = { (unsigned char *)srv.wc->client_ca_pem,
				      (unsigned int)strlen(
					      srv.wc->client_ca_pem) };

		if (gnutls_x509_trust_list_init(&srv.trust, 0) < 0)
			return -ENOMEM;
		if (gnutls_x509_trust_list_add_trust_mem(srv.trust, &ca, NULL,
							 GNUTLS_X509_FMT_PEM, 0,
							 0) <= 0) {
			errmsg("export: --web.config.file %s: cannot load the client CA",
			       path);
			return -EINVAL;
		}
	}
	return 0;
}

static void stop_all(void)
{
	size_t i;

	/* Answer what is queued, then refuse: no connection stays suspended. */
	queue_stop(&srv.scrapes);
	queue_stop(&srv.auths);
	for (i = 0; i < srv.nd; i++)
		MHD_stop_daemon(srv.d[i]);
	srv.nd = 0;
	if (srv.trust)
		gnutls_x509_trust_list_deinit(srv.trust, 1);
	srv.trust = NULL;
	web_config_free(srv.wc);
	srv.wc = NULL;
	explicit_bzero(srv.mac_key, sizeof(srv.mac_key));
	explicit_bzero(srv.cache, sizeof(srv.cache));
	if (srv.wake[0] >= 0) {
		close(srv.wake[0]);
		close(srv.wake[1]);
	}
	srv.wake[0] = srv.wake[1] = -1;
}

int http_serve(const struct http_opts *o, http_render_fn render, void *ctx)
{
	struct listen_addr addrs[HTTP_MAX_LISTEN];
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, old;
	size_t i;
	char c;
	int rc = EXIT_OK;

	for (i = 0; i < o->nlisten; i++) {
		if (parse_listen(o->listen[i], &addrs[i])) {
			errmsg("export: bad listen address '%s'", o->listen[i]);
			return EXIT_USAGE;
		}
		listen_fallback(&addrs[i]);
	}
	srv.render = render;
	srv.ctx = ctx;
	srv.telemetry_path = o->telemetry_path;
	snprintf(landing_page, sizeof(landing_page), landing_fmt,
		 strcmp(o->telemetry_path, "/metrics") ? o->telemetry_path :
							 "metrics");
	srv.max_conns = o->max_requests;
	srv.scrapes.tail = &srv.scrapes.head;
	srv.auths.tail = &srv.auths.head;
	if (o->web_config && load_config(o->web_config)) {
		stop_all();
		return EXIT_USAGE;
	}
	if (gnutls_rnd(GNUTLS_RND_KEY, srv.mac_key, sizeof(srv.mac_key)) < 0 ||
	    pipe2(srv.wake, O_CLOEXEC)) {
		errmsg("export: cannot set up: %s", strerror(errno));
		stop_all();
		return EXIT_FAIL;
	}

	/* The threads started from here on leave SIGINT and SIGTERM to us. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&srv.scrapes.thread, NULL, scraper, NULL) == 0)
		srv.scrapes.started = true;
	if (srv.wc && srv.wc->nusers &&
	    pthread_create(&srv.auths.thread, NULL, verifier, NULL) == 0)
		srv.auths.started = true;
	if (!srv.scrapes.started ||
	    (srv.wc && srv.wc->nusers && !srv.auths.started)) {
		errmsg("export: cannot start a thread");
		rc = EXIT_FAIL;
	}
	for (i = 0; !rc && i < o->nlisten; i++) {
		const union MHD_DaemonInfo *di;

		srv.log_last[0] = '\0';
		srv.d[i] = start_one(o, &addrs[i]);
		if (!srv.d[i]) {
			errmsg("export: cannot listen on %s%s%s", o->listen[i],
			       srv.log_last[0] ? ": " : "", srv.log_last);
			rc = EXIT_LISTEN;
			break;
		}
		srv.nd++;
		di = MHD_get_daemon_info(srv.d[i], MHD_DAEMON_INFO_BIND_PORT);
		logmsg(LOG_INFO, "export: serving %s on %s (port %u)",
		       srv.wc && srv.wc->tls ? "https" : "http", o->listen[i],
		       di ? di->port : 0);
	}
	if (!rc) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		while (read(srv.wake[0], &c, 1) < 0 && errno == EINTR)
			;
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	stop_all();
	return rc;
}
