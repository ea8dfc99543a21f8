#!/usr/bin/env bash
# An http session behind a slow reader of a fast origin holds at most about
# `buffer` per direction (docs/CONFIG.md: limits/@buffer): what it read from
# the server and has not yet written to the client counts together, as for
# plug. 40 clients each read 1 byte/s of a 20 MB file through an http
# service (buffer="64k", one worker); proxyd's RSS growth per
# stalled session must stay under 1.5 x buffer + 32 KB (before the fix an
# http session held 168 KB at 64k: server input and client output were each
# filled to the limit).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

N=40
BUF_KB=${BUF_KB:-64}
make_file big.bin 20M
start_nginx
free_port PH
write_proxyd_conf "buffer=\"${BUF_KB}k\" idle-timeout=\"2m\""
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service web "$PH" "$NGINX_PORT" '<http/>'
start_proxyd

per_http=$(rss_per_slow_reader "$PH" "$N" /big.bin)
info "RSS per stalled session with buffer=${BUF_KB}k: http ${per_http} KB"
limit=$((BUF_KB * 3 / 2 + 32))
# ASan's quarantine and shadow memory swamp RSS: the bound is read in the
# normal build only (the sanitizer run still checks the bytes below).
if http_sanitized; then
    info "sanitizer build: RSS bound not checked"
else
    assert_lt "$per_http" "$limit" "http KB per slow-reader session (buffer ${BUF_KB}k)"
fi
# and the reader still gets the bytes: a complete fetch after all that
code=$(curl -sS --max-time 30 -o "$T/got.bin" -w '%{http_code}' "http://127.0.0.1:$PH/big.bin")
assert_eq "$code" 200 "a full fetch through the http service"
assert_eq "$(sha256_of "$T/got.bin")" "$(sha256_of "$T/www/big.bin")" "body of the full fetch"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
