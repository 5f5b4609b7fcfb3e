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

/*
 * TCP flow figures of one cgroup's sockets (the cgroup2 cgroup in the
 * socket's sk_cgrp_data). Two kinds of field:
 *
 * Cumulative since the sensor loaded, closed sockets included: the socket
 * iterator charges what each socket's own counters grew since its last
 * visit (remembered in socket storage), tcp_destroy_sock charges the rest
 * when a socket goes, the retransmit tracepoint counts fast retransmits.
 * Several CPUs add at once: atomic adds.
 *
 * Live, of the sockets the iterator met in its run number gen: sums and
 * maxima over the cgroup's connected sockets at that moment. Written by
 * the iterator alone (one thread); an entry whose gen is not the last
 * run's had no live socket then.
 */
struct ct_cg_tcp {
	__u64 retrans_segs;	 /* tcp_sock.total_retrans: segments retransmitted */
	__u64 fast_retrans_segs; /* retransmitted outside loss recovery (not after an RTO) */
	__u64 timeouts;		 /* tcp_sock.total_rto: retransmission timeouts (6.7+) */
	__u64 bytes_acked;	 /* sent and acknowledged (tcp_sock.bytes_acked) */
	__u64 bytes_received;	 /* tcp_sock.bytes_received */
	__u64 gen;		 /* the iterator run the live figures below are of */
	__u64 sockets;
	__u64 flight_sum, flight_max;	/* segments in flight (tcp_packets_in_flight) */
	__u64 cwnd_sum, cwnd_max;	/* snd_cwnd, segments */
	__u64 rcv_wnd_sum, rcv_wnd_max; /* rcv_wnd, bytes */
	__u64 mss_min, mss_max;		/* mss_cache, bytes */
	__u64 srtt_sum_us, srtt_max_us; /* srtt_us >> 3 */
	__u64 sndq_sum, sndq_max;	/* write_seq - snd_una, bytes */
};

#endif
