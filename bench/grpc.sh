# shellcheck shell=bash
# bench/grpc.sh: the gRPC row of bench/run (sourced by it, run after the
# other row families; BENCH_GRPC=1). Issue 36: gRPC through proxyd beside
# HAProxy, HTTP/2 both sides, on loopback:
#   proxyd-grpc   proxyd, http analyser, <http h2c="yes" server-h2="yes"
#                 trailers="pass">: prior-knowledge h2c from the client,
#                 h2 to the server
#   haproxy-grpc  HAProxy mode http, bind ... proto h2, server ... proto h2
# both pinned like the other proxies (BENCH_PIN, BENCH_WORKERS /
# BENCH_HAPROXY_THREADS), in front of one python3-grpcio server
# (bench/grpcload.py server, not pinned). A run: bench/grpcload.py client,
# BENCH_GRPC_N unary calls with a BENCH_GRPC_SIZE payload each way (each
# answer checked) over BENCH_GRPC_CHANNELS channels (one HTTP/2 connection
# each) with BENCH_GRPC_INFLIGHT calls at once on each; the two paths
# alternate first from round to round. Per run: the proxy's CPU (schedstat
# of its threads, as every row) and its system calls (perf stat -e
# raw_syscalls:sys_enter on its pid, syscalls_start in bench/run; "-"
# without perf), per call. Results
# in grpc.tsv, the table in grpc.md (not in results.md). Loopback only (in
# netns mode the row is skipped).

declare -A GRPC_PORT GRPC_PID
GRPC_D=""
GRPC_SRV_PORT=""
GRPC_TARGETS=()

grpc_ready() {
	if [ "$NETNS" = 1 ]; then
		note "SKIP grpc row: loopback only"
		return 1
	fi
	if ! /usr/bin/python3 -c 'import grpc.aio' 2>/dev/null; then
		note "SKIP grpc row: python3-grpcio not installed (scripts/deps)"
		return 1
	fi
	if ! analyser_built http; then
		note "SKIP grpc row: this proxyd has no http analyser"
		return 1
	fi
	return 0
}

grpc_start_proxyd() {       # grpc_start_proxyd TARGET PORT ADMIN_PORT
	local t=$1 d=$GRPC_D/$1
	mkdir -p "$d/conf" "$d/policy"
	cat >"$d/conf/proxyd.xml" <<EOF
<proxyd>
  <workers>$WORKERS</workers>
  <limits max-sessions="$MAXCONN" connect-timeout="10s" idle-timeout="5m"
          shutdown-grace="1s"$PX_BUFFER_ATTR/>
  <log target="stderr" level="$PX_LOGLEVEL"/>
  <admin listen="127.0.0.1:$3"/>
  <policies dir="../policy"/>
</proxyd>
EOF
	cat >"$d/policy/bench.xml" <<EOF
<service name="$t" analyser="http">
  <listen address="127.0.0.1" port="$2" mode="fixed"/>
  <target address="127.0.0.1" port="$GRPC_SRV_PORT"/>
  <http h2c="yes" server-h2="yes" trailers="pass"/>
</service>
EOF
	cp "$d/conf/proxyd.xml" "$OUT/$t.xml"
	cp "$d/policy/bench.xml" "$OUT/$t-service.xml"
	if ! "$PROXYD" --check -c "$d/conf/proxyd.xml" >"$OUT/$t-check.txt" 2>&1; then
		note "SKIP $t: proxyd --check: $(head -n 1 "$OUT/$t-check.txt")"
		return 1
	fi
	"${PINCMD[@]}" "$PROXYD" -c "$d/conf/proxyd.xml" >"$OUT/$t.stderr" 2>&1 &
	GRPC_PID[$t]=$!
	PIDS+=("${GRPC_PID[$t]}")
	auth_wait_port "$2" "${GRPC_PID[$t]}" "$t" || return 1
	GRPC_PORT[$t]=$2
	log "$t: proxyd pid ${GRPC_PID[$t]} (workers $WORKERS, cpu $PIN) on 127.0.0.1:$2"
}

grpc_start_haproxy() {      # grpc_start_haproxy TARGET PORT
	local t=$1 d=$GRPC_D/$1
	mkdir -p "$d"
	cat >"$d/haproxy.cfg" <<EOF
global
    nbthread $HA_THREADS
    maxconn $MAXCONN
    pidfile $d/haproxy.pid
$([ "$NOFILE" -lt $((2 * MAXCONN + 100)) ] && echo "    no strict-limits")
defaults
    timeout connect 10s
    timeout client 5m
    timeout server 5m
    timeout http-keep-alive 2m
listen $t
    mode http
    maxconn $MAXCONN
    bind 127.0.0.1:$2 proto h2
    option http-keep-alive
    http-reuse always
    server grpc 127.0.0.1:$GRPC_SRV_PORT proto h2
EOF
	cp "$d/haproxy.cfg" "$OUT/$t.cfg"
	if ! haproxy -c -q -f "$d/haproxy.cfg" >"$OUT/$t-check.txt" 2>&1; then
		note "SKIP $t: haproxy -c: $(head -n 1 "$OUT/$t-check.txt")"
		return 1
	fi
	"${PINCMD[@]}" haproxy -db -f "$d/haproxy.cfg" >"$OUT/$t.stderr" 2>&1 &
	GRPC_PID[$t]=$!
	PIDS+=("${GRPC_PID[$t]}")
	auth_wait_port "$2" "${GRPC_PID[$t]}" "$t" || return 1
	GRPC_PORT[$t]=$2
	log "$t: haproxy pid ${GRPC_PID[$t]} (nbthread $HA_THREADS, cpu $PIN) on 127.0.0.1:$2"
}

# grpc_run TARGET ROUND: one run, a line of grpc.tsv
grpc_run() {
	local t=$1 r=$2 raw px0 px1 t0 t1 rc=0 ok failed sys
	raw="raw/grpc-r$r-$t.txt"
	echo "# /usr/bin/python3 bench/grpcload.py client 127.0.0.1:${GRPC_PORT[$t]} $GRPC_N $GRPC_CHANNELS $GRPC_INFLIGHT $GRPC_SIZE" >"$OUT/$raw"
	syscalls_start "${GRPC_PID[$t]}" "$OUT/raw/grpc-r$r-$t.perf"
	px0=$(cpu_ns "${GRPC_PID[$t]}")
	t0=$(date +%s%N)
	timeout -k 5 "$RUN_TIMEOUT" /usr/bin/python3 "$BENCH_DIR/grpcload.py" client \
		"127.0.0.1:${GRPC_PORT[$t]}" "$GRPC_N" "$GRPC_CHANNELS" "$GRPC_INFLIGHT" "$GRPC_SIZE" \
		>>"$OUT/$raw" 2>&1 || rc=$?
	t1=$(date +%s%N)
	px1=$(cpu_ns "${GRPC_PID[$t]}")
	syscalls_stop
	sys=$(syscalls_of "$OUT/raw/grpc-r$r-$t.perf")
	read -r ok failed <<<"$(awk '$1 == "ok" { print $2, $4 }' "$OUT/$raw")"
	ok=${ok:-0}; failed=${failed:-0}
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$t" "$GRPC_N" "$ok" "$failed" \
		"$(((t1 - t0) / 1000))" "$((px1 - px0))" "$sys" "$raw" >>"$GRPC_TSV"
	log "[grpc] $t round $r: $ok/$GRPC_N ok, $(((px1 - px0) / GRPC_N)) ns of proxy CPU per call, $( [ "$sys" = - ] && echo - || awk -v s="$sys" -v n="$GRPC_N" 'BEGIN { printf "%.1f", s / n }') system calls per call"
	if [ "$rc" != 0 ] || [ "$ok" != "$GRPC_N" ]; then
		if px_ours "$t"; then
			note "BAD grpc row: $t round $r: rc=$rc ok=$ok/$GRPC_N ($OUT/$raw)"
			BAD_RUNS=$((BAD_RUNS + 1))
		else
			note "peer failure, grpc row: $t round $r: rc=$rc ok=$ok/$GRPC_N ($OUT/$raw)"
			PEER_BAD_RUNS=$((PEER_BAD_RUNS + 1))
		fi
	fi
}

rows_grpc() {
	local p_srv p_px p_adm p_ha r t pid i
	GRPC_D=$TMP/grpc
	mkdir -p "$GRPC_D" "$OUT/raw"
	read -r p_srv p_px p_adm p_ha <<<"$(scan_free_ports 4)"
	GRPC_SRV_PORT=$p_srv
	/usr/bin/python3 "$BENCH_DIR/grpcload.py" server "$p_srv" >"$OUT/grpc-server.stderr" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	auth_wait_port "$p_srv" "$pid" "grpc server" || return 0
	GRPC_TARGETS=()
	grpc_start_proxyd proxyd-grpc "$p_px" "$p_adm" && GRPC_TARGETS+=(proxyd-grpc)
	if ! command -v haproxy >/dev/null 2>&1; then
		note "SKIP haproxy-grpc: haproxy not installed (bench/deps)"
	elif grpc_start_haproxy haproxy-grpc "$p_ha"; then
		GRPC_TARGETS+=(haproxy-grpc)
	fi
	[ ${#GRPC_TARGETS[@]} -gt 0 ] || return 0
	command -v perf >/dev/null 2>&1 ||
		note "grpc row: no perf (linux-perf): system calls per call not counted"
	# warm-up: connections made, the server's threads and caches warm
	for t in "${GRPC_TARGETS[@]}"; do
		/usr/bin/python3 "$BENCH_DIR/grpcload.py" client "127.0.0.1:${GRPC_PORT[$t]}" 200 \
			"$GRPC_CHANNELS" "$GRPC_INFLIGHT" "$GRPC_SIZE" >"$OUT/grpc-warmup-$t.txt" 2>&1 || true
	done
	GRPC_TSV=$OUT/grpc.tsv
	printf 'round\ttarget\tn\tok\tfailed\twall_us\tproxy_ns\tsyscalls\traw\n' >"$GRPC_TSV"
	echo "grpc_n=$GRPC_N grpc_size=$GRPC_SIZE grpc_channels=$GRPC_CHANNELS grpc_inflight=$GRPC_INFLIGHT" >>"$OUT/env.txt"
	for ((r = 1; r <= ROUNDS; r++)); do
		if ((r % 2)); then
			for t in "${GRPC_TARGETS[@]}"; do grpc_run "$t" "$r"; done
		else
			for ((i = ${#GRPC_TARGETS[@]} - 1; i >= 0; i--)); do grpc_run "${GRPC_TARGETS[$i]}" "$r"; done
		fi
	done
	python3 - "$GRPC_TSV" "$GRPC_SIZE" "$GRPC_CHANNELS" "$GRPC_INFLIGHT" >"$OUT/grpc.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(t, f):
    v = [f(x) for x in rows if x["target"] == t and f(x) is not None]
    return statistics.median(v) if v else None
cpu = lambda x: int(x["proxy_ns"]) / 1000 / max(int(x["n"]), 1)
sysc = lambda x: None if x["syscalls"] == "-" else int(x["syscalls"]) / max(int(x["n"]), 1)
rate = lambda x: int(x["ok"]) / (int(x["wall_us"]) / 1e6) if int(x["wall_us"]) else None
print("## gRPC (issue 36): unary calls, %s bytes each way, %s channels x %s in flight\n"
      % (sys.argv[2], sys.argv[3], sys.argv[4]))
print("| path | calls/s | CPU us/call | syscalls/call | ok/calls |")
print("|---|---:|---:|---:|---|")
f = lambda v, p: "-" if v is None else ("%." + str(p) + "f") % v
for t in ("proxyd-grpc", "haproxy-grpc"):
    if not any(x["target"] == t for x in rows):
        continue
    ok = " ".join("%s/%s" % (x["ok"], x["n"]) for x in rows if x["target"] == t)
    print("| %s | %s | %s | %s | %s |" % (t, f(med(t, rate), 0), f(med(t, cpu), 1),
                                         f(med(t, sysc), 1), ok))
# the ratio within each round, then the median, as the other rows
ratios = {}
for name, fn in (("CPU per call", cpu), ("syscalls per call", sysc)):
    v = []
    for r in sorted({x["round"] for x in rows}):
        a = [fn(x) for x in rows if x["round"] == r and x["target"] == "proxyd-grpc"]
        b = [fn(x) for x in rows if x["round"] == r and x["target"] == "haproxy-grpc"]
        if a and b and a[0] is not None and b[0]:
            v.append(a[0] / b[0])
    if v:
        ratios[name] = statistics.median(v)
if ratios:
    print("\nproxyd-grpc / haproxy-grpc (median of per-round ratios): " +
          ", ".join("%s %.2f" % kv for kv in ratios.items()))
PY
	log "grpc row: $OUT/grpc.md"
	cat "$OUT/grpc.md" >&2
}
