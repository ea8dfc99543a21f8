#!/usr/bin/env bash
# A file log target is reopened for logrotate without depending on the
# configuration being accepted:
#   1. SIGUSR1 reopens it and nothing else (no reload): after mv, the
#      next session's line is in a new file, the moved file gets nothing
#      more, and no "SIGHUP: reloading" line appears.
#   2. SIGHUP with a broken policy (the reload is refused) still reopens:
#      after mv, "reload failed" and the next session's line are in a new
#      file, the moved file gets nothing more.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file index.html 1024
start_nginx
free_port P1
write_proxyd_conf "" ""
sed -i 's|<log target="stderr" level="info"/>|<log target="file:proxyd-file.log" level="info"/>|' "$PROXYD_CONF"
write_service web "$P1" "$NGINX_PORT"
start_proxyd
FILE_LOG=$(dirname "$PROXYD_CONF")/proxyd-file.log
wait_grep "$FILE_LOG" "started: pid" 5 || fail "no start line in $FILE_LOG"

# rotate SIGNAL SUFFIX EXPECT_RE: mv the file away, send SIGNAL, wait for
# EXPECT_RE in a new file, make one session, check where its line went.
rotate() {
    local sig=$1 old=$FILE_LOG.$2 expect=$3 size n
    mv "$FILE_LOG" "$old"
    kill "-$sig" "$PROXYD_PID"
    wait_grep "$FILE_LOG" "$expect" 10 || {
        tail -n 5 "$old" >&2
        fail "$sig: no /$expect/ in a new $FILE_LOG"
    }
    size=$(stat -c %s "$old")
    assert_eq "$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")" "0 200" "request after $sig"
    wait_grep "$FILE_LOG" "session-end service=web " "$ASYNC_WAIT" ||
        fail "$sig: the session after rotation was not logged to the new file"
    assert_eq "$(stat -c %s "$old")" "$size" "bytes written to the moved file after the reopen ($sig)"
    n=$(grep -c "session-end" "$FILE_LOG")
    assert_eq "$n" 1 "session lines in the new file after $sig"
    proc_alive "$PROXYD_PID" || fail "proxyd died on $sig"
}

info "---- 1. SIGUSR1 reopens, does not reload"
rotate USR1 1 "SIGUSR1: log file .* reopened"
assert_no_grep "$FILE_LOG" "reloading" "SIGUSR1 must not reload"
assert_no_grep "$FILE_LOG.1" "reloading" "SIGUSR1 must not reload"

info "---- 2. SIGHUP with a refused configuration still reopens"
echo '<service name="broken"' >"$T/policy/zz-broken.xml"
rotate HUP 2 "reload failed"
assert_grep "$FILE_LOG" "SIGHUP: log file .* reopened" "SIGHUP says it reopened"

kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit"
assert_eq "$WAIT_RC" 0 "exit status"
info "PASS"
