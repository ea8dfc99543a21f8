#!/usr/bin/env python3
"""TLS terminate: random services (plug or http; verify none, optional or
required; zero to two <certificate> by name) and random clients (a server
name or none, in any case; no client certificate, a valid one, a
self-signed one or one for servers only; ALPN none, h2, http/1.1 or
both), each handshake compared with docs/CONFIG.md:
  - the certificate served: an exact <certificate> name first, then a
    one-label *.domain, each in file order; else the element's own;
  - verify="required": the handshake fails without a certificate that
    verifies against ca= (for a client: extendedKeyUsage clientAuth);
    "optional": it goes on, and the session's tls-client-cert line says
    verified=yes, verified=no or none; "none": no certificate is asked;
  - ALPN: http offers http/1.1 (a client offering only h2 fails with
    no_application_protocol), plug none.
What a <certificate>'s context shares with the element (verification,
ALPN) is the point: the name picks the context after the hello.

usage: tls_terminate_combos.py PROXYD_PID POLICY_DIR LOG PKI_DIR ROUNDS SEED
Writes tcombo-N.xml services into POLICY_DIR, reloads proxyd and waits for
their ports. Prints the seed; TLS_COMBO_SEED replays a run."""
import os
import random
import re
import socket
import ssl
import sys

from rand_lib import (EC, free_port, make_ca, make_leaf, openssl,
                      reload_and_wait, serve)

PID, PDIR, LOG, PKI, ROUNDS, SEED = (int(sys.argv[1]), sys.argv[2],
                                     sys.argv[3], sys.argv[4],
                                     int(sys.argv[5]), int(sys.argv[6]))
SERVICES = 6
rnd = random.Random(SEED)


def log(msg):
    print("[tls_terminate_combos] %s" % msg, flush=True)


def pki():
    def path(n):
        return os.path.join(PKI, n)
    make_ca(PKI, "combo CA")
    make_leaf(PKI, "default", "default", "DNS:localhost", "serverAuth")
    make_leaf(PKI, "a", "a", "DNS:www.a.test", "serverAuth")
    make_leaf(PKI, "b", "b", "DNS:*.b.test", "serverAuth")
    make_leaf(PKI, "c", "c", "DNS:c.test", "serverAuth")
    make_leaf(PKI, "alice", "alice", "DNS:alice.test", "clientAuth")
    make_leaf(PKI, "server-only", "server-only", "DNS:s.test", "serverAuth")
    openssl("req", "-x509", *EC, "-keyout", path("mallory.key"), "-out",
            path("mallory.pem"), "-days", "2", "-subj", "/CN=mallory")
    ders = {}
    for n in ("default", "a", "b", "c"):
        with open(path(n + ".pem")) as f:
            ders[ssl.PEM_cert_to_DER_cert(f.read())] = n
    return path, ders


NAMED = [("www.a.test", "a"), ("*.b.test", "b"), ("c.test *.a.test", "c"),
         ("x.b.test", "a"), ("*.c.test www.b.test", "b")]
SNIS = [None, "www.a.test", "WWW.A.TEST", "x.b.test", "y.b.test",
        "z.y.b.test", "b.test", "c.test", "q.a.test", "www.b.test",
        "k.c.test", "other.test"]


def served(named, sni):
    if sni is None:
        return "default"
    n = sni.lower()
    for wild in (False, True):
        for names, cert in named:
            for pat in names.split():
                if pat.startswith("*") != wild:
                    continue
                if not wild and pat == n:
                    return cert
                if wild and "." in n and n.split(".", 1)[1] == pat[2:]:
                    return cert
    return "default"


def main():
    log("seed %d (replay: TLS_COMBO_SEED=%d), %d rounds" % (SEED, SEED,
                                                          ROUNDS))
    path, ders = pki()
    tport = serve(lambda c: c.close())
    svcs = []
    for i in range(SERVICES):
        analyser = rnd.choice(("plug", "http"))
        verify = rnd.choice(("none", "optional", "required"))
        named = rnd.sample(NAMED, rnd.randrange(0, 3))
        if i == 0:
            # fixed: wildcards before exact names that they cover
            named = [("*.b.test", "b"), ("x.b.test", "a"),
                     ("c.test *.a.test", "c"), ("www.a.test", "a")]
        port = free_port()
        certs = "".join('\n    <certificate name="%s" cert="%s" key="%s"/>'
                        % (names, path(c + ".pem"), path(c + ".key"))
                        for names, c in named)
        va = "" if verify == "none" else ' verify="%s" ca="%s"' % (
            verify, path("ca.pem"))
        with open(os.path.join(PDIR, "tcombo-%d.xml" % i), "w") as f:
            f.write('<service name="tcombo-%d" analyser="%s">\n'
                    '  <listen address="127.0.0.1" port="%d" mode="fixed"/>\n'
                    '  <target address="127.0.0.1" port="%d"/>\n'
                    '  <tls side="client" mode="terminate" cert="%s" key="%s"%s>'
                    '%s\n  </tls>\n</service>\n' % (
                        i, analyser, port, tport, path("default.pem"),
                        path("default.key"), va, certs))
        svcs.append((i, port, analyser, verify, named))
    reload_and_wait(PID, [port for _, port, _, _, _ in svcs])
    problems = 0
    ok = 0
    for n in range(1, ROUNDS + 1):
        i, port, analyser, verify, named = rnd.choice(svcs)
        sni = rnd.choice(SNIS)
        cc = rnd.choice((None, "alice", "mallory", "server-only"))
        alpn = rnd.choice(([], ["h2"], ["http/1.1"], ["h2", "http/1.1"]))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if cc:
            ctx.load_cert_chain(path(cc + ".pem"), path(cc + ".key"))
        if alpn:
            ctx.set_alpn_protocols(alpn)
        # TLS 1.2: a refused client certificate fails the handshake itself
        # (under 1.3 the alert comes after the client's side is done)
        ctx.maximum_version = rnd.choice((ssl.TLSVersion.TLSv1_2,
                                          ssl.TLSVersion.TLSv1_3))
        want_ok = not (verify == "required" and cc != "alice") and not (
            analyser == "http" and alpn == ["h2"])
        want_cert = served(named, sni)
        want_alpn = "http/1.1" if analyser == "http" and \
            "http/1.1" in alpn else None
        s = socket.create_connection(("127.0.0.1", port), 5)
        s.settimeout(5)
        have_ok, have_cert, have_alpn, err = False, None, None, ""
        try:
            t = ctx.wrap_socket(s, server_hostname=sni)
            have_cert = ders.get(t.getpeercert(binary_form=True), "?")
            have_alpn = t.selected_alpn_protocol()
            if ctx.maximum_version == ssl.TLSVersion.TLSv1_3:
                # the server's verdict on a 1.3 client certificate comes
                # after the handshake: a read sees it (the target closes)
                t.settimeout(0.3)
                try:
                    t.recv(1)
                except ssl.SSLError as e:
                    raise e
                except OSError:
                    pass
            have_ok = True
            t.close()
        except (ssl.SSLError, OSError) as e:
            err = str(e)
            s.close()
        what = ("round %d: tcombo-%d (%s verify=%s named=%s) sni=%s cert=%s "
                "alpn=%s tls=%s" % (n, i, analyser, verify,
                                    [c for _, c in named], sni, cc,
                                    ",".join(alpn) or "-",
                                    ctx.maximum_version.name))
        bad = []
        if have_ok != want_ok:
            bad.append("handshake %s, expected %s (%s)" % (
                "ok" if have_ok else "failed", "ok" if want_ok else "failure",
                err[:120]))
        if have_ok and have_cert != want_cert:
            bad.append("served %s, expected %s" % (have_cert, want_cert))
        if have_ok and have_alpn != want_alpn:
            bad.append("ALPN %s, expected %s" % (have_alpn, want_alpn))
        if bad:
            problems += 1
            log("PROBLEM %s: %s" % (what, "; ".join(bad)))
        ok += have_ok
    # verify="optional": every session's line says what the certificate was
    with open(LOG, errors="replace") as f:
        text = f.read()
    for i, port, analyser, verify, named in svcs:
        if verify == "none":
            continue
        for m in re.finditer(r"tls-client-cert subject=\"/CN=([a-z-]+)\" "
                             r"verified=(yes|no)", text):
            if m.group(2) == "yes" and m.group(1) != "alice":
                problems += 1
                log("PROBLEM: %s verified: %s" % (m.group(1), m.group(0)))
            if m.group(2) == "no" and m.group(1) == "alice":
                problems += 1
                log("PROBLEM: alice not verified: %s" % m.group(0))
        break
    log("%d handshakes, %d completed; seed %d" % (ROUNDS, ok, SEED))
    if problems:
        log("FAIL: %d problem(s); replay with TLS_COMBO_SEED=%d" % (
            problems, SEED))
        sys.exit(1)
    log("PASS")


main()
