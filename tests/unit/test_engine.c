// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the policy engine (policies/engine.c): synthetic windows
 * in, actions out. A test feeds the values the engine asked for back in as
 * the knobs' current values, as the controller does after a write.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "policies/engine.h"
#include "sensing/hist.h"

/*
 * cmocka's assert_float_equal() takes an infinity as equal to any value (its
 * relative check compares inf with inf): an unlimited quota passed for 0.5.
 * Here a value and its expectation must be finite and within eps.
 */
#undef assert_float_equal
#define assert_float_equal(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

#define MS 1000000ULL
#define SEC 1000000000ULL
#define MAX_SVC 4

/*
 * policies/action.c holds the real one; this weak copy only lets the test
 * link on a tree that lacks it.
 */
__attribute__((weak)) const char *action_knob_name(enum action_knob k)
{
	static const char *const names[] = { "cpu.max", "cpu.weight", "io.weight", "cpufreq",
					     "sched.slice" };

	return (unsigned)k < KNOB_MAX ? names[k] : "?";
}

struct fx {
	struct policy pol[MAX_SVC];
	struct policy_set set;
	struct engine *e;
	struct engine_input in[MAX_SVC];
	struct hist lat[MAX_SVC]; /* the windows' latencies in[] points to */
	struct action acts[MAX_SVC * KNOB_MAX];
	uint64_t now;
	int n; /* actions of the last tick */
};

static struct policy_range range(double lo, double hi)
{
	return (struct policy_range){ .lo = lo, .hi = hi, .set = true };
}

static void lc_policy(struct policy *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	p->name = (char *)name;
	p->file = (char *)"test.policy";
	p->cgroup = (char *)"/lc";
	p->klass = POLICY_LATENCY_CRITICAL;
	p->percentile = 0.99;
	p->target_ns = 2 * MS;
	p->min_requests = 200;
	p->window_ns = SEC;
}

static void be_policy(struct policy *p, const char *name)
{
	memset(p, 0, sizeof(*p));
	p->name = (char *)name;
	p->file = (char *)"test.policy";
	p->cgroup = (char *)"/be";
	p->klass = POLICY_BEST_EFFORT;
	p->cpu_weight = range(10, 100);
	p->cpu_quota = range(0.1, INFINITY);
}

static void no_knobs(struct engine_input *in)
{
	for (int k = 0; k < KNOB_MAX; k++)
		in->knob[k] = NAN;
	in->cpu_usage = NAN; /* unknown, as without a contention sensor */
	in->io_usage = NAN;
}

/* web (latency-critical, p99 <= 2ms) and batch (best-effort, weight 100, no quota). */
static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	lc_policy(&f->pol[0], "web");
	be_policy(&f->pol[1], "batch");
	f->set.v = f->pol;
	f->set.n = 2;
	for (int i = 0; i < MAX_SVC; i++)
		no_knobs(&f->in[i]);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].knob[KNOB_CPU_QUOTA] = INFINITY;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	engine_free(f->e);
	free(f);
	return 0;
}

static void start(struct fx *f)
{
	f->e = engine_new(&f->set);
	assert_non_null(f->e);
}

/*
 * A window's histogram whose percentile is lat_ns (n requests in its
 * bucket; none when lat_ns < 0): the engine reads the bucket's midpoint,
 * within 3.125 % of lat_ns (HIST_MAX_REL_ERROR), as it reads a sensor's.
 */
static const struct hist *lat_hist(struct hist *h, double lat_ns, uint64_t n)
{
	memset(h, 0, sizeof(*h));
	if (lat_ns >= 0)
		hist_add(h, (uint64_t)lat_ns, n ? n : 1);
	return h;
}

/* What the engine reads of lat_ms: its bucket's midpoint, in ms. */
static double lat_read(double lat_ms)
{
	return hist_mid(hist_bucket((uint64_t)(lat_ms * MS))) / MS;
}

/* The engine's last f->n actions, applied to the knobs it reads next. */
static void apply_acts(struct fx *f)
{
	assert_true(f->n >= 0);
	for (int i = 0; i < f->n; i++)
		f->in[f->acts[i].service].knob[f->acts[i].knob] = f->acts[i].new_value;
}

/* One tick at f->now: run the engine and apply what it decided. */
static int run_tick(struct fx *f)
{
	f->n = engine_tick(f->e, f->now, f->in, f->acts, sizeof(f->acts) / sizeof(*f->acts));
	apply_acts(f);
	for (size_t i = 0; i < f->set.n; i++)
		f->in[i].have_window = false;
	return f->n;
}

/* A window of web ends a second later with p99 lat_ms over requests. */
static int window(struct fx *f, double lat_ms, uint64_t requests, const struct diagnosis *d)
{
	f->now += SEC;
	f->in[0].have_window = true;
	f->in[0].latency = lat_hist(&f->lat[0], lat_ms * MS, requests);
	f->in[0].requests = requests;
	f->in[0].diag = d;
	return run_tick(f);
}

static const struct action *find(const struct fx *f, int svc, enum action_knob k)
{
	for (int i = 0; i < f->n; i++)
		if (f->acts[i].service == svc && f->acts[i].knob == k)
			return &f->acts[i];
	return NULL;
}

static struct diagnosis diag(enum diag_dominant d, enum diag_cause c)
{
	struct diagnosis x = { .dominant = d, .cause = c };

	if (d != DIAG_NONE) {
		x.n_evidence = 1;
		x.evidence[0] = (struct diag_evidence){
			.signal = "runq_delay_us.p99", .value = 930, .baseline = 100, .ratio = 9.3
		};
	}
	return x;
}

/*
 * One window of web over at lat_ms with the weight at its floor: no quota
 * cut yet (that needs two in a row: test_quota_cut_needs_two_violations).
 */
static void over_once(struct fx *f, double lat_ms, const struct diagnosis *d)
{
	assert_int_equal(window(f, lat_ms, 1000, d), 0);
}

/* Violations cut cpu.weight by halves to its floor, then cpu.max. */
static void test_cuts_weight_then_quota(void **state)
{
	static const double weights[] = { 50, 25, 13, 10 };
	static const double quotas[] = { 0.5, 0.25, 0.125, 0.1 };
	static const double lats[] = { 8, 6, 4.5, 3.42 };
	struct fx *f = *state;

	start(f);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(window(f, 3.42, 1000, NULL), 1);
		assert_non_null(find(f, 1, KNOB_CPU_WEIGHT));
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == weights[i]);
		assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	}
	/*
	 * A whole window at the floor, still violated: now the quota, by halves
	 * while each cut leaves the latency a fifth lower (a cut that does not
	 * is undone: test_quota_cut_that_did_not_help_is_undone).
	 */
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(window(f, lats[i], 1000, NULL), 1);
		assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
		assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], quotas[i], 1e-9);
	}
	assert_string_equal(
		f->acts[0].reason,
		"web p99 3.47ms > target 2ms (slack -0.74); no diagnosis: CPU knobs on "
		"slack alone; cut batch cpu.max 12.5% -> 10% (cpu.weight at its floor "
		"for a window, 2 windows over in a row; multiplicative cut, floor 10%)");
	/*
	 * Nothing left to take: no action, however bad (the last cut helped
	 * in the two windows after it).
	 */
	assert_int_equal(window(f, 2.6, 1000, NULL), 0);
	assert_int_equal(window(f, 2.6, 1000, NULL), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(f, 10, 1000, NULL), 0);
	assert_float_equal(engine_slack(f->e, 0), 1 - lat_read(10) / 2, 1e-9); /* -4.11 */
}

/* The reason says which signal, which value, which rule. */
static void test_reason_in_words(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	start(f);
	assert_int_equal(window(f, 3.42, 1000, &d), 1);
	assert_string_equal(f->acts[0].reason,
			    "web p99 3.47ms > target 2ms (slack -0.74); diagnosis cpu/interference "
			    "(runq_delay_us.p99 \u00d79.3); cut batch cpu.weight 100 -> 50 "
			    "(multiplicative cut, floor 10)");
	assert_int_equal(f->acts[0].service, 1);
	assert_true(f->acts[0].old_value == 100 && f->acts[0].new_value == 50);
	assert_string_equal(engine_verdict(f->e, 0),
			    "violation: web p99 3.47ms > target 2ms (slack -0.74); diagnosis "
			    "cpu/interference (runq_delay_us.p99 \u00d79.3)");
	assert_string_equal(engine_verdict(f->e, 1), "best-effort: no objective");
	assert_null(engine_verdict(f->e, 2));
	/*
	 * A phase first: the strongest signal that stands out after it, so
	 * that a verdict read alone says whether the phase named it by itself.
	 */
	d.n_evidence = 3;
	d.evidence[2] = d.evidence[0];
	d.evidence[0] = (struct diag_evidence){
		.signal = "phase.queued_us.p99", .value = 800, .baseline = 38, .ratio = 21.1
	};
	d.evidence[1] = (struct diag_evidence){
		.signal = "phase.service_us.p99", .value = 90, .baseline = 50, .ratio = 1.8
	};
	window(f, 3.42, 1000, &d);
	assert_string_equal(engine_verdict(f->e, 0),
			    "violation: web p99 3.47ms > target 2ms (slack -0.74); diagnosis "
			    "cpu/interference (phase.queued_us.p99 \u00d721.1, runq_delay_us.p99 "
			    "\u00d79.3)");
	d.n_evidence = 2;
	window(f, 3.42, 1000, &d);
	assert_string_equal(engine_verdict(f->e, 0),
			    "violation: web p99 3.47ms > target 2ms (slack -0.74); diagnosis "
			    "cpu/interference (phase.queued_us.p99 \u00d721.1)");
}

/* The first cut of an unlimited quota halves what the service uses. */
static void test_quota_from_max_halves_use(void **state)
{
	struct fx *f = *state;

	f->pol[1].cpu_weight.set = false; /* weight not ours: quota at once */
	f->in[1].cpu_usage = 3.0;
	start(f);
	assert_int_equal(window(f, 5, 1000, NULL), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 1.5, 1e-9);
	assert_non_null(strstr(f->acts[0].reason,
			       "cut batch cpu.max max -> 150% (cpu.weight not ours "
			       "to move; half of its use 300%; multiplicative cut"));
	assert_true(isnan(f->in[1].knob[KNOB_IO_WEIGHT]));
}

/* Sustained slack gives a weight back by quarters, up to the bound and no further. */
static void test_gives_back_to_bound(void **state)
{
	struct fx *f = *state;
	uint64_t last_cut;
	double prev = 10;
	int gives = 0;

	f->pol[1].cpu_quota.set = false;
	start(f);
	for (int i = 0; i < 4; i++)
		window(f, 3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	last_cut = f->now;
	for (int i = 0; i < 60; i++) {
		window(f, 1, 1000, NULL);
		if (!f->n)
			continue;
		assert_int_equal(f->n, 1);
		assert_true(f->acts[0].new_value > f->acts[0].old_value);
		assert_true(f->acts[0].new_value <= 1.25 * f->acts[0].old_value ||
			    f->acts[0].new_value == 100);
		if (!gives++) {
			/* 3 windows of slack, and 4 since the last cut. */
			assert_true(f->now - last_cut >= 4 * SEC);
			assert_string_equal(
				f->acts[0].reason,
				"web p99 999us <= target 2ms (slack 0.50, 4 windows above 0.20); "
				"give back batch cpu.weight 10 -> 12 (multiplicative +25%, on the "
				"way back to 100)");
		}
		prev = f->acts[0].new_value;
	}
	/* 10 12 15 18 22 27 33 41 51 63 78 97 100 */
	assert_int_equal(gives, 12);
	assert_true(prev == 100);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	assert_string_equal(
		engine_verdict(f->e, 0),
		"large slack: web p99 999us <= target 2ms (slack 0.50, 60 windows above 0.20)");
}

/* A give-back returns what was taken: not above the first value seen. */
static void test_gives_back_only_what_was_taken(void **state)
{
	struct fx *f = *state;

	f->pol[1].cpu_quota.set = false;
	f->in[1].knob[KNOB_CPU_WEIGHT] = 40;
	start(f);
	window(f, 3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 20);
	for (int i = 0; i < 100; i++) {
		window(f, 0.5, 1000, NULL);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] <= 40);
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 40);

	/* Never cut, never given: large slack alone raises nothing. */
	f->in[1].knob[KNOB_CPU_WEIGHT] = 30;
	engine_free(f->e);
	start(f);
	for (int i = 0; i < 20; i++)
		assert_int_equal(window(f, 0.5, 1000, NULL), 0);
}

/* Quota goes home before weight; an unlimited quota ends unlimited again. */
static void test_gives_back_quota_first(void **state)
{
	struct fx *f = *state;
	bool weight_moved = false;

	f->in[1].cpu_usage = 2;
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 3, 1000, NULL);
	/* Down by a fifth after the first quota cut: it stands, and the next follows. */
	window(f, 2.3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.5, 1e-9);
	for (int i = 0; i < 100; i++) {
		window(f, 0.5, 1000, NULL);
		if (find(f, 1, KNOB_CPU_WEIGHT)) {
			weight_moved = true;
			assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
		}
		if (find(f, 1, KNOB_CPU_QUOTA))
			assert_false(weight_moved);
	}
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
}

/* Direction changes of batch's knobs over a run. */
static int reversals(struct fx *f, int ticks, double (*lat_ms)(int), int *changes)
{
	int last[KNOB_MAX] = { 0 }, rev = 0;

	*changes = 0;
	for (int i = 0; i < ticks; i++) {
		window(f, lat_ms(i), 1000, NULL);
		for (int a = 0; a < f->n; a++) {
			int dir = f->acts[a].new_value > f->acts[a].old_value ? 1 : -1;
			enum action_knob k = f->acts[a].knob;

			rev += last[k] && last[k] != dir;
			last[k] = dir;
			++*changes;
		}
	}
	return rev;
}

static double around_target(int i)
{
	return i % 2 ? 2.1 : 1.9; /* slack -0.05, +0.05 */
}

static double over_over_under(int i)
{
	return i % 3 == 2 ? 1.9 : 2.1;
}

static double around_give(int i)
{
	return i % 2 ? 1.5 : 1.7; /* slack 0.25, 0.15 */
}

static double in_hold_band(int i)
{
	return 1.62 + 0.36 * ((i * 7919) % 100) / 100.0; /* slack 0.01 .. 0.19 */
}

/*
 * A signal oscillating around the target cuts the weight down to its
 * floor, then holds it: never two windows over in a row, so no quota cut
 * (QUOTA_RUN). Over twice, then under: the quota's cuts make it no better.
 * The first, over then under, stands unproven; the next, under then over
 * twice, goes back with it; each cut after is undone at its second over
 * in a row and the next held off twice as long: three undos in 50
 * windows, none after.
 */
static void test_no_flapping(void **state)
{
	struct fx *f = *state;
	int changes;

	f->in[1].cpu_usage = 1;
	start(f);
	/* weight 100 -> 50 -> 25 -> 13 -> 10 */
	assert_int_equal(reversals(f, 50, around_target, &changes), 0);
	assert_int_equal(changes, 4);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	/* quota max -> 50% -> 25% -> max, then max -> 50% -> max twice */
	assert_int_equal(reversals(f, 50, over_over_under, &changes), 5);
	assert_int_equal(changes, 7);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_int_equal(reversals(f, 10, over_over_under, &changes), 0);
	assert_int_equal(changes, 0);
	/* Around the give-back threshold: the streak never reaches 3. */
	assert_int_equal(reversals(f, 50, around_give, &changes), 0);
	assert_int_equal(changes, 0);
	assert_int_equal(reversals(f, 50, in_hold_band, &changes), 0);
	assert_int_equal(changes, 0);
}

/* Too few requests: no verdict, no action, and the reason is given. */
static void test_too_few_requests(void **state)
{
	struct fx *f = *state;

	start(f);
	for (int i = 0; i < 20; i++)
		assert_int_equal(window(f, 50, 199, NULL), 0);
	assert_string_equal(engine_verdict(f->e, 0),
			    "no verdict: 199 requests in the window < MinRequests 200");
	assert_true(isnan(engine_slack(f->e, 0)));
	assert_int_equal(window(f, -1, 0, NULL), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);

	/* A window without a verdict breaks a slack streak. */
	window(f, 3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	for (int i = 0; i < 20; i++) {
		window(f, 0.5, 1000, NULL);
		window(f, 0.5, 1000, NULL);
		assert_int_equal(window(f, 0.5, 10, NULL), 0);
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);

	/* No window at all (ticks between windows): nothing either. */
	for (int i = 0; i < 5; i++) {
		f->now += SEC / 10;
		assert_int_equal(run_tick(f), 0);
	}
}

/* Cooldowns hold with late timers and with a caller that slides its window. */
static void test_cooldown(void **state)
{
	struct fx *f = *state;
	uint64_t t_cut[8], t_give[20];
	int cuts = 0, gives = 0;

	f->pol[1].cpu_quota.set = false;
	f->pol[0].window_ns = 2 * SEC;
	start(f);
	/* Windows end every 2s, each up to 200 ms late: one cut per window. */
	for (int i = 0; i < 4; i++) {
		f->now = (i + 1) * 2 * SEC + (i % 2 ? 200 * MS : 0);
		f->in[0] = (struct engine_input){ .have_window = true,
						  .requests = 1000,
						  .latency = lat_hist(&f->lat[0], 3 * MS, 1000) };
		no_knobs(&f->in[0]);
		assert_int_equal(run_tick(f), 1);
		t_cut[cuts++] = f->now;
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	/* Large slack, windows every 2 s: give-backs 4 windows after the cut, then every 2. */
	for (int i = 0; i < 40; i++) {
		f->now = t_cut[cuts - 1] + (i + 1) * 2 * SEC;
		f->in[0].have_window = true;
		f->in[0].latency = lat_hist(&f->lat[0], 1 * MS, 1000);
		if (run_tick(f))
			t_give[gives++] = f->now;
	}
	assert_int_equal(gives, 12);
	assert_true(t_give[0] - t_cut[cuts - 1] == 8 * SEC);
	for (int i = 1; i < gives; i++)
		assert_true(t_give[i] - t_give[i - 1] == 4 * SEC);

	/* A caller with a window every 100 ms tick: cuts stay 3/4 of a window apart. */
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	engine_free(f->e);
	start(f);
	cuts = 0;
	for (int i = 1; i <= 80; i++) {
		f->now = 1000 * SEC + i * 100 * MS;
		f->in[0].have_window = true;
		f->in[0].latency = lat_hist(&f->lat[0], 3 * MS, 1000);
		if (run_tick(f))
			t_cut[cuts++] = f->now;
		if (cuts == 4)
			break;
	}
	assert_int_equal(cuts, 4);
	for (int i = 1; i < cuts; i++)
		assert_true(t_cut[i] - t_cut[i - 1] == 1500 * MS);
}

/* A give-back that hurt is undone one window later, not four. */
static void test_protect_after_give_back(void **state)
{
	struct fx *f = *state;
	uint64_t t_give = 0;

	f->pol[1].cpu_quota.set = false;
	start(f);
	window(f, 3, 1000, NULL); /* 100 -> 50 */
	while (!t_give) {
		window(f, 1, 1000, NULL);
		if (f->n)
			t_give = f->now;
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 62);
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_true(f->now - t_give == SEC);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 31);
}

/* A plant: batch's cpu.weight above 55 makes web miss its 2 ms target. */
static double plant(const struct fx *f)
{
	return f->in[1].knob[KNOB_CPU_WEIGHT] > 55 ? 3 : 1;
}

/* Run the plant for n windows; the times of cuts after the first go to t_cut. */
static int relapses(struct fx *f, int n, uint64_t *t_cut, int max)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		const struct action *a;

		window(f, plant(f), 1000, NULL);
		a = find(f, 1, KNOB_CPU_WEIGHT);
		if (a && a->new_value < a->old_value && k < max)
			t_cut[k++] = f->now;
	}
	return k;
}

/*
 * Give-backs that hurt back off: a hog that harms above weight 55 is given
 * back into a violation a handful of times in 400 windows, each wait twice
 * the last, not every ninth window; home again, the back-off is forgotten.
 */
static void test_give_back_that_hurt_backs_off(void **state)
{
	struct fx *f = *state;
	uint64_t t_cut[64];
	int n;

	f->pol[1].cpu_quota.set = false;
	start(f);
	window(f, 3, 1000, NULL); /* 100 -> 50 */
	n = relapses(f, 400, t_cut, 64);
	/* Without the back-off: a relapse every 9 windows, 44 of them. */
	assert_true(n >= 4 && n <= 7);
	/* Waits of 8 and 16 windows end within the climb back; then they double. */
	for (int i = 2; i < n; i++)
		assert_true(t_cut[i] - t_cut[i - 1] >= t_cut[i - 1] - t_cut[i - 2]);
	assert_true(t_cut[n - 1] - t_cut[n - 2] >= 4 * (t_cut[2] - t_cut[1]));
	/* The knob never sat above 55 for more than the one window that showed it. */
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] <= 55);

	/* The reason of a relapse's cut says so. */
	f->pol[1].cpu_weight.lo = 10;
	for (int i = 0; i < 600 && !(find(f, 1, KNOB_CPU_WEIGHT) &&
				     strstr(find(f, 1, KNOB_CPU_WEIGHT)->reason, "hurt"));
	     i++)
		window(f, plant(f), 1000, NULL);
	assert_non_null(find(f, 1, KNOB_CPU_WEIGHT));
	assert_non_null(strstr(find(f, 1, KNOB_CPU_WEIGHT)->reason,
			       "; a give-back hurt: none above 47 for 256 windows)"));

	/* The hog goes away: the weight goes home and the back-off is forgotten. */
	for (int i = 0; i < 600 && f->in[1].knob[KNOB_CPU_WEIGHT] < 100; i++)
		window(f, 1, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	for (int i = 0; i < 3; i++) /* a violation right after would blame that give-back */
		window(f, 1, 1000, NULL);
	window(f, 3, 1000, NULL); /* 100 -> 50 */
	n = relapses(f, 30, t_cut, 64);
	/* First relapse at the first probe above 55, the next 8 windows of hold later. */
	assert_true(n >= 2);
	assert_true(t_cut[1] - t_cut[0] <= 12 * SEC);
}

/* Lock contention and the service's own load: neighbours are not throttled. */
static void test_lock_and_load_spare_neighbours(void **state)
{
	static const struct {
		enum diag_dominant d;
		enum diag_cause c;
		const char *why;
	} cases[] = {
		{ DIAG_LOCK, DIAG_CAUSE_UNKNOWN, "lock contention: neighbours not throttled" },
		{ DIAG_LOCK, DIAG_CAUSE_INTERFERENCE, "lock contention: neighbours not throttled" },
		{ DIAG_CPU, DIAG_CAUSE_LOAD, "the service's own load: neighbours not throttled" },
		{ DIAG_IO, DIAG_CAUSE_LOAD, "the service's own load: neighbours not throttled" },
		{ DIAG_NONE, DIAG_CAUSE_LOAD, "the service's own load: neighbours not throttled" },
		{ DIAG_NETWORK, DIAG_CAUSE_INTERFERENCE,
		  "network: no knob for it, neighbours not throttled" },
	};
	struct fx *f = *state;

	f->pol[0].cpu_freq_khz = range(1200000, INFINITY);
	f->pol[1].io_weight = range(10, 100);
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		struct diagnosis d = diag(cases[c].d, cases[c].c);

		f->in[0].knob[KNOB_CPU_FREQ] = 1500000;
		engine_free(f->e);
		start(f);
		/* The frequency may still rise: to what was seen, the ceiling of "max". */
		f->in[0].knob[KNOB_CPU_FREQ] = 3000000;
		window(f, 1, 1000, NULL);
		f->in[0].knob[KNOB_CPU_FREQ] = 1500000;
		assert_int_equal(window(f, 5, 1000, &d), 1);
		assert_non_null(find(f, 0, KNOB_CPU_FREQ));
		assert_true(f->in[0].knob[KNOB_CPU_FREQ] == 3000000);
		for (int i = 0; i < 20; i++)
			assert_int_equal(window(f, 5, 1000, &d), 0);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
		assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
		assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 100);
		assert_non_null(strstr(engine_verdict(f->e, 0), cases[c].why));
	}
}

/* The service's own CPU load: its own quota rises, neighbours are spared. */
static void test_own_load_raises_own_quota(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);

	f->pol[0].cpu_quota = range(0.5, 4);
	f->pol[0].cpu_weight = range(100, 1000);
	f->in[0].knob[KNOB_CPU_QUOTA] = 1;
	f->in[0].knob[KNOB_CPU_WEIGHT] = 100;
	start(f);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_string_equal(f->acts[0].reason,
			    "web p99 2.95ms > target 2ms (slack -0.47); diagnosis cpu/load "
			    "(runq_delay_us.p99 \u00d79.3); raise web cpu.max 100% -> 200% "
			    "(multiplicative raise)");
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_true(f->in[0].knob[KNOB_CPU_QUOTA] == 4);
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_true(f->in[0].knob[KNOB_CPU_WEIGHT] == 100);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
}

/*
 * Its own load grew while best-effort work uses CPU on the host: the CPU it
 * needs is theirs, so their weight is cut (and its own quota raised).
 * Measured: nginx's load doubling beside a hog at weight 13 was diagnosed
 * cpu/load, and 30 s of violations went by without a cut.
 */
static void test_own_load_with_busy_neighbours(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);

	f->in[1].cpu_usage = 0.3;
	start(f);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	assert_string_equal(
		engine_verdict(f->e, 0),
		"violation: web p99 2.95ms > target 2ms (slack -0.47); diagnosis cpu/load "
		"(runq_delay_us.p99 \u00d79.3); its own load grew and best-effort services "
		"use 30% of a CPU: taken from them");
	/* Own load with nothing standing out: the same while they use CPU. */
	struct diagnosis none = diag(DIAG_NONE, DIAG_CAUSE_LOAD);

	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	engine_free(f->e);
	start(f);
	assert_int_equal(window(f, 3, 1000, &none), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	assert_string_equal(
		engine_verdict(f->e, 0),
		"violation: web p99 2.95ms > target 2ms (slack -0.47); diagnosis none/load; "
		"its own load grew, nothing stands out, and best-effort services use 30% of "
		"a CPU: taken from them");
	/*
	 * At the idle weight (Weights=floor's default floor) they use only
	 * what it leaves: the verdict says so, and nothing is cut.
	 */
	f->pol[1].weights_floor = true;
	f->pol[1].cpu_weight = range(0, 100);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	engine_free(f->e);
	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(window(f, 3, 1000, &d), 0);
		assert_non_null(
			strstr(engine_verdict(f->e, 0),
			       "its own load grew and best-effort services use 30% of a "
			       "CPU: at the idle weight, only what it leaves; not cut for it"));
	}
	f->pol[1].weights_floor = false;
	f->pol[1].cpu_weight = range(10, 100);
	/* Idle neighbours (below 5% of a CPU) are spared as before. */
	f->in[1].cpu_usage = 0.01;
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	engine_free(f->e);
	start(f);
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
}

/* No action on a best-effort service in the last tick. */
static bool no_be_action(const struct fx *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->acts[i].service == 1)
			return false;
	return true;
}

/*
 * Its own load beyond what the CPU gives (co-location scenario 5): a
 * violation of its own load while best-effort work holds next to nothing
 * of the CPU (its weight at the floor, 1% of a CPU) says so and cuts
 * nothing, nor does the window before it that reads as any violation; it
 * goes on sparing them while the violations of its own load last, even
 * once they use CPU again (its backlog draining); a window
 * within the objective ends it, and the next own-load violation with busy
 * neighbours takes from them again (the load step of scenario 1).
 */
static void test_own_load_beyond_the_cpu(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	struct diagnosis none = diag(DIAG_NONE, DIAG_CAUSE_LOAD);
	struct diagnosis unk = diag(DIAG_CPU, DIAG_CAUSE_UNKNOWN);

	f->in[1].knob[KNOB_CPU_WEIGHT] = 10; /* at its floor */
	f->in[1].cpu_usage = 0.01;
	start(f);
	/* The step's first window reads as any violation: nor is their quota cut. */
	assert_int_equal(window(f, 3, 1000, &unk), 0);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_string_equal(
		engine_verdict(f->e, 0),
		"violation (own load): web p99 2.95ms > target 2ms (slack -0.47); diagnosis "
		"cpu/load (runq_delay_us.p99 ×9.3); its own load is beyond what the CPU "
		"gives: best-effort work holds 1% of a CPU, taking that cannot meet the "
		"objective; not cut while this lasts");
	/* They use CPU again, the diagnosis wavers: still not cut. */
	f->in[1].cpu_usage = 0.4;
	for (int i = 0; i < 6; i++) {
		window(f, 5, 1000, i % 3 == 0 ? &none : i % 3 == 1 ? &d : &unk);
		assert_true(no_be_action(f));
		assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	}
	assert_non_null(
		strstr(engine_verdict(f->e, 0),
		       "its own load is still beyond what the CPU gave it: best-effort work "
		       "(40% of a CPU) not cut until a window meets the objective"));
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	/* A window within the objective ends it, and the verdict says which end. */
	window(f, 1.8, 1000, &d);
	assert_true(!strncmp(engine_verdict(f->e, 0), "hold: ", 6));
	assert_non_null(
		strstr(engine_verdict(f->e, 0), "; own load over: a window within the objective"));
	/*
	 * Its own load again, with busy neighbours: the CPU it needs is
	 * theirs, their quota from the second window over at the floor.
	 */
	f->now += 2 * SEC;
	over_once(f, 3, &d);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_non_null(strstr(engine_verdict(f->e, 0), "taken from them"));
	window(f, 3, 1000, &d);
	assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
}

/*
 * What an episode of its own load cut before it was named (the first
 * window of a load step reads as any violation) goes back in one step to
 * the value before the episode at its first window of large slack.
 */
static void test_own_load_gives_back_the_episode(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	const struct action *a;

	f->in[1].cpu_usage = 0.5;
	start(f);
	window(f, 1, 1000, NULL); /* large slack: the calm value is 100 */
	window(f, 3, 1000, &d);	  /* a step of its own load, taken from them */
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	f->in[1].cpu_usage = 0.01;
	for (int i = 0; i < 5; i++) {
		window(f, 5, 1000, &d);
		assert_true(no_be_action(f));
	}
	window(f, 1.8, 1000, &d); /* hold: nothing given yet */
	assert_true(no_be_action(f));
	f->in[1].cpu_usage = 0.5;
	window(f, 1, 1000, &d);
	a = find(f, 1, KNOB_CPU_WEIGHT);
	assert_non_null(a);
	assert_true(a->new_value == 100);
	assert_non_null(strstr(a->reason, "its own load is back within the CPU: what was cut "
					  "while it went beyond, for nothing, back in one step"));
	/* Once: the next windows of slack have nothing of it to give. */
	window(f, 1, 1000, &d);
	assert_true(no_be_action(f));
}

/*
 * Interference while they hold CPU, two windows in a row, ends it: a
 * neighbour's doing is cut as before. While they hold next to nothing it
 * is its own backlog queueing.
 */
static void test_own_load_ends_on_interference(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	struct diagnosis intf = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	f->in[1].cpu_usage = 0.01;
	start(f);
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_int_equal(window(f, 3, 1000, &intf), 0);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	/* One window of it with them busy is not yet a neighbour: two in a row are. */
	f->in[1].cpu_usage = 0.5;
	assert_int_equal(window(f, 3, 1000, &intf), 0);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	window(f, 3, 1000, &intf);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_non_null(strstr(engine_verdict(f->e, 0),
			       "; own load over: 2 windows in a row read as not its own load, "
			       "best-effort work holding CPU; diagnosis cpu/interference"));
	assert_non_null(find(f, 1, KNOB_CPU_WEIGHT));
}

/*
 * Best-effort work held under 5% of a CPU by a quota we cut is not what its
 * own load leaves them: no claim of a load beyond the CPU.
 */
static void test_own_load_not_beyond_under_our_quota(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);

	f->in[1].cpu_usage = 0.8;
	f->in[1].knob[KNOB_CPU_WEIGHT] = 10;
	start(f);
	over_once(f, 3, &d);
	window(f, 3, 1000, &d); /* weight at its floor: the quota, half of its use */
	assert_true(f->in[1].knob[KNOB_CPU_QUOTA] == 0.4);
	f->in[1].cpu_usage = 0.04;
	f->in[1].knob[KNOB_CPU_QUOTA] = 0.06; /* as if cut further */
	window(f, 3, 1000, &d);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_non_null(strstr(engine_verdict(f->e, 0), "neighbours not throttled"));
}

/* A weight is cut by the square of the miss: 3x over the target (2.95x as read) cuts to 2/9 (0.23). */
static void test_weight_cut_scales_with_the_miss(void **state)
{
	struct fx *f = *state;

	f->pol[1].cpu_weight = range(1, 100);
	start(f);
	assert_int_equal(window(f, 6, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 23);
	assert_string_equal(
		f->acts[0].reason,
		"web p99 5.9ms > target 2ms (slack -1.95); no diagnosis: CPU knobs on slack "
		"alone; cut batch cpu.weight 100 -> 23 (multiplicative cut \u00d70.23 (latency "
		"2.9x its target), floor 1)");
	/* Up to 2x the target, halving; at most a sixteenth at once, however far over. */
	assert_int_equal(window(f, 2.5, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 12);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	engine_free(f->e);
	start(f);
	assert_int_equal(window(f, 500, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 7);
	assert_int_equal(window(f, 500, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 1);
	/* The quota still only halves: max -> half its use of 1 CPU. */
	f->in[1].cpu_usage = 1;
	window(f, 500, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.5, 1e-9);
}

/* An I/O diagnosis cuts io.weight, not the CPU knobs; memory goes to the quota. */
static void test_io_and_memory_routes(void **state)
{
	struct fx *f = *state;
	struct diagnosis io = diag(DIAG_IO, DIAG_CAUSE_INTERFERENCE);
	struct diagnosis mem = diag(DIAG_MEMORY, DIAG_CAUSE_UNKNOWN);

	f->pol[1].io_weight = range(10, 1000);
	f->in[1].knob[KNOB_IO_WEIGHT] = 500;
	f->pol[0].io_weight = range(100, 1000);
	f->in[0].knob[KNOB_IO_WEIGHT] = 100;
	f->in[1].cpu_usage = 1;
	start(f);
	assert_int_equal(window(f, 3, 1000, &io), 2);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 250);
	assert_true(f->in[0].knob[KNOB_IO_WEIGHT] == 200); /* given to web */
	assert_non_null(strstr(find(f, 0, KNOB_IO_WEIGHT)->reason,
			       "raise web io.weight 100 -> 200 (multiplicative raise)"));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));

	assert_int_equal(window(f, 3, 1000, &mem), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.5, 1e-9);
	assert_non_null(strstr(f->acts[0].reason, "weight cannot reach memory interference"));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 250);
}

/* A latency-critical service is given to, and never throttled below its own value. */
static void test_latency_critical_never_throttled(void **state)
{
	struct fx *f = *state;
	double lo[KNOB_MAX];

	f->pol[0].cpu_weight = range(10, 1000);
	f->pol[0].io_weight = range(10, 1000);
	f->pol[0].cpu_quota = range(0.5, 8);
	f->in[0].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[0].knob[KNOB_IO_WEIGHT] = 100;
	f->in[0].knob[KNOB_CPU_QUOTA] = 1;
	memcpy(lo, f->in[0].knob, sizeof(lo));
	start(f);
	window(f, 3, 1000, NULL);
	assert_true(f->in[0].knob[KNOB_CPU_WEIGHT] == 200);
	assert_true(f->in[0].knob[KNOB_CPU_QUOTA] == 2);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	for (int i = 0; i < 300; i++) {
		double lat = i < 100 ? (i % 3 ? 3 : 1) : i < 200 ? 0.2 : (i % 7 ? 0.5 : 4);

		window(f, lat, 1000, NULL);
		for (int a = 0; a < f->n; a++)
			if (f->acts[a].service == 0)
				assert_true(f->acts[a].new_value >= lo[f->acts[a].knob]);
	}
	/* After the long quiet stretch it came back to exactly where it was. */
	for (int i = 0; i < 100; i++)
		window(f, 0.2, 1000, NULL);
	assert_true(f->in[0].knob[KNOB_CPU_WEIGHT] == 100);
	assert_true(f->in[0].knob[KNOB_CPU_QUOTA] == 1);
	assert_true(f->in[0].knob[KNOB_IO_WEIGHT] == 100);
}

/* A knob someone else changed is left alone; the quota takes over. */
static void test_overridden_knob_left_alone(void **state)
{
	struct fx *f = *state;

	f->in[1].cpu_usage = 1;
	start(f);
	window(f, 3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 80;
	engine_knob_overridden(f->e, 1, KNOB_CPU_WEIGHT);
	engine_knob_overridden(f->e, 7, KNOB_CPU_WEIGHT); /* ignored */
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
	assert_non_null(strstr(f->acts[0].reason, "cpu.weight not ours to move"));
	for (int i = 0; i < 20; i++) {
		window(f, 3, 1000, NULL);
		assert_null(find(f, 1, KNOB_CPU_WEIGHT));
	}
	for (int i = 0; i < 100; i++) {
		window(f, 0.5, 1000, NULL);
		assert_null(find(f, 1, KNOB_CPU_WEIGHT));
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 80);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
}

/* Frequency up at low slack, down (for energy) at large slack, never when NAN. */
static void test_frequency(void **state)
{
	struct fx *f = *state;
	double prev;

	f->pol[0].cpu_freq_khz = range(1200000, 3000000);
	f->in[0].knob[KNOB_CPU_FREQ] = 2000000;
	f->pol[1].cpu_weight.set = false;
	f->pol[1].cpu_quota.set = false;
	start(f);
	/* Slack 0.025: no violation, but the frequency rises at once. */
	assert_int_equal(window(f, 1.95, 1000, NULL), 1);
	assert_true(f->in[0].knob[KNOB_CPU_FREQ] == 3000000);
	assert_string_equal(f->acts[0].reason,
			    "web p99 1.93ms <= target 2ms (slack 0.03); raise web "
			    "cpufreq 2000MHz -> 3000MHz (slack below 0.05: frequency "
			    "to the ceiling)");
	/* Large slack: 10% of the range down, every other window, to the floor. */
	prev = 3000000;
	for (int i = 0; i < 60; i++) {
		window(f, 0.5, 1000, NULL);
		if (!f->n)
			continue;
		assert_true(prev - f->acts[0].new_value <= 180000);
		prev = f->acts[0].new_value;
	}
	assert_true(f->in[0].knob[KNOB_CPU_FREQ] == 1200000);
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_true(f->in[0].knob[KNOB_CPU_FREQ] == 3000000);

	/* Unavailable: never touched. */
	f->in[0].knob[KNOB_CPU_FREQ] = NAN;
	for (int i = 0; i < 30; i++) {
		window(f, i < 10 ? 4 : 0.2, 1000, NULL);
		assert_int_equal(f->n, 0);
	}
	/* Available, but not in the policy: never touched. */
	f->in[0].knob[KNOB_CPU_FREQ] = 2000000;
	f->pol[0].cpu_freq_khz.set = false;
	for (int i = 0; i < 30; i++)
		assert_int_equal(window(f, i < 10 ? 4 : 0.2, 1000, NULL), 0);
}

/* Any latency-critical service's violation cuts; a give-back needs them all. */
static void test_several_latency_critical(void **state)
{
	struct fx *f = *state;

	lc_policy(&f->pol[2], "api");
	f->pol[2].target_ns = 10 * MS;
	f->set.n = 3;
	f->pol[1].cpu_quota.set = false;
	start(f);
	/* web fine, api violated: cut, named api. */
	f->in[2] = (struct engine_input){ .have_window = true,
					  .requests = 500,
					  .latency = lat_hist(&f->lat[2], 12 * MS, 500) };
	no_knobs(&f->in[2]);
	assert_int_equal(window(f, 1.5, 1000, NULL), 1);
	assert_non_null(strstr(f->acts[0].reason, "api p99 11.8ms > target 10ms (slack -0.18)"));
	/* Both violated: the worse one is named. */
	f->in[2].have_window = true;
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_true(strncmp(f->acts[0].reason, "web p99 2.95ms", 14) == 0);
	/* web in large slack, api holds: no give-back. */
	for (int i = 0; i < 10; i++) {
		f->in[2].have_window = true;
		f->in[2].latency = lat_hist(&f->lat[2], 9 * MS, 500);
		assert_int_equal(window(f, 0.5, 1000, NULL), 0);
	}
	/* api stops reporting: its verdict expires after 3 windows, web alone decides. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(window(f, 0.5, 1000, NULL), 0);
	assert_int_equal(window(f, 0.5, 1000, NULL), 1);
	assert_string_equal(engine_verdict(f->e, 2), "no verdict: no window for 3 windows");
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] > 25);
}

/* Too small an action array: -ENOSPC, and nothing is remembered. */
static void test_enospc(void **state)
{
	struct fx *f = *state;
	struct action one;

	start(f);
	f->now = SEC;
	f->in[0] = (struct engine_input){ .have_window = true,
					  .requests = 1000,
					  .latency = lat_hist(&f->lat[0], 3 * MS, 1000) };
	no_knobs(&f->in[0]);
	assert_int_equal(engine_tick(f->e, f->now, f->in, &one, 0), -ENOSPC);
	assert_int_equal(engine_tick(f->e, f->now, f->in, &one, 1), 1);
	assert_true(one.new_value == 50);
}

/*
 * A second LC service, api (p99 target 10 ms, no knobs), beside web; batch
 * busy with its CPU weight at its floor. Then start().
 */
static void start_with_api(struct fx *f)
{
	lc_policy(&f->pol[2], "api");
	f->pol[2].target_ns = 10 * MS;
	f->set.n = 3;
	no_knobs(&f->in[2]);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 10;
	f->in[1].cpu_usage = 0.6;
	start(f);
}

/* A window of web at web_ms and of api (LC service 2, p99 target 10 ms) at api_ms. */
static int windows2(struct fx *f, double web_ms, double api_ms, const struct diagnosis *d)
{
	f->in[2].have_window = true;
	f->in[2].requests = 500;
	f->in[2].latency = lat_hist(&f->lat[2], api_ms * MS, 500);
	f->in[2].diag = d;
	return window(f, web_ms, 1000, d);
}

/*
 * The opening of the quota-cut tests: batch's weight at its floor, using
 * 0.6 of a CPU; web over its 2 ms objective at 3 ms long enough for a cut
 * (diagnosis d), and the first cut, max -> 30%, made.
 */
static void quota_cut_once(struct fx *f, const struct diagnosis *d)
{
	f->in[1].knob[KNOB_CPU_WEIGHT] = 10; /* at its floor */
	f->in[1].cpu_usage = 0.6;
	start(f);
	over_once(f, 3, d);
	assert_int_equal(window(f, 3, 1000, d), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
}

/*
 * A quota cut that leaves the service no better in two windows in a row is
 * undone at the second, in one step, and quota cuts of the neighbour are
 * held off:
 * 8 windows, then 16 after the next such cut; a cut that helps forgets the
 * doubling. Measured: past the weight's floor the hog's quota took its CPU
 * and raised nginx's p99 (74 us -> 200-300 us), and the demo's loop cut it
 * to its 5% floor and held it there through the hog's whole phase.
 */
static void test_quota_cut_that_did_not_help_is_undone(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;
	uint64_t t_undo;

	quota_cut_once(f, &d);
	/*
	 * The next two windows a tenth lower, not a fifth: the first leaves the
	 * cut in doubt (no further cut), the second takes it back to what it
	 * was, in one step.
	 */
	assert_int_equal(window(f, 2.7, 1000, &d), 0);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_int_equal(window(f, 2.6, 1000, &d), 1);
	a = find(f, 1, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_true(isinf(a->new_value));
	assert_string_equal(a->reason,
			    "web p99 2.56ms > target 2ms (slack -0.28); diagnosis cpu/interference "
			    "(runq_delay_us.p99 \u00d79.3); undo batch cpu.max 30% -> max (its cut "
			    "max -> 30% did not bring web down by a fifth in two windows in a row "
			    "(p99 2.95ms -> 2.69ms, 2.56ms): quota cuts of batch held off for 8 "
			    "windows)");
	/* Held off for 8 windows, however bad; then one cut to see again. */
	t_undo = f->now;
	while (!window(f, 3.5, 1000, &d))
		assert_true(f->now - t_undo < 8 * SEC);
	assert_true(f->now - t_undo == 8 * SEC);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	/* Worse after it, twice: undone again, held off twice as long. */
	assert_int_equal(window(f, 4, 1000, &d), 0);
	assert_int_equal(window(f, 4, 1000, &d), 1);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_non_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason, "held off for 16 windows"));
	t_undo = f->now;
	while (!window(f, 3, 1000, &d))
		assert_true(f->now - t_undo < 16 * SEC);
	assert_true(f->now - t_undo == 16 * SEC);
	/* A cut that helps in the window after it stands, and the next is made as before... */
	assert_int_equal(window(f, 2.2, 1000, &d), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
	assert_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason, "undo"));
	/*
	 * ...but one window is no proof: the next two, 2.5 ms, are not a
	 * fifth below either cut's 3 and 2.2 ms, and both go, back to max.
	 */
	assert_int_equal(window(f, 2.5, 1000, &d), 0);
	assert_int_equal(window(f, 2.5, 1000, &d), 1);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_non_null(
		strstr(find(f, 1, KNOB_CPU_QUOTA)->reason,
		       "undo batch cpu.max 15% -> max (its cut 30% -> 15% did not bring "
		       "web down by a fifth in two windows in a row (p99 2.16ms -> 2.56ms, "
		       "2.56ms); no cut since max proven by two windows: quota cuts of batch "
		       "held off for 32 windows)"));
	/* Two windows within the objective after a cut prove it... */
	for (int i = 0; i < 32; i++)
		window(f, 3, 1000, &d);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_int_equal(window(f, 1.9, 1000, &d), 0);
	assert_int_equal(window(f, 1.9, 1000, &d), 0);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	/* ...so a later cut that does not help goes back to it, held off 8 windows, not 64. */
	over_once(f, 3, &d);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_non_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason, "held off for 8 windows"));
}

/*
 * One met window after a cut is not proof. In a `make demo` run web's
 * cut 29% -> 15% met one engine window, lying between two of the client's
 * OVER seconds, and the next verdict, no better, drove a further cut
 * instead of undoing it: the hog stayed at 15% through its phase. The
 * verdicts after the met one judge the cut again: the first no better
 * leaves it in doubt and cuts no further, the second undoes it.
 */
static void test_quota_cut_needs_two_windows(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;

	quota_cut_once(f, &d);
	assert_int_equal(window(f, 1.9, 1000, &d), 0); /* met: one window */
	assert_int_equal(window(f, 3.1, 1000, &d), 0); /* in doubt: no further cut */
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_int_equal(window(f, 3.1, 1000, &d), 1);
	a = find(f, 1, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_true(isinf(a->new_value));
	assert_non_null(strstr(a->reason, "undo batch cpu.max 30% -> max"));
}

/*
 * One window no better is not proof either: a cut in doubt that the next
 * window finds better stands, unproven. The ladder goes on from it, and an
 * undo of a later cut goes back past it. On a 2-vCPU guest the first cuts
 * of scenario 2's ladders were undone on one window each (nginx 770 ->
 * 672 us, 868 -> 705 us) where quotas of 5 % and less cost nginx a third as
 * many seconds over as none (docs/benchmarks.md).
 */
static void test_quota_cut_in_doubt_stands_on_a_better_window(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;

	quota_cut_once(f, &d);
	assert_int_equal(window(f, 2.7, 1000, &d), 0); /* no better: in doubt */
	assert_int_equal(window(f, 1.9, 1000, &d), 0); /* met: it stands */
	assert_int_equal(window(f, 1.9, 1000, &d), 0);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	over_once(f, 3, &d);
	assert_int_equal(window(f, 3, 1000, &d), 1); /* the ladder goes on */
	a = find(f, 1, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_null(strstr(a->reason, "held off"));
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
	assert_int_equal(window(f, 3, 1000, &d), 0);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	a = find(f, 1, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_true(isinf(a->new_value));
	assert_non_null(strstr(a->reason, "no cut since max proven by two windows"));
}

/*
 * A window with too few requests for a verdict right after the cut: the
 * next verdict judges it; with none for two windows it stands.
 */
static void test_quota_cut_judged_within_two_windows(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	quota_cut_once(f, &d);
	assert_int_equal(window(f, 3, 10, &d), 0);
	assert_int_equal(window(f, 3, 1000, &d), 0); /* no better: in doubt */
	assert_int_equal(window(f, 3, 10, &d), 0);
	assert_int_equal(window(f, 3, 1000, &d), 1);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	for (int i = 0; i < 8; i++)
		window(f, 3, 1000, &d);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9); /* the hold ended */
	window(f, 3, 10, &d);
	window(f, 3, 10, &d);
	/* Judged no more; the run of violations starts again after them. */
	over_once(f, 3, &d);
	assert_int_equal(window(f, 3, 1000, &d), 1); /* the next cut */
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
}

/*
 * A cut whose write did not take (the knob still reads its old value: on v1
 * a quota above the parent's is EINVAL) is not judged: nothing held off,
 * the cut is asked for again (test_faults knob_fail_log needs the retries).
 */
static void test_quota_cut_not_in_force_is_not_judged(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	int cuts = 0;

	f->in[1].knob[KNOB_CPU_WEIGHT] = 10;
	f->in[1].cpu_usage = 0.6;
	start(f);
	for (int i = 0; i < 6; i++) {
		if (window(f, 3, 1000, &d)) {
			const struct action *a = find(f, 1, KNOB_CPU_QUOTA);

			assert_non_null(a);
			assert_null(strstr(a->reason, "held off"));
			assert_float_equal(a->new_value, 0.3, 1e-9);
			cuts++;
		}
		f->in[1].knob[KNOB_CPU_QUOTA] = INFINITY; /* the write failed */
	}
	assert_true(cuts >= 3);
}

/*
 * The hold-off is the neighbour's: while web's cuts of batch's quota are
 * held off, another latency-critical service's violation does not cut it
 * either (the throttling that did not help web costs api too; in a demo
 * run files' undone cut was followed by web's walking the hog down by
 * halves); once the hold ends, api's violation cuts it, named in the
 * reason.
 */
static void test_quota_hold_is_per_neighbour(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	uint64_t t_undo;

	start_with_api(f);
	assert_int_equal(windows2(f, 3, 5, &d), 0); /* one window over: no cut yet */
	assert_int_equal(windows2(f, 3, 5, &d), 1);
	assert_int_equal(windows2(f, 3, 5, &d), 0); /* in doubt */
	assert_int_equal(windows2(f, 3, 5, &d), 1); /* undone: web held off */
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_non_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason,
			       "quota cuts of batch held off for 8 windows"));
	t_undo = f->now;
	while (!windows2(f, 1.9, 12, &d))
		assert_true(f->now - t_undo < 8 * SEC); /* api misses, held all the same */
	assert_true(f->now - t_undo == 8 * SEC);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_true(!strncmp(find(f, 1, KNOB_CPU_QUOTA)->reason, "api p99 11.8ms", 14));
}

/*
 * A service's window proves only the cuts it drove: api's cut is followed,
 * in the tick of api's first met window, by web's; web's one met window and
 * then two misses no better undo both, back to max (in a `make demo` run web's
 * window "proved" files' cut and the hog sat at 24 % with web over for 16 s).
 */
static void test_quota_cut_proven_by_its_driver(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;

	start_with_api(f);
	assert_int_equal(windows2(f, 1.9, 12, &d), 0); /* api over once: no cut yet */
	assert_int_equal(windows2(f, 3, 12, &d), 1);   /* api's cut: web over once */
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_int_equal(windows2(f, 3, 9, &d), 1); /* api met; web's cut */
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
	assert_int_equal(windows2(f, 1.9, 9, &d), 0); /* web met once */
	assert_int_equal(windows2(f, 3, 9, &d), 0);   /* then no better: in doubt */
	assert_int_equal(windows2(f, 3, 9, &d), 1);
	a = find(f, 1, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_true(isinf(a->new_value));
	assert_non_null(strstr(a->reason, "no cut since max proven by two windows"));
}

/* splitmix64: the same sequence every run. */
static uint64_t rng_state = 42;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double rng_unit(void)
{
	return (rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static const struct policy_range *prange(const struct policy *p, enum action_knob k)
{
	return k == KNOB_CPU_QUOTA  ? &p->cpu_quota :
	       k == KNOB_CPU_WEIGHT ? &p->cpu_weight :
	       k == KNOB_IO_WEIGHT  ? &p->io_weight :
				      &p->cpu_freq_khz;
}

struct prop {
	double home[MAX_SVC][KNOB_MAX];
	bool hands_off[MAX_SVC][KNOB_MAX];
	uint64_t last_ns[MAX_SVC][KNOB_MAX];
	int last_dir[MAX_SVC][KNOB_MAX];
	/* The value before the first of a BE knob's cuts since it last rose. */
	double cut_from[MAX_SVC][KNOB_MAX];
	bool cutting[MAX_SVC][KNOB_MAX];
	unsigned cuts, gives, raises, lowers, undos;
};

/* Every rule an action must keep, whatever came before. */
static void check_action(const struct fx *f, struct prop *pr, const struct action *a, uint64_t now)
{
	const struct policy *p = &f->pol[a->service];
	const struct policy_range *r = prange(p, a->knob);
	double old = a->old_value, new = a->new_value, home = pr->home[a->service][a->knob];
	int dir = new > old ? 1 : -1;
	uint64_t since = now - pr->last_ns[a->service][a->knob];
	/* A quota cut that did not help, taken back in one step: a protect, as the cut was. */
	bool undo = !strncmp(strstr(a->reason, "; undo ") ? strstr(a->reason, "; undo ") + 2 : "",
			     "undo ", 5);

	assert_true(r->set);
	assert_false(pr->hands_off[a->service][a->knob]);
	assert_true(new >= r->lo &&new <= r->hi);
	assert_false(isnan(new) || new == old);
	assert_true(old == f->in[a->service].knob[a->knob] ||
		    (isinf(old) && isinf(f->in[a->service].knob[a->knob])));
	if (p->klass == POLICY_LATENCY_CRITICAL) {
		if (dir < 0 && a->knob != KNOB_CPU_FREQ)
			assert_true(new >= home);
		if (dir < 0)
			assert_true(old - new <= 0.1 * (r->hi - r->lo) + 1 || new == home);
		if (dir > 0 && a->knob != KNOB_CPU_FREQ)
			assert_true(new <= 2 * old);
		dir > 0 ? pr->raises++ : pr->lowers++;
	} else {
		assert_true(a->knob != KNOB_CPU_FREQ);
		if (undo) {
			/* Right after a cut of it, to no more than what its cuts since it last rose took. */
			assert_true(a->knob == KNOB_CPU_QUOTA && dir > 0);
			assert_true(pr->last_dir[a->service][a->knob] < 0);
			assert_true(new <= pr->cut_from[a->service][a->knob] && new <= home);
			/*
			 * Judged by its driver's next two verdicts, each within two of
			 * its windows after the last (3 s here at most).
			 */
			assert_true(since >= 750 * MS && since <= 13500 * MS);
			pr->cutting[a->service][a->knob] = false;
			pr->undos++;
			pr->last_ns[a->service][a->knob] = now;
			return;
		}
		if (dir < 0 && !pr->cutting[a->service][a->knob]) {
			pr->cut_from[a->service][a->knob] = old;
			pr->cutting[a->service][a->knob] = true;
		}
		if (dir > 0)
			pr->cutting[a->service][a->knob] = false;
		/* A quota cut at most halves; a weight cut at most divides by 16. */
		if (dir < 0 && isfinite(old) && old <= r->hi)
			assert_true(new >= old / (a->knob == KNOB_CPU_QUOTA ? 2 : 16) - 1e-9);
		if (dir > 0) {
			assert_true(new <= home);
			if (a->knob == KNOB_CPU_QUOTA && isfinite(r->hi))
				assert_true(new - old <= 0.1 * (r->hi - r->lo) + 1);
			if (a->knob != KNOB_CPU_QUOTA)
				assert_true(new <= 1.25 * old + 1 || new == home);
		}
		dir < 0 ? pr->cuts++ : pr->gives++;
	}
	/* Cooldowns, in the shortest window of the set (1 s), less a quarter. */
	if (pr->last_dir[a->service][a->knob]) {
		int last = pr->last_dir[a->service][a->knob];
		bool protect = (p->klass == POLICY_BEST_EFFORT) == (dir < 0);
		bool last_protect = (p->klass == POLICY_BEST_EFFORT) == (last < 0);

		assert_true(since >= 750 * MS);
		if (!protect)
			assert_true(since >= (last_protect ? 3750 : 1750) * MS);
	}
	pr->last_dir[a->service][a->knob] = dir;
	pr->last_ns[a->service][a->knob] = now;
}

static struct diagnosis random_diag(void)
{
	return diag(rng_next() % 6, rng_next() % 3);
}

/* Long random sequences: bounds, steps, cooldowns and hands-off always hold. */
static void test_random_sequences_keep_the_rules(void **state)
{
	struct fx *f = *state;
	struct diagnosis d[2];
	struct prop pr = { 0 };

	lc_policy(&f->pol[2], "api");
	f->pol[2].window_ns = 3 * SEC;
	f->pol[2].min_requests = 50;
	f->pol[0].cpu_weight = range(100, 2000);
	f->pol[0].cpu_quota = range(1, INFINITY);
	f->pol[0].cpu_freq_khz = range(800000, INFINITY);
	f->pol[2].io_weight = range(50, 500);
	f->pol[2].cpu_freq_khz = range(1000000, 2500000);
	be_policy(&f->pol[3], "hog");
	f->pol[3].cpu_weight = range(1, 10000);
	f->pol[3].cpu_quota = range(0.05, 4);
	f->pol[3].io_weight = range(5, 200);
	f->pol[1].io_weight = range(10, 100);
	f->set.n = 4;
	f->in[0].knob[KNOB_CPU_WEIGHT] = 50; /* below its range */
	f->in[0].knob[KNOB_CPU_QUOTA] = 2;
	f->in[0].knob[KNOB_CPU_FREQ] = 2400000;
	f->in[2].knob[KNOB_IO_WEIGHT] = 100;
	f->in[2].knob[KNOB_CPU_FREQ] = 1800000;
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	f->in[3].knob[KNOB_CPU_WEIGHT] = 20000; /* above its range */
	f->in[3].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[3].knob[KNOB_IO_WEIGHT] = 100;
	for (int i = 0; i < MAX_SVC; i++)
		for (int k = 0; k < KNOB_MAX; k++) {
			const struct policy_range *r = prange(&f->pol[i], k);

			pr.home[i][k] = fmin(fmax(f->in[i].knob[k], r->lo), r->hi);
		}
	start(f);
	for (int t = 1; t <= 20000; t++) {
		/* Regimes of 50 ticks: bad, noisy, or quiet. */
		double scale = (t / 50) % 3 == 0 ? 1.6 : (t / 50) % 3 == 1 ? 1.0 : 0.4;

		f->now = t * SEC + rng_next() % (200 * MS);
		for (int s = 0; s < 3; s += 2) {
			double lat = f->pol[s].target_ns * scale * (0.6 + 0.8 * rng_unit());

			f->in[s].have_window = s == 0 || t % 3 == 0;
			f->in[s].latency = lat_hist(&f->lat[s], rng_next() % 50 ? lat : -1, 1000);
			f->in[s].requests = rng_next() % 1000;
			d[s / 2] = random_diag();
			f->in[s].diag = rng_next() % 4 ? &d[s / 2] : NULL;
		}
		f->in[1].cpu_usage = rng_next() % 3 ? 4 * rng_unit() : 0;
		f->in[3].cpu_usage = rng_next() % 3 ? 4 * rng_unit() : NAN;
		if (rng_next() % 500 == 0) {
			int s = rng_next() % 4, k = rng_next() % KNOB_MAX;

			engine_knob_overridden(f->e, s, k);
			pr.hands_off[s][k] = true;
		}
		f->n = engine_tick(f->e, f->now, f->in, f->acts,
				   sizeof(f->acts) / sizeof(*f->acts));
		assert_true(f->n >= 0);
		for (int a = 0; a < f->n; a++) {
			for (int b = 0; b < a; b++)
				assert_false(f->acts[a].service == f->acts[b].service &&
					     f->acts[a].knob == f->acts[b].knob);
			check_action(f, &pr, &f->acts[a], f->now);
		}
		/* One write in ten fails: the knob keeps its value. */
		for (int a = 0; a < f->n; a++)
			if (rng_next() % 10)
				f->in[f->acts[a].service].knob[f->acts[a].knob] =
					f->acts[a].new_value;
	}
	print_message("random: %u cuts, %u give-backs, %u raises, %u lowers, %u undos\n", pr.cuts,
		      pr.gives, pr.raises, pr.lowers, pr.undos);
	assert_true(pr.cuts > 100 && pr.gives > 100 && pr.raises > 20 && pr.lowers > 20);
}

/* Slice=: web's threads get 0.3 ms; the knob reads 0 (their own slices) until then. */
static void slice_policy(struct fx *f)
{
	f->pol[0].slice_ns = range(300000, 300000);
	f->in[0].knob[KNOB_SCHED_SLICE] = 0;
}

/* A CPU violation gives the short slice first, alone; the cuts come a window later. */
static void test_slice_first_rung(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	slice_policy(f);
	start(f);
	assert_int_equal(window(f, 3.42, 1000, &d), 1);
	assert_int_equal(f->acts[0].service, 0);
	assert_int_equal(f->acts[0].knob, KNOB_SCHED_SLICE);
	assert_true(f->acts[0].old_value == 0 && f->acts[0].new_value == 300000);
	assert_string_equal(
		f->acts[0].reason,
		"web p99 3.47ms > target 2ms (slack -0.74); diagnosis cpu/interference "
		"(runq_delay_us.p99 \u00d79.3); raise web sched.slice default -> 300us "
		"(the short slice first: a waking request waits behind one short slice, "
		"best-effort throughput is not cut)");
	/* Still missing a window later: the best-effort cuts, the slice stays. */
	assert_int_equal(window(f, 3.42, 1000, &d), 1);
	assert_non_null(find(f, 1, KNOB_CPU_WEIGHT));
	assert_null(find(f, 0, KNOB_SCHED_SLICE));
	assert_true(f->in[0].knob[KNOB_SCHED_SLICE] == 300000);
	/* Neither I/O nor the service's own load is a reason for it. */
	engine_free(f->e);
	f->e = NULL;
	f->in[0].knob[KNOB_SCHED_SLICE] = 0;
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	start(f);
	d = diag(DIAG_IO, DIAG_CAUSE_INTERFERENCE);
	window(f, 3.42, 1000, &d);
	assert_null(find(f, 0, KNOB_SCHED_SLICE));
	d = diag(DIAG_LOCK, DIAG_CAUSE_INTERFERENCE);
	window(f, 3.42, 1000, &d);
	assert_null(find(f, 0, KNOB_SCHED_SLICE));
}

/* With the best-effort service idle, the short slice still comes alone, before its quota. */
static void test_slice_first_rung_idle(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	slice_policy(f);
	f->pol[1].weights_floor = true;
	f->pol[1].cpu_weight = range(0, 100);
	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	assert_int_equal(window(f, 3.42, 1000, &d), 1);
	assert_int_equal(f->acts[0].knob, KNOB_SCHED_SLICE);
	assert_int_equal(window(f, 3.42, 1000, &d), 1);
	assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
}

/* Without kernel support (NAN) or without Slice=, the ladder starts with the weight as before. */
static void test_slice_unavailable(void **state)
{
	struct fx *f = *state;

	slice_policy(f);
	f->in[0].knob[KNOB_SCHED_SLICE] = NAN;
	start(f);
	assert_int_equal(window(f, 3.42, 1000, NULL), 1);
	assert_non_null(find(f, 1, KNOB_CPU_WEIGHT));
}

/* The slice comes back last: after every cut is given back, a window later at the earliest. */
static void test_slice_given_back_last(void **state)
{
	struct fx *f = *state;
	int slice_at = -1, weight_home_at = -1;

	slice_policy(f);
	start(f);
	for (int i = 0; i < 3; i++)
		window(f, 3.42, 1000, NULL);
	assert_true(f->in[0].knob[KNOB_SCHED_SLICE] == 300000);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] < 100);
	for (int i = 0; i < 80 && slice_at < 0; i++) {
		window(f, 0.5, 1000, NULL);
		if (weight_home_at < 0 && f->in[1].knob[KNOB_CPU_WEIGHT] == 100)
			weight_home_at = i;
		if (find(f, 0, KNOB_SCHED_SLICE)) {
			slice_at = i;
			assert_string_equal(
				find(f, 0, KNOB_SCHED_SLICE)->reason,
				"web p99 500us <= target 2ms (slack 0.75, 17 windows above 0.20); "
				"lower web sched.slice 300us -> default (large slack and everything "
				"else given back: the threads' own slices again)");
		}
	}
	assert_true(weight_home_at >= 0);
	assert_true(slice_at > weight_home_at);
	assert_true(f->in[0].knob[KNOB_SCHED_SLICE] == 0);
}

/*
 * Weights=floor: the first window with a verdict, even in large slack,
 * puts the weights at their floor; give-backs leave them there (quota
 * only); a violation at the floor goes to the quota after a window; when
 * web stops serving, the weights go home after 3 windows, in one step.
 */
static void test_weights_floor(void **state)
{
	struct fx *f = *state;

	f->pol[1].weights_floor = f->pol[1].weights_floor_io = true; /* Weights=floor written */
	f->pol[1].io_weight = range(10, 100);
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 2);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10 && f->in[1].knob[KNOB_IO_WEIGHT] == 10);
	assert_string_equal(
		find(f, 1, KNOB_CPU_WEIGHT)->reason,
		"web p99 303us <= target 2ms (slack 0.85, 1 window above 0.20); cut batch "
		"cpu.weight 100 -> 10 (Weights=floor: a latency-critical service serves; a "
		"weight only orders wake-ups, so its floor costs nothing while there is room)");
	/* Long slack: nothing to give back but what reactive cuts took. */
	for (int i = 0; i < 20; i++)
		assert_int_equal(window(f, 0.3, 1000, NULL), 0);
	/*
	 * A violation at the floor: no cut, the floor held the windows before
	 * it; the second in a row cuts the quota.
	 */
	over_once(f, 3.42, NULL);
	assert_int_equal(window(f, 3.42, 1000, NULL), 1);
	assert_string_equal(find(f, 1, KNOB_CPU_QUOTA)->reason,
			    "web p99 3.47ms > target 2ms (slack -0.74); no diagnosis: CPU knobs "
			    "on slack alone; cut batch cpu.max max -> 50% (cpu.weight at its floor "
			    "for a window, 2 windows over in a row; its use unknown: half of one "
			    "CPU; multiplicative cut, floor 10%)");
	/* Slack again: the quota comes back, the weights stay. */
	for (int i = 0; i < 30; i++)
		window(f, 0.3, 1000, NULL);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10 && f->in[1].knob[KNOB_IO_WEIGHT] == 10);
	/* Too few requests: no verdict. Home after 3 windows, not before. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(window(f, 0.3, 10, NULL), 0);
	assert_int_equal(window(f, 0.3, 10, NULL), 2);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100 && f->in[1].knob[KNOB_IO_WEIGHT] == 100);
	assert_string_equal(
		find(f, 1, KNOB_CPU_WEIGHT)->reason,
		"give back batch cpu.weight 10 -> 100 (Weights=floor: no latency-critical "
		"service has served for 3 windows; back home)");
	/* Serving again: the floor again. */
	assert_int_equal(window(f, 0.3, 1000, NULL), 2);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	/* A new instance (a restarted unit, weights at its defaults): held at the
	 * floor at its first tick, not at the next verdict. */
	engine_service_reset(f->e, 1);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	f->now += SEC / 2;
	assert_int_equal(run_tick(f), 2);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10 && f->in[1].knob[KNOB_IO_WEIGHT] == 10);
}

/*
 * Weights=floor yields to its own load beyond the CPU (co-location scenario
 * 5): the floor would give the LC service CPU that cannot meet its
 * objective, so the CPU weight goes home (the I/O weight stays) while the
 * overload lasts, and the verdict says so, whatever the queueing behind
 * the hog then reads as while its load is up; when the load falls back
 * (two windows in a row read as anything but its own load, the neighbour
 * holding CPU) the floor comes back. A second LC service that still serves within reach
 * keeps the floor for both.
 */
static void test_own_load_yields_the_floor(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	struct diagnosis intf = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	struct diagnosis unk = diag(DIAG_NONE, DIAG_CAUSE_UNKNOWN);
	const struct action *a;

	f->pol[1].weights_floor = f->pol[1].weights_floor_io = true;
	f->pol[1].io_weight = range(10, 100);
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	f->in[1].cpu_usage = 0.01;
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 0.3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10 && f->in[1].knob[KNOB_IO_WEIGHT] == 10);
	/* Its own load beyond the CPU, the hog squeezed at its floor: home. */
	assert_int_equal(window(f, 3, 1000, &d), 1);
	a = find(f, 1, KNOB_CPU_WEIGHT);
	assert_non_null(a);
	assert_true(a->new_value == 100 && f->in[1].knob[KNOB_IO_WEIGHT] == 10);
	assert_non_null(strstr(a->reason, "give back batch cpu.weight 10 -> 100 (Weights=floor "
					  "yields: the latency-critical services' own load is "
					  "beyond what the CPU gives"));
	assert_non_null(
		strstr(engine_verdict(f->e, 0), "not cut while this lasts, Weights=floor at home"));
	/*
	 * It takes its share; the overload goes on, read as its own load or
	 * (the queueing behind the hog we let in) interference while its load
	 * is up: held.
	 */
	f->in[1].cpu_usage = 0.5;
	intf.load_up = d.load_up = true;
	for (int i = 0; i < 8; i++) {
		assert_int_equal(window(f, 4, 1000, i % 4 == 3 ? &d : &intf), 0);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	}
	assert_non_null(strstr(engine_verdict(f->e, 0), "Weights=floor at home"));
	/*
	 * Its load no longer up, the latency still no lower than at the floor
	 * (3 ms): its backlog, not yet the hog's doing: held.
	 */
	intf.load_up = false;
	for (int i = 0; i < 3; i++) {
		window(f, 3.5, 1000, &intf);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	}
	/* The load falls back, its backlog drained (2 ms): nothing, then interference: the floor. */
	window(f, 2.5, 1000, &unk);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	window(f, 2.5, 1000, &intf);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_non_null(strstr(engine_verdict(f->e, 0),
			       "; own load over: 2 windows in a row read as not its own load, "
			       "best-effort work holding CPU, its load down;"));
	a = find(f, 1, KNOB_CPU_WEIGHT);
	assert_non_null(a);
	assert_true(a->new_value == 10);
	assert_non_null(strstr(a->reason, "(Weights=floor: a latency-critical service serves"));

	/*
	 * Yielded 30 windows on end: the floor for a window, to see; its own
	 * load still beyond the CPU at it, yielded again at once.
	 */
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].cpu_usage = 0.01;
	engine_free(f->e);
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 0.3, 1000, NULL);
	window(f, 3, 1000, &d);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	f->in[1].cpu_usage = 0.5;
	intf.load_up = true;
	int probe = -1;
	for (int i = 0; i < 40 && probe < 0; i++) {
		window(f, 4, 1000, &intf);
		if (f->in[1].knob[KNOB_CPU_WEIGHT] == 10)
			probe = i;
	}
	assert_int_equal(probe, 29);
	assert_non_null(strstr(engine_verdict(f->e, 0),
			       "; own load over: 30 windows yielded, a window at the floor to see "
			       "whether it still is"));
	f->in[1].cpu_usage = 0.01;
	window(f, 3, 1000, &d);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);

	/* Two LC services, one within reach: the floor holds for it. */
	lc_policy(&f->pol[2], "cache");
	f->set.n = 3;
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].cpu_usage = 0.01;
	engine_free(f->e);
	start(f);
	for (int i = 0; i < 5; i++)
		windows2(f, 0.3, 0.3, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	for (int i = 0; i < 4; i++) {
		windows2(f, 3, 0.3, &d);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	}
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
}

/*
 * A step of costlier requests queues behind itself before what it serves
 * rises 1.3x: the diagnosis reads cpu/interference, then cpu/unknown, from
 * the step's first window to its end. Its own CPU time per second up 1.3x
 * with the hog squeezed at the floor is its own load all the same: the
 * floor yields at the first such window. Measured without it: co-location
 * scenario 5 in 2 repetitions of 4, no verdict of own load and no decision
 * through the whole step, the hog at 1-2 % of what it did alone. Its CPU
 * time not up, or the hog holding CPU, it is not.
 */
static void test_own_load_in_cpu_time_yields_the_floor(void **state)
{
	struct fx *f = *state;
	struct diagnosis intf = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	struct diagnosis unk = diag(DIAG_CPU, DIAG_CAUSE_UNKNOWN);
	const struct action *a;

	f->pol[1].weights_floor = true;
	f->in[0].cpu_usage = 0.45;
	f->in[1].cpu_usage = 0.55;
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 0.3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	/* The step's first window: its CPU time up, the hog still holding 18 %. */
	intf.cpu_up = unk.cpu_up = true;
	f->in[0].cpu_usage = 0.8;
	f->in[1].cpu_usage = 0.18;
	window(f, 8, 1000, &intf);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	/* The hog squeezed: its own load, whatever the queueing reads as. */
	f->in[0].cpu_usage = 0.98;
	f->in[1].cpu_usage = 0.01;
	assert_int_equal(window(f, 9, 1000, &unk), 1);
	a = find(f, 1, KNOB_CPU_WEIGHT);
	assert_non_null(a);
	assert_true(a->new_value == 100);
	assert_non_null(strstr(a->reason, "Weights=floor yields"));
	assert_non_null(strstr(engine_verdict(f->e, 0), "violation (own load): web p99 9"));
	assert_non_null(strstr(engine_verdict(f->e, 0),
			       "its own load is beyond what the CPU gives (its own CPU time "
			       "up 1.3x or more): best-effort work holds 1% of a CPU"));
	/* Yielded, its CPU time no longer up: held, as any own load. */
	intf.cpu_up = unk.cpu_up = false;
	f->in[0].cpu_usage = f->in[1].cpu_usage = 0.5;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(window(f, 14, 1000, i % 2 ? &unk : &intf), 0);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	}

	/* Its CPU time not up, the hog squeezed: not its own load (as before). */
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[0].cpu_usage = 0.45;
	f->in[1].cpu_usage = 0.55;
	engine_free(f->e);
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 0.3, 1000, NULL);
	f->in[0].cpu_usage = 0.98;
	f->in[1].cpu_usage = 0.01;
	for (int i = 0; i < 3; i++) {
		window(f, 9, 1000, &intf);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	}
	/* Its CPU time up, the hog holding CPU: a neighbour's doing, not its own load. */
	intf.cpu_up = true;
	f->in[1].cpu_usage = 0.3;
	for (int i = 0; i < 3; i++) {
		window(f, 9, 1000, &intf);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	}
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
}

/*
 * Yielded, the load falls and its backlog arrives as load still (an
 * open-loop client sends what queued in it): the rate stays up, and the
 * yield that drains it slower would hold itself up. A window at under half
 * the latency of the lowest yielded window before it ends the episode: the
 * floor at once. A smaller fall (the load easing, or noise) holds it, and
 * so does an ordinary window after one that spiked (under half of the
 * spike, not of the lowest).
 */
static void test_own_load_fell_ends_yield(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	struct diagnosis intf = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;

	f->pol[1].weights_floor = true;
	f->in[1].cpu_usage = 0.01;
	start(f);
	for (int i = 0; i < 5; i++)
		window(f, 0.3, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	window(f, 3, 1000, &d);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	/* Yielded: 20 ms a window, its load up throughout. */
	f->in[1].cpu_usage = 0.5;
	d.load_up = intf.load_up = true;
	for (int i = 0; i < 4; i++)
		assert_int_equal(window(f, 20, 1000, i % 2 ? &d : &intf), 0);
	/* A window that spikes, then an ordinary one, under half of it: held. */
	assert_int_equal(window(f, 45, 1000, &intf), 0);
	assert_int_equal(window(f, 20, 1000, &intf), 0);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	/* Down to 0.6 of the lowest before, twice: held. */
	assert_int_equal(window(f, 12, 1000, &d), 0);
	assert_int_equal(window(f, 7.2, 1000, &intf), 0);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	/* Under half of the lowest (7.2), the rate still up (its backlog): the floor. */
	window(f, 3.4, 1000, &intf);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation: ", 11));
	assert_string_equal(
		engine_verdict(f->e, 0),
		"violation: web p99 3.34ms > target 2ms (slack -0.67); own load over: its "
		"load fell (3.34ms, under half the lowest yielded window's 7.21ms); "
		"diagnosis cpu/interference (runq_delay_us.p99 ×9.3)");
	a = find(f, 1, KNOB_CPU_WEIGHT);
	assert_non_null(a);
	assert_true(a->new_value == 10);
	assert_non_null(strstr(a->reason, "(Weights=floor: a latency-critical service serves"));
	/* Its load beyond the CPU again, at the floor: yielded again at once. */
	f->in[1].cpu_usage = 0.01;
	window(f, 3, 1000, &d);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
	/* A window without a verdict ends it too, and says so. */
	window(f, 3, 10, &d);
	assert_string_equal(
		engine_verdict(f->e, 0),
		"no verdict: 10 requests in the window < MinRequests 200; own load over");
}

/*
 * Yielded, best-effort work keeps YIELD_KEEP (0.9) of the CPU it used in
 * calm windows: at home the hog gets half of the CPU (0.5 of its 0.65), so
 * its weight goes up by the odds of the share wanted (0.585) against the
 * share got, within its range (1000 here; 100, its home, in the range
 * 10..100: no higher), at most twice a window; never down while the
 * overload lasts; the floor comes back when it ends.
 */
static void test_own_load_keeps_be_share(void **state)
{
	struct fx *f = *state;
	struct diagnosis d = diag(DIAG_CPU, DIAG_CAUSE_LOAD);
	struct diagnosis intf = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	const struct action *a;
	double w;

	for (int hi = 1000; hi >= 100; hi -= 900) {
		f->pol[1].weights_floor = true;
		f->pol[1].cpu_weight = range(10, hi);
		f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
		f->in[0].cpu_usage = 0.35;
		f->in[1].cpu_usage = 0.65;
		if (f->e)
			engine_free(f->e);
		start(f);
		for (int i = 0; i < 5; i++)
			window(f, 0.3, 1000, NULL);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
		/* The step: at the floor the hog is squeezed; own load: home. */
		f->in[0].cpu_usage = 0.98;
		f->in[1].cpu_usage = 0.02;
		window(f, 3, 1000, &d);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
		/* At home, half: up by the odds, 0.585/0.415 against 1. */
		f->in[0].cpu_usage = f->in[1].cpu_usage = 0.5;
		intf.load_up = d.load_up = true;
		window(f, 4, 1000, &intf);
		a = find(f, 1, KNOB_CPU_WEIGHT);
		if (hi == 100) {
			assert_null(a);
			assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
			assert_non_null(strstr(engine_verdict(f->e, 0), "Weights=floor at home"));
			continue;
		}
		assert_non_null(a);
		assert_true(a->new_value == 141);
		assert_non_null(strstr(a->reason,
				       "best-effort work used 65% of a CPU before it and 50% now, "
				       "so its weight goes to 1.41x home (at most its range's top) "
				       "to keep 90% of that"));
		/* At the share wanted: no write; a tenth off it: none either. */
		f->in[0].cpu_usage = 0.415;
		f->in[1].cpu_usage = 0.585;
		assert_int_equal(window(f, 4, 1000, &d), 0);
		f->in[0].cpu_usage = 0.43;
		f->in[1].cpu_usage = 0.57;
		assert_int_equal(window(f, 4, 1000, &d), 0);
		assert_non_null(strstr(engine_verdict(f->e, 0),
				       "Weights=floor above home to keep best-effort work's CPU"));
		/* Far under it (another hog on the CPU): at most twice as much a window. */
		f->in[0].cpu_usage = 0.8;
		f->in[1].cpu_usage = 0.2;
		window(f, 4, 1000, &d);
		w = f->in[1].knob[KNOB_CPU_WEIGHT];
		assert_true(w == 282);
		/* Over the share wanted but under what it had before: not lowered. */
		f->in[0].cpu_usage = 0.38;
		f->in[1].cpu_usage = 0.62;
		assert_int_equal(window(f, 4, 1000, &d), 0);
		/*
		 * More than it had before (its load falling): not lowered either,
		 * a step down would be a cut while the overload lasts.
		 */
		f->in[0].cpu_usage = 0.25;
		f->in[1].cpu_usage = 0.75;
		assert_int_equal(window(f, 4, 1000, &d), 0);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 282);
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation (own load): ", 22));
		/* The load falls back: a window within the objective, the floor again. */
		d.load_up = intf.load_up = false;
		f->in[0].cpu_usage = 0.3;
		f->in[1].cpu_usage = 0.7;
		window(f, 0.3, 1000, NULL);
		assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10);
	}
}

/*
 * The default (no Weights= line): the CPU weight at its floor, the I/O
 * weight left where it is in slack (reactive: cut only on a violation).
 */
static void test_weights_floor_default(void **state)
{
	struct fx *f = *state;

	f->pol[1].weights_floor = true;
	f->pol[1].io_weight = range(10, 100);
	f->in[1].knob[KNOB_IO_WEIGHT] = 100;
	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 10 && f->in[1].knob[KNOB_IO_WEIGHT] == 100);
	for (int i = 0; i < 10; i++)
		assert_int_equal(window(f, 0.3, 1000, NULL), 0);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 100);
}

/* The floor at idle, driven by web's first window (303us in large slack). */
#define IDLE_FLOOR_REASON                                                                  \
	"web p99 303us <= target 2ms (slack 0.85, 1 window above 0.20); cut batch "        \
	"cpu.weight 100 -> idle (Weights=floor: a latency-critical service serves; idle, " \
	"its CPU goes to whoever wakes, so the floor costs nothing while there is room)"

/*
 * CPUWeight=idle..100: the floor is idle (0), said as such; where the
 * cgroup has no cpu.idle (engine_input.no_idle) it is 1. Reactive cuts
 * reach idle from the least weight.
 */
static void test_weights_floor_idle(void **state)
{
	struct fx *f = *state;

	f->pol[1].weights_floor = true;
	f->pol[1].cpu_weight = range(0, 100);
	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	assert_string_equal(find(f, 1, KNOB_CPU_WEIGHT)->reason, IDLE_FLOOR_REASON);
	/* A violation with nothing standing out: idle, no quota cut. */
	struct diagnosis none = diag(DIAG_NONE, DIAG_CAUSE_UNKNOWN);
	struct diagnosis cpu = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	assert_int_equal(window(f, 3.42, 1000, &none), 0);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	/* The CPU named, the second window over in a row: the quota. */
	assert_int_equal(window(f, 3.42, 1000, &cpu), 1);
	assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
	/* No cpu.idle here: a new instance's floor is 1. */
	engine_service_reset(f->e, 1);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].no_idle = true;
	f->now += SEC / 2;
	run_tick(f);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 1);
}

/*
 * The CPU named in one window over, after windows within the objective
 * with the hog idle at its floor (memcached's window at fio's start in
 * scenario 2 of the co-location benchmark): no quota cut; the floor held
 * the windows before it. Only a second window over in a row cuts. Memory
 * named cuts at once (the weight cannot reach it), as does a violation
 * when the weight is not ours to move (test_quota_from_max_halves_use).
 */
static void test_quota_cut_needs_two_violations(void **state)
{
	struct fx *f = *state;
	struct diagnosis cpu = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);
	struct diagnosis mem = diag(DIAG_MEMORY, DIAG_CAUSE_UNKNOWN);

	f->pol[1].weights_floor = true;
	f->pol[1].cpu_weight = range(0, 1000);
	f->in[1].cpu_usage = 0.5;
	start(f);
	for (int i = 0; i < 10; i++)
		window(f, 0.3, 1000, &cpu);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	for (int i = 0; i < 3; i++) {
		over_once(f, 2.4, &cpu);
		assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
		assert_true(!strncmp(engine_verdict(f->e, 0), "violation: web p99 2.4", 22));
		assert_int_equal(window(f, 1.9, 1000, &cpu), 0);
		assert_int_equal(window(f, 0.3, 1000, &cpu), 0);
	}
	/* Over twice in a row: the quota, half of its use. */
	over_once(f, 2.4, &cpu);
	assert_int_equal(window(f, 2.4, 1000, &cpu), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.25, 1e-9);
	assert_non_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason,
			       "(cpu.weight at its floor for a window, 2 windows over in a row; "));
	/* Back within, the quota given back; then memory named: cut at once. */
	for (int i = 0; i < 40 && !isinf(f->in[1].knob[KNOB_CPU_QUOTA]); i++)
		window(f, 0.3, 1000, &cpu);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	assert_int_equal(window(f, 2.4, 1000, &mem), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.25, 1e-9);
	assert_non_null(strstr(find(f, 1, KNOB_CPU_QUOTA)->reason,
			       "weight cannot reach memory interference"));
}

/* One engine_service_appeared() of batch at f->now, its actions applied. */
static int appeared(struct fx *f)
{
	f->n = engine_service_appeared(f->e, f->now, 1, &f->in[1], f->acts,
				       sizeof(f->acts) / sizeof(*f->acts));
	apply_acts(f);
	return f->n;
}

/*
 * A Weights=floor service's new cgroup, between ticks: at its floor at
 * once while web serves (idle here; 1 without cpu.idle), with web's verdict
 * in the reason; not before web has served, nor once web has been idle for
 * 3 windows; never for a reactive one. The next tick has nothing to add.
 */
static void test_appeared_floor(void **state)
{
	struct fx *f = *state;

	f->pol[1].weights_floor = true;
	f->pol[1].cpu_weight = range(0, 100);
	start(f);
	/* Before any verdict: left at home. */
	assert_int_equal(appeared(f), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	assert_int_equal(window(f, 0.3, 1000, NULL), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	/* Restarted: a new cgroup at its default weight, between two ticks. */
	engine_service_reset(f->e, 1);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->now += SEC / 4;
	assert_int_equal(appeared(f), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	assert_string_equal(
		find(f, 1, KNOB_CPU_WEIGHT)->reason,
		"web p99 303us <= target 2ms (slack 0.85, 1 window above 0.20); cut batch "
		"cpu.weight 100 -> idle (Weights=floor, its new cgroup just made: a latency-critical "
		"service serves; idle, its CPU goes to whoever wakes, so the floor costs nothing "
		"while there is room)");
	/* Its home is its first value: 100, to go back to when web is idle. */
	f->now += SEC / 4;
	assert_int_equal(run_tick(f), 0);
	assert_int_equal(appeared(f), 0); /* at its floor already */
	/* No cpu.idle in the new cgroup: 1. */
	engine_service_reset(f->e, 1);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].no_idle = true;
	assert_int_equal(appeared(f), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 1);
	f->in[1].no_idle = false;
	/* web idle for 3 windows, and 4 since the floor (a reversal's cooldown):
	 * home, and a new cgroup is left there. */
	for (int i = 0; i < 4; i++)
		window(f, 0.3, 10, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	engine_service_reset(f->e, 1);
	assert_int_equal(appeared(f), 0);
	/* A bad index. */
	assert_int_equal(engine_service_appeared(f->e, f->now, 2, &f->in[1], f->acts, 4), -EINVAL);
	assert_int_equal(engine_service_appeared(f->e, f->now, -1, &f->in[1], f->acts, 4), -EINVAL);
}

/* Weights=reactive: a new cgroup waits for a violation. */
static void test_appeared_reactive(void **state)
{
	struct fx *f = *state;

	start(f);
	assert_int_equal(window(f, 0.3, 1000, NULL), 0);
	engine_service_reset(f->e, 1);
	assert_int_equal(appeared(f), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
}

static void test_reactive_cut_to_idle(void **state)
{
	struct fx *f = *state;

	f->pol[1].cpu_weight = range(0, 100);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 1;
	start(f);
	window(f, 3.42, 1000, NULL);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 0);
	assert_non_null(strstr(find(f, 1, KNOB_CPU_WEIGHT)->reason, "cpu.weight 1 -> idle"));
}

/*
 * An idle best-effort service's quota (under 0.5% of a CPU used) is left
 * alone, and so is one of best-effort work that holds under 5% of a CPU
 * together: whatever the diagnosis reads (scenario 5's first window of a
 * load step beyond the CPU read cpu/unknown), what a quota could take
 * from them is not what the service lacks.
 */
static void test_idle_quota_left_alone(void **state)
{
	struct fx *f = *state;
	struct diagnosis unk = diag(DIAG_CPU, DIAG_CAUSE_UNKNOWN);

	f->pol[1].cpu_weight.set = false; /* quota at once */
	f->in[1].cpu_usage = 0;
	start(f);
	for (int i = 0; i < 4; i++)
		assert_int_equal(window(f, 5, 1000, NULL), 0);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	f->in[1].cpu_usage = 0.01;
	assert_int_equal(window(f, 5, 1000, NULL), 0);
	assert_int_equal(window(f, 5, 1000, &unk), 0);
	assert_true(isinf(f->in[1].knob[KNOB_CPU_QUOTA]));
	/* At 8% of a CPU they hold some: cut, half of it, to its floor (10%). */
	f->in[1].cpu_usage = 0.08;
	assert_int_equal(window(f, 5, 1000, &unk), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.1, 1e-9);
}

/*
 * Not the cause: a best-effort service that did no block I/O through the
 * window is not I/O-cut when the latency-critical one is slowed by I/O,
 * and one that used no CPU through it keeps its CPU weight. Seen in the
 * demo: a CPU hog slowed nginx's own disk reads, and the first decision
 * cut the io.weight of a disk reader that had not started yet.
 */
static void test_idle_not_the_cause(void **state)
{
	struct fx *f = *state;
	struct diagnosis io = diag(DIAG_IO, DIAG_CAUSE_INTERFERENCE);
	struct diagnosis cpu = diag(DIAG_CPU, DIAG_CAUSE_INTERFERENCE);

	f->pol[1].io_weight = range(10, 1000);
	f->in[1].knob[KNOB_IO_WEIGHT] = 500;
	f->in[1].io_usage = 0;
	f->in[1].cpu_usage = 0;
	start(f);
	for (int i = 0; i < 3; i++)
		assert_int_equal(window(f, 3, 1000, &io), 0);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 500);
	for (int i = 0; i < 3; i++)
		assert_int_equal(window(f, 3, 1000, &cpu), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	/* It starts reading: the next violation cuts it. */
	f->in[1].io_usage = 50e6;
	assert_int_equal(window(f, 3, 1000, &io), 1);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 250);
	/* Busy a tick ago, idle now: within the window, still the cause. */
	f->in[1].cpu_usage = 1;
	f->now += SEC / 2;
	run_tick(f);
	f->in[1].cpu_usage = 0;
	f->now -= SEC / 2;
	assert_int_equal(window(f, 3, 1000, &cpu), 1);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 50);
	/* Unknown in the first ticks (a sensor's first sample), then idle: not the cause. */
	engine_free(f->e);
	f->in[1].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[1].cpu_usage = NAN;
	start(f);
	f->now += SEC / 2;
	run_tick(f);
	f->now -= SEC / 2; /* the window ends half a second after that tick */
	f->in[1].cpu_usage = 0;
	assert_int_equal(window(f, 3, 1000, &cpu), 0);
	assert_true(f->in[1].knob[KNOB_CPU_WEIGHT] == 100);
	/* Unknown (no contention sensor): cut as before. */
	f->in[1].io_usage = NAN;
	f->in[1].knob[KNOB_IO_WEIGHT] = 500;
	engine_free(f->e);
	start(f);
	assert_int_equal(window(f, 3, 1000, &io), 1);
	assert_true(f->in[1].knob[KNOB_IO_WEIGHT] == 250);
}

/*
 * Between best-effort services: quota cuts due in the same tick halve what
 * they hold together and split it max-min by home CPU weight; one holding
 * less than its part is not cut, and no one is cut by more than half.
 */
static void test_best_effort_share(void **state)
{
	struct fx *f = *state;
	const struct action *a;

	be_policy(&f->pol[2], "scan");
	f->set.n = 3;
	f->pol[1].cpu_weight.set = false; /* weights not ours: the quota at once */
	f->pol[2].cpu_weight.set = false;
	f->pol[2].cpu_quota = range(0.05, INFINITY);
	f->in[2].knob[KNOB_CPU_WEIGHT] = 100;
	f->in[2].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[1].cpu_usage = 0.6;
	f->in[2].cpu_usage = 0.3;
	start(f);
	/* 90% together -> 45%: parts of 22.5% each; batch at most halved. */
	assert_int_equal(window(f, 3, 1000, NULL), 2);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_float_equal(f->in[2].knob[KNOB_CPU_QUOTA], 0.225, 1e-9);
	a = find(f, 2, KNOB_CPU_QUOTA);
	assert_non_null(a);
	assert_string_equal(
		a->reason,
		"web p99 2.95ms > target 2ms (slack -0.47); no diagnosis: CPU knobs on "
		"slack alone; cut scan cpu.max max -> 22.5% (cpu.weight not ours to move; "
		"best-effort use 90% -> 45%, by home weight 100/200: 22.5%, at most half, "
		"floor 5%)");
	/* Now they hold 30% and 22.5%: parts of 13.1% each (web down by a fifth: the cuts stand). */
	f->in[1].cpu_usage = 0.3;
	f->in[2].cpu_usage = 0.225;
	assert_int_equal(window(f, 2.3, 1000, NULL), 2);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.15, 1e-9);
	assert_float_equal(f->in[2].knob[KNOB_CPU_QUOTA], 0.132, 1e-9);

	/* A light user (10% of 70%: under its part of 17.5%) keeps its quota. */
	engine_free(f->e);
	f->in[1].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[2].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[1].cpu_usage = 0.6;
	f->in[2].cpu_usage = 0.1;
	start(f);
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_non_null(find(f, 1, KNOB_CPU_QUOTA));
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_true(isinf(f->in[2].knob[KNOB_CPU_QUOTA]));

	/* Home weights decide the parts: scan at 300 of 400 keeps 30% of 90%. */
	engine_free(f->e);
	f->in[1].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[2].knob[KNOB_CPU_WEIGHT] = 300;
	f->in[1].cpu_usage = 0.6;
	f->in[2].cpu_usage = 0.3;
	start(f);
	assert_int_equal(window(f, 3, 1000, NULL), 1);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_true(isinf(f->in[2].knob[KNOB_CPU_QUOTA]));

	/* One's use unknown: each halved on its own, as before. */
	engine_free(f->e);
	f->in[1].knob[KNOB_CPU_QUOTA] = INFINITY;
	f->in[2].cpu_usage = NAN;
	start(f);
	assert_int_equal(window(f, 3, 1000, NULL), 2);
	assert_float_equal(f->in[1].knob[KNOB_CPU_QUOTA], 0.3, 1e-9);
	assert_float_equal(f->in[2].knob[KNOB_CPU_QUOTA], 0.5, 1e-9);
	assert_non_null(strstr(find(f, 2, KNOB_CPU_QUOTA)->reason, "multiplicative cut"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cuts_weight_then_quota, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reason_in_words, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_from_max_halves_use, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gives_back_to_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gives_back_only_what_was_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_gives_back_quota_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_flapping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_few_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cooldown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_protect_after_give_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_and_load_spare_neighbours, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_load_raises_own_quota, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_load_with_busy_neighbours, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_load_beyond_the_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_load_gives_back_the_episode, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_load_ends_on_interference, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_load_yields_the_floor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_load_in_cpu_time_yields_the_floor, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_load_fell_ends_yield, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_load_keeps_be_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_load_not_beyond_under_our_quota, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_weight_cut_scales_with_the_miss, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_io_and_memory_routes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_latency_critical_never_throttled, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_overridden_knob_left_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_frequency, setup, teardown),
		cmocka_unit_test_setup_teardown(test_several_latency_critical, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slice_first_rung, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slice_unavailable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slice_given_back_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_give_back_that_hurt_backs_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_weights_floor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_weights_floor_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_weights_floor_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_needs_two_violations, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_appeared_floor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_appeared_reactive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slice_first_rung_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reactive_cut_to_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_quota_left_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idle_not_the_cause, setup, teardown),
		cmocka_unit_test_setup_teardown(test_best_effort_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_that_did_not_help_is_undone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_needs_two_windows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_in_doubt_stands_on_a_better_window,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_proven_by_its_driver, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_judged_within_two_windows, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quota_cut_not_in_force_is_not_judged, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quota_hold_is_per_neighbour, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_sequences_keep_the_rules, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
