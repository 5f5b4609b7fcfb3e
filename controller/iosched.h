/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Block devices' I/O schedulers (/sys/block/NAME/queue/scheduler): I/O
 * weight (io.weight, blkio.bfq.weight) acts only while a disk's scheduler
 * is bfq. Reading, parsing and switching them. Library code: returns
 * -errno, logs nothing above debug.
 */
#ifndef TW_IOSCHED_H
#define TW_IOSCHED_H

#include <stdbool.h>
#include <stddef.h>

#define IOSCHED_NAME_MAX 32 /* a scheduler's or a device's name, with its NUL */
#define IOSCHED_OFFERED_MAX 16

/* A device's scheduler file: the one in use and those it offers (in use included). */
struct iosched {
	char current[IOSCHED_NAME_MAX];
	char offered[IOSCHED_OFFERED_MAX][IOSCHED_NAME_MAX];
	size_t n;
};

/*
 * A device's name as /sys/block has it, safe to put in a path: 1..31 of
 * [a-z0-9_-] (so no '/', no ".."). A scheduler's name: the same set.
 */
bool iosched_valid_name(const char *name);
/*
 * Parse a scheduler file's text ("none [mq-deadline] kyber bfq\n"):
 * names separated by white space, exactly one in brackets (the one in
 * use). 0 or -EBADMSG.
 */
int iosched_parse(const char *text, struct iosched *out);
bool iosched_offers(const struct iosched *s, const char *name);
/*
 * Read the scheduler of device dev: /sys/block/DEV/queue/scheduler, which
 * must be a regular file on sysfs (-EMEDIUMTYPE otherwise). 0, -EINVAL
 * (not a device's name), -ENOENT (no such device, or one without a
 * scheduler), -EBADMSG or -errno.
 */
int iosched_get(const char *dev, struct iosched *out);
/*
 * Switch dev to scheduler name, which it must offer (-EOPNOTSUPP), and
 * read back: -EIO when the kernel kept another. 0 or -errno.
 */
int iosched_set(const char *dev, const char *name);
/*
 * The whole disks of /sys/block that have a scheduler file, in name
 * order, leaving out loop, ram and zram devices (RAM or files, which
 * best-effort I/O weight is not about). *out is a NULL-terminated array
 * of names, freed with iosched_devices_free(). 0 or -errno.
 */
int iosched_devices(char ***out);
void iosched_devices_free(char **v);

#endif
