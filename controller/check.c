// SPDX-License-Identifier: GPL-2.0
/* tailwarden check: validate policy files and the main config, start nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/log.h"
#include "controller/commands.h"
#include "policies/config.h"
#include "policies/policy.h"

static void help(void)
{
	printf("Usage: tailwarden check [PATH]...\n\n"
	       "Validate policy files and the main config; nothing is started or changed.\n\n"
	       "Each PATH is a policy file (NAME.policy, for the service NAME), a directory\n"
	       "whose *.policy files are read in name order, or the main config (a name\n"
	       "ending in .conf; at most one). All policy files given are checked as one\n"
	       "set, as `run` would load them: a service name or cgroup in two files, a\n"
	       "cgroup inside another's, and CPUFrequency= in more than one policy are\n"
	       "errors too (the first such conflict of each file).\n\n"
	       "With no policy PATH, the policies checked are those in the config's\n"
	       "PoliciesDir=. With no PATH at all, the config is " TW_CONFIG_PATH "\n"
	       "if it exists, else the built-in defaults (PoliciesDir=/etc/tailwarden/policies.d).\n\n"
	       "Output: every problem found, not just the first, as FILE:LINE: message on\n"
	       "stderr (LINE 0: the file as a whole; at most 100, then \"N more errors not\n"
	       "shown\"). When there is none: the config's\n"
	       "settings on one line when a config file was read, then one line per\n"
	       "service on stdout, e.g.\n"
	       "  web: latency-critical /lc.slice/web.service p99 <= 2ms (window 2s, min 200 requests); limits: CPUWeight 100..1000\n\n"
	       "  -h, --help   this text\n\n"
	       "Exit status: 0 when everything is valid, 1 on any error, 2 on bad usage.\n"
	       "Every key, unit and message: docs/policy.md.\n");
}

static bool is_config(const char *path)
{
	size_t n = strlen(path);

	return n >= 5 && !strcmp(path + n - 5, ".conf");
}

struct check {
	const char *config; /* NULL: none named */
	char **policies;    /* the policy PATHs */
	size_t npolicies;
	struct tw_config *cfg;
	struct policy_set *set;
	struct policy_errors errs;
};

static int parse_args(struct check *ck, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			help();
			return 1;
		}
		log_error("try 'tailwarden check --help'");
		return -EINVAL;
	}
	ck->policies = calloc(argc, sizeof(*ck->policies));
	if (!ck->policies)
		return -ENOMEM;
	for (int i = optind; i < argc; i++) {
		if (!is_config(argv[i])) {
			ck->policies[ck->npolicies++] = argv[i];
		} else if (ck->config) {
			log_error("one main config at a time (%s, %s)", ck->config, argv[i]);
			return -EINVAL;
		} else {
			ck->config = argv[i];
		}
	}
	if (!ck->config && !ck->npolicies && access(TW_CONFIG_PATH, F_OK) == 0)
		ck->config = TW_CONFIG_PATH;
	return 0;
}

/* Loads what was named; problems go to ck->errs. 0 or -ENOMEM. */
static int load(struct check *ck)
{
	char *dir[1];
	int r = 0;

	if (ck->config || !ck->npolicies) {
		r = config_load(ck->config, &ck->cfg, &ck->errs);
		if (r == -ENOMEM)
			return r;
	}
	if (ck->npolicies) {
		r = policy_set_load(ck->policies, ck->npolicies, &ck->set, &ck->errs);
	} else if (ck->cfg) {
		/* An invalid config names no trustworthy PoliciesDir: its errors stand alone. */
		dir[0] = ck->cfg->policies_dir;
		r = policy_set_load(dir, 1, &ck->set, &ck->errs);
	}
	return r == -ENOMEM ? r : 0;
}

static int print_summary(const struct check *ck)
{
	char *line;
	int n;

	if (ck->cfg && ck->cfg->file) {
		n = config_describe(ck->cfg, NULL, 0);
		line = malloc(n + 1);
		if (!line)
			return -ENOMEM;
		config_describe(ck->cfg, line, n + 1);
		printf("%s\n", log_make_printable(line));
		free(line);
	}
	for (size_t i = 0; ck->set && i < ck->set->n; i++) {
		n = policy_describe(&ck->set->v[i], NULL, 0);
		line = malloc(n + 1);
		if (!line)
			return -ENOMEM;
		policy_describe(&ck->set->v[i], line, n + 1);
		printf("%s\n", log_make_printable(line));
		free(line);
	}
	return 0;
}

int cmd_check(int argc, char **argv)
{
	struct check ck = { 0 };
	int r, status;

	log_set_ident("tailwarden check");
	r = parse_args(&ck, argc, argv);
	if (r == 0)
		r = load(&ck);
	if (r == -ENOMEM) {
		log_error_errno(r, "Failed to check: %m");
		status = 1;
	} else if (r < 0) {
		status = 2;
	} else if (r > 0) {
		status = 0; /* --help */
	} else if (ck.errs.n) {
		policy_errors_print(&ck.errs, stderr);
		status = 1;
	} else {
		status = print_summary(&ck) < 0;
	}
	policy_errors_clear(&ck.errs);
	policy_set_free(ck.set);
	config_free(ck.cfg);
	free(ck.policies);
	log_set_ident("tailwarden");
	return status;
}
