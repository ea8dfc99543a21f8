#!/usr/bin/env bash
# High availability: two firewalls A and B (tests/netns/ha_topology.sh), each
# running proxyd (http and plug services, TPROXY by deploy/inline-tproxy.sh),
# keepalived and conntrackd set up by deploy/ha/pair.sh; a client and a
# server on either side, routed through the virtual gateway addresses.
#   0. A is master, B backup (VRRP state in both proxyds' /metrics and
#      /status); HTTP (http analyser), a plug service and a forwarded port
#      work through A; `pair.sh up` run again changes nothing.
#   1. A's proxyd is killed: within HA_BOUND_KILL_MS (no successful request
#      for at most that long, one request every 100 ms) requests succeed
#      through B; a long-lived forwarded TCP flow (not proxied) goes on
#      without a reset, its conntrack entry brought over by conntrackd;
#      proxyd comes back on A, which stays backup (nopreempt).
#   2. B's keepalived is killed (kill -9, both its processes): the same
#      through A within HA_BOUND_KA_MS; B's supervisor (pair.sh) removed the
#      addresses keepalived left (no split brain: one box holds them, one
#      proxyd says master), wrote "fault" and restarted keepalived: B
#      comes back as backup.
#   3. A's server-side link goes down: the same through B within
#      HA_BOUND_LINK_MS; A's link comes back and A stays backup.
#   4. B's client-side link goes down: the same through A.
#   5. A's keepalived hangs (kill -STOP, both its processes): B takes over,
#      and within HA_BOUND_HANG_MS A's supervisor (pair.sh) noticed that
#      keepalived stopped answering (its heartbeat), logged it, killed it,
#      removed the addresses (no split brain: one box holds them, one proxyd
#      says master), wrote "fault" and restarted keepalived: A comes back
#      as backup. SIGCONT to the stopped processes afterwards.
#   6. Exactly one firewall holds each virtual address; the states the two
#      proxyds report agree with it; transitions.log shows each box's
#      priority.
# In each failover, what live proxied clients see: an echo flow (sending
# every 50 ms) ends with an error; a client that only reads (a server
# dripping a line every 100 ms, like a download) is closed or reset within
# HA_BOUND_DRIP_MS of the failure (1-3: the old master's proxyd resets its
# sessions on leaving MASTER, or its kernel closes them), not left hanging
# until the idle timeout. (4: its reset cannot cross the failed link; that
# client learns only when it next sends, not checked.)
# The measured gaps are printed (grep "gap").  Timers: deploy/README.md.
# HA_NO_CONNTRACKD=1 runs it without conntrackd on B (the forwarded flow must
# then die at the first failover: proof that the test can fail).
set -euo pipefail
TESTS_NETNS_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../integration/lib.sh
source "$TESTS_NETNS_DIR/../integration/lib.sh"
# shellcheck source=topology.sh
source "$TESTS_NETNS_DIR/topology.sh"      # topo_start_nginx (in $TOPO_S)
# shellcheck source=ha_topology.sh
source "$TESTS_NETNS_DIR/ha_topology.sh"

PAIR=${HA_PAIR_SH:-$REPO_DIR/deploy/ha/pair.sh}   # another to compare
DEPLOY=$REPO_DIR/deploy/inline-tproxy.sh
: "${HA_BOUND_KILL_MS:=4000}"   # deploy/README.md: fall x interval + interval + skew, with margin
: "${HA_BOUND_LINK_MS:=3000}"   # deploy/README.md: 3 x advert + skew, with margin
: "${HA_BOUND_KA_MS:=3500}"     # the same, and the restarted keepalived's own start
: "${HA_BOUND_DRIP_MS:=5000}"   # a reading client learns its session is gone (measured
                                # 0.1 s; room for a disk stall delaying notify.sh's curl)
: "${HA_BOUND_HANG_MS:=6000}"   # a stopped keepalived's box holds no address: pair.sh's
                                # hang limit (3 s without a heartbeat), its 1 s period, margin
ADMIN=127.0.0.1:9180
FLOW_PORT=9000          # forwarded by the kernel
PFLOW_PORT=9001         # the same echo, through proxyd's plug service
DRIP_PORT=9002          # a line every 100 ms, through the plug service
declare -A PXPID=() PRIO=([A]=150 [B]=100)
KA_STOPPED=()           # keepalived processes the test stopped (SIGCONT at exit)

[[ $EUID == 0 ]] || skip "needs root (network namespaces, iptables, keepalived)"
need_cmds ip iptables conntrack keepalived conntrackd curl nginx python3 setsid
[[ -x $PAIR && -x $DEPLOY ]] || fail "deploy scripts not found or not executable"
setup
# keepalived refuses scripts under a directory others may write (/tmp is)
HADIR=$(mktemp -d /run/proxyd-ha-test.XXXXXX)
chmod 755 "$HADIR"

ha_cleanup() {
    local rc=$? w i pid
    set +e
    trap - EXIT TERM INT
    if ((rc != 0 && rc != 77)) && ((${#HA_TOPO_CREATED[@]})); then ha_diag; fi
    # a stopped keepalived would ignore pair.sh down's SIGTERM
    ((${#KA_STOPPED[@]} == 0)) || kill -CONT "${KA_STOPPED[@]}" 2>/dev/null
    for w in A B; do
        [[ -d $HADIR/$w ]] && nsFW "$w" "$PAIR" down --dir "$HADIR/$w" >/dev/null 2>&1
    done
    for ((i = ${#_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${_PIDS[i]}
        proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
    done
    for ((i = ${#_PIDS[@]} - 1; i >= 0; i--)); do
        wait_exit "${_PIDS[i]}" 5 || { kill -KILL "${_PIDS[i]}" 2>/dev/null; wait_exit "${_PIDS[i]}" 2; }
    done
    topo_down              # nginx
    ha_topo_down
    [[ ${KEEP_TMP:-0} == 1 ]] || rm -rf "$HADIR"
    (exit "$rc")
    _cleanup
}
trap ha_cleanup EXIT

ha_diag() {
    local w
    {
        for w in A B; do
            echo "---- [$TEST_NAME] firewall $w"
            echo "# ip -4 addr"; nsFW "$w" ip -4 -o addr show | awk '{print $2, $4}'
            echo "# transitions"; cat "$HADIR/$w/transitions.log" 2>/dev/null
            echo "# keepalived.log (last 25)"; tail -n 25 "$HADIR/$w/keepalived.log" 2>/dev/null
            echo "# conntrackd.log (last 10)"; tail -n 10 "$HADIR/$w/conntrackd.log" 2>/dev/null
            echo "# conntrack -L -p tcp --dport $FLOW_PORT"; nsFW "$w" conntrack -L -p tcp --dport "$FLOW_PORT" 2>&1 | head -5
            echo "# iptables -L FORWARD"; nsFW "$w" iptables -w -L FORWARD -v -n -x
            echo "# proxyd log (last 10)"; tail -n 10 "$T/proxyd-$w.log" 2>/dev/null
        done
        echo "# flow: $(cat "$T/flow.status" 2>/dev/null)"; cat "$T/flow.err" 2>/dev/null | tail -5
    } >&2 2>&1
}

export HA_TOPO_ID="$$-$RANDOM"
rc=0
ha_topo_up || rc=$?
((rc != 2)) || skip "cannot create network namespaces (ip netns add failed): not permitted here"
((rc == 0)) || fail "could not build the client/A/B/server topology"

# ---------------------------------------------------------------- server side

echo "probe-ok" >"$T/www/probe"
make_file file 256K
TOPO_S=$HS
topo_start_nginx "$T/www" "$T/nginx" 80 8080 || fail "nginx did not start in the server namespace"
ACCESS_LOG=$TOPO_NGINX_ACCESS_LOG
cat >"$T/echo.py" <<'EOF'
import socket, sys, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1])))
srv.listen(8)
srv.settimeout(300)
def echo(c):
    with c:
        while True:
            d = c.recv(65536)
            if not d:
                return
            c.sendall(d)
for _ in range(16):
    try:
        c, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=echo, args=(c,), daemon=True).start()
threading.Event().wait(300)
EOF
cat >"$T/drip.py" <<'EOF'
import socket, sys, threading, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1])))
srv.listen(8)
srv.settimeout(300)
def drip(c):
    with c:
        try:
            while True:
                c.sendall(b"tick\n")
                time.sleep(0.1)
        except OSError:
            return
for _ in range(16):
    try:
        c, _ = srv.accept()
    except socket.timeout:
        break
    threading.Thread(target=drip, args=(c,), daemon=True).start()
threading.Event().wait(300)
EOF
for p in "$FLOW_PORT" "$PFLOW_PORT"; do
    ip netns exec "$HS" python3 "$T/echo.py" "$p" 2>>"$T/echo.err" &
    track_pid $!
    topo_wait_listen "$HS" "$p" 20 || fail "echo server did not start on port $p"
done
ip netns exec "$HS" python3 "$T/drip.py" "$DRIP_PORT" 2>>"$T/drip.err" &
track_pid $!
topo_wait_listen "$HS" "$DRIP_PORT" 20 || fail "drip server did not start on port $DRIP_PORT"


# ---------------------------------------------------------------- firewalls

# a stateful ruleset: forwarded only port FLOW_PORT, new flows only by SYN,
# so that a flow unknown to conntrack (no conntrackd) is dropped, not picked up
fw_rules() {
    local w=$1
    nsFW "$w" sysctl -qw net.netfilter.nf_conntrack_tcp_loose=0
    nsFW "$w" iptables -w -P FORWARD DROP
    nsFW "$w" iptables -w -A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
    nsFW "$w" iptables -w -A FORWARD -i f0 -o f1 -p tcp --syn --dport "$FLOW_PORT" \
        -m conntrack --ctstate NEW -j ACCEPT
}

start_proxyd_fw() { # A|B
    local w=$1 p
    "$PROXYD" --check -c "$T/conf-$w/proxyd.xml" >"$T/check-$w.out" 2>&1 ||
        fail "proxyd --check ($w): $(cat "$T/check-$w.out")"
    ip netns exec "$(fw_ns "$w")" "$PROXYD" -c "$T/conf-$w/proxyd.xml" >>"$T/proxyd-$w.log" 2>&1 &
    PXPID[$w]=$!
    track_pid "${PXPID[$w]}"
    for p in 50080 50081 9180; do
        topo_wait_listen "$(fw_ns "$w")" "$p" 20 "${PXPID[$w]}" || fail "proxyd in $w not listening on $p"
    done
}
fw_ns() { if [[ $1 == A ]]; then echo "$HA"; else echo "$HB"; fi; }

setup_fw() { # A|B
    local w=$1 p
    for p in "80 50080" "8080,$PFLOW_PORT,$DRIP_PORT 50081"; do
        set -- $p
        nsFW "$w" "$DEPLOY" tproxy --family 4 --port "$1" --proxy-port "$2" --in-iface f0 \
            --upstream-mark none >>"$T/deploy-$w.out" 2>&1 || { cat "$T/deploy-$w.out" >&2; fail "inline-tproxy.sh in $w"; }
    done
    fw_rules "$w"
    mkdir -p "$T/conf-$w" "$T/policy-$w"
    cat >"$T/conf-$w/proxyd.xml" <<EOF
<proxyd>
  <workers>2</workers>
  <limits shutdown-grace="1s" connect-timeout="5s"/>
  <log target="stderr" level="info"/>
  <admin listen="$ADMIN" ha-state-file="$HADIR/$w/state"/>
  <policies dir="../policy-$w"/>
</proxyd>
EOF
    cat >"$T/policy-$w/web.xml" <<EOF
<service name="web" analyser="http">
  <listen address="0.0.0.0" port="50080" mode="transparent"/>
  <http/>
</service>
EOF
    cat >"$T/policy-$w/tcp.xml" <<EOF
<service name="tcp" analyser="plug">
  <listen address="0.0.0.0" port="50081" mode="transparent"/>
</service>
EOF
    start_proxyd_fw "$w"
}

pair_up() { # A|B [OUT]
    local w=$1 out me peer
    out=${2:-$T/pair-$1.out}
    if [[ $w == A ]]; then me=A peer=B; else me=B peer=A; fi
    local -n in_peer=HA_${peer}_IN out_peer=HA_${peer}_OUT sync_peer=HA_${peer}_SYNC
    nsFW "$me" "$PAIR" up --name "fw-$me" --priority "${PRIO[$me]}" --dir "$HADIR/$me" \
        --state-file "$HADIR/$me/state" --admin "$ADMIN" \
        --in-iface f0 --in-vip "$HA_VIP_IN/24" --in-peer "$in_peer" \
        --out-iface f1 --out-vip "$HA_VIP_OUT/24" --out-peer "$out_peer" \
        --sync-iface sync0 --sync-peer "$sync_peer" >"$out" 2>&1 ||
        { cat "$out" >&2; fail "pair.sh up in $me failed"; }
}

ha_state() { awk '{print $1; exit}' "$HADIR/$1/state" 2>/dev/null || true; }

# wait_state W STATE TIMEOUT_S: the notify script of W wrote STATE
wait_state() {
    local w=$1 want=$2 timeout=$3 deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until [[ $(ha_state "$w") == "$want" ]]; do
        (($(date +%s%N) < deadline)) || fail "$w: VRRP state '$(ha_state "$w")' after ${timeout}s, expected $want"
        sleep 0.05
    done
}

# the VRRP state proxyd in W reports, from /metrics (the 1 among the labels)
px_ha_metric() {
    nsFW "$1" curl -s --max-time 3 "http://$ADMIN/metrics" |
        sed -nE 's/^proxyd_ha_state\{state="([a-z]+)"\} 1$/\1/p'
}
assert_px_state() { # W STATE
    local v deadline=$(($(date +%s%N) + ASYNC_WAIT * 1000000000))
    until [[ $(px_ha_metric "$1") == "$2" ]]; do
        (($(date +%s%N) < deadline)) || fail "proxyd in $1: proxyd_ha_state says '$(px_ha_metric "$1")', expected $2"
        sleep 0.1
    done
    v=$(nsFW "$1" curl -s --max-time 3 "http://$ADMIN/status")
    [[ $v == *"\"ha\":{\"state\":\"$2\",\"since\":"* ]] || fail "proxyd in $1: /status lacks ha state $2: $v"
}

# exactly one firewall holds each virtual address, the given one
assert_vips_on() { # W
    local a
    for a in "$HA_VIP_IN" "$HA_VIP_OUT"; do
        assert_eq "$(ha_vip_holders "$a")" "$1" "firewalls holding $a"
    done
}

# fetch NAME QUERY PORT: the docroot file through whichever firewall is master
fetch() {
    local code
    code=$(nsC curl -sS --max-time 10 -o "$T/out" -w '%{http_code}' "http://$HA_S4:$3/$1?$2" 2>>"$T/curl.err") ||
        fail "curl http://$HA_S4:$3/$1?$2 from the client failed: $(tail -n 1 "$T/curl.err")"
    assert_eq "$code" 200 "status of http://$HA_S4:$3/$1?$2"
    assert_eq "$(sha256_of "$T/out")" "$(sha256_of "$T/www/$1")" "sha256 of $1 via port $3"
}
# through W: the request came from W's own server-side address (no spoofing)
# and went through W's proxyd (its session-end line)
fetch_via() { # W TAG
    local w=$1 tag=$2 src
    local -n own=HA_${w}_OUT
    fetch file "$tag-http" 80
    fetch file "$tag-plug" 8080
    wait_grep "$ACCESS_LOG" "$tag-plug" || fail "nginx did not log $tag-plug"
    src=$(grep -E -- "$tag-(http|plug)" "$ACCESS_LOG" | awk '{print $1}' | sort -u | tr '\n' ' ')
    assert_eq "${src% }" "$own" "address nginx saw for the $tag requests (fw $w's own)"
    wait_grep "$T/proxyd-$w.log" "session-end service=tcp .*end=" || fail "no plug session-end line in $w's proxyd log"
}

# rule_pkts W TEXT: packet counter of the first FORWARD rule of W listing TEXT
rule_pkts() {
    nsFW "$1" iptables -w -L FORWARD -v -x -n | awk -v c="$2" 'NR > 2 && index($0, c) { print $1; exit }'
}

# ---------------------------------------------------------------- client side

cat >"$T/prober.py" <<'EOF'
# one HTTP request every 100 ms, each on a new connection with a 2 s limit;
# writes "start end ok" per request when told to stop (a file appears)
import os, socket, sys, threading, time
host, port, out, stopf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
res, lock, threads = [], threading.Lock(), []
def probe(n, t0):
    ok = False
    try:
        s = socket.create_connection((host, port), timeout=2)
        s.settimeout(max(0.1, 2 - (time.time() - t0)))
        s.sendall(b"GET /probe?n=%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (n, host.encode()))
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        ok = data.startswith(b"HTTP/1.1 200") and data.endswith(b"probe-ok\n")
    except OSError:
        pass
    with lock:
        res.append((t0, time.time(), ok))
n, nxt, deadline = 0, time.time(), time.time() + 90
while not os.path.exists(stopf) and time.time() < deadline:
    t = threading.Thread(target=probe, args=(n, time.time()))
    t.start()
    threads.append(t)
    n += 1
    nxt += 0.1
    time.sleep(max(0, nxt - time.time()))
for t in threads:
    t.join()
with open(out + ".tmp", "w") as f:
    for r in sorted(res):
        f.write("%.3f %.3f %d\n" % r)
os.rename(out + ".tmp", out)
EOF

cat >"$T/flow.py" <<'EOF'
# a long-lived TCP flow: 13 bytes every 50 ms, each echoed back; any reset,
# timeout or wrong byte ends it with "error"; status file: STATE SEQ MAXGAP_MS
import os, socket, sys, time
host, port, statf, stopf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def status(state, seq, gap):
    with open(statf + ".tmp", "w") as f:
        f.write("%s %d %d\n" % (state, seq, gap * 1000))
    os.rename(statf + ".tmp", statf)
seq, gap = 0, 0.0
try:
    s = socket.create_connection((host, port), timeout=5)
    s.settimeout(15)
    last, deadline = time.time(), time.time() + 150
    while not os.path.exists(stopf) and time.time() < deadline:
        msg = b"%012d\n" % seq
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            d = s.recv(len(msg) - len(got))
            if not d:
                raise OSError("closed by the peer")
            got += d
        if got != msg:
            raise OSError("wrong bytes %r" % got)
        now = time.time()
        gap, last, seq = max(gap, now - last), now, seq + 1
        status("ok", seq, gap)
        time.sleep(0.05)
    s.close()
    status("done", seq, gap)
except OSError as e:
    sys.stderr.write("flow: %r after %d\n" % (e, seq))
    status("error", seq, gap)
    sys.exit(1)
EOF

cat >"$T/reader.py" <<'EOF'
# a proxied client that only reads (the drip server's lines): status file
# "STATE BYTES END_MS", STATE reading (END_MS 0), then how it ended: closed,
# reset, error, or timeout (nothing for 30 s: the session hangs)
import os, socket, sys, time
host, port, statf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def status(state, n, end):
    with open(statf + ".tmp", "w") as f:
        f.write("%s %d %d\n" % (state, n, end * 1000))
    os.rename(statf + ".tmp", statf)
n, state = 0, "error"
try:
    s = socket.create_connection((host, port), timeout=5)
    s.settimeout(30)
    while True:
        d = s.recv(65536)
        if not d:
            state = "closed"
            break
        n += len(d)
        status("reading", n, 0)
except ConnectionResetError:
    state = "reset"
except socket.timeout:
    state = "timeout"
except OSError as e:
    sys.stderr.write("reader: %r\n" % (e,))
status(state, n, time.time())
EOF

flow_field() { awk -v f="$1" '{print $f}' "${2:-$T/flow.status}" 2>/dev/null || true; }
# wait_flow_past SEQ TIMEOUT_S [NAME WHAT]: flow NAME (default "flow", the
# forwarded one; its files $T/NAME.status and .err) is still ok and echoed
# beyond SEQ
wait_flow_past() {
    local want=$1 deadline=$(($(date +%s%N) + $2 * 1000000000)) name=${3:-flow} what=${4:-the forwarded flow}
    local st=$T/$name.status
    until [[ $(flow_field 1 "$st") == ok ]] && (($(flow_field 2 "$st") > want)); do
        [[ $(flow_field 1 "$st") == error ]] && fail "$what died: $(tail -n 1 "$T/$name.err")"
        (($(date +%s%N) < deadline)) || fail "$what is stuck at $(cat "$st" 2>/dev/null) (wanted > $want)"
        sleep 0.05
    done
}

# wait_reading FILE SECONDS: the reading client got its first bytes
wait_reading() {
    local deadline=$(($(date +%s%N) + $2 * 1000000000))
    until [[ $(awk '{print $1}' "$1" 2>/dev/null) == reading ]]; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

PROBER_PID=""
start_prober() { # TAG
    rm -f "$T/probe.stop"
    ip netns exec "$HC" python3 "$T/prober.py" "$HA_S4" 80 "$T/probe-$1.txt" "$T/probe.stop" 2>>"$T/prober.err" &
    PROBER_PID=$!
    track_pid "$PROBER_PID"
}
# stop_prober TAG: sets GAP_MS (longest time without a successful request
# completing) and FAILED (requests that failed)
stop_prober() {
    touch "$T/probe.stop"
    wait_exit "$PROBER_PID" 10 || fail "prober did not stop"
    [[ -s $T/probe-$1.txt ]] || fail "prober wrote nothing"
    GAP_MS=$(awk '$3 == 1 { if (n++ && ($2 - last) * 1000 > g) g = ($2 - last) * 1000; last = $2 }
        END { printf "%d\n", g }' "$T/probe-$1.txt")
    FAILED=$(awk '$3 == 0' "$T/probe-$1.txt" | wc -l)
    TOTAL=$(wc -l <"$T/probe-$1.txt")
}
# wait_nginx_probes BEFORE N TIMEOUT_S: N more probe requests reached nginx
# (the prober writes its own results only when it stops)
wait_nginx_probes() { # COUNT_BEFORE N TIMEOUT_S
    local deadline=$(($(date +%s%N) + $3 * 1000000000))
    until (($(grep -c 'GET /probe' "$ACCESS_LOG") >= $1 + $2)); do
        (($(date +%s%N) < deadline)) || fail "fewer than $2 probe requests reached nginx within $3 s"
        sleep 0.1
    done
}

# ---------------------------------------------------------------- 0. the pair

setup_fw A
setup_fw B
if [[ ${HA_NO_CONNTRACKD:-0} == 1 ]]; then
    info "HA_NO_CONNTRACKD=1: B's conntrackd will be stopped (the forwarded flow should die)"
fi
pair_up A
info "deploy/ha/pair.sh up in A:"
sed 's/^/    /' "$T/pair-A.out"
wait_state A master 20
pair_up B
wait_state B backup 20
[[ ${HA_NO_CONNTRACKD:-0} == 1 ]] && nsB conntrackd -C "$HADIR/B/conntrackd.conf" -k
assert_vips_on A
assert_px_state A master
assert_px_state B backup
info "A master, B backup; proxyd_ha_state and /status agree"

# idempotent: the same command again installs nothing and restarts nothing
n_trans=$(wc -l <"$HADIR/A/transitions.log")
pair_up A "$T/pair-A2.out"
assert_eq "$(grep -c '^# ---- unchanged$' "$T/pair-A2.out")" 3 "files pair.sh rewrote on a second identical run"
assert_grep "$T/pair-A2.out" '^# keepalived already running with this config$'
assert_grep "$T/pair-A2.out" '^# conntrackd already running with this config$'
assert_no_grep "$T/pair-A2.out" '^\+ ' "a command run by the second identical pair.sh run"
assert_eq "$(wc -l <"$HADIR/A/transitions.log")" "$n_trans" "transitions after the second run"

fetch_via A phase0
ip netns exec "$HC" python3 "$T/flow.py" "$HA_S4" "$FLOW_PORT" "$T/flow.status" "$T/flow.stop" 2>>"$T/flow.err" &
FLOW_PID=$!
track_pid "$FLOW_PID"
wait_flow_past 10 15
[[ $(nsA conntrack -L -p tcp --dport "$FLOW_PORT" 2>/dev/null) == *ESTABLISHED* ]] ||
    fail "no ESTABLISHED conntrack entry for the forwarded flow in A"
info "forwarded flow to $HA_S4:$FLOW_PORT through A: $(cat "$T/flow.status")"

# exactly one proxyd says master, the given one; the other says OTHER
assert_one_master() { # MASTER OTHER_STATE
    local o
    if [[ $1 == A ]]; then o=B; else o=A; fi
    assert_px_state "$1" master
    assert_px_state "$o" "$2"
}

# failover MASTER NEW TAG BOUND_MS DRIP ACTION...: run ACTION, wait for NEW
# to be master, measure the gap, check the forwarded flow and the proxied
# clients; DRIP: how the reading client must end (a regex: closed|reset),
# "-" not checked
failover() {
    local old=$1 new=$2 tag=$3 bound=$4 drip=$5 before seq t0 t1 fwd0 fwd1 PFLOW_PID DRIP_PID dstate dend
    shift 5
    before=$(grep -c 'GET /probe' "$ACCESS_LOG" || true)
    start_prober "$tag"
    # a long-lived proxied session (plug service): the same echo flow
    ip netns exec "$HC" python3 "$T/flow.py" "$HA_S4" "$PFLOW_PORT" "$T/pflow-$tag.status" "$T/flow.stop" \
        2>>"$T/pflow-$tag.err" &
    PFLOW_PID=$!
    track_pid "$PFLOW_PID"
    # and one that only reads
    ip netns exec "$HC" python3 "$T/reader.py" "$HA_S4" "$DRIP_PORT" "$T/drip-$tag.status" \
        2>>"$T/drip-$tag.err" &
    DRIP_PID=$!
    track_pid "$DRIP_PID"
    wait_nginx_probes "$before" 10 15
    wait_flow_past 5 15 "pflow-$tag" "$tag: the proxied flow"
    wait_reading "$T/drip-$tag.status" 15 || fail "$tag: the reading client got nothing: $(cat "$T/drip-$tag.status" 2>/dev/null)"
    t0=$(now_ms)
    info "$tag: $*"
    "$@"
    wait_state "$new" master 15
    t1=$(now_ms)
    info "$tag: $new reports master $((t1 - t0)) ms after the failure"
    # the old master forwards until it gives up its addresses: count from here
    seq=$(flow_field 2)
    fwd0=$(rule_pkts "$new" ESTABLISHED)
    # 20 more requests through the new master, then stop
    before=$(grep -c 'GET /probe' "$ACCESS_LOG" || true)
    wait_nginx_probes "$before" 20 10
    stop_prober "$tag"
    info "$tag: gap $GAP_MS ms without a successful request ($FAILED of $TOTAL requests failed), bound $bound ms"
    assert_lt "$GAP_MS" "$bound" "$tag: longest time without a successful request (ms)"
    wait_flow_past $((seq + 20)) 15
    fwd1=$(rule_pkts "$new" ESTABLISHED)
    assert_ge "$((fwd1 - fwd0))" 40 "$tag: packets of established flows $new forwarded after the takeover"
    info "$tag: the forwarded flow survived: $(cat "$T/flow.status") (state, echoes, longest echo gap ms); $new forwarded $((fwd1 - fwd0)) packets of it"
    # the proxied session does not survive: it lived in the old master's
    # proxyd; its next packet reaches the new master, which resets it
    wait_exit "$PFLOW_PID" 20 || fail "$tag: the proxied flow still runs 20 s after the failover"
    ((WAIT_RC != 0)) || fail "$tag: the proxied flow went on across the failover (expected a reset)"
    info "$tag: the proxied flow ended: $(tail -n 1 "$T/pflow-$tag.err")"
    if [[ $drip != - ]]; then
        # a client waiting for data is told, not left until the idle timeout
        wait_exit "$DRIP_PID" 20 ||
            fail "$tag: the reading client still waits 20 s after the failover: $(cat "$T/drip-$tag.status")"
        read -r dstate _ dend <"$T/drip-$tag.status"
        [[ $dstate =~ ^($drip)$ ]] || fail "$tag: the reading client's session ended '$dstate', expected $drip"
        info "$tag: the reading client's session ended: $dstate, $((dend - t0)) ms after the failure (bound $HA_BOUND_DRIP_MS ms)"
        assert_lt "$((dend - t0))" "$HA_BOUND_DRIP_MS" "$tag: ms from the failure to the end of the reading client's session"
    fi
    assert_vips_on "$new"
    assert_px_state "$new" master
    [[ $(nsFW "$new" conntrack -L -p tcp --dport "$FLOW_PORT" 2>/dev/null) == *ESTABLISHED* ]] ||
        fail "$tag: no ESTABLISHED conntrack entry for the forwarded flow in $new"
    fetch_via "$new" "$tag"
}

# ---------------------------------------------------------------- 1. kill proxyd

kill_proxyd() { kill -KILL "${PXPID[$1]}"; wait_exit "${PXPID[$1]}" 5 || true; }
failover A B kill "$HA_BOUND_KILL_MS" 'closed|reset' kill_proxyd A
KILL_GAP=$GAP_MS
wait_state A fault 20
assert_no_grep "$T/proxyd-A.log" 'proxyd exiting' "a clean exit of the killed proxyd"
start_proxyd_fw A
wait_state A backup 20
assert_one_master B backup
assert_vips_on B
info "proxyd back on A: A backup, B stays master (nopreempt)"

# ---------------------------------------------------------------- 2. kill keepalived

KA_OLD=""
kill_keepalived() { # W: kill -9 both keepalived processes, as one kill(1) of both would
    KA_OLD=$(cat "$HADIR/$1/keepalived.pid")
    kill -KILL "$KA_OLD" "$(cat "$HADIR/$1/keepalived-vrrp.pid")"
}
failover B A keepalived "$HA_BOUND_KA_MS" reset kill_keepalived B
KA_GAP=$GAP_MS
# the supervisor said so, and started another keepalived, which came back
# as backup (nopreempt): one master, not two
assert_grep "$HADIR/B/transitions.log" ' SUPERVISOR PROXYD -> fault ' "B's supervisor's fault transition"
assert_grep "$HADIR/B/transitions.log" 'proxyd sessions reset: .*"reason":"ha: left master"' \
    "B's proxyd told to reset its sessions"
assert_grep "$T/proxyd-B.log" 'session-end service=tcp .*by=shutdown phase=data end=ha: left master' \
    "a session-end line of B's proxyd for the sessions reset on leaving master"
wait_state B backup 20
[[ $(cat "$HADIR/B/keepalived.pid" 2>/dev/null) != "$KA_OLD" ]] && kill -0 "$(cat "$HADIR/B/keepalived.pid")" ||
    fail "B's keepalived was not restarted"
assert_one_master A backup
assert_vips_on A
nsB "$PAIR" status --dir "$HADIR/B" >"$T/status-B.out" 2>&1 || fail "pair.sh status in B: $(cat "$T/status-B.out")"
assert_grep "$T/status-B.out" '^=== keepalived: running \(pid [0-9]+\), supervisor: running \(pid [0-9]+\)$' \
    "pair.sh status in B after the restart"
info "keepalived back on B (pid $(cat "$HADIR/B/keepalived.pid"), was $KA_OLD): B backup, A stays master"

# ---------------------------------------------------------------- 3. server link down

link_down() { nsFW "$1" ip link set "$2" down; }
failover A B outlink "$HA_BOUND_LINK_MS" reset link_down A f1
SLINK_GAP=$GAP_MS
wait_state A fault 20
assert_grep "$T/proxyd-A.log" 'session-end service=tcp .*by=shutdown phase=data end=ha: left master' \
    "a session-end line of A's proxyd for the sessions reset on leaving master"
nsA ip link set f1 up
wait_state A backup 15
assert_one_master B backup
assert_vips_on B

# ---------------------------------------------------------------- 4. client link down

failover B A inlink "$HA_BOUND_LINK_MS" - link_down B f0
LINK_GAP=$GAP_MS
wait_state B fault 20
nsB ip link set f0 up
wait_state B backup 15
assert_one_master A backup

# ---------------------------------------------------------------- 5. keepalived hung

# hang_keepalived W: kill -STOP both keepalived processes of W (alive, not
# answering: no advert, no script, no notify), then wait until W holds
# neither virtual address; HANG_MS: how long that took
hang_keepalived() {
    local w=$1 t0 a deadline
    KA_OLD=$(cat "$HADIR/$w/keepalived.pid")
    KA_STOPPED=("$KA_OLD" "$(cat "$HADIR/$w/keepalived-vrrp.pid")")
    t0=$(now_ms)
    kill -STOP "${KA_STOPPED[@]}"
    deadline=$((t0 + HA_BOUND_HANG_MS))
    for a in "$HA_VIP_IN" "$HA_VIP_OUT"; do
        while [[ " $(ha_vip_holders "$a") " == *" $w "* ]]; do
            (($(now_ms) < deadline)) ||
                fail "hang: $w still holds $a ${HA_BOUND_HANG_MS} ms after its keepalived was stopped (holders: $(ha_vip_holders "$a"))"
            sleep 0.05
        done
    done
    HANG_MS=$(($(now_ms) - t0))
}
n_fault=$(grep -c ' SUPERVISOR PROXYD -> fault ' "$HADIR/A/transitions.log" || true)
failover A B hang "$HA_BOUND_LINK_MS" 'closed|reset' hang_keepalived A
HANG_GAP=$GAP_MS
info "hang: A gave up the addresses $HANG_MS ms after its keepalived was stopped (bound $HA_BOUND_HANG_MS ms)"
assert_grep "$HADIR/A/keepalived.log" \
    "pair\.sh supervise: keepalived \(pid $KA_OLD\) not answering: no heartbeat for [0-9.]+ s" \
    "A's supervisor's line for the stopped keepalived"
assert_eq "$(grep -c ' SUPERVISOR PROXYD -> fault ' "$HADIR/A/transitions.log")" "$((n_fault + 1))" \
    "A's supervisor's fault transitions"
wait_state A backup 20
kill -CONT "${KA_STOPPED[@]}" 2>/dev/null || true   # gone already: killed by the supervisor
[[ $(cat "$HADIR/A/keepalived.pid" 2>/dev/null) != "$KA_OLD" ]] && kill -0 "$(cat "$HADIR/A/keepalived.pid")" ||
    fail "A's keepalived was not restarted"
KA_STOPPED=()
assert_one_master B backup
assert_vips_on B
info "keepalived back on A (pid $(cat "$HADIR/A/keepalived.pid"), was $KA_OLD): A backup, B stays master"

# ---------------------------------------------------------------- 6. settled

assert_vips_on B
assert_one_master B backup
assert_grep "$HADIR/A/transitions.log" ' -> master \(priority 150\)$' "A's priority in its transitions.log"
assert_grep "$HADIR/B/transitions.log" ' -> master \(priority 100\)$' "B's priority in its transitions.log"
wait_flow_past $(($(flow_field 2) + 5)) 15
touch "$T/flow.stop"
wait_exit "$FLOW_PID" 15 || fail "flow client did not stop"
assert_eq "$WAIT_RC" 0 "flow client exit status"
info "transitions A: $(awk '/ -> / {print $1 "→" $5}' "$HADIR/A/transitions.log" | tr '\n' ' ')"
info "transitions B: $(awk '/ -> / {print $1 "→" $5}' "$HADIR/B/transitions.log" | tr '\n' ' ')"
info "gaps: kill proxyd ${KILL_GAP} ms (bound $HA_BOUND_KILL_MS), kill keepalived ${KA_GAP} ms (bound $HA_BOUND_KA_MS), server link down ${SLINK_GAP} ms, client link down ${LINK_GAP} ms (bound $HA_BOUND_LINK_MS), keepalived hung ${HANG_GAP} ms (addresses gone from A after $HANG_MS ms, bound $HA_BOUND_HANG_MS); forwarded flow: $(cat "$T/flow.status")"
info "PASS"
