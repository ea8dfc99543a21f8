#!/usr/bin/env bash
# Range requests through a scanned http service (nginx, which honours
# Range, behind proxyd; c-icap over clamd as the scanner, scan_lib.sh):
#  - <scan> (partial="refuse", the default): Range and If-Range are not
#    sent on, so EICAR asked for as bytes=0-33, bytes=34-67, or both in
#    one multipart/byteranges request, comes back whole from nginx
#    (logged 200 there, not 206) and is refused (403) whole; a clean file
#    asked for in part comes back whole, 200, its sha256 intact; the same
#    over HTTP/2 (h2c);
#  - partial="allow": the pieces are scanned alone, pass, and rebuild
#    EICAR at the client (why refuse is the default);
#  - without <scan>: nginx's 206 goes through (Range is not dropped);
#  - behind a python origin that sends a part whatever was asked
#    (http_raw.py raw): partial="refuse" refuses its 206, and its 200
#    carrying Content-Range, with a 502 (http-scan ... reason=scan-partial)
#    where partial="allow" passes the 206; Request-Range (the older name
#    Apache honours) is not sent on; a PUT with Content-Range (a partial
#    upload) is refused 400 before it reaches the origin.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds curl nginx python3 sha256sum
setup
need_scanner
scan_dirs
write_eicar "$T/www/eicar.com"
make_file 100k.bin 100K
sigtool --md5 "$T/www/eicar.com" >"$W/db/test.hdb"
start_scanner
start_nginx
# The raw origin: a part of EICAR whatever the request (206, or 200 with
# Content-Range), and a 201 for the PUT.
mkdir -p "$T/raw"
{ printf 'HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-33/68\r\nContent-Length: 34\r\nConnection: close\r\n\r\n'
  head -c 34 "$T/www/eicar.com"; } >"$T/raw/part206"
{ printf 'HTTP/1.1 200 OK\r\nContent-Range: bytes 34-67/68\r\nContent-Length: 34\r\nConnection: close\r\n\r\n'
  tail -c +35 "$T/www/eicar.com"; } >"$T/raw/part200"
printf 'HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' >"$T/raw/put"
start_origin RAW_PORT "$T/origin.log" raw "$T/raw"

write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
  </scanners>"
free_port PORT_scan
free_port PORT_allow
free_port PORT_plain
free_port PORT_rscan
free_port PORT_rallow
write_http_service scan "$PORT_scan" "$NGINX_PORT" '<http h2c="yes"/> <scan scanner="av"/>'
write_http_service allow "$PORT_allow" "$NGINX_PORT" '<scan scanner="av" partial="allow"/>'
write_http_service plain "$PORT_plain" "$NGINX_PORT" ''
write_http_service rscan "$PORT_rscan" "$RAW_PORT" '<scan scanner="av"/>'
write_http_service rallow "$PORT_rallow" "$RAW_PORT" '<scan scanner="av" partial="allow"/>'
start_proxyd

fails=()
check() { # ACTUAL EXPECTED(regex) MESSAGE
    if [[ ! $1 =~ ^$2$ ]]; then
        fails+=("$3: got '$1'")
        echo "  MISMATCH $3: got '$1', want /$2/" >&2
    fi
}
# get PORT PATH OUT [CURL_ARGS...]: "http-code bytes"
get() {
    local port=$1 path=$2 out=$3
    shift 3
    curl -sS --max-time 20 -o "$out" -w '%{http_code} %{size_download}' "$@" \
        "http://127.0.0.1:$port$path" 2>>"$T/curl.err" || true
}
nginx_status_n() { # STATUS: nginx's log lines with that status
    grep -c "\" $1 " "$T/nginx/logs/access.log" || true
}

# ---- without <scan>: nginx honours Range (the test's premise)
check "$(get "$PORT_plain" /eicar.com "$T/p1" -r 0-33)" "206 34" "plain: bytes=0-33"

# ---- partial="allow": the two halves pass and rebuild EICAR
check "$(get "$PORT_allow" /eicar.com "$T/a1" -r 0-33)" "206 34" "partial=allow: bytes=0-33"
check "$(get "$PORT_allow" /eicar.com "$T/a2" -r 34-67)" "206 34" "partial=allow: bytes=34-67"
cat "$T/a1" "$T/a2" >"$T/a12"
check "$(cmp "$T/a12" "$T/www/eicar.com" 2>&1 && echo same)" same "partial=allow: EICAR rebuilt from its halves"

# ---- partial="refuse" (the default): the server is asked for the whole
s0=$(nginx_status_n 206)
check "$(get "$PORT_scan" /eicar.com "$T/s1" -r 0-33)" "403 [0-9]+" "scan: bytes=0-33 of EICAR"
check "$(get "$PORT_scan" /eicar.com "$T/s2" -r 34-67)" "403 [0-9]+" "scan: bytes=34-67 of EICAR"
check "$(get "$PORT_scan" /eicar.com "$T/s3" -r 0-33,34-67)" "403 [0-9]+" "scan: multipart bytes=0-33,34-67 of EICAR"
check "$(get "$PORT_scan" /eicar.com "$T/s4" -r 0-33 -H 'If-Range: "x"')" "403 [0-9]+" "scan: bytes=0-33 with If-Range"
check "$(get "$PORT_scan" /eicar.com "$T/s5" --http2-prior-knowledge -r 0-33)" "403 [0-9]+" "scan, h2c: bytes=0-33 of EICAR"
for f in s1 s2 s3 s4 s5; do
    if grep -q 'EICAR' "$T/$f" 2>/dev/null; then fails+=("scan: $f holds part of EICAR"); fi
done
check "$(get "$PORT_scan" /100k.bin "$T/c1" -r 1000-1999)" "200 102400" "scan: a part of a clean file comes whole"
check "$(sha256_of "$T/c1")" "$(sha256_of "$T/www/100k.bin")" "scan: the whole clean file's sha256"
check "$(get "$PORT_scan" /100k.bin "$T/c2" --http2-prior-knowledge -r 0-9,20-29)" "200 102400" "scan, h2c: a multipart request of a clean file comes whole"
check "$(($(nginx_status_n 206) - s0))" 0 "206 answers nginx gave through the scanned service"
# (the h2c requests ran as transactions of their connection's session)
assert_log "http-request .* path=/eicar\.com status=403 .* proto=h2 stream=1$"
assert_log "http-request .* path=/100k\.bin status=200 .* proto=h2 stream=1$"

# ---- a server that sends a part unasked: refused whatever the request
check "$(get "$PORT_rallow" /part206 "$T/r0")" "206 34" "partial=allow: the origin's unasked 206 (the premise)"
check "$(get "$PORT_rscan" /part206 "$T/r1")" "502 [0-9]+" "scan: an unasked 206"
check "$(get "$PORT_rscan" /part200 "$T/r2")" "502 [0-9]+" "scan: a 200 with Content-Range"
for f in r1 r2; do
    if grep -q 'EICAR' "$T/$f" 2>/dev/null; then fails+=("scan: $f holds part of EICAR"); fi
done
# Request-Range is not sent on (Apache honours it as Range)
get "$PORT_rscan" /part206 "$T/r3" -H 'Request-Range: bytes=0-33' >/dev/null
check "$(grep -ci '"request-range"' "$T/origin.log" || true)" 0 "scan: Request-Range reached the origin"
# A partial upload (PUT with Content-Range) is refused before the origin
n0=$(grep -c '"PUT"' "$T/origin.log" || true)
check "$(head -c 34 "$T/www/eicar.com" | get "$PORT_rscan" /put "$T/r4" -X PUT --data-binary @- -H 'Content-Range: bytes 0-33/68')" "400 [0-9]+" "scan: PUT with Content-Range"
check "$(($(grep -c '"PUT"' "$T/origin.log" || true) - n0))" 0 "scan: the partial PUT reached the origin"
check "$(printf 'whole' | get "$PORT_rscan" /put "$T/r5" -X PUT --data-binary @-)" "201 0" "scan: a PUT without Content-Range goes"

if ((${#fails[@]} > 0)); then
    printf '  %s\n' "${fails[@]}" >&2
    fail "${#fails[@]} checks failed (above)"
fi
# The refusals' lines (workers log as they go: waited for)
wait_log_count 'http-scan verdict=deny reason=scan-partial direction=download status=502 rule=scan/@partial' 3
wait_log_count 'http-scan verdict=deny reason=scan-partial direction=upload status=400 rule=scan/@partial' 1
assert_log 'http-scan verdict=infected threat="eicar\.com\.UNOFFICIAL" scanner=av direction=download size=68 '

info "ok"
