// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "output.h"

/* A double serialised with a fixed number of decimals. */
static struct json_object *num(double v, const char *fmt)
{
	char buf[64];

	snprintf(buf, sizeof(buf), fmt, v);
	return json_object_new_double_s(v, buf);
}

static const struct {
	const char *key;
	double q;
} pcts[] = {
	{ "p50", 0.50 }, { "p90", 0.90 }, { "p99", 0.99 }, { "p999", 0.999 },
};

/* Percentiles in µs, or JSON null when the window has no values. */
static struct json_object *latency_json(const struct hist *h)
{
	struct json_object *o;

	if (!h->total)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	for (size_t i = 0; i < sizeof(pcts) / sizeof(*pcts); i++)
		json_object_object_add(o, pcts[i].key,
				       num(hist_percentile(h, pcts[i].q) / 1000.0, "%.1f"));
	json_object_object_add(o, "max", num(hist_max(h) / 1000.0, "%.1f"));
	return o;
}

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static struct json_object *outbound_json(const struct qos_sample *s)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	add_u64(o, "requests", s->out_requests);
	add_u64(o, "bytes_in", s->out_bytes_in);
	add_u64(o, "bytes_out", s->out_bytes_out);
	json_object_object_add(o, "latency_us", latency_json(&s->outbound));
	return o;
}

static struct json_object *drops_json(const struct sensor_drops *d)
{
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	add_u64(o, "spans", d->spans_negative + d->spans_absurd);
	add_u64(o, "conns", d->conns);
	add_u64(o, "cgroups", d->cgroups);
	return o;
}

struct json_object *output_sample_json(const struct qos_sample *s, const char *path,
				       double ts, const struct sensor_drops *drops)
{
	struct json_object *o = json_object_new_object();
	double iv = s->interval_s > 0 ? s->interval_s : 1;

	if (!o)
		return NULL;
	json_object_object_add(o, "ts", num(ts, "%.3f"));
	json_object_object_add(o, "cgroup", path ? json_object_new_string(path) : NULL);
	add_u64(o, "cgroup_id", s->cgroup_id);
	json_object_object_add(o, "interval_s", num(s->interval_s, "%.3f"));
	add_u64(o, "requests", s->requests);
	json_object_object_add(o, "rps", num(s->requests / iv, "%.1f"));
	json_object_object_add(o, "latency_us", latency_json(&s->latency));
	json_object_object_add(o, "ttfb_us", latency_json(&s->ttfb));
	add_u64(o, "bytes_in", s->bytes_in);
	add_u64(o, "bytes_out", s->bytes_out);
	json_object_object_add(o, "conns_open",
			       json_object_new_int64(s->conns_open > 0 ? s->conns_open : 0));
	add_u64(o, "spans_dropped", s->spans_dropped);
	json_object_object_add(o, "outbound", outbound_json(s));
	if (drops)
		json_object_object_add(o, "dropped", drops_json(drops));
	return o;
}

int output_json_line(FILE *f, struct json_object *obj)
{
	const char *s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
								    JSON_C_TO_STRING_NOSLASHESCAPE);
	int r = 0;

	if (!s || fprintf(f, "%s\n", s) < 0)
		r = -EIO;
	json_object_put(obj);
	return r;
}

void output_fmt_duration(char *buf, size_t len, double ns)
{
	/* Switch units on the rounded value: 999.6us shows as 1.00ms. */
	if (ns < 0)
		snprintf(buf, len, "-");
	else if (ns < 999.5e3)
		snprintf(buf, len, "%.0fus", ns / 1e3);
	else if (ns < 999.995e6)
		snprintf(buf, len, "%.2fms", ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", ns / 1e9);
}

void output_fmt_rate(char *buf, size_t len, double v)
{
	static const char units[] = " KMGT";
	int u = 0;

	while (v >= (u ? 999.95 : 999.5) && u < 4) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

void output_table_header(FILE *f)
{
	fprintf(f, "%-40s %8s %8s %8s %8s %8s %8s %6s\n", "CGROUP", "REQ/S", "P50",
		"P99", "P999", "IN/S", "OUT/S", "CONNS");
}

void output_table_row(FILE *f, const struct qos_sample *s, const char *path)
{
	double iv = s->interval_s > 0 ? s->interval_s : 1;
	char rps[16], p50[16], p99[16], p999[16], in[16], out[16], idbuf[40];
	size_t pl;

	output_fmt_rate(rps, sizeof(rps), s->requests / iv);
	output_fmt_duration(p50, sizeof(p50), hist_percentile(&s->latency, 0.50));
	output_fmt_duration(p99, sizeof(p99), hist_percentile(&s->latency, 0.99));
	output_fmt_duration(p999, sizeof(p999), hist_percentile(&s->latency, 0.999));
	output_fmt_rate(in, sizeof(in), s->bytes_in / iv);
	output_fmt_rate(out, sizeof(out), s->bytes_out / iv);
	if (!path) {
		snprintf(idbuf, sizeof(idbuf), "(removed, id %llu)",
			 (unsigned long long)s->cgroup_id);
		path = idbuf;
	}
	/* Keep the informative end of a long path. */
	pl = strlen(path);
	fprintf(f, "%s%-*s %8s %8s %8s %8s %8s %8s %6lld\n", pl > 40 ? "…" : "",
		pl > 40 ? 39 : 40, pl > 40 ? path + pl - 39 : path, rps, p50, p99, p999,
		in, out, (long long)(s->conns_open > 0 ? s->conns_open : 0));
}
