#!/usr/bin/env bash
# Transparent mode, IPv6: the client fetches http://[2001:db8:2::2]/file (1 MB)
# through the fw, where deploy/inline-tproxy.sh diverts port 80 (ip6tables
# TPROXY) to proxyd's IPv6 IP_TRANSPARENT listener [::]:50080 (V6ONLY).
#   1. spoof-source off: bytes intact, session-end line with
#      dst=/server=[2001:db8:2::2]:80, nginx sees the fw (2001:db8:2::1), no
#      packet carries mark 0x40000000.
#   2. spoof-source="yes" mark="0x40000000": nginx sees the client
#      (2001:db8:1::2); server-side packets carry the mark, client-side ones not.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 1M
SIZE=$(stat -c %s "$T/www/file")
start_origin 80
deploy tproxy --port 80 --proxy-port 50080

nsF ip6tables -w -t mangle -A OUTPUT -p tcp -d "$TOPO_S6" --dport 80 -m mark --mark 0x40000000 \
    -m comment --comment netns-mark-server
nsF ip6tables -w -t mangle -A OUTPUT -p tcp -d "$TOPO_C6" -m mark --mark 0x40000000 \
    -m comment --comment netns-mark-client

check_session() { # N: N session-end lines so far; the last one is right
    local n line
    wait_log_count 'session-end service=tp6 ' "$1" || true
    n=$(log_count 'session-end service=tp6 ')
    assert_eq "$n" "$1" "number of session-end lines so far (one per fetch)"
    line=$(grep -E 'session-end service=tp6 ' "$PROXYD_LOG" | tail -n 1)
    info "log: $line"
    [[ $(kv "$line" client) =~ ^\[2001:db8:1::2\]:[0-9]+$ ]] || fail "client= should be [2001:db8:1::2]:PORT: $line"
    assert_eq "$(kv "$line" dst)" "[2001:db8:2::2]:80" "dst= (the original destination)"
    assert_eq "$(kv "$line" server)" "[2001:db8:2::2]:80" "server= (where proxyd connected)"
    assert_ge "$(kv "$line" to-client)" "$SIZE" "to-client bytes"
    [[ $(kv "$line" end) =~ ^(client|server)-closed$ ]] || fail "expected end=client-closed or server-closed: $line"
}

URL="http://[$TOPO_S6]/file"

# ---- 1. no spoofing, no mark
write_conf_ns
write_inline_service tp6 transparent :: 50080
start_proxyd_ns
fetch_ok "$URL?phase=nospoof" file
wait_grep "$ACCESS_LOG" 'phase=nospoof' 3 || fail "nginx did not log the request"
assert_eq "$(nginx_peers 'phase=nospoof')" "$TOPO_FS6" "address nginx saw without spoof-source (the fw's)"
check_session 1
assert_ge "$(rule_pkts 6 mangle PROXYD 'TPROXY')" 1 "packets through the ip6tables TPROXY rule"
assert_eq "$(rule_pkts 6 mangle OUTPUT '/* netns-mark-server */')" 0 "marked packets to the server without mark="
stop_proxyd_ns

# ---- 2. spoof-source="yes" and mark="0x40000000"
reset_services_ns
write_inline_service tp6 transparent :: 50080 'spoof-source="yes" mark="0x40000000"'
nsF ip6tables -w -t mangle -Z OUTPUT
start_proxyd_ns
fetch_ok "$URL?phase=spoof" file
wait_grep "$ACCESS_LOG" 'phase=spoof' 3 || fail "nginx did not log the request"
assert_eq "$(nginx_peers 'phase=spoof')" "$TOPO_C6" "address nginx saw with spoof-source=yes (the client's)"
check_session 2
pk=$(rule_pkts 6 mangle OUTPUT '/* netns-mark-server */')
info "fw mangle OUTPUT (v6): $pk packets to [$TOPO_S6]:80 with mark 0x40000000"
assert_ge "$pk" 1 "packets proxyd sent to the server with mark 0x40000000"
assert_eq "$(rule_pkts 6 mangle OUTPUT '/* netns-mark-client */')" 0 \
    "packets proxyd sent to the client with mark 0x40000000 (mark is for the server side only)"
assert_eq "$(nginx_count '"GET /file')" 2 "requests nginx served"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
