#!/usr/bin/env bash
# <log format="json">: one JSON object per line, the same fields as the
# key=value form, numbers typed.
#   1. A plug and an http session: every line of the log parses as JSON;
#      the session-end and http-request objects carry the key=value form's
#      keys (compared with a kv run of the same traffic), session = the
#      #id, to-client/status/duration as numbers, end= as the rest of the
#      line, msg = the text line, node = the <node name> (gw-1) on every
#      object, after level; free-text lines are ts/level/node/msg alone
#      (quotes escaped).
#   2. SIGHUP to format="kv" switches back to text lines, node=gw-1 after
#      the timestamp.
#   3. format="xml" is refused as file:line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

plug_and_http_origin

traffic() { # LOGFILE: one plug and one http session, then stop
    PROXYD_LOG=$1
    start_proxyd
    assert_eq "$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")" "0 200" "plug request"
    assert_eq "$(http_get "http://127.0.0.1:$P2/index.html?q=1" "$T/out")" "0 200" "http request"
    wait_grep "$PROXYD_LOG" 'session-end.*service.*www' 5 || fail "no session-end line for www in $PROXYD_LOG"
    kill -TERM "$PROXYD_PID"
    wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"
    assert_eq "$WAIT_RC" 0 "exit status"
}

info "---- kv run (reference)"
write_proxyd_conf "" '<node name="gw-1"/>'
traffic "$T/proxyd-kv.log"
info "---- json run"
sed -i 's|<log target="stderr" level="info"/>|<log target="stderr" level="info" format="json"/>|' "$PROXYD_CONF"
grep -q 'format="json"' "$PROXYD_CONF" || fail "could not set format=json"
"$PROXYD" --check -c "$PROXYD_CONF" >/dev/null || fail "--check rejects format=json"
traffic "$T/proxyd-json.log"
python3 - "$T/proxyd-kv.log" "$T/proxyd-json.log" <<'PY'
import json, re, sys
kvlog, jlog = sys.argv[1], sys.argv[2]
def fail(m):
    print("FAIL [log_json]: " + m, file=sys.stderr); sys.exit(1)
objs = []
for n, line in enumerate(open(jlog, encoding="utf-8", errors="strict"), 1):
    if line.startswith("proxyd: "):      # before the log opens: plain stderr
        continue
    try:
        objs.append(json.loads(line))
    except ValueError as e:
        fail("line %d is not JSON (%s): %r" % (n, e, line))
if len(objs) < 6:
    fail("only %d JSON lines" % len(objs))
for o in objs:
    if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", o.get("ts", "")) or o.get("level") not in ("info", "warning", "notice", "error", "debug", "crit"):
        fail("ts/level: %r" % o)
    if "msg" not in o:
        fail("no msg: %r" % o)
    if list(o)[:3] != ["ts", "level", "node"] or o["node"] != "gw-1":
        fail("node gw-1 after ts and level: %r" % o)
def kv_keys(line):
    body = line.split(" ", 4)[4]           # after ts, node=, level, #id
    body = body.split(" ", 1)[1]           # after the event word
    keys = []
    for tok in body.split(" "):
        if "=" in tok:
            k = tok.split("=", 1)[0]
            keys.append(k)
            if k == "end":
                break
    return keys
def kv_line(event, service):
    for l in open(kvlog):
        if (" %s " % event) in l and (" service=%s " % service in l or event == "http-request"):
            return l.rstrip("\n")
    fail("no %s line for %s in the kv log" % (event, service))
meta = {"ts", "level", "node", "session", "event", "msg"}
for event, service in (("session-end", "web"), ("session-end", "www"), ("http-request", "www")):
    cands = [o for o in objs if o.get("event") == event and (event == "http-request" or o.get("service") == service)]
    if len(cands) != 1:
        fail("%d %s objects for %s" % (len(cands), event, service))
    o = cands[0]
    want = kv_keys(kv_line(event, service))
    got = [k for k in o if k not in meta]
    if got != want:
        fail("%s keys: json %r, kv form %r" % (event, got, want))
    if not isinstance(o["session"], int) or not o["msg"].startswith(event + " "):
        fail("session/msg: %r" % o)
    if not isinstance(o["to-client"], int) or o["to-client"] < 5000:
        fail("to-client should be a number >= 5000: %r" % o["to-client"])
    if not isinstance(o["duration"], float):
        fail("duration should be a number: %r" % o["duration"])
    print("[log_json] %s: %s" % (event, json.dumps(o)[:300]))
se = next(o for o in objs if o.get("event") == "session-end" and o.get("service") == "www")
hr = next(o for o in objs if o.get("event") == "http-request")
if hr["status"] != 200 or hr["session"] != se["session"]:
    fail("http-request status/session: %r vs session %r" % (hr, se["session"]))
if not se["msg"].endswith(" end=" + se["end"]):
    fail("end is not the rest of the line: %r" % se)
if not isinstance(se["client"], str) or not isinstance(se["verdict"], str):
    fail("strings stay strings: %r" % se)
free = [o for o in objs if "started: pid" in o["msg"]]
if len(free) != 1 or set(free[0]) != {"ts", "level", "node", "msg"}:
    fail("a free-text line is ts/level/node/msg alone: %r" % free)
root = [o for o in objs if "running as root" in o["msg"]]
if root and '<user name="proxyd"/>' not in root[0]["msg"]:
    fail("quotes in msg: %r" % root[0])
print("[log_json] %d lines, all JSON" % len(objs))
PY

info "---- 2. SIGHUP to format=kv"
PROXYD_LOG=$T/proxyd-switch.log
start_proxyd
sed -i 's| format="json"| format="kv"|' "$PROXYD_CONF"
kill -HUP "$PROXYD_PID"
assert_log '"msg":"SIGHUP: reloading' 5
assert_log '^[0-9T:.-]+Z node=gw-1 info reload done' 5
assert_eq "$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")" "0 200" "plug request after the switch"
assert_log '^[0-9T:.-]+Z node=gw-1 info #[0-9]+ session-end service=web ' 5
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"

info "---- 3. bad format"
sed -i 's| format="kv"| format="xml"|' "$PROXYD_CONF"
line=$(grep -n 'format="xml"' "$PROXYD_CONF" | cut -d: -f1)
rc=0
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "--check exit status with format=xml"
assert_grep "$T/check.out" "proxyd\\.xml:$line: log format=\"xml\": expected kv or json|proxyd\\.xml:$line: .*format" "file:line for format=xml"
info "PASS"
