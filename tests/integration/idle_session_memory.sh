#!/usr/bin/env bash
# Memory of an idle session: N connections through a plug service (the
# server connected, nothing relayed), N keep-alive connections through
# an http service (one request answered, then idle, the server connection
# kept) and N HTTP/2 connections over TLS through an http service that
# terminates it (ALPN h2, the preface and SETTINGS exchanged both ways,
# then nothing), one worker, each in a proxyd of its own; proxyd's RSS
# growth per session must stay under a bound: plug 2.5 KB, http 5 KB, h2
# 32 KB (issue 27's targets for the first two; measured 2.4 and 4.6 KB.
# Before: 3.3 and 4.4 KB, and 5.0 and 7.0 KB before that: struct
# px_session was 4.9 KB, with a relay a driver analyser never uses, a
# driver's conns a plug session never uses and the pumps of a pass few
# sessions make, now each allocated by the sessions that use them; then
# the relay's pumps and conns sharing their memory (one mode at a time),
# and a rule, a finish reason and a driver's timer allocated by the
# sessions that have one. h2, issue 36: 40.0 KB, 20 KB of it nghttp2's
# frame buffer and stream map, made on memory the handshakes had written
# and freed; now 28.0 KB, their pages taken only as written: a page for
# an idle connection; HAProxy 2.6's is 20 KB in bench/h2mem.py's count).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup
P=$T/pki
tls_self leaf localhost "DNS:localhost"

N=${IDLE_N:-1000}
PLUG_MAX_B=${PLUG_MAX_B:-2560}
HTTP_MAX_B=${HTTP_MAX_B:-5120}
H2_MAX_B=${H2_MAX_B:-32768}
make_file 1k.bin 1024
start_nginx
free_port PP
free_port PH
write_proxyd_conf 'max-sessions="5000" idle-timeout="5m"'
sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s/level="info"/level="warning"/' "$PROXYD_CONF"

cat >"$T/idle.py" <<'PY'
import os, socket, ssl, struct, sys, time
port, n, mode, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if mode == "h2":
    ctx = ssl.create_default_context(cafile=sys.argv[5])
    ctx.set_alpn_protocols(["h2"])
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"

def h2_idle(s):
    # our preface and SETTINGS; theirs acknowledged; their ack of ours read
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SETTINGS)
    got, theirs, acked = b"", False, False
    while not (theirs and acked):
        while len(got) < 9 or len(got) < 9 + struct.unpack(">I", b"\0" + got[:3])[0]:
            d = s.recv(65536)
            if not d:
                sys.exit("h2: closed")
            got += d
        ln = struct.unpack(">I", b"\0" + got[:3])[0]
        typ, flags = got[3], got[4]
        if typ == 4 and flags & 1:
            acked = True
        elif typ == 4:
            theirs = True
            s.sendall(ACK)
        elif typ == 7:
            sys.exit("h2: GOAWAY")
        got = got[9 + ln:]

socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if mode == "h2":
        s = ctx.wrap_socket(s, server_hostname="localhost")
        if s.selected_alpn_protocol() != "h2":
            sys.exit("ALPN: %r" % s.selected_alpn_protocol())
        h2_idle(s)
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
        python3 "$T/idle.py" "$port" "$n" "$mode" "$stop" "$P/leaf.pem" >"$T/idle-$name-$round.out" 2>&1 &
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
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop on TERM"
reset_services
free_port P2
write_http_service h2 "$P2" "$NGINX_PORT" "<http h2=\"yes\"/>
  <tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"/>"
start_proxyd
per_h2=$(measure h2 "$P2" h2)
info "RSS per idle session: plug $per_plug B, http $per_http B, h2 $per_h2 B (N=$N)"
if http_sanitized; then
    info "sanitizer build: sizes not asserted"
else
    assert_lt "$per_plug" "$PLUG_MAX_B" "bytes per idle plug session"
    assert_lt "$per_http" "$HTTP_MAX_B" "bytes per idle http session"
    assert_lt "$per_h2" "$H2_MAX_B" "bytes per idle HTTP/2 session (TLS)"
fi
info "OK"
