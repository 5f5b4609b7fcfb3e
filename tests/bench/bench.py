#!/usr/bin/python3
"""tailwarden benchmarks (not tests: they print tables and assert nothing).

  accuracy  nginx, redis, memcached at ~30/60/90 % of the capacity measured
            first with `loadgen --closed`: client vs inferred p50, p99, req/s
  overhead  nginx, redis (redis-benchmark -P 1), memcached at saturation, client
            on the other CPU and on the same CPU: untraced, the floor (empty
            programs on the request sensor's hooks) and tailwarden's default
            sensors, taking turns in 0.25 s slots within one load (more
            rounds for nginx, whose rows carry the target), ratios of
            medians and the CPU time each request pays
  switch    perf bench sched pipe on one CPU: untraced, an empty sched_switch
            program (the hook's floor), tailwarden's default sensors
  syscalls  ns per socket send/recv, per request/response round trip and per
            getppid() from a tight loop
            (tests/bench/syscall_loop.c): untraced, floor, default sensors
Each table prints its targets (issue 10) beside the figures; the throughput
target is nginx's, redis and memcached are measured beside it. The sensors
are loaded once per section by tests/bench/onoff.c, as `tailwarden top`
loads them, and attached only while their mode runs.

Usage: bench.py [--runs N] [--slots N] [--target-slots N] [--servers LIST] [--modes LIST]
                [--raw FILE] [SECTION...]   (root; default: all sections)
Servers run on CPU 0, clients on CPU 1, everything in cgroups under
tailwarden-test-<pid> that are removed at the end.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
SYSCALL_LOOP = os.path.join(tw.OUTPUT, "syscall_loop")


RAW = {}


def raw_add(args, section, entry):
    """Keep one measurement's raw figures and rewrite --raw FILE (if given)
    with all of them so far, so that an interrupted run keeps what it had."""
    if not args.raw:
        return
    RAW.setdefault(section, []).append(entry)
    with open(args.raw, "w") as f:
        json.dump(RAW, f, indent=1)


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
# (b) overhead at saturation: nginx, redis, memcached, client on the other CPU
#     and on the same CPU

# What a mode runs beside the load: nothing, the floor (empty programs on
# the request sensor's two tracepoints), tailwarden's sensors as `top`
# loads them: the default ones (requests + the default contention signals)
# or (--modes) the request sensor only. Each is one `onoff` process, loaded
# once and attached only while its mode runs (tests/bench/onoff.c).
MODES = {"untraced": None, "floor": ["floor", "floor.bpf.o"], "default": ["sensors"],
         "requests": ["sensors", "--no-contention"], "floor_switch": ["floor", "floor_switch.bpf.o"]}
ONOFF = os.path.join(tw.OUTPUT, "onoff")
PLACEMENTS = (("other CPU", CLIENT_CPU), ("same CPU", SERVER_CPU))
SERVERS = ("nginx", "redis", "memcached")
CONNS = 32
TARGET_RATIO = 0.97
TARGET_SERVERS = ("nginx",)  # the target is nginx's; the others are measured


class Modes:
    """One onoff process per mode, loaded at the start and detached; set()
    attaches one mode's programs and detaches the rest."""

    def __init__(self, sess, modes, cg):
        self.sess, self.cg, self.procs, self.on = sess, cg, {}, None
        if not os.access(ONOFF, os.X_OK):
            raise tw.SetupError("%s not built (make bench builds it)" % ONOFF)
        for m in modes:
            if MODES[m] is None:
                continue
            argv = [ONOFF] + [os.path.join(tw.OUTPUT, a) if a.endswith(".bpf.o") else a
                              for a in MODES[m]]
            p = sess.spawn(argv, cgroup=cg, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
            self.procs[m] = p
            self._expect(m, "off")

    def _expect(self, m, word):
        got = self.procs[m].stdout.readline().strip()
        if got != word:
            self.procs[m].kill()
            raise tw.SetupError("onoff %s: expected %r, got %r: %s" % (
                m, word, got, self.procs[m].stderr.read()[-500:]))

    def _say(self, m, word):
        self.procs[m].stdin.write(word + "\n")
        self.procs[m].stdin.flush()
        self._expect(m, word)

    def set(self, mode):
        if self.on == mode:
            return
        if self.on in self.procs:
            self._say(self.on, "off")
        if mode in self.procs:
            self._say(mode, "on")
        self.on = mode


def alternate(sess, modes, runs, once, topcg, what):
    """runs rounds; each round runs every mode once, the order rotating from
    round to round so that drift hits all modes alike. {mode: [results]}."""
    res = {m: [] for m in modes}
    sw = Modes(sess, modes, topcg)
    for i in range(runs):
        for mode in rotate(modes, i):
            sw.set(mode)
            try:
                r = once()
            finally:
                sw.set("untraced")
            res[mode].append(r)
            tw.log("  %s run %d %-8s: %s" % (what, i + 1, mode,
                                             " ".join("%.4g" % x for x in r)))
    return res


def cg_usage_us(cg):
    """CPU time of a cgroup (cgroup2 cpu.stat, there without controllers).
    Without IRQ time accounting, softirq work (loopback delivery, and the
    hooks that run there) is charged to the task it interrupts."""
    with open(os.path.join(cg.unified, "cpu.stat")) as f:
        for line in f:
            k, v = line.split()
            if k == "usage_usec":
                return int(v)
    raise tw.SetupError("%s: no usage_usec" % cg.rel)


def served(kind, port):
    """A function returning the server's own count of requests served so
    far: nginx's stub_status, redis's total_commands_processed (INFO
    included), memcached's cmd_get. One small request to the server."""
    if kind == "nginx":
        def nginx():
            with urllib.request.urlopen("http://127.0.0.1:%d/nginx_status" % port, timeout=5) as r:
                return int(r.read().decode().splitlines()[2].split()[2])
        return nginx
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    ask, key, end = ((b"INFO stats\r\n", "total_commands_processed:", b"\r\n\r\n")
                     if kind == "redis" else (b"stats\r\n", "STAT cmd_get ", b"END\r\n"))

    def stats():
        sock.sendall(ask)
        buf = b""
        while not buf.endswith(end) or key.encode() not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise tw.SetupError("%s closed the stats connection" % kind)
            buf += chunk
        line = [ln for ln in buf.decode().splitlines() if ln.startswith(key)][0]
        return int(line[len(key):])
    return stats


class Load:
    """One server on SERVER_CPU and its saturating client on cpu, running
    for the whole measurement: nginx with wrk -t1 -c32, redis with
    redis-benchmark -P 1 -c 32 (GET), memcached with loadgen --closed
    --conns 32 (get). slot() returns the server's req/s over the next secs
    seconds (its own count) and the CPU time per request of server and
    client together, in us."""

    def __init__(self, sess, kind, cpu, secs):
        self.sess, self.kind = sess, kind
        self.web, self.cli = sess.cgroup("%s-srv" % kind), sess.cgroup("%s-cli-%d" % (kind, cpu))
        self.srv = {"nginx": sess.nginx, "redis": sess.redis,
                    "memcached": sess.memcached}[kind](self.web, cpu=SERVER_CPU)
        port = self.srv.port
        if kind == "nginx":
            argv = ["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % secs, "http://127.0.0.1:%d/" % port]
        elif kind == "redis":
            argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", "2000000000",
                    "-c", str(CONNS), "-t", "get", "-P", "1"]
        else:
            tw.ensure_loadgen()
            argv = [tw.LOADGEN, "--proto", "memcached", "--port", str(port), "--rate", "1",
                    "--duration", str(secs), "--conns", str(CONNS), "--closed"]
        self.client = sess.spawn(argv, cgroup=self.cli, cpu=cpu, stdout=subprocess.DEVNULL)
        self.count = served(kind, port)
        time.sleep(2)  # connections up, caches warm

    def slot(self, secs):
        if self.client.poll() is not None:
            raise tw.SetupError("the %s client exited early (%s)" % (self.kind,
                                                                     self.client.returncode))
        n0, u0, t0 = self.count(), cg_usage_us(self.web) + cg_usage_us(self.cli), time.monotonic()
        time.sleep(secs)
        n1, u1, t1 = self.count(), cg_usage_us(self.web) + cg_usage_us(self.cli), time.monotonic()
        return (n1 - n0) / (t1 - t0), (u1 - u0) / max(n1 - n0, 1)

    def stop(self):
        self.sess.stop(self.client)
        self.srv.stop()


def rotate(modes, i):
    k = i % len(modes)
    return modes[k:] + modes[:k]


def med(v):
    return statistics.median(v)


def rounds(res, mode, key, f):
    """f(mode's value, untraced value of the same round), for each round."""
    return [f(a[key], b[key]) for a, b in zip(res[mode], res["untraced"])]


def paired(res, mode, key, f):
    """Median over rounds of f(mode's value, untraced value of the same round)."""
    return med(rounds(res, mode, key, f))


def quartiles(v):
    q = statistics.quantiles(v, n=4)
    return "%.3f-%.3f" % (q[0], q[2])


def overhead(args):
    """Per server and placement, one load of the whole measurement; the
    modes take turns in slots of args.slot_s seconds, the order rotating
    from round to round, each mode's programs attached only in its slots."""
    modes = args.modes
    rows = []
    for kind in SERVERS:
        if kind not in args.servers:
            continue
        nslots = args.target_slots if kind in TARGET_SERVERS else args.slots
        for place, cpu in PLACEMENTS:
            with tw.Session(tag="bench-ovh") as sess:
                topcg = sess.cgroup("top")
                sw = Modes(sess, modes, topcg)
                load = Load(sess, kind, cpu, int(nslots * len(modes) * (args.slot_s + 1) + 30))
                res = {m: [] for m in modes}
                tick = {m: [] for m in modes}
                for i in range(nslots):
                    for mode in rotate(modes, i):
                        sw.set(mode)
                        time.sleep(0.05)  # past the attach
                        u0 = cg_usage_us(topcg)
                        res[mode].append(load.slot(args.slot_s))
                        tick[mode].append((cg_usage_us(topcg) - u0) / args.slot_s / 1000)
                    tw.log("  %s/%s round %d: %s" % (kind, place, i + 1, " ".join(
                        "%s %.0f" % (m, res[m][-1][0]) for m in modes)))
                sw.set("untraced")
                load.stop()
            raw_add(args, "overhead", {"server": kind, "client": place, "slot_s": args.slot_s,
                                       "req_s_and_cpu_us_per_req": res})
            base = med(r[0] for r in res["untraced"])
            cpu0 = med(r[1] for r in res["untraced"])
            row = [kind, place, str(nslots), "%.0f" % base]
            for m in modes[1:]:
                ratio_m = med(r[0] for r in res[m]) / base
                row += ["%.3f" % ratio_m, "%.3f" % paired(res, m, 0, lambda a, b: a / b)]
            row += ["%.1f" % cpu0]
            for m in modes[1:]:
                row += ["%+.0f" % (paired(res, m, 1, lambda a, b: a - b) * 1000)]
            d = med(r[0] for r in res["default"]) / base
            for m in ("floor", "default"):
                row += [quartiles(rounds(res, m, 0, lambda a, b: a / b))]
            row += ["%.1f" % (med(tick["default"]) - med(tick["untraced"]))]
            if kind in TARGET_SERVERS:
                row += [">= %.2f" % TARGET_RATIO, "ok" if d >= TARGET_RATIO else "MISSED"]
            else:
                row += ["- (measured)", "-"]
            rows.append(row)
            tw.log("  %s" % row)
    header = ["server", "client on", "rounds", "untraced req/s"]
    for m in modes[1:]:
        header += ["%s ratio" % m, "(paired)"]
    header += ["untraced CPU us/req"]
    for m in modes[1:]:
        header += ["%s +CPU ns/req" % m]
    header += ["floor slots IQR", "default slots IQR", "tick CPU ms/s", "target (default ratio)",
               "verdict"]
    table("(b) overhead at saturation: one load per row, rounds of %g s slots, one per mode "
          "(rotating order); server on CPU %d, client on the other CPU (%d) or the same"
          % (args.slot_s, SERVER_CPU, CLIENT_CPU), header, rows)
    print("ratio = median req/s of the mode's slots / median req/s of the untraced slots; "
          "(paired) = median of\neach round's ratio; slots IQR = the middle half of those "
          "per-round ratios (the host's noise).\nreq/s is the server's own count (nginx "
          "stub_status, redis INFO, memcached stats). Each mode's programs\nare loaded once "
          "and attached only during its slots (tests/bench/onoff.c), so server, client and\n"
          "connections are the same throughout. CPU us/req = CPU time of server and client "
          "cgroups per\nrequest (softirq included), +ns/req its paired difference from "
          "untraced: what a request pays.\nfloor = empty BPF programs on the request sensor's "
          "two tracepoints; default = tailwarden's\nsensors as `tailwarden top` loads them "
          "(requests + default contention signals), with top's\nper-second reads of the maps "
          "(the run-queue iterator included): tick CPU is what those cost,\nin ms of CPU per "
          "second, wherever the scheduler ran them. Clients: nginx wrk -t1 -c%d; redis\n"
          "redis-benchmark -P 1 -c %d -t get; memcached loadgen --closed --conns %d (get)."
          % (CONNS, CONNS, CONNS))


# ---------------------------------------------------------------------------
# (c) context switches: perf bench sched pipe, both ends on one CPU

SWITCH_LOOPS = 200000
TARGET_SWITCH = 3.0


def switch_once(sess, cg):
    """usecs/op as perf prints it, and CPU time per op of the two tasks (the
    hooks run in their context; steadier than wall time under host noise)."""
    p = sess.spawn(["perf", "bench", "sched", "pipe", "-l", str(SWITCH_LOOPS)], cgroup=cg,
                   cpu=CLIENT_CPU, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    m = re.search(r"([\d.]+)\s+usecs/op", out)
    if not m:
        raise tw.SetupError("perf bench sched pipe: no usecs/op in %r" % out[-300:])
    return float(m.group(1)), (ru.ru_utime + ru.ru_stime) / SWITCH_LOOPS * 1e6


def switch(args):
    if not shutil.which("perf"):
        print("\n(c) context switches: perf not installed; skipped")
        return
    modes = ["untraced", "floor_switch", "default"]
    with tw.Session(tag="bench-sw") as sess:
        cg, topcg = sess.cgroup("pipe"), sess.cgroup("top")
        res = alternate(sess, modes, args.runs, lambda: switch_once(sess, cg), topcg, "pipe")
        raw_add(args, "switch", res)
    rows = []
    for k, what in ((0, "usecs/op (wall)"), (1, "CPU us/op")):
        a = med(r[k] for r in res["untraced"])
        row = [what, "%.3f" % a]
        for m in modes[1:]:
            b = med(r[k] for r in res[m])
            row += ["%.3f" % b, "%+.1f%%" % ((b / a - 1) * 100),
                    "%+.1f%%" % paired(res, m, k, lambda x, y: (x / y - 1) * 100)]
        p = paired(res, "default", k, lambda x, y: (x / y - 1) * 100)
        rows.append(row + ["<= %.0f%%" % TARGET_SWITCH, "ok" if p <= TARGET_SWITCH else "MISSED"])
    table("(c) context switches: perf bench sched pipe -l %d, both ends on CPU %d, "
          "%d rotating runs each" % (SWITCH_LOOPS, CLIENT_CPU, args.runs),
          ["", "untraced", "floor: empty sched_switch", "cost", "(paired)", "top (default)",
           "cost", "(paired)", "target (default, paired)", "verdict"], rows)
    print("Each op is two wake-ups and two context switches. floor = an empty program on "
          "sched_switch\n(tests/bench/floor_switch.bpf.c): the hook's own dispatch. default = "
          "`tailwarden top` (requests +\ndefault contention signals, none of which hooks "
          "the switch: futex waits, which do, are opt-in).")


# ---------------------------------------------------------------------------
# (d) ns per syscall

TARGET_SOCK_NS = 60


def build_syscall_loop():
    src = os.path.join(tw.REPO, "tests", "bench", "syscall_loop.c")
    if os.path.exists(SYSCALL_LOOP) and os.path.getmtime(SYSCALL_LOOP) >= os.path.getmtime(src):
        return
    os.makedirs(tw.OUTPUT, exist_ok=True)
    subprocess.run(["cc", "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o",
                    SYSCALL_LOOP, src, "-lm"], check=True)


def syscalls(args):
    build_syscall_loop()
    modes = [m for m in args.modes]
    with tw.Session(tag="bench-sys") as sess:
        cg, topcg = sess.cgroup("loop"), sess.cgroup("top")

        def once():
            p = sess.spawn([SYSCALL_LOOP, "-n", str(args.iterations), "-r", "5"], cgroup=cg,
                           cpu=CLIENT_CPU, stdout=subprocess.PIPE)
            out, _ = p.communicate(timeout=120)
            r = json.loads(out)
            return r["sock_op_ns"], r["getppid_ns"], r["rr_ns"]
        res = alternate(sess, modes, args.runs, once, topcg, "loop")
        raw_add(args, "syscalls", res)
    rows = []
    for k, what in ((0, "socket send or recv (1 byte, loopback TCP)"),
                    (2, "request/response round trip (1-byte request and reply)"),
                    (1, "getppid() (no socket)")):
        a = med(r[k] for r in res["untraced"])
        spread = (max(r[k] for r in res["untraced"]) - min(r[k] for r in res["untraced"]))
        row = [what, "%.0f" % a, "%.0f" % spread]
        for m in modes[1:]:
            # Pair each run with the same round's untraced run: the median
            # of those differences cancels drift.
            row += ["%+.0f" % paired(res, m, k, lambda x, y: x - y)]
        d = paired(res, "default", k, lambda x, y: x - y)
        if k in (0, 2):
            fl = paired(res, "floor", k, lambda x, y: x - y)
            row += ["%+.0f" % (d - fl)]
        if k == 0:
            row += ["<= %d above floor" % TARGET_SOCK_NS,
                    "ok" if d - fl <= TARGET_SOCK_NS else "MISSED"]
        elif k == 2:
            row += ["(what a small request pays)", "-"]
        else:
            row += ["%+.0f" % d, "within noise (< spread)",
                    "ok" if abs(d) <= max(spread, 0.01 * a) else "MISSED"]
        rows.append(row)
    header = ["operation", "ns untraced", "spread"] + ["added: %s" % m for m in modes[1:]] + \
        ["default - floor or untraced", "target", "verdict"]
    table("(d) cost per syscall, tight loop on CPU %d, %d rotating runs each "
          "(each run: median of 5 x %d iterations)" % (CLIENT_CPU, args.runs, args.iterations),
          header, rows)
    print("added = median over rounds of (mode - same round untraced), ns per operation; "
          "spread = max - min\nof the untraced runs. floor = empty BPF programs on "
          "tcp_rcv_space_adjust and sock_send_length:\nwhat any program on those hooks "
          "costs here before doing any work. The round trip is one\nthread playing client "
          "and server on one connection: two sends, two receives, the server's\nspan "
          "counted, as for one small request.")


SECTIONS = {"accuracy": accuracy, "overhead": overhead, "switch": switch,
            "syscalls": syscalls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*", metavar="SECTION",
                    help="any of: %s (default: all)" % " ".join(SECTIONS))
    ap.add_argument("--runs", type=int, default=11,
                    help="switch, syscalls: rotating runs per mode (>= 7 for the targets)")
    ap.add_argument("--duration", type=int, default=4, help="accuracy: seconds per load")
    ap.add_argument("--conns", type=int, default=8, help="accuracy: loadgen connections")
    ap.add_argument("--slots", type=int, default=120,
                    help="overhead: rounds of slots, one slot per mode each, for redis and memcached")
    ap.add_argument("--target-slots", type=int, default=360,
                    help="overhead: rounds for nginx, the rows with the target (>= 7)")
    ap.add_argument("--slot-s", type=float, default=0.25, help="overhead: seconds per slot")
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="overhead: comma-separated subset of %s" % ",".join(SERVERS))
    ap.add_argument("--modes", default="untraced,floor,default",
                    help="overhead, syscalls: comma-separated modes, untraced first "
                         "(untraced, floor, default, requests)")
    ap.add_argument("--iterations", type=int, default=200000, help="syscalls: loop length")
    ap.add_argument("--raw", metavar="FILE",
                    help="write every slot's and run's figures to FILE (JSON), for a second look")
    args = ap.parse_args()
    args.modes = args.modes.split(",")
    args.servers = args.servers.split(",")
    if args.modes[0] != "untraced" or any(m not in MODES for m in args.modes) or \
            not {"floor", "default"} <= set(args.modes):
        ap.error("--modes: untraced first, then at least floor and default")
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        ap.error("unknown section(s): %s" % " ".join(bad))
    if args.slots < 7 or args.target_slots < 7 or args.runs < 1:
        ap.error("--slots and --target-slots: at least 7; --runs: at least 1")
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
