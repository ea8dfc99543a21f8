#!/usr/bin/env python3
"""paced.py: HTTP/1.0 GETs one at a time, with a pause after each.

    python3 bench/paced.py URL N GAP_US

N requests to URL (http://HOST[:PORT]/PATH), each on a new connection
(no keep-alive, as ab without -k), the answer read to EOF; after each,
GAP_US microseconds of the client spinning (0: back to back, as ab -c 1). bench/cluster.sh
--gaps uses it to give one proxyd its requests spaced as a node of three
gets them at ab -c 1 (a request of the other nodes' between two of its
own), with no cluster involved: what the spacing alone costs per request.
Prints "requests=N failed=F us_per_request=T" (wall time); exits 1 when
any request failed (no answer, or not a 200 with a body).
"""
import socket
import sys
import time
import urllib.parse


def one(addr, req):
    # blocking, no timeout (a timeout polls before every call): as little
    # of the client's own time between two requests as ab -c 1 leaves
    s = socket.socket(addr[0], socket.SOCK_STREAM)
    try:
        s.connect(addr[1])
        s.sendall(req)
        got = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            got.append(b)
    finally:
        s.close()
    head, _, body = b"".join(got).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ")
    return status[0].startswith(b"HTTP/1.") and status[1:2] == [b"200"] and len(body) > 0


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: paced.py URL N GAP_US")
    u = urllib.parse.urlsplit(sys.argv[1])
    n, gap = int(sys.argv[2]), int(sys.argv[3]) / 1e6
    req = ("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (u.path or "/", u.netloc)).encode()
    ai = socket.getaddrinfo(u.hostname, u.port or 80, type=socket.SOCK_STREAM)[0]
    addr = (ai[0], ai[4])
    failed = 0
    t0 = time.perf_counter()
    for _ in range(n):
        try:
            if not one(addr, req):
                failed += 1
        except OSError:
            failed += 1
        # the pause spins: a sleep of 1 ms took 3 to 4 under load (the
        # wake-up waits its turn), and a node's pause in a cluster round is
        # other nodes' requests on the cores, not an idle machine
        end = time.perf_counter() + gap
        while time.perf_counter() < end:
            pass
    dt = time.perf_counter() - t0
    print("requests=%d failed=%d us_per_request=%.0f" % (n, failed, dt / n * 1e6))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
