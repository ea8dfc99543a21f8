#!/usr/bin/env bash
# <source-limits>, with 2 workers, clients on their own loopback addresses:
# - connections="100/s" burst="50": one source opening 2000 connections a
#   second for 9 s (over 2 workers, two reloads during it) gets at most
#   burst + rate x time of them (and no fewer than 2 % under what the
#   bucket lets through of its attempts), the rest are reset at accept,
#   while 10 other sources making 90 requests each are all served;
#   proxyd_limited_total{limit="connections"} is the client's refusal
#   count exactly and the "limited" line comes at most once a second;
# - sessions="5": 12 connections of one source at once over 2 workers, exactly
#   5 served and 7 refused (limit=sessions), another source served;
# - per="prefix" prefix-v4="24": two addresses of one /24 share a bucket;
#   per="zone": a zone's addresses share one, one outside any zone has its own;
# - a reload keeps the table: the 5 sessions still count (a 6th is refused)
#   and an emptied bucket stays empty; once the 5 end, the source is served.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx python3
setup

cat >"$T/probe.py" <<'EOF'
# probe.py PORT SRC [N]: N connections from SRC one after the other, each
# asking for /f: prints SERVED or REFUSED per line.
import socket, sys
port, src = int(sys.argv[1]), sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
for _ in range(n):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(5)
    got = b""
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except (ConnectionResetError, BrokenPipeError):
        pass
    s.close()
    print("SERVED" if got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n") else "REFUSED", flush=True)
EOF

cat >"$T/flood.py" <<'EOF'
# flood.py PORT SRC SECONDS RATE MARKS: connections from SRC at RATE a
# second (as fast as one thread opens them when it cannot keep up), each
# asking for /f; prints attempts, served, refused and the seconds from the
# first attempt to the last, and to the last answer. Writes "third N" to
# the file MARKS after each third of SECONDS.
import selectors, socket, sys, time, resource
port, src, dur = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
rate, marks = float(sys.argv[4]), open(sys.argv[5], "w")
third = 0
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
sel = selectors.DefaultSelector()
att = served = refused = cerr = 0
times = []
bufs = {}
lastans = 0.0
def done(s, ok):
    global served, refused, lastans
    lastans = time.monotonic()
    sel.unregister(s)
    del bufs[s]
    s.close()
    if ok: served += 1
    else: refused += 1
def poll(timeout):
    for key, _ in sel.select(timeout):
        s = key.fileobj
        try:
            d = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            done(s, False); continue
        if d:
            bufs[s] += d
            continue
        b = bufs[s]
        done(s, b.startswith(b"HTTP/1.1 200") and b.endswith(b"ok\n"))
t0 = time.monotonic()
last = t0
while time.monotonic() - t0 < dur:
    now = time.monotonic()
    if int(3 * (now - t0) / dur) > third:
        third += 1
        print("third", third, file=marks, flush=True)
    if att >= rate * (now - t0):
        poll(min(0.001, max(0, t0 + (att + 1) / rate - now)))
        continue
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(5)
    last = time.monotonic()
    times.append(last)
    try:
        s.connect(("127.0.0.1", port))
    except ConnectionResetError:
        # Accepted and reset by proxyd before connect() looked (a
        # connect with a timeout polls, then reads SO_ERROR).
        s.close(); att += 1; refused += 1; cerr += 1; continue
    att += 1
    try:
        s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
    except (ConnectionResetError, BrokenPipeError):
        s.close(); refused += 1; continue
    s.setblocking(False)
    bufs[s] = b""
    sel.register(s, selectors.EVENT_READ)
    poll(0)
end = time.monotonic() + 10
while bufs and time.monotonic() < end:
    poll(0.2)
# What the bucket lets through of these attempts (a stalled client, its
# SYNs dropped by a full backlog, attempts less than the rate allows).
tat, want = 0.0, 0
for t in times:
    if tat <= t + 49 * 0.01:
        tat = max(tat, t) + 0.01
        want += 1
print(att, served, refused, len(bufs), "%.3f" % (last - t0), cerr, want,
      "%.3f" % (max(lastans, last) - t0), flush=True)
EOF

cat >"$T/others.py" <<'EOF'
# others.py PORT N: sources 127.0.0.10.. each make N requests, 10 a second;
# prints the number that failed.
import socket, sys, threading, time
port, n = int(sys.argv[1]), int(sys.argv[2])
bad = []
def run(src):
    for _ in range(n):
        t = time.monotonic()
        try:
            s = socket.socket(); s.bind((src, 0)); s.settimeout(10)
            s.connect(("127.0.0.1", port)); s.sendall(b"GET /f HTTP/1.0\r\n\r\n")
            got = b""
            while True:
                d = s.recv(65536)
                if not d: break
                got += d
            s.close()
            if not (got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n")):
                bad.append((src, got[:40]))
        except OSError as e:
            bad.append((src, repr(e)))
        time.sleep(max(0, 0.1 - (time.monotonic() - t)))
th = [threading.Thread(target=run, args=("127.0.0.%d" % i,)) for i in range(10, 20)]
for x in th: x.start()
for x in th: x.join()
print(len(bad), bad[:3], flush=True)
EOF

cat >"$T/hold.py" <<'EOF'
# hold.py PORT SRC N: N connections from SRC at once, each asking /f with
# keep-alive; prints "served S refused R", then holds the served ones.
import socket, sys, threading, time
port, src, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
res, keep = [], []
def one():
    s = socket.socket(); s.bind((src, 0)); s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while not got.endswith(b"ok\n"):
            d = s.recv(65536)
            if not d: break
            got += d
        ok = got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n")
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        ok = False
    res.append(ok)
    if ok: keep.append(s)
    else: s.close()
th = [threading.Thread(target=one) for _ in range(n)]
for x in th: x.start()
for x in th: x.join()
print("served %d refused %d" % (res.count(True), res.count(False)), flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    time.sleep(0.2)
EOF

printf 'ok\n' >"$T/www/f"
start_nginx
free_port PR
free_port PS
free_port PP
free_port PW
free_port PZ
write_proxyd_conf 'max-sessions="10000"' '<zones><zone name="lab" addresses="127.0.3.0/24"/></zones>'
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_service rate "$PR" "$NGINX_PORT" '<source-limits connections="100/s" burst="50"/>'
write_service sess "$PS" "$NGINX_PORT" '<source-limits sessions="5"/>'
write_service pfx "$PP" "$NGINX_PORT" '<source-limits per="prefix" prefix-v4="24" connections="1/m" burst="1"/>'
write_service slow "$PW" "$NGINX_PORT" '<source-limits connections="1/m" burst="2"/>'
write_service zn "$PZ" "$NGINX_PORT" '<source-limits per="zone" connections="1/m" burst="1"/>'
start_proxyd
probe() { python3 "$T/probe.py" "$@"; }

info "flood from 127.0.0.2 at 2000 connections a second for 9 s, two reloads during it; 10 other sources at 10 requests a second"
f0=$(metric_value proxyd_worker_sessions_accepted_total 'worker="0"')
f1=$(metric_value proxyd_worker_sessions_accepted_total 'worker="1"')
python3 "$T/others.py" "$PR" 90 >"$T/others.out" 2>&1 &
OTHERS=$!
track_pid "$OTHERS"
timeout 60 python3 "$T/flood.py" "$PR" 127.0.0.2 9 2000 "$T/flood.marks" >"$T/flood.out" &
FLOOD=$!
track_pid "$FLOOD"
# A reload a third of the way through and another at two thirds: the
# source's bucket is in the table, outside the configuration, so neither
# lets the flood through (each reload changes the policy: a service more).
for third in 1 2; do
    wait_grep "$T/flood.marks" "^third $third\$" 20 || fail "the flood never reached its third $third"
    free_port PX
    write_service "extra$third" "$PX" "$NGINX_PORT"
    kill -HUP "$PROXYD_PID"
    assert_metric ge proxyd_config_reloads_total 'result="ok"' "$third"
    info "reload $third during the flood"
done
wait_exit "$FLOOD" 50 || fail "the flood client did not finish"
((WAIT_RC == 0)) || fail "flood client failed ($WAIT_RC): $(cat "$T/flood.out")"
wait_exit "$OTHERS" 30 || fail "the other sources did not finish"
read -r att served refused left secs cerr want asecs <"$T/flood.out"
info "flood: $att attempts in $secs s ($(awk -v a="$att" -v s="$secs" 'BEGIN { printf "%d", a / s }')/s), $served served, $refused refused, $left unresolved, $cerr of them reset before connect() returned; others: $(cat "$T/others.out")"
assert_eq "$left" 0 "flood connections neither served nor refused"
assert_eq "$((served + refused))" "$att" "flood: served + refused"
# The bucket's arithmetic on the client's own attempt times: at most
# burst + rate x time (up to the last answer: proxyd judges at accept,
# which under load comes after the client's connect), and what it lets
# through of those attempts (the same when they never paused; less when
# the client stalled), less 2 % (proxyd's clock is its accept's, later).
max=$(awk -v s="$asecs" 'BEGIN { printf "%d", 50 + 100 * s + 2 }')
info "the bucket lets $want of these attempts through (at most $max)"
assert_ge "$att" $((3 * max)) "flood attempts (it must outrun the rate to test it)"
((served <= max)) || fail "flood: $served served, more than burst 50 + 100/s x $asecs s"
# It asked at 2000 a second (80 % of that at least: else the machine
# could not flood and nothing is tested), over both workers.
rate=$(awk -v a="$att" -v s="$secs" 'BEGIN { printf "%d", a / s }')
assert_ge "$rate" 1600 "the flood's connections a second"
assert_metric ge proxyd_worker_sessions_accepted_total 'worker="0"' $((f0 + att / 5))
assert_metric ge proxyd_worker_sessions_accepted_total 'worker="1"' $((f1 + att / 5))
lo=$((want - want / 50 - 5))
((served >= lo)) || fail "flood: $served served, the bucket's arithmetic on the attempts says $want (-2 %)"
assert_eq "$(awk '{ print $1 }' "$T/others.out")" 0 "requests of the 10 other sources that failed"
assert_metric eq proxyd_limited_total 'service="rate",analyser="plug",limit="connections"' "$refused"
assert_log "limited service=rate client=127\\.0\\.0\\.2:[0-9]+ source=127\\.0\\.0\\.2 limit=connections rule=rate\\.xml:[0-9]+ refused=[0-9]+$"
nl=$(grep -c 'limited service=rate .* source=127\.0\.0\.2 ' "$PROXYD_LOG" || true)
maxl=$(awk -v s="$secs" 'BEGIN { printf "%d", s + 2 }')
((nl >= 1 && nl <= maxl)) || fail "$nl limited lines for 127.0.0.2 in $secs s (at most one a second: <= $maxl)"
sum=$(sed -nE 's/.*limited service=rate .* refused=([0-9]+)$/\1/p' "$PROXYD_LOG" | awk '{ s += $1 } END { print s + 0 }')
((sum <= refused && sum >= refused / 4)) || fail "the limited lines stand for $sum refusals of $refused"
assert_no_grep "$PROXYD_LOG" 'session-end service=rate .*client=127\.0\.0\.2:[0-9]+ .*denied' "a refused connection got a session-end line"

info "sessions=5: 12 connections of 127.0.0.3 at once"
a0=$(metric_value proxyd_worker_sessions_accepted_total 'worker="0"')
a1=$(metric_value proxyd_worker_sessions_accepted_total 'worker="1"')
python3 "$T/hold.py" "$PS" 127.0.0.3 12 >"$T/hold.out" 2>&1 &
HOLD=$!
track_pid "$HOLD"
wait_grep "$T/hold.out" '^served' 20 || fail "holder: $(cat "$T/hold.out")"
assert_eq "$(head -n 1 "$T/hold.out")" "served 5 refused 7" "12 connections of one source with sessions=5"
assert_metric eq proxyd_limited_total 'service="sess",analyser="plug",limit="sessions"' 7
assert_log "limited service=sess client=127\\.0\\.0\\.3:[0-9]+ source=127\\.0\\.0\\.3 limit=sessions rule=sess\\.xml:[0-9]+ refused=[0-9]+$"
# Both workers judged some of the 12 (connections spread by SO_REUSEPORT).
assert_metric ge proxyd_worker_sessions_accepted_total 'worker="0"' $((a0 + 1))
assert_metric ge proxyd_worker_sessions_accepted_total 'worker="1"' $((a1 + 1))
assert_eq "$(probe "$PS" 127.0.0.3)" REFUSED "a 6th session of 127.0.0.3"
assert_eq "$(probe "$PS" 127.0.0.4)" SERVED "another source while 127.0.0.3 holds 5"

info "per=prefix /24, and an emptied bucket of 1/m"
assert_eq "$(probe "$PP" 127.0.1.5)" SERVED "127.0.1.5, first of its /24"
assert_eq "$(probe "$PP" 127.0.1.6)" REFUSED "127.0.1.6, same /24"
assert_eq "$(probe "$PP" 127.0.2.5)" SERVED "127.0.2.5, another /24"
assert_log "limited service=pfx client=127\\.0\\.1\\.6:[0-9]+ source=127\\.0\\.1\\.0/24 limit=connections "
assert_eq "$(probe "$PW" 127.0.0.5 3 | tr '\n' ' ')" "SERVED SERVED REFUSED " "connections=1/m burst=2"

info "per=zone: a zone is one source, a client in no zone its own"
assert_eq "$(probe "$PZ" 127.0.3.5)" SERVED "127.0.3.5, first of zone lab"
assert_eq "$(probe "$PZ" 127.0.3.77)" REFUSED "127.0.3.77, also in zone lab"
assert_eq "$(probe "$PZ" 127.0.4.5)" SERVED "127.0.4.5, in no zone"
assert_eq "$(probe "$PZ" 127.0.4.6)" SERVED "127.0.4.6, in no zone either"
assert_eq "$(probe "$PZ" 127.0.4.5)" REFUSED "127.0.4.5 again"
assert_log "limited service=zn client=127\\.0\\.3\\.77:[0-9]+ source=zone:lab limit=connections "
assert_log "limited service=zn client=127\\.0\\.4\\.5:[0-9]+ source=127\\.0\\.4\\.5 limit=connections "

info "reload: the table is kept"
free_port PO
write_service other "$PO" "$NGINX_PORT"
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 3
assert_eq "$(probe "$PW" 127.0.0.5)" REFUSED "1/m bucket emptied before the reload"
assert_eq "$(probe "$PS" 127.0.0.3)" REFUSED "a 6th session of 127.0.0.3 after the reload"
proc_alive "$HOLD" || fail "holder exited early"
kill -TERM "$HOLD"
wait_exit "$HOLD" 5 || fail "holder did not exit"
ok=0
for ((i = 0; i < 50; i++)); do
    [[ $(probe "$PS" 127.0.0.3) == SERVED ]] && { ok=1; break; }
    sleep 0.1
done
((ok == 1)) || fail "127.0.0.3 not served after its 5 sessions ended (the reload lost their release)"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
