#!/usr/bin/env bash
# proxyd -s upgrade: a new process takes the live sessions over from the
# running one (core/handover.h). 20 long-lived plug connections (16
# spliced, 4 buffered) stream bytes to an echo server while the upgrade
# runs: every byte comes back once and in order, the pidfile names the new
# process, the old one exits, each session has one session-end line (the
# new process's) with the whole stream's counts, and both sides log
# "handover sessions=20 drained=0". An upgrade that cannot happen (another
# protocol version, a binary that dies, a broken configuration, a new
# process that dies once it listens) leaves the running process serving.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3 curl
setup

PY=$(dirname "$0")/upgrade_streams.py
free_port ECHO
python3 "$PY" echo "$ECHO" 2>>"$T/echo.log" &
track_pid $!
wait_listen "$ECHO" 5 || fail "echo server did not start"

free_port PS
free_port PB
write_proxyd_conf 'shutdown-grace="20s"' "<pidfile path=\"$T/run/proxyd.pid\"/>"
mkdir -p "$T/run"
PIDF=$T/run/proxyd.pid
write_service plugs "$PS" "$ECHO"
write_service plugb "$PB" "$ECHO" '<plug splice="no"/>'
start_proxyd
OLD=$PROXYD_PID
wait_grep "$PROXYD_LOG" 'proxyd .* started' 5 || fail "proxyd did not say it started"

python3 "$PY" client "$PS:16,$PB:4" "$T/stop" >"$T/client.out" 2>&1 &
CLIENT=$!
track_pid "$CLIENT"
wait_grep "$T/client.out" '^streaming' 20 || fail "the streams did not start: $(cat "$T/client.out")"

# ---- the upgrade
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$PIDF")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
assert_grep "$T/up.out" "new process pid $NEW takes over from pid $OLD"
proc_alive "$NEW" || fail "the new process is not running"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover sessions=20 drained=0 \(to pid $NEW\)" 5
assert_log "handover sessions=20 drained=0 \(from pid $OLD\)" 5
assert_metric eq proxyd_upgrade_sessions_total 'side="taken"' 20

# The streams go on through the new process; then they end.
# (the admin listener is the new process's alone: it relayed these)
assert_metric ge proxyd_bytes_total 'direction="to-client"' 100000 10
touch "$T/stop"
wait_exit "$CLIENT" 30 || fail "the client did not finish"
cat "$T/client.out"
assert_eq "$WAIT_RC" 0 "every stream came back whole"
assert_eq "$(grep -c ' ok$' "$T/client.out")" 20 "20 streams ok"

# One session-end line per session, written by the new process, with the
# whole stream's counts (matched by the client's port).
wait_grep "$PROXYD_LOG" "" 1 || true
deadline=$(($(date +%s) + 10))
while (($(grep -cE 'session-end service=plug[sb] ' "$PROXYD_LOG") < 20)); do
    (($(date +%s) < deadline)) || fail "fewer than 20 session-end lines"
    sleep 0.05
done
assert_eq "$(grep -cE 'session-end service=plug[sb] ' "$PROXYD_LOG")" 20 "exactly 20 session-end lines"
while read -r _ lport sent recv _; do
    sent=${sent#sent=}; recv=${recv#recv=}
    line=$(grep -E "session-end service=plug[sb] .* client=127\.0\.0\.1:$lport " "$PROXYD_LOG")
    assert_eq "$(grep -c . <<<"$line")" 1 "one session-end line for port $lport"
    assert_eq "$(kv "$line" to-server)" "$sent" "to-server of port $lport"
    assert_eq "$(kv "$line" to-client)" "$recv" "to-client of port $lport"
    assert_eq "$(kv "$line" by)" client "port $lport ended by its client"
done < <(grep '^conn ' "$T/client.out")
assert_no_grep "$PROXYD_LOG" 'handed over' "a handed session's end in the log"

# ---- upgrades that cannot happen leave the running process serving
echo_check() { # PORT: one round trip through the proxy
    python3 - "$1" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"ping\n"); s.shutdown(socket.SHUT_WR)
b = b""
while True:
    x = s.recv(100)
    if not x: break
    b += x
sys.exit(0 if b == b"ping\n" else 1)
PYEOF
}
python3 "$PY" client "$PS:2" "$T/stop2" >"$T/client2.out" 2>&1 &
C2=$!
track_pid "$C2"
wait_grep "$T/client2.out" '^streaming' 20 || fail "the second streams did not start"

rc=0; PROXYD_TEST_HANDOVER_VERSION=99 "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/v.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s upgrade to another protocol version exits 1"
assert_grep "$T/v.out" "refuses the hand-over: it speaks version 1, this binary 99"
assert_grep "$T/v.out" "pid $NEW serves on"
assert_log "handover refused: the new process speaks version 99, this one 1"

rc=0; PROXYD_UPGRADE_EXEC=/bin/false "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/f.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s upgrade to a binary that dies exits 1"
assert_grep "$T/f.out" "pid $NEW serves on"

cp "$T/policy/plugs.xml" "$T/plugs.good"
sed -i 's|<listen |<bogus/><listen |' "$T/policy/plugs.xml"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/c.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s upgrade with a broken configuration exits 1"
assert_grep "$T/c.out" "not upgrading"
cp "$T/plugs.good" "$T/policy/plugs.xml"

# a new process that dies once it listens, after the old one stopped
# accepting: the old one listens again (its two streams go on, or are lost
# with the new one if it was passed them first: run apart from them below)
touch "$T/stop2"
wait_exit "$C2" 30 || fail "the second client did not finish"
assert_eq "$WAIT_RC" 0 "the streams through the failed upgrades came back whole ($(cat "$T/client2.out"))"
python3 "$PY" client "$PS:1" "$T/stop3" >"$T/client3.out" 2>&1 &
C3=$!
track_pid "$C3"
wait_grep "$T/client3.out" '^streaming' 20 || fail "the third stream did not start"
touch "$T/stop3"
wait_exit "$C3" 30 || fail "the third client did not finish"
rc=0; PROXYD_TEST_HANDOVER_DIE=1 "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/d.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s upgrade to a process that dies once it listens exits 1"
assert_grep "$T/d.out" "pid $NEW serves on"
assert_log "upgrade failed: the new process went away; accepting again"
wait_listen "$PS" 5 "$NEW" || fail "the old process does not listen again"

assert_eq "$(cat "$PIDF")" "$NEW" "the pidfile still names the serving process"
proc_alive "$NEW" || fail "the serving process died"
echo_check "$PS" || fail "a new connection after the failed upgrades"
echo_check "$PB" || fail "a new connection to the other service after the failed upgrades"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics")" 200 \
    "the admin endpoint answers after the failed upgrades"
# ---- a service that changed its analyser: its sessions are not opened by
# another analyser (closed, said in the log), the others go on
python3 "$PY" client "$PB:1" "$T/stop4" >"$T/client4.out" 2>&1 &
C4=$!
track_pid "$C4"
wait_grep "$T/client4.out" '^streaming' 20 || fail "the fourth stream did not start"
cat >"$T/policy/plugb.xml" <<XEOF
<service name="plugb" analyser="http">
  <listen address="127.0.0.1" port="$PB" mode="fixed"/>
  <target address="127.0.0.1" port="$ECHO"/>
</service>
XEOF
OLD2=$NEW
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/a.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade with plugb now an http service exits 0 ($(cat "$T/a.out"))"
NEW2=$(cat "$PIDF")
track_pid "$NEW2"
wait_exit "$OLD2" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover: no service plugb of analyser plug that takes sessions over here: closed"
assert_log "handover sessions=0 drained=0 \(from pid $OLD2, some lost\)" 5
touch "$T/stop4"
wait_exit "$C4" 30 || fail "the fourth client did not finish"
assert_ne "$WAIT_RC" 0 "the stream of a service that changed analysers was cut"
echo_check "$PS" || fail "a new connection to plugs after the last upgrade"
info "OK"
