/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Recordings (`tailwarden record`, `tailwarden replay`): gzip-compressed
 * JSON Lines. The first line is a header (format, host, kernel, version,
 * period); then one line per tick: its index and CLOCK_MONOTONIC time, its
 * length, and per cgroup what `top --json` shows plus the exact figures
 * the engine is fed ("raw": counters and histogram buckets, the
 * contention sample) and the knobs' values ("knobs"). Doubles in "raw"
 * and "knobs" are written with 17 digits, so a replay reads back the very
 * values the daemon computed.
 */
#ifndef TW_RECORDING_H
#define TW_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "policies/action.h"
#include "sensing/contention.h"
#include "sensing/sensor.h"

#define REC_FORMAT 1

struct rec_header {
	char version[32];
	char host[256];
	char kernel[256];
	char sensing_mode[32];
	uint64_t period_ns;
	bool contention; /* a contention sensor ran */
	double started;	 /* CLOCK_REALTIME s */
	unsigned part;	 /* 1 for the first file, +1 at each rotation */
};

struct rec_cgroup {
	uint64_t id;
	char *path; /* relative to the cgroup2 root, leading '/' */
	struct qos_sample q;
	bool have_c;
	struct contention_sample c;
	double knob[KNOB_MAX]; /* NAN: unavailable; INFINITY: "max" */
};

struct rec_tick {
	uint64_t index;	   /* CLOCK_MONOTONIC time / period */
	uint64_t mono_us;  /* CLOCK_MONOTONIC time of the tick */
	double ts;	   /* CLOCK_REALTIME s */
	double interval_s; /* since the previous tick */
	size_t n;
	struct rec_cgroup *v;
};

/* ---- writing ---- */

struct json_object *rec_header_json(const struct rec_header *h);
/* One cgroup of a tick: top's object, "raw" and "knobs". c may be NULL. NULL on ENOMEM. */
struct json_object *rec_cgroup_json(const struct qos_sample *q, const char *path, double ts,
				    const struct contention_sample *c, const double knob[KNOB_MAX]);
/* A tick's line; takes ownership of cgroups (a JSON array). NULL on ENOMEM. */
struct json_object *rec_tick_json(uint64_t index, uint64_t mono_us, double ts, double interval_s,
				  struct json_object *cgroups);

struct rec_writer;

/*
 * Create path (truncated) and write the header. Past max_size bytes
 * (0: no limit) the file is closed, renamed to path.1 (replacing an older
 * one) and a new one begins with its own header. 0 or -errno.
 */
int rec_writer_open(const char *path, uint64_t max_size, const struct rec_header *h,
		    struct rec_writer **out);
/* Write one line (and release obj), flushed to the file. 0 or -errno. */
int rec_writer_line(struct rec_writer *w, struct json_object *obj);
/* Close: the gzip trailer makes the file complete. 0 or -errno. */
int rec_writer_close(struct rec_writer *w);
unsigned rec_writer_rotations(const struct rec_writer *w);

/* ---- reading ---- */

struct rec_reader;

/*
 * Open a recording and read its header. 0, or -errno with a message
 * naming the file (and line, and byte offset) in err.
 */
int rec_open(const char *path, struct rec_reader **out, struct rec_header *h, char *err,
	     size_t errlen);
/*
 * The next tick: 1, 0 at the end of a complete recording, or -errno with
 * err set: "FILE: byte N: ..." for a corrupt or truncated gzip stream
 * (N in the compressed file), "FILE:LINE: byte N: ..." for a bad line (N
 * in the uncompressed stream). The ticks before an error were returned.
 * t is cleared first; free it with rec_tick_clear().
 */
int rec_next(struct rec_reader *r, struct rec_tick *t, char *err, size_t errlen);
void rec_tick_clear(struct rec_tick *t);
void rec_close(struct rec_reader *r);

/* Decode one tick's line (exposed for tests). 0 or -EINVAL with why set. */
int rec_tick_parse(struct json_object *o, struct rec_tick *t, const char **why);

#endif
