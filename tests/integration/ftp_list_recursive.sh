#!/usr/bin/env bash
# Listings that would show what is under a denied directory, on servers
# that honour them (users not chrooted): LIST -R, LIST -lR, LIST -Ra,
# NLST -R, STAT -R, STAT -lR (recursive options: ProFTPD, Pure-FTPd, and
# vsftpd with ls_recurse_enable) and "LIST dl secret" (Pure-FTPd lists each
# word as a name of its own). Where the service has path rules, proxyd
# refuses each (550, logged why=recursive or why=several-names) and no
# listing shows a name under secret; each spelling is first sent to the
# servers directly, which show the name for most of them. Plain listings
# still pass, and without path rules LIST -R passes too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
need_ftpds
need_cmds useradd userdel chpasswd
setup

add_ftp_user
H=$FTP_HOME
mkdir -p "$H/secret/sub" "$H/dl"
printf 'x\n' >"$H/secret/hidden-name.txt"
printf 'y\n' >"$H/secret/sub/hidden-deeper.txt"
printf 'dl file\n' >"$H/dl/a.txt"
chown -R "$FTP_USER:" "$H"

start_vsftpd_local "ls_recurse_enable=YES"
start_pureftpd
start_proftpd

POLICY="<ftp>
    <path pattern=\"$H/secret\" action=\"deny\"/>
    <path pattern=\"$H/secret/*\" action=\"deny\"/>
  </ftp>"
write_proxyd_conf
free_port VPORT
free_port PPORT
free_port RPORT
free_port OPEN
write_ftp_service vs "$VPORT" "$POLICY"
write_ftp_service pure "$PPORT" "$POLICY" 127.0.0.1 "$PUREFTPD_PORT"
write_ftp_service pro "$RPORT" "$POLICY" 127.0.0.1 "$PROFTPD_PORT"
write_ftp_service open "$OPEN" "<ftp/>" 127.0.0.1 "$PROFTPD_PORT"
start_proxyd

timeout 100 /usr/bin/python3 - "$FTP_USER" "$FTP_PASS" \
    "vsftpd:$VSFTPD_PORT:$VPORT" "pure-ftpd:$PUREFTPD_PORT:$PPORT" \
    "proftpd:$PROFTPD_PORT:$RPORT" "proftpd-no-rules:$PROFTPD_PORT:$OPEN" <<'PY' ||
import ftplib, sys
user, password, servers = sys.argv[1], sys.argv[2], sys.argv[3:]
RECURSIVE = ["LIST -R", "LIST -lR", "LIST -Ra", "NLST -R", "NLST -aR",
             "STAT -R", "STAT -lR", "LIST --recursive", "LIST dl secret",
             "NLST dl secret", "STAT dl secret"]
PLAIN = ["LIST", "LIST -la", "NLST", "STAT .", "LIST dl", "NLST dl"]
bad = []

def session(port):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    f.login(user, password)
    return f

def listing(port, line):
    f = session(port)
    try:
        if line.startswith("STAT"):
            return f.sendcmd(line)
        out = []
        f.retrlines(line, out.append)
        return "226 " + "\n".join(out)
    except ftplib.all_errors as e:
        return str(e)
    finally:
        f.close()

for spec in servers:
    name, dport, pport = spec.split(":")
    leaked = 0
    for line in RECURSIVE:
        direct = listing(int(dport), line)
        proxied = listing(int(pport), line)
        leaks = "hidden-" in direct
        leaked += leaks
        if name.endswith("no-rules"):
            ok = proxied.split("\n")[0][:3] == direct.split("\n")[0][:3]
        else:
            ok = proxied.startswith("550 ") and "by the proxy" in proxied \
                and "hidden-" not in proxied
        print("%s\t%r\tdirect-leaks=%s\tproxied=%r" %
              (name, line, leaks, proxied.split("\n")[0]))
        if not ok:
            bad.append("%s: %r through proxyd: %r" % (name, line, proxied))
    # the servers do show what is under secret for these
    if leaked < 3:
        bad.append("%s: only %d recursive listings leak directly" %
                   (name, leaked))
    for line in PLAIN:
        proxied = listing(int(pport), line)
        if proxied[0] != "2" or "hidden-" in proxied:
            bad.append("%s: plain %r through proxyd: %r" %
                       (name, line, proxied))
for b in bad:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
PY
    fail "a recursive listing passed proxyd (above)"

assert_log 'cmd=LIST arg="-R" verdict=deny reason=path-unsafe why=recursive rule=builtin'
assert_log 'cmd=STAT arg="-lR" verdict=deny reason=path-unsafe why=recursive rule=builtin'
assert_log 'cmd=NLST arg="-R" verdict=deny reason=path-unsafe why=recursive rule=builtin'
assert_log 'cmd=LIST arg="dl secret" verdict=deny reason=path-unsafe why=several-names rule=builtin'
info "ok"
