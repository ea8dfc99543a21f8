#!/usr/bin/env bash
# Server-speaks-first protocols (FTP, SMTP, SSH): the greeting must reach a
# client that sends nothing until it has read it, through the splice and the
# buffered paths; then a command and its answer go through.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

cat >"$T/client.py" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
greeting = s.recv(100)
s.sendall(b"QUIT\r\n")
answer = b""
while True:
    d = s.recv(100)
    if not d:
        break
    answer += d
print(repr(greeting), repr(answer))
PY

start_py_server SRV_PORT <<'PY'
def handle(c):
    c.settimeout(10)
    c.sendall(b"220 greeting\r\n")
    cmd = c.recv(100)
    c.sendall(b"221 got " + cmd)
PY
free_port P_SPLICE
free_port P_BUF
write_proxyd_conf
write_service gsplice "$P_SPLICE" "$SRV_PORT"
write_service gbuf "$P_BUF" "$SRV_PORT" '<plug splice="no"/>'
start_proxyd

for p in "$P_SPLICE" "$P_BUF"; do
    for i in 1 2 3; do
        got=$(timeout 10 python3 "$T/client.py" "$p") || fail "client via port $p failed (round $i)"
        assert_eq "$got" "b'220 greeting\\r\\n' b'221 got QUIT\\r\\n'" "exchange via port $p, round $i"
    done
done
assert_log "session-end service=gsplice .*to-server=6 to-client=28 .*end=server-closed"
assert_log "session-end service=gbuf .*to-server=6 to-client=28 .*end=server-closed"
info "ok"
