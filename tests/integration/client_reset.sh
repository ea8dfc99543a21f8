#!/usr/bin/env bash
# Clients that reset (RST) their connection at every stage: right after the
# handshake, after sending a request, and mid-response, on the splice and the
# buffered paths. proxyd must log each session once, account for every one,
# keep serving, and (in the ASan build CI runs) touch no freed memory.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file big.bin $((4 * 1024 * 1024))
make_file small.html 512
start_nginx
free_port P_SPLICE
free_port P_BUF
write_proxyd_conf
write_service rsplice "$P_SPLICE" "$NGINX_PORT"
write_service rbuf "$P_BUF" "$NGINX_PORT" '<plug splice="no"/>'
start_proxyd

cat >"$T/rst.py" <<'PY'
import socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
linger = struct.pack("ii", 1, 0)
for i in range(n):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
    stage = i % 3
    if stage >= 1:
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    if stage == 2:
        s.recv(65536)          # the response is flowing
    s.close()                  # RST
PY
N=300
for p in "$P_SPLICE" "$P_BUF"; do
    timeout 60 python3 "$T/rst.py" "$p" "$N" || fail "reset client via port $p failed"
done
proc_alive "$PROXYD_PID" || fail "proxyd died under client resets"

r=$(http_get "http://127.0.0.1:$P_SPLICE/small.html" "$T/out")
assert_eq "$r" "0 200" "a normal request after the resets (splice)"
r=$(http_get "http://127.0.0.1:$P_BUF/small.html" "$T/out")
assert_eq "$r" "0 200" "a normal request after the resets (buffered)"

# every session ends and is logged exactly once
want=$((2 * N + 2))
deadline=$(($(date +%s) + 10))
until [[ $(metric_value proxyd_sessions_active '') == 0 ]]; do
    (($(date +%s) < deadline)) || fail "sessions still active: $(metric_value proxyd_sessions_active '')"
    sleep 0.1
done
assert_metric ge proxyd_sessions_accepted_total '' "$want"
wait_grep "$PROXYD_LOG" "#$want session-end" "$ASYNC_WAIT" || true
n=$(grep -c "session-end" "$PROXYD_LOG" || true)
dropped=$(metric_value proxyd_log_dropped_total '')
assert_eq "$((n + dropped))" "$want" "session-end lines + dropped lines"
info "ok: $n sessions logged, ends: $(grep -o 'end=[a-z-]*' "$PROXYD_LOG" | sort | uniq -c | tr '\n' ' ')"
