#!/usr/bin/env bash
# HTTP/1.1 and a peer's bytes that nobody will read (a 4k buffer):
# - a TLS origin whose response and one more nobody asked for come in one
#   record: proxyd's read stops exactly at the response's end, the rest
#   waits decrypted in OpenSSL's buffer, where the socket (the pool's read
#   event) does not see it: that connection is not pooled, the next
#   client gets its own response (not the leftover one);
# - the same from a plain origin, to a client that sent its next request
#   with the first (pipelined): the connection it keeps is not reused for
#   that request, which gets its own response (the leftover one would be
#   read as it, the request going out before the loop reads the socket);
# - a plain origin's bytes after its response in a write of their own,
#   that come with the client's next request in one loop pass, the
#   client's reported first (proxyd stopped meanwhile, so both wait in
#   its sockets): that request does not go out on the connection either;
# - a plain origin that closes right after its response (no Connection:
#   close), its FIN in proxyd's socket behind the response: the client's
#   pipelined POST (not replayable: no retry) goes on a new connection,
#   not on the closed one (a 502); nor another client's POST that the
#   loop pass which pools that connection reads;
# - an early answer (an origin's 413 before the request's body is all
#   read): it says Connection: close, and the client still sending its
#   body slowly reads all of it then a FIN, no reset (lingering close,
#   RFC 9112 9.6); and so with proxyd's own 413 (max-body).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds curl openssl python3
setup

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin origin.test "DNS:origin.test,IP:127.0.0.1" serverAuth

# extra_origin VAR tls|plain|late: each request (its path) is answered
# with a response of exactly 4096 bytes, its body the path padded with
# dots, and in the same write (one TLS record) one more response nobody
# asked for; late: plain, a response with just the path, and the extra
# one only after the response to /late, once told to (the FIFO late.go),
# in a write of its own.
mkfifo "$T/late.go"
extra_origin() {
    start_py_server "$1" <<PY
import ssl
CTX = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CTX.load_cert_chain("$P/origin.pem", "$P/origin.key")
EXTRA = b"HTTP/1.1 200 OK\\r\\nContent-Length: 9\\r\\n\\r\\nsmuggled\\n"
def response(path):
    if "$2" == "late":
        return b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s\\n" % (
            len(path) + 1, path)
    for n in range(4096):
        head = b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % n
        if len(head) + n == 4096:
            return head + (path + b"\\n").ljust(n, b".") + EXTRA
def handle(c):
    s = CTX.wrap_socket(c, server_side=True) if "$2" == "tls" else c
    buf = b""
    while True:
        while b"\\r\\n\\r\\n" not in buf:
            d = s.recv(4096)
            if not d:
                return
            buf += d
        head, buf = buf.split(b"\\r\\n\\r\\n", 1)
        path = head.split(b" ")[1]
        s.sendall(response(path))
        if "$2" == "late" and path == b"/late":
            with open("$T/late.go") as f:
                f.read()
            s.sendall(EXTRA)
PY
}
extra_origin ORIGIN tls
extra_origin PLAIN plain
extra_origin LATE late

# A plain origin that answers 413 as soon as it has a request's head,
# then reads (and drops) whatever comes, keeping its connection.
start_py_server EARLY <<'PY'
def handle(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    body = b"too large\n" * 100
    c.sendall(b"HTTP/1.1 413 Content Too Large\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    c.settimeout(10)
    while c.recv(65536):
        pass
PY

# A plain origin that closes its connection right after each response,
# without Connection: close (keepalive_timeout 0-ish); the response to
# /first waits until told to (the FIFO close.go), and it writes
# close.got when it has that request.
mkfifo "$T/close.go"
start_py_server CLOSER <<PY
def handle(c):
    buf = b""
    while b"\\r\\n\\r\\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    head, buf = buf.split(b"\\r\\n\\r\\n", 1)
    path = head.split(b" ")[1]
    n = [int(l.split(b":")[1]) for l in head.split(b"\\r\\n")
         if l.lower().startswith(b"content-length:")]
    while n and len(buf) < n[0]:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    if path == b"/first":
        open("$T/close.got", "w").close()
        with open("$T/close.go") as f:
            f.read()
    c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n%s\\n" % (
        len(path) + 1, path))
    c.close()
PY

free_port P_EXTRA
free_port P_CLOSER
free_port P_EARLY
free_port P_KEPT
free_port P_MAX
free_port P_LATE
write_proxyd_conf 'buffer="4k"'
# One worker: the pool is per worker.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service h_extra "$P_EXTRA" "$ORIGIN" \
    "<tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"origin.test\"/>"
write_http_service h_early "$P_EARLY" "$EARLY" '<http server-h2="no"/>'
write_http_service h_kept "$P_KEPT" "$PLAIN" '<http server-h2="no"/>'
write_http_service h_late "$P_LATE" "$LATE" '<http server-h2="no"/>'
write_http_service h_closer "$P_CLOSER" "$CLOSER" '<http server-h2="no"/>'
write_http_service h_max "$P_MAX" "$EARLY" \
    '<http server-h2="no"><limits max-body="1k"/></http>'
start_proxyd

info "a TLS server's bytes after its response, in the same record: its connection is not reused"
for i in 1 2; do
    # Connection: close: the server connection leaves the session with
    # the response's last byte, the leftover not read yet.
    body=$(curl -sS --max-time 10 -H 'Connection: close' "http://127.0.0.1:$P_EXTRA/extra$i" | head -n 1)
    assert_eq "$body" "/extra$i" "the response of client $i"
    wait_log_count "session-end service=h_extra " "$i"
done
assert_metric eq proxyd_upstream_connections_total 'kind="reused"' 0
assert_log "http-upstream server sent bytes after its response: connection not reused"

info "a plain server's bytes after its response, the client's next request pipelined: not read as its response"
out=$(timeout 20 python3 - "$P_KEPT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
s.settimeout(10)
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
bodies = []
while b"\r\n\r\n" in data:
    head, _, data = data.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    bodies.append(data[:n].split(b"\n")[0].decode(errors="replace"))
    data = data[n:]
print(" ".join(bodies))
PY
)
assert_eq "$out" "/a /b" "the pipelined requests' responses"
assert_log "#[0-9]+ http-request .*path=/b status=200 .* upstream=new"

info "a plain server's bytes after its response, come in the loop pass that reads the client's next request: not read as its response"
# The client's request reaches proxyd's socket before the server's extra
# bytes reach theirs, both while proxyd is stopped: the loop is then told
# of the client first. Before it stops, proxyd answers another connection
# (a bad request): its loop has polled since the response's end, so it
# does not still list the server's socket ahead from that read.
out=$(PYTHONPATH="$(dirname "$0")" timeout 20 python3 - "$P_LATE" "$LATE" "$PROXYD_PID" "$T/late.go" <<'PY'
import os, signal, socket, sys
from proc_watch import queued, stopped, wait
port, origin, pid, fifo = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def body(s, buf):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, buf = buf.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    return buf[:n].split(b"\n")[0].decode(errors="replace"), buf[n:]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
s.sendall(b"GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
first, buf = body(s, b"")
bad = socket.create_connection(("127.0.0.1", port))
bad.settimeout(10)
bad.sendall(b"BAD\r\n\r\n")
while bad.recv(65536):
    pass
os.kill(pid, signal.SIGSTOP)
try:
    wait(lambda: stopped(pid), "proxyd stopped")
    s.sendall(b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    wait(lambda: queued("01", rport=s.getsockname()[1], lport=port),
         "the request, in proxyd's socket")
    with open(fifo, "w") as f:
        f.write("go")
    wait(lambda: queued("01", rport=origin),
         "the extra response, in proxyd's socket")
finally:
    os.kill(pid, signal.SIGCONT)
second, buf = body(s, buf)
print(first, second)
PY
) || true
kill -CONT "$PROXYD_PID" 2>/dev/null || true	# however the client ended
assert_eq "$out" "/late /after" "the responses of the client's two requests"
assert_log "#[0-9]+ http-request .*path=/after status=200 .* upstream=new"

info "a server that closes right after its response, its FIN read with it: a pipelined POST goes on a new connection"
# proxyd is stopped while the response and the FIN reach its socket: its
# read of the response stops short of its room, and the FIN is still
# unread: the POST (not replayable) must not go out on that connection.
out=$(PYTHONPATH="$(dirname "$0")" timeout 20 python3 - "$P_CLOSER" "$CLOSER" "$PROXYD_PID" "$T" <<'PY'
import os, signal, socket, sys
from proc_watch import queued, stopped, wait
port, origin, pid, t = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
s.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n"
          b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
          b"Connection: close\r\n\r\nhello")
wait(lambda: os.path.exists(t + "/close.got"), "the first request at the origin")
os.kill(pid, signal.SIGSTOP)
try:
    wait(lambda: stopped(pid), "proxyd stopped")
    with open(t + "/close.go", "w") as f:
        f.write("go")
    wait(lambda: queued("08", rport=origin), "the response and FIN in proxyd's socket")
finally:
    os.kill(pid, signal.SIGCONT)
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
out = []
while b"\r\n\r\n" in data:
    head, _, data = data.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    out.append(head.split(b" ")[1].decode() + ":" +
               data[:n].split(b"\n")[0].decode(errors="replace"))
    data = data[n:]
print(" ".join(out))
PY
) || true
kill -CONT "$PROXYD_PID" 2>/dev/null || true	# however the client ended
assert_eq "$out" "200:/first 200:/second" "the pipelined GET's and POST's responses"

info "the same, the POST another client's, in the loop pass that pools the connection: not taken from the pool"
# Client A's response and FIN reach proxyd's socket, then client B's
# connection and POST, while proxyd is stopped: one loop pass reads A's
# response (A's session ends: the connection goes to the pool) and
# takes B's POST, which must not go out on the pooled, closed connection.
rm -f "$T/close.got"
out=$(PYTHONPATH="$(dirname "$0")" timeout 20 python3 - "$P_CLOSER" "$CLOSER" "$PROXYD_PID" "$T" <<'PY'
import os, signal, socket, sys
from proc_watch import queued, stopped, wait
port, origin, pid, t = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            return "none"
        data += d
    head, _, data = data.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
         if l.lower().startswith(b"content-length:")][0]
    while len(data) < n:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return head.split(b" ")[1].decode() + ":" + \
        data[:n].split(b"\n")[0].decode(errors="replace")
a = socket.create_connection(("127.0.0.1", port))
a.settimeout(10)
a.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
wait(lambda: os.path.exists(t + "/close.got"), "the first request at the origin")
os.kill(pid, signal.SIGSTOP)
try:
    wait(lambda: stopped(pid), "proxyd stopped")
    with open(t + "/close.go", "w") as f:
        f.write("go")
    wait(lambda: queued("08", rport=origin), "the response and FIN in proxyd's socket")
    b = socket.create_connection(("127.0.0.1", port))
    b.settimeout(10)
    b.sendall(b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
              b"Connection: close\r\n\r\nhello")
    wait(lambda: queued("01", lport=port, rport=b.getsockname()[1]),
         "the POST in proxyd's socket")
finally:
    os.kill(pid, signal.SIGCONT)
print(response(a), response(b))
PY
) || true
kill -CONT "$PROXYD_PID" 2>/dev/null || true	# however the client ended
assert_eq "$out" "200:/first 200:/second" "client A's GET and client B's POST"

# slow_upload PORT: the client declares 4 MB and sends 2 MB of it slowly
# (about 1 s), not looking at what comes back meanwhile, then reads to
# the end: the status, Connection: close, whether the body is whole (as
# its Content-Length says), how its sending and its reading ended.
slow_upload() {
    timeout 30 python3 - "$1" <<'PY'
import re, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n")
sent, send_err = 0, "none"
try:
    while sent < 2 * 1024 * 1024:
        s.sendall(b"x" * 16384)
        sent += 16384
        time.sleep(0.008)
except OSError as e:
    send_err = type(e).__name__
data, end = b"", "fin"
s.settimeout(10)
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError as e:
    end = type(e).__name__
head, _, body = data.partition(b"\r\n\r\n")
cl = re.search(rb"\r\ncontent-length: (\d+)", head.lower())
print("status=%s close=%s body=%s send=%s end=%s" % (
    head.split(b" ")[1].decode() if head else "-",
    b"\r\nconnection: close" in head.lower(),
    "whole" if cl and int(cl.group(1)) == len(body) > 0 else len(body),
    send_err, end))
PY
}
info "an early 413 to a client still sending its body: told to close, read whole, then a FIN"
out=$(slow_upload "$P_EARLY")
info "  $out"
assert_eq "$out" "status=413 close=True body=whole send=none end=fin" "what the client got"
assert_log "http-request .*path=/up status=413 "
assert_log "session-end service=h_early .* by=server phase=data end=server-closed"
info "proxyd's own 413 (max-body) to a client still sending its body: the same"
out=$(slow_upload "$P_MAX")
info "  $out"
assert_eq "$out" "status=413 close=True body=whole send=none end=fin" "what the client got from proxyd"
assert_log "session-end service=h_max .* end=denied: http 413: request body over max-body"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
