# shellcheck shell=bash
# Three network namespaces in a row, for inline (transparent / redirect) tests
# and benchmarks:
#
#     client (C)                 fw (F)                        server (S)
#     c0 198.18.1.2/24  ---  f0 198.18.1.1/24
#        2001:db8:1::2/64        2001:db8:1::1/64
#                                f1 198.19.2.1/24  ---  s0 198.19.2.2/24
#                                   2001:db8:2::1/64       2001:db8:2::2/64
#
# C and S route everything via F; F forwards (IPv4 and IPv6).  Only the
# benchmarking ranges 198.18.0.0/15 and the documentation range 2001:db8::/32
# are used, inside namespaces created here: nothing touches the host's network.
#
# Usage (bash; needs root, iproute2):
#
#   source tests/netns/topology.sh
#   topo_up || exit             # returns 2 if namespaces cannot be created at all
#   nsC curl http://198.19.2.2/ # run a command in the client namespace
#   topo_start_nginx DOCROOT WORKDIR [PORT...]   # nginx in S (default port 80)
#   topo_down                   # idempotent: kills what topo_* started, deletes the namespaces
#
# The caller installs its own EXIT trap calling topo_down (this file sets no
# traps and no shell options).  Namespace names are unique per run:
# $C, $F, $S (also $TOPO_C, $TOPO_F, $TOPO_S), derived from TOPO_ID (default
# <pid>-<random>).  Interface names (c0, f0, f1, s0) live inside the
# namespaces, so parallel runs do not collide.

# ---------------------------------------------------------------- addresses

TOPO_C4=198.18.1.2      # client
TOPO_FC4=198.18.1.1     # fw, client side (f0)
TOPO_FS4=198.19.2.1     # fw, server side (f1)
TOPO_S4=198.19.2.2      # server
TOPO_C6=2001:db8:1::2
TOPO_FC6=2001:db8:1::1
TOPO_FS6=2001:db8:2::1
TOPO_S6=2001:db8:2::2

TOPO_C="" TOPO_F="" TOPO_S=""
C="" F="" S=""
TOPO_CREATED=()          # namespaces this run created (topo_down deletes only these)
TOPO_PIDS=()             # processes topo_* started (nginx), killed by topo_down
TOPO_NGINX_PID=""
TOPO_NGINX_DIR=""
TOPO_NGINX_ACCESS_LOG=""
TOPO_NGINX_ERROR_LOG=""

_topo_msg() { echo "[topology] $*" >&2; }

# ---------------------------------------------------------------- wrappers

nsC() { ip netns exec "$TOPO_C" "$@"; }
nsF() { ip netns exec "$TOPO_F" "$@"; }
nsS() { ip netns exec "$TOPO_S" "$@"; }

# ---------------------------------------------------------------- up / down

# topo_up: create the namespaces and links.  Returns 0 on success, 2 when
# `ip netns add` itself fails (no root, no netns support: callers skip),
# 1 on any later failure (after undoing what was done).
topo_up() {
    local id n i
    if ((${#TOPO_CREATED[@]})); then
        return 0 # already up
    fi
    topo_reap_stale
    id=${TOPO_ID:-$$-$RANDOM}
    TOPO_C=pxd-c-$id TOPO_F=pxd-f-$id TOPO_S=pxd-s-$id
    C=$TOPO_C F=$TOPO_F S=$TOPO_S

    for n in "$TOPO_C" "$TOPO_F" "$TOPO_S"; do
        if ! ip netns add "$n" 2>/dev/null; then
            if ((${#TOPO_CREATED[@]} == 0)); then
                _topo_msg "cannot create network namespace '$n' (ip netns add failed)"
                return 2
            fi
            _topo_msg "ip netns add $n failed"
            topo_down
            return 1
        fi
        TOPO_CREATED+=("$n")
        ip -n "$n" link set lo up || { topo_down; return 1; }
        # no duplicate address detection on the links created below: `nodad`
        # covers our addresses but not the fe80:: ones, which would stay
        # tentative for a second
        ip netns exec "$n" sysctl -qw net.ipv6.conf.default.accept_dad=0 2>/dev/null || true
    done
    # the fw forwards (set before its links exist: they start as router interfaces)
    if ! ip netns exec "$TOPO_F" sysctl -qw net.ipv4.ip_forward=1 ||
        ! ip netns exec "$TOPO_F" sysctl -qw net.ipv6.conf.all.forwarding=1; then
        _topo_msg "cannot enable forwarding in $TOPO_F"
        topo_down
        return 1
    fi

    if ! {
        # veth pairs created straight into their namespaces
        ip link add c0 netns "$TOPO_C" type veth peer name f0 netns "$TOPO_F" &&
        ip link add s0 netns "$TOPO_S" type veth peer name f1 netns "$TOPO_F" &&

        # client
        ip -n "$TOPO_C" addr add "$TOPO_C4/24" dev c0 &&
        ip -n "$TOPO_C" addr add "$TOPO_C6/64" dev c0 nodad &&
        ip -n "$TOPO_C" link set c0 up &&
        ip -n "$TOPO_C" route add default via "$TOPO_FC4" &&
        ip -n "$TOPO_C" -6 route add default via "$TOPO_FC6" &&

        # fw
        ip -n "$TOPO_F" addr add "$TOPO_FC4/24" dev f0 &&
        ip -n "$TOPO_F" addr add "$TOPO_FC6/64" dev f0 nodad &&
        ip -n "$TOPO_F" link set f0 up &&
        ip -n "$TOPO_F" addr add "$TOPO_FS4/24" dev f1 &&
        ip -n "$TOPO_F" addr add "$TOPO_FS6/64" dev f1 nodad &&
        ip -n "$TOPO_F" link set f1 up &&

        # server
        ip -n "$TOPO_S" addr add "$TOPO_S4/24" dev s0 &&
        ip -n "$TOPO_S" addr add "$TOPO_S6/64" dev s0 nodad &&
        ip -n "$TOPO_S" link set s0 up &&
        ip -n "$TOPO_S" route add default via "$TOPO_FS4" &&
        ip -n "$TOPO_S" -6 route add default via "$TOPO_FS6"
    }; then
        _topo_msg "setting up links/addresses/routes failed"
        topo_down
        return 1
    fi
    # Bounded wait (3 s) until the links really pass packets: the kernel
    # activates a device's queue (qdisc noop -> noqueue, operstate UP) from its
    # link-watch work, up to a second after `link set up`; packets sent before
    # are dropped (the first IPv6 neighbour solicitation was, costing the first
    # connection a 1 s retransmission).  Also wait for tentative addresses.
    for ((i = 0; i < 60; i++)); do
        _topo_links_ready && break
        sleep 0.05
    done
    _topo_links_ready || _topo_msg "warning: links not all up after 3 s"
    _topo_msg "up: client=$TOPO_C fw=$TOPO_F server=$TOPO_S"
}

_topo_links_ready() {
    local ns_if n i
    for ns_if in "$TOPO_C:c0" "$TOPO_F:f0" "$TOPO_F:f1" "$TOPO_S:s0"; do
        n=${ns_if%:*} i=${ns_if##*:}
        ip -n "$n" -o link show dev "$i" 2>/dev/null | grep 'qdisc noqueue state UP' >/dev/null || return 1
        [[ -z $(ip -n "$n" -6 addr show dev "$i" tentative 2>/dev/null) ]] || return 1
    done
}

# _topo_alive PID: exists and is not a zombie
_topo_alive() {
    local st
    [[ -r /proc/$1/stat ]] || return 1
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# _topo_kill PID...: TERM, wait up to 5 s, then KILL (only the given pids)
_topo_kill() {
    local pid i alive
    for pid in "$@"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for ((i = 0; i < 100; i++)); do
        alive=0
        for pid in "$@"; do
            if _topo_alive "$pid"; then alive=1; fi
        done
        ((alive)) || break
        sleep 0.05
    done
    for pid in "$@"; do
        if _topo_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    done
    return 0
}

# topo_reap_stale: delete namespaces left by earlier runs of this file that
# were killed without running their cleanup (SIGKILL, e.g. a ctest timeout):
# names pxd-{c,f,s}-PID-N whose creating shell PID no longer exists.  Whatever
# still runs inside them (their nginx, proxyd) was started by that run.
topo_reap_stale() {
    local n pid pids
    while read -r n _; do
        [[ $n =~ ^pxd-[cfs]-([0-9]+)-[0-9]+$ ]] || continue
        pid=${BASH_REMATCH[1]}
        [[ -d /proc/$pid ]] && continue
        pids=$(ip netns pids "$n" 2>/dev/null | tr '\n' ' ') || true
        _topo_msg "removing stale namespace $n (creator pid $pid is gone)${pids:+, stopping pids $pids}"
        # shellcheck disable=SC2086
        [[ -z ${pids// /} ]] || _topo_kill $pids
        ip netns del "$n" 2>/dev/null || true
    done < <(ip netns list 2>/dev/null)
    return 0
}

# topo_down: stop nginx (and whatever else is still running inside this run's
# own namespaces: only processes this run started can be in them), then delete
# the namespaces.  Safe to call any number of times.
topo_down() {
    local n pids=() p
    if [[ -n $TOPO_NGINX_PID || ${#TOPO_PIDS[@]} -gt 0 ]]; then
        _topo_kill "${TOPO_PIDS[@]}"
        TOPO_PIDS=()
        TOPO_NGINX_PID=""
    fi
    for n in "${TOPO_CREATED[@]}"; do
        while read -r p; do
            if [[ -n $p ]]; then pids+=("$p"); fi
        done < <(ip netns pids "$n" 2>/dev/null)
    done
    if ((${#pids[@]})); then
        _topo_msg "stopping leftover processes in this run's namespaces: ${pids[*]}"
        _topo_kill "${pids[@]}"
    fi
    for n in "${TOPO_CREATED[@]}"; do
        ip netns del "$n" 2>/dev/null || _topo_msg "ip netns del $n failed"
    done
    TOPO_CREATED=()
    return 0
}

# ---------------------------------------------------------------- checks

# topo_listening NS PORT: some TCP socket listens on PORT inside namespace NS
topo_listening() {
    ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep . >/dev/null
}

# topo_wait_listen NS PORT TIMEOUT_S [PID]: bounded wait; 1 on timeout (at
# least START_WAIT_MIN s, as wait_listen) or if PID died
topo_wait_listen() {
    local ns=$1 port=$2 timeout=$3 pid=${4:-} deadline
    ((timeout >= ${START_WAIT_MIN:-20})) || timeout=${START_WAIT_MIN:-20}
    deadline=$(($(date +%s%N) + timeout * 1000000000))
    until topo_listening "$ns" "$port"; do
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        (($(date +%s%N) < deadline)) || return 1
        sleep 0.05
    done
}

# ---------------------------------------------------------------- nginx origin

# shellcheck source=../integration/nginx_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/../integration/nginx_conf.sh"

# topo_start_nginx DOCROOT WORKDIR [PORT...]: nginx in S serving DOCROOT on each
# PORT (default 80), IPv4 and IPv6.  Access log $TOPO_NGINX_ACCESS_LOG, one line
# per request:  REMOTE_ADDR REMOTE_PORT SERVER_PORT "REQUEST" STATUS BYTES
# (REMOTE_ADDR first, so `awk '{print $1}'` is the address the server saw).
topo_start_nginx() {
    local root=$1 d=$2 port listen="" i
    shift 2
    (($#)) || set -- 80
    for port in "$@"; do
        listen+="        listen $port;
        listen [::]:$port ipv6only=on;
"
    done
    TOPO_NGINX_DIR=$d
    mkdir -p "$d/logs" "$d/tmp"
    TOPO_NGINX_ACCESS_LOG=$d/logs/access.log
    TOPO_NGINX_ERROR_LOG=$d/logs/error.log
    nginx_conf "$d" '$remote_addr $remote_port $server_port "$request" $status $body_bytes_sent' \
        "$listen        root $root;
        location / { }" >"$d/nginx.conf"
    ip netns exec "$TOPO_S" nginx -e "$d/logs/error.log" -p "$d" -c "$d/nginx.conf" >"$d/logs/stdout.log" 2>&1 &
    TOPO_NGINX_PID=$!
    TOPO_PIDS+=("$TOPO_NGINX_PID")
    for port in "$@"; do
        if ! topo_wait_listen "$TOPO_S" "$port" 5 "$TOPO_NGINX_PID"; then
            cat "$d/logs/stdout.log" "$d/logs/error.log" >&2 2>/dev/null
            _topo_msg "nginx did not start listening on port $port in $TOPO_S"
            return 1
        fi
    done
    # both families bound? (a v6 listener failing would only show in error.log)
    for ((i = 0; i < 50; i++)); do
        [[ $(ip netns exec "$TOPO_S" ss -Hltn "sport = :${1}" | wc -l) -ge 2 ]] && break
        sleep 0.05
    done
    _topo_msg "nginx in $TOPO_S on port(s) $* (pid $TOPO_NGINX_PID), access log $TOPO_NGINX_ACCESS_LOG"
}
