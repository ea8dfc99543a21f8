#!/usr/bin/env bash
# Per-partner quotas across a cluster (cluster/@store): two proxyd
# processes, nodes a and b, share one Redis store on loopback and the same
# ftp services in front of one vsftpd.
#  - quota-transfers: PARALLEL downloads at once through each node; the
#    cluster lets exactly QUOTA of them run (never more than the quota plus
#    one transfer), each refused one gets its 550 and the refusal is logged
#    (by=cluster) on the node that refused it, and counted there.
#  - quota-bytes: bytes moved through one node count on the other: a
#    transfer through a once both nodes' downloads used the bytes is refused.
#  - a slow store (stopped) stalls only the transfer that asks it: another
#    session on the same single worker is served meanwhile, and the
#    transfer is refused with a 451 after store-timeout (logged, counted).
#  - a session that ends while its question is under way: the transfer
#    the store then counts for it is given back.
#  - the store down: node a (on-store-error refuse, the default) refuses
#    with a 451, node b (local) falls back to its own count; both log it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli promtool
setup

PARALLEL=8
QUOTA=5
start_vsftpd
P=$FTP_ROOT/pub
head -c 64K /dev/urandom >"$P/small.bin"
head -c 512K /dev/urandom >"$P/half.bin"
chmod 644 "$P"/*.bin

# the store: a Redis of its own, nothing on disk
start_store

declare -A BYTES OTHER
# node NAME ON_STORE_ERROR WORKERS: its daemon file, two ftp services of
# the same names on either node (the store counts per service and user)
node() {
    local n=$1 svc port rule
    qnode_conf "$n" "$2" "$3"
    free_port "FTP[$n]"
    free_port "BYTES[$n]"
    free_port "OTHER[$n]"
    for svc in ftp bytes other; do
        case $svc in
        ftp)
            port=${FTP[$n]}
            rule="<user name=\"anonymous\" quota-transfers=\"$QUOTA\" action=\"accept\"/>" ;;
        bytes)
            port=${BYTES[$n]}
            rule='<user name="anonymous" quota-bytes="1m" action="accept"/>' ;;
        other)
            port=${OTHER[$n]}
            rule='<user name="anonymous" quota-transfers="2" action="accept"/>' ;;
        esac
        qnode_ftp "$n" "$svc" "$port" "$rule"
    done
    qnode_start "$n" "${FTP[$n]}" "${BYTES[$n]}" "${OTHER[$n]}"
}
node a refuse 1
node b local 2
# nmetric NODE NAME LABELS: a metric of that node
nmetric() {
    # shellcheck disable=SC2034 # metric_value reads it
    local ADMIN_PORT=${ADMIN[$1]}
    metric_value "$2" "${3:-}"
}

# get PORT FILE N: N downloads of pub/FILE at once (each its own session,
# all RETRs sent together); prints the replies' codes, one per line
get() {
    timeout 60 python3 "$(dirname "$0")/ftp_parallel.py" 127.0.0.1 "$1" "pub/$2" "$3" | cut -d" " -f2
}

info "---- quota-transfers=$QUOTA: $PARALLEL downloads at once through each node"
get "${FTP[a]}" small.bin "$PARALLEL" >"$T/codes.a" &
GA=$!
get "${FTP[b]}" small.bin "$PARALLEL" >"$T/codes.b"
wait "$GA"
declare -A ok no
for n in a b; do
    ok[$n]=$(grep -c '^226$' "$T/codes.$n" || true)
    no[$n]=$(grep -c '^550$' "$T/codes.$n" || true)
    info "node $n: $(sort "$T/codes.$n" | uniq -c | tr '\n' ' ')"
    assert_eq "$((ok[$n] + no[$n]))" "$PARALLEL" "node $n: every download served or refused with 550"
done
total=$((ok[a] + ok[b]))
((total <= QUOTA + 1)) || fail "the cluster ran $total transfers, quota $QUOTA (+1)"
assert_eq "$total" "$QUOTA" "transfers the cluster ran"
assert_eq "$(rcli HGET "proxyd:quota:$(($(date +%s) / 86400)):ftp:anonymous" t)" "$QUOTA" \
    "the store's count of the day"
for n in a b; do
    assert_log_in "${LOG[$n]}" "node=$n .*session-end service=ftp"
    refused=$(grep -cE "node=$n .*ftp-quota user=anonymous kind=transfers used=$QUOTA limit=$QUOTA cmd=RETR verdict=refused by=cluster rule=" "${LOG[$n]}" || true)
    assert_eq "$refused" "${no[$n]}" "node $n: refusals logged on the node that refused"
    assert_eq "$(nmetric "$n" proxyd_quota_store_requests_total 'result="refused"')" \
        "${no[$n]}" "node $n: refusals counted"
    assert_eq "$(nmetric "$n" proxyd_quota_store_requests_total 'result="ok"')" "${ok[$n]}" \
        "node $n: transfers the store counted"
    assert_eq "$(nmetric "$n" proxyd_quota_refusals_total 'service="ftp",kind="transfers"')" \
        "${no[$n]}" "node $n: proxyd_quota_refusals_total"
done

# the store's series pass Prometheus' own check
ADMIN_PORT=${ADMIN[a]} metrics_fetch >"$T/scrape.txt"
promtool check metrics <"$T/scrape.txt" >"$T/promtool.out" 2>&1 ||
    { cat "$T/promtool.out" >&2; fail "promtool check metrics failed"; }

info "---- quota-bytes=1m: 512 KiB through a, then b, then a again"
bkey="proxyd:quota:$(($(date +%s) / 86400)):bytes:anonymous"
# store_bytes N: wait until the store counts N bytes (added at a transfer's end)
store_bytes() {
    local i
    for ((i = 0; i < 100; i++)); do
        [[ $(rcli HGET "$bkey" b) == "$1" ]] && return 0
        sleep 0.05
    done
    fail "the store counts $(rcli HGET "$bkey" b) bytes, not $1"
}
assert_eq "$(get "${BYTES[a]}" half.bin 1)" 226 "the first 512 KiB through a"
store_bytes 524288
assert_eq "$(get "${BYTES[b]}" half.bin 1)" 226 "the next 512 KiB through b"
store_bytes 1048576
assert_eq "$(get "${BYTES[a]}" half.bin 1)" 550 "a once the cluster used the bytes"
assert_log_in "${LOG[a]}" "node=a .*ftp-quota user=anonymous kind=bytes used=1048576 limit=1048576 cmd=RETR verdict=refused by=cluster"

info "---- a slow store: only the transfer that asks waits (node a, 1 worker)"
kill -STOP "$REDIS_PID"
pasv=$(grep -cE 'cmd=(EPSV|PASV) .*verdict=accept' "${LOG[a]}" || true)
t0=$(now_ms)
get "${FTP[a]}" small.bin 1 >"$T/codes.slow" &
GS=$!
# its data connection asked for: the RETR follows at once, and waits
for ((i = 0; i < 100; i++)); do
    (($(grep -cE 'cmd=(EPSV|PASV) .*verdict=accept' "${LOG[a]}" || true) > pasv)) && break
    sleep 0.05
done
sleep 0.1 # (the RETR on its way: a bound, not a wait for it)
# meanwhile another session of the same worker logs in and lists
t1=$(now_ms)
curl -s --max-time 5 "ftp://127.0.0.1:${FTP[a]}/pub/" -o "$T/list.slow" ||
    fail "node a did not serve a listing while the store was slow"
t2=$(now_ms)
wait "$GS"
kill -CONT "$REDIS_PID"
info "listing in $((t2 - t1)) ms, the transfer's answer after $(($(now_ms) - t0)) ms"
grep -q small.bin "$T/list.slow" || fail "the listing has no small.bin"
((t2 - t1 < 900)) || fail "the listing took $((t2 - t1)) ms while the store was slow"
assert_eq "$(cat "$T/codes.slow")" 451 "the transfer that waited for the store"
assert_log_in "${LOG[a]}" "node=a .*ftp-quota user=anonymous kind=store-error cmd=RETR store=127.0.0.1:$REDIS_PORT verdict=refused \(the store did not answer in time\)"
assert_eq "$(nmetric a proxyd_quota_store_requests_total 'result="timeout"')" 1 "node a: timeouts counted"

# a command that waited for the store counts once, as it is logged once
for n in a b; do
    assert_eq "$(nmetric "$n" proxyd_analyser_events_total 'analyser="ftp",event="commands"')" \
        "$(grep -c "node=$n .*ftp-command " "${LOG[$n]}")" "node $n: commands counted"
done

info "---- a session gone while the store was slow: what the store counted is refunded"
okey="proxyd:quota:$(($(date +%s) / 86400)):other:anonymous"
ends=$(grep -c 'session-end service=other' "${LOG[a]}" || true)
kill -STOP "$REDIS_PID"
timeout 20 /usr/bin/python3 - "${OTHER[a]}" <<'PY' || fail "the client of the abandoned transfer failed"
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=10)
f.login("anonymous", "x@y")
f.voidcmd("TYPE I")
f.sendcmd("PASV")
f.putcmd("RETR pub/small.bin")
f.sock.close()
PY
for ((i = 0; i < 100; i++)); do
    (($(grep -c 'session-end service=other' "${LOG[a]}" || true) > ends)) && break
    sleep 0.05
done
((i < 100)) || fail "node a did not end the abandoned session"
kill -CONT "$REDIS_PID"
for ((i = 0; i < 100; i++)); do
    [[ $(rcli HGET "$okey" t) == 0 ]] && break
    sleep 0.05
done
assert_eq "$(rcli HGET "$okey" t)" 0 "the store's count once the abandoned transfer was refunded"

info "---- the store down: a refuses (451), b counts alone (quota-transfers=2)"
kill "$REDIS_PID"
wait_not_listening "$REDIS_PORT" 5 || fail "redis-server still listens"
assert_eq "$(get "${OTHER[a]}" small.bin 1)" 451 "node a with the store down"
assert_log_in "${LOG[a]}" "node=a .*ftp-quota user=anonymous kind=store-error cmd=RETR store=127.0.0.1:$REDIS_PORT verdict=refused \((no connection to the store|cannot connect to the store)\)"
for i in 1 2; do
    assert_eq "$(get "${OTHER[b]}" small.bin 1)" 226 "node b (on-store-error=local) with the store down, transfer $i"
done
assert_eq "$(get "${OTHER[b]}" small.bin 1)" 550 "node b's own count past its quota"
assert_log_in "${LOG[b]}" "node=b .*ftp-quota user=anonymous kind=store-error cmd=RETR store=127.0.0.1:$REDIS_PORT verdict=local"
errs=$(nmetric a proxyd_quota_store_requests_total 'result="error"')
((errs >= 1)) || fail "node a counted no store error"
{ proc_alive "${PID[a]}" && proc_alive "${PID[b]}"; } || fail "a node died"
info "ok"
