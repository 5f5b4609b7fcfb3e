#!/usr/bin/python3
"""A reference client whose latency ends where tailwarden's span ends.

tailwarden's span of a request runs from its arrival at the server's socket to
the server's last send of the reply. A user-space client (loadgen, wrk) adds,
after that last send, the time it takes to notice the reply: waking up,
returning from epoll, reading. On the nested-virtualisation hosts this project
runs on, that wake-up costs ~35 us at the median and 100-200 us at p99 --
outside the span by definition, and large next to a 100-300 us p99.

This client reads the kernel's receive timestamp of each reply (SO_TIMESTAMPNS:
CLOCK_REALTIME stamped when the last segment reached this socket, which on
loopback happens inside the server's send) and reports

    kernel_latency_us = rx timestamp of the reply's last segment - clock just before send()

beside the usual user-space latency. It is measured entirely on the client,
independently of tailwarden, and differs from the span only by the client's own
send path before the request lands (a few us).

Open loop like loadgen: request i is due at t0 + i/rate, each connection
carries one request at a time, a due request waits for a free connection.

usage: tsclient.py --proto http|redis|memcached --port P --rate R --duration S [--conns C]
prints one JSON line: sent, completed, errors, rps, latency_us{...}, kernel_latency_us{...}
"""

import argparse
import json
import selectors
import socket
import struct
import sys
import time

SO_TIMESTAMPNS = 35     # asm-generic/socket.h (SO_TIMESTAMPNS_OLD)
REALTIME = time.CLOCK_REALTIME


def request_bytes(proto, path, key):
    if proto == "http":
        return ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode()
    if proto == "redis":
        return ("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)).encode()
    return ("get %s\r\n" % key).encode()


def reply_len(proto, buf):
    """Length of the complete reply at the start of buf, or None if incomplete."""
    if proto == "http":
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        clen = 0
        for line in buf[:end].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                clen = int(v.strip())
        return end + 4 + clen if len(buf) >= end + 4 + clen else None
    if proto == "redis":
        eol = buf.find(b"\r\n")
        if eol < 0:
            return None
        if buf[:1] == b"$":
            n = int(buf[1:eol])
            if n < 0:
                return eol + 2
            return eol + 2 + n + 2 if len(buf) >= eol + 2 + n + 2 else None
        return eol + 2
    # memcached text protocol: VALUE ... data ... END, or just END
    end = buf.find(b"END\r\n")
    return end + 5 if end >= 0 else None


def pct(sorted_v, q):
    if not sorted_v:
        return None
    i = max(0, min(len(sorted_v) - 1, int(-(-q * len(sorted_v) // 1)) - 1))
    return sorted_v[i]


def summary(v):
    v = sorted(v)
    if not v:
        return None
    return {"p50": pct(v, .5), "p90": pct(v, .9), "p99": pct(v, .99), "p999": pct(v, .999),
            "max": v[-1], "mean": sum(v) / len(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proto", choices=("http", "redis", "memcached"), required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--path", default="/")
    ap.add_argument("--key", default="foo")
    a = ap.parse_args()

    req = request_bytes(a.proto, a.path, a.key)
    sel = selectors.DefaultSelector()
    state = {}
    idle = []
    for _ in range(a.conns):
        s = socket.create_connection((a.host, a.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        state[s] = None
        idle.append(s)

    n_total = int(a.rate * a.duration)
    user, kern = [], []
    sent = errors = 0
    t0 = time.monotonic()
    deadline = t0 + a.duration + 5
    while (sent < n_total or any(v is not None for v in state.values())) and time.monotonic() < deadline:
        now = time.monotonic()
        while sent < n_total and idle and t0 + sent / a.rate <= now:
            s = idle.pop()
            start = time.clock_gettime_ns(REALTIME)
            try:
                s.send(req)
            except OSError:
                errors += 1
                sel.unregister(s)
                state.pop(s)
                continue
            state[s] = [start, b"", None]
            sent += 1
        wait = (t0 + sent / a.rate - time.monotonic()) if (sent < n_total and idle) else 0.05
        for key, _ in sel.select(max(0.0, min(wait, 0.05))):
            s = key.fileobj
            try:
                data, anc, _, _ = s.recvmsg(65536, 256)
            except BlockingIOError:
                continue
            except OSError:
                data, anc = b"", []
            st = state.get(s)
            if not data or st is None:
                errors += 1
                sel.unregister(s)
                state.pop(s, None)
                continue
            for level, typ, d in anc:
                if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", d[:16])
                    st[2] = sec * 1_000_000_000 + nsec
            st[1] += data
            n = reply_len(a.proto, st[1])
            if n is None:
                continue
            done = time.clock_gettime_ns(REALTIME)
            user.append((done - st[0]) / 1000.0)
            if st[2] is not None:
                kern.append((st[2] - st[0]) / 1000.0)
            state[s] = None
            idle.append(s)
    completed = len(user)
    for s in state:
        s.close()
    print(json.dumps({"sent": sent, "completed": completed, "errors": errors,
                      "rps": completed / a.duration, "latency_us": summary(user),
                      "kernel_latency_us": summary(kern)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
