#!/usr/bin/env bash
# FTP and R66 through the cluster lab (deploy/cluster/lab.sh): 3 proxyd
# nodes behind an ECMP router; every flow of an FTP session reaches the
# node that owns it.
#   1. `lab.sh up 3`: vsftpd (anonymous, serving root=) and r66peer run in
#      the server namespace; every node has ftp on 21 and r66 on 6666.
#   2. 30 passive downloads (curl: EPSV; and PASV) and 10 active ones
#      (curl -P: PORT, so vsftpd connects back to the node too) from the
#      client namespace: all whole (sha256), counted by each node's
#      data-transfer lines (node=, end=ok, the whole size): they add up to
#      40 and more than one node served each mode. Node I owns the data
#      ports 40000+100(I-1)..+99 (its ftp service's data-ports=); the
#      router sends a new connection to one of them to node I, and the
#      client's answers to a node's active-mode connection back to it.
#      Without the router's data port rules (removed for a while), 10
#      passive downloads are still whole: the node a data connection
#      reaches forwards it to its owner over the server segment (packets
#      counted by its rule), none is reset.
#   2b. IPv6 (server6=, 2001:db8:0:80::80): the router's route to it has
#      the 3 nodes as next hops (their IPv6 BGP sessions); through them 60
#      HTTP requests (ab), 30 plug connections, 10 passive (EPSV) and 5
#      active (EPRT) FTP downloads, all whole; counted at both ends: by
#      each node (its http6/plug6 services, its data-transfer lines) and
#      at nginx and vsftpd by the node's IPv6 address they came from,
#      equal, and spread over more than one node; without the router's
#      IPv6 data port rules 10 passive downloads still whole, the nodes
#      forwarding strays to their owner.
#   3. R66: 4 SENDs and 4 RECVs (r66peer, 300 KB) through the nodes, whole
#      at the other end (sha256), each logged by a node.
#   4. 10 FTP control sessions held open (logged in); `lab.sh upgrade 1 20
#      drain`:
#      node 1 leaves the route, 10 new downloads go to nodes 2 and 3, the
#      held sessions (node 1's included) then download whole, node 1's
#      proxyd stops once its last one ends and a new process (another pid)
#      comes back into the route; of 20 new downloads node 1 serves some.
#   4b. 10 more held; `lab.sh upgrade 1 5` (a hand-over): node 1 stays in
#      the route, its held sessions pass to its new proxyd (the result line
#      says how many), and every held session then downloads whole.
#   5. 15 FTP control sessions held open (logged in), on the nodes; `lab.sh
#      kill 3`: each then downloads (passive): exactly node 3's fail, the
#      others get the whole file; 10 new passive and 5 new active downloads
#      all whole, none on node 3.
#   6. `lab.sh down` leaves no namespace.
# Needs root, FRR (frr), nginx, vsftpd, curl, python3, bench/r66peer; ~20 s.
set -euo pipefail
# shellcheck source=cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
SIZE=300000
cluster_setup f ab

# downloads: node I's whole downloads of f.bin (its data-transfer lines)
downloads() {
    grep -Ec "^[0-9T:.-]+Z node=$LAB_ID-n$1 info #[0-9]+ data-transfer download cmd=RETR file=\"f\\.bin\" bytes=$SIZE .* end=ok\$" \
        "$LAB_DIR/n$1/proxyd.log" || true
}

# fetch N [CURL_OPTS...]: N downloads of f.bin (from FTP_HOST, default
# SERVER), each whole; sets OKS
fetch() {
    local n=$1 k got
    shift
    OKS=0
    for ((k = 0; k < n; k++)); do
        got=$(lab client curl -sS --max-time 10 "$@" "ftp://${FTP_HOST:-$SERVER}/f.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1) || true
        if [[ $got == "$WANT" ]]; then OKS=$((OKS + 1)); fi
    done
}

# spread WHAT N I...: node I's downloads since snap add up to N (the
# counts per node in LAST_SPREAD)
declare -A base=()
# (Once the nodes' logs are settled: a node's log thread writes a line up
# to 50 ms after the fact, and a line of what came before the snapshot
# must not be counted after it. Bounded: 3 s.)
all_downloads() {
    local i
    for i in 1 2 3 4; do
        if [[ -f $LAB_DIR/n$i/proxyd.log ]]; then downloads "$i"; fi
    done | tr '\n' ' '
}
snap() {
    local i k prev now
    prev=$(all_downloads)
    for ((k = 0; k < 30; k++)); do
        sleep 0.1
        now=$(all_downloads)
        [[ $now == "$prev" ]] && break
        prev=$now
    done
    for i in "$@"; do base[$i]=$(downloads "$i"); done
}
spread() {
    local what=$1 n=$2 i d sum=0 line="" k
    shift 2
    # the log thread writes within 50 ms: bounded wait for the last lines
    for ((k = 0; k < 100; k++)); do
        sum=0
        for i in "$@"; do sum=$((sum + $(downloads "$i") - base[$i])); done
        ((sum >= n)) && break
        sleep 0.05
    done
    sum=0
    for i in "$@"; do
        d=$(($(downloads "$i") - base[$i]))
        sum=$((sum + d))
        line+=" node $i: $d"
    done
    info "$what:$line"
    LAST_SPREAD=$line
    assert_eq "$sum" "$n" "$what: whole downloads counted by the nodes"
}

# ---------------------------------------------------------------- 1. up

info "lab.sh up 3 (LAB_ID=$LAB_ID)"
lab_up 3
head -c "$SIZE" /dev/urandom >"$ROOT/f.bin"
WANT=$(sha256sum <"$ROOT/f.bin" | cut -d' ' -f1)
for i in 1 2 3; do
    assert_grep "$LAB_DIR/n$i/policy/ftp.xml" "data-ports=\"$((40000 + 100 * (i - 1)))-$((40099 + 100 * (i - 1)))\"" "node $i's data ports"
done

# ---------------------------------------------------------------- 2. FTP

snap 1 2 3
fetch 20
assert_eq "$OKS" 20 "passive (EPSV) downloads whole"
fetch 10 --disable-epsv
assert_eq "$OKS" 10 "passive (PASV) downloads whole"
spread "30 passive downloads" 30 1 2 3
used=$(grep -o 'node [0-9]: [1-9]' <<<"$LAST_SPREAD" | wc -l)
((used > 1)) || fail "30 passive downloads all on one node:$LAST_SPREAD"
snap 1 2 3
fetch 10 -P 198.18.1.2
assert_eq "$OKS" 10 "active (PORT) downloads whole"
spread "10 active downloads" 10 1 2 3
used=$(grep -o 'node [0-9]: [1-9]' <<<"$LAST_SPREAD" | wc -l)
((used > 1)) || fail "10 active downloads all on one node:$LAST_SPREAD"
# active on the server's side too: vsftpd connected to the nodes
n_port=$(grep -Ec 'FTP command: Client "198\.19\.2\.1[1-3]", "PORT 198,19,2,1[1-3],' "$LAB_DIR/server/logs/vsftpd.log" || true)
((n_port >= 10)) || fail "vsftpd saw $n_port PORT commands, expected at least 10 (server-data=keep)"

# strays: without the router's data port rules a passive data connection
# reaches any node; one that is not its owner forwards it (its mangle rule
# for the owner's range counts the packets), none is reset
lab router iptables -w -t mangle -S PREROUTING | grep 'data ports' >"$T/dp.rules" || true
assert_eq "$(wc -l <"$T/dp.rules")" 3 "the router's data port rules"
for k in 1 2 3; do
    n=$(lab router iptables -w -t mangle -L PREROUTING --line-numbers -n | awk '/data ports/ { print $1; exit }')
    lab router iptables -w -t mangle -D PREROUTING "$n"
done
stray_packets() { # [ip6tables]: packets the nodes' stray rules forwarded
    local i sum=0 c
    for i in 1 2 3; do
        c=$(lab node "$i" "${1:-iptables}" -w -t mangle -L PREROUTING -v -n -x | awk '/data ports of node/ { s += $1 } END { print s + 0 }')
        sum=$((sum + c))
    done
    echo "$sum"
}
strays0=$(stray_packets)
snap 1 2 3
fetch 10
assert_eq "$OKS" 10 "passive downloads whole with the nodes forwarding strays"
spread "10 passive downloads, strays forwarded by the nodes" 10 1 2 3
strays=$(($(stray_packets) - strays0))
info "packets the nodes forwarded to another node's data ports: $strays"
((strays > 0)) || fail "no node forwarded a stray packet in 10 passive downloads without the router's rules"
while read -r r; do eval "lab router iptables -w -t mangle $r"; done <"$T/dp.rules"
assert_eq "$(lab router iptables -w -t mangle -S PREROUTING | grep -c 'data ports')" 3 "the router's data port rules back"

# ---------------------------------------------------------------- 2b. IPv6

SERVER6=$(sed -n 's/^server6=//p' "$T/up.out")
assert_eq "$SERVER6" 2001:db8:0:80::80 "lab.sh up's server6="
assert_eq "$(lab router ip -6 route show "$SERVER6" | grep -c 'nexthop via 2001:db8:2:')" 3 \
    "next hops of the router's IPv6 route to the service address (one a node)"
# by_node CMD: BY="CMD 1 CMD 2 CMD 3", their sum BY_SUM; more than one node used
by_node() {
    local i c out="" used=0
    BY_SUM=0
    for i in 1 2 3; do
        c=$("$@" "$i")
        out+="$c "
        BY_SUM=$((BY_SUM + c))
        ((c == 0)) || used=$((used + 1))
    done
    ((used > 1)) || fail "$*: all on one node: $out"
    BY=${out% }
}
out6() { echo "2001:db8:3::1:$1"; } # node I's IPv6 address on the server segment
node_metric6() { # SERVICE I: responses 200 of node I's SERVICE
    node_metrics "$2" | awk -v s="service=\"$1\"" '/^proxyd_http_responses_total\{/ && index($0, s) && /code="200"/ { n += $NF } END { printf "%d\n", n }'
}
node_plug6() { grep -Ec "node=$LAB_ID-n$1 info #[0-9]+ session-end service=plug6 analyser=plug verdict=accept .* to-server=[1-9]" "$LAB_DIR/n$1/proxyd.log" || true; }
nginx6() { # PORT I: nginx's whole f.bin lines on PORT from node I (distinct source ports on 8081)
    awk -v a="$(out6 "$2")" -v p="$1" -v n="$SIZE" '$1 == a && $3 == p && $5 == "/f.bin" && $7 == 200 && $8 == n { print $2 }' \
        "$LAB_DIR/server/logs/access.log" | if [[ $1 == 8081 ]]; then sort -u | wc -l; else wc -l; fi
}
lab client ab -n 60 -c 4 -s 10 "http://[$SERVER6]/f.bin" >"$T/ab6.out" 2>&1 || fail "ab over IPv6: $(tail -n 3 "$T/ab6.out")"
assert_eq "$(awk '/^Complete requests:/ { print $3 }' "$T/ab6.out")" 60 "ab over IPv6: complete requests"
assert_eq "$(awk '/^Failed requests:/ { print $3 }' "$T/ab6.out")" 0 "ab over IPv6: failed requests"
assert_eq "$(awk '/^HTML transferred:/ { print $3 }' "$T/ab6.out")" "$((60 * SIZE))" "ab over IPv6: body bytes"
all_http6() { (($(node_metric6 http6 1) + $(node_metric6 http6 2) + $(node_metric6 http6 3) >= 60)); }
wait_cond 5000 all_http6 || true
by_node node_metric6 http6
n_http=$BY
assert_eq "$BY_SUM" 60 "IPv6 HTTP requests the nodes answered 200"
by_node nginx6 80
s_http=$BY
info "IPv6 HTTP, 60 requests: nodes $n_http, nginx from each node's address $s_http"
assert_eq "$s_http" "$n_http" "IPv6 HTTP requests per node: nginx vs the nodes"
for ((k = 0; k < 30; k++)); do
    lab client curl -sS --max-time 5 "http://[$SERVER6]:8081/f.bin" 2>>"$T/curl.err" | sha256sum | grep -q "^$WANT " ||
        fail "plug over IPv6: fetch $k not whole"
done
all_plug6() { (($(node_plug6 1) + $(node_plug6 2) + $(node_plug6 3) >= 30)); }
wait_cond 5000 all_plug6 || true
by_node node_plug6
n_plug=$BY
assert_eq "$BY_SUM" 30 "IPv6 plug sessions the nodes accepted"
by_node nginx6 8081
s_plug=$BY
info "IPv6 plug, 30 connections: nodes $n_plug, nginx from each node's address $s_plug"
assert_eq "$s_plug" "$n_plug" "IPv6 plug connections per node: nginx vs the nodes"
snap 1 2 3
FTP_HOST="[$SERVER6]" fetch 10
assert_eq "$OKS" 10 "IPv6 passive (EPSV) downloads whole"
FTP_HOST="[$SERVER6]" fetch 5 -P 2001:db8:1::2
assert_eq "$OKS" 5 "IPv6 active (EPRT) downloads whole"
spread "15 IPv6 downloads" 15 1 2 3
vs6() { grep -c "OK DOWNLOAD: Client \"$(out6 "$1")\", \"/f.bin\", $SIZE bytes" "$LAB_DIR/server/logs/vsftpd6.log" || true; }
node_dl() { echo $(($(downloads "$1") - base[$1])); }
by_node node_dl
n_ftp=$BY
by_node vs6
s_ftp=$BY
info "IPv6 FTP, 15 downloads: nodes $n_ftp, vsftpd from each node's address $s_ftp"
assert_eq "$s_ftp" "$n_ftp" "IPv6 FTP downloads per node: vsftpd vs the nodes"
n=$(grep -Ec 'FTP command: Client "2001:db8:3::1:[1-3]", "EPRT \|2\|2001:db8:3::1:[1-3]\|' "$LAB_DIR/server/logs/vsftpd6.log" || true)
assert_eq "$n" 5 "EPRT commands vsftpd got from the nodes (server-data=keep)"
# strays over IPv6: without the router's ip6tables data port rules, the
# node a passive data connection reaches forwards it to its owner
lab router ip6tables -w -t mangle -S PREROUTING | grep 'data ports' >"$T/dp6.rules" || true
assert_eq "$(wc -l <"$T/dp6.rules")" 3 "the router's IPv6 data port rules"
while read -r r; do eval "lab router ip6tables -w -t mangle ${r/-A /-D }"; done <"$T/dp6.rules"
s6=$(stray_packets ip6tables)
FTP_HOST="[$SERVER6]" fetch 10
assert_eq "$OKS" 10 "IPv6 passive downloads whole with the nodes forwarding strays"
n=$(($(stray_packets ip6tables) - s6))
info "IPv6 packets the nodes forwarded to another node's data ports: $n"
((n > 0)) || fail "no node forwarded a stray IPv6 packet in 10 passive downloads without the router's rules"
while read -r r; do eval "lab router ip6tables -w -t mangle $r"; done <"$T/dp6.rules"

# ---------------------------------------------------------------- 3. R66

mkdir -p "$T/cli" "$T/out"
head -c "$SIZE" /dev/urandom >"$T/cli/up.bin"
head -c "$SIZE" /dev/urandom >"$R66DIR/down.bin"
for k in 1 2 3 4; do r66_round "$k"; done
r66_count() { # the nodes' accepted r66 sessions; per node in r66_lines
    local i c
    r66_lines="" r66_sum=0
    for i in 1 2 3; do
        c=$(grep -Ec "node=$LAB_ID-n$i info #[0-9]+ session-end service=r66 analyser=r66 verdict=accept " "$LAB_DIR/n$i/proxyd.log" || true)
        r66_lines+=" node $i: $c"
        r66_sum=$((r66_sum + c))
    done
    ((r66_sum >= 8))
}
wait_cond 3000 r66_count || true
info "8 R66 transfers whole; r66 sessions:$r66_lines"
assert_eq "$r66_sum" 8 "r66 sessions accepted by the nodes"

# ---------------------------------------------------------------- 4. upgrade 1

cat >"$T/hold.py" <<'PYEOF'
import ftplib, hashlib, io, os, sys, time
addr, n, go, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
conns = []
for _ in range(n):
    f = ftplib.FTP()
    f.connect(addr, 21, timeout=5)
    f.login()
    conns.append(f)
print("ready", flush=True)
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.02)
ok = 0
for f in conns:
    try:
        b = io.BytesIO()
        f.retrbinary("RETR f.bin", b.write)
        if hashlib.sha256(b.getvalue()).hexdigest() == want:
            ok += 1
    except (OSError, EOFError, ftplib.Error):
        pass
print("ok=%d broken=%d" % (ok, n - ok), flush=True)
PYEOF
held() { grep -q '^ready' "$1"; }
got_result() { grep -q '^ok=' "$1"; }
live_sum() { lab status | awk '{ sub("sessions=", "", $3); s += $3 } END { print s + 0 }'; }
nexthops() { lab router ip route show "$SERVER" | grep -c 'nexthop via' || true; }
n1_out() { [[ $(nexthops) == 2 ]] && ! lab router ip route show "$SERVER" | grep -q 'via 198.18.2.2 '; }
n1_in() { lab router ip route show "$SERVER" | grep -q 'via 198.18.2.2 '; }

HOLD=10
lab client python3 "$T/hold.py" "$SERVER" "$HOLD" "$T/go-up" "$WANT" >"$T/hold-up.out" 2>"$T/hold-up.err" &
track_pid $!
wait_cond 10000 held "$T/hold-up.out" || fail "the $HOLD FTP sessions did not all log in: $(cat "$T/hold-up.err")"
all_live() { [[ $(live_sum) == "$1" ]]; }
wait_cond 5000 all_live "$HOLD" || fail "status: live sessions $(live_sum), expected $HOLD: $(lab status)"
n1_live=$(lab status | awk '$1 == "n1" { sub("sessions=", "", $3); print $3 }')
old_pid=$(cat "$LAB_DIR/n1/proxyd.pid")
t0=$(now_ms)
lab upgrade 1 20 drain >"$T/upgrade.out" 2>"$T/upgrade.err" &
UP_PID=$!
track_pid "$UP_PID"
wait_cond 5000 n1_out || fail "node 1 still in the route 5 s after lab.sh upgrade 1: $(lab router ip route show "$SERVER")"
info "lab.sh upgrade 1: withdrawn after $(($(now_ms) - t0)) ms, $n1_live held sessions on node 1"
snap 1 2 3
fetch 10
assert_eq "$OKS" 10 "passive downloads whole while node 1 drains"
spread "10 downloads while node 1 drains" 10 2 3
assert_eq "$(($(downloads 1) - base[1]))" 0 "new downloads on node 1 while it drains"
: >"$T/go-up"
wait_cond 30000 got_result "$T/hold-up.out" || fail "held FTP sessions (upgrade): no result: $(cat "$T/hold-up.err")"
assert_eq "$(tail -n 1 "$T/hold-up.out")" "ok=$HOLD broken=0" "held FTP sessions across the upgrade of node 1 (node 1 had $n1_live)"
wait_exit "$UP_PID" 40 || fail "lab.sh upgrade 1 still running"
assert_eq "$WAIT_RC" 0 "lab.sh upgrade 1's exit status: $(cat "$T/upgrade.err")"
new_pid=$(cat "$LAB_DIR/n1/proxyd.pid")
assert_eq "$(cat "$T/upgrade.out")" "n1 upgraded live_at_stop=0 pid=$new_pid" "lab.sh upgrade 1's result"
[[ $new_pid != "$old_pid" ]] || fail "node 1's proxyd was not restarted (pid $old_pid)"
proc_alive "$old_pid" && fail "node 1's old proxyd ($old_pid) still runs"
n1_in || fail "node 1 not back in the route after lab.sh upgrade 1"
info "lab.sh upgrade 1: done in $(($(now_ms) - t0)) ms, proxyd $old_pid -> $new_pid, no session broken"
lab status >"$T/status.out"
grep -Eq "^n1 active sessions=[0-9]+ accepted=[0-9]+ node=$LAB_ID-n1\$" "$T/status.out" ||
    fail "status after the upgrade: $(cat "$T/status.out")"
snap 1 2 3
fetch 20
assert_eq "$OKS" 20 "passive downloads whole after the upgrade"
spread "20 downloads after the upgrade of node 1" 20 1 2 3
(($(downloads 1) - base[1] > 0)) || fail "the upgraded node 1 served none of 20 new downloads:$LAST_SPREAD"

# ---------------------------------------------------------------- 4b. upgrade 1, hand-over
# 10 more FTP sessions held; `lab.sh upgrade 1 5` (the hand-over): node 1
# stays in the route, its new proxyd takes its held sessions over (logged
# in, between commands), which outlive the old one's drain deadline (its
# shutdown-grace, 1 s): each then downloads whole, node 1's included.
lab client python3 "$T/hold.py" "$SERVER" "$HOLD" "$T/go-ho" "$WANT" >"$T/hold-ho.out" 2>"$T/hold-ho.err" &
track_pid $!
wait_cond 10000 held "$T/hold-ho.out" || fail "the $HOLD FTP sessions did not all log in: $(cat "$T/hold-ho.err")"
wait_cond 5000 all_live "$HOLD" || fail "status: live sessions $(live_sum), expected $HOLD: $(lab status)"
n1_live=$(lab status | awk '$1 == "n1" { sub("sessions=", "", $3); print $3 }')
((n1_live > 0)) || fail "none of the $HOLD held FTP sessions is on node 1: $(lab status)"
old_pid=$(cat "$LAB_DIR/n1/proxyd.pid")
lab upgrade 1 5 >"$T/upgrade-ho.out" 2>"$T/upgrade-ho.err" ||
    fail "lab.sh upgrade 1 5: $(cat "$T/upgrade-ho.err")"
new_pid=$(cat "$LAB_DIR/n1/proxyd.pid")
[[ $new_pid != "$old_pid" ]] || fail "node 1's proxyd was not replaced (pid $old_pid)"
assert_eq "$(cat "$T/upgrade-ho.out")" "n1 upgraded pid=$new_pid handover sessions=$n1_live drained=0" \
    "lab.sh upgrade 1 (hand-over)'s result"
n1_in || fail "node 1 left the route during the hand-over"
# Past the old process's drain deadline (1 s): nothing of it is left.
wait_cond 5000 eval "! proc_alive $old_pid" || fail "node 1's old proxyd ($old_pid) still runs 5 s after the hand-over"
: >"$T/go-ho"
wait_cond 30000 got_result "$T/hold-ho.out" || fail "held FTP sessions (hand-over): no result: $(cat "$T/hold-ho.err")"
assert_eq "$(tail -n 1 "$T/hold-ho.out")" "ok=$HOLD broken=0" "held FTP sessions across the hand-over of node 1 (node 1 had $n1_live)"
info "lab.sh upgrade 1 5: $n1_live held FTP sessions passed to pid $new_pid, all downloaded whole after"

# ---------------------------------------------------------------- 5. kill 3

HOLD=15
lab client python3 "$T/hold.py" "$SERVER" "$HOLD" "$T/go" "$WANT" >"$T/hold.out" 2>"$T/hold.err" &
track_pid $!
wait_cond 10000 held "$T/hold.out" || fail "the $HOLD FTP sessions did not all log in: $(cat "$T/hold.err")"
wait_cond 5000 all_live "$HOLD" || fail "status: live sessions $(live_sum), expected $HOLD: $(lab status)"
lab status >"$T/status.out"
cat "$T/status.out"
n3_live=$(awk '$1 == "n3" { sub("sessions=", "", $3); print $3 }' "$T/status.out")
lab kill 3 2>>"$T/lab.err"
gone() { [[ $(lab router ip route show "$SERVER" | grep -c 'nexthop via') == 2 ]]; }
wait_cond 3000 gone || fail "node 3 still in the router's route 3 s after lab.sh kill 3"
: >"$T/go"
wait_cond 30000 got_result "$T/hold.out" || fail "held FTP sessions: no result: $(cat "$T/hold.err")"
info "held FTP sessions after kill 3: $(tail -n 1 "$T/hold.out") (node 3 had $n3_live)"
assert_eq "$(tail -n 1 "$T/hold.out")" "ok=$((HOLD - n3_live)) broken=$n3_live" \
    "held FTP sessions after kill 3: only node 3's lost"
snap 1 2
fetch 10
assert_eq "$OKS" 10 "passive downloads whole after kill 3"
fetch 5 -P 198.18.1.2
assert_eq "$OKS" 5 "active downloads whole after kill 3"
spread "15 downloads after kill 3" 15 1 2

# ---------------------------------------------------------------- 6. down

lab_down
info "PASS"
