#!/usr/bin/env python3
"""FTP load client for bench/run: small transfers per second.

  ftpload.py HOST PORT retr|stor pasv|port CLIENTS SECONDS FILE [TIMEOUT]

CLIENTS processes each log in once (anonymous) and then, for SECONDS,
transfer FILE again and again, each transfer on a new data connection:
RETR FILE (its bytes are checked against the local copy of FILE's length),
or STOR pub/bench-<client>.bin with FILE's bytes (overwritten each time).
Passive (PASV) or active (PORT) data connections. Prints one line:

  transfers=N failed=F seconds=S rate=R kib_s=K max_ms=M

and exits 0 (failed transfers are counted, not fatal: bench/run judges).
"""
import ftplib
import io
import multiprocessing
import os
import random
import socket
import sys
import time


class BenchFTP(ftplib.FTP):
    """ftplib's active mode listens with bind(port 0), which fails with
    EADDRINUSE once TIME_WAIT connections hold every ephemeral port (a few
    seconds at thousands of transfers/s). Bind explicit ports with
    SO_REUSEADDR instead, which may take those: the client must not be what
    the active rows measure."""

    def makeport(self):
        lo, hi = 32768, 60999
        try:
            with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
                lo, hi = map(int, f.read().split())
        except (OSError, ValueError):
            pass
        start = random.randrange(lo, hi + 1)
        for i in range(512):
            # listen() too may fail with EADDRINUSE (the port is some
            # connection's local port): a fresh socket, the next port
            sock = socket.socket(self.af, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("", lo + (start - lo + i) % (hi - lo + 1)))
                sock.listen(1)
                break
            except OSError:
                sock.close()
                continue
        else:
            raise OSError("no free port for an active data connection")
        port = sock.getsockname()[1]
        host = self.sock.getsockname()[0]
        if self.af == socket.AF_INET:
            self.sendport(host, port)
        else:
            self.sendeprt(host, port)
        if self.timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:
            sock.settimeout(self.timeout)
        return sock


def client(idx, host, port, op, mode, seconds, path, timeout, q):
    done = failed = nbytes = 0
    worst = 0.0
    data = open(path, "rb").read()
    name = os.path.basename(path)
    try:
        ftp = BenchFTP()
        ftp.connect(host, port, timeout=timeout)
        ftp.login("anonymous", "bench@proxyd.invalid")
        ftp.set_pasv(mode == "pasv")
        ftp.voidcmd("TYPE I")
    except Exception as e:  # no session at all: every planned transfer failed
        print(f"client {idx}: login failed: {e}", file=sys.stderr)
        q.put((0, 1, 0, 0.0))
        return
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            if op == "retr":
                buf = io.BytesIO()
                ftp.retrbinary(f"RETR {name}", buf.write, blocksize=65536)
                if buf.tell() != len(data):
                    raise ValueError(f"RETR got {buf.tell()} bytes, not {len(data)}")
            else:
                ftp.storbinary(f"STOR pub/bench-{idx}.bin", io.BytesIO(data))
            done += 1
            nbytes += len(data)
        except Exception as e:
            failed += 1
            if failed <= 3:
                print(f"client {idx}: {op} failed: {e}", file=sys.stderr)
            if failed > 100:
                break
            try:  # the control connection may be gone: a new one
                ftp.close()
                ftp = BenchFTP()
                ftp.connect(host, port, timeout=timeout)
                ftp.login("anonymous", "bench@proxyd.invalid")
                ftp.set_pasv(mode == "pasv")
                ftp.voidcmd("TYPE I")
            except Exception:
                break
        worst = max(worst, time.monotonic() - t0)
    try:
        ftp.quit()
    except Exception:
        pass
    q.put((done, failed, nbytes, worst))


def main(argv):
    if len(argv) not in (8, 9) or argv[3] not in ("retr", "stor") or argv[4] not in ("pasv", "port"):
        print(__doc__, file=sys.stderr)
        return 2
    host, port, op, mode = argv[1], int(argv[2]), argv[3], argv[4]
    clients, seconds, path = int(argv[5]), float(argv[6]), argv[7]
    timeout = float(argv[8]) if len(argv) == 9 else 20.0
    q = multiprocessing.Queue()
    t0 = time.monotonic()
    procs = [multiprocessing.Process(target=client,
                                     args=(i, host, port, op, mode, seconds, path, timeout, q))
             for i in range(clients)]
    for p in procs:
        p.start()
    res = [q.get() for _ in procs]
    for p in procs:
        p.join()
    secs = time.monotonic() - t0
    done = sum(r[0] for r in res)
    failed = sum(r[1] for r in res)
    nbytes = sum(r[2] for r in res)
    worst = max(r[3] for r in res)
    print(f"transfers={done} failed={failed} seconds={secs:.3f} rate={done / secs:.2f} "
          f"kib_s={nbytes / 1024 / secs:.2f} max_ms={round(worst * 1000)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
