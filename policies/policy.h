/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Policy files (one INI file per service), parsed and validated as a set.
 * Pure: reads only the files it is given.
 */
#ifndef TW_POLICY_H
#define TW_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "policies/action.h"
#include "policies/ini.h" /* struct policy_errors */

enum policy_class {
	POLICY_LATENCY_CRITICAL,
	POLICY_BEST_EFFORT,
};

/* An inclusive range of a knob's value; set is false when the key was absent. */
struct policy_range {
	double lo, hi;
	bool set;
};

/*
 * Canonical units, whatever the file says:
 *   cpu_quota      fraction of one CPU (0.10 = 10%), hi may be INFINITY ("max")
 *   cpu_weight     cgroup v2 scale 1..10000 (actuators convert for v1)
 *   io_weight      cgroup v2 scale 1..10000 (v1 bfq: 1..1000, converted)
 *   cpu_freq_khz   kHz; hi INFINITY means the hardware maximum
 *   slice_ns       ns, one value (lo == hi): the EEVDF slice given to the
 *                  service's threads while it misses its target
 */
struct policy {
	char *name;    /* file name without ".policy" */
	char *file;    /* path as given, for messages */
	unsigned line; /* line of [Service], for messages about the whole policy */
	char *cgroup;  /* relative to the cgroup root, leading '/'; NULL with unit */
	char *unit;    /* Unit=: a systemd unit whose ControlGroup is followed; or NULL */
	enum policy_class klass;
	/* [Objective], latency-critical only */
	double percentile; /* 0 < p < 1, e.g. 0.99 */
	uint64_t target_ns;
	uint64_t min_requests; /* fewer in a window: no verdict, no action */
	uint64_t window_ns;
	/* [Limits] */
	struct policy_range cpu_quota, cpu_weight, io_weight, cpu_freq_khz;
	struct policy_range slice_ns; /* Slice=, latency-critical only */
	bool weights_floor;    /* its CPU weight held at the floor: Weights=floor, the default */
	bool weights_floor_io; /* its I/O weight too: only with Weights=floor written */
};

struct policy_set {
	struct policy *v;
	size_t n;
};

/*
 * Parse and validate policy files (each path a *.policy file or a
 * directory of them, read in name order) as one set: duplicates and
 * overlapping cgroups across files are errors. 0 when valid; -EINVAL when
 * errs holds problems (*out untouched); -ENOMEM.
 */
int policy_set_load(char *const *paths, size_t n, struct policy_set **out,
		    struct policy_errors *errs);
void policy_set_free(struct policy_set *s);

/*
 * One line for humans, e.g. "web: latency-critical /lc.slice/web.service
 * p99 <= 2ms (window 2s, min 200 requests); limits: CPUWeight 100..1000".
 * snprintf's contract.
 */
/* The [Limits] range of knob k of p (CPUQuota= for the quota ...); NULL for none. */
const struct policy_range *policy_range_of(const struct policy *p, enum action_knob k);
int policy_describe(const struct policy *p, char *buf, size_t len);

#endif
