/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit= policies: a systemd unit's cgroup and its resource properties,
 * through sd-bus (org.freedesktop.systemd1). The cgroup is the unit's
 * ControlGroup property; CPU quota, CPU weight and I/O weight are changed
 * with SetUnitProperties(runtime=true), so that `systemctl show` agrees
 * with the cgroup files and a daemon-reload keeps them. Library code:
 * returns -errno, logs nothing above debug. Every call is synchronous with
 * a 2 s timeout, so a stuck manager costs a tick, not the daemon.
 */
#ifndef TW_UNIT_H
#define TW_UNIT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include "policies/action.h"
#include "policies/config.h"
#include "policies/policy.h"

struct unit_bus;

/*
 * Connect to a systemd manager and check that it answers: kind SYSTEM is
 * the system bus, USER the session bus ($DBUS_SESSION_BUS_ADDRESS, else
 * $XDG_RUNTIME_DIR/bus), AUTO the session bus when
 * $DBUS_SESSION_BUS_ADDRESS is set, else the system bus. address, when
 * not NULL, overrides all that (a state file's record). 0 or -errno;
 * on error *why (may be NULL) says what failed, in words (static buffer).
 */
int unit_bus_open(enum config_bus kind, const char *address, struct unit_bus **out,
		  const char **why);
void unit_bus_free(struct unit_bus *b);
/* "system bus" or "user bus", and the address it was reached at. */
const char *unit_bus_name(const struct unit_bus *b);
const char *unit_bus_address(const struct unit_bus *b);

/* What a unit looks like now. Properties are raw (UINT64_MAX: not set). */
struct unit_props {
	char cgroup[PATH_MAX];	/* ControlGroup; "" while the unit is not running */
	char active[32];	/* ActiveState */
	uint64_t raw[KNOB_MAX]; /* CPUQuotaPerSecUSec, CPUWeight, IOWeight; cpufreq unused */
};

/*
 * The unit's cgroup, state and properties. 0; -ENOENT when no such unit is
 * loaded; -ENOTCONN when the bus connection is gone; -errno.
 */
int unit_get(struct unit_bus *b, const char *unit, struct unit_props *out);
/*
 * SetUnitProperties(unit, runtime=true, {property of kind: raw}).
 * -EOPNOTSUPP for the frequency (not a unit property), -ENOENT when no
 * such unit, -errno.
 */
int unit_set(struct unit_bus *b, const char *unit, enum action_knob kind, uint64_t raw);

/*
 * The daemon's connection to systemd for Unit= policies: opened again,
 * at most every retry_usec, while it is missing or lost. Zeroed to start.
 */
struct unit_link {
	struct unit_bus *bus; /* NULL while there is none */
	char why[512];	      /* why there is none; "" while there is one */
	uint64_t retry_usec;  /* no new attempt before this */
};

/*
 * Open the connection when there is none and it is time (now_usec):
 * 1 opened now; 0 nothing to do (open already, or not yet time);
 * -errno the attempt failed (l->why says what).
 */
int unit_link_connect(struct unit_link *l, enum config_bus kind, uint64_t now_usec,
		      uint64_t retry_usec);
/*
 * unit_get() over the link; a connection that broke is dropped (l->why
 * says so) and tried again later. unit_get()'s returns, and -ENOTCONN
 * when there is no connection (now).
 */
int unit_link_get(struct unit_link *l, const char *unit, struct unit_props *out);
void unit_link_close(struct unit_link *l);

/* The property behind a knob ("CPUWeight"), NULL for the frequency. */
const char *unit_property(enum action_knob kind);
/*
 * Raw property <-> canonical value (policy.h units): quota µs per second
 * <-> fraction of a CPU (UINT64_MAX <-> INFINITY); weights as is, where
 * not set means systemd's default, 100.
 */
double unit_raw_to_value(enum action_knob kind, uint64_t raw);
uint64_t unit_value_to_raw(enum action_knob kind, double value);

#endif
