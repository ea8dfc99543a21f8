#!/usr/bin/env python3
"""HTTP/2 memory rows of bench/run (issue 36): idle h2 connections, and
open streams whose responses the origin holds back.

  h2mem.py idle HOST PORT N RELEASE [--servername NAME] [--cafile PEM]
                [--hold S] [--timeout S]
  h2mem.py streams HOST PORT C M GO TOKEN [--servername NAME] [--cafile PEM]
                [--hold S] [--timeout S]
  h2mem.py origin ADDR PORT DIR [--lifetime S]

idle: opens N TLS connections (ALPN h2, the certificate verified against
--cafile for --servername when given) one after the other; on each the
client preface and SETTINGS are sent, the server's SETTINGS read and
acknowledged, and the client waits for the server's acknowledgement of its
own SETTINGS; then nothing more is sent. Once all are open (and half a
second more) it prints

  established=N failed=F seconds=S rate=R max_ms=M

then "ready", and waits until RELEASE exists or --hold seconds (60) have
passed. Then it checks that every connection is still open (no GOAWAY, no
EOF: a proxy that closed idle connections would make the figure a lie),
prints "alive=K", sends GOAWAY on each and closes it: exit 0 when all N
were established and still alive, 1 otherwise.

streams: opens C such connections, prints "connected=C" and "ready", waits
for the file GO (bench/run reads the proxy's memory with the connections
alone first), then sends M GET requests for /hold/TOKEN, spread over the
connections (M/C each, END_STREAM on the HEADERS), and prints "sent=M".
The origin (below) holds each one until the file DIR/TOKEN.release exists;
bench/run reads the memory with the M streams open, then creates it. The
client then reads every response (status 200, body "held\\n") and prints

  established=M failed=F seconds=S rate=R max_ms=M2

(established: streams answered as expected; seconds, rate, max_ms: from
the first response on, i.e. from the release), then closes the connections: exit 0 when all M were
answered. Bounded: --hold (60 s) for GO and for the responses.

origin: an HTTP/1.1 server on ADDR:PORT (nginx proxies /hold/ to it): a
request for /hold/TOKEN is held, and DIR/TOKEN.held says how many are held
at the moment (rewritten at each change), until DIR/TOKEN.release exists;
then each is answered "200 held" (Connection: close). Anything else: 404.
It exits after --lifetime seconds (3600).

Bounded everywhere: --timeout (10 s) per connection and handshake, N and M
at most 10000, the opening phase at most 120 s.
"""
import argparse
import asyncio
import os
import select
import socket
import ssl
import sys
import time

from tlsidle import client_context  # bench/tlsidle.py, beside this file

BODY = b"held\n"


def h2_modules():
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    return h2


def open_h2(ctx, host, port, servername, timeout):
    """One TLS connection with ALPN h2, the preface and SETTINGS exchanged
    both ways (each side's acknowledged). Returns (socket, H2Connection)."""
    h2 = h2_modules()
    raw = socket.create_connection((host, port), timeout=timeout)
    try:
        s = ctx.wrap_socket(raw, server_hostname=servername)
    except (OSError, ssl.SSLError):
        raw.close()
        raise
    try:
        if s.selected_alpn_protocol() != "h2":
            raise OSError(f"ALPN chose {s.selected_alpn_protocol()!r}, not h2")
        conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding=None))
        conn.initiate_connection()
        s.sendall(conn.data_to_send())
        got_settings = got_ack = False
        end = time.monotonic() + timeout
        while not (got_settings and got_ack):
            if time.monotonic() > end:
                raise OSError("no SETTINGS exchange within the timeout")
            data = s.recv(65536)
            if not data:
                raise OSError("closed by the server during the preface")
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RemoteSettingsChanged):
                    got_settings = True
                elif isinstance(ev, h2.events.SettingsAcknowledged):
                    got_ack = True
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    raise OSError(f"GOAWAY during the preface (error {ev.error_code})")
            out = conn.data_to_send()
            if out:
                s.sendall(out)
        return s, conn
    except BaseException:
        s.close()
        raise


def still_open(s, conn):
    """True when the server has neither closed the connection nor sent
    GOAWAY (what it sent meanwhile is read without blocking)"""
    h2 = h2_modules()
    s.setblocking(False)
    try:
        while True:
            try:
                data = s.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                return True
            if not data:
                return False
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ConnectionTerminated):
                    return False
    except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
        return False
    finally:
        try:
            s.setblocking(True)
        except OSError:
            pass


def close_all(conns):
    for s, conn in conns:
        try:
            conn.close_connection()
            s.sendall(conn.data_to_send())
        except Exception:
            pass
        try:
            s.close()
        except OSError:
            pass


def context(a):
    return client_context(a.cafile, a.servername, ["h2"])


def open_many(a, ctx, n):
    conns, failed, max_ms = [], 0, 0
    t0 = time.monotonic()
    for i in range(n):
        if time.monotonic() > t0 + 120:
            failed += n - i
            print(f"h2mem.py: opening phase over 120 s, {n - i} not tried", file=sys.stderr)
            break
        t = time.monotonic()
        try:
            conns.append(open_h2(ctx, a.host, a.port, a.servername, a.timeout))
        except Exception as e:
            failed += 1
            if failed <= 5:
                print(f"h2mem.py: connection {i + 1}: {e}", file=sys.stderr)
        max_ms = max(max_ms, round((time.monotonic() - t) * 1000))
    return conns, failed, max_ms, time.monotonic() - t0


def wait_file(path, hold):
    end = time.monotonic() + hold
    while time.monotonic() < end and not os.path.exists(path):
        time.sleep(0.05)
    return os.path.exists(path)


def cmd_idle(a):
    ctx = context(a)
    conns, failed, max_ms, secs = open_many(a, ctx, a.n)
    time.sleep(0.5)
    rate = len(conns) / secs if secs > 0 else 0.0
    print(f"established={len(conns)} failed={failed} seconds={secs:.3f} rate={rate:.2f} max_ms={max_ms}")
    print("ready", flush=True)
    wait_file(a.release, a.hold)
    alive = sum(1 for s, c in conns if still_open(s, c))
    print(f"alive={alive}", flush=True)
    close_all(conns)
    return 0 if failed == 0 and alive == a.n else 1


def cmd_streams(a):
    h2 = h2_modules()
    ctx = context(a)
    conns, failed, _, _ = open_many(a, ctx, a.c)
    print(f"connected={len(conns)} failed={failed}")
    print("ready", flush=True)
    if failed or not wait_file(a.go, a.hold):
        close_all(conns)
        return 1
    authority = f"{a.host}:{a.port}".encode()
    headers = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", authority),
               (b":path", f"/hold/{a.token}".encode()), (b"user-agent", b"bench-h2mem")]
    streams = {}            # (connection index, stream id) -> [status, body]
    for i in range(a.m):
        k = i % len(conns)
        s, conn = conns[k]
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers, end_stream=True)
        streams[(k, sid)] = [None, b""]
    for s, conn in conns:
        s.sendall(conn.data_to_send())
    print(f"sent={a.m}", flush=True)
    end = time.monotonic() + a.hold
    t0 = None               # the first response: the origin was told to answer
    done, bad, max_ms = set(), 0, 0
    for s, _ in conns:
        s.setblocking(False)
    while len(done) + bad < a.m and time.monotonic() < end:
        r, _, _ = select.select([s for s, _ in conns], [], [], 0.2)
        for s in r:
            k = next(i for i, (x, _) in enumerate(conns) if x is s)
            conn = conns[k][1]
            try:
                data = s.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except (OSError, ssl.SSLError) as e:
                print(f"h2mem.py: connection {k + 1}: {e}", file=sys.stderr)
                data = b""
            if not data:
                lost = [x for x in streams if x[0] == k and x not in done]
                bad += len(lost)
                for x in lost:
                    done.add(x)
                conns[k] = (socket.socket(), conn)  # never readable again
                continue
            for ev in conn.receive_data(data):
                key = (k, getattr(ev, "stream_id", None))
                if t0 is None:
                    t0 = time.monotonic()
                if isinstance(ev, h2.events.ResponseReceived):
                    streams[key][0] = dict(ev.headers).get(b":status")
                elif isinstance(ev, h2.events.DataReceived):
                    streams[key][1] += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    st, body = streams[key]
                    if st == b"200" and body == BODY:
                        done.add(key)
                        max_ms = max(max_ms, round((time.monotonic() - t0) * 1000))
                    else:
                        bad += 1
                        if bad <= 5:
                            print(f"h2mem.py: stream {key}: status {st!r}, body {body[:40]!r}",
                                  file=sys.stderr)
                elif isinstance(ev, h2.events.StreamReset):
                    bad += 1
                    if bad <= 5:
                        print(f"h2mem.py: stream {key} reset (error {ev.error_code})", file=sys.stderr)
            out = conn.data_to_send()
            if out:
                try:
                    s.setblocking(True)
                    s.sendall(out)
                    s.setblocking(False)
                except OSError:
                    pass
    secs = time.monotonic() - t0 if t0 is not None else 0.0
    ok = len(done)
    print(f"established={ok} failed={a.m - ok} seconds={secs:.3f} "
          f"rate={ok / secs if secs > 0 else 0:.2f} max_ms={max_ms}", flush=True)
    for s, _ in conns:
        try:
            s.setblocking(True)
        except OSError:
            pass
    close_all(conns)
    return 0 if ok == a.m else 1


async def origin(a):
    held = {}               # token -> requests held now
    waiters = {}            # token -> asyncio.Event, set once TOKEN.release exists

    def write_held(token):
        tmp = os.path.join(a.dir, f".{token}.held")
        with open(tmp, "w") as f:
            f.write(f"{held[token]}\n")
        os.replace(tmp, os.path.join(a.dir, f"{token}.held"))

    async def poll():
        while True:
            for token, ev in list(waiters.items()):
                if not ev.is_set() and os.path.exists(os.path.join(a.dir, f"{token}.release")):
                    ev.set()
            await asyncio.sleep(0.05)

    async def serve(reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            parts = head.split(b"\r\n", 1)[0].split()
            path = parts[1].decode("latin-1") if len(parts) >= 2 else ""
            token = path[len("/hold/"):] if path.startswith("/hold/") else ""
            if not token or not token.replace("-", "").isalnum():
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                return
            ev = waiters.setdefault(token, asyncio.Event())
            held[token] = held.get(token, 0) + 1
            write_held(token)
            try:
                await ev.wait()
            finally:
                held[token] -= 1
                write_held(token)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n" % len(BODY) + BODY)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, a.addr, a.port, backlog=4096)
    asyncio.get_running_loop().create_task(poll())
    print(f"listening on {a.addr}:{a.port}", flush=True)
    async with server:
        await asyncio.sleep(a.lifetime)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("idle", "streams"):
        p = sub.add_parser(name)
        p.add_argument("host")
        p.add_argument("port", type=int)
        if name == "idle":
            p.add_argument("n", type=int)
            p.add_argument("release")
        else:
            p.add_argument("c", type=int)
            p.add_argument("m", type=int)
            p.add_argument("go")
            p.add_argument("token")
        p.add_argument("--servername")
        p.add_argument("--cafile")
        p.add_argument("--hold", type=float, default=60.0)
        p.add_argument("--timeout", type=float, default=10.0)
    p = sub.add_parser("origin")
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("dir")
    p.add_argument("--lifetime", type=float, default=3600.0)
    a = ap.parse_args()
    if a.cmd == "origin":
        a.lifetime = min(max(a.lifetime, 1.0), 86400.0)
        asyncio.run(origin(a))
        return 0
    a.hold = min(max(a.hold, 0.0), 300.0)
    if a.cmd == "idle":
        if not 1 <= a.n <= 10000:
            print("h2mem.py: N must be 1..10000", file=sys.stderr)
            return 2
        return cmd_idle(a)
    if not 1 <= a.c <= a.m <= 10000:
        print("h2mem.py: want 1 <= C <= M <= 10000", file=sys.stderr)
        return 2
    return cmd_streams(a)


if __name__ == "__main__":
    sys.exit(main())
