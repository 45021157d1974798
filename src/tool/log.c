// SPDX-License-Identifier: GPL-2.0-only
/*
 * The exporter's log lines; see log.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static struct {
	bool on;
	enum log_level min;
	enum log_format fmt;
	pthread_mutex_t lock;
} lg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *const level_names[] = { "debug", "info", "warn", "error" };

int log_parse_level(const char *s, enum log_level *out)
{
	unsigned int i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcmp(s, level_names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int log_parse_format(const char *s, enum log_format *out)
{
	if (!strcmp(s, "logfmt"))
		*out = LOG_LOGFMT;
	else if (!strcmp(s, "json"))
		*out = LOG_JSON;
	else
		return -EINVAL;
	return 0;
}

void log_setup(enum log_level min, enum log_format fmt)
{
	pthread_mutex_lock(&lg.lock);
	lg.on = true;
	lg.min = min;
	lg.fmt = fmt;
	pthread_mutex_unlock(&lg.lock);
}

bool log_enabled(enum log_level l)
{
	return !lg.on || l >= lg.min;
}

/* A logfmt value: bare if it is one plain word, else quoted and escaped. */
static void put_logfmt(FILE *f, const char *v)
{
	const unsigned char *p;
	bool bare = *v != '\0';

	for (p = (const unsigned char *)v; *p && bare; p++)
		bare = *p > ' ' && *p != '"' && *p != '=' && *p != '\\' &&
		       *p != 0x7f;
	if (bare) {
		fputs(v, f);
		return;
	}
	fputc('"', f);
	for (p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < ' ' || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A JSON string; bytes that are not ASCII are passed through. */
static void put_json(FILE *f, const char *v)
{
	const unsigned char *p;

	fputc('"', f);
	for (p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < ' ' || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void put_field(FILE *f, bool first, const char *k, const char *v)
{
	if (lg.fmt == LOG_JSON) {
		fputs(first ? "{" : ",", f);
		put_json(f, k);
		fputc(':', f);
		put_json(f, v);
	} else {
		if (!first)
			fputc(' ', f);
		fputs(k, f);
		fputc('=', f);
		put_logfmt(f, v);
	}
}

static void vlog_kv(enum log_level l, const char *msg, va_list ap)
{
	struct timespec ts;
	struct tm tm;
	char when[80];
	const char *k, *v;
	FILE *f = stderr;

	if (!log_enabled(l))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	pthread_mutex_lock(&lg.lock);
	flockfile(f);
	if (!lg.on || lg.fmt == LOG_PLAIN) {
		fprintf(f, "kvmstats: %s", msg);
		while ((k = va_arg(ap, const char *))) {
			v = va_arg(ap, const char *);
			fprintf(f, " %s=%s", k, v);
		}
		fputc('\n', f);
	} else {
		put_field(f, true, "ts", when);
		put_field(f, false, "level", level_names[l]);
		put_field(f, false, "msg", msg);
		while ((k = va_arg(ap, const char *))) {
			v = va_arg(ap, const char *);
			put_field(f, false, k, v ? v : "");
		}
		fputs(lg.fmt == LOG_JSON ? "}\n" : "\n", f);
	}
	fflush(f);
	funlockfile(f);
	pthread_mutex_unlock(&lg.lock);
}

void log_kv(enum log_level l, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	vlog_kv(l, msg, ap);
	va_end(ap);
}

static void log_one(enum log_level l, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	vlog_kv(l, msg, ap);
	va_end(ap);
}

void vlogmsg(enum log_level l, const char *fmt, va_list ap)
{
	char *msg = NULL;

	if (!log_enabled(l))
		return;
	if (vasprintf(&msg, fmt, ap) < 0)
		return;
	log_one(l, msg, (const char *)NULL);
	free(msg);
}

void logmsg(enum log_level l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlogmsg(l, fmt, ap);
	va_end(ap);
}

bool log_errmsg(const char *fmt, va_list ap)
{
	if (!lg.on || lg.fmt == LOG_PLAIN)
		return false;
	vlogmsg(LOG_WARN, fmt, ap);
	return true;
}
