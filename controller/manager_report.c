// SPDX-License-Identifier: GPL-2.0
/*
 * The manager's report side: what `tailwarden status` and /metrics show,
 * filled from the manager's state by hooks of the tick (report.h), then
 * written to status.json (status.c) and rendered for /metrics (expo.c,
 * metrics.c) once per tick.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/decisions.h"
#include "controller/expo.h"
#include "knobs/iosched.h"
#include "knobs/knob.h"
#include "knobs/state.h"
#include "controller/manager.h"
#include "controller/metrics.h"
#include "controller/report.h"
#include "controller/status.h"

/* Copy, truncating where it must (the report's fields are bounded). */
static void hook_copy(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static struct report_service *hook_service(struct manager *m, const struct service_rt *s)
{
	return m->report ? report_service(m->report, s->sv.p->name) : NULL;
}

void manager_report_sample(struct manager *m, struct service_rt *s, const struct qos_sample *q,
			   const struct contention_sample *c)
{
	struct report_service *rs = hook_service(m, s);

	if (rs)
		report_sample(rs, q, c);
}

void manager_report_window(struct manager *m, struct service_rt *s)
{
	struct report_service *rs = hook_service(m, s);

	if (rs)
		if (!rs)
			return;
	report_window(rs, &s->sv.feed.window.latency, s->sv.feed.window.requests,
		      s->sv.feed.window.interval_s,
		      s->sv.p->klass == POLICY_LATENCY_CRITICAL ? s->sv.p->percentile : NAN);
	report_window_phases(rs, &s->sv.feed.window);
}

void manager_report_action(struct manager *m, struct service_rt *s, const struct action *a,
			   bool applied, int err)
{
	struct report_service *rs = hook_service(m, s);

	if (rs)
		report_action(m->report, rs, a, m->o.dry_run, applied, err);
}

static void hook_knobs(struct manager *m, struct service_rt *s, struct report_service *rs)
{
	for (int k = 0; k < KNOB_MAX; k++) {
		struct report_knob *kn = &rs->knobs[k];
		const struct policy_range *range = policy_range_of(s->sv.p, k);
		double v = NAN;

		if (k == KNOB_SCHED_SLICE && s->sv.cgid && manager_slice_used(m, s))
			v = s->sv.wrote[k] ? s->sv.written[k] : 0;
		else if (manager_unit_knob(s, k) && m->link.bus && s->sv.cgid)
			v = unit_raw_to_value(k, s->up.raw[k]);
		else if (!manager_unit_knob(s, k) && s->knobs &&
			 knob_available(s->knobs, k, NULL) && knob_read(s->knobs, k, &v))
			v = NAN;
		kn->shown = (range && range->set) || s->sv.wrote[k];
		kn->value = v;
		kn->overridden = s->sv.overridden[k];
		kn->ours = !m->o.dry_run && s->sv.wrote[k] && !s->sv.overridden[k];
		kn->ours_value = s->sv.wrote[k] ? s->sv.written[k] : NAN;
		if (!s->sv.wrote[k])
			kn->original = NAN;
	}
}

/* Everything the report shows of service i now. */
static void hook_service_state(struct manager *m, struct service_rt *s, int i)
{
	struct report_service *rs = hook_service(m, s);
	const char *v = engine_verdict(m->engine, i);

	if (!rs)
		return;
	rs->active = true;
	rs->latency_critical = s->sv.p->klass == POLICY_LATENCY_CRITICAL;
	if (s->sv.cgid != rs->cgroup_id && s->sv.cgid) /* a new instance: originals anew */
		for (int k = 0; k < KNOB_MAX; k++)
			rs->knobs[k].original = NAN;
	hook_copy(rs->cgroup, sizeof(rs->cgroup), s->cg);
	hook_copy(rs->unit, sizeof(rs->unit), s->sv.p->unit ? s->sv.p->unit : "");
	rs->cgroup_id = s->sv.cgid;
	rs->percentile = rs->latency_critical ? s->sv.p->percentile : NAN;
	rs->target_s = rs->latency_critical ? s->sv.p->target_ns / 1e9 : NAN;
	rs->slack = rs->latency_critical ? engine_slack(m->engine, i) : NAN;
	hook_copy(rs->verdict, sizeof(rs->verdict), v ? v : "");
	hook_copy(rs->absent, sizeof(rs->absent), s->sv.cgid ? "" : s->absent);
	hook_knobs(m, s, rs);
}

static void hook_tables(struct manager *m)
{
	struct report *r = m->report;

	r->have_contention = m->cont != NULL;
	r->maps[0].entries = m->prev ? sensor_snapshot_len(m->prev) : 0;
	r->maps[0].capacity = TW_MAX_CGROUPS;
	r->maps[1].entries = m->cprev ? contention_snapshot_len(m->cprev) : 0;
	r->maps[1].capacity = 4096;
}

/* Each reported disk's scheduler now, and what it was if we switched it. */
static void hook_disks(struct manager *m)
{
	struct report *r = m->report;

	for (size_t i = 0; i < r->n_disks; i++) {
		struct report_disk *d = &r->disks[i];
		const char *orig = m->state ? knob_state_iosched_original(m->state, d->dev) : NULL;
		struct iosched now;

		hook_copy(d->scheduler, sizeof(d->scheduler),
			  iosched_get(d->dev, &now) ? "" : now.current);
		hook_copy(d->original, sizeof(d->original), orig ? orig : "");
	}
}

void manager_report_drops(struct manager *m, const struct sensor_drops *d,
			  const struct contention_drops *cd, size_t freed)
{
	struct report *r = m->report;

	if (!r)
		return;
	r->drop_req_cgroups += d->cgroups;
	r->drop_req_conns += d->conns;
	r->drop_req_spans += d->spans_negative + d->spans_absurd;
	r->drop_cont_cgroups += cd->cgroups;
	r->drop_cont_stamps += cd->stamps;
	r->freed += freed;
}

void manager_report_publish(struct manager *m, uint64_t tick_start_usec)
{
	struct report *r = m->report;
	struct timespec ts;
	char *text;
	size_t len;
	int e;

	if (!r)
		return;
	report_begin(r);
	for (size_t i = 0; i < m->set->n; i++)
		hook_service_state(m, &m->svc[i], i);
	hook_tables(m);
	hook_disks(m);
	hook_copy(r->reload_error, sizeof(r->reload_error), m->reload_error);
	r->decision_log_lost = decisions_lost(m->decisions);
	snprintf(r->sensing_mode, sizeof(r->sensing_mode), "%s",
		 m->sensor ? sensor_mode_name(sensor_mode(m->sensor)) : "");
	if (m->sensor) {
		bool on[TW_PHASES];
		const char *why;

		sensor_phases(m->sensor, on, &why);
		memcpy(r->phase_seen, on, sizeof(r->phase_seen));
		snprintf(r->phases_unseen, sizeof(r->phases_unseen), "%s", why ? why : "");
	}
	if (tick_start_usec) {
		clock_gettime(CLOCK_REALTIME, &ts);
		r->last_tick = ts.tv_sec + ts.tv_nsec / 1e9;
		r->tick_duration_s = (manager_now_usec() - tick_start_usec) / 1e6;
		r->ticks = m->ticks;
	}
	e = status_write(r, m->cfg->state_dir);
	if (e && !m->status_failed)
		log_warning_errno(e,
				  "Failed to write %s/" STATUS_FILE
				  ": %m; 'tailwarden status' will not see this daemon, ignoring",
				  m->cfg->state_dir);
	m->status_failed = e != 0;
	if (m->metrics && !expo_render(r, TW_VERSION, &text, &len))
		metrics_publish(m->metrics, text, len);
}

int manager_report_open(struct manager *m)
{
	const char *why = NULL;
	int r;

	m->report = report_new(getpid(), m->o.dry_run, m->cfg->period_ns / 1e9);
	if (!m->report)
		return -ENOMEM;
	r = status_dir_prepare(m->cfg->state_dir, &why);
	if (r)
		return log_error_errno(r, "refusing to start: the state directory %s %s (%m)",
				       m->cfg->state_dir, why);
	if (!m->cfg->metrics)
		return 0;
	r = metrics_start(m->cfg->metrics, &m->metrics);
	if (r == -EADDRINUSE)
		log_error(
			"refusing to start: cannot serve metrics on %s: the address is in use (set Metrics= to another ADDRESS:PORT, or Metrics=no)",
			m->cfg->metrics);
	else if (r)
		log_error_errno(r, "refusing to start: cannot serve metrics on %s",
				m->cfg->metrics);
	else
		log_info("metrics on http://%s/metrics", m->cfg->metrics);
	return r;
}

void manager_report_close(struct manager *m)
{
	metrics_stop(m->metrics);
	m->metrics = NULL;
	if (m->report)
		status_remove(m->cfg->state_dir);
}
