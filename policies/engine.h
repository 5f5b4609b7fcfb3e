/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The policy engine: pure decisions. Each tick, the latest window of every
 * service (its QoS figures and diagnosis) and the knobs' current values go
 * in; a list of actions comes out. No I/O, no clock: time is an argument.
 */
#ifndef TW_ENGINE_H
#define TW_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include "policies/action.h"
#include "policies/policy.h"
#include "sensing/diagnosis.h"
#include "sensing/hist.h"

/* What the controller knows of one service this tick. */
struct engine_input {
	bool have_window;	      /* a full window of the service's samples ended now */
	uint64_t requests;	      /* in the window */
	const struct hist *latency;   /* the window's latencies (NULL or empty: none);
				     * the engine takes the policy's percentile of it */
	const struct diagnosis *diag; /* NULL when no contention sensor */
	double knob[KNOB_MAX];	      /* current values (NAN when the knob is unavailable) */
	double cpu_usage;	      /* CPUs it used lately (1.0 = one; 0 = idle); NAN: unknown */
	double io_usage;	      /* bytes/s of block I/O it issued lately; NAN: unknown */
	bool no_idle;		      /* its cgroup has no cpu.idle (before 5.15): a CPU weight
				       * range reaching idle stops at 1 */
};

struct engine;

/*
 * The length of p's window (Window=) in ticks of period_ns, at least one:
 * the controller cuts its windows with it (feed.c).
 */
unsigned engine_window_ticks(const struct policy *p, uint64_t period_ns);

/* NULL on ENOMEM. The set must outlive the engine. */
struct engine *engine_new(const struct policy_set *set);
void engine_free(struct engine *e);

/*
 * One tick at time now_ns: in[i] for service i of the set. Fills acts
 * (capacity max; set->n * KNOB_MAX always suffices) with bounded,
 * rate-limited, explained actions; returns how many, or -ENOSPC (that
 * tick's decisions are lost). Also the safety rules:
 *  - never outside the policy's range; a knob without a range, or NAN, is
 *    never touched; a cut never raises, a give-back never lowers;
 *  - steps: a cut at most halves; a gift to a latency-critical service at
 *    most doubles (its frequency goes to the ceiling at once); a give-back
 *    or a frequency drop at most 10% of the range, by at least one unit;
 *  - hysteresis: cut below slack 0, hold from 0 to 0.2, relax above 0.2
 *    only after 3 such windows in a row;
 *  - cooldown per knob, in windows of the service that drove the change:
 *    1 before it moves again to protect (the effect must be seen in a whole
 *    window), 2 between give-backs, 4 before a give-back follows a cut;
 *  - back-off: a cut within 2 windows of a give-back of the same knob
 *    means the give-back hurt; give-backs then stop at the value before
 *    it for 8 windows, doubled for each give-back that hurts again (at most 256),
 *    forgotten once the knob is home;
 *  - a quota cut that did not help: at two verdicts in a row of the LC
 *    service that drove it (each within 2 of its windows), still a
 *    violation and a latency not down by a fifth, it is undone in one step
 *    (a protect: the reversal cooldown does not apply) to the value before
 *    the first cut not proven by two verdicts that helped, and no LC service
 *    drives a quota cut of that BE service for 8 of the driver's windows,
 *    doubled for each such cut again (at most 256), forgotten when one is
 *    proven; after the first such verdict no quota cut of it until the
 *    next, and a better next one lets the cut stand, unproven;
 *  - a latency-critical service is never throttled: its weights and quota
 *    only rise, and come back down no lower than their own first value;
 *  - no verdict, no action: a window with fewer than MinRequests requests
 *    (or no latency figure) decides nothing, and breaks a slack streak;
 *    engine_verdict() says why;
 *  - Weights=floor (a BE policy's weights_floor): its CPU and I/O weights
 *    go straight to their floor (a CPU weight range's "idle", 0, unless
 *    the input says no_idle: then 1) once any LC service has a verdict (a new
 *    instance's at its first tick while one has a current verdict), are
 *    not given back while one has, and go home in one step when none has
 *    had one for 3 windows; its quota follows the rules above;
 *  - an idle BE service, using under 0.5% of a CPU (cpu_usage known), is
 *    never quota-cut: a quota throttles only what runs;
 *  - a BE service whose CPU weight is idle (0) is quota-cut only on a
 *    violation whose diagnosis names the CPU (or with no diagnosis):
 *    "none" does not cut it;
 *  - a BE service is not the cause of what it did not do: no cpu.weight
 *    cut when it used under 0.5% of a CPU through the whole last window of
 *    the service that drives the cut, no io.weight cut when it issued under
 *    16 KiB/s of block I/O through it (each when known; unknown counts as
 *    busy, but not the ticks before the first known figure once that is idle);
 *  - between best-effort services: quota cuts due in the same tick for two
 *    or more of them (each one's use known) halve what they hold together
 *    (use, or quota if lower) and split it max-min fair by their home CPU
 *    weights: one holding less than its part is not cut, the others get
 *    their part, none less than half of its value;
 *  - own load beyond the CPU: a violation diagnosed as the LC service's own
 *    load (cpu or none), or with the cpu or nothing standing out and its
 *    own CPU time per second up 1.3x (diagnosis cpu_up), while the BE
 *    services use under 5% of a CPU
 *    together, none held there by a quota we cut, cuts nothing; its
 *    verdict begins "violation (own load)", and so do the verdicts of
 *    every violation after it (whatever the BE services use meanwhile)
 *    until a window meets the objective or the diagnosis names
 *    interference while the BE services use 5% of a CPU or more, in
 *    two violations in a row; at its first window of large slack after
 *    that, each BE knob cut since the last tick without a violation goes
 *    back in one step to its value then (weights held by Weights=floor
 *    stay there);
 *  - a knob reported by engine_knob_overridden() is left alone until this
 *    engine is freed (the controller's restart, or a reload).
 * Give-back returns what was taken and no more: a best-effort knob climbs
 * back to the value it had when first seen (clamped into its range).
 */
int engine_tick(struct engine *e, uint64_t now_ns, const struct engine_input *in,
		struct action *acts, size_t max);

/*
 * Service i is a new instance (its cgroup was replaced: a restart): forget
 * everything about it, as if the engine had just started. Its knobs' home
 * is the first value seen after this.
 */
void engine_service_reset(struct engine *e, int service);

/*
 * Between ticks, at time now_ns: service's cgroup has just appeared (a
 * unit restarted into a new cgroup; engine_service_reset() first when it
 * is a new instance). Only in->knob and in->no_idle are read: the knobs'
 * values now, the first of each its home. A Weights=floor service gets
 * the floor its next tick would give it (while a latency-critical service
 * has a current verdict) at once, so that what starts in it never runs at
 * its home weight beside a service that serves. Fills acts as
 * engine_tick(); returns how many, -ENOSPC or -EINVAL (no such service).
 */
int engine_service_appeared(struct engine *e, uint64_t now_ns, int service,
			    const struct engine_input *in, struct action *acts, size_t max);

/* The controller saw a knob differ from what it last wrote: hands off it. */
void engine_knob_overridden(struct engine *e, int service, enum action_knob k);

/* Slack of a latency-critical service in its last window (1 - p/target), NAN if none. */
double engine_slack(const struct engine *e, int service);

/*
 * The last verdict of a service in words, e.g. "violation: web p99 3.41ms >
 * target 2ms (slack -0.71); ..." or "no verdict: 12 requests in the window
 * < MinRequests 200". Valid until the next tick; NULL for a bad index.
 */
const char *engine_verdict(const struct engine *e, int service);

#endif
