/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A small JSON validator for tests: json_valid(s) is true if @s is exactly
 * one well-formed JSON value (surrounding whitespace allowed).  Header-only,
 * so the guest suite (static, tests/lib) and the host unit tests share it.
 */
#ifndef KVMSTATS_TESTS_JSON_CHECK_H
#define KVMSTATS_TESTS_JSON_CHECK_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline const char *js_ws(const char *s)
{
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	return s;
}

static inline const char *js_value(const char *s, int depth);

static inline const char *js_string(const char *s)
{
	if (*s++ != '"')
		return NULL;
	while (*s && *s != '"') {
		if ((unsigned char)*s < 0x20)
			return NULL;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)s[i]))
						return NULL;
				s += 4;
			} else if (!strchr("\"\\/bfnrt", *s)) {
				return NULL;
			}
		}
		s++;
	}
	return *s == '"' ? s + 1 : NULL;
}

static inline const char *js_value(const char *s, int depth)
{
	s = js_ws(s);
	if (depth > 32)
		return NULL;
	if (*s == '{' || *s == '[') {
		char close = *s == '{' ? '}' : ']';
		bool obj = *s == '{';

		s = js_ws(s + 1);
		if (*s == close)
			return s + 1;
		for (;;) {
			if (obj) {
				s = js_string(js_ws(s));
				if (!s)
					return NULL;
				s = js_ws(s);
				if (*s++ != ':')
					return NULL;
			}
			s = js_value(s, depth + 1);
			if (!s)
				return NULL;
			s = js_ws(s);
			if (*s == ',') {
				s++;
				continue;
			}
			return *s == close ? s + 1 : NULL;
		}
	}
	if (*s == '"')
		return js_string(s);
	if (!strncmp(s, "true", 4))
		return s + 4;
	if (!strncmp(s, "false", 5))
		return s + 5;
	if (!strncmp(s, "null", 4))
		return s + 4;
	if (*s == '-' || (*s >= '0' && *s <= '9')) {
		char *end;

		strtod(s, &end);
		return end == s ? NULL : end;
	}
	return NULL;
}

static inline bool json_valid(const char *s)
{
	const char *e = s ? js_value(s, 0) : NULL;

	return e && *js_ws(e) == '\0';
}

#endif /* KVMSTATS_TESTS_JSON_CHECK_H */
