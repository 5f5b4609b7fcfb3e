/* SPDX-License-Identifier: GPL-2.0 */
/* Subcommands: each parses its own argv and returns the exit status. */
#ifndef TW_COMMANDS_H
#define TW_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_replay(int argc, char **argv);

#define TW_VERSION "0.1.0"

/* Exit status of every command on bad usage (an unknown option, a bad
 * option value, a missing or extra argument). */
#define TW_EXIT_USAGE 2

#endif
