// SPDX-License-Identifier: GPL-2.0
/*
 * The floor: empty programs on the two tracepoints the request sensor
 * hooks. What they cost is what any BPF program on these tracepoints
 * costs on this kernel (tracepoint dispatch, and on a host with
 * retpolines the indirect call), before it does any work. The benchmark
 * runs them in place of the sensors to split the sensor's overhead into
 * that floor and its own work.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(floor_copy, struct sock *sk)
{
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(floor_send, struct sock *sk, int ret, int flags)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
