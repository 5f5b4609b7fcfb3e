// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for recordings (controller/recording.c): what is written
 * reads back exactly; a truncated gzip stream, corrupt gzip data and a
 * bad line give an error naming the byte offset after the ticks before
 * it were returned; rotation.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>
#include "controller/recording.h"
#include "sensing/hist.h"

static char dir[] = "/tmp/tw-recording-XXXXXX";

static int setup_dir(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static const struct rec_header header = {
	.version = "0.1.0",
	.host = "testhost",
	.kernel = "6.18 test",
	.sensing_mode = "arrival",
	.period_ns = 500000000ULL,
	.contention = true,
	.started = 1700000000.25,
};

/*
 * Tick i: one cgroup with figures that do not round-trip through %g, and
 * its phases: queued seen in even ticks only (odd: as the receive mode).
 * old: written as before the phases and the flow figures (no raw.phases, no
 * raw.contention.tcp).
 */
static struct json_object *make_tick_as(unsigned i, bool old)
{
	struct qos_sample q = { .cgroup_id = 4242,
				.interval_s = 0.1 + 0.2,
				.requests = 1000 + i,
				.bytes_in = 12345,
				.conns_open = -1 };
	struct contention_sample c = { .cgroup_id = 4242, .interval_s = 0.1 + 0.2 };
	double knob[KNOB_MAX] = { INFINITY, 100, NAN, NAN };
	struct json_object *a = json_object_new_array();

	struct json_object *g, *raw;

	hist_add(&q.latency, 150000, 7 + i);
	hist_add(&q.latency, 3000000, 2);
	hist_add(&c.runq, 20000, 5);
	c.cpu_usage_s = 1.0 / 3;
	c.runq_delay_s = NAN;
	c.psi_cpu_some = 12.5;
	c.tcp_srtt_us = NAN;
	/* Flow figures in even ticks: one unknown (timeouts before 6.7), one not a whole number. */
	c.tcp_on = i % 2 == 0;
	c.tcp = (struct contention_tcp){ .sockets = 3,
					 .cwnd_max = 10,
					 .srtt_mean_us = 1.0 / 3,
					 .mss_min = 1448,
					 .retrans_segs = 7 + i,
					 .timeouts = NAN,
					 .bytes_received = 1e12 + 1 };
	q.phase_on[TW_PHASE_QUEUED] = i % 2 == 0;
	q.phase_on[TW_PHASE_SERVICE] = q.phase_on[TW_PHASE_SENDING] = true;
	if (q.phase_on[TW_PHASE_QUEUED])
		hist_add(&q.phase[TW_PHASE_QUEUED], 40000, 7 + i);
	hist_add(&q.phase[TW_PHASE_SERVICE], 100000, 7 + i);
	hist_add(&q.phase[TW_PHASE_SERVICE], 2000000, 2);
	hist_add(&q.phase[TW_PHASE_SENDING], 0, 7 + i);
	hist_add(&q.phase[TW_PHASE_SENDING], 900000, 2);
	q.phase_ns[TW_PHASE_QUEUED] = q.phase_on[TW_PHASE_QUEUED] ? 40000ULL * (7 + i) + 12345 : 0;
	q.phase_ns[TW_PHASE_SERVICE] = 100000ULL * (7 + i) + 4000000 + 1;
	q.phase_ns[TW_PHASE_SENDING] = 1800000 + 3;
	q.span_ns = q.phase_ns[0] + q.phase_ns[1] + q.phase_ns[2] + (1ULL << 40);
	g = rec_cgroup_json(&q, "/tw/web", 1700000000.5 + i, &c, knob);
	if (old && json_object_object_get_ex(g, "raw", &raw)) {
		struct json_object *co;

		json_object_object_del(raw, "phases");
		if (json_object_object_get_ex(raw, "contention", &co))
			json_object_object_del(co, "tcp");
	}
	json_object_array_add(a, g);
	return rec_tick_json(10 + i, (10 + i) * 500000ULL, 1700000000.5 + i, 0.1 + 0.2, a);
}

static struct json_object *make_tick(unsigned i)
{
	return make_tick_as(i, false);
}

static void write_recording(const char *path, unsigned ticks)
{
	struct rec_writer *w;

	assert_int_equal(rec_writer_open(path, 0, &header, &w), 0);
	for (unsigned i = 0; i < ticks; i++)
		assert_int_equal(rec_writer_line(w, make_tick(i)), 0);
	assert_int_equal(rec_writer_close(w), 0);
}

/* Read every tick: their number; r the final return, err its message. */
static unsigned read_all(const char *path, int *r, char *err, size_t len)
{
	struct rec_reader *rd;
	struct rec_header h;
	struct rec_tick t;
	unsigned n = 0;

	err[0] = '\0';
	*r = rec_open(path, &rd, &h, err, len);
	if (*r)
		return 0;
	while ((*r = rec_next(rd, &t, err, len)) > 0) {
		n++;
		rec_tick_clear(&t);
	}
	rec_close(rd);
	return n;
}

static void test_round_trip(void **state)
{
	struct rec_reader *rd;
	struct rec_header h;
	struct rec_tick t;
	char path[256], err[512];
	const struct rec_cgroup *g;

	(void)state;
	path_of(path, sizeof(path), "rt.jsonl.gz");
	write_recording(path, 3);
	assert_int_equal(rec_open(path, &rd, &h, err, sizeof(err)), 0);
	assert_string_equal(h.host, "testhost");
	assert_string_equal(h.kernel, "6.18 test");
	assert_string_equal(h.version, "0.1.0");
	assert_string_equal(h.sensing_mode, "arrival");
	assert_true(h.period_ns == 500000000ULL);
	assert_true(h.contention);
	assert_int_equal(h.part, 1);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(rec_next(rd, &t, err, sizeof(err)), 1);
		assert_true(t.index == 10 + i);
		assert_true(t.mono_us == (10 + i) * 500000ULL);
		assert_true(t.interval_s == 0.1 + 0.2);
		assert_int_equal(t.n, 1);
		g = &t.v[0];
		assert_string_equal(g->path, "/tw/web");
		assert_true(g->id == 4242);
		assert_true(g->q.requests == 1000 + i);
		assert_true(g->q.bytes_in == 12345);
		assert_true(g->q.conns_open == -1);
		assert_true(g->q.interval_s == 0.1 + 0.2);
		assert_true(g->q.latency.total == 9 + i);
		assert_true(g->q.latency.count[hist_bucket(150000)] == 7 + i);
		assert_true(g->q.latency.count[hist_bucket(3000000)] == 2);
		assert_true(hist_percentile(&g->q.latency, 0.99) == hist_mid(hist_bucket(3000000)));
		assert_true(g->have_c);
		assert_true(g->c.cpu_usage_s == 1.0 / 3);
		assert_true(isnan(g->c.runq_delay_s));
		assert_true(isnan(g->c.tcp_srtt_us));
		assert_true(g->c.psi_cpu_some == 12.5);
		assert_true(g->c.runq.total == 5);
		/* The flow figures, exactly, where they were gathered. */
		assert_true(g->c.tcp_on == (i % 2 == 0));
		if (i % 2 == 0) {
			assert_true(g->c.tcp.sockets == 3 && g->c.tcp.cwnd_max == 10);
			assert_true(g->c.tcp.srtt_mean_us == 1.0 / 3);
			assert_true(g->c.tcp.retrans_segs == 7 + i);
			assert_true(isnan(g->c.tcp.timeouts));
			assert_true(g->c.tcp.bytes_received == 1e12 + 1);
		}
		assert_true(isinf(g->knob[KNOB_CPU_QUOTA]));
		assert_true(g->knob[KNOB_CPU_WEIGHT] == 100);
		assert_true(isnan(g->knob[KNOB_IO_WEIGHT]));
		/* The phases, exactly; queued unseen in odd ticks. */
		assert_true(g->q.phase_on[TW_PHASE_QUEUED] == (i % 2 == 0));
		assert_true(g->q.phase_on[TW_PHASE_SERVICE] && g->q.phase_on[TW_PHASE_SENDING]);
		if (i % 2 == 0) {
			assert_true(g->q.phase[TW_PHASE_QUEUED].total == 7 + i);
			assert_true(g->q.phase[TW_PHASE_QUEUED].count[hist_bucket(40000)] == 7 + i);
			assert_true(g->q.phase_ns[TW_PHASE_QUEUED] == 40000ULL * (7 + i) + 12345);
		} else {
			assert_true(g->q.phase[TW_PHASE_QUEUED].total == 0);
			assert_true(g->q.phase_ns[TW_PHASE_QUEUED] == 0);
		}
		assert_true(g->q.phase[TW_PHASE_SERVICE].total == 9 + i);
		assert_true(g->q.phase[TW_PHASE_SERVICE].count[hist_bucket(2000000)] == 2);
		assert_true(g->q.phase[TW_PHASE_SENDING].count[0] == 7 + i);
		assert_true(g->q.phase[TW_PHASE_SENDING].count[hist_bucket(900000)] == 2);
		assert_true(g->q.phase_ns[TW_PHASE_SERVICE] == 100000ULL * (7 + i) + 4000000 + 1);
		assert_true(g->q.phase_ns[TW_PHASE_SENDING] == 1800000 + 3);
		assert_true(g->q.span_ns ==
			    g->q.phase_ns[0] + g->q.phase_ns[1] + g->q.phase_ns[2] + (1ULL << 40));
		rec_tick_clear(&t);
	}
	assert_int_equal(rec_next(rd, &t, err, sizeof(err)), 0);
	rec_close(rd);
}

/* A recording made before the phases reads back, every phase unseen. */
static void test_no_phases(void **state)
{
	struct rec_writer *w;
	struct rec_reader *rd;
	struct rec_header h;
	struct rec_tick t;
	char path[256], err[512];

	(void)state;
	path_of(path, sizeof(path), "old.jsonl.gz");
	assert_int_equal(rec_writer_open(path, 0, &header, &w), 0);
	assert_int_equal(rec_writer_line(w, make_tick_as(0, true)), 0);
	assert_int_equal(rec_writer_close(w), 0);
	assert_int_equal(rec_open(path, &rd, &h, err, sizeof(err)), 0);
	assert_int_equal(rec_next(rd, &t, err, sizeof(err)), 1);
	assert_int_equal(t.n, 1);
	assert_true(t.v[0].q.requests == 1000);
	assert_true(t.v[0].q.latency.total == 9);
	for (unsigned p = 0; p < TW_PHASES; p++) {
		assert_false(t.v[0].q.phase_on[p]);
		assert_true(t.v[0].q.phase[p].total == 0);
		assert_true(t.v[0].q.phase_ns[p] == 0);
	}
	assert_true(t.v[0].q.span_ns == 0);
	/* ... and from before the flow figures: not gathered. */
	assert_true(t.v[0].have_c);
	assert_false(t.v[0].c.tcp_on);
	rec_tick_clear(&t);
	assert_int_equal(rec_next(rd, &t, err, sizeof(err)), 0);
	rec_close(rd);
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static void copy_prefix(const char *from, const char *to, off_t n)
{
	FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
	char *buf = malloc(n);

	assert_non_null(f);
	assert_non_null(g);
	assert_int_equal(fread(buf, 1, n, f), n);
	assert_int_equal(fwrite(buf, 1, n, g), n);
	fclose(f);
	fclose(g);
	free(buf);
}

static void test_truncated(void **state)
{
	char path[256], cut[256], err[512], want[64];
	off_t size;
	unsigned n;
	int r;

	(void)state;
	path_of(path, sizeof(path), "full.jsonl.gz");
	path_of(cut, sizeof(cut), "cut.jsonl.gz");
	write_recording(path, 5);
	size = file_size(path);
	/* Without its trailer: every line is there (flushed per tick), the end is not. */
	copy_prefix(path, cut, size - 8);
	n = read_all(cut, &r, err, sizeof(err));
	assert_int_equal(n, 5);
	assert_int_equal(r, -EPIPE);
	snprintf(want, sizeof(want), ": byte %lld: ", (long long)(size - 8));
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, "truncated"));
	assert_non_null(strstr(err, cut));
	/*
	 * Cut in the middle of the fourth tick: a recording of three ticks
	 * is the same bytes up to its end block and trailer. The three
	 * ticks before the cut (the third maybe cut too), then the error.
	 */
	path_of(cut, sizeof(cut), "three.jsonl.gz");
	write_recording(cut, 3);
	size = file_size(cut) - 10;
	copy_prefix(path, cut, size);
	n = read_all(cut, &r, err, sizeof(err));
	assert_true(n == 2 || n == 3);
	assert_int_equal(r, -EPIPE);
	snprintf(want, sizeof(want), ": byte %lld: ", (long long)size);
	assert_non_null(strstr(err, want));
}

static void test_corrupt_gzip(void **state)
{
	char path[256], bad[256], err[512];
	unsigned char *buf;
	off_t size;
	unsigned n;
	FILE *f;
	int r;

	(void)state;
	off_t at;

	(void)state;
	path_of(path, sizeof(path), "good.jsonl.gz");
	path_of(bad, sizeof(bad), "bad.jsonl.gz");
	write_recording(bad, 3);
	at = file_size(bad); /* in the fourth tick of six */
	write_recording(path, 6);
	size = file_size(path);
	buf = malloc(size);
	f = fopen(path, "rb");
	assert_int_equal(fread(buf, 1, size, f), size);
	fclose(f);
	assert_true(at + 16 < size);
	for (off_t i = at - 10; i < at + 6; i++)
		buf[i] ^= 0x5a;
	f = fopen(bad, "wb");
	assert_int_equal(fwrite(buf, 1, size, f), size);
	fclose(f);
	free(buf);
	n = read_all(bad, &r, err, sizeof(err));
	assert_true(n >= 2 && n <= 3);
	assert_true(r < 0);
	assert_non_null(strstr(err, "byte "));
	/* Not gzip at all. */
	f = fopen(bad, "w");
	fputs("{\"tailwarden_recording\": 1}\n", f);
	fclose(f);
	n = read_all(bad, &r, err, sizeof(err));
	assert_int_equal(n, 0);
	assert_int_equal(r, -EBADMSG);
	assert_non_null(strstr(err, ": byte 2: not gzip data (incorrect header check)"));
}

/* A gzip file of the given lines, each ending in "\n". */
static void write_lines(const char *path, const char *const *lines, size_t n)
{
	gzFile gz = gzopen(path, "wb");

	assert_non_null(gz);
	for (size_t i = 0; i < n; i++) {
		gzputs(gz, lines[i]);
		gzputc(gz, '\n');
	}
	assert_int_equal(gzclose(gz), Z_OK);
}

static void test_bad_lines(void **state)
{
	struct json_object *h = rec_header_json(&header), *t0 = make_tick(0), *t1 = make_tick(1);
	char path[256], err[512], want[512];
	char *hs = strdup(json_object_to_json_string_ext(h, JSON_C_TO_STRING_PLAIN));
	char *ts0 = strdup(json_object_to_json_string_ext(t0, JSON_C_TO_STRING_PLAIN));
	char *ts1 = strdup(json_object_to_json_string_ext(t1, JSON_C_TO_STRING_PLAIN));
	unsigned long long off = strlen(hs) + 1 + strlen(ts0) + 1;
	unsigned n;
	int r;

	(void)state;
	path_of(path, sizeof(path), "lines.jsonl.gz");
	/* A line that is not JSON: line 3, at the byte where it starts. */
	write_lines(path, (const char *const[]){ hs, ts0, "{\"tick\": 12, oops", ts1 }, 4);
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 1);
	assert_int_equal(r, -EINVAL);
	snprintf(want, sizeof(want), "%s:3: byte %llu: not a JSON object", path, off);
	assert_non_null(strstr(err, want));
	/* JSON, but not a tick: the key at fault is named. */
	write_lines(path, (const char *const[]){ hs, ts0, "{\"tick\": 12}" }, 3);
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 1);
	assert_non_null(strstr(err, ":3: byte "));
	assert_non_null(strstr(err, "\"mono_us\""));
	/* Ticks must increase. */
	write_lines(path, (const char *const[]){ hs, ts1, ts0 }, 3);
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 1);
	assert_non_null(strstr(err, "tick 10 after tick 11"));
	/* No header. */
	write_lines(path, (const char *const[]){ ts0 }, 1);
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 0);
	snprintf(want, sizeof(want), "%s:1: byte 0: not a tailwarden recording", path);
	assert_non_null(strstr(err, want));
	/* A last line without its newline. */
	{
		gzFile gz = gzopen(path, "wb");

		gzputs(gz, hs);
		gzputs(gz, "\n");
		gzputs(gz, ts0);
		gzclose(gz);
	}
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 0);
	snprintf(want, sizeof(want), ":2: byte %zu: the last line has no end", strlen(hs) + 1);
	assert_non_null(strstr(err, want));
	/* Empty file. */
	write_lines(path, NULL, 0);
	assert_int_equal(truncate(path, 0), 0);
	n = read_all(path, &r, err, sizeof(err));
	assert_int_equal(n, 0);
	assert_non_null(strstr(err, "byte 0: the file is empty"));
	json_object_put(h);
	json_object_put(t0);
	json_object_put(t1);
	free(hs);
	free(ts0);
	free(ts1);
}

static void test_rotation(void **state)
{
	struct rec_writer *w;
	struct rec_reader *rd;
	struct rec_header h;
	char path[256], old[300], err[512];
	unsigned n1, n2;
	int r;

	(void)state;
	path_of(path, sizeof(path), "rot.jsonl.gz");
	snprintf(old, sizeof(old), "%s.1", path);
	assert_int_equal(rec_writer_open(path, 4096, &header, &w), 0);
	for (unsigned i = 0; i < 200 && !rec_writer_rotations(w); i++)
		assert_int_equal(rec_writer_line(w, make_tick(i)), 0);
	assert_int_equal(rec_writer_rotations(w), 1);
	assert_int_equal(rec_writer_line(w, make_tick(500)), 0);
	assert_int_equal(rec_writer_close(w), 0);
	assert_true(file_size(old) >= 4096);
	assert_true(file_size(path) < 4096);
	n1 = read_all(old, &r, err, sizeof(err));
	assert_int_equal(r, 0);
	n2 = read_all(path, &r, err, sizeof(err));
	assert_int_equal(r, 0);
	assert_true(n1 > 1);
	assert_int_equal(n2, 1);
	assert_int_equal(rec_open(path, &rd, &h, err, sizeof(err)), 0);
	assert_int_equal(h.part, 2);
	rec_close(rd);
	/* cat FILE.1 FILE: one recording (two gzip members, a header between). */
	{
		char both[300], cmd[1024];

		snprintf(both, sizeof(both), "%s/both.jsonl.gz", dir);
		snprintf(cmd, sizeof(cmd), "cat '%s' '%s' > '%s'", old, path, both);
		assert_int_equal(system(cmd), 0);
		assert_int_equal(read_all(both, &r, err, sizeof(err)), n1 + n2);
		assert_int_equal(r, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip), cmocka_unit_test(test_no_phases),
		cmocka_unit_test(test_truncated),  cmocka_unit_test(test_corrupt_gzip),
		cmocka_unit_test(test_bad_lines),  cmocka_unit_test(test_rotation),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
