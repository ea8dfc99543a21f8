#!/usr/bin/env bash
# TLS terminated from clients (<tls side="client" mode="terminate">) on a
# plug and an http service in front of a plain nginx: bytes intact through
# the buffered relay, http/1.1 offered by ALPN (and a client that offers
# only h2 refused), min-version enforced, handshake failures logged with
# OpenSSL's reason and counted by class in /metrics, and bad files refused
# by --check with file:line. The CA and the certificates are made here with
# the openssl command. Then random services and clients
# (tls_terminate_combos.py: 200 handshakes, about 6 s; TLS_COMBO_SEED=N
# replays a run): the certificate a name picks, client certificates under
# each verify=, ALPN, as docs/CONFIG.md states them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

# ---- a test CA and a leaf for localhost / 127.0.0.1, made now
P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$P/other.key" -out /dev/null -subj "/CN=other" 2>/dev/null
tls_leaf site_a www.a.test DNS:www.a.test serverAuth
tls_leaf site_b "wildcard b" "DNS:*.b.test" serverAuth
tls_leaf alice alice DNS:alice.test clientAuth
tls_self mallory mallory

make_file f1m.bin $((1024 * 1024))
SHA=$(sha256_of "$T/www/f1m.bin")
start_nginx
free_port P_PLUG
free_port P_HTTP
write_proxyd_conf
TLS="<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" min-version=\"1.2\"/>"
write_service tplug "$P_PLUG" "$NGINX_PORT" "$TLS"
write_http_service thttp "$P_HTTP" "$NGINX_PORT" "$TLS"
free_port P_SNI
free_port P_TICKET
write_service tticket "$P_TICKET" "$NGINX_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" ticket-rotate=\"1s\"/>"
free_port P_MTLS
free_port P_OPT
write_service tsni "$P_SNI" "$NGINX_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\">
       <certificate name=\"*.b.test\" cert=\"$P/site_b.pem\" key=\"$P/site_b.key\"/>
       <certificate name=\"www.a.test\" cert=\"$P/site_a.pem\" key=\"$P/site_a.key\"/>
     </tls>"
write_http_service tmtls "$P_MTLS" "$NGINX_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" verify=\"required\" ca=\"$P/ca.pem\"/>"
write_http_service topt "$P_OPT" "$NGINX_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" verify=\"optional\" ca=\"$P/ca.pem\"/>"
start_proxyd

info "plug: 1 MB over TLS, sha256 intact"
got=$(curl -sS --max-time 20 --cacert "$P/ca.pem" "https://localhost:$P_PLUG/f1m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "sha256 of the file through plug + TLS"
assert_log "session-end service=tplug analyser=plug verdict=accept .* to-client=[0-9]{7,} .*end=(client|server)-closed"

info "http: GET over TLS, ALPN http/1.1"
code=$(curl -sS --max-time 20 --cacert "$P/ca.pem" -o "$T/h.bin" -w '%{http_code} %{http_version}' -v "https://localhost:$P_HTTP/f1m.bin" 2>"$T/curl.v")
assert_eq "$code" "200 1.1" "status and HTTP version through http + TLS"
assert_eq "$(sha256_of "$T/h.bin")" "$SHA" "sha256 through http + TLS"
assert_grep "$T/curl.v" "ALPN: server accepted http/1.1|ALPN, server accepted to use http/1.1" "the server's ALPN answer"
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=GET host=localhost(:$P_HTTP)? path=/f1m\.bin status=200 "

info "an HTTP/1.0 client (ALPN http/1.0 alone) is served"
code=$(curl -sS -0 --max-time 20 --cacert "$P/ca.pem" -o "$T/h10.bin" -w '%{http_code}' "https://localhost:$P_HTTP/f1m.bin?h10")
assert_eq "$code" "200" "status of an HTTP/1.0 client over TLS"
assert_eq "$(sha256_of "$T/h10.bin")" "$SHA" "sha256 for the HTTP/1.0 client"

info "a client that offers only h2 is refused: http speaks http/1.1"
if echo | timeout 10 openssl s_client -connect "127.0.0.1:$P_HTTP" -alpn h2 \
    -CAfile "$P/ca.pem" >"$T/h2.out" 2>&1; then
    grep -q 'ALPN protocol: h2' "$T/h2.out" && fail "proxyd accepted ALPN h2"
fi
assert_log "session-end service=thttp analyser=http verdict=error .* by=client-fail .*end=client-error: tls: no application protocol"

info "TLS 1.1 under min-version=\"1.2\""
echo | timeout 10 openssl s_client -connect "127.0.0.1:$P_PLUG" -tls1_1 \
    -cipher 'DEFAULT@SECLEVEL=0' >"$T/t11.out" 2>&1 || true
assert_grep "$T/t11.out" "alert protocol version" "the TLS 1.1 client was not refused with a protocol_version alert"
assert_no_grep "$T/t11.out" "^ *Cipher *: [^0]" "a TLS 1.1 handshake agreed on a cipher"
assert_log "session-end service=tplug analyser=plug verdict=error .* by=client-fail .*end=client-error: tls: unsupported protocol"

info "plain HTTP on the TLS port: refused, logged, nothing reaches the origin"
before=$(grep -c 'GET /plain-on-tls' "$T/nginx/logs/access.log" 2>/dev/null || true)
curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$P_PLUG/plain-on-tls" 2>/dev/null || true
assert_log "session-end service=tplug analyser=plug verdict=error .*end=client-error: tls: http request"
# the sentinel: a good request after it, on the same service
got=$(curl -sS --max-time 20 --cacert "$P/ca.pem" "https://localhost:$P_PLUG/f1m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "the sentinel download after the plain request"
assert_eq "$(grep -c 'GET /plain-on-tls' "$T/nginx/logs/access.log" 2>/dev/null || true)" "$before" "plain requests that reached nginx"

info "a client whose only cipher needs an RSA key: no shared cipher with an EC certificate"
echo | timeout 10 openssl s_client -connect "127.0.0.1:$P_PLUG" -tls1_2 \
    -cipher AES128-SHA >"$T/nc.out" 2>&1 || true
assert_grep "$T/nc.out" "handshake failure" "the client did not see a handshake_failure alert"
assert_log "session-end service=tplug analyser=plug verdict=error .*end=client-error: tls: no shared cipher"

info "the certificate chosen by SNI: exact, wildcard, default"
served() { # SNI|-: the subject proxyd served
    local sni=()
    [[ $1 == - ]] && sni=(-noservername) || sni=(-servername "$1")
    echo | timeout 10 openssl s_client -connect "127.0.0.1:$P_SNI" "${sni[@]}" 2>/dev/null |
        openssl x509 -noout -subject 2>/dev/null | sed -E 's/^subject= ?//; s/ = /=/g'
}
assert_eq "$(served www.a.test)" "CN=www.a.test" "the certificate for www.a.test"
assert_eq "$(served x.b.test)" "CN=wildcard b" "the certificate for x.b.test (*.b.test)"
assert_eq "$(served x.y.b.test)" "CN=localhost" "x.y.b.test: a wildcard covers one label only"
assert_eq "$(served other.test)" "CN=localhost" "an unknown name gets the default"
assert_eq "$(served -)" "CN=localhost" "no SNI gets the default"
got=$(curl -sS --max-time 20 --cacert "$P/ca.pem" --resolve "www.a.test:$P_SNI:127.0.0.1" \
    "https://www.a.test:$P_SNI/f1m.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$SHA" "sha256 through the www.a.test certificate (curl verified it)"

info "session tickets: resumed, and refused once their key rotated out"
# hs [-sess_out F | -sess_in F]: "Reused" or "New" for one request
hs() {
    printf 'GET /ticket HTTP/1.0\r\n\r\n' | timeout 10 openssl s_client -connect "127.0.0.1:$P_TICKET" \
        -servername localhost -CAfile "$P/ca.pem" -ign_eof "$@" 2>/dev/null | grep -aEo '^(Reused|New),' | head -n 1 | tr -d ,
}
issued=$(date +%s%N)
assert_eq "$(hs -sess_out "$T/sess.pem")" "New" "the first handshake"
assert_eq "$(hs -sess_in "$T/sess.pem")" "Reused" "a handshake with its ticket"
assert_metric ge proxyd_tls_handshakes_total 'side="client",resumed="yes"' 1
# ticket-rotate=1s: the ticket outlives one rotation, not two.
deadline=$((issued + 10000000000))
while [[ $(hs -sess_in "$T/sess.pem") == Reused ]]; do
    (($(date +%s%N) < deadline)) || fail "the ticket was still accepted 10 s after it was issued (ticket-rotate=1s)"
    sleep 0.2
done
age=$((($(date +%s%N) - issued) / 1000000))
info "  ticket refused after ${age} ms"
((age >= 1000)) || fail "the ticket was refused after ${age} ms, before one rotation period (1 s)"

info "client certificates: verify=required"
code=$(curl -sS --max-time 20 --cacert "$P/ca.pem" --cert "$P/alice.pem" --key "$P/alice.key" \
    -o "$T/m.bin" -w '%{http_code}' "https://localhost:$P_MTLS/f1m.bin?alice")
assert_eq "$code" "200" "status with a client certificate from the CA"
assert_eq "$(sha256_of "$T/m.bin")" "$SHA" "sha256 with a client certificate"
assert_log "tls-client-cert subject=\"/CN=alice\" verified=yes"
curl -sS --max-time 20 --cacert "$P/ca.pem" -o /dev/null "https://localhost:$P_MTLS/f1m.bin?nocert" 2>/dev/null &&
    fail "a client without a certificate got through verify=required"
assert_metric eq proxyd_tls_failures_total 'side="client",reason="no-certificate"' 1
curl -sS --max-time 20 --cacert "$P/ca.pem" --cert "$P/mallory.pem" --key "$P/mallory.key" \
    -o /dev/null "https://localhost:$P_MTLS/f1m.bin?mallory" 2>/dev/null &&
    fail "a self-signed client certificate got through verify=required"
assert_metric eq proxyd_tls_failures_total 'side="client",reason="unknown-ca"' 1
assert_log "session-end service=tmtls analyser=http verdict=error .*end=client-error: tls: client certificate: self[- ]signed certificate"
assert_eq "$(grep -c 'f1m.bin?nocert\|f1m.bin?mallory' "$T/nginx/logs/access.log" || true)" 0 "refused clients' requests at the origin"

info "client certificates: verify=optional logs what it saw"
code=$(curl -sS --max-time 20 --cacert "$P/ca.pem" --cert "$P/mallory.pem" --key "$P/mallory.key" \
    -o /dev/null -w '%{http_code}' "https://localhost:$P_OPT/f1m.bin?opt")
assert_eq "$code" "200" "status under verify=optional with a self-signed client certificate"
assert_log "tls-client-cert subject=\"/CN=mallory\" verified=no reason=self[- ]signed certificate"

info "failures counted by reason"
assert_metric eq proxyd_tls_failures_total 'side="client",reason="no-application-protocol"' 1
assert_metric eq proxyd_tls_failures_total 'side="client",reason="protocol-version"' 1
assert_metric eq proxyd_tls_failures_total 'side="client",reason="not-tls"' 1
assert_metric eq proxyd_tls_failures_total 'side="client",reason="no-shared-cipher"' 1
assert_metric eq proxyd_tls_failures_total 'side="client",reason="other"' 0
info "... and by service: each failure on the service whose port it came to"
svc_fail() { # SERVICE ANALYSER REASON COUNT
    assert_metric eq proxyd_tls_failures_total "service=\"$1\",analyser=\"$2\",side=\"client\",reason=\"$3\"" "$4"
}
svc_fail thttp http no-application-protocol 1
svc_fail tplug plug no-application-protocol 0
for r in protocol-version not-tls no-shared-cipher; do
    svc_fail tplug plug "$r" 1
    svc_fail thttp http "$r" 0
done
svc_fail tmtls http no-certificate 1
svc_fail tmtls http unknown-ca 1
svc_fail topt http unknown-ca 0
assert_metric ge proxyd_tls_handshakes_total 'service="tticket",analyser="plug",side="client",resumed="yes"' 1
assert_metric eq proxyd_tls_handshakes_total 'service="tplug",analyser="plug",side="client",resumed="yes"' 0

info "--check refuses bad TLS material with file:line"
tls_check_bad "a key that does not match" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/other.key\"/>" \
    "b\.xml:4: key=\".*other\.key\" does not match cert="
tls_check_bad "a missing certificate" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/none.pem\" key=\"$P/leaf.key\"/>" \
    "b\.xml:4: cert=\".*none\.pem\": No such file or directory"
tls_check_bad "a key that is no key" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.pem\"/>" \
    "b\.xml:4: key=\".*leaf\.pem\": not a PEM private key"
tls_check_bad "a certificate that is no certificate" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.key\" key=\"$P/leaf.key\"/>" \
    "b\.xml:4: cert=\".*leaf\.key\": not a PEM certificate chain"
tls_check_bad "an unknown version" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" min-version=\"1.4\"/>" \
    "b\.xml:4: min-version=\"1\.4\": expected 1\.0, 1\.1, 1\.2 or 1\.3"
tls_check_bad "client verification without a CA" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\" verify=\"required\"/>" \
    "b\.xml:4: verify=\"required\" needs ca="
tls_check_bad "a certificate name that is no host name" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"><certificate name=\"a..b\" cert=\"$P/site_a.pem\" key=\"$P/site_a.key\"/></tls>" \
    "b\.xml:4: name \"a\.\.b\": expected a host name or \*\.domain"
tls_check_bad "a named certificate whose key does not match" plug \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"><certificate name=\"www.a.test\" cert=\"$P/site_a.pem\" key=\"$P/site_b.key\"/></tls>" \
    "b\.xml:4: key=\".*site_b\.key\" does not match cert="
tls_check_bad "a mode on the wrong side" plug \
    "<tls side=\"server\" mode=\"passthrough\"/>" \
    "b\.xml:4: <tls side=\"server\" mode=\"passthrough\">: this proxyd terminates TLS from clients \\(side=\"client\" mode=\"terminate\" or \"keybridge\"\\), polices it unopened .* and originates it to servers"

info "random services and clients: certificate by name, client certificates, ALPN (tls_terminate_combos.py)"
SEED=${TLS_COMBO_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
python3 "$(dirname "$0")/tls_terminate_combos.py" "$PROXYD_PID" "$T/policy" "$PROXYD_LOG" \
    "$T/combo-pki" "${TLS_COMBO_ROUNDS:-200}" "$SEED" || fail "tls_terminate_combos: see the PROBLEM lines above"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
