#!/usr/bin/env python3
"""One FTP transfer with ftplib, told as one line for the scan tests:

    ftp_scan_client.py PORT get|put REMOTE LOCAL [active] [slow] [started=FILE]

prints "data=<none|exception|deadline> bytes=N reply=<the final reply to
the transfer command, or the error it raised>" (deadline: still moving
after 60 s, never a clean end). get: RETR REMOTE into LOCAL;
put: STOR LOCAL as REMOTE. active: PORT instead of PASV. slow: about 2 MB/s
with a small receive buffer (a transfer still under way a few seconds
later); started=FILE is created once 1 MB has moved. early (put, passive):
the file's bytes go on the data connection before the STOR is sent."""
import ftplib
import os
import socket
import sys
import time

port, op, remote, local = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
opts = sys.argv[5:]
slow = "slow" in opts
started = next((o[8:] for o in opts if o.startswith("started=")), None)

f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=30)
f.login()
f.set_pasv("active" not in opts)
f.cwd("pub")
f.voidcmd("TYPE I")
err, n, told = "none", 0, False
deadline = time.time() + 60


def progress(k):
    global n, told
    n += k
    if started and not told and n > 1000000:
        open(started, "w").close()
        told = True
    if slow:
        time.sleep(k / 2e6)     # by bytes: a loaded machine reads less at once


try:
    if op == "get":
        conn = f.transfercmd("RETR " + remote)
        if slow:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        with open(local, "wb") as out:
            try:
                while time.time() < deadline:
                    d = conn.recv(16384)
                    if not d:
                        break
                    out.write(d)
                    progress(len(d))
                else:
                    err = "deadline"
            except OSError as e:
                err = e.__class__.__name__
    elif "early" in opts:
        host, dport = ftplib.parse227(f.sendcmd("PASV"))
        conn = socket.create_connection(("127.0.0.1", dport), timeout=30)
        with open(local, "rb") as src:
            d = src.read()
        conn.sendall(d)
        n = len(d)
        time.sleep(0.5)     # through the proxy before the command
        f.sendcmd("STOR " + remote)   # raises on 4xx/5xx
        conn.close()
    else:
        conn = f.transfercmd("STOR " + remote)
        with open(local, "rb") as src:
            try:
                while time.time() < deadline:
                    d = src.read(16384)
                    if not d:
                        break
                    conn.sendall(d)
                    progress(len(d))
                else:
                    err = "deadline"
            except OSError as e:
                err = e.__class__.__name__
    conn.close()
    try:
        reply = f.getresp()
    except ftplib.Error as e:
        reply = str(e)
except ftplib.Error as e:
    reply = "refused: " + str(e)
except OSError as e:
    reply = "control: " + e.__class__.__name__
print("data=%s bytes=%d reply=%s" % (err, n, reply.splitlines()[0] if reply else ""))
try:
    f.quit()
except (OSError, ftplib.Error):
    pass
