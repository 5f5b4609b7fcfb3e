/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the state file keeps of one change we made: a typed record, and the
 * backends that make and undo such changes. Every backend has the same
 * shape (struct knob_backend): it takes a record of the original, writes,
 * notes what it wrote, tells whether what is there now is still ours, and
 * puts the original back. The state (state.c) runs them all through one
 * write path and one restore; JSON appears only when the file is loaded
 * and saved (state_file.c).
 */
#ifndef TW_KNOB_RECORD_H
#define TW_KNOB_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "policies/action.h"

enum knob_backend_id {
	KNOB_BACKEND_CGROUP, /* a cgroup's files: cpu.max, cpu.weight, io.weight, v1 too (knob.c) */
	KNOB_BACKEND_CPUFREQ, /* scaling_max_freq of the CPUs of a cgroup's cpuset (knob.c, freq.c) */
	KNOB_BACKEND_UNIT,    /* a systemd unit's property (unit.c) */
	KNOB_BACKEND_SLICE,   /* the EEVDF slice of a cgroup's threads (slice.c) */
	KNOB_BACKEND_IOSCHED, /* a disk's I/O scheduler (iosched.c) */
	KNOB_BACKEND_SUBTREE, /* a v2 controller enabled in cgroup.subtree_control (subtree.c) */
	KNOB_BACKEND_MAX
};

/* A file of a cgroup knob: its contents before our first write, and after our last. */
struct knob_file {
	char *path;
	char *value;
	char *written; /* NULL: not known (before the first write ends, or an older file) */
};

/* One CPU of a frequency record, in kHz; written 0: not known. */
struct knob_cpu {
	unsigned cpu;
	unsigned long max_khz, written_khz;
};

/* One thread of a slice record: the same thread only (tid and start time). */
struct knob_thread {
	pid_t tid;
	uint64_t start;	     /* field 22 of /proc/TID/stat */
	uint64_t slice_ns;   /* its own; 0 the kernel's default */
	uint64_t written_ns; /* ours */
	bool left_alone;     /* someone else changed it after us: never touched again */
};

struct knob_record {
	enum knob_backend_id backend;
	enum action_knob knob;	    /* KNOB_MAX for the scheduler and controller records */
	char *cgroup_base, *cgroup; /* NULL for the scheduler */
	/* For people (the state file's "original"/"written"), canonical units. */
	double original, written;
	bool has_written;
	union {
		struct {
			struct knob_file *v;
			size_t n;
		} files; /* KNOB_BACKEND_CGROUP */
		struct {
			struct knob_cpu *v;
			size_t n;
		} cpus; /* KNOB_BACKEND_CPUFREQ */
		struct {
			struct knob_thread *v;
			size_t n;
		} threads; /* KNOB_BACKEND_SLICE */
		struct {
			char *unit, *property, *bus;
			uint64_t value, written; /* raw, UINT64_MAX: not set */
			bool has_written;
		} unit; /* KNOB_BACKEND_UNIT */
		struct {
			char *device, *original, *written; /* written NULL: not known */
		} iosched;				   /* KNOB_BACKEND_IOSCHED */
		struct {
			char *controller, *original; /* the file's contents before, for people */
		} subtree;			     /* KNOB_BACKEND_SUBTREE */
	};
};

void knob_record_free(struct knob_record *r); /* its contents, not r */
/* Forget what we wrote (the target's state is unknown until the write ends). */
void knob_record_unwritten(struct knob_record *r);
/* Who the record is about, for lines: the cgroup, the unit or the device. */
const char *knob_record_who(const struct knob_record *r);
/* Its knob's name as the state file spells it ("cpu.weight", "io.scheduler"). */
const char *knob_record_knob_name(const struct knob_record *r);

/* Called with one line in words per file, CPU or thread put back. */
typedef void (*knob_report_fn)(void *userdata, const char *line);

/* What a knob belongs to, as the manager knows it at a write. */
struct unit_bus;
struct unit_props;
struct knobs;
struct slice_tally;
struct knob_target {
	const char *cgroup_base; /* "/sys/fs/cgroup" or a test's tree */
	const char *cgroup;	 /* relative, leading '/' */
	struct knobs *files;	 /* the cgroup's knobs (knobs_open()): files and frequency */
	struct unit_bus *bus;	 /* Unit=: the unit's manager, and the unit */
	const char *unit;
	const struct unit_props *props; /* Unit=: the unit's properties as read this tick */
	const char *root;		/* Slice=: the cgroup2 mount the threads are read from */
	uint64_t slice_default_ns;	/* Slice=: the kernel's default slice */
	struct slice_tally *tally;	/* Slice=: what a write did to the threads (may be NULL) */
	const char *device;		/* IOScheduler=: the disk */
	const char *controller;		/* a v2 controller to enable in cgroup's subtree_control */
};

/*
 * What cgroup.subtree_control writes go through ("+cpu", "-io"): the
 * kernel (knob_subtree_write()), or a test's stand-in. 0 or -errno.
 */
typedef int (*knob_subtree_write_fn)(void *userdata, const char *cgroup_base, const char *cgroup,
				     const char *change);

/* Where backends act, beyond their record: the writer of subtree_control (NULL: the kernel's). */
struct knob_env {
	knob_subtree_write_fn subtree_write;
	void *subtree_data;
	/* Puts the state on disk: a write that adds originals to its record calls it first. */
	int (*save)(void *ctx);
	void *save_ctx;
};

/*
 * A backend: the same operations for every kind of change.
 *   record   the original of what t names (kind), as it is now, into r
 *            (the caller has set r->backend, knob, cgroup and original).
 *   write    set it to value (a scheduler: name in sval). Before writing,
 *            a backend that added originals to r saves them (env->save).
 *   written  note in r what it holds now, after our write.
 *   verify   is it still as we left it? 0 (ours, or already back: a
 *            restore may go on), -ESTALE with why (someone else changed
 *            it after us: it is theirs), -ENOENT (gone: nothing to undo),
 *            -errno with why. This is the one "changed by someone else"
 *            rule, for every backend.
 *   restore  put the original back (after verify said 0); fn gets a line
 *            per file, CPU or thread put back. 0, -ENOENT (gone), -ESTALE
 *            (a controller a child uses now, left enabled) or -errno with
 *            why.
 * describe names it for people.
 */
struct knob_backend {
	const char *describe;
	int (*record)(const struct knob_target *t, enum action_knob kind, struct knob_record *r);
	int (*write)(const struct knob_target *t, const struct knob_env *env, struct knob_record *r,
		     double value, const char *sval);
	int (*written)(const struct knob_target *t, struct knob_record *r, double value,
		       const char *sval);
	int (*verify)(const struct knob_env *env, struct knob_record *r, char *why, size_t whylen);
	int (*restore)(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
		       void *userdata, char *why, size_t whylen);
};

/* What a write of kind to t changes, for logs ("cpu/web/cpu.cfs_quota_us", "web.service CPUWeight"). buf. */
const char *knob_target_name(const struct knob_target *t, enum action_knob kind, char *buf,
			     size_t len);
/*
 * What kind of t holds now, in canonical units: a cgroup's file (while it
 * still holds our last write, exactly what we wrote), or a unit's
 * property as t->props has it. 0, -ENOENT (the cgroup went, or the file
 * with its controller), -EOPNOTSUPP (not available here; a slice, which
 * is per thread), -ENOTCONN (no unit properties), -errno.
 */
int knob_target_read(const struct knob_target *t, enum action_knob kind, double *value);

extern const struct knob_backend knob_backend_cgroup, knob_backend_cpufreq, knob_backend_unit,
	knob_backend_slice, knob_backend_iosched, knob_backend_subtree;
const struct knob_backend *knob_backend_of(enum knob_backend_id id);

#endif
