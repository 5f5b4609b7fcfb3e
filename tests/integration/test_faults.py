#!/usr/bin/python3
"""Fault tests: tailwarden killed at any moment, cgroups pulled from under it.

A real nginx (latency-critical) under open-loop load and a real CPU hog
(best-effort) on one CPU; the hog runs in bursts, so the controller is busy
cutting and giving back while it is killed. What a user would notice:

  kill9_restore     `kill -9` at random moments (during start-up, mid-cut,
                    mid-give-back), each followed by `tailwarden restore`:
                    every knob back to its original value, every time
  be_removed        a best-effort cgroup removed while controlled: the
                    daemon says so once, keeps controlling the rest, and
                    still restores everything else on SIGTERM

Usage: test_faults.py [-v] [TEST...]   (as root). TW_FAULT_KILLS sets the
number of kills (default 50).
"""

import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
import colo  # noqa: E402
from twtest import check  # noqa: E402

KILLS = int(os.environ.get("TW_FAULT_KILLS", "50"))
BURST_S = 3.0           # the hog runs BURST_S, rests BURST_S: cuts, then give-backs


def info(msg):
    if tw.verbose():
        tw.log(msg)


class Bursts(threading.Thread):
    """Starts and stops the hog in turns until told to stop."""

    def __init__(self, rig):
        super().__init__(daemon=True)
        self.rig, self.done = rig, threading.Event()

    def run(self):
        while not self.done.is_set():
            self.rig.start_hog(seconds=int(BURST_S) + 1)
            self.done.wait(BURST_S)
            self.rig.stop_hog()
            self.done.wait(BURST_S)

    def stop(self):
        self.done.set()
        self.join(2 * BURST_S + 5)
        self.rig.stop_hog()


def busy_rig(sess, tag):
    """nginx under load for the whole test, a bursting hog; target 3x its p99 alone."""
    rig = colo.Rig(sess, sess.tmpdir(tag))
    rig.rate, rig.hogs = 8000, 2
    alone = rig.p99(2)
    rig.target = int(max(3 * alone, 300))
    lg = sess.loadgen("http", rig.nginx.port, rig.rate, 3600, cpu=colo.CLIENT_CPU, background=True)
    bursts = Bursts(rig)
    bursts.start()
    return rig, lg, bursts


def restore(state):
    return subprocess.run([tw.TAILWARDEN, "restore", "--state-dir", state],
                          capture_output=True, text=True, timeout=60)


def test_kill9_restore():
    """kill -9 at KILLS random moments; after each `tailwarden restore`, every knob is back."""
    rnd = random.Random(int(os.environ.get("TW_FAULT_SEED", str(os.getpid()))))
    with tw.Session(("unified", "cpu", "cpuacct"), tag="kill9") as sess:
        rig, _, bursts = busy_rig(sess, "kill9")
        try:
            rig.write_config(tag="kill9")
            state = os.path.join(os.path.dirname(rig.conf), "state")
            orig = rig.knob_files()
            changed = early = 0
            for i in range(KILLS):
                if rnd.random() < 0.1:
                    # During start-up: sensors loading, nothing recorded yet, or the first writes.
                    argv = [tw.TAILWARDEN, "run", "--config", rig.conf, "--policies", rig.policies]
                    p = sess.spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(rnd.uniform(0.0, 1.0))
                    early += 1
                else:
                    rig.start_tailwarden()
                    p = rig.tw
                    time.sleep(rnd.uniform(0.2, 2 * BURST_S))
                p.kill()
                p.wait(10)
                rig.tw = None
                was = rig.knob_files()
                changed += was != orig
                r = restore(state)
                check(r.returncode == 0, "kill %d: restore exited %d: %s" % (i + 1, r.returncode,
                                                                             r.stderr))
                now = rig.knob_files()
                check(now == orig, "kill %d: after restore %s, originally %s (at the kill: %s)"
                      % (i + 1, now, orig, was))
                info("kill %d: %s -> restored" % (i + 1, "changed" if was != orig else "unchanged"))
            # The kills must have hit a controller at work, not only an idle one.
            check(changed >= KILLS // 4, "only %d of %d kills found a knob changed: the "
                  "controller was not at work (target %d us)" % (changed, KILLS, rig.target))
        finally:
            bursts.stop()
        return ("%d kills (%d during start-up), %d with knobs changed at the kill; every knob back "
                "after each restore" % (KILLS, early, changed))


def test_be_removed():
    """A best-effort cgroup removed while controlled: said once, the rest still controlled and restored."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="berm") as sess:
        rig, _, bursts = busy_rig(sess, "berm")
        try:
            rig.write_config(tag="berm")
            orig = rig.knob_files()
            rig.start_tailwarden()
            deadline = time.monotonic() + 20
            while rig.knob_files()["scan"] == orig["scan"] and time.monotonic() < deadline:
                time.sleep(0.2)
            check(rig.knob_files()["scan"] != orig["scan"], "scan was never cut in 20 s")
        finally:
            bursts.stop()
        # Pull batch (the hog's cgroup) from under the daemon.
        sess.kill_cgroup(rig.batch)
        for path in rig.batch.paths:
            os.rmdir(path)
        time.sleep(3)
        check(rig.tw.poll() is None, "tailwarden run died when a cgroup was removed")
        log = colo.readf(rig.runlog, "")
        said = [line for line in log.splitlines() if "batch" in line and "does not exist" in line]
        check(len(said) == 1, "the removal was not said exactly once: %s" % said)
        rc = rig.stop_tailwarden()
        check(rc == 0, "exit status %s after SIGTERM: %s" % (rc, colo.readf(rig.runlog)))
        check(rig.knob_files()["scan"] == orig["scan"], "scan not restored: %s, originally %s"
              % (rig.knob_files()["scan"], orig["scan"]))
        return "said once (%s); scan restored on SIGTERM" % said[0].split(": ", 1)[-1][:80]


TESTS = [
    ("kill9_restore", test_kill9_restore),
    ("be_removed", test_be_removed),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
