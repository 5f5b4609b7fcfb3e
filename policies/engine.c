// SPDX-License-Identifier: GPL-2.0
/*
 * The default policy, Heracles-shaped (Lo et al., ISCA 2015), as pure
 * functions of the windows handed in and the engine's own memory.
 *
 * Slack of a latency-critical (LC) service: 1 - latency / target over its
 * window. Each window with a verdict falls in one of three bands:
 *
 *   slack < 0     violation: take from the best-effort (BE) services,
 *                 multiplicatively, and give to the LC service;
 *   0 .. 0.2      hold: nothing moves (and nothing is given back);
 *   > 0.2         large slack: after 3 such windows in a row, give back
 *                 what was taken step by step, and lower the frequency.
 *
 * A weight is cut by the square of the miss: to 2 (target/latency)^2 of
 * itself, at most a half (up to 2x over) and at least a sixteenth. A p99
 * 3x over its target cuts to 22% at once, where halving needed three
 * windows: the wake-up wait behind a hog falls faster than linearly with
 * its weight. It is given back by at most a quarter
 * of its value a step: the weight at which a hog starts to hurt is found
 * from below in small steps, not overshot by +10 of 100 at weight 7.
 * A quota, which costs throughput even when the service is idle, is cut
 * by half and given back by a tenth of its range.
 *
 * The gap between the bands is the hysteresis: a latency wandering around
 * its target cuts until it holds, and never gives back, so it cannot flap.
 * Frequency rises already below 0.05 of slack: it costs only energy.
 *
 * Which knob: weight first. Measured (docs/design.md) a quota cuts the
 * hog's average share but not the slice a waking request waits behind; a
 * low cpu.weight changes who runs first on wake-up and stays
 * work-conserving. So a CPU violation halves the BE's cpu.weight down to
 * its floor, and only when a whole window at the floor is still a
 * violation (or the weight cannot be used) halves its cpu.max; never the
 * cpu.max of an idle BE service, under BE_IDLE of a CPU (a quota
 * throttles only what runs), nor while BE work together holds under
 * BE_BUSY of it (what a quota could take is not what the LC misses).
 * Past the weight's floor a quota gives the LC service no CPU it could
 * not take, and its throttling can cost it latency: a quota cut whose
 * next window leaves its driver no better is undone, and quota cuts of
 * that BE service are held off, whoever drives them (judge_cut()). The diagnosis routes the cut:
 *
 *   none (no contention sensor), cpu, or nothing stands out
 *                      -> BE cpu.weight then cpu.max; LC cpu.weight up
 *   memory             -> BE cpu.max (weight cannot reach memory bandwidth
 *                         or cache pressure; a quota can)
 *   io                 -> BE io.weight; LC io.weight up
 *   lock, network, or the LC's own load (any resource)
 *                      -> no neighbour is throttled; an LC's own CPU load
 *                         may still get more cpu.max. But when its own
 *                         load grew, on the CPU or with nothing standing
 *                         out, while best-effort services use CPU
 *                         (BE_BUSY), the CPU it needs is theirs: the cpu
 *                         route as above.
 *   the LC's own load beyond the CPU (its own load, on the CPU or with
 *   nothing standing out, while BE work already holds under BE_BUSY of
 *   it, not held there by a quota of ours)
 *                      -> no neighbour is throttled, through every
 *                         violation until a window meets the objective
 *                         (overload()); then what the episode cut is given
 *                         back in one step (give_back_episode()). While
 *                         every LC service is so, Weights=floor yields the
 *                         CPU weight to its home (floor_yields()).
 *   frequency of the LC's CPUs rises whatever the diagnosis.
 *
 * Slice= (an LC's EEVDF slice, knob sched.slice): the first rung of the
 * cpu route. A violation routed to CPU gives the LC's threads their short
 * slice alone, and the rest of the cpu route (its weight, the BE cuts)
 * waits a window to see it; it costs the BE nothing. It is given back
 * last: in large slack, once every other knob is home (as of the tick's
 * start, so a window after the last give-back at the earliest).
 *
 * Between BE services: quotas due to be cut in the same tick are cut as
 * one, what they hold together halved and split max-min fair by their
 * home CPU weights (share_quota()): who pays follows what each uses, not
 * which neighbour runs beside it.
 *
 * Neighbours: every BE service of the set is a neighbour of every LC
 * service (the simplest reading; no topology is known here). Several LC
 * services vote: any violation cuts (the worst one is named in the
 * reason); a give-back needs every LC service that has a verdict to be in
 * large slack for 3 windows.
 *
 * Give-back returns what was taken and no more: a BE knob climbs back to
 * the value it had when the engine first saw it (clamped into the policy
 * range), quota first (it throttles even an idle CPU) and weight last (it
 * is work-conserving, hence cheap to keep low).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/defaults.h"
#include "policies/engine.h"
#include "policies/value.h"
#include "sensing/hist.h"

#define SLACK_CUT 0.0	      /* below: a violation */
#define SLACK_FREQ_UP 0.05    /* below: LC frequency up */
#define SLACK_GIVE 0.2	      /* above: large slack */
#define GIVE_WINDOWS 3	      /* large-slack windows in a row before relaxing */
#define CUT_FACTOR 0.5	      /* a cut at most halves... */
#define CUT_FACTOR_MIN 0.0625 /* ...a weight cut, 2 (target/latency)^2, at most /16 */
#define RAISE_FACTOR 2.0      /* a gift to an LC service at most doubles */
#define GIVE_FRACTION 0.1     /* a quota give-back at most +10% of the knob's span */
#define GIVE_WEIGHT 1.25      /* a weight give-back at most +25% of its value */
#define BE_BUSY 0.05	      /* CPUs a BE service must use to count as taking CPU */
#define BE_IDLE 0.005	      /* CPUs under which a BE service is idle: no quota cut */
#define BE_IO_IDLE 16384.0    /* bytes/s of block I/O under which a BE service does none */
/*
 * Violations in a row of the driver before a quota cut on the CPU route
 * (quota_due()). The weight at its floor is spent only once it failed
 * twice: one window over after windows within the objective at the floor
 * is an event the floor was not yet seen to fail (under Weights=floor,
 * where the weight sits at its floor before anything starts, a quota cut
 * came on the first). Measured: in runs 22-27 of the co-location
 * benchmark the default's only quota cuts in scenarios 1-4 were two such
 * cuts, one memcached window over at fio's start with the next within the
 * objective, and the cut's give-back (16 s) left best-effort work 79-81 %
 * of the CPU the services left idle in its repetition.
 */
#define QUOTA_RUN 2
/*
 * Cooldowns, in windows of the LC service whose verdict drove the change,
 * counted in time with a quarter window of tolerance: timers are late by
 * up to their accuracy, and a window that ends 1 ms early must still count.
 * Protect after anything: the next verdict must come from a window spent
 * entirely at the new value. Relax after relax: 2 windows. Relax after
 * protect (reversal): 4. Protect after relax is not delayed more than one
 * window: a give-back that hurt is undone as soon as it is seen.
 */
#define COOL_PROTECT 1
#define COOL_RELAX 2
#define COOL_REVERSE 4
/*
 * A give-back that hurt (a cut is the knob's next move, within the windows
 * before the next give-back was due) makes the value before it a ceiling:
 * later give-backs stop there for BACKOFF_FIRST windows, then probe again;
 * each probe that hurts again doubles the wait, up to BACKOFF_MAX. Without it a hog whose harm starts between two
 * give-back steps is given back into a violation every ~9 windows; with it,
 * a handful of times an hour. The ceiling goes when the knob is home.
 */
#define BACKOFF_FIRST 8
#define BACKOFF_MAX 256
/* A quota cut helped when its driver's latency fell to at most this much. */
#define CUT_HELPED 0.8
/*
 * A quota cut that left its driver no better (two windows in a row spent at
 * the new value still a violation, its latency not down by a fifth) is
 * undone at the second, with the cuts before it that two windows have not
 * proven, and no LC service drives a quota cut of that BE service for
 * BACKOFF_FIRST of its windows, doubled for each such cut again (at most
 * BACKOFF_MAX); a cut two windows prove forgets the doubling. Measured (nginx
 * beside stress-ng at cpu.shares 2, docs/design.md): past the weight's
 * floor, CFS bandwidth throttling gives the service no CPU it could not
 * already take, and the throttled group's return each period raised its
 * p99 from 74 us to 200-300 us; with no such rule the loop cut the hog to
 * its 5% floor and held it there through the whole of `make demo`'s hog.
 * Two windows, not one: on a 2-vCPU guest whose per-second p99 swings by
 * half, one window no better (770 -> 672 us) undid cuts that helped, and
 * scenario 2 of the co-location benchmark met 52 of 120 windows against 95
 * with the second window (docs/benchmarks.md).
 */
/*
 * Own load beyond the CPU ends on any other reading with best-effort work
 * holding CPU in this many violations in a row: their use is read per
 * tick, and one tick over BE_BUSY mid-overload (measured: a 17% -> 8% quota
 * cut after the own-load verdict in one of three runs of scenario 5) is
 * not a neighbour.
 */
#define OWN_INTF_WINDOWS 2
/*
 * Weights=floor yields to its own load beyond the CPU (floor_yields()) for
 * at most this many windows of the LC service at once; then the floor again
 * for a window, to see whether its own load is still beyond the CPU (the
 * rules that end it can miss a fall: a latency that drains to no lower than
 * it was at the floor).
 */
#define OWN_YIELD_MAX 30
/*
 * Yielded, a window whose latency is under this share of the lowest of the
 * yielded windows before it ends the episode at once: the queue shrank
 * while best-effort work kept its share, so its load fell. Its backlog still
 * arrives as load (open-loop clients send what queued in them), so the
 * rate does not say it, and the yield that drains it slower holds itself
 * up. Measured in scenario 5 of docs/benchmarks.md: 16-26 ms a window
 * while yielded, 4.1-4.3 ms from the first window after the load fell,
 * read as its own load until the backlog drained 4-5 s later (static was
 * back within a second). The lowest, not the window before: a yielded
 * window can spike, and the ordinary one after it is then under half of
 * it (run 24 there: the client's p99 92.9 ms in one second of a step at
 * about 20 ms, the daemon's window after it 20.4 ms; compared with the
 * window before, the floor came back mid-step).
 */
#define OWN_FELL 0.5
/*
 * Yielded, best-effort work is steered to keep this much of the CPU it used
 * before the overload (engine.be_calm): its CPU weight from home up to the
 * top of its range (never above: that is the user's say), up by the
 * weight's odds, at most YIELD_STEP times per window, never down while the
 * overload lasts (yield_share()). At home, equal weights split the CPU in
 * half whatever the best-effort work had before: measured in scenario 5 of
 * docs/benchmarks.md, the hog kept 75-83 % of it.
 */
#define YIELD_KEEP 0.9
#define YIELD_STEP 2.0
#define YIELD_SHARE_MAX 0.95 /* of what LC and BE use together: the LC service keeps some */
#define YIELD_BY_MAX 100.0   /* times home: a weight of 100 up to the cgroup's 10000 */
/* A verdict older than this many windows (the cgroup vanished?) no longer votes. */
#define VERDICT_WINDOWS 3

enum band { BAND_NONE, BAND_VIOLATION, BAND_HOLD, BAND_SLACK };
/* DIR_UNDO: a quota cut taken back; for cooldowns, a protect. */
enum dir { DIR_NONE, DIR_PROTECT, DIR_RELAX, DIR_UNDO };

/* Routes of a violation, from the diagnosis. */
enum {
	ROUTE_CPU = 1 << 0,	/* BE cpu.weight, then cpu.max; LC cpu.weight up */
	ROUTE_QUOTA = 1 << 1,	/* BE cpu.max directly */
	ROUTE_IO = 1 << 2,	/* BE io.weight; LC io.weight up */
	ROUTE_OWN_CPU = 1 << 3, /* LC cpu.max up */
	ROUTE_CPU_NAMED =
		1 << 4, /* the diagnosis named the CPU (or there is none): an idle BE's cpu.max */
};

struct knob_mem {
	bool seen;	 /* a value was seen since the engine started */
	bool touched;	 /* we changed it: a give-back may return it */
	bool hands_off;	 /* someone else changed it */
	double home;	 /* first value seen, clamped into the policy range */
	double max_seen; /* ceiling of an unbounded frequency range */
	double scale;	 /* finite top of an unlimited quota's steps, NAN until cut */
	enum dir last_dir;
	uint64_t last_ns, last_window_ns;
	double before;	  /* value before the last give-back */
	double ceiling;	  /* give-backs stop at this value (the last that held); NAN: none */
	unsigned backoff; /* windows the ceiling holds, doubled per relapse */
	uint64_t ceiling_until_ns;
	double now;  /* value this tick (NAN: unavailable or hands off) */
	double calm; /* value at the end of the last tick without a violation (NAN: none yet) */
	/* The last quota cut, until its driver's next verdicts judge it (cut_driver -1: none). */
	int cut_driver;
	double cut_from, cut_to; /* the value before and after it */
	double cut_latency;	 /* the driver's latency in the window that drove it, ns */
	uint64_t cut_ns;
	uint64_t judged_ns;   /* its first verdict helped (0: none yet); the second is due */
	uint64_t doubt_ns;    /* a verdict left it no better (0: none yet): the next one decides */
	double doubt_latency; /* the driver's latency in that window, ns */
	bool chain;	      /* made on the verdict that helped the cut before it, once */
	/* What an undo returns to: the value before the first quota cut not yet proven (NAN: none). */
	double proven;
};

/* A quota cut of one BE service that one LC service drove did not help: all its quota cuts held off. */
struct cut_hold {
	uint64_t until_ns;
	unsigned backoff; /* windows of the last hold, doubled per cut that did not help */
};

struct service_mem {
	enum band band;
	unsigned streak;   /* large-slack windows in a row */
	unsigned viol_run; /* violations in a row */
	bool fresh;	   /* a verdict this tick */
	bool slice_now; /* its short slice was given this tick: the rest of the CPU route waits */
	bool rest_home; /* at the tick's start, every knob but its slice was home */
	bool overloaded; /* its own load is beyond the CPU: no BE cut until a window meets the objective */
	bool no_idle;	       /* its CPU weight cannot be idle here (engine_input.no_idle) */
	bool own_over;	       /* it was, and a window met the objective: undo the episode's cuts */
	unsigned intf_windows; /* violations in a row read as interference while overloaded */
	unsigned own_windows;  /* windows of the episode of its own load beyond the CPU so far */
	double own_lat;	   /* its latency (ns) in the last window that found it so at the floor */
	double yield_lat;  /* its lowest latency (ns) in the yielded windows before (0: none) */
	char own_end[128]; /* why the episode ended in this window ("" if it did not) */
	unsigned route;
	double slack;
	double latency; /* the percentile of its last window with a verdict, ns */
	double usage;
	double io_usage;
	bool cpu_known;	      /* its CPU use has been known in a tick */
	bool io_known;	      /* its block I/O has been known in a tick */
	uint64_t cpu_busy_ns; /* the last tick it used CPU (or its use was unknown) */
	uint64_t io_busy_ns;  /* the last tick it did block I/O (or that was unknown) */
	uint64_t verdict_ns;  /* when the last verdict was given */
	double quota_part; /* this tick's part of the best-effort share (NAN: none; INFINITY: keeps its use) */
	char share[80]; /* how quota_part was reached, for the reason */
	char head[112]; /* "web p99 3.41ms > target 2ms (slack -0.71)" */
	char diag[128]; /* "diagnosis cpu/interference (runq_delay_us.p99 ×9.3)" */
	char verdict[384];
	struct knob_mem k[KNOB_MAX];
};

struct engine {
	const struct policy_set *set;
	struct service_mem *s;
	struct cut_hold *hold; /* [be * n + lc] */
	double be_calm;	       /* BE CPU use (CPUs) in calm windows, averaged; NAN: none yet */
	double yield_by;       /* Weights=floor yielded: home weights times this (yield_share()) */
};

struct tick {
	struct engine *e;
	uint64_t now;
	struct action *acts;
	size_t max, n;
	bool overflow;
};

struct engine *engine_new(const struct policy_set *set)
{
	struct engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->set = set;
	e->s = calloc(set->n ? set->n : 1, sizeof(*e->s));
	e->hold = calloc(set->n ? set->n * set->n : 1, sizeof(*e->hold));
	if (!e->s || !e->hold) {
		free(e->s);
		free(e->hold);
		free(e);
		return NULL;
	}
	e->be_calm = NAN;
	e->yield_by = 1;
	for (size_t i = 0; i < set->n; i++)
		engine_service_reset(e, i);
	return e;
}

void engine_service_reset(struct engine *e, int service)
{
	struct service_mem *s = &e->s[service];

	memset(s, 0, sizeof(*s));
	/* Its holds, either side: a new instance has proved nothing yet. */
	for (size_t j = 0; j < e->set->n; j++) {
		e->hold[service * e->set->n + j] = (struct cut_hold){ 0 };
		e->hold[j * e->set->n + service] = (struct cut_hold){ 0 };
		if (e->s[j].k[KNOB_CPU_QUOTA].cut_driver == service)
			e->s[j].k[KNOB_CPU_QUOTA].cut_driver = -1;
	}
	snprintf(s->verdict, sizeof(s->verdict), "%s",
		 e->set->v[service].klass == POLICY_LATENCY_CRITICAL ?
			 "no verdict: no complete window yet" :
			 "best-effort: no objective");
	s->slack = NAN;
	for (int k = 0; k < KNOB_MAX; k++) {
		s->k[k].scale = NAN;
		s->k[k].ceiling = NAN;
		s->k[k].calm = NAN;
		s->k[k].cut_driver = -1;
		s->k[k].proven = NAN;
	}
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	free(e->s);
	free(e->hold);
	free(e);
}

void engine_knob_overridden(struct engine *e, int service, enum action_knob k)
{
	if (!e || service < 0 || (size_t)service >= e->set->n || k >= KNOB_MAX)
		return;
	e->s[service].k[k].hands_off = true;
}

double engine_slack(const struct engine *e, int service)
{
	if (!e || service < 0 || (size_t)service >= e->set->n)
		return NAN;
	return e->s[service].slack;
}

const char *engine_verdict(const struct engine *e, int service)
{
	if (!e || service < 0 || (size_t)service >= e->set->n)
		return NULL;
	return e->s[service].verdict;
}

/* Append to buf (always terminated; silently truncated). */
static void __attribute__((format(printf, 3, 4)))
append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* Reasons show durations to three significant digits. */
static void fmt_ns(char *buf, size_t len, double ns)
{
	value_format_ns(buf, len, ns, VALUE_NS_SIGNIFICANT, 3);
}

/* Reasons show quotas to four significant digits: small cuts stay visible. */
static void fmt_value(char *buf, size_t len, enum action_knob k, double v)
{
	action_format_value(buf, len, k, v, 4);
}

/* Smallest step worth writing: one unit of the knob's file. */
static double knob_unit(enum action_knob k)
{
	return k == KNOB_CPU_QUOTA ? 0.001 : 1;
}

/*
 * Round v to the knob's unit, towards from: rounding never makes a step
 * larger than the rule allows (a cut never more than halves).
 */
static double round_toward(enum action_knob k, double v, double from)
{
	double u = knob_unit(k);

	if (!isfinite(v))
		return v;
	return (v < from ? ceil(v / u - 1e-6) : floor(v / u + 1e-6)) * u;
}

static double clamp_range(const struct policy_range *r, double v)
{
	return fmin(fmax(v, r->lo), r->hi);
}

/*
 * The floor of a knob's range: its low end, except a CPU weight range
 * that reaches "idle" (0) where the cgroup cannot be idle: 1.
 */
static double floor_of(const struct engine *e, size_t i, enum action_knob k)
{
	const struct policy_range *r = policy_range_of(&e->set->v[i], k);

	return k == KNOB_CPU_WEIGHT && r->lo < 1 && e->s[i].no_idle ? 1 : r->lo;
}

/* Is the knob ours to move this tick? */
static bool movable(const struct engine *e, size_t i, enum action_knob k)
{
	const struct policy_range *r = policy_range_of(&e->set->v[i], k);
	const struct knob_mem *m;

	/* No range: not a knob kind (k >= KNOB_MAX), so k must not index k[]. */
	if (!r || !r->set)
		return false;
	m = &e->s[i].k[k];
	return !m->hands_off && !isnan(m->now);
}

static bool cooled(const struct knob_mem *m, enum dir d, uint64_t now)
{
	unsigned n;

	if (m->last_dir == DIR_NONE)
		return true;
	if (d == DIR_PROTECT)
		n = COOL_PROTECT;
	else
		n = m->last_dir == DIR_RELAX ? COOL_RELAX : COOL_REVERSE;
	return now + m->last_window_ns / 4 >= m->last_ns + n * m->last_window_ns;
}

static uint64_t window_of(const struct policy *p)
{
	return p->window_ns ? p->window_ns : TW_ENGINE_WINDOW_NS;
}

unsigned engine_window_ticks(const struct policy *p, uint64_t period_ns)
{
	double period = period_ns ? (double)period_ns : 1e9;
	unsigned n = (unsigned)ceil(window_of(p) / period);

	return n ? n : 1;
}

/*
 * One decided change. The reason is the driver's verdict, its diagnosis
 * when with_diag, and the rule. Nothing is remembered when acts is full.
 */
static void __attribute__((format(printf, 8, 9)))
change(struct tick *t, size_t svc, enum action_knob k, double new, enum dir d, size_t driver,
       bool with_diag, const char *fmt, ...)
{
	struct service_mem *ds = &t->e->s[driver];
	struct knob_mem *m = &t->e->s[svc].k[k];
	struct action *a;
	char o[24], n[24];
	va_list ap;
	size_t used;
	bool own;

	if (t->n >= t->max) {
		t->overflow = true;
		return;
	}
	own = t->e->set->v[svc].klass == POLICY_LATENCY_CRITICAL; /* its own knob */
	a = &t->acts[t->n++];
	a->service = (int)svc;
	a->knob = k;
	a->old_value = m->now;
	a->new_value = new;
	fmt_value(o, sizeof(o), k, m->now);
	fmt_value(n, sizeof(n), k, new);
	a->reason[0] = '\0';
	if (ds->head[0])
		append(a->reason, sizeof(a->reason), "%s; ", ds->head);
	if (with_diag)
		append(a->reason, sizeof(a->reason), "%s; ", ds->diag);
	append(a->reason, sizeof(a->reason), "%s %s %s %s -> %s (",
	       d == DIR_UNDO	? "undo" :
	       d == DIR_PROTECT ? (own ? "raise" : "cut") :
				  (own ? "lower" : "give back"),
	       t->e->set->v[svc].name, action_knob_name(k), o, n);
	used = strlen(a->reason);
	va_start(ap, fmt);
	vsnprintf(a->reason + used, sizeof(a->reason) - used, fmt, ap);
	va_end(ap);
	append(a->reason, sizeof(a->reason), ")");
	if (k == KNOB_CPU_QUOTA && new > m->now) {
		/* Given back or undone: no cut left to judge or to undo. */
		m->cut_driver = -1;
		m->proven = NAN;
	}
	m->now = new;
	m->touched = true;
	m->last_dir = d == DIR_UNDO ? DIR_PROTECT : d;
	m->last_ns = t->now;
	m->last_window_ns = window_of(&t->e->set->v[driver]);
}

/* The knobs' values now; the first value seen is home. */
static void observe_knobs(struct engine *e, size_t i, const struct engine_input *in)
{
	const struct policy *p = &e->set->v[i];
	struct service_mem *s = &e->s[i];

	s->no_idle = in->no_idle;
	for (int k = 0; k < KNOB_MAX; k++) {
		const struct policy_range *r = policy_range_of(p, k);
		struct knob_mem *m = &s->k[k];
		double v = in->knob[k];

		m->now = m->hands_off ? NAN : v;
		if (isnan(v) || m->hands_off)
			continue;
		if (!m->seen) {
			m->seen = true;
			/* The slice's home is the threads' own (0), never a range's bound. */
			m->home = r->set && k != KNOB_SCHED_SLICE ? clamp_range(r, v) : v;
			m->max_seen = v;
		}
		m->max_seen = fmax(m->max_seen, v);
	}
}

/* Remember what the controller sees. */
static void observe(struct engine *e, size_t i, const struct engine_input *in, uint64_t now)
{
	struct service_mem *s = &e->s[i];

	s->usage = in->cpu_usage >= 0 ? in->cpu_usage : NAN;
	s->io_usage = in->io_usage >= 0 ? in->io_usage : NAN;
	/*
	 * Unknown use counts as busy (no sensor: cut as before), except the
	 * ticks before the first known figure (a sensor's first sample has
	 * nothing to diff against): once known and idle, they are forgotten.
	 */
	if (!s->cpu_known && !isnan(s->usage) && s->usage < BE_IDLE)
		s->cpu_busy_ns = 0;
	if (!s->io_known && !isnan(s->io_usage) && s->io_usage < BE_IO_IDLE)
		s->io_busy_ns = 0;
	s->cpu_known |= !isnan(s->usage);
	s->io_known |= !isnan(s->io_usage);
	if (!(s->usage < BE_IDLE))
		s->cpu_busy_ns = now;
	if (!(s->io_usage < BE_IO_IDLE))
		s->io_busy_ns = now;
	observe_knobs(e, i, in);
}

static void describe_diag(struct service_mem *s, const struct diagnosis *d)
{
	s->diag[0] = '\0';
	if (!d) {
		append(s->diag, sizeof(s->diag), "no diagnosis: CPU knobs on slack alone");
		return;
	}
	append(s->diag, sizeof(s->diag), "diagnosis %s/%s", diag_dominant_name(d->dominant),
	       diag_cause_name(d->cause));
	if (!d->n_evidence || !d->evidence[0].signal)
		return;
	append(s->diag, sizeof(s->diag), " (%s \u00d7%.1f", d->evidence[0].signal,
	       d->evidence[0].ratio);
	/*
	 * A phase comes first (where the time went); the strongest signal that
	 * stands out after it (the named resource's first, add_evidence()) says
	 * why, or its absence that the phase named the resource by itself.
	 */
	if (!strncmp(d->evidence[0].signal, "phase.", 6)) {
		for (size_t j = 1; j < d->n_evidence; j++) {
			const struct diag_evidence *v = &d->evidence[j];

			if (v->signal && strncmp(v->signal, "phase.", 6)) {
				append(s->diag, sizeof(s->diag), ", %s \u00d7%.1f", v->signal,
				       v->ratio);
				break;
			}
		}
	}
	append(s->diag, sizeof(s->diag), ")");
}

/* Which knobs a violation may move; *why says why neighbours are spared. */
static unsigned route_of(const struct diagnosis *d, const char **why)
{
	*why = NULL;
	if (!d)
		return ROUTE_CPU | ROUTE_OWN_CPU | ROUTE_CPU_NAMED;
	if (d->cause == DIAG_CAUSE_LOAD) {
		*why = "the service's own load: neighbours not throttled";
		return d->dominant == DIAG_CPU ? ROUTE_OWN_CPU : 0;
	}
	switch (d->dominant) {
	case DIAG_NONE:
		return ROUTE_CPU | ROUTE_OWN_CPU;
	case DIAG_CPU:
		return ROUTE_CPU | ROUTE_OWN_CPU | ROUTE_CPU_NAMED;
	case DIAG_IO:
		return ROUTE_IO;
	case DIAG_MEMORY:
		return ROUTE_QUOTA;
	case DIAG_LOCK:
		*why = "lock contention: neighbours not throttled";
		return 0;
	case DIAG_NETWORK:
		*why = "network: no knob for it, neighbours not throttled";
		return 0;
	}
	return 0;
}

/* No verdict: no band, and the runs of windows in a band start again. */
static void no_band(struct service_mem *s)
{
	s->band = BAND_NONE;
	s->streak = 0;
	s->viol_run = 0;
	s->slack = NAN;
}

/* Forget the band of an LC service that has had no window for a while. */
static void expire(struct engine *e, size_t i, uint64_t now)
{
	const struct policy *p = &e->set->v[i];
	struct service_mem *s = &e->s[i];

	if (s->band == BAND_NONE || now < s->verdict_ns + VERDICT_WINDOWS * window_of(p))
		return;
	no_band(s);
	s->overloaded = false;
	snprintf(s->verdict, sizeof(s->verdict), "no verdict: no window for %u windows",
		 VERDICT_WINDOWS);
}

/* CPUs the services of a class used lately (0 when unknown). */
static double class_cpu_use(const struct engine *e, enum policy_class k)
{
	double sum = 0;

	for (size_t b = 0; b < e->set->n; b++)
		if (e->set->v[b].klass == k && !isnan(e->s[b].usage))
			sum += e->s[b].usage;
	return sum;
}

/* CPUs the best-effort services used lately (0 when unknown). */
static double be_cpu_use(const struct engine *e)
{
	return class_cpu_use(e, POLICY_BEST_EFFORT);
}

/*
 * Do the best-effort services hold no CPU the LC service could take? Their
 * use together is under BE_BUSY (each one's known), and none is held there
 * by a quota of ours (one using at least half of a quota we cut is held by
 * it: what it would use without us is not known). With their weights at
 * the floor, or the LC's load simply crowding them out, this is what an LC
 * service that has the whole CPU and still misses leaves them.
 */
static bool be_squeezed(const struct engine *e)
{
	for (size_t b = 0; b < e->set->n; b++) {
		const struct service_mem *s = &e->s[b];
		const struct knob_mem *q = &s->k[KNOB_CPU_QUOTA];

		if (e->set->v[b].klass != POLICY_BEST_EFFORT)
			continue;
		if (isnan(s->usage))
			return false;
		if (q->touched && q->now < q->home && s->usage >= 0.5 * q->now)
			return false;
	}
	return be_cpu_use(e) < BE_BUSY;
}

static bool floor_yields(const struct engine *e);
static bool held(const struct engine *e, size_t b, enum action_knob k);

/* Does a best-effort service hold Weights=floor (which an overload yields: floor_yields())? */
static bool any_floor(const struct engine *e)
{
	for (size_t b = 0; b < e->set->n; b++)
		if (e->set->v[b].klass == POLICY_BEST_EFFORT && e->set->v[b].weights_floor)
			return true;
	return false;
}

/* How the overload left Weights=floor, for the verdict: at home, or above it (yield_share()). */
static const char *floor_note(const struct engine *e)
{
	bool above = false;

	if (!any_floor(e))
		return "";
	for (size_t b = 0; b < e->set->n; b++) {
		const struct knob_mem *m = &e->s[b].k[KNOB_CPU_WEIGHT];

		above |= held(e, b, KNOB_CPU_WEIGHT) && m->touched && m->now > m->home;
	}
	return above ? ", Weights=floor above home to keep best-effort work's CPU" :
		       ", Weights=floor at home";
}

/*
 * Its own load beyond what the CPU gives: a violation of its own load (on
 * the CPU, or nothing standing out) while the best-effort services already
 * hold next to nothing of it (be_squeezed()). Taking the rest from them
 * cannot meet the objective, so nothing is taken: the state holds, and
 * spares them, through every violation that follows, whatever they use
 * meanwhile (the backlog draining after the load falls gives them CPU
 * again: a cut then would be for nothing too), until a window meets the
 * objective or the diagnosis names anything but its own load while they
 * hold CPU, in OWN_INTF_WINDOWS violations in a row (its load fell back,
 * or a neighbour's doing). Weights=floor yields while this lasts
 * (floor_yields()); then it ends only once its load is down as well, or
 * once its latency falls under half of its lowest yielded window (OWN_FELL).
 * Fills note; true while overloaded.
 */
static bool overload(struct engine *e, size_t i, const struct diagnosis *d, char *note, size_t len)
{
	struct service_mem *s = &e->s[i];
	bool own = d && d->cause == DIAG_CAUSE_LOAD &&
		   (d->dominant == DIAG_CPU || d->dominant == DIAG_NONE);
	/*
	 * Or its own CPU time per second up 1.3x on its baseline, the CPU the
	 * resource: with best-effort work squeezed, no neighbour's doing. A
	 * step of costlier requests queues behind itself before what it serves
	 * rises 1.3x, and the diagnosis reads that queueing as cpu/interference
	 * or cpu/unknown from the step's first window to its end (measured:
	 * co-location scenario 5, 2 repetitions of 4: no verdict of own load
	 * and no decision through the 15-s step, the floor held, the hog at 1-2
	 * % of what it did alone). Entry only: that reading ends it as before.
	 */
	bool own_cpu = d && d->cpu_up && (d->dominant == DIAG_CPU || d->dominant == DIAG_NONE);
	bool squeezed = (own || own_cpu) && be_squeezed(e);
	bool yields;

	s->own_end[0] = '\0';
	if (s->band != BAND_VIOLATION) {
		/* Back within the CPU: what the episode cut goes back (give_back_episode()). */
		if (s->overloaded)
			snprintf(s->own_end, sizeof(s->own_end), "a window within the objective");
		s->own_over |= s->overloaded;
		s->overloaded = false;
		s->intf_windows = 0;
		return false;
	}
	s->own_over = false;
	/*
	 * A window that is not its own load ends it only while they hold CPU:
	 * with them squeezed, interference is its own backlog queueing at a
	 * served rate that no longer grows (measured: cpu/interference,
	 * queueing x62, mid-step). With them holding CPU any other reading
	 * counts: its load fell back, or a neighbour's doing. But the CPU of
	 * services under Weights=floor is what the overload yielded them
	 * (floor_yields()): the queueing they cause is ours, and counts only
	 * once its load is down, read as its request rate no longer up on its
	 * baseline and its latency below what the overload showed at the
	 * floor (own_lat: its backlog draining). Yielded, it serves less, so
	 * the rate alone drops with the CPU given away. Measured without
	 * either: cpu/interference (queueing x21-35, p99 14-15 ms against 6-9
	 * ms at the floor) two windows after each yield, the floor back, own
	 * load again: the hog at its floor for 4 windows of every 6; after
	 * the load fell, p99 3.5 ms.
	 */
	if (s->overloaded && !own && !be_squeezed(e) &&
	    !(any_floor(e) && ((d && d->load_up) || !(s->latency < s->own_lat)))) {
		/* Two windows in a row: one tick of theirs over BE_BUSY is not a neighbour. */
		if (++s->intf_windows >= OWN_INTF_WINDOWS) {
			s->overloaded = false;
			snprintf(
				s->own_end, sizeof(s->own_end),
				"%d windows in a row read as not its own load, best-effort work holding CPU%s",
				OWN_INTF_WINDOWS, any_floor(e) ? ", its load down" : "");
		}
	} else {
		s->intf_windows = 0;
		if (squeezed) {
			s->overloaded = true;
			s->own_lat = s->latency;
		}
	}
	/*
	 * Yielded OWN_YIELD_MAX windows: the floor again, to see whether it
	 * still is. Counted only while the floor yields: with another LC
	 * service within reach it is held, and the usual rules end the episode.
	 */
	yields = s->overloaded && any_floor(e) && floor_yields(e);
	if (yields && ++s->own_windows > OWN_YIELD_MAX) {
		s->overloaded = false;
		snprintf(s->own_end, sizeof(s->own_end),
			 "%d windows yielded, a window at the floor to see whether it still is",
			 OWN_YIELD_MAX);
	}
	/*
	 * Yielded (best-effort work no longer squeezed), its latency fell
	 * under OWN_FELL of the lowest of the yielded windows before: its
	 * load fell, and the floor comes back for its backlog to drain.
	 */
	if (yields && s->overloaded && !squeezed) {
		if (s->latency < OWN_FELL * s->yield_lat) {
			char now[24], low[24];

			fmt_ns(now, sizeof(now), s->latency);
			fmt_ns(low, sizeof(low), s->yield_lat);
			s->overloaded = false;
			snprintf(s->own_end, sizeof(s->own_end),
				 "its load fell (%s, under half the lowest yielded window's %s)",
				 now, low);
		}
		if (!(s->yield_lat > 0) || s->latency < s->yield_lat)
			s->yield_lat = s->latency;
	} else {
		s->yield_lat = 0;
	}
	if (!s->overloaded) {
		s->own_windows = 0;
		return false;
	}
	if (squeezed)
		snprintf(
			note, len,
			"its own load is beyond what the CPU gives%s: best-effort work holds %.0f%% of a CPU, taking that cannot meet the objective; not cut while this lasts%s",
			own ? "" : " (its own CPU time up 1.3x or more)", be_cpu_use(e) * 100,
			floor_note(e));
	else
		snprintf(
			note, len,
			"its own load is still beyond what the CPU gave it: best-effort work (%.0f%% of a CPU) not cut until a window meets the objective%s",
			be_cpu_use(e) * 100, floor_note(e));
	return true;
}

/* Does every best-effort service that runs sit at the idle CPU weight? */
static bool be_all_idle(const struct engine *e)
{
	for (size_t b = 0; b < e->set->n; b++)
		if (e->set->v[b].klass == POLICY_BEST_EFFORT && !(e->s[b].usage < BE_IDLE) &&
		    !(e->s[b].k[KNOB_CPU_WEIGHT].now == 0))
			return false;
	return true;
}

/* The verdict of an LC service's window that ended now. */
static void judge(struct engine *e, size_t i, const struct engine_input *in, uint64_t now)
{
	const struct policy *p = &e->set->v[i];
	struct service_mem *s = &e->s[i];
	char lat[24], tgt[24], pct[16], be_note[256];
	const char *spare;
	double latency;

	s->fresh = false;
	s->slice_now = false;
	if (p->klass != POLICY_LATENCY_CRITICAL)
		return;
	if (!in->have_window) {
		expire(e, i, now);
		return;
	}
	s->verdict[0] = '\0';
	if (!in->requests || in->requests < p->min_requests) {
		no_band(s);
		append(s->verdict, sizeof(s->verdict),
		       "no verdict: %llu requests in the window < MinRequests %llu%s",
		       (unsigned long long)in->requests, (unsigned long long)p->min_requests,
		       s->overloaded ? "; own load over" : "");
		s->overloaded = false;
		return;
	}
	/* Nearest rank, a bucket's midpoint: within 3.125% of the true figure. */
	latency = in->latency ? hist_percentile(in->latency, p->percentile) : -1;
	if (!(latency >= 0) || !p->target_ns) {
		no_band(s);
		append(s->verdict, sizeof(s->verdict),
		       "no verdict: no latency figure in the window%s",
		       s->overloaded ? "; own load over" : "");
		s->overloaded = false;
		return;
	}
	s->fresh = true;
	s->verdict_ns = now;
	s->latency = latency;
	s->slack = 1 - latency / (double)p->target_ns;
	s->band = s->slack < SLACK_CUT	? BAND_VIOLATION :
		  s->slack > SLACK_GIVE ? BAND_SLACK :
					  BAND_HOLD;
	s->streak = s->band == BAND_SLACK ? s->streak + 1 : 0;
	s->viol_run = s->band == BAND_VIOLATION ? s->viol_run + 1 : 0;
	s->route = route_of(in->diag, &spare);
	describe_diag(s, in->diag);
	if (overload(e, i, in->diag, be_note, sizeof(be_note))) {
		/* No neighbour is throttled; its own quota may still rise. */
		s->route &= ROUTE_OWN_CPU;
		spare = be_note;
	} else if (in->diag && in->diag->cause == DIAG_CAUSE_LOAD &&
		   (in->diag->dominant == DIAG_CPU || in->diag->dominant == DIAG_NONE)) {
		double busy = be_cpu_use(e);

		if (busy >= BE_BUSY) {
			/* Its own load grew, but the CPU it now needs is in use by
			 * best-effort work: that is what they must yield. With no
			 * resource standing out, the CPU they use is still the one
			 * thing a neighbour holds that the service could want. At
			 * the idle weight they hold only what it leaves, and no
			 * cut follows on its own load (quota_due()): said so. */
			s->route |= ROUTE_CPU;
			snprintf(
				be_note, sizeof(be_note),
				"its own load grew%s and best-effort services use %.0f%% of a CPU: %s",
				in->diag->dominant == DIAG_NONE ? ", nothing stands out," : "",
				busy * 100,
				be_all_idle(e) ?
					"at the idle weight, only what it leaves; not cut for it" :
					"taken from them");
			spare = be_note;
		}
	}
	fmt_ns(lat, sizeof(lat), latency);
	fmt_ns(tgt, sizeof(tgt), p->target_ns);
	snprintf(pct, sizeof(pct), "p%g", p->percentile * 100);
	s->head[0] = '\0';
	append(s->head, sizeof(s->head), "%s %s %s %s target %s (slack %.2f", p->name, pct, lat,
	       s->slack < 0 ? ">" : "<=", tgt, s->slack);
	if (s->band == BAND_SLACK)
		append(s->head, sizeof(s->head), ", %u window%s above %.2f", s->streak,
		       s->streak == 1 ? "" : "s", SLACK_GIVE);
	append(s->head, sizeof(s->head), ")");
	append(s->verdict, sizeof(s->verdict), "%s: %s",
	       s->overloaded		 ? "violation (own load)" :
	       s->band == BAND_VIOLATION ? "violation" :
	       s->band == BAND_HOLD	 ? "hold" :
					   "large slack",
	       s->head);
	/* Before the diagnosis: a long verdict is cut at its end. */
	if (s->own_end[0])
		append(s->verdict, sizeof(s->verdict), "; own load over: %s", s->own_end);
	if (s->band == BAND_VIOLATION) {
		append(s->verdict, sizeof(s->verdict), "; %s", s->diag);
		if (spare)
			append(s->verdict, sizeof(s->verdict), "; %s", spare);
	}
}

/* The knobs Weights=floor holds: the work-conserving ones. */
static const enum action_knob floor_knobs[] = { KNOB_CPU_WEIGHT, KNOB_IO_WEIGHT };
#define N_FLOOR_KNOBS (sizeof(floor_knobs) / sizeof(*floor_knobs))

/* Is k one of a Weights=floor service's weights, held while LC services serve? */
static bool held(const struct engine *e, size_t b, enum action_knob k)
{
	const struct policy *p = &e->set->v[b];

	if (!p->weights_floor || (k == KNOB_IO_WEIGHT && !p->weights_floor_io))
		return false;
	for (size_t j = 0; j < N_FLOOR_KNOBS; j++)
		if (floor_knobs[j] == k)
			return true;
	return false;
}

/*
 * Weights=floor: while a latency-critical service serves (driver: one
 * with a verdict this tick), the BE service's weights sit at the floor of
 * their ranges before anything goes wrong. A weight decides who runs
 * first when both are runnable, not how much each gets when the other
 * is idle, so the floor costs the BE service nothing while the LC one
 * leaves room; and the window in which a neighbour's burst starts, which
 * a reactive cut can only follow, is protected too.
 */
static void hold_floor(struct tick *t, size_t b, size_t driver, bool appeared)
{
	for (size_t j = 0; j < N_FLOOR_KNOBS; j++) {
		enum action_knob k = floor_knobs[j];
		double lo;
		struct knob_mem *m = &t->e->s[b].k[k];

		if (!held(t->e, b, k) || !movable(t->e, b, k))
			continue;
		lo = floor_of(t->e, b, k);
		if (!(m->now > lo) || !cooled(m, DIR_PROTECT, t->now))
			continue;
		change(t, b, k, lo, DIR_PROTECT, driver, false, "Weights=floor%s: %s",
		       appeared ? ", its new cgroup just made" : "",
		       lo == 0 && k == KNOB_CPU_WEIGHT ?
			       "a latency-critical service serves; idle, its CPU goes to whoever wakes, so the floor costs nothing while there is room" :
			       "a latency-critical service serves; a weight only orders wake-ups, so its floor costs nothing while there is room");
	}
}

/*
 * Does Weights=floor yield the CPU weight? While every LC service with a
 * current verdict is beyond the CPU on its own load (overload()): the floor
 * would give it the best-effort work's CPU, and that cannot meet its
 * objective either, so it would only strangle them for nothing (measured,
 * scenario 5 of docs/benchmarks.md: the hog kept 1-4 % of its CPU through
 * the step at its floor). An LC service that still serves within reach
 * keeps the floor for every one.
 */
static bool floor_yields(const struct engine *e)
{
	bool any = false;

	for (size_t i = 0; i < e->set->n; i++) {
		if (e->set->v[i].klass != POLICY_LATENCY_CRITICAL || e->s[i].band == BAND_NONE)
			continue;
		if (!e->s[i].overloaded)
			return false;
		any = true;
	}
	return any;
}

/*
 * Weights=floor, yielding: how far above home the CPU weights go
 * (engine.yield_by), so that best-effort work keeps YIELD_KEEP of what it
 * used in calm windows (engine.be_calm). Both contend for the CPU, so each
 * gets about its weight's part: the weights go up by the odds of the share
 * wanted against the share they got, at most YIELD_STEP-fold a window, and
 * only once a whole window ran at the last weights; never down until the
 * overload ends. Nothing of theirs to keep (idle before, or idle now: no
 * contention to share): they stay.
 */
static void yield_share(struct engine *e, uint64_t now)
{
	double lc = class_cpu_use(e, POLICY_LATENCY_CRITICAL), be = be_cpu_use(e), want, got, by;

	/* A whole window since a write: as cooled() for a protect (COOL_PROTECT). */
	for (size_t b = 0; b < e->set->n; b++) {
		const struct knob_mem *m = &e->s[b].k[KNOB_CPU_WEIGHT];
		const struct knob_mem *q = &e->s[b].k[KNOB_CPU_QUOTA];

		if (held(e, b, KNOB_CPU_WEIGHT) && !cooled(m, DIR_PROTECT, now))
			return;
		/*
		 * A quota that held them in the window, or moved in it: their use
		 * is not their weight's part (measured: 6 % of a CPU read in the
		 * window of a 5 % quota's undo took the weight to twice home).
		 */
		if (e->set->v[b].klass == POLICY_BEST_EFFORT && q->touched &&
		    (q->now < q->home || !cooled(q, DIR_PROTECT, now)))
			return;
	}
	if (!(e->be_calm >= BE_BUSY) || !(be >= BE_BUSY) || !(lc > 0))
		return;
	want = fmin(YIELD_SHARE_MAX, YIELD_KEEP * e->be_calm / (be + lc));
	got = be / (be + lc);
	by = (want / (1 - want)) / (got / (1 - got));
	/*
	 * Up by a tenth at least: less is not worth a write. Never down while
	 * the overload lasts: a step down is a cut of what they hold, and their
	 * share rising is the service's load falling, which ends the episode
	 * (the floor then comes back). Measured: in run 18 of scenario 5 the
	 * weights went from 1.15x home to home 3 s after the load fell, 2 cuts
	 * after the own-load verdict by the benchmark's count.
	 */
	if (by < 1.1)
		return;
	by = fmin(YIELD_STEP, by);
	e->yield_by = fmin(YIELD_BY_MAX, e->yield_by * by);
}

/*
 * Weights=floor, yielding (floor_yields()): the CPU weight back home in one
 * step, the share the user gave the service, and above it as far as its
 * range allows while best-effort work keeps less than YIELD_KEEP of its CPU
 * before (yield_share()), while the overload lasts; the floor comes back
 * with the tick after it ends.
 */
static void yield_floor(struct tick *t, size_t b, size_t driver)
{
	const struct policy_range *r = policy_range_of(&t->e->set->v[b], KNOB_CPU_WEIGHT);
	struct knob_mem *m = &t->e->s[b].k[KNOB_CPU_WEIGHT];
	char why[192] =
		"and the floor would take the CPU from best-effort work for nothing; its home weight while this lasts";
	double v;

	if (!held(t->e, b, KNOB_CPU_WEIGHT) || !movable(t->e, b, KNOB_CPU_WEIGHT) || !m->touched)
		return;
	v = fmax(m->home, fmin(r->hi, round(m->home * t->e->yield_by)));
	if (v == m->now)
		return;
	if (v != m->home)
		snprintf(
			why, sizeof(why),
			"best-effort work used %.0f%% of a CPU before it and %.0f%% now, so its weight goes to %.2fx home (at most its range's top) to keep %.0f%% of that while this lasts",
			t->e->be_calm * 100, be_cpu_use(t->e) * 100, v / m->home, YIELD_KEEP * 100);
	/* No cooldown: not a give-back that may hurt, the state it is in now. */
	change(t, b, KNOB_CPU_WEIGHT, v, m->now < v ? DIR_RELAX : DIR_PROTECT, driver, false,
	       "Weights=floor yields: the latency-critical services' own load is beyond what the CPU gives%s %s",
	       v == m->home ? "," : ";", why);
}

/* Weights=floor as the latency-critical services stand: held, or yielding. */
static void floor_as_now(struct tick *t, size_t b, size_t driver, bool appeared)
{
	if (floor_yields(t->e))
		yield_floor(t, b, driver);
	else
		hold_floor(t, b, driver, appeared);
}

/*
 * Weights=floor, when no LC service has had a verdict for VERDICT_WINDOWS
 * windows (idle, or gone): the held weights go home in one step.
 */
static void release_floor(struct tick *t, size_t b)
{
	for (size_t j = 0; j < N_FLOOR_KNOBS; j++) {
		enum action_knob k = floor_knobs[j];
		struct knob_mem *m = &t->e->s[b].k[k];

		/* Above home: a yield (yield_floor()) that the LC services' idling ended. */
		if (!held(t->e, b, k) || !movable(t->e, b, k) || !m->touched || m->now == m->home ||
		    (m->now < m->home && !cooled(m, DIR_RELAX, t->now)))
			continue;
		change(t, b, k, m->home, m->now < m->home ? DIR_RELAX : DIR_PROTECT, b, false,
		       "Weights=floor: no latency-critical service has served for %u windows; back home",
		       VERDICT_WINDOWS);
	}
}

/* The LC service whose current verdict is the latest; -1 if none has one. */
static int last_serving(const struct engine *e)
{
	int w = -1;

	for (size_t i = 0; i < e->set->n; i++)
		if (e->set->v[i].klass == POLICY_LATENCY_CRITICAL && e->s[i].band != BAND_NONE &&
		    (w < 0 || e->s[i].verdict_ns > e->s[w].verdict_ns))
			w = (int)i;
	return w;
}

/* Has no LC service had a verdict for VERDICT_WINDOWS of its windows? */
static bool lc_idle(const struct engine *e, uint64_t now)
{
	for (size_t i = 0; i < e->set->n; i++) {
		const struct service_mem *s = &e->s[i];

		if (e->set->v[i].klass != POLICY_LATENCY_CRITICAL || !s->verdict_ns)
			continue;
		if (s->band != BAND_NONE ||
		    now < s->verdict_ns + VERDICT_WINDOWS * window_of(&e->set->v[i]))
			return false;
	}
	return true;
}

/*
 * Halve a BE knob towards its floor; the first cut of "max" halves the use.
 * part (not NAN): the value the best-effort services' share gave it
 * (share_quota()), cut to no less than half, and share says how.
 */
static void cut(struct tick *t, size_t b, enum action_knob k, size_t driver, const char *why,
		double part, const char *share)
{
	const struct policy_range *r = policy_range_of(&t->e->set->v[b], k);
	struct knob_mem *m = &t->e->s[b].k[k];
	double usage = t->e->s[b].usage, base = m->now, v, factor;
	char basis[64] = "", lo[24], hurt[80] = "", scaled[48] = "";
	bool first = false;

	if (!cooled(m, DIR_PROTECT, t->now))
		return;
	if (isinf(base)) {
		/* Half of infinity is no cut: halve what it uses instead. */
		if (usage > 0) {
			base = usage;
			snprintf(basis, sizeof(basis), "half of its use %.0f%%; ", usage * 100);
		} else if (isfinite(r->hi)) {
			base = 2 * r->hi;
			snprintf(basis, sizeof(basis), "its use unknown: the upper bound; ");
		} else {
			base = 1;
			snprintf(basis, sizeof(basis), "its use unknown: half of one CPU; ");
		}
		m->scale = base;
	}
	factor = CUT_FACTOR;
	if (k == KNOB_CPU_WEIGHT || k == KNOB_IO_WEIGHT) {
		/* By the square of the miss: latency is 1 - slack times the target. */
		double miss = 1 - t->e->s[driver].slack;

		if (miss > 2) {
			factor = fmax(CUT_FACTOR_MIN, 2 / (miss * miss));
			snprintf(scaled, sizeof(scaled), " \u00d7%.2f (%s %.1fx its target)",
				 factor, "latency", miss);
		}
	}
	if (!isnan(part)) {
		/* Its part of the services' share, and still no more than half. */
		factor = fmax(CUT_FACTOR, part / base);
		basis[0] = '\0';
	}
	v = clamp_range(r, round_toward(k, base * factor, base));
	/* Below the least weight, where the range reaches it: idle. */
	if (k == KNOB_CPU_WEIGHT && !(v < m->now) && floor_of(t->e, b, k) == 0 && m->now > 0)
		v = 0;
	if (!(v < m->now))
		return;
	fmt_value(lo, sizeof(lo), k, floor_of(t->e, b, k));
	if (m->last_dir == DIR_RELAX &&
	    t->now <= m->last_ns + COOL_RELAX * m->last_window_ns + m->last_window_ns / 4) {
		/* The last give-back hurt (within the windows before the next
		 * was due): not that high again for a while. */
		char at[24];

		m->backoff = m->backoff ? m->backoff * 2 : BACKOFF_FIRST;
		if (m->backoff > BACKOFF_MAX)
			m->backoff = BACKOFF_MAX;
		/* The value before it held: the ceiling (the lowest such since home). */
		m->ceiling = isnan(m->ceiling) ? m->before : fmin(m->ceiling, m->before);
		m->ceiling_until_ns = t->now + m->backoff * window_of(&t->e->set->v[driver]);
		fmt_value(at, sizeof(at), k, m->ceiling);
		snprintf(hurt, sizeof(hurt), "; a give-back hurt: none above %s for %u windows", at,
			 m->backoff);
	}
	if (k == KNOB_CPU_QUOTA) {
		/*
		 * Judged at the driver's next two verdicts (judge_cut()). Its
		 * first verdict is the second of the cut before it, when the
		 * same service drove both (another's window proves nothing of it:
		 * in a `make demo` run web's one met window "proved" files' cut,
		 * whose own next window was no better, and the hog sat at 24 %
		 * with web over for 16 s).
		 */
		m->chain = m->cut_driver == (int)driver && m->judged_ns == t->now;
		m->cut_driver = (int)driver;
		m->cut_from = m->now;
		m->cut_to = v;
		m->cut_latency = t->e->s[driver].latency;
		m->cut_ns = t->now;
		m->judged_ns = 0;
		m->doubt_ns = 0;
		first = isnan(m->proven);
		if (first)
			m->proven = m->now;
	}
	if (share)
		change(t, b, k, v, DIR_PROTECT, driver, true, "%s%s, at most half, floor %s%s", why,
		       share, lo, hurt);
	else
		change(t, b, k, v, DIR_PROTECT, driver, true,
		       "%s%smultiplicative cut%s, floor %s%s", why, basis, scaled, lo, hurt);
	if (!(m->now == v)) {
		m->cut_driver = -1; /* not made (no room for the action) */
		if (first)
			m->proven = NAN;
	}
}

/*
 * A weight counts as spent when it cannot be used, or when it sat at its
 * floor for a whole window that still ended in a violation.
 */
static bool weight_spent(const struct engine *e, size_t b, uint64_t now)
{
	const struct knob_mem *m = &e->s[b].k[KNOB_CPU_WEIGHT];

	if (!movable(e, b, KNOB_CPU_WEIGHT))
		return true;
	return m->now <= floor_of(e, b, KNOB_CPU_WEIGHT) && cooled(m, DIR_PROTECT, now);
}

/*
 * Are quota cuts of BE service b held off (a cut that some LC service
 * drove did not help)? Whoever drives them: the throttling that did not
 * help one service's queueing costs the others on the CPU too (in a
 * `make demo` run, files' cut was undone and web's misses then walked the
 * hog from 26.7 % to 6.7 % by halves, neither getting better). The hold
 * is the longest of b's.
 */
static bool cut_held(const struct engine *e, size_t b, uint64_t now)
{
	for (size_t j = 0; j < e->set->n; j++)
		if (now < e->hold[b * e->set->n + j].until_ns)
			return true;
	return false;
}

/*
 * The worst fresh violation among LC services routing to route, of those
 * with at least run violations in a row; -1 if none. With b >= 0, only
 * those whose quota cuts of b are not held off.
 */
static int worst_for(const struct engine *e, unsigned route, int b, uint64_t now, unsigned run)
{
	int w = -1;

	for (size_t i = 0; i < e->set->n; i++) {
		const struct service_mem *s = &e->s[i];

		/* Its short slice first: the CPU route's cuts wait a window to see it. */
		if ((route & (ROUTE_CPU | ROUTE_CPU_NAMED)) && s->slice_now)
			continue;
		if (b >= 0 && cut_held(e, (size_t)b, now))
			continue;
		if (s->fresh && s->band == BAND_VIOLATION && s->viol_run >= run &&
		    (s->route & route) && (w < 0 || s->slack < e->s[w].slack))
			w = (int)i;
	}
	return w;
}

static int worst_violation(const struct engine *e, unsigned route)
{
	return worst_for(e, route, -1, 0, 1);
}

/*
 * Did a BE service stay idle (busy_ns: its last busy tick) through the
 * whole last window of the LC service that drives a cut? Then it is not
 * the cause, and a cut of it would only be paid when it starts.
 */
static bool idle_through(const struct engine *e, uint64_t busy_ns, int driver, uint64_t now)
{
	return now >= busy_ns + window_of(&e->set->v[driver]);
}

/*
 * Is a quota cut of BE service b due this tick? Its driver in *driver and
 * the rule in words, or NULL. A quota throttles only what runs: on a
 * service that used no CPU lately it changes nothing now, and would cost
 * it later.
 */
static const char *quota_due(const struct engine *e, size_t b, uint64_t now, int *driver)
{
	/*
	 * Not from an LC service whose last such cut left it no better
	 * (judge_cut()). An idle BE service (cpu.idle) is preempted at every
	 * wake-up already: its quota only where the diagnosis names the CPU.
	 * In `make demo` runs with the hog idle, quota cuts on "none/unknown"
	 * (the disk service's misses) took the hog from 48 % of a CPU to
	 * 12-28 % and half of them were undone; by hand, a quota of 10 % or
	 * 30 % beside an idle hog moved nginx's p99 within the noise of the
	 * idle hog alone (159 and 214 against 222 and 154 us).
	 */
	unsigned route = e->s[b].k[KNOB_CPU_WEIGHT].now == 0 ? ROUTE_CPU_NAMED : ROUTE_CPU;
	bool weight = movable(e, b, KNOB_CPU_WEIGHT);
	int cpu = worst_for(e, route, (int)b, now, weight ? QUOTA_RUN : 1);
	int mem = worst_for(e, ROUTE_QUOTA, (int)b, now, 1);

	if (e->set->v[b].klass != POLICY_BEST_EFFORT || !movable(e, b, KNOB_CPU_QUOTA) ||
	    e->s[b].usage < BE_IDLE || !cooled(&e->s[b].k[KNOB_CPU_QUOTA], DIR_PROTECT, now))
		return NULL;
	/* Its last cut in doubt (judge_cut()): the next verdict says whether it stays. */
	if (e->s[b].k[KNOB_CPU_QUOTA].cut_driver >= 0 && e->s[b].k[KNOB_CPU_QUOTA].doubt_ns)
		return NULL;
	/*
	 * Nor while best-effort work together holds next to nothing of the
	 * CPU (be_squeezed()): that is the cut which own load beyond the CPU
	 * refuses (overload()), and the window before the diagnosis names the
	 * load reads as any violation. Such a cut could take at most the
	 * little they use, yet it stays through the episode
	 * (give_back_episode()) and holds off the floor's yield
	 * (yield_share()): in a run of scenario 5 the step's first window read
	 * cpu/unknown, the hog's quota went to 5 % of a CPU at a use of 1 %,
	 * and it kept 7 % of its CPU through the step.
	 */
	if (be_squeezed(e))
		return NULL;
	if (mem >= 0) {
		*driver = mem;
		return "weight cannot reach memory interference; ";
	}
	/*
	 * The weight at its floor is spent when a whole window there ended
	 * over and so did the one before (QUOTA_RUN): a weight not ours to
	 * move, at once.
	 */
	if (cpu >= 0 && weight_spent(e, b, now)) {
		*driver = cpu;
		return weight ? "cpu.weight at its floor for a window, 2 windows over in a row; " :
				"cpu.weight not ours to move; ";
	}
	return NULL;
}

/* The CPU a BE service holds: its use, or its quota when that is lower. */
static double holds(const struct engine *e, size_t b)
{
	return fmin(e->s[b].usage, e->s[b].k[KNOB_CPU_QUOTA].now);
}

/* The weight by which a BE service shares: its CPU weight before we moved it. */
static double share_weight(const struct engine *e, size_t b)
{
	const struct knob_mem *m = &e->s[b].k[KNOB_CPU_WEIGHT];

	return m->seen && m->home > 0 ? m->home : TW_ENGINE_SHARE_WEIGHT;
}

/*
 * Between best-effort services: when the quotas of two or more are due to
 * be cut in the same tick, what they hold together is halved, and the
 * half that is left is split max-min fair by their home CPU weights (the
 * administrator's split, before we moved any): a service that holds less
 * than its part keeps it and is not cut, and the others share the rest
 * by weight, none cut by more than half. So which service pays follows
 * what each uses, not which neighbour happens to run beside it: a light
 * disk reader is not throttled by half because a hog beside it made the
 * service miss. Known use of every one is needed; otherwise each is cut on
 * its own, as before. Fills quota_part and share of each.
 */
static void share_quota(struct tick *t)
{
	struct engine *e = t->e;
	double total = 0, wsum = 0, left, wleft;
	size_t n = 0;
	int driver;
	bool moved;

	for (size_t b = 0; b < e->set->n; b++) {
		e->s[b].quota_part = NAN;
		e->s[b].share[0] = '\0';
		if (!quota_due(e, b, t->now, &driver))
			continue;
		if (isnan(e->s[b].usage))
			return; /* one's use unknown: each cut on its own */
		n++;
		total += holds(e, b);
		wsum += share_weight(e, b);
	}
	if (n < 2)
		return;
	/* Water-filling: who holds less than its part keeps it; the rest shares again. */
	left = CUT_FACTOR * total;
	wleft = wsum;
	do {
		moved = false;
		for (size_t b = 0; b < e->set->n; b++) {
			double w = share_weight(e, b);

			if (!quota_due(e, b, t->now, &driver) || !isnan(e->s[b].quota_part) ||
			    holds(e, b) > left * w / wleft)
				continue;
			e->s[b].quota_part = INFINITY;
			left -= holds(e, b);
			wleft -= w;
			moved = true;
		}
	} while (moved && wleft > 0);
	for (size_t b = 0; b < e->set->n; b++) {
		struct service_mem *s = &e->s[b];

		if (!quota_due(e, b, t->now, &driver) || !isnan(s->quota_part))
			continue;
		s->quota_part = left * share_weight(e, b) / wleft;
		snprintf(s->share, sizeof(s->share),
			 "best-effort use %.0f%% -> %.0f%%, by home weight %.0f/%.0f: %.1f%%",
			 100 * total, 100 * CUT_FACTOR * total, share_weight(e, b), wsum,
			 100 * s->quota_part);
	}
}

/*
 * A quota cut of BE service b is judged at its driver's verdicts from
 * windows spent at the new value: two, or three when the second leaves it
 * in doubt. Each helps when it is out of
 * violation or its latency is down by a fifth from the window that drove
 * the cut (CUT_HELPED; a bucket or two lower is a window's noise: in `make
 * demo` a cut past the weight's floor read 1.54 -> 1.41 ms and the next
 * one 1.41 -> 2 ms). Two that help prove the cut: an undo goes no lower
 * than it, and the doubling is forgotten. One window is not proof: in a
 * `make demo` run one met window after a cut (the engine's window between
 * two of the client's OVER seconds) let the next cuts walk the hog down
 * from 29% and kept it at 15% for the rest of its phase, web no better.
 * A verdict still in violation and not that much lower leaves the cut in
 * doubt: no further quota cut of b until the next verdict. A better one
 * then lets it stand, unproven (one window is no proof either way); a
 * second no better says the cut took CPU and gave nothing back for it,
 * and its throttling may be the harm. The quota goes back in one step to
 * where it stood before the first cut not yet proven (to no higher than a
 * give-back ceiling in force), and quota cuts of b are held off, whoever
 * drives them, for BACKOFF_FIRST of that driver's windows, doubled for
 * each such cut it drives after (at most BACKOFF_MAX).
 */
static void judge_cut(struct tick *t, size_t b)
{
	struct engine *e = t->e;
	struct knob_mem *m = &e->s[b].k[KNOB_CPU_QUOTA];
	const struct policy_range *r = policy_range_of(&e->set->v[b], KNOB_CPU_QUOTA);
	const struct service_mem *ds;
	struct cut_hold *h;
	char lat0[24], lat1[24], lat2[24], from[24], to[24], back[64] = "";
	uint64_t w, last;
	size_t i;
	double v;

	if (m->cut_driver < 0)
		return;
	i = (size_t)m->cut_driver;
	ds = &e->s[i];
	w = window_of(&e->set->v[i]);
	last = m->judged_ns > m->doubt_ns ? m->judged_ns : m->doubt_ns;
	if (!last && t->now + w / 4 < m->cut_ns + w)
		return; /* not a whole window at the new value yet */
	if (t->now > (last ? last : m->cut_ns) + 2 * w + w / 4) {
		m->cut_driver = -1; /* no verdict in the two windows after the last: it stands */
		return;
	}
	if (!ds->fresh || t->now == last)
		return;
	/* Not in force (the write failed, or someone else's since): it proved nothing. */
	if (!(m->now == m->cut_to)) {
		m->cut_driver = -1;
		return;
	}
	h = &e->hold[b * e->set->n + i];
	if (ds->band != BAND_VIOLATION || ds->latency <= CUT_HELPED * m->cut_latency) {
		if (m->doubt_ns) {
			/* One no better, then one better: it stands, unproven. */
			m->cut_driver = -1;
			return;
		}
		if (!m->judged_ns) {
			m->judged_ns = t->now; /* one that helped: the next verdict proves it */
			if (m->chain)
				m->proven = m->cut_from; /* the cut before it helped twice */
			return;
		}
		m->cut_driver = -1;
		m->proven = m->cut_to;
		h->backoff = 0;
		return;
	}
	if (!m->doubt_ns) {
		/* No better: in doubt, no further quota cut of b until the next verdict decides. */
		m->doubt_ns = t->now;
		m->doubt_latency = ds->latency;
		return;
	}
	m->cut_driver = -1;
	h->backoff = h->backoff ? h->backoff * 2 : BACKOFF_FIRST;
	if (h->backoff > BACKOFF_MAX)
		h->backoff = BACKOFF_MAX;
	h->until_ns = t->now + h->backoff * w;
	if (!movable(e, b, KNOB_CPU_QUOTA) || !cooled(m, DIR_PROTECT, t->now))
		return;
	v = m->cut_from;
	if (!isnan(m->proven) && m->proven > v) {
		v = m->proven;
		fmt_value(from, sizeof(from), KNOB_CPU_QUOTA, v);
		snprintf(back, sizeof(back), "; no cut since %s proven by two windows", from);
	}
	v = fmin(clamp_range(r, v), m->home);
	if (!isnan(m->ceiling) && t->now < m->ceiling_until_ns)
		v = fmin(v, m->ceiling);
	if (!(v > m->now))
		return;
	fmt_ns(lat0, sizeof(lat0), m->cut_latency);
	fmt_ns(lat1, sizeof(lat1), m->doubt_latency);
	fmt_ns(lat2, sizeof(lat2), ds->latency);
	fmt_value(from, sizeof(from), KNOB_CPU_QUOTA, m->cut_from);
	fmt_value(to, sizeof(to), KNOB_CPU_QUOTA, m->cut_to);
	change(t, b, KNOB_CPU_QUOTA, v, DIR_UNDO, i, true,
	       "its cut %s -> %s did not bring %s down by a fifth in two windows in a row (p%g %s -> %s, %s)%s: quota cuts of %s held off for %u windows",
	       from, to, e->set->v[i].name, e->set->v[i].percentile * 100, lat0, lat1, lat2, back,
	       e->set->v[b].name, h->backoff);
}

static void cut_neighbour(struct tick *t, size_t b)
{
	const struct engine *e = t->e;
	int cpu = worst_violation(e, ROUTE_CPU), io = worst_violation(e, ROUTE_IO), driver;
	const struct service_mem *s = &e->s[b];
	const char *why;

	if (cpu >= 0 && movable(e, b, KNOB_CPU_WEIGHT) &&
	    !idle_through(e, s->cpu_busy_ns, cpu, t->now))
		cut(t, b, KNOB_CPU_WEIGHT, cpu, "", NAN, NULL);
	why = quota_due(e, b, t->now, &driver);
	/* INFINITY: it holds less than its part of the share, and keeps it. */
	if (why && !(s->quota_part == INFINITY))
		cut(t, b, KNOB_CPU_QUOTA, driver, why, s->quota_part,
		    s->share[0] ? s->share : NULL);
	if (io >= 0 && movable(e, b, KNOB_IO_WEIGHT) && !idle_through(e, s->io_busy_ns, io, t->now))
		cut(t, b, KNOB_IO_WEIGHT, io, "", NAN, NULL);
}

/* Step a BE knob we cut back up towards its home; true if it moved. */
static bool give_back(struct tick *t, size_t b, enum action_knob k, size_t driver, uint64_t window)
{
	const struct policy_range *r = policy_range_of(&t->e->set->v[b], k);
	struct knob_mem *m = &t->e->s[b].k[k];
	double top, step, v;
	char span[48], cap[80] = "", rule[32];
	bool capped;

	if (!movable(t->e, b, k) || !m->touched || !(m->now < m->home) || held(t->e, b, k))
		return false;
	if (!cooled(m, DIR_RELAX, t->now))
		return true; /* still on its way home: what comes after waits */
	top = isfinite(m->home) ? m->home :
	      !isnan(m->scale)	? fmax(m->scale, r->lo) :
				  fmax(1, r->lo);
	if (k == KNOB_CPU_QUOTA) {
		step = fmax(GIVE_FRACTION * (top - r->lo), knob_unit(k));
		snprintf(rule, sizeof(rule), "additive +10%%");
	} else {
		step = fmax((GIVE_WEIGHT - 1) * m->now, knob_unit(k));
		snprintf(rule, sizeof(rule), "multiplicative +25%%");
	}
	v = round_toward(k, m->now + step, m->now);
	if (v >= top)
		v = m->home;
	v = clamp_range(r, v);
	capped = !isnan(m->ceiling) && t->now < m->ceiling_until_ns;
	if (capped) {
		/* No higher than the last value that held, until the back-off ends. */
		char c[24];

		v = fmin(v, m->ceiling);
		if (!(v > m->now))
			return true; /* held: what comes after waits too */
		fmt_value(c, sizeof(c), k, m->ceiling);
		snprintf(cap, sizeof(cap), ", no higher than %s until the back-off ends", c);
	}
	if (!(v > m->now))
		return false;
	fmt_value(span, sizeof(span), k, top);
	m->before = m->now; /* change() moves now to v */
	change(t, b, k, v, DIR_RELAX, driver, false, "%s, on the way back to %s%s", rule, span,
	       cap);
	if (v >= m->home) {
		m->ceiling = NAN; /* home: what hurt then is forgotten */
		m->backoff = 0;
	}
	m->last_window_ns = window;
	return true;
}

/* Every LC service with a verdict in large slack long enough; the tightest. */
static int all_slack(const struct engine *e, uint64_t *window)
{
	bool fresh = false;
	int w = -1;

	*window = 0;
	for (size_t i = 0; i < e->set->n; i++) {
		const struct service_mem *s = &e->s[i];

		if (e->set->v[i].klass != POLICY_LATENCY_CRITICAL || s->band == BAND_NONE)
			continue;
		if (s->band != BAND_SLACK || s->streak < GIVE_WINDOWS)
			return -1;
		fresh |= s->fresh;
		if (w < 0 || s->slack < e->s[w].slack)
			w = (int)i;
		if (window_of(&e->set->v[i]) > *window)
			*window = window_of(&e->set->v[i]);
	}
	return fresh ? w : -1;
}

/*
 * Give to an LC service: frequency straight to its ceiling (latency first,
 * only energy is spent), weights and quota at most doubled.
 */
static void raise_own(struct tick *t, size_t i, enum action_knob k, const char *rule)
{
	const struct policy_range *r = policy_range_of(&t->e->set->v[i], k);
	struct knob_mem *m = &t->e->s[i].k[k];
	double v;

	if (!movable(t->e, i, k) || !cooled(m, DIR_PROTECT, t->now))
		return;
	if (k == KNOB_CPU_FREQ)
		v = isfinite(r->hi) ? r->hi : m->max_seen;
	else
		v = clamp_range(r, round_toward(k, m->now * RAISE_FACTOR, m->now));
	if (!(v > m->now))
		return;
	change(t, i, k, v, DIR_PROTECT, i, t->e->s[i].band == BAND_VIOLATION, "%s", rule);
}

/*
 * Relax an LC service: frequency down towards its floor (energy); a knob
 * we raised back towards its home, never below it.
 */
static void lower_own(struct tick *t, size_t i, enum action_knob k)
{
	const struct policy_range *r = policy_range_of(&t->e->set->v[i], k);
	struct knob_mem *m = &t->e->s[i].k[k];
	double top, bottom, v;

	if (!movable(t->e, i, k) || !cooled(m, DIR_RELAX, t->now))
		return;
	top = isfinite(r->hi) ? r->hi : m->max_seen;
	bottom = k == KNOB_CPU_FREQ ? r->lo : m->touched ? m->home : INFINITY;
	if (!isfinite(top) || !(m->now > bottom))
		return;
	v = round_toward(k, m->now - fmax(GIVE_FRACTION * (top - bottom), knob_unit(k)), m->now);
	v = clamp_range(r, fmax(v, bottom));
	if (!(v < m->now))
		return;
	change(t, i, k, v, DIR_RELAX, i, false, "%s",
	       k == KNOB_CPU_FREQ ?
		       "large slack: -10% of the range, for energy" :
		       "large slack: -10% of what was given, never below its own value");
}

/*
 * The first rung of a CPU violation: the service's threads get the short
 * EEVDF slice of Slice=. A weight changes how often a hog is picked, not
 * how long it runs once picked; a short slice makes a waking request wait
 * at most one short slice of its own, and costs best-effort work nothing
 * in throughput. True when given this tick: the rest of the CPU route
 * (its weight, the neighbours' cuts) waits a window to see its effect.
 */
static bool give_slice(struct tick *t, size_t i)
{
	const struct policy_range *r = &t->e->set->v[i].slice_ns;
	struct knob_mem *m = &t->e->s[i].k[KNOB_SCHED_SLICE];

	if (!movable(t->e, i, KNOB_SCHED_SLICE) || m->now == r->lo ||
	    !cooled(m, DIR_PROTECT, t->now))
		return false;
	change(t, i, KNOB_SCHED_SLICE, r->lo, DIR_PROTECT, i, true, "%s",
	       "the short slice first: a waking request waits behind one short slice, best-effort throughput is not cut");
	return true;
}

/* Is every knob but the slice home: nothing taken from a neighbour, nothing given to i? */
static bool all_home_but_slice(const struct engine *e, size_t i)
{
	for (size_t b = 0; b < e->set->n; b++) {
		for (int k = 0; k < KNOB_MAX; k++) {
			const struct knob_mem *m = &e->s[b].k[k];

			if (k == KNOB_SCHED_SLICE || k == KNOB_CPU_FREQ || !movable(e, b, k) ||
			    !m->touched || held(e, b, k))
				continue;
			if (e->set->v[b].klass == POLICY_BEST_EFFORT && m->now < m->home)
				return false;
			if (b == i && m->now > m->home)
				return false;
		}
	}
	return true;
}

/*
 * The last give-back: the threads' own slices again, once the service has
 * been in large slack long enough and everything else is back (checked
 * before this tick's other give-backs, so the slice goes a window after
 * the last of them at the earliest).
 */
static void take_slice(struct tick *t, size_t i, bool rest_home)
{
	struct knob_mem *m = &t->e->s[i].k[KNOB_SCHED_SLICE];

	if (!rest_home || !movable(t->e, i, KNOB_SCHED_SLICE) || !m->touched || !(m->now > 0) ||
	    !cooled(m, DIR_RELAX, t->now))
		return;
	change(t, i, KNOB_SCHED_SLICE, 0, DIR_RELAX, i, false, "%s",
	       "large slack and everything else given back: the threads' own slices again");
}

static void own_knobs(struct tick *t, size_t i)
{
	struct service_mem *s = &t->e->s[i];

	if (!s->fresh)
		return;
	if (s->slack < SLACK_FREQ_UP)
		raise_own(t, i, KNOB_CPU_FREQ, "slack below 0.05: frequency to the ceiling");
	if (s->band == BAND_VIOLATION) {
		if ((s->route & ROUTE_CPU) && give_slice(t, i))
			s->slice_now = true;
		else if (s->route & ROUTE_CPU)
			raise_own(t, i, KNOB_CPU_WEIGHT, "multiplicative raise, wins wake-ups");
		if (s->route & ROUTE_OWN_CPU)
			raise_own(t, i, KNOB_CPU_QUOTA, "multiplicative raise");
		if (s->route & ROUTE_IO)
			raise_own(t, i, KNOB_IO_WEIGHT, "multiplicative raise");
	} else if (s->band == BAND_SLACK && s->streak >= GIVE_WINDOWS) {
		for (int k = 0; k < KNOB_MAX; k++)
			if (k != KNOB_SCHED_SLICE) /* take_slice(): last */
				lower_own(t, i, k);
	}
}

/* The LC service with a verdict this tick and the tightest slack. */
static size_t tightest_fresh(const struct engine *e)
{
	size_t w = 0;
	bool found = false;

	for (size_t i = 0; i < e->set->n; i++)
		if (e->s[i].fresh && (!found || e->s[i].slack < e->s[w].slack)) {
			w = i;
			found = true;
		}
	return w;
}

/*
 * An LC service whose own load went beyond the CPU is back within it, in
 * large slack: what was cut from best-effort services during the episode
 * (since the last tick without a violation, before its own load was named)
 * was cut for nothing, and goes back in one step to the value that held
 * then. A give-back that hurts is backed off as any other. Quota and
 * weights held by Weights=floor stay where the floor holds them.
 */
static void give_back_episode(struct tick *t, size_t i)
{
	struct engine *e = t->e;
	struct service_mem *s = &e->s[i];
	bool pending = false;

	if (!s->own_over || !s->fresh || s->band != BAND_SLACK)
		return;
	for (size_t b = 0; b < e->set->n; b++) {
		if (e->set->v[b].klass != POLICY_BEST_EFFORT)
			continue;
		for (int k = 0; k < KNOB_MAX; k++) {
			struct knob_mem *m = &e->s[b].k[k];
			double v = m->calm;

			if (!movable(e, b, k) || !m->touched || held(e, b, k) || isnan(v) ||
			    !(m->now < v))
				continue;
			if (!cooled(m, DIR_RELAX, t->now)) {
				pending = true;
				continue;
			}
			m->before = m->now; /* change() moves now to v */
			change(t, b, k, v, DIR_RELAX, i, false, "%s",
			       "its own load is back within the CPU: what was cut while it went beyond, for nothing, back in one step");
			m->last_window_ns = window_of(&e->set->v[i]);
		}
	}
	s->own_over = pending;
}

/* No violation this tick, and none being undone: each BE knob's value is the calm one. */
static void note_calm(struct engine *e)
{
	double use = be_cpu_use(e);

	for (size_t i = 0; i < e->set->n; i++)
		if (e->s[i].overloaded || e->s[i].own_over)
			return;
	for (size_t b = 0; b < e->set->n; b++)
		for (int k = 0; k < KNOB_MAX; k++)
			if (e->set->v[b].klass == POLICY_BEST_EFFORT && !isnan(e->s[b].k[k].now))
				e->s[b].k[k].calm = e->s[b].k[k].now;
	/* What they use now is what a later overload's yield keeps them (yield_share()). */
	e->be_calm = isnan(e->be_calm) ? use : 0.5 * (e->be_calm + use);
	e->yield_by = 1;
}

int engine_service_appeared(struct engine *e, uint64_t now_ns, int service,
			    const struct engine_input *in, struct action *acts, size_t max)
{
	struct tick t = { .e = e, .now = now_ns, .acts = acts, .max = max };
	size_t b = (size_t)service;
	int serving;

	if (service < 0 || b >= e->set->n)
		return -EINVAL;
	observe_knobs(e, b, in);
	if (!e->set->v[b].weights_floor || lc_idle(e, now_ns))
		return 0;
	serving = last_serving(e);
	if (serving >= 0)
		floor_as_now(&t, b, (size_t)serving, true);
	return t.overflow ? -ENOSPC : (int)t.n;
}

int engine_tick(struct engine *e, uint64_t now_ns, const struct engine_input *in,
		struct action *acts, size_t max)
{
	const struct policy_set *set = e->set;
	struct tick t = { .e = e, .now = now_ns, .acts = acts, .max = max };
	bool any = false, violation;
	uint64_t window = 0;
	size_t tightest;
	int relax;

	/* Every service's usage is known before any verdict routes a cut. */
	for (size_t i = 0; i < set->n; i++)
		observe(e, i, &in[i], now_ns);
	for (size_t i = 0; i < set->n; i++) {
		judge(e, i, &in[i], now_ns);
		any |= e->s[i].fresh;
	}
	if (!any) {
		int serving = last_serving(e);

		for (size_t b = 0; b < set->n; b++) {
			if (!set->v[b].weights_floor)
				continue;
			if (lc_idle(e, now_ns))
				release_floor(&t, b);
			else if (serving >= 0)
				/* A new instance (a restarted unit) is held from its first tick. */
				floor_as_now(&t, b, (size_t)serving, false);
		}
		return t.overflow ? -ENOSPC : (int)t.n;
	}
	/* Before this tick's give-backs: the slice comes back after them. */
	for (size_t i = 0; i < set->n; i++)
		e->s[i].rest_home = all_home_but_slice(e, i);
	for (size_t i = 0; i < set->n; i++)
		if (set->v[i].klass == POLICY_LATENCY_CRITICAL)
			own_knobs(&t, i);
	/* Before any new cut: a held-off driver drives none this tick. */
	for (size_t b = 0; b < set->n; b++)
		if (set->v[b].klass == POLICY_BEST_EFFORT)
			judge_cut(&t, b);
	violation = worst_violation(e, ~0u) >= 0;
	tightest = tightest_fresh(e);
	relax = violation ? -1 : all_slack(e, &window);
	if (violation)
		share_quota(&t);
	if (floor_yields(e))
		yield_share(e, now_ns);
	for (size_t b = 0; b < set->n; b++) {
		if (set->v[b].klass != POLICY_BEST_EFFORT)
			continue;
		if (set->v[b].weights_floor)
			floor_as_now(&t, b, tightest, false);
		if (violation) {
			cut_neighbour(&t, b);
		} else if (relax >= 0) {
			/* Quota first: it throttles even an idle CPU. Weight last. */
			if (!give_back(&t, b, KNOB_CPU_QUOTA, relax, window))
				give_back(&t, b, KNOB_CPU_WEIGHT, relax, window);
			give_back(&t, b, KNOB_IO_WEIGHT, relax, window);
		}
	}
	for (size_t i = 0; !violation && i < set->n; i++)
		if (set->v[i].klass == POLICY_LATENCY_CRITICAL)
			give_back_episode(&t, i);
	for (size_t i = 0; relax >= 0 && i < set->n; i++)
		if (set->v[i].klass == POLICY_LATENCY_CRITICAL && e->s[i].fresh)
			take_slice(&t, i, e->s[i].rest_home);
	if (!violation)
		note_calm(e);
	return t.overflow ? -ENOSPC : (int)t.n;
}
