#!/usr/bin/env bash
# proxyd -s reload|stop through <pidfile>: the running daemon's pid is in
# the file; a second daemon on it is refused; -s reload checks first (a
# broken policy is reported and no signal is sent) then reloads; -s stop
# returns once the daemon is gone and the file with it; with no daemon, or
# a stale file, -s says so and fails; a stale file does not stop a start.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl
setup

make_file index.html 1024
start_nginx
free_port P
write_proxyd_conf '' "<pidfile path=\"$T/run/proxyd.pid\"/>"
mkdir -p "$T/run"
write_service web "$P" "$NGINX_PORT"
start_proxyd
PIDF=$T/run/proxyd.pid
wait_grep "$PROXYD_LOG" 'proxyd .* started' 5 || fail "proxyd did not say it started"
assert_eq "$(cat "$PIDF")" "$PROXYD_PID" "the pidfile holds the daemon's pid"

# a second daemon on the same pidfile
rc=0; "$PROXYD" -c "$PROXYD_CONF" >"$T/second.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "a second proxyd on the same pidfile exits 1"
assert_grep "$T/second.out" "proxyd is already running as pid $PROXYD_PID" "the second one says why"
assert_eq "$(cat "$PIDF")" "$PROXYD_PID" "the pidfile still names the first"

# -s reload with a broken policy: reported, nothing sent
cp "$T/policy/web.xml" "$T/web.good"
sed -i 's|<listen |<bogus/><listen |' "$T/policy/web.xml"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/s1.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s reload of a broken configuration exits 1"
assert_grep "$T/s1.out" "web\.xml:[0-9]+: .*bogus" "the error is reported as file:line"
assert_grep "$T/s1.out" "not reloading" "and no reload is asked for"
assert_no_grep "$PROXYD_LOG" 'SIGHUP: reloading' "the daemon got a SIGHUP"

# -s reload of a good one
cp "$T/web.good" "$T/policy/web.xml"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/s2.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s reload exits 0"
assert_grep "$T/s2.out" "sent SIGHUP to pid $PROXYD_PID" "-s reload names the pid"
wait_grep "$PROXYD_LOG" 'reload done' 10 || fail "the daemon did not reload"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P/index.html")" 200 "a request after the reload"

# -s stop: returns once it is gone
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s stop >"$T/s3.out" 2>&1 || rc=$?
assert_eq "$rc" 0 "-s stop exits 0"
proc_alive "$PROXYD_PID" && fail "proxyd still runs after -s stop returned"
[[ ! -e $PIDF ]] || fail "the pidfile is left after a clean stop"

# nothing running
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/s4.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s reload with no daemon exits 1"
assert_grep "$T/s4.out" "proxyd is not running" "and says so"
# a stale pidfile: -s refuses it, a start replaces it
echo 4194303 >"$PIDF"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s stop >"$T/s5.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "-s stop with a stale pidfile exits 1"
assert_grep "$T/s5.out" "not a running proxyd \(a stale file\)" "and says the file is stale"
start_proxyd
assert_eq "$(cat "$PIDF")" "$PROXYD_PID" "a start replaces a stale pidfile"
info "PASS"
