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
need_ftp
need_cmds python3 slapd ldapadd
setup

start_ldap
start_vsftpd
for i in 1 2 3; do printf 'file %s\n' "$i" >"$FTP_ROOT/pub/f$i.txt"; done

write_proxyd_conf "" "<authenticators>
    $(ldap_conf dir)
  </authenticators>"
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
free_port FU
write_ftp_service fu "$FU" "<auth authenticator=\"dir\"/>
  <source-limits per=\"user\" sessions=\"2\" transfers=\"3/m\"/>
  <ftp><login user=\"*\" server-user=\"anonymous\"/></ftp>"
start_proxyd

# A client driven by lines on its stdin, one session per name:
#   open NAME SRC | login NAME USER PW | retr NAME FILE | close NAME |
#   ended SRC | quit
# each login or retr prints "NAME REPLY" (the first line of the answer, or
# "closed" when the control connection ended).
cat >"$T/users.py" <<'EOF'
import ftplib, io, sys, time
port, log = int(sys.argv[1]), sys.argv[2]
conns = {}
def say(name, what):
    print(name, what.split("\n")[0], flush=True)
for line in sys.stdin:
    w = line.split()
    if not w:
        continue
    if w[0] == "open":
        f = ftplib.FTP(source_address=(w[2], 0))
        f.connect("127.0.0.1", port, timeout=10)
        conns[w[1]] = f
    elif w[0] == "login":
        try:
            say(w[1], conns[w[1]].login(w[2], w[3]))
        except ftplib.Error as e:
            say(w[1], str(e))
        except (EOFError, OSError):
            say(w[1], "closed")
    elif w[0] == "retr":
        buf = io.BytesIO()
        try:
            conns[w[1]].retrbinary("RETR pub/" + w[2], buf.write)
            say(w[1], "OK " + buf.getvalue().decode().strip())
        except ftplib.Error as e:
            say(w[1], str(e))
        except (EOFError, OSError):
            say(w[1], "closed")
    elif w[0] == "close":
        f = conns.pop(w[1])
        try:
            f.quit()
        except Exception:
            f.close()
    elif w[0] == "ended":
        # proxyd's session-end line for the client at w[1] (5 s at most)
        for _ in range(100):
            if any(" session-end service=fu " in l and " client=%s:" % w[1] in l
                   for l in open(log, errors="replace")):
                break
            time.sleep(0.05)
        else:
            print("no session-end for", w[1], flush=True)
    elif w[0] == "quit":
        break
EOF

info "alice: 2 sessions held, a 3rd login refused 421; bob served; transfers by user"
out=$(timeout 60 python3 "$T/users.py" "$FU" "$PROXYD_LOG" <<'EOF'
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
python3 -c '
import re, sys
got, want = sys.argv[1].split("\n"), sys.argv[2].split("\n")
sys.exit(not (len(got) == len(want) and all(re.fullmatch(w, g) for w, g in zip(want, got))))
' "$out" "$want" ||
    fail "the answers, in order: got
$out
want
$want"
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
