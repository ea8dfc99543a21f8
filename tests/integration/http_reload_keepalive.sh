#!/usr/bin/env bash
# A reload that makes an http service stricter applies to keep-alive
# connections opened before it: no request is judged by the old policy once
# the new one is in force (docs/CONFIG.md, Reload). An idle keep-alive
# connection is closed at the reload (one that served no request yet is
# not: http_reload_fresh); one with a response in flight
# gets that response whole and is closed after it, so its next request
# cannot be served under the old policy. New connections are judged by the
# new policy (403 for the now denied path).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

make_file big.bin 16M
echo "the secret" >"$T/www/secret.txt"
start_nginx
free_port P
write_proxyd_conf
# request-timeout (which also closes idle keep-alive connections) far
# beyond the test's waits: a close seen here is the reload's
write_http_service web "$P" "$NGINX_PORT" '<http><limits request-timeout="5m"/></http>'
start_proxyd

cat >"$T/client.py" <<'PY'
import socket, sys, time, os
port, go, reloaded = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def wait_file(path):
    deadline = time.time() + 20
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit("timed out waiting for " + path)
        time.sleep(0.05)

def response(s, buf=b""):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        d = s.recv(65536)
        if not d:
            return head.split(b" ")[1].decode() + " cut", b""
        rest += d
    return head.split(b" ")[1].decode(), rest[length:]

def get(s, path):
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")

def closed(s):
    s.settimeout(15)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True

idle = socket.create_connection(("127.0.0.1", port))
get(idle, b"/secret.txt")
print("idle first:", response(idle)[0], flush=True)
busy = socket.create_connection(("127.0.0.1", port))
get(busy, b"/big.bin")
first = busy.recv(1000)
print("ready", flush=True)
open(go, "w").close()
wait_file(reloaded)
# The idle one was closed at the reload, without a request in flight.
print("idle closed:", closed(idle), flush=True)
st, left = response(busy, first)
print("busy response:", st, flush=True)
# The response in flight ended the connection: the next request on it is
# never served under the old policy.
try:
    get(busy, b"/secret.txt")
    st2, _ = response(busy, left)
except (ConnectionResetError, BrokenPipeError):
    st2 = None
print("busy next:", st2, flush=True)
PY

python3 "$T/client.py" "$P" "$T/go" "$T/reloaded" >"$T/client.out" 2>&1 &
CLIENT=$!
track_pid "$CLIENT"
wait_grep "$T/client.out" '^ready' 20 || fail "client not ready: $(cat "$T/client.out")"
assert_grep "$T/client.out" '^idle first: 200$' "the secret is served before the reload"

write_http_service web "$P" "$NGINX_PORT" '<http>
    <limits request-timeout="5m"/>
    <url path="/secret.txt" action="deny" status="403"/>
  </http>'
kill -HUP "$PROXYD_PID"
assert_log 'reload done'
touch "$T/reloaded"
wait_exit "$CLIENT" 30 || fail "client did not finish: $(cat "$T/client.out")"
cat "$T/client.out" | sed "s/^/[$TEST_NAME] client: /"
assert_grep "$T/client.out" '^idle closed: True$' "an idle keep-alive connection is closed at the reload"
assert_grep "$T/client.out" '^busy response: 200$' "the response in flight at the reload arrives whole"
assert_grep "$T/client.out" '^busy next: None$' "no request after the reload on a connection opened before it"
assert_log 'end=reload: idle keep-alive connection closed'
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/secret.txt")
assert_eq "$code" 403 "a new connection is judged by the new policy"
n=$(grep -c 'path=/secret.txt status=200' "$PROXYD_LOG" || true)
assert_eq "$n" 1 "the secret was served once (before the reload) and never after"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
