#!/usr/bin/env bash
# A partner's byte quota under parallel transfers: SESSIONS sessions of
# one user at once (PARALLEL at a time, spread over proxyd's 2 workers),
# each uploading and downloading more than its share, spliced and through
# the buffered relay (<content>). Whatever the parallelism, the day's
# count and what vsftpd received (uploads) or the clients got
# (downloads) stay within quota-bytes plus one buffer (limits/@buffer) per
# transfer running at once, and every transfer refused or cut past the
# limit is logged.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

PARALLEL=20
QUOTA=$((2 * 1024 * 1024))
BUF=16384
start_vsftpd
P=$FTP_ROOT/pub
head -c 512K /dev/urandom >"$P/dl.bin"
chmod 644 "$P/dl.bin"

write_proxyd_conf "buffer=\"16k\""
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
RULE='<ftp><user name="anonymous" quota-bytes="2m" action="accept"/></ftp>'
# <content>: the data goes through the buffered relay, not spliced
CONTENT='<content type="application/x-dosexec" action="deny"/>'
declare -A PORTS
for svc in up down upbuf downbuf; do
    free_port "PORTS[$svc]"
    extra=""
    [[ $svc == *buf ]] && extra=$CONTENT
    write_ftp_service "$svc" "${PORTS[$svc]}" "$RULE $extra"
done
start_proxyd

# run PORT up|down: PARALLEL sessions of user anonymous at once, each
# moving 512 KiB (5 times its share); prints the bytes the clients got
run() {
    if [[ $2 == up ]]; then
        timeout 100 python3 "$(dirname "$0")/ftp_parallel.py" 127.0.0.1 "$1" "up:pub/%d-%02d.bin:524288" "$PARALLEL"
    else
        timeout 100 python3 "$(dirname "$0")/ftp_parallel.py" 127.0.0.1 "$1" pub/dl.bin "$PARALLEL"
    fi | awk '{ s += $1 } END { print s + 0 }'
}

# check SERVICE WHAT BYTES: BYTES moved, within the day's count, and that
# within the quota plus one buffer per transfer at once
check() {
    local used
    used=$(metric_value proxyd_quota_used_bytes "service=\"$1\",partner=\"anonymous\"")
    info "$1: $2 $3 bytes, the day's count $used (quota $QUOTA, slack $((PARALLEL * BUF)))"
    (($3 <= used)) || fail "$1: $2 $3 bytes, more than the day's count $used"
    (($3 <= QUOTA + PARALLEL * BUF)) ||
        fail "$1: $2 $3 bytes, past quota $QUOTA + $PARALLEL x $BUF"
    ((used <= QUOTA + PARALLEL * BUF)) ||
        fail "$1: the day's count $used is past quota $QUOTA + $PARALLEL x $BUF"
    # Enough moved: proxyd's count for uploads (what vsftpd kept is what
    # was counted); for downloads the count, not what the clients got: a
    # quota cut resets the client's data connection (so that no client
    # takes a truncated file for a whole one), and the bytes still in
    # proxyd's send queue then, counted as sent, never reach it.
    local moved=$3
    [[ $2 == "the clients got" ]] && moved=$used
    ((moved >= QUOTA / 2)) || fail "$1: $2 only $moved bytes moved (the quota is $QUOTA)"
    (($3 > 0)) || fail "$1: $2 nothing"
}

for svc in up upbuf; do
    port=${PORTS[$svc]}
    info "---- $svc: $PARALLEL parallel uploads of 512 KiB, quota 2m"
    run "$port" up >/dev/null
    # vsftpd is done with every upload that reached it (its log line)
    sent=$(grep -c "cmd=STOR arg=\"pub/$port-.* verdict=accept" "$PROXYD_LOG" || true)
    deadline=$(($(date +%s) + 20))
    until (($(grep -cE "(OK|FAIL) UPLOAD: .*/pub/$port-" "$T/vsftpd.log" || true) >= sent)); do
        (($(date +%s) < deadline)) || fail "vsftpd has not ended the $sent uploads of $svc"
        sleep 0.1
    done
    check "$svc" "vsftpd kept" "$(cat "$P/$port"-*.bin | wc -c)"
done
for svc in down downbuf; do
    info "---- $svc: $PARALLEL parallel downloads of 512 KiB, quota 2m"
    got=$(run "${PORTS[$svc]}" down)
    check "$svc" "the clients got" "$got"
done
assert_log 'ftp-quota user=anonymous kind=bytes used=[0-9]+ limit=2097152 verdict=cut'
info "ok"
