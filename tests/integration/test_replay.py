#!/usr/bin/python3
"""Integration tests of `tailwarden record` and `tailwarden replay`.

nginx (latency-critical) and `stress-ng --cpu` (best-effort) share CPU 0;
the open-loop generator on CPU 1 drives nginx. `record` runs beside
`run --dry-run` with the same config and policies; `replay` of the
recording must give the decisions the dry run logged (same windows, knobs,
values), byte for byte the same output twice, and on a truncated or
corrupt copy a non-zero exit, the byte offset, and the decisions before it.

Usage: test_replay.py [-v] [TEST...]   (as root; prints PASS/FAIL/SKIP per
test and "N passed, N failed, N skipped"; exits 1 when a test failed).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check, TestFailure  # noqa: E402

SERVER_CPU = 0
CLIENT_CPU = 1
RATE = 8000             # req/s: the hog multiplies nginx's p99 here (test_control.py)
HOGS = 2
PERIOD = "500ms"
PERIOD_S = 0.5
WINDOW = "1s"
TARGET_US = 20          # nginx misses it by far beside the hog: every loaded window is a
                        # violation, and weight cuts are at their floor factor (1/16)
LOAD_S = 10             # seconds of load beside the hog
START_QUOTA_US = 90000  # the hog's cpu.cfs_quota_us (of 100000): quota cuts halve a known value


def info(msg):
    if tw.verbose():
        tw.log(msg)


def wait_for(proc, logf, text, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        with open(logf) as f:
            out = f.read()
        if text in out:
            return
        check(proc.poll() is None, "%s exited %s: %s" % (what, proc.returncode, out))
        if time.monotonic() > deadline:
            raise TestFailure("%s not ready after %d s: %s" % (what, timeout, out))
        time.sleep(0.1)


def replay(rec, pol, json_out=True):
    argv = [tw.TAILWARDEN, "replay", rec, "--policies", pol] + (["--json"] if json_out else [])
    return subprocess.run(argv, capture_output=True, timeout=60)


def decisions_of(out):
    """The decision objects and the summary of `replay --json` output."""
    ds, summary = [], None
    for line in out.decode().splitlines():
        o = json.loads(line)
        if "summary" in o:
            summary = o["summary"]
        else:
            ds.append(o)
    return ds, summary


def key(d):
    return (d["service"], d["knob"], d["old"], d["new"])


def damaged(src, dst, how, at):
    with open(src, "rb") as f:
        data = bytearray(f.read())
    if how == "truncated":
        data = data[:at]
    else:
        for i in range(at, min(at + 16, len(data))):
            data[i] ^= 0x5a
    with open(dst, "wb") as f:
        f.write(data)


def test_record_replay():
    """A recording beside a dry run replays to its decisions; damage is reported by byte."""
    with tw.Session(("unified", "cpu", "cpuacct"), tag="replay") as sess:
        web, batch = sess.cgroup("web"), sess.cgroup("batch")
        nginx = sess.nginx(web, cpu=SERVER_CPU)
        with open(os.path.join(tw.CGROUP_FS, "cpu", batch.rel.lstrip("/"), "cpu.cfs_quota_us"), "w") as f:
            f.write(str(START_QUOTA_US))
        d = sess.tmpdir("replay")
        pol = os.path.join(d, "policies")
        os.makedirs(pol)
        with open(os.path.join(pol, "web.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=latency-critical\n"
                    "[Objective]\nPercentile=99\nTarget=%dus\nMinRequests=200\nWindow=%s\n"
                    % (web.rel, TARGET_US, WINDOW))
        with open(os.path.join(pol, "batch.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n"
                    "[Limits]\nCPUWeight=1..100\nCPUQuota=5%%..max\n" % batch.rel)
        conf = os.path.join(d, "tailwarden.conf")
        decisions = os.path.join(d, "decisions.jsonl")
        with open(conf, "w") as f:
            f.write("[Controller]\nPeriod=%s\nStateDir=%s\nDecisionLog=%s\nDryRun=yes\n"
                    % (PERIOD, os.path.join(d, "state"), decisions))
        rec = os.path.join(d, "rec.jsonl.gz")
        rec_log, run_log = os.path.join(d, "record.log"), os.path.join(d, "run.log")

        # Idle first: the ticks only one of the two saw decide nothing.
        with open(rec_log, "w") as lf:
            recorder = sess.spawn([tw.TAILWARDEN, "record", "--out", rec, "--config", conf,
                                   "--cgroup", web.rel, "--cgroup", batch.rel],
                                  stdout=lf, stderr=subprocess.STDOUT)
        wait_for(recorder, rec_log, "recording to", "tailwarden record")
        with open(run_log, "w") as lf:
            runner = sess.spawn([tw.TAILWARDEN, "run", "--config", conf, "--policies", pol],
                                stdout=lf, stderr=subprocess.STDOUT)
        wait_for(runner, run_log, "running:", "tailwarden run --dry-run")
        time.sleep(2 * PERIOD_S)
        hog = sess.spawn(["stress-ng", "--cpu", str(HOGS), "--timeout", "120", "-q"],
                         cgroup=batch, cpu=SERVER_CPU,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        r = sess.loadgen("http", nginx.port, RATE, LOAD_S, cpu=CLIENT_CPU)
        check(r["errors"] == 0 and r["completed"] > 0, "loadgen errors: %s" % r)
        sess.kill_cgroup(batch)
        hog.wait(5)
        # Idle again for a few windows, then stop both.
        time.sleep(4 * PERIOD_S)
        sess.stop(runner, signal.SIGTERM, timeout=15)
        sess.stop(recorder, signal.SIGTERM, timeout=15)
        check(recorder.returncode == 0, "record exited %s: %s" % (recorder.returncode,
                                                                  open(rec_log).read()))
        with open(decisions) as f:
            dry = [json.loads(l) for l in f if l.strip()]
        check(len(dry) >= 3, "the dry run logged %d decisions: %s" % (len(dry), dry))

        # replay: the dry run's decisions, at the same ticks.
        t0 = time.monotonic()
        a = replay(rec, pol)
        took = time.monotonic() - t0
        check(a.returncode == 0, "replay exited %d: %s" % (a.returncode, a.stderr.decode()))
        got, summary = decisions_of(a.stdout)
        info("dry run: %s" % [key(x) for x in dry])
        info("replay:  %s" % [key(x) for x in got])
        check([key(x) for x in got] == [key(x) for x in dry],
              "replay decided %s, the dry run %s" % ([key(x) for x in got], [key(x) for x in dry]))
        late = [(x["ts"], y["ts"]) for x, y in zip(got, dry) if abs(x["ts"] - y["ts"]) > PERIOD_S / 2]
        check(not late, "decisions at other ticks (replay, dry run): %s" % late)
        same_reason = sum(x["reason"] == y["reason"] for x, y in zip(got, dry))
        web_s, batch_s = summary["services"]["web"], summary["services"]["batch"]
        check(web_s["windows_over_target"] >= LOAD_S / 1.0 - 3,
              "only %d windows over target in %d s of load: %s" % (web_s["windows_over_target"],
                                                                  LOAD_S, summary))
        check(sum(batch_s["changes"].values()) == len(dry) and batch_s["throttled_s"] > 0,
              "summary: %s" % summary)

        # Deterministic: the same bytes twice, as JSON and as text.
        b = replay(rec, pol)
        check(a.stdout == b.stdout, "two replays differ as JSON")
        t1, t2 = replay(rec, pol, json_out=False), replay(rec, pol, json_out=False)
        check(t1.returncode == 0 and t1.stdout == t2.stdout, "two replays differ as text")
        check(b"summary:" in t1.stdout and b"over target" in t1.stdout,
              "text output: %s" % t1.stdout.decode()[-500:])

        # Damaged copies: non-zero, the byte offset, and the decisions read before it.
        size = os.path.getsize(rec)
        notes = []
        # Half-way and three quarters through the file: in the loaded
        # phase, which has most of the bytes and all of the decisions.
        for how, at in (("truncated", size // 2), ("corrupt", size * 3 // 4)):
            bad = os.path.join(d, "%s.jsonl.gz" % how)
            damaged(rec, bad, how, at)
            r = replay(bad, pol)
            err = r.stderr.decode()
            check(r.returncode != 0, "replay of a %s copy exited 0" % how)
            m = re.search(r"byte (\d+)", err)
            check(m and bad in err, "replay of a %s copy: no file and byte offset in %r" % (how, err))
            part, psum = decisions_of(r.stdout)
            check(len(part) >= 1 and [key(x) for x in part] == [key(x) for x in got[:len(part)]],
                  "a %s copy: decisions %s, the whole recording's begin %s"
                  % (how, [key(x) for x in part], [key(x) for x in got]))
            check(psum and psum["error"], "a %s copy: no error in the summary: %s" % (how, psum))
            info("%s copy: %s; %d decisions before it" % (how, err.strip(), len(part)))
            notes.append("%s: %d of %d decisions" % (how, len(part), len(got)))
        return ("%d decisions, the dry run's, at the same ticks (%d with the same reason); "
                "replay %.2f s; %d bytes recorded; web %d of %d windows over target; damaged "
                "copies: %s" % (len(got), same_reason, took, size, web_s["windows_over_target"],
                                web_s["windows"], ", ".join(notes)))


TESTS = [
    ("record_replay", test_record_replay),
]


def main(argv):
    def prepare():
        if not os.access(tw.TAILWARDEN, os.X_OK):
            return "%s not built (run make)" % tw.TAILWARDEN
        if not shutil.which("stress-ng"):
            return "stress-ng not installed (make deps)"
        return None

    return tw.main(__doc__, TESTS, argv, "BPF, cgroups", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
