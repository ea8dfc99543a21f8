#!/usr/bin/env python3
"""New connections after a node left (cluster_ops, cluster_spoof): rounds
of 10 connections at once to ADDR's plug service (port 8081, a request
each, 300 ms timeout) until one round is all served; prints the ms from
START (epoch ms) and the rounds, or "none ROUNDS" (exit 1) after 10 s.

    cluster_probe.py ADDR START"""
import socket, sys, threading, time
addr, start = sys.argv[1], int(sys.argv[2])
req = b"GET /index.html HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n"
def one(res, k):
    try:
        c = socket.create_connection((addr, 8081), timeout=0.3)
        c.sendall(req)
        got = b""
        while b"lab ok\n" not in got:
            d = c.recv(4096)
            if not d:
                break
            got += d
        c.close()
        res[k] = b"lab ok\n" in got
    except OSError:
        res[k] = False
rounds = 0
while time.time() * 1000 - start < 10000:
    rounds += 1
    res = [False] * 10
    ts = [threading.Thread(target=one, args=(res, k)) for k in range(10)]
    for t in ts: t.start()
    for t in ts: t.join()
    if all(res):
        print("%d %d" % (int(time.time() * 1000) - start, rounds))
        sys.exit(0)
print("none %d" % rounds)
sys.exit(1)
