#!/usr/bin/env bash
# <scan user= group=>: the scanner sees the transfers of the users it
# names alone. A real slapd (auth_lib.sh: alice in ops, bob) proves them;
# c-icap over clamd (scan_lib.sh) knows EICAR.
#   - http, Basic through a reverse service with <scan group="ops">:
#     alice's EICAR download is refused 403 (http-scan verdict=infected),
#     bob's passes byte for byte, unscanned; alice's Range is dropped
#     (partial="refuse": 200, the whole body scanned), bob's is a 206;
#   - ftp, inband <auth> with <scan user="bob">: bob's RETR of EICAR gets
#     550 (ftp-scan verdict=infected user=bob), alice gets the file; bob's
#     REST 10 gets 502 (scan/@partial), alice's 350;
#   - proxyd_scan_total counts the two infected verdicts and alice's one
#     clean body (the others were never sent to the scanner);
#   - --check refuses <scan user=> on a service with no <auth> (its line)
#     and on an r66 service.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_ftp
need_cmds nginx curl python3 slapd ldapadd
setup
need_scanner
scan_dirs

start_ldap
start_vsftpd
write_eicar "$T/www/eicar.com"
cp "$T/www/eicar.com" "$FTP_ROOT/pub/eicar.com"
head -c 1000 /dev/urandom >"$T/www/r.bin"
chmod 644 "$FTP_ROOT/pub/eicar.com"
(cd "$T/www" && sigtool --md5 eicar.com) >"$W/db/test.hdb"
start_scanner
start_nginx

write_proxyd_conf "" "<scanners><icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"20s\"/></scanners>
  <authenticators>
    $(ldap_conf dir)
  </authenticators>"
free_port PH
write_http_service web "$PH" "$NGINX_PORT" "
<auth authenticator=\"dir\" methods=\"basic\" basic-without-tls=\"yes\"/>
<scan scanner=\"av\" direction=\"download\" group=\"ops\"/>"
free_port PF
write_ftp_service ftp "$PF" "<auth authenticator=\"dir\" basic-without-tls=\"yes\"/>
  <scan scanner=\"av\" direction=\"download\" user=\"bob\"/>
  <ftp><login user=\"*\" server-user=\"anonymous\"/></ftp>"
start_proxyd

info "http: alice (ops) is scanned, bob is not"
code=$(curl -s -o "$T/alice.out" -w '%{http_code}' --max-time 20 -u alice:alice-ldap-pw \
    "http://127.0.0.1:$PH/eicar.com")
assert_eq "$code" 403 "alice's EICAR download"
assert_log 'http-scan verdict=infected threat="[^"]*" scanner=av direction=download'
code=$(curl -s -o "$T/bob.out" -w '%{http_code}' --max-time 20 -u bob:bob-ldap-pw \
    "http://127.0.0.1:$PH/eicar.com")
assert_eq "$code" 200 "bob's EICAR download"
cmp -s "$T/bob.out" "$T/www/eicar.com" || fail "bob did not get EICAR byte for byte"
assert_eq "$(grep -c 'http-scan verdict=' "$PROXYD_LOG")" 1 "one http body scanned (alice's)"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -u alice:alice-ldap-pw -r 0-9 \
    "http://127.0.0.1:$PH/r.bin")
assert_eq "$code" 200 "alice's Range dropped (scanned whole)"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -u bob:bob-ldap-pw -r 0-9 \
    "http://127.0.0.1:$PH/r.bin")
assert_eq "$code" 206 "bob's Range passed (not scanned)"

info "ftp: bob is scanned, alice is not"
ftpc() { # USER PASSWORD: RETR pub/eicar.com, then REST 10
    timeout 60 python3 - "$PF" "$@" <<'EOF'
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=20)
print("login", f.login(sys.argv[2], sys.argv[3]).split("\n")[0])
b = []
try:
    f.retrbinary("RETR pub/eicar.com", b.append)
    print("ok", len(b"".join(b)))
except ftplib.all_errors as e:
    msg = str(e).split("\n")[0]
    if not isinstance(e, ftplib.Error):
        try:
            f.voidresp()
        except ftplib.all_errors as e2:
            msg = str(e2).split("\n")[0]
    print("err", msg)
try:
    print("ok", f.sendcmd("REST 10").split("\n")[0][:3])
except ftplib.all_errors as e:
    print("err", str(e)[:3])
f.quit()
EOF
}
out=$(ftpc bob bob-ldap-pw)
echo "$out"
assert_eq "$(sed -n 1p <<<"$out")" "login 230 User bob logged in" "bob's login"
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-7)" "err 550" "bob's EICAR RETR"
assert_eq "$(sed -n 3p <<<"$out")" "err 502" "bob's REST (scan/@partial)"
assert_log 'ftp-scan verdict=infected threat="[^"]*" scanner=av file="pub/eicar.com" user=bob dir=download'
out=$(ftpc alice alice-ldap-pw)
echo "$out"
assert_eq "$(sed -n 1p <<<"$out")" "login 230 User alice logged in" "alice's login"
assert_eq "$(sed -n 2p <<<"$out")" "ok 68" "alice's EICAR RETR, unscanned"
assert_eq "$(sed -n 3p <<<"$out")" "ok 350" "alice's REST"
assert_eq "$(grep -c 'ftp-scan verdict=' "$PROXYD_LOG")" 1 "one ftp file scanned (bob's)"

assert_metric eq proxyd_scan_total 'service="web",scanner="av",verdict="infected"' 1
assert_metric eq proxyd_scan_total 'service="ftp",scanner="av",verdict="infected"' 1
# alice's r.bin (clean), and nothing else: bob's http and alice's ftp
# transfers never went to the scanner
assert_metric eq proxyd_scan_total 'verdict="clean"' 1
assert_metric eq proxyd_scan_total 'service="web",scanner="av",verdict="clean"' 1

info "--check refuses <scan user=> without <auth>, and on r66"
mkdir -p "$T/bad/policy"
sed -e 's|<policies dir="../policy"/>|<policies dir="policy"/>|' \
    -e 's|bind-password-file="ldap.pw"|bind-password-file="'"$T"'/conf/ldap.pw"|' \
    "$PROXYD_CONF" >"$T/bad/proxyd.xml"
refused() { # WHAT REGEX < SERVICE_XML: --check refuses it, saying REGEX
    local rc=0
    cat >"$T/bad/policy/a.xml"
    "$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
    assert_ne "$rc" 0 "--check of $1"
    assert_grep "$T/check.out" "$2"
}
refused "<scan user=> without <auth>" 'a.xml:4: .*<scan> user=/group=: the service has no <auth>' <<EOF
<service name="a" analyser="http">
  <listen address="127.0.0.1" port="$PH" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <scan scanner="av" user="alice"/>
</service>
EOF
refused "<scan group=> on r66" 'a.xml:5: .*<scan> user=/group=: analyser "r66"' <<EOF
<service name="a" analyser="r66">
  <listen address="127.0.0.1" port="$PH" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <tls side="client" mode="terminate" cert="x.pem" key="x.key" verify="required" ca="x.pem" identity="cn"/>
  <scan scanner="av" group="ops"/>
</service>
EOF

info "ok"
