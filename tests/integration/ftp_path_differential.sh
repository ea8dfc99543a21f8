#!/usr/bin/env bash
# FTP path rules against real servers, differentially: a few thousand
# generated spellings of files and directories (., .., //, absolute, after
# a CWD, mixed case, trailing /, globs, ~, \, spaces; ftp_path_differential.py)
# go to vsftpd and to pyftpdlib directly and through proxyd. Whenever a
# server would use a file or directory under the denied tree (secret,
# secret/*, *.exe with case="insensitive"), proxyd must refuse; whenever it
# would use an allowed one, proxyd must give that same one (or refuse for a
# documented strict reason, never by a rule). The table of every spelling
# and both decisions is left in $T/paths.tsv.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

start_vsftpd
python3 "$(dirname "$0")/ftp_path_differential.py" --make-tree "$FTP_ROOT"
start_pyftpd

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
start_proxyd

: >"$T/paths.tsv"
rc=0
python3 "$(dirname "$0")/ftp_path_differential.py" vsftpd "$VSFTPD_PORT" "$VPORT" \
    "$T/paths.tsv" 25 || rc=1
python3 "$(dirname "$0")/ftp_path_differential.py" pyftpdlib "$PYFTPD_PORT" "$PPORT" \
    "$T/paths.tsv" 30 || rc=1
((rc == 0)) || fail "proxyd's path decisions differ from what the servers serve (above)"

# Both servers did serve denied files directly, and proxyd refused each.
for srv in vsftpd pyftpdlib; do
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
