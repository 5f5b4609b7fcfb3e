/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Block devices' I/O schedulers (/sys/block/NAME/queue/scheduler): I/O
 * weight (io.weight, blkio.bfq.weight) acts only while a disk's scheduler
 * is bfq. Reading, parsing and switching them, and the daemon's set-up
 * (iosched_setup()). Library code: returns -errno, logs nothing above
 * debug; the set-up's lines go to the caller, which logs them.
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

/*
 * bfq's idling, from a disk's queue/iosched/: how long it waits for a
 * queue that ran dry to send more (slice_idle_us; slice_idle in ms on
 * kernels before 4.17) and the longest turn of a sync queue (timeout_sync).
 */
struct iosched_idling {
	unsigned long slice_idle_us;
	unsigned long timeout_sync_ms;
};

/* A decimal number alone on its line, as sysfs prints one. 0 or -EBADMSG. */
int iosched_parse_ulong(const char *text, unsigned long *out);

/* Read dev's bfq idling tunables (the disk must run bfq). 0, -ENOENT or -errno. */
int iosched_bfq_idling(const char *dev, struct iosched_idling *out);

/*
 * A disk on bfq that idles (slice_idle > 0): true, and buf holds the line
 * iosched_setup() says about it (that the I/O weight cannot bound a sparse
 * reader's wait, and the tunable that does). false when it does not idle.
 */
bool iosched_idling_note(const char *dev, const struct iosched_idling *idle, char *buf, size_t len);

struct knob_state;

/* What iosched_setup() found and did, one line at a time, for the caller to log. */
typedef void (*iosched_say_fn)(void *userdata, int level, const char *line);

struct iosched_setup {
	const char *want;	  /* IOScheduler= ("bfq"), or NULL: only say */
	char **devs;		  /* IOSchedulerDevices=; NULL or empty: every whole disk */
	bool dry_run;		  /* say what would be switched, switch nothing */
	struct knob_state *state; /* records each original before its switch */
	iosched_say_fn say;	  /* each disk's line, whole, and its LOG_* level */
	void *userdata;
	char (*seen)[IOSCHED_NAME_MAX]; /* filled with the disks read, at most max_seen */
	size_t max_seen, n_seen;
};

/*
 * I/O weight acts only while a disk's scheduler is bfq: for each disk,
 * one line says whether it can; with want, disks on another scheduler
 * that offer it are switched (recorded in state first, restored at exit
 * by knob_state). How many were switched (a new file, io.bfq.weight, may
 * exist: the caller opens its knobs again), or -errno when /sys/block
 * cannot be listed.
 */
int iosched_setup(struct iosched_setup *o);

#endif
