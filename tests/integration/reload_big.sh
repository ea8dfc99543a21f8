#!/usr/bin/env bash
# A 10 MB policy (131 072 url rules): the reload parses off the main loop,
# so the admin endpoint answers while it runs (its /metrics comes back
# before the "reload done" line); the memory parsing took is given back
# (RSS after start and after each of three reloads stays far below the
# parse's peak); requests keep flowing with the policy's rules applied.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

printf 'ok\n' >"$T/www/index.html"
start_nginx
free_port P
write_proxyd_conf
python3 - "$T/policy/big.xml" "$P" "$NGINX_PORT" <<'PY'
import sys
path, port, target = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path, "w") as f:
    f.write('<service name="big" analyser="http">\n'
            '<listen address="127.0.0.1" port="%s"/>\n'
            '<target address="127.0.0.1" port="%s"/>\n<http>\n' % (port, target))
    for i in range(131072):
        f.write('<url host="h%06d.example.test" path="/p%06d/*" action="deny" status="403"/>\n' % (i, i))
    f.write('</http>\n</service>\n')
PY
PROXYD_PORTS+=("$P")
info "policy: $(stat -c %s "$T/policy/big.xml") bytes"
asan=no
ldd "$PROXYD" 2>/dev/null | grep libasan >/dev/null && asan=yes
# parsing 10 MB takes a second or two, several times that under ASan
START_TIMEOUT=60
start_proxyd
check_rss() { # LABEL: RSS comes back under 80 MB within 10 s
    local rss hwm deadline
    # A sanitizer build keeps freed memory in quarantine: no figure there.
    [[ $asan == yes ]] && return 0
    # The parse peaks near 190 MB; what the config itself holds is ~15.
    # The old configuration goes when the workers drop it: wait for it.
    deadline=$(($(date +%s) + 10))
    while rss=$(vm_kb "$PROXYD_PID" VmRSS); ((rss >= 80 * 1024)); do
        (($(date +%s) < deadline)) || fail "$1: RSS $rss KiB after 10 s: the parse's memory was not given back"
        sleep 0.2
    done
    hwm=$(vm_kb "$PROXYD_PID" VmHWM)
    info "$1: RSS $rss KiB (peak $hwm KiB)"
}
probe() { # the policy's rules apply, the rest passes
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'Host: h000007.example.test' "http://127.0.0.1:$P/p000007/x")" 403 "a url rule of the big policy"
    assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$P/index.html")" 200 "a request no rule matches"
}
probe
check_rss "after start"

for r in 1 2 3; do
    n0=$(grep -c 'reload done' "$PROXYD_LOG" || true)
    kill -HUP "$PROXYD_PID"
    wait_grep "$PROXYD_LOG" 'SIGHUP: reloading' 5 || fail "reload $r did not start"
    t0=$(now_ms)
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$ADMIN_PORT/metrics")
    t1=$(now_ms)
    n1=$(grep -c 'reload done' "$PROXYD_LOG" || true)
    assert_eq "$code" 200 "reload $r: /metrics during the reload"
    info "reload $r: /metrics answered in $((t1 - t0)) ms while the policy was parsed"
    assert_eq "$n1" "$n0" "reload $r: 'reload done' lines when /metrics had answered (it waited for the reload)"
    deadline=$(($(date +%s) + 60))
    until (($(grep -c 'reload done' "$PROXYD_LOG" || true) > n0)); do
        (($(date +%s) < deadline)) || fail "reload $r did not finish within 60 s"
        sleep 0.1
    done
    assert_log "reload done: 1 service \(loaded in [0-9]+ ms\)"
    probe
    check_rss "after reload $r"
done
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
