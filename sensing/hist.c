// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <string.h>
#include "sensing/hist.h"

/* The same code the BPF programs run: bpf/hist_bucket.h. */
unsigned hist_bucket(uint64_t ns)
{
	return hist_bucket_of(ns);
}

uint64_t hist_lower(unsigned b)
{
	unsigned msb = b / HIST_SUB + HIST_SUB_BITS - 1;

	if (b < HIST_SUB)
		return b;
	return (uint64_t)(HIST_SUB + b % HIST_SUB) << (msb - HIST_SUB_BITS);
}

uint64_t hist_width(unsigned b)
{
	if (b < HIST_SUB)
		return 1;
	return 1ULL << (b / HIST_SUB - 1);
}

double hist_mid(unsigned b)
{
	if (b < HIST_SUB)
		return b;
	return hist_lower(b) + hist_width(b) / 2.0;
}

void hist_diff(struct hist *h, const __u32 *now, const __u32 *prev)
{
	h->total = 0;
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		int32_t d = (int32_t)(now[b] - (prev ? prev[b] : 0));

		h->count[b] = d > 0 ? (uint64_t)d : 0;
		h->total += h->count[b];
	}
}

void hist_add(struct hist *h, uint64_t ns, uint64_t n)
{
	h->count[hist_bucket(ns)] += n;
	h->total += n;
}

void hist_merge(struct hist *a, const struct hist *b)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		a->count[i] += b->count[i];
	a->total += b->total;
}

double hist_percentile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->total)
		return -1;
	rank = (uint64_t)ceil(q * (double)h->total);
	if (rank < 1)
		rank = 1;
	for (unsigned b = 0; b < HIST_BUCKETS; b++) {
		seen += h->count[b];
		if (seen >= rank)
			return hist_mid(b);
	}
	return hist_max(h);
}

double hist_max(const struct hist *h)
{
	for (unsigned b = HIST_BUCKETS; b-- > 0;)
		if (h->count[b])
			return hist_mid(b);
	return -1;
}
