#!/usr/bin/env bash
# A client that says it closes after its request (HTTP/1.0 without
# keep-alive, or Connection: close) is not read while that request is in
# flight (no epoll_ctl for its socket), and is caught up with at the
# response's end, so what it did meanwhile ends the session as reading
# it would have: a half-close while the origin is slow still gets the
# whole response and the session ends by=client; a reset ends it
# by=client-fail; a client that does neither: by=server. Keep-alive
# clients are read throughout (a pipelined request is answered).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

mkdir -p "$T/raw"
# answered in two parts, 0.3 s apart: the client acts in between
printf 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n@@PAUSE@@hello' >"$T/raw/slow"
start_origin RAWO "$T/raw-origin.jsonl" raw "$T/raw"
free_port P
write_proxyd_conf
write_http_service cc "$P" "$RAWO" '<http/>'
start_proxyd

# end_line N: the Nth session-end line of service cc (1-based), waited for
end_line() {
    local i
    for ((i = 0; i < 50; i++)); do
        (($(grep -c 'session-end service=cc ' "$PROXYD_LOG" || true) >= $1)) && break
        sleep 0.1
    done
    grep 'session-end service=cc ' "$PROXYD_LOG" | sed -n "${1}p"
}

# --- HTTP/1.0, half-closed after the request
out=$(raw_send "$P" 'GET /slow HTTP/1.0\r\nHost: a\r\n\r\n' --half-close --out "$T/r1")
info "1.0 half-close: $out"
[[ $out == "statuses=200 closed=yes reset=no "* ]] || fail "HTTP/1.0 half-closed: $out"
[[ $(tail -c 5 "$T/r1") == hello ]] || fail "HTTP/1.0 half-closed: the body's second part is missing: $(od -c "$T/r1" | tail -3)"
line=$(end_line 1)
[[ $line == *" by=client "*"end=client-closed"* ]] || fail "HTTP/1.0 half-closed: want by=client end=client-closed: $line"

# --- HTTP/1.1 Connection: close, half-closed
out=$(raw_send "$P" 'GET /slow HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' --half-close)
info "1.1 close half-close: $out"
[[ $out == "statuses=200 closed=yes reset=no "* ]] || fail "Connection: close, half-closed: $out"
line=$(end_line 2)
[[ $line == *" by=client "*"end=client-closed"* ]] || fail "Connection: close, half-closed: want by=client: $line"

# --- HTTP/1.0, the client waits: the server side ends it
out=$(raw_send "$P" 'GET /slow HTTP/1.0\r\nHost: a\r\n\r\n')
info "1.0: $out"
[[ $out == "statuses=200 closed=yes reset=no "* ]] || fail "HTTP/1.0: $out"
line=$(end_line 3)
[[ $line == *" by=server "*"end=server-closed"* ]] || fail "HTTP/1.0: want by=server end=server-closed: $line"

# --- HTTP/1.0, the client resets while the response is pending
python3 - "$P" <<'PY'
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /slow HTTP/1.0\r\nHost: a\r\n\r\n")
time.sleep(0.1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
PY
line=$(end_line 4)
[[ $line == *" by=client-fail "*"end=client-error: "* ]] || fail "HTTP/1.0 reset: want by=client-fail: $line"
info "reset: ${line##*end=}"

# --- keep-alive: a request pipelined behind the first is answered
out=$(raw_send "$P" 'GET /slow HTTP/1.1\r\nHost: a\r\n\r\nGET /slow HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
info "pipelined: $out"
[[ $out == "statuses=200,200 closed=yes reset=no "* ]] || fail "pipelined keep-alive requests: $out"
info "ok"
