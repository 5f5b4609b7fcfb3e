// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the cgroupfs half of the contention signals
 * (sensing/contention.c): cpu.stat (v1 and v2), cpuacct.usage and PSI,
 * read from fake cgroup trees built in a temporary directory, through the
 * public API with no BPF signal loaded (so they run without root).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "sensing/contention.h"

struct fixture {
	char base[256];
	struct contention *c;
	struct contention_snapshot *prev, *now;
	uint64_t id;
};

/* Write text to base/path, creating the directories on the way. */
static void put(const char *base, const char *path, const char *text)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", base, path);
	for (char *s = p + strlen(base) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*s = '/';
	}
	f = fopen(p, "w");
	if (!f)
		fail_msg("create %s: %s", p, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void rm(const char *base, const char *path)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, path);
	assert_int_equal(unlink(p), 0);
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	snprintf(fx->base, sizeof(fx->base), "/tmp/tw-contention-XXXXXX");
	if (!mkdtemp(fx->base)) {
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	contention_snapshot_free(fx->prev);
	contention_snapshot_free(fx->now);
	contention_free(fx->c);
	nftw(fx->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return 0;
}

static void open_tree(struct fixture *fx)
{
	struct contention_opts o = { .signals = 0, .cgroup_base = fx->base };
	const char *why = NULL;

	assert_int_equal(contention_open(&o, &fx->c, &why), 0);
	assert_int_equal(contention_signals(fx->c), 0);
	assert_string_equal(contention_missing(fx->c), "");
	fx->id = 4242;
}

/* Take the next snapshot and sample cgroup rel over the window. */
static void tick(struct fixture *fx, const char *rel, struct contention_sample *s)
{
	contention_snapshot_free(fx->prev);
	fx->prev = fx->now;
	fx->now = NULL;
	assert_int_equal(contention_read(fx->c, &fx->now), 0);
	assert_int_equal(contention_sample(fx->c, fx->now, fx->prev, fx->id, rel, 1.0, s), 0);
	assert_true(s->cgroup_id == fx->id);
}

static void assert_near(double got, double want)
{
	if (isnan(got) || fabs(got - want) > 1e-9 * (fabs(want) + 1))
		fail_msg("got %.12g, want %.12g", got, want);
}

/* The figures that need BPF read as unavailable when no signal runs. */
static void assert_bpf_unavailable(const struct contention_sample *s)
{
	assert_true(isnan(s->runq_delay_s));
	assert_true(isnan(s->io_read_bytes) && isnan(s->io_write_bytes));
	assert_true(isnan(s->vfs_read_bytes) && isnan(s->vfs_write_bytes));
	assert_true(isnan(s->futex_wait_s) && isnan(s->lock_contention_s));
	assert_true(isnan(s->reclaim_s));
	assert_true(isnan(s->tcp_retransmits) && isnan(s->tcp_srtt_us));
	assert_int_equal(s->runq.total, 0);
	assert_int_equal(s->io.total, 0);
}

static void mk_hybrid(const char *b)
{
	put(b, "unified/cgroup.controllers", "");
	put(b, "unified/svc/cgroup.controllers", "");
	/* cgroup2 without the cpu controller: usage only. */
	put(b, "unified/svc/cpu.stat",
	    "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnice_usec 0\n");
	put(b, "cpu/svc/cpu.stat",
	    "nr_periods 10\nnr_throttled 2\nthrottled_time 5000000\nnr_bursts 0\nburst_time 0\n");
	put(b, "cpuacct/svc/cpuacct.usage", "77000000\n");
	put(b, "unified/svc/cpu.pressure",
	    "some avg10=1.50 avg60=0.70 avg300=0.10 total=12345\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=100\n");
}

/* Hybrid host: usage from cgroup2, throttling from the v1 cpu hierarchy. */
static void test_hybrid_cpu(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;

	mk_hybrid(fx->base);
	open_tree(fx);
	tick(fx, "/svc", &s);
	/* First reading: there is no window yet. */
	assert_true(isnan(s.cpu_usage_s));
	assert_true(isnan(s.page_faults)); /* and no memory.stat on this host */
	assert_true(isnan(s.cpu_throttled_s));
	assert_true(isnan(s.cpu_throttled_periods));
	assert_near(s.psi_cpu_some, 1.5);
	assert_true(isnan(s.psi_io_some));
	assert_true(isnan(s.psi_memory_some));
	assert_bpf_unavailable(&s);

	put(fx->base, "unified/svc/cpu.stat",
	    "usage_usec 251000\nuser_usec 600\nsystem_usec 400\nnice_usec 0\n");
	put(fx->base, "cpu/svc/cpu.stat",
	    "nr_periods 20\nnr_throttled 5\nthrottled_time 45000000\nnr_bursts 0\nburst_time 0\n");
	put(fx->base, "cpuacct/svc/cpuacct.usage", "99000000000\n");
	tick(fx, "/svc", &s);
	assert_near(s.cpu_usage_s, 0.25); /* usage_usec, not cpuacct.usage */
	assert_true(isnan(s.page_faults));
	assert_near(s.cpu_throttled_s, 0.04); /* throttled_time is in ns */
	assert_near(s.cpu_throttled_periods, 3);

	/* Sampling the same snapshot again gives the same window. */
	assert_int_equal(contention_sample(fx->c, fx->now, fx->prev, fx->id, "/svc", 1.0, &s), 0);
	assert_near(s.cpu_usage_s, 0.25);
	assert_near(s.cpu_throttled_periods, 3);
}

/* Without usage_usec in cgroup2, usage comes from v1 cpuacct.usage (ns). */
static void test_hybrid_cpuacct(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;

	mk_hybrid(fx->base);
	rm(fx->base, "unified/svc/cpu.stat");
	open_tree(fx);
	tick(fx, "svc", &s); /* no leading slash: same cgroup */
	put(fx->base, "cpuacct/svc/cpuacct.usage", "1577000000\n");
	tick(fx, "svc", &s);
	assert_near(s.cpu_usage_s, 1.5);
	assert_near(s.cpu_throttled_periods, 0);
	assert_near(s.cpu_throttled_s, 0);
}

/* Pure cgroup v2 with the cpu controller: everything from cpu.stat. */
static void test_v2_cpu_and_psi(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;
	const char *stat1 = "usage_usec 5000000\nuser_usec 1\nsystem_usec 1\n"
			    "core_sched.force_idle_usec 0\nnr_periods 100\nnr_throttled 7\n"
			    "throttled_usec 120000\nnr_bursts 0\nburst_usec 0\n";
	const char *stat2 = "usage_usec 5500000\nuser_usec 1\nsystem_usec 1\n"
			    "core_sched.force_idle_usec 0\nnr_periods 110\nnr_throttled 11\n"
			    "throttled_usec 320000\nnr_bursts 0\nburst_usec 0\n";

	put(fx->base, "cgroup.controllers", "cpu io memory pids\n");
	put(fx->base, "a/b/cgroup.controllers", "cpu io memory\n");
	put(fx->base, "a/b/cpu.stat", stat1);
	put(fx->base, "a/b/cpu.pressure",
	    "some avg10=12.34 avg60=1.00 avg300=0.00 total=1\nfull avg10=3.00 avg60=0.00 avg300=0.00 total=0\n");
	/* full first, then some: the some line is the one that counts. */
	put(fx->base, "a/b/io.pressure",
	    "full avg10=9.00 avg60=0.00 avg300=0.00 total=0\nsome avg10=0.50 avg60=0.00 avg300=0.00 total=0\n");
	/* Older kernels: memory.pressure with no avg10 field. */
	put(fx->base, "a/b/memory.pressure", "some total=5\n");
	put(fx->base, "a/b/memory.stat",
	    "anon 4096\nfile 0\npgscan 0\npgfault 1000\npgmajfault 3\n");
	open_tree(fx);
	tick(fx, "/a/b", &s);
	assert_true(isnan(s.page_faults)); /* no window yet */
	put(fx->base, "a/b/cpu.stat", stat2);
	put(fx->base, "a/b/memory.stat",
	    "anon 4096\nfile 0\npgscan 0\npgfault 1250\npgmajfault 3\n");
	tick(fx, "/a/b", &s);
	/* Without the page_fault_user hook, faults come from memory.stat. */
	assert_near(s.page_faults, 250);
	assert_near(s.cpu_usage_s, 0.5);
	assert_near(s.cpu_throttled_s, 0.2); /* throttled_usec is in us */
	assert_near(s.cpu_throttled_periods, 4);
	assert_near(s.psi_cpu_some, 12.34);
	assert_near(s.psi_io_some, 0.5);
	assert_true(isnan(s.psi_memory_some));
	assert_near(s.interval_s, 1.0);
}

/* A counter that went back (cgroup removed and re-created): no window. */
static void test_counter_reset(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;

	put(fx->base, "cgroup.controllers", "");
	put(fx->base, "svc/cgroup.controllers", "");
	put(fx->base, "svc/cpu.stat", "usage_usec 900000\n");
	open_tree(fx);
	tick(fx, "/svc", &s);
	put(fx->base, "svc/cpu.stat", "usage_usec 100\n");
	tick(fx, "/svc", &s);
	assert_true(isnan(s.cpu_usage_s));
	put(fx->base, "svc/cpu.stat", "usage_usec 200100\n");
	tick(fx, "/svc", &s);
	assert_near(s.cpu_usage_s, 0.2);
	/* No throttling figures anywhere (no controller, no v1). */
	assert_true(isnan(s.cpu_throttled_s));
	assert_true(isnan(s.cpu_throttled_periods));
}

/* A cgroup that does not exist, or no path at all: unavailable, no error. */
static void test_absent(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;

	mk_hybrid(fx->base);
	open_tree(fx);
	tick(fx, "/gone", &s);
	tick(fx, "/gone", &s);
	assert_true(isnan(s.cpu_usage_s));
	assert_true(isnan(s.cpu_throttled_s));
	assert_true(isnan(s.psi_cpu_some) && isnan(s.psi_io_some) && isnan(s.psi_memory_some));
	assert_int_equal(contention_sample(fx->c, fx->now, fx->prev, fx->id, NULL, 1.0, &s), 0);
	assert_true(isnan(s.cpu_usage_s) && isnan(s.psi_cpu_some));
	assert_bpf_unavailable(&s);
}

/* No cgroup2 hierarchy at all: v1 figures still read. */
static void test_v1_only(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;

	put(fx->base, "cpu/svc/cpu.stat", "nr_periods 1\nnr_throttled 1\nthrottled_time 1000\n");
	put(fx->base, "cpuacct/svc/cpuacct.usage", "1000\n");
	open_tree(fx);
	tick(fx, "/svc", &s);
	put(fx->base, "cpu/svc/cpu.stat", "nr_periods 2\nnr_throttled 2\nthrottled_time 2001000\n");
	put(fx->base, "cpuacct/svc/cpuacct.usage", "3001000\n");
	tick(fx, "/svc", &s);
	assert_near(s.cpu_usage_s, 0.003);
	assert_near(s.cpu_throttled_s, 0.002);
	assert_near(s.cpu_throttled_periods, 1);
	assert_true(isnan(s.psi_cpu_some));
}

/* A cgroup nobody sampled for a while starts a fresh window. */
static void test_gap_then_window(void **state)
{
	struct fixture *fx = *state;
	struct contention_sample s;
	struct contention_drops d;

	put(fx->base, "cgroup.controllers", "");
	put(fx->base, "svc/cgroup.controllers", "");
	put(fx->base, "svc/cpu.stat", "usage_usec 0\n");
	open_tree(fx);
	tick(fx, "/svc", &s);
	for (int i = 0; i < 40; i++) {
		contention_snapshot_free(fx->prev);
		fx->prev = fx->now;
		assert_int_equal(contention_read(fx->c, &fx->now), 0);
	}
	put(fx->base, "svc/cpu.stat", "usage_usec 1000000\n");
	tick(fx, "/svc", &s);
	assert_true(isnan(s.cpu_usage_s)); /* the old reading was forgotten */
	put(fx->base, "svc/cpu.stat", "usage_usec 1500000\n");
	tick(fx, "/svc", &s);
	assert_near(s.cpu_usage_s, 0.5);
	contention_drops(fx->now, fx->prev, &d);
	assert_int_equal(d.cgroups + d.stamps + d.absurd, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hybrid_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_cpuacct, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_cpu_and_psi, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counter_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_absent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v1_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gap_then_window, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
