/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's state and event sources: each tick reads the sensors,
 * asks the engine, and applies (or, in dry-run, only logs) its actions.
 */
#ifndef TW_MANAGER_H
#define TW_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include "policies/config.h"
#include "policies/policy.h"

struct manager;

struct manager_opts {
	struct tw_config *cfg;   /* owned by the manager from now on */
	char **policy_paths;     /* files or directories, re-read on SIGHUP */
	size_t n_policy_paths;
	bool dry_run;
	bool no_contention;      /* do not load the contention sensor */
};

/*
 * Load policies, attach the sensors, open the knobs and the state file.
 * Logs what went wrong. 0 or -errno; on error nothing was changed.
 */
int manager_new(const struct manager_opts *o, struct manager **out);
/* Run until SIGTERM/SIGINT, then restore every knob. 0 or -errno. */
int manager_run(struct manager *m);
void manager_free(struct manager *m);

#endif
