#!/usr/bin/env python3
"""Long-lived byte streams through a proxy, for upgrade_handover.sh.

  upgrade_streams.py echo PORT             an echo server (a thread per
                                           connection; FIN answered by FIN)
  upgrade_streams.py client SPEC STOPFILE  streams until STOPFILE exists

SPEC: PORT:N[,PORT:N...], N connections to 127.0.0.1:PORT. Each sends a
stream of bytes derived from its number and offset (so a lost, duplicated
or reordered byte is seen), reads its echo and checks every byte, until
STOPFILE appears; then it ends its side, reads the rest up to the echo's
FIN and prints one line per connection: "conn LOCALPORT sent=N recv=N
ok|bad WHY". Prints "streaming" once every connection has seen its first
echo. Exit 0 when every connection is ok.
"""
import os
import socket
import sys
import threading
import time


def pattern(conn_no, off, n):
    # A byte that depends on the connection and the offset.
    return bytes(((off + i) * 7 + conn_no * 13 + ((off + i) >> 8)) & 0xFF
                 for i in range(n))


def echo_server(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    parent = os.getppid()

    def serve(c):
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                c.sendall(b)
            c.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            c.close()

    srv.settimeout(1)
    while os.getppid() == parent:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()


class Stream:
    def __init__(self, no, port):
        self.no = no
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.lport = self.sock.getsockname()[1]
        self.sent = 0
        self.recv = 0
        self.bad = None
        self.first = threading.Event()

    def reader(self):
        try:
            while True:
                b = self.sock.recv(65536)
                if not b:
                    break
                if b != pattern(self.no, self.recv, len(b)):
                    self.bad = "a wrong byte at offset %d" % self.recv
                    return
                self.recv += len(b)
                self.first.set()
        except OSError as e:
            self.bad = "read: %s" % e

    def writer(self, stopfile):
        try:
            while not os.path.exists(stopfile) and self.bad is None:
                chunk = pattern(self.no, self.sent, 2048)
                self.sock.sendall(chunk)
                self.sent += len(chunk)
                time.sleep(0.01)
            self.sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            self.bad = "write: %s" % e


def client(spec, stopfile):
    streams = []
    no = 0
    for part in spec.split(","):
        port, n = part.split(":")
        for _ in range(int(n)):
            streams.append(Stream(no, int(port)))
            no += 1
    threads = []
    for s in streams:
        for f, a in ((s.reader, ()), (s.writer, (stopfile,))):
            t = threading.Thread(target=f, args=a, daemon=True)
            t.start()
            threads.append(t)
    for s in streams:
        if not s.first.wait(20):
            print("conn %d: no echo" % s.lport, flush=True)
            return 1
    print("streaming", flush=True)
    for t in threads:
        t.join(300)
    rc = 0
    for s in streams:
        if s.bad is None and s.recv != s.sent:
            s.bad = "received %d of %d" % (s.recv, s.sent)
        print("conn %d sent=%d recv=%d %s" % (s.lport, s.sent, s.recv,
              "ok" if s.bad is None else "bad " + s.bad), flush=True)
        if s.bad is not None:
            rc = 1
    return rc


if __name__ == "__main__":
    if sys.argv[1] == "echo":
        echo_server(int(sys.argv[2]))
    else:
        sys.exit(client(sys.argv[2], sys.argv[3]))
