#!/usr/bin/env bash
# The pidfile of a proxyd that drops to <user> is removed at a clean stop
# (the unprivileged daemon unlinks it, which takes a directory it may
# write):
#   1. a directory the test made, owned by the user: written with the
#      daemon's pid, gone after proxyd -s stop.
#   2. a directory that does not exist yet: proxyd makes it, owned by the
#      user; the file is gone after SIGTERM.
#   3. systemd's RuntimeDirectory (root's, named by $RUNTIME_DIRECTORY):
#      given to the user at start; the file is gone after SIGTERM.
#   4. a root-owned directory that is none of those: proxyd warns at start
#      that the file will stay, and leaves the directory root's.
#   5. 3 with the capabilities of the shipped unit
#      (deploy/systemd/proxyd.service.in: its CapabilityBoundingSet and
#      NoNewPrivileges, applied by setpriv as systemd would): no CAP_DAC_OVERRIDE,
#      so root may not write in the directory once it is the user's. No
#      chown failure, no warning; the file is gone after SIGTERM.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID == 0 ]] || skip "needs root (proxyd drops to nobody)"
need_cmds nginx setpriv
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
    skip "needs the user nobody and the group nogroup"
setup

make_file index.html 100
start_nginx
free_port P
write_service web "$P" "$NGINX_PORT"

# run_once DIR [ENV...]: start with the pidfile in DIR, check it, stop
# with SIGTERM (or -s stop when STOP_CMD=1); the file must be gone.
run_once() {
    local dir=$1 pidf=$1/proxyd.pid rc
    shift
    write_proxyd_conf '' "<user name=\"nobody\" group=\"nogroup\"/>
  <pidfile path=\"$pidf\"/>"
    PROXYD_LOG=$T/proxyd-$(basename "$dir").log
    ${WRAP:-} env "$@" "$PROXYD" -c "$PROXYD_CONF" >>"$PROXYD_LOG" 2>&1 &
    PROXYD_PID=$!
    track_pid "$PROXYD_PID"
    wait_listen "$P" 5 "$PROXYD_PID" || fail "proxyd did not start: $(tail -n 5 "$PROXYD_LOG")"
    assert_log "running as user nobody" 5
    assert_eq "$(cat "$pidf")" "$PROXYD_PID" "the pidfile in $dir holds the daemon's pid"
    if [[ ${STOP_CMD:-0} == 1 ]]; then
        rc=0; "$PROXYD" -c "$PROXYD_CONF" -s stop >"$T/stop.out" 2>&1 || rc=$?
        assert_eq "$rc" 0 "proxyd -s stop: $(cat "$T/stop.out")"
    else
        kill -TERM "$PROXYD_PID"
    fi
    wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"
    assert_eq "$WAIT_RC" 0 "exit status"
    [[ ! -e $pidf ]] || fail "$pidf is still there after a clean stop (owner of $dir: $(stat -c %U "$dir"))"
    info "$dir: pidfile removed"
}

info "---- 1. a directory owned by the user"
mkdir "$T/run-user"
chown nobody:nogroup "$T/run-user"
STOP_CMD=1 run_once "$T/run-user"

info "---- 2. a directory proxyd makes"
run_once "$T/run-new"
assert_eq "$(stat -c %U:%G "$T/run-new")" "nobody:nogroup" "owner of the directory proxyd made"

info "---- 3. systemd's RuntimeDirectory"
mkdir "$T/run-rt"
run_once "$T/run-rt" RUNTIME_DIRECTORY="$T/other:$T/run-rt"
assert_eq "$(stat -c %U "$T/run-rt")" "nobody" "owner of the RuntimeDirectory"

info "---- 4. any other root-owned directory: a warning, left as it is"
mkdir "$T/run-root"
write_proxyd_conf '' "<user name=\"nobody\" group=\"nogroup\"/>
  <pidfile path=\"$T/run-root/proxyd.pid\"/>"
PROXYD_LOG=$T/proxyd-root.log
start_proxyd
assert_log "warning: pidfile $T/run-root/proxyd.pid: user nobody cannot write $T/run-root, so the file will stay" 5
assert_eq "$(stat -c %U "$T/run-root")" "root" "owner of a directory that is not proxyd's"
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not stop"

info "---- 5. the RuntimeDirectory with the shipped unit's capabilities"
UNIT=$REPO_DIR/deploy/systemd/proxyd.service.in
SETPRIV=$(unit_setpriv "$UNIT")
info "setpriv $SETPRIV (the unit's CapabilityBoundingSet, NoNewPrivileges)"
mkdir "$T/run-unit"
WRAP="setpriv $SETPRIV" run_once "$T/run-unit" RUNTIME_DIRECTORY="$T/run-unit"
assert_eq "$(stat -c %U "$T/run-unit")" "nobody" "owner of the RuntimeDirectory under the unit's capabilities"
assert_no_grep "$PROXYD_LOG" 'chown|warning: pidfile' "a pidfile complaint under the unit's capabilities"
info "PASS"
