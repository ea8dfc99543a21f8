# shellcheck shell=bash
# bench/h2mem.sh: the HTTP/2 memory rows of bench/run (sourced by it; run
# by rows_tls right after the idle and stall rows, once, on the h2 row's
# paths proxyd-tls-h2 and haproxy-tls-h2). Issue 36: "memory per idle h2
# connection and per open stream reported next to HAProxy's".
#   h2idle    BENCH_TLS_H2_IDLE (500) TLS connections, ALPN h2, each with
#             the client preface and SETTINGS exchanged (both acknowledged)
#             and nothing more (bench/h2mem.py idle); the proxy's memory
#             without and with them, and once closed
#   h2stream  BENCH_TLS_H2_STREAMS (200) GET streams over
#             BENCH_TLS_H2_STREAM_C (10) such connections, each forwarded
#             (over HTTP/1.1, as the h2 row) to nginx, whose /hold/
#             location hands it to bench/h2mem.py origin, which holds the
#             response until told to answer; the proxy's memory with the
#             connections alone and with the streams open, then once all
#             are answered and closed
# Before each row both proxies are restarted (memory a process once used
# stays mapped, malloc's free lists and HAProxy's pools, and would absorb
# the next connections: on a fresh process it shows) and warmed up alike
# (one small streams run: TLS_H2_STREAM_C connections, a stream each,
# answered at once). Memory: /proc/PID/smaps_rollup (Rss, Pss, Anonymous;
# VmRSS where it cannot be read), and the open file descriptors. In netns
# the origin runs in the server namespace on 127.0.0.1, behind nginx; on
# loopback on 127.0.0.1. Both proxies reach the same nginx the same way.

H2MEM_ON=0
H2MEM_DIR=$TMP/h2mem
H2MEM_PORT=""
NGINX_HOLD=""               # nginx's /hold/ location (the origin's main server block)

# h2mem_setup: when an h2 memory row is asked for and an h2 path can run,
# the holding origin is started and nginx's location made
h2mem_setup() {
	local t any=0 pid
	[ "$TLS_OK" = 1 ] || return 0
	case " ${TLS_ROW_LIST[*]} " in *" h2idle "*|*" h2stream "*) ;; *) return 0 ;; esac
	for t in "${TLS_TARGETS[@]}"; do case "$t" in *-tls-h2) any=1 ;; esac; done
	[ "$any" = 1 ] || return 0
	if ! /usr/bin/python3 -c 'import h2.connection' 2>/dev/null; then
		note "SKIP TLS rows h2idle, h2stream: python3-h2 not installed (scripts/deps)"
		return 0
	fi
	mkdir -p "$H2MEM_DIR"
	chmod 777 "$H2MEM_DIR"
	if [ "$NETNS" = 1 ]; then
		H2MEM_PORT=8190
	else
		H2MEM_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	fi
	"${SRV[@]}" /usr/bin/python3 "$BENCH_DIR/h2mem.py" origin 127.0.0.1 "$H2MEM_PORT" "$H2MEM_DIR" \
		>"$OUT/h2mem-origin.stderr" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait_port "$H2MEM_PORT" "$pid" h2mem-origin "${S:-}"
	# one upstream connection per held request (nginx's default: HTTP/1.0,
	# closed after it)
	NGINX_HOLD="location /hold/ { proxy_pass http://127.0.0.1:$H2MEM_PORT; proxy_read_timeout 120s; }"
	H2MEM_ON=1
	log "h2mem origin pid $pid on 127.0.0.1:$H2MEM_PORT${S:+ in $S} (nginx /hold/)"
}

# mem_kb PID: "rss pss anon" in kB (smaps_rollup; VmRSS thrice without it)
mem_kb() {
	local v
	v=$(awk '/^Rss:/ { r = $2 } /^Pss:/ { p = $2 } /^Anonymous:/ { a = $2 }
		END { if (r != "") print r, p, a }' "/proc/$1/smaps_rollup" 2>/dev/null) || v=""
	if [ -z "$v" ]; then v=$(rss_kb "$1"); v="$v $v $v"; fi
	echo "$v"
}

# h2mem_fresh TARGET: the proxy restarted, then warmed up (one small streams
# run, answered at once: its release file exists beforehand)
h2mem_fresh() {
	local t=$1 tok="warm-$SEQ-$1"
	stop_pid "${PID_OF[$t]}"
	case "$t" in
	proxyd-*) start_proxyd "$t" http "$(tls_section "$t")" ;;
	haproxy-*) start_haproxy_tls "$t" ;;
	esac
	# serving: an HTTP/2 request through it (10 tries of 3 s at most)
	local i hv=""
	for ((i = 0; i < 10; i++)); do
		hv=$(tls_curl "$t" --http2 -m 3 -o /dev/null -w '%{http_version}' \
			"https://$(tls_name_of "$t"):${PORT_VIA[$t]}/10k.bin") && [ "$hv" = 2 ] && break
		sleep 0.2
	done
	[ "$hv" = 2 ] || note "h2mem: $t restarted but no HTTP/2 answer through it (curl: '$hv')"
	touch "$H2MEM_DIR/$tok.release" "$H2MEM_DIR/$tok.go"
	"${CLIENT[@]}" timeout -k 5 60 /usr/bin/python3 "$BENCH_DIR/h2mem.py" streams "$SERVER_ADDR" "${PORT_VIA[$t]}" \
		"$TLS_H2_STREAM_C" "$TLS_H2_STREAM_C" "$H2MEM_DIR/$tok.go" "$tok" --servername "$(tls_name_of "$t")" \
		--cafile "$TLS_CA" --hold 30 >"$OUT/h2mem-warmup-$t.txt" 2>&1 \
		|| note "h2mem warm-up of $t failed ($OUT/h2mem-warmup-$t.txt)"
}

# h2mem_wait_fds PID FDS: until PID holds no more descriptors than FDS, or
# their count has not moved for a second (a proxy keeps idle server
# connections in its pool); 20 s at most
h2mem_wait_fds() {
	local i n last=-1 same=0
	for ((i = 0; i < 100; i++)); do
		n=$(fd_count "$1")
		[ "$n" -gt "$2" ] || return 0
		if [ "$n" = "$last" ]; then same=$((same + 1)); else same=0; last=$n; fi
		[ "$same" -lt 5 ] || return 0
		sleep 0.2
	done
}

# h2mem_wait_line FILE PATTERN CPID: until FILE has a line matching PATTERN
# (grep -E, whole line) or CPID is gone; RUN_TIMEOUT at most
h2mem_wait_line() {
	local i
	for ((i = 0; i < RUN_TIMEOUT * 10; i++)); do
		grep -qxE "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || { grep -qxE "$2" "$1" 2>/dev/null; return; }
		sleep 0.1
	done
	return 1
}

# h2mem_run TARGET RAW h2idle|h2stream: one run (run_one's "idle" tool).
# RAW gets the client's output and two lines for report.py (parse idle):
#   rss_before_kb= rss_with_kb= conns= rss_after_kb=   (the per-unit figure:
#     h2idle: before / with the N connections; h2stream: with the
#     connections alone / with the M streams as well; once all closed)
#   h2mem: rssb= pss0= pss1= anon0= anon1= fd0= fd1= h2c=   (the same
#     points in Pss, Anonymous, descriptors; rssb: before the streams
#     row's connections)
h2mem_run() {
	local t=$1 raw=$2 mode=$3 pid=${PID_OF[$1]} cpid st=0 i tok rel go
	local rb pb ab r0 p0 a0 r1 p1 a1 r2 p2 a2 fdb fd0 fd1 n held=0
	read -r rb pb ab <<<"$(mem_kb "$pid")"; fdb=$(fd_count "$pid")
	if [ "$mode" = h2idle ]; then
		n=$TLS_H2_IDLE_N; rel="$H2MEM_DIR/idle-$SEQ.release"
		echo "# ${CLIENT[*]}${CLIENT[*]:+ }python3 bench/h2mem.py idle $SERVER_ADDR ${PORT_VIA[$t]} $n RELEASE --servername $(tls_name_of "$t") --cafile ca.pem --hold 60" >"$raw"
		"${CLIENT[@]}" timeout -k 5 "$RUN_TIMEOUT" /usr/bin/python3 "$BENCH_DIR/h2mem.py" idle "$SERVER_ADDR" "${PORT_VIA[$t]}" \
			"$n" "$rel" --servername "$(tls_name_of "$t")" --cafile "$TLS_CA" --hold 60 >"$raw.out" 2>&1 &
		cpid=$!
		r0=$rb p0=$pb a0=$ab fd0=$fdb
		h2mem_wait_line "$raw.out" ready "$cpid" || st=1
		read -r r1 p1 a1 <<<"$(mem_kb "$pid")"; fd1=$(fd_count "$pid")
		touch "$rel"
	else
		n=$TLS_H2_STREAMS; tok="s$SEQ-$t"; go="$H2MEM_DIR/$tok.go"; rel="$H2MEM_DIR/$tok.release"
		echo "# ${CLIENT[*]}${CLIENT[*]:+ }python3 bench/h2mem.py streams $SERVER_ADDR ${PORT_VIA[$t]} $TLS_H2_STREAM_C $n GO $tok --servername $(tls_name_of "$t") --cafile ca.pem --hold 60" >"$raw"
		"${CLIENT[@]}" timeout -k 5 "$RUN_TIMEOUT" /usr/bin/python3 "$BENCH_DIR/h2mem.py" streams "$SERVER_ADDR" "${PORT_VIA[$t]}" \
			"$TLS_H2_STREAM_C" "$n" "$go" "$tok" --servername "$(tls_name_of "$t")" --cafile "$TLS_CA" --hold 60 >"$raw.out" 2>&1 &
		cpid=$!
		h2mem_wait_line "$raw.out" ready "$cpid" || st=1
		sleep 0.5           # the proxy has read the last SETTINGS acknowledgement
		read -r r0 p0 a0 <<<"$(mem_kb "$pid")"; fd0=$(fd_count "$pid")
		touch "$go"
		# every stream forwarded: the origin holds all n (bounded)
		for ((i = 0; i < RUN_TIMEOUT * 10; i++)); do
			held=$(cat "$H2MEM_DIR/$tok.held" 2>/dev/null || echo 0)
			[ "$held" -lt "$n" ] || break
			kill -0 "$cpid" 2>/dev/null || break
			sleep 0.1
		done
		[ "$held" -ge "$n" ] || { echo "the origin held $held of $n requests" >>"$raw.out"; st=1; }
		sleep 0.5           # the proxy's side of the last ones settled
		read -r r1 p1 a1 <<<"$(mem_kb "$pid")"; fd1=$(fd_count "$pid")
		echo "held=$held" >>"$raw.out"
		touch "$rel"
	fi
	wait "$cpid" || { [ "$st" != 0 ] || st=$?; }
	h2mem_wait_fds "$pid" "$fdb"
	read -r r2 p2 a2 <<<"$(mem_kb "$pid")"
	cat "$raw.out" >>"$raw"
	rm -f "$raw.out"
	echo "rss_before_kb=$r0 rss_with_kb=$r1 conns=$n rss_after_kb=$r2 fds_before=$fdb fds_after=$(fd_count "$pid")" >>"$raw"
	echo "h2mem: rssb=$rb pss0=$p0 pss1=$p1 pss2=$p2 anon0=$a0 anon1=$a1 anon2=$a2 fd0=$fd0 fd1=$fd1 h2c=$( [ "$mode" = h2idle ] && echo 0 || echo "$TLS_H2_STREAM_C")" >>"$raw"
	return "$st"
}
