/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ABI shared by bpf/sensor.bpf.c and user space: map keys and values.
 * Fixed-width __u types only; both halves must agree byte for byte.
 */
#ifndef TW_BPF_SENSOR_ABI_H
#define TW_BPF_SENSOR_ABI_H

#include "bpf/hist_bucket.h" /* HIST_BUCKETS */

/* Connection direction, decided when the connection is established. */
enum tw_dir {
	TW_DIR_SERVER = 1, /* passively opened (SYN_RECV -> ESTABLISHED) */
	TW_DIR_CLIENT = 2, /* actively opened (SYN_SENT -> ESTABLISHED) */
};

/*
 * A served request's three phases (indexes of tw_cg_hists.phase and
 * phase_ns). They add up to its span: queued (its bytes reached the
 * socket -> the server's first read of them), service (that read -> the
 * end of the reply's first send) and sending (the first send's end -> the
 * last's). Queued needs the arrival stamp: the receive and syscall modes
 * start a request at its first read and never add to it.
 */
enum tw_phase {
	TW_PHASE_QUEUED,
	TW_PHASE_SERVICE,
	TW_PHASE_SENDING,
	TW_PHASES,
};

/* Global drop counters: index into the per-CPU array map tw_drops. */
enum tw_drop {
	TW_DROP_SPAN_NEGATIVE, /* end before start: never reported */
	TW_DROP_SPAN_ABSURD,   /* longer than max_span_ns: never reported */
	TW_DROP_CONN_FULL,     /* connection table full: not tracked */
	TW_DROP_CGROUP_FULL,   /* cgroup table full: traffic not counted */
	TW_DROP_MAX,
};

/*
 * Per-cgroup counters, per CPU. Byte counts accumulate on each connection
 * and are added here in batches (at a reply start at most every 100 ms,
 * past 64 KiB, and at close), so a busy connection costs one lookup here
 * per batch, not one per send. All are cumulative; user space diffs them
 * each tick. conns_open is incremented on the CPU that attributes a
 * connection and decremented on the CPU that closes it, so only the sum
 * over CPUs means anything.
 */
struct tw_cg_counters {
	__u64 bytes_in;	    /* received on server-side connections */
	__u64 bytes_out;    /* sent on server-side connections */
	__s64 conns_open;   /* server-side connections attributed here */
	__u64 out_bytes_in; /* on client-side connections */
	__u64 out_bytes_out;
	__u64 spans_dropped; /* negative or absurd spans of this cgroup */
};

/*
 * Per-cgroup request counts and histograms, shared by all CPUs and updated
 * with atomic adds: touched once per request, not once per event. A
 * latency bucket can be decremented when a reply keeps sending and its
 * span moves to a later bucket, so user space diffs each bucket as a
 * signed 32-bit value.
 *
 * They live in slots of an array (tw_cg_hists), not in a hash by cgroup:
 * a connection keeps its cgroup's slot, so a request finds its histograms
 * with an array index instead of a hash lookup. tw_cg_slots maps a cgroup
 * id to its slot; free slots wait in the queue tw_free_slots, which user
 * space fills at load and refills when it forgets a removed cgroup (after
 * zeroing the slot). cgid says whose a slot is, 0 when free.
 */
struct tw_cg_hists {
	__u64 cgid; /* the cgroup2 id this slot belongs to, 0 = free */
	/*
	 * Served requests (reply starts) have no counter of their own: each
	 * adds 1 to a bucket of ttfb, which never moves, so they are the sum
	 * of its buckets. One atomic add less per request, to pay for the
	 * phases'.
	 */
	__u64 out_requests;	      /* outbound (client-side) request/reply pairs */
	__u32 latency[HIST_BUCKETS];  /* arrival -> last send of the reply */
	__u32 ttfb[HIST_BUCKETS];     /* arrival -> first send of the reply */
	__u32 outbound[HIST_BUCKETS]; /* our request's first send -> reply arrival */
	/*
	 * Each phase's histogram. The sending phase's bucket 0 (a reply of one
	 * send, or not yet past its first) is not counted: it is requests less
	 * the other buckets. A reply's sending phase enters its bucket at its
	 * second send and moves like its span with each later one.
	 * The queued and service phases may be a weighted sample on busy
	 * connections (server_recv in sensor.bpf.c): a bucket gets a split
	 * request's weight, the requests it stands for.
	 */
	__u32 phase[TW_PHASES][HIST_BUCKETS];
};

/*
 * Per-cgroup sums, per CPU, in the same slot as the cgroup's histograms
 * (tw_cg_sums, a per-CPU array): plain adds, no atomics. The phases of
 * each request add up to its span, so their sums add up to span_ns;
 * where the queued | service split is sampled (busy connections, see
 * server_recv in sensor.bpf.c), in expectation: a split request adds its
 * weight times its queued and service time, a skipped one neither.
 */
struct tw_cg_sums {
	__u64 span_ns;		   /* the served requests' spans (ns) */
	__u64 phase_ns[TW_PHASES]; /* their phases (ns) */
};

#endif
