#!/usr/bin/env bash
# Traffic that no rule diverts is the kernel's business, not proxyd's: with
# proxyd running and port 80 diverted by TPROXY, port 8080 (no service, no
# rule) is
#   1. forwarded by the kernel while FORWARD accepts it: the client gets the
#      file intact, nginx sees the client's own address, proxyd logs nothing
#      (a proxied request on port 80 right after does get its line: the log works);
#   2. dropped once a FORWARD rule drops tcp/8080: curl --max-time 3 times out,
#      nginx sees nothing, proxyd logs nothing; port 80 is still proxied;
#   3. even with FORWARD policy DROP, port 80 is proxied: diverted connections
#      are delivered locally and proxyd's own go out through OUTPUT, so FORWARD
#      rules never see proxied traffic (deploy/README.md says so; this checks it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 256K
start_origin 80 8080
deploy tproxy --port 80 --proxy-port 50080
write_conf_ns
# one worker: its log lines are in order, so once a later proxied request has
# its session-end line, a session proxyd had made of the 8080 traffic would
# have its line too (the proxied requests below are the sentinels for "proxyd
# logs nothing")
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_inline_service tp transparent 0.0.0.0 50080
start_proxyd_ns

# ---- 1. FORWARD policy ACCEPT: kernel forwarding
nsF iptables -w -P FORWARD ACCEPT
nsF iptables -w -A FORWARD -p tcp --dport 8080 -m comment --comment netns-fwd-8080 # counter only
fetch_ok "http://$TOPO_S4:8080/file?phase=forward" file
wait_grep "$ACCESS_LOG" 'phase=forward ' 3 || fail "nginx did not log the forwarded request"
assert_eq "$(nginx_peers 'phase=forward ')" "$TOPO_C4" "address nginx saw on 8080 (kernel forwarding keeps the client's)"
assert_ge "$(rule_pkts 4 filter FORWARD '/* netns-fwd-8080 */')" 1 "packets forwarded to port 8080"
# a proxied request afterwards (the sentinel): once its line is there, the
# 8080 one would be too (one worker)
fetch_ok "http://$TOPO_S4/file?phase=proxied" file
assert_log "session-end service=tp .*dst=198\.19\.2\.2:80 .* end=" 5
assert_eq "$(log_count 'session-end ')" 1 "session-end lines (only the port-80 request)"
assert_eq "$(log_count ':8080 ')" 0 "log lines mentioning port 8080"
assert_eq "$(nginx_peers 'phase=proxied ')" "$TOPO_FS4" "address nginx saw on 80 (proxied, no spoofing)"

# ---- 2. FORWARD DROP for tcp/8080
nsF iptables -w -I FORWARD 1 -p tcp --dport 8080 -j DROP
rc=0
t0=$(now_ms)
code=$(nsC curl -gsS --max-time 3 -o "$T/out.drop" -w '%{http_code}' "http://$TOPO_S4:8080/file?phase=dropped" 2>>"$T/curl.err") || rc=$?
dt=$(($(now_ms) - t0))
info "client: curl :8080 with FORWARD DROP -> rc=$rc code=$code after ${dt} ms"
assert_eq "$rc" 28 "curl exit status with FORWARD DROP (28 = timed out)"
assert_ge "$dt" 2500 "milliseconds before curl gave up (a drop, not a refusal)"
assert_ge "$(rule_pkts 4 filter FORWARD 'DROP')" 1 "SYNs dropped by the FORWARD rule"
# port 80 is diverted in PREROUTING, before FORWARD: still proxied.  This
# request is also the sentinel: once proxyd logged its end (one worker) and
# nginx (one worker, lines in the order it finishes requests) logged it,
# anything of the dropped request that got through would be logged as well.
fetch_ok "http://$TOPO_S4/file?phase=proxied2" file
wait_log_count 'session-end service=tp .*dst=198\.19\.2\.2:80 ' 2 || true
wait_grep "$ACCESS_LOG" 'phase=proxied2 ' 5 || fail "nginx did not log the second proxied request (the sentinel)"
assert_eq "$(nginx_count 'phase=dropped')" 0 "dropped requests nginx saw"
assert_eq "$(log_count 'session-end ')" 2 "session-end lines (the two port-80 requests, nothing of the dropped one)"
assert_eq "$(log_count 'session-end service=tp ')" 2 "session-end lines after the second port-80 request"

# ---- 3. FORWARD policy DROP: proxied traffic never crosses FORWARD
nsF iptables -w -P FORWARD DROP
nsF iptables -w -Z FORWARD
fetch_ok "http://$TOPO_S4/file?phase=policydrop" file
wait_log_count 'session-end service=tp ' 3 || true
assert_eq "$(log_count 'session-end service=tp ')" 3 "session-end lines after a port-80 request with FORWARD policy DROP"
assert_eq "$(nsF iptables -w -L FORWARD -n -v -x | awk 'NR == 1 { print $5 }')" 0 "packets dropped by the FORWARD policy"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
