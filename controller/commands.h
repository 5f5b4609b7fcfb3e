/* SPDX-License-Identifier: GPL-2.0 */
/* Subcommands: each parses its own argv and returns the exit status. */
#ifndef TW_COMMANDS_H
#define TW_COMMANDS_H

int cmd_top(int argc, char **argv);

#endif
