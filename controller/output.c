// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "common/log.h"
#include "controller/output.h"
#include "policies/value.h"

/* A double serialised with a fixed number of decimals. */
static struct json_object *num(double v, const char *fmt)
{
	char buf[64];

	snprintf(buf, sizeof(buf), fmt, v);
	return json_object_new_double_s(v, buf);
}

struct pct {
	const char *key;
	double q;
};

static const struct pct latency_pcts[] = {
	{ "p50", 0.50 },
	{ "p90", 0.90 },
	{ "p99", 0.99 },
	{ "p999", 0.999 },
};
static const struct pct signal_pcts[] = { { "p50", 0.50 }, { "p99", 0.99 } };

/* Percentiles (and the maximum) in µs of a ns histogram, or JSON null when it holds nothing. */
static struct json_object *pcts_json(const struct hist *h, const struct pct *p, size_t n,
				     bool with_max)
{
	struct json_object *o;

	if (!h->total)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++)
		json_object_object_add(o, p[i].key,
				       num(hist_percentile(h, p[i].q) / 1000.0, "%.1f"));
	if (with_max)
		json_object_object_add(o, "max", num(hist_max(h) / 1000.0, "%.1f"));
	return o;
}

/* p50, p90, p99, p999 and max of a request histogram. */
static struct json_object *latency_json(const struct hist *h)
{
	return pcts_json(h, latency_pcts, sizeof(latency_pcts) / sizeof(*latency_pcts), true);
}

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

/*
 * The requests' phases: per phase its percentiles and mean in µs, null
 * when the mode does not see it or nothing was served; span_mean_us, the
 * mean span, which the phases' means add up to.
 */
static struct json_object *phases_json(const struct qos_sample *s)
{
	struct json_object *o, *p;

	if (!s->requests)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	for (unsigned i = 0; i < TW_PHASES; i++) {
		char key[32];

		snprintf(key, sizeof(key), "%s_us", sensor_phase_name(i));
		p = s->phase_on[i] ? latency_json(&s->phase[i]) : NULL;
		if (p)
			json_object_object_add(p, "mean",
					       num(s->phase_ns[i] / 1e3 / s->requests, "%.1f"));
		json_object_object_add(o, key, p);
	}
	json_object_object_add(o, "span_mean_us", num(s->span_ns / 1e3 / s->requests, "%.1f"));
	return o;
}

static struct json_object *outbound_json(const struct qos_sample *s)
{
	struct json_object *o;

	if (!s->outbound_on)
		return NULL; /* JSON null: not measured (top --outbound) */
	o = json_object_new_object();
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

struct json_object *output_sample_json(const struct qos_sample *s, const char *path, double ts,
				       const struct sensor_drops *drops)
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
	/*
	 * No requests, no latency: a reply that began in an earlier window and
	 * kept sending moves its span to a later bucket in this one, which is
	 * not a request of this window.
	 */
	json_object_object_add(o, "latency_us", s->requests ? latency_json(&s->latency) : NULL);
	json_object_object_add(o, "ttfb_us", s->requests ? latency_json(&s->ttfb) : NULL);
	json_object_object_add(o, "phases", phases_json(s));
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

/* A figure, or null when it is unavailable (NAN). */
static struct json_object *maybe(double v, const char *fmt)
{
	return isnan(v) ? NULL : num(v, fmt);
}

/* {p50, p99} in µs of a contention histogram, or null when it holds nothing. */
static struct json_object *p50_p99_us(const struct hist *h)
{
	return pcts_json(h, signal_pcts, sizeof(signal_pcts) / sizeof(*signal_pcts), false);
}

static struct json_object *diagnosis_json(const struct diagnosis *d)
{
	struct json_object *o = json_object_new_object(), *ev = json_object_new_array();

	if (!o || !ev) {
		json_object_put(o);
		json_object_put(ev);
		return NULL;
	}
	json_object_object_add(o, "dominant",
			       json_object_new_string(diag_dominant_name(d->dominant)));
	json_object_object_add(o, "cause", json_object_new_string(diag_cause_name(d->cause)));
	for (size_t i = 0; i < d->n_evidence; i++) {
		const struct diag_evidence *e = &d->evidence[i];
		struct json_object *x = json_object_new_object();

		if (!x)
			break;
		json_object_object_add(x, "signal", json_object_new_string(e->signal));
		json_object_object_add(x, "value", num(e->value, "%.6g"));
		json_object_object_add(x, "baseline", num(e->baseline, "%.6g"));
		json_object_object_add(x, "ratio", num(e->ratio, "%.2f"));
		json_object_array_add(ev, x);
	}
	json_object_object_add(o, "evidence", ev);
	return o;
}

/* {sum, max} of a live figure. */
static struct json_object *sum_max(double sum, double max)
{
	struct json_object *o = json_object_new_object();

	if (o) {
		json_object_object_add(o, "sum", num(sum, "%.0f"));
		json_object_object_add(o, "max", num(max, "%.0f"));
	}
	return o;
}

/*
 * The TCP flow figures (contention.h, struct contention_tcp), or null when
 * they were not gathered: live ones of the connected sockets at the end of
 * the window, counters of the window.
 */
static struct json_object *tcp_json(const struct contention_sample *c)
{
	const struct contention_tcp *t = &c->tcp;
	struct json_object *o, *x;

	if (!c->tcp_on)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	json_object_object_add(o, "sockets", num(t->sockets, "%.0f"));
	json_object_object_add(o, "flight_segs", sum_max(t->flight_sum, t->flight_max));
	json_object_object_add(o, "cwnd_segs", sum_max(t->cwnd_sum, t->cwnd_max));
	json_object_object_add(o, "rcv_wnd_bytes", sum_max(t->rcv_wnd_sum, t->rcv_wnd_max));
	json_object_object_add(o, "send_queue_bytes", sum_max(t->sndq_sum, t->sndq_max));
	x = json_object_new_object();
	if (x) {
		json_object_object_add(x, "min", maybe(t->mss_min, "%.0f"));
		json_object_object_add(x, "max", maybe(t->mss_max, "%.0f"));
	}
	json_object_object_add(o, "mss_bytes", x);
	x = json_object_new_object();
	if (x) {
		json_object_object_add(x, "mean", maybe(t->srtt_mean_us, "%.1f"));
		json_object_object_add(x, "max", maybe(t->srtt_max_us, "%.0f"));
	}
	json_object_object_add(o, "srtt_us", x);
	json_object_object_add(o, "retrans_segs", num(t->retrans_segs, "%.0f"));
	json_object_object_add(o, "fast_retrans_segs", num(t->fast_retrans_segs, "%.0f"));
	json_object_object_add(o, "timeouts", maybe(t->timeouts, "%.0f"));
	json_object_object_add(o, "bytes_acked", num(t->bytes_acked, "%.0f"));
	json_object_object_add(o, "bytes_received", num(t->bytes_received, "%.0f"));
	return o;
}

void output_contention_json(struct json_object *o, const struct contention_sample *c,
			    const struct diagnosis *d)
{
	static const struct contention_sample none = {
		.runq_delay_s = NAN,
		.cpu_usage_s = NAN,
		.cpu_throttled_s = NAN,
		.cpu_throttled_periods = NAN,
		.io_read_bytes = NAN,
		.io_write_bytes = NAN,
		.vfs_read_bytes = NAN,
		.vfs_write_bytes = NAN,
		.futex_wait_s = NAN,
		.lock_contention_s = NAN,
		.page_faults = NAN,
		.reclaim_s = NAN,
		.tcp_retransmits = NAN,
		.tcp_srtt_us = NAN,
		.psi_cpu_some = NAN,
		.psi_io_some = NAN,
		.psi_memory_some = NAN,
	};
	struct json_object *psi;

	if (!c)
		c = &none;
	json_object_object_add(o, "runq_delay_us", p50_p99_us(&c->runq));
	json_object_object_add(o, "runq_delay_s", maybe(c->runq_delay_s, "%.6f"));
	json_object_object_add(o, "cpu_usage_s", maybe(c->cpu_usage_s, "%.6f"));
	json_object_object_add(o, "cpu_throttled_s", maybe(c->cpu_throttled_s, "%.6f"));
	json_object_object_add(o, "cpu_throttled_periods", maybe(c->cpu_throttled_periods, "%.0f"));
	json_object_object_add(o, "io_read_bytes", maybe(c->io_read_bytes, "%.0f"));
	json_object_object_add(o, "io_write_bytes", maybe(c->io_write_bytes, "%.0f"));
	json_object_object_add(o, "io_latency_us", p50_p99_us(&c->io));
	json_object_object_add(o, "vfs_read_bytes", maybe(c->vfs_read_bytes, "%.0f"));
	json_object_object_add(o, "vfs_write_bytes", maybe(c->vfs_write_bytes, "%.0f"));
	json_object_object_add(o, "futex_wait_s", maybe(c->futex_wait_s, "%.6f"));
	json_object_object_add(o, "lock_contention_s", maybe(c->lock_contention_s, "%.6f"));
	json_object_object_add(o, "page_faults", maybe(c->page_faults, "%.0f"));
	json_object_object_add(o, "reclaim_s", maybe(c->reclaim_s, "%.6f"));
	json_object_object_add(o, "tcp_retransmits", maybe(c->tcp_retransmits, "%.0f"));
	json_object_object_add(o, "tcp_srtt_us", maybe(c->tcp_srtt_us, "%.1f"));
	json_object_object_add(o, "tcp", tcp_json(c));
	psi = json_object_new_object();
	if (psi) {
		json_object_object_add(psi, "cpu_some", maybe(c->psi_cpu_some, "%.2f"));
		json_object_object_add(psi, "io_some", maybe(c->psi_io_some, "%.2f"));
		json_object_object_add(psi, "memory_some", maybe(c->psi_memory_some, "%.2f"));
	}
	json_object_object_add(o, "psi", psi);
	json_object_object_add(o, "diagnosis", d ? diagnosis_json(d) : NULL);
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
	if (ns < 0)
		snprintf(buf, len, "-");
	else
		value_format_ns(buf, len, ns, VALUE_NS_DECIMALS, 2);
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
	fprintf(f, "%-40s %8s %8s %8s %8s %8s %8s %8s %8s %8s %6s %8s %5s %8s %7s  %s\n", "CGROUP",
		"REQ/S", "P50", "P99", "P999", "QUEUE99", "SERVE99", "SEND99", "IN/S", "OUT/S",
		"CONNS", "RUNQ99", "THR%", "IO99", "IO MB/s", "DIAG");
}

/* The contention columns: run-queue p99, throttled %, I/O p99 and MB/s, verdict. */
static void contention_cols(FILE *f, const struct contention_sample *c, const struct diagnosis *d,
			    double iv)
{
	char rq[16] = "-", thr[16] = "-", io[16] = "-", mbs[16] = "-", diag[32] = "-";
	double bytes;

	if (c) {
		output_fmt_duration(rq, sizeof(rq),
				    c->runq.total ? hist_percentile(&c->runq, 0.99) : -1);
		if (!isnan(c->cpu_throttled_s))
			snprintf(thr, sizeof(thr), "%.0f", 100 * c->cpu_throttled_s / iv);
		output_fmt_duration(io, sizeof(io),
				    c->io.total ? hist_percentile(&c->io, 0.99) : -1);
		bytes = (isnan(c->io_read_bytes) ? 0 : c->io_read_bytes) +
			(isnan(c->io_write_bytes) ? 0 : c->io_write_bytes);
		if (!isnan(c->io_read_bytes) || !isnan(c->io_write_bytes))
			snprintf(mbs, sizeof(mbs), "%.1f", bytes / iv / 1e6);
	}
	if (d && d->dominant != DIAG_NONE)
		snprintf(diag, sizeof(diag), "%s/%s", diag_dominant_name(d->dominant),
			 diag_cause_name(d->cause));
	else if (d && d->cause == DIAG_CAUSE_LOAD)
		snprintf(diag, sizeof(diag), "load");
	fprintf(f, " %8s %5s %8s %7s  %s", rq, thr, io, mbs, diag);
}

void output_table_row(FILE *f, const struct qos_sample *s, const char *path,
		      const struct contention_sample *c, const struct diagnosis *d)
{
	double iv = s->interval_s > 0 ? s->interval_s : 1;
	char rps[16], p50[16], p99[16], p999[16], in[16], out[16], idbuf[40], shown[4096];
	char ph[TW_PHASES][16];
	size_t pl;

	/* A phase's p99, or - where the mode does not see it or nothing was served. */
	for (unsigned i = 0; i < TW_PHASES; i++)
		output_fmt_duration(
			ph[i], sizeof(ph[i]),
			s->requests && s->phase_on[i] ? hist_percentile(&s->phase[i], 0.99) : -1);
	output_fmt_rate(rps, sizeof(rps), s->requests / iv);
	/* No requests: "-", even if a reply of an earlier window moved on (output_sample_json). */
	output_fmt_duration(p50, sizeof(p50),
			    s->requests ? hist_percentile(&s->latency, 0.50) : -1);
	output_fmt_duration(p99, sizeof(p99),
			    s->requests ? hist_percentile(&s->latency, 0.99) : -1);
	output_fmt_duration(p999, sizeof(p999),
			    s->requests ? hist_percentile(&s->latency, 0.999) : -1);
	output_fmt_rate(in, sizeof(in), s->bytes_in / iv);
	output_fmt_rate(out, sizeof(out), s->bytes_out / iv);
	if (!path) {
		snprintf(idbuf, sizeof(idbuf), "(removed, id %llu)",
			 (unsigned long long)s->cgroup_id);
		path = idbuf;
	}
	/* A cgroup's name may hold any byte but '/': no escape sequences to the terminal. */
	path = log_printable(path, shown, sizeof(shown));
	/* Keep the informative end of a long path. */
	pl = strlen(path);
	fprintf(f, "%s%-*s %8s %8s %8s %8s %8s %8s %8s %8s %8s %6lld", pl > 40 ? "…" : "",
		pl > 40 ? 39 : 40, pl > 40 ? path + pl - 39 : path, rps, p50, p99, p999,
		ph[TW_PHASE_QUEUED], ph[TW_PHASE_SERVICE], ph[TW_PHASE_SENDING], in, out,
		(long long)(s->conns_open > 0 ? s->conns_open : 0));
	contention_cols(f, c, d, iv);
	fputc('\n', f);
}
