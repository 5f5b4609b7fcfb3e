/* SPDX-License-Identifier: GPL-2.0 */
/* Knobs and actions: what the engine decides and the controller applies. */
#ifndef TW_ACTION_H
#define TW_ACTION_H

#include <stdbool.h>

/* Values in the canonical units of policies/policy.h. */
enum knob_kind {
	KNOB_CPU_QUOTA,  /* fraction of one CPU; INFINITY = no limit */
	KNOB_CPU_WEIGHT, /* 1..10000 */
	KNOB_IO_WEIGHT,  /* 1..10000 */
	KNOB_CPU_FREQ,   /* max frequency, kHz */
	KNOB_MAX,
};

struct action {
	int service;          /* index in the policy set */
	enum knob_kind knob;
	double old_value, new_value;
	char reason[256];     /* in words: which signal, which value, which rule */
};

const char *knob_kind_name(enum knob_kind k); /* "cpu.max", "cpu.weight", "io.weight", "cpufreq" */

#endif
