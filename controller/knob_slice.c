// SPDX-License-Identifier: GPL-2.0
/*
 * Custom EEVDF slices (Linux 6.12+). For a SCHED_OTHER or SCHED_BATCH
 * thread, sched_setattr() with sched_runtime != 0 sets its slice (the
 * kernel clamps it to 0.1 ms .. 100 ms), 0 puts back the default, and
 * sched_getattr() returns the slice in sched_runtime. SCHED_FLAG_KEEP_PARAMS
 * would skip the slice, so the thread's own policy and nice are passed
 * back as they are. Older kernels ignore the field: knob_slice_probe()
 * finds out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/log.h"
#include "controller/knob_slice.h"

#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif
#define TW_SCHED_FLAG_RESET_ON_FORK 0x01ULL

/* The kernel's struct sched_attr, SCHED_ATTR_SIZE_VER1 (glibc 2.36 has none). */
struct tw_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};

int knob_slice_get(pid_t tid, struct knob_slice_attr *a)
{
	struct tw_sched_attr at;

	memset(&at, 0, sizeof(at));
	if (syscall(SYS_sched_getattr, tid, &at, sizeof(at), 0) < 0)
		return -errno;
	a->policy = at.sched_policy;
	a->flags = at.sched_flags;
	a->nice = at.sched_nice;
	a->runtime = at.sched_runtime;
	return 0;
}

bool knob_slice_fair(const struct knob_slice_attr *a)
{
	return a->policy == SCHED_OTHER || a->policy == SCHED_BATCH;
}

int knob_slice_set(pid_t tid, const struct knob_slice_attr *cur, uint64_t ns)
{
	struct tw_sched_attr at;
	struct knob_slice_attr now;
	int r;

	if (!knob_slice_fair(cur))
		return -EINVAL;
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.sched_policy = cur->policy;
	at.sched_flags = cur->flags & TW_SCHED_FLAG_RESET_ON_FORK;
	at.sched_nice = cur->nice;
	at.sched_runtime = ns;
	if (syscall(SYS_sched_setattr, tid, &at, 0) < 0)
		return -errno;
	r = knob_slice_get(tid, &now);
	if (r)
		return r;
	log_debug("thread %d: slice %llu -> %llu ns (read back %llu)", (int)tid,
		  (unsigned long long)cur->runtime, (unsigned long long)ns,
		  (unsigned long long)now.runtime);
	return !ns || now.runtime == ns ? 0 : -EIO;
}

int knob_slice_probe(uint64_t *default_ns, const char **why)
{
	pid_t self = gettid();
	struct knob_slice_attr a, b;
	int r;

	*why = NULL;
	r = knob_slice_get(self, &a);
	if (r) {
		*why = r == -ENOSYS ? "no sched_getattr() in this kernel" : "sched_getattr() failed";
		return r;
	}
	if (!knob_slice_fair(&a)) {
		*why = "the daemon does not run under SCHED_OTHER or SCHED_BATCH: cannot probe";
		return -EOPNOTSUPP;
	}
	r = knob_slice_set(self, &a, 500000);
	if (r == -EPERM) {
		*why = "sched_setattr() is not allowed (CAP_SYS_NICE, or a system call filter)";
		return r;
	}
	if (r) {
		/* The field was ignored, or refused: put back what it had. */
		knob_slice_set(self, &a, 0);
		*why = "custom EEVDF slices need Linux 6.12 or later";
		return -EOPNOTSUPP;
	}
	r = knob_slice_set(self, &a, 0);
	if (!r)
		r = knob_slice_get(self, &b);
	if (r || !b.runtime) {
		*why = "custom EEVDF slices need Linux 6.12 or later";
		return -EOPNOTSUPP;
	}
	*default_ns = b.runtime;
	return 0;
}

int knob_slice_thread_start(pid_t tid, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long v;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 && errno != ESRCH ? -errno : -ESRCH;
	buf[n] = '\0';
	/* The name (field 2) may hold spaces and parentheses: count after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EBADMSG;
	p++;
	for (field = 2; field < 21 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &v) != 1)
		return -EBADMSG;
	*start = v;
	return 0;
}

static int read_tids(const char *file, pid_t *tids, size_t max, size_t *n, bool *capped)
{
	FILE *f = fopen(file, "re");
	long v;

	*n = 0;
	*capped = false;
	if (!f)
		return errno == ENODEV ? -ENOENT : -errno;
	while (fscanf(f, "%ld", &v) == 1) {
		if (v <= 0 || v > KNOB_SLICE_TID_MAX)
			continue;
		if (*n >= max) {
			*capped = true;
			break;
		}
		tids[(*n)++] = (pid_t)v;
	}
	fclose(f);
	return 0;
}

int knob_slice_threads(const char *cgroup_base, const char *root, const char *rel, pid_t *tids,
		       size_t max, size_t *n, bool *capped, char *file, size_t filelen)
{
	char path[2 * 4096];
	int r;

	snprintf(path, sizeof(path), "%s%s/cgroup.threads", root, rel);
	if (access(path, R_OK) < 0)
		snprintf(path, sizeof(path), "%s/cpu%s/tasks", cgroup_base, rel);
	if (file && filelen)
		snprintf(file, filelen, "%s", path);
	r = read_tids(path, tids, max, n, capped);
	return r;
}
