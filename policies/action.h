/* SPDX-License-Identifier: GPL-2.0 */
/* Knobs and actions: what the engine decides and the controller applies. */
#ifndef TW_ACTION_H
#define TW_ACTION_H

#include <stdbool.h>

/* Values in the canonical units of policies/policy.h. */
enum action_knob {
	KNOB_CPU_QUOTA,	  /* fraction of one CPU; INFINITY = no limit */
	KNOB_CPU_WEIGHT,  /* 1..10000 */
	KNOB_IO_WEIGHT,	  /* 1..10000 */
	KNOB_CPU_FREQ,	  /* max frequency, kHz */
	KNOB_SCHED_SLICE, /* EEVDF slice of the service's threads, ns; 0: their own (default) */
	KNOB_MAX,
};

struct action {
	int service; /* index in the policy set */
	enum action_knob knob;
	double old_value, new_value;
	char reason[384]; /* in words: which signal, which value, which rule */
};

/* "cpu.max", "cpu.weight", "io.weight", "cpufreq", "sched.slice" */
const char *action_knob_name(enum action_knob k);
/* The kind named name (as action_knob_name() says it), or KNOB_MAX when none. */
enum action_knob action_knob_from_name(const char *name);
/*
 * A knob's value for people, as the log, the reasons and `status` show it:
 * "max", a quota in percent with quota_digits significant digits (0: whole
 * percent), a frequency in MHz, a weight, a slice as a duration ("default"
 * for 0: the threads' own); "?" for NaN (unknown). A kind of
 * KNOB_MAX (unknown) prints the number.
 */
void action_format_value(char *buf, size_t len, enum action_knob k, double v, int quota_digits);

#endif
