/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The state file: every knob's original, recorded before our first write,
 * and putting them back (at exit, on reload, and by `tailwarden restore`
 * after a crash). Library code: returns -errno, logs nothing above debug.
 */
#ifndef TW_KNOB_STATE_H
#define TW_KNOB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "controller/knob.h"

/*
 * Originals, recorded in a state file before the first write of each
 * knob, so that a crash (kill -9) can be undone by `tailwarden restore`.
 * The file is JSON, rewritten atomically (write + rename) at each change.
 */
struct knob_state;

/*
 * The state directory, checked (create: made first when missing, mode
 * 0700, parents 0755). It must be a real directory owned by root and not
 * writable by group or others: its file says which files get written back.
 * 0; -ENOENT (missing, !create); -ELOOP, -ENOTDIR or -EPERM with *why in
 * words ("is a symbolic link"); -errno.
 */
int knob_state_dir(const char *dir, bool create, const char **why);
/*
 * Open the state file in dir, loading what a previous run left there (so a
 * restart after a crash keeps the true originals). The directory is created
 * at the first record. 0, -EBADMSG (unreadable state file) or -errno.
 */
int knob_state_open(const char *dir, struct knob_state **out);
void knob_state_free(struct knob_state *s);
/*
 * Parse the text of a state file (name is for messages) into its "knobs"
 * array, checking every record's fields, types and ranges. 0, or
 * -EBADMSG with the reason logged as "NAME: byte N: ..." or
 * "NAME: knobs[I]: ...".
 */
int knob_state_parse(const char *text, size_t len, const char *name, struct json_object **knobs);
/*
 * Record the original of (cgroup rel, kind) if not yet recorded: the file
 * contents (per CPU for the frequency) as they are now, so that a restore
 * puts back exactly those; original is kept for the record. The file is on
 * disk when this returns 0. 0 or -errno.
 */
int knob_state_record(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind, double original);
/*
 * Record the original (as knob_state_record()), write value with
 * knob_write(), and record what the files hold after it as "written", so
 * that a restore after a crash can tell our last write from someone
 * else's change. The state file is rewritten before the write (dropping
 * the previous "written") and after it. 0 or -errno of the record or the
 * write (a failure to record "written" only leaves the knob restorable
 * as before, and is not one).
 */
int knob_state_write(struct knob_state *s, const char *cgroup_base, const char *rel,
		     enum action_knob kind, struct knobs *k, double original, double value);
/*
 * Drop the record of (cgroup rel, kind): someone else changed the knob
 * after us, so it is theirs now and is not restored. 0 or -errno.
 */
int knob_state_forget(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind);
/*
 * Unit= knobs: record the unit's property as it is now (raw, as
 * unit_get() read it) before our first SetUnitProperties; a restore sets
 * it back on the same bus (address as unit_bus_address() gave it). rel is
 * the unit's cgroup then, for people. 0 or -errno.
 */
int knob_state_record_unit(struct knob_state *s, const char *bus_address, const char *unit,
			   const char *cgroup_base, const char *rel, enum action_knob kind,
			   double original, uint64_t raw);
int knob_state_forget_unit(struct knob_state *s, const char *unit, enum action_knob kind);
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
 * Enable cgroup v2 controller ctrl ("cpu", "io") for cgroup rel, so that
 * its knobs exist: in each cgroup.subtree_control from the nearest
 * ancestor that lacks it down to rel's parent (knob_subtree_plan(): never
 * the root's, never above processes), top-down, each recorded in the
 * state file before it is written and read back. A restore disables them
 * again (restore_all below). All or nothing: when a write fails, what
 * this call enabled is disabled again and its records dropped. fn (may be
 * NULL) gets one line per file changed ("PATH: \"OLD\" -> \"NEW\"").
 * 0 (also when nothing was needed), or -errno as knob_subtree_plan() or
 * of the write, with why in words.
 */
int knob_state_enable_controller(struct knob_state *s, const char *cgroup_base, const char *rel,
				 const char *ctrl, knob_report_fn fn, void *userdata, char *why,
				 size_t whylen);
/* For tests: what writes cgroup.subtree_control (NULL: knob_subtree_write()). */
void knob_state_subtree_writer(struct knob_state *s, knob_subtree_write_fn fn, void *userdata);
/*
 * Restore every recorded original and remove the state file. Returns the
 * number restored, or -errno of the first failure (the rest still tried;
 * the file then keeps only what failed). A cgroup that vanished is skipped
 * (counted as restored: nothing to undo). A knob whose files no longer
 * hold what we wrote last was changed by someone else: left alone and
 * dropped (not counted). With cgroup_base, a record of cgroup files for
 * another cgroup root is refused (a failure, kept); a frequency record
 * names CPUs, not files, and is restored whatever its root. Every snapshot is checked as
 * knob_snapshot_restore() says. Controllers we enabled are disabled
 * after every knob, deepest first (knob_subtree_restore()); one a child
 * cgroup uses now is left enabled (dropped, counted as left alone). The
 * state stays usable.
 */
int knob_state_restore_all(struct knob_state *s, const char *cgroup_base);
/*
 * Same, but the disks' schedulers and the controllers we enabled stay as
 * they are, recorded (a reload: the policies change, IOScheduler= does
 * not, and the new set finds the controllers it needs enabled).
 */
int knob_state_restore_knobs(struct knob_state *s, const char *cgroup_base);
/*
 * Same, calling fn with one line in words per file or CPU it restored,
 * per knob left alone and per record refused; *left_alone (may be NULL)
 * the number left alone.
 */
int knob_state_restore_all_report(struct knob_state *s, const char *cgroup_base,
				  knob_report_fn fn, void *userdata, int *left_alone);

/* What knob_state_slice() did with the threads it was given. */
struct slice_tally {
	unsigned set;        /* given the slice now */
	unsigned kept;       /* had it already */
	unsigned gone;       /* exited meanwhile */
	unsigned not_fair;   /* not SCHED_OTHER or SCHED_BATCH: left alone */
	unsigned left_alone; /* changed by someone else after us, now or before */
	unsigned changed;    /* of those, found changed this call */
	unsigned failed;
};
/*
 * Slice=: give each thread of tids[] (the threads of cgroup rel) the
 * slice ns. A thread not yet recorded gets its original recorded first
 * (tid, start time, slice: 0 when it is default_ns, the kernel's
 * default), all of them on disk in one write before any slice is set;
 * a recorded thread that has the slice is left as it is; one whose slice
 * someone else changed is marked left alone and never touched again.
 * Threads that are gone are skipped. 0, or -errno (of the record, or the
 * first write that failed: the others are still tried).
 */
int knob_state_slice(struct knob_state *s, const char *cgroup_base, const char *rel,
		     const pid_t *tids, size_t n, uint64_t ns, uint64_t default_ns,
		     struct slice_tally *tally);
/*
 * Give the threads of cgroup rel their own slices back (each only while
 * it still has ours) and drop the record. 0 or -errno (the record kept).
 */
int knob_state_slice_release(struct knob_state *s, const char *cgroup_base, const char *rel);

/*
 * IOScheduler=: record the scheduler of block device dev as it is now (if
 * not yet recorded), then switch it to name (iosched_set()), and record
 * name as "written", as knob_state_write() does for a knob. A restore
 * puts the original back while the device still runs what we wrote.
 * 0 or -errno of the record or the switch.
 */
int knob_state_write_iosched(struct knob_state *s, const char *dev, const char *name);
/* Is there a record of dev's scheduler (we switched it)? */
bool knob_state_has_iosched(const struct knob_state *s, const char *dev);
/* The scheduler dev had before we switched it; NULL without a record. */
const char *knob_state_iosched_original(const struct knob_state *s, const char *dev);

#endif
