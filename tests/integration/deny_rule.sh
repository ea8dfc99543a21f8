#!/usr/bin/env bash
# Every deny line names the rule that decided: rule=FILE:LINE of the
# element (FILE the policy file's base name, LINE found with grep -n in the
# file written here), rule=LABEL for an element with label=, rule=default
# when no rule matched and the list's default refused, and the limit's
# name for a limit. Covered: <clients> (session-end), <servers> in forward
# mode (http-error, http-request, session-end), HTTP <url> and <request>
# rules, the method default and max-url, FTP command, user and path rules
# and the command and user defaults (ftp-command lines), R66 host, rule and
# file rules and their defaults (r66 denied / r66-transfer policy-rule=,
# whose rule= is the R66 rule's name); a refusal that ends the session
# names the same rule on its session-end line, before by= and end=.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds nginx curl python3 sha256sum
need_r66peer
/usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null ||
    skip "python3-pyftpdlib missing (scripts/deps installs it)"
setup

# line_of FILE REGEX: the line of the first match in policy file FILE
line_of() {
    local n
    n=$(grep -n -m1 -E -- "$2" "$T/policy/$1" | cut -d: -f1)
    [[ -n $n ]] || fail "no /$2/ in $1"
    echo "$n"
}

# ended_with LINE_REGEX RULE: the session of the (first) log line matching
# LINE_REGEX ended denied, its session-end line naming RULE
ended_with() {
    local line id
    assert_log "$1"
    line=$(grep -m1 -E -- "$1" "$PROXYD_LOG")
    id=$(sed -nE 's/.* #([0-9]+) .*/\1/p' <<<"$line")
    [[ -n $id ]] || fail "no session id in: $line"
    assert_log " #$id session-end .* verdict=deny .* rule=$2 by=policy phase=[a-z]+ end=(denied|aborted): "
    assert_eq "$(kv "$(grep -m1 -E " #$id session-end " "$PROXYD_LOG")" rule)" "${2//\\/}" \
        "rule= of session #$id read by kv"
}

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
FTP_ROOT=$T/ftproot
mkdir -p "$FTP_ROOT/pub"
start_pyftpd
start_r66_server
mkdir -p "$T/cli"
head -c 4K /dev/urandom >"$T/cli/ok.bin"
head -c 4K /dev/urandom >"$T/cli/tool.exe"
head -c 4K /dev/urandom >"$T/cli/note.txt"

free_port P_CLI
free_port P_FWD
free_port P_WEB
free_port P_FTP
free_port P_R66
write_proxyd_conf
write_service cli "$P_CLI" "$NGINX_PORT" '' '10.0.0.0/8'
write_http_service fwd "$P_FWD" 0 '
<servers allow="127.0.0.2 127.0.0.3"/>
<http><request method="GET" action="accept"/></http>' forward
write_http_service web "$P_WEB" "$NGINX_PORT" '
<http>
  <limits max-url="64"/>
  <request method="GET" action="accept"/>
  <request method="DELETE" action="deny" status="403"/>
  <url path="/admin/*" action="deny"/>
  <url path="/secret/*" label="no-secret" action="deny"/>
</http>'
write_ftp_service ftp "$P_FTP" '
<ftp>
  <command name="DELE RNFR" action="deny"/>
  <command name="MKD RMD" label="read-only" action="deny"/>
  <user name="anonymous" action="accept"/>
  <user name="root" action="deny"/>
  <path pattern="*.exe" action="deny"/>
  <path pattern="/private/*" label="no-private" action="deny"/>
</ftp>' 127.0.0.1 "$PYFTPD_PORT"
write_r66_service r66 "$P_R66" "$R66_SRV_PORT" '<r66>
       <host id="hostz" label="no-hostz" action="deny"/>
       <host id="hostb" action="deny"/>
       <host id="hosta"/>
       <rule name="secret" action="deny"/>
       <rule name="in"/>
       <file pattern="*.exe" action="deny"/>
       <file pattern="*.bin"/>
     </r66>'
start_proxyd

# ---- connections: <clients>
rc=0
curl -s --max-time 10 -o /dev/null "http://127.0.0.1:$P_CLI/a.txt" || rc=$?
[[ $rc == 52 || $rc == 56 ]] || fail "refused client: curl rc $rc (expected 52 or 56)"
L=$(line_of cli.xml '<clients ')
assert_log "session-end service=cli .* rule=cli\.xml:$L by=policy phase=accept end=denied: client not allowed$"

# ---- <servers> in forward mode: asked per request
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$P_FWD" "http://127.0.0.1:$NGINX_PORT/a.txt?via=fwd")
assert_eq "$code" 403 "forward GET to a server outside <servers>"
L=$(line_of fwd.xml '<servers ')
assert_log "http-error status=403 reason=\"server not allowed [^\"]*\" rule=fwd\.xml:$L$"
ended_with "http-request .* path=/a\.txt\?via=fwd status=403 .* verdict=deny .* rule=fwd\.xml:$L$" "fwd\.xml:$L"

# ---- http: rules, the method default, a limit
web() { # METHOD PATH EXPECTED_STATUS
    local code
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X "$1" "http://127.0.0.1:$P_WEB$2")
    assert_eq "$code" "$3" "$1 $2"
}
web GET /a.txt 200
web GET /admin/x 403
web GET /secret/x 403
web DELETE /a.txt 403
web FOO /a.txt 405
LONG=/$(printf 'a%.0s' {1..80})
web GET "$LONG" 414
L=$(line_of web.xml '<url path="/admin/')
ended_with "http-request .* method=GET .* path=/admin/x status=403 .* verdict=deny .* rule=web\.xml:$L$" "web\.xml:$L"
assert_log "http-error status=403 reason=\"URL denied by policy\" rule=web\.xml:$L$"
ended_with "http-request .* method=GET .* path=/secret/x status=403 .* verdict=deny .* rule=no-secret$" no-secret
L=$(line_of web.xml '<request method="DELETE"')
ended_with "http-request .* method=DELETE .* status=403 .* verdict=deny .* rule=web\.xml:$L$" "web\.xml:$L"
ended_with "http-request .* method=FOO .* status=405 .* verdict=deny .* rule=default$" default
assert_log "http-error status=405 reason=\"method not allowed by default policy\" rule=default$"
assert_log "http-error status=414 reason=\"URI too long\" rule=limits/@max-url$"
# an accepted request names no rule
assert_log "http-request .* method=GET .* path=/a\.txt status=200 .* verdict=accept server=[^ ]+ upstream=[a-z]+$"

# ---- ftp: the proxy answers the refusals itself, the session goes on
python3 - "$P_FTP" <<'EOF'
import ftplib, sys
port = int(sys.argv[1])

def expect(f, cmd, code):
    try:
        r = f.sendcmd(cmd)
    except ftplib.all_errors as e:
        r = str(e)
    if not r.startswith(str(code)):
        sys.exit("FAIL %r: expected %d, got %r" % (cmd, code, r))
    print("ok %-22r -> %s" % (cmd, r))

f = ftplib.FTP()
f.connect("127.0.0.1", port, timeout=10)
f.login("anonymous", "x@y")
expect(f, "DELE a.txt", 550)
expect(f, "MKD newdir", 550)
expect(f, "XYZZ", 500)
expect(f, "SIZE /pub/tool.exe", 550)
expect(f, "SIZE /private/a.txt", 550)
expect(f, "NOOP", 200)
f.quit()
for user in ("root", "bob"):
    f = ftplib.FTP()
    f.connect("127.0.0.1", port, timeout=10)
    expect(f, "USER " + user, 530)
    f.close()
EOF
ftp_line() { # CMD ARG REASON_AND_MORE RULE
    assert_log "ftp-command user=[^ ]+ cmd=$1 arg=\"$2\" verdict=deny reason=$3 rule=$4$"
}
ftp_line DELE a\\.txt command "ftp\.xml:$(line_of ftp.xml '<command name="DELE')"
ftp_line MKD newdir command read-only
ftp_line XYZZ "" command default
ftp_line SIZE /pub/tool\\.exe "path path=\"/pub/tool\.exe\"" "ftp\.xml:$(line_of ftp.xml '<path pattern="\*\.exe"')"
ftp_line SIZE /private/a\\.txt "path path=\"/private/a\.txt\"" no-private
ftp_line USER root user "ftp\.xml:$(line_of ftp.xml '<user name="root"')"
ftp_line USER bob user default

# ---- r66: hosts end the connection, rules and files refuse the transfer
r66c "$P_R66" hostz:pwZ --rule in --mode 3 --send "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "client exit status, host hostz"
ended_with "r66 denied host=hostz: host rule=no-hostz$" no-hostz
r66c "$P_R66" hostb:pwb --rule in --mode 3 --send "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "client exit status, host hostb"
L=$(line_of r66.xml '<host id="hostb"')
ended_with "r66 denied host=hostb: host rule=r66\.xml:$L$" "r66\.xml:$L"
r66_denied() { # RULE FILE REASON POLICY_RULE
    r66c "$P_R66" hosta:pwA --rule "$1" --mode 3 --send "$T/cli/$2"
    assert_eq "$R66_RC" 2 "client exit status, rule $1 file $2"
    assert_log "r66-transfer host=hosta rule=$1 mode=sendmd5 file=${2//./\\.} .* verdict=deny reason=$3 policy-rule=$4 payload="
}
r66_denied secret ok.bin rule "r66\.xml:$(line_of r66.xml '<rule name="secret"')"
r66_denied out ok.bin rule default
r66_denied in tool.exe file-name "r66\.xml:$(line_of r66.xml '<file pattern="\*\.exe"')"
r66_denied in note.txt file-name default
r66c "$P_R66" hosta:pwA --rule in --mode 3 --send "$T/cli/ok.bin"
assert_eq "$R66_RC" 0 "the accepted transfer: $(cat "$T/client.err")"

# no deny line without its rule (r66-transfer lines: policy-rule=, their
# rule= is the R66 rule's name)
grep -E 'verdict=deny|r66 denied|http-error status=4' "$PROXYD_LOG" >"$T/deny.log" || true
n=$(wc -l <"$T/deny.log")
info "$n deny lines"
assert_ge "$n" 30 "deny lines"
assert_eq "$(grep -v 'r66-transfer' "$T/deny.log" | grep -cvE ' rule=[^ ]+( |$)' || true)" 0 \
    "deny lines without a rule=: $(grep -v 'r66-transfer' "$T/deny.log" | grep -vE ' rule=[^ ]+( |$)' || true)"
assert_eq "$(grep 'r66-transfer' "$T/deny.log" | grep -cv ' policy-rule=[^ ]' || true)" 0 \
    "r66-transfer deny lines without a policy-rule="
r66_finish
info "PASS"
