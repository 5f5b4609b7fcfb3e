#!/usr/bin/python3
"""make soak: tailwarden run for 10 minutes on a host whose cgroups churn.

nginx (latency-critical) under open-loop load, a CPU hog (best-effort) in
bursts so the controller keeps cutting and giving back, and 20 cgroups a
second created, each serving one TCP request from a process of its own,
and removed. Every minute: the daemon's RSS and its per-cgroup BPF map
entries. Passes when RSS and map occupancy stay flat (the last minutes
within 10% / 2 MiB and a few entries of the second minute's), the daemon
never died, and every knob is back to its original after SIGTERM.

Usage: soak.py [--minutes N] [--rate CGROUPS_PER_S]   (root)
"""

import argparse
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import twtest as tw  # noqa: E402
import colo  # noqa: E402
import bpfmaps  # noqa: E402


def churner(parent_dir, rate, stop, counts):
    """Create, use and remove cgroups at `rate` a second until stop is set."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    i, t0 = 0, time.monotonic()
    while not stop.is_set():
        d = os.path.join(parent_dir, "c%d" % i)
        os.mkdir(d)
        pid = os.fork()
        if pid == 0:
            try:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write("0")
                c, _ = lsock.accept()
                c.recv(4096)
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                c.close()
            finally:
                os._exit(0)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                while s.recv(4096):
                    pass
        except OSError:
            counts["errors"] += 1
        os.waitpid(pid, 0)
        for _ in range(200):
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.001)
        i += 1
        counts["cgroups"] = i
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
    lsock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=float, default=20, help="cgroups created and removed a second")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak: must run as root (BPF and cgroups)")
    ok = True
    with tw.Session(("unified", "cpu", "cpuacct"), tag="soak") as sess:
        rig = colo.Rig(sess, sess.tmpdir("soak"))
        jobs = sess.cgroup("jobs")
        rig.rate, rig.hogs = 4000, 2
        alone = rig.p99(2)
        rig.write_config(tag="soak", target=int(max(3 * alone, 300)))
        orig = rig.knob_files()
        sess.loadgen("http", rig.nginx.port, rig.rate, int(args.minutes * 60) + 60,
                     cpu=colo.CLIENT_CPU, background=True)
        rig.start_tailwarden()
        pid = rig.tw.pid
        stop = threading.Event()
        counts = {"cgroups": 0, "errors": 0}
        th = threading.Thread(target=churner, args=(jobs.unified, args.rate, stop, counts),
                              daemon=True)
        th.start()
        rows, t0, minute = [], time.monotonic(), 0
        print("minute  cgroups  RSS KiB  map entries", flush=True)
        try:
            while time.monotonic() - t0 < args.minutes * 60:
                minute += 1
                # The hog in bursts: 20 s on, 10 s off, twice a minute.
                for _ in range(2):
                    rig.start_hog(seconds=20)
                    time.sleep(20)
                    rig.stop_hog()
                    time.sleep(10)
                if rig.tw.poll() is not None:
                    print("tailwarden run died (exit %s)" % rig.tw.returncode)
                    ok = False
                    break
                occ = bpfmaps.occupancy(pid)
                rss = bpfmaps.rss_kib(pid)
                rows.append((minute, counts["cgroups"], rss, occ))
                print("%6d  %7d  %7d  %s" % (minute, counts["cgroups"], rss,
                                             " ".join("%s=%d" % kv for kv in sorted(occ.items()))),
                      flush=True)
        finally:
            stop.set()
            th.join(30)
            rig.stop_hog()
        rc = rig.stop_tailwarden()
        after = rig.knob_files()
    if ok and len(rows) >= 3:
        ref = rows[1]
        for minute, _, rss, occ in rows[2:]:
            if rss > ref[2] * 1.10 and rss > ref[2] + 2048:
                print("FAIL: RSS grew from %d KiB (minute 2) to %d KiB (minute %d)"
                      % (ref[2], rss, minute))
                ok = False
            for k, v in occ.items():
                if v > ref[3].get(k, 0) + 25:
                    print("FAIL: %s grew from %d entries (minute 2) to %d (minute %d)"
                          % (k, ref[3].get(k, 0), v, minute))
                    ok = False
    elif ok:
        print("FAIL: too short to judge (%d minutes)" % len(rows))
        ok = False
    if rc != 0:
        print("FAIL: exit status %s after SIGTERM" % rc)
        ok = False
    if after != orig:
        print("FAIL: knobs not restored: %s, originally %s" % (after, orig))
        ok = False
    print("%s: %d cgroups created and removed (%d client errors) in %d minutes; RSS %s KiB; "
          "knobs %s" % ("PASS" if ok else "FAIL", counts["cgroups"], counts["errors"], len(rows),
                        " -> ".join(str(r[2]) for r in rows[1::max(1, len(rows) // 4)]),
                        "restored" if after == orig else "NOT restored"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
