// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel's BPF run statistics (kernel.bpf_stats_enabled) per program
 * and per CPU. bpf_prog_info sums run_cnt and run_time_ns over the CPUs;
 * the benchmark wants them per CPU, so that with the server on one CPU and
 * its client on the other the runs of the server's side (its tasks, and
 * the softirq work done in them) are told apart from the client's. A
 * bpf_prog iterator visits every program; prog->stats is a per-CPU
 * pointer, and a CPU's copy lies at that pointer plus the CPU's per-CPU
 * offset. This kernel family's kallsyms holds no data symbols, so the
 * offset is not read from this_cpu_off or __per_cpu_offset (ksyms): it is
 * the address bpf_map_lookup_percpu_elem() gives for a CPU's copy of a
 * per-CPU array's element, minus the array's own per-CPU pointer (pptrs[0]).
 * One line per program and CPU that ran it:
 *   id cpu run_cnt run_time_ns name hook
 * (hook: the tracepoint or function it is attached to, "-" if none).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} probe SEC(".maps");

/* The per-CPU offset of cpu, or 0 if it cannot be had. */
static __always_inline unsigned long cpu_offset(__u32 cpu)
{
	void *map = &probe, *elem;
	unsigned long addr = 0, pptr = 0, at = 0;
	__u32 zero = 0;

	/* The map's address as a number (no arithmetic on a map pointer). */
	bpf_probe_read_kernel(&addr, sizeof(addr), &map);
	if (!addr ||
	    bpf_probe_read_kernel(&pptr, sizeof(pptr),
				  (void *)(addr + bpf_core_field_offset(struct bpf_array, pptrs))))
		return 0;
	elem = bpf_map_lookup_percpu_elem(&probe, &zero, cpu);
	if (!elem || !pptr)
		return 0;
	bpf_probe_read_kernel(&at, sizeof(at), &elem);
	return at - pptr;
}

SEC("iter/bpf_prog")
int progstats(struct bpf_iter__bpf_prog *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct bpf_prog *prog = ctx->prog;
	struct bpf_prog_aux *aux;
	const char *hook;
	unsigned long base;
	__u32 id;

	if (!prog)
		return 0;
	aux = BPF_CORE_READ(prog, aux);
	id = BPF_CORE_READ(aux, id);
	hook = BPF_CORE_READ(aux, attach_func_name);
	if (!hook)
		hook = "-";
	base = (unsigned long)BPF_CORE_READ(prog, stats);
	if (!base)
		return 0;
	for (__u32 cpu = 0; cpu < 512; cpu++) {
		unsigned long off = cpu_offset(cpu);
		__u64 st[2] = {};

		if (!off) /* past the last CPU */
			break;
		if (bpf_probe_read_kernel(st, sizeof(st), (void *)(base + off)))
			continue;
		if (!st[0])
			continue;
		BPF_SEQ_PRINTF(seq, "%u %u %llu %llu %s %s\n", id, cpu, st[0], st[1], aux->name,
			       hook);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
