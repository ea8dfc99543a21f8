#!/usr/bin/env bash
# A transfer the cluster's store counted before midnight (UTC) gives what
# it was granted and did not move back to that day's key, not to the
# next day's: a RETR of a file smaller than its first lease starts at
# 23:59:58 on the quotas' clock (PROXYD_QUOTA_CLOCK), the clock passes
# midnight while its data is held by the client, then it ends. The first
# day's count ends with what moved; no key of the next day is made (one
# made by a give-back has no expiry). Then a key the store lost while a
# transfer ran (FLUSHALL) is not made again by its give-back, without an
# expiry. Before, the lease went back to the next day (lowering its count:
# more quota than allowed), the first day kept its 2 MiB lease, and a
# give-back to a missing key made one that never expired.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli
setup

# Some day at 23:59:58 UTC; the next day starts 2 s later.
DAY0=$((1796083200 + 86398))
D0=$((DAY0 / 86400))
echo "$DAY0" >"$T/clock"
export PROXYD_QUOTA_CLOCK=$T/clock

QUOTA=$((64 * 1024 * 1024)) # leases of 2 MiB
FILE=$((1536 * 1024))
start_vsftpd
head -c "$FILE" /dev/urandom >"$FTP_ROOT/pub/f.bin"
chmod 644 "$FTP_ROOT/pub/f.bin"
start_store
qnode a refuse 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"

# The RETR is counted (its 150 came), then the clock passes midnight
# before the client reads its data (qretr_held).
got=$(qretr_held a sh -c "echo $((DAY0 + 5)) >'$T/clock'")
assert_eq "$got" "$FILE 226" "the RETR across midnight"
key0="proxyd:quota:$D0:ftp:anonymous"
key1="proxyd:quota:$((D0 + 1)):ftp:anonymous"
for ((k = 0; k < 50; k++)); do
    b=$(rcli HGET "$key0" b)
    [[ $b == "$FILE" ]] && break
    sleep 0.1
done
info "the first day's bytes: $b; the next day's key: $(rcli HGETALL "$key1" | tr '\n' ' ') (ttl $(rcli TTL "$key1"))"
assert_eq "$b" "$FILE" "the first day's bytes in the store (what moved; its lease given back to it)"
assert_eq "$(rcli EXISTS "$key1")" 0 "a key of the next day, made by the give-back"
ttl=$(rcli TTL "$key0")
((ttl > 0)) || fail "the first day's key has no expiry (TTL $ttl)"

got=$(qretr_held a redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL)
assert_eq "$got" "$FILE 226" "the RETR while the store lost its keys"
assert_log_in "${LOG[a]}" 'data-transfer download cmd=RETR file="pub/f.bin" bytes=.*'
for ((k = 0; k < 20; k++)); do
    [[ $(rcli EXISTS "$key1") == 1 ]] && break
    sleep 0.05
done
info "after FLUSHALL and the give-back: $(rcli HGETALL "$key1" | tr '\n' ' ') (ttl $(rcli TTL "$key1"))"
[[ $(rcli EXISTS "$key1") == 0 ]] || fail "the give-back made the lost key again (TTL $(rcli TTL "$key1"))"
info "PASS"
