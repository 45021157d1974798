/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The web configuration file of `kvmstats export --web.config.file`: the
 * format of Prometheus' exporter-toolkit (TLS, client certificates, basic
 * auth users with bcrypt hashes, extra response headers), so one file can
 * serve node_exporter and kvmstats.  kvmstats(1) lists the keys.
 */
#ifndef KVMSTATS_WEBCONFIG_H
#define KVMSTATS_WEBCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* tls_server_config.client_auth_type, as Go's crypto/tls names them. */
enum web_client_auth {
	WEB_NO_CLIENT_CERT,
	WEB_REQUEST_CLIENT_CERT,
	WEB_REQUIRE_ANY_CLIENT_CERT,
	WEB_VERIFY_CLIENT_CERT_IF_GIVEN,
	WEB_REQUIRE_AND_VERIFY_CLIENT_CERT,
};

struct web_user {
	char *name;
	char *hash; /* bcrypt: $2a$, $2b$ or $2y$ */
};

/* A suite of cipher_suites for TLS 1.2 and below. */
struct web_suite {
	const char *name;	       /* Go's (IANA) name */
	const char *kx, *cipher, *mac; /* GnuTLS' names of its parts */
	int gkx, gcipher, gmac;	       /* ... and their GnuTLS numbers */
	unsigned char id[2];	       /* its IANA number */
};

struct web_header {
	char *name;
	char *value;
};

struct web_config {
	bool tls;	     /* tls_server_config has a certificate */
	char *cert_pem;	     /* certificate (chain), PEM */
	char *key_pem;	     /* its private key, PEM */
	char *client_ca_pem; /* CAs for client certificates, PEM, or NULL */
	enum web_client_auth client_auth;
	char *priorities; /* GnuTLS priority string (versions, suites, groups) */
	/* With cipher_suites: a session that negotiates TLS 1.3, else NULL. */
	char *priorities13;
	/*
	 * cipher_suites' suites of TLS 1.2 and below, in its order (none: no
	 * narrowing).  GnuTLS enables a suite's parts, not suites, so
	 * priorities allows every combination of their parts: each session
	 * is narrowed further to suites the list has (see http.c), from
	 * priorities_base, the priorities without any suite.
	 */
	struct web_suite *suites;
	size_t nsuites;
	char *priorities_base;
	int min_version, max_version; /* 0..3: TLS 1.0 .. TLS 1.3 */
	/* The files the keys name (NULL: inline), to notice they changed. */
	char *cert_path, *key_path, *client_ca_path;
	char **allowed_sans;
	size_t nsans;
	struct web_header *headers;
	size_t nheaders;
	struct web_user *users;
	size_t nusers;
};

/*
 * A file a load read, or tried to: as fstat(2) saw the descriptor it was
 * read from just before the read (so that a change during or after the
 * read shows), when that was, and a SHA-256 of what was read.
 */
struct web_file {
	char *path;
	int err; /* 0, or the errno of stat(2) or open(2) */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	struct timespec seen; /* CLOCK_REALTIME of that fstat(2) */
	unsigned char sha256[32];
};

#define WEB_MAX_FILES 4 /* the config, cert_file, key_file, client_ca_file */

struct web_files {
	struct web_file f[WEB_MAX_FILES];
	size_t n;
};

/*
 * Read and check @path.  On error returns -errno (-EINVAL for a bad file)
 * and leaves a one-line explanation, naming the file, line and key, in
 * @err.  An empty file is a valid configuration: plain HTTP, no auth.
 * @files (or NULL), zeroed by the caller, gets every file read or tried,
 * success or not; web_files_clear() frees what it holds.
 */
int web_config_load(const char *path, struct web_config **out,
		    struct web_files *files, char *err, size_t errlen);
void web_config_free(struct web_config *c);
void web_files_clear(struct web_files *files);

/* The user named @name, or NULL. */
const struct web_user *web_config_user(const struct web_config *c,
				       const char *name);

#endif /* KVMSTATS_WEBCONFIG_H */
