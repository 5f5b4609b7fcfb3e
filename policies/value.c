// SPDX-License-Identifier: GPL-2.0
/*
 * Values with units. The number syntax is deliberately narrow,
 * DIGITS[.DIGITS]: strtod() alone would also take "1e3", "0x10", "inf",
 * "-5" and leading blanks, none of which a policy author means.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "policies/value.h"

#define NUM_MAX 40 /* digits and point; more is a typo, not a value */

int value_fail(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, VALUE_WHY_MAX, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * DIGITS[.DIGITS] at the start of s. Returns the length consumed and the
 * value in *v, or 0 when s does not start with a number (or a too long one).
 */
static size_t scan_number(const char *s, double *v)
{
	char buf[NUM_MAX + 1];
	size_t n = 0;

	while (is_digit(s[n]))
		n++;
	if (!n)
		return 0;
	if (s[n] == '.' && is_digit(s[n + 1])) {
		n++;
		while (is_digit(s[n]))
			n++;
	}
	if (n > NUM_MAX)
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*v = strtod(buf, NULL);
	return n;
}

/* The unit after a number: blanks allowed between, nothing after. */
static const char *value_after(const char *s, size_t n)
{
	s += n;
	while (is_blank(*s))
		s++;
	return s;
}

int value_parse_uint(const char *s, uint64_t *out, char *why)
{
	unsigned long long v;
	char *end;
	size_t n = 0;

	while (is_digit(s[n]))
		n++;
	if (!n || s[n])
		return value_fail(why, "expected a whole number");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return value_fail(why, "number too large");
	*out = v;
	return 0;
}

struct unit {
	const char *name;
	double scale;
};

/* What one kind of quantity accepts, for scaled() and its messages. */
struct unit_kind {
	const struct unit *units;
	size_t n;
	bool anycase;	      /* "ghz" as well as "GHz" */
	const char *example;  /* "2ms" */
	const char *expected; /* "ns, us, \xc2\xb5s, ms or s" */
};

/* A number and a unit of kind k: the number times the unit's scale. */
static int scaled(const char *s, const struct unit_kind *k, double *v, char *why)
{
	const char *u;
	size_t n = scan_number(s, v);

	if (!n)
		return value_fail(why, "expected a number and a unit, e.g. %s", k->example);
	u = value_after(s, n);
	if (!*u)
		return value_fail(why, "missing unit; expected %s", k->expected);
	for (size_t i = 0; i < k->n; i++) {
		if (k->anycase ? strcasecmp(u, k->units[i].name) : strcmp(u, k->units[i].name))
			continue;
		*v *= k->units[i].scale;
		return 0;
	}
	return value_fail(why, "unknown unit '%s'; expected %s", u, k->expected);
}

static const struct unit duration_units[] = {
	{ "ns", 1 },	      { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, /* U+00B5 MICRO SIGN */
	{ "\xce\xbcs", 1e3 }, /* U+03BC GREEK SMALL LETTER MU */
	{ "ms", 1e6 },	      { "s", 1e9 },
};

static const struct unit_kind durations = {
	duration_units,
	sizeof(duration_units) / sizeof(*duration_units),
	false,
	"2ms",
	"ns, us, \xc2\xb5s, ms or s",
};

int value_parse_duration(const char *s, uint64_t *ns, char *why)
{
	double v;
	int r = scaled(s, &durations, &v, why);

	if (r)
		return r;
	if (v > 1e18)
		return value_fail(why, "duration too large");
	*ns = (uint64_t)llround(v);
	return 0;
}

int value_parse_size(const char *s, uint64_t *bytes, char *why)
{
	static const struct unit size_units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "K", 1024.0 },
		{ "M", 1024.0 * 1024 },
		{ "G", 1024.0 * 1024 * 1024 },
		{ "T", 1024.0 * 1024 * 1024 * 1024 },
	};
	const char *u;
	double v;
	size_t n = scan_number(s, &v);

	if (!n)
		return value_fail(why, "expected a size, e.g. 16M");
	u = value_after(s, n);
	for (size_t i = 0; i < sizeof(size_units) / sizeof(*size_units); i++) {
		if (strcasecmp(u, size_units[i].name))
			continue;
		v = round(v * size_units[i].scale);
		if (v >= 18446744073709551616.0 / 2)
			return value_fail(why, "size too large");
		*bytes = (uint64_t)v;
		return 0;
	}
	return value_fail(why, "unknown unit '%s'; expected bytes or K, M, G, T (powers of 1024)",
			  u);
}

int value_parse_percent(const char *s, double *fraction, char *why)
{
	const char *u;
	double v;
	size_t n = scan_number(s, &v);

	if (!n)
		return value_fail(why, "expected a percentage, e.g. 50%%");
	u = value_after(s, n);
	if (!*u)
		return value_fail(why, "missing '%%'; expected a percentage, e.g. 50%%");
	if (strcmp(u, "%"))
		return value_fail(why,
				  "expected a percentage, e.g. 50%%, not '%s' after the number", u);
	*fraction = v / 100;
	return 0;
}

static const struct unit freq_units[] = {
	{ "Hz", 1e-3 },
	{ "kHz", 1 },
	{ "MHz", 1e3 },
	{ "GHz", 1e6 },
};

static const struct unit_kind frequencies = {
	freq_units, sizeof(freq_units) / sizeof(*freq_units), true, "1.2GHz", "Hz, kHz, MHz or GHz",
};

int value_parse_frequency(const char *s, double *khz, char *why)
{
	double v;
	int r = scaled(s, &frequencies, &v, why);

	if (r)
		return r;
	*khz = round(v);
	return 0;
}

int value_parse_percentile(const char *s, double *fraction, char *why)
{
	const char *p = s;
	double v;
	size_t n;

	if (*p == 'p' || *p == 'P')
		p++;
	n = scan_number(p, &v);
	if (!n || p[n])
		return value_fail(why, "expected a percentile, e.g. 99, 99.9 or p99");
	if (v > 0 && v < 1)
		return value_fail(why,
				  "below 1; percentiles are in percent: 99 (or p99) is the 99th");
	if (v < 1)
		return value_fail(why, "a percentile must be at least 1");
	if (v >= 100)
		return value_fail(why, "a percentile must be below 100");
	*fraction = v / 100;
	return 0;
}

int value_parse_bool(const char *s, bool *out, char *why)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
			*out = !strcasecmp(s, yes[i]);
			return 0;
		}
	}
	return value_fail(why, "expected yes or no");
}

int value_parse_percent_bound(const char *s, double *v, char *why)
{
	return value_parse_percent(s, v, why);
}

int value_parse_weight_bound(const char *s, double *v, char *why)
{
	uint64_t u;
	int r = value_parse_uint(s, &u, why);

	if (r < 0)
		return r;
	*v = (double)u;
	return 0;
}

int value_parse_cpu_weight_bound(const char *s, double *v, char *why)
{
	int r;

	if (!strcmp(s, "idle")) {
		*v = 0;
		return 0;
	}
	r = value_parse_weight_bound(s, v, why);
	if (r == 0 && *v == 0)
		return value_fail(why, "0 is below the minimum of 1 (below every weight: idle)");
	return r;
}

int value_parse_frequency_bound(const char *s, double *v, char *why)
{
	return value_parse_frequency(s, v, why);
}

/* s[0..len) without the blanks around it, as a string in buf; -EINVAL if too long. */
static int trimmed(const char *s, size_t len, char *buf, size_t size, char *why)
{
	while (len && is_blank(*s))
		s++, len--;
	while (len && is_blank(s[len - 1]))
		len--;
	if (len >= size)
		return value_fail(why, "value too long");
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

/* One bound: parsed and within the spec's limits. */
static int range_bound(const char *tok, const struct value_range_spec *spec, double *v, char *why)
{
	char lim[64];
	int r = spec->parse(tok, v, why);

	if (r < 0)
		return r;
	if (*v < spec->min) {
		spec->format(spec->min, lim, sizeof(lim));
		return value_fail(why, "%s is below the minimum of %s", tok, lim);
	}
	if (*v > spec->max) {
		spec->format(spec->max, lim, sizeof(lim));
		return value_fail(why, "%s is above the maximum of %s", tok, lim);
	}
	return 0;
}

int value_parse_range(const char *s, const struct value_range_spec *spec, double *lo, double *hi,
		      char *why)
{
	const char *dots = strstr(s, "..");
	char a[128], b[128];
	int r;

	if (!dots) {
		if (trimmed(s, strlen(s), a, sizeof(a), why) < 0)
			return -EINVAL;
		if (!strcmp(a, "max"))
			return value_fail(
				why,
				"'max' is allowed only as the upper bound of a range, e.g. LOW..max");
		r = range_bound(a, spec, lo, why);
		if (r == 0)
			*hi = *lo;
		return r;
	}
	if (trimmed(s, dots - s, a, sizeof(a), why) < 0 ||
	    trimmed(dots + 2, strlen(dots + 2), b, sizeof(b), why) < 0)
		return -EINVAL;
	if (!*a)
		return value_fail(why, "missing lower bound before '..'");
	if (!*b)
		return value_fail(why, "missing upper bound after '..'");
	if (!strcmp(a, "max"))
		return value_fail(why, "'max' is allowed only as the upper bound of a range");
	r = range_bound(a, spec, lo, why);
	if (r < 0)
		return r;
	if (!strcmp(b, "max")) {
		if (!spec->max_keyword)
			return value_fail(why, "'max' is not allowed here; give a number");
		*hi = INFINITY;
		return 0;
	}
	r = range_bound(b, spec, hi, why);
	if (r < 0)
		return r;
	if (*lo > *hi)
		return value_fail(why, "lower bound %s is above upper bound %s", a, b);
	return 0;
}

void value_format_cpu_weight(double v, char *buf, size_t len)
{
	if (v == 0)
		snprintf(buf, len, "idle");
	else
		value_format_number(v, buf, len);
}

void value_format_number(double v, char *buf, size_t len)
{
	if (isinf(v))
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%.10g", v);
}

/* The units a duration is shown in, largest first. */
static const struct unit shown_ns[] = { { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 } };
#define SHOWN_NS (sizeof(shown_ns) / sizeof(*shown_ns))

static void format_ns_significant(char *buf, size_t len, double ns, int digits)
{
	for (size_t i = 0; i < SHOWN_NS; i++) {
		if (ns >= shown_ns[i].scale) {
			snprintf(buf, len, "%.*g%s", digits, ns / shown_ns[i].scale,
				 shown_ns[i].name);
			return;
		}
	}
	snprintf(buf, len, "%.0fns", ns);
}

/*
 * From the smallest unit up, a unit is kept while its value rounded to
 * its decimals (none for us) stays below 1000: below 999.5e3 ns in us,
 * below 999.995e6 ns in ms at 2 decimals. Both bounds are whole numbers
 * of ns, so computing them loses nothing. NaN ends in s ("nans").
 */
static void format_ns_decimals(char *buf, size_t len, double ns, int decimals)
{
	double ten_to_decimals = 1;

	for (int i = 0; i < decimals; i++)
		ten_to_decimals *= 10;
	for (size_t i = SHOWN_NS - 1; i > 0; i--) {
		int d = i == SHOWN_NS - 1 ? 0 : decimals;
		double below =
			shown_ns[i - 1].scale - 0.5 * shown_ns[i].scale / (d ? ten_to_decimals : 1);

		if (ns < below) {
			snprintf(buf, len, "%.*f%s", d, ns / shown_ns[i].scale, shown_ns[i].name);
			return;
		}
	}
	snprintf(buf, len, "%.*f%s", decimals, ns / shown_ns[0].scale, shown_ns[0].name);
}

void value_format_ns(char *buf, size_t len, double ns, enum value_ns_style style, int digits)
{
	if (style == VALUE_NS_DECIMALS)
		format_ns_decimals(buf, len, ns, digits);
	else
		format_ns_significant(buf, len, ns, digits);
}

void value_format_duration(uint64_t ns, char *buf, size_t len)
{
	value_format_ns(buf, len, ns, VALUE_NS_SIGNIFICANT, 10);
}

void value_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char suffix[] = "KMGT";
	int i = -1;

	while (i < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, suffix[i]);
}

void value_format_percent(double fraction, char *buf, size_t len)
{
	if (isinf(fraction))
		snprintf(buf, len, "max");
	else
		snprintf(buf, len, "%.10g%%", fraction * 100);
}

void value_format_frequency(double khz, char *buf, size_t len)
{
	if (isinf(khz))
		snprintf(buf, len, "max");
	else if (khz >= 1e6)
		snprintf(buf, len, "%.10gGHz", khz / 1e6);
	else if (khz >= 1e3)
		snprintf(buf, len, "%.10gMHz", khz / 1e3);
	else
		snprintf(buf, len, "%.10gkHz", khz);
}

bool value_has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int value_parse_duration_in(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *why)
{
	char lim[32];
	int r = value_parse_duration(s, out, why);

	if (r < 0)
		return r;
	if (*out < min) {
		value_format_duration(min, lim, sizeof(lim));
		return value_fail(why, "below the minimum of %s", lim);
	}
	if (*out > max) {
		value_format_duration(max, lim, sizeof(lim));
		return value_fail(why, "above the maximum of %s", lim);
	}
	return 0;
}
