#!/usr/bin/env bash
# <source-limits> on /metrics, /api/services and the status page: after
# refusals by each limit (sessions, connections, requests) from known
# sources, /metrics has proxyd_limited_total per service and limit and the
# table's occupancy (proxyd_source_limit_entries = the sources seen,
# proxyd_source_limit_entries_max = its fixed size), /api/services the
# same per service ("limited") and for the table ("source_limits"), and the
# page (headless Chromium) shows them: the "Refused by source limits"
# table, a row per service that refused, and the "source table" figure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 chromium
setup

printf 'ok\n' >"$T/www/f"
start_nginx
free_port PC
free_port PR
write_proxyd_conf
write_service conn "$PC" "$NGINX_PORT" '<source-limits connections="1/m" burst="1"/>'
cat >"$T/policy/req.xml" <<EOF
<service name="req" analyser="http">
  <listen address="127.0.0.1" port="$PR" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <source-limits sessions="1" requests="1/m"/>
</service>
EOF
PROXYD_PORTS+=("$PR")
start_proxyd
A=http://127.0.0.1:$ADMIN_PORT

assert_metric eq proxyd_source_limit_entries_max '' 65536
assert_metric eq proxyd_source_limit_entries '' 0

# conn: sources .2, .3, .4 each connect twice: 3 served, 3 refused
for src in 127.0.0.2 127.0.0.3 127.0.0.4; do
    for i in 1 2; do
        curl -s --max-time 5 --interface "$src" -o /dev/null "http://127.0.0.1:$PC/f" || true
    done
done
assert_metric eq proxyd_limited_total 'service="conn",analyser="plug",limit="connections"' 3
# req: source .5: two requests on one connection (the second 429), then
# (holding a session) a second connection, refused by sessions=
python3 - "$PR" <<'EOF' >"$T/req.out"
import socket, sys
port = int(sys.argv[1])
a = socket.socket(); a.bind(("127.0.0.5", 0)); a.settimeout(10)
a.connect(("127.0.0.1", port))
def get(s):
    s.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got or not (got.endswith(b"ok\n") or got.endswith(b"</html>\n")):
        d = s.recv(65536)
        if not d:
            break
        got += d
    return got[9:12].decode()
print(get(a), get(a))
b = socket.socket(); b.bind(("127.0.0.5", 0)); b.settimeout(10)
b.connect(("127.0.0.1", port))
got = b""
while True:
    d = b.recv(65536)
    if not d:
        break
    got += d
print(got[9:12].decode())
EOF
assert_eq "$(tr '\n' ' ' <"$T/req.out")" "200 429 429 " "req: 200, the request over requests=, the session over sessions="
assert_metric eq proxyd_limited_total 'service="req",analyser="http",limit="requests"' 1
assert_metric eq proxyd_limited_total 'service="req",analyser="http",limit="sessions"' 1
# four sources, one entry each (conn's three, req's one)
assert_metric eq proxyd_source_limit_entries '' 4

curl -s --max-time 5 "$A/api/services" >"$T/services.json"
python3 - "$T/services.json" <<'EOF' || fail "/api/services: $(cat "$T/services.json")"
import json, sys
d = json.load(open(sys.argv[1]))
sv = {s["name"]: s for s in d["services"]}
assert sv["conn"]["limited"] == {"sessions": 0, "connections": 3, "requests": 0, "transfers": 0, "untracked": 0}, sv["conn"]["limited"]
assert sv["req"]["limited"] == {"sessions": 1, "connections": 0, "requests": 1, "transfers": 0, "untracked": 0}, sv["req"]["limited"]
assert d["source_limits"] == {"entries": 4, "size": 65536, "bytes": 4194304}, d["source_limits"]
EOF
info "/api/services: limited per service and the table's occupancy"

timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$T/chromium" --virtual-time-budget=4000 --dump-dom "$A/" \
    >"$T/dom.html" 2>>"$T/chromium.log" || fail "chromium failed: $(tail -n 5 "$T/chromium.log")"
assert_grep "$T/dom.html" '<body data-loaded="yes">' "the page never loaded the API"
python3 - "$T/dom.html" <<'EOF' || fail "the page does not show the source limits (DOM in $T/dom.html)"
import re, sys
dom = open(sys.argv[1]).read()
body = dom.split('id="limited"', 1)[1].split("</table>", 1)[0]
rows = dict(re.findall(r'<tr data-service="([^"]+)">(.*?)</tr>', body))
assert set(rows) == {"conn", "req"}, rows
def cell(svc, k):
    return re.search(r'data-k="%s">(\d+)<' % k, rows[svc]).group(1)
assert cell("conn", "connections") == "3", rows["conn"]
assert cell("req", "requests") == "1" and cell("req", "sessions") == "1", rows["req"]
kv = re.search(r'id="srctable"[^>]*>([^<]*)<', dom).group(1)
assert kv.startswith("4 / 65536 entries"), kv
print("limited rows:", sorted(rows), "table:", kv)
EOF
info "the status page shows the refusals and the table"
info "ok"
