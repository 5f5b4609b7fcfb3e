/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Contention signals per cgroup: why a service is slow. A second BPF
 * object (bpf/contention.bpf.c) aggregates scheduler, block I/O, VFS,
 * futex, kernel lock, page fault, reclaim and TCP events per cgroup in the
 * kernel; cgroupfs adds cpu.stat throttling and PSI. Read once per tick,
 * like the request sensor.
 */
#ifndef TW_CONTENTION_H
#define TW_CONTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "sensing/hist.h"

/* Signals that cost enough to be opt-in carry a flag here. */
enum contention_signal {
	CONT_SCHED = 1 << 0,   /* run-queue delay (task iterator once a tick, sched_process_exit) */
	CONT_BLOCK = 1 << 1,   /* block I/O bytes and latency */
	CONT_VFS = 1 << 2,     /* regular-file read/write bytes */
	CONT_FUTEX = 1 << 3,   /* futex wait time (sched_switch) */
	CONT_LOCK = 1 << 4,    /* kernel lock contention */
	CONT_MEMORY = 1 << 5,  /* memcg/direct reclaim time; page faults from
				  cgroup2 memory.stat where it has them */
	CONT_NETWORK = 1 << 6, /* TCP retransmits */
	CONT_TCP_RTT = 1 << 7, /* TCP smoothed RTT (tcp_probe, every received segment) */
	CONT_PAGE_FAULTS = 1 << 8, /* user page faults from page_fault_user (x86) */
	CONT_TCP_FLOWS = 1 << 9,   /* TCP flow figures (socket iterator once a tick) */
	CONT_ALL = (1 << 10) - 1,
};

/*
 * Signals loaded unless asked otherwise: those within their overhead budget.
 * Opt-in: FUTEX hooks every context switch (an empty program there alone
 * costs 3-4% of perf bench sched pipe; budget 3%), VFS every syscall's exit
 * (+26% on a getppid() loop), TCP_RTT every received TCP segment (+4% CPU
 * per request on nginx; budget 1%), PAGE_FAULTS every user page fault
 * (+13% on stress-ng --fault).
 */
#define CONT_DEFAULT (CONT_ALL & ~(CONT_FUTEX | CONT_VFS | CONT_TCP_RTT | CONT_PAGE_FAULTS))

struct contention_opts {
	unsigned signals;	 /* enum contention_signal mask to load */
	const char *cgroup_base; /* "/sys/fs/cgroup" (tests pass a tree they build) */
	uint32_t max_cgroups;
};

/*
 * TCP flow figures of one cgroup's sockets (CONT_TCP_FLOWS): a socket is
 * the cgroup's when a task of the cgroup created it (accepted sockets are
 * the listener's), and only sockets of the daemon's network namespace are
 * seen. Live figures are of the connected sockets (what `ss -t` lists) at
 * the end of the window, summed and the largest of one socket; NAN where
 * there is none (no socket: no RTT). Counters are what the cgroup's sockets
 * did in the window, sockets that closed in it included; timeouts NAN
 * before 6.7 (sockets count no RTOs there).
 */
struct contention_tcp {
	double sockets;
	double flight_sum, flight_max;	 /* segments in flight */
	double cwnd_sum, cwnd_max;	 /* congestion window, segments */
	double rcv_wnd_sum, rcv_wnd_max; /* receive window, bytes */
	double mss_min, mss_max;	 /* bytes */
	double srtt_mean_us, srtt_max_us;
	double sndq_sum, sndq_max; /* bytes sent not acknowledged yet, or not sent */
	double retrans_segs, fast_retrans_segs, timeouts;
	double bytes_acked, bytes_received;
};

/*
 * One cgroup's contention over one window. A double that is NAN, or a
 * "has_" flag that is false, means unavailable (JSON null).
 */
struct contention_sample {
	uint64_t cgroup_id;
	double interval_s;
	/* scheduler */
	struct hist runq;	/* wakeup -> on CPU, ns */
	double runq_delay_s;	/* total run-queue wait in the window */
	double cpu_usage_s;	/* CPU time used (cpuacct.usage / cpu.stat usage_usec) */
	double cpu_throttled_s; /* cpu.stat throttled_time / throttled_usec */
	double cpu_throttled_periods;
	/* block I/O, attributed to the issuing cgroup */
	double io_read_bytes, io_write_bytes;
	struct hist io; /* issue -> complete, ns */
	/* VFS, regular files only */
	double vfs_read_bytes, vfs_write_bytes;
	/* synchronisation */
	double futex_wait_s;
	double lock_contention_s;
	/* memory */
	double page_faults;
	double reclaim_s;
	/* network */
	double tcp_retransmits;
	double tcp_srtt_us; /* mean smoothed RTT of the window's samples */
	bool tcp_on;	    /* the flow figures below were gathered */
	struct contention_tcp tcp;
	/* PSI avg10 percentages */
	double psi_cpu_some, psi_io_some, psi_memory_some;
};

struct contention;
struct contention_snapshot;

/*
 * Parse a comma-separated list of signal names (sched, block, vfs, futex,
 * lock, memory, network, tcp_rtt, page_faults, tcp_flows) and the words "default" and "all" into a
 * mask. 0 or -EINVAL.
 */
int contention_signals_parse(const char *list, unsigned *mask);

/*
 * Load and attach the signals in opts->signals that this kernel supports.
 * 0 or -errno with *why set. Signals the kernel lacks are left out, not
 * errors: contention_missing() says which, and why.
 */
int contention_open(const struct contention_opts *opts, struct contention **out, const char **why);
void contention_free(struct contention *c);
/* Attach (on) or detach the running signals' programs, as sensor_attach(). 0 or -errno. */
int contention_attach(struct contention *c, bool on);
/* Mask of signals actually running. */
unsigned contention_signals(const struct contention *c);
/* One line naming each requested signal that could not run and why ("" if none). */
const char *contention_missing(const struct contention *c);

/* Read the BPF maps. 0 or -errno. */
int contention_read(struct contention *c, struct contention_snapshot **out);
void contention_snapshot_free(struct contention_snapshot *s);

/*
 * Window sample of one cgroup: BPF figures from the two snapshots, cgroupfs
 * figures (cpu.stat, PSI) read now from the cgroup at path rel (relative to
 * the cgroup root, leading '/'). prev may be NULL. 0 or -errno.
 */
int contention_sample(struct contention *c, const struct contention_snapshot *now,
		      const struct contention_snapshot *prev, uint64_t id, const char *rel,
		      double interval_s, struct contention_sample *out);

/* Events left uncounted over a window, all cgroups together. */
struct contention_drops {
	uint64_t cgroups; /* cgroup table full (max_cgroups) */
	uint64_t stamps;  /* no room for a per-thread or per-request stamp */
	uint64_t absurd;  /* waits longer than a minute: a lost stamp */
};

void contention_drops(const struct contention_snapshot *now, const struct contention_snapshot *prev,
		      struct contention_drops *d);
/* Number of cgroups in a snapshot (map entries), and the id of the i-th. */
size_t contention_snapshot_len(const struct contention_snapshot *s);
uint64_t contention_snapshot_id(const struct contention_snapshot *s, size_t i);
/* How long the last run of the TCP socket iterator took, ns (0: none ran). */
uint64_t contention_flows_iter_ns(const struct contention *c);
/* Forget a cgroup that no longer exists (frees its map entries). */
void contention_forget(struct contention *c, uint64_t id);

#endif
