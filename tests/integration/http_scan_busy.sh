#!/usr/bin/env bash
# Scans waiting for a scanner connection (icap max-connections) are
# bounded by the scanner's timeout, not by the client's: 30 concurrent
# scanned downloads through one worker and max-connections="2" to a
# scanner that takes half a second a body (icap_fake.py "slow"): 7.5 s of
# queue in all, past the service's request-timeout="3s" and
# response-timeout="3s".
#  - scanner timeout="30s": every download arrives whole (200, its
#    sha256), none failed closed; 30 uploads (PUT, with curl's Expect:
#    100-continue, to scan_origin.py) likewise all reach the server and
#    get its 200: their wait for the verdict is not the server's
#    response-timeout (it gave 504s and resets);
#  - scanner timeout="2s" (shorter than the queue): the scans that waited
#    longer fail as the scanner's fault, on-error="block": 502, logged
#    http-scan verdict=error reason="scanner-busy: ..." and counted
#    error; those served in time are whole, and one that got its
#    connection late still has the whole timeout for its answer (none
#    fails as "no answer within 2000ms (waiting for the verdict)", as
#    they did when the queue's wait counted against it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds curl nginx python3 sha256sum
setup
make_file 16k.bin 16K
start_nginx
start_scan_origin

FAKE_LOG=$T/fake.log
: >"$FAKE_LOG"
free_port FAKE_PORT
python3 "$LIB_DIR/icap_fake.py" "$FAKE_PORT" "$FAKE_LOG" 2>>"$T/fake.err" &
track_pid $!
wait_listen "$FAKE_PORT" 5 || fail "icap_fake.py did not start"

write_proxyd_conf 'buffer="64k"' "<scanners>
    <icap name=\"slow\" url=\"icap://127.0.0.1:$FAKE_PORT/slow\" timeout=\"30s\" max-connections=\"2\"/>
    <icap name=\"slow-short\" url=\"icap://127.0.0.1:$FAKE_PORT/slow\" timeout=\"2s\" max-connections=\"2\"/>
  </scanners>"
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
free_port PORT_long
free_port PORT_short
free_port PORT_up
LIM='<http><limits request-timeout="3s" response-timeout="3s"/></http>'
write_http_service long "$PORT_long" "$NGINX_PORT" "$LIM <scan scanner=\"slow\"/>"
write_http_service short "$PORT_short" "$NGINX_PORT" "$LIM <scan scanner=\"slow-short\"/>"
write_http_service up "$PORT_up" "$ORIGIN" "$LIM <scan scanner=\"slow\"/>"
start_proxyd
WANT=$(sha256_of "$T/www/16k.bin")
pids=()

# many PORT NAME: 30 downloads at once; one "code sha256" line each in
# $T/NAME.N.res
many() {
    local i pids=()
    for ((i = 0; i < 30; i++)); do
        (
            code=$(curl -sS --max-time 50 -o "$T/$2.$i" -w '%{http_code}' \
                "http://127.0.0.1:$1/16k.bin" 2>>"$T/curl.err") || code="curl-$?"
            echo "$code $(sha256sum <"$T/$2.$i" | cut -d' ' -f1)" >"$T/$2.$i.res"
        ) &
        pids+=($!)
        track_pid $!
    done
    for i in "${pids[@]}"; do wait_exit "$i" 60 || fail "a download of $2 did not end"; done
}

many "$PORT_long" long
ok=$(cat "$T"/long.*.res | grep -c "^200 $WANT\$" || true)
info "timeout=30s: $ok of 30 whole; others: $(cat "$T"/long.*.res | grep -v "^200 $WANT\$" | cut -d' ' -f1 | sort | uniq -c | tr '\n' ' ')"
assert_eq "$ok" 30 "downloads whole while their scans queued for 7.5 s (scanner timeout 30s, request/response-timeout 3s)"
assert_no_grep "$PROXYD_LOG" 'http-scan verdict=error' "a queued scan failed"

# the same queue for uploads (PUT, held until their verdict while the
# server waits for their end)
for ((i = 0; i < 30; i++)); do
    (
        code=$(curl -sS --max-time 50 -o /dev/null -w '%{http_code}' -T "$T/www/16k.bin" \
            "http://127.0.0.1:$PORT_up/up-$i.bin" 2>>"$T/curl.err") || code="curl-$?"
        echo "$code" >"$T/up.$i.res"
    ) &
    pids+=($!)
    track_pid $!
done
for p in "${pids[@]}"; do wait_exit "$p" 60 || fail "an upload did not end"; done
ok=$(cat "$T"/up.*.res | grep -c '^200$' || true)
info "uploads, timeout=30s: $ok of 30 done; others: $(cat "$T"/up.*.res | grep -v '^200$' | sort | uniq -c | tr '\n' ' ')"
assert_eq "$ok" 30 "uploads done while their scans queued for 7.5 s (scanner timeout 30s, request/response-timeout 3s)"
assert_eq "$(grep -c '^/up-' "$T/origin.log" || true)" 30 "uploads the server received whole"

many "$PORT_short" short
ok=$(cat "$T"/short.*.res | grep -c "^200 $WANT\$" || true)
busy=$(cat "$T"/short.*.res | grep -c '^502 ' || true)
info "timeout=2s: $ok whole, $busy refused (502)"
assert_eq "$((ok + busy))" 30 "downloads either whole or refused with 502"
assert_ge "$busy" 1 "scans refused as the scanner's queue outlasted its timeout"
assert_ge "$ok" 2 "scans served within the scanner's timeout"
assert_log 'http-scan verdict=error reason="scanner-busy: no scanner connection free within 2000ms \(max-connections 2\)" scanner=slow-short direction=download on-error=block'
assert_metric eq proxyd_scan_total 'service="short",scanner="slow-short",verdict="error"' "$busy"
# (a scan that got its connection late has the whole timeout for its
# answer: none failed as a silent scanner)
assert_no_grep "$PROXYD_LOG" 'http-scan verdict=error reason="no answer' "a scan failed for a wait that was the queue's"
info "ok"
