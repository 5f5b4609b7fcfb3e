// SPDX-License-Identifier: GPL-2.0
/*
 * Actuators on cgroupfs (v2 cpu.max, cpu.weight, io.bfq.weight or io.weight;
 * v1 cpu.cfs_quota_us/cpu.cfs_period_us, cpu.shares, blkio.bfq.weight) and on
 * the CPU frequency (freq.c). Each write reads the file, writes, and
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
 *            cpu.shares as systemd does it (knob_weight_to_shares). 0 is
 *            "idle": the cgroup's cpu.idle (5.15+, v2 and v1) at 1, as
 *            systemd's CPUWeight=idle. The kernel then shows the least
 *            weight in the weight file, refuses a weight while the group
 *            is idle, and sets the default weight when it leaves idle: so
 *            cpu.idle goes back to 0 before any weight is written, and a
 *            record keeps cpu.idle before the weight, restored in that
 *            order.
 *   io       v2 io.weight "default N" as is; the BFQ scheduler's own files
 *            (v2 io.bfq.weight "default N", v1 blkio.bfq.weight) one to
 *            one, saturating at 1000 (knob_io_weight_to_bfq).
 *
 * On cgroup v2 a knob's file exists only while its controller is enabled
 * in the parent's cgroup.subtree_control; subtree.c finds and makes that
 * change, and undoes it. A record is put back through beneath.c, which
 * treats it as the input it is.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "knobs/knob.h"
#include "knobs/knob_internal.h"
#include "knobs/freq.h"

struct slot {
	const char *why;  /* NULL when available */
	const char *ctrl; /* v2: the controller not enabled for the cgroup, or NULL */
	bool v2;
	bool bfq;	   /* io.bfq.weight or blkio.bfq.weight: 1..1000 */
	char *file;	   /* the value; v1 quota: cpu.cfs_quota_us */
	char *period;	   /* v1 quota only: cpu.cfs_period_us */
	char *idle;	   /* weight only: cpu.idle, NULL when the kernel has none */
	char *shown;	   /* for logs, relative to the base */
	bool written;	   /* our last write verified; the two below valid */
	long long wval;	   /* as written, file units */
	long long wperiod; /* the quota's period then */
	double wcanon;	   /* as asked, canonical units */
};

struct knobs {
	struct slot s[KNOB_MAX];
	unsigned *cpus; /* frequency: the CPUs we act on */
	size_t ncpus;
	unsigned long *wkhz; /* as written, per CPU */
};

static unsigned long clampul(unsigned long v, unsigned long lo, unsigned long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

unsigned long knob_weight_to_shares(unsigned long weight)
{
	return clampul(weight * CG_SHARES_DEFAULT / CG_WEIGHT_DEFAULT, CG_SHARES_MIN,
		       CG_SHARES_MAX);
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

int knob_errno_cg(int e)
{
	/* A removed cgroup's open files answer ENODEV. */
	return e == ENODEV ? -ENOENT : -e;
}

/* The first line of a small file, without its newline. */
int knob_read_line(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return knob_errno_cg(errno);
	n = read(fd, buf, len - 1);
	if (n < 0)
		r = knob_errno_cg(errno);
	close(fd);
	if (r)
		return r;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Write s whole to fd, then close it; a short write is -EIO. */
int knob_fd_write_str(int fd, const char *s)
{
	ssize_t n = write(fd, s, strlen(s));
	int r = 0;

	if (n < 0)
		r = knob_errno_cg(errno);
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
		return knob_errno_cg(errno);
	return knob_fd_write_str(fd, s);
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

bool knob_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

bool knob_has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* ------------------------------------------------------------------ */
/* one knob in file units */

/* cpu.idle of a weight slot: 0 or 1 in *idle. */
static int idle_read(const struct slot *s, long long *idle)
{
	char buf[32];
	int r = knob_read_line(s->idle, buf, sizeof(buf));

	if (r)
		return r;
	r = parse_ll(buf, idle);
	if (!r && *idle != 0 && *idle != 1)
		r = -EBADMSG;
	return r;
}

/*
 * The value in file units (quota: µs, -1 for max; weight: 0 while the
 * group is idle) and, for the quota, the period; for a weight with a
 * cpu.idle file, *period is that file (0 or 1).
 */
static int fread_value(const struct slot *s, enum action_knob kind, long long *v, long long *period)
{
	char buf[256], *p = buf;
	int r;

	r = knob_read_line(s->file, buf, sizeof(buf));
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

		r = knob_read_line(s->period, pb, sizeof(pb));
		if (r || (r = parse_ll(pb, period)))
			return r;
	}
	if (kind == KNOB_CPU_WEIGHT && s->idle) {
		r = idle_read(s, period);
		if (r)
			return r;
		if (*period) {
			*v = 0;
			return 0;
		}
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
	if (kind == KNOB_CPU_WEIGHT && w == 0) {
		*out = 0;
		return s->idle ? 0 : -EOPNOTSUPP;
	}
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
	if (kind == KNOB_CPU_WEIGHT && v == 0) {
		*out = 0;
		return 0;
	}
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
	if (!knob_exists(dir)) {
		s->why = gone;
		return 0;
	}
	*found = true;
	if (!knob_exists(s->file) || (period && !knob_exists(s->period)))
		s->why = nofile;
	return 0;
}

/* The weight's cpu.idle in dir, when the weight is there and the kernel has it (5.15+). */
static int idle_init(struct slot *s, const char *dir)
{
	if (s->why)
		return 0;
	if (asprintf(&s->idle, "%s/cpu.idle", dir) < 0) {
		s->idle = NULL;
		return -ENOMEM;
	}
	if (!knob_exists(s->idle)) {
		free(s->idle);
		s->idle = NULL;
	}
	return 0;
}

/*
 * A v2 knob whose file is missing: its controller is not enabled for the
 * cgroup (not in its own cgroup.controllers, which lists what its parent's
 * cgroup.subtree_control gives it), or the kernel lacks the file.
 */
static void v2_missing(struct slot *s, const char *dir, const char *ctrl, const char *nofile)
{
	static const char nocpu
		[] = "cpu controller not enabled for this cgroup (not in cgroup.subtree_control of its parent)",
	   noio[] =
		   "io controller not enabled for this cgroup (not in cgroup.subtree_control of its parent)";
	char path[2 * PATH_MAX + 32], list[512];

	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (knob_read_line(path, list, sizeof(list)) == 0 && knob_has_word(list, ctrl)) {
		s->why = nofile;
		return;
	}
	s->why = strcmp(ctrl, "cpu") ? noio : nocpu;
	s->ctrl = strcmp(ctrl, "cpu") ? "io" : "cpu";
}

static int open_cgroupfs(struct knobs *k, const char *base, const char *rel, const char *ctrl,
			 bool *found)
{
	static const char gone
		[] = "cgroup does not exist",
	    nov1cpu[] =
		    "cgroup not in the cgroup v1 cpu hierarchy (and no cgroup v2 cpu controller)",
	    nov1blk[] =
		    "cgroup not in the cgroup v1 blkio hierarchy (and no cgroup v2 io controller)",
	    noquota[] = "cpu.cfs_quota_us missing: kernel without CFS bandwidth control",
	    nomax[] = "cpu.max missing: kernel without CFS bandwidth control",
	    noweight[] = "cpu.weight missing",
	    noio[] =
		    "neither io.bfq.weight (the bfq I/O scheduler is not loaded) nor io.weight (no io.cost in this kernel)";
	char v2dir[2 * PATH_MAX + 16], cpudir[2 * PATH_MAX + 16], blkdir[2 * PATH_MAX + 16];
	char bfq[2 * PATH_MAX + 32];
	struct slot *s = k->s;
	int r;

	snprintf(v2dir, sizeof(v2dir), "%s%s", base, rel);
	snprintf(cpudir, sizeof(cpudir), "%s/cpu%s", base, rel);
	snprintf(blkdir, sizeof(blkdir), "%s/blkio%s", base, rel);
	/* A cgroup2 root without those controllers (hybrid hosts) still knows the cgroup. */
	if (*ctrl && knob_exists(v2dir))
		*found = true;
	if (knob_has_word(ctrl, "cpu")) {
		r = slot_init(&s[KNOB_CPU_QUOTA], base, v2dir, "cpu.max", NULL, true, gone, nomax,
			      found);
		if (!r && s[KNOB_CPU_QUOTA].why == nomax)
			v2_missing(&s[KNOB_CPU_QUOTA], v2dir, "cpu", nomax);
		if (!r)
			r = slot_init(&s[KNOB_CPU_WEIGHT], base, v2dir, "cpu.weight", NULL, true,
				      gone, noweight, found);
		if (!r && s[KNOB_CPU_WEIGHT].why == noweight)
			v2_missing(&s[KNOB_CPU_WEIGHT], v2dir, "cpu", noweight);
		if (!r)
			r = idle_init(&s[KNOB_CPU_WEIGHT], v2dir);
	} else {
		r = slot_init(&s[KNOB_CPU_QUOTA], base, cpudir, "cpu.cfs_quota_us",
			      "cpu.cfs_period_us", false, nov1cpu, noquota, found);
		if (!r)
			r = slot_init(&s[KNOB_CPU_WEIGHT], base, cpudir, "cpu.shares", NULL, false,
				      nov1cpu, "cpu.shares missing", found);
		if (!r)
			r = idle_init(&s[KNOB_CPU_WEIGHT], cpudir);
	}
	if (r)
		return r;
	if (!knob_has_word(ctrl, "io")) {
		s[KNOB_IO_WEIGHT].bfq = true;
		return slot_init(
			&s[KNOB_IO_WEIGHT], base, blkdir, "blkio.bfq.weight", NULL, false, nov1blk,
			"blkio.bfq.weight missing: no BFQ I/O scheduler in this kernel", found);
	}
	/*
	 * Under BFQ the weight that acts is the scheduler's own io.bfq.weight
	 * (there while the bfq module is loaded); io.weight belongs to the
	 * io.cost controller, which does nothing unless enabled per disk.
	 */
	snprintf(bfq, sizeof(bfq), "%s/io.bfq.weight", v2dir);
	s[KNOB_IO_WEIGHT].bfq = knob_exists(bfq);
	r = slot_init(&s[KNOB_IO_WEIGHT], base, v2dir,
		      s[KNOB_IO_WEIGHT].bfq ? "io.bfq.weight" : "io.weight", NULL, true, gone, noio,
		      found);
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
	r = knob_read_line(path, buf, sizeof(buf));
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

	r = cgroup_cpus(base, rel, knob_has_word(ctrl, "cpuset"), &k->cpus, &k->ncpus);
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
	if (asprintf(&s->shown, "cpufreq/scaling_max_freq of CPUs %s", k->ncpus ? list : "(none)") <
	    0) {
		s->shown = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Paths without "." or ".." components and without a trailing slash. */
int knob_clean_path(const char *in, char *out, size_t len)
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

	if (!cgroup_base || !rel || rel[0] != '/' ||
	    knob_clean_path(cgroup_base, base, sizeof(base)) ||
	    knob_clean_path(rel, r_el, sizeof(r_el)))
		return -EINVAL;
	if (!strcmp(r_el, "/"))
		r_el[0] = '\0';
	snprintf(path, sizeof(path), "%s/cgroup.controllers", base);
	/* No such file: not a cgroup2 root, v1 it is. Empty: cgroup2 without controllers. */
	if (knob_read_line(path, ctrl, sizeof(ctrl)) == 0 && !ctrl[0])
		strcpy(ctrl, " ");
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	/* Per thread through sched_setattr (slice.c), not a file of the cgroup. */
	k->s[KNOB_SCHED_SLICE].why = "set per thread (slice.c), not a cgroup file";
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
		free(k->s[i].idle);
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

bool knob_weight_can_idle(const struct knobs *k)
{
	return k->s[KNOB_CPU_WEIGHT].idle != NULL;
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
	if (kind == KNOB_CPU_WEIGHT && s->idle && (want == 0 || period))
		/* Idle: cpu.idle 1. A weight: cpu.idle 0 first, or the kernel refuses it. */
		r = write_str(s->idle, want ? "0" : "1");
	if (!r && want)
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
/* records for the state file */

static int file_add(struct knob_record *r, const char *path, const char *value)
{
	struct knob_file *v = realloc(r->files.v, (r->files.n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->files.v = v;
	v += r->files.n;
	memset(v, 0, sizeof(*v));
	v->path = strdup(path);
	v->value = strdup(value);
	if (!v->path || !v->value) {
		free(v->path);
		free(v->value);
		return -ENOMEM;
	}
	r->files.n++;
	return 0;
}

/* The files behind a knob as they are now: the v1 quota's period first (never changed). */
static int snap_files(struct slot *s, enum action_knob kind, struct knob_record *r)
{
	long long v, period = 0;
	char buf[64];
	int ret;

	if (kind == KNOB_CPU_WEIGHT && s->idle) {
		/* cpu.idle first: a restore puts it back to 0 before the weight. */
		ret = idle_read(s, &v);
		if (!ret)
			ret = file_add(r, s->idle, v ? "1" : "0");
		if (!ret)
			ret = knob_read_line(s->file, buf, sizeof(buf));
		return ret ? ret : file_add(r, s->file, buf);
	}
	ret = fread_value(s, kind, &v, &period);
	if (ret)
		return ret;
	if (s->period) {
		snprintf(buf, sizeof(buf), "%lld", period);
		ret = file_add(r, s->period, buf);
		if (ret)
			return ret;
	}
	fformat(s, kind, v, period, buf, sizeof(buf));
	return file_add(r, s->file, buf);
}

static int snap_cpus(struct knobs *k, struct knob_record *r)
{
	r->cpus.v = calloc(k->ncpus ? k->ncpus : 1, sizeof(*r->cpus.v));
	if (!r->cpus.v)
		return -ENOMEM;
	for (size_t i = 0; i < k->ncpus; i++) {
		unsigned long khz;
		int ret = knob_freq_get_max(k->cpus[i], &khz);

		if (ret == -ENOENT)
			continue;
		if (ret)
			return ret;
		r->cpus.v[r->cpus.n].cpu = k->cpus[i];
		r->cpus.v[r->cpus.n++].max_khz = khz;
	}
	return 0;
}

/* The target's knobs: the caller's, or opened for this call (*opened to free). */
static int target_knobs(const struct knob_target *t, struct knobs **k, struct knobs **opened)
{
	*opened = NULL;
	if (t->files) {
		*k = t->files;
		return 0;
	}
	int r = knobs_open(t->cgroup_base, t->cgroup, opened);

	*k = *opened;
	return r;
}

static int files_record(const struct knob_target *t, enum action_knob kind, struct knob_record *r)
{
	struct knobs *k, *opened;
	struct slot *s;
	int ret = target_knobs(t, &k, &opened);

	if (!ret)
		ret = usable(k, kind, &s);
	if (!ret)
		ret = kind == KNOB_CPU_FREQ ? snap_cpus(k, r) : snap_files(s, kind, r);
	knobs_free(opened);
	return ret;
}

static int files_write(const struct knob_target *t, const struct knob_env *env,
		       struct knob_record *r, double value, const char *sval)
{
	struct knobs *k, *opened;
	int ret = target_knobs(t, &k, &opened);

	(void)env;
	(void)sval;
	if (!ret)
		ret = knob_write(k, r->knob, value);
	knobs_free(opened);
	return ret;
}

/* What the files (or CPUs) hold after our write, as the record's "written". */
static int files_written(const struct knob_target *t, struct knob_record *r, double value,
			 const char *sval)
{
	struct knob_record now = { .backend = r->backend };
	int ret;

	(void)sval;
	ret = files_record(t, r->knob, &now);
	for (size_t i = 0; !ret && r->backend == KNOB_BACKEND_CPUFREQ && i < r->cpus.n; i++)
		for (size_t j = 0; j < now.cpus.n; j++)
			if (now.cpus.v[j].cpu == r->cpus.v[i].cpu)
				r->cpus.v[i].written_khz = now.cpus.v[j].max_khz;
	for (size_t i = 0; !ret && r->backend == KNOB_BACKEND_CGROUP && i < r->files.n; i++)
		for (size_t j = 0; j < now.files.n; j++) {
			if (strcmp(now.files.v[j].path, r->files.v[i].path))
				continue;
			free(r->files.v[i].written);
			r->files.v[i].written = strdup(now.files.v[j].value);
			if (!r->files.v[i].written)
				ret = -ENOMEM;
			break;
		}
	knob_record_free(&now);
	if (ret) {
		knob_record_unwritten(r);
		return ret;
	}
	r->written = value;
	r->has_written = true;
	return 0;
}

/* A CPU record: each CPU still at what we wrote (or already back), else not ours any more. */
static int cpus_verify(const struct knob_env *env, struct knob_record *r, char *why, size_t whylen)
{
	(void)env;
	if (why && whylen)
		*why = '\0';
	if (r->knob != KNOB_CPU_FREQ)
		return knob_why_fail(why, whylen, -EBADMSG, "CPUs recorded for a knob of a cgroup");
	for (size_t i = 0; i < r->cpus.n; i++) {
		const struct knob_cpu *c = &r->cpus.v[i];
		unsigned long cur;

		if (c->cpu > 65535 || !c->max_khz)
			return knob_why_fail(why, whylen, -EBADMSG, "a CPU entry is out of range");
		if (!c->written_khz || knob_cpu_online(c->cpu) != 1 ||
		    knob_freq_get_max(c->cpu, &cur))
			continue;
		if (cur != c->written_khz && cur != c->max_khz)
			return knob_why_fail(why, whylen, -ESTALE,
					     "cpu%u scaling_max_freq is %lu kHz, we wrote %lu kHz",
					     c->cpu, cur, c->written_khz);
	}
	return 0;
}

static int cpus_restore(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			void *userdata, char *why, size_t whylen)
{
	(void)env;
	for (size_t i = 0; i < r->cpus.n; i++) {
		int ret = knob_restore_cpu(r->cpus.v[i].cpu, r->cpus.v[i].max_khz, fn, userdata);

		if (ret)
			return knob_why_fail(why, whylen, ret, "cpu%u: %s", r->cpus.v[i].cpu,
					     strerror(-ret));
	}
	return 0;
}

/*
 * A record of a cgroup's files is input (a state file): each path must be
 * that knob's file of that cgroup under the root, each value one the file
 * can hold, before anything is read or written. Then the root, opened.
 */
static int files_open(const struct knob_record *r, struct knob_root *rt, char *why, size_t whylen)
{
	char base[PATH_MAX];
	int ret;

	if (why && whylen)
		*why = '\0';
	if (r->knob == KNOB_CPU_FREQ || r->knob >= KNOB_MAX || r->knob == KNOB_SCHED_SLICE)
		return knob_why_fail(why, whylen, -EBADMSG, "no files recorded");
	if (!r->cgroup_base || knob_clean_path(r->cgroup_base, base, sizeof(base)) ||
	    base[0] != '/' || !r->cgroup || r->cgroup[0] != '/' || strstr(r->cgroup, "/../") ||
	    strstr(r->cgroup, "/./"))
		return knob_why_fail(why, whylen, -EBADMSG,
				     "the cgroup or its base is not a clean absolute path");
	for (size_t i = 0; i < r->files.n; i++) {
		const struct knob_file *f = &r->files.v[i];
		const char *name;

		if (strncmp(f->path, base, strlen(base)) || f->path[strlen(base)] != '/' ||
		    !knob_file_of(f->path + strlen(base) + 1, r->cgroup, r->knob, &name))
			return knob_why_fail(why, whylen, -EBADMSG,
					     "%s is not a %s file of %s under %s", f->path,
					     action_knob_name(r->knob), r->cgroup, base);
		if (!knob_valid_value(name, f->value))
			return knob_why_fail(why, whylen, -ERANGE,
					     "%s: '%s' is not a valid %s value", f->path, f->value,
					     name);
		if (f->written && !knob_valid_value(name, f->written))
			return knob_why_fail(why, whylen, -ERANGE,
					     "%s: written '%s' is not a valid %s value", f->path,
					     f->written, name);
	}
	ret = knob_root_open(base, rt);
	if (ret && ret != -ENOENT)
		return knob_why_fail(why, whylen, ret, "%s: %s", base, strerror(-ret));
	return ret;
}

/* A failure on the way to a file, in words. */
static int files_fail(const struct knob_record *r, int ret, char *why, size_t whylen)
{
	if (ret == -ELOOP)
		return knob_why_fail(why, whylen, ret,
				     "a symbolic link on the way to a file of %s; not following it",
				     r->cgroup);
	if (ret == -EXDEV)
		return knob_why_fail(why, whylen, ret, "a file of %s resolves outside %s",
				     r->cgroup, r->cgroup_base);
	if (ret == -EMEDIUMTYPE)
		return knob_why_fail(why, whylen, ret,
				     "a file of %s is not a regular file on a cgroup file system",
				     r->cgroup);
	if (ret && ret != -ENOENT && ret != -ESTALE)
		return knob_why_fail(why, whylen, ret, "%s", strerror(-ret));
	return ret;
}

/* Still what we wrote last, or already back: else someone else's now. */
static int files_verify(const struct knob_env *env, struct knob_record *r, char *why, size_t whylen)
{
	struct knob_root rt;
	int ret;

	(void)env;
	ret = files_open(r, &rt, why, whylen);
	if (ret)
		return ret;
	for (size_t i = 0; i < r->files.n && !ret; i++) {
		const struct knob_file *f = &r->files.v[i];
		char cur[256];

		ret = knob_root_read(&rt, f->path + rt.len + 1, cur, sizeof(cur));
		if (!ret && f->written && strcmp(cur, f->written) && strcmp(cur, f->value))
			ret = knob_why_fail(why, whylen, -ESTALE, "%s is %s, we wrote %s", f->path,
					    cur, f->written);
	}
	close(rt.fd);
	return files_fail(r, ret, why, whylen);
}

static int files_restore(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			 void *userdata, char *why, size_t whylen)
{
	struct knob_root rt;
	int ret;

	(void)env;
	ret = files_open(r, &rt, why, whylen);
	if (ret)
		return ret;
	for (size_t i = 0; i < r->files.n && !ret; i++) {
		ret = knob_restore_file(&rt, r->files.v[i].path, r->files.v[i].value, fn, userdata);
	}
	close(rt.fd);
	return files_fail(r, ret, why, whylen);
}

const struct knob_backend knob_backend_cgroup = {
	.describe = "cgroup files",
	.record = files_record,
	.write = files_write,
	.written = files_written,
	.verify = files_verify,
	.restore = files_restore,
};

const struct knob_backend knob_backend_cpufreq = {
	.describe = "CPU frequency",
	.record = files_record,
	.write = files_write,
	.written = files_written,
	.verify = cpus_verify,
	.restore = cpus_restore,
};
