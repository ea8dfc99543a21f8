#!/usr/bin/env bash
# <clients allow="..."/>: clients outside the CIDR list are closed at once and
# logged (end=denied: client not allowed); clients inside are relayed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file index.html 4321
SHA=$(sha256_of "$T/www/index.html")
start_nginx
free_port P_TEN
free_port P_LOOP
free_port P_TWO
write_proxyd_conf
write_service ten "$P_TEN" "$NGINX_PORT" '' '10.0.0.0/8'
write_service loop "$P_LOOP" "$NGINX_PORT" '' '127.0.0.0/8'
write_service two "$P_TWO" "$NGINX_PORT" '' '127.0.0.2/32'
HAVE_V6=0
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
    HAVE_V6=1
    free_port P_V6OK
    free_port P_V6NO
    write_service v6ok "$P_V6OK" "$NGINX_PORT" '' '::1/128' '::1'
    write_service v6no "$P_V6NO" "$NGINX_PORT" '' '127.0.0.0/8 fe80::/10' '::1'
fi
start_proxyd

url_for() { # PORT [HOST]
    echo "http://${2:-127.0.0.1}:$1/index.html"
}

expect_refused() { # PORT SERVICE CLIENT_ADDR [curl args]
    local port=$1 svc=$2 addr=$3 rc=0 code host=127.0.0.1
    shift 3
    [[ $addr == *:* ]] && host="[$addr]"
    code=$(curl -g -s --max-time 10 -o "$T/out" -w '%{http_code}' "$@" "$(url_for "$port" "$host")") || rc=$?
    info "service $svc from $addr: curl rc=$rc http_code=$code"
    [[ $rc == 52 || $rc == 56 ]] ||
        fail "service $svc, client $addr not allowed: expected curl exit 52/56 (closed without reply), got rc=$rc code=$code"
    assert_eq "$code" 000 "HTTP status for a refused client ($svc from $addr)"
    assert_log "session-end service=$svc .*client=$(client_re "$addr"):[0-9]+ .* end=denied: client not allowed$"
}

expect_ok() { # PORT SERVICE CLIENT_ADDR [curl args]
    local port=$1 svc=$2 addr=$3 r host=127.0.0.1
    shift 3
    [[ $addr == *:* ]] && host="[$addr]"
    r=$(http_get "$(url_for "$port" "$host")" "$T/out" -g "$@")
    info "service $svc from $addr: curl rc/code $r"
    assert_eq "$r" "0 200" "service $svc, allowed client $addr: curl rc and HTTP status"
    assert_eq "$(sha256_of "$T/out")" "$SHA" "service $svc, client $addr: body sha256"
    assert_log "session-end service=$svc .*client=$(client_re "$addr"):[0-9]+ .* end=(client|server)-closed$"
}

# client_re ADDR: regex for the client= value (IPv6 may be printed bracketed)
client_re() {
    local a=${1//./\\.}
    if [[ $1 == *:* ]]; then echo "\\[?$a\\]?"; else echo "$a"; fi
}

info "allow=10.0.0.0/8, client 127.0.0.1"
expect_refused "$P_TEN" ten 127.0.0.1
info "allow=127.0.0.0/8, client 127.0.0.1"
expect_ok "$P_LOOP" loop 127.0.0.1
info "allow=127.0.0.2/32, client 127.0.0.2"
expect_ok "$P_TWO" two 127.0.0.2 --interface 127.0.0.2
info "allow=127.0.0.2/32, client 127.0.0.1"
expect_refused "$P_TWO" two 127.0.0.1

want_denied=2 want_ok=2
if ((HAVE_V6)); then
    info "IPv6: listen [::1], allow=::1/128, client ::1"
    expect_ok "$P_V6OK" v6ok ::1
    info "IPv6: listen [::1], allow=127.0.0.0/8 fe80::/10, client ::1"
    expect_refused "$P_V6NO" v6no ::1
    want_denied=3 want_ok=3
else
    info "no IPv6 loopback: IPv6 part skipped"
fi

n=$(grep -c 'end=denied: client not allowed$' "$PROXYD_LOG" || true)
assert_eq "$n" "$want_denied" "number of end=denied: client not allowed lines"
assert_metric ge proxyd_sessions_denied_total 'reason="acl"' "$want_denied"
# refused clients must never reach the origin: nginx saw exactly the allowed requests
assert_eq "$(grep -c 'GET /index.html' "$T/nginx/logs/access.log" || true)" "$want_ok" "requests seen by nginx"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
