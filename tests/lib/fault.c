// SPDX-License-Identifier: GPL-2.0-only
/*
 * Deliberate faults: see fault.h.
 */
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "tap.h"

#define FAULTS_SEEN_MAX 32

static const char *seen[FAULTS_SEEN_MAX];
static int nr_seen;

static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);
	const char *p = list;

	while (*p) {
		size_t n;

		p += strspn(p, ", \t");
		n = strcspn(p, ", \t");
		if (n == len && !strncmp(p, name, len))
			return true;
		p += n;
	}
	return false;
}

bool test_fault(const char *name)
{
	const char *list = getenv("KVMSTATS_FAULTS");
	int i;

	if (!list || !*list || !listed(list, name))
		return false;
	for (i = 0; i < nr_seen; i++)
		if (!strcmp(seen[i], name))
			return true;
	if (nr_seen < FAULTS_SEEN_MAX)
		seen[nr_seen++] = name;
	tap_diag("fault %s injected (KVMSTATS_FAULTS)", name);
	return true;
}
