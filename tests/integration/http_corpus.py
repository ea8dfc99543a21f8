#!/usr/bin/env python3
"""Replays the llhttp test vectors (tests/data/llhttp-vectors.json) through
proxyd's http analyser and compares with llhttp's strict verdicts.

  http_corpus.py --vectors F --req-port P --origin-log F
                 --resp-port P --raw-dir D [--verbose]

Requests (meta.type "request"): the input goes to proxyd on a fresh
connection (then a half-close); the recording origin (http_raw.py origin,
mode empty) logs what it parses.
  - llhttp rejects: proxyd must answer 4xx/5xx or close without any 2xx
    for the bad message, and the origin must see no more requests than
    llhttp completed before the error.
  - llhttp accepts: every message llhttp completed must reach the origin
    with the same method, target and body. A 4xx refusal is tolerated only
    for documented strictness (STRICT_OK below, e.g. a missing Host, which
    RFC 9112 3.2 requires): if the refusal is "missing Host", the case is
    replayed with "Host: x" added after the request line and judged again.
Responses (meta.type "response"): the origin (http_raw.py origin, mode raw)
answers GET /case-N with the input bytes, then closes.
  - llhttp rejects: the client gets 502 or a cut connection (reset, or
    closed before the message is complete), never a complete response.
  - llhttp accepts: the client gets the same status and body as llhttp's
    first message.
Prints one line per mismatching case and a summary; exit 1 if any.
"""
import argparse
import json
import os
import re
import socket
import sys
import time

STRICT_OK = (
    "missing Host",                         # RFC 9112 3.2
    "request target is not in origin form",  # an absolute URI but http://
    "transfer coding not allowed",  # codings other than chunked: 501 (issue 15)
    "malformed URI authority",      # userinfo (RFC 9110 4.2.4) is an error
    "Transfer-Encoding in an HTTP/1.0 request",
    "empty first line",         # one CRLF before a request line, not two (RFC 9112 2.2)
    "malformed HTTP version",   # RTSP/ICE are not HTTP
    "HTTP version not supported",   # HTTP/0.9
    "fragment in request target",   # RFC 9112 3.2 has none (issue 35)
    # responses: issue 4 refuses what RFC 9112 6.3 would read to the close
    "Transfer-Encoding does not end in chunked",
)

# Cases where llhttp's verdict is not about HTTP framing, with the reason.
KNOWN = {
    ("request/invalid.md", 69):
        "llhttp only knows ANNOUNCE as an RTSP method; any token is a method "
        "in RFC 9110 9.1 and this policy accepts every method",
    ("request/content-length.md", 447):
        "llhttp's test skips the body from on_headers_complete: the input is "
        "one PUT whose 123-byte body never comes",
    ("response/content-length.md", 126):
        "llhttp's test skips the body from on_headers_complete: the input is "
        "one response whose 123-byte body never comes",
    ("request/pipelining.md", 7):
        "a CRLF follows each body (skipped: RFC 9112 2.2), but the "
        "pipelined requests have no Host and only the first gets one "
        "added, so only the first request passes",
    ("request/sample.md", 317):
        "HTTP/0.9 request line without a version: not supported",
    ("request/method.md", 375):
        "SOURCE /music ICE/1.0: not HTTP",
}


def exchange(port, data, timeout=2.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(timeout)
    got = b""
    reset = False
    closed = False
    try:
        s.sendall(data)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            got += d
    except socket.timeout:
        pass
    except (ConnectionResetError, BrokenPipeError):
        reset = closed = True
    s.close()
    return got, closed, reset


def parse_responses(data, first_only=False):
    """[(status, headers(list), body bytes, complete)]"""
    out = []
    i = 0
    while i < len(data) and data.startswith(b"HTTP/", i):
        end = data.find(b"\r\n\r\n", i)
        if end < 0:
            out.append((int(data[i + 9:i + 12] or 0), [], b"", False))
            break
        lines = data[i:end].decode("latin1").split("\r\n")
        status = int(lines[0][9:12])
        hdrs = []
        for ln in lines[1:]:
            n, _, v = ln.partition(":")
            hdrs.append((n.strip().lower(), v.strip()))
        h = dict(hdrs)
        i = end + 4
        body = b""
        complete = True
        if status < 200 or status in (204, 304):
            pass
        elif h.get("transfer-encoding", "").lower().endswith("chunked"):
            complete = False
            while True:
                e = data.find(b"\r\n", i)
                if e < 0:
                    break
                try:
                    n = int(data[i:e].split(b";")[0], 16)
                except ValueError:
                    break
                i = e + 2
                if n == 0:
                    e = data.find(b"\r\n\r\n", i - 2)
                    if e >= 0:
                        i = e + 4
                        complete = True
                    break
                if len(data) < i + n + 2:
                    body += data[i:]
                    break
                body += data[i:i + n]
                i += n + 2
        elif "content-length" in h:
            n = int(h["content-length"])
            body = data[i:i + n]
            complete = len(body) == n
            i += n
        else:
            body = data[i:]
            i = len(data)
        out.append((status, hdrs, body, complete))
        if first_only and status >= 200:
            break
    return out


def llhttp_messages(case, partial=False):
    """llhttp's completed messages: [{method, url, status, body}]."""
    inp = case["input_latin1"].encode("latin1")
    msgs = []
    cur = {"method": b"", "url": b"", "status": None, "body": b""}
    for ln in case["log"]:
        m = re.match(r"off=(\d+) len=(\d+) span\[(\w+)\]", ln)
        if m:
            off, n, kind = int(m.group(1)), int(m.group(2)), m.group(3)
            if kind in ("method", "url", "body"):
                cur[kind] += inp[off:off + n]
            continue
        m = re.match(r"off=\d+ headers complete status=(\d+)", ln)
        if m:
            cur["status"] = int(m.group(1))
        if ln.endswith(" message complete"):
            msgs.append(cur)
            cur = {"method": b"", "url": b"", "status": None, "body": b""}
    # A close-delimited body ends with the connection: llhttp (fed no EOF)
    # never completes it, but what it saw is the whole message.
    if partial and cur["status"] is not None and not re.search(
            rb"(?im)^(content-length|transfer-encoding)[ \t]*:", inp):
        cur["partial"] = True       # ends with the connection (EOF)
        msgs.append(cur)
    return msgs


def origin_lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def add_host(data):
    """Host: x after every HTTP/1.1 request line at a message start"""
    return re.sub(rb"(^|\r\n\r\n)([!-~]+ [!-~]+ HTTP/1\.1\r\n)",
                  rb"\1\2Host: x\r\n", data)


def last_error(logf, pos, wait=0.5):
    """reason of the last http-error line after byte pos of the proxyd log
    (log lines come from a thread: poll a little)"""
    deadline = time.time() + wait
    while True:
        with open(logf, "rb") as f:
            f.seek(pos)
            txt = f.read().decode("latin1", "replace")
        r = re.findall(r'http-error status=\d+ reason="([^"]*)"', txt)
        if r or time.time() > deadline:
            return r[-1] if r else ""
        time.sleep(0.02)


def run_request(a, case, data):
    before = len(origin_lines(a.origin_log))
    logpos = os.path.getsize(a.proxyd_log)
    got, closed, reset = exchange(a.req_port, data)
    time.sleep(0.05)
    seen = origin_lines(a.origin_log)[before:]
    resps = parse_responses(got)
    codes = [r[0] for r in resps]
    why = last_error(a.proxyd_log, logpos,
                     0.5 if not codes or max(codes) >= 400 else 0)
    return seen, resps, closed, reset, why


def judge_request(a, case):
    data = case["input_latin1"].encode("latin1")
    msgs = llhttp_messages(case)
    seen, resps, closed, reset, why = run_request(a, case, data)
    codes = [r[0] for r in resps if r[0] >= 200]
    if case["expect"] == "error":
        ok2xx = [c for c in codes if c < 400]
        if len(seen) > len(msgs):
            return "FORWARDED-INVALID origin saw %d requests, llhttp completed %d: %s" % (
                len(seen), len(msgs), [(s.get("method"), s.get("target")) for s in seen])
        if len(ok2xx) > len(msgs):
            return "ACCEPTED-INVALID statuses %s" % codes
        if len(codes) == len(msgs) and not closed:
            return "NOT-REFUSED statuses %s, connection left open" % codes
        return None
    # llhttp accepts
    if codes and codes[0] >= 400 and why == "missing Host":
        d2 = add_host(data)
        seen, resps, closed, reset, why = run_request(a, case, d2)
        codes = [r[0] for r in resps if r[0] >= 200]
    if codes and codes[-1] >= 400 and why in STRICT_OK and \
            len(seen) == len(codes) - 1:
        return "STRICT %s after %d forwarded" % (why, len(seen))
    if codes and codes[0] >= 400 and len(seen) == 0:
        if why in STRICT_OK:
            return "STRICT %d %s" % (codes[0], why)
        return "REFUSED-VALID %d reason=%r" % (codes[0], why)
    if len(seen) < len(msgs):
        return "LOST origin saw %d of %d messages (statuses %s, why %r)" % (
            len(seen), len(msgs), codes, why)
    for m, s in zip(msgs, seen):
        if "error" in s:
            return "ORIGIN-PARSE-ERROR %s" % s["error"]
        if s["method"].encode("latin1") != m["method"] or \
                s["target"].encode("latin1") != origin_form(m["url"]):
            return "CHANGED %r %r -> %r %r" % (m["method"], m["url"], s["method"], s["target"])
        if s["body_len"] != len(m["body"]) or \
                s["body"].encode("latin1") != m["body"][:4096]:
            return "BODY-CHANGED %r -> %r" % (m["body"][:60], s["body"][:60])
    return None


def origin_form(url):
    """What proxyd sends on for a request target: an absolute-form one
    (RFC 9112 3.2.2) as its origin form, its authority going into Host."""
    if not url.lower().startswith(b"http://"):
        return url
    m = re.match(rb"[^/?]*", url[7:])
    rest = url[7 + m.end():]
    return rest if rest.startswith(b"/") else b"/" + rest


def judge_response(a, idx, case):
    name = "case-%d" % idx
    with open(os.path.join(a.raw_dir, name), "wb") as f:
        f.write(case["input_latin1"].encode("latin1"))
    req = b"GET /%s HTTP/1.1\r\nHost: a\r\n\r\n" % name.encode()
    logpos = os.path.getsize(a.proxyd_log)
    got, closed, reset = exchange(a.resp_port, req, timeout=3)
    resps = parse_responses(got, first_only=True)
    why = last_error(a.proxyd_log, logpos,
                     0 if resps and 200 <= resps[-1][0] < 400 else 0.5)
    finals = [r for r in resps if r[0] >= 200]
    msgs = [m for m in llhttp_messages(case, partial=True)
            if m["status"] is None or m["status"] >= 200]
    if case["expect"] == "error":
        if not finals:
            return None if closed else "NO-ANSWER connection left open"
        st, _, body, complete = finals[0]
        if st == 502:
            return None
        if not complete or reset:
            return None        # cut: not a whole message
        if msgs and msgs[0]["status"] == st and len(msgs) >= 1:
            # llhttp completed this message; the error came after it
            return None
        return "ACCEPTED-INVALID client got a complete %d (%d body bytes)" % (st, len(body))
    if not msgs:
        return "SKIP llhttp completed no message"
    if why in STRICT_OK:
        return "STRICT %s (statuses %s)" % (why, [r[0] for r in resps])
    if not finals:
        return "LOST no final response (closed=%s reset=%s, %d bytes, why %r)" % (
            closed, reset, len(got), why)
    st, _, body, complete = finals[0]
    m = msgs[0]
    if st != m["status"]:
        return "STATUS-CHANGED %s -> %d" % (m["status"], st)
    if not complete:
        return "INCOMPLETE %d body bytes" % len(body)
    if body != m["body"]:
        return "BODY-CHANGED %r -> %r" % (m["body"][:60], body[:60])
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vectors", required=True)
    p.add_argument("--req-port", type=int, required=True)
    p.add_argument("--resp-port", type=int, required=True)
    p.add_argument("--origin-log", required=True)
    p.add_argument("--proxyd-log", required=True)
    p.add_argument("--raw-dir", required=True)
    a = p.parse_args()
    cases = json.load(open(a.vectors))
    stats = {}
    bad = 0
    for idx, c in enumerate(cases):
        if c["type"] not in ("request", "response") or c.get("lenient"):
            continue
        if c["type"] == "request":
            r = judge_request(a, c)
        else:
            r = judge_response(a, idx, c)
        kind = "pass" if r is None else r.split(" ")[0]
        key = "%s/%s/%s" % (c["type"], c["expect"], kind)
        stats[key] = stats.get(key, 0) + 1
        if r is not None and (c["file"], c["line"]) in KNOWN:
            r = "KNOWN %s (%s)" % (KNOWN[(c["file"], c["line"])], r)
            kind = "KNOWN"
            stats[key] -= 1
            key = "%s/%s/%s" % (c["type"], c["expect"], kind)
            stats[key] = stats.get(key, 0) + 1
        if r is not None:
            label = "%s %s:%d %r" % (c["type"], c["file"], c["line"], c["name"])
            if kind in ("STRICT", "SKIP", "KNOWN"):
                print("note: %s: %s" % (label, r))
            else:
                bad += 1
                print("MISMATCH: %s [expect %s]: %s" % (label, c["expect"], r))
    for k in sorted(k for k in stats if stats[k]):
        print("summary: %s %d" % (k, stats[k]))
    print("mismatches: %d" % bad)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
