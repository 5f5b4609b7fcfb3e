/* SPDX-License-Identifier: GPL-2.0 */
/* Log-linear latency histogram: the user-space half of bpf/sensor_abi.h. */
#ifndef TW_HIST_H
#define TW_HIST_H

#include <stdint.h>
#include <linux/types.h>
#include "bpf/sensor_abi.h"

/* Relative error of a bucket's midpoint against any value in it. */
#define HIST_MAX_REL_ERROR (1.0 / (2 * HIST_SUB))

/* A window's histogram: counts per bucket and their total. */
struct hist {
	uint64_t count[HIST_BUCKETS];
	uint64_t total;
};

/* Bucket index of a value in ns (same math as the BPF side). */
unsigned hist_bucket(uint64_t ns);
/* Smallest value in bucket b, in ns. */
uint64_t hist_lower(unsigned b);
/* Width of bucket b, in ns (>= 1). */
uint64_t hist_width(unsigned b);
/* Value reported for bucket b: its midpoint, in ns. */
double hist_mid(unsigned b);

/*
 * Window histogram from two cumulative snapshots of 32-bit counters.
 * A bucket that went down (a reply moved out of it into a later one) counts 0.
 */
void hist_diff(struct hist *h, const __u32 *now, const __u32 *prev);
/* Add one value (used by tests and by user-space merging). */
void hist_add(struct hist *h, uint64_t ns, uint64_t n);
/* Merge b into a. */
void hist_merge(struct hist *a, const struct hist *b);
/*
 * Percentile q (0 < q <= 1) in ns by nearest rank, as the midpoint of the
 * bucket holding it; returns -1 when the histogram is empty.
 */
double hist_percentile(const struct hist *h, double q);
/* Largest recorded value's bucket midpoint in ns, -1 when empty. */
double hist_max(const struct hist *h);

#endif
