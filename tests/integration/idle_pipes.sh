#!/usr/bin/env bash
# Idle spliced sessions hold no pipes: 200 plug sessions that each moved a
# request and its response, then went quiet, cost their two sockets each
# (the pipes went back to the worker's pool), not six descriptors.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file f1k.bin 1024
start_nginx
free_port P_PLUG
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_service idleplug "$P_PLUG" "$NGINX_PORT" "<plug splice=\"auto\"/>"
start_proxyd
nfds() { find "/proc/$PROXYD_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
base=$(nfds)
N=200

info "$N sessions fetch 1 KB each over splice, then stay idle"
python3 - "$P_PLUG" "$N" "$T/idle.ready" "$T/idle.stop" <<'EOF' &
import os, socket, sys, time
port, n, ready, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /f1k.bin HTTP/1.1\r\nHost: idle\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 1024:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("closed early")
        got += chunk
    socks.append(s)
open(ready, "w").close()
deadline = time.time() + 60
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
EOF
IDLE_PID=$!
track_pid "$IDLE_PID"
for i in $(seq 300); do [[ -e $T/idle.ready ]] && break; proc_alive "$IDLE_PID" || break; sleep 0.1; done
[[ -e $T/idle.ready ]] || fail "the $N clients did not get their responses"
assert_metric eq proxyd_sessions_active '' "$N"
assert_metric eq proxyd_splice_sessions_total '' "$N"
now=$(nfds)
per=$(((now - base) * 100 / N))
per_s=$(printf '%d.%02d' $((per / 100)) $((per % 100)))
info "  descriptors: $base idle, $now with $N idle sessions: $per_s per session"
((per < 300)) || fail "$per_s descriptors per idle spliced session: its pipes were kept (2 sockets + 4 pipe ends = 6)"
touch "$T/idle.stop"
wait_exit "$IDLE_PID" 10 || fail "the idle clients did not exit"
assert_metric eq proxyd_sessions_active '' 0 10
info "ok"
