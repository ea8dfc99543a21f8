#!/usr/bin/env bash
# SIGTERM: listeners close at once, live sessions may finish within
# shutdown-grace, then proxyd exits 0; sessions still live after the grace are
# closed with end=shutdown.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 sha256sum
setup

make_file 20m.bin 20M
SHA=$(sha256_of "$T/www/20m.bin")
SIZE=$(stat -c %s "$T/www/20m.bin")
start_nginx

# wait_size FILE BYTES TIMEOUT_S
wait_size() {
    local deadline=$(($(now_ms) + $3 * 1000)) s
    while :; do
        s=$(stat -c %s "$1" 2>/dev/null || echo 0)
        ((s >= $2)) && return 0
        (($(now_ms) < deadline)) || return 1
        sleep 0.05
    done
}

# ------------------------------------------------------------------ part 1
info "part 1: shutdown-grace=30s, 20 MB at 2 MB/s"
free_port P
write_proxyd_conf 'shutdown-grace="30s"'
write_service drain "$P" "$NGINX_PORT"
start_proxyd

curl -sS --max-time 60 --limit-rate 2M -o "$T/out1" -w '%{http_code}' "http://127.0.0.1:$P/20m.bin" >"$T/code1" 2>"$T/curl1.err" &
CURL1=$!
track_pid "$CURL1"
wait_size "$T/out1" $((2 * 1024 * 1024)) 10 || fail "transfer through proxyd did not start (got $(stat -c %s "$T/out1" 2>/dev/null || echo 0) bytes in 10 s)"
kill -TERM "$PROXYD_PID"
t_term=$(now_ms)
info "SIGTERM sent at $(stat -c %s "$T/out1") bytes"

# the listener must close: new connections are refused
wait_not_listening "$P" 3 || fail "port $P still listening 3 s after SIGTERM"
rc=0
curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$P/20m.bin" || rc=$?
assert_eq "$rc" 7 "curl exit status for a new connection after SIGTERM (7 = connection refused)"
proc_alive "$CURL1" || fail "the live transfer ended right after SIGTERM (expected it to be allowed to finish)"
proc_alive "$PROXYD_PID" || fail "proxyd exited while a session was live and shutdown-grace=30s"

wait_exit "$CURL1" 40 || fail "live transfer did not finish within 40 s of SIGTERM"
assert_eq "$WAIT_RC" 0 "curl exit status of the live transfer (stderr: $(cat "$T/curl1.err"))"
assert_eq "$(cat "$T/code1")" 200 "HTTP status of the live transfer"
assert_eq "$(sha256_of "$T/out1")" "$SHA" "sha256 of the transfer that was live during SIGTERM"
wait_exit "$PROXYD_PID" 10 || fail "proxyd still running 10 s after its last session ended"
info "proxyd exited $(($(now_ms) - t_term)) ms after SIGTERM with status $WAIT_RC"
assert_eq "$WAIT_RC" 0 "proxyd exit status after SIGTERM (drained)"
line=$(session_end_lines drain | tail -n 1)
info "log: $line"
assert_ge "$(kv "$line" to-client)" "$SIZE" "to-client bytes of the drained session"
[[ $(kv "$line" end) == client-closed || $(kv "$line" end) == server-closed ]] ||
    fail "drained session: expected end=client-closed or server-closed, got '$(kv "$line" end)'"
assert_no_grep "$PROXYD_LOG" 'end=shutdown' "part 1: a session was cut by the shutdown although it finished within the grace"

# ------------------------------------------------------------------ part 2
info "part 2: shutdown-grace=1s, 20 MB read at 200 kB/s"
PROXYD_LOG=$T/proxyd2.log
ADMIN_PORT=""
reset_services
free_port P
write_proxyd_conf 'shutdown-grace="1s"'
write_service cut "$P" "$NGINX_PORT"
start_proxyd

# a python client reading at 200 kB/s until $T/go exists, then as fast as it can:
# it must then see the connection closed (EOF/RST) well short of the 20 MB
cat >"$T/slow.py" <<'PY'
import os, socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"GET /20m.bin HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(10)
n, t0, st = 0, time.monotonic(), "TIMEOUT"
deadline = t0 + 60
try:
    while time.monotonic() < deadline:
        if not os.path.exists(go):
            time.sleep(max(0.0, n / 200e3 - (time.monotonic() - t0)))
        d = s.recv(16384)
        if not d:
            st = "EOF"
            break
        n += len(d)
        if n >= 200 * 1024 and not os.path.exists(go + ".started"):
            open(go + ".started", "w").close()
except socket.timeout:
    st = "TIMEOUT"
except ConnectionResetError:
    st = "RESET"
print(st, n)
PY
python3 "$T/slow.py" "$P" "$T/go" >"$T/slow.out" 2>&1 &
SLOW=$!
track_pid "$SLOW"
deadline=$(($(now_ms) + 10000))
until [[ -e $T/go.started ]]; do
    (($(now_ms) < deadline)) || fail "transfer through proxyd did not start"
    sleep 0.05
done
kill -TERM "$PROXYD_PID"
t_term=$(now_ms)
wait_exit "$PROXYD_PID" 10 || fail "proxyd still running 10 s after SIGTERM with shutdown-grace=1s"
dt=$(($(now_ms) - t_term))
info "proxyd exited $dt ms after SIGTERM with status $WAIT_RC"
assert_eq "$WAIT_RC" 0 "proxyd exit status after SIGTERM with a session cut at the end of the grace"
((dt >= 800)) || fail "proxyd exited $dt ms after SIGTERM, before the 1 s shutdown-grace"
((dt <= 3000)) || fail "proxyd exited $dt ms after SIGTERM, expected within ~3 s with shutdown-grace=1s"
assert_log 'session-end service=cut .* end=shutdown$'
line=$(session_end_lines cut | tail -n 1)
info "log: $line"
assert_lt "$(kv "$line" to-client)" "$SIZE" "to-client bytes of the session cut by the shutdown"
# let the client drain what the kernel still holds: it must end with EOF/RST, short of the file
touch "$T/go"
wait_exit "$SLOW" 20 || fail "client of the cut session did not see the connection closed within 20 s"
out=$(cat "$T/slow.out")
info "client of the cut session: $out"
read -r st n <<<"$out"
[[ $st == EOF || $st == RESET ]] || fail "client of the cut session: expected EOF or RST, got '$out'"
assert_lt "$n" "$SIZE" "bytes received by the client of the cut session"
info "PASS"
