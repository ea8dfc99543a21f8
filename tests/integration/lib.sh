# shellcheck shell=bash
# Shared helpers for the proxyd integration tests.  Source it from a test script:
#
#   source "$(dirname "$0")/lib.sh"
#   need_cmds nginx curl python3
#   setup                      # temp dir $T, cleanup trap
#
# Conventions: a test exits 0 on success, 1 on failure, 77 to skip.
# Every wait is bounded; every process started here is killed on exit by pid.
# Environment:
#   PROXYD      path of the binary (default: <repo>/build/proxyd)
#   KEEP_TMP=1  keep the temp dir even on success (it is always kept on failure
#               when KEEP_TMP_ON_FAIL=1)

set -euo pipefail

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$LIB_DIR/../.." && pwd)
: "${PROXYD:=$REPO_DIR/build/proxyd}"
TEST_NAME=$(basename "$0" .sh)

T=""                 # per-test temp dir
_PIDS=()             # pids started by this test, killed on exit
_PORT_LOCKS=()       # ports reserved by this test (lock dirs)
_PORT_LOCK_DIR="${TMPDIR:-/tmp}/proxyd-it-ports"
PROXYD_PID=""
PROXYD_LOG=""
PROXYD_CONF=""
PROXYD_PORTS=()      # listen ports of the services written by write_service
ADMIN_PORT=""
NGINX_PORT=""
NGINX_PID=""

# ---------------------------------------------------------------- messages

info() { echo "[$TEST_NAME] $*"; }
fail() {
    echo "FAIL [$TEST_NAME]: $*" >&2
    exit 1
}
skip() {
    echo "SKIP [$TEST_NAME]: $*"
    exit 77
}

need_cmds() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || skip "required command '$c' not found"
    done
}

need_proxyd() {
    [[ -x $PROXYD ]] || fail "proxyd binary not found or not executable: $PROXYD (build it, or set PROXYD=)"
}

# ---------------------------------------------------------------- setup / cleanup

setup() {
    need_proxyd
    T=$(mktemp -d "${TMPDIR:-/tmp}/proxyd-it-$TEST_NAME.XXXXXX")
    chmod 755 "$T"
    mkdir -p "$T/conf" "$T/policy" "$T/www"
    PROXYD_LOG="$T/proxyd.log"
    PROXYD_CONF="$T/conf/proxyd.xml"
    trap _cleanup EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    info "temp dir $T, proxyd $PROXYD"
}

# register a pid to be killed on exit
track_pid() { _PIDS+=("$1"); }

# at_exit CMD: run CMD (eval) on exit, once the processes are gone (to
# undo what a test did outside $T: a system user it added)
_AT_EXIT=()
at_exit() { _AT_EXIT+=("$1"); }

# proc_alive PID: true while the process exists and is not a zombie
proc_alive() {
    local st
    [[ -n ${1:-} && -r /proc/$1/stat ]] || return 1
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# wait_exit PID TIMEOUT_S: wait for a child of this shell to exit; sets WAIT_RC.
# Returns 1 if it is still running after TIMEOUT_S.
WAIT_RC=""
wait_exit() {
    local pid=$1 timeout=$2 deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    while proc_alive "$pid"; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
    WAIT_RC=0
    wait "$pid" 2>/dev/null || WAIT_RC=$?
    return 0
}

# wait_file FILE TIMEOUT_S: until FILE exists; 1 if it does not within
# TIMEOUT_S.
wait_file() {
    local deadline=$(($(date +%s%N) + $2 * 1000000000))
    until [[ -e $1 ]]; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

# strace_start PID OUT [STRACE_OPTIONS...]: strace -o OUT attached to PID
# (a process with -f, or one thread), in the background as $STRACE_PID;
# returns once this strace is the tracer of PID and, with -f, of every
# thread of it (strace attaches them one by one after the first), fails
# the test if that does not happen within 10 s (skips it if strace cannot
# attach at all: ptrace not permitted). strace_stop ends it, writing OUT.
STRACE_PID=""
strace_start() {
    local pid=$1 out=$2 i opt tasks=("/proc/$1/status") st ok
    shift 2
    for opt in "$@"; do
        [[ $opt == -f ]] && tasks=("/proc/$pid"/task/*/status)
    done
    strace -qq "$@" -o "$out" -p "$pid" 2>"$out.err" &
    STRACE_PID=$!
    track_pid "$STRACE_PID"
    for ((i = 0; i < 200; i++)); do
        ok=1
        for st in "${tasks[@]}"; do
            [[ -e $st ]] || continue    # a thread that ended meanwhile
            [[ $(awk '/^TracerPid:/ { print $2 }' "$st" 2>/dev/null) == "$STRACE_PID" ]] || { ok=0; break; }
        done
        ((ok)) && return 0
        proc_alive "$STRACE_PID" || skip "strace cannot attach to pid $pid (ptrace not permitted?): $(cat "$out.err")"
        sleep 0.05
    done
    fail "strace did not attach to all of ${tasks[*]} within 10 s: $(cat "$out.err")"
}
strace_stop() {
    kill -INT "$STRACE_PID"
    wait_exit "$STRACE_PID" 10 || fail "strace did not stop"
}

_cleanup() {
    local rc=$? pid i f
    set +e
    trap - EXIT TERM INT
    if ((rc != 0 && rc != 77)) && [[ -n $T ]]; then
        echo "---- [$TEST_NAME] diagnostics (rc=$rc), temp dir $T" >&2
        for f in "$T"/proxyd*.log; do
            [[ -f $f ]] || continue
            echo "---- last 40 lines of $f" >&2
            tail -n 40 "$f" >&2
        done
        if [[ -f $T/nginx/logs/error.log ]]; then
            echo "---- last 10 lines of nginx error.log" >&2
            tail -n 10 "$T/nginx/logs/error.log" >&2
        fi
        echo "----" >&2
    fi
    # kill in reverse start order: clients first, then proxyd, then origins
    for ((i = ${#_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${_PIDS[i]}
        proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null
    done
    for ((i = ${#_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${_PIDS[i]}
        if ! wait_exit "$pid" 5; then
            kill -KILL "$pid" 2>/dev/null
            wait_exit "$pid" 2
        fi
    done
    for f in "${_AT_EXIT[@]}"; do
        eval "$f"
    done
    # A sanitizer build reports leaks and errors when proxyd exits: a test
    # that passed fails on them (the report is printed).
    if ((rc == 0)) && [[ -n $T ]]; then
        for f in "$T"/proxyd*.log; do
            [[ -f $f ]] || continue
            if grep -Eq "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:" "$f"; then
                echo "FAIL [$TEST_NAME]: sanitizer report in $f:" >&2
                grep -E -A30 "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:" "$f" | head -n 60 >&2
                rc=1
            fi
        done
    fi
    for i in "${_PORT_LOCKS[@]}"; do
        rmdir "$_PORT_LOCK_DIR/$i" 2>/dev/null
    done
    if [[ -n $T && -d $T ]]; then
        if [[ ${KEEP_TMP:-0} == 1 ]] || { ((rc != 0 && rc != 77)) && [[ ${KEEP_TMP_ON_FAIL:-0} == 1 ]]; }; then
            echo "[$TEST_NAME] keeping $T" >&2
        else
            rm -rf "$T"
        fi
    fi
    # anything other than pass/skip is a failure
    if ((rc != 0 && rc != 77)); then rc=1; fi
    exit "$rc"
}

# ---------------------------------------------------------------- ports

# free_port VAR: reserve a free TCP port on 127.0.0.1 (outside the ephemeral range,
# locked against other tests running in parallel) and store it in VAR.
free_port() {
    local __var=$1 i port
    mkdir -p "$_PORT_LOCK_DIR"
    for ((i = 0; i < 500; i++)); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
        mkdir "$_PORT_LOCK_DIR/$port" 2>/dev/null || continue
        if python3 - "$port" <<'EOF'; then
import socket, sys
port = int(sys.argv[1])
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.bind((addr, port))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
EOF
            _PORT_LOCKS+=("$port")
            printf -v "$__var" '%s' "$port"
            return 0
        fi
        rmdir "$_PORT_LOCK_DIR/$port" 2>/dev/null || true
    done
    fail "could not find a free TCP port"
}

# is_listening PORT: some socket is in LISTEN state on PORT (any address)
is_listening() {
    local hex
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A start waits at least START_WAIT_MIN s (default 20): a process that only
# starts has nothing to prove by speed, and here a cold start once stood 5 s
# behind a stalled disk. A dead PID still ends the wait at once.
: "${START_WAIT_MIN:=20}"

# wait_listen PORT TIMEOUT_S [PID]: wait until PORT listens; returns 1 on timeout
# (TIMEOUT_S, at least START_WAIT_MIN) or when PID (if given) died meanwhile.
wait_listen() {
    local port=$1 timeout=$2 pid=${3:-} deadline
    ((timeout >= START_WAIT_MIN)) || timeout=$START_WAIT_MIN
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until is_listening "$port"; do
        if [[ -n $pid ]] && ! proc_alive "$pid"; then return 1; fi
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

# wait_not_listening PORT TIMEOUT_S
wait_not_listening() {
    local port=$1 timeout=$2 deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    while is_listening "$port"; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

# ---------------------------------------------------------------- nginx origin

# shellcheck source=nginx_conf.sh
source "$LIB_DIR/nginx_conf.sh"

# start_nginx: serve $T/www on 127.0.0.1:$NGINX_PORT
# NGINX_EXTRA: more directives for its server block (e.g. locations)
# NGINX_SERVERS: more server blocks (e.g. TLS origins)
start_nginx() {
    local d=$T/nginx code i
    free_port NGINX_PORT
    mkdir -p "$d/logs" "$d/tmp"
    nginx_conf "$d" '$remote_addr:$remote_port "$request" $status $body_bytes_sent' \
        "        listen 127.0.0.1:$NGINX_PORT;
        root $T/www;
        location / { }
        ${NGINX_EXTRA:-}" "${NGINX_SERVERS:-}" >"$d/nginx.conf"
    nginx -e "$d/logs/error.log" -p "$d" -c "$d/nginx.conf" >"$d/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    track_pid "$NGINX_PID"
    wait_listen "$NGINX_PORT" 5 "$NGINX_PID" || {
        cat "$d/logs/stdout.log" "$d/logs/error.log" >&2 2>/dev/null || true
        fail "nginx did not start listening on 127.0.0.1:$NGINX_PORT"
    }
    for ((i = 0; i < 50; i++)); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$NGINX_PORT/" || true)
        [[ $code =~ ^[1-5][0-9][0-9]$ ]] && break
        sleep 0.1
    done
    [[ $code =~ ^[1-5][0-9][0-9]$ ]] || fail "nginx on port $NGINX_PORT does not answer HTTP"
    info "nginx origin on 127.0.0.1:$NGINX_PORT (pid $NGINX_PID)"
}

# proxyd_cpu_ns: proxyd's threads' time on CPU so far, ns (schedstat)
proxyd_cpu_ns() {
    local f t=0 a
    for f in /proc/"$PROXYD_PID"/task/*/schedstat; do
        read -r a _ <"$f" || continue
        t=$((t + a))
    done
    echo "$t"
}

# make_file NAME SIZE: random file in the docroot (SIZE in head -c syntax: 1M, 10K, 1G)
make_file() {
    head -c "$2" /dev/urandom >"$T/www/$1"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------- proxyd config

# write_proxyd_conf [LIMITS_ATTRS] [EXTRA_XML]
# writes $PROXYD_CONF with the admin endpoint on a fresh $ADMIN_PORT,
# log on stderr at level info, policies in ../policy
write_proxyd_conf() {
    local limits=${1:-} extra=${2:-}
    [[ -n $ADMIN_PORT ]] || free_port ADMIN_PORT
    mkdir -p "$(dirname "$PROXYD_CONF")"
    cat >"$PROXYD_CONF" <<EOF
<proxyd>
  <workers>auto</workers>
  <limits $limits/>
  <log target="stderr" level="info"/>
  <admin listen="127.0.0.1:$ADMIN_PORT"/>
  <policies dir="../policy"/>
  $extra
</proxyd>
EOF
}

# write_service NAME LISTEN_PORT TARGET_PORT [EXTRA_XML] [CLIENTS_ALLOW] [LISTEN_ADDR]
# one plug service in fixed mode, listening on LISTEN_ADDR (default 127.0.0.1)
write_service() {
    local name=$1 lport=$2 tport=$3 extra=${4:-} allow=${5:-} laddr=${6:-127.0.0.1}
    local clients=""
    [[ -n $allow ]] && clients="<clients allow=\"$allow\"/>"
    cat >"$T/policy/$name.xml" <<EOF
<service name="$name" analyser="plug">
  <listen address="$laddr" port="$lport" mode="fixed"/>
  <target address="127.0.0.1" port="$tport"/>
  $clients
  $extra
</service>
EOF
    PROXYD_PORTS+=("$lport")
}

# reset_services: remove all service files (to write a fresh configuration)
reset_services() {
    rm -f "$T"/policy/*.xml
    PROXYD_PORTS=()
}

# start_proxyd: run $PROXYD -c $PROXYD_CONF in the background, stderr+stdout to
# $PROXYD_LOG, wait (5 s) until all service ports listen; the admin port is
# waited for too but only warned about (metric assertions fail later).
# START_TIMEOUT (s, default 5): how long startup may take (a big policy
# under a sanitizer takes longer)
start_proxyd() {
    local p to=${START_TIMEOUT:-5}
    "$PROXYD" -c "$PROXYD_CONF" >>"$PROXYD_LOG" 2>&1 &
    PROXYD_PID=$!
    track_pid "$PROXYD_PID"
    for p in "${PROXYD_PORTS[@]}"; do
        if ! wait_listen "$p" "$to" "$PROXYD_PID"; then
            if proc_alive "$PROXYD_PID"; then
                fail "proxyd (pid $PROXYD_PID) is not listening on port $p after $to s"
            fi
            wait_exit "$PROXYD_PID" 1 || true
            fail "proxyd exited (status $WAIT_RC) during startup; log: $(tail -n 20 "$PROXYD_LOG")"
        fi
    done
    if [[ -n $ADMIN_PORT ]] && ! wait_listen "$ADMIN_PORT" 5 "$PROXYD_PID"; then
        info "WARNING: admin endpoint 127.0.0.1:$ADMIN_PORT is not listening"
    fi
    proc_alive "$PROXYD_PID" || fail "proxyd died during startup; log: $(tail -n 20 "$PROXYD_LOG")"
    info "proxyd pid $PROXYD_PID, services on ports ${PROXYD_PORTS[*]}, admin $ADMIN_PORT"
}

# start_py_server VAR < HANDLER: a python3 TCP server on a free 127.0.0.1
# port (stored in VAR) that calls handle(conn) for each connection, one at a
# time, up to 64 of them, for as long as the test runs (it is killed at the
# end; left over, it stops within 1 s of its test). HANDLER (stdin) defines
# handle(c); socket, struct, sys and time are imported. Returns once the
# port listens.
start_py_server() {
    local var=$1 port pid file
    free_port "$var"
    port=${!var}
    file="$T/pyserver-$port.py"
    {
        echo 'import socket, struct, sys, time'
        cat
        cat <<'PY'
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(16)
# No idle bound: a test under load may first use it minutes after the
# start (a 60 s one made http_scan's fake scanners gone by then).
import os
parent = os.getppid()
srv.settimeout(1)
served = 0
while served < 64 and os.getppid() == parent:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    served += 1
    try:
        handle(c)
    except OSError as e:
        sys.stderr.write("handler: %r\n" % (e,))
    finally:
        c.close()
PY
    } >"$file"
    python3 "$file" "$port" 2>>"$T/pyserver.log" &
    pid=$!
    track_pid "$pid"
    wait_listen "$port" 5 "$pid" || fail "python server $file did not start"
}

# ---------------------------------------------------------------- assertions

assert_eq() { # ACTUAL EXPECTED MESSAGE
    [[ $1 == "$2" ]] || fail "${3:-values differ}: expected '$2', got '$1'"
}
assert_ne() {
    [[ $1 != "$2" ]] || fail "${3:-values equal}: got '$1', expected anything else"
}
assert_ge() { # ACTUAL MIN MESSAGE (integers)
    [[ $1 =~ ^[0-9]+$ ]] || fail "${3:-not a number}: got '$1', expected >= $2"
    (($1 >= $2)) || fail "${3:-too small}: got $1, expected >= $2"
}
assert_lt() {
    [[ $1 =~ ^[0-9]+$ ]] || fail "${3:-not a number}: got '$1', expected < $2"
    (($1 < $2)) || fail "${3:-too large}: got $1, expected < $2"
}
assert_grep() { # FILE REGEX [MESSAGE]
    grep -Eq -- "$2" "$1" 2>/dev/null || {
        echo "---- $1 (last 20 lines):" >&2
        tail -n 20 "$1" >&2 2>/dev/null || true
        fail "${3:-expected /$2/ in $1}"
    }
}
assert_no_grep() { # FILE REGEX [MESSAGE]
    if grep -Eq -- "$2" "$1" 2>/dev/null; then
        grep -E -- "$2" "$1" | head -n 5 >&2
        fail "${3:-unexpected /$2/ in $1}"
    fi
}

# The default bound of a wait for something asynchronous (a log line, a
# counter): long, because a wait returns once the thing is there, and here
# the log thread, the disk or the whole VM can stall for seconds. A test
# that means to assert speed passes its own bound.
: "${ASYNC_WAIT:=15}"

# wait_grep FILE REGEX [TIMEOUT_S=ASYNC_WAIT]: poll a file for a line (log
# lines come from a thread)
wait_grep() {
    local file=$1 re=$2 timeout=${3:-$ASYNC_WAIT} deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until grep -Eq -- "$re" "$file" 2>/dev/null; do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

# wait_records FILE N: FILE (an audit file) has N lines, no more, within
# 5 s (the log thread writes them within its 50 ms flush)
wait_records() {
    local i n=0
    for ((i = 0; i < 100; i++)); do
        n=$(wc -l <"$1" 2>/dev/null || echo 0)
        ((n >= $2)) && break
        sleep 0.05
    done
    ((n == $2)) || fail "$1 has $n records, expected $2: $(cat "$1" 2>/dev/null)"
}

# assert_log REGEX [TIMEOUT_S=ASYNC_WAIT]: wait for a line in $PROXYD_LOG
assert_log() {
    local re=$1 timeout=${2:-$ASYNC_WAIT}
    wait_grep "$PROXYD_LOG" "$re" "$timeout" || {
        echo "---- $PROXYD_LOG (last 20 lines):" >&2
        tail -n 20 "$PROXYD_LOG" >&2 || true
        fail "no log line matching /$re/ in $PROXYD_LOG within ${timeout}s"
    }
}

# session_end_lines SERVICE: all session-end lines of a service
session_end_lines() {
    grep -E -- "session-end service=$1 " "$PROXYD_LOG" || true
}

# kv LINE KEY: value of key=value in a log line (end= is the rest of the line)
kv() {
    if [[ $2 == end ]]; then
        sed -nE 's/.* end=(.*)$/\1/p' <<<"$1"
    else
        sed -nE "s/.* $2=([^ ]*).*/\\1/p" <<<"$1"
    fi
}

# ---------------------------------------------------------------- metrics

metrics_fetch() {
    curl -s --max-time 3 "http://127.0.0.1:$ADMIN_PORT/metrics"
}

# metric_value NAME [LABEL_SUBSTRING]: sum of samples of NAME whose label set
# contains LABEL_SUBSTRING (e.g. 'reason="acl"'); samples labelled worker= are
# left out unless LABEL_SUBSTRING names a worker (they repeat the totals);
# prints NA if none
metric_value() {
    local name=$1 labels=${2:-}
    { metrics_fetch || true; } | awk -v n="$name" -v l="$labels" '
        /^[ \t]*#/ || NF == 0 { next }
        {
            line = $0; base = ""; lab = ""; rest = ""
            b = index(line, "{")
            s = index(line, " ")
            if (b > 0 && (s == 0 || b < s)) {
                e = index(line, "}")
                base = substr(line, 1, b - 1); lab = substr(line, b, e - b + 1); rest = substr(line, e + 1)
            } else {
                base = substr(line, 1, s - 1); rest = substr(line, s)
            }
            if (base != n) next
            if (l != "" && index(lab, l) == 0) next
            # per-worker samples repeat the total: skip them unless asked for
            if (index(l, "worker=") == 0 && index(lab, "worker=") > 0) next
            split(rest, f, " ")
            sum += f[1]; found = 1
        }
        END { if (found) printf "%.0f\n", sum; else print "NA" }'
}

# assert_metric OP NAME LABELS VALUE [TIMEOUT_S=ASYNC_WAIT]   OP: ge | eq
assert_metric() {
    local op=$1 name=$2 labels=$3 want=$4 timeout=${5:-$ASYNC_WAIT} v deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    while :; do
        v=$(metric_value "$name" "$labels")
        if [[ $v != NA ]]; then
            case $op in
                ge) ((v >= want)) && break ;;
                eq) ((v == want)) && break ;;
            esac
        fi
        if (($(date +%s%N) >= deadline)); then
            echo "---- metrics matching $name:" >&2
            { metrics_fetch || echo "(could not fetch http://127.0.0.1:$ADMIN_PORT/metrics)"; } | grep -E "^$name|^\(could" >&2 || true
            fail "metric $name{$labels} = $v, expected $op $want (after ${timeout}s)"
        fi
        sleep 0.1
    done
    info "metric $name{$labels} = $v ($op $want) ok"
}

# ---------------------------------------------------------------- misc

# http_get URL OUTFILE [curl args...]: prints "rc code"
http_get() {
    local url=$1 out=$2 rc=0 code
    shift 2
    code=$(curl -sS --max-time 30 -o "$out" -w '%{http_code}' "$@" "$url" 2>>"$T/curl.err") || rc=$?
    echo "$rc $code"
}

# vm_kb PID FIELD: VmRSS / VmHWM in kB
vm_kb() {
    awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status" 2>/dev/null || true
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# unit_setpriv UNITFILE: the setpriv(1) options that give a command the
# capability bounding set and no_new_privs of a systemd unit (its
# CapabilityBoundingSet= and NoNewPrivileges=yes), as systemd starts it;
# fails the test when the unit has neither
unit_setpriv() {
    local caps c bset=-all
    caps=$(sed -nE 's/^CapabilityBoundingSet=//p' "$1")
    [[ -n $caps ]] || fail "no CapabilityBoundingSet= in $1"
    grep -q '^NoNewPrivileges=yes$' "$1" || fail "$1: NoNewPrivileges=yes expected"
    for c in $caps; do
        [[ $c =~ ^CAP_[A-Z_]+$ ]] || fail "$1: capability '$c'"
        c=${c#CAP_}
        bset+=,+${c,,}
    done
    echo "--bounding-set=$bset --no-new-privs"
}
