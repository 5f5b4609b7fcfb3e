/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the running daemon is doing, as `tailwarden status` and /metrics
 * show it: the control loop fills a report each tick (the hooks of
 * manager_report.c), status.c writes it to status.json and expo.c renders it in
 * the Prometheus text format. Services are kept by name, so counters
 * survive a reload; a service the new set lacks is no longer shown.
 */
#ifndef TW_REPORT_H
#define TW_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "policies/action.h"
#include "sensing/contention.h"
#include "sensing/hist.h"
#include "sensing/sensor.h"

#define REPORT_LAST_ACTIONS 16
#define REPORT_DISKS 16

/* A disk whose I/O scheduler decides whether IOWeight= acts (only bfq). */
struct report_disk {
	char dev[32];
	char scheduler[32]; /* in use now; "" when unreadable */
	char original[32];  /* before tailwarden switched it; "" when it did not */
};

struct report_knob {
	bool shown;	   /* the policy has a range for it, or we changed it */
	double value;	   /* as it is now; INFINITY = max; NAN: unreadable */
	double original;   /* before our first change; NAN when we have not changed it */
	double ours_value; /* what we set (or, in dry-run, would have); NAN if nothing */
	bool ours;	   /* it holds what we wrote */
	bool overridden;   /* someone else changed it after us: hands off */
	uint64_t actions;  /* decisions about it since start */
};

/* Cumulative since start (the counters of /metrics). */
struct report_counters {
	uint64_t requests;
	struct hist latency;
	struct hist phase[TW_PHASES]; /* the requests' phases (enum tw_phase) */
	bool contention;	      /* the contention sensor has seen this cgroup */
	double runq_s, cpu_usage_s, cpu_throttled_s, io_read_bytes, io_write_bytes;
	double futex_wait_s, lock_contention_s, page_faults, reclaim_s, tcp_retransmits;
	double psi_cpu, psi_io, psi_memory; /* avg10, percent (gauges) */
	/* TCP flow figures: counters since start (timeouts NAN where unknown), the last tick's live ones */
	bool tcp;
	double tcp_retrans_segs, tcp_fast_retrans_segs, tcp_timeouts, tcp_bytes_acked;
	double tcp_bytes_received;
	struct contention_tcp tcp_now;
};

struct report_service {
	bool active; /* in the policy set now */
	char name[256];
	bool latency_critical;
	char cgroup[PATH_MAX];		 /* "" until found */
	char unit[256];			 /* "" without Unit= */
	uint64_t cgroup_id;		 /* 0 while absent */
	double percentile;		 /* NAN for best-effort */
	double target_s;		 /* NAN for best-effort */
	double p50_s, p99_s, pct_s, rps; /* last complete window; NAN when none */
	double phase_p99_s[TW_PHASES]; /* the window's p99 of each phase; NAN when none or unseen */
	double slack;		       /* NAN when no verdict */
	char verdict[384];	       /* "" when none */
	char absent[512];	       /* why it is not controlled now, "" when it is */
	struct report_knob knobs[KNOB_MAX];
	struct report_counters c;
};

struct report_action {
	double ts; /* unix seconds */
	char service[256];
	char knob[16];
	double old_value, new_value; /* INFINITY = max */
	char reason[384];
	bool dry_run, applied;
	char error[128]; /* "" when none */
};

struct report_map {
	const char *name; /* static */
	size_t entries, capacity;
};

struct report {
	int pid;
	bool dry_run;
	double period_s;
	char sensing_mode[32];
	char phases_unseen[256];    /* why a phase is not seen in this mode, "" when all are */
	bool phase_seen[TW_PHASES]; /* the mode sees the phase: it has a series in /metrics */
	double started;		    /* unix seconds */
	double last_tick;	    /* unix seconds of the last completed tick, 0 before */
	double tick_duration_s;	    /* how long the last tick took */
	uint64_t ticks;
	char reload_error[256]; /* the last rejected reload, "" when the last was taken */
	struct report_service *svc;
	size_t n_svc;
	struct report_action last[REPORT_LAST_ACTIONS]; /* ring, oldest first from `next` */
	size_t n_last, next;
	/* sensor drops since start */
	uint64_t drop_req_cgroups, drop_req_conns, drop_req_spans;
	uint64_t drop_cont_cgroups, drop_cont_stamps;
	bool have_contention;
	struct report_map maps[2];  /* request and contention per-cgroup tables */
	uint64_t freed;		    /* entries of removed cgroups freed since start */
	uint64_t decision_log_lost; /* decision log lines lost (unwritable file) since start */
	struct report_disk disks[REPORT_DISKS]; /* the disks `run` reported on at start */
	size_t n_disks;
};

/* NULL on ENOMEM. */
struct report *report_new(int pid, bool dry_run, double period_s);
void report_free(struct report *r);

/* The service called name, created (inactive, zeroed) if new. NULL on ENOMEM. */
struct report_service *report_service(struct report *r, const char *name);
/* Mark every service inactive (before a tick marks the current ones). */
void report_begin(struct report *r);

/* Fold one tick of a cgroup's samples into s's counters; c may be NULL. */
void report_sample(struct report_service *s, const struct qos_sample *q,
		   const struct contention_sample *c);
/* A window completed: its percentiles and rate (h may be empty). */
void report_window(struct report_service *s, const struct hist *h, uint64_t requests,
		   double interval_s, double percentile);
/* The same window's phases (their p99s; an unseen or empty phase NAN). */
void report_window_phases(struct report_service *s, const struct qos_sample *window);
/* One decision, applied or not. */
void report_action(struct report *r, struct report_service *s, const struct action *a, bool dry_run,
		   bool applied, int err);
/* The i-th of the last actions, oldest first (i < r->n_last). */
const struct report_action *report_last(const struct report *r, size_t i);

/*
 * Fold a log-linear histogram into Prometheus buckets: cum[i] counts the
 * values of the source buckets whose upper edge is <= le_ns[i] (so a
 * count is never put under a bound it may exceed; the overflow bucket
 * only under +Inf). le_ns ascending. Returns the total (the +Inf bucket).
 */
uint64_t report_fold(const struct hist *h, const double *le_ns, size_t n, uint64_t *cum);
/* Sum of a histogram's values in seconds, each counted at its bucket's midpoint. */
double report_hist_sum_s(const struct hist *h);

#endif
