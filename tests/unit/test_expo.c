// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the report and its Prometheus text (controller/report.c,
 * controller/expo.c): folding the log-linear histogram into le buckets
 * never puts a value under a bound it exceeds, and misses only values
 * within one bucket of the bound; the text has HELP/TYPE for every
 * family, escaped label values, cumulative buckets ending in +Inf equal to
 * _count, and what a service's fields say.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "controller/expo.h"
#include "controller/report.h"

static uint64_t rng = 42;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Against exact counts of known values: never over, short only by values near the bound. */
static void test_fold_exact(void **state)
{
	static const double le[] = { 1e3, 5e4, 1e5, 1e6, 2.5e6, 1e9 };
	enum { N = sizeof(le) / sizeof(*le), SAMPLES = 200000 };
	static uint64_t v[SAMPLES];
	struct hist h = { 0 };
	uint64_t cum[N], total;

	(void)state;
	for (int i = 0; i < SAMPLES; i++) {
		/* log-uniform from 1 ns to ~17 s, and some above the histogram's top */
		v[i] = (uint64_t)exp((rnd() % 10000) / 10000.0 * 23.6);
		if (i % 1000 == 0)
			v[i] = 1ULL << 40;
		hist_add(&h, v[i], 1);
		h.total++;
	}
	total = report_fold(&h, le, N, cum);
	assert_int_equal(total, SAMPLES);
	for (int j = 0; j < N; j++) {
		uint64_t exact = 0, near = 0;

		for (int i = 0; i < SAMPLES; i++) {
			exact += v[i] <= le[j];
			/* values in the bucket that straddles the bound, or just under it */
			near += v[i] <= le[j] && v[i] >= hist_lower(hist_bucket((uint64_t)le[j]));
		}
		assert_true(cum[j] <= exact);
		assert_true(cum[j] >= exact - near);
		if (j)
			assert_true(cum[j] >= cum[j - 1]);
	}
}

/* A bound on a bucket's upper edge takes the whole bucket; one ns less does not. */
static void test_fold_edges(void **state)
{
	struct hist h = { 0 };
	unsigned b = hist_bucket(1000000);
	double upper = (double)hist_lower(b) + hist_width(b);
	double le[2] = { upper - 1, upper };
	uint64_t cum[2];

	(void)state;
	hist_add(&h, hist_lower(b), 3);
	hist_add(&h, hist_lower(b) + hist_width(b) - 1, 2);
	assert_int_equal(report_fold(&h, le, 2, cum), 5);
	assert_int_equal(cum[0], 0);
	assert_int_equal(cum[1], 5);
	/* the overflow bucket only under +Inf */
	memset(&h, 0, sizeof(h));
	hist_add(&h, 1ULL << 45, 7);
	le[0] = 1e300;
	assert_int_equal(report_fold(&h, le, 1, cum), 7);
	assert_int_equal(cum[0], 0);
}

static struct report *sample_report(void)
{
	struct report *r = report_new(1234, true, 0.5);
	struct report_service *s;
	struct qos_sample q = { 0 };
	struct action a = { .knob = KNOB_CPU_WEIGHT, .old_value = 100, .new_value = 50 };

	assert_non_null(r);
	s = report_service(r, "we\"b\\1\nx");
	s->active = true;
	s->latency_critical = true;
	strcpy(s->cgroup, "/lc/web");
	s->cgroup_id = 77;
	s->target_s = 0.002;
	s->percentile = 0.99;
	s->slack = -0.5;
	s->knobs[KNOB_CPU_QUOTA].shown = true;
	s->knobs[KNOB_CPU_QUOTA].value = INFINITY;
	s->knobs[KNOB_CPU_WEIGHT].shown = true;
	s->knobs[KNOB_CPU_WEIGHT].value = 50;
	hist_add(&q.latency, 300000, 10);  /* 0.3 ms */
	hist_add(&q.latency, 40000000, 1); /* 40 ms */
	q.requests = 11;
	report_sample(s, &q, NULL);
	report_sample(s, &q, NULL);
	snprintf(a.reason, sizeof(a.reason), "test");
	report_action(r, s, &a, true, false, 0);
	return r;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void test_render(void **state)
{
	struct report *r = sample_report();
	const char *lbl = "service=\"we\\\"b\\\\1\\nx\",cgroup=\"/lc/web\"";
	char *text, line[512];
	size_t len;

	(void)state;
	assert_int_equal(expo_render(r, "9.9", &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_true(has_line(text, "tailwarden_build_info{version=\"9.9\"} 1"));
	assert_true(has_line(text, "# TYPE tailwarden_requests_total counter"));
	assert_true(has_line(text, "# TYPE tailwarden_request_duration_seconds histogram"));
	snprintf(line, sizeof(line), "tailwarden_requests_total{%s} 22", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line),
		 "tailwarden_request_duration_seconds_bucket{%s,le=\"0.00025\"} 0", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line),
		 "tailwarden_request_duration_seconds_bucket{%s,le=\"0.0005\"} 20", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line),
		 "tailwarden_request_duration_seconds_bucket{%s,le=\"0.05\"} 22", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line),
		 "tailwarden_request_duration_seconds_bucket{%s,le=\"+Inf\"} 22", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line), "tailwarden_request_duration_seconds_count{%s} 22", lbl);
	assert_true(has_line(text, line));
	assert_true(
		has_line(text, "tailwarden_objective_seconds{service=\"we\\\"b\\\\1\\nx\"} 0.002"));
	assert_true(has_line(text, "tailwarden_slack_ratio{service=\"we\\\"b\\\\1\\nx\"} -0.5"));
	snprintf(line, sizeof(line), "tailwarden_knob_value{%s,knob=\"cpu.max\"} +Inf", lbl);
	assert_true(has_line(text, line));
	snprintf(line, sizeof(line), "tailwarden_knob_value{%s,knob=\"cpu.weight\"} 50", lbl);
	assert_true(has_line(text, line));
	assert_true(has_line(
		text,
		"tailwarden_actions_total{service=\"we\\\"b\\\\1\\nx\",knob=\"cpu.weight\",dry_run=\"true\"} 1"));
	assert_true(has_line(text, "tailwarden_map_capacity{map=\"request_cgroups\"} 0"));
	assert_true(has_line(
		text,
		"tailwarden_sensor_drops_total{sensor=\"request\",reason=\"cgroup_table_full\"} 0"));
	/* every sample's family was announced by a TYPE line before it */
	for (char *p = text; *p; p = strchr(p, '\n') + 1) {
		char name[128], type[160];

		if (*p != '#') {
			sscanf(p, "%127[a-z_]", name);
			snprintf(type, sizeof(type), "# TYPE %s ", name);
			if (!strstr(text, type)) {
				char *u = strrchr(name, '_');

				assert_non_null(u);
				*u = '\0';
				snprintf(type, sizeof(type), "# TYPE %s histogram", name);
				assert_non_null(strstr(text, type));
			}
		}
	}
	free(text);
	report_free(r);
}

/* Absent figures are left out, not rendered as NaN; inactive services are not shown. */
static void test_absent(void **state)
{
	struct report *r = report_new(1, false, 1);
	struct report_service *s = report_service(r, "batch");
	char *text;
	size_t len;

	(void)state;
	s->active = true;
	strcpy(s->cgroup, "/be");
	report_service(r, "gone")->cgroup[0] = 'x';
	assert_int_equal(expo_render(r, "1", &text, &len), 0);
	assert_null(strstr(text, "NaN"));
	assert_null(strstr(text, "tailwarden_objective_seconds{"));
	assert_null(strstr(text, "gone"));
	assert_non_null(
		strstr(text, "tailwarden_requests_total{service=\"batch\",cgroup=\"/be\"} 0"));
	free(text);
	report_free(r);
}

/*
 * TCP flow figures: counters add up over ticks, gauges are the last tick's
 * (the RTT in seconds), and unknown figures (timeouts before 6.7, an RTT
 * with no socket) have no series.
 */
static void test_tcp(void **state)
{
	struct report *r = report_new(1, false, 1);
	struct report_service *s = report_service(r, "web");
	struct contention_sample c = { .tcp_on = true };
	struct qos_sample q = { 0 };
	char *text;
	size_t len;

	(void)state;
	s->active = true;
	strcpy(s->cgroup, "/web");
	c.tcp = (struct contention_tcp){
		.sockets = 3,
		.cwnd_sum = 30,
		.cwnd_max = 10,
		.srtt_mean_us = 250,
		.srtt_max_us = 400,
		.mss_min = NAN,
		.mss_max = 1448,
		.retrans_segs = 5,
		.fast_retrans_segs = 2,
		.timeouts = NAN,
		.bytes_acked = 1000,
		.sndq_max = 77,
	};
	report_sample(s, &q, &c);
	c.tcp.sockets = 2;
	c.tcp.retrans_segs = 4;
	report_sample(s, &q, &c);
	assert_int_equal(expo_render(r, "1", &text, &len), 0);
	assert_true(has_line(text, "# TYPE tailwarden_tcp_retransmitted_segments_total counter"));
	assert_true(has_line(text, "# TYPE tailwarden_tcp_sockets gauge"));
	assert_true(has_line(
		text,
		"tailwarden_tcp_retransmitted_segments_total{service=\"web\",cgroup=\"/web\"} 9"));
	assert_true(has_line(
		text,
		"tailwarden_tcp_fast_retransmitted_segments_total{service=\"web\",cgroup=\"/web\"} 4"));
	assert_true(has_line(
		text, "tailwarden_tcp_acked_bytes_total{service=\"web\",cgroup=\"/web\"} 2000"));
	assert_true(has_line(text, "tailwarden_tcp_sockets{service=\"web\",cgroup=\"/web\"} 2"));
	/* %.17g: 0.00025000000000000001 */
	assert_non_null(strstr(
		text, "tailwarden_tcp_srtt_seconds{service=\"web\",cgroup=\"/web\"} 0.00025"));
	assert_true(has_line(
		text, "tailwarden_tcp_send_queue_bytes_max{service=\"web\",cgroup=\"/web\"} 77"));
	assert_null(strstr(text, "tailwarden_tcp_timeouts_total{"));
	assert_null(strstr(text, "tailwarden_tcp_mss_bytes_min{"));
	assert_null(strstr(text, "NaN"));
	free(text);
	report_free(r);
}

/* The ring of last actions keeps the newest, oldest first. */
static void test_last_actions(void **state)
{
	struct report *r = report_new(1, false, 1);
	struct report_service *s = report_service(r, "x");
	struct action a = { .knob = KNOB_IO_WEIGHT };

	(void)state;
	for (int i = 0; i < REPORT_LAST_ACTIONS + 5; i++) {
		a.new_value = i;
		report_action(r, s, &a, false, true, 0);
	}
	assert_int_equal(r->n_last, REPORT_LAST_ACTIONS);
	assert_true(report_last(r, 0)->new_value == 5);
	assert_true(report_last(r, REPORT_LAST_ACTIONS - 1)->new_value == REPORT_LAST_ACTIONS + 4);
	assert_int_equal(s->knobs[KNOB_IO_WEIGHT].actions, REPORT_LAST_ACTIONS + 5);
	report_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fold_exact),   cmocka_unit_test(test_fold_edges),
		cmocka_unit_test(test_render),	     cmocka_unit_test(test_absent),
		cmocka_unit_test(test_last_actions), cmocka_unit_test(test_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
