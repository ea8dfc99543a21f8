#!/usr/bin/env bash
# R66 inline, transparent mode: r66peer client in C sends to the r66peer
# server in S (198.19.2.2:6666); the fw's TPROXY rule diverts port 6666 to
# proxyd's r66 service (56666). A SEND and a RECV pass intact with their
# r66-transfer lines, dst=/server= the server's own address; a refused rule
# gets its ErrorPacket and nothing is stored.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
: "${R66PEER:=$REPO_DIR/build/r66peer}"
[[ -x $R66PEER ]] || fail "r66peer not found: $R66PEER"
netns_setup

mkdir -p "$T/srv" "$T/cli"
head -c 300K /dev/urandom >"$T/cli/up.bin"
head -c 200K /dev/urandom >"$T/srv/down.bin"
nsS "$R66PEER" server --listen "$TOPO_S4:6666" --dir "$T/srv" --id serverb:pwB \
    --partner hosta:pwA >"$T/r66server.log" 2>&1 &
track_pid "$!"
topo_wait_listen "$TOPO_S" 6666 5 "$!" || fail "r66peer server did not start in S"
deploy tproxy --port 6666 --proxy-port 56666

write_conf_ns
cat >"$T/policy/r66tp.xml" <<XML
<service name="r66tp" analyser="r66">
  <listen address="0.0.0.0" port="56666" mode="transparent"/>
  <r66 require-digest="yes"><host id="hosta"/><rule name="in"/></r66>
</service>
XML
NS_PORTS+=(56666)
start_proxyd_ns

client() {
    R66_RC=0
    nsC "$R66PEER" client --connect "$TOPO_S4:6666" --id hosta:pwA \
        --partner serverb:pwB --timeout 30 "$@" >"$T/client.out" 2>"$T/client.err" || R66_RC=$?
}

client --rule in --mode 3 --send "$T/cli/up.bin" --recv down.bin --dir "$T/cli"
[[ $R66_RC == 0 ]] || fail "transfers failed: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$T/srv/up.bin")" "$(sha256_of "$T/cli/up.bin")" "up.bin on the server"
assert_eq "$(sha256_of "$T/cli/down.bin")" "$(sha256_of "$T/srv/down.bin")" "down.bin on the client"
wait_grep "$PROXYD_LOG" "r66-transfer host=hosta rule=in mode=sendmd5 file=up.bin size=307200 .* verdict=accept" 3 ||
    fail "no SEND line: $(tail -5 "$PROXYD_LOG")"
wait_grep "$PROXYD_LOG" "r66-transfer host=hosta rule=in mode=recvmd5 file=down.bin size=204800 .* verdict=accept" 3 ||
    fail "no RECV line"
wait_log_count 'session-end service=r66tp ' 1 || true
line=$(grep -E 'session-end service=r66tp ' "$PROXYD_LOG" | tail -n 1)
info "log: $line"
assert_eq "$(kv "$line" dst)" "$TOPO_S4:6666" "dst= (the original destination)"
assert_eq "$(kv "$line" server)" "$TOPO_S4:6666" "server= (where proxyd connected)"
assert_ge "$(rule_pkts 4 mangle PROXYD 'TPROXY')" 1 "packets through the TPROXY rule"

client --rule other --mode 3 --send "$T/cli/up.bin"
assert_eq "$R66_RC" 2 "client exit status for a refused rule"
assert_grep "$T/client.err" "error packet from server: code=n action=3 msg=Denied by proxy: rule not allowed"
assert_eq "$(grep -c '^ok received' "$T/r66server.log")" 1 "files the server stored"
stop_proxyd_ns
assert_no_grep "$PROXYD_LOG" "AddressSanitizer|runtime error:" "sanitizer report"
info "PASS"
