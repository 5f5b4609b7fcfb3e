/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Writing the daemon's own files (the state file, status.json): whole
 * writes, and replacing a file so that a reader sees the old one or the
 * new one, never a part.
 */
#ifndef TW_FILEIO_H
#define TW_FILEIO_H

#include <stdbool.h>
#include <stddef.h>

/* All of buf to fd, again after EINTR. 0 or -errno. */
int fileio_write_all(int fd, const void *buf, size_t len);
/*
 * Replace dir/name with text and a newline: written to dir/.name.tmp
 * (mode 0600, never through a symbolic link), then renamed over it. With
 * durable the file and the directory are synced too, so the new contents
 * survive a power cut (the state file; status.json, rewritten every tick,
 * does without). The temporary file is removed on failure. 0 or -errno.
 */
int fileio_replace(const char *dir, const char *name, const char *text, bool durable);
/* fsync() a directory, so that a rename or unlink in it is on disk. 0 or -errno. */
int fileio_sync_dir(const char *dir);

#endif
