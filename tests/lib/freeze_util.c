// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVM's VM uevents and kvmstats' counters: see freeze_util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/kvm.h>
#include <linux/netlink.h>

#include "freeze_util.h"

int __kvm_uevent_open(void)
{
	struct sockaddr_nl addr = {
		.nl_family = AF_NETLINK,
		.nl_groups = 1, /* the kernel's own events, not udev's */
	};
	int size = 4 << 20;
	int sock;

	sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		      NETLINK_KOBJECT_UEVENT);
	if (sock < 0)
		return -errno;
	/* Every VM create and destroy of the test is an event: keep them. */
	if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)))
		setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (bind(sock, (struct sockaddr *)&addr, sizeof(addr))) {
		int e = errno;

		close(sock);
		return -e;
	}
	return sock;
}

int kvm_uevent_open(void)
{
	int sock = __kvm_uevent_open();

	if (sock < 0)
		tap_bail("NETLINK_KOBJECT_UEVENT socket: %s", strerror(-sock));
	return sock;
}

/*
 * One uevent: "action@devpath" then KEY=VALUE strings, NUL-separated.  Is
 * it KVM's EVENT=@event for a VM created by @pid?
 */
static bool kvm_uevent_match(const char *buf, size_t len, const char *event,
			     pid_t pid)
{
	char want_event[32], want_pid[32];
	bool kvm = false, ev = false, p = false;
	size_t off;

	snprintf(want_event, sizeof(want_event), "EVENT=%s", event);
	snprintf(want_pid, sizeof(want_pid), "PID=%d", (int)pid);
	for (off = 0; off < len; off += strnlen(buf + off, len - off) + 1) {
		const char *s = buf + off;
		size_t n = strnlen(s, len - off);

		if (n > 8 && !strncmp(s, "DEVPATH=", 8))
			kvm = n >= 4 && !strcmp(s + n - 4, "/kvm");
		else if (!strcmp(s, want_event))
			ev = true;
		else if (!strcmp(s, want_pid))
			p = true;
	}
	return kvm && ev && p;
}

int kvm_uevent_wait(int sock, const char *event, pid_t pid, int n,
		    unsigned int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	static char buf[16384];
	int seen = 0;

	while (seen < n) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		uint64_t now = now_ns();
		ssize_t len;

		if (now >= deadline)
			break;
		if (poll(&pfd, 1, (deadline - now) / 1000000 + 1) <= 0)
			continue;
		len = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (len < 0) {
			if (errno == ENOBUFS)
				tap_diag(
					"uevent socket overflowed: events lost");
			continue;
		}
		buf[len] = 0;
		if (kvm_uevent_match(buf, len, event, pid))
			seen++;
	}
	return seen;
}

int kvm_uevent_drain(int sock)
{
	static char buf[16384];
	int n = 0;

	while (recv(sock, buf, sizeof(buf), MSG_DONTWAIT) >= 0 ||
	       errno == ENOBUFS)
		n++;
	return n;
}

/*
 * KVM's COUNT= in a destroy event of a VM made by @tid, or -1 if @buf is
 * not such an event.
 */
static long kvm_uevent_destroy_count(const char *buf, size_t len, pid_t tid)
{
	long count = -1;
	size_t off;

	if (!kvm_uevent_match(buf, len, "destroy", tid))
		return -1;
	for (off = 0; off < len; off += strnlen(buf + off, len - off) + 1)
		if (!strncmp(buf + off, "COUNT=", 6))
			count = strtol(buf + off + 6, NULL, 10);
	return count;
}

long kvm_live_vms(void)
{
	uint64_t deadline = now_ns() + 5000 * 1000000ull;
	pid_t tid = sys_gettid();
	static char buf[16384];
	int sock, kvm, vm;
	long count = -1;

	sock = __kvm_uevent_open();
	if (sock < 0)
		return sock;
	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	vm = kvm < 0 ? -1 : ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0) {
		count = -errno;
		goto out;
	}
	/* The last reference: destroyed, and reported, before close returns. */
	close(vm);
	while (count < 0 && now_ns() < deadline) {
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		ssize_t len;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		len = recv(sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (len <= 0)
			continue;
		buf[len] = 0;
		count = kvm_uevent_destroy_count(buf, len, tid);
	}
	if (count < 0)
		count = -ETIMEDOUT;
out:
	if (kvm >= 0)
		close(kvm);
	close(sock);
	return count;
}

long kvmstats_param(const char *name)
{
	char path[128], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/module/kvmstats/parameters/%s",
		 name);
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

long kvmstats_live_vms(void)
{
	return kvmstats_param("live_vms");
}

long kvmstats_wait_live_vms(long want, unsigned int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	long v;

	for (;;) {
		v = kvmstats_live_vms();
		if (v == want || now_ns() > deadline)
			return v;
		msleep(10);
	}
}

long kvmstats_wait_settled(unsigned int timeout_ms)
{
	uint64_t t0 = now_ns();
	long first = kvmstats_live_vms(), v;

	v = kvmstats_wait_live_vms(0, timeout_ms);
	if (first)
		tap_diag("live_vms was %ld at the start: %ld after %.1f s",
			 first, v, (now_ns() - t0) / 1e9);
	return v;
}

bool stats_blob_torn_down(const struct stats_blob *before,
			  const struct stats_blob *after, const char *what)
{
	const struct kvm_stats_header *h = stats_header(before);
	struct stats_blob *want;
	uint32_t i;
	bool ok;

	want = malloc(sizeof(*want));
	if (!want)
		tap_bail("out of memory");
	memcpy(want, before, sizeof(*want));
	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(before, i);

		if (!strncmp(d->name, "pages_", 6))
			memset(want->data + h->data_offset + d->offset, 0,
			       (size_t)d->size * sizeof(uint64_t));
	}
	ok = stats_blob_equal(want, after, what);
	free(want);
	return ok;
}
