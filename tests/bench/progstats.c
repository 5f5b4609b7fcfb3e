// SPDX-License-Identifier: GPL-2.0
/*
 * progstats: the kernel's BPF run statistics per program and per CPU, on
 * demand (tests/bench/progstats.bpf.c says how). Loads the iterator once,
 * turns the statistics on and prints "ready"; then each line on stdin
 * ("read") is answered by one line per program and CPU that ran it,
 * "id cpu run_cnt run_time_ns name", and a line "end". Exits at end of
 * input.
 *
 * The statistics are turned on by BPF_ENABLE_STATS, which has the same
 * effect as kernel.bpf_stats_enabled=1 for as long as this process holds
 * the file descriptor it returns, and counts its holders apart from the
 * sysctl: the sysctl is never written, so whatever value it has (another
 * user's, too) is left as it was, and the statistics go off with this
 * process however it ends.
 *
 *   progstats OBJECT
 */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int dump(struct bpf_link *link)
{
	char buf[8192];
	ssize_t n;
	int fd = bpf_iter_create(bpf_link__fd(link));

	if (fd < 0) {
		fprintf(stderr, "progstats: bpf_iter_create: %s\n", strerror(errno));
		return -1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, n, stdout);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "progstats: reading the iterator: %s\n", strerror(errno));
		return -1;
	}
	printf("end\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	char line[64];
	int stats, r = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: progstats OBJECT\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "progstats: opening %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "progstats: loading %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "progstats");
	link = prog ? bpf_program__attach_iter(prog, NULL) : NULL;
	if (!link) {
		fprintf(stderr, "progstats: attaching the iterator: %s\n", strerror(errno));
		return 1;
	}
	stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats < 0) {
		fprintf(stderr, "progstats: BPF_ENABLE_STATS: %s\n", strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (!r && fgets(line, sizeof(line), stdin))
		r = dump(link);
	close(stats);
	bpf_link__destroy(link);
	bpf_object__close(obj);
	return r ? 1 : 0;
}
