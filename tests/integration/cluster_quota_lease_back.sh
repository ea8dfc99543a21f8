#!/usr/bin/env bash
# A lease the cluster's store charged for a transfer that never moved a
# byte goes back to the day when the transfer's data channel goes without
# its end being heard: an active-mode RETR the server refuses (550: it
# never connects, the channel never relays) followed by the client's next
# PORT (the channel dropped), or by QUIT (the session's close frees it).
# Before, each such RETR left its first lease (a 32nd of quota-bytes)
# charged in the store for the rest of the day: 32 of them used up a
# partner's whole day without a byte moved.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
source "$(dirname "$0")/cluster_quota_lib.sh"
need_ftp
need_cmds redis-server redis-cli
setup

QUOTA=$((64 * 1024 * 1024))
start_vsftpd
# a listing of some length: the LIST moves bytes of its own
for i in $(seq 1 20); do echo x >"$FTP_ROOT/pub/file-$i.txt"; done
start_store
qnode a refuse 1 "<user name=\"anonymous\" quota-bytes=\"$QUOTA\" action=\"accept\"/>"

# retr_missing THEN: an active-mode RETR of a file vsftpd does not have
# (550), then THEN: "list" (a PORT and LIST: the channel dropped) or
# "quit" (the session's close)
retr_missing() {
    timeout 20 python3 - 127.0.0.1 "${FTP[a]}" "$1" <<'PY'
import ftplib, sys
f = ftplib.FTP()
f.connect(sys.argv[1], int(sys.argv[2]), timeout=10)
f.login("anonymous", "t@example.org")
f.set_pasv(False)
try:
    f.retrbinary("RETR pub/missing.bin", lambda b: None)
    sys.exit("RETR of a missing file succeeded")
except ftplib.error_perm as e:
    print("RETR:", str(e)[:3])
if sys.argv[3] == "list":
    f.retrlines("LIST pub", lambda l: None)
f.quit()
PY
}

key_bytes() {
    local key
    key=$(rcli --scan --pattern 'proxyd:quota:*:ftp:anonymous' | head -n 1)
    [[ -n $key ]] || fail "no key for the partner in the store"
    rcli HGET "$key" b
}

# wait_bytes WANT WHAT: the store's bytes of the day come to WANT
wait_bytes() {
    local b k
    for ((k = 0; k < 50; k++)); do
        b=$(key_bytes)
        [[ $b == "$1" ]] && return 0
        sleep 0.1
    done
    fail "$2: the store charges $b bytes of the day, none moved (want $1)"
}

out=$(retr_missing list)
assert_eq "$out" "RETR: 550" "the RETR of a missing file"
assert_log_in "${LOG[a]}" 'ftp-data client=active .*LIST|LIST'
wait_bytes 0 "a refused RETR, then LIST (its channel dropped)"
info "a refused RETR then LIST: the lease came back"

out=$(retr_missing quit)
assert_eq "$out" "RETR: 550" "the RETR of a missing file"
assert_log_in "${LOG[a]}" 'session-end|end='
wait_bytes 0 "a refused RETR, then QUIT (the channel freed with its session)"
info "a refused RETR then QUIT: the lease came back"
info "PASS"
