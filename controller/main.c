// SPDX-License-Identifier: GPL-2.0
/* tailwarden: argv dispatch only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "controller/commands.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "run", cmd_run, "the daemon: enforce the policies (see 'run --help')" },
	{ "top", cmd_top, "live per-cgroup request rate and latency inferred from the kernel" },
	{ "restore", cmd_restore, "restore knobs recorded in the state file (after a crash)" },
	{ "check", cmd_check, "validate policy and config files" },
	{ "status", cmd_status, "what the running daemon does now (exit status 3: not running)" },
	{ "record", cmd_record, "record the sensors' per-tick samples to a file, for replay" },
	{ "replay", cmd_replay, "run the policies over a recording, touching nothing" },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: tailwarden COMMAND [OPTIONS]\n\n"
		   "Infers each cgroup's request latency and throughput from kernel events\n"
		   "with eBPF, without help from the applications.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\n  tailwarden COMMAND --help   options of a command\n"
		   "  tailwarden --version\n");
}

int main(int argc, char **argv)
{
	if (log_level_from_env() < 0)
		log_warning("Ignoring TAILWARDEN_LOG_LEVEL=%s: not a level (debug, info, notice, "
			    "warning, err, crit, alert, emerg, or 7 ... 0)",
			    getenv("TAILWARDEN_LOG_LEVEL"));
	if (argc < 2) {
		usage(stderr);
		return TW_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("tailwarden %s\n", TW_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "tailwarden: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return TW_EXIT_USAGE;
}
