// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for controller/feed.c: ticks on multiples of the period,
 * windows on multiples of their length in ticks, whatever tick a process
 * starts at, so that `run` and `record` beside it cut the same windows.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "controller/feed.h"
#include "sensing/hist.h"

#define MS 1000000ULL

static void test_ticks(void **state)
{
	(void)state;
	assert_true(feed_next_tick(0, 500 * MS) == 500000);
	assert_true(feed_next_tick(1234567, 500 * MS) == 1500000);
	assert_true(feed_next_tick(1500000, 500 * MS) == 2000000);
	/* Not 1.5 s, 0.2 s away: the first interval is at least half a period. */
	assert_true(feed_next_tick(1300000, 500 * MS) == 2000000);
	assert_true(feed_tick_index(1500000, 500 * MS) == 3);
	/* A time a little off the boundary still names its tick. */
	assert_true(feed_tick_index(1500999, 500 * MS) == 3);
	assert_true(feed_tick_index(1499001, 500 * MS) == 3);
}

static struct qos_sample sample(uint64_t requests)
{
	struct qos_sample q = { .requests = requests, .interval_s = 0.5 };

	hist_add(&q.latency, 100000, requests);
	return q;
}

/* Feed ticks from..to of 100 requests each; the ticks that ended a window. */
static unsigned windows(struct feed *f, uint64_t from, uint64_t to, uint64_t *ends, uint64_t *reqs)
{
	unsigned n = 0;

	for (uint64_t t = from; t <= to; t++) {
		struct engine_input in = { 0 };
		struct qos_sample q = sample(100);

		if (feed_tick(f, t, &q, NULL, false, 0.5, &in)) {
			assert_true(in.have_window);
			/* The window's histogram: the engine takes its percentile. */
			assert_true(in.latency && in.latency->total == in.requests);
			ends[n] = t;
			reqs[n++] = in.requests;
		} else {
			assert_false(in.have_window);
		}
	}
	return n;
}

static void test_windows_aligned(void **state)
{
	struct policy p = { .percentile = 0.99, .window_ns = 1500 * MS };
	uint64_t e1[16], r1[16], e2[16], r2[16];
	struct feed a, b;
	unsigned n1, n2;

	(void)state;
	assert_int_equal(feed_init(&a, &p, 500 * MS), 0);
	assert_int_equal(feed_init(&b, &p, 500 * MS), 0);
	assert_int_equal(a.window_ticks, 3);
	/* One starts at tick 10, the other at 13: the same windows from 15 on. */
	n1 = windows(&a, 10, 26, e1, r1);
	n2 = windows(&b, 13, 26, e2, r2);
	assert_int_equal(n1, 5); /* 12..14 (warm-up 10, 11), 15..17, ... 24..26 */
	assert_true(e1[0] == 14 && r1[0] == 300);
	assert_int_equal(n2, 4);
	for (unsigned i = 0; i < n2; i++) {
		assert_true(e2[i] == e1[i + 1]);
		assert_true(r2[i] == 300);
	}
	feed_free(&a);
	feed_free(&b);
}

static void test_gap_drops_window(void **state)
{
	struct policy p = { .percentile = 0.99, .window_ns = 1000 * MS };
	uint64_t e[8], r[8];
	struct feed f;

	(void)state;
	assert_int_equal(feed_init(&f, &p, 500 * MS), 0);
	assert_int_equal(windows(&f, 4, 4, e, r), 0); /* a window's first tick */
	/* Tick 5 is missing: 6..7 is a window of its own, 4 is dropped. */
	assert_int_equal(windows(&f, 6, 7, e, r), 1);
	assert_true(e[0] == 7 && r[0] == 200);
	/* Absent in the middle of a window: it does not count. */
	assert_int_equal(windows(&f, 8, 8, e, r), 0);
	feed_absent(&f);
	assert_int_equal(windows(&f, 9, 11, e, r), 1);
	assert_true(e[0] == 11 && r[0] == 200);
	feed_free(&f);
}

static void test_one_tick_windows(void **state)
{
	struct policy p = { .percentile = 0.99, .window_ns = 0 };
	uint64_t e[8], r[8];
	struct feed f;

	(void)state;
	assert_int_equal(feed_init(&f, &p, 1000 * MS), 0);
	assert_int_equal(windows(&f, 7, 9, e, r), 3);
	assert_true(r[0] == 100 && r[2] == 100);
	feed_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ticks),
		cmocka_unit_test(test_windows_aligned),
		cmocka_unit_test(test_gap_drops_window),
		cmocka_unit_test(test_one_tick_windows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
