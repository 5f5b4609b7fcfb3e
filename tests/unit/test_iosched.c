// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the I/O scheduler module (knobs/iosched.c): the
 * parser of /sys/block/NAME/queue/scheduler, names, and the state file's
 * "io.scheduler" records (knobs/state_file.c): their validation on
 * load, and a restore that names a device that is not there.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "knobs/iosched.h"
#include "knobs/state.h"

static void test_parse(void **state)
{
	struct iosched s;

	(void)state;
	assert_int_equal(iosched_parse("none [mq-deadline] kyber bfq\n", &s), 0);
	assert_string_equal(s.current, "mq-deadline");
	assert_int_equal(s.n, 4);
	assert_string_equal(s.offered[0], "none");
	assert_string_equal(s.offered[3], "bfq");
	assert_true(iosched_offers(&s, "bfq"));
	assert_true(iosched_offers(&s, "mq-deadline"));
	assert_false(iosched_offers(&s, "cfq"));
	assert_false(iosched_offers(&s, "bf"));

	assert_int_equal(iosched_parse("[bfq] none \n", &s), 0);
	assert_string_equal(s.current, "bfq");
	assert_int_equal(s.n, 2);
	assert_int_equal(iosched_parse("[none]\n", &s), 0);
	assert_string_equal(s.current, "none");
	assert_int_equal(s.n, 1);

	/* None in use, two in use, broken brackets, odd characters, too long. */
	assert_int_equal(iosched_parse("none mq-deadline\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[none] [bfq]\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[none\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("none]\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[]\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[none]x bfq\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[../x] bfq\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[none] BFQ\n", &s), -EBADMSG);
	assert_int_equal(iosched_parse("[none] a234567890123456789012345678901234\n", &s),
			 -EBADMSG);
	assert_int_equal(iosched_parse("[a] b c d e f g h i j k l m n o p q\n", &s), -EBADMSG);
}

static void test_names(void **state)
{
	(void)state;
	assert_true(iosched_valid_name("vda"));
	assert_true(iosched_valid_name("nvme0n1"));
	assert_true(iosched_valid_name("dm-0"));
	assert_true(iosched_valid_name("mq-deadline"));
	assert_false(iosched_valid_name(""));
	assert_false(iosched_valid_name(".."));
	assert_false(iosched_valid_name("../vda"));
	assert_false(iosched_valid_name("vda/queue"));
	assert_false(iosched_valid_name("VDA"));
	assert_false(iosched_valid_name("vda\n"));
	assert_false(iosched_valid_name("a2345678901234567890123456789012"));
	/* Not a device: nothing opened outside /sys/block. */
	struct iosched s;
	assert_int_equal(iosched_get("../../etc", &s), -EINVAL);
	assert_int_equal(iosched_get("nosuchdisk0", &s), -ENOENT);
	assert_int_equal(iosched_set("nosuchdisk0", "bfq"), -ENOENT);
	assert_int_equal(iosched_set("nosuchdisk0", "../x"), -EINVAL);
}

static int parse(const char *record)
{
	char text[1024];
	struct knob_record *v = NULL;
	size_t n = 0;
	int r;

	snprintf(text, sizeof(text), "{\"version\": 1, \"knobs\": [ %s ]}", record);
	r = knob_state_parse(text, strlen(text), "state.json", &v, &n);
	for (size_t i = 0; i < n; i++)
		knob_record_free(&v[i]);
	free(v);
	return r;
}

static void test_state_records(void **state)
{
	(void)state;
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"mq-deadline\", \"written\": \"bfq\"}"),
		0);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"mq-deadline\"}"),
		0);
	/* Hostile or broken: the device, the original, the written. */
	assert_int_equal(parse("{\"knob\": \"io.scheduler\", \"original\": \"mq-deadline\"}"),
			 -EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": 7, \"original\": \"none\"}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"../../etc\", \"original\": \"none\"}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"..\", \"original\": \"none\"}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda/queue\", \"original\": \"none\"}"),
		-EBADMSG);
	assert_int_equal(parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\"}"), -EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": 3}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"none\\n\"}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"none\", \"written\": null}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"none\", \"written\": [\"bfq\"]}"),
		-EBADMSG);
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"none\", \"written\": \"b f q\"}"),
		-EBADMSG);
	/* A good scheduler record beside a bad cgroup one: the file is refused. */
	assert_int_equal(
		parse("{\"knob\": \"io.scheduler\", \"device\": \"vda\", \"original\": \"none\"},"
		      "{\"knob\": \"cpu.weight\"}"),
		-EBADMSG);
}

static void lines(void *userdata, const char *line)
{
	strncat(userdata, line, 1023 - strlen(userdata));
}

/* A record of a disk that is gone: nothing to switch back, the record dropped. */
static void test_state_device_gone(void **state)
{
	char dir[] = "/tmp/tw-iosched-XXXXXX", path[64], said[1024] = "";
	struct knob_state *s;
	FILE *f;
	int left = -1;

	(void)state;
	assert_non_null(mkdtemp(dir));
	chmod(dir, 0700);
	snprintf(path, sizeof(path), "%s/state.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"version\": 1, \"knobs\": [ {\"knob\": \"io.scheduler\", \"device\": \"nosuchdisk0\", "
	      "\"original\": \"mq-deadline\", \"written\": \"bfq\"} ]}\n",
	      f);
	fclose(f);
	assert_int_equal(knob_state_open(dir, &s), 0);
	assert_true(knob_state_has_iosched(s, "nosuchdisk0"));
	assert_false(knob_state_has_iosched(s, "vda"));
	/* A reload keeps it; the exit restores it. */
	assert_int_equal(knob_state_restore_knobs(s, "/sys/fs/cgroup"), 0);
	assert_true(knob_state_has_iosched(s, "nosuchdisk0"));
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(knob_state_restore_all_report(s, "/sys/fs/cgroup", lines, said, &left), 1);
	assert_non_null(
		strstr(said, "io.scheduler of nosuchdisk0: device gone, nothing to restore"));
	assert_int_equal(left, 0);
	assert_false(knob_state_has_iosched(s, "nosuchdisk0"));
	assert_int_equal(access(path, F_OK), -1);
	knob_state_free(s);
	rmdir(dir);
}

/*
 * bfq's idling tunables as sysfs prints them, and the set-up's line about
 * a disk that idles: said with the disk's own numbers, silent at 0.
 */
static void test_idling(void **state)
{
	struct iosched_idling idle = { .slice_idle_us = 8000, .timeout_sync_ms = 124 };
	unsigned long v = 7;
	char line[512], small[40];

	(void)state;
	assert_int_equal(iosched_parse_ulong("8000\n", &v), 0);
	assert_int_equal(v, 8000);
	assert_int_equal(iosched_parse_ulong("0", &v), 0);
	assert_int_equal(v, 0);
	v = 7;
	assert_int_equal(iosched_parse_ulong("", &v), -EBADMSG);
	assert_int_equal(iosched_parse_ulong("-1\n", &v), -EBADMSG);
	assert_int_equal(iosched_parse_ulong(" 8\n", &v), -EBADMSG);
	assert_int_equal(iosched_parse_ulong("8 ms\n", &v), -EBADMSG);
	assert_int_equal(iosched_parse_ulong("99999999999999999999999\n", &v), -EBADMSG);
	assert_int_equal(v, 7);

	assert_true(iosched_idling_note("vda", &idle, line, sizeof(line)));
	assert_non_null(strstr(line, "I/O weight on vda: bfq idles up to 8000 us"));
	assert_non_null(strstr(line, "timeout_sync 124 ms"));
	assert_non_null(strstr(line, "echo 0 > /sys/block/vda/queue/iosched/slice_idle"));
	assert_true(strlen(line) < sizeof(line) - 1); /* whole, not cut by the buffer */
	assert_true(iosched_idling_note("vda", &idle, small, sizeof(small)));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	idle.slice_idle_us = 0;
	line[0] = '\0';
	assert_false(iosched_idling_note("vda", &idle, line, sizeof(line)));
	assert_string_equal(line, "");

	/* Not a device: nothing opened outside /sys/block. */
	assert_int_equal(iosched_bfq_idling("../../etc", &idle), -EINVAL);
	assert_int_equal(iosched_bfq_idling("nosuchdisk0", &idle), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_idling),
		cmocka_unit_test(test_state_records),
		cmocka_unit_test(test_state_device_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
