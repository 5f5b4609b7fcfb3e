// SPDX-License-Identifier: GPL-2.0
/*
 * contention_probe: run the contention sensor alone, for measuring its
 * overhead and checking its figures against the kernel's own.
 *
 *   contention_probe [-s SIGNALS] [-i SECONDS] [-n COUNT] [-b BASE] [-m MAX] [CGROUP]...
 *
 * SIGNALS is "default", "all", "none" or a comma list of sched, block,
 * vfs, futex, lock, memory, network, tcp_rtt, page_faults. Every interval
 * it prints one line of key=value pairs per cgroup: the CGROUPs named, or,
 * with none, every cgroup2 cgroup that had events in the window. NAN
 * prints as "-".
 * MAX sizes the per-cgroup tables (max_cgroups, default 4096); events of
 * cgroups beyond it are counted in a "drops" line.
 * Runs until COUNT intervals have passed (0: forever) or SIGINT/SIGTERM,
 * which end the current window early and print it.
 *
 * Build (after make has built .output/):
 *   cc -O2 -g -std=gnu11 -I. -I.output tests/bench/contention_probe.c \
 *      .output/sensing/contention.o .output/sensing/cgroup.o .output/sensing/hist.o \
 *      -lbpf -lelf -lz -lm -o .output/tests/contention_probe
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sensing/cgroup.h"
#include "sensing/contention.h"

struct target {
	uint64_t id;
	char rel[PATH_MAX];
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int parse_signals(const char *s, unsigned *mask)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
		{ "sched", CONT_SCHED },
		{ "block", CONT_BLOCK },
		{ "vfs", CONT_VFS },
		{ "futex", CONT_FUTEX },
		{ "lock", CONT_LOCK },
		{ "memory", CONT_MEMORY },
		{ "network", CONT_NETWORK },
		{ "tcp_rtt", CONT_TCP_RTT },
		{ "page_faults", CONT_PAGE_FAULTS },
		{ "all", CONT_ALL },
		{ "default", CONT_DEFAULT },
		{ "none", 0 },
	};
	char *copy = strdup(s), *tok, *save = NULL;

	if (!copy)
		return -ENOMEM;
	*mask = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(names) / sizeof(*names); i++)
			if (!strcmp(tok, names[i].name))
				break;
		if (i == sizeof(names) / sizeof(*names)) {
			free(copy);
			return -EINVAL;
		}
		*mask |= names[i].bit;
	}
	free(copy);
	return 0;
}

/* Every cgroup2 directory, for the no-argument mode. */
static struct target *all;
static size_t nall, capall, rootlen;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	if (type != FTW_D)
		return 0;
	if (nall == capall) {
		size_t cap = capall ? capall * 2 : 256;
		struct target *v = realloc(all, cap * sizeof(*v));

		if (!v)
			return 1;
		all = v;
		capall = cap;
	}
	all[nall].id = st->st_ino;
	snprintf(all[nall].rel, sizeof(all[nall].rel), "%s", path[rootlen] ? path + rootlen : "/");
	nall++;
	return 0;
}

static void num(const char *key, double v, double scale)
{
	if (isnan(v))
		printf(" %s=-", key);
	else
		printf(" %s=%.12g", key, v * scale);
}

static bool active(const struct contention_sample *s)
{
	const double v[] = { s->runq_delay_s,	   s->io_read_bytes,   s->io_write_bytes,
			     s->vfs_read_bytes,	   s->vfs_write_bytes, s->futex_wait_s,
			     s->lock_contention_s, s->page_faults,     s->reclaim_s,
			     s->tcp_retransmits };

	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++)
		if (!isnan(v[i]) && v[i] > 0)
			return true;
	return s->runq.total || s->io.total || !isnan(s->tcp_srtt_us);
}

static void print(double t, const char *rel, const struct contention_sample *s)
{
	printf("t=%.3f cgroup=%s id=%llu", t, rel, (unsigned long long)s->cgroup_id);
	num("runq_s", s->runq_delay_s, 1);
	printf(" runq_waits=%llu", (unsigned long long)s->runq.total);
	num("runq_p50_us", s->runq.total ? hist_percentile(&s->runq, 0.5) : NAN, 1e-3);
	num("runq_p99_us", s->runq.total ? hist_percentile(&s->runq, 0.99) : NAN, 1e-3);
	num("cpu_s", s->cpu_usage_s, 1);
	num("throttled_s", s->cpu_throttled_s, 1);
	num("throttled_periods", s->cpu_throttled_periods, 1);
	num("io_read_bytes", s->io_read_bytes, 1);
	num("io_write_bytes", s->io_write_bytes, 1);
	printf(" io_requests=%llu", (unsigned long long)s->io.total);
	num("io_p50_us", s->io.total ? hist_percentile(&s->io, 0.5) : NAN, 1e-3);
	num("io_p99_us", s->io.total ? hist_percentile(&s->io, 0.99) : NAN, 1e-3);
	num("vfs_read_bytes", s->vfs_read_bytes, 1);
	num("vfs_write_bytes", s->vfs_write_bytes, 1);
	num("futex_wait_s", s->futex_wait_s, 1);
	num("lock_s", s->lock_contention_s, 1);
	num("page_faults", s->page_faults, 1);
	num("reclaim_s", s->reclaim_s, 1);
	num("tcp_retransmits", s->tcp_retransmits, 1);
	num("tcp_srtt_us", s->tcp_srtt_us, 1);
	num("psi_cpu", s->psi_cpu_some, 1);
	num("psi_io", s->psi_io_some, 1);
	num("psi_memory", s->psi_memory_some, 1);
	printf("\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleep up to s seconds, waking early on a signal. */
static void nap(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	while (!stop && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int tick(struct contention *c, struct contention_snapshot *now,
		struct contention_snapshot *prev, struct target *t, size_t n, bool only_active,
		double t0, double iv)
{
	struct contention_drops d;
	struct contention_sample s;
	int r;

	for (size_t i = 0; i < n; i++) {
		r = contention_sample(c, now, prev, t[i].id, t[i].rel, iv, &s);
		if (r)
			return r;
		if (!only_active || active(&s))
			print(now_s() - t0, t[i].rel, &s);
	}
	contention_drops(now, prev, &d);
	if (d.cgroups || d.stamps || d.absurd)
		printf("drops cgroups=%llu stamps=%llu absurd=%llu\n",
		       (unsigned long long)d.cgroups, (unsigned long long)d.stamps,
		       (unsigned long long)d.absurd);
	fflush(stdout);
	return 0;
}

static int resolve_targets(const char *base, const char *root, char **args, int n,
			   struct target **out, size_t *nout)
{
	struct target *t;

	if (!n) {
		rootlen = strlen(root);
		if (nftw(root, walk_one, 16, FTW_PHYS | FTW_MOUNT))
			return -errno ? -errno : -ENOMEM;
		*out = all;
		*nout = nall;
		return 0;
	}
	t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		int r = cg_resolve(base, root, args[i], t[i].rel, sizeof(t[i].rel), &t[i].id);

		if (r) {
			fprintf(stderr, "contention_probe: %s: %s\n", args[i], strerror(-r));
			free(t);
			return r;
		}
	}
	*out = t;
	*nout = n;
	return 0;
}

static int run(struct contention *c, struct target *t, size_t n, bool only_active, double interval,
	       long count)
{
	struct contention_snapshot *prev = NULL, *now = NULL;
	double t0 = now_s(), last = t0;
	int r;

	r = contention_read(c, &prev);
	/* A first pass so the cgroupfs figures have a previous reading. */
	for (size_t i = 0; !r && i < n; i++) {
		struct contention_sample s;

		r = contention_sample(c, prev, NULL, t[i].id, t[i].rel, 0, &s);
	}
	for (long k = 0; !r && (count == 0 || k < count); k++) {
		nap(interval);
		r = contention_read(c, &now);
		if (r)
			break;
		r = tick(c, now, prev, t, n, only_active, t0, now_s() - last);
		last = now_s();
		contention_snapshot_free(prev);
		prev = now;
		now = NULL;
		if (stop)
			break;
	}
	contention_snapshot_free(prev);
	return r;
}

int main(int argc, char **argv)
{
	struct contention_opts o = { .signals = CONT_DEFAULT, .cgroup_base = "/sys/fs/cgroup" };
	char root[PATH_MAX];
	struct contention *c;
	struct target *t = NULL;
	size_t n = 0;
	double interval = 1;
	long count = 0;
	const char *why;
	int opt, r;

	while ((opt = getopt(argc, argv, "s:i:n:b:m:")) != -1) {
		switch (opt) {
		case 's':
			if (parse_signals(optarg, &o.signals)) {
				fprintf(stderr, "contention_probe: bad signal list '%s'\n", optarg);
				return 2;
			}
			break;
		case 'i':
			interval = atof(optarg);
			break;
		case 'n':
			count = atol(optarg);
			break;
		case 'b':
			o.cgroup_base = optarg;
			break;
		case 'm':
			o.max_cgroups = atol(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: %s [-s SIGNALS] [-i SECONDS] [-n COUNT] [-b BASE] [-m MAX] [CGROUP]...\n",
				argv[0]);
			return 2;
		}
	}
	if (cg_root_find(o.cgroup_base, root, sizeof(root))) {
		fprintf(stderr, "contention_probe: no cgroup2 hierarchy under %s\n", o.cgroup_base);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	r = contention_open(&o, &c, &why);
	if (r) {
		fprintf(stderr, "contention_probe: %s (%s)\n", why, strerror(-r));
		return 1;
	}
	fprintf(stderr, "contention_probe: signals 0x%x running%s%s\n", contention_signals(c),
		*contention_missing(c) ? "; " : "", contention_missing(c));
	r = resolve_targets(o.cgroup_base, root, argv + optind, argc - optind, &t, &n);
	if (!r)
		r = run(c, t, n, optind == argc, interval, count);
	if (r)
		fprintf(stderr, "contention_probe: %s\n", strerror(-r));
	free(t);
	contention_free(c);
	return r ? 1 : 0;
}
