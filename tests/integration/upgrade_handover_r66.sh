#!/usr/bin/env bash
# proxyd -s upgrade with R66 connections between transfers: 4 r66peer
# clients (SEND with digest), each authenticated and one transfer done,
# pause (--pause-file) while the upgrade runs; the new process takes them
# over with their authentication, and each then sends a second file on
# the same connection, whole at the server (sha256), without
# authenticating again. Both sides log "handover sessions=4 drained=0";
# one session-end line per connection. Then a connection proven by a
# <partner> is handed over to a process whose configuration no longer
# has that partner: the new process closes it (its later channels would
# reuse a proof this configuration refuses), and its second file never
# reaches the server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds sha256sum
need_r66peer
setup

mkdir -p "$T/cli"
head -c 200K /dev/urandom >"$T/cli/a.bin"
head -c 300K /dev/urandom >"$T/cli/b.bin"
start_r66_server
free_port R66_PORT
write_proxyd_conf 'shutdown-grace="20s"' "<pidfile path=\"$T/run/proxyd.pid\"/>"
mkdir -p "$T/run"
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 require-digest="yes"><host id="hosta"/><mode allow="sendmd5 recvmd5"/></r66>'
start_proxyd
OLD=$PROXYD_PID
wait_grep "$PROXYD_LOG" 'proxyd .* started' 5 || fail "proxyd did not say it started"

N=4
for i in $(seq 1 $N); do
    cp "$T/cli/a.bin" "$T/cli/a$i.bin"
    cp "$T/cli/b.bin" "$T/cli/b$i.bin"
    "$R66PEER" client --connect "127.0.0.1:$R66_PORT" --id hosta:pwA --partner serverb:pwB \
        --timeout 60 --rule in --mode 3 --pause-file "$T/go" \
        --send "$T/cli/a$i.bin" --send "$T/cli/b$i.bin" >"$T/c$i.out" 2>"$T/c$i.err" &
    eval "C$i=$!"
    track_pid $!
done
for i in $(seq 1 $N); do
    wait_grep "$T/c$i.out" '^paused' 20 || fail "client $i did not pause: $(cat "$T/c$i.err")"
done

rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s upgrade exits 0 ($(cat "$T/up.out"))"
NEW=$(cat "$T/run/proxyd.pid")
track_pid "$NEW"
assert_ne "$NEW" "$OLD" "the pidfile names a new process"
wait_exit "$OLD" 15 || fail "the old process still runs 15 s after the upgrade"
assert_log "handover sessions=$N drained=0 \(to pid $NEW\)" 5
assert_log "handover sessions=$N drained=0 \(from pid $OLD\)" 5

touch "$T/go"
for i in $(seq 1 $N); do
    pid=C$i
    wait_exit "${!pid}" 30 || fail "client $i did not finish"
    assert_eq "$WAIT_RC" 0 "client $i's exit status: $(cat "$T/c$i.err")"
    assert_eq "$(grep -c '^ok send' "$T/c$i.out")" 2 "client $i: two transfers"
    assert_eq "$(sha256_of "$R66_SRV_DIR/b$i.bin")" "$(sha256_of "$T/cli/b.bin")" "b$i.bin whole at the server"
done
deadline=$(($(date +%s) + 10))
while (($(grep -c 'session-end service=r66 ' "$PROXYD_LOG") < N)); do
    (($(date +%s) < deadline)) || fail "fewer than $N session-end lines"
    sleep 0.05
done
assert_eq "$(grep -c 'session-end service=r66 ' "$PROXYD_LOG")" "$N" "one session-end line per connection"
assert_eq "$(grep -c 'r66-transfer host=hosta rule=in mode=sendmd5 file=b[0-9].bin size=307200 .*verdict=accept' "$PROXYD_LOG")" "$N" \
    "the second transfers, accepted by the new process's analyser"
assert_eq "$(grep -c 'r66 authenticated host=hosta' "$PROXYD_LOG")" "$N" "one authentication per connection"
assert_no_grep "$PROXYD_LOG" 'handed over' "a handed session's end in the log"

# ---- a partner the new configuration removed
printf 'pwA\n' >"$T/policy/hosta.pw"
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 require-digest="yes"><host id="hosta"/><mode allow="sendmd5 recvmd5"/>
       <partner id="hosta" password-file="hosta.pw"/></r66>'
reloads=$(grep -c 'reload done' "$PROXYD_LOG" || true)
"$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/reload.out" 2>&1 || fail "-s reload: $(cat "$T/reload.out")"
wait_grep "$PROXYD_LOG" "" 1 || true
deadline=$(($(date +%s) + 10))
until (($(grep -c 'reload done' "$PROXYD_LOG") > reloads)); do
    (($(date +%s) < deadline)) || fail "the reload with the partner was not done"
    sleep 0.05
done
cp "$T/cli/a.bin" "$T/cli/pa.bin"
cp "$T/cli/b.bin" "$T/cli/pb.bin"
"$R66PEER" client --connect "127.0.0.1:$R66_PORT" --id hosta:pwA --partner serverb:pwB \
    --timeout 20 --rule in --mode 3 --pause-file "$T/go2" \
    --send "$T/cli/pa.bin" --send "$T/cli/pb.bin" >"$T/p.out" 2>"$T/p.err" &
CP=$!
track_pid $CP
wait_grep "$T/p.out" '^paused' 20 || fail "the partner client did not pause: $(cat "$T/p.err")"
assert_log 'r66 auth host=hosta result=ok' 5
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 require-digest="yes"><host id="hosta"/><mode allow="sendmd5 recvmd5"/></r66>'
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s upgrade >"$T/up2.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "the second -s upgrade exits 0 ($(cat "$T/up2.out"))"
NEW2=$(cat "$T/run/proxyd.pid")
track_pid "$NEW2"
assert_ne "$NEW2" "$NEW" "the pidfile names the third process"
assert_log "handover sessions=1 drained=0 \(to pid $NEW2\)" 15
assert_log 'r66 auth host=hosta result=unknown-host \(handed over: the partner proven before the upgrade is no longer in the <partner> table\): closed' 5
touch "$T/go2"
wait_exit "$CP" 30 || fail "the partner client did not finish"
assert_ne "$WAIT_RC" 0 "the partner client's second transfer fails ($(cat "$T/p.out"))"
[[ ! -e $R66_SRV_DIR/pb.bin ]] || fail "pb.bin reached the server through a partner the configuration removed"
info "OK"
