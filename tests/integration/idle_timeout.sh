#!/usr/bin/env bash
# idle-timeout="1s": a silent session is closed after ~1 s (end=idle-timeout),
# a session that sends a byte every 300 ms for 2 s stays open, then times out
# once it goes silent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

cat >"$T/client.py" <<'EOF'
import socket, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=5)
t0 = time.monotonic()

def wait_close(limit):
    """block until EOF/RST, at most limit seconds; returns (status, seconds)"""
    s.settimeout(limit)
    start = time.monotonic()
    try:
        d = s.recv(4096)
        st = "EOF" if d == b"" else "DATA"
    except socket.timeout:
        st = "TIMEOUT"
    except ConnectionResetError:
        st = "RESET"
    return st, time.monotonic() - start

if mode == "idle":
    st, dt = wait_close(6)
    print("%s %.3f" % (st, dt))
else:
    # one byte every 300 ms for 2 s: a request line that never ends ("GET /aaaa...",
    # no newline), so nginx keeps waiting and never answers
    msg = b"GET /" + b"a" * 100
    i = 0
    end = t0 + 2.0
    while time.monotonic() < end:
        try:
            s.sendall(msg[i:i + 1])
            last_send = time.monotonic()
            i += 1
        except OSError as e:
            print("CLOSED-SEND %.3f" % (time.monotonic() - t0))
            sys.exit(0)
        s.settimeout(0.3)
        try:
            d = s.recv(4096)
            print("CLOSED-%s %.3f" % ("EOF" if d == b"" else "DATA", time.monotonic() - t0))
            sys.exit(0)
        except socket.timeout:
            pass
        except ConnectionResetError:
            print("CLOSED-RESET %.3f" % (time.monotonic() - t0))
            sys.exit(0)
    # still open after 2 s of activity; now go silent: must be closed by the idle timer
    open_for = time.monotonic() - t0
    st, dt = wait_close(6)
    # report the time from the last byte sent to the close
    print("OPEN %.3f THEN %s %.3f" % (open_for, st, time.monotonic() - last_send))
EOF

start_nginx
free_port P
write_proxyd_conf 'idle-timeout="1s"'
write_service idle "$P" "$NGINX_PORT"
start_proxyd

info "silent connection"
out=$(timeout 15 python3 "$T/client.py" idle "$P") || fail "idle client failed (rc $?)"
info "client: $out"
read -r st dt <<<"$out"
[[ $st == EOF || $st == RESET ]] || fail "silent session: expected EOF within 6 s, got '$out'"
ms=$(awk -v d="$dt" 'BEGIN { printf "%d", d * 1000 }')
((ms >= 800)) || fail "silent session closed after $ms ms, before the 1 s idle-timeout"
((ms <= 3500)) || fail "silent session closed after $ms ms, expected ~1-3 s with idle-timeout=1s"
assert_log 'session-end service=idle .* end=idle-timeout$'
assert_metric ge proxyd_idle_timeouts_total '' 1

info "connection sending a byte every 300 ms for 2 s"
out=$(timeout 20 python3 "$T/client.py" active "$P") || fail "active client failed (rc $?)"
info "client: $out"
[[ $out =~ ^OPEN\ ([0-9.]+)\ THEN\ (EOF|RESET)\ ([0-9.]+)$ ]] ||
    fail "active session: expected to stay open for 2 s and then be closed when silent, got '$out'"
ms=$(awk -v d="${BASH_REMATCH[3]}" 'BEGIN { printf "%d", d * 1000 }')
((ms >= 800 && ms <= 3500)) || fail "active session closed $ms ms after its last byte, expected ~1-3 s"
wait_grep "$PROXYD_LOG" 'session-end service=idle .* to-server=[1-9][0-9]* .* end=idle-timeout$' "$ASYNC_WAIT" ||
    fail "no end=idle-timeout line with to-server>0 for the active session"
n=$(session_end_lines idle | grep -c 'end=idle-timeout$' || true)
assert_eq "$n" 2 "number of end=idle-timeout lines"
assert_metric ge proxyd_idle_timeouts_total '' 2
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
