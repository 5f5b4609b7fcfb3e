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
  bad_state         hostile state files (wrong JSON types, truncated, a
                    FIFO, a symbolic link, a bad record after a good one,
                    escape bytes, a knob file outside the cgroup tree, a
                    record for another cgroup root, a symbolic link on the
                    way to a knob file, a value the knob cannot hold, a
                    knob file on a plain file system): `restore` and `run`
                    refuse them with the file and the record named, within
                    seconds, and change nothing, inside the tree or out
  admin_change      kill -9 while the daemon has a neighbour's weight cut;
                    the administrator then sets that weight by hand:
                    `tailwarden restore` leaves it, says so, and restores
                    every other knob
  hook_missing      kernel tracepoints hidden as on an older kernel
                    (TAILWARDEN_TEST_HIDE_TRACEPOINTS): without the
                    contention hooks the daemon names them and still cuts
                    the hog; without tcp_rcv_space_adjust it says it
                    falls back to receive-stamped spans; both restore on SIGTERM;
                    without inet_sock_set_state it refuses to start, the
                    hook named, nothing changed
  log_rotation      a small DecisionLogMaxSize= on a busy controller (a
                    steady hog, the policies reloaded every few seconds,
                    each reload a fresh start that cuts the hog again):
                    the decision log rotates to FILE.1, neither file
                    passes the limit by more than one line, every line is
                    JSON
  log_reopen        the decision log moved aside, then SIGHUP: later lines
                    go to a new file, none to the moved one
  log_full          the decision log on a full tmpfs (in a mount namespace
                    of its own): the daemon keeps controlling, counts the
                    lost lines (log, status.json), writes again once there
                    is room, and restores every knob on SIGTERM
  knob_fail_log     a knob write that keeps failing (a v1 quota above its
                    parent's): said on the 1st, 2nd, 4th... failure, not
                    every time, and once when it is written again
  sigpipe           the daemon's stderr a pipe whose reader is closed: it
                    keeps controlling and restores on SIGTERM, exit 0

Usage: test_faults.py [-v] [TEST...]   (as root). TW_FAULT_KILLS sets the
number of kills (default 50).
"""

import json
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
RELOAD_S = 3.0          # log_rotation: a SIGHUP every RELOAD_S s


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


class SteadyHog:
    """The hog running all along; stop() as Bursts'."""

    def __init__(self, rig):
        self.rig = rig
        rig.start_hog(seconds=3600)

    def stop(self):
        self.rig.stop_hog()


def busy_rig(sess, tag, factor=3, bursting=True):
    """nginx under load for the whole test, a bursting (or steady) hog; target
    factor x its p99 alone."""
    rig = colo.Rig(sess, sess.tmpdir(tag))
    rig.rate, rig.hogs = 8000, 2
    # A neighbour on the host only ever raises a p99: a reading far above
    # nginx's usual 100-300 us alone is taken again (once in a CI run it was
    # 1.85 ms, the target 5.5 ms, and no hog burst ever crossed it), and
    # the lowest of up to three counts.
    alone = rig.p99(2)
    for _ in range(2):
        if alone <= 1000:
            break
        alone = min(alone, rig.p99(2))
    rig.target = int(max(factor * alone, 300))
    lg = sess.loadgen("http", rig.nginx.port, rig.rate, 3600, cpu=colo.CLIENT_CPU, background=True)
    if not bursting:
        return rig, lg, SteadyHog(rig)
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
        # scan must be a cause to be cut: a service idle through the window
        # is not (the engine's "not the cause" rule), so it gets light CPU
        # work of its own beside the bursting hog.
        sess.spawn(["stress-ng", "--cpu", "1", "--cpu-load", "20", "--timeout", "600", "-q"],
                   cgroup=rig.scan, cpu=colo.SERVER_CPU, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
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


def test_bad_state():
    """Hostile state files: refused with the reason, nothing changed, no hang, no abort."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="badst") as sess:
        cg = sess.cgroup("victim")
        shares = os.path.join(cg.paths[1], "cpu.shares")
        base = tw.CGROUP_FS

        def set_shares(v):
            with open(shares, "w") as f:
                f.write(str(v))

        def get_shares():
            return colo.readf(shares).strip()

        def record(value="1024", path=shares, knob="cpu.weight"):
            return {"cgroup_base": base, "cgroup": cg.rel, "knob": knob, "original": 100,
                    "snapshot": {"files": [{"path": path, "value": value}]}}

        def slice_rec(threads=None, **entry):
            t = {"tid": os.getpid(), "start": 1, "slice_ns": 0, "written_ns": 300000}
            t.update(entry)
            t = {k: v for k, v in t.items() if v is not None}
            return {"cgroup_base": base, "cgroup": cg.rel, "knob": "sched.slice", "original": 0,
                    "snapshot": {"threads": [t] if threads is None else threads}}

        outside = os.path.join(sess.tmpdir("badst-out"), "cpu.shares")
        with open(outside, "w") as f:
            f.write("untouched\n")
        cpufreq = {"cgroup_base": base, "cgroup": cg.rel, "knob": "cpufreq", "original": 1,
                   "snapshot": {"cpus": 5}}
        cases = [
            ("cpus is a number", json.dumps({"version": 1, "knobs": [cpufreq]}),
             'knobs[0]: "snapshot.cpus" is not an array'),
            ("knobs is an object", '{"version": 1, "knobs": {"a": 1}}', 'no "knobs" array'),
            ("truncated", json.dumps({"version": 1, "knobs": [record()]})[:60], "byte 60"),
            ("a bad record after a good one",
             json.dumps({"version": 1, "knobs": [record(), dict(record(), cgroup=7)]}),
             'knobs[1]: "cgroup" is not a string'),
            ("escape bytes in a value",
             json.dumps({"version": 1, "knobs": [record(value="10\x1b[2J")]}), "knobs[0]"),
            ("an unknown knob", json.dumps({"version": 1, "knobs": [record(knob="memory.max")]}),
             "knob's name"),
            ("a value of a kilobyte", json.dumps({"version": 1, "knobs": [record(value="9" * 1024)]}),
             "knobs[0]"),
            ("trailing text", json.dumps({"version": 1, "knobs": [record()]}) + " {}", "text after"),
            ("version 2", json.dumps({"version": 2, "knobs": [record()]}), '"version" is not 1'),
            ("slice threads not an array",
             json.dumps({"version": 1, "knobs": [slice_rec(threads={"tid": 1})]}),
             'knobs[0]: "snapshot" of a "sched.slice" record is not'),
            ("slice tid 0", json.dumps({"version": 1, "knobs": [slice_rec(tid=0)]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice tid above PID_MAX_LIMIT", json.dumps({"version": 1, "knobs": [slice_rec(tid=4194305)]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice original of 5 ns", json.dumps({"version": 1, "knobs": [slice_rec(slice_ns=5)]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice written as a string",
             json.dumps({"version": 1, "knobs": [slice_rec(written_ns="300000")]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice entry without a start time",
             json.dumps({"version": 1, "knobs": [slice_rec(start=None)]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice entry with an unknown key",
             json.dumps({"version": 1, "knobs": [slice_rec(policy=6)]}),
             'knobs[0]: an entry of "snapshot.threads"'),
            ("slice record with files",
             json.dumps({"version": 1, "knobs": [dict(slice_rec(), snapshot={"files": []})]}),
             'knobs[0]: "snapshot" of a "sched.slice" record is not'),
            ("threads in a cpu.weight record",
             json.dumps({"version": 1, "knobs": [dict(record(), snapshot={"files": [], "threads": []})]}),
             'knobs[0]: "snapshot.threads" in a record that is not "sched.slice"'),
        ]
        rows = []
        set_shares(2)

        def restore_in(d, what, want_msg, want_rc=1):
            t0 = time.monotonic()
            try:
                r = subprocess.run([tw.TAILWARDEN, "restore", "--state-dir", d],
                                   capture_output=True, text=True, timeout=10)
            except subprocess.TimeoutExpired:
                raise tw.TestFailure("%s: restore hung for 10 s" % what)
            took = time.monotonic() - t0
            check(r.returncode == want_rc, "%s: restore exited %d (want %d): %s"
                  % (what, r.returncode, want_rc, r.stderr.strip()))
            check(want_msg in r.stderr, "%s: the message does not say %r: %s"
                  % (what, want_msg, r.stderr.strip()))
            return r, took

        for what, text, msg in cases:
            d = sess.tmpdir("badst")
            with open(os.path.join(d, "state.json"), "w") as f:
                f.write(text)
            r, took = restore_in(d, what, msg)
            check("state.json" in r.stderr, "%s: the file is not named: %s" % (what, r.stderr))
            check(get_shares() == "2", "%s: cpu.shares changed to %s" % (what, get_shares()))
            rows.append("%s: exit %d in %.2f s" % (what, r.returncode, took))

        # A slice record of a thread whose tid now belongs to another thread
        # (another start time): left alone, said so, not a failure.
        if "se.slice" in colo.readf("/proc/self/sched"):
            sleeper = sess.spawn(["sleep", "60"], cgroup=cg)
            time.sleep(0.2)
            tw.set_sched_slice(sleeper.pid, 300000)
            with open("/proc/%d/stat" % sleeper.pid) as f:
                start = int(f.read().rsplit(")", 1)[1].split()[19])
            d = sess.tmpdir("badst")
            with open(os.path.join(d, "state.json"), "w") as f:
                f.write(json.dumps({"version": 1, "knobs": [slice_rec(tid=sleeper.pid, start=start + 1)]}))
            r, took = restore_in(d, "a reused tid", "", want_rc=0)
            now = tw.sched_slice(sleeper.pid)
            check(now == 300000, "a reused tid: its slice changed to %s" % now)
            check("another thread now" in r.stdout + r.stderr, "a reused tid: not said: %s" % (r.stdout + r.stderr))
            rows.append("a reused tid: exit 0, its slice left at %d ns" % now)
            sess.stop(sleeper)

        # Not a regular file, or not the file itself.
        d = sess.tmpdir("badst")
        os.mkfifo(os.path.join(d, "state.json"), 0o600)
        r, took = restore_in(d, "a FIFO", "not a regular file")
        rows.append("a FIFO: exit %d in %.2f s" % (r.returncode, took))
        d, real = sess.tmpdir("badst"), sess.tmpdir("badst-real")
        with open(os.path.join(real, "state.json"), "w") as f:
            f.write(json.dumps({"version": 1, "knobs": [record()]}))
        os.symlink(os.path.join(real, "state.json"), os.path.join(d, "state.json"))
        r, took = restore_in(d, "a symbolic link", "symbolic link")
        check(get_shares() == "2", "a symbolic link: cpu.shares changed to %s" % get_shares())
        rows.append("a symbolic link: exit %d in %.2f s" % (r.returncode, took))

        # A well-formed record for a knob file outside the cgroup tree.
        d = sess.tmpdir("badst")
        with open(os.path.join(d, "state.json"), "w") as f:
            f.write(json.dumps({"version": 1, "knobs": [record(path=outside)]}))
        r = subprocess.run([tw.TAILWARDEN, "restore", "--state-dir", d],
                           capture_output=True, text=True, timeout=10)
        check(r.returncode != 0, "a file outside the cgroup tree: restore exited 0")
        check(colo.readf(outside) == "untouched", "a file outside the cgroup tree was written: %r"
              % colo.readf(outside))
        rows.append("a knob file outside the tree: exit %d, file untouched" % r.returncode)

        # Well-formed records that must still not be written: another cgroup root,
        # a symbolic link on the way, a value the knob cannot hold, a plain file.
        top = tw.CGROUP_FS
        link_rel = sess.prefix + "-link"
        plain_rel = sess.prefix + "-plain"
        link, plain = top + link_rel, top + plain_rel

        def unlink_extra():
            for p in (os.path.join(plain, "cpu.weight"),):
                if os.path.exists(p):
                    os.unlink(p)
            if os.path.isdir(plain):
                os.rmdir(plain)
            if os.path.islink(link):
                os.unlink(link)
        sess.on_cleanup(unlink_extra)
        elsewhere = sess.tmpdir("badst-root")
        os.makedirs(os.path.join(elsewhere, "cpu", cg.rel.lstrip("/")))
        decoy = os.path.join(elsewhere, "cpu", cg.rel.lstrip("/"), "cpu.shares")
        target = sess.tmpdir("badst-target")
        for f in (decoy, os.path.join(target, "cpu.weight")):
            with open(f, "w") as fh:
                fh.write("untouched\n")
        os.symlink(target, link)            # a link on the tmpfs holding the v1 hierarchies
        os.mkdir(plain)                     # a plain directory there, not a cgroup
        with open(os.path.join(plain, "cpu.weight"), "w") as fh:
            fh.write("untouched\n")
        hostile = [
            ("a record for another cgroup root",
             dict(record(path=decoy), cgroup_base=elsewhere),
             "recorded for the cgroup root %s, not CgroupBase=/sys/fs/cgroup" % elsewhere, decoy),
            ("a symbolic link on the way to the knob file",
             dict(record(path=os.path.join(link, "cpu.weight")), cgroup=link_rel),
             "a symbolic link on the way", os.path.join(target, "cpu.weight")),
            ("a value cpu.shares cannot hold", record(value="0"),
             "'0' is not a valid cpu.shares value", None),
            ("a knob file on a plain file system",
             dict(record(path=os.path.join(plain, "cpu.weight")), cgroup=plain_rel),
             "not a regular file on a cgroup file system", os.path.join(plain, "cpu.weight")),
        ]
        for what, rec, msg, untouched in hostile:
            d = sess.tmpdir("badst")
            with open(os.path.join(d, "state.json"), "w") as f:
                f.write(json.dumps({"version": 1, "knobs": [rec]}))
            r, took = restore_in(d, what, msg)
            check("knobs[0]" in r.stderr, "%s: the record is not named: %s" % (what, r.stderr))
            check(get_shares() == "2", "%s: cpu.shares changed to %s" % (what, get_shares()))
            if untouched:
                check(colo.readf(untouched) == "untouched", "%s: %s was written: %r"
                      % (what, untouched, colo.readf(untouched)))
            check(os.path.exists(os.path.join(d, "state.json")),
                  "%s: the refused record is not kept" % what)
            rows.append("%s: exit %d in %.2f s, nothing written" % (what, r.returncode, took))
        unlink_extra()

        # The daemon refuses to start on a bad state file, and changes nothing.
        d = sess.tmpdir("badst")
        with open(os.path.join(d, "state.json"), "w") as f:
            f.write(json.dumps({"version": 1, "knobs": [cpufreq]}))
        pol = sess.tmpdir("badst-pol")
        with open(os.path.join(pol, "victim.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nCPUWeight=1..100\n"
                    % cg.rel)
        conf = os.path.join(pol, "tailwarden.conf")
        with open(conf, "w") as f:
            f.write("[Controller]\nStateDir=%s\nMetrics=no\n" % d)
        try:
            r = subprocess.run([tw.TAILWARDEN, "run", "--config", conf, "--policies", pol],
                               capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise tw.TestFailure("run with a bad state file did not exit in 30 s")
        check(r.returncode not in (0, -6) and r.returncode > 0,
              "run with a bad state file exited %d: %s" % (r.returncode, r.stderr[-300:]))
        check("snapshot.cpus" in r.stderr, "run does not say what is wrong: %s" % r.stderr[-300:])
        check(get_shares() == "2", "run changed cpu.shares to %s" % get_shares())
        rows.append("run on a bad state file: exit %d" % r.returncode)

        # A FIFO as a policy file or as the config: refused at once, never a hang in open().
        fifos = sess.tmpdir("badst-fifo")
        for what, name, argv in (("a FIFO as a policy", "fifo.policy", ["check", "{}"]),
                                 ("a FIFO as the config", "fifo.conf",
                                  ["run", "--config", "{}", "--policies", pol])):
            fifo = os.path.join(fifos, name)
            os.mkfifo(fifo, 0o600)
            try:
                r = subprocess.run([tw.TAILWARDEN] + [a.replace("{}", fifo) for a in argv],
                                   capture_output=True, text=True, timeout=10)
            except subprocess.TimeoutExpired:
                raise tw.TestFailure("%s: tailwarden %s hung for 10 s" % (what, argv[0]))
            check(r.returncode == 1 and "not a regular file" in r.stderr,
                  "%s: exit %d: %s" % (what, r.returncode, r.stderr.strip()))
            rows.append("%s: %s exit %d" % (what, argv[0], r.returncode))

        # The good file does restore (the cases above fail for their fault, not for the setup).
        d = sess.tmpdir("badst")
        with open(os.path.join(d, "state.json"), "w") as f:
            f.write(json.dumps({"version": 1, "knobs": [record()]}))
        restore_in(d, "the good file", "", want_rc=0)
        check(get_shares() == "1024", "the good file did not restore cpu.shares: %s" % get_shares())
        return "%d hostile files refused, 0 knobs changed; the good one restored [%s]" % (
            len(rows), "; ".join(rows))


# Hooks whose absence the daemon survives while still seeing the hog: the
# scheduler's (run-queue waits come from the task iterator, which needs
# none of them), block requests and kernel locks (those signals go).
CONTENTION_HOOKS = ("sched_switch", "sched_wakeup", "sched_wakeup_new", "block_rq_issue",
                    "block_io_start", "block_bio_queue", "contention_begin", "contention_end")


def test_hook_missing():
    """Kernel hooks missing (simulated): said, worked around, still controlling; a vital one: refused."""
    def hide(*hooks):
        return dict(os.environ, TAILWARDEN_TEST_HIDE_TRACEPOINTS=",".join(hooks))

    def lines(text, what):
        return [line.split(what, 1)[1].strip() for line in text.splitlines() if what in line]

    with tw.Session(("unified", "cpu", "cpuacct"), tag="hook") as sess:
        rig, _, bursts = busy_rig(sess, "hook")
        try:
            # Reactive: the cut must come from a diagnosis without the hooks, not
            # from the default's floor, which holds the weight from the first verdict.
            rig.write_config(tag="hook", be_extra="Weights=reactive")
            orig = rig.knob_files()
            # 1. The contention hooks missing: said, and the hog is still cut.
            rig.start_tailwarden(env=hide(*CONTENTION_HOOKS))
            deadline = time.monotonic() + 30
            while rig.knob_files()["batch"] == orig["batch"] and time.monotonic() < deadline:
                time.sleep(0.2)
            cut = rig.knob_files()["batch"]
            alive = rig.tw.poll() is None
            rc = rig.stop_tailwarden()
            log = colo.readf(rig.runlog, "")
            sigs = lines(log, "contention signals:")
            check(alive, "tailwarden run died: %s" % log[-2000:])
            check(sigs and "block_rq_complete" in sigs[0] and "contention_begin" in sigs[0],
                  "the missing contention hooks were not named: %s" % sigs)
            check("sched:" not in sigs[0], "run-queue delay lost without the switch hooks, "
                  "which it does not need: %s" % sigs)
            check(cut != orig["batch"], "batch never cut in 30 s with the contention hooks missing "
                  "(target %d us)" % rig.target)
            check(rc == 0, "exit status %s after SIGTERM: %s" % (rc, log[-2000:]))
            check(rig.knob_files() == orig, "not restored: %s, originally %s"
                  % (rig.knob_files(), orig))
            # 2. No tcp_rcv_space_adjust: receive-stamped spans, said with what they miss.
            rig.start_tailwarden(env=hide("tcp_rcv_space_adjust"))
            time.sleep(3)
            alive = rig.tw.poll() is None
            rc2 = rig.stop_tailwarden()
            log = colo.readf(rig.runlog, "")
            mode = lines(log, "sensing mode:")
            check(alive and rc2 == 0, "without tcp_rcv_space_adjust: died or exit %s: %s"
                  % (rc2, log[-2000:]))
            check(mode and mode[0].startswith("receive") and "tcp_rcv_space_adjust" in mode[0],
                  "the fallback for tcp_rcv_space_adjust was not said: %s" % mode)
            check(rig.knob_files() == orig, "not restored: %s" % rig.knob_files())
        finally:
            bursts.stop()

        # 3. No inet_sock_set_state: connections cannot be told apart, no request sensing.
        t0 = time.monotonic()
        r = subprocess.run([tw.TAILWARDEN, "run", "--config", rig.conf, "--policies", rig.policies],
                           env=hide("inet_sock_set_state"), capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        refused = lines(r.stderr, "Failed to start sensing:")
        check(r.returncode != 0 and refused and "inet_sock_set_state" in refused[0],
              "without inet_sock_set_state: exit %d: %s" % (r.returncode, r.stderr.strip()[-500:]))
        check(rig.knob_files() == orig, "a refused start changed knobs: %s" % rig.knob_files())
        return ("%d contention hooks hidden: said (%s), batch cut (cpu.shares %s -> %s), restored; "
                "no tcp_rcv_space_adjust: %s; no inet_sock_set_state: exit %d in %.1f s (%s); 0 knobs "
                "left changed" % (len(CONTENTION_HOOKS), sigs[0][:90], orig["batch"]["cpu.shares"],
                                  cut["cpu.shares"], mode[0][:60], r.returncode, took, refused[0][:80]))


def wait_for(what, cond, timeout, proc=None, step=0.2):
    """Poll cond() until true; a dead daemon or the timeout fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise tw.TestFailure("%s: tailwarden run exited %s" % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise tw.TestFailure("%s: not within %.0f s" % (what, timeout))
        time.sleep(step)


def json_lines(path, settled=True):
    """Every line of a decision log file parsed; a line that is not JSON fails the test.
    settled=False: the daemon may be writing, a last line without its newline is skipped."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    if not settled and not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    out = []
    for n, line in enumerate(text.split("\n")[:-1], 1):
        try:
            out.append(json.loads(line))
        except ValueError:
            raise tw.TestFailure("%s:%d is not JSON: %r" % (path, n, line[:200]))
    check(text == "" or text.endswith("\n"), "%s ends in a partial line: %r" % (path, text[-80:]))
    return out


def add_config(rig, text):
    with open(rig.conf, "a") as f:
        f.write(text)


def stop_and_check_restored(rig, orig, what):
    rc = rig.stop_tailwarden()
    check(rc == 0, "%s: exit status %s after SIGTERM: %s" % (what, rc, colo.readf(rig.runlog, "")[-600:]))
    now = rig.knob_files()
    check(now == orig, "%s: knobs not restored: %s, originally %s" % (what, now, orig))


def test_log_rotation():
    """DecisionLogMaxSize=1K on a busy controller: rotated, bounded, every line JSON."""
    limit, rotations = 1024, 3
    with tw.Session(("unified", "cpu", "cpuacct"), tag="logrot") as sess:
        # The stream of decisions must not depend on the controller's own
        # dynamics: a bursting hog soon meets a controller that has learnt
        # where give-backs hurt, and holds (a CI run saw 2 rotations in 120 s).
        # A steady hog and a reload every RELOAD_S s do not settle: a reload
        # restores every knob and starts a fresh engine, which cuts the hog again;
        # the target at nginx's p99 alone, which the hog passes by far.
        rig, _, bursts = busy_rig(sess, "logrot", factor=1, bursting=False)
        try:
            rig.write_config(tag="logrot", be_extra="Weights=reactive")
            add_config(rig, "DecisionLogMaxSize=1K\n")
            orig = rig.knob_files()
            log, old = rig.decisions, rig.decisions + ".1"
            rig.start_tailwarden()
            inodes, longest, over, t0 = set(), 0, [], time.monotonic()
            reloads, next_reload = 0, t0 + RELOAD_S
            # Watch it: sizes at every poll, and the distinct files FILE.1 has been.
            while len(inodes) < rotations and time.monotonic() - t0 < 120:
                check(rig.tw.poll() is None, "tailwarden run exited: %s" % colo.readf(rig.runlog, "")[-600:])
                if time.monotonic() >= next_reload:
                    rig.tw.send_signal(signal.SIGHUP)
                    reloads, next_reload = reloads + 1, time.monotonic() + RELOAD_S
                for path in (log, old):
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    if path == old:
                        inodes.add(st.st_ino)
                    for d in json_lines(path, settled=False):
                        longest = max(longest, len(json.dumps(d, separators=(",", ":"))) + 1)
                    if st.st_size > limit:
                        over.append((path, st.st_size))
                time.sleep(0.1)
            check(len(inodes) >= rotations, "the decision log was rotated %d times in 120 s (%d reloads; "
                  "limit %d bytes; %d lines in FILE; target %d us); the log ends: %s"
                  % (len(inodes), reloads, limit, len(json_lines(log, settled=False)), rig.target,
                     colo.readf(rig.runlog, "")[-1500:]))
        finally:
            bursts.stop()
        stop_and_check_restored(rig, orig, "log_rotation")
        lines = json_lines(log) + json_lines(old)
        longest = max([longest] + [len(json.dumps(d, separators=(",", ":"))) + 1 for d in lines])
        # Over the limit only by a line longer than the limit itself.
        for path, size in over + [(log, os.path.getsize(log)), (old, os.path.getsize(old))]:
            check(size <= max(limit, longest), "%s was %d bytes, limit %d, longest line %d"
                  % (path, size, limit, longest))
        check(not os.path.exists(log + ".2"), "a %s.2 appeared" % log)
        check(all(d.get("service") in ("batch", "scan") for d in lines), "unexpected lines: %s" % lines)
        return ("%d rotations in %.0f s (%d reloads) at DecisionLogMaxSize=1K; FILE %d and FILE.1 %d bytes "
                "at the end, longest line %d bytes, %d polls over the limit; all %d lines JSON; knobs restored"
                % (len(inodes), time.monotonic() - t0, reloads, os.path.getsize(log) if os.path.exists(log) else 0,
                   os.path.getsize(old), longest, len(over), len(lines)))


def test_log_reopen():
    """The decision log moved aside, SIGHUP: new lines in a new file, none in the old."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="logreo") as sess:
        rig, _, bursts = busy_rig(sess, "logreo", factor=1.5)
        try:
            rig.write_config(tag="logreo")
            orig = rig.knob_files()
            log, aside = rig.decisions, rig.decisions + ".moved"
            rig.start_tailwarden()
            wait_for("a first decision", lambda: json_lines(log, settled=False), 30, rig.tw)
            os.rename(log, aside)
            t_hup = time.time()
            rig.tw.send_signal(signal.SIGHUP)
            wait_for("'reopened the decision log' in the log",
                     lambda: "reopened the decision log" in colo.readf(rig.runlog, ""), 10, rig.tw)
            n_aside = len(json_lines(aside))
            wait_for("a decision in the new file", lambda: json_lines(log, settled=False), 40, rig.tw)
            time.sleep(2)
            new = json_lines(log, settled=False)
            later = len(json_lines(aside))
            check(later == n_aside, "%d line(s) went to the moved file after the reopen" % (later - n_aside))
            check(all(d["ts"] >= t_hup - 0.01 for d in new), "the new file has lines from before the SIGHUP: %s"
                  % [d["ts"] for d in new])
            check(os.stat(log).st_ino != os.stat(aside).st_ino, "the same file")
        finally:
            bursts.stop()
        stop_and_check_restored(rig, orig, "log_reopen")
        return "%d line(s) in the moved file, %d in the new one after SIGHUP; knobs restored" % (later, len(new))


def test_log_full():
    """The decision log on a full tmpfs: lost lines counted, control goes on, restored on SIGTERM."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="logfull") as sess:
        rig, _, bursts = busy_rig(sess, "logfull", factor=1.5)
        try:
            rig.write_config(tag="logfull", be_extra="Weights=reactive")  # a stream of decisions
            mnt = sess.tmpdir("logfull-mnt")
            log = os.path.join(mnt, "decisions.jsonl")
            text = colo.readf(rig.conf).replace("DecisionLog=%s\n" % rig.decisions, "DecisionLog=%s\n" % log)
            with open(rig.conf, "w") as f:
                f.write(text)
            state = os.path.join(os.path.dirname(rig.conf), "state")
            orig = rig.knob_files()
            rig.runlog = os.path.join(os.path.dirname(rig.conf), "run.log")
            # A tmpfs of 64 KiB, filled, seen only by the daemon (a private mount namespace).
            script = ("mount -t tmpfs -o size=64k,mode=0700 tailwarden-test-full %s && "
                      "{ dd if=/dev/zero of=%s/fill bs=4k 2>/dev/null; true; } && "
                      "exec %s run --config %s --policies %s"
                      % (mnt, mnt, tw.TAILWARDEN, rig.conf, rig.policies))
            rig.tw = sess.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                                stdout=open(rig.runlog, "w"), stderr=subprocess.STDOUT)
            wait_for("tailwarden run starting", lambda: "running:" in colo.readf(rig.runlog, ""), 30, rig.tw)
            inside = "/proc/%d/root%s" % (rig.tw.pid, mnt)
            check(os.path.exists(os.path.join(inside, "fill")), "the tmpfs was not filled")
            check(not os.path.exists(os.path.join(mnt, "fill")), "the tmpfs is visible outside its namespace")
            wait_for("a failed decision log write in the log",
                     lambda: "Failed to write the decision log" in colo.readf(rig.runlog, ""), 40, rig.tw)

            def status():
                try:
                    with open(os.path.join(state, "status.json")) as f:
                        return json.load(f)
                except (OSError, ValueError):
                    return None

            lost = wait_for("decision_log_lost >= 3 in status.json",
                            lambda: (status() or {}).get("decision_log_lost", 0) >= 3 and status(), 40, rig.tw)
            changed = wait_for("a knob changed while the log is full",
                               lambda: rig.knob_files() != orig, 30, rig.tw)
            check(os.path.getsize(os.path.join(inside, "decisions.jsonl")) == 0,
                  "lines were written to the full file: %d bytes" % os.path.getsize(os.path.join(inside, "decisions.jsonl")))
            # Room again: the log is written again after its back-off.
            os.unlink(os.path.join(inside, "fill"))
            t_free = time.time()
            wait_for("'written again' in the log",
                     lambda: "is written again" in colo.readf(rig.runlog, ""), 60, rig.tw)
            lines = wait_for("lines in the log", lambda: json_lines(os.path.join(inside, "decisions.jsonl"),
                                                                   settled=False), 30, rig.tw)
            check(all(d["ts"] >= t_free - 0.01 for d in lines), "lines from before the room was made")
            said = [l for l in colo.readf(rig.runlog, "").splitlines() if "decision log" in l]
            check(len(said) <= 6, "the lost lines were said %d times: %s" % (len(said), said))
        finally:
            bursts.stop()
        stop_and_check_restored(rig, orig, "log_full")
        return ("%d lines lost while full (status.json), control went on (%s), written again after the room "
                "was made; %d log lines about it; knobs restored"
                % (lost["decision_log_lost"], "knobs changed" if changed else "?", len(said)))


def test_knob_fail_log():
    """A quota write failing every try: logged with back-off, and once when it recovers."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="kfail") as sess:
        web, be = sess.cgroup("web"), sess.cgroup("be")
        batch = sess.cgroup("be/batch")
        be_cpu = os.path.join(tw.CGROUP_FS, "cpu", be.rel.lstrip("/"))
        quota = os.path.join(tw.CGROUP_FS, "cpu", batch.rel.lstrip("/"), "cpu.cfs_quota_us")

        def set_parent(v):
            with open(os.path.join(be_cpu, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(v))

        # On v1 a child's quota above its parent's is EINVAL: be gets 1% of a CPU.
        # A quota is cut only while best-effort work together holds 5% of a CPU
        # or more, so a second hog outside be, with a weight only, holds it.
        set_parent(1000)
        other = sess.cgroup("other")
        nginx = sess.nginx(web, cpu=colo.SERVER_CPU)
        sess.loadgen("http", nginx.port, 2000, 3600, cpu=colo.CLIENT_CPU, background=True)
        for cg in (batch, other):
            sess.spawn(["stress-ng", "--cpu", "1", "--timeout", "300", "-q"], cgroup=cg,
                       cpu=colo.SERVER_CPU, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = sess.tmpdir("kfail")
        pol = os.path.join(d, "policies")
        os.makedirs(pol)
        with open(os.path.join(pol, "web.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n[Objective]\nPercentile=99\n"
                    "Target=1us\nMinRequests=100\nWindow=500ms\n" % web.rel)
        with open(os.path.join(pol, "batch.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nCPUQuota=5%%..max\n" % batch.rel)
        with open(os.path.join(pol, "other.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nCPUWeight=1..100\n"
                    % other.rel)
        conf = os.path.join(d, "tailwarden.conf")
        decisions = os.path.join(d, "decisions.jsonl")
        with open(conf, "w") as f:
            f.write("[Controller]\nPeriod=250ms\nStateDir=%s\nDecisionLog=%s\nMetrics=no\n"
                    % (os.path.join(d, "state"), decisions))
        orig = colo.readf(quota)
        runlog = os.path.join(d, "run.log")
        p = sess.spawn([tw.TAILWARDEN, "run", "--config", conf, "--policies", pol],
                       stdout=open(runlog, "w"), stderr=subprocess.STDOUT)

        def failed():
            return [x for x in json_lines(decisions, settled=False) if x["error"]]

        wait_for("9 failed quota writes", lambda: len(failed()) >= 9, 90, p)
        n_failed = len(failed())
        said = [l for l in colo.readf(runlog, "").splitlines() if "Failed to set" in l]
        check(said, "no failure was logged: %s" % colo.readf(runlog, "")[-800:])
        check(len(said) <= 1 + n_failed.bit_length(), "%d failures logged %d times: %s"
              % (n_failed, len(said), said))
        check(any("times in a row" in l for l in said), "no 'times in a row' line: %s" % said)
        check(colo.readf(quota) == orig, "the quota changed: %s" % colo.readf(quota))
        # Room in the parent: the next try succeeds, and that is said once.
        set_parent(-1)
        wait_for("'written again' in the log",
                 lambda: "written again after" in colo.readf(runlog, ""), 30, p)
        check(colo.readf(quota) != orig, "the quota was not written after the parent's limit went")
        rc = sess.stop(p, signal.SIGTERM, timeout=15)
        check(rc == 0, "exit status %s after SIGTERM" % rc)
        check(colo.readf(quota) == orig, "quota not restored: %s, originally %s" % (colo.readf(quota), orig))
        again = [l for l in colo.readf(runlog, "").splitlines() if "written again" in l]
        return ("%d failed writes logged in %d lines (%s); recovery said %d time(s); restored"
                % (n_failed, len(said), said[-1].split(": ", 1)[-1][:120], len(again)))


def test_sigpipe():
    """stderr a pipe whose reader went away: still controlling, restores on SIGTERM, exit 0."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="sigpipe") as sess:
        rig, _, bursts = busy_rig(sess, "sigpipe", factor=1.5)
        try:
            rig.write_config(tag="sigpipe")
            orig = rig.knob_files()
            argv = [tw.TAILWARDEN, "run", "--config", rig.conf, "--policies", rig.policies]
            p = sess.spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            seen, deadline = b"", time.monotonic() + 30
            while b"running:" not in seen:
                check(time.monotonic() < deadline and p.poll() is None,
                      "tailwarden run did not start: %s" % seen.decode(errors="replace"))
                seen += os.read(p.stderr.fileno(), 4096)
            p.stderr.close()  # the only reader: every later log line is EPIPE
            rig.tw = p
            wait_for("a knob changed (and logged) after the pipe closed",
                     lambda: rig.knob_files() != orig, 30, p)
            time.sleep(3)
            check(p.poll() is None, "tailwarden run died with the pipe closed: %s" % p.returncode)
            n = len(rig.decisions_list())
        finally:
            bursts.stop()
        rc = sess.stop(p, signal.SIGTERM, timeout=15)
        rig.tw = None
        check(rc == 0, "exit status %s after SIGTERM with stderr closed" % rc)
        check(rig.knob_files() == orig, "knobs not restored: %s, originally %s" % (rig.knob_files(), orig))
        return "kept running with stderr's reader gone (%d decisions), exit 0 on SIGTERM, knobs restored" % n


def test_admin_change():
    """kill -9, an administrator sets a weight we had cut: restore leaves it, says so, restores the rest."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="admin") as sess:
        rig, _, bursts = busy_rig(sess, "admin")
        try:
            rig.write_config(tag="admin")
            state = os.path.join(os.path.dirname(rig.conf), "state")
            orig = rig.knob_files()
            cgs = {"batch": rig.batch, "scan": rig.scan}

            def shares_of(name):
                return os.path.join(tw.CGROUP_FS, "cpu", cgs[name].rel.lstrip("/"), "cpu.shares")

            def cut_weight():
                """(name, written) of a best-effort cpu.weight record whose file holds what we wrote."""
                try:
                    with open(os.path.join(state, "state.json")) as f:
                        knobs = json.load(f)["knobs"]
                except (OSError, ValueError):
                    return None
                for k in knobs:
                    for name, cg in cgs.items():
                        if k["cgroup"] != cg.rel or k["knob"] != "cpu.weight":
                            continue
                        # The weight's file (cpu.idle, where the kernel has it, comes first).
                        for f0 in k["snapshot"]["files"]:
                            if f0["path"] == shares_of(name) and "written" in f0 and \
                                    f0["written"] == colo.readf(shares_of(name)):
                                return name, f0["written"]
                return None

            cut = None
            for attempt in range(3):
                rig.start_tailwarden()
                deadline = time.monotonic() + 45
                while cut_weight() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                rig.tw.kill()
                rig.tw.wait(10)
                rig.tw = None
                # Killed between a write and its record: try again (a restart keeps the originals).
                cut = cut_weight()
                if cut is not None:
                    break
                info("attempt %d: no weight cut and recorded; run log: %s"
                     % (attempt + 1, (colo.readf(rig.runlog) or "")[-500:]))
            check(cut is not None, "no best-effort weight was cut and recorded in 3 runs of 45 s")
        finally:
            bursts.stop()
        name, wrote = cut
        shares = shares_of(name)
        mine = "555" if wrote != "555" else "556"
        with open(shares, "w") as f:
            f.write(mine)
        info("the daemon wrote %s's cpu.shares %s (originally %s); the administrator writes %s"
             % (name, wrote, orig[name]["cpu.shares"], mine))
        r = restore(state)
        info("restore -> %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        check(r.returncode == 0, "restore exited %d: %s" % (r.returncode, r.stderr))
        said = [line.strip() for line in r.stdout.splitlines() if "left alone:" in line]
        check(len(said) == 1 and "cpu.weight of %s" % cgs[name].rel in said[0]
              and "changed by someone else since" in said[0] and mine in said[0],
              "restore does not say it left %s's weight alone: %s" % (name, r.stdout))
        check("left 1 alone" in r.stdout, "the summary does not count it: %s" % r.stdout)
        check(colo.readf(shares) == mine, "the administrator's cpu.shares %s became %s"
              % (mine, colo.readf(shares)))
        now = rig.knob_files()
        want = json.loads(json.dumps(orig))
        want[name]["cpu.shares"] = mine
        check(now == want, "after restore %s, want %s" % (now, want))
        check(not os.path.exists(os.path.join(state, "state.json")), "the state file is left behind")
        return "the daemon wrote %s's cpu.shares %s, the administrator %s: left alone and said so " \
               "(%s); every other knob back" % (name, wrote, mine, said[0][:100])


TESTS = [
    ("kill9_restore", test_kill9_restore),
    ("be_removed", test_be_removed),
    ("bad_state", test_bad_state),
    ("admin_change", test_admin_change),
    ("hook_missing", test_hook_missing),
    ("log_rotation", test_log_rotation),
    ("log_reopen", test_log_reopen),
    ("log_full", test_log_full),
    ("knob_fail_log", test_knob_fail_log),
    ("sigpipe", test_sigpipe),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
