// SPDX-License-Identifier: GPL-2.0
/* tailwarden top: live per-cgroup QoS, as a table or JSON Lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/output.h"
#include "controller/sensors.h"
#include "sensing/cgroup.h"
#include "sensing/diagnosis.h"
#include "sensing/reap.h"
#include "sensing/sensor.h"

struct filter {
	char rel[PATH_MAX];
	uint64_t id;
	bool gone;
};

/* A cgroup's diagnosis baseline, kept across intervals. */
struct diag_slot {
	uint64_t id;
	struct diag_state *s;
};

struct top {
	double interval;
	long count;
	bool json;
	bool no_contention;
	unsigned signals; /* contention signals to load */
	struct filter *filters;
	int nfilters;
	struct sensor_opts sopts;
	char root[PATH_MAX];
	struct cg_names *names;
	struct sensor *sensor;
	struct contention *cont;
	struct contention_snapshot *cprev, *cnow;
	struct diag_slot *diags;
	size_t ndiags;
	struct sensor_snapshot *start; /* the maps when everything was attached */
	double attached;	       /* CLOCK_MONOTONIC s of that snapshot */
};

struct row {
	struct qos_sample s;
	const char *path;
	struct contention_sample c;
	struct diagnosis d;
	bool have_c, have_d;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void help(void)
{
	printf("Usage: tailwarden top [OPTIONS]\n\n"
	       "Live per-cgroup request rate and latency, inferred from socket events.\n"
	       "A request is timed from its arrival at the server's socket to the last\n"
	       "byte of the reply handed to the kernel. Must run as root.\n\n"
	       "  -c, --cgroup PATH     show only this cgroup (repeatable); PATH may be\n"
	       "                        /sys/fs/cgroup/unified/x, /sys/fs/cgroup/x or x.\n"
	       "                        Listed cgroups are shown every interval, idle or not\n"
	       "  -i, --interval S      seconds between refreshes (default 1, fractions ok)\n"
	       "  -n, --count N         stop after N intervals (default: until interrupted)\n"
	       "  -j, --json            JSON Lines: one object per cgroup per interval\n"
	       "      --mode MODE       sensing mode: auto (default), arrival, receive, syscall\n"
	       "      --no-contention   no contention signals and no diagnosis columns\n"
	       "      --signals LIST    contention signals to load, comma-separated: sched,\n"
	       "                        block, vfs, futex, lock, memory, network, tcp_rtt,\n"
	       "                        tcp_flows,\n"
	       "                        page_faults, default, all (default: all but futex,\n"
	       "                        vfs, tcp_rtt and page_faults, which cost every\n"
	       "                        context switch, syscall, TCP segment, page fault)\n"
	       "      --max-conns N     connection table size (default 262144)\n"
	       "      --outbound        also time each cgroup's own outbound requests (this\n"
	       "                        host as a client); off by default: it adds work on\n"
	       "                        every client-side send, receive and data arrival\n"
	       "  -h, --help            this text\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(struct top *t, int argc, char **argv)
{
	static const struct option opts[] = { { "cgroup", required_argument, NULL, 'c' },
					      { "interval", required_argument, NULL, 'i' },
					      { "count", required_argument, NULL, 'n' },
					      { "json", no_argument, NULL, 'j' },
					      { "mode", required_argument, NULL, 'm' },
					      { "max-conns", required_argument, NULL, 'C' },
					      { "no-contention", no_argument, NULL, 'N' },
					      { "signals", required_argument, NULL, 'S' },
					      { "outbound", no_argument, NULL, 'O' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "c:i:n:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			t->filters = reallocarray(t->filters, t->nfilters + 1, sizeof(*t->filters));
			if (!t->filters)
				return log_error_errno(-ENOMEM, "Failed to parse arguments");
			snprintf(t->filters[t->nfilters++].rel, PATH_MAX, "%s", optarg);
			break;
		case 'i':
			if (parse_double(optarg, 0.05, 3600, &t->interval)) {
				log_error(
					"--interval: '%s' is not a number of seconds between 0.05 and 3600",
					optarg);
				return -EINVAL;
			}
			break;
		case 'n':
			if (parse_double(optarg, 1, 1e9, &v) || v != (long)v) {
				log_error("--count: '%s' is not a positive whole number", optarg);
				return -EINVAL;
			}
			t->count = v;
			break;
		case 'j':
			t->json = true;
			break;
		case 'm':
			if (sensor_mode_parse(optarg, &t->sopts.mode)) {
				log_error(
					"--mode: '%s' is not one of auto, arrival, receive, syscall",
					optarg);
				return -EINVAL;
			}
			break;
		case 'C':
			if (parse_double(optarg, 1024, 16777216, &v) || v != (long)v) {
				log_error(
					"--max-conns: '%s' is not a whole number between 1024 and 16777216",
					optarg);
				return -EINVAL;
			}
			t->sopts.max_conns = v;
			break;
		case 'N':
			t->no_contention = true;
			break;
		case 'O':
			t->sopts.outbound = true;
			break;
		case 'S':
			if (contention_signals_parse(optarg, &t->signals)) {
				log_error(
					"--signals: '%s' is not a list of sched, block, vfs, futex, lock, memory, network, tcp_rtt, page_faults, tcp_flows, default, all",
					optarg);
				return -EINVAL;
			}
			break;
		case 'h':
			help();
			return 1;
		default:
			log_error("try 'tailwarden top --help'");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; try 'tailwarden top --help'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static int resolve_filters(struct top *t)
{
	for (int i = 0; i < t->nfilters; i++) {
		struct filter *f = &t->filters[i];
		char arg[PATH_MAX];
		int r;

		snprintf(arg, sizeof(arg), "%s", f->rel);
		r = cg_resolve(TW_CGROUP_BASE, t->root, arg, f->rel, sizeof(f->rel), &f->id);
		if (r)
			return log_error_errno(r, "--cgroup %s: no such cgroup under %s", arg,
					       t->root);
	}
	return 0;
}

static bool active(const struct qos_sample *s)
{
	return s->requests || s->bytes_in || s->bytes_out || s->out_requests || s->out_bytes_in ||
	       s->out_bytes_out || s->conns_open > 0;
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->s.requests != y->s.requests)
		return x->s.requests < y->s.requests ? 1 : -1;
	return x->s.cgroup_id < y->s.cgroup_id ? -1 : x->s.cgroup_id > y->s.cgroup_id;
}

/* A listed cgroup that was removed is reported once and dropped. */
static void check_filter(struct top *t, struct filter *f)
{
	char p[2 * PATH_MAX];

	snprintf(p, sizeof(p), "%s%s", t->root, f->rel);
	if (access(p, F_OK) && errno == ENOENT) {
		f->gone = true;
		log_notice("cgroup %s was removed, no longer shown", f->rel);
	}
}

/* The cgroup's diagnosis state, created on first use; NULL on ENOMEM. */
static struct diag_state *diag_for(struct top *t, uint64_t id)
{
	struct diag_slot *v;

	for (size_t i = 0; i < t->ndiags; i++)
		if (t->diags[i].id == id)
			return t->diags[i].s;
	v = reallocarray(t->diags, t->ndiags + 1, sizeof(*v));
	if (!v)
		return NULL;
	t->diags = v;
	v[t->ndiags].id = id;
	v[t->ndiags].s = diag_state_new();
	return v[t->ndiags++].s;
}

/* Contention figures and the diagnosis of one row, where available. */
static void diagnose(struct top *t, struct row *r, double iv)
{
	struct diag_state *ds;

	r->have_c =
		t->cont && t->cnow && r->path &&
		!contention_sample(t->cont, t->cnow, t->cprev, r->s.cgroup_id, r->path, iv, &r->c);
	ds = t->cont ? diag_for(t, r->s.cgroup_id) : NULL;
	if (!ds)
		return;
	diag_update(ds, &r->s, r->have_c ? &r->c : NULL, &r->d);
	r->have_d = true;
}

/* Rows for this window: the listed cgroups, or every active one. */
static int collect(struct top *t, const struct sensor_snapshot *now,
		   const struct sensor_snapshot *prev, double iv, struct row **out, size_t *n)
{
	size_t cap = t->nfilters ? (size_t)t->nfilters : sensor_snapshot_len(now);
	struct row *rows = calloc(cap ? cap : 1, sizeof(*rows));

	if (!rows)
		return -ENOMEM;
	*n = 0;
	if (t->nfilters) {
		for (int i = 0; i < t->nfilters; i++) {
			struct filter *f = &t->filters[i];

			if (f->gone || (check_filter(t, f), f->gone))
				continue;
			sensor_sample(now, prev, f->id, iv, &rows[*n].s);
			rows[*n].s.outbound_on = t->sopts.outbound;
			rows[(*n)++].path = f->rel;
		}
	} else {
		for (size_t i = 0; i < cap; i++) {
			uint64_t id = sensor_snapshot_id(now, i);
			struct row *r = &rows[*n];

			sensor_sample(now, prev, id, iv, &r->s);
			r->s.outbound_on = t->sopts.outbound;
			r->path = cg_names_lookup(t->names, id, 1000);
			if (active(&r->s))
				(*n)++;
		}
	}
	for (size_t i = 0; i < *n; i++)
		diagnose(t, &rows[i], iv);
	qsort(rows, *n, sizeof(*rows), row_cmp);
	*out = rows;
	return 0;
}

static double now_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int print_window(struct top *t, const struct row *rows, size_t n,
			const struct sensor_drops *d)
{
	double ts = now_s(CLOCK_REALTIME);

	if (t->json) {
		for (size_t i = 0; i < n; i++) {
			const struct row *r = &rows[i];
			struct json_object *o = output_sample_json(&r->s, r->path, ts, d);

			if (!o)
				return -ENOMEM;
			output_contention_json(o, r->have_c ? &r->c : NULL,
					       r->have_d ? &r->d : NULL);
			if (output_json_line(stdout, o))
				return -EIO;
		}
	} else {
		if (isatty(STDOUT_FILENO))
			fputs("\033[H\033[2J", stdout);
		else
			fputc('\n', stdout);
		output_table_header(stdout);
		for (size_t i = 0; i < n; i++)
			output_table_row(stdout, &rows[i].s, rows[i].path,
					 rows[i].have_c ? &rows[i].c : NULL,
					 rows[i].have_d ? &rows[i].d : NULL);
		if (d->spans_negative + d->spans_absurd + d->conns + d->cgroups)
			printf("dropped: %llu spans, %llu connections, %llu cgroups (tables full or spans out of bounds)\n",
			       (unsigned long long)(d->spans_negative + d->spans_absurd),
			       (unsigned long long)d->conns, (unsigned long long)d->cgroups);
	}
	return fflush(stdout) ? -EIO : 0;
}

static void sleep_until(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t, .tv_nsec = (long)((t - (time_t)t) * 1e9) };

	/* EINTR on SIGINT/SIGTERM: the caller checks stop. */
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static int loop(struct top *t)
{
	struct sensor_snapshot *prev = t->start, *now = NULL;
	double last, next;
	int r = 0;

	/*
	 * The first interval starts when every sensor is attached (setup()
	 * read the maps then): loading the contention sensors takes a
	 * tenth of a second or more, which must not count as part of it.
	 */
	t->start = NULL;
	last = t->attached;
	next = last + t->interval;
	for (long i = 0; !stop && (t->count == 0 || i < t->count); i++) {
		struct sensor_drops d;
		struct row *rows;
		size_t n;
		double at;

		sleep_until(next);
		if (stop)
			break;
		next += t->interval;
		r = sensor_read(t->sensor, &now);
		if (r)
			break;
		if (t->cont && contention_read(t->cont, &t->cnow))
			t->cnow = NULL;
		at = now_s(CLOCK_MONOTONIC);
		sensor_drops(now, prev, &d);
		r = collect(t, now, prev, at - last, &rows, &n);
		if (!r) {
			r = print_window(t, rows, n, &d);
			free(rows);
		}
		/* Removed cgroups' entries, once this window has counted them. */
		sensing_reap(t->names, (now_s(CLOCK_MONOTONIC) - at) * 1000, t->sensor, now,
			     t->cont, t->cnow);
		sensor_snapshot_free(prev);
		prev = now;
		contention_snapshot_free(t->cprev);
		t->cprev = t->cnow;
		t->cnow = NULL;
		last = at;
		if (r)
			break;
	}
	sensor_snapshot_free(prev);
	if (r == -EIO)
		return 0; /* reader went away (top | head) */
	return r ? log_error_errno(r, "Failed to sample") : 0;
}

static int setup(struct top *t)
{
	const struct sensors_opts so = {
		.sensor = &t->sopts,
		.signals = t->no_contention ? 0 : t->signals,
		.cgroup_base = TW_CGROUP_BASE,
		.without = "no diagnosis",
	};
	int r;

	r = cg_root_find(TW_CGROUP_BASE, t->root, sizeof(t->root));
	if (r)
		return log_error_errno(
			r,
			"Failed to find a cgroup2 hierarchy at %s or %s/unified (cgroup ids are cgroup2 inode numbers): %m",
			TW_CGROUP_BASE, TW_CGROUP_BASE);
	r = resolve_filters(t);
	if (r)
		return r;
	t->names = cg_names_new(t->root);
	if (!t->names)
		return log_error_errno(-ENOMEM, "Failed to set up");
	/* Contention signals are a bonus: without them top still shows requests. */
	r = sensors_open(&so, &t->sensor, &t->cont);
	if (r)
		return r;
	r = sensor_read(t->sensor, &t->start);
	if (!r && t->cont && contention_read(t->cont, &t->cprev))
		t->cprev = NULL;
	if (r)
		return log_error_errno(r, "Failed to read the request sensor");
	t->attached = now_s(CLOCK_MONOTONIC);
	/* Last: scripts wait for this line to know the sensors are attached. */
	sensors_log_mode(t->sensor);
	return 0;
}

int cmd_top(int argc, char **argv)
{
	struct top t = { .interval = 1, .sopts = SENSOR_OPTS_DEFAULT, .signals = CONT_DEFAULT };
	struct sigaction sa = { .sa_handler = on_signal };
	bool usage;
	int r;

	r = parse_args(&t, argc, argv);
	usage = r < 0;
	if (r == 0) {
		sigset_t mask, old;

		/*
		 * SIGINT/SIGTERM held while the sensors load: one that comes
		 * as soon as the mode line is out (a script that read it and
		 * stops top at once) or during the load is taken as a stop
		 * when they are attached, not as death by the signal.
		 */
		sigemptyset(&mask);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGTERM);
		sigprocmask(SIG_BLOCK, &mask, &old);
		/* No SA_RESTART: the tick's sleep must end on a signal. */
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		r = setup(&t);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (r == 0)
			r = loop(&t);
	}
	sensor_snapshot_free(t.start);
	contention_snapshot_free(t.cprev);
	contention_snapshot_free(t.cnow);
	contention_free(t.cont);
	for (size_t i = 0; i < t.ndiags; i++)
		diag_state_free(t.diags[i].s);
	free(t.diags);
	sensor_free(t.sensor);
	cg_names_free(t.names);
	free(t.filters);
	return usage ? TW_EXIT_USAGE : r < 0 ? 1 : 0;
}
