#!/usr/bin/env bash
# FTP through proxyd to a real vsftpd: RETR and STOR of 1 KB, 10 MB and a
# large file (1 GB; 64 MB under the sanitizer build) with sha256 checks,
# LIST and MLSD (to pyftpdlib), a REST resume, a slow download longer than
# the idle timeout, 20 parallel sessions; data-transfer log
# lines, session-end lines and counters must account for every byte.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ftp_lib.sh"
need_ftp
setup

if [[ ${PROXYD_SANITIZED:-0} == 1 ]]; then BIG=64M; else BIG=1G; fi
start_vsftpd
P=$FTP_ROOT/pub
head -c 1K /dev/urandom >"$P/1k.bin"
head -c 10M /dev/urandom >"$P/10m.bin"
info "creating the $BIG file"
head -c "$BIG" /dev/urandom >"$P/big.bin"
chmod 644 "$P"/*.bin

start_pyftpd
free_port PORT
free_port PORT_ML
# a short idle timeout: data moving on a data connection must keep the
# silent control connection alive (checked with a slow download below)
write_proxyd_conf 'idle-timeout="2s"'
write_ftp_service ftp "$PORT" '<ftp data-ports="42000-42999"><command name="*" action="accept"/></ftp>'
write_ftp_service ftpml "$PORT_ML" '<ftp data-ports="42000-42999"><command name="*" action="accept"/></ftp>' 127.0.0.1 "$PYFTPD_PORT"
start_proxyd

retr_check() { # NAME
    local name=$1 want got rc
    want=$(sha256_of "$P/$name")
    got=$(curl -sS --max-time 240 "$(ftp_url "$PORT" "pub/$name")" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
    assert_eq "$got" "$want" "sha256 of RETR $name through proxyd"
    assert_log "data-transfer download cmd=RETR file=\"$name\" bytes=$(stat -c %s "$P/$name") .* end=ok"
}

stor_check() { # NAME: upload pub/NAME as pub/up-NAME
    local name=$1 rc
    rc=$(curl_ftp -T "$P/$name" "$(ftp_url "$PORT" "pub/up-$name")")
    assert_eq "$rc" 0 "curl rc for STOR up-$name"
    assert_eq "$(sha256_of "$P/up-$name")" "$(sha256_of "$P/$name")" "sha256 of STOR up-$name"
    assert_log "data-transfer upload cmd=STOR file=\"up-$name\" bytes=$(stat -c %s "$P/$name") .* end=ok"
}

for f in 1k.bin 10m.bin big.bin; do
    info "RETR and STOR of $f"
    t0=$(now_ms)
    retr_check "$f"
    stor_check "$f"
    info "$f: both ways in $(($(now_ms) - t0)) ms"
done
rm -f "$P/up-big.bin"

info "LIST"
curl -sS --max-time 30 "$(ftp_url "$PORT" pub/)" >"$T/list.txt"
assert_grep "$T/list.txt" ' 10485760 .* 10m\.bin$' "LIST output lacks 10m.bin with its size"
assert_log 'data-transfer listing cmd=LIST .* end=ok'

info "MLSD (python ftplib to pyftpdlib: vsftpd has no MLSD)"
python3 - "$PORT_ML" >"$T/mlsd.txt" <<'EOF'
import ftplib, sys
f = ftplib.FTP()
f.connect("127.0.0.1", int(sys.argv[1]), timeout=20)
f.login()
for name, facts in f.mlsd("pub", ["size", "type"]):
    print(name, facts.get("size", "-"), facts.get("type"))
f.quit()
EOF
assert_grep "$T/mlsd.txt" '^10m\.bin 10485760 file$' "MLSD did not list 10m.bin with its size"
assert_log 'data-transfer listing cmd=MLSD .* end=ok'

info "REST resume of a 10 MB download"
head -c 4000000 "$P/10m.bin" >"$T/resume.bin"
rc=$(curl_ftp -C - -o "$T/resume.bin" "$(ftp_url "$PORT" pub/10m.bin)")
assert_eq "$rc" 0 "curl -C - rc"
assert_eq "$(sha256_of "$T/resume.bin")" "$(sha256_of "$P/10m.bin")" "sha256 after REST resume"
assert_log 'ftp-command user=anonymous cmd=REST arg="4000000" verdict=accept'
assert_log 'ftp-reply code=350 cmd=REST'
assert_log "data-transfer download cmd=RETR file=\"10m.bin\" bytes=$((10485760 - 4000000)) .* end=ok"

info "a 10 MB download at 2 MB/s outlives the 2 s idle timeout of the control connection"
full_re='data-transfer download cmd=RETR file="10m\.bin" bytes=10485760 .* end=ok'
before=$(grep -Ec -- "$full_re" "$PROXYD_LOG" || true)
got=$(curl -sS --max-time 60 --limit-rate 2M "$(ftp_url "$PORT" pub/10m.bin)" 2>>"$T/curl.err" | sha256sum | cut -d' ' -f1)
assert_eq "$got" "$(sha256_of "$P/10m.bin")" "sha256 of the slow download"
# this session's own end line (the one an idle timeout would have written):
# its id from its data-transfer line (the newest full download of 10m.bin)
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
until (($(grep -Ec -- "$full_re" "$PROXYD_LOG" || true) > before)); do
    (($(now_ms) < deadline)) || fail "no data-transfer line for the slow download within $ASYNC_WAIT s"
    sleep 0.05
done
sid=$(grep -E -- "$full_re" "$PROXYD_LOG" | tail -n 1 | sed -nE 's/.* #([0-9]+) data-transfer .*/\1/p')
assert_log " #$sid session-end service=ftp "
line=$(grep -E " #$sid session-end service=ftp " "$PROXYD_LOG" | tail -n 1)
info "slow download: $line"
[[ $(kv "$line" end) != idle-timeout ]] || fail "the control session idled out during a transfer: $line"
# No other session idled out while one of its transfers was open (from its
# transfer command to its data-transfer line with end=ok). After that, the
# control connection may idle like any other: vsftpd answers nothing while
# its close() of a 1 GB upload waits for ext4 to allocate the file's blocks
# (0.5 s here, 4 s on a busy disk), and the 2 s timeout may end the session
# between the 226 and the 221.
open_idle=$(awk '
    match($0, / #[0-9]+ /) { sid = substr($0, RSTART + 2, RLENGTH - 3) } !RSTART { next }
    / ftp-command .* cmd=(RETR|STOR|STOU|APPE|LIST|NLST|MLSD) .*verdict=accept/ { open[sid] = 1 }
    / data-transfer .* end=ok$/ { open[sid] = 0 }
    / session-end service=ftp .*end=idle-timeout$/ && open[sid] { print }' "$PROXYD_LOG")
[[ -z $open_idle ]] || fail "a control session idled out during a transfer: $open_idle"
n_idle=$(grep -Ec 'session-end service=ftp .*end=idle-timeout$' "$PROXYD_LOG" || true)
((n_idle == 0)) || info "$n_idle session(s) idled out after their transfers had ended"

info "20 parallel sessions"
before=$(grep -c 'session-end service=ftp ' "$PROXYD_LOG" || true)
pids=()
for i in $(seq 1 20); do
    if ((i % 2)); then mode=(); else mode=(-P -); fi
    curl -sS --max-time 60 "${mode[@]}" -o "$T/par.$i" "$(ftp_url "$PORT" pub/10m.bin)" 2>>"$T/curl.err" &
    pids+=($!)
    track_pid "$!"
done
for p in "${pids[@]}"; do
    wait_exit "$p" 90 || fail "parallel curl $p did not finish"
    assert_eq "$WAIT_RC" 0 "exit status of parallel curl $p"
done
want=$(sha256_of "$P/10m.bin")
for i in $(seq 1 20); do
    assert_eq "$(sha256_of "$T/par.$i")" "$want" "sha256 of parallel download $i"
done
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
while :; do
    n=$(grep -c 'session-end service=ftp ' "$PROXYD_LOG" || true)
    ((n - before >= 20)) && break
    (($(now_ms) < deadline)) || fail "only $((n - before)) of 20 parallel sessions logged their end"
    sleep 0.1
done
assert_no_grep "$PROXYD_LOG" 'session-end service=ftp .*verdict=deny' "a session was denied"
assert_no_grep "$PROXYD_LOG" 'data-transfer .* end=[^o]' "a data transfer failed"

# 3 sizes x 2 ways + LIST + MLSD + resume + slow + 20 parallel
assert_metric ge proxyd_analyser_events_total 'analyser="ftp",event="transfers"' 30
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="data_failed"' 0
assert_metric eq proxyd_analyser_events_total 'analyser="ftp",event="denied_command"' 0
big=$(stat -c %s "$P/big.bin")
assert_metric ge proxyd_bytes_total 'direction="to-client"' $((big + 10485760 * 22))
# no data port of ours is left listening: every session has ended (waited
# for above) and its listeners go with it; wait (bounded) until none is left
deadline=$(($(now_ms) + ASYNC_WAIT * 1000))
while left=$(proxyd_listening_in 42000 42999); [[ -n $left ]] && (($(now_ms) < deadline)); do
    sleep 0.05
done
assert_eq "$left" "" "proxyd data ports still listening $ASYNC_WAIT s after all transfers ended"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
