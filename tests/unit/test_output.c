// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for sample rendering (controller/output.c): the JSON Lines
 * object is written the way `top --json` writes it, parsed back with json-c
 * and checked key by key; plus the table's number formatting.
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
#include <json-c/json.h>
#include "controller/output.h"

#define TS 1700000000.123

/*
 * Known window: 1000 requests in 2.5 s. Latency: 900 at 200 µs, 90 at 2 ms,
 * 9 at 20 ms, 1 at 150 ms, so p50 = p90 = 200 µs, p99 = 2 ms, p99.9 = 20 ms
 * and max = 150 ms. TTFB: 500 at 30 µs and 500 at 80 µs. Outbound: 40
 * requests, 30 at 1 ms and 10 at 9 ms.
 */
static void sample_fill(struct qos_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->cgroup_id = 4242;
	s->interval_s = 2.5;
	s->requests = 1000;
	s->bytes_in = 123456;
	s->bytes_out = 9876543210ULL;
	s->conns_open = 7;
	s->out_requests = 40;
	s->out_bytes_in = 5000;
	s->out_bytes_out = 6000;
	s->spans_dropped = 3;
	hist_add(&s->latency, 200000, 900);
	hist_add(&s->latency, 2000000, 90);
	hist_add(&s->latency, 20000000, 9);
	hist_add(&s->latency, 150000000, 1);
	hist_add(&s->ttfb, 30000, 500);
	hist_add(&s->ttfb, 80000, 500);
	hist_add(&s->outbound, 1000000, 30);
	hist_add(&s->outbound, 9000000, 10);
	s->outbound_on = true;
}

static const struct sensor_drops drops = {
	.spans_negative = 2,
	.spans_absurd = 5,
	.conns = 11,
	.cgroups = 13,
};

/* Render through output_json_line into a string, as `top --json` does. */
static char *render(const struct qos_sample *s, const char *path, const struct sensor_drops *d)
{
	struct json_object *o = output_sample_json(s, path, TS, d);
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_non_null(o);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(output_json_line(f, o), 0);
	assert_int_equal(fclose(f), 0);
	assert_non_null(buf);
	return buf;
}

/* The line is one JSON object on one line, ending in '\n'. */
static struct json_object *parse_line(const char *line)
{
	size_t len = strlen(line);
	struct json_object *o;

	assert_true(len > 1);
	assert_int_equal(line[len - 1], '\n');
	if (memchr(line, '\n', len - 1))
		fail_msg("newline inside the JSON line: %s", line);
	o = json_tokener_parse(line);
	if (!o)
		fail_msg("not valid JSON: %s", line);
	assert_true(json_object_is_type(o, json_type_object));
	return o;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("key \"%s\" missing in %s", key, json_object_to_json_string(o));
	return v;
}

static uint64_t get_u64(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	if (!json_object_is_type(v, json_type_int))
		fail_msg("\"%s\" is not an integer: %s", key, json_object_to_json_string(v));
	return json_object_get_uint64(v);
}

static double get_num(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		fail_msg("\"%s\" is not a number: %s", key, json_object_to_json_string(v));
	return json_object_get_double(v);
}

/* A latency in µs as rendered: bucket error plus rounding to 0.1 µs. */
static void expect_us(struct json_object *lat, const char *key, double want_us)
{
	double got = get_num(lat, key);

	if (fabs(got - want_us) > want_us * HIST_MAX_REL_ERROR + 0.05)
		fail_msg("%s: got %.1f us, want %.1f us within %.3f%%", key, got, want_us,
			 HIST_MAX_REL_ERROR * 100);
}

static void expect_latency(struct json_object *lat, double p50, double p90, double p99, double p999,
			   double max)
{
	assert_non_null(lat);
	assert_true(json_object_is_type(lat, json_type_object));
	expect_us(lat, "p50", p50);
	expect_us(lat, "p90", p90);
	expect_us(lat, "p99", p99);
	expect_us(lat, "p999", p999);
	expect_us(lat, "max", max);
}

static void test_json_sample(void **state)
{
	struct qos_sample s;
	struct json_object *o, *out, *d;
	char *line;

	(void)state;
	sample_fill(&s);
	line = render(&s, "/system.slice/nginx.service", &drops);
	o = parse_line(line);

	assert_true(fabs(get_num(o, "ts") - TS) < 1e-3);
	assert_string_equal(json_object_get_string(get(o, "cgroup")),
			    "/system.slice/nginx.service");
	/* Slashes are not escaped: the path reads as typed. */
	if (!strstr(line, "\"cgroup\":\"/system.slice/nginx.service\""))
		fail_msg("cgroup path escaped: %s", line);
	assert_int_equal(get_u64(o, "cgroup_id"), 4242);
	assert_true(fabs(get_num(o, "interval_s") - 2.5) < 1e-9);
	assert_int_equal(get_u64(o, "requests"), 1000);
	assert_true(fabs(get_num(o, "rps") - 400.0) < 0.05);
	expect_latency(get(o, "latency_us"), 200, 200, 2000, 20000, 150000);
	expect_latency(get(o, "ttfb_us"), 30, 80, 80, 80, 80);
	assert_int_equal(get_u64(o, "bytes_in"), 123456);
	assert_int_equal(get_u64(o, "bytes_out"), 9876543210ULL);
	assert_int_equal(get_u64(o, "conns_open"), 7);

	out = get(o, "outbound");
	assert_non_null(out);
	assert_int_equal(get_u64(out, "requests"), 40);
	expect_latency(get(out, "latency_us"), 1000, 9000, 9000, 9000, 9000);

	d = get(o, "dropped");
	assert_non_null(d);
	assert_int_equal(get_u64(d, "spans"), 2 + 5);
	assert_int_equal(get_u64(d, "conns"), 11);
	assert_int_equal(get_u64(d, "cgroups"), 13);

	json_object_put(o);
	free(line);
}

/* A window without requests has no latency, not a latency of 0 or -1. */
static void test_json_no_requests(void **state)
{
	struct qos_sample s;
	struct json_object *o;
	char *line;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.cgroup_id = 77;
	s.interval_s = 1.0;
	s.bytes_in = 10;
	s.outbound_on = true;
	line = render(&s, "/idle", &drops);
	o = parse_line(line);
	assert_int_equal(get_u64(o, "requests"), 0);
	assert_true(get_num(o, "rps") == 0);
	assert_null(get(o, "latency_us"));
	assert_null(get(o, "ttfb_us"));
	assert_int_equal(get_u64(get(o, "outbound"), "requests"), 0);
	assert_null(get(get(o, "outbound"), "latency_us"));
	assert_int_equal(get_u64(o, "bytes_in"), 10);
	json_object_put(o);
	free(line);

	/*
	 * A reply of an earlier window that kept sending moved its span to a
	 * later bucket in this one: still no request, so still no latency.
	 */
	hist_add(&s.latency, 128000000, 1);
	hist_add(&s.phase[TW_PHASE_SENDING], 127000000, 1);
	s.phase_on[TW_PHASE_SENDING] = true;
	line = render(&s, "/idle", &drops);
	o = parse_line(line);
	assert_null(get(o, "latency_us"));
	assert_null(get(o, "ttfb_us"));
	assert_null(get(o, "phases"));
	json_object_put(o);
	free(line);
}

/*
 * Phases: each phase's percentiles and mean, the mean span they add up to;
 * a phase the mode does not see is null (the receive mode's queued), and
 * its table column "-".
 */
static void phases_fill(struct qos_sample *s, bool queued_on)
{
	/* 1000 requests: queued 100 us, service 1 ms (10 of them 5 ms), sending 0 or 2 ms. */
	hist_add(&s->phase[TW_PHASE_QUEUED], 100000, 1000);
	hist_add(&s->phase[TW_PHASE_SERVICE], 1000000, 990);
	hist_add(&s->phase[TW_PHASE_SERVICE], 5000000, 10);
	hist_add(&s->phase[TW_PHASE_SENDING], 0, 900);
	hist_add(&s->phase[TW_PHASE_SENDING], 2000000, 100);
	s->phase_ns[TW_PHASE_QUEUED] = queued_on ? 1000 * 100000ULL : 0;
	s->phase_ns[TW_PHASE_SERVICE] = 990 * 1000000ULL + 10 * 5000000ULL;
	s->phase_ns[TW_PHASE_SENDING] = 100 * 2000000ULL;
	s->span_ns = s->phase_ns[0] + s->phase_ns[1] + s->phase_ns[2];
	s->phase_on[TW_PHASE_QUEUED] = queued_on;
	s->phase_on[TW_PHASE_SERVICE] = s->phase_on[TW_PHASE_SENDING] = true;
}

static void test_json_phases(void **state)
{
	struct json_object *o, *p;
	struct qos_sample s;
	char *line;
	double sum = 0;

	(void)state;
	for (int queued_on = 1; queued_on >= 0; queued_on--) {
		sample_fill(&s);
		phases_fill(&s, queued_on);
		line = render(&s, "/web", &drops);
		o = parse_line(line);
		p = get(o, "phases");
		assert_non_null(p);
		if (queued_on) {
			expect_latency(get(p, "queued_us"), 100, 100, 100, 100, 100);
			assert_true(fabs(get_num(get(p, "queued_us"), "mean") - 100) < 0.05);
		} else {
			assert_null(get(p, "queued_us"));
		}
		expect_latency(get(p, "service_us"), 1000, 1000, 1000, 5000, 5000);
		assert_true(fabs(get_num(get(p, "service_us"), "mean") - 1040) < 0.05);
		expect_latency(get(p, "sending_us"), 0, 0, 2000, 2000, 2000);
		assert_true(fabs(get_num(get(p, "sending_us"), "mean") - 200) < 0.05);
		/* The means add up to the mean span. */
		sum = (queued_on ? get_num(get(p, "queued_us"), "mean") : 0) +
		      get_num(get(p, "service_us"), "mean") + get_num(get(p, "sending_us"), "mean");
		assert_true(fabs(get_num(p, "span_mean_us") - sum) < 0.1);
		json_object_put(o);
		free(line);
	}
	/* No requests: no phases. */
	memset(&s, 0, sizeof(s));
	s.interval_s = 1;
	line = render(&s, "/idle", &drops);
	o = parse_line(line);
	assert_null(get(o, "phases"));
	json_object_put(o);
	free(line);
}

static void test_table_phases(void **state)
{
	char *buf = NULL, want[200], q[16], sv[16], sd[16];
	struct qos_sample s;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (int queued_on = 1; queued_on >= 0; queued_on--) {
		sample_fill(&s);
		phases_fill(&s, queued_on);
		f = open_memstream(&buf, &len);
		assert_non_null(f);
		output_table_row(f, &s, "/web", NULL, NULL);
		assert_int_equal(fclose(f), 0);
		output_fmt_duration(q, sizeof(q),
				    queued_on ? hist_percentile(&s.phase[0], 0.99) : -1);
		output_fmt_duration(sv, sizeof(sv), hist_percentile(&s.phase[1], 0.99));
		output_fmt_duration(sd, sizeof(sd), hist_percentile(&s.phase[2], 0.99));
		assert_string_equal(q, queued_on ? "100us" : "-");
		snprintf(want, sizeof(want), " %8s %8s %8s %8s %8s ", q, sv, sd, "49.4K", "4.0G");
		if (!strstr(buf, want))
			fail_msg("phase columns: \"%s\", want \"%s\"", buf, want);
		free(buf);
		buf = NULL;
	}
}

/* Without top --outbound, "outbound" is null: not measured, not zero. */
static void test_json_outbound_off(void **state)
{
	struct qos_sample s;
	struct json_object *o, *out = NULL;
	char *line;

	(void)state;
	sample_fill(&s);
	s.outbound_on = false;
	line = render(&s, "/web", &drops);
	o = parse_line(line);
	assert_true(json_object_object_get_ex(o, "outbound", &out));
	assert_null(out);
	assert_int_equal(get_u64(o, "requests"), 1000);
	json_object_put(o);
	free(line);
}

/* A cgroup removed before it could be named is JSON null, not "(null)". */
static void test_json_null_path(void **state)
{
	struct qos_sample s;
	struct json_object *o;
	char *line;

	(void)state;
	sample_fill(&s);
	line = render(&s, NULL, &drops);
	o = parse_line(line);
	assert_null(get(o, "cgroup"));
	assert_int_equal(get_u64(o, "cgroup_id"), 4242);
	json_object_put(o);
	free(line);
}

/* conns_open is a sum of per-CPU deltas: a transient negative shows as 0. */
static void test_json_negative_conns(void **state)
{
	struct qos_sample s;
	struct json_object *o;
	char *line;

	(void)state;
	sample_fill(&s);
	s.conns_open = -3;
	line = render(&s, "/a", &drops);
	o = parse_line(line);
	assert_int_equal(json_object_get_int64(get(o, "conns_open")), 0);
	json_object_put(o);
	free(line);
}

/* cgroup ids are 64-bit inode numbers: all 64 bits survive. */
static void test_json_large_id(void **state)
{
	struct qos_sample s;
	struct json_object *o;
	char *line;

	(void)state;
	sample_fill(&s);
	s.cgroup_id = 0xfedcba9876543210ULL;
	line = render(&s, "/a", &drops);
	if (!strstr(line, "\"cgroup_id\":18364758544493064720"))
		fail_msg("cgroup_id not written as an unsigned integer: %s", line);
	o = parse_line(line);
	assert_int_equal(get_u64(o, "cgroup_id"), 0xfedcba9876543210ULL);
	json_object_put(o);
	free(line);
}

/* Directory names may hold quotes, backslashes and control characters. */
static void test_json_escaping(void **state)
{
	static const char *const paths[] = {
		"/we\"ird/na\\me",
		"/line\nbreak/tab\there",
		"/ctl\x01\x1f/\"\\\"",
		"/utf8-\xc3\xa9t\xc3\xa9",
	};
	struct qos_sample s;

	(void)state;
	sample_fill(&s);
	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++) {
		char *line = render(&s, paths[i], &drops);
		struct json_object *o = parse_line(line);
		struct json_object *cg = get(o, "cgroup");

		assert_true(json_object_is_type(cg, json_type_string));
		assert_string_equal(json_object_get_string(cg), paths[i]);
		assert_int_equal(json_object_get_string_len(cg), strlen(paths[i]));
		json_object_put(o);
		free(line);
	}
}

/* Without drop counters the key is left out rather than faked. */
static void test_json_no_drops(void **state)
{
	struct qos_sample s;
	struct json_object *o, *v;
	char *line;

	(void)state;
	sample_fill(&s);
	line = render(&s, "/a", NULL);
	o = parse_line(line);
	assert_false(json_object_object_get_ex(o, "dropped", &v));
	assert_int_equal(get_u64(o, "requests"), 1000);
	json_object_put(o);
	free(line);
}

static void expect_duration(double ns, const char *want)
{
	char buf[32];

	output_fmt_duration(buf, sizeof(buf), ns);
	if (strcmp(buf, want))
		fail_msg("output_fmt_duration(%.1f) = \"%s\", want \"%s\"", ns, buf, want);
}

static void test_fmt_duration(void **state)
{
	(void)state;
	expect_duration(-1, "-");
	expect_duration(-0.5, "-");
	expect_duration(0, "0us");
	expect_duration(312000, "312us");
	expect_duration(312400, "312us");
	expect_duration(999000, "999us");
	/* Rounding up to the next unit switches unit: never "1000us". */
	expect_duration(999600, "1.00ms");
	expect_duration(999996000, "1.00s");
	expect_duration(1000000, "1.00ms");
	expect_duration(1270000, "1.27ms");
	expect_duration(45600000, "45.60ms");
	expect_duration(1000000000, "1.00s");
	expect_duration(2100000000, "2.10s");
	expect_duration(61000000000.0, "61.00s");
}

static void expect_rate(double v, const char *want)
{
	char buf[32];

	output_fmt_rate(buf, sizeof(buf), v);
	if (strcmp(buf, want))
		fail_msg("output_fmt_rate(%.3f) = \"%s\", want \"%s\"", v, buf, want);
}

static void test_fmt_rate(void **state)
{
	(void)state;
	expect_rate(0, "0");
	expect_rate(0.4, "0");
	expect_rate(812, "812");
	expect_rate(999, "999");
	expect_rate(999.6, "1.0K");
	expect_rate(999999, "1.0M");
	expect_rate(1000, "1.0K");
	expect_rate(12345, "12.3K");
	expect_rate(4500000, "4.5M");
	expect_rate(1200000000, "1.2G");
	expect_rate(3e12, "3.0T");
	expect_rate(5e15, "5000.0T");
}

/* Split buf into its lines in place; returns how many (at most max). */
static size_t split_lines(char *buf, char **line, size_t max)
{
	size_t n = 0;
	char *nl;

	while (n < max && (nl = strchr(buf, '\n'))) {
		*nl = '\0';
		line[n++] = buf;
		buf = nl + 1;
	}
	assert_int_equal(*buf, '\0');
	return n;
}

/* Table rows: one line each, columns in header order. */
static void test_table_row(void **state)
{
	static const char long_path[] =
		"/kubepods.slice/kubepods-burstable.slice/pod1234/cri-containerd-abcdef.scope";
	char *buf = NULL, *line[8], want[200], p50[16], p99[16], p999[16];
	struct qos_sample s;
	size_t len = 0;
	FILE *f;

	(void)state;
	sample_fill(&s);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	output_table_header(f);
	output_table_row(f, &s, "/system.slice/nginx.service", NULL, NULL);
	output_table_row(f, &s, NULL, NULL, NULL);
	output_table_row(f, &s, long_path, NULL, NULL);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(split_lines(buf, line, 8), 4);

	assert_true(strncmp(line[0], "CGROUP ", 7) == 0);
	/* 1000 requests in 2.5 s, 123456 and 9876543210 bytes, 7 connections. */
	output_fmt_duration(p50, sizeof(p50), hist_percentile(&s.latency, 0.5));
	output_fmt_duration(p99, sizeof(p99), hist_percentile(&s.latency, 0.99));
	output_fmt_duration(p999, sizeof(p999), hist_percentile(&s.latency, 0.999));
	/* No contention sensor: its columns are "-". Phases not seen: "-" too. */
	snprintf(want, sizeof(want),
		 "%-40s %8s %8s %8s %8s %8s %8s %8s %8s %8s %6s %8s %5s %8s %7s  %s",
		 "/system.slice/nginx.service", "400", p50, p99, p999, "-", "-", "-", "49.4K",
		 "4.0G", "7", "-", "-", "-", "-", "-");
	assert_string_equal(line[1], want);
	/* Within the bucket error of the real values. */
	assert_string_equal(p50, "201us");
	assert_string_equal(p99, "2.00ms");
	assert_true(strncmp(p999, "20.", 3) == 0);
	/* Removed cgroup: its id instead. */
	assert_true(strncmp(line[2], "(removed, id 4242) ", 19) == 0);
	/* Long path: the informative end is kept, the row stays aligned. */
	snprintf(want, sizeof(want), "\u2026%s ", long_path + strlen(long_path) - 39);
	if (strncmp(line[3], want, strlen(want)))
		fail_msg("long path row: \"%s\", want it to start \"%s\"", line[3], want);
	assert_string_equal(line[3] + strlen(want) - 1, line[1] + 40);
	free(buf);
}

/* A contention sample with every figure set, and its table columns and JSON. */
static void contention_fill(struct contention_sample *c)
{
	memset(c, 0, sizeof(*c));
	c->cgroup_id = 4242;
	c->interval_s = 2.5;
	for (int i = 0; i < 100; i++)
		hist_add(&c->runq, i < 99 ? 10000 : 3000000, 1); /* p99 10us, max 3ms */
	hist_add(&c->io, 800000, 10);
	c->runq_delay_s = 0.25;
	c->cpu_usage_s = 1.5;
	c->cpu_throttled_s = 0.5;
	c->cpu_throttled_periods = 12;
	c->io_read_bytes = 4e6;
	c->io_write_bytes = 1e6;
	c->vfs_read_bytes = 7;
	c->vfs_write_bytes = NAN;
	c->futex_wait_s = 0.125;
	c->lock_contention_s = 0;
	c->page_faults = 99;
	c->reclaim_s = NAN;
	c->tcp_retransmits = 3;
	c->tcp_srtt_us = 55.5;
	c->psi_cpu_some = 12.5;
	c->psi_io_some = NAN;
	c->psi_memory_some = 0;
}

static void test_contention_columns(void **state)
{
	struct contention_sample c;
	struct diagnosis d = { .dominant = DIAG_CPU, .cause = DIAG_CAUSE_INTERFERENCE };
	struct qos_sample s;
	char *buf = NULL, io[16], want[96];
	size_t len = 0;
	FILE *f;

	(void)state;
	sample_fill(&s);
	contention_fill(&c);
	output_fmt_duration(io, sizeof(io), hist_percentile(&c.io, 0.99));
	assert_true(fabs(hist_percentile(&c.io, 0.99) - 800000) <= 800000 * HIST_MAX_REL_ERROR);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	output_table_row(f, &s, "/web", &c, &d);
	assert_int_equal(fclose(f), 0);
	/* run-queue p99 10us, throttled 0.5 s of 2.5 s, I/O p99 800us, 5 MB in 2.5 s. */
	snprintf(want, sizeof(want), " %8s %5s %8s %7s  %s\n", "10us", "20", io, "2.0",
		 "cpu/interference");
	if (!strstr(buf, want))
		fail_msg("contention columns: \"%s\", want \"%s\" at the end", buf, want);
	free(buf);
}

static void test_contention_json(void **state)
{
	struct diagnosis d = { .dominant = DIAG_LOCK,
			       .cause = DIAG_CAUSE_LOAD,
			       .n_evidence = 1,
			       .evidence = { { "futex_wait_s/req", 0.002, 0.0001, 20 } } };
	struct contention_sample c;
	struct json_object *o, *x;

	(void)state;
	contention_fill(&c);
	x = json_object_new_object();
	output_contention_json(x, &c, &d);
	o = json_tokener_parse(json_object_to_json_string(x));
	json_object_put(x);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "runq_delay_us", &x));
	assert_true(fabs(json_object_get_double(json_object_object_get(x, "p99")) - 10.0) <=
		    10.0 * HIST_MAX_REL_ERROR + 0.05);
	assert_true(fabs(json_object_get_double(json_object_object_get(o, "runq_delay_s")) - 0.25) <
		    1e-9);
	assert_true(fabs(json_object_get_double(json_object_object_get(o, "cpu_throttled_s")) -
			 0.5) < 1e-9);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "io_read_bytes")),
			 4000000);
	/* Unavailable figures are null, zero stays zero. */
	assert_true(json_object_object_get_ex(o, "vfs_write_bytes", &x) && x == NULL);
	assert_true(json_object_object_get_ex(o, "reclaim_s", &x) && x == NULL);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "lock_contention_s")), 0);
	x = json_object_object_get(o, "psi");
	assert_true(fabs(json_object_get_double(json_object_object_get(x, "cpu_some")) - 12.5) <
		    1e-9);
	assert_true(json_object_object_get_ex(x, "io_some", &x) && x == NULL);
	x = json_object_object_get(o, "diagnosis");
	assert_string_equal(json_object_get_string(json_object_object_get(x, "dominant")), "lock");
	assert_string_equal(json_object_get_string(json_object_object_get(x, "cause")), "load");
	x = json_object_array_get_idx(json_object_object_get(x, "evidence"), 0);
	assert_string_equal(json_object_get_string(json_object_object_get(x, "signal")),
			    "futex_wait_s/req");
	assert_true(fabs(json_object_get_double(json_object_object_get(x, "ratio")) - 20) < 1e-9);
	json_object_put(o);

	/* No contention sensor: every signal and the diagnosis are null. */
	x = json_object_new_object();
	output_contention_json(x, NULL, NULL);
	o = json_tokener_parse(json_object_to_json_string(x));
	json_object_put(x);
	assert_true(json_object_object_get_ex(o, "runq_delay_us", &x) && x == NULL);
	assert_true(json_object_object_get_ex(o, "cpu_usage_s", &x) && x == NULL);
	assert_true(json_object_object_get_ex(o, "diagnosis", &x) && x == NULL);
	json_object_put(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_contention_columns),  cmocka_unit_test(test_contention_json),
		cmocka_unit_test(test_json_sample),	    cmocka_unit_test(test_json_no_requests),
		cmocka_unit_test(test_json_phases),	    cmocka_unit_test(test_table_phases),
		cmocka_unit_test(test_json_outbound_off),   cmocka_unit_test(test_json_null_path),
		cmocka_unit_test(test_json_negative_conns), cmocka_unit_test(test_json_large_id),
		cmocka_unit_test(test_json_escaping),	    cmocka_unit_test(test_json_no_drops),
		cmocka_unit_test(test_fmt_duration),	    cmocka_unit_test(test_fmt_rate),
		cmocka_unit_test(test_table_row),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
