// SPDX-License-Identifier: GPL-2.0
/*
 * The INI layer: libinih does the key/value lexing (whitespace, inline
 * comments, a UTF-8 BOM); we feed it one line at a time through a reader
 * so we know every line's number, see section headers (Debian's build has
 * no section callback) and find every malformed line, not just the first.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ini.h>
#include "common/log.h"
#include "policies/ini.h"

enum { SECT_NONE = -1, SECT_UNKNOWN = -2 };

/* ---- errors ---- */

static int error_addv(struct policy_errors *errs, const char *file, unsigned line, const char *fmt,
		      va_list ap)
{
	struct policy_error *v;
	char *msg, *f;

	if (vasprintf(&msg, fmt, ap) < 0)
		return -ENOMEM;
	/* Values and names are quoted back: keep a terminal's control characters out. */
	log_make_printable(msg);
	f = strdup(file);
	if (f)
		log_make_printable(f);
	v = realloc(errs->v, (errs->n + 1) * sizeof(*v));
	if (!f || !v) {
		free(msg);
		free(f);
		if (v)
			errs->v = v;
		return -ENOMEM;
	}
	errs->v = v;
	v[errs->n++] = (struct policy_error){ .file = f, .line = line, .msg = msg };
	return 0;
}

int policy_error_add(struct policy_errors *errs, const char *file, unsigned line, const char *fmt,
		     ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = error_addv(errs, file, line, fmt, ap);
	va_end(ap);
	return r;
}

void file_errs_init(struct file_errs *fe, struct policy_errors *errs, const char *file)
{
	fe->errs = errs;
	fe->file = file;
	fe->first = errs->n;
}

size_t file_errs_count(const struct file_errs *fe)
{
	return fe->errs->n - fe->first;
}

int file_err(struct file_errs *fe, unsigned line, const char *fmt, ...)
{
	size_t n = file_errs_count(fe);
	va_list ap;
	int r;

	if (n > INI_ERRORS_MAX)
		return 0;
	if (n == INI_ERRORS_MAX)
		return policy_error_add(fe->errs, fe->file, line,
					"too many errors; the rest of this file is not checked");
	va_start(ap, fmt);
	r = error_addv(fe->errs, fe->file, line, fmt, ap);
	va_end(ap);
	return r;
}

void file_errs_sort(struct file_errs *fe)
{
	size_t n = file_errs_count(fe);
	struct policy_error *v;

	if (n < 2)
		return;
	v = fe->errs->v + fe->first;
	/* Insertion sort: stable, and n is capped at INI_ERRORS_MAX + 1. */
	for (size_t i = 1; i < n; i++) {
		struct policy_error e = v[i];
		size_t j = i;

		for (; j > 0 && v[j - 1].line > e.line; j--)
			v[j] = v[j - 1];
		v[j] = e;
	}
}

size_t policy_errors_shown(const struct policy_errors *errs)
{
	return errs->n < POLICY_ERRORS_SHOWN ? errs->n : POLICY_ERRORS_SHOWN;
}

void policy_errors_print(const struct policy_errors *errs, FILE *f)
{
	size_t n = policy_errors_shown(errs);

	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s:%u: %s\n", errs->v[i].file, errs->v[i].line, errs->v[i].msg);
	if (errs->n > n)
		fprintf(f, "%zu more errors not shown\n", errs->n - n);
}

void policy_errors_clear(struct policy_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++) {
		free(errs->v[i].file);
		free(errs->v[i].msg);
	}
	free(errs->v);
	errs->v = NULL;
	errs->n = 0;
}

/* ---- files ---- */

int read_whole_file(const char *path, char **data, size_t *len)
{
	size_t n = 0, cap = 4096;
	char *buf = NULL, *nb;
	struct stat st;
	ssize_t got;
	int fd, r;

	/* O_NONBLOCK: a FIFO given as a file must not hang open() for ever. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	for (;;) {
		if (n + 1 >= cap || !buf) {
			cap = buf ? cap * 2 : cap;
			nb = realloc(buf, cap);
			if (!nb) {
				r = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		got = read(fd, buf + n, cap - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = -errno;
			goto out;
		}
		if (!got)
			break;
		n += got;
		if (n > INI_FILE_MAX) {
			r = -EFBIG;
			goto out;
		}
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	buf = NULL;
	r = 0;
out:
	free(buf);
	close(fd);
	return r;
}

int ini_read_file(struct file_errs *fe, const char *path, char **data, size_t *len)
{
	int r = read_whole_file(path, data, len);

	if (r == 0 || r == -ENOMEM)
		return r;
	*data = NULL;
	if (r == -EFBIG)
		return file_err(fe, 0, "file too large (over %d bytes)", INI_FILE_MAX);
	if (r == -EINVAL)
		return file_err(fe, 0, "not a regular file");
	return file_err(fe, 0, "cannot read: %s", strerror(-r));
}

/* ---- names and suggestions ---- */

/*
 * Optimal string alignment distance (Levenshtein plus transpositions),
 * ignoring case: "CPUQuotta" is 1 from "CPUQuota", "cpuweight" 0 from
 * "CPUWeight". b is a schema name (short); a may be anything.
 */
static unsigned distance(const char *a, const char *b)
{
	unsigned rows[3][64], *pp, *p, *c;
	size_t m = strlen(b);

	if (m >= 64)
		return UINT_MAX;
	pp = rows[0], p = rows[1], c = rows[2];
	for (size_t j = 0; j <= m; j++)
		p[j] = j;
	for (size_t i = 1; a[i - 1]; i++) {
		c[0] = i;
		for (size_t j = 1; j <= m; j++) {
			unsigned cost = tolower((unsigned char)a[i - 1]) !=
					tolower((unsigned char)b[j - 1]);
			unsigned d = p[j - 1] + cost;

			if (p[j] + 1 < d)
				d = p[j] + 1;
			if (c[j - 1] + 1 < d)
				d = c[j - 1] + 1;
			if (i > 1 && j > 1 &&
			    tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
			    pp[j - 2] + 1 < d)
				d = pp[j - 2] + 1;
			c[j] = d;
		}
		unsigned *t = pp;
		pp = p, p = c, c = t;
	}
	return p[m];
}

/* Close enough to suggest: a typo or two, or a part of the name ("Quota"). */
static bool near(const char *got, const char *name, unsigned *score)
{
	unsigned d = distance(got, name);

	*score = d;
	if (d <= (strlen(name) >= 6 ? 2u : 1u))
		return true;
	return strlen(got) >= 4 && strcasestr(name, got);
}

/* Index of the nearest key of section sect (-1: any section), or -1. */
static int nearest_key(const struct ini_schema *s, int sect, const char *got)
{
	unsigned best = UINT_MAX, d;
	int k = -1;

	for (size_t i = 0; i < s->nkeys; i++) {
		if (sect >= 0 && s->keys[i].section != sect)
			continue;
		if (near(got, s->keys[i].name, &d) && d < best)
			best = d, k = i;
	}
	return k;
}

static int exact_key(const struct ini_schema *s, const char *got)
{
	for (size_t i = 0; i < s->nkeys; i++)
		if (!strcmp(s->keys[i].name, got))
			return i;
	return -1;
}

static int exact_section(const struct ini_schema *s, const char *got)
{
	for (size_t i = 0; i < s->nsections; i++)
		if (!strcmp(s->sections[i], got))
			return i;
	return -1;
}

/* "A, B or C" into buf: each name with before/after decoration. */
static void join(char *buf, size_t len, const char *const *names, size_t n, const char *before,
		 const char *after)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";

		off += snprintf(buf + off, len - off, "%s%s%s%s", sep, before, names[i], after);
	}
}

static void section_keys(const struct ini_schema *s, int sect, char *buf, size_t len)
{
	const char *names[INI_MAX_KEYS];
	size_t n = 0;

	for (size_t i = 0; i < s->nkeys; i++)
		if (s->keys[i].section == sect)
			names[n++] = s->keys[i].name;
	join(buf, len, names, n, "", "=");
}

/* ---- the lexer around libinih ---- */

struct lexer {
	const struct ini_schema *schema;
	void *obj;
	struct ini_seen *seen;
	struct file_errs *fe;
	const char *data;
	size_t len, pos;
	char line[INI_LINE_MAX + 2]; /* the current line as handed to libinih, with '\n' */
	size_t line_len, line_off;
	unsigned lineno;
	int section;
	bool want_kv, got_kv; /* a key=value line, and libinih saw it as one */
	int r;		      /* first -ENOMEM */
};

static void lx_err(struct lexer *lx, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void lx_err(struct lexer *lx, unsigned line, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	if (lx->r)
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0 || file_err(lx->fe, line, "%s", msg) < 0)
		lx->r = -ENOMEM;
	if (n >= 0)
		free(msg);
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static void unknown_section(struct lexer *lx, const char *name)
{
	const struct ini_schema *s = lx->schema;
	unsigned best = UINT_MAX, d;
	char list[256];
	int k = -1;

	if (s->other && exact_section(s->other, name) >= 0) {
		lx_err(lx, lx->lineno, "section [%s] belongs in %s, not in %s", name,
		       s->other->what, s->what);
		return;
	}
	for (size_t i = 0; i < s->nsections; i++)
		if (near(name, s->sections[i], &d) && d < best)
			best = d, k = i;
	if (k >= 0) {
		lx_err(lx, lx->lineno, "unknown section [%s]; did you mean [%s]?", name,
		       s->sections[k]);
		return;
	}
	join(list, sizeof(list), s->sections, s->nsections, "[", "]");
	lx_err(lx, lx->lineno, "unknown section [%s]; expected %s", name, list);
}

static void section_header(struct lexer *lx, char *t)
{
	char *close = strchr(t + 1, ']'), *name, *rest;
	int i;

	lx->section = SECT_UNKNOWN; /* until proven otherwise: its keys are not reported */
	if (!close) {
		lx_err(lx, lx->lineno, "missing ']' at the end of the section header");
		return;
	}
	*close = '\0';
	name = trim(t + 1);
	rest = trim(close + 1);
	if (*rest && *rest != '#' && *rest != ';')
		lx_err(lx, lx->lineno, "unexpected text after [%s]", name);
	i = exact_section(lx->schema, name);
	if (i < 0) {
		unknown_section(lx, name);
		return;
	}
	if (lx->seen->section_line[i]) {
		lx_err(lx, lx->lineno, "duplicate section [%s]; first at line %u", name,
		       lx->seen->section_line[i]);
	} else {
		lx->seen->section_line[i] = lx->lineno;
	}
	lx->section = i;
}

/* A line libinih did not take as key=value, though it is not a comment or header. */
static void finish_line(struct lexer *lx)
{
	if (lx->want_kv && !lx->got_kv)
		lx_err(lx, lx->lineno, "expected 'Key=Value', '[Section]' or a comment");
	lx->want_kv = lx->got_kv = false;
}

/* Loads the next line into lx->line; false at the end of the data. */
static bool next_line(struct lexer *lx)
{
	const char *p = lx->data + lx->pos, *nl;
	size_t raw;
	char tmp[INI_LINE_MAX + 1], *t;

	if (lx->pos >= lx->len)
		return false;
	nl = memchr(p, '\n', lx->len - lx->pos);
	raw = nl ? (size_t)(nl - p) : lx->len - lx->pos;
	lx->pos += raw + !!nl;
	lx->lineno++;
	if (lx->lineno == 1 && raw >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
		p += 3, raw -= 3;
	lx->line_off = 0;
	lx->line_len = 1;
	strcpy(lx->line, "\n"); /* what libinih gets for a line we refuse */
	if (raw > INI_LINE_MAX) {
		lx_err(lx, lx->lineno, "line too long (over %d bytes)", INI_LINE_MAX);
		return true;
	}
	if (memchr(p, '\0', raw)) {
		lx_err(lx, lx->lineno, "NUL byte in line");
		return true;
	}
	memcpy(lx->line, p, raw);
	lx->line[raw] = '\n';
	lx->line[raw + 1] = '\0';
	lx->line_len = raw + 1;

	memcpy(tmp, p, raw);
	tmp[raw] = '\0';
	t = trim(tmp);
	if (*t == '[')
		section_header(lx, t);
	else if (*t && *t != '#' && *t != ';')
		lx->want_kv = true;
	return true;
}

/* libinih's fgets(): our lines, possibly in pieces when its buffer is short. */
static char *reader(char *str, int num, void *stream)
{
	struct lexer *lx = stream;
	size_t n;

	if (num < 2)
		return NULL;
	if (lx->line_off == lx->line_len) {
		finish_line(lx);
		if (!next_line(lx))
			return NULL;
	}
	n = lx->line_len - lx->line_off;
	if (n > (size_t)num - 1)
		n = num - 1;
	memcpy(str, lx->line + lx->line_off, n);
	str[n] = '\0';
	lx->line_off += n;
	return str;
}

static void unknown_key(struct lexer *lx, const char *name)
{
	const struct ini_schema *s = lx->schema;
	const char *sect = s->sections[lx->section];
	char list[256];
	int k;

	k = exact_key(s, name);
	if (k >= 0) {
		lx_err(lx, lx->lineno, "unknown key '%s' in [%s]; it belongs in [%s]", name, sect,
		       s->sections[s->keys[k].section]);
		return;
	}
	if (s->other && (k = exact_key(s->other, name)) >= 0) {
		lx_err(lx, lx->lineno, "unknown key '%s' in [%s]; it belongs in [%s] of %s", name,
		       sect, s->other->sections[s->other->keys[k].section], s->other->what);
		return;
	}
	k = nearest_key(s, lx->section, name);
	if (k >= 0) {
		lx_err(lx, lx->lineno, "unknown key '%s' in [%s]; did you mean '%s'?", name, sect,
		       s->keys[k].name);
		return;
	}
	k = nearest_key(s, -1, name);
	if (k >= 0) {
		lx_err(lx, lx->lineno, "unknown key '%s' in [%s]; did you mean '%s' in [%s]?", name,
		       sect, s->keys[k].name, s->sections[s->keys[k].section]);
		return;
	}
	section_keys(s, lx->section, list, sizeof(list));
	lx_err(lx, lx->lineno, "unknown key '%s' in [%s]; expected %s", name, sect, list);
}

/* libinih strips both sides; this checks what it accepted besides '=' (':'). */
static bool separator_ok(struct lexer *lx, const char *name)
{
	const char *p = lx->line;

	while (isspace((unsigned char)*p))
		p++;
	p += strlen(name);
	while (isspace((unsigned char)*p))
		p++;
	if (*p == '=')
		return true;
	lx_err(lx, lx->lineno, "expected '=' after '%s', not '%c'", name, *p);
	return false;
}

static void set_value(struct lexer *lx, int k, const char *value)
{
	const struct ini_key *key = &lx->schema->keys[k];
	char why[VALUE_WHY_MAX];
	int r;

	if (!*value) {
		lx_err(lx, lx->lineno, "%s=: missing value; expected %s", key->name, key->expect);
		return;
	}
	r = key->set(lx->obj, value, why);
	if (r == -ENOMEM)
		lx->r = r;
	else if (r < 0)
		lx_err(lx, lx->lineno, "%s=%s: %s", key->name, value, why);
	else
		lx->seen->key_ok[k] = true;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct lexer *lx = user;
	int k;

	(void)section; /* ours, from the reader, is not truncated at 50 bytes */
	lx->got_kv = true;
	if (lx->r || !value)
		return 1;
	if (!*name) {
		lx_err(lx, lx->lineno, "missing key name before '='");
		return 1;
	}
	if (!separator_ok(lx, name) || lx->section == SECT_UNKNOWN)
		return 1;
	if (lx->section == SECT_NONE) {
		k = exact_key(lx->schema, name);
		if (k >= 0)
			lx_err(lx, lx->lineno, "key '%s' outside any section; it belongs in [%s]",
			       name, lx->schema->sections[lx->schema->keys[k].section]);
		else
			lx_err(lx, lx->lineno, "key '%s' outside any section", name);
		return 1;
	}
	for (k = 0; k < (int)lx->schema->nkeys; k++)
		if (lx->schema->keys[k].section == lx->section &&
		    !strcmp(lx->schema->keys[k].name, name))
			break;
	if (k == (int)lx->schema->nkeys) {
		unknown_key(lx, name);
		return 1;
	}
	if (lx->seen->key_line[k]) {
		lx_err(lx, lx->lineno, "duplicate key '%s' in [%s]; first at line %u", name,
		       lx->schema->sections[lx->section], lx->seen->key_line[k]);
		return 1;
	}
	lx->seen->key_line[k] = lx->lineno;
	set_value(lx, k, value);
	return 1;
}

/* libinih's knobs (runtime variables in Debian's build): one way to read a file. */
static void ini_configure(void)
{
	static char prefixes[] = ";#";

	ini_allow_multiline = false; /* an indented line is an error, not a continuation */
	ini_allow_inline_comments = true;
	ini_inline_comment_prefixes = prefixes;
	ini_start_comment_prefixes = prefixes;
	ini_allow_no_value = false;
	ini_stop_on_first_error = false;
	/* A heap buffer that grows to the longest line we hand over. */
	ini_use_stack = false;
	ini_allow_realloc = true;
	ini_max_line = 2 * INI_LINE_MAX + 2;
}

int ini_parse_buffer(const char *data, size_t len, const struct ini_schema *schema, void *obj,
		     struct ini_seen *seen, struct file_errs *fe)
{
	struct lexer *lx;
	int r;

	lx = calloc(1, sizeof(*lx));
	if (!lx)
		return -ENOMEM;
	*lx = (struct lexer){ .schema = schema,
			      .obj = obj,
			      .seen = seen,
			      .fe = fe,
			      .data = data,
			      .len = len,
			      .section = SECT_NONE };
	ini_configure();
	r = ini_parse_stream(reader, lx, handler, lx);
	finish_line(lx);
	if (r == -2)
		lx->r = -ENOMEM;
	r = lx->r;
	free(lx);
	return r;
}
