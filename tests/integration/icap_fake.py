#!/usr/bin/env python3
"""A small ICAP server (RFC 3507) that misbehaves on purpose, for
http_scan_icap.sh. c-icap cannot be made to do any of this: none of the
services Debian ships with it (virus_scan, srv_echo, url_check) answers
200 with a changed response that is not a block page, and a real server
never answers garbage on purpose.

  icap_fake.py PORT LOG

The service path picks the behaviour (icap://127.0.0.1:PORT/<mode>):
  modify        200 with the response rewritten ("REWRITTEN <n> bytes")
  modify-bad    200 whose body's chunk size is not hex
  modify-short  200 whose chunk is longer than its size says
  endless       200 with a body that never ends (64 KiB chunks)
  stall-100     Preview: 16; 100 Continue, then reads nothing, answers nothing
  stall-preview Preview: 16; never answers the preview
  garbage-100   Preview: 16; answers the preview with garbage
  preview-204   Preview: 16; 204 to every preview
  ignore        Transfer-Ignore: txt, Preview: 16; 204 after the preview
  slow          no preview; 204 half a second after the body's end (a
                busy scanner: scans queue behind max-connections)
Each scan request is logged as "<mode> <method> preview=<n|-> bytes=<n>"
(bytes: the body's bytes it received before it answered).
"""
import os
import socket
import sys
import threading
import time

PORT, LOG = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()


def log(line):
    with lock:
        with open(LOG, "a") as f:
            f.write(line + "\n")


class Conn:
    def __init__(self, c):
        self.c, self.buf = c, b""

    def fill(self):
        d = self.c.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def until(self, sep):
        while sep not in self.buf:
            self.fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def chunks(self):
        """The body's chunks up to the last: (bytes, ieof)."""
        body = b""
        while True:
            line = self.until(b"\r\n")[:-2]
            size = int(line.split(b";")[0], 16)
            if size == 0:
                self.until(b"\r\n")
                return body, b"ieof" in line
            body += self.take(size)
            self.take(2)


def options(mode):
    extra = b""
    if mode in ("stall-100", "stall-preview", "garbage-100", "preview-204"):
        extra = b"Preview: 16\r\nTransfer-Preview: *\r\n"
    elif mode == "ignore":
        extra = b"Preview: 16\r\nTransfer-Ignore: txt\r\n"
    return (b"ICAP/1.0 200 OK\r\nMethods: RESPMOD, REQMOD\r\nISTag: \"fake\"\r\n"
            + extra + b"Encapsulated: null-body=0\r\n\r\n")


def modified(conn, head, body):
    """200 with the encapsulated HTTP response rewritten."""
    new = b"REWRITTEN %d bytes\n" % len(body)
    hdr = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
           b"X-Scanner: fake\r\nContent-Length: 999\r\n\r\n")
    conn.c.sendall(b"ICAP/1.0 200 OK\r\nISTag: \"fake\"\r\n"
                   b"Encapsulated: res-hdr=0, res-body=%d\r\n\r\n" % len(hdr) + hdr)
    return new


def serve(c):
    conn = Conn(c)
    c.settimeout(30)
    try:
        while True:
            head = conn.until(b"\r\n\r\n")
            mode = head.split(b" ")[1].rsplit(b"/", 1)[-1].decode()
            if head.startswith(b"OPTIONS "):
                c.sendall(options(mode))
                continue
            method = head.split(b" ")[0].decode()
            enc = [l for l in head.split(b"\r\n") if l.lower().startswith(b"encapsulated:")][0]
            offs = dict(p.strip().split(b"=") for p in enc.split(b":", 1)[1].split(b","))
            bodyoff = int([v for k, v in offs.items() if k.endswith(b"body")][0])
            conn.take(bodyoff)
            preview = [l for l in head.split(b"\r\n") if l.lower().startswith(b"preview:")]
            pv = preview[0].split(b":")[1].strip().decode() if preview else "-"
            body, ieof = conn.chunks()
            if preview and not ieof:
                if mode in ("preview-204", "ignore"):
                    log("%s %s preview=%s bytes=%d" % (mode, method, pv, len(body)))
                    c.sendall(b"ICAP/1.0 204 No Content\r\nISTag: \"fake\"\r\nEncapsulated: null-body=0\r\n\r\n")
                    continue
                if mode == "stall-preview":
                    log("%s %s preview=%s bytes=%d" % (mode, method, pv, len(body)))
                    while c.recv(65536):
                        pass
                    return
                if mode == "garbage-100":
                    log("%s %s preview=%s bytes=%d" % (mode, method, pv, len(body)))
                    c.sendall(b"HELLO THERE\r\n\r\n")
                    time.sleep(5)
                    return
                c.sendall(b"ICAP/1.0 100 Continue\r\n\r\n")
                if mode == "stall-100":
                    log("%s %s preview=%s bytes=%d" % (mode, method, pv, len(body)))
                    time.sleep(20)
                    return
                more, _ = conn.chunks()
                body += more
            log("%s %s preview=%s bytes=%d" % (mode, method, pv, len(body)))
            if mode == "modify":
                new = modified(conn, head, body)
                c.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(new), new))
            elif mode == "modify-bad":
                modified(conn, head, body)
                c.sendall(b"zz\r\nabc\r\n0\r\n\r\n")
            elif mode == "modify-short":
                modified(conn, head, body)
                c.sendall(b"4\r\nabcdefgh\r\n0\r\n\r\n")
            elif mode == "endless":
                modified(conn, head, body)
                chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
                for _ in range(100000):
                    c.sendall(chunk)
                return
            else:
                if mode == "slow":
                    time.sleep(0.5)
                if mode == "slower":
                    time.sleep(3)
                c.sendall(b"ICAP/1.0 204 No Content\r\nISTag: \"fake\"\r\nEncapsulated: null-body=0\r\n\r\n")
    except (EOFError, OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", PORT))
srv.listen(64)
# As long as the test that started it runs (killed at its end; left over,
# gone within 1 s of it), however long before the first scan.
parent = os.getppid()
srv.settimeout(1)
accepted = 0
while accepted < 500 and os.getppid() == parent:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    accepted += 1
    threading.Thread(target=serve, args=(c,), daemon=True).start()
