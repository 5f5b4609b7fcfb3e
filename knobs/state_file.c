// SPDX-License-Identifier: GPL-2.0
/*
 * The state file on disk: loading (every field checked: the file is input
 * like any other), the records in and out of JSON, and saving. The file
 * holds the original of every knob we changed, so that whatever
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
 * Slice= sets the EEVDF slice of each thread of the service (slice.c):
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
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/defaults.h"
#include "common/fileio.h"
#include "common/log.h"
#include "knobs/iosched.h"
#include "knobs/slice.h"
#include "knobs/state.h"
#include "knobs/state_file.h"

#define STATE_VERSION 1

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
	const char *cg = str_of(e, "cgroup"), *c = str_of(e, "controller"),
		   *o = str_of(e, "original");

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
		if (!has(snap, "threads", json_type_array, &list) ||
		    json_object_object_length(snap) != 1)
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
		if (json_object_object_get_ex(snap, "written", &v) &&
		    !json_object_is_type(v, json_type_int))
			return "\"snapshot.written\" is not an integer";
		return NULL;
	}
	if (json_object_object_get_ex(snap, "cpus", &list)) {
		if (!json_object_is_type(list, json_type_array))
			return "\"snapshot.cpus\" is not an array";
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			struct json_object *c = json_object_array_get_idx(list, i);

			if (!json_object_is_type(c, json_type_object) ||
			    !int_in(c, "cpu", 0, 65535) || !int_in(c, "max_khz", 1, INT32_MAX) ||
			    (json_object_object_get_ex(c, "written_khz", &v) &&
			     !int_in(c, "written_khz", 1, INT32_MAX)))
				return "an entry of \"snapshot.cpus\" is not {\"cpu\": 0-65535, \"max_khz\": a positive integer}";
		}
		return NULL;
	}
	if (!has(snap, "files", json_type_array, &list))
		return "\"snapshot\" has neither a \"files\" nor a \"cpus\" array";
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *f = json_object_array_get_idx(list, i);

		if (!json_object_is_type(f, json_type_object) || !str_of(f, "path") ||
		    str_of(f, "path")[0] != '/' || !str_of(f, "value") ||
		    !knob_value(str_of(f, "value")) ||
		    (json_object_object_get_ex(f, "written", &v) &&
		     (!str_of(f, "written") || !knob_value(str_of(f, "written")))))
			return "an entry of \"snapshot.files\" is not {\"path\": an absolute path, \"value\": a short printable string}";
	}
	return NULL;
}

/* ---- JSON <-> records: the only place the state's JSON is read or made ---- */

static char *dup_of(struct json_object *o, const char *key)
{
	const char *v = str_of(o, key);

	return v ? strdup(v) : NULL;
}

/* A canonical value as the file spells it: a number, or "max" for no limit. */
static double num_of(struct json_object *o, const char *key, bool *found)
{
	struct json_object *v;

	*found = json_object_object_get_ex(o, key, &v);
	if (!*found)
		return NAN;
	if (json_object_is_type(v, json_type_string))
		return strcmp(json_object_get_string(v), "max") ? NAN : INFINITY;
	if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))
		return json_object_get_double(v);
	return NAN;
}

static struct json_object *num_new(double v)
{
	char num[32];

	if (isinf(v))
		return json_object_new_string("max");
	if (v == (double)(int64_t)v && fabs(v) < 1e15)
		return json_object_new_int64((int64_t)v);
	snprintf(num, sizeof(num), "%.9g", v);
	return json_object_new_double_s(v, num);
}

static int64_t i64_of(struct json_object *o, const char *key)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

/* A record checked by check_record() into r. 0 or -ENOMEM. */
static int from_json(struct json_object *e, struct knob_record *r)
{
	struct json_object *snap = NULL, *list, *v;
	bool found;

	memset(r, 0, sizeof(*r));
	r->knob = KNOB_MAX;
	json_object_object_get_ex(e, "snapshot", &snap);
	if (is_iosched(e)) {
		r->backend = KNOB_BACKEND_IOSCHED;
		r->iosched.device = dup_of(e, "device");
		r->iosched.original = dup_of(e, "original");
		r->iosched.written = dup_of(e, "written");
		r->has_written = r->iosched.written;
		return r->iosched.device && r->iosched.original ? 0 : -ENOMEM;
	}
	r->cgroup_base = dup_of(e, "cgroup_base");
	r->cgroup = dup_of(e, "cgroup");
	if (!r->cgroup_base || !r->cgroup)
		return -ENOMEM;
	if (is_subtree(e)) {
		r->backend = KNOB_BACKEND_SUBTREE;
		r->subtree.controller = dup_of(e, "controller");
		r->subtree.original = dup_of(e, "original");
		return r->subtree.controller && r->subtree.original ? 0 : -ENOMEM;
	}
	r->knob = action_knob_from_name(str_of(e, "knob"));
	r->original = num_of(e, "original", &found);
	r->written = num_of(e, "written", &r->has_written);
	if (str_of(e, "unit")) {
		r->backend = KNOB_BACKEND_UNIT;
		r->unit.unit = dup_of(snap, "unit");
		r->unit.property = dup_of(snap, "property");
		r->unit.bus = dup_of(snap, "bus");
		json_object_object_get_ex(snap, "value", &v);
		r->unit.value = json_object_get_uint64(v);
		r->unit.has_written = json_object_object_get_ex(snap, "written", &v) &&
				      json_object_is_type(v, json_type_int);
		r->unit.written = r->unit.has_written ? json_object_get_uint64(v) : 0;
		return r->unit.unit && r->unit.property && r->unit.bus ? 0 : -ENOMEM;
	}
	if (is_slice(e)) {
		r->backend = KNOB_BACKEND_SLICE;
		json_object_object_get_ex(snap, "threads", &list);
		r->threads.n = json_object_array_length(list);
		r->threads.v = calloc(r->threads.n ? r->threads.n : 1, sizeof(*r->threads.v));
		if (!r->threads.v)
			return -ENOMEM;
		for (size_t i = 0; i < r->threads.n; i++) {
			struct json_object *t = json_object_array_get_idx(list, i);
			struct knob_thread *th = &r->threads.v[i];

			th->tid = (pid_t)i64_of(t, "tid");
			th->start = (uint64_t)i64_of(t, "start");
			th->slice_ns = (uint64_t)i64_of(t, "slice_ns");
			th->written_ns = (uint64_t)i64_of(t, "written_ns");
			th->left_alone = json_object_object_get_ex(t, "left_alone", &v) &&
					 json_object_get_boolean(v);
		}
		return 0;
	}
	if (json_object_object_get_ex(snap, "cpus", &list)) {
		r->backend = KNOB_BACKEND_CPUFREQ;
		r->cpus.n = json_object_array_length(list);
		r->cpus.v = calloc(r->cpus.n ? r->cpus.n : 1, sizeof(*r->cpus.v));
		if (!r->cpus.v)
			return -ENOMEM;
		for (size_t i = 0; i < r->cpus.n; i++) {
			struct json_object *c = json_object_array_get_idx(list, i);

			r->cpus.v[i].cpu = (unsigned)i64_of(c, "cpu");
			r->cpus.v[i].max_khz = (unsigned long)i64_of(c, "max_khz");
			r->cpus.v[i].written_khz = (unsigned long)i64_of(c, "written_khz");
		}
		return 0;
	}
	r->backend = KNOB_BACKEND_CGROUP;
	json_object_object_get_ex(snap, "files", &list);
	r->files.n = json_object_array_length(list);
	r->files.v = calloc(r->files.n ? r->files.n : 1, sizeof(*r->files.v));
	if (!r->files.v)
		return -ENOMEM;
	for (size_t i = 0; i < r->files.n; i++) {
		struct json_object *f = json_object_array_get_idx(list, i);
		struct knob_file *kf = &r->files.v[i];

		kf->path = dup_of(f, "path");
		kf->value = dup_of(f, "value");
		kf->written = dup_of(f, "written");
		if (!kf->path || !kf->value || (str_of(f, "written") && !kf->written))
			return -ENOMEM;
	}
	return 0;
}

/* Adds key: value to o, taking value over. -ENOMEM. */
static int add(struct json_object *o, const char *key, struct json_object *value)
{
	if (!value || json_object_object_add(o, key, value)) {
		json_object_put(value);
		return -ENOMEM;
	}
	return 0;
}

static int add_str(struct json_object *o, const char *key, const char *s)
{
	return add(o, key, json_object_new_string(s));
}

static int add_int(struct json_object *o, const char *key, int64_t v)
{
	return add(o, key, json_object_new_int64(v));
}

static struct json_object *snap_to_json(const struct knob_record *r)
{
	struct json_object *snap = json_object_new_object(), *list = json_object_new_array();
	int err = !snap || !list;

	switch (r->backend) {
	case KNOB_BACKEND_UNIT:
		json_object_put(list);
		list = NULL;
		err = err || add_str(snap, "unit", r->unit.unit) ||
		      add_str(snap, "property", r->unit.property) ||
		      add(snap, "value", json_object_new_uint64(r->unit.value)) ||
		      (r->unit.has_written &&
		       add(snap, "written", json_object_new_uint64(r->unit.written))) ||
		      add_str(snap, "bus", r->unit.bus);
		break;
	case KNOB_BACKEND_SLICE:
		for (size_t i = 0; !err && i < r->threads.n; i++) {
			const struct knob_thread *th = &r->threads.v[i];
			struct json_object *t = json_object_new_object();

			err = !t || add_int(t, "tid", th->tid) ||
			      add_int(t, "start", (int64_t)th->start) ||
			      add_int(t, "slice_ns", (int64_t)th->slice_ns) ||
			      add_int(t, "written_ns", (int64_t)th->written_ns) ||
			      (th->left_alone && add(t, "left_alone", json_object_new_boolean(1)));
			if (err || json_object_array_add(list, t)) {
				json_object_put(t);
				err = 1;
			}
		}
		err = err || add(snap, "threads", json_object_get(list));
		break;
	case KNOB_BACKEND_CPUFREQ:
		for (size_t i = 0; !err && i < r->cpus.n; i++) {
			const struct knob_cpu *c = &r->cpus.v[i];
			struct json_object *o = json_object_new_object();

			err = !o || add_int(o, "cpu", c->cpu) ||
			      add_int(o, "max_khz", (int64_t)c->max_khz) ||
			      (c->written_khz &&
			       add_int(o, "written_khz", (int64_t)c->written_khz));
			if (err || json_object_array_add(list, o)) {
				json_object_put(o);
				err = 1;
			}
		}
		err = err || add(snap, "cpus", json_object_get(list));
		break;
	default:
		for (size_t i = 0; !err && i < r->files.n; i++) {
			const struct knob_file *f = &r->files.v[i];
			struct json_object *o = json_object_new_object();

			err = !o || add_str(o, "path", f->path) || add_str(o, "value", f->value) ||
			      (f->written && add_str(o, "written", f->written));
			if (err || json_object_array_add(list, o)) {
				json_object_put(o);
				err = 1;
			}
		}
		err = err || add(snap, "files", json_object_get(list));
		break;
	}
	json_object_put(list);
	if (err) {
		json_object_put(snap);
		return NULL;
	}
	return snap;
}

static struct json_object *to_json(const struct knob_record *r)
{
	struct json_object *e = json_object_new_object();
	int err = !e;

	switch (r->backend) {
	case KNOB_BACKEND_IOSCHED:
		err = err || add_str(e, "knob", IOSCHED_KNOB) ||
		      add_str(e, "device", r->iosched.device) ||
		      add_str(e, "original", r->iosched.original) ||
		      (r->iosched.written && add_str(e, "written", r->iosched.written));
		break;
	case KNOB_BACKEND_SUBTREE:
		err = err || add_str(e, "knob", SUBTREE_KNOB) ||
		      add_str(e, "cgroup_base", r->cgroup_base) ||
		      add_str(e, "cgroup", r->cgroup) ||
		      add_str(e, "controller", r->subtree.controller) ||
		      add_str(e, "original", r->subtree.original);
		break;
	default:
		err = err || add_str(e, "cgroup_base", r->cgroup_base) ||
		      add_str(e, "cgroup", r->cgroup) ||
		      add_str(e, "knob", action_knob_name(r->knob)) ||
		      (r->backend == KNOB_BACKEND_UNIT && add_str(e, "unit", r->unit.unit)) ||
		      (!isnan(r->original) && add(e, "original", num_new(r->original))) ||
		      (r->has_written && !isnan(r->written) &&
		       add(e, "written", num_new(r->written))) ||
		      add(e, "snapshot", snap_to_json(r));
		break;
	}
	if (err) {
		json_object_put(e);
		return NULL;
	}
	return e;
}

int knob_state_parse(const char *text, size_t len, const char *name, struct knob_record **out,
		     size_t *nout)
{
	struct knob_record *v;
	size_t n;
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
				  err == json_tokener_continue ? "the file ends inside the JSON" :
								 json_tokener_error_desc(err));
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
	n = json_object_array_length(knobs);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		json_object_put(root);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (from_json(json_object_array_get_idx(knobs, i), &v[i])) {
			for (size_t j = 0; j <= i; j++)
				knob_record_free(&v[j]);
			free(v);
			json_object_put(root);
			return -ENOMEM;
		}
	}
	json_object_put(root);
	*out = v;
	*nout = n;
	return 0;
}

/*
 * Read the state file: a regular file only (a FIFO would block open()
 * and read() for ever; O_NONBLOCK and fstat() refuse it), not through a
 * symbolic link, of a bounded size.
 */
int knob_state_file_load(const char *path, struct knob_record **out, size_t *nout)
{
	struct stat st;
	char *buf;
	ssize_t n;
	size_t len = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			*out = NULL;
			*nout = 0;
			return 0;
		}
		if (errno == ELOOP) {
			log_error("%s is a symbolic link; refusing it", path);
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
		log_error("%s is %s; refusing it", path,
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
	r = knob_state_parse(buf, len, path, out, nout);
	free(buf);
	return r;
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

int knob_state_file_save(const char *dir, const struct knob_record *v, size_t n)
{
	struct json_object *root, *knobs;
	char path[PATH_MAX];
	const char *text, *why;
	int r;

	if (n == 0) {
		snprintf(path, sizeof(path), "%s/" TW_STATE_FILE, dir);
		if (unlink(path) < 0)
			return errno == ENOENT ? 0 : -errno;
		return fileio_sync_dir(dir);
	}
	r = knob_state_dir(dir, true, &why);
	if (r)
		return r;
	root = json_object_new_object();
	knobs = json_object_new_array();
	if (!root || !knobs ||
	    json_object_object_add(root, "version", json_object_new_int(STATE_VERSION)) ||
	    json_object_object_add(root, "knobs", knobs)) {
		json_object_put(knobs);
		json_object_put(root);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = to_json(&v[i]);

		if (!e || json_object_array_add(knobs, e)) {
			json_object_put(e);
			json_object_put(root);
			return -ENOMEM;
		}
	}
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
							    JSON_C_TO_STRING_NOSLASHESCAPE);
	r = text ? fileio_replace(dir, TW_STATE_FILE, text, true) : -ENOMEM;
	json_object_put(root);
	return r;
}
