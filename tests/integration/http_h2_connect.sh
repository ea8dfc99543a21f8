#!/usr/bin/env bash
# CONNECT over HTTP/2 (RFC 9113 8.5, issue 29) in forward mode, h2c and h2
# by ALPN on terminate, with python3-h2 as the client (h2_connect.py) and
# small python origins: 1 MiB each way through an echo (sha256 both ways,
# so both directions' flow control is exercised), END_STREAM reaching the
# origin as a FIN with its answer still coming back (half-close), the
# origin's FIN ending the stream with END_STREAM, an origin's TCP reset
# as RST_STREAM(CONNECT_ERROR), a port the policy refuses answered 403 on
# its stream (its early DATA never read as a request) while another
# tunnel on the connection goes on, a client's RST_STREAM ending its
# leg and server connection, malformed CONNECTs reset with
# PROTOCOL_ERROR, the http-request line with method=CONNECT proto=h2.
# Resets cross as resets (RFC 9113 8.5): the client's RST_STREAM
# (CANCEL, CONNECT_ERROR) reaches the origin as a TCP RST (ECONNRESET in
# its read, not a FIN), and the origin's TCP RST after the client's
# END_STREAM is RST_STREAM(CONNECT_ERROR), not END_STREAM.
# RFC 8441: a WebSocket over an extended CONNECT to a python WebSocket
# origin (handshake checked there, frames echoed), offered in SETTINGS
# only where <upgrade> accepts websocket, :protocol refused elsewhere, an
# origin answering 200 instead of 101 resetting the stream, a client's
# own sec-websocket-key dropped (the origin sees one key, proxyd's).
# Also: a response complete before its request body (413 over max-body)
# is followed by RST_STREAM(NO_ERROR) (RFC 9113 8.1) once the client sent
# 2 MiB more.
# Issue 36: a CONNECT stream (and an extended CONNECT) is a transaction of
# its connection's session, its tunnel inside the engine, its
# http-request line at the
# stream's end (verdict=reset reset=CODE for one the client reset). 10 MiB
# each way through an echo with a 16 KiB client window and a slow reader:
# intact, and proxyd's peak RSS grows by far less (flow control end to
# end). A WebSocket over an extended CONNECT to python3-websockets' server.
# The client's last 4 MiB and END_STREAM after the origin's FIN (the
# stream closes at once) reach an origin that reads slowly through a small
# buffer whole, sha256 checked there (a CONNECT and an extended CONNECT);
# the origin's last MiB and FIN wait for the client's shut window, then
# END_STREAM, or a reset at idle-timeout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds python3 openssl
setup
/usr/bin/python3 -c 'import h2' 2>/dev/null || skip "python3-h2 missing"
/usr/bin/python3 -c 'import websockets' 2>/dev/null || skip "python3-websockets missing"
CLIENT="/usr/bin/python3 $LIB_DIR/h2_connect.py"
SIZE=$((1024 * 1024))

# The origins: one port per behaviour, a thread per connection.
cat >"$T/origins.py" <<'EOF'
import hashlib, socket, struct, sys, threading, time

def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            return
        c.sendall(d)

def half(c):
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d)
        n += len(d)
    c.sendall(b"got %d sha=%s\n" % (n, h.hexdigest().encode()))

def close(c):
    c.sendall(b"hello from origin\n")
    c.shutdown(socket.SHUT_WR)
    while c.recv(65536):
        pass

def reset(c):
    c.recv(1)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

def watch(c):
    """An echo that records how its client's side ended: fin or reset."""
    end = "fin"
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
    except (ConnectionResetError, BrokenPipeError):
        # EPIPE: a send after the peer's RST.
        end = "reset"
    except socket.timeout:
        end = "timeout"
    with open(WATCH_LOG, "a") as log:
        log.write("end=%s\n" % end)

def finreset(c):
    """Reads to EOF, then resets."""
    while c.recv(65536):
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

def ws(c):
    """A WebSocket server (RFC 6455): the handshake checked, each frame
    from the client unmasked and sent back, a close answered and ended."""
    import base64
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            return
        head += d
    head, buf = head.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    f = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    keys = [l for l in lines[1:] if l.split(":", 1)[0].strip().lower() == "sec-websocket-key"]
    with open(WS_LOG, "a") as log:
        log.write("request=%s upgrade=%s connection=%s key_len=%d version=%s keys=%d client_key=%d\n" % (
            lines[0], f.get("upgrade"), f.get("connection"),
            len(base64.b64decode(f.get("sec-websocket-key", ""))), f.get("sec-websocket-version"),
            len(keys), f.get("sec-websocket-key") == CLIENT_KEY))
    # RFC 6455 11.3.1: the key appears once.
    if f.get("upgrade", "").lower() != "websocket" or len(keys) != 1:
        c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        return
    acc = base64.b64encode(hashlib.sha1(f["sec-websocket-key"].encode() +
                           b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d:
                raise EOFError
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    while True:
        try:
            b0, b1 = need(2)
        except EOFError:
            return
        except ConnectionResetError:
            with open(WS_LOG, "a") as log:
                log.write("ws_end=reset\n")
            return
        n = b1 & 0x7f
        if n == 126:
            n = int.from_bytes(need(2), "big")
        elif n == 127:
            n = int.from_bytes(need(8), "big")
        if not b1 & 0x80:
            return      # a client's frames are masked
        mask = need(4)
        data = bytes(x ^ mask[i % 4] for i, x in enumerate(need(n)))
        hdr = bytes([b0]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")
                             if n < 65536 else bytes([127]) + n.to_bytes(8, "big"))
        c.sendall(hdr + data)
        if b0 & 0x0f == 8:
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
            return

def plain(c):
    """An origin that ignores Upgrade: 200 to the GET."""
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            return
        head += d
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

def small(c):
    """An echo whose socket buffers are small (set on its listener): what
    it cannot take must wait in its client, not in the kernel."""
    echo(c)

def wsfinslow(c):
    """finslow behind a WebSocket handshake (its 101 first)."""
    import base64
    head = b""
    while b"\r\n\r\n" not in head:
        head += c.recv(1)
    key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")
           if l.lower().startswith(b"sec-websocket-key:")][0]
    acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    finslow(c)

def finslow(c):
    """Greets and shuts its side first, then reads its client's bytes
    slowly through a small buffer: what it got, once at EOF, to
    WATCH_LOG.last."""
    c.sendall(b"bye\n")
    c.shutdown(socket.SHUT_WR)
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(8192)
        if not d:
            break
        h.update(d)
        n += len(d)
        time.sleep(0.001)
    with open(WATCH_LOG + ".last", "a") as log:
        log.write("got %d sha=%s\n" % (n, h.hexdigest()))

FLOOD = bytes(range(256)) * 4096

def flood(c):
    """A MiB, its FIN, then reads to EOF."""
    c.sendall(FLOOD)
    c.shutdown(socket.SHUT_WR)
    while c.recv(65536):
        pass

def serve(port, fn):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fn in (small, finslow, wsfinslow):
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    srv.settimeout(120)
    def one(c):
        c.settimeout(30)
        try:
            fn(c)
        except OSError as e:
            sys.stderr.write("%s: %r\n" % (fn.__name__, e))
        finally:
            c.close()
    for _ in range(32):
        try:
            c, _ = srv.accept()
        except socket.timeout:
            return
        threading.Thread(target=one, args=(c,), daemon=True).start()

def wsreal(port):
    """python3-websockets' server: each message echoed."""
    import asyncio
    import websockets

    async def echo(ws, path=None):
        async for m in ws:
            await ws.send(m)

    async def main():
        async with websockets.serve(echo, "127.0.0.1", port, max_size=None):
            await asyncio.sleep(300)
    asyncio.run(main())

WS_LOG, WATCH_LOG, CLIENT_KEY = sys.argv[1:4]
ports = [int(p) for p in sys.argv[4:]]
for port, fn in zip(ports, (echo, half, close, reset, ws, plain, watch, finreset, small)):
    threading.Thread(target=serve, args=(port, fn), daemon=True).start()
threading.Thread(target=wsreal, args=(ports[9],), daemon=True).start()
threading.Thread(target=serve, args=(ports[10], finslow), daemon=True).start()
threading.Thread(target=serve, args=(ports[11], flood), daemon=True).start()
threading.Thread(target=serve, args=(ports[12], wsfinslow), daemon=True).start()
threading.Event().wait(300)
EOF
free_port O_ECHO
free_port O_HALF
free_port O_CLOSE
free_port O_RESET
free_port O_WS
free_port O_PLAIN
free_port O_WATCH
free_port O_FINRST
free_port O_SMALL
free_port O_WSREAL
free_port O_LAST
free_port O_FLOOD
free_port O_WSLAST
WS_LOG=$T/ws.log
WATCH_LOG=$T/watch.log
: >"$WATCH_LOG"
CLIENT_KEY=dGhlIHNhbXBsZSBub25jZQ==
/usr/bin/python3 "$T/origins.py" "$WS_LOG" "$WATCH_LOG" "$CLIENT_KEY" "$O_ECHO" "$O_HALF" "$O_CLOSE" \
    "$O_RESET" "$O_WS" "$O_PLAIN" "$O_WATCH" "$O_FINRST" "$O_SMALL" "$O_WSREAL" "$O_LAST" "$O_FLOOD" "$O_WSLAST" 2>>"$T/origins.err" &
track_pid $!
for p in "$O_ECHO" "$O_HALF" "$O_CLOSE" "$O_RESET" "$O_WS" "$O_PLAIN" "$O_WATCH" "$O_FINRST" "$O_SMALL" "$O_WSREAL" "$O_LAST" "$O_FLOOD" "$O_WSLAST"; do
    wait_listen "$p" 5 || fail "origin on $p did not start"
done
free_port DENIED

P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth

POL="<http h2=\"yes\" h2c=\"yes\">
  <limits max-body=\"4k\"/>
  <request method=\"CONNECT\" ports=\"$O_ECHO $O_HALF $O_CLOSE $O_RESET $O_WATCH $O_FINRST $O_SMALL $O_LAST $O_FLOOD\" action=\"accept\"/>
  <request method=\"CONNECT\" action=\"deny\" status=\"403\"/>
</http>"
free_port PF
free_port PT
free_port PW
free_port PP
free_port PR
free_port PL
free_port PX
write_proxyd_conf 'idle-timeout="2s"'
write_http_service ws "$PW" "$O_WS" '<http h2c="yes"><upgrade protocols="websocket" action="accept"/></http>'
write_http_service plain "$PP" "$O_PLAIN" '<http h2c="yes"><upgrade protocols="websocket" action="accept"/></http>'
write_http_service wsreal "$PR" "$O_WSREAL" '<http h2c="yes"><upgrade protocols="websocket" action="accept"/></http>'
write_http_service wslast "$PX" "$O_WSLAST" '<http h2c="yes"><upgrade protocols="websocket" action="accept"/></http>'
write_http_service fwd "$PF" 0 "$POL" forward
# A service that sniffs bodies (<content>): its streams are transactions
# too (they were legs until its scan ran per transaction), a CONNECT's
# tunnel in the engine, not sniffed (a tunnel has no message body).
write_http_service fwdleg "$PL" 0 "$POL
  <content type=\"text/*\" action=\"accept\"/>" forward
write_http_service fwdtls "$PT" 0 "$POL
  <tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"/>" forward
start_proxyd
tun0=$(http_counter tunnels)
A=127.0.0.1

# echo_through NAME SIZE CLIENT-ARGS...: SIZE bytes each way through a
# tunnel to an echo (CLIENT-ARGS: --port ... echo --to ...), intact, the
# origin's FIN after ours ending the stream.
echo_through() {
    local name=$1 size=$2 up
    shift 2
    $CLIENT "$@" --size "$size" >"$T/$name.out" 2>&1 || fail "$name client: $(cat "$T/$name.out")"
    up=$(sed -n 's/^up_sha=//p' "$T/$name.out")
    assert_grep "$T/$name.out" '^status=200$' "$name: the tunnel's 200"
    assert_grep "$T/$name.out" "^down_sha=$up down_bytes=$size$" "$name: the echo's bytes, whole and in order"
    assert_grep "$T/$name.out" '^ended=1 reset=None$' "$name: END_STREAM after the echo's FIN"
}

# watch_end N WHAT: the watching origin's (N+1)th end, once written (10 s).
watch_end() {
    for _ in $(seq 200); do
        (($(wc -l <"$WATCH_LOG") > $1)) && break
        sleep 0.05
    done
    assert_eq "$(sed -n "$(($1 + 1))p" "$WATCH_LOG")" "end=reset" "$2: ECONNRESET at the origin, not a FIN"
}

info "h2c: 1 MiB each way through a tunnel to an echo; a refused port on the same connection"
$CLIENT --port "$PF" echo --to "$A:$O_ECHO" --size "$SIZE" --deny "$A:$DENIED" >"$T/echo.out" 2>&1 ||
    fail "echo client: $(cat "$T/echo.out")"
cat "$T/echo.out"
up=$(sed -n 's/^up_sha=//p' "$T/echo.out")
assert_grep "$T/echo.out" '^status=200$' "the tunnel's 200"
assert_grep "$T/echo.out" "^down_sha=$up down_bytes=$SIZE$" "the echo's bytes, whole and in order"
assert_grep "$T/echo.out" '^ended=1 reset=None$' "the origin's close after our END_STREAM ends the stream"
assert_grep "$T/echo.out" '^denied_status=403 denied_ended=1 denied_reset=NO_ERROR$' "403 for a port the policy refuses, as an h2 response, then RST_STREAM(NO_ERROR)"
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=CONNECT host=127\.0\.0\.1 .* status=200 .* verdict=accept server=127\.0\.0\.1:$O_ECHO .* proto=h2 stream=1$"
assert_log "http-request .* method=CONNECT host=127\.0\.0\.1 .* status=403 .* verdict=deny .* proto=h2 stream=3$"
assert_no_grep "$PROXYD_LOG" 'smuggled' "a refused CONNECT's DATA are never read as a request"
assert_metric ge proxyd_analyser_events_total 'event="tunnels"' $((tun0 + 1))

info "10 MiB each way through an echo with small socket buffers, a 16 KiB client window and a slow reader: intact, proxyd's memory bounded"
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$PROXYD_PID/status"; }
hwm0=$(hwm)
BIG=$((10 * SIZE))
echo_through big "$BIG" --port "$PF" --timeout 25 --window 16384 --read-delay 0.0005 echo --to "$A:$O_SMALL"
hwm1=$(hwm)
info "peak RSS ${hwm0} kB -> ${hwm1} kB"
if http_sanitized; then
    info "sanitizer build: its quarantine keeps freed memory, RSS not asserted"
else
    assert_lt $((hwm1 - hwm0)) 4096 "proxyd's peak RSS grew by less than 4 MiB for 10 MiB each way"
fi

info "half-close: END_STREAM reaches the origin as a FIN, its answer still comes"
$CLIENT --port "$PF" half --to "$A:$O_HALF" --size "$SIZE" >"$T/half.out" 2>&1 ||
    fail "half client: $(cat "$T/half.out")"
up=$(sed -n 's/^up_sha=//p' "$T/half.out")
assert_grep "$T/half.out" '^status=200$' "half: 200"
assert_grep "$T/half.out" "^answer=got $SIZE sha=$up$" "the origin got every byte, then the FIN"
assert_grep "$T/half.out" '^ended=1 reset=None$' "half: END_STREAM after the answer"
$CLIENT --port "$PF" half --to "$A:$O_HALF" --size 1000 >"$T/half1.out" 2>&1 ||
    fail "half client (one write): $(cat "$T/half1.out")"
up=$(sed -n 's/^up_sha=//p' "$T/half1.out")
assert_grep "$T/half1.out" "^answer=got 1000 sha=$up$" "DATA and END_STREAM read with the HEADERS reach the origin"
assert_grep "$T/half1.out" '^ended=1 reset=None$' "half, one write: END_STREAM after the answer"

info "the origin's FIN ends the stream (END_STREAM) while ours is still open"
$CLIENT --port "$PF" close --to "$A:$O_CLOSE" >"$T/close.out" 2>&1 ||
    fail "close client: $(cat "$T/close.out")"
assert_grep "$T/close.out" '^status=200$' "close: 200"
assert_grep "$T/close.out" '^got=hello from origin$' "close: the greeting"
assert_grep "$T/close.out" '^ended=1$' "close: END_STREAM from the origin's FIN"
assert_grep "$T/close.out" '^end_sent=1 reset=None$' "close: our own END_STREAM closes it cleanly"

info "the client's last 4 MiB and END_STREAM after the origin's FIN, the origin reading slowly: every byte reaches it before its FIN"
LAST=$((4 * SIZE))
$CLIENT --port "$PF" last --to "$A:$O_LAST" --size "$LAST" >"$T/last.out" 2>&1 ||
    fail "last client: $(cat "$T/last.out")"
assert_grep "$T/last.out" '^got=bye$' "last: the greeting"
assert_grep "$T/last.out" '^end_sent=1 reset=None$' "last: our END_STREAM closes the stream cleanly"
up=$(sed -n 's/^up_sha=//p' "$T/last.out")
for _ in $(seq 200); do
    [[ -s $WATCH_LOG.last ]] && break
    sleep 0.05
done
assert_eq "$(cat "$WATCH_LOG.last" 2>/dev/null)" "got $LAST sha=$up" "last: the origin got every byte, then the FIN"
assert_log "http-request .* method=CONNECT .* status=200 to-server=$LAST .* verdict=accept server=127\.0\.0\.1:$O_LAST .*proto=h2 stream=1$"
info "the same over an extended CONNECT (a WebSocket)"
$CLIENT --port "$PX" last --to "$A:$O_WSLAST" --size "$LAST" --path /last >"$T/wslast.out" 2>&1 ||
    fail "wslast client: $(cat "$T/wslast.out")"
assert_grep "$T/wslast.out" '^got=bye$' "wslast: the greeting"
assert_grep "$T/wslast.out" '^end_sent=1 reset=None$' "wslast: our END_STREAM closes the stream cleanly"
up=$(sed -n 's/^up_sha=//p' "$T/wslast.out")
for _ in $(seq 200); do
    (($(wc -l <"$WATCH_LOG.last") > 1)) && break
    sleep 0.05
done
assert_eq "$(sed -n 2p "$WATCH_LOG.last")" "got $LAST sha=$up" "wslast: the origin got every byte, then the FIN"

info "the origin's last MiB and FIN under the client's shut window: END_STREAM after all of it once it opens, a reset at idle-timeout if it never does"
flood_sha=$(/usr/bin/python3 -c 'import hashlib; print(hashlib.sha256(bytes(range(256)) * 4096).hexdigest())')
$CLIENT --port "$PF" --window 16384 --hold 1 flood --to "$A:$O_FLOOD" >"$T/flood.out" 2>&1 ||
    fail "flood client: $(cat "$T/flood.out")"
assert_grep "$T/flood.out" "^down_sha=$flood_sha down_bytes=$SIZE$" "flood: every byte once the window opens"
assert_grep "$T/flood.out" '^ended=1 reset=None ' "flood: END_STREAM after them"
$CLIENT --port "$PF" --timeout 8 --window 16384 --hold 30 flood --to "$A:$O_FLOOD" >"$T/flood2.out" 2>&1 ||
    fail "flood client (shut): $(cat "$T/flood2.out")"
assert_grep "$T/flood2.out" '^ended=0 reset=CANCEL after=[2-4]\.' "flood: a window shut for idle-timeout resets the stream"

info "the origin resets its TCP connection: RST_STREAM(CONNECT_ERROR)"
$CLIENT --port "$PF" reset --to "$A:$O_RESET" >"$T/reset.out" 2>&1 ||
    fail "reset client: $(cat "$T/reset.out")"
assert_grep "$T/reset.out" '^status=200$' "reset: 200"
assert_grep "$T/reset.out" '^ended=0 reset=CONNECT_ERROR$' "reset: CONNECT_ERROR"

info "the client resets a tunnel mid-transfer: its origin gets a TCP RST, the connection goes on"
n=$(wc -l <"$WATCH_LOG")
$CLIENT --port "$PF" cancel --to "$A:$O_WATCH" --size "$SIZE" >"$T/cancel.out" 2>&1 ||
    fail "cancel client: $(cat "$T/cancel.out")"
assert_grep "$T/cancel.out" '^status=200 got_before_reset=1$' "cancel: the tunnel ran"
assert_grep "$T/cancel.out" '^second=200 after the reset ended=1$' "cancel: another tunnel on the connection"
# The stream's own line, written at its end: no leg, no session of its own.
assert_log "http-request client=127\.0\.0\.1:[0-9]+ method=CONNECT .* status=200 .* verdict=reset server=127\.0\.0\.1:$O_WATCH .* reset=CANCEL proto=h2 stream=1$"
for _ in $(seq 200); do # 10 s: both tunnels' ends
    (($(wc -l <"$WATCH_LOG") >= n + 2)) && break
    sleep 0.05
done
assert_eq "$(sed -n "$((n + 1)),\$p" "$WATCH_LOG" | sort | tr '\n' ' ')" "end=fin end=reset " \
    "cancel: the reset one's origin saw ECONNRESET mid-transfer, the next one's a FIN"

for code in CANCEL CONNECT_ERROR; do
    info "the client's RST_STREAM($code) reaches the origin as a TCP RST"
    n=$(wc -l <"$WATCH_LOG")
    $CLIENT --port "$PF" rst --to "$A:$O_WATCH" --code "$code" >"$T/rst.out" 2>&1 ||
        fail "rst client: $(cat "$T/rst.out")"
    assert_grep "$T/rst.out" '^status=200 echoed=1000 pong=1$' "rst $code: the tunnel ran, the reset was read"
    watch_end "$n" "RST_STREAM($code)"
done
assert_log "http-request .* method=CONNECT .* status=200 .* verdict=reset server=127\.0\.0\.1:$O_WATCH .* reset=CONNECT_ERROR proto=h2 stream=1$"

info "a tunnel quiet for idle-timeout is reset: RST_STREAM(CONNECT_ERROR), its origin a TCP RST"
n=$(wc -l <"$WATCH_LOG")
$CLIENT --port "$PF" idle --to "$A:$O_WATCH" >"$T/idle.out" 2>&1 ||
    fail "idle client: $(cat "$T/idle.out")"
cat "$T/idle.out"
assert_grep "$T/idle.out" '^status=200 echoed=100 ended=0 reset=CONNECT_ERROR$' "idle: CONNECT_ERROR"
after=$(sed -n 's/^after=\([0-9]*\)\..*/\1/p' "$T/idle.out")
assert_lt "$after" 6 "idle: reset within two periods of idle-timeout"
watch_end "$n" idle

info "tunnels reset while their legs connect or just after: the connection goes on"
$CLIENT --port "$PF" earlyrst --to "$A:$O_ECHO" --count 20 >"$T/earlyrst.out" 2>&1 ||
    fail "earlyrst client: $(cat "$T/earlyrst.out")"
assert_grep "$T/earlyrst.out" '^final=200 still here ended=1$' "earlyrst: a tunnel after 20 reset ones"
proc_alive "$PROXYD_PID" || fail "proxyd died under early resets"

info "the origin resets after the client's END_STREAM: RST_STREAM(CONNECT_ERROR), not END_STREAM"
$CLIENT --port "$PF" finreset --to "$A:$O_FINRST" >"$T/finrst.out" 2>&1 ||
    fail "finreset client: $(cat "$T/finrst.out")"
assert_grep "$T/finrst.out" '^status=200$' "finreset: 200"
assert_grep "$T/finrst.out" '^ended=0 reset=CONNECT_ERROR$' "finreset: the reset after our FIN is CONNECT_ERROR"

info "malformed CONNECTs: PROTOCOL_ERROR on their streams, the connection goes on"
$CLIENT --port "$PF" malformed --to "$A:$O_ECHO" >"$T/bad.out" 2>&1 ||
    fail "malformed client: $(cat "$T/bad.out")"
assert_grep "$T/bad.out" '^with_path=PROTOCOL_ERROR no_authority=PROTOCOL_ERROR good=200$' "malformed CONNECT"

info "a service that sniffs bodies: a CONNECT there is a transaction too, its tunnel relayed"
echo_through leg "$SIZE" --port "$PL" echo --to "$A:$O_ECHO"
assert_log "http-request .* method=CONNECT .* server=127\.0\.0\.1:$O_ECHO .* proto=h2 stream=1$"

info "h2 by ALPN on a terminating listener: the same tunnel"
echo_through tls "$SIZE" --port "$PT" --tls "$P/ca.pem" echo --to "$A:$O_ECHO"

# ws_echo PORT ORIGIN_PORT SIZE NAME: a WebSocket through service PORT to
# the origin: its 101 as a 200, frames echoed, the close ending the
# stream, the stream's line (status=101, no leg).
ws_echo() {
    $CLIENT --port "$1" ws --to "$A:$2" --size "$3" >"$T/$4.out" 2>&1 ||
        fail "ws client ($4): $(cat "$T/$4.out")"
    cat "$T/$4.out"
    assert_grep "$T/$4.out" '^enable_connect_protocol=1$' "$4: SETTINGS_ENABLE_CONNECT_PROTOCOL where websocket is accepted"
    assert_grep "$T/$4.out" '^status=200 reset=None$' "$4: the origin's 101 as a 200"
    assert_grep "$T/$4.out" '^frames=1,2,8$' "$4: text, binary and close frames back"
    assert_grep "$T/$4.out" '^echoed=1$' "$4: the frames' payloads intact"
    assert_grep "$T/$4.out" '^ended=1 reset=None rest=0$' "$4: the close ends the stream"
    assert_log "http-request .* method=GET host=127\.0\.0\.1 path=/chat status=101 .* verdict=accept server=127\.0\.0\.1:$2 .* proto=h2 stream=1$"
}

info "RFC 8441: a WebSocket over an extended CONNECT, offered only where <upgrade> accepts it"
ws_echo "$PW" "$O_WS" 200000 ws
assert_grep "$WS_LOG" '^request=GET /chat HTTP/1\.1 upgrade=websocket connection=[Uu]pgrade key_len=16 version=13 keys=1 client_key=0$' "an HTTP/1.1 Upgrade handshake at the origin"
info "RFC 8441: the client's own sec-websocket-key is dropped, the origin sees proxyd's only"
$CLIENT --port "$PW" ws --to "$A:$O_WS" --size 1000 --key "$CLIENT_KEY" >"$T/ws-key.out" 2>&1 ||
    fail "ws client (key): $(cat "$T/ws-key.out")"
assert_grep "$T/ws-key.out" '^status=200 reset=None$' "with a client's key: 101 as 200"
assert_grep "$T/ws-key.out" '^echoed=1$' "with a client's key: frames echoed"
assert_eq "$(tail -n 1 "$WS_LOG" | sed -n 's/.* \(keys=[0-9]* client_key=[0-9]*\)$/\1/p')" "keys=1 client_key=0" \
    "one Sec-WebSocket-Key at the origin, not the client's"
info "RFC 8441: the client's RST_STREAM on a WebSocket reaches its origin as a TCP RST"
$CLIENT --port "$PW" ws --to "$A:$O_WS" --size 1000 --reset >"$T/ws-rst.out" 2>&1 ||
    fail "ws client (reset): $(cat "$T/ws-rst.out")"
assert_grep "$T/ws-rst.out" '^echoes=2 reset_sent=1 pong=1$' "ws reset: the frames came back, the reset was read"
for _ in $(seq 200); do # 10 s
    grep -q '^ws_end=reset$' "$WS_LOG" && break
    sleep 0.05
done
assert_grep "$WS_LOG" '^ws_end=reset$' "ws reset: ECONNRESET at the WebSocket origin"
assert_log "http-request .* method=GET .* path=/chat status=101 .* verdict=reset .* reset=CANCEL proto=h2 stream=1$"
$CLIENT --port "$PF" ws --to "$A:$O_WS" --size 10 >"$T/ws-off.out" 2>&1 ||
    fail "ws client (off): $(cat "$T/ws-off.out")"
assert_grep "$T/ws-off.out" '^enable_connect_protocol=0$' "no extended CONNECT without <upgrade>"
assert_grep "$T/ws-off.out" '^status=None reset=PROTOCOL_ERROR$' ":protocol refused where not offered"
# An origin that answers the GET with a 200: no 200 the client would take
# for the tunnel.
$CLIENT --port "$PP" ws --to "$A:$O_PLAIN" --size 10 >"$T/ws-plain.out" 2>&1 ||
    fail "ws client (plain origin): $(cat "$T/ws-plain.out")"
assert_grep "$T/ws-plain.out" '^status=None reset=INTERNAL_ERROR$' "a 200 instead of a 101 resets the stream"

info "RFC 8441: a WebSocket over an extended CONNECT to python3-websockets' server"
ws_echo "$PR" "$O_WSREAL" 300000 wsreal

info "a response complete before its request body: RST_STREAM(NO_ERROR) once 2 MiB more were dropped"
# (a smaller rest is read and dropped: curl 7.88 fails a transfer reset
# so; http_h2.sh's 413s with curl are that case)
$CLIENT --port "$PF" early --to "$A:$O_ECHO" --path /up --size $((32 * SIZE)) --timeout 20 >"$T/early.out" 2>&1 ||
    fail "early client: $(cat "$T/early.out")"
cat "$T/early.out"
assert_grep "$T/early.out" '^status=413 ended=1 reset=NO_ERROR$' "413, END_STREAM, then RST_STREAM(NO_ERROR)"
sent=$(sed -n 's/^sent=//p' "$T/early.out")
assert_lt "$sent" $((8 * SIZE)) "the client stopped well before the end of its body"

http_done
