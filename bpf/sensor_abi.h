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
	__u64 bytes_in;     /* received on server-side connections */
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
	__u64 cgid;         /* the cgroup2 id this slot belongs to, 0 = free */
	__u64 requests;     /* served requests: reply starts */
	__u64 out_requests; /* outbound (client-side) request/reply pairs */
	__u32 latency[HIST_BUCKETS]; /* arrival -> last send of the reply */
	__u32 ttfb[HIST_BUCKETS];    /* arrival -> first send of the reply */
	__u32 outbound[HIST_BUCKETS]; /* our request's first send -> reply arrival */
};

#endif
