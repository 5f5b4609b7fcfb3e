/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Being a systemd service: sd_notify() states (READY, RELOADING with
 * MONOTONIC_USEC, STATUS), a watchdog fed only by the control loop's
 * progress, and errors with journal priorities. Everything here is a
 * no-op outside systemd ($NOTIFY_SOCKET, $WATCHDOG_USEC unset).
 */
#ifndef TW_DAEMON_H
#define TW_DAEMON_H

#include <stdint.h>
#include <systemd/sd-event.h>
#include "policies/config.h"

struct daemon_watchdog;

/*
 * When the service manager wants a watchdog ($WATCHDOG_USEC), ping it
 * every quarter of its interval, but only while the last completed tick
 * (daemon_watchdog_progress()) is at most period_usec plus half the
 * interval old: a loop that stops ticking, or hangs inside a tick, stops
 * the pings and is killed. *out is NULL without a watchdog. 0 or -errno.
 */
int daemon_watchdog_new(sd_event *e, uint64_t period_usec, struct daemon_watchdog **out);
void daemon_watchdog_free(struct daemon_watchdog *w);
/* A tick completed at CLOCK_MONOTONIC usec now. w may be NULL. */
void daemon_watchdog_progress(struct daemon_watchdog *w, uint64_t now_usec);

/* RELOADING=1 with MONOTONIC_USEC= (what Type=notify-reload requires). */
void daemon_notify_reloading(void);
/* READY=1 and STATUS=status. */
void daemon_notify_ready(const char *status);

/*
 * Policy/config errors, one "FILE:LINE: message" line each: with journal
 * priority prefixes when stderr is the journal, plain otherwise.
 */
void daemon_log_errors(const struct policy_errors *errs);

/*
 * The main config at path, or at dflt when path is NULL and dflt exists,
 * else the built-in defaults. Errors are logged (FILE:LINE each). 0,
 * -EINVAL (invalid) or -errno.
 */
int daemon_load_config(const char *path, const char *dflt, struct tw_config **cfg);

/*
 * Test-only fault injection: with $TAILWARDEN_TEST_STALL_AFTER_TICKS=N the
 * control loop hangs for good in its (N+1)-th tick, so that tests can see
 * the watchdog catch it. Never set it anywhere else.
 */
void daemon_test_stall(uint64_t ticks_done);

#endif
