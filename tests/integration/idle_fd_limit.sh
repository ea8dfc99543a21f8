#!/usr/bin/env bash
# Idle spliced sessions at the descriptor limit: idle sessions hold no pipe
# (idle_pipes), so as many are admitted as there are descriptors for their
# sockets. When they wake up there is no descriptor left for a pipe: each
# must still carry its bytes whole (through the stack) and end cleanly,
# not with "Too many open files".
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

free_port P_ORIG
python3 - "$P_ORIG" >"$T/origin.log" 2>&1 <<'EOF' &
# An echo origin that keeps every connection until the client closes.
import selectors, socket, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(512)
sel = selectors.DefaultSelector()
sel.register(l, selectors.EVENT_READ)
while True:
    for k, _ in sel.select():
        if k.fileobj is l:
            c, _ = l.accept()
            sel.register(c, selectors.EVENT_READ)
            continue
        try:
            d = k.fileobj.recv(65536)
        except OSError:
            d = b""
        if d:
            k.fileobj.sendall(d)
        else:
            sel.unregister(k.fileobj)
            k.fileobj.close()
EOF
track_pid $!
wait_listen "$P_ORIG" 5 || fail "the echo origin did not start: $(cat "$T/origin.log")"

free_port P_PLUG
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
write_service fdidle "$P_PLUG" "$P_ORIG" '<plug splice="auto"/>'
REAL_PROXYD=$PROXYD
cat >"$T/proxyd-96" <<EOF
#!/bin/sh
ulimit -n 96
exec "$REAL_PROXYD" "\$@"
EOF
chmod +x "$T/proxyd-96"
PROXYD=$T/proxyd-96
start_proxyd
PROXYD=$REAL_PROXYD

info "idle sessions until proxyd has no descriptor left, then all send 64 KB at once"
python3 - "$P_PLUG" >"$T/client.out" 2>&1 <<'EOF' || fail "client: $(tail -5 "$T/client.out")"
import socket, sys
port = int(sys.argv[1])
held = []
for i in range(200):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(b"ping")
        if s.recv(4) != b"ping":
            raise OSError("no echo")
    except OSError:
        s.close()   # this one found no descriptor for its server side
        break
    held.append(s)
else:
    sys.exit("never reached the limit")
print("held", len(held))
# All wake at once: more pipes wanted than the pool kept, none to be made.
datas = [bytes((i * 7 + k) % 251 for k in range(65536)) for i in range(len(held))]
for s, data in zip(held, datas):
    s.sendall(data)
bad = 0
for s, data in zip(held, datas):
    got = b""
    while len(got) < len(data):
        b = s.recv(65536)
        if not b:
            break
        got += b
    if got != data:
        bad += 1
    s.close()
print("bad", bad)
sys.exit(1 if bad else 0)
EOF
held=$(sed -n 's/^held //p' "$T/client.out")
info "$held idle sessions held at the limit; all echoed 64 KB back"
assert_ge "$held" 20 "idle sessions admitted under 96 descriptors"
# Every held session ends as a normal close with all its bytes counted.
for ((i = 0; i < 50; i++)); do
    (( $(grep -c 'session-end service=fdidle .*to-server=65540 to-client=65540 .*by=client .*end=client-closed' "$PROXYD_LOG") == held )) && break
    sleep 0.1
done
assert_eq "$(grep -c 'session-end service=fdidle .*to-server=65540 to-client=65540 .*by=client .*end=client-closed' "$PROXYD_LOG")" "$held" \
    "sessions that woke at the limit and ended cleanly"
assert_no_grep "$PROXYD_LOG" "session-end service=fdidle .*to-server=65540.*Too many open files" "a woken session failed for want of a pipe"
info "ok"
