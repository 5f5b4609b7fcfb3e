#!/usr/bin/python3
"""Integration tests of `tailwarden run`: the closed loop on real services.

nginx (latency-critical) and `stress-ng --cpu` (best-effort) share CPU 0 in
cgroups of their own; the open-loop generator on CPU 1 drives nginx. The
tests check what a user would notice: the service's p99 comes back under
its target soon after the hog starts, the hog keeps a share of the CPU,
dry-run decides the same and writes nothing, and every knob is back to its
original value after SIGTERM, and after kill -9 + `tailwarden restore`.
weights_floor checks the default, Weights=floor (the other tests pin
Weights=reactive, whose cuts and give-backs they follow): the hog's weight is
at its floor before the hog starts, p99 stays under target from the hog's
first second, and the weight goes home once nginx stops serving. be_share
checks how two best-effort services share a quota cut: the light one under its
part keeps its quota. own_load checks nginx's own load beyond its CPU beside the hog:
the verdict says own load, the hog is not cut after it, its floor yields so that it
keeps 80% of its CPU before the step through the overload, and it has its CPU back once the load falls. two_lc checks two latency-critical services with different
objectives beside the hog, nginx at p99 and memcached at p99.9: each over
its own in at most one second more than in as long without the hog. burst checks a hog switching on and off every 1-3 s: at its floor (or a
write within one period) at each start, the windows with a burst over the
target no more often than the quiet ones (the host's own noise) predict;
restart a hog restarted into a new cgroup: at its floor within 0.1 s of
its directory being made (the daemon watches for it). The
slice tests check Slice=: nginx's threads get the policy's EEVDF
slice (read from /proc/TID/sched), a thread started later too, and every
thread has its own slice back after SIGTERM and after kill -9 + restore.

Usage: test_control.py [-v] [TEST...]   (as root; prints PASS/FAIL/SKIP per
test and "N passed, N failed, N skipped"; exits 1 when a test failed).
"""

import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from colo import FLOOR_BACK, pct  # noqa: E402
from twtest import check, TestFailure  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
HOG_KEPT = 0.6          # the hog keeps this share of what nginx leaves of CPU 0 (check_hog_kept())
RATE = 8000             # req/s offered to nginx: about a third of one CPU here. At 2000 req/s
                        # EEVDF wake-up preemption shields nginx from the hog about half the
                        # time (p99 even falls: the CPU never idles); at 8000 the hog multiplies
                        # p99 by 8-30 in every run measured.
PERIOD = "500ms"
WINDOW = "1s"
# Calibration of the closed-loop test, tried in this order until the hog
# raises nginx's p99 at least SEPARATION times over its p99 alone: offered
# rate (req/s) and stress-ng --cpu workers. Hosts of this kind differ: one
# had nginx alone at 8000 req/s at 0.15 ms p99, another at 2.2 ms.
SETTINGS = ((8000, 2), (8000, 4), (4000, 4), (12000, 4), (2000, 8))
SEPARATION = 6          # so that a target between the two is at most half the hog's p99
RECOVER_S = 5.0         # p99 back under target within this long after the hog starts
LEAD_S = 3              # closed loop: seconds of load before the hog starts
CONTROL_S = 15          # and after
# own_load: costly requests (nginx inflates HEAVY_KIB of gzip for each, its client
# only reads them: one client CPU can offer more than nginx's CPU serves), over
# OVER_CONNS connections so that the queue forms in nginx, not in the client.
HEAVY_KIB = 32
HEAVY_PATH = "/heavy/page"
OVER_CONNS = 64
OVER_FACTORS = (1.3, 1.6, 2.0)  # the step over what nginx serves of it, tried in order
OVER_SEPARATION = 4     # ... until the step's p99 is this many times the target
OWN_LEAD_S = 12         # own_load: the base load and the hog alone before the step
OWN_STEP_S = 12         # the step
OWN_AFTER_S = 18        # and after it
OWN_KEPT = 0.8          # the hog's CPU in the step after the verdict, of before it, at least
OWN_LEAD_TRIES = 3      # leads tried until one leaves the hog at its floor alone (own_load_lead())
BURST_LEAD_S = 3        # burst: the load alone before the hog's first burst
BURST_PHASE_S = 30      # the hog on and off every 1-3 s (random, seeded)
BURST_SEED = 25
RESTART_AT_S = (10, 20)  # restart: the hog restarted in a new cgroup at these seconds
RESTART_S = 30
RESTART_FLOOR_S = 0.1    # restart: a new cgroup at its floor this soon (a period is 0.5 s)
PERIOD_S = 0.5          # PERIOD in seconds
MC_RATE = 4000          # two_lc: req/s offered to memcached beside nginx
MC_SEPARATION = 4       # ... whose p99.9 the hog must raise this many times
MC_TRIES = 3            # ... readings of its p99.9 alone at most
QUIET_MARGIN = 1.25     # two_lc: the phase with the hog within the objective or this times the quiet phase
MORE_OVER_P = 0.05      # two_lc: more seconds over with the hog than without is a failure below this (more_over_p())
TWO_LC_S = 15           # two_lc: seconds without the hog, then as many with it




def info(msg):
    if tw.verbose():
        tw.log(msg)


def readf(path):
    with open(path) as f:
        return f.read().strip()


def knob_files(cg):
    base = os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"))
    return {k: os.path.join(base, k) for k in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us")}


def snapshot(files):
    return {k: readf(p) for k, p in files.items()}


def default_floor(files):
    """The default policy's floor for the hog's knob files (knob_files()):
    CPUWeight=idle..100, its floor cpu.idle 1 (added to files, so that its
    restore is checked too); on a kernel without cpu.idle, 1..100 and
    cpu.shares 10. Returns (the file, its value at the floor, CPUWeight=)."""
    idle = os.path.join(os.path.dirname(files["cpu.shares"]), "cpu.idle")
    if not os.path.exists(idle):
        return files["cpu.shares"], "10", "1..100"
    files["cpu.idle"] = idle
    return idle, "1", "idle..100"


def cpu_usage_ns(cg):
    return int(readf(os.path.join(tw.CGROUP_FS, "cpuacct", cg.rel.lstrip("/"), "cpuacct.usage")))


class CpuShares:
    """What each cgroup used of a CPU from now until done()."""

    def __init__(self, **cgs):
        self.cgs = cgs
        self.t0 = time.monotonic()
        self.u0 = {n: cpu_usage_ns(cg) for n, cg in cgs.items()}

    def done(self):
        dt = time.monotonic() - self.t0
        return {n: (cpu_usage_ns(cg) - self.u0[n]) / 1e9 / dt for n, cg in self.cgs.items()}


class CpuTrace:
    """A cgroup's CPU time, read every 0.1 s (on the reader's CPU) from now until
    stop(): what it used of a CPU over any interval within, such as one tick's."""

    def __init__(self, cg):
        self.cg, self.samples, self.done = cg, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            self.samples.append((time.time(), cpu_usage_ns(self.cg)))
            if self.done.wait(0.1):
                return

    def stop(self):
        self.done.set()
        self.thread.join(5)
        self.samples.append((time.time(), cpu_usage_ns(self.cg)))

    def share(self, t0, t1):
        """Its share of a CPU from t0 to t1 (unix time); None outside the samples."""
        def at(t):
            for (ta, ua), (tb, ub) in zip(self.samples, self.samples[1:]):
                if ta <= t <= tb:
                    return ua + (ub - ua) * ((t - ta) / (tb - ta) if tb > ta else 0)
            return None
        u0, u1 = at(t0), at(t1)
        return None if u0 is None or u1 is None or t1 <= t0 else (u1 - u0) / 1e9 / (t1 - t0)


def check_hog_kept(hog, lc, what="nginx"):
    """The hog kept HOG_KEPT of what the latency-critical services (lc: their
    share of a CPU) left of CPU 0: how much they use depends on the host (on a
    2-vCPU AMD EPYC VM here nginx's 8000 req/s took 65-71% of it, and the hog at
    its floor kept 20-23% in CI against a fixed 25% asked), so a fixed share of
    a CPU would measure the host, not the floor. Returns a phrase."""
    left = max(0.0, 1.0 - lc)
    of_left = hog / left if left else 0.0
    check(hog >= HOG_KEPT * left,
          "the hog got only %.0f%% of a CPU: %.0f%% of the %.0f%% that %s left of CPU 0 "
          "(at least %.0f%% expected)" % (100 * hog, 100 * of_left, 100 * left, what,
                                          100 * HOG_KEPT))
    return "hog kept %.0f%% of CPU 0 (%.0f%% of what %s left)" % (100 * hog, 100 * of_left, what)


class Rig:
    """nginx in web, a hog in batch, both on CPU 0; policies and config in a tmpdir."""

    def __init__(self, sess, rate=RATE, hogs=2):
        self.sess, self.rate, self.hogs = sess, rate, hogs
        self.web = sess.cgroup("web")
        self.batch = sess.cgroup("batch")
        self.nginx = sess.nginx(self.web, cpu=SERVER_CPU, heavy_kib=HEAVY_KIB)
        self.dir = sess.tmpdir("control")
        self.hog = None

    def p99(self, seconds):
        r = self.sess.loadgen("http", self.nginx.port, self.rate, seconds, cpu=CLIENT_CPU)
        check(r["errors"] == 0 and r["completed"] > 0, "loadgen errors: %s" % r)
        return r["rx_latency_us"]["p99"]    # kernel receive time: not the client's wake-up

    def start_hog(self, settle=0.5):
        self.hog = self.sess.spawn(["stress-ng", "--cpu", str(self.hogs), "--timeout", "120", "-q"],
                                   cgroup=self.batch, cpu=SERVER_CPU,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(settle)

    def stop_hog(self):
        if self.hog:
            self.sess.kill_cgroup(self.batch)
            self.hog.wait(5)
            self.hog = None

    def write_policies(self, target_us, dry_run=False, web_extra="", batch_extra="",
                       weights="reactive", weight="1..100"):
        """weights: the batch policy's Weights= (None: left out, the default: floor).
        Reactive for the tests of cuts and give-backs on violations. weight: its
        CPUWeight= range."""
        pol = os.path.join(self.dir, "policies")
        os.makedirs(pol, exist_ok=True)
        with open(os.path.join(pol, "web.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n"
                    "[Objective]\nPercentile=99\nTarget=%dus\nMinRequests=200\nWindow=%s\n%s"
                    % (self.web.rel, target_us, WINDOW, web_extra))
        with open(os.path.join(pol, "batch.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n"
                    "[Limits]\nCPUWeight=%s\nCPUQuota=5%%..max\n%s%s"
                    % (self.batch.rel, weight, "Weights=%s\n" % weights if weights else "",
                       batch_extra))
        self.state = os.path.join(self.dir, "state")
        self.decisions = os.path.join(self.dir, "decisions.jsonl")
        if os.path.exists(self.decisions):
            os.unlink(self.decisions)
        self.conf = os.path.join(self.dir, "tailwarden.conf")
        with open(self.conf, "w") as f:
            f.write("[Controller]\nPeriod=%s\nStateDir=%s\nDecisionLog=%s\nDryRun=%s\n"
                    % (PERIOD, self.state, self.decisions, "yes" if dry_run else "no"))
        return pol

    def run(self, pol):
        self.log = open(os.path.join(self.dir, "run.log"), "w+")
        p = self.sess.spawn([tw.TAILWARDEN, "run", "--config", self.conf, "--policies", pol],
                            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while "running:" not in self.log_text():
            check(p.poll() is None, "tailwarden run exited %s: %s" % (p.returncode, self.log_text()))
            if time.monotonic() > deadline:
                raise TestFailure("tailwarden run not running after 20 s: %s" % self.log_text())
            time.sleep(0.1)
        return p

    def hog_phase(self, lead):
        """Open-loop load for LEAD_S + CONTROL_S with every request dumped; lead()
        runs first (a quiet lead; its value is returned), then the hog starts.
        Returns (loadgen result, the hog's share of a CPU, time.time() at the hog's
        start, lead's value, the dump's path)."""
        dump = os.path.join(self.dir, "loadgen.dump")
        lg = self.sess.loadgen("http", self.nginx.port, self.rate, LEAD_S + CONTROL_S,
                               cpu=CLIENT_CPU, extra=["--dump", dump], background=True)
        led = lead()
        t_hog = time.time()
        self.start_hog()
        use = CpuShares(hog=self.batch, web=self.web)
        r = lg.result(timeout=LEAD_S + CONTROL_S + 30)
        use = use.done()
        self.web_share = use["web"]
        return r, use["hog"], t_hog, led, dump

    def stop_all(self, tw_proc, files, r, dump, t_hog):
        """SIGTERM to tailwarden, then the hog; the knob files after, the requests after
        the hog started (after_hog()) and the decisions, each logged."""
        self.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        self.stop_hog()
        reqs, end, per_s = after_hog(r, dump, t_hog)
        ds = self.decisions_list()
        for d in ds:
            info("decision at %+.1fs: %s %s -> %s: %s" % (d["ts"] - t_hog, d["knob"], d["old"],
                                                         d["new"], d["reason"]))
        return after, reqs, end, per_s, ds

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def decisions_list(self):
        if not os.path.exists(self.decisions):
            return []
        with open(self.decisions) as f:
            return [json.loads(l) for l in f if l.strip()]


def calibrate(rig):
    """Rate and hog for this host, p99 alone and beside the hog, and a target.

    Tries SETTINGS in order, 4 s alone and 4 s beside the hog each, and
    keeps the first whose hog raises p99 SEPARATION-fold; none doing so
    fails the test (a controller cannot be shown to help where the hog
    does not hurt). The target is the geometric middle, at least 3x the
    p99 alone (noise on 2 CPUs).
    """
    tried = []
    for rate, hogs in SETTINGS:
        got = calibrate_setting(rig, rate, hogs, tried)
        if got:
            return got + (", ".join(tried),)
    raise TestFailure("no setting lets the hog raise nginx's p99 %dx here: %s"
                      % (SEPARATION, "; ".join(tried)))


def calibrate_setting(rig, rate, hogs, tried):
    """One of SETTINGS (calibrate()): (p99 alone, beside the hog, target) when
    the hog raises nginx's p99 SEPARATION-fold, else None; said in tried."""
    rig.rate, rig.hogs = rate, hogs
    alone = rig.p99(4)
    rig.start_hog()
    hog = rig.p99(4)
    rig.stop_hog()
    tried.append("%d req/s + %d hogs: %.0f -> %.0f us" % (rate, hogs, alone, hog))
    info("calibration: %s" % tried[-1])
    if hog < SEPARATION * alone:
        return None
    return alone, hog, int(max((alone * hog) ** 0.5, 3 * alone))


def read_dump(path, start_unix, t_ref):
    """(seconds after t_ref the request was due, latency us) from a loadgen --dump.

    The latency is to the kernel receive time of the reply's last segment:
    it leaves out the client's own wake-up, which a neighbour on the
    client's CPU can make milliseconds long.
    """
    out = []
    with open(path) as f:
        for line in f:
            _, _, due_ns, rx_ns = line.split()
            out.append((start_unix + int(due_ns) / 1e9 - t_ref, int(rx_ns) / 1e3))
    return out


def pct99(lats):
    """Nearest-rank p99, as loadgen computes it."""
    return pct(lats, 99)


def after_hog(r, dump, t_hog):
    """The requests due after the hog started (seconds after it, latency us), the
    last one's time, and the p99 of each whole second after it; fails on client errors."""
    check(r["errors"] == 0 and r["completed"] > 0, "loadgen errors: %s" % r)
    reqs = [(t, lat) for t, lat in read_dump(dump, r["start_unix"], t_hog) if t >= 0]
    end = max(t for t, _ in reqs)
    per_s = [(s, pct99([lat for t, lat in reqs if s <= t < s + 1])) for s in range(int(end))]
    info("p99 per second after the hog started: %s"
         % ", ".join("%ds %.0fus" % (s, p) for s, p in per_s if p is not None))
    return reqs, end, per_s


def test_closed_loop():
    """p99 back under target within a few periods of the hog starting; the hog keeps CPU.

    One loadgen run covers a quiet lead and the whole controlled phase, with
    every request's due time and latency dumped: "back under target at
    second s" means that second's p99 is under target, and so is the p99 of
    every request due from s to the end (15 s after the hog started).
    Per-second figures are printed too; a stray second over the target
    (a hog picked for a whole slice) is in that p99, not forgiven.
    """
    with tw.Session(("unified", "cpu", "cpuacct"), tag="loop") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        tw_proc = rig.run(rig.write_policies(target))
        # a quiet lead: the engine has a verdict
        r, hog_share, t_hog, _, dump = rig.hog_phase(lambda: time.sleep(LEAD_S))
        during = snapshot(files)
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        rig.stop_hog()
        reqs, end, per_s = after_hog(r, dump, t_hog)
        # Recovered at second s: s itself is under target, and so is the p99
        # of everything due from s on.
        recovered, rest = None, None
        for s, p in per_s:
            if s > RECOVER_S:
                break
            rest = pct99([lat for t, lat in reqs if t >= s])
            if p is not None and p <= target and rest is not None and rest <= target:
                recovered = s
                break
        over = [s for s, p in per_s if recovered is not None and s >= recovered and p > target]
        ds = rig.decisions_list()
        for d in ds:
            info("decision at %+.1fs: %s %s -> %s: %s" % (d["ts"] - t_hog, d["knob"], d["old"],
                                                         d["new"], d["reason"]))
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(during != orig, "no knob of the hog was changed: %s" % during)
        check(recovered is not None,
              "p99 not back under target %d us within %.0f s: p99 from %.0f s on %.0f us; "
              "per second %s" % (target, RECOVER_S, RECOVER_S, rest, per_s))
        kept = check_hog_kept(hog_share, rig.web_share)
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        check(ds and all(d["dry_run"] is False and d["applied"] for d in ds),
              "decision log: %s" % ds[:3])
        return ("%d req/s, %d hogs: p99 alone %.0f us, with hog %.0f us, target %d us; back under "
                "target %d s after the hog started (p99 of the %.0f s after: %.0f us, %d of its "
                "seconds over); %s; %d decisions; restored [calibration: %s]"
                % (rig.rate, rig.hogs, alone, hog, target, recovered, end - recovered,
                   pct99([lat for t, lat in reqs if t >= recovered]), len(over),
                   kept, len(ds), tried))


def wait_shares(files, want, seconds):
    """cpu.shares once it reads want, or what it read at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        v = readf(files["cpu.shares"])
        if v == want or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def test_weights_floor():
    """The default, Weights=floor (the policy has no Weights= line): the hog's weight is
    at its floor before the hog starts, so the seconds in which it starts stay under
    target; it keeps CPU; its weight goes home once nginx stops serving, and everything
    is back after SIGTERM."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="floor") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        # No Weights= line: the default is the floor.
        tw_proc = rig.run(rig.write_policies(target, weights=None))
        # weight 1 on the v2 scale is cpu.shares 10 on v1
        r, hog_share, t_hog, lead, dump = rig.hog_phase(lambda: wait_shares(files, "10", LEAD_S + 2))
        t_idle = time.monotonic()
        home = wait_shares(files, orig["cpu.shares"], 10)
        home_s = time.monotonic() - t_idle
        after, reqs, end, per_s, ds = rig.stop_all(tw_proc, files, r, dump, t_hog)
        check(ds and "Weights=floor" in ds[0]["reason"],
              "the first decision is not the default's floor: %s" % (ds[:1],))
        first2 = pct99([lat for t, lat in reqs if t < 2])
        whole = pct99([lat for t, lat in reqs])
        over = [s for s, p in per_s if p is not None and p > target]
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(lead == "10", "batch's cpu.shares %s before the hog started, expected 10 (its floor)"
              % lead)
        check(first2 is not None and first2 <= target,
              "p99 of the 2 s after the hog started %.0f us > target %d us (per second %s)"
              % (first2 or -1, target, per_s))
        check(whole <= target, "p99 of the %.0f s after the hog started %.0f us > target %d us"
              % (end, whole, target))
        kept = check_hog_kept(hog_share, rig.web_share)
        check(home == orig["cpu.shares"], "cpu.shares %s 10 s after nginx went idle, expected "
              "%s back" % (home, orig["cpu.shares"]))
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("%d req/s, %d hogs: p99 alone %.0f us, with hog %.0f us, target %d us; floor "
                "before the hog; p99 of the first 2 s with the hog %.0f us, of all %.0f s %.0f us "
                "(%d seconds over); %s; weight home %.1f s after nginx went "
                "idle; restored [calibration: %s]"
                % (rig.rate, rig.hogs, alone, hog, target, first2, end, whole, len(over),
                   kept, home_s, tried))


def test_idle_floor():
    """CPUWeight=idle..100 under the default Weights=floor: the hog's cgroup is idle
    (cpu.idle 1) before the hog starts; the p99 after the
    hog started is under target, with at most one second over, while the hog keeps
    CPU; after SIGTERM cpu.idle is 0 and cpu.shares its own again."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="idle") as sess:
        rig = Rig(sess)
        files = knob_files(rig.batch)
        files["cpu.idle"] = os.path.join(os.path.dirname(files["cpu.shares"]), "cpu.idle")
        if not os.path.exists(files["cpu.idle"]):
            raise tw.Skip("no cpu.idle in this kernel (Linux 5.15+)")
        alone, hog, target, tried = calibrate(rig)
        orig = snapshot(files)
        tw_proc = rig.run(rig.write_policies(target, weights=None, weight="idle..100"))
        r, hog_share, t_hog, lead, dump = rig.hog_phase(
            lambda: wait_shares({"cpu.shares": files["cpu.idle"]}, "1", LEAD_S + 2))
        shares_held = readf(files["cpu.shares"])
        after, reqs, end, per_s, ds = rig.stop_all(tw_proc, files, r, dump, t_hog)
        whole = pct99([lat for t, lat in reqs])
        over = [s for s, p in per_s if p is not None and p > target]
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(ds and ds[0]["knob"] == "cpu.weight" and ds[0]["new"] == 0 and
              "idle" in ds[0]["reason"], "the first decision is not the floor at idle: %s"
              % (ds[:1],))
        check(lead == "1", "batch's cpu.idle %s before the hog started, expected 1" % lead)
        # The kernel shows an idle group's weight as its least (cpu.shares 3), and
        # sets the default back when it leaves idle: the restore writes the weight after.
        info("cpu.shares while idle: %s" % shares_held)
        check(whole <= target, "p99 of the %.0f s after the hog started %.0f us > target %d us"
              % (end, whole, target))
        check(len(over) <= 1, "%d seconds over the target %d us with the hog idle: %s"
              % (len(over), target, over))
        kept = check_hog_kept(hog_share, rig.web_share)
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("%d req/s, %d hogs: p99 alone %.0f us, with hog %.0f us, target %d us; idle "
                "before the hog; p99 of the %.0f s after the hog started %.0f us (%d seconds "
                "over, worst second %.0f us); %s; restored "
                "[calibration: %s]"
                % (rig.rate, rig.hogs, alone, hog, target, end, whole, len(over),
                   max(p for _, p in per_s if p is not None), kept, tried))


def own_load_calibrate(rig, target):
    """What nginx serves of HEAVY_PATH open loop beside the base load, and a step
    beyond it whose p99 is OVER_SEPARATION times the target (bounded search over
    OVER_FACTORS); fails when nginx is not the limit or no step separates."""
    heavy = ["--path", HEAVY_PATH]
    r = rig.sess.loadgen("http", rig.nginx.port, 1, 2, conns=OVER_CONNS, cpu=CLIENT_CPU,
                         extra=["--closed"] + heavy)
    closed = r["rps"]
    tried = ["closed loop %.0f req/s" % closed]
    for factor in (1.5,) + OVER_FACTORS:
        rate = int(factor * (closed if factor == 1.5 else served))
        bg = rig.sess.loadgen("http", rig.nginx.port, rig.rate, 5, cpu=CLIENT_CPU,
                              background=True)
        time.sleep(1)
        use = CpuShares(web=rig.web)
        r = rig.sess.loadgen("http", rig.nginx.port, rate, 3, conns=OVER_CONNS, cpu=CLIENT_CPU,
                             extra=heavy)
        busy = use.done()["web"]
        base = bg.result(timeout=40)
        p99 = max(r["rx_latency_us"]["p99"], base["rx_latency_us"]["p99"])
        tried.append("%d req/s offered: %.0f served, nginx %.0f%% of a CPU, p99 %.0f us"
                     % (rate, r["completed"] / 3.0, 100 * busy, p99))
        info("own_load calibration: %s" % tried[-1])
        if factor == 1.5:
            # Offered 1.5x a closed loop's rate: what it serves is its capacity.
            check(busy >= 0.85, "nginx used %.0f%% of a CPU offered %d req/s of %s: the client, "
                  "not nginx, was the limit; no overload possible [%s]"
                  % (100 * busy, rate, HEAVY_PATH, "; ".join(tried)))
            served = r["completed"] / 3.0
            continue
        if p99 >= OVER_SEPARATION * target:
            return rate, served, "; ".join(tried)
    raise TestFailure("no step of %s up to %.1fx what nginx serves raised p99 %dx over the "
                      "target %d us: %s" % (HEAVY_PATH, OVER_FACTORS[-1], OVER_SEPARATION,
                                            target, "; ".join(tried)))


def said_decision(d, t0, width=None):
    """One decision of the log as a phrase: its time from t0, the knob, old -> new,
    its reason (cut at width characters if given)."""
    return "%+.1fs %s %s -> %s: %s" % (d["ts"] - t0, d["knob"], d["old"], d["new"],
                                       d["reason"][:width])


def decisions_said(rig, t0, service="batch"):
    """The daemon's decisions on `service` so far, one phrase each."""
    return [said_decision(d, t0, 160) for d in rig.decisions_list() if d["service"] == service]


def own_verdicts(rig):
    """The daemon's own-load verdict lines logged so far."""
    return [l for l in rig.log_text().splitlines() if "violation (own load)" in l]


def sample_shares(rig, t0, until, use, each=None):
    """Until `until` s after t0, every 0.2 s each(elapsed) if given, and every
    0.5 s or so (elapsed, the hog's share of a CPU, nginx's) appended to use."""
    prev = (time.monotonic(), cpu_usage_ns(rig.batch), cpu_usage_ns(rig.web))
    while time.time() - t0 < until:
        time.sleep(0.2)
        el = time.time() - t0
        if each:
            each(el)
        now = (time.monotonic(), cpu_usage_ns(rig.batch), cpu_usage_ns(rig.web))
        if now[0] - prev[0] >= 0.5:
            dt = now[0] - prev[0]
            use.append((el, (now[1] - prev[1]) / 1e9 / dt, (now[2] - prev[2]) / 1e9 / dt))
            prev = now


def own_load_lead(rig, target, files, orig, total, dump, leads):
    """The daemon, the base load and the hog, OWN_LEAD_S of them before the step:
    the step is own load beyond the CPU only if the hog then holds no more than
    its floor. A quota of ours on it when the lead ends (violations in the lead:
    on a 2-vCPU AMD EPYC VM here, the platform's own threads on CPU 0 now and
    then) makes the scenario another one, so the lead is tried again with the
    daemon started afresh, up to OWN_LEAD_TRIES leads in all. Appends what
    each lead did to leads. Returns (daemon, base load, t0, the lead's
    samples (sample_shares())), or None when the lead was not calm."""
    tw_proc = rig.run(rig.write_policies(target, weights=None, weight="1..1000"))
    base = rig.sess.loadgen("http", rig.nginx.port, rig.rate, total, cpu=CLIENT_CPU,
                            extra=["--dump", dump], background=True)
    t0 = time.time()
    rig.start_hog()
    use = []
    sample_shares(rig, t0, OWN_LEAD_S, use)
    quota = readf(files["cpu.cfs_quota_us"])
    if quota == orig["cpu.cfs_quota_us"]:
        leads.append("lead %d calm" % (len(leads) + 1))
        return tw_proc, base, t0, use
    cuts = [d for d in decisions_said(rig, t0) if " cpu.max " in d]
    leads.append("lead %d: the hog's quota %s at its end (%s)"
                 % (len(leads) + 1, quota, "; ".join(cuts[:2])))
    info("own_load: %s; again" % leads[-1])
    base.proc.kill()
    base.proc.communicate()
    rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
    rig.stop_hog()
    check(snapshot(files) == orig, "knobs not restored after SIGTERM: %s, originally %s"
          % (snapshot(files), orig))
    return None


def test_own_load():
    """nginx's own load beyond what its CPU gives, the hog beside it at the default
    floor: the daemon's verdict says own load, no best-effort cut comes after the first
    such verdict, the floor yields (the hog keeps at least OWN_KEPT of the CPU it had
    before the step, through the step), and once the load falls the hog has its CPU
    back (its quota as before the step, and at least 80% of its share of what nginx
    leaves, as before the step). Self-calibrated: the hog and target as in
    closed_loop, the step from what nginx serves of costly requests open loop
    (OVER_FACTORS, until p99 is OVER_SEPARATION times the target), a lead that
    leaves the hog at its floor alone (own_load_lead()), or the test fails."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="ownload") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        over, served, tried_over = own_load_calibrate(rig, target)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        total = OWN_LEAD_S + OWN_STEP_S + OWN_AFTER_S
        dump = os.path.join(rig.dir, "own.dump")
        step_dump = os.path.join(rig.dir, "own-step.dump")
        leads, lead = [], None
        while lead is None and len(leads) < OWN_LEAD_TRIES:
            lead = own_load_lead(rig, target, files, orig, total, dump, leads)
        if lead is None:
            raise TestFailure("no lead of %d left the hog at its floor alone for the step: %s"
                              % (OWN_LEAD_TRIES, "; ".join(leads)))
        tw_proc, base, t0, use = lead
        # The log is watched for the verdict from the step on; one in the lead
        # already would be own load said with no step.
        early = own_verdicts(rig)
        check(not early, "an own-load verdict in the lead, before the step: %s" % early[:1])
        knobs_at = {"before": snapshot(files)}
        step = sess.loadgen("http", rig.nginx.port, over, OWN_STEP_S, conns=OVER_CONNS,
                            cpu=CLIENT_CPU, background=True,
                            extra=["--path", HEAVY_PATH, "--dump", step_dump])
        # The log's lines carry no time: the first own-load verdict is placed
        # between the last read without it and the first with it (0.2 s apart).
        seen = {"own": None, "polled": time.time() - t0}

        def watch(el):
            if seen["own"] is None and own_verdicts(rig):
                seen["own"] = seen["polled"]
            seen["polled"] = el
        sample_shares(rig, t0, total, use, watch)
        seen_own = seen["own"]
        knobs_at["end"] = snapshot(files)
        rb = base.result(timeout=60)
        rs = step.result(timeout=60)
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        rig.stop_hog()
        check(rb["errors"] == 0 and rs["errors"] == 0, "loadgen errors: %s; %s" % (rb, rs))
        ds = rig.decisions_list()
        for d in ds:
            info("decision at %+.1fs: %s %s %s -> %s: %s" % (d["ts"] - t0, d["service"], d["knob"],
                                                            d["old"], d["new"], d["reason"]))
        own_lines = own_verdicts(rig)
        info("own-load verdicts logged: %s" % own_lines[:2])
        # Every request of both loads, as nginx's objective counts them.
        reqs = read_dump(dump, rb["start_unix"], t0) + read_dump(step_dump, rs["start_unix"], t0)
        per_s = [(s, pct99([lat for t, lat in reqs if s <= t < s + 1])) for s in range(total)]
        info("p99 per second (both loads): %s" % ", ".join("%ds %.0fus" % (s, p)
                                                            for s, p in per_s if p is not None))
        step_p99 = pct99([lat for t, lat in reqs if OWN_LEAD_S <= t < OWN_LEAD_S + OWN_STEP_S])
        before = [h for t, h, _ in use if OWN_LEAD_S - 5 <= t < OWN_LEAD_S]
        during = [h for t, h, _ in use if OWN_LEAD_S + 2 <= t < OWN_LEAD_S + OWN_STEP_S]
        last = [h for t, h, _ in use if total - 5 <= t]
        mean = lambda v: sum(v) / max(1, len(v))
        # The hog's share of what nginx left of CPU 0: at its floor both before
        # and after, what it gets is what nginx leaves, and nginx may use more
        # after the step than before it (here 73% against 67%: 26% of a CPU
        # left to the hog against 32%, its floor given back all the same).
        def of_left(t0_, t1_):
            pts = [(h, w) for t, h, w in use if t0_ <= t < t1_]
            left = sum(max(0.0, 1.0 - w) for _, w in pts)
            return sum(h for h, _ in pts) / left if left > 0 else 0.0
        left_before, left_last = of_left(OWN_LEAD_S - 5, OWN_LEAD_S), of_left(total - 5, total + 1)
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(step_p99 is not None and step_p99 > 2 * target,
              "the step's p99 %s us is not beyond the target %d us: no overload to judge"
              % (step_p99, target))
        check(own_lines, "no verdict said own load (%s); the hog's decisions: %s"
              % ("; ".join(leads), " | ".join(decisions_said(rig, t0)[:8])))
        check(seen_own is not None and seen_own >= OWN_LEAD_S - 1,
              "the first own-load verdict came before the step (by %.1f s)" % (seen_own or 0))
        # No cut of the hog from the first own-load verdict until the backlog has
        # drained (5 s after the step). Once the load fell, its floor coming back
        # is not one, nor the yield stepping down towards home while the hog uses
        # more than before the step (the daemon moves it down only then).
        end = OWN_LEAD_S + OWN_STEP_S + 5
        cuts = [d for d in ds if d["service"] == "batch" and isinstance(d["new"], (int, float))
                and isinstance(d["old"], (int, float)) and d["new"] < d["old"]
                and seen_own < d["ts"] - t0 < end
                and not (d["ts"] - t0 >= OWN_LEAD_S + OWN_STEP_S
                         and any(f in d["reason"] for f in FLOOR_BACK))]
        check(not cuts, "best-effort cuts after the first own-load verdict (at %.1f s): %s"
              % (seen_own, [said_decision(d, t0) for d in cuts]))
        # At least what it was before the step (-1: no quota; own_load_lead()
        # saw to it that no quota held the hog then).
        def quota(v):
            return float("inf") if int(v) < 0 else int(v)
        check(quota(knobs_at["end"]["cpu.cfs_quota_us"]) >=
              quota(knobs_at["before"]["cpu.cfs_quota_us"]),
              "the hog's quota %s at the end, %s before the step: not given back"
              % (knobs_at["end"]["cpu.cfs_quota_us"], knobs_at["before"]["cpu.cfs_quota_us"]))
        # Through the step, from a second after the verdict: the floor yields,
        # the hog keeps its share (at the floor it kept 1-4% of its CPU; at its
        # home weight half of the CPU, 76-89% of the 56-66% it had before; its
        # range's top, 1000, lets the yield keep it 90%).
        kept = [h for t, h, _ in use if seen_own + 1 <= t < OWN_LEAD_S + OWN_STEP_S]
        yields = [d for d in ds if d["service"] == "batch" and "Weights=floor yields" in d["reason"]]
        check(yields, "the hog's floor was not given back in the step")
        check(mean(kept) >= OWN_KEPT * mean(before),
              "the hog used %.0f%% of a CPU in the step after the own-load verdict, %.0f%% "
              "before the step: under %.0f%% of it, its floor not yielded"
              % (100 * mean(kept), 100 * mean(before), 100 * OWN_KEPT))
        check(left_last >= 0.8 * left_before,
              "the hog used %.0f%% of what nginx left of CPU 0 in the last 5 s (%.0f%% of a "
              "CPU), %.0f%% of it before the step (%.0f%%): not given back; its decisions: %s"
              % (100 * left_last, 100 * mean(last), 100 * left_before, 100 * mean(before),
                 " | ".join(decisions_said(rig, t0)[-4:])))
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("%d req/s, %d hogs, target %d us; step %d req/s of %s over %d connections (nginx "
                "serves %.0f of it beside the base load), served %.0f, p99 in the step %.0f us; %d own-load verdict lines "
                "(the first by %.1f s: %s); the floor yielded at %+.1f s; no best-effort cut from then to %d s; "
                "the hog's CPU %.0f%% before, %.0f%% during (%.0f%% after the verdict), %.0f%% after "
                "(%.0f%% and %.0f%% of what nginx left before and after); %d decisions; %s "
                "[calibration: %s; %s]"
                % (rig.rate, rig.hogs, target, over, HEAVY_PATH, OVER_CONNS, served,
                   rs["completed"] / OWN_STEP_S, step_p99, len(own_lines), seen_own + 0.2,
                   own_lines[0][:240], yields[0]["ts"] - t0, end, 100 * mean(before),
                   100 * mean(during), 100 * mean(kept), 100 * mean(last), 100 * left_before,
                   100 * left_last, len(ds), ", ".join(leads), tried, tried_over))


def pause_hog(rig, paused):
    """SIGSTOP or SIGCONT every process of the hog: a burst ends or starts."""
    for pid in rig.batch.pids(recursive=True):
        try:
            os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)
        except ProcessLookupError:
            pass


def windows_over(reqs, target, start, end):
    """[(second, p99)] of the whole seconds from start to end (seconds of the dump's
    reference) whose p99 is over target, and how many seconds had requests."""
    per_s = [(s, pct99([lat for t, lat in reqs if s <= t < s + 1])) for s in range(start, end)]
    info("p99 per second: %s" % ", ".join("%ds %.0fus" % (s, p) for s, p in per_s
                                             if p is not None))
    return [(s, p) for s, p in per_s if p is not None and p > target], \
        sum(1 for _, p in per_s if p is not None)


def more_over_p(before, over, n):
    """The chance of at least `over` of the seconds over the target falling in
    the hog's n seconds, were they spread at random over both phases' 2n
    (Fisher's exact test, one-sided): small when the hog adds seconds over."""
    k = before + over
    return sum(math.comb(k, x) * math.comb(2 * n - k, n - x)
               for x in range(over, min(k, n) + 1)) / math.comb(2 * n, n)


def two_lc_calibrate(rig, mc):
    """nginx's and memcached's calibration together, over SETTINGS in turn:
    the first where the hog raises nginx's p99 SEPARATION-fold (calibrate())
    and memcached's p99.9, beside nginx's load, MC_SEPARATION-fold. Where
    nginx takes most of CPU 0 (on a 2-vCPU AMD EPYC VM here, 65-70% at 8000
    req/s) memcached waits for it alone nearly as long as beside the hog
    (p99.9 1.2-2.8 ms alone, 5.3-6.4 ms beside it): a lighter nginx load
    separates them. Returns ((nginx's alone, hog, target), (memcached's
    alone, hog, target), what was tried); none separating fails the test."""
    def p999(seconds=4):
        bg = rig.sess.loadgen("http", rig.nginx.port, rig.rate, seconds + 1, cpu=CLIENT_CPU,
                              background=True)
        dump = os.path.join(rig.dir, "mc-cal.dump")
        r = rig.sess.loadgen("memcached", mc.port, MC_RATE, seconds, cpu=CLIENT_CPU,
                             extra=["--dump", dump])
        bg.result(timeout=seconds + 40)
        check(r["errors"] == 0 and r["completed"] > 0, "memcached loadgen errors: %s" % r)
        return pct([lat for _, lat in read_dump(dump, r["start_unix"], 0)], 99.9)
    tried = []
    for rate, hogs in SETTINGS:
        web = calibrate_setting(rig, rate, hogs, tried)
        if not web:
            continue
        # A neighbour on the host only ever raises a p99.9 (one of 4000 req/s
        # is 4 requests): alone is the lowest of up to MC_TRIES readings,
        # taken again while the hog does not separate (once it read 1328 us,
        # 885 the next run).
        alone, hog, said = None, None, []
        for _ in range(MC_TRIES):
            a = p999()
            alone = a if alone is None else min(alone, a)
            if hog is None:
                rig.start_hog()
                hog = p999()
                rig.stop_hog()
            said.append("%.0f us alone" % a)
            info("two_lc calibration: memcached p99.9 %.0f us alone, %.0f us beside the hog"
                 % (a, hog))
            if hog >= MC_SEPARATION * alone:
                break
        tried[-1] += " (memcached at %d req/s beside it: p99.9 %s, %.0f us beside the hog)" \
            % (MC_RATE, ", ".join(said), hog)
        if hog >= MC_SEPARATION * alone:
            return web, (alone, hog, int(max((alone * hog) ** 0.5, 3 * alone))), "; ".join(tried)
    raise TestFailure("no setting lets the hog raise nginx's p99 %dx and memcached's p99.9 %dx "
                      "here: %s" % (SEPARATION, MC_SEPARATION, "; ".join(tried)))


def test_two_lc():
    """Two latency-critical services with different objectives on the hog's CPU:
    nginx at p99 and memcached at p99.9, the hog under the default floor
    (CPUWeight=idle..100 where the kernel has cpu.idle). Targets self-calibrated
    together over SETTINGS (two_lc_calibrate()): nginx's as closed_loop's,
    memcached's the geometric middle of its p99.9 alone and beside the hog (at
    least 3x alone); the first setting where the hog raises both (memcached's
    MC_SEPARATION-fold) is kept, and none doing so fails the test. The daemon runs through TWO_LC_S seconds without the hog
    and TWO_LC_S with it: with the hog, each service is over its own objective in
    at most one second more than without it, or in not significantly more
    (more_over_p(): a p99.9 of one second is 4 requests, and a loud neighbour on
    a shared host moves it for seconds on end without any hog), and within it
    over the whole phase (or within QUIET_MARGIN of the phase without the hog,
    where the host alone put it over); the hog keeps CPU;
    every knob is back after SIGTERM."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="twolc") as sess:
        rig = Rig(sess)
        cache = sess.cgroup("cache")
        mc = sess.memcached(cache, cpu=SERVER_CPU)
        (alone, hog, target), (mc_alone, mc_hog, mc_target), tried = two_lc_calibrate(rig, mc)
        files = knob_files(rig.batch)
        idle = os.path.exists(os.path.join(os.path.dirname(files["cpu.shares"]), "cpu.idle"))
        orig = snapshot(files)
        pol = rig.write_policies(target, weights=None, weight="idle..100" if idle else "1..100")
        with open(os.path.join(pol, "cache.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n[Objective]\n"
                    "Percentile=99.9\nTarget=%dus\nMinRequests=1000\nWindow=%s\n"
                    % (cache.rel, mc_target, WINDOW))
        tw_proc = rig.run(pol)
        dumps = {n: os.path.join(rig.dir, "%s.dump" % n) for n in ("web", "cache")}
        runs = {"web": sess.loadgen("http", rig.nginx.port, rig.rate, 2 * TWO_LC_S + 1,
                                    cpu=CLIENT_CPU, extra=["--dump", dumps["web"]],
                                    background=True),
                "cache": sess.loadgen("memcached", mc.port, MC_RATE, 2 * TWO_LC_S + 1,
                                      cpu=CLIENT_CPU, extra=["--dump", dumps["cache"]],
                                      background=True)}
        time.sleep(TWO_LC_S + 0.5)
        t_hog = time.time()
        rig.start_hog(settle=0)
        use = CpuShares(hog=rig.batch, web=rig.web, cache=cache)
        res = {n: run.result(timeout=2 * TWO_LC_S + 40) for n, run in runs.items()}
        use = use.done()
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        rig.stop_hog()
        for d in rig.decisions_list():
            info("decision at %+.1fs: %s %s %s -> %s: %s" % (d["ts"] - t_hog, d["service"], d["knob"],
                                                            d["old"], d["new"], d["reason"]))
        out = {}
        for name, q, tgt in (("web", 99, target), ("cache", 99.9, mc_target)):
            r = res[name]
            check(r["errors"] == 0 and r["completed"] > 0, "%s loadgen errors: %s" % (name, r))
            reqs = [(t, lat) for t, lat in read_dump(dumps[name], r["start_unix"], t_hog)
                    if -TWO_LC_S <= t < TWO_LC_S]
            per_s = [(s, pct([lat for t, lat in reqs if s <= t < s + 1], q))
                     for s in range(-TWO_LC_S, TWO_LC_S)]
            info("%s p%g per second (0: the hog starts): %s" % (
                name, q, ", ".join("%ds %.0fus" % (s, p) for s, p in per_s if p is not None)))
            before = [s for s, p in per_s if s < 0 and p is not None and p > tgt]
            over = [s for s, p in per_s if s >= 0 and p is not None and p > tgt]
            whole = pct([lat for t, lat in reqs if t >= 0], q)
            # Within the objective over the phase, or no more than
            # QUIET_MARGIN over the phase without the hog: a host that puts it
            # over with no hog beside (CI once: nginx over in 10 of the 15
            # quiet seconds, p99 0.5-1 ms against 0.69 ms; memcached here
            # 4.3 ms over a quiet phase against 3.96 ms, then 4.9 ms with the
            # hog) measures itself, not the floor.
            quiet = pct([lat for t, lat in reqs if t < 0], q)
            # Seconds over: at most one more with the hog than without, or not
            # significantly more (noise comes in bursts of seconds on some
            # hosts: memcached's p99.9 at 3-5.8 ms for 7 quiet seconds in a
            # row on one, 0.6-1.9 ms around them).
            more = more_over_p(len(before), len(over), TWO_LC_S)
            check((len(over) <= len(before) + 1 or more >= MORE_OVER_P) and
                  whole <= max(tgt, QUIET_MARGIN * quiet),
                  "%s: %d seconds over its p%g target %d us with the hog, %d in as long without "
                  "it (one-sided p %.3f); whole p%g with the hog %.0f us, without %.0f us; per "
                  "second %s" % (name, len(over), q, tgt, len(before), more, q, whole, quiet,
                                 per_s))
            out[name] = (whole, len(over), len(before))
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        kept = check_hog_kept(use["hog"], use["web"] + use["cache"], "nginx and memcached")
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("nginx %d req/s p99 %.0f -> %.0f us beside %d hogs, target %d us: %.0f us over "
                "the %d s with the hog, %d seconds over (%d in the %d s before it); memcached %d "
                "req/s p99.9 %.0f -> %.0f us, target %d us: %.0f us, %d seconds over (%d before); "
                "%s at %s; restored [calibration: %s]"
                % (rig.rate, alone, hog, rig.hogs, target, out["web"][0], TWO_LC_S, out["web"][1],
                   out["web"][2], TWO_LC_S, MC_RATE, mc_alone, mc_hog, mc_target,
                   out["cache"][0], out["cache"][1], out["cache"][2], kept,
                   "idle" if idle else "weight 1", tried))


def test_burst():
    """A hog that bursts on and off every 1-3 s (SIGCONT/SIGSTOP, a seeded random
    schedule) beside nginx, the default policy (CPUWeight=idle..100, Weights=floor;
    1..100 on a kernel without cpu.idle): at each burst's start the hog is already
    at its floor, or the first knob write comes within one period. The 1 s windows
    with no burst in them are the host's own control: the windows with one are over
    the target at most one more time than the quiet ones' rate over them. Calibrated
    as closed_loop (the hog must raise p99 6x, else the test fails)."""
    import random
    with tw.Session(("unified", "cpu", "cpuacct"), tag="burst") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        files = knob_files(rig.batch)
        floor_file, floor, weight = default_floor(files)
        orig = snapshot(files)
        tw_proc = rig.run(rig.write_policies(target, weights=None, weight=weight))
        rnd = random.Random(BURST_SEED)
        sched, t = [], float(BURST_LEAD_S)
        while t < BURST_LEAD_S + BURST_PHASE_S - 1:
            on = t + rnd.uniform(1, 3)
            sched.append((t, min(on, BURST_LEAD_S + BURST_PHASE_S)))
            t = on + rnd.uniform(1, 3)
        total = BURST_LEAD_S + BURST_PHASE_S
        dump = os.path.join(rig.dir, "burst.dump")
        lg = sess.loadgen("http", rig.nginx.port, rig.rate, total, cpu=CLIENT_CPU,
                          extra=["--dump", dump], background=True)
        t0 = time.time()
        rig.start_hog()
        pause_hog(rig, True)
        ons = []
        try:
            for on, off in sched:
                time.sleep(max(0.0, on - (time.time() - t0)))
                at_floor = readf(floor_file)
                pause_hog(rig, False)
                ons.append((time.time() - t0, at_floor))
                time.sleep(max(0.0, off - (time.time() - t0)))
                pause_hog(rig, True)
        finally:
            pause_hog(rig, False)
        r = lg.result(timeout=total + 30)
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        rig.stop_hog()
        check(r["errors"] == 0 and r["completed"] > 0, "loadgen errors: %s" % r)
        ds = rig.decisions_list()
        for d in ds:
            info("decision at %+.1fs: %s %s %s -> %s: %s" % (d["ts"] - t0, d["service"], d["knob"],
                                                            d["old"], d["new"], d["reason"]))
        late = []
        held = 0
        for at, value in ons:
            if value == floor:
                held += 1
                continue
            first = [d["ts"] - t0 - at for d in ds if d["service"] == "batch"
                     and d["ts"] - t0 >= at]
            if not first or min(first) > PERIOD_S:
                late.append("burst at %.1f s (%s %s): first write %s" % (
                    at, os.path.basename(floor_file), value,
                    "none" if not first else "%.2f s after" % min(first)))
        reqs = read_dump(dump, r["start_unix"], t0)
        over, _ = windows_over(reqs, target, BURST_LEAD_S, total)
        # A window holds a burst when the hog ran in any part of it; the others
        # are the host alone (nginx, its load, the daemon, and the neighbours of a
        # shared VM, which on a loud day put a quiet window over the target).
        bursty = {s for s in range(BURST_LEAD_S, total)
                  if any(on < s + 1 and off > s for on, off in sched)}
        over_b = [(s, p) for s, p in over if s in bursty]
        over_q = [(s, p) for s, p in over if s not in bursty]
        n_q = total - BURST_LEAD_S - len(bursty)
        allowed = 1 + len(over_q) * len(bursty) / max(1, n_q)
        info("windows with a burst %d, over %d; without %d, over %d; allowed over with one %.1f"
             % (len(bursty), len(over_b), n_q, len(over_q), allowed))
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(not late, "bursts without the floor and no knob write within one period: %s"
              % late)
        check(len(over_b) <= allowed,
              "%d of %d windows with a burst over the target %d us, %d of %d without one "
              "(at most %.1f allowed): %s"
              % (len(over_b), len(bursty), target, len(over_q), n_q, allowed, over))
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("%d req/s, %d hogs, target %d us; %d bursts, the hog at its floor (%s %s) at "
                "the start of %d, a write within one period for the others; windows over the "
                "target: %d of %d with a burst, %d of %d without %s; %d decisions "
                "[calibration: %s]"
                % (rig.rate, rig.hogs, target, len(ons), os.path.basename(floor_file), floor,
                   held, len(over_b), len(bursty), len(over_q), n_q, over, len(ds), tried))


def remake_cgroup(cg):
    """Remove cg (empty) in every hierarchy and make it again: a new cgroup under the
    same name, as a restarted systemd unit gets."""
    for p in reversed(cg.paths):
        for _ in range(100):
            try:
                os.rmdir(p)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
    for p in cg.paths:
        os.makedirs(p, exist_ok=True)


def test_restart():
    """The hog restarted twice into a new cgroup (removed and made again) beside nginx,
    the default policy (CPUWeight=idle..100; 1..100 without cpu.idle): each new cgroup
    is at its floor within RESTART_FLOOR_S of its directory being made (the daemon
    watches where it appears; its tick would come up to a period later), and at most
    one 1 s window after each restart is over the target. Calibrated as closed_loop."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="restart") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        files = knob_files(rig.batch)
        floor_file, floor, weight = default_floor(files)
        orig = snapshot(files)
        tw_proc = rig.run(rig.write_policies(target, weights=None, weight=weight))
        dump = os.path.join(rig.dir, "restart.dump")
        lg = sess.loadgen("http", rig.nginx.port, rig.rate, RESTART_S, cpu=CLIENT_CPU,
                          extra=["--dump", dump], background=True)
        t0 = time.time()
        rig.start_hog()
        made = []
        for at in RESTART_AT_S:
            time.sleep(max(0.0, at - (time.time() - t0)))
            rig.stop_hog()
            remake_cgroup(rig.batch)
            t_made = time.time() - t0
            rig.start_hog(settle=0)
            floor_at = None
            while time.time() - t0 < t_made + 5:
                if readf(floor_file) == floor:
                    floor_at = time.time() - t0
                    break
                time.sleep(0.01)
            made.append((t_made, floor_at))
            time.sleep(0.5)
        r = lg.result(timeout=RESTART_S + 30)
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = snapshot(files)
        rig.stop_hog()
        check(r["errors"] == 0 and r["completed"] > 0, "loadgen errors: %s" % r)
        ds = rig.decisions_list()
        for d in ds:
            info("decision at %+.1fs: %s %s %s -> %s: %s" % (d["ts"] - t0, d["service"], d["knob"],
                                                            d["old"], d["new"], d["reason"]))
        reqs = read_dump(dump, r["start_unix"], t0)
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        slow = ["made at %.2f s: %s" % (m, "never at its floor" if f is None else
                                        "floor %.2f s later" % (f - m))
                for m, f in made if f is None or f - m > RESTART_FLOOR_S]
        check(not slow, "a new cgroup of the hog not at its floor within %.2f s: %s"
              % (RESTART_FLOOR_S, slow))
        overs = []
        for i, (m, _) in enumerate(made):
            end = int(made[i + 1][0]) if i + 1 < len(made) else RESTART_S
            over, seen = windows_over(reqs, target, int(m), end)
            overs.append((over, seen))
            check(len(over) <= 1, "%d of %d windows after the restart at %.1f s over the target "
                  "%d us: %s" % (len(over), seen, m, target, over))
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("%d req/s, %d hogs, target %d us; restarts at %s s: the new cgroup at its floor "
                "(%s %s) %s s later; windows over the target after each: %s; %d decisions "
                "[calibration: %s]"
                % (rig.rate, rig.hogs, target, ", ".join("%.1f" % m for m, _ in made),
                   os.path.basename(floor_file), floor,
                   ", ".join("%.2f" % (f - m) for m, f in made),
                   ", ".join("%d of %d" % (len(o), n) for o, n in overs), len(ds), tried))


def rc_ok(p):
    return p.returncode == 0


# be_share: the light best-effort service, busy and asleep in turns (us), tried in order
LIGHT_SLICES = ((20, 300), (10, 200), (10, 500), (10, 1000), (10, 2000))
LIGHT_APART = 15        # the hog's use over the light one's, at least (test_be_share())
LIGHT_PY = """
import time
busy, sleep = %r, %r
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < busy:
        pass
    time.sleep(sleep)
"""


def test_be_share():
    """Two best-effort services on nginx's CPU, the hog and a light one (a loop busy
    for tens of microseconds at a time, a tenth of a CPU or less), both with only
    CPUQuota= (their weights not ours: a violation cuts quotas at once). The first
    quota cut halves what they use together and splits it by their weights
    (equal): the light one, under its part, keeps its quota and the hog is cut,
    with the share in the reason. Calibrated (LIGHT_SLICES, lighter in turn): the
    light one alone must leave nginx within the target, and use at most a
    LIGHT_APART-th of what the hog takes beside it (else its part, read in one
    tick, could not clearly cover it), or the test fails."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="share") as sess:
        rig = Rig(sess)
        alone, hog, target, tried = calibrate(rig)
        scan = sess.cgroup("scan")
        # Short busy slices, so that the light one alone leaves nginx within the
        # target: a tenth of the CPU in bursts of 1 ms (stress-ng --cpu-load with
        # a 1 ms slice) still delays a tenth of nginx's requests by up to a
        # millisecond (2 ms p99 here). Busy BUSY us, then asleep SLEEP us.
        # Its part of the first cut is a quarter of what the two use (halved,
        # split by equal weights): "clearly under" it (1.5x its use) needs the
        # hog at 5 times its use in that tick, and a tick's reading of the
        # hog's use runs far lower than 3 s's, as nginx, over its objective,
        # takes more of the CPU (on a 2-vCPU AMD EPYC VM: the hog 55% over 3 s,
        # best-effort use 24% in the cut's tick, a part of 6% against the light
        # one's 5%): LIGHT_APART. Where nginx itself takes most of CPU 0 the
        # hog gets less, so lighter settings are tried in turn (the loop's every
        # wake-up costs tens of microseconds of Python: 10 us of 1010 still took
        # 3-4% of a CPU here beside the hog's 51%, so the lightest wakes every 2 ms).
        for busy, sleep in LIGHT_SLICES:
            light = sess.spawn([sys.executable, "-c", LIGHT_PY % (busy / 1e6, sleep / 1e6)],
                               cgroup=scan, cpu=SERVER_CPU,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            use = CpuShares(light=scan)
            with_light = rig.p99(4)
            light_use = use.done()["light"]
            rig.start_hog()
            use = CpuShares(hog=rig.batch, light=scan)
            rig.p99(3)
            use = use.done()
            hog_use, light_beside = use["hog"], use["light"]
            rig.stop_hog()
            said = ("busy %d us of %d: p99 %.0f us, %.0f%% of a CPU; beside the hog %.0f%%, the "
                    "hog %.0f%%" % (busy, busy + sleep, with_light, 100 * light_use,
                                    100 * light_beside, 100 * hog_use))
            tried += "; light one " + said
            info("light one: %s" % said)
            if with_light <= target and hog_use >= LIGHT_APART * light_beside:
                break
            sess.kill_cgroup(scan)
            light.wait(5)
        check(with_light <= target, "nginx beside the light service alone has p99 %.0f us, over "
              "the target %d us: no separation [calibration: %s]" % (with_light, target, tried))
        check(hog_use >= LIGHT_APART * light_beside,
              "the hog used %.0f%% of a CPU, the light one %.0f%%: not %dx apart, the light "
              "one's part could not clearly cover its use [calibration: %s]"
              % (100 * hog_use, 100 * light_beside, LIGHT_APART, tried))
        pol = rig.write_policies(target, batch_extra="")
        # Quota only: the weights are not ours, so a violation cuts the quotas at once.
        with open(os.path.join(pol, "batch.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nCPUQuota=5%%..max\n"
                    % rig.batch.rel)
        with open(os.path.join(pol, "scan.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nCPUQuota=5%%..max\n"
                    % scan.rel)
        files = {"batch": knob_files(rig.batch), "scan": knob_files(scan)}
        orig = {k: snapshot(v) for k, v in files.items()}
        tw_proc = rig.run(pol)
        light_cpu = CpuTrace(scan)
        try:
            _, _, t_hog, _, _ = rig.hog_phase(lambda: time.sleep(LEAD_S))
        finally:
            light_cpu.stop()
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        after = {k: snapshot(v) for k, v in files.items()}
        rig.stop_hog()
        sess.kill_cgroup(scan)
        light.wait(5)
        ds = rig.decisions_list()
        for d in ds:
            info("decision: %s %s %s -> %s: %s" % (d["service"], d["knob"], d["old"], d["new"],
                                                   d["reason"]))
        # A stray violation in the quiet lead cuts the light one alone (the share
        # needs two): what is asserted starts with the hog.
        quota = [d for d in ds if d["knob"] == "cpu.max" and d["ts"] >= t_hog]
        check(quota, "no quota was cut after the hog started: %s" % ds[:4])
        first = quota[0]
        check(first["service"] == "batch", "the first quota cut was %s's, not the hog's: %s"
              % (first["service"], first["reason"]))
        # Each share names the total: "best-effort use 70% -> 35%, by home weight
        # 100/200: 17.5%". In the ticks where the light one was clearly under its
        # part (equal weights: half of the halved total) by its own use in that
        # tick (the period before the decision, read every 0.1 s by the test;
        # 1.5x it, as the daemon's reading and the test's differ by a sample),
        # it keeps its quota.
        shares = []
        for d in quota:
            m = re.search(r"best-effort use (\d+)% -> (\d+)%, by home weight 100/200",
                          d["reason"])
            used = light_cpu.share(d["ts"] - PERIOD_S, d["ts"])
            if d["service"] == "batch" and m and used is not None:
                shares.append((d, int(m.group(2)) / 200.0, used))
        check(shares, "no cut of the hog's quota says the share: %s" % first["reason"])
        clear = [d for d, part, used in shares if part >= 1.5 * used]
        check(clear, "in no share was the light one clearly under its part: %s (light one %.0f%% "
              "of a CPU over 3 s beside the hog)"
              % (", ".join("part %.0f%%, light one %.0f%% in the tick" % (100 * p, 100 * u)
                           for _, p, u in shares), 100 * light_beside))
        for d in clear:
            same = [x for x in quota if x["service"] == "scan" and abs(x["ts"] - d["ts"]) < 0.1]
            check(not same, "the light service's quota was cut in a tick where it was under its "
                  "part: %s; %s" % (d["reason"], same))
        check(rc_ok(tw_proc), "tailwarden run exited %s after SIGTERM" % tw_proc.returncode)
        check(after == orig, "knobs not restored after SIGTERM: %s, originally %s" % (after, orig))
        return ("target %d us; the light one used %.0f%% of a CPU beside the hog's %.0f%%; first "
                "quota cut: %s; %d shares with the light one clearly under its part, none cut "
                "it; scan's quota cuts %d of %d in all [calibration: %s]"
                % (target, 100 * light_beside, 100 * hog_use, first["reason"], len(clear),
                   sum(1 for d in quota if d["service"] == "scan"), len(quota), tried))


def test_dry_run():
    """--dry-run logs the same kind of decisions and never changes a file."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="dry") as sess:
        rig = Rig(sess)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        # A target nginx cannot meet beside the hog: cuts are certain.
        tw_proc = rig.run(rig.write_policies(50, dry_run=True))
        rig.start_hog()
        seen = []
        for _ in range(8):
            rig.p99(1)
            seen.append(snapshot(files))
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        rig.stop_hog()
        ds = rig.decisions_list()
        check(all(s == orig for s in seen), "a file changed in dry-run: %s" % seen)
        check(len(ds) >= 2, "dry-run logged %d decisions" % len(ds))
        check(all(d["dry_run"] and not d["applied"] for d in ds), "decision log: %s" % ds[:3])
        first = ds[0]
        # As in a real run: the weight first, cut to between a half and a
        # sixteenth (by the square of the miss).
        check(first["knob"] == "cpu.weight" and first["old"] == 100 and 6 <= first["new"] <= 50,
              "first dry-run decision %s, expected cpu.weight 100 -> 7..50 as in a real run"
              % first)
        # Later decisions build on the would-be values, as a real run would.
        check(ds[1]["old"] == first["new"],
              "second decision does not start from the would-be %s: %s" % (first["new"], ds[1]))
        check("would set" in rig.log_text(), "no 'would set' in the log")
        return "%d decisions logged (first %s %s -> %s), no file changed" % (
            len(ds), first["knob"], first["old"], first["new"])


def test_crash_restore():
    """kill -9 mid-run leaves knobs changed; `tailwarden restore` puts every one back."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="crash") as sess:
        rig = Rig(sess)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        tw_proc = rig.run(rig.write_policies(50))
        rig.start_hog()
        for _ in range(10):
            rig.p99(1)
            if snapshot(files) != orig:
                break
        changed = snapshot(files)
        tw_proc.kill()
        tw_proc.wait(5)
        rig.stop_hog()
        check(changed != orig, "nothing was changed before the crash")
        check(snapshot(files) == changed, "knobs changed after kill -9?")
        # The same config as run's: its StateDir= is found (as the unit's ExecStopPost= needs).
        r = subprocess.run([tw.TAILWARDEN, "restore", "--config", rig.conf],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "restore exited %d: %s" % (r.returncode, r.stderr))
        check(snapshot(files) == orig, "after restore %s, originally %s" % (snapshot(files), orig))
        return "changed %s -> restored %s" % (changed["cpu.shares"], orig["cpu.shares"])


def test_bad_policy():
    """An invalid policy set: run refuses with FILE:LINE; SIGHUP with one keeps the old set."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="bad") as sess:
        rig = Rig(sess)
        files = knob_files(rig.batch)
        orig = snapshot(files)
        pol = rig.write_policies(1000, web_extra="Targett=3ms\n")
        r = subprocess.run([tw.TAILWARDEN, "run", "--config", rig.conf, "--policies", pol],
                           capture_output=True, text=True, timeout=30)
        bad = os.path.join(pol, "web.policy")
        check(r.returncode == 1, "run on an invalid set exited %d" % r.returncode)
        check("%s:9: " % bad in r.stderr and "Target" in r.stderr,
              "no FILE:LINE error naming the key: %s" % r.stderr)
        check(snapshot(files) == orig, "files changed by a refused start")
        pol = rig.write_policies(1000)
        tw_proc = rig.run(pol)
        with open(os.path.join(pol, "batch.policy"), "a") as f:
            f.write("CPUWeight=500..1\n")
        tw_proc.send_signal(signal.SIGHUP)
        time.sleep(2)
        check(tw_proc.poll() is None, "run died on a bad reload: %s" % rig.log_text())
        check("keeping the old one" in rig.log_text(), "no 'keeping the old one': %s" % rig.log_text())
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        check(rc_ok(tw_proc), "exit %s after SIGTERM" % tw_proc.returncode)
        return "refused with %s:9; bad reload kept the old set" % os.path.basename(bad)


RUN_DIR = "/run/tailwarden"

# ---- Slice= ----

SLICE_NS = 300000       # the policy's slice: neither the default (1.4 ms here) nor a custom one below
CUSTOM_NS = 2000000     # a thread that had its own custom slice before tailwarden
OTHER_NS = 5000000      # what someone else sets while the daemon runs
SLICE_POLICY = "[Limits]\nSlice=0.3ms\n"
set_slice = tw.set_sched_slice
slice_of = tw.sched_slice


def threads_of(cg):
    out = set()
    for path in (os.path.join(cg.unified, "cgroup.threads"),
                 os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"), "tasks")):
        try:
            with open(path) as f:
                out.update(int(x) for x in f.read().split())
        except FileNotFoundError:
            pass
    return out


def slices(tids):
    return {t: slice_of(t) for t in tids if slice_of(t) is not None}


def slice_supported():
    with open("/proc/self/sched") as f:
        return "se.slice" in f.read()


def slice_rig(sess):
    """nginx beside the hog, plus a thread with its own custom slice; the originals."""
    rig = Rig(sess)
    custom = sess.spawn(["sleep", "300"], cgroup=rig.web, cpu=SERVER_CPU)
    time.sleep(0.2)
    set_slice(custom.pid, CUSTOM_NS)
    orig = slices(threads_of(rig.web))
    check(orig.get(custom.pid) == CUSTOM_NS, "custom slice not set: %s" % orig)
    return rig, custom, orig


def wait_slices(rig, tids, want, seconds):
    """Load nginx until every thread of tids has slice want; the last readings."""
    deadline = time.monotonic() + seconds
    while True:
        rig.p99(1)
        now = slices(tids)
        if all(v == want for v in now.values()) and now:
            return now
        if time.monotonic() > deadline:
            return now


def test_slice():
    """Slice=: nginx's threads get the short slice while it misses, a later thread too; SIGTERM puts them back
    (all but one someone else changed meanwhile)."""
    if not slice_supported():
        raise tw.Skip("no se.slice in /proc/self/sched: kernel before 6.12")
    with tw.Session(("unified", "cpu", "cpuacct"), tag="slice") as sess:
        rig, custom, orig = slice_rig(sess)
        info("originals: %s" % orig)
        tw_proc = rig.run(rig.write_policies(50, web_extra=SLICE_POLICY))
        check("Slice= can act" in rig.log_text(), "no probe line: %s" % rig.log_text()[-600:])
        rig.start_hog()
        t0 = time.monotonic()
        now = wait_slices(rig, orig.keys(), SLICE_NS, 15)
        given_s = time.monotonic() - t0
        check(all(v == SLICE_NS for v in now.values()),
              "threads of nginx not at %d ns while the daemon acts: %s" % (SLICE_NS, now))
        ds = [d for d in rig.decisions_list() if d["knob"] == "sched.slice"]
        check(ds and ds[0]["new"] == SLICE_NS and "short slice" in ds[0]["reason"],
              "no sched.slice decision with its reason: %s" % ds)
        first = rig.decisions_list()[0]
        check(first["knob"] == "sched.slice", "the slice is not the first rung: %s" % first)
        # status names what it was before the daemon's change, and that it is ours.
        st = json.loads(subprocess.run([tw.TAILWARDEN, "status", "--config", rig.conf, "--json"],
                                       capture_output=True, text=True, timeout=30).stdout)
        web = [x for x in st["services"] if x["name"] == "web"][0]
        kn = {k["knob"]: k for k in web["knobs"]}.get("sched.slice")
        check(kn and kn["ours"] and kn["original"] == 0 and kn["value"] == SLICE_NS,
              "status --json shows sched.slice as %s; want ours, original 0 (default), value %d"
              % (kn, SLICE_NS))
        # A thread started later gets it on a following tick.
        late = sess.spawn(["sleep", "300"], cgroup=rig.web, cpu=SERVER_CPU)
        deadline = time.monotonic() + 5
        while slice_of(late.pid) != SLICE_NS and time.monotonic() < deadline:
            time.sleep(0.1)
        late_slice = slice_of(late.pid)
        check(late_slice == SLICE_NS, "a thread started later has slice %s" % late_slice)
        # Someone else sets one thread's slice: it is theirs from then on.
        set_slice(custom.pid, OTHER_NS)
        deadline = time.monotonic() + 5
        while "changed by someone else" not in rig.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        check("had their slice changed by someone else" in rig.log_text(),
              "no warning about the slice changed by someone else: %s" % rig.log_text()[-600:])
        check(slice_of(custom.pid) == OTHER_NS, "the daemon took back a slice someone else set")
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        rig.stop_hog()
        after = slices(orig.keys())
        check(after.pop(custom.pid) == OTHER_NS, "a slice someone else set was not left alone")
        want = {t: v for t, v in orig.items() if t != custom.pid}
        check(after == want, "after SIGTERM %s, originally %s" % (after, want))
        late_after = slice_of(late.pid)
        check(late_after == slice_of(os.getpid()), "the later thread has %s after SIGTERM" % late_after)
        return ("%d threads at %d ns %.1f s after the hog started (decision: %s); later thread at %d ns; "
                "one set to %d ns by someone else left alone; after SIGTERM the others back (%s; later thread %d ns)"
                % (len(now), SLICE_NS, given_s, ds[0]["reason"][:120], late_slice, OTHER_NS,
                   ", ".join("%d: %d" % kv for kv in sorted(after.items())), late_after))


def test_slice_crash():
    """Slice= after kill -9: restore puts every thread's slice back, and leaves a reused tid alone."""
    if not slice_supported():
        raise tw.Skip("no se.slice in /proc/self/sched: kernel before 6.12")
    with tw.Session(("unified", "cpu", "cpuacct"), tag="slicecrash") as sess:
        rig, custom, orig = slice_rig(sess)
        tw_proc = rig.run(rig.write_policies(50, web_extra=SLICE_POLICY))
        rig.start_hog()
        now = wait_slices(rig, orig.keys(), SLICE_NS, 15)
        tw_proc.kill()
        tw_proc.wait(5)
        rig.stop_hog()
        check(all(v == SLICE_NS for v in now.values()), "not all at the slice before the crash: %s" % now)
        # One record made to look like a reused tid: another start time.
        path = os.path.join(rig.state, "state.json")
        with open(path) as f:
            st = json.load(f)
        rec = [k for k in st["knobs"] if k["knob"] == "sched.slice"]
        check(len(rec) == 1, "no sched.slice record in the state file: %s" % st)
        threads = rec[0]["snapshot"]["threads"]
        check({t["tid"] for t in threads} == set(orig), "threads recorded %s, of nginx %s"
              % (sorted(t["tid"] for t in threads), sorted(orig)))
        reused = [t for t in threads if t["tid"] == custom.pid][0]
        check(reused["slice_ns"] == CUSTOM_NS, "custom original recorded as %s" % reused)
        check(all(t["slice_ns"] == 0 for t in threads if t["tid"] != custom.pid),
              "default originals not recorded as 0: %s" % threads)
        reused["start"] += 1
        with open(path, "w") as f:
            json.dump(st, f)
        r = subprocess.run([tw.TAILWARDEN, "restore", "--config", rig.conf],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "restore exited %d: %s" % (r.returncode, r.stderr))
        after = slices(orig.keys())
        check(after[custom.pid] == SLICE_NS, "the reused tid was touched: %s" % after)
        check("another thread now" in r.stdout + r.stderr, "restore did not say why: %s" % (r.stdout + r.stderr))
        del after[custom.pid]
        want = {t: v for t, v in orig.items() if t != custom.pid}
        check(after == want, "after restore %s, originally %s" % (after, want))
        return "%d threads at %d ns after kill -9; restore: %s; the 'reused' tid left at %d ns" % (
            len(now), SLICE_NS, ", ".join("%d: %d" % kv for kv in sorted(after.items())), SLICE_NS)


def test_slice_dry_run():
    """Slice= in dry-run: the decision is logged, no thread's slice changes."""
    if not slice_supported():
        raise tw.Skip("no se.slice in /proc/self/sched: kernel before 6.12")
    with tw.Session(("unified", "cpu", "cpuacct"), tag="slicedry") as sess:
        rig, custom, orig = slice_rig(sess)
        tw_proc = rig.run(rig.write_policies(50, dry_run=True, web_extra=SLICE_POLICY))
        rig.start_hog()
        seen = []
        for _ in range(8):
            rig.p99(1)
            seen.append(slices(orig.keys()))
        rig.sess.stop(tw_proc, signal.SIGTERM, timeout=15)
        rig.stop_hog()
        ds = [d for d in rig.decisions_list() if d["knob"] == "sched.slice"]
        check(all(s == orig for s in seen), "a slice changed in dry-run: %s" % seen)
        check(ds and ds[0]["dry_run"] and not ds[0]["applied"] and ds[0]["new"] == SLICE_NS,
              "no dry-run sched.slice decision: %s" % ds)
        check("would set sched.slice" in rig.log_text(), "no 'would set sched.slice' in the log")
        return "decision %s -> %s logged, %d readings of %d threads unchanged" % (
            ds[0]["old"], ds[0]["new"], len(seen), len(orig))


def test_fresh_host():
    """No /run/tailwarden, only --policies: run (and --dry-run) make it, act, restore; unsafe dirs refused."""
    aside = None
    if os.path.lexists(RUN_DIR):
        aside = "%s.test-aside-%d" % (RUN_DIR, os.getpid())
        os.rename(RUN_DIR, aside)
    try:
        with tw.Session(("unified", "cpu", "cpuacct"), tag="fresh") as sess:
            rig = Rig(sess)
            files = knob_files(rig.batch)
            orig = snapshot(files)
            pol = rig.write_policies(50)        # a target nginx misses beside the hog
            rig.start_hog()
            seen = {}
            for dry in (True, False):
                argv = [tw.TAILWARDEN, "run", "--policies", pol] + (["--dry-run"] if dry else [])
                log = open(os.path.join(rig.dir, "fresh-%s.log" % dry), "w+")
                p = sess.spawn(argv, stdout=log, stderr=subprocess.STDOUT)
                lg = sess.loadgen("http", rig.nginx.port, rig.rate, 6, cpu=CLIENT_CPU,
                                  background=True)
                time.sleep(4)
                during = snapshot(files)
                lg.result(timeout=40)
                check(p.poll() is None, "run%s exited %s on a fresh host: %s"
                      % (" --dry-run" if dry else "", p.returncode, open(log.name).read()))
                st = os.lstat(RUN_DIR)
                check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
                      and st.st_uid == 0, "%s: mode %o uid %d" % (RUN_DIR, st.st_mode, st.st_uid))
                decisions = os.path.join(RUN_DIR, "decisions.jsonl")
                n = sum(1 for _ in open(decisions)) if os.path.exists(decisions) else 0
                sess.stop(p, signal.SIGTERM, timeout=15)
                check(p.returncode == 0, "exit %s after SIGTERM" % p.returncode)
                check(snapshot(files) == orig, "not restored: %s, originally %s"
                      % (snapshot(files), orig))
                if dry:
                    check(during == orig, "--dry-run changed a file: %s" % during)
                else:
                    check(during != orig, "run changed nothing on a fresh host")
                check(n > 0, "no decision logged in %s" % decisions)
                seen["dry" if dry else "live"] = n
                shutil.rmtree(RUN_DIR)
            rig.stop_hog()
            # An unsafe state directory is refused before anything is touched.
            refused = []
            for make, why in ((lambda: os.makedirs(RUN_DIR, mode=0o777) or os.chmod(RUN_DIR, 0o777),
                               "writable by group or others"),
                              (lambda: os.symlink(rig.dir, RUN_DIR), "symbolic link")):
                make()
                r = subprocess.run([tw.TAILWARDEN, "run", "--policies", pol], capture_output=True,
                                   text=True, timeout=60)
                check(r.returncode == 1 and why in r.stderr,
                      "an unsafe %s was not refused (%s): %s" % (RUN_DIR, why, r.stderr))
                check(snapshot(files) == orig, "files changed by a refused start")
                refused.append(why)
                if os.path.islink(RUN_DIR):
                    os.unlink(RUN_DIR)
                else:
                    shutil.rmtree(RUN_DIR)
            return ("%s made 0700; dry-run logged %d decisions and wrote nothing, run %d and "
                    "restored; refused a directory %s" % (RUN_DIR, seen["dry"], seen["live"],
                                                         " and a ".join(refused)))
    finally:
        if os.path.islink(RUN_DIR):
            os.unlink(RUN_DIR)
        elif os.path.exists(RUN_DIR):
            shutil.rmtree(RUN_DIR)
        if aside:
            os.rename(aside, RUN_DIR)


TESTS = [
    ("closed_loop", test_closed_loop),
    ("weights_floor", test_weights_floor),
    ("idle_floor", test_idle_floor),
    ("be_share", test_be_share),
    ("own_load", test_own_load),
    ("two_lc", test_two_lc),
    ("burst", test_burst),
    ("restart", test_restart),
    ("dry_run", test_dry_run),
    ("crash_restore", test_crash_restore),
    ("bad_policy", test_bad_policy),
    ("fresh_host", test_fresh_host),
    ("slice", test_slice),
    ("slice_crash", test_slice_crash),
    ("slice_dry_run", test_slice_dry_run),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", retry=('closed_loop', 'weights_floor', 'idle_floor', 'be_share', 'own_load', 'two_lc', 'burst', 'restart'), prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
