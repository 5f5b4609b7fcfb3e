// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sensing/cgroup.h"
#include "sensing/idtab.h"

static int is_cgroup2_dir(const char *dir)
{
	char p[PATH_MAX];

	if (snprintf(p, sizeof(p), "%s/cgroup.controllers", dir) >= (int)sizeof(p))
		return 0;
	return access(p, F_OK) == 0;
}

int cg_root_find(const char *base, char *root, size_t len)
{
	char p[PATH_MAX];

	/* A pure v2 host has cgroup.controllers at the top. */
	if (is_cgroup2_dir(base)) {
		if (snprintf(root, len, "%s", base) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	snprintf(p, sizeof(p), "%s/unified", base);
	if (is_cgroup2_dir(p)) {
		if (snprintf(root, len, "%s", p) >= (int)len)
			return -ENAMETOOLONG;
		return 0;
	}
	return -ENOENT;
}

/* Strip prefix (a directory) from s: the rest after it, or NULL. */
static const char *strip_dir(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	while (n > 1 && prefix[n - 1] == '/')
		n--;
	if (strncmp(s, prefix, n) || (s[n] != '/' && s[n] != '\0'))
		return NULL;
	return s + n;
}

/* Normalise into "/a/b": single slashes, none trailing, no "." or "..". */
static int clean_rel(const char *p, char *out, size_t len)
{
	size_t o = 0, n;

	for (; *p; p += n) {
		while (*p == '/')
			p++;
		n = strcspn(p, "/");
		if (n == 0 || (n == 1 && p[0] == '.'))
			continue;
		if (n == 2 && !strncmp(p, "..", 2))
			return -ENOENT; /* would escape the root */
		if (o + n + 2 > len)
			return -ENAMETOOLONG;
		out[o++] = '/';
		memcpy(out + o, p, n);
		o += n;
	}
	if (o == 0) {
		if (len < 2)
			return -ENAMETOOLONG;
		out[o++] = '/';
	}
	out[o] = '\0';
	return 0;
}

int cg_resolve(const char *base, const char *root, const char *arg, char *rel, size_t len,
	       uint64_t *id)
{
	char full[PATH_MAX];
	const char *r;
	struct stat st;
	int ret;

	r = strip_dir(arg, root);
	if (!r && base)
		r = strip_dir(arg, base);
	if (!r)
		r = arg;
	ret = clean_rel(r, rel, len);
	if (ret)
		return ret;
	if (snprintf(full, sizeof(full), "%s%s", root, rel) >= (int)sizeof(full))
		return -ENAMETOOLONG;
	if (stat(full, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || !is_cgroup2_dir(full))
		return -ENOENT;
	if (id)
		*id = st.st_ino;
	return 0;
}

struct cg_entry {
	uint64_t id;
	char *path;
};

struct cg_names {
	char *root;
	size_t rootlen;
	struct cg_entry *v;
	size_t n, cap;
	struct timespec scanned;
	int err;
};

struct cg_names *cg_names_new(const char *root)
{
	struct cg_names *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->root = strdup(root);
	if (!n->root) {
		free(n);
		return NULL;
	}
	/* nftw drops a trailing slash; the prefix we strip must too. */
	n->rootlen = strlen(root);
	while (n->rootlen > 1 && n->root[n->rootlen - 1] == '/')
		n->root[--n->rootlen] = '\0';
	return n;
}

static void entries_clear(struct cg_names *n)
{
	for (size_t i = 0; i < n->n; i++)
		free(n->v[i].path);
	n->n = 0;
}

void cg_names_free(struct cg_names *n)
{
	if (!n)
		return;
	entries_clear(n);
	free(n->v);
	free(n->root);
	free(n);
}

/* nftw has no user pointer: the walk is single-threaded, one at a time. */
static struct cg_names *walking;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	struct cg_names *n = walking;
	const char *rel = path + n->rootlen;

	(void)ftw;
	if (type != FTW_D)
		return 0;
	if (idtab_reserve((void **)&n->v, &n->cap, n->n, sizeof(*n->v), 256)) {
		n->err = -ENOMEM;
		return 1;
	}
	n->v[n->n].path = strdup(*rel ? rel : "/");
	if (!n->v[n->n].path) {
		n->err = -ENOMEM;
		return 1;
	}
	n->v[n->n++].id = st->st_ino;
	return 0;
}

int cg_names_refresh(struct cg_names *n)
{
	int r;

	entries_clear(n);
	n->err = 0;
	walking = n;
	/* Cgroups vanish during the walk: ENOENT below the root is normal. */
	r = nftw(n->root, walk_one, 16, FTW_PHYS | FTW_MOUNT);
	walking = NULL;
	clock_gettime(CLOCK_MONOTONIC, &n->scanned);
	if (n->err)
		return n->err;
	if (r < 0)
		return -errno;
	idtab_sort(n->v, n->n, sizeof(*n->v));
	return 0;
}

static const char *find(const struct cg_names *n, uint64_t id)
{
	const struct cg_entry *e = idtab_find(n->v, n->n, sizeof(*n->v), id);

	return e ? e->path : NULL;
}

unsigned cg_names_age_ms(const struct cg_names *n)
{
	struct timespec now;
	long age_ms;

	if (!n->scanned.tv_sec)
		return UINT_MAX;
	clock_gettime(CLOCK_MONOTONIC, &now);
	age_ms = (now.tv_sec - n->scanned.tv_sec) * 1000 +
		 (now.tv_nsec - n->scanned.tv_nsec) / 1000000;
	return age_ms < 0 ? 0 : age_ms >= UINT_MAX ? UINT_MAX - 1 : (unsigned)age_ms;
}

const char *cg_names_lookup(struct cg_names *n, uint64_t id, unsigned min_age_ms)
{
	const char *p = find(n, id);

	if (p)
		return p;
	if (n->scanned.tv_sec && cg_names_age_ms(n) < min_age_ms)
		return NULL;
	if (cg_names_refresh(n))
		return NULL;
	return find(n, id);
}
