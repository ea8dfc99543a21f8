#!/usr/bin/env bash
# A slow but steady HTTP/2 reader (issue 35) gets whole responses: three
# 1 MiB downloads on one h2c connection whose windows the client opens at
# about 80 KB/s each (tests/integration/h2_slow_reader.py), so each takes
# ~13 s while idle-timeout and request-timeout are 2 s and the leg's grace
# to flush a last reply is 5 s. Two keep their legs alive for another
# stream (nginx keep-alive or not: the leg's client decides); a third of
# 300 KB, asked with a request body so that its leg closes after it, is
# read at 20 KB/s: its leg has all of it long before the client does
# (~15 s, three times that grace). A fourth, also whole in its leg early,
# the client resets (CANCEL) after 100 KB: its line must say so
# (verdict=reset reset=CANCEL) and count what the client got, not the
# 300 KB the leg had written (before, status=200 to-client=300 KB and
# verdict=accept). The client reads
# within every timeout the whole time: every byte must arrive (sha256,
# END_STREAM, no RST_STREAM), and the http-request lines say status=200
# with to-client counting what the client was sent (the body and the head).
# Before the fix the streams ended in RST_STREAM(INTERNAL_ERROR) part way
# (the leg, waiting on the client's window, timed out) while the log said
# status=200 and the full size. Last, a client that keeps its window shut
# while sending PINGs, its stream cut by proxyd meanwhile (its gRPC
# deadline): the reset waits behind the response's bytes, and the stream
# is reset once held for idle-timeout, as a held stream is.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx
setup
/usr/bin/python3 -c 'import h2.connection' 2>/dev/null || skip "no python3-h2"

make_file big.bin 1M
mkdir -p "$T/www/close" "$T/www/body"
cp "$T/www/big.bin" "$T/www/close/big.bin"
head -c 300000 "$T/www/big.bin" >"$T/www/body/small.bin"
cp "$T/www/big.bin" "$T/www/grpc.bin"
cp "$T/www/body/small.bin" "$T/www/small.bin"
SHA=$(sha256_of "$T/www/big.bin")
SIZE=$(stat -c %s "$T/www/big.bin")
NGINX_EXTRA='location /close/ { keepalive_timeout 0; }'
start_nginx

free_port P_C
write_proxyd_conf 'idle-timeout="2s"'
write_http_service h2c "$P_C" "$NGINX_PORT" '<http h2c="yes">
  <h2 initial-window="64k"/>
  <limits request-timeout="2s"/>
</http>'
start_proxyd

RATE=80000 SMALL_RATE=20000
http_sanitized && RATE=200000
t0=$(now_ms)
/usr/bin/python3 "$LIB_DIR/h2_slow_reader.py" --port "$P_C" --rate "$RATE" --deadline 40 \
    /big.bin /close/big.bin "+/body/small.bin@$SMALL_RATE" "/small.bin%100000@50000" >"$T/slow.out" 2>"$T/slow.err" || fail "client: $(cat "$T/slow.err")"
info "$(($(now_ms) - t0)) ms: $(tr '\n' ';' <"$T/slow.out")"
SHA_SMALL=$(sha256_of "$T/www/body/small.bin")
for p in /big.bin /close/big.bin /body/small.bin; do
    line=$(grep -E "^path=\+?$p(@[0-9]+)? " "$T/slow.out") || fail "no result for $p"
    size=$SIZE sha=$SHA
    [[ $p == /body/small.bin ]] && size=300000 sha=$SHA_SMALL
    [[ $(kv "$line" status) == 200 ]] || fail "$p: status $(kv "$line" status)"
    [[ $(kv "$line" reset) == - ]] || fail "$p: reset $(kv "$line" reset) after $(kv "$line" bytes) of $size bytes"
    [[ $(kv "$line" bytes) == "$size" && $(kv "$line" sha256) == "$sha" ]] ||
        fail "$p: $(kv "$line" bytes) of $size bytes, sha $(kv "$line" sha256)"
    [[ $(kv "$line" ended) == 1 ]] || fail "$p: no END_STREAM"
    secs=$(kv "$line" seconds)
    ((${secs%.*} >= 4)) || fail "$p: took only $secs s: not slower than the timeouts, the test proves nothing"
    # to-client: what the leg gave the client, the body and its head
    wait_log_count "http-request .* path=$p status=200 .* proto=h2 stream=" 1
    tc=$(grep -E "http-request .* path=$p status=200 .* proto=h2 stream=" "$PROXYD_LOG" | tail -n 1 | sed -E 's/.* to-client=([0-9]+) .*/\1/')
    ((tc > size && tc < size + 1024)) || fail "$p: to-client=$tc, expected the body ($size) and its head"
    assert_log "http-request .* path=$p status=200 .* verdict=accept .* proto=h2 stream="
done
line=$(grep -E "^path=/small.bin%" "$T/slow.out") || fail "no result for the stream the client resets"
[[ $(kv "$line" reset) == CANCEL-by-client ]] || fail "the client could not reset /small.bin: $line"
got=$(kv "$line" bytes)
wait_log_count "http-request .* path=/small.bin " 1
rline=$(grep -E "http-request .* path=/small.bin " "$PROXYD_LOG" | tail -n 1)
[[ $rline == *" verdict=reset "*" reset=CANCEL "* ]] || fail "the reset stream's line does not say so: $rline"
tc=$(sed -E 's/.* to-client=([0-9]+) .*/\1/' <<<"$rline")
((tc >= got && tc < 300000)) || fail "reset stream: to-client=$tc, the client got $got of 300000 body bytes"
info "reset stream: client got $got bytes, the line says to-client=$tc"
assert_no_grep "$PROXYD_LOG" "path=/(big|close|body)/?[^ ]* .*verdict=reset|idle-timeout|flush timed out|does not read the reply" "no leg ended under a reading client"

# A stream whose client keeps its window shut (0, a PING every 0.3 s: the
# connection is never idle) and whose transaction proxyd cut meanwhile
# (its gRPC deadline, 300 ms, ran out after the head): the reset queued
# behind the response's bytes waits for the same window, so the stream is
# held, and reset (CANCEL) once held for idle-timeout as any held one is.
# Before, it counted as reset already and was never held: it kept its
# `buffer` of response bytes and its slot as long as the PINGs came.
/usr/bin/python3 - "$P_C" >"$T/deadline.out" 2>&1 <<'EOF' || fail "deadline client: $(cat "$T/deadline.out")"
import socket, sys, time
import h2.config, h2.connection, h2.events, h2.settings
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
c.send_headers(1, [(":method", "GET"), (":path", "/grpc.bin"), (":scheme", "http"),
                   (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
                   ("te", "trailers"), ("grpc-timeout", "300m")], end_stream=True)
s.sendall(c.data_to_send())
t0 = time.monotonic()
status, reset, ping = "-", "-", t0
s.settimeout(0.1)
while reset == "-" and time.monotonic() - t0 < 10:
    if time.monotonic() - ping >= 0.3:
        ping = time.monotonic()
        c.ping(b"stillhr!")
    out = c.data_to_send()
    if out:
        s.sendall(out)
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    if not data:
        break
    for ev in c.receive_data(data):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[b":status"].decode()
        elif isinstance(ev, h2.events.StreamReset):
            reset = "%s@%.1f" % (getattr(ev.error_code, "name", ev.error_code),
                                 time.monotonic() - t0)
print("status=%s reset=%s" % (status, reset))
EOF
info "a cut stream behind a shut window: $(cat "$T/deadline.out")"
assert_grep "$T/deadline.out" '^status=200 reset=CANCEL@[0-6]\.' "a cut stream behind a shut window is reset within idle-timeout"
assert_log 'http2-error kind=flow_control stream=1 detail="send window shut for longer than idle-timeout"'
info "PASS"
