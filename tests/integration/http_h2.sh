#!/usr/bin/env bash
# HTTP/2 towards clients (<http h2="yes" h2c="yes">, issue 29) in front of
# a plain HTTP/1.1 nginx: prior-knowledge h2c (curl, nghttp) with an
# HTTP/1.1 client on the same port, h2 chosen by ALPN on terminate and
# keybridge, bytes intact (sha256) both ways, each stream judged by the
# http policy (403/405 as h2 responses while the other streams of the
# connection go on) and logged with the usual http-request line plus
# "proto=h2 stream=N", <h2> bounds in SETTINGS and enforced (431 over
# max-header-list, streams over max-concurrent-streams refused), a bad
# preface counted (proxyd_http2_errors_total{kind=}) and logged
# (http2-error kind=...). The CAs and certificates are made here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx curl nghttp h2load openssl python3 sha256sum
setup

curl -V | grep HTTP2 >/dev/null || skip "curl without HTTP/2"
BIG=8M
http_sanitized && BIG=2M
mkdir -p "$T/www/up"
printf 'alpha\n' >"$T/www/a.txt"
printf '<p>page-through-h2</p>\n' >"$T/www/page.html"
make_file big.bin "$BIG"
SHA_BIG=$(sha256_of "$T/www/big.bin")
head -c 300000 /dev/urandom >"$T/post.bin"
SHA_POST=$(sha256_of "$T/post.bin")

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth
tls_ca origin-ca "origin CA"
tls_ca kb-ca "proxyd keybridge CA"
tls_leaf origin "/CN=origin.test" "DNS:origin.test" serverAuth origin-ca

free_port NGX_TLS
NGINX_EXTRA="
        location /up/ { dav_methods PUT; client_max_body_size 0; }
"
NGINX_SERVERS="
    server {
        listen 127.0.0.1:$NGX_TLS ssl;
        ssl_certificate $P/origin.pem;
        ssl_certificate_key $P/origin.key;
        types { text/html html; }
        root $T/www;
    }"
start_nginx
[[ $EUID == 0 ]] || chmod 777 "$T/www/up"

POL='<http h2="yes" h2c="yes">
  <h2 max-concurrent-streams="8" initial-window="256k" max-header-list="4k"/>
  <limits max-body="1m" request-timeout="2s"/>
  <url path="/secret*" action="deny"/>
  <url path="/abort*" action="abort"/>
</http>'
free_port P_C
free_port P_T
free_port P_K
free_port P_OFF
free_port P_E
ECHO_LOG=$T/echo.jsonl
start_origin ECHO "$ECHO_LOG" echo
write_proxyd_conf
write_http_service h2e "$P_E" "$ECHO" "$POL"
free_port P_TE
free_port P_TR
# A directory: the response to /t is the file t.
mkdir -p "$T/raw"
printf 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n' >"$T/raw/t"
start_origin RAWO "$T/raw.jsonl" raw "$T/raw"
TPOL='<http h2c="yes" trailers="pass" max-requests-per-connection="3"/>'
write_http_service h2te "$P_TE" "$ECHO" "$TPOL"
write_http_service h2tr "$P_TR" "$RAWO" "$TPOL"
write_http_service h2c "$P_C" "$NGINX_PORT" "$POL"
# a server pool smaller than the streams at once (h2load -m 8 below)
free_port P_P
write_http_service h2p "$P_P" "$NGINX_PORT" '<http h2c="yes" server-pool="2"/>'
# a stream window of 16k: one write brings all of it with the HEADERS
free_port P_W
write_http_service h2w "$P_W" "$NGINX_PORT" '<http h2c="yes"><h2 initial-window="16k"/></http>'
write_http_service h2t "$P_T" "$NGINX_PORT" "$POL
  <tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"/>"
write_http_service h2k "$P_K" "$NGX_TLS" "$POL
  <tls side=\"client\" mode=\"keybridge\" ca-cert=\"$P/kb-ca.pem\" ca-key=\"$P/kb-ca.key\"/>
  <tls side=\"server\" mode=\"originate\" ca=\"$P/origin-ca.pem\"/>"
write_http_service off "$P_OFF" "$NGINX_PORT" \
    "<http/><tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"/>"
start_proxyd
C=http://127.0.0.1:$P_C

info "h2c prior knowledge: curl gets the bytes, the log says proto=h2"
code=$(curl -sS --max-time 30 --http2-prior-knowledge -o "$T/big.c" -w '%{http_code} %{http_version}' "$C/big.bin")
assert_eq "$code" "200 2" "h2c status and version"
assert_eq "$(sha256_of "$T/big.c")" "$SHA_BIG" "sha256 through h2c"
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=GET host=127\.0\.0\.1 path=/big\.bin status=200 .* verdict=accept server=127\.0\.0\.1:$NGINX_PORT upstream=[a-z]+ proto=h2 stream=1$"
# The stream is a transaction of the connection's session, not a session
# of its own: one session-end line, the connection's.
assert_log "session-end service=h2c analyser=http verdict=accept .* to-client=[0-9]{7,} duration=[0-9.]+ by=client phase=data end=client-closed$"

info "an HTTP/1.1 client on the same port is served as before"
code=$(curl -sS --max-time 30 --http1.1 -o "$T/big.1" -w '%{http_code} %{http_version}' "$C/big.bin")
assert_eq "$code" "200 1.1" "HTTP/1.1 on the h2c port"
assert_eq "$(sha256_of "$T/big.1")" "$SHA_BIG" "sha256 through HTTP/1.1 on the h2c port"

info "nghttp: three streams on one connection, one denied, the others go on"
timeout 30 nghttp -n -s "$C/a.txt" "$C/secret/x" "$C/big.bin" >"$T/nghttp.out" 2>&1 ||
    fail "nghttp: $(tail -5 "$T/nghttp.out")"
grep -Eq ' 200 +6 /a\.txt$' "$T/nghttp.out" || fail "nghttp a.txt: $(cat "$T/nghttp.out")"
grep -Eq ' 403 +[0-9]+ /secret/x$' "$T/nghttp.out" || fail "nghttp 403: $(cat "$T/nghttp.out")"
grep -Eq ' 200 +[0-9.]+M /big\.bin$' "$T/nghttp.out" || fail "nghttp big: $(cat "$T/nghttp.out")"
assert_log "http-request .* path=/secret/x status=403 .* verdict=deny .* rule=h2c\.xml:[0-9]+ proto=h2 stream=[0-9]+$"
timeout 30 nghttp "$C/big.bin" 2>/dev/null >"$T/ng.body" || fail "nghttp body"
assert_eq "$(sha256_of "$T/ng.body")" "$SHA_BIG" "sha256 through nghttp"

info "405 for a method the policy refuses, as an h2 response"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -X BREW -o /dev/null -w '%{http_code} %{http_version}' "$C/a.txt")
assert_eq "$code" "405 2" "405 over h2"

info "PUT bodies (Content-Length, and none: chunked to the server) arrive whole"
code=$(curl -sS --max-time 30 --http2-prior-knowledge -T "$T/post.bin" -o /dev/null -w '%{http_code}' "$C/up/cl.bin")
[[ $code == 201 || $code == 204 ]] || fail "PUT over h2: $code"
assert_eq "$(sha256_of "$T/www/up/cl.bin")" "$SHA_POST" "sha256 of the h2 PUT at nginx"
code=$(curl -sS --max-time 30 --http2-prior-knowledge -T - -o /dev/null -w '%{http_code}' "$C/up/ch.bin" <"$T/post.bin")
[[ $code == 201 || $code == 204 ]] || fail "PUT without length over h2: $code"
assert_eq "$(sha256_of "$T/www/up/ch.bin")" "$SHA_POST" "sha256 of the h2 PUT without length at nginx"
# A body whose first window came in one write with its HEADERS (16k here:
# a small POST, a gRPC call's message): it goes to the server as the
# transaction starts, and the stream's window must open again for those
# bytes as for any sent on. Before, they were given back only at the
# transaction's end: a window's worth early stopped the upload until
# response-timeout.
/usr/bin/python3 - "$P_W" "$T/post.bin" >"$T/early-body.out" 2>&1 <<'EOF' || fail "early body: $(cat "$T/early-body.out")"
import socket, sys, time
import h2.config, h2.connection, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
body = open(sys.argv[2], "rb").read()
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
s.sendall(c.data_to_send())
t0 = time.monotonic()
# proxyd's SETTINGS (its 16k window)
while c.remote_settings.initial_window_size == 65535:
    c.receive_data(s.recv(65536))
    s.sendall(c.data_to_send())
c.send_headers(1, [(":method", "PUT"), (":path", "/up/early.bin"), (":scheme", "http"),
                   (":authority", "127.0.0.1"), ("content-length", str(len(body)))])
sent, status, ended = 0, None, False
s.settimeout(0.2)
while not ended and time.monotonic() - t0 < 8:
    room = min(c.local_flow_control_window(1), len(body) - sent)
    while room > 0:
        n = min(room, c.max_outbound_frame_size)
        c.send_data(1, body[sent:sent + n], end_stream=sent + n == len(body))
        sent += n
        room -= n
    s.sendall(c.data_to_send())
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[b":status"].decode()
        elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
            ended = True
print("status=%s sent=%d of %d" % (status, sent, len(body)))
EOF
assert_grep "$T/early-body.out" "^status=20[14] sent=300000 of 300000$" "a body whose first window came with its head"
assert_eq "$(sha256_of "$T/www/up/early.bin")" "$SHA_POST" "sha256 of the PUT whose first window came with its head"

info "HEAD: headers, no body"
curl -sS --max-time 10 --http2-prior-knowledge -I "$C/big.bin" >"$T/head.out"
assert_grep "$T/head.out" '^HTTP/2 200' "HEAD over h2"
assert_grep "$T/head.out" "^content-length: $(stat -c %s "$T/www/big.bin")" "HEAD keeps content-length"
assert_no_grep "$T/head.out" '^(connection|keep-alive|transfer-encoding):' "no connection-specific field over h2"

info "a stream whose client reads nothing holds only itself; CONNECT refused (405)"
/usr/bin/python3 - "$P_C" "$(stat -c %s "$T/www/big.bin")" >"$T/slow.out" 2>&1 <<'EOF' || fail "slow stream: $(cat "$T/slow.out")"
import hashlib, socket, sys
import h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
size = int(sys.argv[2])
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
    validate_outbound_headers=False))
c.initiate_connection()
# The connection window is large; stream 1's stays at its first 64 KiB.
c.increment_flow_control_window(64 * 1024 * 1024)
req = lambda p: [(":method", "GET"), (":path", p), (":scheme", "http"),
                 (":authority", "127.0.0.1")]
c.send_headers(1, req("/big.bin"), end_stream=True)
c.send_headers(3, req("/big.bin"), end_stream=True)
c.send_headers(5, [(b":method", b"CONNECT"), (b":authority", b"127.0.0.1:80")])
s.sendall(c.data_to_send())
got = {1: 0, 3: hashlib.sha256()}
n3 = 0
status = {}
done = False
while not done:
    data = s.recv(65535)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            status[ev.stream_id] = dict(ev.headers)[b":status"].decode()
        elif isinstance(ev, h2.events.DataReceived):
            if ev.stream_id == 3:
                got[3].update(ev.data)
                n3 += len(ev.data)
                c.acknowledge_received_data(ev.flow_controlled_length, 3)
            elif ev.stream_id == 1:
                got[1] += len(ev.data)
        elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == 3:
            done = True
    s.sendall(c.data_to_send())
print("s3=%d sha3=%s s1=%d connect=%s" % (n3, got[3].hexdigest(), got[1], status.get(5)))
EOF
assert_grep "$T/slow.out" "^s3=$(stat -c %s "$T/www/big.bin") sha3=$SHA_BIG s1=65535 connect=405$" "stream 3 whole while stream 1 waits"
assert_log "http-request .* method=CONNECT .* status=405 .* proto=h2 stream=5$"

info "abort rule: RST_STREAM; over max-body: 413 (with and without length); Host against :authority: 400"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -o /dev/null -w '%{http_code}' "$C/abort/x" 2>"$T/abort.err" || true)
assert_eq "$code" 000 "no response to an aborted stream"
assert_grep "$T/abort.err" 'INTERNAL_ERROR' "the aborted stream is reset"
assert_log "http-request .* path=/abort/x status=0 .* verdict=abort .* proto=h2 stream=1$"
head -c 1200000 /dev/urandom >"$T/big.post"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -T "$T/big.post" -o /dev/null -w '%{http_code}' "$C/up/over.bin")
assert_eq "$code" 413 "over max-body with content-length"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -T - -o /dev/null -w '%{http_code}' "$C/up/over2.bin" <"$T/big.post")
assert_eq "$code" 413 "over max-body without length"
/usr/bin/python3 - "$P_E" >"$T/host.out" 2>&1 <<'EOF' || fail "host: $(cat "$T/host.out")"
import socket, sys
import h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
    validate_outbound_headers=False))
c.initiate_connection()
c.send_headers(1, [(b":method", b"GET"), (b":path", b"/a.txt"), (b":scheme", b"http"),
                   (b":authority", b"127.0.0.1"), (b"host", b"evil.example")],
               end_stream=True)
c.send_headers(3, [(b":method", b"GET"), (b":path", b"/a.txt"), (b":scheme", b"http"),
                   (b":authority", b"127.0.0.1"), (b"cookie", b"a=1"), (b"cookie", b"b=2")],
               end_stream=True)
s.sendall(c.data_to_send())
st = {}
while len(st) < 2:
    data = s.recv(65535)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            st[ev.stream_id] = dict(ev.headers)[b":status"].decode()
    s.sendall(c.data_to_send())
print("host=%s cookie=%s" % (st.get(1), st.get(3)))
EOF
assert_grep "$T/host.out" '^host=400 cookie=200$' "Host naming another authority refused"
grep -qi '"cookie", "a=1; b=2"' "$ECHO_LOG" || fail "cookie crumbs not joined: $(tail -c 600 "$ECHO_LOG")"

info "trailers=\"pass\": request trailers reach the origin in the chunked body, response trailers come as HEADERS"
/usr/bin/python3 - "$P_TE" "$P_TR" >"$T/trailers.out" 2>&1 <<'EOF' || fail "trailers: $(cat "$T/trailers.out")"
import socket, sys
import h2.connection, h2.config, h2.events

def run(port, trailers):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, [(":method", "POST" if trailers else "GET"), (":path", "/t"),
                       (":scheme", "http"), (":authority", "127.0.0.1")],
                   end_stream=not trailers)
    if trailers:
        c.send_data(1, b"hello")
        c.send_headers(1, [("x-checksum", "abc")], end_stream=True)
    s.sendall(c.data_to_send())
    got, body, status = None, b"", None
    done = False
    while not done:
        d = s.recv(65535)
        if not d:
            break
        for ev in c.receive_data(d):
            if isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers)[b":status"].decode()
            elif isinstance(ev, h2.events.DataReceived):
                body += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, 1)
            elif isinstance(ev, h2.events.TrailersReceived):
                got = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                done = True
        s.sendall(c.data_to_send())
    return status, body, got

st, body, _ = run(int(sys.argv[1]), True)
print("echo", st)
st, body, tr = run(int(sys.argv[2]), False)
print("raw", st, body.decode(), tr and tr.get(b"x-sum", b"").decode())
EOF
grep -q '"trailers": \[\["x-checksum", "abc"\]\]' "$ECHO_LOG" || fail "request trailer not at the origin: $(tail -c 400 "$ECHO_LOG")"
assert_grep "$T/trailers.out" '^raw 200 hello 42$' "response trailer over h2"

info "max-requests-per-connection: GOAWAY after the third stream"
timeout 10 nghttp -n -v -m 5 "http://127.0.0.1:$P_TE/m" >"$T/maxreq.out" 2>&1 || true
assert_eq "$(grep -Ec 'recv \(stream_id=[0-9]+\) :status: 200' "$T/maxreq.out")" 3 "streams served"
assert_grep "$T/maxreq.out" 'last_stream_id=17, error_code=NO_ERROR' "GOAWAY names the third stream"

info "<h2>: SETTINGS sent as configured; max-header-list enforced (431)"
timeout 10 nghttp -v "$C/a.txt" >"$T/settings.out" 2>&1 || true
assert_grep "$T/settings.out" 'SETTINGS_MAX_CONCURRENT_STREAMS\(0x03\):8' "max-concurrent-streams in SETTINGS"
assert_grep "$T/settings.out" 'SETTINGS_INITIAL_WINDOW_SIZE\(0x04\):262144' "initial-window in SETTINGS"
assert_grep "$T/settings.out" 'SETTINGS_MAX_HEADER_LIST_SIZE\(0x06\):4096' "max-header-list in SETTINGS"
code=$(curl -sS --max-time 10 --http2-prior-knowledge -H "X-Big: $(head -c 5000 /dev/zero | tr '\0' a)" -o /dev/null -w '%{http_code}' "$C/a.txt")
assert_eq "$code" 431 "over max-header-list"
assert_log "http2-error kind=header_list stream=1 "
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=GET host=127\.0\.0\.1:$P_C path=/a\.txt status=431 to-server=0 to-client=0 duration=[0-9.]+ verdict=deny server=- upstream=- rule=h2/@max-header-list proto=h2 stream=1$"
assert_metric ge proxyd_http2_errors_total 'kind="header_list"' 1

info "max-concurrent-streams: a client within it gets all; one over it is refused"
timeout 30 nghttp -n -s -m 8 "$C/a.txt" >"$T/m8.out" 2>&1 || fail "nghttp -m 8: $(tail -5 "$T/m8.out")"
assert_eq "$(grep -Ec ' 200 +6 /a\.txt$' "$T/m8.out")" 8 "8 streams at once"
/usr/bin/python3 - "$P_C" >"$T/streams.out" 2>&1 <<'EOF' || fail "streams: $(cat "$T/streams.out")"
import socket, sys
import h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
s.sendall(c.data_to_send())
# Learn the server's limit first (and acknowledge it), then open more
# streams than it allows without waiting, as a hostile client would.
settings = False
while not settings:
    for ev in c.receive_data(s.recv(65535)):
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            settings = True
s.sendall(c.data_to_send())
type(c).open_outbound_streams = property(lambda self: 0)
for i in range(12):
    c.send_headers(1 + 2 * i, [(":method", "GET"), (":path", "/a.txt"),
                               (":scheme", "http"), (":authority", "x")],
                   end_stream=True)
s.sendall(c.data_to_send())
refused = False
for _ in range(100):
    data = s.recv(65535)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.StreamReset) and ev.error_code == 7:
            refused = True
        if isinstance(ev, h2.events.ConnectionTerminated) and ev.error_code == 1:
            refused = True
    if refused:
        break
print("refused=%s" % refused)
EOF
assert_grep "$T/streams.out" '^refused=True$' "streams over the limit refused"
assert_log "http2-error kind=refused_stream stream=17 "
assert_metric ge proxyd_http2_errors_total 'kind="refused_stream"' 1

info "many refused streams: all counted, at most 16 http2-error lines per connection"
before=$(metric_value proxyd_http2_errors_total 'kind="refused_stream"')
timeout 30 nghttp -n -m 40 "$C/a.txt" >"$T/m40.out" 2>&1 || true
assert_metric ge proxyd_http2_errors_total 'kind="refused_stream"' $((before + 30))
assert_log "http2-error kind=refused_stream .* \(the connection's further http2-error lines are not logged; proxyd_http2_errors_total counts them\)$"
n=$(grep -c 'http2-error kind=refused_stream' "$PROXYD_LOG")
assert_lt "$n" 18 "http2-error lines for refused streams"

info "a connection error ends the connection with GOAWAY, counted and logged"
/usr/bin/python3 - "$P_C" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
# The preface, then a CONTINUATION where SETTINGS must come.
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x09\x00\x00\x00\x00\x00")
try:
    while s.recv(1000):
        pass
except Exception:
    pass
EOF
assert_log "http2-goaway error=PROTOCOL_ERROR last-stream=0$"
assert_log "session-end service=h2c .* by=client-fail phase=data end=client-error: http2: PROTOCOL_ERROR"
assert_metric ge proxyd_http2_errors_total 'kind="goaway"' 1

info "a request head that never completes: request-timeout closes the connection"
/usr/bin/python3 - "$P_C" >"$T/trickle.out" 2>&1 <<'EOF' || fail "trickle: $(cat "$T/trickle.out")"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
# The preface, empty SETTINGS, then HEADERS without END_HEADERS whose
# CONTINUATION never comes.
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
          + b"\x00\x00\x01\x01\x00\x00\x00\x00\x01\x82")
t0 = time.time()
try:
    while s.recv(65535):
        pass
except Exception:
    pass
print("closed after %.1f s" % (time.time() - t0))
EOF
assert_grep "$T/trickle.out" '^closed after [1-4]\.[0-9] s$' "closed after request-timeout (2s)"
assert_log "session-end service=h2c .* by=timeout .*end=client-error: http2: no complete request head within request-timeout"

info "rapid reset: the reset budget (200) ends the connection; reset streams start no transaction"
before=$(metric_value proxyd_analyser_events_total 'event="h2_streams"')
/usr/bin/python3 - "$P_C" >"$T/rapid.out" 2>&1 <<'EOF' || fail "rapid reset: $(cat "$T/rapid.out")"
import socket, sys
import h2.connection, h2.config, h2.events, h2.errors
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
s.sendall(c.data_to_send())
type(c).open_outbound_streams = property(lambda self: 0)
try:
    for i in range(1500):
        sid = 1 + 2 * i
        c.send_headers(sid, [(":method", "GET"), (":path", "/a.txt"),
                             (":scheme", "http"), (":authority", "x")], end_stream=True)
        c.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        if i % 50 == 49:
            s.sendall(c.data_to_send())
    s.sendall(c.data_to_send())
except OSError:
    pass
print("sent")
EOF
assert_log "http2-goaway error=ENHANCE_YOUR_CALM last-stream="
after=$(metric_value proxyd_analyser_events_total 'event="h2_streams"')
assert_lt $((after - before)) 50 "transactions started for reset streams"
assert_metric ge proxyd_http2_errors_total 'kind="client_reset"' 200

info "TLS terminate: ALPN h2 with curl --http2"
code=$(curl -sS --max-time 30 --http2 --cacert "$P/ca.pem" -o "$T/big.t" -w '%{http_code} %{http_version}' "https://localhost:$P_T/big.bin")
assert_eq "$code" "200 2" "h2 over TLS terminate"
assert_eq "$(sha256_of "$T/big.t")" "$SHA_BIG" "sha256 through h2 over TLS"
code=$(curl -sS --max-time 30 --http1.1 --cacert "$P/ca.pem" -o /dev/null -w '%{http_code} %{http_version}' "https://localhost:$P_T/a.txt")
assert_eq "$code" "200 1.1" "http/1.1 still chosen by a client that asks for it"
code=$(curl -sS --max-time 30 --http2 --cacert "$P/ca.pem" -o /dev/null -w '%{http_code} %{http_version}' "https://localhost:$P_OFF/a.txt")
assert_eq "$code" "200 1.1" "no h2 offered without h2=\"yes\""

info "keybridge: ALPN h2, the server still reached over HTTP/1.1 with TLS"
code=$(curl -sS --max-time 30 --http2 --cacert "$P/kb-ca.pem" --resolve "origin.test:$P_K:127.0.0.1" \
    -o "$T/big.k" -w '%{http_code} %{http_version}' "https://origin.test:$P_K/big.bin")
assert_eq "$code" "200 2" "h2 through keybridge"
assert_eq "$(sha256_of "$T/big.k")" "$SHA_BIG" "sha256 through h2 keybridge"
assert_log "http-request .* host=origin\.test path=/big\.bin status=200 .* server=127\.0\.0\.1:$NGX_TLS .* proto=h2 stream=1$"

if command -v chromium >/dev/null; then
    info "Chromium through keybridge negotiates h2"
    timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage \
        --user-data-dir="$T/chromium" --ignore-certificate-errors \
        --host-resolver-rules="MAP origin.test 127.0.0.1" \
        --dump-dom "https://origin.test:$P_K/page.html" >"$T/chromium.out" 2>"$T/chromium.err" ||
        fail "chromium: $(tail -5 "$T/chromium.err")"
    assert_grep "$T/chromium.out" 'page-through-h2' "the page Chromium got through keybridge"
    assert_log "http-request .* host=origin\.test path=/page\.html status=200 .* proto=h2 stream=[0-9]+$"
fi

info "TLS, ALPN h2, then no HTTP/2 preface: bad_preface counted and logged"
/usr/bin/python3 - "$P_T" "$P/ca.pem" >"$T/badpreface.out" 2>&1 <<'EOF' || fail "bad preface client: $(cat "$T/badpreface.out")"
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
ctx.set_alpn_protocols(["h2"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5),
                    server_hostname="localhost")
assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
try:
    while s.recv(1000):
        pass
except Exception:
    pass
print("done")
EOF
assert_log "http2-error kind=bad_preface stream=0 "
assert_metric ge proxyd_http2_errors_total 'kind="bad_preface"' 1

info "reload: an idle h2 connection gets GOAWAY(NO_ERROR) and closes"
# First six streams one after the other: each finds the leg the one
# before left idle in keep-alive (one leg session, not six), and each
# http-request line names its own stream. The kept leg is idle when the
# reload comes: it serves no stream after it (closed with it).
/usr/bin/python3 - "$P_C" "$T/h2go" >"$T/reload.out" 2>&1 <<'EOF' &
import os, socket, sys, time
import h2.connection, h2.config, h2.events
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
print("port=%d" % s.getsockname()[1], flush=True)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
s.sendall(c.data_to_send())
# proxyd speaks HTTP/2 on it once its SETTINGS came: then reload.
settings = False
while not settings:
    for ev in c.receive_data(s.recv(65535)):
        settings = settings or isinstance(ev, h2.events.RemoteSettingsChanged)
s.sendall(c.data_to_send())
for k in range(1, 7):
    sid = 2 * k - 1
    c.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                         (":authority", "127.0.0.1"),
                         (":path", "/a.txt?k=%d" % k)], end_stream=True)
    s.sendall(c.data_to_send())
    ended, status = False, None
    while not ended:
        for ev in c.receive_data(s.recv(65535)):
            if isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers)[b":status"].decode()
            if isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length,
                                            ev.stream_id)
            ended = ended or (isinstance(ev, h2.events.StreamEnded) and
                              ev.stream_id == sid)
        s.sendall(c.data_to_send())
    print("stream=%d status=%s" % (sid, status), flush=True)
open(sys.argv[2], "w").close()
result = "none"
for _ in range(100):
    data = s.recv(65535)
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ConnectionTerminated):
            result = "goaway=%d" % ev.error_code
    s.sendall(c.data_to_send())
print(result)
EOF
RPID=$!
for ((i = 0; i < 200; i++)); do [[ -e $T/h2go ]] && break; sleep 0.05; done
[[ -e $T/h2go ]] || fail "the six streams before the reload: $(cat "$T/reload.out")"
RPORT=$(sed -n 's/^port=//p' "$T/reload.out")
for k in 1 2 3 4 5 6; do
    assert_grep "$T/reload.out" "^stream=$((2 * k - 1)) status=200$" "stream $((2 * k - 1)) answered"
    assert_log "client=127\.0\.0\.1:$RPORT method=GET host=127\.0\.0\.1 path=/a\.txt\?k=$k status=200 .* proto=h2 stream=$((2 * k - 1))$"
done
sids=$(grep -E "#[0-9]+ http-request client=127\.0\.0\.1:$RPORT .* proto=h2 " "$PROXYD_LOG" |
    sed -E 's/.*#([0-9]+) .*/\1/' | sort -u | wc -l)
info "six streams in a row: $sids session(s)"
assert_eq "$sids" 1 "sessions for six streams one after the other"
# The connection's session is still open: no session-end line of it yet
# (its one line comes after the reload's GOAWAY, below).
assert_no_grep "$PROXYD_LOG" "session-end .* client=127\.0\.0\.1:$RPORT " \
    "the h2 connection's session ended before the reload"
# HTTP/1.1 keep-alive connections opened after the h2 one, idle after
# one request: the reload closes them too. (A session a reload ends may
# be the one after in its worker's list: the walk that told sessions of
# the reload used to stop there, so the connections after it on that
# worker were never closed. Four, so that some are on the h2
# connection's worker whichever way they are spread.)
/usr/bin/python3 - "$P_C" "$T/kago" >"$T/ka.out" 2>&1 <<'EOF' &
import socket, sys
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
         for _ in range(4)]
for s in socks:
    print("port=%d" % s.getsockname()[1], flush=True)
    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(65535)
        if not d:
            break
        got += d
    print("status=%s" % got.split(b" ")[1].decode(), flush=True)
open(sys.argv[2], "w").close()
for s in socks:
    while s.recv(65535):
        pass
    print("closed", flush=True)
EOF
KPID=$!
for ((i = 0; i < 200; i++)); do [[ -e $T/kago ]] && break; sleep 0.05; done
[[ -e $T/kago ]] || fail "the HTTP/1.1 keep-alive clients before the reload: $(cat "$T/ka.out")"
assert_eq "$(grep -c '^status=200$' "$T/ka.out")" 4 "the keep-alive connections' requests"
kill -HUP "$PROXYD_PID"
assert_log 'reload done'
for KPORT in $(sed -n 's/^port=//p' "$T/ka.out"); do
    assert_log "session-end .* client=127\.0\.0\.1:$KPORT .* end=reload: idle keep-alive connection closed$"
done
wait "$KPID" || true
assert_eq "$(grep -c '^closed$' "$T/ka.out")" 4 "idle HTTP/1.1 connections closed at the reload"
# The h2 connection itself ends after the reload's GOAWAY.
assert_log "session-end .* client=127\.0\.0\.1:$RPORT .* by=[a-z]+ phase=data end=[a-z].*$"
wait "$RPID" || true
assert_grep "$T/reload.out" '^goaway=0$' "GOAWAY NO_ERROR at the reload"

info "streams' server connections: a burst past server-pool stays pooled for the next one"
new0=$(metric_value proxyd_upstream_connections_total 'kind="new"')
h2load -n 400 -c 1 -m 8 "http://127.0.0.1:$P_P/page.html" >"$T/h2load.out" 2>&1 ||
    fail "h2load: $(tail -3 "$T/h2load.out")"
assert_grep "$T/h2load.out" '400 succeeded' "h2load's 400 requests"
new1=$(metric_value proxyd_upstream_connections_total 'kind="new"')
info "new server connections for 400 streams, 8 at once, server-pool 2: $((new1 - new0))"
# (Were closed past the pool's 2 as each burst ended and opened again for
# the next: 277.)
((new1 - new0 <= 24)) || fail "$((new1 - new0)) new server connections for 400 streams 8 at a time"

assert_metric ge proxyd_analyser_events_total 'event="h2_connections"' 8
assert_metric ge proxyd_analyser_events_total 'event="h2_streams"' 10
assert_metric ge proxyd_http_requests_total 'proto="h2"' 10
assert_metric ge proxyd_http_requests_total 'proto="http/1.1"' 2
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
