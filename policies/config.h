/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The controller's main config (tailwarden.conf), parsed and validated.
 * Pure: reads only the file it is given.
 */
#ifndef TW_CONFIG_H
#define TW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policies/ini.h" /* struct policy_errors */

/* Which systemd manager Unit= policies talk to (Bus=). */
enum config_bus {
	CONFIG_BUS_AUTO, /* the user manager's bus if $DBUS_SESSION_BUS_ADDRESS is set, else the system bus */
	CONFIG_BUS_SYSTEM,
	CONFIG_BUS_USER,
};

struct tw_config {
	char *file;	    /* NULL when defaults */
	uint64_t period_ns; /* control tick, 100 ms .. 60 s, default 1 s */
	bool dry_run;
	char *policies_dir; /* default /etc/tailwarden/policies.d */
	char *state_dir;    /* default /run/tailwarden */
	char *decision_log; /* JSON Lines path, default <state_dir>/decisions.jsonl */
	uint64_t
		decision_log_max_size; /* bytes before it is rotated to FILE.1; 0: no limit; default 16M */
	char *cgroup_base;	       /* default /sys/fs/cgroup */
	enum config_bus bus;	       /* default auto */
	char *metrics;		       /* Metrics=: ADDRESS:PORT of /metrics, NULL for no */
	bool metrics_set;	       /* Metrics= was given (no default then) */
	char *io_scheduler;	       /* IOScheduler=: "bfq" or NULL (never touch schedulers) */
	char **io_scheduler_devices; /* IOSchedulerDevices=: NULL-terminated, NULL for the default */
	bool avoid_service_cpus; /* AvoidServiceCPUs=: keep off the LC services' CPUs; default no */
};

/* "IPV4:PORT" or "[IPV6]:PORT" (numeric) into a socket address. 0 or -EINVAL. */
struct sockaddr_storage;
int config_parse_address(const char *address, struct sockaddr_storage *ss, unsigned *len);

/*
 * The main config; path NULL gives the defaults. 0 when valid; -EINVAL
 * when errs holds problems (*out untouched); -ENOMEM.
 */
int config_load(const char *path, struct tw_config **out, struct policy_errors *errs);
void config_free(struct tw_config *c);

/* "FILE: period 1s, dry-run no, policies DIR, ...": snprintf's contract. */
int config_describe(const struct tw_config *c, char *buf, size_t len);

#endif
