#!/usr/bin/env bash
# A client's TLS handshake that fails or is abandoned ends the same way on
# every analyser (plug, http): by=client-fail phase=accept end=client-error:
# tls: <reason>, counted once in proxyd_tls_failures_total. Cases: a FIN
# before any byte, a FIN inside the ClientHello, bytes that are not TLS,
# an RST before any byte and inside the ClientHello, and a client that
# sends nothing until handshake-timeout. Each is waited for by its own
# session-end line; a good request follows as a sentinel.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth
make_file 4k.bin 4096
start_nginx
free_port P_PLUG
free_port P_HTTP
write_proxyd_conf
TLS="<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" handshake-timeout=\"1s\"/>"
write_service fplug "$P_PLUG" "$NGINX_PORT" "$TLS"
write_http_service fhttp "$P_HTTP" "$NGINX_PORT" "$TLS"
start_proxyd

# peer PORT MODE: one client connection that misbehaves as MODE says.
peer() {
    python3 - "$1" "$2" <<'EOF'
import socket, struct, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
# The start of a ClientHello: a record header and a handshake header that
# announce more than is sent.
partial = b"\x16\x03\x01\x00\xc8" + b"\x01\x00\x00\xc4\x03\x03" + b"\x11" * 20
s = socket.create_connection(("127.0.0.1", port), timeout=10)
if mode in ("fin-partial", "rst-partial"):
    s.sendall(partial)
elif mode == "garbage":
    s.sendall(bytes(range(256)) * 2)
time.sleep(0.2)  # proxyd has read what was sent
if mode.startswith("rst"):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    sys.exit(0)
try:
    if mode.startswith("fin") or mode == "garbage":
        s.shutdown(socket.SHUT_WR)  # (garbage: proxyd may be gone already)
except OSError:
    pass
# wait for proxyd's close (the timeout case: its timer)
try:
    while s.recv(4096):
        pass
except OSError:
    pass
EOF
}

# ends SERVICE: its session-end lines so far
ends() { session_end_lines "$1" | wc -l; }
wait_ends() { # SERVICE COUNT
    local i
    for i in $(seq 150); do
        (($(ends "$1") >= $2)) && return 0
        sleep 0.1
    done
    fail "$1: $(ends "$1") session-end lines, expected $2"
}
# failures SERVICE ANALYSER [REASON]: proxyd_tls_failures_total, client side
failures() {
    local v
    v=$(metric_value proxyd_tls_failures_total "service=\"$1\",analyser=\"$2\",side=\"client\"${3:+,reason=\"$3\"}")
    [[ $v == NA ]] && v=0
    echo "$v"
}

for svc in plug http; do
    [[ $svc == plug ]] && port=$P_PLUG || port=$P_HTTP
    name=f$svc
    n=0
    before=$(failures "$name" "$svc")
    for c in "fin-empty|closed before the handshake" \
        "fin-partial|closed during the handshake" \
        "garbage|(wrong version number|unknown protocol|packet length too long|http request)" \
        "rst-empty|Connection reset by peer during the handshake" \
        "rst-partial|Connection reset by peer during the handshake" \
        "timeout|handshake timed out"; do
        mode=${c%%|*} reason=${c#*|}
        info "$svc: $mode"
        peer "$port" "$mode"
        n=$((n + 1))
        wait_ends "$name" "$n"
        line=$(session_end_lines "$name" | tail -n 1)
        grep -Eq "verdict=error .* by=client-fail phase=accept end=client-error: tls: $reason$" <<<"$line" ||
            fail "$svc $mode: logged '$line', expected verdict=error by=client-fail phase=accept end=client-error: tls: $reason"
    done
    assert_metric eq proxyd_tls_failures_total \
        "service=\"$name\",analyser=\"$svc\",side=\"client\",reason=\"not-tls\"" 1
    assert_metric eq proxyd_tls_failures_total \
        "service=\"$name\",analyser=\"$svc\",side=\"client\",reason=\"other\"" 5
    assert_eq "$(($(failures "$name" "$svc") - before))" "$n" "$svc: TLS failures counted for $n failed handshakes"

    info "$svc: a good client after them is served"
    got=$(curl -sS --max-time 20 --cacert "$P/ca.pem" "https://localhost:$port/4k.bin" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$(sha256_of "$T/www/4k.bin")" "$svc: sha256 of the sentinel"
    assert_eq "$(failures "$name" "$svc")" "$((before + n))" "$svc: TLS failures after a good client"
    assert_metric eq proxyd_tls_handshakes_total \
        "service=\"$name\",analyser=\"$svc\",side=\"client\",resumed=\"no\"" 1
done
assert_eq "$(grep -c '"GET /4k.bin' "$T/nginx/logs/access.log" || true)" 2 "requests that reached the origin"
# the status page's JSON: the same TLS failures, which are its errors here
curl -s --max-time 3 "http://127.0.0.1:$ADMIN_PORT/api/services" | python3 -c '
import json, sys
s = {x["name"]: x["totals"] for x in json.load(sys.stdin)["services"]}
for name in ("fplug", "fhttp"):
    assert s[name]["tls_failures"] == 6 and s[name]["errors"] == 6, (name, s[name])
' || fail "/api/services totals do not count the TLS failures"
info "ok"
