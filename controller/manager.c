// SPDX-License-Identifier: GPL-2.0
/*
 * tailwarden run: the control loop. Each tick (Period=) reads the request
 * sensor and the contention sensor once, folds the tick into each
 * service's window, and when a window is complete asks the engine what to
 * change. Every decision is logged in words and in the decision log; in
 * dry-run nothing is written, but the engine is shown the values it would
 * have set, so its decisions are the same as in a real run.
 *
 * Here: the state (manager.h), the event sources and the tick. A
 * service's life is service.c's, the report side (status.json, /metrics)
 * manager_report.c's, the disks' I/O schedulers iosched_setup()'s and the
 * connection to systemd unit_link's (unit.c); each says what happened
 * and this file logs it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <json-c/json.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "controller/decisions.h"
#include "controller/feed.h"
#include "knobs/knob.h"
#include "knobs/slice.h"
#include "knobs/iosched.h"
#include "knobs/state.h"
#include "controller/manager.h"
#include "controller/metrics.h"
#include "controller/report.h"
#include "controller/sensors.h"
#include "controller/service.h"
#include "knobs/unit.h"
#include "policies/action.h"
#include "policies/engine.h"
#include "sensing/cgroup.h"
#include "sensing/diagnosis.h"
#include "sensing/reap.h"
#include "sensing/sensor.h"

/* Sensor drops are logged at most this often (they come in bursts). */
#define DROPS_LOG_USEC (60 * 1000000ULL)
/* A verdict that persists is said again this often. */
#define VERDICT_REMIND_USEC (60 * 1000000ULL)
/* A lost or missing bus is tried again this often. */
#define BUS_RETRY_USEC (5 * 1000000ULL)

static void appear_unwatch(struct service_rt *s)
{
	for (size_t j = 0; j < sizeof(s->appear) / sizeof(*s->appear); j++) {
		s->appear[j].src = sd_event_source_unref(s->appear[j].src);
		s->appear[j].dir[0] = '\0';
		s->appear[j].gone = false;
	}
}

static void services_free(struct manager *m)
{
	for (size_t i = 0; m->svc && i < m->set->n; i++) {
		appear_unwatch(&m->svc[i]);
		knobs_free(m->svc[i].knobs);
		service_done(&m->svc[i].sv);
	}
	free(m->svc);
	m->svc = NULL;
	free(m->in);
	m->in = NULL;
	free(m->acts);
	m->acts = NULL;
	free(m->watch_ids);
	m->watch_ids = NULL;
}

static bool any_unit(const struct manager *m)
{
	for (size_t i = 0; i < m->set->n; i++)
		if (m->set->v[i].unit)
			return true;
	return false;
}

/* Connect to systemd for Unit= policies; without it they wait, the rest run. */
static void bus_connect(struct manager *m, uint64_t now_usec)
{
	bool first = !m->link.retry_usec;
	int r;

	if (!any_unit(m))
		return;
	r = unit_link_connect(&m->link, m->cfg->bus, now_usec, BUS_RETRY_USEC);
	if (r < 0 && first)
		log_error("Unit= policies cannot be followed: %s; policies with Cgroup= still run",
			  m->link.why);
	else if (r > 0)
		log_info("Unit= policies follow systemd on the %s (%s)", unit_bus_name(m->link.bus),
			 unit_bus_address(m->link.bus));
}

/*
 * Where the service's cgroup is now: 0 with rel and id, -ENOENT (no such
 * cgroup, or no such unit loaded), -ESRCH (the unit is not running),
 * -ENOTCONN (no bus), -errno.
 */
static int locate(struct manager *m, struct service_rt *s, char *rel, uint64_t *id)
{
	const char *path = s->sv.p->cgroup;
	int r;

	if (s->sv.p->unit) {
		bool had = m->link.bus;

		r = unit_link_get(&m->link, s->sv.p->unit, &s->up);
		if (r == -ENOTCONN && had)
			log_warning("%s; trying again every %llu s", m->link.why,
				    BUS_RETRY_USEC / 1000000ULL);
		if (r)
			return r;
		if (!*s->up.cgroup)
			return -ESRCH;
		path = s->up.cgroup;
	}
	return cg_resolve(m->cfg->cgroup_base, m->root, path, rel, PATH_MAX, id);
}

/* Stop controlling a service whose cgroup is gone: say so once, hold. */
static void service_absent(struct manager *m, struct service_rt *s, int err)
{
	const char *name = s->sv.p->unit ? s->sv.p->unit : s->sv.p->cgroup;
	char msg[sizeof(s->absent)];
	int level = LOG_WARNING;

	if (err == -ENOTCONN) {
		snprintf(msg, sizeof(msg), "Unit=%s cannot be followed: %s; not controlled", name,
			 *m->link.why ? m->link.why : "no bus");
		level = LOG_ERR;
	} else if (s->sv.p->unit && err == -ENOENT) {
		snprintf(msg, sizeof(msg), "unit %s is not loaded; waiting for it", name);
	} else if (err == -ESRCH) {
		snprintf(msg, sizeof(msg), "unit %s is not running (%s); waiting for it", name,
			 *s->up.active ? s->up.active : "inactive");
	} else if (err == -ENOENT) {
		snprintf(msg, sizeof(msg), "cgroup %s does not exist; waiting for it", name);
	} else {
		snprintf(msg, sizeof(msg), "cannot find the cgroup of %s: %s; waiting", name,
			 strerror(-err));
	}
	if (service_gone(&s->sv)) {
		/* No writes while it is gone: its knobs go with it. */
		knobs_free(s->knobs);
		s->knobs = NULL;
		snprintf(s->absent, sizeof(s->absent), "%s", msg);
		log_full(level == LOG_ERR ? level : LOG_NOTICE,
			 "service %s: %s (it was %s, id %llu; holding)", s->sv.p->name, msg, s->cg,
			 (unsigned long long)s->sv.last_cgid);
		return;
	}
	if (!strcmp(msg, s->absent))
		return;
	snprintf(s->absent, sizeof(s->absent), "%s", msg);
	log_full(level, "service %s: %s", s->sv.p->name, msg);
}

/*
 * The service's cgroup was replaced by a new one (a restart, a recreated
 * cgroup): a new instance, which service_found() has started afresh (the
 * window, what we wrote, the engine's memory). What the state file
 * recorded about the old one is renewed (a unit's runtime properties,
 * which outlive a restart, are set back first; old_cg is the old
 * instance's cgroup) and the knobs' originals are recorded anew at the
 * next write.
 */
static void service_renew(struct manager *m, struct service_rt *s, const char *old_cg,
			  uint64_t old_id, const char *rel, uint64_t id, int reset)
{
	int r = 0;

	if (m->state)
		r = knob_state_renew(m->state, m->cfg->cgroup_base, old_cg, s->sv.p->unit);
	if (r < 0)
		log_warning_errno(
			r, "service %s: Failed to put back the old instance's knobs: %m, ignoring",
			s->sv.p->name);
	memset(s->fail, 0, sizeof(s->fail));
	memset(s->ctl, 0, sizeof(s->ctl));
	memset(s->unavail_said, 0, sizeof(s->unavail_said));
	s->no_idle_said = false;
	s->verdict[0] = '\0';
	if (reset < 0)
		log_warning("service %s: out of memory for its diagnosis, ignoring", s->sv.p->name);
	/* A unit's properties may just have been set back: read them again. */
	if (s->sv.p->unit && m->link.bus)
		unit_get(m->link.bus, s->sv.p->unit, &s->up);
	log_notice(
		"service %s: %s%s%s is a new cgroup (id %llu, was %llu): controlled afresh, originals recorded anew",
		s->sv.p->name, s->sv.p->unit ? s->sv.p->unit : "", s->sv.p->unit ? " -> " : "", rel,
		(unsigned long long)id, (unsigned long long)old_id);
}

/* Open the knobs of the service's cgroup again: a controller came or went. */
static void service_reopen(struct manager *m, struct service_rt *s)
{
	struct knobs *k;
	int r = knobs_open(m->cfg->cgroup_base, s->cg, &k);

	s->reopen = false;
	if (r) { /* gone, most likely: the next locate() says so */
		log_debug_errno(r, "service %s: Failed to open the knobs of %s again: %m",
				s->sv.p->name, s->cg);
		return;
	}
	knobs_free(s->knobs);
	s->knobs = k;
}

/*
 * Each tick: find the service's cgroup again (a stat of its cgroup2
 * directory; for a unit, its ControlGroup first). It may appear after we
 * start, vanish, and come back as a new cgroup with a new id.
 */
static void service_resolve(struct manager *m, struct service_rt *s)
{
	char rel[PATH_MAX], msg[sizeof(s->absent)], old_cg[sizeof(s->cg)];
	uint64_t id, old;
	int r;

	r = locate(m, s, rel, &id);
	if (r) {
		service_absent(m, s, r);
		return;
	}
	if (s->knobs && id == s->sv.cgid && !strcmp(rel, s->cg)) {
		if (s->reopen)
			service_reopen(m, s);
		return;
	}
	knobs_free(s->knobs);
	s->knobs = NULL;
	r = knobs_open(m->cfg->cgroup_base, rel, &s->knobs);
	if (r) {
		snprintf(msg, sizeof(msg), "cannot open the knobs of %s: %s; ignoring until it can",
			 rel, strerror(-r));
		if (strcmp(msg, s->absent))
			log_warning("service %s: %s", s->sv.p->name, msg);
		snprintf(s->absent, sizeof(s->absent), "%s", msg);
		s->knobs = NULL;
		return;
	}
	snprintf(old_cg, sizeof(old_cg), "%s", s->cg);
	snprintf(s->cg, sizeof(s->cg), "%s", rel);
	r = service_found(&s->sv, m->engine, id, &old);
	if (r)
		service_renew(m, s, old_cg, old, rel, id, r);
	else
		log_info("service %s: %s%scgroup %s (id %llu)", s->sv.p->name,
			 s->sv.p->unit ? s->sv.p->unit : "", s->sv.p->unit ? " -> " : "", rel,
			 (unsigned long long)id);
	s->absent[0] = '\0';
}

static int services_new(struct manager *m)
{
	/* The tick's scratch, here and not on its stack: it grows with the set. */
	m->nacts = m->set->n * KNOB_MAX + 1;
	m->svc = calloc(m->set->n ? m->set->n : 1, sizeof(*m->svc));
	m->in = calloc(m->set->n ? m->set->n : 1, sizeof(*m->in));
	m->acts = calloc(m->nacts, sizeof(*m->acts));
	m->watch_ids = calloc(m->set->n ? m->set->n : 1, sizeof(*m->watch_ids));
	if (!m->svc || !m->in || !m->acts || !m->watch_ids)
		return -ENOMEM;
	for (size_t i = 0; i < m->set->n; i++) {
		struct service_rt *s = &m->svc[i];

		s->m = m;
		if (service_init(&s->sv, &m->set->v[i], i, m->cfg->period_ns))
			return -ENOMEM;
		service_resolve(m, s);
	}
	return 0;
}

static int load_policies(struct manager *m, struct policy_set **out)
{
	struct policy_errors errs = { 0 };
	int r;

	r = policy_set_load(m->o.policy_paths, m->o.n_policy_paths, out, &errs);
	if (r == -EINVAL) {
		daemon_log_errors(&errs);
		if (errs.n)
			snprintf(m->reload_error, sizeof(m->reload_error), "%s:%u: %s%s",
				 errs.v[0].file, errs.v[0].line, errs.v[0].msg,
				 errs.n > 1 ? " (and more)" : "");
	}
	policy_errors_clear(&errs);
	return r;
}

/* One line per decision, applied or not, in the decision log. */
static void decision_log(struct manager *m, const struct service_rt *s, const struct action *a,
			 bool applied, int err)
{
	struct json_object *o;
	struct timespec ts;
	char buf[32];

	if (!m->decisions)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	o = json_object_new_object();
	if (!o)
		return;
	snprintf(buf, sizeof(buf), "%.3f", ts.tv_sec + ts.tv_nsec / 1e9);
	json_object_object_add(o, "ts", json_object_new_double_s(atof(buf), buf));
	json_object_object_add(o, "service", json_object_new_string(s->sv.p->name));
	json_object_object_add(o, "cgroup", json_object_new_string(s->cg));
	if (s->sv.p->unit)
		json_object_object_add(o, "unit", json_object_new_string(s->sv.p->unit));
	json_object_object_add(o, "knob", json_object_new_string(action_knob_name(a->knob)));
	json_object_object_add(o, "old",
			       isfinite(a->old_value) ? json_object_new_double(a->old_value) :
							json_object_new_string("max"));
	json_object_object_add(o, "new",
			       isfinite(a->new_value) ? json_object_new_double(a->new_value) :
							json_object_new_string("max"));
	json_object_object_add(o, "reason", json_object_new_string(a->reason));
	json_object_object_add(o, "dry_run", json_object_new_boolean(m->o.dry_run));
	json_object_object_add(o, "applied", json_object_new_boolean(applied));
	json_object_object_add(o, "error", err ? json_object_new_string(strerror(-err)) : NULL);
	decisions_write(m->decisions, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			manager_now_usec());
	json_object_put(o);
}

/*
 * Slice=: probed once, when a policy first asks for it. Without kernel
 * support one line says so and every other knob still runs.
 */
static void slice_check(struct manager *m)
{
	const char *why = NULL;
	bool want = false;
	int r;

	for (size_t i = 0; i < m->set->n; i++)
		want |= m->set->v[i].slice_ns.set;
	if (!want || m->slice_ok)
		return;
	r = knob_slice_probe(&m->slice_default_ns, &why);
	m->slice_ok = r ? -1 : 1;
	if (r)
		log_error("Slice= cannot act: %s; policies run without it", why);
	else
		log_info("Slice= can act: custom EEVDF slices work (default slice %.3g ms)",
			 m->slice_default_ns / 1e6);
}

/* What service s's knob k belongs to, for the knobs layer. */
static struct knob_target target_of(struct manager *m, struct service_rt *s, enum action_knob k,
				    struct slice_tally *tally)
{
	bool unit = manager_unit_knob(s, k);

	return (struct knob_target){
		.cgroup_base = m->cfg->cgroup_base,
		.cgroup = s->cg,
		.files = s->knobs,
		.bus = unit ? m->link.bus : NULL,
		.unit = unit ? s->sv.p->unit : NULL,
		.props = unit && m->link.bus ? &s->up : NULL,
		.root = m->root,
		.slice_default_ns = m->slice_default_ns,
		.tally = tally,
	};
}

/* What a Slice= write did with the service's threads, when there is something to say. */
static void slice_said(struct service_rt *s, const struct slice_tally *t)
{
	if (t->capped && !s->slice_capped)
		log_warning("service %s: more than %d threads in %s; only the first %d get Slice=",
			    s->sv.p->name, KNOB_SLICE_MAX_THREADS, t->file, KNOB_SLICE_MAX_THREADS);
	s->slice_capped |= t->capped;
	if (t->changed)
		log_warning(
			"sched.slice of %s: %u thread(s) had their slice changed by someone else; leaving them alone",
			s->cg, t->changed);
	if (t->set)
		log_debug(
			"sched.slice of %s: %u thread(s) given the slice, %u had it, %u not SCHED_OTHER/SCHED_BATCH",
			s->cg, t->set, t->kept, t->not_fair);
}

/* Record the original, then write, whatever the backend. 0 or -errno; path names what it changed. */
static int write_knob(struct manager *m, struct service_rt *s, enum action_knob k, double old_value,
		      double new_value, char *path, size_t len)
{
	struct slice_tally tally = { 0 };
	struct knob_target t = target_of(m, s, k, &tally);
	int r;

	knob_target_name(&t, k, path, len);
	if (t.unit && !t.bus)
		return -ENOTCONN;
	r = knob_state_set(m->state, &t, k, old_value, new_value);
	if (k == KNOB_SCHED_SLICE)
		slice_said(s, &tally);
	if (!r && t.unit)
		s->up.raw[k] = unit_value_to_raw(k, new_value);
	return r;
}

/*
 * A knob write that keeps failing is said on the first failure, then on
 * the 2nd, 4th, 8th... in a row (the engine tries again every window),
 * and at once when the error changes.
 */
static void knob_failed(struct service_rt *s, enum action_knob k, int err, const char *path,
			const char *value)
{
	struct knob_fail *f = &s->fail[k];

	/* The slice's path names the cgroup already ("... of the threads of CG"). */
	const char *of = k == KNOB_SCHED_SLICE ? "" : " of ",
		   *cg = k == KNOB_SCHED_SLICE ? "" : s->cg;

	f->n++;
	if (f->n == 1 || err != f->err)
		log_warning_errno(err, "Failed to set %s%s%s to %s: %m, ignoring", path, of, cg,
				  value);
	else if (!(f->n & (f->n - 1)))
		log_warning_errno(err,
				  "Failed to set %s%s%s to %s: %m (%u times in a row), ignoring",
				  path, of, cg, value, f->n);
	f->err = err;
}

/* Said once, when a knob that failed is written again. */
static void knob_recovered(struct service_rt *s, enum action_knob k, const char *path)
{
	struct knob_fail *f = &s->fail[k];

	if (f->n)
		log_notice("%s of %s: written again after %u failure(s)", path, s->cg, f->n);
	f->n = 0;
	f->err = 0;
}

static void apply(struct manager *m, const struct action *a)
{
	struct service_rt *s = &m->svc[a->service];
	char o[32], n[32], path[PATH_MAX + 64];
	int r = 0;

	action_format_value(o, sizeof(o), a->knob, a->old_value, 0);
	action_format_value(n, sizeof(n), a->knob, a->new_value, 0);
	m->n_decisions++;
	if (m->o.dry_run) {
		log_notice("dry-run: would set %s of %s: %s -> %s (%s)", action_knob_name(a->knob),
			   s->sv.p->unit ? s->sv.p->unit : s->cg, o, n, a->reason);
	} else {
		r = write_knob(m, s, a->knob, a->old_value, a->new_value, path, sizeof(path));
		if (r) {
			m->n_failed++;
			knob_failed(s, a->knob, r, path, n);
		} else {
			m->n_applied++;
			knob_recovered(s, a->knob, path);
			log_notice("%s: %s -> %s (%s)", path, o, n, a->reason);
		}
	}
	if (!r) {
		/* As the property holds it, so that reading it back compares equal. */
		service_wrote(&s->sv, a->knob,
			      manager_unit_knob(s, a->knob) ?
				      unit_raw_to_value(a->knob,
							unit_value_to_raw(a->knob, a->new_value)) :
				      a->new_value);
	}
	decision_log(m, s, a, !m->o.dry_run && !r, r);
	manager_report_action(m, s, a, !m->o.dry_run && !r, r); /* status and metrics */
}

/*
 * The knob values the engine starts from (service_knob()). A knob that
 * differs from what we last wrote was changed by someone else: hands off,
 * and reported.
 */
static void read_knobs(struct manager *m, struct service_rt *s, double *knob)
{
	for (int k = 0; k < KNOB_MAX; k++) {
		struct knob_target t = target_of(m, s, k, NULL);
		double v;
		int r;

		knob[k] = NAN;
		if (!s->knobs || s->sv.overridden[k])
			continue;
		if (k == KNOB_SCHED_SLICE) {
			/* What we set, or the threads' own (0); a thread changed by someone else is left alone on its own. */
			if (manager_slice_used(m, s))
				knob[k] = s->sv.wrote[k] ? s->sv.written[k] : 0;
			continue;
		}
		r = knob_target_read(&t, k, &v);
		if (r && r != -EOPNOTSUPP && r != -ENOTCONN)
			s->reopen =
				true; /* the file went with its controller, or the cgroup went: look again */
		if (r)
			continue;
		if (!service_knob(&s->sv, m->engine, k, v, m->o.dry_run, &knob[k]))
			continue;
		log_warning(
			"%s of %s was changed by someone else (we set %g, now %g); leaving it alone",
			action_knob_name(k), s->sv.p->unit ? s->sv.p->unit : s->cg,
			s->sv.written[k], v);
		knob_state_forget(m->state, &t, k);
	}
}

/* The cgroupfs knobs a policy may change, by the cgroup v2 controller they need. */
static const struct {
	const char *ctrl;
	enum action_knob k[2];
	size_t n;
} controllers[] = {
	{ "cpu", { KNOB_CPU_QUOTA, KNOB_CPU_WEIGHT }, 2 },
	{ "io", { KNOB_IO_WEIGHT }, 1 },
};

static bool limited(const struct service_rt *s, enum action_knob k)
{
	const struct policy *p = s->sv.p;

	if (manager_unit_knob(s, k)) /* systemd enables what a unit's properties need */
		return false;
	return (k == KNOB_CPU_QUOTA && p->cpu_quota.set) ||
	       (k == KNOB_CPU_WEIGHT && p->cpu_weight.set) ||
	       (k == KNOB_IO_WEIGHT && p->io_weight.set);
}

/* Why the knobs of a controller cannot act, said when it changes. */
static void ctl_say(struct service_rt *s, size_t i, int level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void ctl_say(struct service_rt *s, size_t i, int level, const char *fmt, ...)
{
	char msg[sizeof(s->ctl[i].said)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!strcmp(msg, s->ctl[i].said))
		return;
	snprintf(s->ctl[i].said, sizeof(s->ctl[i].said), "%s", msg);
	log_full(level, "service %s: %s", s->sv.p->name, msg);
}

/* Each cgroup.subtree_control written, with the reason (userdata). */
static void enabled_line(void *userdata, const char *line)
{
	log_notice("%s (%s)", line, (const char *)userdata);
}

/*
 * A Cgroup= policy's knobs whose cgroup v2 controller is not enabled for
 * its cgroup (systemd enables cpu only below units with a CPU property):
 * enable it from the nearest ancestor that lacks it down to the parent,
 * each change recorded and undone on exit (knob_state_enable_controller());
 * or say why not (the root lacks it, processes in the way). One we enabled
 * that someone disabled since (systemd setting a slice's controllers
 * anew) is theirs: said, not enabled again. Knobs that cannot act for
 * another reason are said once.
 */
static void controllers_ensure(struct manager *m, struct service_rt *s)
{
	char names[64], reason[PATH_MAX + 256], why[1024], from[PATH_MAX];
	const char *base = m->cfg->cgroup_base, *w;
	int r;

	for (size_t i = 0; i < sizeof(controllers) / sizeof(*controllers); i++) {
		const char *ctrl = controllers[i].ctrl;
		bool missing = false;
		size_t n = 0;

		names[0] = '\0';
		for (size_t j = 0; j < controllers[i].n; j++) {
			enum action_knob k = controllers[i].k[j];

			if (!limited(s, k))
				continue;
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 n++ ? " and " : "", action_knob_name(k));
			missing |= knob_missing_controller(s->knobs, k) != NULL;
		}
		if (!missing)
			continue;
		if (s->ctl[i].enabled) {
			ctl_say(s, i, LOG_WARNING,
				"the %s controller we enabled for %s was disabled since by someone else (systemd sets a slice's controllers anew when a unit's needs change); %s cannot act, and it is not enabled again (with Unit= systemd keeps it)",
				ctrl, s->cg, names);
			continue;
		}
		snprintf(reason, sizeof(reason),
			 "%s of %s need%s the %s controller, not enabled for it; policy %s", names,
			 s->cg, n > 1 ? "" : "s", ctrl, s->sv.p->name);
		if (m->o.dry_run) {
			r = knob_subtree_plan(base, s->cg, ctrl, from, sizeof(from), why,
					      sizeof(why));
			if (!r && *from)
				ctl_say(s, i, LOG_NOTICE,
					"dry-run: would enable the %s controller in cgroup.subtree_control of %s and each cgroup below it down to the parent of %s (%s); %s cannot act meanwhile",
					ctrl, from, s->cg, reason, names);
			else if (r && r != -ENOENT)
				ctl_say(s, i, LOG_ERR, "%s of %s cannot act: %s", names, s->cg,
					*why ? why : strerror(-r));
			continue;
		}
		r = knob_state_enable_controller(m->state, base, s->cg, ctrl, enabled_line, reason,
						 why, sizeof(why));
		if (r == -ENOENT)
			continue; /* gone: the next locate() says so */
		if (r) {
			ctl_say(s, i, LOG_ERR, "%s of %s cannot act: %s", names, s->cg,
				*why ? why : strerror(-r));
			continue;
		}
		s->ctl[i].enabled = true;
		s->ctl[i].said[0] = '\0';
		service_reopen(m, s);
		if (!s->knobs)
			return;
	}
	for (int k = 0; k < KNOB_MAX; k++) {
		if (!limited(s, k) || s->unavail_said[k] || knob_available(s->knobs, k, &w) ||
		    knob_missing_controller(s->knobs, k))
			continue;
		log_warning("service %s: %s of %s cannot act: %s; its other knobs still act",
			    s->sv.p->name, action_knob_name(k), s->cg, w);
		s->unavail_said[k] = true;
	}
}

/*
 * A CPU weight range that reaches "idle" on a cgroup without cpu.idle
 * (Linux before 5.15): its floor is 1 there (engine_input.no_idle), said
 * once. A unit's CPUWeight=idle is systemd's to set.
 */
static bool no_idle(struct service_rt *s)
{
	const struct policy_range *r = &s->sv.p->cpu_weight;

	if (!r->set || r->lo >= 1 || !s->knobs || manager_unit_knob(s, KNOB_CPU_WEIGHT) ||
	    !knob_available(s->knobs, KNOB_CPU_WEIGHT, NULL) || knob_weight_can_idle(s->knobs))
		return false;
	if (!s->no_idle_said)
		log_warning(
			"service %s: CPUWeight=idle needs cpu.idle (Linux 5.15+), which %s does not have: its CPU weight stops at 1",
			s->sv.p->name, s->cg);
	s->no_idle_said = true;
	return true;
}

/*
 * Hand the request sensor the cgroups of the services found, after each
 * tick's lookups: a connection opened in a service's cgroup before it was
 * listed (a restarted unit's first clients) is followed from its next
 * event. A full table (more cgroups than it holds) keeps the last list.
 */
static void watch_services(struct manager *m)
{
	uint64_t *ids = m->watch_ids;
	int r;

	for (size_t i = 0; i < m->set->n; i++)
		ids[i] = m->svc[i].sv.cgid;
	r = sensor_watch(m->sensor, ids, m->set->n);
	if (r && !m->watch_failed)
		log_warning_errno(
			r,
			"Failed to list the services' cgroups for the request sensor (%m), keeping the last list");
	m->watch_failed = r != 0;
}

/*
 * Find the service's cgroup again and read its knobs: what the engine
 * starts from, at a tick or when its cgroup appears between ticks.
 */
static void service_look(struct manager *m, struct service_rt *s, struct engine_input *in)
{
	service_input_init(in);
	service_resolve(m, s);
	if (s->sv.cgid && s->knobs)
		controllers_ensure(m, s);
	read_knobs(m, s, in->knob);
	in->no_idle = no_idle(s);
}

/*
 * Weights=floor and a restart. A best-effort service restarted into a new
 * cgroup (a unit's restart, a cgroup made again) starts at its home
 * weight, and the tick that finds it comes up to a period later: its
 * first burst runs beside a latency-critical service that serves, which
 * costs that service its window. So the directory its cgroup lives in is
 * watched (inotify; on a v1/hybrid host the cpu hierarchy's too, where
 * its weight is), and when a directory of its name appears there, the
 * service is found and held at its floor at once, before what starts in
 * it has run much (a unit's processes start after its cgroup is made).
 */

/* The directories its cgroup appears in: [0] cgroup2's, [1] v1 cpu's ("": none). */
static void appear_dirs(const struct manager *m, const struct service_rt *s,
			char dirs[2][2 * PATH_MAX])
{
	const char *slash = strrchr(s->cg, '/');
	int parent = slash ? (int)(slash - s->cg) : 0;

	snprintf(dirs[0], 2 * PATH_MAX, "%s%.*s", m->root, parent, s->cg);
	dirs[1][0] = '\0';
	/* A hybrid host: the cgroup2 tree is beside the v1 hierarchies (base/unified). */
	if (strcmp(m->root, m->cfg->cgroup_base))
		snprintf(dirs[1], 2 * PATH_MAX, "%s/cpu%.*s", m->cfg->cgroup_base, parent, s->cg);
}

/* Every directory of the service's cgroup is there (a v1 one may come after cgroup2's). */
static bool appear_complete(const struct manager *m, const struct service_rt *s)
{
	char dirs[2][2 * PATH_MAX], path[3 * PATH_MAX];
	const char *name = strrchr(s->cg, '/');

	appear_dirs(m, s, dirs);
	for (size_t j = 0; j < 2; j++) {
		if (!*dirs[j])
			continue;
		if (snprintf(path, sizeof(path), "%s%s", dirs[j], name ? name : "") >=
			    (int)sizeof(path) ||
		    access(path, F_OK))
			return false;
	}
	return true;
}

/* Its cgroup appeared between ticks: found, and at its floor now if its tick would put it there. */
static void service_appeared(struct manager *m, struct service_rt *s)
{
	struct engine_input in;
	uint64_t usec;
	int n;

	if (!appear_complete(m, s))
		return;
	s->reopen = true; /* the same cgroup: a hierarchy's directory came back */
	service_look(m, s, &in);
	if (!s->sv.cgid || !s->knobs)
		return;
	sd_event_now(m->event, CLOCK_MONOTONIC, &usec);
	n = engine_service_appeared(m->engine, usec * 1000, (int)(s - m->svc), &in, m->acts,
				    m->nacts);
	if (n < 0)
		log_error_errno(n, "service %s: Failed to decide on its new cgroup (%m), ignoring",
				s->sv.p->name);
	for (int i = 0; i < n; i++)
		apply(m, &m->acts[i]);
}

static int on_appear(sd_event_source *src, const struct inotify_event *ev, void *userdata)
{
	struct service_rt *s = userdata;
	const char *name = strrchr(s->cg, '/');

	if (ev->mask & IN_IGNORED) {
		/* The directory went: the next tick watches it again once it is back. */
		for (size_t j = 0; j < 2; j++)
			if (s->appear[j].src == src)
				s->appear[j].gone = true;
		return 0;
	}
	if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR) && ev->len && name &&
	    !strcmp(ev->name, name + 1))
		service_appeared(s->m, s);
	return 0;
}

/* Each tick, after the lookup: watch where a Weights=floor service's cgroup appears. */
static void appear_watch(struct manager *m, struct service_rt *s)
{
	char dirs[2][2 * PATH_MAX];

	if (!m->event || !s->sv.p->weights_floor || !*s->cg) {
		appear_unwatch(s);
		return;
	}
	appear_dirs(m, s, dirs);
	for (size_t j = 0; j < 2; j++) {
		struct appear_watch *w = &s->appear[j];
		int r;

		if (!strcmp(dirs[j], w->dir) && !w->gone && (w->src || !*dirs[j]))
			continue;
		w->src = sd_event_source_unref(w->src);
		w->dir[0] = '\0';
		w->gone = false;
		if (!*dirs[j])
			continue;
		r = sd_event_add_inotify(m->event, &w->src, dirs[j],
					 IN_CREATE | IN_MOVED_TO | IN_ONLYDIR, on_appear, s);
		if (r < 0) {
			/* Tried again next tick; the tick still finds the cgroup, a period later. */
			if (!w->said)
				log_debug_errno(r,
						"service %s: Failed to watch %s for its cgroup: %m",
						s->sv.p->name, dirs[j]);
			w->said = true;
			continue;
		}
		w->said = false;
		memcpy(w->dir, dirs[j], sizeof(w->dir));
	}
}

static void sense_service(struct manager *m, struct service_rt *s,
			  const struct sensor_snapshot *now, struct contention_snapshot *cnow,
			  uint64_t tick, double iv, struct engine_input *in)
{
	struct qos_sample *q = m->q;	    /* big (histograms): the heap's, */
	struct contention_sample *c = m->c; /* reused for every service */
	bool have_c = false;

	s->window_now = false;
	service_look(m, s, in);
	appear_watch(m, s);
	if (!s->sv.cgid)
		return;
	/* New threads (workers, a restarted service) get the slice while it is set. */
	if (!m->o.dry_run && s->sv.wrote[KNOB_SCHED_SLICE] && s->sv.written[KNOB_SCHED_SLICE] > 0 &&
	    manager_slice_used(m, s)) {
		char path[PATH_MAX + 64], v[32];
		int r = write_knob(m, s, KNOB_SCHED_SLICE, 0, s->sv.written[KNOB_SCHED_SLICE], path,
				   sizeof(path));

		snprintf(path, sizeof(path), "sched.slice of the new threads of %s", s->cg);
		action_format_value(v, sizeof(v), KNOB_SCHED_SLICE, s->sv.written[KNOB_SCHED_SLICE],
				    0);
		if (r && r != -ENOENT)
			knob_failed(s, KNOB_SCHED_SLICE, r, path, v);
	}
	sensor_sample(now, m->prev, s->sv.cgid, iv, q);
	if (m->cont && cnow &&
	    !contention_sample(m->cont, cnow, m->cprev, s->sv.cgid, s->cg, iv, c))
		have_c = true;
	manager_report_sample(m, s, q, have_c ? c : NULL); /* status and metrics */
	s->window_now = service_tick(&s->sv, tick, q, have_c ? c : NULL, m->cont != NULL, iv, in);
	if (s->window_now)
		manager_report_window(m, s); /* status and metrics */
}

/*
 * Log a latency-critical service's verdict when its kind changes
 * ("violation", "hold", "large slack", "no verdict": the figures in it
 * change every window), and once a minute while it persists. No action is
 * visible otherwise. At the debug level, every window's.
 */
static void log_verdicts(struct manager *m, uint64_t usec)
{
	for (size_t i = 0; i < m->set->n; i++) {
		struct service_rt *s = &m->svc[i];
		const char *v = engine_verdict(m->engine, i);
		char kind[sizeof(s->verdict)];
		size_t n;

		if (s->sv.p->klass != POLICY_LATENCY_CRITICAL || !v || !*v)
			continue;
		n = strcspn(v, ":");
		snprintf(kind, sizeof(kind), "%.*s", (int)n, v);
		if (!strcmp(kind, s->verdict)) {
			if (usec < s->verdict_usec + VERDICT_REMIND_USEC) {
				/* Every window's, with TAILWARDEN_LOG_LEVEL=debug. */
				if (s->window_now)
					log_debug("service %s: %s", s->sv.p->name, v);
				continue;
			}
			s->verdict_usec = usec;
			log_info("service %s: still %s", s->sv.p->name, v);
			continue;
		}
		snprintf(s->verdict, sizeof(s->verdict), "%s", kind);
		s->verdict_usec = usec;
		log_info("service %s: %s", s->sv.p->name, v);
	}
}

/*
 * Sensor tables: free removed cgroups' entries, and say (at most once a
 * minute) when events went uncounted because a table was full.
 */
static void tables_tick(struct manager *m, const struct sensor_snapshot *now,
			const struct contention_snapshot *cnow, uint64_t read_usec, uint64_t usec)
{
	struct sensor_drops d;
	struct contention_drops cd = { 0 };
	uint64_t t;
	size_t freed;

	sensor_drops(now, m->prev, &d);
	if (cnow && m->cprev)
		contention_drops(cnow, m->cprev, &cd);
	m->drops.cgroups += d.cgroups;
	m->drops.conns += d.conns;
	m->drops.spans_negative += d.spans_negative + d.spans_absurd;
	m->cdrops.cgroups += cd.cgroups;
	m->cdrops.stamps += cd.stamps;
	sd_event_now(m->event, CLOCK_MONOTONIC, &t);
	freed = sensing_reap(m->names, (t - read_usec) / 1000, m->sensor, now, m->cont, cnow);
	m->reaped += freed;
	manager_report_drops(m, &d, &cd, freed); /* status and metrics */
	if (!m->drops_since_usec)
		m->drops_since_usec = usec;
	if (usec - m->drops_since_usec < DROPS_LOG_USEC)
		return;
	if (m->drops.cgroups + m->drops.conns + m->drops.spans_negative + m->cdrops.cgroups +
	    m->cdrops.stamps)
		log_warning(
			"sensor tables in the last %.0f s: %llu events of cgroups not counted (request table %zu of %u cgroups, contention table %zu), %llu connections not tracked, %llu spans dropped, %llu contention events not counted (%llu stamps); %llu entries of removed cgroups freed",
			(usec - m->drops_since_usec) / 1e6, (unsigned long long)m->drops.cgroups,
			sensor_snapshot_len(now), (unsigned)TW_MAX_CGROUPS,
			cnow ? contention_snapshot_len(cnow) : 0,
			(unsigned long long)m->drops.conns,
			(unsigned long long)m->drops.spans_negative,
			(unsigned long long)m->cdrops.cgroups, (unsigned long long)m->cdrops.stamps,
			(unsigned long long)m->reaped);
	else
		log_debug(
			"sensor tables: %zu cgroups (request), %zu (contention); %llu entries of removed cgroups freed",
			sensor_snapshot_len(now), cnow ? contention_snapshot_len(cnow) : 0,
			(unsigned long long)m->reaped);
	memset(&m->drops, 0, sizeof(m->drops));
	memset(&m->cdrops, 0, sizeof(m->cdrops));
	m->reaped = 0;
	m->drops_since_usec = usec;
}

static void notify_status(struct manager *m)
{
	sd_notifyf(0, "STATUS=%zu services, %llu decisions (%llu applied, %llu failed)%s%s%s",
		   m->set->n, (unsigned long long)m->n_decisions, (unsigned long long)m->n_applied,
		   (unsigned long long)m->n_failed, m->o.dry_run ? ", dry-run" : "",
		   *m->reload_error ? "; last reload rejected, old policies kept: " : "",
		   m->reload_error);
}

/* AvoidServiceCPUs=: off the CPUs of the latency-critical services found so far. */
static void keep_off_services(struct manager *m, uint64_t usec)
{
	const char **cgs;
	size_t n = 0;

	if (!m->aff.on || usec < m->aff.next_usec)
		return;
	cgs = calloc(m->set->n, sizeof(*cgs));
	if (!cgs)
		return; /* next tick */
	for (size_t i = 0; i < m->set->n; i++)
		if (m->set->v[i].klass == POLICY_LATENCY_CRITICAL && m->svc[i].cg[0])
			cgs[n++] = m->svc[i].cg;
	affinity_update(&m->aff, m->root, cgs, n, usec);
	free(cgs);
}

/* usec: the tick's scheduled time, so windows do not drift with timer slack. */
static int tick(struct manager *m, uint64_t usec)
{
	struct sensor_snapshot *now = NULL;
	struct contention_snapshot *cnow = NULL;
	uint64_t read_usec, start_usec;
	double iv;
	int n, r;

	start_usec = manager_now_usec(); /* status and metrics: the tick's duration */
	daemon_test_stall(m->ticks);
	bus_connect(m, usec);
	sd_event_now(m->event, CLOCK_MONOTONIC, &read_usec);
	r = sensor_read(m->sensor, &now);
	if (r)
		return log_error_errno(r, "Failed to read the request sensor");
	if (m->cont && contention_read(m->cont, &cnow))
		cnow = NULL;
	iv = (usec - m->last_usec) / 1e6;
	for (size_t i = 0; i < m->set->n; i++)
		sense_service(m, &m->svc[i], now, cnow, feed_tick_index(usec, m->cfg->period_ns),
			      iv, &m->in[i]);
	watch_services(m);
	keep_off_services(m, usec);
	n = engine_tick(m->engine, usec * 1000, m->in, m->acts, m->nacts);
	if (n < 0)
		log_error_errno(n, "Failed to decide this tick (policy engine: %m), ignoring");
	for (int i = 0; i < n; i++)
		apply(m, &m->acts[i]);
	log_verdicts(m, usec);
	tables_tick(m, now, cnow, read_usec, usec);
	sensor_snapshot_free(m->prev);
	m->prev = now;
	contention_snapshot_free(m->cprev);
	m->cprev = cnow;
	m->last_usec = usec;
	m->ticks++;
	notify_status(m);
	manager_report_publish(m, start_usec); /* status and metrics */
	sd_event_now(m->event, CLOCK_MONOTONIC, &read_usec);
	daemon_watchdog_progress(m->watchdog, read_usec);
	return 0;
}

static int on_tick(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct manager *m = userdata;
	int r;

	r = tick(m, usec);
	if (r)
		return sd_event_exit(m->event, r);
	/* A time source fires once: re-arm it for the next tick. */
	r = sd_event_source_set_time(src, usec + m->cfg->period_ns / 1000);
	if (r >= 0)
		r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
	return r;
}

/*
 * Put back every knob we changed (but the disks' schedulers with
 * keep_iosched: a reload). 0 or the first -errno.
 */
static int restore(struct manager *m, bool keep_iosched)
{
	int r;

	if (!m->state)
		return 0;
	r = keep_iosched ? knob_state_restore_knobs(m->state, m->cfg->cgroup_base) :
			   knob_state_restore_all(m->state, m->cfg->cgroup_base);
	if (r < 0)
		return log_error_errno(
			r,
			"Failed to restore some knobs (state file kept; run 'tailwarden restore')");
	if (r > 0)
		log_notice("restored %d knob(s) to their original values", r);
	for (size_t i = 0; m->svc && i < m->set->n; i++)
		service_restored(&m->svc[i].sv);
	return 0;
}

/*
 * SIGHUP: read the policies again. An invalid set keeps the old one
 * running. A valid one restores every knob first, so the new policies
 * start from the original values.
 */
static void io_schedulers(struct manager *m);

static int on_reload(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	struct manager *m = userdata;
	struct policy_set *set;
	struct engine *engine;

	(void)src;
	(void)si;
	daemon_notify_reloading();
	/* logrotate's postrotate: later decisions go to a new file. */
	if (m->decisions && !decisions_reopen(m->decisions, manager_now_usec()))
		log_info("reopened the decision log %s", m->cfg->decision_log);
	m->reload_error[0] = '\0';
	if (load_policies(m, &set)) {
		log_error(
			"reload: the new policy set is invalid (errors above); keeping the old one");
		if (!*m->reload_error)
			snprintf(m->reload_error, sizeof(m->reload_error),
				 "the policies could not be read");
		goto done;
	}
	engine = engine_new(set);
	if (!engine) {
		policy_set_free(set);
		log_error("reload: out of memory; keeping the old policy set");
		snprintf(m->reload_error, sizeof(m->reload_error), "out of memory");
		goto done;
	}
	/*
	 * Knobs not put back stay in the state file for `tailwarden restore`;
	 * the new policies start from what the cgroups hold now.
	 */
	if (restore(m, true) < 0)
		log_warning("reload: some knobs keep the values we set, ignoring");
	services_free(m);
	engine_free(m->engine);
	policy_set_free(m->set);
	m->set = set;
	m->engine = engine;
	if (services_new(m) < 0)
		return sd_event_exit(m->event, -ENOMEM);
	slice_check(m);
	log_notice("reloaded: %zu service(s)", set->n);
	io_schedulers(m);
	m->aff.next_usec = 0; /* the new set's services: at the next tick */
done:
	/* READY=1 ends the reload either way; STATUS= says whether it was taken. */
	notify_status(m);
	sd_notify(0, "READY=1");
	return 0;
}

static bool limits_io_weight(const struct policy_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->v[i].io_weight.set)
			return true;
	return false;
}

/* A line of iosched_setup(), logged as it says. */
static void iosched_line(void *userdata, int level, const char *line)
{
	(void)userdata;
	log_full(level, "%s", line);
}

/*
 * I/O weight acts only while a disk's scheduler is bfq. When a policy
 * limits IOWeight= (or IOScheduler= is set), one line per disk says
 * whether it can; with IOScheduler=bfq, disks that offer it are switched
 * (iosched_setup()), and the knobs reopened, so that io.bfq.weight is
 * used. The disks: IOSchedulerDevices=, else every whole disk.
 */
static void io_schedulers(struct manager *m)
{
	struct iosched_setup o = {
		.want = m->cfg->io_scheduler,
		.devs = m->cfg->io_scheduler_devices,
		.dry_run = m->o.dry_run,
		.state = m->state,
		.say = iosched_line,
	};
	char seen[REPORT_DISKS][IOSCHED_NAME_MAX];
	int r;

	if (m->report)
		m->report->n_disks = 0;
	if (!o.want && !limits_io_weight(m->set))
		return;
	o.seen = seen;
	o.max_seen = m->report ? REPORT_DISKS : 0;
	r = iosched_setup(&o);
	if (r < 0) {
		log_warning_errno(r, "Failed to list the block devices in /sys/block: %m");
		return;
	}
	for (size_t i = 0; i < o.n_seen; i++)
		snprintf(m->report->disks[m->report->n_disks++].dev,
			 sizeof(m->report->disks[0].dev), "%s", seen[i]);
	/* bfq is loaded now: io.bfq.weight, the file that acts under it, exists (knobs_open()). */
	for (size_t j = 0; r > 0 && j < m->set->n; j++)
		m->svc[j].reopen = m->svc[j].knobs != NULL;
}

static int on_exit_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata)
{
	struct manager *m = userdata;

	(void)src;
	log_info("received %s, restoring knobs and exiting", strsignal(si->ssi_signo));
	return sd_event_exit(m->event, 0);
}

/*
 * The request sensor follows the policies' cgroups only: traffic of any
 * other cgroup stops at a compare (watch_services).
 */
static int open_sensors(struct manager *m)
{
	struct sensor_opts so = SENSOR_OPTS_DEFAULT;
	const struct sensors_opts o = {
		.sensor = &so,
		.signals = m->o.no_contention ? 0 : CONT_DEFAULT,
		.cgroup_base = m->cfg->cgroup_base,
		.without = "policies act on latency alone",
	};
	int r;

	so.watch_listed = true;
	r = sensors_open(&o, &m->sensor, &m->cont);
	if (!r)
		sensors_log_mode(m->sensor);
	return r;
}

static int open_outputs(struct manager *m)
{
	const char *why;
	int r;

	/* Made here on a fresh host (a unit's RuntimeDirectory= is not needed). */
	r = knob_state_dir(m->cfg->state_dir, true, &why);
	if (r && why)
		return log_error_errno(r, "Refusing the state directory %s: it %s",
				       m->cfg->state_dir, why);
	if (r)
		return log_error_errno(r, "Failed to create the state directory %s",
				       m->cfg->state_dir);
	if (m->o.dry_run)
		log_notice("dry-run: decisions are logged, nothing is written");
	else if ((r = knob_state_open(m->cfg->state_dir, &m->state)))
		return log_error_errno(r, "Failed to open the state file in %s", m->cfg->state_dir);
	if (m->cfg->decision_log) {
		r = decisions_open(m->cfg->decision_log, m->cfg->decision_log_max_size,
				   &m->decisions);
		if (r)
			return log_error_errno(r, "Failed to open the decision log %s: %m",
					       m->cfg->decision_log);
	}
	return 0;
}

int manager_new(const struct manager_opts *o, struct manager **out)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->o = *o;
	m->cfg = o->cfg;
	m->q = malloc(sizeof(*m->q));
	m->c = malloc(sizeof(*m->c));
	if (!m->q || !m->c) {
		r = -ENOMEM;
		goto fail;
	}
	r = cg_root_find(m->cfg->cgroup_base, m->root, sizeof(m->root));
	if (r) {
		log_error_errno(r, "Failed to find a cgroup2 hierarchy under %s: %m",
				m->cfg->cgroup_base);
		goto fail;
	}
	m->names = cg_names_new(m->root);
	if (!m->names) {
		r = -ENOMEM;
		goto fail;
	}
	r = load_policies(m, &m->set);
	if (r) {
		log_error("refusing to start: the policy set is invalid%s",
			  r == -EINVAL ? " (errors above)" : "");
		goto fail;
	}
	m->engine = engine_new(m->set);
	slice_check(m);
	bus_connect(m, 1);
	r = m->engine ? services_new(m) : -ENOMEM;
	if (!r)
		r = open_sensors(m);
	if (!r)
		watch_services(m);
	if (!r)
		r = open_outputs(m);
	if (!r)
		r = manager_report_open(m); /* status and metrics */
	if (r)
		goto fail;
	*out = m;
	return 0;
fail:
	manager_free(m);
	return r;
}

int manager_run(struct manager *m)
{
	sigset_t mask;
	int r, rr;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	r = sd_event_default(&m->event);
	if (r < 0)
		return log_error_errno(r, "Failed to create the event loop: %m");
	sd_event_now(m->event, CLOCK_MONOTONIC, &m->last_usec);
	r = sensor_read(m->sensor, &m->prev);
	if (r)
		return log_error_errno(r, "Failed to read the request sensor: %m");
	if (m->cont && (r = contention_read(m->cont, &m->cprev)))
		return log_error_errno(r, "Failed to read the contention sensor: %m");
	/* Ticks on multiples of the period, as `record` samples (feed.h). */
	r = sd_event_add_time(m->event, NULL, CLOCK_MONOTONIC,
			      feed_next_tick(m->last_usec, m->cfg->period_ns), 1000, on_tick, m);
	if (r >= 0)
		r = sd_event_add_signal(m->event, NULL, SIGTERM, on_exit_signal, m);
	if (r >= 0)
		r = sd_event_add_signal(m->event, NULL, SIGINT, on_exit_signal, m);
	if (r >= 0)
		r = sd_event_add_signal(m->event, NULL, SIGHUP, on_reload, m);
	/* Not sd_event_set_watchdog(): the loop must prove it ticks (daemon.c). */
	if (r >= 0)
		r = daemon_watchdog_new(m->event, m->cfg->period_ns / 1000, &m->watchdog);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the event loop: %m");
	/* Before the first tick; nothing returns between here and the restore. */
	io_schedulers(m);
	affinity_init(&m->aff, m->cfg->avoid_service_cpus);
	keep_off_services(m, m->last_usec);
	log_info("running: %zu service(s), period %.0f ms%s", m->set->n, m->cfg->period_ns / 1e6,
		 m->o.dry_run ? ", dry-run" : "");
	manager_report_publish(m, 0); /* status and metrics, before the first tick */
	notify_status(m);
	sd_notify(0, "READY=1");
	r = sd_event_loop(m->event);
	sd_notify(0, "STOPPING=1");
	manager_report_close(m); /* status and metrics */
	rr = restore(m, false);
	return r < 0 ? r : rr;
}

void manager_free(struct manager *m)
{
	if (!m)
		return;
	services_free(m);
	engine_free(m->engine);
	policy_set_free(m->set);
	sensor_snapshot_free(m->prev);
	contention_snapshot_free(m->cprev);
	contention_free(m->cont);
	sensor_free(m->sensor);
	knob_state_free(m->state);
	daemon_watchdog_free(m->watchdog);
	metrics_stop(m->metrics);
	report_free(m->report);
	unit_link_close(&m->link);
	cg_names_free(m->names);
	decisions_close(m->decisions);
	free(m->q);
	free(m->c);
	sd_event_unref(m->event);
	config_free(m->cfg);
	free(m);
}
