#!/usr/bin/env bash
# An R66 byte quota across a cluster (cluster/@store) holds while the
# host's transfers run on several nodes at once: two proxyd processes,
# nodes a and b, share one Redis store and an r66 service with
# quota-bytes=QUOTA for hostz in front of one r66peer server, reached
# through a relay that paces each connection (32 KiB every 15 ms each
# way: the transfers overlap). PER_NODE SENDs of a FILE-sized file start
# together through each node (hostz), then PER_NODE RECVs (hostb: the
# blocks come from the server). The store charges the bytes
# before they move, in leases, and grants only what the day has left: a
# block the transfer's lease does not cover waits for the next, and one
# the store has no bytes for ends the transfer unforwarded, so the bytes
# the nodes forwarded together (size= of their r66-transfer lines) never
# pass QUOTA. Some transfers are cut (verdict=cut on their node) or
# refused at their request (d) once the day's bytes are all charged; the
# store's count ends with what moved (leases not used given back), never
# above QUOTA. Before leases, each node cut its transfers at the quota as
# it counted it, and bytes reached the store only at a transfer's end:
# together about twice QUOTA.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_cmds python3 redis-server redis-cli
need_r66peer
setup

QUOTA=$((2 * 1024 * 1024))
FILE=$((1024 * 1024))
PER_NODE=4
N=$((2 * PER_NODE))
mkdir -p "$T/cli"
head -c "$FILE" /dev/urandom >"$T/cli/big.bin"
start_r66_server
cp "$T/cli/big.bin" "$R66_SRV_DIR/big.bin"
free_port RELAY_PORT
python3 "$(dirname "$0")/slow_relay.py" "$RELAY_PORT" "$R66_SRV_PORT" 32768 0.015 >"$T/relay.log" 2>&1 &
track_pid $!
wait_listen "$RELAY_PORT" 10 $! || fail "the relay does not listen"
start_store
for n in a b; do
    qnode_r66 "$n" "$RELAY_PORT" "<host id=\"hostz\" quota-bytes=\"$QUOTA\"/>
    <host id=\"hostb\" quota-bytes=\"$QUOTA\"/>"
done

# round HOST:PW WAY: N transfers at once of big.bin, half through each
# node (WAY send: SENDs, recv: RECVs), then the checks
round() {
    local id=$1 way=$2 host=${1%%:*} pids=() i n whole=0 total cuts b key
    info "---- $way: $N at once under quota-bytes=$QUOTA for $host"
    for ((i = 0; i < N; i++)); do
        n=a
        ((i % 2)) && n=b
        if [[ $way == send ]]; then
            qsend_r66 "$n" "$id" "$T/cli/big.bin" "$T/$way$i" &
        else
            mkdir -p "$T/out$i"
            qr66 "$n" "$id" "$T/$way$i" --rule out --mode 2 --recv big.bin --dir "$T/out$i" &
        fi
        pids+=($!)
    done
    wait "${pids[@]}"
    for ((i = 0; i < N; i++)); do [[ $(cat "$T/$way$i.rc") == 0 ]] && whole=$((whole + 1)); done
    # what the nodes forwarded: their r66-transfer lines, one per request
    # (a log thread writes them)
    xfers() { cat "${LOG[a]}" "${LOG[b]}" | grep -c "r66-transfer host=$host " || true; }
    for ((k = 0; k < 100; k++)); do (($(xfers) >= N)) && break; sleep 0.05; done
    assert_eq "$(xfers)" "$N" "transfers the nodes logged"
    total=$(cat "${LOG[a]}" "${LOG[b]}" | sed -nE "s/.* r66-transfer host=$host .* size=([0-9]+) .*/\1/p" |
        awk '{ s += $1 } END { print s + 0 }')
    cuts=$(cat "${LOG[a]}" "${LOG[b]}" | grep -c "r66-quota host=$host kind=bytes .* verdict=cut" || true)
    info "the nodes forwarded $total bytes in all (quota $QUOTA): $whole whole, $cuts cut"
    ((total <= QUOTA)) || fail "$way: the cluster forwarded $total bytes, past quota-bytes=$QUOTA by $((total - QUOTA))"
    ((whole <= QUOTA / FILE)) || fail "$way: $whole whole transfers of $FILE bytes under a quota of $QUOTA"
    # the quota was used, not refused early: leases not used came back
    ((total >= QUOTA - 65536 * N)) || fail "$way: only $total bytes forwarded of a $QUOTA quota: leases not given back?"
    ((cuts >= 1)) || fail "$way: no transfer was cut at the quota"
    key="proxyd:quota:$(($(date +%s) / 86400)):r66:$host"
    for ((k = 0; k < 50; k++)); do
        b=$(rcli HGET "$key" b)
        ((b == total)) && break
        sleep 0.1
    done
    info "the store's bytes of the day: $b"
    ((b <= QUOTA)) || fail "$way: the store counts $b bytes, past the quota $QUOTA"
    assert_eq "$b" "$total" "$way: the store's bytes against what the nodes forwarded"
}
round hostz:pwZ send
round hostb:pwb recv
info "PASS"
