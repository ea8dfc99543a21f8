#!/usr/bin/python3
"""A small HTTP/2 origin (prior knowledge h2c) for http_server_h2_stream:
Debian's python3 with python3-h2. Paths:
  /echo    full duplex: the response head goes at once, each DATA frame of
           the request is echoed back as it comes, and the request's end
           ends the response with trailers: x-echo-trailer (the request's
           x-req-trailer, or "none"), x-echo-bytes; x-te in the head says
           what te the request carried
  /reset   a head and 5 bytes, then RST_STREAM (INTERNAL_ERROR)
  /reset0  RST_STREAM (CANCEL) before any head
Each request line goes to the log: method path te; a stream the client
resets: "reset PATH code=N". With a third argument
N, the first N connections are closed as soon as they come (a server that
dies before answering).
Any other path: 404, /file answers 200 with 100 bytes, /early a 103
(Link) before its 200, /refuse-once... is refused (REFUSED_STREAM) the
first time and then echoed as /echo is, /hang is never answered, /held gets a head of 20 fields and then
nothing (a stream held open), /sink... never answered and its body never
taken (the stream's window stays shut; the connection's is given back),
/sinkall... the same, the connection's window kept too (a server whose
connection stalls: "sinkall full" logged once 65535 bytes came), /late
answers 200 with "hello" 0.3 s after its request (a client acts first).
Answered at once while the body waits (http_server_h2_window): /done-sink
gets 200 "done" with END_STREAM and its body is never taken (the stream's
window stays shut, the connection's is given back), /done-slow-sink a head
and then "tick\n" every 0.25 s, 8 of them, the last with END_STREAM, its
body never taken either, /done-drip 200 "done" with END_STREAM and its
body taken slowly (each DATA frame's window given back 0.2 s after it
came; its end logged "done-drip got N end")."""
import socket
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.errors
import h2.settings


REFUSED = set()


def serve(conn, log):
    cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                    validate_inbound_headers=True)
    h = h2.connection.H2Connection(config=cfg)
    # Room for many held streams on one connection.
    h.local_settings = h2.settings.Settings(
        client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000})
    h.initiate_connection()
    conn.sendall(h.data_to_send())
    streams = {}
    late = []       # (when, action): what a path does later, in time order

    def later(delay, action):
        late.append((time.time() + delay, action))
        late.sort(key=lambda w: w[0])

    def answer_late(sid):
        h.send_headers(sid, [(":status", "200"), ("content-length", "5")])
        h.send_data(sid, b"hello", end_stream=True)

    def tick(sid, left):
        h.send_data(sid, b"tick\n", end_stream=left == 1)
        if left > 1:
            later(0.25, lambda: tick(sid, left - 1))

    while True:
        now = time.time()
        while late and late[0][0] <= now:
            try:
                late.pop(0)[1]()
            except Exception:
                pass        # reset meanwhile
        out = h.data_to_send()
        if out:
            conn.sendall(out)
        conn.settimeout(max(late[0][0] - now, 0.01) if late else None)
        try:
            data = conn.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return
        if not data:
            return
        for ev in h.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                hd = dict(ev.headers)
                path = hd.get(":path", "")
                te = hd.get("te", "-")
                with open(log, "a") as f:
                    f.write("%s %s te=%s\n" % (hd.get(":method"), path, te))
                st = {"path": path, "bytes": 0, "trailer": "none",
                      "sink": path.startswith("/sink") or
                      path.startswith("/done-sink") or
                      path.startswith("/done-slow-sink")}
                streams[ev.stream_id] = st
                if path.startswith("/echo"):
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("x-te", te)])
                elif path.startswith("/reset0"):
                    h.reset_stream(ev.stream_id, h2.errors.ErrorCodes.CANCEL)
                elif path.startswith("/reset"):
                    h.send_headers(ev.stream_id, [(":status", "200")])
                    h.send_data(ev.stream_id, b"hello")
                    h.reset_stream(ev.stream_id,
                                   h2.errors.ErrorCodes.INTERNAL_ERROR)
                elif path.startswith("/refuse-once") and path not in REFUSED:
                    REFUSED.add(path)
                    h.reset_stream(ev.stream_id,
                                   h2.errors.ErrorCodes.REFUSED_STREAM)
                elif path.startswith("/refuse-once"):
                    st["path"] = "/echo"    # echoed as /echo is
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("x-te", te)])
                elif path.startswith("/sink"):
                    pass    # reads nothing: its window stays shut
                elif path.startswith("/done-slow-sink"):
                    h.send_headers(ev.stream_id, [(":status", "200")])
                    later(0.25, lambda sid=ev.stream_id: tick(sid, 8))
                elif path.startswith("/done-"):
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("content-length", "4")])
                    h.send_data(ev.stream_id, b"done", end_stream=True)
                elif path == "/late":
                    later(0.3, lambda sid=ev.stream_id: answer_late(sid))
                elif path == "/hang":
                    pass                    # never answered
                elif path == "/held":
                    h.send_headers(ev.stream_id, [(":status", "200")] +
                                   [("x-held-%02d" % i, "v" * 20)
                                    for i in range(20)])
                elif path == "/early":
                    h.send_headers(ev.stream_id, [(":status", "103"),
                                                  ("link", "</a.css>; rel=preload")])
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("content-length", "2")])
                    h.send_data(ev.stream_id, b"ok", end_stream=True)
                elif path == "/file":
                    h.send_headers(ev.stream_id, [(":status", "200"),
                                                  ("content-length", "100")])
                    h.send_data(ev.stream_id, b"x" * 100, end_stream=True)
                else:
                    h.send_headers(ev.stream_id, [(":status", "404"),
                                                  ("content-length", "0")],
                                   end_stream=True)
            elif isinstance(ev, h2.events.DataReceived):
                st = streams.get(ev.stream_id)
                if st is not None and st["path"].startswith("/sinkall"):
                    # Nothing given back, not even the connection's.
                    st["bytes"] += ev.flow_controlled_length
                    if st["bytes"] >= 65535 and not st.get("full"):
                        st["full"] = True
                        with open(log, "a") as f:
                            f.write("sinkall full\n")
                elif st is not None and st["path"].startswith("/done-drip"):
                    st["bytes"] += len(ev.data)
                    n = ev.flow_controlled_length
                    later(0.2, lambda n=n, sid=ev.stream_id:
                          h.acknowledge_received_data(n, sid))
                elif st is None or not st["sink"]:
                    h.acknowledge_received_data(ev.flow_controlled_length,
                                                ev.stream_id)
                elif ev.flow_controlled_length:
                    # A sink's own window stays shut, the connection's
                    # comes back (as nghttp2 and nginx do): the
                    # connection is shared by every client's stream, a
                    # stream nobody reads must not stall the others.
                    h.increment_flow_control_window(
                        ev.flow_controlled_length)
                if st is not None and st["path"].startswith("/echo"):
                    st["bytes"] += len(ev.data)
                    try:
                        h.send_data(ev.stream_id, ev.data)
                    except Exception:
                        pass
            elif isinstance(ev, h2.events.TrailersReceived):
                st = streams.get(ev.stream_id)
                if st is not None:
                    st["trailer"] = dict(ev.headers).get("x-req-trailer",
                                                         "none")
            elif isinstance(ev, h2.events.StreamReset):
                st = streams.get(ev.stream_id)
                with open(log, "a") as f:
                    f.write("reset %s code=%d\n" % (
                        st["path"] if st else "?", int(ev.error_code)))
            elif isinstance(ev, h2.events.StreamEnded):
                st = streams.get(ev.stream_id)
                if st is not None and st["path"].startswith("/done-drip"):
                    with open(log, "a") as f:
                        f.write("done-drip got %d end\n" % st["bytes"])
                if st is not None and st["path"].startswith("/echo"):
                    h.send_headers(ev.stream_id, [
                        ("x-echo-trailer", st["trailer"]),
                        ("x-echo-bytes", str(st["bytes"]))], end_stream=True)
        out = h.data_to_send()
        if out:
            conn.sendall(out)


def main():
    port, log = int(sys.argv[1]), sys.argv[2]
    drop = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    srv.settimeout(120)
    while True:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            return
        if drop > 0:
            drop -= 1
            with open(log, "a") as f:
                f.write("dropped a connection\n")
            c.close()
            continue
        threading.Thread(target=serve, args=(c, log), daemon=True).start()


main()
