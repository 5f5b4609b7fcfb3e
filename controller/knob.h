/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Actuators: read, write (verified by reading back) and restore the knobs
 * of one cgroup, on cgroup v2 (cpu.max, cpu.weight, io.weight) or v1
 * (cpu.cfs_quota_us/cpu.cfs_period_us, cpu.shares, blkio.bfq.weight),
 * whichever the host has; and CPU frequency through libcpupower. Every
 * path is below a base given by the caller, so tests point it at a tree
 * they build. Library code: returns -errno, logs nothing above debug.
 */
#ifndef TW_KNOB_H
#define TW_KNOB_H

#include <stdbool.h>
#include <stdint.h>
#include "policies/action.h"

struct knobs;

/*
 * Knobs of the cgroup at rel (leading '/') under cgroup_base
 * ("/sys/fs/cgroup": v2 if base/cgroup.controllers lists the controller,
 * else v1 base/cpu/rel, base/blkio/rel). The CPUs whose frequency it sets
 * are those of its cpuset (v2 rel/cpuset.cpus.effective, v1
 * base/cpuset/rel/cpuset.effective_cpus), else all. 0, -ENOENT when the
 * cgroup exists in none of those hierarchies, or -errno.
 */
int knobs_open(const char *cgroup_base, const char *rel, struct knobs **out);
void knobs_free(struct knobs *k);

/* Is the knob available here; if not, why (static string; why may be NULL). */
bool knob_available(const struct knobs *k, enum knob_kind kind, const char **why);
/*
 * Current value in canonical units. While the file still holds what
 * knob_write() put there, that exact value (conversions to v1 units lose
 * precision). 0, -ENOENT (cgroup gone), -EOPNOTSUPP (unavailable), -errno.
 */
int knob_read(struct knobs *k, enum knob_kind kind, double *value);
/*
 * Write, then read back: -EIO if the kernel kept another value; -ERANGE
 * for a value the file cannot hold. Weights are rounded to integers. The
 * frequency is clamped to each CPU's hardware limits (INFINITY: maximum).
 * 0, -ENOENT (cgroup gone), -EOPNOTSUPP (unavailable) or -errno.
 */
int knob_write(struct knobs *k, enum knob_kind kind, double value);
/* The file(s) a knob writes, for logs ("cpu/web/cpu.cfs_quota_us"). */
const char *knob_path(const struct knobs *k, enum knob_kind kind);

/*
 * Originals, recorded in a state file before the first write of each
 * knob, so that a crash (kill -9) can be undone by `tailwarden restore`.
 * The file is JSON, rewritten atomically (write + rename) at each change.
 */
struct knob_state;

/*
 * Open the state file in dir, loading what a previous run left there (so a
 * restart after a crash keeps the true originals). The directory is created
 * at the first record. 0, -EBADMSG (unreadable state file) or -errno.
 */
int knob_state_open(const char *dir, struct knob_state **out);
void knob_state_free(struct knob_state *s);
/*
 * Record the original of (cgroup rel, kind) if not yet recorded: the file
 * contents (per CPU for the frequency) as they are now, so that a restore
 * puts back exactly those; original is kept for the record. The file is on
 * disk when this returns 0. 0 or -errno.
 */
int knob_state_record(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum knob_kind kind, double original);
/*
 * Drop the record of (cgroup rel, kind): someone else changed the knob
 * after us, so it is theirs now and is not restored. 0 or -errno.
 */
int knob_state_forget(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum knob_kind kind);
/*
 * Unit= knobs: record the unit's property as it is now (raw, as
 * unit_get() read it) before our first SetUnitProperties; a restore sets
 * it back on the same bus (address as unit_bus_address() gave it). rel is
 * the unit's cgroup then, for people. 0 or -errno.
 */
int knob_state_record_unit(struct knob_state *s, const char *bus_address, const char *unit,
			   const char *cgroup_base, const char *rel, enum knob_kind kind,
			   double original, uint64_t raw);
int knob_state_forget_unit(struct knob_state *s, const char *unit, enum knob_kind kind);
/*
 * A service's cgroup was replaced by a new one (a restart): its records
 * (all but the frequency's, which belongs to the CPUs) no longer describe
 * it. Those of a unit are restored first (its runtime properties outlive
 * the restart); those of a plain cgroup are dropped (the new cgroup starts
 * from the kernel's defaults). unit NULL for a plain cgroup. The number of
 * records dropped, or -errno of the first failure (the rest still tried).
 */
int knob_state_renew(struct knob_state *s, const char *cgroup_base, const char *rel,
		     const char *unit);
/*
 * Restore every recorded original and remove the state file. Returns the
 * number restored, or -errno of the first failure (the rest still tried;
 * the file then keeps only what failed). A cgroup that vanished is skipped
 * (counted as restored: nothing to undo). The state stays usable.
 */
int knob_state_restore_all(struct knob_state *s);
/* Same, calling fn with one line in words per file or CPU it restored. */
typedef void (*knob_report_fn)(void *userdata, const char *line);
int knob_state_restore_all_report(struct knob_state *s, knob_report_fn fn, void *userdata);

/* For knob_state.c: exact originals as JSON, and putting them back. */
struct json_object;
/* The file contents behind a knob, or the per-CPU maximum frequency. 0 or -errno. */
int knob_snapshot(struct knobs *k, enum knob_kind kind, struct json_object **out);
/* Write a snapshot back, verified. -ENOENT when the cgroup is gone. 0 or -errno. */
int knob_snapshot_restore(const char *cgroup_base, struct json_object *snap,
			  knob_report_fn fn, void *userdata);

/*
 * Conversions between canonical weights (v2, 1..10000) and v1 files, pure,
 * exported for tests. cpu.shares = weight * 1024 / 100, truncated, clamped
 * to 2..262144 (systemd's cgroup_cpu_weight_to_shares); back: the smallest
 * weight giving those shares, so integer weights round-trip exactly.
 * blkio.bfq.weight: what systemd 252 writes on cgroup v1 for IOWeight=
 * (see knob.c); back: the smallest weight giving that bfq weight.
 */
unsigned long knob_weight_to_shares(unsigned long weight);
unsigned long knob_shares_to_weight(unsigned long shares);
unsigned long knob_io_weight_to_bfq(unsigned long weight);
unsigned long knob_bfq_to_io_weight(unsigned long bfq);

#endif
