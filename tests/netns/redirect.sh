#!/usr/bin/env bash
# Redirect mode: deploy/inline-tproxy.sh redirect sends forwarded connections
# to port 80 to proxyd's port 50081 (nat PREROUTING REDIRECT, then the DNAT
# variant to the fw's own inside address); proxyd (mode="redirect") finds the
# original destination with SO_ORIGINAL_DST and connects there; then, with
# listen/@origdst="conntrack", from conntrack asked on the worker's loop.
# IPv4 and IPv6: bytes intact (sha256), session-end dst=/server= the server's
# port 80, nginx sees the fw, and proxyd_conntrack_lookups_total{result="original-dst"}
# counts the lookups (none failed).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 1M
SIZE=$(stat -c %s "$T/www/file")
start_origin 80

write_conf_ns
write_inline_service rd redirect 0.0.0.0 50081
write_inline_service rd6 redirect :: 50081
start_proxyd_ns

NTH=0 # session-end lines so far

# fetch_check FAMILY PHASE: fetch through the fw, then check log, nginx, metrics
fetch_check() {
    local fam=$1 phase=$2 url svc dst client_re peer line
    if [[ $fam == 4 ]]; then
        url="http://$TOPO_S4/file?phase=$phase" svc=rd dst="198.19.2.2:80"
        client_re='^198\.18\.1\.2:[0-9]+$' peer=$TOPO_FS4
    else
        url="http://[$TOPO_S6]/file?phase=$phase" svc=rd6 dst="[2001:db8:2::2]:80"
        client_re='^\[2001:db8:1::2\]:[0-9]+$' peer=$TOPO_FS6
    fi
    fetch_ok "$url" file
    NTH=$((NTH + 1))
    wait_log_count 'session-end ' "$NTH" || true
    assert_eq "$(log_count 'session-end ')" "$NTH" "number of session-end lines so far (one per fetch)"
    line=$(grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1)
    info "log: $line"
    [[ $line == *"session-end service=$svc "* ]] || fail "last session-end line is not for service $svc: $line"
    [[ $(kv "$line" client) =~ $client_re ]] || fail "client= is not the client: $line"
    assert_eq "$(kv "$line" dst)" "$dst" "dst= (original destination), phase $phase"
    assert_eq "$(kv "$line" server)" "$dst" "server= (where proxyd connected), phase $phase"
    assert_ge "$(kv "$line" to-client)" "$SIZE" "to-client bytes, phase $phase"
    wait_grep "$ACCESS_LOG" "phase=$phase " 3 || fail "nginx did not log the request of phase $phase"
    assert_eq "$(nginx_peers "phase=$phase ")" "$peer" "address nginx saw, phase $phase (the fw's)"
    assert_metric eq proxyd_conntrack_lookups_total 'result="failed"' 0
}

# ---- REDIRECT
deploy redirect --port 80 --proxy-port 50081
fetch_check 4 redirect4
assert_ge "$(rule_pkts 4 nat PROXYD REDIRECT)" 1 "connections through the iptables REDIRECT rule"
fetch_check 6 redirect6
assert_ge "$(rule_pkts 6 nat PROXYD REDIRECT)" 1 "connections through the ip6tables REDIRECT rule"

# ---- DNAT to the fw's inside addresses
deploy clear
deploy redirect --port 80 --proxy-port 50081 --to "$TOPO_FC4" --to6 "$TOPO_FC6"
fetch_check 4 dnat4
assert_ge "$(rule_pkts 4 nat PROXYD DNAT)" 1 "connections through the iptables DNAT rule"
fetch_check 6 dnat6
assert_ge "$(rule_pkts 6 nat PROXYD DNAT)" 1 "connections through the ip6tables DNAT rule"

# every lookup so far answered by the socket option: no netlink round trip
assert_metric eq proxyd_conntrack_lookups_total 'result="original-dst"' 4
assert_metric eq proxyd_conntrack_lookups_total 'result="conntrack"' 0

# ---- origdst="conntrack": asked of conntrack, without blocking the worker
for f in "$T"/policy/rd.xml "$T"/policy/rd6.xml; do
    sed -i 's|mode="redirect"/>|mode="redirect" origdst="conntrack"/>|' "$f"
done
grep -q 'origdst="conntrack"' "$T/policy/rd.xml" || fail "could not set origdst in rd.xml"
kill -HUP "$PROXYD_PID"
wait_grep "$PROXYD_LOG" 'reload done' 10 || fail "no 'reload done' after SIGHUP"
fetch_check 4 conntrack4
fetch_check 6 conntrack6
assert_metric eq proxyd_conntrack_lookups_total 'result="conntrack"' 2
assert_metric eq proxyd_conntrack_lookups_total 'result="original-dst"' 4

info "metrics: $(metrics_fetch | grep -E '^proxyd_conntrack_lookups_total' | tr '\n' ' ')"
assert_eq "$(nginx_count '"GET /file')" 6 "requests nginx served"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
