// SPDX-License-Identifier: GPL-2.0
/*
 * Diagnosis of one cgroup's window: which resource its requests wait on,
 * and whether that is its own load or a neighbour's interference.
 *
 * Everything is judged against the cgroup's own recent baseline, never
 * against absolute limits: 300 us of run-queue delay is a disaster for a
 * 100 us service and noise for a batch job, and only the cgroup's history
 * knows which one it is.
 *
 * Baselines are exponentially weighted moving averages with a time
 * constant in seconds (the weight of a window comes from its interval_s,
 * so a faster tick does not shorten the memory). A windowed median would
 * shrug off single spikes, but it needs a buffer per signal and, more to
 * the point, it absorbs any level shift after half its window whatever the
 * shift is; the property that matters is that an anomaly must not teach
 * the baseline that it is normal, and that needs gating either way. So:
 * a window whose value sits at or above the signal's release threshold
 * folds in with a slow time constant (minutes), every other window with
 * the normal one (tens of seconds). The first windows are a plain mean
 * (the EWMA's start-up bias corrected), and nothing is judged until a
 * baseline has DIAG_WARMUP windows behind it. Latency and request-rate
 * baselines learn only from windows with enough requests to mean
 * something; contention baselines from every window that has the signal
 * (a missing signal is skipped, never read as zero).
 *
 * Each signal carries a hysteresis pair: it becomes elevated when its
 * ratio to the baseline reaches `enter` and stays so until the ratio falls
 * below `exit`. Latency ("is the service slower?") and request rate ("is
 * it busier?") carry the same kind of pair. The dominant resource also
 * sticks: a challenger must beat it by DIAG_SWITCH to take over.
 *
 * Signals that scale with the amount of work (total wait seconds, faults,
 * retransmits) are divided by the window's requests, so twice the traffic
 * at the same contention per request reads flat; per-event percentiles
 * (run-queue and block latency p99), RTT and PSI are already intensive and
 * are taken as they are; throttled time is divided by the interval (the
 * fraction of the window spent throttled). The evidence names are the JSON
 * names with the normaliser appended ("futex_wait_s/req",
 * "cpu_throttled_s/s") because value and baseline are in those units.
 */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "sensing/diagnosis.h"

/*
 * A window's p99 over fewer requests is its maximum, i.e. one unlucky
 * request; docs/design.md: never act on noise. Per-request normalisation needs
 * the same count, or one slow request's futex wait becomes "per request".
 */
#define DIAG_MIN_REQUESTS 20
/* Same reasoning for the run-queue histogram's p99. */
#define DIAG_MIN_WAKEUPS 20
/* Block I/O is much rarer than wakeups; ten completions already show a disk that is slow. */
#define DIAG_MIN_IOS 10
/* Five windows give a mean whose noise is well below the 1.5x latency threshold. */
#define DIAG_WARMUP 5
/*
 * Normal memory: long enough that a run-queue delay ramping in over a few
 * seconds is still seen against the level before it; short enough to
 * follow the day's slow drift in traffic mix.
 */
#define DIAG_TAU_S 20.0
/*
 * Memory while a value is anomalous: a shift that persists for minutes is
 * the new normal (a deploy, a co-runner the policy could not move), and a
 * diagnosis that blamed it forever would pin the policy in its harshest
 * state. At 300 s a 10x shift is still reported for about two minutes.
 */
#define DIAG_TAU_SLOW_S 300.0
/*
 * Latency is "up" at 1.5x its baseline p99: window-to-window p99 noise of
 * a steady service with hundreds of requests is some 10-30%, and 50% more
 * tail is what eats a typical objective's slack. It stays up until 1.25x so
 * a tail hovering at the threshold is one episode, not a flicker.
 */
#define DIAG_LAT_ENTER 1.5
#define DIAG_LAT_EXIT 1.25
/* Below 1 us a latency baseline is bucket resolution, not a level. */
#define DIAG_LAT_FLOOR_NS 1000.0
/*
 * Load is "up" at 1.3x the baseline request rate: Poisson arrivals at
 * >= 1000 req/s vary by a few percent per window, and on a service near its
 * knee 30% more load is enough to lift the tail by the 50% above. Closed-loop
 * clients slow down when the server does, so a falling rate counts as
 * steady, never as a reason to rule out interference.
 */
#define DIAG_LOAD_ENTER 1.3
#define DIAG_LOAD_EXIT 1.15
/*
 * A request's phases (queued, service, sending; sensor.h) are "up" as its
 * latency is: 1.5x their baseline p99, down below 1.25x. Below 5 us a
 * phase's p99 is the path's own cost (a wake-up, a copy), not a level: a
 * one-send reply's sending phase is 0, and 3 us of it is no news.
 */
#define DIAG_PHASE_FLOOR_NS 5000.0

/* One request per second: rates below that are not a level to compare with. */
#define DIAG_RATE_FLOOR 1.0
/*
 * With more load, a service queues behind its own threads: contention per
 * event rises with utilisation, faster than linearly near saturation. A
 * contention ratio up to 1.5x the load ratio is taken as the load's own
 * doing; beyond that something besides the load raised it.
 */
#define DIAG_LOAD_SLACK 1.5
/* Own work per request at least this share of its baseline: "as before". */
#define DIAG_WORK_STEADY 0.7
/*
 * With latency flat, a signal must be twice as far past its threshold to
 * be named: the policy acts on slow requests, and naming a resource that
 * is not slowing them invites action without a cause. A class named this
 * way stays named while its signal remains elevated (hysteresis).
 */
#define DIAG_CLEAR 2.0
/* A new dominant resource must beat the current one's score by half. */
#define DIAG_SWITCH 1.5
/*
 * While a value is anomalous it folds into the slow baseline as at most
 * this many times the baseline (or the signal's floor): a sustained shift
 * of up to 10x is absorbed as DIAG_TAU_SLOW_S says, but one window's spike
 * (a disk hiccup of 37 ms against a 200 us norm) does not move the
 * baseline as much as three minutes of a 2x shift would, leaving the next
 * real contention unreported against a norm it inflated.
 */
#define DIAG_SPIKE_MAX 10.0

enum sig_norm { NORM_NONE, NORM_REQ, NORM_SEC };

/*
 * One signal. floor is the smallest value that means anything (below it,
 * bucket resolution, background activity or one stray event): ratios are
 * taken against max(baseline, floor), so a baseline of ~0 still gives a
 * finite ratio and one retransmit after none is not "infinitely" up.
 * Signals of class DIAG_NONE measure the cgroup's own work per request;
 * they are never evidence, but when they rise with a contention signal of
 * their resource the cgroup is queueing behind itself.
 */
struct sig_def {
	const char *name;
	enum diag_dominant class;
	enum diag_dominant work_of; /* work signals: the resource they explain */
	double (*get)(const struct contention_sample *c);
	enum sig_norm norm;
	double floor, enter, exit;
};

static double hist_p99_us(const struct hist *h, uint64_t min)
{
	return h->total >= min ? hist_percentile(h, 0.99) / 1e3 : NAN;
}

static double get_runq_p99(const struct contention_sample *c)
{
	return hist_p99_us(&c->runq, DIAG_MIN_WAKEUPS);
}

static double get_io_p99(const struct contention_sample *c)
{
	return hist_p99_us(&c->io, DIAG_MIN_IOS);
}

static double get_io_bytes(const struct contention_sample *c)
{
	return c->io_read_bytes + c->io_write_bytes; /* NAN if either is */
}

#define GETTER(f)                                                \
	static double get_##f(const struct contention_sample *c) \
	{                                                        \
		return c->f;                                     \
	}
GETTER(runq_delay_s)
GETTER(cpu_throttled_s)
GETTER(psi_cpu_some)
GETTER(psi_io_some)
GETTER(futex_wait_s)
GETTER(lock_contention_s)
GETTER(reclaim_s)
GETTER(page_faults)
GETTER(psi_memory_some)
GETTER(tcp_retransmits)
GETTER(tcp_srtt_us)
GETTER(cpu_usage_s)

/*
 * Thresholds. Percentiles of per-event delay (run queue, block I/O) jitter
 * by up to 2x between quiet windows (timer ticks, kworkers, a flush), while
 * a co-runner moves them by 10-100x (a CFS slice is milliseconds against
 * microsecond waits; a queued disk request waits for the whole queue): 3x
 * to enter, 2x to leave. Per-request totals are means over many events
 * and jitter less: 2.5x / 1.7x. PSI avg10 is already smoothed over ten
 * seconds, but starts from ~0 on a quiet host, so its floor of 5% (the
 * background stall of any busy machine) carries the weight: entering from
 * nothing needs 15% of the time stalled. Other floors: 20 us of run-queue
 * p99 is wake-up path latency (IPI, idle exit) no weight can change; 100 us
 * is one fast NVMe read; 1 us per request of total run-queue wait is what
 * a quiet host shows (0.3-0.9 us for nginx here); not 5 us: it is a mean
 * over every request, and a hog's tail hides in it (nginx beside
 * stress-ng: 0.34 -> 6.3 us per request while its p99 went 88 us ->
 * 3.2 ms, unnamed against a 5 us floor); 5 us per request of lock or
 * reclaim wait is below anything that shows in a request's latency; one
 * fault per request is normal for
 * an allocating service; one retransmit per thousand requests is
 * background loss; 50 us of srtt is loopback. Own work per request counts
 * as "up" at 2x: cache and frequency effects of a neighbour move it by
 * well under that, extra threads of the cgroup's own by more.
 */
// clang-format off
static const struct sig_def signals[] = {
	{ "runq_delay_us.p99", DIAG_CPU, DIAG_NONE, get_runq_p99, NORM_NONE, 20, 3, 2 },
	{ "runq_delay_s/req", DIAG_CPU, DIAG_NONE, get_runq_delay_s, NORM_REQ, 1e-6, 2.5, 1.7 },
	{ "cpu_throttled_s/s", DIAG_CPU, DIAG_NONE, get_cpu_throttled_s, NORM_SEC, 0.01, 2.5, 1.7 },
	{ "psi.cpu_some", DIAG_CPU, DIAG_NONE, get_psi_cpu_some, NORM_NONE, 5, 3, 2 },
	{ "io_latency_us.p99", DIAG_IO, DIAG_NONE, get_io_p99, NORM_NONE, 100, 3, 2 },
	{ "psi.io_some", DIAG_IO, DIAG_NONE, get_psi_io_some, NORM_NONE, 5, 3, 2 },
	{ "futex_wait_s/req", DIAG_LOCK, DIAG_NONE, get_futex_wait_s, NORM_REQ, 5e-6, 2.5, 1.7 },
	{ "lock_contention_s/req", DIAG_LOCK, DIAG_NONE, get_lock_contention_s, NORM_REQ, 5e-6, 2.5, 1.7 },
	{ "reclaim_s/req", DIAG_MEMORY, DIAG_NONE, get_reclaim_s, NORM_REQ, 5e-6, 2.5, 1.7 },
	{ "page_faults/req", DIAG_MEMORY, DIAG_NONE, get_page_faults, NORM_REQ, 1, 2.5, 1.7 },
	{ "psi.memory_some", DIAG_MEMORY, DIAG_NONE, get_psi_memory_some, NORM_NONE, 5, 3, 2 },
	{ "tcp_retransmits/req", DIAG_NETWORK, DIAG_NONE, get_tcp_retransmits, NORM_REQ, 1e-3, 2.5, 1.7 },
	{ "tcp_srtt_us", DIAG_NETWORK, DIAG_NONE, get_tcp_srtt_us, NORM_NONE, 50, 3, 2 },
	/* Own work per request (never evidence). */
	{ "cpu_usage_s/req", DIAG_NONE, DIAG_CPU, get_cpu_usage_s, NORM_REQ, 1e-6, 2, 1.5 },
	{ "io_bytes/req", DIAG_NONE, DIAG_IO, get_io_bytes, NORM_REQ, 4096, 2, 1.5 },
};
// clang-format on

#define N_SIGNALS (sizeof(signals) / sizeof(*signals))
#define N_CLASSES (DIAG_NETWORK + 1)

/* A baseline and its hysteresis state. */
struct diag_track {
	double base;
	unsigned n; /* windows folded in (saturating) */
	bool up;
};

struct diag_state {
	struct diag_track lat, rate, sig[N_SIGNALS];
	struct diag_track phase[TW_PHASES];
	enum diag_dominant last;
};

/* The evidence names of the phases' p99s (value and baseline in µs). */
static const char *const phase_signal[TW_PHASES] = {
	[TW_PHASE_QUEUED] = "phase.queued_us.p99",
	[TW_PHASE_SERVICE] = "phase.service_us.p99",
	[TW_PHASE_SENDING] = "phase.sending_us.p99",
};

/* What one window measured, before it is folded into the baselines. */
struct window {
	double dt;	   /* interval in s, NAN if unknown */
	double a, a_slow;  /* EWMA weights for this interval */
	bool busy;	   /* enough requests for a latency verdict */
	double lat, lat_r; /* p99 in ns and its ratio to the baseline */
	double rate, rate_r;
	double v[N_SIGNALS], r[N_SIGNALS];     /* NAN where unavailable */
	double ph[TW_PHASES], ph_r[TW_PHASES]; /* phases' p99 in ns and ratios; NAN where unseen */
};

struct diag_state *diag_state_new(void)
{
	return calloc(1, sizeof(struct diag_state));
}

void diag_state_free(struct diag_state *s)
{
	free(s);
}

const char *diag_dominant_name(enum diag_dominant d)
{
	static const char *const names[] = {
		[DIAG_NONE] = "none", [DIAG_CPU] = "cpu",	[DIAG_IO] = "io",
		[DIAG_LOCK] = "lock", [DIAG_MEMORY] = "memory", [DIAG_NETWORK] = "network",
	};

	return (unsigned)d < N_CLASSES ? names[d] : "none";
}

const char *diag_cause_name(enum diag_cause c)
{
	switch (c) {
	case DIAG_CAUSE_LOAD:
		return "load";
	case DIAG_CAUSE_INTERFERENCE:
		return "interference";
	default:
		return "unknown";
	}
}

static bool warm(const struct diag_track *t)
{
	return t->n >= DIAG_WARMUP;
}

static double ratio(double v, const struct diag_track *t, double floor)
{
	return warm(t) ? v / fmax(t->base, floor) : NAN;
}

/* Hysteresis: enter at enter, leave below exit; a NAN ratio changes nothing. */
static void hysteresis(struct diag_track *t, double r, double enter, double exit)
{
	if (!isnan(r))
		t->up = t->up ? r >= exit : r >= enter;
}

static void fold(struct diag_track *t, double v, double floor, const struct window *w,
		 bool anomalous)
{
	double k;

	if (isnan(v))
		return;
	if (t->n < DIAG_WARMUP) {
		k = 1.0 / (t->n + 1);
	} else if (anomalous) {
		k = w->a_slow;
		v = fmin(v, DIAG_SPIKE_MAX * fmax(t->base, floor));
	} else {
		k = fmax(w->a, 1.0 / (t->n + 1));
	}
	t->base += k * (v - t->base);
	if (t->n < UINT_MAX)
		t->n++;
}

static double interval_of(const struct qos_sample *q, const struct contention_sample *c)
{
	if (q && isfinite(q->interval_s) && q->interval_s > 0)
		return q->interval_s;
	if (c && isfinite(c->interval_s) && c->interval_s > 0)
		return c->interval_s;
	return NAN;
}

static double sig_value(const struct sig_def *d, const struct contention_sample *c, uint64_t reqs,
			double dt)
{
	double v = d->get(c);

	if (!isfinite(v) || v < 0)
		return NAN;
	switch (d->norm) {
	case NORM_REQ:
		return reqs >= DIAG_MIN_REQUESTS ? v / (double)reqs : NAN;
	case NORM_SEC:
		return v / dt; /* NAN when the interval is unknown */
	default:
		return v;
	}
}

/* Measure the window against the baselines and move the hysteresis states. */
static void measure(struct diag_state *s, const struct qos_sample *q,
		    const struct contention_sample *c, struct window *w)
{
	uint64_t reqs = q ? q->requests : 0;
	double step;

	w->dt = interval_of(q, c);
	/* Interval unknown: count it as one second, the daemon's default tick. */
	step = isnan(w->dt) ? 1.0 : w->dt;
	w->a = 1 - exp(-step / DIAG_TAU_S);
	w->a_slow = 1 - exp(-step / DIAG_TAU_SLOW_S);
	w->busy = reqs >= DIAG_MIN_REQUESTS && q->latency.total >= DIAG_MIN_REQUESTS;
	w->lat = w->busy ? hist_percentile(&q->latency, 0.99) : NAN;
	w->lat_r = w->busy ? ratio(w->lat, &s->lat, DIAG_LAT_FLOOR_NS) : NAN;
	/*
	 * The rate baseline is the rate while serving: idle gaps would drag
	 * it down and make the usual traffic, when it returns, look like load.
	 */
	w->rate = w->busy ? (double)reqs / w->dt : NAN;
	w->rate_r = ratio(w->rate, &s->rate, DIAG_RATE_FLOOR);
	hysteresis(&s->lat, w->lat_r, DIAG_LAT_ENTER, DIAG_LAT_EXIT);
	hysteresis(&s->rate, w->rate_r, DIAG_LOAD_ENTER, DIAG_LOAD_EXIT);
	for (unsigned i = 0; i < TW_PHASES; i++) {
		bool seen = w->busy && q->phase_on[i] && q->phase[i].total >= DIAG_MIN_REQUESTS;

		w->ph[i] = seen ? hist_percentile(&q->phase[i], 0.99) : NAN;
		w->ph_r[i] = seen ? ratio(w->ph[i], &s->phase[i], DIAG_PHASE_FLOOR_NS) : NAN;
		hysteresis(&s->phase[i], w->ph_r[i], DIAG_LAT_ENTER, DIAG_LAT_EXIT);
	}

	for (size_t i = 0; i < N_SIGNALS; i++) {
		const struct sig_def *d = &signals[i];

		w->v[i] = c ? sig_value(d, c, reqs, w->dt) : NAN;
		w->r[i] = isnan(w->v[i]) ? NAN : ratio(w->v[i], &s->sig[i], d->floor);
		hysteresis(&s->sig[i], w->r[i], d->enter, d->exit);
	}
}

/*
 * Fold the window into the baselines. The request rate also moves slowly
 * while latency is up: closed-loop clients back off under interference,
 * and a baseline that followed them down would call the recovery "load".
 */
static void fold_window(struct diag_state *s, const struct window *w)
{
	bool lat_anomalous = w->lat_r >= DIAG_LAT_EXIT; /* false for NAN */

	if (w->busy)
		fold(&s->lat, w->lat, DIAG_LAT_FLOOR_NS, w, lat_anomalous);
	for (unsigned i = 0; i < TW_PHASES; i++)
		fold(&s->phase[i], w->ph[i], DIAG_PHASE_FLOOR_NS, w, w->ph_r[i] >= DIAG_LAT_EXIT);
	if (isfinite(w->rate))
		fold(&s->rate, w->rate, DIAG_RATE_FLOOR, w,
		     w->rate_r >= DIAG_LOAD_EXIT || lat_anomalous);
	for (size_t i = 0; i < N_SIGNALS; i++)
		fold(&s->sig[i], w->v[i], signals[i].floor, w, w->r[i] >= signals[i].exit);
}

/* How far past its entry threshold signal i is this window; 0 if not elevated. */
static double score(const struct diag_state *s, const struct window *w, size_t i)
{
	if (isnan(w->r[i]) || !s->sig[i].up)
		return 0;
	return w->r[i] / signals[i].enter;
}

/* The resource whose elevated signal stands out most, with stickiness. */
/* Highest ratio among the elevated signals of a class (work signals: work_of). */
static double class_ratio(const struct diag_state *s, const struct window *w, enum diag_dominant k,
			  bool work)
{
	double r = 0;

	for (size_t i = 0; i < N_SIGNALS; i++)
		if ((work ? signals[i].work_of : signals[i].class) == k && score(s, w, i) > 0)
			r = fmax(r, w->r[i]);
	return r;
}

/* Phase i is up this window (elevated against its baseline). */
static bool phase_up(const struct diag_state *s, const struct window *w, unsigned i)
{
	return !isnan(w->ph_r[i]) && s->phase[i].up;
}

/* What phase i's p99 added this window over its baseline, in ns (NAN if unseen). */
static double phase_rise(const struct diag_state *s, const struct window *w, unsigned i)
{
	return isnan(w->ph_r[i]) ? NAN : w->ph[i] - fmax(s->phase[i].base, DIAG_PHASE_FLOOR_NS);
}

/*
 * The resources a request waits on inside its service phase, strongest
 * elevated one first; DIAG_NONE if none stands out.
 */
static enum diag_dominant service_class(const double *best)
{
	static const enum diag_dominant of_service[] = { DIAG_IO, DIAG_LOCK, DIAG_MEMORY };
	enum diag_dominant k = DIAG_NONE;

	for (size_t i = 0; i < sizeof(of_service) / sizeof(*of_service); i++)
		if (best[of_service[i]] > 0 && (k == DIAG_NONE || best[of_service[i]] > best[k]))
			k = of_service[i];
	return k;
}

/*
 * A service whose threads wait for a CPU waits above all to read each
 * request: a hog delays every read, and the queued phase's p99 rises by
 * its slices. When the service phase is up and its p99 added more time
 * (in us, not as a ratio) than the queued phase's, the time went to what
 * the service waits on, whatever the run-queue ratios say. Not by a wider
 * margin: a request that waits on a slow disk queues the next one on its
 * connection behind it, so the queued phase rises with any slow service,
 * up to as much (test_contention io_interference beside a niced hog on the
 * other CPU: service p99 +3.8 ms, queued +2.5 ms, disk p99 x8).
 */
static bool service_carried(const struct diag_state *s, const struct window *w)
{
	double q = phase_rise(s, w, TW_PHASE_QUEUED), sv = phase_rise(s, w, TW_PHASE_SERVICE);

	return phase_up(s, w, TW_PHASE_SERVICE) && !isnan(q) && sv > q;
}

static enum diag_dominant pick_dominant(const struct diag_state *s, const struct window *w)
{
	double best[N_CLASSES] = { 0 };
	enum diag_dominant d = DIAG_NONE;

	for (size_t i = 0; i < N_SIGNALS; i++) {
		enum diag_dominant k = signals[i].class;

		if (k != DIAG_NONE)
			best[k] = fmax(best[k], score(s, w, i));
	}
	for (unsigned k = DIAG_CPU; k < N_CLASSES; k++) {
		if (best[k] <= 0)
			continue;
		/* Latency flat: only a clear outlier, or the resource already named. */
		if (!s->lat.up && k != s->last && best[k] < DIAG_CLEAR)
			continue;
		if (d == DIAG_NONE || best[k] > best[d])
			d = k;
	}
	if (d != DIAG_NONE && s->last != DIAG_NONE && s->last != d && best[s->last] > 0 &&
	    best[s->last] * DIAG_SWITCH >= best[d])
		d = s->last;
	/*
	 * The CPU against a resource the service waits on, both standing out:
	 * ratios cannot weigh them (a run-queue wait of 1 us per request that
	 * went to 24 us is a larger ratio than a disk p99 of 200 us that went
	 * to 3 ms), the phases can: the one whose time grew names it.
	 */
	if (d == DIAG_CPU && s->lat.up && service_class(best) != DIAG_NONE && service_carried(s, w))
		d = service_class(best);
	/*
	 * Threads of the cgroup's own fighting over a lock also crowd its CPU:
	 * when the run-queue rise comes with its own CPU work per request up
	 * and lock waits are up too, the lock is the cause to name.
	 */
	if (d == DIAG_CPU && best[DIAG_LOCK] > 0 && class_ratio(s, w, DIAG_CPU, true) > 0)
		d = DIAG_LOCK;
	return d;
}

/*
 * Load: latency up with more requests and contention no more than that load
 * explains. Interference: latency up with a resource contended out of
 * proportion to the load. A lock is never interference: the waits are
 * between the cgroup's own threads (futex, or a kernel lock they take),
 * and punishing neighbours would not release it. Neither is contention
 * that comes with the cgroup's own work per request rising: it queues
 * behind itself (its own extra threads on the CPU, its own extra I/O).
 */
/*
 * The cgroup's own work per request on resource k against its baseline
 * (NAN when not measured): near 1 or more with more requests means its own
 * use of k grew with its load.
 */
static double work_ratio(const struct window *w, enum diag_dominant k)
{
	for (size_t i = 0; i < N_SIGNALS; i++)
		if (signals[i].work_of == k && !isnan(w->r[i]))
			return w->r[i];
	return NAN;
}

/*
 * The cgroup's own CPU time per second against its baseline: the request
 * rate's ratio times its CPU per request's (NAN when either is unknown).
 * Its load in CPU rather than in requests: a load whose requests grew
 * costlier, at a rate its CPU caps, shows here and not in the rate
 * (measured: a step of a costlier page beside nginx's base load took its
 * CPU from 40 % to all of it, while what it served rose under the 1.3x of
 * DIAG_LOAD_ENTER in three of four tries of the own-load test).
 */
static double own_cpu_ratio(const struct window *w)
{
	return w->rate_r * work_ratio(w, DIAG_CPU);
}

static enum diag_cause cause_of(const struct diag_state *s, const struct window *w,
				enum diag_dominant d)
{
	bool load = s->rate.up && !isnan(w->rate_r);
	double work = work_ratio(w, d);

	if (!s->lat.up)
		return DIAG_CAUSE_UNKNOWN;
	/*
	 * Nothing contended: more requests, or more of its own CPU time, is
	 * the load. Where a resource stands out, the rate alone, weighed
	 * against the contention below: a neighbour's harm there must not
	 * pass as load because each request also cost more of the CPU.
	 */
	if (d == DIAG_NONE)
		return load || own_cpu_ratio(w) >= DIAG_LOAD_ENTER ? DIAG_CAUSE_LOAD :
								     DIAG_CAUSE_UNKNOWN;
	if (load && class_ratio(s, w, d, false) <= w->rate_r * DIAG_LOAD_SLACK)
		return DIAG_CAUSE_LOAD;
	/*
	 * More requests, each costing what it did: the cgroup's own use of the
	 * resource grew with its load, and near saturation queueing behind
	 * itself grows much faster than the load (like rho / (1 - rho)), so no
	 * fixed slack on the contention ratio can tell that from a neighbour.
	 */
	if (load && work >= DIAG_WORK_STEADY)
		return DIAG_CAUSE_LOAD;
	if (d == DIAG_LOCK || class_ratio(s, w, d, true) > 0)
		return load ? DIAG_CAUSE_LOAD : DIAG_CAUSE_UNKNOWN;
	return DIAG_CAUSE_INTERFERENCE;
}

/*
 * A contention signal of class k rising with the phase: past the level at
 * which an elevated one would leave (its exit threshold), if not yet past
 * its entry. A phase that grew says where the time went; the signal need
 * only move with it to say why.
 */
static bool class_rising(const struct window *w, enum diag_dominant k)
{
	for (size_t i = 0; i < N_SIGNALS; i++)
		if (signals[i].class == k && !isnan(w->r[i]) && w->r[i] >= signals[i].exit)
			return true;
	return false;
}

/*
 * Where no resource stands out on its own, the phase that grew, and what
 * grew with it, name one:
 * - queued time (waiting to be read) with run-queue delay: the CPU;
 * - service time with lock waits, block I/O or reclaim: that resource;
 * - sending time alone (neither queued nor service up): the network or
 *   the peer reading slowly.
 * Service time that grew with the request rate and nothing contended is
 * the load, which cause_of() already names. *phase says which phase.
 */
static enum diag_dominant phase_dominant(const struct diag_state *s, const struct window *w,
					 int *phase)
{
	bool q = phase_up(s, w, TW_PHASE_QUEUED), sv = phase_up(s, w, TW_PHASE_SERVICE);

	*phase = -1;
	if (q && (!sv || w->ph_r[TW_PHASE_QUEUED] >= w->ph_r[TW_PHASE_SERVICE]) &&
	    class_rising(w, DIAG_CPU)) {
		*phase = TW_PHASE_QUEUED;
		return DIAG_CPU;
	}
	if (sv) {
		static const enum diag_dominant of_service[] = { DIAG_LOCK, DIAG_IO, DIAG_MEMORY };

		for (size_t k = 0; k < sizeof(of_service) / sizeof(*of_service); k++) {
			if (class_rising(w, of_service[k])) {
				*phase = TW_PHASE_SERVICE;
				return of_service[k];
			}
		}
	}
	if (phase_up(s, w, TW_PHASE_SENDING) && !q && !sv) {
		*phase = TW_PHASE_SENDING;
		return DIAG_NETWORK;
	}
	return DIAG_NONE;
}

/* The phase a verdict on resource d is about: where its waiting shows. */
static int phase_of(enum diag_dominant d)
{
	switch (d) {
	case DIAG_CPU:
		return TW_PHASE_QUEUED;
	case DIAG_NETWORK:
		return TW_PHASE_SENDING;
	default:
		return TW_PHASE_SERVICE; /* io, lock, memory, and the load */
	}
}

/*
 * The phases that are up, as evidence, the verdict's phase first: value
 * and baseline in µs.
 */
static void add_phase_evidence(const struct diag_state *s, const struct window *w, int first,
			       struct diagnosis *out)
{
	for (int k = -1; k < TW_PHASES; k++) {
		int i = k < 0 ? first : k;

		if ((k >= 0 && k == first) || i < 0 || !phase_up(s, w, i) ||
		    out->n_evidence >= DIAG_MAX_EVIDENCE)
			continue;
		out->evidence[out->n_evidence++] = (struct diag_evidence){
			.signal = phase_signal[i],
			.value = w->ph[i] / 1e3,
			.baseline = s->phase[i].base / 1e3,
			.ratio = w->ph_r[i],
		};
	}
}

/* Evidence order: the dominant resource's signals first, then by score. */
static bool before(const struct diag_state *s, const struct window *w, enum diag_dominant d,
		   size_t i, size_t j)
{
	bool mi = signals[i].class == d, mj = signals[j].class == d;

	return mi != mj ? mi : score(s, w, i) > score(s, w, j);
}

/*
 * Evidence: every elevated signal, the dominant resource's first (the
 * policy reads the first one), each group strongest first.
 */
static void add_evidence(const struct diag_state *s, const struct window *w, enum diag_dominant d,
			 struct diagnosis *out)
{
	size_t idx[N_SIGNALS], n = 0;

	for (size_t i = 0; i < N_SIGNALS; i++) {
		size_t j;

		if (signals[i].class == DIAG_NONE || score(s, w, i) <= 0)
			continue;
		for (j = n++; j > 0 && before(s, w, d, i, idx[j - 1]); j--)
			idx[j] = idx[j - 1];
		idx[j] = i;
	}
	for (size_t k = 0; k < n && out->n_evidence < DIAG_MAX_EVIDENCE; k++) {
		size_t i = idx[k];

		out->evidence[out->n_evidence++] = (struct diag_evidence){
			.signal = signals[i].name,
			.value = w->v[i],
			.baseline = s->sig[i].base,
			.ratio = w->r[i],
		};
	}
}

void diag_update(struct diag_state *s, const struct qos_sample *q,
		 const struct contention_sample *c, struct diagnosis *out)
{
	struct window w;

	memset(out, 0, sizeof(*out));
	out->dominant = DIAG_NONE;
	out->cause = DIAG_CAUSE_UNKNOWN;
	measure(s, q, c, &w);
	out->load_up = s->rate.up && !isnan(w.rate_r);
	/* Too few requests or no latency baseline yet: no verdict, say nothing. */
	if (w.busy && warm(&s->lat)) {
		int phase = -1;

		out->dominant = pick_dominant(s, &w);
		if (out->dominant == DIAG_NONE && s->lat.up)
			out->dominant = phase_dominant(s, &w, &phase);
		out->cause = cause_of(s, &w, out->dominant);
		out->cpu_up = own_cpu_ratio(&w) >= DIAG_LOAD_ENTER; /* false for NAN */
		/* Slow sending alone is the network or the peer: no neighbour's doing. */
		if (phase == TW_PHASE_SENDING && out->cause == DIAG_CAUSE_INTERFERENCE)
			out->cause = DIAG_CAUSE_UNKNOWN;
		/* The evidence names the phase where the time went, then the signals. */
		if (out->dominant != DIAG_NONE || out->cause == DIAG_CAUSE_LOAD)
			add_phase_evidence(s, &w, phase_of(out->dominant), out);
		if (out->dominant != DIAG_NONE)
			add_evidence(s, &w, out->dominant, out);
		s->last = out->dominant;
	}
	fold_window(s, &w);
}
