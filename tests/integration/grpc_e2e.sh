#!/usr/bin/env bash
# gRPC end to end through proxyd (issue 36): Debian's python3-grpcio client
# (grpc_peer.py) over h2c to an <http h2c="yes" server-h2="yes"> service in
# front of the python3-grpcio server, so HTTP/2 both sides: a unary call
# whose initial and trailing metadata reach the client (trailers="pass"),
# server-streaming, client-streaming (sha256 of what came), bidirectional
# in lock step (each echo seen before the next message goes), a 100 MB
# stream (sha256; proxyd's peak RSS grows far less than the stream: flow
# control end to end), a call the client cancels (the server sees it
# cancelled), one the server aborts (the client gets its status through
# the trailers), grpc-timeout reaching the server, a response-timeout
# shorter than it (DEADLINE_EXCEEDED from proxyd, the server's stream
# cancelled), a server that resets a stream with RST_STREAM CANCEL (a
# bare python3-h2 server: the client sees CANCELLED, the server's code, not
# an INTERNAL error), a deadline (DEADLINE_EXCEEDED; the server sees the call
# end), a method a url rule refuses (PERMISSION_DENIED, never reaching the
# server). Each call is one http-request line with proto=h2.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nghttp
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

info "server streaming, client streaming, bidirectional"
expect "$(gcall server_stream --n 200 --size 5000)" "^status=OK count=200 bytes=1000000$" "server stream"
expect "$(gcall client_stream --n 100 --size 20000)" \
    "^status=OK .* reply='count=100 bytes=2000000 sha256=[0-9a-f]{64}' match=yes$" "client stream"
expect "$(gcall bidi --n 50)" "^status=OK count=50 inorder=yes$" "bidi"

info "a $BIG-byte stream: sha256, proxyd's memory bounded"
base=$(vm_kb "$PROXYD_PID" VmRSS)
expect "$(gcall big --total $BIG)" "^status=OK bytes=$BIG sha256=[0-9a-f]{64} match=yes$" "big stream"
peak=$(vm_kb "$PROXYD_PID" VmHWM)
info "proxyd RSS before $base kB, peak $peak kB"
assert_lt $((peak - base)) 32768 "proxyd's peak RSS growth (kB) over a $BIG-byte stream"

info "the client cancels a stream: the server sees the call cancelled"
expect "$(gcall big_cancel --n 3 --total 1000000000)" "^status=CANCELLED count=3$" "client cancel"
wait_grep "$T/peer.log" "^cancelled Big$" 10 || fail "the server did not see the cancel: $(cat "$T/peer.log")"
assert_log "http-request .* path=/test\.Peer/Big status=200 .* verdict=reset .* reset=CANCEL .*proto=h2 stream=1$"

info "the server aborts a stream: the client gets its status"
expect "$(gcall reset --n 4)" "^status=ABORTED count=4 details='reset by the server'$" "server abort"

info "the server resets a stream (CANCEL): the client sees that code"
expect "$(P_G=$P_R gcall reset --n 1)" "^status=CANCELLED .*details='Received RST_STREAM with error code 8'$" "server RST_STREAM"
assert_log "session-end service=grst .* by=server-fail phase=data end=server-reset: CANCEL$"

info "a deadline: DEADLINE_EXCEEDED, and the call ends at the server"
expect "$(gcall slow --delay 10 --timeout 1)" "^status=DEADLINE_EXCEEDED " "deadline"
wait_grep "$T/peer.log" "^cancelled Slow$" 10 || fail "the server did not see the deadline: $(cat "$T/peer.log")"

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
((el >= 400 && el < 4000)) || fail "grpc-timeout 500m answered after $el ms"
wait_grep "$T/peer.log" "cancelled Slow" 10 && [[ $(grep -c "^cancelled Slow$" "$T/peer.log") == 2 ]] ||
    fail "the server did not see the call end: $(cat "$T/peer.log")"

info "a response-timeout shorter than grpc-timeout: proxyd's DEADLINE_EXCEEDED, the server's stream cancelled"
el=$(slowcall "$P_T" 20S "$T/slow2.h2")
assert_grep "$T/slow2.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>"
assert_grep "$T/slow2.h2" "recv \(stream_id=13\) grpc-status: 4$"
assert_grep "$T/slow2.h2" "recv \(stream_id=13\) grpc-message: no response within response-timeout$"
((el >= 900 && el < 4000)) || fail "response-timeout 1s answered after $el ms"
assert_log "http-request .* path=/test\.Peer/Slow status=504 grpc-status=4 .* verdict=error .* proto=h2 stream=13$"
wait_grep "$T/peer.log" "cancelled Slow" 10 && [[ $(grep -c "^cancelled Slow$" "$T/peer.log") == 3 ]] ||
    fail "the server did not see proxyd give up the call: $(cat "$T/peer.log")"

info "a refused method: PERMISSION_DENIED, the server never sees it"
expect "$(gcall forbidden)" "^status=PERMISSION_DENIED details='URL denied by policy'$" "refused method"
assert_log "http-request .* path=/test\.Peer/Forbidden status=403 grpc-status=7 .* verdict=deny .* proto=h2 stream=1$"
info "ok"
