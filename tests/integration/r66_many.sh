#!/usr/bin/env bash
# 50 transfers on one R66 connection (authentication once, then reused),
# the same with one Authent per channel (R66 < 3.6.1 behaviour), and 20
# parallel connections each sending and receiving: every file intact, one
# session per connection, every transfer logged and counted.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl
need_r66peer
setup

mkdir -p "$T/cli" "$T/out"
head -c 20K /dev/urandom >"$T/cli/s.bin"
head -c 250K /dev/urandom >"$T/cli/p.bin"

start_r66_server
free_port R66_PORT
write_proxyd_conf
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 require-digest="yes"><host id="hosta"/><mode allow="sendmd5 recvmd5"/></r66>'
start_proxyd
want_s=$(sha256_of "$T/cli/s.bin")

info "50 transfers on one connection (auth reuse)"
r66c "$R66_PORT" hosta:pwA --rule in --mode 3 --count 50 --send "$T/cli/s.bin"
[[ $R66_RC == 0 ]] || fail "50 transfers: rc=$R66_RC: $(cat "$T/client.err")"
assert_eq "$(grep -c '^ok send' "$T/client.out")" 50 "transfers reported by the client"
for i in $(seq 1 50); do
    [[ $(sha256_of "$R66_SRV_DIR/s.bin.$i") == "$want_s" ]] || fail "s.bin.$i differs"
done
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 50
# the counter is the worker's, the lines come from the log thread: once the
# session's end line is there, so are its earlier ones
assert_log '#[0-9]+ r66 authenticated host=hosta'
sid=$(grep -m1 -oE '#[0-9]+ r66 authenticated host=hosta' "$PROXYD_LOG" | cut -d' ' -f1)
wait_grep "$PROXYD_LOG" "$sid session-end service=r66 analyser=r66 verdict=accept" || fail "no session-end for $sid"
assert_eq "$(grep -c "$sid r66-transfer host=hosta rule=in mode=sendmd5 file=s.bin.[0-9]* size=20480 blocks=1 digest=SHA-256 verdict=accept" "$PROXYD_LOG")" 50 \
    "accepted transfers of session $sid"
assert_eq "$(grep -c "$sid r66 authenticated" "$PROXYD_LOG")" 1 "authentications logged for session $sid"
rm -f "$R66_SRV_DIR"/s.bin.*

info "50 transfers on one connection, one authentication per channel"
r66c "$R66_PORT" hosta:pwA --rule in --mode 4 --count 50 --auth-each \
    --recv s2.bin --dir "$T/out" < /dev/null || true
# nothing to receive yet: the server answers 'f' and the client stops
assert_eq "$R66_RC" 2 "RECV of a missing file"
assert_grep "$T/client.err" "error packet from server: code=f"
cp "$T/cli/s.bin" "$R66_SRV_DIR/s2.bin"
r66c "$R66_PORT" hosta:pwA --rule in --mode 4 --count 50 --auth-each \
    --recv s2.bin --dir "$T/out"
[[ $R66_RC == 0 ]] || fail "50 RECV: rc=$R66_RC: $(cat "$T/client.err")"
for i in $(seq 1 50); do
    [[ $(sha256_of "$T/out/s2.bin.$i") == "$want_s" ]] || fail "out/s2.bin.$i differs"
done
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 100
rm -f "$T/out"/s2.bin.*

info "20 parallel connections, SEND then RECV each"
want_p=$(sha256_of "$T/cli/p.bin")
cp "$T/cli/p.bin" "$R66_SRV_DIR/p.bin"
pids=()
for i in $(seq 1 20); do
    mkdir -p "$T/par$i"
    cp "$T/cli/p.bin" "$T/par$i/p$i.bin"
    "$R66PEER" client --connect "127.0.0.1:$R66_PORT" --id hosta:pwA \
        --partner serverb:pwB --rule in --mode 3 --timeout 60 \
        --send "$T/par$i/p$i.bin" --recv p.bin --dir "$T/par$i" \
        >"$T/par$i/out" 2>"$T/par$i/err" &
    pids+=($!)
    track_pid "$!"
done
failed=0
for i in $(seq 1 20); do
    wait "${pids[$((i - 1))]}" || { failed=$((failed + 1)); info "client $i: $(cat "$T/par$i/err")"; }
done
assert_eq "$failed" 0 "failed parallel clients"
for i in $(seq 1 20); do
    [[ $(sha256_of "$R66_SRV_DIR/p$i.bin") == "$want_p" ]] || fail "server copy p$i.bin differs"
    [[ $(sha256_of "$T/par$i/p.bin") == "$want_p" ]] || fail "client $i copy of p.bin differs"
done
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 140
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="violations"' 0
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers_denied"' 0
for ((k = 0; k < 50; k++)); do
    (( $(grep -c "session-end service=r66 " "$PROXYD_LOG") >= 23 )) && break
    sleep 0.1
done
assert_eq "$(grep -c "session-end service=r66 " "$PROXYD_LOG")" 23 "sessions (2 + 1 refused RECV + 20 parallel)"
assert_no_grep "$PROXYD_LOG" "verdict=deny" "no session denied"
r66_finish
info "ok"
