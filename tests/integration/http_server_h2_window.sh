#!/usr/bin/env bash
# HTTP/2 towards servers: a stream whose response came (whole, or started)
# while its request body still waits for the server's flow-control window
# (h2_origin_server.py's /done-* paths), with request-timeout and
# response-timeout at 1 s:
#  - a server that answered whole and never opens the stream's window does
#    not hold the transaction: once no byte of the body could go for
#    request-timeout, its stream is cancelled (RST_STREAM CANCEL), the
#    request logged (http-early-response, as an HTTP/1.1 server's early
#    answer), and the client's next request on its connection is served
#    (its body was all read) or, when its body was not all read, its
#    connection closed after the response; the same behind an HTTP/2
#    client's stream;
#  - neither timeout cuts what still moves: a response that goes on for 2 s
#    (a tick every 0.25 s) reaches the client whole, and a body the server
#    takes slowly (its window given back 0.2 s after each frame, about 3 s
#    for 1 MiB after the response's end) reaches it whole.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds curl python3
setup

OLOG=$T/origin.log
start_h2_origin OP "$OLOG"

free_port PW
write_proxyd_conf
write_http_service h2w "$PW" "$OP" '<http server-h2="yes" h2c="yes"><limits request-timeout="1s" response-timeout="1s"/></http>'
start_proxyd

# client.py PORT PATH BODY_BYTES NEXT: a POST of BODY_BYTES (sent from a
# thread, as far as proxyd reads it), its response read whole; then, with
# NEXT=next, a GET /file on the same connection, or with NEXT=eof, the
# connection's end awaited. Prints what it saw, one word a line.
cat >"$T/client.py" <<'PY'
import socket, sys, threading, time
port, path, size, nxt = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=6)
s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" %
          (path.encode(), size))
sent = [0]
def send():
    chunk = b"b" * 16384
    try:
        while sent[0] < size:
            n = min(len(chunk), size - sent[0])
            s.sendall(chunk[:n])
            sent[0] += n
    except OSError:
        pass
threading.Thread(target=send, daemon=True).start()
got = b""
t0 = time.time()
def more():
    global got
    d = s.recv(65536)
    if not d:
        raise EOFError
    got += d
try:
    while b"\r\n\r\n" not in got:
        more()
    head, body = got.split(b"\r\n\r\n", 1)
    print(head.split(b"\r\n")[0].decode())
    if b"transfer-encoding: chunked" in head.lower():
        while not got.endswith(b"\r\n0\r\n\r\n"):
            more()
        print("ticks=%d" % got.count(b"tick\n"))
    else:
        while not got.endswith(b"done"):
            more()
        print("body=done")
except (EOFError, OSError) as e:
    print("RESPONSE-CUT %r after %.1fs: %r" % (e, time.time() - t0, got[-80:]))
    sys.exit(0)
if nxt == "next":
    while sent[0] < size and time.time() - t0 < 10:
        time.sleep(0.05)
    print("body-sent=%d" % sent[0])
    got = b""
    s.sendall(b"GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        while not got.endswith(b"x" * 100):
            more()
        print("next=" + got.split(b"\r\n")[0].decode().replace(" ", "_"))
    except socket.timeout:
        print("NEXT-TIMEOUT after %.1fs" % (time.time() - t0))
    except (EOFError, OSError) as e:
        print("NEXT-CUT %r" % e)
else:
    try:
        while True:
            more()
    except socket.timeout:
        print("NO-EOF after %.1fs" % (time.time() - t0))
    except (EOFError, OSError):
        print("eof")
PY

# 1. Answered whole, its 128 KiB body all read by proxyd, half of it never
# taken: cancelled at request-timeout, the connection serves the next.
out=$(python3 "$T/client.py" "$PW" /done-sink 131072 next 2>&1) || true
info "done-sink, body read: $(tr '\n' '|' <<<"$out")"
check grep -q '^HTTP/1.1 200' <<<"$out" "the early answer reached the client"
check grep -q '^next=HTTP/1.1_200' <<<"$out" "the next request on the connection served"
check wait_grep "$OLOG" '^reset /done-sink code=8$' 5 "the held stream cancelled"
check wait_grep "$PROXYD_LOG" 'http-early-response status=200 unsent=65537 .*its stream cancelled' 5 "logged as an early response, what the server did not take"
check wait_grep "$PROXYD_LOG" 'http-request .*method=POST .*path=/done-sink status=200 .*server-proto=h2' 5 "its http-request line"

# 2. Its 4 MiB body not all read: the connection closed after the answer.
out=$(python3 "$T/client.py" "$PW" /done-sink-big 4194304 eof 2>&1) || true
info "done-sink, body unread: $(tr '\n' '|' <<<"$out")"
check grep -q '^HTTP/1.1 200' <<<"$out" "the early answer reached the client"
check grep -q '^eof$' <<<"$out" "the connection closed"
check wait_grep "$OLOG" '^reset /done-sink-big code=8$' 5 "the held stream cancelled"

# 3. A response that goes on for 2 s while the body waits: whole.
out=$(python3 "$T/client.py" "$PW" /done-slow-sink 4194304 eof 2>&1) || true
info "done-slow-sink: $(tr '\n' '|' <<<"$out")"
check grep -q '^ticks=8$' <<<"$out" "the slow response reached the client whole"
check grep -q '^eof$' <<<"$out" "then the connection closed"
check wait_grep "$OLOG" '^reset /done-slow-sink code=8$' 5 "then the held stream cancelled"

# 4. A body the server takes slowly after its answer: all of it goes.
out=$(python3 "$T/client.py" "$PW" /done-drip 1048576 next 2>&1) || true
info "done-drip: $(tr '\n' '|' <<<"$out")"
check grep -q '^body=done$' <<<"$out" "the answer reached the client"
check grep -q '^next=HTTP/1.1_200' <<<"$out" "the next request on the connection served"
check wait_grep "$OLOG" '^done-drip got 1048576 end$' 5 "the server got the whole body"
check [ "$(grep -c 'reset /done-drip' "$OLOG")" = 0 ] "the slow body was not cancelled"

# 5. The same through an HTTP/2 client (its stream's leg): the client has
# its answer at once, the server's stream does not stay held.
head -c 131072 /dev/zero >"$T/body"
code=$(curl -sS --max-time 6 --http2-prior-knowledge -o "$T/h2.out" -w '%{http_code}' \
    --data-binary @"$T/body" "http://127.0.0.1:$PW/done-sink-h2" 2>"$T/h2.err") || true
check [ "$code" = 200 ] "an HTTP/2 client's early answer: $code $(cat "$T/h2.err")"
check wait_grep "$OLOG" '^reset /done-sink-h2 code=8$' 5 "its held stream cancelled"
check wait_grep "$PROXYD_LOG" 'http-request .*path=/done-sink-h2 status=200 .*server-proto=h2 proto=h2 ' 5 "its http-request line"
http_done
