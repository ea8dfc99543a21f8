#!/usr/bin/env bash
# half-close: the client sends data then shutdown(SHUT_WR); the server reads to
# EOF and answers "got N bytes". With half-close="yes" (splice auto and no) the
# answer must arrive; with half-close="no" the client must get EOF without it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

cat >"$T/server.py" <<'EOF'
import socket, sys, threading
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
srv.settimeout(120)

def handle(c):
    n = 0
    try:
        c.settimeout(20)
        while True:
            d = c.recv(65536)
            if not d:
                break
            n += len(d)
        c.sendall(b"got %d bytes" % n)
        sys.stderr.write("server: got %d bytes, replied\n" % n)
    except OSError as e:
        sys.stderr.write("server: %d bytes, %r\n" % (n, e))
    finally:
        c.close()

for _ in range(50):
    try:
        c, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=handle, args=(c,), daemon=True).start()
EOF

cat >"$T/client.py" <<'EOF'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"a" * n)
s.shutdown(socket.SHUT_WR)
s.settimeout(5)
data = b""
status = "EOF"
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except socket.timeout:
    status = "TIMEOUT"
except ConnectionResetError:
    status = "RESET"
print("%s %s" % (status, data.decode("latin-1")))
EOF

free_port SRV_PORT
python3 "$T/server.py" "$SRV_PORT" 2>"$T/server.log" &
track_pid $!
wait_listen "$SRV_PORT" 5 $! || fail "python server did not start"

free_port P_YES
free_port P_NOSPLICE
free_port P_NO
write_proxyd_conf
write_service hcyes "$P_YES" "$SRV_PORT" '<plug splice="auto" half-close="yes"/>'
write_service hcnosplice "$P_NOSPLICE" "$SRV_PORT" '<plug splice="no" half-close="yes"/>'
write_service hcno "$P_NO" "$SRV_PORT" '<plug half-close="no"/>'
start_proxyd

N=1000000
for svc in hcyes:$P_YES hcnosplice:$P_NOSPLICE; do
    name=${svc%%:*} port=${svc#*:}
    info "half-close=yes via $name: send $N bytes, SHUT_WR, read the answer"
    out=$(timeout 15 python3 "$T/client.py" "$port" "$N") || fail "client via $name failed (rc $?)"
    info "client got: $out"
    assert_eq "$out" "EOF got $N bytes" "reply through $name after half-close"
    assert_log "session-end service=$name .* end=client-closed$"
    line=$(session_end_lines "$name" | tail -n 1)
    assert_eq "$(kv "$line" to-server)" "$N" "to-server bytes of $name"
    reply="got $N bytes"
    assert_eq "$(kv "$line" to-client)" "${#reply}" "to-client bytes of $name"
done

info "half-close=no: the client's FIN ends the session, no reply"
out=$(timeout 15 python3 "$T/client.py" "$P_NO" "$N") || fail "client via hcno failed (rc $?)"
info "client got: $out"
case $out in
    "EOF " | "RESET ") ;;
    TIMEOUT*) fail "half-close=no: the session was not closed after the client's FIN (client read timed out after 5 s): '$out'" ;;
    *) fail "half-close=no: expected EOF/RESET with no data, got '$out'" ;;
esac
assert_log "session-end service=hcno .* end="
line=$(session_end_lines hcno | tail -n 1)
info "log: $line"
assert_eq "$(kv "$line" to-client)" 0 "to-client bytes of hcno"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
