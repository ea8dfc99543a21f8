#!/usr/bin/env bash
# <servers ports=> in transparent mode, inline: one TPROXY rule for ports
# 80, 8080 and 8081 (-> 50080), nginx in the server namespace on all three.
#
#   0.0.0.0:50080  web  http  servers S4 ports="80"
#                  alt  plug  servers S4 ports="8080"   (the same lists)
#   [::]:50080     web6 plug  servers S6 ports="80"     (alone)
#
# The two v4 services differ only by ports=: --check takes them, S4:80
# ends in web and S4:8080 in alt (session-end service=, nginx's log, and
# --trace agree), S4:8081 is taken by no one (no-service). The v6
# listener's one service refuses [S6]:8080 by its port: end=denied:
# server port not allowed, rule= its <servers> line, counted as
# reason="server"; [S6]:80 goes through. Overlapping ports= on the same
# lists: --check refuses, naming a port of the overlap.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
netns_setup

make_file file 16K
start_origin 80 8080 8081
deploy tproxy --port 80,8080,8081 --proxy-port 50080

write_conf_ns
# port_service NAME ANALYSER ADDRESS SERVER PORTS: transparent on :50080
port_service() {
    cat >"$T/policy/$1.xml" <<EOF
<service name="$1" analyser="$2">
  <listen address="$3" port="50080" mode="transparent"/>
  <servers allow="$4" ports="$5"/>
</service>
EOF
}
port_service web http 0.0.0.0 "$TOPO_S4" 80
port_service alt plug 0.0.0.0 "$TOPO_S4" 8080
port_service web6 plug :: "$TOPO_S6" 80
NS_PORTS+=(50080)
start_proxyd_ns

# last_end N: the newest session-end line, once there are more than N
last_end() {
    wait_log_count 'session-end ' $(($1 + 1)) || fail "no session-end line after $1"
    grep -E 'session-end ' "$PROXYD_LOG" | tail -n 1
}

for want in 80:web 8080:alt 8081:refused; do
    port=${want%%:*} svc=${want#*:}
    before=$(log_count 'session-end ')
    r=$(client_get "http://$TOPO_S4:$port/file?port=$port" "$T/out.$port")
    line=$(last_end "$before")
    info "S4:$port: curl rc/code $r; $line"
    assert_eq "$(kv "$line" dst)" "$TOPO_S4:$port" "S4:$port: dst="
    "$PROXYD" --check -c "$PROXYD_CONF" --trace "$TOPO_C4" "$TOPO_S4:$port" >"$T/trace.$port" 2>&1 ||
        { cat "$T/trace.$port" >&2; fail "S4:$port: --trace failed"; }
    verdict=$(awk '/^listener 0\.0\.0\.0:50080/ { on = 1; next } /^listener/ { on = 0 } on && /=>/ { sub(/^ *=> */, ""); print; exit }' "$T/trace.$port")
    if [[ $svc == refused ]]; then
        [[ $r != "0 200" ]] || fail "S4:$port: expected a refusal, got HTTP 200"
        assert_eq "$(kv "$line" service)" "-" "S4:$port: service="
        assert_eq "$(kv "$line" end)" "denied: no service for this client and server" "S4:$port: end="
        assert_eq "$(nginx_count "port=$port ")" 0 "S4:$port: requests nginx served"
        assert_eq "$verdict" "refused: no service for this client and server" "S4:$port: --trace"
    else
        [[ $r == "0 200" ]] || fail "S4:$port: expected HTTP 200, got '$r'"
        assert_eq "$(sha256_of "$T/out.$port")" "$(sha256_of "$T/www/file")" "S4:$port: sha256 of the body"
        assert_eq "$(kv "$line" service)" "$svc" "S4:$port: service="
        wait_grep "$ACCESS_LOG" "port=$port " 3 || fail "S4:$port: nginx did not log the request"
        assert_eq "$verdict" "$svc takes it" "S4:$port: --trace"
    fi
done
grep -q "port 8080: not in ports= " "$T/trace.8080" ||
    { cat "$T/trace.8080" >&2; fail "--trace does not say web's ports= leaves 8080 out"; }

info "one service on the listener: its port refused, by <servers>"
before=$(log_count 'session-end ')
r=$(client_get "http://[$TOPO_S6]:8080/file?port=v6-8080" "$T/out.v6")
line=$(last_end "$before")
info "[S6]:8080: curl rc/code $r; $line"
[[ $r != "0 200" ]] || fail "[S6]:8080: expected a refusal, got HTTP 200"
assert_eq "$(kv "$line" service)" "web6" "[S6]:8080: service="
assert_eq "$(kv "$line" verdict)" "deny" "[S6]:8080: verdict="
assert_eq "$(kv "$line" end)" "denied: server port not allowed" "[S6]:8080: end="
assert_eq "$(kv "$line" rule)" "web6.xml:3" "[S6]:8080: rule="
assert_eq "$(nginx_count "port=v6-8080 ")" 0 "[S6]:8080: requests nginx served"
fetch_ok "http://[$TOPO_S6]/file?port=v6-80" file
m=$(metrics_fetch)
got=$(awk '/^proxyd_sessions_denied_total\{.*reason="server"\}/ { s += $2 } END { print s + 0 }' <<<"$m")
assert_eq "$got" 1 "proxyd_sessions_denied_total{reason=\"server\"}"
got=$(awk '/^proxyd_sessions_denied_total\{.*reason="no-service"\}/ { s += $2 } END { print s + 0 }' <<<"$m")
assert_eq "$got" 1 "proxyd_sessions_denied_total{reason=\"no-service\"}"

info "overlapping ports on the same lists: --check refuses, naming a port"
port_service alt plug 0.0.0.0 "$TOPO_S4" "80-90 8080"
rc=0
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of overlapping ports="
assert_grep "$T/check.out" "policy/web\.xml:1: service \"web\" and service \"alt\" .* both select connections from 0\.0\.0\.0/0 to $(re_escape "$TOPO_S4")/32 port 80 without one"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
