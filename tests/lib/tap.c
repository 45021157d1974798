// SPDX-License-Identifier: GPL-2.0-only
/*
 * TAP lines for test programs: see tap.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static int nr_failed;

void tap_init(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
}

static void tap_line(const char *prefix, const char *suffix, const char *fmt,
		     va_list ap)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	printf("%s%s%s\n", prefix, buf, suffix ? suffix : "");
	fflush(stdout);
}

bool tap_check(bool pass, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_line(pass ? "ok - " : "not ok - ", NULL, fmt, ap);
	va_end(ap);
	if (!pass)
		nr_failed++;
	return pass;
}

void tap_pass(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_line("ok - ", NULL, fmt, ap);
	va_end(ap);
}

void tap_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_line("not ok - ", NULL, fmt, ap);
	va_end(ap);
	nr_failed++;
}

void tap_skip(const char *reason, const char *fmt, ...)
{
	char suffix[512];
	va_list ap;

	snprintf(suffix, sizeof(suffix), " # SKIP %s", reason);
	va_start(ap, fmt);
	tap_line("ok - ", suffix, fmt, ap);
	va_end(ap);
}

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_line("# ", NULL, fmt, ap);
	va_end(ap);
}

void tap_bail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_line("not ok - ", NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

pid_t tap_fork(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tap_bail("fork: %s", strerror(errno));
	return pid;
}

int tap_failures(void)
{
	return nr_failed;
}

int tap_exit(void)
{
	if (nr_failed)
		tap_diag("%d check(s) failed", nr_failed);
	return nr_failed ? 1 : 0;
}
