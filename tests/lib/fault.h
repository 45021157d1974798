/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Deliberate faults for proving that a check can fail (tests/README.md).
 *
 * KVMSTATS_FAULTS holds fault names separated by commas or spaces; the
 * guest's /init passes it on from the host (tests/qemu/run-guest).  Unset,
 * test_fault() is always false and the tests run as they always do.
 */
#ifndef KVMSTATS_TEST_FAULT_H
#define KVMSTATS_TEST_FAULT_H

#include <stdbool.h>

/*
 * True when fault @name is named in KVMSTATS_FAULTS; says so as a TAP
 * diagnostic the first time each fault is asked for.
 */
bool test_fault(const char *name);

#endif /* KVMSTATS_TEST_FAULT_H */
