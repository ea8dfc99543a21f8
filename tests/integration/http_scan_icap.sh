#!/usr/bin/env bash
# The ICAP client's previews, changed responses and bounds (RFC 3507):
#  - c-icap's virus_scan asks for a 1024-byte preview: EICAR (68 B, the
#    preview with ieof) is blocked, a clean random 10 KB body passes after
#    100 Continue, a 1 MB PDF (a type it does not scan) gets a 204 to the
#    preview and passes whole, logged as such (down and up);
#  - icap_fake.py (c-icap has no service that changes a response without
#    blocking it) answers 204 to the preview: only 16 bytes went to it;
#    Transfer-Ignore: txt: a .txt file is never sent, passes, and says so;
#    preview="no" sends the whole body all the same;
#  - a changed response (200, no threat) replaces a response held whole,
#    is refused (reset) when the head went, and refused for an upload;
#  - bounded misbehaviour, each with on-error block (502, logged): a bad
#    chunk size, a chunk longer than its size, an endless changed body
#    (over the bound), garbage instead of 100 Continue, no answer to the
#    preview, a stall after 100 Continue; and on-error allow passes the
#    original.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds curl python3 sha256sum
setup
need_scanner
scan_dirs
write_eicar "$T/www/eicar.com"
make_file 1k.bin 1K
make_file 10k.bin 10K
make_file 1m.bin 1M
make_file 1k.txt 1K
{ printf '%%PDF-1.4\n'; head -c 1M /dev/urandom; } >"$T/www/doc.pdf"
sigtool --md5 "$T/www/eicar.com" >"$W/db/test.hdb"
start_scanner

FAKE_LOG=$T/fake.log
: >"$FAKE_LOG"
free_port FAKE_PORT
python3 "$LIB_DIR/icap_fake.py" "$FAKE_PORT" "$FAKE_LOG" 2>>"$T/fake.err" &
track_pid $!
wait_listen "$FAKE_PORT" 5 $! || fail "icap_fake.py did not start: $(cat "$T/fake.err")"

start_scan_origin

MODES=(modify modify-bad modify-short endless stall-100 stall-preview garbage-100 preview-204 ignore)
scanners="<icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>"
for m in "${MODES[@]}"; do
    scanners+="
    <icap name=\"$m\" url=\"icap://127.0.0.1:$FAKE_PORT/$m\" timeout=\"2s\"/>"
done
scanners+="
    <icap name=\"no-preview\" url=\"icap://127.0.0.1:$FAKE_PORT/preview-204\" timeout=\"2s\" preview=\"no\"/>"
scanners+="
    <icap name=\"endless-open\" url=\"icap://127.0.0.1:$FAKE_PORT/endless\" timeout=\"2s\" on-error=\"allow\"/>"
write_proxyd_conf 'buffer="64k"' "<scanners>
    $scanners
  </scanners>"
svc() { # NAME SCANNER
    local p
    free_port p
    write_http_service "$1" "$p" "$ORIGIN" "<scan scanner=\"$2\"/>"
    eval "PORT_${1//-/_}=$p"
}
svc av av
free_port PORT_plain
write_http_service plain "$PORT_plain" "$ORIGIN" ""
for m in "${MODES[@]}" endless-open no-preview; do svc "$m" "$m"; done
free_port PORT_modify_tail
write_http_service modify-tail "$PORT_modify_tail" "$ORIGIN" '<scan scanner="modify" deliver="tail"/>'
free_port PORT_modify_h2
write_http_service modify-h2 "$PORT_modify_h2" "$ORIGIN" '<http h2c="yes"/><scan scanner="modify"/>'
start_proxyd

get() { # SERVICE PATH OUT [CURL_ARGS]: prints "curl-rc http-code bytes"
    local port="PORT_${1//-/_}" rc=0 r url out=$3
    url="http://127.0.0.1:${!port}$2"
    shift 3
    r=$(curl -sS --max-time 20 "$@" -D "$out.head" -o "$out" -w '%{http_code} %{size_download}' \
        "$url" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
post() { # SERVICE PATH FILE: prints "curl-rc http-code"
    local port="PORT_${1//-/_}" rc=0 r
    r=$(curl -sS --max-time 20 -o "$T/post.out" -w '%{http_code}' \
        --data-binary @"$3" "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
same() { # FILE ORIG MESSAGE
    assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"
}
origin_got() { # PATH FILE: the origin logged the whole body
    wait_grep "$ORIGIN_LOG" "^$1 $(stat -c %s "$2") $(sha256_of "$2")\$" 5
}

# ---- c-icap's own previews
r=$(get av /eicar.com "$T/o")
assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "EICAR in the preview (ieof)"
assert_log "http-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av direction=download size=68 "
r=$(get av /10k.bin "$T/o")
assert_eq "$r" "0 200 10240" "clean 10 KB after 100 Continue"
same "$T/o" "$T/www/10k.bin" "clean 10 KB"
assert_log "http-scan verdict=clean scanner=av direction=download size=10240 istag=\"CI0001-[^\"]*\"$"
r=$(get av /doc.pdf "$T/o")
assert_eq "$r" "0 200 $(stat -c %s "$T/www/doc.pdf")" "a PDF c-icap does not scan"
same "$T/o" "$T/www/doc.pdf" "PDF after a 204 to the preview"
assert_log "http-scan verdict=clean scanner=av direction=download size=[0-9]+\+ istag=\"CI0001-[^\"]*\" note=\"204 to the preview \(1024 bytes\): the rest not scanned\""
r=$(post av /up-pdf "$T/www/doc.pdf")
assert_eq "$r" "0 200" "PDF upload after a 204 to the preview"
origin_got /up-pdf "$T/www/doc.pdf" || fail "the origin did not get the whole PDF"
assert_log "http-scan verdict=clean scanner=av direction=upload .*note=\"204 to the preview"

# ---- 204 to the preview, Transfer-Ignore (icap_fake.py)
r=$(get preview-204 /1m.bin "$T/o")
assert_eq "$r" "0 200 1048576" "204 to a 16-byte preview"
same "$T/o" "$T/www/1m.bin" "1 MB after a 204 to the preview"
assert_grep "$FAKE_LOG" "^preview-204 RESPMOD preview=16 bytes=16$" "only the preview went to the scanner"
r=$(post preview-204 /up-1m "$T/www/1m.bin")
assert_eq "$r" "0 200" "upload after a 204 to the preview"
origin_got /up-1m "$T/www/1m.bin" || fail "the origin did not get the whole upload"
assert_grep "$FAKE_LOG" "^preview-204 REQMOD preview=16 bytes=16$"
r=$(get no-preview /1m.bin "$T/o")
assert_eq "$r" "0 200 1048576" "preview=\"no\""
assert_grep "$FAKE_LOG" "^preview-204 RESPMOD preview=- bytes=1048576$" "preview=\"no\": the whole body went to the scanner"
assert_log "http-scan verdict=clean scanner=no-preview direction=download size=1048576 istag=\"fake\"$"
r=$(get ignore /x/1k.txt "$T/o")
assert_eq "$r" "0 200 1024" "Transfer-Ignore: txt"
same "$T/o" "$T/www/1k.txt" "an ignored .txt"
assert_log "http-scan verdict=clean scanner=ignore direction=download .*note=\"not sent: the scanner's Transfer-Ignore lists \\.txt\""
r=$(get ignore /1k.bin "$T/o")
assert_eq "$r" "0 200 1024" "not in Transfer-Ignore: previewed"
assert_grep "$FAKE_LOG" "^ignore RESPMOD preview=16 bytes=16$" "a .bin goes to the scanner"
assert_no_grep "$FAKE_LOG" "^ignore RESPMOD .*bytes=1024" "the .txt never went to the scanner"

# ---- a changed response
r=$(get modify /1k.bin "$T/o")
assert_eq "$r" "0 200 21" "a changed response held whole is relayed"
assert_eq "$(cat "$T/o")" "REWRITTEN 1024 bytes" "the scanner's body"
assert_grep "$T/o.head" "^X-Scanner: fake" "the scanner's head"
assert_grep "$T/o.head" "^Content-Length: 21" "framed anew"
assert_log "http-scan verdict=modified relayed=yes scanner=modify direction=download size=1024 bytes=[0-9]+ istag=\"fake\""
# ... to an HTTP/2 client too: the scanner's head as the stream's HEADERS
r=$(get modify-h2 /1k.bin "$T/o" --http2-prior-knowledge)
assert_eq "$r" "0 200 21" "h2: a changed response held whole is relayed"
assert_eq "$(cat "$T/o")" "REWRITTEN 1024 bytes" "h2: the scanner's body"
assert_grep "$T/o.head" "^x-scanner: fake" "h2: the scanner's head"
assert_grep "$T/o.head" "^content-length: 21" "h2: framed anew"
assert_log "http-scan verdict=modified relayed=yes scanner=modify direction=download size=1024 bytes=[0-9]+ istag=\"fake\" proto=h2 stream=1$"
r=$(get modify /1m.bin "$T/o")
assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "changed, held in the spool: refused with a page"
assert_log "http-scan verdict=modified relayed=no reason=\"held in the spool, too big for a change to be relayed\" scanner=modify direction=download"
r=$(get modify-tail /1m.bin "$T/o")
[[ $r =~ ^(18|56)\ 200\ ([0-9]+)$ ]] || fail "changed after the head went: expected a reset, got '$r'"
assert_lt "${BASH_REMATCH[2]}" 1048576 "changed after the head went: bytes the client got"
assert_log "http-scan verdict=modified relayed=no reason=\"its head went to the client already\" scanner=modify direction=download"
r=$(post modify /up-mod "$T/www/1k.bin")
assert_eq "$r" "0 403" "a changed upload is refused"
assert_log "http-scan verdict=modified relayed=no reason=\"a request \(its head went to the server already\)\" scanner=modify direction=upload"

# ---- bounded misbehaviour: on-error block, each logged
bounded() { # SCANNER REASON_REGEX
    local t0 t r
    t0=$(now_ms)
    r=$(get "$1" /1k.bin "$T/o")
    t=$(($(now_ms) - t0))
    assert_eq "$r" "0 502 $(stat -c %s "$T/o")" "$1: on-error block"
    assert_lt "$t" 6000 "$1: bounded (ms)"
    assert_log "http-scan verdict=error reason=\"$2\" scanner=$1 direction=download on-error=block"
}
bounded modify-bad "bad changed message from the scanner: a bad chunk size"
bounded modify-short "bad changed message from the scanner: a chunk longer than its size"
bounded endless "bad changed message from the scanner: a changed body over the bound"
bounded garbage-100 "bad answer from the scanner: not an ICAP status line"
bounded stall-preview "no answer within 2000ms \(waiting for 100 Continue after the preview\)"
bounded stall-100 "no answer within 2000ms \(waiting for the verdict\)"
assert_grep "$FAKE_LOG" "^stall-100 RESPMOD preview=16 bytes=16$"
r=$(get endless-open /1k.bin "$T/o")
assert_eq "$r" "0 200 1024" "endless changed body, on-error allow"
same "$T/o" "$T/www/1k.bin" "on-error allow passes the original"
assert_log "http-scan verdict=error reason=\"bad changed message from the scanner: a changed body over the bound\" scanner=endless-open direction=download on-error=allow"
info "ok"

# ---- (info, SCAN_CPU=1 only) proxyd's CPU per MB through c-icap, with the
# preview c-icap asks for: 10 MB and 10 KB downloads, and the same unscanned
[[ ${SCAN_CPU:-0} == 1 ]] || exit 0
make_file 10m.bin 10M
cpu_per_mb() { # SERVICE FILE N: us of proxyd CPU per MB over N GETs
    local t0 t1 i port="PORT_${1//-/_}" urls=()
    for ((i = 0; i < $3; i++)); do urls+=("http://127.0.0.1:${!port}/$2"); done
    t0=$(proxyd_cpu_ns)
    curl -sS --max-time 120 "${urls[@]}" >/dev/null || fail "cpu run through $1"
    t1=$(proxyd_cpu_ns)
    echo $(((t1 - t0) * 1024 * 1024 / 1000 / ($3 * $(stat -c %s "$T/www/$2"))))
}
for round in 1 2; do
    info "round $round: CPU us/MB, 10 MB x3: plain $(cpu_per_mb plain 10m.bin 3) scanned $(cpu_per_mb av 10m.bin 3); 10 KB x100: plain $(cpu_per_mb plain 10k.bin 100) scanned $(cpu_per_mb av 10k.bin 100)"
done
