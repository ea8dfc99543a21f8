#!/usr/bin/env bash
# The rates of /status and /api/services during a steady 1 MB/s download
# through a splice service: sampled once a second for 5 s, each reading is
# within 10 % of the rate the client reads at. The client reads like one
# behind a 1 MB/s link (paced_client.py: small receive buffer), so proxyd's
# socket buffer fills and its writes come a third of that buffer at a time
# (1.4 MB); counted at write time the readings were 0 or 1.4 MB/s.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

RATE=1000000
make_file big.bin 48M
start_nginx
free_port P1
write_proxyd_conf
write_service bulk "$P1" "$NGINX_PORT"
start_proxyd
A=http://127.0.0.1:$ADMIN_PORT

python3 "$LIB_DIR/paced_client.py" "$P1" /big.bin "$RATE" 30 >"$T/client.out" &
track_pid $!

python3 - "$A" "$RATE" <<'EOF2' || fail "rates not within 10 % of $RATE B/s"
import json, sys, time, urllib.request
base, rate = sys.argv[1], float(sys.argv[2])

def get(path):
    return json.load(urllib.request.urlopen(base + path, timeout=3))

def readings():
    st = get("/status")
    sv = {s["name"]: s for s in get("/api/services")["services"]}
    r = st.get("rate", {"to_client": -1, "over": 0})	# -1: none
    return r["to_client"], sv["bulk"]["rate"]["to_client"], r["over"]

def next_second():
    # proxyd samples at each half second (wall clock): read just after
    now = time.time()
    time.sleep(1 - (now - int(now)) + 0.75 if now % 1 > 0.75 else 0.75 - now % 1)

# warm-up: the flow runs and the client's buffer is full (15 s at most)
deadline = time.monotonic() + 15
while True:
    next_second()
    st, svc, over = readings()
    print("warm-up: /status %.0f, service %.0f" % (st, svc))
    if abs(svc - rate) <= rate * 0.1:
        break
    if time.monotonic() > deadline:
        sys.exit("the flow never reached its rate")
bad = []
for i in range(5):
    next_second()
    st, svc, over = readings()
    print("reading %d: /status %.0f B/s, service bulk %.0f B/s (over %.3f s)" % (i, st, svc, over))
    for name, v in (("/status", st), ("bulk", svc)):
        if abs(v - rate) > rate * 0.1:
            bad.append("%s %d: %.0f" % (name, i, v))
if bad:
    sys.exit("off by more than 10 %: " + ", ".join(bad))
EOF2
info "ok"
