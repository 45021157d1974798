/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sampler PID FD [VCPU]: once a second, vCPU VCPU (default 0) of the VM
 * whose VM file is open as FD in process PID, until that process exits.
 * sampler FILE: a stats file read once (a recorded one, say).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <libkvmstats.h>

/* The statistic called @name, or NULL where this kernel has none. */
static const struct kvmstats_stat *stat_named(const struct kvmstats_file *f,
					      const char *name)
{
	int i = kvmstats_file_find(f, name); /* -ENOENT if absent */

	return i < 0 ? NULL : kvmstats_file_stat(f, i);
}

int main(int argc, char **argv)
{
	struct kvmstats_vmref *vm = NULL;
	struct kvmstats_file *f = NULL;
	const struct kvmstats_stat *exits, *io;
	uint64_t *data = NULL;
	int fd, dev = -1, err;

	if (argc == 2) {
		fd = open(argv[1], O_RDONLY | O_CLOEXEC);
		err = fd < 0 ? -errno : kvmstats_file_adopt(fd, 0, &f);
	} else if (argc == 3 || argc == 4) {
		dev = kvmstats_open_device(); /* /dev/kvmstats */
		err = dev < 0 ? dev :
				kvmstats_vmref_open(dev, atoi(argv[1]),
						    atoi(argv[2]), 0, &vm);
		if (!err) /* through a pidfd of the VMM: no pid reuse */
			err = kvmstats_vmref_file_open(
				vm, argc == 4 ? atoi(argv[3]) : 0, 0, &f);
	} else {
		fprintf(stderr,
			"usage: sampler PID FD [VCPU] | sampler FILE\n");
		return 2;
	}
	if (!err)
		data = malloc(kvmstats_file_data_size(f));
	if (!err && !data)
		err = -ENOMEM;
	if (err) {
		fprintf(stderr, "sampler: %s\n", kvmstats_strerror(err));
		return 1;
	}
	/* arm64 has no io_exits, for one: look every statistic up. */
	exits = stat_named(f, "exits");
	io = stat_named(f, "io_exits");
	for (;;) {
		err = kvmstats_file_read(f, data, kvmstats_file_data_size(f));
		if (err)
			break;
		printf("%s", kvmstats_file_id(f));
		if (exits)
			printf(" exits %llu",
			       (unsigned long long)kvmstats_value(exits, data,
								  0));
		if (io)
			printf(" io_exits %llu",
			       (unsigned long long)kvmstats_value(io, data, 0));
		printf("\n");
		fflush(stdout);
		if (!vm || kvmstats_vmref_exited(vm) == 1)
			break;
		sleep(1);
	}
	if (err)
		fprintf(stderr, "sampler: %s\n", kvmstats_strerror(err));
	free(data);
	kvmstats_file_free(f);
	kvmstats_vmref_free(vm);
	if (dev >= 0)
		close(dev);
	return err ? 1 : 0;
}
