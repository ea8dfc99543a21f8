#!/usr/bin/env bash
# Bytes a transfer moved outside the cluster's quota store's leases (it
# started while the store could not answer, on-store-error="local")
# reach the store even when it still cannot answer at the transfer's end:
# the node keeps them and adds them once the store is back, to the key of
# the day they were moved in. Node a (one worker); the store is stopped;
# a RETR of FILE is held by its client past the node's one-second pause
# between connects (so that its end tries the store again, in vain), then
# ends; the quotas' clock (PROXYD_QUOTA_CLOCK) passes midnight; a second
# RETR ends within the pause, the store still down; the store comes back,
# empty: its first day's key gets FILE bytes, the next day's FILE, the
# log says the bytes were kept, then delivered, and the metrics count
# 2 FILE delivered, none left waiting. Before, both transfers' bytes were
# lost: the store never had either key, and the other nodes would let the
# partner move those bytes again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli curl
setup

# Some day at noon UTC.
DAY0=$((1796083200 + 43200))
D0=$((DAY0 / 86400))
echo "$DAY0" >"$T/clock"
export PROXYD_QUOTA_CLOCK=$T/clock

QUOTA=$((64 * 1024 * 1024))
FILE=$((1536 * 1024))
start_vsftpd
head -c "$FILE" /dev/urandom >"$FTP_ROOT/pub/f.bin"
chmod 644 "$FTP_ROOT/pub/f.bin"
start_store
qnode a local 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"
ADMIN_PORT=${ADMIN[a]}

kill "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
# (Held 1.2 s: past PX_QSTORE_RETRY_MS, the end connects again.)
assert_eq "$(qretr_held a sleep 1.2)" "$FILE 226" "the first RETR, the store down"
assert_log_in "${LOG[a]}" 'ftp-quota user=anonymous kind=store-error cmd=RETR .*verdict=local'
echo $((DAY0 + 86400)) >"$T/clock"
assert_eq "$(qretr_held a true)" "$FILE 226" "the second RETR, the next day, the store down"
assert_log_in "${LOG[a]}" 'data-transfer download cmd=RETR file="pub/f.bin" bytes=.*'
is_listening "$REDIS_PORT" && fail "the store listens again before its restart"
start_store again

key0="proxyd:quota:$D0:ftp:anonymous"
key1="proxyd:quota:$((D0 + 1)):ftp:anonymous"
for ((k = 0; k < 100; k++)); do
    b0=$(rcli HGET "$key0" b)
    b1=$(rcli HGET "$key1" b)
    [[ $b0 == "$FILE" && $b1 == "$FILE" ]] && break
    sleep 0.1
done
info "the store's bytes: first day '$b0', next day '$b1' (each RETR moved $FILE)"
assert_eq "$b0" "$FILE" "the first day's bytes in the store, moved while it was down"
assert_eq "$b1" "$FILE" "the next day's bytes in the store, moved while it was down"
ttl=$(rcli TTL "$key0")
((ttl > 0)) || fail "the first day's key has no expiry (TTL $ttl)"
assert_log_in "${LOG[a]}" "quota-store pending key=$key0 bytes=$FILE verdict=kept"
assert_log_in "${LOG[a]}" "quota-store pending bytes=$((2 * FILE)) verdict=delivered"
assert_metric eq proxyd_quota_store_pending_bytes_total 'event="delivered"' $((2 * FILE))
assert_metric eq proxyd_quota_store_pending_bytes_total 'event="dropped"' 0
assert_metric eq proxyd_quota_store_pending_bytes "" 0
info "PASS"
