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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

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
 * The VMs matching @sel (identity_selects(): a pid, PID:FD, a QEMU guest
 * name or UUID); NULL selects all.  Exits with a message when nothing
 * matches.
 */
static int select_vms(const struct source *src, const char *sel,
		      struct kvmstats_vm_info **out)
{
	struct kvmstats_vm_info *vms;
	bool by_pid = identity_sel_is_pid(sel);
	int n, i, k = 0;

	n = source_list(src, &vms);
	if (n < 0)
		exit(source_list_error(src, n));
	for (i = 0; i < n; i++) {
		struct vm_identity id;

		if (sel && !by_pid)
			identity_read(src, vms[i].pid, vms[i].fd, &id);
		if (identity_selects(sel, vms[i].pid, vms[i].fd,
				     sel && !by_pid ? &id : NULL))
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
	struct source src;
	bool json = false;
	int c, i, n;

	while ((c = getopt_long(argc, argv, ":jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage_list(stdout);
			return EXIT_OK;
		default:
			return bad_option("list", c, argv);
		}
	}
	if (optind < argc) {
		errmsg("list: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	source_init(&src);
	n = select_vms(&src, NULL, &vms);
	if (json)
		fputs("[", stdout);
	else
		printf("%-8s %5s %6s  %-16s %s\n", "PID", "FD", "VCPUS", "COMM",
		       "NAME");
	for (i = 0; i < n; i++) {
		struct vm_identity id;

		identity_read(&src, vms[i].pid, vms[i].fd, &id);
		if (json) {
			printf("%s\n  {\"pid\": %d, \"fd\": %d, \"vcpus\": %u, \"comm\": ",
			       i ? "," : "", vms[i].pid, vms[i].fd,
			       vms[i].nr_vcpus);
			json_string(stdout, id.comm);
			fputs(", \"name\": ", stdout);
			json_string(stdout, id.name);
			fputs(", \"uuid\": ", stdout);
			json_string(stdout, id.uuid);
			fputs("}", stdout);
		} else {
			char ec[4 * sizeof(id.comm)], en[4 * sizeof(id.name)];

			printf("%-8d %5d %6u  %-16s %s\n", vms[i].pid,
			       vms[i].fd, vms[i].nr_vcpus,
			       esc(id.comm, ec, sizeof(ec)),
			       id.name[0] ? esc(id.name, en, sizeof(en)) : "-");
		}
	}
	if (json)
		fputs(n ? "\n]\n" : "]\n", stdout);
	free(vms);
	source_fini(&src);
	if (fflush(stdout)) {
		errmsg("list: writing the output: %s", strerror(errno));
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* ---------------------------------------------------------------- schema */

static void usage_schema(FILE *f)
{
	fputs("Usage: kvmstats schema [VM] [--vm|--vcpu] [-f REGEX] [--json]\n"
	      "Describe the statistics (name, type, unit, base, exponent, size,\n"
	      "bucket size, offset), read from VM (default: the module's tables,\n"
	      "or failing them the first VM listed).\n"
	      "  --vm, --vcpu   only the VM or only the vCPU statistics\n"
	      "  -f REGEX       only statistics whose name matches (extended regex)\n"
	      "  --json         JSON like QMP query-stats-schemas\n",
	      f);
}

/*
 * Why VM @vm (@vcpu: -1 or a vCPU) could not be opened, on one line; the
 * exit status for it.
 */
static int open_error(const struct kvmstats_vm_info *vm, int vcpu, int err)
{
	char what[64];

	if (vcpu >= 0 && err == -ENOENT) {
		errmsg("VM %d:%d has no vCPU %d", vm->pid, vm->fd, vcpu);
		return EXIT_NOVM;
	}
	if (err == -ESRCH || err == -EBADF) {
		errmsg("VM %d:%d exited while being read", vm->pid, vm->fd);
		return EXIT_GONE;
	}
	if (vcpu >= 0)
		snprintf(what, sizeof(what), "VM %d:%d vCPU %d", vm->pid,
			 vm->fd, vcpu);
	else
		snprintf(what, sizeof(what), "VM %d:%d", vm->pid, vm->fd);
	if (err == -EMFILE || err == -ENFILE)
		errmsg("%s: %s: the open file limit is too low (ulimit -Hn)",
		       what, kvmstats_strerror(err));
	else
		errmsg("%s: %s", what, kvmstats_strerror(err));
	return exit_for(err);
}

static void say_line(void *ctx, const char *line)
{
	(void)ctx;
	errmsg("%s", line);
}

/* Complain, once, about each statistic the library did not understand. */
static void say_skipped(const struct kvmstats_vm_info *vm,
			const struct kvmstats_file *f)
{
	skipped_msgs(f, vm->pid, vm->fd, say_line, NULL);
}

int no_match(const char *cmd, const char *what, const char *re)
{
	errmsg("%s: no %sstatistic matches -f '%s' (kvmstats schema%s lists them)",
	       cmd, what, re, strcmp(cmd, "schema") ? "" : " without -f");
	return EXIT_NOVM;
}

/*
 * The descriptors for schema and `top -f help`: those of VM @sel and its
 * vCPU 0 or, without @sel, the module's own tables (source_schema()) and
 * failing that the first VM listed.  *@tables says which.  0, or an exit
 * status (said).
 */
int schema_files(const struct source *src, const char *cmd, const char *sel,
		 bool want_vm, bool want_vcpu, struct kvmstats_file **vmf,
		 struct kvmstats_file **vcf, bool *tables)
{
	struct kvmstats_vm_info *vms = NULL;
	struct kvmstats_vmref *ref = NULL;
	int n, err, rc = 0, terr = 0;

	*vmf = *vcf = NULL;
	*tables = false;
	if (!sel) {
		terr = want_vm ? source_schema(src, false, vmf) : 0;
		if (!terr && want_vcpu)
			terr = source_schema(src, true, vcf);
		if (!terr) {
			*tables = true;
			return 0;
		}
		kvmstats_file_free(*vmf);
		*vmf = NULL;
		if (terr != -EOPNOTSUPP && terr != -ENOENT) {
			if (src->dir)
				errmsg("%s: KVMSTATS_STATS_DIR %s/schema: %s",
				       cmd, src->dir, kvmstats_strerror(terr));
			else
				errmsg("%s: %s: the module's tables (KVMSTATS_GET_SCHEMA_FD): %s",
				       cmd, "/dev/kvmstats",
				       kvmstats_strerror(terr));
			return exit_for(terr);
		}
	}
	n = select_vms(src, sel, &vms);
	if (n == 0) {
		if (src->dir)
			errmsg("%s: no VM in KVMSTATS_STATS_DIR %s, and no schema/vm and schema/vcpu there, to read the descriptors from",
			       cmd, src->dir);
		else if (src->native)
			errmsg("%s: no VM this process may inspect to read the descriptors from (without the module, KVM gives them only with a VM: start one)",
			       cmd);
		else
			errmsg("%s: no VM on this host to read the descriptors from (a kvmstats module older than API version 4 cannot give its own tables: start a VM)",
			       cmd);
		free(vms);
		return EXIT_NOVM;
	}
	err = source_vmref(src, vms[0].pid, vms[0].fd, &ref);
	if (!err && want_vm)
		err = source_file_open(src, ref, vms[0].pid, vms[0].fd, -1, 0,
				       vmf);
	if (err) {
		rc = open_error(&vms[0], -1, err);
		goto out;
	}
	if (want_vcpu && vms[0].nr_vcpus > 0) {
		err = source_file_open(src, ref, vms[0].pid, vms[0].fd, 0, 0,
				       vcf);
		if (err) {
			rc = open_error(&vms[0], 0, err);
			goto out;
		}
	}
	if (want_vcpu && !want_vm && !*vcf) {
		errmsg("VM %d:%d has no vCPU to read the descriptors from",
		       vms[0].pid, vms[0].fd);
		rc = EXIT_NOVM;
		goto out;
	}
	if (*vmf)
		say_skipped(&vms[0], *vmf);
	if (*vcf)
		say_skipped(&vms[0], *vcf);
out:
	if (rc) {
		kvmstats_file_free(*vmf);
		kvmstats_file_free(*vcf);
		*vmf = *vcf = NULL;
	}
	kvmstats_vmref_free(ref);
	free(vms);
	return rc;
}

/* How many statistics of @f (NULL: none) pass @filter. */
static unsigned int matching(const struct kvmstats_file *f,
			     const regex_t *filter)
{
	unsigned int i, n = 0;

	for (i = 0; f && i < kvmstats_file_num_stats(f); i++)
		n += name_matches(filter, kvmstats_file_stat(f, i)->name);
	return n;
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
	bool want_vm = true, want_vcpu = true, json = false, tables;
	regex_t re, *filter = NULL;
	const char *filter_text = NULL;
	struct source src;
	int c, rc = EXIT_OK;

	while ((c = getopt_long(argc, argv, ":f:jh", opts, NULL)) != -1) {
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
			if (filter)
				regfree(filter);
			filter = NULL;
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			filter_text = optarg;
			break;
		case 'h':
			usage_schema(stdout);
			return EXIT_OK;
		default:
			return bad_option("schema", c, argv);
		}
	}
	if (!want_vm && !want_vcpu)
		want_vm = want_vcpu = true;
	if (argc - optind > 1) {
		errmsg("schema: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	source_init(&src);
	rc = schema_files(&src, "schema", optind < argc ? argv[optind] : NULL,
			  want_vm, want_vcpu, &vmf, &vcf, &tables);
	if (rc)
		goto out;
	if (filter && !matching(vmf, filter) && !matching(vcf, filter)) {
		rc = no_match("schema",
			      !vcf ? "VM " :
			      !vmf ? "vCPU " :
				     "",
			      filter_text);
		goto out;
	}
	if (filter && !matching(vmf, filter)) {
		/* Only vCPU statistics match: no empty VM table. */
		kvmstats_file_free(vmf);
		vmf = NULL;
	}
	if (filter && !matching(vcf, filter)) {
		kvmstats_file_free(vcf);
		vcf = NULL;
	}
	if (json) {
		json_schemas(stdout, vmf, vcf, filter);
	} else {
		char ei[512];

		if (vmf) {
			printf("VM statistics (%u), from %s:\n",
			       kvmstats_file_num_stats(vmf),
			       tables ? "the module's tables" :
					esc(kvmstats_file_id(vmf), ei,
					    sizeof(ei)));
			text_schema(stdout, vmf, filter);
		}
		if (vcf) {
			printf("%svCPU statistics (%u), from %s:\n",
			       vmf ? "\n" : "", kvmstats_file_num_stats(vcf),
			       tables ? "the module's tables" :
					esc(kvmstats_file_id(vcf), ei,
					    sizeof(ei)));
			text_schema(stdout, vcf, filter);
		}
	}
	if (fflush(stdout)) {
		errmsg("schema: writing the output: %s", strerror(errno));
		rc = EXIT_FAIL;
	}
out:
	kvmstats_file_free(vmf);
	kvmstats_file_free(vcf);
	source_fini(&src);
	if (filter)
		regfree(filter);
	return rc;
}

/* ------------------------------------------------------------------ show */

static void usage_show(FILE *f)
{
	fputs("Usage: kvmstats show [VM] [--vcpu N|all] [-a] [-f REGEX] [--json]\n"
	      "Print the statistics of VM (PID, PID:FD, QEMU guest name or UUID;\n"
	      "default: every VM).  Values are raw, with their unit; histograms list\n"
	      "their non-empty buckets.\n"
	      "  --vcpu N|all   the statistics of vCPU N (index), or of every vCPU\n"
	      "  -a, --all      the VM and every vCPU\n"
	      "  -f REGEX       only statistics whose name matches (extended regex)\n"
	      "  --json         JSON like QMP query-stats (StatsResult), with pid, fd\n"
	      "                 and vcpu in place of qom-path\n",
	      f);
}

/*
 * One object of a VM: open, read, print, close; one at a time, so `show`
 * of a whole host needs no more than three fds.  0, or an exit status.
 */
/*
 * vCPU @vcpu's thread as @thr (of @nthr) lists it, with its name and what
 * the scheduler gave it, into @t (@comm holds the name).
 */
static void show_thread(const struct source *src,
			const struct kvmstats_vm_info *vm, int vcpu,
			const struct kvmstats_vcpu_info *thr, int nthr,
			struct obj_thread *t, char *comm, size_t commlen)
{
	struct kvmstats_sched sc;
	int err;

	*t = (struct obj_thread){ .last_cpu = -1, .comm = comm };
	comm[0] = '\0';
	if (nthr < 0 || vcpu >= nthr) {
		/* The device could not say: its error, or a vCPU it lacks. */
		t->state = identity_thread_state(0, nthr < 0 ? nthr : -ENOENT);
		t->why = nthr < 0 ? kvmstats_strerror(nthr) :
				    "not listed by the device";
		return;
	}
	t->tid = thr[vcpu].tid;
	t->state = identity_thread_state(thr[vcpu].flags, 0);
	t->why = identity_thread_why(thr[vcpu].flags, 0);
	if (!t->tid)
		return;
	identity_thread_comm(src, vm->pid, vm->fd, t->tid, comm, commlen);
	err = identity_thread_sched(src, vm->pid, vm->fd, t->tid,
				    KVMSTATS_SCHED_LAST_CPU, &sc);
	t->state = identity_thread_state(0, err);
	t->why = identity_thread_why(0, err);
	if (err)
		return;
	t->has_sched = true;
	t->cpu_ns = sc.cpu_ns;
	t->wait_ns = sc.wait_ns;
	t->timeslices = sc.timeslices;
	t->last_cpu = sc.last_cpu;
}

static int show_one(const struct source *src, struct kvmstats_vmref *ref,
		    const struct kvmstats_vm_info *vm, int vcpu,
		    const struct vm_identity *id,
		    const struct kvmstats_vcpu_info *thr, int nthr, bool json,
		    size_t *nobj, size_t *nread, const regex_t *filter)
{
	struct obj_thread t;
	char tcomm[64];
	struct kvmstats_file *f;
	struct obj o;
	void *buf;
	size_t sz;
	int err;

	err = source_file_open(src, ref, vm->pid, vm->fd, vcpu, 0, &f);
	if (err)
		return err; /* the caller decides */
	say_skipped(vm, f);
	(*nread)++;
	if (!matching(f, filter) &&
	    (vcpu < 0 || !name_matches(filter, THREAD_PSEUDO_STAT))) {
		/* Nothing of it to show: not even its header. */
		kvmstats_file_free(f);
		return 0;
	}
	sz = kvmstats_file_data_size(f);
	buf = malloc(sz ? sz : 1);
	if (!buf) {
		kvmstats_file_free(f);
		return -ENOMEM;
	}
	err = kvmstats_file_read(f, buf, sz);
	if (err) {
		errmsg("VM %d:%d: reading %s: %s", vm->pid, vm->fd,
		       kvmstats_file_id(f), kvmstats_strerror(err));
		kvmstats_file_free(f);
		free(buf);
		return exit_for(err); /* an exit status (> 0): said */
	}
	o = (struct obj){ .pid = vm->pid,
			  .fd = vm->fd,
			  .vcpu = vcpu,
			  .file = f,
			  .data = buf,
			  .name = id->name,
			  .comm = id->comm,
			  .uuid = id->uuid };
	if (vcpu >= 0) {
		show_thread(src, vm, vcpu, thr, nthr, &t, tcomm, sizeof(tcomm));
		o.thread = &t;
	}
	if (json) {
		json_result(stdout, &o, filter, *nobj == 0);
	} else {
		char ei[512], ec[4 * 32], en[4 * 128];

		esc(kvmstats_file_id(f), ei, sizeof(ei));
		if (vcpu < 0)
			printf("%sVM %d:%d %s (%s%s%s%s%s)\n",
			       *nobj ? "\n" : "", vm->pid, vm->fd, ei,
			       esc(id->comm, ec, sizeof(ec)),
			       id->name[0] ? ", guest " : "",
			       esc(id->name, en, sizeof(en)),
			       id->uuid[0] ? ", uuid " : "", id->uuid);
		else
			printf("%svCPU %d of VM %d:%d %s\n", *nobj ? "\n" : "",
			       vcpu, vm->pid, vm->fd, ei);
		text_stats(stdout, &o, filter);
	}
	(*nobj)++;
	kvmstats_file_free(f);
	free(buf);
	return 0;
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
	bool json = false, with_vm = true, all_vcpus = false;
	int vcpu = -1, c, n, i, rc = EXIT_OK;
	regex_t re, *filter = NULL;
	const char *filter_text = NULL;
	struct source src;
	size_t nobj = 0, nread = 0;
	const char *sel;

	while ((c = getopt_long(argc, argv, ":af:jh", opts, NULL)) != -1) {
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
			if (filter)
				regfree(filter);
			filter = NULL;
			if (compile_filter(optarg, &re))
				return EXIT_USAGE;
			filter = &re;
			filter_text = optarg;
			break;
		case 'h':
			usage_show(stdout);
			return EXIT_OK;
		default:
			return bad_option("show", c, argv);
		}
	}
	if (argc - optind > 1) {
		errmsg("show: unexpected argument '%s'", argv[optind + 1]);
		return EXIT_USAGE;
	}
	sel = optind < argc ? argv[optind] : NULL;
	source_init(&src);
	n = select_vms(&src, sel, &vms);

	if (json)
		fputs("[", stdout);
	for (i = 0; i < n && rc == EXIT_OK; i++) {
		const struct kvmstats_vm_info *vm = &vms[i];
		int first = with_vm ? -1 : (all_vcpus ? 0 : vcpu);
		int last = all_vcpus ? (int)vm->nr_vcpus - 1 :
				       (with_vm ? -1 : vcpu);
		struct kvmstats_vcpu_info *thr = NULL;
		struct kvmstats_vmref *ref = NULL;
		struct vm_identity id;
		int v, err, nthr = 0;

		if (!all_vcpus && !with_vm && vcpu >= (int)vm->nr_vcpus) {
			errmsg("VM %d:%d has no vCPU %d (it has %u)", vm->pid,
			       vm->fd, vcpu, vm->nr_vcpus);
			rc = EXIT_NOVM;
			break;
		}
		err = source_vmref(&src, vm->pid, vm->fd, &ref);
		if (err && (err == -ESRCH || err == -EBADF) && !sel)
			continue; /* exited since the list: not ours to show */
		if (err) {
			rc = open_error(vm, -1, err);
			break;
		}
		identity_read(&src, vm->pid, vm->fd, &id);
		/* Which thread runs each vCPU: once for the VM. */
		if (last >= 0)
			nthr = identity_vcpu_threads(&src, ref, vm->pid, vm->fd,
						     vm->nr_vcpus, &thr);
		for (v = first; v <= last; v++) {
			if (v == -1 && !with_vm)
				continue;
			err = show_one(&src, ref, vm, v, &id, thr, nthr, json,
				       &nobj, &nread, filter);
			if (!err)
				continue;
			if ((err == -ESRCH || err == -EBADF) && !sel)
				break; /* exited since the list */
			rc = err > 0 ? err : open_error(vm, v, err);
			break;
		}
		free(thr);
		kvmstats_vmref_free(ref);
	}
	if (json)
		fputs(nobj ? "\n]\n" : "]\n", stdout);
	free(vms);
	source_fini(&src);
	if (filter)
		regfree(filter);
	if (fflush(stdout)) {
		errmsg("show: writing the output: %s", strerror(errno));
		return EXIT_FAIL;
	}
	/* Statistics were read, and none of them was asked for. */
	if (!rc && filter && nread && !nobj)
		rc = no_match("show",
			      with_vm && !all_vcpus ? "VM " :
			      !with_vm		    ? "vCPU " :
						      "",
			      filter_text);
	return rc;
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
		struct source src;

		printf("kvmstats %s\n", KVMSTATS_RELEASE);
		source_path(&src);
		printf("stats path: %s: %s\n",
		       src.dir ?
			       "a stats directory" :
		       src.native ?
			       "native (KVM_GET_STATS_FD on copies of the VMMs' fds, no module)" :
			       "module (/dev/kvmstats)",
		       src.why);
		return EXIT_OK;
	}
	raise_nofile();
	text_escape_init();
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (!strcmp(argv[1], cmds[i].name)) {
			/* Options are parsed from the subcommand on. */
			argv[1] = argv[0];
			return cmds[i].fn(argc - 1, argv + 1);
		}
	}
	if (argv[1][0] == '-')
		errmsg("unknown option '%s' (try kvmstats --help)", argv[1]);
	else
		errmsg("unknown command '%s' (try kvmstats --help)", argv[1]);
	return EXIT_USAGE;
}
