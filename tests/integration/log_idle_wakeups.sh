#!/usr/bin/env bash
# An idle proxyd's log thread sleeps until a line is queued: over a 2 s
# idle window it wakes at most a handful of times (it polled every 50 ms:
# about 40), counted as voluntary context switches in
# /proc/PID/task/TID/status. A line queued after the window still reaches
# the log (the wake-up of a sleeping log thread works).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
setup
make_file 1k.bin 1K
start_nginx
free_port P
write_proxyd_conf
write_service web "$P" "$NGINX_PORT"
start_proxyd
# the start-up lines are written: the log thread has drained once
assert_log 'proxyd .* started: pid '

# THREAD-ID -> voluntary context switches, for every thread of proxyd
switches() {
    local t
    for t in /proc/"$PROXYD_PID"/task/*; do
        echo "${t##*/} $(cat "$t/comm") $(awk '/^voluntary_ctxt_switches:/ { print $2 }' "$t/status")"
    done
}
switches >"$T/before.txt"
sleep 2     # the idle window measured
switches >"$T/after.txt"
join "$T/before.txt" "$T/after.txt" | awk '{ printf "    %-8s %-14s %d\n", $1, $2, $5 - $3 }' >"$T/delta.txt"
info "wake-ups per thread over 2 s idle:"
cat "$T/delta.txt"
# every thread but the main one and the workers (whose timers are theirs):
# the log thread, found by what it does rather than by its name
busy=$(awk -v main="$PROXYD_PID" '$1 != main && $2 !~ /^px-worker-/ && $3 > 4' "$T/delta.txt")
[[ -z $busy ]] || fail "an idle non-worker thread woke more than 4 times in 2 s: $busy"
assert_grep "$T/delta.txt" ' px-log ' "no thread named px-log"

# a line after the idle window still gets out, in well under a second
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/1k.bin") || fail "curl failed"
assert_eq "$code" 200 "GET through proxyd"
assert_log 'session-end service=web ' 2
info "ok"
