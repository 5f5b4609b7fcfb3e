// SPDX-License-Identifier: GPL-2.0
/*
 * Custom EEVDF slices (Linux 6.12+). For a SCHED_OTHER or SCHED_BATCH
 * thread, sched_setattr() with sched_runtime != 0 sets its slice (the
 * kernel clamps it to 0.1 ms .. 100 ms), 0 puts back the default, and
 * sched_getattr() returns the slice in sched_runtime. SCHED_FLAG_KEEP_PARAMS
 * would skip the slice, so the thread's own policy and nice are passed
 * back as they are. Older kernels ignore the field: knob_slice_probe()
 * finds out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/log.h"
#include "knobs/record.h"
#include "knobs/slice.h"
#include "policies/action.h"

#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif
#define TW_SCHED_FLAG_RESET_ON_FORK 0x01ULL

/* The kernel's struct sched_attr, SCHED_ATTR_SIZE_VER1 (glibc 2.36 has none). */
struct tw_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};

int knob_slice_get(pid_t tid, struct knob_slice_attr *a)
{
	struct tw_sched_attr at;

	memset(&at, 0, sizeof(at));
	if (syscall(SYS_sched_getattr, tid, &at, sizeof(at), 0) < 0)
		return -errno;
	a->policy = at.sched_policy;
	a->flags = at.sched_flags;
	a->nice = at.sched_nice;
	a->runtime = at.sched_runtime;
	return 0;
}

bool knob_slice_fair(const struct knob_slice_attr *a)
{
	return a->policy == SCHED_OTHER || a->policy == SCHED_BATCH;
}

int knob_slice_set(pid_t tid, const struct knob_slice_attr *cur, uint64_t ns)
{
	struct tw_sched_attr at;
	struct knob_slice_attr now;
	int r;

	if (!knob_slice_fair(cur))
		return -EINVAL;
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.sched_policy = cur->policy;
	at.sched_flags = cur->flags & TW_SCHED_FLAG_RESET_ON_FORK;
	at.sched_nice = cur->nice;
	at.sched_runtime = ns;
	if (syscall(SYS_sched_setattr, tid, &at, 0) < 0)
		return -errno;
	r = knob_slice_get(tid, &now);
	if (r)
		return r;
	log_debug("thread %d: slice %llu -> %llu ns (read back %llu)", (int)tid,
		  (unsigned long long)cur->runtime, (unsigned long long)ns,
		  (unsigned long long)now.runtime);
	return !ns || now.runtime == ns ? 0 : -EIO;
}

int knob_slice_probe(uint64_t *default_ns, const char **why)
{
	pid_t self = gettid();
	struct knob_slice_attr a, b;
	int r;

	*why = NULL;
	r = knob_slice_get(self, &a);
	if (r) {
		*why = r == -ENOSYS ? "no sched_getattr() in this kernel" :
				      "sched_getattr() failed";
		return r;
	}
	if (!knob_slice_fair(&a)) {
		*why = "the daemon does not run under SCHED_OTHER or SCHED_BATCH: cannot probe";
		return -EOPNOTSUPP;
	}
	r = knob_slice_set(self, &a, 500000);
	if (r == -EPERM) {
		*why = "sched_setattr() is not allowed (CAP_SYS_NICE, or a system call filter)";
		return r;
	}
	if (r) {
		/* The field was ignored, or refused: put back what it had. */
		knob_slice_set(self, &a, 0);
		*why = "custom EEVDF slices need Linux 6.12 or later";
		return -EOPNOTSUPP;
	}
	r = knob_slice_set(self, &a, 0);
	if (!r)
		r = knob_slice_get(self, &b);
	if (r || !b.runtime) {
		*why = "custom EEVDF slices need Linux 6.12 or later";
		return -EOPNOTSUPP;
	}
	*default_ns = b.runtime;
	return 0;
}

int knob_slice_thread_start(pid_t tid, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long v;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 && errno != ESRCH ? -errno : -ESRCH;
	buf[n] = '\0';
	/* The name (field 2) may hold spaces and parentheses: count after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EBADMSG;
	p++;
	for (field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &v) != 1)
		return -EBADMSG;
	*start = v;
	return 0;
}

/*
 * The thread ids listed in FILE, at most MAX, in *TIDS (grown as needed,
 * the caller frees it): a tick with Slice= reads every thread of the
 * cgroup, so a cgroup of a few threads costs a few bytes, not the most
 * a cgroup may have.
 */
static int read_tids(const char *file, pid_t **tids, size_t max, size_t *n, bool *capped)
{
	FILE *f = fopen(file, "re");
	size_t cap = 0;
	long v;

	*tids = NULL;
	*n = 0;
	*capped = false;
	if (!f)
		return errno == ENODEV ? -ENOENT : -errno;
	while (fscanf(f, "%ld", &v) == 1) {
		if (v <= 0 || v > KNOB_SLICE_TID_MAX)
			continue;
		if (*n >= max) {
			*capped = true;
			break;
		}
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			pid_t *g;

			if (ncap > max)
				ncap = max;
			g = realloc(*tids, ncap * sizeof(**tids));
			if (!g) {
				fclose(f);
				free(*tids);
				*tids = NULL;
				*n = 0;
				return -ENOMEM;
			}
			*tids = g;
			cap = ncap;
		}
		(*tids)[(*n)++] = (pid_t)v;
	}
	fclose(f);
	return 0;
}

int knob_slice_threads(const char *cgroup_base, const char *root, const char *rel, pid_t **tids,
		       size_t max, size_t *n, bool *capped, char *file, size_t filelen)
{
	char path[2 * 4096];

	snprintf(path, sizeof(path), "%s%s/cgroup.threads", root, rel);
	if (access(path, R_OK) < 0)
		snprintf(path, sizeof(path), "%s/cpu%s/tasks", cgroup_base, rel);
	if (file && filelen)
		snprintf(file, filelen, "%s", path);
	return read_tids(path, tids, max, n, capped);
}

/* ---- the backend of Slice= (record.h): one record per cgroup, one entry per thread ---- */

static void fmt_slice(char *buf, size_t len, uint64_t ns)
{
	action_format_value(buf, len, KNOB_SCHED_SLICE, (double)ns, 0);
}

static int slice_rec(const struct knob_target *t, enum action_knob kind, struct knob_record *r)
{
	(void)t;
	(void)kind;
	r->original = 0;
	r->threads.v = NULL;
	r->threads.n = 0;
	return 0;
}

static struct knob_thread *thread_of(struct knob_record *r, pid_t tid)
{
	for (size_t i = 0; i < r->threads.n; i++)
		if (r->threads.v[i].tid == tid)
			return &r->threads.v[i];
	return NULL;
}

static void thread_drop(struct knob_record *r, pid_t tid)
{
	struct knob_thread *th = thread_of(r, tid);

	if (th)
		*th = r->threads.v[--r->threads.n];
}

/* A new thread to give the slice: its original recorded, not yet on disk. */
struct slice_new {
	pid_t tid;
	struct knob_slice_attr at;
};

/*
 * Each thread of the cgroup gets the slice: one not yet recorded gets its
 * original recorded first (all of them on disk in one save before any
 * slice is set); one that has it is left as it is; one whose slice
 * someone else changed is marked left alone and never touched again.
 */
static int slice_wr(const struct knob_target *t, const struct knob_env *env, struct knob_record *r,
		    double value, const char *sval)
{
	struct slice_tally dummy, *tally = t->tally ? t->tally : &dummy;
	uint64_t ns = (uint64_t)value;
	struct slice_new *todo = NULL;
	size_t n = 0, ntodo = 0;
	pid_t *tids = NULL;
	bool dirty = false;
	int ret, first = 0;

	(void)sval;
	memset(tally, 0, sizeof(*tally));
	if (ns < KNOB_SLICE_MIN_NS || ns > KNOB_SLICE_MAX_NS)
		return -ERANGE;
	ret = knob_slice_threads(t->cgroup_base, t->root, t->cgroup, &tids, KNOB_SLICE_MAX_THREADS,
				 &n, &tally->capped, tally->file, sizeof(tally->file));
	if (ret)
		goto out;
	/* At most one new thread per thread listed. */
	todo = n ? calloc(n, sizeof(*todo)) : NULL;
	if (n && !todo) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		struct knob_slice_attr at;
		struct knob_thread *th, *v;
		uint64_t start;

		if (knob_slice_thread_start(tids[k], &start) || knob_slice_get(tids[k], &at)) {
			tally->gone++;
			continue;
		}
		th = thread_of(r, tids[k]);
		if (th && th->start != start) {
			/* The recorded thread is gone and its tid reused: a new thread. */
			thread_drop(r, tids[k]);
			dirty = true;
			th = NULL;
		}
		if (th) {
			if (th->left_alone) {
				tally->left_alone++;
			} else if (knob_slice_fair(&at) && at.runtime == th->written_ns) {
				tally->kept++;
			} else {
				/* Someone else's now: never touched again, nor restored. */
				th->left_alone = true;
				dirty = true;
				tally->left_alone++;
				tally->changed++;
			}
			continue;
		}
		if (!knob_slice_fair(&at)) {
			tally->not_fair++;
			continue;
		}
		v = realloc(r->threads.v, (r->threads.n + 1) * sizeof(*v));
		if (!v) {
			ret = -ENOMEM;
			goto out;
		}
		r->threads.v = v;
		v[r->threads.n++] = (struct knob_thread){
			.tid = tids[k],
			.start = start,
			.written_ns = ns,
			.slice_ns = at.runtime == t->slice_default_ns ? 0 : at.runtime,
		};
		todo[ntodo].tid = tids[k];
		todo[ntodo++].at = at;
		dirty = true;
	}
	/* Every original on disk before the first write. */
	if (dirty && (ret = env->save(env->save_ctx))) {
		for (size_t k = 0; k < ntodo; k++)
			thread_drop(r, todo[k].tid);
		goto out;
	}
	dirty = false;
	for (size_t k = 0; k < ntodo; k++) {
		ret = knob_slice_set(todo[k].tid, &todo[k].at, ns);
		if (!ret) {
			tally->set++;
			continue;
		}
		if (ret == -ESRCH) {
			tally->gone++;
		} else {
			first = first ? first : ret;
			tally->failed++;
		}
		thread_drop(r, todo[k].tid); /* not changed (or gone): nothing to restore */
		dirty = true;
	}
	if (dirty && env->save(env->save_ctx))
		log_debug("Failed to drop the threads not changed from the state file");
	ret = first;
out:
	free(tids);
	free(todo);
	return ret;
}

static int slice_written(const struct knob_target *t, struct knob_record *r, double value,
			 const char *sval)
{
	(void)t;
	(void)sval;
	r->written = value;
	r->has_written = true;
	return 0;
}

/* Each thread is verified on its own as it is restored: some may be ours, others not. */
static int slice_verify(const struct knob_env *env, struct knob_record *r, char *why, size_t whylen)
{
	(void)env;
	(void)r;
	if (why && whylen)
		*why = '\0';
	return 0;
}

/*
 * Put back the slice of each thread: only the same thread (tid and start
 * time), only a fair one, only while it has the slice we set. A thread
 * gone is fine. 0, or the -errno of the first failure.
 */
static int slice_restore(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			 void *userdata, char *why, size_t whylen)
{
	char line[256], a[24], b[24];
	int first = 0;

	(void)env;
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct knob_thread *th = &r->threads.v[i];
		struct knob_slice_attr at;
		uint64_t start;
		int ret;

		line[0] = '\0';
		if (th->left_alone)
			continue;
		ret = knob_slice_thread_start(th->tid, &start);
		if (ret == -ESRCH)
			continue; /* gone: nothing to undo */
		if (!ret && start != th->start) {
			snprintf(
				line, sizeof(line),
				"thread %d: another thread now (start time %llu, recorded %llu), left alone",
				(int)th->tid, (unsigned long long)start,
				(unsigned long long)th->start);
		} else if (!ret && !(ret = knob_slice_get(th->tid, &at)) && !knob_slice_fair(&at)) {
			snprintf(line, sizeof(line),
				 "thread %d: no longer SCHED_OTHER or SCHED_BATCH, left alone",
				 (int)th->tid);
		} else if (!ret && at.runtime != th->written_ns) {
			fmt_slice(a, sizeof(a), at.runtime);
			fmt_slice(b, sizeof(b), th->written_ns);
			snprintf(line, sizeof(line), "thread %d: slice %s, we set %s: left alone",
				 (int)th->tid, a, b);
		} else if (!ret) {
			ret = knob_slice_set(th->tid, &at, th->slice_ns);
			fmt_slice(a, sizeof(a), th->written_ns);
			fmt_slice(b, sizeof(b), th->slice_ns);
			if (!ret)
				snprintf(line, sizeof(line), "thread %d: slice %s -> %s",
					 (int)th->tid, a, b);
		}
		if (ret == -ESRCH)
			continue;
		if (ret) {
			if (!first && why && whylen)
				snprintf(why, whylen, "thread %d: %s", (int)th->tid,
					 strerror(-ret));
			first = first ? first : ret;
			continue;
		}
		log_debug("%s: %s", r->cgroup, line);
		if (fn) {
			char full[512];

			snprintf(full, sizeof(full), "sched.slice of %s: %s", r->cgroup, line);
			log_make_printable(full);
			fn(userdata, full);
		}
	}
	return first;
}

const struct knob_backend knob_backend_slice = {
	.describe = "EEVDF slices of threads",
	.record = slice_rec,
	.write = slice_wr,
	.written = slice_written,
	.verify = slice_verify,
	.restore = slice_restore,
};
