#!/usr/bin/env bash
# The ftp analyser's default command set: an <ftp> section that only denies
# the write commands is a working read-only proxy (USER, PASS, LIST, RETR
# and the rest of RFC 959/2389/2428/3659 accepted), against vsftpd and
# pyftpdlib; STOR is answered by the proxy and never reaches the server; a
# bare <ftp/> section is a working read-write proxy; a verb outside the
# standard set is still refused (500).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
/usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null || skip "python3-pyftpdlib is not installed"
setup

start_vsftpd
start_pyftpd
head -c 200K /dev/urandom >"$FTP_ROOT/pub/ok.bin"
chmod 644 "$FTP_ROOT/pub/ok.bin"
WANT=$(sha256_of "$FTP_ROOT/pub/ok.bin")
head -c 50K /dev/urandom >"$T/up.bin"

RO='<ftp data-ports="47000-47999"><command name="STOR STOU APPE DELE MKD RMD RNFR RNTO SITE" action="deny"/></ftp>'
free_port P_VS
free_port P_PY
free_port P_RW
write_proxyd_conf
write_ftp_service ro-vsftpd "$P_VS" "$RO"
write_ftp_service ro-pyftpd "$P_PY" "$RO" 127.0.0.1 "$PYFTPD_PORT"
write_ftp_service rw "$P_RW" '<ftp data-ports="47000-47999"/>'
start_proxyd

for svc in vsftpd:$P_VS pyftpd:$P_PY; do
    name=${svc%%:*} port=${svc##*:}
    rc=$(curl_ftp -o "$T/got.$name" "$(ftp_url "$port" pub/ok.bin)")
    assert_eq "$rc" 0 "$name: RETR through a deny-only policy (curl rc)"
    assert_eq "$(sha256_of "$T/got.$name")" "$WANT" "$name: sha256 of the download"
    rc=$(curl_ftp -o "$T/list.$name" "$(ftp_url "$port" pub/)")
    assert_eq "$rc" 0 "$name: LIST (curl rc)"
    assert_grep "$T/list.$name" 'ok\.bin' "$name: the listing names ok.bin"
    rc=$(curl_ftp -T "$T/up.bin" "$(ftp_url "$port" pub/up-$name.bin)")
    [[ $rc != 0 ]] || fail "$name: STOR through a read-only policy succeeded"
    [[ ! -e $FTP_ROOT/pub/up-$name.bin ]] || fail "$name: the refused upload created the file"
    assert_log "ftp-command user=anonymous cmd=STOR arg=\"up-$name\.bin\" verdict=deny reason=command"
done
# vsftpd logs every command it gets: STOR never arrived
assert_grep "$T/vsftpd.log" '"RETR pub/ok.bin"|RETR' "vsftpd logged the RETR"
assert_no_grep "$T/vsftpd.log" 'STOR' "vsftpd saw a STOR"

# a bare <ftp/>: the standard set, uploads included
rc=$(curl_ftp -T "$T/up.bin" "$(ftp_url "$P_RW" pub/up-rw.bin)")
assert_eq "$rc" 0 "STOR through a bare <ftp/> (curl rc)"
assert_eq "$(sha256_of "$FTP_ROOT/pub/up-rw.bin")" "$(sha256_of "$T/up.bin")" "sha256 of the upload"
# ...but not what is outside it
python3 - "$P_RW" <<'PY'
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=10)
f.login("anonymous", "x@y")
for cmd, want in (("XYZZ", "500"), ("XMKD pub/d", "550"), ("NOOP", "200")):
    try:
        r = f.sendcmd(cmd)
    except ftplib.all_errors as e:
        r = str(e)
    if not r.startswith(want):
        sys.exit("FAIL: %r: expected %s, got %r" % (cmd, want, r))
    print("ok %r -> %s" % (cmd, r))
f.quit()
PY
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
