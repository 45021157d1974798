// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvmstats against QEMU's own query-stats, on a real QEMU: Debian's
 * qemu-system-x86_64 or qemu-system-aarch64 run nested with -accel kvm,
 * 2 vCPUs, booting SeaBIOS or (arm64) a few instructions that wait in WFI
 * (nested_qemu.h), with a QMP socket.  QEMU reads its statistics with KVM's own
 * KVM_GET_STATS_FD; we read the same VM and vCPUs through /dev/kvmstats,
 * found from QEMU's pid alone (LIST_PIDFD), QEMU telling us nothing.
 *
 * With the guest paused (QMP stop: every vCPU out of KVM_RUN), for the VM
 * and for each vCPU (QEMU's qom-path -> its thread-id in query-cpus-fast
 * -> our vCPU whose stats id names that thread, which LIST_VCPUS also
 * names as the one that runs it):
 *   - every statistic of query-stats-schemas is one of our descriptors,
 *     with its type, unit, base, exponent and bucket size, and every
 *     descriptor of ours is in QEMU's schema;
 *   - every value of query-stats (provider kvm, targets vm and vcpu) is
 *     ours, read before and after QEMU's read: scalars, booleans and
 *     histograms bucket by bucket (QEMU lists them last bucket first:
 *     qemu_bucket()), and QEMU reports each of ours once; nothing may
 *     move while paused but what the host itself moves (host_side[]);
 * then cont, a while of running, stop, and the same again: the values
 * moved (cumulative ones never back) and still agree.  Then quit.
 *
 * No statistic name is assumed: what is compared is whatever QEMU and the
 * file list.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault.h"
#include "kvmstats_util.h"
#include "nested_qemu.h"

#define QMP_SOCK    "/tmp/58-qmp.sock"
#define NR_VCPUS    2
#define NR_OBJS	    (1 + NR_VCPUS) /* [0] the VM, [1 + i] vCPU index i */
#define QMP_WAIT_MS 60000
#define MAX_DIAGS   8 /* mismatches printed per check */

static pid_t qemu_pid;

/* ------------------------------------------------ JSON, as QMP sends it */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

/*
 * A parsed JSON value.  Numbers keep their exact magnitude when they are
 * integers that fit 64 bits (QMP's u64 statistics), never a double.
 */
struct jv {
	enum jtype type;
	char *key;		/* member name, for a member of an object */
	char *str;		/* J_STR, unescaped */
	bool b;			/* J_BOOL */
	bool neg, integer;	/* J_NUM: sign; integer that fits 64 bits */
	uint64_t u;		/* J_NUM: magnitude, if integer */
	struct jv *kids, *next; /* J_ARR, J_OBJ: first element; sibling */
	int n;			/* J_ARR, J_OBJ: number of elements */
};

struct jparse {
	const char *s;
	int depth;
};

static void jv_free(struct jv *v)
{
	while (v) {
		struct jv *next = v->next;

		jv_free(v->kids);
		free(v->key);
		free(v->str);
		free(v);
		v = next;
	}
}

static void jp_ws(struct jparse *p)
{
	while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
		p->s++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits at @s, or -1. */
static long hex4(const char *s)
{
	long v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		int h = hexval(s[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

/* Code point @cp as UTF-8 at @o; returns the end. */
static char *put_utf8(char *o, long cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | cp >> 6);
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | cp >> 12);
		*o++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | cp >> 18);
		*o++ = (char)(0x80 | (cp >> 12 & 0x3f));
		*o++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

/*
 * The string at p->s, unescaped into a new C string (which is never
 * longer than its escaped form); NULL if it is not a JSON string or would
 * hold a NUL.
 */
static char *jp_string(struct jparse *p)
{
	const char *s = p->s;
	char *out, *o;

	if (*s++ != '"')
		return NULL;
	out = o = malloc(strlen(s) + 1);
	if (!out)
		return NULL;
	while (*s != '"') {
		long cp;

		if ((unsigned char)*s < 0x20)
			goto bad; /* the end of the text, or a control */
		if (*s != '\\') {
			*o++ = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case '"':
		case '\\':
		case '/':
			*o++ = *s++;
			continue;
		case 'b':
			*o++ = '\b';
			s++;
			continue;
		case 'f':
			*o++ = '\f';
			s++;
			continue;
		case 'n':
			*o++ = '\n';
			s++;
			continue;
		case 'r':
			*o++ = '\r';
			s++;
			continue;
		case 't':
			*o++ = '\t';
			s++;
			continue;
		case 'u':
			break;
		default:
			goto bad;
		}
		cp = hex4(s + 1);
		if (cp <= 0)
			goto bad;
		s += 5;
		if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair */
			long lo =
				s[0] == '\\' && s[1] == 'u' ? hex4(s + 2) : -1;

			if (lo < 0xdc00 || lo >= 0xe000)
				goto bad;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			s += 6;
		} else if (cp >= 0xdc00 && cp < 0xe000) {
			goto bad;
		}
		o = put_utf8(o, cp);
	}
	*o = '\0';
	p->s = s + 1;
	return out;
bad:
	free(out);
	return NULL;
}

static bool isdig(char c)
{
	return c >= '0' && c <= '9';
}

static bool jp_number(struct jparse *p, struct jv *v)
{
	const char *s = p->s;

	v->type = J_NUM;
	v->neg = *s == '-';
	if (v->neg)
		s++;
	if (!isdig(*s) || (*s == '0' && isdig(s[1])))
		return false;
	v->integer = true;
	for (; isdig(*s); s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v->u > (UINT64_MAX - d) / 10)
			v->integer = false; /* beyond 64 bits */
		else
			v->u = v->u * 10 + d;
	}
	if (*s == '.') {
		if (!isdig(*++s))
			return false;
		while (isdig(*s))
			s++;
		v->integer = false;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdig(*s))
			return false;
		while (isdig(*s))
			s++;
		v->integer = false;
	}
	p->s = s;
	return true;
}

static struct jv *jp_value(struct jparse *p)
{
	struct jv *v, **tail;
	bool obj;
	char close;

	jp_ws(p);
	if (p->depth >= 64)
		return NULL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	switch (*p->s) {
	case '{':
	case '[':
		obj = *p->s == '{';
		close = obj ? '}' : ']';
		v->type = obj ? J_OBJ : J_ARR;
		p->s++;
		p->depth++;
		jp_ws(p);
		tail = &v->kids;
		if (*p->s == close) {
			p->s++;
			p->depth--;
			break;
		}
		for (;;) {
			struct jv *kid;
			char *key = NULL;

			if (obj) {
				jp_ws(p);
				key = jp_string(p);
				if (!key)
					goto bad;
				jp_ws(p);
				if (*p->s != ':') {
					free(key);
					goto bad;
				}
				p->s++;
			}
			kid = jp_value(p);
			if (!kid) {
				free(key);
				goto bad;
			}
			kid->key = key;
			*tail = kid;
			tail = &kid->next;
			v->n++;
			jp_ws(p);
			if (*p->s == ',') {
				p->s++;
				continue;
			}
			if (*p->s != close)
				goto bad;
			p->s++;
			break;
		}
		p->depth--;
		break;
	case '"':
		v->type = J_STR;
		v->str = jp_string(p);
		if (!v->str)
			goto bad;
		break;
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "null", 4)) {
			v->type = *p->s == 't' ? J_BOOL : J_NULL;
			v->b = true;
			p->s += 4;
		} else if (!strncmp(p->s, "false", 5)) {
			v->type = J_BOOL;
			p->s += 5;
		} else {
			goto bad;
		}
		break;
	default:
		if (!jp_number(p, v))
			goto bad;
	}
	return v;
bad:
	jv_free(v);
	return NULL;
}

/* @text as one JSON value (surrounding white space allowed), or NULL. */
static struct jv *json_parse(const char *text)
{
	struct jparse p = { .s = text };
	struct jv *v = jp_value(&p);

	jp_ws(&p);
	if (v && *p.s) {
		jv_free(v);
		v = NULL;
	}
	return v;
}

/* Member @key of object @o, or NULL. */
static const struct jv *jget(const struct jv *o, const char *key)
{
	const struct jv *k;

	if (!o || o->type != J_OBJ)
		return NULL;
	for (k = o->kids; k; k = k->next)
		if (!strcmp(k->key, key))
			return k;
	return NULL;
}

/* String member @key of @o, or NULL. */
static const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->type == J_STR ? v->str : NULL;
}

/* @v as an integer in [-2^62, 2^62], into *@out. */
static bool jint(const struct jv *v, long long *out)
{
	if (!v || v->type != J_NUM || !v->integer || v->u > (1ull << 62))
		return false;
	*out = v->neg ? -(long long)v->u : (long long)v->u;
	return true;
}

/* ------------------------------------------------ a QMP client */

struct qmp {
	int fd;
	char *buf; /* received, not yet parsed */
	size_t len, cap;
	char *line; /* the last message, as QEMU sent it */
	int id;
	char err[256];
};

/*
 * The next message QEMU sends (QMP writes each as one line of JSON),
 * parsed; NULL, with the reason in q->err, when nothing whole came within
 * @timeout_ms, the socket closed or the line is not JSON.
 */
static struct jv *qmp_recv(struct qmp *q, int timeout_ms)
{
	uint64_t end = now_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		char *nl = q->len ? memchr(q->buf, '\n', q->len) : NULL;
		struct pollfd pfd = { .fd = q->fd, .events = POLLIN };
		int64_t left;
		ssize_t r;

		if (nl) {
			struct jv *v;
			size_t n = (size_t)(nl - q->buf) + 1;

			*nl = '\0';
			free(q->line);
			q->line = strdup(q->buf);
			memmove(q->buf, q->buf + n, q->len - n);
			q->len -= n;
			v = q->line ? json_parse(q->line) : NULL;
			if (!v)
				snprintf(
					q->err, sizeof(q->err),
					"QEMU sent a line that is not JSON: %.120s",
					q->line ? q->line : "?");
			return v;
		}
		if (q->cap - q->len < 65536) {
			char *nb = realloc(q->buf, q->cap + 262144);

			if (!nb)
				tap_bail("out of memory for QMP");
			q->buf = nb;
			q->cap += 262144;
		}
		left = (int64_t)(end - now_ns()) / 1000000;
		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			snprintf(q->err, sizeof(q->err),
				 "QEMU said nothing whole for %d s",
				 timeout_ms / 1000);
			return NULL;
		}
		r = read(q->fd, q->buf + q->len, q->cap - q->len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(q->err, sizeof(q->err),
				 "QEMU closed the QMP socket (%s)",
				 r ? strerror(errno) : "EOF");
			return NULL;
		}
		q->len += (size_t)r;
	}
}

/* Writes what QEMU last sent to $KVMSTATS_ARTIFACTS/58-qmp-@name.json. */
static void qmp_save(struct qmp *q, const char *name)
{
	const char *dir = getenv("KVMSTATS_ARTIFACTS");
	char path[256];
	FILE *f;

	if (!dir || !q->line)
		return;
	snprintf(path, sizeof(path), "%s/58-qmp-%s.json", dir, name);
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%s\n", q->line);
		fclose(f);
	}
}

/*
 * Runs @cmd with the arguments @args (a JSON object, or NULL) and returns
 * QEMU's answer, the whole message: its "return" member is the result.
 * Events QEMU sends meanwhile are passed over.  NULL, with the reason in
 * q->err, for an "error" answer, an answer to another id, or none.
 */
static struct jv *qmp_cmd(struct qmp *q, const char *cmd, const char *args)
{
	char msg[512];
	int id = ++q->id, n;

	n = snprintf(msg, sizeof(msg),
		     "{\"execute\": \"%s\"%s%s, \"id\": %d}\n", cmd,
		     args ? ", \"arguments\": " : "", args ? args : "", id);
	if (n >= (int)sizeof(msg) || write(q->fd, msg, n) != n) {
		snprintf(q->err, sizeof(q->err), "cannot send %s: %s", cmd,
			 strerror(errno));
		return NULL;
	}
	for (;;) {
		struct jv *m = qmp_recv(q, QMP_WAIT_MS);
		const struct jv *e;
		long long got;

		if (!m)
			return NULL;
		if (jget(m, "event")) {
			jv_free(m);
			continue;
		}
		e = jget(m, "error");
		if (!jint(jget(m, "id"), &got) || got != id) {
			snprintf(q->err, sizeof(q->err),
				 "%s: an answer without its id: %.120s", cmd,
				 q->line);
		} else if (e) {
			snprintf(q->err, sizeof(q->err), "%s: %s: %s", cmd,
				 jstr(e, "class") ?: "?",
				 jstr(e, "desc") ?: "?");
		} else if (!jget(m, "return")) {
			snprintf(q->err, sizeof(q->err),
				 "%s: an answer with no return: %.120s", cmd,
				 q->line);
		} else {
			return m;
		}
		jv_free(m);
		return NULL;
	}
}

/* The command's "return" member, or NULL (and a failed check). */
static const struct jv *qmp_ret(struct qmp *q, struct jv **msg, const char *cmd,
				const char *args)
{
	*msg = qmp_cmd(q, cmd, args);
	if (!*msg) {
		tap_fail("QMP %s: %s", cmd, q->err);
		return NULL;
	}
	return jget(*msg, "return");
}

/* Runs @cmd, whose answer is not looked at; false (and a check) if none. */
static bool qmp_do(struct qmp *q, const char *cmd)
{
	struct jv *m;

	if (!qmp_ret(q, &m, cmd, NULL))
		return false;
	jv_free(m);
	return true;
}

/*
 * Connects to QEMU's QMP socket (retrying until QEMU has made it), reads
 * its greeting and leaves capabilities negotiation mode.
 */
static bool qmp_open(struct qmp *q, char *version, size_t vlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const struct jv *v;
	struct jv *g, *m;
	long long ma = -1, mi = -1, mc = -1;
	int i;

	memset(q, 0, sizeof(*q));
	strcpy(sa.sun_path, QMP_SOCK);
	q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	for (i = 0; i < 1200; i++) {
		if (!connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		if (waitpid(qemu_pid, NULL, WNOHANG) == qemu_pid) {
			qemu_pid = 0;
			tap_fail(
				"QEMU exited before its QMP socket took a connection (see 58-qmp-qemu.log)");
			return false;
		}
		msleep(100);
	}
	if (i == 1200) {
		tap_fail(
			"QEMU's QMP socket %s takes no connection within 120 s: %s",
			QMP_SOCK, strerror(errno));
		return false;
	}
	g = qmp_recv(q, QMP_WAIT_MS);
	v = jget(jget(jget(g, "QMP"), "version"), "qemu");
	jint(jget(v, "major"), &ma);
	jint(jget(v, "minor"), &mi);
	jint(jget(v, "micro"), &mc);
	snprintf(version, vlen, "%lld.%lld.%lld", ma, mi, mc);
	jv_free(g);
	m = qmp_cmd(q, "qmp_capabilities", NULL);
	jv_free(m);
	return tap_check(v && m,
			 "QMP: QEMU %s greets and takes qmp_capabilities%s%s",
			 version, m ? "" : ": ", m ? "" : q->err);
}

/* ------------------------------------------------ QEMU */

static void qemu_kill(void)
{
	if (qemu_pid > 0) {
		kill(qemu_pid, SIGKILL);
		waitpid(qemu_pid, NULL, 0);
		qemu_pid = 0;
	}
}

/*
 * QEMU, stopped before its first instruction (-S), 2 vCPUs, @boot (the
 * machine and what it boots), -accel kvm, its QMP socket at QMP_SOCK,
 * stderr into the artifacts.  It dies with us (PR_SET_PDEATHSIG), even if
 * the harness kills the test.
 */
static void qemu_start(const char *const *boot)
{
	const char *argv[32] = {
		NESTED_QEMU,   "-S",
		"-name",       "guest=kvmstats-qmp,debug-threads=on",
		"-accel",      "kvm",
		"-cpu",	       "host",
		"-smp",	       "2",
		"-m",	       "32",
		"-nodefaults", "-no-user-config",
		"-display",    "none",
		"-qmp",	       "unix:" QMP_SOCK ",server=on,wait=off",
	};
	const char *dir = getenv("KVMSTATS_ARTIFACTS");
	char log[256];
	int n;

	for (n = 0; argv[n]; n++)
		;
	while (*boot)
		argv[n++] = *boot++;

	snprintf(log, sizeof(log), "%s/58-qmp-qemu.log", dir ? dir : "/tmp");
	unlink(QMP_SOCK);
	qemu_pid = tap_fork();
	if (qemu_pid == 0) {
		int null = open("/dev/null", O_RDWR);
		int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, 0);
		dup2(null, 1);
		dup2(err >= 0 ? err : null, 2);
		execv(NESTED_QEMU, (char *const *)argv);
		_exit(127);
	}
	atexit(qemu_kill);
}

/* ------------------------------------------------ our side */

static const char *const type_names[] = {
	[KVM_STATS_TYPE_CUMULATIVE >> KVM_STATS_TYPE_SHIFT] = "cumulative",
	[KVM_STATS_TYPE_INSTANT >> KVM_STATS_TYPE_SHIFT] = "instant",
	[KVM_STATS_TYPE_PEAK >> KVM_STATS_TYPE_SHIFT] = "peak",
	[KVM_STATS_TYPE_LINEAR_HIST >> KVM_STATS_TYPE_SHIFT] =
		"linear-histogram",
	[KVM_STATS_TYPE_LOG_HIST >> KVM_STATS_TYPE_SHIFT] = "log2-histogram",
};

/* QAPI's StatsUnit; KVM's "none" is no unit at all in the schema. */
static const char *const unit_names[] = {
	[KVM_STATS_UNIT_NONE >> KVM_STATS_UNIT_SHIFT] = NULL,
	[KVM_STATS_UNIT_BYTES >> KVM_STATS_UNIT_SHIFT] = "bytes",
	[KVM_STATS_UNIT_SECONDS >> KVM_STATS_UNIT_SHIFT] = "seconds",
	[KVM_STATS_UNIT_CYCLES >> KVM_STATS_UNIT_SHIFT] = "cycles",
	[KVM_STATS_UNIT_BOOLEAN >> KVM_STATS_UNIT_SHIFT] = "boolean",
};

static uint32_t d_type(const struct kvm_stats_desc *d)
{
	return d->flags & KVM_STATS_TYPE_MASK;
}

static const char *d_type_name(const struct kvm_stats_desc *d)
{
	uint32_t t = d_type(d) >> KVM_STATS_TYPE_SHIFT;

	return t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] :
								"?";
}

static const char *d_unit_name(const struct kvm_stats_desc *d)
{
	uint32_t u = (d->flags & KVM_STATS_UNIT_MASK) >> KVM_STATS_UNIT_SHIFT;

	return u < sizeof(unit_names) / sizeof(unit_names[0]) ? unit_names[u] :
								"?";
}

static bool d_is_hist(const struct kvm_stats_desc *d)
{
	return d_type(d) == KVM_STATS_TYPE_LINEAR_HIST ||
	       d_type(d) == KVM_STATS_TYPE_LOG_HIST;
}

static int d_index(const struct stats_blob *b, const struct kvm_stats_desc *d)
{
	const struct kvm_stats_header *h = stats_header(b);

	return (int)(((const uint8_t *)d - (b->data + h->desc_offset)) /
		     (sizeof(*d) + h->name_size));
}

static uint64_t d_val(const struct stats_blob *b,
		      const struct kvm_stats_desc *d, int i)
{
	uint64_t v;

	memcpy(&v, b->data + stats_header(b)->data_offset + d->offset + 8 * i,
	       8);
	return v;
}

/*
 * VM statistics that can move while every vCPU is out of KVM_RUN, by the
 * host's doing, not the guest's.  The host's memory management reaches
 * KVM through its MMU notifier whenever it changes QEMU's mappings of
 * guest memory (khugepaged collapsing the guest RAM QEMU madvises
 * MADV_HUGEPAGE, compaction and migration, reclaim and page aging):
 * kvm_mmu_notifier_invalidate_range_start() and clear_flush_young() zap or
 * age SPTEs and flush, kvm_flush_remote_tlbs() counting
 * remote_tlb_flush_requests and remote_tlb_flush (virt/kvm/kvm_main.c),
 * and each zapped leaf SPTE is taken off pages_4k/2m/1g
 * (kvm_update_page_stats() from the TDP MMU's handle_changed_spte() and
 * the shadow MMU's mmu_spte_clear_track_bits(), arch/x86/kvm/mmu).  The
 * NX huge page recovery thread (kvm_nx_huge_page_recovery_worker(), woken
 * by a timer, when nx_huge_pages is on) zaps split pages, nx_lpage_splits.
 *
 * Everything else, and every vCPU statistic, moves only in KVM_RUN or in
 * an ioctl that loads the vCPU (vcpu_put() alone counts host_state_reload),
 * and a paused QEMU runs no vCPU and loads none: query-stats' own
 * KVM_GET_STATS_FD takes the vCPU's mutex without loading it.  So those
 * must hold still, exactly.
 *
 * For the host-side ones, a read of ours that does not bracket QEMU's
 * with two equal values is done again (up to 5 times): what is compared
 * is still equality; only one still moving after that is let through
 * between our two reads, with a diagnostic.
 */
static const char *const host_side[] = {
	"remote_tlb_flush", "remote_tlb_flush_requests", "pages_4k", "pages_2m",
	"pages_1g",	    "nx_lpage_splits",
};

/*
 * Whether the VM's statistics count the guest's own doing.  x86: pages_4k
 * and the like count the memory the guest touches as KVM maps it.  arm64:
 * the VM file has only remote_tlb_flush and remote_tlb_flush_requests,
 * which only kvm_flush_remote_tlbs() moves: an MMU notifier's
 * clear_flush_young of a page the guest touched (reclaim, which this
 * swapless guest never does to QEMU's anonymous memory), not the guest's
 * stage-2 faults nor dirty logging (arm64 flushes those by range, which
 * is not counted).  So they stay 0 (seen on 6.12), and the VM's values
 * are compared as they are, zeros.
 */
#if defined(__x86_64__)
#define VM_COUNTS_GUEST 1
#else
#define VM_COUNTS_GUEST 0
#endif

static bool is_host_side(int obj, const char *name)
{
	size_t i;

	for (i = 0; obj == 0 && i < sizeof(host_side) / sizeof(host_side[0]);
	     i++)
		if (!strcmp(name, host_side[i]))
			return true;
	return false;
}

/* The first host-side statistic of @obj that differs from @a to @b. */
static const struct kvm_stats_desc *
host_side_moved(int obj, const struct stats_blob *a, const struct stats_blob *b)
{
	const struct kvm_stats_header *h = stats_header(a);
	uint32_t i;
	int j;

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(a, i);

		if (!is_host_side(obj, d->name))
			continue;
		for (j = 0; j < d->size; j++)
			if (d_val(a, d, j) != d_val(b, d, j))
				return d;
	}
	return NULL;
}

/* ------------------------------------------------ one paused snapshot */

struct snap {
	struct stats_blob pre[NR_OBJS], post[NR_OBJS];
	struct jv *vm_msg, *vcpu_msg;
	const struct jv *vm_ret, *vcpu_ret;
};

static struct snap snaps[2];
static int stats_fds[NR_OBJS];
static const char *qom_of[NR_OBJS]; /* [1 + i]: vCPU i's qom-path */
static struct jv *cpus_msg;

static const char *obj_name(int obj, char *buf, size_t len)
{
	if (obj == 0)
		return "VM";
	snprintf(buf, len, "vCPU %d (%s)", obj - 1,
		 qom_of[obj] ? qom_of[obj] : "?");
	return buf;
}

static void read_all(struct stats_blob *b)
{
	int i;

	for (i = 0; i < NR_OBJS; i++)
		stats_read_all(stats_fds[i], &b[i], "a kvmstats stats fd");
}

/*
 * Ours, QEMU's, ours again, all while paused; again while a host-side
 * statistic moved in between.  False if QEMU did not answer.
 */
static bool take_snap(struct qmp *q, struct snap *s, int phase)
{
	int attempt;

	for (attempt = 1;; attempt++) {
		const struct kvm_stats_desc *d;
		char name[32];

		jv_free(s->vm_msg);
		jv_free(s->vcpu_msg);
		read_all(s->pre);
		s->vm_ret = qmp_ret(
			q, &s->vm_msg, "query-stats",
			"{\"target\": \"vm\", \"providers\": [{\"provider\": \"kvm\"}]}");
		snprintf(name, sizeof(name), "stats-vm-%d", phase);
		qmp_save(q, name);
		s->vcpu_ret = qmp_ret(
			q, &s->vcpu_msg, "query-stats",
			"{\"target\": \"vcpu\", \"providers\": [{\"provider\": \"kvm\"}]}");
		snprintf(name, sizeof(name), "stats-vcpu-%d", phase);
		qmp_save(q, name);
		read_all(s->post);
		if (!s->vm_ret || !s->vcpu_ret)
			return false;
		d = host_side_moved(0, &s->pre[0], &s->post[0]);
		if (!d || attempt == 5)
			return true;
		tap_diag(
			"the VM's %s moved while paused (%llu -> %llu), host-side (see host_side[]): reading again",
			d->name, (unsigned long long)d_val(&s->pre[0], d, 0),
			(unsigned long long)d_val(&s->post[0], d, 0));
	}
}

/* The "stats" of @ret's result for @qom (NULL: the one without a qom-path). */
static const struct jv *result_stats(const struct jv *ret, const char *qom,
				     int *nr)
{
	const struct jv *r, *found = NULL;

	*nr = 0;
	for (r = ret && ret->type == J_ARR ? ret->kids : NULL; r; r = r->next) {
		const char *p = jstr(r, "qom-path");

		if (strcmp(jstr(r, "provider") ?: "", "kvm"))
			continue;
		if (qom ? p && !strcmp(p, qom) : !p) {
			found = jget(r, "stats");
			(*nr)++;
		}
	}
	return found && found->type == J_ARR ? found : NULL;
}

/* ------------------------------------------------ the comparisons */

#define MISMATCH(n, ...)                       \
	do {                                   \
		if ((n)++ < MAX_DIAGS)         \
			tap_diag(__VA_ARGS__); \
	} while (0)

/*
 * QEMU's schema of @target ("vm" or "vcpu") against the descriptors of
 * @ours: each entry is a descriptor of that name, with its type, unit,
 * base, exponent and bucket size, and each descriptor is one entry.
 */
static void check_schema(const struct jv *schemas, const char *target,
			 const char *what, const struct stats_blob *ours)
{
	const struct kvm_stats_header *h = stats_header(ours);
	const struct jv *sc = NULL, *e;
	int seen[1024] = { 0 };
	int nr = 0, bad = 0, rev = 0, nr_sc = 0;
	uint32_t i;

	for (e = schemas && schemas->type == J_ARR ? schemas->kids : NULL; e;
	     e = e->next)
		if (!strcmp(jstr(e, "provider") ?: "", "kvm") &&
		    !strcmp(jstr(e, "target") ?: "", target)) {
			sc = jget(e, "stats");
			nr_sc++;
		}
	if (!sc || sc->type != J_ARR || nr_sc != 1 || h->num_desc > 1024) {
		tap_fail(
			"query-stats-schemas has one kvm schema for target %s (%d)",
			target, nr_sc);
		return;
	}
	for (e = sc->kids; e; e = e->next) {
		const char *name = jstr(e, "name") ?: "?";
		const char *type = jstr(e, "type"), *unit = jstr(e, "unit");
		const struct jv *base = jget(e, "base");
		const struct jv *bsize = jget(e, "bucket-size");
		const struct kvm_stats_desc *d = stats_find(ours, name);
		long long exp = 0x7fff, bv = -1, bs = -1;
		const char *du;
		int wbase;

		nr++;
		if (!d) {
			MISMATCH(
				bad,
				"%s: QEMU's schema has %s, we have no such descriptor",
				what, name);
			continue;
		}
		seen[d_index(ours, d)]++;
		du = d_unit_name(d);
		/*
		 * QEMU gives a base only where the exponent is not 0 (any
		 * base to the power 0 is 1), and a bucket size only for
		 * linear histograms.
		 */
		wbase = (d->flags & KVM_STATS_BASE_MASK) ==
					KVM_STATS_BASE_POW2 ?
				2 :
				10;
		if (!jint(jget(e, "exponent"), &exp) || exp != d->exponent ||
		    !type || strcmp(type, d_type_name(d)) ||
		    (unit ? !du || strcmp(unit, du) : du != NULL) ||
		    (base ? !jint(base, &bv) || bv != wbase :
			    d->exponent != 0) ||
		    (bsize ? !jint(bsize, &bs) || bs != d->bucket_size ||
				     d_type(d) != KVM_STATS_TYPE_LINEAR_HIST :
			     d_type(d) == KVM_STATS_TYPE_LINEAR_HIST)) {
			char qb[24] = "-", qs[24] = "-";

			if (base)
				snprintf(qb, sizeof(qb), "%lld", bv);
			if (bsize)
				snprintf(qs, sizeof(qs), "%lld", bs);
			MISMATCH(
				bad,
				"%s: %s: QEMU: %s, unit %s, base %s, exponent %lld, bucket size %s; ours: %s, unit %s, base %d, exponent %d, bucket size %u",
				what, name, type ?: "?", unit ?: "-", qb, exp,
				qs, d_type_name(d), du ?: "-", wbase,
				d->exponent, d->bucket_size);
		}
	}
	tap_check(
		nr > 0 && !bad,
		"%s: each of QEMU's %d schema entries (target %s) is our descriptor of that name, with its type, unit, base, exponent and bucket size",
		what, nr, target);
	for (i = 0; i < h->num_desc; i++)
		if (seen[i] != 1)
			MISMATCH(rev, "%s: our %s is in QEMU's schema %d times",
				 what, stats_desc(ours, i)->name, seen[i]);
	tap_check(!rev && nr == (int)h->num_desc,
		  "%s: each of our %u descriptors is in QEMU's schema once",
		  what, h->num_desc);
}

/*
 * QEMU lists a histogram's buckets last first: its add_kvmstat_entry()
 * (accel/kvm/kvm-all.c, 7.1 on) prepends bucket 0, then 1, ... to the
 * list it answers with.  KVM's file and ours have bucket 0 first.
 */
static int qemu_bucket(int size, int i)
{
	return size - 1 - i;
}

struct tally {
	int scalars, booleans, hists, buckets, nonzero, bad;
};

/* One bucket or scalar: QEMU's @qv against ours before (@p) and after (@a). */
static void cmp_one(struct tally *t, const char *what, const char *name,
		    int bucket, bool host, uint64_t qv, uint64_t p, uint64_t a)
{
	char where[96] = "";

	if (bucket >= 0)
		snprintf(where, sizeof(where), "[%d]", bucket);
	if (qv)
		t->nonzero++;
	if (qv == p && p == a)
		return;
	/* A host-side statistic still moving after the retries: bracket. */
	if (host && p != a && ((qv >= p && qv <= a) || (qv <= p && qv >= a))) {
		tap_diag(
			"%s: %s%s moved by the host while QEMU read it: QEMU's %llu between our %llu and %llu",
			what, name, where, (unsigned long long)qv,
			(unsigned long long)p, (unsigned long long)a);
		return;
	}
	MISMATCH(t->bad,
		 "%s: %s%s: QEMU read %llu, ours %llu before and %llu after%s",
		 what, name, where, (unsigned long long)qv,
		 (unsigned long long)p, (unsigned long long)a,
		 p != a ? " (it moved while paused)" : "");
}

/*
 * A histogram: QEMU's list @v, element k against our bucket
 * qemu_bucket(size, k).  If it differs, whether QEMU's order is the
 * straight one after all is said; once, the first histogram whose order
 * shows (not a palindrome) is printed as the evidence of QEMU's order.
 */
static void cmp_hist(struct tally *t, const char *what, const char *name,
		     bool host, const struct jv *v,
		     const struct kvm_stats_desc *d,
		     const struct stats_blob *pre,
		     const struct stats_blob *post)
{
	static bool shown;
	int bad = t->bad, straight = 0, asym = 0, k, j;
	char ours[256] = "", theirs[256] = "";
	const struct jv *b;

	t->hists++;
	for (b = v->kids, k = 0; b; b = b->next, k++) {
		j = qemu_bucket(d->size, k);
		t->buckets++;
		if (b->type != J_NUM || !b->integer || b->neg) {
			MISMATCH(t->bad,
				 "%s: %s: QEMU's element %d is not a u64", what,
				 name, k);
			continue;
		}
		cmp_one(t, what, name, j, host, b->u, d_val(pre, d, j),
			d_val(post, d, j));
		if (b->u != d_val(pre, d, k))
			straight++;
		if (d_val(pre, d, j) != d_val(pre, d, k))
			asym++;
		if (b->u && strlen(ours) < sizeof(ours) - 48) {
			snprintf(ours + strlen(ours),
				 sizeof(ours) - strlen(ours), " [%d]=%llu", j,
				 (unsigned long long)b->u);
			snprintf(theirs + strlen(theirs),
				 sizeof(theirs) - strlen(theirs), " [%d]=%llu",
				 k, (unsigned long long)b->u);
		}
	}
	if (t->bad != bad && !straight)
		tap_diag(
			"%s: %s: QEMU's list is our buckets in their own order, bucket 0 first: QEMU changed its order (see qemu_bucket())",
			what, name);
	if (t->bad == bad && asym && !shown) {
		shown = true;
		tap_diag(
			"QEMU lists histogram buckets last first: %s's %s, QEMU's elements%s are our buckets%s",
			what, name, theirs, ours);
	}
}

/*
 * QEMU's values @stats of one object against ours read before (@pre) and
 * after (@post) QEMU's read: equal, each of ours reported once.
 */
static void check_values(int obj, const char *what, const struct jv *stats,
			 int nr_results, const struct stats_blob *pre,
			 const struct stats_blob *post, const char *when)
{
	const struct kvm_stats_header *h = stats_header(pre);
	struct tally t = { 0 };
	int seen[1024] = { 0 };
	const struct jv *e;
	int nr = 0, rev = 0;
	uint32_t i;

	if (!stats || nr_results != 1 || h->num_desc > 1024) {
		tap_fail("%s, %s: query-stats has one kvm result for it (%d)",
			 what, when, nr_results);
		return;
	}
	for (e = stats->kids; e; e = e->next) {
		const char *name = jstr(e, "name") ?: "?";
		const struct jv *v = jget(e, "value");
		const struct kvm_stats_desc *d = stats_find(pre, name);
		bool host = is_host_side(obj, name);

		nr++;
		if (!d) {
			MISMATCH(
				t.bad,
				"%s: QEMU reports %s, we have no such statistic",
				what, name);
			continue;
		}
		seen[d_index(pre, d)]++;
		if (!v) {
			MISMATCH(t.bad, "%s: QEMU reports %s with no value",
				 what, name);
		} else if (v->type == J_BOOL) {
			uint64_t p = d_val(pre, d, 0), a = d_val(post, d, 0);

			t.booleans++;
			if (v->b)
				t.nonzero++;
			if ((d->flags & KVM_STATS_UNIT_MASK) !=
				    KVM_STATS_UNIT_BOOLEAN ||
			    d->size != 1 || p != a || (p != 0) != v->b)
				MISMATCH(
					t.bad,
					"%s: %s: QEMU read %s, ours %llu before and %llu after (unit %s, size %u)",
					what, name, v->b ? "true" : "false",
					(unsigned long long)p,
					(unsigned long long)a,
					d_unit_name(d) ?: "none", d->size);
		} else if (v->type == J_NUM) {
			t.scalars++;
			if (d->size != 1 || !v->integer || v->neg ||
			    (d->flags & KVM_STATS_UNIT_MASK) ==
				    KVM_STATS_UNIT_BOOLEAN)
				MISMATCH(
					t.bad,
					"%s: %s: QEMU has a number, ours is %s of size %u",
					what, name, d_type_name(d), d->size);
			else
				cmp_one(&t, what, name, -1, host, v->u,
					d_val(pre, d, 0), d_val(post, d, 0));
		} else if (v->type == J_ARR && v->n == d->size && d->size > 1) {
			cmp_hist(&t, what, name, host, v, d, pre, post);
		} else {
			MISMATCH(
				t.bad,
				"%s: %s: QEMU's value (JSON type %d, %d elements) is not what a %s of size %u reads as",
				what, name, v->type, v->n, d_type_name(d),
				d->size);
		}
	}
	if (!t.nonzero && obj == 0 && !VM_COUNTS_GUEST)
		tap_diag(
			"%s, %s: every value is 0, QEMU's and ours (nothing moves this VM's statistics here: VM_COUNTS_GUEST)",
			what, when);
	tap_check(
		nr > 0 && !t.bad &&
			(t.nonzero > 0 || (obj == 0 && !VM_COUNTS_GUEST)),
		"%s, %s: QEMU's %d values equal ours read before and after it (%d scalars, %d booleans, %d histograms of %d buckets; %d non-zero)",
		what, when, nr, t.scalars, t.booleans, t.hists, t.buckets,
		t.nonzero);
	for (i = 0; i < h->num_desc; i++)
		if (seen[i] != 1)
			MISMATCH(rev, "%s: QEMU reports our %s %d times", what,
				 stats_desc(pre, i)->name, seen[i]);
	tap_check(!rev && nr == (int)h->num_desc,
		  "%s, %s: QEMU reports each of our %u statistics once", what,
		  when, h->num_desc);
}

/*
 * From the first paused snapshot (@a) to the second (@b): nothing
 * cumulative went back (counters, peaks and histogram buckets only ever
 * grow), and, if @must_move, something grew.
 */
static void check_moved(const char *what, const struct stats_blob *a,
			const struct stats_blob *b, bool must_move)
{
	const struct kvm_stats_header *h = stats_header(a);
	int grew = 0, back = 0;
	char first[64] = "";
	uint32_t i;
	int j;

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(a, i);

		if (d_type(d) == KVM_STATS_TYPE_INSTANT)
			continue;
		for (j = 0; j < d->size; j++) {
			uint64_t x = d_val(a, d, j), y = d_val(b, d, j);

			if (y > x && !grew++)
				snprintf(first, sizeof(first), "%s%s", d->name,
					 d_is_hist(d) ? " (a bucket)" : "");
			if (y < x)
				MISMATCH(back,
					 "%s: %s[%d] went back: %llu -> %llu",
					 what, d->name, j,
					 (unsigned long long)x,
					 (unsigned long long)y);
		}
	}
	if (must_move)
		tap_check(
			grew > 0 && !back,
			"%s: between the two pauses %d cumulative values grew (%s first), none went back",
			what, grew, first[0] ? first : "none");
	else
		tap_check(
			!back,
			"%s: between the two pauses no cumulative value went back (%d grew%s%s)",
			what, grew, grew ? ", " : "", first);
}

/* ------------------------------------------------ the run */

/* Sum of @b's cumulative scalars: "has this vCPU done anything yet". */
static uint64_t activity(const struct stats_blob *b)
{
	const struct kvm_stats_header *h = stats_header(b);
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(b, i);

		if (d_type(d) == KVM_STATS_TYPE_CUMULATIVE && d->size == 1)
			sum += d_val(b, d, 0);
	}
	return sum;
}

static bool qmp_status(struct qmp *q, const char *want)
{
	struct jv *m;
	const struct jv *r = qmp_ret(q, &m, "query-status", NULL);
	bool ok = r && !strcmp(jstr(r, "status") ?: "", want);

	if (r && !ok)
		tap_diag("QEMU's status is %s, not %s",
			 jstr(r, "status") ?: "?", want);
	jv_free(m);
	return ok;
}

/*
 * Each of QEMU's vCPUs (query-cpus-fast: qom-path, thread-id) is the one of
 * ours whose stats id "kvm-TID/vcpu-N" names the thread that created it
 * (QEMU creates each vCPU in its own thread), which LIST_VCPUS names as
 * the one that runs it.
 */
static bool map_vcpus(struct qmp *q, int dev, int pidfd, int vm_fd)
{
	struct kvmstats_vcpu *vc = NULL;
	const struct jv *r, *c;
	int n, i, mapped = 0;

	r = qmp_ret(q, &cpus_msg, "query-cpus-fast", NULL);
	n = __kvmstats_list_vcpus(dev, pidfd, vm_fd, KVMSTATS_FD_PIDFD, &vc);
	if (!r || n != NR_VCPUS || r->type != J_ARR || r->n != NR_VCPUS) {
		tap_fail(
			"QEMU's %d vCPUs (query-cpus-fast) and LIST_VCPUS's %d",
			r ? r->n : -1, n);
		free(vc);
		return false;
	}
	for (c = r->kids; c; c = c->next) {
		long long tid = -1, cpu = -1;
		const char *qom = jstr(c, "qom-path");
		int found = -1;

		jint(jget(c, "thread-id"), &tid);
		jint(jget(c, "cpu-index"), &cpu);
		for (i = 0; i < NR_VCPUS; i++) {
			const char *id = stats_id(&snaps[0].pre[1 + i]);
			int t = -1, vid = -1;

			if (sscanf(id, "kvm-%d/vcpu-%d", &t, &vid) == 2 &&
			    t == tid)
				found = i;
		}
		if (found >= 0 && qom && !qom_of[1 + found] &&
		    vc[found].tid == tid) {
			qom_of[1 + found] = qom;
			mapped++;
		}
		tap_check(
			found >= 0 && qom_of[1 + found] == qom,
			"QEMU's CPU %lld (%s, thread %lld) is our vCPU %d: its stats id %s names that thread, LIST_VCPUS has it run by thread %d",
			cpu, qom ?: "?", tid, found,
			found >= 0 ? stats_id(&snaps[0].pre[1 + found]) : "-",
			found >= 0 ? vc[found].tid : 0);
	}
	free(vc);
	return mapped == NR_VCPUS;
}

/* Every comparison of one paused snapshot. */
static void check_snap(const struct snap *s, const struct jv *schemas,
		       const char *when)
{
	char buf[96];
	int obj, nr;

	for (obj = 0; obj < NR_OBJS; obj++) {
		const char *what = obj_name(obj, buf, sizeof(buf));
		const struct jv *st;

		if (schemas)
			check_schema(schemas, obj ? "vcpu" : "vm", what,
				     &s->pre[obj]);
		st = obj ? result_stats(s->vcpu_ret, qom_of[obj], &nr) :
			   result_stats(s->vm_ret, NULL, &nr);
		check_values(obj, what, st, nr, &s->pre[obj], &s->post[obj],
			     when);
	}
	tap_check(
		s->vcpu_ret->n == NR_VCPUS && s->vm_ret->n == 1,
		"%s: query-stats answers for the VM once and for each of the %d vCPUs once (%d, %d results)",
		when, NR_VCPUS, s->vm_ret->n, s->vcpu_ret->n);
}

/* Whether any value of @b is not 0. */
static bool any_nonzero(const struct stats_blob *b)
{
	const struct kvm_stats_header *h = stats_header(b);
	uint32_t i;
	int j;

	for (i = 0; i < h->num_desc; i++)
		for (j = 0; j < stats_desc(b, i)->size; j++)
			if (d_val(b, stats_desc(b, i), j))
				return true;
	return false;
}

/*
 * Until the guest runs: each vCPU has entered KVM_RUN (LIST_VCPUS names
 * its thread) and counted something since @base (what QEMU's set-up
 * ioctls left), an AP once SeaBIOS has sent it its SIPI (arm64: once
 * CPU 0 has started it with PSCI CPU_ON), and, where the VM counts the
 * guest (VM_COUNTS_GUEST), the VM has counted something (the memory the
 * guest touched is mapped); or until @ms pass.
 */
static bool wait_active(int dev, int pidfd, int vm_fd,
			const struct stats_blob *base, unsigned int ms)
{
	struct stats_blob *b = snaps[1].pre; /* scratch, before phase 2 */
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	int i;

	do {
		struct kvmstats_vcpu *vc = NULL;
		bool all;

		all = __kvmstats_list_vcpus(dev, pidfd, vm_fd,
					    KVMSTATS_FD_PIDFD, &vc) == NR_VCPUS;
		read_all(b);
		all = all && (!VM_COUNTS_GUEST || any_nonzero(&b[0]));
		for (i = 0; all && i < NR_VCPUS; i++)
			all = vc[i].tid > 0 &&
			      activity(&b[1 + i]) > activity(&base[1 + i]);
		free(vc);
		if (all)
			return true;
		msleep(100);
	} while (now_ns() < end);
	return false;
}

static void run(const char *const *boot)
{
	struct kvmstats_vm *vms = NULL;
	struct jv *schemas_msg = NULL;
	const struct jv *schemas;
	uint64_t t0 = now_ns(), t1, t2;
	char version[64];
	struct qmp q;
	int dev, pidfd, n, i, st;

	dev = kvmstats_open();
	qemu_start(boot);
	if (!qmp_open(&q, version, sizeof(version)))
		return;

	/* QEMU's VM, by its pid alone. */
	pidfd = pidfd_open_or_fail(qemu_pid);
	n = __kvmstats_list_pidfd(dev, pidfd, &vms);
	if (!tap_check(
		    n == 1 && vms[0].pid == qemu_pid &&
			    vms[0].nr_vcpus == NR_VCPUS,
		    "LIST_PIDFD of QEMU's pid: one VM, fd %d, %u vCPUs (%d VMs)",
		    n > 0 ? vms[0].fd : -1, n > 0 ? vms[0].nr_vcpus : 0, n))
		return;
	for (i = 0; i < NR_OBJS; i++) {
		stats_fds[i] = __kvmstats_get_stats_fd_pidfd(dev, pidfd,
							     vms[0].fd, i - 1);
		if (stats_fds[i] < 0)
			tap_bail(
				"GET_STATS_FD (pidfd) of QEMU's VM fd %d, vcpu %d: %s",
				vms[0].fd, i - 1, strerror(-stats_fds[i]));
	}
	tap_pass("stats fds of QEMU's VM and its %d vCPUs, by pidfd", NR_VCPUS);

	/* Run until the guest has done something, then pause. */
	read_all(snaps[0].pre);
	if (!qmp_do(&q, "cont"))
		return;
	t1 = now_ns();
	if (!tap_check(
		    wait_active(dev, pidfd, vms[0].fd, snaps[0].pre, 120000),
		    "QMP cont: the guest runs, each vCPU and the VM count within 120 s (%.1f s)",
		    (now_ns() - t1) / 1e9))
		return;
	msleep(1000); /* the guest on its way: halts, interrupts, memory */
	if (!qmp_do(&q, "stop") ||
	    !tap_check(qmp_status(&q, "paused"), "QMP stop: QEMU is paused"))
		return;
	t2 = now_ns();
	if (!take_snap(&q, &snaps[0], 1))
		return;
	if (!map_vcpus(&q, dev, pidfd, vms[0].fd))
		return;
	schemas = qmp_ret(&q, &schemas_msg, "query-stats-schemas",
			  "{\"provider\": \"kvm\"}");
	qmp_save(&q, "schemas");
	if (!schemas)
		return;
	check_snap(&snaps[0], schemas, "first pause");

	/* Run a while, pause again: moved, and still the same. */
	if (!qmp_do(&q, "cont") ||
	    !tap_check(qmp_status(&q, "running"), "QMP cont: QEMU runs again"))
		return;
	msleep(2000);
	/* Fault 58-second-stop: the second stop not sent, QEMU runs on. */
	if ((!test_fault("58-second-stop") && !qmp_do(&q, "stop")) ||
	    !tap_check(
		    qmp_status(&q, "paused"),
		    "QMP stop again: QEMU is paused for the second comparison"))
		return;
	if (!take_snap(&q, &snaps[1], 2))
		return;
	check_snap(&snaps[1], NULL, "second pause");
	for (i = 0; i < NR_OBJS; i++) {
		char buf[96];

		/*
		 * vCPUs: the stop alone moves each (a signal takes it out
		 * of KVM_RUN).  The VM's counters follow the guest's
		 * memory (pages mapped, TLB flushes), which the guest need
		 * not touch anew in 2 s: nothing has to grow there.
		 */
		check_moved(obj_name(i, buf, sizeof(buf)), &snaps[0].post[i],
			    &snaps[1].pre[i], i > 0);
	}

	if (!qmp_do(&q, "quit"))
		return;
	for (i = 0; i < 300 && waitpid(qemu_pid, &st, WNOHANG) == 0; i++)
		msleep(100);
	tap_check(i < 300 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "QMP quit: QEMU exits with status 0");
	qemu_pid = 0;
	tap_diag("%.1f s from QEMU's start to its exit, %.1f s of it running",
		 (now_ns() - t0) / 1e9, (t2 - t1) / 1e9 + 2);
	jv_free(schemas_msg);
	free(vms);
	close(pidfd);
	close(dev);
}

int main(void)
{
	const char *boot[NESTED_QEMU_MAX_BOOT_ARGS + 1], *why;
	int n;

	kvm_test_init();
	why = nested_qemu_boot(boot, &n);
	if (why) {
		tap_skip(why, "kvmstats against a real QEMU's query-stats");
		return tap_exit();
	}
	run(boot);
	qemu_kill();
	return tap_exit();
}
