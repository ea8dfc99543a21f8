#!/usr/bin/env bash
# <log format="json"> keeps every value whole: a quoted kv value (arg="...",
# reason="...") holding spaces, quotes, backslashes, control bytes or
# UTF-8 comes back as it was, not cut at its first space.
#   1. FTP (pyftpdlib behind proxyd): RETR of a file name with spaces,
#      quotes, a backslash, a literal "\x41" and UTF-8 (refused as
#      path-unsafe), then of one with spaces, quotes, "k=v" and UTF-8
#      denied by a path rule: each ftp-command object has arg = that name
#      exactly, the second path = its canonical path, verdict/reason/why
#      as in the kv form.
#      Then a passive download of 'my "data" file.bin' (3000 bytes) and a
#      LIST: their data-transfer objects are split into fields as the
#      other events are (the text's bare direction word as "kind":
#      download, listing; cmd, file decoded, bytes/to-client numbers,
#      tls-client, end), not a msg alone.
#   2. HTTP: a request path with a backslash, "\x41" and a quote (refused,
#      400 "backslash in path"); the http-request object's path is the kv
#      form's bare value as written ('"' shown as '?', '\x41' not
#      decoded); an over-long URL gives an http-error object whose reason
#      is the whole "request line too long".
#   3. Every line of the log is JSON (python's json module, strict UTF-8),
#      and a free-text line still is ts/level/node/msg alone.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
/usr/bin/python3 -c 'import pyftpdlib' 2>/dev/null ||
    skip "python3-pyftpdlib missing (scripts/deps installs it)"
setup
source "$(dirname "$0")/ftp_lib.sh"

FTP_ROOT=$T/ftproot
mkdir -p "$FTP_ROOT"
head -c 3000 /dev/urandom >"$FTP_ROOT/my \"data\" file.bin"
start_pyftpd
make_file index.html 100
start_nginx
free_port PF
free_port PH
write_proxyd_conf
sed -i 's|<log target="stderr" level="info"/>|<log target="stderr" level="info" format="json"/>|' "$PROXYD_CONF"
grep -q 'format="json"' "$PROXYD_CONF" || fail "could not set format=json"
write_ftp_service ftp "$PF" '
  <ftp>
    <command name="*" action="accept"/>
    <path pattern="*.exe" action="deny"/>
  </ftp>' 127.0.0.1 "$PYFTPD_PORT"
cat >"$T/policy/www.xml" <<EOF
<service name="www" analyser="http">
  <listen address="127.0.0.1" port="$PH"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
</service>
EOF
PROXYD_PORTS+=("$PH")
start_proxyd

python3 - "$PF" "$PH" <<'PY'
import socket, sys
pf, ph = int(sys.argv[1]), int(sys.argv[2])
def fail(m):
    print("FAIL [log_json_values]: " + m, file=sys.stderr); sys.exit(1)
# FTP: raw bytes on the control connection, as a client sends them.
names = ['my "odd" file \\ x\\x41 é\u20ac.exe', 'my "odd"  file k=v end=x é\u20ac.exe']
s = socket.create_connection(("127.0.0.1", pf), timeout=10)
f = s.makefile("rb")
def reply():
    line = f.readline()
    while line[3:4] == b"-":
        line = f.readline()
    return line
def cmd(c):
    s.sendall(c + b"\r\n")
    return reply()
if not reply().startswith(b"220"): fail("no FTP greeting")
if not cmd(b"USER anonymous").startswith(b"331"): fail("USER")
if not cmd(b"PASS x@y").startswith(b"230"): fail("PASS")
for name in names:
    r = cmd(b"RETR " + name.encode("utf-8"))
    if not r.startswith(b"550"): fail("RETR of the .exe: %r" % r)
# passive transfers: a download, a listing
def pasv_data(c, want):
    r = cmd(b"PASV")
    if not r.startswith(b"227"): fail("PASV: %r" % r)
    h = r[r.index(b"(") + 1:r.index(b")")].split(b",")
    d = socket.create_connection((".".join(x.decode() for x in h[:4]), int(h[4]) * 256 + int(h[5])), timeout=10)
    r = cmd(c)
    if not r.startswith(b"150") and not r.startswith(b"125"): fail("%r: %r" % (c, r))
    got = b""
    while True:
        x = d.recv(65536)
        if not x: break
        got += x
    d.close()
    r = reply()
    if not r.startswith(b"226"): fail("%r: end %r" % (c, r))
    if want is not None and len(got) != want: fail("%r: %d bytes, want %d" % (c, len(got), want))
cmd(b"TYPE I")
pasv_data(b'RETR my "data" file.bin', 3000)
pasv_data(b"LIST", None)
cmd(b"QUIT")
s.close()
# HTTP: odd bytes in the path, then a URL over the limit.
for target in (b'/a\\x41"b%20c/index.html', b"/" + b"x" * 20000):
    s = socket.create_connection(("127.0.0.1", ph), timeout=10)
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d: break
        data += d
    s.close()
    print("[log_json_values] GET %r... -> %r" % (target[:30], data[:12]))
PY
assert_log '"event":"http-request".*"status":400' 10
assert_log '"event":"http-error"' 10
assert_log '"event":"ftp-command".*"cmd":"RETR"' 10
assert_log '"data-transfer listing cmd=LIST' 10
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"

python3 - "$PROXYD_LOG" <<'PY'
import json, sys
def fail(m):
    print("FAIL [log_json_values]: " + m, file=sys.stderr); sys.exit(1)
objs = []
for n, line in enumerate(open(sys.argv[1], encoding="utf-8", errors="strict"), 1):
    if line.startswith("proxyd: "):      # before the log opens: plain stderr
        continue
    try:
        objs.append(json.loads(line))
    except ValueError as e:
        fail("line %d is not JSON (%s): %r" % (n, e, line))
def one(pred, what):
    c = [o for o in objs if pred(o)]
    if len(c) != 1:
        fail("%d %s objects: %r" % (len(c), what, c))
    print("[log_json_values] %s: %s" % (what, json.dumps(c[0], ensure_ascii=False)[:400]))
    return c[0]
names = ['my "odd" file \\ x\\x41 é\u20ac.exe', 'my "odd"  file k=v end=x é\u20ac.exe']
unsafe = one(lambda o: o.get("event") == "ftp-command" and o.get("cmd") == "RETR" and o.get("reason") == "path-unsafe", "ftp RETR unsafe")
if unsafe.get("arg") != names[0]:
    fail("arg: got %r, want %r" % (unsafe.get("arg"), names[0]))
if unsafe.get("verdict") != "deny" or unsafe.get("why") != "backslash" or unsafe.get("user") != "anonymous":
    fail("verdict/why/user: %r" % unsafe)
retr = one(lambda o: o.get("event") == "ftp-command" and o.get("cmd") == "RETR" and o.get("reason") == "path", "ftp RETR path rule")
if retr.get("arg") != names[1]:
    fail("arg: got %r, want %r" % (retr.get("arg"), names[1]))
if retr.get("path") != "/" + names[1]:
    fail("path: got %r, want %r" % (retr.get("path"), "/" + names[1]))
if retr.get("verdict") != "deny" or "k" in retr or "end" in retr:
    fail("verdict, or keys from inside a quoted value: %r" % retr)
dl = one(lambda o: o.get("event") == "data-transfer" and o.get("kind") == "download", "data-transfer download")
want = {"kind": "download", "cmd": "RETR", "file": 'my "data" file.bin', "bytes": 3000,
        "to-server": 0, "to-client": 3000, "tls-client": "no", "tls-server": "no", "refused": 0, "end": "ok"}
for k, v in want.items():
    if dl.get(k) != v:
        fail("data-transfer download %s: got %r, want %r (%r)" % (k, dl.get(k), v, dl))
if not isinstance(dl.get("duration"), (int, float)) or not dl.get("client", "").startswith("127.0.0.1:"):
    fail("data-transfer download duration/client: %r" % dl)
if not dl["msg"].startswith('data-transfer download cmd=RETR file="my \\"data\\" file.bin" bytes=3000 '):
    fail("data-transfer download msg: %r" % dl["msg"])
ls = one(lambda o: o.get("event") == "data-transfer" and o.get("kind") == "listing", "data-transfer listing")
if ls.get("cmd") != "LIST" or ls.get("end") != "ok" or not isinstance(ls.get("to-client"), int) or ls["to-client"] <= 0:
    fail("data-transfer listing: %r" % ls)
req = one(lambda o: o.get("event") == "http-request" and o.get("status") == 400, "http-request")
if req.get("path") != '/a\\x41?b%20c/index.html':
    fail("http path: got %r" % req.get("path"))
err = one(lambda o: o.get("event") == "http-error" and o.get("status") == 400, "http-error 400")
if err.get("reason") != "backslash in path":
    fail("http-error reason: %r" % err)
err = one(lambda o: o.get("event") == "http-error" and o.get("status") == 414, "http-error 414")
if err.get("reason") != "request line too long" or err.get("status") != 414:
    fail("http-error reason/status: %r" % err)
free = [o for o in objs if "started: pid" in o["msg"]]
if len(free) != 1 or set(free[0]) != {"ts", "level", "node", "msg"}:
    fail("a free-text line is ts/level/node/msg alone: %r" % free)
print("[log_json_values] %d lines, all JSON" % len(objs))
PY
info "PASS"
