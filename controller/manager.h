/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's state and event sources: each tick reads the sensors,
 * asks the engine, and applies (or, in dry-run, only logs) its actions.
 */
#ifndef TW_MANAGER_H
#define TW_MANAGER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <systemd/sd-event.h>
#include "controller/affinity.h"
#include "controller/service.h"
#include "knobs/unit.h"
#include "policies/action.h"
#include "policies/config.h"
#include "policies/engine.h"
#include "policies/policy.h"
#include "sensing/contention.h"
#include "sensing/sensor.h"

struct manager;

struct manager_opts {
	struct tw_config *cfg; /* owned by the manager from now on */
	char **policy_paths;   /* files or directories, re-read on SIGHUP */
	size_t n_policy_paths;
	bool dry_run;
	bool no_contention; /* do not load the contention sensor */
};

/*
 * Load policies, attach the sensors, open the knobs and the state file.
 * Logs what went wrong. 0 or -errno; on error nothing was changed.
 */
int manager_new(const struct manager_opts *o, struct manager **out);
/* Run until SIGTERM/SIGINT, then restore every knob. 0 or -errno. */
int manager_run(struct manager *m);
void manager_free(struct manager *m);

/*
 * Below: the manager's state, shared by its parts (as systemd-oomd's
 * oomd-manager.h): manager.c holds the state, the event sources and the
 * tick; manager_report.c fills the report (status.json, /metrics) from
 * it. Nothing outside the manager uses them.
 */

struct service_rt {
	struct service sv;	   /* its life: cgroup id, window, what we wrote (service.h) */
	char cg[PATH_MAX];	   /* its cgroup, relative to the root; "" until first found */
	struct knobs *knobs;	   /* NULL while the cgroup does not exist */
	struct unit_props up;	   /* Unit=: the unit as read this tick */
	char absent[2 * PATH_MAX]; /* why it is not controlled, as last logged */
	char verdict[32];	   /* kind of the last verdict logged ("violation", "hold", ...) */
	uint64_t verdict_usec;	   /* when a verdict was last logged */
	bool window_now;	   /* a window of its ended this tick */
	bool slice_capped;	   /* the thread cap was said */
	bool reopen;		   /* a knob's file vanished: open the knobs again */
	struct ctl_note {	   /* a cgroup v2 controller its knobs need (cpu, io) */
		bool enabled;	   /* we enabled it for this instance */
		char said[1024];   /* why its knobs cannot act, as last logged */
	} ctl[2];
	bool unavail_said[KNOB_MAX]; /* a knob that cannot act for another reason, said */
	bool no_idle_said;	     /* CPUWeight=idle.. on a cgroup without cpu.idle, said */
	struct knob_fail {	     /* a knob write that keeps failing */
		unsigned n;	     /* failures in a row */
		int err;	     /* the last one's -errno */
	} fail[KNOB_MAX];
	struct manager *m;		/* its manager, for the watches' callbacks */
	struct appear_watch {		/* Weights=floor: the directory its cgroup appears in */
		sd_event_source *src;	/* inotify; NULL: none (yet) */
		char dir[2 * PATH_MAX]; /* watched; [0] the cgroup2 one, [1] v1 cpu's */
		bool gone;		/* the directory went (IN_IGNORED): watch again */
		bool said;		/* a failure to watch it was said */
	} appear[2];
};

struct manager {
	struct manager_opts o;
	struct tw_config *cfg;
	char root[PATH_MAX];
	struct policy_set *set;
	struct engine *engine;
	struct service_rt *svc;
	struct sensor *sensor;
	struct sensor_snapshot *prev;
	struct contention *cont;
	struct contention_snapshot *cprev;
	struct knob_state *state;
	struct decisions *decisions; /* NULL without DecisionLog= */
	struct engine_input *in;     /* per-tick scratch, sized by the policy set */
	struct action *acts;
	uint64_t *watch_ids; /* per-tick scratch: the services' cgroups (watch_services) */
	bool watch_failed;   /* the last sensor_watch() failed (said once) */
	size_t nacts;
	struct qos_sample *q; /* one service's tick, while it is sensed */
	struct contention_sample *c;
	sd_event *event;
	uint64_t last_usec;
	uint64_t n_decisions, n_applied, n_failed;
	uint64_t ticks;
	struct daemon_watchdog *watchdog;
	struct cg_names *names;	   /* for freeing removed cgroups' map entries */
	struct unit_link link;	   /* to systemd, for Unit= policies (unit.h) */
	uint64_t drops_since_usec; /* sensor drops accumulated since */
	struct sensor_drops drops;
	struct contention_drops cdrops;
	uint64_t reaped;
	char reload_error[256];	   /* the last rejected reload, for STATUS= */
	struct report *report;	   /* for `tailwarden status` and /metrics */
	struct metrics *metrics;   /* NULL with Metrics=no */
	bool status_failed;	   /* the last status.json write failed (said once) */
	int slice_ok;		   /* custom slices: 1 work, -1 do not, 0 not probed */
	uint64_t slice_default_ns; /* the kernel's default slice */
	struct affinity aff;	   /* the daemon's own CPUs (AvoidServiceCPUs=) */
};

/* CLOCK_MONOTONIC now, in µs. */
static inline uint64_t manager_now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

/* Is this knob a property of the service's unit (changed through systemd)? */
static inline bool manager_unit_knob(const struct service_rt *s, enum action_knob k)
{
	return s->sv.p->unit && unit_property(k);
}

/* Does Slice= act on this service (asked for, and the kernel has it)? */
static inline bool manager_slice_used(const struct manager *m, const struct service_rt *s)
{
	return s->sv.p->slice_ns.set && m->slice_ok > 0;
}

/*
 * The report side (manager_report.c): the report made and the metrics
 * served at start (0 or -errno, logged), the hooks of the tick, and the
 * report published (status.json, /metrics) after it.
 */
int manager_report_open(struct manager *m);
void manager_report_close(struct manager *m);
void manager_report_sample(struct manager *m, struct service_rt *s, const struct qos_sample *q,
			   const struct contention_sample *c);
void manager_report_window(struct manager *m, struct service_rt *s);
void manager_report_action(struct manager *m, struct service_rt *s, const struct action *a,
			   bool applied, int err);
void manager_report_drops(struct manager *m, const struct sensor_drops *d,
			  const struct contention_drops *cd, size_t freed);
/* tick_start_usec: the tick's start, 0 before the first tick. */
void manager_report_publish(struct manager *m, uint64_t tick_start_usec);

#endif
