#!/usr/bin/env bash
# Operations on a loaded cluster lab (deploy/cluster/lab.sh), issue 37's
# operations test: what cluster_lab (plug/http spread, add, drain, kill
# with held plug connections) and cluster_ftp (FTP flows to their owner,
# R66, upgrade) assert one protocol at a time, here with every protocol at
# once and long transfers running through the operations.
#   1. `lab.sh up 3`; 600 connections of every kind: HTTP without
#      keep-alive (ab, 250) and with it (ab -k, 10 connections of 20
#      requests), plug (ab on 8081, 150), FTP passive and active (ftplib
#      60 + 50, curl EPSV 10 and PORT 10, lftp passive 5 and active 5),
#      R66 SENDs (r66peer, 50). All served (ab's counts, sha256, exit
#      statuses); counted at each node by its session-end lines and at the
#      other end by nginx's log (distinct node address:port pairs),
#      vsftpd's (CONNECT lines) and r66peer's: the two counts agree per node
#      and each node has 20-45 % of the 600.
#   2. Long transfers (two of each: a 1 GiB HTTP download with curl, a
#      500 MiB FTP RETR with lftp, a 500 MiB R66 SEND with r66peer: the
#      issue's sizes) run while `lab.sh add` brings
#      node 4 in, `lab.sh drain 2 60` withdraws node 2, and then while
#      `lab.sh upgrade 1 60` (a hand-over) replaces node 1's proxyd; 100 new
#      HTTP connections meanwhile: every one served, every long transfer
#      whole (sha256), the drain ends with no live session: 0 broken.
#      Each is limited to about LONG_S seconds (the operations, add, drain's
#      withdrawal and the start of the upgrade, take about 5 s; the upgrade
#      then waits for node 1's transfers), so the sizes cost CI little time:
#      the rate is limited at the client: curl --limit-rate, lftp's
#      net:limit-rate, and for the R66 SEND (r66peer has no rate option) an
#      HTB class on the client's link for port 6666. The transfers' nodes
#      are printed; the test checks they are still running when each
#      operation ends (it happened mid-way), and starts more HTTP downloads
#      (of the 500 MiB file, up to 8) until nodes 1 and 2 each carry one.
#      The files are random (urandom), made at test time with their sha256
#      computed as they are written (tee); downloads are hashed as they
#      arrive (a pipe into sha256sum), so only the sources and what r66peer
#      receives touch the disk (DISK_NEED, checked first: a clear failure,
#      never a skip); removed once checked.
#   3. 30 plug connections held open; `lab.sh kill 3`: new connections are
#      all served again within 3 s of the kill (measured: rounds of 10
#      connections with a 300 ms timeout until a whole round succeeds), and
#      of the held connections exactly node 3's are lost.
# The counts of each operation are printed (info lines "count:").
# Needs root, FRR (frr), nginx, vsftpd, curl, lftp, ab, python3, tc,
# bench/r66peer; about 50 s (2.5 GB of disk space).
set -euo pipefail
# shellcheck source=cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
SIZE=4096                 # the small file of step 1
BIG=$((1024 * 1024 * 1024)) # the HTTP download
HALF=$((500 * 1024 * 1024)) # the FTP RETR and the R66 SEND
LONG_S=20                   # seconds each long transfer lasts at its rate
RATE_BIG=$((BIG / LONG_S))  # bytes/s of each HTTP download
RATE=$((HALF / LONG_S))     # bytes/s of each FTP RETR, R66 SEND, extra download
# on $T's file system: big.bin, half.bin (the R66 sources are links to it)
# and the two SENDs at the server, and 512 MiB to spare
DISK_NEED=$((BIG + 3 * HALF + 512 * 1024 * 1024))
BOUND_NEW_MS=3000         # new sessions served again after a kill
cluster_setup o tc lftp ab

# ends I [SERVICES]: node I's session-end lines of sessions that sent the
# server something (ab closes a few connections unused at its end: those
# reach no server), every service or those of the regex SERVICES; 0 if no log
ends() {
    if [[ -f $LAB_DIR/n$1/proxyd.log ]]; then
        grep -Ec "^[0-9T:.-]+Z node=$LAB_ID-n$1 info #[0-9]+ session-end service=(${2:-[a-z0-9]+}) .* to-server=[1-9]" "$LAB_DIR/n$1/proxyd.log" || true
    else
        echo 0
    fi
}
r66_done() { grep -c '^ok received ' "$LAB_DIR/server/logs/r66peer.log" || true; }
# at the other end, from node I: plug connections (distinct address:port
# pairs in nginx's log on 8081), HTTP requests (nginx's lines on 80: the
# http service keeps its server connections alive, a pool: requests, not
# connections, are what both ends count), FTP control connections
# (vsftpd's CONNECT lines); r66peer's log does not say the peer: R66 is
# counted in total (r66_done)
srv_plug() { awk -v a="198.19.2.$((10 + $1))" '$1 == a && $3 == 8081 { print $2 }' "$LAB_DIR/server/logs/access.log" | sort -u | wc -l; }
srv_http() { awk -v a="198.19.2.$((10 + $1))" '$1 == a && $3 == 80 && $7 == 200' "$LAB_DIR/server/logs/access.log" | wc -l; }
srv_ftp() { grep -c "CONNECT: Client \"198.19.2.$((10 + $1))\"" "$LAB_DIR/server/logs/vsftpd.log" 2>/dev/null || true; }
# node_http I: responses 200 of node I's http service (its /metrics)
node_http() {
    lab node "$1" curl -s --max-time 3 http://127.0.0.1:9180/metrics |
        awk '/^proxyd_http_responses_total\{/ && /service="http"/ && /code="200"/ { s += $NF } END { printf "%d\n", s }'
}
# settled: every node's session-end count unchanged for 300 ms (a node's
# log thread writes a line up to 50 ms after the fact); bounded, 5 s
all_ends() { local i; for i in 1 2 3 4; do ends "$i"; done | tr '\n' ' '; }
settle() {
    local k prev now
    prev=$(all_ends)
    for ((k = 0; k < 17; k++)); do
        sleep 0.3
        now=$(all_ends)
        [[ $now == "$prev" ]] && return 0
        prev=$now
    done
}

# ab_ok N C PORT [OPTS...]: ab's N requests over C connections all 200 with the whole file
ab_ok() {
    local n=$1 c=$2 port=$3
    shift 3
    lab client ab "$@" -n "$n" -c "$c" -s 10 "http://$SERVER:$port/f.bin" >"$T/ab.out" 2>"$T/ab.err" ||
        fail "ab $* -n $n http://$SERVER:$port/f.bin failed: $(tail -n 3 "$T/ab.out" "$T/ab.err")"
    assert_eq "$(awk '/^Complete requests:/ { print $3 }' "$T/ab.out")" "$n" "ab $*: complete requests on $port"
    assert_eq "$(awk '/^Failed requests:/ { print $3 }' "$T/ab.out")" 0 "ab $*: failed requests on $port"
    assert_eq "$(awk '/^HTML transferred:/ { print $3 }' "$T/ab.out")" "$((n * SIZE))" "ab $*: body bytes on $port"
}

# ---------------------------------------------------------------- 1. up, spread

info "lab.sh up 3 (LAB_ID=$LAB_ID)"
lab_up 3
head -c "$SIZE" /dev/urandom >"$ROOT/f.bin"
WANT=$(sha256sum <"$ROOT/f.bin" | cut -d' ' -f1)
mkdir -p "$T/cli" "$T/out"
cp "$ROOT/f.bin" "$T/cli/s.bin"

settle
declare -A e0=() p0=() f0=() h0=() sp0=() sf0=() sh0=()
for i in 1 2 3; do
    e0[$i]=$(ends "$i") p0[$i]=$(ends "$i" plug) f0[$i]=$(ends "$i" ftp) h0[$i]=$(node_http "$i")
    sp0[$i]=$(srv_plug "$i") sf0[$i]=$(srv_ftp "$i") sh0[$i]=$(srv_http "$i")
done
r0=$(r66_done)
t0=$(now_ms)
ab_ok 250 8 80
ab_ok 200 10 80 -k
assert_eq "$(awk '/^Keep-Alive requests:/ { print $3 }' "$T/ab.out")" 200 "ab -k: keep-alive requests"
ab_ok 150 8 8081
# FTP from one python process (ftplib: passive and active), then curl and lftp
cat >"$T/ftp.py" <<'PYEOF'
import ftplib, hashlib, sys
addr, want, npasv, nport = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ok = 0
for k in range(npasv + nport):
    f = ftplib.FTP()
    f.connect(addr, 21, timeout=10)
    f.login()
    f.set_pasv(k < npasv)
    h = hashlib.sha256()
    f.retrbinary("RETR f.bin", h.update)
    f.quit()
    ok += h.hexdigest() == want
print(ok)
PYEOF
assert_eq "$(lab client python3 "$T/ftp.py" "$SERVER" "$WANT" 60 50 2>"$T/ftp.err")" 110 "ftplib: passive and active downloads whole"
ftp_ok=0
for k in $(seq 20); do
    opt=()
    ((k > 10)) && opt=(-P 198.18.1.2)
    got=$(lab client curl -sS --max-time 10 "${opt[@]}" "ftp://$SERVER/f.bin" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1) || true
    [[ $got == "$WANT" ]] && ftp_ok=$((ftp_ok + 1))
done
for k in $(seq 10); do
    pm=on
    ((k > 5)) && pm=off
    rm -f "$T/out/f.bin"
    lab client lftp -e "set ftp:passive-mode $pm; set net:max-retries 1; set net:timeout 10; get f.bin -o $T/out/f.bin; bye" \
        "ftp://$SERVER" >/dev/null 2>>"$T/lftp.err" || true
    [[ -f $T/out/f.bin && $(sha256sum <"$T/out/f.bin" | cut -d' ' -f1) == "$WANT" ]] && ftp_ok=$((ftp_ok + 1))
done
assert_eq "$ftp_ok" 30 "curl (EPSV, PORT) and lftp (passive, active) downloads whole"
r66_ok=0
for k in $(seq 50); do
    lab client "$R66PEER" client --connect "$SERVER:6666" --id hosta:pwA --partner serverb:pwB \
        --timeout 10 --rule in --mode 1 --send "$T/cli/s.bin" >>"$T/r66.log" 2>>"$T/r66.err" && r66_ok=$((r66_ok + 1))
done
assert_eq "$r66_ok" 50 "R66 SENDs done"
assert_eq "$(sha256sum <"$R66DIR/s.bin" | cut -d' ' -f1)" "$WANT" "R66 SEND: sha256 at the server"
info "600 connections (HTTP 250 + 10 keep-alive, plug 150, FTP 140, R66 50) in $(($(now_ms) - t0)) ms"
settle
sum=0
line=""
for i in 1 2 3; do
    n=$(($(ends "$i") - e0[$i]))
    p=$(($(ends "$i" plug) - p0[$i])) f=$(($(ends "$i" ftp) - f0[$i])) h=$(($(node_http "$i") - h0[$i]))
    line+=" node $i: $n ($((n * 100 / 600)) %; plug $p ftp $f http requests $h);"
    assert_eq "$(($(srv_plug "$i") - sp0[$i]))" "$p" "node $i: plug connections at nginx and at the node"
    assert_eq "$(($(srv_ftp "$i") - sf0[$i]))" "$f" "node $i: FTP control connections at vsftpd and at the node"
    assert_eq "$(($(srv_http "$i") - sh0[$i]))" "$h" "node $i: HTTP requests at nginx and at the node"
    ((n * 100 >= 20 * 600 && n * 100 <= 45 * 600)) || fail "node $i served $n of 600 connections, not 20-45 %"
    sum=$((sum + n))
done
info "count: spread of the 600 connections:$line"
assert_eq "$sum" 600 "connections served by the three nodes"
assert_eq "$(($(r66_done) - r0))" 50 "R66 SENDs received by r66peer"

# ---------------------------------------------------------------- 2. long transfers through add, drain, upgrade

avail=$(df -B1 --output=avail "$T" | tail -n 1)
((avail >= DISK_NEED)) ||
    fail "not enough disk space for the long transfers: $((avail >> 20)) MiB free on $(df --output=target "$T" | tail -n 1) ($T), $((DISK_NEED >> 20)) MiB needed"
t0=$(now_ms)
# random bytes, hashed as they are written (never read back whole)
mkfile() { head -c "$1" /dev/urandom | tee "$2" | sha256sum | cut -d' ' -f1; }
WANT_BIG=$(mkfile "$BIG" "$ROOT/big.bin")
WANT_HALF=$(mkfile "$HALF" "$ROOT/half.bin")
# the R66 sources: links to half.bin (the server stores each SEND apart)
for k in 1 2; do ln "$ROOT/half.bin" "$T/cli/big$k.bin"; done
info "long transfer files (1 GiB, 500 MiB) made in $(($(now_ms) - t0)) ms"
# hdl K FILE RATE: an HTTP download of FILE at RATE, hashed as it comes
# into $T/out/hK.sum (a failed curl fails the pipeline: pipefail)
hdl() {
    lab client curl -sS --max-time 120 --limit-rate "$3" "http://$SERVER/$2" 2>"$T/long-h$1.err" |
        sha256sum | cut -d' ' -f1 >"$T/out/h$1.sum"
}
# fdl K: an FTP RETR of half.bin at RATE (lftp's cat: to stdout), hashed
# as it comes into $T/out/fK.sum
fdl() {
    lab client lftp -e "set net:limit-rate $RATE; set net:timeout 30; set net:max-retries 1; cat half.bin; bye" \
        "ftp://$SERVER" 2>"$T/long-f$1.err" | sha256sum | cut -d' ' -f1 >"$T/out/f$1.sum"
}
# r66peer has no rate option: an HTB class on the client's link for what
# goes to port 6666, shared by the two SENDs (RATE each)
lab client tc qdisc add dev c0 root handle 1: htb default 0
lab client tc class add dev c0 parent 1: classid 1:10 htb rate "$((2 * RATE * 8))bit" ceil "$((2 * RATE * 8))bit" quantum 1514
lab client tc filter add dev c0 parent 1: protocol ip u32 match ip dport 6666 0xffff flowid 1:10
declare -A long=()
for k in 1 2; do
    hdl "$k" big.bin "$RATE_BIG" &
    long[h$k]=$!
    fdl "$k" &
    long[f$k]=$!
    lab client "$R66PEER" client --connect "$SERVER:6666" --id hosta:pwA --partner serverb:pwB \
        --timeout 120 --rule in --mode 1 --send "$T/cli/big$k.bin" >"$T/long-r$k.out" 2>"$T/long-r$k.err" &
    long[r$k]=$!
done
for k in "${!long[@]}"; do track_pid "${long[$k]}"; done
t_long=$(now_ms)
# running_all WHEN: every long transfer still running
running_all() {
    local k
    for k in "${!long[@]}"; do
        proc_alive "${long[$k]}" || fail "long transfer $k ended before $1 (after $(($(now_ms) - t_long)) ms): the transfers are too short"
    done
}
live_sum() { lab status | awk '{ sub("sessions=", "", $3); s += $3 } END { print s + 0 }'; }
six_live() { (($(live_sum) >= 6)); }
wait_cond 10000 six_live || fail "the 6 long transfers are not all live on the nodes: $(lab status)"
# the drain and the upgrade must each have a transfer under way on their
# node: the hash decides where they go, so more HTTP downloads (up to 8)
# until nodes 1 and 2 both carry one
node_live_of() { awk -v n="n$1" '$1 == n { sub("sessions=", "", $3); print $3 + 0 }' "$T/status.out"; }
extra=0
lab status >"$T/status.out"
while (($(node_live_of 1) == 0 || $(node_live_of 2) == 0)) && ((extra < 8)); do
    extra=$((extra + 1))
    k=$((2 + extra))
    hdl "$k" half.bin "$RATE" &
    long[h$k]=$!
    track_pid "${long[h$k]}"
    n_live() { (($(live_sum) >= 6 + extra)); }
    wait_cond 5000 n_live || fail "long download h$k not live: $(lab status)"
    lab status >"$T/status.out"
done
(($(node_live_of 1) > 0 && $(node_live_of 2) > 0)) || fail "no long transfer on node 1 or 2 after 8 more: $(cat "$T/status.out")"
info "long transfers started: $(tr '\n' ';' <"$T/status.out")"

t0=$(now_ms)
added=$(lab add 2>>"$T/lab.err") || fail "lab.sh add failed: $(tail -n 3 "$T/lab.err")"
assert_eq "$added" n4 "lab.sh add's new node"
info "count: lab.sh add: node 4 in the route after $(($(now_ms) - t0)) ms"
running_all "the add's end"

t0=$(now_ms)
lab drain 2 60 >"$T/drain.out" 2>"$T/drain.err" &
DRAIN_PID=$!
track_pid "$DRAIN_PID"
n2_out() { [[ " $(lab router ip route show 198.18.0.80 | grep -Eo 'via [0-9.]+' | tr '\n' ' ')" != *" via 198.18.2.6 "* ]]; }
wait_cond 10000 n2_out || fail "node 2 still in the route 10 s after lab.sh drain 2"
info "count: lab.sh drain 2: withdrawn after $WAITED_MS ms, $(lab status | awk '$1 == "n2" { print $3 }') live on node 2"
running_all "node 2's withdrawal"

# short sessions meanwhile: ab in the background through the upgrade
lab client ab -n 100 -c 4 -s 10 "http://$SERVER/f.bin" >"$T/ab-up.out" 2>"$T/ab-up.err" &
AB_PID=$!
track_pid "$AB_PID"
old1=$(cat "$LAB_DIR/n1/proxyd.pid")
running_all "node 1's upgrade"
t0=$(now_ms)
lab upgrade 1 60 >"$T/upgrade.out" 2>>"$T/lab.err" || fail "lab.sh upgrade 1 60: $(tail -n 3 "$T/lab.err")"
assert_ne "$(cat "$LAB_DIR/n1/proxyd.pid")" "$old1" "node 1's proxyd is a new process"
info "count: lab.sh upgrade 1 60: $(cat "$T/upgrade.out") in $(($(now_ms) - t0)) ms"
wait_exit "$AB_PID" 30 || fail "ab during the upgrade still running"
assert_eq "$WAIT_RC" 0 "ab during the operations: exit status"
assert_eq "$(awk '/^Complete requests:/ { print $3 }' "$T/ab-up.out")" 100 "ab during the operations: complete requests"
assert_eq "$(awk '/^Failed requests:/ { print $3 }' "$T/ab-up.out")" 0 "ab during the operations: failed requests"

for k in "${!long[@]}"; do
    wait_exit "${long[$k]}" 60 || fail "long transfer $k still running 60 s after the upgrade"
    assert_eq "$WAIT_RC" 0 "long transfer $k's exit status"
done
info "count: the $((6 + extra)) long transfers ended after $(($(now_ms) - t_long)) ms"
for ((k = 3; k <= 2 + extra; k++)); do
    assert_eq "$(cat "$T/out/h$k.sum")" "$WANT_HALF" "HTTP download $k (500 MiB): sha256"
done
for k in 1 2; do
    assert_eq "$(cat "$T/out/h$k.sum")" "$WANT_BIG" "HTTP download $k (1 GiB): sha256"
    assert_eq "$(cat "$T/out/f$k.sum")" "$WANT_HALF" "FTP RETR $k (500 MiB): sha256"
    assert_eq "$(sha256sum <"$R66DIR/big$k.bin" | cut -d' ' -f1)" "$WANT_HALF" "R66 SEND $k (500 MiB): sha256 at the server"
done
wait_exit "$DRAIN_PID" 70 || fail "lab.sh drain 2 still running"
assert_eq "$WAIT_RC" 0 "lab.sh drain 2's exit status"
assert_eq "$(cat "$T/drain.out")" "n2 drained live_at_stop=0" "lab.sh drain 2's result"
lab client tc qdisc del dev c0 root
# which node carried which (its session-end line with the whole size)
line=""
for i in 1 2 3 4; do
    h=$(grep -Ec "node=$LAB_ID-n$i info #[0-9]+ session-end service=http .* to-client=[0-9]{8}" "$LAB_DIR/n$i/proxyd.log" || true)
    f=$(grep -Ec "node=$LAB_ID-n$i info #[0-9]+ data-transfer download cmd=RETR file=\"half\\.bin\" bytes=$HALF .* end=ok\$" "$LAB_DIR/n$i/proxyd.log" || true)
    r=$(grep -Ec "node=$LAB_ID-n$i info #[0-9]+ session-end service=r66 .* to-server=[0-9]{8}" "$LAB_DIR/n$i/proxyd.log" || true)
    line+=" node $i: http $h ftp $f r66 $r;"
done
info "count: long transfers whole (sha256), 0 broken; where:$line"
rm -f "$ROOT/big.bin" "$ROOT/half.bin" "$T/cli/big1.bin" "$T/cli/big2.bin" "$R66DIR/big1.bin" "$R66DIR/big2.bin"

# ---------------------------------------------------------------- 3. kill 3

hold_start 30
all_live() { [[ $(live_sum) == "$HOLD" ]]; }
wait_cond 5000 all_live || fail "status: live sessions $(live_sum), expected $HOLD: $(lab status)"
lab status >"$T/status.out"
n3_live=$(awk '$1 == "n3" { sub("sessions=", "", $3); print $3 }' "$T/status.out")
((n3_live > 0)) || fail "none of the $HOLD held connections is on node 3: $(cat "$T/status.out")"
t_kill=$(now_ms)
lab kill 3 2>>"$T/lab.err"
read -r new_ms rounds < <(lab client python3 "$(dirname "$0")/cluster_probe.py" "$SERVER" "$t_kill") || true
[[ $new_ms =~ ^[0-9]+$ ]] || fail "no round of 10 new connections all served within 10 s of lab.sh kill 3 ($rounds rounds)"
info "count: lab.sh kill 3: 10 new connections all served $new_ms ms after the kill (round $rounds; bound $BOUND_NEW_MS)"
((new_ms <= BOUND_NEW_MS)) || fail "new sessions served again $new_ms ms after the kill, bound $BOUND_NEW_MS"
: >"$T/go"
got_result() { grep -q '^ok=' "$T/hold.out"; }
wait_cond 10000 got_result || fail "held connections: no result: $(cat "$T/hold.err")"
assert_eq "$(tail -n 1 "$T/hold.out")" "ok=$((HOLD - n3_live)) broken=$n3_live" "held sessions after kill 3: only node 3's lost"
info "count: lab.sh kill 3: $n3_live of $HOLD held sessions lost (node 3's), $((HOLD - n3_live)) went on"
info "PASS"
