#!/usr/bin/env bash
# Transparent mode refuses connections made straight to the proxy's own
# address and port (no original destination to go to; relaying them would
# loop): the client connects to the fw's addresses on 50080, v4 and v6; each
# is closed without a byte of reply (curl fails, HTTP 000), logged
# end=denied: direct connection to the proxy, and never reaches nginx.
# The same for a redirect-mode listener (its conntrack lookup finds the
# listener's own address as the destination).  proxyd_sessions_denied_total
# {reason="direct"} counts them.  A diverted connection through the same
# listeners still works afterwards, including one to a far server on the
# listener's own port (50080): only the proxy's own addresses are direct.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 64K
start_origin 80 50080
deploy tproxy --port 80,50080 --proxy-port 50080
write_conf_ns
write_inline_service tp transparent 0.0.0.0 50080
write_inline_service tp6 transparent :: 50080
write_inline_service rd redirect 0.0.0.0 50081
start_proxyd_ns

N=0
expect_refused() { # SERVICE URL CLIENT_RE
    local svc=$1 url=$2 cre=$3 rc=0 code line
    code=$(nsC curl -gsS --max-time 10 -o "$T/out.direct" -w '%{http_code}' "$url" 2>>"$T/curl.err") || rc=$?
    info "client: curl $url -> rc=$rc code=$code ($(tail -n 1 "$T/curl.err"))"
    # 52: empty reply, 56: reset while receiving; 7 (connection refused) would
    # mean nothing listens, 28 a hang: both wrong
    [[ $rc == 52 || $rc == 56 ]] ||
        fail "direct connection to $url: expected curl exit 52/56 (accepted, then closed without reply), got rc=$rc code=$code"
    assert_eq "$code" 000 "HTTP status of a direct connection"
    [[ ! -s $T/out.direct ]] || fail "direct connection to $url received $(stat -c %s "$T/out.direct") bytes"
    N=$((N + 1))
    wait_log_count 'end=denied: direct connection to the proxy$' "$N" || true
    assert_eq "$(log_count 'end=denied: direct connection to the proxy$')" "$N" \
        "number of 'end=denied: direct connection to the proxy' lines"
    line=$(grep -E 'end=denied: direct connection to the proxy$' "$PROXYD_LOG" | tail -n 1)
    info "log: $line"
    [[ $line == *"session-end service=$svc "* ]] || fail "denied line is not for service $svc: $line"
    [[ $(kv "$line" client) =~ $cre ]] || fail "client= is not the client: $line"
    assert_eq "$(kv "$line" rule)" builtin "rule= of a direct connection (no rule can allow it)"
}

expect_refused tp "http://$TOPO_FC4:50080/file" '^198\.18\.1\.2:[0-9]+$'
# the fw's other address (server side) is its own address as well
expect_refused tp "http://$TOPO_FS4:50080/file" '^198\.18\.1\.2:[0-9]+$'
expect_refused tp6 "http://[$TOPO_FC6]:50080/file" '^\[2001:db8:1::2\]:[0-9]+$'
# redirect mode: no NAT rule for 50081, conntrack's original destination is
# the listener itself
expect_refused rd "http://$TOPO_FC4:50081/file" '^198\.18\.1\.2:[0-9]+$'
assert_metric eq proxyd_sessions_denied_total 'reason="direct"' "$N"

# the listeners still serve diverted connections; this first one is also the
# sentinel for "the direct connections never reached nginx": nginx (one
# worker) logs requests in the order it finishes them, so once the
# sentinel's line is there, any direct request it got would be there too.
# Every direct connection already has its one session-end line (denied), so
# no later line can be theirs: the sentinel must be the only relayed session.
fetch_ok "http://$TOPO_S4/file?phase=sentinel" file
assert_log "session-end service=tp .*dst=198\.19\.2\.2:80 .* end=(client|server)-closed$" 5
wait_grep "$ACCESS_LOG" '"GET /file\?phase=sentinel ' 5 || fail "nginx did not log the sentinel request"
assert_eq "$(nginx_count '"GET /file ')" 0 "requests nginx saw from direct connections"
assert_eq "$(log_count 'session-end .* end=(client|server)-closed$')" 1 "relayed sessions (only the sentinel, none of the direct connections)"
# a far server on the listener's own port is not a direct connection
fetch_ok "http://$TOPO_S4:50080/file" file
assert_log "session-end service=tp .*dst=198\.19\.2\.2:50080 .* end=(client|server)-closed$" 5
deploy clear
deploy redirect --port 80 --proxy-port 50081
fetch_ok "http://$TOPO_S4/file" file
assert_log "session-end service=rd .*dst=198\.19\.2\.2:80 .* end=(client|server)-closed$" 5
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
