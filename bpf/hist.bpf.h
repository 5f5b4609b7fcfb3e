/* SPDX-License-Identifier: GPL-2.0 */
/* The log-linear histogram's bucket math, for every BPF sensor (see sensor.h). */
#ifndef TW_HIST_BPF_H
#define TW_HIST_BPF_H

#include "bpf/sensor_abi.h"

/* Same bucket math as sensing/hist.c:hist_bucket(); keep them in step. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, s;

	s = (v > 0xFFFFFFFFULL) << 5; v >>= s; r |= s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 bucket_of(__u64 ns)
{
	__u32 msb, sub;

	if (ns < HIST_SUB)
		return ns;
	msb = log2_u64(ns);
	if (msb > HIST_MAX_LOG2)
		return HIST_BUCKETS - 1;
	sub = (ns >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1);
	return (msb - HIST_SUB_BITS + 1) * HIST_SUB + sub;
}

#endif
