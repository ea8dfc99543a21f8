#!/usr/bin/env python3
"""Small-file FTP transfer rate: CLIENTS processes, each with one logged-in
control connection, doing RETR or STOR of a 1 KB file (a new data
connection each time) for SECONDS; prints transfers/s and failures.

  bench.py HOST PORT retr|stor passive|active CLIENTS SECONDS
"""
import ftplib
import io
import multiprocessing as mp
import sys
import time


def worker(host, port, op, mode, secs, out, idx):
    n = fails = 0
    payload = b"x" * 1024
    try:
        f = ftplib.FTP()
        f.connect(host, port, timeout=10)
        f.login()
        f.set_pasv(mode == "passive")
        f.voidcmd("TYPE I")
    except ftplib.all_errors:
        out.put((0, 1))
        return
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            if op == "retr":
                buf = bytearray()
                f.retrbinary("RETR pub/1k.bin", buf.extend)
                if len(buf) != 1024:
                    fails += 1
                    continue
            else:
                f.storbinary("STOR pub/b%d.bin" % idx, io.BytesIO(payload))
            n += 1
        except ftplib.all_errors:
            fails += 1
            try:
                f.close()
                f = ftplib.FTP()
                f.connect(host, port, timeout=10)
                f.login()
                f.set_pasv(mode == "passive")
                f.voidcmd("TYPE I")
            except ftplib.all_errors:
                break
    try:
        f.quit()
    except ftplib.all_errors:
        pass
    out.put((n, fails))


def main():
    host, port, op, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    clients, secs = int(sys.argv[5]), float(sys.argv[6])
    out = mp.Queue()
    ps = [mp.Process(target=worker, args=(host, port, op, mode, secs, out, i))
          for i in range(clients)]
    t0 = time.monotonic()
    for p in ps:
        p.start()
    total = fails = 0
    for _ in ps:
        n, f = out.get(timeout=secs + 60)
        total += n
        fails += f
    for p in ps:
        p.join(10)
    dt = time.monotonic() - t0
    print("%.0f %d %d" % (total / dt, total, fails))


if __name__ == "__main__":
    main()
