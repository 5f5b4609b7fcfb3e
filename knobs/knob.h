/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Actuators: read, write (verified by reading back) and restore the knobs
 * of one cgroup, on cgroup v2 (cpu.max, cpu.weight, io.bfq.weight or
 * io.weight) or v1 (cpu.cfs_quota_us/cpu.cfs_period_us, cpu.shares,
 * blkio.bfq.weight), whichever the host has; the v2 controllers they need
 * (cgroup.subtree_control); and CPU frequency through libcpupower. Every
 * path is below a base given by the caller, so tests point it at a tree
 * they build. Library code: returns -errno, logs nothing above debug.
 */
#ifndef TW_KNOB_H
#define TW_KNOB_H

#include <stdbool.h>
#include <stdint.h>
#include "knobs/record.h"
#include "policies/action.h"

struct knobs;

/*
 * Knobs of the cgroup at rel (leading '/') under cgroup_base
 * ("/sys/fs/cgroup": v2 if base/cgroup.controllers lists the controller,
 * else v1 base/cpu/rel, base/blkio/rel). The v2 I/O weight is the BFQ
 * scheduler's io.bfq.weight when that file exists (bfq is loaded), else
 * io.cost's io.weight. The CPUs whose frequency it sets
 * are those of its cpuset (v2 rel/cpuset.cpus.effective, v1
 * base/cpuset/rel/cpuset.effective_cpus), else all. 0, -ENOENT when the
 * cgroup exists in none of those hierarchies, or -errno.
 */
int knobs_open(const char *cgroup_base, const char *rel, struct knobs **out);
void knobs_free(struct knobs *k);

/* Is the knob available here; if not, why (static string; why may be NULL). */
bool knob_available(const struct knobs *k, enum action_knob kind, const char **why);
/*
 * Can the CPU weight be "idle" (0): does the cgroup have cpu.idle (Linux
 * 5.15+)? Without it a write of 0 is -EOPNOTSUPP.
 */
bool knob_weight_can_idle(const struct knobs *k);
/*
 * "cpu" or "io" when the knob is unavailable because that cgroup v2
 * controller is not enabled for its cgroup (knob_subtree_plan() says
 * what would enable it); NULL otherwise.
 */
const char *knob_missing_controller(const struct knobs *k, enum action_knob kind);
/*
 * Current value in canonical units. While the file still holds what
 * knob_write() put there, that exact value (conversions to v1 units lose
 * precision). 0, -ENOENT (cgroup gone), -EOPNOTSUPP (unavailable), -errno.
 */
int knob_read(struct knobs *k, enum action_knob kind, double *value);
/*
 * Write, then read back: -EIO if the kernel kept another value; -ERANGE
 * for a value the file cannot hold. Weights are rounded to integers. The
 * frequency is clamped to each CPU's hardware limits (INFINITY: maximum).
 * 0, -ENOENT (cgroup gone), -EOPNOTSUPP (unavailable) or -errno.
 */
int knob_write(struct knobs *k, enum action_knob kind, double value);
/* The file(s) a knob writes, for logs ("cpu/web/cpu.cfs_quota_us"). */
const char *knob_path(const struct knobs *k, enum action_knob kind);

/*
 * The backends of cgroup files and of the CPU frequency (record.h). A
 * record is checked before it is restored: each path must be that knob's
 * file of that cgroup in the v2 root or its v1 hierarchy, each value one
 * the file can hold (-EBADMSG, -ERANGE). Files are opened from the root
 * without following symbolic links and never above it (-ELOOP, -EXDEV),
 * and must be regular files on a cgroup file system (-EMEDIUMTYPE; in a
 * test tree, a plain directory not a mount point, its own files count).
 * The controllers' backend enables one in a subtree_control (t->cgroup,
 * t->controller) and undoes it with knob_subtree_restore().
 */
/*
 * Open rel below dirfd with flags, following no symbolic link and never
 * leaving dirfd's tree: openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), or
 * (walk, or no openat2 in the kernel) one component at a time with
 * O_NOFOLLOW. A file descriptor, or -ELOOP (a link), -EXDEV ("..", an
 * absolute path), -errno. Exported for tests.
 */
int knob_open_beneath(int dirfd, const char *rel, int flags, bool walk);

/*
 * cgroup v2 controllers (ctrl "cpu" or "io") in cgroup.subtree_control.
 * Which cgroups must enable ctrl for cgroup rel to have its knobs: the
 * nearest cgroup on the way down from the root whose subtree_control
 * lacks it (*from, "" when none does: nothing to do), then each one below
 * it down to rel's parent; the least change. Reads only. 0, -EOPNOTSUPP
 * (not a controller of this cgroup2 root), -EPERM (the root's own
 * subtree_control lacks it: the system manager's to change, never ours),
 * -EBUSY (one of them has processes of its own: the kernel's "no internal
 * processes" rule would refuse), -ENOENT (gone), -EINVAL, -errno; why (may
 * be NULL) says it in words for every negative return but -ENOENT/-EINVAL.
 */
int knob_subtree_plan(const char *cgroup_base, const char *rel, const char *ctrl, char *from,
		      size_t fromlen, char *why, size_t whylen);
/* The first line of file name of cgroup ("/" the root) under cgroup_base. 0 or -errno. */
int knob_cgroup_read(const char *cgroup_base, const char *cgroup, const char *name, char *buf,
		     size_t len);
/*
 * The kernel's writer of cgroup.subtree_control (knob_subtree_write_fn):
 * the file opened as a restore opens knob
 * files (no link followed, never above the root, on a cgroup file
 * system). Never the root's: -EPERM. userdata is unused. 0 or -errno.
 */
int knob_subtree_write(void *userdata, const char *cgroup_base, const char *cgroup,
		       const char *change);
/*
 * Undo an enable: "-ctrl" in cgroup.subtree_control of cgroup (never the
 * root: -EPERM), through wr (NULL: knob_subtree_write()), read back
 * (-EIO). Nothing to do when it is disabled already. Left as it is, with
 * -ESTALE and why naming the child, while a child cgroup uses ctrl: a
 * value of its own other than the kernel's default (cpu.weight, cpu.max,
 * cpu.idle; io.weight, io.bfq.weight, io.max, io.latency), or ctrl in its
 * own subtree_control (systemd may have come to rely on it for another
 * unit). -ENOENT when the cgroup is gone; -EBADMSG for a controller or
 * path that is not one; other failures -errno with why in words.
 */
int knob_subtree_restore(const char *cgroup_base, const char *cgroup, const char *ctrl,
			 knob_subtree_write_fn wr, void *wr_data, knob_report_fn fn, void *userdata,
			 char *why, size_t whylen);

/*
 * Conversions between canonical weights (v2, 1..10000) and v1 files, pure,
 * exported for tests. cpu.shares = weight * 1024 / 100, truncated, clamped
 * to 2..262144 (systemd's cgroup_cpu_weight_to_shares); back: the smallest
 * weight giving those shares, so integer weights round-trip exactly.
 * blkio.bfq.weight and io.bfq.weight: one to one, saturating at 1000
 * (see knob.c); back: the same, clamped to 1..1000.
 */
unsigned long knob_weight_to_shares(unsigned long weight);
unsigned long knob_shares_to_weight(unsigned long shares);
unsigned long knob_io_weight_to_bfq(unsigned long weight);
unsigned long knob_bfq_to_io_weight(unsigned long bfq);

#endif
