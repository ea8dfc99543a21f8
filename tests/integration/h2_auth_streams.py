#!/usr/bin/python3
"""HTTP/2 streams of one h2c connection (prior knowledge; --tls: h2 by ALPN
with a client certificate) to a service with <auth>, several in flight at
once (http_auth.sh, tls_client_identity.sh):

  streams  PATH=CRED ...   every stream's HEADERS in one write (CRED: the
                           Authorization value's "user:password", "-" for
                           none); waits for every response; prints
                           "PATH STATUS" per stream, in the order given
  reset    PATH=CRED TRIGGER PATH2
                           the first stream, then RST_STREAM CANCEL on it
                           once its HEADERS went; waits (bounded) for the
                           file TRIGGER, then asks PATH2 without
                           credentials on the same connection: prints
                           "PATH2 STATUS"
  close    PATH=CRED ...   the streams, then the connection reset (RST) as
                           soon as proxyd answered anything (its SETTINGS)
  hold     READY GO PATH=CRED ...
                           the streams and a PING; once its ACK came (proxyd
                           read every HEADERS before it) creates the file
                           READY, waits (bounded) for the file GO, then
                           resets the connection (RST)

Exits 0, or 1 when the connection failed. Bounded by --deadline s."""
import argparse
import base64
import os
import select
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--deadline", type=float, default=20.0)
ap.add_argument("--forward", metavar="HOST:PORT",
                help="a forward proxy's streams: :authority HOST:PORT, the "
                "credentials in proxy-authorization")
ap.add_argument("--tls", nargs=3, metavar=("CA", "CERT", "KEY"),
                help="TLS (ALPN h2) with this client certificate")
ap.add_argument("mode", choices=["streams", "reset", "close", "hold"])
ap.add_argument("args", nargs="+")
a = ap.parse_args()

s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
if a.tls:
    import ssl
    ctx = ssl.create_default_context(cafile=a.tls[0])
    ctx.load_cert_chain(a.tls[1], a.tls[2])
    ctx.set_alpn_protocols(["h2"])
    s = ctx.wrap_socket(s, server_hostname="localhost")
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
t0 = time.monotonic()


def ready(timeout):
    """select() on s, or at once when TLS holds bytes already read."""
    if a.tls and s.pending():
        return [s], [], []
    return select.select([s], [], [], timeout)


def ask(spec):
    path, _, cred = spec.partition("=")
    sid = c.get_next_available_stream_id()
    hdr = [(":method", "GET"), (":path", path), (":scheme", "https" if a.tls else "http"),
           (":authority", a.forward or "localhost:%d" % a.port)]
    if cred and cred != "-":
        hdr.append(("proxy-authorization" if a.forward else "authorization",
                    "Basic " + base64.b64encode(cred.encode()).decode()))
    c.send_headers(sid, hdr, end_stream=True)
    return sid


def pump(status, wanted):
    """Reads until every stream of wanted ended (status: sid -> code)."""
    while any(sid not in status or status[sid][1] is False for sid in wanted):
        if time.monotonic() - t0 > a.deadline:
            return False
        s.sendall(c.data_to_send())
        r, _, _ = ready(0.1)
        if not r:
            continue
        d = s.recv(65536)
        if not d:
            return False
        for ev in c.receive_data(d):
            if isinstance(ev, h2.events.ResponseReceived):
                hd = [(k.decode(), v.decode()) for k, v in ev.headers]
                code = dict(hd)[":status"]
                # a challenge says which schemes: "401 www-authenticate=Negotiate,Basic"
                for name in ("www-authenticate", "proxy-authenticate"):
                    ch = [v.split(" ")[0] for k, v in hd if k == name]
                    if ch:
                        code += " %s=%s" % (name, ",".join(ch))
                status[ev.stream_id] = [code, False]
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                status.setdefault(ev.stream_id, ["-", False])[1] = True
            elif isinstance(ev, h2.events.StreamReset):
                status[ev.stream_id] = ["reset", True]
            elif isinstance(ev, h2.events.ConnectionTerminated):
                return False
    s.sendall(c.data_to_send())
    return True


status = {}
if a.mode == "hold":
    for spec in a.args[2:]:
        ask(spec)
    c.ping(b"holdping")
    s.sendall(c.data_to_send())
    acked = False
    while not acked and time.monotonic() - t0 < a.deadline:
        r, _, _ = ready(0.1)
        if r:
            d = s.recv(65536)
            if not d:
                sys.exit(1)
            for ev in c.receive_data(d):
                if isinstance(ev, h2.events.PingAckReceived):
                    acked = True
            s.sendall(c.data_to_send())
    if not acked:
        sys.exit(1)
    open(a.args[0], "w").close()
    while not os.path.exists(a.args[1]) and time.monotonic() - t0 < a.deadline:
        r, _, _ = ready(0.1)
        if r:
            d = s.recv(65536)
            if not d:
                sys.exit(1)
            c.receive_data(d)
            s.sendall(c.data_to_send())
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    sys.exit(0)
if a.mode in ("streams", "close"):
    sids = [(ask(spec), spec.partition("=")[0]) for spec in a.args]
    s.sendall(c.data_to_send())
    if a.mode == "close":
        # proxyd's first bytes (its SETTINGS) come once it read ours:
        # the streams are under way, then the connection goes
        r, _, _ = ready(5)
        if r:
            s.recv(65536)
        # a reset, not a FIN (after which proxyd would still answer the
        # streams whose request is whole): the session ends at once
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        sys.exit(0)
    ok = pump(status, [sid for sid, _ in sids])
    for sid, path in sids:
        print(path, status.get(sid, ["none"])[0])
    sys.exit(0 if ok else 1)

# reset
sid = ask(a.args[0])
s.sendall(c.data_to_send())
time.sleep(0.1)
c.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
s.sendall(c.data_to_send())
while not os.path.exists(a.args[1]) and time.monotonic() - t0 < a.deadline:
    # PINGs meanwhile: the connection is read, not idle
    c.ping(b"12345678")
    s.sendall(c.data_to_send())
    r, _, _ = ready(0.1)
    if r:
        d = s.recv(65536)
        if not d:
            print(a.args[2], "closed")
            sys.exit(1)
        c.receive_data(d)
sid2 = ask(a.args[2] + "=-")
ok = pump(status, [sid2])
print(a.args[2], status.get(sid2, ["none"])[0])
sys.exit(0 if ok else 1)
