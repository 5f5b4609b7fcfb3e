#!/usr/bin/python3
"""tailwarden benchmarks (not tests: they print tables and assert nothing).

  accuracy  nginx, redis, memcached at ~30/60/90 % of the capacity measured
            first with `loadgen --closed`: client vs inferred p50, p99, req/s
  overhead  nginx throughput at saturation (wrk, pinned) with and without
            `tailwarden top` running, alternating runs, medians and ratio
  syscalls  ns per socket send/recv and per getppid() from a tight loop
            (tests/bench/syscall_loop.c), with and without `tailwarden top`

Usage: bench.py [--runs N] [SECTION...]   (root; default: all sections)
Servers run on CPU 0, clients on CPU 1, everything in cgroups under
tailwarden-test-<pid> that are removed at the end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
SYSCALL_LOOP = os.path.join(tw.OUTPUT, "syscall_loop")


def table(title, header, rows):
    cols = list(zip(*([header] + rows))) if rows else [[h] for h in header]
    widths = [max(len(str(c)) for c in col) for col in cols]
    print()
    print(title)
    line = "  ".join(str(h).rjust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    sys.stdout.flush()


def ratio(a, b):
    return "-" if a is None or not b else "%.2f" % (a / b)


def num(v):
    return "-" if v is None else "%.0f" % v


# ---------------------------------------------------------------------------
# (a) accuracy

def start(sess, kind, cg):
    if kind == "nginx":
        return sess.nginx(cg, cpu=SERVER_CPU), "http"
    if kind == "redis":
        return sess.redis(cg, cpu=SERVER_CPU), "redis"
    return sess.memcached(cg, cpu=SERVER_CPU), "memcached"


def accuracy(args):
    """Inferred latency over a whole load run: top's interval is longer than
    the load, so one interval holds the run (see twtest.merged_quantile).
    Inferred req/s = inferred requests / load duration, beside the client's."""
    rows = []
    for kind in ("nginx", "redis", "memcached"):
        with tw.Session(tag="bench-acc") as sess:
            web, cli = sess.cgroup("web"), sess.cgroup("client")
            srv, proto = start(sess, kind, web)
            cap = sess.loadgen(proto, srv.port, 1, 3, conns=args.conns, cpu=CLIENT_CPU,
                               cgroup=cli, extra=["--closed"])["rps"]
            tw.log("%s: closed-loop capacity %.0f req/s" % (kind, cap))
            for frac in (0.3, 0.6, 0.9):
                rate = int(cap * frac)
                top = sess.top([web], interval=args.duration + 2.5, cgroup=sess.cgroup("top-%d" % rate))
                res = sess.loadgen(proto, srv.port, rate, args.duration, conns=args.conns,
                                   cpu=CLIENT_CPU, cgroup=cli)
                top.wait_past(res["_t_end"])
                top.stop()
                tr = top.rows(web)
                p50, p99 = tw.merged_quantile(tr, 0.5), tw.merged_quantile(tr, 0.99)
                c, rx = res["latency_us"], res["rx_latency_us"]
                inf_rps = tw.total(tr) / args.duration
                rows.append([kind, "%d%%" % (frac * 100), rate,
                             num(c["p50"]), num(rx["p50"]), num(p50), ratio(p50, rx["p50"]),
                             num(c["p99"]), num(rx["p99"]), num(p99), ratio(p99, rx["p99"]),
                             ratio(p99, c["p99"]),
                             num(res["rps"]), num(inf_rps), res.get("errors", 0)])
                tw.log("  %s" % rows[-1])
    table("(a) accuracy: client vs inferred (latency in us; %d s open-loop runs, %d conns; "
          "server CPU %d, client CPU %d)" % (args.duration, args.conns, SERVER_CPU, CLIENT_CPU),
          ["server", "load", "offered/s", "cli p50", "rx p50", "inf p50", "inf/rx",
           "cli p99", "rx p99", "inf p99", "inf/rx", "inf/cli", "cli req/s", "inf req/s",
           "errors"], rows)
    print("cli = loadgen, write() to the reply read and parsed; rx = loadgen, write() to the "
          "kernel's receive\ntimestamp (SO_TIMESTAMPNS) of the reply's last segment; inf = "
          "tailwarden, arrival at the server's\nsocket to its last send. cli also holds the "
          "client's own wake-up and read after the reply\nlanded (tens of us on this VM), "
          "which is outside the span: compare inf with rx.")


# ---------------------------------------------------------------------------
# (b) overhead on nginx throughput

OVERHEAD_MODES = (("without", None), ("floor", "floor"), ("requests", ["--no-contention"]),
                  ("all", []))
OVERHEAD_LABELS = {"without": "without top",
                   "floor": "floor: empty BPF progs, same 3 hooks",
                   "requests": "top --no-contention",
                   "all": "top (requests + contention)"}
FLOOR = os.path.join(tw.OUTPUT, "floor")


def attach(sess, extra, cg):
    """Start what a mode measures (nothing, the floor programs, or top);
    return a function that stops it."""
    if extra is None:
        return lambda: None
    if extra == "floor":
        if not os.access(FLOOR, os.X_OK):
            raise tw.SetupError("%s not built (make bench builds it)" % FLOOR)
        p = sess.spawn([FLOOR], cgroup=cg, stdout=subprocess.PIPE)
        line = p.stdout.readline().decode()
        if "attached" not in line:
            raise tw.SetupError("floor did not attach: %r" % line)
        return lambda: sess.stop(p)
    top = sess.top([], interval=1.0, cgroup=cg, extra=extra)
    return top.stop


def overhead(args):
    """nginx at saturation without top, with the request sensor only, and with
    every sensor; the modes rotate each round so drift hits all alike."""
    with tw.Session(tag="bench-ovh") as sess:
        web, cli, topcg = sess.cgroup("web"), sess.cgroup("client"), sess.cgroup("top")
        srv = sess.nginx(web, cpu=SERVER_CPU)
        tw.wrk(sess, srv.port, threads=1, conns=32, duration="1s", cpu=CLIENT_CPU, cgroup=cli)
        res = {m: [] for m, _ in OVERHEAD_MODES}
        for i in range(args.runs):
            k = i % len(OVERHEAD_MODES)
            for mode, extra in OVERHEAD_MODES[k:] + OVERHEAD_MODES[:k]:
                stop = attach(sess, extra, topcg)
                r = tw.wrk(sess, srv.port, threads=1, conns=32, duration="%ds" % args.wrk_s,
                           cpu=CLIENT_CPU, cgroup=cli)
                stop()
                res[mode].append(r["rps"])
                tw.log("  run %d %-9s: %.0f req/s" % (i + 1, mode, r["rps"]))
    base = statistics.median(res["without"])
    rows = []
    for mode, _ in OVERHEAD_MODES:
        v = res[mode]
        m = statistics.median(v)
        rows.append([OVERHEAD_LABELS[mode], "%.0f" % m, "%.3f" % (m / base), "%.0f" % min(v),
                     "%.0f" % max(v), " ".join("%.0f" % x for x in v)])
    table("(b) overhead: nginx at saturation, wrk -t1 -c32 -d%ds, %d rotating runs each"
          % (args.wrk_s, args.runs), ["", "median req/s", "ratio", "min", "max", "runs"], rows)
    print("floor = empty BPF programs on the request sensor's three tracepoints, attached and "
          "doing nothing:\nthe share of the overhead that is the hooks' own dispatch, not the "
          "sensor's work.")


# ---------------------------------------------------------------------------
# (c) ns per syscall

def build_syscall_loop():
    src = os.path.join(tw.REPO, "tests", "bench", "syscall_loop.c")
    if os.path.exists(SYSCALL_LOOP) and os.path.getmtime(SYSCALL_LOOP) >= os.path.getmtime(src):
        return
    os.makedirs(tw.OUTPUT, exist_ok=True)
    subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o",
                    SYSCALL_LOOP, src, "-lm"], check=True)


def syscalls(args):
    build_syscall_loop()
    res = {m: [] for m, _ in OVERHEAD_MODES}
    with tw.Session(tag="bench-sys") as sess:
        cg, topcg = sess.cgroup("loop"), sess.cgroup("top")
        for i in range(args.runs):
            k = i % len(OVERHEAD_MODES)
            for mode, extra in OVERHEAD_MODES[k:] + OVERHEAD_MODES[:k]:
                stop = attach(sess, extra, topcg)
                p = sess.spawn([SYSCALL_LOOP, "-n", str(args.iterations), "-r", "5"], cgroup=cg,
                               cpu=CLIENT_CPU, stdout=subprocess.PIPE)
                out, _ = p.communicate(timeout=120)
                stop()
                r = json.loads(out)
                res[mode].append(r)
                tw.log("  run %d %-9s: sock op %.0f ns, getppid %.0f ns"
                       % (i + 1, mode, r["sock_op_ns"], r["getppid_ns"]))
    rows = []
    for key, what in (("sock_op_ns", "socket send or recv (1 byte, loopback TCP)"),
                      ("getppid_ns", "getppid() (no socket)")):
        a = statistics.median(r[key] for r in res["without"])
        row = [what, "%.0f" % a]
        for mode in ("floor", "requests", "all"):
            # Rounds rotate, so pair each run with the same round's run
            # without top: the median of those differences cancels drift.
            d = statistics.median(w[key] - wo[key] for w, wo in zip(res[mode], res["without"]))
            row += ["%+.0f" % d, "%+.1f%%" % (d / a * 100)]
        rows.append(row)
    table("(c) cost per syscall, tight loop on CPU %d, %d rotating runs each "
          "(each run: median of 5 x %d iterations)" % (CLIENT_CPU, args.runs, args.iterations),
          ["operation", "ns without top", "added: floor (empty progs)", "",
           "added: top --no-contention", "", "added: top (all sensors)", ""], rows)
    print("floor = empty BPF programs on sock_recv_length, sock_send_length and sk_data_ready:\n"
          "what any program on those hooks costs here before doing any work.")


SECTIONS = {"accuracy": accuracy, "overhead": overhead, "syscalls": syscalls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*", metavar="SECTION",
                    help="any of: %s (default: all)" % " ".join(SECTIONS))
    ap.add_argument("--runs", type=int, default=5, help="alternating runs per mode (>= 5)")
    ap.add_argument("--duration", type=int, default=4, help="accuracy: seconds per load")
    ap.add_argument("--conns", type=int, default=8, help="accuracy: loadgen connections")
    ap.add_argument("--wrk-s", type=int, default=5, help="overhead: seconds per wrk run")
    ap.add_argument("--iterations", type=int, default=200000, help="syscalls: loop length")
    args = ap.parse_args()
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        ap.error("unknown section(s): %s" % " ".join(bad))
    if os.geteuid() != 0:
        print("benchmarks need root (BPF, cgroups); skipped")
        return 0
    if not os.access(tw.TAILWARDEN, os.X_OK):
        print("%s is not built (run make)" % tw.TAILWARDEN, file=sys.stderr)
        return 1
    t0 = time.monotonic()
    for name in args.sections or list(SECTIONS):
        SECTIONS[name](args)
    tw.log("benchmarks took %.0f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
