#!/usr/bin/env bash
# <user name= group=>: started as root, proxyd runs as that user with only
# CAP_NET_ADMIN, CAP_NET_RAW and CAP_NET_BIND_SERVICE (permitted, effective
# and bounding sets, on every thread), no_new_privs, and root cannot come back.
#   1. /proc/PID/status: Uid/Gid, CapEff/CapPrm/CapBnd = 0x3400, NoNewPrivs.
#   2. traffic passes; a reload that adds a service on a port below 1024
#      binds it (CAP_NET_BIND_SERVICE kept) and relays through it.
#   3. files are read as the user on reload: a policy only root can read
#      fails the reload (file named, old config stays); root:GROUP 0640
#      passes. --check, run as root, reads as the user too.
#   4. a user that does not exist, or root, is refused as file:line.
#   5. without <user> a root proxyd stays root (and warns).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID == 0 ]] || skip "needs root (to start as root and drop to a user)"
need_cmds nginx curl python3 getent
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
    skip "needs the user nobody and the group nogroup"
setup
NOBODY_UID=$(id -u nobody)
NOGROUP_GID=$(getent group nogroup | cut -d: -f3)

make_file index.html 4096
SHA=$(sha256_of "$T/www/index.html")
start_nginx
free_port P1
write_proxyd_conf '' '<user name="nobody" group="nogroup"/>'
write_service web "$P1" "$NGINX_PORT"
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1 || fail "--check: $(cat "$T/check.out")"
start_proxyd

expect_ok() { # PORT LABEL
    local r
    r=$(http_get "http://127.0.0.1:$1/index.html" "$T/out")
    assert_eq "$r" "0 200" "$2: curl rc and HTTP status via port $1"
    assert_eq "$(sha256_of "$T/out")" "$SHA" "$2: body via port $1"
}
status_field() { awk -v f="$2:" '$1 == f { print $2; exit }' "/proc/$1/status"; }

info "---- 1. /proc/$PROXYD_PID/status"
grep -E '^(Uid|Gid|Groups|Cap[A-Za-z]+|NoNewPrivs):' "/proc/$PROXYD_PID/status" | tee "$T/status"
assert_eq "$(awk '$1 == "Uid:" { print $2 $3 $4 $5 }' "$T/status")" \
    "$NOBODY_UID$NOBODY_UID$NOBODY_UID$NOBODY_UID" "real/effective/saved/fs uid"
assert_eq "$(awk '$1 == "Gid:" { print $2 $3 $4 $5 }' "$T/status")" \
    "$NOGROUP_GID$NOGROUP_GID$NOGROUP_GID$NOGROUP_GID" "real/effective/saved/fs gid"
# bits 10, 12, 13: cap_net_bind_service, cap_net_admin, cap_net_raw
for f in CapEff CapPrm CapBnd; do
    assert_eq "$(status_field "$PROXYD_PID" $f)" 0000000000003400 "$f"
done
assert_eq "$(status_field "$PROXYD_PID" CapInh)" 0000000000000000 "CapInh"
assert_eq "$(status_field "$PROXYD_PID" CapAmb)" 0000000000000000 "CapAmb"
assert_eq "$(status_field "$PROXYD_PID" NoNewPrivs)" 1 "NoNewPrivs"
# capabilities are per thread: the workers and the log thread too
ntask=0
for task in /proc/"$PROXYD_PID"/task/*; do
    assert_eq "$(awk '$1 == "CapEff:" { print $2 }' "$task/status")" 0000000000003400 "CapEff of thread ${task##*/}"
    assert_eq "$(awk '$1 == "Uid:" { print $2 }' "$task/status")" "$NOBODY_UID" "uid of thread ${task##*/}"
    ntask=$((ntask + 1))
done
assert_ge "$ntask" 3 "threads checked (main, log, workers)"
assert_log "running as user nobody \\(uid $NOBODY_UID, gid $NOGROUP_GID\\), capabilities cap_net_bind_service,cap_net_admin,cap_net_raw=ep"
expect_ok "$P1" "after the drop"

info "---- 2. reload: a new service on a port below 1024"
LOW=""
for ((p = 990; p > 600; p--)); do
    mkdir -p "$_PORT_LOCK_DIR"
    mkdir "$_PORT_LOCK_DIR/$p" 2>/dev/null || continue
    if python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$p" 2>/dev/null; then
        _PORT_LOCKS+=("$p")
        LOW=$p
        break
    fi
    rmdir "$_PORT_LOCK_DIR/$p"
done
[[ -n $LOW ]] || fail "no free port below 1024"
# only a port the kernel keeps for CAP_NET_BIND_SERVICE proves anything
start=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)
((LOW < start)) || skip "net.ipv4.ip_unprivileged_port_start is $start: port $LOW needs no capability here"
write_service low "$LOW" "$NGINX_PORT"
kill -HUP "$PROXYD_PID"
assert_log "reload done: 2 services" 5
wait_listen "$LOW" 5 "$PROXYD_PID" || fail "after the reload, nothing listens on port $LOW"
expect_ok "$LOW" "privileged port $LOW added by a reload"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 1

info "---- 3. files are read as nobody on reload"
cp "$T/policy/low.xml" "$T/low.xml.good"
chmod 600 "$T/policy/low.xml"          # root:root 0600
sed -i 's/<target /<!-- changed --><target /' "$T/policy/low.xml"
kill -HUP "$PROXYD_PID"
assert_log "reload: .*low\\.xml.*Permission denied" 5
assert_log "reload failed" 5
assert_metric ge proxyd_config_reloads_total 'result="failed"' 1
expect_ok "$LOW" "the running config after a reload that could not read a file"
# --check as root reads as the user too, and says so
rc=0
"$PROXYD" --check -c "$PROXYD_CONF" >"$T/check2.out" 2>&1 || rc=$?
assert_eq "$rc" 1 "--check exit status with a policy only root can read"
assert_grep "$T/check2.out" "low\\.xml.*Permission denied" "--check names the unreadable file"
assert_grep "$T/check2.out" "as user nobody" "--check says which user it read as"
chgrp nogroup "$T/policy/low.xml"
chmod 640 "$T/policy/low.xml"          # root:nogroup 0640: the documented mode
kill -HUP "$PROXYD_PID"
assert_metric ge proxyd_config_reloads_total 'result="ok"' 2 5
expect_ok "$LOW" "after a reload of a root:nogroup 0640 policy"
proc_alive "$PROXYD_PID" || fail "proxyd died"
stop() {
    kill -TERM "$PROXYD_PID"
    wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit on SIGTERM"
    assert_eq "$WAIT_RC" 0 "exit status"
}
stop

info "---- 4. bad users are refused as file:line"
for u in 'name="no-such-user-px"' 'name="root"' 'name="nobody" group="no-such-group-px"' 'name="nobody" group="root"'; do
    write_proxyd_conf '' "<user $u/>"
    line=$(grep -n '<user ' "$PROXYD_CONF" | cut -d: -f1)
    rc=0
    "$PROXYD" --check -c "$PROXYD_CONF" >"$T/check3.out" 2>&1 || rc=$?
    assert_eq "$rc" 1 "--check exit status with <user $u/>"
    assert_grep "$T/check3.out" "proxyd\\.xml:$line: user " "<user $u/> reported at proxyd.xml:$line"
    info "  <user $u/>: $(grep -m1 'proxyd\.xml:' "$T/check3.out")"
done

info "---- 5. no <user>: a root proxyd stays root (off by default) and warns"
write_proxyd_conf
: >"$PROXYD_LOG"
start_proxyd
assert_eq "$(status_field "$PROXYD_PID" Uid)" 0 "uid without <user>"
assert_log "running as root"
expect_ok "$P1" "as root"
stop
info "PASS"
