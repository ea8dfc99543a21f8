#!/usr/bin/env bash
# http analyser: heads judged line by line as they arrive, and the RFC
# details of issue 24.
#   A request head whose request line or a field line is bad (HTTP/9.9, a
#   control byte, NUL, a line that is no field, more lines than
#   max-header-lines) and whose empty line has not come is answered at
#   once (505 / 400 / 431) with the real reason, not at request-timeout
#   (60 s here) with a 408. A response head that is not HTTP ("THIS IS NOT
#   HTTP", binary bytes without an LF, a field with a control byte) from a
#   server that holds its connection open gets a 502 at once, not at
#   response-timeout (60 s) or when the server closes.
#   After a HEAD on its connection, such a refusal's error page still goes
#   whole (it is no HEAD's response).
#   A 405 made by proxyd carries Allow (RFC 9110 15.5.6); HTTP/1.2 is read
#   as HTTP/1.1 (RFC 9110 2.5), HTTP/2.0 stays 505. Bytes a server sends
#   after a 204, a 304 or a HEAD response (in the same read as the head or
#   later) close that server connection: the next request of the client
#   goes on a new one.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" empty
mkdir -p "$T/raw"
# raw responses; the origin then holds the connection 20 s (reading, never
# answering again) unless proxyd closes it
HOLD_LOG=$T/hold-origin.jsonl
start_origin HOLDO "$HOLD_LOG" raw "$T/raw" 20
free_port PQ
free_port PR
write_proxyd_conf
LIM='<limits max-header-lines="20" request-timeout="60s" response-timeout="60s"/>'
write_http_service req "$PQ" "$ORIG" "<http>$LIM</http>"
write_http_service resp "$PR" "$HOLDO" '<http><limits request-timeout="60s" response-timeout="60s"/></http>'
start_proxyd

H='Host: a\r\n'
FAST=3000	# ms: an answer made as the line arrives, not at a timeout

# send PORT NAME DATA [TIMEOUT=10]: RES is raw_send's line, MS how long
# it took. The client sends DATA and keeps its side open.
send() {
    local t0
    t0=$(now_ms)
    RES=$(raw_send "$1" "$3" --timeout "${4:-10}" --out "$T/resp.$2")
    MS=$(($(now_ms) - t0))
    info "$2: $RES after $MS ms"
}
expect_status() { # NAME WANT
    check [ "${RES%% *}" = "statuses=$2" ] "$1: client got '$RES', wanted $2"
}
expect_fast() { # NAME
    check [ "$MS" -lt "$FAST" ] "$1: answered after $MS ms (not as the line came)"
}
expect_log() { # NAME REGEX
    check wait_grep "$PROXYD_LOG" "$2" "$ASYNC_WAIT" "$1: no log line /$2/"
}
raw() { # FILE ESCAPED: what the holding origin answers GET /FILE with
    python3 -c 'import codecs,sys; sys.stdout.buffer.write(codecs.decode(sys.argv[1], "unicode_escape").encode("latin1"))' \
        "$2" >"$T/raw/$1"
}

# ------------------------------------------------ request heads, no end
# req_case NAME STATUS REASON DATA: DATA has no empty line
req_case() {
    send "$PQ" "$1" "$4"
    expect_status "$1" "$2"
    expect_fast "$1"
    check has "$RES" closed=yes "$1: connection not closed: $RES"
    expect_log "$1" "http-error status=$2 reason=\"$3\""
}
has() { [[ $1 == *"$2"* ]]; }
req_case v99 505 'HTTP version not supported' "GET /a HTTP/9.9\r\n$H"
req_case v20 505 'HTTP version not supported' "GET /a HTTP/2.0\r\n$H"
req_case ctl_target 400 'malformed request target' "GET /a\x01b HTTP/1.1\r\n$H"
req_case nul_value 400 'invalid character in header value' "GET /a HTTP/1.1\r\n${H}X-A: a\x00b\r\n"
req_case ctl_value 400 'invalid character in header value' "GET /a HTTP/1.1\r\n${H}X-A: \x01\r\n"
req_case not_field 400 'whitespace before colon' "GET /a HTTP/1.1\r\n${H}THIS IS NOT A FIELD\r\n"
req_case binary 400 'malformed method' '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n'
fill=$(printf 'X-F%s: v\\r\\n' $(seq 1 21))
req_case many_lines 431 'too many header lines' "GET /a HTTP/1.1\r\n$fill"
check [ "$(wc -l <"$ORIG_LOG")" = 0 ] "the origin got a request: $(head -c 300 "$ORIG_LOG")"

# HTTP/1.2: HTTP/1.1 (RFC 9110 2.5)
send "$PQ" v12 "GET /v12 HTTP/1.2\r\n${H}Connection: close\r\n\r\n"
expect_status v12 200
check grep -q '"target": "/v12", "version": "HTTP/1.1"' "$ORIG_LOG" "v12: the origin did not get it as HTTP/1.1: $(cat "$ORIG_LOG")"
# ... which still needs its Host
send "$PQ" v12_host "GET /v12 HTTP/1.2\r\n\r\n"
expect_status v12_host 400
expect_log v12_host 'http-error status=400 reason="missing Host"'

# 405 made by proxyd: Allow lists what the policy accepts
send "$PQ" allow "TRACE /t HTTP/1.1\r\n$H\r\n"
expect_status allow 405
check grep -q $'^Allow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH\r$' "$T/resp.allow" \
    "allow: no Allow: $(head -c 400 "$T/resp.allow" | tr '\r\n' '  ')"

# After a HEAD on the connection, a request refused before it is judged
# (a line that is no field) is no HEAD: its error page goes whole, as its
# Content-Length says
send "$PQ" head_then_bad "HEAD /h HTTP/1.1\r\n$H\r\nGET /a HTTP/1.1\r\n${H}NO FIELD\r\n"
expect_status head_then_bad 200,400
RES=$(python3 - "$T/resp.head_then_bad" <<'PY'
import re, sys
d = open(sys.argv[1], "rb").read()
head, _, body = d[d.find(b"HTTP/1.1 400"):].partition(b"\r\n\r\n")
cl = re.search(rb"\r\nContent-Length: (\d+)", head)
print("whole" if cl and int(cl.group(1)) == len(body) > 0 else
      "Content-Length %s, %d bytes" % (cl.group(1).decode() if cl else "-",
                                       len(body)))
PY
)
check [ "$RES" = whole ] "head_then_bad: the 400 page after a HEAD: $RES"

# ------------------------------------------------ response heads, no end
# resp_case NAME REASON ESCAPED: the origin sends ESCAPED and holds
resp_case() {
    raw "$1" "$3"
    send "$PR" "$1" "GET /$1 HTTP/1.1\r\n$H\r\n"
    expect_status "$1" 502
    expect_fast "$1"
    expect_log "$1" "http-bad-response reason=\"$2\""
    expect_log "$1" "http-error status=502 reason=\"$2\""
}
resp_case r_not_http 'malformed HTTP version' 'THIS IS NOT HTTP\r\n'
resp_case r_binary 'malformed HTTP version' '\x15\x03\x01\x00\x02\x02\x28'
resp_case r_ctl_field 'invalid character in header value' 'HTTP/1.1 200 OK\r\nX-A: \x01\r\n'
resp_case r_v20 'HTTP version not supported' 'HTTP/2.0 200 OK\r\n'

# ------------------------------------------------ bytes after the end
# (closed: the holding origin would swallow a request sent on it from the pool)
raw ok 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'
# conn_of TARGET: the origin connection a request came on
conn_of() {
    python3 - "$HOLD_LOG" "$1" <<'EOF'
import json, sys
for ln in open(sys.argv[1]):
    r = json.loads(ln)
    if r.get("target") == sys.argv[2]:
        print(r["conn"])
        break
else:
    print("NONE")
EOF
}
# extra_case NAME METHOD WANT ESCAPED: METHOD /NAME answered ESCAPED (its
# end, then bytes after it), then GET /ok on the same client connection
extra_case() {
    local name=$1 method=$2 want=$3
    raw "$name" "$4"
    cat >"$T/client.py" <<'EOF'
import socket, sys, time
port, method, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"%s /%s HTTP/1.1\r\nHost: a\r\n\r\n" % (method.encode(), name.encode()))
got = b""
try:
    while b"\r\n\r\n" not in got:
        d = s.recv(65536)
        if not d:
            break
        got += d
except socket.timeout:
    pass
# the bytes after the end come 0.3 s after the head, or with it
time.sleep(0.8)
s.sendall(b"GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
except socket.timeout:
    pass
print(" ".join(ln.split(b" ")[1].decode() for ln in got.split(b"\r\n")
               if ln.startswith(b"HTTP/1.1 ")))
EOF
    local before got c1 c2
    before=$(log_count 'bytes after a complete response')
    got=$(python3 "$T/client.py" "$PR" "$method" "$name")
    info "$name: client got '$got'"
    check [ "$got" = "$want 200" ] "$name: client got '$got', wanted '$want 200'"
    c1=$(conn_of "/$name")
    c2=$(conn_of /ok)
    : >"$HOLD_LOG"
    check [ "$c1" != NONE ] "$name: the origin did not get it"
    check [ "$c1" != "$c2" ] "$name: GET /ok came on the same server connection ($c1, $c2)"
    check [ "$(log_count 'bytes after a complete response')" -gt "$before" ] \
        "$name: no http-bad-response line for the bytes after the response"
}
extra_case x204 GET 204 'HTTP/1.1 204 No Content\r\n\r\nEXTRA BODY'
extra_case xhead HEAD 200 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello'
extra_case x304 GET 304 'HTTP/1.1 304 Not Modified\r\n\r\n@@PAUSE@@EXTRA BODY'
extra_case x204late GET 204 'HTTP/1.1 204 No Content\r\n\r\n@@PAUSE@@hello'

http_done
