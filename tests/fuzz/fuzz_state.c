// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the state-file loader: each input is parsed as the
 * text of a state file, as `tailwarden restore` and the daemon's start
 * read it. Besides the sanitizers (json-c aborts on a wrongly typed call,
 * which is what the loader's checks are for), it checks what restore
 * relies on: an accepted file holds only records whose every field has
 * the type restore reads it as (for a disk's scheduler, device and
 * scheduler names that cannot leave /sys/block).
 */
#define _GNU_SOURCE
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "controller/knob_state.h"
#include "common/log.h"

#define check(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: invariant failed: %s\n",       \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

static void walk_record(struct json_object *e)
{
	struct json_object *snap, *list, *v;

	check(json_object_is_type(e, json_type_object));
	if (json_object_object_get_ex(e, "knob", &v) && json_object_is_type(v, json_type_string) &&
	    !strcmp(json_object_get_string(v), "io.scheduler")) {
		/* A disk's scheduler: names that go into /sys/block/DEV/queue/scheduler. */
		check(json_object_object_get_ex(e, "device", &v) && json_object_is_type(v, json_type_string));
		check(json_object_get_string(v)[0] && !strchr(json_object_get_string(v), '/') &&
		      !strstr(json_object_get_string(v), ".."));
		check(json_object_object_get_ex(e, "original", &v) && json_object_is_type(v, json_type_string));
		check(json_object_get_string(v)[0] && !strchr(json_object_get_string(v), '\n'));
		if (json_object_object_get_ex(e, "written", &v))
			check(json_object_is_type(v, json_type_string) && json_object_get_string(v)[0]);
		return;
	}
	check(json_object_object_get_ex(e, "snapshot", &snap));
	check(json_object_is_type(snap, json_type_object));
	if (json_object_object_get_ex(e, "unit", &v)) {
		check(json_object_is_type(v, json_type_string));
		check(json_object_object_get_ex(snap, "value", &v));
		(void)json_object_get_uint64(v);
		return;
	}
	if (json_object_object_get_ex(snap, "threads", &list)) {
		/* Slice=: each thread an exact tid, start time and slices in the kernel's range. */
		check(json_object_object_get_ex(e, "knob", &v) && !strcmp(json_object_get_string(v), "sched.slice"));
		check(json_object_is_type(list, json_type_array));
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			struct json_object *t = json_object_array_get_idx(list, i);
			int64_t n;

			check(json_object_object_get_ex(t, "tid", &v) && json_object_is_type(v, json_type_int));
			n = json_object_get_int64(v);
			check(n >= 1 && n <= 4194304);
			check(json_object_object_get_ex(t, "start", &v) && json_object_is_type(v, json_type_int));
			check(json_object_get_int64(v) >= 0);
			check(json_object_object_get_ex(t, "slice_ns", &v) && json_object_is_type(v, json_type_int));
			n = json_object_get_int64(v);
			check(n == 0 || (n >= 100000 && n <= 100000000));
			check(json_object_object_get_ex(t, "written_ns", &v) && json_object_is_type(v, json_type_int));
			n = json_object_get_int64(v);
			check(n >= 100000 && n <= 100000000);
		}
		return;
	}
	if (json_object_object_get_ex(snap, "cpus", &list)) {
		for (size_t i = 0; i < json_object_array_length(list); i++) {
			struct json_object *c = json_object_array_get_idx(list, i);

			check(json_object_object_get_ex(c, "cpu", &v));
			check(json_object_get_int64(v) >= 0);
			check(json_object_object_get_ex(c, "max_khz", &v));
			check(json_object_get_int64(v) > 0);
			if (json_object_object_get_ex(c, "written_khz", &v))
				check(json_object_is_type(v, json_type_int) && json_object_get_int64(v) > 0);
		}
		return;
	}
	check(json_object_object_get_ex(snap, "files", &list));
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *f = json_object_array_get_idx(list, i);

		check(json_object_object_get_ex(f, "path", &v));
		check(json_object_get_string(v)[0] == '/');
		check(json_object_object_get_ex(f, "value", &v));
		check(strlen(json_object_get_string(v)) > 0);
		if (json_object_object_get_ex(f, "written", &v))
			check(json_object_is_type(v, json_type_string) && strlen(json_object_get_string(v)) > 0);
	}
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
	struct json_object *knobs = NULL;
	char *text = malloc(size + 1);

	check(text);
	memcpy(text, data, size);
	text[size] = '\0';
	if (!knob_state_parse(text, size, "state.json", &knobs)) {
		check(json_object_is_type(knobs, json_type_array));
		for (size_t i = 0; i < json_object_array_length(knobs); i++)
			walk_record(json_object_array_get_idx(knobs, i));
		json_object_put(knobs);
	}
	free(text);
	return 0;
}
