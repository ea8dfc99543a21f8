#!/usr/bin/env bash
# ab through a plug service, without and with keep-alive: no failed request,
# then accepted-sessions metric and active sessions back to 0.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 ab
setup

make_file 10k.bin 10K
start_nginx
free_port P
write_proxyd_conf
write_service ab "$P" "$NGINX_PORT"
start_proxyd

URL="http://127.0.0.1:$P/10k.bin"

run_ab() { # label, ab args...
    local label=$1 out=$T/ab.$1 rc=0
    shift
    info "ab $* $URL"
    timeout 120 ab -s 30 "$@" "$URL" >"$out" 2>&1 || rc=$?
    grep -E '^(Complete requests|Failed requests|Non-2xx responses|Requests per second|Keep-Alive requests):' "$out" | sed "s/^/[$label] /" || true
    if ((rc != 0)); then
        tail -n 15 "$out" >&2
        fail "ab ($label) exited with status $rc"
    fi
    assert_grep "$out" '^Complete requests:[[:space:]]+5000$' "ab ($label): Complete requests is not 5000"
    assert_grep "$out" '^Failed requests:[[:space:]]+0$' "ab ($label): Failed requests is not 0"
    assert_no_grep "$out" '^Non-2xx responses:[[:space:]]+[1-9]' "ab ($label): some responses were not 2xx"
    assert_grep "$out" '^Document Length:[[:space:]]+10240 bytes$' "ab ($label): unexpected document length"
}

run_ab close -n 5000 -c 100
run_ab keepalive -k -n 5000 -c 100
assert_grep "$T/ab.keepalive" '^Keep-Alive requests:[[:space:]]+[1-9]' "ab -k: no keep-alive request went through"

assert_metric ge proxyd_sessions_accepted_total '' 5000
assert_metric eq proxyd_sessions_active '' 0 5
# metric_required VAR NAME: store the value of metric NAME in VAR, or fail
# naming it (a metric missing from /metrics, or /metrics not answering, must
# not pass as 0 or skip the check)
metric_required() {
    local __var=$1 v
    v=$(metric_value "$2")
    if ! [[ $v =~ ^[0-9]+$ ]]; then
        echo "---- metric names in http://127.0.0.1:$ADMIN_PORT/metrics:" >&2
        { metrics_fetch || echo "(could not fetch it)"; } | awk '!/^#/ && NF { sub(/[{ ].*/, ""); print }' | sort -u | tr '\n' ' ' >&2
        echo >&2
        fail "metric $2 is missing from http://127.0.0.1:$ADMIN_PORT/metrics (got '$v'): cannot check that every accepted session logged its end"
    fi
    printf -v "$__var" '%s' "$v"
}
n=$(grep -c 'session-end service=ab ' "$PROXYD_LOG" || true)
dropped="" acc=""
metric_required dropped proxyd_log_dropped_total
info "session-end lines: $n, proxyd_log_dropped_total: $dropped"
# every accepted session ends with exactly one line unless the log ring dropped it
metric_required acc proxyd_sessions_accepted_total
deadline=$(($(now_ms) + 5000))
while n=$(grep -c 'session-end service=ab ' "$PROXYD_LOG" || true); ((n + dropped < acc)) && (($(now_ms) < deadline)); do
    sleep 0.1
done
((n + dropped == acc)) ||
    fail "session-end lines ($n) + dropped log lines ($dropped) != accepted sessions ($acc)"
assert_no_grep "$PROXYD_LOG" 'session-end service=ab .* end=(client-error|server-error|connect-|idle-timeout|denied|shutdown)' \
    "some ab sessions ended abnormally"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
