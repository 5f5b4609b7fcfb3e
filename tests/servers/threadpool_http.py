#!/usr/bin/python3
"""A thread-pool HTTP/1.1 keep-alive server that does ~2 ms of work per request.

The main thread owns the listening socket and an epoll set of idle connections.
When a connection turns readable it is taken out of the set and handed to a
pool worker, which reads the request, works, replies with one send and hands the
connection back. Successive requests on one keep-alive connection are therefore
read and answered by different threads -- the case where keying spans by thread
instead of by connection goes wrong.

Usage: threadpool_http.py --port P [--workers N] [--work-ms 2] [--work busy|sleep]
"""

import argparse
import queue
import selectors
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

BODY = b"x" * 256


class Conn:
    __slots__ = ("sock", "buf")

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""


def parse_request(buf):
    """(bytes consumed, keep-alive) for one complete request at buf's start, or None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split()
    version = parts[2] if len(parts) > 2 else "HTTP/1.0"
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip().lower()
    clen = int(headers.get("content-length", "0") or 0)
    total = end + 4 + clen
    if len(buf) < total:
        return None
    conn_hdr = headers.get("connection", "")
    keep = conn_hdr == "keep-alive" if version == "HTTP/1.0" else conn_hdr != "close"
    return total, keep


class Server:
    def __init__(self, port, workers, work_s, busy):
        self.work_s, self.busy = work_s, busy
        self.listener = socket.create_server(("127.0.0.1", port), backlog=1024)
        self.listener.setblocking(False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.sel.register(self.wake_r, selectors.EVENT_READ)
        self.returned = queue.SimpleQueue()
        self.pool = ThreadPoolExecutor(max_workers=workers)

    def work(self):
        if self.busy:
            end = time.perf_counter() + self.work_s
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(self.work_s)

    def give_back(self, conn):
        self.returned.put(conn)
        try:
            self.wake_w.send(b"\0")
        except BlockingIOError:
            pass        # a wake-up is already pending

    def handle(self, conn):
        """Pool worker: serve every complete request buffered on this connection."""
        try:
            data = conn.sock.recv(65536)
            if not data:
                conn.sock.close()
                return
            conn.buf += data
            while True:
                req = parse_request(conn.buf)
                if req is None:
                    break
                used, keep = req
                conn.buf = conn.buf[used:]
                self.work()
                hdr = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                       "Content-Length: %d\r\n%s\r\n"
                       % (len(BODY), "" if keep else "Connection: close\r\n")).encode()
                conn.sock.sendall(hdr + BODY)
                if not keep:
                    conn.sock.close()
                    return
            self.give_back(conn)
        except OSError:
            conn.sock.close()

    def serve(self):
        while True:
            for key, _ in self.sel.select():
                if key.fileobj is self.listener:
                    try:
                        s, _ = self.listener.accept()
                    except BlockingIOError:
                        continue
                    s.setblocking(True)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.sel.register(s, selectors.EVENT_READ, Conn(s))
                elif key.fileobj is self.wake_r:
                    try:
                        self.wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                    while True:
                        try:
                            c = self.returned.get_nowait()
                        except queue.Empty:
                            break
                        self.sel.register(c.sock, selectors.EVENT_READ, c)
                else:
                    self.sel.unregister(key.fileobj)
                    self.pool.submit(self.handle, key.data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--work-ms", type=float, default=2.0)
    ap.add_argument("--work", choices=("busy", "sleep"), default="busy")
    a = ap.parse_args()
    srv = Server(a.port, a.workers, a.work_ms / 1000.0, a.work == "busy")
    try:
        srv.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
