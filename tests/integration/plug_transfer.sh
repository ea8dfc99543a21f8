#!/usr/bin/env bash
# plug relay of 1 MB and 1 GB files (splice auto) and 1 MB with splice="no":
# sha256 must match, session-end lines must account for the bytes, and proxyd's
# peak RSS during the 1 GB transfer must stay below 64 MB.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 sha256sum
setup

make_file 1m.bin 1M
info "creating 1 GB random file"
make_file 1g.bin 1G
SHA_1M=$(sha256_of "$T/www/1m.bin")
SHA_1G=$(sha256_of "$T/www/1g.bin")
SIZE_1M=$(stat -c %s "$T/www/1m.bin")
SIZE_1G=$(stat -c %s "$T/www/1g.bin")

start_nginx
free_port P_1M
free_port P_1G
free_port P_NS
write_proxyd_conf
write_service splice1m "$P_1M" "$NGINX_PORT"
write_service splice1g "$P_1G" "$NGINX_PORT"
write_service nosplice1m "$P_NS" "$NGINX_PORT" '<plug splice="no"/>'
start_proxyd

# check_session SERVICE MIN_TO_CLIENT: exactly one session-end line, bytes and end=
check_session() {
    local svc=$1 min=$2 line n tc ts end
    wait_grep "$PROXYD_LOG" "session-end service=$svc .* end=" "$ASYNC_WAIT" ||
        fail "no session-end line for service $svc"
    n=$(session_end_lines "$svc" | wc -l)
    assert_eq "$n" 1 "number of session-end lines for service $svc"
    line=$(session_end_lines "$svc")
    info "log: $line"
    [[ $line =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z\ node=[A-Za-z0-9._-]+\ info\ \#[0-9]+\ session-end\ service=$svc\ analyser=plug\ verdict=accept\ client=127\.0\.0\.1:[0-9]+\ dst=127\.0\.0\.1:$NGINX_PORT\ server=127\.0\.0\.1:$NGINX_PORT\ to-server=[0-9]+\ to-client=[0-9]+\ duration=[0-9]+(\.[0-9]+)?\ by=(client|server)\ phase=data\ end=.+$ ]] ||
        fail "session-end line for $svc does not follow the documented format: $line"
    tc=$(kv "$line" to-client)
    ts=$(kv "$line" to-server)
    end=$(kv "$line" end)
    assert_ge "$tc" "$min" "to-client bytes of service $svc"
    assert_ge "$ts" 1 "to-server bytes of service $svc (the HTTP request)"
    [[ $end == client-closed || $end == server-closed ]] ||
        fail "service $svc: expected end=client-closed or server-closed, got end=$end"
}

# fetch PORT FILE SHA
fetch_check() {
    local port=$1 name=$2 want=$3 r
    r=$(http_get "http://127.0.0.1:$port/$name" "$T/out.$name")
    assert_eq "$r" "0 200" "curl rc and HTTP status for $name via port $port"
    assert_eq "$(sha256_of "$T/out.$name")" "$want" "sha256 of $name via port $port"
    rm -f "$T/out.$name"
}

info "1 MB, splice=auto"
fetch_check "$P_1M" 1m.bin "$SHA_1M"
check_session splice1m "$SIZE_1M"

info "1 MB, splice=no"
fetch_check "$P_NS" 1m.bin "$SHA_1M"
check_session nosplice1m "$SIZE_1M"

info "1 GB, splice=auto, sampling proxyd RSS"
rss0=$(vm_kb "$PROXYD_PID" VmRSS)
info "proxyd RSS before the 1 GB transfer: ${rss0:-?} kB"
# stream straight into sha256sum: no second 1 GB file on disk
(curl -sS --max-time 240 -D "$T/hdr.1g" -o - "http://127.0.0.1:$P_1G/1g.bin" | sha256sum | cut -d' ' -f1 >"$T/sha.1g") &
CURL_PID=$!
track_pid "$CURL_PID"
peak=0
t_start=$(now_ms)
for ((i = 0; i < 5000; i++)); do # 5000 * 50 ms = 250 s max
    proc_alive "$CURL_PID" || break
    r=$(vm_kb "$PROXYD_PID" VmRSS)
    [[ -n $r ]] && ((r > peak)) && peak=$r
    sleep 0.05
done
wait_exit "$CURL_PID" 10 || fail "1 GB transfer did not finish within 250 s"
t_ms=$(($(now_ms) - t_start))
hwm=$(vm_kb "$PROXYD_PID" VmHWM)
[[ -n $hwm ]] || fail "cannot read VmHWM of proxyd (pid $PROXYD_PID): did it exit?"
((hwm > peak)) && peak=$hwm
echo "proxyd peak RSS during 1 GB: $peak kB (sampled VmRSS max / VmHWM $hwm kB), transfer ${t_ms} ms"
assert_eq "$WAIT_RC" 0 "exit status of the 1 GB curl | sha256sum pipeline"
assert_grep "$T/hdr.1g" '^HTTP/1\.[01] 200' "1 GB response status is not 200"
assert_eq "$(cat "$T/sha.1g")" "$SHA_1G" "sha256 of the 1 GB file through proxyd"
assert_lt "$peak" 65536 "proxyd peak RSS (kB) during the 1 GB transfer"
check_session splice1g "$SIZE_1G"

total=$((SIZE_1M * 2 + SIZE_1G))
assert_metric ge proxyd_bytes_total 'direction="to-client"' "$total"
assert_metric ge proxyd_sessions_accepted_total '' 3
info "proxyd_splice_sessions_total = $(metric_value proxyd_splice_sessions_total)"
proc_alive "$PROXYD_PID" || fail "proxyd died"
info "PASS"
