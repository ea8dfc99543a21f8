#!/usr/bin/env bash
# http analyser, forward mode and tunnels: absolute-URI GET through proxyd
# to nginx (curl -x), a host name answered 502 (no resolver yet), an
# origin-form request refused; CONNECT to an allowed port carries bytes
# both ways (echo server, and curl -p through to nginx), CONNECT to another
# port is denied and never connected; an Upgrade: websocket request reaches
# a python origin that answers 101 and echoes bytes when the policy accepts
# the protocol, and the Upgrade is not forwarded when it does not.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
start_py_server ECHO <<'EOF'
def handle(c):
    c.settimeout(10)
    while True:
        d = c.recv(65536)
        if not d:
            return
        c.sendall(d)
EOF
free_port DENIED_PORT
WS_LOG=$T/ws.jsonl
start_origin WS "$WS_LOG" ws
free_port PF
free_port PW
free_port PN
write_proxyd_conf
# one worker: the forward GET parks its nginx connection in the pool the
# later CONNECT to the same place would find
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service fwd "$PF" 0 "
<http>
  <request method=\"GET HEAD POST\" action=\"accept\"/>
  <request method=\"CONNECT\" ports=\"$ECHO $NGINX_PORT\" action=\"accept\"/>
  <request method=\"*\" action=\"deny\" status=\"405\"/>
</http>" forward
write_http_service ws "$PW" "$WS" '<http><upgrade protocols="websocket" action="accept"/></http>'
write_http_service nows "$PN" "$WS" '<http/>'
start_proxyd
tun0=$(http_counter tunnels)
not_grep() { ! grep -q -- "$1" "$2"; }

# --- absolute-URI requests
code=$(curl -sS --max-time 10 -o "$T/a" -w '%{http_code}' -x "http://127.0.0.1:$PF" "http://127.0.0.1:$NGINX_PORT/a.txt")
assert_eq "$code" 200 "forward GET"
assert_eq "$(cat "$T/a")" alpha "forward GET body"
assert_log "http-request .* method=GET host=127\.0\.0\.1 path=/a\.txt status=200 .* server=127\.0\.0\.1:$NGINX_PORT upstream=new"
assert_grep "$T/nginx/logs/access.log" '"GET /a\.txt HTTP/1\.1" 200' "nginx got an origin-form request"
# names: /etc/hosts (localhost is 127.0.0.1 there), and one that cannot
# resolve (.invalid, RFC 6761): 502
if grep -Eq '^127\.0\.0\.1[[:space:]].*\blocalhost\b' /etc/hosts; then
    code=$(curl -sS --max-time 10 -o "$T/aname" -w '%{http_code}' -x "http://127.0.0.1:$PF" "http://localhost:$NGINX_PORT/a.txt" || true)
    check [ "$code" = 200 ] "forward GET to localhost (from /etc/hosts): got $code"
    check [ "$(cat "$T/aname" 2>/dev/null)" = alpha ] "forward GET to localhost: body"
    check wait_grep "$PROXYD_LOG" "http-request .* method=GET host=localhost path=/a\.txt status=200 " "$ASYNC_WAIT" "http-request line for localhost"
fi
t0=$(now_ms)
code=$(curl -sS --max-time 40 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$PF" "http://no-such-host.invalid:$NGINX_PORT/a.txt" || true)
info "failed lookup answered in $(($(now_ms) - t0)) ms"
check [ "$code" = 502 ] "forward GET to a name that does not resolve: got $code"
check wait_grep "$PROXYD_LOG" 'http-error status=502 ' "$ASYNC_WAIT" "http-error line for the failed lookup"
# Request text on proxyd's own error page is text, never markup: a name
# with markup in it is no uri-host (400, never looked up), and the
# sub-delims a reg-name may have come back escaped.
r=$(raw_send "$PF" "GET http://x<script>y.invalid:$NGINX_PORT/ HTTP/1.1\r\nHost: x<script>y.invalid:$NGINX_PORT\r\n\r\n" --timeout 40 --out "$T/xss")
check grep -q -- '^HTTP/1.1 400 ' "$T/xss" "a host with markup is refused: $r"
check not_grep '<script>' "$T/xss" "the error page has no markup from the request"
r=$(raw_send "$PF" "GET http://x&y'z.invalid:$NGINX_PORT/ HTTP/1.1\r\nHost: x&y'z.invalid:$NGINX_PORT\r\n\r\n" --timeout 40 --out "$T/xss2")
check grep -q -- 'x&amp;y&#39;z\.invalid' "$T/xss2" "the error page escapes the request's host: $r, body $(head -c 400 "$T/xss2" 2>/dev/null)"
check [ "$(grep -c '<script>' "$T/xss" 2>/dev/null)" = 0 ] "the error page holds raw markup from the request"
r=$(raw_send "$PF" "GET /a.txt HTTP/1.1\r\nHost: 127.0.0.1:$NGINX_PORT\r\n\r\n")
[[ $r == "statuses=400 closed=yes"* ]] || fail "origin-form request in forward mode: $r"
assert_log 'http-error status=400 reason="forward mode needs an absolute URI"'

# --- CONNECT to the echo server
python3 - "$PF" "$ECHO" >"$T/connect.out" 2>&1 <<'EOF' || fail "CONNECT echo: $(cat "$T/connect.out")"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % (sys.argv[2].encode(), sys.argv[2].encode()))
got = b""
while b"\r\n\r\n" not in got:
    d = s.recv(4096)
    if not d:
        break
    got += d
print(repr(got))
assert got.startswith(b"HTTP/1.1 200 "), "no 200 to CONNECT"
payload = bytes(range(256)) * 400 + b"GET / HTTP/1.1\r\n\r\n"   # not HTTP: passes as is
s.sendall(payload)
back = got[got.index(b"\r\n\r\n") + 4:]
while len(back) < len(payload):
    d = s.recv(65536)
    if not d:
        break
    back += d
assert back == payload, "echo mismatch: %d of %d bytes" % (len(back), len(payload))
print("echoed", len(back))
EOF
assert_log "http-request .* method=CONNECT host=127\.0\.0\.1 .* status=200 "
assert_metric ge proxyd_analyser_events_total 'event="tunnels"' $((tun0 + 1))

# --- curl -p: CONNECT, then HTTP inside the tunnel to nginx
# (nginx's connection from the forward GET above is in the pool: a CONNECT
# must open its own, and answer 200 once it is up)
code=$(curl -sS --max-time 5 -o "$T/p" -w '%{http_code}' -p -x "http://127.0.0.1:$PF" "http://127.0.0.1:$NGINX_PORT/a.txt" 2>>"$T/curl.err" || true)
check [ "$code" = 200 ] "GET through a CONNECT tunnel to a destination with a pooled connection: got '$code'"
check [ "$(cat "$T/p" 2>/dev/null)" = alpha ] "body through the tunnel"

# --- CONNECT by name (/etc/hosts)
if grep -Eq '^127\.0\.0\.1[[:space:]].*\blocalhost\b' /etc/hosts; then
    code=$(curl -sS --max-time 10 -o "$T/pn" -w '%{http_code}' -p -x "http://127.0.0.1:$PF" "http://localhost:$NGINX_PORT/a.txt" 2>>"$T/curl.err" || true)
    check [ "$code" = 200 ] "GET through a CONNECT tunnel to localhost: got '$code'"
fi

# --- CONNECT to a port the policy does not list
r=$(raw_send "$PF" "CONNECT 127.0.0.1:$DENIED_PORT HTTP/1.1\r\nHost: 127.0.0.1:$DENIED_PORT\r\n\r\nhello")
[[ $r == "statuses=405 closed=yes"* ]] || fail "CONNECT to a denied port: $r"
assert_log "http-request .* method=CONNECT host=127\.0\.0\.1 .* status=405 .* verdict=deny"
r=$(raw_send "$PF" "CONNECT no-such-host.invalid:$ECHO HTTP/1.1\r\nHost: no-such-host.invalid:$ECHO\r\n\r\n" --timeout 40)
check [ "${r%% bytes=*}" = "statuses=502 closed=yes reset=no" ] "CONNECT to a name that does not resolve: $r"

# --- Upgrade: websocket, accepted
python3 - "$PW" >"$T/ws.out" 2>&1 <<'EOF' || fail "websocket upgrade: $(cat "$T/ws.out")"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    d = s.recv(4096)
    if not d:
        break
    got += d
print(repr(got))
assert got.startswith(b"HTTP/1.1 101 "), "no 101"
assert b"\r\nupgrade: websocket\r\n" in got.lower(), "no Upgrade header on the 101"
for msg in (b"\x81\x05hello", b"\x00\xff\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", bytes(range(256)) * 100):
    s.sendall(msg)
    back = b""
    while len(back) < len(msg):
        d = s.recv(65536)
        if not d:
            break
        back += d
    assert back == msg, "echo mismatch"
print("ok")
EOF
assert_log "http-request .* path=/chat status=101 "
assert_metric ge proxyd_analyser_events_total 'event="tunnels"' $((tun0 + 3))
grep '"/chat"' "$WS_LOG" | grep -i '"upgrade", "websocket"' >/dev/null || fail "origin did not get the Upgrade header"

# --- Upgrade not accepted by the policy: not forwarded, no 101
r=$(raw_send "$PN" "GET /nochat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" --timeout 2)
info "upgrade without policy: $r"
[[ $r == statuses=101* ]] && fail "a 101 went through without <upgrade>"
[[ $r == statuses=200* || $r == statuses=502* ]] || fail "unexpected answer to a refused Upgrade: $r"
grep '"/nochat"' "$WS_LOG" | grep -i '"upgrade"' >/dev/null && fail "the Upgrade header reached the origin"
# a different protocol than the accepted one
r=$(raw_send "$PW" "GET /h2c HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n" --timeout 2)
[[ $r == statuses=101* ]] && fail "Upgrade: h2c went through"
http_done
