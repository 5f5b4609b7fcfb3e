#!/usr/bin/python3
"""A keep-alive HTTP/1.1 server whose every request reads a random 4 KiB block
of a large file with O_DIRECT (so each request waits on the disk, never on the
page cache) and replies with a short body.

One thread per connection (the loopback generator opens a handful), so a
request waiting on the disk does not hold up the other connections.

Usage: diskread_http.py --port P --file PATH [--block 4096]
"""

import argparse
import mmap
import os
import random
import socket
import sys
import threading

BODY = b"ok\n"


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
    def __init__(self, port, path, block):
        self.block = block
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        self.nblocks = os.fstat(self.fd).st_size // block
        if self.nblocks < 1:
            raise SystemExit("%s is smaller than one block" % path)
        self.listener = socket.create_server(("127.0.0.1", port), backlog=1024)

    def read_block(self, buf):
        off = random.randrange(self.nblocks) * self.block
        n = os.preadv(self.fd, [buf], off)
        if n != self.block:
            raise OSError("short read %d at %d" % (n, off))

    def handle(self, sock):
        # An anonymous mapping is page-aligned, as O_DIRECT requires.
        buf = mmap.mmap(-1, self.block)
        data = b""
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
                while True:
                    req = parse_request(data)
                    if req is None:
                        break
                    used, keep = req
                    data = data[used:]
                    self.read_block(buf)
                    hdr = ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                           "Content-Length: %d\r\n%s\r\n"
                           % (len(BODY), "" if keep else "Connection: close\r\n")).encode()
                    sock.sendall(hdr + BODY)
                    if not keep:
                        return
        except OSError:
            pass
        finally:
            sock.close()
            buf.close()

    def serve(self):
        while True:
            s, _ = self.listener.accept()
            threading.Thread(target=self.handle, args=(s,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--block", type=int, default=4096)
    a = ap.parse_args()
    srv = Server(a.port, a.file, a.block)
    try:
        srv.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
