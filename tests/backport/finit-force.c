// SPDX-License-Identifier: GPL-2.0-only
/*
 * Load a module with finit_module(MODULE_INIT_IGNORE_MODVERSIONS), so that
 * a module built against headers that are not the running kernel's gets
 * past the loader's symbol version check and meets kvmstats' own proof.
 * tests/backport/run uses it in the test guest only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/module.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: finit-force MODULE.ko\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "finit-force: %s: %s\n", argv[1],
			strerror(errno));
		return 1;
	}
	if (syscall(SYS_finit_module, fd, "", MODULE_INIT_IGNORE_MODVERSIONS)) {
		printf("finit_module(%s, IGNORE_MODVERSIONS): %s\n", argv[1],
		       strerror(errno));
		return 1;
	}
	printf("finit_module(%s, IGNORE_MODVERSIONS): loaded\n", argv[1]);
	return 0;
}
