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
 *
 * The listening sockets are the exporter's own (--listen) or systemd's
 * (--web.systemd-socket, through libsystemd's sd_listen_fds_with_names(),
 * which also validates LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES; the
 * exporter tells systemd it is ready, reloading and stopping with
 * sd_notify()).  A plain listener is libmicrohttpd's; a TLS listener is
 * accepted by the TLS front thread, which looks at each connection's
 * first byte: a handshake goes on to libmicrohttpd, plain HTTP gets a 400
 * saying to use https.  Each TLS session gets the credentials of the web
 * config current when it starts (struct cfg, reloaded on SIGHUP and when
 * its files change, which every request looks at), and handshake hooks
 * that refuse with the right alert and log the peer and the reason.
 *
 * Slow clients: libmicrohttpd's idle timeout restarts with every byte, so
 * a client sending its request, or reading its answer, a byte at a time
 * would hold its slot for ever.  Every connection is therefore on a list
 * (struct conn) with a deadline, which the main thread enforces once a
 * second by shutting the socket down (libmicrohttpd then closes it): for
 * its first request, HEADER_TIMEOUT_S from its start; for a later one on
 * a kept-alive connection, IDLE_TIMEOUT_S from the end of the answer
 * before and HEADER_TIMEOUT_S from its request line, whichever comes
 * first; for an answer, SEND_TIMEOUT_S from when it is queued.  While a
 * request waits for its scrape or its bcrypt check, none.  And one client
 * address holds at most --web.max-connections-per-client of them.
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
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "http.h"
#include "log.h"
#include "tool.h"
#include "webconfig.h"

#define IDLE_TIMEOUT_S	 30 /* a connection silent this long is closed */
#define HEADER_TIMEOUT_S 10 /* to send a whole request, however slowly */
#define SEND_TIMEOUT_S	 30 /* to read a whole answer, however slowly */
#define CONN_MEMORY	 (16 << 10) /* per connection: request head + buffers */
#define CRED_CACHE	 64	    /* verified (user, password) pairs kept */
#define MAX_POOL	 4	    /* MHD threads per address */

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

/*
 * A loaded web config and what TLS makes of it, shared by reference: a
 * connection keeps the one it started with, a request the one it arrived
 * with, and a reload (SIGHUP, or a file it names that changed) swaps in a
 * new one without disturbing either.
 */
struct cfg {
	unsigned int refs;
	/* An unknown user's password is checked against this (see verify). */
	char dummy[CRYPT_GENSALT_OUTPUT_SIZE];
	struct web_config *wc;
	gnutls_certificate_credentials_t cred; /* certificate, key, CA names */
	gnutls_priority_t prio;
	gnutls_priority_t prio13; /* with cipher_suites: TLS 1.3 sessions */
	gnutls_x509_trust_list_t trust; /* client CAs, to verify clients */
	int pk; /* the certificate's public key algorithm (gnutls_pk_algorithm_t) */
	struct web_files files; /* what the load read, to notice changes */
};

struct request {
	struct MHD_Connection *conn;
	struct cfg *cfg;
	enum rq_state state;
	bool authed;
	bool auth_ok;
	bool gzip;
	bool in_flight;	   /* counted in srv.in_flight (--web.max-requests) */
	bool settled;	   /* the final call came once (on_request()) */
	char *user, *pass; /* for the verifier */
	const char *hash;  /* the user's bcrypt hash in cfg, or cfg's dummy */
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
	unsigned char mac[32]; /* HMAC-SHA256 of user NUL hash NUL password */
	bool used, ok;
	unsigned long stamp;
};

/* A socket the exporter serves: its own, or one systemd passed. */
struct listener {
	int fd;
	char name[160]; /* what it is, for the log */
	struct MHD_Daemon *d;
	unsigned int pending; /* TLS: accepted, first byte not yet seen */
	time_t paused;	      /* TLS: out of fds, not accepting until then */
};

/*
 * Who a client is, for --web.max-connections-per-client: its IPv4
 * address (an IPv4-mapped IPv6 address is one), or the /64 of its IPv6
 * address, which is what one host or one customer gets; len 0 for a local
 * socket, which is not counted.
 */
struct client_key {
	unsigned char b[8];
	unsigned char len;
};

enum conn_phase {
	CONN_REQUEST, /* waiting for (the rest of) a request: a deadline */
	CONN_ANSWER,  /* its answer is being made (scrape, bcrypt): none */
	CONN_SENDING, /* its answer is queued: a deadline to read it */
};

/*
 * A connection libmicrohttpd serves, from its start to its end (its
 * socket context), on srv.conns.  The deadline is the main thread's to
 * enforce (conn_watch()); the rest, for TLS, what the handshake did.
 */
struct conn {
	struct conn *prev, *next; /* srv.conns, under srv.conn_lock */
	int fd;			  /* libmicrohttpd's until it says closed */
	char peer[INET6_ADDRSTRLEN + 16];
	struct client_key key;
	struct timespec start;
	bool refused; /* over --web.max-connections-per-client */
	/* Under srv.conn_lock: */
	enum conn_phase phase;
	struct timespec deadline; /* for the request, or the answer */
	int limit;		  /* the seconds that deadline gave */
	bool cut;		  /* shut down at its deadline */
	/* TLS */
	struct cfg *cfg;   /* the web config its handshake uses */
	bool hello;	   /* its ClientHello arrived */
	bool server_hello; /* ours went out */
	bool done;	   /* the handshake finished */
	bool logged;	   /* why it failed has been said */
};

/* A TLS connection on its way from the front to libmicrohttpd. */
struct handoff {
	int fd;
	struct timespec accepted;
	struct handoff *next;
};

static struct server {
	const char *cfg_path;
	pthread_mutex_t cfg_lock, reload_lock;
	struct cfg *cfg; /* the current web config, or NULL */
	/* Under reload_lock: the files of the last reload refused, if any. */
	struct web_files failed;
	bool tls; /* fixed at start */
	unsigned int max_connections;
	unsigned int max_per_client;
	unsigned int max_in_flight, in_flight; /* --web.max-requests */
	pthread_mutex_t conn_lock;
	struct conn *conns;	  /* every connection libmicrohttpd has */
	struct handoff *handoffs; /* TLS connections not started yet */
	bool fault_conn;	  /* KVMSTATS_TEST_FAULT=conn-alloc */
	bool fault_narrow;	  /* KVMSTATS_TEST_FAULT=no-narrowing */
	bool fault_front;	  /* KVMSTATS_TEST_FAULT=front-alloc */
	http_render_fn render;
	void *ctx;
	const char *telemetry_path;
	struct queue scrapes, auths;
	struct listener l[HTTP_MAX_LISTEN];
	size_t nl;
	pthread_t front; /* the TLS listeners' accept thread */
	bool front_started;
	int front_stop[2];
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
	.cfg_lock = PTHREAD_MUTEX_INITIALIZER,
	.reload_lock = PTHREAD_MUTEX_INITIALIZER,
	.conn_lock = PTHREAD_MUTEX_INITIALIZER,
	.front_stop = { -1, -1 },
};

/* ------------------------------------------------------------------ */
/* Listen addresses                                                    */

struct listen_addr {
	struct sockaddr_storage ss;
	unsigned int flags; /* MHD_USE_IPv6, MHD_USE_DUAL_STACK or 0 */
};

/*
 * "HOST:PORT" as Go's net.Listen takes it, and so node_exporter's
 * --web.listen-address: ":PORT" every address, IPv4 and IPv6, as is
 * "[::]:PORT"; "0.0.0.0:PORT" every IPv4 address only; an IPv4 address;
 * "[V6]:PORT" (with a zone too: [fe80::1%eth0]); or a host name, which,
 * as Go does, is resolved (getaddrinfo) to listen on one of its
 * addresses: the first IPv4 one, else the first (localhost too: 127.0.0.1
 * from /etc/hosts, as for Go).  With @resolve false, only the syntax is
 * checked (the command line); else -EADDRNOTAVAIL, with why in @err, when
 * a name does not resolve.
 */
static int parse_listen(const char *s, struct listen_addr *a, bool resolve,
			char *err, size_t errlen)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a->ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&a->ss;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	const char *colon = strrchr(s, ':');
	char host[256];
	size_t hl;
	char *end;
	long port;
	int r;

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
		hints.ai_family = AF_INET6;
		hints.ai_flags = AI_NUMERICHOST;
		if (getaddrinfo(host + 1, NULL, &hints, &res))
			return -EINVAL;
		memcpy(a6, res->ai_addr, sizeof(*a6));
		freeaddrinfo(res);
		a6->sin6_port = htons((uint16_t)port);
		a->flags = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ?
				   MHD_USE_DUAL_STACK :
				   MHD_USE_IPv6;
		return 0;
	}
	a4->sin_family = AF_INET;
	a4->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1)
		return 0;
	/* A host name: letters, digits, '-', '.' and '_' (RFC 1123, 2181). */
	if (host[strspn(
		    host,
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._")] ||
	    host[0] == '-' || host[0] == '.')
		return -EINVAL;
	if (!resolve)
		return 0;
	r = getaddrinfo(host, NULL, &hints, &res);
	if (r) {
		snprintf(err, errlen, "%s: %s", host,
			 r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET)
			break;
	if (!ai)
		for (ai = res; ai; ai = ai->ai_next)
			if (ai->ai_family == AF_INET6)
				break;
	if (!ai) {
		freeaddrinfo(res);
		snprintf(err, errlen, "%s: no IPv4 or IPv6 address", host);
		return -EADDRNOTAVAIL;
	}
	memset(&a->ss, 0, sizeof(a->ss));
	memcpy(&a->ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (a->ss.ss_family == AF_INET6) {
		a6->sin6_port = htons((uint16_t)port);
		a->flags = MHD_USE_IPv6;
	} else {
		a4->sin_port = htons((uint16_t)port);
	}
	return 0;
}

int http_check_listen(const char *addr)
{
	struct listen_addr a;

	return parse_listen(addr, &a, false, NULL, 0);
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

/*
 * The cache key of (@user, its bcrypt @hash, @pass), as exporter-toolkit
 * keys its cache: a verdict holds as long as the user has that hash, over
 * reloads, and a hash changed or a user taken out (checked against the
 * dummy hash then) never matches an older one.  An HMAC under a key drawn
 * at start, so the cache holds no password, nor anything to test one
 * against without the key.
 */
static int cred_mac(const char *user, const char *hash, const char *pass,
		    unsigned char *mac)
{
	size_t ul = strlen(user) + 1, hl = strlen(hash) + 1, pl = strlen(pass);
	char *msg = malloc(ul + hl + pl);
	int r;

	if (!msg)
		return -ENOMEM;
	memcpy(msg, user, ul);
	memcpy(msg + ul, hash, hl);
	memcpy(msg + ul + hl, pass, pl);
	r = gnutls_hmac_fast(GNUTLS_MAC_SHA256, srv.mac_key,
			     sizeof(srv.mac_key), msg, ul + hl + pl, mac);
	explicit_bzero(msg, ul + hl + pl);
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
 * 12).  An unknown user is checked against the config's dummy hash, of
 * its users' highest cost, and refused, so that the answer takes as long
 * as for a wrong password.
 */
static bool verify_password(const char *hash, bool known, struct crypt_data *cd,
			    const char *pass)
{
	const char *out = crypt_r(pass, hash, cd);
	bool ok;

	ok = out && strlen(out) == strlen(hash) &&
	     ct_equal(out, hash, strlen(hash));
	explicit_bzero(cd, sizeof(*cd));
	return known && ok;
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
			if (cred_mac(rq->user, rq->hash, rq->pass, mac)) {
				rq->auth_ok = false;
			} else if ((cached = cache_lookup(mac)) >= 0) {
				/* A request queued before ours had the same. */
				rq->auth_ok = cached;
			} else {
				rq->auth_ok =
					cd &&
					verify_password(rq->hash,
							rq->hash !=
								rq->cfg->dummy,
							cd, rq->pass);
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

/*
 * The user and password of a Basic Authorization header (RFC 7617), as
 * new strings, the password to be wiped.  Decoded here (GnuTLS' base64)
 * rather than by libmicrohttpd 0.9.75, whose C strings end at the first
 * NUL: "user:secret\0more" would be checked as "secret".  Go compares
 * every byte; a NUL in either, which no bcrypt hash of crypt(3) can
 * match, is refused.  -EINVAL when there are no such credentials.
 */
static int basic_credentials(struct MHD_Connection *c, char **user, char **pass)
{
	const char *v = NULL;
	size_t vl = 0, skip;
	gnutls_datum_t in, out = { NULL, 0 };
	const char *colon;
	int r = -EINVAL;

	*user = *pass = NULL;
	if (MHD_lookup_connection_value_n(c, MHD_HEADER_KIND,
					  MHD_HTTP_HEADER_AUTHORIZATION,
					  strlen(MHD_HTTP_HEADER_AUTHORIZATION),
					  &v, &vl) != MHD_YES ||
	    !v || vl < 6 || strncasecmp(v, "Basic ", 6))
		return -EINVAL;
	for (skip = 6; skip < vl && (v[skip] == ' ' || v[skip] == '\t');)
		skip++;
	in.data = (unsigned char *)v + skip;
	in.size = (unsigned int)(vl - skip);
	if (!in.size || gnutls_base64_decode2(&in, &out) < 0)
		return -EINVAL;
	colon = memchr(out.data, ':', out.size);
	if (colon && !memchr(out.data, '\0', out.size)) {
		size_t ul = (size_t)(colon - (const char *)out.data);

		*user = strndup((const char *)out.data, ul);
		*pass = strndup(colon + 1, out.size - ul - 1);
		r = *user && *pass ? 0 : -ENOMEM;
	}
	explicit_bzero(out.data, out.size);
	gnutls_free(out.data);
	return r;
}

static int check_auth(struct request *rq)
{
	const struct web_user *u;
	char *pass = NULL, *user = NULL;
	unsigned char mac[32];
	int cached, ret = AUTH_FAIL;

	if (basic_credentials(rq->conn, &user, &pass))
		goto out;
	u = web_config_user(rq->cfg->wc, user);
	rq->hash = u ? u->hash : rq->cfg->dummy;
	if (cred_mac(user, rq->hash, pass, mac))
		goto out;
	cached = cache_lookup(mac);
	if (cached >= 0) {
		ret = cached ? AUTH_OK : AUTH_FAIL;
		goto out;
	}
	rq->user = user;
	rq->pass = pass;
	user = pass = NULL;
	hand_off(&srv.auths, rq);
	ret = AUTH_PENDING;
out:
	if (pass)
		explicit_bzero(pass, strlen(pass));
	free(pass);
	free(user);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Logging what clients do wrong                                       */

/*
 * At most 20 lines a minute of what clients cause (TLS failures, plain
 * HTTP to a TLS port, libmicrohttpd's messages): hostile clients must not
 * flood the log.  The count of those left out is said once a minute.
 */
static bool log_allowed(void)
{
	time_t now = time(NULL);
	bool ok;

	pthread_mutex_lock(&srv.log_lock);
	if (now / 60 != srv.log_window) {
		if (srv.log_count > 20)
			logmsg(LOG_WARN,
			       "export: %u more messages about clients in the last minute",
			       srv.log_count - 20);
		srv.log_window = now / 60;
		srv.log_count = 0;
	}
	ok = ++srv.log_count <= 20;
	pthread_mutex_unlock(&srv.log_lock);
	return ok;
}

static void client_key(const struct sockaddr *sa, struct client_key *k)
{
	memset(k, 0, sizeof(*k));
	if (sa && sa->sa_family == AF_INET) {
		memcpy(k->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		k->len = 4;
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(k->b, a->s6_addr + 12, 4);
			k->len = 4;
		} else {
			memcpy(k->b, a->s6_addr, 8);
			k->len = 8;
		}
	}
}

static bool same_key(const struct client_key *a, const struct client_key *b)
{
	return a->len && a->len == b->len && !memcmp(a->b, b->b, a->len);
}

/*
 * How many connections libmicrohttpd has from @k, on every listener,
 * those being shut down aside.  Under srv.conn_lock.
 */
static unsigned int conns_from(const struct client_key *k)
{
	const struct conn *cn;
	unsigned int n = 0;

	for (cn = srv.conns; cn; cn = cn->next)
		n += !cn->cut && same_key(&cn->key, k);
	return n;
}

static void peer_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "%s", sa ? "a local socket" : "?");
	}
}

/* ------------------------------------------------------------------ */
/* TLS: the handshake, client certificates, and saying why it failed   */

static struct conn *conn_of(gnutls_session_t s)
{
	struct MHD_Connection *c = gnutls_session_get_ptr(s);
	const union MHD_ConnectionInfo *ci =
		c ? MHD_get_connection_info(
			    c, MHD_CONNECTION_INFO_SOCKET_CONTEXT) :
		    NULL;

	return ci ? ci->socket_context : NULL;
}

/*
 * The handshake of @s fails: send @alert (the client's TLS stack then says
 * why, instead of a closed connection) and log the peer and @why.
 */
static void tls_refuse(gnutls_session_t s, gnutls_alert_description_t alert,
		       const char *why)
{
	struct conn *cn = conn_of(s);
	const char *an = gnutls_alert_get_strname(alert);
	size_t i, drained = 0;
	char name[64], buf[4096];
	ssize_t r;
	int fd;

	/* GNUTLS_A_UNKNOWN_CA: the RFC's name, unknown_ca. */
	an = an && !strncmp(an, "GNUTLS_A_", 9) ? an + 9 : an ? an : "?";
	for (i = 0; an[i] && i + 1 < sizeof(name); i++)
		name[i] = (char)(an[i] >= 'A' && an[i] <= 'Z' ? an[i] + 32 :
								an[i]);
	name[i] = '\0';

	gnutls_alert_send(s, GNUTLS_AL_FATAL, alert);
	/*
	 * libmicrohttpd closes the connection next.  Closing with the
	 * client's next records unread (a TLS 1.3 client sends its request
	 * right after its Finished) would answer with a reset, which can
	 * overtake the alert: end our side, and read what is there.
	 */
	fd = gnutls_transport_get_int(s);
	if (fd >= 0) {
		shutdown(fd, SHUT_WR);
		while (drained < (64 << 10) &&
		       (r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			drained += (size_t)r;
	}
	if (cn)
		cn->logged = true;
	if (log_allowed())
		log_kv(LOG_WARN, "export: TLS handshake refused", "peer",
		       cn ? cn->peer : "?", "reason", why, "alert", name,
		       (const char *)NULL);
}

static bool san_allowed(const struct web_config *wc, gnutls_x509_crt_t crt)
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
		for (i = 0; i < wc->nsans; i++)
			if (!strcmp(v, wc->allowed_sans[i]))
				return true;
	}
}

/*
 * Called by GnuTLS during the handshake once the client's Certificate
 * message has arrived (with or without a certificate): non-zero ends the
 * handshake, after the alert that says why and a log line.
 */
static int verify_client(gnutls_session_t s)
{
	struct conn *cn = conn_of(s);
	const struct web_config *wc = cn && cn->cfg ? cn->cfg->wc : NULL;
	unsigned int n = 0, i, status = 0;
	const gnutls_datum_t *raw = gnutls_certificate_get_peers(s, &n);
	gnutls_x509_crt_t chain[16];
	char why[512];
	int ret = -1;

	if (!wc)
		return -1;
	if (!raw || !n) {
		if (wc->client_auth != WEB_REQUIRE_ANY_CLIENT_CERT &&
		    wc->client_auth != WEB_REQUIRE_AND_VERIFY_CLIENT_CERT &&
		    !wc->nsans)
			return 0;
		tls_refuse(
			s,
			gnutls_protocol_get_version(s) == GNUTLS_TLS1_3 ?
				GNUTLS_A_CERTIFICATE_REQUIRED :
				GNUTLS_A_BAD_CERTIFICATE,
			wc->nsans ?
				"no client certificate (client_allowed_sans needs one)" :
				"no client certificate (client_auth_type requires one)");
		return -1;
	}
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
	if (i < n) {
		tls_refuse(s, GNUTLS_A_BAD_CERTIFICATE,
			   "the client certificate does not parse");
		goto out;
	}
	if (wc->client_auth == WEB_VERIFY_CLIENT_CERT_IF_GIVEN ||
	    wc->client_auth == WEB_REQUIRE_AND_VERIFY_CLIENT_CERT) {
		gnutls_typed_vdata_st vd = {
			.type = GNUTLS_DT_KEY_PURPOSE_OID,
			.data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
		};
		gnutls_datum_t txt = { NULL, 0 };

		if (gnutls_x509_trust_list_verify_crt2(cn->cfg->trust, chain, n,
						       &vd, 1, 0, &status,
						       NULL) < 0)
			status = GNUTLS_CERT_INVALID;
		if (status) {
			gnutls_certificate_verification_status_print(
				status, GNUTLS_CRT_X509, &txt, 0);
			snprintf(
				why, sizeof(why),
				"the client certificate does not verify against client_ca_file: %s",
				txt.data ? (char *)txt.data : "invalid");
			gnutls_free(txt.data);
			tls_refuse(s,
				   status & GNUTLS_CERT_SIGNER_NOT_FOUND ?
					   GNUTLS_A_UNKNOWN_CA :
				   status & GNUTLS_CERT_EXPIRED ?
					   GNUTLS_A_CERTIFICATE_EXPIRED :
					   GNUTLS_A_BAD_CERTIFICATE,
				   why);
			goto out;
		}
	}
	if (wc->nsans && !san_allowed(wc, chain[0])) {
		tls_refuse(
			s, GNUTLS_A_ACCESS_DENIED,
			"no subject alternative name of the client certificate is in client_allowed_sans");
		goto out;
	}
	ret = 0;
out:
	while (i--)
		gnutls_x509_crt_deinit(chain[i]);
	return ret;
}

/* The versions a ClientHello's supported_versions extension offers. */
static int hello_ext(void *ctx, unsigned int id, const unsigned char *d,
		     unsigned int len)
{
	unsigned int *mask = ctx, i;

	if (id != 43 || !len) /* supported_versions (RFC 8446 4.2.1) */
		return 0;
	*mask |= 1u << 8; /* the extension is there */
	for (i = 1; i + 1 < len && i < 1u + d[0]; i += 2)
		if (d[i] == 3 && d[i + 1] >= 1 && d[i + 1] <= 4)
			*mask |= 1u << (d[i + 1] - 1);
	return 0;
}

static void versions_str(unsigned int mask, char *buf, size_t len)
{
	size_t off = 0;
	int v;

	buf[0] = '\0';
	for (v = 0; v < 4; v++)
		if (mask & (1u << v))
			off += (size_t)snprintf(buf + off, len - off,
						"%sTLS 1.%d", off ? ", " : "",
						v);
	if (!off)
		snprintf(buf, len, "no version kvmstats knows");
}

/* The cipher suites of a ClientHello (@msg: its body); false if malformed. */
static bool hello_suites(const gnutls_datum_t *msg, const unsigned char **list,
			 size_t *n)
{
	const unsigned char *d = msg->data;
	size_t off = 2 + 32, len; /* legacy_version, random */

	if (msg->size < off + 1)
		return false;
	off += 1 + d[off]; /* legacy_session_id */
	if (msg->size < off + 2)
		return false;
	len = (size_t)d[off] << 8 | d[off + 1];
	off += 2;
	if (len % 2 || msg->size < off + len)
		return false;
	*list = d + off;
	*n = len / 2;
	return true;
}

static bool has_suite(const unsigned char *list, size_t n,
		      const unsigned char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (list[2 * i] == id[0] && list[2 * i + 1] == id[1])
			return true;
	return false;
}

/* GnuTLS' name of suite @id. */
static const char *suite_name(const unsigned char *id)
{
	unsigned char sid[2];
	gnutls_kx_algorithm_t k;
	gnutls_cipher_algorithm_t c;
	gnutls_mac_algorithm_t m;
	gnutls_protocol_t min;
	const char *name;
	size_t i;

	for (i = 0; (name = gnutls_cipher_suite_info(i, sid, &k, &c, &m, &min));
	     i++)
		if (!memcmp(sid, id, 2))
			return name;
	return "?";
}

/* Is there a GnuTLS suite of TLS 1.2 or below made of these?  Its number. */
static bool gnutls_suite(int kx, int cipher, int mac, unsigned char *id)
{
	gnutls_kx_algorithm_t k;
	gnutls_cipher_algorithm_t c;
	gnutls_mac_algorithm_t m;
	gnutls_protocol_t min;
	size_t i;

	for (i = 0; gnutls_cipher_suite_info(i, id, &k, &c, &m, &min); i++)
		if ((int)k == kx && (int)c == cipher && (int)m == mac)
			return true;
	return false;
}

static bool listed(const struct web_config *wc, const unsigned char *id)
{
	size_t i;

	for (i = 0; i < wc->nsuites; i++)
		if (!memcmp(wc->suites[i].id, id, 2))
			return true;
	return false;
}

/* Can a certificate of public key @pk serve key exchange @kx? */
static bool kx_fits(int kx, int pk)
{
	switch (kx) {
	case GNUTLS_KX_ECDHE_ECDSA:
		return pk == GNUTLS_PK_ECDSA || pk == GNUTLS_PK_EDDSA_ED25519 ||
		       pk == GNUTLS_PK_EDDSA_ED448;
	case GNUTLS_KX_ECDHE_RSA:
		return pk == GNUTLS_PK_RSA || pk == GNUTLS_PK_RSA_PSS;
	case GNUTLS_KX_RSA:
		return pk == GNUTLS_PK_RSA;
	default:
		return false;
	}
}

/*
 * Would a session allowed every combination of the parts of @set (and
 * @more) be able to negotiate a suite that the client offers and the list
 * does not have?
 */
static bool adds_unlisted(const struct web_config *wc,
			  const struct web_suite *const *set, size_t n,
			  const struct web_suite *more,
			  const unsigned char *list, size_t nlist)
{
	size_t a, b, c;
	unsigned char id[2];

	for (a = 0; a <= n; a++)
		for (b = 0; b <= n; b++)
			for (c = 0; c <= n; c++) {
				const struct web_suite *x = a < n ? set[a] :
								    more,
						       *y = b < n ? set[b] :
								    more,
						       *z = c < n ? set[c] :
								    more;

				if (gnutls_suite(x->gkx, y->gcipher, z->gmac,
						 id) &&
				    has_suite(list, nlist, id) &&
				    !listed(wc, id))
					return true;
			}
	return false;
}

/*
 * TLS 1.2 or below, with cipher_suites: GnuTLS enables the parts of
 * suites (key exchanges, ciphers, MACs), so the config's priorities allow
 * every combination of the listed suites' parts, suites the list does not
 * have among them.  This session gets priorities of its own: the listed
 * suites the client offers and the certificate can serve, in the list's
 * order, leaving out any that would let a combination the client offers
 * and the list does not have in.  What GnuTLS then negotiates is a listed
 * suite (on_handshake() checks it too).  None: refused, and said why.
 */
static int narrow_suites(gnutls_session_t s, struct conn *cn,
			 const gnutls_datum_t *msg)
{
	const struct web_config *wc = cn->cfg->wc;
	const struct web_suite *set[32];
	const unsigned char *list;
	char prio[1024], part[64];
	const char *errpos = NULL;
	size_t nlist, n = 0, i, j;
	int r;

	if (!hello_suites(msg, &list, &nlist))
		return 0; /* GnuTLS will say it is malformed */
	for (i = 0; i < wc->nsuites && n < sizeof(set) / sizeof(set[0]); i++) {
		const struct web_suite *ws = &wc->suites[i];

		if (has_suite(list, nlist, ws->id) &&
		    kx_fits(ws->gkx, cn->cfg->pk) &&
		    !adds_unlisted(wc, set, n, ws, list, nlist))
			set[n++] = ws;
	}
	if (!n) {
		tls_refuse(
			s, GNUTLS_A_HANDSHAKE_FAILURE,
			"no cipher suite in common: the client offers none of cipher_suites that the certificate's key can use");
		return GNUTLS_E_NO_CIPHER_SUITES;
	}
	snprintf(prio, sizeof(prio), "%s:-CIPHER-ALL:-MAC-ALL:-KX-ALL",
		 wc->priorities_base);
	for (i = 0; i < n; i++) {
		const char *parts[3] = { set[i]->kx, set[i]->cipher,
					 set[i]->mac };

		for (j = 0; j < 3; j++) {
			size_t len = strlen(prio);

			if (len + 2 >= sizeof(prio))
				return GNUTLS_E_INTERNAL_ERROR;
			snprintf(part, sizeof(part), ":+%s:", parts[j]);
			prio[len] = ':'; /* so that the last one matches too */
			prio[len + 1] = '\0';
			r = strstr(prio, part) != NULL;
			prio[len] = '\0';
			if (r)
				continue;
			if (len + strlen(part) >= sizeof(prio))
				return GNUTLS_E_INTERNAL_ERROR;
			memcpy(prio + len, part, strlen(part) - 1);
			prio[len + strlen(part) - 1] = '\0';
		}
	}
	r = gnutls_priority_set_direct(s, prio, &errpos);
	return r < 0 ? GNUTLS_E_INTERNAL_ERROR : 0;
}

/*
 * The ClientHello, before GnuTLS negotiates: a client whose versions and
 * ours have nothing in common is told so (protocol_version) and logged
 * with both lists, which GnuTLS alone would not say.  The message is
 * parsed by GnuTLS (gnutls_ext_raw_parse); the two-byte versions and the
 * list of cipher suites are read here.
 */
static int check_hello(gnutls_session_t s, struct conn *cn,
		       const gnutls_datum_t *msg)
{
	const struct web_config *wc = cn->cfg->wc;
	unsigned int offered = 0, ours = 0;
	char theirs[64], mine[64], why[256];
	int v;

	if (msg->size < 2 ||
	    gnutls_ext_raw_parse(&offered, hello_ext, msg,
				 GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO) < 0)
		return 0; /* GnuTLS will say it is malformed */
	if (!(offered & (1u << 8)) && msg->data[0] == 3)
		for (v = 0; v < 4 && v + 1 <= msg->data[1]; v++)
			offered |= 1u << v; /* legacy_version: up to that one */
	offered &= 0xf;
	for (v = wc->min_version; v <= wc->max_version; v++)
		ours |= 1u << v;
	if (!(offered & ours)) {
		versions_str(offered, theirs, sizeof(theirs));
		versions_str(ours, mine, sizeof(mine));
		snprintf(
			why, sizeof(why),
			"no TLS version in common: the client offers %s, this exporter accepts %s (min_version, max_version)",
			theirs, mine);
		tls_refuse(s, GNUTLS_A_PROTOCOL_VERSION, why);
		return GNUTLS_E_UNSUPPORTED_VERSION_PACKET;
	}
	/*
	 * TLS 1.3 will be negotiated: with cipher_suites, its own
	 * priorities, whose suites the list does not narrow (as in Go).
	 * Else, with cipher_suites, the listed ones exactly.  GnuTLS reads
	 * the priorities after this hook.
	 */
	if ((offered & ours & (1u << 3)) && cn->cfg->prio13)
		return gnutls_priority_set(s, cn->cfg->prio13) < 0 ?
			       GNUTLS_E_INTERNAL_ERROR :
			       0;
	if (!(offered & ours & (1u << 3)) && wc->nsuites && !srv.fault_narrow)
		return narrow_suites(s, cn, msg);
	return 0;
}

/*
 * The ServerHello about to go out (@msg: its body): with cipher_suites,
 * its suite is one of them (narrow_suites() made it so; this makes sure).
 * TLS 1.3's are not configurable.
 */
static int check_suite(gnutls_session_t s, struct conn *cn,
		       const gnutls_datum_t *msg)
{
	const struct web_config *wc = cn->cfg->wc;
	size_t off = 2 + 32; /* legacy_version, random */
	char why[160];

	if (!wc->nsuites || gnutls_protocol_get_version(s) == GNUTLS_TLS1_3)
		return 0;
	if (msg && msg->size > off)
		off += 1 + msg->data[off]; /* legacy_session_id */
	if (msg && msg->size >= off + 2 && listed(wc, msg->data + off))
		return 0;
	if (msg && msg->size >= off + 2)
		snprintf(why, sizeof(why),
			 "the suite GnuTLS chose (%s) is not in cipher_suites",
			 suite_name(msg->data + off));
	else
		snprintf(why, sizeof(why), "a ServerHello that does not parse");
	tls_refuse(s, GNUTLS_A_HANDSHAKE_FAILURE, why);
	return GNUTLS_E_NO_CIPHER_SUITES;
}

static int on_handshake(gnutls_session_t s, unsigned int htype, unsigned when,
			unsigned int incoming, const gnutls_datum_t *msg)
{
	struct conn *cn = conn_of(s);

	if (!cn || !cn->cfg)
		return GNUTLS_E_INTERNAL_ERROR; /* never set up: fail closed */
	if (!incoming) {
		if (htype != GNUTLS_HANDSHAKE_SERVER_HELLO)
			return 0;
		if (when == GNUTLS_HOOK_PRE)
			return check_suite(s, cn, msg);
		cn->server_hello = true;
		return 0;
	}
	if (htype == GNUTLS_HANDSHAKE_CLIENT_HELLO && when == GNUTLS_HOOK_PRE) {
		cn->hello = true;
		return check_hello(s, cn, msg);
	}
	if (htype == GNUTLS_HANDSHAKE_FINISHED && when == GNUTLS_HOOK_POST)
		cn->done = true;
	return 0;
}

static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) +
	       (now.tv_nsec - t->tv_nsec) / 1e9;
}

static struct cfg *cfg_get(void);
static void cfg_put(struct cfg *c);
static void maybe_reload(void);

/*
 * A TLS connection starts: the current web config's credentials, its
 * priorities, and the hooks that check the client.  false when any of it
 * fails: the connection must then not go on, for it would go on with the
 * daemon's own credentials and no client-certificate check.
 */
static bool tls_start(struct MHD_Connection *c, struct conn *cn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t s = ci ? ci->tls_session : NULL;

	if (!s)
		return false;
	cn->cfg = cfg_get();
	if (!cn->cfg || !cn->cfg->cred ||
	    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cn->cfg->cred) <
		    0 ||
	    gnutls_priority_set(s, cn->cfg->prio) < 0)
		return false;
	/*
	 * Always ask, never let GnuTLS require: verify_client() sees a
	 * missing certificate too, and refuses it with the alert and a line.
	 */
	if (cn->cfg->wc->client_auth != WEB_NO_CLIENT_CERT) {
		gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
		gnutls_session_set_verify_function(s, verify_client);
	}
	gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_ANY,
					   GNUTLS_HOOK_BOTH, on_handshake);
	return true;
}

/* It ends: a handshake that failed and said nothing yet is logged. */
static void tls_end(struct conn *cn)
{
	char why[160];

	if (cn->hello && !cn->done && !cn->logged && log_allowed()) {
		if (cn->cut)
			snprintf(why, sizeof(why),
				 "the client did not finish it in %d s",
				 HEADER_TIMEOUT_S);
		else if (since(&cn->start) >= IDLE_TIMEOUT_S - 1)
			snprintf(why, sizeof(why),
				 "the client did not finish it in %d s",
				 IDLE_TIMEOUT_S);
		else if (cn->server_hello)
			snprintf(
				why, sizeof(why),
				"the client ended it after the server's certificate (does it trust the certificate? its own log says why)");
		else
			snprintf(
				why, sizeof(why),
				"GnuTLS refused the ClientHello (no cipher suite, group or signature algorithm in common, or a malformed message)");
		log_kv(LOG_WARN, "export: TLS handshake failed", "peer",
		       cn->peer, "reason", why, (const char *)NULL);
	}
}

/* Test hook: KVMSTATS_TEST_FAULT=conn-alloc fails that allocation. */
static struct conn *conn_alloc(void)
{
	return srv.fault_conn ? NULL : calloc(1, sizeof(struct conn));
}

static void ts_add(struct timespec *t, int s)
{
	t->tv_sec += s;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * A connection starts: on srv.conns, with HEADER_TIMEOUT_S from its
 * accept() (the TLS front's, for TLS) to send its request.  A connection
 * that cannot be set up is shut down, never served.
 */
static void conn_start(struct MHD_Connection *c, void **sctx)
{
	const union MHD_ConnectionInfo *fi =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ai =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	int fd = fi ? fi->connect_fd : -1;
	struct handoff **hp, *h;
	struct conn *cn = conn_alloc();

	*sctx = NULL;
	if (cn) {
		cn->fd = fd;
		clock_gettime(CLOCK_MONOTONIC, &cn->start);
		peer_name(ai ? ai->client_addr : NULL, cn->peer,
			  sizeof(cn->peer));
		client_key(ai ? ai->client_addr : NULL, &cn->key);
	}
	pthread_mutex_lock(&srv.conn_lock);
	for (hp = &srv.handoffs; *hp; hp = &(*hp)->next) {
		if ((*hp)->fd == fd) {
			h = *hp;
			*hp = h->next;
			if (cn)
				cn->start = h->accepted;
			free(h);
			break;
		}
	}
	if (cn) {
		cn->deadline = cn->start;
		ts_add(&cn->deadline, HEADER_TIMEOUT_S);
		cn->limit = HEADER_TIMEOUT_S;
		cn->phase = CONN_REQUEST;
		/* One client, every listener: --web.max-connections-per-client. */
		cn->refused = srv.max_per_client &&
			      conns_from(&cn->key) >= srv.max_per_client;
		cn->cut = cn->refused;
		cn->next = srv.conns;
		if (srv.conns)
			srv.conns->prev = cn;
		srv.conns = cn;
		*sctx = cn;
	}
	pthread_mutex_unlock(&srv.conn_lock);
	if (cn && !cn->refused && (!srv.tls || tls_start(c, cn)))
		return;
	if (cn && cn->refused) {
		/* Closed at once, answered nothing (on_request()). */
		if (fd >= 0)
			shutdown(fd, SHUT_RDWR);
		return;
	}
	/*
	 * Fail closed: no handshake can succeed without credentials, the
	 * socket is shut down (libmicrohttpd closes it), and on_request()
	 * answers nothing on a connection without its struct conn.
	 */
	if (srv.tls) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			c, MHD_CONNECTION_INFO_GNUTLS_SESSION);

		if (ci && ci->tls_session)
			gnutls_credentials_clear(ci->tls_session);
	}
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	if (log_allowed())
		logmsg(LOG_ERROR,
		       "export: cannot set up a connection from %s (out of memory?): closed",
		       cn ? cn->peer : "a client");
	if (cn) {
		pthread_mutex_lock(&srv.conn_lock);
		cn->cut = true;
		pthread_mutex_unlock(&srv.conn_lock);
	}
}

/* It ends (libmicrohttpd has not closed its socket yet). */
static void conn_end(struct conn *cn)
{
	pthread_mutex_lock(&srv.conn_lock);
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		srv.conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	pthread_mutex_unlock(&srv.conn_lock);
	if (srv.tls)
		tls_end(cn);
	cfg_put(cn->cfg);
	free(cn);
}

/*
 * Where a connection is in its requests: @phase, with a deadline @secs
 * from now (none for CONN_ANSWER); with @sooner, a request's deadline
 * never later than the one it has.
 */
static void conn_state(struct MHD_Connection *c, enum conn_phase phase,
		       int secs, bool sooner)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *cn = ci ? ci->socket_context : NULL;
	struct timespec t;

	if (!cn)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t);
	ts_add(&t, secs);
	pthread_mutex_lock(&srv.conn_lock);
	if (phase != CONN_ANSWER &&
	    (!sooner || cn->phase != phase || ts_before(&t, &cn->deadline))) {
		cn->deadline = t;
		cn->limit = secs;
	}
	cn->phase = phase;
	pthread_mutex_unlock(&srv.conn_lock);
}

/*
 * The main thread, once a second: shut down each connection past its
 * deadline for a request or for reading its answer (libmicrohttpd sees
 * the end of the stream and closes it; the socket stays libmicrohttpd's
 * until then, and conn_end() takes it off the list under the same lock
 * first).
 */
static void conn_watch(void)
{
	struct {
		char peer[INET6_ADDRSTRLEN + 16];
		char limit[16];
		bool sending;
	} cut[4];
	struct timespec now;
	unsigned int n = 0, i;
	struct conn *cn;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&srv.conn_lock);
	for (cn = srv.conns; cn; cn = cn->next) {
		if (cn->phase == CONN_ANSWER || cn->cut ||
		    ts_before(&now, &cn->deadline))
			continue;
		if (cn->fd >= 0)
			shutdown(cn->fd, SHUT_RDWR);
		cn->cut = true;
		if (n < 4) {
			snprintf(cut[n].peer, sizeof(cut[n].peer), "%s",
				 cn->peer);
			snprintf(cut[n].limit, sizeof(cut[n].limit), "%ds",
				 cn->limit);
			cut[n].sending = cn->phase == CONN_SENDING;
		}
		n++;
	}
	pthread_mutex_unlock(&srv.conn_lock);
	for (i = 0; i < n && i < 4; i++)
		if (log_allowed())
			log_kv(LOG_WARN,
			       cut[i].sending ?
				       "export: closed a connection that did not read its answer in time" :
				       "export: closed a connection that did not send its request in time",
			       "peer", cut[i].peer, "limit", cut[i].limit,
			       (const char *)NULL);
}

/* libmicrohttpd has a request line: the rest must follow in time. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)uri;
	conn_state(c, CONN_REQUEST, HEADER_TIMEOUT_S, true);
	return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **sctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		maybe_reload();
		conn_start(c, sctx);
	}
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (*sctx)
			conn_end(*sctx);
		*sctx = NULL;
		if (srv.max_conns > 0 &&
		    __atomic_add_fetch(&srv.closed, 1, __ATOMIC_RELAXED) ==
			    (unsigned long)srv.max_conns) {
			if (write(srv.wake[1], "m", 1) < 0) {
				/* The pipe is never full: one byte a reason. */
			}
		}
	}
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */

/*
 * Queue @resp, the answer to @rq: it must be read within SEND_TIMEOUT_S,
 * and a /metrics request no longer counts against --web.max-requests
 * (a client that does not read its answer must not hold a place there).
 */
static enum MHD_Result queue(struct request *rq, unsigned int status,
			     struct MHD_Response *resp)
{
	enum MHD_Result r = MHD_queue_response(rq->conn, status, resp);

	if (rq->in_flight) {
		__atomic_sub_fetch(&srv.in_flight, 1, __ATOMIC_RELAXED);
		rq->in_flight = false;
	}
	if (r == MHD_YES)
		conn_state(rq->conn, CONN_SENDING, SEND_TIMEOUT_S, false);
	return r;
}

static void add_headers(const struct request *rq, struct MHD_Response *resp)
{
	const struct web_config *wc = rq->cfg ? rq->cfg->wc : NULL;
	size_t i;

	for (i = 0; wc && i < wc->nheaders; i++)
		MHD_add_response_header(resp, wc->headers[i].name,
					wc->headers[i].value);
}

static enum MHD_Result respond(struct request *rq, unsigned int status,
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
	add_headers(rq, resp);
	r = queue(rq, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result respond_text(struct request *rq, unsigned int status,
				    const char *body)
{
	return respond(rq, status, "text/plain; charset=utf-8", body, NULL);
}

/*
 * A plain-text answer whose @body libmicrohttpd copies, with
 * X-Content-Type-Options: nosniff as Go's http.Error sends (node_exporter's
 * 503 is one), unless the web config sets that header.
 */
static enum MHD_Result respond_copy(struct request *rq, unsigned int status,
				    const char *body)
{
	const struct web_config *wc = rq->cfg ? rq->cfg->wc : NULL;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result r;
	bool nosniff = true;
	size_t i;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; charset=utf-8");
	for (i = 0; wc && i < wc->nheaders; i++)
		if (!strcasecmp(wc->headers[i].name, "X-Content-Type-Options"))
			nosniff = false;
	if (nosniff)
		MHD_add_response_header(resp, "X-Content-Type-Options",
					"nosniff");
	add_headers(rq, resp);
	r = queue(rq, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result send_result(struct request *rq)
{
	struct result *r = rq->res;
	bool gz = rq->gzip && r && r->gz;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!r)
		return respond_text(rq, MHD_HTTP_INTERNAL_SERVER_ERROR,
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
	add_headers(rq, resp);
	ret = queue(rq, r->status, resp);
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
		return respond_text(rq, MHD_HTTP_SERVICE_UNAVAILABLE,
				    "kvmstats: shutting down\n");
	if (rq->cfg && rq->cfg->wc && rq->cfg->wc->nusers && !rq->authed) {
		if (rq->state == RQ_AUTH_DONE) {
			rq->state = RQ_NEW;
			if (!rq->auth_ok)
				return respond_text(rq, MHD_HTTP_UNAUTHORIZED,
						    "Unauthorized\n");
		} else {
			switch (check_auth(rq)) {
			case AUTH_PENDING:
				return MHD_YES;
			case AUTH_FAIL:
				return respond_text(rq, MHD_HTTP_UNAUTHORIZED,
						    "Unauthorized\n");
			}
		}
		rq->authed = true;
	}
	if (!strcmp(url, srv.telemetry_path)) {
		if (!get && !head)
			return respond(rq, MHD_HTTP_METHOD_NOT_ALLOWED,
				       "text/plain; charset=utf-8",
				       "Method Not Allowed\n", "GET, HEAD");
		if (rq->state == RQ_SCRAPED)
			return send_result(rq);
		/*
		 * --web.max-requests, as node_exporter's: at most that many
		 * /metrics requests at once (waiting for, or getting, their
		 * answer), the others answered 503 at once.
		 */
		if (srv.max_in_flight && !rq->in_flight) {
			char msg[96];

			if (__atomic_add_fetch(&srv.in_flight, 1,
					       __ATOMIC_RELAXED) >
			    srv.max_in_flight) {
				__atomic_sub_fetch(&srv.in_flight, 1,
						   __ATOMIC_RELAXED);
				snprintf(
					msg, sizeof(msg),
					"Limit of concurrent requests reached (%u), try again later.\n",
					srv.max_in_flight);
				return respond_copy(
					rq, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
			}
			rq->in_flight = true;
		}
		/*
		 * HEAD scrapes too: its Content-Length (and Content-Encoding)
		 * are those GET would send at this moment, as RFC 9110 asks.
		 */
		rq->gzip = accepts_gzip(c);
		return hand_off(&srv.scrapes, rq);
	}
	if (!strcmp(url, "/")) {
		if (!get && !head)
			return respond(rq, MHD_HTTP_METHOD_NOT_ALLOWED,
				       "text/plain; charset=utf-8",
				       "Method Not Allowed\n", "GET, HEAD");
		return respond(rq, MHD_HTTP_OK, "text/html; charset=utf-8",
			       landing_page, NULL);
	}
	return respond_text(rq, MHD_HTTP_NOT_FOUND, "Not Found\n");
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
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

		/* A connection conn_start() could not set up: fail closed. */
		if (!ci || !ci->socket_context ||
		    ((struct conn *)ci->socket_context)->refused)
			return MHD_NO;
		/*
		 * The first call only has the head.  Answering now would make
		 * libmicrohttpd close the connection (it cannot know what
		 * follows); the next call comes once the request is complete.
		 * The web config is the one of the files as they are now
		 * (exporter-toolkit reads it at every request): a user taken
		 * out is refused from the next request on, on a connection
		 * kept alive too.
		 */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		maybe_reload();
		rq->conn = c;
		rq->cfg = cfg_get();
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a request body means nothing here */
		return MHD_YES;
	}
	/*
	 * The request is all in.  The first such call answers nothing:
	 * libmicrohttpd (0.9.75, 1.0) does not update what it waits for on
	 * a connection suspended in this call, so after the resume it would
	 * read again as if for the request, and a client that has shut down
	 * its side (shutdown(SHUT_WR), nc -N) would lose its answer to that
	 * end of stream.  Returned to once, it waits for us (no reading),
	 * and calls again at once: suspending then is safe.
	 */
	if (!rq->settled) {
		rq->settled = true;
		/* All in: no deadline while it is answered. */
		conn_state(c, CONN_ANSWER, 0, false);
		return MHD_YES;
	}
	return serve(rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)toe;
	/* Kept alive, it waits for its next request: the idle timeout. */
	conn_state(c, CONN_REQUEST, IDLE_TIMEOUT_S, false);
	if (!rq)
		return;
	if (rq->in_flight)
		__atomic_sub_fetch(&srv.in_flight, 1, __ATOMIC_RELAXED);
	result_put(rq->res);
	wipe_creds(rq);
	cfg_put(rq->cfg);
	free(rq);
	*con_cls = NULL;
}

/* MHD's messages, at most 20 a minute with the others about clients. */
static void on_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	pthread_mutex_lock(&srv.log_lock);
	snprintf(srv.log_last, sizeof(srv.log_last), "%s", msg);
	pthread_mutex_unlock(&srv.log_lock);
	/* The handshake failures MHD reports without a reason: said by tls_end(). */
	if (strstr(msg, "handshake message out of context"))
		return;
	if (log_allowed())
		logmsg(LOG_WARN, "export: %s", msg);
}

/* ------------------------------------------------------------------ */
/* The server                                                          */

static void on_signal(int sig)
{
	int saved = errno;

	if (write(srv.wake[1], sig == SIGHUP ? "h" : "s", 1) < 0) {
		/* Nothing to do: one byte is enough. */
	}
	errno = saved;
}

static unsigned int pool_size(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_POOL ? MAX_POOL : (unsigned int)n;
}

/* ------------------------------------------------------------------ */
/* The web config: loading, sharing, reloading                          */

static void cfg_free(struct cfg *c)
{
	if (!c)
		return;
	if (c->cred)
		gnutls_certificate_free_credentials(c->cred);
	if (c->prio)
		gnutls_priority_deinit(c->prio);
	if (c->prio13)
		gnutls_priority_deinit(c->prio13);
	if (c->trust)
		gnutls_x509_trust_list_deinit(c->trust, 1);
	web_config_free(c->wc);
	web_files_clear(&c->files);
	free(c);
}

static struct cfg *cfg_get(void)
{
	struct cfg *c;

	pthread_mutex_lock(&srv.cfg_lock);
	c = srv.cfg;
	if (c)
		c->refs++;
	pthread_mutex_unlock(&srv.cfg_lock);
	return c;
}

static void cfg_put(struct cfg *c)
{
	bool last;

	if (!c)
		return;
	pthread_mutex_lock(&srv.cfg_lock);
	last = !--c->refs;
	pthread_mutex_unlock(&srv.cfg_lock);
	if (last)
		cfg_free(c);
}

/*
 * Files are known to have changed by their state (stat(2)): device,
 * inode, size, modification and change times.  A change within a
 * timestamp's granularity of the moment a file was read (a kernel clock
 * tick, 4 ms at HZ=250; a second on file systems with coarse timestamps)
 * can leave that state the same, a same-size rewrite say: as git does
 * with "racily clean" index entries, a file whose change time is that
 * close to its read is uncertain, and read again once RACY_NS have
 * passed since its change time, whatever its state says.
 */
#define RACY_NS 2000000000LL

static long long ts_ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static bool file_uncertain(const struct web_file *f)
{
	return !f->err && ts_ns(&f->ctime) + RACY_NS > ts_ns(&f->seen);
}

/*
 * Has a file of @fs changed since it was read, or is one uncertain and
 * due to be read again (see RACY_NS)?
 */
static bool files_changed(const struct web_files *fs)
{
	struct timespec now;
	struct stat sb;
	size_t i;

	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 0; i < fs->n; i++) {
		const struct web_file *f = &fs->f[i];
		int err = stat(f->path, &sb) ? errno : 0;

		if (err != f->err)
			return true;
		if (err)
			continue;
		if (sb.st_dev != f->dev || sb.st_ino != f->ino ||
		    sb.st_size != f->size ||
		    ts_ns(&sb.st_mtim) != ts_ns(&f->mtime) ||
		    ts_ns(&sb.st_ctim) != ts_ns(&f->ctime))
			return true;
		if (file_uncertain(f) &&
		    ts_ns(&now) >= ts_ns(&f->ctime) + RACY_NS)
			return true;
	}
	return false;
}

/* Did @a and @b read the same files and find the same in them? */
static bool files_same(const struct web_files *a, const struct web_files *b)
{
	size_t i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->f[i].path, b->f[i].path) ||
		    a->f[i].err != b->f[i].err ||
		    memcmp(a->f[i].sha256, b->f[i].sha256,
			   sizeof(a->f[i].sha256)))
			return false;
	return true;
}

/*
 * How much a client must prove with its certificate: nothing, a
 * certificate (any, or a verified one if it sends one), a verified one.
 */
static int cert_rank(enum web_client_auth a)
{
	switch (a) {
	case WEB_REQUIRE_AND_VERIFY_CLIENT_CERT:
		return 2;
	case WEB_REQUIRE_ANY_CLIENT_CERT:
	case WEB_VERIFY_CLIENT_CERT_IF_GIVEN:
		return 1;
	default:
		return 0;
	}
}

/*
 * Does @n let in clients @o keeps out?  What it is, or NULL.  A file
 * rewritten in place is empty, or half written, for a moment: a reload
 * that a file change alone started must not open the exporter then.
 */
static const char *weakens(const struct web_config *o,
			   const struct web_config *n)
{
	if (!o)
		return NULL;
	if (o->nusers && !n->nusers)
		return "it takes out every basic_auth user";
	if (o->tls && n->tls &&
	    cert_rank(n->client_auth) < cert_rank(o->client_auth))
		return "its client_auth_type asks less of client certificates";
	if (o->nsans && !n->nsans)
		return "it drops client_allowed_sans";
	return NULL;
}

/*
 * The hash an unknown user's password is checked against: a bcrypt
 * setting (no hash: nothing matches it) of a random salt and the highest
 * cost of @wc's users, so that checking it takes as long as checking
 * theirs.  exporter-toolkit uses a fixed cost-10 hash.
 */
static bool dummy_hash(const struct web_config *wc, char *out, size_t len)
{
	unsigned long cost = 4;
	size_t i;

	for (i = 0; i < wc->nusers; i++) {
		/* $2y$NN$: checked by webconfig.c */
		unsigned long c = strtoul(wc->users[i].hash + 4, NULL, 10);

		if (c > cost && c <= 31)
			cost = c;
	}
	return crypt_gensalt_rn("$2b$", cost, NULL, 0, out, (int)len) != NULL;
}

/*
 * Read the web config at @path into a new cfg (or an empty one when @path
 * is NULL): the file, and for TLS the credentials each handshake gets
 * (certificate, key, the CA names a client may choose from), the priority
 * cache and the client CAs to verify with.  -errno with @err said; then
 * *@out is still a cfg (unless out of memory), for the files it read, to
 * be freed with cfg_free().
 */
static int cfg_load(const char *path, struct cfg **out, char *err,
		    size_t errlen)
{
	struct cfg *c = calloc(1, sizeof(*c));
	const char *errpos = NULL;
	struct web_config *wc;
	int r;

	*out = NULL;
	err[0] = '\0';
	if (!c)
		return -ENOMEM;
	c->refs = 1;
	if (!path) {
		*out = c;
		return 0;
	}
	r = web_config_load(path, &c->wc, &c->files, err, errlen);
	if (r) {
		*out = c; /* for its files: what failed */
		return r;
	}
	wc = c->wc;
	if (wc->nusers && !dummy_hash(wc, c->dummy, sizeof(c->dummy))) {
		snprintf(err, errlen, "%s: cannot make a bcrypt salt: %s", path,
			 strerror(errno));
		*out = c;
		return -EIO;
	}
	if (!wc->tls) {
		*out = c;
		return 0;
	}
	r = gnutls_certificate_allocate_credentials(&c->cred);
	if (r >= 0) {
		gnutls_datum_t cd = { (unsigned char *)wc->cert_pem,
				      (unsigned int)strlen(wc->cert_pem) };
		gnutls_datum_t kd = { (unsigned char *)wc->key_pem,
				      (unsigned int)strlen(wc->key_pem) };

		r = gnutls_certificate_set_x509_key_mem2(
			c->cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	}
	if (r >= 0) {
		/* Its key's algorithm: which suites it can serve. */
		gnutls_x509_crt_t *crts = NULL;
		unsigned int n = 0, i;

		r = gnutls_certificate_get_x509_crt(c->cred, 0, &crts, &n);
		if (r >= 0 && n)
			c->pk = gnutls_x509_crt_get_pk_algorithm(crts[0], NULL);
		for (i = 0; i < n; i++)
			gnutls_x509_crt_deinit(crts[i]);
		gnutls_free(crts);
	}
	if (r >= 0 && wc->client_ca_pem) {
		gnutls_datum_t ca = { (unsigned char *)wc->client_ca_pem,
				      (unsigned int)strlen(wc->client_ca_pem) };

		r = gnutls_certificate_set_x509_trust_mem(c->cred, &ca,
							  GNUTLS_X509_FMT_PEM);
		if (r > 0)
			r = gnutls_x509_trust_list_init(&c->trust, 0);
		if (r >= 0 && gnutls_x509_trust_list_add_trust_mem(
				      c->trust, &ca, NULL, GNUTLS_X509_FMT_PEM,
				      0, 0) <= 0)
			r = GNUTLS_E_NO_CERTIFICATE_FOUND;
	}
	if (r >= 0)
		r = gnutls_priority_init(&c->prio, wc->priorities, &errpos);
	if (r >= 0 && wc->priorities13)
		r = gnutls_priority_init(&c->prio13, wc->priorities13, &errpos);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path, gnutls_strerror(r));
		*out = c;
		return -EINVAL;
	}
	*out = c;
	return 0;
}

/*
 * Load the web config again (@if_changed: only if its files changed
 * since they were read, or are uncertain and due, and differ from those
 * of the last reload refused); an invalid one is logged and the current
 * one kept, as is one that turns TLS on or off (that needs other
 * listeners: a restart) and, unless @forced (SIGHUP), one that weakens
 * authentication (weakens()).  Contents the same as the current one's
 * are taken without a word.  0 or -errno.
 */
static int reload(const char *why, bool if_changed, bool forced)
{
	struct cfg *c = NULL, *old;
	const char *weaker = NULL;
	char err[512];
	bool same, said;
	int r;

	if (!srv.cfg_path)
		return 0;
	pthread_mutex_lock(&srv.reload_lock);
	old = cfg_get();
	if (if_changed && (!old || !files_changed(&old->files) ||
			   (srv.failed.n && !files_changed(&srv.failed)))) {
		/* Another thread did it, or it is what was refused. */
		cfg_put(old);
		pthread_mutex_unlock(&srv.reload_lock);
		return 0;
	}
	r = cfg_load(srv.cfg_path, &c, err, sizeof(err));
	if (!c) {
		cfg_put(old);
		pthread_mutex_unlock(&srv.reload_lock);
		return r;
	}
	if (!r && c->wc->tls != srv.tls) {
		snprintf(err, sizeof(err),
			 "%s: it turns TLS %s, which needs a restart",
			 srv.cfg_path, srv.tls ? "off" : "on");
		r = -EINVAL;
	}
	if (!r && !forced && old && (weaker = weakens(old->wc, c->wc))) {
		snprintf(
			err, sizeof(err),
			"%s: %s; a file rewritten in place is empty or partial for a moment, so a change of the file alone does not apply that: if it is meant, send SIGHUP (systemctl reload)",
			srv.cfg_path, weaker);
		r = -EPERM;
	}
	if (r) {
		/* Said once for these contents, not at every request. */
		said = srv.failed.n && files_same(&srv.failed, &c->files);
		web_files_clear(&srv.failed);
		srv.failed = c->files;
		memset(&c->files, 0, sizeof(c->files));
		cfg_free(c);
		if (!said || forced)
			log_kv(weaker ? LOG_WARN : LOG_ERROR,
			       weaker ?
				       "export: web config changed, not applied" :
				       "export: reloading the web config failed, keeping the one loaded before",
			       "why", why, "error", err, (const char *)NULL);
	} else {
		same = old && files_same(&old->files, &c->files);
		pthread_mutex_lock(&srv.cfg_lock);
		srv.cfg = c;
		pthread_mutex_unlock(&srv.cfg_lock);
		web_files_clear(&srv.failed);
		cfg_put(old); /* the server's reference */
		if (!same || forced)
			log_kv(LOG_INFO, "export: web config reloaded", "why",
			       why, "file", srv.cfg_path, (const char *)NULL);
	}
	cfg_put(old);
	pthread_mutex_unlock(&srv.reload_lock);
	return r;
}

/*
 * At each new connection and each request: has the config file, or a
 * certificate, key or CA file it names, changed since it was read (or is
 * one uncertain, see RACY_NS)?  Then reload, so that a rotated
 * certificate is served from the next handshake on and a user taken out
 * is refused from the next request on.  A few stat(2)s a request; a
 * reload under way on another thread is waited for, so the caller gets
 * the config of the files as they are.
 */
static void maybe_reload(void)
{
	struct cfg *c;
	bool changed;

	if (!srv.cfg_path)
		return;
	c = cfg_get();
	changed = c && files_changed(&c->files);
	cfg_put(c);
	if (changed)
		reload("a file changed", true, false);
}

/* ------------------------------------------------------------------ */
/* Listening sockets                                                    */

static int open_listener(const char *spec, struct listener *l, char *err,
			 size_t errlen)
{
	struct listen_addr a;
	char addr[INET6_ADDRSTRLEN + 16];
	socklen_t len;
	int fd, one = 1, v6only, r;

	err[0] = '\0';
	r = parse_listen(spec, &a, true, err, errlen);
	if (r)
		return r;
	listen_fallback(&a);
	fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (a.ss.ss_family == AF_INET6) {
		v6only = a.flags != MHD_USE_DUAL_STACK;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
			   sizeof(v6only));
	}
	len = a.ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
	if (bind(fd, (struct sockaddr *)&a.ss, len) || listen(fd, SOMAXCONN)) {
		int e = -errno;

		close(fd);
		return e;
	}
	l->fd = fd;
	/* A host name says which of its addresses it became. */
	peer_name((struct sockaddr *)&a.ss, addr, sizeof(addr));
	if (strchr("[0123456789:", spec[0]))
		snprintf(l->name, sizeof(l->name), "%s", spec);
	else
		snprintf(l->name, sizeof(l->name), "%s (%.*s)", spec,
			 (int)(strrchr(addr, ':') - addr), addr);
	return 0;
}

/*
 * The sockets systemd passes a socket-activated service, through
 * libsystemd (sd_listen_fds_with_names(3)): it checks LISTEN_PID,
 * LISTEN_FDS and LISTEN_FDNAMES, unsets them, and makes the fds
 * close-on-exec.  Each must be a listening stream socket.
 */
static int systemd_listeners(void)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names), i, rc = 0;

	if (n < 0) {
		logmsg(LOG_ERROR,
		       "export: --web.systemd-socket: the sockets systemd passes are not valid (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES): %s",
		       strerror(-n));
		return EXIT_LISTEN;
	}
	if (n == 0) {
		logmsg(LOG_ERROR,
		       "export: --web.systemd-socket: no sockets from systemd (LISTEN_PID, LISTEN_FDS): start it from a .socket unit, or use --listen");
		rc = EXIT_LISTEN;
	} else if (n > HTTP_MAX_LISTEN) {
		logmsg(LOG_ERROR,
		       "export: --web.systemd-socket: %d sockets, at most %d",
		       n, HTTP_MAX_LISTEN);
		rc = EXIT_LISTEN;
	}
	for (i = 0; !rc && i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = SD_LISTEN_FDS_START + i;
		char peer[INET6_ADDRSTRLEN + 16];
		const char *name = names && names[i] ? names[i] : "unknown";

		if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0 ||
		    getsockname(fd, (void *)&ss, &sl)) {
			logmsg(LOG_ERROR,
			       "export: --web.systemd-socket: fd %d (%s) is not a listening stream socket",
			       fd, name);
			rc = EXIT_LISTEN;
			break;
		}
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		peer_name((struct sockaddr *)&ss, peer, sizeof(peer));
		srv.l[srv.nl].fd = fd;
		/* systemd names an unnamed socket "unknown": not worth saying. */
		if (strcmp(name, "unknown"))
			snprintf(srv.l[srv.nl].name, sizeof(srv.l[0].name),
				 "systemd socket %s (%.64s)", peer, name);
		else
			snprintf(srv.l[srv.nl].name, sizeof(srv.l[0].name),
				 "systemd socket %s", peer);
		srv.nl++;
	}
	/* The ones not served: passed, but not ours to keep open. */
	for (; rc && i < n; i++)
		if (i >= (int)srv.nl)
			close(SD_LISTEN_FDS_START + i);
	for (i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The TLS front: what arrives first on a TLS listener                  */

/*
 * A TLS listener's connections are accepted here, not by libmicrohttpd,
 * which would meet plain HTTP with a TLS error and a closed connection.
 * The first byte decides: a TLS handshake record (22) goes to
 * libmicrohttpd (MHD_add_connection), with the time it was accepted, from
 * which its deadline runs on; anything else is plain HTTP, and gets a 400
 * that says to use https.  A connection that sends nothing is closed
 * after HEADER_TIMEOUT_S; at most --web.max-connections wait on each
 * listener, and --web.max-connections-per-client from one address.
 */
struct pending {
	int fd;
	struct listener *l;
	struct sockaddr_storage ss;
	socklen_t sl;
	struct client_key key;
	struct timespec accepted;
	time_t deadline;
	bool draining; /* the 400 is sent: read what is left, then close */
	struct pending *next;
};

static const char plain_to_tls[] =
	"HTTP/1.1 400 Bad Request\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Connection: close\r\n"
	"Content-Length: 82\r\n"
	"\r\n"
	"kvmstats: this port serves HTTPS; the request came as plain HTTP (use https://).\n";

static void pending_close(struct pending **pp, int ep)
{
	struct pending *p = *pp;

	epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
	close(p->fd);
	p->l->pending--;
	*pp = p->next;
	free(p);
}

static void pending_ready(struct pending **pp, int ep)
{
	struct pending *p = *pp;
	unsigned char b;
	char buf[4096], peer[INET6_ADDRSTRLEN + 16];
	ssize_t r;

	if (p->draining) {
		while ((r = read(p->fd, buf, sizeof(buf))) > 0)
			;
		if (r == 0 || errno != EAGAIN)
			pending_close(pp, ep);
		return;
	}
	r = recv(p->fd, &b, 1, MSG_PEEK);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		pending_close(pp, ep);
		return;
	}
	if (b == 22) {
		struct handoff *h = malloc(sizeof(*h)), **hp;

		epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
		p->l->pending--;
		*pp = p->next;
		pthread_mutex_lock(&srv.conn_lock);
		for (hp = &srv.handoffs; *hp; hp = &(*hp)->next)
			if ((*hp)->fd == p->fd) { /* left by a refused one */
				free(h);
				h = *hp;
				*hp = h->next;
				break;
			}
		if (h) {
			h->fd = p->fd;
			h->accepted = p->accepted;
			h->next = srv.handoffs;
			srv.handoffs = h;
		}
		pthread_mutex_unlock(&srv.conn_lock);
		/* MHD owns the fd now, and closes it if it cannot take it. */
		if (MHD_add_connection(p->l->d, p->fd,
				       (struct sockaddr *)&p->ss,
				       p->sl) != MHD_YES) {
			pthread_mutex_lock(&srv.conn_lock);
			for (hp = &srv.handoffs; *hp; hp = &(*hp)->next)
				if ((*hp)->fd == p->fd) {
					h = *hp;
					*hp = h->next;
					free(h);
					break;
				}
			pthread_mutex_unlock(&srv.conn_lock);
		}
		free(p);
		return;
	}
	peer_name((struct sockaddr *)&p->ss, peer, sizeof(peer));
	if (log_allowed())
		log_kv(LOG_WARN,
		       "export: plain HTTP on a TLS listener, answered 400",
		       "peer", peer, "listener", p->l->name,
		       (const char *)NULL);
	if (send(p->fd, plain_to_tls, sizeof(plain_to_tls) - 1, MSG_NOSIGNAL) <
	    0) {
		pending_close(pp, ep);
		return;
	}
	/* Closing with the request unread would reset the answer away. */
	shutdown(p->fd, SHUT_WR);
	p->draining = true;
	p->deadline = time(NULL) + 2;
}

/*
 * @l cannot take a connection now (out of fds or memory): its socket is
 * level-triggered, so the front would spin on it.  It rests a second.
 */
static void front_pause(struct listener *l, int ep, int err)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, l->fd, NULL);
	l->paused = time(NULL) + 1;
	if (log_allowed())
		log_kv(LOG_WARN,
		       "export: cannot accept connections for a second",
		       "listener", l->name, "error", strerror(err),
		       (const char *)NULL);
}

/* Test hook: KVMSTATS_TEST_FAULT=front-alloc fails that allocation. */
static struct pending *pending_alloc(void)
{
	return srv.fault_front ? NULL : calloc(1, sizeof(struct pending));
}

/* Accept what @l has; out of fds or memory, @l pauses a second. */
static void front_accept(struct listener *l, struct pending **head, int ep)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };

	for (;;) {
		struct pending *p = pending_alloc(), *q;
		unsigned int same = 0;
		int fd;

		if (!p) {
			front_pause(l, ep, ENOMEM);
			return;
		}
		p->sl = sizeof(p->ss);
		fd = accept4(l->fd, (void *)&p->ss, &p->sl,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int e = errno;

			free(p);
			if (e == EMFILE || e == ENFILE || e == ENOBUFS ||
			    e == ENOMEM)
				front_pause(l, ep, e);
			return;
		}
		/*
		 * The client's connections waiting here, on every listener,
		 * and those libmicrohttpd has.
		 */
		client_key((struct sockaddr *)&p->ss, &p->key);
		if (srv.max_per_client && p->key.len) {
			for (q = *head; q; q = q->next)
				same += same_key(&q->key, &p->key);
			pthread_mutex_lock(&srv.conn_lock);
			same += conns_from(&p->key);
			pthread_mutex_unlock(&srv.conn_lock);
		}
		if (l->pending >= srv.max_connections ||
		    (srv.max_per_client && same >= srv.max_per_client)) {
			close(fd);
			free(p);
			continue;
		}
		p->fd = fd;
		p->l = l;
		clock_gettime(CLOCK_MONOTONIC, &p->accepted);
		p->deadline = time(NULL) + HEADER_TIMEOUT_S;
		l->pending++;
		ev.data.ptr = p;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
			close(fd);
			l->pending--;
			free(p);
			continue;
		}
		p->next = *head;
		*head = p;
	}
}

static void *front(void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[64];
	struct pending *head = NULL, **pp;
	int ep = epoll_create1(EPOLL_CLOEXEC), n, i;
	size_t k;

	(void)arg;
	if (ep < 0)
		return NULL;
	ev.data.ptr = &srv.front_stop;
	epoll_ctl(ep, EPOLL_CTL_ADD, srv.front_stop[0], &ev);
	for (k = 0; k < srv.nl; k++) {
		ev.data.ptr = &srv.l[k];
		epoll_ctl(ep, EPOLL_CTL_ADD, srv.l[k].fd, &ev);
	}
	for (;;) {
		bool stop = false;
		time_t now;

		n = epoll_wait(ep, evs, 64, 1000);
		for (i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;
			struct listener *l = ptr;

			if (ptr == &srv.front_stop) {
				stop = true;
				continue;
			}
			if (l >= srv.l && l < srv.l + srv.nl) {
				front_accept(l, &head, ep);
				continue;
			}
			for (pp = &head; *pp; pp = &(*pp)->next)
				if (*pp == ptr) {
					pending_ready(pp, ep);
					break;
				}
		}
		if (stop)
			break;
		now = time(NULL);
		for (pp = &head; *pp;) {
			if ((*pp)->deadline <= now)
				pending_close(pp, ep);
			else
				pp = &(*pp)->next;
		}
		for (k = 0; k < srv.nl; k++) {
			if (!srv.l[k].paused || srv.l[k].paused > now)
				continue;
			srv.l[k].paused = 0;
			ev.events = EPOLLIN;
			ev.data.ptr = &srv.l[k];
			epoll_ctl(ep, EPOLL_CTL_ADD, srv.l[k].fd, &ev);
		}
	}
	while (head)
		pending_close(&head, ep);
	close(ep);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The server                                                          */

static struct MHD_Daemon *start_daemon(const struct http_opts *o,
				       struct listener *l, const struct cfg *c)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			     MHD_USE_ITC;
	struct MHD_OptionItem opts[24];
	size_t n = 0;

#define OPT(o_, v_, p_) \
	(opts[n++] = (struct MHD_OptionItem){ (o_), (intptr_t)(v_), (p_) })
	/* The logger first, or MHD's own logs what comes before. */
	OPT(MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL);
	OPT(MHD_OPTION_THREAD_POOL_SIZE, pool_size(), NULL);
	OPT(MHD_OPTION_CONNECTION_LIMIT, o->max_connections, NULL);
	OPT(MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S, NULL);
	OPT(MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY, NULL);
	OPT(MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL);
	OPT(MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL);
	OPT(MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL);
	OPT(MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, NULL);
	if (srv.tls) {
		/*
		 * The TLS front accepts; every session gets the credentials
		 * of the web config current at its start (tls_start()).
		 */
		flags |= MHD_USE_TLS | MHD_USE_NO_LISTEN_SOCKET;
		OPT(MHD_OPTION_HTTPS_MEM_CERT, 0, c->wc->cert_pem);
		OPT(MHD_OPTION_HTTPS_MEM_KEY, 0, c->wc->key_pem);
		OPT(MHD_OPTION_HTTPS_PRIORITIES, 0, c->wc->priorities);
	} else {
		OPT(MHD_OPTION_LISTEN_SOCKET, l->fd, NULL);
		OPT(MHD_OPTION_LISTEN_BACKLOG_SIZE, SOMAXCONN, NULL);
	}
	OPT(MHD_OPTION_END, 0, NULL);
#undef OPT
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
				MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static void stop_all(void)
{
	size_t i;

	if (srv.front_started) {
		if (write(srv.front_stop[1], "s", 1) < 0) {
			/* The thread also looks every second. */
		}
		pthread_join(srv.front, NULL);
		srv.front_started = false;
	}
	/* Answer what is queued, then refuse: no connection stays suspended. */
	queue_stop(&srv.scrapes);
	queue_stop(&srv.auths);
	for (i = 0; i < srv.nl; i++) {
		if (srv.l[i].d)
			MHD_stop_daemon(srv.l[i].d);
		/* MHD closes a listen socket it was given, not the TLS ones. */
		if (srv.tls || !srv.l[i].d)
			close(srv.l[i].fd);
		srv.l[i].d = NULL;
	}
	srv.nl = 0;
	while (srv.handoffs) {
		struct handoff *h = srv.handoffs;

		srv.handoffs = h->next;
		free(h);
	}
	cfg_put(srv.cfg);
	srv.cfg = NULL;
	explicit_bzero(srv.mac_key, sizeof(srv.mac_key));
	explicit_bzero(srv.cache, sizeof(srv.cache));
	web_files_clear(&srv.failed);
	for (i = 0; i < 2; i++) {
		if (srv.wake[i] >= 0)
			close(srv.wake[i]);
		if (srv.front_stop[i] >= 0)
			close(srv.front_stop[i]);
		srv.wake[i] = srv.front_stop[i] = -1;
	}
}

/*
 * SIGHUP: reload the web config, and tell systemd that it is reloading
 * and then ready again (RELOADING=1 with MONOTONIC_USEC, which
 * Type=notify-reload wants, then READY=1), whether the new config was
 * taken or the one before kept, or there is none to reload: a manager
 * that waits for READY=1 after a SIGHUP must get it.
 */
static void sighup(void)
{
	struct timespec t;
	int r = 0;

	clock_gettime(CLOCK_MONOTONIC, &t);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
		   (unsigned long long)t.tv_sec * 1000000ULL +
			   (unsigned long long)t.tv_nsec / 1000);
	if (srv.cfg_path)
		r = reload("SIGHUP", false, true);
	else
		logmsg(LOG_INFO,
		       "export: SIGHUP: no --web.config.file to reload");
	sd_notifyf(
		0, "READY=1\nSTATUS=serving %s; %s", srv.tls ? "https" : "http",
		!srv.cfg_path ? "no web config to reload" :
		r ? "the web config did not reload (see the log): the one before is used" :
		    "web config reloaded");
}

int http_serve(const struct http_opts *o, http_render_fn render, void *ctx)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, old;
	char err[512], c;
	const char *fault;
	struct cfg *cfg;
	size_t i;
	int r, rc = EXIT_OK;

	srv.render = render;
	srv.ctx = ctx;
	srv.telemetry_path = o->telemetry_path;
	snprintf(landing_page, sizeof(landing_page), landing_fmt,
		 strcmp(o->telemetry_path, "/metrics") ? o->telemetry_path :
							 "metrics");
	srv.max_conns = o->max_requests;
	srv.max_connections = o->max_connections;
	srv.max_per_client = o->max_per_client;
	srv.max_in_flight = o->max_in_flight;
	fault = getenv("KVMSTATS_TEST_FAULT");
	srv.fault_conn = fault && !strcmp(fault, "conn-alloc");
	srv.fault_narrow = fault && !strcmp(fault, "no-narrowing");
	srv.fault_front = fault && !strcmp(fault, "front-alloc");
	srv.scrapes.tail = &srv.scrapes.head;
	srv.auths.tail = &srv.auths.head;
	srv.cfg_path = o->web_config;
	r = cfg_load(o->web_config, &cfg, err, sizeof(err));
	if (r) {
		logmsg(LOG_ERROR, "export: --web.config.file %s",
		       err[0] ? err : strerror(-r));
		cfg_free(cfg);
		return EXIT_USAGE;
	}
	srv.cfg = cfg;
	srv.tls = cfg->wc && cfg->wc->tls;
	if (gnutls_rnd(GNUTLS_RND_KEY, srv.mac_key, sizeof(srv.mac_key)) < 0 ||
	    pipe2(srv.wake, O_CLOEXEC) || pipe2(srv.front_stop, O_CLOEXEC)) {
		logmsg(LOG_ERROR, "export: cannot set up: %s", strerror(errno));
		stop_all();
		return EXIT_FAIL;
	}
	if (o->systemd_socket) {
		rc = systemd_listeners();
	} else {
		for (i = 0; i < o->nlisten; i++) {
			r = open_listener(o->listen[i], &srv.l[i], err,
					  sizeof(err));
			if (r) {
				logmsg(LOG_ERROR,
				       "export: cannot listen on %s: %s",
				       o->listen[i],
				       err[0] ? err : strerror(-r));
				rc = r == -EINVAL ? EXIT_USAGE : EXIT_LISTEN;
				break;
			}
			srv.nl++;
		}
	}
	if (rc) {
		stop_all();
		return rc;
	}
	/*
	 * The fds the server may hold, out of the scrapes' budget: on every
	 * listener its socket and libmicrohttpd's (epolls, ITCs), up to
	 * --web.max-connections connections, and with TLS as many again
	 * waiting in the front for their first byte.
	 */
	if (o->fd_reserve)
		*o->fd_reserve =
			srv.nl * ((srv.tls ? 2 : 1) * srv.max_connections +
				  HTTP_FDS_PER_ADDR);

	/* The threads started from here on leave the signals to us. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&srv.scrapes.thread, NULL, scraper, NULL) == 0)
		srv.scrapes.started = true;
	/* Started whatever the config: a reload may add users. */
	if (pthread_create(&srv.auths.thread, NULL, verifier, NULL) == 0)
		srv.auths.started = true;
	if (!srv.scrapes.started || !srv.auths.started) {
		logmsg(LOG_ERROR, "export: cannot start a thread");
		rc = EXIT_FAIL;
	}
	for (i = 0; !rc && i < srv.nl; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		unsigned int port = 0;

		srv.log_last[0] = '\0';
		srv.l[i].d = start_daemon(o, &srv.l[i], cfg);
		if (!srv.l[i].d) {
			logmsg(LOG_ERROR, "export: cannot serve %s%s%s",
			       srv.l[i].name, srv.log_last[0] ? ": " : "",
			       srv.log_last);
			rc = EXIT_LISTEN;
			break;
		}
		if (!getsockname(srv.l[i].fd, (void *)&ss, &sl))
			port = ntohs(
				ss.ss_family == AF_INET6 ?
					((struct sockaddr_in6 *)&ss)
						->sin6_port :
					((struct sockaddr_in *)&ss)->sin_port);
		logmsg(LOG_INFO, "export: serving %s on %s (port %u)",
		       srv.tls ? "https" : "http", srv.l[i].name, port);
	}
	if (!rc && srv.tls) {
		if (pthread_create(&srv.front, NULL, front, NULL) == 0) {
			srv.front_started = true;
		} else {
			logmsg(LOG_ERROR, "export: cannot start a thread");
			rc = EXIT_FAIL;
		}
	}
	if (!rc) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		/* systemd's Type=notify: serving (sd_notify(3), no-op without). */
		sd_notifyf(0, "READY=1\nSTATUS=serving %s on %zu socket%s",
			   srv.tls ? "https" : "http", srv.nl,
			   srv.nl == 1 ? "" : "s");
		for (;;) {
			struct pollfd pf = { .fd = srv.wake[0],
					     .events = POLLIN };
			ssize_t got = 0;

			/* Once a second: the connections past their deadline. */
			if (poll(&pf, 1, 1000) > 0)
				got = read(srv.wake[0], &c, 1);
			conn_watch();
			if (got == 0 || (got < 0 && errno == EINTR))
				continue;
			if (got == 1 && c == 'h') {
				sighup();
				continue;
			}
			break;
		}
		sd_notify(0, "STOPPING=1");
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	stop_all();
	return rc;
}
