// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sensing/cgroupfs.h"

int cgroupfs_read(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return 0;
}

/* dir/rel/file; rel has a leading '/' (or is "/" for the root). */
static int path_of(char *p, size_t len, const char *dir, const char *rel, const char *file)
{
	const char *sep = rel[0] == '/' ? "" : "/";

	if (snprintf(p, len, "%s%s%s/%s", dir, sep, rel, file) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int cgroupfs_read_cg(const char *dir, const char *sub, const char *rel, const char *file, char *buf,
		     size_t len)
{
	char d[PATH_MAX], p[PATH_MAX];
	int r;

	if (snprintf(d, sizeof(d), "%s%s%s", dir, sub ? "/" : "", sub ? sub : "") >= (int)sizeof(d))
		r = -ENAMETOOLONG;
	else
		r = path_of(p, sizeof(p), d, rel, file);
	if (!r)
		r = cgroupfs_read(p, buf, len);
	if (r)
		buf[0] = '\0';
	return r;
}

double cgroupfs_kv(const char *buf, const char *key)
{
	size_t k = strlen(key);
	const char *p = buf;
	char *end;
	double v;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, k) || p[k] != ' ')
			continue;
		v = strtod(p + k + 1, &end);
		return end == p + k + 1 ? NAN : v;
	}
	return NAN;
}

double cgroupfs_single(const char *buf)
{
	char *end;
	double v = strtod(buf, &end);

	return end == buf ? NAN : v;
}

double cgroupfs_psi_some_avg10(const char *buf)
{
	const char *p;
	char *end;
	double v;

	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "some ", 5))
			continue;
		p = strstr(p, "avg10=");
		if (!p)
			return NAN;
		v = strtod(p + 6, &end);
		return end == p + 6 ? NAN : v;
	}
	return NAN;
}
