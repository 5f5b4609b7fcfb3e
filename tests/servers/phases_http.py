#!/usr/bin/python3
"""An HTTP/1.1 keep-alive server whose replies split their time in a known way,
and a client that reads slowly, for the request phases (queued, service,
sending) of test_sensing.py's `phases` test.

Server: per request, read it, sleep SLEEP ms (the service phase), then send
the headers and the body in CHUNK-byte sends (each a send of its own: the
sending phase runs from the end of the first to the end of the last). With
--sndbuf the socket's send buffer is that small, so that a slow reader
holds each send back. TCP_NODELAY: each send leaves at once.

    phases_http.py --port P [--sleep-ms 0] [--body 612] [--chunk 0] [--sndbuf 0]

Client (`client` first): REQUESTS requests one after another on each of
CONNS connections, each reply read READ bytes at a time with a pause of
PAUSE ms between reads, through a receive buffer of RCVBUF bytes (set before
connect, so the window stays that small). Prints one JSON object: completed,
errors, and the client's own per-request times in us.

    phases_http.py client --port P [--requests 20] [--conns 2] [--rcvbuf 4096]
                          [--read 4096] [--pause-ms 2]
"""

import argparse
import json
import socket
import socketserver
import sys
import threading
import time


def read_request(sock, buf):
    """Return the rest of the buffer after one full request, or None on EOF."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None
        buf += data
    return buf[buf.find(b"\r\n\r\n") + 4:]


def make_handler(sleep_s, body, chunk, sndbuf):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            sock = self.request
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if sndbuf:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            hdr = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                   "Content-Length: %d\r\n\r\n" % len(body)).encode()
            buf = b""
            while True:
                try:
                    buf = read_request(sock, buf)
                    if buf is None:
                        return
                    if sleep_s:
                        time.sleep(sleep_s)
                    if not chunk:
                        sock.sendall(hdr + body)
                        continue
                    sock.sendall(hdr + body[:chunk])
                    for off in range(chunk, len(body), chunk):
                        sock.sendall(body[off:off + chunk])
                except OSError:
                    return
    return Handler


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def serve(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sleep-ms", type=float, default=0)
    ap.add_argument("--body", type=int, default=612)
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--sndbuf", type=int, default=0)
    a = ap.parse_args(argv)
    body = (b"tailwarden phases test\n" * (a.body // 23 + 1))[:a.body]
    srv = Server(("127.0.0.1", a.port), make_handler(a.sleep_ms / 1e3, body, a.chunk, a.sndbuf))
    srv.serve_forever()


def client(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--conns", type=int, default=2)
    ap.add_argument("--rcvbuf", type=int, default=4096)
    ap.add_argument("--read", type=int, default=4096)
    ap.add_argument("--pause-ms", type=float, default=2)
    a = ap.parse_args(argv)
    times, errors, lock = [], [], threading.Lock()

    def one_conn():
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
            s.connect(("127.0.0.1", a.port))
            for _ in range(a.requests):
                t0 = time.monotonic()
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = s.recv(a.read)
                    if not d:
                        raise OSError("EOF in headers")
                    buf += d
                end = buf.find(b"\r\n\r\n")
                clen = int([ln.split(b":")[1] for ln in buf[:end].split(b"\r\n")
                            if ln.lower().startswith(b"content-length")][0])
                left = clen - (len(buf) - end - 4)
                while left > 0:
                    time.sleep(a.pause_ms / 1e3)
                    d = s.recv(min(a.read, left))
                    if not d:
                        raise OSError("EOF in body")
                    left -= len(d)
                with lock:
                    times.append((time.monotonic() - t0) * 1e6)
            s.close()
        except OSError as e:
            with lock:
                errors.append(str(e))

    threads = [threading.Thread(target=one_conn) for _ in range(a.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times.sort()
    print(json.dumps({"completed": len(times), "errors": len(errors), "error": errors[:1],
                      "p50_us": times[len(times) // 2] if times else None}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        client(sys.argv[2:])
    else:
        serve(sys.argv[1:])
