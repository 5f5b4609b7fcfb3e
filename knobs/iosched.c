// SPDX-License-Identifier: GPL-2.0
/*
 * Block devices' I/O schedulers, through sysfs. The file lists the
 * schedulers a device offers with the one in use in brackets:
 *
 *   none [mq-deadline] kyber bfq
 *
 * and writing a name switches to it (the kernel loads its module).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include "common/fileio.h"
#include "common/log.h"
#include "knobs/iosched.h"
#include "knobs/state.h"

#define SYS_BLOCK "/sys/block"

bool iosched_valid_name(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= IOSCHED_NAME_MAX)
		return false;
	for (; *name; name++)
		if (!((*name >= 'a' && *name <= 'z') || (*name >= '0' && *name <= '9') ||
		      *name == '_' || *name == '-'))
			return false;
	return true;
}

int iosched_parse(const char *text, struct iosched *out)
{
	const char *p = text;
	bool found = false;

	memset(out, 0, sizeof(*out));
	for (;;) {
		char name[IOSCHED_NAME_MAX];
		bool cur = false;
		size_t n;

		p += strspn(p, " \t\n");
		if (!*p)
			break;
		if (*p == '[') {
			cur = true;
			p++;
		}
		n = strcspn(p, " \t\n]");
		if (!n || n >= sizeof(name) || out->n == IOSCHED_OFFERED_MAX)
			return -EBADMSG;
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (cur != (*p == ']') || !iosched_valid_name(name))
			return -EBADMSG;
		if (cur) {
			if (found)
				return -EBADMSG;
			found = true;
			p++;
			memcpy(out->current, name, n + 1);
		}
		if (*p && !strchr(" \t\n", *p))
			return -EBADMSG;
		memcpy(out->offered[out->n++], name, n + 1);
	}
	return found ? 0 : -EBADMSG;
}

bool iosched_offers(const struct iosched *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->offered[i], name))
			return true;
	return false;
}

/* queue/NAME of dev (NAME: "scheduler", "iosched/slice_idle_us"), opened with
 * flags: a regular file on sysfs. */
static int open_queue_file(const char *dev, const char *name, int flags)
{
	char path[sizeof(SYS_BLOCK) + IOSCHED_NAME_MAX + 64];
	struct statfs sfs;
	struct stat st;
	int fd, r;

	if (!iosched_valid_name(dev))
		return -EINVAL;
	snprintf(path, sizeof(path), SYS_BLOCK "/%s/queue/%s", dev, name);
	fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstatfs(fd, &sfs) < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (sfs.f_type != SYSFS_MAGIC || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EMEDIUMTYPE;
	}
	return fd;
}

/* The scheduler file of dev. */
static int open_file(const char *dev, int flags)
{
	return open_queue_file(dev, "scheduler", flags);
}

/* The text of queue/NAME of dev, terminated, in buf; 0 or -errno. */
static int read_queue_file(const char *dev, const char *name, char *buf, size_t size)
{
	ssize_t n;
	int fd = open_queue_file(dev, name, O_RDONLY);

	if (fd < 0)
		return fd;
	n = read(fd, buf, size - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	buf[n] = '\0';
	return 0;
}

int iosched_get(const char *dev, struct iosched *out)
{
	char buf[1024];
	int r = read_queue_file(dev, "scheduler", buf, sizeof(buf));

	return r ? r : iosched_parse(buf, out);
}

int iosched_set(const char *dev, const char *name)
{
	struct iosched s;
	int fd, r;

	if (!iosched_valid_name(name))
		return -EINVAL;
	r = iosched_get(dev, &s);
	if (r)
		return r;
	if (!iosched_offers(&s, name))
		return -EOPNOTSUPP;
	fd = open_file(dev, O_WRONLY);
	if (fd < 0)
		return fd;
	r = fileio_write_all(fd, name, strlen(name));
	close(fd);
	if (r)
		return r;
	r = iosched_get(dev, &s);
	if (r)
		return r;
	if (strcmp(s.current, name)) {
		log_debug("%s: wrote %s, the scheduler is %s", dev, name, s.current);
		return -EIO;
	}
	return 0;
}

int iosched_parse_ulong(const char *text, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*text < '0' || *text > '9')
		return -EBADMSG;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || (*end && strcmp(end, "\n")))
		return -EBADMSG;
	*out = v;
	return 0;
}

/* A number in queue/iosched/NAME of dev. */
static int read_tunable(const char *dev, const char *name, unsigned long *out)
{
	char path[64], buf[64];
	int r;

	snprintf(path, sizeof(path), "iosched/%s", name);
	r = read_queue_file(dev, path, buf, sizeof(buf));
	return r ? r : iosched_parse_ulong(buf, out);
}

int iosched_bfq_idling(const char *dev, struct iosched_idling *out)
{
	unsigned long ms;
	int r;

	r = read_tunable(dev, "slice_idle_us", &out->slice_idle_us);
	if (r == -ENOENT) {
		/* Kernels before 4.17 have only the milliseconds. */
		r = read_tunable(dev, "slice_idle", &ms);
		if (!r)
			out->slice_idle_us = ms * 1000;
	}
	if (r)
		return r;
	return read_tunable(dev, "timeout_sync", &out->timeout_sync_ms);
}

bool iosched_idling_note(const char *dev, const struct iosched_idling *idle, char *buf, size_t len)
{
	if (!idle->slice_idle_us)
		return false;
	snprintf(
		buf, len,
		"I/O weight on %s: bfq idles up to %lu us for a queue that runs dry (slice_idle) whenever two cgroups have I/O pending, at any weights, so a latency-critical service with sparse reads can wait up to bfq's slice (timeout_sync %lu ms) behind a best-effort reader, which an I/O weight cut does not shorten; echo 0 > /sys/block/%s/queue/iosched/slice_idle stops that (tailwarden leaves it as it is)",
		dev, idle->slice_idle_us, idle->timeout_sync_ms, dev);
	return true;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int iosched_devices(char ***out)
{
	DIR *d = opendir(SYS_BLOCK);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0;
	int r = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char path[sizeof(SYS_BLOCK) + 300], **nv;
		const char *name = de->d_name;

		if (!iosched_valid_name(name) || !strncmp(name, "loop", 4) ||
		    !strncmp(name, "ram", 3) || !strncmp(name, "zram", 4))
			continue;
		snprintf(path, sizeof(path), SYS_BLOCK "/%s/queue/scheduler", name);
		if (access(path, F_OK) < 0)
			continue;
		nv = realloc(v, (n + 2) * sizeof(*v));
		if (!nv) {
			r = -ENOMEM;
			break;
		}
		v = nv;
		v[n + 1] = NULL;
		if (!(v[n] = strdup(name))) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r) {
		iosched_devices_free(v);
		return r;
	}
	if (!v && !(v = calloc(1, sizeof(*v))))
		return -ENOMEM;
	qsort(v, n, sizeof(*v), by_name);
	*out = v;
	return 0;
}

void iosched_devices_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void __attribute__((format(printf, 3, 4)))
say(const struct iosched_setup *o, int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	o->say(o->userdata, level, line);
}

/* A disk on bfq: say if it idles (iosched_idling_note()). */
static void say_idling(struct iosched_setup *o, const char *dev)
{
	struct iosched_idling idle;
	char line[512];
	int r = iosched_bfq_idling(dev, &idle);

	if (r) {
		log_debug("%s: bfq's slice_idle/timeout_sync not read: %s", dev, strerror(-r));
		return;
	}
	if (iosched_idling_note(dev, &idle, line, sizeof(line)))
		say(o, LOG_NOTICE, "%s", line);
}

/* One disk: say whether I/O weight acts on it, switch it if asked. 1 switched, else 0. */
static int setup_one(struct iosched_setup *o, const char *dev)
{
	struct iosched now;
	char was[IOSCHED_NAME_MAX];
	int r;

	r = iosched_get(dev, &now);
	if (r == -ENOENT) {
		say(o, LOG_WARNING,
		    "I/O weight: %s is not a disk with an I/O scheduler (no /sys/block/%s/queue/scheduler)",
		    dev, dev);
		return 0;
	}
	if (r) {
		say(o, LOG_WARNING, "Failed to read /sys/block/%s/queue/scheduler: %s: %s", dev,
		    r == -EBADMSG ? "unexpected contents" : strerror(-r), strerror(-r));
		return 0;
	}
	if (o->n_seen < o->max_seen)
		snprintf(o->seen[o->n_seen++], IOSCHED_NAME_MAX, "%s", dev);
	if (!strcmp(now.current, "bfq")) {
		say(o, LOG_INFO, "I/O weight can act on %s: its scheduler is bfq%s", dev,
		    o->state && knob_state_has_iosched(o->state, dev) ?
			    " (switched by tailwarden)" :
			    "");
		say_idling(o, dev);
		return 0;
	}
	if (!o->want) {
		say(o, LOG_NOTICE,
		    "I/O weight has no effect on %s: its scheduler is %s; set IOScheduler=bfq to let tailwarden switch it while it runs",
		    dev, now.current);
		return 0;
	}
	if (!iosched_offers(&now, o->want)) {
		say(o, LOG_WARNING,
		    "I/O weight has no effect on %s: its scheduler is %s and it does not offer %s (is the bfq module available?); leaving it",
		    dev, now.current, o->want);
		return 0;
	}
	if (o->dry_run) {
		say(o, LOG_NOTICE,
		    "dry-run: would switch the I/O scheduler of %s from %s to %s; I/O weight has no effect on it meanwhile",
		    dev, now.current, o->want);
		return 0;
	}
	snprintf(was, sizeof(was), "%s", now.current);
	r = knob_state_write_iosched(o->state, dev, o->want);
	if (r) {
		say(o, LOG_ERR,
		    "Failed to switch the I/O scheduler of %s from %s to %s: %s; I/O weight has no effect on it",
		    dev, was, o->want, strerror(-r));
		return 0;
	}
	say(o, LOG_NOTICE,
	    "switched the I/O scheduler of %s from %s to %s while tailwarden runs: I/O weight can act on it",
	    dev, was, o->want);
	if (!strcmp(o->want, "bfq"))
		say_idling(o, dev);
	return 1;
}

int iosched_setup(struct iosched_setup *o)
{
	char **all = NULL, **devs = o->devs;
	int r, n = 0;

	o->n_seen = 0;
	if (!devs || !devs[0]) {
		r = iosched_devices(&all);
		if (r)
			return r;
		devs = all;
		if (!devs[0])
			say(o, LOG_NOTICE,
			    "I/O weight: no disk with an I/O scheduler in /sys/block");
	}
	for (size_t i = 0; devs[i]; i++)
		n += setup_one(o, devs[i]);
	iosched_devices_free(all);
	return n;
}

/* ---- the backend of IOScheduler= (record.h): a disk's scheduler, by name ---- */

static int iosched_rec(const struct knob_target *t, enum action_knob kind, struct knob_record *r)
{
	struct iosched now;
	int ret;

	(void)kind;
	ret = iosched_get(t->device, &now);
	if (ret)
		return ret;
	r->iosched.device = strdup(t->device);
	r->iosched.original = strdup(now.current);
	return r->iosched.device && r->iosched.original ? 0 : -ENOMEM;
}

static int iosched_wr(const struct knob_target *t, const struct knob_env *env,
		      struct knob_record *r, double value, const char *sval)
{
	(void)env;
	(void)r;
	(void)value;
	return iosched_set(t->device, sval);
}

static int iosched_written(const struct knob_target *t, struct knob_record *r, double value,
			   const char *sval)
{
	(void)t;
	(void)value;
	free(r->iosched.written);
	r->iosched.written = strdup(sval);
	r->has_written = r->iosched.written;
	return r->iosched.written ? 0 : -ENOMEM;
}

/* Still what we set, or already back; else someone picked another by hand. */
static int iosched_verify(const struct knob_env *env, struct knob_record *r, char *why,
			  size_t whylen)
{
	struct iosched now;
	int ret;

	(void)env;
	ret = iosched_get(r->iosched.device, &now);
	if (ret == -EMEDIUMTYPE)
		snprintf(why, whylen, "/sys/block/%s/queue/scheduler is not on sysfs",
			 r->iosched.device);
	if (ret)
		return ret;
	if (strcmp(now.current, r->iosched.original) && r->iosched.written &&
	    strcmp(now.current, r->iosched.written)) {
		snprintf(why, whylen, "its scheduler is %s, not %s as we set it", now.current,
			 r->iosched.written);
		return -ESTALE;
	}
	return 0;
}

static int iosched_restore(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			   void *userdata, char *why, size_t whylen)
{
	const char *dev = r->iosched.device, *orig = r->iosched.original;
	struct iosched now;
	char line[256];
	int ret;

	(void)env;
	ret = iosched_get(dev, &now);
	if (ret == -EMEDIUMTYPE)
		snprintf(why, whylen, "/sys/block/%s/queue/scheduler is not on sysfs", dev);
	if (ret)
		return ret;
	if (strcmp(now.current, orig)) {
		if (!iosched_offers(&now, orig)) {
			snprintf(why, whylen, "%s does not offer the scheduler %s", dev, orig);
			return -EBADMSG;
		}
		ret = iosched_set(dev, orig);
		if (ret) {
			snprintf(why, whylen, "failed to switch %s to %s: %s", dev, orig,
				 strerror(-ret));
			return ret;
		}
	}
	snprintf(line, sizeof(line), "/sys/block/%s/queue/scheduler: %s", dev, orig);
	if (fn)
		fn(userdata, line);
	return 0;
}

const struct knob_backend knob_backend_iosched = {
	.describe = "disk I/O schedulers",
	.record = iosched_rec,
	.write = iosched_wr,
	.written = iosched_written,
	.verify = iosched_verify,
	.restore = iosched_restore,
};
