// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/log.h"

static int max_level = LOG_INFO;
static int journal = -1; /* unknown yet */
static const char *ident = "tailwarden";

void log_set_ident(const char *name)
{
	ident = name;
}

/*
 * $JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected stderr
 * to. It is inherited by children whose stderr goes elsewhere (a test
 * harness's pipe, a terminal), so it counts only while fd 2 is that stream.
 */
bool log_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (journal >= 0)
		return journal;
	journal = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
		  st.st_dev == dev && st.st_ino == ino;
	return journal;
}

char *log_make_printable(char *s)
{
	for (char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return s;
}

const char *log_printable(const char *s, char *buf, size_t len)
{
	if (!len)
		return "";
	snprintf(buf, len, "%s", s ? s : "(null)");
	return log_make_printable(buf);
}

void log_set_max_level(int level)
{
	max_level = level;
}

int log_level_from_env(void)
{
	static const char *const names[] = { "emerg",	"alert",  "crit", "err",
					     "warning", "notice", "info", "debug" };
	const char *e = getenv("TAILWARDEN_LOG_LEVEL");

	if (!e || !*e)
		return 0;
	for (int i = 0; i < (int)(sizeof(names) / sizeof(*names)); i++)
		if (!strcmp(e, names[i]) || (e[0] == '0' + i && !e[1])) {
			max_level = i;
			return 0;
		}
	return -EINVAL;
}

static void emit(int level, const char *fmt, va_list ap, int err)
{
	char msg[1024];
	int saved = errno;

	if (!fmt) /* never; says so to gcc, which warns under -fsanitize=undefined */
		return;
	/* glibc's printf writes strerror(errno) for %m. */
	errno = err < 0 ? -err : err;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	errno = saved;
	log_make_printable(msg); /* one line, no escape sequences, whatever it quotes */
	if (strstr(fmt, "%m"))
		err = 0; /* said already */
	if (log_journal())
		fprintf(stderr, "<%d>", level);
	else
		fprintf(stderr, "%s: ", ident);
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
