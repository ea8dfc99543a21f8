#!/usr/bin/env bash
# proxyd benchmark: loopback (default) or inline in network namespaces (--netns).
#
# Fetches files of 10 KB, 100 KB and 1 MB from a private nginx origin with ab
# (and wrk), with and without keep-alive, through
#   loopback (127.0.0.1):
#     direct  - ab -> nginx
#     proxyd  - ab -> proxyd (plug analyser, fixed mode) -> nginx
#     haproxy - ab -> haproxy 2.6 (mode tcp, nbthread 1)  -> nginx
#   --netns (client C -> fw F -> server S, tests/netns/topology.sh; ab runs in C
#   and always connects to the server's own address 198.19.2.2):
#     kernel  - :8080, forwarded by F's kernel (with conntrack)
#     proxyd  - :8081, TPROXY'd in F to proxyd (plug, mode="transparent") :50080
#     haproxy - :8082, TPROXY'd in F to haproxy (mode tcp, bind transparent) :50090
# interleaved in one run, BENCH_ROUNDS rounds, median req/s per row.
# See bench/README.md for the knobs and for how to read the table.
#
# Loopback: everything binds 127.0.0.1 only. --netns: only 198.18.0.0/15 inside
# namespaces this run creates and deletes. Every server is started here and
# stopped on exit; nothing else is touched.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
REPORT="$BENCH_DIR/report.py"

usage() {
	cat <<'EOF'
usage: bench/run.sh [--netns] [--quick] [--help]

  --netns   inline mode: client -> fw -> server network namespaces; compares
            kernel forwarding, proxyd (TPROXY) and haproxy (TPROXY). Needs root.
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
                         (--netns: subset of "kernel proxyd haproxy")
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
  BENCH_SPOOF            --netns: 1 = both proxies connect to the server from
                         the client's address (proxyd spoof-source="yes",
                         haproxy "source 0.0.0.0 usesrc clientip"); 0 = from
                         the fw's address 198.19.2.1 [1]
  BENCH_OUT              output directory          [bench/results/<timestamp>,
                                                    --netns: <timestamp>-netns]
  BENCH_KEEP_TMP         1 = keep the temp dir (configs, files)  [0]
EOF
}

QUICK=0
NETNS=0
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--netns) NETNS=1 ;;
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
if [ "$NETNS" = 1 ]; then BASE=kernel; else BASE=direct; fi   # the unproxied path
TARGETS_S=${BENCH_TARGETS:-$BASE proxyd haproxy}
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
SPOOF=${BENCH_SPOOF:-1}
case "$HA_SPLICE" in 0|1|auto) ;; *) echo "run.sh: BENCH_HAPROXY_SPLICE must be 0, 1 or auto" >&2; exit 2 ;; esac
case "$SPOOF" in 0|1) ;; *) echo "run.sh: BENCH_SPOOF must be 0 or 1" >&2; exit 2 ;; esac
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
SUFFIX=""; [ "$NETNS" = 1 ] && SUFFIX=-netns
OUT=${BENCH_OUT:-$BENCH_DIR/results/$STAMP$SUFFIX}

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
for t in "${TARGETS[@]}"; do case "$t" in "$BASE"|proxyd|haproxy) ;; *) die "unknown target '$t' (targets: $BASE proxyd haproxy)" ;; esac; done
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
	[ -x "$PROXYD" ] || die "proxyd binary not found at $PROXYD (build it: cmake -S $ROOT -B $ROOT/build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build $ROOT/build-rel -j2; or set PROXYD=, or BENCH_TARGETS='$BASE haproxy')"
fi
if [ "$NETNS" = 1 ]; then
	[ "$(id -u)" = 0 ] || die "--netns needs root (network namespaces, iptables, IP_TRANSPARENT)"
	for tool in ip iptables ss; do
		command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
	done
	TOPOLOGY="$ROOT/tests/netns/topology.sh"
	DEPLOY="$ROOT/deploy/inline-tproxy.sh"
	[ -r "$TOPOLOGY" ] || die "$TOPOLOGY not found"
	[ -x "$DEPLOY" ] || die "$DEPLOY not found or not executable"
	# shellcheck source=../tests/netns/topology.sh
	source "$TOPOLOGY"
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
	if [ "$NETNS" = 1 ]; then
		# the fw's state, for a run that failed (rules with counters, sockets)
		if [ "$rc" != 0 ] && [ -d "$OUT" ] && [ ${#TOPO_CREATED[@]} -gt 0 ]; then
			{ nsF iptables-save -c; nsF ip rule; echo "time-wait: $(nsF ss -Htan state time-wait | wc -l)"; } \
				>"$OUT/fw-state-at-exit.txt" 2>&1 </dev/null || true
		fi
		topo_down             # anything left in our namespaces, then the namespaces
	fi
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
# Command prefixes: where the client (ab, curl), the proxies and the origin
# run. Empty on loopback; `ip netns exec NS` with --netns (it execs the
# command, so $! of a background start is the server itself).
CLIENT=() FW=() SRV=()
NS_F=""                     # the fw namespace (--netns), for wait_port
if [ "$NETNS" = 1 ]; then
	# Fresh namespaces: fixed ports cannot collide with anything.
	# nginx in S listens on one port per path, so that all three paths can be
	# diverted (or not) at the same time: the client always connects to the
	# server's own address, only the destination port differs.
	SERVER_ADDR=198.19.2.2          # = TOPO_S4 (checked below)
	P_KERNEL=8080 P_VIA_PROXYD=8081 P_VIA_HAPROXY=8082
	P_PROXYD=50080 P_HAPROXY=50090 P_ADMIN=9180   # listeners inside F
	P_NGINX=$P_KERNEL
	[ "$SERVER_ADDR" = "$TOPO_S4" ] || die "topology.sh's server address is $TOPO_S4, not $SERVER_ADDR"
	log "building the client -> fw -> server namespaces (tests/netns/topology.sh)"
	unset TOPO_ID               # topology.sh's default: <our pid>-<random>, reaped if we are SIGKILLed
	topo_rc=0
	topo_up || topo_rc=$?
	[ "$topo_rc" != 2 ] || die "cannot create network namespaces here (ip netns add failed)"
	[ "$topo_rc" = 0 ] || die "could not build the client/fw/server topology"
	CLIENT=(ip netns exec "$C") FW=(ip netns exec "$F") SRV=(ip netns exec "$S")
	NS_F=$F
	log "namespaces: client $C, fw $F, server $S"
else
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
fi

wait_port() {               # wait_port PORT PID NAME [NS]: bounded, 10 s
	local port=$1 pid=$2 name=$3 ns=${4:-} i
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || die "$name (pid $pid) exited during start-up; see $OUT/$name.stderr"
		if [ -n "$ns" ]; then
			ip netns exec "$ns" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
		elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	die "$name did not listen on port $port within 10 s${ns:+ (namespace $ns)}"
}

# ----------------------------------------------------------------- origin --
mkdir -p "$TMP/www" "$TMP/nginx/tmp"
head -c 10240 /dev/urandom >"$TMP/www/10k.bin"
head -c 102400 /dev/urandom >"$TMP/www/100k.bin"
head -c 1048576 /dev/urandom >"$TMP/www/1m.bin"
chmod 644 "$TMP"/www/*.bin
chmod 755 "$TMP/www"
if [ "$NETNS" = 1 ]; then
	NGINX_LISTEN="listen $SERVER_ADDR:$P_KERNEL backlog=4096;
        listen $SERVER_ADDR:$P_VIA_PROXYD backlog=4096;
        listen $SERVER_ADDR:$P_VIA_HAPROXY backlog=4096;"
else
	NGINX_LISTEN="listen 127.0.0.1:$P_NGINX backlog=4096;"
fi
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
        $NGINX_LISTEN
        root $TMP/www;
        location / { }
    }
}
EOF
"${SRV[@]}" nginx -t -q -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
	|| die "nginx config test failed: $(cat "$TMP/nginx/error.log" 2>/dev/null)"
"${SRV[@]}" nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
	>"$OUT/nginx.stderr" 2>&1 &
PID_NGINX=$!
PIDS+=("$PID_NGINX")
if [ "$NETNS" = 1 ]; then
	for p in "$P_KERNEL" "$P_VIA_PROXYD" "$P_VIA_HAPROXY"; do
		wait_port "$p" "$PID_NGINX" nginx "$S"
	done
else
	wait_port "$P_NGINX" "$PID_NGINX" nginx
fi
sleep 0.2
for p in $(ps -o pid= --ppid "$PID_NGINX" 2>/dev/null); do EXTRA_PIDS+=("$p"); done
if [ "$NETNS" = 1 ]; then
	log "nginx pid $PID_NGINX (workers ${EXTRA_PIDS[*]:-?}) in $S on $SERVER_ADDR:$P_KERNEL,$P_VIA_PROXYD,$P_VIA_HAPROXY"
else
	log "nginx pid $PID_NGINX (workers ${EXTRA_PIDS[*]:-?}) on 127.0.0.1:$P_NGINX"
fi

# ----------------------------------------------------------- fw ruleset --
# --netns: the rules users run (deploy/inline-tproxy.sh), inside F.
#   :8081 -> TPROXY -> proxyd   :50080 (transparent listener)
#   :8082 -> TPROXY -> haproxy  :50090 (bind ... transparent)
#   :8080 -> not diverted: forwarded by the kernel
# Both diversions are installed once, before any run, and stay for the whole
# run (no rule switching between runs): every path crosses the same ruleset.
# The first call leaves out the conntrack rule (it RETURNs for every packet,
# so a TPROXY rule appended after it would never be reached); the second adds
# it at the end. Plus a FORWARD rule that uses conntrack for the kernel path
# (the mangle "keep conntrack on" rule already enables conntrack for the
# whole namespace; this one also counts the forwarded packets).
if [ "$NETNS" = 1 ]; then
	deploy_fw() {
		echo "# ip netns exec $F $DEPLOY $*" >>"$OUT/fw-rules.txt"
		"${FW[@]}" "$DEPLOY" "$@" >>"$OUT/fw-rules.txt" 2>&1 \
			|| { cat "$OUT/fw-rules.txt" >&2; die "deploy/inline-tproxy.sh $* failed in $F"; }
	}
	: >"$OUT/fw-rules.txt"
	deploy_fw tproxy --port "$P_VIA_PROXYD" --proxy-port "$P_PROXYD" --family 4 --in-iface f0 --no-conntrack
	deploy_fw tproxy --port "$P_VIA_HAPROXY" --proxy-port "$P_HAPROXY" --family 4 --in-iface f0
	echo "# the kernel path: conntrack-using FORWARD rule (counts, accepts; policy is ACCEPT anyway)" >>"$OUT/fw-rules.txt"
	FWD_RULE=(-p tcp -m conntrack --ctstate "NEW,ESTABLISHED,RELATED" -m comment --comment bench-forward -j ACCEPT)
	echo "+ iptables -w -A FORWARD ${FWD_RULE[*]}" >>"$OUT/fw-rules.txt"
	"${FW[@]}" iptables -w -A FORWARD "${FWD_RULE[@]}" || die "cannot add the FORWARD conntrack rule in $F"
	{ echo; echo "# resulting ruleset (iptables-save, before the runs)"; "${FW[@]}" iptables-save; } >>"$OUT/fw-rules.txt"
	log "fw rules installed ($OUT/fw-rules.txt)"
fi

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
	if [ "$NETNS" = 1 ]; then
		# TPROXY'd connections; the destination is the original one
		# (198.19.2.2:8081); spoof-source per BENCH_SPOOF. The mark is the
		# deployment deploy/README.md documents: deploy/inline-tproxy.sh
		# puts marked upstreams in conntrack zone 1, so spoofed tuples
		# cannot clash with the client's own flows. (HAProxy 2.6 has no way
		# to mark its server-side packets, so it runs without.)
		cat >"$TMP/proxyd/policy/bench.xml" <<EOF
<service name="bench" analyser="plug">
  <listen address="0.0.0.0" port="$P_PROXYD" mode="transparent"/>
  <upstream spoof-source="$( [ "$SPOOF" = 1 ] && echo yes || echo no)" mark="0x40000000" ct-zone="1"/>
  <plug splice="$PX_SPLICE" half-close="yes"/>
</service>
EOF
	else
		cat >"$TMP/proxyd/policy/bench.xml" <<EOF
<service name="bench" analyser="plug">
  <listen address="127.0.0.1" port="$P_PROXYD" mode="fixed"/>
  <target address="127.0.0.1" port="$P_NGINX"/>
  <plug splice="$PX_SPLICE" half-close="yes"/>
</service>
EOF
	fi
	cp "$TMP/proxyd/conf/proxyd.xml" "$OUT/proxyd.xml"
	cp "$TMP/proxyd/policy/bench.xml" "$OUT/proxyd-service.xml"
	if ! "$PROXYD" --check -c "$TMP/proxyd/conf/proxyd.xml" >"$OUT/proxyd-check.txt" 2>&1; then
		cat "$OUT/proxyd-check.txt" >&2
		die "proxyd --check rejected the bench configuration (above)"
	fi
	"${FW[@]}" "$PROXYD" -c "$TMP/proxyd/conf/proxyd.xml" >"$OUT/proxyd.stderr" 2>&1 &
	PID_PROXYD=$!
	PIDS+=("$PID_PROXYD")
	wait_port "$P_PROXYD" "$PID_PROXYD" proxyd "$NS_F"
	wait_port "$P_ADMIN" "$PID_PROXYD" proxyd "$NS_F"
	if [ "$NETNS" = 1 ]; then
		log "proxyd pid $PID_PROXYD (workers $WORKERS) in $F on 0.0.0.0:$P_PROXYD transparent, spoof-source=$SPOOF, admin 127.0.0.1:$P_ADMIN"
	else
		log "proxyd pid $PID_PROXYD (workers $WORKERS) on 127.0.0.1:$P_PROXYD, admin :$P_ADMIN"
	fi
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
		echo "    maxconn 20000"
		if [ "$NETNS" = 1 ]; then
			# TPROXY'd connections (IP_TRANSPARENT listener); server address
			# 0.0.0.0 without a port = the connection's original destination
			# (198.19.2.2:8082); usesrc clientip = connect from the client's
			# address (as proxyd's spoof-source="yes"), per BENCH_SPOOF
			echo "    bind 0.0.0.0:$P_HAPROXY transparent"
			[ "$SPOOF" = 1 ] && echo "    source 0.0.0.0 usesrc clientip"
			echo "    server origin 0.0.0.0"
		else
			echo "    bind 127.0.0.1:$P_HAPROXY"
			echo "    server origin 127.0.0.1:$P_NGINX"
		fi
	} >"$TMP/haproxy/haproxy.cfg"
	cp "$TMP/haproxy/haproxy.cfg" "$OUT/haproxy.cfg"
	haproxy -c -q -f "$TMP/haproxy/haproxy.cfg" >"$OUT/haproxy-check.txt" 2>&1 \
		|| { cat "$OUT/haproxy-check.txt" >&2; die "haproxy config check failed"; }
	"${FW[@]}" haproxy -db -f "$TMP/haproxy/haproxy.cfg" >"$OUT/haproxy.stderr" 2>&1 &
	PID_HAPROXY=$!
	PIDS+=("$PID_HAPROXY")
	wait_port "$P_HAPROXY" "$PID_HAPROXY" haproxy "$NS_F"
	if [ "$NETNS" = 1 ]; then
		log "haproxy pid $PID_HAPROXY in $F on 0.0.0.0:$P_HAPROXY transparent, usesrc clientip=$SPOOF"
	else
		log "haproxy pid $PID_HAPROXY on 127.0.0.1:$P_HAPROXY"
	fi
fi

url_of() {                  # url_of TARGET SIZE: what the client fetches
	if [ "$NETNS" = 1 ]; then
		# always the server's own address; the port selects the path through F
		case "$1" in
		kernel) echo "http://$SERVER_ADDR:$P_KERNEL/$2.bin" ;;
		proxyd) echo "http://$SERVER_ADDR:$P_VIA_PROXYD/$2.bin" ;;
		haproxy) echo "http://$SERVER_ADDR:$P_VIA_HAPROXY/$2.bin" ;;
		esac
	else
		case "$1" in
		direct) echo "http://127.0.0.1:$P_NGINX/$2.bin" ;;
		proxyd) echo "http://127.0.0.1:$P_PROXYD/$2.bin" ;;
		haproxy) echo "http://127.0.0.1:$P_HAPROXY/$2.bin" ;;
		esac
	fi
}
pid_of() {
	case "$1" in
	direct|kernel) echo "" ;; proxyd) echo "$PID_PROXYD" ;; haproxy) echo "$PID_HAPROXY" ;;
	esac
}
admin_get() {               # admin_get PATH: proxyd's admin endpoint (inside F with --netns)
	"${FW[@]}" curl -s -m 5 "http://127.0.0.1:$P_ADMIN$1"
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
client_syn_retrans() {      # --netns: SYN retransmissions of the client namespace so far ("-" on loopback)
	[ "$NETNS" = 1 ] || { echo -; return; }
	"${CLIENT[@]}" nstat -asz TcpExtTCPSynRetrans 2>/dev/null \
		| awk '$1 == "TcpExtTCPSynRetrans" { print $2; f = 1 } END { if (!f) print "-" }'
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
	if [ "$NETNS" = 1 ]; then
		echo "mode=netns"
		echo "namespaces=$C $F $S"
		echo "spoof=$SPOOF"
		echo "server_addr=$SERVER_ADDR"
		echo "ports=kernel:$P_KERNEL proxyd:$P_VIA_PROXYD->$P_PROXYD haproxy:$P_VIA_HAPROXY->$P_HAPROXY"
		echo "mtu=c0:$(ip -n "$C" -o link show c0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p') f0:$(ip -n "$F" -o link show f0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p') f1:$(ip -n "$F" -o link show f1 | sed -n 's/.* mtu \([0-9]*\).*/\1/p') s0:$(ip -n "$S" -o link show s0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
		# the namespaces have their own TCP sysctls (defaults, not the host's)
		for k in net.ipv4.tcp_tw_reuse net.ipv4.ip_local_port_range net.core.somaxconn; do
			echo "client_sysctl_$k=$("${CLIENT[@]}" sysctl -n "$k" 2>/dev/null | tr '\t' ' ')"
		done
		echo "fw_nf_conntrack_max=$("${FW[@]}" sysctl -n net.netfilter.nf_conntrack_max 2>/dev/null)"
		echo "fw_nf_conntrack_tcp_timeout_time_wait=$("${FW[@]}" sysctl -n net.netfilter.nf_conntrack_tcp_timeout_time_wait 2>/dev/null)"
	else
		echo "mode=loopback"
	fi
} >"$OUT/env.txt"

if [ -n "$PID_PROXYD" ]; then
	admin_get /metrics >"$OUT/proxyd-metrics-before.txt" || true
fi

# ---------------------------------------------------- correctness check --
# Every path must return the files byte for byte (also several on one
# keep-alive connection) before any number is worth anything.
log "checking content through every path"
for t in "${TARGETS[@]}"; do
	for s in 10k 100k 1m; do
		want_sum=$(sha256sum <"$TMP/www/$s.bin" | cut -d' ' -f1)
		got=$("${CLIENT[@]}" curl -s -m 20 "$(url_of "$t" "$s")" | sha256sum | cut -d' ' -f1) || got=curl-failed
		[ "$got" = "$want_sum" ] || die "$t: $s.bin came back corrupted or short from $(url_of "$t" "$s") (sha256 $got != $want_sum)"
	done
	# three files on one keep-alive connection, concatenated
	want_sum=$(cat "$TMP/www/1m.bin" "$TMP/www/10k.bin" "$TMP/www/100k.bin" | sha256sum | cut -d' ' -f1)
	got=$("${CLIENT[@]}" curl -s -m 20 "$(url_of "$t" 1m)" "$(url_of "$t" 10k)" \
		"$(url_of "$t" 100k)" | sha256sum | cut -d' ' -f1) || got=curl-failed
	[ "$got" = "$want_sum" ] || die "$t: keep-alive sequence 1m,10k,100k came back wrong from $(url_of "$t" 1m)"
done

# --netns: did each path really take its way through F? (rule counters after
# the content check; conntrack on; source address the server was sent)
if [ "$NETNS" = 1 ]; then
	mangle=$("${FW[@]}" iptables -w -t mangle -nvxL PROXYD)
	tp_pkts() { awk -v p="dpt:$1" '$3 == "TPROXY" && index($0, p) { print $1; f = 1 } END { if (!f) print 0 }' <<<"$mangle"; }
	fwd_pkts=$("${FW[@]}" iptables -w -nvxL FORWARD | awk '/bench-forward/ { print $1; f = 1 } END { if (!f) print 0 }')
	{
		echo "path_check_kernel_forward_pkts=$fwd_pkts"
		echo "path_check_proxyd_tproxy_pkts=$(tp_pkts "$P_VIA_PROXYD")"
		echo "path_check_haproxy_tproxy_pkts=$(tp_pkts "$P_VIA_HAPROXY")"
	} >>"$OUT/env.txt"
	if want "$BASE"; then [ "$fwd_pkts" -gt 0 ] || die "kernel path: no packet crossed F's FORWARD rule"; fi
	if want proxyd; then [ "$(tp_pkts "$P_VIA_PROXYD")" -gt 0 ] || die "proxyd path: no packet hit the TPROXY rule for :$P_VIA_PROXYD"; fi
	if want haproxy; then [ "$(tp_pkts "$P_VIA_HAPROXY")" -gt 0 ] || die "haproxy path: no packet hit the TPROXY rule for :$P_VIA_HAPROXY"; fi
	if command -v conntrack >/dev/null 2>&1; then
		"${FW[@]}" conntrack -L -p tcp >"$OUT/conntrack-after-check.txt" 2>/dev/null || true
		ct_kernel=$(grep -c "dport=$P_KERNEL " "$OUT/conntrack-after-check.txt" || true)
		ct_from_fw=$(grep -c "src=$TOPO_FS4 dst=$SERVER_ADDR " "$OUT/conntrack-after-check.txt" || true)
		echo "path_check_conntrack_kernel_flows=$ct_kernel" >>"$OUT/env.txt"
		echo "path_check_conntrack_flows_from_fw_addr=$ct_from_fw" >>"$OUT/env.txt"
		if want "$BASE"; then [ "$ct_kernel" -gt 0 ] || die "conntrack in F has no flow for the kernel path: conntrack is not on"; fi
		if [ "$SPOOF" = 1 ] && [ "$ct_from_fw" != 0 ]; then
			die "BENCH_SPOOF=1 but F connected to the server from its own address $TOPO_FS4 ($ct_from_fw flows): spoofing does not work"
		fi
		if [ "$SPOOF" = 0 ] && { want proxyd || want haproxy; } && [ "$ct_from_fw" = 0 ]; then
			die "BENCH_SPOOF=0 but no flow from F's address $TOPO_FS4 to the server"
		fi
	else
		log "conntrack (the tool) not found: conntrack and spoof checks skipped"
	fi
	log "paths ok: forwarded pkts $fwd_pkts, TPROXY pkts proxyd $(tp_pkts "$P_VIA_PROXYD") haproxy $(tp_pkts "$P_VIA_HAPROXY")"
fi

# ---------------------------------------------------------------- warm-up --
if [ "$WARMUP" -gt 0 ]; then
	log "warm-up: $WARMUP requests per target and size"
	for t in "${TARGETS[@]}"; do
		for s in "${SIZE_LIST[@]}"; do
			timeout -k 5 "$RUN_TIMEOUT" "${CLIENT[@]}" ab -q -r -s 20 -k -n "$WARMUP" -c "$CONC" \
				"$(url_of "$t" "$s")" >/dev/null 2>&1 \
				|| log "warm-up ab failed on $t $s (ignored, the measured runs will show it)"
		done
	done
fi
alive_check

# ------------------------------------------------------------------- runs --
printf 'round\tseq\ttool\tsize\tmode\ttarget\tn\tc\trc\trps\tcomplete\tfailed\tnon2xx\tsockerr\twall_s\tcpu_ticks\thwm_kb\tother_pct\tsteal_pct\traw\tmax_ms\tsyn_retrans\n' >"$RUNS"
CLK_TCK=$(getconf CLK_TCK)
echo "clk_tck=$CLK_TCK" >>"$OUT/env.txt"
SEQ=0

run_one() {                 # run_one TOOL SIZE MODE TARGET ROUND
	local tool=$1 size=$2 mode=$3 t=$4 r=$5
	local pid n url raw rc c0 c1 t0 t1 parsed sb0 st0 ss0 sb1 st1 ss1 n0 n1 a0 a1
	local rps complete failed non2xx sockerr max_ms syn0 syn1 syn
	pid=$(pid_of "$t"); n=$(n_of "$size")
	url=$(url_of "$t" "$size")
	SEQ=$((SEQ + 1))
	raw="raw/$(printf '%03d' "$SEQ")-r$r-$tool-$size-$mode-$t.txt"
	reset_hwm "$pid"
	c0=$(cpu_ticks "$pid")
	read -r sb0 st0 ss0 <<<"$(sys_ticks)"
	syn0=$(client_syn_retrans)
	n0=$(nginx_ticks); a0=$(child_ticks)
	t0=$(date +%s.%N)
	rc=0
	if [ "$tool" = ab ]; then
		local ka=()
		[ "$mode" = ka ] && ka=(-k)
		echo "# ${CLIENT[*]}${CLIENT[*]:+ }ab -r -s 20 ${ka[*]} -n $n -c $CONC $url" >"$OUT/$raw"
		timeout -k 5 "$RUN_TIMEOUT" "${CLIENT[@]}" ab -r -s 20 "${ka[@]}" -n "$n" -c "$CONC" "$url" \
			>>"$OUT/$raw" 2>&1 || rc=$?
	else
		echo "# ${CLIENT[*]}${CLIENT[*]:+ }wrk -t$WRK_THREADS -c$CONC -d${WRK_DUR}s --timeout 20s $url" >"$OUT/$raw"
		timeout -k 5 $((WRK_DUR + 60)) "${CLIENT[@]}" wrk -t"$WRK_THREADS" -c"$CONC" -d"${WRK_DUR}s" \
			--timeout 20s "$url" >>"$OUT/$raw" 2>&1 || rc=$?
	fi
	t1=$(date +%s.%N)
	c1=$(cpu_ticks "$pid")
	read -r sb1 st1 ss1 <<<"$(sys_ticks)"
	n1=$(nginx_ticks); a1=$(child_ticks)
	syn1=$(client_syn_retrans)
	syn=-
	is_uint "$syn0" && is_uint "$syn1" && syn=$((syn1 - syn0))
	# CPU used by processes that are not part of this bench (other users of
	# the machine), in % of the whole machine during the run: a noise gauge.
	# Kernel time spent in softirq (loopback traffic) is excluded from busy.
	local other steal tot=$((st1 - st0))
	[ "$tot" -gt 0 ] || tot=1
	other=$(( (sb1 - sb0) - (c1 - c0) - (n1 - n0) - (a1 - a0) ))
	[ "$other" -ge 0 ] || other=0
	other=$(( 100 * other / tot ))
	steal=$(( 100 * (ss1 - ss0) / tot ))
	parsed=$(python3 "$REPORT" parse "$tool" "$OUT/$raw")   # rps complete failed non2xx sockerr max_ms
	read -r rps complete failed non2xx sockerr max_ms <<<"$parsed"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$r" "$SEQ" "$tool" "$size" "$mode" "$t" "$n" "$CONC" "$rc" "$rps" "$complete" \
		"$failed" "$non2xx" "$sockerr" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
		"$((c1 - c0))" "$(hwm_kb "$pid")" "$other" "$steal" "$raw" "$max_ms" "$syn" >>"$RUNS"
	local flag=""
	if [ "$rc" != 0 ] || [ "$failed" != 0 ] || [ "$non2xx" != 0 ] || [ "$sockerr" != 0 ] \
		|| { [ "$tool" = ab ] && [ "$complete" != "$n" ]; }; then
		flag="  <-- BAD (rc=$rc failed=$failed non2xx=$non2xx sockerr=$sockerr complete=$complete)"
	fi
	log "$(printf 'r%s %-3s %-4s %-5s %-7s %10s req/s  longest %6s ms%s  others %2s%% steal %s%%%s' "$r" "$tool" "$size" "$mode" "$t" "$rps" "$max_ms" "$( [ "$syn" = - ] || echo "  SYN retrans $syn")" "$other" "$steal" "$flag")"
}

rotated() {                 # rotated K: TARGETS rotated left by K
	local k=$1 i nt=${#TARGETS[@]}
	for ((i = 0; i < nt; i++)); do printf '%s ' "${TARGETS[$(((i + k) % nt))]}"; done
}

CT_MAX=0
row_done() {                # after each row: everybody alive? (--netns: conntrack table size)
	local n
	alive_check
	if [ "$NETNS" = 1 ]; then
		n=$("${FW[@]}" cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null || echo 0)
		[ "$n" -le "$CT_MAX" ] || CT_MAX=$n
	fi
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
			row_done
		done
		if [ "$WRK" = 1 ]; then
			for t in $(rotated $((r - 1 + row))); do
				run_one wrk "$s" ka "$t" "$r"
			done
			row=$((row + 1))
			row_done
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
	if [ "$NETNS" = 1 ]; then
		echo "time_wait_sockets_end=client:$("${CLIENT[@]}" ss -Htan state time-wait | wc -l) fw:$("${FW[@]}" ss -Htan state time-wait | wc -l) server:$("${SRV[@]}" ss -Htan state time-wait | wc -l)"
		echo "fw_conntrack_count_max=$CT_MAX (sampled after each row)"
		echo "fw_conntrack_count_end=$("${FW[@]}" cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null)"
	else
		echo "time_wait_sockets_end=$(ss -Htan state time-wait 2>/dev/null | wc -l)"
	fi
} >>"$OUT/env.txt"
if [ "$NETNS" = 1 ]; then
	{ echo "# iptables-save -c in $F after the runs"; "${FW[@]}" iptables-save -c; } >"$OUT/fw-rules-after.txt" 2>&1 || true
	"${FW[@]}" nstat -asz >"$OUT/fw-nstat.txt" 2>/dev/null || true
	if "${FW[@]}" conntrack -S >"$OUT/fw-conntrack-stats.txt" 2>/dev/null; then
		# per-CPU lines "cpu=0 found=.. invalid=.. insert_failed=.. drop=..": sum the non-zero ones
		echo "fw_conntrack_stats_end=$(awk '{ for (i = 2; i <= NF; i++) { split($i, a, "="); s[a[1]] += a[2] } }
			END { for (k in s) if (s[k] && k != "found" && k != "search_restart") printf "%s=%d ", k, s[k]; print "" }' \
			"$OUT/fw-conntrack-stats.txt")" >>"$OUT/env.txt"
	fi
	"${CLIENT[@]}" nstat -asz >"$OUT/client-nstat.txt" 2>/dev/null || true
fi
if [ -n "$PID_PROXYD" ]; then
	# sessions must drain back to 0 once the clients are gone (bounded wait)
	for i in $(seq 1 50); do
		admin_get /metrics >"$OUT/proxyd-metrics-after.txt" || true
		awk '$1 == "proxyd_sessions_active" && $2 + 0 == 0 { z = 1 } END { exit !z }' \
			"$OUT/proxyd-metrics-after.txt" && break
		sleep 0.1
	done
	admin_get /status >"$OUT/proxyd-status-after.json" || true
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
