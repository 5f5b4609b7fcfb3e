/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Values with units, as written in policy and config files: strict
 * parsers (no exponents, signs, hex, inf/nan or locale) and the matching
 * formatters. Every parser returns 0, or -EINVAL with a reason in words
 * written to why (at least VALUE_WHY_MAX bytes). Pure: no I/O.
 */
#ifndef TW_VALUE_H
#define TW_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VALUE_WHY_MAX 256

/* "200": a whole number. */
int value_parse_uint(const char *s, uint64_t *out, char *why);
/* "2ms", "1.5 s", "250us", "250µs", "100ns": nanoseconds, rounded, at most 1e18. */
int value_parse_duration(const char *s, uint64_t *ns, char *why);
/* A duration from min to max inclusive; outside, why names the bound. */
int value_parse_duration_in(const char *s, uint64_t min, uint64_t max, uint64_t *ns, char *why);
/*
 * "4096", "512K", "16M", "1.5G", "2T" (any case, "B" for bytes, blanks
 * before the unit): bytes, in powers of 1024, rounded; below 2^63.
 */
int value_parse_size(const char *s, uint64_t *bytes, char *why);
/* "12.5%": the fraction 0.125. */
int value_parse_percent(const char *s, double *fraction, char *why);
/* "1.2GHz", "800 MHz", "2000000kHz", "1200000000Hz" (unit in any case): kHz, rounded to whole kHz. */
int value_parse_frequency(const char *s, double *khz, char *why);
/* "99", "99.9", "p99", "P99.9": the fraction 0.99, 0.999; from 1 to below 100. */
int value_parse_percentile(const char *s, double *fraction, char *why);
/* yes/no, true/false, on/off, 1/0 (any case). */
int value_parse_bool(const char *s, bool *out, char *why);

/* How one kind of range value is read, bounded and shown. */
struct value_range_spec {
	int (*parse)(const char *s, double *v, char *why); /* one bound */
	void (*format)(double v, char *buf, size_t len);
	double min, max;  /* allowed values, inclusive */
	bool max_keyword; /* "max" (INFINITY) allowed as the upper bound */
};

/*
 * "LO..HI", or a single value meaning LO == HI. Both bounds within
 * [spec->min, spec->max] and LO <= HI.
 */
int value_parse_range(const char *s, const struct value_range_spec *spec, double *lo, double *hi,
		      char *why);

/* One range bound, for struct value_range_spec.parse. */
int value_parse_percent_bound(const char *s, double *v, char *why);
int value_parse_weight_bound(const char *s, double *v, char *why);
int value_parse_frequency_bound(const char *s, double *v, char *why);
/* A CPU weight bound: a weight, or "idle" (0: the cgroup's cpu.idle, as systemd's CPUWeight=idle). */
int value_parse_cpu_weight_bound(const char *s, double *v, char *why);

/* Shortest exact-ish spelling: "2ms", "1.5s", "250us"; "12.5%"; "1.2GHz"; INFINITY as "max". */
void value_format_duration(uint64_t ns, char *buf, size_t len);
/* How value_format_ns() spells a duration. */
enum value_ns_style {
	/*
	 * In the largest unit of s, ms, us it reaches, to digits significant
	 * digits ("1.23ms" at 3), or whole ns below 1us: reasons and logs.
	 */
	VALUE_NS_SIGNIFICANT,
	/*
	 * Whole us, else ms or s to digits decimals ("312us", "1.27ms",
	 * "2.10s" at 2), the unit chosen on the rounded value: 999.6us is
	 * "1.00ms", never "1000us". For columns; never ns.
	 */
	VALUE_NS_DECIMALS,
};

/* A duration in ns, for people: the tree's one duration formatter. */
void value_format_ns(char *buf, size_t len, double ns, enum value_ns_style style, int digits);
/* Bytes in the largest of K, M, G, T that divides them exactly: "16M", "1536K", "1000". */
void value_format_size(uint64_t bytes, char *buf, size_t len);
void value_format_percent(double fraction, char *buf, size_t len);
void value_format_frequency(double khz, char *buf, size_t len);
void value_format_number(double v, char *buf, size_t len);
/* A CPU weight: as a number, 0 as "idle". */
void value_format_cpu_weight(double v, char *buf, size_t len);

/* Writes the reason to why (VALUE_WHY_MAX bytes) and returns -EINVAL. */
int value_fail(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Does s hold control characters (below 0x20, or 0x7f)? */
bool value_has_control(const char *s);

#endif
