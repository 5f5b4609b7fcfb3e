#!/usr/bin/python3
"""I/O scheduler tests: IOScheduler=bfq on the real disk of /.

I/O weight (blkio.bfq.weight, io.weight) acts only while a disk's scheduler
is bfq. Each test first puts the disk on a scheduler other than bfq (the
one it runs, when that is not bfq), and its cleanup puts the disk's
original scheduler back whatever happens. What a user would notice:

  no_key        a best-effort policy with IOWeight= and no IOScheduler=:
                `run` and `status` say I/O weight has no effect on the disk
                (the log names IOScheduler=bfq); the scheduler is left as it is
  switch        IOScheduler=bfq: the scheduler file shows [bfq] while the
                daemon runs, the log, `status` (text and --json) and
                /metrics say it switched, the state file has the record;
                SIGTERM puts the original back
  kill9         kill -9 while switched: the disk stays on bfq, then
                `tailwarden restore` puts the original back and says so
  admin_change  kill -9 while switched, then someone picks another
                scheduler by hand: `tailwarden restore` leaves it, says so
  idling        IOScheduler=bfq: the log says that bfq idles, with the
                disk's own slice_idle and timeout_sync, and names the
                tunable; a disk an operator put on bfq with slice_idle 0:
                no such line, and tailwarden leaves slice_idle at 0
  dry_run       DryRun=yes: says what it would switch, switches nothing
  check_cfq     `tailwarden check` refuses IOScheduler=cfq with FILE:LINE,
                and a device name that is a path

Usage: test_iosched.py [-v] [TEST...]   (as root). Skips (with the reason)
only when no block device offers bfq.
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
from twtest import check  # noqa: E402


def sched_path(dev):
    return "/sys/block/%s/queue/scheduler" % dev


def read_sched(dev):
    """(the scheduler in use, those offered)."""
    with open(sched_path(dev)) as f:
        names = f.read().split()
    cur = [n[1:-1] for n in names if n.startswith("[")]
    return (cur[0] if cur else None), [n.strip("[]") for n in names]


def write_sched(dev, name):
    with open(sched_path(dev), "w") as f:
        f.write(name)


def root_disk():
    """The whole disk that holds /, else any disk offering bfq; None if none does."""
    cands = []
    st = os.stat("/")
    link = "/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    if os.path.exists(link):
        real = os.path.realpath(link)
        if os.path.exists(os.path.join(real, "partition")):
            real = os.path.dirname(real)
        cands.append(os.path.basename(real))
    cands += sorted(d for d in os.listdir("/sys/block")
                    if not d.startswith(("loop", "ram", "zram")))
    for d in cands:
        if os.path.exists(sched_path(d)) and "bfq" in read_sched(d)[1]:
            return d
    return None


def info(msg):
    if tw.verbose():
        tw.log(msg)


class Rig:
    """A best-effort cgroup with an IOWeight= policy, the disk on a non-bfq
    scheduler; cleanup puts the disk's scheduler back."""

    def __init__(self, sess, dev):
        self.sess, self.dev = sess, dev
        self.orig, offered = read_sched(dev)
        sess.on_cleanup(self.put_back)
        if self.orig == "bfq":
            other = next(n for n in ("mq-deadline", "none", "kyber") if n in offered)
            write_sched(dev, other)
        self.start = read_sched(dev)[0]
        self.be = sess.cgroup("scan")
        sess.sleeper(self.be)
        self.dir = sess.tmpdir("iosched")
        self.pol = os.path.join(self.dir, "policies")
        os.makedirs(self.pol)
        with open(os.path.join(self.pol, "scan.policy"), "w") as f:
            f.write("[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\nIOWeight=10..100\n" % self.be.rel)
        self.state = os.path.join(self.dir, "state")
        self.tw = None

    def put_back(self):
        if self.tw and self.tw.poll() is None:
            self.sess.stop(self.tw, signal.SIGTERM, timeout=10)
        if read_sched(self.dev)[0] != self.orig:
            write_sched(self.dev, self.orig)

    def config(self, extra="", metrics="no"):
        self.conf = os.path.join(self.dir, "tailwarden.conf")
        with open(self.conf, "w") as f:
            f.write("[Controller]\nPeriod=200ms\nStateDir=%s\nDecisionLog=%s\nMetrics=%s\n%s"
                    % (self.state, os.path.join(self.dir, "decisions.jsonl"), metrics, extra))
        return self.conf

    def status(self):
        """`tailwarden status` (text) and `--json`, as a user would run them."""
        argv = [tw.TAILWARDEN, "status", "--config", self.conf]
        text = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        js = subprocess.run(argv + ["--json"], capture_output=True, text=True, timeout=30)
        check(text.returncode == 0 and js.returncode == 0,
              "status exited %d/%d: %s" % (text.returncode, js.returncode, text.stderr + js.stderr))
        info(text.stdout)
        return text.stdout, json.loads(js.stdout)

    def run(self, extra="", metrics="no"):
        self.config(extra, metrics)
        self.log = os.path.join(self.dir, "run.log")
        self.tw = self.sess.spawn([tw.TAILWARDEN, "run", "--config", self.conf, "--policies", self.pol],
                                  stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "running:" not in self.text():
            if self.tw.poll() is not None or time.monotonic() > deadline:
                raise tw.SetupError("tailwarden run did not start: %s" % self.text())
            time.sleep(0.1)
        info(self.text())

    def text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        rc = self.sess.stop(self.tw, sig, timeout=15)
        self.tw = None
        return rc

    def restore(self):
        p = subprocess.run([tw.TAILWARDEN, "restore", "--config", self.conf],
                           capture_output=True, text=True, timeout=30)
        info("restore: rc %d\n%s%s" % (p.returncode, p.stdout, p.stderr))
        return p


def needs_disk():
    dev = root_disk()
    if not dev:
        raise tw.Skip("no block device here offers the bfq scheduler")
    return dev


def test_no_key():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        rig.run()
        line = "I/O weight has no effect on %s: its scheduler is %s; set IOScheduler=bfq" % (dev, rig.start)
        check(line in rig.text(), "no line %r in the log:\n%s" % (line, rig.text()))
        check(read_sched(dev)[0] == rig.start, "the scheduler changed without IOScheduler=: %s" % read_sched(dev)[0])
        text, js = rig.status()
        shown = "disks: %s %s, I/O weight has no effect" % (dev, rig.start)
        check(shown in text, "status does not show %r:\n%s" % (shown, text))
        check({"device": dev, "scheduler": rig.start, "original": None, "io_weight_acts": False}
              in js["disks"], "status --json disks: %s" % js["disks"])
        check(rig.stop() == 0, "run did not exit 0 on SIGTERM:\n%s" % rig.text())
        check(read_sched(dev)[0] == rig.start, "the scheduler changed at exit: %s" % read_sched(dev)[0])
        return "%s stays %s; said so" % (dev, rig.start)


def test_switch():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        port = tw.free_port()
        rig.run("IOScheduler=bfq\n", metrics="127.0.0.1:%d" % port)
        with open(sched_path(dev)) as f:
            shown = f.read().strip()
        check("[bfq]" in shown, "%s shows %r while the daemon runs" % (sched_path(dev), shown))
        # status and /metrics say so.
        text, js = rig.status()
        shown = "disks: %s bfq (switched by tailwarden, was %s), I/O weight acts" % (dev, rig.start)
        check(shown in text, "status does not show %r:\n%s" % (shown, text))
        check({"device": dev, "scheduler": "bfq", "original": rig.start, "io_weight_acts": True}
              in js["disks"], "status --json disks: %s" % js["disks"])
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            series = [l for l in r.read().decode().splitlines()
                      if l.startswith("tailwarden_disk_io_weight_effective{")]
        want = 'tailwarden_disk_io_weight_effective{device="%s",scheduler="bfq",switched="true"} 1' % dev
        check(want in series, "/metrics has %s, not %r" % (series, want))
        line = "switched the I/O scheduler of %s from %s to bfq" % (dev, rig.start)
        check(line in rig.text(), "no line %r in the log:\n%s" % (line, rig.text()))
        with open(os.path.join(rig.state, "state.json")) as f:
            recs = [k for k in json.load(f)["knobs"] if k.get("knob") == "io.scheduler"]
        check(recs == [{"knob": "io.scheduler", "device": dev, "original": rig.start, "written": "bfq"}],
              "state file records: %s" % recs)
        # A reload keeps the disk on bfq.
        rig.tw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reloaded:" not in rig.text() and time.monotonic() < deadline:
            time.sleep(0.1)
        check("reloaded:" in rig.text(), "no reload in the log:\n%s" % rig.text())
        check(read_sched(dev)[0] == "bfq", "after SIGHUP the scheduler is %s" % read_sched(dev)[0])
        check(rig.stop() == 0, "run did not exit 0 on SIGTERM:\n%s" % rig.text())
        check(read_sched(dev)[0] == rig.start,
              "after SIGTERM the scheduler is %s, not %s" % (read_sched(dev)[0], rig.start))
        check(not os.path.exists(os.path.join(rig.state, "state.json")), "state file left after SIGTERM")
        return "%s: %s -> [bfq] while running -> %s after SIGTERM" % (dev, rig.start, read_sched(dev)[0])


def iosched_tunable(dev, name):
    with open("/sys/block/%s/queue/iosched/%s" % (dev, name)) as f:
        return int(f.read())


def test_idling():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        # Run first at cleanup: a bfq this test tuned is left for a fresh one.
        sess.on_cleanup(lambda: read_sched(dev)[0] == "bfq" and write_sched(dev, rig.start))
        rig.run("IOScheduler=bfq\n")
        idle, slice_ms = iosched_tunable(dev, "slice_idle_us"), iosched_tunable(dev, "timeout_sync")
        check(idle > 0, "bfq's default slice_idle_us on %s is %d" % (dev, idle))
        line = ("I/O weight on %s: bfq idles up to %d us for a queue that runs dry (slice_idle)"
                % (dev, idle))
        check(line in rig.text(), "no line %r in the log:\n%s" % (line, rig.text()))
        for part in ("(timeout_sync %d ms)" % slice_ms,
                     "echo 0 > /sys/block/%s/queue/iosched/slice_idle" % dev):
            check(part in rig.text(), "the idling line lacks %r:\n%s" % (part, rig.text()))
        check(rig.stop() == 0, "run did not exit 0 on SIGTERM:\n%s" % rig.text())
        # The operator's way: bfq with its idling off before tailwarden starts.
        write_sched(dev, "bfq")
        with open("/sys/block/%s/queue/iosched/slice_idle" % dev, "w") as f:
            f.write("0")
        rig.run("IOScheduler=bfq\n")
        check("I/O weight can act on %s: its scheduler is bfq" % dev in rig.text(),
              "no line that I/O weight acts:\n%s" % rig.text())
        check("bfq idles" not in rig.text(), "an idling line with slice_idle 0:\n%s" % rig.text())
        check(iosched_tunable(dev, "slice_idle_us") == 0,
              "slice_idle_us is %d while tailwarden runs" % iosched_tunable(dev, "slice_idle_us"))
        check(rig.stop() == 0, "run did not exit 0 on SIGTERM:\n%s" % rig.text())
        write_sched(dev, rig.start)
        return "%s: said bfq idles %d us (timeout_sync %d ms); silent at 0" % (dev, idle, slice_ms)


def test_kill9():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        rig.run("IOScheduler=bfq\n")
        rig.stop(signal.SIGKILL)
        check(read_sched(dev)[0] == "bfq", "after kill -9 the scheduler is %s" % read_sched(dev)[0])
        p = rig.restore()
        check(p.returncode == 0, "restore exited %d: %s" % (p.returncode, p.stderr))
        check("/sys/block/%s/queue/scheduler: %s" % (dev, rig.start) in p.stdout,
              "restore did not say it: %s" % p.stdout)
        check(read_sched(dev)[0] == rig.start,
              "after restore the scheduler is %s, not %s" % (read_sched(dev)[0], rig.start))
        return "kill -9 left bfq; restore put back %s" % rig.start


def test_admin_change():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        offered = read_sched(dev)[1]
        other = next((n for n in offered if n not in ("bfq", rig.start)), None)
        if not other:
            raise tw.Skip("%s offers no third scheduler to pick by hand" % dev)
        rig.run("IOScheduler=bfq\n")
        rig.stop(signal.SIGKILL)
        write_sched(dev, other)
        p = rig.restore()
        check("io.scheduler of %s: left alone: changed by someone else since" % dev in p.stdout,
              "restore did not say it left %s alone: %s %s" % (dev, p.stdout, p.stderr))
        check(read_sched(dev)[0] == other,
              "restore overwrote the hand-picked %s with %s" % (other, read_sched(dev)[0]))
        return "hand-picked %s left alone" % other


def test_dry_run():
    dev = needs_disk()
    with tw.Session(hierarchies=("unified", "cpu", "blkio")) as sess:
        rig = Rig(sess, dev)
        rig.run("IOScheduler=bfq\nDryRun=yes\n")
        line = "dry-run: would switch the I/O scheduler of %s from %s to bfq" % (dev, rig.start)
        check(line in rig.text(), "no line %r in the log:\n%s" % (line, rig.text()))
        time.sleep(0.5)
        check(read_sched(dev)[0] == rig.start, "dry-run switched the scheduler to %s" % read_sched(dev)[0])
        check(rig.stop() == 0, "run did not exit 0 on SIGTERM:\n%s" % rig.text())
        check(read_sched(dev)[0] == rig.start, "dry-run changed the scheduler")
        return "%s stays %s" % (dev, rig.start)


def test_check_cfq():
    with tw.Session() as sess:
        d = sess.tmpdir("iosched")
        conf = os.path.join(d, "tw.conf")
        with open(conf, "w") as f:
            f.write("[Controller]\nStateDir=%s\nIOScheduler=cfq\nIOSchedulerDevices=vda ../x\n" % d)
        p = subprocess.run([tw.TAILWARDEN, "check", conf], capture_output=True, text=True, timeout=30)
        info(p.stderr)
        check(p.returncode != 0, "check accepted IOScheduler=cfq")
        check("%s:3: IOScheduler=cfq: 'cfq' is not supported; only bfq" % conf in p.stderr,
              "no FILE:LINE error for IOScheduler=cfq: %s" % p.stderr)
        check("%s:4: IOSchedulerDevices=vda ../x: '../x' is not a block device's name" % conf in p.stderr,
              "no FILE:LINE error for the device name: %s" % p.stderr)
        return "refused with FILE:LINE"


TESTS = [
    ("no_key", test_no_key),
    ("switch", test_switch),
    ("idling", test_idling),
    ("kill9", test_kill9),
    ("admin_change", test_admin_change),
    ("dry_run", test_dry_run),
    ("check_cfq", test_check_cfq),
]


def prepare():
    if not os.access(tw.TAILWARDEN, os.X_OK):
        return "%s is not built (make)" % tw.TAILWARDEN
    return None


if __name__ == "__main__":
    sys.exit(tw.main(__doc__, TESTS, sys.argv[1:], "switches a disk's scheduler", prepare=prepare))
