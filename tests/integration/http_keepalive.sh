#!/usr/bin/env bash
# http analyser keep-alive and the per-worker server pool: ab -k with no
# failures; many short client connections (ab without -k, sequential curl)
# served by few nginx connections (proxyd_upstream_connections_total
# kind="new" stays small, kind="reused" grows, nginx sees few client
# ports); nginx reload closes the pooled connections (pool_stale counted,
# the next GET still works); an origin that drops a reused connection
# without answering gets the GET retried once on a new one.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl ab python3
setup

make_file 10k.bin 10K
start_nginx
ONCE_LOG=$T/once.jsonl
start_origin ONCE "$ONCE_LOG" once
free_port P
free_port PO
write_proxyd_conf
# one worker: the pool is per worker, and the retry case needs the second
# request to land where the first parked its server connection
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_http_service ka "$P" "$NGINX_PORT" '<http server-pool="64" server-idle="30s"/>'
write_http_service once "$PO" "$ONCE" '<http/>'
start_proxyd
U=http://127.0.0.1:$P
NREQ=2000
http_sanitized && NREQ=500

new() { metric_value proxyd_upstream_connections_total 'kind="new"'; }
reused() { metric_value proxyd_upstream_connections_total 'kind="reused"'; }

# --- ab -k: persistent clients
ab -k -n "$NREQ" -c 8 -s 20 "$U/10k.bin" >"$T/ab1.txt" 2>&1 || { cat "$T/ab1.txt"; fail "ab -k failed"; }
grep -E 'Requests per second|Failed requests|Non-2xx|Keep-Alive requests' "$T/ab1.txt" | sed "s/^/[$TEST_NAME] ab -k: /"
assert_eq "$(awk '/^Failed requests/ { print $3 }' "$T/ab1.txt")" 0 "ab -k failed requests"
assert_no_grep "$T/ab1.txt" '^Non-2xx' "ab -k got non-2xx responses"
assert_eq "$(awk '/^Keep-Alive requests/ { print $3 }' "$T/ab1.txt")" "$NREQ" "ab -k keep-alive requests"
assert_eq "$(awk '/^Complete requests/ { print $3 }' "$T/ab1.txt")" "$NREQ" "ab -k complete requests"
n1=$(new)
info "after ab -k: upstream new=$n1 reused=$(reused)"
assert_lt "$n1" 11 "new server connections for 8 persistent clients"
assert_log 'upstream=kept'

# --- ab without -k: a new client connection per request
ab -n 400 -c 4 -s 20 "$U/10k.bin" >"$T/ab2.txt" 2>&1 || { cat "$T/ab2.txt"; fail "ab failed"; }
assert_eq "$(awk '/^Failed requests/ { print $3 }' "$T/ab2.txt")" 0 "ab failed requests"
assert_eq "$(awk '/^Complete requests/ { print $3 }' "$T/ab2.txt")" 400 "ab complete requests"
# --- sequential curl runs, each a new client connection
for i in $(seq 1 30); do
    code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$U/10k.bin")
    assert_eq "$code" 200 "curl run $i"
done
n2=$(new)
r2=$(reused)
info "after 430 short client connections: upstream new=$n2 reused=$r2"
assert_lt "$n2" 19 "new server connections after 430 client connections (8 + 4 + slack)"
assert_ge "$r2" 400 "reused server connections"
assert_log 'upstream=pooled'
ports=$(awk '{ split($1, a, ":"); print a[2] }' "$T/nginx/logs/access.log" | sort -u | wc -l)
info "nginx saw $(wc -l <"$T/nginx/logs/access.log") requests from $ports client ports"
assert_lt "$ports" 20 "distinct proxyd->nginx connections seen by nginx"

# --- stale pooled connections: nginx reload closes the idle ones
stale0=$(metric_value proxyd_upstream_pool_stale_total)
[[ $stale0 == NA ]] && stale0=0
kill -HUP "$NGINX_PID"
assert_metric ge proxyd_upstream_pool_stale_total '' $((stale0 + 1)) 10
code=$(curl -sS --max-time 10 -o "$T/after" -w '%{http_code}' "$U/10k.bin")
assert_eq "$code" 200 "GET after the nginx reload"
assert_eq "$(sha256_of "$T/after")" "$(sha256_of "$T/www/10k.bin")" "body after the reload"
info "pool_stale $(metric_value proxyd_upstream_pool_stale_total), new $(new)"

# --- retry: the origin closes a reused connection on its second request
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PO/first")
assert_eq "$code" 200 "first request to the closing origin"
ret0=$(http_counter retried)
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PO/second")
assert_eq "$code" 200 "GET on a dead pooled connection (retried)"
assert_metric ge proxyd_analyser_events_total 'event="retried"' $((ret0 + 1))
assert_eq "$(grep -c '"/second"' "$ONCE_LOG")" 2 "origin saw /second twice (dead pooled, then new)"
c1=$(grep '"/second"' "$ONCE_LOG" | head -n 1 | sed -nE 's/.*"conn": ([0-9]+).*/\1/p')
c2=$(grep '"/second"' "$ONCE_LOG" | tail -n 1 | sed -nE 's/.*"conn": ([0-9]+).*/\1/p')
assert_ne "$c1" "$c2" "the retry went on a new connection"
assert_log 'path=/second status=200 .* upstream=new'
# a POST is not replayed: it gets a 502 instead
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PO/third")
assert_eq "$code" 200 "third request (retried as well)"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' --data 'x=1' "http://127.0.0.1:$PO/post")
assert_eq "$code" 502 "POST on a dead pooled connection is not retried"
assert_eq "$(grep -c '"/post"' "$ONCE_LOG")" 1 "origin saw the POST once"
# --- a refusal of the second request's head as its line arrives (over
# max-line, the head not whole yet) is a whole 431: not taken for part
# of the first response (a reset, "response cut off").
/usr/bin/python3 - "$P" >"$T/ka431.txt" 2>&1 <<'PY' || true
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /10k.bin HTTP/1.1\r\nHost: a\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 10240:
    d = s.recv(65536)
    if not d:
        break
    got += d
print(got.split(b"\r\n", 1)[0].decode())
# (the head not ended: refused as the line arrives)
s.sendall(b"GET /10k.bin HTTP/1.1\r\nHost: a\r\nX-Long: " + b"v" * 9000 + b"\r\n")
rest = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        rest += d
except OSError as e:
    print("error:", e)
print(rest.split(b"\r\n", 1)[0].decode() or "nothing")
PY
info "keep-alive, then a long line: $(tr '\n' ' ' <"$T/ka431.txt")"
assert_eq "$(sed -n 1p "$T/ka431.txt")" "HTTP/1.1 200 OK" "first response on the connection"
assert_eq "$(sed -n 2p "$T/ka431.txt")" "HTTP/1.1 431 Request Header Fields Too Large" \
    "second request with a line over max-line"
assert_no_grep "$PROXYD_LOG" 'response cut off' "a refused next head taken for a cut response"
assert_log 'method=- host=- path=- status=431 '   # not the first request's host
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
