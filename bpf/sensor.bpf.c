// SPDX-License-Identifier: GPL-2.0
/*
 * Request sensing: infer each cgroup's served requests and their latency
 * from socket events, aggregated in the kernel. Nothing per event crosses
 * to user space; user space reads the cumulative maps once per tick.
 *
 * A request on a server connection is the span from the moment its bytes
 * reach the socket to the last send of the reply. Its start is read, not
 * hooked: TCP refreshes the socket's clock (tcp_clock_cache) whenever it
 * processes a segment, and tcp_rcv_space_adjust, which runs in the
 * reader's context each time data is copied to it, fires before it
 * refreshes that clock itself. So at the first read of a request the
 * clock still holds when the request's bytes were taken in, however long
 * they then waited for the server to read them. Without such a hook (the
 * "receive" mode, and the syscall fallback) a request starts at the
 * server's first read and the time queued before it is not seen.
 *
 * Replies are often several sends (headers then body, chunks, sendfile in
 * pieces), so the span stays open while the server keeps sending: the
 * request is counted and put in the histogram at its first send, and each
 * later send of the same reply moves it to the bucket of its new length.
 * That way nothing has to "close" a span, and a reply is visible in the
 * window where it started.
 *
 * What each event costs matters more than anything else here: every
 * program runs inside the server's own system calls. Two hooks per
 * request and nothing from softirq: sk_data_ready, which would stamp the
 * arrival directly, fires for every segment of every socket (the client's
 * too, on the sending CPU), and dispatching a BPF program costs ~70-120 ns
 * per event on retpoline hosts before it does anything; the earlier
 * arrival hook cost nginx about 1.5 % of its throughput on its own.
 *
 * Connection state lives in socket-local storage (BPF_MAP_TYPE_SK_STORAGE):
 * found from the socket in a few loads instead of a hash lookup, freed with
 * the socket, and deleted when the socket reaches TCP_CLOSE, so a socket
 * reusing the address never inherits a stale start. Only the syscall
 * fallback, which cannot name the socket as a BTF pointer, keys a hash map
 * by the struct sock address instead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/common.bpf.h"
#include "bpf/sensor_abi.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define S_IFMT 00170000
#define S_IFSOCK 0140000

/* Load-time settings, set by user space between open and load. */
/* A reply send more than this after the previous one is not the same reply. */
const volatile __u64 quiet_ns = 100000000ULL;
/* Spans longer than this are dropped and counted, never reported. */
const volatile __u64 max_span_ns = 60000000000ULL;
/* Syscall fallback: connection state in tw_conns, keyed by address. */
const volatile bool conns_by_addr = false;
/*
 * Outbound spans (this host as a client) put state and work on every
 * client connection's events, half of all events on a host that is also
 * the client: opt-in. Off, a client connection has no state at all (see
 * conn_of).
 */
const volatile bool outbound = false;
/*
 * Requests start at their bytes' arrival (the arrival mode), so the time
 * they queued before the server's first read is a phase of its own. In
 * the other modes they start at that read: no queued phase.
 */
const volatile bool arrival_stamps = false;
/*
 * Only the cgroups user space lists in tw_watched (`tailwarden run`: the
 * policies' cgroups) are followed; a connection of any other cgroup is
 * marked ignored at its first event and costs every later one the storage
 * lookup and two compares (attribute). Off (top, record), every cgroup is.
 */
const volatile bool watch_listed = false;
/*
 * The list's generation: user space bumps it after each change of
 * tw_watched, so that a connection ignored under an older list asks again
 * (a cgroup named, or created, after its connections opened). Never 0.
 */
volatile __u64 watch_gen = 1;

/* Bytes are added to the per-cgroup counters in batches (see sensor.h). */
#define FLUSH_BYTES (64 * 1024)
#define FLUSH_NS 100000000ULL

enum phase {
	PH_IDLE = 0,	/* server: no request being read or answered; client: nothing sent */
	PH_IGNORED = 1, /* of a cgroup not listed (watch_listed), as of generation start_ns */
	PH_RECV = 2,	/* server: request being read */
	PH_REPLY = 3,	/* server: reply being sent (span open) */
	PH_REQ = 4,	/* client: request sent, awaiting the reply */
	PH_RESP = 5,	/* client: reply arriving */
};

/*
 * One connection's state. Every field is written in the context of the
 * task that reads or sends on the connection (and at its state changes),
 * so the line stays on that task's CPU; the first 56 bytes share one cache
 * line with the storage element's map pointer, which every lookup reads.
 *
 * mark_ns took it from 56 to 64 bytes: the request's phases need when the
 * server first read it (queued | service) and when the first send of its
 * reply ended (service | sending). No field free in both phases could
 * hold either (last_send_ns is needed while the reply is sent, to tell a
 * later send of the same reply; start_ns for the span), so one u64 holds
 * each in turn. It sits last, in the element's next line, touched at the
 * request's first read and at each send of its reply, by the same CPU.
 *
 * skipped (a byte that was padding) samples that first read's clock read
 * on busy connections: see server_recv.
 */
struct conn {
	__u64 cgid;	/* cgroup the connection is attributed to, 0 = none yet */
	__u64 start_ns; /* request arrival (server), first send (client); PH_IGNORED: generation */
	__u64 last_send_ns; /* when the last send of the current reply returned (server) */
	__u64 flushed_ns;   /* when the byte counts were last added to the cgroup's */
	__u32 pend_in; /* bytes not yet added to the cgroup's counters (< 64 KiB + one call's) */
	__u32 pend_out;
	__u32 copied_seq; /* tcp copied_seq at the last read (bytes in, arrival mode) */
	__u16 lag
		[2]; /* ns from a send's transmit to its return (send_end): a reply's first, later */
	__u16 bucket; /* latency bucket the open reply is counted in */
	__u16 hslot;  /* the cgroup's histogram slot + 1, 0 = none yet (conn_hists) */
	__u8 phase;
	__u8 dir;
	__u8 sends;   /* sends before the lag is sampled again */
	__u8 skipped; /* server: requests not split since the last one that was (server_recv) */
	__u64 mark_ns; /* server: the request's first read (PH_RECV), its reply's first send's end (PH_REPLY) */
};
_Static_assert(sizeof(struct conn) == 64,
	       "56 bytes in one line with the map pointer, mark_ns in the next");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct conn);
} tw_sk_conns SEC(".maps");

/* Syscall fallback only; user space sizes it (1 entry in other modes). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, __u64); /* struct sock address */
	__type(value, struct conn);
} tw_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* cgroup2 id */
	__type(value, struct tw_cg_counters);
} tw_cg_counters SEC(".maps");

/* watch_listed: the cgroups to follow (their cgroup2 ids; the value is unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u8);
} tw_watched SEC(".maps");

/* Histogram slots (see sensor_abi.h); user space sizes all three alike. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tw_cg_hists);
} tw_cg_hists SEC(".maps");

/* Sums per slot, per CPU (sensor_abi.h): user space zeroes a slot with its histograms. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct tw_cg_sums);
} tw_cg_sums SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);   /* cgroup2 id */
	__type(value, __u32); /* its slot in tw_cg_hists */
} tw_cg_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, 1024);
	__type(value, __u32);
} tw_free_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TW_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tw_drops SEC(".maps");

static __always_inline void drop(__u32 what)
{
	drop_count(&tw_drops, what);
}

static __always_inline struct tw_cg_counters *cg_counters(__u64 cgid)
{
	struct tw_cg_counters zero = {};

	return cg_entry(&tw_cg_counters, cgid, &zero, &tw_drops, TW_DROP_CGROUP_FULL);
}

/*
 * The cgroup's histogram slot + 1, taken from the free ones if it has
 * none yet; 0 when none is free (counted as a full table).
 */
static __always_inline __u16 cg_slot(__u64 cgid)
{
	struct tw_cg_hists *h;
	__u32 *s, slot;

	s = bpf_map_lookup_elem(&tw_cg_slots, &cgid);
	if (s)
		return *s + 1;
	if (bpf_map_pop_elem(&tw_free_slots, &slot))
		goto full;
	h = bpf_map_lookup_elem(&tw_cg_hists, &slot);
	if (!h)
		goto full;
	/* User space zeroed the slot before it freed it: only the owner to set. */
	h->cgid = cgid;
	if (!bpf_map_update_elem(&tw_cg_slots, &cgid, &slot, BPF_NOEXIST))
		return slot + 1;
	/* Another CPU took a slot for this cgroup meanwhile (or the table is full). */
	h->cgid = 0;
	bpf_map_push_elem(&tw_free_slots, &slot, 0);
	s = bpf_map_lookup_elem(&tw_cg_slots, &cgid);
	if (s)
		return *s + 1;
full:
	drop(TW_DROP_CGROUP_FULL);
	return 0;
}

/*
 * The histograms of the connection's cgroup: an array index, no hash
 * lookup, once the connection knows its slot. A slot that changed owner
 * (user space forgot the cgroup, removed while this socket lived on) is
 * not written; the connection asks for a slot again at its next request,
 * with its cgroup's counters entry, so that user space sees and forgets it
 * again.
 */
static __always_inline struct tw_cg_hists *conn_hists(struct conn *c)
{
	struct tw_cg_hists *h;
	__u32 i;

	if (!c->hslot) {
		if (!cg_counters(c->cgid))
			return NULL;
		c->hslot = cg_slot(c->cgid);
		if (!c->hslot)
			return NULL;
	}
	i = c->hslot - 1;
	h = bpf_map_lookup_elem(&tw_cg_hists, &i);
	if (h && h->cgid == c->cgid)
		return h;
	c->hslot = 0;
	return NULL;
}

/*
 * The sums of the connection's cgroup, on this CPU: call after
 * conn_hists() found its histograms, so the slot is the cgroup's.
 */
static __always_inline struct tw_cg_sums *conn_sums(struct conn *c)
{
	__u32 i = c->hslot - 1;

	return bpf_map_lookup_elem(&tw_cg_sums, &i);
}

/* Add the connection's pending byte counts to its cgroup's. */
static __always_inline void flush(struct conn *c, __u64 now)
{
	struct tw_cg_counters *cnt;

	c->flushed_ns = now;
	if (!c->cgid || (!c->pend_in && !c->pend_out))
		return;
	cnt = bpf_map_lookup_elem(&tw_cg_counters, &c->cgid);
	if (cnt) {
		if (c->dir == TW_DIR_SERVER) {
			cnt->bytes_in += c->pend_in;
			cnt->bytes_out += c->pend_out;
		} else {
			cnt->out_bytes_in += c->pend_in;
			cnt->out_bytes_out += c->pend_out;
		}
	}
	c->pend_in = 0;
	c->pend_out = 0;
}

/* Batch threshold: flush when enough bytes or enough time have piled up. */
static __always_inline void maybe_flush(struct conn *c, __u64 now)
{
	if (c->pend_in + c->pend_out >= FLUSH_BYTES || now - c->flushed_ns >= FLUSH_NS)
		flush(c, now);
}

/* Count bytes on the connection; a big transfer reaches the cgroup soon. */
static __always_inline void add_bytes(struct conn *c, __u32 *pend, __u64 len)
{
	*pend += len;
	if (*pend >= FLUSH_BYTES)
		flush(c, c->flushed_ns);
}

/* Validate a span: negative or absurd spans are counted, never reported. */
static __always_inline bool span_ok(struct conn *c, __u64 start, __u64 now)
{
	struct tw_cg_counters *cnt;

	if (now < start) {
		drop(TW_DROP_SPAN_NEGATIVE);
	} else if (now - start > max_span_ns) {
		drop(TW_DROP_SPAN_ABSURD);
	} else {
		return true;
	}
	cnt = c->cgid ? bpf_map_lookup_elem(&tw_cg_counters, &c->cgid) : NULL;
	if (cnt)
		cnt->spans_dropped++;
	return false;
}

/*
 * The socket as TCP's, read only. Two ways, one per kernel generation, and
 * each program is built in both flavours (see the end of this file) so
 * that a kernel loads only the one it can verify:
 * - bpf_rdonly_cast (a kfunc, 6.2+): the verifier inlines it, the loads
 *   through it are plain loads;
 * - bpf_skc_to_tcp_sock (a helper, 5.9+): a call, and NULL for a socket
 *   that is not a full TCP one.
 * A program that calls the kfunc is refused whole by a verifier that does
 * not know it, even on a path never taken, hence the two flavours.
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

enum cast { CAST_KFUNC, CAST_HELPER };

static __always_inline const struct tcp_sock *tcp_of(const struct sock *sk, enum cast how)
{
	if (how == CAST_KFUNC)
		return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	return bpf_skc_to_tcp_sock((void *)sk);
}

/*
 * The socket's clock: tcp_mstamp_refresh() stores tcp_clock_ns()
 * (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()) at the start of every
 * receive path and of every transmit, and when data is copied to the
 * reader (tcp_rcv_space_adjust, after its tracepoint). Read from that
 * tracepoint, it is when TCP last took in a segment: the request's
 * arrival. 0 before the socket's first event.
 */
static __always_inline __u64 sock_clock(const struct tcp_sock *tp)
{
	return tp->tcp_clock_cache;
}

/* Bytes the reader has been given so far (wraps: compare by difference). */
static __always_inline __u32 sock_copied(const struct tcp_sock *tp)
{
	return tp->copied_seq;
}

static __always_inline bool is_tcp(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;

	return (family == AF_INET || family == AF_INET6) && sk->sk_protocol == IPPROTO_TCP;
}

/* The connection's state, created if need be, with its direction if new. */
static __always_inline struct conn *conn_get_sk(struct sock *sk, const struct tcp_sock *tp,
						__u8 dir)
{
	struct conn *c;

	c = bpf_sk_storage_get(&tw_sk_conns, sk, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		drop(TW_DROP_CONN_FULL);
		return NULL;
	}
	if (!c->dir) {
		c->dir = dir;
		c->copied_seq = sock_copied(tp);
	}
	return c;
}

/*
 * Which side of the connection this host is. A socket that accept()
 * returned is a clone of its listener and keeps the listener's
 * sk_max_ack_backlog (what listen() set, at least 1 unless listen(fd, 0));
 * a connect()ed socket never listened: 0.
 */
static __always_inline __u8 sock_dir(const struct sock *sk)
{
	return sk->sk_max_ack_backlog ? TW_DIR_SERVER : TW_DIR_CLIENT;
}

/*
 * The state of a connection this sensor follows, or NULL. Server
 * connections get theirs when established (tw_set_state), and, when they
 * were established before we attached, here, at their first event. Client
 * connections have none unless outbound spans are on, so that their
 * events, half of all on a host that is also the client (loopback
 * benchmarks, proxies, sidecars), stop at a load: a socket that never
 * listened. That test comes before the storage lookup, which is not free
 * (a helper call) even for a socket without storage of ours: the
 * contention signals' flow figures put theirs on every TCP socket.
 */
static __always_inline struct conn *conn_of(struct sock *sk, const struct tcp_sock *tp)
{
	__u8 dir = sock_dir(sk);
	struct conn *c;

	if (dir == TW_DIR_CLIENT && !outbound)
		return NULL;
	if (sk->sk_bpf_storage) {
		c = bpf_sk_storage_get(&tw_sk_conns, sk, NULL, 0);
		if (c)
			return c;
	}
	return conn_get_sk(sk, tp, dir);
}

static __always_inline struct conn *conn_get_addr(__u64 key, __u8 dir)
{
	struct conn *c, nc = { .dir = dir };

	c = bpf_map_lookup_elem(&tw_conns, &key);
	if (c)
		return c;
	if (bpf_map_update_elem(&tw_conns, &key, &nc, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&tw_conns, &key)) {
		drop(TW_DROP_CONN_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&tw_conns, &key);
}

/*
 * Attribute the connection to the current task's cgroup on its first
 * task-context event; it stays there even if the socket is later passed
 * to a process in another cgroup. false when the cgroup table is full, or
 * when the cgroup is not listed (watch_listed): the connection is then
 * ignored until the list changes. The task's cgroup, not the socket's: a
 * socket-activated service's listener, and so every connection it
 * accepts, belongs to the cgroup of the manager that opened it.
 */
static __always_inline bool attribute(struct conn *c)
{
	struct tw_cg_counters *cnt;
	__u64 cgid;

	if (c->cgid)
		return true;
	if (c->phase == PH_IGNORED && c->start_ns == watch_gen)
		return false;
	cgid = bpf_get_current_cgroup_id();
	if (watch_listed && !bpf_map_lookup_elem(&tw_watched, &cgid)) {
		c->phase = PH_IGNORED;
		c->start_ns = watch_gen;
		return false;
	}
	c->phase = PH_IDLE; /* if it was ignored under an older list */
	cnt = cg_counters(cgid);
	if (!cnt)
		return false;
	c->cgid = cgid;
	if (c->dir == TW_DIR_SERVER)
		cnt->conns_open++;
	return true;
}

/*
 * The phase split's clock read, sampled on busy connections. In the
 * arrival mode a request's start is a load (the socket's clock), but the
 * end of its queued phase, the server's first read, is not stamped by
 * anything the sensor can read (TCP refreshes the socket's clock right
 * after the tracepoint): it takes a clock read, 50-100 ns behind a
 * retpoline, half of all the request sensor's own work on the server's
 * side of a loopback nginx request (issue 27). So a connection whose
 * request arrives less than SPLIT_GAP_NS after its previous reply ended
 * (back to back: a busy client, at rates where the cost shows) splits one
 * request in SPLIT_SAMPLE (odd, so that a pattern of alternating requests
 * is not always sampled on the same side); every other request (after a
 * pause, a connection's first, in the modes that read the clock anyway)
 * is split. A split request stands for itself and the requests of its
 * connection skipped before it: it adds that many to its queued and
 * service buckets and that many times its queued and service time to the
 * sums (reply_start); a skipped one adds to neither (it is in the span's
 * histograms and sum as every request). The phases' histograms are thus
 * those of a systematic sample of one request in SPLIT_SAMPLE, weighted,
 * with about the requests' count, and their sums add up to the spans'
 * exactly where every request is split, and in expectation where not.
 * Not a sample and hold: giving a skipped request the queued time last
 * measured on its connection put the queueing it did not share into its
 * service, and nginx's service p99 read 4.1-4.3 ms instead of 20 us at
 * saturation beside a CPU hog.
 */
#define SPLIT_SAMPLE 7
#define SPLIT_GAP_NS 1000000ULL

/*
 * The server reads. Its first read after a reply, or on an idle
 * connection, starts a request: when its bytes came in (arrived, from the
 * socket's clock) or, without that, now. Now is also when its queued phase
 * ends (mark_ns): a clock read, sampled as above in the arrival mode
 * (mark_ns 0: not split).
 */
static __always_inline void server_recv(struct conn *c, __u64 len, __u64 arrived)
{
	__u64 now;

	add_bytes(c, &c->pend_in, len);
	if (c->phase == PH_RECV)
		return;
	c->phase = PH_RECV;
	/* Wraps (a request in before the last reply ended) to a pause: split. */
	if (arrived && c->skipped < SPLIT_SAMPLE - 1 && arrived - c->last_send_ns < SPLIT_GAP_NS) {
		c->start_ns = arrived;
		c->mark_ns = 0;
		return;
	}
	now = bpf_ktime_get_ns();
	c->start_ns = arrived ?: now;
	c->mark_ns = now;
}

/*
 * First send of a reply: count the request, put it in the histograms.
 * Its span so far is queued (arrival -> first read) plus service (first
 * read -> now); sending starts at 0, in bucket 0.
 */
static __always_inline void reply_start(struct conn *c, __u64 now)
{
	struct tw_cg_hists *h;
	struct tw_cg_sums *sum;
	__u64 span, queued;
	__u32 b, w;

	if (!span_ok(c, c->start_ns, now)) {
		c->phase = PH_IDLE;
		return;
	}
	span = now - c->start_ns;
	/* The socket's clock and ours may disagree by a hair: clamp. */
	queued = c->mark_ns > c->start_ns ? c->mark_ns - c->start_ns : 0;
	if (queued > span)
		queued = span;
	/* Split: it stands for itself and the skipped before it (server_recv). */
	w = 0;
	if (c->mark_ns) {
		w = c->skipped + 1;
		c->skipped = 0;
	} else {
		c->skipped++;
	}
	h = conn_hists(c);
	b = hist_bucket_of(span);
	if (h) {
		hist_add(h->ttfb, b, 1); /* also the count of requests (sensor_abi.h) */
		hist_add(h->latency, b, 1);
		if (w) {
			if (arrival_stamps)
				hist_add(h->phase[TW_PHASE_QUEUED], hist_bucket_of(queued), w);
			hist_add(h->phase[TW_PHASE_SERVICE], hist_bucket_of(span - queued), w);
		}
		/* Sending: 0 so far, bucket 0, which is not counted (sensor_abi.h). */
		sum = conn_sums(c);
		if (sum) {
			sum->span_ns += span;
			sum->phase_ns[TW_PHASE_QUEUED] += w * queued;
			sum->phase_ns[TW_PHASE_SERVICE] += w * (span - queued);
		}
	}
	c->bucket = b;
	c->phase = PH_REPLY;
	c->last_send_ns = now;
	c->mark_ns = now;
	maybe_flush(c, now);
}

/*
 * A later send of the same reply: its span, and its sending phase (since
 * the first send's end, mark_ns), now end here; both grow by the time
 * since the previous send.
 */
static __always_inline void reply_more(struct conn *c, __u64 now)
{
	struct tw_cg_hists *h;
	struct tw_cg_sums *sum;
	__u32 b, sb, sb_was;
	__u64 d;

	if (now - c->last_send_ns > quiet_ns || !span_ok(c, c->start_ns, now)) {
		/* Quiet too long: this send is not part of the reply. */
		c->phase = PH_IDLE;
		return;
	}
	d = now - c->last_send_ns;
	h = d ? conn_hists(c) : NULL;
	if (h) {
		sum = conn_sums(c);
		if (sum) {
			sum->span_ns += d;
			sum->phase_ns[TW_PHASE_SENDING] += d;
		}
		b = hist_bucket_of(now - c->start_ns);
		if (b != c->bucket) {
			hist_add(h->latency, c->bucket, -1);
			hist_add(h->latency, b, 1);
			c->bucket = b;
		}
		sb_was = hist_bucket_of(c->last_send_ns - c->mark_ns);
		sb = hist_bucket_of(now - c->mark_ns);
		if (sb != sb_was) {
			if (sb_was) /* bucket 0 is not counted */
				hist_add(h->phase[TW_PHASE_SENDING], sb_was, -1);
			hist_add(h->phase[TW_PHASE_SENDING], sb, 1);
		}
	}
	c->last_send_ns = now;
}

/*
 * Every LAG_SAMPLE-th send of a connection reads the clock: odd, so that
 * the samples fall on each send of a reply of several in turn.
 */
#define LAG_SAMPLE 7
/* A lag above this is not a send's own (preempted, or queued): not kept. */
#define LAG_MAX_NS 50000ULL /* below 65536: a __u16 */

/*
 * How far ahead of the socket's clock pacing may have put the next
 * departure for the transmit time to still be taken (sock_sent_at).
 */
#define PACE_AHEAD_NS 10000ULL

/*
 * When the socket last transmitted, if all the application wrote has been
 * transmitted by now, else 0. TCP sets tcp_wstamp_ns to its clock as it
 * transmits each packet; unlike the socket's clock itself, which an ACK
 * taken in after the transmit moves on, it stays the transmit's. When TCP
 * paces (BBR, or the fq qdisc) it is the next packet's earliest departure
 * instead, the packet's length at the pacing rate later: up to
 * PACE_AHEAD_NS beyond the socket's clock that is a constant the sampled
 * lag takes out (send_end); further, pacing holds packets back: 0.
 */
static __always_inline __u64 sock_sent_at(const struct tcp_sock *tp)
{
	__u64 at = tp->tcp_wstamp_ns;

	if (tp->snd_nxt != tp->write_seq || at > tp->tcp_clock_cache + PACE_AHEAD_NS)
		return 0;
	return at;
}

/*
 * When a send call returns: a reply's span ends there. A clock read
 * (bpf_ktime_get_ns) costs 50-100 ns on hosts with retpolines, two per
 * request of a server that sends headers and body apart. The socket's
 * transmit time (sock_sent_at) is free, but it is taken before the call
 * has handed the data on (on loopback, before the peer's whole receive
 * path): spans ended there read 4-5 us shorter than the client's receive
 * time, which moved redis's and memcached's p50 ratios from ~0.98 to
 * ~0.83 in the accuracy benchmark. So the end is the transmit time plus
 * the connection's send lag (return minus transmit), a moving average of
 * samples taken with a clock read every LAG_SAMPLE sends; one lag for a
 * reply's first send and one for its later ones (more), as a first send
 * may have to wake an idle peer: one lag for both made nginx's p50 at
 * 30 % load read 1.06 of the receive time. A send whose bytes are not all
 * transmitted when it returns (queued behind the window, corked, paced)
 * says nothing about its own transmit: the clock is read. A sample that
 * finds the return before the transmit time (paced further ahead than
 * ever) or more than LAG_MAX_NS after it (the task was preempted) is not
 * kept, and the next send samples again.
 */
static __always_inline __u64 send_end(struct conn *c, const struct tcp_sock *tp, int more)
{
	__u64 now, at, lag;

	at = tp ? sock_sent_at(tp) : 0;
	if (!at)
		return bpf_ktime_get_ns();
	if (c->sends && c->lag[more]) {
		c->sends--; /* a countdown: no division on the hot path */
		return at + c->lag[more];
	}
	c->sends = LAG_SAMPLE - 1;
	now = bpf_ktime_get_ns();
	if (now > at && now - at <= LAG_MAX_NS) {
		/* A moving average (1/4 each new sample): one odd send moves it little. */
		lag = c->lag[more];
		c->lag[more] = lag ? lag - lag / 4 + (now - at) / 4 : now - at;
	} else {
		c->sends = 0; /* sample again at the next send */
	}
	return now;
}

static __always_inline void server_send(struct conn *c, const struct tcp_sock *tp, __u64 len)
{
	add_bytes(c, &c->pend_out, len);
	if (c->phase == PH_REPLY) {
		reply_more(c, send_end(c, tp, 1));
	} else if (c->phase == PH_RECV) {
		reply_start(c, send_end(c, tp, 0));
	}
	/* Otherwise idle: an unsolicited send (banner, push) starts no request. */
}

/*
 * Our request went out. sock_send_length fires when sendmsg returns; on
 * loopback the server may have answered by then, so the start is the
 * transmit's clock (sk) when we have the socket, else now.
 */
static __always_inline void client_send(struct conn *c, const struct tcp_sock *tp, __u64 len)
{
	add_bytes(c, &c->pend_out, len);
	if (c->phase != PH_REQ) {
		c->start_ns = (tp ? sock_clock(tp) : 0) ?: bpf_ktime_get_ns();
		c->phase = PH_REQ;
	}
}

/* The reply to our request came in (at now, from the socket's clock) or was first read. */
static __always_inline void client_reply(struct conn *c, __u64 now)
{
	struct tw_cg_hists *h;

	if (c->phase != PH_REQ)
		return;
	c->phase = PH_RESP;
	if (!c->cgid || !span_ok(c, c->start_ns, now))
		return;
	h = conn_hists(c);
	if (h) {
		__sync_fetch_and_add(&h->out_requests, 1);
		hist_add(h->outbound, hist_bucket_of(now - c->start_ns), 1);
	}
	maybe_flush(c, now);
}

/* len bytes read; arrived: when they came in (socket's clock), 0 if unknown. */
static __always_inline void on_recv(struct conn *c, __u64 len, __u64 arrived)
{
	if (!c || (!outbound && c->dir != TW_DIR_SERVER) || !attribute(c))
		return;
	if (c->dir == TW_DIR_SERVER) {
		server_recv(c, len, arrived);
	} else {
		add_bytes(c, &c->pend_in, len);
		if (c->phase == PH_REQ)
			client_reply(c, arrived ?: bpf_ktime_get_ns());
	}
}

/* tp: the socket as TCP's, or NULL (syscall fallback). */
static __always_inline void on_send(struct conn *c, const struct tcp_sock *tp, __u64 len)
{
	if (!c || (!outbound && c->dir != TW_DIR_SERVER) || !attribute(c))
		return;
	if (c->dir == TW_DIR_SERVER)
		server_send(c, tp, len);
	else
		client_send(c, tp, len);
}

/*
 * tcp_rcv_space_adjust fires each time TCP copies received data to the
 * reader (recv*, read, splice, zero-copy receive; several times when one
 * call takes several segments), in the reader's context, before the
 * socket's clock is refreshed for the copy: the clock still says when
 * the data came in. A read that finds nothing (EAGAIN, common with epoll
 * servers) does not get here. copied_seq has already moved past the data;
 * the difference from the last read is the bytes read (0 for MSG_PEEK).
 * The tracepoint is 4.16+: every kernel we run on has it.
 */
static __always_inline int rcv_space(struct sock *sk, enum cast how)
{
	const struct tcp_sock *tp = tcp_of(sk, how);
	struct conn *c;
	__u32 seq;

	if (!tp)
		return 0;
	c = conn_of(sk, tp);
	if (!c)
		return 0;
	seq = sock_copied(tp);
	on_recv(c, seq - c->copied_seq, sock_clock(tp));
	c->copied_seq = seq;
	return 0;
}

/* A send of ret bytes (or -errno) on sk has returned, in the sender's context. */
static __always_inline int sent(struct sock *sk, long ret, enum cast how)
{
	const struct tcp_sock *tp;

	if (ret <= 0)
		return 0;
	tp = tcp_of(sk, how);
	if (tp)
		on_send(conn_of(sk, tp), tp, ret);
	return 0;
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(tw_rcv_space, struct sock *sk)
{
	return rcv_space(sk, CAST_KFUNC);
}

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(tw_rcv_space_h, struct sock *sk)
{
	return rcv_space(sk, CAST_HELPER);
}

/*
 * sock_recv_length / sock_send_length (6.3+) fire at the end of
 * sock_recvmsg() / sock_sendmsg(), in the caller's task context, for every
 * socket family and for read/recv*, write/send*, sendfile/splice and
 * io_uring alike. ret is the byte count or -errno (EAGAIN is common:
 * ignore it). On loopback the peer has already been handed the data when
 * they fire. sock_recv_length serves only the receive mode, where a
 * request starts at its first read. Both exist only where the kfunc does.
 */
SEC("tp_btf/sock_recv_length")
int BPF_PROG(tw_sock_recv, struct sock *sk, int ret, int flags)
{
	if (ret <= 0 || (flags & 2 /* MSG_PEEK */) || !is_tcp(sk))
		return 0;
	on_recv(conn_of(sk, tcp_of(sk, CAST_KFUNC)), ret, 0);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(tw_sock_send, struct sock *sk, int ret, int flags)
{
	if (!is_tcp(sk))
		return 0;
	return sent(sk, ret, CAST_KFUNC);
}

/* The helper flavour: a kernel with the tracepoint but without the kfunc. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(tw_sock_send_h, struct sock *sk, int ret, int flags)
{
	if (!is_tcp(sk))
		return 0;
	return sent(sk, ret, CAST_HELPER);
}

/*
 * Before 6.3 there is no sock_send_length: the same moment is the return
 * of TCP's own send functions, seen by fexit (a trampoline, in the
 * sender's context, with the return value). tcp_sendmsg takes write,
 * send*, writev and io_uring sends; sendfile and splice reach TCP through
 * tcp_sendpage, once per page, until 6.5 folded it into tcp_sendmsg.
 * fexit needs the kernel's BTF and ftrace direct calls: Debian's kernels
 * have them; where the kernel refuses (EPERM on some hardened or custom
 * kernels), user space falls back to the syscall mode.
 */
SEC("fexit/tcp_sendmsg")
int BPF_PROG(tw_tcp_sendmsg, struct sock *sk, struct msghdr *msg, size_t size, int ret)
{
	return sent(sk, ret, CAST_HELPER);
}

SEC("fexit/tcp_sendpage")
int BPF_PROG(tw_tcp_sendpage, struct sock *sk, struct page *page, int offset, size_t size,
	     int flags, int ret)
{
	return sent(sk, ret, CAST_HELPER);
}

/*
 * Connection life cycle, in softirq or task context. Established
 * connections get their direction; closed ones give back their pending
 * byte counts and lose their state, so that a struct sock reused at the
 * same address starts clean.
 */
static __always_inline int set_state(const struct sock *sk, int oldstate, int newstate,
				     enum cast how)
{
	struct sock *s = (struct sock *)sk;
	__u64 key = (__u64)sk;
	struct tw_cg_counters *cnt;
	const struct tcp_sock *tp;
	struct conn *c;

	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	if (newstate == TCP_ESTABLISHED && (oldstate == TCP_SYN_RECV || oldstate == TCP_SYN_SENT)) {
		__u8 dir = oldstate == TCP_SYN_RECV ? TW_DIR_SERVER : TW_DIR_CLIENT;

		/* Client connections of the socket modes need no state (conn_of). */
		if (dir == TW_DIR_CLIENT && !outbound && !conns_by_addr)
			return 0;
		tp = tcp_of(sk, how);
		if (!tp)
			return 0;
		c = conns_by_addr ? conn_get_addr(key, dir) : conn_get_sk(s, tp, dir);
		if (c)
			*c = (struct conn){ .dir = dir,
					    .flushed_ns = bpf_ktime_get_ns(),
					    .copied_seq = sock_copied(tp) };
		return 0;
	}
	if (newstate != TCP_CLOSE)
		return 0;
	c = conns_by_addr ? bpf_map_lookup_elem(&tw_conns, &key) :
			    bpf_sk_storage_get(&tw_sk_conns, s, NULL, 0);
	if (!c)
		return 0;
	flush(c, 0);
	if (c->dir == TW_DIR_SERVER && c->cgid) {
		cnt = bpf_map_lookup_elem(&tw_cg_counters, &c->cgid);
		if (cnt)
			cnt->conns_open--;
	}
	if (conns_by_addr)
		bpf_map_delete_elem(&tw_conns, &key);
	else
		bpf_sk_storage_delete(&tw_sk_conns, s);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tw_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	return set_state(sk, oldstate, newstate, CAST_KFUNC);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(tw_set_state_h, const struct sock *sk, const int oldstate, const int newstate)
{
	return set_state(sk, oldstate, newstate, CAST_HELPER);
}

/*
 * Fallback for kernels without the socket tracepoints (before 6.3): every
 * syscall exit, filtered to the socket I/O syscalls, fd -> file -> socket.
 * pt_regs at exit still hold the entry arguments (x86_64). This costs
 * every syscall on the host, so it only loads when needed.
 */

static __always_inline struct sock *fd_to_tcp_sock(int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file **fdarr, *file;
	struct socket *sock;
	struct sock *sk;
	unsigned int max;
	umode_t mode;

	if (fd < 0)
		return NULL;
	max = BPF_CORE_READ(task, files, fdt, max_fds);
	if ((unsigned int)fd >= max)
		return NULL;
	fdarr = BPF_CORE_READ(task, files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fdarr[fd]) || !file)
		return NULL;
	mode = BPF_CORE_READ(file, f_inode, i_mode);
	if ((mode & S_IFMT) != S_IFSOCK)
		return NULL;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return NULL;
	return sk;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(tw_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = BPF_CORE_READ(regs, orig_ax);
	struct sock *sk;
	bool in;

	if (ret <= 0)
		return 0;
	switch (nr) {
	case NR_read:
	case NR_readv:
	case NR_recvfrom:
	case NR_recvmsg:
		in = true;
		break;
	case NR_write:
	case NR_writev:
	case NR_sendto:
	case NR_sendmsg:
	case NR_sendfile:
		in = false;
		break;
	default:
		return 0;
	}
	sk = fd_to_tcp_sock((int)BPF_CORE_READ(regs, di));
	if (!sk)
		return 0;
	if (in)
		on_recv(conn_get_addr((__u64)sk, TW_DIR_SERVER), ret, 0);
	else
		on_send(conn_get_addr((__u64)sk, TW_DIR_CLIENT), NULL, ret);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
