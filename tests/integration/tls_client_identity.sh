#!/usr/bin/env bash
# TLS client certificates as identities (<tls side="client" verify=
# identity=>), with a CA and certificates made here by openssl and curl
# --cert:
#   - identity="cn" on an http service: alice's certificate (CN=alice)
#     is user=alice auth=certificate on the http-request and session-end
#     lines and in the audit record, and a <url user="alice"> rule lets
#     her into /admin/ while bob (CN=bob) gets 403, and a <content
#     user="bob"> refuses him text files; a certificate with two
#     CNs names nobody (403, no user=);
#   - identity="email" identity-domain="example.test": carol's
#     rfc822Name carol@example.test is user=carol; an address in another
#     domain names nobody;
#   - a plug service with identity="dns": user=alice.example.test
#     auth=certificate on its session-end line (the core's, no analyser
#     proof);
#   - with an ldap authenticator (<auth>, a slapd made here: alice in
#     ops, bob not), the certificate's user gets its groups from the
#     directory: a <url group="ops"> rule lets alice into /admin/ and
#     refuses bob (auth line method=certificate, once per connection);
#   - a self-signed certificate under verify="optional" names nobody;
#   - over HTTP/2 (ALPN h2) the streams carry the connection's
#     certificate user: a <url user="bob" action="deny"> rule gives bob
#     403 as over HTTP/1.1, and <content user="bob"> refuses him text
#     files, on a second stream of the same connection too; with an ldap
#     authenticator, a first stream reset while the user's groups are
#     asked for does not leave the next one nobody's (it asks again),
#     nor does a 503 when the directory does not answer;
#   - --check refuses identity= without verify=, identity-domain= without
#     identity="email"
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx curl openssl slapd ldapadd
setup

printf 'alpha\n' >"$T/www/a.txt"
mkdir -p "$T/www/admin"
printf 'admin-page\n' >"$T/www/admin/x.txt"
start_nginx

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth
tls_leaf alice alice "DNS:alice.example.test" clientAuth
tls_leaf bob bob "DNS:bob.example.test" clientAuth
tls_leaf twocn "/CN=alice/CN=bob" "DNS:x.example.test" clientAuth
tls_leaf carol "carol" "email:carol@example.test" clientAuth
tls_leaf dave "dave" "email:dave@other.test" clientAuth
tls_self mallory alice

CTLS="cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" ca=\"$P/ca.pem\""
AUDIT=$T/audit.json
start_ldap
# a directory that accepts and never answers
start_py_server STALL <<'EOF'
def handle(c):
    time.sleep(20)
EOF
write_proxyd_conf "" "<audit target=\"file:$AUDIT\"/>
  <authenticators>
    $(ldap_conf dir)
    <ldap name=\"stalled\" url=\"ldap://127.0.0.1:$STALL\" base-dn=\"dc=example,dc=test\"
          timeout=\"1500ms\"/>
  </authenticators>"
free_port PC
write_http_service cn "$PC" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"cn\"/>
<audit min-size=\"0\"/>
<http>
  <url path=\"/admin/*\" user=\"alice\" action=\"accept\"/>
  <url path=\"/admin/*\" action=\"deny\" status=\"403\"/>
</http>
<content type=\"text/*\" user=\"bob\" action=\"deny\"/>"
free_port PE
write_http_service em "$PE" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"email\" identity-domain=\"example.test\"/>
<http/>"
free_port PO
write_http_service opt "$PO" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"optional\" identity=\"cn\"/>
<http/>"
free_port PG
write_http_service cg "$PG" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"cn\"/>
<auth authenticator=\"dir\" methods=\"basic\" required=\"no\"/>
<http>
  <url path=\"/admin/*\" group=\"ops\" action=\"accept\"/>
  <url path=\"/admin/*\" action=\"deny\" status=\"403\"/>
</http>"
free_port PH
write_http_service h2 "$PH" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"cn\"/>
<http h2=\"yes\">
  <url path=\"/admin/*\" user=\"bob\" action=\"deny\" status=\"403\"/>
</http>
<content type=\"text/*\" user=\"bob\" action=\"deny\"/>"
# with a directory (one that never answers): the certificate user's
# groups asked for the first stream
free_port PHG
write_http_service h2g "$PHG" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"cn\"/>
<auth authenticator=\"stalled\" methods=\"basic\" required=\"no\"/>
<http h2=\"yes\">
  <url path=\"/admin/*\" user=\"bob\" action=\"deny\" status=\"403\"/>
</http>"
free_port PP
write_service plug "$PP" "$NGINX_PORT" "
<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"dns\"/>"
start_proxyd

# get PORT CERT PATH: prints the status
get() {
    curl -sS -o /dev/null -w '%{http_code}' --max-time 20 --cacert "$P/ca.pem" \
        --cert "$P/$2.pem" --key "$P/$2.key" "https://localhost:$1$3" 2>>"$T/curl.err" || true
}

info "identity=cn: alice in, bob out, two CNs name nobody"
assert_eq "$(get "$PC" alice /admin/x.txt)" 200 "alice's /admin/"
assert_log 'http-request .* user=alice auth=certificate'
assert_log 'session-end service=cn .* user=alice auth=certificate'
assert_log 'tls-client-cert subject="/CN=alice" verified=yes identity=alice'
wait_grep "$AUDIT" '"file":"/admin/x.txt"' 10 || fail "no audit record"
grep '"file":"/admin/x.txt"' "$AUDIT" | grep -q '"user":"alice".*"auth":"certificate"' ||
    fail "audit record without alice: $(cat "$AUDIT")"
assert_eq "$(get "$PC" bob /admin/x.txt)" 403 "bob's /admin/"
assert_eq "$(get "$PC" bob /a.txt)" 403 "bob's /a.txt (<content user=bob>)"
assert_log 'http-content type=text/plain action=deny rule=[^ ]*cn.xml:11 direction=download'
assert_eq "$(get "$PC" alice /a.txt)" 200 "alice's /a.txt"
assert_log 'session-end service=cn .* user=bob auth=certificate'
assert_eq "$(get "$PC" twocn /admin/x.txt)" 403 "two CNs"
assert_log 'tls-client-cert subject="/CN=alice/CN=bob" verified=yes identity=-'

info "a certificate's user gets its groups from the directory"
assert_eq "$(get "$PG" alice /admin/x.txt)" 200 "alice (ops) to /admin/ by her certificate"
assert_log 'auth authenticator=dir method=certificate user=alice result=ok'
assert_log 'http-request .* path=/admin/x\.txt status=200 .* user=alice auth=certificate'
assert_eq "$(get "$PG" bob /admin/x.txt)" 403 "bob (not in ops) to /admin/"
assert_log 'auth authenticator=dir method=certificate user=bob result=ok'

info "HTTP/2 streams carry the connection's certificate user"
# h2get CERT PATH...: one connection, HTTP/2 only; prints the statuses
h2get() {
    local cert=$1 u=() p
    shift
    for p in "$@"; do u+=(-o /dev/null "https://localhost:$PH$p"); done
    curl -sS --http2 -w '%{http_version}:%{http_code} ' --max-time 20 \
        --cacert "$P/ca.pem" --cert "$P/$cert.pem" --key "$P/$cert.key" "${u[@]}" \
        2>>"$T/curl.err" || true
}
assert_eq "$(h2get bob /admin/x.txt /a.txt)" "2:403 2:403 " "bob over h2: /admin/ by user=, /a.txt by <content user=>"
assert_log 'http-request .* path=/admin/x\.txt status=403 .* user=bob auth=certificate proto=h2 stream=1$'
assert_log 'http-content type=text/plain action=deny rule=[^ ]*h2.xml:[0-9]* direction=download'
assert_eq "$(h2get alice /admin/x.txt /a.txt)" "2:200 2:200 " "alice over h2"
assert_log 'http-request .* path=/admin/x\.txt status=200 .* user=alice auth=certificate proto=h2 stream=1$'
# (a kept leg serves the second stream: it keeps the user)
assert_log 'http-request .* path=/a\.txt status=200 .* user=alice auth=certificate proto=h2 stream=3$'
assert_eq "$(get "$PH" bob /admin/x.txt)" 403 "bob over HTTP/1.1 on the same service"
# the first stream reset while its connection's certificate user's groups
# are asked for: the next stream asks again (503 when the directory does
# not answer), it is not served as nobody past the user="bob" rule
/usr/bin/python3 "$LIB_DIR/h2_auth_streams.py" --port "$PHG" --tls "$P/ca.pem" "$P/bob.pem" "$P/bob.key" \
    reset "/a.txt?first=-" "$T/h2g.go" "/admin/x.txt" >"$T/h2g.out" 2>"$T/h2g.err" &
H2G=$!
track_pid "$H2G"
wait_grep "$PROXYD_LOG" 'http-request .* path=/a\.txt\?first status=0 .* verdict=reset .* proto=h2 stream=1$' 10 ||
    fail "no line for the reset stream: $(cat "$T/h2g.err")"
touch "$T/h2g.go"
wait_exit "$H2G" 20 || fail "the h2 client did not end"
assert_eq "$(cat "$T/h2g.out")" "/admin/x.txt 503" "bob's stream after his first was reset under its check: $(cat "$T/h2g.err")"
assert_log 'auth authenticator=stalled method=certificate user=bob result=timeout'
# nor after a 503: two requests one after the other on one h2 connection
# are both 503, the second not served as nobody
h2g() {
    curl -sS --http2 -w '%{http_version}:%{http_code} ' --max-time 20 --cacert "$P/ca.pem" \
        --cert "$P/bob.pem" --key "$P/bob.key" -o /dev/null "https://localhost:$PHG/admin/x.txt" \
        -o /dev/null "https://localhost:$PHG/admin/x.txt?2" 2>>"$T/curl.err" || true
}
assert_eq "$(h2g)" "2:503 2:503 " "bob's two requests on one h2 connection while the directory does not answer"

info "identity=email with identity-domain"
assert_eq "$(get "$PE" carol /a.txt)" 200 "carol"
assert_log 'session-end service=em .* user=carol auth=certificate'
n=$(grep -c 'session-end service=em ' "$PROXYD_LOG" || true)
assert_eq "$(get "$PE" dave /a.txt)" 200 "dave"
assert_log 'tls-client-cert subject="/CN=dave" verified=yes identity=-'
for _ in $(seq 100); do
    (($(grep -c 'session-end service=em ' "$PROXYD_LOG") > n)) && break
    sleep 0.05
done
assert_no_grep "$PROXYD_LOG" 'session-end service=em .* user=dave' "dave names nobody"

info "identity=dns on a plug service"
assert_eq "$(get "$PP" alice /a.txt)" 200 "through plug"
assert_log 'session-end service=plug .* user=alice.example.test auth=certificate'

info "verify=optional: a self-signed certificate names nobody"
assert_eq "$(get "$PO" mallory /a.txt)" 200 "mallory"
assert_log 'tls-client-cert subject="/CN=alice" verified=no reason=.* identity=-'
assert_log 'session-end service=opt '
assert_no_grep "$PROXYD_LOG" 'session-end service=opt .* user=' "a self-signed certificate names nobody"

info "--check"
# the daemon file copied to $T/bad names the authenticator's password file
mkdir -p "$T/bad" && cp "$T/conf/ldap.pw" "$T/bad/ldap.pw"
tls_check_bad "identity without verify" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" identity=\"cn\"/>" \
    'identity="cn" needs verify='
tls_check_bad "identity-domain without email" plug \
    "<tls side=\"client\" mode=\"terminate\" $CTLS verify=\"required\" identity=\"cn\" identity-domain=\"example.test\"/>" \
    'identity-domain="example.test": a domain, with identity="email" only'
info "ok"
