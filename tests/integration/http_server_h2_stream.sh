#!/usr/bin/env bash
# HTTP/2 towards servers, what nginx cannot show: a python3-h2 origin
# (h2_origin_server.py) that echoes a request body as it comes.
#  - full duplex: an HTTP/1.1 client's chunked upload gets its first chunk
#    echoed back before it sends the second (no early-response rule on an
#    h2 stream), both ways go on to their ends;
#  - trailers both ways (trailers="pass"): the request's chunked trailers
#    reach the server as HTTP/2 trailers, the server's trailers come back
#    as chunked trailers; "TE: trailers" reaches the server as te;
#  - RST_STREAM from the server: before the head a 502, inside the body
#    the client's transaction is cut (logged http-server-reset);
#  - a client that goes away inside its transaction: the server's stream
#    is reset (RST_STREAM CANCEL);
#  - a server that takes no body: proxyd's memory does not grow with the
#    upload (the stream's window, then the client's, shut);
#  - a connection whose window the server keeps (a stream it never
#    reads, its connection-level window not given back either): a next
#    request with a body goes on another connection (server-pool), not
#    behind it;
#  - a server that never answers: 504 at response-timeout, the stream
#    cancelled;
#  - an interim 103 from the server reaches the client before the 200;
#  - a server connection that dies before any response byte: a
#    replayable request goes once more on a new connection (retried
#    counter), a POST gets 502; a stream the server refused
#    (REFUSED_STREAM: not processed) goes again, a POST with its body too.
# On main the attribute is unknown: the service does not load.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds curl python3
setup

OLOG=$T/origin.log
start_h2_origin OP "$OLOG"

# An origin whose first two connections die at once.
DLOG=$T/origin-drop.log
start_h2_origin OD "$DLOG" 2

free_port PH
free_port PD
write_proxyd_conf
write_http_service h2o "$PH" "$OP" '<http server-h2="yes" trailers="pass"/>'
write_http_service h2d "$PD" "$OD" '<http server-h2="yes"/>'
free_port PS
SLOG=$T/origin-stall.log
start_h2_origin OS "$SLOG"
write_http_service h2s "$PS" "$OS" '<http server-h2="yes"/>'
free_port PT
write_http_service h2t "$PT" "$OP" '<http server-h2="yes"><limits response-timeout="1s"/></http>'
start_proxyd

cat >"$T/duplex.py" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
got = b""
deadline = time.time() + 10
while b"first" not in got.split(b"\r\n\r\n", 1)[-1] or b"\r\n\r\n" not in got:
    if time.time() > deadline:
        print("NO-EARLY-ECHO", got)
        sys.exit(1)
    d = s.recv(65536)
    if not d:
        print("CLOSED", got)
        sys.exit(1)
    got += d
print("early-echo")
s.sendall(b"6\r\nsecond\r\n0\r\nX-Req-Trailer: abc\r\n\r\n")
while not got.endswith(b"\r\n\r\n") or got.count(b"\r\n\r\n") < 2:
    if time.time() > deadline:
        break
    d = s.recv(65536)
    if not d:
        break
    got += d
sys.stdout.write(got.decode("latin-1"))
PY
out=$(python3 "$T/duplex.py" "$PH" 2>&1 | tr -d '\r') || true
info "duplex: $(tr '\n' '|' <<<"$out")"
check grep -q '^early-echo$' <<<"$out" "the first chunk echoed before the request's end"
check grep -qi '^transfer-encoding: chunked' <<<"$out" "the response chunked"
check grep -qi '^x-te: trailers' <<<"$out" "te: trailers reached the server"
check grep -q '^second$' <<<"$out" "the second chunk echoed"
check grep -qi '^x-echo-trailer: abc' <<<"$out" "request trailer reached the server, its trailer came back"
check grep -qi '^x-echo-bytes: 11' <<<"$out" "the server got 11 body bytes"
check grep -q '^POST /echo te=trailers$' "$OLOG" "the origin saw te=trailers"

# RST_STREAM before the head: 502; inside the body: the transaction cut.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PH/reset0" 2>/dev/null) || true
check [ "$code" = 502 ] "RST_STREAM before the head: $code"
rc=0
curl -sS --max-time 10 -o "$T/reset.out" "http://127.0.0.1:$PH/reset" 2>/dev/null || rc=$?
check [ "$rc" != 0 ] "RST_STREAM inside the body: curl must see a cut transfer (rc $rc)"
wait_log_count 'http-server-reset .*INTERNAL_ERROR' 1
wait_log_count 'path=/reset .*verdict=reset .*server-proto=h2' 1
# The connection still serves.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PH/none" 2>/dev/null) || true
check [ "$code" = 404 ] "a request after the resets: $code"

# A client gone inside its transaction: the stream is cancelled.
python3 - "$PH" <<'PY' || true
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /echo-cancel HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
got = b""
deadline = time.time() + 10
while b"first" not in got and time.time() < deadline:
    got += s.recv(65536)
s.close()
PY
wait_grep "$OLOG" '^reset /echo-cancel code=8$' 5 || true
check grep -q '^reset /echo-cancel code=8$' "$OLOG" "the server's stream cancelled when the client left: $(grep reset "$OLOG" | tr '\n' ' ')"

# A server that never answers: 504 at response-timeout, its stream
# cancelled.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PT/hang" 2>/dev/null) || true
check [ "$code" = 504 ] "an unanswered stream: $code"
wait_grep "$OLOG" '^reset /hang code=8$' 5 || true
check grep -q '^reset /hang code=8$' "$OLOG" "the unanswered stream cancelled"

# A server that takes no body: the stream's window shuts, the client's
# upload stops, proxyd holds about buffer of it (its peak RSS does not
# grow by the 16 MB sent at it).
hwm0=$(vm_kb "$PROXYD_PID" VmHWM)
head -c 16M /dev/zero >"$T/zero.bin"
curl -sS --max-time 3 -o /dev/null --data-binary @"$T/zero.bin" -H 'Expect:' \
    "http://127.0.0.1:$PH/sink" 2>/dev/null || true
hwm1=$(vm_kb "$PROXYD_PID" VmHWM)
info "peak RSS $hwm0 KB -> $hwm1 KB around a 16 MB upload to a server that takes none"
if http_sanitized; then
    info "sanitizer build: RSS bound not checked"
else
    check [ "$((hwm1 - hwm0))" -lt 4096 ] "peak RSS growth under an upload the server does not take: $((hwm1 - hwm0)) KB"
fi

# An interim head passed on.
curl -sS --max-time 10 -D "$T/early.hdr" -o "$T/early.out" "http://127.0.0.1:$PH/early" 2>/dev/null || true
hd=$(tr -d '\r' <"$T/early.hdr")
check grep -q '^HTTP/1.1 103' <<<"$hd" "a 103 passed on: $hd"
check grep -qi '^link: </a.css>; rel=preload' <<<"$hd" "the 103's Link"
check grep -q '^HTTP/1.1 200' <<<"$hd" "then the 200"
check [ "$(cat "$T/early.out")" = ok ] "the body after a 103"

# Connections that die before answering: a POST is not sent again (502),
# a GET is, once, on a new connection.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --data x "http://127.0.0.1:$PD/file" 2>/dev/null) || true
check [ "$code" = 502 ] "POST on a connection that died: $code"
r0=$(http_counter retried)
code=$(curl -sS --max-time 10 -o "$T/file.out" -w '%{http_code}' "http://127.0.0.1:$PD/file" 2>/dev/null) || true
check [ "$code" = 200 ] "GET retried after the connection died: $code"
check [ "$(wc -c <"$T/file.out")" = 100 ] "the retried GET's body"
check [ "$(grep -c dropped "$DLOG")" = 2 ] "two connections dropped by the origin"
# (The metrics are a snapshot that may lag the log by a moment.)
for ((i = 0; i < 50; i++)); do (($(http_counter retried) - r0 >= 1)) && break; sleep 0.1; done
check [ "$(( $(http_counter retried) - r0 ))" = 1 ] "one retry counted"
out=$(curl -sS --max-time 10 --data-binary 'hello-body' -H 'Expect:' -D - \
    "http://127.0.0.1:$PH/refuse-once-post" 2>&1 | tr -d '\r') || true
check grep -q '^HTTP/1.1 200' <<<"$out" "a refused POST went again: $out"
check grep -q 'hello-body' <<<"$out" "its body too: $out"
check grep -qi 'x-echo-bytes: 10' <<<"$out" "the server got its 10 bytes once: $out"
# A body over one DATA frame, refused with it on the way: all of it again
# (the refused stream's copy, then the rest).
head -c 40000 /dev/urandom >"$T/big.bin"
code=$(curl -sS --max-time 10 --data-binary @"$T/big.bin" -H 'Expect:' \
    -D "$T/big.hdr" -o "$T/big.out" -w '%{http_code}' \
    "http://127.0.0.1:$PH/refuse-once-big" 2>/dev/null) || true
check [ "$code" = 200 ] "a refused 40000-byte POST went again: $code"
check cmp -s "$T/big.bin" "$T/big.out" "its whole body echoed: $(wc -c <"$T/big.out") bytes"
check grep -qi 'x-echo-bytes: 40000' "$T/big.hdr" "the server got its 40000 bytes once: $(tr -d '\r' <"$T/big.hdr")"

# A stream the server never reads, and the connection's window not given
# back either: the connection is spent for bodies. The next upload gets
# a connection of its own and its echo.
curl -sS --max-time 15 -o /dev/null --data-binary @"$T/zero.bin" -H 'Expect:' \
    "http://127.0.0.1:$PS/sinkall" 2>/dev/null &
sinkpid=$!
track_pid "$sinkpid"
wait_grep "$SLOG" '^sinkall full$' 10 || fail "the /sinkall stream did not fill the connection's window: $(tail -3 "$SLOG")"
out=$(curl -sS --max-time 5 --data-binary 'after-a-stall' -H 'Expect:' \
    "http://127.0.0.1:$PS/echo" 2>/dev/null) || true
check [ "$out" = after-a-stall ] "an upload after a connection's window was spent: '$out'"
kill "$sinkpid" 2>/dev/null || true
http_done
