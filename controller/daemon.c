// SPDX-License-Identifier: GPL-2.0
/*
 * sd-daemon glue. Why not sd_event_set_watchdog(): it pings from the event
 * loop itself, so a control loop whose tick timer stopped (or a tick that
 * spins between event sources) would be reported alive. Here the ping is
 * conditional on the tick's own progress.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "common/log.h"
#include "controller/daemon.h"

struct daemon_watchdog {
	sd_event_source *src;
	uint64_t interval; /* $WATCHDOG_USEC */
	uint64_t max_age;  /* a tick older than this: no ping */
	uint64_t last_tick;
	bool stale_logged;
};

static int on_watchdog(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct daemon_watchdog *w = userdata;

	/* usec is when the timer was due: a tick may have completed since. */
	if (usec <= w->last_tick || usec - w->last_tick <= w->max_age) {
		sd_notify(0, "WATCHDOG=1");
		w->stale_logged = false;
	} else if (!w->stale_logged) {
		w->stale_logged = true;
		log_error(
			"the control loop has not completed a tick for %.1f s; not feeding the watchdog",
			(usec - w->last_tick) / 1e6);
	}
	if (sd_event_source_set_time(src, usec + w->interval / 4) < 0)
		return 0;
	return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

int daemon_watchdog_new(sd_event *e, uint64_t period_usec, struct daemon_watchdog **out)
{
	struct daemon_watchdog *w;
	uint64_t usec, now;
	int r;

	*out = NULL;
	if (sd_watchdog_enabled(false, &usec) <= 0)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->interval = usec;
	w->max_age = period_usec + usec / 2;
	sd_event_now(e, CLOCK_MONOTONIC, &now);
	w->last_tick = now;
	r = sd_event_add_time(e, &w->src, CLOCK_MONOTONIC, now + usec / 4, usec / 20, on_watchdog,
			      w);
	if (r < 0) {
		free(w);
		return r;
	}
	if (period_usec > usec / 2)
		log_warning(
			"Period= (%.1f s) is longer than half of WatchdogSec= (%.1f s): a stalled loop is caught only after %.1f s",
			period_usec / 1e6, usec / 1e6, (w->max_age + usec) / 1e6);
	*out = w;
	return 0;
}

void daemon_watchdog_free(struct daemon_watchdog *w)
{
	if (!w)
		return;
	sd_event_source_disable_unref(w->src);
	free(w);
}

void daemon_watchdog_progress(struct daemon_watchdog *w, uint64_t now_usec)
{
	if (w)
		w->last_tick = now_usec;
}

void daemon_notify_reloading(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	sd_notifyf(0, "RELOADING=1\nSTATUS=reloading the policies\nMONOTONIC_USEC=%llu",
		   (unsigned long long)ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000);
}

void daemon_notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void daemon_log_errors(const struct policy_errors *errs)
{
	if (!log_journal()) {
		policy_errors_print(errs, stderr);
		return;
	}
	for (size_t i = 0; i < policy_errors_shown(errs); i++)
		fprintf(stderr, SD_ERR "%s:%u: %s\n", errs->v[i].file, errs->v[i].line,
			errs->v[i].msg);
	if (errs->n > policy_errors_shown(errs))
		fprintf(stderr, SD_ERR "%zu more errors not shown\n",
			errs->n - policy_errors_shown(errs));
}

void daemon_test_stall(uint64_t ticks_done)
{
	static long long after = -2;
	const char *e;

	if (after == -2) {
		e = getenv("TAILWARDEN_TEST_STALL_AFTER_TICKS");
		after = e ? atoll(e) : -1;
		if (after >= 0)
			log_warning(
				"test fault injection: the control loop will hang after %lld tick(s) (TAILWARDEN_TEST_STALL_AFTER_TICKS)",
				after);
	}
	if (after < 0 || (long long)ticks_done < after)
		return;
	log_error("test fault injection: tick %llu hangs now (TAILWARDEN_TEST_STALL_AFTER_TICKS)",
		  (unsigned long long)ticks_done + 1);
	for (;;)
		pause();
}

int daemon_load_config(const char *path, const char *dflt, struct tw_config **cfg)
{
	struct policy_errors errs = { 0 };
	int r;

	if (!path && dflt && access(dflt, F_OK) == 0)
		path = dflt;
	r = config_load(path, cfg, &errs);
	if (r == -EINVAL) {
		daemon_log_errors(&errs);
		log_error("%s is invalid", path);
	} else if (r) {
		log_error_errno(r, "Failed to read %s", path ? path : "the default config");
	}
	policy_errors_clear(&errs);
	return r;
}
