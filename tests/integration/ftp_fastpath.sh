#!/usr/bin/env bash
# FTP fast path: a session keeps its passive data port while transfers follow
# each other (EPSV, PASV and the transfers on one port), and the port still
# gives nobody else a connection: one from another host, or one from the
# client's host while no transfer waits, is reset; the port closes when idle.
# PASV/EPSV of a logged-in client are answered at once, before the server's
# reply: a server that refuses its passive mode then costs the transfer
# command a 425 from the proxy; before the login the server's own reply
# (530) is what the client gets.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
P=$FTP_ROOT/pub
head -c 1M /dev/urandom >"$P/1m.bin"
chmod 644 "$P/1m.bin"
SHA=$(sha256_of "$P/1m.bin")

# a second vsftpd, same root, that refuses passive mode (550)
free_port NOPASV_PORT
sed -e "s/^listen_port=.*\$/listen_port=$NOPASV_PORT/" -e 's/^pasv_enable=YES$/pasv_enable=NO/' \
    -e "s|^vsftpd_log_file=.*\$|vsftpd_log_file=$T/vsftpd-nopasv.log|" "$T/vsftpd.conf" >"$T/vsftpd-nopasv.conf"
vsftpd "$T/vsftpd-nopasv.conf" >"$T/vsftpd-nopasv.out" 2>&1 &
track_pid "$!"
wait_listen "$NOPASV_PORT" 5 "$!" || fail "the second vsftpd did not start on 127.0.0.1:$NOPASV_PORT"

free_port PORT
free_port PORT_NP
write_proxyd_conf
write_ftp_service fast "$PORT" '<ftp data-ports="47000-47999" strict-port-check="yes"><limits timeout="5s"/><command name="*" action="accept"/></ftp>'
write_ftp_service nopasv "$PORT_NP" '<ftp server-data="passive" data-ports="47000-47999"><command name="*" action="accept"/></ftp>' 127.0.0.1 "$NOPASV_PORT"
start_proxyd

python3 - "$PORT" "$PORT_NP" "$SHA" "$FTP_ROOT/pub" <<'EOF'
import ftplib, hashlib, io, os, socket, sys, time
port, port_np, want, pub = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)

def epsv(f):
    r = f.sendcmd("EPSV")
    return int(r.split("|||")[1].split("|")[0])

def pasv(f):
    r = f.sendcmd("PASV")
    a = r.split("(")[1].split(")")[0].split(",")
    return int(a[4]) * 256 + int(a[5])

def retr(f, p, name="pub/1m.bin"):
    d = socket.create_connection(("127.0.0.1", p), timeout=10)
    f.sendcmd("RETR " + name)
    h = hashlib.sha256()
    while True:
        b = d.recv(65536)
        if not b:
            break
        h.update(b)
    d.close()
    f.voidresp()
    return h.hexdigest()

def refused(src, p):
    """True: a connection from src to port p got no byte (reset or refused)."""
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", p))
        got = s.recv(100)
    except (ConnectionResetError, ConnectionRefusedError):
        got = b""
    except socket.timeout:
        fail("connection from %s to port %d neither refused nor reset in 3 s" % (src, p))
    s.close()
    return got == b""

# Before the login: the server's own answer, not an early 227.
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
try:
    r = f.sendcmd("PASV")
except ftplib.error_perm as e:
    r = str(e)
if not r.startswith("530"):
    fail("PASV before the login: expected the server's 530, got %r" % r)
print("ok PASV before login -> %s" % r)
f.login()

# Transfers one after the other: the same passive port each time.
p1 = epsv(f)
if retr(f, p1) != want:
    fail("first RETR: wrong sha256")
p2 = epsv(f)
if p2 != p1:
    fail("second EPSV: port %d, expected the kept %d" % (p2, p1))
if retr(f, p2) != want:
    fail("second RETR: wrong sha256")
p3 = pasv(f)
if p3 != p1:
    fail("PASV: port %d, expected the kept %d" % (p3, p1))
d = socket.create_connection(("127.0.0.1", p3), timeout=10)
f.sendcmd("STOR pub/up.bin")
d.sendall(b"x" * 70000)
d.close()
f.voidresp()
if os.path.getsize(os.path.join(pub, "up.bin")) != 70000:
    fail("STOR on the kept port: wrong size")
print("ok three transfers on port %d" % p1)

# Between transfers the port is open, but no connection gets through: not
# from another host, not even from the client's own.
if not refused("127.0.0.2", p1):
    fail("a connection from 127.0.0.2 between transfers got data")
if not refused("127.0.0.1", p1):
    fail("a connection from the client's host while no transfer waits got data")
print("ok strays between transfers reset")

# While a transfer waits: a thief from another host is reset, the client
# then gets its file.
p4 = epsv(f)
if p4 != p1:
    fail("EPSV after the strays: port %d, expected %d" % (p4, p1))
if not refused("127.0.0.2", p4):
    fail("a thief from 127.0.0.2 got data while the transfer waited")
if retr(f, p4) != want:
    fail("RETR after the thief: wrong sha256")
print("ok thief refused while waiting, the client got its file")

# Idle (2 s without a transfer): the port goes back to the range.
time.sleep(3)
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", p1))
    fail("port %d still listening after 3 s idle" % p1)
except ConnectionRefusedError:
    print("ok port %d closed when idle" % p1)
s.close()
p5 = epsv(f)
if retr(f, p5) != want:
    fail("RETR on a new port after idle: wrong sha256")
f.quit()

# A server without passive mode: the client's EPSV is answered at once
# (229) and its RETR gets the 425 from the proxy (NOOP first: its reply
# comes after the server's refusal of our PASV).
f = ftplib.FTP()
f.connect("127.0.0.1", port_np, timeout=10)
f.login()
r = f.sendcmd("EPSV")
if not r.startswith("229"):
    fail("EPSV with a server refusing PASV: expected the early 229, got %r" % r)
f.sendcmd("NOOP")
try:
    r = f.sendcmd("RETR pub/1m.bin")
except ftplib.error_temp as e:
    r = str(e)
if not r.startswith("425"):
    fail("RETR after the server refused PASV: expected 425, got %r" % r)
print("ok EPSV -> 229 at once, RETR -> %s" % r)
f.quit()
EOF

assert_log 'ftp-reply code=530 cmd=PASV$'
assert_log 'data-connection refused: from 127\.0\.0\.2:[0-9]+, expected the client'"'"'s host'
assert_log 'data-connection refused: from 127\.0\.0\.1:[0-9]+, no transfer waiting for it'
assert_log 'data-transfer download cmd=RETR file="pub/1m.bin" bytes=1048576 .* refused=1 end=ok'
assert_log 'ftp-data the server.s end of the data connection failed \(reply 550 to our PASV/EPSV\) after the client had its reply'
assert_log 'ftp-reply code=425 cmd=RETR by=proxy'
# vsftpd never saw the RETR the proxy answered
assert_no_grep "$T/vsftpd-nopasv.log" '"RETR pub/1m.bin"' "the RETR reached the server refusing PASV"
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="data_refused"' 3
info "PASS"
