/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Logging to stderr. When stderr is the journal ($JOURNAL_STREAM names
 * fd 2) each line carries an sd-daemon priority prefix ("<3>") so journald
 * files it right; elsewhere it reads "tailwarden: message".
 */
#ifndef TW_LOG_H
#define TW_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

/* Is stderr the journal (so lines take "<N>" priority prefixes)? */
bool log_journal(void);

/*
 * Names from outside (file names, service names, cgroup paths, what a
 * state file says) may hold a terminal's escape bytes. log_make_printable()
 * turns every control byte (below 0x20, and 0x7f) of s into '?' in place
 * and returns s; log_printable() does the same into buf (truncated to len)
 * for a string that must stay as it is. Every log line goes through the
 * first; lines printed to stdout use the second.
 */
char *log_make_printable(char *s);
const char *log_printable(const char *s, char *buf, size_t len);

void log_set_max_level(int level);
/*
 * The level from $TAILWARDEN_LOG_LEVEL ("debug" ... "emerg", or 7 ... 0),
 * as systemd's tools read $SYSTEMD_LOG_LEVEL: 0 when unset or applied,
 * -EINVAL (the level unchanged) for any other value.
 */
int log_level_from_env(void);
/* The prefix of lines outside the journal ("tailwarden", "tailwarden check"). */
void log_set_ident(const char *name);
/* Log at priority level (LOG_ERR ... LOG_DEBUG). Always returns 0. */
int log_full(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Log with err (a -errno) in words: where fmt has "%m", there; otherwise
 * appended as ": text". Returns err, for "return log_error_errno(r, ...)".
 */
int log_full_errno(int level, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_error_errno(err, ...) log_full_errno(LOG_ERR, err, __VA_ARGS__)
#define log_warning_errno(err, ...) log_full_errno(LOG_WARNING, err, __VA_ARGS__)
#define log_notice_errno(err, ...) log_full_errno(LOG_NOTICE, err, __VA_ARGS__)
#define log_info_errno(err, ...) log_full_errno(LOG_INFO, err, __VA_ARGS__)
#define log_debug_errno(err, ...) log_full_errno(LOG_DEBUG, err, __VA_ARGS__)

#endif
