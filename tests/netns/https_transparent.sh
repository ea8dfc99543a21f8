#!/usr/bin/env bash
# TLS terminated inline: the client fetches https://web.test/file from the
# server's address through the fw, where port 443 is diverted (TPROXY) to a
# transparent http service that terminates TLS with a certificate made here
# and relays plain HTTP to the original destination (nginx, plain, on 443).
# The client's Host carries no port: on a TLS connection that means 443, so
# it matches the destination and is not refused as another port's; a Host
# naming port 80 is refused (400) and never reaches nginx.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$NETNS_DIR/../integration/tls_lib.sh"
netns_setup
need_cmds openssl

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf web web.test "DNS:web.test" serverAuth
make_file file 128K
start_origin 443
deploy tproxy --port 443 --proxy-port 50443
write_conf_ns
cat >"$T/policy/tls.xml" <<EOF
<service name="tls" analyser="http">
  <listen address="0.0.0.0" port="50443" mode="transparent"/>
  <tls side="client" mode="terminate" cert="$P/web.pem" key="$P/web.key"/>
  <http/>
</service>
EOF
NS_PORTS+=(50443)
start_proxyd_ns

R=(--cacert "$P/ca.pem" --resolve "web.test:443:$TOPO_S4")
r=$(client_get "https://web.test/file?phase=noport" "$T/out.file" "${R[@]}")
assert_eq "$r" "0 200" "https through the transparent TLS service, Host without a port"
assert_eq "$(sha256_of "$T/out.file")" "$(sha256_of "$T/www/file")" "sha256 of the body"
wait_grep "$ACCESS_LOG" 'phase=noport' 3 || fail "nginx did not log the request"
assert_log "http-request .* host=web\.test path=/file\?phase=noport status=200 "

r=$(client_get "https://web.test/file?phase=port80" "$T/out.80" "${R[@]}" -H "Host: web.test:80")
assert_eq "$r" "0 400" "a Host naming port 80 on a TLS connection to 443"
assert_log 'http-error status=400 reason="Host does not match the destination"'
assert_eq "$(nginx_count 'phase=port80')" 0 "requests nginx got for the mismatched Host"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
