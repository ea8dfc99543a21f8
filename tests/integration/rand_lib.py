"""Helpers of the randomised Python tests run beside a proxyd
(policy_mutations.py, tls_sni_differential.py, tls_terminate_combos.py):
loopback ports, a server thread, a reload waited for."""
import os
import signal
import socket
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
