// SPDX-License-Identifier: GPL-2.0
/*
 * The context switch's floor: an empty program on sched_switch, the
 * tracepoint the contention sensor's run-queue and futex signals hook.
 * What it costs is what any BPF program there costs on this kernel
 * (tracepoint dispatch, the BPF trampoline, the indirect call) before it
 * does any work. tests/bench/floor loads it with its path as argument.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
