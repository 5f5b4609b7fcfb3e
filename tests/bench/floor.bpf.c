// SPDX-License-Identifier: GPL-2.0
/*
 * The floor: empty programs on the tracepoints the default sensors hook
 * that fire under request traffic: the request sensor's three
 * (tcp_rcv_space_adjust, sock_send_length, inet_sock_set_state) and the
 * kernel-lock signal's two (contention_begin/end). What they cost is what
 * any BPF program on these tracepoints costs on this kernel (tracepoint
 * dispatch, and on a host with retpolines the indirect call), before it
 * does any work. The benchmark runs them in place of the sensors to split
 * the sensors' overhead into that floor and their own work, and sets each
 * program's statistics beside those of the sensor's program on its hook.
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

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(floor_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	return 0;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(floor_lock_begin, void *lock, unsigned int flags)
{
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(floor_lock_end, void *lock, int ret)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
