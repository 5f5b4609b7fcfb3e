"""What held up the slow requests of a lost window: the scheduler's record of the
server's CPU, from `perf record` of the sched_switch and sched_waking tracepoints.

The co-location benchmark's --trace. A window is lost when its percentile is
over the objective; the requests over the objective in it are what made it so.
For each of those, from the client's write to the kernel's receipt of the reply,
the server's CPU was doing one of four things: running the service, running
something else (another task, named), idle with nothing woken for it (the
request had not yet reached it), or idle with a task woken for it that it had
not yet run ("waking"): the wake-up's way to a halted vCPU, which on a VM is
the hypervisor's to run again. That wait is not steal: /proc/stat counts
steal only while the guest had work queued on the vCPU. The window is put
down to whichever took most of its slow requests' time.
"""

import bisect
import os
import re
import shutil
import signal
import subprocess
import time

IDLE = "idle"
WAKING = "waking"
LINE = re.compile(r"\[(\d+)\]\s+(\d+)\.(\d+):\s+sched:(sched_switch|sched_waking):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.*) prev_pid=(\d+) .*==> next_comm=(.*) next_pid=(\d+)")
WAKE = re.compile(r" pid=(\d+) .*target_cpu=(\d+)")


def available():
    """None when perf can record the sched tracepoints, else why not."""
    if not shutil.which("perf"):
        return "no perf (Debian: linux-perf)"
    if not os.path.exists("/sys/kernel/tracing/events/sched/sched_switch") and \
            not os.path.exists("/sys/kernel/debug/tracing/events/sched/sched_switch"):
        return "no sched tracepoints in tracefs"
    return None


class Trace:
    """perf recording the scheduler on every CPU into path, until stop(): the
    switches, and each wakeup as the waker asks for it (sched_waking, on the
    waker's CPU; sched_wakeup of a wake-up queued to another CPU comes only
    once that CPU has taken it in). Its clock is CLOCK_MONOTONIC, the clock
    of loadgen's due times. perf itself runs on `cpu`."""

    def __init__(self, path, cpu):
        self.path = path
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), "perf", "record", "-q", "-a", "-k", "CLOCK_MONOTONIC",
             "-e", "sched:sched_switch", "-e", "sched:sched_waking", "-o", path],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise RuntimeError("perf record: %s" % self.proc.stderr.read().decode().strip())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def segments(path, cpu, spans):
    """What `cpu` did within spans (sorted [(a, b)] in monotonic seconds):
    {span index: {name: seconds}}, name a comm, IDLE (nothing woken for it)
    or WAKING (idle with a task woken for it that it has not yet run: the
    wake-up's way to a halted vCPU)."""
    out = {i: {} for i in range(len(spans))}
    if not spans:
        return out
    p = subprocess.Popen(["perf", "script", "-i", path, "--ns", "-F", "cpu,time,event,trace"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         errors="replace")
    # reach[i]: the latest end of spans[0..i]. Spans may overlap (two
    # windows' at their boundary, or a long one over many short ones): the
    # first span that can meet [a, b) is the first whose reach passes a.
    reach, r = [], float("-inf")
    for _, e in spans:
        r = max(r, e)
        reach.append(r)
    cur, since, pending = None, None, set()
    lo, hi = spans[0][0], reach[-1]

    def account(a, b, name):
        # [a, b) went to `name`: add its overlap with each span it meets.
        if name is None or b <= lo or a >= hi:
            return
        i = bisect.bisect_right(reach, a)
        while i < len(spans) and spans[i][0] < b:
            s, e = spans[i]
            ov = min(b, e) - max(a, s)
            if ov > 0:
                out[i][name] = out[i].get(name, 0.0) + ov
            i += 1

    for line in p.stdout:
        m = LINE.search(line)
        if not m:
            continue
        c = int(m.group(1))
        t = int(m.group(2)) + int(m.group(3)) / 10 ** len(m.group(3))
        if m.group(4) == "sched_waking":
            w = WAKE.search(m.group(5))
            if w and int(w.group(2)) == cpu:
                pending.add(w.group(1))
                if cur == IDLE:
                    account(since, t, cur)
                    cur, since = WAKING, t
            continue
        sw = SWITCH.search(m.group(5))
        if not sw:
            continue
        pending.discard(sw.group(4))    # it runs (here or wherever it went)
        if c != cpu:
            continue
        account(since, t, cur)
        if sw.group(4) != "0":
            cur = sw.group(3)
        else:
            cur = WAKING if pending else IDLE
        since = t
    p.wait()
    return out


def blame(spans_of, path, cpu):
    """spans_of: {window key: [(a, b)] of its slow requests}. Returns {key:
    (cause, {name: share})}: the cause is what took most of its slow requests'
    time on cpu: a task's comm (the service's own, or another's), IDLE or
    WAKING. A window's overlapping spans are merged first, so no instant counts
    twice within it; one instant may count in two windows whose spans meet.
    The recording is decoded once for every key."""
    keys = sorted(spans_of)
    merged = []     # (a, b, key), disjoint within a key
    for k in keys:
        run = None
        for a, b in sorted(spans_of[k]):
            if run and a <= run[1]:
                run[1] = max(run[1], b)
            else:
                if run:
                    merged.append((run[0], run[1], k))
                run = [a, b]
        if run:
            merged.append((run[0], run[1], k))
    merged.sort()
    got = segments(path, cpu, [(a, b) for a, b, _ in merged])
    res = {}
    for i, (_, _, k) in enumerate(merged):
        tot = res.setdefault(k, {})
        for name, s in got[i].items():
            tot[name] = tot.get(name, 0.0) + s
    out = {}
    for k in keys:
        tot = res.get(k, {})
        whole = sum(tot.values())
        if not whole:
            out[k] = ("no record", {})
            continue
        share = {n: s / whole for n, s in tot.items()}
        cause = max(share, key=share.get)
        out[k] = (cause, share)
    return out
