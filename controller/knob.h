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

/* Called with one line in words per file or CPU a restore put back. */
typedef void (*knob_report_fn)(void *userdata, const char *line);

/* For knob_state.c: exact originals as JSON, and putting them back. */
struct json_object;
/* The file contents behind a knob, or the per-CPU maximum frequency. 0 or -errno. */
int knob_snapshot(struct knobs *k, enum knob_kind kind, struct json_object **out);
/*
 * Write a snapshot of the knob kind of cgroup (relative to cgroup_base)
 * back, verified. A snapshot comes from a file and is checked first:
 * each path must be that knob's file of that cgroup in the v2 root or
 * its v1 hierarchy, each value one the file can hold (-EBADMSG,
 * -ERANGE). Files are opened from the root without following symbolic
 * links and never above it (-ELOOP, -EXDEV), and must be regular files
 * on a cgroup file system (-EMEDIUMTYPE; in a test tree, a plain
 * directory not a mount point, its own files count). When the snapshot
 * says what we last wrote ("written"), a file holding neither that nor
 * the original was changed by someone else: nothing is written,
 * -ESTALE. -ENOENT when the cgroup is gone. Other failures -errno. why
 * (may be NULL) gets the reason in words, for every negative return but
 * -ENOENT.
 */
int knob_snapshot_restore(const char *cgroup_base, const char *cgroup, enum knob_kind kind,
			  struct json_object *snap, knob_report_fn fn, void *userdata,
			  char *why, size_t whylen);
/*
 * Open rel below dirfd with flags, following no symbolic link and never
 * leaving dirfd's tree: openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), or
 * (walk, or no openat2 in the kernel) one component at a time with
 * O_NOFOLLOW. A file descriptor, or -ELOOP (a link), -EXDEV ("..", an
 * absolute path), -errno. Exported for tests.
 */
int knob_open_beneath(int dirfd, const char *rel, int flags, bool walk);

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
