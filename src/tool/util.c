// SPDX-License-Identifier: GPL-2.0-only
/*
 * What every part of the tool shares: one-line messages, the exit status
 * for an errno, the device, regular expressions, the clock, the open file
 * limit and the complaint about an unknown option.  Calls nothing of the
 * commands (main.c, top.c, export.c) or of host.c, which all call it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "tool.h"

void errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (log_errmsg(fmt, ap)) {
		va_end(ap);
		return;
	}
	va_end(ap);
	fflush(stdout);
	fputs("kvmstats: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int exit_for(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return EXIT_OK;
	case EACCES:
	case EPERM:
		return EXIT_PERM;
	case ESRCH:
	case EBADF:
		return EXIT_GONE;
	case EMFILE:
	case ENFILE:
		return EXIT_PARTIAL;
	case EINTR:
		return EXIT_INTR;
	}
	return EXIT_FAIL;
}

/*
 * Why /dev/kvmstats could not be opened, and what would fix it: for
 * permission denied, who the node belongs to and the udev rule that gives
 * it to the group kvmstats.
 */
void device_error(int err, char *buf, size_t len)
{
	const char *dev = "/dev/kvmstats";
	struct group *gr;
	char group[64];
	struct stat st;
	FILE *grf;

	err = err < 0 ? -err : err;
	if (err == ENOENT || err == ENXIO || err == ENODEV) {
		snprintf(buf, len, "%s: %s (is the kvmstats module loaded?)",
			 dev, strerror(err));
		return;
	}
	if ((err != EACCES && err != EPERM) || stat(dev, &st)) {
		snprintf(buf, len, "%s: %s", dev, strerror(err));
		return;
	}
	gr = NULL;
	/* The group file itself, not NSS: the static build has no NSS. */
	grf = fopen("/etc/group", "re");
	while (grf && (gr = fgetgrent(grf)) && gr->gr_gid != st.st_gid)
		;
	if (gr)
		snprintf(group, sizeof(group), "%s", gr->gr_name);
	else
		snprintf(group, sizeof(group), "gid %u",
			 (unsigned int)st.st_gid);
	if (grf)
		fclose(grf);
	if (!strcmp(group, "kvmstats"))
		snprintf(
			buf, len,
			"%s: %s (it is readable by root and the group kvmstats, mode %04o: add the user to the group, adduser USER kvmstats, or run the exporter with SupplementaryGroups=kvmstats)",
			dev, strerror(err), (unsigned int)(st.st_mode & 07777));
	else
		snprintf(
			buf, len,
			"%s: %s (it belongs to the group %s, mode %04o: the udev rule 60-kvmstats.rules that gives it to the group kvmstats is not installed or not applied; install it from packaging/udev/ into /etc/udev/rules.d/ and run udevadm trigger, or run as root)",
			dev, strerror(err), group,
			(unsigned int)(st.st_mode & 07777));
}

int open_device(void)
{
	int fd = kvmstats_open_device();
	char why[512];

	if (fd >= 0)
		return fd;
	device_error(fd, why, sizeof(why));
	errmsg("%s", why);
	if (fd == -ENOENT || fd == -ENXIO || fd == -ENODEV)
		exit(EXIT_NODEV);
	exit(exit_for(fd));
}

int compile_filter(const char *re, regex_t *out)
{
	int r = regcomp(out, re, REG_EXTENDED | REG_NOSUB);

	if (r) {
		char msg[128];

		regerror(r, out, msg, sizeof(msg));
		errmsg("bad regular expression '%s': %s", re, msg);
		return -1;
	}
	return 0;
}

double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * True the first time @key is seen in this process: for messages said
 * once (a statistic the library skipped).  Not thread-safe.
 */
bool first_time(const char *key)
{
	static char **seen;
	static size_t n;
	size_t i;
	void *a;

	for (i = 0; i < n; i++)
		if (!strcmp(seen[i], key))
			return false;
	a = realloc(seen, (n + 1) * sizeof(*seen));
	if (!a)
		return true;
	seen = a;
	seen[n] = strdup(key);
	if (seen[n])
		n++;
	return true;
}

/* Say once why each statistic of @f that libkvmstats skipped was skipped. */
void skipped_msgs(const struct kvmstats_file *f, int pid, int fd,
		  void (*say)(void *ctx, const char *line), void *ctx)
{
	unsigned int i;

	for (i = 0; i < kvmstats_file_num_skipped(f); i++) {
		const struct kvmstats_stat *s = kvmstats_file_skipped(f, i);
		char key[300], why[512];

		snprintf(key, sizeof(key), "%d %#x %s",
			 kvmstats_file_is_vcpu(f), s->flags, s->name);
		if (!first_time(key))
			continue;
		skip_reason(f, s, pid, fd, why, sizeof(why));
		say(ctx, why);
	}
}

/*
 * Raise the soft RLIMIT_NOFILE to the hard limit: following a VM takes
 * 2 + vCPUs fds (see libkvmstats.h), and the default soft limit of 1024
 * is below what a few hundred VMs need.  What is left out when even the
 * hard limit is not enough is said by host.c.
 */
void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (rl.rlim_max == RLIM_INFINITY) {
		/* The kernel caps it at fs.nr_open. */
		FILE *f = fopen("/proc/sys/fs/nr_open", "re");
		unsigned long n;

		if (!f)
			return;
		if (fscanf(f, "%lu", &n) == 1)
			rl.rlim_cur = n;
		fclose(f);
		if (rl.rlim_cur == RLIM_INFINITY)
			return;
	}
	setrlimit(RLIMIT_NOFILE, &rl); /* if not, the budget is smaller */
}

/*
 * getopt_long() returned @c ('?' or ':', the option strings start with a
 * colon so it prints nothing itself): one line, and a hint.
 */
int bad_option(const char *cmd, int c, char **argv)
{
	const char *arg = argv[optind - 1];
	char opt[64];

	if (arg && arg[0] == '-' && arg[1] == '-')
		snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(arg, "="), arg);
	else
		snprintf(opt, sizeof(opt), "-%c", optopt);
	if (c == ':')
		errmsg("%s: option '%s' needs a value (try kvmstats %s --help)",
		       cmd, opt, cmd);
	else
		errmsg("%s: unknown option '%s' (try kvmstats %s --help)", cmd,
		       opt, cmd);
	return EXIT_USAGE;
}
