#!/usr/bin/env bash
# HTTP responses by status code and refusals by zone pair, counted exactly:
# - proxyd_http_responses_total{service=,analyser=,code=} per code: 200,
#   304, 404 from nginx, 403 from the service's own policy and from its
#   <servers> in forward mode; the status-class histogram still counts them;
# - proxyd_denied_total{service=,analyser=,client_zone=,server_zone=,reason=}:
#   clients of a zone the service does not allow (reason acl; the server's
#   zone not looked up yet: "-"), a forward request to a server of a zone
#   it does not allow (reason server, both zones), and the http policy's
#   denials (reason analyser), max-sessions (no zone looked up: "-");
# - /api/services lists the same in zone_denials;
# - promtool check metrics passes on the scrape.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl promtool
setup

make_file 10k.bin 10K
start_nginx
free_port PW
free_port PC
free_port PF
write_proxyd_conf '' '<zones>
    <zone name="loopback" addresses="127.0.0.0/8">
      <zone name="one" addresses="127.0.0.1"/>
      <zone name="two" addresses="127.0.0.2"/>
      <zone name="three" addresses="127.0.0.3"/>
    </zone>
  </zones>'
write_http_service web "$PW" "$NGINX_PORT" '
<http><url host="*" path="/secret/*" action="deny" status="403"/></http>'
write_service closed "$PC" "$NGINX_PORT" "" "zone:one"
write_http_service fwd "$PF" 0 '
<servers allow="zone:one"/>
<http><request method="GET" action="accept"/></http>' forward
start_proxyd
U=http://127.0.0.1:$PW

get() { # EXPECTED_CODE CURL_ARGS...: one request on its own connection
    local want=$1 code
    shift
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@")
    assert_eq "$code" "$want" "curl $*"
}
etag=$(curl -s -I --max-time 5 "$U/10k.bin" | sed -n 's/^[Ee][Tt]ag: *\([^\r]*\).*/\1/p')
[[ -n $etag ]] || fail "nginx gave no ETag"
for i in 1 2 3 4 5; do get 200 "$U/10k.bin"; done
for i in 1 2; do get 304 -H "If-None-Match: $etag" "$U/10k.bin"; done
for i in 1 2 3; do get 404 "$U/none-$i"; done
for i in 1 2 3 4; do get 403 "$U/secret/$i"; done
# from zone two (3 times) and zone three (once): refused at accept
for i in 1 2 3; do curl -s -o /dev/null --max-time 3 --interface 127.0.0.2 "http://127.0.0.1:$PC/" || true; done
curl -s -o /dev/null --max-time 3 --interface 127.0.0.3 "http://127.0.0.1:$PC/" || true
# from zone one to a server in zone three: 403 per request
for i in 1 2; do get 403 -x "http://127.0.0.1:$PF" "http://127.0.0.3:$NGINX_PORT/f-$i"; done

W='service="web",analyser="http"'
F='service="fwd",analyser="http"'
C='service="closed",analyser="plug"'
assert_metric eq proxyd_http_responses_total "$W,code=\"200\"" 6	# HEAD + 5 GETs
assert_metric eq proxyd_http_responses_total "$W,code=\"304\"" 2
assert_metric eq proxyd_http_responses_total "$W,code=\"404\"" 3
assert_metric eq proxyd_http_responses_total "$W,code=\"403\"" 4
assert_metric eq proxyd_http_responses_total "$F,code=\"403\"" 2
assert_metric eq proxyd_http_responses_total "" 17
# the names that were there keep working
assert_metric eq proxyd_http_request_duration_seconds_count "$W,code=\"2xx\"" 6
assert_metric eq proxyd_http_request_duration_seconds_count "$W,code=\"3xx\"" 2
assert_metric eq proxyd_http_request_duration_seconds_count "$W,code=\"4xx\"" 7
assert_metric eq proxyd_sessions_denied_total "$C,reason=\"acl\"" 4

assert_metric eq proxyd_denied_total "$C,client_zone=\"two\",server_zone=\"-\",reason=\"acl\"" 3
assert_metric eq proxyd_denied_total "$C,client_zone=\"three\",server_zone=\"-\",reason=\"acl\"" 1
assert_metric eq proxyd_denied_total "$F,client_zone=\"one\",server_zone=\"three\",reason=\"server\"" 2
assert_metric eq proxyd_denied_total "$W,client_zone=\"one\",server_zone=\"-\",reason=\"analyser\"" 4
assert_metric eq proxyd_denied_total "" 10

# max-sessions refuses before any zone is looked up: "-" for both (it
# named the first zone, the session's zone index left at 0)
sed -i 's|<limits />|<limits max-sessions="2"/>|' "$PROXYD_CONF"
grep -q 'max-sessions="2"' "$PROXYD_CONF" || fail "no max-sessions in $PROXYD_CONF"
kill -HUP "$PROXYD_PID"
assert_log "reload done" 10
python3 - "$PW" "$PW" <<'PY' &
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(p))) for p in sys.argv[1:]]
time.sleep(8)
PY
track_pid $!
assert_metric eq proxyd_sessions_active '' 2
curl -s -o /dev/null --max-time 3 "$U/10k.bin" || true
assert_metric eq proxyd_denied_total "$W,client_zone=\"-\",server_zone=\"-\",reason=\"max-sessions\"" 1
assert_metric eq proxyd_denied_total "" 11
assert_log 'client-zone=- server-zone=- .* end=denied: max-sessions$'

# the status page's JSON lists the same
curl -s --max-time 3 "http://127.0.0.1:$ADMIN_PORT/api/services" | python3 -c '
import json, sys
got = sorted((z["service"], z["client_zone"], z["server_zone"], z["reason"], z["count"])
             for z in json.load(sys.stdin)["zone_denials"])
want = sorted([("closed", "two", "-", "acl", 3), ("closed", "three", "-", "acl", 1),
               ("fwd", "one", "three", "server", 2), ("web", "one", "-", "analyser", 4),
               ("web", "-", "-", "max-sessions", 1)])
assert got == want, got
' || fail "/api/services zone_denials differ"

metrics_fetch >"$T/metrics.txt"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$T/promtool.out")"
info "promtool: $(wc -l <"$T/promtool.out") remarks"
http_done
