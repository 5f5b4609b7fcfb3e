// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sensing/idtab.h"

int idtab_cmp(const void *a, const void *b)
{
	uint64_t x, y;

	memcpy(&x, a, sizeof(x));
	memcpy(&y, b, sizeof(y));
	return x < y ? -1 : x > y;
}

void idtab_sort(void *v, size_t n, size_t size)
{
	if (n)
		qsort(v, n, size, idtab_cmp);
}

void *idtab_find(const void *v, size_t n, size_t size, uint64_t id)
{
	if (!n)
		return NULL;
	return bsearch(&id, v, n, size, idtab_cmp);
}

int idtab_reserve(void **v, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t ncap;
	void *nv;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : first;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}
