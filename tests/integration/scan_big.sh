#!/usr/bin/env bash
# A 1 GB clean file through the scanner (issue 28: "clean files of 0 B,
# 1 KB, 10 MB and 1 GB pass with sha256 intact"; the small ones are in
# http_scan, ftp_scan and r66_scan). One HTTP download through an http
# service with <scan max-size="2g">, c-icap and clamd set so that 1 GB is
# really scanned, not waved through as too big:
#  - c-icap's virus_scan.MaxObjectSize 2000M (its default 100M would answer
#    204 without a scan);
#  - clamd's MaxFileSize and MaxScanSize 2000M (defaults 100M and 400M)
#    with AlertExceedsMax yes: a file over either limit would come back
#    "Heuristics.Limits.Exceeded", blocked, so a clean verdict means clamd
#    read all of it; LogClean yes: clamd logs the scan (one more line);
# and asserts:
#  - the client gets 200 and all 1073741824 bytes, sha256 intact;
#  - proxyd logs http-scan verdict=clean size=1073741824, clamd one more
#    clean scan;
#  - proxyd's RSS, sampled every 0.2 s through the transfer, stays within
#    64 MB of its RSS before it (the body is streamed to the scanner and
#    the client, only the held tail is kept);
# and prints the transfer's duration and the RSS peak. Under a sanitizer
# (PROXYD_SANITIZED=1) 128 MB, and the RSS bound is not asserted (ASan's
# allocator keeps what is freed in quarantine).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds curl nginx openssl sha256sum
setup
need_scanner
scan_dirs

SIZE=1073741824
SANITIZED=${PROXYD_SANITIZED:-0}
[[ $SANITIZED == 1 ]] && SIZE=134217728
# Not zeros, not /dev/urandom (slow): AES-CTR of zeros under a fixed key,
# about 1 GB/s; its sha256 is taken once here.
openssl enc -aes-128-ctr -nosalt -K 000102030405060708090a0b0c0d0e0f \
    -iv 00000000000000000000000000000000 -in /dev/zero 2>/dev/null |
    head -c "$SIZE" >"$T/www/big.bin" || true
assert_eq "$(stat -c %s "$T/www/big.bin")" "$SIZE" "size of the generated file"
chmod 644 "$T/www/big.bin"
WANT=$(sha256_of "$T/www/big.bin")

# (clamd wants a database: EICAR's)
write_eicar "$T/eicar.com"
sigtool --md5 "$T/eicar.com" >"$W/db/test.hdb"
ICAP_MAX_OBJECT=2000M
CLAMD_EXTRA="MaxFileSize 2000M
MaxScanSize 2000M
AlertExceedsMax yes
LogClean yes"
start_scanner
start_nginx

write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"120s\"/>
  </scanners>"
free_port PORT
cat >"$T/policy/big.xml" <<EOF
<service name="big" analyser="http">
  <listen address="127.0.0.1" port="$PORT" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <scan scanner="av" max-size="2g"/>
</service>
EOF
PROXYD_PORTS+=("$PORT")
start_proxyd

rss() { vm_kb "$PROXYD_PID" VmRSS; }
clean_scans() { grep -c ': OK$' "$W/clamd.log" || true; }
rss0=$(rss)
scans0=$(clean_scans)
t0=$(now_ms)
curl -sS --max-time 150 -o "$T/got.bin" -w '%{http_code} %{size_download}\n' \
    "http://127.0.0.1:$PORT/big.bin" >"$T/curl.out" 2>"$T/curl.err" &
CURL=$!
track_pid "$CURL"
peak=$rss0
samples=0
for ((i = 0; i < 900; i++)); do
    proc_alive "$CURL" || break
    r=$(rss)
    ((r > peak)) && peak=$r
    samples=$((samples + 1))
    sleep 0.2
done
wait_exit "$CURL" 5 || fail "curl did not finish within 180 s"
ms=$(($(now_ms) - t0))
assert_eq "$WAIT_RC" 0 "curl's status ($(cat "$T/curl.err"))"
assert_eq "$(cat "$T/curl.out")" "200 $SIZE" "status and bytes of the big download"
assert_eq "$(sha256_of "$T/got.bin")" "$WANT" "sha256 of the big download"
assert_log "http-scan verdict=clean scanner=av direction=download size=$SIZE istag="
for ((i = 0; i < 50; i++)); do
    (($(clean_scans) > scans0)) && break
    sleep 0.1
done
assert_ge "$(clean_scans)" $((scans0 + 1)) "clean scans in clamd's log"
assert_ge "$samples" 5 "RSS samples during the transfer"
info "$((SIZE >> 20)) MB scanned download: ${ms} ms ($((SIZE / 1048576 * 1000 / (ms > 0 ? ms : 1))) MB/s), proxyd RSS ${rss0} KB before, peak ${peak} KB ($samples samples)"
[[ $SANITIZED == 1 ]] ||
    assert_lt "$((peak - rss0))" 65536 "proxyd's RSS growth during the 1 GB transfer (KB)"
info "ok"
