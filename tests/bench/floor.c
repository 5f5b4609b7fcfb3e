// SPDX-License-Identifier: GPL-2.0
/*
 * floor: attach the empty programs of floor.bpf.o (next to this binary, or
 * the path given) and hold them until SIGINT/SIGTERM. Prints "attached"
 * once they are live. See floor.bpf.c.
 *
 * usage: floor [OBJECT]
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	struct bpf_program *p;
	struct bpf_object *obj;
	const char *slash;

	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: floor [OBJECT]\n");
		return 2;
	}
	if (argc == 2) {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else {
		slash = strrchr(argv[0], '/');
		snprintf(path, sizeof(path), "%.*sfloor.bpf.o",
			 slash ? (int)(slash - argv[0] + 1) : 0, argv[0]);
	}
	obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		fprintf(stderr, "floor: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "floor: loading %s: %s\n", path, strerror(errno));
		return 1;
	}
	bpf_object__for_each_program(p, obj) {
		if (!bpf_program__attach(p)) {
			fprintf(stderr, "floor: attaching %s: %s\n", bpf_program__name(p),
				strerror(errno));
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("attached\n");
	fflush(stdout);
	while (!stop)
		pause();
	bpf_object__close(obj);
	return 0;
}
