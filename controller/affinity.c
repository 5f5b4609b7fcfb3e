// SPDX-License-Identifier: GPL-2.0
/*
 * AvoidServiceCPUs=: the daemon keeps off the CPUs of the latency-critical
 * services (affinity.h). Measured on a 2-CPU guest with nginx on CPU 0: a
 * tick of the daemon there held CPU 0 for 0.6-0.8 ms, and the requests
 * that came in meanwhile waited behind it; it was 6-13 % of the slow
 * requests' time in the seconds of the co-location benchmark that the
 * daemon lost after the load doubled.
 *
 * A service's CPUs are what its threads may run on (sched_getaffinity():
 * their own affinity within their cpuset), read from the cgroup2 tree
 * every AFFINITY_REFRESH_USEC, not each tick: a service with thousands of
 * threads costs as many system calls.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/log.h"
#include "controller/affinity.h"

/* How deep, and how many directories, a service's subtree is walked. */
#define WALK_DEPTH 8
#define WALK_DIRS 512

int affinity_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t o = 0;
	int n = 0;

	if (len)
		buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE; c++) {
		char *at;
		size_t room;
		int e = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		/* Past the end: count only (no pointer beyond buf is formed). */
		at = o < len ? buf + o : NULL;
		room = o < len ? len - o : 0;
		n = e == c ? snprintf(at, room, "%s%d", o ? "," : "", c) :
			     snprintf(at, room, "%s%d-%d", o ? "," : "", c, e);
		if (n < 0)
			return n;
		o += (size_t)n;
		c = e;
	}
	return (int)o;
}

/* OR into set the CPUs each thread listed in dir/cgroup.threads may run on. */
static void threads_cpus(int dirfd, cpu_set_t *set, unsigned *threads)
{
	int fd = openat(dirfd, "cgroup.threads", O_RDONLY | O_CLOEXEC);
	FILE *f;
	char line[32];

	if (fd < 0)
		return;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		cpu_set_t t;
		long tid = strtol(line, NULL, 10);

		if (tid <= 0 || sched_getaffinity((pid_t)tid, sizeof(t), &t))
			continue; /* gone since: no longer the service's */
		CPU_OR(set, set, &t);
		(*threads)++;
	}
	fclose(f);
}

/* dirfd's threads and its descendants', depth-first; closes dirfd. */
static void walk(int dirfd, int depth, unsigned *dirs, cpu_set_t *set, unsigned *threads)
{
	DIR *d;
	struct dirent *de;

	threads_cpus(dirfd, set, threads);
	if (depth >= WALK_DEPTH || !(d = fdopendir(dirfd))) {
		close(dirfd);
		return;
	}
	while ((de = readdir(d)) && *dirs < WALK_DIRS) {
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub < 0)
			continue;
		(*dirs)++;
		walk(sub, depth + 1, dirs, set, threads);
	}
	closedir(d);
}

/* Every thread of the process, to set: the loop is one thread, libraries may add some. */
static int set_all(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int r = 0;

	if (!d)
		return sched_setaffinity(0, sizeof(*set), set) ? -errno : 0;
	while ((de = readdir(d))) {
		long tid = strtol(de->d_name, NULL, 10);

		if (tid > 0 && sched_setaffinity((pid_t)tid, sizeof(*set), set) && errno != ESRCH &&
		    !r)
			r = -errno;
	}
	closedir(d);
	return r;
}

void affinity_init(struct affinity *a, bool want)
{
	memset(a, 0, sizeof(*a));
	if (!want)
		return;
	if (sched_getaffinity(0, sizeof(a->start), &a->start)) {
		log_warning_errno(
			errno,
			"AvoidServiceCPUs=yes: cannot read the CPUs I may run on (%m); I run wherever the scheduler puts me");
		return;
	}
	a->now = a->start;
	a->on = true;
}

void affinity_update(struct affinity *a, const char *root, const char *const *cgs, size_t n,
		     uint64_t now_usec)
{
	cpu_set_t lc, off, want;
	unsigned threads = 0, ndirs = 0;
	char s_want[256], s_lc[256];
	int r, rootfd;

	if (!a->on || now_usec < a->next_usec)
		return;
	a->next_usec = now_usec + AFFINITY_REFRESH_USEC;
	CPU_ZERO(&lc);
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; rootfd >= 0 && i < n; i++) {
		/* "/a/b" relative to the root; "/" is the root itself. */
		int fd = openat(rootfd, cgs[i][1] ? cgs[i] + 1 : ".",
				O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd >= 0)
			walk(fd, 0, &ndirs, &lc, &threads);
	}
	if (rootfd >= 0)
		close(rootfd);
	CPU_AND(&off, &a->start, &lc);
	CPU_XOR(&off, &a->start, &off); /* start minus lc */
	want = threads && CPU_COUNT(&off) && CPU_COUNT(&lc) ? off : a->start;
	if (CPU_EQUAL(&want, &a->now))
		return;
	affinity_format(&want, s_want, sizeof(s_want));
	affinity_format(&lc, s_lc, sizeof(s_lc));
	r = set_all(&want);
	if (r) {
		if (!a->failed_said)
			log_warning_errno(
				r,
				"AvoidServiceCPUs=yes: cannot keep to CPUs %s (%m); I stay on the ones I had",
				s_want);
		a->failed_said = true;
		return;
	}
	a->failed_said = false;
	a->now = want;
	if (CPU_EQUAL(&want, &a->start))
		log_info("on CPUs %s again, all I was given: %s", s_want,
			 !threads ? "the latency-critical services have no threads" :
			 CPU_COUNT(&off) == 0 ?
				    "the latency-critical services may run on every one" :
				    "the latency-critical services may run on none of them");
	else
		log_info(
			"keeping to CPUs %s: the latency-critical services' threads may run on %s (AvoidServiceCPUs=yes)",
			s_want, s_lc);
}
