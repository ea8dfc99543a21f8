#!/usr/bin/env bash
# gRPC calls proxyd refuses or cannot carry get a gRPC status, not a
# transport error (issue 36): Debian's python3-grpcio client through an
# h2c="yes" service sees PERMISSION_DENIED for a method a url rule denies
# (<url path="/test.Peer/Forbidden" action="deny"/>), UNAVAILABLE when the
# server is down, RESOURCE_EXHAUSTED over <source-limits requests=>, each
# with proxyd's own grpc-message (a client reading :status 403/502/429
# says "Received http2 header with status" instead). On the wire (nghttp
# -v) the answer is one HEADERS frame with END_STREAM, 200, content-type
# application/grpc, grpc-status; no DATA. grpc-timeout (and the service's
# response-timeout, whichever is shorter) bounds the wait for a server
# that never answers: DEADLINE_EXCEEDED (grpc-status 4); a malformed
# grpc-timeout is refused with INTERNAL (13, gRPC's status for a 400).
# The http-request lines keep the HTTP status they would have had and add
# grpc-status=. First the harness itself (grpc_peer.py) against its own
# server, without proxyd.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nghttp
PY=/usr/bin/python3
PEER=$LIB_DIR/grpc_peer.py
[[ -x $PY ]] && $PY -c 'import grpc' 2>/dev/null ||
    skip "python3-grpcio missing (scripts/deps)"
setup

# gcall TARGET CASE [args]: the client's result line
gcall() {
    local target=$1
    shift
    timeout 30 $PY "$PEER" client "$target" "$@" 2>>"$T/client.err" ||
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

info "the harness against its own server, no proxyd"
D=127.0.0.1:$GRPC
expect "$(gcall $D unary --data ping)" "^status=OK echo=ping initial=hello trailing=bye echo_len=4$" "unary"
expect "$(gcall $D server_stream --n 7 --size 100)" "^status=OK count=7 bytes=700$" "server stream"
expect "$(gcall $D client_stream --n 9 --size 333)" "^status=OK .* reply='count=9 bytes=2997 sha256=[0-9a-f]{64}' match=yes$" "client stream"
expect "$(gcall $D bidi --n 6)" "^status=OK count=6 inorder=yes$" "bidi"
expect "$(gcall $D big --total 3000000)" "^status=OK bytes=3000000 sha256=[0-9a-f]{64} match=yes$" "big"
expect "$(gcall $D reset --n 3)" "^status=ABORTED count=3 details='reset by the server'$" "reset"
expect "$(gcall $D slow --delay 5 --timeout 0.3)" "^status=DEADLINE_EXCEEDED " "deadline"
wait_grep "$T/peer.log" "^cancelled Slow$" 5 || fail "the server did not see the call end: $(cat "$T/peer.log")"
expect "$(gcall $D big_cancel --n 2)" "^status=CANCELLED count=2$" "cancel"
wait_grep "$T/peer.log" "^cancelled Big$" 5 || fail "the server did not see the cancel: $(cat "$T/peer.log")"

# A server that takes requests and never answers.
start_py_server MUTE <<'EOF'
def handle(c):
    c.settimeout(20)
    while c.recv(65536):
        pass
EOF
# One that sends a gRPC response head, then nothing.
start_py_server STALL <<'EOF2'
def handle(c):
    c.settimeout(20)
    c.recv(65536)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    while c.recv(65536):
        pass
EOF2
free_port DOWN
free_port P_S
free_port P_G
free_port P_D
free_port P_L
free_port P_M
free_port P_R
write_proxyd_conf
write_http_service gx "$P_G" "$GRPC" '<http h2c="yes">
  <url path="/test.Peer/Forbidden" action="deny"/>
</http>'
write_http_service gdown "$P_D" "$DOWN" '<http h2c="yes"/>'
write_http_service glim "$P_L" "$DOWN" '<http h2c="yes"/>
  <source-limits requests="1/m"/>'
write_http_service gmute "$P_M" "$MUTE" '<http h2c="yes">
  <limits response-timeout="30s"/>
</http>'
write_http_service gmute1 "$P_R" "$MUTE" '<http h2c="yes">
  <limits response-timeout="1s"/>
</http>'
write_http_service gstall "$P_S" "$STALL" '<http h2c="yes"/>'
start_proxyd

info "a method a url rule denies: PERMISSION_DENIED with proxyd's message"
expect "$(gcall 127.0.0.1:$P_G forbidden)" "^status=PERMISSION_DENIED details='[^']+'$" "denied method"
r=$(gcall 127.0.0.1:$P_G forbidden)
[[ $r != *"Received http2 header"* ]] || fail "a transport error, not a gRPC status: $r"
assert_log "http-request .* method=POST host=[^ ]+ path=/test\.Peer/Forbidden status=403 grpc-status=7 .* verdict=deny .* rule=gx\.xml:[0-9]+ proto=h2 stream=1$"

info "the server is down: UNAVAILABLE"
r=$(gcall 127.0.0.1:$P_D unary)
expect "$r" "^status=UNAVAILABLE details='cannot connect to the server'$" "server down"
assert_log "http-request .* path=/test\.Peer/Unary status=502 grpc-status=14 .* proto=h2 stream=1$"

info "over <source-limits requests=\"1/m\">: RESOURCE_EXHAUSTED"
expect "$(gcall 127.0.0.1:$P_L unary)" "^status=UNAVAILABLE " "first call (server down)"
expect "$(gcall 127.0.0.1:$P_L unary)" "^status=RESOURCE_EXHAUSTED details='too many requests from this source'$" "second call"
assert_log "http-request .* path=/test\.Peer/Unary status=429 grpc-status=8 .* verdict=deny .* proto=h2 stream=1$"

# grpc_h2 PORT METHOD OUT [header...]: one gRPC-shaped POST by nghttp -v
# (the frames as they come); a 5-byte empty message as the body.
grpc_h2() {
    local port=$1 method=$2 out=$3 h=() x
    shift 3
    for x in "$@"; do h+=(-H "$x"); done
    printf '\0\0\0\0\0' >"$T/msg"
    timeout 20 nghttp -v -d "$T/msg" -H 'content-type: application/grpc' \
        -H 'te: trailers' "${h[@]}" "http://127.0.0.1:$port/test.Peer/$method" \
        >"$out" 2>&1 || true
}

info "on the wire: one HEADERS frame with END_STREAM, no DATA"
grpc_h2 "$P_G" Forbidden "$T/deny.h2"
grpc_h2 "$P_D" Unary "$T/down.h2"
for f in deny:7 down:14; do
    assert_grep "$T/${f%:*}.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>"
    assert_grep "$T/${f%:*}.h2" "recv \(stream_id=13\) :status: 200$"
    assert_grep "$T/${f%:*}.h2" "recv \(stream_id=13\) content-type: application/grpc$"
    assert_grep "$T/${f%:*}.h2" "recv \(stream_id=13\) grpc-status: ${f#*:}$"
    assert_grep "$T/${f%:*}.h2" "recv \(stream_id=13\) grpc-message: [^ ]"
    assert_no_grep "$T/${f%:*}.h2" "recv DATA frame"
done
assert_grep "$T/down.h2" "recv \(stream_id=13\) grpc-message: cannot connect to the server$"

info "grpc-timeout shorter than response-timeout: DEADLINE_EXCEEDED after it"
t0=$(now_ms)
grpc_h2 "$P_M" Unary "$T/gt.h2" 'grpc-timeout: 700m'
el=$(($(now_ms) - t0))
assert_grep "$T/gt.h2" "recv HEADERS frame <length=[0-9]+, flags=0x05, stream_id=13>"
assert_grep "$T/gt.h2" "recv \(stream_id=13\) grpc-status: 4$"
assert_grep "$T/gt.h2" "recv \(stream_id=13\) grpc-message: no response within grpc-timeout$"
assert_no_grep "$T/gt.h2" "recv DATA frame"
((el >= 600 && el < 10000)) || fail "grpc-timeout 700m answered after $el ms"
assert_log "http-request .* path=/test\.Peer/Unary status=504 grpc-status=4 .* verdict=error .* proto=h2 stream=13$"

info "response-timeout shorter than grpc-timeout: it wins"
t0=$(now_ms)
grpc_h2 "$P_R" Unary "$T/rt.h2" 'grpc-timeout: 20S'
el=$(($(now_ms) - t0))
assert_grep "$T/rt.h2" "recv \(stream_id=13\) grpc-status: 4$"
assert_grep "$T/rt.h2" "recv \(stream_id=13\) grpc-message: no response within response-timeout$"
((el >= 900 && el < 10000)) || fail "response-timeout 1s answered after $el ms"

info "grpc-timeout after the response head: the stream is reset (CANCEL)"
t0=$(now_ms)
grpc_h2 "$P_S" Unary "$T/st.h2" 'grpc-timeout: 500m'
el=$(($(now_ms) - t0))
assert_grep "$T/st.h2" "recv HEADERS frame <length=[0-9]+, flags=0x04, stream_id=13>"
assert_grep "$T/st.h2" "recv RST_STREAM frame <length=4, flags=0x00, stream_id=13>"
assert_grep "$T/st.h2" "error_code=CANCEL\(0x08\)"
((el >= 400 && el < 10000)) || fail "grpc-timeout 500m cut the stream after $el ms"
# The stream's transaction is cut, its connection goes on: its line says
# so (the server request stopped with it), no session ends.
assert_log "http-request .* status=200 .* verdict=(error|reset) .* proto=h2 stream=13$"
assert_no_grep "$PROXYD_LOG" "session-end service=gstall .* end=error: grpc-timeout"

info "the python client's own deadline through proxyd: DEADLINE_EXCEEDED"
expect "$(gcall 127.0.0.1:$P_M unary --timeout 1)" "^status=DEADLINE_EXCEEDED " "client deadline"

info "a malformed grpc-timeout: INTERNAL (gRPC's status for a 400)"
for bad in 'grpc-timeout: 123456789S' 'grpc-timeout: 10x' 'grpc-timeout: S' 'grpc-timeout: 1.5S'; do
    grpc_h2 "$P_M" Unary "$T/bad.h2" "$bad"
    assert_grep "$T/bad.h2" "recv \(stream_id=13\) grpc-status: 13$" "$bad"
    assert_grep "$T/bad.h2" "recv \(stream_id=13\) grpc-message: malformed grpc-timeout$" "$bad"
done
assert_log "http-request .* path=/test\.Peer/Unary status=400 grpc-status=13 .* verdict=deny .* proto=h2 stream=13$"

info "a request that is not gRPC is refused as before (an HTML 403)"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -o "$T/page" -w '%{http_code}' \
    -X POST "http://127.0.0.1:$P_G/test.Peer/Forbidden")
assert_eq "$code" "403" "plain POST to the denied path"
assert_grep "$T/page" "<h1>403 Forbidden</h1>"
info "ok"
