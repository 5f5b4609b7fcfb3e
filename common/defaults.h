/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every built-in default the daemon and its tools share, in one place.
 * --help texts and the man pages quote these values: change them together.
 */
#ifndef TW_DEFAULTS_H
#define TW_DEFAULTS_H

#define TW_NSEC_PER_SEC 1000000000ULL

/* Files and directories. */
#define TW_CONFIG_PATH "/etc/tailwarden/tailwarden.conf"
#define TW_POLICIES_DIR "/etc/tailwarden/policies.d"
#define TW_STATE_DIR "/run/tailwarden"
#define TW_STATE_FILE "state.json" /* in the state directory */
#define TW_CGROUP_BASE "/sys/fs/cgroup"
#define TW_DECISION_LOG_MAX_SIZE (16ULL << 20) /* DecisionLogMaxSize= */

/* Where /metrics listens unless Metrics= says otherwise. */
#define TW_METRICS_ADDRESS "127.0.0.1:9477"

/* Policy keys a policy file leaves out. */
#define TW_POLICY_PERCENTILE 0.99
#define TW_POLICY_MIN_REQUESTS 200
#define TW_POLICY_WINDOW_NS (2 * TW_NSEC_PER_SEC) /* Window= */
/*
 * The engine's window for a policy whose window_ns is 0, which only a
 * policy built in code (not by the parser) can have.
 */
#define TW_ENGINE_WINDOW_NS TW_NSEC_PER_SEC
/*
 * The weight by which a best-effort service shares what is left with the
 * others when its CPU weight is unknown: cgroup v2's default.
 */
#define TW_ENGINE_SHARE_WEIGHT 100.0

/* The control loop's tick, Period= in the config. */
#define TW_PERIOD_NS TW_NSEC_PER_SEC

/* BPF table sizes: cgroups tracked by each sensor, connections by the request sensor. */
#define TW_MAX_CGROUPS 4096
/*
 * Cgroups whose request latency the request sensor holds at once: its
 * histograms are preallocated slots (6.7 KiB each), at most this many,
 * fewer if the cgroup table is smaller.
 */
#define TW_MAX_HIST_CGROUPS 1024
_Static_assert(TW_MAX_HIST_CGROUPS < 65536, "a connection keeps its slot + 1 in 16 bits");
#define TW_MAX_CONNS 262144

#endif
