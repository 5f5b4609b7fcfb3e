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
#include "knobs/knob.h"
#include "knobs/record.h"
#include "knobs/slice.h"

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
 * Parse the text of a state file (name is for messages) into its records
 * (*out, *n; each freed with knob_record_free(), then *out with free()),
 * checking every field's type and range first. 0, or -EBADMSG with the
 * reason logged as "NAME: byte N: ..." or "NAME: knobs[I]: ...".
 */
int knob_state_parse(const char *text, size_t len, const char *name, struct knob_record **out,
		     size_t *n);
/*
 * The one write path, for every backend (record.h): t and kind say
 * which (t->unit: a unit's property; kind KNOB_SCHED_SLICE: the threads
 * of t->cgroup; KNOB_CPU_FREQ: the CPUs of its cpuset; else its files).
 * The original is recorded if it is not yet (original in canonical units,
 * for people; the backend records the exact one), on disk before the
 * first write; what we wrote last is forgotten on disk; the value is
 * written (verified); and what the target holds after it is noted on
 * disk, so that a restore after a crash tells our last write from someone
 * else's change. A slice of 0 gives the threads their own back and drops
 * the record. 0 or -errno of the record or the write (a failure to note
 * what was written only leaves the knob restorable as before, and is not
 * one).
 */
int knob_state_set(struct knob_state *s, const struct knob_target *t, enum action_knob kind,
		   double original, double value);
/* Record the original of cgroup rel's knob kind without writing (for tests). 0 or -errno. */
int knob_state_record(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind, double original);
/*
 * Drop the record of (t, kind): someone else changed the knob after us,
 * so it is theirs now and is not restored. 0 or -errno.
 */
int knob_state_forget(struct knob_state *s, const struct knob_target *t, enum action_knob kind);
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
int knob_state_restore_all_report(struct knob_state *s, const char *cgroup_base, knob_report_fn fn,
				  void *userdata, int *left_alone);

/*
 * IOScheduler=: record the scheduler of block device dev as it is now (if
 * not yet recorded), then switch it to name (iosched_set()), and record
 * name as "written", as knob_state_set() does for a knob. A restore
 * puts the original back while the device still runs what we wrote.
 * 0 or -errno of the record or the switch.
 */
int knob_state_write_iosched(struct knob_state *s, const char *dev, const char *name);
/* Is there a record of dev's scheduler (we switched it)? */
bool knob_state_has_iosched(const struct knob_state *s, const char *dev);
/* The scheduler dev had before we switched it; NULL without a record. */
const char *knob_state_iosched_original(const struct knob_state *s, const char *dev);

#endif
