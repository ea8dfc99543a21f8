#!/usr/bin/env bash
# SIGHUP reload: an invalid policy is reported as file:line and the running
# configuration stays; a valid one moves the service to a new port and adds a
# second service; a session opened before the reload keeps working. Then
# random mutations of a full configuration (policy_mutations.py, about 12 s,
# POLICY_MUT_SEED=N replays one run): --check and a reload of a second
# proxyd agree on each, refuse it at the same file:line (never line 0 for
# an element the file has), and the old configuration keeps relaying.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 openssl
setup

make_file index.html 2048
SHA=$(sha256_of "$T/www/index.html")
start_nginx
free_port P1
free_port P2
free_port P3
write_proxyd_conf
write_service web "$P1" "$NGINX_PORT"
start_proxyd

expect_ok() { # PORT LABEL
    local r
    r=$(http_get "http://127.0.0.1:$1/index.html" "$T/out")
    assert_eq "$r" "0 200" "$2: curl rc and HTTP status via port $1"
    assert_eq "$(sha256_of "$T/out")" "$SHA" "$2: body via port $1"
}

expect_ok "$P1" "before any reload"

info "reload 1: invalid policy (unknown element)"
cp "$T/policy/web.xml" "$T/web.xml.good"
sed -i 's|^</service>|  <frobnicate/>\n</service>|' "$T/policy/web.xml"
bad_line=$(grep -n frobnicate "$T/policy/web.xml" | cut -d: -f1)
kill -HUP "$PROXYD_PID"
assert_log "web\\.xml:$bad_line:" 5
info "log: $(grep -E "web\\.xml:$bad_line:" "$PROXYD_LOG" | head -n 1)"
proc_alive "$PROXYD_PID" || fail "proxyd exited after reloading an invalid configuration"
assert_metric ge proxyd_config_reloads_total 'result="failed"' 1
expect_ok "$P1" "after a failed reload"

info "reload 2: web moves to port $P3, new service web2 on port $P2"
# a session opened before the reload must keep its configuration (and its connection)
cat >"$T/live.py" <<'EOF'
import socket, sys, time, os
port, trigger = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
print("ready", flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(trigger) and time.monotonic() < deadline:
    time.sleep(0.05)
s.sendall(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
s.settimeout(10)
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError as e:
    print("ERROR %r" % e)
print((data.split(b"\r\n", 1)[0] or b"NOTHING").decode("latin-1"), len(data))
EOF
python3 "$T/live.py" "$P1" "$T/go" >"$T/live.out" 2>&1 &
LIVE_PID=$!
track_pid "$LIVE_PID"
wait_grep "$T/live.out" '^ready' "$START_WAIT_MIN" || fail "could not open a session through port $P1"
assert_metric ge proxyd_sessions_active '' 1

cp "$T/web.xml.good" "$T/policy/web.xml"
sed -i "s|port=\"$P1\"|port=\"$P3\"|" "$T/policy/web.xml"
write_service web2 "$P2" "$NGINX_PORT"
kill -HUP "$PROXYD_PID"
wait_listen "$P3" 5 "$PROXYD_PID" || fail "after SIGHUP, service web is not listening on its new port $P3"
wait_listen "$P2" 5 "$PROXYD_PID" || fail "after SIGHUP, the new service web2 is not listening on port $P2"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 1
expect_ok "$P3" "service web after reload"
expect_ok "$P2" "new service web2 after reload"
wait_not_listening "$P1" "$ASYNC_WAIT" || fail "after SIGHUP, the old port $P1 of service web is still listening"
rc=0
curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$P1/index.html" || rc=$?
assert_eq "$rc" 7 "curl exit status on the removed port $P1 (connection refused)"

info "the session opened before the reload"
touch "$T/go"
wait_exit "$LIVE_PID" 15 || fail "pre-reload session did not complete"
info "pre-reload session: $(cat "$T/live.out" | tr '\n' '|')"
assert_grep "$T/live.out" "^HTTP/1\\.[01] 200 OK [0-9]+$" "a session opened before the reload was broken by it"
assert_log 'session-end service=web2 .* end=(client|server)-closed$'
proc_alive "$PROXYD_PID" || fail "proxyd died"

info "random mutations of a full configuration: --check and SIGHUP agree"
python3 "$(dirname "$0")/policy_mutations.py" "$PROXYD" "$T/mutations" \
    "${POLICY_MUT_SECONDS:-12}" || fail "policy mutations: see the PROBLEM lines above"
info "PASS"
