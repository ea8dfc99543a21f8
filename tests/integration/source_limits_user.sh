#!/usr/bin/env bash
# <source-limits per="user" sessions="2" requests="4/m"> on an http service
# with <auth> (Basic, checked against a real slapd the test makes in its
# temp dir), 2 workers: a connection counts as its user's once its first
# request proved who the client is.
# - alice holds 2 keep-alive connections, from 127.0.0.1 and 127.0.0.2;
#   a third of hers, from 127.0.0.3, is refused at its first proven
#   request: 429, Retry-After: 1, Connection: close, a "limited ...
#   source=user:alice limit=sessions" line, limit="sessions" counted;
#   bob, from 127.0.0.3 too, is served meanwhile (another user);
# - requests: the first request of a connection comes before any proof
#   and counts by address; from the second on, by the user: alice's 4
#   pass, her 5th gets 429 limit=requests (the connection stays), on her
#   other connection too (one bucket for the user, whatever the address);
#   bob's are his own;
# - once one of alice's connections ends, a new one of hers is served;
# - connections="1/m" per user: alice's second connection, from another
#   address, gets 429 with Retry-After ~60 (limit=connections); bob's
#   first is served;
# - over HTTP/2 (h2c) the streams of one connection are one connection of
#   their user's: carol's two streams in flight on it pass (each a
#   transaction of that session, not a leg of its own), a second
#   connection of hers gets 429 on each of its streams (limit=connections,
#   the line tagged proto=h2: not only on the first) and its connection
#   goes on;
# - per="user" without <auth>: bad_config.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
source "$(dirname "$0")/source_limits_lib.sh"
need_cmds nginx python3 slapd ldapadd
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx

sl_user_conf
free_port PU
free_port PC
write_http_service web "$PU" "$NGINX_PORT" "
<auth authenticator=\"dir\" methods=\"basic\" required=\"yes\" basic-without-tls=\"yes\"/>
<source-limits per=\"user\" sessions=\"2\" requests=\"4/m\"/>"
write_http_service webc "$PC" "$NGINX_PORT" "
<auth authenticator=\"dir\" methods=\"basic\" required=\"yes\" basic-without-tls=\"yes\"/>
<source-limits per=\"user\" connections=\"1/m\" burst=\"1\"/>
<http h2=\"yes\" h2c=\"yes\"/>"
start_proxyd

run() { sl_users http "$PU" web; }

info "alice: 2 connections held, a 3rd refused at its first proven request; bob served"
out=$(run <<'EOF'
open a1 127.0.0.1
req a1 alice alice-ldap-pw
open a2 127.0.0.2
req a2 alice alice-ldap-pw
open a3 127.0.0.3
req a3 alice alice-ldap-pw
open b1 127.0.0.3
req b1 bob bob-ldap-pw
req a1 alice alice-ldap-pw
req a1 alice alice-ldap-pw
req a2 alice alice-ldap-pw
req a2 alice alice-ldap-pw
req a1 alice alice-ldap-pw
req a2 alice alice-ldap-pw
req b1 bob bob-ldap-pw
close a2
ended 127.0.0.2
open a4 127.0.0.4
req a4 alice alice-ldap-pw
quit
EOF
)
info "$out"
want="a1 200 retry=- conn=keep
a2 200 retry=- conn=keep
a3 429 retry=1 conn=close
b1 200 retry=- conn=keep
a1 200 retry=- conn=keep
a1 200 retry=- conn=keep
a2 200 retry=- conn=keep
a2 200 retry=- conn=keep
a1 429 retry=1[45] conn=keep-alive
a2 429 retry=1[45] conn=keep-alive
b1 200 retry=- conn=keep
a4 200 retry=- conn=keep"
sl_answers "$out" "$want" "the answers"
wait_grep "$PROXYD_LOG" 'limited service=web client=127\.0\.0\.3:[0-9]+ source=user:alice limit=sessions rule=web\.xml:6 refused=1$' 5 ||
    fail "no limited line for alice's sessions"
wait_grep "$PROXYD_LOG" 'limited service=web client=127\.0\.0\.1:[0-9]+ source=user:alice limit=requests rule=web\.xml:6 refused=1$' 5 ||
    fail "no limited line for alice's requests"
assert_metric eq proxyd_limited_total 'service="web",analyser="http",limit="sessions"' 1
assert_metric eq proxyd_limited_total 'service="web",analyser="http",limit="requests"' 2
assert_no_grep "$PROXYD_LOG" 'source=user:bob' "bob was limited"
info "connections=\"1/m\" per user: alice's second connection (another address) refused, bob's first served"
out=$(run <<EOF
open c1 127.0.0.5 $PC
req c1 alice alice-ldap-pw
open c2 127.0.0.6 $PC
req c2 alice alice-ldap-pw
open c3 127.0.0.6 $PC
req c3 bob bob-ldap-pw
quit
EOF
)
info "$out"
want="c1 200 retry=- conn=keep
c2 429 retry=(59|60) conn=close
c3 200 retry=- conn=keep"
sl_answers "$out" "$want" "webc's answers"
wait_grep "$PROXYD_LOG" 'limited service=webc client=127\.0\.0\.6:[0-9]+ source=user:alice limit=connections rule=webc\.xml:6 refused=1$' 5 ||
    fail "no limited line for alice's connections"
assert_metric eq proxyd_limited_total 'service="webc",analyser="http",limit="connections"' 1
info "HTTP/2: carol's two streams on one connection pass, her second connection's stream is refused"
H2S=$LIB_DIR/h2_auth_streams.py
/usr/bin/python3 "$H2S" --port "$PC" streams "/a.txt?h1=carol:carol-ldap-pw" "/a.txt?h2=carol:carol-ldap-pw" \
    >"$T/h2c1.out" 2>"$T/h2c1.err" || fail "h2 client: $(cat "$T/h2c1.out" "$T/h2c1.err")"
assert_eq "$(tr '\n' ' ' <"$T/h2c1.out")" "/a.txt?h1 200 /a.txt?h2 200 " "carol's two streams on one h2 connection"
/usr/bin/python3 "$H2S" --port "$PC" streams "/a.txt?h3=carol:carol-ldap-pw" "/a.txt?h4=carol:carol-ldap-pw" \
    >"$T/h2c2.out" 2>"$T/h2c2.err" || fail "h2 client: $(cat "$T/h2c2.out" "$T/h2c2.err")"
assert_eq "$(tr '\n' ' ' <"$T/h2c2.out")" "/a.txt?h3 429 /a.txt?h4 429 " "carol's second h2 connection, each of its streams"
wait_grep "$PROXYD_LOG" 'http-request .* path=/a\.txt\?h3 status=429 .* proto=h2 stream=1$' 5 ||
    fail "no 429 line for carol's second h2 connection"
wait_grep "$PROXYD_LOG" 'http-request .* path=/a\.txt\?h4 status=429 .* rule=webc\.xml:6 .* proto=h2 stream=3$' 5 ||
    fail "no 429 line for the second stream of carol's second h2 connection"
assert_metric eq proxyd_limited_total 'service="webc",analyser="http",limit="connections"' 2
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
