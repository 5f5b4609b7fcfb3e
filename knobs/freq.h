/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CPU frequency limits through libcpupower (freq.c), for the actuators
 * (knob.c). Not named cpufreq.h: that is libcpupower's header.
 * libcpupower reads and writes under the fixed /sys/devices/system/cpu,
 * so tests give it a fake tree by bind-mounting one over that directory in
 * a private mount namespace. Internal to knobs/.
 */
#ifndef TW_KNOB_FREQ_H
#define TW_KNOB_FREQ_H

#include <stddef.h>

#define KNOB_CPU_SYSFS "/sys/devices/system/cpu"

/* Parse a kernel CPU list ("0-3,8\n") into a sorted array. 0, -EINVAL or -ENOMEM. */
int knob_cpulist_parse(const char *s, unsigned **cpus, size_t *n);
/* Format cpus as a CPU list ("0-3,8") into buf. */
void knob_cpulist_format(const unsigned *cpus, size_t n, char *buf, size_t len);
/* Every CPU the system has (online or not). 0 or -errno. */
int knob_cpus_all(unsigned **cpus, size_t *n);
/*
 * Keep, in place, the CPUs of cpus[] that are online and have cpufreq
 * limits. 0 when at least one is left; -ENODEV and *why (static) when none.
 */
int knob_freq_probe(unsigned *cpus, size_t *n, const char **why);
/* Hardware limits (cpuinfo_{min,max}_freq), kHz. 0 or -errno. */
int knob_freq_limits(unsigned cpu, unsigned long *min, unsigned long *max);
/* Current policy maximum (scaling_max_freq), kHz. 0 or -errno. */
int knob_freq_get_max(unsigned cpu, unsigned long *khz);
/* Set the policy maximum, then read it back: -EIO if the kernel kept another. */
int knob_freq_set_max(unsigned cpu, unsigned long khz);
/* 1 online, 0 offline, -errno. */
int knob_cpu_online(unsigned cpu);

#endif
