#!/usr/bin/env bash
# Keybridge in front of an HTTP/2 server (server-h2="yes"), whose
# certificate (tls_switch.py, in front of nginx's plain h2 and HTTP/1.1
# ports) is a self-signed one or one the service's CA verifies, as the
# test says, under one name at one address, each with its own session
# tickets (as a server and an impostor would have):
#  - a client told to go on past a chain that did not verify (curl -k,
#    the untrusted CA's leaf) is served over HTTP/2 too: the session's h2
#    connection is allowed the same failure, as its HTTP/1.1 ones are;
#  - a verified session that comes next does not ride that connection
#    (the h2 pool keys them apart, as the HTTP/1.1 pool does);
#  - a session verified at its start, whose request comes after such an
#    unverified one went, while the server shows the certificate that does
#    not verify: 502, nothing reaches the server. Neither by the
#    unverified session's h2 connection, nor by resuming a TLS session
#    the unverified chain left in the worker's cache (a resumption skips
#    the check: such sessions are not kept).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

P=$T/pki
tls_ca origin-ca "origin CA"
tls_ca kb-ca "proxyd keybridge CA"
tls_leaf good "/CN=origin.test" "DNS:origin.test" serverAuth origin-ca
tls_self bad origin.test DNS:origin.test
echo hello >"$T/www/a.txt"
free_port NH2
free_port NH1
NGINX_SERVERS="
    log_format kb '\$connection \$server_protocol \"\$request\" \$status';
    server { listen 127.0.0.1:$NH2 http2; access_log $T/nginx/logs/kb.log kb; root $T/www; }
    server { listen 127.0.0.1:$NH1; access_log $T/nginx/logs/kb.log kb; root $T/www; }"
start_nginx
wait_listen "$NH2" 5 "$NGINX_PID" || fail "nginx h2 listener"
KLOG=$T/nginx/logs/kb.log

free_port SW
echo bad >"$T/choice"
: >"$T/switch.log"
/usr/bin/python3 "$LIB_DIR/tls_switch.py" "$SW" "$NH2" "$NH1" "$T/choice" \
    "$T/switch.log" "good=$P/good.pem:$P/good.key" "bad=$P/bad.pem:$P/bad.key" \
    2>"$T/switch.err" &
track_pid $!
wait_listen "$SW" 5 || fail "tls_switch.py did not start: $(cat "$T/switch.err")"

free_port PK
free_port PK2
write_proxyd_conf
# One worker: both clients meet the same h2 pool.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service kb "$PK" "$SW" "<http server-h2=\"yes\"/>
  <tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kb-ca.pem\" ca-key=\"$P/kb-ca.key\"/>
  <tls side=\"server\" mode=\"originate\" ca=\"$P/origin-ca.pem\"/>"
# the same on a second service: its own TLS context, its own h2 pool and
# TLS session cache entries
sed "s/\"kb\"/\"kb2\"/; s/port=\"$PK\"/port=\"$PK2\"/" "$T/policy/kb.xml" >"$T/policy/kb2.xml"
PROXYD_PORTS+=("$PK2")
start_proxyd

# get PORT QUERY [CURL ARGS]: the status of GET /a.txt?QUERY through
# keybridge
get() {
    local port=$1 q=$2
    shift 2
    curl -sS --max-time 20 "$@" --resolve "origin.test:$port:127.0.0.1" \
        -o "$T/body.$q" -w '%{http_code}' "https://origin.test:$port/a.txt?$q" 2>"$T/curl.$q" || true
}
# conn_of QUERY: nginx's connection number and protocol for it
conn_of() {
    local i
    for ((i = 0; i < 50; i++)); do
        grep -q "a.txt?$1 " "$KLOG" 2>/dev/null && break
        sleep 0.1
    done
    grep "a.txt?$1 " "$KLOG" | cut -d' ' -f1,2
}

info "unverified: the client goes on past the untrusted leaf (curl -k)"
code=$(get "$PK" u -k)
check test "$code" = 200 "an unverified server the client accepted, over h2: got $code ($(cat "$T/curl.u"))"
wait_log_count 'tls-keybridge name=origin\.test server-cert=unverified ' 1
check grep -q "^hello$" "$T/body.u" "the unverified server's body"
cu=$(conn_of u)
info "  u came on nginx connection ${cu:-none}"

info "verified: the next session must not ride the unverified connection"
echo good >"$T/choice"
code=$(get "$PK" v --cacert "$P/kb-ca.pem")
check test "$code" = 200 "a verified server: got $code ($(cat "$T/curl.v"))"
wait_log_count 'tls-keybridge name=origin\.test server-cert=verified ' 1
cv=$(conn_of v)
info "  v came on nginx connection ${cv:-none}"
check test "${cv#* }" = HTTP/2.0 "v over h2: ${cv:-none}"
check test "${cv% *}" != "${cu% *}" "the verified session shared the unverified one's connection (${cu:-none})"

info "verified at its start, its request after an unverified session went"
echo good >"$T/choice"
/usr/bin/python3 - "$PK2" "$P/kb-ca.pem" "$T/go" >"$T/late.out" 2>&1 <<'PY' &
import os, socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])),
                                             timeout=20),
                    server_hostname="origin.test")
print("ready", flush=True)
deadline = time.time() + 20
while not os.path.exists(sys.argv[3]) and time.time() < deadline:
    time.sleep(0.05)
s.sendall(b"GET /a.txt?late HTTP/1.1\r\nHost: origin.test\r\n"
          b"Connection: close\r\n\r\n")
got = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
except OSError:
    pass
print("status=%s" % got[9:12].decode("latin1"), flush=True)
PY
LATE=$!
for ((i = 0; i < 100; i++)); do grep -q ready "$T/late.out" && break; sleep 0.1; done
check grep -q ready "$T/late.out" "the verified client's handshake: $(cat "$T/late.out")"
wait_log_count 'tls-keybridge name=origin\.test server-cert=verified ' 2
echo bad >"$T/choice"
code=$(get "$PK2" u2 -k)
check test "$code" = 200 "the unverified session on the second service: got $code"
wait_log_count 'tls-keybridge name=origin\.test server-cert=unverified ' 2
touch "$T/go"
wait "$LATE" || true
info "  the verified session's request: $(tr '\n' ' ' <"$T/late.out")"
check grep -q "^status=502$" "$T/late.out" \
    "a verified session reached a server whose chain does not verify: $(cat "$T/late.out")"
check test "$(grep -c 'a.txt?late ' "$KLOG" || true)" = 0 \
    "the request reached the server: $(grep 'a.txt?late ' "$KLOG")"
assert_log 'path=/a\.txt\?late status=502 '
http_done
