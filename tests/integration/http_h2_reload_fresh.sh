#!/usr/bin/env bash
# A reload does not reset an HTTP/2 client whose request came with it: N
# h2c connections (prior knowledge) and N over TLS (ALPN h2) have their
# preface and SETTINGS taken and have sent no stream yet; the worker is
# held (strace delays its epoll_wait) while the reload is signalled and
# each client then writes 500 WINDOW_UPDATE frames (6.5 KB) and its first
# request (stream 1), in two writes (over TLS two records), so that they
# are unread when the worker acts on the reload; limits/@buffer is 4k, so
# one read of the worker does not take them all (over TLS the rest of the
# first record waits in OpenSSL's buffer, which FIONREAD does not see).
# Each connection gets a GOAWAY
# (NO_ERROR) naming stream 1, the response to stream 1 (200, the file's
# bytes) and then an end without a reset. Before, a connection that had
# taken no stream got GOAWAY(last 0) and closed at once with the request
# unread: a reset, the request lost (http_reload_fresh: the same for
# HTTP/1.1).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
source "$(dirname "$0")/tls_lib.sh"
need_cmds nginx strace
setup

echo "hello h2" >"$T/www/hello.txt"
P=$T/pki
tls_ca ca "proxyd test CA"
tls_leaf leaf localhost "DNS:localhost,IP:127.0.0.1" serverAuth
start_nginx
free_port PC
free_port PT
write_proxyd_conf 'buffer="4k"'
# One worker: the one strace holds below
sed -i 's|<workers>auto</workers>|<workers>1</workers>|' "$PROXYD_CONF"
POL='<http h2="yes" h2c="yes"><limits request-timeout="5m"/></http>'
write_http_service web "$PC" "$NGINX_PORT" "$POL"
write_http_service webtls "$PT" "$NGINX_PORT" "$POL
  <tls side=\"client\" mode=\"terminate\" cert=\"$P/leaf.pem\" key=\"$P/leaf.key\"/>"
start_proxyd

cat >"$T/client.py" <<'PY'
import os, socket, ssl, struct, sys, time
import hpack
pc, pt, ca, reloaded, n = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                           sys.argv[4], int(sys.argv[5]))
DATA, HEADERS, SETTINGS, GOAWAY, WINDOW_UPDATE = 0, 1, 4, 7, 8

def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + \
        struct.pack(">I", sid) + payload

class Conn:
    def __init__(self, tls):
        self.name = "tls" if tls else "h2c"
        self.s = socket.create_connection(("127.0.0.1", pt if tls else pc))
        self.s.settimeout(15)
        if tls:
            ctx = ssl.create_default_context(cafile=ca)
            ctx.set_alpn_protocols(["h2"])
            self.s = ctx.wrap_socket(self.s, server_hostname="localhost")
            assert self.s.selected_alpn_protocol() == "h2"
        self.buf = b""
        self.dec = hpack.Decoder()
        self.s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                       frame(SETTINGS, 0, 0))

    def next(self):
        """The next frame (type, flags, stream, payload), or "eof" or
        "reset"."""
        while len(self.buf) < 9 or \
                len(self.buf) < 9 + int.from_bytes(self.buf[:3], "big"):
            try:
                d = self.s.recv(65536)
            except ConnectionResetError:
                return "reset"
            if not d:
                return "eof"
            self.buf += d
        ln = int.from_bytes(self.buf[:3], "big")
        t, fl = self.buf[3], self.buf[4]
        sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
        p, self.buf = self.buf[9:9 + ln], self.buf[9 + ln:]
        return t, fl, sid, p

c = [Conn(tls) for tls in (False, True) for _ in range(n)]
# proxyd speaks HTTP/2 on each once its SETTINGS came
for k in c:
    while True:
        f = k.next()
        assert f not in ("eof", "reset"), f
        if f[0] == SETTINGS and not f[1] & 1:
            k.s.sendall(frame(SETTINGS, 1, 0))
            break
print("ready", flush=True)
deadline = time.time() + 20
while not os.path.exists(reloaded):
    if time.time() > deadline:
        sys.exit("timed out waiting for the reload")
    time.sleep(0.05)
for k in c:
    k.s.sendall(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1)) * 500)
    k.s.sendall(frame(HEADERS, 5, 1, hpack.Encoder().encode([
        (":method", "GET"), (":scheme", "http"),
        (":authority", "127.0.0.1"), (":path", "/hello.txt")])))
print("sent", flush=True)
for k in c:
    goaway, status, body, end = "none", "none", b"", "none"
    while True:
        f = k.next()
        if f in ("eof", "reset"):
            end = f
            break
        t, fl, sid, p = f
        if t == GOAWAY:
            goaway = "%d/%d" % (struct.unpack(">I", p[:4])[0] & 0x7FFFFFFF,
                                struct.unpack(">I", p[4:8])[0])
        elif t == HEADERS and sid == 1:
            status = dict(k.dec.decode(p)).get(":status", "?")
        elif t == DATA and sid == 1:
            body += p
    print("%s: goaway=%s status=%s body=%r end=%s" % (k.name, goaway, status,
          body, end), flush=True)
PY

N=3
/usr/bin/python3 "$T/client.py" "$PC" "$PT" "$P/ca.pem" "$T/reloaded" "$N" >"$T/client.out" 2>&1 &
CLIENT=$!
track_pid "$CLIENT"
wait_grep "$T/client.out" '^ready' 20 || fail "client not ready: $(cat "$T/client.out")"
# The requests written once the reload is logged are unread when the
# worker acts on it.
reload_worker_held "$T/client.out" "$T/reloaded"
wait_exit "$CLIENT" 30 || fail "client did not finish: $(cat "$T/client.out")"
strace_stop
sed "s/^/[$TEST_NAME] client: /" "$T/client.out"
for k in h2c tls; do
    n=$(grep -c "^$k: goaway=1/0 status=200 body=b'hello h2\\\\n' end=eof$" "$T/client.out" || true)
    assert_eq "$n" "$N" "$k connections whose first request came with the reload: GOAWAY naming it, served, closed without a reset"
done
# A stream's line is written at its stream's end, which the client may
# see before the log does: waited for, then counted exactly.
wait_log_count 'path=/hello.txt status=200 .*proto=h2' $((2 * N))
n=$(grep -c 'path=/hello.txt status=200 .*proto=h2' "$PROXYD_LOG" || true)
assert_eq "$n" $((2 * N)) "every request was served"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
