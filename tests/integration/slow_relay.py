#!/usr/bin/env python3
"""A TCP relay that paces what its clients send, so that transfers
through it last long enough to overlap:

    slow_relay.py LISTEN TARGET CHUNK DELAY

Each connection to 127.0.0.1:LISTEN is relayed to 127.0.0.1:TARGET, both
ways at most CHUNK bytes every DELAY seconds (small socket buffers, so
the sender is held back at once). Prints "listening" once it accepts; exits after 60 s without
a new connection."""
import socket
import sys
import threading
import time

listen, target, chunk, delay = (int(sys.argv[1]), int(sys.argv[2]),
                                int(sys.argv[3]), float(sys.argv[4]))


def pump(src, dst):
    try:
        while True:
            b = src.recv(chunk)
            if not b:
                break
            dst.sendall(b)
            time.sleep(delay)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(c):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    try:
        t = socket.socket()
        t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        t.settimeout(10)
        t.connect(("127.0.0.1", target))
    except OSError:
        c.close()
        return
    t.settimeout(None)
    threading.Thread(target=pump, args=(c, t), daemon=True).start()
    pump(t, c)


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
srv.bind(("127.0.0.1", listen))
srv.listen(64)
srv.settimeout(60)
print("listening", flush=True)
while True:
    try:
        conn, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
