/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ABI shared by bpf/contention.bpf.c and sensing/contention.c: map keys
 * and values of the contention signals. Fixed-width __u types only; both
 * halves must agree byte for byte.
 */
#ifndef TW_BPF_CONTENTION_ABI_H
#define TW_BPF_CONTENTION_ABI_H

#include "bpf/hist_bucket.h" /* HIST_BUCKETS: the same log-linear histogram */

/* Global drop counters: index into the per-CPU array map ct_drops. */
enum ct_drop {
	CT_DROP_CGROUP_FULL, /* cgroup table full: the event is not counted */
	CT_DROP_STAMP_FULL,  /* no room for a per-thread or per-request stamp */
	CT_DROP_ABSURD,	     /* a wait longer than max_wait_ns: never reported */
	CT_DROP_MAX,
};

/*
 * Per-cgroup counters, per CPU: the scheduler hooks update them on every
 * context switch, so they must not share a cache line between CPUs. All
 * cumulative; user space sums the CPUs and diffs two reads.
 */
struct ct_cg_counters {
	__u64 io_read_bytes; /* block requests issued by this cgroup */
	__u64 io_write_bytes;
	__u64 io_requests;
	__u64 vfs_read_bytes; /* read(2) & co. on regular files */
	__u64 vfs_write_bytes;
	__u64 futex_wait_ns; /* FUTEX_WAIT* and futex_wait(v) time in the syscall */
	__u64 futex_waits;
	__u64 lock_ns;	   /* contention_begin -> contention_end (spinning waits sampled) */
	__u64 page_faults; /* user page faults */
	__u64 reclaim_ns;  /* memcg and direct reclaim */
	__u64 tcp_retransmits;
	__u64 srtt_sum_us; /* sum of sampled smoothed RTTs */
	__u64 srtt_samples;
};

/*
 * Run-queue delay per cgroup, per CPU: touched on every context switch,
 * where one lookup and no atomic matter (a per-CPU counter map plus a
 * shared histogram with atomic adds cost ~5 ns more per switch, half again
 * the hook's own work, and the shared histogram's hot buckets bounce
 * between CPUs). The price is memory: 2.2 KiB per possible CPU for each
 * cgroup that ran. The number of waits is the histogram's total. 32-bit
 * buckets wrap; user space sums the CPUs and diffs modulo 2^32
 * (hist_diff).
 */
struct ct_cg_runq {
	__u64 runq_ns;		  /* runnable, waiting for a CPU */
	__u32 hist[HIST_BUCKETS]; /* the same waits, ns */
};

/*
 * Per-cgroup histograms, shared by all CPUs, updated with atomic adds
 * (block requests are far rarer than context switches).
 */
struct ct_cg_hists {
	__u32 io[HIST_BUCKETS]; /* block request submit -> complete, ns */
};

#endif
