// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "sensing/bpf_util.h"

/*
 * For the fault tests only: TAILWARDEN_TEST_HIDE_TRACEPOINTS=a,b makes
 * tracepoints (or kernel functions, kfuncs) a and b look absent, as on an older kernel, so that the
 * fallbacks and what the daemon says about them run on this one.
 */
static bool hidden(const char *name)
{
	const char *e = getenv("TAILWARDEN_TEST_HIDE_TRACEPOINTS");
	size_t n = strlen(name);

	for (const char *p = e; p && *p; p += strcspn(p, ","), p += *p == ',')
		if (strcspn(p, ",") == n && !strncmp(p, name, n))
			return true;
	return false;
}

bool bpf_util_has_tracepoint(const struct btf *btf, const char *name)
{
	char type[128];

	if (hidden(name))
		return false;
	snprintf(type, sizeof(type), "btf_trace_%s", name);
	return btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF) >= 0;
}

bool bpf_util_has_func(const struct btf *btf, const char *name)
{
	if (hidden(name))
		return false;
	return btf__find_by_name_kind(btf, name, BTF_KIND_FUNC) >= 0;
}

bool bpf_util_has_member(const struct btf *btf, const char *st, const char *field)
{
	const struct btf_member *m;
	const struct btf_type *t;
	int id = btf__find_by_name_kind(btf, st, BTF_KIND_STRUCT);

	if (id < 0)
		return false;
	t = btf__type_by_id(btf, id);
	m = btf_members(t);
	for (unsigned i = 0; i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), field))
			return true;
	return false;
}

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || !getenv("TAILWARDEN_DEBUG_LIBBPF"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void bpf_util_quiet_libbpf(void)
{
	libbpf_set_print(print_libbpf);
}

int bpf_util_check_root(const char **why)
{
	if (geteuid() == 0)
		return 0;
	*why = "must run as root (loading BPF tracing programs needs CAP_BPF and CAP_PERFMON)";
	return -EPERM;
}

int bpf_util_read_percpu_counters(int fd, int ncpus, uint64_t *out, unsigned n)
{
	__u64 v[ncpus];

	memset(out, 0, n * sizeof(*out));
	for (__u32 k = 0; k < n; k++) {
		if (bpf_map_lookup_elem(fd, &k, v))
			return -errno;
		for (int i = 0; i < ncpus; i++)
			out[k] += v[i];
	}
	return 0;
}
