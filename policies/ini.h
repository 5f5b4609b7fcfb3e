/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to policies/: the INI layer shared by policy files and the main
 * config. libinih splits lines into keys and values; this layer adds what
 * it lacks (line numbers for every line, section header lines, all syntax
 * errors rather than the first) and checks sections and keys against a
 * schema, with suggestions for near misses. Values go to the schema's
 * setters; what a whole file must contain is the caller's business.
 */
#ifndef TW_INI_H
#define TW_INI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "policies/value.h"

#define INI_MAX_SECTIONS 4
#define INI_MAX_KEYS 16
#define INI_LINE_MAX 4096      /* bytes per line, newline excluded */
#define INI_FILE_MAX (1 << 20) /* bytes per file */
#define INI_ERRORS_MAX 50      /* per file; then one "too many errors" */

/* One problem found in a file: "FILE:LINE: message". */
struct policy_error {
	char *file;
	unsigned line; /* 0 when it concerns the whole file */
	char *msg;
};

struct policy_errors {
	struct policy_error *v;
	size_t n;
};

#define POLICY_ERRORS_SHOWN 100 /* printed; then one "N more errors not shown" */

/*
 * Print each error as "FILE:LINE: message" to f, the first
 * POLICY_ERRORS_SHOWN of them, then "N more errors not shown".
 */
void policy_errors_print(const struct policy_errors *errs, FILE *f);
/* How many of errs policy_errors_print() prints. */
size_t policy_errors_shown(const struct policy_errors *errs);
void policy_errors_clear(struct policy_errors *errs);

struct ini_key {
	int section; /* index in ini_schema.sections */
	const char *name;
	const char *expect; /* what a value looks like, for empty values */
	/* 0, -EINVAL with a reason in why (VALUE_WHY_MAX), or -ENOMEM */
	int (*set)(void *obj, const char *value, char *why);
};

struct ini_schema {
	const char *const *sections;
	size_t nsections;
	const struct ini_key *keys;
	size_t nkeys;
	const struct ini_schema *other; /* the other kind of file, for "belongs in" hints */
	const char *what;		/* "a policy file (*.policy)" */
};

/* What a file held: for "missing" checks and messages that point at a line. */
struct ini_seen {
	unsigned section_line[INI_MAX_SECTIONS]; /* first header, 0 when absent */
	unsigned key_line[INI_MAX_KEYS];	 /* 0 when absent */
	bool key_ok[INI_MAX_KEYS];		 /* the value was valid */
};

/* The errors of one file: counted, capped, sorted by line at the end. */
struct file_errs {
	struct policy_errors *errs;
	const char *file;
	size_t first; /* index of this file's first error in errs */
};

void file_errs_init(struct file_errs *fe, struct policy_errors *errs, const char *file);
/* Adds "FILE:LINE: message"; 0 or -ENOMEM. */
int file_err(struct file_errs *fe, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Number of errors this file has so far. */
size_t file_errs_count(const struct file_errs *fe);
/* Orders this file's errors by line, keeping the order of equal lines. */
void file_errs_sort(struct file_errs *fe);

/* Appends an error not tied to one file's cap; 0 or -ENOMEM. */
int policy_error_add(struct policy_errors *errs, const char *file, unsigned line, const char *fmt,
		     ...) __attribute__((format(printf, 4, 5)));

/* A regular file whole into *data (NUL-terminated, free()); -errno, -EFBIG over
 * INI_FILE_MAX, -EINVAL when not a regular file (a FIFO, a device). */
int read_whole_file(const char *path, char **data, size_t *len);
/*
 * The same for a file whose problems are the user's: one that cannot be
 * read is an error in fe ("cannot read: REASON", "file too large") and
 * *data NULL. 0 or -ENOMEM.
 */
int ini_read_file(struct file_errs *fe, const char *path, char **data, size_t *len);

/* Parses data against schema into obj, filling seen; errors into fe. 0 or -ENOMEM. */
int ini_parse_buffer(const char *data, size_t len, const struct ini_schema *schema, void *obj,
		     struct ini_seen *seen, struct file_errs *fe);

/* The two kinds of file; each names the other for "belongs in" hints. */
extern const struct ini_schema policy_schema; /* policy.c */
extern const struct ini_schema config_schema; /* config.c */

#endif
