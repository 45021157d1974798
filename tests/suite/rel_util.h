/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Small helpers shared by the reliability and security tests (85..89):
 * a seeded PRNG, the module's counters in sysfs, module load/unload and a
 * kernel log scan.  Header only, so the suite Makefile needs no change.
 */
#ifndef KVMSTATS_TEST_REL_UTIL_H
#define KVMSTATS_TEST_REL_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "freeze_util.h"
#include "kvmstats_util.h"

/* ---- PRNG: splitmix64, reproducible from one 64-bit seed ---- */
struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (the modulo bias is irrelevant here). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	return rng_next(r) % n;
}

static inline int rng_chance(struct rng *r, unsigned int percent)
{
	return rng_below(r, 100) < percent;
}

/* A seed from the environment variable @env (any strtoull base), else random. */
static inline uint64_t rel_seed(const char *env)
{
	const char *s = getenv(env);
	uint64_t seed;
	int fd;

	if (s && *s)
		return strtoull(s, NULL, 0);
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &seed, sizeof(seed)) != sizeof(seed))
		seed = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	if (fd >= 0)
		close(fd);
	return seed;
}

static inline int rel_long(void)
{
	const char *s = getenv("KVMSTATS_LONG");

	return s && !strcmp(s, "1");
}

/* An unsigned number from the environment, or @def. */
static inline unsigned long rel_env_num(const char *env, unsigned long def)
{
	const char *s = getenv(env);

	return s && *s ? strtoul(s, NULL, 0) : def;
}

/* ---- sysfs ---- */

/* A decimal integer from a file, -1 if it cannot be read. */
static inline long rel_read_long(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

#define LIVE_FILES_PATH "/sys/module/kvmstats/parameters/live_files"

static inline long rel_live_files(void)
{
	return rel_read_long(LIVE_FILES_PATH);
}

/* /sys/module/<name>/refcnt, -1 if the module is not loaded. */
static inline long rel_refcnt(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/module/%s/refcnt", name);
	return rel_read_long(path);
}

static inline int rel_module_loaded(const char *name)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/module/%s/initstate", name);
	return stat(path, &st) == 0;
}

/*
 * The vendor module (kvm_amd, kvm_intel), or NULL where KVM is built in
 * (arm64), for which the harness sets KVMSTATS_VENDOR empty.  Unset (run
 * outside the harness): kvm_amd.
 */
static inline const char *rel_vendor(void)
{
	const char *v = getenv("KVMSTATS_VENDOR");

	if (!v)
		return "kvm_amd";
	return *v ? v : NULL;
}

/* The vendor module's file in $KVMSTATS_MODDIR (NULL: none). */
static inline const char *rel_vendor_ko(const char *vendor)
{
	if (!vendor)
		return NULL;
	return strcmp(vendor, "kvm_intel") ? "kvm-amd.ko" : "kvm-intel.ko";
}

/*
 * What is back at its base once KVM has freed every VM a test made: the
 * vendor module's refcount where KVM is a module (a VM holds a reference
 * on it until it is destroyed), else KVM's own count of its live VMs
 * (kvm_live_vms(), which makes a throwaway VM to read it).  rel_kvm_what()
 * names it for a check's message.  @vendor is rel_vendor()'s.
 */
static inline long rel_kvm_pins(const char *vendor)
{
	return vendor ? rel_refcnt(vendor) : kvm_live_vms();
}

static inline const char *rel_kvm_what(const char *vendor)
{
	static char what[64];

	if (!vendor)
		return "KVM's count of live VMs";
	snprintf(what, sizeof(what), "%s refcnt", vendor);
	return what;
}

/* Poll @fn() until it returns @want or @ms elapse; returns the last value. */
static inline long rel_wait_value(long (*fn)(const char *), const char *arg,
				  long want, unsigned int ms)
{
	uint64_t deadline = now_ns() + (uint64_t)ms * 1000000ull;
	long v;

	for (;;) {
		v = fn(arg);
		if (v == want || now_ns() > deadline)
			return v;
		msleep(10);
	}
}

static inline long rel_live_files_arg(const char *unused)
{
	(void)unused;
	return rel_live_files();
}

/* ---- modules ---- */

/* finit_module($KVMSTATS_MODDIR/<file>); 0 or -errno (EEXIST if loaded). */
/* Does the guest have module @file (ccp is there only where kvm-amd needs it)? */
static inline bool rel_module_shipped(const char *file)
{
	const char *dir = getenv("KVMSTATS_MODDIR");
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/modules",
		 file);
	return access(path, R_OK) == 0;
}

static inline int rel_load_module(const char *file)
{
	const char *dir = getenv("KVMSTATS_MODDIR");
	char path[256];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/modules",
		 file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = syscall(SYS_finit_module, fd, "", 0);
	r = r < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* delete_module(@name, O_NONBLOCK); 0 or -errno. */
static inline int rel_unload_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) < 0 ? -errno : 0;
}

/* Unload, retrying for up to @ms while the module is busy. */
static inline int rel_unload_module_wait(const char *name, unsigned int ms)
{
	uint64_t deadline = now_ns() + (uint64_t)ms * 1000000ull;
	int r;

	for (;;) {
		r = rel_unload_module(name);
		if (r != -EAGAIN && r != -EBUSY)
			return r;
		if (now_ns() > deadline)
			return r;
		msleep(20);
	}
}

/*
 * Put back every module of the guest contract that is missing, in
 * dependency order.  Returns the number that could not be loaded.
 */
static inline int rel_restore_modules(void)
{
	const char *vendor = rel_vendor();
	const char *mods[][2] = {
		{ "irqbypass", "irqbypass.ko" },
		{ "kvm", "kvm.ko" },
		{ "ccp", "ccp.ko" },
		{ vendor, rel_vendor_ko(vendor) },
		{ "kvmstats", "kvmstats.ko" },
	};
	unsigned int i;
	int bad = 0;

	for (i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
		int r;

		/* No vendor module where KVM is built in. */
		if (!mods[i][0] || rel_module_loaded(mods[i][0]) ||
		    !rel_module_shipped(mods[i][1]))
			continue;
		r = rel_load_module(mods[i][1]);
		if (r && r != -EEXIST) {
			tap_diag("cannot reload %s: %s", mods[i][1],
				 strerror(-r));
			bad++;
		}
	}
	return bad;
}

/* ---- the kernel log ---- */

/*
 * A reader positioned at the end of /dev/kmsg: rel_kmsg_scan() then looks
 * only at what was logged since rel_kmsg_open().
 */
static inline int rel_kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Records that mention kvmstats (other than the tests' markers), as scanned. */
static unsigned long rel_kmsg_module_lines __attribute__((unused));

/*
 * Reads every new record; prints and counts those that show kernel trouble
 * (warnings, oopses, sanitizer and lockdep reports, refcount and list
 * corruption) and, in kvmstats' own lines, anything that looks like a
 * kernel address.  Returns the number of bad records, -1 if unreadable.
 */
static inline int rel_kmsg_scan(int fd, unsigned long *nr_lines)
{
	static const char *const bad[] = {
		"WARNING:",
		"BUG:",
		"kernel BUG",
		"Oops",
		"general protection",
		"Call Trace",
		"refcount_t:",
		"KASAN",
		"UBSAN",
		"KFENCE",
		"list_add corruption",
		"list_del corruption",
		"lockdep",
		"possible recursive locking",
		"circular locking",
		"suspicious RCU usage",
		"sleeping function called",
		"scheduling while atomic",
		"blocked for more than",
		"detected stall",
		"soft lockup",
		"hard LOCKUP",
		"Unable to handle",
		"segfault at",
		"kmemleak",
	};
	char rec[8192];
	regex_t kaddr;
	int nbad = 0;

	if (fd < 0)
		return -1;
	if (regcomp(&kaddr, "ffff[89a-f][0-9a-f]{11}",
		    REG_EXTENDED | REG_ICASE))
		return -1;
	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		const char *msg;
		unsigned int i;

		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		if (nr_lines)
			(*nr_lines)++;
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(msg, bad[i])) {
				tap_diag("kernel log: %.*s",
					 (int)strcspn(msg, "\n"), msg);
				nbad++;
				break;
			}
		}
		if (strstr(msg, "kvmstats") && !strstr(msg, "kvmstats-test:"))
			rel_kmsg_module_lines++;
		if (i == sizeof(bad) / sizeof(bad[0]) &&
		    strstr(msg, "kvmstats") &&
		    !regexec(&kaddr, msg, 0, NULL, 0)) {
			tap_diag("kernel log: kernel address in: %.*s",
				 (int)strcspn(msg, "\n"), msg);
			nbad++;
		}
	}
	regfree(&kaddr);
	return nbad;
}

/*
 * One check line: nothing bad was logged since rel_kmsg_open().  A marker
 * written to the log first proves that the scan really reads it.
 */
static inline void rel_kmsg_check(int fd, const char *what)
{
	unsigned long lines = 0;
	int w = open("/dev/kmsg", O_WRONLY | O_CLOEXEC), n;

	if (w >= 0) {
		char m[160];
		int len = snprintf(m, sizeof(m), "kvmstats-test: end of %s\n",
				   what);

		/* One write(2) per record (dprintf would lseek first and fail). */
		if (write(w, m, len) != len)
			tap_diag("cannot write a marker to /dev/kmsg: %s",
				 strerror(errno));
		close(w);
	}
	n = rel_kmsg_scan(fd, &lines);
	if (n < 0 || lines == 0) {
		tap_fail("%s: kernel log clean (cannot read /dev/kmsg)", what);
		return;
	}
	tap_check(n == 0, "%s: kernel log clean (%lu new records, %d bad)",
		  what, lines, n);
}

#endif /* KVMSTATS_TEST_REL_UTIL_H */
