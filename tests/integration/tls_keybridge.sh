#!/usr/bin/env bash
# Keybridge (<tls side="client" mode="keybridge">): proxyd connects to the
# server first, verifies its chain, and shows the client a leaf minted for
# the same subject and names, signed by the proxy's CA, or by an untrusted
# CA when the server's chain does not verify. Leaves are cached per worker
# by the server certificate's SHA-256 and minting is counted. Through http
# (the handshaken server connection is taken from the pool) and plug. The
# CAs and certificates are made here with the openssl command.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

P=$T/pki
tls_ca origin-ca "origin CA"
tls_ca kb-ca "proxyd keybridge CA"
tls_leaf origin "/O=Origin Ltd/CN=origin.test" "DNS:origin.test,DNS:www.origin.test" serverAuth origin-ca
tls_self self self.test DNS:self.test

make_file f1m.bin $((1024 * 1024))
SHA=$(sha256_of "$T/www/f1m.bin")
free_port NGX_TLS
free_port NGX_SELF
NGINX_SERVERS="
    log_format kb '\$server_port \"\$request\" \$status sni=\$ssl_server_name';
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        access_log $T/nginx/logs/kb.log kb;
        root $T/www;
    }
    server {
        listen 127.0.0.1:$NGX_SELF ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $P/self.pem;
        ssl_certificate_key $P/self.key;
        access_log $T/nginx/logs/kb.log kb;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"
KLOG=$T/nginx/logs/kb.log

KB="<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kb-ca.pem\" ca-key=\"$P/kb-ca.key\"/>"
ORIG="<tls side=\"server\" mode=\"originate\" ca=\"$P/origin-ca.pem\"/>"
free_port P_HTTP
free_port P_PLUG
free_port P_SELF
write_proxyd_conf
# One worker: leaves are cached per worker.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service k_http "$P_HTTP" "$NGX_TLS" "$KB $ORIG"
write_service k_plug "$P_PLUG" "$NGX_TLS" "$KB $ORIG"
write_http_service k_self "$P_SELF" "$NGX_SELF" "$KB $ORIG"
start_proxyd

# served PORT NAME: issuer, subject and SANs of what proxyd shows for NAME
served() {
    echo | timeout 10 openssl s_client -connect "127.0.0.1:$1" -servername "$2" 2>/dev/null |
        openssl x509 -noout -issuer -subject -ext subjectAltName 2>/dev/null | tr '\n' ' '
}

info "http: the client trusts only the proxy's CA; the leaf names the origin"
code=$(curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "origin.test:$P_HTTP:127.0.0.1" \
    -o "$T/a.bin" -w '%{http_code}' "https://origin.test:$P_HTTP/f1m.bin")
assert_eq "$code" "200" "status through keybridge (curl verified the minted leaf)"
assert_eq "$(sha256_of "$T/a.bin")" "$SHA" "sha256 through keybridge"
assert_log "tls-keybridge name=origin\.test server-cert=verified leaf=minted ca=trusted"
# The server connection keybridge handshook serves the first request.
assert_log "http-request .*path=/f1m\.bin status=200 .*upstream=pooled"
assert_metric eq proxyd_upstream_pool_stale_total '' 0
for i in $(seq 50); do grep -q "^$NGX_TLS \"GET /f1m.bin HTTP/1.1\" 200 sni=origin.test" "$KLOG" 2>/dev/null && break; sleep 0.1; done
grep -q "^$NGX_TLS \"GET /f1m.bin HTTP/1.1\" 200 sni=origin.test" "$KLOG" || fail "the origin did not see the client's name: $(cat "$KLOG")"
leaf=$(served "$P_HTTP" origin.test)
info "  served: $leaf"
[[ $leaf =~ issuer=\ ?CN\ ?=\ ?proxyd\ keybridge\ CA ]] || fail "the leaf's issuer: $leaf"
[[ $leaf =~ subject=\ ?O\ ?=\ ?Origin\ Ltd,\ CN\ ?=\ ?origin\.test ]] || fail "the leaf's subject: $leaf"
[[ $leaf =~ DNS:origin\.test,\ DNS:www\.origin\.test ]] || fail "the leaf's names: $leaf"

info "the same server certificate again: the worker's leaf, not a new one"
assert_metric eq proxyd_tls_keybridge_leaves_total 'result="minted"' 1
assert_metric ge proxyd_tls_keybridge_leaves_total 'result="cached"' 1
code=$(curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "origin.test:$P_HTTP:127.0.0.1" \
    -o /dev/null -w '%{http_code}' "https://origin.test:$P_HTTP/f1m.bin?again")
assert_eq "$code" "200" "status of the second client"
assert_metric eq proxyd_tls_keybridge_leaves_total 'result="minted"' 1
assert_log "tls-keybridge name=origin\.test server-cert=verified leaf=cached ca=trusted"

info "plug: the same, bytes intact"
got=$(curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "origin.test:$P_PLUG:127.0.0.1" \
    "https://origin.test:$P_PLUG/f1m.bin?plug" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "sha256 through plug + keybridge"
assert_log "session-end service=k_plug analyser=plug verdict=accept .*to-client=[0-9]{7,} .*end=(client|server)-closed"

info "a server whose chain does not verify: a leaf from the untrusted CA, and curl refuses it"
if curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "self.test:$P_SELF:127.0.0.1" \
    -o /dev/null "https://self.test:$P_SELF/f1m.bin?self" 2>"$T/self.err"; then
    fail "curl accepted the leaf for a self-signed server"
fi
assert_grep "$T/self.err" "certificate" "curl's reason"
assert_log "tls-keybridge name=self\.test server-cert=unverified reason=self[- ]signed certificate leaf=minted ca=untrusted"
leaf=$(served "$P_SELF" self.test)
[[ $leaf =~ issuer=\ ?CN\ ?=\ ?proxyd\ keybridge:\ untrusted\ server ]] || fail "the untrusted leaf's issuer: $leaf"
assert_metric ge proxyd_tls_keybridge_ca_total 'ca="untrusted"' 1
info "  ... and a client told to go on anyway (curl -k) gets the page"
code=$(curl -sS -k --max-time 20 --resolve "self.test:$P_SELF:127.0.0.1" -o /dev/null -w '%{http_code}' \
    "https://self.test:$P_SELF/f1m.bin?insecure")
assert_eq "$code" "200" "status with curl -k"

info "--check refuses bad keybridge settings with file:line"
tls_check_bad "keybridge without originate" plug "$KB" \
    "b\.xml:1: service \"b\": <tls mode=\"keybridge\"> needs a <tls side=\"server\" mode=\"originate\">"
tls_check_bad "a CA that is no CA" plug \
    "<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/origin.pem\" ca-key=\"$P/origin.key\"/> $ORIG" \
    "b\.xml:4: ca-cert=\".*origin\.pem\" is not a CA"
tls_check_bad "a CA key that does not match" plug \
    "<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kb-ca.pem\" ca-key=\"$P/origin-ca.key\"/> $ORIG" \
    "b\.xml:4: ca-key=\".*origin-ca\.key\" does not match ca-cert="

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
