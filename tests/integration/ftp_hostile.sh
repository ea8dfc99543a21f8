#!/usr/bin/env bash
# FTP replies from a hostile (but RFC 959-valid) server, directly and
# through proxyd, must agree (ftp_hostile.py says how): multi-line replies
# with odd inner lines, long lines, 125/150 and 226/250 in both orders
# around the data, 227 in every spelling (its address on any line of a
# multi-line one), replies in pieces, pipelined
# commands; proxyd with server-data keep (its PASV) and active (its PORT),
# and with path rules (its own PWD after the login).
# Seeded: the seed is printed, FTP_HOSTILE_SEED=N replays it (and
# FTP_HOSTILE_CASE=N one case of it).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds python3
setup

free_port SERVER_PORT
free_port PKEEP
free_port PACTIVE
free_port PPATHS
DATA_LO=$((20000 + RANDOM % 40 * 100))
DATA_HI=$((DATA_LO + 99))
write_proxyd_conf
for svc in "keep $PKEEP keep" "active $PACTIVE active" "paths $PPATHS keep"; do
    read -r name port mode <<<"$svc"
    rules=""
    [[ $name == paths ]] && rules='<path pattern="/secret/*" action="deny"/>'
    cat >"$T/policy/$name.xml" <<XML
<service name="$name" analyser="ftp">
  <listen address="127.0.0.1" port="$port" mode="fixed"/>
  <target address="127.0.0.1" port="$SERVER_PORT"/>
  <ftp server-data="$mode" data-ports="$DATA_LO-$DATA_HI">$rules</ftp>
</service>
XML
    PROXYD_PORTS+=("$port")
done
start_proxyd

rc=0
timeout 120 python3 "$(dirname "$0")/ftp_hostile.py" "$SERVER_PORT" "$PKEEP" \
    "$PACTIVE" "$PPATHS" "$DATA_LO" "$DATA_HI" "${FTP_HOSTILE_SECONDS:-15}" || rc=$?
proc_alive "$PROXYD_PID" || fail "proxyd died; log: $(tail -n 20 "$PROXYD_LOG")"
((rc == 0)) || fail "proxyd and the server directly disagree (above); log: $PROXYD_LOG"
info "PASS"
