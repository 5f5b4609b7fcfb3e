// SPDX-License-Identifier: GPL-2.0
/* tailwarden run: argv and config only; the work is in manager.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "controller/manager.h"
#include "policies/config.h"
#include "policies/policy.h"

static void help(void)
{
	printf("Usage: tailwarden run [OPTIONS]\n\n"
	       "The daemon: keeps latency-critical services inside their objective by\n"
	       "changing best-effort services' CPU and I/O knobs, per the policy files.\n"
	       "Every change is logged; all of them are undone on SIGTERM/SIGINT.\n"
	       "SIGHUP re-reads the policies (an invalid set keeps the old one) and\n"
	       "reopens the decision log.\n\n"
	       "      --config FILE     main config (default " TW_CONFIG_PATH " if present)\n"
	       "      --policies PATH   policy file or directory (default: the config's\n"
	       "                        PoliciesDir=, /etc/tailwarden/policies.d)\n"
	       "      --dry-run         decide and log as usual, write nothing\n"
	       "      --no-contention   do not load the contention sensors (no diagnosis)\n"
	       "  -h, --help            this text\n");
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = { { "config", required_argument, NULL, 'c' },
					      { "policies", required_argument, NULL, 'p' },
					      { "dry-run", no_argument, NULL, 'd' },
					      { "no-contention", no_argument, NULL, 'N' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	struct manager_opts o = { 0 };
	const char *config = NULL;
	char *policies = NULL;
	struct manager *m;
	int c, r;

	/* A closed stderr pipe or a metrics client that went away: EPIPE, not death. */
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'p':
			policies = optarg;
			break;
		case 'd':
			o.dry_run = true;
			break;
		case 'N':
			o.no_contention = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			log_error("try 'tailwarden run --help'");
			return TW_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; try 'tailwarden run --help'", argv[optind]);
		return TW_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		log_error("must run as root (BPF sensors and cgroup knobs)");
		return 1;
	}
	if (daemon_load_config(config, TW_CONFIG_PATH, &o.cfg)) {
		log_error("refusing to start");
		return 1;
	}
	o.dry_run = o.dry_run || o.cfg->dry_run;
	o.policy_paths = policies ? &policies : &o.cfg->policies_dir;
	o.n_policy_paths = 1;
	r = manager_new(&o, &m);
	if (r)
		return 1;
	r = manager_run(m);
	manager_free(m);
	return r < 0 ? 1 : 0;
}
