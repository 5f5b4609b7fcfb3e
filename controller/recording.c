// SPDX-License-Identifier: GPL-2.0
/* Recordings: gzip-compressed JSON Lines of ticks (recording.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "controller/output.h"
#include "controller/recording.h"
#include "sensing/hist.h"

#define REC_CHUNK 65536
/* A longer line is not one we wrote: refuse it rather than grow without end. */
#define REC_MAX_LINE (256u << 20)

/* ---- encoding ---- */

/* A double that reads back bit for bit; null for NAN, "max" for infinity. */
static struct json_object *exact(double v)
{
	char buf[40];

	if (isnan(v))
		return NULL;
	if (isinf(v))
		return json_object_new_string(v > 0 ? "max" : "-max");
	snprintf(buf, sizeof(buf), "%.17g", v);
	return json_object_new_double_s(v, buf);
}

static struct json_object *hist_json(const struct hist *h)
{
	struct json_object *a = json_object_new_array();

	for (unsigned b = 0; a && b < HIST_BUCKETS; b++) {
		struct json_object *p;

		if (!h->count[b])
			continue;
		p = json_object_new_array();
		json_object_array_add(p, json_object_new_int64(b));
		json_object_array_add(p, json_object_new_uint64(h->count[b]));
		json_object_array_add(a, p);
	}
	return a;
}

#define QOS_U64(f)                                 \
	{                                          \
#f, offsetof(struct qos_sample, f) \
	}
static const struct {
	const char *name;
	size_t off;
} qos_u64[] = {
	QOS_U64(requests),	QOS_U64(bytes_in),     QOS_U64(bytes_out),
	QOS_U64(out_requests),	QOS_U64(out_bytes_in), QOS_U64(out_bytes_out),
	QOS_U64(spans_dropped),
};

#define CONT_D(f)                                         \
	{                                                 \
#f, offsetof(struct contention_sample, f) \
	}
static const struct {
	const char *name;
	size_t off;
} cont_double[] = {
	CONT_D(interval_s),	 CONT_D(runq_delay_s),		CONT_D(cpu_usage_s),
	CONT_D(cpu_throttled_s), CONT_D(cpu_throttled_periods), CONT_D(io_read_bytes),
	CONT_D(io_write_bytes),	 CONT_D(vfs_read_bytes),	CONT_D(vfs_write_bytes),
	CONT_D(futex_wait_s),	 CONT_D(lock_contention_s),	CONT_D(page_faults),
	CONT_D(reclaim_s),	 CONT_D(tcp_retransmits),	CONT_D(tcp_srtt_us),
	CONT_D(psi_cpu_some),	 CONT_D(psi_io_some),		CONT_D(psi_memory_some),
};

#define TCP_D(f)                                       \
	{                                              \
#f, offsetof(struct contention_tcp, f) \
	}
static const struct {
	const char *name;
	size_t off;
} tcp_double[] = {
	TCP_D(sockets),	    TCP_D(flight_sum),	   TCP_D(flight_max),	     TCP_D(cwnd_sum),
	TCP_D(cwnd_max),    TCP_D(rcv_wnd_sum),	   TCP_D(rcv_wnd_max),	     TCP_D(mss_min),
	TCP_D(mss_max),	    TCP_D(srtt_mean_us),   TCP_D(srtt_max_us),	     TCP_D(sndq_sum),
	TCP_D(sndq_max),    TCP_D(retrans_segs),   TCP_D(fast_retrans_segs), TCP_D(timeouts),
	TCP_D(bytes_acked), TCP_D(bytes_received),
};
#define N(a) (sizeof(a) / sizeof(*(a)))

/*
 * The TCP flow figures, each exact (null: unknown), or null when they were
 * not gathered. Recordings made before them have no "tcp": not gathered.
 */
static struct json_object *tcp_raw_json(const struct contention_sample *c)
{
	struct json_object *o;

	if (!c->tcp_on)
		return NULL;
	o = json_object_new_object();
	for (size_t i = 0; o && i < N(tcp_double); i++)
		json_object_object_add(
			o, tcp_double[i].name,
			exact(*(const double *)((const char *)&c->tcp + tcp_double[i].off)));
	return o;
}

/*
 * The phases: span_ns, and per phase its sum (ns) and histogram, or null
 * where the mode does not see it. Recordings made before the phases have
 * no "phases": read back as unseen.
 */
static struct json_object *phases_raw_json(const struct qos_sample *q)
{
	struct json_object *o = json_object_new_object(), *p;

	if (!o)
		return NULL;
	json_object_object_add(o, "span_ns", json_object_new_uint64(q->span_ns));
	for (unsigned i = 0; i < TW_PHASES; i++) {
		p = q->phase_on[i] ? json_object_new_object() : NULL;
		if (p) {
			json_object_object_add(p, "ns", json_object_new_uint64(q->phase_ns[i]));
			json_object_object_add(p, "hist", hist_json(&q->phase[i]));
		}
		json_object_object_add(o, sensor_phase_name(i), p);
	}
	return o;
}

static struct json_object *raw_json(const struct qos_sample *q, const struct contention_sample *c)
{
	struct json_object *o = json_object_new_object(), *co;

	if (!o)
		return NULL;
	json_object_object_add(o, "interval_s", exact(q->interval_s));
	for (size_t i = 0; i < N(qos_u64); i++)
		json_object_object_add(o, qos_u64[i].name,
				       json_object_new_uint64(*(const uint64_t *)((const char *)q +
										  qos_u64[i].off)));
	json_object_object_add(o, "conns_open", json_object_new_int64(q->conns_open));
	json_object_object_add(o, "outbound_on", json_object_new_boolean(q->outbound_on));
	json_object_object_add(o, "latency", hist_json(&q->latency));
	json_object_object_add(o, "ttfb", hist_json(&q->ttfb));
	json_object_object_add(o, "outbound", hist_json(&q->outbound));
	json_object_object_add(o, "phases", phases_raw_json(q));
	if (!c) {
		json_object_object_add(o, "contention", NULL);
		return o;
	}
	co = json_object_new_object();
	for (size_t i = 0; co && i < N(cont_double); i++)
		json_object_object_add(
			co, cont_double[i].name,
			exact(*(const double *)((const char *)c + cont_double[i].off)));
	if (co) {
		json_object_object_add(co, "runq", hist_json(&c->runq));
		json_object_object_add(co, "io", hist_json(&c->io));
		json_object_object_add(co, "tcp", tcp_raw_json(c));
	}
	json_object_object_add(o, "contention", co);
	return o;
}

struct json_object *rec_cgroup_json(const struct qos_sample *q, const char *path, double ts,
				    const struct contention_sample *c, const double knob[KNOB_MAX])
{
	struct json_object *o = output_sample_json(q, path, ts, NULL), *k;

	if (!o)
		return NULL;
	output_contention_json(o, c, NULL);
	json_object_object_add(o, "raw", raw_json(q, c));
	k = json_object_new_object();
	for (int i = 0; k && i < KNOB_MAX; i++)
		json_object_object_add(k, action_knob_name(i), exact(knob[i]));
	json_object_object_add(o, "knobs", k);
	return o;
}

struct json_object *rec_header_json(const struct rec_header *h)
{
	struct json_object *o = json_object_new_object();
	char buf[40];

	if (!o)
		return NULL;
	json_object_object_add(o, "tailwarden_recording", json_object_new_int(REC_FORMAT));
	json_object_object_add(o, "version", json_object_new_string(h->version));
	json_object_object_add(o, "host", json_object_new_string(h->host));
	json_object_object_add(o, "kernel", json_object_new_string(h->kernel));
	json_object_object_add(o, "period_ns", json_object_new_uint64(h->period_ns));
	json_object_object_add(o, "sensing_mode", json_object_new_string(h->sensing_mode));
	json_object_object_add(o, "contention", json_object_new_boolean(h->contention));
	snprintf(buf, sizeof(buf), "%.3f", h->started);
	json_object_object_add(o, "started", json_object_new_double_s(h->started, buf));
	json_object_object_add(o, "part", json_object_new_int(h->part));
	return o;
}

struct json_object *rec_tick_json(uint64_t index, uint64_t mono_us, double ts, double interval_s,
				  struct json_object *cgroups)
{
	struct json_object *o = json_object_new_object();
	char buf[40];

	if (!o) {
		json_object_put(cgroups);
		return NULL;
	}
	json_object_object_add(o, "tick", json_object_new_uint64(index));
	json_object_object_add(o, "mono_us", json_object_new_uint64(mono_us));
	snprintf(buf, sizeof(buf), "%.6f", ts);
	json_object_object_add(o, "ts", json_object_new_double_s(ts, buf));
	json_object_object_add(o, "interval_s", exact(interval_s));
	json_object_object_add(o, "cgroups", cgroups);
	return o;
}

/* ---- writing ---- */

struct rec_writer {
	char *path;
	gzFile gz;
	int fd;
	uint64_t max_size;
	struct rec_header h;
	unsigned rotations;
};

static int writer_begin(struct rec_writer *w)
{
	int fd = open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	w->gz = gzdopen(fd, "wb6");
	if (!w->gz) {
		close(fd);
		return -ENOMEM;
	}
	w->fd = fd;
	return rec_writer_line(w, rec_header_json(&w->h));
}

int rec_writer_open(const char *path, uint64_t max_size, const struct rec_header *h,
		    struct rec_writer **out)
{
	struct rec_writer *w = calloc(1, sizeof(*w));
	int r;

	if (!w || !(w->path = strdup(path))) {
		free(w);
		return -ENOMEM;
	}
	w->max_size = max_size;
	w->h = *h;
	w->h.part = 1;
	r = writer_begin(w);
	if (r) {
		rec_writer_close(w);
		return r;
	}
	*out = w;
	return 0;
}

static int writer_end(struct rec_writer *w)
{
	int r;

	if (!w->gz)
		return 0;
	r = gzclose(w->gz); /* closes fd */
	w->gz = NULL;
	return r == Z_OK ? 0 : r == Z_ERRNO ? -errno : -EIO;
}

static int rotate(struct rec_writer *w)
{
	char old[4096];
	int r;

	if (snprintf(old, sizeof(old), "%s.1", w->path) >= (int)sizeof(old))
		return -ENAMETOOLONG;
	r = writer_end(w);
	if (r)
		return r;
	if (rename(w->path, old))
		return -errno;
	w->rotations++;
	w->h.part++;
	return writer_begin(w);
}

int rec_writer_line(struct rec_writer *w, struct json_object *obj)
{
	const char *s;
	struct stat st;
	size_t n;

	if (!obj)
		return -ENOMEM;
	s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	n = strlen(s);
	errno = 0;
	if (gzwrite(w->gz, s, n) != (int)n || gzputc(w->gz, '\n') != '\n' ||
	    gzflush(w->gz, Z_SYNC_FLUSH) != Z_OK) {
		int e = errno;

		json_object_put(obj);
		return e ? -e : -EIO;
	}
	json_object_put(obj);
	if (!w->max_size || fstat(w->fd, &st))
		return 0;
	return (uint64_t)st.st_size >= w->max_size ? rotate(w) : 0;
}

int rec_writer_close(struct rec_writer *w)
{
	int r;

	if (!w)
		return 0;
	r = writer_end(w);
	free(w->path);
	free(w);
	return r;
}

unsigned rec_writer_rotations(const struct rec_writer *w)
{
	return w->rotations;
}

/* ---- decoding ---- */

static int get_exact(struct json_object *o, const char *key, double *v)
{
	struct json_object *x;

	if (!json_object_object_get_ex(o, key, &x))
		return -EINVAL;
	if (!x) {
		*v = NAN;
		return 0;
	}
	if (json_object_is_type(x, json_type_string)) {
		if (!strcmp(json_object_get_string(x), "max"))
			*v = INFINITY;
		else if (!strcmp(json_object_get_string(x), "-max"))
			*v = -INFINITY;
		else
			return -EINVAL;
		return 0;
	}
	if (!json_object_is_type(x, json_type_double) && !json_object_is_type(x, json_type_int))
		return -EINVAL;
	*v = json_object_get_double(x);
	return 0;
}

static int get_u64(struct json_object *o, const char *key, uint64_t *v)
{
	struct json_object *x;

	if (!json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_int))
		return -EINVAL;
	errno = 0;
	*v = json_object_get_uint64(x);
	return errno ? -EINVAL : 0;
}

static int get_hist(struct json_object *o, const char *key, struct hist *h)
{
	struct json_object *a;

	memset(h, 0, sizeof(*h));
	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array))
		return -EINVAL;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *p = json_object_array_get_idx(a, i), *b, *c;
		int64_t bucket;

		if (!json_object_is_type(p, json_type_array) || json_object_array_length(p) != 2)
			return -EINVAL;
		b = json_object_array_get_idx(p, 0);
		c = json_object_array_get_idx(p, 1);
		if (!json_object_is_type(b, json_type_int) ||
		    !json_object_is_type(c, json_type_int))
			return -EINVAL;
		bucket = json_object_get_int64(b);
		if (bucket < 0 || bucket >= HIST_BUCKETS)
			return -EINVAL;
		h->count[bucket] += json_object_get_uint64(c);
		h->total += json_object_get_uint64(c);
	}
	return 0;
}

/* raw.phases, if there (older recordings have none: every phase unseen). */
static int parse_phases(struct json_object *raw, struct qos_sample *q, const char **why)
{
	struct json_object *o, *p;

	*why = "raw.phases";
	if (!json_object_object_get_ex(raw, "phases", &o))
		return 0;
	if (!json_object_is_type(o, json_type_object) || get_u64(o, "span_ns", &q->span_ns))
		return -EINVAL;
	for (unsigned i = 0; i < TW_PHASES; i++) {
		if (!json_object_object_get_ex(o, sensor_phase_name(i), &p))
			return -EINVAL;
		if (!p)
			continue; /* not seen in that mode */
		if (!json_object_is_type(p, json_type_object) ||
		    get_u64(p, "ns", &q->phase_ns[i]) || get_hist(p, "hist", &q->phase[i]))
			return -EINVAL;
		q->phase_on[i] = true;
	}
	return 0;
}

/* raw.contention.tcp, if there (older recordings have none: not gathered). */
static int parse_tcp(struct json_object *co, struct contention_sample *c, const char **why)
{
	struct json_object *o;

	*why = "raw.contention.tcp";
	if (!json_object_object_get_ex(co, "tcp", &o) || !o)
		return 0;
	if (!json_object_is_type(o, json_type_object))
		return -EINVAL;
	for (size_t i = 0; i < N(tcp_double); i++) {
		*why = tcp_double[i].name;
		if (get_exact(o, tcp_double[i].name,
			      (double *)((char *)&c->tcp + tcp_double[i].off)))
			return -EINVAL;
	}
	c->tcp_on = true;
	return 0;
}

/* Sets *why to the key at fault. */
static int parse_cgroup(struct json_object *o, struct rec_cgroup *g, const char **why)
{
	struct json_object *raw, *c, *k, *x;
	int64_t conns;

	memset(g, 0, sizeof(*g));
	*why = "cgroup_id";
	if (!json_object_is_type(o, json_type_object) || get_u64(o, "cgroup_id", &g->id))
		return -EINVAL;
	*why = "cgroup";
	if (!json_object_object_get_ex(o, "cgroup", &x) ||
	    !json_object_is_type(x, json_type_string))
		return -EINVAL;
	g->path = strdup(json_object_get_string(x));
	if (!g->path)
		return -ENOMEM;
	*why = "raw";
	if (!json_object_object_get_ex(o, "raw", &raw) ||
	    !json_object_is_type(raw, json_type_object))
		return -EINVAL;
	g->q.cgroup_id = g->id;
	*why = "raw.interval_s";
	if (get_exact(raw, "interval_s", &g->q.interval_s))
		return -EINVAL;
	for (size_t i = 0; i < N(qos_u64); i++) {
		*why = qos_u64[i].name;
		if (get_u64(raw, qos_u64[i].name, (uint64_t *)((char *)&g->q + qos_u64[i].off)))
			return -EINVAL;
	}
	*why = "raw.conns_open";
	if (!json_object_object_get_ex(raw, "conns_open", &x) ||
	    !json_object_is_type(x, json_type_int))
		return -EINVAL;
	conns = json_object_get_int64(x);
	g->q.conns_open = conns;
	*why = "raw.outbound_on";
	if (!json_object_object_get_ex(raw, "outbound_on", &x) ||
	    !json_object_is_type(x, json_type_boolean))
		return -EINVAL;
	g->q.outbound_on = json_object_get_boolean(x);
	*why = "raw.latency";
	if (get_hist(raw, "latency", &g->q.latency))
		return -EINVAL;
	*why = "raw.ttfb";
	if (get_hist(raw, "ttfb", &g->q.ttfb))
		return -EINVAL;
	*why = "raw.outbound";
	if (get_hist(raw, "outbound", &g->q.outbound))
		return -EINVAL;
	if (parse_phases(raw, &g->q, why))
		return -EINVAL;
	*why = "raw.contention";
	if (!json_object_object_get_ex(raw, "contention", &c))
		return -EINVAL;
	if (c) {
		if (!json_object_is_type(c, json_type_object))
			return -EINVAL;
		g->have_c = true;
		g->c.cgroup_id = g->id;
		for (size_t i = 0; i < N(cont_double); i++) {
			*why = cont_double[i].name;
			if (get_exact(c, cont_double[i].name,
				      (double *)((char *)&g->c + cont_double[i].off)))
				return -EINVAL;
		}
		*why = "raw.contention.runq";
		if (get_hist(c, "runq", &g->c.runq))
			return -EINVAL;
		*why = "raw.contention.io";
		if (get_hist(c, "io", &g->c.io))
			return -EINVAL;
		if (parse_tcp(c, &g->c, why))
			return -EINVAL;
	}
	*why = "knobs";
	if (!json_object_object_get_ex(o, "knobs", &k) || !json_object_is_type(k, json_type_object))
		return -EINVAL;
	for (int i = 0; i < KNOB_MAX; i++) {
		*why = action_knob_name(i);
		/* Recordings made before Slice= have no sched.slice: unavailable. */
		if (i == KNOB_SCHED_SLICE &&
		    !json_object_object_get_ex(k, action_knob_name(i), NULL)) {
			g->knob[i] = NAN;
			continue;
		}
		if (get_exact(k, action_knob_name(i), &g->knob[i]))
			return -EINVAL;
	}
	return 0;
}

void rec_tick_clear(struct rec_tick *t)
{
	for (size_t i = 0; t->v && i < t->n; i++)
		free(t->v[i].path);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

int rec_tick_parse(struct json_object *o, struct rec_tick *t, const char **why)
{
	struct json_object *a;
	size_t n;
	int r;

	memset(t, 0, sizeof(*t));
	*why = "not an object";
	if (!json_object_is_type(o, json_type_object))
		return -EINVAL;
	*why = "tick";
	if (get_u64(o, "tick", &t->index))
		return -EINVAL;
	*why = "mono_us";
	if (get_u64(o, "mono_us", &t->mono_us))
		return -EINVAL;
	*why = "ts";
	if (get_exact(o, "ts", &t->ts) || !isfinite(t->ts))
		return -EINVAL;
	*why = "interval_s";
	if (get_exact(o, "interval_s", &t->interval_s) || !(t->interval_s >= 0))
		return -EINVAL;
	*why = "cgroups";
	if (!json_object_object_get_ex(o, "cgroups", &a) ||
	    !json_object_is_type(a, json_type_array))
		return -EINVAL;
	n = json_object_array_length(a);
	t->v = calloc(n ? n : 1, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		r = parse_cgroup(json_object_array_get_idx(a, i), &t->v[i], why);
		t->n = i + 1;
		if (r) {
			rec_tick_clear(t);
			return r;
		}
	}
	return 0;
}

/* ---- reading ---- */

struct rec_reader {
	char *path;
	FILE *f;
	z_stream zs;
	bool zinit, in_member, done;
	bool bad; /* corrupt data at bad_at: reported after what came before */
	uint64_t bad_at;
	char bad_msg[128];
	unsigned char in[REC_CHUNK];
	uint64_t read_total; /* compressed bytes read from the file */
	char *buf;	     /* decompressed, not yet consumed: buf[pos..len) */
	size_t pos, len, cap;
	uint64_t ubase; /* uncompressed offset of buf[0] */
	unsigned line;	/* lines returned so far */
	uint64_t period_ns;
	uint64_t last_tick;
	bool have_tick;
};

static int fail(char *err, size_t len, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return r;
}

/* Decompress more: 1, 0 at the end of the last gzip member, -errno with err. */
static int fill(struct rec_reader *r, char *err, size_t errlen)
{
	size_t before;

	if (r->done)
		return 0;
	if (r->bad && !r->line && !r->len && r->bad_at <= 10)
		return fail(err, errlen, -EBADMSG,
			    "%s: byte %llu: not gzip data (%s): not a recording", r->path,
			    (unsigned long long)r->bad_at, r->bad_msg);
	if (r->bad)
		return fail(err, errlen, -EBADMSG,
			    "%s: byte %llu: corrupt gzip data (%s); %u line(s) read before it",
			    r->path, (unsigned long long)r->bad_at, r->bad_msg, r->line);
	if (r->cap - r->len < REC_CHUNK) {
		size_t cap = r->cap ? r->cap * 2 : 4 * REC_CHUNK;
		char *b;

		if (cap > REC_MAX_LINE + 2 * REC_CHUNK)
			return fail(err, errlen, -EFBIG,
				    "%s:%u: byte %llu: a line longer than %u MiB: not a recording",
				    r->path, r->line + 1, (unsigned long long)(r->ubase + r->pos),
				    REC_MAX_LINE >> 20);
		b = realloc(r->buf, cap);
		if (!b)
			return fail(err, errlen, -ENOMEM, "%s: out of memory", r->path);
		r->buf = b;
		r->cap = cap;
	}
	before = r->len;
	r->zs.next_out = (Bytef *)r->buf + r->len;
	r->zs.avail_out = r->cap - r->len;
	while (r->zs.avail_out == r->cap - before) {
		int z;

		if (!r->zs.avail_in) {
			size_t n = fread(r->in, 1, sizeof(r->in), r->f);

			if (!n && ferror(r->f))
				return fail(err, errlen, -EIO, "%s: byte %llu: Failed to read: %s",
					    r->path, (unsigned long long)r->read_total,
					    strerror(errno));
			if (!n && !r->read_total)
				return fail(err, errlen, -EINVAL,
					    "%s: byte 0: the file is empty: not a recording",
					    r->path);
			if (!n && r->in_member)
				return fail(
					err, errlen, -EPIPE,
					"%s: byte %llu: the gzip stream ends early: the recording is truncated (or still being written); %u line(s) read",
					r->path, (unsigned long long)r->read_total, r->line);
			if (!n) {
				r->done = true;
				break;
			}
			r->read_total += n;
			r->zs.next_in = r->in;
			r->zs.avail_in = n;
		}
		if (!r->in_member) {
			inflateReset(&r->zs);
			r->in_member = true;
		}
		z = inflate(&r->zs, Z_NO_FLUSH);
		if (z == Z_STREAM_END) {
			r->in_member = false;
		} else if (z != Z_OK && z != Z_BUF_ERROR) {
			/* What came out before the bad byte is read first. */
			r->bad = true;
			r->bad_at = r->read_total - r->zs.avail_in;
			snprintf(r->bad_msg, sizeof(r->bad_msg), "%s",
				 r->zs.msg ? r->zs.msg : "inflate failed");
			break;
		}
	}
	r->len = r->cap - r->zs.avail_out;
	if (r->len > before)
		return 1;
	return r->bad ? fill(r, err, errlen) : 0;
}

/* The next line (NUL-terminated, in place): 1, 0 at the end, -errno with err. */
static int next_line(struct rec_reader *r, char **line, uint64_t *off, char *err, size_t errlen)
{
	for (;;) {
		/* buf is NULL before the first fill: no memchr/memmove on it. */
		char *nl = r->len > r->pos ? memchr(r->buf + r->pos, '\n', r->len - r->pos) : NULL;
		int k;

		if (nl) {
			*nl = '\0';
			*line = r->buf + r->pos;
			*off = r->ubase + r->pos;
			r->pos = nl - r->buf + 1;
			r->line++;
			return 1;
		}
		if (r->pos && r->len > r->pos)
			memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->ubase += r->pos;
		r->len -= r->pos;
		r->pos = 0;
		k = fill(r, err, errlen);
		if (k < 0)
			return k;
		if (k == 0 && r->done) {
			if (r->len)
				return fail(
					err, errlen, -EPIPE,
					"%s:%u: byte %llu: the last line has no end: the recording is truncated",
					r->path, r->line + 1, (unsigned long long)r->ubase);
			return 0;
		}
	}
}

static struct json_object *parse_line(struct rec_reader *r, const char *line, uint64_t off,
				      char *err, size_t errlen, int *ret)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	enum json_tokener_error e;
	size_t n = strlen(line);

	*ret = -ENOMEM;
	if (!tok) {
		fail(err, errlen, -ENOMEM, "%s: out of memory", r->path);
		return NULL;
	}
	o = json_tokener_parse_ex(tok, line, n);
	e = json_tokener_get_error(tok);
	if (!o || e != json_tokener_success || json_tokener_get_parse_end(tok) != n) {
		*ret = fail(err, errlen, -EINVAL,
			    "%s:%u: byte %llu: not a JSON object (%s at byte %llu)", r->path,
			    r->line, (unsigned long long)off,
			    e != json_tokener_success ? json_tokener_error_desc(e) :
							"trailing data",
			    (unsigned long long)(off + json_tokener_get_parse_end(tok)));
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

static int parse_header(struct rec_reader *r, struct json_object *o, uint64_t off,
			struct rec_header *h, char *err, size_t errlen)
{
	struct json_object *x;
	uint64_t v;
	double started;

	memset(h, 0, sizeof(*h));
	if (!json_object_object_get_ex(o, "tailwarden_recording", &x))
		return fail(err, errlen, -EINVAL,
			    "%s:%u: byte %llu: not a tailwarden recording (no header)", r->path,
			    r->line, (unsigned long long)off);
	if (!json_object_is_type(x, json_type_int) || json_object_get_int(x) != REC_FORMAT)
		return fail(err, errlen, -EINVAL,
			    "%s:%u: byte %llu: recording format %s, this tailwarden reads %d",
			    r->path, r->line, (unsigned long long)off, json_object_get_string(x),
			    REC_FORMAT);
	if (get_u64(o, "period_ns", &v) || !v)
		return fail(err, errlen, -EINVAL,
			    "%s:%u: byte %llu: the header has no valid period_ns", r->path, r->line,
			    (unsigned long long)off);
	h->period_ns = v;
	if (json_object_object_get_ex(o, "version", &x) && json_object_is_type(x, json_type_string))
		snprintf(h->version, sizeof(h->version), "%s", json_object_get_string(x));
	if (json_object_object_get_ex(o, "host", &x) && json_object_is_type(x, json_type_string))
		snprintf(h->host, sizeof(h->host), "%s", json_object_get_string(x));
	if (json_object_object_get_ex(o, "kernel", &x) && json_object_is_type(x, json_type_string))
		snprintf(h->kernel, sizeof(h->kernel), "%s", json_object_get_string(x));
	if (json_object_object_get_ex(o, "sensing_mode", &x) &&
	    json_object_is_type(x, json_type_string))
		snprintf(h->sensing_mode, sizeof(h->sensing_mode), "%s", json_object_get_string(x));
	if (json_object_object_get_ex(o, "contention", &x))
		h->contention = json_object_get_boolean(x);
	if (!get_exact(o, "started", &started))
		h->started = started;
	if (get_u64(o, "part", &v) == 0)
		h->part = v;
	return 0;
}

int rec_open(const char *path, struct rec_reader **out, struct rec_header *h, char *err,
	     size_t errlen)
{
	struct rec_reader *r = calloc(1, sizeof(*r));
	struct json_object *o;
	uint64_t off;
	char *line;
	int k;

	if (!r || !(r->path = strdup(path))) {
		free(r);
		return fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	}
	r->f = fopen(path, "re");
	if (!r->f) {
		k = -errno;
		fail(err, errlen, k, "%s: Failed to open: %s", path, strerror(-k));
		goto fail;
	}
	if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK) {
		k = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	r->zinit = true;
	r->in_member = true;
	k = next_line(r, &line, &off, err, errlen);
	if (k == 0)
		k = fail(err, errlen, -EINVAL, "%s: byte %llu: no header: not a recording", path,
			 (unsigned long long)r->read_total);
	if (k < 0)
		goto fail;
	o = parse_line(r, line, off, err, errlen, &k);
	if (!o)
		goto fail;
	k = parse_header(r, o, off, h, err, errlen);
	json_object_put(o);
	if (k)
		goto fail;
	r->period_ns = h->period_ns;
	*out = r;
	return 0;
fail:
	rec_close(r);
	return k;
}

int rec_next(struct rec_reader *r, struct rec_tick *t, char *err, size_t errlen)
{
	struct json_object *o, *x;
	struct rec_header h;
	const char *why;
	uint64_t off;
	char *line;
	int k;

	memset(t, 0, sizeof(*t));
	for (;;) {
		k = next_line(r, &line, &off, err, errlen);
		if (k <= 0)
			return k;
		o = parse_line(r, line, off, err, errlen, &k);
		if (!o)
			return k;
		if (!json_object_object_get_ex(o, "tailwarden_recording", &x))
			break;
		/* Files joined with cat (FILE.1 FILE): a header between parts. */
		k = parse_header(r, o, off, &h, err, errlen);
		json_object_put(o);
		if (k)
			return k;
		if (h.period_ns != r->period_ns)
			return fail(
				err, errlen, -EINVAL,
				"%s:%u: byte %llu: a part with period %llu ns after one with %llu ns",
				r->path, r->line, (unsigned long long)off,
				(unsigned long long)h.period_ns, (unsigned long long)r->period_ns);
	}
	k = rec_tick_parse(o, t, &why);
	json_object_put(o);
	if (k == -EINVAL)
		return fail(err, errlen, k,
			    "%s:%u: byte %llu: not a tick: missing or invalid \"%s\"", r->path,
			    r->line, (unsigned long long)off, why);
	if (k)
		return fail(err, errlen, k, "%s: out of memory", r->path);
	if (r->have_tick && t->index <= r->last_tick) {
		k = fail(err, errlen, -EINVAL,
			 "%s:%u: byte %llu: tick %llu after tick %llu: ticks must increase",
			 r->path, r->line, (unsigned long long)off, (unsigned long long)t->index,
			 (unsigned long long)r->last_tick);
		rec_tick_clear(t);
		return k;
	}
	r->have_tick = true;
	r->last_tick = t->index;
	return 1;
}

void rec_close(struct rec_reader *r)
{
	if (!r)
		return;
	if (r->zinit)
		inflateEnd(&r->zs);
	if (r->f)
		fclose(r->f);
	free(r->buf);
	free(r->path);
	free(r);
}
