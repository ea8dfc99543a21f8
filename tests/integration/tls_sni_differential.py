#!/usr/bin/env python3
"""TLS passthrough policing against a reference: random <sni> rule lists
and random ClientHellos (names, their case, ALPN lists of 0 to 11
protocols, names too long to keep), proxyd's verdict compared with the
rules as docs/CONFIG.md states them:
  - no server name: no-sni= decides;
  - rules in file order, the first that matches decides, none: deny;
  - name= shell globs, case-insensitive, '*' crossing dots;
  - alpn= on an accept rule: every protocol offered is listed (a client
    that offers none does not match); on a deny rule: offering any listed
    one is enough. The reader keeps 8 protocols of at most 31 bytes: what
    it cannot see may be anything, so more than 8 never matches an accept
    rule and always matches a deny rule that has alpn=.

usage: tls_sni_differential.py PROXYD_PID POLICY_DIR ROUNDS SEED
Writes SERVICES services (snidiff-N.xml) into POLICY_DIR, reloads proxyd
(SIGHUP) and waits for their ports; the target of each is a listener of
this script, which tells an accepted hello (its bytes arrive there) from a
denied one (the client's connection ends first). Prints the seed;
TLS_SNI_SEED replays a run."""
import fnmatch
import os
import random
import select
import socket
import ssl
import sys
import threading
import time

from rand_lib import free_port, reload_and_wait, serve

PID, PDIR, ROUNDS, SEED = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                           int(sys.argv[4]))
SERVICES = 6
rnd = random.Random(SEED)
GLOBS = ["*", "*.test", "*.example.test", "a.test", "?.test", "*b*",
         "www.*", "WWW.A.TEST", "*.*.test", "x?z.test", "[ax]*.test",
         "[!w]*.test", "[a-c].TEST"]
PROTOS = ["h2", "http/1.1", "acme-tls/1", "x" * 31, "y" * 32, "imap",
          "h3", "p%d"]
NAMES = ["a.test", "A.TEST", "www.a.test", "b.test", "xyz.test",
         "www.example.test", "a.b.example.test", "example.test", "ab.org",
         "Www.B.Org", "x" * 63 + ".test", None]


def log(msg):
    print("[tls_sni_differential] %s" % msg, flush=True)


# ---- the target: remembers the first bytes of every connection
got = []
got_lock = threading.Lock()


def keep(c):
    c.settimeout(5)
    data = b""
    try:
        while len(data) < 64:
            d = c.recv(4096)
            if not d:
                break
            data += d
    except OSError:
        pass
    with got_lock:
        got.append(data)
    c.close()


def rules_xml(rules, no_sni):
    out = ['<tls side="client" mode="passthrough" no-sni="%s">' % (
        "accept" if no_sni else "deny")]
    for globs, alpn, accept in rules:
        out.append('  <sni name="%s"%s action="%s"/>' % (
            " ".join(globs), ' alpn="%s"' % " ".join(alpn) if alpn else "",
            "accept" if accept else "deny"))
    out.append("</tls>")
    return "\n".join(out)


def reference(rules, no_sni, name, offered):
    if name is None:
        return no_sni
    n = name.lower()
    kept = [p if len(p) <= 31 else "" for p in offered[:8]]
    for globs, alpn, accept in rules:
        if not any(fnmatch.fnmatchcase(n, g.lower()) for g in globs):
            continue
        if alpn:
            if accept:
                if not offered or len(offered) > 8 or \
                        any(p not in alpn for p in kept):
                    continue
            elif len(offered) <= 8 and not any(p in alpn for p in kept):
                continue
        return accept
    return False


def hello(name, offered):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if offered:
        ctx.set_alpn_protocols(offered)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def verdict(port, data):
    """True: the hello reached the target; False: the client's connection
    ended first (or nothing came in 5 s)."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(data)
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            with got_lock:
                if any(g[:64] == data[:64] for g in got):
                    return True
            r, _, _ = select.select([s], [], [], 0.01)
            if r:
                try:
                    if not s.recv(1):
                        break
                except OSError:
                    break
        with got_lock:
            return any(g[:64] == data[:64] for g in got)
    finally:
        s.close()


def write_service(i, tport, rules, no_sni):
    port = free_port()
    with open(os.path.join(PDIR, "snidiff-%d.xml" % i), "w") as f:
        f.write('<service name="snidiff-%d" analyser="plug">\n'
                '  <listen address="127.0.0.1" port="%d" mode="fixed"/>\n'
                '  <target address="127.0.0.1" port="%d"/>\n%s\n'
                '</service>\n' % (i, port, tport, rules_xml(rules, no_sni)))
    return port, rules, no_sni


def main():
    log("seed %d (replay: TLS_SNI_SEED=%d), %d rounds" % (SEED, SEED, ROUNDS))
    tport = serve(keep)
    svcs = []
    for i in range(SERVICES):
        rules = []
        if i == 0:
            # fixed: a deny by protocol before an accept of any name, the
            # case where what the reader does not keep matters most
            svcs.append(write_service(i, tport, [
                (["*"], ["h2"], False), (["*"], [], True)], False))
            continue
        for _ in range(rnd.randrange(1, 5)):
            globs = rnd.sample(GLOBS, rnd.choice((1, 1, 2)))
            alpn = []
            if rnd.random() < 0.6:
                alpn = sorted(set(p if "%" not in p else p % rnd.randrange(3)
                                  for p in rnd.sample(PROTOS,
                                                      rnd.randrange(1, 4))
                                  if len(p) <= 31))
            rules.append((globs, alpn, rnd.random() < 0.5))
        svcs.append(write_service(i, tport, rules, rnd.random() < 0.3))
    reload_and_wait(PID, [port for port, _, _ in svcs])
    problems = 0
    counts = [0, 0]
    for n in range(1, ROUNDS + 1):
        port, rules, no_sni = rnd.choice(svcs)
        name = rnd.choice(NAMES)
        offered = []
        for _ in range(rnd.choice((0, 1, 2, 3, 8, 9, 11))):
            p = rnd.choice(PROTOS)
            offered.append(p % rnd.randrange(20) if "%" in p else p)
        if n == 1:
            # h2 the ninth protocol offered, on the fixed service
            port, rules, no_sni = svcs[0]
            name, offered = "a.test", ["p%d" % k for k in range(8)] + ["h2"]
        want = reference(rules, no_sni, name, offered)
        have = verdict(port, hello(name, offered))
        counts[have] += 1
        if want != have:
            problems += 1
            log("PROBLEM round %d: sni=%s alpn=%s on %s: proxyd %s, the "
                "rules say %s" % (n, name, ",".join(p[:12] for p in offered),
                                  rules_xml(rules, no_sni).replace("\n", " "),
                                  "accepts" if have else "denies",
                                  "accept" if want else "deny"))
    log("%d hellos: %d accepted, %d denied; seed %d" % (
        ROUNDS, counts[1], counts[0], SEED))
    if problems:
        log("FAIL: %d problem(s); replay with TLS_SNI_SEED=%d" % (
            problems, SEED))
        sys.exit(1)
    log("PASS")


main()
