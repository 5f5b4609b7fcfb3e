/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cgroup2 identity: a cgroup's id is the inode number of its cgroup2
 * directory. Every function takes the cgroup2 root as a parameter so tests
 * can point it at a tree they build.
 */
#ifndef TW_CGROUP_H
#define TW_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Find the cgroup2 root under base (normally /sys/fs/cgroup): base itself
 * on a pure v2 host, base/unified on a hybrid one. 0 or -ENOENT.
 */
int cg_root_find(const char *base, char *root, size_t len);

/*
 * Turn a user's cgroup argument into a path relative to root with a
 * leading '/' ("/" for the root itself). Accepts root/x, base/x, /x and x.
 * 0, -ENOENT when no such cgroup directory, -ENAMETOOLONG.
 */
int cg_resolve(const char *base, const char *root, const char *arg, char *rel, size_t len,
	       uint64_t *id);

/* id -> path cache over one cgroup2 tree. */
struct cg_names;

/* NULL on -ENOMEM (errno set). */
struct cg_names *cg_names_new(const char *root);
void cg_names_free(struct cg_names *n);
/* Rescan the tree. 0 or -errno. */
int cg_names_refresh(struct cg_names *n);
/* Milliseconds since the last scan (UINT_MAX before the first). */
unsigned cg_names_age_ms(const struct cg_names *n);
/*
 * Path of a cgroup id relative to the root ("/a/b"), rescanning once when
 * unknown and the last scan is older than min_age_ms. NULL if not found.
 */
const char *cg_names_lookup(struct cg_names *n, uint64_t id, unsigned min_age_ms);

#endif
