#!/usr/bin/python3
"""The co-location benchmark: what tailwarden buys against no control and a static split.

Latency-critical services on CPU 0 under open-loop load from CPU 1, each
with an objective calibrated to the host; best-effort work beside them in
cgroups of their own. Scenarios (pick with --scenario; default all):

  1 today      60 s: nginx; at 10 s a CPU hog (stress-ng) starts, at 30 s the
               offered load doubles, at 40 s a disk reader (fio) starts
  2 two-lc     40 s: two latency-critical services with different objectives
               on CPU 0, nginx at p99 and memcached at p99.9; at 10 s the
               hog starts, at 20 s fio
  3 burst      40 s: nginx beside a hog that bursts on and off every 1-3 s
               (random; the same schedule for every arm of a repetition)
               from 5 s on: the hardest case for a reactive loop
  4 restart    40 s: nginx beside a hog that is restarted at 12 s and 26 s (a
               new cgroup each time, as a restarted systemd unit gets; here a
               cgroup removed and made again under the same name)
  5 own-load   45 s: nginx beside the hog from 5 s; from 15 s to 30 s a
               second load of costly requests (/heavy/page: nginx inflates
               32 KiB for each) at 1.3x what nginx serves of them beside the
               base load, open loop (measured in the calibration), over 64
               connections so that the queue forms in nginx (the objective
               cannot be met: the controller must say "own load", not
               strangle the hog for nothing, and give back when the load
               falls; its windows group requests by when they were sent, not
               due: the client's queue holds the step's requests past their
               due time, and those due in its last seconds are never sent)

Arms, interleaved in rotating order so that drift on the host hits all:

  lc-only     (scenarios 1-4) the latency-critical services and their load
              only: no best-effort work starts, no control. What this host
              gives them with nothing beside: the windows it loses are the
              host's, and no controller wins them back
  none        no control: the kernel's defaults
  static      a split set by hand, as a careful operator would: the
              best-effort cgroups' CPU weight at its floor and their quota
              capped so that the latency-critical services' measured peak
              plus 10% of a CPU stays free
  tailwarden  `tailwarden run` with the default policy (Weights=floor: the
              best-effort weights sit at their floor while a latency-critical
              service serves; `CPUWeight=idle..1000`: that floor is
              cpu.idle, below every weight, and home is 100; the top lets an
              overload's yield keep best-effort work its CPU, scenario 5)
  weight1     the same with `CPUWeight=1..1000` in the best-effort policies:
              their floor is the least weight (the default before 2026-11-27)
  slice       (scenario 1) the same, with `Slice=0.1ms` in nginx's policy
  avoid       (only with --arms) the same, with `AvoidServiceCPUs=yes` in the
              daemon's config: it keeps itself off CPU 0
  reactive    `Weights=reactive` (and `CPUWeight=1..100`) in the best-effort
              policies: their weights are cut on violations and given back
              in slack

Per arm: the share of 1 s windows within each objective (the client's
kernel receive time of each reply, requests grouped by when they were
due; in scenario 2 also of the seconds before the hog: the host's own
control); p50/p99; best-effort throughput kept (stress-ng bogo-ops/s and fio
MB/s against each alone on CPU 0; a bursting hog against alone times its
duty cycle); the utilisation of CPU 0 (latency-critical plus best-effort CPU
time over its capacity) and the share of what the latency-critical services
left idle that best-effort work used (Heracles' utilisation, over the
seconds it ran); the host's noise: CPU 0's time stolen by the hypervisor
(/proc/stat steal; whole arm, median of the repetitions, and the worst
second of any); and, per event, the control periods (500 ms) to
tailwarden's first knob write and to p99 back under the objective (two
windows in a row). In scenario 5 also the best-effort cuts in the step, and
from the first own-load verdict until 5 s after the load fell (Weights=floor
coming back once the load fell is not one: the yield ends, and the "load
falls" columns time it); the hog's CPU in the step against before it.
A repetition of an arm in a second of which the hypervisor stole more
than 5 % of CPU 0 measured the host's other guests
(a stall of 50 ms delays more than a second's 1 % of requests): it is set
aside and run again, at most --retakes times (default 2; the last is kept
if all are over); the log keeps its line, the scenario's head counts them.
With --trace, perf records the scheduler (sched_switch, sched_waking) in
each arm, and each lost window is put down to what took most of its slow
requests' time on CPU 0, from the client's write to the reply's receipt
(tests/lib/schedtrace.py): the service itself, another task by name, "CPU
0 idle" (nothing woken for it: the request not yet there) or "CPU 0
waking" (idle with a task woken for it not yet run: a halted vCPU the
hypervisor has not yet run again, a wait steal does not count); each
repetition's lost windows are listed under its line, and the table
counts them per arm. perf costs CPU 0 its tracepoint writes and CPU 1
its reader. The harness itself runs on CPU 1 only (tailwarden is started
on every CPU, as a service is; run 38 had it keep itself off CPU 0, where
the latency-critical services run: AvoidServiceCPUs=yes, not the default).
Targets (issue 25): >= 99.5 % of windows, best-effort work keeping >= 90 %
of what the latency-critical services leave idle and more than the static
arm, the first write within one period of the hog.

Usage: colocation.py [--scenario 1,3] [--reps N] [--retakes N] [--trace]
                     [--arms none,static,...] [--out DIR]
(root; default every scenario, 2 repetitions: about 13 minutes for
scenario 1 with the calibration and 8 for each other, 49 in all; tables
on stdout, reports and plots in
DIR, default .output/bench: colocation.md, and colocation-N.md and
colocation-N*.png per scenario)
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
import colo  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdoc  # noqa: E402
import schedtrace  # noqa: E402
from colo import fmt_us  # noqa: E402

ALL_ARMS = ("lc-only", "none", "static", "tailwarden", "avoid", "weight1", "slice", "reactive")
TW_ARMS = ("tailwarden", "avoid", "weight1", "slice", "reactive")
SLICE = "0.1ms"
PERIOD_S = 0.5
OVERLOAD = 1.3          # scenario 5: the step over what nginx serves of it (open loop)
OVER_CONNS = 64         # scenario 5's step: connections, so that the queue is in nginx
MC_QUIET_S, MC_HOG_S = 10, 5   # scenario 2: seconds of memcached's calibration readings
MC_TRIES = 3                   # scenario 2: readings, at most, for a separating objective
STEAL_RETAKE = 0.05     # a repetition with a second of more CPU 0 stolen than this is run again


def say(msg=""):
    print(msg, flush=True)


class Scenario:
    """What one scenario runs: its length, services, events and arms."""

    def __init__(self, key, name, title, arm_s, arms, lc, be_at):
        self.key, self.name, self.title, self.arm_s = key, name, title, arm_s
        self.arms, self.lc, self.be_at = arms, lc, be_at


ARMS = ("lc-only", "none", "static", "tailwarden", "weight1", "reactive")
SCENARIOS = {
    "1": Scenario("1", "today", "hog, load x2, disk reader", 60, ALL_ARMS, ("web",), 10),
    "2": Scenario("2", "two-lc", "nginx p99 and memcached p99.9, hog, disk reader", 40,
                  ARMS, ("web", "cache"), 10),
    "3": Scenario("3", "burst", "a hog bursting on and off every 1-3 s", 40, ARMS, ("web",), 5),
    "4": Scenario("4", "restart", "a best-effort service restarted twice (new cgroup)", 40,
                  ARMS, ("web",), 5),
    "5": Scenario("5", "own-load", "nginx's own load beyond one CPU, hog beside it", 45,
                  ("none", "static", "tailwarden", "weight1", "reactive"), ("web",), 5),
}


def stolen_s(cpu=colo.SERVER_CPU):
    """CPU cpu's steal time so far (s, /proc/stat): time the hypervisor ran
    something else while this guest had work for that vCPU."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%d " % cpu):
                return int(line.split()[8]) / os.sysconf("SC_CLK_TCK")
    return 0.0


def steal_mark():
    """Now, for stolen_since()."""
    return stolen_s(), time.monotonic()


def stolen_since(mark):
    """CPU 0's share stolen by the hypervisor since steal_mark()'s mark."""
    st0, t0 = mark
    return (stolen_s() - st0) / max(1e-9, time.monotonic() - t0)


def rep_line(rep, arm, r, cal):
    """One repetition of one arm, as the log gives it."""
    return ("  rep %d %-10s %s; %s; CPU 0 used %.0f%%, best-effort "
            "took %s of what LC left idle; host stole %.1f%% of CPU 0 (%.0f%% in the worst "
            "second); first write after each event (periods) %s"
            % (rep + 1, arm, "; ".join(
                "%s %d/%d windows met, whole-arm p%s %s" % (
                    n, v["met"], v["windows"], "99.9" if n == "cache" else "99",
                    fmt_us(v["p99"])) for n, v in r["svc"].items()),
               "no best-effort work" if r["bogo"] is None else "stress-ng %.0f%%%s of alone" % (
                   100 * r["bogo"] / max(1e-9, r["duty"]) / (cal["bogo"] or 1),
                   ", fio %.0f%%" % (100 * (r["mbps"] or 0) / (cal["mbps"] or 1))
                   if r["mbps"] is not None else ""),
               100 * r["util"], "-" if r["be_of_idle"] is None else
               "%.0f%%" % (100 * r["be_of_idle"]),
               100 * r["steal"], 100 * r["steal_max"],
               " ".join(periods(v) for v in r["first_write"]) or "-"))


def cause_word(k):
    """A lost window's cause as the log says it."""
    return {schedtrace.IDLE: "CPU 0 idle", schedtrace.WAKING: "CPU 0 waking"}.get(k, k)


def shares(share, n=3):
    """The n biggest shares of a lost window's slow requests' time, in words."""
    top = sorted(share.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join("%s %.0f%%" % (cause_word(k), 100 * v)
                     for k, v in top)


def lost_lines(r):
    """--trace: each lost window of a repetition, and what held it up."""
    out = []
    for name, v in r["svc"].items():
        for s, p, cause, share, st in v.get("lost", []):
            # /proc/stat counts steal in ticks of 10 ms.
            out.append("    lost: %s second %d, %s: %s%s" % (
                "memcached" if name == "cache" else "nginx", s, fmt_us(p), shares(share)
                or cause, "; host stole %.0f ms of CPU 0 in it" % (1e3 * st) if st else ""))
    return out


def lost_summary(scen, results):
    """--trace: per arm and service, the lost windows counted by what took most of
    their slow requests' time on CPU 0."""
    lines = []
    for arm in ALL_ARMS:
        rs = [r for r in results if r["arm"] == arm]
        for name in scen.lc:
            causes = {}
            for r in rs:
                for _, _, cause, _, _ in r["svc"][name].get("lost", []):
                    causes[cause] = causes.get(cause, 0) + 1
            if rs and "lost" in rs[0]["svc"][name]:
                lines.append("  %-10s %-9s %s" % (
                    arm, "memcached" if name == "cache" else "nginx",
                    ", ".join("%s %d" % (cause_word(k), c)
                              for k, c in sorted(causes.items(), key=lambda kv: -kv[1]))
                    or "none lost"))
    if lines:
        lines.insert(0, "lost windows by what ran most of their slow requests' time on CPU 0 "
                     "(--trace):")
    return lines


def retaken(results):
    """The head's word on repetitions run again for the host's steal."""
    again = sum(r["retaken"] for r in results)
    kept = sum(1 for r in results if r["steal_max"] > STEAL_RETAKE)
    return "" if not again else "; %d run%s set aside and run again, the host having stolen " \
        "over %.0f%% of CPU 0 in a second%s" % (
            again, "" if again == 1 else "s", 100 * STEAL_RETAKE,
            "" if not kept else " (%d kept so, the last of their tries)" % kept)


def recovery(p99s, target, at):
    """Seconds from `at` until the first of two windows in a row under target."""
    for s in range(at, len(p99s) - 1):
        if all(p is not None and p <= target for p in p99s[s:s + 2]):
            return s - at
    return None


def bursts(seed, start, end):
    """A hog's on/off schedule: [(on_at, off_at)], each phase 1-3 s, random."""
    rnd = random.Random(seed)
    out, t = [], float(start)
    while t < end:
        on = min(end, t + rnd.uniform(1, 3))
        out.append((t, on))
        t = on + rnd.uniform(1, 3)
    return out


class Arm:
    """One arm of one scenario: the timeline, the loads and the measures."""

    def __init__(self, rig, scen, arm, cal, rep):
        self.rig, self.scen, self.arm, self.cal, self.rep = rig, scen, arm, cal, rep
        self.actions, self.events, self.loads = [], [], []
        self.hog_on = []            # (from, to) seconds in which the hog ran
        self.own_at = None          # scenario 5: seconds to the first own-load verdict
        self.duty = 1.0

    def at(self, t, fn, event=None, be=False):
        """fn at t seconds; be: it starts or moves best-effort work (not in lc-only)."""
        if not (be and self.arm == "lc-only"):
            self.actions.append((t, fn))
        if event:
            self.events.append((event, t))

    def load(self, name, proto, port, rate, start, seconds, conns=8, extra=()):
        dump = os.path.join(self.rig.dir, "s%s-%s-%d-%d.dump" % (self.scen.key, name, start,
                                                                self.rep))
        entry = {"name": name, "dump": dump, "run": None, "start": start}

        def go():
            entry["run"] = self.rig.sess.loadgen(proto, port, rate, seconds, conns=conns,
                                                 cpu=colo.CLIENT_CPU,
                                                 extra=["--dump", dump] + list(extra),
                                                 background=True)
        self.at(start, go)
        self.loads.append(entry)

    def plan(self):
        """The scenario's timeline."""
        rig, s, n = self.rig, self.scen, self.scen.arm_s
        self.load("web", "http", rig.nginx.port, rig.rate, 0, n)
        if s.key == "1":
            self.at(10, lambda: rig.start_hog(seconds=n - 10), "hog starts", be=True)
            self.load("web", "http", rig.nginx.port, rig.rate, 30, n - 30)
            self.events.append(("load doubles", 30))
            self.at(40, lambda: rig.start_fio(seconds=n - 40), "fio starts", be=True)
            self.hog_on = [(10, n)]
        elif s.key == "2":
            self.load("cache", "memcached", rig.memcached().port, self.cal["mc_rate"], 0, n)
            self.at(10, lambda: rig.start_hog(seconds=n - 10), "hog starts", be=True)
            self.at(20, lambda: rig.start_fio(seconds=n - 20), "fio starts", be=True)
            self.hog_on = [(10, n)]
        elif s.key == "3":
            sched = bursts(1000 + self.rep, 5, n - 1)
            self.at(4, lambda: (rig.start_hog(seconds=n - 4), time.sleep(0.3),
                                rig.hog_pause(True)), be=True)
            for i, (on, off) in enumerate(sched):
                self.at(on, lambda: rig.hog_pause(False), "burst %d" % (i + 1), be=True)
                self.at(off, lambda: rig.hog_pause(True), be=True)
            self.hog_on = [(a, b) for a, b in sched]
            self.duty = sum(b - a for a, b in sched) / (n - 4)
        elif s.key == "4":
            self.at(5, lambda: rig.start_hog(seconds=n - 5), "hog starts", be=True)
            for t in (12, 26):
                self.at(t, lambda t=t: self.restart(seconds=n - t), "hog restarted", be=True)
            self.hog_on = [(5, n)]
        elif s.key == "5":
            self.at(5, lambda: rig.start_hog(seconds=n - 5), "hog starts", be=True)
            self.load("web", "http", rig.nginx.port, self.cal["over_rate"], 15, 15,
                      conns=OVER_CONNS, extra=["--path", colo.HEAVY_PATH])
            self.events.append(("overload", 15))
            self.events.append(("load falls", 30))
            self.hog_on = [(5, n)]

    def restart(self, seconds):
        """Scenario 4: the hog restarted in a new cgroup; a static split is set on it
        again, as a unit's properties outlive its restarts."""
        self.rig.restart_hog(seconds=seconds)
        if self.arm == "static":
            self.rig.set_static(*self.cal["static"])

    def configure(self):
        rig, arm = self.rig, self.arm
        self.orig = None
        if arm == "static":
            self.orig = rig.set_static(*self.cal["static"])
        elif arm in TW_ARMS:
            more = {}
            if self.scen.key == "2":
                more["cache.policy"] = ("[Service]\nCgroup=%s\nClass=latency-critical\n"
                                        "[Objective]\nPercentile=99.9\nTarget=%dus\n"
                                        "MinRequests=1000\nWindow=1s\n"
                                        % (rig.cache.rel, self.cal["mc_target"]))
            rig.write_config(tag="s%s-%s" % (self.scen.key, arm),
                             extra="AvoidServiceCPUs=yes\n" if arm == "avoid" else "",
                             web_limits="Slice=%s" % SLICE if arm == "slice" else "",
                             be_extra="Weights=reactive" if arm == "reactive" else "", more=more,
                             be_weight={"weight1": "1..1000", "reactive": "1..100"}.get(arm, "idle..1000"))
            rig.start_tailwarden()

    def lc_cgroups(self):
        return [self.rig.web] + ([self.rig.cache] if "cache" in self.scen.lc else [])

    def run(self, keep, trace=False):
        rig, n = self.rig, self.scen.arm_s
        self.plan()
        self.configure()
        self.trace = None
        cgs = self.lc_cgroups() + [rig.batch, rig.scan]
        prev = [rig.cpu_ns(c) for c in cgs]
        nlc = len(self.lc_cgroups())
        use = []                    # (lc CPUs, be CPUs) per second
        steal, prev_st = [], stolen_s()  # CPU 0's stolen share per second
        try:
            if trace:
                try:
                    self.trace = schedtrace.Trace(os.path.join(rig.dir, "sched.data"),
                                                  colo.CLIENT_CPU)
                except RuntimeError as e:
                    raise tw.SetupError("--trace: %s" % e)
            # loadgen's due times are CLOCK_MONOTONIC, its start_unix CLOCK_REALTIME.
            self.mono_off = time.time() - time.monotonic()
            t0 = time.time()
            self.t0 = t0
            todo = sorted(self.actions, key=lambda a: a[0])
            sec = 1
            while sec <= n:
                now = time.time() - t0
                while todo and todo[0][0] <= now:
                    todo.pop(0)[1]()
                if now >= sec:
                    # The log's lines carry no time: the first own-load verdict is
                    # placed after the last second whose read did not have it.
                    if self.arm in TW_ARMS and self.own_at is None and \
                            "violation (own load)" in (colo.readf(rig.runlog, "") or ""):
                        self.own_at = sec - 1
                    cur = [rig.cpu_ns(c) for c in cgs]
                    # A cgroup made again (scenario 4's restart) counts from 0.
                    d = [(c - p if c >= p else c) / 1e9 for c, p in zip(cur, prev)]
                    use.append((sum(d[:nlc]), sum(d[nlc:])))
                    st = stolen_s()
                    steal.append(st - prev_st)
                    prev_st = st
                    prev = cur
                    sec += 1
                nxt = min([sec] + [a[0] for a in todo[:1]])
                time.sleep(max(0.0, min(0.1, nxt - (time.time() - t0))))
            if rig.hog:
                rig.hog_pause(False)    # a bursting hog ends by its timeout
            results = [(e, e["run"].result(timeout=60)) for e in self.loads]
            bogo = rig.hog_bogo_ops(timeout=30) if rig.hog else None
            mbps = rig.fio_mbps(timeout=60) if rig.fio else None
            decisions = rig.decisions_list() if self.arm in TW_ARMS else []
            runlog = colo.readf(rig.runlog, "") if self.arm in TW_ARMS else ""
            if keep and self.arm in TW_ARMS:
                for src, suffix in ((rig.decisions, "decisions.jsonl"), (rig.runlog, "run.log")):
                    with open(src) as f, open("%s.%s.%s" % (keep, self.arm, suffix), "w") as g:
                        g.write(f.read())
        finally:
            if self.trace:
                self.trace.stop()
            rig.stop_hog()
            rig.stop_fio()
            if self.arm in TW_ARMS:
                rig.stop_tailwarden()
            if self.orig:
                rig.restore_files(self.orig)
        try:
            return self.figures(results, bogo, mbps, decisions, runlog, use, steal)
        finally:
            if self.trace and os.path.exists(self.trace.path):
                os.unlink(self.trace.path)

    def lost_blame(self, lost, steal):
        """--trace: what held up each lost window's slow requests (schedtrace.blame).
        lost: {service: (its windows' percentiles, objective (us), [(window, wrote,
        latency (us))] of its requests)}. Returns {service: [(second, its percentile,
        cause, {name: share}, CPU 0's steal in it (s))]}, the recording decoded once."""
        spans, bad = {}, {}
        for name, (ps, target, reqs) in lost.items():
            bad[name] = [s for s, p in enumerate(ps) if p is not None and p > target]
            over = set(bad[name])
            for s, wrote, rx in reqs:
                if rx > target and s in over:
                    w = wrote - self.mono_off
                    spans.setdefault((name, s), []).append((w, w + rx / 1e6))
        got = schedtrace.blame(spans, self.trace.path, colo.SERVER_CPU) if spans else {}
        return {name: [(s, lost[name][0][s]) + got.get((name, s), ("no request over", {})) +
                       (steal[s] if s < len(steal) else None,) for s in seconds]
                for name, seconds in bad.items()}

    def figures(self, results, bogo, mbps, decisions, runlog, use, steal):
        rig, scen, n = self.rig, self.scen, self.scen.arm_s
        out = {"arm": self.arm, "errors": sum(r["errors"] for _, r in results), "svc": {},
               "bogo": bogo, "mbps": mbps, "duty": self.duty, "decisions": len(decisions)}
        start = min(r["start_unix"] for _, r in results)
        lost = {}
        for name in scen.lc:
            pct = 99.9 if name == "cache" else 99
            target = self.cal["mc_target"] if name == "cache" else rig.target
            reqs = []   # (window, unix time written, latency (us))
            for e, r in results:
                if e["name"] == name:
                    # Scenario 5's step queues in the client: by when each was sent.
                    for due, sent, lat in colo.read_dump_times(e["dump"], r["start_unix"]):
                        reqs.append((int((sent if scen.key == "5" else due) - start), sent, lat))
            buckets = [[] for _ in range(n)]
            for s, _, lat in reqs:
                if 0 <= s < n:
                    buckets[s].append(lat)
            ps = [colo.pct(b, pct) for b in buckets]
            wins = [p for p in ps if p is not None]
            lats = [lat for _, _, lat in reqs]
            # The seconds before the hog first runs: the host's own control.
            quiet = [p for p in ps[:int(min(a for a, _ in self.hog_on))] if p is not None]
            out["svc"][name] = {
                "p": ps, "met": sum(1 for p in wins if p <= target), "windows": len(wins),
                "met_before": sum(1 for p in quiet if p <= target), "before": len(quiet),
                "p50": colo.pct(lats, 50), "p99": colo.pct(lats, pct), "target": target,
                "recovery": [recovery(ps, target, int(at)) for _, at in self.events]}
            if self.trace:
                lost[name] = (ps, target, reqs)
        if self.trace:
            for name, got in self.lost_blame(lost, steal).items():
                out["svc"][name]["lost"] = got
        # p99 back under the objective after each event: every LC service's.
        rec = [v["recovery"] for v in out["svc"].values()]
        out["recovery"] = [None if any(r[i] is None for r in rec) else max(r[i] for r in rec)
                           for i in range(len(self.events))]
        # The first knob write after each event (any service), in periods.
        out["first_write"] = []
        for _, at in self.events:
            ts = [d["ts"] - self.t0 for d in decisions if d["ts"] - self.t0 >= at]
            out["first_write"].append(min(ts) - at if ts else None)
        # CPU 0: utilisation, and what best-effort work took of what LC left idle
        # in the seconds the hog ran.
        on = [s for s in range(n) if any(a <= s and s + 1 <= b + 0.5 for a, b in self.hog_on)]
        out["util"] = sum(lc + be for lc, be in use) / max(1, len(use))
        # The host's noise: CPU 0's time stolen by the hypervisor, whole arm
        # and worst second.
        out["steal"] = sum(steal) / max(1, len(steal))
        out["steal_max"] = max(steal, default=0.0)
        idle = sum(max(0.0, 1 - use[s][0]) for s in on if s < len(use))
        out["be_of_idle"] = (sum(use[s][1] for s in on if s < len(use)) / idle) \
            if idle and self.arm != "lc-only" else None
        if scen.key == "5":
            # Best-effort cuts while the service's own load is beyond the CPU,
            # the hog's CPU in the seconds before the step and during it,
            # whether the verdict named own load, and the knobs after the fall.
            def num(v):
                return float("inf") if v == "max" else v
            cut = [d for d in decisions if d["service"] in ("batch", "scan")
                   and isinstance(num(d["new"]), (int, float))
                   and isinstance(num(d["old"]), (int, float)) and num(d["new"]) < num(d["old"])]
            # Cuts in the step, and after the first own-load verdict until 5 s
            # after the load fell (its backlog drained). Once the load fell,
            # Weights=floor coming back is not one (as in test_control's
            # own_load): the yield ends, and the "load falls" columns time it.
            cut = [d for d in cut if not (d["ts"] - self.t0 >= 30
                                          and any(f in d["reason"] for f in colo.FLOOR_BACK))]
            out["over_cuts"] = len([d for d in cut if 15 <= d["ts"] - self.t0 < 30])
            out["own_at"] = self.own_at
            # After it in the log's order (its seconds place it only within one):
            # the decisions written before its line are not after it.
            lines = runlog.splitlines()
            first = next((i for i, l in enumerate(lines) if "violation (own load)" in l), None)
            written = 0 if first is None else sum(
                1 for l in lines[:first] if re.match(r"tailwarden: \S+: \S+ -> \S+ \(", l))
            out["cuts_after_own"] = None if first is None else len(
                [d for d in cut if d in decisions[written:] and d["ts"] - self.t0 < 35])
            before = [use[s][1] for s in range(9, 15)]
            during = [use[s][1] for s in range(18, 30)]
            out["be_kept_over"] = (statistics.mean(during) / statistics.mean(before)
                                   if statistics.mean(before) > 0 else None)
            out["own_load_said"] = "own load" in runlog
            step = [r for e, r in results if e["name"] == "web" and e["start"] == 15]
            out["step_rps"] = step[0]["completed"] / 15.0 if step else None
        return out


def calibrate(rig, scens):
    """Rate, hog, objective; the static split; what each antagonist does alone."""
    cal = {}
    say("calibrating (client p99, kernel receive time; 3 s each):")
    mark = steal_mark()
    alone, hog, share, ok = rig.calibrate(4, 3, say)
    say("  chosen: %d req/s, %d hog workers; objective p99 <= %s%s (the host stole %.1f%% of "
        "CPU 0 in the readings)"
        % (rig.rate, rig.hogs, fmt_us(rig.target),
           "" if ok else " (no setting separated 4x: the strongest)",
           100 * stolen_since(mark)))
    loads = [("http", rig.nginx.port, 2 * rig.rate)]
    if "2" in scens:
        cal["mc_rate"] = rig.rate // 2
        mc = rig.memcached()

        def mc_p999(seconds):
            """memcached's p99.9 in each second of a reading beside nginx's base load."""
            lg = rig.sess.loadgen("http", rig.nginx.port, rig.rate, seconds + 1,
                                  cpu=colo.CLIENT_CPU, background=True)
            d = os.path.join(rig.dir, "mc-cal.dump")
            r = rig.sess.loadgen("memcached", mc.port, cal["mc_rate"], seconds,
                                 cpu=colo.CLIENT_CPU, extra=["--dump", d])
            lg.result(timeout=60)
            return colo.seconds_sorted(d, r["start_unix"], seconds, 99.9)
        # A p99.9 of one second is its 4 worst requests in 4000: on a VM one
        # stall of the host's decides it. The objective is one memcached meets
        # in every second of a quiet reading, with half again as margin, and
        # no less than nginx's rule gives (3x alone, or the geometric mean of
        # alone and beside the hog).
        # The host's stalls make the quiet reading's worst second vary: a
        # reading whose objective the hog's median second is not 1.5x over
        # is taken again, up to MC_TRIES readings; the last is kept.
        for attempt in range(1, MC_TRIES + 1):
            mark = steal_mark()
            quiet = mc_p999(MC_QUIET_S)
            rig.start_hog()
            time.sleep(0.5)
            beside = mc_p999(MC_HOG_S)
            rig.stop_hog()
            a, worst, h = quiet[len(quiet) // 2], quiet[-1], beside[len(beside) // 2]
            cal["mc_target"] = int(max((a * h) ** 0.5, 3 * a, 1.5 * worst))
            weak = h < 1.5 * cal["mc_target"]
            say("  memcached at %d req/s beside nginx, p99.9 per second: alone %s (median of %d "
                "s), %s at worst; beside the hog %s (median of %d s); the host stole %.1f%% of "
                "CPU 0; objective p99.9 <= %s%s"
                % (cal["mc_rate"], fmt_us(a), len(quiet), fmt_us(worst), fmt_us(h), len(beside),
                   100 * stolen_since(mark), fmt_us(cal["mc_target"]),
                   "" if not weak else
                   " (the hog's median second is not 1.5x over it: a weak separation%s)"
                   % ("; again" if attempt < MC_TRIES else
                      "; kept, after %d readings: memcached's figures separate nothing"
                      % MC_TRIES)))
            if not weak:
                break
        cal["mc_weak"] = weak
    # The careful operator's split: what the LC services use at their peak
    # (nginx at twice its rate, memcached at its own), plus 10% of a CPU, stays free.
    u0, t0 = sum(rig.cpu_ns(c) for c in [rig.web] + ([rig.cache] if "2" in scens else [])), \
        time.monotonic()
    bg = None
    if "2" in scens:
        bg = rig.sess.loadgen("memcached", rig.mc.port, cal["mc_rate"], 4, cpu=colo.CLIENT_CPU,
                              background=True)
    rig.p99(4, rate=2 * rig.rate)
    if bg:
        bg.result(timeout=40)
    el = time.monotonic() - t0
    use = (sum(rig.cpu_ns(c) for c in [rig.web] + ([rig.cache] if "2" in scens else []))
           - u0) / 1e9 / el
    quota_each = max(0.05, max(0.10, 1.0 - use - 0.10) / 2)
    cal["static"] = (10, int(quota_each * 100000))
    say("  static split: the latency-critical services used %.0f%% of a CPU at their peak; each "
        "best-effort cgroup gets cpu.shares 10 and quota %.0f%% of one CPU"
        % (100 * use, 100 * quota_each))
    if "5" in scens:
        # The overload: requests for /heavy/page (nginx inflates 32 KiB of gzip
        # for each, its client only reads them), so that the client on the other
        # CPU can offer more than nginx serves; over OVER_CONNS connections, so
        # that the queue forms in nginx (a connection carries one request at a
        # time: with loadgen's 8, an overload's queue waits in the client, before
        # the write() that the kernel receive time counts from; a step of 1.3x
        # a closed loop's capacity of / met every window). Sized from what
        # nginx serves of it open loop beside the base load: a closed loop's
        # rate, offered 1.5x, for 3 s; nginx's CPU use says whether it, not
        # the client, was the limit.
        heavy = ["--path", colo.HEAVY_PATH]
        r = rig.sess.loadgen("http", rig.nginx.port, 1, 2, conns=OVER_CONNS, cpu=colo.CLIENT_CPU,
                             extra=["--closed"] + heavy)
        probe = int(1.5 * r["rps"])
        bg = rig.sess.loadgen("http", rig.nginx.port, rig.rate, 5, cpu=colo.CLIENT_CPU,
                              background=True)
        time.sleep(1)
        w0, t0 = rig.cpu_ns(rig.web), time.monotonic()
        r = rig.sess.loadgen("http", rig.nginx.port, probe, 3, conns=OVER_CONNS,
                             cpu=colo.CLIENT_CPU, extra=heavy)
        web_busy = (rig.cpu_ns(rig.web) - w0) / 1e9 / (time.monotonic() - t0)
        bg.result(timeout=40)
        capacity = r["completed"] / 3.0
        cal["over_rate"] = max(1, int(OVERLOAD * capacity))
        cal["capacity"], cal["web_busy"] = capacity, web_busy
        say("  scenario 5: %s open loop, %d req/s offered beside / at %d req/s (closed loop "
            "served %.0f): nginx served %.0f req/s of it using %.0f%% of CPU %d%s; the overload "
            "offers %d req/s of it (%.1fx) from 15 s to 30 s over %d connections" % (
                colo.HEAVY_PATH, probe, rig.rate, probe / 1.5, capacity, 100 * web_busy,
                colo.SERVER_CPU, "" if web_busy >= 0.9 else
                " (NOT saturated: the client was the limit; the step may not overload it)",
                cal["over_rate"], OVERLOAD, OVER_CONNS))
    rig.start_hog(seconds=10)
    cal["bogo"] = rig.hog_bogo_ops(timeout=40)
    rig.start_fio(seconds=10)
    cal["mbps"] = rig.fio_mbps(timeout=60)
    say("  alone on CPU 0: stress-ng %.0f bogo-ops/s, fio %.1f MB/s"
        % (cal["bogo"] or 0, cal["mbps"] or 0))
    return cal


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(h).rjust(w) for h, w in zip(header, widths))]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows]
    return lines


def periods(v):
    return "-" if v is None else "%.0f" % (v / PERIOD_S)


def summary(scen, results, cal):
    """The scenario's table, one row per arm (medians of repetitions; windows summed)."""
    rows = []
    many = len(scen.lc) > 1
    for arm in ALL_ARMS:
        rs = [r for r in results if r["arm"] == arm]
        if not rs:
            continue
        row = [arm]
        for name in scen.lc:
            met = sum(r["svc"][name]["met"] for r in rs)
            wins = sum(r["svc"][name]["windows"] for r in rs)
            row += ["%d/%d (%.1f%%)" % (met, wins, 100.0 * met / max(1, wins)),
                    fmt_us(statistics.median(r["svc"][name]["p99"] or 0 for r in rs))]
            if scen.key == "2":
                row += ["%d/%d" % (sum(r["svc"][name]["met_before"] for r in rs),
                                   sum(r["svc"][name]["before"] for r in rs))]
        # A figure no repetition has (no best-effort work ran: lc-only) reads "-".
        def kept(key, scale=lambda r: 1.0):
            if all(r[key] is None for r in rs):
                return "-"
            return "%.0f%%" % (100 * statistics.median((r[key] or 0) * scale(r) for r in rs))
        row += [kept("bogo", lambda r: 1 / max(1e-9, r["duty"]) / (cal["bogo"] or 1))]
        if scen.key in ("1", "2"):
            row += [kept("mbps", lambda r: 1 / (cal["mbps"] or 1))]
        row += ["%.0f%%" % (100 * statistics.median(r["util"] for r in rs)), kept("be_of_idle"),
                "%.1f%% / %.0f%%" % (100 * statistics.median(r["steal"] for r in rs),
                                     100 * max(r["steal_max"] for r in rs))]
        if scen.key == "3":
            # Many events: the median and worst over every burst of every repetition.
            fw = [v for r in rs for v in r["first_write"]]
            rc = [v for r in rs for v in r["recovery"]]
            fwk = [v for v in fw if v is not None]
            rck = [v for v in rc if v is not None]
            row += ["%s / %s (%d of %d bursts)" % (
                        periods(statistics.median(fwk)) if fwk else "-",
                        periods(max(fwk)) if fwk else "-", len(fwk), len(fw)),
                    "%s / %s (%d of %d never)" % (
                        periods(statistics.median(rck)) if rck else "-",
                        periods(max(rck)) if rck else "-", len(rc) - len(rck), len(rc))]
        else:
            nev = len(rs[0]["first_write"])
            for i in range(nev):
                row += [" / ".join(periods(r["first_write"][i]) for r in rs),
                        " / ".join("never" if r["recovery"][i] is None else
                                   periods(r["recovery"][i]) for r in rs)]
        if scen.key == "5":
            row += [" / ".join(str(r.get("over_cuts", "-")) for r in rs),
                    " / ".join("-" if r.get("own_at") is None else "%d s: %d" % (
                        r["own_at"], r["cuts_after_own"]) for r in rs),
                    " / ".join("-" if r.get("be_kept_over") is None else
                               "%.0f%%" % (100 * r["be_kept_over"]) for r in rs),
                    " / ".join("yes" if r.get("own_load_said") else "no" for r in rs),
                    " / ".join("-" if r.get("step_rps") is None else "%.0f" % r["step_rps"]
                               for r in rs)]
        rows.append(row)
    header = ["arm"]
    for name in scen.lc:
        label = "memcached p99.9" if name == "cache" else "nginx p99"
        header += ["%s windows met" % label if many else "windows met", "%s" % label]
        if scen.key == "2":
            header += ["of them before the hog"]
    header += ["stress-ng kept"] + (["fio kept"] if scen.key in ("1", "2") else [])
    header += ["CPU 0 used", "BE of LC idle", "CPU 0 stolen: arm / worst s"]
    if scen.key == "3":
        header += ["periods to 1st write: median / worst", "periods to p99 back: median / worst"]
    else:
        evs = [e for e, _ in Arm(None, scen, "none", cal, 0).events_only()]
        for e in evs:
            header += ["%s: periods to 1st write" % e, "%s: to p99 back" % e]
    if scen.key == "5":
        header += ["BE cuts in overload", "own load said at: BE cuts after", "BE CPU kept in overload",
                   "said own load",
                   "step's req/s served"]
    return table(rows, header)


def _events_only(self):
    """The events of a scenario's timeline, without a rig (for the table's header)."""
    s = self.scen
    return {"1": [("hog starts", 10), ("load doubles", 30), ("fio starts", 40)],
            "2": [("hog starts", 10), ("fio starts", 20)],
            "4": [("hog starts", 5), ("hog restarted", 12), ("hog restarted", 26)],
            "5": [("hog starts", 5), ("overload", 15), ("load falls", 30)]}.get(s.key, [])


Arm.events_only = _events_only


def plot(out, scen, results):
    """One PNG per latency-critical service: its percentile per window, first repetition."""
    first, paths = {}, []
    for r in results:
        first.setdefault(r["arm"], r)
    arms = [a for a in ALL_ARMS if a in first]
    for name in scen.lc:
        data = os.path.join(out, "colocation-%s-%s.dat" % (scen.key, name))
        target = next(iter(first.values()))["svc"][name]["target"]
        with open(data, "w") as f:
            f.write("# second " + " ".join(arms) + "\n")
            for s in range(scen.arm_s):
                f.write("%d %s\n" % (s, " ".join(
                    "%.1f" % first[a]["svc"][name]["p"][s] if first[a]["svc"][name]["p"][s]
                    else "NaN" for a in arms)))
        png = "colocation-%s%s.png" % (scen.key, "" if name == "web" else "-" + name)
        labels = "".join("set arrow from %g, graph 0 to %g, graph 1 nohead dt 2\n"
                         "set label '%s' at %g, graph 0.97\n" % (at, at, e, at + 0.3)
                         for e, at in Arm(None, scen, "none", None, 0).events_only())
        what = "memcached p99.9" if name == "cache" else "nginx p99"
        script = ("set terminal pngcairo size 1000,400 font ',10'\nset output '%s/%s'\n"
                  "set title 'scenario %s (%s): %s per 1 s window (client, kernel receive "
                  "time), first repetition'\nset xlabel 'seconds'\nset ylabel 'microseconds'\n"
                  "set logscale y\nset grid\nset key outside right top\n%s"
                  "plot %s, %d with lines lw 2 dt 1 title 'objective'\n"
                  % (out, png, scen.key, scen.name, what, labels, ", ".join(
                      "'%s' using 1:%d with linespoints pt 7 ps 0.4 title '%s'" % (data, i + 2, a)
                      for i, a in enumerate(arms)), target))
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode == 0:
            paths.append(png)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--retakes", type=int, default=2,
                    help="times, at most, a repetition is run again when the hypervisor stole "
                    "more than %.0f%%%% of CPU 0 in one of its seconds (default 2)"
                    % (100 * STEAL_RETAKE))
    ap.add_argument("--out", default=os.path.join(tw.REPO, ".output", "bench"))
    ap.add_argument("--scenario", default=",".join(SCENARIOS),
                    help="comma-separated scenarios to run (default all: %s)"
                    % ", ".join("%s %s" % (k, s.name) for k, s in SCENARIOS.items()))
    ap.add_argument("--arms", default=None,
                    help="comma-separated arms (of %s; default each scenario's own)"
                    % ",".join(ALL_ARMS))
    ap.add_argument("--no-docs", action="store_true",
                    help="do not write the scenarios' blocks of docs/benchmarks.md")
    ap.add_argument("--trace", action="store_true",
                    help="record the scheduler (perf, sched_switch and sched_waking on every "
                    "CPU) in each arm and say, for each lost window, what ran on CPU 0 while "
                    "its slow requests waited")
    args = ap.parse_args()
    why = args.trace and schedtrace.available()
    if why:
        sys.exit("colocation: --trace: %s" % why)
    if args.retakes < 0:
        sys.exit("colocation: --retakes %d: must be 0 or more" % args.retakes)
    if os.geteuid() != 0:
        sys.exit("colocation: must run as root (BPF and cgroups)")
    # The harness stays off the server's CPU: its own seconds would be the
    # services' noise (tailwarden is started on every CPU, as a service is).
    os.sched_setaffinity(0, {colo.CLIENT_CPU})
    keys = [k for k in args.scenario.split(",") if k]
    for k in keys:
        if k not in SCENARIOS:
            sys.exit("colocation: no scenario %r (%s)" % (k, ", ".join(SCENARIOS)))
    os.makedirs(args.out, exist_ok=True)
    report = ["# Co-location benchmark", ""]
    with tw.Session(("unified", "cpu", "cpuacct"), tag="colo") as sess:
        rig = colo.Rig(sess, sess.tmpdir("colo"))
        try:
            rig.layout_fio()
            cal = calibrate(rig, keys)
            for k in keys:
                scen = SCENARIOS[k]
                arms = [a for a in (args.arms.split(",") if args.arms else scen.arms)
                        if a in ALL_ARMS]
                say()
                say("scenario %s (%s): %s, %d s per arm, arms %s"
                    % (k, scen.name, scen.title, scen.arm_s, ", ".join(arms)))
                results = []
                for rep in range(args.reps):
                    order = arms[rep % len(arms):] + arms[:rep % len(arms)]
                    for arm in order:
                        # A repetition in a second of which the hypervisor took more
                        # than STEAL_RETAKE of CPU 0 measured the host's other guests,
                        # not the arm: it is run again, up to --retakes times; the
                        # line of each one set aside stays in the log.
                        for take in range(args.retakes + 1):
                            r = Arm(rig, scen, arm, cal, rep).run(
                                os.path.join(args.out, "colocation-%s-rep%d" % (k, rep + 1)),
                                trace=args.trace)
                            noisy = r["steal_max"] > STEAL_RETAKE
                            r["retaken"] = take
                            if not noisy:
                                say(rep_line(rep, arm, r, cal))
                                for line in lost_lines(r):
                                    say(line)
                                break
                            if take < args.retakes:
                                say(rep_line(rep, arm, r, cal) + "; set aside (over %.0f%% stolen "
                                    "in a second), run again" % (100 * STEAL_RETAKE))
                            else:
                                say(rep_line(rep, arm, r, cal) + "; kept after %d run%s, all over "
                                    "%.0f%% stolen in a second"
                                    % (take + 1, "" if take == 0 else "s", 100 * STEAL_RETAKE))
                        results.append(r)
                lines = summary(scen, results, cal)
                lines += lost_summary(scen, results)
                head = ("scenario %s (%s): %s; nginx %d req/s, objective p99 <= %s%s; %d "
                        "repetitions of %d s per arm (medians; per-event figures per repetition, "
                        "500 ms periods%s)" % (
                            k, scen.name, scen.title, rig.rate, fmt_us(rig.target),
                            "; memcached %d req/s, p99.9 <= %s%s" % (
                                cal["mc_rate"], fmt_us(cal["mc_target"]),
                                " (no separation after %d readings: its windows say nothing)"
                                % MC_TRIES if cal["mc_weak"] else "") if k == "2" else "",
                            args.reps, scen.arm_s, retaken(results)))
                say()
                say(head)
                for line in lines:
                    say(line)
                pngs = plot(args.out, scen, results)
                part = ["## Scenario %s: %s" % (k, scen.name), "", head, "", "```"] + lines + \
                    ["```", ""] + ["![%s](%s)" % (p, p) for p in pngs] + [""]
                with open(os.path.join(args.out, "colocation-%s.md" % k), "w") as f:
                    f.write("\n".join(part) + "\n")
                report += part
                if not args.no_docs and not args.arms:
                    # Scenario 1 keeps the block name it had alone.
                    benchdoc.write(benchdoc.DOC, {
                        "colocation" if k == "1" else "colocation-%s" % k:
                        "%s\n\n%s\n\n`tests/bench/colocation.py --scenario %s`, %d repetitions "
                        "of each arm, interleaved:\n\n```\n%s\n```"
                        % (benchdoc.facts(), head, k, args.reps, "\n".join(lines))})
        finally:
            rig.remove_fio_data()
    with open(os.path.join(args.out, "colocation.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    say("report: %s (per scenario colocation-N.md; tailwarden's decisions and log: "
        "colocation-N-rep*.ARM.decisions.jsonl, *.run.log)"
        % os.path.relpath(os.path.join(args.out, "colocation.md")))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except tw.SetupError as e:
        sys.exit("colocation: %s" % e)
