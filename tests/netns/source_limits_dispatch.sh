#!/usr/bin/env bash
# <source-limits> on a shared listener: two transparent services on one TPROXY
# port, chosen per connection by their <servers> zones; only the chosen
# service's limits apply, once it is chosen. a-web (lan -> dmz, the first
# service of the listener) has connections="1/m" burst="1"; b-partners
# (lan -> partners) has none. The client's second request to dmz is reset
# (limited line, proxyd_limited_total), its requests to partners are all
# served: the limits are not the listener's first service's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

PARTNER4=198.19.3.2
ip -n "$S" addr add "$PARTNER4/24" dev s0
ip -n "$F" route add 198.19.3.0/24 dev f1

make_file file 4K
start_origin 80
deploy tproxy --port 80 --proxy-port 50080

write_conf_ns '<zones>
    <zone name="lan" addresses="198.18.1.0/24"/>
    <zone name="dmz" addresses="198.19.2.0/24"/>
    <zone name="partners" addresses="198.19.3.0/24"/>
  </zones>'
cat >"$T/policy/a-web.xml" <<XML
<service name="a-web" analyser="plug">
  <listen address="0.0.0.0" port="50080" mode="transparent"/>
  <clients allow="zone:lan"/>
  <servers allow="zone:dmz"/>
  <source-limits connections="1/m" burst="1"/>
</service>
XML
cat >"$T/policy/b-partners.xml" <<XML
<service name="b-partners" analyser="plug">
  <listen address="0.0.0.0" port="50080" mode="transparent"/>
  <clients allow="zone:lan"/>
  <servers allow="zone:partners"/>
</service>
XML
NS_PORTS+=(50080)
start_proxyd_ns

get() { # URL: "rc code"
    client_get "$1" "$T/out" --interface "$TOPO_C4"
}
r=$(get "http://$TOPO_S4/file?n=1")
assert_eq "$r" "0 200" "lan -> dmz, first (a-web, burst 1)"
r=$(get "http://$TOPO_S4/file?n=2")
[[ $r != "0 200" ]] || fail "lan -> dmz, second within the minute: expected a reset, got HTTP 200"
for n in 3 4 5; do
    r=$(get "http://$PARTNER4/file?n=$n")
    assert_eq "$r" "0 200" "lan -> partners, request $n (b-partners, no limits)"
done
assert_log "limited service=a-web client=$(re_escape "$TOPO_C4"):[0-9]+ source=$(re_escape "$TOPO_C4") limit=connections rule=a-web\.xml:5 refused=1$"
assert_eq "$(nginx_count "n=2 ")" 0 "requests nginx served for the refused connection"
v=$(metrics_fetch | awk '/^proxyd_limited_total\{service="a-web",.*limit="connections"\}/ { s += $2 } END { print s + 0 }')
assert_eq "$v" 1 "proxyd_limited_total{service=\"a-web\",limit=\"connections\"}"
v=$(metrics_fetch | awk '/^proxyd_limited_total\{service="b-partners",/ { s += $2 } END { print s + 0 }')
assert_eq "$v" 0 "proxyd_limited_total{service=\"b-partners\"}"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
