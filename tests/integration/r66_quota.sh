#!/usr/bin/env bash
# Per-host daily quotas (<host quota-transfers= quota-bytes=>) between two
# r66peers, with the quotas' clock in a file (PROXYD_QUOTA_CLOCK):
#   - quota-transfers="3": the 4th request gets ErrorPacket l before any
#     data (the server stores 3 files), another host is not affected;
#   - quota-bytes="20k": two 10 KiB files pass, the third request gets
#     ErrorPacket d;
#   - quota-bytes="300k": a 400 KiB file in 64 KiB blocks stops at the
#     block that would cross it (d, the connection ends): the day's count
#     is the 4 blocks that passed, exactly;
#     a RECV (the server's blocks) counts the same way;
#   - SIGHUP with the limit raised to 4 keeps the count: one more, not four;
#   - the next UTC day starts afresh;
# with the r66-quota log lines, denied_quota and the quota metrics.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl
need_r66peer
setup

mkdir -p "$T/cli"
head -c 10K /dev/urandom >"$T/cli/ok.bin"
head -c 400K /dev/urandom >"$T/cli/large.bin"

# Some day at 10:00 UTC.
DAY0=1796119200
echo "$DAY0" >"$T/clock"
export PROXYD_QUOTA_CLOCK=$T/clock

start_r66_server
free_port R66_PORT
service() { # HOSTA_TRANSFERS
    write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
        "<r66 max-block=\"64k\">
           <host id=\"hosta\" quota-transfers=\"$1\"/>
           <host id=\"hostb\" quota-bytes=\"20k\"/>
           <host id=\"hostz\" quota-bytes=\"300k\" quota-transfers=\"100\"/>
         </r66>"
}
write_proxyd_conf
service 3
start_proxyd

stored() { grep -c '^ok received' "$T/r66server.log" || true; }
# wait_stored N: the server's log line for its Nth file may come after the
# client's exit
wait_stored() {
    local deadline=$(($(date +%s) + ASYNC_WAIT))
    until (($(stored) >= $1)); do
        (($(date +%s) < deadline)) || fail "the server stored $(stored) files, expected $1"
        sleep 0.05
    done
}

# send HOST:PW FILE [ARGS...]: one transfer, R66_RC set
send() {
    local id=$1 file=$2
    shift 2
    rm -f "$R66_SRV_DIR/$(basename "$file")"
    r66c "$R66_PORT" "$id" --rule in --mode 3 --send "$file" "$@"
}

info "---- quota-transfers=3: the 4th request is refused, another host is not"
for i in 1 2 3; do
    send hosta:pwA "$T/cli/ok.bin"
    [[ $R66_RC == 0 ]] || fail "hosta transfer $i failed: $(cat "$T/client.err")"
done
wait_stored 3
send hosta:pwA "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "client exit status for the 4th transfer"
assert_grep "$T/client.err" "error packet from server: code=l action=3 msg=Denied by proxy: daily transfer quota used up"
assert_eq "$(stored)" 3 "files the server stored after the refusal"
[[ ! -e $R66_SRV_DIR/ok.bin ]] || fail "the refused transfer left a file on the server"
assert_log 'r66-quota host=hosta kind=transfers used=3 limit=3 verdict=refused rule=r66\.xml:[0-9]+'
assert_log 'r66-transfer host=hosta rule=in mode=sendmd5 file=ok.bin size=0 blocks=0 .*verdict=deny reason=quota-transfers'
send hostb:pwb "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hostb after hosta's refusal: $(cat "$T/client.err")"
assert_metric eq proxyd_quota_used_transfers 'service="r66",partner="hosta"' 3
assert_metric eq proxyd_quota_refusals_total 'service="r66",kind="transfers"' 1

info "---- quota-bytes=20k: the third 10 KiB file is refused at its request"
send hostb:pwb "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hostb's second file: $(cat "$T/client.err")"
assert_metric eq proxyd_quota_used_bytes 'service="r66",partner="hostb"' 20480
send hostb:pwb "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "client exit status past the byte quota"
assert_grep "$T/client.err" "error packet from server: code=d action=3 msg=Denied by proxy: daily byte quota used up"
assert_log 'r66-quota host=hostb kind=bytes used=20480 limit=20480 verdict=refused'
assert_metric eq proxyd_quota_refusals_total 'service="r66",kind="bytes"' 1

info "---- quota-bytes=300k: a 400 KiB file stops at the block crossing it"
send hostz:pwZ "$T/cli/large.bin" --block 65536
assert_ne "$R66_RC" 0 "client exit status for the cut transfer"
# the client, writing its next blocks, may see the reset before the
# ErrorPacket; the server sees its transfer broken
assert_grep "$T/client.err" "code=d|reset by peer|connection closed"
assert_grep "$T/r66server.log" "connection closed during the transfer"
assert_log 'r66-quota host=hostz kind=bytes used=262144 limit=307200 block=65536 verdict=cut'
assert_log 'r66-transfer host=hostz rule=in mode=sendmd5 file=large.bin size=262144 blocks=4 .*verdict=deny reason=quota-bytes'
assert_metric eq proxyd_quota_used_bytes 'service="r66",partner="hostz"' 262144
assert_metric eq proxyd_quota_refusals_total 'service="r66",kind="cut"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_quota"' 3
if [[ -e $R66_SRV_DIR/large.bin ]] && cmp -s "$R66_SRV_DIR/large.bin" "$T/cli/large.bin"; then
    fail "the server has the whole cut file"
fi

info "---- a RECV counts the server's blocks the same way"
cp "$T/cli/ok.bin" "$R66_SRV_DIR/dl.bin"
mkdir -p "$T/dl"
r66c "$R66_PORT" hostz:pwZ --rule in --mode 2 --recv dl.bin --dir "$T/dl"
[[ $R66_RC == 0 ]] || fail "hostz's RECV: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$T/dl/dl.bin")" "$(sha256_of "$T/cli/ok.bin")" "the received file"
assert_metric eq proxyd_quota_used_bytes 'service="r66",partner="hostz"' $((262144 + 10240))
assert_metric eq proxyd_quota_used_transfers 'service="r66",partner="hostz"' 2

info "---- reload with hosta's limit raised to 4: one more transfer, not four"
service 4
kill -HUP "$PROXYD_PID"
assert_log "reload done"
send hosta:pwA "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hosta's 4th transfer after the reload: $(cat "$T/client.err")"
send hosta:pwA "$T/cli/ok.bin"
assert_eq "$R66_RC" 2 "hosta's 5th transfer after the reload"
assert_log 'r66-quota host=hosta kind=transfers used=4 limit=4 verdict=refused'

info "---- the next UTC day starts afresh"
echo $((DAY0 + 86400 - 36000)) >"$T/clock"
send hosta:pwA "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hosta on the next day: $(cat "$T/client.err")"
send hostb:pwb "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "hostb on the next day: $(cat "$T/client.err")"
assert_metric eq proxyd_quota_used_transfers 'service="r66",partner="hosta"' 1
assert_metric eq proxyd_quota_used_bytes 'service="r66",partner="hostb"' 10240
r66_finish
info "ok"
