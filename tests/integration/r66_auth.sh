#!/usr/bin/env bash
# R66 partners proving their host id to proxyd (<partner id password-file>
# in <r66>: the host table), against a real r66peer server that knows
# hosta, hostb and hostz itself:
#   - hosta with its password: the Authent goes on, the transfer is
#     stored, "r66 auth host=hosta result=ok", user=hosta auth=r66 on the
#     session-end line and "auth":"r66" in the audit record;
#   - hosta with a wrong password: BadAuthent ('A', "Denied by proxy"),
#     logged result=bad-password without the password, and the server
#     sees no frame of it (nothing in its log, no file);
#   - hostz, which the server knows but the table does not: refused the
#     same way (result=unknown-host);
#   - over TLS with <tls identity="cn">, hosta's client certificate proves
#     hosta (user=hosta auth=certificate) and refuses hostb presenting it;
#   - --check refuses a <partner> whose password file is missing.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl
need_r66peer
setup

mkdir -p "$T/cli"
head -c 20K /dev/urandom >"$T/cli/ok.bin"
start_r66_server
free_port R66_PORT
AUDIT=$T/audit.json
write_proxyd_conf "" "<audit target=\"file:$AUDIT\"/>"
printf 'pwA\n' >"$T/policy/hosta.pw"
printf 'pwb\n' >"$T/policy/hostb.pw"
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<audit min-size="0"/>
     <r66>
       <partner id="hosta" password-file="hosta.pw"/>
       <partner id="hostb" password-file="hostb.pw"/>
     </r66>'
# over TLS, client certificates naming the host (identity="cn")
P=$T/pki
r66_pki "$P"
r66_pki_leaf "$P" front r66.test "DNS:r66.test" serverAuth
r66_pki_leaf "$P" hosta hosta "DNS:hosta.test" clientAuth
free_port R66_TLS_PORT
write_r66_service r66tls "$R66_TLS_PORT" "$R66_SRV_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/front.pem\" key=\"$P/front.key\"
          verify=\"required\" ca=\"$P/ca.pem\" identity=\"cn\"/>
     <audit min-size=\"0\"/>"
start_proxyd

info "hosta proves itself"
r66c "$R66_PORT" hosta:pwA --rule in --mode 3 --send "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hosta's transfer failed: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$R66_SRV_DIR/ok.bin")" "$(sha256_of "$T/cli/ok.bin")" "ok.bin on the server"
rm -f "$R66_SRV_DIR/ok.bin"
assert_log 'r66 auth host=hosta result=ok'
assert_log 'session-end service=r66 analyser=r66 verdict=accept .* user=hosta auth=r66 '
wait_grep "$AUDIT" '"file":"ok.bin"' 10 || fail "no audit record"
grep '"file":"ok.bin"' "$AUDIT" | grep -q '"user":"hosta".*"auth":"r66"' ||
    fail "audit record without auth r66: $(cat "$AUDIT")"

# refused ID:PW RESULT: BadAuthent from the proxy, nothing reaches the server
refused() {
    local before
    before=$(wc -l <"$T/r66server.log")
    r66c "$R66_PORT" "$1" --rule in --mode 3 --send "$T/cli/ok.bin"
    assert_eq "$R66_RC" 2 "client exit status for $1"
    assert_grep "$T/client.err" "error packet from server: code=A action=3 msg=Denied by proxy: host id not proven" \
        "BadAuthent from the proxy for $1"
    assert_log "r66 auth host=${1%%:*} result=$2"
    assert_log "session-end service=r66 analyser=r66 verdict=deny .*rule=partner .*end=denied: r66 bad-authent"
    assert_eq "$(ls -A "$R66_SRV_DIR")" "" "files on the server after $1"
    assert_eq "$(tail -n +$((before + 1)) "$T/r66server.log")" "" "the server's log after $1"
}
info "hosta with a wrong password"
WRONG=wrong-$RANDOM
refused "hosta:$WRONG" bad-password
assert_no_grep "$PROXYD_LOG" "$WRONG" "the wrong password is not logged"
info "hostz, known to the server, not to the table"
refused hostz:pwZ unknown-host
info "hostb proves itself too"
r66c "$R66_PORT" hostb:pwb --rule in --mode 3 --send "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hostb's transfer failed: $(cat "$T/client.err")"

info "over TLS: the client certificate proves hosta, and no other"
TLSC=(--tls --tls-ca "$P/ca.pem" --tls-name r66.test --tls-cert "$P/hosta.pem" --tls-key "$P/hosta.key")
r66c "$R66_TLS_PORT" hosta:pwA "${TLSC[@]}" --rule in --mode 3 --send "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hosta's transfer over TLS failed: $(cat "$T/client.err")"
rm -f "$R66_SRV_DIR/ok.bin"
assert_log 'r66 auth host=hosta result=ok method=certificate'
assert_log 'session-end service=r66tls analyser=r66 verdict=accept .* user=hosta auth=certificate '
before=$(wc -l <"$T/r66server.log")
r66c "$R66_TLS_PORT" hostb:pwb "${TLSC[@]}" --rule in --mode 3 --send "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "hostb with hosta's certificate"
assert_grep "$T/client.err" "error packet from server: code=A action=3 msg=Denied by proxy: host id not the certificate's"
assert_log 'r66 auth host=hostb result=bad-certificate \(the certificate names hosta\)'
assert_log "session-end service=r66tls analyser=r66 verdict=deny .*rule=tls/@identity .*end=denied: r66 bad-authent"
assert_eq "$(tail -n +$((before + 1)) "$T/r66server.log")" "" "the server's log after hostb's attempt"
assert_eq "$(ls -A "$R66_SRV_DIR")" "" "files on the server after hostb's attempt"

info "--check: a missing password file"
sed -i 's|hostb.pw|gone.pw|' "$T/policy/r66.xml"
rc=0
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check with a missing password file"
assert_grep "$T/check.out" 'r66.xml:7: password-file="gone.pw": No such file or directory'
r66_finish
info "ok"
