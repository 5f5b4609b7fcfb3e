#!/usr/bin/python3
"""An HTTP/1.1 keep-alive server that writes each reply in several sends with pauses.

Per request: send the headers, sleep GAP ms, send the first half of the body,
sleep GAP ms, send the rest (with --parts 3, the default). A correct inferrer
counts ONE request per reply, and its span ends at the last send, so it is at
least (parts - 1) * GAP ms long. TCP_NODELAY is set so each send leaves at once
and the client is not held up by Nagle behind a delayed ACK.

Usage: multisend_http.py --port P [--parts 3] [--gap-ms 3] [--body 2048]
"""

import argparse
import socket
import socketserver
import sys
import time


def read_request(sock, buf):
    """Return (rest of buffer, keep-alive) after one full request, or (None, _) on EOF."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None, False
        buf += data
    end = buf.find(b"\r\n\r\n")
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split()
    version = parts[2] if len(parts) > 2 else "HTTP/1.0"
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip().lower()
    clen = int(headers.get("content-length", "0") or 0)
    while len(buf) < end + 4 + clen:
        data = sock.recv(65536)
        if not data:
            return None, False
        buf += data
    conn_hdr = headers.get("connection", "")
    keep = conn_hdr == "keep-alive" if version == "HTTP/1.0" else conn_hdr != "close"
    return buf[end + 4 + clen:], keep


def make_handler(parts, gap_s, body):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            sock = self.request
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while True:
                try:
                    buf, keep = read_request(sock, buf)
                except OSError:
                    return
                if buf is None:
                    return
                hdr = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                       "Content-Length: %d\r\n%s\r\n"
                       % (len(body), "" if keep else "Connection: close\r\n")).encode()
                # headers, then the body split into parts-1 pieces, a pause before each piece
                pieces = [hdr]
                n = parts - 1
                step = (len(body) + n - 1) // n
                pieces += [body[i:i + step] for i in range(0, len(body), step)]
                try:
                    for i, p in enumerate(pieces):
                        if i:
                            time.sleep(gap_s)
                        sock.sendall(p)
                except OSError:
                    return
                if not keep:
                    return
    return Handler


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--parts", type=int, default=3, help="sends per reply (>= 2)")
    ap.add_argument("--gap-ms", type=float, default=3.0)
    ap.add_argument("--body", type=int, default=2048)
    a = ap.parse_args()
    if a.parts < 2:
        ap.error("--parts must be at least 2")
    body = (b"0123456789abcdef" * (a.body // 16 + 1))[:a.body]
    with Server(("127.0.0.1", a.port), make_handler(a.parts, a.gap_ms / 1000.0, body)) as srv:
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
