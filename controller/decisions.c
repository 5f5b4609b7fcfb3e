// SPDX-License-Identifier: GPL-2.0
/*
 * The decision log: appends whole lines with one write(2) each, rotates
 * FILE to FILE.1 before a line would take FILE past its maximum, and
 * survives a file it cannot write (see decisions.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"
#include "controller/decisions.h"

/* The first retry after a failure; each failed retry doubles it. */
#define RETRY_FIRST_USEC 1000000ULL
/* Lost lines are said at most this often while the log keeps failing. */
#define LOST_LOG_USEC (60 * 1000000ULL)

struct decisions {
	char *path;
	char *rotated;	       /* path.1 */
	uint64_t max_size;     /* 0: no limit */
	int fd;		       /* -1 while it could not be opened */
	bool regular;	       /* only a regular file is rotated */
	uint64_t size;	       /* bytes in the current file */
	uint64_t lost;	       /* lines lost since open */
	bool failing;	       /* the last attempt failed */
	uint64_t retry_usec;   /* no attempt before this while failing */
	uint64_t backoff_usec; /* the wait after the next failed attempt */
	uint64_t lost_said;    /* lost, when last said */
	uint64_t said_usec;    /* when lost lines were last said */
};

static void file_close(struct decisions *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/*
 * Open d->path. Non-blocking for the open only, so that a FIFO without a
 * reader is an error (ENXIO), not a hang.
 */
static int file_open(struct decisions *d)
{
	struct stat st;
	int fd, fl;

	file_close(d);
	fd = open(d->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	d->fd = fd;
	d->regular = S_ISREG(st.st_mode);
	d->size = d->regular ? (uint64_t)st.st_size : 0;
	return 0;
}

int decisions_open(const char *path, uint64_t max_size, struct decisions **out)
{
	struct decisions *d = calloc(1, sizeof(*d));
	int r;

	if (!d)
		return -ENOMEM;
	d->fd = -1;
	d->max_size = max_size;
	d->backoff_usec = RETRY_FIRST_USEC;
	d->path = strdup(path);
	if (!d->path || asprintf(&d->rotated, "%s.1", path) < 0) {
		d->rotated = NULL;
		decisions_close(d);
		return -ENOMEM;
	}
	r = file_open(d);
	if (r) {
		decisions_close(d);
		return r;
	}
	*out = d;
	return 0;
}

/* FILE -> FILE.1, and a new FILE. A FILE already moved away (ENOENT) only needs the new one. */
static int rotate(struct decisions *d)
{
	if (rename(d->path, d->rotated) < 0 && errno != ENOENT)
		return -errno;
	return file_open(d);
}

/* One whole line, or none: a short write is cut off again. */
static int append(struct decisions *d, const char *line, size_t len)
{
	ssize_t n;
	int r;

	if (d->fd < 0) {
		r = file_open(d);
		if (r)
			return r;
	}
	if (d->regular && d->max_size && d->size > 0 && d->size + len > d->max_size) {
		r = rotate(d);
		if (r)
			return r;
	}
	do
		n = write(d->fd, line, len);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len) {
		d->size += len;
		return 0;
	}
	r = n < 0 ? -errno : -ENOSPC;
	if (n > 0 && d->regular && ftruncate(d->fd, d->size) < 0)
		d->size += n; /* the part stays; the next line starts after it */
	return r;
}

static void failed(struct decisions *d, int err, uint64_t now_usec)
{
	d->lost++;
	if (!d->failing) {
		d->failing = true;
		d->said_usec = now_usec;
		d->lost_said = d->lost;
		log_warning_errno(
			err,
			"Failed to write the decision log %s: %m; decisions go unlogged, trying again in %llu s",
			d->path, (unsigned long long)(d->backoff_usec / 1000000ULL));
	} else if (now_usec >= d->said_usec + LOST_LOG_USEC && d->lost > d->lost_said) {
		d->said_usec = now_usec;
		d->lost_said = d->lost;
		log_warning_errno(
			err,
			"Failed to write the decision log %s: %m; %llu line(s) lost so far, trying again in %llu s",
			d->path, (unsigned long long)d->lost,
			(unsigned long long)(d->backoff_usec / 1000000ULL));
	}
	d->retry_usec = now_usec + d->backoff_usec;
	d->backoff_usec *= 2;
	if (d->backoff_usec > DECISIONS_RETRY_MAX_USEC)
		d->backoff_usec = DECISIONS_RETRY_MAX_USEC;
}

static void recovered(struct decisions *d)
{
	if (!d->failing)
		return;
	d->failing = false;
	d->backoff_usec = RETRY_FIRST_USEC;
	log_notice("the decision log %s is written again; %llu line(s) lost in all", d->path,
		   (unsigned long long)d->lost);
}

int decisions_write(struct decisions *d, const char *line, uint64_t now_usec)
{
	size_t len = strlen(line);
	char *buf;
	int r;

	if (d->failing && now_usec < d->retry_usec) {
		d->lost++;
		return -EAGAIN;
	}
	/* A failing file may have been replaced, or its error be sticky: open it anew. */
	if (d->failing)
		file_close(d);
	buf = malloc(len + 1);
	if (!buf) {
		failed(d, -ENOMEM, now_usec);
		return -ENOMEM;
	}
	memcpy(buf, line, len);
	buf[len] = '\n';
	r = append(d, buf, len + 1);
	free(buf);
	if (r) {
		failed(d, r, now_usec);
		return r;
	}
	recovered(d);
	return 0;
}

int decisions_reopen(struct decisions *d, uint64_t now_usec)
{
	int r = file_open(d);

	if (r) {
		log_warning_errno(
			r,
			"Failed to reopen the decision log %s: %m; trying again with the next decision",
			d->path);
		/* The next line tries at once, then backs off as after a failed write. */
		if (!d->failing) {
			d->failing = true;
			d->said_usec = now_usec;
			d->lost_said = d->lost;
		}
		d->retry_usec = now_usec;
		return r;
	}
	recovered(d);
	return 0;
}

uint64_t decisions_lost(const struct decisions *d)
{
	return d ? d->lost : 0;
}

uint64_t decisions_size(const struct decisions *d)
{
	return d ? d->size : 0;
}

void decisions_close(struct decisions *d)
{
	if (!d)
		return;
	file_close(d);
	free(d->path);
	free(d->rotated);
	free(d);
}
