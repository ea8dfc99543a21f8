#!/usr/bin/env bash
# TCP urgent data (MSG_OOB): splice() stops at the urgent mark, so a relay
# that only splices stalls there and spins on a socket epoll keeps reporting
# readable. Both relay paths must deliver the normal bytes around the urgent
# byte (which, like any reader without SO_OOBINLINE, they drop), and the
# worker must not burn CPU while the session stays open.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

cat >"$T/urgent.py" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"before-")
time.sleep(0.2)
s.send(b"!", socket.MSG_OOB)
time.sleep(0.2)
s.sendall(b"-after")
time.sleep(float(sys.argv[2]))     # hold the session open: a spin shows here
s.shutdown(socket.SHUT_WR)
answer = b""
while True:
    d = s.recv(100)
    if not d:
        break
    answer += d
print(answer.decode())
PY

start_py_server SINK_PORT <<'PY'
def handle(c):
    c.settimeout(20)
    data = b""
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    c.sendall(b"got " + data)
PY
free_port P_SPLICE
free_port P_BUF
write_proxyd_conf
write_service usplice "$P_SPLICE" "$SINK_PORT"
write_service ubuf "$P_BUF" "$SINK_PORT" '<plug splice="no"/>'
start_proxyd

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PROXYD_PID/stat"; }
for p in "$P_SPLICE" "$P_BUF"; do
    before=$(cpu_ticks)
    got=$(timeout 20 python3 "$T/urgent.py" "$p" 1.5) || fail "client via port $p failed"
    after=$(cpu_ticks)
    assert_eq "$got" "got before--after" "bytes around the urgent byte via port $p"
    # a spinning worker burns ~100 ticks a second; 2 s of session here
    assert_lt "$((after - before))" 40 "proxyd CPU ticks while holding an urgent-data session (port $p)"
done
assert_log "session-end service=usplice .*to-server=13 .*end=client-closed"
assert_log "session-end service=ubuf .*to-server=13 .*end=client-closed"
info "ok"
