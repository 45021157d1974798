// SPDX-License-Identifier: GPL-2.0-only
/*
 * /dev/kvmstats calls, stats-file parsing and child VMMs: see
 * kvmstats_util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kvmstats_util.h"
#include "../qemu/guest-module/ksg_test.h"

/* Userspace stride of a descriptor is this plus header.name_size. */
#define DESC_FIXED offsetof(struct kvm_stats_desc, name)

int __kvmstats_open(void)
{
	int fd = open(KVMSTATS_DEVICE, O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int kvmstats_open(void)
{
	int fd = __kvmstats_open();

	if (fd < 0)
		tap_bail("open(%s) failed: %s (is kvmstats loaded?)",
			 KVMSTATS_DEVICE, strerror(-fd));
	return fd;
}

int __kvmstats_api_version(int dev, unsigned long arg)
{
	return __test_ioctl(dev, KVMSTATS_GET_API_VERSION, arg);
}

int __kvmstats_get_stats_fd_req(int dev, struct kvmstats_fd_request *req)
{
	return __test_ioctl(dev, KVMSTATS_GET_STATS_FD, (unsigned long)req);
}

int __kvmstats_get_stats_fd(int dev, pid_t pid, int fd, int vcpu)
{
	struct kvmstats_fd_request req = {
		.pid = pid,
		.fd = fd,
		.vcpu = vcpu,
	};

	return __kvmstats_get_stats_fd_req(dev, &req);
}

int kvmstats_get_stats_fd(int dev, pid_t pid, int fd, int vcpu)
{
	int r = __kvmstats_get_stats_fd(dev, pid, fd, vcpu);

	if (r < 0)
		tap_bail(
			"KVMSTATS_GET_STATS_FD(pid %d, fd %d, vcpu %d) failed: "
			"errno %d (%s)",
			pid, fd, vcpu, -r, strerror(-r));
	return r;
}

int __kvmstats_list_vms(int dev, struct kvmstats_vm **out)
{
	uint32_t room = 16;
	int tries;

	for (tries = 0; tries < 16; tries++) {
		struct kvmstats_vm_list *list;
		int r;

		list = calloc(1, sizeof(*list) + room * sizeof(list->vms[0]));
		if (!list)
			return -ENOMEM;
		list->nr = room;
		r = __test_ioctl(dev, KVMSTATS_LIST_VMS, (unsigned long)list);
		if (r == -E2BIG && list->nr > room) {
			room = list->nr + 8;
			free(list);
			continue;
		}
		if (r < 0) {
			free(list);
			return r;
		}
		r = list->nr;
		*out = malloc((r ? r : 1) * sizeof(**out));
		if (!*out) {
			free(list);
			return -ENOMEM;
		}
		memcpy(*out, list->vms, r * sizeof(**out));
		free(list);
		return r;
	}
	return -EAGAIN;
}

int kvmstats_list_vms(int dev, struct kvmstats_vm **out)
{
	int r = __kvmstats_list_vms(dev, out);

	if (r < 0)
		tap_bail("KVMSTATS_LIST_VMS failed: errno %d (%s)", -r,
			 strerror(-r));
	return r;
}

int __kvmstats_read_batch(int dev, struct kvmstats_read_op *ops, uint32_t nr)
{
	struct kvmstats_read_batch batch = {
		.nr = nr,
		.ops = (unsigned long)ops,
	};

	return __test_ioctl(dev, KVMSTATS_READ_BATCH, (unsigned long)&batch);
}

ssize_t __stats_read_all(int fd, struct stats_blob *blob)
{
	size_t off = 0;

	for (;;) {
		ssize_t r;

		if (off == sizeof(blob->data))
			return -EFBIG;
		r = pread(fd, blob->data + off, sizeof(blob->data) - off, off);
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		off += r;
	}
	blob->size = off;
	return off;
}

void stats_read_all(int fd, struct stats_blob *blob, const char *what)
{
	ssize_t r = __stats_read_all(fd, blob);

	if (r < 0)
		tap_bail("pread of %s (fd %d) failed: %s", what, fd,
			 strerror(-r));
}

const struct kvm_stats_header *stats_header(const struct stats_blob *blob)
{
	return (const struct kvm_stats_header *)blob->data;
}

const char *stats_id(const struct stats_blob *blob)
{
	return (const char *)blob->data + stats_header(blob)->id_offset;
}

const struct kvm_stats_desc *stats_desc(const struct stats_blob *blob, int i)
{
	const struct kvm_stats_header *h = stats_header(blob);

	return (const struct kvm_stats_desc *)(blob->data + h->desc_offset +
					       (size_t)i * (DESC_FIXED +
							    h->name_size));
}

const struct kvm_stats_desc *stats_find(const struct stats_blob *blob,
					const char *name)
{
	const struct kvm_stats_header *h = stats_header(blob);
	uint32_t i;

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(blob, i);

		if (!strncmp(d->name, name, h->name_size))
			return d;
	}
	return NULL;
}

uint64_t stats_value(const struct stats_blob *blob, const char *name, int idx)
{
	const struct kvm_stats_header *h = stats_header(blob);
	const struct kvm_stats_desc *d = stats_find(blob, name);
	uint64_t v;
	size_t off;

	if (!d || idx >= d->size)
		return -1ull;
	off = h->data_offset + d->offset + idx * 8;
	if (off + 8 > blob->size)
		return -1ull;
	memcpy(&v, blob->data + off, 8);
	return v;
}

int __stats_read_stat(int fd, const char *name, uint64_t *val)
{
	struct kvm_stats_header h;
	size_t stride;
	uint8_t *descs;
	uint32_t i;
	ssize_t r;

	r = pread(fd, &h, sizeof(h), 0);
	if (r < 0)
		return -errno;
	if (r != sizeof(h))
		return -EIO;
	stride = DESC_FIXED + h.name_size;
	descs = malloc(stride * h.num_desc);
	if (!descs)
		return -ENOMEM;
	r = pread(fd, descs, stride * h.num_desc, h.desc_offset);
	if (r != (ssize_t)(stride * h.num_desc)) {
		free(descs);
		return r < 0 ? -errno : -EIO;
	}
	for (i = 0; i < h.num_desc; i++) {
		const struct kvm_stats_desc *d = (void *)(descs + i * stride);

		if (strncmp(d->name, name, h.name_size))
			continue;
		r = pread(fd, val, 8, h.data_offset + d->offset);
		free(descs);
		if (r < 0)
			return -errno;
		return r == 8 ? 0 : -EIO;
	}
	free(descs);
	return -ENOENT;
}

uint64_t stats_read_stat(int fd, const char *name)
{
	uint64_t v;
	int r = __stats_read_stat(fd, name, &v);

	if (r < 0)
		tap_bail("reading stat %s from fd %d failed: %s", name, fd,
			 strerror(-r));
	return v;
}

uint64_t stats_wait_above(int fd, const char *name, uint64_t above,
			  unsigned int timeout_ms)
{
	uint64_t v = stats_read_stat(fd, name);
	unsigned int waited;

	for (waited = 0; v <= above && waited < timeout_ms; waited += 10) {
		msleep(10);
		v = stats_read_stat(fd, name);
	}
	return v;
}

#define FMT_FAIL(...)                  \
	do {                           \
		tap_diag(__VA_ARGS__); \
		ok = false;            \
	} while (0)

bool stats_check_format(const struct stats_blob *blob, const char *what)
{
	const struct kvm_stats_header *h = stats_header(blob);
	size_t stride, size_desc, size_data = 0;
	bool ok = true;
	uint32_t i;

	if (blob->size < sizeof(*h)) {
		tap_diag("%s: file is %zu bytes, shorter than its header", what,
			 blob->size);
		return false;
	}
	stride = DESC_FIXED + h->name_size;
	size_desc = (size_t)h->num_desc * stride;
	if (!h->num_desc || !h->name_size)
		FMT_FAIL("%s: num_desc %u, name_size %u", what, h->num_desc,
			 h->name_size);
	if (h->id_offset < sizeof(*h) || h->desc_offset < sizeof(*h) ||
	    h->data_offset < sizeof(*h))
		FMT_FAIL("%s: an offset points into the header", what);
	if (h->id_offset + h->name_size > blob->size ||
	    h->desc_offset + size_desc > blob->size ||
	    h->data_offset > blob->size) {
		tap_diag("%s: blocks past the end of the %zu-byte file", what,
			 blob->size);
		return false;
	}
	if (!(h->desc_offset > h->data_offset ||
	      h->desc_offset + size_desc <= h->data_offset))
		FMT_FAIL("%s: descriptors overlap data", what);
	if (strncmp(stats_id(blob), "kvm", 3) ||
	    strnlen(stats_id(blob), h->name_size) >= h->name_size)
		FMT_FAIL("%s: bad id string", what);

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(blob, i);
		uint32_t type = d->flags & KVM_STATS_TYPE_MASK;
		uint32_t unit = d->flags & KVM_STATS_UNIT_MASK;
		uint32_t base = d->flags & KVM_STATS_BASE_MASK;
		size_t end = d->offset + (size_t)d->size * 8;

		if (strnlen(d->name, h->name_size) >= h->name_size ||
		    !d->name[0])
			FMT_FAIL("%s: descriptor %u has a bad name", what, i);
		if (type > KVM_STATS_TYPE_MAX || unit > KVM_STATS_UNIT_MAX ||
		    base > KVM_STATS_BASE_MAX)
			FMT_FAIL("%s: %s: bad flags 0x%x", what, d->name,
				 d->flags);
		switch (unit) {
		case KVM_STATS_UNIT_NONE:
		case KVM_STATS_UNIT_BYTES:
		case KVM_STATS_UNIT_CYCLES:
			if (d->exponent < 0)
				FMT_FAIL("%s: %s: exponent %d", what, d->name,
					 d->exponent);
			break;
		case KVM_STATS_UNIT_SECONDS:
			if (d->exponent > 0)
				FMT_FAIL("%s: %s: exponent %d", what, d->name,
					 d->exponent);
			break;
		case KVM_STATS_UNIT_BOOLEAN:
			if (d->exponent)
				FMT_FAIL("%s: %s: exponent %d", what, d->name,
					 d->exponent);
			break;
		}
		if (!d->size)
			FMT_FAIL("%s: %s: size 0", what, d->name);
		if ((type == KVM_STATS_TYPE_LINEAR_HIST) != !!d->bucket_size)
			FMT_FAIL("%s: %s: bucket_size %u", what, d->name,
				 d->bucket_size);
		if (d->offset % 8)
			FMT_FAIL("%s: %s: offset %u unaligned", what, d->name,
				 d->offset);
		if (end > size_data)
			size_data = end;
	}
	if (size_data < (size_t)h->num_desc * 8)
		FMT_FAIL("%s: data block %zu smaller than %u stats", what,
			 size_data, h->num_desc);
	if (h->data_offset + size_data != blob->size)
		FMT_FAIL("%s: file is %zu bytes, descriptors describe %zu",
			 what, blob->size, h->data_offset + size_data);
	return ok;
}

static const char *blob_block(const struct stats_blob *b, size_t off)
{
	const struct kvm_stats_header *h = stats_header(b);

	if (off < sizeof(*h))
		return "header";
	if (off >= h->id_offset && off < h->id_offset + h->name_size)
		return "id";
	if (off >= h->desc_offset && off < h->data_offset)
		return "descriptors";
	if (off >= h->data_offset)
		return "data";
	return "gap";
}

static void diag_data_stat(const struct stats_blob *a,
			   const struct stats_blob *b, size_t off)
{
	const struct kvm_stats_header *h = stats_header(b);
	uint32_t i;

	for (i = 0; i < h->num_desc; i++) {
		const struct kvm_stats_desc *d = stats_desc(b, i);
		size_t s = h->data_offset + d->offset;
		uint64_t va, vb;

		if (off < s || off >= s + d->size * 8ull)
			continue;
		s += (off - s) / 8 * 8;
		memcpy(&va, a->data + s, 8);
		memcpy(&vb, b->data + s, 8);
		tap_diag("  stat %s[%zu]: %llu vs %llu", d->name,
			 (off - h->data_offset - d->offset) / 8,
			 (unsigned long long)va, (unsigned long long)vb);
		return;
	}
}

bool stats_blob_equal(const struct stats_blob *a, const struct stats_blob *b,
		      const char *what)
{
	size_t i, n = a->size < b->size ? a->size : b->size;

	for (i = 0; i < n; i++)
		if (a->data[i] != b->data[i])
			break;
	if (i == n && a->size == b->size)
		return true;
	if (a->size != b->size)
		tap_diag("%s: sizes differ: %zu vs %zu", what, a->size,
			 b->size);
	if (i < n) {
		tap_diag(
			"%s: first difference at offset %zu (%s): 0x%02x vs 0x%02x",
			what, i,
			b->size >= sizeof(struct kvm_stats_header) ?
				blob_block(b, i) :
				"?",
			a->data[i], b->data[i]);
		if (b->size >= sizeof(struct kvm_stats_header) &&
		    !strcmp(blob_block(b, i), "data"))
			diag_data_stat(a, b, i);
		if (!strcmp(blob_block(b, i), "id"))
			tap_diag("  id \"%.48s\" vs \"%.48s\"", stats_id(a),
				 stats_id(b));
	}
	return false;
}

bool stats_fds_identical(int ours, int native, const char *what)
{
	static struct stats_blob a, b;
	ssize_t ra, rb;

	ra = __stats_read_all(ours, &a);
	rb = __stats_read_all(native, &b);
	if (ra < 0 || rb < 0) {
		tap_diag("%s: read failed: ours %s, native %s", what,
			 ra < 0 ? strerror(-ra) : "ok",
			 rb < 0 ? strerror(-rb) : "ok");
		return tap_check(false, "%s", what);
	}
	return tap_check(stats_blob_equal(&a, &b, what), "%s", what);
}

int send_fds(int sock, const void *data, size_t len, const int *fds, int nr)
{
	char cbuf[CMSG_SPACE(sizeof(int) * (VM_MAX_VCPUS + 8))];
	struct iovec iov = { (void *)data, len };
	struct msghdr msg = { 0 };
	struct cmsghdr *cmsg;

	if (nr > VM_MAX_VCPUS + 8)
		return -EINVAL;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nr) {
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nr);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nr);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nr);
	}
	if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

int recv_fds(int sock, void *data, size_t len, int *fds, int max)
{
	char cbuf[CMSG_SPACE(sizeof(int) * (VM_MAX_VCPUS + 8))];
	struct iovec iov = { data, len };
	struct msghdr msg = { 0 };
	struct cmsghdr *cmsg;
	ssize_t r;
	int n = 0;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (r < 0)
		return -errno;
	if ((size_t)r != len)
		return -EPIPE;
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		int i, cnt;

		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < cnt; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int),
			       sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

void *bad_address(void)
{
	static void *p;

	if (!p) {
		p = mmap(NULL, 4096, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			tap_bail("mmap(PROT_NONE): %s", strerror(errno));
	}
	return p;
}

/* ---- child VMMs ---- */

enum {
	CMD_IO_LOOP = 'r',
	CMD_SPIN = 's',
	CMD_STOP = 'h',
	CMD_EXIT = 'x',
	CMD_FREE = 'f',
	CMD_ACK = 'k',
};

static void child_close_others(int keep)
{
	if (keep > 3)
		syscall(SYS_close_range, 3, keep - 1, 0);
	syscall(SYS_close_range, keep + 1, ~0u, 0);
}

pid_t child_fork(int *sock, void (*fn)(int sock, void *arg), void *arg,
		 bool keep_none)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		tap_bail("socketpair: %s", strerror(errno));
	pid = tap_fork();
	if (!pid) {
		if (keep_none)
			child_close_others(sv[1]);
		else
			close(sv[0]);
		fn(sv[1], arg);
		_exit(3);
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

void child_send(int sock, pid_t pid, char cmd)
{
	char ack;

	if (write(sock, &cmd, 1) != 1 || read(sock, &ack, 1) != 1)
		tap_bail("VMM %d did not answer '%c'", pid, cmd);
}

static void child_stop_all(struct vm *vm)
{
	int i;

	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_thread_stop(vm->vcpus[i]);
}

static void child_start_all(struct vm *vm, enum guest_prog prog)
{
	int i;

	child_stop_all(vm);
	for (i = 0; i < vm->nr_vcpus; i++) {
		vcpu_load_prog(vm->vcpus[i], prog, 0);
		vcpu_thread_start(vm->vcpus[i]);
	}
	for (i = 0; i < vm->nr_vcpus; i++)
		vcpu_thread_wait_running(vm->vcpus[i]);
}

struct child_args {
	int nr_vcpus;
	const int *ids;
	unsigned int io_exits;
};

static void __attribute__((noreturn)) child_main(int sock, void *arg)
{
	const struct child_args *a = arg;
	int nr_vcpus = a->nr_vcpus, fds[VM_MAX_VCPUS + 2];
	unsigned int io_exits = a->io_exits;
	struct child_vmm_info info;
	struct vm *vm;
	int i;

	vm = vm_create(nr_vcpus, a->ids);
	if (io_exits)
		vm_run_all_to_hlt(vm, GUEST_IO_COUNT, io_exits);
	else
		vm_run_all_to_hlt(vm, GUEST_HLT, 0);

	memset(&info, 0, sizeof(info));
	info.pid = getpid();
	info.vm_fd = vm->fd;
	info.nr_vcpus = nr_vcpus;
	info.vm_creator_tid = vm->creator_tid;
	fds[0] = vm->fd;
	fds[1] = vm_get_stats_fd(vm);
	for (i = 0; i < nr_vcpus; i++) {
		info.vcpu_fds[i] = vm->vcpus[i]->fd;
		info.vcpu_ids[i] = vm->vcpus[i]->id;
		fds[2 + i] = vcpu_get_stats_fd(vm->vcpus[i]);
	}
	if (send_fds(sock, &info, sizeof(info), fds, nr_vcpus + 2) < 0)
		_exit(2);
	close(fds[1]);
	for (i = 0; i < nr_vcpus; i++)
		close(fds[2 + i]);

	for (;;) {
		char cmd, ack = CMD_ACK;

		if (read(sock, &cmd, 1) != 1)
			_exit(0); /* parent gone */
		if (!vm && cmd != CMD_EXIT)
			_exit(4); /* nothing to run after CMD_FREE */
		switch (cmd) {
		case CMD_FREE:
			child_stop_all(vm);
			vm_free(vm);
			vm = NULL;
			break;
		case CMD_IO_LOOP:
			child_start_all(vm, GUEST_IO_LOOP);
			break;
		case CMD_SPIN:
			child_start_all(vm, GUEST_SPIN);
			break;
		case CMD_STOP:
			child_stop_all(vm);
			break;
		case CMD_EXIT:
			if (vm)
				child_stop_all(vm);
			_exit(0);
		}
		if (write(sock, &ack, 1) != 1)
			_exit(3);
	}
}

void child_vmm_start(struct child_vmm *c, int nr_vcpus, const int *ids,
		     unsigned int io_exits)
{
	struct child_args args = { nr_vcpus, ids, io_exits };
	int fds[VM_MAX_VCPUS + 2];
	pid_t pid;
	int i, n;

	memset(c, 0, sizeof(*c));
	if (nr_vcpus > VM_MAX_VCPUS)
		tap_bail("child_vmm_start: too many vCPUs");
	pid = child_fork(&c->sock, child_main, &args, true);
	n = recv_fds(c->sock, &c->info, sizeof(c->info), fds, nr_vcpus + 2);
	if (n != nr_vcpus + 2) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		tap_bail("child VMM %d did not send its fds (%d)", pid, n);
	}
	c->info.pid = pid; /* as our namespace numbers it */
	c->vm_fd = fds[0];
	c->native_vm_stats = fds[1];
	for (i = 0; i < nr_vcpus; i++)
		c->native_vcpu_stats[i] = fds[2 + i];
}

static void child_vmm_cmd(struct child_vmm *c, char cmd)
{
	char ack;

	if (write(c->sock, &cmd, 1) != 1 || read(c->sock, &ack, 1) != 1 ||
	    ack != CMD_ACK)
		tap_bail("child VMM %d did not acknowledge command '%c'",
			 c->info.pid, cmd);
}

void child_vmm_run_io_loop(struct child_vmm *c)
{
	child_vmm_cmd(c, CMD_IO_LOOP);
	c->running = true;
}

void child_vmm_spin(struct child_vmm *c)
{
	child_vmm_cmd(c, CMD_SPIN);
	c->running = true;
}

void child_vmm_stop_vcpus(struct child_vmm *c)
{
	child_vmm_cmd(c, CMD_STOP);
	c->running = false;
}

void child_vmm_free_vm(struct child_vmm *c)
{
	child_vmm_cmd(c, CMD_FREE);
	c->running = false;
}

int child_vmm_exit(struct child_vmm *c)
{
	char cmd = CMD_EXIT;
	int status = -1;

	if (write(c->sock, &cmd, 1) != 1)
		tap_diag("child VMM %d: command pipe broken", c->info.pid);
	if (waitpid(c->info.pid, &status, 0) < 0)
		tap_bail("waitpid(%d): %s", c->info.pid, strerror(errno));
	close(c->sock);
	c->sock = -1;
	c->running = false;
	return status;
}

void child_vmm_kill(struct child_vmm *c)
{
	kill(c->info.pid, SIGKILL);
	waitpid(c->info.pid, NULL, 0);
	close(c->sock);
	c->sock = -1;
	c->running = false;
}

void child_vmm_close_fds(struct child_vmm *c)
{
	int i;

	close(c->vm_fd);
	close(c->native_vm_stats);
	for (i = 0; i < c->info.nr_vcpus; i++)
		close(c->native_vcpu_stats[i]);
	c->vm_fd = -1;
}

int __kvmstats_get_stats_fd_pidfd(int dev, int pidfd, int fd, int vcpu)
{
	struct kvmstats_fd_request req = {
		.pid = pidfd,
		.fd = fd,
		.vcpu = vcpu,
		.flags = KVMSTATS_FD_PIDFD,
	};

	return __kvmstats_get_stats_fd_req(dev, &req);
}

int __kvmstats_list_pidfd(int dev, int pidfd, struct kvmstats_vm **out)
{
	uint32_t room = 16;

	for (;;) {
		struct kvmstats_pidfd_list *l;
		int r, n;

		l = calloc(1, sizeof(*l) + room * sizeof(l->vms[0]));
		if (!l)
			return -ENOMEM;
		l->pidfd = pidfd;
		l->nr = room;
		r = ioctl(dev, KVMSTATS_LIST_PIDFD, l) ? -errno : 0;
		if (r == -E2BIG && l->nr > room) {
			room = l->nr + 8;
			free(l);
			continue;
		}
		if (r) {
			free(l);
			return r;
		}
		n = l->nr;
		*out = calloc(n ? n : 1, sizeof(**out));
		if (!*out) {
			free(l);
			return -ENOMEM;
		}
		memcpy(*out, l->vms, n * sizeof(**out));
		free(l);
		return n;
	}
}

int __kvmstats_list_vcpus(int dev, int pid, int fd, unsigned int flags,
			  struct kvmstats_vcpu **out)
{
	uint32_t room = 4;

	for (;;) {
		struct kvmstats_vcpu_list *l;
		int r, n;

		l = calloc(1, sizeof(*l) + room * sizeof(l->vcpus[0]));
		if (!l)
			return -ENOMEM;
		l->pid = pid;
		l->fd = fd;
		l->flags = flags;
		l->nr = room;
		r = ioctl(dev, KVMSTATS_LIST_VCPUS, l) ? -errno : 0;
		if (r == -E2BIG && l->nr > room) {
			room = l->nr;
			free(l);
			continue;
		}
		if (r) {
			free(l);
			return r;
		}
		n = l->nr;
		*out = calloc(n ? n : 1, sizeof(**out));
		if (!*out) {
			free(l);
			return -ENOMEM;
		}
		memcpy(*out, l->vcpus, n * sizeof(**out));
		free(l);
		return n;
	}
}

int __pidfd_open(pid_t pid, unsigned int flags)
{
	int fd = syscall(SYS_pidfd_open, pid, flags);

	return fd < 0 ? -errno : fd;
}

int pidfd_open_or_fail(pid_t pid)
{
	int fd = __pidfd_open(pid, 0);

	if (fd < 0)
		tap_bail("pidfd_open(%d): %s", (int)pid, strerror(-fd));
	return fd;
}

int ksg_test_open(void)
{
	int fd = open(KSG_TEST_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		tap_bail("open %s: %s (is ksg_test.ko loaded?)",
			 KSG_TEST_DEVICE, strerror(errno));
	return fd;
}

int ksg_impostor(int ksg)
{
	int fd = ioctl(ksg, KSG_TEST_IMPOSTOR);

	if (fd < 0)
		tap_bail("KSG_TEST_IMPOSTOR: %s", strerror(errno));
	return fd;
}

int run_capture(const char *cmd, char *buf, size_t size)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0, r;
	int st;

	buf[0] = '\0';
	if (!p)
		return -1;
	while (n + 1 < size && (r = fread(buf + n, 1, size - 1 - n, p)) > 0)
		n += r;
	buf[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
