// SPDX-License-Identifier: GPL-2.0
/*
 * The exposition text of /metrics. Rendered once per tick by the control
 * loop; the HTTP thread only copies the result (metrics.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "controller/expo.h"

const double expo_latency_le_s[] = {
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05,	 0.1,	 0.25,	  0.5,	  1,	 2.5,	 5,	10,
};
const size_t expo_latency_n_le = sizeof(expo_latency_le_s) / sizeof(*expo_latency_le_s);

void expo_label_value(FILE *f, const char *v)
{
	fputc('"', f);
	for (; *v; v++) {
		if (*v == '\\')
			fputs("\\\\", f);
		else if (*v == '"')
			fputs("\\\"", f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static void value(FILE *f, double v)
{
	if (isnan(v))
		fputs(" NaN\n", f);
	else if (isinf(v))
		fputs(v > 0 ? " +Inf\n" : " -Inf\n", f);
	else
		fprintf(f, " %.17g\n", v);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{service="..",cgroup=".."[,extra]} */
static void svc_labels(FILE *f, const char *name, const struct report_service *s, const char *extra)
{
	fprintf(f, "%s{service=", name);
	expo_label_value(f, s->name);
	fputs(",cgroup=", f);
	expo_label_value(f, s->cgroup);
	if (extra)
		fprintf(f, ",%s", extra);
	fputc('}', f);
}

/* Services with a cgroup found at least once: those have per-cgroup series. */
static bool has_cgroup(const struct report_service *s)
{
	return s->active && *s->cgroup;
}

static void histograms(FILE *f, const struct report *r)
{
	uint64_t cum[32];
	double le_ns[32];
	char le[64];

	family(f, "tailwarden_request_duration_seconds", "histogram",
	       "Request latency inferred from kernel events (arrival to last reply byte), since start; a bucket holds the requests certainly under its bound, _sum counts each at its histogram bucket's midpoint.");
	for (size_t i = 0; i < expo_latency_n_le; i++)
		le_ns[i] = expo_latency_le_s[i] * 1e9;
	for (size_t i = 0; i < r->n_svc; i++) {
		const struct report_service *s = &r->svc[i];
		uint64_t total;

		if (!has_cgroup(s))
			continue;
		total = report_fold(&s->c.latency, le_ns, expo_latency_n_le, cum);
		for (size_t j = 0; j < expo_latency_n_le; j++) {
			snprintf(le, sizeof(le), "le=\"%g\"", expo_latency_le_s[j]);
			svc_labels(f, "tailwarden_request_duration_seconds_bucket", s, le);
			fprintf(f, " %llu\n", (unsigned long long)cum[j]);
		}
		svc_labels(f, "tailwarden_request_duration_seconds_bucket", s, "le=\"+Inf\"");
		fprintf(f, " %llu\n", (unsigned long long)total);
		svc_labels(f, "tailwarden_request_duration_seconds_sum", s, NULL);
		value(f, report_hist_sum_s(&s->c.latency));
		svc_labels(f, "tailwarden_request_duration_seconds_count", s, NULL);
		fprintf(f, " %llu\n", (unsigned long long)total);
	}
}

/*
 * The same for each phase of the requests, labelled phase=queued|service|
 * sending; a phase the mode does not see has no series (status says why).
 */
static void phase_histograms(FILE *f, const struct report *r)
{
	uint64_t cum[32];
	double le_ns[32];
	char lbl[96], le[160];

	family(f, "tailwarden_request_phase_duration_seconds", "histogram",
	       "Each phase of the requests since start: queued (arrival to the server's first read), service (to the end of the reply's first send), sending (to its last send); they add up to tailwarden_request_duration_seconds. Buckets as there.");
	for (size_t i = 0; i < expo_latency_n_le; i++)
		le_ns[i] = expo_latency_le_s[i] * 1e9;
	for (size_t i = 0; i < r->n_svc; i++) {
		const struct report_service *s = &r->svc[i];

		if (!has_cgroup(s))
			continue;
		for (unsigned p = 0; p < TW_PHASES; p++) {
			uint64_t total;

			if (!r->phase_seen[p])
				continue;
			snprintf(lbl, sizeof(lbl), "phase=\"%s\"", sensor_phase_name(p));
			total = report_fold(&s->c.phase[p], le_ns, expo_latency_n_le, cum);
			for (size_t j = 0; j < expo_latency_n_le; j++) {
				snprintf(le, sizeof(le), "%s,le=\"%g\"", lbl, expo_latency_le_s[j]);
				svc_labels(f, "tailwarden_request_phase_duration_seconds_bucket", s,
					   le);
				fprintf(f, " %llu\n", (unsigned long long)cum[j]);
			}
			snprintf(le, sizeof(le), "%s,le=\"+Inf\"", lbl);
			svc_labels(f, "tailwarden_request_phase_duration_seconds_bucket", s, le);
			fprintf(f, " %llu\n", (unsigned long long)total);
			svc_labels(f, "tailwarden_request_phase_duration_seconds_sum", s, lbl);
			value(f, report_hist_sum_s(&s->c.phase[p]));
			svc_labels(f, "tailwarden_request_phase_duration_seconds_count", s, lbl);
			fprintf(f, " %llu\n", (unsigned long long)total);
		}
	}
}

/* Per-cgroup counters and gauges of the contention sensor. */
static const struct {
	const char *name, *type, *help;
	size_t off;
} cont_metrics[] = {
#define C(n, t, field, h)                                        \
	{                                                        \
		n, t, h, offsetof(struct report_counters, field) \
	}
	C("tailwarden_cpu_runqueue_wait_seconds_total", "counter", runq_s,
	  "Time the cgroup's threads waited on a run queue."),
	C("tailwarden_cpu_usage_seconds_total", "counter", cpu_usage_s,
	  "CPU time the cgroup used."),
	C("tailwarden_cpu_throttled_seconds_total", "counter", cpu_throttled_s,
	  "Time the cgroup was throttled by its CPU quota."),
	C("tailwarden_io_read_bytes_total", "counter", io_read_bytes,
	  "Bytes read from block devices by the cgroup."),
	C("tailwarden_io_write_bytes_total", "counter", io_write_bytes,
	  "Bytes written to block devices by the cgroup."),
	C("tailwarden_futex_wait_seconds_total", "counter", futex_wait_s,
	  "Time the cgroup's threads waited in futex()."),
	C("tailwarden_lock_contention_seconds_total", "counter", lock_contention_s,
	  "Time the cgroup's threads waited on contended kernel locks."),
	C("tailwarden_page_faults_total", "counter", page_faults,
	  "User page faults of the cgroup."),
	C("tailwarden_memory_reclaim_seconds_total", "counter", reclaim_s,
	  "Time the cgroup spent in memory reclaim."),
	C("tailwarden_tcp_retransmits_total", "counter", tcp_retransmits,
	  "TCP retransmissions of the cgroup's sockets."),
#undef C
};

static void contention(FILE *f, const struct report *r)
{
	static const char *const res[] = { "cpu", "io", "memory" };

	for (size_t m = 0; m < sizeof(cont_metrics) / sizeof(*cont_metrics); m++) {
		family(f, cont_metrics[m].name, cont_metrics[m].type, cont_metrics[m].help);
		for (size_t i = 0; i < r->n_svc; i++) {
			const struct report_service *s = &r->svc[i];

			if (!has_cgroup(s) || !s->c.contention)
				continue;
			svc_labels(f, cont_metrics[m].name, s, NULL);
			value(f, *(const double *)((const char *)&s->c + cont_metrics[m].off));
		}
	}
	family(f, "tailwarden_pressure_some_ratio", "gauge",
	       "Share of time some of the cgroup's tasks stalled on a resource (PSI some avg10).");
	for (size_t i = 0; i < r->n_svc; i++) {
		const struct report_service *s = &r->svc[i];
		const double psi[] = { s->c.psi_cpu, s->c.psi_io, s->c.psi_memory };
		char extra[32];

		for (int k = 0; k < 3 && has_cgroup(s); k++) {
			if (!isfinite(psi[k]))
				continue;
			snprintf(extra, sizeof(extra), "resource=\"%s\"", res[k]);
			svc_labels(f, "tailwarden_pressure_some_ratio", s, extra);
			value(f, psi[k] / 100);
		}
	}
}

/*
 * TCP flow figures of the cgroup's sockets (contention.h, struct
 * contention_tcp): counters since start, closed sockets included, and
 * gauges of the connected sockets at the last tick. A series is left out
 * where its value is unknown (timeouts before 6.7, MSS and RTT with no
 * socket).
 */
#define TCP_NOW(f) offsetof(struct report_counters, tcp_now.f)
static const struct {
	const char *name, *type, *help;
	size_t off;
	double scale;
} tcp_metrics[] = {
	{ "tailwarden_tcp_retransmitted_segments_total", "counter",
	  "Segments the cgroup's TCP sockets retransmitted (total_retrans, as ss -ti's retrans:/N).",
	  offsetof(struct report_counters, tcp_retrans_segs), 1 },
	{ "tailwarden_tcp_fast_retransmitted_segments_total", "counter",
	  "Of those, segments retransmitted outside loss recovery (not after a timeout): fast retransmits and loss probes.",
	  offsetof(struct report_counters, tcp_fast_retrans_segs), 1 },
	{ "tailwarden_tcp_timeouts_total", "counter",
	  "Retransmission timeouts of the cgroup's TCP sockets (total_rto; absent before Linux 6.7).",
	  offsetof(struct report_counters, tcp_timeouts), 1 },
	{ "tailwarden_tcp_acked_bytes_total", "counter",
	  "Bytes the cgroup's TCP sockets sent and the peer acknowledged (bytes_acked).",
	  offsetof(struct report_counters, tcp_bytes_acked), 1 },
	{ "tailwarden_tcp_received_bytes_total", "counter",
	  "Bytes the cgroup's TCP sockets received (bytes_received).",
	  offsetof(struct report_counters, tcp_bytes_received), 1 },
	{ "tailwarden_tcp_sockets", "gauge",
	  "Connected TCP sockets of the cgroup at the last tick (what ss -t lists).",
	  TCP_NOW(sockets), 1 },
	{ "tailwarden_tcp_flight_segments", "gauge",
	  "Segments in flight, summed over the cgroup's sockets at the last tick.",
	  TCP_NOW(flight_sum), 1 },
	{ "tailwarden_tcp_flight_segments_max", "gauge",
	  "Segments in flight of the cgroup's busiest socket at the last tick.",
	  TCP_NOW(flight_max), 1 },
	{ "tailwarden_tcp_cwnd_segments", "gauge",
	  "Congestion windows, summed over the cgroup's sockets at the last tick.",
	  TCP_NOW(cwnd_sum), 1 },
	{ "tailwarden_tcp_cwnd_segments_max", "gauge",
	  "The largest congestion window of the cgroup's sockets at the last tick.",
	  TCP_NOW(cwnd_max), 1 },
	{ "tailwarden_tcp_receive_window_bytes", "gauge",
	  "Receive windows, summed over the cgroup's sockets at the last tick.",
	  TCP_NOW(rcv_wnd_sum), 1 },
	{ "tailwarden_tcp_receive_window_bytes_max", "gauge",
	  "The largest receive window of the cgroup's sockets at the last tick.",
	  TCP_NOW(rcv_wnd_max), 1 },
	{ "tailwarden_tcp_mss_bytes_min", "gauge",
	  "The smallest MSS of the cgroup's sockets at the last tick.", TCP_NOW(mss_min), 1 },
	{ "tailwarden_tcp_mss_bytes_max", "gauge",
	  "The largest MSS of the cgroup's sockets at the last tick.", TCP_NOW(mss_max), 1 },
	{ "tailwarden_tcp_srtt_seconds", "gauge",
	  "Mean smoothed RTT of the cgroup's sockets at the last tick.", TCP_NOW(srtt_mean_us),
	  1e-6 },
	{ "tailwarden_tcp_srtt_seconds_max", "gauge",
	  "The largest smoothed RTT of the cgroup's sockets at the last tick.",
	  TCP_NOW(srtt_max_us), 1e-6 },
	{ "tailwarden_tcp_send_queue_bytes", "gauge",
	  "Bytes written and not yet acknowledged, summed over the cgroup's sockets at the last tick.",
	  TCP_NOW(sndq_sum), 1 },
	{ "tailwarden_tcp_send_queue_bytes_max", "gauge",
	  "The longest send queue of the cgroup's sockets at the last tick, bytes.",
	  TCP_NOW(sndq_max), 1 },
};
#undef TCP_NOW

static void tcp_flows(FILE *f, const struct report *r)
{
	for (size_t m = 0; m < sizeof(tcp_metrics) / sizeof(*tcp_metrics); m++) {
		family(f, tcp_metrics[m].name, tcp_metrics[m].type, tcp_metrics[m].help);
		for (size_t i = 0; i < r->n_svc; i++) {
			const struct report_service *s = &r->svc[i];
			double v = *(const double *)((const char *)&s->c + tcp_metrics[m].off);

			if (!has_cgroup(s) || !s->c.tcp || !isfinite(v))
				continue;
			svc_labels(f, tcp_metrics[m].name, s, NULL);
			value(f, v * tcp_metrics[m].scale);
		}
	}
}

static void requests(FILE *f, const struct report *r)
{
	family(f, "tailwarden_requests_total", "counter",
	       "Requests served by the cgroup, inferred from kernel events.");
	for (size_t i = 0; i < r->n_svc; i++)
		if (has_cgroup(&r->svc[i])) {
			svc_labels(f, "tailwarden_requests_total", &r->svc[i], NULL);
			fprintf(f, " %llu\n", (unsigned long long)r->svc[i].c.requests);
		}
}

/* name{service=".."} v, for the services where v is a number. */
static void per_service(FILE *f, const struct report *r, const char *name, const char *type,
			const char *help, size_t off)
{
	family(f, name, type, help);
	for (size_t i = 0; i < r->n_svc; i++) {
		const struct report_service *s = &r->svc[i];
		double v = *(const double *)((const char *)s + off);

		if (!s->active || !isfinite(v))
			continue;
		fprintf(f, "%s{service=", name);
		expo_label_value(f, s->name);
		fputc('}', f);
		value(f, v);
	}
}

static void objectives(FILE *f, const struct report *r)
{
	per_service(
		f, r, "tailwarden_objective_seconds", "gauge",
		"A latency-critical service's objective: its percentile must stay at or under this.",
		offsetof(struct report_service, target_s));
	per_service(f, r, "tailwarden_objective_quantile", "gauge",
		    "The percentile of the objective (0.99 for p99).",
		    offsetof(struct report_service, percentile));
	per_service(f, r, "tailwarden_latency_seconds", "gauge",
		    "The objective's percentile over the service's last complete window.",
		    offsetof(struct report_service, pct_s));
	per_service(
		f, r, "tailwarden_slack_ratio", "gauge",
		"1 - latency/objective over the last window: below 0 the objective is violated.",
		offsetof(struct report_service, slack));
}

static void knobs(FILE *f, const struct report *r)
{
	static const char *const fam[][3] = {
		{ "tailwarden_knob_value", "gauge",
		  "A knob's value now (cpu.max as a fraction of one CPU, +Inf for no limit; cpufreq in Hz; sched.slice in seconds, 0 for the threads' own)." },
		{ "tailwarden_knob_ours", "gauge",
		  "1 when the knob holds a value tailwarden set." },
	};
	char extra[64];

	for (int m = 0; m < 2; m++) {
		family(f, fam[m][0], fam[m][1], fam[m][2]);
		for (size_t i = 0; i < r->n_svc; i++) {
			const struct report_service *s = &r->svc[i];

			for (int k = 0; k < KNOB_MAX && has_cgroup(s) && s->cgroup_id; k++) {
				const struct report_knob *kn = &s->knobs[k];
				double v = kn->value;

				if (!kn->shown || (m == 0 && isnan(v)))
					continue;
				if (k == KNOB_CPU_FREQ)
					v *= 1000; /* kHz -> Hz */
				if (k == KNOB_SCHED_SLICE)
					v /= 1e9; /* ns -> s */
				snprintf(extra, sizeof(extra), "knob=\"%s\"", action_knob_name(k));
				svc_labels(f, fam[m][0], s, extra);
				value(f, m == 0 ? v : kn->ours);
			}
		}
	}
}

static void actions(FILE *f, const struct report *r)
{
	family(f, "tailwarden_actions_total", "counter",
	       "Knob changes decided (applied, failed, or in dry-run only logged).");
	for (size_t i = 0; i < r->n_svc; i++) {
		const struct report_service *s = &r->svc[i];

		for (int k = 0; k < KNOB_MAX && s->active; k++) {
			if (!s->knobs[k].shown && !s->knobs[k].actions)
				continue;
			fputs("tailwarden_actions_total{service=", f);
			expo_label_value(f, s->name);
			fprintf(f, ",knob=\"%s\",dry_run=\"%s\"} %llu\n", action_knob_name(k),
				r->dry_run ? "true" : "false",
				(unsigned long long)s->knobs[k].actions);
		}
	}
}

static void tables(FILE *f, const struct report *r)
{
	const struct {
		const char *sensor, *reason;
		uint64_t v;
		bool on;
	} d[] = {
		{ "request", "cgroup_table_full", r->drop_req_cgroups, true },
		{ "request", "connection_table_full", r->drop_req_conns, true },
		{ "request", "span_invalid", r->drop_req_spans, true },
		{ "contention", "cgroup_table_full", r->drop_cont_cgroups, r->have_contention },
		{ "contention", "stamp_table_full", r->drop_cont_stamps, r->have_contention },
	};
	size_t nmaps = r->have_contention ? 2 : 1;

	family(f, "tailwarden_sensor_drops_total", "counter",
	       "Events a sensor could not count (a full table, an impossible span).");
	for (size_t i = 0; i < sizeof(d) / sizeof(*d); i++)
		if (d[i].on)
			fprintf(f,
				"tailwarden_sensor_drops_total{sensor=\"%s\",reason=\"%s\"} %llu\n",
				d[i].sensor, d[i].reason, (unsigned long long)d[i].v);
	family(f, "tailwarden_map_entries", "gauge", "Entries in a sensor's per-cgroup BPF map.");
	for (size_t i = 0; i < nmaps; i++)
		fprintf(f, "tailwarden_map_entries{map=\"%s\"} %zu\n", r->maps[i].name,
			r->maps[i].entries);
	family(f, "tailwarden_map_capacity", "gauge", "Capacity of a sensor's per-cgroup BPF map.");
	for (size_t i = 0; i < nmaps; i++)
		fprintf(f, "tailwarden_map_capacity{map=\"%s\"} %zu\n", r->maps[i].name,
			r->maps[i].capacity);
	family(f, "tailwarden_map_entries_freed_total", "counter",
	       "Map entries of removed cgroups freed.");
	fprintf(f, "tailwarden_map_entries_freed_total %llu\n", (unsigned long long)r->freed);
}

static void health(FILE *f, const struct report *r, const char *version)
{
	family(f, "tailwarden_build_info", "gauge", "The running tailwarden's version.");
	fputs("tailwarden_build_info{version=", f);
	expo_label_value(f, version);
	fputs("} 1\n", f);
	family(f, "tailwarden_dry_run", "gauge",
	       "1 when decisions are only logged, nothing written.");
	fprintf(f, "tailwarden_dry_run %d\n", r->dry_run);
	family(f, "tailwarden_period_seconds", "gauge", "The control loop's period.");
	fputs("tailwarden_period_seconds", f);
	value(f, r->period_s);
	family(f, "tailwarden_start_time_seconds", "gauge", "When the daemon started, unix time.");
	fputs("tailwarden_start_time_seconds", f);
	value(f, r->started);
	family(f, "tailwarden_tick_duration_seconds", "gauge",
	       "How long the last control tick took.");
	fputs("tailwarden_tick_duration_seconds", f);
	value(f, r->tick_duration_s);
	family(f, "tailwarden_last_tick_timestamp_seconds", "gauge",
	       "When the last control tick completed, unix time.");
	fputs("tailwarden_last_tick_timestamp_seconds", f);
	value(f, r->last_tick);
	family(f, "tailwarden_ticks_total", "counter", "Control ticks completed.");
	fprintf(f, "tailwarden_ticks_total %llu\n", (unsigned long long)r->ticks);
	family(f, "tailwarden_reload_rejected", "gauge",
	       "1 when the last reload (SIGHUP) was rejected and the old policies kept.");
	fprintf(f, "tailwarden_reload_rejected %d\n", *r->reload_error != '\0');
	family(f, "tailwarden_decision_log_lost_lines_total", "counter",
	       "Decision log lines lost because the file could not be written.");
	fprintf(f, "tailwarden_decision_log_lost_lines_total %llu\n",
		(unsigned long long)r->decision_log_lost);
}

/* One series per disk `run` reported on: does IOWeight= act on it (bfq)? */
static void disks(FILE *f, const struct report *r)
{
	if (!r->n_disks)
		return;
	family(f, "tailwarden_disk_io_weight_effective", "gauge",
	       "1 when the disk's I/O scheduler is bfq, the one I/O weight acts through; switched: tailwarden switched it while it runs.");
	for (size_t i = 0; i < r->n_disks; i++) {
		const struct report_disk *d = &r->disks[i];

		fputs("tailwarden_disk_io_weight_effective{device=", f);
		expo_label_value(f, d->dev);
		fputs(",scheduler=", f);
		expo_label_value(f, d->scheduler);
		fprintf(f, ",switched=\"%s\"} %d\n", *d->original ? "true" : "false",
			!strcmp(d->scheduler, "bfq"));
	}
}

int expo_render(const struct report *r, const char *version, char **out, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return -ENOMEM;
	health(f, r, version);
	requests(f, r);
	histograms(f, r);
	phase_histograms(f, r);
	contention(f, r);
	tcp_flows(f, r);
	objectives(f, r);
	knobs(f, r);
	actions(f, r);
	tables(f, r);
	disks(f, r);
	if (ferror(f) | fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}
