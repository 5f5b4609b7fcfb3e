// SPDX-License-Identifier: GPL-2.0
/*
 * Contention signals: why a cgroup is slow. Scheduler, block I/O, VFS,
 * futex, kernel lock, memory and TCP events are aggregated per cgroup2 id
 * in the kernel; user space diffs the cumulative maps once per tick, like
 * the request sensor. Nothing per event crosses to user space.
 *
 * Only BTF tracepoints (tp_btf): this kernel family has no kprobes and
 * refuses fentry. Each signal's programs load only when its tracepoints
 * exist and it was asked for (bpf_program__set_autoload from user space).
 *
 * Per-thread state (stamps, and how much run-queue delay was charged)
 * lives in task-local storage (BPF_MAP_TYPE_TASK_STORAGE, 5.11+ for
 * tracing: found from the task_struct in a few loads, no hash, freed with
 * the task, so bounded by the number of threads; a failed get is counted
 * as a drop). Block requests are stamped in a hash keyed by the struct
 * request address (requests are preallocated per hardware tag and reused,
 * so a stamp whose completion we missed is overwritten by the next use of
 * the same tag).
 *
 * The context switch is the hot path (up to a million per second per CPU):
 * even an empty program there costs 3-4% of `perf bench sched pipe` on our
 * test VMs, so no default signal hooks it. Run-queue delay is read from the
 * kernel's own per-task accounting by a task iterator that user space runs
 * once per tick (and at each task's exit); only futex waits, opt-in, and
 * kernels without that accounting use the switch, and there futex waits
 * come from the sleeper's saved registers, so that they need no syscall
 * hook and, for most switches, no per-task state.
 *
 * A cgroup is the cgroup2 id of the task the event belongs to, which is
 * not always the current task: in sched_switch the current task is prev,
 * so next's cgroup is read from next itself; block completions run in
 * interrupt context, so the cgroup is remembered at submission; TCP
 * events run in softirq, so the socket's own cgroup is used.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bpf/contention_abi.h"
#include "bpf/common.bpf.h"

#define TASK_RUNNING 0
#define REQ_OP_BITS 8
#define REQ_OP_MASK ((1 << REQ_OP_BITS) - 1)
#define S_IFMT 00170000
#define S_IFREG 0100000

/* Load-time settings, set by user space between open and load. */
/* A wait longer than this is a lost stamp, not a wait: dropped, counted. */
const volatile __u64 max_wait_ns = 60000000000ULL;
/*
 * A futex wait longer than this is a thread idling for work (a pool
 * waiting on a condition variable), not contention: not counted.
 */
const volatile __u64 futex_idle_ns = 1000000000ULL;
/* Which parts of the shared sched_switch and sys_exit programs run. */
/* Run-queue waits stamped at wake-up and switch (kernels without sched_info). */
const volatile bool runq_stamps = false;
const volatile bool vfs_on = false;
/* Futex waits seen at the switch (bpf_task_pt_regs, 5.15+), or else ... */
const volatile bool futex_switch = false;
/* ... from sys_enter/sys_exit, which costs every syscall on the host. */
const volatile bool futex_syscalls = false;

/*
 * The kernel keeps per-task run-queue accounting (sched_info, what
 * /proc/<pid>/schedstat shows). Without CONFIG_SCHED_INFO, user space
 * clears this and sets runq_stamps instead.
 */
const volatile bool runq_sched_info = true;

/*
 * Set by user space before each run of the task iterator: when the
 * previous run started (CLOCK_MONOTONIC ns, as task->start_time). A task
 * the iterator meets for the first time that started before then was
 * already there, so its earlier waits are not this window's.
 */
__u64 runq_since = 0;

/* Per-thread state; stamps are 0 = not waiting. */
struct ct_task {
	__u64 runq;	  /* stamp mode only: woken or preempted at */
	__u64 futex_ts;	  /* asleep in a futex wait since */
	__u64 lock_ts;	  /* inside contention_begin .. contention_end */
	__u64 reclaim_ts; /* inside memcg or direct reclaim */
	__u64 rq_delay;	  /* iterator: sched_info.run_delay already charged */
	__u64 rq_turns;	  /* iterator: sched_info.pcount already charged */
	__u64 rq_known;	  /* iterator: the two above are set */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ct_task);
} ct_tasks SEC(".maps");

/* A block request in flight: when and by whom it was submitted. */
struct ct_rq {
	__u64 ts;
	__u64 cgid;
	__u32 op;
	__u32 pad;
};

/*
 * Preallocated: requests come and go thousands of times a second, and
 * in-flight requests are bounded by the queue depths of all disks.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct request address */
	__type(value, struct ct_rq);
} ct_rqs SEC(".maps");

struct ct_bio {
	__u64 ts;
	__u64 cgid;
};

/*
 * Bios on their way to a request: stamped where they enter the block
 * layer, so that the wait for a free request (a tag) is part of the
 * latency. A bio that never becomes a request of its own (merged into
 * another, or taken by a bio-based driver) leaves its stamp behind; the
 * LRU forgets those.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct bio address */
	__type(value, struct ct_bio);
} ct_bios SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64); /* cgroup2 id */
	__type(value, struct ct_cg_counters);
} ct_cg_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct ct_cg_hists);
} ct_cg_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct ct_cg_runq);
} ct_cg_runq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CT_DROP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ct_drops SEC(".maps");

/*
 * The spinning lock wait under way on this CPU (see ct_lock_begin): the
 * lock, when it began (0: not one of the timed ones), and a count of
 * spinning waits begun here, which picks the timed ones and tells a slot
 * left behind from one still in use.
 */
struct ct_spin {
	__u64 lock;
	__u64 ts;
	__u32 n;
	__u32 set_at;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_spin);
} ct_spin SEC(".maps");

/* Zeroed templates for inserts: too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_cg_hists);
} ct_zero_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_cg_runq);
} ct_zero_runq SEC(".maps");

static __always_inline void drop(__u32 what)
{
	drop_count(&ct_drops, what);
}

static __always_inline struct ct_cg_counters *cg_counters(__u64 cgid)
{
	struct ct_cg_counters zero = {};

	return cg_entry(&ct_cg_counters, cgid, &zero, &ct_drops, CT_DROP_CGROUP_FULL);
}

static __always_inline struct ct_cg_hists *cg_hists(__u64 cgid)
{
	return cg_entry_big(&ct_cg_hists, cgid, &ct_zero_hists, &ct_drops, CT_DROP_CGROUP_FULL);
}

/* The span from a stamp to now, or 0 (and counted) when it is not sane. */
static __always_inline __u64 waited(__u64 start, __u64 now)
{
	if (now < start || now - start > max_wait_ns) {
		drop(CT_DROP_ABSURD);
		return 0;
	}
	return now - start;
}

/*
 * cgroup2 id of any task. Plain loads through BTF pointers, which the
 * verifier turns into fault-safe loads (and libbpf relocates with CO-RE,
 * as BPF_CORE_READ would): four of them are much cheaper than four
 * bpf_probe_read_kernel() calls, which matters on every context switch.
 * A task moving between cgroups at this instant may be charged to
 * either; that is all RCU would have bought us.
 */
static __always_inline __u64 task_cgroup(struct task_struct *t)
{
	return t->cgroups->dfl_cgrp->kn->id;
}

static __always_inline struct ct_task *stamps(struct task_struct *t, bool create)
{
	struct ct_task *s;

	s = bpf_task_storage_get(&ct_tasks, t, NULL, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!s && create)
		drop(CT_DROP_STAMP_FULL);
	return s;
}

/* ---- scheduler: run-queue delay, and futex waits ------------------------ */

#define PF_KTHREAD 0x00200000

/*
 * Charge n run-queue waits of d ns in all to t's cgroup: this CPU's slot,
 * plain adds; the n go to the bucket of their mean.
 */
static __always_inline void runq_charge(struct task_struct *t, __u64 d, __u64 n)
{
	__u64 cgid = task_cgroup(t);
	struct ct_cg_runq *r;
	__u32 b;

	r = cg_entry_big(&ct_cg_runq, cgid, &ct_zero_runq, &ct_drops, CT_DROP_CGROUP_FULL);
	if (!r)
		return;
	r->runq_ns += d;
	b = hist_bucket_of(d / n);
	r->hist[hist_index(b)] += n;
}

/*
 * Iterator mode (the default). The kernel keeps, per task, run_delay
 * (total time spent runnable on a run queue, waiting) and pcount (turns
 * on a CPU). Once per tick user space runs ct_runq_iter over every task;
 * what each task's counters grew since the last visit is charged to the
 * cgroup it is in now: the total to runq_ns, and the turns to the
 * histogram bucket of their mean wait. So the histogram is of each
 * thread's mean wait per turn in the window, weighted by its turns, not of
 * single waits, which only a hook on every switch could see. A task that
 * exits between two runs is charged at its exit (ct_runq_exit); a task
 * that moved cgroups is charged to the new one for the whole window.
 */
static __always_inline void runq_visit(struct task_struct *t, struct ct_task *s)
{
	__u64 delay = t->sched_info.run_delay, turns = t->sched_info.pcount;
	__u64 d, n;

	if (s && s->rq_known) {
		d = delay - s->rq_delay;
		n = turns - s->rq_turns;
	} else if (t->start_time >= runq_since) {
		d = delay; /* new since the last run: all of its life is ours */
		n = turns;
	} else {
		d = n = 0; /* there before we looked: its past is not ours */
	}
	if (s) {
		s->rq_delay = delay;
		s->rq_turns = turns;
		s->rq_known = 1;
	}
	if (d && d <= (__u64)1 << 62)
		runq_charge(t, d, n ?: 1);
}

/*
 * Once a tick, over every task. One byte out per task, as ct_flows_iter
 * does per socket: the run is read in chunks, and the CPU can go to a
 * waiting task between them.
 */
SEC("iter/task")
int ct_runq_iter(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	char one = 1;

	if (!t)
		return 0;
	if (t->pid)
		runq_visit(t, stamps(t, true));
	bpf_seq_write(ctx->meta->seq, &one, 1);
	return 0;
}

/* The last of an exiting task's waits, which the next run would not see. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ct_runq_exit, struct task_struct *p)
{
	if (p->pid)
		runq_visit(p, stamps(p, false));
	return 0;
}

/*
 * A futex wait's own run-queue part, from sched_info: last_queued is the
 * rq clock when the current wait began (0 when not waiting), and
 * sched_switch fires before the switch folds it into run_delay, so the
 * wait that ends here is rq clock - last_queued. Returns it in ns (0:
 * none).
 */
static __always_inline __u64 runq_sched_info_wait(struct task_struct *next)
{
	__u64 queued = next->sched_info.last_queued, clock;

	if (!queued)
		return 0;
	/*
	 * The run queue's clock, as sched_info reads it; next is on this
	 * CPU's queue, and se.cfs_rq is set for every class (needs
	 * CONFIG_FAIR_GROUP_SCHED; user space checks). The runqueues per-CPU
	 * symbol would be simpler, but kernels without CONFIG_KALLSYMS_ALL
	 * cannot resolve it.
	 */
	clock = next->se.cfs_rq->rq->clock;
	if (clock <= queued)
		return 0;
	if (clock - queued > max_wait_ns) {
		drop(CT_DROP_ABSURD);
		return 0;
	}
	return clock - queued;
}

/*
 * Stamp mode, for kernels without sched_info. sched_wakeup fires in the
 * waker's context (or on the target CPU when the wake-up was queued to
 * it), when p is put on a run queue. The current task is the waker: only
 * p's stamp is touched here. A prev still runnable at the switch
 * (preempted, or yielding) waits again from then.
 */
static __always_inline void runq_stamp(struct task_struct *p)
{
	struct ct_task *s;

	if (!p->pid)
		return;
	s = stamps(p, true);
	if (s)
		s->runq = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(ct_sched_wakeup, struct task_struct *p)
{
	runq_stamp(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(ct_sched_wakeup_new, struct task_struct *p)
{
	runq_stamp(p);
	return 0;
}

static __always_inline __u64 runq_stamp_wait(struct ct_task *s)
{
	__u64 start = s->runq;

	if (!start)
		return 0;
	s->runq = 0;
	return waited(start, bpf_ktime_get_ns());
}

/* Futex ops that block: waits and priority-inheritance locks. */
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CLOCK_REALTIME 256

static __always_inline bool futex_waits(long nr, long op)
{
	if (nr == NR_futex_waitv || nr == NR_futex_wait)
		return true;
	if (nr != NR_futex)
		return false;
	op &= ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
	return op == FUTEX_WAIT || op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI ||
	       op == FUTEX_LOCK_PI2 || op == FUTEX_WAIT_REQUEUE_PI;
}

/* Futex waits are not checked against max_wait_ns: idle threads wait for hours. */
static __always_inline void futex_charge(__u64 cgid, __u64 d)
{
	struct ct_cg_counters *c;

	/* Longer waits are threads idling for work, not contention. */
	if (!d || d > futex_idle_ns)
		return;
	c = cg_counters(cgid);
	if (c) {
		c->futex_wait_ns += d;
		c->futex_waits++;
	}
}

/*
 * Is t, a user thread, inside a blocking futex call? Its user registers,
 * saved at syscall entry, say which syscall (orig_ax) and which op (the
 * second argument, rsi) on x86_64; they stay so until the call returns.
 * Kernel threads have no user registers.
 */
static __always_inline bool in_futex_wait(struct task_struct *t)
{
	struct pt_regs *regs;

	if (t->flags & PF_KTHREAD)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	return regs && futex_waits(regs->orig_ax, regs->si);
}

/* A thread going to sleep inside a futex wait: stamp it. */
static __always_inline void futex_block(struct task_struct *prev)
{
	struct ct_task *s;

	if (!in_futex_wait(prev))
		return;
	s = stamps(prev, true);
	if (s)
		s->futex_ts = bpf_ktime_get_ns();
}

/*
 * Back on a CPU inside a futex wait: if it slept there, the wait is the
 * time off CPU less the run-queue wait after the wake-up (runq, when
 * measured), which is the scheduler's delay, not the lock's. Charged to
 * the waiter's cgroup. Every switch-in passes here, so the cheapest test
 * comes first: a thread with no task-local storage at all was never
 * stamped (bpf_storage is NULL, one load; the run-queue iterator gives
 * every thread some, though); then its registers; only a thread in a
 * futex call pays the storage lookup.
 */
static __always_inline void futex_resume(struct task_struct *next, __u64 runq)
{
	__u64 now, start, d;
	struct ct_task *s;

	if (!next->bpf_storage || !in_futex_wait(next))
		return;
	s = stamps(next, false);
	if (!s || !s->futex_ts)
		return;
	if (runq_sched_info)
		runq = runq_sched_info_wait(next);
	start = s->futex_ts;
	s->futex_ts = 0;
	now = bpf_ktime_get_ns();
	d = now > start ? now - start : 0;
	futex_charge(task_cgroup(next), d > runq ? d - runq : 0);
}

/*
 * sched_switch runs with the run-queue lock held and interrupts off, on
 * the CPU that switches; current is prev. It loads only for futex waits
 * (opt-in) and in stamp mode. The run-queue wait that ends here is next's,
 * charged to next's cgroup (not current's, which is prev's). The idle task
 * (pid 0) neither waits nor is charged.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(ct_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bool runnable = preempt || prev_state == TASK_RUNNING;
	struct ct_task *s;
	__u64 runq = 0;

	if (prev->pid) {
		if (futex_switch && !runnable)
			futex_block(prev);
		if (runq_stamps && runnable) {
			s = stamps(prev, true);
			if (s)
				s->runq = bpf_ktime_get_ns();
		}
	}
	if (!next->pid)
		return 0;
	if (runq_stamps) {
		s = stamps(next, false);
		runq = s ? runq_stamp_wait(s) : 0;
		if (runq)
			runq_charge(next, runq, 1);
	}
	if (futex_switch)
		futex_resume(next, runq);
	return 0;
}

/* ---- block I/O ----------------------------------------------------------- */

/*
 * Submission: block_bio_queue fires in submit_bio() before the bio looks
 * for a request, in the submitting task's context; block_io_start (6.5+)
 * fires from blk_account_io_start() once the bio has become a new
 * request, that is after the submitter may have slept for a free tag.
 * When the disk's queue is full (a neighbour with hundreds of requests
 * in flight) that sleep is most of what a small reader waits, so a
 * request's latency starts at its first bio's stamp when there is one.
 * Bios merged into an existing request later are charged to that
 * request's submitter. Writeback is submitted by flusher threads
 * (kworkers in the root cgroup), not by the task that dirtied the
 * pages, so buffered writes land on the root cgroup; direct I/O and
 * reads are charged right. Without block_io_start, block_rq_issue stamps
 * at dispatch, which may run in a kblockd worker; the first bio's stamp,
 * when there is one, still gives the submitter and the submission time.
 */
#define BIO_STAMP_MAX_AGE_NS (10ULL * 1000000000ULL)

SEC("tp_btf/block_bio_queue")
int BPF_PROG(ct_block_bio_queue, struct bio *bio)
{
	__u64 key = (__u64)bio;
	struct ct_bio s = {
		.ts = bpf_ktime_get_ns(),
		.cgid = bpf_get_current_cgroup_id(),
	};

	bpf_map_update_elem(&ct_bios, &key, &s, BPF_ANY);
	return 0;
}

static __always_inline void rq_start(struct request *rq)
{
	__u64 key = (__u64)rq, bio_key = (__u64)rq->bio;
	struct ct_rq s = {
		.ts = bpf_ktime_get_ns(),
		.cgid = bpf_get_current_cgroup_id(),
		.op = rq->cmd_flags & REQ_OP_MASK,
	};
	struct ct_bio *b;

	if (bio_key) {
		b = bpf_map_lookup_elem(&ct_bios, &bio_key);
		/* An old stamp is of an earlier bio at the same address. */
		if (b && b->ts <= s.ts && s.ts - b->ts < BIO_STAMP_MAX_AGE_NS) {
			s.ts = b->ts;
			s.cgid = b->cgid;
		}
		if (b)
			bpf_map_delete_elem(&ct_bios, &bio_key);
	}
	/* BPF_ANY: a tag reused after a completion we missed. */
	if (bpf_map_update_elem(&ct_rqs, &key, &s, BPF_ANY))
		drop(CT_DROP_STAMP_FULL);
}

SEC("tp_btf/block_io_start")
int BPF_PROG(ct_block_io_start, struct request *rq)
{
	rq_start(rq);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(ct_block_rq_issue, struct request *rq)
{
	rq_start(rq);
	return 0;
}

/*
 * Completion, usually in interrupt context on any CPU: fires at the start
 * of blk_update_request() with the bytes completed now, before the
 * request's remaining length (__data_len) is reduced, and once for the
 * whole request in batched completions. A partial completion adds its
 * bytes and keeps the stamp; the last one also records the latency.
 * Only reads and writes move bytes (not flush or discard); every request
 * counts in the latency histogram.
 */
SEC("tp_btf/block_rq_complete")
int BPF_PROG(ct_block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq, now, d;
	struct ct_cg_counters *c;
	struct ct_cg_hists *h;
	struct ct_rq *sp, s;
	bool last;

	sp = bpf_map_lookup_elem(&ct_rqs, &key);
	if (!sp)
		return 0;
	s = *sp;
	last = nr_bytes >= rq->__data_len;
	if (last)
		bpf_map_delete_elem(&ct_rqs, &key);
	c = cg_counters(s.cgid);
	if (c && !error) {
		if (s.op == REQ_OP_READ)
			c->io_read_bytes += nr_bytes;
		else if (s.op == REQ_OP_WRITE)
			c->io_write_bytes += nr_bytes;
	}
	if (!last)
		return 0;
	if (c)
		c->io_requests++;
	now = bpf_ktime_get_ns();
	d = waited(s.ts, now);
	h = d ? cg_hists(s.cgid) : NULL;
	if (h)
		hist_add(h->io, hist_bucket_of(d), 1);
	return 0;
}

/* ---- syscalls: VFS bytes and futex waits (x86_64 numbers) --------------- */

/*
 * Is fd of the current task a regular file (not a socket, pipe, tty)?
 * Plain loads through BTF pointers down to the fd array; the slot itself
 * (a variable index) and the file behind it need probe reads.
 */
static __always_inline bool fd_is_regular(long fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file *file;
	umode_t mode;

	if (fd < 0 || (unsigned long)fd >= fdt->max_fds)
		return false;
	if (bpf_probe_read_kernel(&file, sizeof(file), (void *)((unsigned long)fdt->fd + fd * 8)) ||
	    !file)
		return false;
	mode = BPF_CORE_READ(file, f_inode, i_mode);
	return (mode & S_IFMT) == S_IFREG;
}

/*
 * After the syscall: the fd is still open (close in another thread could
 * race, then we miss or misjudge one call). Covers read/write and their
 * positioned and vectored forms, and the in-kernel copies (sendfile,
 * splice, copy_file_range) on either side. Not seen: mmap'ed file access
 * and io_uring, which do not go through these syscalls.
 */
static __always_inline void vfs_exit(struct pt_regs *regs, long nr, long ret)
{
	struct ct_cg_counters *c;
	__u64 rd = 0, wr = 0;

	switch (nr) {
	case NR_read:
	case NR_pread64:
	case NR_readv:
	case NR_preadv:
	case NR_preadv2:
		if (fd_is_regular(regs->di))
			rd = ret;
		break;
	case NR_write:
	case NR_pwrite64:
	case NR_writev:
	case NR_pwritev:
	case NR_pwritev2:
		if (fd_is_regular(regs->di))
			wr = ret;
		break;
	case NR_sendfile: /* (out_fd, in_fd, ...) */
		if (fd_is_regular(regs->si))
			rd = ret;
		if (fd_is_regular(regs->di))
			wr = ret;
		break;
	case NR_splice:
	case NR_copy_file_range: /* (fd_in, off_in, fd_out, ...) */
		if (fd_is_regular(regs->di))
			rd = ret;
		if (fd_is_regular(regs->dx))
			wr = ret;
		break;
	default:
		return;
	}
	if (!rd && !wr)
		return;
	c = cg_counters(bpf_get_current_cgroup_id());
	if (c) {
		c->vfs_read_bytes += rd;
		c->vfs_write_bytes += wr;
	}
}

/*
 * sys_enter / sys_exit run for every syscall on the host, in the calling
 * thread's context, once any program is attached: that is why VFS is
 * opt-in, and why futex waits use them only on kernels without
 * bpf_task_pt_regs (before 5.15). The syscall number is the id argument
 * at entry and orig_ax at exit; pt_regs still hold the arguments at exit
 * (x86_64). This way the wait includes the run-queue wait after wake-up.
 */
SEC("tp_btf/sys_enter")
int BPF_PROG(ct_sys_enter, struct pt_regs *regs, long id)
{
	struct ct_task *s;

	if (!futex_waits(id, regs->si))
		return 0;
	s = stamps(bpf_get_current_task_btf(), true);
	if (s)
		s->futex_ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline void futex_exit(long nr)
{
	struct ct_task *s;
	__u64 start, now;

	if (nr != NR_futex && nr != NR_futex_waitv && nr != NR_futex_wait)
		return;
	s = stamps(bpf_get_current_task_btf(), false);
	if (!s || !s->futex_ts)
		return;
	start = s->futex_ts;
	s->futex_ts = 0;
	now = bpf_ktime_get_ns();
	futex_charge(bpf_get_current_cgroup_id(), now > start ? now - start : 0);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ct_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;

	if (futex_syscalls)
		futex_exit(nr);
	if (vfs_on && ret > 0)
		vfs_exit(regs, nr, ret);
	return 0;
}

/* ---- kernel lock contention --------------------------------------------- */

/*
 * contention_begin/end bracket the slow path of mutexes, rwsems,
 * spinlocks and friends, in whatever context takes the lock. Interrupt
 * context charges the interrupted task; a lock contended in an interrupt
 * that hit a task already waiting on another is folded into the outer
 * wait (only the first begin stamps).
 *
 * Spinning waits (LCB_F_SPIN: spinlocks, rwlocks, a mutex's or rwsem's
 * optimistic spin) are the common case under network load, about one per
 * three nginx requests on loopback, and they last well under a
 * microsecond: two clock reads and a task-storage lookup each cost more
 * than the wait. They spin with preemption off, so begin and end meet on
 * one CPU: a per-CPU slot holds the wait, and only one spinning wait in
 * LOCK_SAMPLE is timed, counting LOCK_SAMPLE times. The others cost a
 * per-CPU lookup (inlined) and a compare. Sleeping waits are all timed,
 * in task storage, as they may end on another CPU; a mutex that stops
 * spinning to sleep begins again without LCB_F_SPIN and is timed from
 * there.
 */
#define LCB_F_SPIN 1
#define LOCK_SAMPLE 8
/* Spinning waits begun on a CPU while its slot is held: past this, it was left behind. */
#define SPIN_STALE 64

static __always_inline struct ct_spin *spin_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ct_spin, &zero);
}

static __always_inline void lock_charge(__u64 d)
{
	struct ct_cg_counters *c;

	if (!d)
		return;
	c = cg_counters(bpf_get_current_cgroup_id());
	if (c)
		c->lock_ns += d;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(ct_lock_begin, void *lock, unsigned int flags)
{
	struct ct_spin *sp = spin_slot();
	struct ct_task *s;

	if (!sp)
		return 0;
	if (flags & LCB_F_SPIN) {
		sp->n++;
		/* Held by an outer wait (an interrupt's lock inside a spin): fold. */
		if (sp->lock && sp->n - sp->set_at < SPIN_STALE)
			return 0;
		sp->lock = (__u64)lock;
		sp->set_at = sp->n;
		sp->ts = sp->n % LOCK_SAMPLE ? 0 : bpf_ktime_get_ns();
		return 0;
	}
	if (sp->lock == (__u64)lock)
		sp->lock = 0; /* the optimistic spin gave up: asleep from here */
	s = stamps(bpf_get_current_task_btf(), true);
	if (s && !s->lock_ts)
		s->lock_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(ct_lock_end, void *lock, int ret)
{
	struct ct_spin *sp = spin_slot();
	struct ct_task *s;
	__u64 start;

	if (sp && sp->lock == (__u64)lock) {
		sp->lock = 0;
		if (sp->ts)
			lock_charge(waited(sp->ts, bpf_ktime_get_ns()) * LOCK_SAMPLE);
		return 0;
	}
	s = stamps(bpf_get_current_task_btf(), false);
	if (!s || !s->lock_ts)
		return 0;
	start = s->lock_ts;
	s->lock_ts = 0;
	lock_charge(waited(start, bpf_ktime_get_ns()));
	return 0;
}

/* ---- memory --------------------------------------------------------------- */

/* In the faulting thread's context, once per user page fault (x86). */
SEC("tp_btf/page_fault_user")
int BPF_PROG(ct_page_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct ct_cg_counters *c = cg_counters(bpf_get_current_cgroup_id());

	if (c)
		c->page_faults++;
	return 0;
}

/*
 * Reclaim runs in the allocating thread's context: memcg reclaim when the
 * cgroup hits its memory limit, direct reclaim when the system is short.
 */
static __always_inline void reclaim_begin(void)
{
	struct ct_task *s = stamps(bpf_get_current_task_btf(), true);

	if (s && !s->reclaim_ts)
		s->reclaim_ts = bpf_ktime_get_ns();
}

static __always_inline void reclaim_end(void)
{
	struct ct_task *s = stamps(bpf_get_current_task_btf(), false);
	struct ct_cg_counters *c;
	__u64 start, d;

	if (!s || !s->reclaim_ts)
		return;
	start = s->reclaim_ts;
	s->reclaim_ts = 0;
	d = waited(start, bpf_ktime_get_ns());
	c = d ? cg_counters(bpf_get_current_cgroup_id()) : NULL;
	if (c)
		c->reclaim_ns += d;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(ct_memcg_reclaim_begin)
{
	reclaim_begin();
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(ct_memcg_reclaim_end)
{
	reclaim_end();
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(ct_direct_reclaim_begin)
{
	reclaim_begin();
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(ct_direct_reclaim_end)
{
	reclaim_end();
	return 0;
}

/* ---- network --------------------------------------------------------------- */

/*
 * TCP events run in softirq or timer context, or in whichever task
 * processes the socket backlog: the current cgroup means nothing. The
 * socket remembers the cgroup2 cgroup of the task that created it
 * (accepted sockets inherit the listener's), in sk_cgrp_data. Kernels
 * without CONFIG_SOCK_CGROUP_DATA lack the field; then the events are
 * skipped (user space does not load these programs there).
 */
static __always_inline __u64 sock_cgroup(const struct sock *sk)
{
	if (!bpf_core_field_exists(sk->sk_cgrp_data))
		return 0;
	return sk->sk_cgrp_data.cgroup->kn->id;
}

/* ---- TCP flow figures ------------------------------------------------------ */

#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7
#define TCP_LISTEN 10
#define TCP_CA_Loss 4

/* Load-time settings of the flow figures (CONT_TCP_FLOWS). */
const volatile bool flows_on = false;
/* The daemon's network namespace (its inode number): the iterator sees only it. */
const volatile __u32 flows_netns = 0;

/*
 * Set by user space: the number of the iterator run about to start (the
 * live figures are of that run), and, once the first run has learnt where
 * every socket stood, flows_armed: a socket the iterator never met is then
 * new since the last run, and all of its life is ours.
 */
__u64 flows_gen = 0;
bool flows_armed = false;

/*
 * What a socket's cumulative counters stood at when last charged. Socket
 * storage: found in a few loads, freed with the socket. The sockets that
 * carry one: those the start's walk met (ct_tcp_iter), and those that
 * connected or were accepted since (ct_tcp_state); the tick visits those.
 */
struct ct_flow {
	__u64 bytes_acked, bytes_received;
	__u32 retrans;
	__u16 rto;
	__u16 known;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ct_flow);
} ct_sk_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct ct_cg_tcp);
} ct_cg_tcp SEC(".maps");

static __always_inline struct ct_cg_tcp *cg_tcp(__u64 cgid)
{
	struct ct_cg_tcp zero = {};

	return cg_entry(&ct_cg_tcp, cgid, &zero, &ct_drops, CT_DROP_CGROUP_FULL);
}

static __always_inline bool in_our_netns(const struct sock *sk)
{
	return sk->__sk_common.skc_net.net->ns.inum == flows_netns;
}

/*
 * Charge what tp's cumulative counters grew since s last saw them (all of
 * them when all and s never saw them) to e, and remember them in s. The
 * per-socket counters wrap at their width (total_retrans 32 bits,
 * total_rto 16): differences are taken at that width. total_rto exists
 * from 6.7; before, timeouts stay 0 and user space says they are unknown.
 */
static __always_inline void flow_charge(struct tcp_sock *tp, struct ct_flow *s, bool all,
					struct ct_cg_tcp *e)
{
	__u64 acked = tp->bytes_acked, rcvd = tp->bytes_received;
	__u32 retrans = tp->total_retrans;
	__u16 rto = 0;
	struct ct_flow base = {};

	if (bpf_core_field_exists(tp->total_rto))
		rto = tp->total_rto;
	if (s && s->known)
		base = *s;
	else if (!all)
		base = (struct ct_flow){ acked, rcvd, retrans, rto, 1 };
	if (s) {
		s->bytes_acked = acked;
		s->bytes_received = rcvd;
		s->retrans = retrans;
		s->rto = rto;
		s->known = 1;
	}
	if (!e)
		return;
	if ((__u32)(retrans - base.retrans))
		__sync_fetch_and_add(&e->retrans_segs, (__u32)(retrans - base.retrans));
	if ((__u16)(rto - base.rto))
		__sync_fetch_and_add(&e->timeouts, (__u16)(rto - base.rto));
	if (acked > base.bytes_acked)
		__sync_fetch_and_add(&e->bytes_acked, acked - base.bytes_acked);
	if (rcvd > base.bytes_received)
		__sync_fetch_and_add(&e->bytes_received, rcvd - base.bytes_received);
}

static __always_inline void max_of(__u64 *m, __u64 v)
{
	if (v > *m)
		*m = v;
}

/* A connected socket's window, queue and RTT into its cgroup's live figures. */
static __always_inline void flow_live(struct tcp_sock *tp, struct ct_cg_tcp *e)
{
	__u64 flight, cwnd = tp->snd_cwnd, wnd = tp->rcv_wnd, mss = tp->mss_cache;
	__u64 srtt = tp->srtt_us >> 3, sndq = (__u32)(tp->write_seq - tp->snd_una);
	__u32 out = tp->packets_out, left = tp->sacked_out + tp->lost_out;

	/* tcp_packets_in_flight(): sent, less what left the network, plus retransmitted. */
	flight = (out > left ? out - left : 0) + tp->retrans_out;
	if (e->gen != flows_gen) {
		__builtin_memset(&e->sockets, 0, sizeof(*e) - offsetof(struct ct_cg_tcp, sockets));
		e->gen = flows_gen;
		e->mss_min = mss;
	}
	e->sockets++;
	e->flight_sum += flight;
	max_of(&e->flight_max, flight);
	e->cwnd_sum += cwnd;
	max_of(&e->cwnd_max, cwnd);
	e->rcv_wnd_sum += wnd;
	max_of(&e->rcv_wnd_max, wnd);
	if (mss < e->mss_min)
		e->mss_min = mss;
	max_of(&e->mss_max, mss);
	e->srtt_sum_us += srtt;
	max_of(&e->srtt_max_us, srtt);
	e->sndq_sum += sndq;
	max_of(&e->sndq_max, sndq);
}

/* One visit of a full TCP socket whose storage is s: its growth, its live figures. */
static __always_inline void flow_visit(struct tcp_sock *tp, struct ct_flow *s)
{
	struct ct_cg_tcp *e;
	__u64 cgid;
	__u8 state;

	/*
	 * ct_tcp_iter gives a listener no storage, but a socket keeps its
	 * storage across states: one whose connect failed may listen later.
	 */
	state = tp->inet_conn.icsk_inet.sk.__sk_common.skc_state;
	if (state == TCP_LISTEN)
		return;
	cgid = sock_cgroup((struct sock *)tp);
	if (!cgid)
		return;
	e = cg_tcp(cgid);
	flow_charge(tp, s, flows_armed, e);
	if (e && state != TCP_CLOSE)
		flow_live(tp, e);
}

/*
 * Once, at start, user space runs this over every TCP socket of its network
 * namespace (the kernel's iterator walks the namespace of the reader), so
 * that every socket that was there before gets its storage. It walks the
 * whole established hash table, every bucket of it (262,144 on a host with
 * 23 GiB): 1.6-1.7 ms of a CPU without a break there, so not once a tick.
 * Time-wait and request sockets are not full sockets (bpf_skc_to_tcp_sock
 * gives NULL): they have no windows, and their counters were charged when
 * the full socket went. Listeners move no data. The others, what `ss -t`
 * lists, give their live figures; all give their counters' growth.
 */
SEC("iter/tcp")
int ct_tcp_iter(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	struct ct_flow *s;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	if (tp->inet_conn.icsk_inet.sk.__sk_common.skc_state == TCP_LISTEN)
		return 0;
	s = bpf_sk_storage_get(&ct_sk_flows, tp, NULL, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		drop(CT_DROP_STAMP_FULL);
	flow_visit(tp, s);
	return 0;
}

/*
 * Every tick after the first: the same visit, over the sockets that carry a
 * storage of ct_sk_flows only (the kernel's iterator of a socket storage
 * map walks its elements, not the hash table). Its time is that of the
 * sockets, none for the empty buckets. One byte out per socket: read()
 * returns when the reader's buffer is full (ITER_READ_CHUNK sockets), and
 * the CPU can go to whoever waits for it before the next read.
 */
SEC("iter/bpf_sk_storage_map")
int ct_flows_iter(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct ct_flow *s = ctx->value;
	struct sock *sk = ctx->sk;
	struct tcp_sock *tp;
	char one = 1;

	if (!sk || !s)
		return 0;
	tp = bpf_skc_to_tcp_sock(sk);
	if (tp)
		flow_visit(tp, s);
	bpf_seq_write(ctx->meta->seq, &one, 1);
	return 0;
}

/*
 * A TCP socket of our namespace that starts to connect (TCP_SYN_SENT) or is
 * made by a listener for a connection (TCP_SYN_RECV): its storage, so that
 * the tick's iterator meets it. It has moved no data yet. Again when it
 * becomes established (TCP_ESTABLISHED), where the lookup finds the storage
 * made before: a second chance for one that got none (the storage could
 * not be allocated at its SYN).
 */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(ct_tcp_state, const struct sock *sk, const int oldstate, const int newstate)
{
	if ((newstate != TCP_SYN_SENT && newstate != TCP_SYN_RECV && newstate != TCP_ESTABLISHED) ||
	    !in_our_netns(sk) || !bpf_skc_to_tcp_sock((void *)sk))
		return 0;
	if (!bpf_sk_storage_get(&ct_sk_flows, (void *)sk, NULL, BPF_SK_STORAGE_GET_F_CREATE))
		drop(CT_DROP_STAMP_FULL);
	return 0;
}

/*
 * A socket going away (tcp_v4_destroy_sock, IPv6 too): what it did since
 * the iterator last met it, or all its life when it came and went between
 * two runs. Once per socket, in whatever context frees it.
 */
SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(ct_tcp_destroy, struct sock *sk)
{
	struct tcp_sock *tp;
	struct ct_flow *s = NULL;
	__u64 cgid;

	if (!in_our_netns(sk))
		return 0;
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	if (sk->sk_bpf_storage)
		s = bpf_sk_storage_get(&ct_sk_flows, sk, NULL, 0);
	if (!s && !flows_armed)
		return 0;
	cgid = sock_cgroup(sk);
	if (cgid)
		flow_charge(tp, s, true, cg_tcp(cgid));
	return 0;
}

/*
 * A fast retransmit: one sent while the socket is not in loss recovery,
 * that is not the RTO's doing (what the kernel's TCPFastRetrans counts, and
 * tail loss probes that resend). Counted in segments, as total_retrans.
 */
static __always_inline void fast_retrans(const struct sock *sk, const struct sk_buff *skb)
{
	const struct inet_connection_sock *icsk = (const void *)sk;
	struct ct_cg_tcp *e;
	__u16 segs = 0;
	__u64 cgid;

	if (BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state) == TCP_CA_Loss || !in_our_netns(sk))
		return;
	cgid = sock_cgroup(sk);
	e = cgid ? cg_tcp(cgid) : NULL;
	if (!e)
		return;
	bpf_probe_read_kernel(&segs, sizeof(segs),
			      &((struct tcp_skb_cb *)&skb->cb[0])->tcp_gso_segs);
	__sync_fetch_and_add(&e->fast_retrans_segs, segs ?: 1);
}

static __always_inline void tcp_retransmitted(const struct sock *sk, const struct sk_buff *skb)
{
	struct ct_cg_counters *c;
	__u64 cgid = sock_cgroup(sk);

	c = cgid ? cg_counters(cgid) : NULL;
	if (c)
		c->tcp_retransmits++;
	if (flows_on)
		fast_retrans(sk, skb);
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(ct_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb)
{
	tcp_retransmitted(sk, skb);
	return 0;
}

/* Kernels whose tracepoint also fires for a retransmission that failed (err). */
SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(ct_tcp_retransmit_err, const struct sock *sk, const struct sk_buff *skb, int err)
{
	if (!err)
		tcp_retransmitted(sk, skb);
	return 0;
}

/*
 * tcp_probe fires from tcp_rcv_established() for every segment received
 * on an established connection. The smoothed RTT (srtt_us holds 8 x the
 * RTT in microseconds) is sampled there; user space reports the mean of
 * the window's samples, so busy connections weigh more than idle ones.
 * Opt-in (CONT_TCP_RTT): on loopback nginx that is ~6 calls per request,
 * and the call alone, before any work here, costs ~40 ns on our test VMs.
 */
SEC("tp_btf/tcp_probe")
int BPF_PROG(ct_tcp_probe, struct sock *sk)
{
	struct ct_cg_counters *c;
	__u32 srtt;
	__u64 cgid;

	srtt = BPF_CORE_READ((struct tcp_sock *)sk, srtt_us) >> 3;
	if (!srtt)
		return 0;
	cgid = sock_cgroup(sk);
	c = cgid ? cg_counters(cgid) : NULL;
	if (c) {
		c->srtt_sum_us += srtt;
		c->srtt_samples++;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
