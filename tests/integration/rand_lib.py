"""Helpers of the randomised Python tests run beside a proxyd
(policy_mutations.py, tls_sni_differential.py, tls_terminate_combos.py,
tls_originate_combos.py): loopback ports, a server thread, a reload waited
for, test certificates made with the openssl command."""
import os
import signal
import socket
import subprocess
import threading
import time


def free_port():
    """A TCP port of 127.0.0.1 nobody listens on (now)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def serve(handle):
    """A server on a free 127.0.0.1 port calling handle(conn) on a thread
    of its own per connection, for as long as the process lives; returns
    the port."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def loop():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=handle, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1]


def reload_and_wait(pid, ports, timeout=20):
    """SIGHUP to proxyd, then wait until every port of ports listens;
    SystemExit naming the first that does not within timeout seconds."""
    os.kill(pid, signal.SIGHUP)
    for port in ports:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("FAIL: port %d not listening %d s "
                                     "after the reload" % (port, timeout))
                time.sleep(0.05)


EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def openssl(*args):
    """The openssl command; SystemExit with its error when it fails."""
    p = subprocess.run(("openssl",) + args, capture_output=True, text=True,
                       errors="replace")
    if p.returncode != 0:
        raise SystemExit("FAIL: openssl %s: %s" % (" ".join(args), p.stderr))


def make_ca(d, cn):
    """d/ca.pem and d/ca.key: a CA valid two days (EC P-256)."""
    os.makedirs(d, exist_ok=True)
    openssl("req", "-x509", *EC, "-keyout", os.path.join(d, "ca.key"),
            "-out", os.path.join(d, "ca.pem"), "-days", "2", "-subj",
            "/CN=" + cn, "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign")


def make_leaf(d, name, cn, san, eku):
    """d/NAME.pem and .key signed by make_ca's CA in d (san like
    "DNS:a.test,IP:127.0.0.1"; eku serverAuth or clientAuth); san None:
    self-signed instead, naming origin.test and 127.0.0.1."""
    p = os.path.join(d, name)
    if san is None:
        openssl("req", "-x509", *EC, "-keyout", p + ".key", "-out",
                p + ".pem", "-days", "2", "-subj", "/CN=" + cn, "-addext",
                "subjectAltName=DNS:origin.test,IP:127.0.0.1")
        return
    openssl("req", *EC, "-keyout", p + ".key", "-out", p + ".csr",
            "-subj", "/CN=" + cn)
    with open(p + ".ext", "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=%s\n" % (san, eku))
    openssl("x509", "-req", "-in", p + ".csr", "-CA",
            os.path.join(d, "ca.pem"), "-CAkey", os.path.join(d, "ca.key"),
            "-CAcreateserial", "-days", "2", "-extfile", p + ".ext", "-out",
            p + ".pem")
