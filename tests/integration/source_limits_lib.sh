# shellcheck shell=bash
# Helpers for the per-user <source-limits> tests (source_limits_user.sh
# over http, source_limits_ftp_user.sh over ftp), on top of lib.sh and
# auth_lib.sh.

# sl_user_conf: slapd started (auth_lib.sh's start_ldap: alice, bob), the
# daemon file with its authenticator "dir" and 2 workers (a user's count
# must hold across them).
sl_user_conf() {
    start_ldap
    write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir)
  </authenticators>"
    sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
}

# sl_users PROTO PORT SERVICE: source_users.py's client of named
# connections (http or ftp, to PORT; SERVICE's session-end lines for its
# "ended"), its commands on stdin, its answers on stdout.
sl_users() {
    timeout 60 python3 "$LIB_DIR/source_users.py" "$1" "$2" "$PROXYD_LOG" "$3"
}

# sl_answers GOT WANT WHAT: fails unless GOT has as many lines as WANT and
# each matches WANT's line (a Python regex, whole) in order.
sl_answers() {
    python3 -c '
import re, sys
got, want = sys.argv[1].split("\n"), sys.argv[2].split("\n")
sys.exit(not (len(got) == len(want) and all(re.fullmatch(w, g) for w, g in zip(want, got))))
' "$1" "$2" || fail "$3, in order: got
$1
want
$2"
}
