/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What knob.c, beneath.c and subtree.c share: file helpers, the cgroup
 * root a record is restored beneath, and reporting. Internal to knobs/.
 */
#ifndef TW_KNOB_INTERNAL_H
#define TW_KNOB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "knobs/record.h"
#include "policies/action.h"

/* systemd's constants (src/basic/cgroup-util.h) */
#define CG_WEIGHT_MIN 1UL
#define CG_WEIGHT_DEFAULT 100UL
#define CG_WEIGHT_MAX 10000UL
#define CG_SHARES_DEFAULT 1024UL
#define CG_SHARES_MIN 2UL
#define CG_SHARES_MAX 262144UL
#define CG_BFQ_WEIGHT_MIN 1UL
#define CG_BFQ_WEIGHT_DEFAULT 100UL
#define CG_BFQ_WEIGHT_MAX 1000UL

#define QUOTA_MIN_US 1000LL /* the kernel refuses shorter quotas */

/* Where records are restored: the cgroup root, and what its files may be. */
struct knob_root {
	int fd;
	size_t len;	/* of the base path */
	bool test_tree; /* a plain directory, not a mount: its own files count */
	dev_t dev;
};

/* An errno of a cgroup file as ours: a vanished cgroup's ENODEV is ENOENT. */
int knob_errno_cg(int e);
/* The first line of path, without its newline. 0 or -errno. */
int knob_read_line(const char *path, char *buf, size_t len);
/* All of s to fd, closing it. 0 or -errno. */
int knob_fd_write_str(int fd, const char *s);
bool knob_exists(const char *path);
/* Is word one of the space-separated words of list? */
bool knob_has_word(const char *list, const char *word);
/* in without "./", "//" or a trailing '/'. 0 or -EINVAL. */
int knob_clean_path(const char *in, char *out, size_t len);

/* The root at base, opened (rt->fd to close). 0 or -errno. */
int knob_root_open(const char *base, struct knob_root *rt);
/* A knob file below the root: read its first line, or write s. 0 or -errno. */
int knob_root_read(const struct knob_root *rt, const char *rel, char *buf, size_t len);
int knob_root_write(const struct knob_root *rt, const char *rel, const char *s);
/* Is v something file name can hold, as we would write it? */
bool knob_valid_value(const char *name, const char *v);
/* Is rel (below the root) a file of this knob of this cgroup? *name: the file's name. */
bool knob_file_of(const char *rel, const char *cgroup, enum action_knob kind, const char **name);
/* Write value to the file at path (under rt) unless it holds it, read back; a line to fn. */
int knob_restore_file(const struct knob_root *rt, const char *path, const char *value,
		      knob_report_fn fn, void *userdata);
/* A CPU's maximum frequency back, unless it is offline; a line to fn. */
int knob_restore_cpu(unsigned cpu, unsigned long khz, knob_report_fn fn, void *userdata);
/* A line in words to fn (and the debug log). */
void knob_report(knob_report_fn fn, void *userdata, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* why (may be NULL) gets the reason in words; returns r. */
int knob_why_fail(char *why, size_t len, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
