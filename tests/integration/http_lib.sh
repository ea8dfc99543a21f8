# shellcheck shell=bash
# Helpers for the http analyser tests, on top of lib.sh (source lib.sh first).

HTTP_RAW="$LIB_DIR/http_raw.py"

# ASan/UBSan builds are several times slower: big transfers shrink there.
# tests/integration/CMakeLists.txt sets PROXYD_SANITIZED=1 for such builds;
# a binary linked against libasan is detected too.
http_sanitized() {
    [[ ${PROXYD_SANITIZED:-0} == 1 ]] && return 0
    ldd "$PROXYD" 2>/dev/null | grep libasan >/dev/null
}

# write_http_service NAME LISTEN_PORT TARGET_PORT HTTP_XML [MODE=fixed]
# an http service; in forward mode TARGET_PORT is ignored (no <target>).
write_http_service() {
    local name=$1 lport=$2 tport=$3 xml=${4:-} mode=${5:-fixed} target=""
    [[ $mode == forward ]] || target="<target address=\"127.0.0.1\" port=\"$tport\"/>"
    cat >"$T/policy/$name.xml" <<EOF
<service name="$name" analyser="http">
  <listen address="127.0.0.1" port="$lport" mode="$mode"/>
  $target
  $xml
</service>
EOF
    PROXYD_PORTS+=("$lport")
}

# plug_and_http_origin [HTTP_XML]: nginx serving index.html (5000 bytes)
# behind two services, web (plug) on $P1 and www (http, HTTP_XML inside)
# on $P2: one session of each analyser for the tests of what every line
# or record carries.
plug_and_http_origin() {
    make_file index.html 5000
    start_nginx
    free_port P1
    free_port P2
    write_service web "$P1" "$NGINX_PORT"
    write_http_service www "$P2" "$NGINX_PORT" "${1:-}"
}

# start_origin PORTVAR LOGFILE [MODE=empty] [RAWFILE] [HOLD_S]: http_raw.py
# origin (HOLD_S: raw mode keeps the connection open that long)
start_origin() {
    local var=$1 log=$2 mode=${3:-empty} raw=${4:-} hold=${5:-} pid port
    free_port "$var"
    port=${!var}
    : >"$log"
    python3 "$HTTP_RAW" origin --port "$port" --log "$log" --mode "$mode" \
        ${raw:+--raw "$raw"} ${hold:+--hold "$hold"} 2>>"$T/origin-$port.err" &
    pid=$!
    track_pid "$pid"
    wait_listen "$port" 5 "$pid" || fail "python origin on port $port did not start"
}

# start_scan_origin [--log-cut]: scan_origin.py serving $T/www on port
# $ORIGIN, logging uploads to $ORIGIN_LOG ($T/origin.log, emptied);
# --log-cut: cut uploads too (see scan_origin.py)
start_scan_origin() {
    local pid
    ORIGIN_LOG=$T/origin.log
    : >"$ORIGIN_LOG"
    free_port ORIGIN
    python3 "$LIB_DIR/scan_origin.py" "$ORIGIN" "$T/www" "$ORIGIN_LOG" "$@" \
        2>>"$T/origin.err" &
    pid=$!
    track_pid "$pid"
    wait_listen "$ORIGIN" 5 "$pid" || fail "scan_origin.py did not start: $(cat "$T/origin.err")"
}

# raw_send PORT DATA [more http_raw.py send args]: prints the result line
raw_send() {
    local port=$1 data=$2
    shift 2
    python3 "$HTTP_RAW" send --port "$port" --data "$data" "$@"
}

# start_h2_origin PORTVAR LOG [DROP]: h2_origin_server.py (prior-knowledge
# h2c; Debian's python3 with python3-h2) on a free port, its log LOG (its
# stderr LOG.err); DROP: its first DROP connections closed at once
start_h2_origin() {
    local var=$1 log=$2 port
    /usr/bin/python3 -c 'import h2' 2>/dev/null ||
        fail "Debian's python3-h2 is missing (scripts/deps)"
    free_port "$var"
    port=${!var}
    : >"$log"
    /usr/bin/python3 "$LIB_DIR/h2_origin_server.py" "$port" "$log" ${3:-} \
        2>"$log.err" &
    track_pid $!
    wait_listen "$port" 5 || fail "h2 origin did not start: $(cat "$log.err")"
}

# log_count REGEX: lines of $PROXYD_LOG matching
log_count() {
    grep -Ec -- "$1" "$PROXYD_LOG" 2>/dev/null || true
}

# wait_log_count REGEX N [TIMEOUT_S=ASYNC_WAIT]: until at least N lines match
wait_log_count() {
    local re=$1 n=$2 timeout=${3:-$ASYNC_WAIT} deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until (($(log_count "$re") >= n)); do
        if (($(date +%s%N) >= deadline)); then
            echo "---- $PROXYD_LOG (last 20 lines):" >&2
            tail -n 20 "$PROXYD_LOG" >&2 || true
            fail "expected $n log lines matching /$re/, got $(log_count "$re")"
        fi
        sleep 0.05
    done
}

# http_counter EVENT: proxyd_analyser_events_total{analyser="http",event=EVENT}
http_counter() {
    local v
    v=$(metric_value proxyd_analyser_events_total "event=\"$1\"")
    [[ $v == NA ]] && v=0
    echo "$v"
}

# check CONDITION_CMD... -- MESSAGE: a failed check is reported and the
# test goes on (so one analyser bug does not hide the others); http_done
# fails the test at the end if any check failed.
HTTP_FAILED=()
check() {
    local msg=${*: -1} n=$(($# - 1))
    if ! "${@:1:n}"; then
        echo "CHECK FAILED [$TEST_NAME]: $msg" >&2
        HTTP_FAILED+=("$msg")
    fi
}
http_done() {
    proc_alive "$PROXYD_PID" || fail "proxyd died"
    ((${#HTTP_FAILED[@]} == 0)) || fail "${#HTTP_FAILED[@]} checks failed: $(printf '%s; ' "${HTTP_FAILED[@]}")"
    info "PASS"
}

# rss_per_slow_reader PORT N PATH: starts N clients on PORT that each GET
# PATH and then read 1 byte/s with a 4 KB receive buffer (a slow reader
# of a fast origin), waits for proxyd's RSS to settle with them, stops
# them, and prints proxyd's RSS growth per client in KB.
rss_per_slow_reader() {
    local port=$1 n=$2 path=$3 base after pid stop=$T/slow-$1.stop out=$T/slow-$1.out
    rm -f "$stop" "$out"
    cat >"$T/slow_readers.py" <<'PY'
import socket, sys, time, os
port, n, path, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
socks = []
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    s.setblocking(False)
    socks.append(s)
print("connected", flush=True)
deadline = time.time() + 90
while not os.path.exists(stop) and time.time() < deadline:
    for s in socks:
        try:
            s.recv(1)
        except BlockingIOError:
            pass
    time.sleep(1)
PY
    base=$(settle_rss)
    python3 "$T/slow_readers.py" "$port" "$n" "$path" "$stop" >"$out" 2>&1 &
    pid=$!
    track_pid "$pid"
    wait_grep "$out" connected 20 || fail "slow readers did not connect: $(cat "$out")"
    after=$(settle_rss)
    touch "$stop"
    wait_exit "$pid" 5 || true
    echo $(((after - base) / n))
}

# settle_rss: waits until proxyd's RSS has not grown for 1.5 s (bounded
# to 15 s), prints it in KB
settle_rss() {
    local last=-1 same=0 rss i
    for ((i = 0; i < 150; i++)); do
        rss=$(vm_kb "$PROXYD_PID" VmRSS)
        if ((rss <= last)); then
            same=$((same + 1))
            ((same >= 15)) && break
        else
            same=0
            last=$rss
        fi
        sleep 0.1
    done
    echo "$last"
}

# reload_worker_held OUT FLAG: a reload that finds requests unread in the
# socket, the deterministic way to that race: with one worker, each time
# its epoll_wait returns it waits 500 ms first (strace; strace_stop ends
# it), so the reload's wake is taken and what the client (printing "sent"
# to OUT once FLAG exists) writes meanwhile is in the socket, unread, when
# the worker acts on the reload.
reload_worker_held() {
    local worker
    worker=$(grep -l '^px-worker-' /proc/"$PROXYD_PID"/task/*/comm | head -1)
    worker=$(basename "$(dirname "$worker")")
    strace_start "$worker" "$T/strace.out" -e trace=epoll_wait,epoll_pwait \
        -e inject=epoll_wait,epoll_pwait:delay_exit=500000
    kill -HUP "$PROXYD_PID"
    assert_log 'reload done'
    touch "$2"
    wait_grep "$1" '^sent' 20 || fail "client did not send: $(cat "$1")"
}
