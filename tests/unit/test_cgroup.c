// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for cgroup2 identity (sensing/cgroup.c) on fake cgroup trees
 * built in a temporary directory. A directory counts as a cgroup2 one when
 * it holds a cgroup.controllers file, as on a real cgroupfs.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "sensing/cgroup.h"

/* Short enough that every path built from them fits in PATH_MAX. */
struct tree {
	char base[1024];
	char root[1100];
};

/* Create dir (relative to top) and, when cg, its cgroup.controllers. */
static void mk(const char *top, const char *dir, int cg)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", top, dir);
	if (mkdir(p, 0755) && errno != EEXIST)
		fail_msg("mkdir %s: %s", p, strerror(errno));
	if (!cg)
		return;
	snprintf(p, sizeof(p), "%s/%s/cgroup.controllers", top, dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	close(fd);
}

/* Remove a cgroup directory the way rmdir on cgroupfs would. */
static void rm_cg(const char *top, const char *dir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/cgroup.controllers", top, dir);
	assert_int_equal(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/%s", top, dir);
	assert_int_equal(rmdir(p), 0);
}

static uint64_t ino(const char *top, const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s%s%s", top, *dir ? "/" : "", dir);
	if (stat(p, &st))
		fail_msg("stat %s: %s", p, strerror(errno));
	return st.st_ino;
}

/* The cgroups every layout has, below its cgroup2 root. */
static void mk_cgroups(const char *root)
{
	mk(root, "a", 1);
	mk(root, "a/b", 1);
	mk(root, "system.slice", 1);
	mk(root, "system.slice/nginx.service", 1);
	mk(root, "plain", 0); /* a directory, but not a cgroup */
}

static struct tree *tree_new(void)
{
	struct tree *t = calloc(1, sizeof(*t));
	const char *tmp = getenv("TMPDIR");

	if (!t)
		return NULL;
	snprintf(t->base, sizeof(t->base), "%s/tw-cgroup.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(t->base)) {
		free(t);
		return NULL;
	}
	return t;
}

/* Hybrid host: v1 hierarchies next to a cgroup2 mount at base/unified. */
static int setup_hybrid(void **state)
{
	struct tree *t = tree_new();

	if (!t)
		return -1;
	mk(t->base, "cpu", 0);
	mk(t->base, "cpu/a", 0);
	mk(t->base, "unified", 1);
	snprintf(t->root, sizeof(t->root), "%s/unified", t->base);
	mk_cgroups(t->root);
	*state = t;
	return 0;
}

/* Pure v2 host: base is the cgroup2 root. */
static int setup_v2(void **state)
{
	struct tree *t = tree_new();
	int fd;
	char p[PATH_MAX];

	if (!t)
		return -1;
	snprintf(p, sizeof(p), "%s/cgroup.controllers", t->base);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	snprintf(t->root, sizeof(t->root), "%s", t->base);
	mk_cgroups(t->root);
	*state = t;
	return 0;
}

/* Neither: only v1 hierarchies. */
static int setup_v1(void **state)
{
	struct tree *t = tree_new();

	if (!t)
		return -1;
	mk(t->base, "cpu", 0);
	mk(t->base, "memory", 0);
	mk(t->base, "unified", 0); /* present but not a cgroup2 mount */
	*state = t;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	return type == FTW_DP ? rmdir(p) : unlink(p);
}

static int teardown(void **state)
{
	struct tree *t = *state;
	int r;

	if (!t)
		return 0;
	r = nftw(t->base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return r ? -1 : 0;
}

static void test_root_find_hybrid(void **state)
{
	struct tree *t = *state;
	char root[PATH_MAX];

	assert_int_equal(cg_root_find(t->base, root, sizeof(root)), 0);
	assert_string_equal(root, t->root);
}

static void test_root_find_v2(void **state)
{
	struct tree *t = *state;
	char root[PATH_MAX];

	assert_int_equal(cg_root_find(t->base, root, sizeof(root)), 0);
	assert_string_equal(root, t->base);
}

static void test_root_find_none(void **state)
{
	struct tree *t = *state;
	char root[PATH_MAX];
	char missing[PATH_MAX];

	assert_int_equal(cg_root_find(t->base, root, sizeof(root)), -ENOENT);
	snprintf(missing, sizeof(missing), "%s/does-not-exist", t->base);
	assert_int_equal(cg_root_find(missing, root, sizeof(root)), -ENOENT);
}

static void test_root_find_too_long(void **state)
{
	struct tree *t = *state;
	char root[8];

	assert_int_equal(cg_root_find(t->base, root, sizeof(root)), -ENAMETOOLONG);
}

/* arg must resolve to want (relative to the root) with the directory's inode. */
static void expect_resolve(const struct tree *t, const char *arg, const char *want)
{
	char rel[PATH_MAX];
	uint64_t id = 0, want_id = ino(t->root, want[1] ? want + 1 : "");
	int r;

	r = cg_resolve(t->base, t->root, arg, rel, sizeof(rel), &id);
	if (r)
		fail_msg("cg_resolve(\"%s\") = %d (%s), want %s", arg, r, strerror(-r), want);
	if (strcmp(rel, want))
		fail_msg("cg_resolve(\"%s\") = \"%s\", want \"%s\"", arg, rel, want);
	if (id != want_id)
		fail_msg("cg_resolve(\"%s\") id %llu, want inode %llu", arg, (unsigned long long)id,
			 (unsigned long long)want_id);
}

static void expect_resolve_err(const struct tree *t, const char *arg, int err)
{
	char rel[PATH_MAX];
	uint64_t id = 12345;
	int r = cg_resolve(t->base, t->root, arg, rel, sizeof(rel), &id);

	if (r != err)
		fail_msg("cg_resolve(\"%s\") = %d, want %d (%s)", arg, r, err, strerror(-err));
}

/* Every spelling a user may type for the same cgroup. */
static void check_spellings(const struct tree *t)
{
	char arg[2 * PATH_MAX];

	snprintf(arg, sizeof(arg), "%s/a/b", t->root);
	expect_resolve(t, arg, "/a/b");
	snprintf(arg, sizeof(arg), "%s/a/b", t->base);
	expect_resolve(t, arg, "/a/b");
	snprintf(arg, sizeof(arg), "%s//a//b//", t->root);
	expect_resolve(t, arg, "/a/b");
	snprintf(arg, sizeof(arg), "%s/system.slice/nginx.service/", t->base);
	expect_resolve(t, arg, "/system.slice/nginx.service");
	expect_resolve(t, "/a/b", "/a/b");
	expect_resolve(t, "a/b", "/a/b");
	expect_resolve(t, "a//b", "/a/b");
	expect_resolve(t, "//a/b//", "/a/b");
	expect_resolve(t, "a/b/", "/a/b");
	expect_resolve(t, "./a/./b", "/a/b");
	expect_resolve(t, "a", "/a");
	expect_resolve(t, "system.slice/nginx.service", "/system.slice/nginx.service");

	/* The root itself. */
	expect_resolve(t, "/", "/");
	expect_resolve(t, "//", "/");
	expect_resolve(t, t->root, "/");
	snprintf(arg, sizeof(arg), "%s/", t->root);
	expect_resolve(t, arg, "/");
}

static void check_rejects(const struct tree *t)
{
	char arg[2 * PATH_MAX];

	/* Escapes out of the root. */
	expect_resolve_err(t, "..", -ENOENT);
	expect_resolve_err(t, "../", -ENOENT);
	expect_resolve_err(t, "/..", -ENOENT);
	expect_resolve_err(t, "../cpu", -ENOENT);
	expect_resolve_err(t, "a/../..", -ENOENT);
	expect_resolve_err(t, "/a/b/../../../etc", -ENOENT);
	snprintf(arg, sizeof(arg), "%s/..", t->root);
	expect_resolve_err(t, arg, -ENOENT);
	snprintf(arg, sizeof(arg), "%s/../cpu", t->root);
	expect_resolve_err(t, arg, -ENOENT);

	/* Missing cgroups. */
	expect_resolve_err(t, "nope", -ENOENT);
	expect_resolve_err(t, "/a/nope", -ENOENT);
	expect_resolve_err(t, "a/b/c", -ENOENT);
	snprintf(arg, sizeof(arg), "%s/nope", t->root);
	expect_resolve_err(t, arg, -ENOENT);

	/* A plain directory or a file is not a cgroup. */
	expect_resolve_err(t, "plain", -ENOENT);
	expect_resolve_err(t, "a/cgroup.controllers", -ENOENT);
}

static void test_resolve_hybrid(void **state)
{
	struct tree *t = *state;
	char arg[2 * PATH_MAX];

	check_spellings(t);
	check_rejects(t);
	/* On a hybrid host base/unified/x and base/x both name root/x. */
	snprintf(arg, sizeof(arg), "%s/unified/a", t->base);
	expect_resolve(t, arg, "/a");
	/* A v1 hierarchy under base is not a cgroup2 one. */
	snprintf(arg, sizeof(arg), "%s/cpu/a", t->base);
	expect_resolve_err(t, arg, -ENOENT);
}

static void test_resolve_v2(void **state)
{
	struct tree *t = *state;
	char rel[PATH_MAX];
	uint64_t id;

	check_spellings(t);
	check_rejects(t);
	/* No separate base. */
	assert_int_equal(cg_resolve(NULL, t->root, "a/b", rel, sizeof(rel), &id), 0);
	assert_string_equal(rel, "/a/b");
	assert_int_equal(id, ino(t->root, "a/b"));
	/* id is optional. */
	assert_int_equal(cg_resolve(t->base, t->root, "/a", rel, sizeof(rel), NULL), 0);
	assert_string_equal(rel, "/a");
}

static void test_resolve_too_long(void **state)
{
	struct tree *t = *state;
	char rel[8];
	uint64_t id;

	/* "/a/b" needs 5 bytes with its NUL. */
	assert_int_equal(cg_resolve(t->base, t->root, "a/b", rel, 5, &id), 0);
	assert_string_equal(rel, "/a/b");
	assert_int_equal(cg_resolve(t->base, t->root, "a/b", rel, 4, &id), -ENAMETOOLONG);
	assert_int_equal(cg_resolve(t->base, t->root, "/", rel, 1, &id), -ENAMETOOLONG);
}

static void expect_name(struct cg_names *n, uint64_t id, unsigned min_age_ms, const char *want)
{
	const char *p = cg_names_lookup(n, id, min_age_ms);

	if (!want && p)
		fail_msg("id %llu: got \"%s\", want not found", (unsigned long long)id, p);
	if (want && !p)
		fail_msg("id %llu: not found, want \"%s\"", (unsigned long long)id, want);
	if (want && strcmp(p, want))
		fail_msg("id %llu: got \"%s\", want \"%s\"", (unsigned long long)id, p, want);
}

static void test_names_lookup(void **state)
{
	struct tree *t = *state;
	struct cg_names *n = cg_names_new(t->root);

	assert_non_null(n);
	/* The first lookup scans. */
	expect_name(n, ino(t->root, "a/b"), 1000, "/a/b");
	expect_name(n, ino(t->root, ""), 1000, "/");
	expect_name(n, ino(t->root, "a"), 1000, "/a");
	expect_name(n, ino(t->root, "system.slice/nginx.service"), 1000,
		    "/system.slice/nginx.service");
	/* An id that is no directory here. */
	expect_name(n, ino(t->base, "cpu"), 0, NULL);
	cg_names_free(n);
}

static void test_names_new_cgroup(void **state)
{
	struct tree *t = *state;
	struct cg_names *n = cg_names_new(t->root);
	uint64_t id;

	assert_non_null(n);
	assert_int_equal(cg_names_refresh(n), 0);
	expect_name(n, ino(t->root, "a"), 0, "/a");

	mk(t->root, "a/new", 1);
	id = ino(t->root, "a/new");
	/* Scanned just now: a recent scan is not repeated for an unknown id ... */
	expect_name(n, id, 60000, NULL);
	/* ... unless the caller allows it. */
	expect_name(n, id, 0, "/a/new");
	expect_name(n, ino(t->root, "a/b"), 60000, "/a/b");
	cg_names_free(n);
}

static void test_names_removed_cgroup(void **state)
{
	struct tree *t = *state;
	struct cg_names *n = cg_names_new(t->root);
	uint64_t id = ino(t->root, "a/b");

	assert_non_null(n);
	assert_int_equal(cg_names_refresh(n), 0);
	expect_name(n, id, 0, "/a/b");

	rm_cg(t->root, "a/b");
	assert_int_equal(cg_names_refresh(n), 0);
	expect_name(n, id, 60000, NULL);
	expect_name(n, id, 0, NULL);
	expect_name(n, ino(t->root, "a"), 0, "/a");
	cg_names_free(n);
}

/* More cgroups than the first allocation holds. */
static void test_names_many(void **state)
{
	struct tree *t = *state;
	struct cg_names *n = cg_names_new(t->root);
	char dir[64], want[80];

	assert_non_null(n);
	mk(t->root, "many", 1);
	for (int i = 0; i < 600; i++) {
		snprintf(dir, sizeof(dir), "many/cg%d", i);
		mk(t->root, dir, 1);
	}
	assert_int_equal(cg_names_refresh(n), 0);
	for (int i = 0; i < 600; i++) {
		snprintf(dir, sizeof(dir), "many/cg%d", i);
		snprintf(want, sizeof(want), "/%s", dir);
		expect_name(n, ino(t->root, dir), 60000, want);
	}
	cg_names_free(n);
}

static void test_names_missing_root(void **state)
{
	struct tree *t = *state;
	char p[PATH_MAX];
	struct cg_names *n;

	snprintf(p, sizeof(p), "%s/gone", t->base);
	n = cg_names_new(p);
	assert_non_null(n);
	assert_int_equal(cg_names_refresh(n), -ENOENT);
	expect_name(n, ino(t->root, "a"), 0, NULL);
	cg_names_free(n);
	cg_names_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_root_find_hybrid, setup_hybrid, teardown),
		cmocka_unit_test_setup_teardown(test_root_find_v2, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_root_find_none, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_root_find_too_long, setup_hybrid, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_hybrid, setup_hybrid, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_v2, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_too_long, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_names_lookup, setup_hybrid, teardown),
		cmocka_unit_test_setup_teardown(test_names_new_cgroup, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_names_removed_cgroup, setup_hybrid, teardown),
		cmocka_unit_test_setup_teardown(test_names_many, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_names_missing_root, setup_hybrid, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
