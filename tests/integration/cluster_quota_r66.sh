#!/usr/bin/env bash
# R66 per-host quotas across a cluster (cluster/@store): two proxyd
# processes, nodes a and b, share one Redis store on loopback and the same
# r66 service in front of one r66peer server.
#  - quota-transfers=QUOTA for hosta: PARALLEL SENDs at once through each
#    node; the server stores exactly QUOTA files (never more than the
#    quota plus one transfer), each refused request gets ErrorPacket l and
#    its refusal is logged (by=cluster) on the node that refused it.
#  - quota-bytes=1m for hostz: 600 KiB through a (a's own count, on
#    /api/quotas, has what moved, not the lease as well), then through b: b cuts
#    its transfer at the cluster's limit (counting from the store's 600
#    KiB), and a's next transfer is cut at its first block (a counts
#    from what b added): the store's bytes never pass the quota.
#  - the store down: node a refuses the request (l, the store cannot be
#    reached), logged.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_cmds python3 redis-server redis-cli curl
need_r66peer
setup

PARALLEL=4
QUOTA=3
mkdir -p "$T/cli"
for ((i = 0; i < 2 * PARALLEL; i++)); do head -c 10K /dev/urandom >"$T/cli/f$i.bin"; done
head -c 600K /dev/urandom >"$T/cli/big.bin"
start_r66_server

start_store

for n in a b; do
    qnode_r66 "$n" "$R66_SRV_PORT" "<host id=\"hosta\" quota-transfers=\"$QUOTA\"/>
    <host id=\"hostz\" quota-bytes=\"1m\"/>"
done
nmetric() {
    # shellcheck disable=SC2034 # metric_value reads it
    local ADMIN_PORT=${ADMIN[$1]}
    metric_value "$2" "${3:-}"
}
stored() { grep -c '^ok received' "$T/r66server.log" || true; }

info "---- quota-transfers=$QUOTA: $PARALLEL SENDs at once through each node"
pids=()
for ((i = 0; i < 2 * PARALLEL; i++)); do
    n=a
    ((i % 2)) && n=b
    qsend_r66 "$n" hosta:pwA "$T/cli/f$i.bin" "$T/s$i" &
    pids+=($!)
done
wait "${pids[@]}"
ok=0 refused=0
for ((i = 0; i < 2 * PARALLEL; i++)); do
    case $(cat "$T/s$i.rc") in
    0) ok=$((ok + 1)) ;;
    2) grep -q 'error packet from server: code=l .*daily transfer quota used up' "$T/s$i.err" &&
        refused=$((refused + 1)) ;;
    esac
done
info "$ok stored, $refused refused (l)"
assert_eq "$((ok + refused))" "$((2 * PARALLEL))" "every SEND stored or refused with l"
((ok <= QUOTA + 1)) || fail "the cluster let $ok transfers through, quota $QUOTA (+1)"
assert_eq "$ok" "$QUOTA" "transfers the cluster let through"
for ((k = 0; k < 100; k++)); do (($(stored) >= QUOTA)) && break; sleep 0.05; done
assert_eq "$(stored)" "$QUOTA" "files the server stored"
logged=0
for n in a b; do
    for ((k = 0; k < 40; k++)); do
        r=$(grep -cE "node=$n .*r66-quota host=hosta kind=transfers used=$QUOTA limit=$QUOTA verdict=refused by=cluster rule=" "${LOG[$n]}" || true)
        [[ $r == "$(nmetric "$n" proxyd_quota_store_requests_total 'result="refused"')" ]] && break
        sleep 0.05
    done
    assert_eq "$r" "$(nmetric "$n" proxyd_quota_store_requests_total 'result="refused"')" "node $n: refusals logged and counted"
    logged=$((logged + r))
done
assert_eq "$logged" "$refused" "refusals logged over both nodes"

info "---- quota-bytes=1m: 600 KiB through a, then b (cut), then a (cut at once)"
bkey="proxyd:quota:$(($(date +%s) / 86400)):r66:hostz"
qsend_r66 a hostz:pwZ "$T/cli/big.bin" "$T/z1"
assert_eq "$(cat "$T/z1.rc")" 0 "the first 600 KiB through a"
for ((k = 0; k < 100; k++)); do [[ $(rcli HGET "$bkey" b) == 614400 ]] && break; sleep 0.05; done
assert_eq "$(rcli HGET "$bkey" b)" 614400 "the store's bytes after a's transfer"
# a's own count of the day (the admin's /api/quotas): what moved, not the
# first lease as well (before: 600 KiB + 64 KiB)
abytes() {
    curl -s --max-time 5 "http://127.0.0.1:${ADMIN[a]}/api/quotas" | python3 -c '
import json, sys
print([e["bytes"] for e in json.load(sys.stdin)["quotas"] if e["partner"] == "hostz"][0])'
}
for ((k = 0; k < 50; k++)); do [[ $(abytes) == 614400 ]] && break; sleep 0.05; done
assert_eq "$(abytes)" 614400 "node a's bytes of the day (/api/quotas) after its transfer"
qsend_r66 b hostz:pwZ "$T/cli/big.bin" "$T/z2"
assert_ne "$(cat "$T/z2.rc")" 0 "b's transfer past the cluster's byte quota"
assert_log_in "${LOG[b]}" "node=b .*r66-quota host=hostz kind=bytes used=[0-9]+ limit=1048576 block=[0-9]+ verdict=cut"
for ((k = 0; k < 100; k++)); do
    v=$(rcli HGET "$bkey" b)
    ((v > 614400)) && break
    sleep 0.05
done
((v <= 1048576)) || fail "the store counts $v bytes, past the quota"
# what a node sees of the cluster's bytes at a request: a's first block
# would cross the limit (a's own count was 600 KiB)
ends=$(grep -c 'session-end service=r66' "${LOG[a]}" || true)
qsend_r66 a hostz:pwZ "$T/cli/big.bin" "$T/z3"
assert_ne "$(cat "$T/z3.rc")" 0 "a's transfer once b brought the cluster's bytes near the limit"
assert_log_in "${LOG[a]}" "node=a .*r66-quota host=hostz kind=bytes used=$v limit=1048576 block=65536 verdict=cut"
# (a cut transfer adds what passed, here nothing, when its session ends)
for ((k = 0; k < 100; k++)); do
    (($(grep -c 'session-end service=r66' "${LOG[a]}" || true) > ends)) && break
    sleep 0.05
done
assert_eq "$(rcli HGET "$bkey" b)" "$v" "the store's bytes after a's cut (no block passed)"

info "---- the store down: node a refuses with l"
kill "$REDIS_PID"
wait_not_listening "$REDIS_PORT" 5 || fail "redis-server still listens"
qsend_r66 a hosta:pwA "$T/cli/f2.bin" "$T/down2"
assert_eq "$(cat "$T/down2.rc")" 2 "hosta with the store down"
grep -q 'code=l .*the quota store cannot be reached' "$T/down2.err" || fail "the refusal: $(cat "$T/down2.err")"
assert_log_in "${LOG[a]}" "node=a .*r66-quota host=hosta kind=store-error store=127.0.0.1:$REDIS_PORT verdict=refused"
# both exit cleanly, without a sanitizer report (ASan/UBSan build)
for n in a b; do
    kill -TERM "${PID[$n]}"
    wait_exit "${PID[$n]}" 15 || fail "node $n did not exit within 15 s of SIGTERM"
    assert_eq "$WAIT_RC" 0 "node $n's exit status after SIGTERM"
    assert_no_grep "${LOG[$n]}" "AddressSanitizer|LeakSanitizer|runtime error:" "sanitizer report from node $n"
done
info "ok"
