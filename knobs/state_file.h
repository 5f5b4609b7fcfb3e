/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The state file's text (state_file.c), for state.c: every record loaded
 * and checked, and all of them written back atomically. Internal to knobs/.
 */
#ifndef TW_KNOB_STATE_FILE_H
#define TW_KNOB_STATE_FILE_H

#include <stddef.h>
#include "knobs/record.h"

/*
 * The records of the state file at path (none when it does not exist).
 * 0, -EBADMSG (refused, the reason logged) or -errno.
 */
int knob_state_file_load(const char *path, struct knob_record **out, size_t *n);
/*
 * Replace the state file in dir (made as knob_state_dir() says) by the n
 * records, or remove it when n is 0. 0 or -errno.
 */
int knob_state_file_save(const char *dir, const struct knob_record *v, size_t n);

#endif
