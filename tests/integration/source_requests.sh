#!/usr/bin/env bash
# <source-limits requests=> on http services, 2 workers, clients on their own
# loopback addresses, nginx behind:
# - requests="20/s" (a bucket of 20): one source asking 500 times a second
#   over 2 keep-alive connections for 2 s gets what the bucket's arithmetic
#   on its own send times lets through (within 10 %), every other request
#   answered 429 with Retry-After: 1 on the same connection (none closed);
#   5 other sources asking 10 a second are all served; nginx's access log
#   has exactly the served requests; proxyd_limited_total{limit="requests"}
#   is the 429s exactly and the "limited ... limit=requests" line comes at
#   most once a second;
# - requests="1/m": a second request gets 429 with Retry-After: 60 and the
#   connection stays open for the next one; a request with a body gets 429
#   and Connection: close; HTTP/2 (h2c) streams count alike, each stream one
#   request (of three streams on one connection, one 200 and two 429 with
#   retry-after).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx python3 nghttp
setup

cat >"$T/ka.py" <<'EOF'
# ka.py PORT SRC CONNS SECONDS: CONNS keep-alive connections from SRC, each
# sending GET /f?s=SRC&n=I one after the other for SECONDS. Prints
# "sent ok limited other reconnects secs want": secs from the first send to
# the last answer (proxyd judged every request within it), want the
# bucket's arithmetic (20/s, burst 20) on the send times; then the ids
# served, then the Retry-After values seen.
import socket, sys, threading, time
port, src, conns, dur = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
lock = threading.Lock()
sent, ok, lim, other, reconn, served, retry, times = 0, 0, 0, [], 0, [], set(), []
last = [0.0]
seq = [0]
def connect():
    s = socket.socket(); s.bind((src, 0)); s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s, b""
def response(s, buf):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d: raise EOFError
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    h = {}
    for l in lines[1:]:
        k, v = l.split(b":", 1)
        h[k.strip().lower()] = v.strip()
    n = int(h.get(b"content-length", b"0"))
    while len(buf) < n:
        d = s.recv(65536)
        if not d: raise EOFError
        buf += d
    return status, h, buf[:n], buf[n:]
def run(t0):
    global sent, ok, lim, reconn
    s, buf = connect()
    while time.monotonic() - t0 < dur:
        with lock:
            seq[0] += 1; n = seq[0]
            ts = time.monotonic(); times.append(ts); sent += 1
        s.sendall(b"GET /f?s=%s&n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (src.encode(), n))
        try:
            st, h, body, buf = response(s, buf)
        except (EOFError, OSError) as e:
            with lock: other.append("conn %r" % e); reconn += 1
            s.close(); s, buf = connect(); continue
        with lock:
            last[0] = max(last[0], time.monotonic())
            if st == 200 and body == b"ok\n":
                ok += 1; served.append(n)
            elif st == 429:
                lim += 1; retry.add(h.get(b"retry-after", b"-").decode())
                if h.get(b"connection") != b"keep-alive":
                    other.append("429 without keep-alive")
            else:
                other.append(st)
        if h.get(b"connection") == b"close":
            s.close(); s, buf = connect(); reconn += 1
        # 250 a second per connection at most: 25 times the rate, without
        # a log of 100 000 lines.
        time.sleep(max(0, 0.004 - (time.monotonic() - ts)))
    s.close()
t0 = time.monotonic()
th = [threading.Thread(target=run, args=(t0,)) for _ in range(conns)]
for x in th: x.start()
for x in th: x.join()
times.sort()
tat, want = 0.0, 0
for t in times:
    if tat <= t + 19 * 0.05:
        tat = max(tat, t) + 0.05
        want += 1
print(sent, ok, lim, len(other), reconn, "%.3f" % (last[0] - times[0]), want, other[:3])
print(" ".join(str(n) for n in sorted(served)))
print(" ".join(sorted(retry)))
EOF

cat >"$T/others.py" <<'EOF'
# others.py PORT N: sources 127.0.0.10..14 each make N keep-alive requests,
# 10 a second; prints the number that failed.
import socket, sys, threading, time
port, n = int(sys.argv[1]), int(sys.argv[2])
bad = []
def run(src):
    s = socket.socket(); s.bind((src, 0)); s.settimeout(10)
    s.connect(("127.0.0.1", port))
    for i in range(n):
        t = time.monotonic()
        try:
            s.sendall(b"GET /f?s=%s&n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % (src.encode(), i))
            got = b""
            while not got.endswith(b"\r\n\r\nok\n") and not got.startswith(b"HTTP/1.1 429"):
                d = s.recv(65536)
                if not d: break
                got += d
            if not (got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n")):
                bad.append((src, got[:40]))
        except OSError as e:
            bad.append((src, repr(e)))
        time.sleep(max(0, 0.1 - (time.monotonic() - t)))
    s.close()
th = [threading.Thread(target=run, args=("127.0.0.%d" % i,)) for i in range(10, 15)]
for x in th: x.start()
for x in th: x.join()
print(len(bad), bad[:3], flush=True)
EOF

cat >"$T/one.py" <<'EOF'
# one.py PORT SRC: on one connection from SRC, GET /a, GET /b, GET /c, then
# POST /d with a 5-byte body; prints per request "STATUS RETRY-AFTER
# CONNECTION", then "open" or "closed" for the connection after the POST.
import socket, sys
port, src = int(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.bind((src, 0)); s.settimeout(5)
s.connect(("127.0.0.1", port))
buf = b""
def resp():
    global buf
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d: return "EOF"
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    h = {}
    for l in lines[1:]:
        k, v = l.split(b":", 1)
        h[k.strip().lower()] = v.strip().decode()
    n = int(h.get(b"content-length", "0"))
    while len(buf) < n:
        buf += s.recv(65536)
    buf = buf[n:]
    return "%s %s %s" % (lines[0].split()[1].decode(), h.get(b"retry-after", "-"), h.get(b"connection", "-"))
for p in (b"/a", b"/b", b"/c"):
    s.sendall(b"GET " + p + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    print(resp())
s.sendall(b"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
print(resp())
try:
    print("closed" if s.recv(1) == b"" else "open")
except socket.timeout:
    print("open")
EOF

printf 'ok\n' >"$T/www/f"
printf 'ok\n' >"$T/www/a"
start_nginx
free_port PW
free_port PM
write_proxyd_conf 'max-sessions="10000"'
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_http_service web "$PW" "$NGINX_PORT" '<source-limits requests="20/s"/>'
write_http_service minute "$PM" "$NGINX_PORT" '<source-limits requests="1/m"/>
  <http h2c="yes"/>'
start_proxyd
NGINX_LOG=$T/nginx/logs/access.log

info "127.0.0.2 asks 500 times a second over 2 keep-alive connections for 2 s; 5 others 10 a second"
python3 "$T/others.py" "$PW" 20 >"$T/others.out" 2>&1 &
OTHERS=$!
track_pid "$OTHERS"
timeout 40 python3 "$T/ka.py" "$PW" 127.0.0.2 2 2 >"$T/ka.out" || fail "keep-alive client failed: $(cat "$T/ka.out")"
wait_exit "$OTHERS" 30 || fail "the other sources did not finish"
read -r sent served limited others reconn secs want rest < <(head -n 1 "$T/ka.out")
info "127.0.0.2: $sent sent in $secs s, $served served, $limited answered 429, $others other, $reconn reconnects; the bucket lets $want through; others: $(cat "$T/others.out")"
assert_eq "$others" 0 "answers neither 200 nor 429 with keep-alive ($rest)"
assert_eq "$reconn" 0 "connections closed by proxyd"
assert_eq "$((served + limited))" "$sent" "served + 429"
assert_eq "$(sed -n 3p "$T/ka.out")" 1 "Retry-After of the 429s at 20/s"
max=$(awk -v s="$secs" 'BEGIN { printf "%d", 20 + 20 * s + 2 }')
assert_ge "$sent" $((5 * max)) "requests sent (the client must outrun the rate to test it)"
((served <= max)) || fail "$served served, more than burst 20 + 20/s x $secs s"
lo=$((want - want / 10 - 3)) hi=$((want + want / 10 + 3))
((served >= lo && served <= hi)) || fail "$served served, the bucket's arithmetic on the send times says $want (+-10 %)"
assert_eq "$(awk '{ print $1 }' "$T/others.out")" 0 "requests of the 5 other sources that failed"
assert_metric eq proxyd_limited_total 'service="web",analyser="http",limit="requests"' "$limited"
# nginx saw exactly the served requests of 127.0.0.2 (its line is written
# as the response goes: waited for).
sed -n 2p "$T/ka.out" | tr ' ' '\n' | sed '/^$/d' | sort >"$T/served.ids"
got=0
for ((i = 0; i < 50; i++)); do
    got=$(grep -c 'GET /f?s=127\.0\.0\.2&' "$NGINX_LOG" || true)
    ((got >= served)) && break
    sleep 0.1
done
sed -nE 's/.*GET \/f\?s=127\.0\.0\.2&n=([0-9]+) .*/\1/p' "$NGINX_LOG" | sort >"$T/nginx.ids"
cmp -s "$T/served.ids" "$T/nginx.ids" || fail "nginx saw $(wc -l <"$T/nginx.ids") requests of 127.0.0.2, the client was served $served: $(diff "$T/served.ids" "$T/nginx.ids" | head -n 5 | tr '\n' ' ')"
assert_eq "$(grep -c 'GET /f?s=127\.0\.0\.1[0-4]&' "$NGINX_LOG" || true)" 100 "requests of the other sources at nginx"
assert_log "limited service=web client=127\\.0\\.0\\.2:[0-9]+ source=127\\.0\\.0\\.2 limit=requests rule=web\\.xml:[0-9]+ refused=[0-9]+$"
nl=$(grep -c 'limited service=web .* source=127\.0\.0\.2 limit=requests' "$PROXYD_LOG" || true)
maxl=$(awk -v s="$secs" 'BEGIN { printf "%d", s + 2 }')
((nl >= 1 && nl <= maxl)) || fail "$nl limited lines for 127.0.0.2 in $secs s (at most one a second: <= $maxl)"
sum=$(sed -nE 's/.*limited service=web .* refused=([0-9]+)$/\1/p' "$PROXYD_LOG" | awk '{ s += $1 } END { print s + 0 }')
((sum <= limited && sum >= limited / 4)) || fail "the limited lines stand for $sum refusals of $limited"
assert_no_grep "$PROXYD_LOG" 'limited service=web .* source=127\.0\.0\.1[0-4]' "another source was limited"
assert_log "http-request client=127\\.0\\.0\\.2:[0-9]+ method=GET host=x path=/f\\?s=127\\.0\\.0\\.2&n=[0-9]+ status=429 .*verdict=deny .*rule=web\\.xml:[0-9]+"

info "requests=1/m: keep-alive kept after a 429, a request with a body closes"
python3 "$T/one.py" "$PM" 127.0.0.3 >"$T/one.out" 2>&1 || fail "one.py: $(cat "$T/one.out")"
info "$(tr '\n' '|' <"$T/one.out")"
assert_eq "$(sed -n 1p "$T/one.out")" "200 - -" "first request of 127.0.0.3"
r=$(sed -n 2p "$T/one.out")
[[ $r == "429 60 keep-alive" || $r == "429 59 keep-alive" ]] || fail "second request: '$r', expected 429 with Retry-After 60 and keep-alive"
r=$(sed -n 3p "$T/one.out")
[[ $r == "429 60 keep-alive" || $r == "429 59 keep-alive" ]] || fail "third request on the same connection: '$r'"
r=$(sed -n 4p "$T/one.out")
[[ $r == "429 60 close" || $r == "429 59 close" ]] || fail "POST with a body: '$r', expected 429 and Connection: close"
assert_eq "$(sed -n 5p "$T/one.out")" closed "the connection after the POST's 429"
assert_eq "$(grep -cE '"(GET /[bc]|POST /d) ' "$NGINX_LOG" || true)" 0 "refused requests of 127.0.0.3 at nginx"
assert_eq "$(grep -cE '"GET /a ' "$NGINX_LOG" || true)" 1 "served request of 127.0.0.3 at nginx"
assert_log "limited service=minute client=127\\.0\\.0\\.3:[0-9]+ source=127\\.0\\.0\\.3 limit=requests rule=minute\\.xml:[0-9]+ refused=1$"

info "h2c: each stream takes a token (nghttp, three streams on one connection, from 127.0.0.1)"
timeout 10 nghttp -n -v -s "http://127.0.0.1:$PM/a?h2=1" "http://127.0.0.1:$PM/a?h2=2" \
    "http://127.0.0.1:$PM/a?h2=3" >"$T/h2.out" 2>&1 || fail "nghttp: $(tail -n 5 "$T/h2.out")"
assert_eq "$(grep -cE ' 200 +3 /a\?h2=[123]$' "$T/h2.out" || true)" 1 "h2 streams served"
assert_eq "$(grep -cE ' 429 +[0-9]+ /a\?h2=[123]$' "$T/h2.out" || true)" 2 "h2 streams answered 429"
assert_eq "$(grep -cE 'recv \(stream_id=[0-9]+\) retry-after: (59|60)$' "$T/h2.out" || true)" 2 "retry-after on the h2 429s"
assert_eq "$(grep -c 'GET /a?h2=' "$NGINX_LOG" || true)" 1 "h2c requests at nginx"
assert_metric eq proxyd_limited_total 'service="minute",analyser="http",limit="requests"' 5
assert_log "http-request client=127\\.0\\.0\\.1:[0-9]+ method=GET .*status=429 .*proto=h2 stream=[0-9]+"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
