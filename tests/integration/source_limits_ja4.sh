#!/usr/bin/env bash
# <source-limits per="ja4">: one count per TLS client fingerprint, whatever
# the address. curl and Python's ssl (different JA4s) from the same address:
# - connections="2/m" burst="2" (plug, terminate): curl's third connection
#   is reset once its ClientHello is read, Python's are served; the limited
#   line names the source as ja4:<curl's JA4, as its session-end lines say>;
# - sessions="1" (http, terminate): while Python holds a session, its
#   second is refused and curl is served;
# - requests="2/m" (http, terminate): curl's third request is answered 429,
#   Python's first is served;
# - passthrough: the same connections limit, judged on the hello before any
#   server is connected.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl openssl python3
setup
PY=/usr/bin/python3

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf proxy www.example.test "DNS:www.example.test" serverAuth
tls_leaf origin www.example.test "DNS:www.example.test" serverAuth
printf 'ok\n' >"$T/www/f"
free_port NGX_TLS
NGINX_SERVERS="
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        root $T/www;
    }"
start_nginx
wait_listen "$NGX_TLS" 5 "$NGINX_PID" || fail "nginx TLS origin did not listen"

free_port PC
free_port PS
free_port PR
free_port PP
write_proxyd_conf
write_service jconn "$PC" "$NGINX_PORT" \
    "<tls side=\"client\" mode=\"terminate\" cert=\"$P/proxy.pem\" key=\"$P/proxy.key\"/>
  <source-limits per=\"ja4\" connections=\"2/m\" burst=\"2\"/>"
write_service jpass "$PP" "$NGX_TLS" \
    "<tls side=\"client\" mode=\"passthrough\"><sni name=\"*\" action=\"accept\"/></tls>
  <source-limits per=\"ja4\" connections=\"2/m\" burst=\"2\"/>"
# http_ja4_service NAME PORT LIMIT_ATTRS: an http service terminating TLS
http_ja4_service() {
    cat >"$T/policy/$1.xml" <<XML
<service name="$1" analyser="http">
  <listen address="127.0.0.1" port="$2" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <tls side="client" mode="terminate" cert="$P/proxy.pem" key="$P/proxy.key"/>
  <source-limits per="ja4" $3/>
</service>
XML
    PROXYD_PORTS+=("$2")
}
http_ja4_service jsess "$PS" 'sessions="1"'
http_ja4_service jreq "$PR" 'requests="2/m"'
start_proxyd

cat >"$T/pyget.py" <<'EOF'
# pyget.py PORT CA N [HOLD]: N HTTPS GETs of /f with Python's ssl, one
# connection each; prints "200", "429" or "refused" per GET. HOLD: the
# first connection (keep-alive) stays open until stdin closes.
import socket, ssl, sys
port, ca, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
hold = len(sys.argv) > 4
ctx = ssl.create_default_context(cafile=ca)
held = None
for i in range(n):
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname="www.example.test")
        keep = hold and i == 0
        s.sendall(b"GET /f HTTP/1.1\r\nHost: www.example.test\r\n" +
                  (b"" if keep else b"Connection: close\r\n") + b"\r\n")
        got = b""
        while not got.endswith(b"ok\n"):
            d = s.recv(65536)
            if not d:
                break
            got += d
        print(got[9:12].decode() if got.startswith(b"HTTP/1.1 ") else "refused", flush=True)
        if keep:
            held = s
        else:
            s.close()
    except (OSError, ssl.SSLError):
        print("refused", flush=True)
if held is not None:
    sys.stdin.read()
EOF
# curlget PORT: one GET of /f over its own connection: the status or 000
curlget() {
    curl -s --max-time 10 --cacert "$P/ca.pem" --resolve "www.example.test:$1:127.0.0.1" \
        -o /dev/null -w '%{http_code}' "https://www.example.test:$1/f" || true
}

info "connections 2/m per JA4 (terminate): curl x3, then python x2, same address"
c=""
for i in 1 2 3; do c+="$(curlget "$PC") "; done
assert_eq "$c" "200 200 000 " "curl's three connections (the third over its fingerprint's limit)"
assert_eq "$("$PY" "$T/pyget.py" "$PC" "$P/ca.pem" 2 | tr '\n' ' ')" "200 200 " \
    "python's two connections (another fingerprint, its own bucket)"
# the four served sessions' lines (the refused one has none)
for i in $(seq 1 100); do
    (($(session_end_lines jconn | grep -c .) >= 4)) && break
    sleep 0.05
done
assert_eq "$(session_end_lines jconn | grep -c .)" 4 "session-end lines of jconn (the refused one has none)"
# in session order: two workers write their lines in either order
by_session() { sed -E 's/^.* #([0-9]+) .*$/\1 &/' | sort -n | cut -d' ' -f2-; }
CURL_JA4=$(kv "$(session_end_lines jconn | by_session | head -n 1)" ja4)
PY_JA4=$(kv "$(session_end_lines jconn | by_session | tail -n 1)" ja4)
info "curl ja4=$CURL_JA4 python ja4=$PY_JA4"
[[ $CURL_JA4 =~ ^t13d[0-9]{4}[a-z0-9]{2}_[0-9a-f]{12}_[0-9a-f]{12}$ ]] || fail "curl's JA4 on its session-end line: '$CURL_JA4'"
assert_ne "$CURL_JA4" "$PY_JA4" "curl's and python's JA4"
assert_log "limited service=jconn client=127\\.0\\.0\\.1:[0-9]+ source=ja4:$CURL_JA4 limit=connections rule=jconn\\.xml:[0-9]+ refused=1"
assert_metric eq proxyd_limited_total 'service="jconn",analyser="plug",limit="connections"' 1

info "connections 2/m per JA4 (passthrough)"
c=""
for i in 1 2 3; do c+="$(curlget "$PP") "; done
assert_eq "$c" "200 200 000 " "curl through passthrough"
assert_eq "$("$PY" "$T/pyget.py" "$PP" "$P/ca.pem" 1)" "200" "python through passthrough"
assert_log "limited service=jpass client=127\\.0\\.0\\.1:[0-9]+ source=ja4:$CURL_JA4 limit=connections rule=jpass\\.xml:"
assert_metric eq proxyd_limited_total 'service="jpass",analyser="plug",limit="connections"' 1

info "sessions 1 per JA4 (http): python holds one, its second is refused, curl served"
mkfifo "$T/hold.in"
"$PY" "$T/pyget.py" "$PS" "$P/ca.pem" 1 hold <"$T/hold.in" >"$T/hold.out" 2>&1 &
HOLD=$!
track_pid "$HOLD"
exec 7>"$T/hold.in"
wait_grep "$T/hold.out" '^200$' 10 || fail "python's held session: $(cat "$T/hold.out")"
assert_eq "$("$PY" "$T/pyget.py" "$PS" "$P/ca.pem" 1)" "refused" "python's second session"
assert_eq "$(curlget "$PS")" 200 "curl while python holds its one session"
exec 7>&-
wait_exit "$HOLD" 10 || true
assert_log "limited service=jsess client=127\\.0\\.0\\.1:[0-9]+ source=ja4:$PY_JA4 limit=sessions rule=jsess\\.xml:[0-9]+"
assert_metric eq proxyd_limited_total 'service="jsess",analyser="http",limit="sessions"' 1
# its session given back: python is served again
for i in $(seq 1 50); do
    [[ $("$PY" "$T/pyget.py" "$PS" "$P/ca.pem" 1) == 200 ]] && break
    sleep 0.1
done
((i < 50)) || fail "python not served once its held session ended"

info "requests 2/m per JA4 (http): curl's third request 429, python served"
out=$(curl -s --max-time 10 --cacert "$P/ca.pem" --resolve "www.example.test:$PR:127.0.0.1" \
    -w '%{http_code} ' -o /dev/null "https://www.example.test:$PR/f" -o /dev/null \
    "https://www.example.test:$PR/f" -o /dev/null "https://www.example.test:$PR/f")
assert_eq "$out" "200 200 429 " "curl's three requests on one connection"
assert_eq "$("$PY" "$T/pyget.py" "$PR" "$P/ca.pem" 1)" "200" "python's request"
assert_log "limited service=jreq client=127\\.0\\.0\\.1:[0-9]+ source=ja4:$CURL_JA4 limit=requests rule=jreq\\.xml:[0-9]+"
assert_metric eq proxyd_limited_total 'service="jreq",analyser="http",limit="requests"' 1
info "PASS"
