#!/usr/bin/env python3
"""Idle TLS connections, for bench/run's "RSS per idle TLS connection" row.

  tlsidle.py HOST PORT N RELEASE_FILE [--servername NAME] [--cafile PEM]
             [--hold S] [--timeout S]

Opens N TLS connections to HOST:PORT one after the other (TCP connect and
the whole handshake, the server's certificate verified against --cafile for
--servername when given), then sends nothing: they stay idle. Once all are
open (and half a second more, so the proxy has connected its server side)
it prints one line and flushes it:

  established=N failed=F seconds=S rate=R max_ms=M

then "ready", and waits until RELEASE_FILE exists (bench/run creates it
once it has read the proxy's RSS) or --hold seconds (30) have passed, closes
every connection and exits: 0 when all N were established, 1 otherwise.
Bounded everywhere: --timeout (10 s) per connection, N <= 10000, and the
opening phase stops at 120 s.

With --stall, each connection sends its ClientHello, reads until the
server has answered it (its first flight), and then sends nothing more:
a handshake that stalls after the server has done its share of the work
(the state a proxy holds until its handshake-timeout cuts it). The line
then says stalled=N instead of established=N. With --silent each
connection sends nothing at all (TCP only): stalled=N too.
"""
import argparse
import os
import socket
import ssl
import sys
import time


def stall(ctx, raw, servername):
    """Sends the ClientHello on raw, reads the server's first flight until
    OpenSSL wants nothing more from it to answer, and stops there: the
    handshake is left pending on the server's side. Returns raw."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=servername)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    raw.sendall(out.read())
    # the server's flight: ServerHello to Finished (TLS 1.3), read until
    # the client could send its Finished, which is never sent
    while True:
        data = raw.recv(65536)
        if not data:
            raise OSError("closed by the server during the handshake")
        inc.write(data)
        try:
            obj.do_handshake()
            return raw
        except ssl.SSLWantReadError:
            continue


def client_context(cafile, servername, alpn=None):
    """A TLS client context: the server verified against CAFILE (and its
    name against SERVERNAME when given), or not at all without CAFILE;
    ALPN offered when given (bench/h2mem.py: h2)"""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if cafile:
        ctx.load_verify_locations(cafile)
        ctx.check_hostname = servername is not None
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("release")
    ap.add_argument("--servername")
    ap.add_argument("--cafile")
    ap.add_argument("--hold", type=float, default=30.0)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--stall", action="store_true")
    ap.add_argument("--silent", action="store_true")
    a = ap.parse_args()
    if not 1 <= a.n <= 10000:
        print("tlsidle.py: N must be 1..10000", file=sys.stderr)
        return 2
    a.hold = min(max(a.hold, 0.0), 300.0)

    ctx = client_context(a.cafile, a.servername)
    conns, failed, max_ms, versions = [], 0, 0, {}
    t0 = time.monotonic()
    deadline = t0 + 120
    for i in range(a.n):
        if time.monotonic() > deadline:
            failed += a.n - i
            print(f"tlsidle.py: opening phase over 120 s, {a.n - i} not tried", file=sys.stderr)
            break
        t = time.monotonic()
        raw = None
        try:
            raw = socket.create_connection((a.host, a.port), timeout=a.timeout)
            if a.silent:
                conns.append(raw)
                continue
            if a.stall:
                conns.append(stall(ctx, raw, a.servername))
                continue
            s = ctx.wrap_socket(raw, server_hostname=a.servername)
            conns.append(s)
            v = s.version()
            versions[v] = versions.get(v, 0) + 1
        except (OSError, ssl.SSLError) as e:
            failed += 1
            if raw is not None:
                raw.close()
            if failed <= 5:
                print(f"tlsidle.py: connection {i + 1}: {e}", file=sys.stderr)
        max_ms = max(max_ms, round((time.monotonic() - t) * 1000))
    secs = time.monotonic() - t0
    time.sleep(0.5)
    rate = len(conns) / secs if secs > 0 else 0.0
    print(f"{'stalled' if a.stall or a.silent else 'established'}={len(conns)} failed={failed} seconds={secs:.3f} rate={rate:.2f} "
          f"max_ms={max_ms} versions={','.join(f'{k}:{v}' for k, v in sorted(versions.items()))}")
    print("ready", flush=True)
    end = time.monotonic() + a.hold
    while time.monotonic() < end and not os.path.exists(a.release):
        time.sleep(0.05)
    for s in conns:
        try:
            s.close()
        except OSError:
            pass
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
