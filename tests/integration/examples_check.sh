#!/usr/bin/env bash
# The shipped configuration is the users' starting point: `proxyd --check`
# accepts conf/proxyd.xml, every policy/examples/*.xml (through a daemon
# file pointing at them) and the zoned gateway of policy/examples/gateway/,
# whose --trace answers match its README's table.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
setup

check_ok() { # FILE: --check passes and says OK
    "$PROXYD" --check -c "$1" >"$T/check.out" 2>&1 || { cat "$T/check.out" >&2; fail "proxyd --check -c $1 failed"; }
    assert_grep "$T/check.out" ": OK, " "--check -c $1 says OK"
}

check_ok "$REPO_DIR/conf/proxyd.xml"
printf '<proxyd><policies dir="%s/policy/examples"/></proxyd>\n' "$REPO_DIR" >"$T/examples.xml"
check_ok "$T/examples.xml"
n=$(ls "$REPO_DIR"/policy/examples/*.xml | wc -l)
assert_grep "$T/check.out" ", $n services$" "every example file is a service"
for f in http-reverse ftp-readonly r66-partners; do
    assert_grep "$T/check.out" "\($REPO_DIR/policy/examples/$f\.xml\)$" "example $f is loaded"
done

GW=$REPO_DIR/policy/examples/gateway/proxyd.xml
check_ok "$GW"
trace() { # CLIENT DEST: the verdict line of the 50080 listener
    "$PROXYD" --check -c "$GW" --trace "$1" "$2" >"$T/trace.out" 2>&1 || { cat "$T/trace.out" >&2; fail "--trace $1 $2 failed"; }
    sed -nE 's/^  => //p' "$T/trace.out"
}
assert_eq "$(trace 198.18.0.10 198.19.2.5:80)" "lan-dmz-web takes it" "lan -> web server"
assert_eq "$(trace 198.18.0.10 203.0.113.7:80)" "lan-internet takes it" "lan -> internet"
assert_eq "$(trace 198.18.0.20 198.19.2.5:80)" "admins-dmz takes it" "admins -> web server"
assert_eq "$(trace 198.18.0.20 198.19.2.99:80)" "admins-dmz takes it" "admins -> other dmz host"
assert_eq "$(trace 198.18.0.10 198.19.2.99:80)" "refused: no service for this client and server" "lan -> other dmz host"
assert_eq "$(trace 203.0.113.9 198.19.2.5:80)" "refused: no service for this client and server" "internet -> dmz"
info "PASS"
