/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to sensing/contention*.c: loading the contention sensor. Probes
 * the kernel's BTF for what each signal needs, loads every feasible signal
 * at once and, when the kernel refuses, finds by bisection which signals
 * it refuses and runs the rest.
 */
#ifndef TW_CONTENTION_LOAD_H
#define TW_CONTENTION_LOAD_H

#include <stdbool.h>
#include <stdint.h>

struct contention_bpf;

/* What was loaded. */
struct contention_loaded {
	struct contention_bpf *skel; /* NULL when no BPF signal runs */
	unsigned running;	     /* enum contention_signal mask */
	int ncpus;		     /* possible CPUs (per-CPU map values) */
	uint64_t iter_prev_ns;	     /* when the run-queue iterator last ran (CLOCK_MONOTONIC) */
	uint64_t flows_gen;	     /* runs of the TCP socket iterator */
	uint64_t flows_iter_ns;	     /* how long its last run took */
	bool flows_walked;	     /* the TCP hash table was walked since the last attach */
	bool flows_timeouts;	     /* sockets count their RTOs (total_rto, 6.7+) */
	char missing[1024];	     /* each requested signal not running, and why */
};

/*
 * Load and attach the signals of want this kernel runs. Signals it lacks
 * are noted in l->missing, not errors. 0, or -errno with *why (static):
 * -EPERM when not root, -ENOMEM.
 */
int contention_load(unsigned want, uint32_t max_cgroups, struct contention_loaded *l,
		    const char **why);
/*
 * Run the run-queue task iterator, if it is loaded: charge every task's
 * run-queue waits since its last visit to its cgroup. Once per tick,
 * before the maps are read. 0 or -errno.
 */
int contention_runq_iter(struct contention_loaded *l);
/*
 * Run the TCP socket iterators, if they are loaded: charge every socket's
 * counters since its last visit and gather the live figures of this run.
 * The first run after an attach walks the whole TCP hash table; the others
 * only the sockets with storage, where the kernel has that iterator. Once
 * per tick, before the maps are read. 0 or -errno.
 */
int contention_flows_iter(struct contention_loaded *l);
/* Attach (on) or detach what contention_load() loaded. 0 or -errno. */
int contention_attach_loaded(struct contention_loaded *l, bool on);
/* Release what contention_load() loaded (l itself is the caller's). */
void contention_unload(struct contention_loaded *l);

#endif
