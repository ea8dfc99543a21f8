#!/usr/bin/env bash
# Keybridge handshake failures end as terminate's do: a failure of the
# client's handshake is by=client-fail phase=accept, whether it comes
# before proxyd contacts the server (bytes that are not TLS) or after the
# server's handshake, when the client is shown the minted leaf (a client
# that does not trust the keybridge CA, a client that sends its
# ClientHello and then nothing until handshake-timeout); a failure of the
# server's handshake (a server that does not speak TLS) is by=server-fail
# phase=connect. On plug and http, each waited for by its own session-end
# line; each client failure counted once in proxyd_tls_failures_total; a
# good client follows as a sentinel.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup

P=$T/pki
tls_ca origin-ca "origin CA"
tls_ca kb-ca "proxyd keybridge CA"
tls_leaf origin "/O=Origin Ltd/CN=origin.test" "DNS:origin.test" serverAuth origin-ca
make_file 4k.bin 4096
free_port NGX_TLS
NGINX_SERVERS="
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"

KB="<tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kb-ca.pem\" ca-key=\"$P/kb-ca.key\" handshake-timeout=\"1s\"/>"
ORIG="<tls side=\"server\" mode=\"originate\" ca=\"$P/origin-ca.pem\"/>"
free_port P_PLUG
free_port P_HTTP
free_port P_PLAIN
write_proxyd_conf
write_service kplug "$P_PLUG" "$NGX_TLS" "$KB $ORIG"
write_http_service khttp "$P_HTTP" "$NGX_TLS" "$KB $ORIG"
# the server leg to nginx's plain HTTP port: its handshake fails
write_service kplain "$P_PLAIN" "$NGINX_PORT" "$KB $ORIG"
start_proxyd

# peer PORT MODE: one client connection that fails as MODE says.
#   garbage: bytes that are not TLS (before the server is contacted);
#   stall: a real ClientHello (for origin.test), then nothing: proxyd does
#   the server's handshake, answers with the leaf, and waits.
peer() {
    python3 - "$1" "$2" <<'EOF'
import socket, ssl, sys, time
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
if mode == "garbage":
    s.sendall(bytes(range(256)) * 2)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
else:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="origin.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    s.sendall(out.read())
# wait for proxyd's close (stall: its handshake timer)
got = 0
try:
    while True:
        d = s.recv(4096)
        if not d:
            break
        got += len(d)
except OSError:
    pass
if mode == "stall" and got == 0:
    sys.exit("stall: proxyd answered nothing to the ClientHello (no server leg?)")
EOF
}

# failures SERVICE ANALYSER: proxyd_tls_failures_total, client side
failures() {
    local v
    v=$(metric_value proxyd_tls_failures_total "service=\"$1\",analyser=\"$2\",side=\"client\"")
    [[ $v == NA ]] && v=0
    echo "$v"
}
ends() { session_end_lines "$1" | wc -l; }
# expect_end SERVICE N REGEX: the Nth session-end line of SERVICE (waited
# for) matches REGEX
expect_end() {
    local i line
    for ((i = 0; i < 150; i++)); do
        (($(ends "$1") >= $2)) && break
        sleep 0.1
    done
    (($(ends "$1") >= $2)) || fail "$1: $(ends "$1") session-end lines, expected $2"
    line=$(session_end_lines "$1" | sed -n "${2}p")
    grep -Eq -- "$3" <<<"$line" || fail "$1: logged '$line', expected /$3/"
    info "  $(sed -E 's/.* (by=.*)$/\1/' <<<"$line")"
}

for svc in plug http; do
    [[ $svc == plug ]] && port=$P_PLUG || port=$P_HTTP
    name=k$svc
    n=0
    before=$(failures "$name" "$svc")

    info "$svc: bytes that are not TLS"
    peer "$port" garbage
    n=$((n + 1))
    expect_end "$name" "$n" 'verdict=error .* by=client-fail phase=accept end=client-error: tls: '

    info "$svc: a client that does not trust the keybridge CA (refuses the leaf)"
    if curl -sS --max-time 20 --cacert "$P/origin-ca.pem" --resolve "origin.test:$port:127.0.0.1" \
        -o /dev/null "https://origin.test:$port/4k.bin" 2>"$T/curl-$svc.err"; then
        fail "$svc: curl accepted a leaf of a CA it was not given"
    fi
    n=$((n + 1))
    expect_end "$name" "$n" 'verdict=error .* by=client-fail phase=accept end=client-error: tls: .*unknown ca'

    info "$svc: a ClientHello, then nothing (after the server's handshake)"
    peer "$port" stall
    n=$((n + 1))
    expect_end "$name" "$n" 'verdict=error .* by=client-fail phase=accept end=client-error: tls: handshake timed out$'
    assert_log "tls-keybridge name=origin\.test .*" 5

    assert_eq "$(($(failures "$name" "$svc") - before))" "$n" "$svc: client TLS failures counted for $n failed handshakes"

    info "$svc: a good client after them is served"
    got=$(curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "origin.test:$port:127.0.0.1" \
        "https://origin.test:$port/4k.bin" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$(sha256_of "$T/www/4k.bin")" "$svc: sha256 of the sentinel"
done

info "plug: a server that does not speak TLS (the server's handshake fails)"
if curl -sS --max-time 20 --cacert "$P/kb-ca.pem" --resolve "origin.test:$P_PLAIN:127.0.0.1" \
    -o /dev/null "https://origin.test:$P_PLAIN/4k.bin" 2>/dev/null; then
    fail "a request through a server leg that is not TLS succeeded"
fi
expect_end kplain 1 'verdict=error .* by=server-fail phase=connect end=server-error: tls: '
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
