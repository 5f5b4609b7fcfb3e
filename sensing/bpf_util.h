/* SPDX-License-Identifier: GPL-2.0 */
/* What both BPF sensors need from libbpf around loading and reading. */
#ifndef TW_BPF_UTIL_H
#define TW_BPF_UTIL_H

#include <stdbool.h>
#include <stdint.h>

struct btf;

/* Why a sensor cannot load without BTF (for *why). */
#define BPF_UTIL_NO_BTF \
	"kernel BTF is missing (/sys/kernel/btf/vmlinux; needs CONFIG_DEBUG_INFO_BTF=y)"

/* Does this kernel have the BTF tracepoint name (so tp_btf/name attaches)? */
bool bpf_util_has_tracepoint(const struct btf *btf, const char *name);
/* Does this kernel have the function (or kfunc) name in its BTF (fexit, ksym)? */
bool bpf_util_has_func(const struct btf *btf, const char *name);
/* Does struct st have a member called field? */
bool bpf_util_has_member(const struct btf *btf, const char *st, const char *field);
/*
 * libbpf's messages: none, unless TAILWARDEN_DEBUG_LIBBPF is set (then all
 * but debug, e.g. the verifier log of a refused program).
 */
void bpf_util_quiet_libbpf(void);
/* 0 when we may load tracing programs; -EPERM with *why (static) when not root. */
int bpf_util_check_root(const char **why);
/*
 * Sum slot k over the CPUs of a per-CPU array of __u64 counters, for k in
 * 0..n-1, into out[k]. 0 or -errno (out zeroed from the failed slot on).
 */
int bpf_util_read_percpu_counters(int fd, int ncpus, uint64_t *out, unsigned n);

#endif
