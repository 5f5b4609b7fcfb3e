// SPDX-License-Identifier: GPL-2.0
/*
 * tailwarden record: the per-tick samples of every cgroup the sensors see,
 * as `run` would feed them to the policy engine, into a gzip-compressed
 * JSON Lines file (recording.h) for `tailwarden replay`. Ticks fall on
 * multiples of the period on CLOCK_MONOTONIC, as `run`'s do (feed.h), so a
 * recording made beside a running daemon cuts the same windows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "controller/feed.h"
#include "knobs/knob.h"
#include "controller/recording.h"
#include "controller/sensors.h"
#include "policies/config.h"
#include "policies/value.h"
#include "sensing/cgroup.h"
#include "sensing/reap.h"
#include "sensing/sensor.h"

#define REC_DEFAULT_MAX_SIZE (64ULL << 20)
#define REC_MIN_MAX_SIZE (64ULL << 10)

/* A recorded cgroup's knobs, kept open while it is seen. */
struct knob_slot {
	uint64_t id;
	struct knobs *k; /* NULL when they cannot be opened */
	bool seen;
};

struct recorder {
	const char *out;
	double duration_s; /* 0: until interrupted */
	uint64_t max_size;
	uint64_t period_ns;
	bool no_contention;
	const char *config;
	char **cgroups; /* --cgroup, as given */
	size_t ncgroups;
	uint64_t *extra_ids; /* and resolved */
	char (*extra_rel)[PATH_MAX];
	struct tw_config *cfg;
	char root[PATH_MAX];
	struct cg_names *names;
	struct sensor *sensor;
	struct contention *cont;
	struct sensor_snapshot *prev;
	struct contention_snapshot *cprev;
	struct knob_slot *slots;
	size_t nslots;
	struct rec_writer *w;
	uint64_t last_usec;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void help(void)
{
	printf("Usage: tailwarden record --out FILE [OPTIONS]\n\n"
	       "Records what the sensors see each tick, per cgroup (what top shows as\n"
	       "JSON, the histograms and the knobs' values), as gzip-compressed JSON\n"
	       "Lines, for 'tailwarden replay'. Ticks fall on multiples of the period on\n"
	       "the monotonic clock, as the daemon's do. Changes nothing. Must run as root.\n\n"
	       "  -o, --out FILE        the recording (replaced if it exists)\n"
	       "  -d, --duration S      stop after S seconds (\"90\", \"90s\", \"2.5s\"; default:\n"
	       "                        until interrupted)\n"
	       "      --max-size SIZE   past SIZE bytes (K, M, G suffixes; default 64M) FILE\n"
	       "                        moves to FILE.1 and a new FILE begins\n"
	       "      --period DURATION the tick (\"1s\", \"500ms\"; default: the config's\n"
	       "                        Period=, 1s)\n"
	       "      --config FILE     main config for Period= and CgroupBase= (default\n"
	       "                        " TW_CONFIG_PATH " if present)\n"
	       "  -c, --cgroup PATH     also record this cgroup every tick, even before it\n"
	       "                        shows in the sensors' tables (repeatable)\n"
	       "      --no-contention   do not load the contention sensors (no diagnosis)\n"
	       "  -h, --help            this text\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v > 0))
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v *= 1024;
		end++;
		break;
	case 'm':
	case 'M':
		v *= 1024 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		end++;
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > 1e15)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

/* Seconds: "90", "2.5", or a duration with a unit ("90s", "500ms"). */
static int parse_seconds(const char *s, double *out)
{
	char why[VALUE_WHY_MAX], *end;
	uint64_t ns;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (!errno && end != s && !*end && v > 0 && v < 1e9) {
		*out = v;
		return 0;
	}
	if (value_parse_duration(s, &ns, why) || !ns)
		return -EINVAL;
	*out = ns / 1e9;
	return 0;
}

static int parse_args(struct recorder *rc, int argc, char **argv)
{
	static const struct option opts[] = { { "out", required_argument, NULL, 'o' },
					      { "duration", required_argument, NULL, 'd' },
					      { "max-size", required_argument, NULL, 'M' },
					      { "period", required_argument, NULL, 'P' },
					      { "config", required_argument, NULL, 'C' },
					      { "cgroup", required_argument, NULL, 'c' },
					      { "no-contention", no_argument, NULL, 'N' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	char why[VALUE_WHY_MAX];
	char **v;
	int c;

	while ((c = getopt_long(argc, argv, "o:d:c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			rc->out = optarg;
			break;
		case 'd':
			if (parse_seconds(optarg, &rc->duration_s)) {
				log_error("--duration: '%s' is not a positive number of seconds",
					  optarg);
				return -EINVAL;
			}
			break;
		case 'M':
			if (parse_size(optarg, &rc->max_size) || rc->max_size < REC_MIN_MAX_SIZE) {
				log_error(
					"--max-size: '%s' is not a size of at least 64K (e.g. 64M)",
					optarg);
				return -EINVAL;
			}
			break;
		case 'P':
			if (value_parse_duration_in(optarg, 100000000ULL, 60 * TW_NSEC_PER_SEC,
						    &rc->period_ns, why)) {
				log_error("--period: '%s': %s", optarg, why);
				return -EINVAL;
			}
			break;
		case 'C':
			rc->config = optarg;
			break;
		case 'c':
			v = reallocarray(rc->cgroups, rc->ncgroups + 1, sizeof(*v));
			if (!v)
				return log_error_errno(-ENOMEM, "Failed to parse arguments: %m");
			rc->cgroups = v;
			rc->cgroups[rc->ncgroups++] = optarg;
			break;
		case 'N':
			rc->no_contention = true;
			break;
		case 'h':
			help();
			return 1;
		default:
			log_error("try 'tailwarden record --help'");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; try 'tailwarden record --help'", argv[optind]);
		return -EINVAL;
	}
	if (!rc->out) {
		log_error("--out FILE is required; try 'tailwarden record --help'");
		return -EINVAL;
	}
	return 0;
}

static uint64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

static double real_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int setup(struct recorder *rc)
{
	const struct sensor_opts sopts = SENSOR_OPTS_DEFAULT;
	struct sensors_opts so = {
		.sensor = &sopts,
		.signals = rc->no_contention ? 0 : CONT_DEFAULT,
		.without = "no diagnosis on replay",
	};
	struct rec_header h = { 0 };
	struct utsname u;
	int r;

	if (daemon_load_config(rc->config, TW_CONFIG_PATH, &rc->cfg))
		return -EINVAL;
	if (!rc->period_ns)
		rc->period_ns = rc->cfg->period_ns;
	so.cgroup_base = rc->cfg->cgroup_base;
	r = cg_root_find(rc->cfg->cgroup_base, rc->root, sizeof(rc->root));
	if (r)
		return log_error_errno(r, "Failed to find a cgroup2 hierarchy under %s: %m",
				       rc->cfg->cgroup_base);
	rc->extra_ids = calloc(rc->ncgroups + 1, sizeof(*rc->extra_ids));
	rc->extra_rel = calloc(rc->ncgroups + 1, sizeof(*rc->extra_rel));
	rc->names = cg_names_new(rc->root);
	if (!rc->extra_ids || !rc->extra_rel || !rc->names)
		return log_error_errno(-ENOMEM, "Failed to set up: %m");
	for (size_t i = 0; i < rc->ncgroups; i++) {
		r = cg_resolve(rc->cfg->cgroup_base, rc->root, rc->cgroups[i], rc->extra_rel[i],
			       PATH_MAX, &rc->extra_ids[i]);
		if (r)
			return log_error_errno(r, "--cgroup %s: no such cgroup under %s",
					       rc->cgroups[i], rc->root);
	}
	r = sensors_open(&so, &rc->sensor, &rc->cont);
	if (r)
		return r;
	r = sensor_read(rc->sensor, &rc->prev);
	if (r)
		return log_error_errno(r, "Failed to read the request sensor: %m");
	if (rc->cont && contention_read(rc->cont, &rc->cprev))
		rc->cprev = NULL;
	rc->last_usec = mono_usec();
	snprintf(h.version, sizeof(h.version), "%s", TW_VERSION);
	if (gethostname(h.host, sizeof(h.host) - 1))
		snprintf(h.host, sizeof(h.host), "unknown");
	if (!uname(&u))
		snprintf(h.kernel, sizeof(h.kernel), "%s %s", u.release, u.version);
	snprintf(h.sensing_mode, sizeof(h.sensing_mode), "%s",
		 sensor_mode_name(sensor_mode(rc->sensor)));
	h.period_ns = rc->period_ns;
	h.contention = rc->cont != NULL;
	h.started = real_s();
	r = rec_writer_open(rc->out, rc->max_size, &h, &rc->w);
	if (r)
		return log_error_errno(r, "Failed to create %s: %m", rc->out);
	sensors_log_mode(rc->sensor);
	log_info("recording to %s: period %.0f ms, %s, rotating at %llu bytes", rc->out,
		 rc->period_ns / 1e6, rc->cont ? "with contention" : "requests only",
		 (unsigned long long)rc->max_size);
	return 0;
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every cgroup of this tick: both sensors' tables and --cgroup, sorted, once each. */
static uint64_t *tick_ids(struct recorder *rc, const struct sensor_snapshot *now,
			  const struct contention_snapshot *cnow, size_t *n)
{
	size_t ns = sensor_snapshot_len(now), nc = cnow ? contention_snapshot_len(cnow) : 0, k = 0;
	uint64_t *ids = calloc(ns + nc + rc->ncgroups + 1, sizeof(*ids));

	if (!ids)
		return NULL;
	for (size_t i = 0; i < ns; i++)
		ids[k++] = sensor_snapshot_id(now, i);
	for (size_t i = 0; i < nc; i++)
		ids[k++] = contention_snapshot_id(cnow, i);
	for (size_t i = 0; i < rc->ncgroups; i++)
		ids[k++] = rc->extra_ids[i];
	qsort(ids, k, sizeof(*ids), id_cmp);
	*n = 0;
	for (size_t i = 0; i < k; i++)
		if (ids[i] && (!*n || ids[*n - 1] != ids[i]))
			ids[(*n)++] = ids[i];
	return ids;
}

static struct knob_slot *slot_for(struct recorder *rc, uint64_t id, const char *rel)
{
	struct knob_slot *v;

	for (size_t i = 0; i < rc->nslots; i++)
		if (rc->slots[i].id == id)
			return &rc->slots[i];
	v = reallocarray(rc->slots, rc->nslots + 1, sizeof(*v));
	if (!v)
		return NULL;
	rc->slots = v;
	v = &rc->slots[rc->nslots++];
	memset(v, 0, sizeof(*v));
	v->id = id;
	if (knobs_open(rc->cfg->cgroup_base, rel, &v->k))
		v->k = NULL;
	return v;
}

/* Forget the knobs of cgroups not seen this tick. */
static void slots_sweep(struct recorder *rc)
{
	size_t k = 0;

	for (size_t i = 0; i < rc->nslots; i++) {
		if (!rc->slots[i].seen) {
			knobs_free(rc->slots[i].k);
			continue;
		}
		rc->slots[i].seen = false;
		rc->slots[k++] = rc->slots[i];
	}
	rc->nslots = k;
}

/* The knobs as `run` reads them (read_knobs() in manager.c). */
static void read_knob_values(struct recorder *rc, uint64_t id, const char *rel, double *knob)
{
	struct knob_slot *s = slot_for(rc, id, rel);

	for (int k = 0; k < KNOB_MAX; k++) {
		double v;

		knob[k] = NAN;
		if (s && s->k && knob_available(s->k, k, NULL) && !knob_read(s->k, k, &v))
			knob[k] = v;
	}
	if (s)
		s->seen = true;
}

static const char *extra_rel(struct recorder *rc, uint64_t id)
{
	for (size_t i = 0; i < rc->ncgroups; i++)
		if (rc->extra_ids[i] == id)
			return rc->extra_rel[i];
	return NULL;
}

static int tick(struct recorder *rc, uint64_t usec, uint64_t *bytes_cgroups)
{
	struct sensor_snapshot *now = NULL;
	struct contention_snapshot *cnow = NULL;
	struct json_object *arr = NULL;
	double iv = (usec - rc->last_usec) / 1e6, ts = real_s();
	uint64_t *ids = NULL, t;
	size_t n = 0;
	int r;

	r = sensor_read(rc->sensor, &now);
	if (r)
		return log_error_errno(r, "Failed to read the request sensor: %m");
	if (rc->cont && contention_read(rc->cont, &cnow))
		cnow = NULL;
	ids = tick_ids(rc, now, cnow, &n);
	arr = json_object_new_array();
	if (!ids || !arr) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *rel = extra_rel(rc, ids[i]);
		struct contention_sample c;
		struct json_object *o;
		struct qos_sample q;
		double knob[KNOB_MAX];
		bool have_c;

		if (!rel)
			rel = cg_names_lookup(rc->names, ids[i], 1000);
		if (!rel)
			continue; /* removed before it could be named */
		sensor_sample(now, rc->prev, ids[i], iv, &q);
		have_c = rc->cont && cnow &&
			 !contention_sample(rc->cont, cnow, rc->cprev, ids[i], rel, iv, &c);
		read_knob_values(rc, ids[i], rel, knob);
		o = rec_cgroup_json(&q, rel, ts, have_c ? &c : NULL, knob);
		if (!o || json_object_array_add(arr, o)) {
			json_object_put(o);
			r = -ENOMEM;
			goto out;
		}
	}
	*bytes_cgroups += n;
	slots_sweep(rc);
	r = rec_writer_line(rc->w,
			    rec_tick_json(feed_tick_index(usec, rc->period_ns), usec, ts, iv, arr));
	arr = NULL;
	if (r)
		log_error_errno(r, "Failed to write %s: %m", rc->out);
	t = mono_usec();
	sensing_reap(rc->names, t > usec ? (t - usec) / 1000 : 0, rc->sensor, now, rc->cont, cnow);
out:
	json_object_put(arr);
	free(ids);
	sensor_snapshot_free(rc->prev);
	rc->prev = now;
	contention_snapshot_free(rc->cprev);
	rc->cprev = cnow;
	rc->last_usec = usec;
	if (r == -ENOMEM)
		log_error_errno(r, "Failed to record a tick: %m");
	return r;
}

static void sleep_until_usec(uint64_t usec)
{
	struct timespec ts = { .tv_sec = usec / 1000000, .tv_nsec = (usec % 1000000) * 1000 };

	/* EINTR on SIGINT/SIGTERM: the caller checks stop. */
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int loop(struct recorder *rc)
{
	uint64_t period_us = rc->period_ns / 1000,
		 next = feed_next_tick(rc->last_usec, rc->period_ns);
	uint64_t end = rc->duration_s > 0 ? rc->last_usec + (uint64_t)(rc->duration_s * 1e6) : 0;
	uint64_t ticks = 0, cgroups = 0;
	int r = 0;

	while (!stop && (!end || next <= end)) {
		sleep_until_usec(next);
		if (stop || mono_usec() < next)
			break;
		r = tick(rc, next, &cgroups);
		if (r)
			break;
		ticks++;
		next += period_us;
	}
	log_info("recorded %llu tick(s), %llu cgroup sample(s) to %s%s%s%s",
		 (unsigned long long)ticks, (unsigned long long)cgroups, rc->out,
		 rec_writer_rotations(rc->w) ? " (older ticks in " : "",
		 rec_writer_rotations(rc->w) ? rc->out : "",
		 rec_writer_rotations(rc->w) ? ".1)" : "");
	return r;
}

int cmd_record(int argc, char **argv)
{
	struct recorder rc = { .max_size = REC_DEFAULT_MAX_SIZE };
	struct sigaction sa = { .sa_handler = on_signal };
	bool usage;
	int r;

	r = parse_args(&rc, argc, argv);
	usage = r < 0;
	if (r == 0 && geteuid() != 0) {
		log_error("must run as root (BPF sensors)");
		r = -EPERM;
	}
	/* No SA_RESTART: the tick's sleep must end on a signal. Set before the
	 * file exists, so that it always gets its gzip trailer. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (r == 0)
		r = setup(&rc);
	if (r == 0)
		r = loop(&rc);
	if (rc.w) {
		int k = rec_writer_close(rc.w);

		if (k && !r)
			r = log_error_errno(k, "Failed to finish %s: %m", rc.out);
	}
	for (size_t i = 0; i < rc.nslots; i++)
		knobs_free(rc.slots[i].k);
	free(rc.slots);
	sensor_snapshot_free(rc.prev);
	contention_snapshot_free(rc.cprev);
	contention_free(rc.cont);
	sensor_free(rc.sensor);
	cg_names_free(rc.names);
	config_free(rc.cfg);
	free(rc.extra_ids);
	free(rc.extra_rel);
	free(rc.cgroups);
	return usage ? TW_EXIT_USAGE : r < 0 ? 1 : 0;
}
