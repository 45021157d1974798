// SPDX-License-Identifier: GPL-2.0-only
/*
 * The exporter-toolkit web configuration file, read with libyaml.
 *
 * The file is checked as strictly as exporter-toolkit checks it (Go's
 * yaml.UnmarshalStrict): an unknown or repeated key, a value of the wrong
 * kind, a certificate that does not load or a password that is not a
 * bcrypt hash is an error naming the file, the line and the key, found at
 * startup rather than at the first scrape.  Relative file names are
 * relative to the configuration file's directory, as in exporter-toolkit.
 *
 * The TLS settings become a GnuTLS priority string: versions, cipher
 * suites (GnuTLS enables ciphers, MACs and key exchanges separately, so a
 * list of suites enables every combination of their parts: the server
 * narrows each session to the listed suites, from the list kept here),
 * curves and server precedence; with cipher_suites, a second one for
 * sessions that negotiate TLS 1.3, whose suites Go does not let a list
 * narrow.
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "webconfig.h"

#define FILE_MAX (1 << 20) /* certificates, keys, CA bundles, the config */

struct parse {
	const char *path;
	char dir[PATH_MAX];
	yaml_document_t doc;
	char *err;
	size_t errlen;
	struct web_config *c;
	struct web_files *files; /* what was read, or NULL */
	/* tls_server_config, before it is turned into PEM and priorities */
	const char *cert, *key, *client_ca;		   /* inline */
	const char *cert_file, *key_file, *client_ca_file; /* paths */
	yaml_node_t *cert_node, *key_node, *ca_node, *auth_node;
	int min_version, max_version; /* 0..3: TLS1.x */
	yaml_node_t *ciphers, *curves;
	bool prefer_server;
	bool tls_keys; /* any key that turns TLS on */
};

static int fail(struct parse *p, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct parse *p, const yaml_node_t *n, const char *fmt, ...)
{
	size_t off = 0;
	va_list ap;
	int r;

	if (n)
		r = snprintf(p->err, p->errlen, "%s:%lu: ", p->path,
			     (unsigned long)n->start_mark.line + 1);
	else
		r = snprintf(p->err, p->errlen, "%s: ", p->path);
	if (r > 0)
		off = (size_t)r < p->errlen ? (size_t)r : p->errlen;
	va_start(ap, fmt);
	vsnprintf(p->err + off, p->errlen - off, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *text(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* YAML's null: an empty plain scalar, ~ or null. */
static bool is_null(const yaml_node_t *n)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	v = text(n);
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") ||
	       !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static int want_scalar(struct parse *p, const yaml_node_t *n, const char *key,
		       const char **out)
{
	*out = NULL;
	if (n->type != YAML_SCALAR_NODE)
		return fail(p, n, "%s: want a string", key);
	*out = is_null(n) ? NULL : text(n);
	return 0;
}

/* Go's yaml.v2 booleans: true/false, yes/no, on/off in three cases. */
static int want_bool(struct parse *p, const yaml_node_t *n, const char *key,
		     bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "y" };
	static const char *const no[] = { "false", "no", "off", "n" };
	const char *v;
	size_t i;

	if (n->type != YAML_SCALAR_NODE || is_null(n))
		return fail(p, n, "%s: want true or false", key);
	v = text(n);
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return fail(p, n, "%s: want true or false, not '%s'", key, v);
}

/* A mapping (NULL for null), with no key twice. */
static int want_map(struct parse *p, yaml_node_t *n, const char *key,
		    yaml_node_t **out)
{
	yaml_node_pair_t *a, *b;

	*out = NULL;
	if (is_null(n))
		return 0;
	if (n->type != YAML_MAPPING_NODE)
		return fail(p, n, "%s: want a mapping", key);
	for (a = n->data.mapping.pairs.start; a < n->data.mapping.pairs.top;
	     a++) {
		yaml_node_t *ka = yaml_document_get_node(&p->doc, a->key);

		if (ka->type != YAML_SCALAR_NODE)
			return fail(p, ka, "%s: keys must be strings", key);
		for (b = n->data.mapping.pairs.start; b < a; b++) {
			yaml_node_t *kb =
				yaml_document_get_node(&p->doc, b->key);

			if (!strcmp(text(ka), text(kb)))
				return fail(p, ka, "%s: key '%s' given twice",
					    key, text(ka));
		}
	}
	*out = n;
	return 0;
}

static int want_strings(struct parse *p, yaml_node_t *n, const char *key,
			yaml_node_t **out)
{
	yaml_node_item_t *i;

	*out = NULL;
	if (is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(p, n, "%s: want a list of strings", key);
	for (i = n->data.sequence.items.start; i < n->data.sequence.items.top;
	     i++) {
		yaml_node_t *e = yaml_document_get_node(&p->doc, *i);

		if (e->type != YAML_SCALAR_NODE || is_null(e))
			return fail(p, e, "%s: want a list of strings", key);
	}
	*out = n;
	return 0;
}

static yaml_node_t *key_of(struct parse *p, const yaml_node_pair_t *pair)
{
	return yaml_document_get_node(&p->doc, pair->key);
}

static yaml_node_t *value_of(struct parse *p, const yaml_node_pair_t *pair)
{
	return yaml_document_get_node(&p->doc, pair->value);
}

/*
 * Read file @path (@key names it in errors) into a new string.  Only a
 * regular file: its type is looked at before it is opened, and it is
 * opened without blocking, so that a FIFO (or a file swapped for one in
 * between) is refused at once instead of waiting for a writer, which on a
 * reload would hold a network thread.  What was read, and the state of
 * the descriptor read just before, go to p->files.
 */
static int read_path(struct parse *p, const yaml_node_t *n, const char *key,
		     const char *path, char **out)
{
	struct web_file *wf = NULL;
	struct stat st, fst;
	ssize_t r = 0;
	size_t len = 0;
	char *buf;
	int fd, err;

	if (p->files && p->files->n < WEB_MAX_FILES) {
		wf = &p->files->f[p->files->n];
		memset(wf, 0, sizeof(*wf));
		wf->path = strdup(path);
		if (!wf->path)
			return -ENOMEM;
		p->files->n++;
	}
	if (stat(path, &st)) {
		err = -errno;
		goto failed;
	}
	if (wf) {
		/* Until it is open: a file that cannot be, changed. */
		wf->dev = st.st_dev;
		wf->ino = st.st_ino;
		wf->size = st.st_size;
		wf->mtime = st.st_mtim;
		wf->ctime = st.st_ctim;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > FILE_MAX)
		goto not_regular;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto failed;
	}
	if (fstat(fd, &fst) || !S_ISREG(fst.st_mode) ||
	    fst.st_size > FILE_MAX) {
		close(fd);
		goto not_regular;
	}
	if (wf) {
		wf->dev = fst.st_dev;
		wf->ino = fst.st_ino;
		wf->size = fst.st_size;
		wf->mtime = fst.st_mtim;
		wf->ctime = fst.st_ctim;
		clock_gettime(CLOCK_REALTIME, &wf->seen);
	}
	buf = malloc((size_t)fst.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < (size_t)fst.st_size) {
		r = read(fd, buf + len, (size_t)fst.st_size - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	err = r < 0 ? -errno : 0;
	close(fd);
	if (err) {
		free(buf);
		goto failed;
	}
	if (wf && gnutls_hash_fast(GNUTLS_DIG_SHA256, buf, len, wf->sha256))
		memset(wf->sha256, 0, sizeof(wf->sha256));
	if (memchr(buf, '\0', len)) {
		free(buf);
		return fail(p, n, "%s: %s: contains a NUL byte", key, path);
	}
	buf[len] = '\0';
	*out = buf;
	return 0;

failed:
	if (wf)
		wf->err = -err;
	if (n)
		fail(p, n, "%s: %s: %s", key, path, strerror(-err));
	else
		fail(p, NULL, "%s", strerror(-err));
	return err;
not_regular:
	if (n)
		return fail(p, n,
			    "%s: %s: not a regular file of at most %d bytes",
			    key, path, FILE_MAX);
	return fail(p, NULL, "not a regular file of at most %d bytes",
		    FILE_MAX);
}

/*
 * Read @name, relative to the configuration file's directory; its path
 * goes to *@where.
 */
static int read_file(struct parse *p, const yaml_node_t *n, const char *key,
		     const char *name, char **out, char **where)
{
	char path[PATH_MAX];
	int r;

	if (name[0] == '/')
		r = snprintf(path, sizeof(path), "%s", name);
	else
		r = snprintf(path, sizeof(path), "%s/%s", p->dir, name);
	if (r < 0 || (size_t)r >= sizeof(path))
		return fail(p, n, "%s: file name too long", key);
	*where = strdup(path);
	if (!*where)
		return -ENOMEM;
	return read_path(p, n, key, path, out);
}

static int version(struct parse *p, const yaml_node_t *n, const char *key,
		   int *out)
{
	static const char *const names[] = { "TLS10", "TLS11", "TLS12",
					     "TLS13" };
	const char *v;
	int i, err = want_scalar(p, n, key, &v);

	if (err || !v)
		return err;
	for (i = 0; i < 4; i++) {
		if (!strcmp(v, names[i])) {
			*out = i;
			return 0;
		}
	}
	return fail(p, n, "%s: '%s' is not one of TLS10, TLS11, TLS12, TLS13",
		    key, v);
}

static int client_auth(struct parse *p, const yaml_node_t *n)
{
	static const struct {
		const char *name;
		enum web_client_auth type;
	} types[] = {
		{ "NoClientCert", WEB_NO_CLIENT_CERT },
		{ "RequestClientCert", WEB_REQUEST_CLIENT_CERT },
		{ "RequireAnyClientCert", WEB_REQUIRE_ANY_CLIENT_CERT },
		{ "RequireClientCert", WEB_REQUIRE_ANY_CLIENT_CERT },
		{ "VerifyClientCertIfGiven", WEB_VERIFY_CLIENT_CERT_IF_GIVEN },
		{ "RequireAndVerifyClientCert",
		  WEB_REQUIRE_AND_VERIFY_CLIENT_CERT },
	};
	const char *v;
	size_t i;
	int err = want_scalar(p, n, "client_auth_type", &v);

	if (err || !v)
		return err;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (!strcmp(v, types[i].name)) {
			p->c->client_auth = types[i].type;
			return 0;
		}
	}
	return fail(
		p, n,
		"client_auth_type: '%s' is not one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert",
		v);
}

static int tls_section(struct parse *p, yaml_node_t *map)
{
	yaml_node_pair_t *pair;
	yaml_node_t *k, *v;
	int err = 0;

	for (pair = map->data.mapping.pairs.start;
	     pair < map->data.mapping.pairs.top; pair++) {
		k = key_of(p, pair);
		v = value_of(p, pair);
		const char *key = text(k);
		const char **str = NULL;
		yaml_node_t **node = NULL;

		if (!strcmp(key, "cert")) {
			str = &p->cert;
			node = &p->cert_node;
		} else if (!strcmp(key, "cert_file")) {
			str = &p->cert_file;
			node = &p->cert_node;
		} else if (!strcmp(key, "key")) {
			str = &p->key;
			node = &p->key_node;
		} else if (!strcmp(key, "key_file")) {
			str = &p->key_file;
			node = &p->key_node;
		} else if (!strcmp(key, "client_ca")) {
			str = &p->client_ca;
			node = &p->ca_node;
		} else if (!strcmp(key, "client_ca_file")) {
			str = &p->client_ca_file;
			node = &p->ca_node;
		} else if (!strcmp(key, "client_auth_type")) {
			p->auth_node = v;
			err = client_auth(p, v);
			if (!err && !is_null(v))
				p->tls_keys = true;
		} else if (!strcmp(key, "min_version")) {
			err = version(p, v, key, &p->min_version);
		} else if (!strcmp(key, "max_version")) {
			err = version(p, v, key, &p->max_version);
		} else if (!strcmp(key, "cipher_suites")) {
			err = want_strings(p, v, key, &p->ciphers);
		} else if (!strcmp(key, "curve_preferences")) {
			err = want_strings(p, v, key, &p->curves);
		} else if (!strcmp(key, "prefer_server_cipher_suites")) {
			err = want_bool(p, v, key, &p->prefer_server);
		} else if (!strcmp(key, "client_allowed_sans")) {
			yaml_node_t *seq;
			yaml_node_item_t *i;

			err = want_strings(p, v, key, &seq);
			if (err)
				return err;
			if (!seq)
				continue;
			p->c->allowed_sans =
				calloc((size_t)(seq->data.sequence.items.top -
						seq->data.sequence.items.start),
				       sizeof(char *));
			if (!p->c->allowed_sans)
				return -ENOMEM;
			for (i = seq->data.sequence.items.start;
			     i < seq->data.sequence.items.top; i++) {
				char *s = strdup(text(
					yaml_document_get_node(&p->doc, *i)));

				if (!s)
					return -ENOMEM;
				p->c->allowed_sans[p->c->nsans++] = s;
			}
		} else {
			return fail(p, k,
				    "unknown key '%s' in tls_server_config",
				    key);
		}
		if (err)
			return err;
		if (str) {
			err = want_scalar(p, v, key, str);
			if (err)
				return err;
			if (*str) {
				if (!**str)
					return fail(p, v, "%s is empty", key);
				*node = v;
				p->tls_keys = true;
			}
		}
	}
	return 0;
}

/* The headers exporter-toolkit lets a configuration set, and their values. */
static int header(struct parse *p, const yaml_node_t *k, const yaml_node_t *v)
{
	static const struct {
		const char *name;
		const char *values[3];
	} allowed[] = {
		{ "Strict-Transport-Security", { NULL } },
		{ "X-Content-Type-Options", { "nosniff", NULL } },
		{ "X-Frame-Options", { "deny", "sameorigin", NULL } },
		{ "X-XSS-Protection", { NULL } },
		{ "Content-Security-Policy", { NULL } },
	};
	struct web_config *c = p->c;
	const char *name = text(k), *val;
	size_t i, j;
	int err = want_scalar(p, v, name, &val);

	if (err)
		return err;
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		if (!strcmp(name, allowed[i].name))
			break;
	}
	if (i == sizeof(allowed) / sizeof(allowed[0]))
		return fail(p, k, "HTTP header '%s' can not be configured",
			    name);
	if (!val || !*val)
		return 0; /* unset if blank */
	if (strpbrk(val, "\r\n"))
		return fail(p, v, "%s: a header value is one line", name);
	for (j = 0; allowed[i].values[j]; j++) {
		if (!strcmp(val, allowed[i].values[j]))
			break;
	}
	if (allowed[i].values[0] && !allowed[i].values[j])
		return fail(p, v, "%s: '%s' is not one of %s%s%s", name, val,
			    allowed[i].values[0],
			    allowed[i].values[1] ? ", " : "",
			    allowed[i].values[1] ? allowed[i].values[1] : "");
	c->headers[c->nheaders].name = strdup(name);
	c->headers[c->nheaders].value = strdup(val);
	if (!c->headers[c->nheaders].name || !c->headers[c->nheaders].value) {
		free(c->headers[c->nheaders].name);
		free(c->headers[c->nheaders].value);
		return -ENOMEM;
	}
	c->nheaders++;
	return 0;
}

static int http_section(struct parse *p, yaml_node_t *map)
{
	yaml_node_pair_t *pair;
	yaml_node_t *k, *v;
	int err;

	for (pair = map->data.mapping.pairs.start;
	     pair < map->data.mapping.pairs.top; pair++) {
		k = key_of(p, pair);
		v = value_of(p, pair);
		const char *key = text(k);

		if (!strcmp(key, "http2")) {
			bool h2;

			/* Accepted for compatibility: kvmstats speaks HTTP/1.1. */
			err = want_bool(p, v, key, &h2);
		} else if (!strcmp(key, "headers")) {
			yaml_node_t *h;
			yaml_node_pair_t *hp;
			yaml_node_t *hk, *hv;

			err = want_map(p, v, key, &h);
			if (err)
				return err;
			if (!h)
				continue;
			p->c->headers =
				calloc((size_t)(h->data.mapping.pairs.top -
						h->data.mapping.pairs.start),
				       sizeof(*p->c->headers));
			if (!p->c->headers)
				return -ENOMEM;
			for (hp = h->data.mapping.pairs.start;
			     hp < h->data.mapping.pairs.top; hp++) {
				hk = key_of(p, hp);
				hv = value_of(p, hp);
				err = header(p, hk, hv);
				if (err)
					return err;
			}
		} else {
			return fail(p, k,
				    "unknown key '%s' in http_server_config",
				    key);
		}
		if (err)
			return err;
	}
	return 0;
}

static int users_section(struct parse *p, yaml_node_t *map)
{
	struct web_config *c = p->c;
	yaml_node_pair_t *pair;
	yaml_node_t *k, *v;

	c->users = calloc((size_t)(map->data.mapping.pairs.top -
				   map->data.mapping.pairs.start),
			  sizeof(*c->users));
	if (!c->users)
		return -ENOMEM;
	for (pair = map->data.mapping.pairs.start;
	     pair < map->data.mapping.pairs.top; pair++) {
		k = key_of(p, pair);
		v = value_of(p, pair);
		const char *hash;
		int err = want_scalar(p, v, text(k), &hash);

		if (err)
			return err;
		/* Only bcrypt, which is what exporter-toolkit accepts. */
		if (!hash || strlen(hash) != 60 ||
		    (strncmp(hash, "$2a$", 4) && strncmp(hash, "$2b$", 4) &&
		     strncmp(hash, "$2y$", 4)) ||
		    crypt_checksalt(hash) != CRYPT_SALT_OK)
			return fail(
				p, v,
				"basic_auth_users: the password of '%s' is not a bcrypt hash ($2y$..., e.g. from htpasswd -nBC 10 \"\")",
				text(k));
		c->users[c->nusers].name = strdup(text(k));
		c->users[c->nusers].hash = strdup(hash);
		if (!c->users[c->nusers].name || !c->users[c->nusers].hash) {
			free(c->users[c->nusers].name);
			free(c->users[c->nusers].hash);
			return -ENOMEM;
		}
		c->nusers++;
	}
	return 0;
}

/* Go's cipher suite names and the GnuTLS parts that make them up. */
static const struct suite {
	const char *go;
	const char *kx, *cipher, *mac; /* kx NULL: a TLS 1.3 suite */
} suites[] = {
	{ "TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1" },
	{ "TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1" },
	{ "TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD" },
	{ "TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC",
	  "SHA1" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC",
	  "SHA1" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC",
	  "SHA1" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC",
	  "SHA1" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA",
	  "AES-128-GCM", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA",
	  "AES-256-GCM", "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM",
	  "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM",
	  "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA",
	  "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA",
	  "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA",
	  "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA",
	  "CHACHA20-POLY1305", "AEAD" },
	{ "TLS_AES_128_GCM_SHA256", NULL, "AES-128-GCM", "AEAD" },
	{ "TLS_AES_256_GCM_SHA384", NULL, "AES-256-GCM", "AEAD" },
	{ "TLS_CHACHA20_POLY1305_SHA256", NULL, "CHACHA20-POLY1305", "AEAD" },
};

static const struct {
	const char *go, *gnutls;
} curves[] = {
	{ "CurveP256", "SECP256R1" },
	{ "CurveP384", "SECP384R1" },
	{ "CurveP521", "SECP521R1" },
	{ "X25519", "X25519" },
};

/* Append ":+@item" to the priority string @buf unless it is there already. */
static int add_prio(char *buf, size_t len, const char *item)
{
	size_t used = strlen(buf), n = strlen(item);
	const char *f;

	for (f = strstr(buf, item); f; f = strstr(f + 1, item)) {
		if (f - buf >= 2 && f[-1] == '+' && f[-2] == ':' &&
		    (f[n] == ':' || !f[n]))
			return 0;
	}
	if (used + n + 3 > len)
		return -E2BIG;
	snprintf(buf + used, len - used, ":+%s", item);
	return 0;
}

/* @buf, checked by GnuTLS, as a new string in *@out. */
static int prio_string(struct parse *p, const char *buf, char **out)
{
	const char *errpos = NULL;
	gnutls_priority_t prio;
	int r = gnutls_priority_init(&prio, buf, &errpos);

	if (r < 0)
		return fail(
			p, NULL,
			"tls_server_config: GnuTLS rejects the priorities '%s' at '%s': %s",
			buf, errpos ? errpos : "", gnutls_strerror(r));
	gnutls_priority_deinit(prio);
	*out = strdup(buf);
	return *out ? 0 : -ENOMEM;
}

/* The GnuTLS numbers of @s's parts and its IANA number; -ENOENT unknown. */
static int suite_numbers(struct web_suite *s)
{
	gnutls_kx_algorithm_t kx;
	gnutls_cipher_algorithm_t cipher;
	gnutls_mac_algorithm_t mac;
	gnutls_protocol_t min;
	size_t i;

	s->gkx = gnutls_kx_get_id(s->kx);
	s->gcipher = gnutls_cipher_get_id(s->cipher);
	s->gmac = gnutls_mac_get_id(s->mac);
	for (i = 0;
	     gnutls_cipher_suite_info(i, s->id, &kx, &cipher, &mac, &min); i++)
		if ((int)kx == s->gkx && (int)cipher == s->gcipher &&
		    (int)mac == s->gmac && s->gkx)
			return 0;
	return -ENOENT;
}

/*
 * The GnuTLS priority strings of tls_server_config.  As in Go, whose
 * crypto/tls exporter-toolkit configures, cipher_suites chooses among the
 * suites of TLS 1.2 and below only: TLS 1.3's are not configurable, so
 * with cipher_suites a session that negotiates TLS 1.3 gets a priority
 * string of its own (priorities13, GnuTLS' default TLS 1.3 ciphers), and
 * with min_version TLS13 the list narrows nothing at all.  A list of TLS
 * 1.3 suites only leaves TLS 1.2 and below without any, which is TLS 1.3
 * only (in Go, no TLS 1.2 handshake could find a suite).
 */
static int priorities(struct parse *p)
{
	char base[256], buf[1024], kx[256] = "", ci[256] = "", mac[128] = "";
	struct web_config *c = p->c;
	yaml_node_item_t *it;
	bool any12 = false;
	size_t i, j;
	int v, r;

	if (p->min_version > p->max_version)
		return fail(
			p, NULL,
			"tls_server_config: min_version is above max_version");
	snprintf(base, sizeof(base), "NORMAL%s",
		 p->prefer_server ? ":%SERVER_PRECEDENCE" : "");
	if (p->curves) {
		strcat(base, ":-GROUP-ALL");
		for (it = p->curves->data.sequence.items.start;
		     it < p->curves->data.sequence.items.top; it++) {
			yaml_node_t *n = yaml_document_get_node(&p->doc, *it);
			char group[32];

			for (i = 0; i < sizeof(curves) / sizeof(curves[0]); i++)
				if (!strcmp(text(n), curves[i].go))
					break;
			if (i == sizeof(curves) / sizeof(curves[0]))
				return fail(
					p, n,
					"curve_preferences: '%s' is not one of CurveP256, CurveP384, CurveP521, X25519",
					text(n));
			snprintf(group, sizeof(group), "GROUP-%s",
				 curves[i].gnutls);
			if (add_prio(base, sizeof(base), group))
				return -E2BIG;
		}
	}
	if (p->ciphers) {
		size_t n = (size_t)(p->ciphers->data.sequence.items.top -
				    p->ciphers->data.sequence.items.start);

		c->suites = calloc(n ? n : 1, sizeof(*c->suites));
		if (!c->suites)
			return -ENOMEM;
		for (it = p->ciphers->data.sequence.items.start;
		     it < p->ciphers->data.sequence.items.top; it++) {
			yaml_node_t *n = yaml_document_get_node(&p->doc, *it);
			struct web_suite *s = &c->suites[c->nsuites];

			for (i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
				if (!strcmp(text(n), suites[i].go))
					break;
			if (i == sizeof(suites) / sizeof(suites[0]))
				return fail(
					p, n,
					"cipher_suites: '%s' is not a cipher suite kvmstats knows (kvmstats(1) lists them)",
					text(n));
			if (!suites[i].kx)
				continue; /* TLS 1.3: not configurable */
			any12 = true;
			/* With TLS 1.3 only, TLS 1.2's suites are not used. */
			if (p->min_version >= 3)
				continue;
			*s = (struct web_suite){ .name = suites[i].go,
						 .kx = suites[i].kx,
						 .cipher = suites[i].cipher,
						 .mac = suites[i].mac };
			if (suite_numbers(s))
				return fail(
					p, n,
					"cipher_suites: GnuTLS does not know '%s'",
					text(n));
			for (j = 0; j < c->nsuites; j++)
				if (!memcmp(c->suites[j].id, s->id, 2))
					break;
			if (j < c->nsuites)
				continue; /* an alias of one listed before */
			c->nsuites++;
			if (add_prio(kx, sizeof(kx), s->kx) ||
			    add_prio(ci, sizeof(ci), s->cipher) ||
			    add_prio(mac, sizeof(mac), s->mac))
				return -E2BIG;
		}
		/* Only TLS 1.3 suites listed: TLS 1.2 and below have none. */
		if (!any12) {
			if (p->max_version < 3)
				return fail(
					p, p->ciphers,
					"cipher_suites: no suite of TLS 1.2 or below, and max_version leaves no TLS 1.3: no client could connect");
			p->min_version = 3;
		}
	}
	snprintf(buf, sizeof(buf), "%s:-VERS-ALL", base);
	for (v = p->min_version; v <= p->max_version; v++) {
		char vers[16];

		snprintf(vers, sizeof(vers), "VERS-TLS1.%d", v);
		if (add_prio(buf, sizeof(buf), vers))
			return -E2BIG;
	}
	if (c->nsuites) {
		c->priorities_base = strdup(buf);
		if (!c->priorities_base)
			return -ENOMEM;
		r = snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			     ":-CIPHER-ALL:-MAC-ALL:-KX-ALL%s%s%s", kx, ci,
			     mac);
		if (r < 0 || strlen(buf) + 1 >= sizeof(buf))
			return -E2BIG;
	}
	r = prio_string(p, buf, &c->priorities);
	if (!r && c->nsuites && p->max_version == 3) {
		snprintf(buf, sizeof(buf), "%s:-VERS-ALL:+VERS-TLS1.3", base);
		r = prio_string(p, buf, &c->priorities13);
	}
	c->min_version = p->min_version;
	c->max_version = p->max_version;
	return r;
}

/* Load what tls_server_config names, check that it works together. */
static int tls_finish(struct parse *p)
{
	struct web_config *c = p->c;
	gnutls_certificate_credentials_t cred;
	gnutls_datum_t cd, kd;
	int r, err;

	if (!p->tls_keys) {
		if (c->nsans)
			return fail(
				p, NULL,
				"tls_server_config: client_allowed_sans without a certificate");
		return 0;
	}
	if (p->cert && p->cert_file)
		return fail(
			p, p->cert_node,
			"tls_server_config: cert and cert_file are mutually exclusive");
	if (p->key && p->key_file)
		return fail(
			p, p->key_node,
			"tls_server_config: key and key_file are mutually exclusive");
	if (p->client_ca && p->client_ca_file)
		return fail(
			p, p->ca_node,
			"tls_server_config: client_ca and client_ca_file are mutually exclusive");
	if (!p->cert && !p->cert_file)
		return fail(p, NULL,
			    "tls_server_config: missing cert_file (or cert)");
	if (!p->key && !p->key_file)
		return fail(p, NULL,
			    "tls_server_config: missing key_file (or key)");
	if ((p->client_ca || p->client_ca_file) &&
	    c->client_auth == WEB_NO_CLIENT_CERT)
		return fail(
			p, p->ca_node,
			"tls_server_config: client CA's have been configured without a client_auth_type");
	if ((c->client_auth == WEB_VERIFY_CLIENT_CERT_IF_GIVEN ||
	     c->client_auth == WEB_REQUIRE_AND_VERIFY_CLIENT_CERT) &&
	    !p->client_ca && !p->client_ca_file)
		return fail(
			p, p->auth_node,
			"tls_server_config: client_auth_type verifies certificates: it needs client_ca_file (or client_ca)");
	if (c->nsans && c->client_auth == WEB_NO_CLIENT_CERT)
		return fail(
			p, NULL,
			"tls_server_config: client_allowed_sans needs a client_auth_type that asks for a certificate");
	/*
	 * exporter-toolkit accepts these and checks the names of a
	 * certificate it has not verified: anyone can make a self-signed one
	 * that carries an allowed name.  Refused, so that nobody believes the
	 * names protect anything.
	 */
	if (c->nsans && (c->client_auth == WEB_REQUEST_CLIENT_CERT ||
			 c->client_auth == WEB_REQUIRE_ANY_CLIENT_CERT))
		return fail(
			p, p->auth_node,
			"tls_server_config: client_allowed_sans with a client_auth_type that does not verify certificates authenticates nothing (any self-signed certificate can carry the names): use RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file");

	err = p->cert_file ?
		      read_file(p, p->cert_node, "cert_file", p->cert_file,
				&c->cert_pem, &c->cert_path) :
		      ((c->cert_pem = strdup(p->cert)) ? 0 : -ENOMEM);
	if (!err)
		err = p->key_file ?
			      read_file(p, p->key_node, "key_file", p->key_file,
					&c->key_pem, &c->key_path) :
			      ((c->key_pem = strdup(p->key)) ? 0 : -ENOMEM);
	if (!err && p->client_ca_file)
		err = read_file(p, p->ca_node, "client_ca_file",
				p->client_ca_file, &c->client_ca_pem,
				&c->client_ca_path);
	else if (!err && p->client_ca)
		err = (c->client_ca_pem = strdup(p->client_ca)) ? 0 : -ENOMEM;
	if (err)
		return err;

	if (gnutls_certificate_allocate_credentials(&cred) < 0)
		return -ENOMEM;
	cd.data = (unsigned char *)c->cert_pem;
	cd.size = (unsigned int)strlen(c->cert_pem);
	kd.data = (unsigned char *)c->key_pem;
	kd.size = (unsigned int)strlen(c->key_pem);
	r = gnutls_certificate_set_x509_key_mem2(cred, &cd, &kd,
						 GNUTLS_X509_FMT_PEM, NULL, 0);
	if (r < 0) {
		gnutls_certificate_free_credentials(cred);
		return fail(
			p, p->cert_node,
			"tls_server_config: cannot use the certificate and key: %s",
			gnutls_strerror(r));
	}
	if (c->client_ca_pem) {
		cd.data = (unsigned char *)c->client_ca_pem;
		cd.size = (unsigned int)strlen(c->client_ca_pem);
		r = gnutls_certificate_set_x509_trust_mem(cred, &cd,
							  GNUTLS_X509_FMT_PEM);
		if (r <= 0) {
			gnutls_certificate_free_credentials(cred);
			return fail(
				p, p->ca_node,
				"tls_server_config: no CA certificate in the client CA: %s",
				r < 0 ? gnutls_strerror(r) : "none found");
		}
	}
	gnutls_certificate_free_credentials(cred);
	c->tls = true;
	return priorities(p);
}

static int parse_root(struct parse *p)
{
	yaml_node_t *root = yaml_document_get_root_node(&p->doc), *map;
	yaml_node_pair_t *pair;
	yaml_node_t *k, *v;
	int err;

	if (!root)
		return 0; /* an empty file */
	err = want_map(p, root, "the file", &map);
	if (err || !map)
		return err;
	for (pair = map->data.mapping.pairs.start;
	     pair < map->data.mapping.pairs.top; pair++) {
		k = key_of(p, pair);
		v = value_of(p, pair);
		const char *key = text(k);
		yaml_node_t *sub;

		if (!strcmp(key, "rate_limit"))
			return fail(p, k,
				    "rate_limit is not supported by kvmstats");
		if (strcmp(key, "tls_server_config") &&
		    strcmp(key, "http_server_config") &&
		    strcmp(key, "basic_auth_users"))
			return fail(p, k, "unknown key '%s'", key);
		err = want_map(p, v, key, &sub);
		if (err)
			return err;
		if (!sub)
			continue;
		if (!strcmp(key, "tls_server_config"))
			err = tls_section(p, sub);
		else if (!strcmp(key, "http_server_config"))
			err = http_section(p, sub);
		else
			err = users_section(p, sub);
		if (err)
			return err;
	}
	return tls_finish(p);
}

int web_config_load(const char *path, struct web_config **out,
		    struct web_files *files, char *err, size_t errlen)
{
	struct parse p = { .path = path,
			   .files = files,
			   .err = err,
			   .errlen = errlen,
			   .min_version = 2, /* TLS12, as exporter-toolkit */
			   .max_version = 3,
			   .prefer_server = true };
	yaml_parser_t parser;
	char *text = NULL, *slash;
	int r;

	*out = NULL;
	err[0] = '\0';
	snprintf(p.dir, sizeof(p.dir), "%s", path);
	slash = strrchr(p.dir, '/');
	if (slash)
		*(slash == p.dir ? slash + 1 : slash) = '\0';
	else
		snprintf(p.dir, sizeof(p.dir), ".");
	r = read_path(&p, NULL, "web config", path, &text);
	if (r)
		return r;
	p.c = calloc(1, sizeof(*p.c));
	if (!p.c || !yaml_parser_initialize(&parser)) {
		free(p.c);
		free(text);
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (unsigned char *)text,
				     strlen(text));
	if (!yaml_parser_load(&parser, &p.doc)) {
		snprintf(err, errlen, "%s:%lu: %s", path,
			 (unsigned long)parser.problem_mark.line + 1,
			 parser.problem ? parser.problem : "YAML syntax error");
		yaml_parser_delete(&parser);
		free(text);
		web_config_free(p.c);
		return -EINVAL;
	}
	r = parse_root(&p);
	yaml_document_delete(&p.doc);
	yaml_parser_delete(&parser);
	free(text);
	if (r) {
		if (r == -ENOMEM && !err[0])
			snprintf(err, errlen, "%s: %s", path, strerror(ENOMEM));
		web_config_free(p.c);
		return r;
	}
	*out = p.c;
	return 0;
}

void web_files_clear(struct web_files *files)
{
	size_t i;

	for (i = 0; i < files->n; i++)
		free(files->f[i].path);
	memset(files, 0, sizeof(*files));
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void web_config_free(struct web_config *c)
{
	size_t i;

	if (!c)
		return;
	free(c->cert_pem);
	free_secret(c->key_pem);
	free(c->cert_path);
	free(c->key_path);
	free(c->client_ca_path);
	free(c->client_ca_pem);
	free(c->priorities);
	free(c->priorities13);
	free(c->priorities_base);
	free(c->suites);
	for (i = 0; i < c->nsans; i++)
		free(c->allowed_sans[i]);
	free(c->allowed_sans);
	for (i = 0; i < c->nheaders; i++) {
		free(c->headers[i].name);
		free(c->headers[i].value);
	}
	free(c->headers);
	for (i = 0; i < c->nusers; i++) {
		free(c->users[i].name);
		free(c->users[i].hash);
	}
	free(c->users);
	free(c);
}

const struct web_user *web_config_user(const struct web_config *c,
				       const char *name)
{
	size_t i;

	for (i = 0; i < c->nusers; i++)
		if (!strcmp(c->users[i].name, name))
			return &c->users[i];
	return NULL;
}
