# shellcheck shell=bash
# bench/scan.sh: the scanning rows of bench/run (sourced by it, after the
# other row families; BENCH_SCAN=1). Issue 28's "proxyd + c-icap against
# Squid + the same c-icap, side by side":
#   proxyd-scan   proxyd, http analyser, <scan scanner="av"> (RESPMOD)
#   squid-scan    Squid (Debian's), reverse proxy (accel, the origin as a
#                 cache_peer originserver, nothing cached), its own ICAP
#                 client: icap_service respmod_precache + adaptation_access
#   proxyd-scan-tail  the same proxyd path with <scan deliver="tail">: the
#                 body streams on, only its end held (proxyd-scan holds
#                 each body until the verdict, spooled past the buffer:
#                 the pair gives the cost of holding per GiB)
# both in front of the same nginx origin, both pinned like the other
# proxies (BENCH_PIN), both scanning through the same c-icap (virus_scan
# over clamd, the database written here: EICAR only, no download; each in
# the mode its ICAP client works with: scan_start_squid). Rows:
# ab -k of 100 KB and 10 MB bodies, BENCH_SCAN_C at once; per run the CPU
# (schedstat, whole process trees with their reaped children) of the proxy,
# of c-icap and of clamd, the body bytes and the wall time, and the number
# of RESPMODs c-icap logged (each request must have been scanned). Then,
# once, the memory per scanned session: each proxy's RSS with
# BENCH_SCAN_SLOW slow readers of the 10 MB body (bench/slowread.py) minus
# its RSS without. Results in scan.tsv and scan-mem.tsv, rendered by
# bench/report_scan.py. Everything lives in $TMP/scan (configs, logs,
# Squid's pid and cache dirs) and is stopped by pid with the rest.
# Loopback only: in netns mode the scanning parts and the client run in
# the fw namespace on its 127.0.0.1, the origin is nginx in the server one.

SCAN_D=""
SCAN_ICAP_PORT=""
SCAN_ICAP_PID=""
SCAN_CLAMD_PID=""
SCAN_LIST=()                # the scanning paths that started
declare -A SCAN_PORT SCAN_PID
SCAN_ICAP_MODS=/usr/lib/x86_64-linux-gnu/c_icap

scan_ready() {
	local c
	for c in c-icap clamd sigtool ab; do
		command -v "$c" >/dev/null 2>&1 && continue
		note "SKIP scan rows: $c not installed (scripts/deps: c-icap libc-icap-mod-virus-scan clamav-daemon clamav)"
		return 1
	done
	# Squid is the peer, not the row family: without it, proxyd's rows
	case " ${SCAN_TARGETS_REQ[*]} " in
	*" squid-scan "*)
		if ! command -v squid >/dev/null 2>&1; then
			note "SKIP squid-scan: squid not installed (bench/deps: squid)"
			SCAN_TARGETS_REQ=("${SCAN_TARGETS_REQ[@]/squid-scan}")
			read -r -a SCAN_TARGETS_REQ <<<"${SCAN_TARGETS_REQ[*]}"
		fi ;;
	esac
	[ ${#SCAN_TARGETS_REQ[@]} -gt 0 ] || return 1
	if [ ! -f "$SCAN_ICAP_MODS/virus_scan.so" ] || [ ! -f "$SCAN_ICAP_MODS/clamd_mod.so" ]; then
		note "SKIP scan rows: c-icap's virus_scan or clamd_mod module is missing (libc-icap-mod-virus-scan)"
		return 1
	fi
	if ! analyser_built http; then
		note "SKIP scan rows: this proxyd has no http analyser (proxyd --check: $CHECK_MSG)"
		return 1
	fi
	case " ${SCAN_TARGETS_REQ[*]} " in
	*" squid-scan "*)
		if [ "$(id -u)" != 0 ] || ! id proxy >/dev/null 2>&1; then
			note "SKIP scan rows: Squid needs root and its 'proxy' user"
			return 1
		fi ;;
	esac
	return 0
}

# scan_wait_port PORT PID NAME: like wait_port, but a server that does not
# come up skips the scanning rows (a note) instead of ending the bench
scan_wait_port() {
	local i
	for i in $(seq 1 100); do
		kill -0 "$2" 2>/dev/null || break
		if [ -n "$NS_F" ]; then
			ip netns exec "$NS_F" ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		elif (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	note "SKIP $3: it did not listen on 127.0.0.1:$1 within 10 s (see $OUT/$3.stderr)"
	return 1
}

scan_free_ports() {         # N: N free ports on 127.0.0.1
	python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# the pids of a process and of all its descendants
tree_pids() {
	local c
	echo "$1"
	for c in $(pgrep -P "$1" 2>/dev/null); do tree_pids "$c"; done
}
# CPU of a process tree in ns: every live member's schedstat and what each
# reaped of its children (cutime+cstime, ticks)
tree_ns() {
	local p s=0
	[ -n "$1" ] || { echo 0; return; }
	for p in $(tree_pids "$1"); do
		s=$((s + $(cpu_ns "$p") + $(reaped_ticks "$p") * 1000000000 / CLK_TCK))
	done
	echo "$s"
}
scan_count() {              # RESPMODs c-icap has logged so far
	grep -c RESPMOD "$SCAN_D/icap/access.log" 2>/dev/null || true
}

scan_start_scanner() {
	local d=$SCAN_D/icap i
	mkdir -p "$d/db" "$d/tmp"
	chmod 777 "$d" "$d/tmp"
	printf 'X5O!P%%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*' >"$TMP/www/eicar.com"
	chmod 644 "$TMP/www/eicar.com"
	sigtool --md5 "$TMP/www/eicar.com" >"$d/db/test.hdb"
	cat >"$d/clamd.conf" <<EOF
LocalSocket $d/clamd.sock
DatabaseDirectory $d/db
Foreground yes
LogFile $d/clamd.log
PidFile $d/clamd.pid
TemporaryDirectory $d/tmp
User root
EOF
	"${FW[@]}" clamd -c "$d/clamd.conf" >"$OUT/scan-clamd.stderr" 2>&1 &
	SCAN_CLAMD_PID=$!
	PIDS+=("$SCAN_CLAMD_PID")
	for i in $(seq 1 300); do
		[ -S "$d/clamd.sock" ] && break
		kill -0 "$SCAN_CLAMD_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -S "$d/clamd.sock" ] || { note "SKIP scan rows: clamd did not start ($OUT/scan-clamd.stderr)"; return 1; }
	# one server process (its CPU is the master's tree), threads enough for
	# the rows' connections, the memory row's slow readers and both
	# proxies' idle keep-alive connections
	cat >"$d/c-icap.conf" <<EOF
PidFile $d/c-icap.pid
CommandsSocket $d/c-icap.ctl
Port 127.0.0.1:$SCAN_ICAP_PORT
StartServers 1
MaxServers 1
ThreadsPerChild 160
MaxKeepAliveRequests 0
TmpDir $d/tmp
ModulesDir $SCAN_ICAP_MODS
ServicesDir $SCAN_ICAP_MODS
TemplateDir /usr/share/c_icap/templates/
LoadMagicFile /etc/c-icap/c-icap.magic
ServerLog $d/server.log
AccessLog $d/access.log
Module common clamd_mod.so
clamd_mod.ClamdSocket $d/clamd.sock
Service antivirus_module virus_scan.so
ServiceAlias avscan virus_scan?allow204=on&sizelimit=off&mode=simple
ServiceAlias avtrickle virus_scan?allow204=on&sizelimit=off
virus_scan.SendPercentData 5
virus_scan.StartSendPercentDataAfter 32K
virus_scan.ScanFileTypes TEXT DATA EXECUTABLE ARCHIVE GIF JPEG MSOFFICE
virus_scan.MaxObjectSize 100M
virus_scan.DefaultEngine clamd
EOF
	cp "$d/clamd.conf" "$OUT/scan-clamd.conf"
	cp "$d/c-icap.conf" "$OUT/scan-c-icap.conf"
	"${FW[@]}" c-icap -N -D -f "$d/c-icap.conf" >"$OUT/scan-c-icap.stderr" 2>&1 &
	SCAN_ICAP_PID=$!
	PIDS+=("$SCAN_ICAP_PID")
	scan_wait_port "$SCAN_ICAP_PORT" "$SCAN_ICAP_PID" scan-c-icap || return 1
	# its server child, killed with the master if the master's TERM leaves it
	for i in $(seq 1 50); do
		pgrep -P "$SCAN_ICAP_PID" >/dev/null 2>&1 && break
		sleep 0.1
	done
	for i in $(pgrep -P "$SCAN_ICAP_PID" 2>/dev/null); do EXTRA_PIDS+=("$i"); done
	log "scan rows: clamd pid $SCAN_CLAMD_PID, c-icap pid $SCAN_ICAP_PID (children $(pgrep -P "$SCAN_ICAP_PID" | tr '\n' ' ')) on $SCAN_ICAP_PORT"
}

# scan_start_proxyd TARGET PORT ADMIN SCAN: proxyd-scan (SCAN: its <scan>),
# or proxyd-noscan (SCAN empty; the memory row's reference, not pinned)
scan_start_proxyd() {
	local t=$1 d=$SCAN_D/$1 pin=()
	shift
	case "$t" in proxyd-scan|proxyd-scan-tail) pin=("${PINCMD[@]}") ;; esac
	mkdir -p "$d/conf" "$d/policy"
	cat >"$d/conf/proxyd.xml" <<EOF
<proxyd>
  <workers>$WORKERS</workers>
  <limits max-sessions="$MAXCONN" connect-timeout="10s" idle-timeout="5m"
          shutdown-grace="1s"$PX_BUFFER_ATTR/>
  <log target="stderr" level="$PX_LOGLEVEL"/>
  <admin listen="127.0.0.1:$2"/>
  <policies dir="../policy"/>
  <scanners spool="$SCAN_D/spool">
    <icap name="av" url="icap://127.0.0.1:$SCAN_ICAP_PORT/avscan" timeout="60s"/>
  </scanners>
</proxyd>
EOF
	cat >"$d/policy/bench.xml" <<EOF
<service name="$t" analyser="http">
  <listen address="127.0.0.1" port="$1" mode="fixed"/>
  <target address="$SERVER_ADDR" port="$P_NGINX"/>
  $3
</service>
EOF
	mkdir -p "$SCAN_D/spool"
	cp "$d/conf/proxyd.xml" "$OUT/$t.xml"
	cp "$d/policy/bench.xml" "$OUT/$t-service.xml"
	if ! "$PROXYD" --check -c "$d/conf/proxyd.xml" >"$OUT/$t-check.txt" 2>&1; then
		note "SKIP $t: proxyd --check rejected <scanners>/<scan> ($(head -n 1 "$OUT/$t-check.txt"))"
		return 1
	fi
	"${FW[@]}" "${pin[@]}" "$PROXYD" -c "$d/conf/proxyd.xml" >"$OUT/$t.stderr" 2>&1 &
	SCAN_PID[$t]=$!
	PIDS+=("${SCAN_PID[$t]}")
	scan_wait_port "$1" "${SCAN_PID[$t]}" "$t" || return 1
	SCAN_PORT[$t]=$1
	case "$t" in proxyd-scan|proxyd-scan-tail) SCAN_LIST+=("$t") ;; esac
	log "$t: proxyd pid ${SCAN_PID[$t]} on 127.0.0.1:$1${pin[*]:+ (cpu $PIN)}"
}

# Squid as a reverse proxy that caches nothing, its ICAP client on
# respmod_precache (the response scanned before Squid sends it on), with
# its defaults otherwise (preview on, persistent ICAP connections). Squid
# offers "Allow: 204" only for a body it can keep whole (64 KB) and keeps
# at most 64 KB of a body c-icap has not begun to answer: against the
# "simple" mode (no answer before the scan, then 204) a bigger body stalls
# until c-icap's timeout. So Squid uses the same virus_scan in its default
# mode (avtrickle: c-icap sends 5 % of the body back early, past 32 KB,
# the rest after the scan, always as a 200 echoing the body), which is
# what a Squid deployment has to use; proxyd offers 204 for any size and
# uses mode=simple (avscan). Its
# config, logs, pid and coredump dir in $SCAN_D/squid (owned by 'proxy',
# the user it drops to); no cache_dir: nothing on disk
scan_start_squid() {        # PORT
	local d=$SCAN_D/squid t=squid-scan
	mkdir -p "$d"
	cat >"$d/squid.conf" <<EOF
http_port 127.0.0.1:$1 accel defaultsite=bench no-vhost
cache_peer $SERVER_ADDR parent $P_NGINX 0 no-query no-digest originserver name=origin
cache_peer_access origin allow all
never_direct allow all
http_access allow all
cache deny all
workers 1
cache_effective_user proxy
pid_filename $d/squid.pid
coredump_dir $d
cache_log $d/cache.log
access_log none
cache_store_log none
netdb_filename none
logfile_rotate 0
shutdown_lifetime 1 seconds
max_filedescriptors $MAXCONN
icap_enable on
icap_service av respmod_precache bypass=off icap://127.0.0.1:$SCAN_ICAP_PORT/avtrickle
adaptation_access av allow all
EOF
	chown -R proxy "$d"
	cp "$d/squid.conf" "$OUT/$t.conf"
	if ! squid -k parse -f "$d/squid.conf" >"$OUT/$t-parse.txt" 2>&1; then
		note "SKIP squid-scan: squid -k parse rejected its configuration ($OUT/$t-parse.txt)"
		return 1
	fi
	# -N: one process, in the foreground (no daemon, no kid)
	"${FW[@]}" "${PINCMD[@]}" squid -N -f "$d/squid.conf" >"$OUT/$t.stderr" 2>&1 &
	SCAN_PID[$t]=$!
	PIDS+=("${SCAN_PID[$t]}")
	scan_wait_port "$1" "${SCAN_PID[$t]}" "$t" || return 1
	SCAN_PORT[$t]=$1
	SCAN_LIST+=("$t")
	log "$t: squid $(squid -v | sed -n '1s/.*Version //p') pid ${SCAN_PID[$t]} on 127.0.0.1:$1 (cpu $PIN)"
}

# scan_check TARGET: EICAR refused, the 100 KB and 10 MB bodies whole,
# each scanned (c-icap logged the RESPMODs)
scan_check() {
	local t=$1 u="http://127.0.0.1:${SCAN_PORT[$1]}" code s0 f
	s0=$(scan_count)
	code=$("${FW[@]}" curl -s -m 30 -o "$SCAN_D/check.out" -w '%{http_code}' "$u/eicar.com") || true
	grep -q 'EICAR-STANDARD' "$SCAN_D/check.out" 2>/dev/null && code="$code (EICAR passed)"
	if [ "$code" != 403 ]; then
		note "SKIP $t: EICAR through it gave '$code', not a 403 (not scanning?)"
		return 1
	fi
	for f in 100k.bin 10m.bin; do
		"${FW[@]}" curl -s -m 60 -o "$SCAN_D/check.out" "$u/$f" || true
		if ! cmp -s "$SCAN_D/check.out" "$TMP/www/$f"; then
			note "SKIP $t: $f through it differs from the origin's"
			return 1
		fi
	done
	sleep 0.5                # c-icap's access log is written after the answer
	if [ $(($(scan_count) - s0)) -lt 3 ]; then
		note "SKIP $t: c-icap logged $(($(scan_count) - s0)) RESPMODs for its 3 checks"
		return 1
	fi
	return 0
}

scan_n_of() { case "$1" in 100k) echo "$SCAN_N_100K" ;; 10m) echo "$SCAN_N_10M" ;; esac; }

# scan_run SIZE TARGET ROUND: one ab -k run, a line of scan.tsv
scan_run() {
	local s=$1 t=$2 r=$3 n c raw rc=0 px0 px1 ic0 ic1 cl0 cl1 sc0 sc1 t0 t1 complete failed non2xx bytes
	n=$(scan_n_of "$s")
	c=$((SCAN_C < n ? SCAN_C : n))    # ab refuses -c above -n
	SCAN_SEQ=$((SCAN_SEQ + 1))
	raw="raw/scan-$(printf '%03d' "$SCAN_SEQ")-r$r-$s-$t.txt"
	log "[scan $SCAN_SEQ/$SCAN_TOTAL] $t ab -k $s x$n -c$c round $r"
	echo "# ${FW[*]}${FW[*]:+ }ab -r -s 120 -k -n $n -c $c http://127.0.0.1:${SCAN_PORT[$t]}/$s.bin" >"$OUT/$raw"
	px0=$(tree_ns "${SCAN_PID[$t]}"); ic0=$(tree_ns "$SCAN_ICAP_PID"); cl0=$(tree_ns "$SCAN_CLAMD_PID")
	sc0=$(scan_count)
	t0=$(date +%s%N)
	timeout -k 5 "$RUN_TIMEOUT" "${FW[@]}" ab -r -s 120 -k -n "$n" -c "$c" \
		"http://127.0.0.1:${SCAN_PORT[$t]}/$s.bin" >>"$OUT/$raw" 2>&1 || rc=$?
	t1=$(date +%s%N)
	px1=$(tree_ns "${SCAN_PID[$t]}"); ic1=$(tree_ns "$SCAN_ICAP_PID"); cl1=$(tree_ns "$SCAN_CLAMD_PID")
	sleep 0.3                # c-icap's last access log lines
	sc1=$(scan_count)
	complete=$(awk '/^Complete requests:/ { print $3 }' "$OUT/$raw"); complete=${complete:-0}
	failed=$(awk '/^Failed requests:/ { print $3 }' "$OUT/$raw"); failed=${failed:-$n}
	non2xx=$(awk '/^Non-2xx responses:/ { print $3 }' "$OUT/$raw"); non2xx=${non2xx:-0}
	bytes=$(awk '/^HTML transferred:/ { print $3 }' "$OUT/$raw"); bytes=${bytes:-0}
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$s" "$t" "$n" "$c" "$rc" \
		"$complete" "$failed" "$non2xx" "$(((t1 - t0) / 1000))" "$bytes" "$((px1 - px0))" "$((ic1 - ic0))" \
		"$((cl1 - cl0))" "$((sc1 - sc0))" "$raw" >>"$SCAN_TSV"
	if [ "$rc" != 0 ] || [ "$complete" != "$n" ] || [ "$failed" != 0 ] || [ "$non2xx" != 0 ] \
		|| [ "$((sc1 - sc0))" -lt "$n" ]; then
		note "BAD scan row: $t $s round $r: ab rc=$rc complete=$complete/$n failed=$failed non-2xx=$non2xx scans=$((sc1 - sc0)) ($OUT/$raw)"
		case "$t" in proxyd-*) BAD_RUNS=$((BAD_RUNS + 1)) ;; *) PEER_BAD_RUNS=$((PEER_BAD_RUNS + 1)) ;; esac
	fi
}

# settled_rss PID: its VmRSS once it has not grown for 1.5 s (bounded: 15 s)
settled_rss() {
	local last=-1 same=0 rss i
	for i in $(seq 1 150); do
		rss=$(rss_kb "$1")
		if [ "$rss" -le "$last" ]; then
			same=$((same + 1))
			[ "$same" -ge 15 ] && break
		else
			same=0; last=$rss
		fi
		sleep 0.1
	done
	echo "$last"
}
# scan_memory TARGET: the proxy's RSS with SCAN_SLOW slow readers of the
# scanned 10 MB body minus its RSS before, a line of scan-mem.tsv
# (proxyd-noscan: a proxyd of its own, not scanning)
scan_memory() {
	local t=$1 pid=${SCAN_PID[$1]} rel="$SCAN_D/slow-release" raw="$OUT/raw/scan-mem-$1.txt" cpid i rss0 rss1 st=0
	rm -f "$rel"
	log "scan rows: $t with $SCAN_SLOW slow readers of 10 MB (memory per scanned session)"
	rss0=$(settled_rss "$pid")
	echo "# ${FW[*]}${FW[*]:+ }python3 bench/slowread.py 127.0.0.1 ${SCAN_PORT[$t]} /10m.bin $SCAN_SLOW RELEASE" >"$raw"
	"${FW[@]}" timeout -k 5 "$RUN_TIMEOUT" python3 "$BENCH_DIR/slowread.py" 127.0.0.1 "${SCAN_PORT[$t]}" \
		/10m.bin "$SCAN_SLOW" "$rel" --hold 90 >"$raw.out" 2>&1 &
	cpid=$!
	for i in $(seq 1 200); do
		grep -qx ready "$raw.out" 2>/dev/null && break
		kill -0 "$cpid" 2>/dev/null || break
		sleep 0.1
	done
	rss1=$(settled_rss "$pid")
	touch "$rel"
	wait "$cpid" || st=$?
	cat "$raw.out" >>"$raw"; rm -f "$raw.out"
	echo "rss_before_kb=$rss0 rss_with_kb=$rss1 sessions=$SCAN_SLOW status=$st" >>"$raw"
	if grep -qx ready "$raw"; then
		printf '%s\t%s\t%s\t%s\n' "$t" "$SCAN_SLOW" "$rss0" "$rss1" >>"$SCAN_MEM_TSV"
	else
		note "scan rows: the slow readers of $t never got ready ($raw)"
	fi
	# the readers' connections (and their scans) end before the next row
	sleep 2
}

rows_scan() {
	local p_px p_adm p_sq p_icap p_plain p_adm2 p_tail p_adm3 r s t k
	SCAN_D=$TMP/scan
	mkdir -p "$SCAN_D"
	read -r p_px p_adm p_sq p_icap p_plain p_adm2 p_tail p_adm3 <<<"$(scan_free_ports 8)"
	SCAN_ICAP_PORT=$p_icap
	head -c 10485760 /dev/urandom >"$TMP/www/10m.bin"
	chmod 644 "$TMP/www/10m.bin"
	scan_start_scanner || return 0
	local want
	for want in "${SCAN_TARGETS_REQ[@]}"; do
		case "$want" in
		proxyd-scan) scan_start_proxyd proxyd-scan "$p_px" "$p_adm" '<scan scanner="av" direction="download" max-size="100m"/>' && { scan_check proxyd-scan || SCAN_LIST=("${SCAN_LIST[@]/proxyd-scan}"); } ;;
		proxyd-scan-tail) scan_start_proxyd proxyd-scan-tail "$p_tail" "$p_adm3" '<scan scanner="av" direction="download" max-size="100m" deliver="tail"/>' && { scan_check proxyd-scan-tail || SCAN_LIST=("${SCAN_LIST[@]/proxyd-scan-tail}"); } ;;
		squid-scan) scan_start_squid "$p_sq" && { scan_check squid-scan || SCAN_LIST=("${SCAN_LIST[@]/squid-scan}"); } ;;
		esac
	done
	read -r -a SCAN_LIST <<<"${SCAN_LIST[*]}"
	[ ${#SCAN_LIST[@]} -gt 0 ] || { note "SKIP scan rows: no scanning path could run"; return 0; }
	SCAN_TSV=$OUT/scan.tsv
	SCAN_MEM_TSV=$OUT/scan-mem.tsv
	printf 'round\tsize\ttarget\tn\tc\trc\tcomplete\tfailed\tnon2xx\twall_us\tbytes\tproxy_ns\ticap_ns\tclamd_ns\tscans\traw\n' >"$SCAN_TSV"
	printf 'target\tsessions\trss_before_kb\trss_with_kb\n' >"$SCAN_MEM_TSV"
	SCAN_SEQ=0
	SCAN_TOTAL=$((ROUNDS * ${#SCAN_SIZE_LIST[@]} * ${#SCAN_LIST[@]}))
	{
		echo "scan_c=$SCAN_C"
		echo "scan_squid_version=$(squid -v | sed -n '1s/.*Version //p')"
		echo "scan_c_icap_version=$(c-icap -VV 2>&1 | head -n 1)"
		echo "scan_clamd_version=$(clamd -V 2>&1 | head -n 1)"
	} >>"$OUT/env.txt"
	# the memory rows first, on fresh processes (Squid keeps its pools
	# after the load rows: its RSS would not move)
	if [ "$SCAN_SLOW" -gt 0 ]; then
		for t in "${SCAN_LIST[@]}"; do scan_memory "$t"; done
		# the same memory row through a proxyd that does not scan
		if [ -n "${SCAN_PID[proxyd-scan]:-}" ] && scan_start_proxyd proxyd-noscan "$p_plain" "$p_adm2" ""; then
			scan_memory proxyd-noscan
		fi
	fi
	# warm-up: connections to c-icap open, Squid's and proxyd's buffers made
	for t in "${SCAN_LIST[@]}"; do
		"${FW[@]}" ab -r -s 60 -k -n 20 -c "$SCAN_C" "http://127.0.0.1:${SCAN_PORT[$t]}/100k.bin" >/dev/null 2>&1 || true
	done
	k=0
	for ((r = 1; r <= ROUNDS; r++)); do
		for s in "${SCAN_SIZE_LIST[@]}"; do
			# the order of the paths alternates from row to row
			if [ $((k % 2)) = 0 ]; then
				for t in "${SCAN_LIST[@]}"; do scan_run "$s" "$t" "$r"; done
			else
				for ((i = ${#SCAN_LIST[@]} - 1; i >= 0; i--)); do scan_run "$s" "${SCAN_LIST[$i]}" "$r"; done
			fi
			k=$((k + 1))
			# proxyd dying ends the bench; Squid dying ends its rows
			for t in "${SCAN_LIST[@]}"; do
				kill -0 "${SCAN_PID[$t]}" 2>/dev/null && continue
				[ "$t" = squid-scan ] || die "$t (pid ${SCAN_PID[$t]}) died during the scan rows; see $OUT/$t.stderr"
				note "BAD squid-scan: Squid (pid ${SCAN_PID[$t]}) died during the scan rows; see $OUT/$t.stderr"
				PEER_BAD_RUNS=$((PEER_BAD_RUNS + 1))
				SCAN_LIST=("${SCAN_LIST[@]/squid-scan}")
				read -r -a SCAN_LIST <<<"${SCAN_LIST[*]}"
			done
		done
	done
	cp -f "$SCAN_D/squid/cache.log" "$OUT/squid-scan-cache.log" 2>/dev/null || true
	tail -n 200 "$SCAN_D/icap/server.log" >"$OUT/scan-c-icap-server.log" 2>/dev/null || true
}
