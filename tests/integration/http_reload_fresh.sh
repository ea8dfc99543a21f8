#!/usr/bin/env bash
# A reload does not reset an HTTP/1 client that did nothing wrong: only an
# idle keep-alive connection that served requests and has nothing more to
# read is closed at the reload (cleanly, a FIN). A connection that served
# no request yet (just accepted and silent, or its first request written
# just before the reload) gets that request served, answered with
# Connection: close; so does an idle one whose next request is in the
# socket, not read yet, when the worker acts on the reload (strace holds
# the worker so that it is; requests written just before the reload race
# with it and are only checked for their 200 and no reset).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx python3 strace
setup

echo "hello" >"$T/www/hello.txt"
start_nginx
free_port P
write_proxyd_conf
# One worker: the one strace holds below
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
# request-timeout far beyond the test's waits: a close seen here is the
# reload's
write_http_service web "$P" "$NGINX_PORT" '<http><limits request-timeout="5m"/></http>'
start_proxyd

cat >"$T/client.py" <<'PY'
import socket, sys, time, os
port, reloaded = int(sys.argv[1]), sys.argv[2]
N = 3

def wait_file(path):
    deadline = time.time() + 20
    while not os.path.exists(path):
        if time.time() > deadline:
            sys.exit("timed out waiting for " + path)
        time.sleep(0.05)

def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(15)
    return s

def get(s):
    s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")

def response(s):
    """status, whether it said Connection: close, whether EOF followed
    (a reset anywhere: "reset")."""
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return "eof", False, True
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        length, close = 0, False
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"content-length":
                length = int(v)
            if k == b"connection" and v.strip().lower() == b"close":
                close = True
        while len(rest) < length:
            d = s.recv(65536)
            if not d:
                return "cut", close, True
            rest += d
        st = head.split(b" ")[1].decode()
        return st, close, s.recv(1) == b"" if close else False
    except ConnectionResetError:
        return "reset", False, False

def closed(s):
    try:
        return "eof" if s.recv(1) == b"" else "data"
    except ConnectionResetError:
        return "reset"

silent = [conn() for _ in range(N)]
idle = [conn() for _ in range(N)]
idle_next = [conn() for _ in range(N)]
late = [conn() for _ in range(N)]
for s in idle + idle_next + late:
    get(s)
    st, close, _ = response(s)
    print("before:", st, close, flush=True)
written = [conn() for _ in range(N)]
# Written just before the reload: the reload may come before the loop
# reads them.
for s in written + idle_next:
    get(s)
print("ready", flush=True)
wait_file(reloaded)
# The worker has the reload's wake but has not acted on it yet (strace):
# these requests are in the socket, unread, when it does.
for s in late + silent:
    get(s)
print("sent", flush=True)
for name, group in (("silent", silent), ("written", written),
                    ("idle_next", idle_next), ("late", late)):
    for s in group:
        st, close, eof = response(s)
        # Served before the reload: kept, then closed by it as idle.
        end = "eof" if eof else "-" if st == "reset" else closed(s)
        print(name + ":", st, "close" if close else "keep", end,
              flush=True)
for s in idle:
    print("idle:", closed(s), flush=True)
PY

python3 "$T/client.py" "$P" "$T/reloaded" >"$T/client.out" 2>&1 &
CLIENT=$!
track_pid "$CLIENT"
wait_grep "$T/client.out" '^ready' 20 || fail "client not ready: $(cat "$T/client.out")"
# The requests written once the reload is logged are unread when the
# worker acts on it.
reload_worker_held "$T/client.out" "$T/reloaded"
# The worker acted on the reload: the idle connections' lines.
assert_log 'end=reload: idle keep-alive connection closed' 20
strace_stop
wait_exit "$CLIENT" 30 || fail "client did not finish: $(cat "$T/client.out")"
sed "s/^/[$TEST_NAME] client: /" "$T/client.out"
# Every connection ended: the log thread writes the lines within its flush.
for ((i = 0; i < 100; i++)); do
	n=$(session_end_lines web | wc -l)
	((n >= 15)) && break
	sleep 0.05
done
assert_eq "$n" 15 "every connection ended and was logged"
n=$(grep -c '^before: 200 False$' "$T/client.out" || true)
assert_eq "$n" 9 "the requests before the reload are served on kept connections"
n=$(grep -c '^silent: 200 close eof$' "$T/client.out" || true)
assert_eq "$n" 3 "a connection silent at the reload has its first request served, with Connection: close"
# Whether the loop read these before the reload is a race: read before,
# served and kept, then closed as idle by the reload; read after, served
# with Connection: close. Never a reset either way.
n=$(grep -c '^late: 200 close eof$' "$T/client.out" || true)
assert_eq "$n" 3 "a request unread in the socket at the reload is served, with Connection: close"
for name in written idle_next; do
	n=$(grep -Ec "^$name: 200 (close|keep) eof$" "$T/client.out" || true)
	assert_eq "$n" 3 "$name: each request written before the reload is served, then the connection ends without a reset"
done
n=$(grep -c '^idle: eof$' "$T/client.out" || true)
assert_eq "$n" 3 "an idle keep-alive connection is closed at the reload, without a reset"
n=$(grep -c 'end=reload: idle keep-alive connection closed' "$PROXYD_LOG" || true)
k=$(grep -Ec '^(written|idle_next): 200 keep eof$' "$T/client.out" || true)
assert_eq "$n" $((3 + k)) "only connections idle after serving requests are closed by the reload"
n=$(grep -E 'end=reload: idle keep-alive connection closed' "$PROXYD_LOG" | grep -c ' to-client=0 ' || true)
assert_eq "$n" 0 "no connection that served nothing is closed by the reload"
n=$(grep -c 'path=/hello.txt status=200' "$PROXYD_LOG" || true)
assert_eq "$n" 21 "every request was served"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
