/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The log-linear histogram's bucket math: the one source that both the BPF
 * programs (sensor.bpf.c, contention.bpf.c) and user space (sensing/hist.c) compile, so a
 * value lands in the same bucket on both sides.
 */
#ifndef TW_BPF_HIST_BUCKET_H
#define TW_BPF_HIST_BUCKET_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/*
 * Log-linear latency histogram over nanoseconds. Values below 16 ns get a
 * bucket each; above, every power of two is split into 16 equal
 * sub-buckets, so a bucket is at most 1/16 of its lower bound wide and its
 * midpoint is within 1/32 (3.125%) of any value in it, up to 2^38 ns
 * (275 s); the last bucket also holds everything above.
 */
#define HIST_SUB_BITS 4
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_MAX_LOG2 37
#define HIST_BUCKETS ((HIST_MAX_LOG2 - HIST_SUB_BITS + 2) * HIST_SUB)

/* floor(log2(v)) for v > 0, without loops or builtins the verifier lacks. */
static inline __attribute__((always_inline)) __u32 hist_log2_u64(__u64 v)
{
	__u32 r = 0, s;

	s = (v > 0xFFFFFFFFULL) << 5;
	v >>= s;
	r |= s;
	s = (v > 0xFFFF) << 4;
	v >>= s;
	r |= s;
	s = (v > 0xFF) << 3;
	v >>= s;
	r |= s;
	s = (v > 0xF) << 2;
	v >>= s;
	r |= s;
	s = (v > 0x3) << 1;
	v >>= s;
	r |= s;
	r |= (v >> 1);
	return r;
}

/* The bucket of a value in ns: exact below HIST_SUB, then 16 per power of two. */
static inline __attribute__((always_inline)) __u32 hist_bucket_of(__u64 ns)
{
	__u32 msb, sub;

	if (ns < HIST_SUB)
		return ns;
	msb = hist_log2_u64(ns);
	if (msb > HIST_MAX_LOG2)
		return HIST_BUCKETS - 1;
	sub = (ns >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1);
	return (msb - HIST_SUB_BITS + 1) * HIST_SUB + sub;
}

#endif
