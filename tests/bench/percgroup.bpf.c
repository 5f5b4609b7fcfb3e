// SPDX-License-Identifier: GPL-2.0
/*
 * Empty programs of a hook that the kernel runs only for the cgroups they
 * are attached to (and their descendants): cgroup_skb, every packet a
 * socket of the cgroup sends or takes in. tests/bench/bench.py, section
 * percgroup, sets what they cost in the cgroup and outside it beside the
 * request sensor's tracepoints, which run for every socket of the host.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("cgroup_skb/egress")
int pcg_egress(struct __sk_buff *skb)
{
	return 1;
}

SEC("cgroup_skb/ingress")
int pcg_ingress(struct __sk_buff *skb)
{
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
