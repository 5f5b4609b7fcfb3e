// SPDX-License-Identifier: GPL-2.0
/*
 * Empty lsm_cgroup programs (6.0+, and a kernel that lists "bpf" among its
 * LSMs, as Debian's do) on the socket calls the request sensor follows:
 * the kernel runs them only for sockets of the cgroups they are attached
 * to, before each sendmsg and recvmsg. They go through a BPF trampoline;
 * a kernel that refuses trampolines (EPERM) refuses them, and the section
 * says so.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("lsm_cgroup/socket_sendmsg")
int BPF_PROG(pcg_lsm_send, struct socket *sock, struct msghdr *msg, int size)
{
	return 1;
}

SEC("lsm_cgroup/socket_recvmsg")
int BPF_PROG(pcg_lsm_recv, struct socket *sock, struct msghdr *msg, int size, int flags)
{
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
