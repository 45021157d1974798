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
#include <sys/utsname.h>
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

#define EFI_GLOBAL "8be4df61-93ca-11d2-aa0d-00e098032b8c"
#define EFI_SHIM   "605dab50-e046-4300-abb6-3dd810dd8b23"
#define EFIVARS	   "/sys/firmware/efi/efivars/"
/* Debian 12's DKMS signs with this unless framework.conf says otherwise. */
#define DKMS_MOK "/var/lib/dkms/mok.pub"

/* Up to @max bytes of @path into a malloc'd buffer, or NULL. */
static unsigned char *slurp(const char *path, size_t max, size_t *len)
{
	unsigned char *buf;
	FILE *f = fopen(path, "re");

	*len = 0;
	if (!f)
		return NULL;
	buf = malloc(max);
	if (buf)
		*len = fread(buf, 1, max, f);
	fclose(f);
	if (buf && !*len) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

/* 1: Secure Boot is on, 0: off, -1: the firmware does not say (no EFI,
 * efivarfs not mounted). */
static int secure_boot(void)
{
	size_t n;
	unsigned char *v = slurp(EFIVARS "SecureBoot-" EFI_GLOBAL, 16, &n);
	int on = -1;

	/* efivarfs: 4 bytes of attributes, then the value. */
	if (v && n == 5)
		on = v[4] == 1;
	free(v);
	return on;
}

/* Is the DER certificate @cert in one of the MOK lists shim passes on to
 * the kernel?  1 yes, 0 no, -1 no list readable. */
static int mok_enrolled(const unsigned char *cert, size_t clen)
{
	static const char *const lists[] = {
		"/sys/firmware/efi/mok-variables/MokListRT",
		EFIVARS "MokListRT-" EFI_SHIM,
		EFIVARS "MokListRT1-" EFI_SHIM,
		EFIVARS "MokListRT2-" EFI_SHIM,
	};
	int seen = -1;
	size_t i, n;

	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		unsigned char *l = slurp(lists[i], 1 << 20, &n);

		if (!l)
			continue;
		/* An EFI signature list holds each certificate verbatim. */
		seen = seen > 0 || memmem(l, n, cert, clen) ? 1 : 0;
		free(l);
	}
	return seen;
}

/* Where this kernel's kvmstats.ko is (DKMS's place first), in @path. */
static bool module_file(char *path, size_t len)
{
	static const char *const places[] = {
		"updates/dkms/kvmstats.ko",	"updates/dkms/kvmstats.ko.xz",
		"updates/dkms/kvmstats.ko.zst", "updates/dkms/kvmstats.ko.gz",
		"updates/kvmstats.ko",		"extra/kvmstats.ko",
	};
	struct utsname u;
	size_t i;

	if (uname(&u))
		return false;
	for (i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		snprintf(path, len, "/lib/modules/%s/%s", u.release, places[i]);
		if (!access(path, F_OK))
			return true;
	}
	return false;
}

/*
 * Does the module file end in an appended signature?  1 yes, 0 no, -1
 * cannot tell (compressed: the signature is inside).
 */
static int module_signed(const char *path)
{
	static const char marker[] = "~Module signature appended~\n";
	char tail[sizeof(marker) - 1];
	size_t n = strlen(path);
	int sig = -1;
	FILE *f;

	if (n < 3 || strcmp(path + n - 3, ".ko"))
		return -1;
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fseek(f, -(long)sizeof(tail), SEEK_END) &&
	    fread(tail, 1, sizeof(tail), f) == sizeof(tail))
		sig = !memcmp(tail, marker, sizeof(tail));
	fclose(f);
	return sig;
}

/*
 * No /dev/kvmstats: why, when the firmware can tell.  With Secure Boot on,
 * a kvmstats.ko that is installed but not loaded was most likely refused
 * for its signature; say whether it is signed and whether the key DKMS
 * signs with is an enrolled MOK (the lists shim hands the kernel), and
 * what to run.  Empty when Secure Boot is off or unknown.
 */
static void secure_boot_hint(char *buf, size_t len)
{
	unsigned char *cert;
	char ko[300];
	size_t clen;
	int enrolled;

	buf[0] = 0;
	if (secure_boot() != 1 || !access("/sys/module/kvmstats", F_OK))
		return;
	if (!module_file(ko, sizeof(ko))) {
		snprintf(
			buf, len,
			"; Secure Boot is on, and no kvmstats.ko is installed for this kernel (dkms status; apt-get install kvmstats-dkms)");
		return;
	}
	if (module_signed(ko) == 0) {
		snprintf(
			buf, len,
			"; Secure Boot is on and %s is unsigned: the kernel refuses it. Rebuild it with DKMS, which signs it (dkms autoinstall), and enroll DKMS's key: mokutil --import " DKMS_MOK
			", reboot, choose Enroll MOK",
			ko);
		return;
	}
	cert = slurp(DKMS_MOK, 1 << 16, &clen);
	enrolled = cert ? mok_enrolled(cert, clen) : -1;
	free(cert);
	if (enrolled == 0)
		snprintf(
			buf, len,
			"; Secure Boot is on and DKMS's key " DKMS_MOK
			" is not enrolled, so the kernel refuses %s if DKMS signed it (\"Key was rejected by service\"). Enroll it: mokutil --import " DKMS_MOK
			", reboot, choose Enroll MOK; then modprobe kvmstats",
			ko);
	else if (enrolled == 1)
		snprintf(
			buf, len,
			"; %s is installed and DKMS's key is enrolled: load it, modprobe kvmstats",
			ko);
	else
		snprintf(
			buf, len,
			"; Secure Boot is on: the kernel loads %s only if the key it is signed with is enrolled (mokutil --test-key " DKMS_MOK
			"; mokutil --import " DKMS_MOK
			" and reboot to enroll it)",
			ko);
}

/*
 * Why /dev/kvmstats could not be opened, and what would fix it: for a
 * missing device under Secure Boot, whether the module's key is enrolled
 * (secure_boot_hint); for permission denied, who the node belongs to and the udev rule that gives
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
		char sb[700];

		secure_boot_hint(sb, sizeof(sb));
		if (sb[0])
			snprintf(buf, len,
				 "%s: %s: the kvmstats module is not loaded%s",
				 dev, strerror(err), sb);
		else
			snprintf(buf, len,
				 "%s: %s (is the kvmstats module loaded?)", dev,
				 strerror(err));
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
	char why[1024];

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
