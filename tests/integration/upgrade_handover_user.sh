#!/usr/bin/env bash
# proxyd -s upgrade of a daemon that dropped root to <user> (nobody): the
# new process reaches the old one while still root, binds beside its
# listeners as the same user (SO_REUSEPORT asks for that), takes its 4
# streams whole and the pidfile (in a directory of that user's); the old
# one exits; -s stop then stops the new one and the pidfile goes with it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
[[ $EUID == 0 ]] || skip "needs root (the drop to nobody)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
setup

PY=$(dirname "$0")/upgrade_streams.py
free_port ECHO
python3 "$PY" echo "$ECHO" 2>>"$T/echo.log" &
track_pid $!
wait_listen "$ECHO" 5 || fail "echo server did not start"
mkdir "$T/run"
chown nobody:nogroup "$T/run"
PIDF=$T/run/proxyd.pid
free_port PS
write_proxyd_conf 'shutdown-grace="20s"' "<user name=\"nobody\" group=\"nogroup\"/>
  <pidfile path=\"$PIDF\"/>"
write_service plugs "$PS" "$ECHO"
start_proxyd
OLD=$PROXYD_PID
assert_log "running as user nobody" 5

python3 "$PY" client "$PS:4" "$T/stop" >"$T/client.out" 2>&1 &
CLIENT=$!
track_pid "$CLIENT"
wait_grep "$T/client.out" '^streaming' 20 || fail "the streams did not start: $(cat "$T/client.out")"

rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$PIDF")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover sessions=4 drained=0 \(from pid $OLD\)" 5
assert_eq "$(stat -c %U "/proc/$NEW")" nobody "the new process runs as nobody"
touch "$T/stop"
wait_exit "$CLIENT" 30 || fail "the client did not finish"
assert_eq "$WAIT_RC" 0 "every stream came back whole ($(cat "$T/client.out"))"

rc=0; "$PROXYD" -c "$PROXYD_CONF" -s stop >"$T/stop.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s stop of the new process: $(cat "$T/stop.out")"
proc_alive "$NEW" && fail "the new process still runs after -s stop"
[[ ! -e $PIDF ]] || fail "the pidfile is left after the new process's clean stop"
info "OK"
