#!/usr/bin/env bash
# The cluster lab (deploy/cluster/lab.sh) as a test: 3 proxyd nodes behind a
# router that spreads flows by ECMP over the routes their bgpds announce.
#   1. `lab.sh up 3` prints server= (the service address) and root= (the
#      folder nginx serves); a file comes back byte for byte through the
#      http service (port 80) and the plug service (8081).
#   2. 600 HTTP connections without keep-alive (ab): all served (status,
#      bytes at the client; 600 log lines with status and size at nginx);
#      each node served 20-45 % of them, counted both by its proxyd
#      (/metrics, responses 200 of the http service) and by nginx
#      (the node's address as the source), and the two counts agree.
#   3. `lab.sh status`: one line per node, active, no live session, the
#      name its proxyd gives (node=t$$-nI, its <node name>, which is also
#      on every line of its log); then
#      with 30 connections held open through the plug service (8081), the
#      nodes' live sessions add up to 30.
#   3b. `lab.sh upgrade 1 5` (a hand-over): node 1's held connections pass to
#      its new proxyd process (pid changed, still announced, the same live
#      count); step 4's second requests show them served.
#   4. `lab.sh kill 3` (every process of node 3, kill -9): the router drops
#      node 3's next hop within LAB_BOUND_KILL_MS (measured); the held
#      connections each send a second request: exactly node 3's fail (the
#      router pins flows to their node: nodes 1 and 2's go on); 60 new
#      connections are all served by nodes 1 and 2.
#   5. With 20 more connections held open: `lab.sh add` brings node 4
#      into the route; 60 new connections are served by nodes 1, 2 and 4
#      (node 4 some of them). `lab.sh drain 2`: its next hop goes, status
#      says draining with node 2's share of the held connections live; 30
#      new connections all go to nodes 1 and 4; the held ones all get a
#      second answer (node 2's included: neither the add nor the drain
#      broke any), close, and the drain ends (before its LAB_DRAIN_S
#      deadline) with no live session: status says drained.
#   6. Node 4's proxyd stopped (SIGSTOP, a hung process): its supervisor's
#      health check withdraws it within LAB_BOUND_HANG_MS; 30 new
#      connections all go to node 1; continued (SIGCONT), it is announced
#      again within the same bound.
#   7. Node 1's proxyd alone killed (kill -9): its supervisor withdraws the
#      announcement within LAB_BOUND_KILL_MS; status says n1 down, n4
#      active; 30 new connections are all served by node 4.
#   8. `lab.sh down`: no namespace and no process of the lab is left.
# LAB_PIN=0 runs the lab without flow pinning: step 4 then fails (some of
# nodes 1 and 2's sessions move with the hash).
# Needs root, FRR (frr), nginx, curl, ab (apache2-utils); about 20 s.
set -euo pipefail
# shellcheck source=cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
: "${LAB_BOUND_KILL_MS:=3000}"
: "${LAB_DRAIN_S:=20}"
: "${LAB_BOUND_HANG_MS:=10000}"  # lab.sh's health check: 2 failures of at most
                                # 2 s, a second apart, and vtysh; the same back
SIZE=4096
N_REQ=600
cluster_setup t ab

lab_diag_more() {
    local d
    echo "# router: show bgp summary"; lab router vtysh --vty_socket "$LAB_DIR/router" -c 'show bgp summary' 2>&1
    echo "# router: links"; lab router ip -s -br link 2>&1
    echo "# router: conntrack to :80 not in TIME_WAIT"
    lab router conntrack -L -p tcp --dport 80 2>/dev/null | grep -v TIME_WAIT | head -n 20
    for d in "$LAB_DIR"/n*; do
        echo "# node ${d##*/n}: ss -tan (not TIME-WAIT)"
        lab node "${d##*/n}" ss -tan 2>&1 | grep -v TIME-WAIT | head -n 15
        echo "# node ${d##*/n}: nstat"; lab node "${d##*/n}" nstat -a 2>&1 | grep -E 'Tcp(Ext)?(ActiveOpens|PassiveOpens|AttemptFails|InErrs|OutRsts|ListenDrops|ListenOverflows|InSegs)|IpInReceives|IpInDiscards|IpInAddrErrors'
        echo "# $d: supervise.log"; tail -n 5 "$d/supervise.log" 2>/dev/null
    done
    echo "# ab (last run)"; cat "$T/ab.out" 2>/dev/null
}

# node_served I: responses 200 of node I's http service (its /metrics); one
# per connection without keep-alive (ab also opens a few connections that it
# closes unused at the end: accepted sessions would count those)
node_served() {
    lab node "$1" curl -s --max-time 3 http://127.0.0.1:9180/metrics |
        awk '/^proxyd_http_responses_total\{/ && /service="http"/ && /code="200"/ { s += $NF } END { printf "%d\n", s }'
}

# ab_ok N URL_PATH: N connections (no keep-alive) all served, right size
ab_ok() {
    local n=$1 path=$2 v
    lab client ab -n "$n" -c 8 -s 10 "http://$SERVER$path" >"$T/ab.out" 2>&1 ||
        fail "ab -n $n http://$SERVER$path failed: $(tail -n 3 "$T/ab.out")"
    v=$(awk '/^Complete requests:/ { print $3 }' "$T/ab.out")
    assert_eq "$v" "$n" "ab: complete requests"
    v=$(awk '/^Failed requests:/ { print $3 }' "$T/ab.out")
    assert_eq "$v" 0 "ab: failed requests"
    if grep -q '^Non-2xx responses:' "$T/ab.out"; then
        fail "ab: $(grep '^Non-2xx' "$T/ab.out")"
    fi
    v=$(awk '/^Document Length:/ { print $3 }' "$T/ab.out")
    assert_eq "$v" "$SIZE" "ab: document length"
    v=$(awk '/^HTML transferred:/ { print $3 }' "$T/ab.out")
    assert_eq "$v" "$((n * SIZE))" "ab: body bytes received"
}

# nginx_from ADDR: requests for /f.bin served with status 200 and the whole
# body to ADDR (a node's server-side address)
nginx_from() {
    grep -c "^$1 [0-9]* 80 \"GET /f.bin HTTP/1.[01]\" 200 $SIZE\$" "$LAB_DIR/server/logs/access.log" || true
}
nginx_total() {
    grep -c " 80 \"GET /f.bin HTTP/1.[01]\" 200 $SIZE\$" "$LAB_DIR/server/logs/access.log" || true
}

nexthops() { lab router ip route show 198.18.0.80 | grep -Eo 'via [0-9.]+' | awk '{print $2}' | sort | tr '\n' ' '; }
not_in_route() { [[ " $(nexthops)" != *" $1 "* ]]; }

# ---------------------------------------------------------------- 1. up

info "lab.sh up 3 (LAB_ID=$LAB_ID)"
lab_up 3
cat "$T/up.out"
[[ $SERVER =~ ^198\.1[89]\.[0-9]+\.[0-9]+$ ]] || fail "lab.sh up printed no server=ADDRESS in 198.18.0.0/15: '$SERVER'"
[[ -d $ROOT ]] || fail "lab.sh up printed no root=DIR that exists: '$ROOT'"
assert_eq "$(nexthops)" "198.18.2.10 198.18.2.2 198.18.2.6 " "router's next hops for $SERVER"

head -c "$SIZE" /dev/urandom >"$ROOT/f.bin"
want=$(sha256sum <"$ROOT/f.bin" | cut -d' ' -f1)
for port in 80 8081; do
    got=$(lab client curl -sS --max-time 10 "http://$SERVER:$port/f.bin" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$want" "sha256 of f.bin through port $port"
done
info "f.bin comes back byte for byte through ports 80 (http) and 8081 (plug)"

# ---------------------------------------------------------------- 2. spread

declare -A before=() from_nginx0=()
for i in 1 2 3; do
    before[$i]=$(node_served "$i")
    from_nginx0[$i]=$(nginx_from "198.19.2.1$i")
done
total0=$(nginx_total)
t0=$(now_ms)
ab_ok "$N_REQ" /f.bin
info "ab: $N_REQ connections, no keep-alive, all 200 with $SIZE bytes, in $(($(now_ms) - t0)) ms"
# nginx logs a request when it has sent the response: bounded wait for the last ones
all_logged() { (($(nginx_total) - total0 >= N_REQ)); }
wait_cond 5000 all_logged ||
    fail "nginx logged $(($(nginx_total) - total0)) of $N_REQ requests (200, $SIZE bytes)"
assert_eq "$(($(nginx_total) - total0))" "$N_REQ" "requests nginx served"
sum=0
for i in 1 2 3; do
    got=$(($(node_served "$i") - before[$i]))
    seen=$(($(nginx_from "198.19.2.1$i") - from_nginx0[$i]))
    pct=$((got * 100 / N_REQ))
    info "node $i: $got sessions (${pct} %) by its proxyd, $seen requests from it at nginx"
    assert_eq "$seen" "$got" "node $i: nginx's count and proxyd's"
    ((got * 100 >= 20 * N_REQ && got * 100 <= 45 * N_REQ)) ||
        fail "node $i took $got of $N_REQ sessions (${pct} %), not within 20-45 %"
    sum=$((sum + got))
done
assert_eq "$sum" "$N_REQ" "sessions accepted by the three nodes"

# ---------------------------------------------------------------- 3. status

# the last of ab's sessions may still be closing: bounded wait
all_idle() {
    lab status >"$T/status.out" && [[ $(grep -Ec '^n[123] active sessions=0 accepted=[0-9]+ node=[^ ]+$' "$T/status.out") == 3 ]]
}
wait_cond 5000 all_idle || fail "status: not 3 lines 'nI active sessions=0 accepted=N node=NAME': $(cat "$T/status.out")"
# each node's proxyd says its own name (<node name>), on /metrics and on
# its log lines
for i in 1 2 3; do
    grep -Eq "^n$i active sessions=0 accepted=[0-9]+ node=$LAB_ID-n$i\$" "$T/status.out" ||
        fail "status: n$i does not say node=$LAB_ID-n$i: $(cat "$T/status.out")"
    assert_grep "$LAB_DIR/n$i/proxyd.log" "^[0-9T:.-]+Z node=$LAB_ID-n$i info #[0-9]+ session-end service=http " \
        "node $i's session-end lines carry node=$LAB_ID-n$i"
    assert_eq "$(grep -Ec "^[0-9T:.-]+Z node=$LAB_ID-n$i " "$LAB_DIR/n$i/proxyd.log")" \
        "$(grep -Ec '^[0-9T:.-]+Z ' "$LAB_DIR/n$i/proxyd.log")" "node $i's log lines with node=$LAB_ID-n$i"
done
cat "$T/status.out"
assert_eq "$(wc -l <"$T/status.out")" 3 "status lines"

# live sessions: HOLD connections through the plug service, each with one
# request answered (keep-alive); status counts them on their nodes
hold_start 30
live_sum() { lab status | awk '{ sub("sessions=", "", $3); s += $3 } END { print s + 0 }'; }
all_live() { [[ $(live_sum) == "$HOLD" ]]; }
wait_cond 5000 all_live || fail "status: live sessions $(live_sum), expected $HOLD: $(lab status)"
lab status >"$T/status.out"
cat "$T/status.out"
n3_live=$(awk '$1 == "n3" { sub("sessions=", "", $3); print $3 }' "$T/status.out")

# ---------------------------------------------------------------- 3b. upgrade 1, hand-over
# node 1's held sessions outlive its drain deadline (shutdown-grace, 1 s):
# `lab.sh upgrade 1 5` (a hand-over) passes them to a new proxyd process; the
# node stays in the route, the live count stays, and step 4's second
# requests find them served.
n1_live=$(awk '$1 == "n1" { sub("sessions=", "", $3); print $3 }' "$T/status.out")
((n1_live > 0)) || fail "none of the $HOLD held connections is on node 1: $(lab status)"
old1=$(cat "$LAB_DIR/n1/proxyd.pid")
lab upgrade 1 5 >"$T/upgrade1.out" 2>>"$T/lab.err" ||
    fail "lab.sh upgrade 1 5: $(tail -n 3 "$T/lab.err")"
new1=$(cat "$LAB_DIR/n1/proxyd.pid")
assert_ne "$new1" "$old1" "node 1's proxyd is a new process"
assert_eq "$(cat "$T/upgrade1.out")" "n1 upgraded pid=$new1 handover sessions=$n1_live drained=0" \
    "lab.sh upgrade 1's result"
wait_cond 5000 all_live || fail "live sessions after the upgrade of node 1: $(live_sum): $(lab status)"
assert_eq "$(nexthops | tr ' ' '\n' | sort | tr '\n' ' ')" "198.18.2.10 198.18.2.2 198.18.2.6 " \
    "next hops after the upgrade of node 1 (sorted)"
info "lab.sh upgrade 1 5: $n1_live held sessions passed to pid $new1"

# ---------------------------------------------------------------- 4. kill 3

lab kill 3 2>>"$T/lab.err"
wait_cond "$LAB_BOUND_KILL_MS" not_in_route 198.18.2.10 ||
    fail "node 3's next hop still in the router's route ${LAB_BOUND_KILL_MS} ms after lab.sh kill 3: $(nexthops)"
info "lab.sh kill 3: next hop withdrawn after $WAITED_MS ms (bound $LAB_BOUND_KILL_MS)"
assert_eq "$(nexthops)" "198.18.2.2 198.18.2.6 " "next hops after kill 3"
# the held sessions: node 3's are lost, the others go on (the router pins
# each flow to its node: a withdrawal moves none)
: >"$T/go"
got_result() { grep -q '^ok=' "$1"; }
wait_cond 10000 got_result "$T/hold.out" || fail "held connections: no result: $(cat "$T/hold.err")"
info "held sessions after kill 3: $(tail -n 1 "$T/hold.out") (node 3 had $n3_live)"
assert_eq "$(tail -n 1 "$T/hold.out")" "ok=$((HOLD - n3_live)) broken=$n3_live" \
    "held sessions after kill 3: only node 3's lost"
declare -A mid=()
for i in 1 2; do mid[$i]=$(node_served "$i"); done
ab_ok 60 /f.bin
got=$(($(node_served 1) - mid[1] + $(node_served 2) - mid[2]))
assert_eq "$got" 60 "sessions taken by nodes 1 and 2 after kill 3"
info "after kill 3: 60 new connections served by nodes 1 and 2"

# ---------------------------------------------------------------- 5. add, drain 2

HOLD2=20
lab client python3 "$CLUSTER_LIB_DIR/cluster_hold.py" "$SERVER" "$HOLD2" "$T/go2" >"$T/hold2.out" 2>"$T/hold2.err" &
track_pid $!
held2() { grep -q '^ready' "$T/hold2.out"; }
wait_cond 10000 held2 || fail "the $HOLD2 held connections did not all get an answer: $(cat "$T/hold2.err")"
n2_live=$(lab status | awk '$1 == "n2" { sub("sessions=", "", $3); print $3 }')
((n2_live > 0)) || fail "none of the $HOLD2 held connections is on node 2: $(lab status)"

t0=$(now_ms)
added=$(lab add 2>>"$T/lab.err") || fail "lab.sh add failed: $(tail -n 3 "$T/lab.err")"
assert_eq "$added" n4 "lab.sh add's new node"
assert_eq "$(nexthops)" "198.18.2.14 198.18.2.2 198.18.2.6 " "next hops after lab.sh add"
info "lab.sh add: node 4 in the route after $(($(now_ms) - t0)) ms"
declare -A m=()
for i in 1 2 4; do m[$i]=$(node_served "$i"); done
ab_ok 60 /f.bin
for i in 1 2 4; do m[$i]=$(($(node_served "$i") - m[$i])); done
info "60 new connections: node 1 ${m[1]}, node 2 ${m[2]}, node 4 ${m[4]}"
assert_eq "$((m[1] + m[2] + m[4]))" 60 "new sessions served by nodes 1, 2 and 4"
((m[4] > 0)) || fail "the added node 4 served none of 60 new connections"
t0=$(now_ms)
lab drain 2 "$LAB_DRAIN_S" >"$T/drain.out" 2>"$T/drain.err" &
DRAIN_PID=$!
track_pid "$DRAIN_PID"
wait_cond "$LAB_BOUND_KILL_MS" not_in_route 198.18.2.6 ||
    fail "node 2's next hop still in the route ${LAB_BOUND_KILL_MS} ms after lab.sh drain 2: $(nexthops)"
info "lab.sh drain 2: next hop withdrawn after $WAITED_MS ms, $n2_live held sessions on node 2"
# (grep -q ends a pipe early: with pipefail, the writer's SIGPIPE would count)
status_has() { [[ $'\n'$(lab status) == *$'\n'"$1"* ]]; }
draining() { status_has "n2 draining sessions=$n2_live "; }
wait_cond 5000 draining || fail "status: n2 not draining with $n2_live sessions: $(lab status)"
m1=$(node_served 1) m2=$(node_served 2) m4=$(node_served 4)
ab_ok 30 /f.bin
assert_eq "$(($(node_served 1) - m1 + $(node_served 4) - m4))" 30 "new sessions taken by nodes 1 and 4 while node 2 drains"
assert_eq "$(($(node_served 2) - m2))" 0 "new sessions taken by node 2 while it drains"
# the draining node's own sessions go on; once they end it stops
: >"$T/go2"
wait_cond 10000 got_result "$T/hold2.out" || fail "held connections (2): no result: $(cat "$T/hold2.err")"
assert_eq "$(tail -n 1 "$T/hold2.out")" "ok=$HOLD2 broken=0" "held sessions while node 2 drains"
wait_exit "$DRAIN_PID" "$((LAB_DRAIN_S + 15))" || fail "lab.sh drain 2 still running"
assert_eq "$WAIT_RC" 0 "lab.sh drain 2's exit status"
assert_eq "$(cat "$T/drain.out")" "n2 drained live_at_stop=0" "lab.sh drain 2's result"
info "lab.sh drain 2: done in $(($(now_ms) - t0)) ms, no session broken"
status_has 'n2 drained ' || fail "status: n2 not drained: $(lab status)"

# ---------------------------------------------------------------- 6. a hung proxyd

pid4=$(cat "$LAB_DIR/n4/proxyd.pid")
kill -STOP "$pid4"
wait_cond "$LAB_BOUND_HANG_MS" not_in_route 198.18.2.14 ||
    fail "node 4's next hop still in the route ${LAB_BOUND_HANG_MS} ms after its proxyd was stopped: $(nexthops)"
info "node 4's proxyd stopped (SIGSTOP): next hop withdrawn after $WAITED_MS ms (bound $LAB_BOUND_HANG_MS)"
m1=$(node_served 1)
ab_ok 30 /f.bin
assert_eq "$(($(node_served 1) - m1))" 30 "new sessions served by node 1 while node 4 hangs"
kill -CONT "$pid4"
in_route() { ! not_in_route "$1"; }
wait_cond "$LAB_BOUND_HANG_MS" in_route 198.18.2.14 ||
    fail "node 4's next hop not back ${LAB_BOUND_HANG_MS} ms after its proxyd was continued: $(nexthops)"
info "node 4's proxyd continued: next hop back after $WAITED_MS ms"

# ---------------------------------------------------------------- 7. proxyd dies

pid=$(cat "$LAB_DIR/n1/proxyd.pid")
proc_alive "$pid" || fail "node 1's proxyd ($pid) is not running"
kill -KILL "$pid"
wait_cond "$LAB_BOUND_KILL_MS" not_in_route 198.18.2.2 ||
    fail "node 1's next hop still in the route ${LAB_BOUND_KILL_MS} ms after its proxyd was killed: $(nexthops)"
info "node 1's proxyd killed: next hop withdrawn after $WAITED_MS ms"
lab status >"$T/status.out"
cat "$T/status.out"
grep -Eq '^n1 down ' "$T/status.out" || fail "status: n1 not down"
grep -Eq '^n3 down sessions=- accepted=- node=-$' "$T/status.out" || fail "status: n3 not down"
grep -Eq '^n4 active ' "$T/status.out" || fail "status: n4 not active"
m4=$(node_served 4)
ab_ok 30 /f.bin
assert_eq "$(($(node_served 4) - m4))" 30 "new sessions served by node 4, the last one"

# ---------------------------------------------------------------- 8. down

pids=$(for n in $(ip netns list | awk -v p="$PFX-" 'index($1, p) == 1 { print $1 }'); do ip netns pids "$n"; done | tr '\n' ' ')
[[ -n ${pids// /} ]] || fail "no process found in the lab's namespaces before down"
LAB_KEEP=1 lab down
left=$(ip netns list | awk -v p="$PFX-" 'index($1, p) == 1 { print $1 }' | tr '\n' ' ')
[[ -z $left ]] || fail "namespaces left after lab.sh down: $left"
for pid in $pids; do
    proc_alive "$pid" && fail "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline")) left after lab.sh down"
done
info "lab.sh down: no namespace and none of the pids $pids left"
info "PASS"
