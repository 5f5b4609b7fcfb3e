// SPDX-License-Identifier: GPL-2.0
/*
 * onoff: load BPF programs once, then attach and detach them on command,
 * so that the benchmark can time the same programs on and off within one
 * long load instead of restarting server, client and sensor for every run
 * (on a shared VM, the drift between runs of a few seconds is larger than
 * the few per cent being measured).
 *
 *   onoff floor OBJECT [PROGRAM]
 *                             every program of a BPF object (the floors), or
 *                             the one named (the pieces: one at a time)
 *   onoff cgroup OBJECT DIR   every program of a BPF object, attached to the
 *                             cgroup2 directory DIR (cgroup_skb, lsm_cgroup)
 *   onoff sensors [--signals LIST | --no-contention]
 *                             tailwarden's sensors, loaded as `tailwarden
 *                             top` loads them (default signals unless told)
 *
 * Loads, detaches, and prints "off". Then reads commands on stdin, one per
 * line: "on" attaches (and, for the sensors, does a tick's reads half a
 * second later and every second while on: the run-queue iterator and both
 * sensors' maps, as top's tick does; so a one-second slot holds one tick),
 * "off" detaches; each is answered by the same word once done. "flows N"
 * (sensors, while on) runs the contention sensor's tick N times in a row
 * and answers "flows" and how long each run of the TCP socket iterator
 * took, in ns (0: it does not run here). Exits at end of input, detaching
 * everything.
 */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/defaults.h"
#include "controller/sensors.h"

struct onoff {
	struct bpf_object *obj; /* floor, cgroup */
	int cgfd;		/* cgroup: the cgroup's directory, else -1 */
	struct bpf_link *links[64];
	size_t nlinks;
	struct sensor *sensor; /* sensors */
	struct contention *cont;
	bool on;
};

static int floor_attach(struct onoff *o, bool on)
{
	struct bpf_program *p;

	if (!on) {
		while (o->nlinks)
			bpf_link__destroy(o->links[--o->nlinks]);
		return 0;
	}
	bpf_object__for_each_program (p, o->obj) {
		struct bpf_link *l;

		if (!bpf_program__autoload(p))
			continue;
		l = o->cgfd >= 0 ? bpf_program__attach_cgroup(p, o->cgfd) : bpf_program__attach(p);

		if (!l || o->nlinks == sizeof(o->links) / sizeof(o->links[0])) {
			fprintf(stderr, "onoff: attaching %s: %s\n", bpf_program__name(p),
				strerror(errno));
			bpf_link__destroy(l);
			return -1;
		}
		o->links[o->nlinks++] = l;
	}
	return 0;
}

static int attach(struct onoff *o, bool on)
{
	int r;

	if (o->obj)
		r = floor_attach(o, on);
	else if ((r = sensor_attach(o->sensor, on)) == 0 && o->cont)
		r = contention_attach(o->cont, on);
	if (r) {
		fprintf(stderr, "onoff: %s: %s\n", on ? "attach" : "detach", strerror(-r));
		return -1;
	}
	o->on = on;
	return 0;
}

/* What top's tick reads: the run-queue iterator, then both sensors' maps. */
static int tick(struct onoff *o)
{
	struct contention_snapshot *cs = NULL;
	struct sensor_snapshot *s = NULL;
	int r;

	if (!o->sensor)
		return 0;
	r = sensor_read(o->sensor, &s);
	if (!r && o->cont)
		r = contention_read(o->cont, &cs);
	sensor_snapshot_free(s);
	contention_snapshot_free(cs);
	if (r)
		fprintf(stderr, "onoff: reading the maps: %s\n", strerror(-r));
	return r;
}

/* n contention reads in a row: each TCP socket iterator run's time, on one line. */
static int flows(struct onoff *o, int n)
{
	struct contention_snapshot *cs;

	if (!o->cont || !o->on) {
		fprintf(stderr, "onoff: flows needs the sensors, on\n");
		return -1;
	}
	printf("flows");
	for (int i = 0; i < n; i++) {
		if (contention_read(o->cont, &cs)) {
			fprintf(stderr, "onoff: reading the contention maps failed\n");
			return -1;
		}
		contention_snapshot_free(cs);
		printf(" %llu", (unsigned long long)contention_flows_iter_ns(o->cont));
	}
	printf("\n");
	fflush(stdout);
	return 0;
}

/* Every program of the object at path, or only the one named prog. */
static int open_floor(struct onoff *o, const char *path, const char *prog)
{
	struct bpf_program *p;
	bool found = false;

	o->obj = bpf_object__open_file(path, NULL);
	if (!o->obj) {
		fprintf(stderr, "onoff: opening %s: %s\n", path, strerror(errno));
		return -1;
	}
	bpf_object__for_each_program (p, o->obj) {
		bool this = !prog || !strcmp(bpf_program__name(p), prog);

		found |= this;
		bpf_program__set_autoload(p, this);
	}
	if (!found) {
		fprintf(stderr, "onoff: %s has no program %s\n", path, prog);
		return -1;
	}
	if (bpf_object__load(o->obj)) {
		fprintf(stderr, "onoff: loading %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int open_sensors(struct onoff *o, int argc, char **argv)
{
	struct sensor_opts so = SENSOR_OPTS_DEFAULT;
	struct sensors_opts opts = { .sensor = &so,
				     .signals = CONT_DEFAULT,
				     .cgroup_base = TW_CGROUP_BASE,
				     .without = "no diagnosis" };

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--no-contention")) {
			opts.signals = 0;
		} else if (!strcmp(argv[i], "--signals") && i + 1 < argc &&
			   !contention_signals_parse(argv[i + 1], &opts.signals)) {
			i++;
		} else {
			fprintf(stderr, "onoff: bad argument %s\n", argv[i]);
			return -1;
		}
	}
	return sensors_open(&opts, &o->sensor, &o->cont) ? -1 : 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Commands on stdin until its end; ticks every second while on. */
static int serve(struct onoff *o)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	double next = 0;
	char line[64];

	setvbuf(stdin, NULL, _IONBF, 0);
	for (;;) {
		int timeout = o->on && o->sensor ? (int)((next - now_s()) * 1000) : -1;

		if (o->on && o->sensor && timeout <= 0) {
			if (tick(o))
				return -1;
			next += 1;
			continue;
		}
		if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
			return -1;
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		if (!fgets(line, sizeof(line), stdin))
			return 0;
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "flows ", 6)) {
			if (flows(o, atoi(line + 6)))
				return -1;
			continue;
		}
		if (strcmp(line, "on") && strcmp(line, "off")) {
			fprintf(stderr, "onoff: unknown command %s\n", line);
			return -1;
		}
		if (attach(o, !strcmp(line, "on")))
			return -1;
		next = now_s() + 0.5;
		printf("%s\n", line);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct onoff o = { .cgfd = -1 };
	int r;

	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "floor")) {
		r = open_floor(&o, argv[2], argc == 4 ? argv[3] : NULL);
	} else if (argc == 4 && !strcmp(argv[1], "cgroup")) {
		o.cgfd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (o.cgfd < 0)
			fprintf(stderr, "onoff: %s: %s\n", argv[3], strerror(errno));
		r = o.cgfd < 0 ? -1 : open_floor(&o, argv[2], NULL);
	} else if (argc >= 2 && !strcmp(argv[1], "sensors")) {
		r = open_sensors(&o, argc - 2, argv + 2);
	} else {
		fprintf(stderr, "usage: onoff floor OBJECT [PROGRAM] | onoff cgroup OBJECT DIR |\n"
				"       onoff sensors [--signals LIST | --no-contention]\n");
		return 2;
	}
	if (r || attach(&o, false))
		return 1;
	printf("off\n");
	fflush(stdout);
	r = serve(&o);
	attach(&o, false);
	contention_free(o.cont);
	sensor_free(o.sensor);
	bpf_object__close(o.obj);
	if (o.cgfd >= 0)
		close(o.cgfd);
	return r ? 1 : 0;
}
