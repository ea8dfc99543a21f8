#!/usr/bin/python3
"""An HTTP/2 client for CONNECT tunnels (RFC 9113 8.5) through proxyd.

One subcommand per scenario, one connection each, everything bounded by
--timeout. Prints "key=value" lines the test greps; exit 0 when the
scenario ran (whatever the server did), 2 when it could not connect.

  h2_connect.py --port P [--tls CA] echo --to HOST:PORT --size N [--deny HOST:PORT]
      CONNECT to an echo server; N random bytes go up in DATA frames as
      the windows allow while the echo comes back (windows opened only as
      it is read), then END_STREAM. --deny: another CONNECT on the same
      connection, sent with DATA at once (before any answer), whose
      status is reported. Prints status=, up_sha=, down_sha=,
      down_bytes=, ended=, reset=, denied_status=, denied_ended=,
      denied_reset=.
      --window W: the client's stream window (SETTINGS_INITIAL_WINDOW_SIZE),
      --read-delay S: seconds it waits before each read (a slow reader:
      what it does not take must stop the origin, not pile up in proxyd).
      --hold S (any mode): no WINDOW_UPDATE until S seconds after the
      first DATA.
  h2_connect.py --port P half --to HOST:PORT --size N
      CONNECT to a server that reads to EOF and only then answers: the
      client's END_STREAM must reach it as a FIN. The HEADERS, the first
      DATA (as much as the window takes) and so END_STREAM for a small N
      go in one write. Prints status=,
      answer= (the server's line), up_sha=, ended=, reset=.
  h2_connect.py --port P close --to HOST:PORT
      CONNECT to a server that greets and shuts its side: prints
      status=, got=, ended= (END_STREAM came before the client's), then
      sends DATA and END_STREAM itself: end_sent=, reset= (none
      within a second).
  h2_connect.py --port P last --to HOST:PORT --size N [--path P]
      CONNECT to a server that greets and shuts its side first: once its
      END_STREAM came, N random bytes up and END_STREAM, which closes the
      stream: status=, got=, up_sha=, end_sent=, reset= (none within a
      second). What the server got is its own to say. --path: an
      extended CONNECT (a WebSocket) to that path.
  h2_connect.py --port P flood --to HOST:PORT --hold S
      CONNECT to a server that sends a MiB and its FIN: END_STREAM at
      once, the window opened only S seconds after the first DATA (the
      server's end waits for it): status=, down_sha=, down_bytes=, ended=,
      reset=, after= (seconds from END_STREAM to the stream's end).
  h2_connect.py --port P reset --to HOST:PORT
      CONNECT to a server that resets its TCP connection: status=,
      reset= (the RST_STREAM code's name).
  h2_connect.py --port P cancel --to HOST:PORT --size N
      CONNECT to an echo, N bytes up, RST_STREAM(CANCEL) once some came
      back, then a second tunnel on the connection: status=,
      got_before_reset=, second= (its status and echo), ended=.
  h2_connect.py --port P rst --to HOST:PORT --code CODE
      CONNECT to an echo, 1000 bytes up and all of them back, then
      RST_STREAM(CODE) and a PING whose ack says proxyd read it:
      status=, echoed=, pong=.
  h2_connect.py --port P idle --to HOST:PORT
      CONNECT to an echo, 100 bytes up and back, then nothing: how the
      stream ends (status=, echoed=, ended=, reset=) and after how long
      (after= seconds, closed=1 if the connection went too).
  h2_connect.py --port P earlyrst --to HOST:PORT --count N
      N CONNECTs, each reset with CANCEL 0..N-1 ms after its HEADERS
      (while its leg connects, or just after its 200), then one more
      whose echo comes back: final= (status, echo), ended=.
  h2_connect.py --port P finreset --to HOST:PORT
      CONNECT to a server that reads to EOF and then resets its TCP
      connection: a few bytes and END_STREAM, then how the stream ended:
      status=, ended=, reset=.
  h2_connect.py --port P malformed --to HOST:PORT
      CONNECT with :scheme and :path, and one without :authority: the
      RST_STREAM code of each (with_path=, no_authority=).
  h2_connect.py --port P ws --to HOST:PORT --size N
      Extended CONNECT (RFC 8441) for a WebSocket: whether SETTINGS
      offered it (enable_connect_protocol=), the status, then a text
      frame, an N-byte binary one and a close, masked: the frames the
      origin sent back (frames=, echoed=1 when the data frames are the
      same), ended=, reset=. The close goes once both data frames came
      back. --reset: RST_STREAM(CANCEL) instead of the close (echoes=,
      reset_sent=, pong=). --key K: the client sends a
      sec-websocket-key of its own too.
  h2_connect.py --port P early --to HOST:PORT --path P --size N
      POST announcing N bytes with a content-length, of which N/2 are
      sent as the windows allow: the status, whether END_STREAM came
      (ended=), the RST_STREAM code after it (reset=), the bytes sent
      (sent=).
"""
import argparse
import hashlib
import os
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings


def code_name(code):
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


class Stream:
    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.data = bytearray()
        self.ended = False
        self.reset = None
        self.out = b""          # still to send
        self.out_end = False    # END_STREAM once out is sent
        self.end_sent = False


class Client:
    def __init__(self, args):
        self.deadline = time.monotonic() + args.timeout
        try:
            raw = socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout)
        except OSError as e:
            print("connect_error=%s" % e)
            sys.exit(2)
        if args.tls:
            ctx = ssl.create_default_context(cafile=args.tls)
            ctx.set_alpn_protocols(["h2"])
            raw = ctx.wrap_socket(raw, server_hostname="localhost")
            if raw.selected_alpn_protocol() != "h2":
                print("alpn=%s" % raw.selected_alpn_protocol())
                sys.exit(2)
        self.s = raw
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, validate_outbound_headers=False,
            normalize_outbound_headers=False))
        self.c.initiate_connection()
        if args.window:
            self.c.update_settings({
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: args.window})
        self.read_delay = args.read_delay
        self.hold, self.held, self.acks = args.hold, None, []
        self.streams = {}
        self.closed = False
        self.got_settings = False
        self.pong = False
        self.flush()

    def flush(self):
        d = self.c.data_to_send()
        if d:
            self.s.sendall(d)

    def connect(self, sid, authority, extra=None, flush=True):
        st = self.streams[sid] = Stream(sid)
        hdrs = extra if extra is not None else [
            (b":method", b"CONNECT"), (b":authority", authority.encode())]
        self.c.send_headers(sid, hdrs)
        if flush:
            self.flush()
        return st

    def send_pending(self):
        """Sends what the windows allow."""
        for st in self.streams.values():
            if st.reset is not None or st.end_sent:
                continue
            while st.out:
                try:
                    w = self.c.local_flow_control_window(st.sid)
                except h2.exceptions.StreamClosedError:
                    st.out = b""
                    break
                n = min(w, self.c.max_outbound_frame_size, len(st.out))
                if n <= 0:
                    break
                self.c.send_data(st.sid, bytes(st.out[:n]))
                st.out = memoryview(st.out)[n:]     # no copy of the rest
            if not st.out and st.out_end and not st.end_sent:
                self.c.end_stream(st.sid)
                st.end_sent = True
        self.flush()

    def step(self):
        """Reads once (up to the deadline): False when the connection ended."""
        left = self.deadline - time.monotonic()
        if left <= 0 or self.closed:
            return False
        self.s.settimeout(min(left, 0.2 if self.acks else 1.0))
        if self.read_delay:
            time.sleep(self.read_delay)
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            self.release_acks()
            self.flush()
            return True
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return False
        for ev in self.c.receive_data(data):
            st = self.streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived) and st:
                st.status = dict(ev.headers).get(b":status", b"").decode()
            elif isinstance(ev, h2.events.DataReceived):
                if st:
                    st.data += ev.data
                if ev.flow_controlled_length:
                    self.acks.append((ev.flow_controlled_length,
                                      ev.stream_id))

            elif isinstance(ev, h2.events.StreamEnded) and st:
                st.ended = True
            elif isinstance(ev, h2.events.StreamReset) and st:
                st.reset = code_name(ev.error_code)
            elif isinstance(ev, h2.events.PingAckReceived):
                self.pong = True
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                self.got_settings = True
            elif isinstance(ev, h2.events.ConnectionTerminated):
                print("goaway=%s" % code_name(ev.error_code))
                self.closed = True
        self.release_acks()
        self.send_pending()
        return True

    def release_acks(self):
        """The windows open as the data are read, or (--hold) only that
        long after the first DATA."""
        if self.acks and self.hold and self.held is None:
            self.held = time.monotonic() + self.hold
        if self.held is not None and time.monotonic() < self.held:
            return
        for n, sid in self.acks:
            try:
                self.c.acknowledge_received_data(n, sid)
            except h2.exceptions.StreamClosedError:
                pass
        self.acks = []

    def until(self, cond):
        while not cond():
            if not self.step():
                return cond()
        return True


def sha(b):
    return hashlib.sha256(bytes(b)).hexdigest()


def run_echo(cl, a):
    payload = os.urandom(a.size)
    st = cl.connect(1, a.to)
    den = None
    if a.deny:
        den = cl.connect(3, a.deny)
        # Sent before any answer: a refused CONNECT's bytes must never be
        # read as a request by anyone.
        cl.c.send_data(3, b"GET http://127.0.0.1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
        cl.flush()
        cl.until(lambda: den.status is not None or den.reset is not None)
    cl.until(lambda: st.status is not None or st.reset is not None)
    if st.status == "200":
        st.out, st.out_end = payload, True
        cl.send_pending()
        cl.until(lambda: st.ended or st.reset is not None)
    if den:
        # RST_STREAM(NO_ERROR) follows the refusal.
        cl.until(lambda: den.reset is not None)
        print("denied_status=%s denied_ended=%d denied_reset=%s" %
              (den.status, den.ended, den.reset))
    print("status=%s" % st.status)
    print("up_sha=%s" % sha(payload))
    print("down_sha=%s down_bytes=%d" % (sha(st.data), len(st.data)))
    print("ended=%d reset=%s" % (st.ended, st.reset))


def run_half(cl, a):
    payload = os.urandom(a.size)
    # The bytes and END_STREAM go at once, in the HEADERS' own write
    # (one read for proxyd): held until the 200.
    st = cl.connect(1, a.to, flush=False)
    st.out, st.out_end = payload, True
    cl.send_pending()
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("answer=%s" % bytes(st.data).decode(errors="replace").strip())
    print("up_sha=%s" % sha(payload))
    print("ended=%d reset=%s" % (st.ended, st.reset))


def run_close(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("got=%s" % bytes(st.data).decode(errors="replace").strip())
    print("ended=%d" % st.ended)
    # Our side still open: its bytes and END_STREAM close the stream.
    st.out, st.out_end = b"late bytes\n", True
    cl.send_pending()
    # A reset would follow at once: a second is plenty.
    cl.deadline = min(cl.deadline, time.monotonic() + 1)
    cl.until(lambda: st.reset is not None)
    print("end_sent=%d reset=%s" % (st.end_sent, st.reset))


def run_last(cl, a):
    payload = os.urandom(a.size)
    if a.path:
        # An extended CONNECT (RFC 8441) for a WebSocket.
        cl.until(lambda: cl.got_settings)
        st = cl.connect(1, a.to, [
            (b":method", b"CONNECT"), (b":protocol", b"websocket"),
            (b":scheme", b"http"), (b":path", a.path.encode()),
            (b":authority", a.to.encode()),
            (b"sec-websocket-version", b"13")])
    else:
        st = cl.connect(1, a.to)
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("got=%s" % bytes(st.data).decode(errors="replace").strip())
    # The stream closes with our last DATA: they must all reach the
    # server, however slowly it reads.
    st.out, st.out_end = payload, True
    cl.send_pending()
    cl.until(lambda: st.end_sent or st.reset is not None)
    cl.deadline = min(cl.deadline, time.monotonic() + 1)
    cl.until(lambda: st.reset is not None)
    print("up_sha=%s" % sha(payload))
    print("end_sent=%d reset=%s" % (st.end_sent, st.reset))


def run_flood(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out, st.out_end = b"", True
    cl.send_pending()
    t0 = time.monotonic()
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("down_sha=%s down_bytes=%d" % (sha(st.data), len(st.data)))
    print("ended=%d reset=%s after=%.1f" % (st.ended, st.reset,
                                            time.monotonic() - t0))


def run_reset(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out = b"x" * 1000
    cl.send_pending()
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("ended=%d reset=%s" % (st.ended, st.reset))


def run_cancel(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out = os.urandom(a.size)
    cl.send_pending()
    cl.until(lambda: len(st.data) >= 1000 or st.reset is not None)
    cl.c.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
    cl.flush()
    # The connection goes on: another tunnel on it.
    s3 = cl.connect(3, a.to)
    cl.until(lambda: s3.status is not None or s3.reset is not None)
    s3.out, s3.out_end = b"after the reset\n", True
    cl.send_pending()
    cl.until(lambda: s3.ended or s3.reset is not None)
    print("status=%s got_before_reset=%d" % (st.status, len(st.data) >= 1000))
    print("second=%s %s ended=%d" % (s3.status, bytes(s3.data).decode().strip(), s3.ended))


def run_rst(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out = os.urandom(1000)
    cl.send_pending()
    # All of it back: the origin is idle in its read when the reset comes.
    cl.until(lambda: len(st.data) >= 1000 or st.reset is not None)
    cl.c.reset_stream(1, h2.errors.ErrorCodes[a.code])
    cl.c.ping(b"rstping!")
    cl.flush()
    cl.until(lambda: cl.pong)
    print("status=%s echoed=%d pong=%d" % (st.status, len(st.data), cl.pong))


def run_idle(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out = b"y" * 100
    cl.send_pending()
    cl.until(lambda: len(st.data) >= 100 or st.reset is not None)
    # Nothing more either way: how the tunnel ends, and when.
    t0 = time.monotonic()
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s echoed=%d ended=%d reset=%s" % (st.status, len(st.data),
                                                     st.ended, st.reset))
    print("after=%.1f closed=%d" % (time.monotonic() - t0, cl.closed))


def run_earlyrst(cl, a):
    for i in range(a.count):
        cl.connect(1 + 2 * i, a.to)
        time.sleep(i / 1000)
        cl.c.reset_stream(1 + 2 * i, h2.errors.ErrorCodes.CANCEL)
        cl.flush()
    st = cl.connect(1 + 2 * a.count, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out, st.out_end = b"still here\n", True
    cl.send_pending()
    cl.until(lambda: st.ended or st.reset is not None)
    print("final=%s %s ended=%d" % (st.status, bytes(st.data).decode().strip(), st.ended))


def run_finreset(cl, a):
    st = cl.connect(1, a.to)
    cl.until(lambda: st.status is not None or st.reset is not None)
    st.out, st.out_end = b"x" * 1000, True
    cl.send_pending()
    cl.until(lambda: st.ended or st.reset is not None)
    print("status=%s" % st.status)
    print("ended=%d reset=%s" % (st.ended, st.reset))


def run_malformed(cl, a):
    auth = a.to.encode()
    s1 = cl.connect(1, a.to, [(b":method", b"CONNECT"), (b":scheme", b"http"),
                              (b":path", b"/"), (b":authority", auth)])
    s3 = cl.connect(3, a.to, [(b":method", b"CONNECT"), (b"host", auth)])
    # A good one after them: the connection goes on.
    s5 = cl.connect(5, a.to)
    cl.until(lambda: all(s.reset is not None or s.status is not None
                         for s in (s1, s3, s5)))
    print("with_path=%s no_authority=%s good=%s" % (s1.reset or s1.status,
                                                    s3.reset or s3.status,
                                                    s5.status))


def run_early(cl, a):
    st = cl.streams[1] = Stream(1)
    cl.c.send_headers(1, [(b":method", b"POST"), (b":scheme", b"http"),
                          (b":authority", a.to.encode()),
                          (b":path", a.path.encode()),
                          (b"content-length", str(a.size).encode())])
    # More than proxyd drains after its answer, less than announced.
    st.out = os.urandom(a.size // 2)
    cl.send_pending()
    cl.until(lambda: st.reset is not None)
    print("status=%s ended=%d reset=%s" % (st.status, st.ended, st.reset))
    print("sent=%d" % (a.size // 2 - len(st.out)))


def ws_frame(opcode, payload):
    """A client's frame: FIN, masked (RFC 6455 5.2)."""
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_parse(buf):
    """The server's frames in buf (unmasked): [(opcode, payload)], rest."""
    out = []
    while len(buf) >= 2:
        n, off = buf[1] & 0x7f, 2
        if n == 126:
            n, off = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            n, off = int.from_bytes(buf[2:10], "big"), 10
        if buf[1] & 0x80 or len(buf) < off + n:
            break
        out.append((buf[0] & 0x0f, bytes(buf[off:off + n])))
        buf = buf[off + n:]
    return out, buf


def run_ws(cl, a):
    # The server's SETTINGS first: :protocol is only for a server that
    # offers it.
    cl.until(lambda: cl.got_settings)
    offered = cl.c.remote_settings.get(8, 0)
    print("enable_connect_protocol=%d" % offered)
    st = cl.connect(1, a.to, [
        (b":method", b"CONNECT"), (b":protocol", b"websocket"),
        (b":scheme", b"http"), (b":path", b"/chat"),
        (b":authority", a.to.encode()), (b"sec-websocket-version", b"13")] +
        ([(b"sec-websocket-key", a.key.encode())] if a.key else []))
    cl.until(lambda: st.status is not None or st.reset is not None)
    print("status=%s reset=%s" % (st.status, st.reset))
    if st.status != "200":
        return
    msgs = [(1, b"hello over h2"), (2, os.urandom(a.size))]
    st.out = b"".join(ws_frame(op, p) for op, p in msgs)
    cl.send_pending()
    # The close once both came back: a server that got it would send
    # nothing more (RFC 6455 5.5.1).
    cl.until(lambda: len(ws_parse(bytes(st.data))[0]) >= 2 or st.ended or
             st.reset is not None)
    if a.reset:
        # The client leaves without a close: RST_STREAM(CANCEL).
        cl.c.reset_stream(1, h2.errors.ErrorCodes.CANCEL)
        cl.c.ping(b"wsrstpng")
        cl.flush()
        cl.until(lambda: cl.pong)
        print("echoes=%d reset_sent=1 pong=%d" % (
            len(ws_parse(bytes(st.data))[0]), cl.pong))
        return
    st.out, st.out_end = ws_frame(8, b"\x03\xe8"), True
    cl.send_pending()
    cl.until(lambda: st.ended or st.reset is not None)
    frames, rest = ws_parse(bytes(st.data))
    print("frames=%s" % ",".join(str(op) for op, _ in frames))
    print("echoed=%d" % (frames[:2] == msgs))
    print("ended=%d reset=%s rest=%d" % (st.ended, st.reset, len(rest)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", help="CA file: TLS with ALPN h2")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("mode", choices=["echo", "half", "close", "reset",
                                     "malformed", "early", "ws", "cancel",
                                     "rst", "finreset", "earlyrst", "idle", "last", "flood"])
    ap.add_argument("--to", default="")
    ap.add_argument("--deny")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--path", default="")
    ap.add_argument("--code", default="CANCEL")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--key")
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--reset", action="store_true")
    ap.add_argument("--read-delay", type=float, default=0)
    ap.add_argument("--hold", type=float, default=0)
    a = ap.parse_args()
    cl = Client(a)
    globals()["run_" + a.mode](cl, a)


if __name__ == "__main__":
    main()
