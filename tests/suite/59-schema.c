// SPDX-License-Identifier: GPL-2.0-only
/*
 * KVMSTATS_GET_SCHEMA_FD: the module's own tables as a stats fd, with no
 * VM.  Its header and descriptors are byte for byte those of a real VM's
 * and vCPU's KVM_GET_STATS_FD files (taken afterwards), its id is
 * "kvmstats-schema" or "kvmstats-schema/vcpu", its data block is zeros,
 * it reads like a stats fd (pread, READ_BATCH, no write), and the request
 * is checked (flags, reserved fields, the argument's address).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmstats_util.h"

static int dev;

static int schema_fd(unsigned int flags)
{
	struct kvmstats_schema_request req = { .flags = flags };

	return __test_ioctl(dev, KVMSTATS_GET_SCHEMA_FD, (unsigned long)&req);
}

/* Header and descriptors of @a and @b equal; @a's data all zeros. */
static void compare(const struct stats_blob *schema,
		    const struct stats_blob *native, const char *id,
		    const char *what)
{
	const struct kvm_stats_header *h = stats_header(native);
	const struct kvm_stats_header *sh = stats_header(schema);
	size_t i;
	bool zero = true;

	tap_check(schema->size == native->size,
		  "%s: as long as KVM's file (%zu, %zu)", what, schema->size,
		  native->size);
	tap_check(!memcmp(sh, h, sizeof(*h)), "%s: the same header", what);
	tap_check(!memcmp(schema->data + h->desc_offset,
			  native->data + h->desc_offset,
			  h->data_offset - h->desc_offset),
		  "%s: the same %u descriptors, byte for byte", what,
		  h->num_desc);
	tap_check(!strcmp(stats_id(schema), id) &&
			  strnlen(stats_id(schema), h->name_size) <
				  h->name_size,
		  "%s: id \"%s\" (got \"%s\")", what, id, stats_id(schema));
	for (i = h->data_offset; i < schema->size; i++)
		zero = zero && !schema->data[i];
	tap_check(zero, "%s: a data block of zeros", what);
	tap_check(stats_check_format(schema, what),
		  "%s: KVM's format invariants hold", what);
}

int main(void)
{
	static struct stats_blob svm, svcpu, nvm, nvcpu;
	struct kvmstats_schema_request req;
	struct kvmstats_read_op op;
	uint64_t buf[2];
	int vmfd, vcpufd, n;
	struct vm *vm;

	kvm_test_init();
	dev = kvmstats_open();

	vmfd = schema_fd(0);
	vcpufd = schema_fd(KVMSTATS_SCHEMA_VCPU);
	if (!tap_check(vmfd >= 0 && vcpufd >= 0,
		       "GET_SCHEMA_FD with no VM of ours (%d, %d)", vmfd,
		       vcpufd))
		return tap_exit();
	stats_read_all(vmfd, &svm, "VM schema");
	stats_read_all(vcpufd, &svcpu, "vCPU schema");

	vm = vm_create(1, NULL);
	n = vm_get_stats_fd(vm);
	stats_read_all(n, &nvm, "native VM");
	close(n);
	n = vcpu_get_stats_fd(vm->vcpus[0]);
	stats_read_all(n, &nvcpu, "native vCPU");
	close(n);
	compare(&svm, &nvm, "kvmstats-schema", "VM schema");
	compare(&svcpu, &nvcpu, "kvmstats-schema/vcpu", "vCPU schema");

	/* Like a stats fd: read-only, pread anywhere, READ_BATCH. */
	tap_check(write(vmfd, "x", 1) < 0 && errno == EBADF,
		  "a schema fd cannot be written (EBADF)");
	n = pread(vcpufd, buf, sizeof(buf), stats_header(&nvcpu)->data_offset);
	tap_check(n == sizeof(buf) && !buf[0] && !buf[1],
		  "pread of its data block: zeros (%d)", n);
	op = (struct kvmstats_read_op){
		.fd = vcpufd, .offset = 0, .buf = (uintptr_t)buf, .len = 8
	};
	n = __kvmstats_read_batch(dev, &op, 1);
	tap_check(!n && op.result == 8 && !memcmp(buf, svcpu.data, 8),
		  "READ_BATCH reads it (%d, result %d)", n, op.result);
	close(vmfd);
	close(vcpufd);

	/* The request's checks. */
	tap_eq(schema_fd(2), -EINVAL, "unknown flag: EINVAL");
	memset(&req, 0, sizeof(req));
	req.reserved0 = 1;
	tap_eq(__test_ioctl(dev, KVMSTATS_GET_SCHEMA_FD, (unsigned long)&req),
	       -EINVAL, "non-zero reserved0: EINVAL");
	memset(&req, 0, sizeof(req));
	req.reserved[2] = 1;
	tap_eq(__test_ioctl(dev, KVMSTATS_GET_SCHEMA_FD, (unsigned long)&req),
	       -EINVAL, "non-zero reserved[2]: EINVAL");
	tap_eq(__test_ioctl(dev, KVMSTATS_GET_SCHEMA_FD,
			    (unsigned long)bad_address()),
	       -EFAULT, "bad pointer: EFAULT");

	vm_free(vm);
	close(dev);
	return tap_exit();
}
