#!/usr/bin/env bash
# File policy by content on http (<content type=... action=...>): the
# type libmagic sniffs from a body's first bytes, not the name.
#  - downloads from nginx: an ELF executable (1 MB, and one under the
#    4 KiB sniffed), a DOS/PE one: 403 page naming the type, the
#    http-content log line with the rule's FILE:LINE; a text file (1 MB
#    and 10 bytes): 200, sha256 intact; chunked from a python origin too;
#  - uploads (Content-Length and chunked) of the ELF: 403, the origin
#    never gets the body whole (curl's 1 MB upload waits for a
#    100 Continue: the 403 still comes after it, not a reset); of the text: 200, the origin's sha256
#    equal;
#  - bodies of sizes around what is sniffed (1 byte to 70 KB, 4 KiB +-1,
#    some drawn at random), both ways, with a Content-Length and chunked:
#    text passes whole, an ELF is refused every time;
#  - first match wins (accept x-executable before deny application/*);
#    a service without rules passes the ELF;
#  - an HTTP/2 client's streams (transactions of its connection's
#    session): ELF downloads both framings and an ELF upload refused, text
#    whole, the http-content lines naming the stream;
#  - proxyd_content_total{service,action} counts them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds curl nginx python3 sha256sum gzip base64
setup

# --- files: the types are in the bytes, the names say nothing
python3 - "$T/www" <<'PY'
import os, struct, sys
d = sys.argv[1]
# ELF64 header, e_type ET_EXEC (a PIE would be x-pie-executable)
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64,
                   56, 1, 64, 0, 0))
open(os.path.join(d, "prog.bin"), "wb").write(elf + os.urandom(1 << 20))
open(os.path.join(d, "small.bin"), "wb").write(elf + os.urandom(200))
open(os.path.join(d, "tool.bin"), "wb").write(b"MZ\x90\x00" + bytes(60) +
                                               os.urandom(100000))
PY
# Numbered lines, not random base64: libmagic took some random base64 for
# application/vnd.hp-HPGL now and then, and the test failed on it.
awk 'BEGIN { for (i = 0; i < 18000; i++) printf "line %06d: the quick brown fox jumps over the lazy dog\n", i }' \
    >"$T/www/text.bin"
printf 'ten bytes\n' >"$T/www/tiny.bin"
head -c 20000 /dev/urandom | gzip -c >"$T/www/data.bin"

start_nginx
start_scan_origin

write_proxyd_conf
DENY='<content type="application/x-dosexec application/x-executable" action="deny"/>'
svc() { # NAME ORIGIN_PORT XML
    local p
    free_port p
    write_http_service "$1" "$p" "$2" "$3"
    eval "PORT_$1=$p"
}
svc web "$NGINX_PORT" "$DENY"
svc up "$ORIGIN" "$DENY"
svc order "$NGINX_PORT" '<content type="application/x-executable" action="accept"/>
  <content type="application/*" action="deny"/>'
svc plain "$NGINX_PORT" ''
svc h2 "$ORIGIN" "<http h2c=\"yes\"/>$DENY"
start_proxyd
# The rule= of each: the line of its <content> in the service file.
rule_of() { # SERVICE NTH (as proxyd names the file: from conf/)
    echo "$T/conf/../policy/$1.xml:$(grep -n '<content' "$T/policy/$1.xml" | sed -n "${2}p" | cut -d: -f1)"
}
RULE_WEB=$(rule_of web 1)
RULE_UP=$(rule_of up 1)
RULE_ORDER2=$(rule_of order 2)
re() { sed 's/[.[\*^$/]/\\&/g' <<<"$1"; }

get() { # SERVICE PATH OUT: "curl-rc http-code bytes"
    local port="PORT_$1" rc=0 r
    r=$(curl -sS --max-time 20 -o "$3" -w '%{http_code} %{size_download}' \
        "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
post() { # SERVICE PATH FILE [chunked]: "curl-rc http-code"
    local port="PORT_$1" rc=0 r te=()
    [[ ${4:-} == chunked ]] && te=(-H 'Transfer-Encoding: chunked')
    r=$(curl -sS --max-time 20 -o "$T/post.out" -w '%{http_code}' "${te[@]}" \
        --data-binary @"$3" "http://127.0.0.1:${!port}$2" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
same() { assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"; }
origin_got() { grep -q "^$1 $(stat -c %s "$2") $(sha256_of "$2")\$" "$ORIGIN_LOG"; }

# ---- denied downloads: a page naming the type, before any byte of it
for f in prog.bin small.bin; do
    r=$(get web "/$f" "$T/o")
    assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "ELF $f: a 403 page"
    assert_grep "$T/o" "file type not allowed: application/x-executable" "the page names the type"
    assert_no_grep "$T/o" "ELF" "no byte of the ELF reached the client"
done
assert_log "http-content type=application/x-executable action=deny rule=$(re "$RULE_WEB") direction=download sniffed=4096"
assert_log "http-content type=application/x-executable action=deny rule=$(re "$RULE_WEB") direction=download sniffed=264( |$)"
assert_log "path=/prog\.bin status=403 .*verdict=deny"
r=$(get web /tool.bin "$T/o")
assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "PE tool.bin: a 403 page"
assert_log "http-content type=application/x-dosexec action=deny rule=$(re "$RULE_WEB") direction=download"
r=$(get up /chunked/prog.bin "$T/o")
assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "chunked ELF: a 403 page"
assert_log "http-content type=application/x-executable action=deny rule=$(re "$RULE_UP") direction=download"

# ---- accepted downloads: whole
for f in text.bin tiny.bin; do
    r=$(get web "/$f" "$T/o")
    assert_eq "$r" "0 200 $(stat -c %s "$T/www/$f")" "text $f"
    same "$T/o" "$T/www/$f" "text $f"
done
assert_log "http-content type=text/plain action=accept rule=- direction=download sniffed=4096"
assert_log "http-content type=text/plain action=accept rule=- direction=download sniffed=10( |$)"
r=$(get up /chunked/text.bin "$T/o")
assert_eq "$r" "0 200 $(stat -c %s "$T/www/text.bin")" "chunked text"
same "$T/o" "$T/www/text.bin" "chunked text"

# ---- uploads
for mode in "" chunked; do
    r=$(post up "/up-elf-$mode" "$T/www/prog.bin" $mode)
    assert_eq "$r" "0 403" "ELF upload $mode"
    assert_grep "$T/post.out" "file type not allowed: application/x-executable"
    r=$(post up "/up-text-$mode" "$T/www/text.bin" $mode)
    assert_eq "$r" "0 200" "text upload $mode"
    origin_got "/up-text-$mode" "$T/www/text.bin" || fail "the origin did not get the text upload ($mode) whole"
done
r=$(post up /up-small-elf "$T/www/small.bin")
assert_eq "$r" "0 403" "small ELF upload"
assert_log "http-content type=application/x-executable action=deny rule=$(re "$RULE_UP") direction=upload sniffed=4096"
assert_log "http-content type=application/x-executable action=deny rule=$(re "$RULE_UP") direction=upload sniffed=264( |$)"
assert_log "http-content type=text/plain action=accept rule=- direction=upload"
assert_no_grep "$ORIGIN_LOG" "^/up-(elf|small)" "a denied upload reached the origin whole"

# ---- sizes around the sniffed 4 KiB, both ways, both framings
SEED=${SEED:-$RANDOM}
info "sizes: seed $SEED"
mapfile -t SIZES < <(python3 -c "
import random
r = random.Random($SEED)
print('\n'.join(map(str, [1, 64, 4095, 4096, 4097, 8193, 70000] +
                          [r.randrange(64, 20000) for _ in range(3)])))")
deny0=$(metric_value proxyd_content_total 'service="up",action="deny"')
ndeny=0
for n in "${SIZES[@]}"; do
    head -c "$n" "$T/www/text.bin" >"$T/www/t$n.bin"
    head -c "$n" "$T/www/prog.bin" >"$T/www/e$n.bin"
    for path in "/t$n.bin" "/chunked/t$n.bin"; do
        r=$(get up "$path" "$T/o")
        assert_eq "$r" "0 200 $n" "text of $n bytes: GET $path"
        same "$T/o" "$T/www/t$n.bin" "text of $n bytes: GET $path"
    done
    for mode in "" chunked; do
        r=$(post up "/ut$n-$mode" "$T/www/t$n.bin" $mode)
        assert_eq "$r" "0 200" "text of $n bytes: upload $mode"
        origin_got "/ut$n-$mode" "$T/www/t$n.bin" || fail "text of $n bytes: the origin did not get the upload ($mode) whole"
    done
    ((n >= 64)) || continue
    for path in "/e$n.bin" "/chunked/e$n.bin"; do
        r=$(get up "$path" "$T/o")
        assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "ELF of $n bytes: GET $path"
        assert_no_grep "$T/o" "ELF" "ELF of $n bytes: GET $path: no byte of it"
    done
    for mode in "" chunked; do
        r=$(post up "/ue$n-$mode" "$T/www/e$n.bin" $mode)
        assert_eq "$r" "0 403" "ELF of $n bytes: upload $mode"
    done
    ndeny=$((ndeny + 4))
done
assert_no_grep "$ORIGIN_LOG" "^/ue" "a denied upload reached the origin whole"
assert_metric eq proxyd_content_total 'service="up",action="deny"' $((deny0 + ndeny))

# ---- first match wins; no rule, no sniffing
r=$(get order /prog.bin "$T/o")
assert_eq "$r" "0 200 $(stat -c %s "$T/www/prog.bin")" "order: the ELF accepted by the first rule"
same "$T/o" "$T/www/prog.bin" "order: ELF"
r=$(get order /data.bin "$T/o")
assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "order: gzip denied by application/*"
assert_log "http-content type=application/gzip action=deny rule=$(re "$RULE_ORDER2") direction=download"
r=$(get plain /prog.bin "$T/o")
assert_eq "$r" "0 200 $(stat -c %s "$T/www/prog.bin")" "plain: no <content>, the ELF passes"
same "$T/o" "$T/www/prog.bin" "plain: ELF"
assert_no_grep "$PROXYD_LOG" "http-content .*service=plain|service=plain.*http-content" "plain sniffed"

# ---- an HTTP/2 client: its streams are transactions of the connection's
# session, judged as an HTTP/1.1 client's (their lines name the stream)
h2get() { # PATH OUT: "curl-rc http-code bytes"
    local rc=0 r
    r=$(curl -sS --max-time 20 --http2-prior-knowledge -o "$2" \
        -w '%{http_code} %{size_download}' "http://127.0.0.1:$PORT_h2$1" 2>>"$T/curl.err") || rc=$?
    echo "$rc $r"
}
for path in /prog.bin /chunked/prog.bin; do
    r=$(h2get "$path" "$T/o")
    assert_eq "$r" "0 403 $(stat -c %s "$T/o")" "h2: ELF $path: a 403 page"
    assert_grep "$T/o" "file type not allowed: application/x-executable" "h2: the page names the type"
    assert_no_grep "$T/o" "ELF" "h2: no byte of the ELF reached the client"
done
assert_log "http-content type=application/x-executable action=deny rule=$(re "$(rule_of h2 1)") direction=download sniffed=4096 proto=h2 stream=1$"
assert_log "path=/chunked/prog\.bin status=403 .*verdict=deny .*proto=h2 stream=1$"
r=$(h2get /text.bin "$T/o")
assert_eq "$r" "0 200 $(stat -c %s "$T/www/text.bin")" "h2: text"
same "$T/o" "$T/www/text.bin" "h2: text"
r=$(curl -sS --max-time 20 --http2-prior-knowledge -o "$T/post.out" -w '%{http_code}' \
    --data-binary @"$T/www/prog.bin" "http://127.0.0.1:$PORT_h2/h2-up-elf" 2>>"$T/curl.err") || true
assert_eq "$r" "403" "h2: ELF upload"
assert_grep "$T/post.out" "file type not allowed: application/x-executable" "h2: ELF upload's page"
assert_log "http-content type=application/x-executable action=deny .* direction=upload sniffed=4096 proto=h2 stream=1$"
assert_no_grep "$ORIGIN_LOG" "^/h2-up-elf" "h2: a denied upload reached the origin whole"

# ---- counters (every body above judged once)
assert_metric eq proxyd_content_total 'service="web",action="deny"' 3
assert_metric eq proxyd_content_total 'service="web",action="accept"' 2
assert_metric eq proxyd_content_total 'service="up",action="deny"' $((4 + ndeny))
# (the chunked text, two text uploads and the origin's "ok" to each; then
# per size: two downloads, two uploads and their "ok"s)
assert_metric eq proxyd_content_total 'service="up",action="accept"' $((5 + 6 * ${#SIZES[@]}))
assert_metric eq proxyd_content_total 'service="order",action="deny"' 1
assert_metric eq proxyd_content_total 'service="order",action="accept"' 1
info "ok"
