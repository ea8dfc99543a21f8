#!/usr/bin/env bash
# proxyd loopback benchmark.
#
# Fetches files of 10 KB, 100 KB and 1 MB from a private nginx origin with ab
# (and wrk), with and without keep-alive, through
#   direct  - ab -> nginx
#   proxyd  - ab -> proxyd (plug analyser, fixed mode) -> nginx
#   haproxy - ab -> haproxy 2.6 (mode tcp, nbthread 1)  -> nginx
# interleaved in one run, BENCH_ROUNDS rounds, median req/s per row.
# See bench/README.md for the knobs and for how to read the table.
#
# Everything binds 127.0.0.1 only. Every server is started here and stopped on
# exit; nothing else is touched.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
REPORT="$BENCH_DIR/report.py"

usage() {
	cat <<'EOF'
usage: bench/run.sh [--quick] [--help]

  --quick   one round, small request counts, no wrk: a smoke check (< 60 s)

Environment (defaults in brackets; --quick changes the marked ones):
  PROXYD                 proxyd binary             [build-rel/proxyd]
  BENCH_WORKERS          proxyd <workers>, N|auto  [1]
  BENCH_ROUNDS           rounds, median is taken   [3; quick 1]
  BENCH_C                concurrency (ab -c, wrk -c)[50]
  BENCH_N_10K            ab -n for 10 KB           [20000; quick 5000]
  BENCH_N_100K           ab -n for 100 KB          [10000; quick 2000]
  BENCH_N_1M             ab -n for 1 MB            [2000; quick 500]
  BENCH_SIZES            subset of "10k 100k 1m"   [all]
  BENCH_MODES            subset of "ka close"      [both]
  BENCH_TARGETS          subset of "direct proxyd haproxy" [all]
  BENCH_WRK              1 = also wrk rows (keep-alive only) [1; quick 0]
  BENCH_WRK_DURATION     seconds per wrk run       [5]
  BENCH_WRK_THREADS      wrk -t                    [1]
  BENCH_WARMUP           warm-up requests per target and size [500; quick 200]
  BENCH_RUN_TIMEOUT      hard limit per ab run, s  [120]
  BENCH_NGINX_WORKERS    nginx worker_processes    [1]
  BENCH_PROXYD_SPLICE    <plug splice=...> auto|no [auto]
  BENCH_PROXYD_LOG_LEVEL proxyd log level          [warning]
  BENCH_HAPROXY_SPLICE   haproxy splice: 0 none, 1 splice-request+response,
                         auto = splice-auto        [0]
  BENCH_OUT              output directory          [bench/results/<timestamp>]
  BENCH_KEEP_TMP         1 = keep the temp dir (configs, files)  [0]
EOF
}

QUICK=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

if [ "$QUICK" = 1 ]; then
	d_rounds=1; d_n10k=5000; d_n100k=2000; d_n1m=500; d_wrk=0; d_warm=200
else
	d_rounds=3; d_n10k=20000; d_n100k=10000; d_n1m=2000; d_wrk=1; d_warm=500
fi
PROXYD=${PROXYD:-$ROOT/build-rel/proxyd}
WORKERS=${BENCH_WORKERS:-1}
ROUNDS=${BENCH_ROUNDS:-$d_rounds}
CONC=${BENCH_C:-50}
N_10K=${BENCH_N_10K:-$d_n10k}
N_100K=${BENCH_N_100K:-$d_n100k}
N_1M=${BENCH_N_1M:-$d_n1m}
SIZES=${BENCH_SIZES:-10k 100k 1m}
MODES=${BENCH_MODES:-ka close}
TARGETS_S=${BENCH_TARGETS:-direct proxyd haproxy}
WRK=${BENCH_WRK:-$d_wrk}
WRK_DUR=${BENCH_WRK_DURATION:-5}
WRK_THREADS=${BENCH_WRK_THREADS:-1}
WARMUP=${BENCH_WARMUP:-$d_warm}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-120}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-1}
PX_SPLICE=${BENCH_PROXYD_SPLICE:-auto}
PX_LOGLEVEL=${BENCH_PROXYD_LOG_LEVEL:-warning}
HA_SPLICE=${BENCH_HAPROXY_SPLICE:-0}
KEEP_TMP=${BENCH_KEEP_TMP:-0}
case "$HA_SPLICE" in 0|1|auto) ;; *) echo "run.sh: BENCH_HAPROXY_SPLICE must be 0, 1 or auto" >&2; exit 2 ;; esac
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${BENCH_OUT:-$BENCH_DIR/results/$STAMP}

die() { echo "run.sh: $*" >&2; exit 1; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
is_uint() { case "$1" in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }

for v in ROUNDS CONC N_10K N_100K N_1M WRK_DUR WRK_THREADS WARMUP RUN_TIMEOUT; do
	is_uint "${!v}" || die "$v must be a non-negative integer (got '${!v}')"
done
[ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 100 ] || die "BENCH_ROUNDS must be 1..100"
[ "$CONC" -ge 1 ] || die "BENCH_C must be >= 1"
case "$WORKERS" in auto) ;; *) is_uint "$WORKERS" && [ "$WORKERS" -ge 1 ] || die "BENCH_WORKERS must be auto or >= 1" ;; esac
read -r -a TARGETS <<<"$TARGETS_S"
read -r -a SIZE_LIST <<<"$SIZES"
read -r -a MODE_LIST <<<"$MODES"
[ ${#TARGETS[@]} -ge 1 ] || die "BENCH_TARGETS is empty"
for t in "${TARGETS[@]}"; do case "$t" in direct|proxyd|haproxy) ;; *) die "unknown target '$t'" ;; esac; done
for s in "${SIZE_LIST[@]}"; do case "$s" in 10k|100k|1m) ;; *) die "unknown size '$s'" ;; esac; done
for m in "${MODE_LIST[@]}"; do case "$m" in ka|close) ;; *) die "unknown mode '$m'" ;; esac; done
want() { local x; for x in "${TARGETS[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }

for tool in ab nginx python3 curl timeout; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
if want haproxy; then command -v haproxy >/dev/null 2>&1 || die "haproxy not found"; fi
if [ "$WRK" = 1 ] && ! command -v wrk >/dev/null 2>&1; then
	log "wrk not found: no wrk rows"; WRK=0
fi
if want proxyd; then
	[ -x "$PROXYD" ] || die "proxyd binary not found at $PROXYD (build it: cmake -S $ROOT -B $ROOT/build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build $ROOT/build-rel -j2; or set PROXYD=, or BENCH_TARGETS='direct haproxy')"
fi

# ---------------------------------------------------------------- cleanup --
TMP=$(mktemp -d /tmp/proxyd-bench.XXXXXX)
chmod 755 "$TMP"            # nginx workers run as nobody when we are root
PIDS=()                     # every server we started, stopped in reverse order
EXTRA_PIDS=()               # nginx workers, in case the master dies first

stop_pid() {                # TERM, wait up to 5 s, then KILL; only our own PIDs
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop on TERM within 5 s: KILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
	for i in "${EXTRA_PIDS[@]}"; do
		kill -0 "$i" 2>/dev/null && kill -KILL "$i" 2>/dev/null || true
	done
	if [ -d "$OUT" ]; then
		cp -f "$TMP"/nginx/error.log "$OUT"/nginx-error.log 2>/dev/null || true
		# a run that stopped half-way still reports the runs it finished
		if [ "$rc" != 0 ] && [ ! -f "$OUT/results.md" ] && [ -f "$RUNS" ] \
			&& [ "$(wc -l <"$RUNS")" -gt 1 ]; then
			echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
			echo "incomplete=exit status $rc" >>"$OUT/env.txt"
			python3 "$REPORT" report "$OUT" >/dev/null 2>&1 \
				&& log "partial results: $OUT/results.md" || true
		fi
	fi
	if [ "$KEEP_TMP" = 1 ]; then log "temp dir kept: $TMP"; else rm -rf "$TMP"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

mkdir -p "$OUT/raw"
RUNS="$OUT/runs.tsv"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
case "$NOFILE" in unlimited) NOFILE=1048576 ;; esac

# ------------------------------------------------------------------ ports --
read -r P_NGINX P_PROXYD P_ADMIN P_HAPROXY < <(python3 - <<'EOF'
import socket
ss = []
for _ in range(4):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss:
    s.close()
EOF
)

wait_port() {               # wait_port PORT PID NAME: bounded, 10 s
	local port=$1 pid=$2 name=$3 i
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || die "$name (pid $pid) exited during start-up; see $OUT/$name.stderr"
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	die "$name did not listen on 127.0.0.1:$port within 10 s"
}

# ----------------------------------------------------------------- origin --
mkdir -p "$TMP/www" "$TMP/nginx/tmp"
head -c 10240 /dev/urandom >"$TMP/www/10k.bin"
head -c 102400 /dev/urandom >"$TMP/www/100k.bin"
head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
chmod 644 "$TMP"/www/*.bin
chmod 755 "$TMP/www"
cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes $NGINX_WORKERS;
daemon off;
master_process on;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
worker_rlimit_nofile $NOFILE;
events { worker_connections 16384; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    default_type application/octet-stream;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$P_NGINX backlog=4096;
        root $TMP/www;
        location / { }
    }
}
EOF
nginx -t -q -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
	|| die "nginx config test failed: $(cat "$TMP/nginx/error.log" 2>/dev/null)"
nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
	>"$OUT/nginx.stderr" 2>&1 &
PID_NGINX=$!
PIDS+=("$PID_NGINX")
wait_port "$P_NGINX" "$PID_NGINX" nginx
sleep 0.2
for p in $(ps -o pid= --ppid "$PID_NGINX" 2>/dev/null); do EXTRA_PIDS+=("$p"); done
log "nginx pid $PID_NGINX (workers ${EXTRA_PIDS[*]:-?}) on 127.0.0.1:$P_NGINX"

# ----------------------------------------------------------------- proxyd --
PID_PROXYD=
if want proxyd; then
	mkdir -p "$TMP/proxyd/conf" "$TMP/proxyd/policy"
	cat >"$TMP/proxyd/conf/proxyd.xml" <<EOF
<proxyd>
  <workers>$WORKERS</workers>
  <limits max-sessions="20000" connect-timeout="10s" idle-timeout="5m"
          shutdown-grace="1s"/>
  <log target="stderr" level="$PX_LOGLEVEL"/>
  <admin listen="127.0.0.1:$P_ADMIN"/>
  <policies dir="../policy"/>
</proxyd>
EOF
	cat >"$TMP/proxyd/policy/bench.xml" <<EOF
<service name="bench" analyser="plug">
  <listen address="127.0.0.1" port="$P_PROXYD" mode="fixed"/>
  <target address="127.0.0.1" port="$P_NGINX"/>
  <plug splice="$PX_SPLICE" half-close="yes"/>
</service>
EOF
	cp "$TMP/proxyd/conf/proxyd.xml" "$OUT/proxyd.xml"
	cp "$TMP/proxyd/policy/bench.xml" "$OUT/proxyd-service.xml"
	if ! "$PROXYD" --check -c "$TMP/proxyd/conf/proxyd.xml" >"$OUT/proxyd-check.txt" 2>&1; then
		cat "$OUT/proxyd-check.txt" >&2
		die "proxyd --check rejected the bench configuration (above)"
	fi
	"$PROXYD" -c "$TMP/proxyd/conf/proxyd.xml" >"$OUT/proxyd.stderr" 2>&1 &
	PID_PROXYD=$!
	PIDS+=("$PID_PROXYD")
	wait_port "$P_PROXYD" "$PID_PROXYD" proxyd
	wait_port "$P_ADMIN" "$PID_PROXYD" proxyd
	log "proxyd pid $PID_PROXYD (workers $WORKERS) on 127.0.0.1:$P_PROXYD, admin :$P_ADMIN"
fi

# ---------------------------------------------------------------- haproxy --
PID_HAPROXY=
if want haproxy; then
	mkdir -p "$TMP/haproxy"
	{
		echo "global"
		echo "    nbthread 1"
		echo "    maxconn 20000"
		echo "    pidfile $TMP/haproxy/haproxy.pid"
		# maxconn 20000 wants ~40000 fds; when the hard limit is lower (a
		# container without CAP_SYS_RESOURCE) let haproxy start anyway: the
		# bench never has more than BENCH_C connections open
		[ "$NOFILE" -lt 40100 ] && echo "    no strict-limits"
		echo "defaults"
		echo "    mode tcp"
		echo "    timeout connect 10s"
		echo "    timeout client 5m"
		echo "    timeout server 5m"
		# 1: always splice, like proxyd's splice="auto" (haproxy's own
		# splice-auto heuristic did not splice at all in tcp mode here)
		case "$HA_SPLICE" in
		1) echo "    option splice-request"; echo "    option splice-response" ;;
		auto) echo "    option splice-auto" ;;
		esac
		echo "listen bench"
		echo "    bind 127.0.0.1:$P_HAPROXY"
		echo "    maxconn 20000"
		echo "    server origin 127.0.0.1:$P_NGINX"
	} >"$TMP/haproxy/haproxy.cfg"
	cp "$TMP/haproxy/haproxy.cfg" "$OUT/haproxy.cfg"
	haproxy -c -q -f "$TMP/haproxy/haproxy.cfg" >"$OUT/haproxy-check.txt" 2>&1 \
		|| { cat "$OUT/haproxy-check.txt" >&2; die "haproxy config check failed"; }
	haproxy -db -f "$TMP/haproxy/haproxy.cfg" >"$OUT/haproxy.stderr" 2>&1 &
	PID_HAPROXY=$!
	PIDS+=("$PID_HAPROXY")
	wait_port "$P_HAPROXY" "$PID_HAPROXY" haproxy
	log "haproxy pid $PID_HAPROXY on 127.0.0.1:$P_HAPROXY"
fi

port_of() {
	case "$1" in
	direct) echo "$P_NGINX" ;; proxyd) echo "$P_PROXYD" ;; haproxy) echo "$P_HAPROXY" ;;
	esac
}
pid_of() {
	case "$1" in
	direct) echo "" ;; proxyd) echo "$PID_PROXYD" ;; haproxy) echo "$PID_HAPROXY" ;;
	esac
}
n_of() {
	case "$1" in 10k) echo "$N_10K" ;; 100k) echo "$N_100K" ;; 1m) echo "$N_1M" ;; esac
}
cpu_ticks() {               # utime+stime of the whole process, in clock ticks
	[ -n "$1" ] || { echo 0; return; }
	# field 2 (comm) may contain spaces: cut after the last ')'
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	set -- $s
	echo $(( ${12} + ${13} ))
}
child_ticks() {             # cutime+cstime of this shell: ab/wrk once waited for
	local s
	s=$(cat "/proc/$$/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	set -- $s
	echo $(( ${14} + ${15} ))
}
nginx_ticks() {
	local p sum=0
	for p in "${EXTRA_PIDS[@]}"; do sum=$((sum + $(cpu_ticks "$p"))); done
	echo "$sum"
}
sys_ticks() {               # "busy total steal" from /proc/stat (busy = user+nice+system)
	local cpu us ni sy id io irq sirq st rest
	read -r cpu us ni sy id io irq sirq st rest </proc/stat
	echo "$((us + ni + sy)) $((us + ni + sy + id + io + irq + sirq + st)) $st"
}
hwm_kb() {
	[ -n "$1" ] || { echo 0; return; }
	awk '/^VmHWM:/ { print $2; f = 1 } END { if (!f) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}
reset_hwm() { [ -n "$1" ] && { echo 5 >"/proc/$1/clear_refs"; } 2>/dev/null || true; }
alive_check() {
	local t pid st
	for t in "${TARGETS[@]}"; do
		pid=$(pid_of "$t")
		[ -z "$pid" ] || kill -0 "$pid" 2>/dev/null && continue
		st=0; wait "$pid" 2>/dev/null || st=$?
		# a crash shows as 128+signal here and usually as a kernel line
		dmesg 2>/dev/null | grep -E "$t\[[0-9]+\]" | tail -n 3 >"$OUT/$t-dmesg.txt" || true
		die "$t (pid $pid) died during the runs (wait status $st$( [ "$st" -gt 128 ] && echo ", signal $((st - 128))")); see $OUT/$t.stderr, $OUT/$t-dmesg.txt and the last lines of $RUNS"
	done
	kill -0 "$PID_NGINX" 2>/dev/null || die "nginx died"
}

# ------------------------------------------------------------ environment --
{
	echo "date_utc=$STAMP"
	echo "host=$(uname -srm)"
	echo "nproc=$(nproc)"
	echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "proxyd=$PROXYD"
	[ -n "$PID_PROXYD" ] && echo "proxyd_version=$("$PROXYD" --version 2>&1 | head -1)"
	echo "proxyd_git=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo '+dirty' || true)"
	echo "haproxy_version=$(haproxy -v 2>/dev/null | head -1)"
	echo "nginx_version=$(nginx -v 2>&1 | head -1)"
	echo "ab_version=$(ab -V 2>&1 | head -1)"
	echo "workers=$WORKERS"
	echo "rounds=$ROUNDS"
	echo "concurrency=$CONC"
	echo "n_10k=$N_10K"
	echo "n_100k=$N_100K"
	echo "n_1m=$N_1M"
	echo "quick=$QUICK"
	echo "wrk=$WRK"
	echo "wrk_duration=$WRK_DUR"
	echo "wrk_threads=$WRK_THREADS"
	echo "nginx_workers=$NGINX_WORKERS"
	echo "proxyd_splice=$PX_SPLICE"
	echo "haproxy_splice=$HA_SPLICE"
	echo "targets=${TARGETS[*]}"
	for k in net.ipv4.tcp_tw_reuse net.ipv4.ip_local_port_range net.core.somaxconn; do
		echo "sysctl_$k=$(sysctl -n "$k" 2>/dev/null | tr '\t' ' ')"
	done
} >"$OUT/env.txt"

if [ -n "$PID_PROXYD" ]; then
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" >"$OUT/proxyd-metrics-before.txt" || true
fi

# ---------------------------------------------------- correctness check --
# Every path must return the files byte for byte (also several on one
# keep-alive connection) before any number is worth anything.
log "checking content through every path"
for t in "${TARGETS[@]}"; do
	port=$(port_of "$t")
	for s in 10k 100k 1m; do
		want_sum=$(sha256sum <"$TMP/www/$s.bin" | cut -d' ' -f1)
		got=$(curl -s -m 20 "http://127.0.0.1:$port/$s.bin" | sha256sum | cut -d' ' -f1) || got=curl-failed
		[ "$got" = "$want_sum" ] || die "$t: $s.bin came back corrupted or short through 127.0.0.1:$port (sha256 $got != $want_sum)"
	done
	# three files on one keep-alive connection, concatenated
	want_sum=$(cat "$TMP/www/1m.bin" "$TMP/www/10k.bin" "$TMP/www/100k.bin" | sha256sum | cut -d' ' -f1)
	got=$(curl -s -m 20 "http://127.0.0.1:$port/1m.bin" "http://127.0.0.1:$port/10k.bin" \
		"http://127.0.0.1:$port/100k.bin" | sha256sum | cut -d' ' -f1) || got=curl-failed
	[ "$got" = "$want_sum" ] || die "$t: keep-alive sequence 1m,10k,100k came back wrong through 127.0.0.1:$port"
done

# ---------------------------------------------------------------- warm-up --
if [ "$WARMUP" -gt 0 ]; then
	log "warm-up: $WARMUP requests per target and size"
	for t in "${TARGETS[@]}"; do
		for s in "${SIZE_LIST[@]}"; do
			timeout -k 5 "$RUN_TIMEOUT" ab -q -r -s 20 -k -n "$WARMUP" -c "$CONC" \
				"http://127.0.0.1:$(port_of "$t")/$s.bin" >/dev/null 2>&1 \
				|| log "warm-up ab failed on $t $s (ignored, the measured runs will show it)"
		done
	done
fi
alive_check

# ------------------------------------------------------------------- runs --
printf 'round\tseq\ttool\tsize\tmode\ttarget\tn\tc\trc\trps\tcomplete\tfailed\tnon2xx\tsockerr\twall_s\tcpu_ticks\thwm_kb\tother_pct\tsteal_pct\traw\n' >"$RUNS"
CLK_TCK=$(getconf CLK_TCK)
echo "clk_tck=$CLK_TCK" >>"$OUT/env.txt"
SEQ=0

run_one() {                 # run_one TOOL SIZE MODE TARGET ROUND
	local tool=$1 size=$2 mode=$3 t=$4 r=$5
	local port pid n url raw rc c0 c1 t0 t1 parsed sb0 st0 ss0 sb1 st1 ss1 n0 n1 a0 a1
	local rps complete failed non2xx sockerr
	port=$(port_of "$t"); pid=$(pid_of "$t"); n=$(n_of "$size")
	url="http://127.0.0.1:$port/$size.bin"
	SEQ=$((SEQ + 1))
	raw="raw/$(printf '%03d' "$SEQ")-r$r-$tool-$size-$mode-$t.txt"
	reset_hwm "$pid"
	c0=$(cpu_ticks "$pid")
	read -r sb0 st0 ss0 <<<"$(sys_ticks)"
	n0=$(nginx_ticks); a0=$(child_ticks)
	t0=$(date +%s.%N)
	rc=0
	if [ "$tool" = ab ]; then
		local ka=()
		[ "$mode" = ka ] && ka=(-k)
		echo "# ab -r -s 20 ${ka[*]} -n $n -c $CONC $url" >"$OUT/$raw"
		timeout -k 5 "$RUN_TIMEOUT" ab -r -s 20 "${ka[@]}" -n "$n" -c "$CONC" "$url" \
			>>"$OUT/$raw" 2>&1 || rc=$?
	else
		echo "# wrk -t$WRK_THREADS -c$CONC -d${WRK_DUR}s --timeout 20s $url" >"$OUT/$raw"
		timeout -k 5 $((WRK_DUR + 60)) wrk -t"$WRK_THREADS" -c"$CONC" -d"${WRK_DUR}s" \
			--timeout 20s "$url" >>"$OUT/$raw" 2>&1 || rc=$?
	fi
	t1=$(date +%s.%N)
	c1=$(cpu_ticks "$pid")
	read -r sb1 st1 ss1 <<<"$(sys_ticks)"
	n1=$(nginx_ticks); a1=$(child_ticks)
	# CPU used by processes that are not part of this bench (other users of
	# the machine), in % of the whole machine during the run: a noise gauge.
	# Kernel time spent in softirq (loopback traffic) is excluded from busy.
	local other steal tot=$((st1 - st0))
	[ "$tot" -gt 0 ] || tot=1
	other=$(( (sb1 - sb0) - (c1 - c0) - (n1 - n0) - (a1 - a0) ))
	[ "$other" -ge 0 ] || other=0
	other=$(( 100 * other / tot ))
	steal=$(( 100 * (ss1 - ss0) / tot ))
	parsed=$(python3 "$REPORT" parse "$tool" "$OUT/$raw")   # rps complete failed non2xx sockerr
	read -r rps complete failed non2xx sockerr <<<"$parsed"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$r" "$SEQ" "$tool" "$size" "$mode" "$t" "$n" "$CONC" "$rc" "$rps" "$complete" \
		"$failed" "$non2xx" "$sockerr" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
		"$((c1 - c0))" "$(hwm_kb "$pid")" "$other" "$steal" "$raw" >>"$RUNS"
	local flag=""
	if [ "$rc" != 0 ] || [ "$failed" != 0 ] || [ "$non2xx" != 0 ] || [ "$sockerr" != 0 ] \
		|| { [ "$tool" = ab ] && [ "$complete" != "$n" ]; }; then
		flag="  <-- BAD (rc=$rc failed=$failed non2xx=$non2xx sockerr=$sockerr complete=$complete)"
	fi
	log "$(printf 'r%s %-3s %-4s %-5s %-7s %10s req/s  others %2s%% steal %s%%%s' "$r" "$tool" "$size" "$mode" "$t" "$rps" "$other" "$steal" "$flag")"
}

rotated() {                 # rotated K: TARGETS rotated left by K
	local k=$1 i nt=${#TARGETS[@]}
	for ((i = 0; i < nt; i++)); do printf '%s ' "${TARGETS[$(((i + k) % nt))]}"; done
}

log "results in $OUT"
for ((r = 1; r <= ROUNDS; r++)); do
	row=0
	for s in "${SIZE_LIST[@]}"; do
		for m in "${MODE_LIST[@]}"; do
			for t in $(rotated $((r - 1 + row))); do
				run_one ab "$s" "$m" "$t" "$r"
			done
			row=$((row + 1))
			alive_check
		done
		if [ "$WRK" = 1 ]; then
			for t in $(rotated $((r - 1 + row))); do
				run_one wrk "$s" ka "$t" "$r"
			done
			row=$((row + 1))
			alive_check
		fi
	done
done

# ------------------------------------------------------------- afterwards --
{
	echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)"
	[ -n "$PID_PROXYD" ] && echo "proxyd_vmhwm_kb_end=$(hwm_kb "$PID_PROXYD")"
	[ -n "$PID_PROXYD" ] && echo "proxyd_vmrss_kb_end=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PID_PROXYD/status")"
	[ -n "$PID_PROXYD" ] && echo "proxyd_threads=$(awk '/^Threads:/ { print $2 }' "/proc/$PID_PROXYD/status")"
	[ -n "$PID_HAPROXY" ] && echo "haproxy_vmhwm_kb_end=$(hwm_kb "$PID_HAPROXY")"
	[ -n "$PID_HAPROXY" ] && echo "haproxy_vmrss_kb_end=$(awk '/^VmRSS:/ { print $2 }' "/proc/$PID_HAPROXY/status")"
	echo "time_wait_sockets_end=$(ss -Htan state time-wait 2>/dev/null | wc -l)"
} >>"$OUT/env.txt"
if [ -n "$PID_PROXYD" ]; then
	# sessions must drain back to 0 once the clients are gone (bounded wait)
	for i in $(seq 1 50); do
		curl -s -m 5 "http://127.0.0.1:$P_ADMIN/metrics" >"$OUT/proxyd-metrics-after.txt" || true
		awk '$1 == "proxyd_sessions_active" && $2 + 0 == 0 { z = 1 } END { exit !z }' \
			"$OUT/proxyd-metrics-after.txt" && break
		sleep 0.1
	done
	curl -s -m 5 "http://127.0.0.1:$P_ADMIN/status" >"$OUT/proxyd-status-after.json" || true
fi

# Stop the servers now (not only in the trap) so their logs are complete.
for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[$i]}"; done
PIDS=()

# the chart needs matplotlib, which may live only in the system python
PY_REPORT=python3
for py in python3 /usr/bin/python3; do
	if "$py" -c 'import matplotlib' >/dev/null 2>&1; then PY_REPORT=$py; break; fi
done
"$PY_REPORT" "$REPORT" report "$OUT"
log "wrote $OUT/results.md, $OUT/results.csv$( [ -f "$OUT/chart.png" ] && echo ", $OUT/chart.png")"
