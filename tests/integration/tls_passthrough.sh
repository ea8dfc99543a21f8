#!/usr/bin/env bash
# SNI passthrough policing (<tls side="client" mode="passthrough">) on a
# plug service in front of an nginx TLS origin: the ClientHello is read,
# not opened; <sni> globs and alpn= sets decide before any server is
# connected; what passes is relayed untouched (the client verifies the
# origin's own certificate; splice), what does not is refused with a log
# line and counted, plain bytes included; a ClientHello dribbled byte by
# byte still passes; --check refuses misuse with file:line. Then random
# rule lists and ClientHellos (tls_sni_differential.py: 400 hellos, a few
# seconds; TLS_SNI_SEED=N replays a run) judged against the rules as
# docs/CONFIG.md states them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin origin "DNS:www.example.test,DNS:api.other.test,DNS:evil.test" serverAuth

make_file f1m.bin $((1024 * 1024))
SHA=$(sha256_of "$T/www/f1m.bin")
free_port NGX_TLS
NGINX_SERVERS="
    log_format sni '\"\$request\" \$status sni=\$ssl_server_name';
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        access_log $T/nginx/logs/sni.log sni;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"
SLOG=$T/nginx/logs/sni.log

free_port P_PASS
write_proxyd_conf
write_service tpass "$P_PASS" "$NGX_TLS" \
    "<tls side=\"client\" mode=\"passthrough\">
       <sni name=\"*.example.test\" alpn=\"http/1.1\" action=\"accept\"/>
       <sni name=\"api.other.test\" action=\"accept\"/>
       <sni name=\"*\" alpn=\"h2\" action=\"deny\"/>
     </tls>"
start_proxyd

# get NAME PATH [curl args]: http code through the passthrough port
get() {
    local name=$1 path=$2
    shift 2
    curl -sS --max-time 20 --cacert "$P/ca.pem" --resolve "$name:$P_PASS:127.0.0.1" \
        -o "$T/out.bin" -w '%{http_code}' "$@" "https://$name:$P_PASS$path" 2>"$T/curl.err" || true
}
origin_saw() { grep -c "GET $1 " "$SLOG" 2>/dev/null || true; }

info "an allowed name and protocol: relayed untouched (the client verifies the origin)"
splice_before=$(metric_value proxyd_splice_sessions_total '')
code=$(get www.example.test /f1m.bin --http1.1)
assert_eq "$code" "200" "status through passthrough"
assert_eq "$(sha256_of "$T/out.bin")" "$SHA" "sha256 through passthrough"
assert_log "tls-passthrough sni=www\.example\.test alpn=http/1\.1 verdict=accept"
assert_log "session-end service=tpass analyser=plug verdict=accept .*to-client=[0-9]{7,} .*end=(client|server)-closed"
assert_metric eq proxyd_splice_sessions_total '' $((splice_before + 1))
for i in $(seq 50); do grep -q '"GET /f1m.bin HTTP/1.1" 200 sni=www.example.test' "$SLOG" 2>/dev/null && break; sleep 0.1; done
grep -q '"GET /f1m.bin HTTP/1.1" 200 sni=www.example.test' "$SLOG" || fail "the origin did not see the client's SNI: $(cat "$SLOG")"

info "the same name offering h2 too: not a subset of the accept rule's alpn=; the h2 deny rule takes it"
code=$(get www.example.test /f1m.bin?h2 --http2)
[[ $code == 200 ]] && fail "a client offering h2 got through"
assert_log "session-end service=tpass analyser=plug verdict=deny .* rule=tpass\.xml:8 by=policy phase=accept end=denied: tls sni=www\.example\.test alpn=h2,http/1\.1 \(rule at line 8\)"

info "a name no accept rule lists: denied, nothing reaches the origin"
code=$(get evil.test /f1m.bin?evil --http1.1)
[[ $code == 200 ]] && fail "evil.test got through"
assert_log " rule=default by=policy phase=accept end=denied: tls sni=evil\.test alpn=http/1\.1 \(no rule: the default\)"
code=$(get evil.test /f1m.bin?evilh2 --http2)
assert_log "end=denied: tls sni=evil\.test alpn=h2,http/1\.1 \(rule at line 8\)"
assert_eq "$(origin_saw /f1m.bin?evil)" 0 "requests of evil.test at the origin"

info "a rule without alpn= takes any protocol"
code=$(get api.other.test /f1m.bin?api --http2)
assert_eq "$code" "200" "api.other.test with h2"

info "no SNI: denied by no-sni (default deny)"
echo | timeout 10 openssl s_client -connect "127.0.0.1:$P_PASS" -noservername >"$T/nosni.out" 2>&1 || true
assert_log " rule=tls/@no-sni by=policy phase=accept end=denied: tls sni=- alpn=- \(no-sni\)"

info "plain HTTP on the port: refused as not TLS"
curl -sS --max-time 10 -o /dev/null "http://127.0.0.1:$P_PASS/plain" 2>/dev/null || true
assert_log "verdict=deny .*end=denied: tls: not TLS"
assert_metric eq proxyd_tls_failures_total 'side="client",reason="not-tls"' 1

info "a ClientHello dribbled one byte at a time still reaches the origin"
python3 - "$P_PASS" <<'EOF' || fail "the dribbled ClientHello got no ServerHello back"
import socket, ssl, sys, time
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname="www.example.test")
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
for b in hello:
    s.sendall(bytes([b]))
    time.sleep(0.002)
first = s.recv(5)
sys.exit(0 if len(first) == 5 and first[0] == 0x16 else 1)
EOF
assert_log "tls-passthrough sni=www\.example\.test alpn=http/1\.1 verdict=accept"

info "counted by verdict"
assert_metric eq proxyd_tls_passthrough_total 'verdict="accept"' 3
assert_metric eq proxyd_tls_passthrough_total 'verdict="deny"' 5

info "--check refuses misuse with file:line"
tls_check_bad "passthrough under http" http \
    "<tls side=\"client\" mode=\"passthrough\"><sni name=\"*\" action=\"accept\"/></tls>" \
    "b\.xml:4: <tls mode=\"passthrough\"> needs an analyser that relays bytes unread \(plug\), not analyser=\"http\""
tls_check_bad "a certificate under passthrough" plug \
    "<tls side=\"client\" mode=\"passthrough\"><certificate name=\"a.test\" cert=\"x\" key=\"y\"/></tls>" \
    "b\.xml:4: <certificate> does not belong in <tls mode=\"passthrough\"> \(only <sni>\)"
tls_check_bad "an sni rule without an action" plug \
    "<tls side=\"client\" mode=\"passthrough\"><sni name=\"a.test\" action=\"maybe\"/></tls>" \
    "b\.xml:4: action=\"maybe\""

info "random rule lists and hellos against the rules as documented (tls_sni_differential.py)"
SEED=${TLS_SNI_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
python3 "$(dirname "$0")/tls_sni_differential.py" "$PROXYD_PID" "$T/policy" \
    "${TLS_SNI_ROUNDS:-400}" "$SEED" || fail "tls_sni_differential: see the PROBLEM lines above"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
