#!/usr/bin/env bash
# Two workers: SO_REUSEPORT alone spreads connections by a hash of their
# ports (100 at once came e.g. 41/59); a worker that holds more sessions
# than its peer hands new connections over, so each round of 100 held
# connections ends within the balance margin (2 + load/16, i.e. at most
# 6 apart at ~50 each, one more than the margin as it is checked before the new one counts) and proxyd_worker_sessions_handed_off_total counts
# the hand-offs. Then the handed sessions relay bytes like the others.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

N=100
ROUNDS=4
make_file 10k.bin 10K
start_nginx
free_port P
write_proxyd_conf
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_service bal "$P" "$NGINX_PORT"
start_proxyd

# hold N connections open until $T/stop-R exists (30 s at most); on each,
# once all are open, one request and its whole answer: the hand-off did
# not lose the first bytes
cat >"$T/hold.py" <<'PY'
import os, socket, sys, time
port, n, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cs = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
print("open", flush=True)
while not os.path.exists(stop + ".go"):
    if os.path.exists(stop):
        break
    time.sleep(0.05)
bad = 0
for c in cs:
    c.sendall(b"GET /10k.bin HTTP/1.0\r\n\r\n")
for c in cs:
    got = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    if not (got.startswith(b"HTTP/1.1 200") and got.endswith(open(sys.argv[4], "rb").read())):
        bad += 1
print("bad", bad, flush=True)
deadline = time.time() + 30
while not os.path.exists(stop) and time.time() < deadline:
    time.sleep(0.05)
PY

worker_active() { # worker_active K
    metric_value proxyd_worker_sessions_active "worker=\"$1\""
}
handed=0
for ((r = 1; r <= ROUNDS; r++)); do
    stop=$T/stop-$r
    python3 "$T/hold.py" "$P" "$N" "$stop" "$T/www/10k.bin" >"$T/hold-$r.out" 2>&1 &
    hp=$!
    track_pid "$hp"
    assert_metric eq proxyd_sessions_active '' "$N" 10
    a=$(worker_active 0)
    b=$(worker_active 1)
    info "round $r: $N connections, per worker $a / $b"
    assert_eq "$((a + b))" "$N" "round $r: per-worker sessions add up"
    d=$((a > b ? a - b : b - a))
    ((d <= 6)) || fail "round $r: workers hold $a and $b sessions ($d apart, more than the balance margin of 5 + 1)"
    : >"$stop.go"
    for ((i = 0; i < 100; i++)); do
        grep -q '^bad ' "$T/hold-$r.out" && break
        sleep 0.1
    done
    assert_grep "$T/hold-$r.out" '^bad 0$' "round $r: some connection did not get the whole file"
    : >"$stop"
    wait_exit "$hp" 10 || fail "the client of round $r did not exit"
    assert_metric eq proxyd_sessions_active '' 0 10
done

h0=$(metric_value proxyd_worker_sessions_handed_off_total 'worker="0"')
h1=$(metric_value proxyd_worker_sessions_handed_off_total 'worker="1"')
[[ $h0 =~ ^[0-9]+$ && $h1 =~ ^[0-9]+$ ]] || fail "proxyd_worker_sessions_handed_off_total missing ($h0, $h1)"
info "handed off: worker 0: $h0, worker 1: $h1"
assert_ge "$((h0 + h1))" 1 "no connection was handed off in $ROUNDS rounds of $N"
acc=$(($(metric_value proxyd_worker_sessions_accepted_total 'worker="0"') + $(metric_value proxyd_worker_sessions_accepted_total 'worker="1"')))
assert_eq "$acc" "$((N * ROUNDS))" "per-worker accepted sessions (handed ones counted once)"
info "ok"
