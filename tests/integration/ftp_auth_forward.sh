#!/usr/bin/env bash
# FTP inband authentication with the server named by the client, Zorp's
# way: an ftp service in mode="forward" with <auth>, a real slapd
# (auth_lib.sh: alice in ops) and pyftpdlib writing down every login it is
# offered (and logging each connection). The proxy greets itself; USER
# alice@127.0.0.1:PORT and PASS are checked against the directory before
# any server is connected; then the server is judged by <servers>,
# connected, and logged into with <login>'s mapping.
#   - ftplib: alice@server with her password: 230 from the proxy, a RETR
#     through the server the name gave; the server got opsftp and its
#     password (never alice's); ftp-connect and session-end name it;
#   - a wrong password: 530, and the server sees no connection at all;
#   - a server <servers> refuses (127.0.0.2): 530 with a log line
#     (verdict=deny reason=server), no connection anywhere; a name without
#     @server, or a host name: 530; commands before the login: 530, QUIT
#     the proxy's 221;
#   - <servers ports=>: a server on a port outside the list: 530, a log
#     line (port=N refused-by=ports, rule= the <servers> line), no
#     connection to that port's server; the listed port works;
#   - a server that refuses the connection: the session ends
#     (connect-failed);
#   - strict-port-check="no": a server's PASV naming a host <servers>
#     keeps out is refused (425 to the transfer, an ftp-bounce line),
#     nothing connects there;
#   - lftp: the same login (its FEAT before USER gets 530), a download;
#   - --check refuses mode="forward" on an ftp service without <auth>, and
#     a bad ports= list with its file:line
#     (FTPS in forward mode: ftps_auth_forward.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_ftp
need_cmds lftp slapd ldapadd
setup

start_ldap
FTP_ROOT=$T/ftproot
mkdir -p "$FTP_ROOT/pub"
printf 'public\n' >"$FTP_ROOT/pub/a.txt"

# a second server, on a port the ports= service leaves out
start_pyftpd_recorder "$T/other.txt" opsftp:ops-server-pw
OTHER_PORT=$PYFTPD_PORT
start_pyftpd_recorder "$T/logins.txt" opsftp:ops-server-pw

printf 'ops-server-pw\n' >"$T/policy/ops.pw"
write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir)
  </authenticators>"
free_port PF
cat >"$T/policy/fwd.xml" <<EOF
<service name="fwd" analyser="ftp">
  <listen address="127.0.0.1" port="$PF" mode="forward"/>
  <servers allow="127.0.0.1/32"/>
  <upstream connect-timeout="5s"/>
  <auth authenticator="dir" basic-without-tls="yes"/>
  <ftp>
    <login group="ops" server-user="opsftp" server-password-file="ops.pw"/>
  </ftp>
</service>
EOF
PROXYD_PORTS+=("$PF")
# fwd0: a policy whose <servers> keep loopback out but take 0.0.0.0/8
free_port PF0
sed -e "s|port=\"$PF\"|port=\"$PF0\"|" -e 's|name="fwd"|name="fwd0"|' \
    -e 's|allow="127.0.0.1/32"|allow="0.0.0.0/8"|' "$T/policy/fwd.xml" >"$T/policy/fwd0.xml"
PROXYD_PORTS+=("$PF0")
# fwdp: the same, but only the server's port (and 21) by <servers ports=>
free_port PFP
sed -e "s|port=\"$PF\"|port=\"$PFP\"|" -e 's|name="fwd"|name="fwdp"|' \
    -e "s|allow=\"127.0.0.1/32\"|allow=\"127.0.0.1/32\" ports=\"21 $PYFTPD_PORT\"|" \
    "$T/policy/fwd.xml" >"$T/policy/fwdp.xml"
PROXYD_PORTS+=("$PFP")
# fwdl: strict-port-check="no" (the server's PASV address taken as it
# comes), in front of a server whose PASV names 127.0.0.2, which <servers>
# keeps out
free_port FTRAP
start_py_server BOUNCER <<PY
def handle(c):
    c.settimeout(10)
    c.sendall(b"220 bouncer\r\n")
    for line in c.makefile("rb"):
        verb = line.split(b" ")[0].strip().upper()
        reply = {b"USER": b"331 pw", b"PASS": b"230 in", b"PWD": b'257 "/"',
                 b"PASV": b"227 Entering Passive Mode (127,0,0,2,$((FTRAP >> 8)),$((FTRAP & 255)))",
                 b"STOR": b"150 go", b"QUIT": b"221 bye"}.get(verb, b"200 ok")
        c.sendall(reply + b"\r\n")
        if verb == b"QUIT":
            return
PY
free_port PFL
sed -e "s|port=\"$PF\"|port=\"$PFL\"|" -e 's|name="fwd"|name="fwdl"|' \
    -e 's|<ftp>|<ftp strict-port-check="no">|' "$T/policy/fwd.xml" >"$T/policy/fwdl.xml"
PROXYD_PORTS+=("$PFL")
start_proxyd
S=127.0.0.1:$PYFTPD_PORT

# ftpc USER PASSWORD [ACTION...]: one ftplib session through the proxy
ftpc() {
    timeout 60 python3 - "$PF" "$@" <<'EOF'
import ftplib, sys
port, user, pw, acts = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
f = ftplib.FTP()
print("greet", f.connect("127.0.0.1", port, timeout=20).split("\n")[0])
for a in acts:
    if a.startswith("pre "):
        try:
            print("ok", f.sendcmd(a[4:]).split("\n")[0])
        except ftplib.all_errors as e:
            print("err", str(e).split("\n")[0])
try:
    print("login", f.login(user, pw).split("\n")[0])
except ftplib.all_errors as e:
    print("login-err", str(e).split("\n")[0])
    f.close()
    sys.exit(0)
for a in acts:
    if a.startswith("get "):
        b = []
        f.retrbinary("RETR " + a[4:], b.append)
        print("ok", b"".join(b).decode().strip())
print("quit", f.quit().split("\n")[0])
EOF
}
connects() { grep -c '^connect$' "$T/logins.txt" || true; }

info "alice@server: proven, then the server she named"
out=$(ftpc "alice@$S" alice-ldap-pw "pre PWD" "get pub/a.txt")
echo "$out"
assert_eq "$(sed -n 1p <<<"$out" | cut -c1-10)" "greet 220 " "the proxy's greeting"
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-7)" "err 530" "a command before the login"
assert_eq "$(sed -n 3p <<<"$out")" "login 230 User alice logged in" "alice's login"
assert_eq "$(sed -n 4p <<<"$out")" "ok public" "alice's download from the server she named"
assert_grep "$T/logins.txt" '^opsftp ops-server-pw$' "the server got the mapped login"
assert_no_grep "$T/logins.txt" 'alice' "the server never hears of alice"
assert_log "ftp-connect user=alice server=$S client-zone="
wait_grep "$PROXYD_LOG" "session-end service=fwd .*server=$S .*user=alice auth=password" 10 ||
    fail "no session-end line naming the server and alice: $(grep session-end "$PROXYD_LOG" | tail -n 1)"
assert_eq "$(connects)" 1 "one connection to the server"

info "a wrong password: 530, no connection to the server"
out=$(ftpc "alice@$S" wrong-pw)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-13)" "login-err 530" "a wrong password"
assert_log 'auth authenticator=dir method=password user=alice result=bad-password'
assert_eq "$(connects)" 1 "no connection to the server for a wrong password"

info "a server <servers> refuses: 530 and a log line, no connection"
out=$(ftpc "alice@127.0.0.2:$PYFTPD_PORT" alice-ldap-pw)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Login incorrect: server 127.0.0.2:$PYFTPD_PORT not allowed by the proxy policy" "a refused server"
assert_log "ftp-auth user=alice result=ok auth=password server=127.0.0.2:$PYFTPD_PORT verdict=deny reason=server client-zone=- server-zone=- rule=fwd\.xml:3$"
out=$(ftpc alice alice-ldap-pw)
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Name the server: USER name@server" "no server named"
out=$(ftpc "alice@ftp.example.test" alice-ldap-pw)
[[ $(sed -n 2p <<<"$out") == 'login-err 530 Server "ftp.example.test": give its address'* ]] ||
    fail "a host name: $(sed -n 2p <<<"$out")"
assert_eq "$(connects)" 1 "no connection for a refused or unnamed server"
info "<servers ports=>: a port outside refused (530, a log line, no connection), the listed one works"
out=$(PF=$PFP ftpc "alice@127.0.0.1:$OTHER_PORT" alice-ldap-pw)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Login incorrect: server 127.0.0.1:$OTHER_PORT not allowed by the proxy policy" "a server port outside ports="
assert_log "ftp-auth user=alice result=ok auth=password server=127.0.0.1:$OTHER_PORT verdict=deny reason=server client-zone=- server-zone=- port=$OTHER_PORT refused-by=ports rule=fwdp\.xml:3$"
# counted as the address refusal above is
assert_metric eq proxyd_sessions_denied_total 'reason="server"' 2
assert_no_grep "$T/other.txt" '^connect$' "the server on a port outside ports= never saw a connection"
out=$(PF=$PFP ftpc "alice@$S" alice-ldap-pw "get pub/a.txt")
echo "$out"
assert_eq "$(sed -n 2p <<<"$out")" "login 230 User alice logged in" "alice's login to the listed port"
assert_eq "$(sed -n 3p <<<"$out")" "ok public" "a download from the listed port"
assert_eq "$(connects)" 2 "one connection to the server on the listed port"

info "0.0.0.0 and :: (this host to connect()): refused before <servers> judges them as themselves"
for srv in "0.0.0.0:$PYFTPD_PORT" "[::ffff:0.0.0.0]:$PYFTPD_PORT" "[::]:$PYFTPD_PORT"; do
    out=$(PF=$PF0 ftpc "alice@$srv" alice-ldap-pw)
    assert_eq "$(sed -n 2p <<<"$out")" "login-err 530 Server \"$srv\": give its address (not one to connect to)" "alice@$srv"
done
assert_eq "$(connects)" 2 "no connection to the loopback server through 0.0.0.0"
# the client gone before any server: its session ends too
wait_grep "$PROXYD_LOG" 'session-end service=fwd .*server=- .*end=client-closed' 10 ||
    fail "a session whose client closed before any server did not end: $(grep -c session-end "$PROXYD_LOG") session-end lines"
out=$(timeout 20 python3 -c '
import ftplib, sys
f = ftplib.FTP(); f.connect("127.0.0.1", int(sys.argv[1]), timeout=10)
print(f.quit())' "$PF")
assert_eq "$out" "221 Goodbye" "QUIT before the login"
# the proxy's greeting (50 bytes) and its 221 (13) are the client's bytes
wait_grep "$PROXYD_LOG" 'session-end service=fwd .*server=- to-server=0 to-client=63 .*end=quit' 10 ||
    fail "the QUIT session's line: $(grep 'end=quit' "$PROXYD_LOG")"

info "a server that does not answer: the session ends, connect-failed"
free_port DEAD   # nothing listens there
out=$(ftpc "alice@127.0.0.1:$DEAD" alice-ldap-pw)
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-9)" "login-err" "a login to a server that is not there"
wait_grep "$PROXYD_LOG" "ftp-connect user=alice server=127.0.0.1:$DEAD " 10 || fail "no ftp-connect line for the dead server"
wait_grep "$PROXYD_LOG" "session-end service=fwd .*server=127.0.0.1:$DEAD .*user=alice auth=password by=server-fail phase=data end=connect-failed: Connection refused" 10 ||
    fail "no connect-failed session-end line: $(grep "$DEAD" "$PROXYD_LOG" | tail -n 2)"

info "the client gone while its server's connect is under way: that socket is closed too"
# A listener with a full backlog: its SYNs are dropped, the connect waits.
free_port BH
python3 - "$BH" >"$T/bh.out" 2>&1 <<'EOF' &
import socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(0)
fill = []
for _ in range(4):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", int(sys.argv[1])))
    except BlockingIOError: pass
    fill.append(c)
print("ready", flush=True)
time.sleep(60)
EOF
track_pid $!
wait_grep "$T/bh.out" ready 10 || fail "the full listener: $(cat "$T/bh.out")"
syn_sent() { ss -Htn state syn-sent "( dport = :$BH )" | wc -l; }
base=$(syn_sent)	# the listener's own fillers beyond its backlog
timeout 30 python3 - "$PF" "alice@127.0.0.1:$BH" <<'EOF' || true
import socket, sys, time
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
f = c.makefile("rb")
f.readline()
c.sendall(b"USER " + sys.argv[2].encode() + b"\r\n"); f.readline()
c.sendall(b"PASS alice-ldap-pw\r\n")
time.sleep(1)	# proven, the connect under way: PASS's reply waits for it
c.close()
EOF
wait_grep "$PROXYD_LOG" "ftp-connect user=alice server=127.0.0.1:$BH " 10 || fail "no ftp-connect line for the full listener"
wait_grep "$PROXYD_LOG" "session-end service=fwd .*server=127.0.0.1:$BH .*end=client-closed" 10 ||
    fail "the session whose client left during the connect did not end: $(grep "$BH" "$PROXYD_LOG" | tail -n 2)"
n=-1
for _ in $(seq 50); do n=$(syn_sent); [[ $n == "$base" ]] && break; sleep 0.1; done
assert_eq "$n" "$base" "the connect of a session that ended is not left behind (leaked socket)"

info "a server that does not answer the connect: connect-timeout, as for any server"
start=$(date +%s)
out=$(ftpc "alice@127.0.0.1:$BH" alice-ldap-pw)
echo "$out"
assert_eq "$(sed -n 2p <<<"$out" | cut -c1-9)" "login-err" "a login to a server that does not answer"
wait_grep "$PROXYD_LOG" "session-end service=fwd .*server=127.0.0.1:$BH .*end=connect-timeout" 10 ||
    fail "no connect-timeout session-end line: $(grep "$BH" "$PROXYD_LOG" | tail -n 2)"
(( $(date +%s) - start < 15 )) || fail "the connect waited $(( $(date +%s) - start ))s, connect-timeout is 5s"

info "strict-port-check=\"no\": a server's PASV naming a host <servers> keeps out"
timeout 60 python3 - "$PFL" "$BOUNCER" "$FTRAP" "$PROXYD_LOG" <<'EOF'
import ftplib, socket, sys, time
port, bouncer, trap, log = (int(sys.argv[1]), int(sys.argv[2]),
                            int(sys.argv[3]), sys.argv[4])
t = socket.create_server(("127.0.0.2", trap))  # where a bounce would go
t.settimeout(0.5)
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=20)
f.login("alice@127.0.0.1:%d" % bouncer, "alice-ldap-pw")
print("ok", f.sendcmd("PASV"))
deadline = time.time() + 10
while "names a host <servers> does not allow" not in open(log).read():
    if time.time() > deadline:
        sys.exit("FAIL: no ftp-bounce line for the server's 227")
    time.sleep(0.05)
try:
    r = f.sendcmd("STOR x")
except ftplib.all_errors as e:
    r = str(e)
print("STOR:", r)
if not r.startswith("425"):
    sys.exit("FAIL: STOR after the refused 227: %r" % r)
f.quit()
try:
    c, a = t.accept()
    sys.exit("FAIL: 127.0.0.2:%d got a connection from %r" % (trap, a))
except socket.timeout:
    print("ok nothing connected to 127.0.0.2:%d" % trap)
EOF
assert_log "ftp-bounce refused: the server.s 227 reply names a host <servers> does not allow: \"227 Entering Passive Mode \(127,0,0,2,"
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="bounce_refused"' 1

info "lftp: the same login, a download"
rm -f "$T/lftp.got"
timeout 60 lftp -c "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 10; set ftp:ssl-allow no;
    open -u alice@$S,alice-ldap-pw ftp://127.0.0.1:$PF; get pub/a.txt -o $T/lftp.got" 2>"$T/lftp.err" ||
    fail "lftp: $(tail -n 3 "$T/lftp.err")"
assert_eq "$(cat "$T/lftp.got")" public "lftp's download"
assert_eq "$(connects)" 3 "lftp's one connection to the server"

info "--check refuses forward mode without <auth>"
mkdir -p "$T/bad/policy"
sed -e 's|<policies dir="../policy"/>|<policies dir="policy"/>|' \
    -e 's|bind-password-file="ldap.pw"|bind-password-file="'"$T"'/conf/ldap.pw"|' \
    "$PROXYD_CONF" >"$T/bad/proxyd.xml"
sed -e '/<auth /d' -e '/<login /d' "$T/policy/fwd.xml" >"$T/bad/policy/a.xml"
rc=0
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of forward mode without <auth>"
assert_grep "$T/check.out" 'a.xml:2: mode="forward": analyser "ftp" takes the server from a proven user.s login: the service needs <auth>'
sed -e 's|allow="127.0.0.1/32"|allow="127.0.0.1/32" ports="21 2100-2199 70000 2299-2200"|' \
    "$T/policy/fwd.xml" >"$T/bad/policy/a.xml"
rc=0
"$PROXYD" --check -c "$T/bad/proxyd.xml" >"$T/check.out" 2>&1 || rc=$?
assert_ne "$rc" 0 "--check of a bad ports= list"
assert_grep "$T/check.out" 'a.xml:3: ports: "70000": number out of range'
assert_grep "$T/check.out" 'a.xml:3: ports: "2299-2200": the range ends below its start'
info "ok"
