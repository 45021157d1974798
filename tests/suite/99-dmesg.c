// SPDX-License-Identifier: GPL-2.0-only
/*
 * Belt and braces: after the suite, the kernel log holds no WARNING, BUG,
 * Oops, refcount or memory-corruption reports, and the taint mask has no
 * W (warning), D (oops), B (bad page) or L (soft lockup) bit.  The
 * harness scans the console too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

static const char *const bad[] = {
	"WARNING:",
	"BUG:",
	"kernel BUG",
	"Oops",
	"refcount_t:",
	"general protection fault",
	"UBSAN:",
	"KASAN:",
	"KFENCE:",
	"list_add corruption",
	"list_del corruption",
	"use-after-free",
	"Call Trace:",
	"soft lockup",
	"hung_task",
	"blocked for more than",
	"RCU stall",
	"rcu_sched self-detected stall",
	"unreferenced object",
};

#define TAINT_BAD_PAGE	 (1ul << 5)
#define TAINT_DIE	 (1ul << 7)
#define TAINT_WARN	 (1ul << 9)
#define TAINT_SOFTLOCKUP (1ul << 14)

int main(void)
{
	unsigned long hits = 0, records = 0, taint = 0;
	char rec[8192];
	FILE *f;
	int fd;

	tap_init();
	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (!tap_check(fd >= 0, "/dev/kmsg opens"))
		return tap_exit();
	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		const char *msg;
		size_t i;

		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		records++;
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(msg, bad[i])) {
				if (hits++ < 20)
					tap_diag("kernel: %.*s",
						 (int)strcspn(msg, "\n"), msg);
				break;
			}
		}
		if (strstr(msg, "kvmstats") && !strstr(msg, "taints kernel"))
			tap_diag("kernel: %.*s", (int)strcspn(msg, "\n"), msg);
	}
	close(fd);
	tap_check(records > 0, "read %lu kernel log records", records);
	tap_eq(hits, 0,
	       "no WARNING/BUG/Oops/refcount/corruption lines in the kernel log");

	f = fopen("/proc/sys/kernel/tainted", "r");
	if (!f || fscanf(f, "%lu", &taint) != 1) {
		tap_fail("reading /proc/sys/kernel/tainted");
	} else {
		tap_diag("taint mask %lu", taint);
		tap_check(
			!(taint & (TAINT_BAD_PAGE | TAINT_DIE | TAINT_WARN |
				   TAINT_SOFTLOCKUP)),
			"kernel not tainted by a warning, oops, bad page or soft lockup");
	}
	if (f)
		fclose(f);
	return tap_exit();
}
