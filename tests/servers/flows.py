#!/usr/bin/python3
"""TCP flows with known figures, for test_sensing's flows case.

  flows.py stall --port P [--conns N] [--rcvbuf B] [--hold S]
      N connections to an HTTP server on 127.0.0.1:P, each asks for / and
      reads one 4 KiB piece of the reply through a B-byte receive buffer,
      then stops reading: the server's send queues fill and its windows stop
      moving. Prints {"ready": N} when every request is sent and its first
      piece read, holds S seconds (or until stdin closes), closes them all
      and prints {"closed": N}.

  flows.py sink --host H --port P
      A server that reads each connection to its end and closes it.

  flows.py upload --host H --port P [--conns N] [--bytes B]
      N connections to a sink, each sends B bytes, shuts its side down and
      waits for the sink's end: every byte was acknowledged when it returns.
      Prints {"sent": total bytes, "conns": N, "seconds": s}.
"""

import argparse
import json
import select
import socket
import sys
import threading
import time


def stall(a):
    socks = []
    for _ in range(a.conns):
        s = socket.socket()
        # Before connect: the window the server sees is this buffer's.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
        s.connect(("127.0.0.1", a.port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: flows\r\n\r\n")
        socks.append(s)
    for s in socks:
        if not s.recv(4096):
            sys.exit("the server closed a connection before replying")
    print(json.dumps({"ready": len(socks)}), flush=True)
    select.select([sys.stdin], [], [], a.hold)
    for s in socks:
        s.close()
    print(json.dumps({"closed": len(socks)}), flush=True)


def sink(a):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(64)

    def drain(c):
        with c:
            while c.recv(1 << 16):
                pass

    while True:
        c, _ = srv.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()


def upload(a):
    t0 = time.monotonic()
    errors = []

    def one():
        try:
            with socket.create_connection((a.host, a.port), timeout=60) as c:
                c.sendall(b"x" * a.bytes)
                c.shutdown(socket.SHUT_WR)
                while c.recv(4096):
                    pass
        except OSError as e:
            errors.append(str(e))

    ts = [threading.Thread(target=one) for _ in range(a.conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("upload: %s" % errors[0])
    print(json.dumps({"sent": a.conns * a.bytes, "conns": a.conns,
                      "seconds": round(time.monotonic() - t0, 3)}), flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stall")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--conns", type=int, default=6)
    s.add_argument("--rcvbuf", type=int, default=16384)
    s.add_argument("--hold", type=float, default=60)
    k = sub.add_parser("sink")
    k.add_argument("--host", required=True)
    k.add_argument("--port", type=int, required=True)
    u = sub.add_parser("upload")
    u.add_argument("--host", required=True)
    u.add_argument("--port", type=int, required=True)
    u.add_argument("--conns", type=int, default=4)
    u.add_argument("--bytes", type=int, default=2 << 20)
    a = p.parse_args()
    {"stall": stall, "sink": sink, "upload": upload}[a.cmd](a)


if __name__ == "__main__":
    main()
