// SPDX-License-Identifier: GPL-2.0
/*
 * loadgen: an open-loop request generator with exact client-side latency,
 * used as ground truth for what tailwarden infers in the kernel.
 *
 * tailwarden never sees requests: it infers each one from socket events on
 * the server (bytes arriving on an idle connection, then the sends of the
 * reply). To check those inferred latencies we need a client that knows the
 * true latency of every request it sent, at a known offered load, on the
 * same kinds of keep-alive connections real clients use. This tool does
 * that for HTTP/1.1, Redis (RESP) and memcached (text protocol).
 *
 * Open loop: request i is due at t0 + i/rate whatever happened to earlier
 * requests, so a slow server builds a queue instead of silently slowing the
 * client down (the "coordinated omission" trap of closed-loop tools). Each
 * connection carries at most one request at a time, as the protocols'
 * typical clients do; a due request that finds no idle connection waits in
 * a FIFO and is counted as queued. Scheduling stops at t0 + duration;
 * requests still in the FIFO then are dropped unsent, and replies still
 * outstanding get --max-outstanding-wait seconds, after which they count as
 * errors. --closed switches to a closed loop (send the next request as soon
 * as the reply is in) to measure capacity.
 *
 * Two latencies are kept per request:
 *  - latency: from just before the write() of the request to the moment the
 *    last byte of the reply has been read and parsed. The span tailwarden
 *    infers starts when the request reaches the server's socket, a few
 *    microseconds after our write() on loopback, and ends at the server's
 *    last send; so this is the number an inferred latency must be compared
 *    with: it holds server time plus two loopback crossings, and nothing of
 *    the time the request waited on our side.
 *  - sched_latency: from the time the request was due to the same end, so
 *    it also holds the client-side queueing that an open-loop user feels.
 *  - rx_latency: from just before the write() to the kernel's receive
 *    timestamp (SO_TIMESTAMPNS) of the reply's last segment: where the
 *    server's last send lands, without our own wake-up and read after it,
 *    which on a busy or virtualised host can be tens of microseconds.
 *
 * Every sample is kept (no histogram) and percentiles are exact,
 * nearest-rank on the sorted samples.
 *
 * One thread, epoll, non-blocking sockets with TCP_NODELAY. The loop sleeps
 * on an absolute CLOCK_MONOTONIC timerfd set to the next due time, with the
 * timer slack cut to 1 ns so wake-ups are not rounded up by 50 us.
 *
 * Output: one line of JSON on stdout; see print_report(). Exit status 0 when
 * the run happened (errors are counted, not fatal), 2 on bad arguments, 1
 * when no connection at all could be made at start.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

/* Per connection; must hold the longest header or status line. */
#define RXBUF_SIZE (64 * 1024)
#define MAX_EVENTS 256
#define MAX_CONNS 10000
#define MAX_SAMPLES (256ULL * 1024 * 1024)

/* Connect phase before t0; together with the drain wait, bounds the run. */
#define CONNECT_PHASE_NS (2 * NSEC_PER_SEC)
#define DEFAULT_DRAIN_S 5.0
#define MAX_DRAIN_S 7.0
/* Whatever happens, exit this long after start + duration. */
#define HARD_SLACK_NS (9500 * NSEC_PER_MSEC)
/* Delay before retrying a connection that failed before doing any work. */
#define RETRY_NS (20 * NSEC_PER_MSEC)

#define TIMER_TOKEN UINT64_MAX

enum proto { PROTO_HTTP, PROTO_REDIS, PROTO_MEMCACHED };

enum conn_state {
	CS_DOWN,       /* no socket; reopened at retry_at */
	CS_CONNECTING, /* non-blocking connect in progress */
	CS_IDLE,       /* connected, no request outstanding */
	CS_BUSY,       /* request written (maybe partly), reply pending */
};

enum parse_rc { PR_MORE, PR_DONE, PR_ERR };

/* Incremental reply parser state; the meaning of state is per protocol. */
struct parser {
	int state;
	int status;	 /* HTTP status code */
	int64_t clen;	 /* HTTP Content-Length, -1 when absent */
	bool chunked;	 /* HTTP Transfer-Encoding: chunked */
	int64_t pending; /* RESP values still expected */
	uint64_t skip;	 /* payload bytes to drop, then a line */
};

struct conn {
	int fd;
	uint32_t gen; /* bumped on each (re)open; tags events */
	enum conn_state state;
	bool in_ring;	  /* has an entry in the idle ring */
	bool want_out;	  /* EPOLLOUT armed for a partial write */
	bool close_after; /* server said it closes after this reply */
	uint64_t done_since_open;
	uint64_t retry_at;
	uint64_t t_sched;
	uint64_t t_write;
	uint64_t t_write_rt; /* CLOCK_REALTIME at write: SO_TIMESTAMPNS's clock */
	uint64_t t_rx_rt;    /* kernel receive time of the latest segment read */
	size_t tx_off;
	size_t rx_pos;
	size_t rx_len;
	struct parser p;
	char *rx;
};

struct opts {
	enum proto proto;
	const char *proto_name;
	const char *host;
	int port;
	double rate;
	double duration;
	int conns;
	const char *path;
	const char *key;
	double drain_s;
	bool closed;
	const char *dump;
	const char *live;
};

struct proto_ops {
	const char *name;
	void (*reset)(struct parser *p);
	/* One complete line, NUL-terminated, CR/LF stripped. */
	enum parse_rc (*line)(struct conn *c, char *line, size_t len);
	/* The payload announced by the last line has been skipped. */
	enum parse_rc (*skipped)(struct conn *c);
};

struct lg {
	struct opts o;
	const struct proto_ops *ops;
	int ep;
	int tfd;
	uint64_t armed; /* absolute deadline the timerfd holds */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char *req;
	size_t req_len;

	struct conn *conns;
	uint32_t *ring; /* FIFO of idle connections */
	uint32_t ring_head;
	uint32_t ring_len;
	uint32_t n_down;
	uint32_t n_connected; /* connections that ever got established */
	int last_connect_errno;

	uint64_t t_start;
	uint64_t t0;
	uint64_t t_end; /* t0 + duration: scheduling stops */
	uint64_t drain_deadline;
	uint64_t hard_deadline;
	bool draining;

	/* Open loop: requests [q_head, next_due) are due and waiting. */
	uint64_t n_total;
	uint64_t next_due;
	uint64_t q_head;
	uint64_t q_counted; /* requests already judged queued or not */

	uint64_t sent;
	uint64_t completed;
	uint64_t errors;
	uint64_t queued;
	uint64_t in_flight;
	uint64_t last_done;

	uint64_t *lat;
	uint64_t *slat;
	uint64_t *rxlat;
	double t0_unix; /* t0 on the wall clock, seconds */
	uint64_t *due;	/* when the request was due, ns after t0 */
	size_t n_samples;
	size_t cap_samples;

	FILE *live;	    /* --live: one line a second */
	uint64_t next_live; /* when the next line is due */
	size_t live_from;   /* first sample not yet in a --live line */
	uint64_t *live_tmp;
	size_t live_cap;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* ---------------------------------------------------------------- parsers */

/*
 * Each parser sees whole lines; payloads whose length is announced in a
 * line (HTTP bodies and chunks, RESP bulk strings, memcached values) are
 * skipped by count without being buffered, so large replies cost nothing.
 */

enum {
	HS_STATUS,
	HS_HEADER,
	HS_BODY,
	HS_CHUNK_SIZE,
	HS_CHUNK_DATA,
	HS_TRAILER,
	HS_UNTIL_EOF,
};

static void http_reset(struct parser *p)
{
	memset(p, 0, sizeof(*p));
	p->state = HS_STATUS;
	p->clen = -1;
}

static bool parse_u64(const char *s, int base, uint64_t *out, char **endp)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!(base == 16 ? isxdigit((unsigned char)*s) : (*s >= '0' && *s <= '9')))
		return false;
	errno = 0;
	*out = strtoull(s, &end, base);
	if (errno)
		return false;
	if (endp)
		*endp = end;
	return true;
}

static enum parse_rc http_status_line(struct conn *c, char *line, size_t len)
{
	struct parser *p = &c->p;

	if (len < 12 || memcmp(line, "HTTP/1.", 7) || line[8] != ' ' ||
	    !isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10]) ||
	    !isdigit((unsigned char)line[11]))
		return PR_ERR;
	p->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
	p->clen = -1;
	p->chunked = false;
	/* HTTP/1.0 closes after the reply unless it says keep-alive. */
	c->close_after = line[7] == '0';
	p->state = HS_HEADER;
	return PR_MORE;
}

static enum parse_rc http_end_of_headers(struct conn *c)
{
	struct parser *p = &c->p;

	if (p->status < 200) {
		/* Interim 1xx reply: the real one follows. */
		p->state = HS_STATUS;
		return PR_MORE;
	}
	if (p->status == 204 || p->status == 304)
		return PR_DONE;
	if (p->chunked) {
		p->state = HS_CHUNK_SIZE;
		return PR_MORE;
	}
	if (p->clen == 0)
		return PR_DONE;
	if (p->clen > 0) {
		p->skip = p->clen;
		p->state = HS_BODY;
		return PR_MORE;
	}
	/* No length: the body runs to the end of the connection. */
	c->close_after = true;
	p->skip = UINT64_MAX;
	p->state = HS_UNTIL_EOF;
	return PR_MORE;
}

static enum parse_rc http_header(struct conn *c, char *line, size_t len)
{
	struct parser *p = &c->p;
	uint64_t v;

	if (len == 0)
		return http_end_of_headers(c);
	if (!strncasecmp(line, "content-length:", 15)) {
		if (!parse_u64(line + 15, 10, &v, NULL) || v > INT64_MAX)
			return PR_ERR;
		p->clen = (int64_t)v;
	} else if (!strncasecmp(line, "transfer-encoding:", 18)) {
		p->chunked = strcasestr(line + 18, "chunked") != NULL;
	} else if (!strncasecmp(line, "connection:", 11)) {
		if (strcasestr(line + 11, "close"))
			c->close_after = true;
		else if (strcasestr(line + 11, "keep-alive"))
			c->close_after = false;
	}
	return PR_MORE;
}

static enum parse_rc http_line(struct conn *c, char *line, size_t len)
{
	struct parser *p = &c->p;
	uint64_t v;

	switch (p->state) {
	case HS_STATUS:
		return http_status_line(c, line, len);
	case HS_HEADER:
		return http_header(c, line, len);
	case HS_CHUNK_SIZE:
		/* "<hex>[;ext]"; the data is followed by CRLF, skipped too. */
		if (!parse_u64(line, 16, &v, NULL) || v > (1ULL << 62))
			return PR_ERR;
		if (v == 0) {
			p->state = HS_TRAILER;
			return PR_MORE;
		}
		p->skip = v + 2;
		p->state = HS_CHUNK_DATA;
		return PR_MORE;
	case HS_TRAILER:
		return len == 0 ? PR_DONE : PR_MORE;
	default:
		return PR_ERR;
	}
}

static enum parse_rc http_skipped(struct conn *c)
{
	struct parser *p = &c->p;

	switch (p->state) {
	case HS_BODY:
		return PR_DONE;
	case HS_CHUNK_DATA:
		p->state = HS_CHUNK_SIZE;
		return PR_MORE;
	default:
		return PR_ERR;
	}
}

static void resp_reset(struct parser *p)
{
	memset(p, 0, sizeof(*p));
	p->pending = 1;
}

/*
 * RESP values are counted flat: an aggregate of n elements replaces the one
 * value expected by n (2n for maps), so nesting needs no stack.
 */
static enum parse_rc resp_line(struct conn *c, char *line, size_t len)
{
	struct parser *p = &c->p;
	char *end;
	long long n;

	if (len == 0)
		return PR_ERR;
	switch (line[0]) {
	case '+':
	case '-':
	case ':':
	case '_':
	case '#':
	case ',':
	case '(':
		p->pending--;
		break;
	case '$':
	case '!':
	case '=':
		errno = 0;
		n = strtoll(line + 1, &end, 10);
		if (errno || end == line + 1 || n > (1LL << 40))
			return PR_ERR;
		if (n < 0) {
			p->pending--;
			break;
		}
		p->skip = (uint64_t)n + 2; /* data and its CRLF */
		return PR_MORE;
	case '*':
	case '~':
	case '>':
	case '%':
	case '|':
		errno = 0;
		n = strtoll(line + 1, &end, 10);
		if (errno || end == line + 1 || n > (1LL << 30))
			return PR_ERR;
		if (line[0] == '%' || line[0] == '|')
			n *= 2;
		/* An attribute precedes the value it annotates. */
		p->pending += (n > 0 ? n : 0) - (line[0] == '|' ? 0 : 1);
		break;
	default:
		return PR_ERR;
	}
	return p->pending <= 0 ? PR_DONE : PR_MORE;
}

static enum parse_rc resp_skipped(struct conn *c)
{
	return --c->p.pending <= 0 ? PR_DONE : PR_MORE;
}

static void mc_reset(struct parser *p)
{
	memset(p, 0, sizeof(*p));
}

static enum parse_rc mc_line(struct conn *c, char *line, size_t len)
{
	unsigned long long bytes;

	(void)len;
	if (!strcmp(line, "END"))
		return PR_DONE;
	if (!strncmp(line, "VALUE ", 6)) {
		if (sscanf(line, "VALUE %*s %*u %llu", &bytes) != 1 || bytes > (1ULL << 40))
			return PR_ERR;
		c->p.skip = bytes + 2; /* data and its CRLF */
		return PR_MORE;
	}
	/* An error reply is still a complete reply with a real latency. */
	if (!strcmp(line, "ERROR") || !strncmp(line, "CLIENT_ERROR", 12) ||
	    !strncmp(line, "SERVER_ERROR", 12))
		return PR_DONE;
	return PR_ERR;
}

static enum parse_rc mc_skipped(struct conn *c)
{
	(void)c;
	return PR_MORE; /* another VALUE or END follows */
}

static const struct proto_ops proto_ops[] = {
	[PROTO_HTTP] = { "http", http_reset, http_line, http_skipped },
	[PROTO_REDIS] = { "redis", resp_reset, resp_line, resp_skipped },
	[PROTO_MEMCACHED] = { "memcached", mc_reset, mc_line, mc_skipped },
};

/* Feed the buffered bytes to the parser; stops at the end of the reply. */
static enum parse_rc parse_rx(const struct proto_ops *ops, struct conn *c)
{
	enum parse_rc rc;
	char *line, *nl;
	size_t take, len;

	for (;;) {
		if (c->p.skip) {
			take = min_u64(c->p.skip, c->rx_len - c->rx_pos);
			c->rx_pos += take;
			c->p.skip -= take;
			if (c->p.skip)
				return PR_MORE;
			rc = ops->skipped(c);
			if (rc != PR_MORE)
				return rc;
			continue;
		}
		line = c->rx + c->rx_pos;
		nl = memchr(line, '\n', c->rx_len - c->rx_pos);
		if (!nl)
			return PR_MORE;
		c->rx_pos = nl - c->rx + 1;
		len = nl - line;
		if (len && line[len - 1] == '\r')
			len--;
		line[len] = '\0';
		rc = ops->line(c, line, len);
		if (rc != PR_MORE)
			return rc;
	}
}

/* ------------------------------------------------------------ connections */

static uint64_t conn_token(struct lg *lg, struct conn *c)
{
	return (uint64_t)c->gen << 32 | (uint32_t)(c - lg->conns);
}

static int ep_set(struct lg *lg, struct conn *c, int op, uint32_t events)
{
	struct epoll_event ev = {
		.events = events,
		.data.u64 = conn_token(lg, c),
	};

	return epoll_ctl(lg->ep, op, c->fd, &ev);
}

static void idle_push(struct lg *lg, struct conn *c)
{
	if (c->in_ring)
		return;
	c->in_ring = true;
	lg->ring[(lg->ring_head + lg->ring_len) % lg->o.conns] = c - lg->conns;
	lg->ring_len++;
}

/* Entries of connections that died while idle are dropped lazily here. */
static struct conn *idle_pop(struct lg *lg)
{
	struct conn *c;

	while (lg->ring_len) {
		c = &lg->conns[lg->ring[lg->ring_head]];
		lg->ring_head = (lg->ring_head + 1) % lg->o.conns;
		lg->ring_len--;
		c->in_ring = false;
		if (c->state == CS_IDLE)
			return c;
	}
	return NULL;
}

static void conn_close(struct lg *lg, struct conn *c)
{
	if (c->state == CS_BUSY)
		lg->in_flight--; /* that request is lost */
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CS_DOWN;
	c->gen++;
}

static void conn_down(struct lg *lg, struct conn *c, uint64_t delay)
{
	c->state = CS_DOWN;
	c->retry_at = now_ns() + delay;
	lg->n_down++;
}

static void conn_established(struct lg *lg, struct conn *c)
{
	c->state = CS_IDLE;
	lg->n_connected++;
	/* EPOLLIN stays on while idle so a server-side close is noticed. */
	if (ep_set(lg, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP)) {
		lg->errors++;
		conn_close(lg, c);
		conn_down(lg, c, RETRY_NS);
		return;
	}
	idle_push(lg, c);
}

static void conn_open(struct lg *lg, struct conn *c)
{
	int one = 1;
	int fd;

	fd = socket(lg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* Requests are single small writes: never let Nagle hold one. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	c->fd = fd;
	c->gen++;
	c->rx_pos = c->rx_len = 0;
	c->want_out = false;
	c->close_after = false;
	c->done_since_open = 0;
	if (connect(fd, (struct sockaddr *)&lg->addr, lg->addrlen) && errno != EINPROGRESS) {
		close(fd);
		c->fd = -1;
		goto fail;
	}
	c->state = CS_CONNECTING;
	if (ep_set(lg, c, EPOLL_CTL_ADD, EPOLLOUT)) {
		close(fd);
		c->fd = -1;
		goto fail;
	}
	return;
fail:
	lg->last_connect_errno = errno;
	lg->errors++;
	conn_down(lg, c, RETRY_NS);
}

static void conn_connect_done(struct lg *lg, struct conn *c)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		lg->last_connect_errno = err ? err : errno;
		lg->errors++;
		conn_close(lg, c);
		conn_down(lg, c, RETRY_NS);
		return;
	}
	conn_established(lg, c);
}

/*
 * A connection that broke (reset, unannounced close, protocol error) is an
 * error; it is reopened at once, unless it broke before doing any work,
 * where an immediate reopen could spin against a refusing server.
 */
static void conn_fail(struct lg *lg, struct conn *c)
{
	bool worked = c->done_since_open > 0;

	lg->errors++;
	conn_close(lg, c);
	if (worked)
		conn_open(lg, c);
	else
		conn_down(lg, c, RETRY_NS);
}

/* send() is write() plus MSG_NOSIGNAL: a dead peer must not kill us. */
static void conn_flush(struct lg *lg, struct conn *c)
{
	ssize_t n;

	while (c->tx_off < lg->req_len) {
		n = send(c->fd, lg->req + c->tx_off, lg->req_len - c->tx_off, MSG_NOSIGNAL);
		if (n > 0) {
			c->tx_off += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!c->want_out &&
			    ep_set(lg, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP | EPOLLOUT)) {
				conn_fail(lg, c);
				return;
			}
			c->want_out = true;
			return;
		}
		conn_fail(lg, c);
		return;
	}
	if (c->want_out) {
		c->want_out = false;
		if (ep_set(lg, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLRDHUP))
			conn_fail(lg, c);
	}
}

/* sched == 0: closed loop, the request is due when it is written. */
static void conn_send(struct lg *lg, struct conn *c, uint64_t sched)
{
	lg->ops->reset(&c->p);
	c->state = CS_BUSY;
	c->tx_off = 0;
	lg->sent++;
	lg->in_flight++;
	c->t_write_rt = realtime_ns();
	c->t_rx_rt = 0;
	c->t_write = now_ns();
	c->t_sched = sched ? sched : c->t_write;
	conn_flush(lg, c);
}

static void record_sample(struct lg *lg, uint64_t lat, uint64_t slat, uint64_t rxlat, uint64_t due)
{
	size_t cap;

	if (lg->n_samples == lg->cap_samples) {
		cap = lg->cap_samples ? lg->cap_samples * 2 : 1 << 20;
		lg->lat = realloc(lg->lat, cap * sizeof(*lg->lat));
		lg->slat = realloc(lg->slat, cap * sizeof(*lg->slat));
		lg->rxlat = realloc(lg->rxlat, cap * sizeof(*lg->rxlat));
		lg->due = realloc(lg->due, cap * sizeof(*lg->due));
		if (!lg->lat || !lg->slat || !lg->rxlat || !lg->due) {
			fprintf(stderr, "loadgen: out of memory for samples\n");
			exit(1);
		}
		lg->cap_samples = cap;
	}
	lg->lat[lg->n_samples] = lat;
	lg->slat[lg->n_samples] = slat;
	lg->rxlat[lg->n_samples] = rxlat;
	lg->due[lg->n_samples] = due;
	lg->n_samples++;
}

static void conn_complete(struct lg *lg, struct conn *c)
{
	uint64_t t = now_ns(), lat = t - c->t_write, rx = lat;

	/* No timestamp (reply ended by EOF), or clock stepped: the read time. */
	if (c->t_rx_rt >= c->t_write_rt && c->t_rx_rt - c->t_write_rt <= lat)
		rx = c->t_rx_rt - c->t_write_rt;
	record_sample(lg, lat, t - c->t_sched, rx, c->t_sched > lg->t0 ? c->t_sched - lg->t0 : 0);
	lg->completed++;
	lg->in_flight--;
	lg->last_done = t;
	c->done_since_open++;
	c->state = CS_IDLE;
	if (c->rx_pos != c->rx_len) {
		/* Bytes past the reply: we never pipeline, so it is garbage. */
		conn_fail(lg, c);
		return;
	}
	c->rx_pos = c->rx_len = 0;
	if (c->close_after) {
		/* Announced close (e.g. keepalive_requests): not an error. */
		conn_close(lg, c);
		conn_open(lg, c);
		return;
	}
	idle_push(lg, c);
}

static void conn_eof(struct lg *lg, struct conn *c)
{
	if (c->state == CS_BUSY && c->p.state == HS_UNTIL_EOF && lg->o.proto == PROTO_HTTP) {
		c->rx_pos = c->rx_len = 0;
		conn_complete(lg, c);
		return;
	}
	conn_fail(lg, c);
}

/* recv() that also keeps the kernel's receive timestamp of what it read. */
static ssize_t recv_ts(struct conn *c, char *buf, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(struct timespec))];
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t n = recvmsg(c->fd, &msg, 0);

	if (n <= 0)
		return n;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
			c->t_rx_rt = (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
		}
	}
	return n;
}

static void conn_readable(struct lg *lg, struct conn *c)
{
	enum parse_rc rc;
	size_t space;
	ssize_t n;

	for (;;) {
		space = RXBUF_SIZE - c->rx_len;
		if (!space) {
			/* A line longer than the whole buffer. */
			conn_fail(lg, c);
			return;
		}
		n = recv_ts(c, c->rx + c->rx_len, space);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_fail(lg, c);
			return;
		}
		if (n == 0) {
			conn_eof(lg, c);
			return;
		}
		if (c->state != CS_BUSY) {
			conn_fail(lg, c); /* unsolicited data */
			return;
		}
		c->rx_len += n;
		rc = parse_rx(lg->ops, c);
		if (rc == PR_ERR) {
			conn_fail(lg, c);
			return;
		}
		if (rc == PR_DONE) {
			conn_complete(lg, c);
			return;
		}
		/* Keep only the unparsed tail (at most a partial line). */
		if (c->rx_pos) {
			c->rx_len -= c->rx_pos;
			memmove(c->rx, c->rx + c->rx_pos, c->rx_len);
			c->rx_pos = 0;
		}
		if ((size_t)n < space)
			return;
	}
}

static void conn_event(struct lg *lg, uint64_t token, uint32_t events)
{
	uint32_t idx = (uint32_t)token;
	uint32_t gen = token >> 32;
	struct conn *c;

	if (idx >= (uint32_t)lg->o.conns)
		return;
	c = &lg->conns[idx];
	/* An event queued for a socket closed earlier in this batch. */
	if (c->gen != gen || c->fd < 0)
		return;
	if (c->state == CS_CONNECTING) {
		conn_connect_done(lg, c);
		return;
	}
	if ((events & EPOLLOUT) && c->want_out) {
		conn_flush(lg, c);
		if (c->gen != gen)
			return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		conn_readable(lg, c);
}

static void retry_down(struct lg *lg, uint64_t now)
{
	struct conn *c;
	int i;

	if (!lg->n_down)
		return;
	for (i = 0; i < lg->o.conns; i++) {
		c = &lg->conns[i];
		if (c->state != CS_DOWN || c->retry_at > now)
			continue;
		lg->n_down--;
		conn_open(lg, c);
	}
}

static uint64_t next_retry(struct lg *lg)
{
	uint64_t t = UINT64_MAX;
	int i;

	if (!lg->n_down)
		return t;
	for (i = 0; i < lg->o.conns; i++)
		if (lg->conns[i].state == CS_DOWN)
			t = min_u64(t, lg->conns[i].retry_at);
	return t;
}

/* -------------------------------------------------------------- schedule */

/* Offset of request i from t0; computed, not accumulated, so no drift. */
static uint64_t sched_off(double rate, uint64_t i)
{
	return (uint64_t)((double)i * (double)NSEC_PER_SEC / rate);
}

static uint64_t sched_at(struct lg *lg, uint64_t i)
{
	return lg->t0 + sched_off(lg->o.rate, i);
}

/* Number of requests due strictly before t0 + duration. */
static uint64_t count_requests(double rate, double duration)
{
	uint64_t d_ns = (uint64_t)(duration * NSEC_PER_SEC);
	uint64_t n = (uint64_t)ceil(duration * rate);

	while (n > 0 && sched_off(rate, n - 1) >= d_ns)
		n--;
	while (sched_off(rate, n) < d_ns)
		n++;
	return n;
}

/*
 * Hand every due request, oldest first, to an idle connection. A request
 * that cannot go out in the pass where it first became due is queued.
 */
static void dispatch_open(struct lg *lg, uint64_t now)
{
	struct conn *c;
	uint64_t from;

	while (lg->next_due < lg->n_total && sched_at(lg, lg->next_due) <= now)
		lg->next_due++;
	while (lg->q_head < lg->next_due) {
		c = idle_pop(lg);
		if (!c)
			break;
		conn_send(lg, c, sched_at(lg, lg->q_head));
		lg->q_head++;
	}
	from = lg->q_counted > lg->q_head ? lg->q_counted : lg->q_head;
	if (lg->next_due > from)
		lg->queued += lg->next_due - from;
	lg->q_counted = lg->next_due;
}

static void dispatch_closed(struct lg *lg, uint64_t now)
{
	struct conn *c;

	if (now >= lg->t_end)
		return;
	while ((c = idle_pop(lg)))
		conn_send(lg, c, 0);
}

static uint64_t next_deadline(struct lg *lg)
{
	uint64_t d = min_u64(lg->hard_deadline, next_retry(lg));

	if (lg->draining)
		return min_u64(d, lg->drain_deadline);
	d = min_u64(d, lg->t_end);
	if (lg->live)
		d = min_u64(d, lg->next_live);
	if (!lg->o.closed && lg->next_due < lg->n_total)
		d = min_u64(d, sched_at(lg, lg->next_due));
	return d;
}

static void arm_timer(struct lg *lg, uint64_t deadline)
{
	struct itimerspec its = {
		.it_value.tv_sec = deadline / NSEC_PER_SEC,
		.it_value.tv_nsec = deadline % NSEC_PER_SEC,
	};

	if (deadline == lg->armed)
		return;
	timerfd_settime(lg->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	lg->armed = deadline;
}

static void handle_events(struct lg *lg, int timeout_ms)
{
	struct epoll_event evs[MAX_EVENTS];
	uint64_t ticks;
	int i, n;

	n = epoll_wait(lg->ep, evs, MAX_EVENTS, timeout_ms);
	for (i = 0; i < n; i++) {
		if (evs[i].data.u64 == TIMER_TOKEN) {
			if (read(lg->tfd, &ticks, sizeof(ticks)) > 0)
				lg->armed = 0;
			continue;
		}
		conn_event(lg, evs[i].data.u64, evs[i].events);
	}
}

/* Open every connection before t0 so no request pays for a handshake. */
static void connect_all(struct lg *lg)
{
	uint64_t deadline = now_ns() + CONNECT_PHASE_NS;
	uint64_t now;
	bool pending;
	int i;

	for (i = 0; i < lg->o.conns; i++)
		conn_open(lg, &lg->conns[i]);
	for (;;) {
		pending = false;
		for (i = 0; i < lg->o.conns; i++)
			pending |= lg->conns[i].state == CS_CONNECTING;
		now = now_ns();
		if (!pending || now >= deadline || stop_requested)
			return;
		handle_events(lg, (deadline - now) / NSEC_PER_MSEC + 1);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * --live: each second, the requests completed in it, with the nearest-rank
 * p50/p99 of their kernel receive latency, so a watcher (make demo) sees
 * the service's latency while the run goes on.
 */
static void live_tick(struct lg *lg, uint64_t now)
{
	size_t n = lg->n_samples - lg->live_from;
	double p50 = 0, p99 = 0;

	if (n > lg->live_cap) {
		lg->live_tmp = realloc(lg->live_tmp, n * sizeof(*lg->live_tmp));
		if (!lg->live_tmp) {
			fprintf(stderr, "loadgen: out of memory for --live\n");
			exit(1);
		}
		lg->live_cap = n;
	}
	if (n) {
		memcpy(lg->live_tmp, lg->rxlat + lg->live_from, n * sizeof(*lg->live_tmp));
		qsort(lg->live_tmp, n, sizeof(*lg->live_tmp), cmp_u64);
		p50 = lg->live_tmp[(n * 50 + 99) / 100 - 1] / 1e3;
		p99 = lg->live_tmp[(n * 99 + 99) / 100 - 1] / 1e3;
	}
	fprintf(lg->live,
		"{\"unix\":%.3f,\"completed\":%zu,\"errors\":%" PRIu64
		",\"rx_p50_us\":%.1f,\"rx_p99_us\":%.1f}\n",
		realtime_ns() / 1e9, n, lg->errors, p50, p99);
	fflush(lg->live);
	lg->live_from = lg->n_samples;
	while (lg->next_live <= now)
		lg->next_live += NSEC_PER_SEC;
}

static void run_loop(struct lg *lg)
{
	uint64_t now, d;

	for (;;) {
		now = now_ns();
		if (stop_requested || now >= lg->hard_deadline)
			return;
		retry_down(lg, now);
		if (lg->live && now >= lg->next_live)
			live_tick(lg, now);
		if (!lg->draining) {
			/* Requests due before t_end still go out, even late. */
			if (lg->o.closed)
				dispatch_closed(lg, now);
			else
				dispatch_open(lg, now);
		}
		if (!lg->draining && now >= lg->t_end) {
			/* Queued requests never sent stay unsent. */
			lg->draining = true;
			lg->drain_deadline =
				min_u64(lg->t_end + (uint64_t)(lg->o.drain_s * NSEC_PER_SEC),
					lg->hard_deadline);
		}
		if (lg->draining && (!lg->in_flight || now >= lg->drain_deadline))
			return;
		d = next_deadline(lg);
		if (d <= now) {
			handle_events(lg, 0);
			continue;
		}
		arm_timer(lg, d);
		handle_events(lg, -1);
	}
}

/* ---------------------------------------------------------------- report */

/*
 * LSD radix sort, 16 bits a pass, only as many passes as the largest value
 * needs (3 for anything under 78 hours). Millions of samples sort in tens
 * of milliseconds, which keeps the report inside the hard time bound.
 */
static void sort_u64(uint64_t *v, size_t n)
{
	static size_t count[1 << 16];
	uint64_t *tmp, *src = v, *dst, *t, max = 0;
	size_t i, sum, c;
	int shift;

	for (i = 0; i < n; i++)
		max = v[i] > max ? v[i] : max;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp) {
		fprintf(stderr, "loadgen: out of memory for sorting\n");
		exit(1);
	}
	dst = tmp;
	for (shift = 0; shift < 64 && (max >> shift); shift += 16) {
		memset(count, 0, sizeof(count));
		for (i = 0; i < n; i++)
			count[(src[i] >> shift) & 0xffff]++;
		for (i = 0, sum = 0; i < 1 << 16; i++) {
			c = count[i];
			count[i] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			dst[count[(src[i] >> shift) & 0xffff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
}

/* Nearest rank: the value at index ceil(q * n) - 1, q = num / den. */
static uint64_t rank(const uint64_t *v, size_t n, uint64_t num, uint64_t den)
{
	uint64_t k = (n * num + den - 1) / den;

	return v[k ? k - 1 : 0];
}

static void print_dist(const char *name, uint64_t *v, size_t n)
{
	uint64_t sum = 0;
	size_t i;

	if (!n) {
		printf("\"%s\":{\"p50\":null,\"p90\":null,\"p99\":null,"
		       "\"p999\":null,\"max\":null,\"mean\":null}",
		       name);
		return;
	}
	sort_u64(v, n);
	for (i = 0; i < n; i++)
		sum += v[i];
	printf("\"%s\":{\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,"
	       "\"p999\":%.1f,\"max\":%.1f,\"mean\":%.1f}",
	       name, rank(v, n, 50, 100) / 1e3, rank(v, n, 90, 100) / 1e3,
	       rank(v, n, 99, 100) / 1e3, rank(v, n, 999, 1000) / 1e3, v[n - 1] / 1e3,
	       (double)sum / n / 1e3);
}

static void write_dump(struct lg *lg)
{
	FILE *f = fopen(lg->o.dump, "w");
	size_t i;

	if (!f) {
		fprintf(stderr, "loadgen: --dump %s: %s\n", lg->o.dump, strerror(errno));
		return;
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	for (i = 0; i < lg->n_samples; i++)
		fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", lg->lat[i],
			lg->slat[i], lg->due[i], lg->rxlat[i]);
	if (fclose(f))
		fprintf(stderr, "loadgen: --dump %s: %s\n", lg->o.dump, strerror(errno));
}

static void print_report(struct lg *lg)
{
	uint64_t end = lg->last_done > lg->t_end ? lg->last_done : lg->t_end;
	double elapsed = (double)(end - lg->t0) / NSEC_PER_SEC;

	/* Stopped early by a signal: count only the time that passed. */
	if (stop_requested)
		elapsed = (double)(now_ns() - lg->t0) / NSEC_PER_SEC;
	printf("{\"proto\":\"%s\",\"start_unix\":%.6f,\"rate\":%.15g,\"conns\":%d,"
	       "\"duration_s\":%.15g,\"sent\":%" PRIu64 ",\"completed\":%" PRIu64
	       ",\"errors\":%" PRIu64 ",\"queued\":%" PRIu64 ",\"rps\":%.1f,",
	       lg->o.proto_name, lg->t0_unix, lg->o.closed ? 0.0 : lg->o.rate, lg->o.conns,
	       lg->o.duration, lg->sent, lg->completed, lg->errors, lg->queued,
	       elapsed > 0 ? lg->completed / elapsed : 0.0);
	print_dist("latency_us", lg->lat, lg->n_samples);
	putchar(',');
	print_dist("sched_latency_us", lg->slat, lg->n_samples);
	putchar(',');
	print_dist("rx_latency_us", lg->rxlat, lg->n_samples);
	printf("}\n");
	fflush(stdout);
}

/* ----------------------------------------------------------------- setup */

static void usage(FILE *f)
{
	fprintf(f, "usage: loadgen --proto http|redis|memcached --port P [--host 127.0.0.1]\n"
		   "               --rate R --duration S [--conns C] [--path /] [--key foo]\n"
		   "               [--max-outstanding-wait S] [--closed] [--dump FILE]\n"
		   "               [--live FILE]\n"
		   "\n"
		   "  --rate R                  requests per second, open loop (request i is\n"
		   "                            due at t0 + i/R)\n"
		   "  --duration S              seconds of scheduling\n"
		   "  --conns C                 keep-alive connections (default 8), one\n"
		   "                            outstanding request each\n"
		   "  --path P                  HTTP path (default /)\n"
		   "  --key K                   redis/memcached key (default foo)\n"
		   "  --max-outstanding-wait S  seconds to wait for replies after the end\n"
		   "                            (default 5, at most 7)\n"
		   "  --closed                  closed loop: each connection sends again as\n"
		   "                            soon as a reply is in; --rate is ignored\n"
		   "  --dump FILE               one line per completed request:\n"
		   "                            <latency_ns> <sched_latency_ns> <due_ns>\n"
		   "                            <rx_latency_ns> (due_ns: when it was due,\n"
		   "                            after the start the report's start_unix gives)\n"
		   "  --live FILE               each second, a JSON line: the requests\n"
		   "                            completed in it and their kernel-receive\n"
		   "                            p50/p99 (rx_p50_us, rx_p99_us)\n");
}

static void bad_arg(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "loadgen: invalid value '%s' for --%s: %s\n", val, opt, why);
	usage(stderr);
	exit(2);
}

static double arg_double(const char *opt, const char *val, double lo, double hi)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v))
		bad_arg(opt, val, "not a number");
	if (v < lo || v > hi) {
		char why[96];

		snprintf(why, sizeof(why), "must be in [%g, %g]", lo, hi);
		bad_arg(opt, val, why);
	}
	return v;
}

static int arg_int(const char *opt, const char *val, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(val, &end, 10);
	if (errno || end == val || *end)
		bad_arg(opt, val, "not an integer");
	if (v < lo || v > hi) {
		char why[96];

		snprintf(why, sizeof(why), "must be in [%ld, %ld]", lo, hi);
		bad_arg(opt, val, why);
	}
	return (int)v;
}

/* Path and key go verbatim into the request: no spaces, no control bytes. */
static bool token_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option long_opts[] = {
		{ "proto", required_argument, NULL, 'P' },
		{ "port", required_argument, NULL, 'p' },
		{ "host", required_argument, NULL, 'H' },
		{ "rate", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' },
		{ "conns", required_argument, NULL, 'c' },
		{ "path", required_argument, NULL, 'u' },
		{ "key", required_argument, NULL, 'k' },
		{ "max-outstanding-wait", required_argument, NULL, 'w' },
		{ "closed", no_argument, NULL, 'C' },
		{ "dump", required_argument, NULL, 'D' },
		{ "live", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_proto = false;
	int opt;

	*o = (struct opts){
		.host = "127.0.0.1",
		.port = -1,
		.rate = -1,
		.duration = -1,
		.conns = 8,
		.path = "/",
		.key = "foo",
		.drain_s = DEFAULT_DRAIN_S,
	};
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'P':
			have_proto = true;
			o->proto_name = optarg;
			if (!strcmp(optarg, "http"))
				o->proto = PROTO_HTTP;
			else if (!strcmp(optarg, "redis"))
				o->proto = PROTO_REDIS;
			else if (!strcmp(optarg, "memcached"))
				o->proto = PROTO_MEMCACHED;
			else
				bad_arg("proto", optarg, "expected http, redis or memcached");
			break;
		case 'p':
			o->port = arg_int("port", optarg, 1, 65535);
			break;
		case 'H':
			o->host = optarg;
			break;
		case 'r':
			o->rate = arg_double("rate", optarg, 1e-3, 1e7);
			break;
		case 'd':
			o->duration = arg_double("duration", optarg, 1e-3, 86400);
			break;
		case 'c':
			o->conns = arg_int("conns", optarg, 1, MAX_CONNS);
			break;
		case 'u':
			if (optarg[0] != '/' || !token_ok(optarg))
				bad_arg("path", optarg, "must start with / and have no spaces");
			o->path = optarg;
			break;
		case 'k':
			if (!optarg[0] || strlen(optarg) > 250 || !token_ok(optarg))
				bad_arg("key", optarg, "1-250 bytes, no spaces or controls");
			o->key = optarg;
			break;
		case 'w':
			o->drain_s = arg_double("max-outstanding-wait", optarg, 0, MAX_DRAIN_S);
			break;
		case 'C':
			o->closed = true;
			break;
		case 'D':
			o->dump = optarg;
			break;
		case 'L':
			o->live = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			fprintf(stderr, "loadgen: option '%s' needs a value\n", argv[optind - 1]);
			usage(stderr);
			exit(2);
		default:
			fprintf(stderr, "loadgen: unknown option '%s'\n", argv[optind - 1]);
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loadgen: unexpected argument '%s'\n", argv[optind]);
		exit(2);
	}
	if (!have_proto || o->port < 0 || o->duration < 0 || (!o->closed && o->rate < 0)) {
		fprintf(stderr, "loadgen: missing required option %s\n",
			!have_proto	? "--proto" :
			o->port < 0	? "--port" :
			o->duration < 0 ? "--duration" :
					  "--rate (or --closed)");
		usage(stderr);
		exit(2);
	}
}

static void resolve(struct lg *lg)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%d", lg->o.port);
	rc = getaddrinfo(lg->o.host, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "loadgen: invalid value '%s' for --host: %s\n", lg->o.host,
			gai_strerror(rc));
		exit(2);
	}
	memcpy(&lg->addr, res->ai_addr, res->ai_addrlen);
	lg->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
}

static void build_request(struct lg *lg)
{
	const struct opts *o = &lg->o;
	int n = -1;

	switch (o->proto) {
	case PROTO_HTTP:
		n = asprintf(&lg->req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", o->path);
		break;
	case PROTO_REDIS:
		n = asprintf(&lg->req, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(o->key), o->key);
		break;
	case PROTO_MEMCACHED:
		n = asprintf(&lg->req, "get %s\r\n", o->key);
		break;
	}
	if (n < 0) {
		fprintf(stderr, "loadgen: out of memory\n");
		exit(1);
	}
	lg->req_len = n;
}

static void fatal_errno(const char *what)
{
	fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void setup(struct lg *lg)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TIMER_TOKEN };
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl;
	int i;

	/* Default 50 us slack would blur the schedule we try to keep. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/* Many connections need many descriptors. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	lg->ep = epoll_create1(EPOLL_CLOEXEC);
	if (lg->ep < 0)
		fatal_errno("epoll_create1");
	lg->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (lg->tfd < 0)
		fatal_errno("timerfd_create");
	if (epoll_ctl(lg->ep, EPOLL_CTL_ADD, lg->tfd, &ev))
		fatal_errno("epoll_ctl");

	lg->conns = calloc(lg->o.conns, sizeof(*lg->conns));
	lg->ring = calloc(lg->o.conns, sizeof(*lg->ring));
	if (!lg->conns || !lg->ring)
		fatal_errno("calloc");
	for (i = 0; i < lg->o.conns; i++) {
		lg->conns[i].fd = -1;
		lg->conns[i].rx = malloc(RXBUF_SIZE);
		if (!lg->conns[i].rx)
			fatal_errno("malloc");
	}
	if (!lg->o.closed) {
		lg->n_total = count_requests(lg->o.rate, lg->o.duration);
		if (lg->n_total > MAX_SAMPLES) {
			fprintf(stderr,
				"loadgen: --rate x --duration is %" PRIu64
				" requests, more than %llu\n",
				lg->n_total, MAX_SAMPLES);
			exit(2);
		}
		lg->cap_samples = lg->n_total ? lg->n_total : 1;
		lg->lat = malloc(lg->cap_samples * sizeof(*lg->lat));
		lg->slat = malloc(lg->cap_samples * sizeof(*lg->slat));
		lg->rxlat = malloc(lg->cap_samples * sizeof(*lg->rxlat));
		lg->due = malloc(lg->cap_samples * sizeof(*lg->due));
		if (!lg->lat || !lg->slat || !lg->rxlat || !lg->due)
			fatal_errno("malloc");
	}
}

/* Check the dump file is writable now rather than after a long run. */
static void check_dump(const struct opts *o)
{
	FILE *f;

	if (!o->dump)
		return;
	f = fopen(o->dump, "w");
	if (!f) {
		fprintf(stderr, "loadgen: invalid value '%s' for --dump: %s\n", o->dump,
			strerror(errno));
		exit(2);
	}
	fclose(f);
}

static FILE *open_live(const struct opts *o)
{
	FILE *f;

	if (!o->live)
		return NULL;
	f = fopen(o->live, "w");
	if (!f) {
		fprintf(stderr, "loadgen: invalid value '%s' for --live: %s\n", o->live,
			strerror(errno));
		exit(2);
	}
	return f;
}

static void close_all(struct lg *lg)
{
	int i;

	for (i = 0; i < lg->o.conns; i++) {
		if (lg->conns[i].fd >= 0)
			close(lg->conns[i].fd);
		lg->conns[i].fd = -1;
	}
}

/* Exit frees everything anyway; this keeps sanitizer runs quiet. */
static void free_all(struct lg *lg)
{
	int i;

	for (i = 0; i < lg->o.conns; i++)
		free(lg->conns[i].rx);
	free(lg->conns);
	free(lg->ring);
	free(lg->lat);
	free(lg->slat);
	free(lg->rxlat);
	free(lg->due);
	free(lg->req);
	free(lg->live_tmp);
	if (lg->live)
		fclose(lg->live);
	close(lg->tfd);
	close(lg->ep);
}

int main(int argc, char **argv)
{
	struct lg lg = { 0 };

	parse_args(&lg.o, argc, argv);
	check_dump(&lg.o);
	lg.live = open_live(&lg.o);
	lg.ops = &proto_ops[lg.o.proto];
	lg.t_start = now_ns();
	lg.hard_deadline = lg.t_start + (uint64_t)(lg.o.duration * NSEC_PER_SEC) + HARD_SLACK_NS;
	resolve(&lg);
	build_request(&lg);
	setup(&lg);

	connect_all(&lg);
	if (!lg.n_connected) {
		fprintf(stderr, "loadgen: could not connect to %s:%d: %s\n", lg.o.host, lg.o.port,
			lg.last_connect_errno ? strerror(lg.last_connect_errno) : "timed out");
		return 1;
	}

	lg.t0 = now_ns();
	lg.t0_unix = realtime_ns() / 1e9;
	lg.t_end = lg.t0 + (uint64_t)(lg.o.duration * NSEC_PER_SEC);
	lg.next_live = lg.t0 + NSEC_PER_SEC;
	run_loop(&lg);
	/* Requests still outstanding at the end timed out. */
	lg.errors += lg.in_flight;
	close_all(&lg);

	if (lg.o.dump)
		write_dump(&lg);
	print_report(&lg);
	free_all(&lg);
	return 0;
}
