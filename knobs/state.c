// SPDX-License-Identifier: GPL-2.0
/*
 * The changes we made and how to undo them: one typed record per change
 * (record.h), kept on disk (state_file.c) before each first write, so that
 * whatever happens to the daemon (SIGTERM, a crash, kill -9) the host can
 * be put back. Every backend goes through the same two paths here:
 *
 *   knob_state_set()     record the original (on disk), forget what we
 *                        wrote last (on disk), write, note what the
 *                        target holds now (on disk). A crash anywhere in
 *                        between leaves the record "unknown", which a
 *                        restore treats as ours, never our own write as
 *                        someone else's.
 *   restore_all()        for each record, verify (is it still as we left
 *                        it? else someone else's: left alone and dropped),
 *                        then restore. Knobs first, then the controllers
 *                        we enabled, deepest first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/defaults.h"
#include "common/log.h"
#include "knobs/iosched.h"
#include "knobs/knob.h"
#include "knobs/slice.h"
#include "knobs/state.h"
#include "knobs/state_file.h"

struct knob_state {
	char *dir, *path;
	struct knob_record *v;
	size_t n, cap;
	struct knob_env env;
};

static int save_cb(void *ctx)
{
	struct knob_state *s = ctx;

	return knob_state_file_save(s->dir, s->v, s->n);
}

static int save(struct knob_state *s)
{
	return save_cb(s);
}

int knob_state_open(const char *dir, struct knob_state **out)
{
	struct knob_state *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dir = strdup(dir);
	if (!s->dir || asprintf(&s->path, "%s/" TW_STATE_FILE, dir) < 0) {
		s->path = NULL;
		knob_state_free(s);
		return -ENOMEM;
	}
	s->env.save = save_cb;
	s->env.save_ctx = s;
	r = knob_state_file_load(s->path, &s->v, &s->n);
	if (r) {
		knob_state_free(s);
		return r;
	}
	s->cap = s->n;
	*out = s;
	return 0;
}

void knob_state_free(struct knob_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		knob_record_free(&s->v[i]);
	free(s->v);
	free(s->dir);
	free(s->path);
	free(s);
}

void knob_state_subtree_writer(struct knob_state *s, knob_subtree_write_fn fn, void *userdata)
{
	s->env.subtree_write = fn;
	s->env.subtree_data = userdata;
}

/* Are a and b the same directory path, give or take trailing slashes? */
static bool same_base(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);

	while (n > 1 && a[n - 1] == '/')
		n--;
	while (m > 1 && b[m - 1] == '/')
		m--;
	return n == m && !strncmp(a, b, n);
}

/* Which backend a write of kind to t goes through. */
static enum knob_backend_id backend_for(const struct knob_target *t, enum action_knob kind)
{
	if (t->device)
		return KNOB_BACKEND_IOSCHED;
	if (t->controller)
		return KNOB_BACKEND_SUBTREE;
	if (kind == KNOB_SCHED_SLICE)
		return KNOB_BACKEND_SLICE;
	if (t->unit)
		return KNOB_BACKEND_UNIT;
	return kind == KNOB_CPU_FREQ ? KNOB_BACKEND_CPUFREQ : KNOB_BACKEND_CGROUP;
}

/* The record of what t and kind name, by each backend's key; -1 when none. */
static int find(const struct knob_state *s, enum knob_backend_id id, const struct knob_target *t,
		enum action_knob kind)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct knob_record *r = &s->v[i];

		if (r->backend != id)
			continue;
		switch (id) {
		case KNOB_BACKEND_IOSCHED:
			if (!strcmp(r->iosched.device, t->device))
				return i;
			break;
		case KNOB_BACKEND_SUBTREE:
			if (same_base(r->cgroup_base, t->cgroup_base) &&
			    !strcmp(r->cgroup, t->cgroup) &&
			    !strcmp(r->subtree.controller, t->controller))
				return i;
			break;
		case KNOB_BACKEND_UNIT:
			if (!strcmp(r->unit.unit, t->unit) && r->knob == kind)
				return i;
			break;
		default:
			if (!strcmp(r->cgroup_base, t->cgroup_base) &&
			    !strcmp(r->cgroup, t->cgroup) && r->knob == kind)
				return i;
			break;
		}
	}
	return -1;
}

static void drop(struct knob_state *s, size_t i)
{
	knob_record_free(&s->v[i]);
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
	s->n--;
}

/*
 * Take r over as a new record and save: recorded on disk before its
 * knob is written. 0 or -errno; on an error it is not recorded (and
 * freed), and the caller must not write.
 */
static int append(struct knob_state *s, struct knob_record *r)
{
	int ret;

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		struct knob_record *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			knob_record_free(r);
			return -ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = *r;
	ret = save(s);
	if (ret)
		drop(s, s->n - 1);
	return ret;
}

/* The record of (t, kind) as it is now, made and saved if there is none. Its index, or -errno. */
static int record(struct knob_state *s, const struct knob_target *t, enum knob_backend_id id,
		  enum action_knob kind, double original, bool *added)
{
	struct knob_record r = {
		.backend = id, .knob = kind, .original = original, .written = NAN
	};
	int i = find(s, id, t, kind), ret;

	if (added)
		*added = false;
	if (i >= 0)
		return i;
	if (id != KNOB_BACKEND_IOSCHED) {
		r.cgroup_base = strdup(t->cgroup_base);
		r.cgroup = strdup(t->cgroup);
		if (!r.cgroup_base || !r.cgroup) {
			knob_record_free(&r);
			return -ENOMEM;
		}
	}
	if (id == KNOB_BACKEND_IOSCHED || id == KNOB_BACKEND_SUBTREE)
		r.knob = KNOB_MAX;
	ret = knob_backend_of(id)->record(t, kind, &r);
	if (ret) {
		knob_record_free(&r);
		return ret;
	}
	ret = append(s, &r);
	if (ret)
		return ret;
	if (added)
		*added = true;
	return s->n - 1;
}

/* The one write path: record the original, write, note what we wrote. */
static int set(struct knob_state *s, const struct knob_target *t, enum knob_backend_id id,
	       enum action_knob kind, double original, double value, const char *sval, bool *added)
{
	const struct knob_backend *b = knob_backend_of(id);
	struct knob_record *r;
	int i, ret;

	i = record(s, t, id, kind, original, added);
	if (i < 0)
		return i;
	r = &s->v[i];
	/* The slice's threads each keep what we wrote them; the backend saves them itself. */
	if (r->has_written && id != KNOB_BACKEND_SLICE) {
		knob_record_unwritten(r);
		ret = save(s);
		if (ret) /* the file may still say what we wrote before: do not write */
			return ret;
	}
	if (id == KNOB_BACKEND_SLICE) {
		/* Each tick, for new threads: on disk only when something changed. */
		bool changed = !r->has_written || r->written != value;

		ret = b->write(t, &s->env, r, value, sval);
		b->written(t, r, value, sval);
		if (changed && save(s))
			log_debug("Failed to save the slice of %s", t->cgroup);
		return ret;
	}
	ret = b->write(t, &s->env, r, value, sval);
	if (ret)
		return ret;
	/* Not on disk: the record stays "unknown" and is restored as before. */
	ret = b->written(t, r, value, sval);
	if (ret || (ret = save(s))) {
		knob_record_unwritten(r);
		log_debug_errno(ret, "Failed to record what was written to %s of %s: %m",
				knob_record_knob_name(r), knob_record_who(r));
	}
	return 0;
}

static int slice_release(struct knob_state *s, const struct knob_target *t)
{
	int i = find(s, KNOB_BACKEND_SLICE, t, KNOB_SCHED_SLICE), r;

	if (i < 0)
		return 0;
	r = knob_backend_slice.restore(&s->env, &s->v[i], NULL, NULL, NULL, 0);
	if (r)
		return r;
	drop(s, i);
	return save(s);
}

int knob_state_set(struct knob_state *s, const struct knob_target *t, enum action_knob kind,
		   double original, double value)
{
	enum knob_backend_id id = backend_for(t, kind);

	if (id == KNOB_BACKEND_SLICE && !(value > 0))
		return slice_release(s, t);
	return set(s, t, id, kind, original, value, NULL, NULL);
}

int knob_state_record(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind, double original)
{
	struct knob_target t = { .cgroup_base = cgroup_base, .cgroup = rel };
	int i = record(s, &t, backend_for(&t, kind), kind, original, NULL);

	return i < 0 ? i : 0;
}

int knob_state_forget(struct knob_state *s, const struct knob_target *t, enum action_knob kind)
{
	int i = find(s, backend_for(t, kind), t, kind);

	if (i < 0)
		return 0;
	drop(s, i);
	return save(s);
}

/* ---- disks' schedulers ---- */

int knob_state_write_iosched(struct knob_state *s, const char *dev, const char *name)
{
	struct knob_target t = { .device = dev };

	return set(s, &t, KNOB_BACKEND_IOSCHED, KNOB_MAX, NAN, NAN, name, NULL);
}

bool knob_state_has_iosched(const struct knob_state *s, const char *dev)
{
	struct knob_target t = { .device = dev };

	return find(s, KNOB_BACKEND_IOSCHED, &t, KNOB_MAX) >= 0;
}

const char *knob_state_iosched_original(const struct knob_state *s, const char *dev)
{
	struct knob_target t = { .device = dev };
	int i = find(s, KNOB_BACKEND_IOSCHED, &t, KNOB_MAX);

	return i < 0 ? NULL : s->v[i].iosched.original;
}

/* ---- controllers we enabled (cgroup.subtree_control) ---- */

/*
 * A write failed half-way: disable again, deepest first, what this call
 * enabled (the prefixes of rel from n0 to n), and drop the records it
 * made (added[i]: the i-th cgroup from n0).
 */
static void subtree_undo(struct knob_state *s, const char *base, const char *rel, size_t n0,
			 size_t n, const char *ctrl, const bool *added, size_t count)
{
	char cg[PATH_MAX], change[8];
	int i;

	snprintf(change, sizeof(change), "-%s", ctrl);
	for (size_t k = count; k-- > 0;) {
		struct knob_target t = { .cgroup_base = base, .cgroup = cg, .controller = ctrl };

		snprintf(cg, sizeof(cg), "%.*s", (int)n, rel);
		if ((s->env.subtree_write ? s->env.subtree_write : knob_subtree_write)(
			    s->env.subtree_data, base, cg, change))
			log_debug("%s%s: could not disable %s again", base, cg, ctrl);
		i = find(s, KNOB_BACKEND_SUBTREE, &t, KNOB_MAX);
		if (added[k] && i >= 0)
			drop(s, i);
		while (n > n0 && rel[--n] != '/')
			;
	}
	if (save(s))
		log_debug("Failed to drop the records of %s undone from the state file", ctrl);
}

int knob_state_enable_controller(struct knob_state *s, const char *cgroup_base, const char *rel,
				 const char *ctrl, knob_report_fn fn, void *userdata, char *why,
				 size_t whylen)
{
	char from[PATH_MAX], cg[PATH_MAX], before[1024], after[1024], line[PATH_MAX + 2200];
	size_t n0, n, count = 0, depth = 1;
	const char *next;
	bool *added;
	int r;

	r = knob_subtree_plan(cgroup_base, rel, ctrl, from, sizeof(from), why, whylen);
	if (r || !*from)
		return r;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	added = calloc(depth, sizeof(*added));
	if (!added)
		return -ENOMEM;
	/* Top-down: a cgroup can give only what its parent gives it. */
	for (n0 = n = strlen(from);; n = next - rel) {
		struct knob_target t = { .cgroup_base = cgroup_base,
					 .cgroup = cg,
					 .controller = ctrl };

		snprintf(cg, sizeof(cg), "%.*s", (int)n, rel);
		r = knob_cgroup_read(cgroup_base, cg, "cgroup.subtree_control", before,
				     sizeof(before));
		if (!r)
			r = set(s, &t, KNOB_BACKEND_SUBTREE, KNOB_MAX, NAN, NAN, NULL,
				&added[count]);
		if (!r)
			r = knob_cgroup_read(cgroup_base, cg, "cgroup.subtree_control", after,
					     sizeof(after));
		if (r) {
			if (why && whylen)
				snprintf(
					why, whylen,
					"%s%s/cgroup.subtree_control: enabling %s failed: %s%s",
					cgroup_base, cg, ctrl,
					r == -EBUSY ?
						"it has processes of its own now (\"no internal processes\")" :
						strerror(-r),
					count ? "; the cgroups above it were put back" : "");
			/* this one, if written, and those above it */
			subtree_undo(s, cgroup_base, rel, n0, n, ctrl, added, count + 1);
			free(added);
			return r;
		}
		count++;
		snprintf(line, sizeof(line), "%s%s/cgroup.subtree_control: \"%s\" -> \"%s\"",
			 cgroup_base, cg, before, after);
		log_make_printable(line);
		log_debug("%s", line);
		if (fn)
			fn(userdata, line);
		next = strchr(rel + n + 1, '/');
		if (!next)
			break;
	}
	free(added);
	return 0;
}

/* ---- a service's cgroup replaced (a restart) ---- */

int knob_state_renew(struct knob_state *s, const char *cgroup_base, const char *rel,
		     const char *unit)
{
	int n = 0, first = 0, r;

	for (size_t i = s->n; i-- > 0;) {
		struct knob_record *e = &s->v[i];
		char why[512];

		/* Not the cgroup's own: the frequency, disks, its ancestors' controllers. */
		if (e->backend == KNOB_BACKEND_CPUFREQ || e->backend == KNOB_BACKEND_IOSCHED ||
		    e->backend == KNOB_BACKEND_SUBTREE)
			continue;
		if (unit ? e->backend != KNOB_BACKEND_UNIT || strcmp(e->unit.unit, unit) :
			   e->backend == KNOB_BACKEND_UNIT || strcmp(e->cgroup_base, cgroup_base) ||
				    strcmp(e->cgroup, rel))
			continue;
		if (e->backend ==
		    KNOB_BACKEND_SLICE) /* threads outlive their cgroup: theirs again */
			knob_backend_slice.restore(&s->env, e, NULL, NULL, NULL, 0);
		if (unit) { /* a unit's runtime properties outlive the restart: ours put back, if still ours */
			r = knob_backend_unit.verify(&s->env, e, why, sizeof(why));
			if (!r)
				r = knob_backend_unit.restore(&s->env, e, NULL, NULL, why,
							      sizeof(why));
			if (r && r != -ENOENT && r != -ESTALE) {
				first = first ? first : r;
				continue;
			}
		}
		drop(s, i);
		n++;
	}
	r = n ? save(s) : 0;
	return first ? first : r ? r : n;
}

/* ---- restoring ---- */

static void say(knob_report_fn fn, void *userdata, const struct knob_record *e, const char *what)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s of %s: %s", knob_record_knob_name(e), knob_record_who(e),
		 what);
	log_make_printable(line);
	log_debug("%s", line);
	if (fn)
		fn(userdata, line);
}

/*
 * Every knob first (a knob's file goes with its controller), then the
 * controllers we enabled, deepest first (a cgroup cannot drop what a
 * child still has in its subtree_control): records are added top-down.
 */
static size_t restore_order(const struct knob_state *s, size_t i)
{
	size_t plain = 0, k;

	for (k = 0; k < s->n; k++)
		plain += s->v[k].backend != KNOB_BACKEND_SUBTREE;
	if (i < plain) {
		for (k = 0;; k++)
			if (s->v[k].backend != KNOB_BACKEND_SUBTREE && !i--)
				return k;
	}
	i -= plain;
	for (k = s->n; k-- > 0;)
		if (s->v[k].backend == KNOB_BACKEND_SUBTREE && !i--)
			break;
	return k;
}

static int restore_all(struct knob_state *s, const char *cgroup_base, bool keep_iosched,
		       knob_report_fn fn, void *userdata, int *left_alone)
{
	int restored = 0, first = 0, r;
	char why[PATH_MAX + 256], what[PATH_MAX + 300];
	bool *keep = calloc(s->n ? s->n : 1, sizeof(*keep));
	size_t n = s->n;

	if (!keep)
		return -ENOMEM;
	if (left_alone)
		*left_alone = 0;
	for (size_t j = 0; j < n; j++) {
		size_t i = restore_order(s, j);
		struct knob_record *e = &s->v[i];
		const struct knob_backend *b = knob_backend_of(e->backend);

		why[0] = '\0';
		if ((e->backend == KNOB_BACKEND_IOSCHED || e->backend == KNOB_BACKEND_SUBTREE) &&
		    keep_iosched) {
			keep[i] = true; /* kept as it is */
			continue;
		}
		/* A frequency record names CPUs, a slice record threads, a scheduler's a disk: no root to check. */
		if (cgroup_base && e->backend != KNOB_BACKEND_IOSCHED &&
		    e->backend != KNOB_BACKEND_CPUFREQ && e->backend != KNOB_BACKEND_SLICE &&
		    !same_base(e->cgroup_base, cgroup_base)) {
			snprintf(why, sizeof(why),
				 "recorded for the cgroup root %s, not CgroupBase=%s; refusing it",
				 e->cgroup_base, cgroup_base);
			r = -EXDEV;
		} else {
			r = b->verify(&s->env, e, why, sizeof(why));
			if (!r)
				r = b->restore(&s->env, e, fn, userdata, why, sizeof(why));
		}
		if (r == -ENOENT) {
			say(fn, userdata, e,
			    e->backend == KNOB_BACKEND_UNIT    ? "unit gone, nothing to restore" :
			    e->backend == KNOB_BACKEND_IOSCHED ? "device gone, nothing to restore" :
								 "cgroup gone, nothing to restore");
			r = 0;
		}
		if (r == -ESTALE) {
			if (e->backend == KNOB_BACKEND_SUBTREE)
				snprintf(what, sizeof(what), "%s", why);
			else
				snprintf(what, sizeof(what),
					 "left alone: changed by someone else since (%s)", why);
			say(fn, userdata, e, what);
			if (left_alone)
				(*left_alone)++;
			continue;
		}
		if (!r) {
			restored++;
			continue;
		}
		snprintf(what, sizeof(what), "not restored: knobs[%zu]: %s", i,
			 why[0] ? why : strerror(-r));
		say(fn, userdata, e, what);
		if (!first)
			first = r;
		keep[i] = true;
	}
	for (size_t i = n; i-- > 0;)
		if (!keep[i])
			drop(s, i);
	free(keep);
	r = save(s);
	return first ? first : r ? r : restored;
}

int knob_state_restore_all_report(struct knob_state *s, const char *cgroup_base, knob_report_fn fn,
				  void *userdata, int *left_alone)
{
	return restore_all(s, cgroup_base, false, fn, userdata, left_alone);
}

int knob_state_restore_all(struct knob_state *s, const char *cgroup_base)
{
	return restore_all(s, cgroup_base, false, NULL, NULL, NULL);
}

int knob_state_restore_knobs(struct knob_state *s, const char *cgroup_base)
{
	return restore_all(s, cgroup_base, true, NULL, NULL, NULL);
}
