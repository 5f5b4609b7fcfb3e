// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "policies/action.h"
#include "policies/value.h"

const char *action_knob_name(enum action_knob k)
{
	static const char *const names[KNOB_MAX] = {
		[KNOB_CPU_QUOTA] = "cpu.max",	    [KNOB_CPU_WEIGHT] = "cpu.weight",
		[KNOB_IO_WEIGHT] = "io.weight",	    [KNOB_CPU_FREQ] = "cpufreq",
		[KNOB_SCHED_SLICE] = "sched.slice",
	};

	return (int)k >= 0 && k < KNOB_MAX ? names[k] : "unknown";
}

enum action_knob action_knob_from_name(const char *name)
{
	for (int k = 0; k < KNOB_MAX; k++)
		if (!strcmp(name, action_knob_name(k)))
			return k;
	return KNOB_MAX;
}

void action_format_value(char *buf, size_t len, enum action_knob k, double v, int quota_digits)
{
	if (isnan(v))
		snprintf(buf, len, "?");
	else if (isinf(v))
		snprintf(buf, len, "max");
	else if (k == KNOB_CPU_QUOTA && quota_digits)
		snprintf(buf, len, "%.*g%%", quota_digits, v * 100);
	else if (k == KNOB_CPU_QUOTA)
		snprintf(buf, len, "%.0f%%", v * 100);
	else if (k == KNOB_SCHED_SLICE && v <= 0)
		snprintf(buf, len, "default");
	else if (k == KNOB_SCHED_SLICE)
		value_format_ns(buf, len, v, VALUE_NS_SIGNIFICANT, 3);
	else if (k == KNOB_CPU_FREQ)
		snprintf(buf, len, "%.0fMHz", v / 1000);
	else if (k == KNOB_CPU_WEIGHT && v == 0)
		snprintf(buf, len, "idle");
	else
		snprintf(buf, len, "%.0f", v);
}
