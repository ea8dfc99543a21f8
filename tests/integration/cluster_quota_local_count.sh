#!/usr/bin/env bash
# A node's own count of a partner's day (the admin's /api/quotas, and
# what decides with on-store-error="local" when the cluster's store
# cannot answer) has what its transfers moved, not their leases as well:
# one RETR of FILE (32 KiB under quota-bytes=2m, leases of 64 KiB) through
# a node with the store up leaves the node's count at FILE; the store is
# then stopped and the next RETR, decided by the node's count, starts
# (32 KiB left) and is cut at the quota. Before, the node's count was the
# store's figure at the start (the first lease in it) plus what moved:
# FILE + 64 KiB, past the quota, and the second RETR was refused (550).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli curl
setup

QUOTA=$((2 * 1024 * 1024))
FILE=$((QUOTA - 32 * 1024))
start_vsftpd
head -c "$FILE" /dev/urandom >"$FTP_ROOT/pub/f.bin"
chmod 644 "$FTP_ROOT/pub/f.bin"
start_store
qnode a local 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"

# retr: one RETR of pub/f.bin; prints the bytes received and the reply
retr() {
    timeout 30 python3 - 127.0.0.1 "${FTP[a]}" <<'PY'
import ftplib, sys
f = ftplib.FTP()
f.connect(sys.argv[1], int(sys.argv[2]), timeout=10)
f.login("anonymous", "t@example.org")
got = []
try:
    r = f.retrbinary("RETR pub/f.bin", got.append)
except ftplib.all_errors as e:
    r = str(e)
print(sum(map(len, got)), r[:3])
PY
}
# node_bytes: the node's bytes of the day for anonymous (/api/quotas)
node_bytes() {
    curl -s --max-time 5 "http://127.0.0.1:${ADMIN[a]}/api/quotas" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print([e["bytes"] for e in d["quotas"] if e["partner"] == "anonymous"][0])'
}

assert_eq "$(retr)" "$FILE 226" "the RETR with the store up"
for ((k = 0; k < 50; k++)); do
    b=$(node_bytes)
    [[ $b == "$FILE" ]] && break
    sleep 0.1
done
info "the node's bytes of the day: $b (moved $FILE, quota $QUOTA)"
assert_eq "$b" "$FILE" "the node's bytes of the day (/api/quotas) after a transfer with the store"

kill "$REDIS_PID"
wait "$REDIS_PID" 2>/dev/null || true
out=$(retr)
info "the RETR with the store down: $out"
assert_log_in "${LOG[a]}" 'ftp-quota user=anonymous kind=store-error cmd=RETR .*verdict=local'
[[ $out != *" 550" ]] || fail "the node's count refused the RETR at its start: $(grep ftp-quota "${LOG[a]}" | tail -2)"
assert_log_in "${LOG[a]}" 'ftp-quota user=anonymous kind=bytes .*verdict=cut'
got=${out% *}
((got <= QUOTA - FILE + 1)) || fail "the local RETR moved $got bytes, past the quota's $((QUOTA - FILE)) left"
info "PASS"
