// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the log-linear histogram (sensing/hist.c): bucket layout,
 * the promised 3.125% bound, percentiles against exact nearest-rank
 * percentiles of known sample sets, and the window diff of 32-bit counters.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "sensing/hist.h"

static const double quantiles[] = { 0.5, 0.9, 0.99, 0.999 };
#define NQ (sizeof(quantiles) / sizeof(*quantiles))

/* Deterministic PRNG (splitmix64): the sample sets are the same every run. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(void)
{
	return (rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller). */
static double rng_normal(void)
{
	double u1 = rng_unit(), u2 = rng_unit();

	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Fails with the printf-style description when got is not within tol of want. */
static void __attribute__((format(printf, 4, 5)))
assert_rel_close(double got, double want, double tol, const char *fmt, ...)
{
	double err = fabs(got - want) / want;
	char what[128];
	va_list ap;

	if (err <= tol)
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	fail_msg("%s: got %.3f, want %.3f (relative error %.5f > %.5f)", what, got, want, err, tol);
}

/* Bucket b's lower bound and last value map to b; the next bucket follows on. */
static void test_bucket_boundaries(void **state)
{
	(void)state;
	assert_int_equal(hist_lower(0), 0);
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		uint64_t lo = hist_lower(b), w = hist_width(b);

		if (w < 1)
			fail_msg("bucket %u: width 0", b);
		if (hist_bucket(lo) != b)
			fail_msg("bucket %u: lower %llu maps to %u", b, (unsigned long long)lo,
				 hist_bucket(lo));
		if (hist_bucket(lo + w - 1) != b)
			fail_msg("bucket %u: last value %llu maps to %u", b,
				 (unsigned long long)(lo + w - 1), hist_bucket(lo + w - 1));
		if (b + 1 < HIST_BUCKETS && hist_lower(b + 1) != lo + w)
			fail_msg("bucket %u: lower %llu + width %llu != next lower %llu", b,
				 (unsigned long long)lo, (unsigned long long)w,
				 (unsigned long long)hist_lower(b + 1));
	}
	/* Everything too large for the table lands in the last bucket. */
	assert_int_equal(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
	assert_int_equal(hist_bucket(1ULL << 40), HIST_BUCKETS - 1);
}

/* Below HIST_SUB every value is exact. */
static void test_small_values_exact(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < HIST_SUB; v++) {
		assert_int_equal(hist_bucket(v), v);
		assert_true(hist_mid(hist_bucket(v)) == (double)v);
	}
}

/* The midpoint is within HIST_MAX_REL_ERROR of both ends of every bucket. */
static void test_error_bound_edges(void **state)
{
	(void)state;
	assert_true(fabs(HIST_MAX_REL_ERROR - 0.03125) < 1e-12);
	for (unsigned b = HIST_SUB; b < HIST_BUCKETS; b++) {
		uint64_t lo = hist_lower(b), hi = lo + hist_width(b) - 1;

		assert_rel_close(hist_mid(b), lo, HIST_MAX_REL_ERROR, "bucket %u lower", b);
		assert_rel_close(hist_mid(b), hi, HIST_MAX_REL_ERROR, "bucket %u upper", b);
	}
}

/* Log-uniform values from 16 ns to 100 s. */
static void test_error_bound_random(void **state)
{
	const double lo = log(16), hi = log(100e9);

	(void)state;
	rng_state = 1;
	for (int i = 0; i < 1000000; i++) {
		uint64_t v = (uint64_t)exp(lo + (hi - lo) * rng_unit());

		if (v < 16)
			v = 16;
		assert_rel_close(hist_mid(hist_bucket(v)), v, HIST_MAX_REL_ERROR, "value %llu",
				 (unsigned long long)v);
	}
}

/*
 * Fill a histogram from samples and compare each quantile with the exact
 * nearest-rank percentile (the ceil(q*n)-th smallest sample).
 */
static void check_percentiles(const char *name, uint64_t *v, size_t n)
{
	struct hist h;

	memset(&h, 0, sizeof(h));
	for (size_t i = 0; i < n; i++)
		hist_add(&h, v[i], 1);
	assert_int_equal(h.total, n);
	qsort(v, n, sizeof(*v), u64_cmp);
	for (size_t i = 0; i < NQ; i++) {
		/* Integer rank: q*1000 is exact for every quantile used here. */
		uint64_t permille = (uint64_t)llround(quantiles[i] * 1000);
		uint64_t rank = (permille * n + 999) / 1000;

		if (rank < 1)
			rank = 1;
		assert_rel_close(hist_percentile(&h, quantiles[i]), v[rank - 1], HIST_MAX_REL_ERROR,
				 "%s n=%zu p%g (rank %llu)", name, n, quantiles[i] * 100,
				 (unsigned long long)rank);
	}
	assert_rel_close(hist_max(&h), v[n - 1], HIST_MAX_REL_ERROR, "%s max", name);
}

/* n chosen so that q*n is fractional for most q: ceil, not floor or round. */
static void test_percentile_uniform(void **state)
{
	size_t n = 9999;
	uint64_t *v = malloc(n * sizeof(*v));

	(void)state;
	assert_non_null(v);
	rng_state = 2;
	/* 50 µs .. 5 ms */
	for (size_t i = 0; i < n; i++)
		v[i] = 50000 + (uint64_t)(rng_unit() * 4950000);
	check_percentiles("uniform", v, n);
	free(v);
}

static void test_percentile_lognormal(void **state)
{
	size_t n = 20000;
	uint64_t *v = malloc(n * sizeof(*v));

	(void)state;
	assert_non_null(v);
	rng_state = 3;
	/* Median 300 µs, sigma 1: a long tail up to tens of ms. */
	for (size_t i = 0; i < n; i++)
		v[i] = (uint64_t)(300000 * exp(rng_normal()));
	check_percentiles("log-normal", v, n);
	free(v);
}

/*
 * 900 fast requests and 100 slow ones: p90 is the last fast one and p99
 * a slow one, so an off-by-one rank shows as a 100x error.
 */
static void test_percentile_bimodal(void **state)
{
	uint64_t v[1000];

	(void)state;
	rng_state = 4;
	for (size_t i = 0; i < 900; i++)
		v[i] = 100000 + rng_next() % 20000; /* 100-120 µs */
	for (size_t i = 900; i < 1000; i++)
		v[i] = 50000000 + rng_next() % 10000000; /* 50-60 ms */
	check_percentiles("bimodal", v, 1000);
}

/*
 * Few, well separated values: every quantile lands on a different sample,
 * so the rank rule itself is checked (p99 of 10 is the 10th, not the 9th).
 */
static void test_percentile_small_sets(void **state)
{
	uint64_t ten[10], two[2] = { 5000000, 1000 };
	struct hist h;

	(void)state;
	for (size_t i = 0; i < 10; i++)
		ten[i] = (10 - i) * 1000000; /* 1..10 ms, unsorted */
	check_percentiles("ten", ten, 10);
	check_percentiles("two", two, 2);

	memset(&h, 0, sizeof(h));
	hist_add(&h, 1000000, 1);
	hist_add(&h, 2000000, 1);
	hist_add(&h, 3000000, 1);
	/* Rank ceil(q*3): 1/3 is rank 1, just above it rank 2. */
	assert_rel_close(hist_percentile(&h, 0.001), 1000000, HIST_MAX_REL_ERROR, "p0.1");
	assert_rel_close(hist_percentile(&h, 0.5), 2000000, HIST_MAX_REL_ERROR, "p50");
	assert_rel_close(hist_percentile(&h, 0.67), 3000000, HIST_MAX_REL_ERROR, "p67");
	assert_rel_close(hist_percentile(&h, 1.0), 3000000, HIST_MAX_REL_ERROR, "p100");
}

static void test_percentile_single_value(void **state)
{
	uint64_t v[1] = { 1234567 };

	(void)state;
	check_percentiles("single", v, 1);
}

/* 1000 equal values and one outlier: only max sees the outlier. */
static void test_percentile_outlier(void **state)
{
	uint64_t v[1001];
	struct hist h;

	(void)state;
	for (size_t i = 0; i < 1000; i++)
		v[i] = 250000;
	v[1000] = 2000000000;
	check_percentiles("outlier", v, 1001);

	memset(&h, 0, sizeof(h));
	hist_add(&h, 250000, 1000);
	hist_add(&h, 2000000000, 1);
	assert_rel_close(hist_percentile(&h, 0.999), 250000, HIST_MAX_REL_ERROR, "p99.9");
	assert_rel_close(hist_percentile(&h, 1.0), 2000000000, HIST_MAX_REL_ERROR, "p100");
	assert_rel_close(hist_max(&h), 2000000000, HIST_MAX_REL_ERROR, "max");
}

static void test_empty(void **state)
{
	struct hist h;

	(void)state;
	memset(&h, 0, sizeof(h));
	for (size_t i = 0; i < NQ; i++)
		assert_true(hist_percentile(&h, quantiles[i]) == -1);
	assert_true(hist_max(&h) == -1);
}

static void test_max(void **state)
{
	struct hist h;

	(void)state;
	memset(&h, 0, sizeof(h));
	hist_add(&h, 5, 1);
	assert_true(hist_max(&h) == 5);
	hist_add(&h, 3000000, 2);
	hist_add(&h, 70000, 7);
	assert_rel_close(hist_max(&h), 3000000, HIST_MAX_REL_ERROR, "max");
	/* Beyond the table: reported as the last bucket, not lost. */
	hist_add(&h, 1ULL << 45, 1);
	assert_true(hist_max(&h) == hist_mid(HIST_BUCKETS - 1));
}

static void test_merge(void **state)
{
	struct hist a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	hist_add(&a, 1000, 3);
	hist_add(&b, 1000, 2);
	hist_add(&b, 9000000, 5);
	hist_merge(&a, &b);
	assert_int_equal(a.total, 10);
	assert_int_equal(a.count[hist_bucket(1000)], 5);
	assert_int_equal(a.count[hist_bucket(9000000)], 5);
	assert_rel_close(hist_percentile(&a, 0.5), 1000, HIST_MAX_REL_ERROR, "p50");
	assert_rel_close(hist_percentile(&a, 0.6), 9000000, HIST_MAX_REL_ERROR, "p60");
}

static void test_diff(void **state)
{
	static __u32 now[HIST_BUCKETS], prev[HIST_BUCKETS];
	struct hist h;

	(void)state;
	memset(now, 0, sizeof(now));
	memset(prev, 0, sizeof(prev));
	/* Ordinary growth. */
	prev[20] = 5;
	now[20] = 12;
	/* A bucket that went down (span moved to a later bucket): 0, not 4 billion. */
	prev[100] = 10;
	now[100] = 7;
	now[101] = 3;
	/* Cumulative counter wrapped around 2^32. */
	prev[200] = 0xFFFFFFF0;
	now[200] = 0x10;
	/* Unchanged. */
	prev[300] = now[300] = 42;
	memset(&h, 0xaa, sizeof(h)); /* hist_diff must overwrite everything */
	hist_diff(&h, now, prev);
	assert_int_equal(h.count[20], 7);
	assert_int_equal(h.count[100], 0);
	assert_int_equal(h.count[101], 3);
	assert_int_equal(h.count[200], 32);
	assert_int_equal(h.count[300], 0);
	assert_int_equal(h.count[0], 0);
	assert_int_equal(h.total, 7 + 3 + 32);

	/* No previous snapshot: counted from zero. */
	hist_diff(&h, now, NULL);
	assert_int_equal(h.count[200], 0x10);
	assert_int_equal(h.count[300], 42);
	assert_int_equal(h.total, 12 + 7 + 3 + 0x10 + 42);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_boundaries),
		cmocka_unit_test(test_small_values_exact),
		cmocka_unit_test(test_error_bound_edges),
		cmocka_unit_test(test_error_bound_random),
		cmocka_unit_test(test_percentile_uniform),
		cmocka_unit_test(test_percentile_lognormal),
		cmocka_unit_test(test_percentile_bimodal),
		cmocka_unit_test(test_percentile_small_sets),
		cmocka_unit_test(test_percentile_single_value),
		cmocka_unit_test(test_percentile_outlier),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_max),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_diff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
