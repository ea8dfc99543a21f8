#!/usr/bin/env bash
# FTP path rules against real servers, differentially: a few thousand
# generated spellings of files and directories (., .., //, absolute, after
# a CWD, mixed case, trailing /, globs, ~, \, spaces; ftp_path_differential.py)
# go to vsftpd, to pyftpdlib and to a pyftpdlib that does not chroot (the
# tree at /ftproot, its login directory, learnt from PWD), directly and
# through proxyd. Whenever a server would use a file or directory under the
# denied tree (secret, secret/*, *.exe with case="insensitive"), proxyd must
# refuse; whenever it would use an allowed one, proxyd must give that same
# one (or refuse for a documented strict reason, never by a rule).
# FTP_PATH_TABLE=FILE keeps the table of every spelling and both decisions.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
python3 "$(dirname "$0")/ftp_path_differential.py" --make-tree "$FTP_ROOT"
start_pyftpd

# A server that does not chroot: pyftpdlib serving $T, where the login
# directory is /ftproot (the tree), as an unchrooted vsftpd user's home.
free_port HOMED_PORT
/usr/bin/python3 - "$T" "$HOMED_PORT" >"$T/pyftpd-home.log" 2>&1 <<'PY' &
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.INFO)
a = DummyAuthorizer()
a.add_anonymous(sys.argv[1], perm="elr")
class Unchrooted(FTPHandler):
    authorizer = a
    def on_login(self, username):
        self.fs.cwd = "/ftproot"
FTPServer(("127.0.0.1", int(sys.argv[2])), Unchrooted).serve_forever(timeout=1)
PY
track_pid $!
wait_listen "$HOMED_PORT" 20 $! || fail "pyftpdlib (unchrooted) did not start"

POLICY='<ftp case="insensitive">
    <command name="XCWD XCUP XPWD" action="accept"/>
    <path pattern="secret" action="deny"/>
    <path pattern="secret/*" action="deny"/>
    <path pattern="*.exe" action="deny"/>
  </ftp>'
free_port VPORT
free_port PPORT
write_proxyd_conf
write_ftp_service vs "$VPORT" "$POLICY"
write_ftp_service py "$PPORT" "$POLICY" 127.0.0.1 "$PYFTPD_PORT"
free_port HPORT
write_ftp_service pyh "$HPORT" "$POLICY" 127.0.0.1 "$HOMED_PORT"
start_proxyd

: >"$T/paths.tsv"
rc=0
python3 "$(dirname "$0")/ftp_path_differential.py" vsftpd "$VSFTPD_PORT" "$VPORT" \
    "$T/paths.tsv" 25 || rc=1
python3 "$(dirname "$0")/ftp_path_differential.py" pyftpdlib "$PYFTPD_PORT" "$PPORT" \
    "$T/paths.tsv" 30 || rc=1
python3 "$(dirname "$0")/ftp_path_differential.py" pyftpdlib-home "$HOMED_PORT" "$HPORT" \
    "$T/paths.tsv" 30 /ftproot || rc=1
((rc == 0)) || fail "proxyd's path decisions differ from what the servers serve (above)"

# Both servers did serve denied files directly, and proxyd refused each.
for srv in vsftpd pyftpdlib pyftpdlib-home; do
    n=$(grep -c "^$srv	.*	deny\$" "$T/paths.tsv" || true)
    assert_ge "$n" 100 "$srv: spellings of denied files the server serves"
    n=$(grep -c "^$srv	.*	allow\$" "$T/paths.tsv" || true)
    assert_ge "$n" 100 "$srv: spellings of allowed files served through proxyd"
done
assert_log 'cmd=SIZE arg="dl/../secret/a.txt" verdict=deny reason=path path="/secret/a.txt"'
assert_log 'cmd=SIZE arg="/../secret/a.txt" verdict=deny reason=path-unsafe why=above-root'
assert_log 'cmd=CWD arg="secre\?" verdict=deny reason=path-unsafe why=glob'
# A refused command never reaches the server (sent through proxyd only).
assert_grep "$T/vsftpd.log" 'FTP command: .*"SIZE a.txt"' "vsftpd logs no commands (check the pattern)"
assert_no_grep "$T/vsftpd.log" 'secret//a.txt//' "vsftpd saw a command proxyd refused"
# FTP_PATH_TABLE=FILE: keep the table
[[ -z ${FTP_PATH_TABLE:-} ]] || cp "$T/paths.tsv" "$FTP_PATH_TABLE"
info "PASS ($(wc -l <"$T/paths.tsv") spellings)"
