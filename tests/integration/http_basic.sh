#!/usr/bin/env bash
# http analyser against nginx (and a recording python origin for POST):
# GET/HEAD/POST/PUT with Content-Length and chunked bodies, large bodies up
# and down with sha256 checks (200 MB; 20 MB under ASan), 204, 304 with
# nginx's ETag, 100-continue, three pipelined requests answered in order,
# and an HTTP/1.0 client getting a chunked (gzip) nginx response.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3 sha256sum gzip
setup

BIG=200M
http_sanitized && BIG=20M
mkdir -p "$T/www/up"
printf 'alpha\n' >"$T/www/a.txt"
printf 'bravo-bravo\n' >"$T/www/b.txt"
printf 'charlie-charlie-charlie\n' >"$T/www/c.txt"
make_file 1m.bin 1M
for i in $(seq 1 2000); do echo "line $i of a text that nginx will gzip"; done >"$T/www/text.txt"
NGINX_EXTRA="
        location /up/ { dav_methods PUT DELETE; client_max_body_size 0;
                        client_body_buffer_size 1m; }
        location = /204 { return 204; }
        location /gz/ { alias $T/www/; gzip on; gzip_types *; gzip_min_length 0; gzip_proxied any; }
"
start_nginx
ECHO_LOG=$T/echo.jsonl
start_origin ECHO "$ECHO_LOG" echo
free_port P
free_port PE
write_proxyd_conf
write_http_service web "$P" "$NGINX_PORT" '<http/>'
write_http_service echo "$PE" "$ECHO" '<http/>'
start_proxyd
U=http://127.0.0.1:$P

# --- GET, HEAD
r=$(http_get "$U/1m.bin" "$T/o.1m")
assert_eq "$r" "0 200" "GET 1m.bin"
assert_eq "$(sha256_of "$T/o.1m")" "$(sha256_of "$T/www/1m.bin")" "sha256 of GET 1m.bin"
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=GET host=127\.0\.0\.1 path=/1m\.bin status=200 to-server=[0-9]+ to-client=10[0-9]{5} duration=[0-9.]+ verdict=accept server=127\.0\.0\.1:$NGINX_PORT upstream=new"
curl -sS --max-time 10 -I "$U/1m.bin" -o "$T/h.head" || fail "HEAD failed"
assert_grep "$T/h.head" '^HTTP/1\.1 200' "HEAD status"
assert_grep "$T/h.head" '^Content-Length: 1048576' "HEAD keeps Content-Length"
assert_log "method=HEAD host=[^ ]+ path=/1m\.bin status=200 "
# HEAD then GET on one connection: no body after HEAD, or the GET breaks
r=$(raw_send "$P" "HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" --out "$T/hg")
[[ $r == "statuses=200,200 closed=yes"* ]] || fail "HEAD+GET on one connection: $r"
assert_eq "$(tail -c 12 "$T/hg")" "bravo-bravo" "body after HEAD+GET"

# --- POST with Content-Length and chunked, to the echo origin
head -c 300000 /dev/urandom >"$T/post.bin"
SHA_POST=$(sha256_of "$T/post.bin")
code=$(curl -sS --max-time 20 -o "$T/p1" -w '%{http_code}' --data-binary @"$T/post.bin" "http://127.0.0.1:$PE/post-cl")
assert_eq "$code" 200 "POST Content-Length"
grep -q "\"target\": \"/post-cl\".*\"body_len\": 300000, \"body_sha256\": \"$SHA_POST\"" "$ECHO_LOG" ||
    fail "origin did not get the POST body intact: $(grep post-cl "$ECHO_LOG" | cut -c1-300)"
code=$(curl -sS --max-time 20 -o "$T/p2" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary @"$T/post.bin" "http://127.0.0.1:$PE/post-chunked")
assert_eq "$code" 200 "POST chunked"
grep -q "\"target\": \"/post-chunked\".*\"body_len\": 300000, \"body_sha256\": \"$SHA_POST\"" "$ECHO_LOG" ||
    fail "origin did not get the chunked POST body intact"
grep "/post-chunked" "$ECHO_LOG" | grep -i '"transfer-encoding", "chunked"' >/dev/null ||
    fail "chunked request did not stay chunked"

# --- PUT with Content-Length and chunked to nginx, read back
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -T "$T/post.bin" "$U/up/put-cl.bin")
[[ $code == 201 || $code == 204 ]] || fail "PUT Content-Length: status $code"
assert_eq "$(sha256_of "$T/www/up/put-cl.bin")" "$SHA_POST" "sha256 of the PUT (Content-Length) file at nginx"
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' -T - "$U/up/put-ch.bin" <"$T/post.bin")
[[ $code == 201 || $code == 204 ]] || fail "PUT chunked: status $code"
assert_eq "$(sha256_of "$T/www/up/put-ch.bin")" "$SHA_POST" "sha256 of the PUT (chunked) file at nginx"

# --- 100-continue: the interim response comes before the body is sent
python3 - "$P" >"$T/cont.out" <<'EOF' || fail "100-continue: $(cat "$T/cont.out")"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"PUT /up/cont.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n"
          b"Expect: 100-continue\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    d = s.recv(4096)
    if not d:
        break
    got += d
print(got.decode("latin1"))
if not got.startswith(b"HTTP/1.1 100 "):
    sys.exit(1)
s.sendall(b"hello\n")
rest = got[got.index(b"\r\n\r\n") + 4:]
while b"\r\n\r\n" not in rest:
    d = s.recv(4096)
    if not d:
        break
    rest += d
print(rest.decode("latin1"))
sys.exit(0 if rest[9:12] in (b"201", b"204") else 1)
EOF
assert_eq "$(cat "$T/www/up/cont.txt")" "hello" "body sent after 100 Continue"
code=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' -H 'Expect: 100-continue' -T "$T/post.bin" "$U/up/cont2.bin")
[[ $code == 201 || $code == 204 ]] || fail "curl PUT with Expect: status $code"
assert_eq "$(sha256_of "$T/www/up/cont2.bin")" "$SHA_POST" "sha256 of PUT with 100-continue"

# --- 204 and 304
r=$(raw_send "$P" "GET /204 HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" --out "$T/204")
[[ $r == "statuses=204,200 closed=yes"* ]] || fail "204 then GET: $r"
assert_eq "$(tail -c 6 "$T/204")" "alpha" "response after a 204"
etag=$(curl -sS --max-time 10 -D - -o /dev/null "$U/a.txt" | tr -d '\r' | sed -n 's/^ETag: //Ip')
[[ -n $etag ]] || fail "no ETag from nginx"
r=$(raw_send "$P" "GET /a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: $etag\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" --out "$T/304")
[[ $r == "statuses=304,200 closed=yes"* ]] || fail "304 then GET: $r"
assert_eq "$(tail -c 12 "$T/304")" "bravo-bravo" "response after a 304"
assert_log "path=/a\.txt status=304 "

# --- pipelining: three requests in one write, answered in order
r=$(raw_send "$P" "GET /c.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" --out "$T/pipe")
[[ $r == "statuses=200,200,200 closed=yes"* ]] || fail "pipelined: $r"
bodies=$(grep -aE '^(alpha|bravo|charlie)' "$T/pipe" | tr '\n' ' ')
assert_eq "$bodies" "charlie-charlie-charlie alpha bravo-bravo " "pipelined response order"

# the same, then a half-close (printf ... | nc): every request already sent
# is still answered
r=$(raw_send "$P" "GET /c.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\n\r\n" --half-close --out "$T/pipe2")
check [ "${r%% bytes=*}" = "statuses=200,200,200 closed=yes reset=no" ] "pipelined requests then a half-close: $r"

# --- chunked response (nginx gzip), to an HTTP/1.1 and an HTTP/1.0 client
curl -sS --max-time 10 -D "$T/gz11.h" -H 'Accept-Encoding: gzip' -o "$T/gz11" "$U/gz/text.txt" || fail "gzip GET"
assert_grep "$T/gz11.h" '^Transfer-Encoding: chunked' "nginx gzip response is not chunked for HTTP/1.1"
assert_eq "$(gzip -dc <"$T/gz11" | sha256sum | cut -d' ' -f1)" "$(sha256_of "$T/www/text.txt")" "gzip body, HTTP/1.1"
curl -sS --max-time 10 -0 -D "$T/gz10.h" -H 'Accept-Encoding: gzip' -o "$T/gz10" "$U/gz/text.txt" || fail "HTTP/1.0 gzip GET"
assert_no_grep "$T/gz10.h" '^Transfer-Encoding' "Transfer-Encoding sent to an HTTP/1.0 client"
assert_grep "$T/gz10.h" '^HTTP/1\.[01] 200' "HTTP/1.0 client status"
check [ "$(gzip -dc <"$T/gz10" 2>/dev/null | sha256sum | cut -d' ' -f1)" = "$(sha256_of "$T/www/text.txt")" ] \
    "HTTP/1.0 client: dechunked gzip body differs ($(stat -c %s "$T/gz10") bytes)"
# an HTTP/1.0 GET through the raw socket: ends with the connection
r=$(raw_send "$P" "GET /a.txt HTTP/1.0\r\n\r\n" --out "$T/h10")
# (no Host: proxyd speaks HTTP/1.1 to the origin, so it must add one)
check [ "${r%% bytes=*}" = "statuses=200 closed=yes reset=no" ] "HTTP/1.0 GET without Host: $r (nginx wants a Host in HTTP/1.1)"
r=$(raw_send "$P" "GET /a.txt HTTP/1.0\r\nHost: x\r\n\r\n" --out "$T/h10")
[[ $r == "statuses=200 closed=yes"* ]] || fail "HTTP/1.0 GET: $r"
assert_eq "$(tail -c 6 "$T/h10")" "alpha" "HTTP/1.0 GET body"

# --- large bodies up and down
info "large PUT and GET of $BIG"
head -c "$BIG" /dev/urandom >"$T/big.bin"
SHA_BIG=$(sha256_of "$T/big.bin")
t0=$(now_ms)
code=$(curl -sS --max-time 200 -o /dev/null -w '%{http_code}' -T "$T/big.bin" "$U/up/big.bin")
t1=$(now_ms)
[[ $code == 201 || $code == 204 ]] || fail "large PUT: status $code"
rm -f "$T/big.bin"
assert_eq "$(sha256_of "$T/www/up/big.bin")" "$SHA_BIG" "sha256 of the large PUT at nginx"
(curl -sS --max-time 200 -o - "$U/up/big.bin" | sha256sum | cut -d' ' -f1 >"$T/big.sha") || fail "large GET"
t2=$(now_ms)
assert_eq "$(cat "$T/big.sha")" "$SHA_BIG" "sha256 of the large GET"
info "$BIG up in $((t1 - t0)) ms, down in $((t2 - t1)) ms; proxyd VmHWM $(vm_kb "$PROXYD_PID" VmHWM) kB"
# a chunked large upload too
code=$(curl -sS --max-time 200 -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' -T - "$U/up/big2.bin" <"$T/www/up/big.bin")
[[ $code == 201 || $code == 204 ]] || fail "large chunked PUT: status $code"
assert_eq "$(sha256_of "$T/www/up/big2.bin")" "$SHA_BIG" "sha256 of the large chunked PUT"
hwm=$(vm_kb "$PROXYD_PID" VmHWM)
http_sanitized || assert_lt "$hwm" 65536 "proxyd peak RSS (kB) with $BIG bodies"

assert_metric ge proxyd_analyser_events_total 'event="requests"' 20
n=$(http_counter bad_request)
assert_eq "$n" 0 "bad_request counter"
assert_no_grep "$PROXYD_LOG" 'http-error|http-bad-response' "no request should have failed"
http_done
