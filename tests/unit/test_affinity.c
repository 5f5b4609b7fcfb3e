// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for how AvoidServiceCPUs= writes a CPU set in its log lines
 * (controller/affinity.c): ranges as taskset(1) prints them, and a buffer
 * too short for the set cut, NUL-terminated, with the whole length returned.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "controller/affinity.h"

static void set_of(cpu_set_t *set, const int *cpus, size_t n)
{
	CPU_ZERO(set);
	for (size_t i = 0; i < n; i++)
		CPU_SET(cpus[i], set);
}

static void test_format(void **state)
{
	static const struct {
		int cpus[16];
		size_t n;
		const char *want;
	} cases[] = {
		{ { 0 }, 1, "0" },
		{ { 1 }, 1, "1" },
		{ { 0, 1 }, 2, "0-1" },
		{ { 0, 1, 2, 5, 7, 8 }, 6, "0-2,5,7-8" },
		{ { 3, 1023 }, 2, "3,1023" },
		{ { 0 }, 0, "" },
	};
	char buf[64];
	cpu_set_t set;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		set_of(&set, cases[i].cpus, cases[i].n);
		assert_int_equal(affinity_format(&set, buf, sizeof(buf)), strlen(cases[i].want));
		assert_string_equal(buf, cases[i].want);
	}
}

static void test_format_short_buffer(void **state)
{
	static const int cpus[] = { 0, 1, 2, 5, 7, 8 };
	char buf[5];
	cpu_set_t set;

	(void)state;
	set_of(&set, cpus, 6);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(affinity_format(&set, buf, sizeof(buf)), strlen("0-2,5,7-8"));
	assert_string_equal(buf, "0-2,");
	assert_int_equal(affinity_format(&set, NULL, 0), strlen("0-2,5,7-8"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_short_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
