#!/usr/bin/python3
"""The HTTP/1.1 request corpus again through HTTP/2 (issue 29), judged
differentially: each request HTTP/2 can express goes to one proxyd
service as an h2c (prior knowledge) stream and to an identical one as
HTTP/1.1, and the two outcomes must agree.

  http_h2_corpus.py --h1-port P --h2-port P --origin-log F --proxyd-log F
                    [--vectors F] [--corpus-dir D]
                    [--random N --seed S] [--only NAME] [--verbose]

Cases: the request vectors of llhttp (--vectors, every request mode) and
the files of each --corpus-dir (the http fuzz seeds, the h2o HTTP/1 seed
corpus). A case is parsed strictly into
messages (method, target, fields, body, trailers); one HTTP/2 cannot
express (HTTP/1.x framing tricks, obs-fold, bare CR, chunk extensions,
...) is skipped with a counted reason. --random N adds N random requests
(seeded methods, paths, field names and values, bodies).

Each message goes on a fresh connection to both sides: HTTP/1.1 as its
own bytes, HTTP/2 as HEADERS (+ DATA, + trailing HEADERS), built with
python3-h2 with its own checks off (the bytes are the corpus's, not what
a polite client sends). Compared, after the by-design differences below
(TRANSLATION and normalise_origin):
  - outcome: the final status, with RST_STREAM counted as a 400 refusal
    (nghttp2 resets a malformed stream where HTTP/1.1 answers 400);
  - the origin (http_raw.py origin): method, target, field multiset
    (names lower case), body bytes, trailers; or that nothing reached it;
  - the proxyd log: the http-request line's method, host, path, status,
    verdict and rule (an h2 stream nghttp2 refuses has none: it logs an
    http2-error line instead, counted as the refusal).
Prints a line per differing case and the counts; exit 1 if any differ.
"""
import argparse
import hashlib
import json
import os
import random
import re
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")

# How an HTTP/1.1 request becomes an HTTP/2 one, and so what may differ
# by design. Each entry: a field name (lower case) and why the h2 side
# leaves it out (the h1 side's proxyd drops or replaces it too before
# the origin: normalise_origin leaves it out of the comparison there).
TRANSLATION = {
    b"host": "carried as :authority (RFC 9113 8.3.1), or as host fields "
             "when there are several; proxyd writes Host from them",
    b"connection": "connection-specific: an HTTP/2 request with it is "
                   "malformed (RFC 9113 8.2.2)",
    b"keep-alive": "connection-specific (RFC 9113 8.2.2)",
    b"proxy-connection": "connection-specific (RFC 9113 8.2.2)",
    b"transfer-encoding": "chunked framing is the DATA frames in HTTP/2 "
                          "(RFC 9113 8.2.2); proxyd re-chunks a body "
                          "without Content-Length",
    b"upgrade": "connection-specific; HTTP/2 has no Upgrade (RFC 9113 8.6)",
}
# And a TE other than "trailers" (RFC 9113 8.2.2; the h1 side's proxyd
# drops TE as hop-by-hop).
# Other expected differences, with the reason (documented here, applied
# in the comparison):
BY_DESIGN = {
    "names": "HTTP/2 field names are lower case (RFC 9113 8.2.1): names "
             "are compared case-insensitively",
    "order": "Host goes first and Cookie last towards the server (RFC 9113 8.2.3 "
             "joins cookie crumbs): fields are compared as a multiset, "
             "Cookie fields joined with '; ', an empty one (nothing to "
             "join) left out",
    "connection-named": "fields named in Connection are hop-by-hop: the "
                        "h2 side leaves them out (RFC 9113 8.2.2), the h1 "
                        "side's proxyd drops them",
    "chunked": "a chunked HTTP/1.1 body goes as DATA without a length; "
               "proxyd sends it chunked again, as it does a request "
               "whose END_STREAM comes on a DATA frame (its length is "
               "unknown when the head goes): the origin's framing "
               "(Content-Length, Transfer-Encoding) is not compared, its "
               "body bytes and trailers are",
    "log-tag": "the h2 stream's http-request line ends with proto=h2 "
               "stream=N",
    "rst": "nghttp2 resets a malformed stream (PROTOCOL_ERROR) and "
           "proxyd logs http2-error kind=malformed where an HTTP/1.1 "
           "request gets a 400 and an http-request line",
}



def absolute_form(m):
    return re.match(rb"(?i)^http://", m["target"]) is not None


def field_names(m):
    return [n.lower() for n, _ in m["fields"]]


def dropped_values(m):
    """Values of the fields the translation leaves out (but Host)."""
    named = set()
    for n, v in m["fields"]:
        if n.lower() == b"connection":
            named |= {t.strip().lower() for t in v.split(b",")}
    return [v for n, v in m["fields"] if n.lower() != b"host" and
            (n.lower() in TRANSLATION or n.lower() in named or
             (n.lower() == b"te" and v.lower() != b"trailers"))]


def refused_h1(res):
    return res["h1"]["status"] == 400


def is_h2_refusal(st):
    return isinstance(st, str) and st.startswith(("rst:", "goaway:"))


# Outcomes that differ by design: (when, how they differ, why). A
# differing message that matches one is counted as explained.
EXPECTED = [
    (lambda m: m["target"] == b"*" and m["method"] != b"OPTIONS",
     lambda r: is_h2_refusal(r["h2"]["status"]),
     "asterisk-form for a method other than OPTIONS: nghttp2 resets it "
     "(RFC 9113 8.3.1 allows '*' only for OPTIONS), the HTTP/1.1 analyser "
     "forwards it"),
    (lambda m: absolute_form(m) and b"host" not in field_names(m),
     lambda r: refused_h1(r) and r["h1"]["log"] is not None,
     "absolute-form without Host: HTTP/1.1 requires Host anyway (RFC 9112 "
     "3.2: 400 missing Host), in HTTP/2 the target's authority is "
     ":authority, which stands for Host (RFC 9113 8.3.1)"),
    (lambda m: absolute_form(m) and b"host" in field_names(m),
     lambda r: refused_h1(r) and r["h1"]["log"] is not None and
     r["h1"]["log"][6] in ("malformed Host", "duplicate Host"),
     "absolute-form with Host fields HTTP/1.1 refuses (several, or a "
     "malformed one): RFC 9112 3.2 refuses them whatever the target; in "
     "HTTP/2 the target's authority is :authority and the translation, "
     "as an intermediary's (RFC 9113 8.3.1), carries no Host"),
    (lambda m: any(re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", v) or
                   len(v) > 100 for v in dropped_values(m)),
     lambda r: r["h1"]["status"] in (400, 431) and
     not is_h2_refusal(r["h2"]["status"]),
     "a connection-specific field with a control character or over "
     "max-line: the HTTP/1.1 analyser refuses it (400, 431); the "
     "translation leaves the field out, so HTTP/2 never carries it"),
]

# Not compared at the origin (hop-by-hop; or framing: see "chunked").
HOP = ("connection", "keep-alive", "proxy-connection",
       "transfer-encoding", "upgrade", "content-length")


class Skip(Exception):
    """The case cannot be expressed in HTTP/2: the reason."""


# ------------------------------------------------------------ parsing

def read_line(data, i, what):
    """The line at i (without CRLF) and the next offset: CRLF only."""
    j = data.find(b"\n", i)
    if j < 0:
        raise Skip("incomplete message")
    if j == i or data[j - 1:j] != b"\r":
        raise Skip("bare LF line end")
    line = data[i:j - 1]
    if b"\r" in line:
        raise Skip("bare CR")
    return line, j + 1


def read_fields(data, i):
    fields = []
    while True:
        line, i = read_line(data, i, "field")
        if line == b"":
            return fields, i
        if line[:1] in (b" ", b"\t"):
            raise Skip("obs-fold")
        if b":" not in line:
            raise Skip("field line without a colon")
        name, _, value = line.partition(b":")
        if name[-1:] in (b" ", b"\t"):
            raise Skip("whitespace before a field's colon")
        if name == b"":
            raise Skip("empty field name")
        fields.append((name, value.strip(b" \t")))


def parse_message(data, i):
    """One request at data[i:]: (message dict, next offset)."""
    start = i
    if data[i:i + 1] in (b"\r", b"\n"):
        raise Skip("empty line before the request line")
    line, i = read_line(data, i, "request")
    parts = line.split(b" ")
    if len(parts) != 3 or b"" in parts:
        raise Skip("request line not three single-space parts")
    method, target, version = parts
    if version != b"HTTP/1.1":
        raise Skip("HTTP version other than 1.1 (its own semantics)")
    if not TOKEN.match(method):
        raise Skip("method not a token")
    if method == b"CONNECT":
        raise Skip("CONNECT (tunnels over h2: http_h2_stream.c, tested by http_h2_connect)")
    if re.search(rb"[\x00\t\r\n ]", target):
        # (other control bytes go to both: both must refuse them)
        raise Skip("NUL, tab, CR, LF or space in the target")
    fields, i = read_fields(data, i)
    low = [(n.lower(), v) for n, v in fields]
    cls = [v for n, v in low if n == b"content-length"]
    tes = [v for n, v in low if n == b"transfer-encoding"]
    body = b""
    trailers = []
    chunked = False
    if tes:
        if cls:
            raise Skip("Content-Length and Transfer-Encoding")
        if len(tes) != 1 or tes[0].lower() != b"chunked":
            raise Skip("Transfer-Encoding other than one 'chunked'")
        chunked = True
        while True:
            size, i = read_line(data, i, "chunk")
            if b";" in size:
                raise Skip("chunk extension")
            if not re.match(rb"^[0-9a-fA-F]{1,8}$", size):
                raise Skip("chunk size not plain hex")
            n = int(size, 16)
            if n == 0:
                trailers, i = read_fields(data, i)
                break
            if len(data) < i + n + 2:
                raise Skip("incomplete message")
            if data[i + n:i + n + 2] != b"\r\n":
                raise Skip("chunk data not followed by CRLF")
            body += data[i:i + n]
            i += n + 2
    elif cls:
        if len(cls) != 1 or not re.match(rb"^[0-9]{1,9}$", cls[0]):
            raise Skip("Content-Length not one plain number")
        n = int(cls[0])
        if len(data) < i + n:
            raise Skip("incomplete message")
        body = data[i:i + n]
        i += n
    return {"method": method, "target": target, "fields": fields,
            "body": body, "chunked": chunked, "trailers": trailers,
            "raw": data[start:i]}, i


def parse_case(data):
    """The case's messages up to the first HTTP/2 cannot express, and
    the reason it could not (None: all were)."""
    msgs = []
    i = 0
    if not data:
        return msgs, "empty input"
    while i < len(data):
        if len(msgs) == 8:
            return msgs, "more than 8 pipelined requests"
        try:
            m, i = parse_message(data, i)
            m["h2"] = to_h2(m)
        except Skip as e:
            return msgs, str(e)
        msgs.append(m)
    return msgs, None


def to_h2(m):
    """The HTTP/2 header list and trailers of message m."""
    target = m["target"]
    scheme, authority, path = b"http", None, target
    low = [(n.lower(), v) for n, v in m["fields"]]
    hosts = [v for n, v in low if n == b"host"]
    if re.match(rb"(?i)^[a-z][a-z0-9+.-]*://", target):
        if not target.lower().startswith(b"http://"):
            raise Skip("absolute-form target with a scheme other than http")
        rest = target[7:]
        k = re.match(rb"[^/?]*", rest).end()
        authority, path = rest[:k], rest[k:]
        if path == b"" and m["method"] == b"OPTIONS":
            path = b"*"     # RFC 9113 8.3.1, RFC 9112 3.2.4
        elif not path.startswith(b"/"):
            path = b"/" + path
        if b"@" in authority:
            raise Skip("userinfo in the target (no :authority for it)")
    extra_hosts = []
    if authority is None and len(hosts) == 1:
        authority = hosts[0]
    elif authority is None:
        # Several: host fields, as many (RFC 9113 8.3.1 lets a request
        # carry host instead of :authority); HTTP/1.1 refuses them all.
        extra_hosts = hosts
    named = set()
    for n, v in low:
        if n == b"connection":
            named |= {t.strip().lower() for t in v.split(b",")}
    hdrs = [(b":method", m["method"]), (b":scheme", scheme)]
    if authority is not None:
        hdrs.append((b":authority", authority))
    hdrs.append((b":path", path))
    hdrs += [(b"host", v) for v in extra_hosts]
    for n, v in low:
        if n in TRANSLATION or n in named:
            continue
        if n == b"te" and v.lower() != b"trailers":
            continue    # RFC 9113 8.2.2: only "trailers" goes in HTTP/2
        hdrs.append((n, v))
    if not m["chunked"] and m["body"] and \
            b"content-length" not in [n for n, _ in hdrs]:
        raise Skip("body without length")
    trailers = [(n.lower(), v) for n, v in m["trailers"]]
    return hdrs, trailers


# ------------------------------------------------------------ sending

def response_complete(got):
    """Whether got holds a whole final response (so that a connection
    kept alive costs no timeout)."""
    i = 0
    while True:
        end = got.find(b"\r\n\r\n", i)
        if end < 0:
            return False
        head = got[i:end].lower()
        m = re.match(rb"http/1\.[01] ([0-9]{3})", head)
        if not m:
            return False
        if m.group(1) < b"200":
            i = end + 4
            continue
        body = got[end + 4:]
        if m.group(1) in (b"204", b"304"):
            return True
        cl = re.search(rb"\r\ncontent-length: *([0-9]+)", head)
        if cl:
            return len(body) >= int(cl.group(1))
        if re.search(rb"\r\ntransfer-encoding: *chunked", head):
            return body.endswith(b"0\r\n\r\n")
        return False


def recv_http1_response(s, timeout):
    """The final status of the response read from s (None: none), and
    whether the connection was reset."""
    s.settimeout(timeout)
    got = b""
    reset = False
    try:
        while not response_complete(got):
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        pass
    except OSError:        # reset, or not connected any more
        reset = True
    codes = [int(c) for c in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] ([0-9]{3}) ",
                                        got[:4096])]
    finals = [c for c in codes if c >= 200]
    return (finals[0] if finals else None), reset


def send_h1(port, m, timeout, ports):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    ports.append(s.getsockname()[1])
    try:
        s.sendall(m["raw"])
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    st, reset = recv_http1_response(s, timeout)
    s.close()
    if st is None:
        return "reset" if reset else "none"
    return st


def data_pieces(body, rnd):
    """body cut into DATA frame payloads: whole, or (rnd) in random
    pieces, maybe with an empty last one (END_STREAM alone)."""
    if rnd is None or not body:
        return [body] if body else []
    out = []
    i = 0
    while i < len(body):
        n = rnd.randrange(1, len(body) - i + 1)
        out.append(body[i:i + n])
        i += n
    if rnd.random() < 0.3:
        out.append(b"")
    return out


def h2_connect(port, timeout):
    cfg = h2.config.H2Configuration(
        client_side=True, header_encoding=None,
        validate_outbound_headers=False, normalize_outbound_headers=False,
        validate_inbound_headers=False, normalize_inbound_headers=False)
    c = h2.connection.H2Connection(config=cfg)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(timeout)
    # frames go as they are made (else Nagle holds a DATA frame behind
    # the HEADERS for a delayed ACK, on a connection kept open)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.initiate_connection()
    return {"c": c, "s": s, "port": s.getsockname()[1], "dead": False}


def send_h2(port, hdrs, body, trailers, timeout, ports, rnd=None, got=None,
            conn=None):
    """The stream's final status, "rst:CODE", "goaway:CODE" or "none";
    got (a dict): the final response's headers, body and trailers, and
    the stream's id. rnd: DATA in random pieces, and a request without a
    body may end with an empty DATA frame instead of on its HEADERS.
    conn (from h2_connect): the stream goes on it, and it stays open
    (conn["dead"] once the server ended it); else on a connection of its
    own."""
    own = conn is None
    if own:
        conn = h2_connect(port, timeout)
    c, s = conn["c"], conn["s"]
    ports.append(conn["port"])
    sid = c.get_next_available_stream_id()
    got = {} if got is None else got
    got["stream"] = sid
    got.update(headers=None, body=b"", trailers=None, interim=[])
    outcome = "none"
    pieces = data_pieces(body, rnd)
    if not pieces and not trailers and rnd is not None and \
            rnd.random() < 0.2:
        pieces = [b""]
    try:
        c.send_headers(sid, hdrs, end_stream=not pieces and not trailers)
        s.sendall(c.data_to_send())
        deadline = time.time() + timeout
        done = False
        while not done and time.time() < deadline:
            while pieces and c.local_flow_control_window(sid) >= \
                    min(len(pieces[0]), c.max_outbound_frame_size):
                p = pieces[0][:c.max_outbound_frame_size]
                pieces[0] = pieces[0][len(p):]
                if not pieces[0]:
                    pieces.pop(0)
                c.send_data(sid, p, end_stream=not pieces and not trailers)
                if not pieces and trailers:
                    c.send_headers(sid, trailers, end_stream=True)
                    trailers = None
            if not pieces and trailers:
                c.send_headers(sid, trailers, end_stream=True)
                trailers = None
            s.sendall(c.data_to_send())
            d = s.recv(65536)
            if not d:
                break
            for ev in c.receive_data(d):
                if getattr(ev, "stream_id", sid) != sid:
                    continue
                if isinstance(ev, h2.events.InformationalResponseReceived):
                    got["interim"].append(int(dict(ev.headers)[b":status"]))
                elif isinstance(ev, h2.events.ResponseReceived):
                    got["headers"] = ev.headers
                    outcome = int(dict(ev.headers)[b":status"])
                elif isinstance(ev, h2.events.TrailersReceived):
                    got["trailers"] = ev.headers
                elif isinstance(ev, h2.events.DataReceived):
                    got["body"] += ev.data
                    c.acknowledge_received_data(
                        ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    got["ended"] = True
                    done = True
                elif isinstance(ev, h2.events.StreamReset):
                    got["reset"] = ev.error_code
                    if outcome == "none":
                        outcome = "rst:%d" % ev.error_code
                    done = True
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    conn["dead"] = True
                    if outcome == "none":
                        outcome = "goaway:%d" % ev.error_code
                    done = True
            s.sendall(c.data_to_send())
        if not done:
            conn["dead"] = True
    except (socket.timeout, OSError, h2.exceptions.ProtocolError):
        conn["dead"] = True
    if own or conn["dead"]:
        s.close()
    return outcome


# ------------------------------------------------------------ observing

class Tail:
    """New lines of a file since the last look."""

    def __init__(self, path):
        self.path = path
        self.pos = os.path.getsize(path)

    def mark(self):
        self.pos = os.path.getsize(self.path)

    def read(self):
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            return f.read().decode("latin1")


LOGRE = re.compile(r"http-request client=\S+ method=(\S*) host=(\S*) "
                   r"path=(\S*) status=(\d+) .* verdict=(\S+) server=\S+ "
                   r"upstream=\S+(?: rule=(\S+))?")
ERRRE = re.compile(r'http-error status=\d+ reason="([^"]*)"')
SIDRE = re.compile(r" #(\d+) (.*)")
PORTRE = re.compile(r" client=127\.0\.0\.1:(\d+) ")


class Sessions:
    """proxyd's log lines by session, found by the client's port. The
    log is written every 50 ms from a thread: read once at the end (so
    that no exchange waits for it), the sessions of each port taken in
    order (a port the kernel hands out again is another connection)."""

    def __init__(self, path, pos):
        with open(path, "rb") as f:
            f.seek(pos)
            txt = f.read().decode("latin1")
        lines = {}
        port = {}
        for ln in txt.splitlines():
            m = SIDRE.search(ln)
            if not m:
                continue
            sid = int(m.group(1))
            lines.setdefault(sid, []).append(m.group(2))
            p = PORTRE.search(ln)
            if p:
                port[sid] = int(p.group(1))
        self.lines = lines
        self.by_port = {}
        self.conn = {}
        # A connection is one session: its streams are transactions of
        # it, their lines tagged "proto=h2 stream=N".
        for sid in sorted(port):
            self.by_port.setdefault(port[sid], []).append(sid)

    def take(self, port, h2side, stream=None):
        """The log verdict of a connection from port: the fields of its
        http-request line, ("h2-refused",) for a stream nghttp2 refused
        (an http2-error line, no request), or None. stream None: the
        next connection from port; else that stream of the connection
        last taken from port (its first stream takes the connection)."""
        if stream is not None and stream != 1:
            conn = self.conn.get(port, [])
        else:
            q = self.by_port.get(port, [])
            if not q:
                return None
            conn = self.lines[q.pop(0)]
            self.conn[port] = conn
        if stream is None:
            mine = list(conn)
        else:
            tag = " stream=%d " % stream
            mine = [x for x in conn if tag in x + " "]
        return self.verdict(mine, h2side)

    @staticmethod
    def verdict(mine, h2side):
        reason = [r.group(1) for r in map(ERRRE.search, mine) if r]
        for x in mine:
            m = LOGRE.search(x)
            if m:
                return m.groups() + (reason[-1] if reason else "-",)
        if h2side and any(re.search(r"http2-error kind=(malformed|frame)",
                                    x) for x in mine):
            return ("h2-refused",)
        return None

    @staticmethod
    def settle(path, ends, timeout=5.0):
        """Waits until every connection has ended in the log (its
        session-end line), bounded by timeout."""
        deadline = time.time() + timeout
        last = -1
        while time.time() < deadline:
            with open(path, "rb") as f:
                txt = f.read()
            # and then one more flush
            if txt.count(b" session-end ") >= ends and len(txt) == last:
                return
            last = len(txt)
            time.sleep(0.15)


def origin_records(tail):
    return [json.loads(x) for x in tail.read().splitlines() if x.strip()]


def cookie_join(fields):
    out = [(n, v) for n, v in fields if n != "cookie"]
    ck = [v for n, v in fields if n == "cookie" and v != ""]
    if ck:
        out.append(("cookie", "; ".join(ck)))
    return out


def normalise_origin(rec, drop):
    """What the comparison sees of an origin record (BY_DESIGN)."""
    if rec is None:
        return None
    if "error" in rec:
        return {"error": rec["error"]}
    fields = [(n.lower(), v) for n, v in rec["headers"]
              if n.lower() not in HOP and n.lower() not in drop]
    return {"method": rec["method"], "target": rec["target"],
            "fields": sorted(cookie_join(fields)),
            "body": rec["body_sha256"], "body_len": rec["body_len"],
            "trailers": sorted((n.lower(), v) for n, v in rec["trailers"])}


def outcome_class(st, other):
    """An outcome as comparable: the status, but a stream nghttp2 reset
    as malformed (PROTOCOL_ERROR) stands for any 4xx refusal the other
    side made (which check fires first differs: the HTTP/1.1 analyser
    may find the head too big before a bad byte)."""
    if isinstance(st, str) and st.startswith("rst:1"):
        return other if isinstance(other, int) and \
            400 <= other < 500 else "4xx"
    return st


H2CONN = {"conn": None, "left": 0}


def h2_shared(a):
    """The connection a stream goes on with --streams N: one for N
    streams in a row (a new one when the server ended it)."""
    if a.streams <= 1:
        return None
    cur = H2CONN["conn"]
    if cur is None or cur["dead"] or H2CONN["left"] == 0:
        if cur is not None and not cur["dead"]:
            cur["s"].close()
        H2CONN["conn"] = h2_connect(a.h2_port, a.timeout)
        H2CONN["left"] = a.streams
    H2CONN["left"] -= 1
    return H2CONN["conn"]


def run_one(a, tail, m, hdrs, trailers, rnd):
    """Sends m both ways; the log verdicts are filled in later."""
    res = {}
    for side in ("h1", "h2"):
        tail.mark()
        ports = []
        if side == "h1":
            st = send_h1(a.h1_port, m, a.timeout, ports)
        else:
            got = {}
            st = send_h2(a.h2_port, hdrs, m["body"], trailers, a.timeout,
                         ports, rnd, got, h2_shared(a))
        recs = origin_records(tail)
        res[side] = {"status": st, "port": ports[0], "origin": recs}
        if side == "h2" and a.streams > 1:
            res[side]["stream"] = got["stream"]
    return res


def compare(res, drop):
    """None when the two sides agree, else what differs."""
    h1, h2r = res["h1"], res["h2"]
    s1 = h1["status"]
    s2 = outcome_class(h2r["status"], s1)
    if s1 != s2:
        return "status h1=%s h2=%s" % (h1["status"], h2r["status"])
    o1 = [normalise_origin(r, drop) for r in h1["origin"]]
    o2 = [normalise_origin(r, drop) for r in h2r["origin"]]
    if o1 != o2:
        return "origin h1=%s h2=%s" % (o1, o2)
    l1, l2 = h1["log"], h2r["log"]
    if l2 == ("h2-refused",):
        if l1 is not None and l1[4] != "deny":
            return "log h1=%s h2=%s" % (l1, l2)
    elif l1 != l2:
        return "log h1=%s h2=%s" % (l1, l2)
    return None


def judge(m, res, drop):
    """("agree"|"by-design"|"differ", what differed and why)"""
    why = compare(res, drop)
    if why is None:
        return "agree", None
    for when, how, reason in EXPECTED:
        if when(m) and how(res):
            return "by-design", "%s (%s)" % (why, reason)
    return "differ", why


# ------------------------------------------------------------ cases

def corpus_cases(a):
    if a.vectors:
        for c in json.load(open(a.vectors)):
            if c["type"].startswith("request"):
                yield ("llhttp %s:%d" % (c["file"], c["line"]),
                       c["input_latin1"].encode("latin1"))
    for d in a.corpus_dir:
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            # h2o's fuzz driver writes the parts between its markers one
            # after the other: the stream is their concatenation.
            data = data.replace(b"\n--MARK--\n", b"")
            yield ("%s/%s" % (os.path.basename(d), name[:16]), data)


METHODS = [b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS",
           b"PATCH", b"TRACE", b"PROPFIND", b"get", b"X-Y_Z", b"M!#$%&'*+"]
NAME_CH = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
PATH_CH = b"abcXYZ0189-._~!$&'()*+,;=:@/%?#[]\"<>\\^`{|}"
VALUE_CH = bytes(range(0x20, 0x7f)) + b"\t\x80\xa0\xff"
ODD_CH = b"\x00\x01\x0b\x7f"
WELL_KNOWN = [b"Accept", b"Cookie", b"Content-Type", b"User-Agent",
              b"Authorization", b"Via", b"Forwarded", b"X-Forwarded-For",
              b"Expect", b"Range", b"If-None-Match", b"Content-Encoding",
              b"TE", b"Trailer", b"Max-Forwards", b"Pragma", b"Referer",
              b"Connection", b"Keep-Alive", b"Host"]


def random_request(rnd, forward=None):
    """Random but HTTP/1.1-writable request bytes; forward (the origin's
    authority): absolute-form targets, for a forward-mode service."""
    method = rnd.choice(METHODS)
    path = b"/" + bytes(rnd.choice(PATH_CH) for _ in range(rnd.randrange(12)))
    if rnd.random() < 0.03:
        path += bytes([rnd.choice(b"\x01\x7f\x80\xff")])
    hosts = [b"a.test", b"a.test:80", b"A.TEST", b"[::1]:8", b"x y",
             b"a.test.", b"127.0.0.1"]
    if forward is not None:
        path = b"http://" + forward + path.replace(b"#", b"")
        hosts = [forward] * 5 + hosts
        if rnd.random() < 0.05:
            # OPTIONS for the server as a whole (RFC 9112 3.2.4)
            method, path = b"OPTIONS", b"http://" + forward
    elif rnd.random() < 0.03:
        method, path = b"OPTIONS", b"*"
    lines = [b"%s %s HTTP/1.1" % (method, path)]
    if rnd.random() < 0.95:
        lines.append(b"Host: " + rnd.choice(hosts))
    for _ in range(rnd.randrange(6)):
        if rnd.random() < 0.4:
            name = rnd.choice(WELL_KNOWN)
        else:
            name = bytes(rnd.choice(NAME_CH)
                         for _ in range(1 + rnd.randrange(10)))
        value = bytes(rnd.choice(VALUE_CH) for _ in range(rnd.randrange(16)))
        if name.lower() == b"connection":
            value = rnd.choice([b"close", b"keep-alive", b"x-hop",
                                b"close, x-hop"])
        elif name.lower() == b"te":
            value = rnd.choice([b"trailers", b"gzip"])
        elif name.lower() == b"expect":
            value = rnd.choice([b"100-continue", b"x"])
        if rnd.random() < 0.03:
            value += bytes([rnd.choice(ODD_CH)])
        if rnd.random() < 0.03:
            # around max-line and max-header-bytes (300, 600)
            value += b"v" * rnd.randrange(200, 700)
        lines.append(name + b": " + value.strip(b" \t"))
    if rnd.random() < 0.1:
        # a second Host: refused by both (RFC 9112 3.2)
        lines.insert(rnd.randrange(1, len(lines) + 1), b"host: " + rnd.choice(
            [b"a.test", b"b.test", b":80", b"a.test:80"]))
    body = b""
    if rnd.random() < 0.4:
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300)))
        if rnd.random() < 0.5:
            lines.append(b"Content-Length: %d" % len(body))
            return b"\r\n".join(lines) + b"\r\n\r\n" + body
        lines.append(b"Transfer-Encoding: chunked")
        tr = b"X-Sum: 1\r\n" if rnd.random() < 0.3 else b""
        return b"\r\n".join(lines) + b"\r\n\r\n" + b"%x\r\n%s\r\n0\r\n%s\r\n" % (
            len(body), body, tr)
    return b"\r\n".join(lines) + b"\r\n\r\n"


# Cases a defect was found with, run before the random ones ({A}: the
# origin's authority in forward mode, absolute-form targets there).
KEPT = [
    # an empty cookie crumb was joined as "c; "
    b"GET {T} HTTP/1.1\r\nHost: {H}\r\nCookie: c\r\nCookie: \r\n\r\n",
    b"GET {T} HTTP/1.1\r\nHost: {H}\r\nCookie: \r\nCookie: c\r\n"
    b"Cookie: d\r\n\r\n",
]
KEPT_FORWARD = [
    # OPTIONS * over h2 went on as "OPTIONS http://host:port* HTTP/1.1"
    b"OPTIONS http://{A} HTTP/1.1\r\nHost: {A}\r\n\r\n",
]


def kept_cases(a):
    fwd = a.forward.encode() if a.forward else None
    for k, t in enumerate(KEPT + (KEPT_FORWARD if fwd else [])):
        target = b"http://" + fwd + b"/k" if fwd else b"/k"
        yield ("kept #%d" % k, t.replace(b"{T}", target).replace(
            b"{H}", fwd or b"a.test").replace(b"{A}", fwd or b""))


def random_cases(a):
    yield from kept_cases(a)
    rnd = random.Random(a.seed)
    for k in range(a.random):
        yield ("random seed=%d #%d" % (a.seed, k), random_request(
            rnd, a.forward.encode() if a.forward else None))


# ------------------------------------------------------------ main

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--h1-port", type=int, required=True)
    p.add_argument("--h2-port", type=int, required=True)
    p.add_argument("--origin-log", required=True)
    p.add_argument("--proxyd-log", required=True)
    p.add_argument("--vectors")
    p.add_argument("--corpus-dir", action="append", default=[])
    p.add_argument("--random", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--streams", type=int, default=1,
                   help="h2 requests in a row on one connection")
    p.add_argument("--forward", help="the origin's host:port: random "
                   "requests in absolute form (a forward-mode service)")
    p.add_argument("--only")
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args()
    tail = Tail(a.origin_log)
    logpos = os.path.getsize(a.proxyd_log)
    with open(a.proxyd_log, "rb") as f:
        ends0 = f.read().count(b" session-end ")
    done = []
    counts = {"cases": 0, "translated": 0, "messages": 0, "agree": 0,
              "by-design": 0, "differ": 0, "forwarded": 0}
    skipped = {}
    t0 = time.time()
    cases = list(corpus_cases(a)) if a.random == 0 else list(random_cases(a))
    # The random part also cuts request bodies into random DATA frames.
    frames = random.Random(a.seed + 1) if a.random else None
    for name, data in cases:
        if a.only and a.only not in name:
            continue
        counts["cases"] += 1
        msgs, why = parse_case(data)
        if why is not None:
            # The rest of the case cannot be framed: its messages before
            # are still requests of their own.
            why = ("after a request: " if msgs else "") + why
            skipped[why] = skipped.get(why, 0) + 1
        if msgs:
            counts["translated"] += 1
        for k, m in enumerate(msgs):
            hdrs, trailers = m["h2"]
            counts["messages"] += 1
            drop = set()
            for n, v in m["fields"]:
                if n.lower() == b"connection":
                    drop |= {t.strip().lower().decode("latin1")
                             for t in v.split(b",")}
            done.append((name, k, m, drop, run_one(a, tail, m, hdrs,
                                                   trailers, frames)))
    if H2CONN["conn"] is not None and not H2CONN["conn"]["dead"]:
        H2CONN["conn"]["s"].close()     # its session ends: logged
    # Each message made at least two sessions (h1, h2 connection).
    Sessions.settle(a.proxyd_log, ends0 + 2 * len(done))
    log = Sessions(a.proxyd_log, logpos)
    for name, k, m, drop, res in done:
        for side in ("h1", "h2"):
            res[side]["log"] = log.take(res[side]["port"], side == "h2",
                                        res[side].get("stream"))
        verdict, why = judge(m, res, drop)
        counts[verdict] += 1
        if verdict == "agree" and res["h2"]["origin"]:
            counts["forwarded"] += 1
        if verdict == "by-design":
            print("by design: %s [message %d]: %s" % (name, k, why))
        elif verdict == "differ":
            print("DIFFER: %s [message %d] %r: %s" % (
                name, k, m["raw"][:200], why))
        elif a.verbose:
            print("agree: %s [%d] %s" % (name, k, res["h1"]["status"]))
    for r in sorted(skipped, key=lambda r: -skipped[r]):
        print("skipped: %-55s %d" % (r, skipped[r]))
    print("counts: cases=%d translated=%d skipped=%d messages=%d agree=%d "
          "(forwarded %d, refused %d) by-design=%d differ=%d (%.1f s)" % (
              counts["cases"], counts["translated"], sum(skipped.values()),
              counts["messages"], counts["agree"], counts["forwarded"],
              counts["agree"] - counts["forwarded"], counts["by-design"],
              counts["differ"], time.time() - t0))
    sys.exit(1 if counts["differ"] else 0)


if __name__ == "__main__":
    main()
