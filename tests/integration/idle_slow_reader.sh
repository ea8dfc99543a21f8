#!/usr/bin/env bash
# The idle timer must count bytes the kernel moves, not only bytes proxyd
# moves: a slow reader draining what proxyd already queued (in a pipe, an
# evbuffer or a socket buffer) is not idle. idle-timeout is 2s here (a reader
# stalled by the box for 2 s would be idle); the reader takes 6 s at 256 KB/s
# and must not be cut off on either path.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

cat >"$T/reader.py" <<'PY'
import socket, sys, time
port, rate, dur = int(sys.argv[1]), 256 * 1024, 6.0
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
s.connect(("127.0.0.1", port))
t0, got = time.time(), 0
while time.time() - t0 < dur:
    want = rate * (time.time() - t0) - got
    if want < 1:
        time.sleep(0.01)
        continue
    try:
        d = s.recv(min(int(want), 65536))
    except ConnectionResetError:
        print("RESET after %.1fs" % (time.time() - t0))
        sys.exit()
    if not d:
        print("EOF after %.1fs" % (time.time() - t0))
        sys.exit()
    got += len(d)
print("flowing")
PY

# far more than the reader takes; the handler ends when the reader leaves
start_py_server SRV_PORT <<'PY'
def handle(c):
    c.sendall(b"y" * (64 << 20))
PY
free_port P_SPLICE
free_port P_BUF
write_proxyd_conf 'idle-timeout="2s" buffer="16m"'
write_service isplice "$P_SPLICE" "$SRV_PORT"
write_service ibuf "$P_BUF" "$SRV_PORT" '<plug splice="no"/>'
start_proxyd

for p in "$P_SPLICE" "$P_BUF"; do
    got=$(timeout 20 python3 "$T/reader.py" "$p") || fail "reader via port $p failed"
    assert_eq "$got" "flowing" "slow reader via port $p (idle-timeout 2s)"
done
[[ $(metric_value proxyd_idle_timeouts_total '') == 0 ]] ||
    fail "an idle timeout fired on a session that was moving bytes"
info "ok"
