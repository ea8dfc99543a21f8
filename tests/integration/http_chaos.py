#!/usr/bin/env python3
"""A misbehaving origin and the clients that check every answer through it.

origin: answers GET /r/ID/BEHAVIOUR/LEN. Every connection is kept alive and
closed when idle the way real servers do: after IDLE seconds with nothing
asked it half-closes (FIN) and closes CLOSE_AFTER later, or resets (RST);
--close says which (fin, rst, or mix: chosen per connection). BEHAVIOUR:
  ok       Content-Length response
  chunked  chunked response
  trickle  Content-Length response written in small pieces with pauses
  last     response, then FIN at once (no Connection: close said)
  garbage  a response head that is not HTTP
  cut      head and half the body, then RST

clients: N threads, each on its own connection through the proxy, asking
for random behaviours (seeded) with pauses around the origin's idle time,
for at most DURATION seconds or ROUNDS requests (a RECONNECT share of them
on a new connection, so server connections go through the pool). Each answer is judged:
  ok       the right status and exactly the right body
  error    a proxy error status (502) where the origin misbehaved (garbage)
  cut      a cut response ended by a reset or close, body a true prefix
  BAD      anything else: a 5xx for a good origin answer, a connection
           closed with no response, a wrong byte, a hang
Prints one summary line (JSON) and exits 1 if any answer was BAD.
"""
import argparse
import json
import random
import socket
import struct
import sys
import threading
import time


def body_for(rid, length):
    unit = ("%s;" % rid).encode()
    return (unit * (length // len(unit) + 1))[:length]


# ---------------------------------------------------------------- origin

def origin_read_head(conn, buf):
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, buf
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def origin_close(conn, how, close_after):
    if how == "rst":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
        conn.close()
        return
    conn.shutdown(socket.SHUT_WR)
    # What still arrives is read and dropped, as a closing server does.
    deadline = time.time() + close_after
    while True:
        left = deadline - time.time()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            if not conn.recv(65536):
                break
        except (socket.timeout, OSError):
            break
    conn.close()


def origin_answer(conn, rid, behaviour, length):
    body = body_for(rid, length)
    if behaviour == "garbage":
        conn.sendall(b"THIS IS NOT HTTP\r\nX-A: \x01\r\n\r\n")
        return "close"
    if behaviour == "chunked":
        out = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
        for i in range(0, len(body), 4000):
            piece = body[i:i + 4000]
            out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        out.append(b"0\r\n\r\n")
        conn.sendall(b"".join(out))
        return "keep"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    if behaviour == "trickle":
        data = head + body
        rnd = random.Random(rid)
        i = 0
        while i < len(data):
            n = rnd.choice((1, 7, 100, 3000))
            conn.sendall(data[i:i + n])
            i += n
            time.sleep(rnd.choice((0, 0, 0.001, 0.01)))
        return "keep"
    if behaviour == "cut":
        conn.sendall(head + body[:len(body) // 2])
        time.sleep(0.05)
        return "rst"
    conn.sendall(head + body)
    return "fin" if behaviour == "last" else "keep"


def origin_idle(conn, args):
    """Waits for the next request; False when the idle timer closes the
    connection. A request that came in the timer's last DEAF seconds is
    not seen: the timer fired while it was queued, as it does on a busy
    server (this widens the race a real origin has to a few percent)."""
    start = time.time()
    conn.settimeout(args.idle)
    try:
        data = conn.recv(65536, socket.MSG_PEEK)
    except socket.timeout:
        return False
    if not data:
        return True
    if time.time() - start >= args.idle - args.deaf:
        time.sleep(max(0, args.idle - (time.time() - start)))
        return False
    return True


def origin_conn(conn, args, rnd):
    close = args.close if args.close != "mix" else rnd.choice(("fin", "rst"))
    buf = b""
    try:
        while True:
            if not buf and not origin_idle(conn, args):
                origin_close(conn, close, args.close_after)
                return
            conn.settimeout(10)
            head, buf = origin_read_head(conn, buf)
            if head is None:
                conn.close()
                return
            parts = head.split(b"\r\n", 1)[0].split(b" ")
            path = parts[1].decode("latin-1") if len(parts) > 1 else ""
            fields = path.split("/")
            if len(fields) != 5 or fields[1] != "r":
                conn.sendall(b"HTTP/1.1 404 Not Found\r\n"
                             b"Content-Length: 0\r\n\r\n")
                continue
            after = origin_answer(conn, fields[2], fields[3], int(fields[4]))
            if after == "close":
                conn.close()
                return
            if after in ("fin", "rst"):
                origin_close(conn, after, args.close_after)
                return
    except OSError:
        conn.close()


def origin(args):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(128)
    srv.settimeout(1)
    rnd = random.Random(args.seed)
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=origin_conn, daemon=True,
                         args=(conn, args, random.Random(rnd.random()))).start()


# ---------------------------------------------------------------- clients

class Closed(Exception):
    pass


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def more(self):
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            raise Closed("reset")
        if not data:
            raise Closed("eof")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_response(rd, got, seen):
    """Status, headers and body; got collects body bytes as they come,
    seen["status"] the status once read."""
    status = int(rd.line().split(b" ")[1])
    seen["status"] = status
    headers = {}
    while True:
        line = rd.line()
        if not line:
            break
        k, _, v = line.partition(b":")
        headers[k.strip().lower()] = v.strip().lower()
    if headers.get(b"transfer-encoding") == b"chunked":
        while True:
            size = int(rd.line().split(b";")[0], 16)
            if size == 0:
                while rd.line():
                    pass
                break
            got.append(rd.take(size))
            rd.take(2)
    elif b"content-length" in headers:
        n = int(headers[b"content-length"])
        while n > 0:
            if not rd.buf:
                rd.more()
            piece = rd.buf[:n]
            rd.buf = rd.buf[len(piece):]
            got.append(piece)
            n -= len(piece)
    return status, headers


def judge(behaviour, rid, length, status, got, closed):
    want = body_for(rid, length)
    body = b"".join(got)
    if behaviour == "garbage":
        return "error" if status == 502 and closed is None else "BAD"
    if behaviour == "cut" and length > 0:
        if status == 200 and closed is not None and want.startswith(body) \
                and len(body) < len(want):
            return "cut"
        return "BAD"
    if status == 200 and closed is None and body == want:
        return "ok"
    return "BAD"


def client(idx, args, stats, lock, deadline, proxy_port):
    rnd = random.Random(args.seed * 1000 + idx)
    behaviours = args.behaviours.split(",")
    sock = rd = None
    n = 0
    while n < args.rounds and time.time() < deadline:
        n += 1
        if sock is not None and rnd.random() < args.reconnect:
            sock.close()
            sock = None
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", proxy_port), 5)
            sock.settimeout(args.timeout)
            rd = Reader(sock)
        rid = "%d-%d" % (idx, n)
        behaviour = rnd.choice(behaviours)
        length = rnd.choice((0, 10, 1000, 20000, 100000))
        status, got, closed, headers, seen = None, [], None, {}, {}
        try:
            sock.sendall(b"GET /r/%s/%s/%d HTTP/1.1\r\nHost: origin\r\n\r\n"
                         % (rid.encode(), behaviour.encode(), length))
            status, headers = read_response(rd, got, seen)
        except Closed as e:
            closed = str(e)
        except socket.timeout:
            closed = "timeout"
        except OSError as e:
            closed = "error %s" % e
        status = seen.get("status")
        verdict = judge(behaviour, rid, length, status, got, closed)
        if closed == "timeout":
            verdict = "BAD"
        with lock:
            stats[verdict] = stats.get(verdict, 0) + 1
            key = "status_%s" % status
            stats[key] = stats.get(key, 0) + 1
            if verdict == "BAD" and len(stats["bad"]) < 10:
                stats["bad"].append({"id": rid, "behaviour": behaviour,
                                     "len": length, "status": status,
                                     "got": sum(len(g) for g in got),
                                     "closed": closed})
        if closed is not None or headers.get(b"connection") == b"close" \
                or status != 200:
            sock.close()
            sock = None
        time.sleep(rnd.uniform(args.gap_min, args.gap_max))
    if sock is not None:
        sock.close()


def clients(args):
    stats = {"bad": []}
    lock = threading.Lock()
    deadline = time.time() + args.duration
    threads = [threading.Thread(target=client, args=(i, args, stats, lock,
                                                     deadline, args.port))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(stats, sort_keys=True))
    return 1 if stats.get("BAD") else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("origin")
    o.add_argument("--port", type=int, required=True)
    o.add_argument("--close", choices=("fin", "rst", "mix"), default="mix")
    o.add_argument("--idle", type=float, default=0.5)
    o.add_argument("--close-after", type=float, default=0.3)
    o.add_argument("--deaf", type=float, default=0.05)
    o.add_argument("--seed", type=int, default=1)
    o.add_argument("--lifetime", type=float, default=300)
    c = sub.add_parser("clients")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--clients", type=int, default=2)
    c.add_argument("--rounds", type=int, default=1000)
    c.add_argument("--duration", type=float, default=10)
    c.add_argument("--behaviours", default="ok")
    c.add_argument("--gap-min", type=float, default=0.4)
    c.add_argument("--gap-max", type=float, default=0.6)
    c.add_argument("--timeout", type=float, default=10)
    c.add_argument("--reconnect", type=float, default=0.5,
                   help="share of requests sent on a new connection")
    c.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.cmd == "origin":
        origin(args)
        return 0
    return clients(args)


if __name__ == "__main__":
    sys.exit(main())
