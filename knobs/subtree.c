// SPDX-License-Identifier: GPL-2.0
/*
 * Controllers in cgroup.subtree_control (cgroup v2). A knob's file exists
 * only while its controller is enabled in the parent's subtree_control,
 * and the parent has it to give only if its own parent enabled it, up to
 * the root. Under systemd 252 the cpu controller is enabled only for
 * units with a CPU property, so a plain cgroup often lacks it.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "knobs/freq.h"
#include "knobs/knob.h"
#include "knobs/knob_internal.h"

/* A clean cgroup path below the root: leading '/', no ".", "..", "//" or trailing '/'. */
static int subtree_path(const char *cgroup_base, const char *cgroup, char *base, char *cg)
{
	if (!cgroup_base || !cgroup || cgroup[0] != '/' ||
	    knob_clean_path(cgroup_base, base, PATH_MAX) || knob_clean_path(cgroup, cg, PATH_MAX) ||
	    strstr(cg, "//"))
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
	if (knob_read_line(path, buf, sizeof(buf)) || !knob_has_word(buf, ctrl))
		return knob_why_fail(
			why, whylen, -EOPNOTSUPP,
			"the cgroup2 root %s has no %s controller (not in its cgroup.controllers)",
			base, ctrl);
	/* Down from the root to the first cgroup whose subtree_control lacks it. */
	for (n = 0;; n = next - cg) {
		snprintf(path, sizeof(path), "%s%.*s/cgroup.subtree_control", base, (int)n, cg);
		r = knob_read_line(path, buf, sizeof(buf));
		if (r)
			return r == -ENOENT ?
				       r :
				       knob_why_fail(why, whylen, r, "%s: %s", path, strerror(-r));
		if (!knob_has_word(buf, ctrl))
			break;
		next = strchr(cg + n + 1, '/');
		if (!next)
			return 0; /* the parent gives it already: nothing to do */
	}
	if (!n)
		return knob_why_fail(
			why, whylen, -EPERM,
			"the %s controller is not enabled at the cgroup2 root (%s/cgroup.subtree_control is \"%s\"); "
			"that is the system manager's (systemd's) or the administrator's to change, never tailwarden's",
			ctrl, base, buf);
	snprintf(path, sizeof(path), "%s%s", base, cg);
	if (!knob_exists(path))
		return -ENOENT;
	/* Checked before anything is written, so that a refusal changes nothing. */
	for (m = n;; m = next - cg) {
		snprintf(path, sizeof(path), "%s%.*s/cgroup.procs", base, (int)m, cg);
		r = knob_read_line(path, buf, sizeof(buf));
		if (r)
			return r == -ENOENT ?
				       r :
				       knob_why_fail(why, whylen, r, "%s: %s", path, strerror(-r));
		if (buf[0])
			return knob_why_fail(
				why, whylen, -EBUSY,
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
	return knob_read_line(path, buf, len);
}

int knob_subtree_write(void *userdata, const char *cgroup_base, const char *cgroup,
		       const char *change)
{
	char base[PATH_MAX], cg[PATH_MAX], rel[PATH_MAX + 32];
	struct knob_root rt;
	int r;

	(void)userdata;
	r = subtree_path(cgroup_base, cgroup, base, cg);
	if (r)
		return r;
	if (!strcmp(cg, "/"))
		return -EPERM; /* the root's is never ours */
	snprintf(rel, sizeof(rel), "%s/cgroup.subtree_control", cg + 1);
	r = knob_root_open(base, &rt);
	if (r)
		return r;
	r = knob_root_write(&rt, rel, change);
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
		return knob_errno_cg(errno);
	while (!r && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		snprintf(path, sizeof(path), "%s/%s/cgroup.subtree_control", dir, de->d_name);
		if (!knob_read_line(path, buf, sizeof(buf)) && knob_has_word(buf, ctrl))
			r = knob_why_fail(who, len, 1,
					  "%s/%s has %s in its own cgroup.subtree_control", shown,
					  de->d_name, ctrl);
		for (size_t i = 0; !r && i < sizeof(in_use) / sizeof(*in_use); i++) {
			if (strcmp(in_use[i].ctrl, ctrl))
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s", dir, de->d_name, in_use[i].file);
			if (knob_read_line(path, buf, sizeof(buf)) || !strcmp(buf, in_use[i].dflt))
				continue;
			r = knob_why_fail(who, len, 1, "%s/%s uses it (%s is \"%s\")", shown,
					  de->d_name, in_use[i].file, buf);
		}
	}
	closedir(d);
	return r;
}

int knob_subtree_restore(const char *cgroup_base, const char *cgroup, const char *ctrl,
			 knob_subtree_write_fn wr, void *wr_data, knob_report_fn fn, void *userdata,
			 char *why, size_t whylen)
{
	char base[PATH_MAX], cg[PATH_MAX], dir[2 * PATH_MAX], cur[1024], now[1024],
		who[PATH_MAX + 300];
	char change[8];
	int r;

	if (why && whylen)
		*why = '\0';
	if (!ctrl || (strcmp(ctrl, "cpu") && strcmp(ctrl, "io")))
		return knob_why_fail(why, whylen, -EBADMSG, "controller \"%s\" is not cpu or io",
				     ctrl ? ctrl : "");
	if (subtree_path(cgroup_base, cgroup, base, cg) || base[0] != '/')
		return knob_why_fail(why, whylen, -EBADMSG,
				     "the cgroup or its base is not a clean absolute path");
	if (!strcmp(cg, "/"))
		return knob_why_fail(why, whylen, -EPERM,
				     "the cgroup2 root's cgroup.subtree_control is never ours");
	r = knob_cgroup_read(base, cg, "cgroup.subtree_control", cur, sizeof(cur));
	if (r == -ENOENT)
		return r;
	if (r)
		return knob_why_fail(why, whylen, r, "%s%s/cgroup.subtree_control: %s", base, cg,
				     strerror(-r));
	if (!knob_has_word(cur, ctrl)) {
		knob_report(fn, userdata, "%s%s/cgroup.subtree_control: %s already disabled", base,
			    cg, ctrl);
		return 0;
	}
	/* Someone (systemd for another unit) may rely on it since: then it stays. */
	snprintf(dir, sizeof(dir), "%s%s", base, cg);
	r = child_using(dir, cg, ctrl, who, sizeof(who));
	if (r < 0)
		return r == -ENOENT ? r :
				      knob_why_fail(why, whylen, r, "%s: %s", dir, strerror(-r));
	if (r)
		return knob_why_fail(why, whylen, -ESTALE, "%s left enabled: %s", ctrl, who);
	snprintf(change, sizeof(change), "-%s", ctrl);
	r = (wr ? wr : knob_subtree_write)(wr_data, base, cg, change);
	if (r == -EBUSY)
		return knob_why_fail(
			why, whylen, -ESTALE,
			"%s left enabled: a child cgroup has it in its own cgroup.subtree_control",
			ctrl);
	if (!r)
		r = knob_cgroup_read(base, cg, "cgroup.subtree_control", now, sizeof(now));
	if (!r && knob_has_word(now, ctrl))
		r = -EIO;
	if (r)
		return r == -ENOENT ?
			       r :
			       knob_why_fail(why, whylen, r, "%s%s/cgroup.subtree_control: %s",
					     base, cg, strerror(-r));
	knob_report(fn, userdata, "%s%s/cgroup.subtree_control: \"%s\" -> \"%s\"", base, cg, cur,
		    now);
	return 0;
}

/* A controller we enable: the parent's subtree_control as it was, for people. */
static int subtree_record(const struct knob_target *t, enum action_knob kind, struct knob_record *r)
{
	char buf[1024];
	int ret;

	(void)kind;
	ret = knob_cgroup_read(t->cgroup_base, t->cgroup, "cgroup.subtree_control", buf,
			       sizeof(buf));
	if (ret)
		return ret;
	r->subtree.controller = strdup(t->controller);
	r->subtree.original = strdup(buf);
	return r->subtree.controller && r->subtree.original ? 0 : -ENOMEM;
}

static int subtree_do(const struct knob_target *t, const struct knob_env *env,
		      struct knob_record *r, double value, const char *sval)
{
	char change[8], now[1024];
	int ret;

	(void)value;
	(void)sval;
	snprintf(change, sizeof(change), "+%s", r->subtree.controller);
	ret = (env && env->subtree_write ? env->subtree_write : knob_subtree_write)(
		env ? env->subtree_data : NULL, t->cgroup_base, t->cgroup, change);
	if (!ret)
		ret = knob_cgroup_read(t->cgroup_base, t->cgroup, "cgroup.subtree_control", now,
				       sizeof(now));
	if (!ret && !knob_has_word(now, r->subtree.controller))
		ret = -EIO;
	return ret;
}

static int subtree_written(const struct knob_target *t, struct knob_record *r, double value,
			   const char *sval)
{
	(void)t;
	(void)r;
	(void)value;
	(void)sval;
	return 0;
}

/* Whether it is still ours is a question of use: knob_subtree_restore() asks it. */
static int subtree_verify(const struct knob_env *env, struct knob_record *r, char *why,
			  size_t whylen)
{
	(void)env;
	(void)r;
	if (why && whylen)
		*why = '\0';
	return 0;
}

static int subtree_undo(const struct knob_env *env, struct knob_record *r, knob_report_fn fn,
			void *userdata, char *why, size_t whylen)
{
	return knob_subtree_restore(r->cgroup_base, r->cgroup, r->subtree.controller,
				    env ? env->subtree_write : NULL, env ? env->subtree_data : NULL,
				    fn, userdata, why, whylen);
}

const struct knob_backend knob_backend_subtree = {
	.describe = "cgroup v2 controllers",
	.record = subtree_record,
	.write = subtree_do,
	.written = subtree_written,
	.verify = subtree_verify,
	.restore = subtree_undo,
};
