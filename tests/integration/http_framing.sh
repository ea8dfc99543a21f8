#!/usr/bin/env bash
# http analyser: the framing that reaches the origin is canonical or refused
# (issue 15, RFC 9110 / 9112). A recording origin (http_raw.py) logs every
# request it parses, its bytes as received included; each case asserts on
# the status the client got, the http-error/http-bad-response line, and
# what the origin got (or that it got nothing). A scripted origin sends
# responses for the response cases. Each case prints a ROW line: the
# request and what reached the origin (for the issue's before/after table).
#   Content-Length sent on in decimal without leading zeros (007 -> 7);
#   a list "5, 5" stays refused. Field names with '_' dropped (passed with
#   underscore-headers="pass"); one that reads as a framing or hop-by-hop
#   field with '_' for '-' refused (400 / 502). Transfer-Encoding other
#   than chunked: 501 (502 for a response) unless transfer-codings= lists
#   it; then sent on as one canonical field. Trailers parsed as fields,
#   dropped (trailers="pass": passed); a malformed one: 400 (request) or a
#   cut response. Host and an absolute-form authority: uri-host [":" port],
#   else 400. Chunk sizes with leading zeros accepted and sent on
#   canonical; one CRLF before a request line skipped; absolute-form in
#   fixed mode (its authority is the Host the origin gets) and in forward
#   mode (the authority replaces the client's Host). max-line and
#   max-header-bytes applied as bytes arrive: 414 / 431 / 502 at once, not
#   at request-timeout or when the server closes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup

ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" empty
mkdir -p "$T/raw"
RAW_LOG=$T/raw-origin.jsonl
start_origin RAWO "$RAW_LOG" raw "$T/raw"
HOLD_LOG=$T/hold-origin.jsonl
start_origin HOLDO "$HOLD_LOG" raw "$T/raw" 8
free_port PD
free_port PP
free_port PR
free_port PRP
free_port PH
free_port PF
free_port PL
free_port PHL
write_proxyd_conf
LIM='<limits max-line="1k" max-header-bytes="4k" request-timeout="10s"/>'
write_http_service dflt "$PD" "$ORIG" "<http>$LIM</http>"
write_http_service perm "$PP" "$ORIG" \
    "<http underscore-headers=\"pass\" trailers=\"pass\" transfer-codings=\"gzip\">$LIM</http>"
write_http_service resp "$PR" "$RAWO" "<http>$LIM</http>"
write_http_service respp "$PRP" "$RAWO" \
    "<http trailers=\"pass\" transfer-codings=\"gzip\">$LIM</http>"
write_http_service hold "$PH" "$HOLDO" "<http>$LIM</http>"
write_http_service fwd "$PF" 0 "<http>$LIM</http>" forward
# the default limits (max-line 8k, max-header-bytes 32k, request-timeout 10s)
write_http_service plain "$PL" "$ORIG" '<http/>'
write_http_service holdd "$PHL" "$HOLDO" '<http/>'
start_proxyd

H='Host: a\r\n'
CL='Connection: close\r\n'

# origin LOG TARGET EXPR: EXPR (python, over rec and h: its headers by
# lower-case name) for the last record of TARGET, or NONE
origin() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
log, target, expr = sys.argv[1:4]
rec = None
for ln in open(log):
    r = json.loads(ln)
    if r.get("target") == target:
        rec = r
if rec is None:
    print("NONE")
else:
    h = {n.lower(): v for n, v in rec["headers"]}
    v = eval(expr, {"rec": rec, "h": h})
    print(repr(v) if isinstance(v, str) and ("\r" in v or "\n" in v) else v)
EOF
}

# send PORT NAME DATA [TIMEOUT=3]: RES is raw_send's line, MS how long it took
send() {
    local t0
    t0=$(now_ms)
    RES=$(raw_send "$1" "$3" --timeout "${4:-3}" --out "$T/resp.$2")
    MS=$(($(now_ms) - t0))
}

# sentinel PORT: a good request through the same service, answered: an
# earlier request that was forwarded is in the origin's log by then
SENT=0
sentinel() {
    SENT=$((SENT + 1))
    local r
    r=$(raw_send "$1" "GET /sentinel$SENT HTTP/1.1\r\n$H$CL\r\n")
    [[ $r == "statuses=200 "* ]] || fail "sentinel $SENT on port $1: $r"
}

row() { echo "ROW|$1|$2|$3"; }
expect_status() { # NAME WANT
    check [ "${RES%% *}" = "statuses=$2" ] "$1: client got '$RES', wanted $2"
}
expect_log() { # NAME REGEX
    check wait_grep "$PROXYD_LOG" "$2" "$ASYNC_WAIT" "$1: no log line /$2/"
}
has() { [[ $1 == *"$2"* ]]; }
not() { ! "$@"; }
expect_eq() { # NAME GOT WANT WHAT
    check [ "$2" = "$3" ] "$1: $4: got '$2', wanted '$3'"
}

# ------------------------------------------------------------ requests

# Content-Length in canonical decimal
send "$PD" cl_zeros "POST /cl HTTP/1.1\r\n${H}Content-Length: 007\r\n$CL\r\nabcdefg"
expect_status cl_zeros 200
o=$(origin "$ORIG_LOG" /cl "h.get('content-length'), rec['body']")
row cl_zeros "Content-Length: 007 + 7 bytes" "$o"
expect_eq cl_zeros "$o" "('7', 'abcdefg')" "origin's Content-Length and body"

send "$PD" cl_list "POST /cllist HTTP/1.1\r\n${H}Content-Length: 5, 5\r\n\r\nhello"
expect_status cl_list 400
expect_log cl_list 'http-error status=400 reason="malformed Content-Length"'
sentinel "$PD"
o=$(origin "$ORIG_LOG" /cllist "rec['raw']")
row cl_list "Content-Length: 5, 5 (refused, as before)" "$o"
expect_eq cl_list "$o" NONE "origin"

# '_' in names
send "$PD" us_drop "GET /us HTTP/1.1\r\n${H}X_Auth_User: admin\r\nX-Ok: 1\r\n$CL\r\n"
expect_status us_drop 200
o=$(origin "$ORIG_LOG" /us "'x_auth_user' in h, h.get('x-ok')")
row us_drop "X_Auth_User: admin" "$o"
expect_eq us_drop "$o" "(False, '1')" "X_Auth_User dropped, X-Ok kept"
send "$PP" us_pass "GET /usp HTTP/1.1\r\n${H}X_Auth_User: admin\r\n$CL\r\n"
expect_status us_pass 200
o=$(origin "$ORIG_LOG" /usp "h.get('x_auth_user')")
row us_pass "X_Auth_User: admin, underscore-headers=pass" "$o"
expect_eq us_pass "$o" admin "X_Auth_User with underscore-headers=pass"
for port in "$PD" "$PP"; do
    send "$port" us_te "POST /ust HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer_Encoding: chunked\r\n\r\nhello"
    expect_status "us_te:$port" 400
    send "$port" us_cl "POST /usc HTTP/1.1\r\n${H}Content_Length: 5\r\n\r\nhello"
    expect_status "us_cl:$port" 400
    send "$port" us_proxy "GET /usx HTTP/1.1\r\n${H}Proxy_Authorization: x\r\n\r\n"
    expect_status "us_proxy:$port" 400
    sentinel "$port"
done
expect_log us_te "http-error status=400 reason=\"'_' in a framing header name\""
o=$(origin "$ORIG_LOG" /ust "rec['raw']"; origin "$ORIG_LOG" /usc "rec['raw']"; origin "$ORIG_LOG" /usx "rec['raw']")
row us_framing "Content-Length: 5 + Transfer_Encoding: chunked; Content_Length: 5; Proxy_Authorization" "$(echo $o)"
expect_eq us_framing "$(echo $o)" "NONE NONE NONE" "origin"

# Transfer-Encoding: chunked only, unless listed
send "$PD" te_gzip "POST /teg HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
expect_status te_gzip 501
expect_log te_gzip 'http-error status=501 reason="transfer coding not allowed"'
send "$PD" te_unknown "POST /teu HTTP/1.1\r\n${H}Transfer-Encoding: unknown, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
expect_status te_unknown 501
send "$PP" te_unknown_p "POST /teup HTTP/1.1\r\n${H}Transfer-Encoding: unknown\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
expect_status te_unknown_p 501
sentinel "$PD"
sentinel "$PP"
o="$(origin "$ORIG_LOG" /teg "rec['raw']") $(origin "$ORIG_LOG" /teu "rec['raw']") $(origin "$ORIG_LOG" /teup "rec['raw']")"
row te_other "TE: gzip, chunked / unknown, chunked (and unknown listed on the permissive service)" "$o"
expect_eq te_other "$o" "NONE NONE NONE" "origin"
send "$PP" te_gzip_ok "POST /tegok HTTP/1.1\r\n${H}Transfer-Encoding: GZIP\r\nTransfer-Encoding: chunked\r\n$CL\r\n5\r\nhello\r\n0\r\n\r\n"
expect_status te_gzip_ok 200
o=$(origin "$ORIG_LOG" /tegok "[v for n, v in rec['headers'] if n.lower() == 'transfer-encoding']")
row te_listed "TE: GZIP + TE: chunked, transfer-codings=gzip" "$o"
expect_eq te_listed "$o" "['gzip, chunked']" "one canonical Transfer-Encoding"

# trailers
TRB='5\r\nhello\r\n0\r\nX-Sum: 42\r\nContent-Length: 9\r\n\r\n'
send "$PD" tr_drop "POST /tr HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n$CL\r\n$TRB"
expect_status tr_drop 200
o=$(origin "$ORIG_LOG" /tr "rec['trailers'], rec['raw'].split('\r\n\r\n', 1)[1]")
row tr_drop "chunked, trailers X-Sum: 42, Content-Length: 9" "$o"
expect_eq tr_drop "$o" "([], '5\\r\\nhello\\r\\n0\\r\\n\\r\\n')" "trailers dropped"
send "$PP" tr_pass "POST /trp HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n$CL\r\n$TRB"
expect_status tr_pass 200
o=$(origin "$ORIG_LOG" /trp "rec['trailers']")
row tr_pass "same, trailers=pass" "$o"
expect_eq tr_pass "$o" "[['X-Sum', '42']]" "trailers passed, but never Content-Length"
for bad in 'bad trailer' 'X : 1' 'Transfer_Encoding: chunked' 'X: a\x01b'; do
    send "$PP" tr_bad "POST /trbad HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n$bad\r\n\r\n"
    expect_status "tr_bad:$bad" 400
    check has "$RES" closed=yes "tr_bad:$bad: connection not closed: $RES"
done
expect_log tr_bad 'http-error status=400 reason="malformed trailer section: whitespace before colon"'
sentinel "$PP"
o=$(origin "$ORIG_LOG" /trbad "rec['raw']")
row tr_bad "trailer 'bad trailer' / 'X : 1' / Transfer_Encoding / a CTL, trailers=pass" "$o"
expect_eq tr_bad "$o" NONE "a complete request at the origin"

# Host and the authority: uri-host [":" port]
for host in 'caf\xc3\xa9.test' 'a b' '[zz]' 'a:8x' 'user@a' 'a/b'; do
    send "$PD" host_bad "GET /hb HTTP/1.1\r\nHost: $host\r\n\r\n"
    expect_status "host_bad:$host" 400
done
expect_log host_bad 'http-error status=400 reason="malformed Host"'
send "$PD" abs_bad "GET http://user@a/hb HTTP/1.1\r\n$H\r\n"
expect_status abs_bad 400
expect_log abs_bad 'http-error status=400 reason="malformed URI authority"'
sentinel "$PD"
o=$(origin "$ORIG_LOG" /hb "rec['raw']")
row host_bad "Host: caf\\xc3\\xa9.test / a b / [zz] / a:8x / user@a / a/b; GET http://user@a/hb" "$o"
expect_eq host_bad "$o" NONE "origin"

# chunk sizes with leading zeros: accepted, sent on canonical
send "$PD" chunk_zeros "POST /cz HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n$CL\r\n00000000000000000005;ext=1\r\nhello\r\n0000A\r\n0123456789\r\n000\r\n\r\n"
expect_status chunk_zeros 200
o=$(origin "$ORIG_LOG" /cz "rec['raw'].split('\r\n\r\n', 1)[1]")
row chunk_zeros "00000000000000000005;ext=1 / 0000A / 000" "$o"
expect_eq chunk_zeros "$o" "'5\\r\\nhello\\r\\na\\r\\n0123456789\\r\\n0\\r\\n\\r\\n'" "canonical chunks"

# one empty line before the request line
send "$PD" lead "\r\nGET /lead HTTP/1.1\r\n$H$CL\r\n"
expect_status lead 200
o=$(origin "$ORIG_LOG" /lead "rec['method']")
row lead_crlf "CRLF GET /lead" "$o"
expect_eq lead "$o" GET "origin"
send "$PD" lead2 "\r\n\r\nGET /lead2 HTTP/1.1\r\n$H$CL\r\n"
expect_status lead2 400
expect_log lead2 'http-error status=400 reason="empty first line"'
send "$PD" lead_pipe "POST /lp1 HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\nhi\r\nGET /lp2 HTTP/1.1\r\n$H$CL\r\n"
expect_status lead_pipe 200,200
o=$(origin "$ORIG_LOG" /lp2 "rec['method']")
expect_eq lead_pipe "$o" GET "the request after a body and a CRLF"

# absolute-form: fixed mode (the authority is the Host), forward mode
send "$PD" abs_fixed "GET http://www.example.test:8080/abs?q=1 HTTP/1.1\r\nHost: other.test\r\n$CL\r\n"
expect_status abs_fixed 200
o=$(origin "$ORIG_LOG" /abs?q=1 "[v for n, v in rec['headers'] if n.lower() == 'host']")
row abs_fixed "GET http://www.example.test:8080/abs?q=1, Host: other.test (fixed mode)" "$o"
expect_eq abs_fixed "$o" "['www.example.test:8080']" "Host at the origin"
send "$PF" abs_fwd "GET http://127.0.0.1:$ORIG/fwd HTTP/1.1\r\nHost: evil.test\r\n$CL\r\n"
expect_status abs_fwd 200
o=$(origin "$ORIG_LOG" /fwd "[v for n, v in rec['headers'] if n.lower() == 'host']")
row abs_fwd "GET http://127.0.0.1:ORIG/fwd, Host: evil.test (forward mode)" "$o"
expect_eq abs_fwd "$o" "['127.0.0.1:$ORIG']" "Host at the origin"

# max-line and max-header-bytes as bytes arrive (request-timeout is 10 s)
long=$(printf 'a%.0s' $(seq 1 20000))
send "$PL" line_414 "GET /$long" 5
expect_status line_414 414
check [ "$MS" -lt 2500 ] "line_414: answered after $MS ms"
expect_log line_414 'http-error status=414 reason="request line too long"'
row line_414 "GET /aaaa... (20 000 bytes, no LF; default limits)" "client: ${RES%% *} after $MS ms"
send "$PD" line_414_cap "GET /$long" 5
expect_status line_414_cap 414
row line_414_cap "the same with max-header-bytes=4k" "client: ${RES%% *} after $MS ms"
send "$PD" hline_431 "GET /h HTTP/1.1\r\n${H}X-Long: ${long:0:2000}" 5
expect_status hline_431 431
check [ "$MS" -lt 2500 ] "hline_431: answered after $MS ms"
expect_log hline_431 'http-error status=431 reason="header line too long"'
row hline_431 "a 2 000-byte header line, no LF" "client: ${RES%% *} after $MS ms"
fill=$(printf 'X-Filler-%s: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\r\\n' $(seq 100 180))
send "$PD" head_431 "GET /h HTTP/1.1\r\n$H$fill" 5
expect_status head_431 431
check [ "$MS" -lt 2500 ] "head_431: answered after $MS ms"
expect_log head_431 'http-error status=431 reason="request head over max-header-bytes"'
row head_431 "81 header lines (5 kB > 4k), no empty line" "client: ${RES%% *} after $MS ms"

# ------------------------------------------------------------ responses
# raw FILE ESCAPED: the bytes the scripted origin answers GET /FILE with
raw() {
    python3 -c 'import codecs,sys; sys.stdout.buffer.write(codecs.decode(sys.argv[1], "unicode_escape").encode("latin1"))' \
        "$2" >"$T/raw/$1"
}
# rsend PORT NAME: GET /NAME, the response in $T/resp.NAME
rsend() { send "$1" "$2" "GET /$2 HTTP/1.1\r\n$H$CL\r\n" "${3:-3}"; }
resp() { python3 -c 'import sys; print(repr(open(sys.argv[1], "rb").read().decode("latin1")))' "$T/resp.$1"; }

raw r_status_long "HTTP/1.1 200 $long"
rsend "$PHL" r_status_long 5
expect_status r_status_long 502
check [ "$MS" -lt 2500 ] "r_status_long: answered after $MS ms"
expect_log r_status_long 'http-bad-response reason="status line too long"'
expect_log r_status_long 'http-error status=502 reason="status line too long"'
row r_status_long "response: 'HTTP/1.1 200 aaa...' (20 000 bytes, no LF), server holds; default limits" "client: ${RES%% *} after $MS ms"
rsend "$PH" r_status_long 5
expect_status r_status_long_cap 502
row r_status_long_cap "the same with max-header-bytes=4k" "client: ${RES%% *} after $MS ms"
raw r_head_long "HTTP/1.1 200 OK\r\n$fill"
rsend "$PH" r_head_long 5
expect_status r_head_long 502
check [ "$MS" -lt 2500 ] "r_head_long: answered after $MS ms"
row r_head_long "response: 81 header lines, no empty line, server holds" "client: ${RES%% *} after $MS ms"
raw r_hline_long "HTTP/1.1 200 OK\r\nX-Long: ${long:0:2000}"
rsend "$PH" r_hline_long 5
expect_status r_hline_long 502
check [ "$MS" -lt 2500 ] "r_hline_long: answered after $MS ms"
expect_log r_hline_long 'http-bad-response reason="header line too long"'

raw r_cl_zeros 'HTTP/1.1 200 OK\r\nContent-Length: 005\r\n\r\nhello'
rsend "$PR" r_cl_zeros
expect_status r_cl_zeros 200
o=$(resp r_cl_zeros)
row r_cl_zeros "response Content-Length: 005" "client: $o"
check grep -q $'Content-Length: 5\r' "$T/resp.r_cl_zeros" "r_cl_zeros: client got $o"

raw r_us 'HTTP/1.1 200 OK\r\nX_Y: 1\r\nContent-Length: 2\r\n\r\nhi'
rsend "$PR" r_us
expect_status r_us 200
check not grep -q 'X_Y' "$T/resp.r_us" "r_us: X_Y reached the client"
raw r_us_cl 'HTTP/1.1 200 OK\r\nContent_Length: 5\r\nContent-Length: 2\r\n\r\nhi'
rsend "$PR" r_us_cl
expect_status r_us_cl 502
row r_us "response X_Y: 1 / Content_Length: 5" "client: $(resp r_us) / ${RES%% *}"

raw r_te_gzip 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n'
rsend "$PR" r_te_gzip
expect_status r_te_gzip 502
expect_log r_te_gzip 'http-bad-response reason="transfer coding not allowed"'
r1=${RES%% *}
rsend "$PRP" r_te_gzip
expect_status r_te_gzip_listed 200
check grep -q $'Transfer-Encoding: gzip, chunked\r' "$T/resp.r_te_gzip" "r_te_gzip listed: $(resp r_te_gzip)"
row r_te_gzip "response TE: gzip, chunked (default / transfer-codings=gzip)" "client: $r1 / $(resp r_te_gzip)"

raw r_trailers 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n002\r\nhi\r\n0\r\nX-Sum: 1\r\nSet-Cookie: a=b\r\n\r\n'
rsend "$PR" r_trailers
expect_status r_trailers 200
o1=$(resp r_trailers)
check grep -q $'\r\n\r\n2\r\nhi\r\n0\r\n\r\n$' "$T/resp.r_trailers" "r_trailers: client got $o1"
rsend "$PRP" r_trailers
expect_status r_trailers_pass 200
o2=$(resp r_trailers)
check grep -q $'\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 1\r\n\r\n$' "$T/resp.r_trailers" "r_trailers pass: client got $o2"
row r_trailers "response chunk 002, trailers X-Sum, Set-Cookie (drop / pass)" "client: $o1 / $o2"

raw r_trailer_bad 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nbad trailer\r\n\r\n'
rsend "$PRP" r_trailer_bad
check has "$RES" reset=yes "r_trailer_bad: the client was not reset: $RES"
check not grep -q 'bad trailer' "$T/resp.r_trailer_bad" "r_trailer_bad: the trailer reached the client"
expect_log r_trailer_bad 'http-bad-response reason="malformed trailer section: whitespace before colon"'
row r_trailer_bad "response trailer 'bad trailer', trailers=pass" "client: $RES"

proc_alive "$PROXYD_PID" || fail "proxyd died"
http_done
