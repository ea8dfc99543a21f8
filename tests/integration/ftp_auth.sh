#!/usr/bin/env bash
# FTP inband authentication (<auth> on an ftp service) against a real
# slapd made here (auth_lib.sh: alice in ops, bob, carol) and real FTP
# servers: pyftpdlib with an authorizer that writes down every login it is
# offered, and vsftpd (anonymous) behind an FTPS client side.
#   - alice (group ops) logs in with her LDAP password: proxyd logs into
#     the server as opsftp with the password of <login
#     server-password-file> (the server never sees alice nor her
#     password); user=alice on the ftp-command lines, user=alice
#     auth=password on the session-end line, "auth":"password" in the
#     audit record; a group path rule lets her into /ops, a user command
#     rule lets her DELE;
#   - bob's <login pass-password="yes">: the server gets bob and his own
#     password; the path and command rules for ops and alice refuse him;
#     a <content user="bob"> refuses him an executable alice may fetch;
#     his <login quota-transfers="3"> counts his transfers (the 4th gets
#     550);
#   - a wrong password: 530, result=bad-password logged without the
#     password, counted in proxyd_auth_total{method="password"}; an LDAP
#     filter as user name: 530; carol, whom no <login> takes: 530;
#   - commands pipelined behind PASS wait for the answer; once logged
#     in, USER and REIN get 503 (alice stays alice to the rules); between
#     USER and PASS any other command gets 530 from the proxy;
#   - a directory that is down: 421 and the session ends; one that
#     stalls: 421 within its timeout while another session on the single
#     worker logs in and transfers meanwhile;
#   - lftp over FTPS (AUTH TLS) to vsftpd as anonymous by <login>;
#   - --check refuses <login> without <auth>, an ftp <auth> without an
#     ldap authenticator, and one on a service without <tls side="client">
#     unless it says basic-without-tls="yes" (the services above do: their
#     passwords come in clear).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_ftp
need_cmds lftp openssl slapd ldapadd ktutil
setup

start_ldap
start_vsftpd
mkdir -p "$FTP_ROOT/ops"
printf 'ops-only\n' >"$FTP_ROOT/ops/secret.txt"
printf 'public\n' >"$FTP_ROOT/pub/a.txt"
cp /bin/true "$FTP_ROOT/pub/prog"
chmod 644 "$FTP_ROOT/ops/secret.txt" "$FTP_ROOT/pub/a.txt" "$FTP_ROOT/pub/prog"

# pyftpdlib: opsftp and bob, every login offered written to logins.txt
start_pyftpd_recorder "$T/logins.txt" opsftp:ops-server-pw bob:bob-ldap-pw

# a directory that accepts and never answers
start_py_server STALL <<'EOF'
def handle(c):
    time.sleep(20)
EOF
free_port DEAD   # nothing listens there

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf proxy localhost "DNS:localhost,IP:127.0.0.1" serverAuth

printf 'ops-server-pw\n' >"$T/policy/ops.pw"
AUDIT=$T/audit.json
write_proxyd_conf "" "<audit target=\"file:$AUDIT\"/>
  <authenticators>
    $(ldap_conf dir)
    <ldap name=\"down\" url=\"ldap://127.0.0.1:$DEAD\" base-dn=\"dc=example,dc=test\" timeout=\"2s\"/>
    <ldap name=\"stalled\" url=\"ldap://127.0.0.1:$STALL\" base-dn=\"dc=example,dc=test\" timeout=\"1500ms\"/>
  </authenticators>"
# one worker: a check under way must not stall it
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
LOGINS='<login group="ops" server-user="opsftp" server-password-file="ops.pw"/>
    <login user="bob" pass-password="yes" quota-transfers="3"/>'
free_port PA
write_ftp_service ia "$PA" "<auth authenticator=\"dir\" basic-without-tls=\"yes\"/>
  <audit min-size=\"0\"/>
  <ftp>
    $LOGINS
    <command name=\"DELE\" user=\"alice\" action=\"accept\"/>
    <command name=\"DELE\" action=\"deny\"/>
    <path pattern=\"/ops/*\" group=\"ops\" action=\"accept\"/>
    <path pattern=\"/ops/*\" action=\"deny\"/>
  </ftp>
  <content type=\"application/x-pie-executable application/x-executable application/x-sharedlib\" user=\"bob\" action=\"deny\"/>" 127.0.0.1 "$PYFTPD_PORT"
free_port PD
write_ftp_service down "$PD" "<auth authenticator=\"down\" basic-without-tls=\"yes\"/><ftp>$LOGINS</ftp>" 127.0.0.1 "$PYFTPD_PORT"
free_port PS
write_ftp_service stall "$PS" "<auth authenticator=\"stalled\" basic-without-tls=\"yes\"/><ftp>$LOGINS</ftp>" 127.0.0.1 "$PYFTPD_PORT"
free_port PT
write_ftp_service tls "$PT" "<tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>
  <auth authenticator=\"dir\"/>
  <ftp><login user=\"*\" server-user=\"anonymous\"/></ftp>"
start_proxyd

# ftpc PORT USER PASSWORD ACTION...: one ftplib session; prints the login's
# reply, then one line per action ("ok ..." or "err REPLY")
ftpc() {
    timeout 60 python3 - "$@" <<'EOF'
import ftplib, io, sys
port, user, pw, acts = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=20)
try:
    print("login", f.login(user, pw).split("\n")[0])
except ftplib.all_errors as e:
    print("login-err", str(e).split("\n")[0])
    sys.exit(0)
for a in acts:
    verb, arg = a.split(" ", 1)
    try:
        if verb == "get":
            b = []
            f.retrbinary("RETR " + arg, b.append)
            print("ok", b"".join(b).decode().strip())
        elif verb == "getn":
            b = []
            f.retrbinary("RETR " + arg, b.append)
            print("ok", len(b"".join(b)))
        elif verb == "put":
            f.storbinary("STOR " + arg, io.BytesIO(b"uploaded\n"))
            print("ok put")
        else:
            print("ok", f.sendcmd(verb + " " + arg).split("\n")[0])
    except ftplib.all_errors as e:
        msg = str(e).split("\n")[0]
        if not isinstance(e, ftplib.Error):
            # the data connection reset: the final reply is still to come
            try:
                f.voidresp()
            except ftplib.all_errors as e2:
                msg = str(e2).split("\n")[0]
        print("err", msg)
f.quit()
EOF
}

info "alice (ops): logged into the server as opsftp"
out=$(ftpc "$PA" alice alice-ldap-pw "get ops/secret.txt" "put pub/up-alice.txt" "DELE pub/up-alice.txt" \
    "getn pub/prog")
echo "$out"
assert_eq "$(sed -n 1p <<<"$out")" "login 230 User alice logged in" "alice's login"
assert_eq "$(sed -n 2p <<<"$out")" "ok ops-only" "alice reads /ops (group rule)"
assert_eq "$(sed -n 3p <<<"$out")" "ok put" "alice uploads"
assert_eq "$(sed -n 4p <<<"$out" | cut -c1-6)" "ok 250" "alice deletes (user rule)"
assert_eq "$(sed -n 5p <<<"$out")" "ok $(stat -c %s /bin/true)" "alice downloads an executable (the <content> rule is bob's)"
assert_grep "$T/logins.txt" '^opsftp ops-server-pw$' "the server got the mapped login"
assert_no_grep "$T/logins.txt" 'alice' "the server never hears of alice"
assert_no_grep "$T/logins.txt" 'alice-ldap-pw' "nor of her password"
wait_grep "$PROXYD_LOG" 'service=ia .*user=alice auth=password' 10 ||
    fail "no session-end line with user=alice auth=password: $(tail -n 5 "$PROXYD_LOG")"
assert_log 'auth authenticator=dir method=password user=alice result=ok'
assert_log 'ftp-command user=alice cmd=RETR arg="ops/secret.txt" verdict=accept'
assert_log 'ftp-command user=alice cmd=USER arg="opsftp" verdict=accept by=proxy'
assert_log 'ftp-command user=alice cmd=PASS arg="\*\*\*\*" verdict=accept by=proxy'
wait_grep "$AUDIT" '"file":"/pub/up-alice.txt"' 10 || fail "no audit record of the upload"
grep '"file":"/pub/up-alice.txt"' "$AUDIT" | grep -q '"user":"alice".*"auth":"password"' ||
    fail "audit record without user alice auth password: $(grep up-alice "$AUDIT")"
assert_no_grep "$PROXYD_LOG" 'ops-server-pw' "the mapped password is not logged"
assert_no_grep "$PROXYD_LOG" 'alice-ldap-pw' "alice's password is not logged"

info "bob: his own login passed on; the ops and alice rules refuse him"
out=$(ftpc "$PA" bob bob-ldap-pw "get ops/secret.txt" "get pub/a.txt" "DELE pub/a.txt" "getn pub/prog")
echo "$out"
assert_eq "$(sed -n 1p <<<"$out")" "login 230 User bob logged in" "bob's login"
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-7)" "err 550" "bob may not read /ops"
assert_eq "$(sed -n 3p <<<"$out")" "ok public" "bob reads pub"
assert_eq "$(sed -n 4p <<<"$out" | cut -c1-7)" "err 550" "bob may not DELE"
assert_eq "$(sed -n 5p <<<"$out" | cut -c1-7)" "err 550" "bob may not download an executable (<content user=bob>)"
assert_log 'ftp-content type=application/x-[a-z-]+ action=deny rule=[^ ]*ia.xml:14 file="/?pub/prog" user=bob'
assert_grep "$T/logins.txt" '^bob bob-ldap-pw$' "pass-password: the server got bob's own"
[[ -s $FTP_ROOT/pub/a.txt ]] || fail "bob deleted a.txt"

info "bob's <login quota-transfers=3>: his third transfer of the day is his last"
out=$(ftpc "$PA" bob bob-ldap-pw "get pub/a.txt" "get pub/a.txt")
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "ok public" "bob's 3rd transfer"
assert_eq "$(sed -n 3p <<<"$out")" "err 550 RETR: daily transfer quota used up (proxy policy)" "bob's 4th"
assert_log 'ftp-quota user=bob kind=transfers used=3 limit=3 cmd=RETR verdict=refused rule=ia.xml:8'
out=$(ftpc "$PA" alice alice-ldap-pw "get pub/a.txt")
assert_eq "$(sed -n 2p <<<"$out")" "ok public" "alice's own day (her <login> sets none)"

info "wrong password, a filter as user name, a user without a <login>"
WRONG=wrong-$RANDOM-pw
out=$(ftpc "$PA" alice "$WRONG")
assert_eq "$out" "login-err 530 Login incorrect" "a wrong password"
out=$(ftpc "$PA" '*)(uid=*' x)
assert_eq "$out" "login-err 530 Login incorrect" "a filter as user name"
out=$(ftpc "$PA" carol carol-ldap-pw)
assert_eq "$out" "login-err 530 Login incorrect: no server login for carol" "carol"
assert_log 'auth authenticator=dir method=password user=alice result=bad-password'
assert_log 'ftp-auth user=alice result=bad-password'
assert_log 'ftp-auth user=carol result=ok auth=password verdict=deny reason=no-login'
assert_no_grep "$PROXYD_LOG" "$WRONG" "the wrong password is not logged"
assert_no_grep "$T/logins.txt" 'carol' "the server never hears of carol"
assert_metric ge proxyd_auth_total 'authenticator="dir",method="password",result="bad-password"' 1
assert_metric ge proxyd_auth_total 'authenticator="dir",method="password",result="ok"' 5

info "commands pipelined behind PASS wait for its answer"
out=$(timeout 30 python3 - "$PA" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
f = s.makefile("rb")
def reply():
    line = f.readline().decode()
    while line[3:4] == "-":
        line = f.readline().decode()
    return line.strip()
reply()                                            # greeting
s.sendall(b"USER alice\r\nPASS alice-ldap-pw\r\nPWD\r\nQUIT\r\n")
print(reply()); print(reply()); print(reply()); print(reply())
EOF
)
echo "$out"
assert_eq "$(sed -n 1p <<<"$out" | cut -c1-3)" 331 "USER"
assert_eq "$(sed -n 2p <<<"$out")" "230 User alice logged in" "PASS"
assert_eq "$(sed -n 3p <<<"$out" | cut -c1-3)" 257 "PWD after the login"
assert_eq "$(sed -n 4p <<<"$out" | cut -c1-3)" 221 "QUIT"

info "logged in, USER and REIN are refused: the identity, its rules and quota stay"
printf 'gone\n' >"$FTP_ROOT/pub/gone.txt"
out=$(ftpc "$PA" alice alice-ldap-pw "USER bob" "REIN x" "get ops/secret.txt" "DELE pub/gone.txt")
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "err 503 Already logged in as alice" "a second USER"
assert_eq "$(sed -n 3p <<<"$out")" "err 503 Already logged in as alice" "REIN"
assert_eq "$(sed -n 4p <<<"$out")" "ok ops-only" "still alice to the group rule"
assert_eq "$(sed -n 5p <<<"$out" | cut -c1-6)" "ok 250" "still alice to the user rule"
assert_log 'ftp-command user=alice cmd=USER arg="bob" verdict=deny reason=relogin'

info "between USER and a proven PASS nothing else reaches the server"
out=$(timeout 30 python3 - "$PA" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
f = s.makefile("rb")
def reply():
    line = f.readline().decode()
    while line[3:4] == "-":
        line = f.readline().decode()
    return line.strip()
reply()                                            # greeting
for c in (b"USER alice", b"CWD ops", b"PASS alice-ldap-pw", b"QUIT"):
    s.sendall(c + b"\r\n")
    print(reply())
EOF
)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "530 Please login with USER and PASS" "CWD before PASS"
assert_eq "$(sed -n 3p <<<"$out")" "230 User alice logged in" "PASS"
assert_log 'ftp-command user=alice cmd=CWD arg="ops" verdict=deny reason=not-logged-in'

info "a directory that is down: 421"
out=$(ftpc "$PD" alice alice-ldap-pw)
assert_eq "$out" "login-err 421 Authentication service not available, closing control connection" "directory down"
assert_log 'auth authenticator=down method=password user=alice result=directory-down'
wait_grep "$PROXYD_LOG" 'service=down .*verdict=deny' 10 || fail "no session-end line for the 421"

info "a directory that stalls: 421 within its timeout, another session goes on meanwhile"
npass=$(grep -c 'cmd=PASS arg="\*\*\*\*" verdict=accept by=proxy (inband' "$PROXYD_LOG" || true)
ftpc "$PS" alice alice-ldap-pw >"$T/stall.out" 2>&1 &
STALLC=$!
for _ in $(seq 100); do
    (($(grep -c 'cmd=PASS arg="\*\*\*\*" verdict=accept by=proxy (inband' "$PROXYD_LOG" || true) > npass)) && break
    sleep 0.05
done
t0=$(now_ms)
out=$(ftpc "$PA" alice alice-ldap-pw "get pub/a.txt")
t1=$(now_ms)
assert_eq "$(sed -n 2p <<<"$out")" "ok public" "another session during the stall"
assert_lt $((t1 - t0)) 1400 "another session's login and transfer (ms) while a check stalls"
proc_alive "$STALLC" || fail "the stalled login was answered before its timeout: $(cat "$T/stall.out")"
wait_exit "$STALLC" 10 || fail "the stalled login never ended"
assert_eq "$(cat "$T/stall.out")" "login-err 421 Authentication service not available, closing control connection" "stalled"
assert_log 'auth authenticator=stalled method=password user=alice result=timeout'

info "lftp over FTPS (AUTH TLS), anonymous to vsftpd by <login>"
rm -f "$T/lftp.got"
timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10;
    set ftp:ssl-force yes; set ftp:ssl-protect-data yes; set ssl:ca-file $P/ca.pem; set ssl:check-hostname no;
    open -u alice,alice-ldap-pw ftp://127.0.0.1:$PT; get pub/a.txt -o $T/lftp.got" 2>"$T/lftp.err" ||
    fail "lftp over FTPS: $(tail -n 3 "$T/lftp.err")"
assert_eq "$(cat "$T/lftp.got")" public "lftp's download"
assert_grep "$T/vsftpd.log" 'OK LOGIN: Client "127.0.0.1", anon password "proxyd@"' "vsftpd's anonymous login"
wait_grep "$PROXYD_LOG" 'service=tls .*user=alice auth=password' 10 || fail "no session-end line for lftp"
assert_no_grep "$T/vsftpd.log" 'alice' "vsftpd never hears of alice"

info "--check refuses <login> without <auth> and an ftp <auth> without ldap"
mkdir -p "$T/bad/policy"
cp "$PROXYD_CONF" "$T/bad/proxyd.xml"
sed -i 's|<policies dir="../policy"/>|<policies dir="policy"/>|' "$T/bad/proxyd.xml"
sed -i 's|bind-password-file="ldap.pw"|bind-password-file="'"$T"'/conf/ldap.pw"|' "$T/bad/proxyd.xml"
cat >"$T/bad/policy/a.xml" <<EOF
<service name="a" analyser="ftp">
  <listen address="127.0.0.1" port="$PA" mode="fixed"/>
  <target address="127.0.0.1" port="$PYFTPD_PORT"/>
  <ftp>
    <login user="*" server-user="anonymous"/>
  </ftp>
</service>
EOF
rc=0
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of <login> without <auth>"
assert_grep "$T/check.out" 'a.xml:5: .*<login>: the service has no <auth>'
sed -i 's|<ftp>|<auth authenticator="corp"/><ftp>|' "$T/bad/policy/a.xml"
# a keytab made without a KDC (ktutil), enough for the load's check
printf 'addent -password -p HTTP/localhost@EXAMPLE.TEST -k 1 -e aes256-cts-hmac-sha1-96\nkt-pw\nwkt %s\nquit\n' \
    "$T/bad/http.keytab" | ktutil >/dev/null 2>&1
[[ -s $T/bad/http.keytab ]] || fail "ktutil made no keytab"
sed -i 's|<authenticators>|<authenticators><kerberos name="corp" keytab="http.keytab"/>|' "$T/bad/proxyd.xml"
rc=0
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of an ftp <auth> without ldap"
assert_grep "$T/check.out" 'checks passwords: authenticator= must name an ldap one'
# no <tls side="client"> and basic-without-tls left at "no": passwords
# would only ever come in clear, so nobody could log in: refused where
# <auth> stands; said "yes", taken in clear, as the services above
sed -i 's|<auth authenticator="corp"/>|\n  <auth authenticator="dir"/>|' "$T/bad/policy/a.xml"
rc=0
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of an ftp <auth> that could only take passwords in clear"
assert_grep "$T/check.out" 'a.xml:5: <auth>: analyser "ftp" takes passwords only over the client.s TLS \(basic-without-tls="no", the default\) and the service has no <tls side="client">'
sed -i 's|<auth authenticator="dir"/>|<auth authenticator="dir" basic-without-tls="yes"/>|' "$T/bad/policy/a.xml"
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || { cat "$T/check.out" >&2; fail "--check of basic-without-tls=\"yes\""; }

info "ok"
