#!/usr/bin/env bash
# Zones and dispatch, inline: one TPROXY port (80 -> 50080) and three
# transparent services sharing proxyd's listener, chosen per connection by
# their <clients> and <servers> zones:
#
#   zones: lan 198.18.1.0/24 2001:db8:1::/64   guests 198.18.3.0/24
#          dmz 198.19.2.0/24 2001:db8:2::/64   partners 198.19.3.0/24
#   web-dmz   http  clients zone:lan     servers zone:dmz
#   lan-any   plug  clients zone:lan     (any server)
#   guest-web plug  clients zone:guests  servers zone:partners
#
# The client namespace has a second source address (in guests), the server
# namespace a second address (in partners). Each of the four (source,
# destination) pairs must end in the expected service, or be refused, as
# both the session-end line and nginx's access log show; `proxyd --check
# --trace` must give the same answer for each pair. Plus IPv6 lan -> dmz.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

GUEST4=198.18.3.2
PARTNER4=198.19.3.2
ip -n "$C" addr add "$GUEST4/24" dev c0
ip -n "$F" route add 198.18.3.0/24 dev f0
ip -n "$S" addr add "$PARTNER4/24" dev s0
ip -n "$F" route add 198.19.3.0/24 dev f1

make_file file 64K
start_origin 80
deploy tproxy --port 80 --proxy-port 50080

write_conf_ns '<zones>
    <zone name="lan" addresses="198.18.1.0/24 2001:db8:1::/64"/>
    <zone name="guests" addresses="198.18.3.0/24"/>
    <zone name="dmz" addresses="198.19.2.0/24 2001:db8:2::/64"/>
    <zone name="partners" addresses="198.19.3.0/24"/>
  </zones>'
# zone_service NAME ANALYSER ADDRESS CLIENTS [SERVERS]: transparent on :50080
zone_service() {
    local servers=""
    [[ -n ${5:-} ]] && servers="<servers allow=\"$5\"/>"
    cat >"$T/policy/$1.xml" <<EOF
<service name="$1" analyser="$2">
  <listen address="$3" port="50080" mode="transparent"/>
  <clients allow="$4"/>
  $servers
</service>
EOF
}
zone_service web-dmz http 0.0.0.0 zone:lan zone:dmz
zone_service lan-any plug 0.0.0.0 zone:lan
zone_service guest-web plug 0.0.0.0 zone:guests zone:partners
# The same three on [::]:50080 would be another listener; v6 gets its own.
zone_service web-dmz6 http :: zone:lan zone:dmz
NS_PORTS+=(50080)
start_proxyd_ns

# pair N SOURCE DEST EXPECT (a service name, or "refused")
declare -A PAIR_SRC PAIR_DST PAIR_WANT
PAIR_SRC=([1]=$TOPO_C4 [2]=$TOPO_C4 [3]=$GUEST4 [4]=$GUEST4)
PAIR_DST=([1]=$TOPO_S4 [2]=$PARTNER4 [3]=$TOPO_S4 [4]=$PARTNER4)
PAIR_WANT=([1]=web-dmz [2]=lan-any [3]=refused [4]=guest-web)
declare -A ZONE=([$TOPO_C4]=lan [$GUEST4]=guests [$TOPO_S4]=dmz [$PARTNER4]=partners)

TABLE="pair | client (zone) | server (zone) | session-end service= | nginx saw | --trace"
for n in 1 2 3 4; do
    src=${PAIR_SRC[$n]} dst=${PAIR_DST[$n]} want=${PAIR_WANT[$n]}
    before=$(log_count 'session-end ')
    r=$(client_get "http://$dst/file?pair=$n" "$T/out.$n" --interface "$src")
    info "pair $n: $src -> $dst: curl rc/code $r"
    wait_log_count 'session-end ' $((before + 1)) || fail "pair $n: no session-end line"
    line=$(grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1)
    info "pair $n: $line"
    [[ $(kv "$line" client) == "$src":* ]] || fail "pair $n: client= is not $src: $line"
    assert_eq "$(kv "$line" dst)" "$dst:80" "pair $n: dst="
    assert_eq "$(kv "$line" client-zone)" "${ZONE[$src]}" "pair $n: client-zone="
    assert_eq "$(kv "$line" server-zone)" "${ZONE[$dst]}" "pair $n: server-zone="
    if [[ $want == refused ]]; then
        [[ $r != "0 200" ]] || fail "pair $n: expected a refusal, got HTTP 200"
        assert_eq "$(kv "$line" service)" "-" "pair $n: service= of a refused connection"
        assert_eq "$(kv "$line" verdict)" "deny" "pair $n: verdict="
        assert_eq "$(kv "$line" end)" "denied: no service for this client and server" "pair $n: end="
        # no one service's list refused it: the listener's default did
        assert_eq "$(kv "$line" rule)" default "pair $n: rule="
        assert_eq "$(nginx_count "pair=$n ")" 0 "pair $n: requests nginx served"
        seen=none
    else
        [[ $r == "0 200" ]] || fail "pair $n: expected HTTP 200, got '$r'"
        assert_eq "$(sha256_of "$T/out.$n")" "$(sha256_of "$T/www/file")" "pair $n: sha256 of the body"
        assert_eq "$(kv "$line" service)" "$want" "pair $n: service="
        assert_eq "$(kv "$line" verdict)" "accept" "pair $n: verdict="
        wait_grep "$ACCESS_LOG" "pair=$n " 3 || fail "pair $n: nginx did not log the request"
        seen=$(nginx_peers "pair=$n ")
        assert_eq "$seen" "$TOPO_FS4" "pair $n: nginx's peer (the fw, no spoofing)"
        seen="GET from $seen"
    fi
    # --trace gives the same answer
    "$PROXYD" --check -c "$PROXYD_CONF" --trace "$src" "$dst:80" >"$T/trace.$n" 2>&1 ||
        { cat "$T/trace.$n" >&2; fail "pair $n: --trace failed"; }
    verdict=$(awk '/^listener 0\.0\.0\.0:50080/ { on = 1; next } /^listener/ { on = 0 } on && /=>/ { sub(/^ *=> */, ""); print; exit }' "$T/trace.$n")
    if [[ $want == refused ]]; then
        [[ $verdict == "refused: no service for this client and server" ]] ||
            { cat "$T/trace.$n" >&2; fail "pair $n: --trace says '$verdict', expected a refusal"; }
    else
        [[ $verdict == "$want takes it" ]] ||
            { cat "$T/trace.$n" >&2; fail "pair $n: --trace says '$verdict', expected $want"; }
    fi
    TABLE+=$'\n'"$n | $src (${ZONE[$src]}) | $dst (${ZONE[$dst]}) | $(kv "$line" service) ($(kv "$line" verdict)) | $seen | $verdict"
done
echo "$TABLE" | tee "$T/pairs.txt" >&2
info "--trace for pair 1:"
sed 's/^/    /' "$T/trace.1" >&2

# IPv6: lan -> dmz through the v6 listener's service
before=$(log_count 'session-end ')
r=$(client_get "http://[$TOPO_S6]/file?pair=v6" "$T/out.v6")
[[ $r == "0 200" ]] || fail "v6 lan -> dmz: expected HTTP 200, got '$r'"
wait_log_count 'session-end ' $((before + 1)) || fail "v6: no session-end line"
line=$(grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1)
assert_eq "$(kv "$line" service)" "web-dmz6" "v6: service="
assert_eq "$(kv "$line" server-zone)" "dmz" "v6: server-zone="

# one socket per worker on the shared address, not one per service
nsock=$(nsF ss -Hltn 'sport = :50080' | awk '$4 == "0.0.0.0:50080"' | wc -l)
nworkers=$(nsF nproc)
assert_eq "$nsock" "$nworkers" "listening sockets on 0.0.0.0:50080 (one per worker for 3 services)"

# counters
m=$(metrics_fetch)
# (per service: the refusal counts for the first service of the address)
got=$(awk '/^proxyd_sessions_denied_total\{.*reason="no-service"\}/ { s += $2 } END { print s + 0 }' <<<"$m")
assert_eq "$got" 1 "proxyd_sessions_denied_total{reason=\"no-service\"}"
# a dispatched session counts for the service the dispatch chose, once
got=$(awk '/^proxyd_sessions_accepted_total\{service="web-dmz6",/ { s += $2 } END { print s + 0 }' <<<"$m")
assert_eq "$got" 1 "proxyd_sessions_accepted_total{service=\"web-dmz6\"}"
all=$(awk '/^proxyd_sessions_accepted_total\{/ { s += $2 } END { print s + 0 }' <<<"$m")
assert_eq "$all" "$(grep -c 'session-end ' "$PROXYD_LOG")" "sessions accepted over all services = session-end lines"
# reload: without lan-any, lan -> partners is refused; the rest stays
rm "$T/policy/lan-any.xml"
kill -HUP "$PROXYD_PID"

for ((i = 0; i < 50; i++)); do
    v=$(metrics_fetch | awk '/^proxyd_config_reloads_total\{result="ok"\}/ { print $2 }')
    [[ ${v:-0} -ge 1 ]] && break
    sleep 0.1
done
[[ ${v:-0} -ge 1 ]] || fail "the reload did not succeed: $(tail -n 5 "$PROXYD_LOG")"
before=$(log_count 'session-end ')
r=$(client_get "http://$PARTNER4/file?pair=2r" "$T/out.2r" --interface "$TOPO_C4")
[[ $r != "0 200" ]] || fail "after the reload, lan -> partners still got HTTP 200"
wait_log_count 'session-end ' $((before + 1)) || fail "reload: no session-end line"
line=$(grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1)
assert_eq "$(kv "$line" end)" "denied: no service for this client and server" "lan -> partners after removing lan-any"
before=$(log_count 'session-end ')
fetch_ok "http://$TOPO_S4/file?pair=1r" file
wait_log_count 'session-end ' $((before + 1)) || fail "reload: no session-end line for lan -> dmz"
line=$(grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1)
assert_eq "$(kv "$line" service)" "web-dmz" "lan -> dmz after the reload"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
