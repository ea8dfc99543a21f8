#!/usr/bin/env bash
# FTP inline, transparent mode: the client fetches ftp://198.19.2.2/ (vsftpd in
# the server namespace) through the fw, where deploy/inline-tproxy.sh diverts
# port 21 to proxyd (TPROXY) and one more rule diverts the data-ports range
# with its destination port kept (TPROXY --on-port 0) to proxyd's data
# listeners. Passive (EPSV) and active (EPRT: proxyd connects to the client
# from the server's address) on the client side, passive to the server:
# sha256 of RETR and STOR, log lines with the server's own address, a
# data connection from another host refused, and a server end that fails
# after the client had its EPSV answer: the port it was told resets at once
# (a closed port would drop the SYN under TPROXY: a client hanging until its
# timeout) and RETR gets proxyd's 425 instead of going to the server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds vsftpd
id ftp >/dev/null 2>&1 || skip "no 'ftp' user for vsftpd's anonymous login"
netns_setup

ROOT=$T/ftproot
mkdir -p "$ROOT/pub" /var/run/vsftpd/empty
chmod 755 "$ROOT"
chown ftp:ftp "$ROOT/pub"
head -c 2M /dev/urandom >"$ROOT/pub/2m.bin"
chmod 644 "$ROOT/pub/2m.bin"
head -c 1M /dev/urandom >"$T/up.bin"
cat >"$T/vsftpd.conf" <<EOF
listen=YES
listen_ipv6=NO
listen_address=$TOPO_S4
listen_port=21
background=NO
anonymous_enable=YES
local_enable=NO
no_anon_password=YES
anon_root=$ROOT
write_enable=YES
anon_upload_enable=YES
anon_umask=022
pasv_enable=YES
pasv_min_port=41000
pasv_max_port=41009
port_enable=YES
connect_from_port_20=NO
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
xferlog_enable=YES
vsftpd_log_file=$T/vsftpd.log
log_ftp_protocol=YES
secure_chroot_dir=/var/run/vsftpd/empty
EOF
ip netns exec "$S" vsftpd "$T/vsftpd.conf" >"$T/vsftpd.out" 2>&1 &
track_pid "$!"
topo_wait_listen "$S" 21 5 "$!" || { cat "$T/vsftpd.out" >&2; fail "vsftpd did not start in the server namespace"; }

# the data ports keep their destination port: proxyd listens on each
deploy tproxy --port 21 --proxy-port 50021 --family 4 --data-ports 40000:40099

# The data-ports rule diverts new connections only: a connection made *from*
# a port in the range (an active-mode data connection from a server's
# ephemeral port) has its SYN-ACK come back to that port, and must be
# forwarded, not diverted to a listener that is not there (a stall).
info "a connection from a port in the data-ports range is forwarded"
ip netns exec "$C" "$PYTHON" - "$TOPO_C4" >"$T/from-range.out" 2>&1 <<'EOF_PY' &
import socket, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 5020))
l.listen(1)
l.settimeout(10)
c, a = l.accept()
c.sendall(b"hello from the client, to port %d\n" % a[1])
c.close()
EOF_PY
track_pid "$!"
topo_wait_listen "$C" 5020 5 "$!" || fail "helper listener did not start in the client namespace"
got=$(nsS "$PYTHON" - "$TOPO_S4" "$TOPO_C4" <<'EOF_PY'
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 40050))
s.settimeout(3)
try:
    s.connect((sys.argv[2], 5020))
    print(s.recv(100).decode().strip())
except OSError as e:
    print("failed: %s" % e)
EOF_PY
)
assert_eq "$got" "hello from the client, to port 40050" "connection from port 40050 (inside data-ports) through the fw"

write_conf_ns
cat >"$T/policy/ftp.xml" <<EOF
<service name="ftp" analyser="ftp">
  <listen address="0.0.0.0" port="50021" mode="transparent"/>
  <ftp client-data="keep" server-data="passive" data-ports="40000-40099">
    <limits timeout="5s"/>
    <command name="*" action="accept"/>
  </ftp>
</service>
EOF
NS_PORTS+=(50021)
start_proxyd_ns

SHA=$(sha256_of "$ROOT/pub/2m.bin")
for mode in passive active; do
    args=()
    [[ $mode == active ]] && args=(-P "$TOPO_C4")
    info "client ($mode): RETR and STOR via ftp://$TOPO_S4/"
    got=$(nsC curl -sS --max-time 30 "${args[@]}" "ftp://$TOPO_S4/pub/2m.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$SHA" "$mode: sha256 of RETR through the fw"
    nsC curl -sS --max-time 30 "${args[@]}" -T "$T/up.bin" "ftp://$TOPO_S4/pub/up-$mode.bin" 2>>"$T/curl.err" ||
        fail "$mode: STOR failed: $(tail -n 2 "$T/curl.err")"
    assert_eq "$(sha256_of "$ROOT/pub/up-$mode.bin")" "$(sha256_of "$T/up.bin")" "$mode: sha256 of STOR"
done

wait_log_count 'session-end service=ftp ' 4 || fail "expected 4 session-end lines"
assert_log "session-end service=ftp analyser=ftp verdict=accept client=198\\.18\\.1\\.2:[0-9]+ dst=198\\.19\\.2\\.2:21 server=198\\.19\\.2\\.2:21 "
assert_log 'ftp-reply code=229 cmd=EPSV by=proxy'
assert_log "ftp-command user=anonymous cmd=EPRT arg=\"\\|1\\|198\\.18\\.1\\.2\\|[0-9]+\\|\" verdict=accept"
assert_log 'data-transfer download cmd=RETR file="2m.bin" bytes=2097152 .* client=198\.18\.1\.2:[0-9]+ server=198\.19\.2\.2:[0-9]+ refused=0 end=ok'
assert_log 'data-transfer upload cmd=STOR file="up-active.bin" bytes=1048576 .* client=198\.18\.1\.2:[0-9]+ server=198\.19\.2\.2:[0-9]+ refused=0 end=ok'
assert_ge "$(rule_pkts 4 mangle PROXYD 'proxyd: data ports')" 2 "packets through the data-port TPROXY rule"
# vsftpd saw proxyd's address on the fw, in passive mode
assert_grep "$T/vsftpd.log" 'Client "198\.19\.2\.1", "PASV"' "vsftpd did not get PASV from the fw"

info "a data connection from another host is refused"
nsC ip addr add 198.18.1.3/24 dev c0
nsC "$PYTHON" - "$TOPO_S4" <<'EOF' || fail "thief scenario failed: see above"
import ftplib, socket, sys
host = sys.argv[1]
f = ftplib.FTP()
f.connect(host, 21, timeout=10)
f.login()
r = f.sendcmd("EPSV")
port = int(r.split("|||")[1].split("|")[0])
th = socket.socket()
th.bind(("198.18.1.3", 0))
th.settimeout(3)
# reset at once: at connect() or at the first read, depending on timing
try:
    th.connect((host, port))
    got = th.recv(100)
except (ConnectionResetError, socket.timeout):
    got = b""
th.close()
assert got == b"", "thief got %r" % got
d = socket.create_connection((host, port), timeout=10)
f.sendcmd("RETR pub/2m.bin")
n = 0
while True:
    b = d.recv(65536)
    if not b:
        break
    n += len(b)
d.close()
f.voidresp()
f.quit()
assert n == 2097152, "client got %d bytes" % n
print("ok thief refused, client got", n)
EOF
assert_log 'data-connection refused: from 198\.18\.1\.3:[0-9]+, expected the client'"'"'s host'
assert_log 'data-transfer download cmd=RETR file="pub/2m.bin" bytes=2097152 .* refused=1 end=ok'

info "the server's end fails after the early EPSV answer"
# vsftpd's passive ports refuse proxyd's connection (RST): the failure
# comes after the client has its 229, as a lost or refused connection would.
nsS iptables -I INPUT -p tcp --dport 41000:41009 -j REJECT --reject-with tcp-reset
lost_before=$(grep -c 'end=connect to the server failed' "$PROXYD_LOG" || true)
nsC "$PYTHON" - "$TOPO_S4" "$PROXYD_LOG" "$lost_before" <<'EOF' || fail "lost server end scenario failed: see above"
import ftplib, socket, sys, time
host, log, before = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = ftplib.FTP()
f.connect(host, 21, timeout=10)
f.login()
r = f.sendcmd("EPSV")
port = int(r.split("|||")[1].split("|")[0])
# The client comes only once proxyd has given the server's end up.
deadline = time.time() + 10
while open(log).read().count("end=connect to the server failed") <= before:
    if time.time() > deadline:
        sys.exit("proxyd never logged the failed server end")
    time.sleep(0.05)
t0 = time.time()
late = socket.socket()
late.settimeout(5)
try:
    late.connect((host, port))
    got = "data %r" % late.recv(100)
except ConnectionResetError:
    got = "reset"
except ConnectionRefusedError:
    got = "refused"
except socket.timeout:
    got = "timed out"
late.close()
took = time.time() - t0
assert got in ("reset", "refused", "data b''"), \
    "connection to the told port %d: %s after %.1f s" % (port, got, took)
assert took < 2, "connection to port %d took %.1f s to fail" % (port, took)
try:
    f.sendcmd("RETR pub/2m.bin")
    sys.exit("RETR after a lost server end was not refused")
except ftplib.error_temp as e:
    assert str(e).startswith("425"), "RETR: %s" % e
print("ok late connection %s in %.2f s, RETR got 425" % (got, took), flush=True)
f.quit()
EOF
nsS iptables -D INPUT -p tcp --dport 41000:41009 -j REJECT --reject-with tcp-reset
assert_log ' warning #[0-9]+ data-transfer - cmd=- file="" bytes=0 .* end=connect to the server failed: Connection refused'
assert_log 'ftp-reply code=425 cmd=RETR by=proxy'
assert_log 'data-connection refused: from 198\.18\.1\.2:[0-9]+, no transfer waiting for it'
info "PASS"
