#!/usr/bin/env bash
# gRPC end to end through proxyd (issue 36): Debian's python3-grpcio client
# (grpc_peer.py) over h2c to an <http h2c="yes" server-h2="yes"> service in
# front of the python3-grpcio server, so HTTP/2 both sides: a unary call
# whose initial and trailing metadata reach the client (trailers="pass"),
# server-streaming, client-streaming (sha256 of what came), bidirectional
# in lock step (each echo seen before the next message goes), a 100 MB
# stream (sha256; proxyd's peak RSS grows far less than the stream: flow
# control end to end), a call the client cancels (the server sees it
# cancelled), one the server aborts and one it cancels (the client gets
# its status through the trailers), a server that resets a stream with
# RST_STREAM CANCEL (a bare python3-h2 server: the client sees CANCELLED,
# the server's code, not an INTERNAL error), a method the server does not
# have (its trailers-only UNIMPLEMENTED stays one HEADERS frame with
# END_STREAM: HEADERS and an empty DATA would be UNKNOWN "Stream removed"
# to the client), a deadline (DEADLINE_EXCEEDED whichever of the client,
# the server or proxyd gives up first; the server sees the call end),
# grpc-timeout reaching the server, a response-timeout shorter than it
# (DEADLINE_EXCEEDED from proxyd, the server's stream cancelled), a method
# a url rule refuses (PERMISSION_DENIED, never reaching the server). Each
# call is one http-request line with proto=h2, whose status, verdict and
# byte counts are checked against what the call carried.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nghttp curl
PY=/usr/bin/python3
PEER=$LIB_DIR/grpc_peer.py
[[ -x $PY ]] && $PY -c 'import grpc' 2>/dev/null ||
    skip "python3-grpcio missing (scripts/deps)"
setup

BIG=100000000
http_sanitized && BIG=20000000

# gcall CASE [args]: the client's result line, through proxyd
gcall() {
    timeout 60 $PY "$PEER" client "127.0.0.1:$P_G" "$@" 2>>"$T/client.err" ||
        fail "grpc client $*: exit $? ($(tail -3 "$T/client.err"))"
}
# expect LINE REGEX WHAT
expect() {
    [[ $1 =~ $2 ]] || fail "$3: got '$1'"
    info "$3: $1"
}
# reqline METHOD N REGEX: the Nth http-request line of /test.Peer/METHOD
# (calls go one at a time), which must match REGEX
reqline() {
    local re="http-request .* path=/test\.Peer/$1 " line
    wait_log_count "$re" "$2"
    line=$(grep -E -- "$re" "$PROXYD_LOG" | sed -n "$2p")
    [[ $line =~ $3 ]] || fail "$1 call $2: '$line' does not match /$3/"
    echo "$line"
}
# bytes LINE KEY MIN MAX: LINE's KEY (to-server, to-client) in [MIN, MAX)
bytes() {
    local v
    v=$(kv "$1" "$2")
    assert_ge "$v" "$3" "$2 of '$1'"
    assert_lt "$v" "$4" "$2 of '$1'"
}
# A gRPC message of N bytes is N + 5 on the wire (PROTOCOL-HTTP2.md
# "Length-Prefixed-Message"); heads and framing add less than this.
SLACK=4096

free_port GRPC
$PY "$PEER" server "$GRPC" --log "$T/peer.log" >"$T/peer.out" 2>&1 &
track_pid $!
wait_listen "$GRPC" 10 $! || fail "grpc server did not start: $(cat "$T/peer.out")"
: >>"$T/peer.log"
free_port RST
$PY "$PEER" rst-server "$RST" >"$T/rst.out" 2>&1 &
track_pid $!
wait_listen "$RST" 10 $! || fail "h2 server did not start: $(cat "$T/rst.out")"

free_port P_G
free_port P_R
free_port P_T
write_proxyd_conf
write_http_service grpc "$P_G" "$GRPC" '<http h2c="yes" server-h2="yes" trailers="pass">
  <url path="/test.Peer/Forbidden" action="deny"/>
</http>'
write_http_service gshort "$P_T" "$GRPC" '<http h2c="yes" server-h2="yes" trailers="pass">
  <limits response-timeout="1s"/>
</http>'
write_http_service grst "$P_R" "$RST" '<http h2c="yes" server-h2="yes" trailers="pass"/>'
start_proxyd

info "unary: the echo, initial and trailing metadata"
expect "$(gcall unary --data through-proxyd)" \
    "^status=OK echo=through-proxyd initial=hello trailing=bye echo_len=14$" "unary"
assert_log "http-request .* method=POST host=[^ ]+ path=/test\.Peer/Unary status=200 .* verdict=accept server=127\.0\.0\.1:$GRPC .* proto=h2 stream=1$"

OKLINE="status=200 .* verdict=accept .* server-proto=h2 proto=h2 stream=1$"
info "server streaming, client streaming, bidirectional"
expect "$(gcall server_stream --n 200 --size 5000)" "^status=OK count=200 bytes=1000000$" "server stream"
l=$(reqline ServerStream 1 "$OKLINE")
bytes "$l" to-client 1001000 $((1001000 + SLACK))
expect "$(gcall client_stream --n 100 --size 20000)" \
    "^status=OK .* reply='count=100 bytes=2000000 sha256=[0-9a-f]{64}' match=yes$" "client stream"
l=$(reqline ClientStream 1 "$OKLINE")
bytes "$l" to-server 2000500 $((2000500 + SLACK))
expect "$(gcall bidi --n 50)" "^status=OK count=50 inorder=yes$" "bidi"
# m0..m49 each way: 10 of 2 bytes, 40 of 3, 5 more each
l=$(reqline Bidi 1 "$OKLINE")
bytes "$l" to-server 390 $((390 + SLACK))
bytes "$l" to-client 390 $((390 + SLACK))

info "a $BIG-byte stream: sha256, proxyd's memory bounded"
base=$(vm_kb "$PROXYD_PID" VmRSS)
expect "$(gcall big --total $BIG)" "^status=OK bytes=$BIG sha256=[0-9a-f]{64} match=yes$" "big stream"
peak=$(vm_kb "$PROXYD_PID" VmHWM)
info "proxyd RSS before $base kB, peak $peak kB"
# Not under a sanitizer: ASan's allocator keeps what is freed in
# quarantine (about 125 MB over this stream), so RSS says nothing there.
if [[ ${PROXYD_SANITIZED:-0} != 1 ]]; then
    assert_lt $((peak - base)) 32768 "proxyd's peak RSS growth (kB) over a $BIG-byte stream"
fi
l=$(reqline Big 1 "$OKLINE")
bytes "$l" to-client $((BIG + 5 * (BIG >> 20))) $((BIG + BIG / 100))

info "the client cancels a stream: the server sees the call cancelled"
expect "$(gcall big_cancel --n 3 --total 1000000000)" "^status=CANCELLED count=3$" "client cancel"
wait_grep "$T/peer.log" "^cancelled Big$" 10 || fail "the server did not see the cancel: $(cat "$T/peer.log")"
l=$(reqline Big 2 "status=200 .* verdict=reset .* reset=CANCEL .*proto=h2 stream=1$")
# 3 messages of 1 MB came; never the stream's 1 GB
bytes "$l" to-client $((3 * 1048581)) $((64 << 20))
# The stream was a transaction of the connection's session: the
# connection goes on (no session ended with the stream).
assert_no_grep "$PROXYD_LOG" "session-end service=grpc .* end=client reset: stream closed"

info "the server aborts a call, then cancels one: the client gets its status"
expect "$(gcall reset --n 4)" "^status=ABORTED count=4 details='reset by the server'$" "server abort"
l=$(reqline Reset 1 "$OKLINE")
bytes "$l" to-client $((4 * 7)) $((4 * 7 + SLACK))
expect "$(gcall reset --n 2 --mode cancel)" "^status=CANCELLED count=2 " "server cancel"
reqline Reset 2 "$OKLINE" >/dev/null

info "the server resets a stream (CANCEL): the client sees that code"
expect "$(P_G=$P_R gcall reset --n 1)" "^status=CANCELLED .*details='Received RST_STREAM with error code 8'$" "server RST_STREAM"
assert_log "http-server-reset stream=1 code=CANCEL \(inside the response\)$"
l=$(reqline Reset 3 "status=200 .* verdict=reset server=127\.0\.0\.1:$RST .*proto=h2 stream=1$")
bytes "$l" to-client 10 $((10 + SLACK))
# Only the stream ended (a transaction of the connection's session).
assert_no_grep "$PROXYD_LOG" "session-end service=grst .* end=server-reset"

info "a method the server lacks: its trailers-only UNIMPLEMENTED, one HEADERS frame"
expect "$(gcall missing)" "^status=UNIMPLEMENTED details='Method not found!'$" "unimplemented"
l=$(reqline Missing 1 "$OKLINE")
printf '\0\0\0\0\001x' >"$T/missing.msg"
timeout 20 nghttp -v -d "$T/missing.msg" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$P_G/test.Peer/Missing" >"$T/missing.h2" 2>&1 || true
assert_grep "$T/missing.h2" "recv \(stream_id=13\) grpc-status: 12$"
assert_grep "$T/missing.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>" \
    "UNIMPLEMENTED is not one HEADERS frame with END_STREAM"
assert_no_grep "$T/missing.h2" "recv DATA frame .*stream_id=13>"
# to an HTTP/1.1 client, that head says its empty body (no chunks)
curl -s -i --http1.1 -m 10 -H 'content-type: application/grpc' -H 'te: trailers' \
    --data-binary @"$T/missing.msg" "http://127.0.0.1:$P_G/test.Peer/Missing" >"$T/missing.h1" || true
assert_grep "$T/missing.h1" "^grpc-status: 12"$'\r'"$"
assert_grep "$T/missing.h1" "^content-length: 0"$'\r'"$"
assert_no_grep "$T/missing.h1" "^[Tt]ransfer-[Ee]ncoding"

info "a deadline: DEADLINE_EXCEEDED, and the call ends at the server"
# The client's deadline, the server's (grpc-timeout) and proxyd's run out
# within the same millisecond: whichever acts first, the client sees
# DEADLINE_EXCEEDED (its own; the server's trailers-only answer; proxyd's).
expect "$(gcall slow --delay 10 --timeout 1)" "^status=DEADLINE_EXCEEDED details='(Deadline Exceeded|no response within grpc-timeout)'$" "deadline"
wait_grep "$T/peer.log" "^cancelled Slow$" 10 || fail "the server did not see the deadline: $(cat "$T/peer.log")"
l=$(reqline Slow 1 "(status=0 .* verdict=reset .* reset=CANCEL|status=200 .* verdict=accept|status=504 grpc-status=4 .* verdict=error) .*proto=h2 stream=1$")
d=$(kv "$l" duration)
[[ $d =~ ^(0\.9|1\.|2\.) ]] || fail "the deadline's call lasted $d s"

# slowcall PORT GRPC_TIMEOUT OUT: Slow (5 s) by nghttp -v with that
# grpc-timeout; prints the ms it took
slowcall() {
    local t0
    printf '\0\0\0\0\0015' >"$T/slow.msg"
    t0=$(now_ms)
    timeout 20 nghttp -v -d "$T/slow.msg" -H 'content-type: application/grpc' -H 'te: trailers' \
        -H "grpc-timeout: $2" "http://127.0.0.1:$1/test.Peer/Slow" >"$3" 2>&1 || true
    echo $(($(now_ms) - t0))
}
info "grpc-timeout reaches the server: DEADLINE_EXCEEDED after it"
el=$(slowcall "$P_G" 500m "$T/slow.h2")
assert_grep "$T/slow.h2" "recv \(stream_id=13\) grpc-status: 4$"
assert_grep "$T/slow.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>"
assert_no_grep "$T/slow.h2" "recv DATA frame .*stream_id=13>"
# The server's trailers-only DEADLINE_EXCEEDED, or proxyd's own when its
# copy of the 500 ms ran out first: one HEADERS frame either way.
reqline Slow 2 "(status=200 .* verdict=accept|status=504 grpc-status=4 .* verdict=error) .* proto=h2 stream=13$" >/dev/null
((el >= 400 && el < 4000)) || fail "grpc-timeout 500m answered after $el ms"
wait_grep "$T/peer.log" "cancelled Slow" 10 && [[ $(grep -c "^cancelled Slow$" "$T/peer.log") == 2 ]] ||
    fail "the server did not see the call end: $(cat "$T/peer.log")"

info "a response-timeout shorter than grpc-timeout: proxyd's DEADLINE_EXCEEDED, the server's stream cancelled"
el=$(slowcall "$P_T" 20S "$T/slow2.h2")
assert_grep "$T/slow2.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>"
assert_grep "$T/slow2.h2" "recv \(stream_id=13\) grpc-status: 4$"
assert_grep "$T/slow2.h2" "recv \(stream_id=13\) grpc-message: no response within response-timeout$"
((el >= 900 && el < 4000)) || fail "response-timeout 1s answered after $el ms"
reqline Slow 3 "status=504 grpc-status=4 .* verdict=error .* proto=h2 stream=13$" >/dev/null
wait_grep "$T/peer.log" "cancelled Slow" 10 && [[ $(grep -c "^cancelled Slow$" "$T/peer.log") == 3 ]] ||
    fail "the server did not see proxyd give up the call: $(cat "$T/peer.log")"

info "a refused method: PERMISSION_DENIED, the server never sees it"
expect "$(gcall forbidden)" "^status=PERMISSION_DENIED details='URL denied by policy'$" "refused method"
assert_log "http-request .* path=/test\.Peer/Forbidden status=403 grpc-status=7 .* verdict=deny .* proto=h2 stream=1$"
info "ok"
