// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the policy and config parser. Each input is read
 * as the main config and, split at lines "%%", as a set of up to four
 * policy files (so duplicates and overlaps across files are reached too),
 * through memfds: the real file path, nothing mocked. Besides the
 * sanitizers, it checks what callers rely on: every error points at a
 * line that exists, and a set that loads holds only valid values.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "policies/config.h"
#include "policies/policy.h"
#include "tests/fuzz/check.h"

#define MAX_PARTS 4

struct part {
	const uint8_t *data;
	size_t len;
	int fd;
	char path[32];
};

static FILE *devnull;

static void part_open(struct part *p)
{
	size_t off = 0;
	ssize_t n;

	p->fd = memfd_create("fuzz", MFD_CLOEXEC);
	check(p->fd >= 0);
	while (off < p->len) {
		n = write(p->fd, p->data + off, p->len - off);
		check(n > 0);
		off += n;
	}
	snprintf(p->path, sizeof(p->path), "/proc/self/fd/%d", p->fd);
}

static unsigned lines_of(const struct part *p)
{
	unsigned n = 1;

	for (size_t i = 0; i < p->len; i++)
		n += p->data[i] == '\n';
	return n;
}

/* Every error names one of our files, at a line it has, with a message. */
static void check_errors(const struct policy_errors *errs, const struct part *parts, size_t n)
{
	for (size_t i = 0; i < errs->n; i++) {
		const struct policy_error *e = &errs->v[i];
		size_t j = 0;

		while (j < n && strcmp(e->file, parts[j].path))
			j++;
		check(j < n);
		check(e->line <= lines_of(&parts[j]));
		check(e->msg && *e->msg);
		for (const char *c = e->msg; *c; c++)
			check((unsigned char)*c >= 0x20 && *c != 0x7f);
	}
	policy_errors_print(errs, devnull);
}

static void check_range(const struct policy_range *r)
{
	if (r->set)
		check(r->lo <= r->hi && !isnan(r->lo) && !isnan(r->hi) && isfinite(r->lo));
}

static void check_policy(const struct policy *p)
{
	char line[64];

	check(p->name && *p->name && p->file);
	check(p->cgroup && p->cgroup[0] == '/' && p->cgroup[1] && !strstr(p->cgroup, "//"));
	check(p->klass == POLICY_LATENCY_CRITICAL || p->klass == POLICY_BEST_EFFORT);
	check(p->percentile >= 0.01 && p->percentile < 1);
	check(p->min_requests >= 1 && p->window_ns >= 100000000ULL);
	if (p->klass == POLICY_LATENCY_CRITICAL)
		check(p->target_ns >= 1000);
	else
		check(!p->cpu_freq_khz.set &&
		      (p->cpu_quota.set || p->cpu_weight.set || p->io_weight.set));
	check_range(&p->cpu_quota);
	check_range(&p->cpu_weight);
	check_range(&p->io_weight);
	check_range(&p->cpu_freq_khz);
	/* A short buffer must truncate, never overflow. */
	check(policy_describe(p, line, sizeof(line)) > 0 && strlen(line) < sizeof(line));
}

static void fuzz_config(struct part *whole)
{
	struct policy_errors errs = { 0 };
	struct tw_config *c;
	char line[64];
	int r;

	r = config_load(whole->path, &c, &errs);
	check(r == 0 || r == -EINVAL);
	check((r == 0) == (errs.n == 0));
	check_errors(&errs, whole, 1);
	policy_errors_clear(&errs);
	if (r < 0)
		return;
	check(c->period_ns >= 100000000ULL && c->period_ns <= 60000000000ULL);
	check(c->policies_dir[0] == '/' && c->state_dir[0] == '/' && c->decision_log[0] == '/' &&
	      c->cgroup_base[0] == '/');
	check(config_describe(c, line, sizeof(line)) > 0 && strlen(line) < sizeof(line));
	config_free(c);
}

/* Splits at "\n%%\n" into at most MAX_PARTS files. */
static size_t split(const uint8_t *data, size_t size, struct part *parts)
{
	size_t n = 0, start = 0;

	for (size_t i = 0; i + 4 <= size && n + 1 < MAX_PARTS; i++) {
		if (memcmp(data + i, "\n%%\n", 4))
			continue;
		parts[n++] = (struct part){ data + start, i + 1 - start, -1, "" };
		start = i + 4;
		i += 3;
	}
	parts[n++] = (struct part){ data + start, size - start, -1, "" };
	return n;
}

static void fuzz_policies(const uint8_t *data, size_t size)
{
	struct policy_errors errs = { 0 };
	struct part parts[MAX_PARTS];
	char *paths[MAX_PARTS];
	struct policy_set *set;
	size_t n = split(data, size, parts);
	int r;

	for (size_t i = 0; i < n; i++) {
		part_open(&parts[i]);
		paths[i] = parts[i].path;
	}
	r = policy_set_load(paths, n, &set, &errs);
	check(r == 0 || r == -EINVAL);
	check((r == 0) == (errs.n == 0));
	check_errors(&errs, parts, n);
	policy_errors_clear(&errs);
	if (r == 0) {
		check(set->n == n);
		for (size_t i = 0; i < set->n; i++)
			check_policy(&set->v[i]);
		policy_set_free(set);
	}
	for (size_t i = 0; i < n; i++)
		close(parts[i].fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct part whole = { data, size, -1, "" };

	if (!devnull)
		devnull = fopen("/dev/null", "w");
	check(devnull);
	part_open(&whole);
	fuzz_config(&whole);
	close(whole.fd);
	fuzz_policies(data, size);
	return 0;
}
