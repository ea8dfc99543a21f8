#!/usr/bin/env bash
# <log target="journal">: lines go to systemd-journald natively, with the
# session id and each key=value of a line as fields. A real journald runs
# in a private mount namespace (tmpfs over /run/systemd, /run/log and
# /var/log/journal), so the host's journal, if any, is never touched.
#   1. proxyd (dropped to nobody) relays a request; journalctl finds its
#      session-end entry by PROXYD_VERDICT=accept, with MESSAGE as the text
#      line, PROXYD_SESSION = the line's #id, PROXYD_EVENT, PROXYD_SERVICE,
#      PROXYD_TO_CLIENT (the bytes), PROXYD_END, PRIORITY 6, PROXYD_NODE
#      (the <node name>, on the start entry too), and _UID =
#      nobody's (journald's own record of the sender). An http-error
#      line's quoted reason="..." is one whole field (PROXYD_REASON, not
#      cut at its first space), and an http-request's bare path= is the
#      line's value as written (a backslash and "\x41" kept).
#   2. Without a journal socket, proxyd says so and logs to stderr.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID == 0 ]] || skip "needs root (a mount namespace for a private journald)"
JOURNALD=/lib/systemd/systemd-journald
[[ -x $JOURNALD ]] || skip "systemd-journald not installed ($JOURNALD)"
need_cmds journalctl unshare nginx curl python3
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
    skip "needs the user nobody and the group nogroup"
setup

make_file index.html 3000
start_nginx
free_port P1
write_proxyd_conf '' '<user name="nobody" group="nogroup"/> <node name="gw-j"/>'
sed -i 's|<log target="stderr" level="info"/>|<log target="journal" level="info"/>|' "$PROXYD_CONF"
grep -q 'target="journal"' "$PROXYD_CONF" || fail "could not set the journal target"
write_service web "$P1" "$NGINX_PORT"
free_port P2
cat >"$T/policy/www.xml" <<EOF
<service name="www" analyser="http">
  <listen address="127.0.0.1" port="$P2"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
</service>
EOF

cat >"$T/inner.sh" <<'EOF'
# runs inside unshare -m: a journald of its own, then proxyd logging to it
set -eu
T=$1 PROXYD=$2 CONF=$3 PORT=$4 PORT2=$5
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for d in /run/systemd /run/log /var/log/journal; do
    [ -d "$d" ] && mount -t tmpfs tmpfs "$d"
done
mkdir -p /run/systemd/journal /run/log/journal
/lib/systemd/systemd-journald >"$T/journald.log" 2>&1 &
pids="$!"
i=0
until [ -S /run/systemd/journal/socket ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "journald did not start" >&2; exit 1; }
    sleep 0.05
done
"$PROXYD" -c "$CONF" >"$T/proxyd.stderr" 2>&1 &
ppid=$!
pids="$ppid $pids"
i=0
until curl -s --max-time 2 -o "$T/out" "http://127.0.0.1:$PORT/index.html"; do
    i=$((i + 1)); [ $i -lt 100 ] || { echo "no answer through proxyd" >&2; exit 1; }
    sleep 0.05
done
grep -E '^(Uid|CapEff):' /proc/$ppid/status >"$T/status"
python3 - "$PORT2" <<'PY'
import socket, sys
# (a backslash is refused with 400 since url rules judge the canonical
# path: the quote alone shows the field is the escaped log value)
for target in (b'/a"b/index.html', b"/" + b"x" * 20000):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()
PY
kill -TERM "$ppid"
wait "$ppid" || { echo "proxyd exit status $?" >&2; exit 1; }
journalctl --sync 2>/dev/null || true
i=0
until journalctl -D /run/log/journal -o json --no-pager SYSLOG_IDENTIFIER=proxyd 2>/dev/null |
    grep -q 'proxyd exiting'; do
    i=$((i + 1)); [ $i -lt 100 ] || break
    sleep 0.05
done
journalctl -D /run/log/journal -o json --no-pager SYSLOG_IDENTIFIER=proxyd >"$T/all.json"
journalctl -D /run/log/journal -o json --no-pager PROXYD_VERDICT=accept PROXYD_SERVICE=web >"$T/accept.json"
journalctl -D /run/log/journal -o json --no-pager PROXYD_EVENT=http-error >"$T/httperr.json"
journalctl -D /run/log/journal -o json --no-pager PROXYD_EVENT=http-request >"$T/httpreq.json"
EOF
rc=0
unshare -m --propagation private sh ${INNER_X:+-x} "$T/inner.sh" "$T" "$PROXYD" "$PROXYD_CONF" "$P1" "$P2" >"$T/inner.out" 2>&1 || rc=$?
cat "$T/inner.out"
((rc == 0)) || { tail -n 20 "$T/proxyd.stderr" "$T/journald.log" >&2 || true; fail "the journald run failed (rc $rc)"; }
assert_eq "$(sha256_of "$T/out")" "$(sha256_of "$T/www/index.html")" "body through proxyd"
info "proxyd: $(tr '\n' ' ' <"$T/status")"
info "journal: $(wc -l <"$T/all.json") proxyd entries, $(wc -l <"$T/accept.json") matching PROXYD_VERDICT=accept PROXYD_SERVICE=web"
[[ -s $T/proxyd.stderr ]] && { info "proxyd stderr:"; cat "$T/proxyd.stderr"; }
python3 - "$T/all.json" "$T/accept.json" "$(id -u nobody)" "$T/httperr.json" "$T/httpreq.json" <<'PY'
import json, re, sys
allj = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
acc = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
uid = sys.argv[3]
def fail(m):
    print("FAIL [notify_journal]: " + m, file=sys.stderr)
    sys.exit(1)
if not any("started: pid" in e.get("MESSAGE", "") for e in allj):
    fail("no 'started' entry in the journal: %r" % [e.get("MESSAGE") for e in allj][:5])
start = next(e for e in allj if "started: pid" in e["MESSAGE"])
if "PROXYD_SESSION" in start or start.get("PRIORITY") != "6" or start.get("PROXYD_NODE") != "gw-j":
    fail("start entry fields: %r" % start)
if len(acc) != 1:
    fail("expected one session-end entry by PROXYD_VERDICT=accept, got %d" % len(acc))
e = acc[0]
print("[notify_journal] entry: " + " ".join("%s=%s" % (k, v) for k, v in sorted(e.items())
      if k.startswith("PROXYD_") or k in ("MESSAGE", "PRIORITY", "_UID", "SYSLOG_IDENTIFIER")))
m = re.match(r"#(\d+) session-end service=web ", e["MESSAGE"])
if not m:
    fail("MESSAGE is not the session-end line: %r" % e["MESSAGE"])
want = {"PROXYD_SESSION": m.group(1), "PROXYD_EVENT": "session-end", "PROXYD_SERVICE": "web",
        "PROXYD_ANALYSER": "plug", "PROXYD_VERDICT": "accept", "PRIORITY": "6", "_UID": uid,
        "PROXYD_NODE": "gw-j"}
for k, v in want.items():
    if e.get(k) != v:
        fail("%s = %r, expected %r" % (k, e.get(k), v))
if int(e.get("PROXYD_TO_CLIENT", "0")) < 3000:
    fail("PROXYD_TO_CLIENT = %r, expected >= 3000" % e.get("PROXYD_TO_CLIENT"))
if e.get("PROXYD_END") not in ("client-closed", "server-closed"):
    fail("PROXYD_END = %r" % e.get("PROXYD_END"))
if not e["MESSAGE"].endswith(" end=" + e["PROXYD_END"]):
    fail("PROXYD_END is not the rest of the line")
err = [json.loads(l) for l in open(sys.argv[4]) if l.strip()]
if len(err) != 1 or err[0].get("PROXYD_REASON") != "request line too long" or err[0].get("PROXYD_STATUS") != "414":
    fail("http-error entry: %r" % err)
req = [e for e in (json.loads(l) for l in open(sys.argv[5]) if l.strip()) if e.get("PROXYD_STATUS") == "404"]
if len(req) != 1 or req[0].get("PROXYD_PATH") != '/a?b/index.html':
    fail("http-request entry: %r" % req)
print("[notify_journal] PROXYD_REASON=%r PROXYD_PATH=%r" % (err[0]["PROXYD_REASON"], req[0]["PROXYD_PATH"]))
PY

info "---- 2. no journal socket"
if [[ -S /run/systemd/journal/socket ]]; then
    info "SKIPPED: this host runs a journald ($(readlink -f /run/systemd/journal/socket)): the fallback is not exercised"
else
    start_proxyd
    assert_log "log target journal: /run/systemd/journal/socket: No such file or directory; logging to stderr"
    assert_log "proxyd [0-9.]+ started"
fi
info "PASS"
