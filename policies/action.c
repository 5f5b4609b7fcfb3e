// SPDX-License-Identifier: GPL-2.0
#include "policies/action.h"

const char *knob_kind_name(enum knob_kind k)
{
	static const char *const names[KNOB_MAX] = {
		[KNOB_CPU_QUOTA] = "cpu.max",
		[KNOB_CPU_WEIGHT] = "cpu.weight",
		[KNOB_IO_WEIGHT] = "io.weight",
		[KNOB_CPU_FREQ] = "cpufreq",
	};

	return (int)k >= 0 && k < KNOB_MAX ? names[k] : "unknown";
}
