#!/usr/bin/env bash
# A sender's Data frames already in flight when the receiver answers an
# ErrorPacket are dropped and counted (late_frames), not a protocol
# violation: the connection carries the next transfer. The client sends a
# big file whose block 0 has a wrong digest; the server (r66peer
# --keep-on-error, Waarp's way) answers ErrorPacket 'M' at once and keeps
# the connection while the client is still sending; then a second file on
# the same connection must arrive intact. The failed transfer is logged
# with the server's error code, the second one accepted, one session. The
# same the other way: a download whose block 0 the server sent with a
# wrong digest, refused by the client while the server's blocks are still
# coming, then a second download on the connection. Then about 10 s of
# frames mangled on their way into proxyd from either side (r66_mangle.py:
# forbidden framing answered with a ConnectionError, anything else ends in
# bounded time, clean rounds arrive intact; R66_MANGLE_SEED=N replays a
# run), no session left over, and a transfer after them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds sha256sum curl
need_r66peer
setup

BIG=32M
[[ -n ${PROXYD_SANITIZE:-} ]] && BIG=16M
mkdir -p "$T/cli"
head -c "$BIG" /dev/urandom >"$T/cli/big.bin"
head -c 100K /dev/urandom >"$T/cli/ok.bin"

start_r66_server --keep-on-error
start_r66_server_at bad --keep-on-error --corrupt-block 0
cp "$T/cli/big.bin" "$T/cli/ok.bin" "$R66_AT_DIR/"
free_port R66_PORT
free_port RECV_PORT
free_port MANGLE_PORT
free_port MITM_C_PORT
free_port MITM_S_PORT
write_proxyd_conf
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" '<r66/>'
write_r66_service r66recv "$RECV_PORT" "$R66_AT_PORT" '<r66/>'
write_r66_service r66mangle "$MANGLE_PORT" "$MITM_S_PORT" '<r66 max-block="256k"/>'
start_proxyd

r66c "$R66_PORT" hosta:pwA --rule in --mode 3 --timeout 30 --corrupt-block 0 \
    --continue --send "$T/cli/big.bin" --send "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "client exit status (the first transfer fails)"
assert_grep "$T/client.err" "error packet from server: code=M action=3" "the server's ErrorPacket reached the client"
assert_grep "$T/client.out" "^ok send file=ok\.bin size=102400 " \
    "the second transfer on the connection: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$R66_SRV_DIR/ok.bin")" "$(sha256_of "$T/cli/ok.bin")" "ok.bin on the server"
[[ ! -e $R66_SRV_DIR/big.bin ]] || fail "the failed file was stored"

wait_grep "$PROXYD_LOG" "session-end service=r66 " || fail "no session-end line"
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=big\.bin .* verdict=error reason=server-error error-code=M "
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=ok\.bin size=102400 .* verdict=accept"
assert_log "r66 late frames from the client for the ended channel [0-9a-f]{8} dropped \(first: data\)"
assert_no_grep "$PROXYD_LOG" "protocol violation" "a protocol violation"
assert_eq "$(grep -c 'session-end service=r66 ' "$PROXYD_LOG")" 1 "sessions (one connection)"
assert_log "session-end service=r66 analyser=r66 verdict=accept "
assert_metric ge proxyd_analyser_events_total 'analyser="r66",event="late_frames"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers_failed"' 1
sent_late=$(r66_event late_frames)
info "late frames dropped (upload): $sent_late"

mkdir -p "$T/got"
r66c "$RECV_PORT" hosta:pwA --rule in --mode 4 --timeout 30 --continue \
    --recv big.bin --recv ok.bin --dir "$T/got"
assert_eq "$R66_RC" 2 "client exit status (the first download fails)"
assert_grep "$T/r66server-bad.log" "error packet from client: code=M action=3" "the client's ErrorPacket reached the server"
assert_grep "$T/client.out" "^ok recv file=ok\.bin size=102400 " \
    "the second download on the connection: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$T/got/ok.bin")" "$(sha256_of "$T/cli/ok.bin")" "ok.bin downloaded"
wait_grep "$PROXYD_LOG" "session-end service=r66recv " || fail "no session-end line for r66recv"
assert_log "r66-transfer host=hosta rule=in mode=recvmd5 file=big\.bin .* verdict=error reason=client-error error-code=M "
assert_log "r66-transfer host=hosta rule=in mode=recvmd5 file=ok\.bin size=102400 .* verdict=accept"
assert_log "r66 late frames from the server for the ended channel [0-9a-f]{8} dropped \(first: data\)"
assert_no_grep "$PROXYD_LOG" "protocol violation" "a protocol violation"
assert_log "session-end service=r66recv analyser=r66 verdict=accept "
assert_metric ge proxyd_analyser_events_total 'analyser="r66",event="late_frames"' $((sent_late + 1))
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 2
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers_failed"' 2
info "late frames dropped (both): $(r66_event late_frames)"

info "frames mangled on their way into proxyd, from either side (r66_mangle.py)"
SEED=${R66_MANGLE_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
mkdir -p "$T/mangle"
python3 "$(dirname "$0")/r66_mangle.py" "$R66PEER" "$MANGLE_PORT" "$MITM_C_PORT" \
    "$MITM_S_PORT" "$R66_SRV_PORT" "$T/mangle" "$R66_SRV_DIR" \
    "${R66_MANGLE_SECONDS:-10}" "$SEED" || fail "r66_mangle: see the PROBLEM lines above"
proc_alive "$PROXYD_PID" || fail "proxyd died while frames were mangled"
assert_metric eq proxyd_sessions_active '' 0 10
head -c 300K /dev/urandom >"$T/cli/after.bin"
r66c "$R66_PORT" hosta:pwA --rule in --mode 3 --send "$T/cli/after.bin"
assert_eq "$R66_RC" 0 "a transfer after the mangled ones: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$R66_SRV_DIR/after.bin")" "$(sha256_of "$T/cli/after.bin")" "after.bin on the server"
r66_finish
kill "$R66_AT_PID" 2>/dev/null || true
info "PASS"
