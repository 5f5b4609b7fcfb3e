// SPDX-License-Identifier: GPL-2.0
/*
 * status.json, written by the daemon each tick, and `tailwarden status`,
 * which reads it. The file is only trusted as far as it was checked: a
 * regular file, bounded, every field of the type it should have, and its
 * pid a live tailwarden (a file left behind by kill -9 says not running).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include "common/defaults.h"
#include "common/fileio.h"
#include "common/log.h"
#include "controller/commands.h"
#include "controller/daemon.h"
#include "controller/output.h"
#include "controller/status.h"
#include "policies/action.h"
#include "policies/config.h"

#define EXIT_NOT_RUNNING 3

/* ---- writing (the daemon) ---- */

int status_dir_prepare(const char *dir, const char **why)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		*why = "cannot be created";
		return -errno;
	}
	if (lstat(dir, &st) < 0) {
		*why = "cannot be read";
		return -errno;
	}
	if (S_ISLNK(st.st_mode))
		return *why = "is a symlink", -ELOOP;
	if (!S_ISDIR(st.st_mode))
		return *why = "is not a directory", -ENOTDIR;
	if (st.st_uid != geteuid())
		return *why = "is not owned by root", -EPERM;
	if (st.st_mode & 022)
		return *why = "is group- or world-writable", -EPERM;
	return 0;
}

static struct json_object *num(double v)
{
	if (isnan(v))
		return NULL;
	if (isinf(v))
		return json_object_new_string("max");
	return json_object_new_double(v);
}

static struct json_object *str_or_null(const char *s)
{
	return *s ? json_object_new_string(s) : NULL;
}

static struct json_object *us(double s)
{
	return isfinite(s) ? json_object_new_double(round(s * 1e7) / 10) : NULL;
}

static struct json_object *knobs_json(const struct report_service *s, bool dry_run)
{
	struct json_object *a = json_object_new_array();

	for (int k = 0; k < KNOB_MAX && a; k++) {
		const struct report_knob *kn = &s->knobs[k];
		struct json_object *o;

		if (!kn->shown)
			continue;
		o = json_object_new_object();
		if (!o)
			break;
		json_object_object_add(o, "knob", json_object_new_string(action_knob_name(k)));
		json_object_object_add(o, "value", num(kn->value));
		json_object_object_add(o, "original", num(kn->original));
		json_object_object_add(o, "ours", json_object_new_boolean(kn->ours));
		json_object_object_add(o, dry_run ? "would_set" : "set", num(kn->ours_value));
		json_object_object_add(o, "overridden", json_object_new_boolean(kn->overridden));
		json_object_object_add(o, "actions", json_object_new_int64(kn->actions));
		json_object_array_add(a, o);
	}
	return a;
}

/* The last window's p99 of each phase, null where unseen (top-level phases_unseen says why) or none. */
static struct json_object *phases_json(const struct report_service *s)
{
	struct json_object *o = json_object_new_object();

	for (unsigned i = 0; o && i < TW_PHASES; i++)
		json_object_object_add(o, sensor_phase_name(i), us(s->phase_p99_s[i]));
	return o;
}

static struct json_object *service_json(const struct report_service *s, bool dry_run)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "name", json_object_new_string(s->name));
	json_object_object_add(
		o, "class",
		json_object_new_string(s->latency_critical ? "latency-critical" : "best-effort"));
	json_object_object_add(o, "cgroup", str_or_null(s->cgroup));
	json_object_object_add(o, "unit", str_or_null(s->unit));
	json_object_object_add(o, "cgroup_id",
			       s->cgroup_id ? json_object_new_int64(s->cgroup_id) : NULL);
	json_object_object_add(o, "percentile", num(s->percentile));
	json_object_object_add(o, "target_us", us(s->target_s));
	json_object_object_add(o, "p50_us", us(s->p50_s));
	json_object_object_add(o, "p99_us", us(s->p99_s));
	json_object_object_add(o, "objective_pct_us", us(s->pct_s));
	json_object_object_add(o, "rps", num(isfinite(s->rps) ? round(s->rps * 10) / 10 : NAN));
	json_object_object_add(o, "slack",
			       num(isfinite(s->slack) ? round(s->slack * 1000) / 1000 : NAN));
	json_object_object_add(o, "verdict", str_or_null(s->verdict));
	json_object_object_add(o, "absent", str_or_null(s->absent));
	json_object_object_add(o, "requests_total", json_object_new_int64(s->c.requests));
	json_object_object_add(o, "phases_p99_us", phases_json(s));
	json_object_object_add(o, "knobs", knobs_json(s, dry_run));
	return o;
}

static struct json_object *action_json(const struct report_action *a)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "ts", json_object_new_double(round(a->ts * 1000) / 1000));
	json_object_object_add(o, "service", json_object_new_string(a->service));
	json_object_object_add(o, "knob", json_object_new_string(a->knob));
	json_object_object_add(o, "old", num(a->old_value));
	json_object_object_add(o, "new", num(a->new_value));
	json_object_object_add(o, "reason", json_object_new_string(a->reason));
	json_object_object_add(o, "dry_run", json_object_new_boolean(a->dry_run));
	json_object_object_add(o, "applied", json_object_new_boolean(a->applied));
	json_object_object_add(o, "error", str_or_null(a->error));
	return o;
}

static struct json_object *tables_json(const struct report *r)
{
	struct json_object *o = json_object_new_object(), *maps = json_object_new_array();
	struct json_object *drops = json_object_new_object();

	if (!o || !maps || !drops) {
		json_object_put(o);
		json_object_put(maps);
		json_object_put(drops);
		return NULL;
	}
	for (int i = 0; i < (r->have_contention ? 2 : 1); i++) {
		struct json_object *m = json_object_new_object();

		if (!m)
			continue;
		json_object_object_add(m, "map", json_object_new_string(r->maps[i].name));
		json_object_object_add(m, "entries", json_object_new_int64(r->maps[i].entries));
		json_object_object_add(m, "capacity", json_object_new_int64(r->maps[i].capacity));
		json_object_array_add(maps, m);
	}
	json_object_object_add(drops, "request_cgroups",
			       json_object_new_int64(r->drop_req_cgroups));
	json_object_object_add(drops, "request_connections",
			       json_object_new_int64(r->drop_req_conns));
	json_object_object_add(drops, "request_spans", json_object_new_int64(r->drop_req_spans));
	json_object_object_add(drops, "contention_cgroups",
			       r->have_contention ? json_object_new_int64(r->drop_cont_cgroups) :
						    NULL);
	json_object_object_add(drops, "contention_stamps",
			       r->have_contention ? json_object_new_int64(r->drop_cont_stamps) :
						    NULL);
	json_object_object_add(o, "maps", maps);
	json_object_object_add(o, "drops", drops);
	json_object_object_add(o, "freed_total", json_object_new_int64(r->freed));
	return o;
}

static struct json_object *disks_json(const struct report *r)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; a && i < r->n_disks; i++) {
		const struct report_disk *d = &r->disks[i];
		struct json_object *o = json_object_new_object();

		if (!o)
			continue;
		json_object_object_add(o, "device", json_object_new_string(d->dev));
		json_object_object_add(o, "scheduler", str_or_null(d->scheduler));
		json_object_object_add(o, "original", str_or_null(d->original));
		json_object_object_add(o, "io_weight_acts",
				       json_object_new_boolean(!strcmp(d->scheduler, "bfq")));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *report_json(const struct report *r)
{
	struct json_object *o = json_object_new_object(), *svc, *acts;

	if (!o)
		return NULL;
	json_object_object_add(o, "running", json_object_new_boolean(true));
	json_object_object_add(o, "pid", json_object_new_int(r->pid));
	json_object_object_add(o, "dry_run", json_object_new_boolean(r->dry_run));
	json_object_object_add(o, "period_s", json_object_new_double(r->period_s));
	json_object_object_add(o, "sensing", str_or_null(r->sensing_mode));
	json_object_object_add(o, "phases_unseen", str_or_null(r->phases_unseen));
	json_object_object_add(o, "started",
			       json_object_new_double(round(r->started * 1000) / 1000));
	json_object_object_add(o, "last_tick",
			       json_object_new_double(round(r->last_tick * 1000) / 1000));
	json_object_object_add(o, "tick_duration_s", json_object_new_double(r->tick_duration_s));
	json_object_object_add(o, "ticks", json_object_new_int64(r->ticks));
	json_object_object_add(o, "reload_error", str_or_null(r->reload_error));
	json_object_object_add(o, "decision_log_lost", json_object_new_int64(r->decision_log_lost));
	svc = json_object_new_array();
	for (size_t i = 0; svc && i < r->n_svc; i++)
		if (r->svc[i].active)
			json_object_array_add(svc, service_json(&r->svc[i], r->dry_run));
	json_object_object_add(o, "services", svc);
	acts = json_object_new_array();
	for (size_t i = 0; acts && i < r->n_last; i++)
		json_object_array_add(acts, action_json(report_last(r, i)));
	json_object_object_add(o, "last_actions", acts);
	json_object_object_add(o, "tables", tables_json(r));
	json_object_object_add(o, "disks", disks_json(r));
	return o;
}

int status_write(const struct report *r, const char *dir)
{
	struct json_object *o = report_json(r);
	const char *text;
	int rr;

	if (!o)
		return -ENOMEM;
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	rr = text ? fileio_replace(dir, STATUS_FILE, text, false) : -ENOMEM;
	json_object_put(o);
	return rr;
}

void status_remove(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/" STATUS_FILE, dir);
	unlink(path);
}

/* ---- reading (tailwarden status) ---- */

/* Type sets a field may have. */
enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64 };

struct field {
	const char *key;
	int types;
};

static int type_of(struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		return T_NULL;
	case json_type_boolean:
		return T_BOOL;
	case json_type_int:
		return T_INT | T_NUM;
	case json_type_double:
		return T_NUM;
	case json_type_string:
		return T_STR;
	case json_type_array:
		return T_ARR;
	case json_type_object:
		return T_OBJ;
	}
	return 0;
}

/* Every field present with an allowed type; else *bad names it. */
static bool fields_ok(struct json_object *o, const struct field *f, size_t n, const char **bad)
{
	if (!json_object_is_type(o, json_type_object))
		return *bad = "(not an object)", false;
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = NULL;

		if (!json_object_object_get_ex(o, f[i].key, &v) || !(type_of(v) & f[i].types))
			return *bad = f[i].key, false;
	}
	return true;
}

static const struct field top_fields[] = {
	{ "pid", T_INT },
	{ "dry_run", T_BOOL },
	{ "period_s", T_NUM },
	{ "sensing", T_STR | T_NULL },
	{ "phases_unseen", T_STR | T_NULL },
	{ "started", T_NUM },
	{ "last_tick", T_NUM },
	{ "tick_duration_s", T_NUM },
	{ "ticks", T_INT },
	{ "reload_error", T_STR | T_NULL },
	{ "decision_log_lost", T_INT },
	{ "services", T_ARR },
	{ "last_actions", T_ARR },
	{ "tables", T_OBJ },
	{ "disks", T_ARR },
};
static const struct field svc_fields[] = {
	{ "name", T_STR },
	{ "class", T_STR },
	{ "cgroup", T_STR | T_NULL },
	{ "unit", T_STR | T_NULL },
	{ "cgroup_id", T_INT | T_NULL },
	{ "percentile", T_NUM | T_NULL },
	{ "target_us", T_NUM | T_NULL },
	{ "p50_us", T_NUM | T_NULL },
	{ "p99_us", T_NUM | T_NULL },
	{ "objective_pct_us", T_NUM | T_NULL },
	{ "rps", T_NUM | T_NULL },
	{ "slack", T_NUM | T_NULL },
	{ "verdict", T_STR | T_NULL },
	{ "absent", T_STR | T_NULL },
	{ "requests_total", T_INT },
	{ "phases_p99_us", T_OBJ },
	{ "knobs", T_ARR },
};
static const struct field knob_fields[] = {
	{ "knob", T_STR },
	{ "value", T_NUM | T_STR | T_NULL },
	{ "original", T_NUM | T_STR | T_NULL },
	{ "ours", T_BOOL },
	{ "overridden", T_BOOL },
	{ "actions", T_INT },
};
static const struct field action_fields[] = {
	{ "ts", T_NUM },
	{ "service", T_STR },
	{ "knob", T_STR },
	{ "old", T_NUM | T_STR | T_NULL },
	{ "new", T_NUM | T_STR | T_NULL },
	{ "reason", T_STR },
	{ "dry_run", T_BOOL },
	{ "applied", T_BOOL },
	{ "error", T_STR | T_NULL },
};
static const struct field tables_fields[] = {
	{ "maps", T_ARR },
	{ "drops", T_OBJ },
	{ "freed_total", T_INT },
};
static const struct field map_fields[] = {
	{ "map", T_STR },
	{ "entries", T_INT },
	{ "capacity", T_INT },
};
static const struct field disk_fields[] = {
	{ "device", T_STR },
	{ "scheduler", T_STR | T_NULL },
	{ "original", T_STR | T_NULL },
	{ "io_weight_acts", T_BOOL },
};

#define N(a) (sizeof(a) / sizeof(*(a)))

static bool array_ok(struct json_object *a, const struct field *f, size_t n, const char **bad)
{
	for (size_t i = 0; i < json_object_array_length(a); i++)
		if (!fields_ok(json_object_array_get_idx(a, i), f, n, bad))
			return false;
	return true;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

/* The whole document as the daemon writes it. NULL when not, *bad says where. */
static bool status_valid(struct json_object *o, const char **bad)
{
	struct json_object *svc;

	if (!fields_ok(o, top_fields, N(top_fields), bad))
		return false;
	svc = get(o, "services");
	if (!array_ok(svc, svc_fields, N(svc_fields), bad))
		return false;
	for (size_t i = 0; i < json_object_array_length(svc); i++)
		if (!array_ok(get(json_object_array_get_idx(svc, i), "knobs"), knob_fields,
			      N(knob_fields), bad))
			return false;
	if (!array_ok(get(o, "last_actions"), action_fields, N(action_fields), bad))
		return false;
	if (!fields_ok(get(o, "tables"), tables_fields, N(tables_fields), bad))
		return false;
	if (!json_object_is_type(get(get(o, "tables"), "drops"), json_type_object))
		return *bad = "drops", false;
	if (!array_ok(get(o, "disks"), disk_fields, N(disk_fields), bad))
		return false;
	return array_ok(get(get(o, "tables"), "maps"), map_fields, N(map_fields), bad);
}

/* Is pid a live tailwarden? */
static bool pid_is_tailwarden(long pid)
{
	char path[64], comm[64] = "";
	FILE *f;

	if (pid <= 0 || pid > INT32_MAX || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	return !strcmp(comm, "tailwarden");
}

/* Read path: 0 with *out, -ENOENT (none), or -errno with a message printed. */
static int status_read(const char *path, struct json_object **out)
{
	char *buf = NULL;
	struct stat st;
	const char *bad = NULL;
	struct json_object *o;
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		return r == -ENOENT ? r : log_error_errno(r, "Failed to open %s: %m", path);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > STATUS_MAX_BYTES) {
		log_error("%s: not a regular file of at most %d bytes; ignoring it", path,
			  STATUS_MAX_BYTES);
		close(fd);
		return -EBADMSG;
	}
	buf = malloc(STATUS_MAX_BYTES + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	n = read(fd, buf, STATUS_MAX_BYTES + 1);
	close(fd);
	if (n < 0 || n > STATUS_MAX_BYTES) {
		free(buf);
		return log_error_errno(-EBADMSG, "Failed to read %s whole", path);
	}
	buf[n] = '\0';
	o = json_tokener_parse(buf);
	free(buf);
	if (!o || !status_valid(o, &bad)) {
		log_error("%s: not a valid status file (%s%s); ignoring it", path,
			  o ? "field missing or of the wrong type: " : "", o ? bad : "not JSON");
		json_object_put(o);
		return -EBADMSG;
	}
	*out = o;
	return r;
}

/* ---- printing ---- */

/*
 * A string of status.json, as printed: names (services, cgroups, units)
 * with their control bytes as '?'. Good until eight more calls.
 */
static const char *s_of(struct json_object *o, const char *key)
{
	static char ring[8][4096];
	static unsigned next;
	struct json_object *v = get(o, key);

	if (!json_object_is_type(v, json_type_string))
		return NULL;
	return log_printable(json_object_get_string(v), ring[next++ % 8], sizeof(ring[0]));
}

static double d_of(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	if (json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), "max"))
		return INFINITY;
	return type_of(v) & T_NUM ? json_object_get_double(v) : NAN;
}

/* µs as top shows durations ("-" when unknown). */
static void fmt_us(char *buf, size_t len, double us)
{
	output_fmt_duration(buf, len, isfinite(us) ? us * 1e3 : -1);
}

/* A knob named as in status.json. */
static void fmt_knob(char *buf, size_t len, const char *knob, double v)
{
	action_format_value(buf, len, action_knob_from_name(knob), v, 0);
}

static void fmt_age(char *buf, size_t len, double s)
{
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 7200)
		snprintf(buf, len, "%.0fmin", s / 60);
	else
		snprintf(buf, len, "%.1fh", s / 3600);
}

static void print_service(struct json_object *s)
{
	struct json_object *knobs = get(s, "knobs"), *id = get(s, "cgroup_id");
	char p50[32], p99[32], pct[32], target[32];
	const char *unit = s_of(s, "unit"), *cg = s_of(s, "cgroup");

	printf("\n● %s (%s)\n", s_of(s, "name"), s_of(s, "class"));
	printf("    %-9s %s%s%s", "cgroup", unit ? unit : "", unit ? " -> " : "",
	       cg ? cg : "(not found)");
	if (id && type_of(id) & T_INT)
		printf(" (id %lld)", (long long)json_object_get_int64(id));
	printf("\n");
	if (s_of(s, "absent"))
		printf("    %-9s %s\n", "absent", s_of(s, "absent"));
	fmt_us(p50, sizeof(p50), d_of(s, "p50_us"));
	fmt_us(p99, sizeof(p99), d_of(s, "p99_us"));
	if (isfinite(d_of(s, "target_us"))) {
		fmt_us(target, sizeof(target), d_of(s, "target_us"));
		fmt_us(pct, sizeof(pct), d_of(s, "objective_pct_us"));
		printf("    %-9s p%g <= %s: now %s, slack ", "objective",
		       d_of(s, "percentile") * 100, target, pct);
		if (isfinite(d_of(s, "slack")))
			printf("%+.2f\n", d_of(s, "slack"));
		else
			printf("-\n");
	}
	printf("    %-9s p50 %s  p99 %s  ", "window", p50, p99);
	if (isfinite(d_of(s, "rps")))
		printf("%.0f req/s\n", d_of(s, "rps"));
	else
		printf("- req/s\n");
	printf("    %-9s p99", "phases");
	for (unsigned i = 0; i < TW_PHASES; i++) {
		fmt_us(p99, sizeof(p99), d_of(get(s, "phases_p99_us"), sensor_phase_name(i)));
		printf("  %s %s", sensor_phase_name(i), p99);
	}
	printf("\n");
	if (s_of(s, "verdict"))
		printf("    %-9s %s\n", "verdict", s_of(s, "verdict"));
	for (size_t i = 0; i < json_object_array_length(knobs); i++) {
		struct json_object *k = json_object_array_get_idx(knobs, i);
		const char *name = s_of(k, "knob");
		char v[32], o[32];

		fmt_knob(v, sizeof(v), name, d_of(k, "value"));
		fmt_knob(o, sizeof(o), name, d_of(k, "original"));
		printf("    %-9s %-10s %-8s", i ? "" : "knobs", name, v);
		if (json_object_get_boolean(get(k, "ours")))
			printf(" ours, was %s", o);
		else if (json_object_get_boolean(get(k, "overridden")))
			printf(" changed by someone else: left alone");
		else if (isfinite(d_of(k, "would_set")) || isinf(d_of(k, "would_set"))) {
			fmt_knob(o, sizeof(o), name, d_of(k, "would_set"));
			printf(" dry-run: would be %s", o);
		}
		printf("\n");
	}
}

static void print_tables(struct json_object *t)
{
	struct json_object *maps = get(t, "maps"), *drops = get(t, "drops");
	uint64_t total = 0;

	printf("   tables:");
	for (size_t i = 0; i < json_object_array_length(maps); i++) {
		struct json_object *m = json_object_array_get_idx(maps, i);

		printf("%s %s %lld/%lld", i ? "," : "", s_of(m, "map"),
		       (long long)json_object_get_int64(get(m, "entries")),
		       (long long)json_object_get_int64(get(m, "capacity")));
	}
	json_object_object_foreach (drops, key, v) {
		(void)key;
		if (json_object_is_type(v, json_type_int))
			total += json_object_get_int64(v);
	}
	printf("; %llu events dropped", (unsigned long long)total);
	if (total) {
		json_object_object_foreach (drops, k2, v2)
			if (json_object_is_type(v2, json_type_int) && json_object_get_int64(v2))
				printf(" (%s %lld)", k2, (long long)json_object_get_int64(v2));
	}
	printf("; %lld entries of removed cgroups freed\n",
	       (long long)json_object_get_int64(get(t, "freed_total")));
}

static void print_disks(struct json_object *disks)
{
	size_t n = json_object_array_length(disks);

	for (size_t i = 0; i < n; i++) {
		struct json_object *d = json_object_array_get_idx(disks, i);

		printf("%s %s %s", i ? ";" : "    disks:", s_of(d, "device"),
		       s_of(d, "scheduler") ? s_of(d, "scheduler") : "(unreadable)");
		if (s_of(d, "original"))
			printf(" (switched by tailwarden, was %s)", s_of(d, "original"));
		printf(", I/O weight %s", json_object_get_boolean(get(d, "io_weight_acts")) ?
						  "acts" :
						  "has no effect");
	}
	if (n)
		printf("\n");
}

static void print_actions(struct json_object *acts)
{
	size_t n = json_object_array_length(acts);

	printf("\nLast actions:%s\n", n ? "" : " none");
	for (size_t i = 0; i < n; i++) {
		struct json_object *a = json_object_array_get_idx(acts, i);
		const char *knob = s_of(a, "knob");
		time_t t = (time_t)d_of(a, "ts");
		char when[32], o[32], nw[32];
		struct tm tm;

		strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&t, &tm));
		fmt_knob(o, sizeof(o), knob, d_of(a, "old"));
		fmt_knob(nw, sizeof(nw), knob, d_of(a, "new"));
		printf("  %s %s %s %s -> %s%s: %s\n", when, s_of(a, "service"), knob, o, nw,
		       json_object_get_boolean(get(a, "dry_run")) ? " (dry-run)" :
		       json_object_get_boolean(get(a, "applied")) ? "" :
								    " (failed)",
		       s_of(a, "reason"));
	}
}

static void print_human(struct json_object *o)
{
	struct json_object *svc = get(o, "services");
	struct timespec ts;
	char age[32], up[32];
	double now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = ts.tv_sec + ts.tv_nsec / 1e9;
	fmt_age(age, sizeof(age), now - d_of(o, "last_tick"));
	fmt_age(up, sizeof(up), now - d_of(o, "started"));
	printf("● tailwarden: running (pid %lld), %s, up %s\n",
	       (long long)json_object_get_int64(get(o, "pid")),
	       json_object_get_boolean(get(o, "dry_run")) ? "dry-run (nothing is written)" : "live",
	       up);
	if (json_object_get_int64(get(o, "ticks")) > 0)
		printf("     loop: period %gs, %lld ticks, last %s ago (took %.1fms)",
		       d_of(o, "period_s"), (long long)json_object_get_int64(get(o, "ticks")), age,
		       d_of(o, "tick_duration_s") * 1000);
	else
		printf("     loop: period %gs, no tick yet", d_of(o, "period_s"));
	if (s_of(o, "sensing"))
		printf(", sensing %s", s_of(o, "sensing"));
	printf("\n");
	if (s_of(o, "phases_unseen"))
		printf("   phases: %s\n", s_of(o, "phases_unseen"));
	print_tables(get(o, "tables"));
	print_disks(get(o, "disks"));
	if (s_of(o, "reload_error"))
		printf("   reload: last one REJECTED, old policies kept: %s\n",
		       s_of(o, "reload_error"));
	if (json_object_get_int64(get(o, "decision_log_lost")))
		printf("   decision log: %lld line(s) lost (its file could not be written)\n",
		       (long long)json_object_get_int64(get(o, "decision_log_lost")));
	for (size_t i = 0; i < json_object_array_length(svc); i++)
		print_service(json_object_array_get_idx(svc, i));
	print_actions(get(o, "last_actions"));
}

static int not_running(bool json)
{
	if (json)
		printf("{\"running\":false,\"pid\":null,\"dry_run\":null,\"period_s\":null,"
		       "\"services\":[],\"last_actions\":[]}\n");
	else
		printf("not running\n");
	return EXIT_NOT_RUNNING;
}

static void help(void)
{
	printf("Usage: tailwarden status [OPTIONS]\n\n"
	       "What the running daemon does now: each service's cgroup, objective,\n"
	       "last window, verdict and knobs; the last actions; sensor tables.\n"
	       "Exit status 3 and 'not running' when no daemon runs.\n\n"
	       "      --config FILE   the daemon's config, for its StateDir= (default\n"
	       "                      " TW_CONFIG_PATH " if present)\n"
	       "      --json          one JSON object\n"
	       "  -h, --help          this text\n");
}

static int status_path(const char *config, char *path, size_t len)
{
	struct tw_config *cfg;
	int r;

	/* The daemon's own config, read as run reads it, says where it writes. */
	r = daemon_load_config(config, TW_CONFIG_PATH, &cfg);
	if (r)
		return r;
	snprintf(path, len, "%s/" STATUS_FILE, cfg->state_dir);
	config_free(cfg);
	return 0;
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = { { "config", required_argument, NULL, 'c' },
					      { "json", no_argument, NULL, 'j' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	const char *config = NULL;
	char path[PATH_MAX];
	struct json_object *o = NULL;
	bool json = false;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			log_error("try 'tailwarden status --help'");
			return TW_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; try 'tailwarden status --help'", argv[optind]);
		return TW_EXIT_USAGE;
	}
	if (status_path(config, path, sizeof(path)))
		return 1;
	r = status_read(path, &o);
	if (r == -ENOENT || r == -EBADMSG)
		return not_running(json);
	if (r)
		return 1;
	if (!pid_is_tailwarden(json_object_get_int64(get(o, "pid")))) {
		json_object_put(o);
		return not_running(json);
	}
	if (json)
		printf("%s\n",
		       json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								 JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_human(o);
	json_object_put(o);
	return 0;
}
