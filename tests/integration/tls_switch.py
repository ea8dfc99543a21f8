#!/usr/bin/python3
"""A TLS server whose certificate is chosen per connection, in front of
plain origins: a server whose chain verifies for one connection and not
for the next (one name, one address), for the tests of what may share a
server connection (http_server_h2_keybridge.sh).

usage: tls_switch.py PORT H2_PORT H1_PORT CHOICE_FILE LOG NAME=CERT:KEY...
Each connection gets the certificate named in CHOICE_FILE at its accept
(ALPN h2 or http/1.1, as the client offers); its bytes then go to
127.0.0.1:H2_PORT (h2, prior knowledge) or H1_PORT, on a connection of
their own. Each certificate has its own session tickets (as a server and
an impostor would): a session resumes only under the certificate it was
made with. LOG gets one line a connection: "conn N cert=NAME alpn=P
resumed=yes|no"."""
import select
import socket
import ssl
import sys
import threading


def relay(tls, up):
    socks = [tls, up]
    try:
        while True:
            r, _, _ = select.select(socks, [], [], 120)
            if not r:
                return
            for s in r:
                other = up if s is tls else tls
                try:
                    d = s.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                if not d:
                    return
                other.sendall(d)
            while tls.pending():
                up.sendall(tls.recv(65536))
    except OSError:
        return
    finally:
        tls.close()
        up.close()


def serve(raw, n, a, ctxs, lock):
    with open(a[3]) as f:
        name = f.read().strip()
    try:
        tls = ctxs[name].wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        raw.close()
        return
    alpn = tls.selected_alpn_protocol() or "-"
    with lock, open(a[4], "a") as f:
        f.write("conn %d cert=%s alpn=%s resumed=%s\n" % (
            n, name, alpn, "yes" if tls.session_reused else "no"))
    up = socket.create_connection(
        ("127.0.0.1", int(a[1] if alpn == "h2" else a[2])))
    relay(tls, up)


def main():
    a = sys.argv[1:]
    ctxs = {}
    for spec in a[5:]:
        name, files = spec.split("=", 1)
        cert, key = files.split(":", 1)
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        c.load_cert_chain(cert, key)
        c.set_alpn_protocols(["h2", "http/1.1"])
        ctxs[name] = c
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(a[0])))
    srv.listen(16)
    srv.settimeout(120)
    lock = threading.Lock()
    n = 0
    while True:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            return
        n += 1
        threading.Thread(target=serve, args=(c, n, a, ctxs, lock),
                         daemon=True).start()


main()
