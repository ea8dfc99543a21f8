#!/usr/bin/env bash
# 100 000 zones (bench/zonesgen.py, the most a daemon file may hold): proxyd
# --check accepts them and --trace still gives the generated pair to its
# service, and proxyd starts with them and relays a connection whose client
# is in one of them. Zone names were looked up by a linear scan, which made
# loading quadratic (14.5 s to --check, 24 s to start); outside a sanitizer
# build each must now take under 10 s (a generous bound: about 1 s here).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3 curl
setup

ZONES=100000
BOUND_S=10
sanitized=0
case "${PROXYD_SANITIZED:-}" in 1|ON|on|TRUE|true) sanitized=1 ;; esac

gen=$T/gen
mkdir -p "$gen"
python3 "$REPO_DIR/bench/zonesgen.py" "$gen" --zones "$ZONES" --services 50 --port 50999 \
    --client 198.18.1.2 --server 198.19.2.2 --section '' --upstream '' --prefix z >"$T/gen.txt"
want=$(sed -n 's/^service=//p' "$T/gen.txt")
[[ -n $want ]] || fail "zonesgen named no service: $(cat "$T/gen.txt")"
assert_eq "$(grep -c '<zone ' "$gen/zones.xml")" "$ZONES" "zones generated"

# --check and --trace on the generated services (transparent listeners, not started)
mkdir -p "$T/check/conf"
cp -r "$gen/policy" "$T/check/policy"
cat >"$T/check/conf/proxyd.xml" <<XML
<proxyd>
  <log target="stderr" level="warning"/>
  $(cat "$gen/zones.xml")
  <policies dir="../policy"/>
</proxyd>
XML
t0=$(now_ms)
timeout 300 "$PROXYD" --check -c "$T/check/conf/proxyd.xml" >"$T/check.out" 2>&1 \
    || fail "--check refused $ZONES zones: $(tail -n 5 "$T/check.out")"
check_ms=$(( $(now_ms) - t0 ))
info "--check of $ZONES zones: $check_ms ms"
timeout 300 "$PROXYD" --check -c "$T/check/conf/proxyd.xml" --trace 198.18.1.2 198.19.2.2:50999 \
    >"$T/trace.out" 2>&1 || fail "--trace failed: $(tail -n 5 "$T/trace.out")"
assert_grep "$T/trace.out" "^  => $want takes it\$" "--trace gives the pair to $want"

# start with them: a fixed service whose clients must be in a zone
start_py_server SRV_PORT <<'PY'
def handle(conn):
    conn.recv(4096)
    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")
PY
free_port LPORT
write_proxyd_conf '' "$(cat "$gen/zones.xml")"
write_service zoned "$LPORT" "$SRV_PORT" '' 'zone:internet'
t0=$(now_ms)
START_TIMEOUT=$(( sanitized ? 300 : 60 )) start_proxyd
start_ms=$(( $(now_ms) - t0 ))
info "start with $ZONES zones (until listening): $start_ms ms"
body=$(curl -sS --max-time 10 "http://127.0.0.1:$LPORT/") || fail "no answer through the zoned service"
assert_eq "$body" "hello" "answer through the zoned service"
assert_log 'session-end service=zoned .*client-zone=internet' 

if [[ $sanitized = 1 ]]; then
    info "sanitizer build: times not asserted (--check $check_ms ms, start $start_ms ms)"
else
    assert_lt "$check_ms" $((BOUND_S * 1000)) "--check of $ZONES zones in ms (bound ${BOUND_S} s)"
    assert_lt "$start_ms" $((BOUND_S * 1000)) "start with $ZONES zones in ms (bound ${BOUND_S} s)"
fi
info "OK"
