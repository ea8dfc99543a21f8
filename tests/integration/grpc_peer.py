#!/usr/bin/python3
"""A gRPC server and client for the tests (Debian's python3-grpcio, run
with /usr/bin/python3: the grpc module is not in every python3 on PATH).

No protoc: messages are raw bytes (identity serializers) on a generic
handler, service "test.Peer".

    grpc_peer.py server PORT [--log FILE]
        Serves until killed; prints "listening PORT" once ready. Writes
        one line per event worth asserting on to --log (or stderr):
        "cancelled METHOD" when a call it was serving is cancelled.
    grpc_peer.py rst-server PORT
        Not gRPC's own server: a bare HTTP/2 one (python3-h2) that answers
        any call with its response head and one message, then resets the
        stream with RST_STREAM CANCEL (a server that cancels mid-way);
        prints "listening PORT" once ready.
    grpc_peer.py client TARGET CASE [options]
        One call; prints machine-checkable "key=value" results on one
        line, always starting with "status=CODE_NAME" (OK, UNAVAILABLE,
        ...). Exit 0 whenever a gRPC status came (whatever it is).

Methods (client CASE of the same name, lower case):
    Unary         echo; initial metadata "x-initial: hello", trailing
                  metadata "x-trailing: bye" and "x-echo-len: N"
    ServerStream  request "N SIZE": N messages of SIZE bytes each
    ClientStream  answers "count=N bytes=B sha256=H" of what came
    Bidi          echoes each message as it comes
    Big           request "TOTAL": a stream of 1 MB messages (the last one
                  shorter) totalling TOTAL bytes of a fixed pseudo-random
                  pattern
    Slow          request "SECONDS": answers after that delay (or when
                  cancelled)
    Reset         request "N": sends N messages, then aborts the call
                  with ABORTED "reset by the server" (its trailers say so);
                  "N cancel": cancels it instead (RST_STREAM CANCEL)
    Forbidden     echo (a method the proxy's policy refuses)
    Missing       not served: the server answers UNIMPLEMENTED in a
                  trailers-only response (one HEADERS frame, END_STREAM)
"""
import argparse
import hashlib
import os
import sys
import threading
import time
from concurrent import futures

import grpc

SVC = "test.Peer"
CHUNK = 1 << 20
ident = None  # identity (de)serializer: bytes as they are


def pattern(total):
    """The Big stream's bytes, in CHUNK-sized messages (deterministic)."""
    block = hashlib.sha256(b"grpc-peer").digest() * (CHUNK // 32)
    sent = 0
    while sent < total:
        n = min(CHUNK, total - sent)
        yield block[:n]
        sent += n


# ---- server ---------------------------------------------------------------

class Peer:
    def __init__(self, log):
        self.log = log
        self.lock = threading.Lock()

    def note(self, line):
        with self.lock:
            self.log.write(line + "\n")
            self.log.flush()

    def unary(self, req, ctx):
        ctx.send_initial_metadata((("x-initial", "hello"),))
        ctx.set_trailing_metadata((("x-trailing", "bye"),
                                   ("x-echo-len", str(len(req)))))
        return req

    def forbidden(self, req, ctx):
        return req

    def server_stream(self, req, ctx):
        n, size = (int(x) for x in req.decode().split())
        for i in range(n):
            yield (b"%08d" % i + b"s" * size)[:size]

    def client_stream(self, it, ctx):
        h = hashlib.sha256()
        count = total = 0
        for m in it:
            count += 1
            total += len(m)
            h.update(m)
        return ("count=%d bytes=%d sha256=%s" %
                (count, total, h.hexdigest())).encode()

    def bidi(self, it, ctx):
        for m in it:
            yield m

    def ended(self, ctx, name):
        """Notes "cancelled NAME" if the call ends before the handler
        finished it (the client cancelled, or its stream was reset)."""
        state = {"done": False}

        def end():
            if not state["done"]:
                self.note("cancelled " + name)
        ctx.add_callback(end)
        return state

    def big(self, req, ctx):
        state = self.ended(ctx, "Big")
        for m in pattern(int(req.decode())):
            if not ctx.is_active():
                return
            yield m
        state["done"] = True

    def slow(self, req, ctx):
        ev = threading.Event()
        state = self.ended(ctx, "Slow")
        ctx.add_callback(ev.set)
        ev.wait(float(req.decode()))
        if not ctx.is_active():
            return b""
        state["done"] = True
        return b"slow done"

    def reset(self, req, ctx):
        words = req.decode().split()
        for i in range(int(words[0])):
            yield b"r%d" % i
        if words[1:] == ["cancel"]:
            # The server cancels: RST_STREAM, no status of its own.
            ctx.cancel()
            return
        ctx.abort(grpc.StatusCode.ABORTED, "reset by the server")


def serve(args):
    log = open(args.log, "a") if args.log else sys.stderr
    p = Peer(log)
    u = grpc.unary_unary_rpc_method_handler
    us = grpc.unary_stream_rpc_method_handler
    su = grpc.stream_unary_rpc_method_handler
    ss = grpc.stream_stream_rpc_method_handler
    handlers = {
        "Unary": u(p.unary),
        "Forbidden": u(p.forbidden),
        "ServerStream": us(p.server_stream),
        "ClientStream": su(p.client_stream),
        "Bidi": ss(p.bidi),
        "Big": us(p.big),
        "Slow": u(p.slow),
        "Reset": us(p.reset),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SVC, handlers),))
    port = server.add_insecure_port("127.0.0.1:%d" % args.port)
    if port != args.port:
        sys.exit("cannot listen on %d" % args.port)
    server.start()
    print("listening %d" % port, flush=True)
    server.wait_for_termination()


def rst_serve(args):
    import socket
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(16)
    print("listening %d" % args.port, flush=True)

    def conn(c):
        h = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding=None))
        h.initiate_connection()
        c.sendall(h.data_to_send())
        while True:
            data = c.recv(65536)
            if not data:
                return
            for ev in h.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    sid = ev.stream_id
                    h.send_headers(sid, [(":status", "200"),
                                         ("content-type",
                                          "application/grpc")])
                    h.send_data(sid, b"\0\0\0\0\x05first")
                    h.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                elif isinstance(ev, h2.events.DataReceived):
                    h.acknowledge_received_data(
                        ev.flow_controlled_length, ev.stream_id)
            c.sendall(h.data_to_send())

    while True:
        c, _ = srv.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()


# ---- client ---------------------------------------------------------------

def result(**kv):
    print(" ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def status_of(e):
    return e.code().name


def call(ch, kind, name):
    path = "/%s/%s" % (SVC, name)
    mk = {"uu": ch.unary_unary, "us": ch.unary_stream,
          "su": ch.stream_unary, "ss": ch.stream_stream}[kind]
    return mk(path, request_serializer=ident, response_deserializer=ident)


def client(args):
    ch = grpc.insecure_channel(args.target)
    md = tuple(tuple(x.split("=", 1)) for x in args.metadata)
    to = args.timeout
    c = args.case
    try:
        if c in ("unary", "forbidden"):
            f = call(ch, "uu", c.capitalize())
            resp, rc = f.with_call(args.data.encode(), timeout=to,
                                   metadata=md)
            init = dict(rc.initial_metadata())
            trail = dict(rc.trailing_metadata())
            result(status="OK", echo=resp.decode(),
                   initial=init.get("x-initial", "-"),
                   trailing=trail.get("x-trailing", "-"),
                   echo_len=trail.get("x-echo-len", "-"))
        elif c == "server_stream":
            f = call(ch, "us", "ServerStream")
            count = total = 0
            for m in f(("%d %d" % (args.n, args.size)).encode(), timeout=to,
                       metadata=md):
                count += 1
                total += len(m)
            result(status="OK", count=count, bytes=total)
        elif c == "client_stream":
            f = call(ch, "su", "ClientStream")
            msgs = [os.urandom(args.size) for _ in range(args.n)]
            h = hashlib.sha256(b"".join(msgs)).hexdigest()
            resp = f(iter(msgs), timeout=to, metadata=md).decode()
            result(status="OK", sent_sha256=h, reply="'%s'" % resp,
                   match="yes" if ("sha256=" + h) in resp else "no")
        elif c == "bidi":
            # Lock step: each message is sent only once the previous one
            # came back, so the echo is seen to come as it goes.
            f = call(ch, "ss", "Bidi")
            q = []
            cv = threading.Condition()
            done = [False]

            def gen():
                for i in range(args.n):
                    with cv:
                        q.append(b"m%d" % i)
                        cv.notify_all()
                    yield b"m%d" % i
                    with cv:
                        if not cv.wait_for(lambda: not q or done[0], 10):
                            return
                        if done[0]:
                            return
            got = 0
            ok = True
            for m in f(gen(), timeout=to, metadata=md):
                with cv:
                    if not q or q.pop(0) != m:
                        ok = False
                    got += 1
                    cv.notify_all()
            with cv:
                done[0] = True
                cv.notify_all()
            result(status="OK", count=got, inorder="yes" if ok else "no")
        elif c == "big":
            f = call(ch, "us", "Big")
            h = hashlib.sha256()
            total = 0
            for m in f(str(args.total).encode(), timeout=to, metadata=md):
                h.update(m)
                total += len(m)
            want = hashlib.sha256()
            for m in pattern(args.total):
                want.update(m)
            result(status="OK", bytes=total, sha256=h.hexdigest(),
                   match="yes" if h.digest() == want.digest() else "no")
        elif c == "big_cancel":
            # Reads a few messages of a long stream, then cancels it.
            f = call(ch, "us", "Big")
            it = f(str(args.total).encode(), timeout=to, metadata=md)
            got = 0
            for _ in it:
                got += 1
                if got >= args.n:
                    break
            it.cancel()
            result(status=it.code().name, count=got)
        elif c == "missing":
            f = call(ch, "uu", "Missing")
            resp = f(args.data.encode(), timeout=to, metadata=md)
            result(status="OK", reply="'%s'" % resp.decode())
        elif c == "slow":
            f = call(ch, "uu", "Slow")
            resp = f(str(args.delay).encode(), timeout=to, metadata=md)
            result(status="OK", reply="'%s'" % resp.decode())
        elif c == "reset":
            f = call(ch, "us", "Reset")
            got = 0
            it = f(("%d %s" % (args.n, args.mode)).encode(), timeout=to,
                   metadata=md)
            try:
                for _ in it:
                    got += 1
            except grpc.RpcError as e:
                result(status=status_of(e), count=got,
                       details="'%s'" % e.details())
                return 0
            result(status="OK", count=got)
        else:
            sys.exit("unknown case " + c)
    except grpc.RpcError as e:
        result(status=status_of(e), details="'%s'" %
               (e.details() or "").replace("'", "`"))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("port", type=int)
    s.add_argument("--log")
    r = sub.add_parser("rst-server")
    r.add_argument("port", type=int)
    c = sub.add_parser("client")
    c.add_argument("target")
    c.add_argument("case")
    c.add_argument("--data", default="hello grpc")
    c.add_argument("--n", type=int, default=5)
    c.add_argument("--size", type=int, default=1000)
    c.add_argument("--total", type=int, default=100 * 1000 * 1000)
    c.add_argument("--delay", type=float, default=5.0)
    c.add_argument("--mode", default="abort", help="reset: abort|cancel")
    c.add_argument("--timeout", type=float, default=20.0)
    c.add_argument("--metadata", action="append", default=[],
                   help="key=value sent with the call")
    args = ap.parse_args()
    if args.cmd == "server":
        serve(args)
        return 0
    if args.cmd == "rst-server":
        rst_serve(args)
        return 0
    return client(args)


if __name__ == "__main__":
    sys.exit(main())
