#!/usr/bin/env bash
# A client that half-closes (shutdown(SHUT_WR)) is owed the responses to
# the requests it finished before: the origin answers /late 0.3 s after
# the request, so the half-close reaches proxyd first, every time.
#  - HTTP/1.1: one whole request, then the start of a second one, then
#    the half-close: the first response comes whole, then the close (a
#    FIN, no reset); the unfinished head is logged ("client closed inside
#    a request head") after the first request's line, by=client;
#  - HTTP/1.1: one whole request, then the half-close: answered, closed;
#  - HTTP/2 (h2c prior knowledge): a request with END_STREAM and one
#    whose body never comes, then the half-close: the first one's
#    response comes whole (DATA with END_STREAM), the other is reset
#    (CANCEL), GOAWAY (NO_ERROR) says no other stream is taken;
# each towards an HTTP/1.1 server (server-h2="no") and an HTTP/2 one
# (server-h2="yes"). A client whose request was cut (a head or a body
# unfinished at the half-close) gets nothing more for it: that is not
# this test's business.
# And a client that reads slowly (a 4 KB receive buffer) half-closes once
# its 8 MB response is all in proxyd (its http-request line is written),
# most of it still to be written: it gets all of it (buffer is 16m).
# And a client that pipelines two GETs, a 4 MB response and one its server
# cuts inside the body (closes, or resets, after half its Content-Length),
# reading nothing (a 4 KB receive buffer) until proxyd has met the cut
# (the second request's line is written): the first response, complete in
# proxyd, comes whole, then the second's bytes proxyd got, then a reset
# (by=server-fail, as for any cut); one that never reads is reset all the
# same once it took nothing for PX_FINISH_GRACE_MS (5 s).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds python3
/usr/bin/python3 -c 'import h2' 2>/dev/null || fail "Debian's python3-h2 is missing (scripts/deps)"
setup

mkdir -p "$T/raw"
printf '@@PAUSE@@HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello' >"$T/raw/late"
head -c 8M /dev/urandom >"$T/big.body"
{ printf 'HTTP/1.1 200 OK\r\nContent-Length: 8388608\r\n\r\n'; cat "$T/big.body"; } >"$T/raw/big"
start_origin H1O "$T/h1-origin.jsonl" raw "$T/raw"
free_port H2O
: >"$T/h2-origin.log"
/usr/bin/python3 "$LIB_DIR/h2_origin_server.py" "$H2O" "$T/h2-origin.log" \
    2>>"$T/h2-origin.err" &
track_pid $!
wait_listen "$H2O" 5 || fail "h2_origin_server.py did not start: $(cat "$T/h2-origin.err")"
# --- pipelined: a complete response, then one its server cuts
head -c 4M /dev/urandom >"$T/first.body"
start_py_server CUT <<PY
BODY = open("$T/first.body", "rb").read()
def handle(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        path = head.split(b" ")[1]
        if path == b"/first":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                      % len(BODY) + BODY)
            continue
        # half the body it announces, then a FIN (or a reset: /cut-rst)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" +
                  b"c" * 10000)
        if path == b"/cut-rst":
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))
        return
PY
free_port PN
free_port PY
free_port PC
write_proxyd_conf 'buffer="16m"'
write_http_service n "$PN" "$H1O" '<http h2c="yes" server-h2="no"/>'
write_http_service y "$PY" "$H2O" '<http h2c="yes" server-h2="yes"/>'
write_http_service cut "$PC" "$CUT" '<http server-h2="no"/>'
start_proxyd

# read_all(s) (from readall import read_all, PYTHONPATH=$T): what the
# socket s gives, read fast (a big receive buffer from then on), and how
# it ended: "yes" (a FIN), "reset", or "no" (its timeout ran out first)
cat >"$T/readall.py" <<'PY'
import socket
def read_all(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return got, "yes"
            got += d
    except ConnectionResetError:
        return got, "reset"
    except socket.timeout:
        return got, "no"
PY

# ends SVC N: the Nth session-end line of service SVC, waited for
ends() {
    wait_log_count "session-end service=$1 " "$2"
    grep "session-end service=$1 " "$PROXYD_LOG" | sed -n "${2}p"
}

# norm FILE: the response bytes without CRs, Via, and the reason phrase
# (none from an HTTP/2 server), names lower-cased
norm() {
    tr -d '\r' <"$1" | grep -aiv '^via:' | sed '1s/^\(HTTP\/1\.1 [0-9]*\).*/\1/' |
        tr 'A-Z' 'a-z' || true
}
WANT=$'http/1.1 200\ncontent-length: 5\n\nhello'
for svc in n y; do
    port=PN
    [[ $svc == y ]] && port=PY
    port=${!port}

    # --- a whole request, the start of the next, the half-close
    out=$(raw_send "$port" 'GET /late HTTP/1.1\r\nHost: a\r\n\r\nGET /next HT' \
        --half-close --out "$T/$svc.partial")
    info "$svc: partial next head, half-closed: $out"
    check test "${out% bytes=*}" = "statuses=200 closed=yes reset=no" \
        "$svc: partial next head: $out"
    check test "$(norm "$T/$svc.partial")" = "$WANT" \
        "$svc: partial next head: the first response is not whole: $(od -c "$T/$svc.partial" | tail -4)"
    line=$(ends "$svc" 1)
    check grep -q " by=client .*end=client-closed" <<<"$line" \
        "$svc: partial next head: want by=client end=client-closed: $line"
    # its lines in order: the request's, then the unfinished head's
    sid=$(sed -n 's/.*#\([0-9]*\) session-end.*/\1/p' <<<"$line")
    order=$(grep "#$sid " "$PROXYD_LOG" | grep -oE 'http-request .*path=/late status=200|http-error reason="[^"]*"|session-end' | tr '\n' '|' || true)
    check grep -qE '^http-request [^|]* path=/late status=200\|http-error reason="client closed inside a request head"\|session-end\|$' <<<"$order" \
        "$svc: partial next head: the log lines: $order"

    # --- a whole request, the half-close
    out=$(raw_send "$port" 'GET /late HTTP/1.1\r\nHost: a\r\n\r\n' \
        --half-close --out "$T/$svc.whole")
    info "$svc: whole request, half-closed: $out"
    check test "${out% bytes=*}" = "statuses=200 closed=yes reset=no" \
        "$svc: whole request: $out"
    check test "$(norm "$T/$svc.whole")" = "$WANT" \
        "$svc: whole request: the response is not whole: $(od -c "$T/$svc.whole" | tail -5)"
    line=$(ends "$svc" 2)
    check grep -q " by=client .*end=client-closed" <<<"$line" \
        "$svc: whole request: want by=client end=client-closed: $line"

    # --- HTTP/2: END_STREAM, then the half-close
    # (frames read with hyperframe: python-h2 drops what follows a GOAWAY)
    out=$(PYTHONPATH=$T /usr/bin/python3 - "$port" <<'PY'
import socket, sys
import hpack
from readall import read_all
from hyperframe.frame import (DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              RstStreamFrame, SettingsFrame)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
enc = hpack.Encoder()
hf = HeadersFrame(1, flags=["END_HEADERS", "END_STREAM"])
hf.data = enc.encode([(":method", "GET"), (":path", "/late"),
                      (":scheme", "http"), (":authority", "a")])
# stream 3: a body announced that never comes
hf3 = HeadersFrame(3, flags=["END_HEADERS"])
hf3.data = enc.encode([(":method", "POST"), (":path", "/late"),
                       (":scheme", "http"), (":authority", "a")])
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize() +
          hf.serialize() + hf3.serialize())
s.shutdown(socket.SHUT_WR)
got, closed = read_all(s)
dec = hpack.Decoder()
status, body, ended, other = "-", b"", False, []
while len(got) >= 9:
    f, n = Frame.parse_frame_header(memoryview(got[:9]))
    f.parse_body(memoryview(got[9:9 + n]))
    got = got[9 + n:]
    if isinstance(f, HeadersFrame):
        status = dict(dec.decode(f.data)).get(":status", "?")
    elif isinstance(f, DataFrame) and f.stream_id == 1:
        body += f.data
    elif isinstance(f, RstStreamFrame):
        other.append("reset%d=%d" % (f.stream_id, f.error_code))
    elif isinstance(f, GoAwayFrame):
        other.append("goaway=%d,last=%d" % (f.error_code, f.last_stream_id))
    elif f.stream_id == 3:
        other.append("stream3-%s" % type(f).__name__)
    if f.stream_id == 1 and "END_STREAM" in f.flags:
        ended = True
print("status=%s body=%s end-stream=%s closed=%s %s port=%d" % (
    status, body.decode("latin1"), ended, closed, ",".join(other),
    s.getsockname()[1]))
PY
)
    info "$svc: h2, END_STREAM, half-closed: $out"
    cport=${out##* port=}
    check test "${out% port=*}" = "status=200 body=hello end-stream=True closed=yes reset3=8,goaway=0,last=3" \
        "$svc: h2 client half-closed after END_STREAM: $out"
    # the connection's own end line (a stream's says stream=N first)
    wait_log_count "session-end service=$svc .* client=127\.0\.0\.1:$cport .* duration=[0-9.]+ by=client phase=[a-z]+ end=client-closed$" 1
done

# --- a slow reader half-closes with most of its response still in proxyd
out=$(PYTHONPATH=$T /usr/bin/python3 - "$PN" "$PROXYD_LOG" <<'PY'
import hashlib, socket, sys, time
from readall import read_all
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.settimeout(10)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
deadline = time.time() + 10
while b"path=/big " not in open(sys.argv[2], "rb").read():
    if time.time() > deadline:
        sys.exit("no http-request line for /big")
    time.sleep(0.05)
s.shutdown(socket.SHUT_WR)
got, closed = read_all(s)
body = got.partition(b"\r\n\r\n")[2]
print("bytes=%d sha256=%s closed=%s" % (len(body),
      hashlib.sha256(body).hexdigest(), closed))
PY
)
info "slow reader, half-closed after its response came: ${out%% sha256=*}"
check test "$out" = "bytes=8388608 sha256=$(sha256_of "$T/big.body") closed=yes" \
    "slow reader half-closed: the response is not whole: $out"
sid=$(sed -n 's/.* #\([0-9]*\) http-request .* path=\/big .*/\1/p' "$PROXYD_LOG")
wait_log_count "#$sid session-end " 1
line=$(grep "#$sid session-end " "$PROXYD_LOG")
check grep -q " by=client .*end=client-closed$" <<<"$line" \
    "slow reader half-closed: want by=client end=client-closed: $line"
cat >"$T/pipelined.py" <<'PY'
import hashlib, re, socket, sys, time
from readall import read_all
port, log, path, stall = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "stall"
def wait_log(pattern):
    deadline = time.time() + 15
    while True:
        m = re.search(pattern, open(log, "rb").read())
        if m:
            return m
        if time.time() > deadline:
            sys.exit("no log line %r" % pattern)
        time.sleep(0.05)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.settimeout(10)
s.connect(("127.0.0.1", port))
s.sendall(b"GET /first HTTP/1.1\r\nHost: a\r\n\r\n"
          b"GET %s HTTP/1.1\r\nHost: a\r\n\r\n" % path.encode())
# proxyd met the cut: the second request's line
sid = wait_log(rb"#(\d+) http-request .* path=%s " % re.escape(path.encode())).group(1)
if stall:
    # never read: proxyd gives up on it, resets all the same
    wait_log(rb"#%s session-end " % sid)
got, closed = read_all(s)
head1, _, rest = got.partition(b"\r\n\r\n")
m = re.search(rb"\r\ncontent-length: (\d+)", head1.lower())
n = int(m.group(1)) if m else 0
first = hashlib.sha256(rest[:n]).hexdigest() if len(rest) >= n > 0 else "cut-at-%d" % len(rest)
second = rest[n:].partition(b"\r\n\r\n")
print("first=%s second=%s closed=%s sid=%s" % (first,
      len(second[2]) if second[1] else "-", closed, sid.decode()))
PY
for cut in /cut-fin /cut-rst; do
    out=$(PYTHONPATH=$T /usr/bin/python3 "$T/pipelined.py" "$PC" "$PROXYD_LOG" "$cut" read)
    info "pipelined, the second response cut ($cut): $out"
    check test "${out% sid=*}" = "first=$(sha256_of "$T/first.body") second=10000 closed=reset" \
        "pipelined, $cut: the first response is not whole, or no reset: $out"
    sid=${out##* sid=}
    wait_log_count "#$sid session-end " 1
    line=$(grep "#$sid session-end " "$PROXYD_LOG")
    check grep -q " by=server-fail .*end=server-\(closed\|error\): inside a response$" <<<"$line" \
        "pipelined, $cut: want by=server-fail end=server-...: inside a response: $line"
done
out=$(PYTHONPATH=$T /usr/bin/python3 "$T/pipelined.py" "$PC" "$PROXYD_LOG" /cut-stall stall)
info "pipelined, the second response cut, a client that never reads: $out"
check grep -qE "^first=cut-at-[0-9]+ second=- closed=reset " <<<"$out" \
    "pipelined, never read: want a reset once proxyd gave up: $out"
line=$(grep "#${out##* sid=} session-end " "$PROXYD_LOG")
check grep -q " by=server-fail .*end=server-closed: inside a response$" <<<"$line" \
    "pipelined, never read: want by=server-fail end=server-closed: inside a response: $line"
http_done
