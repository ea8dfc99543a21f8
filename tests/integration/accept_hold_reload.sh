#!/usr/bin/env bash
# While the admin endpoint holds the workers' paused listeners (out of
# descriptors), a paused listener goes on refusing a waiting client with
# its reserve descriptor every 100 ms: after its reserve was lost (the
# open that takes it back failed: another thread had the descriptor), and
# after a reload that keeps the listener (same address). Out of
# descriptors is made with strace, so that the reload itself (which opens
# the policy files) works: the worker's first accept4 fails with EMFILE
# (its listener pauses) and its first openat (the reserve taken back after
# that refusal) too, and every accept4 of the admin endpoint (the main
# thread) fails with EMFILE, so that one admin connection left waiting
# keeps the hold on. Before, a worker that lost its reserve took it back
# only once the hold ended, and the reload rebuilt the listener set with
# the kept listener marked not paused: either way, held, it refused no
# one, and a client waited in the backlog for as long as the admin was out
# of descriptors.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx python3 strace
setup

start_nginx
free_port P_PLUG
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_service holdplug "$P_PLUG" "$NGINX_PORT"
start_proxyd

WORKER=$(grep -l '^px-worker-' /proc/"$PROXYD_PID"/task/*/comm | head -1)
WORKER=$(basename "$(dirname "$WORKER")")
strace_start "$WORKER" "$T/strace-worker.out" -e trace=accept4,openat \
    -e inject=accept4:error=EMFILE:when=1 -e inject=openat:error=EMFILE:when=1
WORKER_STRACE=$STRACE_PID
strace_start "$PROXYD_PID" "$T/strace-admin.out" -e trace=accept4 \
    -e inject=accept4:error=EMFILE

# client PORT OUT: connects, then says within 3 s whether proxyd closed it
# ("closed") or left it waiting ("open"); "ready" once connected
cat >"$T/client.py" <<'PY'
import socket, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
with open(out, "w") as f:
    f.write("ready\n")
s.settimeout(3)
try:
    r = "closed" if s.recv(1) == b"" else "data"
except socket.timeout:
    r = "open"
except OSError:
    r = "closed"
with open(out, "a") as f:
    f.write(r + "\n")
PY

info "an admin connection left waiting: the admin holds the workers' accepts"
python3 - "$ADMIN_PORT" "$T/admin.stop" <<'PY' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
PY
ADMIN_CLIENT=$!
track_pid "$ADMIN_CLIENT"
assert_log 'admin: accept failed: Too many open files'

info "a client: the worker's accept fails, it pauses and refuses the client"
python3 "$T/client.py" "$P_PLUG" "$T/a.out" &
track_pid $!
wait_grep "$T/a.out" '^(closed|open|data)$' 10 || fail "client a: $(cat "$T/a.out" 2>/dev/null)"
assert_log 'service holdplug: accept failed: Too many open files'
assert_eq "$(tail -n 1 "$T/a.out")" closed "the first client, refused with the reserve descriptor"

wait_grep "$T/strace-worker.out" 'openat\(.*"/dev/null".* = -1 EMFILE' 10 ||
    fail "the worker's reserve was not lost after the first refusal: $(tail -n 3 "$T/strace-worker.out")"

info "a client while the worker has no reserve: it takes it back, refuses the client"
python3 "$T/client.py" "$P_PLUG" "$T/b.out" &
track_pid $!
wait_grep "$T/b.out" '^(closed|open|data)$' 10 || fail "client b: $(cat "$T/b.out" 2>/dev/null)"
assert_eq "$(tail -n 1 "$T/b.out")" closed "a client after the reserve was lost, while the admin holds the accepts: refused at once (not left in the backlog)"

info "a reload keeps the paused listener"
kill -HUP "$PROXYD_PID"
assert_log 'reload done'

info "a client after the reload, the admin still out of descriptors: refused"
python3 "$T/client.py" "$P_PLUG" "$T/c.out" &
track_pid $!
wait_grep "$T/c.out" '^(closed|open|data)$' 10 || fail "client c: $(cat "$T/c.out" 2>/dev/null)"
assert_eq "$(tail -n 1 "$T/c.out")" closed "a client after the reload, while the admin holds the accepts: refused at once (not left in the backlog)"

touch "$T/admin.stop"
wait_exit "$ADMIN_CLIENT" 10 || fail "the admin client did not exit"
strace_stop
STRACE_PID=$WORKER_STRACE
strace_stop
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
