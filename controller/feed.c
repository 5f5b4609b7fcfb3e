// SPDX-License-Identifier: GPL-2.0
/* One tick's samples of a service -> the engine's input (feed.h). */
#include <errno.h>
#include <math.h>
#include <string.h>
#include "controller/feed.h"
#include "sensing/hist.h"

int feed_init(struct feed *f, const struct policy *p, uint64_t period_ns)
{
	memset(f, 0, sizeof(*f));
	f->window_ticks = engine_window_ticks(p, period_ns);
	f->diag = diag_state_new();
	return f->diag ? 0 : -ENOMEM;
}

void feed_free(struct feed *f)
{
	diag_state_free(f->diag);
	f->diag = NULL;
}

int feed_reset(struct feed *f)
{
	f->ticks = 0;
	f->have_diag = false;
	diag_state_free(f->diag);
	f->diag = diag_state_new();
	return f->diag ? 0 : -ENOMEM;
}

void feed_absent(struct feed *f)
{
	f->ticks = 0;
}

uint64_t feed_next_tick(uint64_t usec, uint64_t period_ns)
{
	uint64_t p = period_ns / 1000 ? period_ns / 1000 : 1;

	/* At least half a period on: a first tick of a few ms would be noise. */
	return ((usec + p / 2) / p + 1) * p;
}

uint64_t feed_tick_index(uint64_t usec, uint64_t period_ns)
{
	uint64_t p = period_ns / 1000 ? period_ns / 1000 : 1;

	return (usec + p / 2) / p;
}

/* Fold this tick into the window; true when the window is complete. */
static bool window_add(struct feed *f, uint64_t tick, const struct qos_sample *q)
{
	uint64_t w = tick / f->window_ticks;

	/* A window missing ticks (a gap, a late start) is not a window. */
	if (f->ticks && w != f->window_index)
		f->ticks = 0;
	if (f->ticks == 0) {
		if (tick % f->window_ticks)
			return false; /* warming up: not at a window's start */
		f->window = *q;
		f->window_index = w;
	} else {
		f->window.requests += q->requests;
		f->window.interval_s += q->interval_s;
		hist_merge(&f->window.latency, &q->latency);
		for (unsigned i = 0; i < TW_PHASES; i++) {
			hist_merge(&f->window.phase[i], &q->phase[i]);
			f->window.phase_ns[i] += q->phase_ns[i];
		}
		f->window.span_ns += q->span_ns;
	}
	f->ticks++;
	return (tick + 1) % f->window_ticks == 0;
}

bool feed_tick(struct feed *f, uint64_t tick, const struct qos_sample *q,
	       const struct contention_sample *c, bool contention, double iv,
	       struct engine_input *in)
{
	if (c) {
		diag_update(f->diag, q, c, &f->last_diag);
		f->have_diag = true;
		/* Sizes the first quota cut of a best-effort service with none. */
		if (isfinite(c->cpu_usage_s) && iv > 0)
			in->cpu_usage = c->cpu_usage_s / iv;
		/* Whether it did block I/O at all: an idle one is not I/O-cut. */
		if (isfinite(c->io_read_bytes) && isfinite(c->io_write_bytes) && iv > 0)
			in->io_usage = (c->io_read_bytes + c->io_write_bytes) / iv;
	} else {
		diag_update(f->diag, q, NULL, &f->last_diag);
		f->have_diag = contention;
	}
	if (!window_add(f, tick, q))
		return false;
	in->have_window = true;
	in->requests = f->window.requests;
	in->latency = &f->window.latency; /* the engine takes the percentile */
	in->diag = f->have_diag ? &f->last_diag : NULL;
	f->ticks = 0;
	return true;
}
