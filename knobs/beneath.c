// SPDX-License-Identifier: GPL-2.0
/*
 * Putting a record back: a state file is input, not a licence to write.
 * Files are opened beneath the cgroup root without following a link, must
 * be regular files on a cgroup file system, must be the knob's own files
 * of the record's cgroup, and take only values the file can hold.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/log.h"
#include "knobs/freq.h"
#include "knobs/knob.h"
#include "knobs/knob_internal.h"

int knob_open_beneath(int dirfd, const char *rel, int flags, bool walk)
{
	struct open_how how = {
		.flags = (unsigned)flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char buf[PATH_MAX], *comp, *next;
	struct stat st;
	int cur = dirfd, fd;
	long r;

	/* ".." is refused even where it would stay below: a knob's path never needs it. */
	if (!strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
	    (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")))
		return -EXDEV;
	if (!walk) {
		r = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (r >= 0)
			return (int)r;
		if (errno != ENOSYS)
			return -errno;
	}
	/* No openat2 (before Linux 5.6): one component at a time, none a link. */
	if (strlen(rel) >= sizeof(buf) || rel[0] == '/')
		return -EXDEV;
	strcpy(buf, rel);
	for (comp = buf;; comp = next) {
		next = strchr(comp, '/');
		if (next)
			*next++ = '\0';
		if (!*comp || !strcmp(comp, ".") || !strcmp(comp, ".."))
			fd = -EXDEV;
		else if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
			fd = -errno;
		else if (S_ISLNK(st.st_mode))
			fd = -ELOOP;
		else if (next)
			fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		else
			fd = openat(cur, comp, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
		if (fd == -1)
			fd = -errno;
		if (cur != dirfd)
			close(cur);
		if (fd < 0 || !next)
			return fd;
		cur = fd;
	}
}

static bool cgroup_fs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && ((unsigned long)sf.f_type == CGROUP_SUPER_MAGIC ||
					 (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC);
}

/*
 * The root's directory. On a host it is a mount point (cgroup2, or the
 * tmpfs holding the v1 hierarchies), and every knob file must be on a
 * cgroup file system. A tree that tests build is a plain directory
 * inside another file system: there the files on that same file system
 * count as knob files (and still nothing else: no other mount).
 */
int knob_root_open(const char *base, struct knob_root *rt)
{
	struct stat st, up;

	rt->fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rt->fd < 0)
		return -errno;
	if (fstat(rt->fd, &st) < 0 || fstatat(rt->fd, "..", &up, 0) < 0) {
		int r = -errno;

		close(rt->fd);
		return r;
	}
	rt->len = strlen(base);
	rt->dev = st.st_dev;
	rt->test_tree = !cgroup_fs(rt->fd) && st.st_dev == up.st_dev && st.st_ino != up.st_ino;
	return 0;
}

/*
 * A knob file below the root, opened without following any symbolic
 * link and never above the root; then it must be a regular file on a
 * cgroup file system (or of the test tree). -ELOOP, -EXDEV, -EMEDIUMTYPE.
 */
static int open_knob_file(const struct knob_root *rt, const char *rel, int flags)
{
	struct stat st;
	int fd = knob_open_beneath(rt->fd, rel, flags, false), r = 0;

	if (fd < 0)
		return knob_errno_cg(-fd);
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode))
		r = -EMEDIUMTYPE;
	else if (!cgroup_fs(fd) && !(rt->test_tree && st.st_dev == rt->dev))
		r = -EMEDIUMTYPE;
	if (r) {
		close(fd);
		return r;
	}
	return fd;
}

static int fd_read_line(int fd, char *buf, size_t len)
{
	ssize_t n = read(fd, buf, len - 1);

	if (n < 0)
		return knob_errno_cg(errno);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int knob_root_read(const struct knob_root *rt, const char *rel, char *buf, size_t len)
{
	int fd = open_knob_file(rt, rel, O_RDONLY), r;

	if (fd < 0)
		return fd;
	r = fd_read_line(fd, buf, len);
	close(fd);
	return r;
}

int knob_root_write(const struct knob_root *rt, const char *rel, const char *s)
{
	/* O_TRUNC: harmless on cgroupfs, needed on the trees tests build. */
	int fd = open_knob_file(rt, rel, O_WRONLY | O_TRUNC);

	if (fd < 0)
		return fd;
	return knob_fd_write_str(fd, s);
}

/* The whole of s a decimal integer without a sign, within lo..hi. */
static bool int_str(const char *s, long long lo, long long hi)
{
	long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	return !errno && !*end && v >= lo && v <= hi;
}

#define QUOTA_MAX_US ((1LL << 44) - 1) /* the kernel's bandwidth limit */
#define PERIOD_MIN_US 1000LL
#define PERIOD_MAX_US 1000000LL

/* Is v something file name can hold, as we would write it? */
bool knob_valid_value(const char *name, const char *v)
{
	char a[32], b[32];

	if (!strcmp(name, "cpu.max")) {
		if (sscanf(v, "%31[^ ] %31[^ ]", a, b) != 2 ||
		    strlen(a) + strlen(b) + 1 != strlen(v))
			return false;
		return (!strcmp(a, "max") || int_str(a, QUOTA_MIN_US, QUOTA_MAX_US)) &&
		       int_str(b, PERIOD_MIN_US, PERIOD_MAX_US);
	}
	if (!strcmp(name, "cpu.cfs_quota_us"))
		return !strcmp(v, "-1") || int_str(v, QUOTA_MIN_US, QUOTA_MAX_US);
	if (!strcmp(name, "cpu.cfs_period_us"))
		return int_str(v, PERIOD_MIN_US, PERIOD_MAX_US);
	if (!strncmp(v, "default ", 8) &&
	    (!strcmp(name, "io.weight") || !strcmp(name, "io.bfq.weight") ||
	     !strcmp(name, "blkio.bfq.weight")))
		v += 8;
	if (!strcmp(name, "cpu.weight") || !strcmp(name, "io.weight"))
		return int_str(v, CG_WEIGHT_MIN, CG_WEIGHT_MAX);
	if (!strcmp(name, "cpu.shares"))
		return int_str(v, CG_SHARES_MIN, CG_SHARES_MAX);
	if (!strcmp(name, "cpu.idle"))
		return !strcmp(v, "0") || !strcmp(v, "1");
	if (!strcmp(name, "blkio.bfq.weight") || !strcmp(name, "io.bfq.weight"))
		return int_str(v, CG_BFQ_WEIGHT_MIN, CG_BFQ_WEIGHT_MAX);
	return false;
}

/*
 * Is rel (below the root) a file of this knob of this cgroup: the cgroup
 * in the v2 root or in the v1 hierarchy of the knob, and the knob's file?
 * *name: the file's name.
 */
bool knob_file_of(const char *rel, const char *cgroup, enum action_knob kind, const char **name)
{
	static const struct {
		enum action_knob kind;
		const char *dir, *name;
	} files[] = {
		{ KNOB_CPU_QUOTA, "", "cpu.max" },
		{ KNOB_CPU_QUOTA, "cpu/", "cpu.cfs_quota_us" },
		{ KNOB_CPU_QUOTA, "cpu/", "cpu.cfs_period_us" },
		{ KNOB_CPU_WEIGHT, "", "cpu.weight" },
		{ KNOB_CPU_WEIGHT, "cpu/", "cpu.shares" },
		{ KNOB_CPU_WEIGHT, "", "cpu.idle" },
		{ KNOB_CPU_WEIGHT, "cpu/", "cpu.idle" },
		{ KNOB_IO_WEIGHT, "", "io.weight" },
		{ KNOB_IO_WEIGHT, "", "io.bfq.weight" },
		{ KNOB_IO_WEIGHT, "blkio/", "blkio.bfq.weight" },
	};
	char want[PATH_MAX];

	while (*cgroup == '/')
		cgroup++;
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		if (files[i].kind != kind)
			continue;
		snprintf(want, sizeof(want), "%s%s%s%s", files[i].dir, cgroup, *cgroup ? "/" : "",
			 files[i].name);
		if (!strcmp(rel, want)) {
			*name = files[i].name;
			return true;
		}
	}
	return false;
}

void knob_report(knob_report_fn fn, void *userdata, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void knob_report(knob_report_fn fn, void *userdata, const char *fmt, ...)
{
	char line[PATH_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_make_printable(line);
	log_debug("%s", line);
	if (fn)
		fn(userdata, line);
}

int knob_restore_file(const struct knob_root *rt, const char *path, const char *value,
		      knob_report_fn fn, void *userdata)
{
	const char *rel = path + rt->len + 1;
	char cur[256], now[256];
	int r;

	r = knob_root_read(rt, rel, cur, sizeof(cur));
	if (r)
		return r;
	if (!strcmp(cur, value)) {
		knob_report(fn, userdata, "%s: already %s", path, value);
		return 0;
	}
	r = knob_root_write(rt, rel, value);
	if (r)
		return r;
	r = knob_root_read(rt, rel, now, sizeof(now));
	if (r)
		return r;
	if (strcmp(now, value))
		return -EIO;
	knob_report(fn, userdata, "%s: %s -> %s", path, cur, value);
	return 0;
}

int knob_restore_cpu(unsigned cpu, unsigned long khz, knob_report_fn fn, void *userdata)
{
	unsigned long cur;
	int r;

	if (knob_cpu_online(cpu) != 1) {
		knob_report(fn, userdata, "cpu%u: offline, nothing to restore", cpu);
		return 0;
	}
	r = knob_freq_get_max(cpu, &cur);
	if (r)
		return r;
	if (cur == khz) {
		knob_report(fn, userdata, "cpu%u scaling_max_freq: already %lu kHz", cpu, khz);
		return 0;
	}
	r = knob_freq_set_max(cpu, khz);
	if (r)
		return r;
	knob_report(fn, userdata, "cpu%u scaling_max_freq: %lu -> %lu kHz", cpu, cur, khz);
	return 0;
}

int knob_why_fail(char *why, size_t len, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int knob_why_fail(char *why, size_t len, int r, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
		log_make_printable(why);
	}
	return r;
}
