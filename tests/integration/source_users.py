#!/usr/bin/env python3
"""A client of several named connections, driven by lines on its stdin,
for the per-user source-limit tests (source_limits_user.sh over http,
source_limits_ftp_user.sh over ftp):

    source_users.py http|ftp PORT LOG SERVICE

  open NAME SRC [PORT]   a connection from address SRC (to PORT)
  close NAME             closes it (ftp: QUIT first)
  ended SRC              waits (5 s at most) for SERVICE's session-end
                         line in LOG of the client at SRC
  quit
http:
  req NAME USER PW       GET /a.txt with Basic USER:PW; prints "NAME STATUS
                         retry=R conn=C" (R: Retry-After or -, C: the
                         Connection header or keep), or "NAME closed"
ftp:
  login NAME USER PW     prints "NAME REPLY" (the reply's first line)
  retr NAME FILE         RETR pub/FILE: "NAME OK CONTENT" or "NAME REPLY"
  (either: "NAME closed" when the control connection ended)
"""
import base64
import ftplib
import io
import socket
import sys
import time


def read_resp(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    h = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        h[k.strip().lower()] = v.strip()
    n = int(h.get("content-length", "0"))
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return lines[0].split()[1], h


def say(name, what):
    print(name, what.split("\n")[0], flush=True)


def ftp_call(name, fn):
    try:
        say(name, fn())
    except ftplib.Error as e:
        say(name, str(e))
    except (EOFError, OSError):
        say(name, "closed")


def main():
    proto, port, log, svc = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    conns = {}
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "open":
            to = int(w[3]) if len(w) > 3 else port
            if proto == "http":
                s = socket.socket()
                s.bind((w[2], 0))
                s.settimeout(10)
                s.connect(("127.0.0.1", to))
            else:
                s = ftplib.FTP(source_address=(w[2], 0))
                s.connect("127.0.0.1", to, timeout=10)
            conns[w[1]] = s
        elif w[0] == "req":
            s = conns[w[1]]
            cred = base64.b64encode(("%s:%s" % (w[2], w[3])).encode()).decode()
            try:
                s.sendall(("GET /a.txt HTTP/1.1\r\nHost: web\r\n"
                           "Authorization: Basic %s\r\n\r\n" % cred).encode())
                r = read_resp(s)
            except (ConnectionResetError, BrokenPipeError):
                r = None
            if r is None:
                print(w[1], "closed", flush=True)
            else:
                print(w[1], r[0], "retry=%s" % r[1].get("retry-after", "-"),
                      "conn=%s" % r[1].get("connection", "keep"), flush=True)
        elif w[0] == "login":
            ftp_call(w[1], lambda: conns[w[1]].login(w[2], w[3]))
        elif w[0] == "retr":
            buf = io.BytesIO()
            ftp_call(w[1], lambda: conns[w[1]].retrbinary(
                "RETR pub/" + w[2], buf.write) and
                "OK " + buf.getvalue().decode().strip())
        elif w[0] == "close":
            s = conns.pop(w[1])
            try:
                if proto == "ftp":
                    s.quit()
            except Exception:
                pass
            s.close()
        elif w[0] == "ended":
            for _ in range(100):
                if any(" session-end service=%s " % svc in l and
                       " client=%s:" % w[1] in l
                       for l in open(log, errors="replace")):
                    break
                time.sleep(0.05)
            else:
                print("no session-end for", w[1], flush=True)
        elif w[0] == "quit":
            break


if __name__ == "__main__":
    main()
