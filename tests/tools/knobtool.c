// SPDX-License-Identifier: GPL-2.0
/*
 * knobtool: the small driver tests/integration/test_knobs.py uses to act
 * on real cgroups through the actuator library (knobs/knob.c,
 * knobs/state.c). Not installed; see usage().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "knobs/knob.h"
#include "knobs/state.h"

static void usage(void)
{
	fprintf(stderr, "usage: knobtool read BASE REL KNOB\n"
			"       knobtool write BASE REL KNOB VALUE\n"
			"       knobtool hold STATEDIR BASE REL KNOB=VALUE...\n"
			"KNOB: cpu.max, cpu.weight, io.weight, cpufreq; VALUE: a number or max.\n"
			"hold records and writes each, prints 'ready', then waits: SIGTERM\n"
			"restores everything and exits 0; SIGKILL leaves the state file behind.\n");
}

static int kind_of(const char *s, enum action_knob *k)
{
	*k = action_knob_from_name(s);
	return *k == KNOB_MAX ? -EINVAL : 0;
}

static double value_of(const char *s)
{
	return !strcmp(s, "max") ? INFINITY : strtod(s, NULL);
}

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int hold(int argc, char **argv)
{
	struct knob_state *s;
	struct knobs *k;
	sigset_t mask, old;
	int r;

	if (argc < 4)
		return usage(), 2;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, &old);
	signal(SIGTERM, on_term);
	r = knob_state_open(argv[0], &s);
	if (r)
		return fprintf(stderr, "state %s: %s\n", argv[0], strerror(-r)), 1;
	r = knobs_open(argv[1], argv[2], &k);
	if (r)
		return fprintf(stderr, "open %s%s: %s\n", argv[1], argv[2], strerror(-r)), 1;
	for (int i = 3; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		enum action_knob kind;
		double cur;

		if (!eq)
			return usage(), 2;
		*eq = '\0';
		if (kind_of(argv[i], &kind))
			return usage(), 2;
		r = knob_read(k, kind, &cur);
		if (!r)
			r = knob_state_set(s,
					   &(struct knob_target){ .cgroup_base = argv[1],
								  .cgroup = argv[2],
								  .files = k },
					   kind, cur, value_of(eq + 1));
		if (r)
			return fprintf(stderr, "%s=%s: %s\n", argv[i], eq + 1, strerror(-r)), 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (!got_term)
		sigsuspend(&old);
	r = knob_state_restore_all(s, argv[1]);
	printf("restored %d\n", r);
	knob_state_free(s);
	knobs_free(k);
	return r < 0;
}

int main(int argc, char **argv)
{
	enum action_knob kind;
	struct knobs *k;
	const char *why;
	double v;
	int r;

	argc--, argv++;
	if (argc >= 1 && !strcmp(argv[0], "hold"))
		return hold(argc - 1, argv + 1);
	if (argc < 4 || kind_of(argv[3], &kind))
		return usage(), 2;
	r = knobs_open(argv[1], argv[2], &k);
	if (r)
		return fprintf(stderr, "open %s%s: %s\n", argv[1], argv[2], strerror(-r)), 1;
	if (!knob_available(k, kind, &why)) {
		printf("unavailable: %s\n", why);
		knobs_free(k);
		return 3;
	}
	if (!strcmp(argv[0], "read") && argc == 4) {
		r = knob_read(k, kind, &v);
		if (!r)
			printf(isinf(v) ? "max\n" : "%.17g\n", v);
	} else if (!strcmp(argv[0], "write") && argc == 5) {
		r = knob_write(k, kind, value_of(argv[4]));
		if (!r)
			printf("%s\n", knob_path(k, kind));
	} else {
		knobs_free(k);
		return usage(), 2;
	}
	if (r)
		fprintf(stderr, "%s %s: %s\n", argv[0], knob_path(k, kind), strerror(-r));
	knobs_free(k);
	return r ? 1 : 0;
}
