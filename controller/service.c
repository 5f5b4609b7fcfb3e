// SPDX-License-Identifier: GPL-2.0
/* One service's life, for `run` and `replay` alike (service.h). */
#include <errno.h>
#include <math.h>
#include <string.h>
#include "controller/service.h"

int service_init(struct service *s, const struct policy *p, int idx, uint64_t period_ns)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	s->idx = idx;
	return feed_init(&s->feed, p, period_ns);
}

void service_done(struct service *s)
{
	feed_free(&s->feed);
}

bool service_gone(struct service *s)
{
	if (!s->cgid)
		return false;
	/* No writes while it is gone: what comes back may be another instance. */
	s->last_cgid = s->cgid;
	s->cgid = 0;
	feed_absent(&s->feed);
	return true;
}

/*
 * A new instance: what we recorded and decided about the old one does not
 * apply. The knobs' originals are recorded anew at the next write.
 */
static int service_renew(struct service *s, struct engine *e)
{
	memset(s->written, 0, sizeof(s->written));
	memset(s->wrote, 0, sizeof(s->wrote));
	memset(s->overridden, 0, sizeof(s->overridden));
	engine_service_reset(e, s->idx);
	return feed_reset(&s->feed);
}

int service_found(struct service *s, struct engine *e, uint64_t id, uint64_t *old)
{
	uint64_t was = s->cgid ? s->cgid : s->last_cgid;
	int r = 0;

	if (old)
		*old = was;
	if (was && was != id)
		r = service_renew(s, e) < 0 ? -ENOMEM : 1;
	s->cgid = id;
	s->last_cgid = 0;
	return r;
}

void service_input_init(struct engine_input *in)
{
	memset(in, 0, sizeof(*in));	    /* no window, no latency */
	in->cpu_usage = in->io_usage = NAN; /* until the contention sample says */
	for (int k = 0; k < KNOB_MAX; k++)
		in->knob[k] = NAN;
}

/* Equal as a knob's file holds it (a property's rounding, "max"). */
static bool same_value(double a, double b)
{
	if (!isfinite(a) || !isfinite(b))
		return isfinite(a) == isfinite(b);
	return fabs(a - b) <= 1e-6 * fmax(1, fabs(b));
}

int service_knob(struct service *s, struct engine *e, enum action_knob k, double v, bool dry_run,
		 double *in)
{
	*in = NAN;
	if (s->overridden[k])
		return 0;
	if (s->wrote[k] && !dry_run && !same_value(v, s->written[k])) {
		s->overridden[k] = true;
		engine_knob_overridden(e, s->idx, k);
		return 1;
	}
	*in = dry_run && s->wrote[k] ? s->written[k] : v;
	return 0;
}

void service_wrote(struct service *s, enum action_knob k, double v)
{
	s->written[k] = v;
	s->wrote[k] = true;
}

void service_restored(struct service *s)
{
	memset(s->wrote, 0, sizeof(s->wrote));
}

bool service_tick(struct service *s, uint64_t tick, const struct qos_sample *q,
		  const struct contention_sample *c, bool contention, double iv,
		  struct engine_input *in)
{
	return feed_tick(&s->feed, tick, q, c, contention, iv, in);
}
