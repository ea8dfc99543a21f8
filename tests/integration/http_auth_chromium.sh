#!/usr/bin/env bash
# A browser's Negotiate through proxyd: Debian's chromium, headless, with
# alice's Kerberos ticket (auth_lib.sh's KDC, kinit alice into the test's
# ccache), fetches a page through a forward-mode http service with
# <auth authenticator="corp" methods="negotiate"> (--proxy-server, the
# loopback bypass removed, --auth-server-allowlist naming the proxy).
# Chromium answers the 407 with a SPNEGO token for HTTP/localhost, proxyd
# accepts it: the page's text is in --dump-dom's output and proxyd logs
# the request with user=alice auth=negotiate. (Chromium offers its default
# credentials to a proxy whatever the allowlist says, which governs
# servers: with --auth-server-allowlist=nothere it passes too; without
# a ticket, kdestroy, it gets the 407 page and this test fails.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/auth_lib.sh"
need_cmds nginx curl chromium krb5kdc kdb5_util kadmin.local kinit
setup

printf '<html><body><p id="x">negotiated-page-%s</p></body></html>\n' "$$" >"$T/www/page.html"
start_nginx
start_kdc

write_proxyd_conf "" "<authenticators>
    <kerberos name=\"corp\" keytab=\"$K/http.keytab\" service=\"HTTP\"/>
  </authenticators>"
free_port PF
write_http_service fwd "$PF" 0 "
<auth authenticator=\"corp\" methods=\"negotiate\" required=\"yes\"/>
<http/>" forward
start_proxyd

# without a ticket's answer: 407 Negotiate (what chromium must answer)
code=$(curl -sS --max-time 10 -D "$T/h407" -o /dev/null -w '%{http_code}' -x "http://localhost:$PF" \
    "http://127.0.0.1:$NGINX_PORT/page.html")
assert_eq "$code" 407 "no credentials"
assert_grep "$T/h407" '^Proxy-Authenticate: Negotiate' "407 offers Negotiate"

info "chromium --headless through the proxy, Negotiate with alice's ticket"
mkdir -p "$T/chromium"
rc=0
timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$T/chromium" --disable-dev-shm-usage \
    --proxy-server="http://localhost:$PF" --proxy-bypass-list='<-loopback>' \
    --auth-server-allowlist='localhost' --auth-negotiate-delegate-allowlist='localhost' \
    --dump-dom "http://127.0.0.1:$NGINX_PORT/page.html" >"$T/dom.html" 2>"$T/chromium.err" || rc=$?
info "chromium rc=$rc, $(wc -c <"$T/dom.html") bytes of DOM"
grep -q "negotiated-page-$$" "$T/dom.html" ||
    fail "chromium did not get the page: $(head -c 600 "$T/dom.html"); stderr: $(tail -n 15 "$T/chromium.err")"
wait_grep "$PROXYD_LOG" 'http-request .* path=/page\.html status=200 .* user=alice auth=negotiate' "$ASYNC_WAIT" ||
    fail "no http-request line with user=alice auth=negotiate: $(grep http-request "$PROXYD_LOG" | tail -n 3)"
assert_log 'auth authenticator=corp method=negotiate user=alice result=ok'
info "ok"
