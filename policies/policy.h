/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Policy files (one INI file per service) and the controller's main
 * config, parsed and validated. Pure: reads only the files it is given.
 */
#ifndef TW_POLICY_H
#define TW_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum policy_class {
	POLICY_LATENCY_CRITICAL,
	POLICY_BEST_EFFORT,
};

/* An inclusive range of a knob's value; set is false when the key was absent. */
struct policy_range {
	double lo, hi;
	bool set;
};

/*
 * Canonical units, whatever the file says:
 *   cpu_quota      fraction of one CPU (0.10 = 10%), hi may be INFINITY ("max")
 *   cpu_weight     cgroup v2 scale 1..10000 (actuators convert for v1)
 *   io_weight      cgroup v2 scale 1..10000 (v1 bfq: 1..1000, converted)
 *   cpu_freq_khz   kHz; hi INFINITY means the hardware maximum
 */
struct policy {
	char *name;   /* file name without ".policy" */
	char *file;   /* path as given, for messages */
	unsigned line; /* line of [Service], for messages about the whole policy */
	char *cgroup; /* relative to the cgroup root, leading '/'; NULL with unit */
	char *unit;   /* Unit=: a systemd unit whose ControlGroup is followed; or NULL */
	enum policy_class klass;
	/* [Objective], latency-critical only */
	double percentile;     /* 0 < p < 1, e.g. 0.99 */
	uint64_t target_ns;
	uint64_t min_requests; /* fewer in a window: no verdict, no action */
	uint64_t window_ns;
	/* [Limits] */
	struct policy_range cpu_quota, cpu_weight, io_weight, cpu_freq_khz;
};

struct policy_set {
	struct policy *v;
	size_t n;
};

/* Which systemd manager Unit= policies talk to (Bus=). */
enum config_bus {
	CONFIG_BUS_AUTO,   /* the user manager's bus if $DBUS_SESSION_BUS_ADDRESS is set, else the system bus */
	CONFIG_BUS_SYSTEM,
	CONFIG_BUS_USER,
};

struct tw_config {
	char *file;             /* NULL when defaults */
	uint64_t period_ns;     /* control tick, 100 ms .. 60 s, default 1 s */
	bool dry_run;
	char *policies_dir;     /* default /etc/tailwarden/policies.d */
	char *state_dir;        /* default /run/tailwarden */
	char *decision_log;     /* JSON Lines path, default <state_dir>/decisions.jsonl */
	char *cgroup_base;      /* default /sys/fs/cgroup */
	enum config_bus bus;    /* default auto */
	char *metrics;          /* Metrics=: ADDRESS:PORT of /metrics, NULL for no */
	bool metrics_set;       /* Metrics= was given (no default then) */
};

#define DEFAULT_METRICS_ADDRESS "127.0.0.1:9477"

/* "IPV4:PORT" or "[IPV6]:PORT" (numeric) into a socket address. 0 or -EINVAL. */
struct sockaddr_storage;
int config_parse_address(const char *address, struct sockaddr_storage *ss, unsigned *len);

/* One problem found in a file: "FILE:LINE: message". */
struct policy_error {
	char *file;
	unsigned line; /* 0 when it concerns the whole file */
	char *msg;
};

struct policy_errors {
	struct policy_error *v;
	size_t n;
};

/*
 * Parse and validate policy files (each path a *.policy file or a
 * directory of them, read in name order) as one set: duplicates and
 * overlapping cgroups across files are errors. 0 when valid; -EINVAL when
 * errs holds problems (*out untouched); -ENOMEM.
 */
int policy_set_load(char *const *paths, size_t n, struct policy_set **out,
		    struct policy_errors *errs);
void policy_set_free(struct policy_set *s);

/* The main config; path NULL gives the defaults. Same return contract. */
int config_load(const char *path, struct tw_config **out, struct policy_errors *errs);
void config_free(struct tw_config *c);

/*
 * One line for humans, e.g. "web: latency-critical /lc.slice/web.service
 * p99 <= 2ms (window 2s, min 200 requests); limits: CPUWeight 100..1000"
 * and "FILE: period 1s, dry-run no, policies DIR, ...". snprintf's contract.
 */
int policy_describe(const struct policy *p, char *buf, size_t len);
int config_describe(const struct tw_config *c, char *buf, size_t len);

/* Print each error as "FILE:LINE: message" to f. */
void policy_errors_print(const struct policy_errors *errs, FILE *f);
void policy_errors_clear(struct policy_errors *errs);

#endif
