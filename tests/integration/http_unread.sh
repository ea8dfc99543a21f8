#!/usr/bin/env bash
# HTTP/1.1 over TLS, bytes decrypted already and waiting in OpenSSL's
# buffer where the socket (FIONREAD, the pool's read event) does not see
# them. A 4k buffer makes proxyd's reads stop exactly at a message's end:
# - a TLS origin whose response and one more nobody asked for come in one
#   record: its connection is not pooled, the next client gets its own
#   response (not the leftover one).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds curl openssl python3
setup

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf origin origin.test "DNS:origin.test,IP:127.0.0.1" serverAuth

# Each request (its path) is answered with a response of exactly 4096
# bytes, its body the path padded with dots, and in the same write (one
# TLS record) one more response nobody asked for.
start_py_server ORIGIN <<PY
import ssl
CTX = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CTX.load_cert_chain("$P/origin.pem", "$P/origin.key")
def response(path):
    for n in range(4096):
        head = b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % n
        if len(head) + n == 4096:
            return head + (path + b"\\n").ljust(n, b".")
def handle(c):
    s = CTX.wrap_socket(c, server_side=True)
    buf = b""
    while True:
        while b"\\r\\n\\r\\n" not in buf:
            d = s.recv(4096)
            if not d:
                return
            buf += d
        head, buf = buf.split(b"\\r\\n\\r\\n", 1)
        s.sendall(response(head.split(b" ")[1]) +
                  b"HTTP/1.1 200 OK\\r\\nContent-Length: 9\\r\\n\\r\\nsmuggled\\n")
PY

free_port P_EXTRA
write_proxyd_conf 'buffer="4k"'
# One worker: the pool is per worker.
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service h_extra "$P_EXTRA" "$ORIGIN" \
    "<tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"origin.test\"/>"
start_proxyd

info "a TLS server's bytes after its response, in the same record: its connection is not reused"
for i in 1 2; do
    # Connection: close: the server connection leaves the session with
    # the response's last byte, the leftover not read yet.
    body=$(curl -sS --max-time 10 -H 'Connection: close' "http://127.0.0.1:$P_EXTRA/extra$i" | head -n 1)
    assert_eq "$body" "/extra$i" "the response of client $i"
    wait_log_count "session-end service=h_extra " "$i"
done
assert_metric eq proxyd_upstream_connections_total 'kind="reused"' 0
assert_log "http-upstream server sent bytes after its response: connection not reused"

proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
