#!/usr/bin/env bash
# Path rules on servers that do not chroot their users (vsftpd with
# local users, Pure-FTPd): a login starts in the user's home, not "/".
# With absolute patterns (HOME/secret, HOME/secret/*), every relative
# spelling of a denied path (read, list, write, delete, rename, after a
# CWD or CDUP, pipelined behind the login; ftp_login_dir.py) is refused
# although the client never sent PWD: proxyd asks the server's directory
# itself after the login (its own PWD, whose answer no client sees), and
# the server's files stay untouched. Allowed relative paths still work.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
need_ftpds
need_cmds useradd userdel chpasswd
setup

add_ftp_user
H=$FTP_HOME
mkdir -p "$H/secret/sub" "$H/secret/empty" "$H/dl"
printf 'the secret\n' >"$H/secret/a.txt"
printf 'deeper\n' >"$H/secret/sub/b.txt"
printf 'dl file\n' >"$H/dl/a.txt"
printf 'top\n' >"$H/a.txt"
chown -R "$FTP_USER:" "$H"
find "$H" -type f -exec sha256sum {} + | sort >"$T/before.sha"

start_vsftpd_local
start_pureftpd

POLICY="<ftp>
    <command name=\"XCWD XMKD XRMD\" action=\"accept\"/>
    <path pattern=\"$H/secret\" action=\"deny\"/>
    <path pattern=\"$H/secret/*\" action=\"deny\"/>
  </ftp>"
free_port VPORT
free_port PPORT
write_proxyd_conf
write_ftp_service vs "$VPORT" "$POLICY"
write_ftp_service pure "$PPORT" "$POLICY" 127.0.0.1 "$PUREFTPD_PORT"
start_proxyd

rc=0
for srv in "vsftpd $VSFTPD_PORT $VPORT" "pure-ftpd $PUREFTPD_PORT $PPORT"; do
    set -- $srv
    timeout 120 /usr/bin/python3 "$(dirname "$0")/ftp_login_dir.py" "$1" "$2" "$3" \
        "$FTP_USER" "$FTP_PASS" "$H" || rc=1
    # what the allowed STOR left, for the next server's round
    rm -f "$H/up.txt"
done
((rc == 0)) || fail "relative paths under a denied directory passed proxyd (above)"

# The server's files: as they were (nothing planted, moved or deleted)
find "$H" -type f -exec sha256sum {} + | sort >"$T/after.sha"
diff "$T/before.sha" "$T/after.sha" >&2 || fail "the servers' files changed through proxyd"
for d in secret/newdir secret/newdir2; do
    [[ ! -e $H/$d ]] || fail "$d was made through proxyd"
done
[[ -d $H/secret/empty ]] || fail "secret/empty was removed through proxyd"

assert_log "ftp-home user=$FTP_USER dir=\"$H\""
assert_log "cmd=RETR arg=\"secret/a.txt\" verdict=deny reason=path path=\"$H/secret/a.txt\""
assert_log "cmd=RNTO arg=\"secret/moved.txt\" verdict=deny reason=path path=\"$H/secret/moved.txt\""
# the proxy's own PWD reached both servers
assert_grep "$T/vsftpd.log" "\"PWD\"" "vsftpd saw the proxy's PWD"
info "ok"
