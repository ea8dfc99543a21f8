#!/usr/bin/env python3
"""ttfb.py: connect-to-first-byte latency of new connections, one at a time.

    python3 bench/ttfb.py HOST PORT[,PORT...] [N] [PATH]

For each port in turn (interleaved: one connection to each port, N
rounds), opens a TCP connection, sends "GET PATH HTTP/1.0" and measures,
with time.perf_counter_ns: connect (connect() returned), first byte (the
first byte of the answer arrived, from the start of connect) and the
whole answer (EOF). Prints per port the median, p90 and p99 in
microseconds, and the added latency against the first port (the direct
path). One connection at a time: what a proxy adds to accept, connect to
its server and relay the first bytes, without queueing behind others.
"""
import socket
import statistics
import sys
import time


def one(host, port, req):
    t0 = time.perf_counter_ns()
    s = socket.create_connection((host, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t1 = time.perf_counter_ns()
    s.sendall(req)
    b = s.recv(65536)
    t2 = time.perf_counter_ns()
    if not b.startswith(b"HTTP/1."):
        raise RuntimeError(f"port {port}: no HTTP answer: {b[:40]!r}")
    while b:
        b = s.recv(65536)
    t3 = time.perf_counter_ns()
    s.close()
    return (t1 - t0) / 1000, (t2 - t0) / 1000, (t3 - t0) / 1000


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    host = argv[1]
    ports = [int(p) for p in argv[2].split(",")]
    n = int(argv[3]) if len(argv) > 3 else 1000
    path = argv[4] if len(argv) > 4 else "/"
    req = f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode()
    res = {p: [] for p in ports}
    for p in ports:             # warm-up
        for _ in range(20):
            one(host, p, req)
    for _ in range(n):
        for p in ports:
            res[p].append(one(host, p, req))
    base = statistics.median(r[1] for r in res[ports[0]])
    print(f"# {n} connections per port, one at a time, GET {path}; microseconds")
    print("port connect_med first_byte_med first_byte_p90 first_byte_p99 whole_med added_first_byte_med")
    for p in ports:
        c = [r[0] for r in res[p]]
        f = [r[1] for r in res[p]]
        w = [r[2] for r in res[p]]
        print(f"{p} {statistics.median(c):.0f} {statistics.median(f):.0f} {pct(f, 90):.0f} "
              f"{pct(f, 99):.0f} {statistics.median(w):.0f} {statistics.median(f) - base:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
