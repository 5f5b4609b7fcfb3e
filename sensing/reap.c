// SPDX-License-Identifier: GPL-2.0
#include <limits.h>
#include <stdbool.h>
#include "sensing/reap.h"

static bool known(struct cg_names *names, uint64_t id)
{
	return cg_names_lookup(names, id, UINT_MAX) != NULL; /* no rescan */
}

static bool any_unknown(struct cg_names *names, const struct sensor_snapshot *now,
			const struct contention_snapshot *cnow)
{
	for (size_t i = 0; now && i < sensor_snapshot_len(now); i++)
		if (!known(names, sensor_snapshot_id(now, i)))
			return true;
	for (size_t i = 0; cnow && i < contention_snapshot_len(cnow); i++)
		if (!known(names, contention_snapshot_id(cnow, i)))
			return true;
	return false;
}

size_t sensing_reap(struct cg_names *names, unsigned snap_age_ms, struct sensor *s,
		    const struct sensor_snapshot *now, struct contention *c,
		    const struct contention_snapshot *cnow)
{
	size_t n = 0;

	if (!s)
		now = NULL;
	if (!c)
		cnow = NULL;
	/*
	 * An id missing from a scan made after the snapshots were read is
	 * gone for good: cgroup2 ids (kernfs inode numbers) are not reused
	 * while the cgroup lives. A scan older than the snapshots proves
	 * nothing (the cgroup may be newer than the scan): redo it.
	 */
	if (!any_unknown(names, now, cnow))
		return 0;
	if (cg_names_age_ms(names) >= snap_age_ms && cg_names_refresh(names))
		return 0;
	for (size_t i = 0; now && i < sensor_snapshot_len(now); i++) {
		uint64_t id = sensor_snapshot_id(now, i);

		if (!known(names, id)) {
			sensor_forget(s, id);
			n++;
		}
	}
	/* Checked on their own: a cgroup may have run-queue samples and no traffic. */
	for (size_t i = 0; cnow && i < contention_snapshot_len(cnow); i++) {
		uint64_t id = contention_snapshot_id(cnow, i);

		if (!known(names, id)) {
			contention_forget(c, id);
			n++;
		}
	}
	return n;
}
