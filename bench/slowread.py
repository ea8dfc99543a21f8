#!/usr/bin/env python3
"""bench/slowread.py HOST PORT PATH N RELEASE [--hold S]

Opens N HTTP/1.1 connections to HOST:PORT, each with a 4 KB receive buffer,
sends GET PATH on each, prints "ready" once all are sent, then reads one
byte per connection per second (slow readers of a fast origin: the proxy
in between holds what it buffers for them) until the file RELEASE exists
or --hold seconds (default 60) have passed. The scanning rows' memory
figure: the proxy's RSS with them minus its RSS without (bench/scan.sh)."""
import argparse
import os
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("path")
    ap.add_argument("n", type=int)
    ap.add_argument("release")
    ap.add_argument("--hold", type=float, default=60)
    a = ap.parse_args()
    socks = []
    for _ in range(a.n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((a.host, a.port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\n\r\n" % a.path.encode())
        s.setblocking(False)
        socks.append(s)
    print("ready", flush=True)
    deadline = time.time() + a.hold
    while not os.path.exists(a.release) and time.time() < deadline:
        for s in socks:
            try:
                s.recv(1)
            except BlockingIOError:
                pass
        time.sleep(1)
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
