/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The EEVDF slice of a thread (Linux 6.12+): sched_getattr/sched_setattr
 * with sched_runtime on SCHED_OTHER and SCHED_BATCH threads, the threads
 * of a cgroup, and a thread's start time (so that a recorded tid is never
 * mistaken for a new thread that reuses it). Library code: returns
 * -errno, logs nothing above debug.
 */
#ifndef TW_KNOB_SLICE_H
#define TW_KNOB_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The kernel's bounds of a custom slice (it clamps into them). */
#define KNOB_SLICE_MIN_NS 100000ULL
#define KNOB_SLICE_MAX_NS 100000000ULL
/* Threads handled per service and tick; more are left as they are. */
#define KNOB_SLICE_MAX_THREADS 4096
/* Linux's PID_MAX_LIMIT: no tid is larger. */
#define KNOB_SLICE_TID_MAX 4194304

struct knob_slice_attr {
	uint32_t policy; /* SCHED_OTHER, SCHED_BATCH, ... */
	uint64_t flags;	 /* only SCHED_FLAG_RESET_ON_FORK is kept */
	int32_t nice;
	uint64_t runtime; /* the slice of a fair thread, ns */
};

/* The thread's policy, nice and slice. 0, -ESRCH (gone) or -errno. */
int knob_slice_get(pid_t tid, struct knob_slice_attr *a);
/* SCHED_OTHER or SCHED_BATCH: a thread whose slice we may set. */
bool knob_slice_fair(const struct knob_slice_attr *a);
/*
 * Set the slice of a fair thread (0: the kernel's default), keeping the
 * policy and nice cur says it has, then read it back: -EIO when the
 * kernel kept another (a kernel without custom slices), -ESRCH (gone),
 * -EPERM, -errno.
 */
int knob_slice_set(pid_t tid, const struct knob_slice_attr *cur, uint64_t ns);
/*
 * Can this kernel give a thread a custom slice? Tried on the calling
 * thread (500 us, read back, then its default again). 0 with *default_ns
 * the kernel's default slice; -EOPNOTSUPP or -errno with *why in words.
 */
int knob_slice_probe(uint64_t *default_ns, const char **why);
/* The start time of a thread, field 22 of /proc/TID/stat. 0, -ESRCH (gone), -EBADMSG. */
int knob_slice_thread_start(pid_t tid, uint64_t *start);
/*
 * The threads of cgroup rel: ROOT/REL/cgroup.threads in the cgroup2
 * hierarchy the daemon follows, else BASE/cpu/REL/tasks (cgroup v1). At
 * most max into *tids, an array the caller frees (NULL when none); *capped
 * when there were more. *file (may be NULL) the file read. 0, -ENOENT (no
 * such cgroup) or -errno.
 */
int knob_slice_threads(const char *cgroup_base, const char *root, const char *rel, pid_t **tids,
		       size_t max, size_t *n, bool *capped, char *file, size_t filelen);

/* What a write of the slice backend (knob_backend_slice) did with a cgroup's threads. */
struct slice_tally {
	unsigned set;	     /* given the slice now */
	unsigned kept;	     /* had it already */
	unsigned gone;	     /* exited meanwhile */
	unsigned not_fair;   /* not SCHED_OTHER or SCHED_BATCH: left alone */
	unsigned left_alone; /* changed by someone else after us, now or before */
	unsigned changed;    /* of those, found changed this call */
	unsigned failed;
	bool capped;	 /* more than KNOB_SLICE_MAX_THREADS: only the first got it */
	char file[4096]; /* the threads' file read */
};

#endif
