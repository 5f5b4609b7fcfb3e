#!/usr/bin/python3
"""Integration tests of tailwarden's contention signals and diagnosis (issue 3).

Real services under the open-loop generator, real antagonists:

  cpu_interference  nginx on CPU 0, then `stress-ng --cpu N` in a sibling cgroup
                    on CPU 0: run-queue p99 and latency p99 rise, verdict
                    cpu/interference.
  load              the thread-pool server (2 ms/request) at 120 req/s, then
                    400 req/s, no antagonist: verdict load, never interference.
  lock              nginx, then `stress-ng --futex 2` inside nginx's own cgroup,
                    with the opt-in futex signal: verdict lock, never
                    interference.
  io_interference   tests/servers/diskread_http.py (O_DIRECT 4 KiB random reads),
                    then fio in a sibling cgroup (random reads up to large
                    direct writes, the first that slows a small reader down):
                    I/O p99 rises, verdict io/interference.
  io_bytes          block bytes against fio's own totals (direct read and write):
                    within 5%.
  vfs_bytes         VFS read bytes against a buffered read of a known size: within 5%.
  runq_accuracy     CPU hogs sharing CPU 0: summed runq_delay_s against the
                    tasks' /proc/<pid>/task/*/schedstat wait time: within 10%.

Each verdict test has a baseline phase long enough for the diagnosis' warm-up
(DIAG_WARMUP windows) and a baseline, then the perturbation; it asserts on the
intervals that closed during the perturbation, the first one excepted. The
interference tests calibrate the antagonist to the host first: they try a
ladder of ever stronger ones (CPU_HOGS, IO_ANTAGONISTS) for PROBE_S each and
keep the first that at least doubles the client's p99 (kernel receive time;
io_interference: five times a small direct reader's p99, IO_FACTOR); load
and io_interference then need the client's p99 held at LOAD_HELD (load:
also its probe's factor) and IO_HELD times its baseline through the
perturbation, or the next rung is tried. None doing so on this host is a
failure, never a skip. The PASS line says what was tried and chosen.

Usage: test_contention.py [-v] [TEST...]   (as root; prints PASS/FAIL/SKIP per
test and "N passed, N failed, N skipped"; exits 1 when a test failed).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check, TestFailure, SetupError  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
INTERVAL = 1.0
BASELINE_S = 10         # warm-up (5 windows) plus a baseline to compare with
PERTURB_S = 8           # antagonist phase
SKIP_FIRST = 1          # perturbation intervals ignored (partial, ramp-up)
PROBE_S = 4             # calibration: how long each antagonist of a ladder is tried
PROBE_RAMP_S = 1        # the disk reference's start-up, not measured (disk_reference)
SETTLE_S = 2            # and the pause after one that was too weak
MIN_VERDICTS = 2
HOG_RATE = 8000         # nginx req/s beside the CPU hog: about a third of one CPU here. At
                        # 2000 req/s EEVDF's wake-up preemption shields nginx from the hog in
                        # about half the runs (p99 even falls, as the CPU never idles); at
                        # 8000 the hog multiplied p99 by 8-30 in every run measured.
CPU_HOGS = (2, 4, 8)    # stress-ng --cpu workers beside nginx, tried in this order
# fio patterns beside the disk-reading service, mildest first. Large
# sequential writes only, which queue every small read behind them all the
# time. On the test VMs 4 KiB random reads at depth 32 raised a 4 KiB
# reader's p99 from 0.2 to 2 ms on one host and not at all on another, and
# where they did the effect faded within about ten seconds, as the host's own
# cache took in the file; beside a niced hog on fio's CPU it faded between
# the probe and the perturbation in 2 of 3 runs (the service's I/O p99 225 ->
# 483 us and 192 -> 623 us, 1 and 4 of 6 intervals io). 4 KiB random writes
# come in bursts, as the host flushes: one passed its probe at 322 us ->
# 15.8 ms and then left the service's I/O p99 at 242 -> 573 us, 2 of 6
# intervals io/interference. 1 MiB writes at depth 16 separated in each of 5
# runs, two beside the niced hog (probe p99 6.0-16.2 ms), and every interval
# of their perturbations read io (one of 33 io/load, the rest interference).
IO_ANTAGONISTS = (
    ("fio write 1M qd16", ["--rw=write", "--bs=1M", "--iodepth=16"]),
    ("fio write 1M 2x qd32", ["--rw=write", "--bs=1M", "--iodepth=32", "--numjobs=2"]),
)
IO_WARM_S = 5           # an I/O antagonist runs this long before it is judged: what
                        # the host caches stops mattering within that
IO_FACTOR = 5.0         # and must raise the disk reference's p99 this many times: the
                        # diagnosis names a disk at 3x its I/O p99 (and 1.5x latency), and
                        # a rung that just passed 3x left the service's I/O p99 at 3x too,
                        # half its windows below (fio randread beside a niced hog: the
                        # reference 206 us -> 676 us, the service's I/O p99 225 -> 737 us,
                        # 3 of 6 intervals none/unknown)
IO_HELD = 2.0           # and the client's p99 through the perturbation must stay at this many
                        # times its baseline, or the next rung is tried: in a clean-clone CI
                        # beside a niced hog fio randread (since left out) passed its probe
                        # (reference 285 us -> 2.9 ms) and then faded (the service's latency
                        # 934 us -> 1.0 ms, its I/O p99 225 -> 483 us, 5 of 6 intervals
                        # none/unknown)
DISK_DIR = "/var/tmp"   # on the block device (/tmp too here, but be explicit)
HIERARCHIES = ("unified", "cpu", "cpuacct")


Skip = tw.Skip


def info(msg):
    if tw.verbose():
        tw.log(msg)


# ---------------------------------------------------------------------------
# helpers


def timed_rows(top, cg):
    """(arrival monotonic time, object) for one cgroup, in arrival order."""
    with top._cv:
        return [(at, o) for at, o in top.objects if o.get("cgroup") == cg.rel]


def between(top, cg, t0, t1):
    return [o for at, o in timed_rows(top, cg) if t0 < at <= t1]


def p99(o, key):
    v = o.get(key)
    return v.get("p99") if isinstance(v, dict) else None


def verdict(o):
    d = o.get("diagnosis") or {}
    return "%s/%s" % (d.get("dominant"), d.get("cause"))


def fmt_us(v):
    if v is None:
        return "-"
    return "%.1fms" % (v / 1000.0) if v >= 1000 else "%.0fus" % v


def dump(title, rows):
    """One line per interval: what a reader needs to see why a verdict came out."""
    if not tw.verbose():
        return
    tw.log("  %s" % title)
    for o in rows:
        ev = ",".join("%s=%.1fx" % (e.get("signal"), e.get("ratio") or 0)
                      for e in ((o.get("diagnosis") or {}).get("evidence") or []))
        tw.log("    req=%-5s lat.p99=%-7s queued=%-7s service=%-7s runq.p99=%-7s runq/req=%-7s "
               "io.p99=%-7s futex=%-8s cpu=%-6s %-18s %s"
               % (o.get("requests"), fmt_us(p99(o, "latency_us")),
                  fmt_us(p99(o.get("phases") or {}, "queued_us")),
                  fmt_us(p99(o.get("phases") or {}, "service_us")),
                  fmt_us(p99(o, "runq_delay_us")), fmt_us(wait_per_request(o)),
                  fmt_us(p99(o, "io_latency_us")),
                  "%.4f" % o["futex_wait_s"] if o.get("futex_wait_s") is not None else "-",
                  "%.3f" % o["cpu_usage_s"] if o.get("cpu_usage_s") is not None else "-",
                  verdict(o), ev))


def median_of(rows, f):
    vals = [v for v in (f(o) for o in rows) if v is not None]
    return statistics.median(vals) if vals else None


def count(rows, dominant=None, cause=None):
    n = 0
    for o in rows:
        d = o.get("diagnosis") or {}
        if (dominant is None or d.get("dominant") == dominant) and \
                (cause is None or d.get("cause") == cause):
            n += 1
    return n


def named(rows, signal, dominant=None, cause=None):
    """Intervals with the verdict (dominant, cause) whose evidence names signal."""
    return sum(1 for o in rows
               if (dominant is None or (o.get("diagnosis") or {}).get("dominant") == dominant)
               and (cause is None or (o.get("diagnosis") or {}).get("cause") == cause)
               and any(e.get("signal") == signal
                       for e in ((o.get("diagnosis") or {}).get("evidence") or [])))


def verdict_summary(rows):
    out = {}
    for o in rows:
        out[verdict(o)] = out.get(verdict(o), 0) + 1
    return ", ".join("%s x%d" % kv for kv in sorted(out.items(), key=lambda kv: -kv[1]))


def evidence_summary(rows):
    """Median ratio of each evidence signal over the intervals that carried it."""
    seen = {}
    for o in rows:
        for e in ((o.get("diagnosis") or {}).get("evidence") or []):
            if e.get("ratio") is not None:
                seen.setdefault(e.get("signal"), []).append(e["ratio"])
    return ", ".join("%s %.1fx in %d" % (k, statistics.median(v), len(v))
                     for k, v in sorted(seen.items(), key=lambda kv: -statistics.median(kv[1])))


class Phases:
    """Baseline, then perturbation, on one service cgroup watched by top.

    The load comes from the open-loop generator in consecutive runs, one
    per phase, so each phase has the client's own figures too (the kernel
    receive time of each reply: the latency reference). The perturbation
    is either one antagonist or, with escalate(), the first rung of a
    ladder of ever stronger antagonists whose effect on the client's p99
    is clear on this host: machines of the same kind differ in noise, and
    a test that asserts an effect must first make sure there is one to
    see. The choice is made on the client's figures, never on
    tailwarden's, so what the test then asserts about tailwarden is not
    what chose the setting.
    """

    def __init__(self, sess, svc, load, watch=(), signals=None):
        self.sess, self.svc, self.load = sess, svc, load
        extra = ["--signals", signals] if signals else []
        self.top = sess.top([svc] + list(watch), interval=INTERVAL, extra=extra)
        self.chosen = None
        self.tried = []

    def baseline(self, seconds=BASELINE_S):
        self.t_base = time.monotonic()
        self.ref_base = self.load(seconds)
        self.t_base_end = time.monotonic()

    def escalate(self, ladder, factor=2.0, reference=None, warm=0):
        """Try each (name, start) rung of ladder, mildest first, for PROBE_S.

        start() starts the antagonist and returns a stop() callable. A rung
        separates when the reference p99 during its probe is at least
        factor times the reference without it. The reference is the
        client's p99 unless reference(load, seconds) gives another (it
        runs the load for that long and returns a p99 in us). With warm,
        each rung runs that many seconds under the load before its probe,
        so that it is judged in the steady state the perturbation will
        see, not in a start-up transient. That rung
        stays on for perturbed(); the others are stopped again. Fails,
        naming every rung and what it did, when none separates.
        """
        if reference is None:
            p0 = ref_p99(self.ref_base)
            reference = lambda load, seconds: ref_p99(load(seconds))  # noqa: E731
        else:
            p0 = reference(self.load, PROBE_S)
        self.p0 = p0
        for name, start in ladder:
            stop = start()
            if warm:
                self.load(warm)
            p1 = reference(self.load, PROBE_S)
            ok = p0 is not None and p1 is not None and p1 >= factor * p0
            self.tried.append("%s %s" % (name, fmt_us(p1)))
            info("antagonist %s: reference p99 %s -> %s: %s" % (
                name, fmt_us(p0), fmt_us(p1), "separates" if ok else "too weak"))
            if ok:
                self.chosen, self.stop_antagonist = name, stop
                return name
            stop()
            self.load(SETTLE_S)
        raise TestFailure("no antagonist raises the reference p99 %.1fx over %s on this "
                          "host: %s" % (factor, fmt_us(p0), "; ".join(self.tried)))

    def perturbed(self, seconds=PERTURB_S):
        self.t_perturb = time.monotonic()
        self.ref_pert = self.load(seconds)
        self.t_end = time.monotonic()

    def perturbed_held(self, ladder, held, seconds=PERTURB_S, **calibrate):
        """escalate(ladder, **calibrate), then perturbed(), until the rung chosen
        still holds the client's p99 at held times its baseline through the
        perturbation. A rung whose effect faded between its probe and the
        perturbation (the host's cache taking in what fio reads) gives way to
        the next one; fails, naming every rung, when none holds."""
        rest = list(ladder)
        while True:
            name = self.escalate(rest, **calibrate)
            self.perturbed(seconds)
            p0, p1 = ref_p99(self.ref_base), ref_p99(self.ref_pert)
            if p0 is not None and p1 is not None and p1 >= held * p0:
                return name
            self.tried.append("%s faded (client p99 %s -> %s in the perturbation)"
                              % (name, fmt_us(p0), fmt_us(p1)))
            info("antagonist %s: %s" % (name, self.tried[-1]))
            self.stop_antagonist()
            rest = rest[[n for n, _ in rest].index(name) + 1:]
            if not rest:
                raise TestFailure("no antagonist held the client's p99 at %.1fx its baseline %s "
                                  "through the perturbation on this host: %s"
                                  % (held, fmt_us(p0), "; ".join(self.tried)))
            self.load(SETTLE_S)

    def calibration(self):
        """What escalate() tried (client p99 with each) and chose, for the PASS line."""
        return "reference p99 %s alone; antagonist %s (tried: %s)" % (
            fmt_us(self.p0), self.chosen, ", ".join(self.tried))

    def rows(self):
        """(baseline rows, perturbation rows), first intervals of each dropped."""
        base = between(self.top, self.svc, self.t_base + 2 * INTERVAL, self.t_base_end)
        pert = between(self.top, self.svc, self.t_perturb + (SKIP_FIRST + 0.5) * INTERVAL,
                       self.t_end)
        all_rows = between(self.top, self.svc, 0, self.t_end)
        check(len(pert) >= PERTURB_S - SKIP_FIRST - 1,
              "only %d top intervals during the %d s perturbation" % (len(pert), PERTURB_S))
        dump("baseline + perturbation (perturbation from interval %d):"
             % (len(all_rows) - len(pert)), all_rows)
        return base, pert


def wait_per_request(o):
    """Run-queue wait per served request in an interval (us), or None."""
    if o.get("runq_delay_s") is None or not o.get("requests"):
        return None
    return o["runq_delay_s"] * 1e6 / o["requests"]


def ref_p99(res):
    """The client's p99 to the kernel receive time of each reply (us), or None."""
    v = (res or {}).get("rx_latency_us") or {}
    return v.get("p99")


def http_load(sess, port, rate):
    """A phase's load: loadgen at rate for the phase's seconds, errors fail the test."""
    def run(seconds):
        res = sess.loadgen("http", port, rate, seconds, cpu=CLIENT_CPU)
        loadgen_ok(res, "loadgen at %d req/s" % rate)
        return res
    return run


def disk_reference(sess, path):
    """A reference for the disk: a small direct random reader like the service.

    fio reads 4 KiB blocks of path at 150 per second while the service's
    load runs; its own p99 completion latency (us) says what a small reader
    waits for the disk now, independently of what tailwarden infers. It
    runs on the service's CPU, at a real-time priority where the kernel
    allows one: a completion is seen when the reader wakes up, and that
    wake-up can wait behind fio or the block layer's kernel workers, which
    would be CPU contention passed off as a slow disk. It takes that
    priority only once it has started (PROBE_RAMP_S, not measured): fio's
    own start-up spends 70-150 ms of CPU (calibrating its clock, setting
    up), and at SCHED_FIFO on the service's CPU that stopped the service
    for as long (its p99 147 ms, read as cpu/interference, in the windows
    of each probe).
    """
    rt = subprocess.run(["chrt", "-f", "10", "true"], capture_output=True).returncode == 0
    info("disk reference: fio probe %s" % ("at SCHED_FIFO 10 once started" if rt else
                                           "at normal priority (chrt -f refused)"))

    def measure(load, seconds):
        p = sess.spawn(["fio", "--name=probe", "--filename=" + path, "--rw=randread",
                        "--bs=4k", "--direct=1", "--ioengine=psync", "--rate_iops=150",
                        "--thread", "--time_based", "--ramp_time=%d" % PROBE_RAMP_S,
                        "--runtime=%d" % (seconds - PROBE_RAMP_S), "--output-format=json"],
                       cpu=SERVER_CPU, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if rt:      # its job is a thread (--thread), so -a reaches it
            threading.Timer(PROBE_RAMP_S / 2.0, lambda: subprocess.run(
                ["chrt", "-a", "-f", "-p", "10", str(p.pid)], capture_output=True)).start()
        load(seconds)
        out, _ = p.communicate(timeout=60)
        text = out.decode()
        try:
            clat = json.loads(text[text.index("{"):])["jobs"][0]["read"]["clat_ns"]
            return clat["percentile"]["99.000000"] / 1000.0
        except (ValueError, KeyError, IndexError):
            raise SetupError("fio probe output: %s" % text[-300:])
    return measure


def antagonist(sess, argv, cg, cpu):
    """A ladder rung: start argv in cg on cpu; returns its stop()."""
    def start():
        spawn_quiet(sess, argv, cg, cpu)
        return lambda: sess.kill_cgroup(cg)
    return start


def loadgen_ok(res, what):
    if res.get("errors"):
        raise TestFailure("%s: loadgen reported errors: %s" % (what, {k: v for k, v in res.items()
                                                                    if not k.startswith("_")}))


def spawn_quiet(sess, argv, cg, cpu):
    return sess.spawn(argv, cgroup=cg, cpu=cpu, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)


def disk_tmpdir(sess, tag):
    d = tempfile.mkdtemp(prefix="tailwarden-test-%s-" % tag, dir=DISK_DIR)
    sess.tmpdirs.append(d)      # the session removes it, also on failure
    return d


def make_file(path, mib):
    """A file of real, written blocks (fallocate'd extents would read as holes)."""
    r = subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % mib,
                        "oflag=direct", "status=none"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError("dd %s: %s" % (path, r.stderr.strip()))


def need(prog):
    if shutil.which(prog) is None:
        raise Skip("%s is not installed (apt-get install -y %s)" % (prog, prog))


# ---------------------------------------------------------------------------
# verdict tests


def test_cpu_interference():
    need("stress-ng")
    with tw.Session(HIERARCHIES, tag="cpu") as sess:
        web, batch = sess.cgroup("web"), sess.cgroup("batch")
        ngx = sess.nginx(web, cpu=SERVER_CPU)
        ph = Phases(sess, web, http_load(sess, ngx.port, HOG_RATE))
        ph.baseline()
        ph.escalate([("stress-ng --cpu %d" % n,
                      antagonist(sess, ["stress-ng", "--cpu", str(n), "--timeout", "120", "-q"],
                                 batch, SERVER_CPU)) for n in CPU_HOGS])
        ph.perturbed()
        ph.stop_antagonist()
        base, pert = ph.rows()

        rq0 = median_of(base, lambda o: p99(o, "runq_delay_us"))
        rq1 = median_of(pert, lambda o: p99(o, "runq_delay_us"))
        wq0 = median_of(base, wait_per_request)
        wq1 = median_of(pert, wait_per_request)
        lat0 = median_of(base, lambda o: p99(o, "latency_us"))
        lat1 = median_of(pert, lambda o: p99(o, "latency_us"))
        n = count(pert, "cpu", "interference")
        note = ("runq wait per request %.2fus -> %.2fus, runq p99 %s -> %s, latency p99 %s -> %s, "
                "%d/%d intervals cpu/interference [%s; evidence: %s]; %s"
                % (wq0 or 0, wq1 or 0, fmt_us(rq0), fmt_us(rq1), fmt_us(lat0),
                   fmt_us(lat1), n, len(pert), verdict_summary(pert), evidence_summary(pert),
                   ph.calibration()))
        check(None not in (rq0, rq1, wq0, wq1), "no run-queue figures (%s)" % note)
        # The p99 of single waits is capped near one scheduler slice of
        # whatever runs, so on a host whose neighbours already cost a slice
        # now and then it can only double; the wait per request is the
        # sum of them and shows the hog in full.
        check(wq1 >= 3 * wq0, "run-queue wait per request did not rise 3x: %s" % note)
        check(rq1 > rq0, "run-queue p99 did not rise: %s" % note)
        check(lat0 is not None and lat1 is not None and lat1 > lat0,
              "latency p99 did not rise: %s" % note)
        check(n >= MIN_VERDICTS, "fewer than %d intervals cpu/interference: %s"
              % (MIN_VERDICTS, note))
        # The verdict says where inside the request the time went: queued.
        q = named(pert, "phase.queued_us.p99", "cpu", "interference")
        check(q >= MIN_VERDICTS, "fewer than %d cpu/interference verdicts name the queued phase "
              "(%d): %s" % (MIN_VERDICTS, q, note))
        return note


# The load step's ladder (req/s, from 120). The server's 2 ms of work spins
# on the wall clock in 8 threads, so concurrent requests share the CPU and
# its latency rises only once the CPU itself is short: on a quiet host
# 400 req/s left p99 where it was at 120 (2.3 -> 2.2 ms, the test's old
# fixed step, which then failed), 450 doubled it in one run of two, and
# the server tops out near 480 req/s; on a noisy host 400 was enough. The
# first step that triples the client's p99 and holds it is taken (LOAD_HELD).
LOAD_STEPS = (400, 450, 500, 600, 800)
LOAD_HELD = 3.0         # a step must raise the client's p99 this many times in its probe,
                        # and hold it there through the perturbation, or the next is tried.
                        # 400 req/s sits at the threadpool server's knee here: it doubled
                        # the client's p99 in its probe and in a clean-clone CI then left
                        # the service's p99 at 2.3 -> 2.2 ms (0 of 7 intervals load; in an
                        # earlier run 2.3 -> 2.4 ms, 2 of 7). Of 16 runs, the 11 whose step
                        # left the service's p99 3x up or more read load in 7 of 7 intervals;
                        # at 2-2.6x, 7, 5 and 5 of 7; at about 1x, 0 to 2.


def step_to(ph, base_load, sess, port, rate):
    """A rung of the load ladder: the phase's load at rate until stop()."""
    def start():
        ph.load = http_load(sess, port, rate)
        return lambda: setattr(ph, "load", base_load)
    return start


def test_load():
    with tw.Session(HIERARCHIES, tag="load") as sess:
        svc = sess.cgroup("svc")
        srv = sess.pyserver("threadpool_http.py", svc, cpu=SERVER_CPU)
        base_load = http_load(sess, srv.port, 120)
        ph = Phases(sess, svc, base_load)
        ph.baseline()
        ph.perturbed_held([("%d req/s" % r, step_to(ph, base_load, sess, srv.port, r))
                           for r in LOAD_STEPS], LOAD_HELD, factor=LOAD_HELD)
        base, pert = ph.rows()

        rps0 = median_of(base, lambda o: o.get("rps"))
        rps1 = median_of(pert, lambda o: o.get("rps"))
        lat0 = median_of(base, lambda o: p99(o, "latency_us"))
        lat1 = median_of(pert, lambda o: p99(o, "latency_us"))
        n = count(pert, cause="load")
        bad = count(pert, cause="interference")
        note = ("rps %.0f -> %.0f, latency p99 %s -> %s, %d/%d intervals load, %d interference [%s; evidence: %s]"
                % (rps0 or 0, rps1 or 0, fmt_us(lat0), fmt_us(lat1), n, len(pert), bad,
                   verdict_summary(pert), evidence_summary(pert)))
        check(rps0 and rps1 and rps1 >= 2.5 * rps0, "offered load did not rise: %s" % note)
        check(bad == 0, "interference blamed on a load increase: %s" % note)
        check(n >= MIN_VERDICTS, "fewer than %d intervals with cause load: %s"
              % (MIN_VERDICTS, note))
        # A load verdict names the phase that grew (queued behind busy
        # workers, or service time on a shared CPU).
        ph_n = sum(1 for o in pert if (o.get("diagnosis") or {}).get("cause") == "load" and any(
            (e.get("signal") or "").startswith("phase.")
            for e in (o["diagnosis"].get("evidence") or [])))
        check(ph_n >= MIN_VERDICTS, "fewer than %d load verdicts name a phase (%d): %s"
              % (MIN_VERDICTS, ph_n, note))
        return note


def test_lock():
    need("stress-ng")
    with tw.Session(HIERARCHIES, tag="lock") as sess:
        web = sess.cgroup("web")
        ngx = sess.nginx(web, cpu=SERVER_CPU)
        # futex waits are opt-in (they hook every context switch).
        ph = Phases(sess, web, http_load(sess, ngx.port, 2000), signals="default,futex")
        ph.baseline()
        # Inside nginx's own cgroup, on its CPU: the service's own lock waits.
        hog = spawn_quiet(sess, ["stress-ng", "--futex", "2", "--timeout", "60", "-q"],
                          web, SERVER_CPU)
        ph.perturbed()
        sess.stop(hog, timeout=3)
        base, pert = ph.rows()

        fx0 = median_of(base, lambda o: o.get("futex_wait_s"))
        fx1 = median_of(pert, lambda o: o.get("futex_wait_s"))
        lat0 = median_of(base, lambda o: p99(o, "latency_us"))
        lat1 = median_of(pert, lambda o: p99(o, "latency_us"))
        n = count(pert, "lock")
        bad = count(pert, cause="interference")
        note = ("futex_wait_s %.4f -> %.4f, latency p99 %s -> %s, %d/%d intervals lock, "
                "%d interference [%s; evidence: %s]" % (fx0 or 0, fx1 or 0, fmt_us(lat0), fmt_us(lat1),
                                          n, len(pert), bad, verdict_summary(pert), evidence_summary(pert)))
        check(bad == 0, "interference blamed for the service's own lock: %s" % note)
        check(n >= MIN_VERDICTS, "fewer than %d intervals with dominant lock: %s"
              % (MIN_VERDICTS, note))
        return note


def fio_argv(path, pattern):
    """fio with direct I/O on path, for as long as a test needs (it is killed)."""
    return ["fio", "--name=antagonist", "--filename=" + path, "--direct=1", "--ioengine=libaio",
            "--time_based", "--runtime=600"] + pattern


def test_io_interference():
    need("fio")
    with tw.Session(HIERARCHIES, tag="io") as sess:
        svc, batch = sess.cgroup("svc"), sess.cgroup("batch")
        d = disk_tmpdir(sess, "io")
        data, noise = os.path.join(d, "data"), os.path.join(d, "noise")
        make_file(data, 256)
        make_file(noise, 1024)
        srv = sess.pyserver("diskread_http.py", svc, cpu=SERVER_CPU, args=("--file", data))
        ph = Phases(sess, svc, http_load(sess, srv.port, 150))
        ph.baseline()
        # fio on the client's CPU: it should contend for the disk, not for CPU 0.
        ph.perturbed_held([(name, antagonist(sess, fio_argv(noise, pattern), batch, CLIENT_CPU))
                           for name, pattern in IO_ANTAGONISTS], IO_HELD, factor=IO_FACTOR,
                          reference=disk_reference(sess, data), warm=IO_WARM_S)
        ph.stop_antagonist()
        base, pert = ph.rows()

        io0 = median_of(base, lambda o: p99(o, "io_latency_us"))
        io1 = median_of(pert, lambda o: p99(o, "io_latency_us"))
        lat0 = median_of(base, lambda o: p99(o, "latency_us"))
        lat1 = median_of(pert, lambda o: p99(o, "latency_us"))
        rd0 = median_of(base, lambda o: o.get("io_read_bytes"))
        n = count(pert, "io")
        ni = count(pert, "io", "interference")
        sched = open("/sys/block/vda/queue/scheduler").read().strip() \
            if os.path.exists("/sys/block/vda/queue/scheduler") else "?"
        note = ("io p99 %s -> %s, latency p99 %s -> %s, baseline io_read %.0f KiB/interval, "
                "%d/%d intervals io (%d io/interference) [%s; evidence: %s]; scheduler %s; %s"
                % (fmt_us(io0), fmt_us(io1), fmt_us(lat0), fmt_us(lat1), (rd0 or 0) / 1024,
                   n, len(pert), ni, verdict_summary(pert), evidence_summary(pert), sched,
                   ph.calibration()))
        check(io0 is not None and io1 is not None,
              "no block I/O latency attributed to the service: %s" % note)
        check(io1 > io0, "service's I/O p99 did not rise: %s" % note)
        check(n >= MIN_VERDICTS, "fewer than %d intervals with dominant io: %s"
              % (MIN_VERDICTS, note))
        check(ni >= MIN_VERDICTS, "fewer than %d intervals io/interference: %s"
              % (MIN_VERDICTS, note))
        # The verdict says where inside the request the time went: service.
        sv = named(pert, "phase.service_us.p99", "io", "interference")
        check(sv >= MIN_VERDICTS, "fewer than %d io/interference verdicts name the service phase "
              "(%d): %s" % (MIN_VERDICTS, sv, note))
        return note


# ---------------------------------------------------------------------------
# accuracy tests


def run_fio_json(sess, cg, argv, timeout=60):
    p = sess.spawn(argv + ["--output-format=json"], cgroup=cg, cpu=SERVER_CPU,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise SetupError("fio exited %d: %s" % (p.returncode, err.decode()[-500:]))
    text = out.decode()
    return json.loads(text[text.index("{"):])


def summed(top, cg, key, t_end):
    top.wait_past(t_end + INTERVAL, [cg])     # the interval holding the end, and one more
    rows = [o for at, o in timed_rows(top, cg)]
    vals = [o.get(key) for o in rows]
    check(any(v is not None for v in vals), "%s is null in every interval" % key)
    return sum(v for v in vals if v is not None)


def test_io_bytes():
    need("fio")
    with tw.Session(HIERARCHIES, tag="iob") as sess:
        rd, wr = sess.cgroup("rd"), sess.cgroup("wr")
        d = disk_tmpdir(sess, "iob")
        f = os.path.join(d, "f")
        make_file(f, 128)       # laid out beforehand, outside the measured cgroups
        top = sess.top([rd, wr], interval=INTERVAL)
        time.sleep(1.5)
        common = ["fio", "--name=acc", "--filename=" + f, "--size=128m", "--bs=64k",
                  "--direct=1", "--ioengine=psync"]
        jr = run_fio_json(sess, rd, common + ["--rw=read"])
        jw = run_fio_json(sess, wr, common + ["--rw=write"])
        t_end = time.monotonic()
        fio_r = jr["jobs"][0]["read"]["io_bytes"]
        fio_w = jw["jobs"][0]["write"]["io_bytes"]
        tw_r = summed(top, rd, "io_read_bytes", t_end)
        tw_w = summed(top, wr, "io_write_bytes", t_end)
        note = ("block read %d vs fio %d (%+.2f%%), block write %d vs fio %d (%+.2f%%)"
                % (tw_r, fio_r, 100.0 * (tw_r - fio_r) / fio_r, tw_w, fio_w,
                   100.0 * (tw_w - fio_w) / fio_w))
        check(tw.within(tw_r, fio_r, rel=0.05), "io_read_bytes off by more than 5%%: %s" % note)
        check(tw.within(tw_w, fio_w, rel=0.05), "io_write_bytes off by more than 5%%: %s" % note)
        return note


def test_vfs_bytes():
    with tw.Session(HIERARCHIES, tag="vfs") as sess:
        vfs = sess.cgroup("vfs")
        d = disk_tmpdir(sess, "vfs")
        g = os.path.join(d, "g")
        make_file(g, 64)
        with open(g, "rb") as h:    # page cache warm: the bytes come through VFS, not the disk
            while h.read(1 << 20):
                pass
        top = sess.top([vfs], interval=INTERVAL, extra=["--signals", "default,vfs"])
        time.sleep(1.5)
        p = sess.spawn(["dd", "if=" + g, "of=/dev/null", "bs=1M", "status=none"], cgroup=vfs,
                       cpu=SERVER_CPU)
        check(p.wait(30) == 0, "dd failed")
        t_end = time.monotonic()
        top.wait_past(t_end + INTERVAL, [vfs])
        vals = [o.get("vfs_read_bytes") for _, o in timed_rows(top, vfs)]
        if all(v is None for v in vals):
            raise TestFailure("vfs_read_bytes is null in every interval: `tailwarden top` loads "
                              "CONT_DEFAULT, which leaves CONT_VFS out (opt-in), and top has no "
                              "option to turn it on")
        tw_v = sum(v for v in vals if v is not None)
        size_v = os.path.getsize(g)
        note = "vfs read %d vs %d (%+.2f%%)" % (tw_v, size_v, 100.0 * (tw_v - size_v) / size_v)
        check(tw.within(tw_v, size_v, rel=0.05), "vfs_read_bytes off by more than 5%%: %s" % note)
        return note


def task_wait_ns(cg):
    """Sum of schedstat run-queue wait (field 2) over every thread in the cgroup."""
    total = 0
    for pid in cg.pids():
        tdir = "/proc/%d/task" % pid
        try:
            tids = os.listdir(tdir)
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open("%s/%s/schedstat" % (tdir, tid)) as fh:
                    total += int(fh.read().split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return total


def test_runq_accuracy():
    need("stress-ng")
    with tw.Session(HIERARCHIES, tag="runq") as sess:
        hog = sess.cgroup("hog")
        top = sess.top([hog], interval=INTERVAL)
        time.sleep(1.5)
        # Three hogs on one CPU: each waits about two thirds of the time.
        for _ in range(3):
            spawn_quiet(sess, ["stress-ng", "--cpu", "1", "--timeout", "60", "-q"], hog, SERVER_CPU)
        time.sleep(5)
        # schedstat counts from each task's creation, as tailwarden has seen it
        # from its first wake-up in this cgroup; read it and stop the tasks at once.
        for pid in hog.pids():
            try:
                os.kill(pid, 19)        # SIGSTOP: no more waiting while we read
            except ProcessLookupError:
                pass
        wait_ns = task_wait_ns(hog)
        sess.kill_cgroup(hog)
        t_end = time.monotonic()
        tw_s = summed(top, hog, "runq_delay_s", t_end)
        ref_s = wait_ns / 1e9
        note = "runq_delay_s %.3f s vs schedstat wait %.3f s (%+.1f%%)" % (
            tw_s, ref_s, 100.0 * (tw_s - ref_s) / ref_s if ref_s else 0)
        check(ref_s > 1.0, "hogs barely waited (setup): %s" % note)
        check(tw.within(tw_s, ref_s, rel=0.10), "runq_delay_s off by more than 10%%: %s" % note)
        return note


TESTS = [
    ("cpu_interference", test_cpu_interference),
    ("load", test_load),
    ("lock", test_lock),
    ("io_interference", test_io_interference),
    ("io_bytes", test_io_bytes),
    ("vfs_bytes", test_vfs_bytes),
    ("runq_accuracy", test_runq_accuracy),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", retry=('cpu_interference', 'load', 'lock', 'io_interference'), prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
