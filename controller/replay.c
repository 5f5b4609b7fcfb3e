// SPDX-License-Identifier: GPL-2.0
/*
 * tailwarden replay: the policy engine over a recording (record.c),
 * touching nothing. Each tick is fed to the engine as `run --dry-run` feeds
 * it (service.c, feed.c): the knobs start from their recorded values and take the
 * values the engine decides, virtually. Output depends on the recording
 * and the policies only: the same inputs give the same bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "controller/output.h"
#include "controller/recording.h"
#include "controller/service.h"
#include "policies/action.h"
#include "policies/config.h"
#include "policies/engine.h"
#include "policies/policy.h"

struct rsvc {
	struct service sv;     /* its life, as the daemon lives it (service.h) */
	const char *cg;	       /* in this tick's recording; NULL when absent */
	double home[KNOB_MAX]; /* first value recorded: "throttled" is below it */
	/* summary */
	uint64_t windows, over, present, throttled;
	uint64_t changes[KNOB_MAX];
	/* TCP flow figures over the ticks that have them (tcp_ticks) */
	uint64_t tcp_ticks;
	double retrans, fast_retrans, timeouts; /* timeouts NAN once a tick did not know them */
	double srtt_max_us, sndq_max;
};

struct replay {
	const char *file;
	bool json;
	struct rec_header h;
	struct policy_set *set;
	struct engine *engine;
	struct rsvc *svc;
	uint64_t ticks, decisions, first_us, last_us;
};

static void help(void)
{
	printf("Usage: tailwarden replay FILE [OPTIONS]\n\n"
	       "Runs the policy engine over a recording made by 'tailwarden record', as\n"
	       "a dry run of the daemon would have: the knobs start from their recorded\n"
	       "values and take the engine's decisions virtually. Touches nothing; needs\n"
	       "no privileges. Prints each decision with its reason, then a summary:\n"
	       "windows over target, changes per knob, time spent throttled. The same\n"
	       "recording and policies give the same output, byte for byte. Exit status 1\n"
	       "when the recording is truncated or corrupt (what was read before the\n"
	       "byte named is still evaluated).\n\n"
	       "      --policies PATH   policy file or directory (default: the config's\n"
	       "                        PoliciesDir=, " TW_POLICIES_DIR ")\n"
	       "      --config FILE     main config for PoliciesDir= (default\n"
	       "                        " TW_CONFIG_PATH " if present)\n"
	       "  -j, --json            JSON Lines: one object per decision, then {\"summary\": ...}\n"
	       "  -h, --help            this text\n");
}

/* The recorded cgroup of service s this tick, or NULL. */
static const struct rec_cgroup *find(const struct rsvc *s, const struct rec_tick *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const char *path = t->v[i].path, *base;

		if (s->sv.p->cgroup && !strcmp(path, s->sv.p->cgroup))
			return &t->v[i];
		/* Unit=: the cgroup systemd names after the unit. */
		base = strrchr(path, '/');
		if (s->sv.p->unit && base && !strcmp(base + 1, s->sv.p->unit))
			return &t->v[i];
	}
	return NULL;
}

static void json_value(struct json_object *o, const char *key, double v)
{
	json_object_object_add(o, key,
			       isfinite(v) ? json_object_new_double(v) :
			       isnan(v)	   ? NULL :
					     json_object_new_string("max"));
}

static void print_decision(struct replay *rp, const struct rec_tick *t, const struct rsvc *s,
			   const struct action *a)
{
	double rel = (t->mono_us - rp->first_us) / 1e6;
	char o[32], n[32];

	if (rp->json) {
		struct json_object *j = json_object_new_object();
		char buf[32];

		if (!j)
			return;
		json_object_object_add(j, "tick", json_object_new_uint64(t->index));
		snprintf(buf, sizeof(buf), "%.3f", rel);
		json_object_object_add(j, "t", json_object_new_double_s(rel, buf));
		snprintf(buf, sizeof(buf), "%.3f", t->ts);
		json_object_object_add(j, "ts", json_object_new_double_s(t->ts, buf));
		json_object_object_add(j, "service", json_object_new_string(s->sv.p->name));
		json_object_object_add(j, "cgroup", json_object_new_string(s->cg ? s->cg : ""));
		if (s->sv.p->unit)
			json_object_object_add(j, "unit", json_object_new_string(s->sv.p->unit));
		json_object_object_add(j, "knob",
				       json_object_new_string(action_knob_name(a->knob)));
		json_value(j, "old", a->old_value);
		json_value(j, "new", a->new_value);
		json_object_object_add(j, "reason", json_object_new_string(a->reason));
		printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
		json_object_put(j);
		return;
	}
	action_format_value(o, sizeof(o), a->knob, a->old_value, 0);
	action_format_value(n, sizeof(n), a->knob, a->new_value, 0);
	printf("+%.3fs %s %s: %s -> %s (%s)\n", rel, s->sv.p->name, action_knob_name(a->knob), o, n,
	       a->reason);
}

/* A tick's TCP flow figures into the service's summary. */
static void tcp_count(struct rsvc *s, const struct contention_tcp *t)
{
	if (!s->tcp_ticks++)
		s->srtt_max_us = s->sndq_max = s->retrans = s->fast_retrans = s->timeouts = 0;
	s->retrans += t->retrans_segs;
	s->fast_retrans += t->fast_retrans_segs;
	s->timeouts += t->timeouts; /* NAN sticks */
	if (t->srtt_max_us > s->srtt_max_us)
		s->srtt_max_us = t->srtt_max_us;
	if (t->sndq_max > s->sndq_max)
		s->sndq_max = t->sndq_max;
}

/* {retrans_segs, fast_retrans_segs, timeouts, srtt_max_us, send_queue_max_bytes}, or null. */
static struct json_object *tcp_json(const struct rsvc *s)
{
	struct json_object *o;

	if (!s->tcp_ticks)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	json_object_object_add(o, "retrans_segs", json_object_new_uint64(s->retrans));
	json_object_object_add(o, "fast_retrans_segs", json_object_new_uint64(s->fast_retrans));
	json_object_object_add(o, "timeouts",
			       isnan(s->timeouts) ? NULL : json_object_new_uint64(s->timeouts));
	json_object_object_add(o, "srtt_max_us", json_object_new_uint64(s->srtt_max_us));
	json_object_object_add(o, "send_queue_max_bytes", json_object_new_uint64(s->sndq_max));
	return o;
}

/* This tick's recorded cgroup of service i: its life and its engine input. */
static int replay_service(struct replay *rp, const struct rec_tick *t, size_t i,
			  struct engine_input *in)
{
	struct rsvc *s = &rp->svc[i];
	const struct rec_cgroup *g = find(s, t);
	int r;

	service_input_init(in);
	s->cg = g ? g->path : NULL;
	if (!g) {
		service_gone(&s->sv);
		return 0;
	}
	r = service_found(&s->sv, rp->engine, g->id, NULL);
	if (r < 0)
		return r;
	for (int k = 0; r && k < KNOB_MAX; k++)
		s->home[k] = NAN; /* a new instance */
	s->present++;
	for (int k = 0; k < KNOB_MAX; k++) {
		if (isnan(g->knob[k]))
			continue;
		/* As `run --dry-run`: the value it would have written. */
		service_knob(&s->sv, rp->engine, k, g->knob[k], true, &in->knob[k]);
		if (isnan(s->home[k]))
			s->home[k] = g->knob[k];
	}
	service_tick(&s->sv, t->index, &g->q, g->have_c ? &g->c : NULL, rp->h.contention,
		     t->interval_s, in);
	if (g->have_c && g->c.tcp_on)
		tcp_count(s, &g->c.tcp);
	return 0;
}

/* The summary's figures of service i after this tick. */
static void replay_count(struct replay *rp, size_t i, const struct engine_input *in)
{
	struct rsvc *s = &rp->svc[i];
	bool throttled = false;

	if (in->have_window && s->sv.p->klass == POLICY_LATENCY_CRITICAL &&
	    isfinite(engine_slack(rp->engine, i))) {
		s->windows++;
		s->over += engine_slack(rp->engine, i) < 0;
	}
	for (int k = 0; s->sv.cgid && k < KNOB_MAX; k++)
		throttled |= s->sv.wrote[k] && s->sv.written[k] < s->home[k];
	s->throttled += throttled;
}

/* One tick, as manager.c's tick() would have run it in dry-run. */
static int replay_tick(struct replay *rp, const struct rec_tick *t)
{
	size_t n = rp->set->n, nacts = n * KNOB_MAX + 1;
	struct engine_input *in = calloc(n ? n : 1, sizeof(*in));
	struct action *acts = calloc(nacts, sizeof(*acts));
	int k = 0, r = 0;

	if (!in || !acts) {
		free(in);
		free(acts);
		return -ENOMEM;
	}
	if (!rp->ticks)
		rp->first_us = t->mono_us;
	rp->last_us = t->mono_us;
	for (size_t i = 0; i < n && !r; i++)
		r = replay_service(rp, t, i, &in[i]);
	if (r)
		goto out;
	k = engine_tick(rp->engine, t->mono_us * 1000, in, acts, nacts);
	for (int j = 0; j < k; j++) {
		struct rsvc *s = &rp->svc[acts[j].service];

		print_decision(rp, t, s, &acts[j]);
		service_wrote(&s->sv, acts[j].knob, acts[j].new_value);
		s->changes[acts[j].knob]++;
		rp->decisions++;
	}
	for (size_t i = 0; i < n; i++)
		replay_count(rp, i, &in[i]);
	rp->ticks++;
out:
	free(in);
	free(acts);
	return r ? r : k < 0 ? k : 0;
}

static void summary(struct replay *rp, const char *error)
{
	double period = rp->h.period_ns / 1e9;
	double span = rp->ticks ? (rp->last_us - rp->first_us) / 1e6 + period : 0;

	if (rp->json) {
		struct json_object *o = json_object_new_object(), *sv = json_object_new_object(),
				   *w;
		char buf[32];

		if (!o || !sv)
			return;
		json_object_object_add(o, "ticks", json_object_new_uint64(rp->ticks));
		snprintf(buf, sizeof(buf), "%.3f", span);
		json_object_object_add(o, "seconds", json_object_new_double_s(span, buf));
		json_object_object_add(o, "decisions", json_object_new_uint64(rp->decisions));
		for (size_t i = 0; i < rp->set->n; i++) {
			struct rsvc *s = &rp->svc[i];
			struct json_object *so = json_object_new_object(),
					   *ch = json_object_new_object();

			if (!so || !ch)
				break;
			json_object_object_add(
				so, "class",
				json_object_new_string(s->sv.p->klass == POLICY_LATENCY_CRITICAL ?
							       "latency-critical" :
							       "best-effort"));
			json_object_object_add(so, "ticks_present",
					       json_object_new_uint64(s->present));
			if (s->sv.p->klass == POLICY_LATENCY_CRITICAL) {
				json_object_object_add(so, "windows",
						       json_object_new_uint64(s->windows));
				json_object_object_add(so, "windows_over_target",
						       json_object_new_uint64(s->over));
			}
			for (int k = 0; k < KNOB_MAX; k++)
				if (s->changes[k])
					json_object_object_add(
						ch, action_knob_name(k),
						json_object_new_uint64(s->changes[k]));
			json_object_object_add(so, "changes", ch);
			snprintf(buf, sizeof(buf), "%.3f", s->throttled * period);
			json_object_object_add(
				so, "throttled_s",
				json_object_new_double_s(s->throttled * period, buf));
			json_object_object_add(so, "tcp", tcp_json(s));
			json_object_object_add(sv, s->sv.p->name, so);
		}
		json_object_object_add(o, "services", sv);
		json_object_object_add(o, "error", error ? json_object_new_string(error) : NULL);
		w = json_object_new_object();
		json_object_object_add(w, "summary", o);
		printf("%s\n", json_object_to_json_string_ext(w, JSON_C_TO_STRING_PLAIN));
		json_object_put(w);
		return;
	}
	printf("summary: %llu tick(s), %.3f s, %llu decision(s)%s\n", (unsigned long long)rp->ticks,
	       span, (unsigned long long)rp->decisions,
	       error ? " (the recording ends in an error)" : "");
	for (size_t i = 0; i < rp->set->n; i++) {
		struct rsvc *s = &rp->svc[i];
		bool any = false;

		printf("  %s: %s", s->sv.p->name,
		       s->sv.p->klass == POLICY_LATENCY_CRITICAL ? "latency-critical" :
								   "best-effort");
		if (!s->present) {
			printf(", not in the recording\n");
			continue;
		}
		if (s->sv.p->klass == POLICY_LATENCY_CRITICAL)
			printf(", %llu window(s), %llu over target", (unsigned long long)s->windows,
			       (unsigned long long)s->over);
		printf("; changes:");
		for (int k = 0; k < KNOB_MAX; k++) {
			if (!s->changes[k])
				continue;
			printf("%s %s %llu", any ? "," : "", action_knob_name(k),
			       (unsigned long long)s->changes[k]);
			any = true;
		}
		printf("%s; throttled %.3f s of %.3f s", any ? "" : " none", s->throttled * period,
		       s->present * period);
		if (s->tcp_ticks) {
			char rtt[32], to[32] = "unknown";

			output_fmt_duration(rtt, sizeof(rtt), s->srtt_max_us * 1e3);
			if (!isnan(s->timeouts))
				snprintf(to, sizeof(to), "%.0f", s->timeouts);
			printf("; tcp: %.0f segment(s) retransmitted (%.0f fast), timeouts %s, srtt up to %s, send queue up to %.0f B",
			       s->retrans, s->fast_retrans, to, rtt, s->sndq_max);
		}
		putchar('\n');
	}
}

static int load(struct replay *rp, char *policies, const char *config)
{
	struct policy_errors errs = { 0 };
	struct tw_config *cfg = NULL;
	int r;

	if (!policies) {
		if (daemon_load_config(config, TW_CONFIG_PATH, &cfg))
			return -EINVAL;
		policies = cfg->policies_dir;
	}
	r = policy_set_load(&policies, 1, &rp->set, &errs);
	if (r == -EINVAL)
		daemon_log_errors(&errs);
	policy_errors_clear(&errs);
	if (r) {
		log_error("Failed to load the policies from %s%s", policies,
			  r == -EINVAL ? " (errors above)" : "");
		config_free(cfg);
		return r;
	}
	config_free(cfg);
	rp->engine = engine_new(rp->set);
	rp->svc = calloc(rp->set->n ? rp->set->n : 1, sizeof(*rp->svc));
	if (!rp->engine || !rp->svc)
		return log_error_errno(-ENOMEM, "Failed to set up: %m");
	for (size_t i = 0; i < rp->set->n; i++) {
		if (service_init(&rp->svc[i].sv, &rp->set->v[i], i, rp->h.period_ns))
			return log_error_errno(-ENOMEM, "Failed to set up: %m");
		for (int k = 0; k < KNOB_MAX; k++)
			rp->svc[i].home[k] = NAN;
	}
	return 0;
}

int cmd_replay(int argc, char **argv)
{
	static const struct option opts[] = { { "policies", required_argument, NULL, 'p' },
					      { "config", required_argument, NULL, 'C' },
					      { "json", no_argument, NULL, 'j' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	struct replay rp = { 0 };
	struct rec_reader *rd = NULL;
	struct rec_tick t = { 0 };
	char err[4096] = "", *policies = NULL;
	const char *config = NULL;
	int c, r;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policies = optarg;
			break;
		case 'C':
			config = optarg;
			break;
		case 'j':
			rp.json = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			log_error("try 'tailwarden replay --help'");
			return TW_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		log_error(optind == argc ?
				  "a recording FILE is required; try 'tailwarden replay --help'" :
				  "one recording FILE only; try 'tailwarden replay --help'");
		return TW_EXIT_USAGE;
	}
	rp.file = argv[optind];
	r = rec_open(rp.file, &rd, &rp.h, err, sizeof(err));
	if (r) {
		log_error("%s", err);
		return 1;
	}
	r = load(&rp, policies, config);
	if (r)
		goto out;
	if (!rp.json)
		printf("replay of %s: host %s, kernel %s, tailwarden %s, period %.0f ms, %s; %zu polic%s\n",
		       rp.file, rp.h.host, rp.h.kernel, rp.h.version, rp.h.period_ns / 1e6,
		       rp.h.contention ? "with contention" : "requests only", rp.set->n,
		       rp.set->n == 1 ? "y" : "ies");
	while ((r = rec_next(rd, &t, err, sizeof(err))) > 0) {
		r = replay_tick(&rp, &t);
		rec_tick_clear(&t);
		if (r) {
			snprintf(err, sizeof(err), "%s: Failed to replay a tick: %s", rp.file,
				 strerror(-r));
			break;
		}
	}
	rec_tick_clear(&t);
	fflush(stdout);
	if (r)
		log_error("%s", err);
	summary(&rp, r ? err : NULL);
out:
	for (size_t i = 0; rp.svc && rp.set && i < rp.set->n; i++)
		service_done(&rp.svc[i].sv);
	free(rp.svc);
	engine_free(rp.engine);
	policy_set_free(rp.set);
	rec_close(rd);
	return r ? 1 : 0;
}
