#!/usr/bin/env bash
# The four combinations of client-data and server-data (passive/active on
# each side, chosen independently), with curl (PASV, EPSV, PORT, EPRT) and
# lftp: RETR and STOR with sha256 and LIST in each; the server must see the
# mode the policy asks for (its own log shows the PASV or PORT proxyd sent),
# and a client asking for the mode its side does not allow gets a 500.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
need_cmds lftp
setup

start_vsftpd
P=$FTP_ROOT/pub
head -c 10M /dev/urandom >"$P/10m.bin"
head -c 1M /dev/urandom >"$T/1m.bin"
chmod 644 "$P/10m.bin"
SHA10=$(sha256_of "$P/10m.bin")

declare -A PORTS
write_proxyd_conf
for c in passive active; do
    for s in passive active; do
        name=${c:0:1}${s:0:1}
        free_port "PORT_$name"
        port_var=PORT_$name
        PORTS[$name]=${!port_var}
        write_ftp_service "ftp$name" "${!port_var}" "<ftp client-data=\"$c\" server-data=\"$s\" data-ports=\"43000-43999\"><limits timeout=\"10s\"/><command name=\"*\" action=\"accept\"/></ftp>"
    done
done
start_proxyd

# run_combo NAME CURL_MODE_ARGS...
run_combo() {
    local name=$1 port=${PORTS[$1]} rc got
    shift
    info "$name: curl $*"
    got=$(curl -sS --max-time 60 "$@" "$(ftp_url "$port" pub/10m.bin)" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$SHA10" "$name: sha256 of RETR 10m.bin"
    rc=$(curl_ftp "$@" -T "$T/1m.bin" "$(ftp_url "$port" "pub/up-$name.bin")")
    assert_eq "$rc" 0 "$name: curl rc for STOR"
    assert_eq "$(sha256_of "$P/up-$name.bin")" "$(sha256_of "$T/1m.bin")" "$name: sha256 of STOR"
    curl -sS --max-time 30 "$@" "$(ftp_url "$port" pub/)" >"$T/list.$name" 2>>"$T/curl.err"
    assert_grep "$T/list.$name" "up-$name\\.bin$" "$name: LIST does not show the uploaded file"
}

run_combo pp                   # EPSV
run_combo pa --disable-epsv    # PASV
run_combo ap -P -              # EPRT
run_combo aa -P - --disable-eprt  # PORT

# log lines come from a thread: wait for all 12 sessions' end lines
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
until (($(grep -cE 'session-end service=ftp(pp|pa|ap|aa) ' "$PROXYD_LOG" || true) >= 12)); do
    (($(now_ms) < deadline)) || fail "not all 12 sessions logged their end"
    sleep 0.05
done
for name in pp pa ap aa; do
    c=$([[ ${name:0:1} == p ]] && echo passive || echo active)
    s=$([[ ${name:1:1} == p ]] && echo passive || echo active)
    n=$(grep -cE "ftp-data client=$c server=$s sent=" "$PROXYD_LOG" || true)
    assert_ge "$n" 3 "$name: ftp-data lines with client=$c server=$s"
    # what proxyd sent the server is what vsftpd got
    sent=$(grep -E "ftp-data client=$c server=$s sent=" "$PROXYD_LOG" | tail -n 1 | sed -E 's/.*sent="([^"]*)".*/\1/')
    if [[ $s == passive ]]; then
        assert_eq "$sent" PASV "$name: command sent to the server"
    else
        [[ $sent =~ ^PORT\ 127,0,0,1,[0-9]+,[0-9]+$ ]] || fail "$name: expected a PORT to the server, got '$sent'"
        assert_grep "$T/vsftpd.log" "\"$sent\"" "$name: vsftpd never got '$sent'"
    fi
done
assert_log 'ftp-command .* cmd=EPSV .*accept'
assert_log 'ftp-command .* cmd=PASV .*accept'
assert_log 'ftp-command .* cmd=EPRT .*accept'
assert_log 'ftp-command .* cmd=PORT .*accept'
assert_log 'ftp-reply code=229 cmd=EPSV by=proxy'
assert_log 'ftp-reply code=227 cmd=PASV by=proxy'
assert_log 'ftp-reply code=200 cmd=EPRT by=proxy'
assert_log 'ftp-reply code=200 cmd=PORT by=proxy'

info "lftp, passive to an active-only server and active to a passive-only one"
lftp_get() { # PORT PASSIVE(on|off) OUT
    timeout 60 lftp -p "$1" -e "set ftp:ssl-allow no; set net:max-retries 1; set net:timeout 10; set ftp:passive-mode $2; set ftp:prefer-epsv no; get pub/10m.bin -o $3; bye" 127.0.0.1 >>"$T/lftp.log" 2>&1
}
lftp_get "${PORTS[pa]}" on "$T/lftp.pa" || fail "lftp (passive) through ftppa failed: $(tail -n 3 "$T/lftp.log")"
assert_eq "$(sha256_of "$T/lftp.pa")" "$SHA10" "sha256 of lftp download via ftppa"
lftp_get "${PORTS[ap]}" off "$T/lftp.ap" || fail "lftp (active) through ftpap failed: $(tail -n 3 "$T/lftp.log")"
assert_eq "$(sha256_of "$T/lftp.ap")" "$SHA10" "sha256 of lftp download via ftpap"

info "the mode a side does not allow is refused by the proxy"
rc=$(curl_ftp -P - -o /dev/null "$(ftp_url "${PORTS[pp]}" pub/10m.bin)")
assert_ne "$rc" 0 "curl -P - through a passive-only client side"
assert_log 'ftp-reply code=500 cmd=EPRT by=proxy'
rc=$(curl_ftp -o /dev/null "$(ftp_url "${PORTS[aa]}" pub/10m.bin)")
assert_ne "$rc" 0 "curl (passive) through an active-only client side"
assert_log 'ftp-reply code=500 cmd=(EPSV|PASV) by=proxy'

assert_no_grep "$PROXYD_LOG" 'data-transfer .* end=[^o]' "a data transfer failed"
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="data_failed"' 0
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="transfers"' 14
# the ports close with their sessions, on the workers: a bounded wait
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
while left=$(proxyd_listening_in 43000 43999); [[ -n $left ]] && (($(now_ms) < deadline)); do
    sleep 0.05
done
assert_eq "$left" "" "data ports left listening"
info "PASS"
