/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Minimal TAP output for the kvmstats guest contract.
 *
 * Lines are unnumbered: the harness numbers them per kernel and
 * configuration.  A skip is never a pass; a missing prerequisite is either
 * tap_skip() with its reason or a failure.
 */
#ifndef KVMSTATS_TEST_TAP_H
#define KVMSTATS_TEST_TAP_H

#include <stdbool.h>
#include <sys/types.h>

#define __printf(a, b) __attribute__((format(printf, a, b)))

/* Call once at the start of main(): line-buffers stdout for fork(). */
void tap_init(void);

/* Records one check; returns @pass so callers can chain. */
bool tap_check(bool pass, const char *fmt, ...) __printf(2, 3);
void tap_pass(const char *fmt, ...) __printf(1, 2);
void tap_fail(const char *fmt, ...) __printf(1, 2);
void tap_skip(const char *reason, const char *fmt, ...) __printf(2, 3);
void tap_diag(const char *fmt, ...) __printf(1, 2);

/* Prints a failure and exits: for broken prerequisites mid-test. */
void tap_bail(const char *fmt, ...) __printf(1, 2) __attribute__((noreturn));

/*
 * fork() with stdout flushed first (a child must not print its parent's
 * buffered lines again); bails out of the test if it fails.
 */
pid_t tap_fork(void);

int tap_failures(void);

/* Exit status for the end of main(): 0 when every check passed. */
int tap_exit(void);

/* Compare two values, print both on failure. */
#define tap_eq(a, b, fmt, ...)                                                 \
	({                                                                     \
		long long __a = (long long)(a), __b = (long long)(b);          \
		bool __ok = __a == __b;                                        \
		if (!__ok)                                                     \
			tap_diag("%s = %lld, expected %s = %lld", #a, __a, #b, \
				 __b);                                         \
		tap_check(__ok, fmt, ##__VA_ARGS__);                           \
	})

#endif /* KVMSTATS_TEST_TAP_H */
