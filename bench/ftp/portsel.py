#!/usr/bin/env python3
"""Why proxyd picks an active data connection's source port at connect()
time: connections/s from one source address to one listener when the
connecting side closes first (it keeps the TIME_WAIT, as proxyd's active
side does after a RETR), with the source port chosen
  bind:    by bind(addr, 0)                      (bind-time choice)
  noport:  by connect() after IP_BIND_ADDRESS_NO_PORT + bind(addr, 0)
Each strategy uses its own source address, so the TIME_WAIT entries of one
cannot slow the other.   portsel.py SECONDS
"""
import errno
import os
import socket
import sys
import time

IP_BIND_ADDRESS_NO_PORT = 24


def server(lsock):
    while True:
        try:
            c, _ = lsock.accept()
        except OSError:
            return
        try:
            c.recv(1)
        except OSError:
            pass
        c.close()


def run(strategy, src, dst, secs):
    n = fails = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        s = socket.socket()
        try:
            if strategy == "noport":
                s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.bind((src, 0))
            s.connect(dst)
            s.close()
            n += 1
        except OSError as e:
            fails += 1
            s.close()
            if e.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                raise
    return n, fails


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 8
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1024)
    dst = lsock.getsockname()
    pid = os.fork()
    if pid == 0:
        server(lsock)
        os._exit(0)
    try:
        for strategy, src in (("bind", "127.0.0.61"), ("noport", "127.0.0.62")):
            t0 = time.monotonic()
            n, fails = run(strategy, src, dst, secs)
            dt = time.monotonic() - t0
            print("%-7s %6.0f conn/s  %6d conns  %d failed (EADDRINUSE)" %
                  (strategy, n / dt, n, fails))
    finally:
        os.kill(pid, 15)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
