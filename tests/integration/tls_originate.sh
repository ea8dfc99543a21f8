#!/usr/bin/env bash
# TLS originated to servers (<tls side="server" mode="originate">), in front
# of nginx TLS origins: plain and TLS clients through http and plug, the
# chain verified against a CA made here (required, optional, none), the
# host name checked against the SNI sent (fixed or the client's), a client
# certificate presented, a pooled TLS connection reused by another client,
# sessions resumed per worker, an accepted Upgrade's tunnel kept in TLS
# on each side that has it (the same TLS sessions, relayed), failures
# logged and counted by reason, and bad files refused by --check with
# file:line. Then random verify= and sni= in front of origins whose
# certificates name the server in every way (tls_originate_combos.py: 200
# sessions, about 6 s; TLS_ORIG_SEED=N replays a run).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3 wrk
setup

# ---- a test CA, leaves signed by it, and a self-signed one, made now
P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin origin.test "DNS:origin.test,IP:127.0.0.1" serverAuth
tls_leaf front origin.test "DNS:origin.test,DNS:localhost" serverAuth
tls_leaf client "proxyd client" "DNS:proxyd.test" clientAuth
tls_self self origin.test DNS:origin.test

make_file f1m.bin $((1024 * 1024))
SHA=$(sha256_of "$T/www/f1m.bin")
free_port NGX_TLS
free_port NGX_SELF
free_port NGX_MTLS
# Each request's TLS facts: the name the client sent, whether its session
# was resumed (r), the connection serial, and the client certificate.
NGINX_SERVERS="
    log_format tls '\$server_port \"\$request\" \$status sni=\$ssl_server_name reused=\$ssl_session_reused conn=\$connection cdn=\"\$ssl_client_s_dn\"';
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        access_log $T/nginx/logs/tls.log tls;
        root $T/www;
    }
    server {
        listen 127.0.0.1:$NGX_SELF ssl;
        ssl_certificate $P/self.pem;
        ssl_certificate_key $P/self.key;
        access_log $T/nginx/logs/tls.log tls;
        root $T/www;
    }
    server {
        listen 127.0.0.1:$NGX_MTLS ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        ssl_verify_client on;
        ssl_client_certificate $P/ca.pem;
        access_log $T/nginx/logs/tls.log tls;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"
TLOG=$T/nginx/logs/tls.log
# upgrade_origin VAR tls|plain: an origin that accepts an Upgrade (101),
# then answers each line of the tunnel with the line reversed, in TLS (or
# not) all along.
upgrade_origin() {
    start_py_server "$1" <<PY
import ssl
CTX = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CTX.load_cert_chain("$P/origin.pem", "$P/origin.key")
def handle(c):
    s = CTX.wrap_socket(c, server_side=True) if "$2" == "tls" else c
    buf = b""
    while b"\\r\\n\\r\\n" not in buf:
        d = s.recv(4096)
        if not d:
            return
        buf += d
    s.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nConnection: upgrade\\r\\nUpgrade: websocket\\r\\n\\r\\n")
    buf = buf.split(b"\\r\\n\\r\\n", 1)[1]
    while True:
        while b"\\n" not in buf:
            d = s.recv(4096)
            if not d:
                return
            buf += d
        line, buf = buf.split(b"\\n", 1)
        s.sendall(line[::-1] + b"\\n")
PY
}
upgrade_origin PY_UPG tls
upgrade_origin PY_UPG_PLAIN plain

CA="ca=\"$P/ca.pem\""
FRONT="<tls side=\"client\" mode=\"terminate\" cert=\"$P/front.pem\" key=\"$P/front.key\"/>"
free_port P_H_FIXED
free_port P_H_BOTH
free_port P_H_WRONG
free_port P_H_SELF
free_port P_H_NONE
free_port P_H_OPT
free_port P_H_MTLS
free_port P_PLUG
free_port P_UPG
free_port P_UPG_BOTH
free_port P_UPG_FRONT
write_proxyd_conf
# One worker: the pool and the session cache are per worker.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service h_fixed "$P_H_FIXED" "$NGX_TLS" \
    "<tls side=\"server\" mode=\"originate\" $CA sni=\"origin.test\"/>"
write_http_service h_both "$P_H_BOTH" "$NGX_TLS" \
    "$FRONT <tls side=\"server\" mode=\"originate\" $CA sni=\"forward\"/>"
write_http_service h_wrong "$P_H_WRONG" "$NGX_TLS" \
    "<tls side=\"server\" mode=\"originate\" $CA sni=\"wrong.test\"/>"
write_http_service h_self "$P_H_SELF" "$NGX_SELF" \
    "<tls side=\"server\" mode=\"originate\" $CA sni=\"origin.test\"/>"
write_http_service h_none "$P_H_NONE" "$NGX_SELF" \
    "<tls side=\"server\" mode=\"originate\" verify=\"none\" sni=\"origin.test\"/>"
write_http_service h_opt "$P_H_OPT" "$NGX_SELF" \
    "<tls side=\"server\" mode=\"originate\" verify=\"optional\" $CA sni=\"origin.test\"/>"
write_http_service h_mtls "$P_H_MTLS" "$NGX_MTLS" \
    "<tls side=\"server\" mode=\"originate\" $CA sni=\"origin.test\" cert=\"$P/client.pem\" key=\"$P/client.key\"/>"
UPG='<http><upgrade protocols="websocket" action="accept"/></http>'
write_http_service h_upg "$P_UPG" "$PY_UPG" \
    "<tls side=\"server\" mode=\"originate\" $CA sni=\"origin.test\"/> $UPG"
write_http_service h_upg_both "$P_UPG_BOTH" "$PY_UPG" \
    "$FRONT <tls side=\"server\" mode=\"originate\" $CA sni=\"origin.test\"/> $UPG"
write_http_service h_upg_front "$P_UPG_FRONT" "$PY_UPG_PLAIN" "$FRONT $UPG"
write_service p_both "$P_PLUG" "$NGX_TLS" \
    "$FRONT <tls side=\"server\" mode=\"originate\" $CA/>"
start_proxyd

# nginx_line PORT PATH: the origin's last TLS log line for that request
nginx_line() { grep -E "^$1 \"GET $2 " "$TLOG" | tail -n 1; }
wait_nginx_line() { # PORT PATH REGEX WHAT
    local i
    for i in $(seq 50); do
        nginx_line "$1" "$2" | grep -Eq "$3" && return 0
        sleep 0.1
    done
    fail "$4: nginx logged '$(nginx_line "$1" "$2")', expected /$3/"
}

info "plain client -> http -> TLS origin (fixed SNI, chain and name verified)"
code=$(curl -sS --max-time 20 -o "$T/a.bin" -w '%{http_code}' "http://127.0.0.1:$P_H_FIXED/f1m.bin")
assert_eq "$code" "200" "status through originate"
assert_eq "$(sha256_of "$T/a.bin")" "$SHA" "sha256 through originate"
wait_nginx_line "$NGX_TLS" /f1m.bin "200 sni=origin.test " "the SNI proxyd sent"
first_conn=$(nginx_line "$NGX_TLS" /f1m.bin | sed -E 's/.* conn=([0-9]+).*/\1/')
assert_metric eq proxyd_tls_handshakes_total 'side="server",resumed="no"' 1

info "another client reuses the pooled TLS connection"
reused_before=$(metric_value proxyd_upstream_connections_total 'kind="reused"')
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_H_FIXED/f1m.bin?second")
assert_eq "$code" "200" "status of the second client"
wait_nginx_line "$NGX_TLS" '/f1m.bin\?second' " 200 " "the second request"
assert_eq "$(nginx_line "$NGX_TLS" '/f1m.bin\?second' | sed -E 's/.* conn=([0-9]+).*/\1/')" \
    "$first_conn" "nginx connection serial of the second client (the pooled one)"
assert_metric eq proxyd_upstream_connections_total 'kind="reused"' $((reused_before + 1))
assert_metric eq proxyd_tls_handshakes_total 'side="server",resumed="no"' 1

info "TLS client -> terminate + originate, the client's SNI forwarded"
code=$(curl -sS --max-time 20 --cacert "$P/ca.pem" --resolve "origin.test:$P_H_BOTH:127.0.0.1" \
    -o "$T/b.bin" -w '%{http_code}' "https://origin.test:$P_H_BOTH/f1m.bin?both")
assert_eq "$code" "200" "status through terminate + originate"
assert_eq "$(sha256_of "$T/b.bin")" "$SHA" "sha256 through terminate + originate"
wait_nginx_line "$NGX_TLS" '/f1m.bin\?both' "200 sni=origin.test " "the forwarded SNI"

# A big body through both TLS legs: every byte decrypted, checked by the
# analyser and encrypted again, in bounded memory.
BIG=$((1024 * 1024 * 1024))
http_sanitized && BIG=$((64 * 1024 * 1024))
info "a $((BIG / 1048576)) MB response through terminate + originate, sha256 intact, memory bounded"
make_file big.bin "$BIG"
BIGSHA=$(sha256_of "$T/www/big.bin")
got=$(curl -sS --max-time 300 --cacert "$P/ca.pem" --resolve "origin.test:$P_H_BOTH:127.0.0.1" \
    "https://origin.test:$P_H_BOTH/big.bin" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$BIGSHA" "sha256 of the big body through terminate + originate"
rm -f "$T/www/big.bin"
hwm=$(vm_kb "$PROXYD_PID" VmHWM)
info "  proxyd peak RSS ${hwm} kB"
http_sanitized || assert_lt "$hwm" 65536 "proxyd peak RSS (kB) after the big TLS body"

info "plug: terminate + originate, 1 MB twice; the second server handshake resumed"
for i in 1 2; do
    got=$(curl -sS --max-time 20 --cacert "$P/ca.pem" --resolve "origin.test:$P_PLUG:127.0.0.1" \
        "https://origin.test:$P_PLUG/f1m.bin?plug$i" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$SHA" "sha256 through plug, terminate + originate ($i)"
    wait_nginx_line "$NGX_TLS" "/f1m.bin\\?plug$i" "200 sni=origin.test " "the SNI through plug ($i)"
done
wait_nginx_line "$NGX_TLS" '/f1m.bin\?plug2' " reused=r " "the second plug session's TLS resumption"
assert_metric ge proxyd_tls_handshakes_total 'side="server",resumed="yes"' 1
assert_log "session-end service=p_both analyser=plug verdict=accept .*to-client=[0-9]{7,} .*end=(client|server)-closed"

info "clients that vanish mid-response: sessions end, nothing spins"
# wrk does this at the end of a run: its connections close in the middle
# of 1 MB responses, and the proxy's next TLS write meets a closed socket.
# A write that "took nothing" once looped there at 100 % CPU.
timeout 30 wrk -t1 -c50 -d2s "https://127.0.0.1:$P_H_BOTH/f1m.bin" >"$T/wrk.out" 2>&1 ||
    fail "wrk through terminate + originate: $(cat "$T/wrk.out")"
assert_metric eq proxyd_sessions_active '' 0 10
t0=$(awk '{print $14 + $15}' "/proc/$PROXYD_PID/stat")
for i in $(seq 10); do curl -s -o /dev/null "http://127.0.0.1:$ADMIN_PORT/metrics"; sleep 0.1; done
t1=$(awk '{print $14 + $15}' "/proc/$PROXYD_PID/stat")
info "  proxyd CPU ticks over ~1 s with nothing to do: $((t1 - t0))"
(((t1 - t0) < $(getconf CLK_TCK) / 4)) || fail "proxyd used $((t1 - t0)) CPU ticks in about a second with no client: a busy loop"

# upgrade_through PORT [tls]: the 101, then a line echoed reversed
upgrade_through() {
    timeout 20 python3 - "$1" "${2:-}" "$P/ca.pem" <<'PY'
import socket, ssl, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
if sys.argv[2] == "tls":
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    s = ctx.wrap_socket(s, server_hostname="origin.test")
s.settimeout(10)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: origin.test\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
buf = head = b""
try:
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    head, _, buf = buf.partition(b"\r\n\r\n")
    s.sendall(b"hello tunnel\n")
    while b"\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    print(head.split(b"\r\n")[0].decode(), "|", buf.decode(errors="replace").strip())
except OSError as e:
    print(head.split(b"\r\n")[0].decode() or "-", "|", type(e).__name__)
PY
}
info "an Upgrade through originate: the tunnel stays in TLS"
out=$(upgrade_through "$P_UPG")
assert_eq "$out" "HTTP/1.1 101 Switching Protocols | lennut olleh" "the tunnel through originate"
info "an Upgrade through terminate + originate: both sides stay in TLS"
out=$(upgrade_through "$P_UPG_BOTH" tls)
assert_eq "$out" "HTTP/1.1 101 Switching Protocols | lennut olleh" "the tunnel through terminate + originate"
assert_log "session-end service=h_upg_both .* by=client phase=data end=client-closed"
info "an Upgrade through terminate to a plain origin: the client's side stays in TLS"
out=$(upgrade_through "$P_UPG_FRONT" tls)
assert_eq "$out" "HTTP/1.1 101 Switching Protocols | lennut olleh" "the tunnel through terminate"

info "a server certificate for another name: 502, logged, counted"
code=$(curl -sS --max-time 20 -o "$T/w.out" -w '%{http_code}' "http://127.0.0.1:$P_H_WRONG/f1m.bin?wrong")
assert_eq "$code" "502" "status when the host name does not match"
assert_log "http-request .*path=/f1m\.bin\?wrong status=502 "
assert_log "tls-error side=server reason=host-name-mismatch detail=\"tls: server certificate: [Hh]ostname mismatch\""
assert_metric eq proxyd_tls_failures_total 'side="server",reason="host-name-mismatch"' 1

info "a self-signed server: unknown-ca under verify=required"
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_H_SELF/f1m.bin?self")
assert_eq "$code" "502" "status with a self-signed server"
assert_metric eq proxyd_tls_failures_total 'side="server",reason="unknown-ca"' 1
assert_log "tls-error side=server reason=unknown-ca detail=\"tls: server certificate: self[- ]signed certificate\""
[[ -z $(nginx_line "$NGX_SELF" '/f1m.bin\?self') ]] || fail "a request reached the unverified server"

info "verify=none passes it; verify=optional passes it and says so"
code=$(curl -sS --max-time 20 -o "$T/n.bin" -w '%{http_code}' "http://127.0.0.1:$P_H_NONE/f1m.bin?none")
assert_eq "$code" "200" "status under verify=none"
assert_eq "$(sha256_of "$T/n.bin")" "$SHA" "sha256 under verify=none"
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_H_OPT/f1m.bin?opt")
assert_eq "$code" "200" "status under verify=optional"
assert_log "tls-server-unverified name=origin\.test reason=\"self[- ]signed certificate\" \(verify=\"optional\"\)"
assert_metric eq proxyd_tls_server_unverified_total '' 1

info "a client certificate presented to a server that requires one"
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P_H_MTLS/f1m.bin?mtls")
assert_eq "$code" "200" "status with a client certificate"
wait_nginx_line "$NGX_MTLS" '/f1m.bin\?mtls' 'cdn="CN=proxyd client"' "the client certificate nginx saw"

info "--check refuses bad originate settings with file:line"
tls_check_bad "a CA file that holds no CA" plug \
    "<tls side=\"server\" mode=\"originate\" ca=\"$P/origin.pem\"/>" \
    "b\.xml:4: ca=\".*origin\.pem\": certificate 1 \(.*CN ?= ?origin\.test.*\) is not a CA"
tls_check_bad "a missing CA file" plug \
    "<tls side=\"server\" mode=\"originate\" ca=\"$P/none.pem\"/>" \
    "b\.xml:4: ca=\".*none\.pem\": No such file or directory"
tls_check_bad "a client certificate without its key" plug \
    "<tls side=\"server\" mode=\"originate\" cert=\"$P/client.pem\"/>" \
    "b\.xml:4: a client certificate needs both cert= and key="
tls_check_bad "an SNI that is no host name" plug \
    "<tls side=\"server\" mode=\"originate\" sni=\"a_b..c\"/>" \
    "b\.xml:4: sni=\"a_b\.\.c\": expected forward, none or a host name"
tls_check_bad "an unknown verify" plug \
    "<tls side=\"server\" mode=\"originate\" verify=\"maybe\"/>" \
    "b\.xml:4: verify=\"maybe\": expected required, optional or none"
tls_check_bad "two client sides" plug \
    "$FRONT $FRONT" \
    "b\.xml:4: <tls> given twice"

info "random verify= and sni= against origins of every kind of certificate (tls_originate_combos.py)"
SEED=${TLS_ORIG_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
python3 "$(dirname "$0")/tls_originate_combos.py" "$PROXYD_PID" "$T/policy" \
    "$T/orig-pki" "${TLS_ORIG_ROUNDS:-200}" "$SEED" || fail "tls_originate_combos: see the PROBLEM lines above"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
