#!/usr/bin/env bash
# A transfer that ends within a second of a failed connect to the
# cluster's quota store (the node's pause before it connects again,
# PX_QSTORE_RETRY_MS), the store back by then, still adds its bytes to the
# store's count: node a (one worker, on-store-error="local"); the store is
# stopped; a RETR of FILE starts (its connect to the store fails: this
# node's count decides), its client holds the data while the store is
# restarted (empty), then reads it: the RETR ends well within the second
# and the store's bytes of the day come to FILE. Before, the end, inside
# the pause, sent nothing and kept nothing: the store never had the bytes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli
setup

QUOTA=$((64 * 1024 * 1024))
FILE=$((1536 * 1024))
start_vsftpd
head -c "$FILE" /dev/urandom >"$FTP_ROOT/pub/f.bin"
chmod 644 "$FTP_ROOT/pub/f.bin"
start_store
qnode a local 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"

stop_store
t0=$(now_ms)
qretr_held a sh -c "touch '$T/held'; while [ ! -e '$T/go' ]; do sleep 0.01; done" >"$T/retr.out" &
cpid=$!
for ((k = 0; k < 200; k++)); do
    [[ -e $T/held ]] && break
    sleep 0.05
done
[[ -e $T/held ]] || fail "the RETR's 150 did not come"
start_store again
touch "$T/go"
wait "$cpid" || fail "the RETR's client failed"
t1=$(now_ms)
assert_eq "$(cat "$T/retr.out")" "$FILE 226" "the RETR"
info "the RETR ended $((t1 - t0)) ms after it asked the store (the pause: 1000 ms)"
assert_log_in "${LOG[a]}" 'ftp-quota user=anonymous kind=store-error cmd=RETR .*verdict=local'
key="proxyd:quota:$(($(date +%s) / 86400)):ftp:anonymous"
b=$(store_bytes "$key" "$FILE")
info "the store's bytes of the day: '$b' (the RETR moved $FILE)"
assert_eq "$b" "$FILE" "the store's bytes of a RETR that ended within the pause"
info "PASS"
