"""N FTP downloads (or uploads) at once, each its own session: every one
logs in, then all send their RETR (STOR) together (a barrier), so that
they run at the same time; used where a quota must hold against transfers
in parallel (cluster_quota, cluster_quota_bytes, ftp_quota_parallel,
netns cluster_state).

    ftp_parallel.py HOST PORTS FILE N [DELAY]

PORTS: one port, or several separated by commas (download i goes to
PORTS[i % count]); FILE "up:PATTERN:SIZE": uploads instead, upload i
stores SIZE random bytes as PATTERN % (port, i) (e.g. pub/%d-%02d.bin); DELAY: seconds to wait after each 32 KiB block read (a
slow reader, so that the transfers overlap), 0 by default. Prints a line
per download, in order: the bytes it received and how it ended: 226, the
reply code of its error (550, 451, 426...), "reset" (the connection
broken without a reply) or "login:CODE"."""
import ftplib
import io
import os
import sys
import threading
import time


def main():
    host, ports, name, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    delay = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    ports = [int(p) for p in ports.split(",")]
    got, ends = [0] * n, ["none"] * n
    start = threading.Barrier(n)

    def one(i):
        f = ftplib.FTP()
        try:
            f.connect(host, ports[i % len(ports)], timeout=20)
            f.login("anonymous", "x@y")
            f.voidcmd("TYPE I")
        except ftplib.all_errors as e:
            ends[i] = "login:" + str(e)[:3]
            start.wait(timeout=30)
            return
        start.wait(timeout=30)

        def block(b):
            got[i] += len(b)
            if delay:
                time.sleep(delay)
        try:
            if name.startswith("up:"):
                _, pattern, size = name.split(":")
                f.storbinary("STOR " + pattern % (ports[i % len(ports)], i),
                             io.BytesIO(os.urandom(int(size))), blocksize=16384)
            else:
                f.retrbinary("RETR " + name, block, blocksize=32768)
            ends[i] = "226"
        except ftplib.all_errors as e:
            ends[i] = str(e)[:3] or "reset"
        try:
            f.close()
        except OSError:
            pass

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(50)
    for i in range(n):
        print(got[i], ends[i])


main()
