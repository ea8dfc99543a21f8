#!/usr/bin/env bash
# http bodies held until the scanner's verdict (<scan deliver=
# "after-verdict">, the default): EICAR at 1 MiB inside a 2 MiB body,
# c-icap with virus_scan over clamd, limits/@buffer at 64k so all but the
# first 64 KiB of a held body go through the spool file:
#  - downloads with a Content-Length and chunked: the response head waits
#    with the body, so the client gets a 403 page and not a byte of the
#    body;
#  - uploads with a Content-Length and chunked: the client gets the 403,
#    the origin not a byte of the body (it logs what it received, cut or
#    not);
#  - clean 2 MiB bodies both ways, both framings, arrive byte-identical
#    (sha256), a rate-limited reader too (the kernel pushes back on the
#    spool's sendfile); the spool directory keeps no name;
#  - the same through an HTTP/2 client (h2c), its streams transactions of
#    the connection's session: infected and clean downloads both framings,
#    a rate-limited reader, uploads with and without a content-length, the
#    http-scan lines tagged with the stream;
#  - deliver="tail" keeps the former streaming: the client gets the head
#    and most of the body, signature included, then a reset (curl sees a
#    cut transfer, never a whole one: no terminating chunk); an HTTP/2
#    client's stream is reset.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds curl python3 sha256sum
setup
need_scanner
scan_dirs
write_eicar "$W/eicar.com"
{ head -c 1M /dev/urandom; cat "$W/eicar.com"; head -c $((1048576 - 68)) /dev/urandom; } >"$T/www/mid.bin"
make_file clean.bin 2M
make_file 4m.bin 4M
echo "EicarBody:0:*:$(od -An -tx1 "$W/eicar.com" | tr -d ' \n')" >"$W/db/test.ndb"
start_scanner

# --- the origin (scan_origin.py): GET /NAME, GET /chunked/NAME; POST/PUT
# logs "PATH N SHA256" for a whole body, "PATH N SHA256 cut" with what came
# of it when the connection was cut before its end
start_scan_origin --log-cut

SPOOL=$T/spool
mkdir -p "$SPOOL"
write_proxyd_conf 'buffer="64k"' "<scanners spool=\"$SPOOL\">
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
  </scanners>"
svc() { # NAME SCAN_XML
    local p
    free_port p
    cat >"$T/policy/$1.xml" <<EOF2
<service name="$1" analyser="http">
  <listen address="127.0.0.1" port="$p" mode="fixed"/>
  <target address="127.0.0.1" port="$ORIGIN"/>
  $2
</service>
EOF2
    PROXYD_PORTS+=("$p")
    eval "PORT_${1//-/_}=$p"
}
svc hold '<scan scanner="av"/>'
svc tail '<scan scanner="av" deliver="tail"/>'
svc h2 '<http h2c="yes"/><scan scanner="av"/>'
svc h2tail '<http h2c="yes"/><scan scanner="av" deliver="tail"/>'
start_proxyd

get() { # SERVICE PATH OUT [CURL_ARGS]: "curl-rc http-code bytes"
    local port="PORT_${1//-/_}" rc=0 r url out=$3
    url="http://127.0.0.1:${!port}$2"
    shift 3
    r=$(curl -sS --max-time 30 "$@" -o "$out" -w '%{http_code} %{size_download}' \
        "$url" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
post() { # SERVICE PATH FILE [chunked]: "curl-rc http-code"
    local port="PORT_${1//-/_}" rc=0 r te=()
    [[ ${4:-} == chunked ]] && te=(-H 'Transfer-Encoding: chunked')
    r=$(curl -sS --max-time 30 -o "$T/post.out" -w '%{http_code}' "${te[@]}" \
        --data-binary @"$3" "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
same() { assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"; }
origin_has() { # REGEX: a line of the origin's log, waited for
    local i
    for ((i = 0; i < 100; i++)); do
        grep -Eq -- "$1" "$ORIGIN_LOG" && return 0
        sleep 0.05
    done
    fail "the origin logged no /$1/: $(cat "$ORIGIN_LOG")"
}
EICAR_RE='EICAR-STANDARD-ANTIVIRUS-TEST-FILE'
# ends_with PATH KEY: KEY=N (to-server, to-client) of the session-end line
# of the session whose http-request line named PATH (the last such)
ends_with() {
    local id
    assert_log "#[0-9]+ http-request .* path=$1 "
    id=$(grep -E "#[0-9]+ http-request .* path=$1 " "$PROXYD_LOG" | tail -n 1 |
        grep -oE '#[0-9]+ ') || fail "no http-request line for $1"
    assert_log "$id""session-end "
    grep -E "$id""session-end " "$PROXYD_LOG" | sed -E "s/.* $2=([0-9]+) .*/\1/"
}
# req_says PATH KEY: KEY=N of the http-request line that named PATH
req_says() {
    assert_log "http-request .* path=$1 "
    grep -E "http-request .* path=$1 " "$PROXYD_LOG" | tail -n 1 |
        sed -E "s/.* $2=([0-9]+) .*/\1/"
}

# ---- infected, held: a page, not a byte of the body
for path in /mid.bin /chunked/mid.bin; do
    r=$(get hold "$path" "$T/o")
    assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "held $path: a 403 page"
    assert_grep "$T/o" "virus found: EicarBody\.UNOFFICIAL" "held $path: the page names the threat"
    assert_no_grep "$T/o" "$EICAR_RE" "held $path: the signature reached the client"
    assert_lt "$(stat -c %s "$T/o")" 4096 "held $path: bytes the client got (the page only)"
    # the counts say what went: the page, not the 2 MiB held and dropped
    assert_lt "$(ends_with "$path" to-client)" 4096 "held $path: session-end to-client"
done
assert_log "http-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av direction=download size=2097152"
for mode in "" chunked; do
    r=$(post hold "/up-mid-$mode" "$T/www/mid.bin" $mode)
    assert_eq "$r" "0 403" "held infected upload $mode"
    # the origin logs a line once the connection is reset, if it read the head
    if grep -q "^/up-mid-$mode " "$ORIGIN_LOG"; then
        origin_has "^/up-mid-$mode 0 "
    fi
    # what reached the server: the head, not the body held and dropped
    assert_lt "$(ends_with "/up-mid-$mode" to-server)" 4096 "held infected upload $mode: session-end to-server"
    assert_lt "$(req_says "/up-mid-$mode" to-server)" 4096 "held infected upload $mode: http-request to-server"
done
assert_log "http-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av direction=upload size=2097152"

# ---- clean, held: whole, both ways
for path in /clean.bin /chunked/clean.bin; do
    r=$(get hold "$path" "$T/o")
    assert_eq "$r" "0 200 2097152" "held clean $path"
    same "$T/o" "$T/www/clean.bin" "held clean $path"
done
r=$(get hold /4m.bin "$T/o" --limit-rate 4M)
assert_eq "$r" "0 200 4194304" "held clean 4 MiB, rate-limited reader"
same "$T/o" "$T/www/4m.bin" "held clean 4 MiB, rate-limited reader"
for mode in "" chunked; do
    r=$(post hold "/up-clean-$mode" "$T/www/clean.bin" $mode)
    assert_eq "$r" "0 200" "held clean upload $mode"
    origin_has "^/up-clean-$mode 2097152 $(sha256_of "$T/www/clean.bin")$"
done
# an HTTP/2 client (prior knowledge): the same, through its stream, a
# transaction of the connection's session (no leg: no session of its own)
h2=(--http2-prior-knowledge)
for path in /mid.bin /chunked/mid.bin; do
    r=$(get h2 "$path" "$T/o" "${h2[@]}")
    assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "h2: held infected $path: a 403"
    assert_grep "$T/o" "virus found: EicarBody\.UNOFFICIAL" "h2: held $path: the page names the threat"
    assert_no_grep "$T/o" "$EICAR_RE" "h2: held $path: the signature reached the client"
    assert_lt "$(req_says "$path" to-client)" 4096 "h2: held $path: http-request to-client"
done
assert_log "http-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av direction=download size=2097152 .* proto=h2 stream=1$"
assert_log "http-request .* path=/chunked/mid.bin status=403 .* verdict=deny .* proto=h2 stream=1$"
for path in /clean.bin /chunked/clean.bin; do
    r=$(get h2 "$path" "$T/o" "${h2[@]}")
    assert_eq "$r" "0 200 2097152" "h2: held clean $path"
    same "$T/o" "$T/www/clean.bin" "h2: held clean $path"
done
assert_log "http-scan verdict=clean scanner=av direction=download size=2097152 .* proto=h2 stream=1$"
# a slow reader: the held body waits for its window mapped from the
# spool's file, not copied to the heap: proxyd's anonymous memory grows by
# far less than the 4 MiB it holds for the client meanwhile
anon0=$(vm_kb "$PROXYD_PID" RssAnon)
get h2 /4m.bin "$T/o" "${h2[@]}" --limit-rate 2M >"$T/slow.r" &
slow=$!
peak=$anon0
for ((i = 0; i < 150; i++)); do
    a=$(vm_kb "$PROXYD_PID" RssAnon)
    ((a > peak)) && peak=$a
    proc_alive "$slow" || break
    sleep 0.05
done
wait "$slow" || true
assert_eq "$(cat "$T/slow.r")" "0 200 4194304" "h2: held clean 4 MiB, rate-limited reader"
same "$T/o" "$T/www/4m.bin" "h2: held clean 4 MiB, rate-limited reader"
info "h2 slow reader: RssAnon $anon0 kB, peak $peak kB"
# (not under a sanitizer: ASan's allocator keeps what is freed in
# quarantine, and its shadow memory is anonymous too)
http_sanitized ||
    assert_lt $((peak - anon0)) 2048 "h2 slow reader: proxyd's anonymous memory growth (kB) with 4 MiB held"
# uploads (REQMOD from the stream's DATA): with a content-length, and
# without one (curl -T -: DATA until END_STREAM, chunked to the origin)
h2post() { # PATH FILE [stream]: "curl-rc http-code"
    local rc=0 r up=(--data-binary @"$2")
    [[ ${3:-} == stream ]] && up=(-X POST -T - )
    r=$(curl -sS --max-time 30 "${h2[@]}" -o "$T/post.out" -w '%{http_code}' \
        "${up[@]}" "http://127.0.0.1:$PORT_h2$1" <"$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
for mode in "" stream; do
    r=$(h2post "/h2-up-mid-$mode" "$T/www/mid.bin" $mode)
    assert_eq "$r" "0 403" "h2: held infected upload $mode"
    if grep -q "^/h2-up-mid-$mode " "$ORIGIN_LOG"; then
        origin_has "^/h2-up-mid-$mode 0 "
    fi
    assert_lt "$(req_says "/h2-up-mid-$mode" to-server)" 4096 "h2: held infected upload $mode: http-request to-server"
    r=$(h2post "/h2-up-clean-$mode" "$T/www/clean.bin" $mode)
    assert_eq "$r" "0 200" "h2: held clean upload $mode"
    origin_has "^/h2-up-clean-$mode 2097152 $(sha256_of "$T/www/clean.bin")$"
done
assert_log "http-scan verdict=infected threat=\"EicarBody\.UNOFFICIAL\" scanner=av direction=upload size=2097152 .* proto=h2 stream=1$"
assert_eq "$(find "$SPOOL" -mindepth 1 | wc -l)" 0 "names left in the spool directory"

# ---- deliver="tail": the former streaming, cut by a reset
for path in /mid.bin /chunked/mid.bin; do
    r=$(get tail "$path" "$T/o")
    [[ $r =~ ^(18|56)\ 200\ ([0-9]+)$ ]] || fail "tail $path: expected a cut transfer, got '$r'"
    assert_ge "${BASH_REMATCH[2]}" $((1048576 + 68)) "tail $path: bytes the client got (the signature among them)"
done
r=$(post tail /up-tail "$T/www/mid.bin")
assert_eq "$r" "0 403" "tail: infected upload"
origin_has "^/up-tail [0-9]+ [0-9a-f]+ cut$"
got=$(grep "^/up-tail " "$ORIGIN_LOG" | awk '{print $2}')
assert_ge "$got" $((1048576 + 68)) "tail: bytes of the infected upload the origin got"
# the held tail never went: counted neither on the session nor the request
assert_lt "$(ends_with /up-tail to-server)" 2097152 "tail: session-end to-server"
assert_ge "$(ends_with /up-tail to-server)" "$got" "tail: session-end to-server"
assert_lt "$(req_says /up-tail to-server)" 2097152 "tail: http-request to-server"
# ... and over HTTP/2: the head went, the stream is reset before its last
# bytes (curl: 92, an HTTP/2 stream error), never ended whole
r=$(get h2tail /mid.bin "$T/o" "${h2[@]}")
[[ $r =~ ^92\ 200\ ([0-9]+)$ ]] || fail "h2 tail /mid.bin: expected a reset stream, got '$r'"
assert_log "http-error status=403 reason=\"virus found: EicarBody\.UNOFFICIAL\" \(after the response head: reset\) proto=h2 stream=1$"

info "ok"
