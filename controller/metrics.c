// SPDX-License-Identifier: GPL-2.0
/* /metrics over libmicrohttpd, in a thread of its own (see metrics.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include "common/log.h"
#include "controller/metrics.h"
#include "policies/config.h"

struct metrics {
	struct MHD_Daemon *d;
	pthread_mutex_t lock;
	char *text; /* the last tick's exposition, NULL before the first */
	size_t len;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct metrics *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *copy = NULL;
	size_t len = 0;
	bool have;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
	pthread_mutex_lock(&m->lock);
	have = m->text != NULL;
	if (have) {
		copy = malloc(m->len ? m->len : 1);
		if (copy) {
			memcpy(copy, m->text, m->len);
			len = m->len;
		}
	}
	pthread_mutex_unlock(&m->lock);
	if (!have)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "starting\n");
	if (!copy)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	r = MHD_create_response_from_buffer(len, copy, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(copy);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* Our own socket, so that a taken port is a clear -EADDRINUSE. */
static int listen_on(const char *address)
{
	struct sockaddr_storage ss;
	unsigned len;
	int fd, one = 1, r;

	if (config_parse_address(address, &ss, &len))
		return -EINVAL;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, METRICS_BACKLOG) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_debug("metrics: %s", buf);
}

int metrics_start(const char *address, struct metrics **out)
{
	struct metrics *m = calloc(1, sizeof(*m));
	sigset_t all, old;
	int fd;

	if (!m)
		return -ENOMEM;
	fd = listen_on(address);
	if (fd < 0) {
		free(m);
		return fd;
	}
	pthread_mutex_init(&m->lock, NULL);
	/*
	 * The server's thread inherits our signal mask: with every signal
	 * blocked there, SIGTERM and SIGHUP reach the event loop's signalfd
	 * and nothing else.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	m->d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				on_request, m, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_TIMEOUT_S,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_CONNECTION_LIMIT,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!m->d) {
		close(fd);
		pthread_mutex_destroy(&m->lock);
		free(m);
		return -EIO;
	}
	*out = m;
	return 0;
}

void metrics_publish(struct metrics *m, char *text, size_t len)
{
	char *old;

	if (!m) {
		free(text);
		return;
	}
	pthread_mutex_lock(&m->lock);
	old = m->text;
	m->text = text;
	m->len = len;
	pthread_mutex_unlock(&m->lock);
	free(old);
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	pthread_mutex_destroy(&m->lock);
	free(m->text);
	free(m);
}
