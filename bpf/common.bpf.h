/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What both BPF programs share: drop counting, the per-cgroup
 * lookup-or-insert (cg_entry, cg_entry_big), histogram adds and the x86_64 syscall numbers their
 * raw syscall hooks filter on. Include after vmlinux.h and bpf_helpers.h.
 */
#ifndef TW_BPF_COMMON_BPF_H
#define TW_BPF_COMMON_BPF_H

#include "bpf/hist_bucket.h"

/* Count one event that was not recorded, in a per-CPU array of counters. */
static __always_inline void drop_count(void *drops, __u32 what)
{
	__u64 *v = bpf_map_lookup_elem(drops, &what);

	if (v)
		(*v)++;
}

/*
 * The entry of key in map, inserted from init when absent. BPF_NOEXIST:
 * another CPU may have inserted it meanwhile, which is fine. NULL only
 * when the map is full (the caller counts a drop).
 */
static __always_inline void *map_lookup_or_insert(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/*
 * A cgroup's entry in a per-cgroup map, inserted from init when absent;
 * when the map is full, one drop of kind what is counted and NULL returned.
 */
static __always_inline void *cg_entry(void *map, __u64 cgid, const void *init, void *drops,
				      __u32 what)
{
	void *v = map_lookup_or_insert(map, &cgid, init);

	if (!v)
		drop_count(drops, what);
	return v;
}

/*
 * The same for values too big for the BPF stack: the zeroed template is
 * the only entry of the per-CPU array zero_map, read only on an insert.
 */
static __always_inline void *cg_entry_big(void *map, __u64 cgid, void *zero_map, void *drops,
					  __u32 what)
{
	__u32 zero = 0;
	void *v = bpf_map_lookup_elem(map, &cgid);

	if (v)
		return v;
	v = bpf_map_lookup_elem(zero_map, &zero);
	if (!v)
		return NULL;
	return cg_entry(map, cgid, v, drops, what);
}

/*
 * b as an index into a histogram that any kernel's verifier accepts: one
 * clamped in place, in the 64-bit register that indexes. With a plain
 * "if (b < HIST_BUCKETS)" clang may compare a 32-bit copy and index with
 * another register, and verifiers before 6.3 or so lose the bound on the
 * way ("unbounded memory access" on Debian 12's 6.1). Values above the
 * last bucket never come from hist_bucket_of(); the last bucket holds
 * everything above anyway.
 */
static __always_inline __u64 hist_index(__u32 b)
{
	__u64 i = b;

	asm volatile("if %[i] <= %[max] goto +1\n\t"
		     "%[i] = %[max]\n\t"
		     : [i] "+r"(i)
		     : [max] "i"(HIST_BUCKETS - 1));
	return i;
}

/*
 * Add n to bucket b of a histogram shared by all CPUs. n may be negative
 * (a reply's span moving to a later bucket); user space diffs buckets as
 * signed 32-bit values.
 */
static __always_inline void hist_add(__u32 *h, __u32 b, __s32 n)
{
	__sync_fetch_and_add(&h[hist_index(b)], n);
}

/* x86_64 syscall numbers the raw sys_enter/sys_exit hooks filter on. */
#define NR_read 0
#define NR_write 1
#define NR_pread64 17
#define NR_pwrite64 18
#define NR_readv 19
#define NR_writev 20
#define NR_sendfile 40
#define NR_sendto 44
#define NR_recvfrom 45
#define NR_sendmsg 46
#define NR_recvmsg 47
#define NR_futex 202
#define NR_splice 275
#define NR_preadv 295
#define NR_pwritev 296
#define NR_copy_file_range 326
#define NR_preadv2 327
#define NR_pwritev2 328
#define NR_futex_waitv 449
#define NR_futex_wait 455

#endif
