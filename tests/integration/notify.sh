#!/usr/bin/env bash
# sd_notify without systemd as PID 1: a python3 datagram socket stands in
# for systemd's NOTIFY_SOCKET and records every message with the state of
# the service port when it arrived.
#   1. READY=1 arrives once, after the service port listens (the listener
#      connects to it on receipt), with a STATUS=.
#   2. SIGHUP: RELOADING=1 (with MONOTONIC_USEC) then READY=1; the same for
#      a reload that fails (the old config still serves).
#   3. WATCHDOG_USEC=400000: WATCHDOG=1 at about every 200 ms.
#   4. SIGTERM: STOPPING=1, then a clean exit.
#   5. started by systemd as a unit (only when systemd is PID 1).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3
setup

make_file index.html 1024
start_nginx
free_port P1
write_proxyd_conf
write_service web "$P1" "$NGINX_PORT"

SOCK=$T/notify.sock
MSGS=$T/notify.log
cat >"$T/listen.py" <<'PY'
import os, socket, sys, time
path, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o777)
s.settimeout(1)
deadline = time.monotonic() + 120
with open(out, "a", buffering=1) as f:
    print("listening", file=f)
    while time.monotonic() < deadline:
        try:
            data = s.recv(4096).decode()
        except socket.timeout:
            continue
        # is the service port accepting connections at this moment?
        c = socket.socket()
        c.settimeout(1)
        up = c.connect_ex(("127.0.0.1", port)) == 0
        c.close()
        print("%.3f port=%s %s" % (time.monotonic(), "up" if up else "down",
              data.replace("\n", " ")), file=f)
        if "STOPPING=1" in data:
            break
PY
python3 "$T/listen.py" "$SOCK" "$P1" "$MSGS" &
track_pid $!
wait_grep "$MSGS" '^listening' "$START_WAIT_MIN" || fail "the notify listener did not start"

NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=400000 "$PROXYD" -c "$PROXYD_CONF" >>"$PROXYD_LOG" 2>&1 &
PROXYD_PID=$!
track_pid "$PROXYD_PID"
wait_grep "$MSGS" 'READY=1' "$START_WAIT_MIN" || fail "no READY=1 within $START_WAIT_MIN s; got: $(cat "$MSGS")"
line=$(grep -m1 'READY=1' "$MSGS")
info "1. $line"
[[ $line == *"port=up"* ]] || fail "READY=1 arrived before port $P1 listened: $line"
[[ $line == *"STATUS=running"* ]] || fail "READY=1 without STATUS=running: $line"
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "a request after READY=1"

info "2. SIGHUP (valid config)"
kill -HUP "$PROXYD_PID"
wait_grep "$MSGS" 'reloads: 1 ok' "$ASYNC_WAIT" || fail "no READY=1 after the reload; got: $(cat "$MSGS")"
grep -E 'RELOADING=1|READY=1' "$MSGS" | cut -d' ' -f3- | tr -s ' ' >"$T/seq"
assert_eq "$(sed -n 2p "$T/seq" | grep -c 'RELOADING=1 .*MONOTONIC_USEC=[0-9]')" 1 \
    "second message is RELOADING=1 with MONOTONIC_USEC ($(sed -n 2p "$T/seq"))"
assert_eq "$(sed -n 3p "$T/seq" | grep -c '^READY=1 STATUS=running; reloads: 1 ok, 0 failed')" 1 \
    "third message is READY=1 after the reload ($(sed -n 3p "$T/seq"))"
info "   $(sed -n 2p "$T/seq") / $(sed -n 3p "$T/seq")"

info "2b. SIGHUP (invalid policy): still RELOADING=1 then READY=1"
echo '<bogus/>' >"$T/policy/bad.xml"
kill -HUP "$PROXYD_PID"
wait_grep "$MSGS" 'reloads: 1 ok, 1 failed' "$ASYNC_WAIT" || fail "no READY=1 after the failed reload; got: $(cat "$MSGS")"
grep -E 'RELOADING=1|READY=1' "$MSGS" | cut -d' ' -f3- | tr -s ' ' >"$T/seq"
assert_eq "$(sed -n 4p "$T/seq" | grep -c '^RELOADING=1')" 1 "fourth message is RELOADING=1"
assert_eq "$(sed -n 5p "$T/seq" | grep -c '^READY=1')" 1 "fifth message is READY=1"
rm -f "$T/policy/bad.xml"
r=$(http_get "http://127.0.0.1:$P1/index.html" "$T/out")
assert_eq "$r" "0 200" "a request after the failed reload"

info "3. watchdog"
n0=$(grep -c 'WATCHDOG=1' "$MSGS" || true)
t0=$(now_ms)
deadline=$(($(date +%s) + 5))
while (($(grep -c 'WATCHDOG=1' "$MSGS" || true) < n0 + 5)) && (($(date +%s) < deadline)); do sleep 0.1; done
n1=$(grep -c 'WATCHDOG=1' "$MSGS" || true)
el=$(($(now_ms) - t0))
info "   $((n1 - n0)) pings in ${el} ms"
assert_ge "$((n1 - n0))" 5 "WATCHDOG=1 pings within 5 s at WATCHDOG_USEC=400000"
assert_lt "$el" 2500 "ms for 5 pings (expected one per 200 ms)"

info "4. SIGTERM"
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit on SIGTERM"
assert_eq "$WAIT_RC" 0 "exit status"
assert_grep "$MSGS" 'STOPPING=1 STATUS=draining' "STOPPING=1 on SIGTERM"

info "5. as a systemd unit"
if [[ $(cat /proc/1/comm 2>/dev/null) != systemd ]] || ! command -v systemd-run >/dev/null; then
    info "   SKIPPED: systemd is not PID 1 here ($(cat /proc/1/comm 2>/dev/null)); the NOTIFY_SOCKET listener above stands in for it"
else
    [[ $EUID == 0 ]] || { info "PASS (unit part skipped: not root)"; exit 0; }
    unit=proxyd-test-$$
    systemd-run --unit="$unit" --property=Type=notify --property=WatchdogSec=2 \
        --property=ExecReload="/bin/kill -HUP \$MAINPID" \
        "$PROXYD" -c "$PROXYD_CONF" >/dev/null 2>&1 || fail "systemd-run failed"
    trap 'systemctl stop "$unit" 2>/dev/null; _cleanup' EXIT
    assert_eq "$(systemctl is-active "$unit")" active "unit state after start (Type=notify: after READY=1)"
    is_listening "$P1" || fail "unit active but port $P1 not listening"
    systemctl reload "$unit" || fail "systemctl reload failed"
    assert_eq "$(systemctl is-active "$unit")" active "unit state after reload"
    systemctl stop "$unit" || fail "systemctl stop failed"
fi
info "PASS"
