#!/usr/bin/python3
"""Differential test of proxyd's url rules (http_path_differential.sh).

Random spellings of the tree's files and directories (percent-encoded
characters in either hex case, dot segments plain and encoded, "x/..",
repeated slashes, ";params", queries, among them spellings of QDENY's
"file=../" with reserved characters encoded, and now and then an encoded
'/', a '\\', %00, a bad percent-encoding, a ".." above the root, a
"..;x", a #fragment) go to the
server directly and through proxyd (HTTP/1.1, and every few over h2c).
The direct answer says which file the server would serve (every file has
a body of its own): the oracle, whatever the spelling. Then:
  - proxyd never serves a denied file's body;
  - a spelling of the unsafe classes proxyd documents is refused, 400;
  - the server would serve a denied file: proxyd refuses (403);
  - it would serve an allowed one: proxyd serves that one, the same bytes;
  - the query, as Python's form decoding reads it, is denied: 403;
  - it would serve none: proxyd answers as the server does (403 when the
    canonical path is denied, read as it is or without ";params").

usage: http_path_differential.py --make-tree ROOT
       http_path_differential.py NAME DIRECT_PORT PROXY_PORT H2_PORT
           TABLE_TSV SECONDS
prints a summary; exits 1 on any mismatch (each listed, up to 30).
"""
import fnmatch
import random
import socket
import string
import sys
import time
import urllib.parse

# The tree: each file (and each directory's index.html) a body of its own.
FILES = {
    "/index.html": "root index",
    "/pub/index.html": "pub index",
    "/pub/a.txt": "public a",
    "/pub/sub/b.txt": "public sub b",
    "/pub/admin/c.txt": "public admin c",
    "/pub/sp ace.txt": "public space",
    "/pub/caf\u00e9.txt": "public cafe",
    "/pub/y.php": "public php y",
    "/admin/index.html": "admin index",
    "/admin/secret.txt": "admin secret",
    "/admin/sub/d.txt": "admin sub d",
    "/adminx.txt": "adminx",
    "/x.php": "php x",
    "/~user/e.txt": "tilde e",
}
# The service's rules (http_path_differential.sh writes the same).
DENY = ["/admin/*", "*.php"]
QDENY = b"*file=../*"
UNRESERVED = set(string.ascii_letters + string.digits + "-._~")


def body_of(path):
    return ("<<%s>> %s\n" % (FILES[path], path)).encode()


BY_BODY = {body_of(p): p for p in FILES}


def denied(path):
    """Whether the canonical path is denied, read both ways: as it is and
    with each segment's ";params" off (Tomcat's /admin;x/ is /admin/)."""
    bare = "/".join(s.split(";", 1)[0] for s in path.split("/"))
    return any(fnmatch.fnmatchcase(x, p) for p in DENY for x in (path, bare))


def query_denied(target):
    """Whether the query, read as applications read it (Python's own
    form decoding: '+' a space, every %XX), is denied by QDENY."""
    if "?" not in target:
        return False
    q = target.split("?", 1)[1].replace("+", " ")
    return fnmatch.fnmatchcase(urllib.parse.unquote_to_bytes(q), QDENY)


def make_tree(root):
    import os
    for p, _ in FILES.items():
        f = os.path.join(root, p[1:])
        os.makedirs(os.path.dirname(f), exist_ok=True)
        with open(f, "wb") as fh:
            fh.write(body_of(p))


def canon(target):
    """(why, path): why is the unsafe class proxyd refuses (400), or None
    and path the canonical path (merge-slashes="yes"). A reading of the
    documented rules of its own, not proxyd's code."""
    if "#" in target:
        return "fragment", None
    path, _, query = target.partition("?")
    if path == "":
        path = "/"
    out, i = "", 0
    while i < len(path):
        c = path[i]
        if c == "\\":
            return "backslash", None
        if c != "%":
            out += c
            i += 1
            continue
        h = path[i + 1:i + 3]
        if len(h) < 2 or any(x not in string.hexdigits for x in h):
            return "invalid-percent", None
        v = int(h, 16)
        if v == 0x2F:
            return "encoded-slash", None
        if v == 0x5C:
            return "backslash", None
        if v == 0:
            return "nul", None
        out += chr(v) if chr(v) in UNRESERVED else "%" + h.upper()
        i += 3
    stack, trailing = [], False
    parts = out.split("/")[1:]
    for k, seg in enumerate(parts):
        last = k == len(parts) - 1
        if ";" in seg and seg.split(";", 1)[0] in (".", ".."):
            return "dot-params", None
        if seg == "..":
            if not stack:
                return "above-root", None
            stack.pop()
        elif seg not in ("", "."):
            stack.append(seg)
            continue
        trailing = last
    p = "/" + "/".join(stack)
    if trailing and stack:
        p += "/"
    # the service has a query= rule: a query it cannot decode is refused
    for i, c in enumerate(query):
        if c == "%":
            h = query[i + 1:i + 3]
            if len(h) < 2 or any(x not in string.hexdigits for x in h):
                return "invalid-percent-query", None
            if int(h, 16) == 0:
                return "nul-query", None
    return None, p


def pct(ch, rng):
    h = "%02X" % ord(ch)
    if rng.random() < 0.5:
        h = h.lower()
    elif rng.random() < 0.3:
        h = h[0] + h[1].lower()
    return "%" + h


def encode_seg(seg, rng, p):
    out = ""
    for b in seg.encode("utf-8"):
        ch = chr(b)
        if b > 0x7E or b <= 0x20 or ch in "%?#\\":
            out += pct(ch, rng)
        elif rng.random() < p:
            out += pct(ch, rng)
        else:
            out += ch
    return out


DIRS = sorted({p.rsplit("/", 1)[0] + "/" for p in FILES})
TARGETS = sorted(FILES) + DIRS + ["/admin/nothing.txt", "/pub/nothing.php",
                                  "/pub/nothing.txt", "/admin", "/pub"]
NOISE = ["zz", "pub", "admin", "%61dmin", "x.php", "..", "."]
DOTDOT = ["..", "%2e%2e", ".%2E", "%2E.", "%2e."]
QUERIES = ["x=1", "a.php", "q=%2F..%2f", "", "admin/secret.txt", "f=/../x",
           "%61=%zz", "f=%00", "f=%%61D"]
# for QDENY: reserved characters encoded or not ("..%2F" is "../" to
# the application), and spellings it does not read as "file=../"
QFILE = ["file=../etc", "file=..%2Fetc", "file=%2e%2E%2fx", "a=1&file%3D..%2f",
         "file=..%2fa+b", "x=%3C%27&file=.%2E/", "file=..%252F", "file=..%5C",
         "file=.%2F.", "fi+le=../", "file=..+/"]
PARAMS = [";", ";x=1", ";jsessionid=A1", ";%2e"]


def spell(path, rng):
    segs = path.split("/")[1:]
    p = rng.choice([0.0, 0.1, 0.3, 0.7])
    out = []
    for seg in segs:
        r = rng.random()
        if r < 0.12:
            out.append(rng.choice([".", "%2e", "%2E"]))
        elif r < 0.24:
            out.append(rng.choice(NOISE))
            out.append(rng.choice(DOTDOT))
        elif r < 0.34:
            out.extend([""] * rng.randint(1, 2))
        elif r < 0.36:
            out.append(rng.choice(DOTDOT))
        elif r < 0.38:
            out.append(rng.choice(NOISE))
            out.append(rng.choice(DOTDOT + [".", "%2e"]) +
                       rng.choice(PARAMS))
        out.append(encode_seg(seg, rng, p))
        if rng.random() < 0.06:
            out[-1] += rng.choice(PARAMS)
    t = "/" + "/".join(out)
    r = rng.random()
    if r < 0.03 and t.count("/") > 1:
        k = t.index("/", 1)
        t = t[:k] + rng.choice(["%2F", "%2f"]) + t[k + 1:]
    elif r < 0.05:
        k = rng.randint(1, len(t))
        t = t[:k] + rng.choice(["\\", "%5c", "%5C"]) + t[k:]
    elif r < 0.065:
        t += "%00"
    elif r < 0.08:
        k = rng.randint(1, len(t))
        t = t[:k] + rng.choice(["%", "%z1", "%4", "%G0"]) + t[k:]
    elif r < 0.095:
        t += "#" + rng.choice(["", "x", "/../admin/secret.txt"])
    elif r < 0.11:
        t = rng.choice(["/..", "/%2e%2e", "/./.."]) + t
    r = rng.random()
    if r < 0.15:
        t += "?" + rng.choice(QUERIES)
    elif r < 0.3:
        t += "?" + rng.choice(QFILE)
    return t


def recv_all(s, deadline):
    data = b""
    while time.monotonic() < deadline:
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not d:
            break
        data += d
    return data


def h1(port, target):
    """(status, body) of GET target (sent as written); (0, b"") when the
    connection failed or nothing came."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return 0, b""
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
                   "\r\n\r\n" % target).encode("latin-1"))
        data = recv_all(s, time.monotonic() + 10)
    except OSError:
        return 0, b""
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, b""
    for line in head.split(b"\r\n")[1:]:
        n, _, v = line.partition(b":")
        if n.strip().lower() == b"content-length":
            body = body[:int(v)]
    return status, body


def h2(port, target):
    """(status, body) over h2c with prior knowledge; status -1: the
    stream was reset."""
    import h2.config
    import h2.connection
    import h2.events
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return 0, b""
    c = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None))
    status, body = 0, b""
    try:
        c.initiate_connection()
        c.send_headers(1, [(b":method", b"GET"), (b":scheme", b"http"),
                           (b":authority", b"127.0.0.1"),
                           (b":path", target.encode("latin-1"))],
                       end_stream=True)
        s.sendall(c.data_to_send())
        deadline = time.monotonic() + 10
        done = False
        while not done and time.monotonic() < deadline:
            d = s.recv(65536)
            if not d:
                break
            for e in c.receive_data(d):
                if isinstance(e, h2.events.ResponseReceived):
                    status = int(dict(e.headers)[b":status"])
                elif isinstance(e, h2.events.DataReceived):
                    body += e.data
                    c.acknowledge_received_data(
                        e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    done = True
                elif isinstance(e, h2.events.StreamReset):
                    status, done = -1, True
            s.sendall(c.data_to_send())
    except (OSError, h2.exceptions.ProtocolError):
        pass
    finally:
        s.close()
    return status, body


def judge(target, direct, via, why, cpath):
    """None when via (proxyd's answer) is right, else what is wrong."""
    vs, vb = via
    ds, db = direct
    if vs == 200 and vb in BY_BODY and denied(BY_BODY[vb]):
        return "served the denied %s" % BY_BODY[vb]
    if why is not None:
        return None if vs == 400 else "%s: %d, not 400" % (why, vs)
    if vs == 400:
        return "refused 400 though no unsafe class"
    served = BY_BODY.get(db) if ds == 200 else None
    if served is not None and denied(served):
        return None if vs == 403 else "%d for denied %s" % (vs, served)
    if query_denied(target):
        return None if vs == 403 else "%d for a denied query" % vs
    if served is not None:
        if vs == 200 and vb == db:
            return None
        return "%d %r, not %s" % (vs, vb[:40], served)
    if denied(cpath):
        return None if vs == 403 else "%d for denied path %s" % (vs, cpath)
    return None if vs == ds else "%d, the server said %d" % (vs, ds)


def main():
    if sys.argv[1] == "--make-tree":
        make_tree(sys.argv[2])
        return 0
    name = sys.argv[1]
    direct_port, proxy_port, h2_port = map(int, sys.argv[2:5])
    table = sys.argv[5]
    deadline = time.monotonic() + float(sys.argv[6])
    rng = random.Random(35 + direct_port)
    n = 0
    counts = {}
    bad = []
    with open(table, "a") as tab:
        while time.monotonic() < deadline:
            target = spell(rng.choice(TARGETS), rng)
            why, cpath = canon(target)
            direct = h1(direct_port, target)
            via = h1(proxy_port, target)
            ways = [("h1", via)]
            if n % 4 == 0:
                ways.append(("h2", h2(h2_port, target)))
            n += 1
            served = BY_BODY.get(direct[1]) if direct[0] == 200 else None
            kind = ("unsafe" if why else "deny" if served and denied(served)
                    else "qdeny" if query_denied(target)
                    else "allow" if served else "none")
            counts[kind] = counts.get(kind, 0) + 1
            for proto, v in ways:
                wrong = judge(target, direct, v, why, cpath)
                tab.write("%s\t%s\t%s\t%d\t%d\t%s\t%s\n" % (
                    name, proto, target, direct[0], v[0], kind,
                    wrong or "ok"))
                if wrong:
                    bad.append("%s %s %r: direct %d, proxyd %d: %s" % (
                        name, proto, target, direct[0], v[0], wrong))
    print("%s: %d spellings (%s), %d wrong" % (
        name, n, " ".join("%s=%d" % kv for kv in sorted(counts.items())),
        len(bad)))
    for b in bad[:30]:
        print("  WRONG " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
