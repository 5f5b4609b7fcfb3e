// SPDX-License-Identifier: GPL-2.0
/*
 * CPU frequency limits through libcpupower. Only the policy maximum
 * (scaling_max_freq) is ever changed: the governor and the minimum stay
 * as the administrator left them, so a lower cap saves energy and a
 * higher one gives latency-critical work room, without fighting the
 * governor over the current frequency.
 */
#define _GNU_SOURCE
#include <cpufreq.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "knobs/freq.h"

/* In libcpupower since Linux 4.x, but Debian's libcpupower-dev lacks cpupower.h. */
int cpupower_is_cpu_online(unsigned int cpu);

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

int knob_cpulist_parse(const char *s, unsigned **cpus, size_t *n)
{
	unsigned *v = NULL, *nv;
	size_t cnt = 0, cap = 0;
	const char *p = s;

	while (*p && *p != '\n') {
		char *end;
		unsigned long lo, hi;

		lo = hi = strtoul(p, &end, 10);
		if (end == p)
			goto bad;
		if (*end == '-') {
			p = end + 1;
			hi = strtoul(p, &end, 10);
			if (end == p || hi < lo)
				goto bad;
		}
		if (hi > 65535)
			goto bad;
		for (unsigned long c = lo; c <= hi; c++) {
			if (cnt == cap) {
				cap = cap ? cap * 2 : 8;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					free(v);
					return -ENOMEM;
				}
				v = nv;
			}
			v[cnt++] = c;
		}
		p = end;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			goto bad;
	}
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_unsigned);
	*cpus = v;
	*n = cnt;
	return 0;
bad:
	free(v);
	return -EINVAL;
}

void knob_cpulist_format(const unsigned *cpus, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		size_t j = i;

		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (j > i)
			off += snprintf(buf + off, len - off, "%s%u-%u", off ? "," : "", cpus[i],
					cpus[j]);
		else
			off += snprintf(buf + off, len - off, "%s%u", off ? "," : "", cpus[i]);
		i = j;
	}
}

int knob_cpus_all(unsigned **cpus, size_t *n)
{
	char buf[4096];
	ssize_t len;
	int fd;

	/* Same view as libcpupower: the possible CPUs under its sysfs root. */
	fd = open(KNOB_CPU_SYSFS "/possible", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	if (len < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	close(fd);
	buf[len] = '\0';
	return knob_cpulist_parse(buf, cpus, n);
}

int knob_cpu_online(unsigned cpu)
{
	return cpupower_is_cpu_online(cpu);
}

int knob_freq_probe(unsigned *cpus, size_t *n, const char **why)
{
	char path[128];
	struct stat st;
	size_t kept = 0;

	/* No driver at all is the common case on VMs: say so plainly. */
	if (stat(KNOB_CPU_SYSFS "/cpu0/cpufreq", &st) < 0) {
		*why = "frequency control unavailable: no cpufreq driver (" KNOB_CPU_SYSFS
		       "/cpu0/cpufreq missing)";
		*n = 0;
		return -ENODEV;
	}
	for (size_t i = 0; i < *n; i++) {
		unsigned long lo, hi;

		snprintf(path, sizeof(path), KNOB_CPU_SYSFS "/cpu%u/cpufreq", cpus[i]);
		if (cpupower_is_cpu_online(cpus[i]) != 1 || stat(path, &st) < 0 ||
		    knob_freq_limits(cpus[i], &lo, &hi) < 0)
			continue;
		cpus[kept++] = cpus[i];
	}
	*n = kept;
	if (!kept) {
		*why = "frequency control unavailable: no online CPU of the cgroup has cpufreq limits";
		return -ENODEV;
	}
	return 0;
}

int knob_freq_limits(unsigned cpu, unsigned long *min, unsigned long *max)
{
	return cpufreq_get_hardware_limits(cpu, min, max);
}

int knob_freq_get_max(unsigned cpu, unsigned long *khz)
{
	struct cpufreq_policy *p;

	p = cpufreq_get_policy(cpu);
	if (!p)
		return cpupower_is_cpu_online(cpu) == 1 ? -ENODEV : -ENOENT;
	*khz = p->max;
	cpufreq_put_policy(p);
	return 0;
}

int knob_freq_set_max(unsigned cpu, unsigned long khz)
{
	unsigned long now;
	int r;

	r = cpufreq_modify_policy_max(cpu, khz);
	if (r < 0)
		return r;
	r = knob_freq_get_max(cpu, &now);
	if (r < 0)
		return r;
	return now == khz ? 0 : -EIO;
}
