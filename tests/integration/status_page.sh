#!/usr/bin/env bash
# The status page at / on the admin port, in headless Chromium: during two
# live, rate-limited downloads (one through a plug service, one through an
# http service) the page's DOM lists both sessions with their service and
# client address, the http one with the request in progress, and both
# services in the services table, and the header and title say the node's
# name (<node name="edge-3">). /api/services and /api/sessions answer
# the JSON the page reads; / is one self-contained page (nothing external).
# The screenshot is kept: <build dir>/artifacts/status_page.png.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 chromium
setup

make_file big.bin 48M
start_nginx
free_port P_PLUG
free_port P_WEB
write_proxyd_conf "" '<node name="edge-3"/>'
write_service bulk "$P_PLUG" "$NGINX_PORT"
cat >"$T/policy/web.xml" <<EOF
<service name="web" analyser="http">
  <listen address="127.0.0.1" port="$P_WEB" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <http/>
</service>
EOF
PROXYD_PORTS+=("$P_WEB")
start_proxyd
A=http://127.0.0.1:$ADMIN_PORT

# --- the page itself: HTML, and nothing it would fetch from elsewhere
hdrs=$(curl -s -D - -o "$T/page.html" --max-time 3 "$A/")
grep -qi '^content-type: text/html' <<<"$hdrs" || fail "/ is not text/html: $hdrs"
grep -qi "^content-security-policy: default-src 'none'" <<<"$hdrs" || fail "/ has no CSP"
assert_grep "$T/page.html" '<title>proxyd status</title>'
assert_no_grep "$T/page.html" '(src|href)="?(https?:)?//' "the page loads something from elsewhere"
assert_no_grep "$T/page.html" '<(script|link|img)[^>]* (src|href)=' "the page is not self-contained"

# --- two live transfers, slow enough to be seen (48 MB at 1 MB/s: the
# socket buffers take the first few MB at once)
curl -s -o /dev/null --limit-rate 1m --max-time 60 "http://127.0.0.1:$P_PLUG/big.bin" &
track_pid $!
curl -s -o /dev/null --limit-rate 1m --max-time 60 "http://127.0.0.1:$P_WEB/big.bin" &
track_pid $!

# wait_sessions: until /api/sessions lists a moving session of both services
# (10 s at most); sets PLUG_CLIENT and WEB_CLIENT
wait_sessions() {
    local deadline=$((SECONDS + 10)) out
    while :; do
        out=$(curl -s --max-time 3 "$A/api/sessions" | python3 -c '
import json, sys
d = json.load(sys.stdin)
got = {}
for s in d["sessions"]:
    if s["to_client"] > 0:
        got[s["service"]] = s
if "bulk" in got and "web" in got:
    print(got["bulk"]["client"], got["web"]["client"], got["web"]["analyser"], got["web"]["detail"], sep="\t")
' 2>/dev/null || true)
        [[ -n $out ]] && break
        ((SECONDS < deadline)) || fail "/api/sessions never showed both transfers: $(curl -s "$A/api/sessions")"
        sleep 0.2
    done
    IFS=$'\t' read -r PLUG_CLIENT WEB_CLIENT WEB_ANALYSER WEB_DETAIL <<<"$out"
}
wait_sessions
info "live: bulk from $PLUG_CLIENT, web from $WEB_CLIENT ($WEB_ANALYSER: $WEB_DETAIL)"
assert_eq "$WEB_ANALYSER" http "analyser of the web session"
[[ $WEB_DETAIL == "GET 127.0.0.1/big.bin -> 200 (request 1)" ]] ||
    fail "the web session's detail does not show the request in progress: $WEB_DETAIL"

# --- /api/services
curl -s --max-time 3 "$A/api/services" >"$T/services.json"
python3 - "$T/services.json" "$P_PLUG" "$NGINX_PORT" <<'EOF' || fail "/api/services: $(cat "$T/services.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = {x["name"]: x for x in d["services"]}
assert set(s) == {"bulk", "web"}, s.keys()
b = s["bulk"]
assert b["analyser"] == "plug" and b["mode"] == "fixed", b
assert b["listen"] == "127.0.0.1:" + sys.argv[2], b
assert b["target"] == "127.0.0.1:" + sys.argv[3], b
assert b["active"] == 1 and b["accepted"] == 1 and b["current"] is True, b
assert b["to_client"] > 0 and set(b["denied"]) == {"acl", "max-sessions", "direct", "server", "no-service"}, b
assert s["web"]["events"]["requests"] == 1, s["web"]
assert d["workers"] >= 1 and d["time"] > 0 and d["version"], d
EOF

# the chart's history: proxyd samples its totals every 2 s (12 s at most);
# the samples must show the bytes the downloads moved. Not "the last one
# grew": loopback buffers can take the rest of a download at once, and
# then the totals stand still while the page is still right.
deadline=$((SECONDS + 12))
until curl -s --max-time 3 "$A/api/services" | python3 -c '
import json, sys
h = json.load(sys.stdin)["history"]
sys.exit(0 if len(h) >= 3 and h[-1][2] > h[0][2] else 1)'; do
    ((SECONDS < deadline)) || fail "/api/services history did not grow: $(curl -s "$A/api/services")"
    sleep 0.5
done

# --- Chromium: the DOM once the page has polled, and a screenshot
CHROME=(chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage
    --no-first-run --user-data-dir="$T/chromium" --window-size=1440,900)
# run_chromium OUT ARGS...: bounded, and the page's scripts get 6 s of
# (virtual) time: three polls, so rates and the chart have two points.
run_chromium() {
    local out=$1
    shift
    timeout 60 "${CHROME[@]}" --virtual-time-budget=6000 "$@" "$A/" >"$out" 2>>"$T/chromium.log" ||
        fail "chromium failed (rc=$?): $(tail -n 5 "$T/chromium.log")"
}
run_chromium "$T/dom.html" --dump-dom
assert_grep "$T/dom.html" '<body data-loaded="yes">' "the page never loaded the API"
# the sessions table: a row per live transfer, with its service and client
python3 - "$T/dom.html" "$PLUG_CLIENT" "$WEB_CLIENT" <<'EOF' || fail "the page does not show the live sessions (DOM in $T/dom.html)"
import re, sys
dom = open(sys.argv[1]).read()
body = dom.split('id="sessions"', 1)[1].split("</table>", 1)[0]
rows = re.findall(r'<tr data-service="([^"]+)" data-id="\d+">(.*?)</tr>', body)
got = {svc: cells for svc, cells in rows}
assert "bulk" in got and sys.argv[2] in got["bulk"], rows
assert "web" in got and sys.argv[3] in got["web"], rows
assert "GET 127.0.0.1/big.bin" in got["web"], got["web"]
services = dom.split('id="services"', 1)[1].split("</table>", 1)[0]
for name in ("bulk", "web"):
    assert 'data-service="%s"' % name in services, services
print("sessions on the page:", len(rows))
assert '<b id="node">edge-3</b>' in dom, "no node edge-3 in the header"
assert "<title>proxyd edge-3</title>" in dom, "the title does not name the node"
EOF
info "chromium DOM shows both live sessions and services"

mkdir -p "$T/shot"
run_chromium "$T/shot/out.txt" --screenshot="$T/shot/status_page.png"
[[ -s $T/shot/status_page.png ]] || fail "no screenshot"
head -c 8 "$T/shot/status_page.png" | od -An -tx1 | grep '89 50 4e 47 0d 0a 1a 0a' >/dev/null ||
    fail "the screenshot is not a PNG"
art=${PROXYD_ARTIFACTS:-$(dirname "$PROXYD")/artifacts}
mkdir -p "$art"
cp "$T/shot/status_page.png" "$art/status_page.png"
info "screenshot: $art/status_page.png ($(stat -c %s "$art/status_page.png") bytes)"
info "ok"
