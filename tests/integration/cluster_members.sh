#!/usr/bin/env bash
# The cluster's members as an engine knows them (<cluster members-file>):
# what the file says shows in /metrics (proxyd_cluster_member, and the
# file's mtime), in /status and /api/services ("cluster") and in the status
# page's header (chromium's DOM); a rewrite (a node draining, another gone)
# shows at the next scrape; malformed lines and comments are skipped; a
# missing file shows no member and a 0 timestamp. The node says its own name
# beside it (proxyd_node_info).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds curl python3 chromium promtool
setup

write_proxyd_conf "" '<node name="gw2"/><cluster members-file="members"/>'
M=$T/conf/members
cat >"$M" <<'EOF'
# written from the routers' FRR
gw1 up
gw2 up extra words are ignored
bad/name up
gw3 UP
gw4
gw5 draining
EOF
free_port PORT
free_port BACKEND
write_service plug "$PORT" "$BACKEND"
start_proxyd
A=http://127.0.0.1:$ADMIN_PORT

assert_eq "$(metric_value proxyd_node_info 'node="gw2"')" 1 "the node's own name"
# members NAME=STATE...: the members /metrics shows, sorted
members() { metrics_fetch | sed -nE 's/^proxyd_cluster_member\{node="([^"]*)",state="([^"]*)"\} 1$/\1=\2/p' | sort | tr '\n' ' '; }
assert_eq "$(members)" "gw1=up gw2=up gw5=draining " "members in /metrics"
mtime=$(stat -c %Y "$M")
metrics_fetch >"$T/scrape.txt"
promtool check metrics <"$T/scrape.txt" >"$T/promtool.out" 2>&1 ||
    { cat "$T/promtool.out" >&2; fail "promtool check metrics failed"; }
assert_eq "$(metric_value proxyd_cluster_members_updated_timestamp_seconds)" "$mtime" "the file's mtime"
curl -s --max-time 3 "$A/status" >"$T/status.json"
python3 - "$T/status.json" <<'EOF' || fail "/status has no cluster: $(cat "$T/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["node"] == "gw2", d["node"]
assert [(m["node"], m["state"]) for m in d["cluster"]["members"]] == [
    ("gw1", "up"), ("gw2", "up"), ("gw5", "draining")], d["cluster"]
EOF
curl -s --max-time 3 "$A/api/services" | grep -q '"cluster":{"updated":[0-9]*,"members":\[{"node":"gw1","state":"up"}' ||
    fail "/api/services has no cluster member"

info "---- gw1 drains, gw5 is gone: the next scrape says so"
printf 'gw1 draining\ngw2 up\ngw5 gone\n' >"$M.new"
touch -d @$((mtime + 5)) "$M.new"
mv "$M.new" "$M"
assert_eq "$(members)" "gw1=draining gw2=up gw5=gone " "members after the rewrite"
assert_eq "$(metric_value proxyd_cluster_members_updated_timestamp_seconds)" "$((mtime + 5))" "the new mtime"

info "---- the status page's header"
timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$T/chromium" --virtual-time-budget=4000 \
    --dump-dom "$A/" >"$T/dom.html" 2>>"$T/chromium.log" || fail "chromium failed: $(tail -n 5 "$T/chromium.log")"
assert_grep "$T/dom.html" '<body data-loaded="yes">' "the page never loaded the API"
grep -qE '<span class="kv" id="cluster-kv">cluster <b id="cluster"[^>]*>gw1 draining, gw2 up, gw5 gone</b></span>' "$T/dom.html" ||
    fail "the header does not show the members: $(grep -o '<span class="kv" id="cluster-kv".\{0,200\}' "$T/dom.html")"

info "---- no file: no member, timestamp 0"
rm -f "$M"
assert_eq "$(members)" "" "members without the file"
assert_eq "$(metric_value proxyd_cluster_members_updated_timestamp_seconds)" 0 "the timestamp without the file"
curl -s --max-time 3 "$A/status" | grep -q '"cluster":{"updated":0,"members":\[\]}' || fail "/status without the file"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "ok"
