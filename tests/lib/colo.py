"""A co-location rig shared by `make demo` and the co-location benchmark.

A latency-critical nginx (cgroup "web", CPU 0; / a small static page,
/heavy/page one that nginx inflates from gzip for every request) under
open-loop load from CPU 1, best-effort work beside it on CPU 0: a CPU hog (stress-ng, cgroup
"batch") and a disk reader (fio, cgroup "scan"), and `tailwarden run` with a
policy for each. Latency references are the client's kernel receive times
(loadgen's rx latency), never the client's own wake-up.
"""

import json
import os
import shutil
import re
import signal
import subprocess
import time

import twtest as tw

SERVER_CPU, CLIENT_CPU = 0, 1
# Every CPU this process may use, as it started: tailwarden runs on them all, as
# a service would, even when the benchmark pins itself to the client's CPU.
ALL_CPUS = frozenset(os.sched_getaffinity(0))
PERIOD = "500ms"
# Calibration: (offered req/s, stress-ng --cpu workers), tried in order until
# the hog raises nginx's p99 `separation`-fold (hosts of this kind differ by 10x).
SETTINGS = ((8000, 2), (8000, 4), (4000, 4), (12000, 4))
# /heavy/page: KiB that nginx inflates for every request (the co-location
# benchmark's overload: a request that costs nginx more CPU than its client).
HEAVY_KIB = 32
HEAVY_PATH = "/heavy/page"
# The reasons of Weights=floor's decisions that, once a service's own load fell
# back within the CPU, end the yield rather than cut best-effort work: the floor
# coming back, the yield moving (test_control's own_load, the benchmark's scenario 5).
FLOOR_BACK = ("(Weights=floor: a latency-critical service serves", "(Weights=floor yields: ")


def readf(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def fmt_us(us):
    if us is None:
        return "-"
    return "%.0fus" % us if us < 1000 else "%.2fms" % (us / 1000)


def pct(values, q):
    """Nearest-rank percentile (as loadgen computes it); None when empty."""
    if not values:
        return None
    v = sorted(values)
    tenths = int(round(q * 10))     # whole arithmetic: 99 and 99.9 both exact
    return v[max(0, -(-len(v) * tenths // 1000) - 1)]


def read_dump(path, start_unix):
    """(unix time the request was due, kernel-receive latency in us) from loadgen --dump."""
    return [(due, rx) for due, _, rx in read_dump_times(path, start_unix)]


def read_dump_sent(path, start_unix):
    """(unix time the request was written, kernel-receive latency in us) from loadgen
    --dump: due time plus the wait in the client's queue (latency from due minus
    latency from the write). In an overload the client's queue holds requests past
    their due time, and those due in its last seconds are never sent: grouped by due
    time, the last seconds of a step would hold none of them."""
    return [(sent, rx) for _, sent, rx in read_dump_times(path, start_unix)]


def read_dump_times(path, start_unix):
    """(unix time due, unix time written, kernel-receive latency in us) of each
    request in a loadgen --dump (read_dump(), read_dump_sent())."""
    out = []
    with open(path) as f:
        for line in f:
            lat, slat, due_ns, rx_ns = (int(x) for x in line.split())
            out.append((start_unix + due_ns / 1e9, start_unix + (due_ns + slat - lat) / 1e9,
                        rx_ns / 1e3))
    return out


def per_second(reqs, t0, seconds, q=99):
    """The q-th percentile (us) of the requests due in each second [t0+s, t0+s+1)."""
    buckets = [[] for _ in range(seconds)]
    for t, lat in reqs:
        s = int(t - t0)
        if 0 <= s < seconds:
            buckets[s].append(lat)
    return [pct(b, q) for b in buckets]


def seconds_sorted(dump, start_unix, seconds, q=99):
    """per_second() of a loadgen --dump, its empty seconds left out, sorted."""
    return sorted(p for p in per_second(read_dump(dump, start_unix), start_unix, seconds, q)
                  if p is not None)


def disk_of(path):
    """The whole disk (name in /sys/block) holding path, or None."""
    st = os.stat(path)
    link = "/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    if not os.path.exists(link):
        return None
    real = os.path.realpath(link)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    name = os.path.basename(real)
    return name if os.path.exists("/sys/block/%s/queue/scheduler" % name) else None


def scheduler(dev):
    """The I/O scheduler dev runs now (the bracketed name), or None."""
    text = readf("/sys/block/%s/queue/scheduler" % dev, "") if dev else ""
    cur = [n[1:-1] for n in text.split() if n.startswith("[")]
    return cur[0] if cur else None


def set_scheduler(dev, name):
    with open("/sys/block/%s/queue/scheduler" % dev, "w") as f:
        f.write(name)


def bfq_idle(dev, value=None):
    """bfq's slice_idle (ms) on dev, the idling that lets a sparse reader wait a
    whole slice behind another cgroup's reader: read, or written when value is
    given. None when dev does not run bfq. The tunable lives as long as the
    scheduler: switching away and back sets its default again."""
    path = "/sys/block/%s/queue/iosched/slice_idle" % dev
    if scheduler(dev) != "bfq" or not os.path.exists(path):
        return None
    if value is not None:
        with open(path, "w") as f:
            f.write(str(value))
    return int(readf(path, "-1"))


class Rig:
    """The cgroups, the server, the antagonists and tailwarden of one session."""

    def __init__(self, sess, workdir):
        self.sess, self.dir = sess, workdir
        self.web = sess.cgroup("web")
        self.batch = sess.cgroup("batch")
        self.scan = sess.cgroup("scan")
        # /disk/page: 64 KiB nginx reads from the real disk (O_DIRECT, one read)
        # on every request, written by layout_fio().
        self.disk_dir = os.path.join(tw.REPO, ".output", "colo-disk")
        self.nginx = sess.nginx(self.web, cpu=SERVER_CPU, disk_dir=self.disk_dir,
                                heavy_kib=HEAVY_KIB)
        self.rate, self.hogs = SETTINGS[0]
        self.hog = self.fio = self.tw = None
        self.fio_data = os.path.join(tw.REPO, ".output", "colo-fio.data")

    def cpu_ns(self, cg):
        return int(readf(os.path.join(tw.CGROUP_FS, "cpuacct", cg.rel.lstrip("/"), "cpuacct.usage"),
                         "0"))

    # -- antagonists -----------------------------------------------------------
    def start_hog(self, seconds=600):
        """stress-ng --cpu in batch on the server's CPU; ends by itself after `seconds`."""
        self.hog_out = os.path.join(self.dir, "stress-ng.out")
        self.hog = self.sess.spawn(["stress-ng", "--cpu", str(self.hogs), "--timeout",
                                    "%ds" % seconds, "--metrics-brief"],
                                   cgroup=self.batch, cpu=SERVER_CPU,
                                   stdout=open(self.hog_out, "w"), stderr=subprocess.STDOUT)

    def hog_bogo_ops(self, timeout=30):
        """Wait for a hog started with a timeout; its bogo ops per second (real time)."""
        self.hog.wait(timeout)
        self.hog = None
        m = re.search(r"\bcpu\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)", readf(self.hog_out, ""))
        return float(m.group(3)) if m else None

    def hog_pause(self, paused):
        """Stop (SIGSTOP) or continue (SIGCONT) every process of the hog: a bursting hog."""
        for pid in self.batch.pids(recursive=True):
            try:
                os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)
            except ProcessLookupError:
                pass

    def restart_hog(self, seconds=600):
        """The hog as a restarted service: stopped, its cgroup removed and made again
        (a new cgroup, as a restarted systemd unit gets), started again."""
        self.stop_hog()
        self.sess.kill_cgroup(self.batch)
        for p in reversed(self.batch.paths):
            for _ in range(50):
                try:
                    os.rmdir(p)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        for p in self.batch.paths:
            os.makedirs(p, exist_ok=True)
        self.start_hog(seconds)

    def stop_hog(self):
        if self.hog:
            self.hog_pause(False)
            self.sess.kill_cgroup(self.batch)
            self.hog.wait(5)
            self.hog = None

    def start_fio(self, seconds=600, cpu=SERVER_CPU):
        """Direct 4 KiB random reads, 16 deep, from a file on the real disk (not /tmp,
        which may be memory): the page cache cannot absorb them."""
        self.fio_out = os.path.join(self.dir, "fio.json")
        self.fio = self.sess.spawn(["fio", "--name=scan", "--filename=" + self.fio_data,
                                    "--size=512M", "--rw=randread", "--bs=4k", "--direct=1",
                                    "--ioengine=libaio", "--iodepth=16", "--time_based",
                                    "--runtime=%d" % seconds, "--output-format=json",
                                    "--output=" + self.fio_out],
                                   cgroup=self.scan, cpu=cpu,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def fio_mbps(self, timeout=60):
        """Wait for a fio started with a runtime; its read MB/s."""
        self.fio.wait(timeout)
        self.fio = None
        try:
            with open(self.fio_out) as f:
                j = json.load(f)
            return j["jobs"][0]["read"]["bw_bytes"] / 1e6
        except (OSError, ValueError, KeyError, IndexError):
            return None

    def stop_fio(self):
        if self.fio:
            self.sess.kill_cgroup(self.scan)
            self.fio.wait(5)
            self.fio = None

    def layout_fio(self):
        """Write fio's data file once, outside any measured phase, and nginx's disk page."""
        os.makedirs(self.disk_dir, exist_ok=True)
        with open(os.path.join(self.disk_dir, "page"), "wb") as f:
            f.write(os.urandom(65536))
            os.fsync(f.fileno())
        if not os.path.exists(self.fio_data) or os.path.getsize(self.fio_data) < 512 << 20:
            subprocess.run(["fio", "--name=layout", "--filename=" + self.fio_data, "--size=512M",
                            "--rw=write", "--bs=1M", "--output=/dev/null"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)

    def remove_fio_data(self):
        shutil.rmtree(self.disk_dir, ignore_errors=True)
        try:
            os.unlink(self.fio_data)
        except OSError:
            pass

    def io_bytes(self, cg):
        """Bytes the processes now in the cgroup have read from and written to
        storage (/proc/PID/io; cgroup v1 blkio counts nothing on this kind of host)."""
        total = 0
        procs = readf(os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"), "cgroup.procs"), "")
        for pid in (procs or "").split():
            for line in (readf("/proc/%s/io" % pid, "") or "").splitlines():
                if line.startswith(("read_bytes:", "write_bytes:")):
                    total += int(line.split()[1])
        return total

    # -- measurement -------------------------------------------------------------
    def p99(self, seconds, rate=None):
        r = self.sess.loadgen("http", self.nginx.port, rate or self.rate, seconds, cpu=CLIENT_CPU)
        if r["errors"] or not r["completed"]:
            raise tw.SetupError("loadgen errors: %s" % r)
        return r["rx_latency_us"]["p99"]

    def calibrate(self, separation, probe_s, say):
        """Pick a rate and hog size at which the hog clearly hurts, and a target between.

        Tries SETTINGS in order (probe_s alone, probe_s beside the hog) and keeps
        the first whose hog raises p99 `separation`-fold, else the strongest.
        Returns (alone p99, beside-hog p99, the hog's CPU share uncontrolled,
        separated?)."""
        best = None
        # The first reading after nginx starts runs slow on some hosts (a 2-vCPU
        # AMD EPYC VM: 1.0 and 1.7 ms, against 0.1-0.2 ms in the next): it would
        # set the objective at 3x it. A warm-up reading first, said, not used.
        self.rate = SETTINGS[0][0]
        say("  warm-up: p99 %s alone (not used)" % fmt_us(self.p99(probe_s)))
        for rate, hogs in SETTINGS:
            self.rate, self.hogs = rate, hogs
            alone = self.p99(probe_s)
            self.start_hog()
            time.sleep(0.5)
            u0, t0 = self.cpu_ns(self.batch), time.monotonic()
            hog = self.p99(probe_s)
            share = (self.cpu_ns(self.batch) - u0) / 1e9 / (time.monotonic() - t0)
            self.stop_hog()
            say("  %5d req/s, %d hog workers: p99 %s alone, %s beside the hog (hog had %.0f%% of "
                "CPU %d)" % (rate, hogs, fmt_us(alone), fmt_us(hog), 100 * share, SERVER_CPU))
            if best is None or hog / alone > best[2] / best[1]:
                best = (rate, alone, hog, hogs, share)
            if hog >= separation * alone:
                break
        rate, alone, hog, hogs, share = best
        self.rate, self.hogs = rate, hogs
        self.target = int(max((alone * hog) ** 0.5, 3 * alone))
        return alone, hog, share, hog >= separation * alone

    def files_server(self):
        """A second latency-critical nginx, cgroup "files" on the server's CPU, for
        /disk/page alone: an objective that the disk decides."""
        if not getattr(self, "files", None):
            self.files_cg = self.sess.cgroup("files")
            self.files = self.sess.nginx(self.files_cg, cpu=SERVER_CPU, disk_dir=self.disk_dir)
        return self.files

    def disk_probe(self, rate, seconds, say, cpu=CLIENT_CPU, server=None, slice_idle=None):
        """nginx's /disk/page p99 (the median of its seconds') alone and beside fio,
        uncontrolled, on the I/O
        scheduler an I/O weight acts through (bfq, every weight at its default):
        the "before" of an I/O weight cut. The disk's scheduler is switched for the
        probe and put back. With server (another nginx than web's), web serves its
        own load meanwhile, as in a run. With slice_idle, bfq's idling is set to it
        for the probe (bfq_idle()). Returns (p99 alone, p99 beside fio, fio's
        MB/s), or Nones where the disk or bfq is missing."""
        dev = disk_of(self.disk_dir)
        old = scheduler(dev)
        if not dev or "bfq" not in (readf("/sys/block/%s/queue/scheduler" % dev, "") or ""):
            return None, None, None
        idle_was = None
        try:
            if old != "bfq":
                set_scheduler(dev, "bfq")
            idle_was = bfq_idle(dev)
            if slice_idle is not None:
                bfq_idle(dev, slice_idle)

            def p99(secs=seconds):
                """The median of the per-second p99s, as the run's rows are read."""
                dump = os.path.join(self.dir, "disk-probe.dump")
                r = self.sess.loadgen("http", (server or self.nginx).port, rate, secs, cpu=cpu,
                                      extra=["--path", "/disk/page", "--dump", dump])
                if r["errors"] or not r["completed"]:
                    raise tw.SetupError("loadgen errors on /disk/page: %s" % r)
                ps = seconds_sorted(dump, r["start_unix"], secs)
                return ps[len(ps) // 2] if ps else None
            def loaded(secs=seconds):
                """p99() while web serves its own load beside, as in the run."""
                bg = self.sess.loadgen("http", self.nginx.port, self.rate, secs + 1, cpu=cpu,
                                       background=True) if server else None
                try:
                    return p99(secs)
                finally:
                    if bg:
                        bg.result(timeout=secs + 30)
            p99(1)              # warm-up: nginx's first reads of the page
            alone = loaded()
            self.start_fio(cpu=cpu)
            time.sleep(0.5)
            b0, t0 = self.io_bytes(self.scan), time.monotonic()
            beside = loaded()
            mbps = (self.io_bytes(self.scan) - b0) / 1e6 / (time.monotonic() - t0)
            self.stop_fio()
            # The disk is shared with whatever else the host does: alone again,
            # and the lower of the two (one run here read 18.8 ms alone, 1.5 ms
            # beside fio).
            again = loaded()
            alone = min(a for a in (alone, again) if a is not None) if (alone or again) else None
        finally:
            self.stop_fio()
            if slice_idle is not None and idle_was is not None:
                bfq_idle(dev, idle_was)
            if old and scheduler(dev) != old:
                set_scheduler(dev, old)
        say("  /disk/page at %d req/s under bfq%s, uncontrolled (median of the seconds' p99): "
            "%s alone, %s beside fio (fio read %.0f MB/s)" % (
                rate, "" if slice_idle is None else " (slice_idle %d)" % slice_idle,
                fmt_us(alone), fmt_us(beside), mbps))
        return alone, beside, mbps

    # -- tailwarden --------------------------------------------------------------
    def memcached(self):
        """A second latency-critical service: memcached in cgroup "cache" on the server's CPU."""
        if not getattr(self, "cache", None):
            self.cache = self.sess.cgroup("cache")
            self.mc = self.sess.memcached(self.cache, cpu=SERVER_CPU)
        return self.mc

    def write_config(self, tag="tw", target=None, dry_run=False, extra="", web_limits="",
                     scan_limits=None, be_extra="", more=None, be_weight="1..100"):
        """be_extra: more [Limits] lines for both best-effort policies (Weights=floor).
        more: further policy files, name -> text. be_weight: the best-effort policies'
        CPUWeight= range ("idle..100": their floor is cpu.idle); scan_limits (None: its
        CPU weight, quota and I/O weight) replaces scan's [Limits] whole."""
        if scan_limits is None:
            scan_limits = "CPUWeight=%s\nCPUQuota=5%%..max\nIOWeight=10..100" % be_weight
        d = os.path.join(self.dir, tag)
        pol = os.path.join(d, "policies")
        os.makedirs(pol, exist_ok=True)
        files = {
            "web.policy": "[Service]\nCgroup=%s\nClass=latency-critical\n[Objective]\n"
                          "Percentile=99\nTarget=%dus\nMinRequests=200\nWindow=1s\n%s"
                          % (self.web.rel, target or self.target,
                             "[Limits]\n%s\n" % web_limits if web_limits else ""),
            "batch.policy": "[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\n"
                            "CPUWeight=%s\nCPUQuota=5%%..max\n%s\n"
                            % (self.batch.rel, be_weight, be_extra),
            "scan.policy": "[Service]\nCgroup=%s\nClass=best-effort\n[Limits]\n%s\n%s\n"
                           % (self.scan.rel, scan_limits, be_extra),
        }
        files.update(more or {})
        for name, text in files.items():
            with open(os.path.join(pol, name), "w") as f:
                f.write(text)
        self.decisions = os.path.join(d, "decisions.jsonl")
        if os.path.exists(self.decisions):
            os.unlink(self.decisions)
        self.conf = os.path.join(d, "tailwarden.conf")
        with open(self.conf, "w") as f:
            f.write("[Controller]\nPeriod=%s\nStateDir=%s\nDecisionLog=%s\nDryRun=%s\n%s"
                    % (PERIOD, os.path.join(d, "state"), self.decisions,
                       "yes" if dry_run else "no", extra))
        self.policies = pol
        return pol

    def start_tailwarden(self, extra=(), env=None):
        self.runlog = os.path.join(os.path.dirname(self.conf), "run.log")
        argv = [tw.TAILWARDEN, "run", "--config", self.conf, "--policies", self.policies] + list(extra)
        self.tw = self.sess.spawn(argv, stdout=open(self.runlog, "w"), stderr=subprocess.STDOUT,
                                  env=env, cpu=ALL_CPUS)
        deadline = time.monotonic() + 30
        while "running:" not in (readf(self.runlog) or ""):
            if self.tw.poll() is not None or time.monotonic() > deadline:
                raise tw.SetupError("tailwarden run did not start: %s" % readf(self.runlog))
            time.sleep(0.1)

    def stop_tailwarden(self):
        if self.tw:
            rc = self.sess.stop(self.tw, signal.SIGTERM, timeout=15)
            self.tw = None
            return rc
        return None

    def decisions_list(self):
        text = readf(self.decisions, "") or ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def thread_slices(self):
        """The EEVDF slice (ns, /proc/TID/sched se.slice) of each of nginx's threads."""
        out = {}
        procs = readf(os.path.join(tw.CGROUP_FS, "cpu", self.web.rel.lstrip("/"), "tasks"), "")
        for tid in (procs or "").split():
            for line in (readf("/proc/%s/sched" % tid, "") or "").splitlines():
                if line.startswith("se.slice"):
                    out[int(tid)] = int(line.split(":")[1])
        return out

    def knob_files(self):
        """Each best-effort cgroup's CPU knob files as they are now."""
        out = {}
        for name, cg in (("batch", self.batch), ("scan", self.scan)):
            cpu = os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"))
            out[name] = {f: readf(os.path.join(cpu, f))
                         for f in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us")}
        return out

    def set_static(self, shares, quota_us, period_us=100000):
        """A hand-set split on batch and scan (the static arm); returns the originals."""
        orig = self.knob_files()
        for cg in (self.batch, self.scan):
            cpu = os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"))
            with open(os.path.join(cpu, "cpu.shares"), "w") as f:
                f.write(str(shares))
            with open(os.path.join(cpu, "cpu.cfs_period_us"), "w") as f:
                f.write(str(period_us))
            with open(os.path.join(cpu, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(quota_us))
        return orig

    def restore_files(self, orig):
        for name, cg in (("batch", self.batch), ("scan", self.scan)):
            cpu = os.path.join(tw.CGROUP_FS, "cpu", cg.rel.lstrip("/"))
            for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares"):
                with open(os.path.join(cpu, f), "w") as fh:
                    fh.write(orig[name][f])
