// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

static int max_level = LOG_INFO;

void log_set_max_level(int level)
{
	max_level = level;
}

static void emit(int level, const char *fmt, va_list ap, int err)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (getenv("JOURNAL_STREAM"))
		fprintf(stderr, "<%d>", level);
	else
		fputs("tailwarden: ", stderr);
	if (err)
		fprintf(stderr, "%s: %s\n", msg, strerror(-err));
	else
		fprintf(stderr, "%s\n", msg);
}

int log_full(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > max_level)
		return 0;
	va_start(ap, fmt);
	emit(level, fmt, ap, 0);
	va_end(ap);
	return 0;
}

int log_full_errno(int level, int err, const char *fmt, ...)
{
	va_list ap;

	if (level > max_level)
		return err;
	va_start(ap, fmt);
	emit(level, fmt, ap, err);
	va_end(ap);
	return err;
}
