#!/usr/bin/env python3
# cluster_hold.py ADDR N GO: N keep-alive connections to ADDR's plug
# service (8081), each with one request answered; prints "ready" once all
# are, waits (at most 60 s) for the file GO, asks again on each and prints
# "ok=K broken=B". Run in the lab's client namespace by cluster_lib.sh's
# hold_start.
import os, socket, sys, time
addr, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
req = b"GET /index.html HTTP/1.1\r\nHost: lab\r\n\r\n"
def ask(c):
    c.sendall(req)
    got = b""
    while b"lab ok\n" not in got:
        d = c.recv(4096)
        if not d:
            raise OSError("closed")
        got += d
conns = []
for _ in range(n):
    c = socket.create_connection((addr, 8081), timeout=5)
    ask(c)
    conns.append(c)
print("ready", flush=True)
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.02)
ok = 0
for c in conns:
    try:
        ask(c)
        ok += 1
    except OSError:
        pass
print("ok=%d broken=%d" % (ok, n - ok), flush=True)
