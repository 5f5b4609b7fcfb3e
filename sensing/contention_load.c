// SPDX-License-Identifier: GPL-2.0
/*
 * Loading the contention sensor (bpf/contention.bpf.c): which signals this
 * kernel can run, found in its BTF; load bisection when the verifier
 * refuses some of them. Reading and sampling are in contention.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "sensing/bpf_util.h"
#include "sensing/contention.h"
#include "sensing/contention_load.h"
#include "contention.skel.h"

/* ---- feature probing --------------------------------------------------- */

/* What each signal needs, as found in the kernel's BTF. */
struct features {
	bool wakeup, wakeup_new, sw, sched_info, iter_task, proc_exit;
	bool io_start, rq_issue, rq_complete, bio_queue;
	bool sys_enter, sys_exit, task_pt_regs;
	bool lock_begin, lock_end;
	bool pf, memcg_reclaim, direct_reclaim;
	bool sk_cgrp, retrans, retrans_err, probe;
	bool iter_tcp, destroy_sock, total_rto, storage_iter;
};

/* The tracepoint's arguments, the context pointer not counted; -1 when absent. */
static int tracepoint_args(const struct btf *btf, const char *name)
{
	const struct btf_type *t;
	char type[128];
	int id;

	snprintf(type, sizeof(type), "btf_trace_%s", name);
	id = btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF);
	if (id < 0)
		return -1;
	t = btf__type_by_id(btf, btf__resolve_type(btf, btf__type_by_id(btf, id)->type));
	if (!t || !btf_is_ptr(t))
		return -1;
	t = btf__type_by_id(btf, t->type);
	return t && btf_is_func_proto(t) ? (int)btf_vlen(t) - 1 : -1;
}

static void probe_features(const struct btf *btf, struct features *f)
{
	f->wakeup = bpf_util_has_tracepoint(btf, "sched_wakeup");
	f->wakeup_new = bpf_util_has_tracepoint(btf, "sched_wakeup_new");
	f->sw = bpf_util_has_tracepoint(btf, "sched_switch");
	/* The kernel's own run-queue accounting, and a way to its clock. */
	f->sched_info = bpf_util_has_member(btf, "task_struct", "sched_info") &&
			bpf_util_has_member(btf, "cfs_rq", "rq");
	/* Run-queue delay read once a tick by a task iterator (5.8+). */
	f->iter_task = btf__find_by_name_kind(btf, "bpf_iter__task", BTF_KIND_STRUCT) > 0;
	f->proc_exit = bpf_util_has_tracepoint(btf, "sched_process_exit");
	f->io_start = bpf_util_has_tracepoint(btf, "block_io_start");
	f->rq_issue = bpf_util_has_tracepoint(btf, "block_rq_issue");
	f->bio_queue = bpf_util_has_tracepoint(btf, "block_bio_queue");
	f->rq_complete = bpf_util_has_tracepoint(btf, "block_rq_complete");
	f->sys_enter = bpf_util_has_tracepoint(btf, "sys_enter");
	f->sys_exit = bpf_util_has_tracepoint(btf, "sys_exit");
	/* Futex waits at the switch read the sleeper's saved registers. */
	f->task_pt_regs = libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT,
						  BPF_FUNC_task_pt_regs, NULL) > 0;
	f->lock_begin = bpf_util_has_tracepoint(btf, "contention_begin");
	f->lock_end = bpf_util_has_tracepoint(btf, "contention_end");
	f->pf = bpf_util_has_tracepoint(btf, "page_fault_user");
	f->memcg_reclaim = bpf_util_has_tracepoint(btf, "mm_vmscan_memcg_reclaim_begin") &&
			   bpf_util_has_tracepoint(btf, "mm_vmscan_memcg_reclaim_end");
	f->direct_reclaim = bpf_util_has_tracepoint(btf, "mm_vmscan_direct_reclaim_begin") &&
			    bpf_util_has_tracepoint(btf, "mm_vmscan_direct_reclaim_end");
	f->sk_cgrp = bpf_util_has_member(btf, "sock", "sk_cgrp_data");
	f->retrans = bpf_util_has_tracepoint(btf, "tcp_retransmit_skb");
	f->probe = bpf_util_has_tracepoint(btf, "tcp_probe");
	/* 6.13 and later also fire it for a retransmission that failed, and say so. */
	f->retrans_err = tracepoint_args(btf, "tcp_retransmit_skb") >= 3;
	/* The TCP socket iterator (5.9+), the socket's end, and its RTO count (6.7+). */
	f->iter_tcp = btf__find_by_name_kind(btf, "bpf_iter__tcp", BTF_KIND_STRUCT) > 0 &&
		      bpf_util_has_func(btf, "bpf_iter_tcp");
	f->destroy_sock = bpf_util_has_tracepoint(btf, "tcp_destroy_sock");
	/*
	 * After the first walk, a tick visits only the sockets with storage:
	 * the socket storage map's iterator (5.9+), the new sockets given one
	 * at inet_sock_set_state.
	 */
	f->storage_iter =
		btf__find_by_name_kind(btf, "bpf_iter__bpf_sk_storage_map", BTF_KIND_STRUCT) > 0 &&
		bpf_util_has_func(btf, "bpf_iter_bpf_sk_storage_map") &&
		bpf_util_has_tracepoint(btf, "inet_sock_set_state");
	f->total_rto = bpf_util_has_member(btf, "tcp_sock", "total_rto");
}

static void note(struct contention_loaded *c, const char *fmt, ...)
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

/*
 * Run-queue delay from the kernel's per-task accounting, read by a task
 * iterator once a tick and at each exit: nothing on the context switch.
 */
static bool runq_iter(const struct features *f)
{
	return f->sched_info && f->iter_task && f->proc_exit;
}

/*
 * The flow figures' fallback, said where it is taken: what each tick then
 * costs (measured on a host whose established hash table has that many
 * buckets).
 */
#define FLOWS_WALK \
	"every tick walks the whole TCP hash table, empty buckets too (1.6 ms a tick with 262,144 buckets)"

/* Of the signals asked for, those this kernel can run; note the others. */
static unsigned feasible(struct contention_loaded *c, unsigned want, const struct features *f)
{
	unsigned ok = 0;

	if ((want & CONT_SCHED) && !runq_iter(f) && !(f->sw && f->wakeup))
		note(c,
		     "sched: kernel has neither sched_info with a task iterator nor sched_switch/sched_wakeup BTF tracepoints");
	else if (want & CONT_SCHED)
		ok |= CONT_SCHED;
	if ((want & CONT_BLOCK) && !(f->rq_complete && (f->io_start || f->rq_issue)))
		note(c,
		     "block: kernel has no block_rq_complete and block_io_start/block_rq_issue tracepoints");
	else if (want & CONT_BLOCK)
		ok |= CONT_BLOCK;
	if ((want & CONT_VFS) && !(f->sys_exit && SYSCALL_ABI_OK))
		note(c, "vfs: needs the sys_exit tracepoint on x86_64");
	else if (want & CONT_VFS)
		ok |= CONT_VFS;
	if ((want & CONT_FUTEX) &&
	    !(SYSCALL_ABI_OK && ((f->sw && f->task_pt_regs) || (f->sys_enter && f->sys_exit))))
		note(c,
		     "futex: needs sched_switch and bpf_task_pt_regs (5.15+), or the sys_enter/sys_exit tracepoints, on x86_64");
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
		note(c,
		     "network: sockets carry no cgroup here (CONFIG_SOCK_CGROUP_DATA off), TCP events cannot be attributed");
	else if ((want & CONT_NETWORK) && !f->retrans)
		note(c, "network: kernel has no tcp_retransmit_skb tracepoint");
	else if (want & CONT_NETWORK)
		ok |= CONT_NETWORK;
	if ((want & CONT_TCP_RTT) && !f->sk_cgrp)
		note(c,
		     "tcp_rtt: sockets carry no cgroup here (CONFIG_SOCK_CGROUP_DATA off), TCP events cannot be attributed");
	else if ((want & CONT_TCP_RTT) && !f->probe)
		note(c, "tcp_rtt: kernel has no tcp_probe tracepoint");
	else if (want & CONT_TCP_RTT)
		ok |= CONT_TCP_RTT;
	if ((want & CONT_TCP_FLOWS) && !f->sk_cgrp)
		note(c,
		     "tcp_flows: sockets carry no cgroup here (CONFIG_SOCK_CGROUP_DATA off), TCP flows cannot be attributed");
	else if ((want & CONT_TCP_FLOWS) && !f->iter_tcp)
		note(c, "tcp_flows: kernel has no TCP socket iterator (iter/tcp, 5.9+)");
	else if ((want & CONT_TCP_FLOWS) && !(f->destroy_sock && f->retrans))
		note(c,
		     "tcp_flows: kernel has no tcp_destroy_sock and tcp_retransmit_skb tracepoints");
	else if (want & CONT_TCP_FLOWS)
		ok |= CONT_TCP_FLOWS;
	/* Fallbacks that run, but cost more: worth a word in the log. */
	if ((ok & CONT_SCHED) && !runq_iter(f))
		note(c,
		     "sched: no sched_info accounting or task iterator here, run-queue waits are stamped at wake-up and switch (costlier)");
	if ((ok & CONT_FUTEX) && !(f->sw && f->task_pt_regs))
		note(c,
		     "futex: no bpf_task_pt_regs (5.15+), waits come from sys_enter/sys_exit (costs every syscall)");
	if ((ok & CONT_TCP_FLOWS) && !f->storage_iter)
		note(c,
		     "tcp_flows: no socket storage iterator or inet_sock_set_state here, " FLOWS_WALK);
	if ((ok & CONT_TCP_FLOWS) && !f->total_rto)
		note(c,
		     "tcp_flows: sockets do not count their retransmission timeouts before 6.7 (tcp_sock.total_rto), timeouts are null");
	return ok;
}

/* ---- loading ------------------------------------------------------------ */

/*
 * Our network namespace: the socket iterator walks only the reader's, so
 * the hooks that see every socket keep to it too. 0 when unknown.
 */
static uint32_t netns_inum(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (uint32_t)st.st_ino;
}

static int configure(struct contention_bpf *skel, unsigned m, const struct features *f,
		     uint32_t max_cgroups)
{
	bool futex_switch, iter, stamps;
	struct bpf_program *p;
	int r;

	r = bpf_map__set_max_entries(skel->maps.ct_cg_counters, max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.ct_cg_hists, max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.ct_cg_runq, max_cgroups);
	if (!r)
		r = bpf_map__set_max_entries(skel->maps.ct_cg_tcp, max_cgroups);
	if (r)
		return r;
	futex_switch = (m & CONT_FUTEX) && f->sw && f->task_pt_regs;
	iter = (m & CONT_SCHED) && runq_iter(f);
	stamps = (m & CONT_SCHED) && !iter;
	skel->rodata->runq_stamps = stamps;
	skel->rodata->vfs_on = m & CONT_VFS;
	skel->rodata->futex_switch = futex_switch;
	skel->rodata->futex_syscalls = (m & CONT_FUTEX) && !futex_switch;
	skel->rodata->runq_sched_info = f->sched_info;
	skel->rodata->flows_on = m & CONT_TCP_FLOWS;
	skel->rodata->flows_netns = netns_inum();
	bpf_object__for_each_program (p, skel->obj)
		bpf_program__set_autoload(p, false);
#define ON(prog, cond) bpf_program__set_autoload(skel->progs.prog, (cond))
	ON(ct_runq_iter, iter);
	ON(ct_runq_exit, iter);
	/* Without the iterator, the wake-ups and switches stamp waits themselves. */
	ON(ct_sched_wakeup, stamps);
	ON(ct_sched_wakeup_new, stamps && f->wakeup_new);
	ON(ct_sched_switch, stamps || futex_switch);
	ON(ct_block_io_start, (m & CONT_BLOCK) && f->io_start);
	ON(ct_block_rq_issue, (m & CONT_BLOCK) && !f->io_start);
	ON(ct_block_bio_queue, (m & CONT_BLOCK) && f->bio_queue);
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
	ON(ct_tcp_retransmit, (m & (CONT_NETWORK | CONT_TCP_FLOWS)) && !f->retrans_err);
	ON(ct_tcp_retransmit_err, (m & (CONT_NETWORK | CONT_TCP_FLOWS)) && f->retrans_err);
	ON(ct_tcp_iter, m & CONT_TCP_FLOWS);
	ON(ct_tcp_destroy, m & CONT_TCP_FLOWS);
	ON(ct_flows_iter, (m & CONT_TCP_FLOWS) && f->storage_iter);
	ON(ct_tcp_state, (m & CONT_TCP_FLOWS) && f->storage_iter);
	/* A map's iterator is attached to its map, by attach_flows_iter(). */
	bpf_program__set_autoattach(skel->progs.ct_flows_iter, false);
	ON(ct_tcp_probe, m & CONT_TCP_RTT);
#undef ON
	return 0;
}

/*
 * The socket storage map's iterator, when loaded, on ct_sk_flows: libbpf's
 * attach does not know which map. 0 or -errno.
 */
static int attach_flows_iter(struct contention_bpf *skel)
{
	union bpf_iter_link_info linfo = { .map.map_fd = bpf_map__fd(skel->maps.ct_sk_flows) };
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo,
		    .link_info_len = sizeof(linfo));
	struct bpf_link *link;

	if (bpf_program__fd(skel->progs.ct_flows_iter) < 0 || skel->links.ct_flows_iter)
		return 0;
	link = bpf_program__attach_iter(skel->progs.ct_flows_iter, &opts);
	if (!link)
		return -errno;
	skel->links.ct_flows_iter = link;
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
	if (!r)
		r = attach_flows_iter(skel);
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
	case CONT_SCHED:
		return "sched";
	case CONT_BLOCK:
		return "block";
	case CONT_VFS:
		return "vfs";
	case CONT_FUTEX:
		return "futex";
	case CONT_LOCK:
		return "lock";
	case CONT_MEMORY:
		return "memory";
	case CONT_NETWORK:
		return "network";
	case CONT_TCP_RTT:
		return "tcp_rtt";
	case CONT_PAGE_FAULTS:
		return "page_faults";
	case CONT_TCP_FLOWS:
		return "tcp_flows";
	default:
		return "?";
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
static int load_feasible(struct contention_loaded *c, unsigned m, const struct features *f,
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
			note(c,
			     "%s: the kernel refused its BPF programs (%s; TAILWARDEN_DEBUG_LIBBPF=1 shows the verifier log)",
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
		note(c, "all: the BPF programs loaded one by one but not together (%s)",
		     strerror(-r));
		return 0;
	}
	c->running = good;
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * One run of an iterator program. read() runs it over the objects (tasks,
 * sockets) until it has filled the buffer, and returns 0 at the end. The
 * TCP hash table's walk prints nothing: one read() is all of it. The
 * run-queue and socket storage iterators print a byte per object: one
 * read() per ITER_READ_CHUNK of them, each a point where the kernel may
 * let a waiting task run (0.1-0.2 ms of objects, not all of them).
 */
#define ITER_READ_CHUNK 256

static int run_iter(struct bpf_link *link)
{
	char buf[ITER_READ_CHUNK];
	ssize_t n;
	int fd;

	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	if (n < 0)
		n = -errno;
	close(fd);
	return (int)n;
}

int contention_runq_iter(struct contention_loaded *c)
{
	uint64_t start = monotonic_ns();
	int r;

	if (!c->skel || !c->skel->links.ct_runq_iter)
		return 0;
	/* The first run only learns where every task stands. */
	c->skel->bss->runq_since = c->iter_prev_ns ? c->iter_prev_ns : start;
	r = run_iter(c->skel->links.ct_runq_iter);
	if (r)
		return r;
	c->iter_prev_ns = start;
	return 0;
}

int contention_flows_iter(struct contention_loaded *c)
{
	uint64_t start = monotonic_ns();
	int r;

	if (!c->skel || !c->skel->links.ct_tcp_iter)
		return 0;
	c->skel->bss->flows_gen = ++c->flows_gen;
	/* Once the walk has given every socket its storage, the storage's walk. */
	if (c->flows_walked && c->skel->links.ct_flows_iter) {
		r = run_iter(c->skel->links.ct_flows_iter);
	} else {
		r = run_iter(c->skel->links.ct_tcp_iter);
		c->flows_walked = !r;
	}
	if (r)
		return r;
	/* From now on a socket the iterator never met is new: all its life counts. */
	c->skel->bss->flows_armed = true;
	c->flows_iter_ns = monotonic_ns() - start;
	return 0;
}

int contention_load(unsigned want, uint32_t max_cgroups, struct contention_loaded *c,
		    const char **why)
{
	struct features f = { 0 };
	struct btf *btf;
	int r;

	if (!(want & CONT_ALL))
		return 0;
	r = bpf_util_check_root(why);
	if (r)
		return r;
	bpf_util_quiet_libbpf();
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		note(c, "all: " BPF_UTIL_NO_BTF);
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
	if (r) {
		*why = "out of memory loading the contention sensor";
		return r;
	}
	r = contention_runq_iter(c);
	if (r) {
		note(c, "sched: the run-queue task iterator failed (%s)", strerror(-r));
		bpf_link__destroy(c->skel->links.ct_runq_iter);
		c->skel->links.ct_runq_iter = NULL;
		c->running &= ~CONT_SCHED;
	}
	c->flows_timeouts = f.total_rto;
	r = contention_flows_iter(c);
	if (r) {
		note(c, "tcp_flows: the TCP socket iterator failed (%s)", strerror(-r));
		bpf_link__destroy(c->skel->links.ct_tcp_iter);
		c->skel->links.ct_tcp_iter = NULL;
		c->running &= ~CONT_TCP_FLOWS;
	} else if (c->skel->links.ct_flows_iter) {
		/* The storage's walk, tried now: what every later tick runs. */
		r = contention_flows_iter(c);
		if (r) {
			note(c, "tcp_flows: the socket storage iterator failed (%s), " FLOWS_WALK,
			     strerror(-r));
			bpf_link__destroy(c->skel->links.ct_flows_iter);
			c->skel->links.ct_flows_iter = NULL;
		}
	}
	return 0;
}

int contention_attach_loaded(struct contention_loaded *c, bool on)
{
	int r;

	if (!c->skel)
		return 0;
	if (!on) {
		contention_bpf__detach(c->skel);
		return 0;
	}
	/* Sockets made while detached have no storage: the next tick walks all. */
	c->flows_walked = false;
	r = contention_bpf__attach(c->skel);
	return r ? r : attach_flows_iter(c->skel);
}

void contention_unload(struct contention_loaded *c)
{
	contention_bpf__destroy(c->skel);
	c->skel = NULL;
}
