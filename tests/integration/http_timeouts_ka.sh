#!/usr/bin/env bash
# http analyser timeouts on a keep-alive connection, whose timer is set and
# stopped several times per request (and only moved when a deadline comes
# earlier, core/session_api.c): with request-timeout 1s and
# response-timeout 5s, a connection left idle after a response is closed
# 1 s after it, and a request head left incomplete after a response gets
# its 408 1 s after the response, even though a 5 s deadline was set in
# between; with request-timeout 5s and response-timeout 1s, a silent
# server gets its 504 after 1 s, not 5.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx python3
setup

printf 'alpha\n' >"$T/www/a.txt"
start_nginx
start_py_server SILENT <<'PYEOF'
def handle(c):
    c.settimeout(8)
    try:
        while c.recv(4096):
            pass
    except OSError:
        pass
PYEOF
free_port PA
free_port PB
write_proxyd_conf
write_http_service ka "$PA" "$NGINX_PORT" '<http><limits request-timeout="1s" response-timeout="5s"/></http>'
write_http_service silent "$PB" "$SILENT" '<http><limits request-timeout="5s" response-timeout="1s"/></http>'
start_proxyd

cat >"$T/client.py" <<'PYEOF'
import socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=8)
req = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"

def read_until_close(limit):
    """bytes until EOF/RST (at most limit s), and when it came"""
    s.settimeout(limit)
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except (socket.timeout, ConnectionResetError):
        pass
    return data, time.monotonic()

def one_response():
    """the first response, whole (nginx's a.txt: 6 bytes)"""
    data = b""
    while not data.endswith(b"alpha\n"):
        d = s.recv(4096)
        if not d:
            sys.exit("closed before the response")
        data += d
    return time.monotonic()

if mode == "silent":
    t0 = time.monotonic()
    s.sendall(req)
    data, t1 = read_until_close(8)
    print("%s %.3f" % (data.split(b" ")[1].decode() if data else "-", t1 - t0))
    sys.exit(0)
# the connection's first deadline (request-timeout) is set at accept: the
# request comes half-way to it, so the later ones only move it
time.sleep(0.5)
s.sendall(req)
t_resp = one_response()
if mode == "slowhead":
    time.sleep(0.3)
    s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n")
data, t1 = read_until_close(8)
print("%s %.3f" % (data.split(b" ")[1].decode() if data else "-", t1 - t_resp))
PYEOF

# in_range VALUE MIN MAX (seconds, decimals)
in_range() { python3 -c "import sys; sys.exit(0 if $2 <= $1 <= $3 else 1)"; }

read -r st dt < <(python3 "$T/client.py" idle "$PA")
info "idle keep-alive connection: closed ${dt}s after the response ($st)"
assert_eq "$st" - "nothing sent to an idle connection"
in_range "$dt" 0.9 1.6 || fail "idle keep-alive connection closed ${dt}s after the response, not at request-timeout (1s)"

read -r st dt < <(python3 "$T/client.py" slowhead "$PA")
info "incomplete head after a response: $st ${dt}s after the response"
assert_eq "$st" 408 "incomplete head"
in_range "$dt" 0.9 1.6 || fail "408 ${dt}s after the response, not at request-timeout (1s)"
assert_log 'http-error status=408 reason="no complete request head within request-timeout"'

read -r st dt < <(python3 "$T/client.py" silent "$PB")
info "silent server: $st after ${dt}s"
assert_eq "$st" 504 "silent server"
in_range "$dt" 0.9 1.6 || fail "504 after ${dt}s, not at response-timeout (1s)"
assert_log 'http-error status=504 reason="no response within response-timeout"'
http_done
