#!/usr/bin/env bash
# The http analyser inline, transparent mode (TPROXY): the client fetches
# http://198.19.2.2/file through the fw, where port 80 is diverted to
# proxyd's http service on 50080.
#   1. the file arrives byte for byte; the http-request line names the
#      original destination as server; a second client connection reuses the
#      pooled server connection (proxyd_upstream_connections_total).
#   2. a Host naming another port than the one the client connected to is
#      refused (400, http-error line) and never reaches nginx; a Host name on
#      the right port passes (names are not resolved).
#      A rule that a second deploy run appends (port 81) is reached too.
#   3. with spoof-source, nginx sees the client's own address.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 256K
start_origin 80
deploy tproxy --port 80 --proxy-port 50080

write_http_service() { # [UPSTREAM_ATTRS]
    local upstream=""
    [[ -n ${1:-} ]] && upstream="<upstream $1/>"
    cat >"$T/policy/web.xml" <<EOX
<service name="web" analyser="http">
  <listen address="0.0.0.0" port="50080" mode="transparent"/>
  $upstream
  <http/>
</service>
EOX
    NS_PORTS+=(50080)
}

# ---- 1. fetch, log line, pooled reuse
write_conf_ns
# Pools are per worker: with one, the second client must get the first's.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service
start_proxyd_ns
fetch_ok "http://$TOPO_S4/file?phase=one" file
fetch_ok "http://$TOPO_S4/file?phase=two" file
wait_log_count 'http-request .*phase=two' 1 || true
line=$(grep -E 'http-request .*phase=two' "$PROXYD_LOG" | tail -n 1)
info "log: $line"
assert_eq "$(kv "$line" status)" 200 "status of the second fetch"
assert_eq "$(kv "$line" server)" "$TOPO_S4:80" "server= (the original destination)"
assert_eq "$(kv "$line" upstream)" pooled "the second client connection's server connection"
assert_eq "$(metric_value proxyd_upstream_connections_total 'kind="new"')" 1 "new server connections"
assert_ge "$(metric_value proxyd_upstream_connections_total 'kind="reused"')" 1 "reused server connections"
assert_eq "$(nginx_peers 'phase=two')" "$TOPO_FS4" "address nginx saw (the fw's: no spoofing)"

# ---- 2. Host must match where the client was going
r=$(client_get "http://$TOPO_S4/file?phase=badhost" "$T/out.bad" -H "Host: $TOPO_S4:8080")
assert_eq "$r" "0 400" "curl rc and status for a Host naming port 8080"
wait_log_count 'http-error status=400 reason="Host does not match the destination"' 1 ||
    fail "no http-error line for the Host mismatch"
# the refused request's own session ends without a byte sent to the server
wait_log_count 'http-request .*phase=badhost status=400 ' 1 || fail "no http-request line for the Host mismatch"
sid=$(grep -E 'http-request .*phase=badhost status=400 ' "$PROXYD_LOG" | tail -n 1 | sed -nE 's/.* #([0-9]+) http-request.*/\1/p')
wait_log_count " #$sid session-end service=web " 1 || fail "no session-end line for session #$sid (the Host mismatch)"
line=$(grep -E " #$sid session-end service=web " "$PROXYD_LOG" | tail -n 1)
info "log: $line"
assert_eq "$(kv "$line" to-server)" 0 "bytes the Host-mismatch session sent to the server"
# the next request is the sentinel: nginx (one worker) logs requests in the
# order it finishes them, so once its line is there a forwarded badhost
# request would be there too
r=$(client_get "http://$TOPO_S4/file?phase=name" "$T/out.name" -H "Host: www.example.test")
assert_eq "$r" "0 200" "curl rc and status for a Host name on port 80"
wait_grep "$ACCESS_LOG" 'phase=name' 5 || fail "nginx did not log the request with a Host name (the sentinel)"
assert_eq "$(nginx_count 'phase=badhost')" 0 "requests with a mismatched Host that reached nginx"

# A second deploy run for another port appends its rule: it must still be
# reached (nothing listens on 81 in the server: proxyd answers 502 itself,
# where a forwarded connection would be refused by the server).
deploy tproxy --port 81 --proxy-port 50080
r=$(client_get "http://$TOPO_S4:81/phase=port81" "$T/out.81")
assert_eq "$r" "0 502" "curl rc and status for port 81 (diverted by the second run's rule)"
wait_log_count "http-request .*path=/phase=port81 status=502 .*server=$TOPO_S4:81" 1 ||
    fail "no http-request line for the port 81 request"
stop_proxyd_ns

# ---- 3. spoof-source: the server sees the client
reset_services_ns
write_http_service 'spoof-source="yes" mark="0x40000000"'
start_proxyd_ns
fetch_ok "http://$TOPO_S4/file?phase=spoof" file
wait_grep "$ACCESS_LOG" 'phase=spoof' 3 || fail "nginx did not log the request"
assert_eq "$(nginx_peers 'phase=spoof')" "$TOPO_C4" "address nginx saw with spoof-source=yes (the client's)"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
