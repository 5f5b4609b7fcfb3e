/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Prometheus endpoint: GET /metrics served by libmicrohttpd from its
 * own thread (epoll), with a per-connection timeout and a connection
 * limit, so that no client can stall the control loop. The loop renders
 * the text once per tick and swaps it in (metrics_publish); a request only
 * copies it under a mutex.
 */
#ifndef TW_METRICS_H
#define TW_METRICS_H

#include <stddef.h>

#define METRICS_CONNECTION_LIMIT 64
/* Connections past the limit wait in the kernel's accept queue, this long. */
#define METRICS_BACKLOG 1024
#define METRICS_TIMEOUT_S 10

struct metrics;

/*
 * Listen on address ("IPV4:PORT" or "[IPV6]:PORT") and serve. 0 or
 * -errno (-EADDRINUSE when the port is taken); nothing is left open on
 * error.
 */
int metrics_start(const char *address, struct metrics **out);
/* The new exposition text; takes text (malloc'd) over. m may be NULL. */
void metrics_publish(struct metrics *m, char *text, size_t len);
/* Stop serving (waits for the thread). NULL is fine. */
void metrics_stop(struct metrics *m);

#endif
