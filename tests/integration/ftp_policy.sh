#!/usr/bin/env bash
# FTP command policy against a real vsftpd: a read-only service answers
# STOR/DELE with 550 itself (file not created, vsftpd never sees the
# command), unknown commands get 500, user and path rules, FEAT filtered,
# username/password limits, the password masked in the log, and an
# overlong or malformed line ends the session after a 500. Randomised
# command lines (ftp_command_differential.py: verbs known, unknown, with
# digits like XSHA256, lower case; odd arguments) get the same reply codes
# from vsftpd directly and through a service that takes every command.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
P=$FTP_ROOT/pub
head -c 100K /dev/urandom >"$P/ok.bin"
echo "not really" >"$P/evil.exe"
chmod 644 "$P"/*

free_port PORT
write_proxyd_conf
write_ftp_service ro "$PORT" '
  <ftp client-data="keep" server-data="passive" data-ports="45000-45999">
    <limits max-line="128" max-username="16" max-password="32" timeout="5s"/>
    <command name="USER PASS SYST FEAT PWD CWD TYPE PASV EPSV PORT EPRT LIST NLST RETR SIZE REST QUIT NOOP ABOR" action="accept"/>
    <command name="STOR APPE STOU DELE MKD RMD RNFR RNTO SITE MDTM" action="deny"/>
    <command name="*" action="deny"/>
    <user name="anonymous ftp" action="accept"/>
    <path pattern="*.exe" action="deny"/>
  </ftp>'
free_port ALL
write_ftp_service all "$ALL" '<ftp><command name="*" action="accept"/></ftp>'
start_proxyd

python3 - "$PORT" "$VSFTPD_PORT" "$T" <<'EOF'
import ftplib, hashlib, socket, sys
port, vport, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)

def expect(f, cmd, code):
    try:
        r = f.sendcmd(cmd)
    except ftplib.all_errors as e:
        r = str(e)
    if not r.startswith(str(code)):
        fail("%r: expected %d, got %r" % (cmd, code, r))
    print("ok %-22r -> %s" % (cmd, r))
    return r

def login(user="anonymous", pw="x@y"):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login(user, pw)
    return f

f = login()
# read-only: the proxy refuses, the server never sees it
try:
    f.storbinary("STOR pub/ro.bin", open(tmp + "/proxyd.log", "rb"))
    fail("STOR was accepted")
except ftplib.error_perm as e:
    if not str(e).startswith("550"):
        fail("STOR: expected 550, got %s" % e)
    print("ok STOR -> %s" % e)
expect(f, "DELE pub/ok.bin", 550)
expect(f, "MKD pub/newdir", 550)
expect(f, "SITE CHMOD 777 pub/ok.bin", 500)
expect(f, "XYZZ", 500)
expect(f, "MDTM pub/ok.bin", 550)
# path rule: *.exe denied even for an accepted command
try:
    f.retrbinary("RETR pub/evil.exe", lambda b: None)
    fail("RETR evil.exe was accepted")
except ftplib.error_perm as e:
    if not str(e).startswith("550"):
        fail("RETR evil.exe: expected 550, got %s" % e)
    print("ok RETR evil.exe -> %s" % e)
# what is allowed still works, on the same session
h = hashlib.sha256()
f.retrbinary("RETR pub/ok.bin", h.update)
open(tmp + "/ok.sha", "w").write(h.hexdigest())
expect(f, "SIZE pub/ok.bin", 213)
# ABOR after a Telnet synch as lftp sends it: IAC IP IAC, DM as urgent data
f.sock.sendall(b"\xff\xf4\xff")
f.sock.send(b"\xf2", socket.MSG_OOB)
r = expect(f, "ABOR", 225)
# FEAT: what the policy denies is not advertised
feat = f.sendcmd("FEAT")
g = ftplib.FTP()
g.connect("127.0.0.1", vport, timeout=10)
g.login()
direct = g.sendcmd("FEAT")
g.quit()
if "MDTM" not in direct or "SIZE" not in direct:
    fail("vsftpd FEAT lacks MDTM/SIZE: %r" % direct)
if "MDTM" in feat:
    fail("proxied FEAT still lists MDTM: %r" % feat)
if "SIZE" not in feat or "PASV" not in feat:
    fail("proxied FEAT lost allowed features: %r" % feat)
print("ok FEAT filtered: %r" % feat)
f.quit()

# users: the rule, and the length limits; the password never logged
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
expect(f, "USER bob", 530)
expect(f, "PASS whatever", 503)
expect(f, "USER " + "a" * 17, 501)
expect(f, "USER ftp", 331)
expect(f, "PASS " + "p" * 33, 501)
expect(f, "USER ftp", 331)
expect(f, "PASS s3cretPW", 230)
f.quit()

# an overlong line: 500, then the session ends
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.recv(1000)
s.sendall(b"NOOP " + b"x" * 200 + b"\r\n")
data = b""
while True:
    b = s.recv(1000)
    if not b:
        break
    data += b
if not data.startswith(b"500 Command line too long"):
    fail("overlong line: got %r" % data)
print("ok overlong line -> %r, closed" % data)
s.close()
# a NUL byte
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.recv(1000)
s.sendall(b"USER a\x00b\r\n")
data = b""
while True:
    b = s.recv(1000)
    if not b:
        break
    data += b
if not data.startswith(b"500 Malformed"):
    fail("NUL line: got %r" % data)
print("ok NUL line -> %r, closed" % data)
s.close()
# denied commands from a client that never reads the replies: the proxy's
# queue of replies is bounded, the session ends
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
if not s.recv(1000).startswith(b"220"):
    fail("no greeting")
chunk = b"XYZZ\r\n" * 10000
sent = 0
try:
    while sent < 200 * 1024 * 1024:
        s.sendall(chunk)
        sent += len(chunk)
    fail("the proxy took %d bytes of commands without reading replies" % sent)
except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
    if isinstance(e, socket.timeout):
        fail("the proxy stalled instead of ending the session (%d sent)" % sent)
    print("ok non-reading client cut off after %d bytes: %r" % (sent, e))
s.close()
EOF

assert_eq "$(cat "$T/ok.sha")" "$(sha256_of "$P/ok.bin")" "sha256 of the allowed RETR"
[[ ! -e $P/ro.bin ]] || fail "the denied STOR created pub/ro.bin"
assert_grep "$T/vsftpd.log" 'FTP command: .*"RETR pub/ok.bin"' "vsftpd log does not show commands (check the pattern)"
for c in STOR DELE MKD SITE XYZZ MDTM bob evil.exe; do
    assert_no_grep "$T/vsftpd.log" "FTP command: .*$c" "vsftpd saw '$c': a denied command reached the server"
done
assert_log 'ftp-command user=anonymous cmd=STOR arg="pub/ro.bin" verdict=deny reason=command'
assert_log 'ftp-reply code=550 cmd=STOR by=proxy'
assert_log 'ftp-command user=anonymous cmd=XYZZ arg="" verdict=deny reason=command'
assert_log 'ftp-command user=anonymous cmd=RETR arg="pub/evil.exe" verdict=deny reason=path'
assert_log 'ftp-command user=bob cmd=USER arg="bob" verdict=deny reason=user'
assert_log 'ftp-command user=ftp cmd=PASS arg="\*\*\*\*" verdict=accept'
assert_no_grep "$PROXYD_LOG" 's3cretPW' "the password is in the log"
assert_no_grep "$PROXYD_LOG" 'pppppppp' "the long password is in the log"
assert_log 'session-end service=ro .*verdict=deny .*end=denied: command line too long'
assert_log 'session-end service=ro .*verdict=deny .*end=denied: malformed command line'
assert_log 'session-end service=ro .*verdict=deny .*end=denied: client does not read its replies'
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="denied_command"' 1006
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="denied_path"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="denied_user"' 3
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="too_long"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="bad_line"' 1
info "randomised command lines: the same replies directly and through proxyd"
timeout 30 python3 "$(dirname "$0")/ftp_command_differential.py" "$VSFTPD_PORT" "$ALL" 4 ||
    fail "replies differ through proxyd (the lines above; rerun with the seed printed)"
info "PASS"
