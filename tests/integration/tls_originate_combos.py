#!/usr/bin/env python3
"""TLS originate: random services (a client side terminated, the server
side originated with verify= required, optional or none and sni= forward,
none or a fixed name) in front of origins whose certificates name the
server by DNS name, by IP address, both, another name, or are
self-signed; random clients sending a server name or none. Each compared
with docs/CONFIG.md:
  - the name proxyd sends: sni= when it is a name, the client's with
    forward, none with none (or forward and no client name);
  - verify="required": the session goes on only if the origin's chain
    leads to ca= and its certificate names what was sent (no name: the
    server's IP address); optional and none: it goes on.
The origins say which name they received, and greet the client.

usage: tls_originate_combos.py PROXYD_PID POLICY_DIR PKI_DIR ROUNDS SEED
Prints the seed; TLS_ORIG_SEED replays a run."""
import os
import random
import socket
import ssl
import sys
import threading

from rand_lib import (EC, free_port, make_ca, make_leaf, openssl,
                      reload_and_wait, serve)

PID, PDIR, PKI, ROUNDS, SEED = (int(sys.argv[1]), sys.argv[2], sys.argv[3],
                                int(sys.argv[4]), int(sys.argv[5]))
SERVICES = 8
rnd = random.Random(SEED)
KINDS = {"name": "DNS:origin.test", "ip": "IP:127.0.0.1",
         "both": "DNS:origin.test,IP:127.0.0.1", "other": "DNS:other.test",
         "self": None}


def log(msg):
    print("[tls_originate_combos] %s" % msg, flush=True)


def path(n):
    return os.path.join(PKI, n)


def pki():
    make_ca(PKI, "originate CA")
    for kind, san in KINDS.items():
        make_leaf(PKI, kind, "origin.test" if san is None else kind, san,
                  "serverAuth")
    openssl("req", "-x509", *EC, "-keyout", path("front.key"), "-out",
            path("front.pem"), "-days", "2", "-subj", "/CN=front")


seen = {}		# origin kind -> the names it received, in order
seen_lock = threading.Lock()


def origin(kind):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(path(kind + ".pem"), path(kind + ".key"))

    def sni_cb(sock, name, c):
        with seen_lock:
            seen.setdefault(kind, []).append(name)
    ctx.sni_callback = sni_cb

    def handle(c):
        try:
            c.settimeout(5)
            t = ctx.wrap_socket(c, server_side=True)
            t.sendall(b"hello from " + kind.encode() + b"\n")
            t.close()
        except (ssl.SSLError, OSError):
            c.close()
    return serve(handle)


def covers(kind, name):
    """Whether the origin's certificate verifies for name (None: the
    server's IP address)."""
    if kind == "self":
        return False
    if kind == "other":
        # signed by the CA for other.test: it verifies for that name
        return name == "other.test"
    if name is None:
        return kind in ("ip", "both")
    return name == "origin.test" and kind in ("name", "both")


def main():
    log("seed %d (replay: TLS_ORIG_SEED=%d), %d rounds" % (SEED, SEED,
                                                          ROUNDS))
    pki()
    origins = {kind: origin(kind) for kind in KINDS}
    svcs = []
    for i in range(SERVICES):
        kind = rnd.choice(sorted(KINDS))
        verify = rnd.choice(("required", "optional", "none"))
        sni = rnd.choice(("forward", "none", "origin.test", "other.test"))
        port = free_port()
        with open(os.path.join(PDIR, "torig-%d.xml" % i), "w") as f:
            f.write('<service name="torig-%d" analyser="plug">\n'
                    '  <listen address="127.0.0.1" port="%d" mode="fixed"/>\n'
                    '  <target address="127.0.0.1" port="%d"/>\n'
                    '  <tls side="client" mode="terminate" cert="%s" key="%s"/>\n'
                    '  <tls side="server" mode="originate" verify="%s" ca="%s" sni="%s"/>\n'
                    '</service>\n' % (i, port, origins[kind],
                                      path("front.pem"), path("front.key"),
                                      verify, path("ca.pem"), sni))
        svcs.append((i, port, kind, verify, sni))
    reload_and_wait(PID, [s[1] for s in svcs])
    problems = 0
    done = 0
    for n in range(1, ROUNDS + 1):
        i, port, kind, verify, sni = rnd.choice(svcs)
        client_name = rnd.choice((None, "origin.test", "other.test",
                                  "x.test"))
        sent = {"forward": client_name, "none": None}.get(sni, sni)
        want_ok = verify != "required" or covers(kind, sent)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with seen_lock:
            before = len(seen.get(kind, []))
        greeting = b""
        try:
            with socket.create_connection(("127.0.0.1", port), 5) as s:
                s.settimeout(5)
                with ctx.wrap_socket(s, server_hostname=client_name) as t:
                    while not greeting.endswith(b"\n"):
                        d = t.recv(100)
                        if not d:
                            break
                        greeting += d
        except (ssl.SSLError, OSError):
            pass
        have_ok = greeting == b"hello from " + kind.encode() + b"\n"
        done += have_ok
        with seen_lock:
            names = seen.get(kind, [])[before:]
        what = ("round %d: torig-%d (origin %s, verify=%s sni=%s) client "
                "name %s" % (n, i, kind, verify, sni, client_name))
        bad = []
        if have_ok != want_ok:
            bad.append("the session %s, expected %s (greeting %r)" % (
                "went on" if have_ok else "did not go on",
                "it to" if want_ok else "a refusal", greeting[:40]))
        if names and names[0] != sent:
            bad.append("the origin received the name %s, expected %s" % (
                names[0], sent))
        if have_ok and not names:
            bad.append("the origin's handshake was not seen")
        if bad:
            problems += 1
            log("PROBLEM %s: %s" % (what, "; ".join(bad)))
    log("%d sessions, %d reached their origin; seed %d" % (ROUNDS, done,
                                                         SEED))
    if problems:
        log("FAIL: %d problem(s); replay with TLS_ORIG_SEED=%d" % (
            problems, SEED))
        sys.exit(1)
    log("PASS")


main()
