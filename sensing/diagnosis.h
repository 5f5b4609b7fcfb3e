/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Diagnosis: which resource slows a cgroup's requests, and whether that is
 * its own load or interference. A pure function of the window's samples
 * and a per-cgroup state carrying the recent baseline: no I/O, no clock.
 */
#ifndef TW_DIAGNOSIS_H
#define TW_DIAGNOSIS_H

#include <stdbool.h>
#include <stddef.h>
#include "sensing/contention.h"
#include "sensing/sensor.h"

enum diag_dominant {
	DIAG_NONE,
	DIAG_CPU,
	DIAG_IO,
	DIAG_LOCK,
	DIAG_MEMORY,
	DIAG_NETWORK,
};

enum diag_cause {
	DIAG_CAUSE_UNKNOWN,
	DIAG_CAUSE_LOAD,
	DIAG_CAUSE_INTERFERENCE,
};

/* One signal that stands out against the cgroup's own baseline. */
struct diag_evidence {
	const char *signal; /* JSON name, e.g. "runq_delay_us.p99", "phase.queued_us.p99" */
	double value;	    /* this window */
	double baseline;    /* recent baseline */
	double ratio;	    /* value / baseline (or a large number when baseline is ~0) */
};

/* Up to three phases and the resource signals. */
#define DIAG_MAX_EVIDENCE 8

struct diagnosis {
	enum diag_dominant dominant;
	enum diag_cause cause;
	bool load_up; /* its request rate is up on its baseline (1.3x, until under 1.15x) */
	bool cpu_up;  /* its own CPU time per second is up 1.3x on its baseline */
	size_t n_evidence;
	struct diag_evidence evidence[DIAG_MAX_EVIDENCE]; /* strongest first */
};

/* Per-cgroup state: baselines of latency, load and each signal. */
struct diag_state;

/* NULL on ENOMEM. */
struct diag_state *diag_state_new(void);
void diag_state_free(struct diag_state *s);

/*
 * Diagnose one window and fold it into the baseline. q and c are the same
 * cgroup's request and contention samples for the window; c may be NULL
 * (no contention sensor): then dominant is none and cause unknown or load.
 */
void diag_update(struct diag_state *s, const struct qos_sample *q,
		 const struct contention_sample *c, struct diagnosis *out);

const char *diag_dominant_name(enum diag_dominant d);
const char *diag_cause_name(enum diag_cause c);

#endif
