#!/usr/bin/env bash
# <source-limits> refuses in the protocol's own words where it has them,
# then closes with a FIN (not a reset):
# - ftp: "421 Too many sessions|connections from your address ..." instead
#   of the greeting (ftplib and lftp see a 421), sessions="1" (one held,
#   the next refused) and connections="1/m" (the second refused); under
#   per="prefix" the text says "from your network" (another address of
#   the /24 refused);
# - r66: a ConnectionError on [NOCHANNEL,NOCHANNEL] with ErrorCode 'l'
#   (r66peer's client prints it), connections="1/m";
# - http: 429 Too Many Requests, Retry-After (the bucket's wait; 1 for
#   sessions=), Connection: close, for sessions="1" and connections="1/m";
# - plug: still a reset.
# Each refusal counted in proxyd_limited_total{service,limit} and named by
# a "limited ... limit= rule=" line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_ftp
need_cmds nginx lftp curl python3
need_r66peer
setup

start_vsftpd
start_nginx
printf 'ok\n' >"$T/www/f"
start_r66_server
mkdir -p "$T/cli"
head -c 10K /dev/urandom >"$T/cli/a.bin"
head -c 10K /dev/urandom >"$T/cli/b.bin"

free_port FS
free_port FC
free_port FP
free_port RC
free_port HS
free_port HC
free_port PC
write_proxyd_conf
write_ftp_service ftps1 "$FS" '<source-limits sessions="1"/>'
write_ftp_service ftpc1 "$FC" '<source-limits connections="1/m" burst="1"/>'
write_ftp_service ftpp1 "$FP" '<source-limits per="prefix" prefix-v4="24" sessions="1"/>'
write_r66_service r66c1 "$RC" "$R66_SRV_PORT" '<source-limits connections="1/m" burst="1"/>'
write_service plugc1 "$PC" "$NGINX_PORT" '<source-limits connections="1/m" burst="1"/>'
cat >"$T/policy/https1.xml" <<EOF
<service name="https1" analyser="http">
  <listen address="127.0.0.1" port="$HS" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <source-limits sessions="1"/>
</service>
EOF
cat >"$T/policy/httpc1.xml" <<EOF
<service name="httpc1" analyser="http">
  <listen address="127.0.0.1" port="$HC" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <source-limits connections="1/m" burst="1"/>
</service>
EOF
PROXYD_PORTS+=("$HS" "$HC")
start_proxyd

cat >"$T/ftp2.py" <<'EOF'
# ftp2.py PORT HOLD [SRC2]: the first client logs in (and, HOLD=1, stays
# logged in); the second (from SRC2, default 127.0.0.1) connects: prints
# what each got ("OK" or the reply).
import ftplib, sys
port, hold = int(sys.argv[1]), sys.argv[2] == "1"
src2 = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
a = ftplib.FTP()
a.connect("127.0.0.1", port, timeout=10)
a.login()
print("first", a.pwd() and "OK", flush=True)
if not hold:
    a.quit()
b = ftplib.FTP(source_address=(src2, 0))
try:
    b.connect("127.0.0.1", port, timeout=10)
    b.login()
    print("second OK", flush=True)
except ftplib.error_temp as e:
    print("second", str(e), flush=True)
except (ConnectionResetError, EOFError, OSError) as e:
    print("second", type(e).__name__, flush=True)
if hold:
    a.quit()
EOF

info "ftp sessions=1: a second session of the source gets 421"
out=$(timeout 30 python3 "$T/ftp2.py" "$FS" 1)
info "$out"
assert_grep <(echo "$out") '^first OK$' "the first ftp session"
assert_grep <(echo "$out") '^second 421 Too many sessions from your address \(source limit: sessions\), try again in 1 s\.$' \
    "ftplib's second session refused with 421 (sessions)"
wait_grep "$PROXYD_LOG" 'limited service=ftps1 client=127\.0\.0\.1:[0-9]+ source=127\.0\.0\.1 limit=sessions rule=ftps1\.xml:4 refused=1' 5 ||
    fail "no limited line for ftps1"
assert_metric eq proxyd_limited_total 'service="ftps1",analyser="ftp",limit="sessions"' 1

info "ftp per=\"prefix\" sessions=1: 127.0.0.2 gets 421 while 127.0.0.1 holds the /24's session"
out=$(timeout 30 python3 "$T/ftp2.py" "$FP" 1 127.0.0.2)
info "$out"
assert_grep <(echo "$out") '^first OK$' "the first ftp session of the /24"
assert_grep <(echo "$out") '^second 421 Too many sessions from your network \(source limit: sessions\), try again in 1 s\.$' \
    "the /24's second session refused with 421 naming the network"
wait_grep "$PROXYD_LOG" 'limited service=ftpp1 client=127\.0\.0\.2:[0-9]+ source=127\.0\.0\.0/24 limit=sessions rule=ftpp1\.xml:4 refused=1' 5 ||
    fail "no limited line for ftpp1"

info "ftp connections=1/m: the second connection gets 421 (ftplib, then lftp)"
out=$(timeout 30 python3 "$T/ftp2.py" "$FC" 0)
info "$out"
assert_grep <(echo "$out") '^first OK$' "the first ftp connection"
assert_grep <(echo "$out") '^second 421 Too many connections from your address \(source limit: connections\), try again in [0-9]+ s\.$' \
    "ftplib's second connection refused with 421 (connections)"
secs=$(echo "$out" | sed -n 's/.*try again in \([0-9]*\) s\..*/\1/p')
assert_ge "$secs" 55 "the wait a 1/m bucket gives (s)"
assert_lt "$secs" 61 "the wait a 1/m bucket gives (s)"
lrc=0
timeout 30 lftp -d -e 'set net:max-retries 1; set net:reconnect-interval-base 1; ls; bye' \
    -u anonymous,x "ftp://127.0.0.1:$FC" >"$T/lftp.out" 2>&1 || lrc=$?
assert_ne "$lrc" 0 "lftp's exit status when refused"
assert_grep "$T/lftp.out" '<--- 421 Too many connections from your address' "lftp saw the 421"
assert_metric eq proxyd_limited_total 'service="ftpc1",analyser="ftp",limit="connections"' 2

info "r66 connections=1/m: the second client gets a ConnectionError"
r66c "$RC" hosta:pwA --rule in --mode 1 --send "$T/cli/a.bin"
[[ $R66_RC == 0 ]] || fail "the first r66 transfer failed: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$R66_SRV_DIR/a.bin")" "$(sha256_of "$T/cli/a.bin")" "a.bin on the server"
r66c "$RC" hosta:pwA --rule in --mode 1 --send "$T/cli/b.bin"
assert_ne "$R66_RC" 0 "the refused r66 client's exit status"
assert_grep "$T/client.err" 'connection error packet from server: msg=Too many connections from your address \(proxy source limit: connections\), try again in [0-9]+ s mid=l' \
    "r66peer got the ConnectionError"
[[ ! -e $R66_SRV_DIR/b.bin ]] || fail "b.bin reached the server"
wait_grep "$PROXYD_LOG" 'limited service=r66c1 .* limit=connections rule=r66c1\.xml:' 5 ||
    fail "no limited line for r66c1"
assert_metric eq proxyd_limited_total 'service="r66c1",analyser="r66",limit="connections"' 1

info "http sessions=1: a second connection gets 429 while one is held"
cat >"$T/hold1.py" <<'EOF'
# hold1.py PORT: one keep-alive request, answered; then holds the
# connection until stdin closes.
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
got = b""
while not got.endswith(b"ok\n"):
    d = s.recv(65536)
    if not d:
        break
    got += d
print("held" if got.startswith(b"HTTP/1.1 200") else "not served", flush=True)
sys.stdin.read()
EOF
mkfifo "$T/hold.in"
python3 "$T/hold1.py" "$HS" <"$T/hold.in" >"$T/hold.out" 2>&1 &
HOLD_PID=$!
track_pid "$HOLD_PID"
exec 7>"$T/hold.in"
wait_grep "$T/hold.out" '^held$' 10 || fail "the held http session was not served: $(cat "$T/hold.out")"
curl -sS --max-time 10 -D "$T/h429.txt" -o "$T/b429.html" "http://127.0.0.1:$HS/f" || fail "curl failed on the refused connection"
tr -d '\r' <"$T/h429.txt" >"$T/h429"
assert_grep "$T/h429" '^HTTP/1.1 429 Too Many Requests$' "429 for sessions="
assert_grep "$T/h429" '^Retry-After: 1$' "Retry-After for sessions="
assert_grep "$T/h429" '^Connection: close$' "Connection: close"
assert_grep "$T/b429.html" 'too many sessions from your address' "the 429 page says why"
exec 7>&-
wait_exit "$HOLD_PID" 10 || true
wait_grep "$PROXYD_LOG" 'limited service=https1 .* limit=sessions ' 5 || fail "no limited line for https1"
assert_metric eq proxyd_limited_total 'service="https1",analyser="http",limit="sessions"' 1

info "http connections=1/m: the second connection gets 429 with the bucket's wait"
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HC/f")
assert_eq "$code" 200 "the first http connection"
curl -sS --max-time 10 -D "$T/h429c.txt" -o /dev/null "http://127.0.0.1:$HC/f" || fail "curl failed on the refused connection"
tr -d '\r' <"$T/h429c.txt" >"$T/h429c"
assert_grep "$T/h429c" '^HTTP/1.1 429 Too Many Requests$' "429 for connections="
ra=$(sed -n 's/^Retry-After: //p' "$T/h429c")
assert_ge "$ra" 55 "Retry-After of a 1/m bucket"
assert_lt "$ra" 61 "Retry-After of a 1/m bucket"
assert_metric eq proxyd_limited_total 'service="httpc1",analyser="http",limit="connections"' 1
assert_eq "$(grep -c 'GET /f' "$T/nginx/logs/access.log")" 2 \
    "requests nginx saw (the refused ones never reach it)"

info "plug: still a reset"
out=$(python3 - "$PC" <<'EOF'
import socket, sys
port = int(sys.argv[1])
res = []
for i in range(2):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
        res.append("served" if got.endswith(b"ok\n") else "eof")
    except ConnectionResetError:
        res.append("reset")
print(" ".join(res))
EOF
)
assert_eq "$out" "served reset" "plug connections: served, then a reset"

r66_finish
info "PASS"
