// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the state-file loader: each input is parsed as the
 * text of a state file, as `tailwarden restore` and the daemon's start
 * read it. Besides the sanitizers (json-c aborts on a wrongly typed call,
 * which is what the loader's checks are for), it checks what restore
 * relies on: an accepted file gives only records whose every field holds
 * what restore reads it as (for a disk's scheduler, device and
 * scheduler names that cannot leave /sys/block).
 */
#define _GNU_SOURCE
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "knobs/state.h"
#include "common/log.h"
#include "tests/fuzz/check.h"

static void walk_record(const struct knob_record *r)
{
	switch (r->backend) {
	case KNOB_BACKEND_IOSCHED:
		/* A disk's scheduler: names that go into /sys/block/DEV/queue/scheduler. */
		check(r->iosched.device && r->iosched.device[0] &&
		      !strchr(r->iosched.device, '/') && !strstr(r->iosched.device, ".."));
		check(r->iosched.original && r->iosched.original[0] &&
		      !strchr(r->iosched.original, '\n'));
		check(!r->iosched.written || r->iosched.written[0]);
		check(!r->cgroup && !r->cgroup_base);
		return;
	case KNOB_BACKEND_SUBTREE:
		check(r->cgroup_base && r->cgroup_base[0] == '/');
		check(r->cgroup && r->cgroup[0] == '/' && strcmp(r->cgroup, "/") &&
		      !strstr(r->cgroup, ".."));
		check(!strcmp(r->subtree.controller, "cpu") ||
		      !strcmp(r->subtree.controller, "io"));
		check(r->subtree.original);
		return;
	case KNOB_BACKEND_UNIT:
		check(r->unit.unit && r->unit.property && r->unit.bus);
		check(r->knob < KNOB_MAX);
		break;
	case KNOB_BACKEND_SLICE:
		/* Slice=: each thread an exact tid, start time and slices in the kernel's range. */
		check(r->knob == KNOB_SCHED_SLICE);
		for (size_t i = 0; i < r->threads.n; i++) {
			const struct knob_thread *t = &r->threads.v[i];

			check(t->tid >= 1 && t->tid <= 4194304);
			check(t->slice_ns == 0 ||
			      (t->slice_ns >= 100000 && t->slice_ns <= 100000000));
			check(t->written_ns >= 100000 && t->written_ns <= 100000000);
		}
		break;
	case KNOB_BACKEND_CPUFREQ:
		for (size_t i = 0; i < r->cpus.n; i++) {
			check(r->cpus.v[i].cpu <= 65535);
			check(r->cpus.v[i].max_khz > 0);
		}
		break;
	case KNOB_BACKEND_CGROUP:
		check(r->knob < KNOB_MAX);
		for (size_t i = 0; i < r->files.n; i++) {
			const struct knob_file *f = &r->files.v[i];

			check(f->path && f->path[0] == '/');
			check(f->value && f->value[0]);
			check(!f->written || f->written[0]);
		}
		break;
	default:
		check(!"a record of no backend");
	}
	check(r->cgroup_base && r->cgroup_base[0] == '/' && r->cgroup);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_max_level(LOG_CRIT); /* the loader's messages are expected, and many */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct knob_record *v = NULL;
	char *text = malloc(size + 1);
	size_t n = 0;

	check(text);
	memcpy(text, data, size);
	text[size] = '\0';
	if (!knob_state_parse(text, size, "state.json", &v, &n)) {
		for (size_t i = 0; i < n; i++) {
			walk_record(&v[i]);
			knob_record_free(&v[i]);
		}
		free(v);
	}
	free(text);
	return 0;
}
