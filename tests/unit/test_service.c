// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for controller/service.c: one service's life on synthetic
 * input, as `run` and `replay` drive it. Its cgroup appears, vanishes,
 * comes back, or is replaced by a new instance; knobs are written, read
 * back, and changed by someone else.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "controller/service.h"
#include "sensing/hist.h"

#define MS 1000000ULL
#define SEC 1000000000ULL

struct fx {
	struct policy pol[2];
	struct policy_set set;
	struct engine *e;
	struct service web, batch;
};

/* web (latency-critical, p99 <= 2ms, windows of 2 ticks) and batch (best-effort). */
static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->pol[0] = (struct policy){ .name = (char *)"web",
				     .cgroup = (char *)"/web",
				     .klass = POLICY_LATENCY_CRITICAL,
				     .percentile = 0.99,
				     .target_ns = 2 * MS,
				     .min_requests = 10,
				     .window_ns = 2 * SEC };
	f->pol[1] = (struct policy){ .name = (char *)"batch",
				     .cgroup = (char *)"/batch",
				     .klass = POLICY_BEST_EFFORT,
				     .cpu_weight = { .lo = 10, .hi = 100, .set = true } };
	f->set.v = f->pol;
	f->set.n = 2;
	f->e = engine_new(&f->set);
	if (!f->e || service_init(&f->web, &f->pol[0], 0, SEC) ||
	    service_init(&f->batch, &f->pol[1], 1, SEC))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	service_done(&f->web);
	service_done(&f->batch);
	engine_free(f->e);
	free(f);
	return 0;
}

/* One tick of n requests at lat_ms each; true when it ended a window. */
static bool tick(struct service *s, uint64_t t, uint64_t n, double lat_ms, struct engine_input *in)
{
	static struct qos_sample q;

	memset(&q, 0, sizeof(q));
	q.requests = n;
	q.interval_s = 1;
	hist_add(&q.latency, (uint64_t)(lat_ms * MS), n);
	service_input_init(in);
	return service_tick(s, t, &q, NULL, false, 1, in);
}

/* A window of web's that is a violation: the engine's verdict says so. */
static void violation(struct fx *f, uint64_t t)
{
	struct engine_input in[2];
	struct action acts[2 * KNOB_MAX];

	service_input_init(&in[1]);
	assert_false(tick(&f->web, t, 100, 5, &in[0]));
	assert_true(tick(&f->web, t + 1, 100, 5, &in[0]));
	assert_true(engine_tick(f->e, (t + 1) * SEC, in, acts, 2 * KNOB_MAX) >= 0);
	assert_true(strncmp(engine_verdict(f->e, 0), "violation: ", 11) == 0);
}

static void test_first_found(void **state)
{
	struct fx *f = *state;
	uint64_t old = 99;

	assert_int_equal(f->web.cgid, 0);
	assert_false(service_gone(&f->web)); /* never there: nothing to say */
	assert_int_equal(service_found(&f->web, f->e, 10, &old), 0);
	assert_int_equal(old, 0);
	assert_int_equal(f->web.cgid, 10);
	assert_int_equal(service_found(&f->web, f->e, 10, &old), 0);
	assert_int_equal(old, 10);
}

/* Gone and back with the same id: the same instance, what we wrote still ours. */
static void test_gone_and_back(void **state)
{
	struct fx *f = *state;
	struct engine_input in;

	service_found(&f->batch, f->e, 20, NULL);
	service_wrote(&f->batch, KNOB_CPU_WEIGHT, 50);
	service_found(&f->web, f->e, 10, NULL);
	assert_false(tick(&f->web, 4, 100, 1, &in)); /* a window's first tick */
	assert_true(service_gone(&f->web));
	assert_false(service_gone(&f->web)); /* said once */
	assert_int_equal(f->web.cgid, 0);
	assert_int_equal(f->web.last_cgid, 10);
	assert_int_equal(service_found(&f->web, f->e, 10, NULL), 0);
	assert_int_equal(f->web.last_cgid, 0);
	/* The window under way (4..5) was dropped: tick 5 alone ends none. */
	assert_false(tick(&f->web, 5, 100, 1, &in));
	assert_false(in.have_window);
	assert_false(tick(&f->web, 6, 100, 1, &in));
	assert_true(tick(&f->web, 7, 100, 1, &in));
	assert_int_equal(in.requests, 200);
	assert_true(service_gone(&f->batch));
	assert_int_equal(service_found(&f->batch, f->e, 20, NULL), 0);
	assert_true(f->batch.wrote[KNOB_CPU_WEIGHT] && f->batch.written[KNOB_CPU_WEIGHT] == 50);
}

/* A new id, after a gap or in place: a new instance, started afresh. */
static void test_new_instance(void **state)
{
	struct fx *f = *state;
	struct engine_input in;
	uint64_t old;
	double v;

	service_found(&f->web, f->e, 10, NULL);
	violation(f, 2);
	service_wrote(&f->web, KNOB_CPU_WEIGHT, 200);
	service_wrote(&f->web, KNOB_CPU_QUOTA, 2);
	assert_int_equal(service_knob(&f->web, f->e, KNOB_CPU_QUOTA, 1, false, &v), 1);
	assert_false(tick(&f->web, 6, 100, 1, &in)); /* a window under way */
	assert_true(service_gone(&f->web));
	assert_int_equal(service_found(&f->web, f->e, 11, &old), 1);
	assert_int_equal(old, 10);
	assert_int_equal(f->web.cgid, 11);
	for (int k = 0; k < KNOB_MAX; k++)
		assert_false(f->web.wrote[k] || f->web.overridden[k] || f->web.written[k]);
	assert_string_equal(engine_verdict(f->e, 0), "no verdict: no complete window yet");
	/* Its knobs are read as they are, originals anew. */
	assert_int_equal(service_knob(&f->web, f->e, KNOB_CPU_QUOTA, 1, false, &v), 0);
	assert_true(v == 1);
	/* The window of the old instance is gone: 7 alone ends none. */
	assert_false(tick(&f->web, 7, 100, 1, &in));
	/* Replaced while present (no tick without it in between). */
	violation(f, 8);
	assert_int_equal(service_found(&f->web, f->e, 12, &old), 1);
	assert_int_equal(old, 11);
	assert_string_equal(engine_verdict(f->e, 0), "no verdict: no complete window yet");
}

/* What we wrote reads back: ours. Anything else: someone else's, hands off. */
static void test_changed_by_someone_else(void **state)
{
	struct fx *f = *state;
	double v;

	service_found(&f->batch, f->e, 20, NULL);
	/* Not written yet: whatever it holds. */
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 100, false, &v), 0);
	assert_true(v == 100);
	service_wrote(&f->batch, KNOB_CPU_WEIGHT, 50);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 50, false, &v), 0);
	assert_true(v == 50);
	/* A property's rounding is not a change. */
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 50.00000001, false, &v), 0);
	service_wrote(&f->batch, KNOB_CPU_QUOTA, INFINITY);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_QUOTA, INFINITY, false, &v), 0);
	assert_true(isinf(v));
	/* An administrator set 70: said once, left alone from then on. */
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 70, false, &v), 1);
	assert_true(isnan(v));
	assert_true(f->batch.overridden[KNOB_CPU_WEIGHT]);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 70, false, &v), 0);
	assert_true(isnan(v));
	/* "max" where we wrote a number is a change too. */
	service_wrote(&f->batch, KNOB_IO_WEIGHT, 100);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_IO_WEIGHT, INFINITY, false, &v), 1);
}

/* Dry-run (and replay): nothing was written, the engine sees what would have been. */
static void test_dry_run(void **state)
{
	struct fx *f = *state;
	double v;

	service_found(&f->batch, f->e, 20, NULL);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 100, true, &v), 0);
	assert_true(v == 100);
	service_wrote(&f->batch, KNOB_CPU_WEIGHT, 50);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 100, true, &v), 0);
	assert_true(v == 50);
	assert_false(f->batch.overridden[KNOB_CPU_WEIGHT]);
}

/* Put back (a reload): the values are the cgroup's again, not a change by anyone. */
static void test_restored(void **state)
{
	struct fx *f = *state;
	double v;

	service_found(&f->batch, f->e, 20, NULL);
	service_wrote(&f->batch, KNOB_CPU_WEIGHT, 50);
	service_restored(&f->batch);
	assert_int_equal(service_knob(&f->batch, f->e, KNOB_CPU_WEIGHT, 100, false, &v), 0);
	assert_true(v == 100);
	assert_false(f->batch.overridden[KNOB_CPU_WEIGHT]);
}

/* Windows on multiples of Window= in ticks, with the window's requests and histogram. */
static void test_windows(void **state)
{
	struct fx *f = *state;
	struct engine_input in;

	service_found(&f->web, f->e, 10, NULL);
	assert_false(tick(&f->web, 3, 100, 1, &in)); /* warming up: not a window's start */
	assert_false(tick(&f->web, 4, 100, 1, &in));
	assert_true(tick(&f->web, 5, 300, 3, &in));
	assert_true(in.have_window);
	assert_int_equal(in.requests, 400);
	assert_true(in.latency && in.latency->total == 400);
	assert_true(in.latency->count[hist_bucket(3 * MS)] == 300);
	assert_null(in.diag); /* no contention sensor */
	assert_true(isnan(in.cpu_usage));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_first_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gone_and_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_instance, setup, teardown),
		cmocka_unit_test_setup_teardown(test_changed_by_someone_else, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
