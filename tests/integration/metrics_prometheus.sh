#!/usr/bin/env bash
# /metrics against the real tools: traffic through a plug and an http
# service on two workers, then
# - `promtool check metrics` passes on the live scrape;
# - per-service counters match the traffic sent exactly (sessions, http
#   requests by status class, bytes = the session-end lines' sum, connects,
#   session-duration and connect-time histogram counts);
# - no family repeats its samples per worker: the sum over all series of
#   proxyd_sessions_accepted_total is the number of connections (it was
#   twice that), and so is the sum of the per-worker series; the per-worker
#   requests and bytes add up to the http requests and the bytes;
# - reloads: a service added shows up at zero, one removed goes away, and
#   when it comes back its counters go on from where they were;
# - a real Prometheus server scrapes proxyd and its query API returns the
#   request counts the test sent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_cmds nginx curl python3 promtool prometheus
setup

N_PLUG=7
N_HTTP=11	# 200s; one more request gets a 404

make_file 10k.bin 10K
start_nginx
free_port P_PLUG
free_port P_HTTP
write_proxyd_conf
# Two workers whatever the machine: the per-worker repeats are the point.
sed -i 's|<workers>auto</workers>|<workers>2</workers>|' "$PROXYD_CONF"
write_service plugsvc "$P_PLUG" "$NGINX_PORT"
cat >"$T/policy/websvc.xml" <<EOF
<service name="websvc" analyser="http">
  <listen address="127.0.0.1" port="$P_HTTP" mode="fixed"/>
  <target address="127.0.0.1" port="$NGINX_PORT"/>
  <http/>
</service>
EOF
PROXYD_PORTS+=("$P_HTTP")
start_proxyd

# --- traffic: one connection per request on both services
for ((i = 0; i < N_PLUG; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P_PLUG/10k.bin")
    assert_eq "$code" 200 "plug GET $i"
done
for ((i = 0; i < N_HTTP; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P_HTTP/10k.bin")
    assert_eq "$code" 200 "http GET $i"
done
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P_HTTP/none.bin")
assert_eq "$code" 404 "http GET of a missing file"
N_WEB=$((N_HTTP + 1))

# Every session has ended (its histogram and byte counts are final).
S='service="plugsvc",analyser="plug"'
W='service="websvc",analyser="http"'
assert_metric eq proxyd_session_duration_seconds_count "$S" "$N_PLUG" 5
assert_metric eq proxyd_session_duration_seconds_count "$W" "$N_WEB" 5
assert_metric eq proxyd_sessions_active '' 0

# --- promtool on a live scrape
metrics_fetch >"$T/scrape.txt" || fail "cannot fetch /metrics"
promtool check metrics <"$T/scrape.txt" >"$T/promtool.out" 2>&1 ||
    { cat "$T/promtool.out" >&2; fail "promtool check metrics failed"; }
info "promtool check metrics: ok ($(grep -c '^# TYPE' "$T/scrape.txt") families, $(grep -vc '^#' "$T/scrape.txt") samples)"
[[ ! -s $T/promtool.out ]] || { cat "$T/promtool.out" >&2; fail "promtool printed lint problems"; }

# sample NAME LABELS: the one sample with exactly these labels, from the scrape
sample() {
    awk -v k="$1{$2}" '$1 == k { print $2; n++ } END { if (n != 1) print "NA" }' "$T/scrape.txt"
}
# family_sum NAME: the sum over every series of NAME
family_sum() {
    awk -v n="$1" '{ b = $1; sub(/\{.*/, "", b) } b == n { s += $2 } END { printf "%.0f\n", s }' "$T/scrape.txt"
}

assert_eq "$(sample proxyd_sessions_accepted_total "$S")" "$N_PLUG" "plug sessions accepted"
assert_eq "$(sample proxyd_sessions_accepted_total "$W")" "$N_WEB" "http sessions accepted"
assert_eq "$(sample proxyd_analyser_events_total "$W,event=\"requests\"")" "$N_WEB" "http requests"
assert_eq "$(sample proxyd_http_request_duration_seconds_count "$W,code=\"2xx\"")" "$N_HTTP" "http 2xx in the request histogram"
assert_eq "$(sample proxyd_http_request_duration_seconds_count "$W,code=\"4xx\"")" 1 "http 4xx in the request histogram"
assert_eq "$(sample proxyd_http_request_duration_seconds_bucket "$W,code=\"2xx\",le=\"+Inf\"")" "$N_HTTP" "http 2xx +Inf bucket"
assert_eq "$(sample proxyd_upstream_connects_total "$S")" "$N_PLUG" "plug server connects"
assert_eq "$(sample proxyd_upstream_connect_duration_seconds_count "$S")" "$N_PLUG" "plug connect-time observations"
assert_eq "$(sample proxyd_upstream_connect_failures_total "$S")" 0 "plug connect failures"
# http: every request either took a pooled server connection or made one
hits=$(sample proxyd_upstream_pool_lookups_total "$W,result=\"hit\"")
misses=$(sample proxyd_upstream_pool_lookups_total "$W,result=\"miss\"")
assert_eq "$((hits + misses))" "$N_WEB" "http pool lookups (hits $hits + misses $misses)"
assert_eq "$(sample proxyd_upstream_connects_total "$W")" "$misses" "http server connects = pool misses"
assert_eq "$(sample proxyd_upstream_connect_duration_seconds_count "$W")" "$misses" "http connect-time observations"

# bytes: what the session-end lines of each service say, exactly
for svc in plugsvc websvc; do
    for dir in to-server to-client; do
        want=$(session_end_lines "$svc" | awk -v d="$dir" '{ for (i = 1; i <= NF; i++) if (index($i, d "=") == 1) s += substr($i, length(d) + 2) } END { printf "%.0f\n", s }')
        an=plug; [[ $svc == websvc ]] && an=http
        assert_eq "$(sample proxyd_bytes_total "service=\"$svc\",analyser=\"$an\",direction=\"$dir\"")" "$want" "$svc bytes $dir"
    done
done
ge=$(sample proxyd_bytes_total "$S,direction=\"to-client\"")
assert_ge "$ge" $((N_PLUG * 10240)) "plug bytes to the client cover the files"

# no double counting: every series of the family adds up to the traffic
TOTAL=$((N_PLUG + N_WEB))
assert_eq "$(family_sum proxyd_sessions_accepted_total)" "$TOTAL" "sum over all proxyd_sessions_accepted_total series"
assert_eq "$(family_sum proxyd_worker_sessions_accepted_total)" "$TOTAL" "sum over the per-worker series"
assert_eq "$(grep -c '^proxyd_worker_sessions_accepted_total{worker=' "$T/scrape.txt")" 2 "one per-worker series per worker"
assert_eq "$(family_sum proxyd_worker_requests_total)" "$N_WEB" "sum over the per-worker request series"
assert_eq "$(grep -c '^proxyd_worker_requests_total{worker=' "$T/scrape.txt")" 2 "one per-worker request series per worker"
assert_eq "$(family_sum proxyd_worker_bytes_total)" "$(family_sum proxyd_bytes_total)" "sum over the per-worker byte series"
assert_grep "$T/scrape.txt" '^proxyd_worker_bytes_total\{worker="1",direction="to-client"\} [0-9]+$'
assert_no_grep "$T/scrape.txt" '^proxyd_(sessions|bytes|analyser|upstream|splice|idle|conntrack|accept)[a-z_]*\{[^}]*worker=' \
    "a per-service family still has per-worker repeats"
assert_eq "$(family_sum proxyd_bytes_total)" \
    "$(session_end_lines "[^ ]+" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^to-(server|client)=/) { sub(/^[^=]*=/, "", $i); s += $i } } END { printf "%.0f\n", s }')" \
    "sum over all proxyd_bytes_total series"

# the rest of the families the issue asks for
assert_grep "$T/scrape.txt" '^proxyd_build_info\{version="[^"]+",openssl="[^"]+",libevent="[^"]+"\} 1$'
assert_grep "$T/scrape.txt" '^proxyd_worker_loop_lag_seconds_count\{worker="1"\} [0-9]+$'
assert_grep "$T/scrape.txt" '^proxyd_config_last_reload_successful 1$'
assert_grep "$T/scrape.txt" '^proxyd_sessions_denied_total\{service="plugsvc",analyser="plug",reason="acl"\} 0$'
fds=$(awk '$1 == "process_open_fds" { print $2 }' "$T/scrape.txt")
real=$(($(ls "/proc/$PROXYD_PID/fd" | wc -l)))
# the scrape's own socket and the directory listing come and go
assert_ge "$fds" $((real - 3)) "process_open_fds ($fds) against /proc ($real)"
assert_lt "$fds" $((real + 4)) "process_open_fds ($fds) against /proc ($real)"
rss=$(awk '$1 == "process_resident_memory_bytes" { print $2 }' "$T/scrape.txt")
assert_ge "$rss" 1000000 "process_resident_memory_bytes"
assert_grep "$T/scrape.txt" '^process_cpu_seconds_total [0-9.]+$'
assert_grep "$T/scrape.txt" '^process_start_time_seconds [0-9.]+$'

# --- reloads: services come and go, counters never go back
t0=$(date +%s)
free_port P_NEW
write_service newsvc "$P_NEW" "$NGINX_PORT"
kill -HUP "$PROXYD_PID"
assert_metric eq proxyd_config_reloads_total 'result="ok"' 1 5
wait_listen "$P_NEW" 5 "$PROXYD_PID" || fail "newsvc does not listen after the reload"
assert_metric eq proxyd_sessions_accepted_total 'service="newsvc",analyser="plug"' 0
assert_metric eq proxyd_sessions_accepted_total "$S" "$N_PLUG"
ts=$(metric_value proxyd_config_last_reload_success_timestamp_seconds)
assert_ge "$ts" "$t0" "last reload success timestamp"

rm "$T/policy/plugsvc.xml"
kill -HUP "$PROXYD_PID"
assert_metric eq proxyd_config_reloads_total 'result="ok"' 2 5
wait_not_listening "$P_PLUG" "$ASYNC_WAIT" || fail "plugsvc still listens after its removal"
[[ $(metric_value proxyd_sessions_accepted_total "$S") == NA ]] ||
    fail "a removed service without sessions is still exported"
assert_metric eq proxyd_sessions_accepted_total "$W" "$N_WEB"

echo '<service name="plugsvc" analyser="plug"><listen address="127.0.0.1" port="bad"/></service>' >"$T/policy/plugsvc.xml"
kill -HUP "$PROXYD_PID"
assert_metric eq proxyd_config_reloads_total 'result="failed"' 1 5
assert_metric eq proxyd_config_last_reload_successful '' 0

write_service plugsvc "$P_PLUG" "$NGINX_PORT"
kill -HUP "$PROXYD_PID"
assert_metric eq proxyd_config_reloads_total 'result="ok"' 3 5
assert_metric eq proxyd_config_last_reload_successful '' 1
wait_listen "$P_PLUG" 5 "$PROXYD_PID" || fail "plugsvc does not listen after coming back"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$P_PLUG/10k.bin")
assert_eq "$code" 200 "plug GET after the service came back"
N_PLUG=$((N_PLUG + 1))
assert_metric eq proxyd_sessions_accepted_total "$S" "$N_PLUG"
assert_metric eq proxyd_session_duration_seconds_count "$S" "$N_PLUG" 5
metrics_fetch >"$T/scrape2.txt" || fail "cannot fetch /metrics"
promtool check metrics <"$T/scrape2.txt" || fail "promtool check metrics failed after the reloads"

# --- a real Prometheus server scrapes it
free_port PROM_PORT
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: proxyd
    static_configs:
      - targets: ['127.0.0.1:$ADMIN_PORT']
EOF
promtool check config "$T/prometheus.yml" >/dev/null || fail "promtool rejects the test's prometheus.yml"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom-data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$T/prometheus.log" 2>&1 &
PROM_PID=$!
track_pid "$PROM_PID"
wait_listen "$PROM_PORT" 30 "$PROM_PID" || fail "prometheus does not listen; log: $(tail -n 20 "$T/prometheus.log")"

# prom_query EXPR: the value of a one-element instant vector, or NA
prom_query() {
    curl -s --max-time 3 -G "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
        python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)
    v = r["data"]["result"]
    print(v[0]["value"][1] if r["status"] == "success" and len(v) == 1 else "NA")
except Exception:
    print("NA")'
}
# prom_wait EXPR WANT: polls the query API (30 s at most) until EXPR = WANT
prom_wait() {
    local v deadline=$((SECONDS + 30))
    while :; do
        v=$(prom_query "$1")
        [[ $v == "$2" ]] && break
        ((SECONDS < deadline)) || fail "prometheus: $1 = $v, expected $2 (log: $(tail -n 5 "$T/prometheus.log"))"
        sleep 0.5
    done
    info "prometheus: $1 = $v ok"
}
prom_wait 'up{job="proxyd"}' 1
prom_wait 'sum(proxyd_sessions_accepted_total{service="plugsvc"})' "$N_PLUG"
prom_wait 'proxyd_analyser_events_total{service="websvc",event="requests"}' "$N_WEB"
prom_wait 'sum(proxyd_http_request_duration_seconds_count{service="websvc",code="2xx"})' "$N_HTTP"
prom_wait 'sum(proxyd_sessions_accepted_total)' $((N_PLUG + N_WEB))
prom_wait 'sum(proxyd_worker_sessions_accepted_total)' $((N_PLUG + N_WEB))
# no series was dropped or mangled by the server's own parser
prom_wait 'scrape_samples_scraped{job="proxyd"} == bool scrape_samples_post_metric_relabeling{job="proxyd"}' 1
info "ok"
