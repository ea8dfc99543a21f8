#!/usr/bin/env python3
"""A TCP relay that records each connection's ClientHello, for the JA4
tests: the bytes a client sent before proxyd saw them.

    hello_relay.py DIR LISTEN:TARGET [LISTEN:TARGET ...]

Each LISTEN port on 127.0.0.1 is relayed to TARGET on 127.0.0.1, both
ways. The TLS records that carry a connection's ClientHello (the first
handshake message, whole) are written in hex to DIR/LISTEN.PORT.hex,
PORT the relay's own port towards TARGET, which is the client port
proxyd logs (written first to .tmp, then renamed, so a file that exists
is complete). Exits after 60 s without a new connection or after 200
connections."""
import os
import select
import socket
import sys
import threading


def hello_end(buf):
    """Length of the records holding a whole ClientHello, or 0."""
    o, hs = 0, b""
    while len(buf) - o >= 5 and buf[o] == 0x16:
        n = int.from_bytes(buf[o + 3:o + 5], "big")
        if len(buf) - o - 5 < n:
            return 0
        hs += buf[o + 5:o + 5 + n]
        o += 5 + n
        if len(hs) >= 4 and len(hs) >= 4 + int.from_bytes(hs[1:4], "big"):
            return o
    return 0


def pump(c, s, path):
    seen, done = b"", False
    socks = [c, s]
    try:
        while socks:
            r, _, _ = select.select(socks, [], [], 30)
            if not r:
                break
            for a in r:
                b = a.recv(65536)
                other = s if a is c else c
                if not b:
                    socks.remove(a)
                    try:
                        other.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    continue
                if a is c and not done:
                    seen += b
                    end = hello_end(seen)
                    if end or len(seen) > 65536:
                        done = True
                        with open(path + ".tmp", "w") as f:
                            f.write(seen[:end].hex())
                        os.rename(path + ".tmp", path)
                other.sendall(b)
    except OSError:
        pass
    finally:
        c.close()
        s.close()


def serve(d, lport, target, counter, lock):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", lport))
    srv.listen(16)
    srv.settimeout(60)
    while True:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            return
        with lock:
            counter[0] += 1
            if counter[0] > 200:
                c.close()
                return
        try:
            s = socket.create_connection(("127.0.0.1", target), timeout=10)
        except OSError:
            c.close()
            continue
        threading.Thread(target=pump, daemon=True, args=(c, s,
                         os.path.join(d, "%d.%d.hex" % (
                             lport, s.getsockname()[1])))).start()


def main():
    d = sys.argv[1]
    counter, lock = [0], threading.Lock()
    threads = []
    for pair in sys.argv[2:]:
        lp, tp = pair.split(":")
        t = threading.Thread(target=serve, args=(d, int(lp), int(tp),
                                                  counter, lock))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
