#!/usr/bin/env bash
# http analyser: one raw-socket case per smuggling / ambiguity rule of
# issue 4. Each bad request is followed, in the same write, by a second
# request for /smuggled: proxyd must answer the exact status, log
# http-error with the reason, close, and the recording origin must never see
# /smuggled (nor the bad request, when the head is what is bad). Responses:
# a scripted origin sends ambiguous framing; the client gets 502 (or a cut
# connection once a response head went out), never the smuggled response.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3 curl
setup

ORIG_LOG=$T/origin.jsonl
start_origin ORIG "$ORIG_LOG" empty
mkdir -p "$T/raw"
RAW_LOG=$T/raw-origin.jsonl
start_origin RAWO "$RAW_LOG" raw "$T/raw"
free_port P_REQ
free_port P_RESP
write_proxyd_conf
write_http_service smug "$P_REQ" "$ORIG" \
    '<http><limits max-line="1k" max-url="512" max-header-bytes="4k"/></http>'
write_http_service smugresp "$P_RESP" "$RAWO" '<http/>'
start_proxyd

SMUG='GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n'
pass=0
failed=()

# req_case NAME STATUS REASON_REGEX DATA [ORIGIN_MAY_SEE_HEAD=no]
req_case() {
    local name=$1 st=$2 why=$3 data=$4 head_ok=${5:-no} before res n_orig
    local re="http-error status=$st reason=\"$why"
    before=$(log_count "$re")
    n_orig=$(wc -l <"$ORIG_LOG")
    res=$(raw_send "$P_REQ" "$data$SMUG" --timeout 3 --out "$T/resp.$name")
    info "$name: $res"
    local ok=1 msg=""
    if [[ $res != "statuses=$st "* ]]; then
        ok=0 msg+=" client got '$res', expected status $st;"
    fi
    if [[ $res != *"closed=yes"* ]]; then
        ok=0 msg+=" connection not closed;"
    fi
    local deadline=$(($(date +%s%N) + 2000000000))
    until (($(log_count "$re") > before)); do
        if (($(date +%s%N) > deadline)); then
            ok=0 msg+=" no new log line /$re/;"
            break
        fi
        sleep 0.05
    done
    sleep 0.1
    if tail -n +"$((n_orig + 1))" "$ORIG_LOG" | grep '/smuggled' >/dev/null; then
        ok=0 msg+=" ORIGIN SAW THE SMUGGLED REQUEST;"
    fi
    if [[ $head_ok == no ]] && (($(wc -l <"$ORIG_LOG") > n_orig)); then
        ok=0 msg+=" origin saw a request: $(tail -n 1 "$ORIG_LOG" | cut -c1-120);"
    fi
    if ((ok)); then
        pass=$((pass + 1))
    else
        echo "CASE FAILED [$name]:$msg" >&2
        failed+=("$name")
    fi
}

# positive controls: the harness sees a good request and a pipelined one
res=$(raw_send "$P_REQ" "GET /ok1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
[[ $res == "statuses=200 closed=yes"* ]] || fail "control request: $res"
grep -q '"/ok1"' "$ORIG_LOG" || fail "origin did not record the control request"
res=$(raw_send "$P_REQ" "POST /ok2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello${SMUG%\\r\\n\\r\\n}\r\nConnection: close\r\n\r\n")
[[ $res == "statuses=200,200 closed=yes"* ]] || fail "pipelined control: $res"
grep -q '"/smuggled"' "$ORIG_LOG" || fail "control: origin did not see the pipelined request"
: >"$ORIG_LOG"

H='Host: a\r\n'
req_case cl_te 400 'both Content-Length and Transfer-Encoding' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
req_case te_cl 400 'both Content-Length and Transfer-Encoding' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
req_case cl_differ 400 'duplicate Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 40\r\n\r\nhello"
req_case cl_same 400 'duplicate Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"
req_case cl_list 400 'malformed Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 5, 5\r\n\r\nhello"
req_case cl_plus 400 'malformed Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: +5\r\n\r\nhello"
req_case cl_hex 400 'malformed Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 0x5\r\n\r\nhello"
req_case cl_space 400 'malformed Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 5 5\r\n\r\nhello"
req_case cl_neg 400 'malformed Content-Length' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\nhello"
req_case cl_overflow 400 'Content-Length overflow' \
    "POST /a HTTP/1.1\r\n${H}Content-Length: 99999999999999999999\r\n\r\nhello"
req_case te_gzip 400 'Transfer-Encoding does not end in chunked' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n"
req_case te_chunked_gzip 400 'Transfer-Encoding after chunked' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"
req_case te_twice 400 'Transfer-Encoding after chunked' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"
req_case te_two_headers 400 'Transfer-Encoding after chunked' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
req_case te_junk 400 'malformed Transfer-Encoding' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: x@y, chunked\r\n\r\n0\r\n\r\n"
req_case obs_fold 400 'obsolete line folding' \
    "GET /a HTTP/1.1\r\n${H}X-A: b\r\n c\r\n\r\n"
req_case obs_fold_te 400 'obsolete line folding' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\tchunked\r\n\r\n0\r\n\r\n"
req_case ws_colon 400 'whitespace before colon' \
    "POST /a HTTP/1.1\r\n${H}Content-Length : 5\r\n\r\nhello"
req_case tab_colon 400 'whitespace before colon' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n"
req_case bad_name 400 'invalid character in header name' \
    "GET /a HTTP/1.1\r\n${H}X@A: b\r\n\r\n"
req_case bad_name_8bit 400 'invalid character in header name' \
    "GET /a HTTP/1.1\r\n${H}X\xe9: b\r\n\r\n"
req_case empty_name 400 'empty header name' \
    "GET /a HTTP/1.1\r\n${H}: b\r\n\r\n"
req_case bare_cr 400 'bare CR' \
    "GET /a HTTP/1.1\r\n${H}X-A: b\rc\r\n\r\n"
req_case bare_cr_line 400 'bare CR' \
    "GET /a HTTP/1.1\r${H}\r\n"
req_case bare_lf 400 'bare LF' \
    "GET /a HTTP/1.1\r\n${H}X-A: b\nContent-Length: 5\r\n\r\nhello"
req_case bare_lf_end 400 'bare LF' \
    "GET /a HTTP/1.1\r\n${H}\n"
req_case nul_value 400 'invalid character in header value' \
    "GET /a HTTP/1.1\r\n${H}X-A: b\x00c\r\n\r\n"
req_case ctl_value 400 'invalid character in header value' \
    "GET /a HTTP/1.1\r\n${H}X-A: b\x7fc\r\n\r\n"
req_case nul_target 400 'malformed request target' \
    "GET /a\x00b HTTP/1.1\r\n${H}\r\n"
req_case bad_method 400 'malformed method' \
    "G(T /a HTTP/1.1\r\n${H}\r\n"
req_case bad_version 400 'malformed HTTP version' \
    "GET /a HTTP/1.x\r\n${H}\r\n"
req_case http2_version 505 'HTTP version not supported' \
    "GET /a HTTP/2.0\r\n${H}\r\n"
req_case no_host 400 'missing Host' \
    "GET /a HTTP/1.1\r\n\r\n"
req_case two_hosts 400 'duplicate Host' \
    "GET /a HTTP/1.1\r\n${H}Host: b\r\n\r\n"
req_case extra_space 400 'empty request target' \
    "GET  /a HTTP/1.1\r\n${H}\r\n"
req_case http10_te 400 'Transfer-Encoding in an HTTP/1.0 request' \
    "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
long=$(printf 'a%.0s' $(seq 1 600))
req_case long_url 414 'URI too long' "GET /$long HTTP/1.1\r\n${H}\r\n"
long=$(printf 'A%.0s' $(seq 1 600))
req_case long_request_line 414 'request line too long' "$long /$(printf 'b%.0s' $(seq 1 450)) HTTP/1.1\r\n${H}\r\n"
long=$(printf 'a%.0s' $(seq 1 1100))
req_case long_header_line 431 'header line too long' "GET /a HTTP/1.1\r\n${H}X-Long: $long\r\n\r\n"
# over 4k in fewer lines than max-header-lines (100): more lines are
# refused as the 101st comes (http_heads.sh)
long=$(printf 'X-Filler: %s-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\r\\n' $(seq 1000 1080))
req_case long_head 431 'request head over max-header-bytes' "GET /a HTTP/1.1\r\n${H}${long}\r\n"
# Body framing errors: the head went to the origin already (that is
# allowed); the client must still get a 400 and nothing after the body.
req_case chunk_overflow 400 'chunk size overflow' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n" yes
# leading zeros are allowed (http_framing.sh): only the value overflows
req_case chunk_overflow_zeros 400 'chunk size overflow' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n00001000000000000000\r\nhello\r\n0\r\n\r\n" yes
req_case chunk_junk 400 'junk after chunk size' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5x\r\nhello\r\n0\r\n\r\n" yes
req_case chunk_space 400 'junk after chunk size' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n" yes
req_case chunk_nosize 400 'malformed chunk size' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n;x\r\nhello\r\n0\r\n\r\n" yes
req_case chunk_long_data 400 'chunk data longer than its size' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n" yes
req_case chunk_bare_lf 400 'junk after chunk size' \
    "POST /a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n" yes

info "request cases: $pass passed, ${#failed[@]} failed: ${failed[*]:-none}"
bad=$(http_counter bad_request)
info "bad_request counter: $bad"

# ---------------------------------------------------------------- responses
SMUGR='HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED'
resp_case() { # NAME RAW_RESPONSE  (502 if no head went out yet)
    local name=$1 raw=$2 res
    python3 -c 'import codecs,sys; sys.stdout.buffer.write(codecs.decode(sys.argv[1], "unicode_escape").encode("latin1"))' \
        "$raw$SMUGR" >"$T/raw/$name"
    res=$(raw_send "$P_RESP" "GET /$name HTTP/1.1\r\nHost: a\r\n\r\nGET /$name HTTP/1.1\r\nHost: a\r\n\r\n" \
        --timeout 3 --out "$T/resp.$name")
    info "response $name: $res"
    local ok=1 msg=""
    if grep -q SMUGGLED "$T/resp.$name"; then
        ok=0 msg+=" CLIENT GOT THE SMUGGLED RESPONSE;"
    fi
    if [[ $res != "statuses=502 "* && $res != *"reset=yes"* ]]; then
        ok=0 msg+=" expected 502 or a reset, got '$res';"
    fi
    if [[ $res == "statuses=502 "* ]] && [[ $res != *"closed=yes"* ]]; then
        ok=0 msg+=" not closed after the 502;"
    fi
    if ((ok)); then
        pass=$((pass + 1))
    else
        echo "CASE FAILED [response $name]:$msg" >&2
        failed+=("response:$name")
    fi
}
resp_case r_cl_te 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
resp_case r_cl_differ 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello'
resp_case r_cl_malformed 'HTTP/1.1 200 OK\r\nContent-Length: +0\r\n\r\n'
resp_case r_te_gzip 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 0\r\n\r\n'
resp_case r_te_twice 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n'
resp_case r_obs_fold 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-A: b\r\n c\r\n\r\n'
resp_case r_ws_colon 'HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n'
resp_case r_bare_lf 'HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n'
resp_case r_bare_cr 'HTTP/1.1 200 OK\r\nX-A: a\rContent-Length: 0\r\n\r\n'
resp_case r_nul 'HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n'
resp_case r_bad_status 'HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n'
resp_case r_chunk_overflow 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n\r\n0\r\n\r\n'
resp_case r_chunk_junk 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x\r\n\r\n'
resp_case r_chunk_long 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n'
# the first response's own data is SMUGGLED head... a 101 nobody asked for
resp_case r_101 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'
wait_grep "$PROXYD_LOG" 'http-bad-response reason="both Content-Length and Transfer-Encoding"' "$ASYNC_WAIT" ||
    fail "no http-bad-response log line for the CL+TE response"
assert_metric ge proxyd_analyser_events_total 'event="bad_response"' 10
assert_metric ge proxyd_analyser_events_total 'event="bad_request"' 40
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "$pass cases passed, ${#failed[@]} failed: ${failed[*]:-none}"
((${#failed[@]} == 0)) || fail "cases failed: ${failed[*]}"
info "PASS"
