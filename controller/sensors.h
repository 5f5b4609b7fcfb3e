/* SPDX-License-Identifier: GPL-2.0 */
/* Opening both sensors, as `run` and `top` do: requests required, contention a bonus. */
#ifndef TW_SENSORS_H
#define TW_SENSORS_H

#include "sensing/contention.h"
#include "sensing/sensor.h"

struct sensors_opts {
	const struct sensor_opts *sensor;
	unsigned signals;	 /* contention signals to load; 0: none */
	const char *cgroup_base; /* for the contention sensor's cgroupfs reads */
	const char *without;	 /* what is lost without contention, for the warning */
};

/*
 * Open the request sensor, then the contention sensor. A contention sensor
 * that cannot load is a warning and *cont NULL. Logs. 0 or -errno (then
 * nothing is open).
 */
int sensors_open(const struct sensors_opts *o, struct sensor **sensor, struct contention **cont);
/* "sensing mode: MODE (why)": scripts wait for this line. */
void sensors_log_mode(const struct sensor *s);

#endif
