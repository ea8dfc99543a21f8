#!/usr/bin/env python3
"""Random mutations of valid configurations, each judged twice: by
`proxyd --check` and by a SIGHUP reload of one running proxyd.

usage: policy_mutations.py PROXYD WORKDIR SECONDS [SEED]

The base is a daemon file with every element (zones, scanners, an LDAP
authenticator, audit, quotas, cluster members...) and services of every
analyser with TLS, scanning, auth, fingerprints and source limits. Each
round mutates one file of it (an attribute removed, changed to a value of a
list or to garbage, an element removed, repeated, moved or renamed, text
set; one to three of these), then:
  - --check and the reload agree: both accept it or both refuse it, and a
    refusal names the same first file:line (line > 0 when the file has
    the element the error is about);
  - a refusal is file:line, not file:0, unless it is about something the
    file lacks (a missing <policies>, say);
  - proxyd stays up, the reload is counted, and the service of the old
    configuration still relays bytes after a refused reload; after an
    accepted one, each service --check lists listens where it says;
  - the base configuration, written back, reloads again.
Loopback only. The seed is printed; POLICY_MUT_SEED replays a run, and
POLICY_MUT_ROUNDS runs a fixed number of rounds instead of SECONDS."""
import copy
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET

from rand_lib import free_port, serve

PROXYD, W, SECONDS = sys.argv[1], sys.argv[2], float(sys.argv[3])
SEED = int(os.environ.get("POLICY_MUT_SEED") or
           (sys.argv[4] if len(sys.argv) > 4 else random.randrange(1 << 30)))
ROUNDS = int(os.environ.get("POLICY_MUT_ROUNDS", "0"))
rnd = random.Random(SEED)


def log(msg):
    print("[policy_mutations] %s" % msg, flush=True)


# ---- fixtures: an echo server, a certificate, files the config names

def echo(c):
    with c:
        c.settimeout(5)
        try:
            while True:
                d = c.recv(4096)
                if not d:
                    return
                c.sendall(d)
        except OSError:
            pass


os.makedirs(W + "/conf", exist_ok=True)
os.makedirs(W + "/policy", exist_ok=True)
os.makedirs(W + "/run", exist_ok=True)
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", W + "/k.key",
                "-out", W + "/c.pem", "-days", "2", "-subj", "/CN=t.test",
                "-addext", "subjectAltName=DNS:t.test"],
               check=True, capture_output=True)
for name, text in (("ldap.pw", "secret\n"), ("r66.pw", "pwA\n"),
                   ("members", ""), ("ja4.list", "t13d1516h2_8daaf6152771_e5627efa2ab1\n")):
    with open(os.path.join(W, name), "w") as f:
        f.write(text)

ECHO = serve(echo)
ADMIN, WEB = free_port(), free_port()
PORTS = [free_port() for _ in range(6)]

DAEMON = """<proxyd>
  <workers>2</workers>
  <node name="gw-1"/>
  <limits max-sessions="100" connect-timeout="5s" idle-timeout="1m" buffer="64k" shutdown-grace="1s" session-bandwidth="0" global-bandwidth="0"/>
  <log target="stderr" level="info"/>
  <admin listen="127.0.0.1:%(admin)d"/>
  <pidfile path="%(w)s/run/p.pid"/>
  <audit target="file:%(w)s/audit.json"/>
  <quotas state-file="%(w)s/q.state"/>
  <zones>
    <zone name="lan" addresses="198.18.0.0/24 2001:db8:1::/64">
      <zone name="admins" addresses="198.18.0.16/28"/>
    </zone>
    <zone name="dmz" addresses="198.19.2.0/24"><zone name="web" addresses="198.19.2.0/28"/></zone>
    <zone name="internet" addresses="0.0.0.0/0 ::/0"/>
  </zones>
  <scanners spool="%(w)s">
    <icap name="av" url="icap://127.0.0.1:1344/avscan" timeout="30s" max-connections="16" on-error="block"/>
  </scanners>
  <authenticators>
    <ldap name="dir" url="ldap://127.0.0.1:3899" base-dn="dc=example,dc=test" bind-dn="cn=proxyd,dc=example,dc=test" bind-password-file="%(w)s/ldap.pw" user-filter="(uid=%%u)" group-attribute="memberOf" cache="5m" timeout="3s"/>
  </authenticators>
  <cluster members-file="%(w)s/members"/>
  <policies dir="../policy"/>
</proxyd>
""" % {"admin": ADMIN, "w": W}

SERVICES = {
    # the service whose bytes must keep flowing (never mutated)
    "0-echo.xml": """<service name="echo" analyser="plug">
  <listen address="127.0.0.1" port="%d" mode="fixed"/>
  <target address="127.0.0.1" port="%d"/>
  <clients allow="127.0.0.0/8"/>
</service>
""" % (WEB, ECHO),
    "web.xml": """<service name="web" analyser="http">
  <listen address="127.0.0.1" port="%(p0)d" mode="fixed"/>
  <target address="127.0.0.1" port="%(echo)d"/>
  <upstream connect-timeout="2s"/>
  <clients allow="127.0.0.0/8 zone:lan"/>
  <auth authenticator="dir" methods="basic" required="yes"/>
  <scan scanner="av" direction="both" max-size="100m" over-size="block" deliver="after-verdict"/>
  <content type="application/x-dosexec" action="deny"/>
  <audit min-size="1m"/>
  <source-limits per="address" prefix-v4="24" prefix-v6="64" sessions="50" connections="20/s" burst="40" requests="100/s"/>
  <fingerprint ja4="t13d1517h2_8daaf6152771_cb7bf5808d99" action="accept"/>
  <fingerprint list="%(w)s/ja4.list" action="deny" label="scripts"/>
  <tls side="client" mode="terminate" cert="%(w)s/c.pem" key="%(w)s/k.key" min-version="1.2">
    <certificate name="shop.example.test" cert="%(w)s/c.pem" key="%(w)s/k.key"/>
  </tls>
  <tls side="server" mode="originate" verify="required" ca="%(w)s/c.pem" sni="forward"/>
  <http keepalive-client="yes" keepalive-server="yes" server-pool="64" server-idle="30s" h2="yes">
    <h2 max-concurrent-streams="100" initial-window="1m" max-header-list="32k"/>
    <limits max-line="8k" max-header-lines="100" max-header-bytes="32k" max-url="8k" max-body="0" request-timeout="10s" response-timeout="5m"/>
    <request method="GET HEAD POST" action="accept"/>
    <request method="*" action="deny" status="405"/>
    <url path="/admin/*" group="ops" action="accept"/>
    <url host="*.test" path="/admin/*" label="no-admin" action="deny"/>
    <request-header name="Proxy-Authorization" action="drop"/>
    <response-header name="X-Frame-Options" action="insert" value="DENY"/>
    <upgrade protocols="websocket" action="accept"/>
  </http>
</service>
""",
    "fwd.xml": """<service name="fwd" analyser="http">
  <listen address="127.0.0.1" port="%(p1)d" mode="forward"/>
  <servers allow="zone:internet" ports="80 443"/>
  <http via="yes" x-forwarded-for="no">
    <request method="CONNECT" ports="443" action="accept"/>
    <request method="*" action="deny" status="405"/>
  </http>
</service>
""",
    "ftps.xml": """<service name="ftps" analyser="ftp">
  <listen address="127.0.0.1" port="%(p2)d" mode="fixed"/>
  <target address="127.0.0.1" port="%(echo)d"/>
  <tls side="client" mode="terminate" cert="%(w)s/c.pem" key="%(w)s/k.key"/>
  <auth authenticator="dir"/>
  <scan scanner="av" direction="upload"/>
  <source-limits transfers="10/s"/>
  <ftp client-data="passive" server-data="passive" data-ports="40000-41000">
    <limits max-line="512" timeout="30s"/>
    <login user="bob" pass-password="yes"/>
    <user name="acme" quota-bytes="10g" quota-transfers="1000" action="accept"/>
    <command name="STOR DELE" action="deny"/>
    <path pattern="/ops/*" group="ops" action="accept"/>
    <path pattern="*.exe" action="deny"/>
  </ftp>
</service>
""",
    "pass.xml": """<service name="pass" analyser="plug">
  <listen address="127.0.0.1" port="%(p3)d" mode="fixed"/>
  <target address="127.0.0.1" port="%(echo)d"/>
  <tls side="client" mode="passthrough" no-sni="deny">
    <sni name="*.example.test" alpn="h2 http/1.1" action="accept"/>
    <sni name="*" alpn="h2" action="deny"/>
  </tls>
  <plug splice="auto" half-close="yes"/>
</service>
""",
    "r66.xml": """<service name="r66" analyser="r66">
  <listen address="127.0.0.1" port="%(p4)d"/>
  <target address="127.0.0.1" port="%(echo)d"/>
  <scan scanner="av" direction="both"/>
  <tls side="client" mode="terminate" cert="%(w)s/c.pem" key="%(w)s/k.key" verify="optional" ca="%(w)s/c.pem"/>
  <r66 require-digest="yes" max-block="1m" information="yes" test="yes">
    <partner id="hosta" password-file="%(w)s/r66.pw"/>
    <host id="hosta partner-b" quota-bytes="1g" action="accept"/>
    <host id="*" action="deny"/>
    <rule name="send-invoices recv-reports" action="accept"/>
    <rule name="*" action="deny"/>
    <mode allow="send recv sendmd5 recvmd5"/>
    <file pattern="*.xml *.pdf" max-size="10g" action="accept"/>
  </r66>
</service>
""",
    "gw.xml": """<service name="gw" analyser="plug">
  <listen address="127.0.0.1" port="%(p5)d" mode="transparent"/>
  <upstream spoof-source="no" mark="0x40000000" connect-timeout="5s"/>
  <clients allow="zone:admins"/>
  <servers allow="zone:dmz zone:web"/>
</service>
""",
}
for k in SERVICES:
    if k != "0-echo.xml":
        SERVICES[k] = SERVICES[k] % dict(
            w=W, echo=ECHO, **{"p%d" % i: p for i, p in enumerate(PORTS)})

VALUES = ["", "0", "1", "-1", "yes", "no", "x", "65535", "65536",
          "4294967296", "99999999999999999999", "1k", "1m", "10g", "1t",
          "0s", "1ms", "5m", "1d", "100000d", "1/s", "0/s", "1/m",
          "999999999/s", "*", "a b", " ", "127.0.0.1", "::1", "0.0.0.0/0",
          "10.0.0.0/33", "zone:lan", "zone:nope", "127.0.0.1:1", "[::1]:1",
          "icap://127.0.0.1/", "icap://:0/x", "file:", "stderr",
          # paths only inside the test's own directory: proxyd runs as
          # root and writes where a mutated path says (a quota store
          # once made /nonexistent a file, which other tests expect
          # missing)
          W, W + "/nonexistent/x", "\u00e9", "A" * 300, "%u%u", "(uid=%u", "0x",
          "0xffffffff", "1-0", "0-65535", "h2 h2", "deny", "accept",
          "abort", "block", "allow", "both", "upload", "transparent",
          "forward", "redirect", "optional", "required", "1.3", "1.0"]
ATTR_NAMES = sorted(set(re.findall(r'\s([a-z][a-z0-9-]*)="',
                                   DAEMON + "".join(SERVICES.values()))))


def elements(root):
    out = []

    def walk(e, parent):
        out.append((e, parent))
        for c in list(e):
            walk(c, e)
    walk(root, None)
    return out


def mutate(text, protect):
    """One to three random edits of the XML text; the elements named in
    protect (the harness's own: <admin>, <policies>) are left alone."""
    root = ET.fromstring(text)
    what = []
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        els = [(e, p) for e, p in elements(root) if e.tag not in protect]
        e, parent = rnd.choice(els)
        op = rnd.randrange(9)
        if op == 0 and e.attrib:
            k = rnd.choice(sorted(e.attrib))
            del e.attrib[k]
            what.append("-%s@%s" % (e.tag, k))
        elif op in (1, 2) and e.attrib:
            k = rnd.choice(sorted(e.attrib))
            v = rnd.choice(VALUES)
            if rnd.random() < 0.3:
                v = e.attrib[k] + rnd.choice((" ", ",", "0", "x",
                                              " " + e.attrib[k]))
            e.attrib[k] = v
            what.append("%s@%s=%r" % (e.tag, k, v[:20]))
        elif op == 3 and parent is not None:
            parent.remove(e)
            what.append("-<%s>" % e.tag)
        elif op == 4 and parent is not None:
            parent.insert(rnd.randrange(len(parent) + 1), copy.deepcopy(e))
            what.append("+<%s>" % e.tag)
        elif op == 5:
            k = rnd.choice(ATTR_NAMES)
            e.attrib[k] = rnd.choice(VALUES)
            what.append("%s@%s+" % (e.tag, k))
        elif op == 6 and parent is not None:
            d, _ = rnd.choice(els)
            if d is not e and e not in d.iter() and d.tag not in protect:
                parent.remove(e)
                d.append(e)
                what.append("<%s> into <%s>" % (e.tag, d.tag))
        elif op == 7:
            e.text = rnd.choice(VALUES)
            what.append("<%s> text" % e.tag)
        elif op == 8 and parent is not None:
            old = e.tag
            e.tag = rnd.choice([x.tag for x, _ in els])
            what.append("<%s> as <%s>" % (old, e.tag))
    return ET.tostring(root, encoding="unicode") + "\n", " ".join(what)


def write(name, text):
    path = os.path.join(W, name)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def write_base():
    write("conf/proxyd.xml", DAEMON)
    for n, t in SERVICES.items():
        write("policy/" + n, t)


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % ADMIN,
                                timeout=5) as r:
        text = r.read().decode()
    m = {}
    for res in ("ok", "failed"):
        g = re.search(r'^proxyd_config_reloads_total\{result="%s"\} (\d+)'
                      % res, text, re.M)
        m[res] = int(g.group(1)) if g else 0
    return m


FILELINE = re.compile(r"([^\s:]+\.xml):(\d+): (.*)")


def first_error(text):
    """(file basename, line, reason) of the first file:line: in text."""
    for ln in text.splitlines():
        g = FILELINE.search(ln)
        if g:
            return os.path.basename(g.group(1)), int(g.group(2)), g.group(3)
    return None


def check():
    p = subprocess.run([PROXYD, "--check", "-c", W + "/conf/proxyd.xml"],
                       capture_output=True, text=True, errors="replace", timeout=30)
    return p.returncode, p.stdout + p.stderr


class Daemon:
    def __init__(self):
        self.logf = open(W + "/proxyd.log", "w+")
        self.p = subprocess.Popen([PROXYD, "-c", W + "/conf/proxyd.xml"],
                                  stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.counts = metrics()
                socket.create_connection(("127.0.0.1", WEB), 1).close()
                break
            except OSError:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("FAIL: proxyd did not start: " +
                                     self.log_since(0))
                time.sleep(0.05)

    def log_since(self, pos):
        self.logf.flush()
        with open(W + "/proxyd.log", errors="replace") as f:
            f.seek(pos)
            return f.read()

    def reload(self):
        """SIGHUP; returns (ok, the log lines it wrote)."""
        pos = os.path.getsize(W + "/proxyd.log")
        before = self.counts
        self.p.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while True:
            if self.p.poll() is not None:
                raise AssertionError("proxyd exited (status %s) on a reload"
                                     % self.p.returncode)
            m = metrics()
            if m["ok"] + m["failed"] > before["ok"] + before["failed"]:
                break
            if time.monotonic() > deadline:
                raise AssertionError("the reload was not counted in 20 s")
            time.sleep(0.01)
        self.counts = m
        # the log thread writes the lines of the reload just before or
        # just after the counter moves: wait for the closing one
        ok = m["ok"] > before["ok"]
        want = "reload done" if ok else "the running configuration stays"
        while True:
            text = self.log_since(pos)
            if want in text or time.monotonic() > deadline:
                return ok, text
            time.sleep(0.01)

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise AssertionError("proxyd did not stop in 15 s of SIGTERM")


LISTEN = re.compile(r"^  (\S+): \S+ \S+ on (\S+) \(", re.M)


def listens(check_out):
    """(service, address:port) of each service --check lists."""
    return LISTEN.findall(check_out)


def listening(addr):
    """Whether something accepts at addr ("127.0.0.1:80", "[::]:80"): a
    wildcard address is tried on its loopback."""
    host, port = addr.rsplit(":", 1)
    host = host.strip("[]")
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection((host, int(port)), 1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def relays():
    s = socket.create_connection(("127.0.0.1", WEB), 5)
    s.settimeout(5)
    msg = b"ping %d\n" % rnd.randrange(1 << 30)
    s.sendall(msg)
    got = b""
    while len(got) < len(msg):
        d = s.recv(100)
        if not d:
            break
        got += d
    s.close()
    return got == msg


def main():
    log("seed %d (replay: POLICY_MUT_SEED=%d), %s" % (
        SEED, SEED, "%d rounds" % ROUNDS if ROUNDS else "%g s" % SECONDS))
    write_base()
    rc, out = check()
    if rc != 0:
        raise SystemExit("FAIL: the base configuration is refused:\n" + out)
    d = Daemon()
    problems = []
    stats = {"accepted": 0, "refused": 0, "taken": 0}
    start = time.monotonic()
    n = 0
    try:
        while (n < ROUNDS) if ROUNDS else (time.monotonic() - start < SECONDS):
            n += 1
            names = ["conf/proxyd.xml"] + ["policy/" + k for k in SERVICES
                                           if k != "0-echo.xml"]
            target = rnd.choice(names)
            base = DAEMON if target.startswith("conf/") else \
                SERVICES[target[len("policy/"):]]
            text, what = mutate(base, ("admin", "policies"))
            write(target, text)
            crc, cout = check()
            ok, rlog = d.reload()
            tag = "round %d (%s: %s)" % (n, target, what)
            bad = []
            if crc not in (0, 1):
                bad.append("--check exit status %d" % crc)
            if (crc == 0) != ok:
                if not ok and "listen address is taken" in rlog:
                    stats["taken"] += 1
                else:
                    bad.append("--check %s but the reload %s" % (
                        "accepts" if crc == 0 else "refuses",
                        "succeeds" if ok else "fails"))
            if crc == 1:
                stats["refused"] += 1
                ce = first_error(cout)
                re_ = first_error(rlog)
                if ce is None:
                    bad.append("--check refuses with no file:line")
                elif ce[1] == 0 and not re.search(
                        r"policies dir|no service|does not match", ce[2]):
                    bad.append("--check refuses at line 0: %s" % ce[2])
                if not ok and ce is not None and re_ is not None and \
                        ce[:2] != re_[:2]:
                    bad.append("--check says %s:%d, the reload %s:%d" % (
                        ce[0], ce[1], re_[0], re_[1]))
            else:
                stats["accepted"] += 1
                if ok:
                    for svc, addr in listens(cout):
                        if not listening(addr):
                            bad.append("service %s does not listen on %s "
                                       "after the reload" % (svc, addr))
            if not relays():
                bad.append("the echo service does not relay")
            if bad:
                problems.append(tag)
                log("PROBLEM %s: %s\n    check: %s\n    reload: %s" % (
                    tag, "; ".join(bad), cout.strip()[:400].replace(
                        "\n", " | "),
                    " | ".join(rlog.strip().splitlines()[:4])[:400]))
                with open(W + "/problem-%d.xml" % n, "w") as f:
                    f.write(text)
            write(target, base)
            if ok:
                ok2, rlog = d.reload()
                if not ok2:
                    problems.append("round %d: base" % n)
                    log("PROBLEM round %d: the base configuration does not "
                        "reload again: %s" % (n, rlog[:400]))
        d.stop()
    except AssertionError as e:
        problems.append(str(e))
        log("PROBLEM after round %d (%s): %s" % (n, target, e))
        with open(W + "/problem-%d.xml" % n, "w") as f:
            f.write(text)
    finally:
        if d.p.poll() is None:
            d.p.kill()
    log("%d rounds in %.1f s: %d accepted, %d refused (%d for a taken "
        "port); seed %d" % (n, time.monotonic() - start, stats["accepted"],
                            stats["refused"] + stats["taken"],
                            stats["taken"], SEED))
    if re.search(r"Sanitizer|runtime error", d.log_since(0)):
        problems.append("sanitizer report in proxyd.log")
        log("PROBLEM: a sanitizer report in %s/proxyd.log" % W)
    if problems:
        log("FAIL: %d problem(s); replay with POLICY_MUT_SEED=%d" % (
            len(problems), SEED))
        sys.exit(1)
    log("PASS")


main()
