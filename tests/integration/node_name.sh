#!/usr/bin/env bash
# <node name>: which node of a cluster a line, a record, a scrape is from.
#   1. <node name="gw-7">: every line proxyd writes to its log (startup,
#      session-end of a plug and an http session, http-request) carries
#      node=gw-7 after its timestamp; the audit record of the http body
#      has "node":"gw-7" after its ts; /metrics has
#      proxyd_node_info{node="gw-7"} 1 (and no other series carries
#      node=); /status and /api/services say "node":"gw-7"; the status
#      page has a place for it.
#   2. A reload that names another node keeps the name (a warning says a
#      restart takes it).
#   3. No <node>: the host name.
#   4. A name with a character a name may not have is refused as file:line.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/http_lib.sh"
need_cmds nginx curl python3
setup

plug_and_http_origin "<audit/>"
AUDIT=$T/audit.json
write_proxyd_conf "" "<node name=\"gw-7\"/> <audit target=\"file:$AUDIT\"/>"

info "---- 1. <node name=\"gw-7\">"
start_proxyd
assert_eq "$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")" "0 200" "plug request"
assert_eq "$(http_get "http://127.0.0.1:$P2/index.html" "$T/out")" "0 200" "http request"
wait_grep "$PROXYD_LOG" 'session-end service=www ' "$ASYNC_WAIT" || fail "no session-end line for www"
wait_grep "$PROXYD_LOG" 'session-end service=web ' "$ASYNC_WAIT" || fail "no session-end line for web"
wait_grep "$AUDIT" '"service":"www"' "$ASYNC_WAIT" || fail "no audit record for www: $(cat "$AUDIT" 2>/dev/null)"
# every line of proxyd's own log (not the few written before it opens)
n_all=$(grep -Ec '^[0-9T:.-]+Z ' "$PROXYD_LOG" || true)
n_node=$(grep -Ec '^[0-9T:.-]+Z node=gw-7 (info|notice|warning|error|debug) ' "$PROXYD_LOG" || true)
((n_all >= 5)) || fail "only $n_all log lines"
assert_eq "$n_node" "$n_all" "log lines with node=gw-7 after the timestamp"
for ev in 'session-end service=web ' 'session-end service=www ' 'http-request ' 'proxyd [0-9.]+ started: pid'; do
    assert_grep "$PROXYD_LOG" "^[0-9T:.-]+Z node=gw-7 info (#[0-9]+ )?$ev" "node=gw-7 on the '$ev' line"
done
python3 - "$AUDIT" <<'PY' || fail "audit record: see above"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
www = [r for r in recs if r.get("service") == "www"]
if not www or any(r.get("node") != "gw-7" for r in recs):
    sys.exit("audit records without node gw-7: %r" % recs)
if list(www[0])[:2] != ["ts", "node"]:
    sys.exit("node is not the record's second field: %r" % list(www[0]))
print("[node_name] audit record: %s" % json.dumps(www[0])[:160])
PY
metrics_fetch >"$T/metrics"
assert_eq "$(grep -c '^proxyd_node_info' "$T/metrics" || true)" 1 "proxyd_node_info series"
assert_grep "$T/metrics" '^proxyd_node_info\{node="gw-7"\} 1$' "proxyd_node_info"
assert_grep "$T/metrics" '^# TYPE proxyd_node_info gauge$' "proxyd_node_info's type"
assert_eq "$(grep -v '^proxyd_node_info' "$T/metrics" | grep -c 'node=' || true)" 0 "other series with a node label"
for path in /status /api/services; do
    curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT$path" >"$T/json"
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["node"])' "$T/json") ||
        fail "$path: not JSON with a node: $(head -c 300 "$T/json")"
    assert_eq "$got" gw-7 "$path: node"
done
curl -sS --max-time 5 "http://127.0.0.1:$ADMIN_PORT/" >"$T/page.html"
assert_grep "$T/page.html" 'id="node"' "the status page's node field"
assert_grep "$T/page.html" 'getElementById\("node"\)\.textContent = d\.node' "the status page fills it from /api/services"

info "---- 2. reload with another name"
sed -i 's|<node name="gw-7"/>|<node name="gw-8"/>|' "$PROXYD_CONF"
kill -HUP "$PROXYD_PID"
assert_log 'node=gw-7 warning reload: node name change takes a restart \(still gw-7\)' 5
assert_log 'node=gw-7 info reload done' 5
assert_metric eq proxyd_node_info 'node="gw-7"' 1
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"

info "---- 3. no <node>: the host name"
host=$(hostname | cut -c1-64 | tr -c 'A-Za-z0-9._\n-' '-')
sed -i 's|<node name="gw-8"/>||' "$PROXYD_CONF"
PROXYD_LOG=$T/proxyd-host.log
start_proxyd
assert_eq "$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")" "0 200" "plug request"
wait_grep "$PROXYD_LOG" 'session-end service=web ' "$ASYNC_WAIT" || fail "no session-end line for web"
assert_grep "$PROXYD_LOG" "^[0-9T:.-]+Z node=$host info #[0-9]+ session-end service=web " "node= the host name"
assert_metric eq proxyd_node_info "node=\"$host\"" 1
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"

info "---- 4. a bad name"
sed -i "s|<policies|<node name=\"gw 7\"/><policies|" "$PROXYD_CONF"
line=$(grep -n 'node name="gw 7"' "$PROXYD_CONF" | cut -d: -f1)
rc=0
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "--check exit status with node name=\"gw 7\""
assert_grep "$T/check.out" "proxyd\\.xml:$line: node name=\"gw 7\": expected 1\\.\\.64 characters" "file:line for a bad node name"
info "PASS"
