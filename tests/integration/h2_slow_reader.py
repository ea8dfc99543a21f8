#!/usr/bin/python3
"""A slow but steady HTTP/2 reader: GETs each PATH on one h2c connection
(prior knowledge) and opens each stream's window at --rate bytes a second,
the connection's as much in all, from an initial window of --window: the
client reads within any timeout, only slowly. Prints one line per path:

  path=P status=S bytes=N sha256=HEX ended=0|1 reset=CODE|- seconds=T

A PATH written +PATH is asked with a small request body (its leg is then
not kept: it closes after the response, which it must still deliver
whole); PATH@RATE: that stream's window opens at RATE bytes a second;
PATH%N: the client resets that stream (RST_STREAM CANCEL) once it has N
bytes of the body (then reset=CANCEL-by-client in its line).
and exits 0 (1 when the connection failed). Bounded by --deadline s."""
import argparse
import hashlib
import select
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--rate", type=int, default=120000, help="bytes/s per stream")
ap.add_argument("--window", type=int, default=16384)
ap.add_argument("--deadline", type=float, default=40.0)
ap.add_argument("paths", nargs="+")
a = ap.parse_args()

s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: a.window})
streams = {}
for p in a.paths:
    sid = c.get_next_available_stream_id()
    body = p.startswith("+")
    path, _, cut = p.lstrip("+").partition("%")
    path, _, rate = path.partition("@")
    cut, _, rate2 = cut.partition("@")
    rate = rate or rate2
    c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                         (":authority", "127.0.0.1:%d" % a.port)], end_stream=not body)
    if body:
        c.send_data(sid, b"hello", end_stream=True)
    streams[sid] = {"path": p, "rate": int(rate or a.rate), "cut": int(cut or 0), "status": "-", "bytes": 0, "sha": hashlib.sha256(),
                    "ended": 0, "reset": "-", "owed": 0, "t": None}
s.sendall(c.data_to_send())
t0 = time.monotonic()
last = t0
open_ = set(streams)
while open_ and time.monotonic() - t0 < a.deadline:
    r, _, _ = select.select([s], [], [], 0.05)
    if r:
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        for ev in c.receive_data(data):
            st = streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                st["status"] = dict(ev.headers).get(b":status", b"-").decode()
            elif isinstance(ev, h2.events.DataReceived):
                st["bytes"] += len(ev.data)
                st["sha"].update(ev.data)
                st["owed"] += ev.flow_controlled_length
                if st["cut"] and st["bytes"] >= st["cut"] and ev.stream_id in open_:
                    c.reset_stream(ev.stream_id, h2.errors.ErrorCodes.CANCEL)
                    st["reset"] = "CANCEL-by-client"
                    st["t"] = time.monotonic() - t0
                    open_.discard(ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                st["ended"] = 1
                st["t"] = time.monotonic() - t0
                open_.discard(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                st["reset"] = getattr(ev.error_code, "name", str(ev.error_code))
                st["t"] = time.monotonic() - t0
                open_.discard(ev.stream_id)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                open_.clear()
    now = time.monotonic()
    # the windows open at rate: what was read, no faster
    dt = now - last
    if dt >= 0.05:
        last = now
        total = 0
        for sid in list(open_):
            g = min(streams[sid]["owed"], int(streams[sid]["rate"] * dt))
            if g > 0:
                c.increment_flow_control_window(g, stream_id=sid)
                streams[sid]["owed"] -= g
                total += g
        if total:
            c.increment_flow_control_window(total)
    out = c.data_to_send()
    if out:
        s.sendall(out)
for sid, st in sorted(streams.items()):
    print("path=%s status=%s bytes=%d sha256=%s ended=%d reset=%s seconds=%.1f"
          % (st["path"], st["status"], st["bytes"], st["sha"].hexdigest(),
             st["ended"], st["reset"], st["t"] if st["t"] is not None else -1))
s.close()
