// SPDX-License-Identifier: GPL-2.0
/*
 * Contention signals: load bpf/contention.bpf.c with the signals this
 * kernel supports, read its cumulative per-cgroup maps, and turn two reads
 * plus the cgroup's own files (cpu.stat, cpuacct.usage, *.pressure) into a
 * window sample.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "bpf/contention_abi.h"
#include "common/defaults.h"
#include "sensing/cgroup.h"
#include "sensing/contention.h"
#include "contention.skel.h"

/* Cumulative cgroupfs figures of one cgroup at one read; NAN = absent. */
struct cpu_reading {
	double usage_ns, throttled_ns, periods, throttled;
	double pgfault; /* cgroup2 memory.stat */
};

/*
 * The last two cgroupfs readings of a cgroup, tagged with the snapshot
 * they were taken for, so that sampling the same snapshot twice gives the
 * same window and a window spans from the previous read to this one.
 */
struct cpu_hist {
	uint64_t id;
	uint64_t seq[2]; /* [0] latest, [1] the one before; 0 = none */
	struct cpu_reading r[2];
};

struct contention {
	struct contention_bpf *skel; /* NULL when no BPF signal runs */
	unsigned running;
	int ncpus;
	char missing[1024];
	char base[PATH_MAX];
	char root[PATH_MAX]; /* cgroup2 root; "" when there is none */
	uint64_t seq;
	struct cpu_hist *cpu;
	size_t ncpu, capcpu;
};

struct ct_entry {
	uint64_t id;
	struct ct_cg_counters c;
	struct ct_cg_hists h;
	struct ct_cg_runq q; /* summed over CPUs */
};

struct contention_snapshot {
	uint64_t seq;
	size_t n;
	uint64_t drops[CT_DROP_MAX];
	struct ct_entry *v;
};

/* ---- feature probing --------------------------------------------------- */

/* What each signal needs, as found in the kernel's BTF. */
struct features {
	bool wakeup, wakeup_new, sw, sched_info;
	bool io_start, rq_issue, rq_complete;
	bool sys_enter, sys_exit, task_pt_regs;
	bool lock_begin, lock_end;
	bool pf, memcg_reclaim, direct_reclaim;
	bool sk_cgrp, retrans, probe;
};

static bool has_tp(const struct btf *btf, const char *name)
{
	char type[128];

	snprintf(type, sizeof(type), "btf_trace_%s", name);
	return btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF) >= 0;
}

static bool has_member(const struct btf *btf, const char *st, const char *field)
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

static void probe_features(const struct btf *btf, struct features *f)
{
	f->wakeup = has_tp(btf, "sched_wakeup");
	f->wakeup_new = has_tp(btf, "sched_wakeup_new");
	f->sw = has_tp(btf, "sched_switch");
	/* The kernel's own run-queue accounting, and a way to its clock. */
	f->sched_info = has_member(btf, "task_struct", "sched_info") &&
			has_member(btf, "cfs_rq", "rq");
	f->io_start = has_tp(btf, "block_io_start");
	f->rq_issue = has_tp(btf, "block_rq_issue");
	f->rq_complete = has_tp(btf, "block_rq_complete");
	f->sys_enter = has_tp(btf, "sys_enter");
	f->sys_exit = has_tp(btf, "sys_exit");
	/* Futex waits at the switch read the sleeper's saved registers. */
	f->task_pt_regs = libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT,
						  BPF_FUNC_task_pt_regs, NULL) > 0;
	f->lock_begin = has_tp(btf, "contention_begin");
	f->lock_end = has_tp(btf, "contention_end");
	f->pf = has_tp(btf, "page_fault_user");
	f->memcg_reclaim = has_tp(btf, "mm_vmscan_memcg_reclaim_begin") &&
			   has_tp(btf, "mm_vmscan_memcg_reclaim_end");
	f->direct_reclaim = has_tp(btf, "mm_vmscan_direct_reclaim_begin") &&
			    has_tp(btf, "mm_vmscan_direct_reclaim_end");
	f->sk_cgrp = has_member(btf, "sock", "sk_cgrp_data");
	f->retrans = has_tp(btf, "tcp_retransmit_skb");
	f->probe = has_tp(btf, "tcp_probe");
}

static void note(struct contention *c, const char *fmt, ...)
{
	size_t n = strlen(c->missing);
	va_list ap;

	if (n && n + 2 < sizeof(c->missing)) {
		strcpy(c->missing + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(c->missing + n, sizeof(c->missing) - n, fmt, ap);
	va_end(ap);
}

#if defined(__x86_64__)
#define SYSCALL_ABI_OK 1
#else
#define SYSCALL_ABI_OK 0 /* the BPF side knows x86_64 syscall numbers only */
#endif

/* Of the signals asked for, those this kernel can run; note the others. */
static unsigned feasible(struct contention *c, unsigned want, const struct features *f)
{
	unsigned ok = 0;

	if ((want & CONT_SCHED) && !(f->sw && (f->sched_info || f->wakeup)))
		note(c, "sched: kernel has no sched_switch/sched_wakeup BTF tracepoints");
	else if (want & CONT_SCHED)
		ok |= CONT_SCHED;
	if ((want & CONT_BLOCK) && !(f->rq_complete && (f->io_start || f->rq_issue)))
		note(c, "block: kernel has no block_rq_complete and block_io_start/block_rq_issue tracepoints");
	else if (want & CONT_BLOCK)
		ok |= CONT_BLOCK;
	if ((want & CONT_VFS) && !(f->sys_exit && SYSCALL_ABI_OK))
		note(c, "vfs: needs the sys_exit tracepoint on x86_64");
	else if (want & CONT_VFS)
		ok |= CONT_VFS;
	if ((want & CONT_FUTEX) && !(SYSCALL_ABI_OK && ((f->sw && f->task_pt_regs) ||
							 (f->sys_enter && f->sys_exit))))
		note(c, "futex: needs sched_switch and bpf_task_pt_regs (5.15+), or the sys_enter/sys_exit tracepoints, on x86_64");
	else if (want & CONT_FUTEX)
		ok |= CONT_FUTEX;
	if ((want & CONT_LOCK) && !(f->lock_begin && f->lock_end))
		note(c, "lock: kernel has no contention_begin/contention_end tracepoints (5.19+)");
	else if (want & CONT_LOCK)
		ok |= CONT_LOCK;
	if ((want & CONT_MEMORY) && !(f->memcg_reclaim || f->direct_reclaim))
		note(c, "memory: kernel has no mm_vmscan reclaim tracepoints");
	else if (want & CONT_MEMORY)
		ok |= CONT_MEMORY;
	if ((want & CONT_PAGE_FAULTS) && !f->pf)
		note(c, "page_faults: kernel has no page_fault_user tracepoint (x86 only)");
	else if (want & CONT_PAGE_FAULTS)
		ok |= CONT_PAGE_FAULTS;
	if ((want & CONT_NETWORK) && !f->sk_cgrp)
		note(c, "network: sockets carry no cgroup here (CONFIG_SOCK_CGROUP_DATA off), TCP events cannot be attributed");
	else if ((want & CONT_NETWORK) && !f->retrans)
		note(c, "network: kernel has no tcp_retransmit_skb tracepoint");
	else if (want & CONT_NETWORK)
		ok |= CONT_NETWORK;
	if ((want & CONT_TCP_RTT) && !f->sk_cgrp)
		note(c, "tcp_rtt: sockets carry no cgroup here (CONFIG_SOCK_CGROUP_DATA off), TCP events cannot be attributed");
	else if ((want & CONT_TCP_RTT) && !f->probe)
		note(c, "tcp_rtt: kernel has no tcp_probe tracepoint");
	else if (want & CONT_TCP_RTT)
		ok |= CONT_TCP_RTT;
	/* Fallbacks that run, but cost more: worth a word in the log. */
	if ((ok & CONT_SCHED) && !f->sched_info)
		note(c, "sched: no sched_info accounting here, run-queue waits are stamped at wake-up (costlier)");
	if ((ok & CONT_FUTEX) && !(f->sw && f->task_pt_regs))
		note(c, "futex: no bpf_task_pt_regs (5.15+), waits come from sys_enter/sys_exit (costs every syscall)");
	return ok;
}

/* ---- loading ------------------------------------------------------------ */

static int configure(struct contention_bpf *skel, unsigned m, const struct features *f,
		     uint32_t max_cgroups)
{
	struct bpf_program *p;
	bool futex_switch;
	int r;

	r = bpf_map__set_max_entries(skel->maps.ct_cg_counters, max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.ct_cg_hists, max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.ct_cg_runq, max_cgroups);
	if (r)
		return r;
	futex_switch = (m & CONT_FUTEX) && f->sw && f->task_pt_regs;
	skel->rodata->runq_on = m & CONT_SCHED;
	skel->rodata->vfs_on = m & CONT_VFS;
	skel->rodata->futex_switch = futex_switch;
	skel->rodata->futex_syscalls = (m & CONT_FUTEX) && !futex_switch;
	skel->rodata->runq_sched_info = f->sched_info;
	bpf_object__for_each_program(p, skel->obj)
		bpf_program__set_autoload(p, false);
#define ON(prog, cond) bpf_program__set_autoload(skel->progs.prog, (cond))
	/* Without sched_info, the wake-ups stamp waits themselves. */
	ON(ct_sched_wakeup, (m & CONT_SCHED) && !f->sched_info);
	ON(ct_sched_wakeup_new, (m & CONT_SCHED) && !f->sched_info && f->wakeup_new);
	ON(ct_sched_switch, (m & CONT_SCHED) || futex_switch);
	ON(ct_block_io_start, (m & CONT_BLOCK) && f->io_start);
	ON(ct_block_rq_issue, (m & CONT_BLOCK) && !f->io_start);
	ON(ct_block_rq_complete, m & CONT_BLOCK);
	ON(ct_sys_enter, (m & CONT_FUTEX) && !futex_switch);
	ON(ct_sys_exit, (m & CONT_VFS) || ((m & CONT_FUTEX) && !futex_switch));
	ON(ct_lock_begin, m & CONT_LOCK);
	ON(ct_lock_end, m & CONT_LOCK);
	ON(ct_page_fault, m & CONT_PAGE_FAULTS);
	ON(ct_memcg_reclaim_begin, (m & CONT_MEMORY) && f->memcg_reclaim);
	ON(ct_memcg_reclaim_end, (m & CONT_MEMORY) && f->memcg_reclaim);
	ON(ct_direct_reclaim_begin, (m & CONT_MEMORY) && f->direct_reclaim);
	ON(ct_direct_reclaim_end, (m & CONT_MEMORY) && f->direct_reclaim);
	ON(ct_tcp_retransmit, m & CONT_NETWORK);
	ON(ct_tcp_probe, m & CONT_TCP_RTT);
#undef ON
	return 0;
}

/* Open, configure, load and attach the programs of the signals in m. */
static int load(unsigned m, const struct features *f, uint32_t max_cgroups,
		struct contention_bpf **out)
{
	struct contention_bpf *skel = contention_bpf__open();
	int r;

	if (!skel)
		return -errno;
	r = configure(skel, m, f, max_cgroups);
	if (!r)
		r = contention_bpf__load(skel);
	if (!r)
		r = contention_bpf__attach(skel);
	if (r) {
		contention_bpf__destroy(skel);
		return r < 0 ? r : -EINVAL;
	}
	*out = skel;
	return 0;
}

static const char *signal_name(unsigned bit)
{
	switch (bit) {
	case CONT_SCHED: return "sched";
	case CONT_BLOCK: return "block";
	case CONT_VFS: return "vfs";
	case CONT_FUTEX: return "futex";
	case CONT_LOCK: return "lock";
	case CONT_MEMORY: return "memory";
	case CONT_NETWORK: return "network";
	case CONT_TCP_RTT: return "tcp_rtt";
	case CONT_PAGE_FAULTS: return "page_faults";
	default: return "?";
	}
}

int contention_signals_parse(const char *list, unsigned *mask)
{
	char buf[256], *save = NULL, *tok;
	unsigned m = 0;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return -EINVAL;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned bit;

		if (!strcmp(tok, "all")) {
			m |= CONT_ALL;
			continue;
		}
		if (!strcmp(tok, "default")) {
			m |= CONT_DEFAULT;
			continue;
		}
		for (bit = 1; bit & CONT_ALL; bit <<= 1)
			if (!strcmp(tok, signal_name(bit)))
				break;
		if (!(bit & CONT_ALL))
			return -EINVAL;
		m |= bit;
	}
	if (!m)
		return -EINVAL;
	*mask = m;
	return 0;
}

/*
 * Load everything feasible at once; when the kernel refuses, find which
 * signals it refuses one by one (start-up only) and run the rest.
 */
static int load_feasible(struct contention *c, unsigned m, const struct features *f,
			 uint32_t max_cgroups)
{
	struct contention_bpf *one;
	unsigned good = 0;
	int r;

	if (!m)
		return 0;
	r = load(m, f, max_cgroups, &c->skel);
	if (!r) {
		c->running = m;
		return 0;
	}
	if (r == -ENOMEM)
		return r;
	for (unsigned bit = 1; bit & CONT_ALL; bit <<= 1) {
		if (!(m & bit))
			continue;
		r = load(bit, f, max_cgroups, &one);
		if (r == -ENOMEM)
			return r;
		if (r) {
			note(c, "%s: the kernel refused its BPF programs (%s; TAILWARDEN_DEBUG_LIBBPF=1 shows the verifier log)",
			     signal_name(bit), strerror(-r));
			continue;
		}
		contention_bpf__destroy(one);
		good |= bit;
	}
	if (!good)
		return 0;
	r = load(good, f, max_cgroups, &c->skel);
	if (r == -ENOMEM)
		return r;
	if (r) {
		note(c, "all: the BPF programs loaded one by one but not together (%s)", strerror(-r));
		return 0;
	}
	c->running = good;
	return 0;
}

static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || !getenv("TAILWARDEN_DEBUG_LIBBPF"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int open_bpf(struct contention *c, unsigned want, uint32_t max_cgroups,
		    const char **why)
{
	struct features f = { 0 };
	struct btf *btf;
	int r;

	if (!(want & CONT_ALL))
		return 0;
	if (geteuid() != 0) {
		*why = "must run as root (loading BPF tracing programs needs CAP_BPF and CAP_PERFMON)";
		return -EPERM;
	}
	libbpf_set_print(quiet_libbpf);
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		note(c, "all: kernel BTF is missing (/sys/kernel/btf/vmlinux; needs CONFIG_DEBUG_INFO_BTF=y)");
		return 0;
	}
	probe_features(btf, &f);
	btf__free(btf);
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus < 0) {
		*why = "cannot count possible CPUs";
		return c->ncpus;
	}
	r = load_feasible(c, feasible(c, want & CONT_ALL, &f), &f, max_cgroups);
	if (r)
		*why = "out of memory loading the contention sensor";
	return r;
}

int contention_open(const struct contention_opts *opts, struct contention **out,
		    const char **why)
{
	const char *base = opts->cgroup_base ? opts->cgroup_base : TW_CGROUP_BASE;
	struct contention *c;
	int r;

	*why = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (snprintf(c->base, sizeof(c->base), "%s", base) >= (int)sizeof(c->base)) {
		*why = "cgroup base path too long";
		r = -ENAMETOOLONG;
		goto fail;
	}
	/* No cgroup2 here: PSI and v2 cpu.stat read as unavailable. */
	if (cg_root_find(base, c->root, sizeof(c->root)))
		c->root[0] = '\0';
	r = open_bpf(c, opts->signals, opts->max_cgroups ? opts->max_cgroups : TW_MAX_CGROUPS, why);
	if (r)
		goto fail;
	*out = c;
	return 0;
fail:
	contention_free(c);
	return r;
}

void contention_free(struct contention *c)
{
	if (!c)
		return;
	contention_bpf__destroy(c->skel);
	free(c->cpu);
	free(c);
}

unsigned contention_signals(const struct contention *c)
{
	return c->running;
}

const char *contention_missing(const struct contention *c)
{
	return c->missing;
}

/* ---- reading the maps --------------------------------------------------- */

void contention_snapshot_free(struct contention_snapshot *s)
{
	if (!s)
		return;
	free(s->v);
	free(s);
}

static int entry_cmp(const void *a, const void *b)
{
	const struct ct_entry *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static void sum_counters(const struct ct_cg_counters *pc, int ncpus, struct ct_cg_counters *c)
{
	const __u64 *src = (const __u64 *)pc;
	__u64 *dst = (__u64 *)c;
	const size_t n = sizeof(*c) / sizeof(__u64);

	/* Every field is a __u64 counter: sum them as an array. */
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < ncpus; i++)
		for (size_t k = 0; k < n; k++)
			dst[k] += src[i * n + k];
}

static int read_drops(struct contention *c, uint64_t drops[CT_DROP_MAX])
{
	int fd = bpf_map__fd(c->skel->maps.ct_drops);
	__u64 v[c->ncpus];

	for (__u32 k = 0; k < CT_DROP_MAX; k++) {
		drops[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, v))
			return -errno;
		for (int i = 0; i < c->ncpus; i++)
			drops[k] += v[i];
	}
	return 0;
}

/* The entry for key: found among the first n (sorted), or appended. */
static struct ct_entry *entry_get(struct contention_snapshot *snap, size_t sorted,
				  size_t *cap, uint64_t key)
{
	struct ct_entry k = { .id = key }, *e;

	e = sorted ? bsearch(&k, snap->v, sorted, sizeof(*snap->v), entry_cmp) : NULL;
	if (e)
		return e;
	if (snap->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct ct_entry *v = realloc(snap->v, ncap * sizeof(*v));

		if (!v)
			return NULL;
		snap->v = v;
		*cap = ncap;
	}
	e = &snap->v[snap->n++];
	memset(e, 0, sizeof(*e));
	e->id = key;
	return e;
}

/* Counters (per CPU) and block histograms (shared) of every cgroup. */
static int read_counters(struct contention *c, struct contention_snapshot *snap, size_t *cap)
{
	int cfd = bpf_map__fd(c->skel->maps.ct_cg_counters);
	int hfd = bpf_map__fd(c->skel->maps.ct_cg_hists);
	__u64 key, *prev = NULL;
	struct ct_cg_counters *pc;
	struct ct_entry *e;

	pc = calloc(c->ncpus, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	for (; bpf_map_get_next_key(cfd, prev, &key) == 0; prev = &key) {
		if (bpf_map_lookup_elem(cfd, &key, pc))
			continue; /* deleted meanwhile */
		e = entry_get(snap, 0, cap, key);
		if (!e) {
			free(pc);
			return -ENOMEM;
		}
		sum_counters(pc, c->ncpus, &e->c);
		if (bpf_map_lookup_elem(hfd, &key, &e->h))
			memset(&e->h, 0, sizeof(e->h));
	}
	free(pc);
	return 0;
}

/* Run-queue figures, per CPU: summed (buckets modulo 2^32, as they wrap). */
static int read_runq(struct contention *c, struct contention_snapshot *snap, size_t *cap)
{
	int fd = bpf_map__fd(c->skel->maps.ct_cg_runq);
	size_t sorted = snap->n;
	struct ct_cg_runq *pc;
	__u64 key, *prev = NULL;
	struct ct_entry *e;

	pc = calloc(c->ncpus, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	for (; bpf_map_get_next_key(fd, prev, &key) == 0; prev = &key) {
		if (bpf_map_lookup_elem(fd, &key, pc))
			continue;
		e = entry_get(snap, sorted, cap, key);
		if (!e) {
			free(pc);
			return -ENOMEM;
		}
		for (int i = 0; i < c->ncpus; i++) {
			e->q.runq_ns += pc[i].runq_ns;
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				e->q.hist[b] += pc[i].hist[b];
		}
	}
	free(pc);
	return 0;
}

static int read_maps(struct contention *c, struct contention_snapshot *snap)
{
	size_t cap = 0;
	int r;

	r = read_counters(c, snap, &cap);
	if (!r) {
		qsort(snap->v, snap->n, sizeof(*snap->v), entry_cmp);
		r = read_runq(c, snap, &cap);
	}
	if (r)
		return r;
	qsort(snap->v, snap->n, sizeof(*snap->v), entry_cmp);
	return read_drops(c, snap->drops);
}

/* Forget cgroupfs readings of cgroups nobody sampled for a while. */
static void prune_cpu(struct contention *c)
{
	size_t o = 0;

	for (size_t i = 0; i < c->ncpu; i++)
		if (c->cpu[i].seq[0] + 16 >= c->seq)
			c->cpu[o++] = c->cpu[i];
	c->ncpu = o;
}

int contention_read(struct contention *c, struct contention_snapshot **out)
{
	struct contention_snapshot *snap = calloc(1, sizeof(*snap));
	int r = 0;

	if (!snap)
		return -ENOMEM;
	snap->seq = ++c->seq;
	if (c->skel)
		r = read_maps(c, snap);
	if (r) {
		contention_snapshot_free(snap);
		return r;
	}
	prune_cpu(c);
	*out = snap;
	return 0;
}

void contention_drops(const struct contention_snapshot *now,
		      const struct contention_snapshot *prev, struct contention_drops *d)
{
	uint64_t p[CT_DROP_MAX] = { 0 };

	if (prev)
		memcpy(p, prev->drops, sizeof(p));
	d->cgroups = now->drops[CT_DROP_CGROUP_FULL] - p[CT_DROP_CGROUP_FULL];
	d->stamps = now->drops[CT_DROP_STAMP_FULL] - p[CT_DROP_STAMP_FULL];
	d->absurd = now->drops[CT_DROP_ABSURD] - p[CT_DROP_ABSURD];
}

/* ---- cgroupfs ------------------------------------------------------------- */

/* Read a small cgroupfs file into buf. 0 or -errno. */
static int read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return 0;
}

/* Value of "key value" line in a flat-keyed file, NAN when absent. */
static double kv_get(const char *buf, const char *key)
{
	size_t k = strlen(key);
	const char *p = buf;
	char *end;
	double v;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, k) || p[k] != ' ')
			continue;
		v = strtod(p + k + 1, &end);
		return end == p + k + 1 ? NAN : v;
	}
	return NAN;
}

/* dir/rel/file; rel has a leading '/' (or is "/" for the root). */
static int path_of(char *p, size_t len, const char *dir, const char *rel, const char *file)
{
	const char *sep = rel[0] == '/' ? "" : "/";

	if (snprintf(p, len, "%s%s%s/%s", dir, sep, rel, file) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* Read file under hierarchy dir (base/sub, or the cgroup2 root) at rel. */
static int read_cg(const char *dir, const char *sub, const char *rel, const char *file,
		   char *buf, size_t len)
{
	char d[PATH_MAX], p[PATH_MAX];
	int r;

	if (snprintf(d, sizeof(d), "%s%s%s", dir, sub ? "/" : "", sub ? sub : "") >=
	    (int)sizeof(d))
		return -ENAMETOOLONG;
	r = path_of(p, sizeof(p), d, rel, file);
	if (!r)
		r = read_small(p, buf, len);
	if (r)
		buf[0] = '\0';
	return r;
}

/* A file holding one number (cpuacct.usage), NAN when absent. */
static double single_value(const char *buf)
{
	char *end;
	double v = strtod(buf, &end);

	return end == buf ? NAN : v;
}

/*
 * CPU usage and throttling of the cgroup at rel. cgroup2's cpu.stat has
 * usage_usec even without the cpu controller, and the nr_periods family
 * only with it. A hybrid host keeps throttling in the v1 cpu hierarchy
 * (throttled_time in ns), and usage also in cpuacct.usage (ns), at the
 * same relative path as in cgroup2 (systemd places processes so). The
 * cgroup2 figures come first: they belong to exactly the cgroup the id
 * names.
 */
static void read_cpu(const struct contention *c, const char *rel, struct cpu_reading *r)
{
	char v2[8192] = "", v1[2048];
	double usec;

	*r = (struct cpu_reading){ NAN, NAN, NAN, NAN, NAN };
	/* memory.stat is ~50 lines; pgfault sits in its second half. */
	if (c->root[0] && !read_cg(c->root, NULL, rel, "memory.stat", v2, sizeof(v2)))
		r->pgfault = kv_get(v2, "pgfault");
	v2[0] = '\0';
	if (c->root[0])
		read_cg(c->root, NULL, rel, "cpu.stat", v2, sizeof(v2));
	usec = kv_get(v2, "usage_usec");
	r->usage_ns = usec * 1e3;
	if (isnan(usec) && !read_cg(c->base, "cpuacct", rel, "cpuacct.usage", v1, sizeof(v1)))
		r->usage_ns = single_value(v1);
	r->periods = kv_get(v2, "nr_periods");
	if (!isnan(r->periods)) {
		r->throttled = kv_get(v2, "nr_throttled");
		r->throttled_ns = kv_get(v2, "throttled_usec") * 1e3;
		return;
	}
	if (read_cg(c->base, "cpu", rel, "cpu.stat", v1, sizeof(v1)))
		return;
	r->periods = kv_get(v1, "nr_periods");
	r->throttled = kv_get(v1, "nr_throttled");
	r->throttled_ns = kv_get(v1, "throttled_time");
}

/* "some avg10=1.23 avg60=... total=..." -> 1.23; NAN when absent. */
static double psi_some_avg10(const struct contention *c, const char *rel, const char *file)
{
	char buf[512], *end;
	const char *p;
	double v;

	if (!c->root[0] || read_cg(c->root, NULL, rel, file, buf, sizeof(buf)))
		return NAN;
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, "some ", 5))
			continue;
		p = strstr(p, "avg10=");
		if (!p)
			return NAN;
		v = strtod(p + 6, &end);
		return end == p + 6 ? NAN : v;
	}
	return NAN;
}

static int cpu_cmp(const void *a, const void *b)
{
	const struct cpu_hist *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* The reading history of cgroup id, created empty. NULL on -ENOMEM. */
static struct cpu_hist *cpu_hist_get(struct contention *c, uint64_t id)
{
	struct cpu_hist key = { .id = id }, *h;
	size_t i;

	h = c->ncpu ? bsearch(&key, c->cpu, c->ncpu, sizeof(*c->cpu), cpu_cmp) : NULL;
	if (h)
		return h;
	if (c->ncpu == c->capcpu) {
		size_t cap = c->capcpu ? c->capcpu * 2 : 64;
		struct cpu_hist *v = realloc(c->cpu, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->cpu = v;
		c->capcpu = cap;
	}
	for (i = c->ncpu; i > 0 && c->cpu[i - 1].id > id; i--)
		c->cpu[i] = c->cpu[i - 1];
	c->cpu[i] = key;
	c->ncpu++;
	return &c->cpu[i];
}

static double delta_or_nan(double now, double prev)
{
	/* NAN propagates; a counter that went back means a new cgroup. */
	return now >= prev ? now - prev : NAN;
}

/* Window CPU figures: this snapshot's reading minus the previous one. */
static int sample_cpu(struct contention *c, uint64_t seq, uint64_t id, const char *rel,
		      struct contention_sample *out)
{
	struct cpu_hist *h = cpu_hist_get(c, id);
	const struct cpu_reading *n, *p;

	if (!h)
		return -ENOMEM;
	if (h->seq[0] != seq) {
		h->seq[1] = h->seq[0];
		h->r[1] = h->r[0];
		h->seq[0] = seq;
		read_cpu(c, rel, &h->r[0]);
	}
	if (!h->seq[1])
		return 0; /* first reading: no window yet */
	n = &h->r[0];
	p = &h->r[1];
	out->cpu_usage_s = delta_or_nan(n->usage_ns, p->usage_ns) / 1e9;
	out->cpu_throttled_s = delta_or_nan(n->throttled_ns, p->throttled_ns) / 1e9;
	out->cpu_throttled_periods = delta_or_nan(n->throttled, p->throttled);
	/*
	 * Page faults cost nothing to read where cgroup2 has the memory
	 * controller (memory.stat pgfault: every fault of the cgroup's
	 * tasks); the page_fault_user hook is for hosts without it.
	 */
	if (!(c->running & CONT_PAGE_FAULTS))
		out->page_faults = delta_or_nan(n->pgfault, p->pgfault);
	return 0;
}

/* ---- samples ---------------------------------------------------------------- */

static const struct ct_entry *snap_find(const struct contention_snapshot *s, uint64_t id)
{
	struct ct_entry key = { .id = id };

	if (!s || !s->n)
		return NULL;
	return bsearch(&key, s->v, s->n, sizeof(*s->v), entry_cmp);
}

/* A cumulative counter's growth; an entry that was re-created restarts. */
static double grew(__u64 now, __u64 prev)
{
	return now >= prev ? (double)(now - prev) : (double)now;
}

static void sample_bpf(const struct contention *c, const struct ct_entry *n,
		       const struct ct_entry *p, struct contention_sample *o)
{
	const unsigned m = c->running;

	if (m & CONT_SCHED) {
		o->runq_delay_s = grew(n->q.runq_ns, p->q.runq_ns) / 1e9;
		hist_diff(&o->runq, n->q.hist, p->q.hist);
	}
	if (m & CONT_BLOCK) {
		o->io_read_bytes = grew(n->c.io_read_bytes, p->c.io_read_bytes);
		o->io_write_bytes = grew(n->c.io_write_bytes, p->c.io_write_bytes);
		hist_diff(&o->io, n->h.io, p->h.io);
	}
	if (m & CONT_VFS) {
		o->vfs_read_bytes = grew(n->c.vfs_read_bytes, p->c.vfs_read_bytes);
		o->vfs_write_bytes = grew(n->c.vfs_write_bytes, p->c.vfs_write_bytes);
	}
	if (m & CONT_FUTEX)
		o->futex_wait_s = grew(n->c.futex_wait_ns, p->c.futex_wait_ns) / 1e9;
	if (m & CONT_LOCK)
		o->lock_contention_s = grew(n->c.lock_ns, p->c.lock_ns) / 1e9;
	if (m & CONT_PAGE_FAULTS)
		o->page_faults = grew(n->c.page_faults, p->c.page_faults);
	if (m & CONT_MEMORY)
		o->reclaim_s = grew(n->c.reclaim_ns, p->c.reclaim_ns) / 1e9;
	if (m & CONT_NETWORK)
		o->tcp_retransmits = grew(n->c.tcp_retransmits, p->c.tcp_retransmits);
	if (m & CONT_TCP_RTT) {
		double k = grew(n->c.srtt_samples, p->c.srtt_samples);

		o->tcp_srtt_us = k > 0 ? grew(n->c.srtt_sum_us, p->c.srtt_sum_us) / k : NAN;
	}
}

int contention_sample(struct contention *c, const struct contention_snapshot *now,
		      const struct contention_snapshot *prev, uint64_t id, const char *rel,
		      double interval_s, struct contention_sample *out)
{
	static const struct ct_entry zero;
	const struct ct_entry *n, *p;

	memset(out, 0, sizeof(*out));
	out->cgroup_id = id;
	out->interval_s = interval_s;
	out->runq_delay_s = out->cpu_usage_s = out->cpu_throttled_s = NAN;
	out->cpu_throttled_periods = out->io_read_bytes = out->io_write_bytes = NAN;
	out->vfs_read_bytes = out->vfs_write_bytes = out->futex_wait_s = NAN;
	out->lock_contention_s = out->page_faults = out->reclaim_s = NAN;
	out->tcp_retransmits = out->tcp_srtt_us = NAN;
	out->psi_cpu_some = out->psi_io_some = out->psi_memory_some = NAN;
	/* A cgroup without entries had no events: zero, not unknown. */
	n = snap_find(now, id);
	p = snap_find(prev, id);
	sample_bpf(c, n ? n : &zero, p && n ? p : &zero, out);
	if (!rel)
		return 0;
	out->psi_cpu_some = psi_some_avg10(c, rel, "cpu.pressure");
	out->psi_io_some = psi_some_avg10(c, rel, "io.pressure");
	out->psi_memory_some = psi_some_avg10(c, rel, "memory.pressure");
	return sample_cpu(c, now->seq, id, rel, out);
}

size_t contention_snapshot_len(const struct contention_snapshot *s)
{
	return s ? s->n : 0;
}

uint64_t contention_snapshot_id(const struct contention_snapshot *s, size_t i)
{
	return s->v[i].id;
}

void contention_forget(struct contention *c, uint64_t id)
{
	struct cpu_hist key = { .id = id }, *h;

	h = c->ncpu ? bsearch(&key, c->cpu, c->ncpu, sizeof(*c->cpu), cpu_cmp) : NULL;
	if (h) {
		memmove(h, h + 1, (c->cpu + c->ncpu - (h + 1)) * sizeof(*h));
		c->ncpu--;
	}
	if (!c->skel)
		return;
	bpf_map_delete_elem(bpf_map__fd(c->skel->maps.ct_cg_counters), &id);
	bpf_map_delete_elem(bpf_map__fd(c->skel->maps.ct_cg_hists), &id);
	bpf_map_delete_elem(bpf_map__fd(c->skel->maps.ct_cg_runq), &id);
}
