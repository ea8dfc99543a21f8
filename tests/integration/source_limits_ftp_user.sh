#!/usr/bin/env bash
# <source-limits per="user" sessions="2" transfers="3/m"> on an ftp service
# with <auth> (inband, against a real slapd made here; vsftpd anonymous
# behind it by <login user="*" server-user="anonymous">):
# - alice logs in from 127.0.0.1 and from 127.0.0.2 (2 sessions held); her
#   third login, from 127.0.0.3, is answered 421 naming the rule, the
#   session ends and the server never sees a login for it; a "limited ...
#   source=user:alice limit=sessions" line, limit="sessions" counted;
#   bob, from 127.0.0.3 too, logs in meanwhile;
# - transfers= counts by the proven user, whatever the address: alice's
#   3 RETRs over her two sessions pass, her 4th (on either) gets 450,
#   bob's are his own;
# - once one of alice's sessions ends, her next login is served.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
source "$(dirname "$0")/source_limits_lib.sh"
need_ftp
need_cmds python3 slapd ldapadd
setup

sl_user_conf
start_vsftpd
for i in 1 2 3; do printf 'file %s\n' "$i" >"$FTP_ROOT/pub/f$i.txt"; done
free_port FU
write_ftp_service fu "$FU" "<auth authenticator=\"dir\" basic-without-tls=\"yes\"/>
  <source-limits per=\"user\" sessions=\"2\" transfers=\"3/m\"/>
  <ftp><login user=\"*\" server-user=\"anonymous\"/></ftp>"
start_proxyd

info "alice: 2 sessions held, a 3rd login refused 421; bob served; transfers by user"
out=$(sl_users ftp "$FU" fu <<'EOF'
open a1 127.0.0.1
login a1 alice alice-ldap-pw
open a2 127.0.0.2
login a2 alice alice-ldap-pw
open a3 127.0.0.3
login a3 alice alice-ldap-pw
open b1 127.0.0.3
login b1 bob bob-ldap-pw
retr a1 f1.txt
retr a2 f2.txt
retr a1 f3.txt
retr a2 f1.txt
retr a1 f1.txt
retr b1 f2.txt
close a2
ended 127.0.0.2
open a4 127.0.0.4
login a4 alice alice-ldap-pw
quit
EOF
)
info "$out"
want="a1 230 User alice logged in
a2 230 User alice logged in
a3 421 Too many sessions or connections of user alice \(source limit, rule fu\.xml:5\), try again in 1 s, closing control connection
b1 230 User bob logged in
a1 OK file 1
a2 OK file 2
a1 OK file 3
a2 450 RETR: too many transfers of yours \(source limit: transfers, rule fu\.xml:5\), try again in [0-9]+ s
a1 450 RETR: too many transfers of yours \(source limit: transfers, rule fu\.xml:5\), try again in [0-9]+ s
b1 OK file 2
a4 230 User alice logged in"
sl_answers "$out" "$want" "the answers"
wait_grep "$PROXYD_LOG" 'limited service=fu client=127\.0\.0\.3:[0-9]+ source=user:alice limit=sessions rule=fu\.xml:5 refused=1$' 5 ||
    fail "no limited line for alice's sessions"
wait_grep "$PROXYD_LOG" 'limited service=fu client=127\.0\.0\.[12]:[0-9]+ source=user:alice limit=transfers rule=fu\.xml:5 refused=[12]$' 5 ||
    fail "no limited line for alice's transfers"
assert_metric eq proxyd_limited_total 'service="fu",analyser="ftp",limit="sessions"' 1
assert_metric eq proxyd_limited_total 'service="fu",analyser="ftp",limit="transfers"' 2
assert_no_grep "$PROXYD_LOG" 'source=user:bob' "bob was limited"
# the refused session: 421 logged, no login sent to the server
wait_grep "$PROXYD_LOG" 'session-end service=fu analyser=ftp verdict=deny client=127\.0\.0\.3:[0-9]+ .*to-server=0 .*rule=fu\.xml:5 user=alice auth=password by=policy .*end=denied: source-limits$' 5 ||
    fail "no session-end with the rule for alice's refused session"
assert_grep "$PROXYD_LOG" 'ftp-reply code=421 cmd=PASS by=proxy \(source limit, rule fu\.xml:5\)' \
    "the 421 logged"
assert_eq "$(grep -c 'cmd=USER arg="anonymous" verdict=accept by=proxy (the server login' "$PROXYD_LOG")" 4 \
    "server logins: alice twice, bob, alice again (none for the refused one)"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
