#!/usr/bin/env bash
# Scanning with an HTTP/2 server (server-h2="yes"): the response head came
# as fields, the scanner (c-icap over clamd) is shown the one the client
# gets. EICAR from an nginx h2 listener is refused (403 naming it), a clean
# file passes whole; an EICAR upload never reaches the server.
# On main the attribute is unknown: the service does not load.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds curl nginx sha256sum
setup
need_scanner
scan_dirs
write_eicar "$T/www/eicar.com"
make_file clean.bin 200K
(cd "$T/www" && sigtool --md5 eicar.com) >"$W/db/test.hdb"
start_scanner

free_port H2PORT
free_port OKPORT
mkdir -p "$T/nginx/tmp/h2body"
NGINX_SERVERS="
    log_format h2 '\$server_protocol \"\$request\" \$status';
    server {
        listen 127.0.0.1:$H2PORT http2;
        access_log $T/nginx/logs/h2.log h2;
        root $T/www;
        location /up {
            client_body_in_file_only on;
            client_body_temp_path $T/nginx/tmp/h2body;
            proxy_pass http://127.0.0.1:$OKPORT/ok;
        }
    }
    server { listen 127.0.0.1:$OKPORT; access_log off; location / { return 200 \"ok\\n\"; } }"
start_nginx
wait_listen "$H2PORT" 5 "$NGINX_PID" || fail "nginx h2 listener"

free_port PH
write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
  </scanners>"
write_http_service web "$PH" "$H2PORT" '<http server-h2="yes"/><scan scanner="av" direction="both"/>'
start_proxyd

code=$(curl -sS --max-time 20 -o "$T/e.out" -w '%{http_code}' "http://127.0.0.1:$PH/eicar.com") || true
check [ "$code" = 403 ] "EICAR from the h2 server: $code"
check grep -q "virus found: eicar\.com\.UNOFFICIAL" "$T/e.out" "the page names the threat"
code=$(curl -sS --max-time 20 -o "$T/c.out" -w '%{http_code}' "http://127.0.0.1:$PH/clean.bin") || true
check [ "$code" = 200 ] "a clean file: $code"
check [ "$(sha256_of "$T/c.out")" = "$(sha256_of "$T/www/clean.bin")" ] "the clean body whole"
code=$(curl -sS --max-time 20 -o "$T/u.out" -w '%{http_code}' --data-binary @"$T/www/eicar.com" \
    "http://127.0.0.1:$PH/up") || true
check [ "$code" = 403 ] "an EICAR upload: $code"
check [ "$(grep -c '^HTTP/2.0 "GET /eicar.com' "$T/nginx/logs/h2.log")" = 1 ] "nginx served EICAR over h2"
# Its head went (the stream is reset on the verdict), its body never.
check [ "$(grep -c 'POST /up.* 200$' "$T/nginx/logs/h2.log")" = 0 ] "nginx did not take the EICAR upload"
check [ -z "$(grep -rl EICAR "$T/nginx/tmp/h2body" 2>/dev/null)" ] "the EICAR body never reached nginx"
# A clean upload goes whole.
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' --data-binary @"$T/www/clean.bin" \
    "http://127.0.0.1:$PH/up") || true
check [ "$code" = 200 ] "a clean upload: $code"
f=$(grep -rl . "$T/nginx/tmp/h2body" 2>/dev/null | head -1)
check [ "$(sha256_of "$f" 2>/dev/null)" = "$(sha256_of "$T/www/clean.bin")" ] "the clean upload whole"
http_done
