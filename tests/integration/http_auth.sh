#!/usr/bin/env bash
# <auth> on an http service, against a real MIT KDC and a real slapd, both
# made by this test in its temp dir on loopback: the realm EXAMPLE.TEST
# (kdb5_util create -s; HTTP/localhost with its keytab for proxyd, alice
# with a password, kinit alice into the test's ccache), and a directory
# dc=example,dc=test (mdb, the memberof overlay; alice and bob, the group
# ops with alice in it; loaded with ldapadd). Through a forward-mode
# service: no credentials get 407 with both challenges; curl
# --proxy-negotiate passes as alice (user=alice auth=negotiate on the
# http-request line); Basic alice passes, a wrong password is 407 again
# and logged result=bad-password without the password; a user name that
# is an LDAP filter (*)(uid=*) matches nobody; Proxy-Authorization never
# reaches the server; a keep-alive connection is asked once; a group rule
# lets alice (in ops) reach /admin/ and gives bob 403; ALICE, "alice " and
# " alice" are alice (the directory's value of uid).
# Over a TLS listener Basic is offered and taken without
# basic-without-tls (401, WWW-Authenticate, Authorization).
# HTTP/2 (h2c) in reverse mode: 401 with WWW-Authenticate, Basic and
# Negotiate on a stream, Authorization not sent on; the streams are
# transactions of the connection's session, which is the user's (its
# session-end line); in forward mode a stream gets 407 and its
# Proxy-Authorization is checked; eight streams in flight with one credential make
# one check; a wrong password on one stream fails it alone, and a stream
# without credentials is not judged with another stream's answer; a stream
# reset, and a connection reset, while their checks wait on a directory
# that never answers cancel them, and proxyd goes on. --check and a reload
# refuse a keytab that cannot be read (the running configuration goes
# on). Then slapd stops: a user the cache does not know gets 503 (logged
# directory-down), alice, cached, still passes, and a connection carol
# proved before keeps her identity. Last, a directory that accepts and
# never answers: 503 within its timeout, while another service on the
# same single worker keeps its latency and a Negotiate check for another
# service is answered at once (one authenticator holds two auth threads
# at most); three h2 connections with a hundred streams of other Basic
# credentials each hold one check each, not the auth queue that alice's
# login then waits in.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx curl python3 openssl slapd ldapadd krb5kdc kdb5_util kadmin.local kinit
setup

printf 'alpha\n' >"$T/www/a.txt"
printf 'beta\n' >"$T/www/not-alice.txt"
mkdir -p "$T/www/admin"
printf 'secret-page\n' >"$T/www/admin/x.txt"
start_nginx
ORIGIN_LOG=$T/origin.jsonl
start_origin ORIGIN "$ORIGIN_LOG"

start_kdc
start_ldap

# ---- a directory that accepts and never answers
start_py_server STALL <<'EOF'
def handle(c):
    time.sleep(20)
EOF

free_port PF
free_port PO
free_port PS
free_port PN
free_port PH
free_port PT
free_port PHS
free_port PFH
free_port PHL
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost -keyout "$T/conf/tls.key" -out "$T/conf/tls.pem" >/dev/null 2>&1 ||
    fail "openssl req"
AUDIT=$T/audit.json
write_proxyd_conf "" "<audit target=\"file:$AUDIT\"/>
  <authenticators>
    <kerberos name=\"corp\" keytab=\"$K/http.keytab\" service=\"HTTP\"/>
    <ldap name=\"dir\" url=\"ldap://127.0.0.1:$LDAP_PORT\" base-dn=\"dc=example,dc=test\"
          bind-dn=\"cn=admin,dc=example,dc=test\" bind-password-file=\"ldap.pw\"
          user-filter=\"(uid=%u)\" group-attribute=\"memberOf\" cache=\"5m\" timeout=\"2s\"/>
    <ldap name=\"stalled\" url=\"ldap://127.0.0.1:$STALL\" base-dn=\"dc=example,dc=test\"
          timeout=\"1500ms\"/>
    <ldap name=\"stalledlong\" url=\"ldap://127.0.0.1:$STALL\" base-dn=\"dc=example,dc=test\"
          timeout=\"10s\"/>
  </authenticators>"
# one worker: a stalled directory must not stall it
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service fwd "$PF" 0 "
<auth authenticator=\"corp dir\" methods=\"negotiate basic\" required=\"yes\" basic-without-tls=\"yes\" realm=\"proxyd test\"/>
<audit min-size=\"0\"/>
<http>
  <url path=\"/not-alice.txt\" user=\"alice\" action=\"deny\" status=\"403\"/>
  <url path=\"/admin/*\" group=\"ops\" action=\"accept\"/>
  <url path=\"/admin/*\" action=\"deny\" status=\"403\"/>
</http>" forward
# Basic without basic-without-tls: not offered, not taken in plain
write_http_service fwdtls "$PO" 0 "
<auth authenticator=\"corp dir\" methods=\"negotiate basic\"/>
<http/>" forward
write_http_service stall "$PS" 0 "
<auth authenticator=\"stalled\" methods=\"basic\" basic-without-tls=\"yes\"/>
<http/>" forward
write_http_service plain "$PN" "$NGINX_PORT" "<http/>"
# TLS from the client: Basic offered and taken without basic-without-tls
write_http_service tls "$PT" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" cert=\"$T/conf/tls.pem\" key=\"$T/conf/tls.key\"/>
<auth authenticator=\"dir\" methods=\"basic\"/>
<http/>"
# reverse (fixed) mode, HTTP/2 by prior knowledge: 401 and Authorization;
# each h2 stream is a transaction of the connection's session, through
# the same engine (and the same <auth>) as an HTTP/1.1 request
write_http_service h2 "$PH" "$ORIGIN" "
<auth authenticator=\"corp dir\" basic-without-tls=\"yes\"/>
<http h2=\"yes\" h2c=\"yes\"/>"
# forward mode over HTTP/2 (h2c): 407 and Proxy-Authorization on streams
write_http_service fwdh2 "$PFH" 0 "
<auth authenticator=\"corp dir\" methods=\"negotiate basic\" basic-without-tls=\"yes\"/>
<http h2=\"yes\" h2c=\"yes\"/>" forward
# the same over the directory that never answers: a stream reset, or its
# connection closed, while its check waits; credentials not required
write_http_service h2stall "$PHS" "$ORIGIN" "
<auth authenticator=\"stalled\" methods=\"basic\" basic-without-tls=\"yes\" required=\"no\"/>
<http h2=\"yes\" h2c=\"yes\"/>"
# streams with a hundred passwords each, held on a directory that never
# answers (within the test's time)
write_http_service h2hold "$PHL" "$ORIGIN" "
<auth authenticator=\"stalledlong\" methods=\"basic\" basic-without-tls=\"yes\"/>
<http h2=\"yes\" h2c=\"yes\"/>"

# --check refuses what cannot work: an unreadable keytab, a missing
# password file, a bad url; each at its line
cp "$PROXYD_CONF" "$T/conf/bad.xml"
sed -i -e "s|keytab=\"$K/http.keytab\"|keytab=\"$K/none.keytab\"|" \
    -e 's|bind-password-file="ldap.pw"|bind-password-file="nope.pw"|' \
    -e "s|ldap://127.0.0.1:$STALL|http://127.0.0.1:$STALL|" "$T/conf/bad.xml"
if "$PROXYD" --check -c "$T/conf/bad.xml" >"$T/check.out" 2>&1; then
    fail "--check took a configuration with an unreadable keytab"
fi
check grep -q 'bad.xml:[0-9]*: keytab=".*none.keytab": cannot be read' "$T/check.out" "--check names the keytab: $(cat "$T/check.out")"
check grep -q 'bad.xml:[0-9]*: bind-password-file="nope.pw": No such file' "$T/check.out" "--check names the password file"
check grep -q 'bad.xml:[0-9]*: url="http://' "$T/check.out" "--check names the url"
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check2.out" 2>&1 || fail "--check refuses the test's configuration: $(cat "$T/check2.out")"

start_proxyd
not_grep_i() { ! grep -qi -- "$1" "$2"; }
U=http://127.0.0.1:$NGINX_PORT
PX=http://localhost:$PF

# --- no credentials: 407 with both challenges
code=$(curl -sS --max-time 10 -D "$T/h407" -o /dev/null -w '%{http_code}' -x "$PX" "$U/a.txt")
assert_eq "$code" 407 "no credentials"
check grep -qi '^Proxy-Authenticate: Negotiate' "$T/h407" "407 offers Negotiate: $(cat "$T/h407")"
check grep -qi '^Proxy-Authenticate: Basic realm="proxyd test"' "$T/h407" "407 offers Basic"
# not in plain without basic-without-tls
curl -sS --max-time 10 -D "$T/h407o" -o /dev/null -x "http://localhost:$PO" "$U/a.txt" || true
check grep -qi '^Proxy-Authenticate: Negotiate' "$T/h407o" "407 offers Negotiate on the plain service"
check not_grep_i 'Proxy-Authenticate: Basic' "$T/h407o" "Basic offered on a plain connection"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user alice:alice-ldap-pw -x "http://localhost:$PO" "$U/a.txt")
check [ "$code" = 407 ] "Basic taken over a plain connection: $code"

# --- Negotiate (Kerberos): alice
code=$(curl -sS --max-time 10 -o "$T/neg" -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$U/a.txt" 2>"$T/neg.err" || true)
check [ "$code" = 200 ] "Negotiate as alice: $code $(cat "$T/neg.err")"
check [ "$(cat "$T/neg" 2>/dev/null)" = alpha ] "Negotiate body"
check wait_grep "$PROXYD_LOG" "http-request .* path=/a\.txt status=200 .* user=alice auth=negotiate" "$ASYNC_WAIT" "http-request line with user=alice auth=negotiate"
check wait_grep "$PROXYD_LOG" "auth authenticator=corp method=negotiate user=alice result=ok" "$ASYNC_WAIT" "auth line for negotiate"
check wait_grep "$PROXYD_LOG" "session-end service=fwd .* user=alice auth=negotiate by=" "$ASYNC_WAIT" "session-end line with user=alice auth=negotiate"
check wait_grep "$AUDIT" '"user":"alice","auth":"negotiate"' "$ASYNC_WAIT" "audit record with user alice, negotiate"
# Kerberos user, groups from the directory: alice reaches /admin/
code=$(curl -sS --max-time 10 -o "$T/nadm" -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$U/admin/x.txt" 2>/dev/null || true)
check [ "$code" = 200 ] "Negotiate alice to /admin/ (group ops from LDAP): $code"

# --- Basic (LDAP): alice, and the field never reaches the server
code=$(curl -sS --max-time 10 -o "$T/bas" -w '%{http_code}' --proxy-user alice:alice-ldap-pw -x "$PX" "http://127.0.0.1:$ORIGIN/basic")
check [ "$code" = 200 ] "Basic as alice: $code"
check wait_grep "$PROXYD_LOG" "http-request .* path=/basic status=200 .* user=alice auth=basic" "$ASYNC_WAIT" "http-request line with user=alice auth=basic"
check wait_grep "$ORIGIN_LOG" '"/basic"' "$ASYNC_WAIT" "the origin got /basic"
check not_grep_i 'proxy-authorization' "$ORIGIN_LOG" "Proxy-Authorization reached the server"

# --- a wrong password: 407 again, logged without the password
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user 'bob:Wr0ng-PassW0rd-XyZ' -x "$PX" "$U/a.txt")
check [ "$code" = 407 ] "wrong password: $code"
check wait_grep "$PROXYD_LOG" "auth authenticator=dir method=basic user=bob result=bad-password" "$ASYNC_WAIT" "bad-password line"
check not_grep_i 'Wr0ng-PassW0rd-XyZ' "$PROXYD_LOG" "the password text is in the log"
check [ "$(metric_value proxyd_auth_total 'authenticator="dir",method="basic",result="bad-password"')" -ge 1 ] "proxyd_auth_total bad-password"
check [ "$(metric_value proxyd_auth_total 'authenticator="corp",method="negotiate",result="ok"')" -ge 1 ] "proxyd_auth_total negotiate ok"
# --- LDAP filter injection: the name is a filter matching everyone
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user '*)(uid=*:alice-ldap-pw' -x "$PX" "$U/a.txt")
check [ "$code" = 407 ] "a user name that is a filter passed: $code"
check wait_grep "$PROXYD_LOG" 'auth authenticator=dir method=basic user=.* result=no-user' "$ASYNC_WAIT" "the filter user is no-user"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user '*:alice-ldap-pw' -x "$PX" "$U/a.txt")
check [ "$code" = 407 ] "user * passed: $code"

# --- Negotiate keep-alive: curl sends a token with each request; the
# connection Negotiate proved is not verified again (RFC 4559)
n0=$(log_count 'auth authenticator=corp method=negotiate ')
curl -sS --max-time 10 -o /dev/null -o /dev/null -o /dev/null --proxy-negotiate -U : -x "$PX" "$U/a.txt?k1" "$U/a.txt?k2" "$U/a.txt?k3" 2>"$T/nka.err" || true
wait_log_count 'http-request .* path=/a\.txt\?k[123] status=200 .* user=alice auth=negotiate' 3
check [ "$(log_count 'auth authenticator=corp method=negotiate ')" = $((n0 + 1)) ] "a Negotiate keep-alive connection verified again: $(log_count 'auth authenticator=corp method=negotiate ') vs $n0"

# --- the directory's spelling: ALICE is alice (to user= and group= too)
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user ALICE:alice-ldap-pw -x "$PX" "$U/admin/x.txt?upper")
check [ "$code" = 200 ] "ALICE to /admin/: $code"
check wait_grep "$PROXYD_LOG" "http-request .* path=/admin/x\.txt\?upper status=200 .* user=alice auth=basic" "$ASYNC_WAIT" "ALICE logged as alice"
# spaces the directory's matching ignores: "alice " and " alice" are alice
# to user= (the not-alice.txt rule refuses alice) and in the log
for u in 'alice ' ' alice' 'ALICE  '; do
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user "$u:alice-ldap-pw" -x "$PX" "$U/not-alice.txt")
    check [ "$code" = 403 ] "user=alice rule for typed [$u]: $code"
done
check wait_grep "$PROXYD_LOG" "http-request .* path=/not-alice\.txt status=403 .* user=alice auth=basic" "$ASYNC_WAIT" "a spaced alice logged as alice"

# --- keep-alive: asked once
n0=$(log_count 'auth authenticator=dir ')
curl -sS --max-time 10 -o /dev/null -o /dev/null --proxy-user bob:bob-ldap-pw -x "$PX" "$U/a.txt" "$U/a.txt" 2>"$T/ka.err"
wait_log_count 'http-request .* path=/a\.txt status=200 .* user=bob auth=basic' 2
check [ "$(log_count 'auth authenticator=dir ')" = $((n0 + 1)) ] "a keep-alive connection asked again: $(log_count 'auth authenticator=dir ') vs $n0"

# --- group rule: alice (ops) reaches /admin/, bob does not
code=$(curl -sS --max-time 10 -o "$T/adm" -w '%{http_code}' --proxy-user alice:alice-ldap-pw -x "$PX" "$U/admin/x.txt")
check [ "$code" = 200 ] "alice to /admin/: $code"
check [ "$(cat "$T/adm" 2>/dev/null)" = secret-page ] "alice's /admin/ body"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user bob:bob-ldap-pw -x "$PX" "$U/admin/x.txt")
check [ "$code" = 403 ] "bob to /admin/: $code"
check wait_grep "$PROXYD_LOG" "http-request .* path=/admin/x\.txt status=403 .* verdict=deny .* user=bob auth=basic" "$ASYNC_WAIT" "bob's 403 line"

# --- TLS to the proxy: 401 with Basic, then Basic as alice
code=$(curl -sS --max-time 10 --cacert "$T/conf/tls.pem" -D "$T/h401t" -o /dev/null -w '%{http_code}' "https://localhost:$PT/a.txt")
check [ "$code" = 401 ] "TLS without credentials: $code"
check grep -qi '^WWW-Authenticate: Basic realm="proxyd"' "$T/h401t" "401 offers Basic over TLS: $(cat "$T/h401t")"
code=$(curl -sS --max-time 10 --cacert "$T/conf/tls.pem" -u alice:alice-ldap-pw -o "$T/tlsb" -w '%{http_code}' "https://localhost:$PT/a.txt")
check [ "$code" = 200 ] "Basic over TLS as alice: $code"
check [ "$(cat "$T/tlsb" 2>/dev/null)" = alpha ] "Basic over TLS: body"
check wait_grep "$PROXYD_LOG" "session-end service=tls .* user=alice auth=basic by=" "$ASYNC_WAIT" "TLS Basic session-end line"

# --- HTTP/2 (h2c) in reverse mode: 401 with WWW-Authenticate, then Basic
# and Negotiate on a stream
H=http://localhost:$PH
code=$(curl -sS --max-time 10 --http2-prior-knowledge -D "$T/h401" -o /dev/null -w '%{http_code} %{http_version}' "$H/a.txt")
check [ "$code" = "401 2" ] "h2 without credentials: $code"
check grep -qi '^www-authenticate: Negotiate' "$T/h401" "401 offers Negotiate: $(cat "$T/h401")"
check grep -qi '^www-authenticate: Basic realm="proxyd"' "$T/h401" "401 offers Basic"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -u alice:alice-ldap-pw -o "$T/h2b" -w '%{http_code} %{http_version}' "$H/h2basic")
check [ "$code" = "200 2" ] "h2 Basic as alice: $code"
check wait_grep "$PROXYD_LOG" "http-request .* path=/h2basic status=200 .* user=alice auth=basic proto=h2 stream=1" "$ASYNC_WAIT" "h2 stream's line with user=alice"
check wait_grep "$ORIGIN_LOG" '"/h2basic"' "$ASYNC_WAIT" "the origin got /h2basic"
check not_grep_i '"authorization"' "$ORIGIN_LOG" "Authorization reached the server"
code=$(curl -sS --max-time 10 --http2-prior-knowledge --negotiate -u : -D "$T/h2neg" -o /dev/null -w '%{http_code} %{http_version}' "$H/neg" 2>/dev/null || true)
check [ "$code" = "200 2" ] "h2 Negotiate as alice: $code"
# the last token back on the 200 (RFC 4559 5), for a client that wants
# the server authenticated too
check grep -Eqi '^www-authenticate: Negotiate [A-Za-z0-9+/]+=*' "$T/h2neg" "200 with Negotiate's final token: $(cat "$T/h2neg")"
check wait_grep "$PROXYD_LOG" "http-request .* path=/neg status=200 .* user=alice auth=negotiate proto=h2" "$ASYNC_WAIT" "h2 Negotiate line"
# the identity is the connection's, as over HTTP/1.1: its session-end
# line names the user
check wait_grep "$PROXYD_LOG" "session-end service=h2 .* user=alice auth=negotiate by=" "$ASYNC_WAIT" "h2 connection's session-end line with user=alice auth=negotiate"

# --- HTTP/2: eight streams in flight at once with carol's Basic
# credentials (never seen before): one check (one bind) for all of them,
# each stream judged with its answer; the connection then carol's
H2S=$LIB_DIR/h2_auth_streams.py
n0=$(log_count 'auth authenticator=dir method=basic user=carol ')
specs=()
for i in 1 2 3 4 5 6 7 8; do specs+=("/a.txt?m$i=carol:carol-ldap-pw"); done
/usr/bin/python3 "$H2S" --port "$PH" streams "${specs[@]}" >"$T/h2many.out" 2>"$T/h2many.err" ||
    fail "h2 streams: $(cat "$T/h2many.out" "$T/h2many.err")"
check [ "$(grep -c ' 200$' "$T/h2many.out")" = 8 ] "eight h2 streams with one credential: $(tr '\n' ' ' <"$T/h2many.out")"
wait_log_count 'http-request .* path=/a\.txt\?m[1-8] status=200 .* user=carol auth=basic proto=h2 stream=' 8
check [ "$(log_count 'auth authenticator=dir method=basic user=carol ')" = $((n0 + 1)) ] "eight streams of one connection, one credential: $(($(log_count 'auth authenticator=dir method=basic user=carol ') - n0)) checks"
check wait_grep "$PROXYD_LOG" "session-end service=h2 .* user=carol auth=basic by=" "$ASYNC_WAIT" "h2 connection's session-end line with user=carol"

# --- a wrong password on one stream while the other streams with alice's
# credentials are fine: 401 on that stream alone. A stream without
# credentials that comes while alice's (and bob's) checks are under way,
# on a connection nobody proved yet, is not alice: 401 (its request never
# was alice's; the answer it would wait for is another stream's)
/usr/bin/python3 "$H2S" --port "$PH" streams "/a.txt?w1=alice:alice-ldap-pw" "/a.txt?w2=bob:Wr0ng-h2-pw" \
    "/a.txt?w3=-" "/a.txt?w4=alice:alice-ldap-pw" >"$T/h2mixed.out" 2>"$T/h2mixed.err" ||
    fail "h2 mixed streams: $(cat "$T/h2mixed.out" "$T/h2mixed.err")"
assert_eq "$(tr '\n' ' ' <"$T/h2mixed.out")" "/a.txt?w1 200 /a.txt?w2 401 www-authenticate=Negotiate,Basic /a.txt?w3 401 www-authenticate=Negotiate,Basic /a.txt?w4 200 " "a wrong password on one h2 stream"
check wait_grep "$PROXYD_LOG" "http-request .* path=/a\.txt\?w3 status=401 .* verdict=deny .* proto=h2 stream=5" "$ASYNC_WAIT" "the stream without credentials' 401 line"
/usr/bin/python3 "$H2S" --port "$PH" streams "/a.txt?p1=alice:alice-ldap-pw" "/a.txt?p2=-" >"$T/h2pend.out" 2>"$T/h2pend.err" ||
    fail "h2 streams: $(cat "$T/h2pend.out" "$T/h2pend.err")"
assert_eq "$(tr '\n' ' ' <"$T/h2pend.out")" "/a.txt?p1 200 /a.txt?p2 401 www-authenticate=Negotiate,Basic " "a stream without credentials under alice's check"
check not_grep_i 'path=/a\.txt\?p2 status=200' "$PROXYD_LOG" "the stream without credentials passed as alice"
check wait_grep "$PROXYD_LOG" "http-request .* path=/a\.txt\?w2 status=401 .* verdict=deny .* proto=h2 stream=3" "$ASYNC_WAIT" "the wrong password's 401 line"
wait_log_count 'http-request .* path=/a\.txt\?w[14] status=200 .* user=alice auth=basic proto=h2 stream=' 2
check wait_grep "$PROXYD_LOG" "auth authenticator=dir method=basic user=bob result=bad-password" "$ASYNC_WAIT" "bob's bad-password line"
check not_grep_i 'Wr0ng-h2-pw' "$PROXYD_LOG" "the password text is in the log"

# --- forward mode over h2: a stream without credentials gets 407 with
# Proxy-Authenticate, one with Basic in Proxy-Authorization passes, and
# the field never reaches the server
/usr/bin/python3 "$H2S" --port "$PFH" --forward "127.0.0.1:$ORIGIN" streams "/fwd1=-" "/fwd2=bob:bob-ldap-pw" \
    >"$T/h2fwd.out" 2>"$T/h2fwd.err" || fail "h2 forward streams: $(cat "$T/h2fwd.out" "$T/h2fwd.err")"
assert_eq "$(tr '\n' ' ' <"$T/h2fwd.out")" "/fwd1 407 proxy-authenticate=Negotiate,Basic /fwd2 200 " "forward mode over h2"
check wait_grep "$PROXYD_LOG" "http-request .* path=/fwd2 status=200 .* user=bob auth=basic proto=h2 stream=3" "$ASYNC_WAIT" "the forward h2 stream's line"
check wait_grep "$ORIGIN_LOG" '"/fwd2"' "$ASYNC_WAIT" "the origin got /fwd2"
check not_grep_i 'proxy-authorization' "$ORIGIN_LOG" "Proxy-Authorization reached the server from an h2 stream"

# --- a stream reset while its check waits (a directory that never
# answers): the check is cancelled, its answer (the timeout) lands on
# nothing, and the connection goes on serving
n0=$(log_count 'auth authenticator=stalled method=basic user=h2reset result=timeout')
/usr/bin/python3 "$H2S" --port "$PHS" reset "/a.txt?r1=h2reset:pw" "$T/h2reset.go" "/a.txt?r2" \
    >"$T/h2reset.out" 2>"$T/h2reset.err" &
H2R_PID=$!
track_pid "$H2R_PID"
check wait_grep "$PROXYD_LOG" "http-request .* path=/a\.txt\?r1 status=0 .* verdict=reset .* proto=h2 stream=1" "$ASYNC_WAIT" "the reset stream's line"
wait_log_count 'auth authenticator=stalled method=basic user=h2reset result=timeout' $((n0 + 1))
touch "$T/h2reset.go"
wait_exit "$H2R_PID" 20 || fail "h2 reset client did not end"
assert_eq "$(cat "$T/h2reset.out")" "/a.txt?r2 200" "the connection after a stream reset under its check: $(cat "$T/h2reset.err")"
check wait_grep "$PROXYD_LOG" "http-request .* path=/a\.txt\?r2 status=200 .* proto=h2 stream=3" "$ASYNC_WAIT" "the next stream's line"

# --- the connection closed while its streams' checks wait: each check is
# cancelled (one still queued is dropped unasked), the one an auth thread
# holds answers late, on nothing (no crash: the sanitizer build), and
# proxyd goes on
n0=$(log_count 'auth authenticator=stalled method=basic user=h2gone1 result=timeout')
/usr/bin/python3 "$H2S" --port "$PHS" close "/a.txt?g1=h2gone1:pw" "/a.txt?g2=h2gone2:pw" "/a.txt?g3=h2gone1:pw" \
    >"$T/h2close.out" 2>"$T/h2close.err" || fail "h2 close client: $(cat "$T/h2close.err")"
wait_log_count 'http-request .* path=/a\.txt\?g[123] status=0 .* verdict=reset .* reset=connection-closed proto=h2 stream=' 3
wait_log_count 'auth authenticator=stalled method=basic user=h2gone1 result=timeout' $((n0 + 1))
check wait_grep "$PROXYD_LOG" "session-end service=h2stall .* by=client" "$ASYNC_WAIT" "the closed h2 connection's end"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -o /dev/null -w '%{http_code} %{http_version}' "http://localhost:$PHS/a.txt?after")
assert_eq "$code" "200 2" "h2 after a connection closed under its checks"

# --- a reload naming a keytab that cannot be read is refused whole: the
# running configuration (its authenticators) goes on
cp "$PROXYD_CONF" "$T/conf/good.xml"
sed -i "s|keytab=\"$K/http.keytab\"|keytab=\"$K/gone.keytab\"|" "$PROXYD_CONF"
kline=$(grep -n 'gone.keytab' "$PROXYD_CONF" | cut -d: -f1)
kill -HUP "$PROXYD_PID"
assert_log "proxyd\.xml:$kline: keytab=\".*gone\.keytab\": cannot be read" 5
assert_metric ge proxyd_config_reloads_total 'result="failed"' 1
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$U/a.txt" 2>/dev/null || true)
check [ "$code" = 200 ] "Negotiate after a refused reload: $code"
cp "$T/conf/good.xml" "$PROXYD_CONF"

# --- the directory goes down: erin (never seen) 503, alice (cached) on,
# and a connection carol proved before keeps its identity (not asked)
cat >"$T/ka.py" <<'PY'
import base64, os, socket, sys, time
port, nginx, trigger, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
def ask(extra):
    s.sendall(("GET http://127.0.0.1:%s/a.txt HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n%s\r\n" % (nginx, nginx, extra)).encode())
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(4096)
        if not d:
            return "closed"
        got += d
    head, rest = got.split(b"\r\n\r\n", 1)
    n = 0
    for l in head.split(b"\r\n"):
        if l.lower().startswith(b"content-length:"):
            n = int(l.split(b":")[1])
    while len(rest) < n:
        rest += s.recv(4096)
    return head.split(b" ")[1].decode()
cred = base64.b64encode(b"carol:carol-ldap-pw").decode()
first = ask("Proxy-Authorization: Basic %s\r\n" % cred)
open(out, "w").write(first + "\n")
for i in range(200):
    if os.path.exists(trigger):
        break
    time.sleep(0.05)
open(out, "a").write(ask("") + "\n")
PY
python3 "$T/ka.py" "$PF" "$NGINX_PORT" "$T/ka.go" "$T/ka.out" 2>"$T/ka.err" &
KA_PID=$!
track_pid "$KA_PID"
for i in $(seq 1 100); do [[ -s $T/ka.out ]] && break; sleep 0.05; done
check [ "$(head -n 1 "$T/ka.out" 2>/dev/null)" = 200 ] "carol's first request on her connection: $(cat "$T/ka.out" "$T/ka.err" 2>/dev/null)"
kill -TERM "$SLAPD_PID"
wait_exit "$SLAPD_PID" 10 || fail "slapd did not stop"
code=$(curl -sS --max-time 10 -D "$T/h503" -o /dev/null -w '%{http_code}' --proxy-user erin:erin-pw -x "$PX" "$U/a.txt")
check [ "$code" = 503 ] "directory down: $code"
check wait_grep "$PROXYD_LOG" "auth authenticator=dir method=basic user=erin result=directory-down" "$ASYNC_WAIT" "directory-down line"
touch "$T/ka.go"
wait_exit "$KA_PID" 10 || true
check [ "$(sed -n 2p "$T/ka.out" 2>/dev/null)" = 200 ] "carol's connection after the directory went down: $(cat "$T/ka.out" "$T/ka.err" 2>/dev/null)"
check wait_grep "$PROXYD_LOG" 'http-error status=503 reason="basic directory-down' "$ASYNC_WAIT" "503 line says why"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user alice:alice-ldap-pw -x "$PX" "$U/a.txt")
check [ "$code" = 200 ] "alice, cached, with the directory down: $code"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$U/admin/x.txt" 2>/dev/null || true)
check [ "$code" = 200 ] "alice by Negotiate, groups cached, with the directory down: $code"

# --- a directory that never answers: 503 within its timeout, the worker
# free, and the other authenticators still answered (four checks stall:
# as many as there are auth threads; one authenticator holds two at most)
for k in 1 2 3 4; do
    (
        t0=$(now_ms)
        c=$(curl -sS --max-time 15 -o /dev/null -w '%{http_code}' --proxy-user "dave$k:pw" -x "http://localhost:$PS" "$U/a.txt" || true)
        echo "$c $(($(now_ms) - t0))" >"$T/stall$k.out"
    ) &
    track_pid $!
done
# those four are in proxyd once its worker read them (they wait there)
for i in $(seq 1 100); do
    (($(ss -Htn state established "( sport = :$PS )" 2>/dev/null | wc -l) >= 4)) && break
    sleep 0.02
done
t0=$(now_ms)
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-negotiate -U : -x "$PX" "$U/a.txt" 2>/dev/null || true)
neg_ms=$(($(now_ms) - t0))
info "Negotiate while the stalled directory holds its checks: $code in $neg_ms ms"
check [ "$code" = 200 ] "Negotiate while another directory stalls: $code"
check [ "$neg_ms" -lt 1000 ] "Negotiate waited $neg_ms ms behind a stalled directory"
worst=0
for i in $(seq 1 20); do
    t0=$(now_ms)
    code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PN/a.txt" || true)
    d=$(($(now_ms) - t0))
    ((d > worst)) && worst=$d
    check [ "$code" = 200 ] "the other service during the stall: $code"
    sleep 0.05
done
info "other service's worst latency during the stall: $worst ms"
check [ "$worst" -lt 700 ] "the other service waited $worst ms while the directory stalled"
for k in 1 2 3 4; do
    for i in $(seq 1 150); do [[ -s $T/stall$k.out ]] && break; sleep 0.1; done
    read -r scode sms <"$T/stall$k.out" || true
    info "stalled directory, check $k: $scode after $sms ms"
    check [ "$scode" = 503 ] "a stalled directory ($k): $scode"
    # two at a time, each up to 1.5 s; the last two waited for the first
    # two but their timeout counts from their arrival
    check [ "${sms:-99999}" -lt 4000 ] "503 within the timeout (1.5 s), check $k: $sms ms"
done
check wait_grep "$PROXYD_LOG" "auth authenticator=stalled method=basic user=dave[0-9] result=timeout" "$ASYNC_WAIT" "timeout line"
# --- three h2 connections of a hundred streams, each stream with other
# Basic credentials, on a directory that never answers: one check at a
# time per connection, as over HTTP/1.1, not three hundred checks at once
# filling the auth threads' queue (256) in which every other client's
# login waits: alice's meanwhile is answered (not 503 busy). Last: the
# two checks that hold auth threads stay until their timeout
hold=()
for c in 1 2 3; do
    specs=()
    for i in $(seq 1 100); do specs+=("/a.txt?q$c-$i=q$c-$i:pw"); done
    /usr/bin/python3 "$H2S" --port "$PHL" --deadline 25 hold "$T/hold$c.ready" "$T/hold.go" "${specs[@]}" \
        >"$T/hold$c.out" 2>"$T/hold$c.err" &
    hold+=("$!")
    track_pid "$!"
done
for c in 1 2 3; do
    wait_file "$T/hold$c.ready" 20 || fail "h2 hold client $c: $(cat "$T/hold$c.err")"
done
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --proxy-user alice:alice-ldap-pw -x "$PX" "$U/a.txt?underhold")
touch "$T/hold.go"
for p in "${hold[@]}"; do wait_exit "$p" 20 || fail "h2 hold client did not end"; done
assert_eq "$code" 200 "alice's login while three h2 connections hold checks of 300 passwords"
check not_grep_i 'result=busy' "$PROXYD_LOG" "auth queue filled: $(grep -c 'result=busy' "$PROXYD_LOG") busy"

http_done
