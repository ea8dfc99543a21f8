#!/usr/bin/env python3
"""Raw HTTP/1.x helpers for the http analyser tests (standard library only).

  http_raw.py origin --port P --log FILE [--mode MODE] [--raw FILE]
                     [--hold S]
      A threaded origin on 127.0.0.1:P that parses every request it gets
      (Content-Length or chunked bodies) and appends one JSON line per
      request to FILE: {"method", "target", "version", "headers": [[n, v]],
      "body_len", "body_sha256", "body" (latin1, first 4 KB), "trailers":
      [[n, v]], "raw" (the request's bytes as received, latin1, first
      16 KB), "conn": n}.
      MODE:
        empty   200 with an empty body, keep-alive (default)
        echo    200 whose body is the JSON record; also sends the headers
                Server: pyorigin, X-Resp-Drop: 1, X-Resp-Change: orig
        raw     sends the bytes of --raw as the response to the first
                request of each connection, then closes; when --raw is a
                directory, the file named after the request target (its
                slashes as '_', leading one removed; "@@PAUSE@@" in it:
                what follows goes 0.3 s later); with --hold S the
                connection stays open S seconds after (or until the peer
                closes it)
        once    answers the first request of a connection (keep-alive), then
                closes it when the second one arrives without answering:
                a stale pooled connection
        ws      101 Switching Protocols to a request with Upgrade, then
                echoes every byte back; others get 'empty'
      Runs until killed (or 120 s without any connection).

  http_raw.py send --port P [--data ESCAPED | --file F] [--timeout S]
               [--out FILE] [--half-close]
      Connects to 127.0.0.1:P, sends the bytes (ESCAPED is a Python string
      literal body: \\r \\n \\x00 ... are decoded, latin1), reads until the
      peer closes or --timeout of silence, writes all bytes read to --out,
      and prints one line: "statuses=200,404 closed=yes|no reset=yes|no
      bytes=N" (statuses of every status line found at a message start).
"""
import argparse
import codecs
import hashlib
import json
import re
import os
import socket
import socketserver
import sys
import threading
import time


# ---------------------------------------------------------------- origin

class BadRequest(Exception):
    pass


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.taken = b""    # what line() and exact() returned, capped

    def take(self, b):
        if len(self.taken) < 16384:
            self.taken += b[:16384 - len(self.taken)]

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\n" not in self.buf:
            if len(self.buf) > 1 << 20:
                raise BadRequest("line too long")
            self.fill()
        i = self.buf.index(b"\n")
        ln, self.buf = self.buf[:i + 1], self.buf[i + 1:]
        self.take(ln)
        return ln

    def exact(self, n, sink):
        while n > 0:
            if not self.buf:
                self.fill()
            k = min(n, len(self.buf))
            self.take(self.buf[:k])
            sink(self.buf[:k])
            self.buf = self.buf[k:]
            n -= k


def read_request(r):
    """Returns a record dict, or None on EOF before a request."""
    r.taken = b""
    trailers = []
    try:
        first = r.line()
    except EOFError:
        return None
    parts = first.rstrip(b"\r\n").split(b" ")
    if len(parts) != 3:
        raise BadRequest("request line %r" % first)
    headers = []
    while True:
        ln = r.line()
        if ln in (b"\r\n", b"\n"):
            break
        name, _, val = ln.rstrip(b"\r\n").partition(b":")
        headers.append([name.decode("latin1"), val.strip().decode("latin1")])
    h = hashlib.sha256()
    st = {"n": 0, "head": b""}

    def sink(b):
        h.update(b)
        st["n"] += len(b)
        if len(st["head"]) < 4096:
            st["head"] += b[:4096 - len(st["head"])]

    lower = {n.lower(): v for n, v in headers}
    if "transfer-encoding" in lower and \
            lower["transfer-encoding"].lower().endswith("chunked"):
        while True:
            sz = r.line().split(b";")[0].strip()
            n = int(sz, 16)
            if n == 0:
                while True:
                    ln = r.line()
                    if ln in (b"\r\n", b"\n"):
                        break
                    tn, _, tv = ln.rstrip(b"\r\n").partition(b":")
                    trailers.append([tn.decode("latin1"),
                                     tv.strip().decode("latin1")])
                break
            r.exact(n, sink)
            r.line()
    elif "content-length" in lower:
        r.exact(int(lower["content-length"]), sink)
    return {
        "method": parts[0].decode("latin1"),
        "target": parts[1].decode("latin1"),
        "version": parts[2].decode("latin1"),
        "headers": headers,
        "body_len": st["n"],
        "body_sha256": h.hexdigest(),
        "body": st["head"].decode("latin1"),
        "trailers": trailers,
        "raw": r.taken.decode("latin1"),
    }


class Origin(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


LOCK = threading.Lock()
CONN_NO = [0]


def origin_main(a):
    raw = open(a.raw, "rb").read() if a.raw and os.path.isfile(a.raw) else b""
    logf = open(a.log, "a")
    last = [time.time()]

    def record(rec):
        with LOCK:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            s = self.request
            last[0] = time.time()
            with LOCK:
                CONN_NO[0] += 1
                conn = CONN_NO[0]
            r = Reader(s)
            n = 0
            while True:
                try:
                    rec = read_request(r)
                except (BadRequest, ValueError) as e:
                    record({"conn": conn, "error": str(e)})
                    return
                except (EOFError, OSError):
                    return
                if rec is None:
                    return
                rec["conn"] = conn
                n += 1
                record(rec)
                last[0] = time.time()
                if a.mode == "raw":
                    resp = raw
                    if os.path.isdir(a.raw):
                        name = rec["target"].strip("/").replace("/", "_")
                        with open(os.path.join(a.raw, name), "rb") as f:
                            resp = f.read()
                    # @@PAUSE@@ in the bytes: what follows it is sent
                    # 0.3 s later, in a segment of its own
                    for k, part in enumerate(resp.split(b"@@PAUSE@@")):
                        if k:
                            time.sleep(0.3)
                        s.sendall(part)
                    if a.hold:
                        s.settimeout(a.hold)
                        try:
                            while s.recv(65536):
                                pass
                        except OSError:
                            pass
                    else:
                        time.sleep(0.2)
                    return
                if a.mode == "once" and n >= 2:
                    return          # stale: close without an answer
                lower = {k.lower(): v for k, v in rec["headers"]}
                if a.mode == "ws" and "upgrade" in lower:
                    s.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                              b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                    if r.buf:
                        s.sendall(r.buf)
                    while True:
                        d = s.recv(65536)
                        if not d:
                            return
                        s.sendall(d)
                if a.mode == "echo":
                    body = json.dumps(rec).encode()
                    s.sendall(b"HTTP/1.1 200 OK\r\nServer: pyorigin\r\n"
                              b"X-Resp-Drop: 1\r\nX-Resp-Change: orig\r\n"
                              b"Content-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body) + body)
                else:
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    srv = Origin(("127.0.0.1", a.port), H)
    srv.timeout = 1
    while time.time() - last[0] < 120:
        srv.handle_request()


# ---------------------------------------------------------------- client

def statuses(data, methods=()):
    """Status codes of the responses in data, following their framing;
    methods: of the requests, in order (a HEAD response has no body)."""
    out = []
    final = 0
    i = 0
    while i < len(data):
        if not data.startswith(b"HTTP/", i):
            break
        end = data.find(b"\r\n\r\n", i)
        if end < 0:
            out.append(data[i + 9:i + 12].decode("latin1"))
            break
        head = data[i:end].decode("latin1").split("\r\n")
        code = head[0][9:12]
        out.append(code)
        i = end + 4
        lower = {}
        for ln in head[1:]:
            n, _, v = ln.partition(":")
            lower[n.strip().lower()] = v.strip()
        if code.startswith("1"):
            continue
        final += 1
        if code in ("204", "304") or (len(methods) >= final and
                                      methods[final - 1] == b"HEAD"):
            continue
        if lower.get("transfer-encoding", "").lower().endswith("chunked"):
            while True:
                e = data.find(b"\r\n", i)
                if e < 0:
                    return out
                try:
                    n = int(data[i:e].split(b";")[0], 16)
                except ValueError:
                    return out
                i = e + 2
                if n == 0:
                    e = data.find(b"\r\n\r\n", i - 2)
                    i = e + 4 if e >= 0 else len(data)
                    break
                i += n + 2
        elif "content-length" in lower:
            i += int(lower["content-length"])
        else:
            break
    return out


def send_main(a):
    if a.file:
        data = open(a.file, "rb").read()
    else:
        data = codecs.decode(a.data, "unicode_escape").encode("latin1")
    s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
    s.settimeout(a.timeout)
    got = b""
    closed = reset = False
    try:
        s.sendall(data)
        if a.half_close:
            s.shutdown(socket.SHUT_WR)
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            got += d
    except socket.timeout:
        pass
    except ConnectionResetError:
        reset = closed = True
    except BrokenPipeError:
        reset = closed = True
    s.close()
    if a.out:
        open(a.out, "wb").write(got)
    print("statuses=%s closed=%s reset=%s bytes=%d" % (
        ",".join(statuses(got, re.findall(
            rb"(?:^|\n)([!-~]+) [!-~]+ HTTP/1\.[0-9]\r?\n", data))) or "-", "yes" if closed else "no",
        "yes" if reset else "no", len(got)))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("origin")
    o.add_argument("--port", type=int, required=True)
    o.add_argument("--log", required=True)
    o.add_argument("--mode", default="empty",
                   choices=["empty", "echo", "raw", "once", "ws"])
    o.add_argument("--raw")
    o.add_argument("--hold", type=float, default=0)
    c = sub.add_parser("send")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--data")
    c.add_argument("--file")
    c.add_argument("--timeout", type=float, default=3)
    c.add_argument("--out")
    c.add_argument("--half-close", action="store_true")
    a = p.parse_args()
    if a.cmd == "origin":
        origin_main(a)
    else:
        send_main(a)


if __name__ == "__main__":
    main()
