/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The decision log (DecisionLog=): one JSON object per line, appended.
 * Bounded: a line that would take the file past its maximum size moves it
 * to FILE.1 (replacing an older one) and starts a new FILE, so the two
 * together hold at most twice the maximum (one line more when a single
 * line is bigger than the maximum). A write that fails (disk full, EIO)
 * loses that line, never the daemon: lost lines are counted and said, and
 * the file is tried again after a growing delay.
 */
#ifndef TW_DECISIONS_H
#define TW_DECISIONS_H

#include <stdint.h>

/* Longest wait between two attempts at a failing log. */
#define DECISIONS_RETRY_MAX_USEC (300 * 1000000ULL)

struct decisions;

/*
 * Open path for appending (created 0644 if missing). max_size: bytes
 * before rotating, 0 for no limit (files that are not regular files, like
 * /dev/null, are never rotated). 0 or -errno (nothing is logged then).
 */
int decisions_open(const char *path, uint64_t max_size, struct decisions **out);
/*
 * Append line (without its newline) at now_usec (CLOCK_MONOTONIC), whole
 * or not at all. 0, or -errno when it was lost (counted; said in the log
 * on the first loss, then at most once a minute).
 */
int decisions_write(struct decisions *d, const char *line, uint64_t now_usec);
/*
 * Close the file and open path again (SIGHUP, after a logrotate moved it
 * aside): later lines go to a new file. 0 or -errno (then the lines are
 * lost, and the file tried again as after a failed write).
 */
int decisions_reopen(struct decisions *d, uint64_t now_usec);
/* Lines lost since open. */
uint64_t decisions_lost(const struct decisions *d);
/* Bytes in the current file, as this writer counts them. */
uint64_t decisions_size(const struct decisions *d);
void decisions_close(struct decisions *d);

#endif
