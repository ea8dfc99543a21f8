#!/usr/bin/env bash
# http analyser policy: request and response header actions (drop, change,
# insert) seen at a recording echo origin and at the client, hop-by-hop
# headers removed, Via and X-Forwarded-For (append and replace), method
# denial (405, log line, counter, origin never sees it), URL denial (403),
# an error template directory (@STATUS@ @SESSION@), and the limits:
# max-url 414, max-header-bytes 431, max-body 413.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds curl python3
setup

ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" echo
mkdir -p "$T/errors"
cat >"$T/errors/403.html" <<'EOF'
<html><body>custom page: status=@STATUS@ reason=@REASON@ session=@SESSION@ at=@ detail=@DETAIL@</body></html>
EOF
start_py_server SILENT <<'PYEOF'
def handle(c):
    c.settimeout(5)
    try:
        while c.recv(4096):
            pass
    except OSError:
        pass
PYEOF
free_port P
free_port P2
free_port P3
write_proxyd_conf
write_http_service pol "$P" "$ORIG" "
<http via=\"yes\" x-forwarded-for=\"append\">
  <limits max-line=\"1k\" max-url=\"256\" max-header-bytes=\"2k\" max-body=\"1000\"/>
  <request method=\"GET HEAD POST\" action=\"accept\"/>
  <request method=\"*\" action=\"deny\" status=\"405\"/>
  <url path=\"/admin/*\" action=\"deny\" status=\"403\"/>
  <request-header name=\"X-Drop-Me\" action=\"drop\"/>
  <request-header name=\"X-Change-Me\" action=\"change\" value=\"changed\"/>
  <request-header name=\"X-Inserted\" action=\"insert\" value=\"ins-value\"/>
  <response-header name=\"X-Resp-Drop\" action=\"drop\"/>
  <response-header name=\"Server\" action=\"drop\"/>
  <response-header name=\"X-Resp-Change\" action=\"change\" value=\"resp-changed\"/>
  <response-header name=\"X-Resp-Insert\" action=\"insert\" value=\"resp-ins\"/>
  <errors dir=\"$T/errors\"/>
</http>"
write_http_service pol2 "$P2" "$ORIG" '<http via="no" x-forwarded-for="replace"/>'
write_http_service slow "$P3" "$SILENT" '<http><limits request-timeout="1s" response-timeout="1s"/></http>'
start_proxyd

# hdr JSONLINE NAME: value(s) of a request header the origin saw, '|'-joined
hdr() {
    python3 -c 'import json,sys
r = json.loads(sys.argv[1])
print("|".join(v for n, v in r["headers"] if n.lower() == sys.argv[2].lower()))' "$1" "$2"
}
last_req() { grep -F "\"target\": \"$1\"" "$ORIG_LOG" | tail -n 1; }

# Denied requests end their session (no keep-alive after a denial), so no
# sentinel can follow them on the same connection.  Instead:
# denied_nothing_sent PATH: wait for the session-end line of the session
# that carried the (denied) request for PATH, found by its session id (the
# same session: no reordering between workers), and check that it sent no
# byte to the server.
denied_nothing_sent() {
    local path=$1 sid line
    assert_log " #[0-9]+ http-request .* path=$path status=[0-9]+ "
    line=$(grep -E " #[0-9]+ http-request .* path=$path status=[0-9]+ " "$PROXYD_LOG" | tail -n 1)
    sid=$(sed -nE 's/.* #([0-9]+) http-request.*/\1/p' <<<"$line")
    assert_log " #$sid session-end service=pol "
    line=$(grep -E " #$sid session-end service=pol " "$PROXYD_LOG" | tail -n 1)
    check [ "$(kv "$line" to-server)" = 0 ] "the session of the denied request for $path sent bytes to the server: $line"
}
# origin_saw PATH: the origin logged a request for PATH (it logs each request
# before answering it: a 200 through proxyd means its line is there; waited
# for all the same, bounded)
origin_saw() {
    wait_grep "$ORIG_LOG" "\"target\": \"$1\"" 3 || fail "the origin did not log the request for $1"
}

# --- request and response header actions
curl -sS --max-time 10 -D "$T/h1" -o "$T/b1" \
    -H 'X-Drop-Me: secret' -H 'X-Change-Me: original' -H 'X-Keep: kept' \
    -H 'X-Forwarded-For: 10.1.1.1' -H 'Connection: keep-alive, X-Hop' -H 'X-Hop: 1' \
    -H 'Keep-Alive: timeout=5' -H 'Proxy-Connection: keep-alive' -H 'TE: trailers' \
    "http://127.0.0.1:$P/headers" || fail "GET /headers failed"
rec=$(last_req /headers)
[[ -n $rec ]] || fail "origin did not see /headers"
check [ "$(hdr "$rec" X-Drop-Me)" = "" ] "request header X-Drop-Me was not dropped"
check [ "$(hdr "$rec" X-Change-Me)" = "changed" ] "request header X-Change-Me: got '$(hdr "$rec" X-Change-Me)'"
check [ "$(hdr "$rec" X-Inserted)" = "ins-value" ] "request header X-Inserted: got '$(hdr "$rec" X-Inserted)'"
check [ "$(hdr "$rec" X-Keep)" = "kept" ] "request header X-Keep: got '$(hdr "$rec" X-Keep)'"
check [ "$(hdr "$rec" X-Forwarded-For)" = "10.1.1.1, 127.0.0.1" ] "X-Forwarded-For append: got '$(hdr "$rec" X-Forwarded-For)'"
check [ "$(hdr "$rec" Via)" = "1.1 proxyd" ] "request Via: got '$(hdr "$rec" Via)'"
for h in X-Hop Keep-Alive Proxy-Connection TE; do
    check [ "$(hdr "$rec" $h)" = "" ] "hop-by-hop request header $h was forwarded"
done
check [ "$(hdr "$rec" Host)" = "127.0.0.1:$P" ] "Host forwarded as is: got '$(hdr "$rec" Host)'"
tr -d '\r' <"$T/h1" >"$T/h1.txt"
check grep -q '^HTTP/1.1 200 ' "$T/h1.txt" "status of /headers"
check grep -qi '^X-Resp-Change: resp-changed$' "$T/h1.txt" "response header X-Resp-Change not changed"
check grep -qi '^X-Resp-Insert: resp-ins$' "$T/h1.txt" "response header X-Resp-Insert not inserted"
check grep -qi '^Via: 1.1 proxyd$' "$T/h1.txt" "no Via on the response"
check bash -c "! grep -qi '^X-Resp-Drop:' '$T/h1.txt'" "response header X-Resp-Drop was not dropped"
check bash -c "! grep -qi '^Server:' '$T/h1.txt'" "response header Server was not dropped"
# header names match case-insensitively
curl -sS --max-time 10 -o /dev/null -H 'x-drop-me: 1' -H 'x-CHANGE-me: o' "http://127.0.0.1:$P/case" || fail "GET /case"
rec=$(last_req /case)
check [ "$(hdr "$rec" X-Drop-Me)" = "" ] "lower-case x-drop-me was not dropped"
check [ "$(hdr "$rec" X-Change-Me)" = "changed" ] "x-CHANGE-me not changed"

# --- via=no, x-forwarded-for=replace
curl -sS --max-time 10 -D "$T/h2" -o /dev/null -H 'X-Forwarded-For: 10.9.9.9' "http://127.0.0.1:$P2/replace" || fail "GET /replace"
rec=$(last_req /replace)
check [ "$(hdr "$rec" X-Forwarded-For)" = "127.0.0.1" ] "X-Forwarded-For replace: got '$(hdr "$rec" X-Forwarded-For)'"
check [ "$(hdr "$rec" Via)" = "" ] "Via sent with via=no"
check bash -c "! grep -qi '^Via:' '$T/h2'" "Via on the response with via=no"

# --- method denial
n0=$(wc -l <"$ORIG_LOG")
den0=$(http_counter denied)
code=$(curl -sS --max-time 10 -D "$T/h405" -o "$T/b405" -w '%{http_code}' -X DELETE "http://127.0.0.1:$P/thing")
assert_eq "$code" 405 "DELETE status"
# RFC 9110 15.5.6: what the policy accepts instead (its rule, then nothing
# of the built-in list: the catch-all replaces it)
check grep -q $'^Allow: GET, HEAD, POST\r$' "$T/h405" "405 Allow: $(tr '\r\n' '  ' <"$T/h405")"
assert_log 'http-error status=405 reason="method denied by policy"'
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=DELETE host=127\.0\.0\.1 path=/thing status=405 .* verdict=deny "
assert_metric ge proxyd_analyser_events_total 'event="denied"' $((den0 + 1))
check grep -q '405' "$T/b405" "405 page has no status"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X PATCH --data 'x' "http://127.0.0.1:$P/thing2")
assert_eq "$code" 405 "PATCH status"
denied_nothing_sent /thing
denied_nothing_sent /thing2
# a sentinel the policy accepts, after the denied ones: once the origin has
# logged it, it has logged anything proxyd passed on before it
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/after-405")
assert_eq "$code" 200 "GET /after-405 (sentinel)"
origin_saw /after-405
check [ "$(wc -l <"$ORIG_LOG")" = "$((n0 + 1))" ] "origin saw a denied method: $(tail -n 2 "$ORIG_LOG" | cut -c1-100)"

# --- URL denial with the template page
code=$(curl -sS --max-time 10 -o "$T/b403" -w '%{http_code}' "http://127.0.0.1:$P/admin/secret")
assert_eq "$code" 403 "URL denial status"
assert_log 'http-request .* path=/admin/secret status=403 '
line=$(grep -E 'http-request .* path=/admin/secret status=403 ' "$PROXYD_LOG" | tail -n 1)
[[ -n $line ]] || fail "no http-request line for /admin/secret"
sid=$(sed -nE 's/.* #([0-9]+) http-request.*/\1/p' <<<"$line")
check grep -qF "custom page: status=403 reason=Forbidden session=$sid at=@ detail=URL denied by policy" "$T/b403" \
    "template page: $(cat "$T/b403") (session $sid)"
denied_nothing_sent /admin/secret
# this request is the sentinel
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/public/admin/x")
assert_eq "$code" 200 "a path not under /admin/"
origin_saw /public/admin/x
check bash -c "! grep -q '/admin/secret' '$ORIG_LOG'" "origin saw the denied URL"

# --- limits
long=$(printf 'a%.0s' $(seq 1 300))
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/$long")
assert_eq "$code" 414 "max-url"
assert_log 'http-error status=414 reason="URI too long"'
args=()
for i in $(seq 1 40); do args+=(-H "X-Fill-$i: 0123456789012345678901234567890123456789"); done
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "${args[@]}" "http://127.0.0.1:$P/many")
assert_eq "$code" 431 "max-header-bytes"
assert_log 'http-error status=431 '
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "X-Long: $(printf 'b%.0s' $(seq 1 1100))" "http://127.0.0.1:$P/longline")
assert_eq "$code" 431 "max-line on a header line"
head -c 2000 /dev/urandom >"$T/2k.bin"
head -c 1000 /dev/urandom >"$T/1k.bin"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --data-binary @"$T/2k.bin" "http://127.0.0.1:$P/bigbody")
assert_eq "$code" 413 "max-body with Content-Length"
assert_log 'http-error status=413 reason="request body over max-body"'
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --data-binary @"$T/1k.bin" "http://127.0.0.1:$P/okbody")
assert_eq "$code" 200 "a body of exactly max-body"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$T/2k.bin" "http://127.0.0.1:$P/bigchunked" 2>/dev/null || true)
check [ "$code" = 413 ] "max-body with a chunked body: got '$code', expected 413"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$T/1k.bin" "http://127.0.0.1:$P/okchunked")
assert_eq "$code" 200 "a chunked body of exactly max-body"
denied_nothing_sent /bigbody
# /okbody and /okchunked, sent after /bigbody, are the sentinels
origin_saw /okbody
origin_saw /okchunked
check bash -c "! grep -q '/bigbody' '$ORIG_LOG'" "origin saw the over-limit Content-Length request"

# --- timeouts: an incomplete head gets 408, a silent server 504
to0=$(http_counter timeouts)
r=$(raw_send "$P3" "GET /slow HTTP/1.1\r\nHost: x\r\n" --timeout 4)
check [ "${r%% bytes=*}" = "statuses=408 closed=yes reset=no" ] "incomplete head past request-timeout: $r"
assert_log 'http-error status=408 reason="no complete request head within request-timeout"'
# the request line and the session line agree: the client failed
assert_log 'http-request .* path=- status=408 .* verdict=error '
assert_log 'session-end service=slow .* verdict=error .* by=client-fail phase=data end=request-timeout: http 408: '
code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P3/silent" || true)
assert_eq "$code" 504 "silent server past response-timeout"
assert_log 'http-error status=504 reason="no response within response-timeout"'
assert_metric ge proxyd_analyser_events_total 'event="timeouts"' $((to0 + 2))
http_done
