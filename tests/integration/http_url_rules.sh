#!/usr/bin/env bash
# url rules judge the path the origin serves (issue 35): /%61dmin/,
# /x/../admin/ and //admin/ are /admin/ to nginx, so a rule on /admin/*
# refuses them, over HTTP/1.1 and h2c; the server is sent the canonical
# path (dot segments removed, unreserved characters decoded, "//" merged;
# merge-slashes="no" keeps "//") with the query as the client wrote it;
# what cannot be judged as every server reads it (an encoded '/', '\', NUL,
# ".." above the root, a bad percent-encoding, a #fragment) is answered
# 400 with an http-error line that says why, and never reaches the server;
# "..;x" too (Tomcat's ".."), and /admin;x/ is judged as Tomcat's /admin/.
# A path pattern never sees the query ("*.php" and /a.php?x=1), query=
# does, fully percent-decoded ("..%2F" is "../"), a query it cannot
# decode refused; a path longer than the log's copy of it is judged whole.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

mkdir -p "$T/www/admin" "$T/www/pub"
printf 'ADMIN-SECRET\n' >"$T/www/admin/secret.txt"
printf 'PUBLIC-A\n' >"$T/www/pub/a.txt"
printf 'PHP-SOURCE\n' >"$T/www/a.php"
start_nginx
ECHO_LOG=$T/echo.jsonl
start_origin ECHO "$ECHO_LOG" echo

RULES='<url path="/admin/*" action="deny"/>
  <url path="*.php" action="deny"/>
  <url path="/search" query="*debug=*" action="deny"/>
  <url path="/dl" query="*file=../*" action="deny"/>
  <url path="/dl2" query="*file=..%2F*" action="deny"/>'
free_port P
free_port PE
free_port PN
write_proxyd_conf
write_http_service web "$P" "$NGINX_PORT" "<http h2c=\"yes\">
  $RULES
</http>"
write_http_service echo "$PE" "$ECHO" "<http h2c=\"yes\">
  $RULES
</http>"
write_http_service nomerge "$PN" "$ECHO" '<http merge-slashes="no"/>'
start_proxyd

# get PORT TARGET [curl args]: the status of GET TARGET sent as written
get() {
    local port=$1 target=$2
    shift 2
    curl -sS --max-time 10 --path-as-is -o "$T/body" -w '%{http_code}' "$@" \
        "http://127.0.0.1:$port$target" || true
}
body_has() { grep -qF -- "$1" "$T/body"; }

info "the spellings of /admin/ that nginx serves as /admin/ are refused"
for t in /admin/secret.txt /%61dmin/secret.txt /x/../admin/secret.txt \
    //admin/secret.txt /pub/./%2e%2E/%61dmin//sec%72et.txt /%2e/admin/secret.txt; do
    code=$(get "$P" "$t")
    check [ "$code" = 403 ] "through proxyd, $t: $code"
    check bash -c "! grep -q ADMIN-SECRET '$T/body'" "through proxyd, $t: the secret was served"
    code=$(get "$P" "$t" --http2-prior-knowledge)
    check [ "$code" = 403 ] "through proxyd over h2c, $t: $code"
    check bash -c "! grep -q ADMIN-SECRET '$T/body'" "through proxyd over h2c, $t: the secret was served"
done
# the log names the path judged (each of the 12 refusals), and the rule
assert_log 'http-error status=403 reason="URL denied by policy" rule=web\.xml:[0-9]+'
wait_log_count 'http-request .* path=/admin/secret\.txt status=403 ' 12
assert_no_grep "$PROXYD_LOG" 'http-request .* path=[^ ]*(%61|\.\./|//)' "a spelling, not the path judged, in the log"
assert_log 'http-request client=[^ ]+ method=GET host=[^ ]+ path=/admin/secret\.txt status=403 .* verdict=deny .* rule=web\.xml:[0-9]+$'
assert_log 'http-request client=[^ ]+ method=GET host=[^ ]+ path=/admin/secret\.txt status=403 .* rule=web\.xml:[0-9]+ proto=h2 stream=1$'
# nginx was never asked for it through proxyd (a sentinel after them,
# once nginx has logged it); directly, it serves each
code=$(get "$P" '/pub/a.txt?sentinel1')
assert_eq "$code" 200 "sentinel"
wait_grep "$T/nginx/logs/access.log" 'sentinel1' 5 || fail "nginx did not log the sentinel"
assert_no_grep "$T/nginx/logs/access.log" 'secret' "nginx was asked for the secret through proxyd"
for t in /admin/secret.txt /%61dmin/secret.txt /x/../admin/secret.txt //admin/secret.txt; do
    code=$(get "$NGINX_PORT" "$t")
    check [ "$code" = 200 ] "nginx directly, $t: $code"
    check body_has ADMIN-SECRET "nginx directly, $t: not the secret"
done
# allowed spellings go through, to the file the origin would serve
for t in /pub/a.txt /pub/./a.txt /x/../pub/a.txt //pub//a.txt /%70ub/%61.txt '/pub/a.txt?a.php'; do
    code=$(get "$P" "$t")
    check [ "$code" = 200 ] "through proxyd, $t: $code"
    check body_has PUBLIC-A "through proxyd, $t: $(head -c 100 "$T/body")"
done

info "path parameters: /admin;x/ is Tomcat's /admin/, ..; a dot-segment"
for t in '/admin;x/secret.txt' '/admin;/secret.txt' '/%61dmin;jsessionid=1/secret.txt'; do
    code=$(get "$P" "$t")
    check [ "$code" = 403 ] "through proxyd, $t: $code"
    code=$(get "$P" "$t" --http2-prior-knowledge)
    check [ "$code" = 403 ] "through proxyd over h2c, $t: $code"
done
code=$(get "$PE" '/pub/a.txt;jsessionid=1')
assert_eq "$code" 200 "/pub/a.txt;jsessionid=1"
check grep -qF '"target": "/pub/a.txt;jsessionid=1"' "$ECHO_LOG" \
    "the parameters go on: $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"
info "what is sent on: the canonical path, the query as written"
code=$(get "$PE" '/pub/./x/..//%7e%7Euser/%c3%a9%2e/./?q=%7e/../%2f&r=a.php')
assert_eq "$code" 200 "echo origin"
check grep -qF '"target": "/pub/~~user/%C3%A9./?q=%7e/../%2f&r=a.php"' "$ECHO_LOG" \
    "echo origin saw: $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"
assert_log 'http-request .* path=/pub/~~user/%C3%A9\./\?q=%7e/\.\./%2f&r=a\.php status=200 '
code=$(get "$PE" '/pub/./h2//%61?x=%61' --http2-prior-knowledge)
assert_eq "$code" 200 "echo origin over h2c"
check grep -qF '"target": "/pub/h2/a?x=%61"' "$ECHO_LOG" "echo origin saw (h2c): $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"
# merge-slashes="no": "//" judged and sent as written, dots still removed
code=$(get "$PN" '//a//./b/../c//')
assert_eq "$code" 200 "merge-slashes=no"
check grep -qF '"target": "//a//c//"' "$ECHO_LOG" "merge-slashes=no, the origin saw: $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"

info "path rules never see the query; query= does"
for t in '/a.php' '/a.php?x=1' '/a.php?' '/%61.php?x' '/search?q=1&debug=1' '/search?deb%75g=1'; do
    code=$(get "$PE" "$t")
    check [ "$code" = 403 ] "$t: $code"
done
for t in '/search?q=1' '/search' '/b.html?f=a.php'; do
    code=$(get "$PE" "$t")
    check [ "$code" = 200 ] "$t: $code"
done
info "query= reads the query decoded as the application does (%2F is /)"
for t in '/dl?file=../etc/passwd' '/dl?file=..%2Fetc%2Fpasswd' \
    '/dl?file=%2e%2E%2fetc' '/dl?a=1&file%3D..%2F' '/dl2?file=../etc' \
    '/dl2?file=..%2fetc' '/search?q=%3Cx%3E%27&debug%3D1' '/search?x+debug=1'; do
    code=$(get "$PE" "$t")
    check [ "$code" = 403 ] "$t: $code"
    code=$(get "$PE" "$t" --http2-prior-knowledge)
    check [ "$code" = 403 ] "h2c $t: $code"
done
code=$(get "$PE" '/dl?file=a%2Fb%3C%27+c')
assert_eq "$code" 200 "/dl?file=a%2Fb%3C%27+c"
check grep -qF '"target": "/dl?file=a%2Fb%3C%27+c"' "$ECHO_LOG" \
    "the query goes on as written: $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"
# without a query= rule the query is not read: a bad one goes on
code=$(get "$PN" '/x?a=%zz%00')
assert_eq "$code" 200 "no query= rule, /x?a=%zz%00"
check grep -qF '"target": "/x?a=%zz%00"' "$ECHO_LOG" \
    "no query= rule: $(tail -n 1 "$ECHO_LOG" | cut -c1-200)"
# a path longer than the log line's copy of it (255 bytes) is judged
# whole: its end still matches
long=/$(printf 'a%.0s' $(seq 1 300)).php
code=$(get "$PE" "$long")
check [ "$code" = 403 ] "a 305-byte path ending in .php: $code"

info "what cannot be judged is refused (400, the reason logged), h1 and h2c"
n0=$(wc -l <"$ECHO_LOG")
while IFS='|' read -r t why; do
    code=$(get "$PE" "$t")
    check [ "$code" = 400 ] "$t: $code"
    assert_log "http-error status=400 reason=\"$why\""
    code=$(get "$PE" "$t" --http2-prior-knowledge)
    check [ "$code" = 400 ] "h2c $t: $code"
done <<'EOF'
/admin%2Fsecret.txt|encoded slash in path
/pub%2fa.txt|encoded slash in path
/pub\a.txt|backslash in path
/pub%5Ca.txt|backslash in path
/pub/a.txt%00|NUL in path
/pub/%zz|invalid percent-encoding in path
/pub/%4|invalid percent-encoding in path
/../admin/secret.txt|dot-segment above the root
/%2e%2e/admin/secret.txt|dot-segment above the root
/pub/../../admin/secret.txt|dot-segment above the root
/x/..;/admin/secret.txt|dot-segment with parameters
/pub/.;x/a.txt|dot-segment with parameters
/x/%2e%2E;/admin/secret.txt|dot-segment with parameters
/pub/a.txt?q=%zz|invalid percent-encoding in query
/pub/a.txt?q=%4|invalid percent-encoding in query
/pub/a.txt?q=%00|NUL in query
/pub/a.txt?q=%%61D|invalid percent-encoding in query
EOF
# a fragment (RFC 9112 3.2 has none), in the path or the query; curl
# cuts it, so these go raw
for t in '/pub/a.txt#x' '/admin/secret.txt#' '/pub/a.txt?q=1#x'; do
    r=$(raw_send "$PE" "GET $t HTTP/1.1\r\nHost: a\r\n\r\n" --timeout 5)
    check [ "${r%% closed=*}" = "statuses=400" ] "$t: $r"
done
assert_log 'http-error status=400 reason="fragment in request target"'
assert_log 'http-request .* path=/pub/a\.txt#x status=400 .* verdict=deny '
# h2c, by a client that sends '#' in :path as it is
/usr/bin/python3 - "$PE" >"$T/h2frag.out" 2>&1 <<'PY' || fail "h2 client: $(cat "$T/h2frag.out")"
import socket, sys
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.send_headers(1, [(":method", "GET"), (":scheme", "http"),
                   (":authority", "a"), (":path", "/pub/a.txt#x")], end_stream=True)
s.sendall(c.data_to_send())
while True:
    d = s.recv(65536)
    if not d:
        print("closed"); break
    for e in c.receive_data(d):
        if isinstance(e, h2.events.ResponseReceived):
            print("status", dict(e.headers)[b":status"].decode()); sys.exit(0)
        if isinstance(e, h2.events.StreamReset):
            print("reset", e.error_code); sys.exit(0)
    s.sendall(c.data_to_send())
PY
check grep -qx 'status 400' "$T/h2frag.out" "h2c :path with a fragment: $(cat "$T/h2frag.out")"
# none of the refused requests reached the server (a sentinel after them)
code=$(get "$PE" /sentinel)
assert_eq "$code" 200 "sentinel"
wait_grep "$ECHO_LOG" '"target": "/sentinel"' 3 || fail "the origin did not log /sentinel"
check [ "$(wc -l <"$ECHO_LOG")" = "$((n0 + 1))" ] "the origin saw refused requests: $(tail -n 3 "$ECHO_LOG" | cut -c1-120)"
http_done
