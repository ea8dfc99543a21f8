#!/usr/bin/env bash
# FTPS with inband authentication in forward mode: the client names the
# server in its login (USER alice@127.0.0.1:PORT), a real slapd
# (auth_lib.sh: alice in ops) checks the password, and only then proxyd
# connects that server, a vsftpd that insists on TLS for the login and the
# data (force_anon_*_ssl) and on data channels resuming the control
# session (require_ssl_reuse), and logs in there with <login>'s mapping.
#   - explicit FTPS on both sides (fx: AUTH TLS from the client before
#     USER; proxyd's own AUTH TLS, PBSZ, PROT to the server after the
#     connect, before the mapped login): python ftplib FTP_TLS and lftp
#     (ftp:ssl-force), passive and active, LIST, RETR and STOR of 3 MB
#     byte-exact (sha256), every data connection TLS on both ends; a
#     curl --ssl-reqd download;
#   - implicit FTPS on both sides (fim, port 990 style: TLS from the first
#     byte, to a vsftpd with implicit_ssl=YES): ftplib, passive and active,
#     and lftp's ftps://;
#   - a wrong password: 530, and no server hears of it (vsftpd's CONNECT
#     lines, proxyd's ftp-connect lines);
#   - USER before AUTH TLS where TLS is required: 530, no directory check,
#     no server; the same where the client's TLS is optional (auth=
#     "optional") but <auth basic-without-tls> is "no" (the default), while
#     "yes" takes the password in plain;
#   - a server that will not speak TLS behind <tls side="server">: 421,
#     as in fixed mode, or plain where its auth="optional"; a server
#     certificate that does not name the server: the session ends.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_ftp
need_cmds lftp openssl slapd ldapadd
setup

ftps_pki
start_ldap
# two vsftpd on one tree: explicit FTPS, implicit FTPS; and a plain one
start_vsftpd "$(vsftpd_tls_conf "$P/origin.pem" "$P/origin.key")"
X_PORT=$VSFTPD_PORT
mv "$T/vsftpd.conf" "$T/vsftpd-x.conf"
start_vsftpd "$(vsftpd_tls_conf "$P/origin.pem" "$P/origin.key")
implicit_ssl=YES"
I_PORT=$VSFTPD_PORT
mv "$T/vsftpd.conf" "$T/vsftpd-i.conf"
start_vsftpd
PLAIN_PORT=$VSFTPD_PORT
D=$FTP_ROOT/pub
head -c 3M /dev/urandom >"$D/3m.bin"
chmod 644 "$D/3m.bin"
SHA=$(sha256_of "$D/3m.bin")
cp "$D/3m.bin" "$T/src.bin"

write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir)
  </authenticators>"
# fwd_service NAME PORT TLS_XML [AUTH_ATTRS]: forward mode, <auth>, the
# ops group logged into the server as anonymous
fwd_service() {
    cat >"$T/policy/$1.xml" <<EOF
<service name="$1" analyser="ftp">
  <listen address="127.0.0.1" port="$2" mode="forward"/>
  <servers allow="127.0.0.1/32"/>
  <upstream connect-timeout="5s"/>
  <auth authenticator="dir" ${4:-}/>
  $3
  <ftp>
    <login group="ops" server-user="anonymous"/>
  </ftp>
</service>
EOF
    PROXYD_PORTS+=("$2")
}
free_port PX
free_port PI
free_port PO
free_port PV
fwd_service fx "$PX" "$CTLS $STLS"
fwd_service fim "$PI" "${CTLS%/>} implicit=\"yes\"/> ${STLS%/>} implicit=\"yes\"/>"
# TLS towards the server optional; a name the server's certificate lacks
fwd_service fo "$PO" "$CTLS ${STLS%/>} auth=\"optional\"/>"
fwd_service fv "$PV" "$CTLS ${STLS%/>} sni=\"other.example.test\"/>"
# TLS optional towards the client: a password still only over it
# (basic-without-tls="no", the default), unless the service says "yes"
free_port PCO
free_port PCY
fwd_service fco "$PCO" "${CTLS%/>} auth=\"optional\"/> $STLS"
fwd_service fcy "$PCY" "${CTLS%/>} auth=\"optional\"/> $STLS" 'basic-without-tls="yes"'
start_proxyd

# ftpc PORT HOW USER PASSWORD PASV ACTION...: one ftplib session
ftpc() {
    timeout 60 python3 "$(dirname "$0")/ftps_auth_forward.py" "$1" "$P/ca.pem" "${@:2}" 2>>"$T/ftpc.err"
}
server_connects() { cat "$T"/vsftpd*.log 2>/dev/null | grep -c 'CONNECT: Client' || true; }
log_count() { grep -Ec -- "$1" "$PROXYD_LOG" || true; }
# log_count_is REGEX N WHAT: N lines of proxyd's log match (its log thread
# writes them a little after the fact: waited for, 5 s at most)
log_count_is() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(log_count "$1") == "$2" ]] && return 0
        sleep 0.05
    done
    fail "$3: $(log_count "$1") lines matching /$1/, expected $2"
}
connects_are() { # SERVER_PORT N WHAT: ftp-connect lines to that server
    log_count_is "ftp-connect user=alice server=127.0.0.1:$1 " "$2" "$3"
}

# both_ways PORT HOW SERVER_PORT PASV LABEL: alice lists, gets and puts 3m.bin
both_ways() {
    local port=$1 how=$2 sport=$3 pasv=$4 what=$5 out
    rm -f "$T/got.bin" "$D/up-$what.bin"
    out=$(ftpc "$port" "$how" "alice@127.0.0.1:$sport" alice-ldap-pw "$pasv" \
        list pub get pub/3m.bin "$T/got.bin" put "$T/src.bin" "pub/up-$what.bin") ||
        fail "$what: ftplib failed: $out $(tail -n 3 "$T/ftpc.err")"
    echo "$out"
    assert_eq "$(sed -n 1p <<<"$out")" "greet 220" "$what: the proxy's greeting"
    assert_eq "$(sed -n 2p <<<"$out")" "login 230 User alice logged in" "$what: alice's login"
    [[ "$(sed -n 3p <<<"$out") " == "list "*" 3m.bin "* ]] || fail "$what: LIST lacks 3m.bin: $(sed -n 3p <<<"$out")"
    assert_eq "$(sed -n 6p <<<"$out")" "quit 221" "$what: QUIT"
    assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "$what: sha256 of the download"
    assert_eq "$(sha256_of "$D/up-$what.bin")" "$SHA" "$what: sha256 of the upload"
}

info "explicit FTPS both sides (ftplib FTP_TLS): passive, then active"
both_ways "$PX" explicit "$X_PORT" 1 x-pasv
both_ways "$PX" explicit "$X_PORT" 0 x-port
assert_log "ftp-connect user=alice server=127.0.0.1:$X_PORT "
assert_log 'ftp-command user=- cmd=AUTH arg="TLS" verdict=accept'
assert_log 'data-transfer download cmd=RETR file="pub/3m.bin" bytes=3145728 .* tls-client=(yes|resumed) tls-server=resumed .* end=ok'
assert_log 'data-transfer upload cmd=STOR .* bytes=3145728 .* tls-client=(yes|resumed) tls-server=resumed .* end=ok'
# LIST, RETR, STOR: three channels a session, each TLS on both ends
assert_log 'ftp-tls control-client=explicit control-server=explicit data=3 data-tls-client=3 data-tls-server=3'
wait_grep "$PROXYD_LOG" "session-end service=fx .*server=127.0.0.1:$X_PORT .*user=alice auth=password" ||
    fail "no session-end line naming the server and alice: $(grep 'session-end service=fx' "$PROXYD_LOG" | tail -n 1)"
connects_are "$X_PORT" 2 "one server connection a session"

info "explicit FTPS both sides (lftp ssl-force): passive and active"
lftp_run() { # PASV COMMANDS [URL SERVER_PORT]
    timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10;
        set ftp:ssl-force yes; set ftp:ssl-protect-data yes; set ftp:ssl-protect-list yes;
        set ssl:ca-file $P/ca.pem; set ssl:verify-certificate yes;
        set ftp:passive-mode $1; set ftp:prefer-epsv no;
        open -u alice@127.0.0.1:${4:-$X_PORT},alice-ldap-pw ${3:-ftp://127.0.0.1:$PX}; $2" 2>>"$T/lftp.err"
}
for pasv in yes no; do
    rm -f "$T/got.bin" "$D/up-lftp-$pasv.bin"
    lftp_run "$pasv" "cls -1 pub/; get pub/3m.bin -o $T/got.bin; put $T/src.bin -o pub/up-lftp-$pasv.bin" \
        >"$T/lftp-list.txt" || fail "lftp passive=$pasv: $(tail -n 3 "$T/lftp.err")"
    assert_grep "$T/lftp-list.txt" '3m\.bin' "lftp passive=$pasv: LIST lacks 3m.bin"
    assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "lftp passive=$pasv: sha256 of the download"
    assert_eq "$(sha256_of "$D/up-lftp-$pasv.bin")" "$SHA" "lftp passive=$pasv: sha256 of the upload"
done
connects_are "$X_PORT" 4 "lftp's one server connection a session"
# curl --ssl-reqd: the server in the URL's user name (%40 for the @)
got=$(curl -sS --max-time 60 --ssl-reqd --cacert "$P/ca.pem" \
    "ftp://alice%40127.0.0.1%3A$X_PORT:alice-ldap-pw@localhost:$PX/pub/3m.bin" 2>>"$T/curl.err" |
    sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "curl --ssl-reqd download ($(tail -n 1 "$T/curl.err" 2>/dev/null))"
connects_are "$X_PORT" 5 "curl's one server connection"

info "implicit FTPS both sides (ftplib, TLS from the first byte): passive, then active"
both_ways "$PI" implicit "$I_PORT" 1 i-pasv
both_ways "$PI" implicit "$I_PORT" 0 i-port
assert_log 'ftp-tls control-client=implicit control-server=implicit data=3 data-tls-client=3 data-tls-server=3'
rm -f "$T/got.bin"
lftp_run yes "get pub/3m.bin -o $T/got.bin" "ftps://127.0.0.1:$PI" "$I_PORT" ||
    fail "lftp ftps://: $(tail -n 3 "$T/lftp.err")"
assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "lftp ftps://: sha256 of the download"
connects_are "$I_PORT" 3 "lftp's one implicit server connection"
assert_log 'data-transfer download cmd=RETR .* tls-client=(yes|resumed) tls-server=resumed .* end=ok'
assert_log "session-end service=fim .*server=127.0.0.1:$I_PORT .*user=alice auth=password"

info "a wrong password: 530, no server hears of it"
before=$(server_connects)
# (vsftpd logs each connection: six sessions so far, lftp's own besides)
assert_ge "$before" 6 "vsftpd's CONNECT lines for the logins so far"
out=$(ftpc "$PX" explicit "alice@127.0.0.1:$X_PORT" wrong-pw 1)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Login incorrect" "a wrong password over FTPS"
out=$(ftpc "$PI" implicit "alice@127.0.0.1:$I_PORT" wrong-pw 1)
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Login incorrect" "a wrong password over implicit FTPS"
log_count_is 'auth authenticator=dir method=password user=alice result=bad-password' 2 "the wrong passwords' checks"
# no server, so none of its TLS either
log_count_is 'ftp-tls control-client=(explicit|implicit) control-server=- data=0 ' 2 "the ftp-tls lines of sessions that reached no server"
assert_eq "$(server_connects)" "$before" "no server connection for a wrong password"
connects_are "$X_PORT" 5 "no ftp-connect for a wrong password"
connects_are "$I_PORT" 3 "no ftp-connect for a wrong password (implicit)"

info "USER before AUTH TLS: 530, the password never asked for"
nauth=$(log_count 'auth authenticator=dir')
out=$(ftpc "$PX" plain "alice@127.0.0.1:$X_PORT" alice-ldap-pw 1)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 TLS required: send AUTH TLS before USER" "USER in plain"
assert_log 'ftp-command user=- cmd=USER verdict=deny reason=tls-required'
assert_eq "$(log_count 'auth authenticator=dir')" "$nauth" "no directory check for a login in plain"
assert_eq "$(server_connects)" "$before" "no server connection for a login in plain"

info "TLS optional towards the client: USER in plain still 530 unless basic-without-tls=\"yes\""
out=$(ftpc "$PCO" plain "alice@127.0.0.1:$X_PORT" alice-ldap-pw 1)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 TLS required: send AUTH TLS before USER (no password in clear)" "USER in plain, client TLS optional"
assert_log 'ftp-command user=- cmd=USER arg="alice@127\.0\.0\.1:[0-9]+" verdict=deny reason=tls-required rule=auth/@basic-without-tls'
assert_eq "$(log_count 'auth authenticator=dir')" "$nauth" "no directory check for a password in plain"
assert_eq "$(server_connects)" "$before" "no server connection for a password in plain"
out=$(ftpc "$PCO" explicit "alice@127.0.0.1:$X_PORT" alice-ldap-pw 1 list pub)
assert_eq "$(sed -n 2p <<<"$out")" "login 230 User alice logged in" "AUTH TLS then USER, client TLS optional"
out=$(ftpc "$PCY" plain "alice@127.0.0.1:$X_PORT" alice-ldap-pw 1 list pub)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login 230 User alice logged in" "USER in plain under basic-without-tls=\"yes\""
assert_log 'ftp-tls control-client=plain control-server=explicit data=1 data-tls-client=0 data-tls-server=1'
before=$(server_connects)

info "a server that speaks no TLS behind <tls side=\"server\">: 421"
out=$(ftpc "$PX" explicit "alice@127.0.0.1:$PLAIN_PORT" alice-ldap-pw 1)
echo "$out"
[[ $(sed -n 2p <<<"$out") == "login-err 421 "* ]] || fail "a plain server: $(sed -n 2p <<<"$out")"
assert_log "ftp-tls side=server refused AUTH TLS \(5[0-9][0-9]\)"
assert_log "session-end service=fx .*server=127.0.0.1:$PLAIN_PORT .*end=denied: ftp: no TLS with the server"
# auth="optional" towards the server: on in plain
rm -f "$T/got.bin"
out=$(ftpc "$PO" explicit "alice@127.0.0.1:$PLAIN_PORT" alice-ldap-pw 1 get pub/3m.bin "$T/got.bin")
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login 230 User alice logged in" "a plain server where its TLS is optional"
assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "the download from a plain server where its TLS is optional"
assert_log 'ftp-tls side=server refused AUTH TLS \([0-9]+\): plain \(auth="optional"\)'
assert_log 'ftp-tls control-client=explicit control-server=plain data=1 data-tls-client=1 data-tls-server=0'

info "a server certificate that does not name the server: the session ends"
out=$(ftpc "$PV" explicit "alice@127.0.0.1:$X_PORT" alice-ldap-pw 1)
echo "$out"
[[ $(sed -n 2p <<<"$out") == "login-err"* ]] || fail "a server whose certificate does not verify: $(sed -n 2p <<<"$out")"
assert_log "session-end service=fv .*server=127.0.0.1:$X_PORT .*by=server-fail .*end=server-error: tls: "

info "counters"
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="auth_tls"' 5
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="tls_required"' 1
assert_metric ge proxyd_tls_handshakes_total 'service="fx",analyser="ftp",side="server",resumed="yes"' 10
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
