/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The exporter's log: what `kvmstats export --listen` says on standard
 * error, at a level and in a format (--log.level, --log.format) that
 * node_exporter users know: logfmt (ts=... level=... msg="...") or one
 * JSON object a line.  One-shot commands keep their "kvmstats: ..." lines.
 */
#ifndef KVMSTATS_LOG_H
#define KVMSTATS_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_PLAIN, LOG_LOGFMT, LOG_JSON };

/* "debug", "info", "warn", "error" / "logfmt", "json": 0, or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);
int log_parse_format(const char *s, enum log_format *out);

/*
 * From now on, errmsg() lines go through the log at warn (LOG_PLAIN keeps
 * them as they are); lines below @min are dropped.  Thread-safe.
 */
void log_setup(enum log_level min, enum log_format fmt);
bool log_enabled(enum log_level l);

/*
 * One entry: @msg, then key/value pairs (const char *key, const char *value,
 * ..., NULL) as further fields.
 */
void log_kv(enum log_level l, const char *msg, ...);
void logmsg(enum log_level l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vlogmsg(enum log_level l, const char *fmt, va_list ap);
/* errmsg()'s way in: false when the log is not set up (plain lines). */
bool log_errmsg(const char *fmt, va_list ap);

#endif /* KVMSTATS_LOG_H */
