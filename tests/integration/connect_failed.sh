#!/usr/bin/env bash
# Server connect failures: a target port with nothing listening (refused), and a
# target whose accept queue is full (SYN dropped -> connect-timeout="500ms").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds curl python3
setup

free_port DEAD_PORT # reserved and never bound: connect() is refused
free_port FULL_PORT
free_port P_REFUSED
free_port P_TIMEOUT

# a listener with backlog 0 that never accepts; fill its queue so SYNs are dropped
cat >"$T/full.py" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(0)
fill = []
for _ in range(8):
    c = socket.socket()
    c.setblocking(False)
    c.connect_ex(("127.0.0.1", port))
    fill.append(c)
time.sleep(0.3)
print("ready", flush=True)
time.sleep(120)
EOF
python3 "$T/full.py" "$FULL_PORT" >"$T/full.out" 2>&1 &
track_pid $!
wait_grep "$T/full.out" '^ready' "$START_WAIT_MIN" || fail "backlog-full helper did not start"

write_proxyd_conf 'connect-timeout="10s"'
write_service refused "$P_REFUSED" "$DEAD_PORT"
write_service ctimeout "$P_TIMEOUT" "$FULL_PORT" '<upstream connect-timeout="500ms"/>'
start_proxyd

info "target 127.0.0.1:$DEAD_PORT has no listener"
rc=0
code=$(curl -s --max-time 10 -o "$T/out" -w '%{http_code}' "http://127.0.0.1:$P_REFUSED/") || rc=$?
info "curl rc=$rc http_code=$code"
[[ $rc == 52 || $rc == 56 ]] ||
    fail "curl through proxyd to a dead target: expected exit 52 (empty reply) or 56 (recv failure), got $rc"
assert_eq "$code" 000 "HTTP status through proxyd to a dead target"
[[ ! -s $T/out ]] || fail "got a body through proxyd to a dead target"
assert_log 'session-end service=refused .* end=connect-failed: Connection refused$'
line=$(session_end_lines refused | tail -n 1)
info "log: $line"
assert_eq "$(kv "$line" to-client)" 0 "to-client bytes of a failed connect"
assert_metric ge proxyd_upstream_connect_failures_total '' 1

info "target 127.0.0.1:$FULL_PORT drops SYNs, upstream connect-timeout=500ms"
t0=$(now_ms)
rc=0
code=$(curl -s --max-time 10 -o "$T/out" -w '%{http_code}' "http://127.0.0.1:$P_TIMEOUT/") || rc=$?
dt=$(($(now_ms) - t0))
info "curl rc=$rc http_code=$code after ${dt} ms"
[[ $rc == 52 || $rc == 56 ]] ||
    fail "curl through proxyd to a SYN-dropping target: expected exit 52 or 56, got $rc after $dt ms"
assert_eq "$code" 000 "HTTP status through proxyd to a SYN-dropping target"
((dt >= 400)) || fail "session closed after $dt ms, before the 500ms connect-timeout"
((dt < 3000)) || fail "session closed after $dt ms: upstream connect-timeout=500ms not applied (daemon default is 10s)"
assert_log 'session-end service=ctimeout .* end=connect-timeout$'
assert_metric ge proxyd_upstream_connect_failures_total '' 2
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
