#!/usr/bin/env python3
"""A client that reads a download at a steady RATE bytes/s, like one
behind a link of that speed: its receive buffer is small (64 KB, which
also stops the kernel's autotuning), so what it has not read holds the
sender back at once. (curl --limit-rate keeps a receive buffer of many
MB: the kernel then acknowledges in multi-MB bursts, and no sender can
see a steady rate.)

usage: paced_client.py PORT PATH RATE SECONDS
Sends GET PATH, reads at RATE for SECONDS at most (or to the end), prints
the bytes read."""
import socket
import sys
import time

port, path, rate, secs = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                          float(sys.argv[4]))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.settimeout(10)
s.connect(("127.0.0.1", port))
s.sendall(b"GET " + path.encode() + b" HTTP/1.0\r\nHost: x\r\n\r\n")
t0 = time.monotonic()
got = 0
done = False
while not done and time.monotonic() - t0 < secs:
    due = (time.monotonic() - t0) * rate
    while got < due:
        b = s.recv(min(65536, int(due - got) + 1))
        if not b:
            done = True
            break
        got += len(b)
    time.sleep(0.02)
print(got)
