#!/usr/bin/env bash
# A 1 GB clean file through the scanner (issue 28: "clean files of 0 B,
# 1 KB, 10 MB and 1 GB pass with sha256 intact"; the small ones are in
# http_scan, ftp_scan and r66_scan). One HTTP download of 1 GB through an
# http service with <scan max-size="2g">, then (as root, with vsftpd) one
# FTP RETR of its first 256 MB (big_shrink, scan_lib.sh) through an ftp
# service with the same <scan>, c-icap and clamd set so that the file is
# really scanned, not waved through as too big:
#  - c-icap: the service alias has sizelimit=off (scan_lib.sh), so its
#    virus_scan.MaxObjectSize does not apply (checked: 128 MB with it at
#    100M were scanned); it is set to 2000M all the same;
#  - clamd's MaxFileSize and MaxScanSize 2000M (defaults 100M and 400M)
#    with AlertExceedsMax yes: a file over either limit would come back
#    "Heuristics.Limits.Exceeded", blocked, so a clean verdict means clamd
#    read all of it (checked: with its default MaxFileSize the transfer is
#    reset); LogClean yes: clamd logs the scan (one more line);
#    DisableCache yes: clamd would otherwise find the second transfer of
#    the same file in its cache of clean files (by md5) and not scan it;
# and asserts:
#  - the client gets 200 (HTTP) and all 1073741824 bytes (FTP: 226 and
#    268435456), sha256 intact;
#  - proxyd logs http-scan (ftp-scan) verdict=clean size=SIZE, clamd
#    one more clean scan;
#  - proxyd's RSS, sampled every 0.2 s through the transfer, stays within
#    64 MB of its RSS before it (the body is streamed to the scanner and
#    the client, only the held tail is kept);
# and prints each transfer's duration and the RSS peak. Under a sanitizer
# (PROXYD_SANITIZED=1) 128 MB both, and the RSS bound is not asserted (ASan's
# allocator keeps what is freed in quarantine). SCAN_BIG_FTP=0 leaves the
# FTP part out. Almost all of the time is clamd's (31-34 s of CPU for
# 1 GB of random bytes); proxyd and c-icap use about 1.7 s per GB each.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/scan_lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_cmds curl nginx openssl sha256sum
setup
need_scanner
scan_dirs

big_setup "$T/www/big.bin"
chmod 644 "$T/www/big.bin"
start_scanner
start_nginx
# FTP RETR too where vsftpd can run (root, the ftp user), the same file
FTP=0
if [[ ${SCAN_BIG_FTP:-1} == 1 && $EUID == 0 ]] && command -v vsftpd >/dev/null 2>&1 && id ftp >/dev/null 2>&1; then
    FTP=1
    start_vsftpd
    ln "$T/www/big.bin" "$FTP_ROOT/pub/big.bin"
else
    info "no FTP part: vsftpd needs root and an ftp user"
fi

write_proxyd_conf "" "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"300s\"/>
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
if [[ $FTP == 1 ]]; then
    free_port FTP_PORT
    write_ftp_service ftp "$FTP_PORT" '<ftp><command name="*" action="accept"/></ftp>
  <scan scanner="av" max-size="2g"/>'
fi
start_proxyd


# ---- the HTTP download, then the FTP RETR (at once they took longer:
# clamd scans each only once c-icap has the whole file, and both scans
# then share the CPU with the transfers). The bytes go straight into
# sha256sum; curl's figures to $T/NAME.curl.
fetch() { # NAME URL: sha256 of the body into $T/NAME.sha
    set -o pipefail
    curl -sS --max-time 280 -o - -w '%{stderr}%{http_code} %{size_download} %{time_total}\n' "$2" \
        2>"$T/$1.curl" | sha256sum | cut -d' ' -f1 >"$T/$1.sha"
}
scans0=$(clean_scans)
sampled http fetch http "http://127.0.0.1:$PORT/big.bin"
read -r code bytes secs <"$T/http.curl"
assert_eq "$code $bytes" "200 $SIZE" "status and bytes of the big download"
assert_eq "$(cat "$T/http.sha")" "$WANT" "sha256 of the big download"
assert_log "http-scan verdict=clean scanner=av direction=download size=$SIZE istag="
wait_clean_scan "$scans0"
if [[ $FTP == 1 ]]; then
    big_shrink "$T/www/big.bin" # the same file: a hard link
    scans0=$(clean_scans)
    sampled ftp fetch ftp "$(ftp_url "$FTP_PORT" pub/big.bin)"
    read -r code bytes secs <"$T/ftp.curl"
    assert_eq "$code $bytes" "226 $SIZE" "FTP reply and bytes of the big RETR"
    assert_eq "$(cat "$T/ftp.sha")" "$WANT" "sha256 of the big RETR"
    assert_log "ftp-scan verdict=clean scanner=av file=\"big\.bin\" user=anonymous dir=download size=$SIZE istag="
    wait_clean_scan "$scans0"
fi
info "ok"
