#!/usr/bin/env bash
# FTPS (RFC 4217) through proxyd's ftp analyser, each side on its own:
# client FTPS + server plain, client plain + server FTPS, both, implicit
# FTPS (TLS from the first byte) towards the client and towards the
# server. lftp (ftp:ssl-force; passive and active) and curl (--ssl-reqd,
# ftps://; passive) upload and download with sha256 checks, LIST; a command
# the policy denies is still denied inside TLS; a USER in plain where TLS
# is required gets 530 and a log line; data channels to vsftpd resume the
# control connection's TLS session (require_ssl_reuse=YES); FEAT
# advertises AUTH TLS only where the client side can take it; a server
# refusing AUTH TLS gives 421 (or plain with auth="optional"); bad <tls>
# refused by --check. The PKI is made here with openssl.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_ftp
need_cmds lftp openssl
setup

ftps_pki

# three vsftpd on the same tree: FTPS-only (explicit), implicit FTPS
# (TLS from the first byte), then a plain one
start_vsftpd "$(vsftpd_tls_conf "$P/origin.pem" "$P/origin.key")"
TLS_PORT=$VSFTPD_PORT
mv "$T/vsftpd.conf" "$T/vsftpd-tls.conf"
start_vsftpd "$(vsftpd_tls_conf "$P/origin.pem" "$P/origin.key")
implicit_ssl=YES"
IMP_PORT=$VSFTPD_PORT
mv "$T/vsftpd.conf" "$T/vsftpd-imp.conf"
start_vsftpd
D=$FTP_ROOT/pub
head -c 3M /dev/urandom >"$D/3m.bin"
chmod 644 "$D/3m.bin"
SHA=$(sha256_of "$D/3m.bin")

FTP='<ftp><command name="DELE" action="deny"/><command name="*" action="accept"/></ftp>'
free_port P_CS   # client FTPS, server plain
free_port P_SS   # client plain, server FTPS
free_port P_BB   # both
free_port P_IM   # implicit towards the client, server FTPS
free_port P_OPT  # client FTPS optional, server plain
free_port P_SI   # client plain, server implicit FTPS
write_proxyd_conf
write_ftp_service cs "$P_CS" "$CTLS $FTP"
write_ftp_service ss "$P_SS" "$STLS $FTP" 127.0.0.1 "$TLS_PORT"
write_ftp_service bb "$P_BB" "$CTLS $STLS $FTP" 127.0.0.1 "$TLS_PORT"
write_ftp_service im "$P_IM" "${CTLS%/>} implicit=\"yes\"/> $STLS $FTP" 127.0.0.1 "$TLS_PORT"
write_ftp_service si "$P_SI" "${STLS%/>} implicit=\"yes\"/> $FTP" 127.0.0.1 "$IMP_PORT"
write_ftp_service opt "$P_OPT" "${CTLS%/>} auth=\"optional\"/> $FTP"
# a server side with TLS in front of the plain vsftpd: required, optional
free_port P_NOTLS
write_ftp_service notls "$P_NOTLS" "$STLS $FTP"
# every client's ClientHello refused by its JA4 (AUTH TLS and implicit)
free_port P_FPX
free_port P_FPI
write_ftp_service fpx "$P_FPX" "$CTLS <fingerprint ja4=\"*\" action=\"deny\"/> $FTP"
write_ftp_service fpi "$P_FPI" "${CTLS%/>} implicit=\"yes\"/> <fingerprint ja4=\"t1*\" action=\"deny\"/> $FTP"
free_port P_NOTLS_OPT
write_ftp_service notlsopt "$P_NOTLS_OPT" "${STLS%/>} auth=\"optional\"/> $FTP"
start_proxyd

# lftp_run PORT SSL(yes|no) PASSIVE(yes|no) COMMANDS: lftp as anonymous
lftp_run() {
    local port=$1 ssl=$2 pasv=$3 cmds=$4
    timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10;
        set ftp:ssl-allow $ssl; set ftp:ssl-force $ssl; set ftp:ssl-protect-data $ssl;
        set ftp:ssl-protect-list $ssl; set ssl:ca-file $P/ca.pem; set ssl:verify-certificate yes;
        set ftp:passive-mode $pasv; set ftp:prefer-epsv no;
        open -u anonymous,x@y ftp://127.0.0.1:$port; $cmds" 2>>"$T/lftp.err"
}

# both_ways PORT SSL PASV LABEL: lftp get and put of 3m.bin, sha256 checked
both_ways() {
    local port=$1 ssl=$2 pasv=$3 what=$4 up="up-$4.bin"
    rm -f "$T/got.bin" "$D/$up"
    lftp_run "$port" "$ssl" "$pasv" "get pub/3m.bin -o $T/got.bin; put $D/3m.bin -o pub/$up" ||
        fail "$what: lftp failed: $(tail -n 3 "$T/lftp.err")"
    assert_eq "$(sha256_of "$T/got.bin")" "$SHA" "$what: sha256 of the download"
    assert_eq "$(sha256_of "$D/$up")" "$SHA" "$what: sha256 of the upload"
}

info "client FTPS, server plain: lftp passive and active"
both_ways "$P_CS" yes yes cs-pasv
both_ways "$P_CS" yes no cs-port
assert_log 'data-transfer download cmd=RETR file="pub/3m.bin" bytes=3145728 .* tls-client=(yes|resumed) tls-server=no .* end=ok'
assert_log 'data-transfer upload cmd=STOR .* tls-client=(yes|resumed) tls-server=no .* end=ok'
assert_log 'ftp-tls control-client=explicit control-server=no data=[0-9]+ data-tls-client=[1-9]'
# the JA4 of the client's AUTH TLS hello on the session-end line (its
# data connections' hellos are fingerprinted, not judged)
JA4_RE='t1[23][di][0-9]{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}'
assert_log "session-end service=cs analyser=ftp verdict=accept .* duration=[0-9.]+ ja4=$JA4_RE by="

info "client plain, server FTPS (vsftpd demands TLS and session reuse)"
both_ways "$P_SS" no yes ss-pasv
both_ways "$P_SS" no no ss-port
assert_log 'data-transfer download cmd=RETR .* tls-client=no tls-server=resumed .* end=ok'
assert_log 'data-transfer upload cmd=STOR .* tls-client=no tls-server=resumed .* end=ok'
assert_log 'ftp-tls control-client=no control-server=explicit'

info "both sides FTPS"
both_ways "$P_BB" yes yes bb-pasv
both_ways "$P_BB" yes no bb-port
assert_log 'data-transfer download cmd=RETR .* tls-client=(yes|resumed) tls-server=resumed .* end=ok'

info "LIST inside TLS; a denied command is still denied"
lftp_run "$P_BB" yes yes "cls -1 pub/" >"$T/list.txt" || fail "LIST over FTPS failed: $(tail -n 3 "$T/lftp.err")"
assert_grep "$T/list.txt" '3m\.bin' "LIST over FTPS lacks 3m.bin"
if lftp_run "$P_BB" yes yes "rm pub/up-bb-pasv.bin" >/dev/null; then fail "DELE went through inside TLS"; fi
[[ -f $D/up-bb-pasv.bin ]] || fail "the denied DELE removed the file"
assert_log 'ftp-command user=anonymous cmd=DELE .* verdict=deny reason=command'

# (curl 7.88 hangs in active mode over FTPS, against vsftpd directly too:
# lftp above covers active mode)
info "curl --ssl-reqd (explicit)"
got=$(curl -sS --max-time 60 --ssl-reqd --cacert "$P/ca.pem" "ftp://localhost:$P_BB/pub/3m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "curl --ssl-reqd download, both sides TLS"
got=$(curl -sS --max-time 60 --ssl-reqd --cacert "$P/ca.pem" "ftp://localhost:$P_CS/pub/3m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "curl --ssl-reqd download, client side TLS"
rc=$(curl_ftp --ssl-reqd --cacert "$P/ca.pem" -T "$D/3m.bin" "ftp://localhost:$P_SS/pub/up-curl.bin")
assert_eq "$rc" 64 "curl --ssl-reqd to a service that speaks no TLS to clients (rc 64: TLS refused)"
rc=$(curl_ftp --ssl-reqd --cacert "$P/ca.pem" -T "$D/3m.bin" "ftp://localhost:$P_BB/pub/up-curl.bin")
assert_eq "$rc" 0 "curl --ssl-reqd upload"
assert_eq "$(sha256_of "$D/up-curl.bin")" "$SHA" "sha256 of the curl upload"

info "implicit FTPS (ftps://) towards the client"
got=$(curl -sS --max-time 60 --cacert "$P/ca.pem" "ftps://localhost:$P_IM/pub/3m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "curl ftps:// download"
curl -sS --max-time 60 --cacert "$P/ca.pem" "ftps://localhost:$P_IM/pub/" >"$T/list2.txt"
assert_grep "$T/list2.txt" '3m\.bin' "ftps:// LIST lacks 3m.bin"
assert_log 'ftp-tls control-client=implicit control-server=explicit'
# and, proxyd speaking TLS to vsftpd (AUTH TLS), the server's JA4S
assert_log "session-end service=im analyser=ftp verdict=accept .* duration=[0-9.]+ ja4=$JA4_RE ja4s=t1[23]0[0-9]00_[0-9a-f]{4}_[0-9a-f]{12} by="

info "<fingerprint> deny: AUTH TLS and implicit FTPS refused at the handshake"
rc=$(curl_ftp --ssl-reqd --cacert "$P/ca.pem" -o /dev/null "ftp://localhost:$P_FPX/pub/3m.bin")
[[ $rc == 0 ]] && fail "curl got through an AUTH TLS refused by <fingerprint>"
assert_log "session-end service=fpx analyser=ftp verdict=deny .* ja4=$JA4_RE rule=fpx\.xml:[0-9]+ by=policy phase=data end=denied: tls ja4=$JA4_RE \(<fingerprint> at line [0-9]+\)"
curl -sS --max-time 20 --cacert "$P/ca.pem" -o /dev/null "ftps://localhost:$P_FPI/pub/3m.bin" 2>/dev/null &&
    fail "curl got through an implicit FTPS refused by <fingerprint>"
assert_log "session-end service=fpi analyser=ftp verdict=deny .* ja4=$JA4_RE rule=fpi\.xml:[0-9]+ by=policy phase=accept end=denied: tls ja4=$JA4_RE \(<fingerprint> at line [0-9]+\)"
assert_metric eq proxyd_fingerprint_denied_total 'service="fpx"' 1
assert_metric eq proxyd_fingerprint_denied_total 'service="fpi"' 1

info "implicit FTPS towards the server (vsftpd implicit_ssl=YES), client plain"
both_ways "$P_SI" no yes si-pasv
both_ways "$P_SI" no no si-port
assert_log 'ftp-tls control-client=no control-server=implicit data=[0-9]+ data-tls-client=0 data-tls-server=[1-9]'

info "TLS required: USER in plain refused with 530 and a log line"
python3 - "$P_CS" >"$T/plain.txt" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
f = s.makefile("rb")
print(f.readline().decode().rstrip())
s.sendall(b"FEAT\r\n")
while True:
    l = f.readline().decode()
    print(l.rstrip())
    if l[:4] == "211 " or l[3:4] == " ":
        break
s.sendall(b"USER anonymous\r\n")
print(f.readline().decode().rstrip())
s.sendall(b"PASV\r\n")
print(f.readline().decode().rstrip())
PY
assert_grep "$T/plain.txt" '^220' "no greeting"
assert_grep "$T/plain.txt" '^ AUTH TLS$' "FEAT does not offer AUTH TLS on a TLS-capable client side"
assert_grep "$T/plain.txt" '^530 TLS required' "USER in plain not refused with 530"
assert_grep "$T/plain.txt" '^530 ' "PASV in plain not refused"
assert_log 'ftp-command user=- cmd=USER verdict=deny reason=tls-required'
# a client side without TLS is not offered it (vsftpd's own AUTH TLS is
# the proxy's business: filtered)
python3 - "$P_SS" >"$T/feat.txt" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
f = s.makefile("rb")
f.readline()
s.sendall(b"FEAT\r\n")
while True:
    l = f.readline().decode()
    print(l.rstrip())
    if l[3:4] == " ":
        break
s.sendall(b"AUTH TLS\r\n")
print(f.readline().decode().rstrip())
PY
assert_no_grep "$T/feat.txt" '^ (AUTH|PBSZ|PROT)' "FEAT offers TLS on a client side without it"
assert_grep "$T/feat.txt" '^502 ' "AUTH TLS on a plain client side not refused"

info "auth=optional: a plain client may log in and transfer"
got=$(curl -sS --max-time 60 "ftp://127.0.0.1:$P_OPT/pub/3m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "plain download where TLS is optional"

info "server side: a plain server under a <tls side=\"server\"> is refused (421)"
python3 - "$P_NOTLS" >"$T/notls.txt" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
print(s.makefile("rb").readline().decode().rstrip())
PY
assert_grep "$T/notls.txt" '^421 ' "a server refusing AUTH TLS did not give the client a 421"
assert_log 'ftp-tls side=server refused AUTH TLS \(5[0-9][0-9]\)'
got=$(curl -sS --max-time 60 "ftp://127.0.0.1:$P_NOTLS_OPT/pub/3m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "download through a server side with auth=optional that fell back to plain"
assert_log 'ftp-tls side=server refused AUTH TLS \([0-9]+\): plain'

info "--check: bad FTPS configurations"
tls_check_bad 'implicit="no" on plug' plug "${CTLS%/>} implicit=\"no\"/>" 'b\.xml:4: implicit="no" needs an analyser that starts TLS itself'
tls_check_bad 'auth="maybe"' ftp "${CTLS%/>} auth=\"maybe\"/>" 'b\.xml:4: auth="maybe": expected'
tls_check_bad 'keybridge on ftp' ftp "<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/ca.pem\" ca-key=\"$P/ca.key\"/> $STLS" 'b\.xml:4: <tls mode="keybridge"> is not supported on analyser="ftp"'

info "counters"
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="auth_tls"' 4
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="tls_required"' 2
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="data_tls"' 10
# TLS handshakes by service, data channels included: ss's data connections
# to vsftpd resume its control session's TLS session
assert_metric ge proxyd_tls_handshakes_total 'service="cs",analyser="ftp",side="client",resumed="no"' 1
assert_metric eq proxyd_tls_handshakes_total 'service="cs",analyser="ftp",side="server"' 0
assert_metric ge proxyd_tls_handshakes_total 'service="ss",analyser="ftp",side="server",resumed="yes"' 4
assert_metric eq proxyd_tls_handshakes_total 'service="ss",analyser="ftp",side="client"' 0
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
