// SPDX-License-Identifier: GPL-2.0
/*
 * Contention signals: read the cumulative per-cgroup maps of
 * bpf/contention.bpf.c (loaded by contention_load.c), and turn two reads
 * plus the cgroup's own files (cpu.stat, cpuacct.usage, *.pressure) into a
 * window sample.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf/contention_abi.h"
#include "common/defaults.h"
#include "sensing/bpf_util.h"
#include "sensing/cgroup.h"
#include "sensing/cgroupfs.h"
#include "sensing/contention.h"
#include "sensing/contention_load.h"
#include "sensing/idtab.h"
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
	struct contention_loaded bpf;
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
	struct ct_cg_tcp t;
};

struct contention_snapshot {
	uint64_t seq;
	uint64_t flows_gen; /* the socket iterator's run the live figures are of */
	size_t n;
	uint64_t drops[CT_DROP_MAX];
	struct ct_entry *v;
};

int contention_open(const struct contention_opts *opts, struct contention **out, const char **why)
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
	r = contention_load(opts->signals, opts->max_cgroups ? opts->max_cgroups : TW_MAX_CGROUPS,
			    &c->bpf, why);
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
	contention_unload(&c->bpf);
	free(c->cpu);
	free(c);
}

int contention_attach(struct contention *c, bool on)
{
	return contention_attach_loaded(&c->bpf, on);
}

unsigned contention_signals(const struct contention *c)
{
	return c->bpf.running;
}

const char *contention_missing(const struct contention *c)
{
	return c->bpf.missing;
}

/* ---- reading the maps --------------------------------------------------- */

void contention_snapshot_free(struct contention_snapshot *s)
{
	if (!s)
		return;
	free(s->v);
	free(s);
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

/* The entry for key: found among the first n (sorted), or appended. */
static struct ct_entry *entry_get(struct contention_snapshot *snap, size_t sorted, size_t *cap,
				  uint64_t key)
{
	struct ct_entry *e = idtab_find(snap->v, sorted, sizeof(*snap->v), key);

	if (e)
		return e;
	if (idtab_reserve((void **)&snap->v, cap, snap->n, sizeof(*snap->v), 64))
		return NULL;
	e = &snap->v[snap->n++];
	memset(e, 0, sizeof(*e));
	e->id = key;
	return e;
}

/* Counters (per CPU) and block histograms (shared) of every cgroup. */
static int read_counters(struct contention *c, struct contention_snapshot *snap, size_t *cap)
{
	int cfd = bpf_map__fd(c->bpf.skel->maps.ct_cg_counters);
	int hfd = bpf_map__fd(c->bpf.skel->maps.ct_cg_hists);
	__u64 key, *prev = NULL;
	struct ct_cg_counters *pc;
	struct ct_entry *e;

	pc = calloc(c->bpf.ncpus, sizeof(*pc));
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
		sum_counters(pc, c->bpf.ncpus, &e->c);
		if (bpf_map_lookup_elem(hfd, &key, &e->h))
			memset(&e->h, 0, sizeof(e->h));
	}
	free(pc);
	return 0;
}

/* Run-queue figures, per CPU: summed (buckets modulo 2^32, as they wrap). */
static int read_runq(struct contention *c, struct contention_snapshot *snap, size_t *cap)
{
	int fd = bpf_map__fd(c->bpf.skel->maps.ct_cg_runq);
	size_t sorted = snap->n;
	struct ct_cg_runq *pc;
	__u64 key, *prev = NULL;
	struct ct_entry *e;

	pc = calloc(c->bpf.ncpus, sizeof(*pc));
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
		for (int i = 0; i < c->bpf.ncpus; i++) {
			e->q.runq_ns += pc[i].runq_ns;
			for (unsigned b = 0; b < HIST_BUCKETS; b++)
				e->q.hist[b] += pc[i].hist[b];
		}
	}
	free(pc);
	return 0;
}

/* TCP flow figures: one value per cgroup, shared by all CPUs. */
static int read_tcp(struct contention *c, struct contention_snapshot *snap, size_t *cap)
{
	int fd = bpf_map__fd(c->bpf.skel->maps.ct_cg_tcp);
	size_t sorted = snap->n;
	__u64 key, *prev = NULL;
	struct ct_cg_tcp v;
	struct ct_entry *e;

	for (; bpf_map_get_next_key(fd, prev, &key) == 0; prev = &key) {
		if (bpf_map_lookup_elem(fd, &key, &v))
			continue;
		e = entry_get(snap, sorted, cap, key);
		if (!e)
			return -ENOMEM;
		e->t = v;
	}
	return 0;
}

static int read_maps(struct contention *c, struct contention_snapshot *snap)
{
	size_t cap = 0;
	int r;

	r = read_counters(c, snap, &cap);
	if (!r) {
		idtab_sort(snap->v, snap->n, sizeof(*snap->v));
		r = read_runq(c, snap, &cap);
	}
	if (!r && (c->bpf.running & CONT_TCP_FLOWS)) {
		idtab_sort(snap->v, snap->n, sizeof(*snap->v));
		r = read_tcp(c, snap, &cap);
	}
	if (r)
		return r;
	idtab_sort(snap->v, snap->n, sizeof(*snap->v));
	return bpf_util_read_percpu_counters(bpf_map__fd(c->bpf.skel->maps.ct_drops), c->bpf.ncpus,
					     snap->drops, CT_DROP_MAX);
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
	if (c->bpf.skel)
		r = contention_runq_iter(&c->bpf);
	if (c->bpf.skel && !r)
		r = contention_flows_iter(&c->bpf);
	snap->flows_gen = c->bpf.flows_gen;
	if (c->bpf.skel && !r)
		r = read_maps(c, snap);
	if (r) {
		contention_snapshot_free(snap);
		return r;
	}
	prune_cpu(c);
	*out = snap;
	return 0;
}

void contention_drops(const struct contention_snapshot *now, const struct contention_snapshot *prev,
		      struct contention_drops *d)
{
	uint64_t p[CT_DROP_MAX] = { 0 };

	if (prev)
		memcpy(p, prev->drops, sizeof(p));
	d->cgroups = now->drops[CT_DROP_CGROUP_FULL] - p[CT_DROP_CGROUP_FULL];
	d->stamps = now->drops[CT_DROP_STAMP_FULL] - p[CT_DROP_STAMP_FULL];
	d->absurd = now->drops[CT_DROP_ABSURD] - p[CT_DROP_ABSURD];
}

/* ---- cgroupfs ------------------------------------------------------------- */

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
	if (c->root[0] && !cgroupfs_read_cg(c->root, NULL, rel, "memory.stat", v2, sizeof(v2)))
		r->pgfault = cgroupfs_kv(v2, "pgfault");
	v2[0] = '\0';
	if (c->root[0])
		cgroupfs_read_cg(c->root, NULL, rel, "cpu.stat", v2, sizeof(v2));
	usec = cgroupfs_kv(v2, "usage_usec");
	r->usage_ns = usec * 1e3;
	if (isnan(usec) &&
	    !cgroupfs_read_cg(c->base, "cpuacct", rel, "cpuacct.usage", v1, sizeof(v1)))
		r->usage_ns = cgroupfs_single(v1);
	r->periods = cgroupfs_kv(v2, "nr_periods");
	if (!isnan(r->periods)) {
		r->throttled = cgroupfs_kv(v2, "nr_throttled");
		r->throttled_ns = cgroupfs_kv(v2, "throttled_usec") * 1e3;
		return;
	}
	if (cgroupfs_read_cg(c->base, "cpu", rel, "cpu.stat", v1, sizeof(v1)))
		return;
	r->periods = cgroupfs_kv(v1, "nr_periods");
	r->throttled = cgroupfs_kv(v1, "nr_throttled");
	r->throttled_ns = cgroupfs_kv(v1, "throttled_time");
}

/* "some avg10=1.23 avg60=... total=..." -> 1.23; NAN when absent. */
static double psi_some_avg10(const struct contention *c, const char *rel, const char *file)
{
	char buf[512];

	if (!c->root[0] || cgroupfs_read_cg(c->root, NULL, rel, file, buf, sizeof(buf)))
		return NAN;
	return cgroupfs_psi_some_avg10(buf);
}

/* The reading history of cgroup id, created empty. NULL on -ENOMEM. */
static struct cpu_hist *cpu_hist_get(struct contention *c, uint64_t id)
{
	struct cpu_hist key = { .id = id }, *h;
	size_t i;

	h = idtab_find(c->cpu, c->ncpu, sizeof(*c->cpu), id);
	if (h)
		return h;
	if (idtab_reserve((void **)&c->cpu, &c->capcpu, c->ncpu, sizeof(*c->cpu), 64))
		return NULL;
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
	if (!(c->bpf.running & CONT_PAGE_FAULTS))
		out->page_faults = delta_or_nan(n->pgfault, p->pgfault);
	return 0;
}

/* ---- samples ---------------------------------------------------------------- */

static const struct ct_entry *snap_find(const struct contention_snapshot *s, uint64_t id)
{
	return s ? idtab_find(s->v, s->n, sizeof(*s->v), id) : NULL;
}

/* A cumulative counter's growth; an entry that was re-created restarts. */
static double grew(__u64 now, __u64 prev)
{
	return now >= prev ? (double)(now - prev) : (double)now;
}

static void sample_bpf(const struct contention *c, const struct ct_entry *n,
		       const struct ct_entry *p, struct contention_sample *o)
{
	const unsigned m = c->bpf.running;

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

/*
 * The flow figures of a window: counters from the two snapshots, live
 * figures from now's entry when the last iterator run met a socket of
 * the cgroup (else none: 0 sockets).
 */
static void sample_tcp(const struct contention *c, const struct contention_snapshot *now,
		       const struct ct_entry *n, const struct ct_entry *p, struct contention_tcp *o)
{
	const struct ct_cg_tcp *t = &n->t, *q = &p->t;
	bool live = now && t->gen == now->flows_gen && t->sockets;
	double k = live ? (double)t->sockets : 0;

	o->sockets = k;
	o->flight_sum = live ? t->flight_sum : 0;
	o->flight_max = live ? t->flight_max : 0;
	o->cwnd_sum = live ? t->cwnd_sum : 0;
	o->cwnd_max = live ? t->cwnd_max : 0;
	o->rcv_wnd_sum = live ? t->rcv_wnd_sum : 0;
	o->rcv_wnd_max = live ? t->rcv_wnd_max : 0;
	o->sndq_sum = live ? t->sndq_sum : 0;
	o->sndq_max = live ? t->sndq_max : 0;
	o->mss_min = live ? t->mss_min : NAN;
	o->mss_max = live ? t->mss_max : NAN;
	o->srtt_mean_us = live ? t->srtt_sum_us / k : NAN;
	o->srtt_max_us = live ? t->srtt_max_us : NAN;
	o->retrans_segs = grew(t->retrans_segs, q->retrans_segs);
	o->fast_retrans_segs = grew(t->fast_retrans_segs, q->fast_retrans_segs);
	o->timeouts = c->bpf.flows_timeouts ? grew(t->timeouts, q->timeouts) : NAN;
	o->bytes_acked = grew(t->bytes_acked, q->bytes_acked);
	o->bytes_received = grew(t->bytes_received, q->bytes_received);
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
	out->tcp_on = c->bpf.running & CONT_TCP_FLOWS;
	if (out->tcp_on)
		sample_tcp(c, now, n ? n : &zero, p && n ? p : &zero, &out->tcp);
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

uint64_t contention_flows_iter_ns(const struct contention *c)
{
	return c->bpf.flows_iter_ns;
}

void contention_forget(struct contention *c, uint64_t id)
{
	struct cpu_hist *h = idtab_find(c->cpu, c->ncpu, sizeof(*c->cpu), id);

	if (h) {
		memmove(h, h + 1, (c->cpu + c->ncpu - (h + 1)) * sizeof(*h));
		c->ncpu--;
	}
	if (!c->bpf.skel)
		return;
	bpf_map_delete_elem(bpf_map__fd(c->bpf.skel->maps.ct_cg_counters), &id);
	bpf_map_delete_elem(bpf_map__fd(c->bpf.skel->maps.ct_cg_hists), &id);
	bpf_map_delete_elem(bpf_map__fd(c->bpf.skel->maps.ct_cg_runq), &id);
	bpf_map_delete_elem(bpf_map__fd(c->bpf.skel->maps.ct_cg_tcp), &id);
}
