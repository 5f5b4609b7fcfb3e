// SPDX-License-Identifier: GPL-2.0
/*
 * Policy files: the schema, the value checks and the whole-file and
 * whole-set rules. Lexing is in ini.c, values with units in value.c, the main config
 * in config.c.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/defaults.h"
#include "policies/ini.h"
#include "policies/policy.h"
#include "policies/value.h"

#define NSEC_PER_USEC 1000ULL
#define NSEC_PER_MSEC 1000000ULL
#define NSEC_PER_SEC TW_NSEC_PER_SEC

/* A target below 1 us is a unit typo (2ns for 2ms), not an objective. */
#define TARGET_MIN_NS NSEC_PER_USEC
#define TARGET_MAX_NS (60 * NSEC_PER_SEC)
#define WINDOW_MIN_NS (100 * NSEC_PER_MSEC)
#define WINDOW_MAX_NS (600 * NSEC_PER_SEC)
/* What the kernel accepts as a custom EEVDF slice (sched_setattr's sched_runtime). */
#define SLICE_MIN_NS (100 * NSEC_PER_USEC)
#define SLICE_MAX_NS (100 * NSEC_PER_MSEC)

/* ---- policy files ---- */

enum { S_SERVICE, S_OBJECTIVE, S_LIMITS };
enum {
	K_CGROUP,
	K_UNIT,
	K_CLASS,
	K_PERCENTILE,
	K_TARGET,
	K_MIN_REQUESTS,
	K_WINDOW,
	K_CPU_QUOTA,
	K_CPU_WEIGHT,
	K_IO_WEIGHT,
	K_CPU_FREQUENCY,
	K_SLICE,
	K_WEIGHTS,
};

/*
 * Relative to the cgroup root, stored as "/a/b": empty components and a
 * trailing '/' dropped; "." and ".." refused, as they would let a policy
 * escape the root or name one cgroup under two spellings.
 */
static int set_cgroup(void *obj, const char *v, char *why)
{
	struct policy *p = obj;
	char *out, *o;
	const char *c = v;

	if (value_has_control(v))
		return value_fail(why, "control characters are not allowed in a cgroup path");
	out = o = malloc(strlen(v) + 2);
	if (!out)
		return -ENOMEM;
	while (*c) {
		const char *e;
		size_t n;

		while (*c == '/')
			c++;
		if (!*c)
			break;
		e = strchrnul(c, '/');
		n = e - c;
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
			free(out);
			return value_fail(why, "'%.*s' is not allowed in a cgroup path", (int)n, c);
		}
		if (n > 255) {
			free(out);
			return value_fail(why, "a path component is longer than 255 bytes");
		}
		*o++ = '/';
		memcpy(o, c, n);
		o += n;
		c = e;
	}
	*o = '\0';
	if (o == out) {
		free(out);
		return value_fail(
			why,
			"that is the cgroup root itself; name a cgroup below it, e.g. lc.slice/web.service");
	}
	if (!strcmp(out, "/sys/fs/cgroup") || !strncmp(out, "/sys/fs/cgroup/", 15)) {
		free(out);
		return value_fail(
			why,
			"the path is relative to the cgroup root: drop the leading /sys/fs/cgroup");
	}
	free(p->cgroup);
	p->cgroup = out;
	return 0;
}

/*
 * A systemd unit whose cgroup the policy follows: NAME.service, NAME.slice
 * or NAME.scope, spelled as systemd accepts unit names (unit-name.c:
 * letters, digits, ":-_.\\" and one '@' before a non-empty instance).
 */
static int set_unit(void *obj, const char *v, char *why)
{
	static const char *const types[] = { ".service", ".slice", ".scope" };
	struct policy *p = obj;
	size_t n = strlen(v), t;
	const char *at;

	for (t = 0; t < 3; t++)
		if (n > strlen(types[t]) && !strcmp(v + n - strlen(types[t]), types[t]))
			break;
	if (t == 3)
		return value_fail(why, "'%s' is not a .service, .slice or .scope unit", v);
	if (n > 255)
		return value_fail(why, "a unit name is at most 255 bytes");
	if (strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:-_.\\@") != n)
		return value_fail(
			why,
			"'%s' has characters a unit name cannot have (letters, digits and \":-_.\\@\" only)",
			v);
	at = strchr(v, '@');
	if (at && (strchr(at + 1, '@') || at == v || at[1] == '.'))
		return value_fail(
			why,
			"'%s' is a template or a malformed instance name; name an instance such as getty@tty1.service",
			v);
	if (v[0] == '.' || v[0] == '-')
		return value_fail(why, "a unit name cannot start with '%c'", v[0]);
	free(p->unit);
	p->unit = strdup(v);
	return p->unit ? 0 : -ENOMEM;
}

static int set_class(void *obj, const char *v, char *why)
{
	struct policy *p = obj;

	if (!strcmp(v, "latency-critical"))
		p->klass = POLICY_LATENCY_CRITICAL;
	else if (!strcmp(v, "best-effort"))
		p->klass = POLICY_BEST_EFFORT;
	else
		return value_fail(why, "expected latency-critical or best-effort");
	return 0;
}

static int set_percentile(void *obj, const char *v, char *why)
{
	return value_parse_percentile(v, &((struct policy *)obj)->percentile, why);
}

static int set_target(void *obj, const char *v, char *why)
{
	return value_parse_duration_in(v, TARGET_MIN_NS, TARGET_MAX_NS,
				       &((struct policy *)obj)->target_ns, why);
}

static int set_min_requests(void *obj, const char *v, char *why)
{
	struct policy *p = obj;
	uint64_t n;
	int r = value_parse_uint(v, &n, why);

	if (r < 0)
		return r;
	if (n < 1)
		return value_fail(why, "must be at least 1");
	p->min_requests = n;
	return 0;
}

static int set_window(void *obj, const char *v, char *why)
{
	return value_parse_duration_in(v, WINDOW_MIN_NS, WINDOW_MAX_NS,
				       &((struct policy *)obj)->window_ns, why);
}

/*
 * The kernel refuses a cpu.max quota under 1 ms per period; with the
 * default 100 ms period that is 1% of a CPU. 100000% is 1000 CPUs.
 */
static const struct value_range_spec quota_spec = {
	value_parse_percent_bound, value_format_percent, 0.01, 1000, true,
};
/* cgroup v2 cpu.weight and io.weight: 1..10000. */
static const struct value_range_spec weight_spec = {
	value_parse_weight_bound, value_format_number, 1, 10000, false,
};
/* cpu.weight also "idle" (0), below every weight: cpu.idle, as systemd's CPUWeight=idle. */
static const struct value_range_spec cpu_weight_spec = {
	value_parse_cpu_weight_bound, value_format_cpu_weight, 0, 10000, false,
};
/* Catches unit typos (1.2MHz for 1.2GHz); real cpufreq limits are checked at run time. */
static const struct value_range_spec freq_spec = {
	value_parse_frequency_bound, value_format_frequency, 10e3, 100e6, true,
};

static int set_range(struct policy_range *r, const struct value_range_spec *spec, const char *v,
		     char *why)
{
	int ret = value_parse_range(v, spec, &r->lo, &r->hi, why);

	if (ret == 0)
		r->set = true;
	return ret;
}

static int set_cpu_quota(void *obj, const char *v, char *why)
{
	return set_range(&((struct policy *)obj)->cpu_quota, &quota_spec, v, why);
}

static int set_cpu_weight(void *obj, const char *v, char *why)
{
	return set_range(&((struct policy *)obj)->cpu_weight, &cpu_weight_spec, v, why);
}

static int set_io_weight(void *obj, const char *v, char *why)
{
	return set_range(&((struct policy *)obj)->io_weight, &weight_spec, v, why);
}

static int set_cpu_frequency(void *obj, const char *v, char *why)
{
	return set_range(&((struct policy *)obj)->cpu_freq_khz, &freq_spec, v, why);
}

/*
 * One duration: the slice the service's threads get while it misses. A
 * range would need a rule for walking it, and a shorter slice has no
 * cost to the service that would call for one: refused.
 */
static int set_slice(void *obj, const char *v, char *why)
{
	struct policy_range *r = &((struct policy *)obj)->slice_ns;
	uint64_t ns;
	int ret;

	if (strstr(v, ".."))
		return value_fail(
			why,
			"a range has no meaning here: give one duration such as 1ms (the slice while the service misses its target)");
	ret = value_parse_duration_in(v, SLICE_MIN_NS, SLICE_MAX_NS, &ns, why);
	if (ret < 0)
		return ret;
	r->lo = r->hi = (double)ns;
	r->set = true;
	return 0;
}

/*
 * How a best-effort service's weights move: reactive (cut on a violation,
 * given back in slack) or floor (held at the floor of their ranges while
 * a latency-critical service serves; see the engine). Left out: floor,
 * when the policy has a weight.
 */
static int set_weights(void *obj, const char *v, char *why)
{
	struct policy *p = obj;

	if (!strcmp(v, "reactive"))
		p->weights_floor = p->weights_floor_io = false;
	else if (!strcmp(v, "floor"))
		p->weights_floor = p->weights_floor_io = true;
	else
		return value_fail(why, "expected reactive or floor");
	return 0;
}

static const char *const policy_sections[] = { "Service", "Objective", "Limits" };

// clang-format off
static const struct ini_key policy_keys[] = {
	[K_CGROUP] = { S_SERVICE, "Cgroup", "a cgroup path such as lc.slice/web.service", set_cgroup },
	[K_UNIT] = { S_SERVICE, "Unit", "a systemd unit such as web.service, batch.slice or job.scope", set_unit },
	[K_CLASS] = { S_SERVICE, "Class", "latency-critical or best-effort", set_class },
	[K_PERCENTILE] = { S_OBJECTIVE, "Percentile", "a percentile such as 99 or p99.9", set_percentile },
	[K_TARGET] = { S_OBJECTIVE, "Target", "a duration such as 2ms", set_target },
	[K_MIN_REQUESTS] = { S_OBJECTIVE, "MinRequests", "a whole number such as 200", set_min_requests },
	[K_WINDOW] = { S_OBJECTIVE, "Window", "a duration such as 2s", set_window },
	[K_CPU_QUOTA] = { S_LIMITS, "CPUQuota", "a percentage of one CPU or a range such as 10%..200%", set_cpu_quota },
	[K_CPU_WEIGHT] = { S_LIMITS, "CPUWeight", "a weight or a range such as 10..1000 (the low end may be idle)", set_cpu_weight },
	[K_IO_WEIGHT] = { S_LIMITS, "IOWeight", "a weight or a range such as 10..1000", set_io_weight },
	[K_CPU_FREQUENCY] = { S_LIMITS, "CPUFrequency", "a frequency or a range such as 1.2GHz..max", set_cpu_frequency },
	[K_SLICE] = { S_LIMITS, "Slice", "a duration from 0.1ms to 100ms such as 1ms", set_slice },
	[K_WEIGHTS] = { S_LIMITS, "Weights", "reactive or floor", set_weights },
};
// clang-format on

_Static_assert(sizeof(policy_keys) / sizeof(*policy_keys) <= INI_MAX_KEYS,
	       "INI_MAX_KEYS too small for the policy schema");

const struct ini_schema policy_schema = {
	.sections = policy_sections,
	.nsections = sizeof(policy_sections) / sizeof(*policy_sections),
	.keys = policy_keys,
	.nkeys = sizeof(policy_keys) / sizeof(*policy_keys),
	.other = &config_schema,
	.what = "a policy file (*.policy)",
};

/* What a whole file must hold, once every line has been read. */
static int validate_policy(const struct policy *p, const struct ini_seen *seen,
			   struct file_errs *fe)
{
	const unsigned *sl = seen->section_line, *kl = seen->key_line;
	int r = 0;

	if (!*p->name)
		r = file_err(fe, 0, "empty service name: name the file NAME.policy");
	if (r == 0 && !sl[S_SERVICE])
		r = file_err(
			fe, 0,
			"missing section [Service] (Cgroup= or Unit=, and Class= are required)");
	if (r == 0 && sl[S_SERVICE] && !kl[K_CGROUP] && !kl[K_UNIT])
		r = file_err(fe, sl[S_SERVICE],
			     "missing required key Cgroup= (or Unit=) in [Service]");
	if (r == 0 && kl[K_CGROUP] && kl[K_UNIT])
		r = file_err(fe, kl[K_UNIT],
			     "Unit= and Cgroup= (line %u) both name the service's cgroup; keep one",
			     kl[K_CGROUP]);
	if (r == 0 && sl[S_SERVICE] && !kl[K_CLASS])
		r = file_err(fe, sl[S_SERVICE], "missing required key Class= in [Service]");
	if (r < 0 || !seen->key_ok[K_CLASS])
		return r;

	if (p->klass == POLICY_LATENCY_CRITICAL) {
		if (kl[K_WEIGHTS])
			return file_err(
				fe, kl[K_WEIGHTS],
				"Weights= is for best-effort services only (how their weights are taken); this one is latency-critical");
		if (!sl[S_OBJECTIVE])
			return file_err(
				fe, 0,
				"missing section [Objective] (required for latency-critical services)");
		if (!kl[K_TARGET])
			return file_err(fe, sl[S_OBJECTIVE],
					"missing required key Target= in [Objective]");
		return 0;
	}
	if (sl[S_OBJECTIVE])
		r = file_err(
			fe, sl[S_OBJECTIVE],
			"[Objective] is for latency-critical services; this one is best-effort");
	if (r == 0 && kl[K_CPU_FREQUENCY])
		r = file_err(
			fe, kl[K_CPU_FREQUENCY],
			"CPUFrequency= is for latency-critical services only; this one is best-effort");
	if (r == 0 && kl[K_SLICE])
		r = file_err(
			fe, kl[K_SLICE],
			"Slice= is for latency-critical services only (their threads get the short slice); this one is best-effort");
	if (r == 0 && kl[K_WEIGHTS] && p->weights_floor && !kl[K_CPU_WEIGHT] && !kl[K_IO_WEIGHT])
		r = file_err(
			fe, kl[K_WEIGHTS],
			"Weights=floor needs CPUWeight= or IOWeight= in [Limits] (the floor it holds them at)");
	if (r == 0 && !kl[K_CPU_QUOTA] && !kl[K_CPU_WEIGHT] && !kl[K_IO_WEIGHT])
		r = file_err(
			fe, sl[S_LIMITS],
			"a best-effort service needs at least one of CPUQuota=, CPUWeight= or IOWeight= in [Limits] (what may be taken from it)");
	return r;
}

/* "dir/web.policy" -> "web" */
static char *service_name(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n >= 7 && !strcmp(base + n - 7, ".policy"))
		n -= 7;
	return strndup(base, n);
}

static void policy_clear(struct policy *p)
{
	free(p->name);
	free(p->file);
	free(p->cgroup);
	free(p->unit);
}

void policy_set_free(struct policy_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		policy_clear(&s->v[i]);
	free(s->v);
	free(s);
}

/* The state of one policy_set_load() call. */
struct loader {
	struct policy_set *set;
	unsigned *cgroup_line; /* per policy, for set-wide messages */
	unsigned *freq_line;   /* per policy: CPUFrequency='s line, 0 when absent */
	struct file_id {
		dev_t dev;
		ino_t ino;
	} * ids; /* per policy: a file named twice is read once */
	struct policy_errors *errs;
};

static int loader_add(struct loader *ld, const char *path, const struct stat *st,
		      struct policy **out)
{
	size_t n = ld->set->n;
	struct policy *v;
	unsigned *cl;
	struct file_id *ids;

	v = realloc(ld->set->v, (n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ld->set->v = v;
	cl = realloc(ld->cgroup_line, (n + 1) * sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	ld->cgroup_line = cl;
	cl = realloc(ld->freq_line, (n + 1) * sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	ld->freq_line = cl;
	cl[n] = 0;
	ids = realloc(ld->ids, (n + 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	ld->ids = ids;
	v[n] = (struct policy){
		.percentile = TW_POLICY_PERCENTILE,
		.min_requests = TW_POLICY_MIN_REQUESTS,
		.window_ns = TW_POLICY_WINDOW_NS,
	};
	v[n].file = strdup(path);
	v[n].name = service_name(path);
	ld->set->n++;
	if (!v[n].file || !v[n].name)
		return -ENOMEM;
	ld->cgroup_line[n] = 0;
	ids[n] = (struct file_id){ st->st_dev, st->st_ino };
	*out = &v[n];
	return 0;
}

static int load_policy_file(struct loader *ld, const char *path, const struct stat *st)
{
	struct ini_seen seen = { 0 };
	struct file_errs fe;
	struct policy *p;
	char *data;
	size_t len;
	int r;

	for (size_t i = 0; i < ld->set->n; i++)
		if (ld->ids[i].dev == st->st_dev && ld->ids[i].ino == st->st_ino)
			return 0;
	file_errs_init(&fe, ld->errs, path);
	r = ini_read_file(&fe, path, &data, &len);
	if (r < 0 || !data)
		return r;
	r = loader_add(ld, path, st, &p);
	if (r == 0)
		r = ini_parse_buffer(data, len, &policy_schema, p, &seen, &fe);
	free(data);
	if (r < 0)
		return r;
	p->line = seen.section_line[S_SERVICE];
	ld->cgroup_line[ld->set->n - 1] =
		seen.key_line[K_CGROUP] ? seen.key_line[K_CGROUP] : seen.key_line[K_UNIT];
	ld->freq_line[ld->set->n - 1] =
		seen.key_ok[K_CPU_FREQUENCY] ? seen.key_line[K_CPU_FREQUENCY] : 0;
	r = validate_policy(p, &seen, &fe);
	/*
	 * Weights= left out: the CPU weight at its floor, the I/O weight
	 * reactive. Under BFQ an I/O weight held low from the start was not
	 * shown to help (docs/design.md): only Weights=floor written holds it.
	 */
	if (r == 0 && p->klass == POLICY_BEST_EFFORT && !seen.key_line[K_WEIGHTS])
		p->weights_floor = seen.key_line[K_CPU_WEIGHT];
	file_errs_sort(&fe);
	return r;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.policy files of dir, in name order; hidden files are skipped. */
static int list_dir(const char *dir, char ***out, size_t *n)
{
	char **v = NULL, **nv;
	struct dirent *de;
	DIR *d;
	int r = 0;

	*n = 0;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((errno = 0, de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len <= 7 || strcmp(de->d_name + len - 7, ".policy"))
			continue;
		nv = realloc(v, (*n + 1) * sizeof(*v));
		if (!nv || !(nv[*n] = strdup(de->d_name))) {
			v = nv ? nv : v;
			r = -ENOMEM;
			break;
		}
		v = nv;
		(*n)++;
	}
	if (!r && errno)
		r = -errno;
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		return r;
	}
	if (*n)
		qsort(v, *n, sizeof(*v), name_cmp);
	*out = v;
	return 0;
}

static int load_policy_dir(struct loader *ld, const char *dir)
{
	size_t n = 0, dl = strlen(dir);
	char **names = NULL;
	int r;

	r = list_dir(dir, &names, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return policy_error_add(ld->errs, dir, 0, "cannot read directory: %s",
					strerror(-r));
	for (size_t i = 0; i < n && r == 0; i++) {
		struct stat st;
		char *path;

		if (asprintf(&path, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", names[i]) <
		    0) {
			r = -ENOMEM;
			break;
		}
		if (stat(path, &st) < 0)
			r = policy_error_add(ld->errs, path, 0, "cannot read: %s", strerror(errno));
		else if (!S_ISREG(st.st_mode))
			r = policy_error_add(ld->errs, path, 0, "not a regular file");
		else
			r = load_policy_file(ld, path, &st);
		free(path);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/* Is a a proper ancestor of b ("/x" of "/x/y", not of "/xy")? */
static bool cgroup_contains(const char *a, const char *b)
{
	size_t n = strlen(a);

	return !strncmp(a, b, n) && b[n] == '/';
}

/*
 * The first conflict of policy i with an earlier one, as an error; 0 when
 * none (or one was added), -ENOMEM. One per file: a thousand policies on
 * one cgroup give a thousand lines, not half a million.
 */
static int first_conflict(struct loader *ld, size_t i)
{
	const struct policy *v = ld->set->v, *p = &v[i];
	unsigned cl = ld->cgroup_line[i];

	for (size_t j = 0; j < i; j++) {
		const struct policy *q = &v[j];
		unsigned ql = ld->cgroup_line[j];

		if (!strcmp(p->name, q->name))
			return policy_error_add(ld->errs, p->file, p->line,
						"duplicate service '%s': also defined in %s",
						p->name, q->file);
		if (p->unit && q->unit && !strcmp(p->unit, q->unit))
			return policy_error_add(
				ld->errs, p->file, cl,
				"unit %s is also controlled by service '%s' (%s:%u)", p->unit,
				q->name, q->file, ql);
		if (!p->cgroup || !q->cgroup)
			continue;
		if (!strcmp(p->cgroup, q->cgroup))
			return policy_error_add(
				ld->errs, p->file, cl,
				"cgroup %s is also controlled by service '%s' (%s:%u)", p->cgroup,
				q->name, q->file, ql);
		if (cgroup_contains(q->cgroup, p->cgroup))
			return policy_error_add(
				ld->errs, p->file, cl,
				"cgroup %s is inside %s of service '%s' (%s:%u); nested cgroups cannot both have a policy",
				p->cgroup, q->cgroup, q->name, q->file, ql);
		if (cgroup_contains(p->cgroup, q->cgroup))
			return policy_error_add(
				ld->errs, p->file, cl,
				"cgroup %s contains %s of service '%s' (%s:%u); nested cgroups cannot both have a policy",
				p->cgroup, q->cgroup, q->name, q->file, ql);
	}
	/*
	 * A service's CPUs are its cpuset's, known only at run time and free
	 * to change: any two policies may share a CPU, and the frequency of
	 * a CPU can follow one of them only (else a restore leaves the
	 * second's value).
	 */
	for (size_t j = 0; ld->freq_line[i] && j < i; j++)
		if (ld->freq_line[j])
			return policy_error_add(
				ld->errs, p->file, ld->freq_line[i],
				"CPUFrequency= is also set by service '%s' (%s:%u); at most one policy may set the CPUs' frequency",
				v[j].name, v[j].file, ld->freq_line[j]);
	return 0;
}

/* Rules across files: one policy per service name, cgroup subtree and CPU frequency. */
static int check_set(struct loader *ld)
{
	int r = 0;

	for (size_t i = 0; i < ld->set->n && r == 0; i++)
		r = first_conflict(ld, i);
	return r;
}

static int load_paths(struct loader *ld, char *const *paths, size_t n)
{
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i++) {
		struct stat st;

		if (stat(paths[i], &st) < 0)
			r = policy_error_add(ld->errs, paths[i], 0, "cannot read: %s",
					     strerror(errno));
		else if (S_ISDIR(st.st_mode))
			r = load_policy_dir(ld, paths[i]);
		else
			r = load_policy_file(ld, paths[i], &st);
	}
	return r;
}

int policy_set_load(char *const *paths, size_t n, struct policy_set **out,
		    struct policy_errors *errs)
{
	struct loader ld = { .errs = errs };
	size_t err0 = errs->n;
	int r;

	ld.set = calloc(1, sizeof(*ld.set));
	if (!ld.set)
		return -ENOMEM;
	r = load_paths(&ld, paths, n);
	if (r == 0)
		r = check_set(&ld);
	/* Nothing read and nothing wrong: every path was an empty directory. */
	if (r == 0 && ld.set->n == 0 && errs->n == err0) {
		if (!n)
			r = policy_error_add(errs, "policies", 0, "no policy files given");
		for (size_t i = 0; i < n && r == 0; i++)
			r = policy_error_add(errs, paths[i], 0,
					     "no policy files (*.policy) in this directory");
	}
	free(ld.cgroup_line);
	free(ld.freq_line);
	free(ld.ids);
	if (r == 0 && errs->n > err0)
		r = -EINVAL;
	if (r < 0) {
		policy_set_free(ld.set);
		return r;
	}
	*out = ld.set;
	return 0;
}

/* ---- descriptions ---- */

struct sbuf {
	char *buf;
	size_t len, off; /* off may pass len: snprintf's "would have written" */
};

static void sb_printf(struct sbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	size_t room = sb->off < sb->len ? sb->len - sb->off : 0;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(room ? sb->buf + sb->off : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		sb->off += n;
}

static void sb_range(struct sbuf *sb, const char *name, const struct policy_range *r,
		     void (*format)(double, char *, size_t), bool *first)
{
	char lo[32], hi[32];

	if (!r->set)
		return;
	format(r->lo, lo, sizeof(lo));
	format(r->hi, hi, sizeof(hi));
	sb_printf(sb, "%s%s %s", *first ? "" : ", ", name, lo);
	if (r->lo != r->hi)
		sb_printf(sb, "..%s", hi);
	*first = false;
}

static void format_slice(double ns, char *buf, size_t len)
{
	value_format_duration((uint64_t)ns, buf, len);
}

const struct policy_range *policy_range_of(const struct policy *p, enum action_knob k)
{
	switch (k) {
	case KNOB_CPU_QUOTA:
		return &p->cpu_quota;
	case KNOB_CPU_WEIGHT:
		return &p->cpu_weight;
	case KNOB_IO_WEIGHT:
		return &p->io_weight;
	case KNOB_CPU_FREQ:
		return &p->cpu_freq_khz;
	case KNOB_SCHED_SLICE:
		return &p->slice_ns;
	default:
		return NULL;
	}
}

int policy_describe(const struct policy *p, char *buf, size_t len)
{
	struct sbuf sb = { buf, len, 0 };
	char pct[32], target[32], window[32];
	bool first = true;

	if (len)
		buf[0] = '\0';
	sb_printf(&sb, "%s: %s %s%s", p->name,
		  p->klass == POLICY_LATENCY_CRITICAL ? "latency-critical" : "best-effort",
		  p->unit ? "unit " : "",
		  p->cgroup ? p->cgroup :
		  p->unit   ? p->unit :
			      "(no cgroup)");
	if (p->klass == POLICY_LATENCY_CRITICAL) {
		value_format_number(p->percentile * 100, pct, sizeof(pct));
		value_format_duration(p->target_ns, target, sizeof(target));
		value_format_duration(p->window_ns, window, sizeof(window));
		sb_printf(&sb, " p%s <= %s (window %s, min %llu requests)", pct, target, window,
			  (unsigned long long)p->min_requests);
	}
	sb_printf(&sb, "; limits: ");
	sb_range(&sb, "CPUQuota", &p->cpu_quota, value_format_percent, &first);
	sb_range(&sb, "CPUWeight", &p->cpu_weight, value_format_cpu_weight, &first);
	sb_range(&sb, "IOWeight", &p->io_weight, value_format_number, &first);
	sb_range(&sb, "CPUFrequency", &p->cpu_freq_khz, value_format_frequency, &first);
	sb_range(&sb, "Slice", &p->slice_ns, format_slice, &first);
	if (first)
		sb_printf(&sb, "none");
	if (p->weights_floor && p->weights_floor_io)
		sb_printf(&sb, "; weights at their floor while a latency-critical service serves");
	else if (p->weights_floor)
		sb_printf(&sb, "; CPU weight at its floor while a latency-critical service serves");
	return sb.off;
}
