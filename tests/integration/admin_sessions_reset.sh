#!/usr/bin/env bash
# POST /sessions/reset (what keepalived's notify script calls on leaving
# MASTER, deploy/ha/pair.sh): every live session ends at once with a reset,
# each logged by=shutdown with the reason (end=ha: left master); the admin
# keeps answering and new connections are relayed. Refused: GET (405), a
# request with an Origin header (403: a web page on the box), an unknown
# reason (400); none of these ends a session.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds curl python3
setup

# the server sends a line every 100 ms to each client, forever
start_py_server SRV <<'PY'
import threading
def drip(c):
    with c:
        try:
            while True:
                c.sendall(b"tick\n")
                time.sleep(0.1)
        except OSError:
            pass
def handle(c):
    threading.Thread(target=drip, args=(c.dup(),), daemon=True).start()
PY
free_port P
write_proxyd_conf
write_service drip "$P" "$SRV"
start_proxyd
ADMIN="http://127.0.0.1:$ADMIN_PORT"

# N clients that only read (as a download does): each writes how its
# connection ended (reset, closed, timeout) and after how long
cat >"$T/reader.py" <<'PY'
import os, socket, sys, time
port, out, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(n)]
for s in socks:
    s.settimeout(20)
    assert s.recv(5) == b"tick\n"
open(out + ".ready", "w").close()
res = []
for s in socks:
    try:
        while s.recv(65536):
            pass
        res.append("closed")
    except ConnectionResetError:
        res.append("reset")
    except socket.timeout:
        res.append("timeout")
with open(out + ".tmp", "w") as f:
    f.write("\n".join(res) + "\n")
os.rename(out + ".tmp", out)
PY
N=4
python3 "$T/reader.py" "$P" "$T/ends" "$N" 2>>"$T/reader.err" &
READER=$!
track_pid "$READER"
wait_file "$T/ends.ready" 15 || fail "the readers did not start: $(cat "$T/reader.err")"
assert_metric eq proxyd_sessions_active 'service="drip"' "$N"

# refused requests end nothing
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 5 "$@"; }
assert_eq "$(code "$ADMIN/sessions/reset")" 405 "GET /sessions/reset"
assert_eq "$(code -X POST -d '' -H 'Origin: http://example.test' "$ADMIN/sessions/reset?reason=ha")" 403 \
    "POST /sessions/reset with an Origin header"
assert_eq "$(code -X POST -d '' "$ADMIN/sessions/reset?reason=other")" 400 "POST /sessions/reset?reason=other"
assert_metric eq proxyd_sessions_active 'service="drip"' "$N"
assert_no_grep "$PROXYD_LOG" 'session-end' "a session ended by a refused reset request"

t0=$(now_ms)
assert_eq "$(code -X POST -d '' "$ADMIN/sessions/reset?reason=ha")" 200 "POST /sessions/reset?reason=ha"
grep -q "\"live_sessions\":$N," "$T/body" || fail "reset answer: $(cat "$T/body")"
wait_file "$T/ends" 10 || fail "the readers still wait 10 s after the reset"
t1=$(now_ms)
assert_eq "$(sort -u "$T/ends")" reset "how the readers' connections ended"
assert_lt "$((t1 - t0))" 3000 "ms from the reset request to the readers' resets"
wait_exit "$READER" 5 || fail "reader did not exit"
wait_grep "$PROXYD_LOG" "admin: resetting every live session \\($N\\) on [0-9]+ worker\\(s\\): ha: left master" ||
    fail "no admin log line for the reset"
for ((i = 0; i < 50; i++)); do
    (($(grep -c 'session-end service=drip' "$PROXYD_LOG") >= N)) && break
    sleep 0.1
done
assert_eq "$(grep -c 'session-end service=drip .*by=shutdown phase=data end=ha: left master$' "$PROXYD_LOG")" "$N" \
    "session-end lines by=shutdown end=ha: left master"
assert_metric eq proxyd_sessions_active 'service="drip"' 0

# without a reason: the admin's own; and proxyd goes on relaying
python3 - "$P" <<'PY' || fail "a new connection after the reset was not relayed"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
assert s.recv(5) == b"tick\n"
PY
assert_eq "$(code -X POST -d '' "$ADMIN/sessions/reset")" 200 "POST /sessions/reset"
grep -q '"reason":"admin: sessions reset"' "$T/body" || fail "reset answer: $(cat "$T/body")"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS: $N readers reset $((t1 - t0)) ms after POST /sessions/reset"
