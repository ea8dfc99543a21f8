#!/usr/bin/env bash
# max-sessions="2": with 2 live sessions a 3rd connection is closed at once and
# logged (end=denied: max-sessions); once they close, new sessions work again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

cat >"$T/hold.py" <<'EOF'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
print("ready", flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    time.sleep(0.2)
EOF

cat >"$T/probe.py" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
t0 = time.monotonic()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.settimeout(3)
try:
    d = s.recv(4096)
    st = "EOF" if d == b"" else "DATA"
except socket.timeout:
    st = "TIMEOUT"
except ConnectionResetError:
    st = "RESET"
print("%s %.3f" % (st, time.monotonic() - t0))
EOF

make_file index.html 1234
start_nginx
free_port P
write_proxyd_conf 'max-sessions="2"'
write_service ms "$P" "$NGINX_PORT"
start_proxyd

info "holding 2 sessions open"
python3 "$T/hold.py" "$P" 2 >"$T/hold.out" 2>&1 &
HOLD_PID=$!
track_pid "$HOLD_PID"
wait_grep "$T/hold.out" '^ready' "$START_WAIT_MIN" || fail "could not open 2 connections through proxyd: $(cat "$T/hold.out")"
assert_metric eq proxyd_sessions_active '' 2 5

info "3rd connection"
out=$(timeout 10 python3 "$T/probe.py" "$P") || fail "probe failed (rc $?)"
info "probe: $out"
read -r st dt <<<"$out"
[[ $st == EOF || $st == RESET ]] || fail "3rd connection with max-sessions=2: expected to be closed at once, got '$out'"
ms=$(awk -v d="$dt" 'BEGIN { printf "%d", d * 1000 }')
((ms < 1000)) || fail "3rd connection closed only after $ms ms (expected at once)"
assert_log 'session-end service=ms .* rule=limits/@max-sessions by=policy phase=accept end=denied: max-sessions$'
assert_metric ge proxyd_sessions_denied_total 'reason="max-sessions"' 1
proc_alive "$HOLD_PID" || fail "the held connections' client exited early: $(cat "$T/hold.out")"
assert_metric eq proxyd_sessions_active '' 2
n=$(session_end_lines ms | wc -l)
assert_eq "$n" 1 "session-end lines while 2 sessions are held (only the denied one)"

info "closing the 2 held sessions"
kill -TERM "$HOLD_PID"
wait_exit "$HOLD_PID" 5 || fail "holder did not exit"
assert_metric eq proxyd_sessions_active '' 0 5
r=$(http_get "http://127.0.0.1:$P/index.html" "$T/out")
assert_eq "$r" "0 200" "curl rc and HTTP status after the held sessions closed"
assert_eq "$(sha256_of "$T/out")" "$(sha256_of "$T/www/index.html")" "body after the held sessions closed"
r=$(http_get "http://127.0.0.1:$P/index.html" "$T/out")
assert_eq "$r" "0 200" "second curl after the held sessions closed"
n=$(session_end_lines ms | grep -c 'end=denied: max-sessions$' || true)
assert_eq "$n" 1 "number of end=denied: max-sessions lines"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
