#!/usr/bin/env bash
# <servers allow> in http forward mode: the request names the server, so the
# list is asked per request. A forward GET and a CONNECT to a server outside
# the list get 403 (with both ends' zones in the reason and the http-request
# line) and never reach it; the same request through a service whose list
# holds the server is relayed; <servers ports=> refuses a server's port
# outside the list the same way (403, port=N refused-by=ports in the
# reason), for GET and CONNECT, and lets a listed port through; the
# denials are counted (proxyd_sessions_denied_total{reason="server"}).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
free_port PA
free_port PD
write_proxyd_conf '' '<zones>
    <zone name="loopback" addresses="127.0.0.0/8 ::1">
      <zone name="origin" addresses="127.0.0.1"/>
    </zone>
  </zones>'
write_http_service allowed "$PA" 0 "
<servers allow=\"zone:origin\"/>
<http><request method=\"GET CONNECT\" action=\"accept\"/></http>" forward
write_http_service denied "$PD" 0 "
<servers allow=\"127.0.0.2 127.0.0.3\"/>
<http><request method=\"GET CONNECT\" action=\"accept\"/></http>" forward
free_port P0
write_http_service zero "$P0" 0 "
<servers allow=\"0.0.0.0/8 ::/128\"/>
<http><request method=\"GET CONNECT\" action=\"accept\"/></http>" forward
# portout: the server's address, only ports 1-1023; portin: its port
free_port PPO
write_http_service portout "$PPO" 0 "
<servers allow=\"zone:origin\" ports=\"1-1023\"/>
<http><request method=\"GET CONNECT\" action=\"accept\"/></http>" forward
free_port PPI
write_http_service portin "$PPI" 0 "
<servers ports=\"80 $NGINX_PORT\"/>
<http><request method=\"GET CONNECT\" action=\"accept\"/></http>" forward
start_proxyd

code=$(curl -sS --max-time 10 -o "$T/a" -w '%{http_code}' -x "http://127.0.0.1:$PA" "http://127.0.0.1:$NGINX_PORT/a.txt?via=allowed")
assert_eq "$code" 200 "forward GET to a listed server"
assert_eq "$(cat "$T/a")" alpha "forward GET body"

code=$(curl -sS --max-time 10 -o "$T/d" -w '%{http_code}' -x "http://127.0.0.1:$PD" "http://127.0.0.1:$NGINX_PORT/a.txt?via=denied")
assert_eq "$code" 403 "forward GET to a server outside <servers>"
assert_grep "$T/d" 'server not allowed' "the 403 page says why"
assert_log 'http-error status=403 reason="server not allowed \(client-zone=origin server-zone=origin\)"'
assert_log "http-request .* method=GET host=127\.0\.0\.1 path=/a\.txt\?via=denied status=403 .* verdict=deny server=- "
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "http://127.0.0.1:$PD" "http://127.0.0.1:$NGINX_PORT/a.txt?via=tunnel" || true)
assert_eq "$code" 403 "CONNECT to a server outside <servers>"
wait_grep "$T/nginx/logs/access.log" 'via=allowed' 3 || fail "nginx did not log the allowed request"
! grep -q 'via=denied\|via=tunnel' "$T/nginx/logs/access.log" || fail "a denied request reached nginx"
# 0.0.0.0 and :: are this host to connect(): no server, whatever the list
for u in "http://0.0.0.0:$NGINX_PORT/a.txt?via=zero" "http://[::ffff:0.0.0.0]:$NGINX_PORT/a.txt?via=zero6"; do
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$P0" "$u" || true)
    assert_eq "$code" 403 "forward GET to $u"
done
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "http://127.0.0.1:$P0" "http://0.0.0.0:$NGINX_PORT/a.txt?via=zerotunnel" || true)
assert_eq "$code" 403 "CONNECT to 0.0.0.0"
sleep 0.5
! grep -q 'via=zero' "$T/nginx/logs/access.log" || fail "a request to 0.0.0.0 reached nginx on loopback"

# ports=: a port outside is refused like an address outside, before any
# connection; the listed port (ports= alone: any address) is relayed
code=$(curl -sS --max-time 10 -o "$T/po" -w '%{http_code}' -x "http://127.0.0.1:$PPO" "http://127.0.0.1:$NGINX_PORT/a.txt?via=portout")
assert_eq "$code" 403 "forward GET to a port outside ports="
assert_grep "$T/po" 'server not allowed' "the 403 page says why"
assert_log "http-error status=403 reason=\"server not allowed \(client-zone=origin server-zone=origin port=$NGINX_PORT refused-by=ports\)\""
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_connect}' -p -x "http://127.0.0.1:$PPO" "http://127.0.0.1:$NGINX_PORT/a.txt?via=porttunnel" || true)
assert_eq "$code" 403 "CONNECT to a port outside ports="
code=$(curl -sS --max-time 10 -o "$T/pi" -w '%{http_code}' -x "http://127.0.0.1:$PPI" "http://127.0.0.1:$NGINX_PORT/a.txt?via=portin")
assert_eq "$code" 200 "forward GET to a port in ports="
assert_eq "$(cat "$T/pi")" alpha "forward GET body through ports="
code=$(curl -sS --max-time 10 -o "$T/pt" -w '%{http_code}' -p -x "http://127.0.0.1:$PPI" "http://127.0.0.1:$NGINX_PORT/a.txt?via=porttunnelin")
assert_eq "$code" 200 "CONNECT to a port in ports="
assert_eq "$(cat "$T/pt")" alpha "the body through the tunnel"
wait_grep "$T/nginx/logs/access.log" 'via=porttunnelin' 3 || fail "nginx did not log the tunnelled request"
! grep -q 'via=portout\|via=porttunnel ' "$T/nginx/logs/access.log" || fail "a request to a port outside ports= reached nginx"
assert_metric eq proxyd_sessions_denied_total 'reason="server"' 7
http_done
