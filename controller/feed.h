/* SPDX-License-Identifier: GPL-2.0 */
/*
 * From one tick's samples of a service to the engine's input: the
 * diagnosis, the CPU use, and the window. Shared by `run` (manager.c) and
 * `replay` (replay.c), so that a replay feeds the engine exactly what the
 * daemon fed it.
 *
 * Ticks fall on multiples of Period= on CLOCK_MONOTONIC (feed_next_tick),
 * and a service's windows on multiples of its window in ticks
 * (tick index / window ticks): two processes sampling side by side cut the
 * same windows. Ticks before a service's first window boundary only warm
 * up its diagnosis.
 */
#ifndef TW_FEED_H
#define TW_FEED_H

#include <stdbool.h>
#include <stdint.h>
#include "policies/engine.h"
#include "policies/policy.h"
#include "sensing/contention.h"
#include "sensing/diagnosis.h"
#include "sensing/sensor.h"

struct feed {
	struct qos_sample window; /* ticks of the current window, merged */
	unsigned ticks;		  /* in it so far; 0 between windows */
	unsigned window_ticks;	  /* ticks per window */
	uint64_t window_index;	  /* tick index / window_ticks of the current window */
	struct diag_state *diag;
	struct diagnosis last_diag;
	bool have_diag;
};

/* p's window in ticks of Period= period_ns (engine_window_ticks()). 0 or -ENOMEM. */
int feed_init(struct feed *f, const struct policy *p, uint64_t period_ns);
void feed_free(struct feed *f);
/* A new instance of the service: window and diagnosis start afresh. 0 or -ENOMEM. */
int feed_reset(struct feed *f);
/* The service is gone: the window under way is dropped. */
void feed_absent(struct feed *f);

/*
 * The first tick boundary (a multiple of the period on CLOCK_MONOTONIC) at
 * least half a period after usec.
 */
uint64_t feed_next_tick(uint64_t usec, uint64_t period_ns);
/* The index of the tick at usec (a boundary): usec / period. */
uint64_t feed_tick_index(uint64_t usec, uint64_t period_ns);

/*
 * One tick of the service: q its request sample, c its contention sample
 * (NULL when none this tick), contention whether a contention sensor runs,
 * iv the tick's length in s. Fills in's diagnosis, CPU use and, when the
 * tick ends a window, the window's figures (have_window; latency points
 * into f, valid until the next feed_tick()). in must be zeroed and knob[]
 * filled by the caller. True when a window ended.
 */
bool feed_tick(struct feed *f, uint64_t tick, const struct qos_sample *q,
	       const struct contention_sample *c, bool contention, double iv,
	       struct engine_input *in);

#endif
