#!/usr/bin/env bash
# FTP data-channel security: PORT/EPRT to a third address (FTP bounce) or a
# privileged port is refused and nothing connects there; a connection from
# another host to a client's passive port is reset and the client still
# gets its file; an unused passive port resets a late client after the data
# timeout, then closes when idle, and closes when the session ends; IPv6
# on the client side (EPSV, EPRT |2|) and on the server side (proxyd sends
# EPSV or EPRT |2| to a vsftpd on ::1). A privileged port is refused
# whatever strict-port-check says: PORT 25 with strict-port-check="no",
# and a (scripted) server whose PASV reply names port 25 (the bounce the
# other way: proxyd would write a client's STOR into the server host's
# SMTP): the transfer gets 425 (ftplib, curl), nothing connects to 25,
# and a transfer command sent before that PASV reply came waits for it:
# never forwarded (its 425), or, behind a valid reply, the upload works.
# A multi-line 227 names its address on any line (its first alone, "227
# OK" last): the upload works, and port 25 on its first line is refused
# though the last names a data port. Against a server that never answers
# proxyd's PASV, the transfer command waiting for it is given up when an
# ABOR (426, then 226) or a QUIT (426, 221, closed) follows it, at once,
# and gets its 425 at the data timeout when nothing follows.
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

free_port PORT
free_port PORT6
free_port TRAP
write_proxyd_conf
write_ftp_service sec "$PORT" '<ftp data-ports="46000-46999" strict-port-check="yes"><limits timeout="2s"/><command name="*" action="accept"/></ftp>'
# strict-port-check="no": another host is fine, a privileged port is not
free_port LOOSE
write_ftp_service loose "$LOOSE" '<ftp data-ports="46000-46999" strict-port-check="no"><command name="*" action="accept"/></ftp>'
# a server that names port 25 in its PASV reply, 300 ms late (after the
# client's transfer command has reached proxyd), but for user "good": a
# data port of its own, where an upload's sha256 comes back in its 226.
# It logs each command it gets (bouncer.log, next to this script). For
# user "silent" it never answers PASV, nor anything after it.
start_py_server BOUNCER <<'PY'
import hashlib, os
def handle(c):
    c.settimeout(10)
    c.sendall(b"220 bouncer\r\n")
    f = c.makefile("rb")
    log = open(os.path.join(os.path.dirname(sys.argv[0]), "bouncer.log"), "a")
    user, data, silent = b"-", None, False
    for line in f:
        verb = line.split(b" ")[0].strip().upper()
        log.write("%s %s\n" % (user.decode(), verb.decode()))
        log.flush()
        if silent:
            continue
        if verb == b"USER":
            user = line.split(b" ", 1)[1].strip()
        reply = {b"USER": b"331 pw", b"PASS": b"230 in", b"PWD": b'257 "/"',
                 b"PASV": b"227 Entering Passive Mode (127,0,0,1,0,25)",
                 b"EPSV": b"229 Entering Extended Passive Mode (|||25|)",
                 b"STOR": b"150 go", b"RETR": b"150 go",
                 b"QUIT": b"221 bye"}.get(verb, b"200 ok")
        if verb in (b"PASV", b"EPSV") and user == b"silent":
            silent = True
            continue
        if verb in (b"PASV", b"EPSV"):
            time.sleep(0.3)
            if user in (b"good", b"multi", b"multi25"):
                data = socket.socket()
                data.bind(("127.0.0.1", 0))
                data.listen(1)
                data.settimeout(5)
                p = data.getsockname()[1]
                reply = b"227 Entering Passive Mode (127,0,0,1,%d,%d)" % (
                    p >> 8, p & 255)
                # Multi-line: the address on the first line only (the
                # one every client takes), or port 25 there and the data
                # port on the last.
                if user == b"multi":
                    reply = b"227-" + reply[4:] + b"\r\n227 OK"
                elif user == b"multi25":
                    reply = (b"227-Entering Passive Mode (127,0,0,1,0,25)"
                             b"\r\n227 OK " + reply[4:])
        c.sendall(reply + b"\r\n")
        if verb == b"STOR" and data is not None:
            d, _ = data.accept()
            h = hashlib.sha256()
            while True:
                b = d.recv(65536)
                if not b:
                    break
                h.update(b)
            d.close()
            data.close()
            data = None
            c.sendall(b"226 sha256=%s\r\n" % h.hexdigest().encode())
        elif verb in (b"STOR", b"RETR"):
            time.sleep(0.5)
            c.sendall(b"226 done\r\n")
        if verb == b"QUIT":
            return
PY
free_port BNC
write_ftp_service bnc "$BNC" '<ftp data-ports="46000-46999" server-data="passive"><command name="*" action="accept"/></ftp>' 127.0.0.1 "$BOUNCER"
# the same with a data timeout of 2 s
free_port BNCTO
write_ftp_service bncto "$BNCTO" '<ftp data-ports="46000-46999" server-data="passive"><limits timeout="2s"/><command name="*" action="accept"/></ftp>' 127.0.0.1 "$BOUNCER"
have_v6=0
if python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    have_v6=1
    write_ftp_service sec6 "$PORT6" '<ftp data-ports="46000-46999"><limits timeout="2s"/><command name="*" action="accept"/></ftp>' '::1'
    # IPv4 client, IPv6 server: EPSV / EPRT |2| on the server's side
    start_vsftpd6
    free_port PORT6P
    free_port PORT6A
    write_ftp_service srv6p "$PORT6P" '<ftp server-data="passive" data-ports="46000-46999"><command name="*" action="accept"/></ftp>' 127.0.0.1 "$VSFTPD6_PORT" ::1
    write_ftp_service srv6a "$PORT6A" '<ftp server-data="active" data-ports="46000-46999"><command name="*" action="accept"/></ftp>' 127.0.0.1 "$VSFTPD6_PORT" ::1
fi
start_proxyd

# A trap on port 25 of the server's (and client's) host, where a data
# connection to a privileged port would go (bindable as root; else the log
# and the counters alone tell)
python3 - "$T/trap25.log" <<'EOF' &
import socket, sys, time
log = open(sys.argv[1], "w", buffering=1)
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    t.bind(("127.0.0.1", 25))
except OSError as e:
    log.write("unbound %r\n" % (e,))
    sys.exit(0)
t.listen(4)
log.write("listening\n")
t.settimeout(0.5)
end = time.time() + 90
while time.time() < end:
    try:
        c, a = t.accept()
    except socket.timeout:
        continue
    c.settimeout(2)
    try:
        got = c.recv(65536)
    except OSError:
        got = b""
    log.write("connection from %r got %r\n" % (a, got[:40]))
    c.close()
EOF
TRAP_PID=$!
track_pid "$TRAP_PID"
wait_grep "$T/trap25.log" 'listening|unbound' 10 || fail "the port 25 trap did not start"
python3 - "$PORT" "$TRAP" "$SHA" "$PROXYD_LOG" "$LOOSE" "$BNC" "$T/bouncer.log" "$BNCTO" <<'EOF'
import ftplib, hashlib, socket, sys, time
port, trap, want, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]

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
    print("ok %-34r -> %s" % (cmd, r))
    return r

# A third host that would receive the bounce: nothing may connect to it.
t = socket.socket()
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.2", trap))
t.listen(4)
t.settimeout(1.0)

f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
f.login()
hi, lo = trap >> 8, trap & 255
expect(f, "PORT 127,0,0,2,%d,%d" % (hi, lo), 500)
expect(f, "EPRT |1|127.0.0.2|%d|" % trap, 500)
expect(f, "PORT 127,0,0,1,0,25", 500)
expect(f, "PORT 127,0,0,1,300,1", 501)
expect(f, "EPRT |3|x|1|", 522)
try:
    f.retrbinary("RETR pub/1m.bin", lambda b: None)
except ftplib.all_errors as e:
    print("ok RETR after refused PORTs -> %s" % e)
try:
    c, a = t.accept()
    fail("the third host got a connection from %r" % (a,))
except socket.timeout:
    print("ok nothing connected to 127.0.0.2:%d" % trap)
f.quit()

# A thief on another host takes the passive port first.
f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
f.login()
f.voidcmd("TYPE I")
r = f.sendcmd("PASV")
host, dport = ftplib.parse227(r)
th = socket.socket()
th.bind(("127.0.0.2", 0))
th.settimeout(3)
got = b""
# reset at once: at connect() or at the first read, depending on timing
try:
    th.connect((host, dport))
    while True:
        b = th.recv(65536)
        if not b:
            break
        got += b
except (ConnectionResetError, socket.timeout) as e:
    print("ok thief: %r" % e)
th.close()
if got:
    fail("the thief got %d bytes" % len(got))
# the real client, from the client's host, still gets its file
d = socket.create_connection((host, dport), timeout=10)
f.sendcmd("RETR pub/1m.bin")
h = hashlib.sha256()
n = 0
while True:
    b = d.recv(65536)
    if not b:
        break
    h.update(b)
    n += len(b)
d.close()
f.voidresp()
if h.hexdigest() != want:
    fail("client got %d bytes with the wrong sha256" % n)
print("ok client got its %d bytes after the thief was refused" % n)

# A client that reads the whole file but never closes its data connection:
# at the data timeout proxyd closes it (no reset) and counts it as done.
# It reads slowly, so that the file's end is still on its way when the
# server's end comes (delivered by then, the channel ends at once:
# ftp_data_end.sh).
r = f.sendcmd("EPSV")
p = int(r.split("|||")[1].split("|")[0])
d = socket.socket()
d.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
d.settimeout(10)
d.connect(("127.0.0.1", p))
f.sendcmd("RETR /pub/1m.bin")
n = 0
while True:
    b = d.recv(16384)
    if not b:
        break
    n += len(b)
    time.sleep(0.002)
f.voidresp()
# the channel looks at its sockets every 2 s: the bytes moved count at the
# first look, the second finds nothing moved
time.sleep(4.8)
d.close()
if n != 1048576:
    fail("lingering client got %d bytes" % n)
print("ok lingering data connection: %d bytes" % n)

def listening(port):
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(name).readlines()[1:]:
            f_ = line.split()
            if f_[3] == "0A" and int(f_[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False

def wait_for(what, cond, limit):
    deadline = time.time() + limit
    while not cond():
        if time.time() > deadline:
            fail("waited %.0f s in vain for %s" % (limit, what))
        time.sleep(0.05)

# A passive port nobody uses: the transfer is given up at the data timeout
# (2 s); the port stays for its idle time (2 s more), so that a client coming
# late is reset rather than left without an answer, then closes.
gave_up = lambda: open(log).read().count("end=timeout: no data connection")
before = gave_up()
r = f.sendcmd("EPSV")
p = int(r.split("|||")[1].split("|")[0])
print("idle-port %d" % p, flush=True)
wait_for("the data timeout", lambda: gave_up() > before, 6)
# reset at once: at connect() or at the first read, depending on timing
try:
    late = socket.create_connection(("127.0.0.1", p), timeout=2)
    try:
        got = late.recv(10)
    finally:
        late.close()
except ConnectionResetError:
    got = b""
if got != b"":
    fail("late connection to port %d got %r" % (p, got))
print("ok late connection to port %d reset after the data timeout" % p)
wait_for("port %d to close when idle" % p, lambda: not listening(p), 6)
print("ok passive port %d closed when idle" % p)
# ... and when the session ends
r = f.sendcmd("EPSV")
p = int(r.split("|||")[1].split("|")[0])
f.quit()
time.sleep(0.3)
try:
    socket.create_connection(("127.0.0.1", p), timeout=2).close()
    fail("passive port %d still open after QUIT" % p)
except ConnectionRefusedError:
    print("ok passive port %d closed with the session" % p)

# Privileged data ports, whatever strict-port-check says (the loose
# service), and a server whose PASV reply names port 25 (bnc).
loose, bnc, bouncer_log = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
f = ftplib.FTP()
f.connect("127.0.0.1", loose, timeout=10)
f.login()
expect(f, "PORT 127,0,0,1,0,25", 500)
expect(f, "EPRT |1|127.0.0.1|25|", 500)
f.quit()
# proxyd answers PASV itself once logged in; the server's 227 naming
# port 25 then costs the transfer command its 425, never forwarded
f = ftplib.FTP()
f.connect("127.0.0.1", bnc, timeout=10)
f.login("u", "p")
expect(f, "PASV", 227)
deadline = time.time() + 10
while "the server's 227 reply names port 25" not in open(log).read():
    if time.time() > deadline:
        sys.stderr.write("FAIL: no ftp-bounce line for the server's 227\n")
        sys.exit(1)
    time.sleep(0.05)
expect(f, "STOR x", 425)
f.quit()
# The transfer command at once, before the server's (refused) 227 came:
# it waits for that reply, never reaches the server, and gets the 425.
f = ftplib.FTP()
f.connect("127.0.0.1", bnc, timeout=10)
f.login("late", "p")
expect(f, "PASV", 227)
try:
    r = f.sendcmd("STOR x")
except ftplib.all_errors as e:
    r = str(e)
seen = open(bouncer_log).read().splitlines()
if "late STOR" in seen:
    fail("the server got the STOR sent before its refused 227 came "
         "(the client got %r)" % r)
if not r.startswith("425"):
    fail("STOR before the server's refused 227: expected 425, got %r" % r)
print("ok STOR before the server's refused 227 -> %s, not forwarded" % r)
f.quit()
# ... and before a valid 227: held until it came, then the upload moves
import io
blob = bytes(range(256)) * 1024 + b"end"
def upload(user, name):
    f = ftplib.FTP()
    f.connect("127.0.0.1", bnc, timeout=10)
    f.login(user, "p")
    f.voidcmd("TYPE I")
    try:
        r = f.storbinary("STOR " + name, io.BytesIO(blob))
    except ftplib.all_errors as e:
        r = str(e)
    f.quit()
    return r
stored = "226 sha256=" + hashlib.sha256(blob).hexdigest()
r = upload("good", "y")
if r != stored:
    fail("upload behind a late 227: %r" % r)
print("ok STOR behind a late valid 227 -> %s" % r)
# A multi-line 227 whose address is on its first line alone (RFC 959 4.2:
# a reply's text is all its lines; ftplib, curl and lftp find the address
# anywhere in it): the upload moves as it does without proxyd
r = upload("multi", "z")
if r != stored:
    fail("upload behind a multi-line 227, its address on the first line: %r"
         % r)
print("ok STOR behind 227-(address) / 227 OK -> %s" % r)
# ... and one naming port 25 on its first line, a data port on its last:
# the first is the one a client takes, so it is the one judged (425; its
# ftp-bounce line below)
r = upload("multi25", "w")
if not r.startswith("425"):
    fail("multi-line 227 naming port 25 first: expected 425, got %r" % r)
print("ok STOR behind 227-(port 25) / 227 OK (data port) -> %s" % r)

# A server that never answers proxyd's PASV (the client had its 227 from
# proxyd at once): the transfer command waits for that reply, but neither
# an ABOR nor a QUIT behind it waits with it.
def silent_session(port):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login("silent", "p")
    expect(f, "PASV", 227)
    return f

def answer(f, what, code, limit):
    t0 = time.time()
    try:
        r = f.getmultiline()
    except ftplib.all_errors as e:
        r = "(%r after %.1f s)" % (e, time.time() - t0)
    if not r.startswith(str(code)) or time.time() - t0 > limit:
        fail("%s: expected %d within %.0f s, got %r after %.1f s" % (
            what, code, limit, r, time.time() - t0))
    print("ok %s -> %s (%.1f s)" % (what, r, time.time() - t0))

# ABOR (RFC 959 4.1.3, the command still in progress): 426 to the
# transfer, 226 to the ABOR, both from proxyd at once; the ABOR after a
# Telnet synch as lftp sends it (IAC IP IAC, DM as urgent data)
f = silent_session(bnc)
f.putcmd("STOR a")
f.sock.sendall(b"\xff\xf4\xff")
f.sock.send(b"\xf2", socket.MSG_OOB)
f.putcmd("ABOR")
answer(f, "STOR behind an unanswered PASV, then ABOR", 426, 5)
answer(f, "ABOR", 226, 5)
f.close()
# QUIT: the transfer's 426, the 221, the connection closed, at once
f = silent_session(bnc)
f.putcmd("STOR q")
f.putcmd("QUIT")
answer(f, "STOR behind an unanswered PASV, then QUIT", 426, 5)
answer(f, "QUIT", 221, 5)
t0 = time.time()
if f.sock.recv(100) != b"" or time.time() - t0 > 5:
    fail("the connection stayed open after QUIT's 221")
print("ok connection closed after QUIT's 221")
f.close()
# Nothing behind it: the data timeout (2 s, bncto) ends the wait, as when
# the server refuses (425)
f = silent_session(int(sys.argv[8]))
f.putcmd("RETR t")
answer(f, "RETR behind an unanswered PASV, past the data timeout", 425, 8)
f.close()
seen = open(bouncer_log).read().splitlines()
for bad in ("silent STOR", "silent ABOR", "silent RETR"):
    if bad in seen:
        fail("the server got %r behind its unanswered PASV" % bad)
print("ok no transfer command nor ABOR reached the silent server")
EOF

assert_no_grep "$T/vsftpd.log" 'FTP command: .*"(PORT|EPRT) 127,0,0,2|127\.0\.0\.2' "a bounce PORT reached vsftpd"
assert_log 'ftp-bounce refused: PORT 127,0,0,2,'
assert_log 'ftp-bounce refused: EPRT \|1\|127\.0\.0\.2\|'
assert_log 'data-connection refused: from 127\.0\.0\.2:[0-9]+, expected the client'"'"'s host'
assert_log 'data-transfer download cmd=RETR file="pub/1m.bin" bytes=1048576 .* refused=1 end=ok'
# the log says which end never came: the client's, to proxyd's port
assert_log 'data-transfer - cmd=- file="" bytes=0 .* end=timeout: no data connection \(client: waiting, server: connected\)'
# ended by proxyd at its data timeout (before the client's close at 4.8 s)
assert_log 'data-transfer download cmd=RETR file="/pub/1m.bin" bytes=1048576 .* duration=[34]\.[0-9]+ .* end=ok'
# the bounces to 127.0.0.2 and to port 25, the bnc server's three 227s
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="bounce_refused"' 8
# the thief and the late connection after the data timeout
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="data_refused"' 2
assert_eq "$(proxyd_listening_in 46000 46999)" "" "data ports left listening"

if ((have_v6)); then
    info "IPv6 client side: EPSV and EPRT |2|"
    got=$(curl -sS --max-time 30 "ftp://[::1]:$PORT6/pub/1m.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$SHA" "sha256 over IPv6 EPSV"
    got=$(curl -sS --max-time 30 -P - "ftp://[::1]:$PORT6/pub/1m.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$SHA" "sha256 over IPv6 EPRT"
    assert_log 'ftp-command user=anonymous cmd=EPRT arg="\|2\|::1\|[0-9]+\|" verdict=accept'
    assert_log 'data-transfer download .* client=\[::1\]:[0-9]+ server=127\.0\.0\.1:[0-9]+ refused=0 end=ok'
    info "IPv6 server side: EPSV and EPRT |2| to vsftpd on ::1"
    for p in "$PORT6P" "$PORT6A"; do
        got=$(curl -sS --max-time 30 --disable-epsv "$(ftp_url "$p" pub/1m.bin)" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
        assert_eq "$got" "$SHA" "sha256 via an IPv6 server (proxy port $p)"
    done
    assert_log 'ftp-data client=passive server=passive sent="EPSV"'
    assert_log 'ftp-data client=passive server=active sent="EPRT \|2\|::1\|[0-9]+\|"'
    assert_grep "$T/vsftpd6.log" 'FTP command: Client "::1", "EPRT \|2\|::1\|' "vsftpd on ::1 never got the EPRT"
    assert_log 'data-transfer download .* client=127\.0\.0\.1:[0-9]+ server=\[::1\]:[0-9]+ refused=0 end=ok'
else
    info "no IPv6 loopback: IPv6 part not run"
fi
# a real client's upload the same way: its STOR waits for the server's
# late 227 and gets the 425, nothing reaches 25
echo "MAIL FROM:<bounce@example.test>" >"$T/mail.txt"
rc=0
curl -sS --max-time 20 -T "$T/mail.txt" "ftp://u:p@127.0.0.1:$BNC/x" 2>"$T/curl-bnc.err" || rc=$?
assert_ne "$rc" 0 "curl's upload through a server naming port 25"
assert_grep "$T/curl-bnc.err" '425' "curl's STOR did not get the 425"
# no transfer command reached the server behind a refused 227 or 229
assert_no_grep "$T/bouncer.log" '^(u|late) (STOR|RETR)' "a STOR reached the server"
assert_log 'ftp-bounce refused: PORT 127,0,0,1,0,25 is not the client'"'"'s host or uses a port below 1024'
assert_log 'ftp-bounce refused: EPRT \|1\|127\.0\.0\.1\|25\|'
assert_log 'ftp-bounce refused: the server.s 227 reply names port 25, below 1024: "227 Entering Passive Mode \(127,0,0,1,0,25\)"'
# the silent server: ABOR answered by proxyd, QUIT answered and passed on
assert_log 'ftp-reply code=426 cmd=STOR by=proxy'
assert_log 'ftp-command user=silent cmd=ABOR arg="" verdict=accept by=proxy'
assert_log 'session-end service=bnc analyser=ftp verdict=accept .* by=client phase=data end=quit'
assert_grep "$T/bouncer.log" '^silent QUIT$' "the QUIT answered by proxyd did not reach the server"
# the multi-line one: the line naming the address it judged
assert_log 'ftp-bounce refused: the server.s 227 reply names port 25, below 1024: "227-Entering Passive Mode \(127,0,0,1,0,25\)"'
# the 8 above and the 227 of curl's session
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="bounce_refused"' 9
kill "$TRAP_PID" 2>/dev/null || true
wait "$TRAP_PID" 2>/dev/null || true
cat "$T/trap25.log"
assert_no_grep "$T/trap25.log" '^connection' "a data connection reached port 25"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
