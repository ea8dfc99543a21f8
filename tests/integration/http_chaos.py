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

early: one upload (PUT PATH, SIZE bytes, Content-Length or chunked) to a
server that answers before reading the body (nginx "return 200"), with
"Expect: 100-continue" (the body goes once the 100 came, as curl -T
sends it) or without (head and body in one write). --smuggle then sends,
on the same connection, a POST whose body starts with a run of CRLFs and
ends with "GET /admin": a server still waiting for the upload's body
(SIZE bytes, set here to the POST's head plus half the run) reads that
as a request of its own. Prints {"status", "status2", "body2", ...}.

early-h2: the same upload as an h2c stream (prior knowledge; Debian's
python3-h2), with or without "expect: 100-continue".

icap: an ICAP server (RFC 3507, no preview) that reads every scan's whole
body and answers 204, RESPMOD after --resp-delay seconds, REQMOD after
--req-delay (longer: an upload's body is all in while the response the
server gave early waits for its own verdict, which comes first); logs
"METHOD PATH bytes=N".
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


# ---------------------------------------------------------------- early

def early_body(size):
    return bytes((i * 7 + 3) % 251 for i in range(size))


def early_read(rd, out, key):
    """Reads a response into out[key], out[key + "_body"]; an interim
    (1xx) one is skipped and counted in out["interim"]."""
    got, seen = [], {}
    try:
        while True:
            status, _ = read_response(rd, got, seen)
            if status >= 200:
                break
            out["interim"] = out.get("interim", 0) + 1
        out[key] = status
    except Closed as e:
        out[key] = seen.get("status")
        out[key + "_closed"] = str(e)
    except (socket.timeout, OSError) as e:
        out[key] = seen.get("status")
        out[key + "_closed"] = "error %s" % e
    out[key + "_body"] = b"".join(got).decode("latin-1")


def early(args):
    out = {}
    sock = socket.create_connection(("127.0.0.1", args.port), 5)
    sock.settimeout(args.timeout)
    rd = Reader(sock)
    host = b"Host: origin\r\n"
    size = args.size
    sled = b"\r\n" * args.sled
    smuggled = b"GET %s HTTP/1.1\r\n%s\r\n" % (args.admin.encode(), host)
    head2 = (b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n"
             % (args.path.encode(), host, len(sled) + len(smuggled)))
    if args.smuggle:
        # What the server skips as the upload's body: the POST's head as
        # proxyd sends it on, give or take the run of CRLFs.
        size = len(head2) + len(sled) // 2 // 2 * 2
    # Smuggling: CRLFs, which a server skips before a request line (the
    # held upload may reach it after the POST's head).
    body = b"\r\n" * (size // 2) if args.smuggle else early_body(size)
    if args.chunked:
        frame = b"Transfer-Encoding: chunked\r\n"
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    else:
        frame = b"Content-Length: %d\r\n" % len(body)
    head = (b"PUT %s HTTP/1.1\r\n%s%s%s\r\n" % (args.path.encode(), host,
            frame, b"Expect: 100-continue\r\n" if args.expect else b""))
    try:
        if args.expect:
            sock.sendall(head)
            status = int(rd.line().split(b" ")[1])
            out["first"] = status
            while rd.line():
                pass
            if status != 100:
                out["status"] = status
                out["body_sent"] = False
                print(json.dumps(out, sort_keys=True))
                return 0
            sock.sendall(body)
        else:
            sock.sendall(head + body)
        out["body_sent"] = True
    except (Closed, OSError) as e:
        out["send_error"] = str(e)
    early_read(rd, out, "status")
    if args.smuggle and "status_closed" not in out:
        try:
            sock.sendall(head2 + sled + smuggled)
            early_read(rd, out, "status2")
        except OSError as e:
            out["status2_closed"] = "error %s" % e
    if args.then:
        # The next request on this connection, or on a new one when the
        # proxy closed it.
        try:
            sock.sendall(b"GET %s HTTP/1.1\r\n%s\r\n"
                         % (args.then.encode(), host))
            early_read(rd, out, "then")
        except OSError as e:
            out["then_closed"] = "error %s" % e
        if out.get("then") is None:
            sock.close()
            sock = socket.create_connection(("127.0.0.1", args.port), 5)
            sock.settimeout(args.timeout)
            rd = Reader(sock)
            out["then_new"] = True
            sock.sendall(b"GET %s HTTP/1.1\r\n%s\r\n"
                         % (args.then.encode(), host))
            early_read(rd, out, "then")
    sock.close()
    print(json.dumps(out, sort_keys=True))
    return 0


def early_h2_stream(sock, conn, args, method, path, body, out, key):
    """One stream: its status in out[key], its body in out[key + "_body"],
    how it ended in out[key + "_end"] (end, reset:CODE, goaway:CODE, eof,
    an error), the request body bytes sent in out[key + "_sent"]. The
    body goes as flow control lets it."""
    import h2.events

    sid = conn.get_next_available_stream_id()
    hdrs = [(":method", method), (":scheme", "http"),
            (":authority", "origin"), (":path", path)]
    if body is not None:
        hdrs.append(("content-length", str(len(body))))
        if args.expect:
            hdrs.append(("expect", "100-continue"))
    conn.send_headers(sid, hdrs, end_stream=body is None)
    go = body is not None and not args.expect
    at = 0
    out[key], got, end = None, [], None
    while end is None:
        while go and at < len(body):
            n = min(conn.local_flow_control_window(sid),
                    conn.max_outbound_frame_size, len(body) - at)
            if n <= 0:
                break
            conn.send_data(sid, body[at:at + n],
                           end_stream=at + n == len(body))
            at += n
        try:
            sock.sendall(conn.data_to_send())
            data = sock.recv(65536)
        except (socket.timeout, OSError) as e:
            end = "error %s" % e
            break
        if not data:
            end = "eof"
            break
        for ev in conn.receive_data(data):
            if getattr(ev, "stream_id", sid) != sid:
                continue
            if isinstance(ev, h2.events.InformationalResponseReceived):
                out[key + "_interim"] = out.get(key + "_interim", 0) + 1
                go = body is not None
            elif isinstance(ev, h2.events.ResponseReceived):
                out[key] = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, h2.events.DataReceived):
                got.append(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length,
                                               sid)
            elif isinstance(ev, h2.events.StreamEnded):
                end = "end"
            elif isinstance(ev, h2.events.StreamReset):
                end = "reset:%d" % ev.error_code
            elif isinstance(ev, h2.events.ConnectionTerminated):
                end = "goaway:%d" % ev.error_code
    try:
        sock.sendall(conn.data_to_send())
    except OSError:
        pass
    out[key + "_body"] = b"".join(got).decode("latin-1")
    out[key + "_end"] = end
    out[key + "_sent"] = at
    return end == "end"


def early_h2(args):
    import h2.config
    import h2.connection

    out = {}
    sock = socket.create_connection(("127.0.0.1", args.port), 5)
    sock.settimeout(args.timeout)
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    alive = early_h2_stream(sock, conn, args, "PUT", args.path,
                            early_body(args.size), out, "status")
    if args.then and alive:
        early_h2_stream(sock, conn, args, "GET", args.then, None, out,
                        "then")
    sock.close()
    print(json.dumps(out, sort_keys=True))
    return 0


# ---------------------------------------------------------------- icap

def icap_conn(c, args, lock):
    rd = Reader(c)
    c.settimeout(30)
    try:
        while True:
            head = b""
            while True:
                line = rd.line()
                if not line:
                    break
                head += line + b"\r\n"
            method, url = head.split(b" ")[:2]
            if method == b"OPTIONS":
                c.sendall(b"ICAP/1.0 200 OK\r\nMethods: RESPMOD, REQMOD\r\n"
                          b"ISTag: \"early\"\r\nEncapsulated: null-body=0"
                          b"\r\n\r\n")
                continue
            enc = [ln for ln in head.split(b"\r\n")
                   if ln.lower().startswith(b"encapsulated:")][0]
            offs = dict(p.strip().split(b"=")
                        for p in enc.split(b":", 1)[1].split(b","))
            body_at = [int(v) for k, v in offs.items() if k.endswith(b"body")]
            rd.take(body_at[0])
            size = 0
            if not any(k == b"null-body" for k in offs):
                while True:
                    n = int(rd.line().split(b";")[0], 16)
                    if n == 0:
                        rd.line()
                        break
                    size += len(rd.take(n))
                    rd.take(2)
            time.sleep(args.resp_delay if method == b"RESPMOD" else
                       args.req_delay)
            with lock:
                with open(args.log, "a") as f:
                    f.write("%s %s bytes=%d\n" % (method.decode(),
                            url.decode(), size))
            c.sendall(b"ICAP/1.0 204 No Content\r\nISTag: \"early\"\r\n"
                      b"Encapsulated: null-body=0\r\n\r\n")
    except (Closed, OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def icap(args):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(64)
    srv.settimeout(1)
    lock = threading.Lock()
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=icap_conn, args=(c, args, lock),
                         daemon=True).start()
    return 0


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
    for name in ("early", "early-h2"):
        e = sub.add_parser(name)
        e.add_argument("--port", type=int, required=True)
        e.add_argument("--path", default="/early")
        e.add_argument("--size", type=int, default=1000)
        e.add_argument("--expect", action="store_true")
        e.add_argument("--timeout", type=float, default=10)
    e = sub.choices["early"]
    e.add_argument("--chunked", action="store_true")
    e.add_argument("--smuggle", action="store_true")
    e.add_argument("--sled", type=int, default=1000,
                   help="CRLFs before the smuggled request")
    e.add_argument("--admin", default="/admin")
    e.add_argument("--then", help="a GET of this path after the upload")
    sub.choices["early-h2"].add_argument("--then", help="a GET of this "
                                         "path on a new stream after it")
    i = sub.add_parser("icap")
    i.add_argument("--port", type=int, required=True)
    i.add_argument("--log", required=True)
    i.add_argument("--resp-delay", type=float, default=0.2)
    i.add_argument("--req-delay", type=float, default=0.6)
    i.add_argument("--lifetime", type=float, default=300)
    args = ap.parse_args()
    if args.cmd == "origin":
        origin(args)
        return 0
    if args.cmd == "early":
        return early(args)
    if args.cmd == "early-h2":
        return early_h2(args)
    if args.cmd == "icap":
        return icap(args)
    return clients(args)


if __name__ == "__main__":
    sys.exit(main())
