/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Request sensing: loads and attaches the BPF sensor, reads its cumulative
 * per-cgroup maps, and turns two reads into per-cgroup QoS samples.
 */
#ifndef TW_SENSING_SENSOR_H
#define TW_SENSING_SENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/defaults.h"
#include "sensing/hist.h"

enum sensor_mode {
	SENSOR_MODE_AUTO,
	SENSOR_MODE_ARRIVAL, /* the socket's clock at the first copy stamps arrival */
	SENSOR_MODE_RECEIVE, /* first receive stamps start (6.3+) */
	SENSOR_MODE_SYSCALL, /* syscall-exit fallback, receive-stamped */
};

struct sensor_opts {
	enum sensor_mode mode;
	uint32_t max_conns;   /* connection table size */
	uint32_t max_cgroups; /* cgroup table size */
	uint64_t quiet_ns;    /* a reply send after this much quiet is not the same reply */
	uint64_t max_span_ns; /* longer spans are dropped and counted */
	bool outbound;	      /* also time this host's own outbound requests */
	bool watch_listed;    /* follow only the cgroups of sensor_watch() */
};

#define SENSOR_OPTS_DEFAULT                                              \
	{                                                                \
		.mode = SENSOR_MODE_AUTO, .max_conns = TW_MAX_CONNS,     \
		.max_cgroups = TW_MAX_CGROUPS, .quiet_ns = 100000000ULL, \
		.max_span_ns = 60000000000ULL                            \
	}

/* Global drop counters over a window. */
struct sensor_drops {
	uint64_t spans_negative, spans_absurd, conns, cgroups;
};

/* One cgroup's QoS over one window. */
struct qos_sample {
	uint64_t cgroup_id;
	double interval_s;
	uint64_t requests;
	uint64_t bytes_in, bytes_out;
	int64_t conns_open;
	uint64_t out_requests, out_bytes_in, out_bytes_out;
	uint64_t spans_dropped;
	struct hist latency, ttfb, outbound;
	bool outbound_on; /* out_* and outbound were measured (sensor_opts.outbound) */
	/*
	 * The served requests' phases (enum tw_phase: queued, service,
	 * sending), each a histogram and a sum, and the sum of their spans:
	 * the phase sums add up to span_ns. phase_on[i] false: phase i is not
	 * seen in this mode (queued without arrival stamps), its figures 0.
	 */
	struct hist phase[TW_PHASES];
	uint64_t phase_ns[TW_PHASES], span_ns;
	bool phase_on[TW_PHASES];
};

/*
 * A phase's name: "queued", "service", "sending". Inline: the exposition
 * and its tests use it without the BPF half.
 */
static inline const char *sensor_phase_name(unsigned phase)
{
	static const char *const names[TW_PHASES] = {
		[TW_PHASE_QUEUED] = "queued",
		[TW_PHASE_SERVICE] = "service",
		[TW_PHASE_SENDING] = "sending",
	};

	return phase < TW_PHASES ? names[phase] : "?";
}

struct sensor;
struct sensor_snapshot;

/* Parse "auto", "arrival", "receive", "syscall". 0 or -EINVAL. */
int sensor_mode_parse(const char *s, enum sensor_mode *mode);
const char *sensor_mode_name(enum sensor_mode mode);

/*
 * Probe the kernel, load and attach. 0 or -errno; on error *why says
 * which feature is missing (static string). -EPERM when not privileged.
 */
int sensor_open(const struct sensor_opts *opts, struct sensor **out, const char **why);
void sensor_free(struct sensor *s);
/*
 * Attach (on) or detach the loaded programs; maps and connection state
 * stay. The benchmark's way of timing the same programs on and off within
 * one load. 0 or -errno.
 */
int sensor_attach(struct sensor *s, bool on);
/* The mode that runs, and in words why it was chosen. */
enum sensor_mode sensor_mode(const struct sensor *s);
const char *sensor_mode_reason(const struct sensor *s);
/*
 * Which phases the mode sees (phase_on of its samples), and, when one is
 * not, why in words (static); NULL when all are.
 */
void sensor_phases(const struct sensor *s, bool on[TW_PHASES], const char **why);

/* Read the cumulative maps. 0 or -errno (-ENOMEM). */
int sensor_read(struct sensor *s, struct sensor_snapshot **out);
void sensor_snapshot_free(struct sensor_snapshot *snap);
/* Number of cgroups in a snapshot, and the id of the i-th. */
size_t sensor_snapshot_len(const struct sensor_snapshot *snap);

/*
 * Window sample of cgroup id between two snapshots (prev may be NULL or
 * lack the cgroup: counted from zero). 0, or -ENOENT when now lacks it.
 */
int sensor_sample(const struct sensor_snapshot *now, const struct sensor_snapshot *prev,
		  uint64_t id, double interval_s, struct qos_sample *out);
uint64_t sensor_snapshot_id(const struct sensor_snapshot *snap, size_t i);
void sensor_drops(const struct sensor_snapshot *now, const struct sensor_snapshot *prev,
		  struct sensor_drops *d);

/*
 * opts.watch_listed: follow the connections of these cgroups (ids, 0s
 * ignored) and of no other, from now on; a connection opened under an
 * earlier list, or before its cgroup was listed, is followed from its
 * next event. Without watch_listed every cgroup is followed and the list
 * is not used. 0, or -errno (-E2BIG: more cgroups than max_cgroups; the
 * list is then the one before).
 */
int sensor_watch(struct sensor *s, const uint64_t *ids, size_t n);

/* Forget a cgroup that no longer exists (frees its map entries). */
void sensor_forget(struct sensor *s, uint64_t id);

#endif
