#!/usr/bin/env bash
# A scanned upload whose client stops halfway through its body is ended
# by response-timeout: that timer waits out only the verdict of an upload
# whose body has ended (the scanner's timeout bounds that wait), not a
# body that never ends. idle-timeout is off here, so nothing else would
# end it: a PUT announcing 1000 bytes sends 500 and stalls; proxyd
# answers 504 (http-error status=504 reason="no response within
# response-timeout") and closes within a few response-timeouts
# (response-timeout="2s"), where it used to wait forever. A complete
# upload through the same service still passes (its verdict: the
# icap_fake.py "slow" scanner answers 204 half a second after the end).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
setup
start_origin ORIGIN "$T/origin.log" empty

FAKE_LOG=$T/fake.log
: >"$FAKE_LOG"
free_port FAKE_PORT
python3 "$LIB_DIR/icap_fake.py" "$FAKE_PORT" "$FAKE_LOG" 2>>"$T/fake.err" &
track_pid $!
wait_listen "$FAKE_PORT" 5 || fail "icap_fake.py did not start"

write_proxyd_conf 'buffer="64k" idle-timeout="0"' "<scanners>
    <icap name=\"slow\" url=\"icap://127.0.0.1:$FAKE_PORT/slow\" timeout=\"10s\"/>
  </scanners>"
free_port PORT
write_http_service scan "$PORT" "$ORIGIN" '<http><limits request-timeout="2s" response-timeout="2s"/></http>
  <scan scanner="slow" direction="upload"/>'
start_proxyd

# A whole upload: the verdict, then the origin's 200.
res=$(raw_send "$PORT" 'PUT /whole HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789' --timeout 10)
[[ $res == "statuses=200 closed=yes"* ]] || fail "a whole upload: $res"

# Half a body, then nothing: ended by response-timeout, not left open.
body=$(printf 'x%.0s' $(seq 500))
t0=$(date +%s%N)
res=$(raw_send "$PORT" "PUT /half HTTP/1.1\\r\\nHost: a\\r\\nContent-Length: 1000\\r\\n\\r\\n$body" --timeout 15)
ms=$((($(date +%s%N) - t0) / 1000000))
info "stalled upload: $res after ${ms} ms"
[[ $res == "statuses=504 closed=yes"* ]] || fail "a stalled upload: $res after ${ms} ms (want a 504 and the close)"
((ms < 10000)) || fail "a stalled upload ended after ${ms} ms"
wait_log_count 'http-error status=504 reason="no response within response-timeout"' 1
info "ok"
