#!/usr/bin/env bash
# The status page in headless Chromium during a steady 1 MB/s download (a
# client paced like one behind a 1 MB/s link, paced_client.py): the "to
# client" rate the page shows for the service, read from its DOM, and the
# header's throughput are within 10 % of it; a screenshot is taken
# ($T/shot/status_page_rate.png, copied to <build dir>/artifacts/). Then
# what an operator looks for first: refused connections show in the
# denials (exact totals, a rate above 0), a reload that fails shows as
# FAILED with the file:line of its first error, and one that works as ok;
# failed server connects count as errors; the HA state file's state shows
# (on the page and in /metrics);
# the denials by zones table has the refusals.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 chromium
setup

RATE=1000000
make_file big.bin 48M
start_nginx
free_port P1
free_port P2
free_port P3
free_port P_NONE	# nothing listens there
write_proxyd_conf
echo master >"$T/ha-state"
sed -i "s|<admin listen=\"\([^\"]*\)\"/>|<admin listen=\"\1\" ha-state-file=\"$T/ha-state\"/>|" "$PROXYD_CONF"
grep -q ha-state-file "$PROXYD_CONF" || fail "no ha-state-file in $PROXYD_CONF"
write_service bulk "$P1" "$NGINX_PORT"
# nobody may use it: every connection from 127.0.0.1 is refused
write_service closed "$P2" "$NGINX_PORT" "" "10.9.9.9/32"
write_service dead "$P3" "$P_NONE"
start_proxyd
A=http://127.0.0.1:$ADMIN_PORT

python3 "$LIB_DIR/paced_client.py" "$P1" /big.bin "$RATE" 60 >"$T/client.out" &
track_pid $!

# warm-up: the session has run 4 s (the client's buffer is full and the
# page's samples cover the steady flow); 15 s at most
deadline=$((SECONDS + 15))
until age=$(curl -s --max-time 3 "$A/api/sessions" | python3 -c '
import json, sys
s = [x for x in json.load(sys.stdin)["sessions"] if x["service"] == "bulk"]
print(s[0]["age"] if s else 0)') && python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 4 else 1)' "$age"; do
    ((SECONDS < deadline)) || fail "the bulk session is not running: $(curl -s "$A/api/sessions")"
    sleep 0.5
done

CHROME=(chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage
    --no-first-run --user-data-dir="$T/chromium" --window-size=1600,900)
# run_chromium OUT ARGS...: bounded; the page's scripts get 3 s of
# (virtual) time: three polls.
run_chromium() {
    local out=$1
    shift
    timeout 60 "${CHROME[@]}" --virtual-time-budget=3000 "$@" "$A/" >"$out" 2>>"$T/chromium.log" ||
        fail "chromium failed (rc=$?): $(tail -n 5 "$T/chromium.log")"
}
# page_value DOM WHAT: a number the page shows (B/s for rates)
page_value() {
    python3 - "$1" "$2" <<'PY'
import re, sys
dom, what = open(sys.argv[1]).read(), sys.argv[2]
units = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
def rate(text):
    m = re.fullmatch(r"([0-9.]+) (B|kB|MB|GB|TB)/s", text.strip())
    assert m, "not a rate: %r" % text
    return float(m.group(1)) * units[m.group(2)]
if what == "tput":
    print(rate(re.search(r'<b id="tput"[^>]*>([^<]*)</b>', dom).group(1)))
elif what in ("reload", "ha"):
    print(re.search(r'<b id="%s"[^>]*>([^<]*)</b>' % what, dom).group(1))
else:
    body = dom.split('id="services"', 1)[1].split("</table>", 1)[0]
    row = re.search(r'<tr data-service="bulk">(.*?)</tr>', body).group(1)
    m = re.search(r'<td[^>]*data-k="%s"[^>]*>([^<]*)</td>' % what, row)
    # (a page without data-k: the 9th column is "to client")
    cell = m.group(1) if m else re.findall(r'<td[^>]*>(?:<span[^>]*>)?([^<]*)', row)[8]
    print(rate(cell) if what.startswith("to-") else cell)
PY
}
within() { # VALUE NAME
    python3 -c 'import sys; v, r = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(v - r) <= r * 0.1 else 1)' "$1" "$RATE" ||
        fail "$2 on the page is $1 B/s, not within 10 % of $RATE (DOM in $T/dom.html)"
}

run_chromium "$T/dom.html" --dump-dom
assert_grep "$T/dom.html" '<body data-loaded="yes">' "the page never loaded the API"
shown=$(page_value "$T/dom.html" to-client) || fail "no to-client rate for bulk on the page (DOM in $T/dom.html)"
tput=$(page_value "$T/dom.html" tput) || fail "no throughput in the page's header"
info "the page shows bulk to client at $shown B/s, throughput $tput B/s"
within "$shown" "bulk's to-client rate"
within "$tput" "the header's throughput"

mkdir -p "$T/shot"
run_chromium "$T/shot/out.txt" --screenshot="$T/shot/status_page_rate.png"
[[ -s $T/shot/status_page_rate.png ]] || fail "no screenshot"
head -c 8 "$T/shot/status_page_rate.png" | od -An -tx1 | grep '89 50 4e 47 0d 0a 1a 0a' >/dev/null ||
    fail "the screenshot is not a PNG"
art=${PROXYD_ARTIFACTS:-$(dirname "$PROXYD")/artifacts}
mkdir -p "$art"
cp "$T/shot/status_page_rate.png" "$art/status_page_rate.png"
info "screenshot: $T/shot/status_page_rate.png ($(stat -c %s "$T/shot/status_page_rate.png") bytes)"

ha=$(page_value "$T/dom.html" ha)
[[ $ha == "master since "* ]] || fail "the page does not show the HA state: '$ha'"
# and /metrics has it (the sanitizer build runs this, not netns.ha_failover)
assert_metric eq proxyd_ha_state 'state="master"' 1
assert_metric eq proxyd_ha_state 'state="backup"' 0
ha_since=$(metric_value proxyd_ha_last_transition_timestamp_seconds)
assert_eq "$ha_since" "$(stat -c %Y "$T/ha-state")" "proxyd_ha_last_transition_timestamp_seconds: the state file's mtime"

# --- denials and errors: three refused connections, two failed connects,
# counted exactly, seen as rates
for i in 1 2 3; do
    curl -s -o /dev/null --max-time 3 "http://127.0.0.1:$P2/" || true
done
for i in 1 2; do
    curl -s -o /dev/null --max-time 3 "http://127.0.0.1:$P3/" || true
done
python3 - "$A" <<'PY' || fail "denials of 'closed' or errors of 'dead' not shown"
import json, sys, time, urllib.request
seen, deadline = [0.0, 0.0], time.monotonic() + 5
while time.monotonic() < deadline:
    d = json.load(urllib.request.urlopen(sys.argv[1] + "/api/services", timeout=3))
    s = {x["name"]: x for x in d["services"]}
    c, e = s["closed"], s["dead"]
    assert c["totals"]["denials"] == 3 and c["denied"]["acl"] == 3, c
    if e["totals"]["errors"] < 2:	# the connects may still be failing
        time.sleep(0.1)
        continue
    assert e["totals"]["errors"] == 2 and e["connect_failures"] == 2, e
    seen = [max(seen[0], c["rate"]["denials"]), max(seen[1], e["rate"]["errors"])]
    if min(seen) > 0:
        break
    time.sleep(0.3)
assert min(seen) > 0, "rate.denials or rate.errors stayed 0: %r" % seen
print("denials/s, errors/s seen:", seen)
PY

# the denials by zones table: no zones configured, so "-" for both ends
run_chromium "$T/dom-zones.html" --dump-dom
python3 - "$T/dom-zones.html" <<'PY' || fail "the page's denials by zones table (DOM in $T/dom-zones.html)"
import re, sys
dom = open(sys.argv[1]).read()
body = dom.split('id="zonedenials"', 1)[1].split("</table>", 1)[0]
rows = re.findall(r'<tr data-service="closed">(.*?)</tr>', body)
cells = [dict(re.findall(r'<td[^>]*data-k="([a-z-]+)"[^>]*>([^<]*)</td>', r)) for r in rows]
assert cells == [{"client-zone": "-", "server-zone": "-", "reason": "acl", "count": "3"}], cells
PY

# --- reloads: the page names the first error of one that failed
reload_text() {
    run_chromium "$T/dom-reload.html" --dump-dom
    page_value "$T/dom-reload.html" reload
}
txt=$(reload_text)
[[ $txt == "none since the start at "* ]] || fail "reload before any: '$txt'"
cp "$T/policy/closed.xml" "$T/closed.xml.good"
printf '<service name="closed" analyser="plug">\n  <listen address="127.0.0.1" port="%s" mode="fixed"/>\n  <target address="127.0.0.1" port="no"/>\n</service>\n' "$P2" >"$T/policy/closed.xml"
kill -HUP "$PROXYD_PID"
wait_grep "$PROXYD_LOG" "reload failed" 10 || fail "no failed reload in the log"
txt=$(reload_text)
info "reload shown: $txt"
[[ $txt == "FAILED at "*"closed.xml:3"* ]] || fail "the page does not show the failed reload with file:line: '$txt'"
cp "$T/closed.xml.good" "$T/policy/closed.xml"
kill -HUP "$PROXYD_PID"
wait_grep "$PROXYD_LOG" "reload done" 10 || fail "no reload done in the log"
txt=$(reload_text)
[[ $txt == "ok at "* ]] || fail "the page does not show the reload as ok: '$txt'"
info "ok"
