// SPDX-License-Identifier: GPL-2.0
/* tailwarden restore: put back the knobs a crashed daemon left changed. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "knobs/state.h"
#include "policies/config.h"

static void help(void)
{
	printf("Usage: tailwarden restore [OPTIONS]\n\n"
	       "Restores every knob recorded in the state file to its original value,\n"
	       "as the daemon does on SIGTERM/SIGINT: for use after it crashed or was\n"
	       "killed with SIGKILL. Says what it restored; exit status 0 also when\n"
	       "there was nothing to restore, 1 when something could not be restored\n"
	       "(the state file then keeps only that). Must run as root.\n\n"
	       "Only knobs recorded under the config's CgroupBase= are restored, each\n"
	       "file opened without following symbolic links, on a cgroup file system,\n"
	       "with a value the knob can hold. A knob whose file no longer holds what\n"
	       "the daemon wrote last was changed by someone else since: it is left\n"
	       "alone, and said so. A disk's I/O scheduler (IOScheduler=) is put back\n"
	       "through /sys/block/NAME/queue/scheduler on sysfs only, to a scheduler\n"
	       "the disk offers.\n\n"
	       "      --config FILE     main config, as for run: its StateDir= is where the\n"
	       "                        state file is (default " TW_CONFIG_PATH "\n"
	       "                        if present, else " TW_STATE_DIR ")\n"
	       "      --state-dir DIR   the state directory, whatever the config says (the\n"
	       "                        config's CgroupBase= still applies)\n"
	       "  -h, --help            this text\n");
}

static void print_line(void *userdata, const char *line)
{
	(void)userdata;
	/* A refused or failed knob is an error, on stderr; the rest is the report. */
	if (strstr(line, ": not restored: ")) {
		fflush(stdout);
		log_error("%s", line);
		return;
	}
	printf("  %s\n", line);
}

static int restore_dir(const char *dir, const char *cgroup_base)
{
	char shown[PATH_MAX];
	const char *why, *name = log_printable(dir, shown, sizeof(shown));
	struct knob_state *s;
	int r, left = 0;

	r = knob_state_dir(dir, false, &why);
	if (r == -ENOENT) {
		printf("nothing to restore: %s does not exist\n", name);
		return 0;
	}
	if (r && why) {
		log_error("refusing the state directory %s: it %s; not touching anything", name,
			  why);
		return 1;
	}
	if (r) {
		log_error_errno(r, "Failed to read the state directory %s", name);
		return 1;
	}
	r = knob_state_open(dir, &s);
	if (r == -EBADMSG) {
		log_error("%s/" TW_STATE_FILE
			  " is not a tailwarden state file; not touching anything",
			  name);
		return 1;
	}
	if (r) {
		log_error_errno(r, "Failed to read the state file in %s", name);
		return 1;
	}
	r = knob_state_restore_all_report(s, cgroup_base, print_line, NULL, &left);
	knob_state_free(s);
	if (r < 0) {
		fflush(stdout);
		log_error_errno(r, "Failed to restore some knobs (%s/" TW_STATE_FILE " keeps them)",
				name);
		return 1;
	}
	if (r == 0 && !left)
		printf("nothing to restore: no knob recorded in %s/" TW_STATE_FILE "\n", name);
	else if (!left)
		printf("restored %d knob(s) recorded in %s/" TW_STATE_FILE "\n", r, name);
	else
		printf("restored %d knob(s) recorded in %s/" TW_STATE_FILE
		       "; left %d alone (changed by someone else since)\n",
		       r, name, left);
	return 0;
}

int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = { { "config", required_argument, NULL, 'c' },
					      { "state-dir", required_argument, NULL, 's' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	const char *dir = NULL, *config = NULL;
	struct tw_config *cfg = NULL;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 's':
			dir = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			log_error("try 'tailwarden restore --help'");
			return TW_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; try 'tailwarden restore --help'",
			  argv[optind]);
		return TW_EXIT_USAGE;
	}
	/*
	 * The same config as run's: its StateDir=, and its CgroupBase= bounds
	 * what is written. With --state-dir and no --config, a default config
	 * that does not load (written for an older version, say) must not
	 * stand between a crashed host and its restore: the built-in root it is.
	 */
	if (daemon_load_config(config, TW_CONFIG_PATH, &cfg)) {
		if (!dir || config)
			return 1;
		log_warning("restoring with the built-in CgroupBase=" TW_CGROUP_BASE " instead");
	}
	r = restore_dir(dir ? dir : cfg->state_dir, cfg ? cfg->cgroup_base : TW_CGROUP_BASE);
	config_free(cfg);
	return r;
}
