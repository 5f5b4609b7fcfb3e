// SPDX-License-Identifier: GPL-2.0
/*
 * The pieces a request sensor's program is made of, one program each, on
 * sock_send_length (which fires once per send of every socket): what each
 * costs on this kernel and CPU beside the empty program, measured by the
 * kernel's BPF statistics (tests/bench/bench.py, section pieces; one
 * program attached at a time). The pieces are the ones tailwarden's
 * programs pay per event or could pay instead (issue 27): reading the
 * socket (plain loads), the socket-storage lookup that finds a
 * connection's state, the current task's cgroup, a clock read, a hash map
 * lookup, an array lookup (inlined by the verifier: no call), an atomic
 * add. A helper is a call and a return: on a CPU that takes a mitigation
 * on every kernel return (AMD's "Safe RET" for SRSO), each costs far more
 * than on one that does not, and the table says so beside the CPU's
 * mitigations.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define AF_INET 2
#define AF_INET6 10

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* No socket has storage of this map: the lookup walks to a miss. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} pc_storage SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} pc_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} pc_array SEC(".maps");

/* Where each piece's result goes, so that the compiler keeps it. */
volatile __u64 pc_sink;

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_empty, struct sock *sk, int ret, int flags)
{
	return 0;
}

/* What every request program reads first: family, protocol, direction, a TCP field. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_loads, struct sock *sk, int ret, int flags)
{
	__u16 family = sk->__sk_common.skc_family;
	const struct tcp_sock *tp;

	if (ret <= 0 || (family != AF_INET && family != AF_INET6) || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	pc_sink = sk->sk_max_ack_backlog + tp->copied_seq + tp->tcp_wstamp_ns;
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_sk_storage, struct sock *sk, int ret, int flags)
{
	pc_sink = (__u64)bpf_sk_storage_get(&pc_storage, sk, NULL, 0);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_cgroup_id, struct sock *sk, int ret, int flags)
{
	pc_sink = bpf_get_current_cgroup_id();
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_ktime, struct sock *sk, int ret, int flags)
{
	pc_sink = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_hash_lookup, struct sock *sk, int ret, int flags)
{
	__u64 key = sk->__sk_common.skc_hash;

	pc_sink = (__u64)bpf_map_lookup_elem(&pc_hash, &key);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_array_lookup, struct sock *sk, int ret, int flags)
{
	__u32 i = sk->__sk_common.skc_hash % 1024;
	__u64 *v = bpf_map_lookup_elem(&pc_array, &i);

	if (v)
		pc_sink = *v;
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pc_atomic_add, struct sock *sk, int ret, int flags)
{
	__u32 i = 0;
	__u64 *v = bpf_map_lookup_elem(&pc_array, &i);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
