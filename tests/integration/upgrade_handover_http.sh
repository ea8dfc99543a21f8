#!/usr/bin/env bash
# proxyd -s upgrade with HTTP/1.1 clients idle in keep-alive: 10
# connections (python http.client) each get two answers, sit idle while
# the upgrade runs, and then get two more on the same connection (the
# same local port: no reconnect), whole (sha256), from the new process,
# which the old one passed them to. Both sides log "handover sessions=10
# drained=0"; the 40 http-request lines and the 10 session-end lines are
# each written once.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx python3
setup

make_file f.bin 100K
start_nginx
free_port P
write_proxyd_conf 'shutdown-grace="20s"' "<pidfile path=\"$T/run/proxyd.pid\"/>"
mkdir -p "$T/run"
write_http_service web "$P" "$NGINX_PORT" '<http server-pool="64" server-idle="30s"/>'
start_proxyd
OLD=$PROXYD_PID
wait_grep "$PROXYD_LOG" 'proxyd .* started' 5 || fail "proxyd did not say it started"

cat >"$T/ka.py" <<'PYEOF'
import hashlib, http.client, os, sys, time
port, n, go, want = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def get(c):
    c.request("GET", "/f.bin")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, r.status
    assert hashlib.sha256(body).hexdigest() == want, "sha256"

conns = []
for i in range(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    get(c)
    get(c)
    conns.append((c, c.sock.getsockname()[1]))
print("ready", flush=True)
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
ok = 0
for i, (c, lport) in enumerate(conns):
    try:
        get(c)
        get(c)
        assert c.sock is not None and c.sock.getsockname()[1] == lport, "reconnected"
        c.close()
        ok += 1
    except Exception as e:
        print("conn %d: %r" % (i, e), flush=True)
print("ok=%d" % ok, flush=True)
PYEOF
python3 "$T/ka.py" "$P" 10 "$T/go" "$(sha256_of "$T/www/f.bin")" >"$T/ka.out" 2>&1 &
KA=$!
track_pid "$KA"
wait_grep "$T/ka.out" '^ready' 20 || fail "the keep-alive clients did not start: $(cat "$T/ka.out")"

rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$T/run/proxyd.pid")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover sessions=10 drained=0 \(to pid $NEW\)" 5
assert_log "handover sessions=10 drained=0 \(from pid $OLD\)" 5

touch "$T/go"
wait_exit "$KA" 60 || fail "the keep-alive clients did not finish"
cat "$T/ka.out"
assert_eq "$(tail -n 1 "$T/ka.out")" "ok=10" "every keep-alive connection was answered twice more, unbroken"
deadline=$(($(date +%s) + 10))
while (($(grep -c 'session-end service=web ' "$PROXYD_LOG") < 10)); do
    (($(date +%s) < deadline)) || fail "fewer than 10 session-end lines"
    sleep 0.05
done
assert_eq "$(grep -c 'session-end service=web ' "$PROXYD_LOG")" 10 "one session-end line per connection"
assert_eq "$(grep -c 'http-request .*path=/f\.bin status=200' "$PROXYD_LOG")" 40 "40 http-request lines"
assert_no_grep "$PROXYD_LOG" 'handed over' "a handed session's end in the log"
info "OK"
