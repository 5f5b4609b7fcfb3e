#!/usr/bin/python3
"""Integration tests of tailwarden's sensing: real servers, real clients, real BPF.

Each test starts real servers in cgroups of its own (cgroup2 at
/sys/fs/cgroup/unified, prefix tailwarden-test-<pid>), pinned to CPU 0, drives
them from a client pinned to CPU 1 at a load well below saturation, runs
`tailwarden top --json` beside them and compares what tailwarden inferred from
kernel events with what the client measured itself.

Usage: test_sensing.py [-v] [TEST...]     (run as root; without root every test
is skipped). Prints PASS/FAIL/SKIP per test and ends with
"N passed, N failed, N skipped"; exits 1 when any test failed.
"""

import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check, SetupError  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
COUNT_TOL = 0.005       # inferred request counts must match the client's within 0.5 %
P99_TOL = 0.25          # inferred p99 within +-25 % of the client's p99 (see accuracy_test)
P99_ATTEMPTS = 2        # reference runs: a second one only when the first misses P99_TOL
ABSURD_US = 1_000_000   # no request on loopback in these tests takes a second



Skip = tw.Skip


def info(msg):
    if tw.verbose():
        tw.log("  " + msg)


def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            raise Skip("%s is not installed" % t)


# ---------------------------------------------------------------------------
# checks shared by the tests

PCT_KEYS = ("p50", "p90", "p99", "p999", "max")
FIELDS = ("ts", "cgroup", "cgroup_id", "interval_s", "requests", "rps", "latency_us",
          "ttfb_us", "bytes_in", "bytes_out", "conns_open", "outbound", "dropped")


def check_row(row, cg=None):
    """What must hold for every object top prints, loaded or idle."""
    missing = [f for f in FIELDS if f not in row]
    check(not missing, "object lacks %s: %s" % (missing, row))
    if cg is not None:
        check(row["cgroup"] == cg.rel, "cgroup %r, expected %r" % (row["cgroup"], cg.rel))
        check(row["cgroup_id"] == cg.inode,
              "%s: cgroup_id %s, but the cgroup2 directory's inode is %d"
              % (cg.rel, row["cgroup_id"], cg.inode))
    n = row["requests"]
    check(isinstance(n, int) and n >= 0, "requests %r is not a count" % n)
    for key in ("latency_us", "ttfb_us"):
        lat = row[key]
        if n == 0:
            check(lat is None, "%s is %r with 0 requests (expected null)" % (key, lat))
            continue
        check(isinstance(lat, dict), "%s is %r with %d requests" % (key, lat, n))
        vals = [lat.get(k) for k in PCT_KEYS]
        check(all(isinstance(v, (int, float)) for v in vals), "%s lacks percentiles: %r" % (key, lat))
        check(all(v >= 0 for v in vals), "%s has a negative latency: %r" % (key, lat))
        check(vals == sorted(vals), "%s percentiles are not ordered: %r" % (key, lat))
        check(lat["max"] < ABSURD_US, "%s max %.0f us is absurd (>= 1 s): %r"
              % (key, lat["max"], row))
    if n:
        # ttfb <= span for every request, so every ttfb quantile <= the span's
        # (5 % for histogram bucket error).
        for k in PCT_KEYS:
            check(row["ttfb_us"][k] <= row["latency_us"][k] * 1.05 + 1,
                  "ttfb %s %.0f us > latency %s %.0f us" % (k, row["ttfb_us"][k], k,
                                                           row["latency_us"][k]))
    for k in ("bytes_in", "bytes_out", "conns_open"):
        check(isinstance(row[k], int) and row[k] >= 0, "%s %r is not a count" % (k, row[k]))
    check(row["interval_s"] > 0, "interval_s %r" % row["interval_s"])
    check(abs(row["rps"] - n / row["interval_s"]) <= 0.01 * max(1, row["rps"]) + 0.5,
          "rps %.1f != requests/interval_s %.1f" % (row["rps"], n / row["interval_s"]))
    ob = row["outbound"]
    check(ob is None or (isinstance(ob, dict) and "requests" in ob and "latency_us" in ob),
          "outbound %r malformed" % ob)
    if ob is not None and ob["requests"] == 0:
        check(ob["latency_us"] is None, "outbound latency %r with 0 requests" % ob["latency_us"])
    check(isinstance(row["dropped"], dict) and
          all(k in row["dropped"] for k in ("spans", "conns", "cgroups")),
          "dropped %r malformed" % row["dropped"])


def check_top_clean(top, rc):
    check(rc == 0, "tailwarden top exited %s on SIGINT: %s" % (rc, top.stderr_text()[-500:]))
    check(not top.bad_lines, "non-JSON lines on stdout: %r" % top.bad_lines[:3])


def compare_count(what, inferred, client, extra_abs=0):
    tol = COUNT_TOL * client + extra_abs
    check(abs(inferred - client) <= tol,
          "%s: inferred %d requests, client completed %d (diff %+d, allowed +-%.1f)"
          % (what, inferred, client, inferred - client, tol))


def compare_p99(what, inferred, client, context=""):
    check(inferred is not None, "%s: no inferred latency" % what)
    ratio = inferred / client
    check(abs(ratio - 1) <= P99_TOL,
          "%s: inferred p99 %.0f us vs client p99 %.0f us (ratio %.2f, allowed %.2f..%.2f)%s"
          % (what, inferred, client, ratio, 1 - P99_TOL, 1 + P99_TOL, context))


def drops(rows):
    return {k: sum((r.get("dropped") or {}).get(k, 0) for r in rows)
            for k in ("spans", "conns", "cgroups")}


# ---------------------------------------------------------------------------
# one server, one client, whole-run comparison

class Run:
    """One load run and what top inferred for it."""

    def __init__(self, res, rows):
        self.res, self.rows = res, rows
        self.inferred = tw.total(rows)
        self.p50 = tw.merged_quantile(rows, 0.50)
        self.p99 = tw.merged_quantile(rows, 0.99)


def measured_run(sess, srv, web, cli, top_cg, client, proto, rate, duration, conns=8):
    """Serve `rate` req/s for `duration` s from `client` under a fresh `top`.

    Whole-run latency: top runs with an interval longer than the load (load
    duration + 2.5 s) and the load starts as soon as top says its programs are
    attached, so a single interval holds every request of the run and its p99
    IS the run's p99 -- no averaging of percentiles, which has no meaning.
    tw.merged_quantile() folds in any other interval weighted by its request
    count (in case a boundary still splits the run), which reduces to that one
    interval's p99 when it holds everything. The request count is the sum over
    all intervals, whichever way the boundaries fall.
    """
    top = sess.top([web], interval=duration + 2.5, cgroup=top_cg)
    info("sensing mode: %s" % top.mode)
    if client == "loadgen":
        res = sess.loadgen(proto, srv.port, rate, duration, conns=conns, cpu=CLIENT_CPU, cgroup=cli)
    else:
        res = sess.tsclient(proto, srv.port, rate, duration, conns=conns, cpu=CLIENT_CPU, cgroup=cli)
    top.wait_past(res["_t_end"])
    rc = top.stop()
    check_top_clean(top, rc)
    rows = top.rows(web)
    check(rows, "no object for %s" % web.rel)
    for r in rows:
        check_row(r, web)
    if res.get("errors"):
        raise SetupError("%s saw %d errors against %s (load too high?): %s"
                         % (client, res["errors"], proto, res))
    run = Run(res, rows)
    c = res["latency_us"]
    k = res.get("kernel_latency_us") or {}
    info("%s: completed %d, p50 %.0f p99 %.0f us%s | inferred: %d requests (%d in the largest "
         "interval) p50 %s p99 %s us | drops %s"
         % (client, res["completed"], c["p50"], c["p99"],
            " (kernel rx p50 %.0f p99 %.0f)" % (k["p50"], k["p99"]) if k else "",
            run.inferred, max(r["requests"] for r in rows), fmt(run.p50), fmt(run.p99),
            drops(rows)))
    return run


def fmt(v):
    return "-" if v is None else "%.0f" % v


def accuracy_test(sess, start_server, proto, rate, duration, conns=8, extra_checks=None):
    """Counts against loadgen; latency against the kernel-timestamp reference.

    Run 1, loadgen: the inferred request count must equal loadgen's completed
    count within 0.5 %.

    Run 2, tests/lib/tsclient.py at the same load: count again, and the inferred
    p99 must be within +-25 % of the client's p99 measured to the kernel's
    receive timestamp of each reply. Why not loadgen's own p99: a user-space
    client's latency ends when it has woken up and read the reply, which on
    these (nested-virtualisation) hosts adds ~35 us at p50 and 100-200 us at
    p99 AFTER the server's last send -- outside the span by definition, and
    enough to put a correct 150 us p99 at 0.6x of loadgen's. The receive
    timestamp ends where the span ends; it is still measured on the client,
    independently of tailwarden. loadgen's p99 and its ratio are reported
    beside it.

    The inferred span ends when the server's send returns, a few us after
    the reply reached the client's socket on loopback; a burst of host noise
    (another guest's work on a shared host) on the server's CPU in that gap
    lengthens the inferred tail and not the reference's. When run 2 misses
    the tolerance it is repeated once (P99_ATTEMPTS) and the last run is
    judged; every run's ratio is printed. Counts are checked in every run.
    """
    web, cli, top_cg = sess.cgroup("web"), sess.cgroup("client"), sess.cgroup("top")
    srv = start_server(web)
    a = measured_run(sess, srv, web, cli, top_cg, "loadgen", proto, rate, duration, conns)
    if a.res["completed"] < 0.9 * rate * duration:
        raise SetupError("loadgen completed only %d of %d requests"
                         % (a.res["completed"], rate * duration))
    compare_count(proto + " (loadgen)", a.inferred, a.res["completed"])
    tries = []
    for attempt in range(1, P99_ATTEMPTS + 1):
        b = measured_run(sess, srv, web, cli, top_cg, "tsclient", proto, rate, duration, conns)
        compare_count(proto + " (reference client)", b.inferred, b.res["completed"])
        ref = b.res["kernel_latency_us"]
        check(ref, "reference client got no kernel receive timestamps")
        ratio = b.p99 / ref["p99"] if b.p99 is not None else None
        tries.append("run %d: ref p99 %.0f / inferred %s us (%s)"
                     % (attempt, ref["p99"], fmt(b.p99), "-" if ratio is None else "%.2f" % ratio))
        if ratio is None or abs(ratio - 1) <= P99_TOL or attempt == P99_ATTEMPTS:
            break
        info("%s: p99 ratio %.2f outside %.2f..%.2f; a burst of host noise moves one side's "
             "tail in a %g s run, so it is measured once more" % (proto, ratio, 1 - P99_TOL,
                                                                  1 + P99_TOL, duration))
    compare_p99(proto, b.p99, ref["p99"],
                "; p50 client-kernel %.0f / inferred %s us; loadgen p99 %.0f vs inferred %s; %s"
                % (ref["p50"], fmt(b.p50), a.res["latency_us"]["p99"], fmt(a.p99),
                   "; ".join(tries)))
    if extra_checks:
        extra_checks(a, b)
    la = a.res["latency_us"]
    return ("loadgen %d req / inferred %d; ref %d / inferred %d; p99 ref(kernel rx) %.0f / "
            "inferred %s us (%.2f); loadgen p99 %.0f / inferred %s us (%.2f)"
            % (a.res["completed"], a.inferred, b.res["completed"], b.inferred, ref["p99"],
               fmt(b.p99), b.p99 / ref["p99"], la["p99"], fmt(a.p99), a.p99 / la["p99"])
            + ("; " + "; ".join(tries) if len(tries) > 1 else ""))


TESTS = []


def test(fn):
    TESTS.append((fn.__name__[len("test_"):], fn))
    return fn


@test
def test_nginx(sess):
    need("nginx")
    return accuracy_test(sess, lambda cg: sess.nginx(cg, cpu=SERVER_CPU), "http", 3000, 3)


@test
def test_redis(sess):
    need("redis-server")
    return accuracy_test(sess, lambda cg: sess.redis(cg, cpu=SERVER_CPU), "redis", 3000, 3)


@test
def test_memcached(sess):
    need("memcached")
    return accuracy_test(sess, lambda cg: sess.memcached(cg, cpu=SERVER_CPU), "memcached", 3000, 3)


@test
def test_threadpool(sess):
    """2 ms of work per request; requests of one connection move between threads."""
    return accuracy_test(sess, lambda cg: sess.pyserver("threadpool_http.py", cg, cpu=SERVER_CPU),
                         "http", 200, 4)


@test
def test_wrk_nginx(sess):
    """wrk's own count against nginx.

    wrk counts only responses it has read when its timer runs out; each of its
    connections may have one request whose reply nginx had already sent (and
    tailwarden rightly counted) but wrk never read. So the inferred count may
    exceed wrk's by up to one per connection, on top of the 0.5 % tolerance.
    """
    need("nginx", "wrk")
    web, cli, top_cg = sess.cgroup("web"), sess.cgroup("client"), sess.cgroup("top")
    srv = sess.nginx(web, cpu=SERVER_CPU)
    conns = 8
    top = sess.top([web], interval=5.5, cgroup=top_cg)
    res = tw.wrk(sess, srv.port, threads=1, conns=conns, duration="3s", cpu=CLIENT_CPU, cgroup=cli)
    top.wait_past(res["_t_end"])
    rc = top.stop()
    check_top_clean(top, rc)
    rows = top.rows(web)
    for r in rows:
        check_row(r, web)
    if res["errors"] or res["non2xx"]:
        raise SetupError("wrk saw errors: %s" % res)
    inferred = tw.total(rows)
    client = res["completed"]
    tol = COUNT_TOL * client
    check(client - tol <= inferred <= client + tol + conns,
          "inferred %d requests, wrk counted %d (allowed %d..%d: 0.5 %% plus one in-flight "
          "request per connection)" % (inferred, client, client - tol, client + tol + conns))
    return "wrk %d req (%.0f req/s); inferred %d req, p99 %s us" % (
        client, res["rps"] or 0, inferred, fmt(tw.merged_quantile(rows, 0.99)))


@test
def test_redis_benchmark(sess):
    """redis-benchmark's own count against redis.

    Before its GET test redis-benchmark asks the server for two settings
    (CONFIG GET save, CONFIG GET appendonly) on a connection of its own. hiredis
    pipelines the two: they leave in one write and redis answers both in one
    write, and by design pipelined requests collapse into one span (requests =
    response starts). So the expected count is completed + 1.
    """
    need("redis-server", "redis-benchmark")
    db, cli, top_cg = sess.cgroup("cache"), sess.cgroup("client"), sess.cgroup("top")
    srv = sess.redis(db, cpu=SERVER_CPU)
    top = sess.top([db], interval=5.0, cgroup=top_cg)
    res = tw.redis_benchmark(sess, srv.port, n=20000, conns=8, cpu=CLIENT_CPU, cgroup=cli)
    top.wait_past(res["_t_end"])
    rc = top.stop()
    check_top_clean(top, rc)
    rows = top.rows(db)
    for r in rows:
        check_row(r, db)
    inferred = tw.total(rows)
    compare_count("redis-benchmark", inferred, res["completed"] + 1)
    return "redis-benchmark %d GETs (+1 pipelined pair of CONFIG GETs) in %.2f s; inferred %d req, p99 %s us" % (
        res["completed"], res["seconds"], inferred, fmt(tw.merged_quantile(rows, 0.99)))


@test
def test_two_cgroups(sess):
    """nginx and redis loaded at once, top without filters: each on its own.

    Without --cgroup, top prints every cgroup that had traffic. Each server's
    cgroup must match its own client; the clients' cgroups serve nothing, so
    they must show no served requests (their requests are outbound), and a
    bystander cgroup with only a sleeping process must not show traffic.
    """
    need("nginx", "redis-server")
    web, db = sess.cgroup("web"), sess.cgroup("cache")
    cli_web, cli_db = sess.cgroup("client-web"), sess.cgroup("client-cache")
    idle, top_cg = sess.cgroup("bystander"), sess.cgroup("top")
    sess.sleeper(idle)
    ngx = sess.nginx(web, cpu=SERVER_CPU)
    rds = sess.redis(db, cpu=SERVER_CPU)
    duration = 3
    top = sess.top([], interval=duration + 2.5, cgroup=top_cg, extra=["--outbound"])
    a = sess.loadgen("http", ngx.port, 2000, duration, cpu=CLIENT_CPU, cgroup=cli_web,
                     background=True)
    b = sess.loadgen("redis", rds.port, 2000, duration, cpu=CLIENT_CPU, cgroup=cli_db,
                     background=True)
    ra, rb = a.result(duration + 30), b.result(duration + 30)
    top.wait_past(max(ra["_t_end"], rb["_t_end"]), [web, db])
    rc = top.stop()
    check_top_clean(top, rc)
    for cg in (web, db, cli_web, cli_db, idle):
        for r in top.rows(cg):
            check_row(r, cg)
    for res, name in ((ra, "nginx"), (rb, "redis")):
        if res.get("errors"):
            raise SetupError("loadgen saw %d errors against %s" % (res["errors"], name))
    nw, nd = tw.total(top.rows(web)), tw.total(top.rows(db))
    compare_count("nginx cgroup", nw, ra["completed"])
    compare_count("redis cgroup", nd, rb["completed"])
    for cg in (cli_web, cli_db, idle):
        served = tw.total(top.rows(cg))
        check(served == 0, "%s served nothing but top reports %d requests there" % (cg.rel, served))
    ob = {cg.name: tw.total([r["outbound"] for r in top.rows(cg)]) for cg in (cli_web, cli_db)}
    info("outbound requests seen from the client cgroups: %s (clients completed %d, %d)"
         % (ob, ra["completed"], rb["completed"]))
    # --outbound: each client cgroup's own requests, timed as outbound.
    compare_count("client-web outbound", ob["client-web"], ra["completed"])
    compare_count("client-cache outbound", ob["client-cache"], rb["completed"])
    for cg in (web, db):
        check(all(r["outbound"] is not None for r in top.rows(cg)),
              "outbound null with --outbound")
    return "nginx: client %d / inferred %d; redis: client %d / inferred %d; outbound %s" % (
        ra["completed"], nw, rb["completed"], nd, ob)


@test
def test_idle(sess):
    """An idle cgroup gets an object every interval: requests 0, latency null.

    nginx is loaded in a sibling cgroup meanwhile, so an inferrer that leaks
    other cgroups' requests shows up here.
    """
    need("nginx")
    idle, busy, cli, top_cg = (sess.cgroup(n) for n in ("idle", "busy", "client", "top"))
    sess.sleeper(idle)
    ngx = sess.nginx(busy, cpu=SERVER_CPU)
    load = sess.loadgen("http", ngx.port, 1000, 4, cpu=CLIENT_CPU, cgroup=cli, background=True)
    count, interval = 4, 0.5
    top = sess.top([idle], interval=interval, count=count, cgroup=top_cg)
    rc = top.wait_exit(count * interval + 10)
    check(rc is not None, "top --count %d --interval %s did not exit" % (count, interval))
    check(rc == 0, "top exited %s: %s" % (rc, top.stderr_text()[-500:]))
    load.result(30)
    rows = top.rows()
    check(not top.bad_lines, "non-JSON lines on stdout: %r" % top.bad_lines[:3])
    check(len(rows) == count, "expected %d objects (one per interval), got %d: %r"
          % (count, len(rows), rows))
    for r in rows:
        check_row(r, idle)
        check(r["requests"] == 0 and r["latency_us"] is None,
              "idle cgroup reported requests %r latency %r" % (r["requests"], r["latency_us"]))
        check(r["bytes_in"] == 0 and r["bytes_out"] == 0 and r["conns_open"] == 0,
              "idle cgroup reported bytes %d/%d conns %d"
              % (r["bytes_in"], r["bytes_out"], r["conns_open"]))
        check(abs(r["interval_s"] - interval) <= 0.2 * interval,
              "interval_s %.3f, asked for %.1f" % (r["interval_s"], interval))
        check(r["outbound"] is None, "outbound %r without --outbound (not measured: null)"
              % r["outbound"])
    ts = [r["ts"] for r in rows]
    check(ts == sorted(ts), "ts not increasing: %r" % ts)
    first = top.objects[0][0] - top.t_ready
    check(first >= 0.8 * interval, "first object came %.2f s after start, expected one "
          "interval (%.1f s)" % (first, interval))
    return "%d intervals of %.1f s, all requests 0 / latency null" % (count, interval)


# A redis client for test_preexisting: opens CONNS connections and PINGs
# once on each, says "open", waits for a line on stdin, then PINGs N times
# on each connection in turn, one request at a time, and prints the count.
PREEXISTING_CLIENT = r"""
import socket, sys
port, conns, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
def ping(s):
    s.sendall(b"PING\r\n")
    buf = b""
    while not buf.endswith(b"\r\n"):
        d = s.recv(64)
        if not d:
            sys.exit("connection closed")
        buf += d
for s in socks:
    ping(s)
print("open", flush=True)
sys.stdin.readline()
done = 0
for _ in range(n):
    for s in socks:
        ping(s)
        done += 1
print(done, flush=True)
"""


@test
def test_preexisting(sess):
    """Connections opened before tailwarden started are still served ones.

    A daemon that restarts (an upgrade) finds its services' connection pools
    already open. Their requests must be counted exactly, under the server's
    cgroup, and the client's side of the same connections never as served.
    """
    need("redis-server")
    db, cli, top_cg = sess.cgroup("cache"), sess.cgroup("client"), sess.cgroup("top")
    srv = sess.redis(db, cpu=SERVER_CPU)
    conns, n = 8, 500
    client = sess.spawn([sys.executable, "-c", PREEXISTING_CLIENT, str(srv.port), str(conns), str(n)],
                        cgroup=cli, cpu=CLIENT_CPU, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        text=True)
    line = client.stdout.readline().strip()
    check(line == "open", "the client did not open its connections: %r" % line)
    top = sess.top([db, cli], interval=5.0, cgroup=top_cg)
    client.stdin.write("go\n")
    client.stdin.flush()
    done = client.stdout.readline().strip()
    t_end = time.monotonic()
    check(done.isdigit() and int(done) == conns * n, "the client said %r" % done)
    top.wait_past(t_end)
    rc = top.stop()
    check_top_clean(top, rc)
    served = tw.total(top.rows(db))
    client_side = tw.total(top.rows(cli))
    compare_count("connections open before the start", served, conns * n)
    check(client_side == 0, "the client's side counted %d served requests" % client_side)
    return "%d connections opened before top, %d PINGs: inferred %d under the server, %d under " \
        "the client" % (conns, conns * n, served, client_side)


@test
def test_multisend(sess):
    """Replies written as headers, 3 ms, half the body, 3 ms, the rest.

    One reply is one request (not three), and its span ends at the last send,
    so every span is >= 6 ms; time to first byte comes before the first pause.
    """
    out = {}

    def spans(a, b):
        for run, name in ((a, "loadgen run"), (b, "reference run")):
            check(run.p50 is not None and run.p50 >= 6000,
                  "%s: inferred p50 %s us < 6000 us: the span does not end at the last send"
                  % (name, fmt(run.p50)))
        ttfb50 = tw.merged_quantile(a.rows, 0.5, key="ttfb_us")
        check(ttfb50 is not None and ttfb50 <= 0.5 * a.p50,
              "ttfb p50 %s us is not well before the span's end (p50 %s us)"
              % (fmt(ttfb50), fmt(a.p50)))
        out["extra"] = "; inferred p50 %s us, ttfb p50 %s us" % (fmt(a.p50), fmt(ttfb50))

    line = accuracy_test(sess, lambda cg: sess.pyserver("multisend_http.py", cg, cpu=SERVER_CPU,
                                                        args=["--parts", "3", "--gap-ms", "3"]),
                         "http", 100, 3, extra_checks=spans)
    return line + out["extra"]


@test
def test_restart(sess):
    """nginx SIGKILLed (master and worker) and restarted on its port under load.

    Tolerance on the count: loadgen keeps at most one request in flight per
    connection. At the kill each such request was either already answered --
    tailwarden counted it, but the client may have lost it to the reset -- or
    not answered, and then neither side counts it. So inferred - completed lies
    in [0, conns], plus the usual 0.5 %.
    """
    need("nginx")
    web, cli, top_cg = sess.cgroup("web"), sess.cgroup("client"), sess.cgroup("top")
    ngx = sess.nginx(web, cpu=SERVER_CPU)
    rate, duration, conns = 2000, 6, 8
    top = sess.top([web], interval=1.0, cgroup=top_cg)
    load = sess.loadgen("http", ngx.port, rate, duration, conns=conns, cpu=CLIENT_CPU,
                        cgroup=cli, background=True)
    time.sleep(2.0)
    ngx.kill()
    t_kill = time.monotonic()
    sess.nginx(web, cpu=SERVER_CPU, port=ngx.port)
    t_up = time.monotonic()
    res = load.result(duration + 30)
    top.wait_past(res["_t_end"])
    rc = top.stop()
    check_top_clean(top, rc)
    rows = top.rows(web)
    for r in rows:
        check_row(r, web)       # includes: no negative latency, max < 1 s
    info("restart took %.0f ms; client %s" % ((t_up - t_kill) * 1000,
                                              {k: res.get(k) for k in ("sent", "completed", "errors")}))
    if res["completed"] < 0.8 * rate * duration:
        raise SetupError("load did not continue after the restart: client completed %d of %d"
                         % (res["completed"], rate * duration))
    after = [r["requests"] for at, r in top.objects
             if r.get("cgroup") == web.rel and at > t_up + 1.2 and at < res["_t_end"]]
    check(after and all(n > 0 for n in after),
          "no requests inferred in the intervals after the restart: %r" % after)
    inferred = tw.total(rows)
    client = res["completed"]
    tol = COUNT_TOL * client
    check(client - tol <= inferred <= client + tol + conns,
          "inferred %d, client completed %d (allowed %.0f..%.0f)"
          % (inferred, client, client - tol, client + tol + conns))
    worst = max((r["latency_us"]["max"] for r in rows if r["latency_us"]), default=0)
    return "client %d ok / %d errors; inferred %d; worst interval max %.0f us; drops %s" % (
        client, res.get("errors", 0), inferred, worst, drops(rows))


HIDE = "TAILWARDEN_TEST_HIDE_TRACEPOINTS"


def progs():
    """Loaded BPF programs, id -> name."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], stdout=subprocess.PIPE, text=True,
                         timeout=30).stdout
    return {p["id"]: p.get("name") for p in json.loads(out or "[]")}


@test
def test_flavours(sess):
    """The programs older kernels load, on this one: without the
    bpf_rdonly_cast kfunc (before 6.2) TCP's fields are read through
    bpf_skc_to_tcp_sock, same spans; without sock_send_length (before 6.3)
    a reply ends at fexit of tcp_sendmsg/tcp_sendpage, or, where the kernel
    refuses fexit (as these development VMs do, EPERM), the syscall
    fallback takes over and says why. The hooks are hidden by name, as on
    such a kernel; the guest VMs of tests/vm boot the real ones."""
    need("nginx")
    saved = os.environ.get(HIDE)
    try:
        os.environ[HIDE] = "bpf_rdonly_cast"
        helper = accuracy_test(sess, lambda cg: sess.nginx(cg, cpu=SERVER_CPU), "http", 2000, 3)
        # Which programs that top loaded: the helper flavour's, by name (the
        # ones that appeared with it: other tailwardens may run beside).
        before = progs()
        top = sess.top([], interval=1, cgroup=sess.cgroup("top-helper"))
        try:
            names = {n for i, n in progs().items() if i not in before}
        finally:
            top.stop()
        check({"tw_rcv_space_h", "tw_sock_send_h", "tw_set_state_h"} <= names
              and not names & {"tw_rcv_space", "tw_sock_send", "tw_set_state"},
              "without the kfunc, top loaded %s" % sorted(names))
        os.environ[HIDE] = "sock_send_length,sock_recv_length"
        top = sess.top([], interval=1, count=1, cgroup=sess.cgroup("top-nosend"))
        rc = top.stop()
        check(rc == 0, "top without sock_send_length exited %s: %s" % (rc, top.stderr_text()[-500:]))
        mode = top.mode or ""
        check(mode.startswith("arrival") and "fexit of tcp_sendmsg" in mode
              or mode.startswith("syscall") and "refused fexit" in mode,
              "without sock_send_length: neither fexit's arrival mode nor a syscall fallback "
              "that says fexit was refused: %r" % mode)
    finally:
        if saved is None:
            os.environ.pop(HIDE, None)
        else:
            os.environ[HIDE] = saved
    return "no kfunc: %s; no sock_send_length: %s" % (helper, mode[:160])


@test
def test_cli(sess):
    """--cgroup accepts four spellings; an unknown cgroup exits 1, a bad argument 2."""
    cg, top_cg = sess.cgroup("named"), sess.cgroup("top")
    sess.sleeper(cg)
    rel = cg.rel.lstrip("/")
    for spelling in (os.path.join(tw.UNIFIED, rel), os.path.join(tw.CGROUP_FS, rel), rel, "/" + rel):
        top = sess.top([spelling], interval=0.2, count=1, cgroup=top_cg)
        rc = top.wait_exit(10)
        check(rc == 0, "--cgroup %s: exit %s: %s" % (spelling, rc, top.stderr_text()[-300:]))
        rows = top.rows()
        check(len(rows) == 1, "--cgroup %s --count 1: %d objects" % (spelling, len(rows)))
        check_row(rows[0], cg)
    # Exit 1 for an error, 2 for bad usage (tailwarden(8), EXIT STATUS).
    for args, why, want in (([ "--cgroup", cg.rel + "-does-not-exist"], "unknown cgroup", 1),
                            (["--interval", "abc"], "bad --interval", 2),
                            (["--count", "-3"], "bad --count", 2),
                            (["--no-such-option"], "unknown option", 2)):
        p = subprocess.run([tw.TAILWARDEN, "top", "--json"] + args, capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == want, "%s (%s): exit %d, expected %d" %
              (why, " ".join(args), p.returncode, want))
        check(p.stderr.strip(), "%s: exit %d without a message on stderr" % (why, want))
        check(not p.stdout.strip(), "%s: printed %r on stdout" % (why, p.stdout[:200]))
    return "4 spellings of --cgroup, 4 bad invocations"


PHASES = ("queued", "service", "sending")


def check_phases(row):
    """A row's phases: null without requests; else each phase's percentiles
    (ordered) and mean, or null where the mode does not see it (queued
    outside the arrival mode), and the mean span."""
    ph = row.get("phases", "missing")
    if not row["requests"]:
        check(ph is None, "phases %r with 0 requests (expected null)" % (ph,))
        return
    check(isinstance(ph, dict) and "span_mean_us" in ph, "phases malformed: %r" % (ph,))
    for p in PHASES:
        v = ph.get(p + "_us")
        if v is None:
            continue
        vals = [v.get(k) for k in PCT_KEYS]
        check(all(isinstance(x, (int, float)) and x >= 0 for x in vals) and vals == sorted(vals)
              and v.get("mean", -1) >= 0, "phase %s malformed: %r" % (p, v))


def phase_figures(rows):
    """Over a run: requests, each phase's total and the spans' total (us,
    from the means), and each phase's merged p50 and p99."""
    n = tw.total(rows)
    tot, span, p50, p99 = dict.fromkeys(PHASES, 0.0), 0.0, {}, {}
    for r in rows:
        ph = r.get("phases")
        if not r["requests"] or not ph:
            continue
        span += ph["span_mean_us"] * r["requests"]
        for p in PHASES:
            if ph.get(p + "_us"):
                tot[p] += ph[p + "_us"]["mean"] * r["requests"]
    for p in PHASES:
        flat = [{"requests": r["requests"], "x": (r.get("phases") or {}).get(p + "_us")}
                for r in rows]
        p50[p] = tw.merged_quantile(flat, 0.50, key="x")
        p99[p] = tw.merged_quantile(flat, 0.99, key="x")
    return n, tot, span, p50, p99


def phases_case(sess, name, start_server, drive, phase, share, min_requests):
    """Serve, drive, and check what top said: every request's phases add up
    to its span (their totals within 1 %), and `phase` holds at least
    `share` of the time and the largest p99. Returns a summary and the
    figures."""
    web, top_cg = sess.cgroup("web-" + name), sess.cgroup("top-" + name)
    srv = start_server(web)
    top = sess.top([web], interval=1, cgroup=top_cg)
    if not (top.mode or "").startswith("arrival"):
        raise Skip("the queued phase needs the arrival mode; top runs %r" % top.mode)
    t_end = drive(srv)
    top.wait_past(t_end)
    rc = top.stop()
    check_top_clean(top, rc)
    rows = top.rows(web)
    for r in rows:
        check_row(r, web)
        check_phases(r)
    n, tot, span, p50, p99 = phase_figures(rows)
    check(n >= min_requests, "%s: %d requests inferred, expected >= %d" % (name, n, min_requests))
    summed = sum(tot.values())
    check(span > 0 and abs(summed - span) <= 0.01 * span,
          "%s: the phases add up to %.0f us, the spans to %.0f us (more than 1 %% apart)"
          % (name, summed, span))
    got = tot[phase] / span
    figures = ", ".join("%s p50 %s p99 %s us (%.0f %%)" % (p, fmt(p50[p]), fmt(p99[p]),
                                                        100 * tot[p] / span) for p in PHASES)
    info("%s: %d requests, span mean %.0f us; %s" % (name, n, span / n, figures))
    check(got >= share, "%s: %s holds %.0f %% of the time, expected >= %.0f %% (%s)"
          % (name, phase, 100 * got, 100 * share, figures))
    check(all(p99[phase] >= p99[p] for p in PHASES if p99[p] is not None),
          "%s: %s's p99 is not the largest: %s" % (name, phase, figures))
    return "%s: %s dominates (%.0f %%; %s)" % (name, phase, 100 * got, figures), p50, p99


@test
def test_phases(sess):
    """Each request's time split into queued, service and sending, on a test
    server whose split is known, one case each (tests/servers/phases_http.py):
    - service: it sleeps 20 ms before each reply;
    - queued: it serves beside a CPU hog on its CPU (nice -10, so the
      server waits for the CPU before it reads a request);
    - sending: it sends 256 KiB in 16 KiB sends through a 16 KiB send
      buffer to a client that reads 4 KiB every 2 ms through a 4 KiB
      receive buffer.
    Each case names its phase (the largest share of the time and the
    largest p99), and in each the phases add up to the span within 1 %."""
    out = []

    def server(args):
        return lambda cg: sess.pyserver("phases_http.py", cg, cpu=SERVER_CPU, args=args)

    runs = []

    def loadgen(rate, duration):
        def drive(srv):
            runs.append(rate)
            res = sess.loadgen("http", srv.port, rate, duration, conns=8, cpu=CLIENT_CPU,
                               cgroup=sess.cgroup("client-%d-%d" % (rate, len(runs))))
            if res.get("errors"):
                raise SetupError("loadgen saw %d errors: %s" % (res["errors"], res))
            return res["_t_end"]
        return drive

    line, p50, _ = phases_case(sess, "service", server(["--sleep-ms", "20"]), loadgen(40, 4),
                               "service", 0.9, 100)
    check(20000 <= p50["service"] <= 25000,
          "service: p50 %s us, the server sleeps 20 ms per request" % fmt(p50["service"]))
    out.append(line)

    # The hog runs in the server's own cgroup: nice orders threads within a
    # cgroup, not across cgroups of equal weight (a hog in a cgroup of its
    # own gave queueing only 48 % of the time in one CI run). Calibrated: a
    # stronger hog when the first does not make queueing dominate, up to 3.
    hogs = []

    def hogged(nice):
        def start(cg):
            hogs.append(sess.spawn(["nice", "-n", str(nice), tw.PYTHON, "-c", "while True: pass"],
                                   cgroup=cg, cpu=SERVER_CPU))
            return sess.pyserver("phases_http.py", cg, cpu=SERVER_CPU)
        return start

    for i, nice in enumerate((-10, -15, -19)):
        try:
            line, _, _ = phases_case(sess, "queued%d" % i, hogged(nice), loadgen(200, 4), "queued",
                                     0.5, 400)
            info("queued: a hog at nice %d in the server's cgroup" % nice)
            break
        except tw.TestFailure as e:
            if i == 2:
                raise
            info("queued: a hog at nice %d: %s; a stronger one" % (nice, e))
        finally:
            for h in hogs:
                h.kill()
                h.wait()
            hogs.clear()
    out.append(line)

    def slow_reader(srv):
        argv = [tw.PYTHON, os.path.join(tw.SERVERS, "phases_http.py"), "client", "--port",
                str(srv.port), "--requests", "15", "--conns", "2", "--rcvbuf", "4096",
                "--read", "4096", "--pause-ms", "2"]
        res = tw.ClientRun(sess, argv, sess.cgroup("client-slow"), CLIENT_CPU,
                           lambda o: json.loads(o.strip().splitlines()[-1])).start().result(120)
        if res["errors"] or res["completed"] != 30:
            raise SetupError("slow client: %s" % res)
        return res["_t_end"]

    line, _, _ = phases_case(sess, "sending",
                             server(["--body", "262144", "--chunk", "16384", "--sndbuf", "16384"]),
                             slow_reader, "sending", 0.8, 30)
    out.append(line)
    return "; ".join(out)


# ---------------------------------------------------------------------------
# TCP flow figures

FLOWS = os.path.join(tw.SERVERS, "flows.py")
SS_NUM = {k: re.compile(r"\b%s:(\d+)" % k) for k in
          ("cwnd", "mss", "unacked", "sacked", "lost", "bytes_acked", "bytes_received")}
SS_RTT = re.compile(r"\brtt:([\d.]+)/")
SS_RETRANS = re.compile(r"\bretrans:(\d+)/(\d+)")


def ss_sockets(filt):
    """`ss -tinH state connected FILT`: per socket its Send-Q and what its info
    line says (cwnd, mss, rtt in us, retransmitted segments in all, segments
    in flight as tcp_packets_in_flight() counts them, bytes)."""
    out = subprocess.run(["ss", "-tinH", "state", "connected", filt], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    socks, cur = [], None
    for line in out:
        if not line.strip():
            continue
        if not line[0].isspace():
            # State Recv-Q Send-Q Local Peer (the state column: several states asked for).
            # Time-wait and SYN-RECV entries are not full sockets (no info line):
            # tailwarden leaves them out too.
            f = line.split()
            cur = None
            if f[0] not in ("TIME-WAIT", "SYN-RECV"):
                cur = {"state": f[0], "sendq": int(f[2])}
                socks.append(cur)
            continue
        if cur is None:
            continue
        for k, rx in SS_NUM.items():
            m = rx.search(line)
            cur[k] = int(m.group(1)) if m else 0
        m = SS_RTT.search(line)
        cur["rtt_us"] = float(m.group(1)) * 1000 if m else None
        m = SS_RETRANS.search(line)
        cur["retrans_out"], cur["retrans"] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        cur["flight"] = max(cur["unacked"] - cur["sacked"] - cur["lost"], 0) + cur["retrans_out"]
    return socks


def ss_figures(socks):
    """The per-cgroup figures tailwarden reports, computed from ss's sockets."""
    rtts = [x["rtt_us"] for x in socks if x.get("rtt_us") is not None]
    return {
        "sockets": len(socks),
        "cwnd_sum": sum(x["cwnd"] for x in socks), "cwnd_max": max(x["cwnd"] for x in socks),
        "sendq_sum": sum(x["sendq"] for x in socks),
        "sendq_max": max(x["sendq"] for x in socks),
        "flight_sum": sum(x["flight"] for x in socks),
        "mss_max": max(x["mss"] for x in socks),
        "rtt_mean": sum(rtts) / len(rtts) if rtts else None,
        "retrans": sum(x["retrans"] for x in socks),
        "bytes_acked": sum(x["bytes_acked"] for x in socks),
        "bytes_received": sum(x["bytes_received"] for x in socks),
    }


def tw_figures(rows):
    """The same from top's rows of one cgroup: the last row's live figures,
    and the counters summed over every row (the run's totals)."""
    t = rows[-1]["tcp"]
    return {
        "sockets": t["sockets"],
        "cwnd_sum": t["cwnd_segs"]["sum"], "cwnd_max": t["cwnd_segs"]["max"],
        "sendq_sum": t["send_queue_bytes"]["sum"], "sendq_max": t["send_queue_bytes"]["max"],
        "flight_sum": t["flight_segs"]["sum"],
        "mss_max": t["mss_bytes"]["max"],
        "rtt_mean": t["srtt_us"]["mean"],
        "retrans": sum(r["tcp"]["retrans_segs"] for r in rows),
        "bytes_acked": sum(r["tcp"]["bytes_acked"] for r in rows),
        "bytes_received": sum(r["tcp"]["bytes_received"] for r in rows),
    }


EXACT = ("sockets", "cwnd_sum", "cwnd_max", "sendq_sum", "sendq_max", "flight_sum", "mss_max",
         "retrans", "bytes_acked", "bytes_received")
RTT_TOL = 0.2           # srtt mean within 20 % (+ RTT_ABS_US) of ss's
RTT_ABS_US = 20


def flows_rows(top, cg):
    rows = top.rows(cg)
    check(rows, "no object for %s" % cg.rel)
    if any(r.get("tcp", "missing") is None for r in rows):
        # The daemon's own line says which: no iter/tcp or sk_cgrp_data, or a
        # kernel that refuses the iterator (EPERM on one PVM host here).
        said = tw.tcp_flows_said(top.stderr_text())
        raise Skip("the TCP flow figures are null: %s" % (
            said or "this kernel lacks iter/tcp or sk_cgrp_data: %s" % top.stderr_text()[-300:]))
    for r in rows:
        t = r.get("tcp")
        check(isinstance(t, dict) and "retrans_segs" in t and "srtt_us" in t,
              "%s: tcp malformed: %r" % (cg.rel, t))
    # A window's fast retransmits are counted as they happen (the retransmit
    # tracepoint), its retransmitted segments as of the iterator's run in
    # the tick: a window may show more fast ones than the iterator has seen
    # yet, and the next one fewer. Over the run, after the traffic ended,
    # the fast ones are a part of all.
    fast = sum(r["tcp"]["fast_retrans_segs"] for r in rows)
    every = sum(r["tcp"]["retrans_segs"] for r in rows)
    check(fast <= every, "%s: %d fast retransmits of %d retransmitted segments over the run"
          % (cg.rel, fast, every))
    return rows


def compare_ss(what, tw_f, ss_f):
    bad = ["%s %s vs ss %s" % (k, tw_f[k], ss_f[k]) for k in EXACT if tw_f[k] != ss_f[k]]
    r, s = tw_f["rtt_mean"], ss_f["rtt_mean"]
    if s is not None and (r is None or abs(r - s) > RTT_TOL * s + RTT_ABS_US):
        bad.append("srtt mean %s us vs ss %.1f us" % (r, s))
    return ["%s: %s" % (what, b) for b in bad]


def flows_stalled(sess):
    """nginx sends 8 MiB replies to 6 connections whose client stops reading
    after 4 KiB (16 KiB receive buffers): the windows close, nginx's send
    queues fill, and nothing moves. The daemon's figures of each side's
    cgroup, top's last object against `ss -tinH` run just before and just
    after it arrived (a tick whose two ss reads differ is skipped): sockets,
    cwnd, send queue, flight size and MSS equal; srtt mean within 20 % +
    20 us; retransmits and bytes summed over top's windows equal the live
    sockets' totals (the sockets were opened after top started). A second
    top started then sees the same sockets and cwnd from its third tick
    (sockets older than the daemon). Then the client closes them: 0
    sockets, and the totals stay."""
    web, cli, top_cg = sess.cgroup("web"), sess.cgroup("client"), sess.cgroup("top")
    srv = sess.nginx(web, cpu=SERVER_CPU, body_size=8 << 20)
    top = sess.top([web, cli], interval=1, cgroup=top_cg)
    client = sess.spawn([tw.PYTHON, FLOWS, "stall", "--port", str(srv.port), "--conns", "6",
                         "--hold", "60"], cgroup=cli, cpu=CLIENT_CPU, stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
    ready = client.stdout.readline()
    if '"ready"' not in ready:
        raise SetupError("stall client: %r" % ready)
    time.sleep(2)       # the send queues fill, the windows close
    sides = (("nginx", web, "( sport = :%d )" % srv.port),
             ("client", cli, "( dport = :%d )" % srv.port))
    bad, shown = ["no try"], {}
    for attempt in range(6):
        before = {n: ss_figures(ss_sockets(f)) for n, _, f in sides}
        t0 = time.monotonic()
        top.wait_past(t0, [web, cli])
        after = {n: ss_figures(ss_sockets(f)) for n, _, f in sides}
        if before != after:
            info("flows: the sockets moved between two ss reads; another tick")
            continue
        bad = []
        for n, cg, _ in sides:
            got = tw_figures(flows_rows(top, cg))
            shown[n] = (got, after[n])
            bad += compare_ss(n, got, after[n])
        if not bad:
            break
        info("flows try %d: %s" % (attempt + 1, "; ".join(bad)))
    for n, (got, ref) in shown.items():
        info("%s: tailwarden %s" % (n, got))
        info("%s: ss          %s" % (n, ref))
    check(not bad, "figures differ from ss -ti's: %s" % "; ".join(bad))
    check(shown["nginx"][1]["sendq_sum"] > 0, "nginx's send queues are empty: the client read?")
    totals = {n: shown[n][0] for n in shown}
    # Sockets older than the daemon: its first tick walks the TCP hash table
    # and gives them storage, the later ticks walk only that storage. A
    # second top, started now, sees the same live figures from its third tick.
    late = sess.top([web, cli], interval=1, cgroup=sess.cgroup("top-late"))
    for _ in range(3):
        late.wait_past(time.monotonic(), [web, cli])
    for n, cg, f in sides:
        got, ref = tw_figures(flows_rows(late, cg)), ss_figures(ss_sockets(f))
        check(len(late.rows(cg)) >= 3, "%s: the second top gave %d objects"
              % (n, len(late.rows(cg))))
        check(got["sockets"] == ref["sockets"] and got["cwnd_sum"] == ref["cwnd_sum"],
              "%s: sockets older than the daemon: %d sockets, cwnd %d; ss %d, %d"
              % (n, got["sockets"], got["cwnd_sum"], ref["sockets"], ref["cwnd_sum"]))
    check_top_clean(late, late.stop())
    client.stdin.close()        # the client closes its connections
    closed = client.stdout.readline()
    check('"closed"' in closed, "stall client: %r" % closed)
    client.wait(10)
    top.wait_past(time.monotonic() + 0.2, [web, cli])
    rc = top.stop()
    check_top_clean(top, rc)
    for n, cg, _ in sides:
        got = tw_figures(flows_rows(top, cg))
        check(got["sockets"] == 0, "%s: %d sockets after the client closed them"
              % (n, got["sockets"]))
        for k in ("bytes_acked", "bytes_received", "retrans"):
            check(got[k] >= totals[n][k],
                  "%s: %s went from %d to %d when the sockets closed (closed sockets' counts "
                  "must stay)" % (n, k, totals[n][k], got[k]))
    g, r = shown["nginx"]
    return ("6 stalled connections, nginx: cwnd %d/%d, send queue %d/%d B, srtt %s/%.0f us "
            "(tailwarden/ss); client: %d/%d B received"
            % (g["cwnd_sum"], r["cwnd_sum"], g["sendq_sum"], r["sendq_sum"], fmt(g["rtt_mean"]),
               r["rtt_mean"] or 0, shown["client"][0]["bytes_received"],
               shown["client"][1]["bytes_received"]))


NSTAT = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPFastRetrans",
         "TcpExtTCPSlowStartRetrans", "TcpExtTCPLossProbes")


def nstat():
    """The host's counters (absolute, nstat -az) of NSTAT."""
    out = subprocess.run(["nstat", "-az"] + list(NSTAT), capture_output=True, text=True,
                         check=True).stdout
    got = {}
    for line in out.splitlines():
        f = line.split()
        if f and f[0] in NSTAT:
            got[f[0]] = int(f[1])
    if "TcpRetransSegs" not in got:
        raise SetupError("nstat printed no TcpRetransSegs: %r" % out)
    return got


RETRANS_TOL = 0.05      # tailwarden's retransmits within 5 % (+ RETRANS_ABS) below nstat's
RETRANS_ABS = 5


def lossy_link(sess, tag):
    """A veth pair to a network namespace, with loss on the host side's
    egress: netem loss 5 %, or where the kernel has no sch_netem, a tbf
    whose queue overflows (20 Mbit/s, 32 KiB). Returns (peer address, what
    loses, cleanup)."""
    ns, a, b = "tw-flows-%d" % os.getpid(), "twfa%d" % os.getpid(), "twfb%d" % os.getpid()
    done = []

    def sh(*argv):
        return subprocess.run(argv, capture_output=True, text=True)

    def cleanup():
        sh("ip", "link", "del", a)          # its peer and qdisc go with it
        sh("ip", "netns", "del", ns)

    try:
        for argv in (["ip", "netns", "add", ns],
                     ["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                     ["ip", "link", "set", b, "netns", ns],
                     ["ip", "addr", "add", "10.203.%d.1/30" % tag, "dev", a],
                     ["ip", "link", "set", a, "up"],
                     ["ip", "-n", ns, "addr", "add", "10.203.%d.2/30" % tag, "dev", b],
                     ["ip", "-n", ns, "link", "set", b, "up"],
                     ["ip", "-n", ns, "link", "set", "lo", "up"]):
            p = sh(*argv)
            if p.returncode:
                raise SetupError("%s: %s" % (" ".join(argv), p.stderr.strip()))
        p = sh("tc", "qdisc", "add", "dev", a, "root", "netem", "loss", "5%")
        how = "netem loss 5%"
        if p.returncode:
            info("netem: %s; a tbf that overflows instead" % p.stderr.strip())
            p = sh("tc", "qdisc", "add", "dev", a, "root", "tbf", "rate", "20mbit", "burst",
                   "16kb", "limit", "32kb")
            how = "no sch_netem in this kernel: tbf 20 Mbit/s, 32 KiB queue"
            if p.returncode:
                raise Skip("neither sch_netem nor sch_tbf: %s" % p.stderr.strip())
        done.append(ns)
        return ns, "10.203.%d.2" % tag, how, cleanup
    finally:
        if not done:
            cleanup()


def flows_lossy(sess):
    """4 connections upload 2 MiB each through a lossy veth link to a sink
    in a network namespace; the uploader's cgroup's retransmitted segments,
    summed over top's windows, against nstat's TcpRetransSegs over the same
    time (the whole host's: tailwarden's may be lower by other traffic's,
    within 5 % + 5, never higher); the fast ones against TCPFastRetrans and
    the timeouts against TCPTimeouts likewise. `tailwarden record` runs
    beside it, and `replay --json` of that recording says the same count."""
    cli, sink_cg, top_cg = sess.cgroup("uploader"), sess.cgroup("sink"), sess.cgroup("top2")
    ns, addr, how, cleanup = lossy_link(sess, os.getpid() % 200 + 20)
    try:
        port = 5001
        sess.spawn(["ip", "netns", "exec", ns, tw.PYTHON, FLOWS, "sink", "--host", addr,
                    "--port", str(port)], cgroup=sink_cg, cpu=SERVER_CPU)
        top = sess.top([cli], interval=1, cgroup=top_cg)
        d = sess.tmpdir("flows")
        rec = os.path.join(d, "flows.jsonl.gz")
        recorder = sess.spawn([tw.TAILWARDEN, "record", "--out", rec, "--period", "1s",
                               "--cgroup", cli.rel], cgroup=top_cg, stderr=subprocess.PIPE,
                              text=True)
        for line in recorder.stderr:
            if "recording to" in line:
                break
        else:
            raise SetupError("tailwarden record did not start")
        time.sleep(1.2)
        for _ in range(50):     # the sink listens
            if subprocess.run(["ip", "netns", "exec", ns, "ss", "-tlnH", "sport = :%d" % port],
                              capture_output=True, text=True).stdout.strip():
                break
            time.sleep(0.1)
        n0 = nstat()
        res = tw.ClientRun(sess, [tw.PYTHON, FLOWS, "upload", "--host", addr, "--port", str(port),
                                  "--conns", "4", "--bytes", str(2 << 20)], cli, CLIENT_CPU,
                           lambda o: json.loads(o.strip().splitlines()[-1])).start().result(120)
        time.sleep(0.5)         # the last ACKs and FINs
        n1 = nstat()
        top.wait_past(time.monotonic())
        time.sleep(1.5)         # the recorder's next tick, too
        sess.stop(recorder, signal.SIGINT, 10)
        rc = top.stop()
        check_top_clean(top, rc)
        rows = flows_rows(top, cli)
    finally:
        cleanup()
    got = sum(r["tcp"]["retrans_segs"] for r in rows)
    fast = sum(r["tcp"]["fast_retrans_segs"] for r in rows)
    tmo = [r["tcp"]["timeouts"] for r in rows]
    acked = sum(r["tcp"]["bytes_acked"] for r in rows)
    host = n1["TcpRetransSegs"] - n0["TcpRetransSegs"]
    info("lossy: %s; %s; nstat %s; tailwarden %d retransmitted (%d fast, timeouts %s), "
         "%d bytes acked" % (how, res, {k: n1.get(k, 0) - n0.get(k, 0) for k in NSTAT}, got,
                             fast, "unknown" if None in tmo else sum(tmo), acked))
    if host < 20:
        raise SetupError("only %d retransmitted segments on the host: the link lost too little"
                         % host)
    check(host - RETRANS_TOL * host - RETRANS_ABS <= got <= host,
          "tailwarden counted %d retransmitted segments, nstat %d (allowed %d..%d)"
          % (got, host, host - RETRANS_TOL * host - RETRANS_ABS, host))
    # Fast retransmits as the kernel counts them (TCPFastRetrans), and at
    # most its tail loss probes more; timeouts as its TCPTimeouts, where known.
    nf, lp = (n1.get(k, 0) - n0.get(k, 0) for k in ("TcpExtTCPFastRetrans",
                                                   "TcpExtTCPLossProbes"))
    check(nf - RETRANS_TOL * nf - RETRANS_ABS <= fast <= nf + lp,
          "tailwarden counted %d fast retransmits, nstat TCPFastRetrans %d (+%d loss probes)"
          % (fast, nf, lp))
    if None not in tmo:
        nt = n1.get("TcpExtTCPTimeouts", 0) - n0.get("TcpExtTCPTimeouts", 0)
        check(nt - RETRANS_TOL * nt - RETRANS_ABS <= sum(tmo) <= nt,
              "tailwarden counted %d timeouts, nstat TCPTimeouts %d" % (sum(tmo), nt))
    check(acked >= res["sent"], "%d bytes acked of %d sent" % (acked, res["sent"]))
    # The network signal counts retransmissions (one per retransmitted buffer,
    # of one or more segments) at the same tracepoint: some, and no more than
    # the segments.
    ev = sum(r.get("tcp_retransmits") or 0 for r in rows)
    check(0 < ev <= got, "tcp_retransmits %d for %d retransmitted segments" % (ev, got))
    pol = os.path.join(d, "policies")
    os.makedirs(pol)
    with open(os.path.join(pol, "up.policy"), "w") as f:
        f.write("[Service]\nCgroup=%s\nClass=latency-critical\n[Objective]\nPercentile=99\n"
                "Target=5ms\n" % cli.rel)
    p = subprocess.run([tw.TAILWARDEN, "replay", rec, "--policies", pol, "--json"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "replay exited %d: %s" % (p.returncode, p.stderr[-300:]))
    summ = json.loads(p.stdout.strip().splitlines()[-1])["summary"]
    rt = (summ["services"]["up"].get("tcp") or {}).get("retrans_segs")
    check(rt is not None and host - RETRANS_TOL * host - RETRANS_ABS <= rt <= host,
          "replay of the recording says %s retransmitted segments, nstat %d" % (rt, host))
    return ("%s: nstat +%d, tailwarden %d (%d fast; %d retransmissions), replay %d"
            % (how, host, got, fast, ev, rt))


@test
def test_flows(sess):
    """TCP flow figures per cgroup (the socket iterator) against ss -ti and
    nstat: flows_stalled, then flows_lossy."""
    need("nginx", "ss", "nstat", "ip", "tc")
    return flows_stalled(sess) + "; " + flows_lossy(sess)


# ---------------------------------------------------------------------------
# runner

def in_session(name):
    """Each test runs in a Session of its own, handed to it."""
    def wrap(fn):
        with tw.Session(tag=name.replace("_", "-")) as sess:
            return fn(sess)
    return wrap


def main(argv):
    return tw.main(__doc__, TESTS, argv, "loads BPF programs and creates cgroups",
                   run=lambda name, fn: tw.run_one(name, fn, in_session(name)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
