/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's own CPUs (AvoidServiceCPUs=): while the threads of the
 * latency-critical services may run only on some of the CPUs the daemon
 * was given, the daemon keeps to the others, so that its ticks never
 * queue a request behind them. It only narrows the set it started with
 * (CPUAffinity= of its unit, taskset), never widens it, and goes back to
 * it when the services' CPUs cover it all or none is known.
 */
#ifndef TW_AFFINITY_H
#define TW_AFFINITY_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t */
#endif
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How often the services' threads are looked at again. */
#define AFFINITY_REFRESH_USEC (5 * 1000000ULL)

struct affinity {
	bool on;	    /* AvoidServiceCPUs=yes, and the start set was read */
	cpu_set_t start;    /* the CPUs the daemon started with */
	cpu_set_t now;	    /* the CPUs it keeps to now */
	uint64_t next_usec; /* the next look at the services' threads */
	bool failed_said;   /* a failure to set it was said */
};

/*
 * Read the daemon's start set. Off when want is false, or when it cannot be
 * read (said). Never fails.
 */
void affinity_init(struct affinity *a, bool want);

/*
 * Look at the threads of the cgroups cgs (paths relative to the cgroup2 root,
 * "/a/b", and their descendants) when due, and keep the daemon off the CPUs
 * they may run on where that leaves it some. Logs each change.
 */
void affinity_update(struct affinity *a, const char *root, const char *const *cgs, size_t n,
		     uint64_t now_usec);

/* "0-3,6": the set, snprintf's contract. */
int affinity_format(const cpu_set_t *set, char *buf, size_t len);

#endif
