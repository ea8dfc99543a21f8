#!/usr/bin/env bash
# An R66 transfer that started while the cluster's quota store could not
# answer (on-store-error="local": this node's own count decides) adds what
# it moved to the store's count at its end, the store back by then, as an
# FTP transfer does: node a (quota-bytes=QUOTA for hostz) in front of one
# r66peer server through a relay that paces the transfer (some 3 s); the
# store is stopped, a SEND of FILE starts through a (logged store-error
# verdict=local), the store comes back (empty) on its port while the SEND
# still runs; when it ends the store's bytes of the day for hostz are
# FILE. Before, a transfer left to the node's count never told the store:
# the store had nothing, and the cluster's other nodes would let the host
# move QUOTA more that day. Then the store is stopped again and a second
# SEND runs to its end with the store down: the node keeps its bytes and
# adds them when the store is back (restarted empty): FILE again. Before,
# those bytes were lost (the store had no key).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_cmds python3 redis-server redis-cli
need_r66peer
setup

QUOTA=$((4 * 1024 * 1024))
FILE=$((1024 * 1024))
mkdir -p "$T/cli"
head -c "$FILE" /dev/urandom >"$T/cli/big.bin"
start_r66_server
free_port RELAY_PORT
python3 "$(dirname "$0")/slow_relay.py" "$RELAY_PORT" "$R66_SRV_PORT" 16384 0.05 >"$T/relay.log" 2>&1 &
track_pid $!
wait_listen "$RELAY_PORT" 10 $! || fail "the relay does not listen"
start_store
qnode_r66 a "$RELAY_PORT" "<host id=\"hostz\" quota-bytes=\"$QUOTA\"/>" local

stop_store
qsend_r66 a hostz:pwZ "$T/cli/big.bin" "$T/send" &
spid=$!
assert_log_in "${LOG[a]}" 'r66-quota host=hostz kind=store-error .*verdict=local'
start_store again
kill -0 "$spid" 2>/dev/null && [[ ! -s $T/send.rc ]] ||
    fail "the SEND ended before the store came back: the relay is too fast"
wait "$spid"
assert_eq "$(cat "$T/send.rc")" 0 "the SEND's exit status ($(tail -2 "$T/send.err"))"
assert_log_in "${LOG[a]}" "r66-transfer host=hostz .* size=$FILE "
key="proxyd:quota:$(($(date +%s) / 86400)):r66:hostz"
b=$(store_bytes "$key" "$FILE")
info "the store's bytes of the day for hostz: '$b' (the SEND moved $FILE)"
assert_eq "$b" "$FILE" "the store's bytes after a transfer left to the node's count"

stop_store
qsend_r66 a hostz:pwZ "$T/cli/big.bin" "$T/send2"
assert_eq "$(cat "$T/send2.rc")" 0 "the second SEND's exit status ($(tail -2 "$T/send2.err"))"
start_store again
b=$(store_bytes "$key" "$FILE")
info "the store's bytes of the day after its restart: '$b' (the second SEND moved $FILE with the store down)"
assert_eq "$b" "$FILE" "the store's bytes of a SEND that ended with the store down"
assert_log_in "${LOG[a]}" "quota-store pending key=$key bytes=$FILE verdict=kept"
info "PASS"
