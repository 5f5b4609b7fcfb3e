/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One service's life, as `run` (manager.c) and `replay` (replay.c) both
 * live it: its cgroup found, gone, back, or replaced by a new instance;
 * its window (feed.h); the knob values it last wrote and those someone
 * else changed since. Pure helpers over struct service: no I/O, no
 * logging; the caller finds the cgroup, reads the knobs and says what
 * happened.
 */
#ifndef TW_SERVICE_H
#define TW_SERVICE_H

#include <stdbool.h>
#include <stdint.h>
#include "controller/feed.h"
#include "policies/action.h"
#include "policies/engine.h"
#include "policies/policy.h"

struct service {
	const struct policy *p;
	int idx;		  /* its index in the policy set (and the engine) */
	uint64_t cgid;		  /* its cgroup's id; 0 while it does not exist */
	uint64_t last_cgid;	  /* the id it had before it vanished */
	struct feed feed;	  /* window and diagnosis */
	double written[KNOB_MAX]; /* last value we wrote (or, in dry-run, would have) */
	bool wrote[KNOB_MAX];
	bool overridden[KNOB_MAX]; /* changed by someone else after us: hands off */
};

/* Service idx of the set, policy p, ticks of period_ns. 0 or -ENOMEM. */
int service_init(struct service *s, const struct policy *p, int idx, uint64_t period_ns);
/* Frees what service_init() allocated; s itself is the caller's. */
void service_done(struct service *s);

/*
 * Its cgroup is not there this tick. True when it was until now (the
 * window under way is dropped; the id is kept to tell a return from a
 * new instance); false when it was already gone.
 */
bool service_gone(struct service *s);
/*
 * Its cgroup is there with id. When it replaces the one we knew (a
 * restart, a recreated cgroup: a new instance), what we wrote and saw is
 * forgotten, the window and diagnosis start afresh and so does the
 * engine's memory of it; *old (may be NULL) is the id it replaced.
 * 1 a new instance, 0 the same one (or the first), -ENOMEM (the diagnosis
 * could not start afresh; the rest did).
 */
int service_found(struct service *s, struct engine *e, uint64_t id, uint64_t *old);

/* The engine's input of a tick, before the service's knobs and samples fill it. */
void service_input_init(struct engine_input *in);
/*
 * Knob k read v now: *in is the value the engine starts from. A knob that
 * differs from what we last wrote was changed by someone else (not in
 * dry-run, where nothing was written): it is overridden from now on, the
 * engine is told, and *in is NAN, as it is for an overridden one. In
 * dry-run the engine sees what it would have written. 1 when found
 * overridden now (the caller says so and forgets its record), else 0.
 */
int service_knob(struct service *s, struct engine *e, enum action_knob k, double v, bool dry_run,
		 double *in);
/* We wrote v to knob k (or, in dry-run, would have). */
void service_wrote(struct service *s, enum action_knob k, double v);
/* Every knob was put back: nothing is ours any more. */
void service_restored(struct service *s);

/*
 * One tick of a present service (feed_tick()): q its request sample, c its
 * contention sample or NULL. True when a window ended (in->have_window).
 */
bool service_tick(struct service *s, uint64_t tick, const struct qos_sample *q,
		  const struct contention_sample *c, bool contention, double iv,
		  struct engine_input *in);

#endif
