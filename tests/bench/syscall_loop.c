// SPDX-License-Identifier: GPL-2.0
/*
 * syscall_loop: the cost of one syscall, as a tight loop sees it.
 *
 * tailwarden hooks socket sends and TCP's copies to the reader
 * (sock_send_length, tcp_rcv_space_adjust) and, in its syscall fallback
 * mode, every syscall. This measures what such hooks add: run it with and without
 * `tailwarden top` attached and subtract.
 *
 *  - sendrecv: a connected loopback TCP pair in one thread; each iteration
 *    sends 1 byte on one end and receives it on the other. Reported per
 *    operation (half an iteration), so "ns per socket send/recv".
 *  - rr: the same pair as a client and a server: a 1-byte request, read
 *    and answered with 1 byte, the answer read. Reported per round trip.
 *  - getppid: a syscall that touches no socket (raw syscall(2): glibc does
 *    not cache it, but be explicit), reported per call.
 *
 * Each test runs --reps times; the median of the per-op times is printed,
 * with the minimum, as one JSON line on stdout.
 *
 * usage: syscall_loop [-n ITERATIONS] [-r REPS]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* A connected loopback TCP pair: fds[0] is the client end, fds[1] the server's. */
static int tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int one = 1, l, c, s;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -errno;
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		goto fail_l;
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		goto fail_l;
	if (connect(c, (struct sockaddr *)&a, sizeof(a)))
		goto fail_c;
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		goto fail_c;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
	fds[0] = c;
	fds[1] = s;
	return 0;
fail_c:
	close(c);
fail_l:
	close(l);
	return -errno;
}

/* ns per socket operation (a send or a recv) over n send+recv iterations. */
static double run_sendrecv(const int fds[2], long n)
{
	char b = 'x';
	double t0;
	long i;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		if (send(fds[0], &b, 1, 0) != 1 || recv(fds[1], &b, 1, 0) != 1) {
			perror("send/recv");
			exit(1);
		}
	}
	return (now_ns() - t0) / (2.0 * n);
}

/*
 * ns per request/response round trip: the client end sends a 1-byte
 * request, the server end reads it and answers 1 byte, the client reads
 * the answer. Every hook of the request sensor runs once or twice per
 * iteration, the server's span included, as for one small request to a
 * real server.
 */
static double run_rr(const int fds[2], long n)
{
	char b = 'x';
	double t0;
	long i;

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		if (send(fds[0], &b, 1, 0) != 1 || recv(fds[1], &b, 1, 0) != 1 ||
		    send(fds[1], &b, 1, 0) != 1 || recv(fds[0], &b, 1, 0) != 1) {
			perror("request/response");
			exit(1);
		}
	}
	return (now_ns() - t0) / n;
}

static double run_getppid(long n)
{
	volatile long sink = 0;
	double t0;
	long i;

	t0 = now_ns();
	for (i = 0; i < n; i++)
		sink += syscall(SYS_getppid);
	(void)sink;
	return (now_ns() - t0) / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	long n = 200000;
	int reps = 5, opt, fds[2], r, i;
	double *sr, *rr, *gp;

	while ((opt = getopt(argc, argv, "n:r:h")) != -1) {
		switch (opt) {
		case 'n':
			n = strtol(optarg, NULL, 10);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: %s [-n ITERATIONS] [-r REPS]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (n <= 0 || reps <= 0 || reps > 1000) {
		fprintf(stderr, "bad -n or -r\n");
		return 2;
	}
	r = tcp_pair(fds);
	if (r < 0) {
		fprintf(stderr, "loopback TCP pair: %s\n", strerror(-r));
		return 1;
	}
	sr = calloc(reps, sizeof(*sr));
	rr = calloc(reps, sizeof(*rr));
	gp = calloc(reps, sizeof(*gp));
	if (!sr || !rr || !gp)
		return 1;
	run_sendrecv(fds, n / 10 + 1); /* warm up caches and the connection */
	run_rr(fds, n / 20 + 1);
	run_getppid(n / 10 + 1);
	for (i = 0; i < reps; i++) {
		sr[i] = run_sendrecv(fds, n);
		rr[i] = run_rr(fds, n / 2);
		gp[i] = run_getppid(n);
	}
	printf("{\"iterations\":%ld,\"reps\":%d,", n, reps);
	printf("\"sock_op_ns\":%.1f,", median(sr, reps));
	printf("\"sock_op_min_ns\":%.1f,", sr[0]);
	printf("\"rr_ns\":%.1f,", median(rr, reps));
	printf("\"getppid_ns\":%.1f,", median(gp, reps));
	printf("\"getppid_min_ns\":%.1f}\n", gp[0]);
	close(fds[0]);
	close(fds[1]);
	free(sr);
	free(rr);
	free(gp);
	return 0;
}
