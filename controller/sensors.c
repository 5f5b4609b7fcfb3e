// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/sensors.h"

int sensors_open(const struct sensors_opts *o, struct sensor **sensor, struct contention **cont)
{
	struct contention_opts co = { .signals = o->signals,
				      .cgroup_base = o->cgroup_base,
				      .max_cgroups = TW_MAX_CGROUPS };
	const char *why = NULL;
	int r;

	*cont = NULL;
	r = sensor_open(o->sensor, sensor, &why);
	if (r)
		return log_error_errno(r, "Failed to start sensing: %s (%m)",
				       why ? why : "unknown");
	if (!o->signals)
		return 0;
	r = contention_open(&co, cont, &why);
	if (r) {
		log_warning_errno(r, "Failed to load the contention signals (%s: %m), ignoring: %s",
				  why ? why : "unknown", o->without);
		*cont = NULL;
	} else if (*contention_missing(*cont)) {
		log_info("contention signals: %s", contention_missing(*cont));
	}
	return 0;
}

void sensors_log_mode(const struct sensor *s)
{
	bool on[TW_PHASES];
	const char *why;

	log_info("sensing mode: %s (%s)", sensor_mode_name(sensor_mode(s)), sensor_mode_reason(s));
	/* Said once: the phase stays null in every sample. */
	sensor_phases(s, on, &why);
	if (why)
		log_info("%s", why);
}
