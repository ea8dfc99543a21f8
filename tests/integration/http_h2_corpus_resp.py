#!/usr/bin/python3
"""The llhttp response vectors through HTTP/2 (issue 29), compared with
HTTP/1.1: the HTTP/2 writer (http_h2_txn.c) sends the parsed response as
HEADERS, DATA and trailers, and must change nothing but its framing.

  http_h2_corpus_resp.py --vectors F --port P --raw-dir D --proxyd-log F

The origin (http_raw.py origin, mode raw, --raw D) answers GET /case-N
with the vector's bytes. Each case is fetched through the same service as
HTTP/1.1 and as an h2c stream; compared:
  - a complete final response over HTTP/1.1: the same status, interim
    (1xx) statuses, body bytes, trailers and fields over h2, the stream
    ended cleanly; fields compared by lower-case name, without those
    connection-specific ones h2 never carries (RFC 9113 8.2.2) and
    Content-Length when the HTTP/1.1 side got it chunked (the leg
    passes the origin's framing field: its length, or none);
  - a 502 (the leg refused the origin's response): 502 over h2;
  - a response cut short (reset, closed early, nothing): over h2 the
    stream is reset, or ends without a final response;
  - over h2, field names in lower case and no connection-specific
    field, in headers and trailers (what a lenient client would let by);
  - HEAD (for some): the same, and no body over either;
  - the http-request lines of the two (method, host, path, status,
    verdict, rule, http-error reason).
Prints each differing case and the counts; exit 1 if any differ.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import socket
import sys
import time

from http_corpus import parse_responses
from http_h2_corpus import Sessions, send_h2

SESSION = re.compile(rb"<hr><p>proxyd, session [0-9]+</p>")
CONN_SPECIFIC = {"connection", "keep-alive", "proxy-connection",
                 "transfer-encoding", "upgrade", "te"}


def head_only(got):
    """A response to HEAD in got: [(status, fields, what follows its
    head, complete)] for its interim and final heads."""
    out = []
    i = 0
    while got.startswith(b"HTTP/1.", i):
        end = got.find(b"\r\n\r\n", i)
        if end < 0:
            out.append((int(got[i + 9:i + 12] or 0), [], b"", False))
            break
        lines = got[i:end].decode("latin1").split("\r\n")
        st = int(lines[0][9:12])
        hdrs = []
        for ln in lines[1:]:
            n, _, v = ln.partition(":")
            hdrs.append((n.strip().lower(), v.strip()))
        i = end + 4
        out.append((st, hdrs, got[i:] if st >= 200 else b"", True))
        if st >= 200:
            break
    return out


def fetch_h1(port, path, timeout, ports, method=b"GET"):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    ports.append(s.getsockname()[1])
    s.settimeout(timeout)
    got = b""
    reset = False
    try:
        s.sendall(b"%s %s HTTP/1.1\r\nHost: a\r\n\r\n" % (method, path))
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass        # closed already: what it sent is still read
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        pass
    except OSError:        # reset, or not connected any more
        reset = True
    s.close()
    resps = head_only(got) if method == b"HEAD" else \
        parse_responses(got, first_only=True)
    finals = [r for r in resps if r[0] >= 200]
    out = {"interim": [r[0] for r in resps if r[0] < 200], "reset": reset}
    if not finals:
        out["status"] = None
        return out
    st, hdrs, body, complete = finals[0]
    out.update(status=st, fields=hdrs, body=body, complete=complete and
               not reset, trailers=chunk_trailers(got))
    return out


def chunk_trailers(got):
    """The trailer fields of the final response in got (chunked), as
    (lower-case name, value); [] when none."""
    i = 0
    while True:
        end = got.find(b"\r\n\r\n", i)
        if end < 0 or not got.startswith(b"HTTP/1.1 ", i):
            return []
        head = got[i:end].lower()
        i = end + 4
        if head[9:10] != b"1":
            break
    if b"\r\ntransfer-encoding: chunked" not in head:
        return []
    while True:
        e = got.find(b"\r\n", i)
        if e < 0:
            return []
        n = int(got[i:e].split(b";")[0], 16)
        i = e + 2
        if n == 0:
            break
        i += n + 2
    out = []
    for ln in got[i:].split(b"\r\n"):
        if not ln:
            break
        k, _, v = ln.partition(b":")
        out.append((k.decode("latin1").lower(), v.decode("latin1").strip()))
    return sorted(out)


def h2_malformed(headers):
    """What makes an HTTP/2 field section malformed (RFC 9113 8.2.1,
    8.2.2) that a lenient client would not see: upper-case names, a
    connection-specific field. None if nothing."""
    for n, _ in headers or []:
        if n != n.lower():
            return "upper-case name %r over h2" % n
        if n.decode("latin1") in CONN_SPECIFIC:
            return "connection-specific field %r over h2" % n
    return None


def fields_h2(headers):
    return [(n.decode("latin1").lower(), v.decode("latin1").strip())
            for n, v in headers if not n.startswith(b":")]


def comparable(fields, chunked):
    out = [(n, v) for n, v in fields if n not in CONN_SPECIFIC and
           not (chunked and n == "content-length")]
    return sorted(out)


def judge(r1, r2):
    st1 = r1["status"]
    st2 = r2["status"]
    bad = h2_malformed(r2["headers"]) or h2_malformed(r2["trailers"])
    if bad:
        return bad
    h1_whole = st1 is not None and r1["complete"]
    h2_whole = isinstance(st2, int) and r2["ended"]
    if not h1_whole:
        if h2_whole:
            return "h1 cut (status %s, %d bytes), h2 a complete %s" % (
                st1, len(r1.get("body", b"")), st2)
        return None
    if st2 != st1:
        return "status h1=%s h2=%s" % (st1, st2)
    if not r2["ended"]:
        return "h2 stream not ended cleanly (reset %s)" % r2.get("reset")
    # proxyd's own pages name their session (by design a leg's is
    # another than the HTTP/1.1 client's): and so their length differs.
    b1, n1 = SESSION.subn(b"session N", r1["body"])
    b2, n2 = SESSION.subn(b"session N", r2["body"])
    if b1 != b2:
        return "body h1=%r h2=%r" % (r1["body"][-80:], r2["body"][-80:])
    own = n1 != 0
    if r1["interim"] != r2["interim"]:
        return "interim h1=%s h2=%s" % (r1["interim"], r2["interim"])
    chunked = any(n == "transfer-encoding" for n, _ in r1["fields"])
    # A 1xx or 204 carries no Content-Length (RFC 9110 8.6); over h2 a
    # client resets a stream whose HEADERS say one: proxyd leaves it out
    # there, and passes an HTTP/1.1 server's as it is to HTTP/1.1.
    nolen = st1 == 204 or st1 < 200
    f1 = comparable(r1["fields"], chunked or own or nolen)
    f2 = comparable(fields_h2(r2["headers"]), chunked or own or nolen)
    if f1 != f2:
        return "fields h1=%s h2=%s" % (f1, f2)
    t2 = sorted(fields_h2(r2["trailers"] or []))
    if r1["trailers"] != t2:
        return "trailers h1=%s h2=%s" % (r1["trailers"], t2)
    return None


# Hand-made responses the vectors lack: hop-by-hop fields of every kind.
EXTRA = [
    b"HTTP/1.1 200 OK\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\n"
    b"X-End: 2\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nProxy-Connection: x\r\n"
    b"TE: trailers\r\nUpgrade: foo\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n"
    b"\r\n2\r\nok\r\n0\r\nX-Sum: 42\r\nX-Other: 1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
    b"X-Empty:\r\nX-Spaces:  a  b  \r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n\r\nclose-delimited body",
]

NAME_CH = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
VALUE_CH = bytes(range(0x20, 0x7f)) + b"\t\x80\xff"
STATUSES = [200, 200, 200, 201, 204, 206, 301, 304, 400, 404, 418, 500, 503,
            599, 299]


def random_response(rnd):
    st = rnd.choice(STATUSES)
    head = b""
    if rnd.random() < 0.1:
        head = b"HTTP/1.1 100 Continue\r\n\r\n"
    lines = [b"HTTP/1.1 %d X" % st]
    for _ in range(rnd.randrange(6)):
        name = rnd.choice([b"Set-Cookie", b"Connection", b"Keep-Alive",
                           b"Content-Type", b"Vary", b"Server", b"Via",
                           b"Upgrade", b"TE", b"Trailer",
                           bytes(rnd.choice(NAME_CH)
                                 for _ in range(1 + rnd.randrange(8)))])
        value = bytes(rnd.choice(VALUE_CH) for _ in range(rnd.randrange(12)))
        if name == b"Connection":
            value = rnd.choice([b"close", b"keep-alive", b"x-hop",
                                b"Server, x-hop"])
        lines.append(name + b": " + value.strip(b" \t"))
    if rnd.random() < 0.2:
        lines.append(b"X-Hop: 1")
    body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(200)))
    kind = rnd.choice(["length", "chunked", "close"])
    if kind == "length":
        lines.append(b"Content-Length: %d" % len(body))
        msg = b"\r\n".join(lines) + b"\r\n\r\n" + body
    elif kind == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        tr = b"X-T: %d\r\n" % rnd.randrange(9) if rnd.random() < 0.4 else b""
        msg = b"\r\n".join(lines) + b"\r\n\r\n" + (
            b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + \
            b"0\r\n" + tr + b"\r\n"
    else:
        msg = b"\r\n".join(lines) + b"\r\n\r\n" + body
    return head + msg


def run_case(a, idx, case):
    name = "case-%d" % idx
    with open(os.path.join(a.raw_dir, name), "wb") as f:
        f.write(case["input_latin1"].encode("latin1"))
    path = b"/" + name.encode()
    p1, p2 = [], []
    method = case.get("method", "GET").encode()
    r1 = fetch_h1(a.port, path, a.timeout, p1, method)
    got = {}
    st = send_h2(a.port, [(b":method", method), (b":scheme", b"http"),
                          (b":authority", b"a"), (b":path", path)],
                 b"", None, a.timeout, p2, got=got)
    r2 = {"status": st, "headers": got["headers"] or [], "body": got["body"],
          "interim": got["interim"], "ended": bool(got.get("ended")),
          "trailers": got["trailers"],
          "reset": got.get("reset")}
    return idx, case, r1, r2, p1[0], p2[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vectors", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--raw-dir", required=True)
    p.add_argument("--proxyd-log", required=True)
    p.add_argument("--timeout", type=float, default=3.0)
    p.add_argument("--only", type=int)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--random", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    cases = [(i, c) for i, c in enumerate(json.load(open(a.vectors)))
             if c["type"].startswith("response")]
    n = len(json.load(open(a.vectors)))
    for k, raw in enumerate(EXTRA):
        cases.append((n + k, {"input_latin1": raw.decode("latin1"),
                              "file": "extra", "line": k, "name": "extra"}))
    rnd = random.Random(a.seed)
    for k in range(a.random):
        cases.append((n + 1000 + k, {
            "input_latin1": random_response(rnd).decode("latin1"),
            "file": "random seed=%d" % a.seed, "line": k, "name": "random"}))
    # HEAD too, for the hand-made ones and every fourth random one: a
    # body the origin sends anyway must not reach the client.
    heads = [(i + 5000, dict(c, method="HEAD", name=c["name"] + " (HEAD)"))
             for i, c in cases if i >= n and (i < n + 1000 or i % 4 == 0)]
    cases = [(i, c) for i, c in cases + heads
             if a.only is None or a.only == i]
    logpos = os.path.getsize(a.proxyd_log)
    with open(a.proxyd_log, "rb") as f:
        ends0 = f.read().count(b" session-end ")
    t0 = time.time()
    # The origin holds each connection 0.2 s after its answer: a few at
    # a time (sessions are told apart by client port, not by order).
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        done = list(ex.map(lambda ic: run_case(a, *ic), cases))
    Sessions.settle(a.proxyd_log, ends0 + 2 * len(done))
    log = Sessions(a.proxyd_log, logpos)
    counts = {"agree": 0, "differ": 0}
    for idx, case, r1, r2, port1, port2 in done:
        why = judge(r1, r2)
        l1, l2 = log.take(port1, False), log.take(port2, True)
        if why is None and l1 != l2:
            why = "log h1=%s h2=%s" % (l1, l2)
        if why is None:
            counts["agree"] += 1
            if a.verbose:
                print("agree: case-%d %s %s %r trailers %s %s log %s" % (
                    idx, r1["status"], r2["status"], r2["body"][:40],
                    r1.get("trailers"), r2["trailers"], l2))
            continue
        counts["differ"] += 1
        print("DIFFER: case-%d %s:%d %r %r: %s" % (
            idx, case["file"], case["line"], case["name"],
            case["input_latin1"][:300], why))
    print("counts: responses=%d agree=%d differ=%d (%.1f s)" % (
        len(done), counts["agree"], counts["differ"], time.time() - t0))
    sys.exit(1 if counts["differ"] else 0)


if __name__ == "__main__":
    main()
