/* SPDX-License-Identifier: GPL-2.0 */
/*
 * status.json: the running daemon's report, written atomically (temp file
 * and rename, mode 0600) in its state directory each tick and removed at
 * exit; `tailwarden status` reads it and checks that the pid it names is
 * a live tailwarden.
 */
#ifndef TW_STATUS_H
#define TW_STATUS_H

#include "controller/report.h"

#define STATUS_FILE "status.json"
#define STATUS_MAX_BYTES (4 << 20)

/*
 * Make sure dir can hold the daemon's state: created (mode 0700) when
 * missing; refused when it is a symlink, not a directory, not owned by us,
 * or group/world-writable. 0 or -errno, *why in words.
 */
int status_dir_prepare(const char *dir, const char **why);
/* Write r as dir/status.json. 0 or -errno. */
int status_write(const struct report *r, const char *dir);
/* Remove dir/status.json (the daemon exits). */
void status_remove(const char *dir);

#endif
