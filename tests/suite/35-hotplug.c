// SPDX-License-Identifier: GPL-2.0-only
/*
 * vCPUs appearing while kvmstats is asked for them.  One thread creates
 * vCPUs (sparse ids) as fast as it can; another asks GET_STATS_FD for every
 * index over and over.  Each answer must be either ENOENT (not online yet)
 * or a file whose id names the vCPU created at that index; once an index
 * answered, it keeps answering; LIST_VMS's nr_vcpus never goes down.  At the
 * end every vCPU file is identical to native.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmstats_util.h"

#define ROUNDS 6
#define NR     VM_MAX_VCPUS

struct hammer {
	int dev;
	struct vm *vm;
	int ids[NR];
	pid_t tid; /* thread creating the vCPUs */
	volatile int done;
	unsigned long found, enoent, wrong, lost, other, list_back;
};

static void *hammer_fn(void *arg)
{
	struct hammer *h = arg;
	struct stats_blob *b = malloc(sizeof(*b));
	int seen = 0; /* indices 0..seen-1 have answered */
	unsigned int last_nr = 0;

	while (!h->done) {
		struct kvmstats_vm *vms = NULL;
		int i, n;

		for (i = 0; i < NR; i++) {
			char expect[64];
			int fd = __kvmstats_get_stats_fd(h->dev, 0, h->vm->fd,
							 i);

			if (fd == -ENOENT) {
				h->enoent++;
				if (i < seen)
					h->lost++;
				break;
			}
			if (fd < 0) {
				h->other++;
				break;
			}
			h->found++;
			if (i + 1 > seen)
				seen = i + 1;
			snprintf(expect, sizeof(expect), "kvm-%d/vcpu-%d",
				 h->tid, h->ids[i]);
			if (__stats_read_all(fd, b) < 0 ||
			    strncmp(stats_id(b), expect, 48)) {
				if (h->wrong++ < 3)
					tap_diag(
						"index %d: id \"%.48s\", expected \"%s\"",
						i, stats_id(b), expect);
			}
			close(fd);
		}
		n = __kvmstats_list_vms(h->dev, &vms);
		for (i = 0; i < n; i++) {
			if (vms[i].pid != getpid() || vms[i].fd != h->vm->fd)
				continue;
			if (vms[i].nr_vcpus < last_nr)
				h->list_back++;
			last_nr = vms[i].nr_vcpus;
		}
		free(vms);
	}
	free(b);
	return NULL;
}

int main(void)
{
	unsigned long found = 0, enoent = 0, wrong = 0, lost = 0, other = 0;
	unsigned long back = 0, bad_final = 0;
	int dev, r, i;

	kvm_test_init();
	dev = kvmstats_open();
	for (r = 0; r < ROUNDS; r++) {
		struct hammer h;
		pthread_t thr;

		memset(&h, 0, sizeof(h));
		h.dev = dev;
		h.vm = vm_create(0, NULL);
		h.tid = sys_gettid();
		for (i = 0; i < NR; i++)
			h.ids[i] = i * (r + 1) + r;
		pthread_create(&thr, NULL, hammer_fn, &h);
		msleep(5);
		for (i = 0; i < NR; i++)
			vm_add_vcpu(h.vm, h.ids[i]);
		msleep(20);
		h.done = 1;
		pthread_join(thr, NULL);

		found += h.found;
		enoent += h.enoent;
		wrong += h.wrong;
		lost += h.lost;
		other += h.other;
		back += h.list_back;

		for (i = 0; i < NR; i++) {
			int ours = kvmstats_get_stats_fd(dev, 0, h.vm->fd, i);
			int native = vcpu_get_stats_fd(h.vm->vcpus[i]);
			static struct stats_blob a, b;

			stats_read_all(ours, &a, "ours");
			stats_read_all(native, &b, "native");
			bad_final += !stats_blob_equal(&a, &b, "vCPU file");
			close(ours);
			close(native);
		}
		vm_free(h.vm);
	}
	tap_diag("%lu files opened, %lu ENOENT while vCPUs were being created",
		 found, enoent);
	tap_check(
		found > 0,
		"GET_STATS_FD answered for vCPUs while they were being created");
	tap_eq(wrong, 0,
	       "every file opened during creation names the vCPU created at its index");
	tap_eq(lost, 0, "an index that answered never went back to ENOENT");
	tap_eq(other, 0, "no errno other than ENOENT during creation");
	tap_eq(back, 0, "LIST_VMS nr_vcpus never went down");
	tap_eq(bad_final, 0,
	       "afterwards all %d x %d vCPU files are identical to native",
	       ROUNDS, NR);
	close(dev);
	return tap_exit();
}
