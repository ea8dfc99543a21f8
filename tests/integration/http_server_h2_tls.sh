#!/usr/bin/env bash
# HTTP/2 towards servers under <tls side="server" mode="originate">,
# against Debian's nginx (its log says what it saw: $server_protocol):
#  - server-h2="yes" offers ALPN h2 alone: nginx with `ssl http2` says
#    HTTP/2.0; an HTTP/1.1-only listener cannot agree, the client gets 502;
#  - server-h2="auto" offers h2,http/1.1 and uses what nginx picked:
#    HTTP/2.0 on the h2 listener, HTTP/1.1 on the other (the request that
#    found out goes the HTTP/1.1 way, and so do the next ones);
#  - a service whose TLS settings differ gets its own connection (one
#    whose CA does not verify nginx gets 502, however many verified ones
#    are open);
#  - the request that found out counts its head once in the session's
#    bytes (to-server= as through server-h2="no");
#  - a reload that changes a service's TLS settings: its requests never
#    ride on a connection made under the old ones (a CA that does not
#    verify nginx gets 502 however many reloads went between; the pools
#    key by the TLS context's id, which a reload cannot give another);
#  - an HTTP/1.1 client's 1 MB upload over TLS h2 arrives whole, sent
#    with its head before the connection's handshake is done.
# On main the attribute is unknown: the service does not load.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl
setup

make_file small.bin 100K
make_file one.bin 1M
P=$T/pki
tls_ca origin-ca "origin CA"
tls_leaf origin "/CN=origin.test" "DNS:origin.test" serverAuth origin-ca
tls_ca other-ca "another CA"
free_port N2
free_port N1
free_port OKPORT
mkdir -p "$T/nginx/tmp/h2body"
NGINX_SERVERS="
    log_format pr '\$server_port \$server_protocol \"\$request\" \$status \$request_body_file';
    server {
        listen 127.0.0.1:$N2 ssl http2;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        access_log $T/nginx/logs/pr.log pr;
        root $T/www;
        location /upload {
            client_max_body_size 100m;
            client_body_in_file_only on;
            client_body_temp_path $T/nginx/tmp/h2body;
            proxy_pass http://127.0.0.1:$OKPORT/ok;
        }
    }
    server {
        listen 127.0.0.1:$N1 ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        access_log $T/nginx/logs/pr.log pr;
        root $T/www;
    }
    server { listen 127.0.0.1:$OKPORT; access_log off; location / { return 200 \"ok\\n\"; } }"
start_nginx
wait_listen "$N2" 5 "$NGINX_PID" || fail "nginx h2 TLS listener"
wait_listen "$N1" 5 "$NGINX_PID" || fail "nginx TLS listener"

ORIG="<tls side=\"server\" mode=\"originate\" ca=\"$P/origin-ca.pem\" sni=\"origin.test\"/>"
free_port PY2
free_port PY1
free_port PA2
free_port PA1
free_port PU
free_port PB
free_port PN1
write_proxyd_conf
write_http_service y2 "$PY2" "$N2" "<http server-h2=\"yes\"/>$ORIG"
write_http_service y1 "$PY1" "$N1" "<http server-h2=\"yes\"/>$ORIG"
write_http_service a2 "$PA2" "$N2" "<http server-h2=\"auto\"/>$ORIG"
write_http_service a1 "$PA1" "$N1" "<http server-h2=\"auto\"/>$ORIG"
write_http_service n1 "$PN1" "$N1" "<http server-h2=\"no\"/>$ORIG"
write_http_service up "$PU" "$N2" "<http server-h2=\"yes\"/>$ORIG"
write_http_service bad "$PB" "$N2" "<http server-h2=\"yes\"/><tls side=\"server\" mode=\"originate\" ca=\"$P/other-ca.pem\" sni=\"origin.test\"/>"
start_proxyd

fetch() { # PORT PATH: "code sha256" (Host: origin.test, whatever the port)
    local code
    code=$(curl -sS --max-time 10 -o "$T/f.out" -w '%{http_code}' -H 'Host: origin.test' "http://127.0.0.1:$1$2" 2>/dev/null) || true
    echo "$code $(sha256_of "$T/f.out" 2>/dev/null)"
}
want="200 $(sha256_of "$T/www/small.bin")"

check [ "$(fetch "$PY2" /small.bin)" = "$want" ] "yes over TLS to an h2 listener"
check [ "$(fetch "$PA2" /small.bin)" = "$want" ] "auto over TLS to an h2 listener"
# Another service's TLS (a CA that did not sign nginx's certificate) does
# not ride on the connection the first one verified.
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PB/small.bin" 2>/dev/null) || true
check [ "$code" = 502 ] "a service whose CA does not verify the server: $code"
check [ "$(fetch "$PN1" /small.bin)" = "$want" ] "no over TLS to an HTTP/1.1 listener"
check [ "$(fetch "$PA1" /small.bin)" = "$want" ] "auto over TLS to an HTTP/1.1 listener (first)"
# The same request's head, sent once either way: the same to-server=.
wait_log_count "session-end service=n1 " 1
wait_log_count "session-end service=a1 " 1
tn=$(grep -m1 "session-end service=n1 " "$PROXYD_LOG" | sed -n 's/.* to-server=\([0-9]*\) .*/\1/p')
ta=$(grep -m1 "session-end service=a1 " "$PROXYD_LOG" | sed -n 's/.* to-server=\([0-9]*\) .*/\1/p')
check [ "${tn:-none}" = "$ta" ] "auto's fallback counts its head once: to-server=$ta (no: $tn)"
check [ "$(fetch "$PA1" /small.bin)" = "$want" ] "auto over TLS to an HTTP/1.1 listener (again)"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PY1/small.bin" 2>/dev/null) || true
check [ "$code" = 502 ] "yes to an HTTP/1.1-only listener: $code"
# (nginx refuses the handshake: no protocol in common.)
wait_log_count 'http-error status=502 reason="server connection failed: tls: .*application protocol"' 1
# The first request of its service: the body comes with the head (no
# Expect) and waits for the handshake in the client's input.
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -H 'Expect:' \
    --data-binary @"$T/www/one.bin" "http://127.0.0.1:$PU/upload") || true
check [ "$code" = 200 ] "1 MB upload over TLS h2: $code"

wait_grep "$T/nginx/logs/pr.log" 'POST /upload' 5 || true
log=$(cat "$T/nginx/logs/pr.log")
info "nginx saw: $(tr '\n' '|' <<<"$log")"
check [ "$(grep -c "^$N2 HTTP/2.0 \"GET /small.bin" <<<"$log")" = 2 ] "the h2 listener saw HTTP/2.0 twice"
check [ "$(grep -c "^$N1 HTTP/1.1 \"GET /small.bin" <<<"$log")" = 3 ] "the HTTP/1.1 listener saw HTTP/1.1 three times"
check [ "$(grep -c "^$N2 HTTP/1.1" <<<"$log")" = 0 ] "no HTTP/1.1 on the h2 listener"
f=$(grep "^$N2 HTTP/2.0 \"POST /upload" <<<"$log" | awk '{print $NF}')
check [ "$(sha256_of "$f" 2>/dev/null)" = "$(sha256_of "$T/www/one.bin")" ] "the upload arrived whole"
wait_log_count "http-request .*server=127.0.0.1:$N2 .*server-proto=h2" 3
check [ "$(log_count "http-request .*server=127.0.0.1:$N1 .*status=200 .*server-proto=h2")" = 0 ] "no server-proto=h2 to the HTTP/1.1 listener"

# Reloads: y2 twice with a CA that does not verify nginx (502: a
# handshake of its own, never a connection a good CA made), then with the
# good one again (200). A context freed by one reload and another allocated at its
# address by the next must not make them alike.
reloads=0
for i in 1 2 3 4 5 6; do
    for ca in other-ca other-ca origin-ca; do
        write_http_service y2 "$PY2" "$N2" "<http server-h2=\"yes\" server-idle=\"5m\"/><tls side=\"server\" mode=\"originate\" ca=\"$P/$ca.pem\" sni=\"origin.test\"/>"
        kill -HUP "$PROXYD_PID"
        reloads=$((reloads + 1))
        wait_log_count 'reload done' "$reloads"
        code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PY2/small.bin" 2>/dev/null) || true
        if [[ $ca == other-ca ]]; then
            check [ "$code" = 502 ] "reload $i, a CA that does not verify nginx: $code"
        else
            check [ "$code" = 200 ] "reload $i, the good CA again: $code"
        fi
    done
done
http_done
