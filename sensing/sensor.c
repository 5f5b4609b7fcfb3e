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
#include "bpf/sensor_abi.h"
#include "sensing/bpf_util.h"
#include "sensing/idtab.h"
#include "sensing/sensor.h"
#include "sensor.skel.h"

struct sensor {
	struct sensor_bpf *skel;
	enum sensor_mode mode;
	const char *reason;
	char reason_buf[320]; /* when the reason is made at load (load_fallback) */
	int ncpus;
	struct tw_cg_sums *pcs; /* one slot's per-CPU sums (sensor_read's buffer) */
	uint64_t *watched;	/* opts.watch_listed: the list in tw_watched, sorted */
	size_t nwatched;
};

struct snap_entry {
	uint64_t id;
	struct tw_cg_counters c;
	struct tw_cg_hists h;
	struct tw_cg_sums sums; /* summed over CPUs */
};

struct sensor_snapshot {
	size_t n;
	uint64_t drops[TW_DROP_MAX];
	bool phase_on[TW_PHASES]; /* sensor_phases() of the sensor read */
	struct snap_entry *v;
};

static const char *const mode_names[] = {
	[SENSOR_MODE_AUTO] = "auto",
	[SENSOR_MODE_ARRIVAL] = "arrival",
	[SENSOR_MODE_RECEIVE] = "receive",
	[SENSOR_MODE_SYSCALL] = "syscall",
};

int sensor_mode_parse(const char *s, enum sensor_mode *mode)
{
	for (size_t i = 0; i < sizeof(mode_names) / sizeof(*mode_names); i++) {
		if (!strcmp(s, mode_names[i])) {
			*mode = i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *sensor_mode_name(enum sensor_mode mode)
{
	return mode_names[mode];
}

/*
 * The hooks a kernel offers the request sensor, found in its BTF. Which
 * programs load follows from them and the mode (configure()).
 */
struct hooks {
	bool copy;     /* tracepoint tcp_rcv_space_adjust (4.16+): the arrival stamp */
	bool send_tp;  /* tracepoint sock_send_length (6.3+): a send's end */
	bool recv_tp;  /* tracepoint sock_recv_length (6.3+): the receive mode's start */
	bool kfunc;    /* kfunc bpf_rdonly_cast (6.2+): else bpf_skc_to_tcp_sock */
	bool sendmsg;  /* tcp_sendmsg for fexit, where sock_send_length is missing */
	bool sendpage; /* tcp_sendpage for fexit (sendfile and splice, before 6.5) */
	bool sys;      /* tracepoint sys_exit: the syscall fallback */
};

static void find_hooks(const struct btf *btf, struct hooks *h)
{
	h->copy = bpf_util_has_tracepoint(btf, "tcp_rcv_space_adjust");
	h->send_tp = bpf_util_has_tracepoint(btf, "sock_send_length");
	h->recv_tp = bpf_util_has_tracepoint(btf, "sock_recv_length");
	h->kfunc = bpf_util_has_func(btf, "bpf_rdonly_cast");
	h->sendmsg = bpf_util_has_func(btf, "tcp_sendmsg");
	h->sendpage = bpf_util_has_func(btf, "tcp_sendpage");
	h->sys = bpf_util_has_tracepoint(btf, "sys_exit");
}

/* Does the arrival mode end its spans at fexit of TCP's send functions? */
static bool send_by_fexit(const struct hooks *h)
{
	return !h->send_tp && h->sendmsg;
}

static const char *arrival_why(const struct hooks *h)
{
	if (!h->copy)
		return "mode arrival needs the tcp_rcv_space_adjust tracepoint (4.16+)";
	if (h->send_tp)
		return "arrival-stamped: spans start when request bytes reached the socket (its clock, read when they are copied to the server: tcp_rcv_space_adjust), end at the reply's last send (sock_send_length)";
	if (h->sendmsg)
		return "arrival-stamped: spans start when request bytes reached the socket (its clock, read when they are copied to the server: tcp_rcv_space_adjust), end at the reply's last send (fexit of tcp_sendmsg/tcp_sendpage: this kernel has no sock_send_length tracepoint, 6.3+)";
	return "mode arrival needs the sock_send_length tracepoint (6.3+) or tcp_sendmsg in the kernel's BTF for fexit";
}

static const char *syscall_why(const struct hooks *h, enum sensor_mode asked)
{
	if (!h->sys)
		return "kernel has neither the socket hooks nor the sys_exit tracepoint";
	if (asked == SENSOR_MODE_SYSCALL)
		return "syscall fallback (requested): receive-stamped spans from socket syscall exits; costs every syscall on the host";
	return "syscall fallback: kernel offers neither tcp_rcv_space_adjust with a send hook nor the sock_recv_length/sock_send_length tracepoints (6.3+); receive-stamped spans from socket syscall exits, at a cost to every syscall";
}

/* Pick the best mode this kernel supports, or check the requested one. */
static int choose_mode(const struct btf *btf, enum sensor_mode want, struct hooks *h,
		       enum sensor_mode *mode, const char **why)
{
	bool arrival, receive;

	find_hooks(btf, h);
	arrival = h->copy && (h->send_tp || h->sendmsg);
	receive = h->recv_tp && h->send_tp;
	if (!bpf_util_has_tracepoint(btf, "inet_sock_set_state")) {
		*why = "kernel has no inet_sock_set_state tracepoint (4.16+): connections cannot be tracked";
		return -EOPNOTSUPP;
	}
	if (want == SENSOR_MODE_AUTO)
		want = arrival ? SENSOR_MODE_ARRIVAL :
		       receive ? SENSOR_MODE_RECEIVE :
				 SENSOR_MODE_SYSCALL;
	*mode = want;
	switch (want) {
	case SENSOR_MODE_ARRIVAL:
		*why = arrival_why(h);
		return arrival ? 0 : -EOPNOTSUPP;
	case SENSOR_MODE_RECEIVE:
		*why = receive ?
			       (h->copy ?
					"receive-stamped (requested): spans start at the server's first receive; time queued before it is not seen" :
					"receive-stamped: kernel has no tcp_rcv_space_adjust tracepoint, so spans start at the server's first receive and miss time queued before it") :
			       "mode receive needs tracepoints sock_recv_length/sock_send_length (6.3+)";
		return receive ? 0 : -EOPNOTSUPP;
	default:
		*why = syscall_why(h, want);
		return h->sys ? 0 : -EOPNOTSUPP;
	}
}

static int probe(enum sensor_mode want, struct hooks *h, enum sensor_mode *mode, const char **why)
{
	struct btf *btf;
	int r;

	r = bpf_util_check_root(why);
	if (r)
		return r;
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		*why = BPF_UTIL_NO_BTF;
		return -ENOENT;
	}
	r = choose_mode(btf, want, h, mode, why);
	btf__free(btf);
	return r;
}

/* Histogram slots: one per cgroup with traffic, preallocated (sensor_abi.h). */
static uint32_t hist_slots(const struct sensor_opts *o)
{
	return o->max_cgroups < TW_MAX_HIST_CGROUPS ? o->max_cgroups : TW_MAX_HIST_CGROUPS;
}

/* Every slot free: queued for the programs to take. */
static int fill_slots(struct sensor_bpf *skel, uint32_t n)
{
	int fd = bpf_map__fd(skel->maps.tw_free_slots);

	for (uint32_t i = 0; i < n; i++)
		if (bpf_map_update_elem(fd, NULL, &i, 0))
			return -errno;
	return 0;
}

static int configure(struct sensor_bpf *skel, const struct sensor_opts *o, enum sensor_mode mode,
		     const struct hooks *h)
{
	bool arrival = mode == SENSOR_MODE_ARRIVAL, fexit = arrival && send_by_fexit(h);
	bool sock_send = (arrival && !fexit) || mode == SENSOR_MODE_RECEIVE;
	int r;

	skel->rodata->quiet_ns = o->quiet_ns;
	skel->rodata->max_span_ns = o->max_span_ns;
	skel->rodata->conns_by_addr = mode == SENSOR_MODE_SYSCALL;
	skel->rodata->outbound = o->outbound;
	skel->rodata->arrival_stamps = mode == SENSOR_MODE_ARRIVAL;
	skel->rodata->watch_listed = o->watch_listed;
	/* Other modes keep connection state in socket storage instead. */
	r = bpf_map__set_max_entries(skel->maps.tw_conns,
				     mode == SENSOR_MODE_SYSCALL ? o->max_conns : 1);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_cg_counters, o->max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_watched, o->max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_cg_hists, hist_slots(o));
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_cg_sums, hist_slots(o));
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_cg_slots, hist_slots(o));
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.tw_free_slots, hist_slots(o));
	if (r)
		return r;
	/*
	 * Each program that reads TCP's fields comes in two flavours (see
	 * tcp_of() in sensor.bpf.c): a verifier refuses a program whole for a
	 * kfunc it does not know, so only the flavour this kernel has loads.
	 * The receive mode needs 6.3+, where the kfunc always is.
	 */
	bpf_program__set_autoload(skel->progs.tw_rcv_space, arrival && h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_rcv_space_h, arrival && !h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_sock_recv, mode == SENSOR_MODE_RECEIVE);
	bpf_program__set_autoload(skel->progs.tw_sock_send, sock_send && h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_sock_send_h, sock_send && !h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_tcp_sendmsg, fexit);
	bpf_program__set_autoload(skel->progs.tw_tcp_sendpage, fexit && h->sendpage);
	bpf_program__set_autoload(skel->progs.tw_set_state, h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_set_state_h, !h->kfunc);
	bpf_program__set_autoload(skel->progs.tw_sys_exit, mode == SENSOR_MODE_SYSCALL);
	return 0;
}

/* Open, configure, load and attach the programs of one mode, into s->skel. */
static int load(struct sensor *s, const struct sensor_opts *opts, enum sensor_mode mode,
		const struct hooks *h, const char **why)
{
	int r;

	s->skel = sensor_bpf__open();
	if (!s->skel) {
		*why = "cannot open the BPF object";
		return -errno;
	}
	r = configure(s->skel, opts, mode, h);
	if (!r)
		r = sensor_bpf__load(s->skel);
	if (r) {
		*why = "the kernel refused to load the BPF sensor (TAILWARDEN_DEBUG_LIBBPF=1 shows the verifier log)";
		return r;
	}
	r = fill_slots(s->skel, hist_slots(opts));
	if (r) {
		*why = "cannot queue the request sensor's histogram slots";
		return r;
	}
	r = sensor_bpf__attach(s->skel);
	if (r)
		*why = "cannot attach the BPF sensor to its hooks";
	return r;
}

/*
 * fexit needs what BTF cannot show (ftrace direct calls, a kernel that
 * allows trampolines): when the arrival mode's fexit programs fail and the
 * mode was not asked for by name, the syscall fallback takes over, and the
 * reason says why.
 */
static int load_fallback(struct sensor *s, const struct sensor_opts *opts, const struct hooks *h,
			 int err, const char **why)
{
	int r;

	sensor_bpf__destroy(s->skel);
	s->skel = NULL;
	if (!h->sys)
		return err;
	snprintf(
		s->reason_buf, sizeof(s->reason_buf),
		"syscall fallback: this kernel has no sock_send_length tracepoint (6.3+) and refused fexit on tcp_sendmsg (%s); receive-stamped spans from socket syscall exits, at a cost to every syscall",
		strerror(-err));
	r = load(s, opts, SENSOR_MODE_SYSCALL, h, why);
	if (r)
		return r;
	s->mode = SENSOR_MODE_SYSCALL;
	s->reason = s->reason_buf;
	*why = s->reason;
	return 0;
}

int sensor_open(const struct sensor_opts *opts, struct sensor **out, const char **why)
{
	struct sensor *s;
	struct hooks h;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	bpf_util_quiet_libbpf();
	r = probe(opts->mode, &h, &s->mode, why);
	if (r)
		goto fail;
	s->reason = *why;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus < 0) {
		r = s->ncpus;
		*why = "cannot count possible CPUs";
		goto fail;
	}
	s->pcs = calloc(s->ncpus, sizeof(*s->pcs));
	if (!s->pcs) {
		r = -ENOMEM;
		*why = "out of memory";
		goto fail;
	}
	r = load(s, opts, s->mode, &h, why);
	if (r && s->mode == SENSOR_MODE_ARRIVAL && send_by_fexit(&h) &&
	    opts->mode == SENSOR_MODE_AUTO)
		r = load_fallback(s, opts, &h, r, why);
	if (r)
		goto fail;
	*why = s->reason;
	*out = s;
	return 0;
fail:
	sensor_free(s);
	return r < 0 ? r : -EINVAL;
}

void sensor_free(struct sensor *s)
{
	if (!s)
		return;
	sensor_bpf__destroy(s->skel);
	free(s->pcs);
	free(s->watched);
	free(s);
}

/* id among the first n of the sorted list v. */
static bool sorted_has(const uint64_t *v, size_t n, uint64_t id)
{
	return idtab_find(v, n, sizeof(*v), id) != NULL;
}

int sensor_watch(struct sensor *s, const uint64_t *ids, size_t n)
{
	int fd = bpf_map__fd(s->skel->maps.tw_watched), r = 0;
	uint64_t *v = NULL;
	size_t k = 0;
	uint8_t one = 1;

	if (n) {
		v = malloc(n * sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (ids[i])
			v[k++] = ids[i];
	idtab_sort(v, k, sizeof(*v));
	n = k;
	k = 0;
	for (size_t i = 0; i < n; i++) /* unique */
		if (!k || v[k - 1] != v[i])
			v[k++] = v[i];
	n = k;
	if (n == s->nwatched && (!n || !memcmp(v, s->watched, n * sizeof(*v)))) {
		free(v);
		return 0;
	}
	for (size_t i = 0; i < s->nwatched; i++)
		if (!sorted_has(v, n, s->watched[i]))
			bpf_map_delete_elem(fd, &s->watched[i]);
	for (size_t i = 0; i < n && !r; i++)
		if (!sorted_has(s->watched, s->nwatched, v[i]) &&
		    bpf_map_update_elem(fd, &v[i], &one, BPF_ANY))
			r = -errno;
	if (r) { /* the table is full: keep the old list, whole */
		for (size_t i = 0; i < n; i++)
			if (!sorted_has(s->watched, s->nwatched, v[i]))
				bpf_map_delete_elem(fd, &v[i]);
		for (size_t i = 0; i < s->nwatched; i++)
			bpf_map_update_elem(fd, &s->watched[i], &one, BPF_ANY);
		free(v);
		return r;
	}
	free(s->watched);
	s->watched = v;
	s->nwatched = n;
	/* After the list: a connection that sees the new generation sees the new list. */
	__atomic_add_fetch(&s->skel->data->watch_gen, 1, __ATOMIC_SEQ_CST);
	return 0;
}

int sensor_attach(struct sensor *s, bool on)
{
	if (!on) {
		sensor_bpf__detach(s->skel);
		return 0;
	}
	return sensor_bpf__attach(s->skel);
}

enum sensor_mode sensor_mode(const struct sensor *s)
{
	return s->mode;
}

const char *sensor_mode_reason(const struct sensor *s)
{
	return s->reason;
}

void sensor_phases(const struct sensor *s, bool on[TW_PHASES], const char **why)
{
	bool arrival = s->mode == SENSOR_MODE_ARRIVAL;

	for (unsigned i = 0; i < TW_PHASES; i++)
		on[i] = i != TW_PHASE_QUEUED || arrival;
	*why = arrival ?
		       NULL :
		       "phase queued not seen: in this mode a request starts at the server's first read of it, so the time its bytes waited before that read is not seen (service and sending are)";
}

void sensor_snapshot_free(struct sensor_snapshot *snap)
{
	if (!snap)
		return;
	free(snap->v);
	free(snap);
}

/* Sum one slot's per-CPU sums. */
static void sum_sums(const struct tw_cg_sums *pc, int ncpus, struct tw_cg_sums *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < ncpus; i++) {
		c->span_ns += pc[i].span_ns;
		for (unsigned p = 0; p < TW_PHASES; p++)
			c->phase_ns[p] += pc[i].phase_ns[p];
	}
}

/* Sum one cgroup's per-CPU counters. */
static void sum_counters(const struct tw_cg_counters *pc, int ncpus, struct tw_cg_counters *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < ncpus; i++) {
		c->bytes_in += pc[i].bytes_in;
		c->bytes_out += pc[i].bytes_out;
		c->conns_open += pc[i].conns_open;
		c->out_bytes_in += pc[i].out_bytes_in;
		c->out_bytes_out += pc[i].out_bytes_out;
		c->spans_dropped += pc[i].spans_dropped;
	}
}

int sensor_read(struct sensor *s, struct sensor_snapshot **out)
{
	int cfd = bpf_map__fd(s->skel->maps.tw_cg_counters);
	int hfd = bpf_map__fd(s->skel->maps.tw_cg_hists);
	int sfd = bpf_map__fd(s->skel->maps.tw_cg_slots);
	int mfd = bpf_map__fd(s->skel->maps.tw_cg_sums);
	struct tw_cg_counters *pc;
	struct sensor_snapshot *snap;
	__u64 key, *prev = NULL;
	const char *why;
	size_t cap = 0;
	int r = 0;

	snap = calloc(1, sizeof(*snap));
	pc = calloc(s->ncpus, sizeof(*pc));
	if (!snap || !pc) {
		r = -ENOMEM;
		goto out;
	}
	sensor_phases(s, snap->phase_on, &why);
	while (bpf_map_get_next_key(cfd, prev, &key) == 0) {
		struct snap_entry *e;
		__u32 slot;

		prev = &key;
		r = idtab_reserve((void **)&snap->v, &cap, snap->n, sizeof(*snap->v), 64);
		if (r)
			goto out;
		e = &snap->v[snap->n];
		if (bpf_map_lookup_elem(cfd, &key, pc))
			continue; /* deleted meanwhile */
		e->id = key;
		sum_counters(pc, s->ncpus, &e->c);
		if (bpf_map_lookup_elem(sfd, &key, &slot) ||
		    bpf_map_lookup_elem(hfd, &slot, &e->h) || e->h.cgid != key ||
		    bpf_map_lookup_elem(mfd, &slot, s->pcs)) {
			/* no traffic served yet, or forgotten meanwhile */
			memset(&e->h, 0, sizeof(e->h));
			memset(&e->sums, 0, sizeof(e->sums));
		} else {
			sum_sums(s->pcs, s->ncpus, &e->sums);
		}
		snap->n++;
	}
	idtab_sort(snap->v, snap->n, sizeof(*snap->v));
	r = bpf_util_read_percpu_counters(bpf_map__fd(s->skel->maps.tw_drops), s->ncpus,
					  snap->drops, TW_DROP_MAX);
out:
	free(pc);
	if (r) {
		sensor_snapshot_free(snap);
		return r;
	}
	*out = snap;
	return 0;
}

size_t sensor_snapshot_len(const struct sensor_snapshot *snap)
{
	return snap->n;
}

uint64_t sensor_snapshot_id(const struct sensor_snapshot *snap, size_t i)
{
	return snap->v[i].id;
}

static const struct snap_entry *snap_find(const struct sensor_snapshot *snap, uint64_t id)
{
	return snap ? idtab_find(snap->v, snap->n, sizeof(*snap->v), id) : NULL;
}

int sensor_sample(const struct sensor_snapshot *now, const struct sensor_snapshot *prev,
		  uint64_t id, double interval_s, struct qos_sample *out)
{
	const struct snap_entry *n = snap_find(now, id), *p = snap_find(prev, id);
	static const struct snap_entry zero;

	memset(out, 0, sizeof(*out));
	out->cgroup_id = id;
	out->interval_s = interval_s;
	if (!n)
		return -ENOENT;
	if (!p)
		p = &zero;
	out->bytes_in = n->c.bytes_in - p->c.bytes_in;
	out->bytes_out = n->c.bytes_out - p->c.bytes_out;
	out->conns_open = n->c.conns_open;
	out->out_requests = n->h.out_requests - p->h.out_requests;
	out->out_bytes_in = n->c.out_bytes_in - p->c.out_bytes_in;
	out->out_bytes_out = n->c.out_bytes_out - p->c.out_bytes_out;
	out->spans_dropped = n->c.spans_dropped - p->c.spans_dropped;
	hist_diff(&out->latency, n->h.latency, p->h.latency);
	hist_diff(&out->ttfb, n->h.ttfb, p->h.ttfb);
	/* Each request added 1 to a bucket of ttfb, which never moves (sensor_abi.h). */
	out->requests = out->ttfb.total;
	hist_diff(&out->outbound, n->h.outbound, p->h.outbound);
	for (unsigned i = 0; i < TW_PHASES; i++) {
		hist_diff(&out->phase[i], n->h.phase[i], p->h.phase[i]);
		out->phase_ns[i] = n->sums.phase_ns[i] - p->sums.phase_ns[i];
		out->phase_on[i] = now->phase_on[i];
	}
	out->span_ns = n->sums.span_ns - p->sums.span_ns;
	/*
	 * The sending phase's bucket 0 is not counted in the kernel: every
	 * request not in a later bucket is there. (A reply that moved on in
	 * this window but was counted in an earlier one makes it short by one.)
	 */
	if (out->requests > out->phase[TW_PHASE_SENDING].total)
		hist_add(&out->phase[TW_PHASE_SENDING], 0,
			 out->requests - out->phase[TW_PHASE_SENDING].total);
	return 0;
}

void sensor_drops(const struct sensor_snapshot *now, const struct sensor_snapshot *prev,
		  struct sensor_drops *d)
{
	uint64_t p[TW_DROP_MAX] = { 0 };

	if (prev)
		memcpy(p, prev->drops, sizeof(p));
	d->spans_negative = now->drops[TW_DROP_SPAN_NEGATIVE] - p[TW_DROP_SPAN_NEGATIVE];
	d->spans_absurd = now->drops[TW_DROP_SPAN_ABSURD] - p[TW_DROP_SPAN_ABSURD];
	d->conns = now->drops[TW_DROP_CONN_FULL] - p[TW_DROP_CONN_FULL];
	d->cgroups = now->drops[TW_DROP_CGROUP_FULL] - p[TW_DROP_CGROUP_FULL];
}

/*
 * Free a removed cgroup's entries. Its histogram slot is zeroed, then
 * handed back to the programs: a socket that outlived its cgroup finds the
 * slot no longer its own (conn_hists) and takes a new one, which a later
 * tick forgets in turn.
 */
void sensor_forget(struct sensor *s, uint64_t id)
{
	int sfd = bpf_map__fd(s->skel->maps.tw_cg_slots);
	static const struct tw_cg_hists zero;
	__u32 slot;

	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.tw_cg_counters), &id);
	if (bpf_map_lookup_elem(sfd, &id, &slot) || bpf_map_delete_elem(sfd, &id))
		return;
	memset(s->pcs, 0, s->ncpus * sizeof(*s->pcs));
	if (!bpf_map_update_elem(bpf_map__fd(s->skel->maps.tw_cg_hists), &slot, &zero, 0) &&
	    !bpf_map_update_elem(bpf_map__fd(s->skel->maps.tw_cg_sums), &slot, s->pcs, 0))
		bpf_map_update_elem(bpf_map__fd(s->skel->maps.tw_free_slots), NULL, &slot, 0);
}
