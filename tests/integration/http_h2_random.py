#!/usr/bin/python3
"""Random HTTP/2 stream sequences through proxyd (http_h2_random.sh).

origin PORT LOG
    An origin speaking HTTP/1.1 and h2c (prior knowledge) on one port.
    Every response is a function of the request's path and body, so a
    client knows what it must get: /r?st=S&n=N&c=C&cl=0|1&trl=0|1&k=K
    answers status S with N pattern bytes (pattern(N, K)) sent in pieces
    of C, with content-length when cl=1, trailers x-t-sha (the request
    body's sha256, first 16 hex) and x-t-n when trl=1, and x-req-sha /
    x-req-n in the head for the body it got (the head goes after the
    whole request body). &cut=B: after B body bytes the server ends its
    stream (RST_STREAM INTERNAL_ERROR over h2, the connection closed over
    HTTP/1.1): the client must see its transaction cut, never an end.
    &e=1: the head goes as soon as the request's head came (an early
    answer; x-early instead of x-req-*, no trailers). &ed=1: a response
    that would end with its head ends with an empty DATA frame instead
    (h2). &i=N: N interim heads (103, link: </iK>) before the final
    one, in the same write. The log gets one line per request: proto method path
    n=BODY-BYTES (and "early" when answered early).

client PORT SEED SECONDS [CONNS=3] [H1_SHARE=0.5]
    h2c connections to proxyd, each with random concurrent streams:
    methods GET/HEAD/POST/PUT, bodies of random sizes sent in random
    pieces (with request trailers sometimes), responses of random shapes
    (above), a small client window acknowledged late (flow control), the
    client resetting some streams at once or after a part of the
    response, and some connections ended by the client with streams
    open; and HTTP/1.1 connections (the share given), requests one after
    another, GETs sometimes pipelined, bodies by length or chunked.
    Every stream that is not cut on purpose must get exactly its
    status, its body bytes, x-req-sha/x-req-n, and its trailers (a 204
    or 304 no Transfer-Encoding, RFC 9112 6.1); a cut stream must never
    end as if it were whole. Prints the seed, one line
    per difference, a summary; exits 1 on a difference."""
import hashlib
import random
import socket
import sys
import threading
import time
import urllib.parse

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def pattern(n, k):
    """N bytes that depend on K and on each byte's offset."""
    unit = hashlib.sha256(b"%d" % k).digest() * 4
    out = bytearray()
    i = 0
    while len(out) < n:
        out += bytes([(b + i) & 0xFF for b in unit])
        i += 1
    return bytes(out[:n])


def short_sha(body):
    return hashlib.sha256(body).hexdigest()[:16]


def parse_spec(path):
    q = urllib.parse.urlparse(path).query
    d = {k: int(v[0]) for k, v in urllib.parse.parse_qs(q).items()}
    return {"st": d.get("st", 200), "n": d.get("n", 0), "c": max(1, d.get("c", 16384)),
            "cl": d.get("cl", 1), "trl": d.get("trl", 0), "k": d.get("k", 0),
            "cut": d.get("cut", -1), "e": d.get("e", 0), "ed": d.get("ed", 0),
            "i": d.get("i", 0), "hb": d.get("hb", 0), "qb": d.get("qb", 0),
            "to": d.get("to", 0)}


def big_fields(prefix, n, k):
    return [("%s%d" % (prefix, i), pattern(200, k + i).hex()) for i in range(n)]


def response_parts(method, path, body, fields=None):
    """(status, head fields, body, trailer fields, cut, piece, ed) the
    origin sends; FIELDS: the request's (None: as the client sent them)."""
    sp = parse_spec(path)
    st = sp["st"]
    data = pattern(sp["n"], sp["k"])
    if sp["to"]:
        # trailers-only (gRPC's error answer): one head that ends the
        # stream, the trailer fields in it, content-length: 0
        head = [("x-req-sha", short_sha(body)), ("x-req-n", str(len(body))),
                ("x-t-sha", short_sha(body)), ("x-t-n", str(len(body)))]
        if st not in (204, 304):
            head.append(("content-length", "0"))
        return st, head, b"", [], -1, 1, 0
    if method == "HEAD" or st in (204, 304):
        data_sent = b""
    else:
        data_sent = data
    if sp["e"]:
        # answered on the head, before the body: nothing of it known
        head = [("x-early", "1")]
    else:
        head = [("x-req-sha", short_sha(body)), ("x-req-n", str(len(body)))]
    # Trailers need a chunked body over HTTP/1.1: no content-length then.
    # hb: many fields, a head over one HTTP/2 frame (CONTINUATION)
    head += big_fields("x-h", sp["hb"], sp["k"])
    if sp["qb"]:
        want = big_fields("x-q", sp["qb"], sp["k"])
        got = want if fields is None else [(k, v) for k, v in fields if k.startswith("x-q")]
        head.append(("x-req-q", "ok" if got == want else "bad"))
    if sp["cl"] and not sp["trl"] and st not in (204, 304):
        head.append(("content-length", str(len(data))))
    trl = []
    if sp["trl"] and not sp["e"] and method != "HEAD" and st not in (204, 304):
        trl = [("x-t-sha", short_sha(body)), ("x-t-n", str(len(body)))]
    cut = sp["cut"] if data_sent else -1
    return st, head, data_sent, trl, cut, sp["c"], sp["ed"]


# ------------------------------------------------------------------ origin

def origin_log(log, lock, line):
    with lock:
        with open(log, "a") as f:
            f.write(line + "\n")


def h2_answer(h, pending, sid, method, path, body, fields):
    st, head, out, trl, cut, chunk, ed = response_parts(method, path, body, fields)
    fields = [(":status", str(st))] + head
    try:
        for i in range(parse_spec(path)["i"]):
            h.send_headers(sid, [(":status", "103"), ("link", "</i%d>" % i)])
    except h2.exceptions.ProtocolError:
        return
    # ed: a head that does not end the stream, an empty DATA frame does
    end = not out and not trl and cut < 0 and not ed
    try:
        h.send_headers(sid, fields, end_stream=end)
    except h2.exceptions.ProtocolError:
        return      # reset by the client in the same read
    if not end:
        pending[sid] = [out, trl, chunk, cut, 0]


def serve_h2(conn, first, log, lock):
    cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    h = h2.connection.H2Connection(config=cfg)
    h.local_settings = h2.settings.Settings(client=False, initial_values={
        h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
    h.initiate_connection()
    conn.sendall(h.data_to_send())
    reqs = {}
    pending = {}     # stream id -> [data left, trailers, chunk, cut, sent]
    data = first
    while True:
        try:
            evs = h.receive_data(data)
        except h2.exceptions.ProtocolError:
            conn.sendall(h.data_to_send())
            return
        for ev in evs:
            if isinstance(ev, h2.events.RequestReceived):
                hd = dict(ev.headers)
                reqs[ev.stream_id] = [hd.get(":method"), hd.get(":path"), b"",
                                      list(ev.headers)]
                if parse_spec(hd.get(":path"))["e"]:
                    origin_log(log, lock, "h2 %s %s early" % (hd.get(":method"), hd.get(":path")))
                    h2_answer(h, pending, ev.stream_id, hd.get(":method"), hd.get(":path"), b"",
                              list(ev.headers))
            elif isinstance(ev, h2.events.DataReceived):
                if ev.stream_id in reqs:
                    reqs[ev.stream_id][2] += ev.data
                h.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                r = reqs.pop(ev.stream_id, None)
                if r is None:
                    continue
                method, path, body, fields = r
                origin_log(log, lock, "h2 %s %s n=%d" % (method, path, len(body)))
                if not parse_spec(path)["e"]:
                    h2_answer(h, pending, ev.stream_id, method, path, body, fields)
            elif isinstance(ev, h2.events.StreamReset):
                reqs.pop(ev.stream_id, None)
                pending.pop(ev.stream_id, None)
        # Send what the windows allow.
        for sid in list(pending):
            out, trl, chunk, cut, sent = pending[sid]
            try:
                while True:
                    if cut >= 0 and sent >= cut:
                        h.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                        del pending[sid]
                        break
                    if not out:
                        if trl:
                            h.send_headers(sid, trl, end_stream=True)
                        else:
                            h.end_stream(sid)
                        del pending[sid]
                        break
                    room = min(h.local_flow_control_window(sid),
                               h.max_outbound_frame_size, chunk)
                    if cut >= 0:
                        room = min(room, cut - sent)
                    if room <= 0:
                        pending[sid] = [out, trl, chunk, cut, sent]
                        break
                    h.send_data(sid, out[:room])
                    out = out[room:]
                    sent += room
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pending.pop(sid, None)
        wire = h.data_to_send()
        if wire:
            conn.sendall(wire)
        data = conn.recv(65536)
        if not data:
            return


def read_h1_head(rf):
    line = rf.readline()
    if not line:
        return None
    method, path, version = line.decode("latin-1").split(" ", 2)
    hdrs = {":v10": version.strip() == "HTTP/1.0"}
    while True:
        ln = rf.readline()
        if ln in (b"\r\n", b"\n", b""):
            break
        k, v = ln.decode("latin-1").split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    return method, path, hdrs


def read_h1_body(rf, hdrs):
    body = b""
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(rf.readline().split(b";")[0], 16)
            if size == 0:
                while rf.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            body += rf.read(size)
            rf.readline()
    elif "content-length" in hdrs:
        body = rf.read(int(hdrs["content-length"]))
    return body


def serve_h1(conn, first, log, lock):
    rf = conn.makefile("rb")
    # The bytes already read come first.
    class Joined:
        def __init__(self, pre, f):
            self.pre, self.f = pre, f

        def readline(self):
            if self.pre:
                i = self.pre.find(b"\n")
                if i >= 0:
                    ln, self.pre = self.pre[:i + 1], self.pre[i + 1:]
                    return ln
                ln, self.pre = self.pre, b""
                return ln + self.f.readline()
            return self.f.readline()

        def read(self, n):
            out = self.pre[:n]
            self.pre = self.pre[n:]
            if len(out) < n:
                out += self.f.read(n - len(out))
            return out
    rf = Joined(first, rf)
    while True:
        req = read_h1_head(rf)
        if req is None:
            return
        method, path, hdrs = req
        early = parse_spec(path)["e"]
        if early:
            origin_log(log, lock, "h1 %s %s early" % (method, path))
            h1_answer(conn, method, path, b"", list(hdrs.items()))
            if conn.fileno() < 0:
                return
        body = read_h1_body(rf, hdrs)
        origin_log(log, lock, "h1 %s %s n=%d" % (method, path, len(body)))
        if not early:
            h1_answer(conn, method, path, body, list(hdrs.items()))
            if conn.fileno() < 0:
                return


def h1_cut(conn):
    """The response cut: the connection goes (the makefile keeps the fd)."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def h1_answer(conn, method, path, body, fields):
    st, head, out, trl, cut, chunk, _ = response_parts(method, path, body, fields)
    v10 = dict(fields).get(":v10")     # an HTTP/1.0 request
    nolen = not any(k == "content-length" for k, _ in head) \
        and st not in (204, 304) and method != "HEAD"
    chunked = nolen and not v10
    hd = "" if v10 else "".join("HTTP/1.1 103 X\r\nlink: </i%d>\r\n\r\n" % i
                                for i in range(parse_spec(path)["i"]))
    hd += "HTTP/1.1 %d X\r\n" % st
    for k, v in head:
        hd += "%s: %s\r\n" % (k, v)
    if chunked:
        hd += "transfer-encoding: chunked\r\n"
    if trl and chunked:
        hd += "trailer: x-t-sha, x-t-n\r\n"
    conn.sendall((hd + "\r\n").encode())
    sent = 0
    while out:
        piece = out[:chunk]
        if cut >= 0 and sent + len(piece) >= cut:
            piece = piece[:cut - sent]
            if piece:
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            h1_cut(conn)
            return
        conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        out = out[len(piece):]
        sent += len(piece)
    if cut >= 0:
        h1_cut(conn)
        return
    if chunked:
        tail = b"0\r\n"
        if trl:
            for k, v in trl:
                tail += b"%s: %s\r\n" % (k.encode(), v.encode())
        conn.sendall(tail + b"\r\n")
    elif nolen:
        h1_cut(conn)    # an HTTP/1.0 body without length ends by the close


def origin_conn(conn, log, lock):
    try:
        first = b""
        while len(first) < len(PREFACE):
            d = conn.recv(len(PREFACE) - len(first))
            if not d:
                return
            first += d
            if not PREFACE.startswith(first):
                break
        if first == PREFACE:
            serve_h2(conn, first, log, lock)
        else:
            serve_h1(conn, first, log, lock)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def origin(port, log):
    lock = threading.Lock()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(256)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=origin_conn, args=(c, log, lock), daemon=True).start()


# ------------------------------------------------------------------ client

class Stream:
    def __init__(self, rnd, sid):
        self.sid = sid
        self.method = rnd.choice(["GET", "GET", "POST", "HEAD", "PUT"])
        body_n = 0
        if self.method in ("POST", "PUT"):
            body_n = rnd.choice([0, 1, 100, 5000, 70000, 200000])
        self.body = pattern(body_n, rnd.randrange(1000))
        self.piece = rnd.choice([1000, 16384, 40000])
        self.req_trl = self.method in ("POST", "PUT") and rnd.random() < 0.3
        st = rnd.choice([200, 200, 200, 201, 404, 500, 204, 304])
        n = rnd.choice([0, 1, 10, 1000, 16384, 16385, 70000, 300000])
        cut = -1
        self.cut = False
        if rnd.random() < 0.12 and n > 0 and st not in (204, 304):
            cut = rnd.randrange(n)
            self.cut = self.method != "HEAD"
        if st in (204, 304):
            n = 0
        self.spec = {"st": st, "n": n, "c": rnd.choice([1, 100, 5000, 16384, 65536]),
                     "cl": rnd.choice([0, 1]), "trl": rnd.choice([0, 1]),
                     "k": rnd.randrange(100000), "cut": cut,
                     "e": int(rnd.random() < 0.1), "ed": rnd.choice([0, 1]),
                     "i": rnd.choice([0, 0, 0, 1, 3]),
                     "hb": rnd.choice([0, 0, 0, 45]),
                     # request fields over one frame too, sometimes
                     "qb": rnd.choice([0, 0, 0, 45]),
                     "to": int(rnd.random() < 0.08)}
        if self.spec["c"] == 1 and n > 2000:
            self.spec["c"] = 1000
        if self.spec["to"]:
            self.spec["e"] = self.spec["ed"] = 0
            self.cut = False
        self.path = "/r?" + "&".join("%s=%d" % kv for kv in self.spec.items())
        # What the client does: 0 nothing, 1 reset at once, 2 reset after
        # some response bytes.
        r = rnd.random()
        self.reset = 0 if r < 0.85 else (1 if r < 0.92 else 2)
        self.reset_after = rnd.randrange(max(1, n)) if self.reset == 2 else 0
        self.sent = 0
        self.status = None
        self.head = {}
        self.data = b""
        self.trailers = {}
        self.interim = []       # the links of the 1xx heads got
        self.nframes = 0        # DATA frames got (h2)
        self.ended = False
        self.was_reset = None
        self.done = False

    def expected(self):
        st, head, out, trl, cut, _, _ = response_parts(self.method, self.path, self.body)
        return st, dict(head), out, dict(trl)


class ClientConn:
    def __init__(self, port, rnd, name, errors):
        self.rnd = rnd
        self.name = name
        self.errors = errors
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.h = h2.connection.H2Connection(config=cfg)
        self.window = rnd.choice([65535, 16384, 1000000])
        self.h.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.window,
            h2.settings.SettingCodes.ENABLE_PUSH: 0})
        self.h.initiate_connection()
        self.lazy_ack = rnd.random() < 0.4
        self.unacked = []
        self.streams = {}
        self.goaway = False
        self.flush()

    def flush(self):
        d = self.h.data_to_send()
        if d:
            self.sock.sendall(d)

    def err(self, s, msg):
        self.errors.append("%s stream %d %s %s: %s" % (self.name, s.sid, s.method, s.path, msg))

    def open_stream(self):
        sid = self.h.get_next_available_stream_id()
        s = Stream(self.rnd, sid)
        hdrs = [(":method", s.method), (":scheme", "http"), (":authority", "127.0.0.1"),
                (":path", s.path), ("user-agent", "h2-random")]
        hdrs += big_fields("x-q", s.spec["qb"], s.spec["k"])
        if s.req_trl:
            hdrs.append(("te", "trailers"))
        if s.method in ("POST", "PUT") and self.rnd.random() < 0.5:
            hdrs.append(("content-length", str(len(s.body))))
        end = s.method not in ("POST", "PUT")
        self.h.send_headers(sid, hdrs, end_stream=end)
        if end:
            s.sent = -1
        self.streams[sid] = s
        if s.reset == 1:
            self.h.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
            s.done = True
        return s

    def pump_bodies(self):
        for s in self.streams.values():
            if s.done or s.sent < 0:
                continue
            try:
                while s.sent < len(s.body):
                    room = min(self.h.local_flow_control_window(s.sid),
                               self.h.max_outbound_frame_size, s.piece, len(s.body) - s.sent)
                    if room <= 0:
                        break
                    self.h.send_data(s.sid, s.body[s.sent:s.sent + room])
                    s.sent += room
                if s.sent >= len(s.body):
                    if s.req_trl:
                        self.h.send_headers(s.sid, [("x-req-trailer", "t%d" % len(s.body))],
                                            end_stream=True)
                    else:
                        self.h.end_stream(s.sid)
                    s.sent = -1
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                s.sent = -1

    def on_events(self, evs):
        for ev in evs:
            sid = getattr(ev, "stream_id", None)
            s = self.streams.get(sid)
            if isinstance(ev, h2.events.ResponseReceived) and s:
                hd = dict(ev.headers)
                s.status = int(hd.pop(":status"))
                s.head = hd
            elif isinstance(ev, h2.events.InformationalResponseReceived) and s:
                s.interim.append(dict(ev.headers).get("link"))
            elif isinstance(ev, h2.events.DataReceived):
                if s:
                    s.data += ev.data
                    s.nframes += 1
                if self.lazy_ack:
                    self.unacked.append((ev.flow_controlled_length, sid))
                else:
                    self.h.acknowledge_received_data(ev.flow_controlled_length, sid)
                if s and s.reset == 2 and not s.done and len(s.data) >= s.reset_after:
                    try:
                        self.h.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                    except h2.exceptions.StreamClosedError:
                        pass    # its end came in the same frame
                    s.done = True
            elif isinstance(ev, h2.events.TrailersReceived) and s:
                s.trailers = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded) and s:
                s.ended = True
                s.done = True
            elif isinstance(ev, h2.events.StreamReset) and s:
                s.was_reset = ev.error_code
                s.done = True
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = True

    def ack_some(self):
        if self.unacked and (self.rnd.random() < 0.5 or all(
                s.done for s in self.streams.values())):
            for n, sid in self.unacked:
                try:
                    self.h.acknowledge_received_data(n, sid)
                except (h2.exceptions.StreamClosedError, KeyError):
                    self.h.increment_flow_control_window(n)
                except h2.exceptions.ProtocolError:
                    pass
            self.unacked = []

    def check(self, s):
        if s.reset:
            return      # the client reset it: anything up to that is fine
        est, ehead, ebody, etrl = s.expected()
        if s.cut:
            if s.ended and not s.was_reset:
                self.err(s, "a cut response ended as if whole (%d of %d bytes, status %s)"
                         % (len(s.data), s.spec["n"], s.status))
            return
        if s.spec["to"] and s.nframes:
            # gRPC takes HEADERS and an empty DATA as a call without status
            self.err(s, "a trailers-only answer came with %d DATA frames" % s.nframes)
        if s.was_reset is not None and not (s.ended and s.was_reset == 0):
            self.err(s, "reset by proxyd (code %s) after %d bytes, status %s"
                     % (s.was_reset, len(s.data), s.status))
            return
        if not s.ended:
            self.err(s, "never ended (%d bytes, status %s)" % (len(s.data), s.status))
            return
        if s.status != est:
            self.err(s, "status %s, expected %d" % (s.status, est))
        want = ["</i%d>" % i for i in range(s.spec["i"])]
        if s.interim != want:
            # RFC 9110 15.2: a proxy forwards every 1xx
            self.err(s, "interim heads %s, expected %s" % (s.interim, want))
        if s.data != ebody:
            i = next((j for j in range(min(len(s.data), len(ebody)))
                      if s.data[j] != ebody[j]), min(len(s.data), len(ebody)))
            self.err(s, "body %d bytes, expected %d (first difference at %d)"
                     % (len(s.data), len(ebody), i))
        for k, v in ehead.items():
            if k == "content-length":
                if k in s.head and s.head[k] != v:
                    self.err(s, "content-length %s, expected %s" % (s.head[k], v))
                continue
            if s.head.get(k) != v:
                self.err(s, "head %s=%s, expected %s" % (k, s.head.get(k), v))
        for k, v in etrl.items():
            if s.trailers.get(k) != v:
                self.err(s, "trailer %s=%s, expected %s (trailers %s)"
                         % (k, s.trailers.get(k), v, s.trailers))

    def run(self, nstreams, open_until, deadline):
        opened = 0
        close_early = self.rnd.random() < 0.1
        close_at = self.rnd.randrange(1, nstreams + 1) if close_early else None
        self.sock.settimeout(0.2)
        quiet_since = time.time()
        while time.time() < deadline:
            live = [s for s in self.streams.values() if not s.done]
            if time.time() > open_until:
                nstreams = opened
            while opened < nstreams and len(live) < 8 and not self.goaway:
                live.append(self.open_stream())
                opened += 1
            self.pump_bodies()
            self.ack_some()
            self.flush()
            if close_at is not None and opened >= close_at:
                self.sock.close()
                return "closed"
            if opened >= nstreams and all(s.done for s in self.streams.values()):
                break
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                if time.time() - quiet_since > 15:
                    break
                continue
            if not d:
                break
            quiet_since = time.time()
            try:
                self.on_events(self.h.receive_data(d))
            except h2.exceptions.ProtocolError as e:
                self.errors.append("%s: protocol error from proxyd: %r" % (self.name, e))
                break
        for s in self.streams.values():
            self.check(s)
        try:
            self.h.close_connection()
            self.flush()
        except OSError:
            pass
        self.sock.close()
        return "done"


class H1Conn:
    """An HTTP/1.1 client: requests one after another on a connection,
    GETs sometimes pipelined, bodies with content-length or chunked (with
    trailers sometimes), the connection sometimes closed inside a
    response; or an HTTP/1.0 one (one request, no 1xx nor trailers back)."""

    def __init__(self, port, rnd, name, errors):
        self.rnd = rnd
        self.name = name
        self.errors = errors
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""
        self.streams = {}
        self.n = 0
        self.left = False       # the client closed inside a response
        # HTTP/1.0 at times: one request, bodies by length, no 1xx back
        self.v10 = rnd.random() < 0.2

    def err(self, s, msg):
        self.errors.append("%s req %d %s %s: %s" % (self.name, s.sid, s.method, s.path, msg))

    def request_bytes(self, s):
        hd = "%s %s HTTP/1.%d\r\nHost: 127.0.0.1\r\nUser-Agent: h1-random\r\n" % (
            s.method, s.path, 0 if self.v10 else 1)
        hd += "".join("%s: %s\r\n" % kv for kv in big_fields("x-q", s.spec["qb"], s.spec["k"]))
        if s.method not in ("POST", "PUT"):
            return [(hd + "\r\n").encode()]
        if not self.v10 and (s.req_trl or self.rnd.random() < 0.3):
            hd += "Transfer-Encoding: chunked\r\n"
            if s.req_trl:
                hd += "TE: trailers\r\n"
            out = [(hd + "\r\n").encode()]
            for i in range(0, len(s.body), s.piece):
                p = s.body[i:i + s.piece]
                out.append(b"%x\r\n%s\r\n" % (len(p), p))
            tail = b"0\r\n"
            if s.req_trl:
                tail += b"X-Req-Trailer: t%d\r\n" % len(s.body)
            out.append(tail + b"\r\n")
            return out
        hd += "Content-Length: %d\r\n\r\n" % len(s.body)
        out = [hd.encode()]
        for i in range(0, len(s.body), s.piece):
            out.append(s.body[i:i + s.piece])
        return out

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln.decode("latin-1")

    def take(self, n, s):
        while len(self.buf) < n:
            self.fill()
        s.data += self.buf[:n]
        self.buf = self.buf[n:]

    def fields(self):
        out = {}
        while True:
            ln = self.line()
            if not ln:
                return out
            k, v = ln.split(":", 1)
            out[k.strip().lower()] = v.strip()

    def read_response(self, s):
        """Reads S's response; s.ended once it is whole."""
        while True:
            st = self.line()
            s.status = int(st.split(" ")[1])
            s.head = self.fields()
            if s.status >= 200:
                break
            s.interim.append(s.head.get("link"))
        te = s.head.get("transfer-encoding", "").lower()
        if s.method == "HEAD" or s.status in (204, 304):
            pass
        elif te == "chunked":
            while True:
                size = int(self.line().split(";")[0], 16)
                if size == 0:
                    s.trailers = self.fields()
                    break
                self.take(size, s)
                if self.line() != "":
                    raise ValueError("bad chunk end")
        elif "content-length" in s.head:
            self.take(int(s.head["content-length"]), s)
        else:
            try:
                while True:
                    self.fill()
            except EOFError:
                pass
            s.data += self.buf
            self.buf = b""
            s.ended = True
            s.by_close = True
            return False
        s.ended = True
        return s.head.get("connection", "").lower() != "close"

    def run(self, nstreams, open_until, deadline):
        self.sock.settimeout(max(1, min(20, deadline - time.time())))
        alive = True
        while alive and self.n < nstreams and time.time() < open_until:
            batch = []
            s = Stream(self.rnd, self.n)
            batch.append(s)
            if s.method in ("GET", "HEAD") and self.rnd.random() < 0.3 and not self.v10:
                batch.append(Stream(self.rnd, self.n + 1))
            for b in batch:
                self.streams[b.sid] = b
                self.n += 1
                # pipelined, so a client reset means a close here
                if b.reset == 1:
                    b.reset = 2
            try:
                try:
                    for b in batch:
                        for chunk in self.request_bytes(b):
                            self.sock.sendall(chunk)
                except OSError:
                    # closed after an early answer: it may still be read
                    if not (b.spec["e"] and b.method in ("POST", "PUT")):
                        raise
                    b.early_cut = True
                for b in batch:
                    if b.reset == 2 and self.rnd.random() < 0.5:
                        # leave inside the response
                        try:
                            self.fill()
                        except EOFError:
                            pass
                        self.sock.close()
                        self.left = True
                        return "closed"
                    b.reset = 0
                    alive = self.read_response(b) and not self.v10
                    if b.spec["e"] and b.method in ("POST", "PUT"):
                        # an early answer, the body perhaps not all read:
                        # proxyd closes the connection after it (by
                        # design, docs/CONFIG.md), no more on this one
                        alive = False
                        self.left = True
                    if not alive or b.cut:
                        break
            except (EOFError, OSError, ValueError):
                alive = False
            finally:
                for b in batch:
                    self.check(b)
        self.sock.close()
        return "done"

    def check(self, s):
        if s.reset:
            return
        est, ehead, ebody, etrl = s.expected()
        if s.cut:
            if getattr(s, "by_close", False):
                # ended by the close (HTTP/1.0): a cut one looks whole
                if len(s.data) >= len(ebody):
                    self.err(s, "a cut response got all its bytes")
                return
            if s.ended and len(s.data) >= len(ebody):
                self.err(s, "a cut response ended as if whole")
            elif s.ended:
                self.err(s, "a cut response ended as if whole (%d of %d bytes)"
                         % (len(s.data), len(ebody)))
            return
        if s.status is None:
            if getattr(s, "early_cut", False):
                # proxyd closed while the body still came: RFC 9112 9.6's
                # lingering close would keep the answer from a reset
                return
            if not self.left and not any(b.cut for b in self.streams.values() if b.sid < s.sid):
                prev = self.streams.get(s.sid - 1)
                self.err(s, "no response%s" % (
                    "" if prev is None else " (after %s %s: status %s, connection %s)" % (
                        prev.method, prev.path, prev.status, prev.head.get("connection"))))
            return
        if not s.ended:
            self.err(s, "never ended (%d bytes, status %s)" % (len(s.data), s.status))
            return
        if s.status != est:
            self.err(s, "status %s, expected %d" % (s.status, est))
        want = ["</i%d>" % i for i in range(s.spec["i"])]
        if self.v10:
            # RFC 9110 15.2: no 1xx to an HTTP/1.0 client; no trailers
            want, etrl = [], {}
        if s.interim != want:
            # RFC 9110 15.2: a proxy forwards every 1xx
            self.err(s, "interim heads %s, expected %s" % (s.interim, want))
        if s.status in (204, 304) and "transfer-encoding" in s.head:
            # RFC 9112 6.1: a server MUST NOT send it in a 204
            self.err(s, "a %d with transfer-encoding: %s" % (s.status, s.head["transfer-encoding"]))
        if s.data != ebody:
            self.err(s, "body %d bytes, expected %d" % (len(s.data), len(ebody)))
        for k, v in ehead.items():
            if k == "content-length":
                continue
            if s.head.get(k) != v:
                self.err(s, "head %s=%s, expected %s" % (k, s.head.get(k), v))
        for k, v in etrl.items():
            if s.trailers.get(k) != v:
                self.err(s, "trailer %s=%s, expected %s (trailers %s)"
                         % (k, s.trailers.get(k), v, s.trailers))


def client(port, seed, seconds, conns, h1_share):
    print("seed %d" % seed, flush=True)
    master = random.Random(seed)
    errors = []
    lock = threading.Lock()
    deadline = time.time() + seconds
    stats = {"conns": 0, "streams": 0}

    def worker(wseed, wname):
        rnd = random.Random(wseed)
        i = 0
        while time.time() < deadline - 3:
            name = "%s.%d" % (wname, i)
            errs = []
            if rnd.random() < h1_share:
                c = H1Conn(port, rnd, name, errs)
            else:
                c = ClientConn(port, rnd, name, errs)
            n = rnd.choice([1, 3, 10, 25])
            c.run(n, deadline - 3, deadline + 15)
            with lock:
                errors.extend(errs)
                stats["conns"] += 1
                stats["streams"] += len(c.streams)
            i += 1

    ths = [threading.Thread(target=worker, args=(master.randrange(1 << 30), "c%d" % j))
           for j in range(conns)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    for e in errors:
        print("DIFF " + e)
    print("connections %d streams %d differences %d" % (stats["conns"], stats["streams"],
                                                        len(errors)), flush=True)
    return 1 if errors else 0


def main():
    if sys.argv[1] == "origin":
        origin(int(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(client(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                        int(sys.argv[5]) if len(sys.argv) > 5 else 3,
                        float(sys.argv[6]) if len(sys.argv) > 6 else 0.5))


if __name__ == "__main__":
    main()
