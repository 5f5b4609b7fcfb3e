// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the diagnosis (sensing/diagnosis.c) on synthetic window
 * sequences: a steady baseline, then one change at a time, asserting what
 * the policy acts on (dominant resource, cause, first evidence).
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
#include "sensing/diagnosis.h"

#define IV 1.0 /* window length, s */

/*
 * One window as a test describes it: rates and per-request figures, which
 * fill() turns into the cumulative-per-window samples the sensors emit.
 * NAN (or a zero event count for a histogram) means the signal is missing.
 */
struct win {
	double rps;
	double lat_p50_us, lat_p99_us;
	double wakeups_per_req, runq_p50_us, runq_p99_us;
	double runq_us_per_req; /* total run-queue wait per request */
	double cpu_us_per_req;
	double throttled_s;
	double ios, io_p50_us, io_p99_us, io_bytes_per_io;
	double futex_us_per_req, lock_us_per_req;
	double faults_per_req, reclaim_us_per_req;
	double retrans_per_req, srtt_us;
	double psi_cpu, psi_io, psi_mem;
	/*
	 * The requests' phases (p50 fixed at a third of p99): only with
	 * phases, as the arrival mode gives them; without, unseen (other
	 * modes, and the tests written before the phases).
	 */
	bool phases;
	double queued_p99_us, service_p99_us, sending_p99_us;
};

/* A small web service at 1000 req/s: p99 400 us, a little of everything. */
static const struct win base = {
	.rps = 1000,
	.lat_p50_us = 100,
	.lat_p99_us = 400,
	.wakeups_per_req = 2,
	.runq_p50_us = 5,
	.runq_p99_us = 30,
	.runq_us_per_req = 10,
	.cpu_us_per_req = 50,
	.throttled_s = 0,
	.ios = 100,
	.io_p50_us = 100,
	.io_p99_us = 200,
	.io_bytes_per_io = 4096,
	.futex_us_per_req = 20,
	.lock_us_per_req = 1,
	.faults_per_req = 0.5,
	.reclaim_us_per_req = 0,
	.retrans_per_req = 0,
	.srtt_us = 100,
	.psi_cpu = 1,
	.psi_io = 1,
	.psi_mem = 0.5,
};

/* n values: 98% at p50, the rest (at least one) at p99, so the p99 lands there. */
static void add_tail(struct hist *h, double n, double p50_us, double p99_us)
{
	uint64_t total, tail;

	if (!(n >= 1) || isnan(p50_us) || isnan(p99_us))
		return;
	total = (uint64_t)llround(n);
	tail = total / 50 ? total / 50 : 1;
	hist_add(h, (uint64_t)(p99_us * 1e3), tail);
	if (total > tail)
		hist_add(h, (uint64_t)(p50_us * 1e3), total - tail);
}

static void fill(const struct win *w, struct qos_sample *q, struct contention_sample *c)
{
	double n = round(w->rps * IV);

	memset(q, 0, sizeof(*q));
	memset(c, 0, sizeof(*c));
	q->interval_s = IV;
	q->requests = (uint64_t)n;
	add_tail(&q->latency, n, w->lat_p50_us, w->lat_p99_us);
	if (w->phases) {
		const double p99[TW_PHASES] = { w->queued_p99_us, w->service_p99_us,
						w->sending_p99_us };

		for (unsigned i = 0; i < TW_PHASES; i++) {
			q->phase_on[i] = true;
			add_tail(&q->phase[i], n, p99[i] / 3, p99[i]);
		}
	}

	c->interval_s = IV;
	add_tail(&c->runq, n * w->wakeups_per_req, w->runq_p50_us, w->runq_p99_us);
	c->runq_delay_s = n * w->runq_us_per_req * 1e-6;
	c->cpu_usage_s = n * w->cpu_us_per_req * 1e-6;
	c->cpu_throttled_s = w->throttled_s;
	c->cpu_throttled_periods = isnan(w->throttled_s) ? NAN : 0;
	add_tail(&c->io, w->ios, w->io_p50_us, w->io_p99_us);
	c->io_read_bytes = w->ios * w->io_bytes_per_io;
	c->io_write_bytes = 0;
	c->vfs_read_bytes = c->vfs_write_bytes = 0;
	c->futex_wait_s = n * w->futex_us_per_req * 1e-6;
	c->lock_contention_s = n * w->lock_us_per_req * 1e-6;
	c->page_faults = round(n * w->faults_per_req);
	c->reclaim_s = n * w->reclaim_us_per_req * 1e-6;
	c->tcp_retransmits = round(n * w->retrans_per_req);
	c->tcp_srtt_us = w->srtt_us;
	c->psi_cpu_some = w->psi_cpu;
	c->psi_io_some = w->psi_io;
	c->psi_memory_some = w->psi_mem;
}

static void step(struct diag_state *s, const struct win *w, struct diagnosis *d)
{
	struct qos_sample q;
	struct contention_sample c;

	fill(w, &q, &c);
	diag_update(s, &q, &c, d);
}

static void expect(const struct diagnosis *d, enum diag_dominant dom, enum diag_cause cause,
		   const char *first)
{
	assert_string_equal(diag_dominant_name(d->dominant), diag_dominant_name(dom));
	assert_string_equal(diag_cause_name(d->cause), diag_cause_name(cause));
	if (!first) {
		assert_int_equal(d->n_evidence, 0);
		return;
	}
	assert_true(d->n_evidence >= 1);
	assert_string_equal(d->evidence[0].signal, first);
}

static bool has_evidence(const struct diagnosis *d, const char *signal)
{
	for (size_t i = 0; i < d->n_evidence; i++)
		if (!strcmp(d->evidence[i].signal, signal))
			return true;
	return false;
}

/* Deterministic jitter in [1 - a, 1 + a]. */
static uint64_t rng_state = 42;

static double jitter(double a)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return 1 - a + 2 * a * ((z >> 11) * (1.0 / 9007199254740992.0));
}

/* A state that has seen n steady windows, each a none/unknown verdict. */
static struct diag_state *steady(const struct win *w, int n)
{
	struct diag_state *s = diag_state_new();
	struct diagnosis d;

	assert_non_null(s);
	for (int i = 0; i < n; i++) {
		step(s, w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	return s;
}

/* A steady service with realistic noise is never diagnosed. */
static void test_steady_noise(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct diagnosis d;

	(void)state;
	for (int i = 0; i < 300; i++) {
		struct win w = base;

		w.rps *= jitter(0.08);
		w.lat_p50_us *= jitter(0.1);
		w.lat_p99_us *= jitter(0.25);
		w.runq_p99_us *= jitter(0.5);
		w.runq_us_per_req *= jitter(0.3);
		w.io_p99_us *= jitter(0.5);
		w.futex_us_per_req *= jitter(0.3);
		w.psi_cpu *= jitter(1);
		w.srtt_us *= jitter(0.3);
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	diag_state_free(s);
}

/* (a) A CPU hog beside the service: run-queue p99 x10, latency x5, same req/s. */
static void test_cpu_interference(void **state)
{
	struct diag_state *s = steady(&base, 20);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p50_us *= 2;
	w.lat_p99_us *= 5;
	w.runq_p99_us *= 10;
	w.runq_us_per_req *= 6;
	w.psi_cpu = 20;
	w.rps *= 0.95; /* a closed-loop client slows down a little */
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	assert_true(d.evidence[0].ratio > 8 && d.evidence[0].ratio < 12);
	assert_true(d.evidence[0].baseline > 25 && d.evidence[0].baseline < 35);
	assert_true(has_evidence(&d, "runq_delay_s/req"));
	/* A persisting hog keeps the verdict while the policy works on it. */
	for (int i = 0; i < 30; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	}
	/* The hog leaves: back to nothing within a couple of windows. */
	step(s, &base, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);
}

/* CPU throttling by the cgroup's own quota at steady load is a CPU verdict. */
static void test_cpu_throttled(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	w.throttled_s = 0.3;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "cpu_throttled_s/s");
	diag_state_free(s);
}

/* (b) fio beside a service that reads from disk: block latency x10. */
static void test_io_interference(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	w.io_p50_us *= 5;
	w.io_p99_us *= 10;
	w.psi_io = 20;
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_INTERFERENCE, "io_latency_us.p99");
	assert_true(has_evidence(&d, "psi.io_some"));
	diag_state_free(s);
}

/*
 * The service starts doing four times the disk I/O per request itself:
 * its I/O latency rises, but that is its own doing, not a neighbour's.
 */
static void test_io_self_inflicted(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	w.io_p99_us *= 5;
	w.ios *= 40;
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_UNKNOWN, "io_latency_us.p99");
	diag_state_free(s);
}

/* Latency flat: only a clearly elevated signal is named, and without a cause. */
static void test_elevated_without_latency(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.io_p99_us *= 4; /* past the 3x threshold, but not clearly */
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	w.io_p99_us = base.io_p99_us * 10;
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_UNKNOWN, "io_latency_us.p99");
	diag_state_free(s);
}

/* (c) Lock contention inside the service's own cgroup: never interference. */
static void test_lock_own(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 3;
	w.futex_us_per_req *= 20;
	step(s, &w, &d);
	expect(&d, DIAG_LOCK, DIAG_CAUSE_UNKNOWN, "futex_wait_s/req");
	for (int i = 0; i < 20; i++) {
		step(s, &w, &d);
		assert_int_equal(d.dominant, DIAG_LOCK);
		assert_int_not_equal(d.cause, DIAG_CAUSE_INTERFERENCE);
	}
	diag_state_free(s);

	/* Kernel lock contention, with more requests: lock, load. */
	s = steady(&base, 10);
	w = base;
	w.rps *= 2;
	w.lat_p99_us *= 3;
	w.lock_us_per_req = 100;
	step(s, &w, &d);
	expect(&d, DIAG_LOCK, DIAG_CAUSE_LOAD, "lock_contention_s/req");
	diag_state_free(s);
}

/*
 * Lock-heavy threads inside the service's own cgroup (stress-ng --futex)
 * also queue the service's threads on the CPU, possibly more than they
 * wait on the futex. The cgroup's own CPU time per request rises with it:
 * the CPU it waits for is its own, so no interference is blamed.
 */
static void test_lock_own_threads_on_cpu(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	w.runq_p99_us *= 10;
	w.runq_us_per_req *= 8;
	w.futex_us_per_req *= 5;
	w.cpu_us_per_req *= 6;
	for (int i = 0; i < 10; i++) {
		step(s, &w, &d);
		assert_int_not_equal(d.cause, DIAG_CAUSE_INTERFERENCE);
		assert_int_not_equal(d.dominant, DIAG_NONE);
		assert_true(has_evidence(&d, "futex_wait_s/req"));
	}
	diag_state_free(s);
}

/*
 * (d) Offered load x2.5, no antagonist: totals grow with the requests
 * (per request they stay flat), the service's own run-queue p99 rises a
 * little, latency doubles: load, with nothing to blame.
 */
static void test_load(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.rps *= 2.5;
	w.lat_p50_us *= 1.3;
	w.lat_p99_us *= 2;
	w.runq_p99_us *= 1.6;
	w.runq_us_per_req *= 1.3;
	w.futex_us_per_req *= 0.8; /* idle workers wait less */
	w.psi_cpu = 3;
	for (int i = 0; i < 10; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_LOAD, NULL);
		assert_true(d.load_up);
	}
	/* The load back to what it was: no longer up, at once. */
	step(s, &base, &d);
	assert_false(d.load_up);
	diag_state_free(s);

	/*
	 * Near saturation the service queues behind itself on the CPU: the
	 * run-queue p99 rises past its threshold, but no more than the load
	 * explains. The CPU is the resource; the cause is still the load.
	 */
	s = steady(&base, 10);
	w.runq_p99_us = base.runq_p99_us * 3.5;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_LOAD, "runq_delay_us.p99");
	diag_state_free(s);

	/*
	 * Closer to saturation, queueing behind itself grows much faster than
	 * the load (like rho / (1 - rho)): measured here, 3.3x the requests
	 * gave 23x the run-queue time per request. Each request still costs
	 * the CPU it did, so the cause is still the load. (A hog that starts
	 * in the same window as a load increase is not told apart from this:
	 * a known limit, see docs/design.md, "The diagnosis".)
	 */
	s = steady(&base, 10);
	w.runq_p99_us = base.runq_p99_us * 20;
	w.runq_us_per_req = base.runq_us_per_req * 23;
	w.lat_p99_us = base.lat_p99_us * 6;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_LOAD, "runq_delay_s/req");
	diag_state_free(s);

	/* The same contention with each request costing much less CPU: not load. */
	s = steady(&base, 10);
	w.cpu_us_per_req = base.cpu_us_per_req * 0.4;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_s/req");
	assert_true(d.load_up); /* its load is up all the same */
	diag_state_free(s);
}

/* Latency up, nothing contended, nothing busier: no resource, no cause. */
static void test_latency_unexplained(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);
}

static int flips(const enum diag_dominant *v, int n)
{
	int f = 0;

	for (int i = 1; i < n; i++)
		f += v[i] != v[i - 1];
	return f;
}

/*
 * (e) A run-queue p99 swinging between 2.6x and 3.4x (either side of the
 * 3x threshold) and a latency between 1.4x and 1.7x (either side of 1.5x):
 * one episode, not a verdict that flips every window.
 */
static void test_oscillation(void **state)
{
	struct diag_state *s = steady(&base, 20);
	enum diag_dominant v[40];
	struct diagnosis d;

	(void)state;
	for (int i = 0; i < 40; i++) {
		struct win w = base;

		w.runq_p99_us *= i % 2 ? 3.4 : 2.6;
		w.lat_p99_us *= i % 2 ? 1.7 : 1.4;
		step(s, &w, &d);
		v[i] = d.dominant;
		if (i >= 1)
			expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	}
	assert_true(flips(v, 40) <= 1);
	diag_state_free(s);

	/* Two resources trading places by a little: the verdict stays put. */
	s = steady(&base, 20);
	for (int i = 0; i < 40; i++) {
		struct win w = base;

		w.lat_p99_us *= 4;
		w.runq_p99_us *= i % 2 ? 9 : 11;
		w.io_p99_us *= i % 2 ? 11 : 9;
		step(s, &w, &d);
		v[i] = d.dominant;
	}
	assert_int_equal(v[0], DIAG_CPU);
	assert_int_equal(flips(v, 40), 0);
	diag_state_free(s);
}

/* An anomaly that persists for minutes becomes the new normal, slowly. */
static void test_new_normal(void **state)
{
	struct diag_state *s = steady(&base, 20);
	struct win w = base;
	struct diagnosis d;
	int i;

	(void)state;
	w.lat_p99_us *= 5;
	w.runq_p99_us *= 10;
	for (i = 0; i < 1000; i++) {
		step(s, &w, &d);
		if (d.dominant == DIAG_NONE)
			break;
	}
	/* 1 s windows: still reported after a minute, absorbed within ten. */
	assert_true(i > 60);
	assert_true(i < 600);
	diag_state_free(s);
}

/*
 * One window's spike (a disk hiccup: I/O p99 180x, latency 400x) is not a
 * new normal: the slow baseline takes it in as a 10x window at most, so a
 * real I/O contention a few windows later (I/O p99 3.5x, latency 3x) is
 * still named. Folded in full, the spike had raised the I/O baseline by
 * half and the latency baseline 2.3x, and the contention went unreported.
 */
static void test_spike(void **state)
{
	struct diag_state *s = steady(&base, 20);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 400;
	w.io_p99_us *= 180;
	step(s, &w, &d);
	for (int i = 0; i < 3; i++)
		step(s, &base, &d);
	w = base;
	w.lat_p99_us *= 3;
	w.io_p99_us *= 3.5;
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_INTERFERENCE, "io_latency_us.p99");
	diag_state_free(s);
}

/* (f) Warm-up: the first windows give no verdict, however odd they look. */
static void test_warmup(void **state)
{
	struct diag_state *s = diag_state_new();
	struct win w = base;
	struct diagnosis d;

	(void)state;
	assert_non_null(s);
	for (int i = 0; i < 4; i++) {
		step(s, &base, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	w.lat_p99_us *= 10;
	w.runq_p99_us *= 20;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);

	/*
	 * Windows without enough requests do not count towards the latency
	 * warm-up, nor pull the request-rate baseline down: the usual traffic,
	 * when it comes back, is not "load".
	 */
	s = diag_state_new();
	assert_non_null(s);
	w = base;
	w.rps = 10;
	for (int i = 0; i < 10; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	for (int i = 0; i < 5; i++) {
		step(s, &base, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	w = base;
	w.lat_p99_us *= 5;
	w.runq_p99_us *= 10;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	diag_state_free(s);
}

/*
 * (f) Too few requests: no latency verdict however bad the window, but the
 * contention baselines still learn from it.
 */
static void test_too_few_requests(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;
	struct hist h = { 0 };
	double lo, hi;

	(void)state;
	w.rps = 15;
	w.lat_p99_us *= 20;
	w.runq_p99_us *= 20;
	w.io_p99_us *= 20;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);

	/* Quiet windows with a slightly higher run-queue p99 (below the release threshold). */
	w = base;
	w.rps = 15;
	w.wakeups_per_req = 200; /* the host's wakeups, not the requests */
	w.runq_p99_us = 50;
	for (int i = 0; i < 5; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	w = base;
	w.lat_p99_us *= 5;
	w.runq_p99_us *= 10;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	hist_add(&h, (uint64_t)(base.runq_p99_us * 1e3), 1);
	lo = hist_percentile(&h, 0.99) / 1e3;
	memset(&h, 0, sizeof(h));
	hist_add(&h, 50000, 1);
	hi = hist_percentile(&h, 0.99) / 1e3;
	/* The baseline moved towards the quiet windows' 50 us. */
	assert_true(d.evidence[0].baseline > lo + 0.2 * (hi - lo));
	assert_true(d.evidence[0].baseline < hi);
	diag_state_free(s);
}

/* (g) Missing signals are skipped, never read as zero. */
static void test_missing_signals(void **state)
{
	struct win w = base, sick;
	struct diag_state *s;
	struct diagnosis d;

	(void)state;
	/* No PSI, no throttling figures, no block I/O during the baseline. */
	w.psi_cpu = w.psi_io = w.psi_mem = NAN;
	w.throttled_s = NAN;
	w.ios = 0;
	w.srtt_us = NAN;
	s = steady(&w, 10);
	sick = w;
	sick.lat_p99_us *= 5;
	sick.runq_p99_us *= 10;
	sick.psi_cpu = 80; /* PSI appears: no baseline yet, so no evidence */
	sick.io_p99_us = 5000;
	sick.ios = 100;
	step(s, &sick, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_us.p99");
	assert_false(has_evidence(&d, "psi.cpu_some"));
	assert_false(has_evidence(&d, "io_latency_us.p99"));
	for (size_t i = 0; i < d.n_evidence; i++)
		assert_false(isnan(d.evidence[i].value) || isnan(d.evidence[i].baseline));
	diag_state_free(s);

	/*
	 * A signal that goes missing mid-run is not a drop to zero: its
	 * baseline is untouched, and when it comes back it is judged
	 * against the level it had.
	 */
	s = steady(&base, 10);
	w = base;
	w.futex_us_per_req = NAN;
	w.runq_p99_us = NAN;
	w.runq_us_per_req = NAN;
	for (int i = 0; i < 50; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	}
	w = base;
	w.lat_p99_us *= 3;
	w.futex_us_per_req *= 1.5;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);

	/* No contention sensor at all: load or unknown, never a resource. */
	s = steady(&base, 10);
	{
		struct qos_sample q;
		struct contention_sample c;

		w = base;
		w.lat_p99_us *= 3;
		fill(&w, &q, &c);
		diag_update(s, &q, NULL, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
		w.rps *= 2;
		fill(&w, &q, &c);
		diag_update(s, &q, NULL, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_LOAD, NULL);
	}
	diag_state_free(s);
}

/* (h) Memory: a neighbour squeezes the page cache and the service reclaims. */
static void test_memory(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 3;
	w.reclaim_us_per_req = 200;
	w.faults_per_req = 3;
	w.psi_mem = 20;
	step(s, &w, &d);
	expect(&d, DIAG_MEMORY, DIAG_CAUSE_INTERFERENCE, "reclaim_s/req");
	assert_true(has_evidence(&d, "page_faults/req"));
	assert_true(has_evidence(&d, "psi.memory_some"));
	diag_state_free(s);
}

/* (h) Network: retransmits and a longer RTT at the same request rate. */
static void test_network(void **state)
{
	struct diag_state *s = steady(&base, 10);
	struct win w = base;
	struct diagnosis d;

	(void)state;
	w.lat_p99_us *= 4;
	w.retrans_per_req = 0.02;
	w.srtt_us = 400;
	step(s, &w, &d);
	expect(&d, DIAG_NETWORK, DIAG_CAUSE_INTERFERENCE, "tcp_retransmits/req");
	assert_true(has_evidence(&d, "tcp_srtt_us"));
	diag_state_free(s);
}

/*
 * The same service with its phases: 20 us queued, 300 us service, and
 * replies of one send (sending 0) at p99.
 */
static struct win phased(void)
{
	struct win w = base;

	w.phases = true;
	w.queued_p99_us = 20;
	w.service_p99_us = 300;
	w.sending_p99_us = 0;
	return w;
}

/*
 * Queueing that grows with run-queue delay is the CPU: run-queue figures
 * up 2x, under the thresholds at which they are named on their own (no
 * verdict without the phases), the queued phase 10x: cpu/interference,
 * the phase first in the evidence.
 */
static void test_phase_queued_cpu(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s;
	struct diagnosis d;

	(void)state;
	w = p;
	w.lat_p99_us *= 3;
	w.queued_p99_us *= 10;
	w.runq_p99_us *= 2.2;
	w.runq_us_per_req *= 2;
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "phase.queued_us.p99");
	assert_true(d.evidence[0].ratio > 8 && d.evidence[0].ratio < 12);
	assert_true(d.evidence[0].value > 150 && d.evidence[0].value < 250);
	diag_state_free(s);

	/* Without the phases the same window names nothing. */
	w.phases = false;
	s = steady(&base, 10);
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);

	/* Queueing up with the run queue flat is not the CPU. */
	w = p;
	w.lat_p99_us *= 3;
	w.queued_p99_us *= 10;
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	diag_state_free(s);
}

/* Service time growing with block I/O is io; with lock waits, the lock (never interference). */
static void test_phase_service_io_lock(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s;
	struct diagnosis d;

	(void)state;
	w = p;
	w.lat_p99_us *= 4;
	w.service_p99_us *= 5;
	w.io_p99_us *= 2.5; /* past its exit (2x), short of its entry (3x) */
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_INTERFERENCE, "phase.service_us.p99");
	diag_state_free(s);

	w = p;
	w.lat_p99_us *= 4;
	w.service_p99_us *= 5;
	w.lock_us_per_req = 9; /* 1.8x its 5 us floor: past its exit, short of its entry */
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_LOCK, DIAG_CAUSE_UNKNOWN, "phase.service_us.p99");
	diag_state_free(s);
}

/*
 * A disk antagonist beside a service whose run-queue wait is small: the
 * block I/O p99 x15 and the service phase x10 (300 us -> 3 ms), while the
 * run-queue wait per request went 10 -> 240 us, a larger ratio (24x
 * against a 2.5x entry, where the disk's 15x is against 3x). The time went
 * to the service phase, not the queue: io/interference, the service phase
 * first. The same window with the queued phase up as much (a CPU hog
 * delaying every read) stays the CPU; without the phases too.
 */
static void test_phase_service_weighs_io_over_cpu(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s;
	struct diagnosis d;

	(void)state;
	w = p;
	w.lat_p99_us *= 8;
	w.service_p99_us *= 10;
	w.queued_p99_us = 25; /* 1.25x: not up */
	w.io_p50_us *= 5;
	w.io_p99_us *= 15;
	w.runq_us_per_req *= 24;
	w.runq_p99_us *= 2;
	s = steady(&p, 10);
	for (int i = 0; i < 5; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_IO, DIAG_CAUSE_INTERFERENCE, "phase.service_us.p99");
		assert_true(has_evidence(&d, "io_latency_us.p99"));
		assert_true(has_evidence(&d, "runq_delay_s/req"));
	}
	diag_state_free(s);

	/*
	 * Requests queued behind the slow ones on their connection, the queued
	 * phase up by 2 ms where the service went up by 2.7: still io.
	 */
	w.queued_p99_us = 2000;
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_IO, DIAG_CAUSE_INTERFERENCE, "phase.service_us.p99");
	diag_state_free(s);

	/* The queued phase up by more than the service: the CPU. */
	w.queued_p99_us = 3000;
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "phase.queued_us.p99");
	diag_state_free(s);

	/* Without the phases nothing says where the time went: the ratios decide. */
	w.phases = false;
	s = steady(&base, 10);
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "runq_delay_s/req");
	diag_state_free(s);
}

/* Service time growing with the request rate, nothing contended: the load. */
static void test_phase_service_load(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s = steady(&p, 10);
	struct diagnosis d;

	(void)state;
	w = p;
	w.rps *= 2;
	w.lat_p99_us *= 3;
	w.service_p99_us *= 3;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_LOAD, "phase.service_us.p99");
	assert_int_equal(d.n_evidence, 1);
	diag_state_free(s);
}

/*
 * A load whose requests grew costlier, at a rate its CPU caps (co-location
 * scenario 5's step, a costlier page beside the base load): what it serves
 * rises under the 1.3x that says load, but its own CPU time per second
 * rises 2.2x. Nothing contended: the load. Each request costing that much
 * more with the rate and its CPU time per second flat is not. cpu_up says
 * its CPU time is up whatever stands out.
 */
static void test_load_in_cpu_time(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s = steady(&p, 10);
	struct diagnosis d;

	(void)state;
	w = p;
	w.rps *= 1.1;
	w.cpu_us_per_req *= 2;
	w.lat_p99_us *= 20;
	w.queued_p99_us *= 30;
	w.service_p99_us *= 2;
	for (int i = 0; i < 5; i++) {
		step(s, &w, &d);
		expect(&d, DIAG_NONE, DIAG_CAUSE_LOAD, "phase.service_us.p99");
		assert_false(d.load_up); /* the rate is not up: the CPU time is */
		assert_true(d.cpu_up);
	}
	diag_state_free(s);

	s = steady(&p, 10);
	w.cpu_us_per_req = p.cpu_us_per_req * 1.1;
	step(s, &w, &d);
	expect(&d, DIAG_NONE, DIAG_CAUSE_UNKNOWN, NULL);
	assert_false(d.cpu_up); /* 1.1 x 1.1: its CPU time up 1.21x */
	diag_state_free(s);

	/*
	 * The run queue up with it (its own threads queueing behind its
	 * costlier requests, or a neighbour): the CPU stands out, and the cause
	 * is not its load, but cpu_up still says its CPU time is (the engine
	 * weighs that against what its neighbours hold: overload()).
	 */
	s = steady(&p, 10);
	w.cpu_us_per_req = p.cpu_us_per_req * 2;
	w.runq_p99_us = p.runq_p99_us * 30;
	w.runq_us_per_req = p.runq_us_per_req * 30;
	w.psi_cpu = 0.6;
	step(s, &w, &d);
	assert_int_equal(d.dominant, DIAG_CPU);
	assert_int_not_equal(d.cause, DIAG_CAUSE_LOAD);
	assert_true(d.cpu_up);
	diag_state_free(s);
}

/* Sending time growing alone is the network or the peer: no neighbour to blame. */
static void test_phase_sending(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s;
	struct diagnosis d;

	(void)state;
	w = p;
	w.lat_p99_us = 5000;
	w.sending_p99_us = 4700;
	s = steady(&p, 10);
	step(s, &w, &d);
	expect(&d, DIAG_NETWORK, DIAG_CAUSE_UNKNOWN, "phase.sending_us.p99");
	assert_true(d.evidence[0].baseline < 1);
	diag_state_free(s);

	/* With queueing up too, it is not sending alone. */
	w.queued_p99_us *= 10;
	s = steady(&p, 10);
	step(s, &w, &d);
	assert_int_not_equal(d.dominant, DIAG_NETWORK);
	diag_state_free(s);
}

/*
 * A verdict the contention signals name on their own keeps its cause and
 * resource, and names the phase that grew, first.
 */
static void test_phase_names_verdict(void **state)
{
	struct win p = phased(), w;
	struct diag_state *s = steady(&p, 20);
	struct diagnosis d;

	(void)state;
	w = p;
	w.lat_p50_us *= 2;
	w.lat_p99_us *= 5;
	w.runq_p99_us *= 10;
	w.runq_us_per_req *= 6;
	w.psi_cpu = 20;
	w.rps *= 0.95;
	w.queued_p99_us *= 20;
	step(s, &w, &d);
	expect(&d, DIAG_CPU, DIAG_CAUSE_INTERFERENCE, "phase.queued_us.p99");
	assert_string_equal(d.evidence[1].signal, "runq_delay_us.p99");
	assert_true(has_evidence(&d, "runq_delay_s/req"));
	diag_state_free(s);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(diag_dominant_name(DIAG_NONE), "none");
	assert_string_equal(diag_dominant_name(DIAG_CPU), "cpu");
	assert_string_equal(diag_dominant_name(DIAG_IO), "io");
	assert_string_equal(diag_dominant_name(DIAG_LOCK), "lock");
	assert_string_equal(diag_dominant_name(DIAG_MEMORY), "memory");
	assert_string_equal(diag_dominant_name(DIAG_NETWORK), "network");
	assert_string_equal(diag_cause_name(DIAG_CAUSE_UNKNOWN), "unknown");
	assert_string_equal(diag_cause_name(DIAG_CAUSE_LOAD), "load");
	assert_string_equal(diag_cause_name(DIAG_CAUSE_INTERFERENCE), "interference");
	diag_state_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steady_noise),
		cmocka_unit_test(test_cpu_interference),
		cmocka_unit_test(test_cpu_throttled),
		cmocka_unit_test(test_io_interference),
		cmocka_unit_test(test_io_self_inflicted),
		cmocka_unit_test(test_elevated_without_latency),
		cmocka_unit_test(test_lock_own),
		cmocka_unit_test(test_lock_own_threads_on_cpu),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_latency_unexplained),
		cmocka_unit_test(test_oscillation),
		cmocka_unit_test(test_new_normal),
		cmocka_unit_test(test_spike),
		cmocka_unit_test(test_warmup),
		cmocka_unit_test(test_too_few_requests),
		cmocka_unit_test(test_missing_signals),
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_network),
		cmocka_unit_test(test_phase_queued_cpu),
		cmocka_unit_test(test_phase_service_io_lock),
		cmocka_unit_test(test_phase_service_weighs_io_over_cpu),
		cmocka_unit_test(test_phase_service_load),
		cmocka_unit_test(test_load_in_cpu_time),
		cmocka_unit_test(test_phase_sending),
		cmocka_unit_test(test_phase_names_verdict),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
