// SPDX-License-Identifier: GPL-2.0-only
/*
 * The harness's own first test: the guest has what every other test takes
 * for granted.  It runs first, so a broken guest reads as one clear failure
 * here rather than as a confusing one further down.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "../../include/uapi/linux/kvmstats.h"

static void check_chardev(const char *path)
{
	struct stat st;

	if (stat(path, &st)) {
		tap_fail("%s exists (%s)", path, strerror(errno));
		return;
	}
	tap_check(S_ISCHR(st.st_mode), "%s is a character device", path);
}

static void check_env(const char *name)
{
	const char *value = getenv(name);

	tap_check(value && *value, "the harness sets %s (%s)", name,
		  value ? value : "unset");
}

int main(void)
{
	int fd, ret;

	tap_init();

	check_chardev("/dev/kvm");
	check_chardev(KVMSTATS_DEVICE);
	check_env("KVMSTATS_MODDIR");
	check_env("KVMSTATS_KVM");
	/* No vendor module where KVM is built in (arm64). */
	if (getenv("KVMSTATS_KVM") &&
	    !strcmp(getenv("KVMSTATS_KVM"), "builtin"))
		tap_check(
			getenv("KVMSTATS_VENDOR") &&
				!*getenv("KVMSTATS_VENDOR"),
			"KVM is built in: the harness names no vendor module");
	else
		check_env("KVMSTATS_VENDOR");
	check_env("KVMSTATS_CONFIG");
	check_env("KVMSTATS_ARTIFACTS");

	fd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		tap_fail("open %s O_RDONLY (%s)", KVMSTATS_DEVICE,
			 strerror(errno));
		return tap_exit();
	}
	tap_pass("open %s O_RDONLY", KVMSTATS_DEVICE);

	ret = ioctl(fd, KVMSTATS_GET_API_VERSION, 0);
	if (ret < 0)
		tap_fail("KVMSTATS_GET_API_VERSION (%s)", strerror(errno));
	else
		tap_eq(ret, KVMSTATS_API_VERSION,
		       "KVMSTATS_GET_API_VERSION returns %d",
		       KVMSTATS_API_VERSION);

	close(fd);
	return tap_exit();
}
