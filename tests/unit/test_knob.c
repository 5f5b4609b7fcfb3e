// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the actuators (knobs/knob.c), the state file
 * (knobs/state.c, knobs/state_file.c) and the unit conversions, on fake cgroup trees
 * built in a temporary directory: a cgroup2 root is a directory whose
 * cgroup.controllers lists "cpuset cpu io"; a v1 layout has base/cpu/...
 * and base/blkio/... with the v1 files. For the controllers in
 * cgroup.subtree_control, fake_kernel() plays the kernel's part.
 *
 * `test_knob tool ...` is not a test: it is the small driver that
 * tests/integration/test_knobs uses to act on real cgroups through the
 * same library (see tool_usage()).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <dirent.h>
#include "knobs/knob.h"
#include "knobs/state.h"
#include "knobs/freq.h"

struct tree {
	char base[1024];
	char state[1100];
};

static void put(const char *base, const char *rel, const char *content)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static void mkd(const char *base, const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	if (mkdir(p, 0755) && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
}

/* The file's content without its trailing newline. */
static const char *get(const char *base, const char *rel)
{
	static char buf[256];
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		fail_msg("open %s: %s", p, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void rm_rf(const char *p)
{
	nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct tree *tree_new(void)
{
	struct tree *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");

	if (!t)
		return NULL;
	snprintf(t->base, sizeof(t->base), "%s/tw-knob.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(t->base)) {
		free(t);
		return NULL;
	}
	snprintf(t->state, sizeof(t->state), "%s/run/tailwarden", t->base);
	return t;
}

/* Pure v2: base is the cgroup2 root, /a/b a cgroup with cpu, io and cpuset files. */
static int setup_v2(void **state)
{
	struct tree *t = tree_new();

	if (!t)
		return -1;
	put(t->base, "cgroup.controllers", "cpuset cpu io memory pids\n");
	mkd(t->base, "a");
	mkd(t->base, "a/b");
	put(t->base, "a/b/cpu.max", "max 100000\n");
	put(t->base, "a/b/cpu.weight", "100\n");
	put(t->base, "a/b/io.weight", "default 100\n");
	put(t->base, "a/b/cpuset.cpus.effective", "0\n");
	mkd(t->base, "a/nocpu"); /* cpu and io not enabled by its parent */
	*state = t;
	return 0;
}

/* v1 only: base/cpu and base/blkio hierarchies, /a in both. */
static int setup_v1(void **state)
{
	struct tree *t = tree_new();

	if (!t)
		return -1;
	mkd(t->base, "cpu");
	mkd(t->base, "cpu/a");
	put(t->base, "cpu/a/cpu.cfs_quota_us", "-1\n");
	put(t->base, "cpu/a/cpu.cfs_period_us", "100000\n");
	put(t->base, "cpu/a/cpu.shares", "1024\n");
	mkd(t->base, "cpu/onlycpu");
	put(t->base, "cpu/onlycpu/cpu.cfs_quota_us", "-1\n");
	put(t->base, "cpu/onlycpu/cpu.cfs_period_us", "100000\n");
	put(t->base, "cpu/onlycpu/cpu.shares", "1024\n");
	mkd(t->base, "blkio");
	mkd(t->base, "blkio/a");
	put(t->base, "blkio/a/blkio.bfq.weight", "100\n");
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tree *t = *state;

	rm_rf(t->base);
	free(t);
	return 0;
}

static struct knobs *open_ok(const struct tree *t, const char *rel)
{
	struct knobs *k = NULL;

	assert_int_equal(knobs_open(t->base, rel, &k), 0);
	assert_non_null(k);
	return k;
}

static double rd(struct knobs *k, enum action_knob kind)
{
	double v = NAN;

	assert_int_equal(knob_read(k, kind, &v), 0);
	return v;
}

/* ------------------------------------------------------------------ */
/* conversions */

static void test_shares_conversion(void **state)
{
	(void)state;
	/* systemd: CPUWeight=50 is cpu.shares 512 (measured with a systemd user manager) */
	assert_int_equal(knob_weight_to_shares(100), 1024);
	assert_int_equal(knob_weight_to_shares(50), 512);
	assert_int_equal(knob_weight_to_shares(1), 10);
	assert_int_equal(knob_weight_to_shares(3), 30); /* 30.72, truncated */
	assert_int_equal(knob_weight_to_shares(10000), 102400);
	/* Every integer weight survives the round trip: read(write(w)) == w. */
	for (unsigned long w = 1; w <= 10000; w++)
		if (knob_shares_to_weight(knob_weight_to_shares(w)) != w)
			fail_msg("weight %lu -> shares %lu -> weight %lu", w,
				 knob_weight_to_shares(w),
				 knob_shares_to_weight(knob_weight_to_shares(w)));
	/* Shares someone else wrote: nearest weight at or above, within 1..10000. */
	assert_int_equal(knob_shares_to_weight(2), 1);
	assert_int_equal(knob_shares_to_weight(1025), 101);
	assert_int_equal(knob_shares_to_weight(262144), 10000);
}

static void test_bfq_conversion(void **state)
{
	(void)state;
	/* One to one on the shared range: the default stays the default. */
	assert_int_equal(knob_io_weight_to_bfq(1), 1);
	assert_int_equal(knob_io_weight_to_bfq(10), 10);
	assert_int_equal(knob_io_weight_to_bfq(100), 100);
	assert_int_equal(knob_io_weight_to_bfq(1000), 1000);
	assert_int_equal(knob_io_weight_to_bfq(10000), 1000);
	for (unsigned long w = 1; w <= 1000; w++)
		assert_int_equal(knob_bfq_to_io_weight(knob_io_weight_to_bfq(w)), w);
	assert_int_equal(knob_bfq_to_io_weight(100), 100);
}

static void test_cpulist(void **state)
{
	unsigned *c = NULL;
	size_t n = 0;
	char buf[64];

	(void)state;
	assert_int_equal(knob_cpulist_parse("0-3,8,10-11\n", &c, &n), 0);
	assert_int_equal(n, 7);
	assert_int_equal(c[0], 0);
	assert_int_equal(c[4], 8);
	assert_int_equal(c[6], 11);
	knob_cpulist_format(c, n, buf, sizeof(buf));
	assert_string_equal(buf, "0-3,8,10-11");
	free(c);
	assert_int_equal(knob_cpulist_parse("", &c, &n), 0);
	assert_int_equal(n, 0);
	free(c);
	assert_int_equal(knob_cpulist_parse("3-1", &c, &n), -EINVAL);
	assert_int_equal(knob_cpulist_parse("x", &c, &n), -EINVAL);
}

/* ------------------------------------------------------------------ */
/* cgroup v2 */

static void test_v2_quota(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/a/b");
	const char *why = "unset";

	assert_true(knob_available(k, KNOB_CPU_QUOTA, &why));
	assert_null(why);
	assert_string_equal(knob_path(k, KNOB_CPU_QUOTA), "a/b/cpu.max");
	assert_true(isinf(rd(k, KNOB_CPU_QUOTA)));

	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.5), 0);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "50000 100000");
	assert_true(rd(k, KNOB_CPU_QUOTA) == 0.5);
	/* Precision the file cannot hold: read gives back what was written. */
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.123456789), 0);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "12346 100000");
	assert_true(rd(k, KNOB_CPU_QUOTA) == 0.123456789);
	/* Someone else changed it (the period counts too): we read their value. */
	put(t->base, "a/b/cpu.max", "12346 200000\n");
	assert_true(rd(k, KNOB_CPU_QUOTA) == 12346 / 200000.0);
	put(t->base, "a/b/cpu.max", "20000 100000\n");
	assert_true(rd(k, KNOB_CPU_QUOTA) == 0.2);
	/* The period is kept, whatever it is. */
	put(t->base, "a/b/cpu.max", "max 10000\n");
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 2.0), 0);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "20000 10000");
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, INFINITY), 0);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "max 10000");
	assert_true(isinf(rd(k, KNOB_CPU_QUOTA)));
	/* Below the kernel's 1 ms, nonsense: refused, file untouched. */
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.05), -ERANGE);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0), -ERANGE);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, -1), -ERANGE);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, NAN), -ERANGE);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "max 10000");
	knobs_free(k);
}

static void test_v2_weights(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/a/b/"); /* a trailing slash is fine */

	assert_string_equal(knob_path(k, KNOB_CPU_WEIGHT), "a/b/cpu.weight");
	assert_string_equal(knob_path(k, KNOB_IO_WEIGHT), "a/b/io.weight");
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 100);
	assert_true(rd(k, KNOB_IO_WEIGHT) == 100);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 1), 0);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "1");
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 10000), 0);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "10000");
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 50.4), 0);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "50");
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 50.4);
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 250), 0);
	assert_string_equal(get(t->base, "a/b/io.weight"), "default 250");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 250);
	/* io.weight with per-device lines: the default is ours. */
	put(t->base, "a/b/io.weight", "default 70\n8:0 300\n");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 70);
	/* No cpu.idle (before 5.15): no idle. */
	assert_false(knob_weight_can_idle(k));
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 0), -EOPNOTSUPP);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "50");
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 10001), -ERANGE);
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, INFINITY), -ERANGE);
	knobs_free(k);
}

/*
 * Weight 0 is idle: cpu.idle 1, the weight file left alone; a weight
 * after it puts cpu.idle back to 0 first (the kernel refuses a weight
 * while the group is idle). The record keeps cpu.idle before the weight,
 * so a restore undoes them in that order. v2 and v1 alike.
 */
static void check_idle(struct tree *t, const char *rel, const char *idle, const char *wfile,
		       const char *home, const char *w50)
{
	struct knob_state *s;
	struct knobs *k = open_ok(t, rel);

	assert_true(knob_weight_can_idle(k));
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 100);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_record(s, t->base, rel, KNOB_CPU_WEIGHT, 100), 0);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 0), 0);
	assert_string_equal(get(t->base, idle), "1");
	assert_string_equal(get(t->base, wfile), home);
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 0);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 50), 0);
	assert_string_equal(get(t->base, idle), "0");
	assert_string_equal(get(t->base, wfile), w50);
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 50);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 0), 0);
	/* Read from the files alone (a fresh open): idle is 0. */
	knobs_free(k);
	k = open_ok(t, rel);
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 0);
	assert_int_equal(knob_state_restore_all(s, t->base), 1);
	assert_string_equal(get(t->base, idle), "0");
	assert_string_equal(get(t->base, wfile), home);
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 100);
	knob_state_free(s);
	knobs_free(k);
}

static void test_v2_idle(void **state)
{
	struct tree *t = *state;

	put(t->base, "a/b/cpu.idle", "0\n");
	check_idle(t, "/a/b", "a/b/cpu.idle", "a/b/cpu.weight", "100", "50");
}

static void test_v1_idle(void **state)
{
	struct tree *t = *state;

	put(t->base, "cpu/a/cpu.idle", "0\n");
	check_idle(t, "/a", "cpu/a/cpu.idle", "cpu/a/cpu.shares", "1024", "512");
}

static void test_v2_unavailable(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/a/nocpu");
	const char *why = NULL;
	double v;

	for (int i = KNOB_CPU_QUOTA; i <= KNOB_IO_WEIGHT; i++) {
		assert_false(knob_available(k, i, &why));
		assert_non_null(why);
		assert_non_null(strstr(why, "not enabled"));
		assert_int_equal(knob_read(k, i, &v), -EOPNOTSUPP);
		assert_int_equal(knob_write(k, i, 100), -EOPNOTSUPP);
	}
	assert_false(knob_available(k, KNOB_CPU_WEIGHT, NULL));
	knobs_free(k);
	assert_int_equal(knobs_open(t->base, "/nope", &k), -ENOENT);
	assert_int_equal(knobs_open(t->base, "a/b", &k), -EINVAL);
	assert_int_equal(knobs_open(t->base, "/a/../a/b", &k), -EINVAL);
	assert_int_equal(knobs_open(t->base, "/a/..", &k), -EINVAL);
}

/* A cgroup removed under us: -ENOENT, for the caller's debug line. */
static void test_v2_vanished(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/a/b");
	char p[PATH_MAX];
	double v;

	snprintf(p, sizeof(p), "%s/a/b", t->base);
	rm_rf(p);
	assert_int_equal(knob_read(k, KNOB_CPU_QUOTA, &v), -ENOENT);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 10), -ENOENT);
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 10), -ENOENT);
	knobs_free(k);
}

/* ------------------------------------------------------------------ */
/* cgroup v1 */

static void test_v1(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/a");

	assert_string_equal(knob_path(k, KNOB_CPU_QUOTA), "cpu/a/cpu.cfs_quota_us");
	assert_string_equal(knob_path(k, KNOB_CPU_WEIGHT), "cpu/a/cpu.shares");
	assert_string_equal(knob_path(k, KNOB_IO_WEIGHT), "blkio/a/blkio.bfq.weight");
	assert_true(isinf(rd(k, KNOB_CPU_QUOTA)));
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 100);
	assert_true(rd(k, KNOB_IO_WEIGHT) == 100);

	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.25), 0);
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_quota_us"), "25000");
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_period_us"), "100000");
	assert_true(rd(k, KNOB_CPU_QUOTA) == 0.25);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, INFINITY), 0);
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_quota_us"), "-1");

	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 50), 0);
	assert_string_equal(get(t->base, "cpu/a/cpu.shares"), "512");
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 50);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 1), 0);
	assert_string_equal(get(t->base, "cpu/a/cpu.shares"), "10");

	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 100), 0);
	assert_string_equal(get(t->base, "blkio/a/blkio.bfq.weight"), "100");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 100);
	/* 3000 and 10000 both give bfq 1000: read(write(x)) == x all the same. */
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 3000), 0);
	assert_string_equal(get(t->base, "blkio/a/blkio.bfq.weight"), "1000");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 3000);
	/* Changed behind our back: converted from the file. */
	put(t->base, "blkio/a/blkio.bfq.weight", "50\n");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 50);
	put(t->base, "cpu/a/cpu.shares", "2048\n");
	assert_true(rd(k, KNOB_CPU_WEIGHT) == 200);
	knobs_free(k);
}

static void test_v1_partial(void **state)
{
	struct tree *t = *state;
	struct knobs *k = open_ok(t, "/onlycpu");
	const char *why = NULL;

	assert_true(knob_available(k, KNOB_CPU_QUOTA, NULL));
	assert_true(knob_available(k, KNOB_CPU_WEIGHT, NULL));
	assert_false(knob_available(k, KNOB_IO_WEIGHT, &why));
	assert_string_equal(
		why,
		"cgroup not in the cgroup v1 blkio hierarchy (and no cgroup v2 io controller)");
	knobs_free(k);
}

/* No cpufreq driver on this host (the usual VM): unavailable, with the reason. */
static void test_freq_unavailable(void **state)
{
	struct tree *t = *state;
	struct knobs *k;
	const char *why = NULL;
	struct stat st;
	double v;

	if (stat("/sys/devices/system/cpu/cpu0/cpufreq", &st) == 0)
		skip();
	k = open_ok(t, "/a/b");
	assert_false(knob_available(k, KNOB_CPU_FREQ, &why));
	assert_string_equal(why, "frequency control unavailable: no cpufreq driver "
				 "(/sys/devices/system/cpu/cpu0/cpufreq missing)");
	assert_int_equal(knob_read(k, KNOB_CPU_FREQ, &v), -EOPNOTSUPP);
	assert_int_equal(knob_write(k, KNOB_CPU_FREQ, 1e6), -EOPNOTSUPP);
	/* and the rest works */
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 42), 0);
	knobs_free(k);
}

/* ------------------------------------------------------------------ */
/* state file */

/* Record the original, then write, as the daemon does (knob_state_set()). */
static int state_write(struct knob_state *s, const char *base, const char *rel,
		       enum action_knob kind, struct knobs *k, double original, double value)
{
	struct knob_target t = { .cgroup_base = base, .cgroup = rel, .files = k };

	return knob_state_set(s, &t, kind, original, value);
}

/* Parse a state file's text; its records are freed. */
static int parse_doc(const char *doc)
{
	struct knob_record *v = NULL;
	size_t n = 0;
	int r = knob_state_parse(doc, strlen(doc), "state.json", &v, &n);

	for (size_t i = 0; i < n; i++)
		knob_record_free(&v[i]);
	free(v);
	return r;
}

static struct json_object *state_json(const struct tree *t)
{
	char p[PATH_MAX];
	struct json_object *o;

	snprintf(p, sizeof(p), "%s/state.json", t->state);
	o = json_object_from_file(p);
	assert_non_null(o);
	return o;
}

static bool state_exists(const struct tree *t)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/state.json", t->state);
	return access(p, F_OK) == 0;
}

static size_t state_count(const struct tree *t)
{
	struct json_object *o = state_json(t), *a;
	size_t n;

	assert_true(json_object_object_get_ex(o, "knobs", &a));
	n = json_object_array_length(a);
	json_object_put(o);
	return n;
}

static void test_state_record_restore(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	struct knobs *k = open_ok(t, "/a/b");

	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_false(state_exists(t)); /* nothing recorded, nothing written */
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_QUOTA, INFINITY), 0);
	assert_true(state_exists(t));
	assert_int_equal(state_count(t), 1);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.3), 0);
	/* Recorded once: a second record keeps the true original. */
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_QUOTA, 0.3), 0);
	assert_int_equal(state_count(t), 1);
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_WEIGHT, 100), 0);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 5), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_IO_WEIGHT, 100), 0);
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 5), 0);
	assert_int_equal(state_count(t), 3);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "30000 100000");

	assert_int_equal(knob_state_restore_all(s, t->base), 3);
	assert_string_equal(get(t->base, "a/b/cpu.max"), "max 100000");
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "100");
	assert_string_equal(get(t->base, "a/b/io.weight"), "default 100");
	assert_false(state_exists(t));
	/* Still usable afterwards (SIGHUP restores, then goes on). */
	assert_int_equal(knob_state_restore_all(s, t->base), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_WEIGHT, 100), 0);
	assert_int_equal(
		knob_state_forget(s,
				  &(struct knob_target){ .cgroup_base = t->base, .cgroup = "/a/b" },
				  KNOB_CPU_WEIGHT),
		0);
	assert_false(state_exists(t));
	knob_state_free(s);
	knobs_free(k);
}

/* A crash: the next process finds the originals on disk. */
static void test_state_crash(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	struct knobs *k = open_ok(t, "/a");
	struct json_object *o, *a, *e, *v;

	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a", KNOB_CPU_WEIGHT, 100), 0);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 3), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a", KNOB_CPU_QUOTA, INFINITY), 0);
	assert_int_equal(knob_write(k, KNOB_CPU_QUOTA, 0.1), 0);
	knob_state_free(s); /* dies without restoring */
	knobs_free(k);

	o = state_json(t);
	assert_true(json_object_object_get_ex(o, "knobs", &a));
	e = json_object_array_get_idx(a, 1);
	assert_true(json_object_object_get_ex(e, "original", &v));
	assert_string_equal(json_object_get_string(v), "max");
	json_object_put(o);

	/* A restarted daemon keeps the true originals. */
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a", KNOB_CPU_WEIGHT, 3), 0);
	assert_int_equal(knob_state_restore_all(s, t->base), 2);
	knob_state_free(s);
	assert_string_equal(get(t->base, "cpu/a/cpu.shares"), "1024");
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_quota_us"), "-1");
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_period_us"), "100000");
	assert_false(state_exists(t));
}

static void test_state_vanished(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	struct knobs *k = open_ok(t, "/a/b");
	char p[PATH_MAX];

	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_WEIGHT, 100), 0);
	assert_int_equal(knob_write(k, KNOB_CPU_WEIGHT, 7), 0);
	knobs_free(k);
	snprintf(p, sizeof(p), "%s/a/b", t->base);
	rm_rf(p);
	assert_int_equal(knob_state_restore_all(s, t->base), 1); /* nothing to undo */
	assert_false(state_exists(t));
	/* Recording a knob of a cgroup that is gone fails, and nothing is written. */
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_WEIGHT, 100), -ENOENT);
	assert_false(state_exists(t));
	knob_state_free(s);
}

static void test_state_bad_files(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	char doc[4096];

	mkd(t->base, "run");
	mkd(t->base, "run/tailwarden");
	put(t->state, "state.json", "{ not json");
	assert_int_equal(knob_state_open(t->state, &s), -EBADMSG);
	put(t->state, "state.json", "{\"version\": 1}");
	assert_int_equal(knob_state_open(t->state, &s), -EBADMSG);
	/* A path outside the base, or not a knob file, is never written. */
	snprintf(doc, sizeof(doc),
		 "{\"version\":1,\"knobs\":[{\"cgroup_base\":\"%s\",\"cgroup\":\"/a/b\","
		 "\"knob\":\"cpu.weight\",\"original\":100,\"snapshot\":{\"files\":["
		 "{\"path\":\"%s/a/b/cgroup.procs\",\"value\":\"1\"}]}}]}",
		 t->base, t->base);
	put(t->state, "state.json", doc);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_restore_all(s, t->base), -EBADMSG);
	assert_true(state_exists(t)); /* kept: what failed stays recorded */
	knob_state_free(s);
}

/* Lines a restore reports, joined, for asserting on messages. */
static char said[8192];

static void collect(void *userdata, const char *line)
{
	(void)userdata;
	strncat(said, line, sizeof(said) - strlen(said) - 2);
	strcat(said, "\n");
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * What we wrote last is on disk; after a crash, a knob someone else
 * changed since is left alone, the others restored.
 */
static void test_state_written(void **state)
{
	struct tree *t = *state;
	struct json_object *o, *a, *e, *snap, *files, *f, *v;
	struct knob_state *s;
	struct knobs *k = open_ok(t, "/a");
	double t0, per;
	int left = -1, n = 200;

	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(state_write(s, t->base, "/a", KNOB_CPU_WEIGHT, k, 100, 3), 0);
	assert_int_equal(state_write(s, t->base, "/a", KNOB_CPU_QUOTA, k, INFINITY, 0.1), 0);
	/* The cost of keeping "written" true: two atomic rewrites per write. */
	t0 = now_ms();
	for (int i = 0; i < n; i++)
		assert_int_equal(state_write(s, t->base, "/a", KNOB_CPU_QUOTA, k, INFINITY,
					     i % 2 ? 0.1 : 0.2),
				 0);
	per = (now_ms() - t0) / n;
	print_message("knob_state_set: %.3f ms per write (state file in %s)\n", per, t->state);
	knob_state_free(s); /* dies without restoring */
	knobs_free(k);

	o = state_json(t);
	assert_true(json_object_object_get_ex(o, "knobs", &a));
	e = json_object_array_get_idx(a, 0);
	assert_true(json_object_object_get_ex(e, "written", &v));
	assert_int_equal(json_object_get_int(v), 3);
	assert_true(json_object_object_get_ex(e, "snapshot", &snap));
	assert_true(json_object_object_get_ex(snap, "files", &files));
	f = json_object_array_get_idx(files, 0);
	assert_true(json_object_object_get_ex(f, "written", &v));
	assert_string_equal(json_object_get_string(v), "30");
	json_object_put(o);

	/* The administrator sets the weight while the daemon is down. */
	put(t->base, "cpu/a/cpu.shares", "777\n");
	said[0] = '\0';
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_restore_all_report(s, t->base, collect, NULL, &left), 1);
	assert_int_equal(left, 1);
	assert_non_null(
		strstr(said, "cpu.weight of /a: left alone: changed by someone else since"));
	assert_non_null(strstr(said, "cpu.shares is 777, we wrote 30"));
	assert_string_equal(get(t->base, "cpu/a/cpu.shares"), "777");
	assert_string_equal(get(t->base, "cpu/a/cpu.cfs_quota_us"), "-1");
	assert_false(state_exists(t)); /* the administrator's now: not kept */
	knob_state_free(s);
}

/* A state file of the old format (no "written") restores as before. */
static void test_state_no_written(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	char doc[4096];

	mkd(t->base, "run");
	mkd(t->base, "run/tailwarden");
	put(t->base, "a/b/cpu.weight", "5\n");
	snprintf(doc, sizeof(doc),
		 "{\"version\":1,\"knobs\":[{\"cgroup_base\":\"%s\",\"cgroup\":\"/a/b\","
		 "\"knob\":\"cpu.weight\",\"original\":100,\"snapshot\":{\"files\":["
		 "{\"path\":\"%s/a/b/cpu.weight\",\"value\":\"100\"}]}}]}",
		 t->base, t->base);
	put(t->state, "state.json", doc);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_restore_all(s, t->base), 1);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "100");
	knob_state_free(s);
}

/*
 * Records are typed in memory and JSON only on disk: one of each kind,
 * loaded and saved again (by recording one more), comes back field for
 * field, "written" and "left_alone" included.
 */
static void test_state_round_trip(void **state)
{
	struct tree *t = *state;
	struct json_object *in, *out, *a, *b;
	struct knob_state *s;
	char doc[8192];

	mkd(t->base, "run");
	mkd(t->base, "run/tailwarden");
	put(t->base, "a/b/cpu.weight", "5\n");
	snprintf(
		doc, sizeof(doc),
		"{\"version\":1,\"knobs\":["
		"{\"cgroup_base\":\"%s\",\"cgroup\":\"/a\",\"knob\":\"cpu.max\",\"original\":\"max\",\"written\":0.5,"
		"\"snapshot\":{\"files\":[{\"path\":\"%s/a/cpu.max\",\"value\":\"max 100000\",\"written\":\"50000 100000\"}]}},"
		"{\"cgroup_base\":\"%s\",\"cgroup\":\"/a\",\"knob\":\"cpufreq\",\"original\":2000000,"
		"\"snapshot\":{\"cpus\":[{\"cpu\":0,\"max_khz\":2000000,\"written_khz\":1200000},{\"cpu\":1,\"max_khz\":2000000}]}},"
		"{\"cgroup_base\":\"%s\",\"cgroup\":\"/u\",\"knob\":\"cpu.weight\",\"unit\":\"web.service\",\"original\":100,\"written\":7,"
		"\"snapshot\":{\"unit\":\"web.service\",\"property\":\"CPUWeight\",\"value\":18446744073709551615,\"written\":7,"
		"\"bus\":\"unix:path=/run/dbus/system_bus_socket\"}},"
		"{\"cgroup_base\":\"%s\",\"cgroup\":\"/lc\",\"knob\":\"sched.slice\",\"original\":0,\"written\":300000,"
		"\"snapshot\":{\"threads\":[{\"tid\":42,\"start\":812,\"slice_ns\":0,\"written_ns\":300000},"
		"{\"tid\":43,\"start\":813,\"slice_ns\":2000000,\"written_ns\":300000,\"left_alone\":true}]}},"
		"{\"knob\":\"io.scheduler\",\"device\":\"vda\",\"original\":\"mq-deadline\",\"written\":\"bfq\"},"
		"{\"knob\":\"cgroup.subtree_control\",\"cgroup_base\":\"%s\",\"cgroup\":\"/batch.slice\","
		"\"controller\":\"cpu\",\"original\":\"memory pids\"}]}",
		t->base, t->base, t->base, t->base, t->base, t->base);
	put(t->state, "state.json", doc);
	in = state_json(t);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(knob_state_record(s, t->base, "/a/b", KNOB_CPU_WEIGHT, 100), 0);
	knob_state_free(s);
	out = state_json(t);
	assert_true(json_object_object_get_ex(in, "knobs", &a));
	assert_true(json_object_object_get_ex(out, "knobs", &b));
	assert_int_equal(json_object_array_length(b), json_object_array_length(a) + 1);
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		if (!json_object_equal(json_object_array_get_idx(a, i),
				       json_object_array_get_idx(b, i)))
			fail_msg("knobs[%zu] changed by a load and a save:\n%s\n%s", i,
				 json_object_to_json_string(json_object_array_get_idx(a, i)),
				 json_object_to_json_string(json_object_array_get_idx(b, i)));
	}
	json_object_put(in);
	json_object_put(out);
}

/* One record in the state file, restored; the return and what was said. */
static int restore_one(struct tree *t, const char *base, const char *cgroup, const char *knob,
		       const char *path, const char *value)
{
	struct knob_state *s;
	char doc[8192];
	int r;

	mkd(t->base, "run");
	mkd(t->base, "run/tailwarden");
	snprintf(doc, sizeof(doc),
		 "{\"version\":1,\"knobs\":[{\"cgroup_base\":\"%s\",\"cgroup\":\"%s\","
		 "\"knob\":\"%s\",\"original\":1,\"snapshot\":{\"files\":["
		 "{\"path\":\"%s\",\"value\":\"%s\"}]}}]}",
		 base, cgroup, knob, path, value);
	put(t->state, "state.json", doc);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	said[0] = '\0';
	r = knob_state_restore_all_report(s, t->base, collect, NULL, NULL);
	knob_state_free(s);
	assert_int_equal(state_exists(t), r < 0); /* refused: kept */
	return r;
}

static void test_state_hostile(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX], out[PATH_MAX], link[PATH_MAX];
	int dfd, fd;

	put(t->base, "a/b/cpu.weight", "5\n");
	/* Another cgroup root than the configured one. */
	snprintf(p, sizeof(p), "%s/a/b/cpu.weight", t->base);
	assert_int_equal(restore_one(t, "/etc", "/a/b", "cpu.weight", "/etc/a/b/cpu.weight", "100"),
			 -EXDEV);
	assert_non_null(strstr(
		said,
		"not restored: knobs[0]: recorded for the cgroup root /etc, not CgroupBase="));
	/* Values the knob cannot hold. */
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.weight", p, "0"), -ERANGE);
	assert_non_null(strstr(said, "'0' is not a valid cpu.weight value"));
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.weight", p, "10001"), -ERANGE);
	snprintf(p, sizeof(p), "%s/a/b/cpu.max", t->base);
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.max", p, "max 0"), -ERANGE);
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.max", p, "999 100000"), -ERANGE);
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.max", p, "50000 100000 x"), -ERANGE);
	/* Another cgroup's file, or another knob's. */
	snprintf(p, sizeof(p), "%s/a/nocpu/cpu.weight", t->base);
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.weight", p, "100"), -EBADMSG);
	assert_non_null(strstr(said, "is not a cpu.weight file of /a/b under"));
	snprintf(p, sizeof(p), "%s/a/b/cpu.weight", t->base);
	assert_int_equal(restore_one(t, t->base, "/a/b", "io.weight", p, "100"), -EBADMSG);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "5");
	/* A symbolic link on the way, to a file outside the tree. */
	snprintf(out, sizeof(out), "%s.out", t->base);
	mkdir(out, 0700);
	put(out, "cpu.weight", "untouched\n");
	snprintf(link, sizeof(link), "%s/a/evil", t->base);
	assert_int_equal(symlink(out, link), 0);
	snprintf(p, sizeof(p), "%s/a/evil/cpu.weight", t->base);
	assert_int_equal(restore_one(t, t->base, "/a/evil", "cpu.weight", p, "100"), -ELOOP);
	assert_non_null(strstr(said, "a symbolic link on the way"));
	assert_string_equal(get(out, "cpu.weight"), "untouched");
	/* Both ways of opening refuse links and "..". */
	dfd = open(t->base, O_PATH | O_DIRECTORY);
	assert_true(dfd >= 0);
	for (int walk = 0; walk < 2; walk++) {
		assert_int_equal(knob_open_beneath(dfd, "a/evil/cpu.weight", O_RDONLY, walk),
				 -ELOOP);
		assert_int_equal(knob_open_beneath(dfd, "a/../a/b/cpu.weight", O_RDONLY, walk),
				 -EXDEV);
		fd = knob_open_beneath(dfd, "a/b/cpu.weight", O_RDONLY, walk);
		assert_true(fd >= 0);
		close(fd);
	}
	close(dfd);
	rm_rf(out);
	/* The same file restores once the record is sound. */
	snprintf(p, sizeof(p), "%s/a/b/cpu.weight", t->base);
	assert_int_equal(restore_one(t, t->base, "/a/b", "cpu.weight", p, "100"), 1);
	assert_string_equal(get(t->base, "a/b/cpu.weight"), "100");
}

/* ------------------------------------------------------------------ */
/* v2 under BFQ: io.bfq.weight, the scheduler's own file */

static void test_v2_bfq(void **state)
{
	struct tree *t = *state;
	struct knob_state *s;
	char p[PATH_MAX];
	struct knobs *k;

	/* bfq loaded: every cgroup with the io controller has io.bfq.weight. */
	put(t->base, "a/b/io.bfq.weight", "default 100\n");
	k = open_ok(t, "/a/b");
	assert_string_equal(knob_path(k, KNOB_IO_WEIGHT), "a/b/io.bfq.weight");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 100);
	assert_int_equal(knob_state_open(t->state, &s), 0);
	assert_int_equal(state_write(s, t->base, "/a/b", KNOB_IO_WEIGHT, k, 100, 10), 0);
	assert_string_equal(get(t->base, "a/b/io.bfq.weight"), "default 10");
	assert_string_equal(get(t->base, "a/b/io.weight"),
			    "default 100"); /* io.cost's: untouched */
	assert_true(rd(k, KNOB_IO_WEIGHT) == 10);
	/* 1..1000 only: saturates, and reads back as written. */
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 5000), 0);
	assert_string_equal(get(t->base, "a/b/io.bfq.weight"), "default 1000");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 5000);
	put(t->base, "a/b/io.bfq.weight", "default 50\n8:0 300\n");
	assert_true(rd(k, KNOB_IO_WEIGHT) == 50);
	assert_int_equal(knob_write(k, KNOB_IO_WEIGHT, 10), 0);
	/* The state file names io.bfq.weight, and a restore may write it. */
	assert_int_equal(knob_state_restore_all(s, t->base), 1);
	assert_string_equal(get(t->base, "a/b/io.bfq.weight"), "default 100");
	knob_state_free(s);
	knobs_free(k);
	/* Without bfq loaded, io.cost's io.weight as before. */
	snprintf(p, sizeof(p), "%s/a/b/io.bfq.weight", t->base);
	assert_int_equal(unlink(p), 0);
	k = open_ok(t, "/a/b");
	assert_string_equal(knob_path(k, KNOB_IO_WEIGHT), "a/b/io.weight");
	knobs_free(k);
}

/* ------------------------------------------------------------------ */
/* controllers in cgroup.subtree_control */

/* What fake_kernel() was asked, in order ("+cpu /x\n"). */
static char writes[4096];
static int fail_at = -1; /* the write that fails with -EBUSY (0: the first) */

static const char *const order[] = { "cpuset", "cpu", "io", "memory", "pids" };

static bool has(const char *list, const char *w)
{
	char buf[256], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (!strcmp(tok, w))
			return true;
	return false;
}

/* list with w added (on) or removed, in the kernel's order */
static void set_word(char *list, size_t len, const char *w, bool on)
{
	char out[256] = "";

	for (size_t i = 0; i < sizeof(order) / sizeof(*order); i++)
		if ((has(list, order[i]) && strcmp(order[i], w)) || (on && !strcmp(order[i], w)))
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s",
				 *out ? " " : "", order[i]);
	snprintf(list, len, "%s", out);
}

static bool file_exists(const char *dir, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/*
 * The kernel's part: "+ctrl" in X/cgroup.subtree_control gives each child
 * of X the controller (its cgroup.controllers, its files) and fails with
 * EBUSY while X has processes; "-ctrl" takes them away and fails with
 * EBUSY while a child has ctrl in its own subtree_control.
 */
static int fake_kernel(void *userdata, const char *base, const char *cg, const char *change)
{
	struct tree *t = userdata;
	char dir[PATH_MAX], list[PATH_MAX + 300], child[PATH_MAX + 256];
	const char *ctrl = change + 1;
	bool on = change[0] == '+';
	struct dirent *de;
	DIR *d;

	assert_string_equal(base, t->base);
	assert_string_not_equal(cg, "/"); /* never the root's */
	snprintf(writes + strlen(writes), sizeof(writes) - strlen(writes), "%s %s\n", change, cg);
	if (fail_at-- == 0)
		return -EBUSY;
	snprintf(dir, sizeof(dir), "%s%s", base, cg);
	if (on && *get(dir, "cgroup.procs"))
		return -EBUSY;
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.' && !on) {
			snprintf(child, sizeof(child), "%s/%s", dir, de->d_name);
			if (has(get(child, "cgroup.subtree_control"), ctrl)) {
				closedir(d);
				return -EBUSY;
			}
		}
	rewinddir(d);
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", dir, de->d_name);
		snprintf(list, sizeof(list), "%s", get(child, "cgroup.controllers"));
		set_word(list, sizeof(list), ctrl, on);
		put(child, "cgroup.controllers", list);
		if (!strcmp(ctrl, "cpu") && on) {
			put(child, "cpu.max", "max 100000\n");
			put(child, "cpu.weight", "100\n");
		} else if (!strcmp(ctrl, "cpu")) {
			snprintf(list, sizeof(list), "%s/cpu.max", child);
			unlink(list);
			snprintf(list, sizeof(list), "%s/cpu.weight", child);
			unlink(list);
		} else if (on) {
			put(child, "io.weight", "default 100\n");
		} else {
			snprintf(list, sizeof(list), "%s/io.weight", child);
			unlink(list);
		}
	}
	closedir(d);
	snprintf(list, sizeof(list), "%s", get(dir, "cgroup.subtree_control"));
	set_word(list, sizeof(list), ctrl, on);
	put(dir, "cgroup.subtree_control", list);
	return 0;
}

static void cgroup_dir(const struct tree *t, const char *rel, const char *controllers,
		       const char *subtree, const char *procs)
{
	char p[PATH_MAX];

	mkd(t->base, rel);
	snprintf(p, sizeof(p), "%s/%s", t->base, rel);
	put(p, "cgroup.controllers", controllers);
	put(p, "cgroup.subtree_control", subtree);
	put(p, "cgroup.procs", procs);
}

/*
 * A cgroup2 root as systemd 252 leaves it: cpu enabled at the root, not in
 * system.slice (no unit there has a CPU property); batch.slice, made by
 * hand, with a slice and a scope below it.
 */
static int setup_sd(void **state)
{
	struct tree *t = tree_new();

	if (!t)
		return -1;
	put(t->base, "cgroup.controllers", "cpuset cpu io memory pids\n");
	put(t->base, "cgroup.subtree_control", "cpu io memory pids\n");
	put(t->base, "cgroup.procs", "1\n");
	cgroup_dir(t, "system.slice", "cpu io memory pids\n", "memory pids\n", "");
	cgroup_dir(t, "system.slice/nginx.service", "memory pids\n", "", "812\n");
	cgroup_dir(t, "system.slice/batch.service", "memory pids\n", "", "900\n");
	cgroup_dir(t, "batch.slice", "cpu io memory pids\n", "memory pids\n", "");
	put(t->base, "batch.slice/cpu.max", "max 100000\n");
	put(t->base, "batch.slice/cpu.weight", "100\n");
	cgroup_dir(t, "batch.slice/jobs.slice", "memory pids\n", "", "");
	cgroup_dir(t, "batch.slice/jobs.slice/job.scope", "", "", "4242\n");
	cgroup_dir(t, "batch.slice/jobs.slice/other.scope", "", "", "4343\n");
	writes[0] = '\0';
	fail_at = -1;
	*state = t;
	return 0;
}

static struct knob_state *state_faked(struct tree *t)
{
	struct knob_state *s;

	assert_int_equal(knob_state_open(t->state, &s), 0);
	knob_state_subtree_writer(s, fake_kernel, t);
	return s;
}

/* Enabled already (batch.slice's parent is the root, which has cpu): nothing to do. */
static void test_subtree_enabled_already(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	struct knobs *k = open_ok(t, "/batch.slice");
	char from[PATH_MAX] = "x", why[512];

	assert_true(knob_available(k, KNOB_CPU_WEIGHT, NULL));
	assert_null(knob_missing_controller(k, KNOB_CPU_WEIGHT));
	assert_int_equal(knob_subtree_plan(t->base, "/batch.slice", "cpu", from, sizeof(from), why,
					   sizeof(why)),
			 0);
	assert_string_equal(from, "");
	assert_int_equal(knob_state_enable_controller(s, t->base, "/batch.slice", "cpu", collect,
						      NULL, why, sizeof(why)),
			 0);
	assert_string_equal(writes, "");
	assert_false(state_exists(t));
	knob_state_free(s);
	knobs_free(k);
}

/*
 * Not enabled: enabled by us from the nearest ancestor that lacks it down
 * to the parent, recorded first, and put back on exit after the knob.
 */
static void test_subtree_enable_restore(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	struct knobs *k = open_ok(t, "/batch.slice/jobs.slice/job.scope");
	const char *why = NULL;
	char msg[512];
	int left = -1;

	assert_false(knob_available(k, KNOB_CPU_WEIGHT, &why));
	assert_non_null(strstr(why, "cpu controller not enabled"));
	assert_string_equal(knob_missing_controller(k, KNOB_CPU_WEIGHT), "cpu");
	assert_string_equal(knob_missing_controller(k, KNOB_CPU_QUOTA), "cpu");
	assert_string_equal(knob_missing_controller(k, KNOB_IO_WEIGHT), "io");
	knobs_free(k);

	said[0] = '\0';
	assert_int_equal(knob_state_enable_controller(s, t->base,
						      "/batch.slice/jobs.slice/job.scope", "cpu",
						      collect, NULL, msg, sizeof(msg)),
			 0);
	/* Only batch.slice (below the root, which has it) and jobs.slice, top-down. */
	assert_string_equal(writes, "+cpu /batch.slice\n+cpu /batch.slice/jobs.slice\n");
	assert_string_equal(get(t->base, "cgroup.subtree_control"), "cpu io memory pids");
	assert_string_equal(get(t->base, "batch.slice/cgroup.subtree_control"), "cpu memory pids");
	assert_non_null(strstr(
		said,
		"/batch.slice/cgroup.subtree_control: \"memory pids\" -> \"cpu memory pids\"\n"));
	assert_non_null(
		strstr(said, "/batch.slice/jobs.slice/cgroup.subtree_control: \"\" -> \"cpu\"\n"));
	assert_int_equal(state_count(t), 2);

	k = open_ok(t, "/batch.slice/jobs.slice/job.scope");
	assert_true(knob_available(k, KNOB_CPU_WEIGHT, NULL));
	assert_true(knob_available(k, KNOB_CPU_QUOTA, NULL));
	assert_int_equal(state_write(s, t->base, "/batch.slice/jobs.slice/job.scope",
				     KNOB_CPU_WEIGHT, k, 100, 10),
			 0);
	assert_string_equal(get(t->base, "batch.slice/jobs.slice/job.scope/cpu.weight"), "10");
	knobs_free(k);
	/* Enabling again is a no-op. */
	assert_int_equal(knob_state_enable_controller(s, t->base,
						      "/batch.slice/jobs.slice/job.scope", "cpu",
						      NULL, NULL, msg, sizeof(msg)),
			 0);
	assert_int_equal(state_count(t), 3);

	/* Exit: the knob first, then the controllers, deepest first. */
	writes[0] = '\0';
	said[0] = '\0';
	assert_int_equal(knob_state_restore_all_report(s, t->base, collect, NULL, &left), 3);
	assert_int_equal(left, 0);
	assert_string_equal(writes, "-cpu /batch.slice/jobs.slice\n-cpu /batch.slice\n");
	assert_true(strstr(said, "job.scope/cpu.weight: 10 -> 100") <
		    strstr(said, "jobs.slice/cgroup.subtree_control"));
	assert_string_equal(get(t->base, "batch.slice/cgroup.subtree_control"), "memory pids");
	assert_string_equal(get(t->base, "batch.slice/jobs.slice/cgroup.subtree_control"), "");
	assert_string_equal(get(t->base, "cgroup.subtree_control"), "cpu io memory pids");
	assert_false(file_exists(t->base, "batch.slice/jobs.slice/job.scope/cpu.weight"));
	assert_false(state_exists(t));
	knob_state_free(s);
}

/* A cgroup on the way with processes of its own: said plainly, nothing changed. */
static void test_subtree_busy(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	char why[512];

	put(t->base, "batch.slice/jobs.slice/cgroup.procs", "4000\n4001\n");
	assert_int_equal(knob_state_enable_controller(s, t->base,
						      "/batch.slice/jobs.slice/job.scope", "cpu",
						      collect, NULL, why, sizeof(why)),
			 -EBUSY);
	print_message("busy: %s\n", why);
	assert_non_null(strstr(why, "/batch.slice/jobs.slice has processes of its own (pid 4000"));
	assert_non_null(strstr(why, "no internal processes"));
	assert_string_equal(writes, "");
	assert_false(state_exists(t));
	assert_string_equal(get(t->base, "batch.slice/cgroup.subtree_control"), "memory pids");
	knob_state_free(s);
}

/* The root lacks it: the system manager's to enable; nothing written. */
static void test_subtree_root(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	char why[512], from[PATH_MAX];

	put(t->base, "cgroup.subtree_control", "memory pids\n");
	assert_int_equal(knob_state_enable_controller(s, t->base, "/system.slice/batch.service",
						      "cpu", collect, NULL, why, sizeof(why)),
			 -EPERM);
	print_message("root: %s\n", why);
	assert_non_null(strstr(why, "not enabled at the cgroup2 root"));
	assert_non_null(strstr(why, "never tailwarden's"));
	assert_string_equal(writes, "");
	assert_false(state_exists(t));
	assert_string_equal(get(t->base, "cgroup.subtree_control"), "memory pids");
	/* Not a controller of this root at all. */
	assert_int_equal(knob_subtree_plan(t->base, "/system.slice", "rdma", from, sizeof(from),
					   why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_non_null(strstr(why, "has no rdma controller"));
	/* The real writer refuses the root's file whatever it is asked. */
	assert_int_equal(knob_subtree_write(NULL, t->base, "/", "+cpu"), -EPERM);
	assert_string_equal(get(t->base, "cgroup.subtree_control"), "memory pids");
	knob_state_free(s);
}

/* Under systemd: system.slice's own service, parent without processes. */
static void test_subtree_systemd_unit(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	char why[512];
	int left = -1;

	assert_int_equal(knob_state_enable_controller(s, t->base, "/system.slice/batch.service",
						      "cpu", NULL, NULL, why, sizeof(why)),
			 0);
	assert_string_equal(writes, "+cpu /system.slice\n");
	assert_string_equal(get(t->base, "system.slice/batch.service/cpu.weight"), "100");
	/* Meanwhile systemd gives nginx.service CPUWeight=50: it needs cpu there now. */
	put(t->base, "system.slice/nginx.service/cpu.weight", "50\n");
	writes[0] = '\0';
	said[0] = '\0';
	assert_int_equal(knob_state_restore_all_report(s, t->base, collect, NULL, &left), 0);
	assert_int_equal(left, 1);
	assert_string_equal(writes, "");
	assert_non_null(strstr(said, "cgroup.subtree_control of /system.slice: cpu left enabled: "
				     "/system.slice/nginx.service uses it (cpu.weight is \"50\")"));
	assert_string_equal(get(t->base, "system.slice/cgroup.subtree_control"), "cpu memory pids");
	assert_false(state_exists(t));
	knob_state_free(s);
}

/* A write that fails half-way: what was enabled is disabled again, records dropped. */
static void test_subtree_half(void **state)
{
	struct tree *t = *state;
	struct knob_state *s = state_faked(t);
	char why[512];

	fail_at = 1; /* jobs.slice: processes moved in between the check and the write */
	assert_int_equal(knob_state_enable_controller(s, t->base,
						      "/batch.slice/jobs.slice/job.scope", "cpu",
						      NULL, NULL, why, sizeof(why)),
			 -EBUSY);
	print_message("half: %s\n", why);
	assert_non_null(strstr(why, "the cgroups above it were put back"));
	assert_string_equal(writes, "+cpu /batch.slice\n+cpu /batch.slice/jobs.slice\n"
				    "-cpu /batch.slice/jobs.slice\n-cpu /batch.slice\n");
	assert_string_equal(get(t->base, "batch.slice/cgroup.subtree_control"), "memory pids");
	assert_false(file_exists(t->base, "batch.slice/jobs.slice/cpu.weight"));
	assert_false(state_exists(t));
	knob_state_free(s);
}

/* A state file naming the root's subtree_control, or another controller, is refused. */
static void test_subtree_hostile(void **state)
{
	struct tree *t = *state;
	char doc[2048];

	snprintf(
		doc, sizeof(doc),
		"{\"version\":1,\"knobs\":[{\"knob\":\"cgroup.subtree_control\","
		"\"cgroup_base\":\"%s\",\"cgroup\":\"/\",\"controller\":\"cpu\",\"original\":\"\"}]}",
		t->base);
	assert_int_equal(parse_doc(doc), -EBADMSG);
	snprintf(
		doc, sizeof(doc),
		"{\"version\":1,\"knobs\":[{\"knob\":\"cgroup.subtree_control\","
		"\"cgroup_base\":\"%s\",\"cgroup\":\"/a/../\",\"controller\":\"cpu\",\"original\":\"\"}]}",
		t->base);
	assert_int_equal(parse_doc(doc), -EBADMSG);
	snprintf(
		doc, sizeof(doc),
		"{\"version\":1,\"knobs\":[{\"knob\":\"cgroup.subtree_control\","
		"\"cgroup_base\":\"%s\",\"cgroup\":\"/batch.slice\",\"controller\":\"memory\",\"original\":\"\"}]}",
		t->base);
	assert_int_equal(parse_doc(doc), -EBADMSG);
	snprintf(
		doc, sizeof(doc),
		"{\"version\":1,\"knobs\":[{\"knob\":\"cgroup.subtree_control\","
		"\"cgroup_base\":\"%s\",\"cgroup\":\"/batch.slice\",\"controller\":\"cpu\",\"original\":\"\"}]}",
		t->base);
	assert_int_equal(parse_doc(doc), 0);
	assert_int_equal(knob_subtree_restore(t->base, "/", "cpu", fake_kernel, t, NULL, NULL, doc,
					      sizeof(doc)),
			 -EPERM);
	assert_string_equal(writes, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shares_conversion),
		cmocka_unit_test(test_bfq_conversion),
		cmocka_unit_test(test_cpulist),
		cmocka_unit_test_setup_teardown(test_v2_quota, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v2_weights, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v2_idle, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v1_idle, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_v2_unavailable, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v2_vanished, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v1, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_v1_partial, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_freq_unavailable, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_record_restore, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_crash, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_state_vanished, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_bad_files, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_written, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_state_no_written, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_round_trip, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_state_hostile, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_v2_bfq, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_enabled_already, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_enable_restore, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_busy, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_root, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_systemd_unit, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_half, setup_sd, teardown),
		cmocka_unit_test_setup_teardown(test_subtree_hostile, setup_sd, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
