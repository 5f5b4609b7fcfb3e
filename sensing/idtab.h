/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tables of records that begin with a uint64_t id (a cgroup id), kept in
 * an array sorted by it: the snapshots of both sensors, the cgroupfs
 * readings and the id -> path cache. Plain functions over (array, count,
 * record size), so each table keeps its own typed array.
 */
#ifndef TW_IDTAB_H
#define TW_IDTAB_H

#include <stddef.h>
#include <stdint.h>

/* qsort/bsearch comparison of two records by their leading id. */
int idtab_cmp(const void *a, const void *b);
/* Sort n records of size bytes by id. */
void idtab_sort(void *v, size_t n, size_t size);
/* The record with id among the first n (sorted), or NULL. */
void *idtab_find(const void *v, size_t n, size_t size, uint64_t id);
/*
 * Room for one more record: grows *v (doubling, from first) when n == *cap.
 * 0 or -ENOMEM (*v untouched).
 */
int idtab_reserve(void **v, size_t *cap, size_t n, size_t size, size_t first);

#endif
