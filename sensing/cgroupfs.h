/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The small cgroupfs readers: cpu.stat, memory.stat, cpuacct.usage and PSI
 * files of one cgroup. Every path starts at a root the caller gives, so
 * tests point them at a tree they build.
 */
#ifndef TW_CGROUPFS_H
#define TW_CGROUPFS_H

#include <stddef.h>

/* Read a small file into buf, NUL-terminated. 0 or -errno. */
int cgroupfs_read(const char *path, char *buf, size_t len);
/*
 * Read file of the cgroup at rel (leading '/'; "/" for the root) in the
 * hierarchy dir/sub (sub NULL: dir itself, e.g. the cgroup2 root). buf is
 * "" on failure. 0 or -errno.
 */
int cgroupfs_read_cg(const char *dir, const char *sub, const char *rel, const char *file, char *buf,
		     size_t len);
/* Value of the "key value" line of a flat-keyed file (cpu.stat), NAN when absent. */
double cgroupfs_kv(const char *buf, const char *key);
/* The number a one-number file holds (cpuacct.usage), NAN when none. */
double cgroupfs_single(const char *buf);
/* "some avg10=1.23 avg60=... total=..." -> 1.23; NAN when absent. */
double cgroupfs_psi_some_avg10(const char *buf);

#endif
