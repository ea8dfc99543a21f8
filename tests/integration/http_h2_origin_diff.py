#!/usr/bin/python3
"""The HTTP request corpus through proxyd towards an HTTP/1.1 server and
towards an HTTP/2 one (http_h2_origin_diff.sh): each case's bytes go to a
service with server-h2="no" and to one with server-h2="yes" in front of
the same origin, this script's own, which speaks HTTP/1.1 and h2c (prior
knowledge) on one port and records what each request brought: method,
path, authority, the fields (names lower-cased), the body. What the
origin saw and what the client got (statuses, bodies) must be the same
either way, after the mapping rules EXPLAINED lists (each with why).

usage: http_h2_origin_diff.py --no PORT --yes PORT --origin PORT
       [--vectors FILE] [--corpus-dir DIR]... [--max-seconds N]
Prints one line per difference and a summary; exits 1 on a difference."""
import argparse
import os
import re
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_h2_corpus import corpus_cases  # noqa: E402

# The differences by design between what an HTTP/1.1 server and an
# HTTP/2 server are sent, and the mapping that removes each.
EXPLAINED = [
    ("host", "HTTP/2 carries Host as :authority (RFC 9113 8.3.1): the "
     "HTTP/1.1 side's Host is compared with the HTTP/2 side's :authority"),
    ("transfer-encoding", "a chunked body is DATA frames over HTTP/2 "
     "(RFC 9113 8.2.2 forbids Transfer-Encoding): the HTTP/1.1 side's "
     "transfer-encoding is not compared, the body bytes are"),
    ("te", "te: trailers goes to an HTTP/2 server (RFC 9113 8.2.2) and is "
     "hop-by-hop over HTTP/1.1: the HTTP/2 side's te is not compared"),
    ("via", "Via names the protocol each hop was received in (RFC 9110 "
     "7.6.3): 1.1 or 1.0 towards either server, as the client's; the "
     "response's Via (2 proxyd for an HTTP/2 server) is not compared"),
    (":scheme", "HTTP/2's :scheme has no HTTP/1.1 counterpart"),
    ("session N", "proxyd's own error pages name their session: the "
     "number is not compared"),
]

LOCK = threading.Lock()
RECORDS = []


def record(proto, method, path, authority, fields, body):
    with LOCK:
        RECORDS.append({"proto": proto, "method": method, "path": path,
                        "authority": authority, "fields": fields,
                        "body": body})


def answer_body(method, path, body):
    return b"r:%s %s %d" % (method, path, len(body))


def serve_h2(conn, first):
    cfg = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                    validate_inbound_headers=False,
                                    normalize_inbound_headers=False)
    h = h2.connection.H2Connection(config=cfg)
    h.initiate_connection()
    conn.sendall(h.data_to_send())
    st = {}
    data = first
    while True:
        for ev in h.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                st[ev.stream_id] = {"hdrs": ev.headers, "body": b""}
            elif isinstance(ev, h2.events.DataReceived):
                st[ev.stream_id]["body"] += ev.data
                h.acknowledge_received_data(ev.flow_controlled_length,
                                            ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                s = st.pop(ev.stream_id)
                ps = {}
                fields = []
                for n, v in s["hdrs"]:
                    if n.startswith(b":"):
                        ps[n] = v
                    else:
                        fields.append((n.lower(), v))
                method = ps.get(b":method", b"")
                path = ps.get(b":path", b"")
                record("h2", method, path, ps.get(b":authority"), fields,
                       s["body"])
                rb = answer_body(method, path, s["body"])
                h.send_headers(ev.stream_id, [
                    (b":status", b"200"),
                    (b"content-length", str(len(rb)).encode())],
                    end_stream=method == b"HEAD")
                if method != b"HEAD":
                    h.send_data(ev.stream_id, rb, end_stream=True)
        out = h.data_to_send()
        if out:
            conn.sendall(out)
        try:
            data = conn.recv(65536)
        except OSError:
            return
        if not data:
            return


class H1:
    def __init__(self, conn, first):
        self.c = conn
        self.buf = first

    def more(self):
        d = self.c.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        d, self.buf = self.buf[:n], self.buf[n:]
        return d


def serve_h1(conn, first):
    r = H1(conn, first)
    try:
        while True:
            method, target, _ = r.line().split(b" ", 2)
            fields = []
            while True:
                ln = r.line()
                if not ln:
                    break
                n, v = ln.split(b":", 1)
                fields.append((n.lower(), v.strip(b" \t")))
            d = dict(fields)
            body = b""
            if b"chunked" in d.get(b"transfer-encoding", b"").lower():
                while True:
                    size = int(r.line().split(b";")[0], 16)
                    if size == 0:
                        while r.line():
                            pass
                        break
                    body += r.take(size)
                    r.take(2)
            elif b"content-length" in d:
                body = r.take(int(d[b"content-length"]))
            auth = d.get(b"host")
            record("h1", method, target, auth,
                   [f for f in fields if f[0] != b"host"], body)
            rb = answer_body(method, target, body)
            head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(rb)
            conn.sendall(head + (b"" if method == b"HEAD" else rb))
    except (EOFError, OSError, ValueError):
        return


def serve(conn):
    try:
        first = conn.recv(65536)
    except OSError:
        conn.close()
        return
    if first.startswith(b"PRI * HTTP/2.0"):
        serve_h2(conn, first)
    else:
        serve_h1(conn, first)
    conn.close()


def origin(port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def client(port, data, timeout):
    """The response bytes to data sent at once (then the write side shut),
    read until proxyd closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    got = b""
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(timeout)
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    s.close()
    return got


def responses(got):
    """(status, body) of each final response in got."""
    out = []
    i = 0
    while True:
        end = got.find(b"\r\n\r\n", i)
        if end < 0 or not got.startswith(b"HTTP/1.", i):
            break
        head = got[i:end]
        status = int(head[9:12])
        cl = None
        chunked = False
        for ln in head.split(b"\r\n")[1:]:
            n, _, v = ln.partition(b":")
            if n.strip().lower() == b"content-length":
                cl = int(v.strip())
            if n.strip().lower() == b"transfer-encoding":
                chunked = b"chunked" in v.lower()
        i = end + 4
        body = b""
        if status < 200:
            continue
        if cl is not None:
            body = got[i:i + cl]
            i += cl
        elif chunked:
            while True:
                e = got.find(b"\r\n", i)
                if e < 0:
                    break
                size = int(got[i:e].split(b";")[0], 16)
                if size == 0:
                    t = got.find(b"\r\n\r\n", e)
                    i = t + 4 if t >= 0 else len(got)
                    break
                body += got[e + 2:e + 2 + size]
                i = e + 2 + size + 2
        else:
            body = got[i:]
            i = len(got)
        out.append((status, re.sub(rb"proxyd, session [0-9]+",
                                   b"proxyd, session N", body)))
    return out


def take_records(before, settle):
    """The records the origin added since `before`, once none came for
    settle seconds (a request still under way finishes first)."""
    last = -1
    deadline = time.time() + 2
    while time.time() < deadline:
        with LOCK:
            n = len(RECORDS)
        if n == last:
            break
        last = n
        time.sleep(settle)
    with LOCK:
        return RECORDS[before:]


def view(rec):
    """A record made comparable: the EXPLAINED mappings applied."""
    drop = {b"transfer-encoding", b"te", b"via"}
    return (rec["method"], rec["path"], rec["authority"],
            [f for f in rec["fields"] if f[0] not in drop], rec["body"])


def one_case(a, data):
    """The case through both services: its differences (empty: none) and
    whether the origin saw anything of it."""
    res = {}
    for side, port in (("h1", a.no), ("h2", a.yes)):
        with LOCK:
            before = len(RECORDS)
        got = client(port, data, a.timeout)
        recs = take_records(before, 0.005)
        res[side] = (responses(got), [view(r) for r in recs],
                     [r["proto"] for r in recs])
    (r1, o1, p1), (r2, o2, p2) = res["h1"], res["h2"]
    bad = []
    if any(p != "h1" for p in p1) or any(p != "h2" for p in p2):
        bad.append("protocols %s / %s" % (p1, p2))
    if o1 != o2:
        bad.append("origin saw %r / %r" % (o1, o2))
    if r1 != r2:
        bad.append("client got %r / %r" % (r1, r2))
    return bad, bool(o1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no", type=int, required=True)
    ap.add_argument("--yes", type=int, required=True)
    ap.add_argument("--origin", type=int, required=True)
    ap.add_argument("--vectors")
    ap.add_argument("--corpus-dir", action="append", default=[])
    ap.add_argument("--max-seconds", type=float, default=45)
    ap.add_argument("--timeout", type=float, default=3)
    a = ap.parse_args()
    threading.Thread(target=origin, args=(a.origin,), daemon=True).start()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", a.origin), 1).close()
            break
        except OSError:
            time.sleep(0.05)
    for name, why in EXPLAINED:
        print("explained: %s: %s" % (name, why))
    start = time.time()
    n = forwarded = diffs = 0
    for name, data in corpus_cases(a):
        if time.time() - start > a.max_seconds:
            print("stopped at the time bound after %d cases" % n)
            break
        n += 1
        bad, fwd = one_case(a, data)
        if fwd:
            forwarded += 1
        if bad:
            diffs += 1
            print("DIFF %s: %s" % (name, "; ".join(bad))[:2000])
    print("cases=%d forwarded=%d differences=%d seconds=%.1f" % (
        n, forwarded, diffs, time.time() - start))
    sys.exit(1 if diffs or forwarded == 0 else 0)


main()
