#!/usr/bin/env bash
# R66 over TLS (Waarp's port 6667) through proxyd's connection layer: an
# r66peer client with --tls -> r66 service terminating TLS from the client
# and originating it to an r66peer TLS server (fixed SNI, chain and name
# verified against a CA made here) -> a SEND and a RECV, each file's sha256
# on arrival equal to the source's, the r66 analyser's transfer lines, and
# two refusals of the policy (a rule, a host) still answered inside TLS;
# then TLS to the client only (plain server) and to the server only (plain
# client), one transfer each, and the TLS handshake counters of both sides.
# r66peer's own TLS is checked first, directly (name check, a client
# certificate required), so a failure below is proxyd's.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl openssl
need_r66peer
setup

SIZE=4M
[[ -n ${PROXYD_SANITIZE:-} ]] && SIZE=512K
mkdir -p "$T/cli" "$T/out"

# ---- a CA and the certificates, made now
P=$T/pki
r66_pki "$P"
# proxyd's certificate towards clients, by name and by address
r66_pki_leaf "$P" front r66.test "DNS:r66.test,IP:127.0.0.1" serverAuth
# the server's: no IP address in it, so proxyd must send and check the name
r66_pki_leaf "$P" serverb serverb.test "DNS:serverb.test" serverAuth
r66_pki_leaf "$P" hosta hosta "DNS:hosta.test" clientAuth

# the TLS server (the helpers' default one) and a plain one
start_r66_server --tls-cert "$P/serverb.pem" --tls-key "$P/serverb.key"
TLS_SRV_PORT=$R66_SRV_PORT
start_r66_server_at plain
PLAIN_SRV_PORT=$R66_AT_PORT
PLAIN_SRV_DIR=$R66_AT_DIR
PLAIN_SRV_LOG=$T/r66server-plain.log
start_r66_server_at mtls --tls-cert "$P/serverb.pem" --tls-key "$P/serverb.key" \
    --tls-ca "$P/ca.pem"
MTLS_SRV_PORT=$R66_AT_PORT
MTLS_SRV_LOG=$T/r66server-mtls.log
TLSC=(--tls --tls-ca "$P/ca.pem")

# xfer_ok WHAT PORT HOST:PW SRCFILE DSTFILE ARGS...: r66c succeeds and the
# file arrives whole
xfer_ok() {
    local what=$1 port=$2 id=$3 src=$4 dst=$5
    shift 5
    r66c "$port" "$id" "$@"
    [[ $R66_RC == 0 ]] || fail "$what: rc=$R66_RC: $(cat "$T/client.err")"
    [[ -f $dst ]] || fail "$what: $dst did not arrive"
    assert_eq "$(sha256_of "$dst")" "$(sha256_of "$src")" "sha256 of $(basename "$dst") on arrival ($what)"
    info "$what: ok"
}

info "r66peer's TLS on its own (no proxyd)"
head -c 100K /dev/urandom >"$T/cli/direct.bin"
xfer_ok "direct TLS SEND" "$TLS_SRV_PORT" hosta:pwA "$T/cli/direct.bin" "$R66_SRV_DIR/direct.bin" \
    "${TLSC[@]}" --tls-name serverb.test --rule in --mode 3 --send "$T/cli/direct.bin"
assert_grep "$T/client.out" "^tls connected version=TLSv1\.[23] .*name=serverb\.test server-cert=/CN=serverb\.test$"
assert_grep "$T/r66server.log" "^tls accepted .* sni=serverb\.test .*client-cert=none$"
rm -f "$R66_SRV_DIR/direct.bin"
r66c "$TLS_SRV_PORT" hosta:pwA "${TLSC[@]}" --tls-name wrong.test --rule in --send "$T/cli/direct.bin"
assert_eq "$R66_RC" 2 "client exit status with a wrong server name"
assert_grep "$T/client.err" "tls handshake: certificate verify failed: [Hh]ostname mismatch"
r66c "$TLS_SRV_PORT" hosta:pwA --tls --tls-name serverb.test --rule in --send "$T/cli/direct.bin"
assert_eq "$R66_RC" 2 "client exit status without the test CA"
assert_grep "$T/client.err" "tls handshake: certificate verify failed: unable to get local issuer certificate"
r66c "$MTLS_SRV_PORT" hosta:pwA "${TLSC[@]}" --tls-name serverb.test --rule in --send "$T/cli/direct.bin"
assert_eq "$R66_RC" 2 "client exit status without a client certificate"
wait_grep "$MTLS_SRV_LOG" "tls handshake: .*peer did not return a certificate" "$ASYNC_WAIT" ||
    fail "the server requiring a client certificate did not refuse: $(cat "$MTLS_SRV_LOG")"
xfer_ok "direct TLS SEND with a client certificate" "$MTLS_SRV_PORT" hosta:pwA \
    "$T/cli/direct.bin" "$R66_AT_DIR/direct.bin" "${TLSC[@]}" --tls-name serverb.test \
    --tls-cert "$P/hosta.pem" --tls-key "$P/hosta.key" --rule in --send "$T/cli/direct.bin"
assert_grep "$MTLS_SRV_LOG" "^tls accepted .*client-cert=/CN=hosta$"
assert_eq "$(grep -c '^ok received' "$T/r66server.log")" 1 "transfers stored by the TLS server so far"
# srv_grep REGEX [MESSAGE]: a line the TLS server printed from here on
SRV_MARK=$(wc -l <"$T/r66server.log")
srv_grep() {
    local i
    for ((i = 0; i < 30; i++)); do
        tail -n +$((SRV_MARK + 1)) "$T/r66server.log" | grep -Eq -- "$1" && return 0
        sleep 0.1
    done
    tail -n +$((SRV_MARK + 1)) "$T/r66server.log" >&2
    fail "${2:-expected /$1/ in the output of the TLS server}"
}

# ---- proxyd: TLS on both sides, to the client only, to the server only
FRONT="<tls side=\"client\" mode=\"terminate\" cert=\"$P/front.pem\" key=\"$P/front.key\"/>"
BACK="<tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"serverb.test\"/>"
POL='<r66 max-block="1m"><host id="hosta hostb"/><rule name="in out"/>
     <mode allow="send recv sendmd5 recvmd5"/><file pattern="*.bin" max-size="1g"/></r66>'
free_port P_BOTH
free_port P_CLI
free_port P_SRV
write_proxyd_conf
write_r66_service r66both "$P_BOTH" "$TLS_SRV_PORT" "$FRONT $BACK $POL"
write_r66_service r66cli "$P_CLI" "$PLAIN_SRV_PORT" "$FRONT $POL"
write_r66_service r66srv "$P_SRV" "$TLS_SRV_PORT" "$BACK $POL"
start_proxyd

head -c "$SIZE" /dev/urandom >"$T/cli/up.bin"
head -c "$SIZE" /dev/urandom >"$R66_SRV_DIR/down.bin"
SZ=$(stat -c %s "$T/cli/up.bin")

info "TLS both sides: SEND (mode 3) and RECV (mode 4) of $SIZE"
xfer_ok "SEND through terminate + originate" "$P_BOTH" hosta:pwA "$T/cli/up.bin" "$R66_SRV_DIR/up.bin" \
    "${TLSC[@]}" --tls-name r66.test --rule in --mode 3 --send "$T/cli/up.bin"
assert_grep "$T/client.out" "^tls connected .*name=r66\.test server-cert=/CN=r66\.test$" \
    "the client saw proxyd's certificate"
assert_grep "$T/client.out" "^ok send file=up\.bin size=$SZ "
srv_grep "^ok received file=up\.bin size=$SZ " "the server did not log up.bin"
srv_grep "^tls accepted .* sni=serverb\.test .*client-cert=none$" "the SNI proxyd sent"
# the default name (the host of --connect, an address) is checked too
xfer_ok "RECV through terminate + originate" "$P_BOTH" hostb:pwb "$R66_SRV_DIR/down.bin" "$T/out/down.bin" \
    "${TLSC[@]}" --rule out --mode 4 --recv down.bin --dir "$T/out"
assert_grep "$T/client.out" "^tls connected .*name=127\.0\.0\.1 server-cert=/CN=r66\.test$"
assert_grep "$T/client.out" "^ok recv file=down\.bin size=$SZ "
blocks=$(( (SZ + 65535) / 65536 ))
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=up\.bin size=$SZ blocks=$blocks digest=SHA-256 verdict=accept payload=copy"
assert_log "r66-transfer host=hostb rule=out mode=recvmd5 file=down\.bin size=$SZ blocks=$blocks digest=SHA-256 verdict=accept payload=copy"
assert_log "session-end service=r66both analyser=r66 verdict=accept "
# the JA4 of the client's hello (R66 over TLS) on its session-end line
# and the server's JA4S (proxyd speaks TLS to it)
assert_log "session-end service=r66both analyser=r66 verdict=accept .* duration=[0-9.]+ ja4=t1[23][di][0-9]{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12} ja4s=t1[23]0[0-9]00_[0-9a-f]{4}_[0-9a-f]{12} by="

info "TLS both sides: the policy still refuses inside TLS"
head -c 10K /dev/urandom >"$T/cli/no.bin"
r66c "$P_BOTH" hosta:pwA "${TLSC[@]}" --rule secret --mode 3 --send "$T/cli/no.bin"
assert_eq "$R66_RC" 2 "client exit status for a refused rule"
assert_grep "$T/client.err" "error packet from server: code=n action=3 msg=Denied by proxy" "ErrorPacket n inside TLS"
assert_log "r66-transfer host=hosta rule=secret mode=sendmd5 file=no\.bin size=0 blocks=0 digest=none verdict=deny reason=rule"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_rule"' 1
r66c "$P_BOTH" hostz:pwZ "${TLSC[@]}" --rule in --mode 3 --send "$T/cli/no.bin"
assert_eq "$R66_RC" 2 "client exit status for a refused host"
assert_grep "$T/client.err" "error packet from server: code=A action=3 msg=Denied by proxy" "ErrorPacket A inside TLS"
assert_log "session-end service=r66both analyser=r66 verdict=deny .* end=denied: r66 host"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_host"' 1
[[ ! -e $R66_SRV_DIR/no.bin ]] || fail "a refused file reached the server"
assert_no_grep "$T/r66server.log" "hostz" "the server never saw hostz"

info "TLS to the client only (plain server)"
head -c "$SIZE" /dev/urandom >"$T/cli/c.bin"
xfer_ok "SEND with TLS from the client only" "$P_CLI" hosta:pwA "$T/cli/c.bin" "$PLAIN_SRV_DIR/c.bin" \
    "${TLSC[@]}" --rule in --mode 1 --send "$T/cli/c.bin"
assert_grep "$T/client.out" "^tls connected .*server-cert=/CN=r66\.test$"
assert_log "r66-transfer host=hosta rule=in mode=send file=c\.bin size=$SZ .*verdict=accept"
assert_no_grep "$PLAIN_SRV_LOG" "^tls " "TLS towards the plain server"
assert_grep "$PLAIN_SRV_LOG" "^ok received file=c\.bin size=$SZ "

info "TLS to the server only (plain client)"
mark=$(grep -c "^tls accepted" "$T/r66server.log")
mkdir -p "$T/out/srv"
xfer_ok "RECV with TLS to the server only" "$P_SRV" hostb:pwb "$R66_SRV_DIR/down.bin" "$T/out/srv/down.bin" \
    --rule out --mode 2 --recv down.bin --dir "$T/out/srv"
assert_no_grep "$T/client.out" "^tls " "TLS towards the plain client"
assert_eq "$(grep -c "^tls accepted .* sni=serverb\.test " "$T/r66server.log")" $((mark + 1)) \
    "TLS handshakes the server saw for the plain client's connection"
assert_log "r66-transfer host=hostb rule=out mode=recv file=down\.bin size=$SZ .*verdict=accept"

info "handshake counters and transfer counters"
# from clients: up, down, the two refusals, the client-only SEND
assert_metric eq proxyd_tls_handshakes_total 'side="client"' 5
# to the server: up, down, the refused rule, the server-only RECV (and
# the refused host's connection, if proxyd had opened it before Authent)
assert_metric ge proxyd_tls_handshakes_total 'side="server"' 4
assert_lt "$(metric_value proxyd_tls_handshakes_total 'side="server"')" 6 "TLS handshakes with the server"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 4
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="violations"' 0
assert_no_grep "$PROXYD_LOG" "tls-error|by=(client|server)-fail" "TLS failures in proxyd's log"
proc_alive "$PROXYD_PID" || fail "proxyd died"
for f in "$PLAIN_SRV_LOG" "$MTLS_SRV_LOG"; do
    assert_no_grep "$f" "AddressSanitizer|LeakSanitizer|runtime error:" "sanitizer report in $f"
done
r66_finish
info "R66 over TLS ok"
