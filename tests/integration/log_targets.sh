#!/usr/bin/env bash
# Log targets: file:PATH (relative to the config file) receives the session
# lines, and is reopened on SIGHUP so logrotate's "move then HUP" works;
# syslog receives them too (checked with a listener on /dev/log when this
# machine has no syslog daemon of its own, skipped otherwise).
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

r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "curl through proxyd"
wait_grep "$FILE_LOG" "session-end service=web .* end=" "$ASYNC_WAIT" ||
    fail "no session-end line in the file target $FILE_LOG"
assert_no_grep "$PROXYD_LOG" "session-end" "session lines must not go to stderr with target=file"

info "rotation: move the file away, SIGHUP, the next line goes to a new file"
mv "$FILE_LOG" "$FILE_LOG.1"
kill -HUP "$PROXYD_PID"
wait_grep "$FILE_LOG" "reload done" 5 || fail "no new log file after SIGHUP"
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "curl after rotation"
wait_grep "$FILE_LOG" "session-end service=web " "$ASYNC_WAIT" ||
    fail "the session after rotation was not logged to the new file"
n_old=$(grep -c "session-end" "$FILE_LOG.1")
assert_eq "$n_old" 1 "session lines in the rotated file"

kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit"
assert_eq "$WAIT_RC" 0 "exit status"

# ---- syslog
if [[ -e /dev/log ]]; then
    info "syslog part skipped: /dev/log belongs to this machine's syslog daemon"
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    info "syslog part skipped: creating /dev/log needs root"
    exit 0
fi
cat >"$T/syslogd.py" <<'PY'
import os, socket, sys
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(20)
with open(out, "ab", buffering=0) as f:
    try:
        while True:
            f.write(s.recv(65536) + b"\n")
    except socket.timeout:
        pass
PY
python3 "$T/syslogd.py" /dev/log "$T/syslog.out" &
SYSLOG_PID=$!
track_pid "$SYSLOG_PID"
# Chain onto lib.sh's cleanup, keeping the exit status it reports.
trap 'rc=$?; rm -f /dev/log; (exit $rc); _cleanup' EXIT
for _ in $(seq 50); do [[ -S /dev/log ]] && break; sleep 0.05; done
[[ -S /dev/log ]] || fail "test syslog listener did not create /dev/log"
sed -i 's|<log target="file:proxyd-file.log" level="info"/>|<log target="syslog" level="info"/>|' "$PROXYD_CONF"
: >"$PROXYD_LOG"
start_proxyd
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "curl through proxyd (syslog target)"
# the message starts with node= (syslog's own host field is the machine's)
wait_grep "$T/syslog.out" "proxyd\\[[0-9]+\\]: node=[A-Za-z0-9._-]+ #[0-9]+ session-end service=web " "$ASYNC_WAIT" ||
    fail "no session-end message reached syslog: $(head -c 600 "$T/syslog.out" 2>/dev/null)"
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit"
rm -f /dev/log
info "ok"
