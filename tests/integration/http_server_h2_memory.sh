#!/usr/bin/env bash
# Memory of a stream to an HTTP/2 server: N HTTP/1.1 clients each hold a
# response open whose head (20 fields) came from a python3-h2 origin
# (h2_origin_server.py /held), one worker; proxyd's RSS growth per held
# transaction must stay under a bound. A stream keeps its response head
# as the fields it got (sized to them), not as a struct http_head of
# HTTP_MAX_HEADERS fields and a block of as many offsets (about 14 KB
# allocated per stream before: RSS 17.1 KB per transaction measured
# against 8.5 KB after; the bound: 11 KB).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

N=${H2MEM_N:-300}
MAX_B=${H2MEM_MAX_B:-11264}
OLOG=$T/origin.log
start_h2_origin OP "$OLOG"
free_port PH
write_proxyd_conf 'max-sessions="5000" idle-timeout="5m"'
sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s/level="info"/level="warning"/' "$PROXYD_CONF"
write_http_service h2m "$PH" "$OP" '<http server-h2="yes" server-pool="4"/>'
start_proxyd

cat >"$T/held.py" <<'PY'
import os, socket, sys, time
port, n, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(65536)
        if not d:
            sys.exit("closed after %r" % got)
        got += d
    if b"x-held-19" not in got:
        sys.exit("head without its fields: %r" % got)
    socks.append(s)
print("connected", flush=True)
deadline = time.time() + 60
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY

# A few first (what is allocated once: the server connection, pools),
# then N more, all held open to the end.
for round in warm measured; do
    n=$N; [[ $round == warm ]] && n=20
    stop=$T/stop-$round
    base=$(settle_rss)
    python3 "$T/held.py" "$PH" "$n" "$stop" >"$T/held-$round.out" 2>&1 &
    cpid=$!
    track_pid "$cpid"
    wait_grep "$T/held-$round.out" connected 40 || fail "clients did not get their heads: $(cat "$T/held-$round.out")"
    after=$(settle_rss)
done
touch "$T/stop-warm" "$T/stop-measured"
per=$(( (after - base) * 1024 / N ))
info "RSS per held h2 server stream: $per B (N=$N)"
if http_sanitized; then
    info "sanitizer build: sizes not asserted"
else
    assert_lt "$per" "$MAX_B" "bytes per held h2 server stream"
fi
info "OK"
