# shellcheck shell=bash
# Helpers for the network-namespace tests (proxyd inline: transparent and
# redirect modes).  Builds on the loopback tests' helpers (same conventions:
# exit 0 pass, 1 fail, 77 skip; bounded waits; only pids this test started are
# killed) and on topology.sh (client C -- fw F -- server S).
#
#   source "$(dirname "$0")/lib.sh"
#   netns_setup                     # root + netns or skip; temp dir $T; topology up; traps
#   make_file file 1M               # docroot $T/www
#   start_origin [PORT...]          # nginx in S (default 80), access log $ACCESS_LOG
#   deploy tproxy --port 80 --proxy-port 50080    # deploy/inline-tproxy.sh, run in F
#   write_inline_service tp transparent 0.0.0.0 50080 'spoof-source="yes"'
#   start_proxyd_ns                 # proxyd in F, admin on 127.0.0.1:$ADMIN_PORT in F
#
# proxyd runs inside F, so its admin endpoint is only reachable from F:
# metrics_fetch / admin_get run curl there.  Every client command runs in C.

NETNS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
source "$NETNS_DIR/../integration/lib.sh"
# shellcheck source=topology.sh
source "$NETNS_DIR/topology.sh"

DEPLOY=$REPO_DIR/deploy/inline-tproxy.sh
ADMIN_PORT=9180          # inside F: no other test can be there
NS_PORTS=()              # service ports proxyd must listen on (in F)
PYTHON=""                # the python3 interpreter itself (not a wrapper: its pid is the process)
ACCESS_LOG=""            # nginx access log (REMOTE_ADDR REMOTE_PORT SERVER_PORT "REQUEST" STATUS BYTES)

# ---------------------------------------------------------------- setup / cleanup

netns_setup() {
    local rc=0
    [[ $EUID == 0 ]] || skip "needs root (network namespaces, iptables, IP_TRANSPARENT)"
    need_cmds ip iptables ip6tables conntrack ss nginx curl python3 sha256sum
    [[ -x $DEPLOY ]] || fail "deploy script not found or not executable: $DEPLOY"
    PYTHON=$(python3 -c 'import sys; print(sys.executable)')
    setup
    trap _netns_cleanup EXIT
    export TOPO_ID="$$-$RANDOM"
    topo_up || rc=$?
    ((rc != 2)) || skip "cannot create network namespaces (ip netns add failed): not permitted here"
    ((rc == 0)) || fail "could not build the client/fw/server topology"
    info "namespaces: client $C, fw $F, server $S"
}

_netns_diag() {
    echo "---- [$TEST_NAME] fw namespace state" >&2
    {
        echo "# iptables-save -c"; nsF iptables-save -c | grep -v '^#'
        echo "# ip6tables-save -c"; nsF ip6tables-save -c | grep -v '^#'
        echo "# ip rule / ip -6 rule"; nsF ip rule; nsF ip -6 rule
        echo "# ip route show table 100 (v4, v6)"; nsF ip route show table 100; nsF ip -6 route show table 100
        echo "# conntrack -L"; nsF conntrack -L 2>&1 | head -n 20
        echo "# ss -tan (fw)"; nsF ss -tan | head -n 30
        if [[ -n $ACCESS_LOG && -f $ACCESS_LOG ]]; then
            echo "# nginx access log (last 10)"; tail -n 10 "$ACCESS_LOG"
        fi
    } >&2 2>&1
}

_netns_cleanup() {
    local rc=$? i pid
    set +e
    trap - EXIT TERM INT
    if ((rc != 0 && rc != 77)) && ((${#TOPO_CREATED[@]})); then
        _netns_diag
    fi
    # this test's processes first (clients, proxyd), reverse start order, then
    # the topology (nginx, namespaces); lib.sh's cleanup finds them gone and
    # does the rest (diagnostics, temp dir, exit status)
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
    topo_down
    (exit "$rc")
    _cleanup
}

# ---------------------------------------------------------------- origin, deploy

# start_origin [PORT...]: nginx in S serving $T/www (default port 80), v4 and v6
start_origin() {
    topo_start_nginx "$T/www" "$T/nginx" "$@" || fail "nginx did not start in the server namespace"
    ACCESS_LOG=$TOPO_NGINX_ACCESS_LOG
}

# deploy ARGS...: run deploy/inline-tproxy.sh ARGS in F (the documented rules are
# the tested rules); its output goes to the test output and $T/deploy.log
deploy() {
    info "fw: deploy/inline-tproxy.sh $*"
    if ! nsF "$DEPLOY" "$@" >"$T/deploy.out" 2>&1; then
        cat "$T/deploy.out" >&2
        fail "deploy/inline-tproxy.sh $* failed in the fw namespace"
    fi
    sed 's/^/    /' "$T/deploy.out"
    cat "$T/deploy.out" >>"$T/deploy.log"
}

# ---------------------------------------------------------------- proxyd in F

# write_conf_ns: daemon file with admin on 127.0.0.1:$ADMIN_PORT (inside F)
write_conf_ns() {
    write_proxyd_conf 'shutdown-grace="1s" connect-timeout="5s"' "${1:-}"
}

# write_inline_service NAME MODE ADDRESS PORT [UPSTREAM_ATTRS] [EXTRA_XML]
write_inline_service() {
    local name=$1 mode=$2 addr=$3 port=$4 up=${5:-} extra=${6:-} upstream=""
    [[ -n $up ]] && upstream="<upstream $up/>"
    cat >"$T/policy/$name.xml" <<EOF
<service name="$name" analyser="plug">
  <listen address="$addr" port="$port" mode="$mode"/>
  $upstream
  $extra
</service>
EOF
    NS_PORTS+=("$port")
}

reset_services_ns() {
    rm -f "$T"/policy/*.xml
    NS_PORTS=()
}

# start_proxyd_ns: --check, then run proxyd in F (log $PROXYD_LOG); wait until
# every service port and the admin port listen in F
start_proxyd_ns() {
    local p
    if ! "$PROXYD" --check -c "$PROXYD_CONF" >"$T/check.out" 2>&1; then
        cat "$T/check.out" >&2
        for p in "$T"/policy/*.xml; do echo "---- $p" >&2; cat "$p" >&2; done
        fail "proxyd --check rejects the configuration: $(tr '\n' ' ' <"$T/check.out")"
    fi
    # a simple command (not the nsF function) so that $! is proxyd itself:
    # ip netns exec execs it in place
    ip netns exec "$F" "$PROXYD" -c "$PROXYD_CONF" >>"$PROXYD_LOG" 2>&1 &
    PROXYD_PID=$!
    track_pid "$PROXYD_PID"
    for p in "${NS_PORTS[@]}" "$ADMIN_PORT"; do
        if ! topo_wait_listen "$F" "$p" 5 "$PROXYD_PID"; then
            proc_alive "$PROXYD_PID" || {
                wait_exit "$PROXYD_PID" 1 || true
                fail "proxyd exited (status $WAIT_RC) during startup; log: $(tail -n 20 "$PROXYD_LOG")"
            }
            fail "proxyd (pid $PROXYD_PID) is not listening on port $p in the fw namespace after 5 s"
        fi
    done
    info "proxyd pid $PROXYD_PID in $F, services on ports ${NS_PORTS[*]}, admin 127.0.0.1:$ADMIN_PORT"
}

stop_proxyd_ns() {
    [[ -n $PROXYD_PID ]] || return 0
    kill -TERM "$PROXYD_PID" 2>/dev/null || true
    wait_exit "$PROXYD_PID" 10 || fail "proxyd (pid $PROXYD_PID) did not exit within 10 s of SIGTERM"
    [[ $WAIT_RC == 0 ]] || fail "proxyd exited with status $WAIT_RC after SIGTERM (expected 0)"
    PROXYD_PID=""
    for p in "${NS_PORTS[@]}"; do
        topo_listening "$F" "$p" && fail "port $p still listening in F after proxyd exited"
    done
    return 0
}

# the admin endpoint lives in F (overrides lib.sh's loopback version)
metrics_fetch() {
    nsF curl -s --max-time 3 "http://127.0.0.1:$ADMIN_PORT/metrics"
}
admin_get() { # PATH
    nsF curl -sS --max-time 3 "http://127.0.0.1:$ADMIN_PORT$1"
}

# ---------------------------------------------------------------- client side

# client_get URL OUTFILE [curl args...]: curl in C; prints "rc code"
client_get() {
    local url=$1 out=$2 rc=0 code
    shift 2
    code=$(nsC curl -gsS --max-time 30 -o "$out" -w '%{http_code}' "$@" "$url" 2>>"$T/curl.err") || rc=$?
    echo "$rc $code"
}

# fetch_ok URL NAME: the file NAME of the docroot comes back byte for byte
fetch_ok() {
    local url=$1 name=$2 r
    rm -f "$T/out.$name"
    r=$(client_get "$url" "$T/out.$name")
    info "client: curl $url -> rc/code $r"
    [[ $r == "0 200" ]] || { tail -n 3 "$T/curl.err" >&2; fail "curl $url from the client: expected rc 0, HTTP 200; got '$r'"; }
    assert_eq "$(sha256_of "$T/out.$name")" "$(sha256_of "$T/www/$name")" "sha256 of $name fetched from $url"
}

# ---------------------------------------------------------------- nginx / iptables / log

# nginx_count REGEX: access-log lines matching REGEX (waits for nginx to flush a moment)
nginx_count() {
    grep -Ec -- "$1" "$ACCESS_LOG" 2>/dev/null || true
}
# nginx_peer REQUEST_REGEX: the remote addresses nginx logged for matching requests
nginx_peers() {
    grep -E -- "$1" "$ACCESS_LOG" 2>/dev/null | awk '{print $1}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# rule_pkts FAMILY TABLE CHAIN TEXT: packet counter (iptables -L -v -x -n) of the
# first rule of CHAIN in F whose listing contains TEXT (e.g. a comment, "TPROXY");
# NA if there is none
rule_pkts() {
    local tool=iptables
    [[ $1 == 6 ]] && tool=ip6tables
    nsF "$tool" -w -t "$2" -L "$3" -v -x -n | awk -v c="$4" 'NR > 2 && index($0, c) { print $1; f = 1; exit } END { if (!f) print "NA" }'
}

# re_escape STRING: STRING as a literal in an ERE ([ ] . escaped)
re_escape() {
    sed -e 's/[][\.*^$+?(){}|/]/\\&/g' <<<"$1"
}

# log_count REGEX: session-end lines matching REGEX
log_count() {
    grep -Ec -- "$1" "$PROXYD_LOG" 2>/dev/null || true
}

# wait_log_count REGEX N [TIMEOUT_S=ASYNC_WAIT]: wait until at least N lines match
# (log lines come from a thread); returns 1 on timeout
wait_log_count() {
    local re=$1 n=$2 timeout=${3:-${ASYNC_WAIT:-15}} deadline
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until (($(log_count "$re") >= n)); do
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}
