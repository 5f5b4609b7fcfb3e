// SPDX-License-Identifier: GPL-2.0
/*
 * Actuators on cgroupfs (v2 cpu.max, cpu.weight, io.bfq.weight or io.weight;
 * v1 cpu.cfs_quota_us/cpu.cfs_period_us, cpu.shares, blkio.bfq.weight) and on
 * the CPU frequency (knob_freq.c). Each write reads the file, writes, and
 * reads back; a value the kernel did not keep is -EIO. The comparison is
 * made in the file's own units, since converting to v1 units loses
 * precision; for the same reason knob_read() hands back the exact value
 * last written while the file still holds it, so that the caller's
 * "did someone else change it?" test never fires on our own rounding.
 *
 * Conversions (canonical units of policies/policy.h):
 *   quota    fraction of one CPU <-> QUOTA/PERIOD µs, keeping the period
 *            the cgroup has; INFINITY <-> "max" (v2) / -1 (v1). Quotas
 *            below the kernel's 1 ms minimum are -ERANGE.
 *   weight   cpu.weight 1..10000 as is (rounded to an integer); v1
 *            cpu.shares as systemd does it (knob_weight_to_shares).
 *   io       v2 io.weight "default N" as is; the BFQ scheduler's own files
 *            (v2 io.bfq.weight "default N", v1 blkio.bfq.weight) one to
 *            one, saturating at 1000 (knob_io_weight_to_bfq).
 *
 * On cgroup v2 a knob's file exists only while its controller is enabled
 * in the parent's cgroup.subtree_control; knob_subtree_plan() and
 * knob_subtree_write() (at the end) find and make that change, and
 * knob_subtree_restore() undoes it.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/log.h"
#include "controller/knob.h"
#include "controller/knob_freq.h"

/* systemd's constants (src/basic/cgroup-util.h) */
#define CG_WEIGHT_MIN 1UL
#define CG_WEIGHT_DEFAULT 100UL
#define CG_WEIGHT_MAX 10000UL
#define CG_SHARES_DEFAULT 1024UL
#define CG_SHARES_MIN 2UL
#define CG_SHARES_MAX 262144UL
#define CG_BFQ_WEIGHT_MIN 1UL
#define CG_BFQ_WEIGHT_DEFAULT 100UL
#define CG_BFQ_WEIGHT_MAX 1000UL

#define QUOTA_MIN_US 1000LL /* the kernel refuses shorter quotas */

struct slot {
	const char *why;   /* NULL when available */
	const char *ctrl;  /* v2: the controller not enabled for the cgroup, or NULL */
	bool v2;
	bool bfq;          /* io.bfq.weight or blkio.bfq.weight: 1..1000 */
	char *file;        /* the value; v1 quota: cpu.cfs_quota_us */
	char *period;      /* v1 quota only: cpu.cfs_period_us */
	char *shown;       /* for logs, relative to the base */
	bool written;      /* our last write verified; the two below valid */
	long long wval;    /* as written, file units */
	long long wperiod; /* the quota's period then */
	double wcanon;     /* as asked, canonical units */
};

struct knobs {
	struct slot s[KNOB_MAX];
	unsigned *cpus;        /* frequency: the CPUs we act on */
	size_t ncpus;
	unsigned long *wkhz;   /* as written, per CPU */
};

static unsigned long clampul(unsigned long v, unsigned long lo, unsigned long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

unsigned long knob_weight_to_shares(unsigned long weight)
{
	return clampul(weight * CG_SHARES_DEFAULT / CG_WEIGHT_DEFAULT, CG_SHARES_MIN, CG_SHARES_MAX);
}

unsigned long knob_shares_to_weight(unsigned long shares)
{
	/* 1024/100 > 1, so each integer weight has shares of its own: ceil inverts. */
	return clampul((shares * CG_WEIGHT_DEFAULT + CG_SHARES_DEFAULT - 1) / CG_SHARES_DEFAULT,
		       CG_WEIGHT_MIN, CG_WEIGHT_MAX);
}

/*
 * v1 blkio.bfq.weight (1..1000, default 100) from the v2 io.weight scale
 * (1..10000, default 100): one to one where both exist, so the default
 * stays the default and IOWeight=10 against a default neighbour is the
 * same 10:1 as on v2; weights above 1000 saturate. (systemd 252 converts
 * twice on v1 and squeezes everything into 10..181, which would make a
 * cut to 10 only a 2:1 ratio; we write the file directly, so we do not
 * inherit that.)
 */
unsigned long knob_io_weight_to_bfq(unsigned long weight)
{
	return clampul(weight, CG_BFQ_WEIGHT_MIN, CG_BFQ_WEIGHT_MAX);
}

unsigned long knob_bfq_to_io_weight(unsigned long bfq)
{
	return clampul(bfq, CG_WEIGHT_MIN, CG_BFQ_WEIGHT_MAX);
}

/* ------------------------------------------------------------------ */
/* files */

static int errno_cg(int e)
{
	/* A removed cgroup's open files answer ENODEV. */
	return e == ENODEV ? -ENOENT : -e;
}

/* The first line of a small file, without its newline. */
static int read_line(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno_cg(errno);
	n = read(fd, buf, len - 1);
	if (n < 0)
		r = errno_cg(errno);
	close(fd);
	if (r)
		return r;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Write s whole to fd, then close it; a short write is -EIO. */
static int fd_write_str(int fd, const char *s)
{
	ssize_t n = write(fd, s, strlen(s));
	int r = 0;

	if (n < 0)
		r = errno_cg(errno);
	else if ((size_t)n != strlen(s))
		r = -EIO;
	close(fd);
	return r;
}

static int write_str(const char *path, const char *s)
{
	/* O_TRUNC: harmless on cgroupfs, needed on the trees tests build. */
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

	if (fd < 0)
		return errno_cg(errno);
	return fd_write_str(fd, s);
}

static int parse_ll(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	if (errno || end == s || (*end && *end != ' ' && *end != '\n'))
		return -EBADMSG;
	return 0;
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* ------------------------------------------------------------------ */
/* one knob in file units */

/* The value in file units (quota: µs, -1 for max) and, for the quota, the period. */
static int fread_value(const struct slot *s, enum action_knob kind, long long *v, long long *period)
{
	char buf[256], *p = buf;
	int r;

	r = read_line(s->file, buf, sizeof(buf));
	if (r)
		return r;
	if (kind == KNOB_CPU_QUOTA && s->v2) {
		char *sp = strchr(buf, ' ');

		if (!sp || parse_ll(sp + 1, period))
			return -EBADMSG;
		*sp = '\0';
		if (!strcmp(buf, "max")) {
			*v = -1;
			return 0;
		}
		return parse_ll(buf, v);
	}
	if (kind == KNOB_CPU_QUOTA) {
		char pb[64];

		r = read_line(s->period, pb, sizeof(pb));
		if (r || (r = parse_ll(pb, period)))
			return r;
	}
	/* v2 io.weight, and blkio.bfq.weight on some kernels: "default N" */
	if (!strncmp(p, "default ", 8))
		p += 8;
	return parse_ll(p, v);
}

/* What to write into s->file for value v (file units). */
static void fformat(const struct slot *s, enum action_knob kind, long long v, long long period,
		    char *buf, size_t len)
{
	if (kind == KNOB_CPU_QUOTA && s->v2) {
		if (v < 0)
			snprintf(buf, len, "max %lld", period);
		else
			snprintf(buf, len, "%lld %lld", v, period);
	} else if (kind == KNOB_IO_WEIGHT && s->v2) {
		snprintf(buf, len, "default %lld", v);
	} else {
		snprintf(buf, len, "%lld", v);
	}
}

static int to_file_units(const struct slot *s, enum action_knob kind, double v, long long period,
			 long long *out)
{
	long long w;

	if (kind == KNOB_CPU_QUOTA) {
		if (isinf(v) && v > 0) {
			*out = -1;
			return 0;
		}
		if (!isfinite(v) || v <= 0 || period <= 0 || v * period > 1e15 ||
		    llround(v * period) < QUOTA_MIN_US)
			return -ERANGE;
		*out = llround(v * period);
		return 0;
	}
	if (!isfinite(v))
		return -ERANGE;
	w = llround(v);
	if (w < (long long)CG_WEIGHT_MIN || w > (long long)CG_WEIGHT_MAX)
		return -ERANGE;
	if (kind == KNOB_CPU_WEIGHT)
		*out = s->v2 ? w : (long long)knob_weight_to_shares(w);
	else
		*out = s->bfq ? (long long)knob_io_weight_to_bfq(w) : w;
	return 0;
}

static int to_canonical(const struct slot *s, enum action_knob kind, long long v, long long period,
			double *out)
{
	if (kind == KNOB_CPU_QUOTA) {
		if (v < 0) {
			*out = INFINITY;
			return 0;
		}
		if (period <= 0)
			return -EBADMSG;
		*out = (double)v / period;
		return 0;
	}
	if (v < 0)
		return -EBADMSG;
	if (kind == KNOB_CPU_WEIGHT)
		*out = s->v2 ? (double)v : knob_shares_to_weight(v);
	else
		*out = s->bfq ? knob_bfq_to_io_weight(v) : (double)v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* frequency */

static int freq_read(struct knobs *k, double *value)
{
	struct slot *s = &k->s[KNOB_CPU_FREQ];
	unsigned long min = ULONG_MAX;
	bool ours = s->written;
	int seen = 0;

	for (size_t i = 0; i < k->ncpus; i++) {
		unsigned long khz;
		int r = knob_freq_get_max(k->cpus[i], &khz);

		if (r == -ENOENT) /* went offline */
			continue;
		if (r)
			return r;
		seen++;
		ours = ours && khz == k->wkhz[i];
		if (khz < min)
			min = khz;
	}
	if (!seen)
		return -ENODEV;
	/* The slowest CPU bounds a service spread over several. */
	*value = ours ? s->wcanon : (double)min;
	return 0;
}

static int freq_write(struct knobs *k, double value)
{
	struct slot *s = &k->s[KNOB_CPU_FREQ];
	int r;

	if (isnan(value) || value <= 0)
		return -ERANGE;
	s->written = false;
	for (size_t i = 0; i < k->ncpus; i++) {
		unsigned long lo, hi, cur, want;

		if (knob_cpu_online(k->cpus[i]) != 1)
			continue;
		r = knob_freq_limits(k->cpus[i], &lo, &hi);
		if (!r)
			r = knob_freq_get_max(k->cpus[i], &cur);
		if (r)
			return r;
		want = isinf(value) ? hi : clampul(llround(fmin(value, 1e12)), lo, hi);
		r = knob_freq_set_max(k->cpus[i], want);
		if (r)
			return r;
		log_debug("cpu%u scaling_max_freq: %lu -> %lu kHz", k->cpus[i], cur, want);
		k->wkhz[i] = want;
	}
	s->written = true;
	s->wcanon = value;
	return 0;
}

/* ------------------------------------------------------------------ */
/* opening */

/*
 * Fill a cgroupfs slot. dir: the cgroup's directory in the hierarchy that
 * serves this knob; name: its file. *found when dir exists.
 */
static int slot_init(struct slot *s, const char *base, const char *dir, const char *name,
		     const char *period, bool v2, const char *gone, const char *nofile, bool *found)
{
	s->v2 = v2;
	if (asprintf(&s->file, "%s/%s", dir, name) < 0) {
		s->file = NULL;
		return -ENOMEM;
	}
	if (period && asprintf(&s->period, "%s/%s", dir, period) < 0) {
		s->period = NULL;
		return -ENOMEM;
	}
	s->shown = strdup(s->file + strlen(base) + 1);
	if (!s->shown)
		return -ENOMEM;
	if (!exists(dir)) {
		s->why = gone;
		return 0;
	}
	*found = true;
	if (!exists(s->file) || (period && !exists(s->period)))
		s->why = nofile;
	return 0;
}

/*
 * A v2 knob whose file is missing: its controller is not enabled for the
 * cgroup (not in its own cgroup.controllers, which lists what its parent's
 * cgroup.subtree_control gives it), or the kernel lacks the file.
 */
static void v2_missing(struct slot *s, const char *dir, const char *ctrl, const char *nofile)
{
	static const char nocpu[] = "cpu controller not enabled for this cgroup (not in cgroup.subtree_control of its parent)",
		noio[] = "io controller not enabled for this cgroup (not in cgroup.subtree_control of its parent)";
	char path[2 * PATH_MAX + 32], list[512];

	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (read_line(path, list, sizeof(list)) == 0 && has_word(list, ctrl)) {
		s->why = nofile;
		return;
	}
	s->why = strcmp(ctrl, "cpu") ? noio : nocpu;
	s->ctrl = strcmp(ctrl, "cpu") ? "io" : "cpu";
}

static int open_cgroupfs(struct knobs *k, const char *base, const char *rel, const char *ctrl,
			 bool *found)
{
	static const char gone[] = "cgroup does not exist",
		nov1cpu[] = "cgroup not in the cgroup v1 cpu hierarchy (and no cgroup v2 cpu controller)",
		nov1blk[] = "cgroup not in the cgroup v1 blkio hierarchy (and no cgroup v2 io controller)",
		noquota[] = "cpu.cfs_quota_us missing: kernel without CFS bandwidth control",
		nomax[] = "cpu.max missing: kernel without CFS bandwidth control",
		noweight[] = "cpu.weight missing",
		noio[] = "neither io.bfq.weight (the bfq I/O scheduler is not loaded) nor io.weight (no io.cost in this kernel)";
	char v2dir[2 * PATH_MAX + 16], cpudir[2 * PATH_MAX + 16], blkdir[2 * PATH_MAX + 16];
	char bfq[2 * PATH_MAX + 32];
	struct slot *s = k->s;
	int r;

	snprintf(v2dir, sizeof(v2dir), "%s%s", base, rel);
	snprintf(cpudir, sizeof(cpudir), "%s/cpu%s", base, rel);
	snprintf(blkdir, sizeof(blkdir), "%s/blkio%s", base, rel);
	/* A cgroup2 root without those controllers (hybrid hosts) still knows the cgroup. */
	if (*ctrl && exists(v2dir))
		*found = true;
	if (has_word(ctrl, "cpu")) {
		r = slot_init(&s[KNOB_CPU_QUOTA], base, v2dir, "cpu.max", NULL, true, gone, nomax, found);
		if (!r && s[KNOB_CPU_QUOTA].why == nomax)
			v2_missing(&s[KNOB_CPU_QUOTA], v2dir, "cpu", nomax);
		if (!r)
			r = slot_init(&s[KNOB_CPU_WEIGHT], base, v2dir, "cpu.weight", NULL, true, gone,
				      noweight, found);
		if (!r && s[KNOB_CPU_WEIGHT].why == noweight)
			v2_missing(&s[KNOB_CPU_WEIGHT], v2dir, "cpu", noweight);
	} else {
		r = slot_init(&s[KNOB_CPU_QUOTA], base, cpudir, "cpu.cfs_quota_us", "cpu.cfs_period_us",
			      false, nov1cpu, noquota, found);
		if (!r)
			r = slot_init(&s[KNOB_CPU_WEIGHT], base, cpudir, "cpu.shares", NULL, false, nov1cpu,
				      "cpu.shares missing", found);
	}
	if (r)
		return r;
	if (!has_word(ctrl, "io")) {
		s[KNOB_IO_WEIGHT].bfq = true;
		return slot_init(&s[KNOB_IO_WEIGHT], base, blkdir, "blkio.bfq.weight", NULL, false, nov1blk,
				 "blkio.bfq.weight missing: no BFQ I/O scheduler in this kernel", found);
	}
	/*
	 * Under BFQ the weight that acts is the scheduler's own io.bfq.weight
	 * (there while the bfq module is loaded); io.weight belongs to the
	 * io.cost controller, which does nothing unless enabled per disk.
	 */
	snprintf(bfq, sizeof(bfq), "%s/io.bfq.weight", v2dir);
	s[KNOB_IO_WEIGHT].bfq = exists(bfq);
	r = slot_init(&s[KNOB_IO_WEIGHT], base, v2dir, s[KNOB_IO_WEIGHT].bfq ? "io.bfq.weight" : "io.weight",
		      NULL, true, gone, noio, found);
	if (!r && s[KNOB_IO_WEIGHT].why == noio)
		v2_missing(&s[KNOB_IO_WEIGHT], v2dir, "io", noio);
	return r;
}

/* The cgroup's CPUs from its cpuset, else all. */
static int cgroup_cpus(const char *base, const char *rel, bool v2cpuset, unsigned **cpus, size_t *n)
{
	char buf[4096], *path;
	int r;

	if (v2cpuset)
		r = asprintf(&path, "%s%s/cpuset.cpus.effective", base, rel);
	else
		r = asprintf(&path, "%s/cpuset%s/cpuset.effective_cpus", base, rel);
	if (r < 0)
		return -ENOMEM;
	r = read_line(path, buf, sizeof(buf));
	free(path);
	if (!r && buf[0]) {
		r = knob_cpulist_parse(buf, cpus, n);
		if (r != -EINVAL)
			return r;
	}
	return knob_cpus_all(cpus, n);
}

static int open_freq(struct knobs *k, const char *base, const char *rel, const char *ctrl)
{
	struct slot *s = &k->s[KNOB_CPU_FREQ];
	char list[256];
	int r;

	r = cgroup_cpus(base, rel, has_word(ctrl, "cpuset"), &k->cpus, &k->ncpus);
	if (r == -ENOMEM)
		return r;
	if (r) {
		k->cpus = NULL;
		k->ncpus = 0;
	}
	if (knob_freq_probe(k->cpus, &k->ncpus, &s->why) == 0) {
		k->wkhz = calloc(k->ncpus, sizeof(*k->wkhz));
		if (!k->wkhz)
			return -ENOMEM;
	}
	knob_cpulist_format(k->cpus, k->ncpus, list, sizeof(list));
	if (asprintf(&s->shown, "cpufreq/scaling_max_freq of CPUs %s", k->ncpus ? list : "(none)") < 0) {
		s->shown = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Paths without "." or ".." components and without a trailing slash. */
static int clean_path(const char *in, char *out, size_t len)
{
	size_t n = strlen(in);

	while (n > 1 && in[n - 1] == '/')
		n--;
	if (n >= len || strstr(in, "/../") || strstr(in, "/./") ||
	    (n >= 3 && !strncmp(in + n - 3, "/..", 3)) || (n >= 2 && !strncmp(in + n - 2, "/.", 2)))
		return -EINVAL;
	memcpy(out, in, n);
	out[n] = '\0';
	return 0;
}

int knobs_open(const char *cgroup_base, const char *rel, struct knobs **out)
{
	char base[PATH_MAX], r_el[PATH_MAX], ctrl[512] = "", path[PATH_MAX + 32];
	struct knobs *k;
	bool found = false;
	int r;

	if (!cgroup_base || !rel || rel[0] != '/' || clean_path(cgroup_base, base, sizeof(base)) ||
	    clean_path(rel, r_el, sizeof(r_el)))
		return -EINVAL;
	if (!strcmp(r_el, "/"))
		r_el[0] = '\0';
	snprintf(path, sizeof(path), "%s/cgroup.controllers", base);
	/* No such file: not a cgroup2 root, v1 it is. Empty: cgroup2 without controllers. */
	if (read_line(path, ctrl, sizeof(ctrl)) == 0 && !ctrl[0])
		strcpy(ctrl, " ");
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	/* Per thread through sched_setattr (knob_slice.c), not a file of the cgroup. */
	k->s[KNOB_SCHED_SLICE].why = "set per thread (knob_slice.c), not a cgroup file";
	r = open_cgroupfs(k, base, r_el, ctrl, &found);
	if (!r && !found)
		r = -ENOENT;
	if (!r)
		r = open_freq(k, base, r_el, ctrl);
	if (r) {
		knobs_free(k);
		return r;
	}
	*out = k;
	return 0;
}

void knobs_free(struct knobs *k)
{
	if (!k)
		return;
	for (int i = 0; i < KNOB_MAX; i++) {
		free(k->s[i].file);
		free(k->s[i].period);
		free(k->s[i].shown);
	}
	free(k->cpus);
	free(k->wkhz);
	free(k);
}

/* ------------------------------------------------------------------ */
/* the API */

static bool kind_ok(enum action_knob kind)
{
	return (int)kind >= 0 && kind < KNOB_MAX;
}

bool knob_available(const struct knobs *k, enum action_knob kind, const char **why)
{
	const char *w = !kind_ok(kind) ? "unknown knob" : k->s[kind].why;

	if (why)
		*why = w;
	return !w;
}

const char *knob_missing_controller(const struct knobs *k, enum action_knob kind)
{
	return kind_ok(kind) ? k->s[kind].ctrl : NULL;
}

const char *knob_path(const struct knobs *k, enum action_knob kind)
{
	if (!kind_ok(kind) || !k->s[kind].shown)
		return "(unknown knob)";
	return k->s[kind].shown;
}

/* The slot of an available knob. 0, -EINVAL or -EOPNOTSUPP. */
static int usable(struct knobs *k, enum action_knob kind, struct slot **s)
{
	if (!kind_ok(kind))
		return -EINVAL;
	*s = &k->s[kind];
	return (*s)->why ? -EOPNOTSUPP : 0;
}

int knob_read(struct knobs *k, enum action_knob kind, double *value)
{
	struct slot *s;
	long long v, period = 0;
	int r;

	r = usable(k, kind, &s);
	if (r)
		return r;
	if (kind == KNOB_CPU_FREQ)
		return freq_read(k, value);
	r = fread_value(s, kind, &v, &period);
	if (r)
		return r;
	if (s->written && v == s->wval && period == s->wperiod) {
		*value = s->wcanon;
		return 0;
	}
	return to_canonical(s, kind, v, period, value);
}

int knob_write(struct knobs *k, enum action_knob kind, double value)
{
	struct slot *s;
	long long cur, period = 0, want, now;
	char buf[64];
	int r;

	r = usable(k, kind, &s);
	if (r)
		return r;
	if (kind == KNOB_CPU_FREQ)
		return freq_write(k, value);
	r = fread_value(s, kind, &cur, &period);
	if (r)
		return r;
	r = to_file_units(s, kind, value, period, &want);
	if (r)
		return r;
	fformat(s, kind, want, period, buf, sizeof(buf));
	s->written = false;
	r = write_str(s->file, buf);
	if (r)
		return r;
	r = fread_value(s, kind, &now, &period);
	if (r)
		return r;
	log_debug("%s: %lld -> %lld (read back %lld)", s->shown, cur, want, now);
	if (now != want)
		return -EIO;
	s->written = true;
	s->wval = want;
	s->wperiod = period;
	s->wcanon = value;
	return 0;
}

/* ------------------------------------------------------------------ */
/* snapshots for the state file */

static int snap_add_file(struct json_object *files, const char *path, const char *value)
{
	struct json_object *f = json_object_new_object();

	if (!f || json_object_object_add(f, "path", json_object_new_string(path)) ||
	    json_object_object_add(f, "value", json_object_new_string(value)) ||
	    json_object_array_add(files, f)) {
		json_object_put(f);
		return -ENOMEM;
	}
	return 0;
}

static int snap_files(struct slot *s, enum action_knob kind, struct json_object *snap)
{
	struct json_object *files = json_object_new_array();
	long long v, period = 0;
	char buf[64];
	int r;

	if (!files || json_object_object_add(snap, "files", files)) {
		json_object_put(files);
		return -ENOMEM;
	}
	r = fread_value(s, kind, &v, &period);
	if (r)
		return r;
	/* The period first: it is never changed, and restoring it is then a no-op. */
	if (s->period) {
		snprintf(buf, sizeof(buf), "%lld", period);
		r = snap_add_file(files, s->period, buf);
		if (r)
			return r;
	}
	fformat(s, kind, v, period, buf, sizeof(buf));
	return snap_add_file(files, s->file, buf);
}

static int snap_cpus(struct knobs *k, struct json_object *snap)
{
	struct json_object *cpus = json_object_new_array();

	if (!cpus || json_object_object_add(snap, "cpus", cpus)) {
		json_object_put(cpus);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k->ncpus; i++) {
		struct json_object *c;
		unsigned long khz;
		int r = knob_freq_get_max(k->cpus[i], &khz);

		if (r == -ENOENT)
			continue;
		if (r)
			return r;
		c = json_object_new_object();
		if (!c || json_object_object_add(c, "cpu", json_object_new_int64(k->cpus[i])) ||
		    json_object_object_add(c, "max_khz", json_object_new_int64(khz)) ||
		    json_object_array_add(cpus, c)) {
			json_object_put(c);
			return -ENOMEM;
		}
	}
	return 0;
}

int knob_snapshot(struct knobs *k, enum action_knob kind, struct json_object **out)
{
	struct json_object *snap;
	struct slot *s;
	int r;

	r = usable(k, kind, &s);
	if (r)
		return r;
	snap = json_object_new_object();
	if (!snap)
		return -ENOMEM;
	r = kind == KNOB_CPU_FREQ ? snap_cpus(k, snap) : snap_files(s, kind, snap);
	if (r) {
		json_object_put(snap);
		return r;
	}
	*out = snap;
	return 0;
}

/* ------------------------------------------------------------------ */
/* restoring a snapshot: a state file is input, not a licence to write */

int knob_open_beneath(int dirfd, const char *rel, int flags, bool walk)
{
	struct open_how how = {
		.flags = (unsigned)flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char buf[PATH_MAX], *comp, *next;
	struct stat st;
	int cur = dirfd, fd;
	long r;

	/* ".." is refused even where it would stay below: a knob's path never needs it. */
	if (!strcmp(rel, "..") || !strncmp(rel, "../", 3) || strstr(rel, "/../") ||
	    (strlen(rel) >= 3 && !strcmp(rel + strlen(rel) - 3, "/..")))
		return -EXDEV;
	if (!walk) {
		r = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (r >= 0)
			return (int)r;
		if (errno != ENOSYS)
			return -errno;
	}
	/* No openat2 (before Linux 5.6): one component at a time, none a link. */
	if (strlen(rel) >= sizeof(buf) || rel[0] == '/')
		return -EXDEV;
	strcpy(buf, rel);
	for (comp = buf;; comp = next) {
		next = strchr(comp, '/');
		if (next)
			*next++ = '\0';
		if (!*comp || !strcmp(comp, ".") || !strcmp(comp, ".."))
			fd = -EXDEV;
		else if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
			fd = -errno;
		else if (S_ISLNK(st.st_mode))
			fd = -ELOOP;
		else if (next)
			fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		else
			fd = openat(cur, comp, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
		if (fd == -1)
			fd = -errno;
		if (cur != dirfd)
			close(cur);
		if (fd < 0 || !next)
			return fd;
		cur = fd;
	}
}

/* Where snapshots are restored: the cgroup root, and what its files may be. */
struct restore_root {
	int fd;
	size_t len;      /* of the base path */
	bool test_tree;  /* a plain directory, not a mount: its own files count */
	dev_t dev;
};

static bool cgroup_fs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 &&
	       ((unsigned long)sf.f_type == CGROUP_SUPER_MAGIC ||
		(unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC);
}

/*
 * The root's directory. On a host it is a mount point (cgroup2, or the
 * tmpfs holding the v1 hierarchies), and every knob file must be on a
 * cgroup file system. A tree that tests build is a plain directory
 * inside another file system: there the files on that same file system
 * count as knob files (and still nothing else: no other mount).
 */
static int root_open(const char *base, struct restore_root *rt)
{
	struct stat st, up;

	rt->fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rt->fd < 0)
		return -errno;
	if (fstat(rt->fd, &st) < 0 || fstatat(rt->fd, "..", &up, 0) < 0) {
		int r = -errno;

		close(rt->fd);
		return r;
	}
	rt->len = strlen(base);
	rt->dev = st.st_dev;
	rt->test_tree = !cgroup_fs(rt->fd) && st.st_dev == up.st_dev && st.st_ino != up.st_ino;
	return 0;
}

/*
 * A knob file below the root, opened without following any symbolic
 * link and never above the root; then it must be a regular file on a
 * cgroup file system (or of the test tree). -ELOOP, -EXDEV, -EMEDIUMTYPE.
 */
static int open_knob_file(const struct restore_root *rt, const char *rel, int flags)
{
	struct stat st;
	int fd = knob_open_beneath(rt->fd, rel, flags, false), r = 0;

	if (fd < 0)
		return errno_cg(-fd);
	if (fstat(fd, &st) < 0)
		r = -errno;
	else if (!S_ISREG(st.st_mode))
		r = -EMEDIUMTYPE;
	else if (!cgroup_fs(fd) && !(rt->test_tree && st.st_dev == rt->dev))
		r = -EMEDIUMTYPE;
	if (r) {
		close(fd);
		return r;
	}
	return fd;
}

static int fd_read_line(int fd, char *buf, size_t len)
{
	ssize_t n = read(fd, buf, len - 1);

	if (n < 0)
		return errno_cg(errno);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int root_read(const struct restore_root *rt, const char *rel, char *buf, size_t len)
{
	int fd = open_knob_file(rt, rel, O_RDONLY), r;

	if (fd < 0)
		return fd;
	r = fd_read_line(fd, buf, len);
	close(fd);
	return r;
}

static int root_write(const struct restore_root *rt, const char *rel, const char *s)
{
	/* O_TRUNC: harmless on cgroupfs, needed on the trees tests build. */
	int fd = open_knob_file(rt, rel, O_WRONLY | O_TRUNC);

	if (fd < 0)
		return fd;
	return fd_write_str(fd, s);
}

/* The whole of s a decimal integer without a sign, within lo..hi. */
static bool int_str(const char *s, long long lo, long long hi)
{
	long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	return !errno && !*end && v >= lo && v <= hi;
}

#define QUOTA_MAX_US ((1LL << 44) - 1) /* the kernel's bandwidth limit */
#define PERIOD_MIN_US 1000LL
#define PERIOD_MAX_US 1000000LL

/* Is v something file name can hold, as we would write it? */
static bool valid_value(const char *name, const char *v)
{
	char a[32], b[32];

	if (!strcmp(name, "cpu.max")) {
		if (sscanf(v, "%31[^ ] %31[^ ]", a, b) != 2 || strlen(a) + strlen(b) + 1 != strlen(v))
			return false;
		return (!strcmp(a, "max") || int_str(a, QUOTA_MIN_US, QUOTA_MAX_US)) &&
		       int_str(b, PERIOD_MIN_US, PERIOD_MAX_US);
	}
	if (!strcmp(name, "cpu.cfs_quota_us"))
		return !strcmp(v, "-1") || int_str(v, QUOTA_MIN_US, QUOTA_MAX_US);
	if (!strcmp(name, "cpu.cfs_period_us"))
		return int_str(v, PERIOD_MIN_US, PERIOD_MAX_US);
	if (!strncmp(v, "default ", 8) && (!strcmp(name, "io.weight") || !strcmp(name, "io.bfq.weight") ||
					   !strcmp(name, "blkio.bfq.weight")))
		v += 8;
	if (!strcmp(name, "cpu.weight") || !strcmp(name, "io.weight"))
		return int_str(v, CG_WEIGHT_MIN, CG_WEIGHT_MAX);
	if (!strcmp(name, "cpu.shares"))
		return int_str(v, CG_SHARES_MIN, CG_SHARES_MAX);
	if (!strcmp(name, "blkio.bfq.weight") || !strcmp(name, "io.bfq.weight"))
		return int_str(v, CG_BFQ_WEIGHT_MIN, CG_BFQ_WEIGHT_MAX);
	return false;
}

/*
 * Is rel (below the root) a file of this knob of this cgroup: the cgroup
 * in the v2 root or in the v1 hierarchy of the knob, and the knob's file?
 * *name: the file's name.
 */
static bool knob_file_of(const char *rel, const char *cgroup, enum action_knob kind, const char **name)
{
	static const struct {
		enum action_knob kind;
		const char *dir, *name;
	} files[] = {
		{ KNOB_CPU_QUOTA, "", "cpu.max" },
		{ KNOB_CPU_QUOTA, "cpu/", "cpu.cfs_quota_us" },
		{ KNOB_CPU_QUOTA, "cpu/", "cpu.cfs_period_us" },
		{ KNOB_CPU_WEIGHT, "", "cpu.weight" },
		{ KNOB_CPU_WEIGHT, "cpu/", "cpu.shares" },
		{ KNOB_IO_WEIGHT, "", "io.weight" },
		{ KNOB_IO_WEIGHT, "", "io.bfq.weight" },
		{ KNOB_IO_WEIGHT, "blkio/", "blkio.bfq.weight" },
	};
	char want[PATH_MAX];

	while (*cgroup == '/')
		cgroup++;
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		if (files[i].kind != kind)
			continue;
		snprintf(want, sizeof(want), "%s%s%s%s", files[i].dir, cgroup, *cgroup ? "/" : "",
			 files[i].name);
		if (!strcmp(rel, want)) {
			*name = files[i].name;
			return true;
		}
	}
	return false;
}

static void report(knob_report_fn fn, void *userdata, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void report(knob_report_fn fn, void *userdata, const char *fmt, ...)
{
	char line[PATH_MAX + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_make_printable(line);
	log_debug("%s", line);
	if (fn)
		fn(userdata, line);
}

static int restore_file(const struct restore_root *rt, const char *path, const char *value,
			knob_report_fn fn, void *userdata)
{
	const char *rel = path + rt->len + 1;
	char cur[256], now[256];
	int r;

	r = root_read(rt, rel, cur, sizeof(cur));
	if (r)
		return r;
	if (!strcmp(cur, value)) {
		report(fn, userdata, "%s: already %s", path, value);
		return 0;
	}
	r = root_write(rt, rel, value);
	if (r)
		return r;
	r = root_read(rt, rel, now, sizeof(now));
	if (r)
		return r;
	if (strcmp(now, value))
		return -EIO;
	report(fn, userdata, "%s: %s -> %s", path, cur, value);
	return 0;
}

static int restore_cpu(unsigned cpu, unsigned long khz, knob_report_fn fn, void *userdata)
{
	unsigned long cur;
	int r;

	if (knob_cpu_online(cpu) != 1) {
		report(fn, userdata, "cpu%u: offline, nothing to restore", cpu);
		return 0;
	}
	r = knob_freq_get_max(cpu, &cur);
	if (r)
		return r;
	if (cur == khz) {
		report(fn, userdata, "cpu%u scaling_max_freq: already %lu kHz", cpu, khz);
		return 0;
	}
	r = knob_freq_set_max(cpu, khz);
	if (r)
		return r;
	report(fn, userdata, "cpu%u scaling_max_freq: %lu -> %lu kHz", cpu, cur, khz);
	return 0;
}

static int why_fail(char *why, size_t len, int r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int why_fail(char *why, size_t len, int r, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
		log_make_printable(why);
	}
	return r;
}

static int64_t int_of(struct json_object *o, const char *key, int64_t dflt)
{
	struct json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : dflt;
}

static int cpus_restore(struct json_object *cpus, knob_report_fn fn, void *userdata, char *why,
			size_t whylen)
{
	size_t n = json_object_array_length(cpus);
	int r;

	/* Each CPU still at what we wrote (or already back), else not ours any more. */
	for (size_t i = 0; i < n; i++) {
		struct json_object *c = json_object_array_get_idx(cpus, i);
		int64_t cpu = int_of(c, "cpu", -1), khz = int_of(c, "max_khz", 0);
		int64_t wrote = int_of(c, "written_khz", 0);
		unsigned long cur;

		if (cpu < 0 || cpu > 65535 || khz <= 0)
			return why_fail(why, whylen, -EBADMSG, "a CPU entry is out of range");
		if (wrote <= 0 || knob_cpu_online(cpu) != 1 || knob_freq_get_max(cpu, &cur))
			continue;
		if ((int64_t)cur != wrote && (int64_t)cur != khz)
			return why_fail(why, whylen, -ESTALE,
					"cpu%lld scaling_max_freq is %lu kHz, we wrote %lld kHz",
					(long long)cpu, cur, (long long)wrote);
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *c = json_object_array_get_idx(cpus, i);

		r = restore_cpu(int_of(c, "cpu", 0), int_of(c, "max_khz", 0), fn, userdata);
		if (r)
			return why_fail(why, whylen, r, "cpu%lld: %s", (long long)int_of(c, "cpu", 0),
					strerror(-r));
	}
	return 0;
}

int knob_snapshot_restore(const char *cgroup_base, const char *cgroup, enum action_knob kind,
			  struct json_object *snap, knob_report_fn fn, void *userdata,
			  char *why, size_t whylen)
{
	struct json_object *files, *cpus, *a, *b, *w;
	struct restore_root rt;
	char base[PATH_MAX];
	size_t n;
	int r = 0;

	if (why && whylen)
		*why = '\0';
	if (json_object_object_get_ex(snap, "cpus", &cpus)) {
		if (kind != KNOB_CPU_FREQ || !json_object_is_type(cpus, json_type_array))
			return why_fail(why, whylen, -EBADMSG, "CPUs recorded for a knob of a cgroup");
		return cpus_restore(cpus, fn, userdata, why, whylen);
	}
	if (!json_object_object_get_ex(snap, "files", &files) ||
	    !json_object_is_type(files, json_type_array) || kind == KNOB_CPU_FREQ)
		return why_fail(why, whylen, -EBADMSG, "no files recorded");
	if (clean_path(cgroup_base, base, sizeof(base)) || base[0] != '/' || !cgroup || cgroup[0] != '/' ||
	    strstr(cgroup, "/../") || strstr(cgroup, "/./"))
		return why_fail(why, whylen, -EBADMSG, "the cgroup or its base is not a clean absolute path");
	n = json_object_array_length(files);
	/* Every path and value checked before anything is touched. */
	for (size_t i = 0; i < n; i++) {
		struct json_object *f = json_object_array_get_idx(files, i);
		const char *path, *value, *name;

		if (!json_object_object_get_ex(f, "path", &a) || !json_object_object_get_ex(f, "value", &b))
			return why_fail(why, whylen, -EBADMSG, "a file entry without path or value");
		path = json_object_get_string(a);
		value = json_object_get_string(b);
		if (!path || !value || strncmp(path, base, strlen(base)) || path[strlen(base)] != '/' ||
		    !knob_file_of(path + strlen(base) + 1, cgroup, kind, &name))
			return why_fail(why, whylen, -EBADMSG, "%s is not a %s file of %s under %s",
					path ? path : "(none)", action_knob_name(kind), cgroup,
					base);
		if (!valid_value(name, value))
			return why_fail(why, whylen, -ERANGE, "%s: '%s' is not a valid %s value", path,
					value, name);
		if (json_object_object_get_ex(f, "written", &w) &&
		    (!json_object_get_string(w) || !valid_value(name, json_object_get_string(w))))
			return why_fail(why, whylen, -ERANGE, "%s: written '%s' is not a valid %s value",
					path, json_object_get_string(w), name);
	}
	r = root_open(base, &rt);
	if (r == -ENOENT)
		return r;
	if (r)
		return why_fail(why, whylen, r, "%s: %s", base, strerror(-r));
	/* Still what we wrote last, or already back: else someone else's now. */
	for (size_t i = 0; i < n && !r; i++) {
		struct json_object *f = json_object_array_get_idx(files, i);
		const char *path, *value, *wrote;
		char cur[256];

		json_object_object_get_ex(f, "path", &a);
		json_object_object_get_ex(f, "value", &b);
		path = json_object_get_string(a);
		value = json_object_get_string(b);
		r = root_read(&rt, path + rt.len + 1, cur, sizeof(cur));
		if (r == -ENOENT)
			break;
		if (r)
			break;
		if (!json_object_object_get_ex(f, "written", &w))
			continue;
		wrote = json_object_get_string(w);
		if (strcmp(cur, wrote) && strcmp(cur, value))
			r = why_fail(why, whylen, -ESTALE, "%s is %s, we wrote %s", path, cur, wrote);
	}
	for (size_t i = 0; i < n && !r; i++) {
		struct json_object *f = json_object_array_get_idx(files, i);
		const char *path;

		json_object_object_get_ex(f, "path", &a);
		json_object_object_get_ex(f, "value", &b);
		path = json_object_get_string(a);
		r = restore_file(&rt, path, json_object_get_string(b), fn, userdata);
		if (r && r != -ENOENT)
			break;
	}
	close(rt.fd);
	if (r == -ELOOP)
		return why_fail(why, whylen, r, "a symbolic link on the way to a file of %s; not following it", cgroup);
	if (r == -EXDEV)
		return why_fail(why, whylen, r, "a file of %s resolves outside %s", cgroup, base);
	if (r == -EMEDIUMTYPE)
		return why_fail(why, whylen, r, "a file of %s is not a regular file on a cgroup file system", cgroup);
	if (r && r != -ENOENT && r != -ESTALE)
		return why_fail(why, whylen, r, "%s", strerror(-r));
	return r;
}

/* ------------------------------------------------------------------ */
/*
 * Controllers in cgroup.subtree_control (cgroup v2). A knob's file exists
 * only while its controller is enabled in the parent's subtree_control,
 * and the parent has it to give only if its own parent enabled it, up to
 * the root. Under systemd 252 the cpu controller is enabled only for
 * units with a CPU property, so a plain cgroup often lacks it.
 */

/* A clean cgroup path below the root: leading '/', no ".", "..", "//" or trailing '/'. */
static int subtree_path(const char *cgroup_base, const char *cgroup, char *base, char *cg)
{
	if (!cgroup_base || !cgroup || cgroup[0] != '/' || clean_path(cgroup_base, base, PATH_MAX) ||
	    clean_path(cgroup, cg, PATH_MAX) || strstr(cg, "//"))
		return -EINVAL;
	return 0;
}

int knob_subtree_plan(const char *cgroup_base, const char *rel, const char *ctrl, char *from,
		      size_t fromlen, char *why, size_t whylen)
{
	char base[PATH_MAX], cg[PATH_MAX], path[2 * PATH_MAX + 32], buf[1024];
	const char *next;
	size_t n, m;
	int r;

	*from = '\0';
	if (why && whylen)
		*why = '\0';
	r = subtree_path(cgroup_base, rel, base, cg);
	if (r || !strcmp(cg, "/"))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", base);
	if (read_line(path, buf, sizeof(buf)) || !has_word(buf, ctrl))
		return why_fail(why, whylen, -EOPNOTSUPP,
				"the cgroup2 root %s has no %s controller (not in its cgroup.controllers)", base, ctrl);
	/* Down from the root to the first cgroup whose subtree_control lacks it. */
	for (n = 0;; n = next - cg) {
		snprintf(path, sizeof(path), "%s%.*s/cgroup.subtree_control", base, (int)n, cg);
		r = read_line(path, buf, sizeof(buf));
		if (r)
			return r == -ENOENT ? r : why_fail(why, whylen, r, "%s: %s", path, strerror(-r));
		if (!has_word(buf, ctrl))
			break;
		next = strchr(cg + n + 1, '/');
		if (!next)
			return 0; /* the parent gives it already: nothing to do */
	}
	if (!n)
		return why_fail(why, whylen, -EPERM,
				"the %s controller is not enabled at the cgroup2 root (%s/cgroup.subtree_control is \"%s\"); "
				"that is the system manager's (systemd's) or the administrator's to change, never tailwarden's",
				ctrl, base, buf);
	snprintf(path, sizeof(path), "%s%s", base, cg);
	if (!exists(path))
		return -ENOENT;
	/* Checked before anything is written, so that a refusal changes nothing. */
	for (m = n;; m = next - cg) {
		snprintf(path, sizeof(path), "%s%.*s/cgroup.procs", base, (int)m, cg);
		r = read_line(path, buf, sizeof(buf));
		if (r)
			return r == -ENOENT ? r : why_fail(why, whylen, r, "%s: %s", path, strerror(-r));
		if (buf[0])
			return why_fail(why, whylen, -EBUSY,
					"%.*s has processes of its own (pid %s, cgroup.procs), and cgroup v2 enables no "
					"controller below a cgroup with processes (\"no internal processes\"); move them "
					"into a child cgroup",
					(int)m, cg, buf);
		next = strchr(cg + m + 1, '/');
		if (!next)
			break;
	}
	if (snprintf(from, fromlen, "%.*s", (int)n, cg) >= (int)fromlen)
		return -ENAMETOOLONG;
	return 0;
}

int knob_cgroup_read(const char *cgroup_base, const char *cgroup, const char *name, char *buf,
		     size_t len)
{
	char base[PATH_MAX], cg[PATH_MAX], path[2 * PATH_MAX + 300];
	int r = subtree_path(cgroup_base, cgroup, base, cg);

	if (r)
		return r;
	snprintf(path, sizeof(path), "%s%s/%s", base, strcmp(cg, "/") ? cg : "", name);
	return read_line(path, buf, len);
}

int knob_subtree_write(void *userdata, const char *cgroup_base, const char *cgroup, const char *change)
{
	char base[PATH_MAX], cg[PATH_MAX], rel[PATH_MAX + 32];
	struct restore_root rt;
	int r;

	(void)userdata;
	r = subtree_path(cgroup_base, cgroup, base, cg);
	if (r)
		return r;
	if (!strcmp(cg, "/"))
		return -EPERM; /* the root's is never ours */
	snprintf(rel, sizeof(rel), "%s/cgroup.subtree_control", cg + 1);
	r = root_open(base, &rt);
	if (r)
		return r;
	r = root_write(&rt, rel, change);
	close(rt.fd);
	return r;
}

/* A child's file that holds something else than the kernel's default means it is in use. */
static const struct {
	const char *ctrl, *file, *dflt;
} in_use[] = {
	{ "cpu", "cpu.weight", "100" },
	{ "cpu", "cpu.max", "max 100000" },
	{ "cpu", "cpu.idle", "0" },
	{ "io", "io.weight", "default 100" },
	{ "io", "io.bfq.weight", "default 100" },
	{ "io", "io.max", "" },
	{ "io", "io.latency", "" },
};

/*
 * Does a child cgroup of dir use ctrl now (a value of its own, or ctrl in
 * its own cgroup.subtree_control)? 1 with who naming it, 0, or -errno.
 */
static int child_using(const char *dir, const char *shown, const char *ctrl, char *who, size_t len)
{
	char path[2 * PATH_MAX + 600], buf[128];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);
	int r = 0;

	if (!d)
		return errno_cg(errno);
	while (!r && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		snprintf(path, sizeof(path), "%s/%s/cgroup.subtree_control", dir, de->d_name);
		if (!read_line(path, buf, sizeof(buf)) && has_word(buf, ctrl))
			r = why_fail(who, len, 1, "%s/%s has %s in its own cgroup.subtree_control", shown,
				     de->d_name, ctrl);
		for (size_t i = 0; !r && i < sizeof(in_use) / sizeof(*in_use); i++) {
			if (strcmp(in_use[i].ctrl, ctrl))
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s", dir, de->d_name, in_use[i].file);
			if (read_line(path, buf, sizeof(buf)) || !strcmp(buf, in_use[i].dflt))
				continue;
			r = why_fail(who, len, 1, "%s/%s uses it (%s is \"%s\")", shown, de->d_name,
				     in_use[i].file, buf);
		}
	}
	closedir(d);
	return r;
}

int knob_subtree_restore(const char *cgroup_base, const char *cgroup, const char *ctrl,
			 knob_subtree_write_fn wr, void *wr_data, knob_report_fn fn, void *userdata,
			 char *why, size_t whylen)
{
	char base[PATH_MAX], cg[PATH_MAX], dir[2 * PATH_MAX], cur[1024], now[1024], who[PATH_MAX + 300];
	char change[8];
	int r;

	if (why && whylen)
		*why = '\0';
	if (!ctrl || (strcmp(ctrl, "cpu") && strcmp(ctrl, "io")))
		return why_fail(why, whylen, -EBADMSG, "controller \"%s\" is not cpu or io", ctrl ? ctrl : "");
	if (subtree_path(cgroup_base, cgroup, base, cg) || base[0] != '/')
		return why_fail(why, whylen, -EBADMSG, "the cgroup or its base is not a clean absolute path");
	if (!strcmp(cg, "/"))
		return why_fail(why, whylen, -EPERM, "the cgroup2 root's cgroup.subtree_control is never ours");
	r = knob_cgroup_read(base, cg, "cgroup.subtree_control", cur, sizeof(cur));
	if (r == -ENOENT)
		return r;
	if (r)
		return why_fail(why, whylen, r, "%s%s/cgroup.subtree_control: %s", base, cg, strerror(-r));
	if (!has_word(cur, ctrl)) {
		report(fn, userdata, "%s%s/cgroup.subtree_control: %s already disabled", base, cg, ctrl);
		return 0;
	}
	/* Someone (systemd for another unit) may rely on it since: then it stays. */
	snprintf(dir, sizeof(dir), "%s%s", base, cg);
	r = child_using(dir, cg, ctrl, who, sizeof(who));
	if (r < 0)
		return r == -ENOENT ? r : why_fail(why, whylen, r, "%s: %s", dir, strerror(-r));
	if (r)
		return why_fail(why, whylen, -ESTALE, "%s left enabled: %s", ctrl, who);
	snprintf(change, sizeof(change), "-%s", ctrl);
	r = (wr ? wr : knob_subtree_write)(wr_data, base, cg, change);
	if (r == -EBUSY)
		return why_fail(why, whylen, -ESTALE, "%s left enabled: a child cgroup has it in its own cgroup.subtree_control",
				ctrl);
	if (!r)
		r = knob_cgroup_read(base, cg, "cgroup.subtree_control", now, sizeof(now));
	if (!r && has_word(now, ctrl))
		r = -EIO;
	if (r)
		return r == -ENOENT ? r : why_fail(why, whylen, r, "%s%s/cgroup.subtree_control: %s", base, cg, strerror(-r));
	report(fn, userdata, "%s%s/cgroup.subtree_control: \"%s\" -> \"%s\"", base, cg, cur, now);
	return 0;
}
