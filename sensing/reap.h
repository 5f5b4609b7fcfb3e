/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Freeing the per-cgroup BPF map entries of cgroups that were removed, for
 * every command that keeps the sensors running (top, run). The maps have
 * a fixed size (4096 cgroups): on a host that creates and removes cgroups
 * (logins, jobs, containers, restarted services) they would fill, and from
 * then on new cgroups would go uncounted.
 */
#ifndef TW_REAP_H
#define TW_REAP_H

#include <stddef.h>
#include "sensing/cgroup.h"
#include "sensing/contention.h"
#include "sensing/sensor.h"

/*
 * Forget every cgroup of the snapshots (s with now, c with cnow; either
 * pair may be NULL) whose cgroup2 directory no longer exists. The
 * snapshots were read snap_age_ms ago; when an id is unknown, names is
 * rescanned unless its last scan is younger than that (call it once per
 * tick: at most one rescan). What the entries held is in the snapshots
 * already. Returns the number of entries forgotten (a cgroup
 * in both sensors counts twice).
 */
size_t sensing_reap(struct cg_names *names, unsigned snap_age_ms, struct sensor *s,
		    const struct sensor_snapshot *now, struct contention *c,
		    const struct contention_snapshot *cnow);

#endif
