// SPDX-License-Identifier: GPL-2.0
/* The daemon's report: kept by the control loop, read by status.c and expo.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "controller/report.h"

struct report *report_new(int pid, bool dry_run, double period_s)
{
	struct report *r = calloc(1, sizeof(*r));
	struct timespec ts;

	if (!r)
		return NULL;
	clock_gettime(CLOCK_REALTIME, &ts);
	r->pid = pid;
	r->dry_run = dry_run;
	r->period_s = period_s;
	r->started = ts.tv_sec + ts.tv_nsec / 1e9;
	r->maps[0].name = "request_cgroups";
	r->maps[1].name = "contention_cgroups";
	return r;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	free(r->svc);
	free(r);
}

static void service_init(struct report_service *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->percentile = s->target_s = NAN;
	s->p50_s = s->p99_s = s->pct_s = s->rps = s->slack = NAN;
	for (unsigned i = 0; i < TW_PHASES; i++)
		s->phase_p99_s[i] = NAN;
	s->c.psi_cpu = s->c.psi_io = s->c.psi_memory = NAN;
	for (int k = 0; k < KNOB_MAX; k++)
		s->knobs[k].value = s->knobs[k].original = s->knobs[k].ours_value = NAN;
}

struct report_service *report_service(struct report *r, const char *name)
{
	struct report_service *v;

	for (size_t i = 0; i < r->n_svc; i++)
		if (!strcmp(r->svc[i].name, name))
			return &r->svc[i];
	v = realloc(r->svc, (r->n_svc + 1) * sizeof(*v));
	if (!v)
		return NULL;
	r->svc = v;
	service_init(&v[r->n_svc], name);
	return &v[r->n_svc++];
}

void report_begin(struct report *r)
{
	for (size_t i = 0; i < r->n_svc; i++)
		r->svc[i].active = false;
}

static void add(double *acc, double v)
{
	if (isfinite(v) && v > 0)
		*acc += v;
}

void report_sample(struct report_service *s, const struct qos_sample *q,
		   const struct contention_sample *c)
{
	s->c.requests += q->requests;
	hist_merge(&s->c.latency, &q->latency);
	for (unsigned i = 0; i < TW_PHASES; i++)
		if (q->phase_on[i])
			hist_merge(&s->c.phase[i], &q->phase[i]);
	if (!c)
		return;
	s->c.contention = true;
	add(&s->c.runq_s, c->runq_delay_s);
	add(&s->c.cpu_usage_s, c->cpu_usage_s);
	add(&s->c.cpu_throttled_s, c->cpu_throttled_s);
	add(&s->c.io_read_bytes, c->io_read_bytes);
	add(&s->c.io_write_bytes, c->io_write_bytes);
	add(&s->c.futex_wait_s, c->futex_wait_s);
	add(&s->c.lock_contention_s, c->lock_contention_s);
	add(&s->c.page_faults, c->page_faults);
	add(&s->c.reclaim_s, c->reclaim_s);
	add(&s->c.tcp_retransmits, c->tcp_retransmits);
	if (c->tcp_on) {
		if (!s->c.tcp)
			s->c.tcp_timeouts = isnan(c->tcp.timeouts) ? NAN : 0;
		s->c.tcp = true;
		add(&s->c.tcp_retrans_segs, c->tcp.retrans_segs);
		add(&s->c.tcp_fast_retrans_segs, c->tcp.fast_retrans_segs);
		add(&s->c.tcp_timeouts, c->tcp.timeouts);
		add(&s->c.tcp_bytes_acked, c->tcp.bytes_acked);
		add(&s->c.tcp_bytes_received, c->tcp.bytes_received);
		s->c.tcp_now = c->tcp;
	}
	s->c.psi_cpu = c->psi_cpu_some;
	s->c.psi_io = c->psi_io_some;
	s->c.psi_memory = c->psi_memory_some;
}

static double pct_s(const struct hist *h, double q)
{
	double ns = hist_percentile(h, q);

	return ns < 0 ? NAN : ns / 1e9;
}

void report_window(struct report_service *s, const struct hist *h, uint64_t requests,
		   double interval_s, double percentile)
{
	s->p50_s = pct_s(h, 0.5);
	s->p99_s = pct_s(h, 0.99);
	s->pct_s = isfinite(percentile) ? pct_s(h, percentile) : NAN;
	s->rps = interval_s > 0 ? requests / interval_s : NAN;
}

void report_window_phases(struct report_service *s, const struct qos_sample *window)
{
	for (unsigned i = 0; i < TW_PHASES; i++)
		s->phase_p99_s[i] = window->phase_on[i] ? pct_s(&window->phase[i], 0.99) : NAN;
}

void report_action(struct report *r, struct report_service *s, const struct action *a, bool dry_run,
		   bool applied, int err)
{
	struct report_action *l = &r->last[r->next];
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	memset(l, 0, sizeof(*l));
	l->ts = ts.tv_sec + ts.tv_nsec / 1e9;
	snprintf(l->service, sizeof(l->service), "%s", s->name);
	snprintf(l->knob, sizeof(l->knob), "%s", action_knob_name(a->knob));
	l->old_value = a->old_value;
	l->new_value = a->new_value;
	snprintf(l->reason, sizeof(l->reason), "%s", a->reason);
	l->dry_run = dry_run;
	l->applied = applied;
	if (err)
		snprintf(l->error, sizeof(l->error), "%s", strerror(-err));
	r->next = (r->next + 1) % REPORT_LAST_ACTIONS;
	if (r->n_last < REPORT_LAST_ACTIONS)
		r->n_last++;
	if ((int)a->knob >= 0 && a->knob < KNOB_MAX) {
		s->knobs[a->knob].actions++;
		/* The value before the daemon's first change (or would-be change). */
		if ((applied || dry_run) && isnan(s->knobs[a->knob].original))
			s->knobs[a->knob].original = a->old_value;
	}
}

const struct report_action *report_last(const struct report *r, size_t i)
{
	size_t first = (r->next + REPORT_LAST_ACTIONS - r->n_last) % REPORT_LAST_ACTIONS;

	return &r->last[(first + i) % REPORT_LAST_ACTIONS];
}

uint64_t report_fold(const struct hist *h, const double *le_ns, size_t n, uint64_t *cum)
{
	uint64_t total = 0;
	size_t i = 0;

	memset(cum, 0, n * sizeof(*cum));
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		double upper = (double)hist_lower(b) + (double)hist_width(b);

		total += h->count[b];
		if (b == HIST_BUCKETS - 1)
			break; /* overflow: everything above, only under +Inf */
		while (i < n && le_ns[i] < upper)
			i++;
		if (i < n)
			cum[i] += h->count[b];
	}
	for (i = 1; i < n; i++)
		cum[i] += cum[i - 1];
	return total;
}

double report_hist_sum_s(const struct hist *h)
{
	double sum = 0;

	for (unsigned b = 0; b < HIST_BUCKETS; b++)
		if (h->count[b])
			sum += h->count[b] * hist_mid(b);
	return sum / 1e9;
}
