// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats: KVM statistics of every VM on the host, through /dev/kvmstats.
 *
 *   kvmstats list | schema | show | top | export  (each with --help)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

void errmsg(const char *fmt, ...)
{
	va_list ap;

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
	case ENOENT:
		return EXIT_NOVM;
	case EINTR:
		return EXIT_INTR;
	}
	return EXIT_FAIL;
}

int open_device(void)
{
	int fd = kvmstats_open_device();

	if (fd >= 0)
		return fd;
	if (fd == -ENOENT || fd == -ENXIO || fd == -ENODEV) {
		errmsg("%s: %s (is the kvmstats module loaded?)",
		       "/dev/kvmstats", kvmstats_strerror(fd));
		exit(EXIT_NODEV);
	}
	errmsg("%s: %s", "/dev/kvmstats", kvmstats_strerror(fd));
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

void proc_names(int pid, char *comm, size_t commlen, char *name, size_t namelen)
{
	char path[64], buf[8192];
	ssize_t n;
	int fd;

	snprintf(comm, commlen, "?");
	name[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			snprintf(comm, commlen, "%s", buf);
		}
		close(fd);
	}
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		if (n > 0)
			parse_guest_name(buf, (size_t)n, name, namelen);
		close(fd);
	}
}

static int parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

/*
 * The VMs matching @sel: "PID", "PID:FD", or a QEMU guest name; NULL
 * selects all.  Exits with a message when nothing matches.
 */
static int select_vms(int devfd, const char *sel, struct kvmstats_vm_info **out)
{
	struct kvmstats_vm_info *vms;
	int n, i, k = 0, pid = -1, fd = -1;
	char comm[32], name[128];

	n = kvmstats_list_vms(devfd, &vms);
	if (n < 0) {
		errmsg("listing VMs: %s", kvmstats_strerror(n));
		exit(exit_for(n));
	}
	if (sel) {
		const char *colon = strchr(sel, ':');
		char pidpart[32];

		if (colon && (size_t)(colon - sel) < sizeof(pidpart)) {
			memcpy(pidpart, sel, (size_t)(colon - sel));
			pidpart[colon - sel] = '\0';
			if (parse_int(pidpart, 1, INT_MAX, &pid) ||
			    parse_int(colon + 1, 0, INT_MAX, &fd))
				pid = fd = -1;
		} else if (parse_int(sel, 1, INT_MAX, &pid)) {
			pid = -1;
		}
	}
	for (i = 0; i < n; i++) {
		bool keep = !sel;

		if (sel && pid > 0)
			keep = vms[i].pid == pid && (fd < 0 || vms[i].fd == fd);
		else if (sel) {
			proc_names(vms[i].pid, comm, sizeof(comm), name,
				   sizeof(name));
			keep = !strcmp(name, sel);
		}
		if (keep)
			vms[k++] = vms[i];
	}
	if (sel && !k) {
		free(vms);
		errmsg("no VM matches '%s' (see kvmstats list)", sel);
		exit(EXIT_NOVM);
	}
	*out = vms;
	return k;
}

/* ------------------------------------------------------------------ list */

static void usage_list(FILE *f)
{
	fputs("Usage: kvmstats list [--json]\n"
	      "List the VMs of the host: pid, VM fd, vCPUs, the VMM's command name\n"
	      "and, for QEMU, its -name.\n",
	      f);
}

static int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct kvmstats_vm_info *vms = NULL;
	bool json = false;
	int c, i, n, devfd;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage_list(stdout);
			return EXIT_OK;
		default:
			usage_list(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		errmsg("list: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	devfd = open_device();
	n = select_vms(devfd, NULL, &vms);
	if (json)
		fputs("[", stdout);
	else
		printf("%-8s %5s %6s  %-16s %s\n", "PID", "FD", "VCPUS", "COMM",
		       "NAME");
	for (i = 0; i < n; i++) {
		char comm[32], name[128];

		proc_names(vms[i].pid, comm, sizeof(comm), name, sizeof(name));
		if (json) {
			printf("%s\n  {\"pid\": %d, \"fd\": %d, \"vcpus\": %u, \"comm\": ",
			       i ? "," : "", vms[i].pid, vms[i].fd,
			       vms[i].nr_vcpus);
			json_string(stdout, comm);
			fputs(", \"name\": ", stdout);
			json_string(stdout, name);
			fputs("}", stdout);
		} else {
			printf("%-8d %5d %6u  %-16s %s\n", vms[i].pid,
			       vms[i].fd, vms[i].nr_vcpus, comm,
			       name[0] ? name : "-");
		}
	}
	if (json)
		fputs(n ? "\n]\n" : "]\n", stdout);
	free(vms);
	close(devfd);
	return EXIT_OK;
}

/* ---------------------------------------------------------------- schema */

static void usage_schema(FILE *f)
{
	fputs("Usage: kvmstats schema [VM] [--vm|--vcpu] [-f REGEX] [--json]\n"
	      "Describe the statistics (name, type, unit, base, exponent, size,\n"
	      "bucket size, offset), read from VM (default: the first VM listed).\n"
	      "  --vm, --vcpu   only the VM or only the vCPU statistics\n"
	      "  -f REGEX       only statistics whose name matches (extended regex)\n"
	      "  --json         JSON like QMP query-stats-schemas\n",
	      f);
}

static int open_or_die(int devfd, const struct kvmstats_vm_info *vm, int vcpu,
		       struct kvmstats_file **f)
{
	int err = kvmstats_file_open(devfd, vm->pid, vm->fd, vcpu, f);

	if (!err)
		return 0;
	if (vcpu >= 0 && err == -ENOENT)
		errmsg("VM %d:%d has no vCPU %d", vm->pid, vm->fd, vcpu);
	else if (err == -ESRCH || err == -EBADF)
		errmsg("VM %d:%d exited while being read", vm->pid, vm->fd);
	else
		errmsg("VM %d:%d%s: %s", vm->pid, vm->fd,
		       vcpu >= 0 ? " vCPU" : "", kvmstats_strerror(err));
	exit(exit_for(err == -ENOENT && vcpu < 0 ? -ESRCH : err));
}

static int cmd_schema(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vm", no_argument, NULL, 'm' },
		{ "vcpu", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "filter", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct kvmstats_file *vmf = NULL, *vcf = NULL;
	struct kvmstats_vm_info *vms = NULL;
	bool want_vm = true, want_vcpu = true, json = false;
	regex_t re, *filter = NULL;
	int c, n, devfd;

	while ((c = getopt_long(argc, argv, "f:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			want_vcpu = false;
			break;
		case 'c':
			want_vm = false;
			break;
		case 'j':
			json = true;
			break;
		case 'f':
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			break;
		case 'h':
			usage_schema(stdout);
			return EXIT_OK;
		default:
			usage_schema(stderr);
			return EXIT_USAGE;
		}
	}
	if (!want_vm && !want_vcpu)
		want_vm = want_vcpu = true;
	if (argc - optind > 1) {
		errmsg("schema: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	devfd = open_device();
	n = select_vms(devfd, optind < argc ? argv[optind] : NULL, &vms);
	if (n == 0) {
		errmsg("no VM on this host to read the descriptors from");
		return EXIT_NOVM;
	}
	if (want_vm)
		open_or_die(devfd, &vms[0], -1, &vmf);
	if (want_vcpu && vms[0].nr_vcpus > 0)
		open_or_die(devfd, &vms[0], 0, &vcf);
	if (want_vcpu && !want_vm && !vcf) {
		errmsg("VM %d:%d has no vCPU to read the descriptors from",
		       vms[0].pid, vms[0].fd);
		return EXIT_NOVM;
	}
	if (json) {
		json_schemas(stdout, vmf, vcf, filter);
	} else {
		if (vmf) {
			printf("VM statistics (%u), from %s:\n",
			       kvmstats_file_num_stats(vmf),
			       kvmstats_file_id(vmf));
			text_schema(stdout, vmf, filter);
		}
		if (vcf) {
			printf("%svCPU statistics (%u), from %s:\n",
			       vmf ? "\n" : "", kvmstats_file_num_stats(vcf),
			       kvmstats_file_id(vcf));
			text_schema(stdout, vcf, filter);
		}
	}
	kvmstats_file_free(vmf);
	kvmstats_file_free(vcf);
	free(vms);
	close(devfd);
	return EXIT_OK;
}

/* ------------------------------------------------------------------ show */

static void usage_show(FILE *f)
{
	fputs("Usage: kvmstats show [VM] [--vcpu N|all] [-a] [-f REGEX] [--json]\n"
	      "Print the statistics of VM (PID, PID:FD or QEMU guest name; default:\n"
	      "every VM).  Values are raw, with their unit; histograms list their\n"
	      "non-empty buckets.\n"
	      "  --vcpu N|all   the statistics of vCPU N (index), or of every vCPU\n"
	      "  -a, --all      the VM and every vCPU\n"
	      "  -f REGEX       only statistics whose name matches (extended regex)\n"
	      "  --json         JSON like QMP query-stats (StatsResult), with pid, fd\n"
	      "                 and vcpu in place of qom-path\n",
	      f);
}

static int cmd_show(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vcpu", required_argument, NULL, 'c' },
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "filter", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct kvmstats_vm_info *vms = NULL;
	struct obj *objs = NULL;
	struct kvmstats_file **files = NULL;
	void **bufs = NULL;
	bool json = false, with_vm = true, all_vcpus = false;
	int vcpu = -1, c, n, i, devfd;
	size_t nobj = 0, room = 0, k;
	regex_t re, *filter = NULL;
	const char *sel;

	while ((c = getopt_long(argc, argv, "af:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			with_vm = false;
			if (!strcmp(optarg, "all")) {
				all_vcpus = true;
			} else if (parse_int(optarg, 0, INT_MAX, &vcpu)) {
				errmsg("show: --vcpu wants a vCPU index or 'all', not '%s'",
				       optarg);
				return EXIT_USAGE;
			}
			break;
		case 'a':
			with_vm = true;
			all_vcpus = true;
			break;
		case 'j':
			json = true;
			break;
		case 'f':
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			break;
		case 'h':
			usage_show(stdout);
			return EXIT_OK;
		default:
			usage_show(stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind > 1) {
		errmsg("show: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	sel = optind < argc ? argv[optind] : NULL;
	devfd = open_device();
	n = select_vms(devfd, sel, &vms);

	for (i = 0; i < n; i++) {
		int first = with_vm ? -1 : (all_vcpus ? 0 : vcpu);
		int last = all_vcpus ? (int)vms[i].nr_vcpus - 1 :
				       (with_vm ? -1 : vcpu);
		int v;

		if (!all_vcpus && !with_vm && vcpu >= (int)vms[i].nr_vcpus) {
			errmsg("VM %d:%d has no vCPU %d (it has %u)",
			       vms[i].pid, vms[i].fd, vcpu, vms[i].nr_vcpus);
			return EXIT_NOVM;
		}
		for (v = first; v <= last; v++) {
			struct kvmstats_file *f;
			size_t sz;
			void *buf;
			int err;

			if (v == -1 && !with_vm)
				continue;
			err = kvmstats_file_open(devfd, vms[i].pid, vms[i].fd,
						 v, &f);
			if ((err == -ESRCH || err == -EBADF) && !sel)
				break; /* exited since the list: not ours to show */
			if (err)
				open_or_die(devfd, &vms[i], v, &f);
			if (nobj == room) {
				room = room ? 2 * room : 16;
				objs = realloc(objs, room * sizeof(*objs));
				files = realloc(files, room * sizeof(*files));
				bufs = realloc(bufs, room * sizeof(*bufs));
				if (!objs || !files || !bufs) {
					errmsg("out of memory");
					return EXIT_FAIL;
				}
			}
			sz = kvmstats_file_data_size(f);
			buf = malloc(sz ? sz : 1);
			if (!buf) {
				errmsg("out of memory");
				return EXIT_FAIL;
			}
			err = kvmstats_file_read(f, buf, sz);
			if (err) {
				errmsg("VM %d:%d: reading %s: %s", vms[i].pid,
				       vms[i].fd, kvmstats_file_id(f),
				       kvmstats_strerror(err));
				return exit_for(err);
			}
			files[nobj] = f;
			bufs[nobj] = buf;
			objs[nobj] = (struct obj){ .pid = vms[i].pid,
						   .fd = vms[i].fd,
						   .vcpu = v,
						   .file = f,
						   .data = buf };
			nobj++;
		}
	}

	if (json) {
		json_results(stdout, objs, nobj, filter);
	} else {
		for (k = 0; k < nobj; k++) {
			const struct obj *o = &objs[k];

			if (o->vcpu < 0) {
				char comm[32], name[128];

				proc_names(o->pid, comm, sizeof(comm), name,
					   sizeof(name));
				printf("%sVM %d:%d %s (%s%s%s)\n",
				       k ? "\n" : "", o->pid, o->fd,
				       kvmstats_file_id(o->file), comm,
				       name[0] ? ", guest " : "", name);
			} else {
				printf("%svCPU %d of VM %d:%d %s\n",
				       k ? "\n" : "", o->vcpu, o->pid, o->fd,
				       kvmstats_file_id(o->file));
			}
			text_stats(stdout, o, filter);
		}
	}
	for (k = 0; k < nobj; k++) {
		kvmstats_file_free(files[k]);
		free(bufs[k]);
	}
	free(objs);
	free(files);
	free(bufs);
	free(vms);
	close(devfd);
	if (fflush(stdout)) {
		errmsg("writing the output: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fputs("Usage: kvmstats COMMAND [OPTIONS]\n"
	      "KVM statistics of every VM on the host, through /dev/kvmstats.\n"
	      "\n"
	      "Commands:\n"
	      "  list     the VMs: pid, fd, vCPUs, command and QEMU guest name\n"
	      "  schema   the statistics' descriptors (like query-stats-schemas)\n"
	      "  show     the values of a VM or its vCPUs (text or JSON)\n"
	      "  top      a live view with totals and rates per second\n"
	      "  export   Prometheus text exposition (stdout or HTTP /metrics)\n"
	      "\n"
	      "'kvmstats COMMAND --help' describes each; see kvmstats(1).\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "list", cmd_list },	  { "schema", cmd_schema },
		{ "show", cmd_show },	  { "top", cmd_top },
		{ "export", cmd_export },
	};
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("kvmstats %d.%d\n", LIBKVMSTATS_VERSION_MAJOR,
		       LIBKVMSTATS_VERSION_MINOR);
		return EXIT_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (!strcmp(argv[1], cmds[i].name)) {
			/* Options are parsed from the subcommand on. */
			argv[1] = argv[0];
			return cmds[i].fn(argc - 1, argv + 1);
		}
	}
	errmsg("unknown command '%s' (try kvmstats --help)", argv[1]);
	return EXIT_USAGE;
}
