// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the decision log (controller/decisions.c) on a temporary
 * directory: rotation arithmetic (FILE and FILE.1 never past the maximum
 * by more than one line), no limit, a reopen after the file was moved
 * aside, and lines lost to an unwritable file with the growing retry delay.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/log.h"
#include "controller/decisions.h"

#define SEC 1000000ULL

static char dir[64], path[128], rotated[160];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/tw-decisions-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/decisions.jsonl", dir);
	snprintf(rotated, sizeof(rotated), "%s.1", path);
	log_set_max_level(LOG_ERR); /* the expected warnings stay quiet */
	return 0;
}

static int teardown(void **state)
{
	char aside[160];

	(void)state;
	snprintf(aside, sizeof(aside), "%s/aside", dir);
	unlink(path);
	unlink(rotated);
	unlink(aside);
	rmdir(dir);
	return 0;
}

static long long size_of(const char *p)
{
	struct stat st;

	return stat(p, &st) ? -1 : (long long)st.st_size;
}

/* A line of n bytes with its newline, numbered. */
static const char *line(int i, size_t n)
{
	static char buf[4096];

	memset(buf, 'x', n - 1);
	snprintf(buf, 8, "%06d", i);
	buf[6] = 'x';
	buf[n - 1] = '\0';
	return buf;
}

static void first_number(const char *p, int *first, int *lines)
{
	FILE *f = fopen(p, "r");
	char buf[4096];

	assert_non_null(f);
	*lines = 0;
	while (fgets(buf, sizeof(buf), f)) {
		if (!(*lines)++)
			*first = atoi(buf);
	}
	fclose(f);
}

static void test_rotation(void **state)
{
	struct decisions *d;
	int first, n;

	(void)state;
	assert_int_equal(decisions_open(path, 1000, &d), 0);
	/* Ten lines of 100 bytes fill it exactly: no rotation yet. */
	for (int i = 1; i <= 10; i++)
		assert_int_equal(decisions_write(d, line(i, 100), i * SEC), 0);
	assert_int_equal(size_of(path), 1000);
	assert_int_equal(size_of(rotated), -1);
	/* The 11th would pass the maximum: FILE becomes FILE.1, a new FILE takes it. */
	assert_int_equal(decisions_write(d, line(11, 100), 11 * SEC), 0);
	assert_int_equal(size_of(rotated), 1000);
	assert_int_equal(size_of(path), 100);
	first_number(rotated, &first, &n);
	assert_int_equal(first, 1);
	assert_int_equal(n, 10);
	/* 30 more: FILE.1 is replaced, never more than the maximum each. */
	for (int i = 12; i <= 41; i++) {
		assert_int_equal(decisions_write(d, line(i, 100), i * SEC), 0);
		assert_true(size_of(path) <= 1000);
		assert_true(size_of(rotated) <= 1000);
	}
	/* Rotated at lines 21, 31 and 41. */
	first_number(rotated, &first, &n);
	assert_int_equal(first, 31);
	assert_int_equal(n, 10);
	first_number(path, &first, &n);
	assert_int_equal(first, 41);
	assert_int_equal(n, 1);
	assert_int_equal(decisions_lost(d), 0);
	decisions_close(d);

	/* A line bigger than the maximum is written alone: one line over, no more. */
	assert_int_equal(decisions_open(path, 1000, &d), 0);
	assert_int_equal(decisions_size(d), 100);
	assert_int_equal(decisions_write(d, line(42, 1500), 42 * SEC), 0);
	assert_int_equal(size_of(rotated), 100);
	assert_int_equal(size_of(path), 1500);
	assert_int_equal(decisions_write(d, line(43, 100), 43 * SEC), 0);
	assert_int_equal(size_of(rotated), 1500);
	assert_int_equal(size_of(path), 100);
	decisions_close(d);
}

static void test_no_limit(void **state)
{
	struct decisions *d;

	(void)state;
	assert_int_equal(decisions_open(path, 0, &d), 0);
	for (int i = 1; i <= 100; i++)
		assert_int_equal(decisions_write(d, line(i, 100), i * SEC), 0);
	assert_int_equal(size_of(path), 10000);
	assert_int_equal(size_of(rotated), -1);
	decisions_close(d);

	/* Something that is not a regular file is never renamed. */
	assert_int_equal(decisions_open("/dev/null", 100, &d), 0);
	for (int i = 1; i <= 5; i++)
		assert_int_equal(decisions_write(d, line(i, 100), i * SEC), 0);
	decisions_close(d);
	assert_int_equal(access("/dev/null.1", F_OK), -1);
}

static void test_reopen(void **state)
{
	char aside[160];
	struct decisions *d;
	int first, n;

	(void)state;
	snprintf(aside, sizeof(aside), "%s/aside", dir);
	assert_int_equal(decisions_open(path, 1000, &d), 0);
	for (int i = 1; i <= 3; i++)
		assert_int_equal(decisions_write(d, line(i, 100), i * SEC), 0);
	assert_int_equal(rename(path, aside), 0);
	assert_int_equal(decisions_write(d, line(4, 100), 4 * SEC), 0); /* still the old file */
	assert_int_equal(decisions_reopen(d, 5 * SEC), 0);
	assert_int_equal(decisions_size(d), 0);
	assert_int_equal(decisions_write(d, line(5, 100), 5 * SEC), 0);
	first_number(aside, &first, &n);
	assert_int_equal(first, 1);
	assert_int_equal(n, 4);
	first_number(path, &first, &n);
	assert_int_equal(first, 5);
	assert_int_equal(n, 1);
	decisions_close(d);
}

/* /dev/full: every write fails with ENOSPC. Lost lines counted, retries back off. */
static void test_lost(void **state)
{
	struct decisions *d;
	uint64_t t = 0;

	(void)state;
	assert_int_equal(decisions_open("/dev/full", 0, &d), 0);
	assert_int_equal(decisions_write(d, "{}", t), -ENOSPC);
	assert_int_equal(decisions_lost(d), 1);
	/* Within the first second no attempt is made. */
	assert_int_equal(decisions_write(d, "{}", t + SEC / 2), -EAGAIN);
	assert_int_equal(decisions_lost(d), 2);
	/* Retried at 1 s (fails), then not before 1 + 2 s, then 3 + 4 s. */
	assert_int_equal(decisions_write(d, "{}", 1 * SEC), -ENOSPC);
	assert_int_equal(decisions_write(d, "{}", 2 * SEC), -EAGAIN);
	assert_int_equal(decisions_write(d, "{}", 3 * SEC), -ENOSPC);
	assert_int_equal(decisions_write(d, "{}", 6 * SEC), -EAGAIN);
	assert_int_equal(decisions_write(d, "{}", 7 * SEC), -ENOSPC);
	assert_int_equal(decisions_lost(d), 7);
	/* The delay stops growing at DECISIONS_RETRY_MAX_USEC. */
	t = 7 * SEC;
	for (int i = 0; i < 20; i++) {
		t += DECISIONS_RETRY_MAX_USEC;
		assert_int_equal(decisions_write(d, "{}", t), -ENOSPC);
	}
	assert_int_equal(decisions_write(d, "{}", t + DECISIONS_RETRY_MAX_USEC - 1), -EAGAIN);
	decisions_close(d);
}

/* A file that cannot be opened again (its directory is gone) recovers when it can. */
static void test_recovery(void **state)
{
	struct decisions *d;
	int first, n;

	(void)state;
	assert_int_equal(decisions_open(path, 250, &d), 0);
	assert_int_equal(decisions_write(d, line(1, 200), 0), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	/* The next line needs a rotation, and a new file where there is no directory. */
	assert_int_equal(decisions_write(d, line(2, 200), 1 * SEC), -ENOENT);
	assert_int_equal(decisions_write(d, line(3, 200), 1 * SEC + 1), -EAGAIN);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(decisions_write(d, line(4, 200), 2 * SEC), 0);
	assert_int_equal(decisions_lost(d), 2);
	first_number(path, &first, &n);
	assert_int_equal(first, 4);
	assert_int_equal(n, 1);
	/* A failed reopen (SIGHUP) loses nothing by itself; the next line tries at once. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(decisions_reopen(d, 3 * SEC), -ENOENT);
	assert_int_equal(decisions_lost(d), 2);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_int_equal(decisions_write(d, line(5, 200), 3 * SEC), 0);
	assert_int_equal(decisions_lost(d), 2);
	decisions_close(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovery, setup, teardown),
	};

	return cmocka_run_group_tests_name("decision log", tests, NULL, NULL);
}
