#!/usr/bin/env bash
# Memory of an idle session: N connections through a plug service (the
# server connected, nothing relayed) and N keep-alive connections through
# an http service (one request answered, then idle, the server connection
# kept), one worker, each in a proxyd of its own; proxyd's RSS growth per
# session must stay under a bound: plug 2.5 KB, http 5 KB (issue 27's
# targets; measured 2.4 and 4.6 KB. Before: 3.3 and 4.4 KB, and 5.0 and
# 7.0 KB before that: struct px_session was 4.9 KB, with a relay a driver
# analyser never uses, a driver's conns a plug session never uses and the
# pumps of a pass few sessions make, now each allocated by the sessions
# that use them; then the relay's pumps and conns sharing their memory
# (one mode at a time), and a rule, a finish reason and a driver's timer
# allocated by the sessions that have one).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

N=${IDLE_N:-1000}
PLUG_MAX_B=${PLUG_MAX_B:-2560}
HTTP_MAX_B=${HTTP_MAX_B:-5120}
make_file 1k.bin 1024
start_nginx
free_port PP
free_port PH
write_proxyd_conf 'max-sessions="5000" idle-timeout="5m"'
sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s/level="info"/level="warning"/' "$PROXYD_CONF"

cat >"$T/idle.py" <<'PY'
import os, socket, sys, time
port, n, mode, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if mode == "http":
        s.sendall(b"GET /1k.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while not (b"\r\n\r\n" in got and len(got.split(b"\r\n\r\n", 1)[1]) >= 1024):
            d = s.recv(65536)
            if not d:
                sys.exit("closed after %d bytes" % len(got))
            got += d
    socks.append(s)
print("connected", flush=True)
deadline = time.time() + 120
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY

settle_rss() {  # the RSS once it has not grown for 1 s (bounded)
    local last=-1 same=0 rss i
    for ((i = 0; i < 100; i++)); do
        rss=$(vm_kb "$PROXYD_PID" VmRSS)
        if ((rss <= last)); then
            same=$((same + 1)); ((same >= 10)) && break
        else
            same=0; last=$rss
        fi
        sleep 0.1
    done
    echo "$last"
}

measure() { # NAME PORT MODE: prints bytes of RSS per idle session
    local name=$1 port=$2 mode=$3 base after stop=$T/stop-$1
    # a few first so that what is allocated once (pools, the log ring)
    # is not counted, then N (not N twice: the second N would reuse the
    # memory the first freed)
    local round n
    for round in warm measured; do
        n=$N; [[ $round == warm ]] && n=20
        rm -f "$stop"
        base=$(settle_rss)
        python3 "$T/idle.py" "$port" "$n" "$mode" "$stop" >"$T/idle-$name-$round.out" 2>&1 &
        local cpid=$!
        track_pid "$cpid"
        wait_grep "$T/idle-$name-$round.out" connected 60 || fail "$name: clients did not connect: $(cat "$T/idle-$name-$round.out")"
        after=$(settle_rss)
        touch "$stop"
        wait "$cpid" || true
        assert_metric eq proxyd_sessions_active '' 0 10 >&2
    done
    echo $(( (after - base) * 1024 / N ))
}
# each in a proxyd of its own: one would reuse the memory the other freed
write_service plug "$PP" "$NGINX_PORT"
start_proxyd
per_plug=$(measure plug "$PP" plug)
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop on TERM"
reset_services
write_http_service web "$PH" "$NGINX_PORT" '<http/>'
start_proxyd
per_http=$(measure web "$PH" http)
info "RSS per idle session: plug $per_plug B, http $per_http B (N=$N)"
if http_sanitized; then
    info "sanitizer build: sizes not asserted"
else
    assert_lt "$per_plug" "$PLUG_MAX_B" "bytes per idle plug session"
    assert_lt "$per_http" "$HTTP_MAX_B" "bytes per idle http session"
fi
info "OK"
