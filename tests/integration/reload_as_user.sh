#!/usr/bin/env bash
# proxyd -s reload checks the configuration as the <user> the daemon reads
# its files as, not as root who runs the command:
#   1. A TLS key made readable by root alone after the start: -s reload
#      exits 1 naming the key file, the reason (Permission denied) and the
#      user; no SIGHUP reaches the daemon (it logs no reload).
#   2. The key readable by the user's group again: -s reload sends SIGHUP
#      and the daemon reloads.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID == 0 ]] || skip "needs root (proxyd drops to nobody; the check must read as nobody)"
need_cmds nginx openssl
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
    skip "needs the user nobody and the group nogroup"
setup
source "$(dirname "$0")/tls_lib.sh"

P=$T/pki
tls_self leaf localhost DNS:localhost
chmod 755 "$P"
chgrp nogroup "$P/leaf.key"
chmod 640 "$P/leaf.key"              # root:nogroup 0640: the documented mode
make_file index.html 100
start_nginx
free_port PT
mkdir -p "$T/run"
write_proxyd_conf '' "<user name=\"nobody\" group=\"nogroup\"/>
  <pidfile path=\"$T/run/proxyd.pid\"/>"
cat >"$T/policy/tls.xml" <<EOF
<service name="tls" analyser="plug">
  <listen address="127.0.0.1" port="$PT" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <tls side="client" mode="terminate" cert="$P/leaf.pem" key="$P/leaf.key"/>
</service>
EOF
PROXYD_PORTS+=("$PT")
start_proxyd
assert_log "running as user nobody" 5

info "---- 1. a key only root can read: refused, no SIGHUP"
chmod 600 "$P/leaf.key"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/s1.out" 2>&1 || rc=$?
cat "$T/s1.out"
assert_eq "$rc" 1 "-s reload with a key nobody cannot read exits 1"
assert_grep "$T/s1.out" "tls\\.xml:[0-9]+: .*key=\"$P/leaf\\.key\": Permission denied" "the file and the reason"
assert_grep "$T/s1.out" "as user nobody" "which user it read as"
assert_grep "$T/s1.out" "not reloading" "says it sends nothing"
assert_no_grep "$T/s1.out" "sent SIGHUP" "-s reload sent SIGHUP"
# A sentinel: a SIGUSR1 logged after the refusal shows every earlier
# signal has been handled.
kill -USR1 "$PROXYD_PID"
assert_log "SIGUSR1" 10
assert_no_grep "$PROXYD_LOG" "SIGHUP" "the daemon got a SIGHUP"

info "---- 2. readable by the group again: reloaded"
chmod 640 "$P/leaf.key"
rc=0; "$PROXYD" -c "$PROXYD_CONF" -s reload >"$T/s2.out" 2>&1 || rc=$?
cat "$T/s2.out"
assert_eq "$rc" 0 "-s reload of a readable configuration"
assert_grep "$T/s2.out" "sent SIGHUP to pid $PROXYD_PID" "sent"
assert_log "reload done" 10

kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 10 || fail "proxyd did not exit"
info "PASS"
