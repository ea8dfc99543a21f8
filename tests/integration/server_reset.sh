#!/usr/bin/env bash
# A server that resets mid-stream: the client must see a reset too, not a
# clean end of stream (which an unframed protocol would take for a complete
# response). A server that finishes normally still gives a clean EOF.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

cat >"$T/client.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode())
time.sleep(0.5)              # let the server finish (or reset) first
n = 0
try:
    while True:
        d = s.recv(4096)
        if not d:
            print("EOF", n)
            break
        n += len(d)
except ConnectionResetError:
    print("RESET", n)
PY

# sends 300 kB, then closes normally ("fin") or with an RST ("rst")
start_py_server SRV_PORT <<'PY'
def handle(c):
    mode = c.recv(10)
    c.sendall(b"x" * 300000)
    if mode.startswith(b"rst"):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
PY
free_port P_SPLICE
free_port P_BUF
write_proxyd_conf
write_service ssplice "$P_SPLICE" "$SRV_PORT"
write_service sbuf "$P_BUF" "$SRV_PORT" '<plug splice="no"/>'
start_proxyd

for p in "$P_SPLICE" "$P_BUF"; do
    got=$(timeout 20 python3 "$T/client.py" "$p" rst) || fail "client via port $p failed"
    [[ $got == RESET* ]] || fail "server reset via port $p reached the client as '$got', not as a reset"
    got=$(timeout 20 python3 "$T/client.py" "$p" fin) || fail "client via port $p failed"
    assert_eq "$got" "EOF 300000" "a server that finishes normally, via port $p"
done
assert_log "session-end service=ssplice .*end=server-error: Connection reset by peer"
assert_log "session-end service=sbuf .*end=server-error: Connection reset by peer"
info "ok"
