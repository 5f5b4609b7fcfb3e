// SPDX-License-Identifier: GPL-2.0
/*
 * The state file: the original of every knob we changed, so that whatever
 * happens to the daemon (SIGTERM, a crash, kill -9) the host can be put
 * back. It is rewritten atomically (temporary file, fsync, rename, fsync
 * of the directory) before the first write of each knob, so a knob on disk
 * changed by us always has its original on disk too. Format:
 *
 *   { "version": 1,
 *     "knobs": [ { "cgroup_base": "/sys/fs/cgroup", "cgroup": "/be/hog",
 *                  "knob": "cpu.weight", "original": 100,
 *                  "written": 10,
 *                  "snapshot": { "files": [ { "path": ".../cpu.shares",
 *                                             "value": "1024", "written": "102" } ] } },
 *                { ..., "knob": "cpufreq", "original": 2000000,
 *                  "snapshot": { "cpus": [ { "cpu": 0, "max_khz": 2000000 } ] } } ] }
 *
 * "original" is in canonical units ("max" for no quota), for people; the
 * snapshot is what is written back, byte for byte. "written" is what we
 * wrote last (canonical beside "original", the file contents or
 * "written_khz" per CPU in the snapshot): a restore puts the original
 * back only while a file still holds that, and leaves a knob someone
 * else changed since alone. It is dropped (back to "unknown", restored
 * as before) just before each write and set again after it, so a crash
 * in between never leaves our own write looking like someone else's.
 * Records without it (older files) are restored as they are. A Unit= policy's knobs
 * are the unit's properties instead; their record names the unit, and the
 * snapshot the property and the bus it is set back on:
 *
 *                { ..., "knob": "cpu.weight", "unit": "web.service",
 *                  "snapshot": { "unit": "web.service", "property": "CPUWeight",
 *                                "value": 18446744073709551615,
 *                                "bus": "unix:path=/run/dbus/system_bus_socket" } }
 *
 * (UINT64_MAX is systemd's "not set", which a restore sets back too.)
 * A disk's I/O scheduler (IOScheduler=) belongs to no cgroup; its record
 * names the device, and "original" and "written" are scheduler names:
 *
 *                { "knob": "io.scheduler", "device": "vda",
 *                  "original": "mq-deadline", "written": "bfq" }
 *
 * A cgroup v2 controller we enabled (knob_state_enable_controller()) is a
 * change like a knob's: one record per cgroup.subtree_control written,
 * made before the write, with the file's contents before it ("original",
 * for people). A restore disables that one controller again ("-cpu"),
 * after every knob, deepest cgroup first, and leaves it enabled while a
 * child cgroup uses it (knob_subtree_restore()); a reload keeps them:
 *
 *                { "knob": "cgroup.subtree_control", "cgroup_base": "/sys/fs/cgroup",
 *                  "cgroup": "/system.slice", "controller": "cpu",
 *                  "original": "memory pids" }
 *
 * Slice= sets the EEVDF slice of each thread of the service (knob_slice.c):
 * its record names threads, each by tid and start time (field 22 of
 * /proc/TID/stat, so a tid reused by another thread is never touched),
 * with the thread's original slice (0: the kernel's default, restored with
 * 0) and the one we set. A thread whose slice someone else changed since
 * is marked "left_alone" and never touched again:
 *
 *                { "cgroup_base": "/sys/fs/cgroup", "cgroup": "/lc/web",
 *                  "knob": "sched.slice", "original": 0, "written": 1000000,
 *                  "snapshot": { "threads": [ { "tid": 4242, "start": 81234,
 *                                 "slice_ns": 0, "written_ns": 1000000 } ] } }
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/fileio.h"
#include "common/log.h"
#include "controller/iosched.h"
#include "controller/knob.h"
#include "controller/knob_slice.h"
#include "controller/knob_state.h"
#include "controller/unit.h"

#define STATE_VERSION 1

struct knob_state {
	char *dir, *path;
	struct json_object *knobs; /* array of records */
	knob_subtree_write_fn subtree_write; /* NULL: knob_subtree_write() */
	void *subtree_data;
};

static const char *str_of(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

#define STATE_MAX_BYTES (16u << 20)
#define VALUE_MAX 255

static bool has(struct json_object *o, const char *key, enum json_type type, struct json_object **v)
{
	return json_object_object_get_ex(o, key, v) && json_object_is_type(*v, type);
}

static bool int_in(struct json_object *o, const char *key, int64_t lo, int64_t hi)
{
	struct json_object *v;
	int64_t n;

	if (!has(o, key, json_type_int, &v))
		return false;
	errno = 0;
	n = json_object_get_int64(v);
	return !errno && n >= lo && n <= hi;
}

/* A value as a knob file holds it: short, printable, one line. */
static bool knob_value(const char *v)
{
	size_t n = strlen(v);

	if (!n || n > VALUE_MAX)
		return false;
	for (; *v; v++)
		if (*v < 0x20 || *v > 0x7e)
			return false;
	return true;
}

static bool known_knob(const char *name)
{
	for (int k = 0; k < KNOB_MAX; k++)
		if (!strcmp(action_knob_name(k), name))
			return true;
	return false;
}

#define IOSCHED_KNOB "io.scheduler"

static bool is_slice(struct json_object *e)
{
	const char *k = str_of(e, "knob");

	return k && !strcmp(k, "sched.slice");
}

/* One thread of a slice record: exactly these keys, in range. */
static bool slice_entry_ok(struct json_object *t)
{
	struct json_object *v;
	size_t keys = 4;

	if (!json_object_is_type(t, json_type_object) || !int_in(t, "tid", 1, KNOB_SLICE_TID_MAX) ||
	    !int_in(t, "start", 0, INT64_MAX) ||
	    !int_in(t, "written_ns", KNOB_SLICE_MIN_NS, KNOB_SLICE_MAX_NS))
		return false;
	if (!int_in(t, "slice_ns", 0, 0) &&
	    !int_in(t, "slice_ns", KNOB_SLICE_MIN_NS, KNOB_SLICE_MAX_NS))
		return false;
	if (json_object_object_get_ex(t, "left_alone", &v)) {
		if (!json_object_is_type(v, json_type_boolean))
			return false;
		keys++;
	}
	return (size_t)json_object_object_length(t) == keys;
}

static bool is_iosched(struct json_object *e)
{
	const char *k = str_of(e, "knob");

	return k && !strcmp(k, IOSCHED_KNOB);
}

#define SUBTREE_KNOB "cgroup.subtree_control"

static bool is_subtree(struct json_object *e)
{
	const char *k = str_of(e, "knob");

	return k && !strcmp(k, SUBTREE_KNOB);
}

/* A record of a controller we enabled: a clean cgroup below the root, cpu or io. */
static const char *check_subtree(struct json_object *e)
{
	const char *cg = str_of(e, "cgroup"), *c = str_of(e, "controller"), *o = str_of(e, "original");

	if (!str_of(e, "cgroup_base") || str_of(e, "cgroup_base")[0] != '/')
		return "\"cgroup_base\" is not an absolute path";
	if (!cg || cg[0] != '/' || !strcmp(cg, "/") || strstr(cg, "/../") || strstr(cg, "/./") ||
	    strstr(cg, "//") || (strlen(cg) >= 3 && !strcmp(cg + strlen(cg) - 3, "/..")) ||
	    (strlen(cg) >= 2 && !strcmp(cg + strlen(cg) - 2, "/.")) || cg[strlen(cg) - 1] == '/')
		return "\"cgroup\" is not a clean path of a cgroup below the root";
	if (!c || (strcmp(c, "cpu") && strcmp(c, "io")))
		return "\"controller\" is not \"cpu\" or \"io\"";
	if (!o || (*o && !knob_value(o)))
		return "\"original\" is not a short printable string";
	return NULL;
}

/*
 * Every field a restore will read, with its type and range: json-c
 * aborts the process on an array call on a non-array, and a state file
 * is input like any other. NULL when the record is sound, else what is
 * wrong with it.
 */
static const char *check_record(struct json_object *e)
{
	struct json_object *snap, *list, *v;
	const char *unit;

	if (!json_object_is_type(e, json_type_object))
		return "not an object";
	if (is_subtree(e))
		return check_subtree(e);
	if (is_iosched(e)) {
		if (!str_of(e, "device") || !iosched_valid_name(str_of(e, "device")))
			return "\"device\" is not a block device's name ([a-z0-9_-], 1 to 31 characters)";
		if (!str_of(e, "original") || !iosched_valid_name(str_of(e, "original")))
			return "\"original\" is not a scheduler's name";
		if (json_object_object_get_ex(e, "written", &v) &&
		    (!str_of(e, "written") || !iosched_valid_name(str_of(e, "written"))))
			return "\"written\" is not a scheduler's name";
		return NULL;
	}
	if (!str_of(e, "cgroup_base") || str_of(e, "cgroup_base")[0] != '/')
		return "\"cgroup_base\" is not an absolute path";
	if (!str_of(e, "cgroup"))
		return "\"cgroup\" is not a string";
	if (!str_of(e, "knob") || !known_knob(str_of(e, "knob")))
		return "\"knob\" is not a knob's name";
	if (!has(e, "snapshot", json_type_object, &snap))
		return "\"snapshot\" is not an object";
	unit = str_of(e, "unit");
	if (json_object_object_get_ex(e, "unit", &v) && !unit)
		return "\"unit\" is not a string";
	if (is_slice(e)) {
		if (unit)
			return "a \"sched.slice\" record names threads, not a unit";
		if (!has(snap, "threads", json_type_array, &list) || json_object_object_length(snap) != 1)
			return "\"snapshot\" of a \"sched.slice\" record is not {\"threads\": [...]}";
		for (size_t i = 0; i < json_object_array_length(list); i++)
			if (!slice_entry_ok(json_object_array_get_idx(list, i)))
				return "an entry of \"snapshot.threads\" is not {\"tid\": 1-4194304, \"start\": an integer >= 0, \"slice_ns\": 0 or 100000-100000000, \"written_ns\": 100000-100000000[, \"left_alone\": a boolean]}";
		return NULL;
	}
	if (json_object_object_get_ex(snap, "threads", &v))
		return "\"snapshot.threads\" in a record that is not \"sched.slice\"";
	if (unit) {
		if (!str_of(snap, "unit") || strcmp(str_of(snap, "unit"), unit))
			return "\"snapshot.unit\" is not the record's unit";
		if (!str_of(snap, "property") || !str_of(snap, "bus"))
			return "\"snapshot.property\" or \"snapshot.bus\" is not a string";
		if (!has(snap, "value", json_type_int, &v))
			return "\"snapshot.value\" is not an integer";
		return NULL;
	}
	if (json_object_object_get_ex(snap, "cpus", &list)) {
		if (!json_object_is_type(list, json_type_array))
			return "\"snapshot.cpus\" is not an array";
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			struct json_object *c = json_object_array_get_idx(list, i);

			if (!json_object_is_type(c, json_type_object) ||
			    !int_in(c, "cpu", 0, 65535) || !int_in(c, "max_khz", 1, INT32_MAX) ||
			    (json_object_object_get_ex(c, "written_khz", &v) && !int_in(c, "written_khz", 1, INT32_MAX)))
				return "an entry of \"snapshot.cpus\" is not {\"cpu\": 0-65535, \"max_khz\": a positive integer}";
		}
		return NULL;
	}
	if (!has(snap, "files", json_type_array, &list))
		return "\"snapshot\" has neither a \"files\" nor a \"cpus\" array";
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *f = json_object_array_get_idx(list, i);

		if (!json_object_is_type(f, json_type_object) || !str_of(f, "path") ||
		    str_of(f, "path")[0] != '/' || !str_of(f, "value") || !knob_value(str_of(f, "value")) ||
		    (json_object_object_get_ex(f, "written", &v) && (!str_of(f, "written") || !knob_value(str_of(f, "written")))))
			return "an entry of \"snapshot.files\" is not {\"path\": an absolute path, \"value\": a short printable string}";
	}
	return NULL;
}

int knob_state_parse(const char *text, size_t len, const char *name, struct json_object **out)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *root, *knobs;
	enum json_tokener_error err;
	const char *why;

	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, text, len);
	err = json_tokener_get_error(tok);
	if (!root || err != json_tokener_success || (size_t)json_tokener_get_parse_end(tok) < len) {
		if (root && err == json_tokener_success) {
			/* Trailing text after the object: only white space may follow. */
			size_t i = json_tokener_get_parse_end(tok);

			while (i < len && strchr(" \t\r\n", text[i]))
				i++;
			if (i == len)
				goto parsed;
			log_error("%s: byte %zu: text after the state object", name, i);
		} else {
			log_error("%s: byte %zu: %s", name, (size_t)json_tokener_get_parse_end(tok),
				  err == json_tokener_continue ? "the file ends inside the JSON"
							       : json_tokener_error_desc(err));
		}
		json_object_put(root);
		json_tokener_free(tok);
		return -EBADMSG;
	}
parsed:
	json_tokener_free(tok);
	if (!json_object_is_type(root, json_type_object) ||
	    !has(root, "knobs", json_type_array, &knobs)) {
		log_error("%s: not a tailwarden state file (no \"knobs\" array)", name);
		json_object_put(root);
		return -EBADMSG;
	}
	if (json_object_object_get_ex(root, "version", &knobs) &&
	    !int_in(root, "version", STATE_VERSION, STATE_VERSION)) {
		log_error("%s: \"version\" is not %d", name, STATE_VERSION);
		json_object_put(root);
		return -EBADMSG;
	}
	has(root, "knobs", json_type_array, &knobs);
	for (size_t i = 0; i < json_object_array_length(knobs); i++) {
		why = check_record(json_object_array_get_idx(knobs, i));
		if (why) {
			log_error("%s: knobs[%zu]: %s", name, i, why);
			json_object_put(root);
			return -EBADMSG;
		}
	}
	*out = json_object_get(knobs);
	json_object_put(root);
	return 0;
}

/*
 * Read the state file: a regular file only (a FIFO would block open()
 * and read() for ever; O_NONBLOCK and fstat() refuse it), not through a
 * symbolic link, of a bounded size.
 */
static int load(struct knob_state *s)
{
	struct json_object *knobs;
	struct stat st;
	char *buf;
	ssize_t n;
	size_t len = 0;
	int fd, r;

	fd = open(s->path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ELOOP) {
			log_error("%s is a symbolic link; refusing it", s->path);
			return -EBADMSG;
		}
		return -errno;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > STATE_MAX_BYTES) {
		log_error("%s is %s; refusing it", s->path,
			  S_ISREG(st.st_mode) ? "larger than 16 MiB" : "not a regular file");
		close(fd);
		return -EBADMSG;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < (size_t)st.st_size && (n = read(fd, buf + len, st.st_size - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			free(buf);
			close(fd);
			return r;
		}
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	r = knob_state_parse(buf, len, s->path, &knobs);
	free(buf);
	if (r)
		return r;
	json_object_put(s->knobs);
	s->knobs = knobs;
	return 0;
}

int knob_state_open(const char *dir, struct knob_state **out)
{
	struct knob_state *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dir = strdup(dir);
	s->knobs = json_object_new_array();
	if (!s->dir || !s->knobs || asprintf(&s->path, "%s/" TW_STATE_FILE, dir) < 0) {
		s->path = NULL;
		knob_state_free(s);
		return -ENOMEM;
	}
	r = load(s);
	if (r) {
		knob_state_free(s);
		return r;
	}
	*out = s;
	return 0;
}

void knob_state_free(struct knob_state *s)
{
	if (!s)
		return;
	json_object_put(s->knobs);
	free(s->dir);
	free(s->path);
	free(s);
}

static int mkdir_p(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (char *c = p + 1;; c++) {
		char save = *c;

		if (save != '/' && save)
			continue;
		*c = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
		*c = save;
		if (!save)
			return 0;
	}
}

int knob_state_dir(const char *dir, bool create, const char **why)
{
	struct stat st;
	int r;

	*why = NULL;
	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT || !create)
			return -errno;
		/* Parents as any directory, the state directory itself private. */
		r = mkdir_p(dir);
		if (r < 0)
			return r;
		if (chmod(dir, 0700) < 0 || lstat(dir, &st) < 0)
			return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		*why = "is a symbolic link";
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		*why = "is not a directory";
		return -ENOTDIR;
	}
	if (st.st_uid != 0) {
		*why = "is not owned by root";
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		*why = "is writable by group or others";
		return -EPERM;
	}
	return 0;
}

/* Put the records on disk, or remove the file when there are none. */
static int save(struct knob_state *s)
{
	struct json_object *root;
	const char *text, *why;
	int r;

	if (json_object_array_length(s->knobs) == 0) {
		if (unlink(s->path) < 0)
			return errno == ENOENT ? 0 : -errno;
		return fileio_sync_dir(s->dir);
	}
	r = knob_state_dir(s->dir, true, &why);
	if (r)
		return r;
	root = json_object_new_object();
	if (!root || json_object_object_add(root, "version", json_object_new_int(STATE_VERSION)) ||
	    json_object_object_add(root, "knobs", json_object_get(s->knobs))) {
		json_object_put(root);
		return -ENOMEM;
	}
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	r = text ? fileio_replace(s->dir, TW_STATE_FILE, text, true) : -ENOMEM;
	json_object_put(root);
	return r;
}

static int find(const struct knob_state *s, const char *base, const char *rel,
		enum action_knob kind)
{
	for (size_t i = 0; i < json_object_array_length(s->knobs); i++) {
		struct json_object *e = json_object_array_get_idx(s->knobs, i);

		if (str_of(e, "unit") || is_iosched(e) || is_subtree(e))
			continue;
		if (!strcmp(str_of(e, "cgroup_base"), base) && !strcmp(str_of(e, "cgroup"), rel) &&
		    !strcmp(str_of(e, "knob"), action_knob_name(kind)))
			return i;
	}
	return -1;
}

/*
 * Add the record e (taken over, freed on failure) and save: recorded on
 * disk before its knob is written. 0 or -errno; on an error it is not
 * recorded, and the caller must not write.
 */
static int record_append(struct knob_state *s, struct json_object *e)
{
	int r;

	if (json_object_array_add(s->knobs, e)) {
		json_object_put(e);
		return -ENOMEM;
	}
	r = save(s);
	if (r)
		json_object_array_del_idx(s->knobs, json_object_array_length(s->knobs) - 1, 1);
	return r;
}

static struct json_object *new_record(const char *base, const char *rel, enum action_knob kind,
				      double original, struct json_object *snap)
{
	struct json_object *e = json_object_new_object();
	char num[32];

	snprintf(num, sizeof(num), "%.9g", original);
	if (!e || json_object_object_add(e, "cgroup_base", json_object_new_string(base)) ||
	    json_object_object_add(e, "cgroup", json_object_new_string(rel)) ||
	    json_object_object_add(e, "knob", json_object_new_string(action_knob_name(kind))) ||
	    json_object_object_add(e, "original", isfinite(original) ? json_object_new_double_s(original, num)
								       : json_object_new_string("max")) ||
	    json_object_object_add(e, "snapshot", snap)) {
		json_object_put(e);
		return NULL;
	}
	return e;
}

int knob_state_record(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind, double original)
{
	struct json_object *snap = NULL, *e;
	struct knobs *k;
	int r;

	if (find(s, cgroup_base, rel, kind) >= 0)
		return 0;
	r = knobs_open(cgroup_base, rel, &k);
	if (r)
		return r;
	r = knob_snapshot(k, kind, &snap);
	knobs_free(k);
	if (r)
		return r;
	e = new_record(cgroup_base, rel, kind, original, snap);
	if (!e)
		return -ENOMEM;
	return record_append(s, e);
}

/* Drop every "written" of a record: what the file holds is unknown now. */
static void strip_written(struct json_object *e)
{
	struct json_object *snap, *list;

	json_object_object_del(e, "written");
	if (!json_object_object_get_ex(e, "snapshot", &snap))
		return;
	if (json_object_object_get_ex(snap, "files", &list))
		for (size_t i = 0; i < json_object_array_length(list); i++)
			json_object_object_del(json_object_array_get_idx(list, i), "written");
	if (json_object_object_get_ex(snap, "cpus", &list))
		for (size_t i = 0; i < json_object_array_length(list); i++)
			json_object_object_del(json_object_array_get_idx(list, i), "written_khz");
}

static bool has_written(struct json_object *e)
{
	return json_object_object_get_ex(e, "written", NULL);
}

/* Copy what the files hold now (a fresh snapshot) into the record as "written". */
static int mark_written(struct json_object *e, struct json_object *now, double value)
{
	struct json_object *snap, *list, *nlist;
	char num[32];
	bool cpus;

	snprintf(num, sizeof(num), "%.9g", value);
	if (json_object_object_add(e, "written", isfinite(value) ? json_object_new_double_s(value, num)
								 : json_object_new_string("max")))
		return -ENOMEM;
	json_object_object_get_ex(e, "snapshot", &snap);
	cpus = json_object_object_get_ex(snap, "cpus", &list);
	if (!cpus && !json_object_object_get_ex(snap, "files", &list))
		return -EBADMSG;
	if (!json_object_object_get_ex(now, cpus ? "cpus" : "files", &nlist))
		return -EBADMSG;
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *f = json_object_array_get_idx(list, i), *v, *k;
		const char *key = cpus ? "cpu" : "path";

		json_object_object_get_ex(f, key, &k);
		for (size_t j = 0; j < json_object_array_length(nlist); j++) {
			struct json_object *g = json_object_array_get_idx(nlist, j), *gk;

			if (!json_object_object_get_ex(g, key, &gk) || !json_object_equal(k, gk) ||
			    !json_object_object_get_ex(g, cpus ? "max_khz" : "value", &v))
				continue;
			if (json_object_object_add(f, cpus ? "written_khz" : "written", json_object_get(v)))
				return -ENOMEM;
			break;
		}
	}
	return 0;
}

int knob_state_write(struct knob_state *s, const char *cgroup_base, const char *rel,
		     enum action_knob kind, struct knobs *k, double original, double value)
{
	struct json_object *e, *now;
	int i, r;

	r = knob_state_record(s, cgroup_base, rel, kind, original);
	if (r)
		return r;
	i = find(s, cgroup_base, rel, kind);
	if (i < 0)
		return -ENOENT;
	e = json_object_array_get_idx(s->knobs, i);
	if (has_written(e)) {
		strip_written(e);
		r = save(s);
		if (r) /* the file may still say what we wrote before: do not write */
			return r;
	}
	r = knob_write(k, kind, value);
	if (r)
		return r;
	/* Not on disk: the record stays "unknown" and is restored as before. */
	if (knob_snapshot(k, kind, &now) == 0) {
		r = mark_written(e, now, value);
		json_object_put(now);
		if (r || (r = save(s))) {
			strip_written(e);
			log_debug_errno(r, "Failed to record the value written to %s of %s: %m", action_knob_name(kind), rel);
		}
	}
	return 0;
}

int knob_state_forget(struct knob_state *s, const char *cgroup_base, const char *rel,
		      enum action_knob kind)
{
	int i = find(s, cgroup_base, rel, kind);

	if (i < 0)
		return 0;
	json_object_array_del_idx(s->knobs, i, 1);
	return save(s);
}

static int find_unit(const struct knob_state *s, const char *unit, enum action_knob kind)
{
	for (size_t i = 0; i < json_object_array_length(s->knobs); i++) {
		struct json_object *e = json_object_array_get_idx(s->knobs, i);
		const char *u = str_of(e, "unit");

		if (u && !strcmp(u, unit) && !strcmp(str_of(e, "knob"), action_knob_name(kind)))
			return i;
	}
	return -1;
}

static struct json_object *unit_snapshot(const char *bus, const char *unit, enum action_knob kind,
					 uint64_t raw)
{
	struct json_object *o = json_object_new_object();

	if (!o || json_object_object_add(o, "unit", json_object_new_string(unit)) ||
	    json_object_object_add(o, "property", json_object_new_string(unit_property(kind))) ||
	    json_object_object_add(o, "value", json_object_new_uint64(raw)) ||
	    json_object_object_add(o, "bus", json_object_new_string(bus))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

int knob_state_record_unit(struct knob_state *s, const char *bus_address, const char *unit,
			   const char *cgroup_base, const char *rel, enum action_knob kind,
			   double original, uint64_t raw)
{
	struct json_object *snap, *e;

	if (!unit_property(kind))
		return -EOPNOTSUPP;
	if (find_unit(s, unit, kind) >= 0)
		return 0;
	snap = unit_snapshot(bus_address, unit, kind, raw);
	if (!snap)
		return -ENOMEM;
	e = new_record(cgroup_base, rel, kind, original, snap);
	if (!e || json_object_object_add(e, "unit", json_object_new_string(unit))) {
		json_object_put(e);
		return -ENOMEM;
	}
	return record_append(s, e);
}

int knob_state_forget_unit(struct knob_state *s, const char *unit, enum action_knob kind)
{
	int i = find_unit(s, unit, kind);

	if (i < 0)
		return 0;
	json_object_array_del_idx(s->knobs, i, 1);
	return save(s);
}

/* Set a unit's property back, on the bus it was changed on. -ENOENT: unit gone. */
static int unit_snapshot_restore(struct json_object *snap, knob_report_fn fn, void *userdata)
{
	const char *unit = str_of(snap, "unit"), *prop = str_of(snap, "property");
	const char *bus = str_of(snap, "bus"), *why = NULL;
	struct json_object *v;
	struct unit_bus *b;
	enum action_knob kind = KNOB_MAX;
	char line[512];
	uint64_t raw;
	int r;

	for (int k = 0; k < KNOB_MAX; k++)
		if (unit_property(k) && prop && !strcmp(unit_property(k), prop))
			kind = k;
	if (!unit || !bus || kind == KNOB_MAX || !json_object_object_get_ex(snap, "value", &v))
		return -EBADMSG;
	raw = json_object_get_uint64(v);
	r = unit_bus_open(CONFIG_BUS_AUTO, *bus ? bus : NULL, &b, &why);
	if (r) {
		log_debug("%s", why);
		return r == -ENOENT ? -ECONNREFUSED : r; /* no bus is not "unit gone" */
	}
	r = unit_set(b, unit, kind, raw);
	unit_bus_free(b);
	if (r)
		return r;
	if (raw == UINT64_MAX)
		snprintf(line, sizeof(line), "%s %s: reset (not set)", unit, prop);
	else
		snprintf(line, sizeof(line), "%s %s: %llu", unit, prop, (unsigned long long)raw);
	if (fn)
		fn(userdata, line);
	return 0;
}

static void why_say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static int64_t i64(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

static void fmt_slice(char *buf, size_t len, int64_t ns)
{
	action_format_value(buf, len, KNOB_SCHED_SLICE, (double)ns, 0);
}

/*
 * Put back the slice of each thread of a record: only the same thread
 * (tid and start time), only a fair one, only while it has the slice we
 * set. A thread gone is fine. 0, or the -errno of the first failure.
 */
static int slice_restore(struct json_object *e, knob_report_fn fn, void *userdata, char *why,
			 size_t whylen)
{
	struct json_object *snap, *list;
	char line[256], a[24], b[24];
	int first = 0;

	json_object_object_get_ex(e, "snapshot", &snap);
	json_object_object_get_ex(snap, "threads", &list);
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *t = json_object_array_get_idx(list, i), *v;
		pid_t tid = (pid_t)i64(t, "tid");
		int64_t orig = i64(t, "slice_ns"), wrote = i64(t, "written_ns");
		struct knob_slice_attr at;
		uint64_t start;
		int r;

		line[0] = '\0';
		if (json_object_object_get_ex(t, "left_alone", &v) && json_object_get_boolean(v))
			continue;
		r = knob_slice_thread_start(tid, &start);
		if (r == -ESRCH)
			continue; /* gone: nothing to undo */
		if (!r && (int64_t)start != i64(t, "start")) {
			snprintf(line, sizeof(line), "thread %d: another thread now (start time %llu, recorded %lld), left alone",
				 (int)tid, (unsigned long long)start, (long long)i64(t, "start"));
		} else if (!r && !(r = knob_slice_get(tid, &at)) && !knob_slice_fair(&at)) {
			snprintf(line, sizeof(line), "thread %d: no longer SCHED_OTHER or SCHED_BATCH, left alone", (int)tid);
		} else if (!r && (int64_t)at.runtime != wrote) {
			fmt_slice(a, sizeof(a), (int64_t)at.runtime);
			fmt_slice(b, sizeof(b), wrote);
			snprintf(line, sizeof(line), "thread %d: slice %s, we set %s: left alone", (int)tid, a, b);
		} else if (!r) {
			r = knob_slice_set(tid, &at, (uint64_t)orig);
			fmt_slice(a, sizeof(a), wrote);
			fmt_slice(b, sizeof(b), orig);
			if (!r)
				snprintf(line, sizeof(line), "thread %d: slice %s -> %s", (int)tid, a, b);
		}
		if (r == -ESRCH)
			continue;
		if (r) {
			if (!first)
				why_say(why, whylen, "thread %d: %s", (int)tid, strerror(-r));
			first = first ? first : r;
			continue;
		}
		log_debug("%s: %s", str_of(e, "cgroup"), line);
		if (fn) {
			char full[512];

			snprintf(full, sizeof(full), "sched.slice of %s: %s", str_of(e, "cgroup"), line);
			log_make_printable(full);
			fn(userdata, full);
		}
	}
	return first;
}

static int snapshot_restore(struct json_object *e, knob_report_fn fn, void *userdata, char *why,
			    size_t whylen)
{
	struct json_object *snap;

	json_object_object_get_ex(e, "snapshot", &snap);
	if (is_slice(e))
		return slice_restore(e, fn, userdata, why, whylen);
	if (str_of(snap, "unit"))
		return unit_snapshot_restore(snap, fn, userdata);
	return knob_snapshot_restore(str_of(e, "cgroup_base"), str_of(e, "cgroup"),
				     action_knob_from_name(str_of(e, "knob")), snap, fn, userdata, why, whylen);
}

int knob_state_renew(struct knob_state *s, const char *cgroup_base, const char *rel,
		     const char *unit)
{
	int n = 0, first = 0, r;

	for (size_t i = json_object_array_length(s->knobs); i-- > 0;) {
		struct json_object *e = json_object_array_get_idx(s->knobs, i), *snap;
		const char *u = str_of(e, "unit");

		/* Not the cgroup's own: the frequency, disks, its ancestors' controllers. */
		if (!strcmp(str_of(e, "knob"), action_knob_name(KNOB_CPU_FREQ)) || is_iosched(e) || is_subtree(e))
			continue;
		if (unit ? !u || strcmp(u, unit)
			 : u || strcmp(str_of(e, "cgroup_base"), cgroup_base) || strcmp(str_of(e, "cgroup"), rel))
			continue;
		if (is_slice(e)) /* threads outlive their cgroup: theirs again */
			slice_restore(e, NULL, NULL, NULL, 0);
		if (unit) {
			json_object_object_get_ex(e, "snapshot", &snap);
			r = unit_snapshot_restore(snap, NULL, NULL);
			if (r && r != -ENOENT) {
				first = first ? first : r;
				continue;
			}
		}
		json_object_array_del_idx(s->knobs, i, 1);
		n++;
	}
	r = n ? save(s) : 0;
	return first ? first : r ? r : n;
}

static void say(knob_report_fn fn, void *userdata, struct json_object *e, const char *what)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s of %s: %s", str_of(e, "knob"),
		 str_of(e, "unit") ? str_of(e, "unit") : is_iosched(e) ? str_of(e, "device") : str_of(e, "cgroup"),
		 what);
	log_make_printable(line);
	log_debug("%s", line);
	if (fn)
		fn(userdata, line);
}

/* Are a and b the same directory path, give or take trailing slashes? */
static bool same_base(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);

	while (n > 1 && a[n - 1] == '/')
		n--;
	while (m > 1 && b[m - 1] == '/')
		m--;
	return n == m && !strncmp(a, b, n);
}

/*
 * Put a disk's scheduler back: only a name the device offers, and only
 * while it still runs what we wrote (else -ESTALE). -ENOENT: device gone.
 */
static int iosched_restore(struct json_object *e, knob_report_fn fn, void *userdata, char *why,
			   size_t whylen)
{
	const char *dev = str_of(e, "device"), *orig = str_of(e, "original"), *written = str_of(e, "written");
	struct iosched now;
	char line[256];
	int r;

	r = iosched_get(dev, &now);
	if (r == -EMEDIUMTYPE)
		snprintf(why, whylen, "/sys/block/%s/queue/scheduler is not on sysfs", dev);
	if (r)
		return r;
	if (strcmp(now.current, orig)) {
		if (written && strcmp(now.current, written)) {
			snprintf(why, whylen, "its scheduler is %s, not %s as we set it", now.current, written);
			return -ESTALE;
		}
		if (!iosched_offers(&now, orig)) {
			snprintf(why, whylen, "%s does not offer the scheduler %s", dev, orig);
			return -EBADMSG;
		}
		r = iosched_set(dev, orig);
		if (r) {
			snprintf(why, whylen, "failed to switch %s to %s: %s", dev, orig, strerror(-r));
			return r;
		}
	}
	snprintf(line, sizeof(line), "/sys/block/%s/queue/scheduler: %s", dev, orig);
	if (fn)
		fn(userdata, line);
	return 0;
}

static int find_iosched(const struct knob_state *s, const char *dev)
{
	for (size_t i = 0; i < json_object_array_length(s->knobs); i++) {
		struct json_object *e = json_object_array_get_idx(s->knobs, i);

		if (is_iosched(e) && !strcmp(str_of(e, "device"), dev))
			return i;
	}
	return -1;
}

bool knob_state_has_iosched(const struct knob_state *s, const char *dev)
{
	return find_iosched(s, dev) >= 0;
}

const char *knob_state_iosched_original(const struct knob_state *s, const char *dev)
{
	int i = find_iosched(s, dev);

	return i < 0 ? NULL : str_of(json_object_array_get_idx(s->knobs, i), "original");
}

int knob_state_write_iosched(struct knob_state *s, const char *dev, const char *name)
{
	struct json_object *e;
	struct iosched now;
	int i, r;

	i = find_iosched(s, dev);
	if (i < 0) {
		r = iosched_get(dev, &now);
		if (r)
			return r;
		e = json_object_new_object();
		if (!e || json_object_object_add(e, "knob", json_object_new_string(IOSCHED_KNOB)) ||
		    json_object_object_add(e, "device", json_object_new_string(dev)) ||
		    json_object_object_add(e, "original", json_object_new_string(now.current))) {
			json_object_put(e);
			return -ENOMEM;
		}
		r = record_append(s, e);
		if (r)
			return r;
		i = json_object_array_length(s->knobs) - 1;
	}
	e = json_object_array_get_idx(s->knobs, i);
	if (has_written(e)) {
		json_object_object_del(e, "written");
		r = save(s);
		if (r)
			return r;
	}
	r = iosched_set(dev, name);
	if (r)
		return r;
	if (json_object_object_add(e, "written", json_object_new_string(name)) || (r = save(s))) {
		json_object_object_del(e, "written");
		log_debug_errno(r, "Failed to record the scheduler written to %s: %m", dev);
	}
	return 0;
}

/* ---- controllers we enabled (cgroup.subtree_control) ---- */

/* Is word one of the space-separated words of list? */
static bool listed(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
			return true;
	return false;
}

void knob_state_subtree_writer(struct knob_state *s, knob_subtree_write_fn fn, void *userdata)
{
	s->subtree_write = fn;
	s->subtree_data = userdata;
}

static int subtree_write(struct knob_state *s, const char *base, const char *cg, const char *change)
{
	return (s->subtree_write ? s->subtree_write : knob_subtree_write)(s->subtree_data, base, cg, change);
}

static int find_subtree(const struct knob_state *s, const char *base, const char *cg, const char *ctrl)
{
	for (size_t i = 0; i < json_object_array_length(s->knobs); i++) {
		struct json_object *e = json_object_array_get_idx(s->knobs, i);

		if (is_subtree(e) && same_base(str_of(e, "cgroup_base"), base) &&
		    !strcmp(str_of(e, "cgroup"), cg) && !strcmp(str_of(e, "controller"), ctrl))
			return i;
	}
	return -1;
}

/* Recorded on disk before the write; *added when this call made the record. */
static int subtree_record(struct knob_state *s, const char *base, const char *cg, const char *ctrl,
			  const char *original, bool *added)
{
	struct json_object *e;
	int r;

	*added = false;
	if (find_subtree(s, base, cg, ctrl) >= 0)
		return 0;
	e = json_object_new_object();
	if (!e || json_object_object_add(e, "knob", json_object_new_string(SUBTREE_KNOB)) ||
	    json_object_object_add(e, "cgroup_base", json_object_new_string(base)) ||
	    json_object_object_add(e, "cgroup", json_object_new_string(cg)) ||
	    json_object_object_add(e, "controller", json_object_new_string(ctrl)) ||
	    json_object_object_add(e, "original", json_object_new_string(original))) {
		json_object_put(e);
		return -ENOMEM;
	}
	r = record_append(s, e);
	if (r)
		return r;
	*added = true;
	return 0;
}

/*
 * A write failed half-way: disable again, deepest first, what this call
 * enabled (the prefixes of rel from n0 to n), and drop the records it
 * made (bit i of added: the i-th cgroup from n0).
 */
static void subtree_undo(struct knob_state *s, const char *base, const char *rel, size_t n0, size_t n,
			 const char *ctrl, const bool *added, size_t count)
{
	char cg[PATH_MAX], change[8];
	int i;

	snprintf(change, sizeof(change), "-%s", ctrl);
	for (size_t k = count; k-- > 0;) {
		snprintf(cg, sizeof(cg), "%.*s", (int)n, rel);
		if (subtree_write(s, base, cg, change))
			log_debug("%s%s: could not disable %s again", base, cg, ctrl);
		i = find_subtree(s, base, cg, ctrl);
		if (added[k] && i >= 0)
			json_object_array_del_idx(s->knobs, i, 1);
		while (n > n0 && rel[--n] != '/')
			;
	}
	if (save(s))
		log_debug("Failed to drop the records of %s undone from the state file", ctrl);
}

int knob_state_enable_controller(struct knob_state *s, const char *cgroup_base, const char *rel,
				 const char *ctrl, knob_report_fn fn, void *userdata, char *why,
				 size_t whylen)
{
	char from[PATH_MAX], cg[PATH_MAX], before[1024], after[1024], change[8], line[PATH_MAX + 2200];
	size_t n0, n, count = 0, depth = 1;
	const char *next;
	bool *added;
	int r;

	r = knob_subtree_plan(cgroup_base, rel, ctrl, from, sizeof(from), why, whylen);
	if (r || !*from)
		return r;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	added = calloc(depth, sizeof(*added));
	if (!added)
		return -ENOMEM;
	snprintf(change, sizeof(change), "+%s", ctrl);
	/* Top-down: a cgroup can give only what its parent gives it. */
	for (n0 = n = strlen(from);; n = next - rel) {
		snprintf(cg, sizeof(cg), "%.*s", (int)n, rel);
		r = knob_cgroup_read(cgroup_base, cg, "cgroup.subtree_control", before, sizeof(before));
		if (!r)
			r = subtree_record(s, cgroup_base, cg, ctrl, before, &added[count]);
		if (!r)
			r = subtree_write(s, cgroup_base, cg, change);
		if (!r)
			r = knob_cgroup_read(cgroup_base, cg, "cgroup.subtree_control", after, sizeof(after));
		if (!r && !listed(after, ctrl))
			r = -EIO;
		if (r) {
			if (why && whylen)
				snprintf(why, whylen, "%s%s/cgroup.subtree_control: enabling %s failed: %s%s",
					 cgroup_base, cg, ctrl,
					 r == -EBUSY ? "it has processes of its own now (\"no internal processes\")"
						     : strerror(-r),
					 count ? "; the cgroups above it were put back" : "");
			/* this one, if written, and those above it */
			subtree_undo(s, cgroup_base, rel, n0, n, ctrl, added, count + 1);
			free(added);
			return r;
		}
		count++;
		snprintf(line, sizeof(line), "%s%s/cgroup.subtree_control: \"%s\" -> \"%s\"", cgroup_base, cg,
			 before, after);
		log_make_printable(line);
		log_debug("%s", line);
		if (fn)
			fn(userdata, line);
		next = strchr(rel + n + 1, '/');
		if (!next)
			break;
	}
	free(added);
	return 0;
}

static int subtree_restore(struct knob_state *s, struct json_object *e, knob_report_fn fn,
			   void *userdata, char *why, size_t whylen)
{
	return knob_subtree_restore(str_of(e, "cgroup_base"), str_of(e, "cgroup"), str_of(e, "controller"),
				    s->subtree_write, s->subtree_data, fn, userdata, why, whylen);
}

/*
 * Every knob first (a knob's file goes with its controller), then the
 * controllers we enabled, deepest first (a cgroup cannot drop what a
 * child still has in its subtree_control): records are added top-down.
 */
static size_t restore_order(struct knob_state *s, size_t i)
{
	size_t n = json_object_array_length(s->knobs), plain = 0, k;

	for (k = 0; k < n; k++)
		plain += !is_subtree(json_object_array_get_idx(s->knobs, k));
	if (i < plain) {
		for (k = 0;; k++)
			if (!is_subtree(json_object_array_get_idx(s->knobs, k)) && !i--)
				return k;
	}
	i -= plain;
	for (k = n; k-- > 0;)
		if (is_subtree(json_object_array_get_idx(s->knobs, k)) && !i--)
			break;
	return k;
}

static int restore_all(struct knob_state *s, const char *cgroup_base, bool keep_iosched,
		       knob_report_fn fn, void *userdata, int *left_alone)
{
	struct json_object *failed = json_object_new_array();
	int restored = 0, first = 0, r;
	char why[PATH_MAX + 256], what[PATH_MAX + 300];

	if (!failed)
		return -ENOMEM;
	if (left_alone)
		*left_alone = 0;
	for (size_t j = 0; j < json_object_array_length(s->knobs); j++) {
		size_t i = restore_order(s, j);
		struct json_object *e = json_object_array_get_idx(s->knobs, i);

		why[0] = '\0';
		if ((is_iosched(e) || is_subtree(e)) && keep_iosched) {
			r = -EAGAIN;
		} else if (is_iosched(e)) {
			r = iosched_restore(e, fn, userdata, why, sizeof(why));
		/* A frequency record names CPUs, not files under a root: no root to check. */
		/* Nor a slice record: it names threads (tid and start time). */
		} else if (cgroup_base && !same_base(str_of(e, "cgroup_base"), cgroup_base) &&
		    strcmp(str_of(e, "knob"), action_knob_name(KNOB_CPU_FREQ)) && !is_slice(e)) {
			snprintf(why, sizeof(why), "recorded for the cgroup root %s, not CgroupBase=%s; refusing it",
				 str_of(e, "cgroup_base"), cgroup_base);
			r = -EXDEV;
		} else if (is_subtree(e)) {
			r = subtree_restore(s, e, fn, userdata, why, sizeof(why));
		} else {
			r = snapshot_restore(e, fn, userdata, why, sizeof(why));
		}
		if (r == -ENOENT) {
			say(fn, userdata, e, str_of(e, "unit") ? "unit gone, nothing to restore"
					     : is_iosched(e) ? "device gone, nothing to restore"
							     : "cgroup gone, nothing to restore");
			r = 0;
		}
		if (r == -EAGAIN) { /* kept as it is */
			if (json_object_array_add(failed, json_object_get(e))) {
				json_object_put(e);
				json_object_put(failed);
				return -ENOMEM;
			}
			continue;
		}
		if (r == -ESTALE) {
			if (is_subtree(e))
				snprintf(what, sizeof(what), "%s", why);
			else
				snprintf(what, sizeof(what), "left alone: changed by someone else since (%s)", why);
			say(fn, userdata, e, what);
			if (left_alone)
				(*left_alone)++;
			continue;
		}
		if (!r) {
			restored++;
			continue;
		}
		snprintf(what, sizeof(what), "not restored: knobs[%zu]: %s", i, why[0] ? why : strerror(-r));
		say(fn, userdata, e, what);
		if (!first)
			first = r;
		if (json_object_array_add(failed, json_object_get(e))) {
			json_object_put(e);
			json_object_put(failed);
			return -ENOMEM;
		}
	}
	json_object_put(s->knobs);
	s->knobs = failed;
	r = save(s);
	return first ? first : r ? r : restored;
}

int knob_state_restore_all_report(struct knob_state *s, const char *cgroup_base,
				  knob_report_fn fn, void *userdata, int *left_alone)
{
	return restore_all(s, cgroup_base, false, fn, userdata, left_alone);
}

int knob_state_restore_all(struct knob_state *s, const char *cgroup_base)
{
	return restore_all(s, cgroup_base, false, NULL, NULL, NULL);
}

int knob_state_restore_knobs(struct knob_state *s, const char *cgroup_base)
{
	return restore_all(s, cgroup_base, true, NULL, NULL, NULL);
}

/* ---- Slice= ---- */

static struct json_object *slice_threads_of(struct json_object *e)
{
	struct json_object *snap, *list;

	json_object_object_get_ex(e, "snapshot", &snap);
	json_object_object_get_ex(snap, "threads", &list);
	return list;
}

static int slice_record(struct knob_state *s, const char *base, const char *rel, uint64_t ns)
{
	struct json_object *snap, *e;
	int i = find(s, base, rel, KNOB_SCHED_SLICE);

	if (i >= 0)
		return i;
	snap = json_object_new_object();
	if (!snap || json_object_object_add(snap, "threads", json_object_new_array())) {
		json_object_put(snap);
		return -ENOMEM;
	}
	e = new_record(base, rel, KNOB_SCHED_SLICE, 0, snap);
	if (!e || json_object_object_add(e, "written", json_object_new_int64((int64_t)ns)) ||
	    json_object_array_add(s->knobs, e)) {
		json_object_put(e);
		return -ENOMEM;
	}
	return json_object_array_length(s->knobs) - 1;
}

static struct json_object *slice_find_tid(struct json_object *list, pid_t tid, size_t *idx)
{
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *t = json_object_array_get_idx(list, i);

		if (i64(t, "tid") == tid) {
			*idx = i;
			return t;
		}
	}
	return NULL;
}

/* A new thread to give the slice: its original recorded, not yet on disk. */
struct slice_new {
	pid_t tid;
	struct knob_slice_attr at;
};

int knob_state_slice(struct knob_state *s, const char *cgroup_base, const char *rel,
		     const pid_t *tids, size_t n, uint64_t ns, uint64_t default_ns,
		     struct slice_tally *tally)
{
	struct json_object *e, *list;
	struct slice_new *todo;
	size_t ntodo = 0;
	bool dirty = false;
	int i, r, first = 0;

	memset(tally, 0, sizeof(*tally));
	if (ns < KNOB_SLICE_MIN_NS || ns > KNOB_SLICE_MAX_NS)
		return -ERANGE;
	todo = calloc(n ? n : 1, sizeof(*todo));
	if (!todo)
		return -ENOMEM;
	i = slice_record(s, cgroup_base, rel, ns);
	if (i < 0) {
		free(todo);
		return i;
	}
	e = json_object_array_get_idx(s->knobs, i);
	list = slice_threads_of(e);
	for (size_t k = 0; k < n; k++) {
		struct json_object *t, *o;
		struct knob_slice_attr at;
		uint64_t start;
		size_t idx;

		if (knob_slice_thread_start(tids[k], &start) || knob_slice_get(tids[k], &at)) {
			tally->gone++;
			continue;
		}
		t = slice_find_tid(list, tids[k], &idx);
		if (t && i64(t, "start") != (int64_t)start) {
			/* The recorded thread is gone and its tid reused: a new thread. */
			json_object_array_del_idx(list, idx, 1);
			dirty = true;
			t = NULL;
		}
		if (t) {
			if (json_object_object_get_ex(t, "left_alone", &o) && json_object_get_boolean(o)) {
				tally->left_alone++;
			} else if (knob_slice_fair(&at) &&
				   at.runtime == (uint64_t)i64(t, "written_ns")) {
				tally->kept++;
			} else {
				/* Someone else's now: never touched again, nor restored. */
				json_object_object_add(t, "left_alone", json_object_new_boolean(1));
				dirty = true;
				tally->left_alone++;
				tally->changed++;
			}
			continue;
		}
		if (!knob_slice_fair(&at)) {
			tally->not_fair++;
			continue;
		}
		t = json_object_new_object();
		if (!t || json_object_object_add(t, "tid", json_object_new_int64(tids[k])) ||
		    json_object_object_add(t, "start", json_object_new_int64((int64_t)start)) ||
		    json_object_object_add(t, "slice_ns", json_object_new_int64(at.runtime == default_ns ? 0 : (int64_t)at.runtime)) ||
		    json_object_object_add(t, "written_ns", json_object_new_int64((int64_t)ns)) ||
		    json_object_array_add(list, t)) {
			json_object_put(t);
			free(todo);
			return -ENOMEM;
		}
		todo[ntodo].tid = tids[k];
		todo[ntodo++].at = at;
		dirty = true;
	}
	/* Every original on disk before the first write. */
	if (dirty && (r = save(s))) {
		for (size_t k = 0; k < ntodo; k++) {
			size_t idx;

			if (slice_find_tid(list, todo[k].tid, &idx))
				json_object_array_del_idx(list, idx, 1);
		}
		free(todo);
		return r;
	}
	dirty = false;
	for (size_t k = 0; k < ntodo; k++) {
		size_t idx;

		r = knob_slice_set(todo[k].tid, &todo[k].at, ns);
		if (!r) {
			tally->set++;
			continue;
		}
		if (r == -ESRCH) {
			tally->gone++;
		} else {
			first = first ? first : r;
			tally->failed++;
		}
		/* Not changed (or gone): nothing to restore. */
		if (slice_find_tid(list, todo[k].tid, &idx)) {
			json_object_array_del_idx(list, idx, 1);
			dirty = true;
		}
	}
	free(todo);
	if (dirty && (r = save(s)))
		log_debug_errno(r, "Failed to drop the threads not changed from the state file: %m");
	return first;
}

int knob_state_slice_release(struct knob_state *s, const char *cgroup_base, const char *rel)
{
	int i = find(s, cgroup_base, rel, KNOB_SCHED_SLICE), r;

	if (i < 0)
		return 0;
	r = slice_restore(json_object_array_get_idx(s->knobs, i), NULL, NULL, NULL, 0);
	if (r)
		return r;
	json_object_array_del_idx(s->knobs, i, 1);
	return save(s);
}
