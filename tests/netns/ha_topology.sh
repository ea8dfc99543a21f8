# shellcheck shell=bash
# Four network namespaces for the high-availability tests: a client, two
# firewalls (A and B, each able to run proxyd, keepalived and conntrackd) and
# a server.  Each side is one Ethernet segment, a bridge inside the client
# (or server) namespace, so that the virtual gateway address can move:
#
#   client (C)  br0 198.18.1.2/24           server (S)  br0 198.19.2.2/24
#        |  ca        |  cb                       |  sa        |  sb
#   fw A f0 198.18.1.11   fw B f0 198.18.1.12  A f1 198.19.2.11  B f1 198.19.2.12
#   fw A sync0 198.18.3.1 ---------------- fw B sync0 198.18.3.2   (sync link, conntrackd)
#
# Virtual gateway addresses (keepalived): 198.18.1.1 (inside, the client's
# default route) and 198.19.2.1 (outside, the server's).  Only 198.18.0.0/15
# is used, inside namespaces created here.
#
#   source tests/netns/ha_topology.sh
#   ha_topo_up || exit        # 2: namespaces cannot be created at all
#   nsA ip addr; nsC curl ... # run in a namespace
#   ha_topo_down              # idempotent: kills what runs in them, deletes them
#
# The caller sets its own EXIT trap calling ha_topo_down.  Names are unique
# per run ($HC $HA $HB $HS, from HA_TOPO_ID, default <pid>-<random>);
# interface names live inside the namespaces.  Same conventions as
# topology.sh (which this does not use: one gateway there, two here).

HA_C4=198.18.1.2 HA_S4=198.19.2.2
HA_VIP_IN=198.18.1.1 HA_VIP_OUT=198.19.2.1
HA_A_IN=198.18.1.11 HA_B_IN=198.18.1.12
HA_A_OUT=198.19.2.11 HA_B_OUT=198.19.2.12
HA_A_SYNC=198.18.3.1 HA_B_SYNC=198.18.3.2

HC="" HA="" HB="" HS=""
HA_TOPO_CREATED=()

_ha_msg() { echo "[ha-topology] $*" >&2; }

nsC() { ip netns exec "$HC" "$@"; }
nsA() { ip netns exec "$HA" "$@"; }
nsB() { ip netns exec "$HB" "$@"; }
nsS() { ip netns exec "$HS" "$@"; }
# nsFW A|B CMD...: run in firewall A or B
nsFW() {
    local which=$1
    shift
    if [[ $which == A ]]; then ip netns exec "$HA" "$@"; else ip netns exec "$HB" "$@"; fi
}

# ha_topo_reap_stale: namespaces pxh-*-PID-N of earlier runs whose shell is gone
ha_topo_reap_stale() {
    local n pid pids
    while read -r n _; do
        [[ $n =~ ^pxh-[cabs]-([0-9]+)-[0-9]+$ ]] || continue
        pid=${BASH_REMATCH[1]}
        [[ -d /proc/$pid ]] && continue
        pids=$(ip netns pids "$n" 2>/dev/null | tr '\n' ' ') || true
        _ha_msg "removing stale namespace $n (creator pid $pid is gone)${pids:+, stopping pids $pids}"
        # shellcheck disable=SC2086
        [[ -z ${pids// /} ]] || _ha_kill $pids
        ip netns del "$n" 2>/dev/null || true
    done < <(ip netns list 2>/dev/null)
    return 0
}

_ha_alive() {
    local st
    [[ -r /proc/$1/stat ]] || return 1
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# _ha_kill PID...: TERM, up to 5 s, then KILL (only the given pids)
_ha_kill() {
    local pid i alive
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 100; i++)); do
        alive=0
        for pid in "$@"; do if _ha_alive "$pid"; then alive=1; fi; done
        ((alive)) || break
        sleep 0.05
    done
    for pid in "$@"; do
        if _ha_alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
        wait "$pid" 2>/dev/null || true
    done
    return 0
}

ha_topo_up() {
    local id n i
    ((${#HA_TOPO_CREATED[@]} == 0)) || return 0
    ha_topo_reap_stale
    id=${HA_TOPO_ID:-$$-$RANDOM}
    HC=pxh-c-$id HA=pxh-a-$id HB=pxh-b-$id HS=pxh-s-$id
    for n in "$HC" "$HA" "$HB" "$HS"; do
        if ! ip netns add "$n" 2>/dev/null; then
            if ((${#HA_TOPO_CREATED[@]} == 0)); then
                _ha_msg "cannot create network namespace '$n' (ip netns add failed)"
                return 2
            fi
            ha_topo_down
            return 1
        fi
        HA_TOPO_CREATED+=("$n")
        ip -n "$n" link set lo up || { ha_topo_down; return 1; }
        # IPv4 only here: no IPv6 neighbour discovery noise on the segments
        ip netns exec "$n" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
    done
    for n in "$HA" "$HB"; do
        ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=1 || { ha_topo_down; return 1; }
    done
    if ! {
        ip -n "$HC" link add br0 type bridge mcast_snooping 0 &&
        ip -n "$HS" link add br0 type bridge mcast_snooping 0 &&
        ip link add ca netns "$HC" type veth peer name f0 netns "$HA" &&
        ip link add cb netns "$HC" type veth peer name f0 netns "$HB" &&
        ip link add sa netns "$HS" type veth peer name f1 netns "$HA" &&
        ip link add sb netns "$HS" type veth peer name f1 netns "$HB" &&
        ip link add sync0 netns "$HA" type veth peer name sync0 netns "$HB" &&
        ip -n "$HC" link set ca master br0 && ip -n "$HC" link set cb master br0 &&
        ip -n "$HS" link set sa master br0 && ip -n "$HS" link set sb master br0 &&
        ip -n "$HC" addr add "$HA_C4/24" dev br0 &&
        ip -n "$HS" addr add "$HA_S4/24" dev br0 &&
        ip -n "$HA" addr add "$HA_A_IN/24" dev f0 && ip -n "$HA" addr add "$HA_A_OUT/24" dev f1 &&
        ip -n "$HA" addr add "$HA_A_SYNC/24" dev sync0 &&
        ip -n "$HB" addr add "$HA_B_IN/24" dev f0 && ip -n "$HB" addr add "$HA_B_OUT/24" dev f1 &&
        ip -n "$HB" addr add "$HA_B_SYNC/24" dev sync0 &&
        _ha_set_up "$HC" ca cb br0 && _ha_set_up "$HS" sa sb br0 &&
        _ha_set_up "$HA" f0 f1 sync0 && _ha_set_up "$HB" f0 f1 sync0 &&
        ip -n "$HC" route add default via "$HA_VIP_IN" &&
        ip -n "$HS" route add default via "$HA_VIP_OUT"
    }; then
        _ha_msg "setting up links/addresses/routes failed"
        ha_topo_down
        return 1
    fi
    # bounded wait until the links pass packets (see topology.sh)
    for ((i = 0; i < 60; i++)); do
        _ha_links_ready && break
        sleep 0.05
    done
    _ha_links_ready || _ha_msg "warning: links not all up after 3 s"
    _ha_msg "up: client=$HC fw-a=$HA fw-b=$HB server=$HS"
}

_ha_set_up() { # NS IF...
    local n=$1 i
    shift
    for i in "$@"; do ip -n "$n" link set "$i" up || return 1; done
}

_ha_links_ready() {
    local x
    for x in "$HC:ca" "$HC:cb" "$HS:sa" "$HS:sb" "$HA:f0" "$HA:f1" "$HA:sync0" "$HB:f0" "$HB:f1" "$HB:sync0"; do
        ip -n "${x%:*}" -o link show dev "${x##*:}" 2>/dev/null | grep 'state UP' >/dev/null || return 1
    done
}

# ha_topo_down: stop whatever still runs in this run's namespaces (only this
# run's processes can be there), then delete them.  Safe to call again.
ha_topo_down() {
    local n p pids=()
    for n in "${HA_TOPO_CREATED[@]}"; do
        while read -r p; do
            if [[ -n $p ]]; then pids+=("$p"); fi
        done < <(ip netns pids "$n" 2>/dev/null)
    done
    if ((${#pids[@]})); then
        _ha_msg "stopping leftover processes in this run's namespaces: ${pids[*]}"
        _ha_kill "${pids[@]}"
    fi
    for n in "${HA_TOPO_CREATED[@]}"; do
        ip netns del "$n" 2>/dev/null || _ha_msg "ip netns del $n failed"
    done
    HA_TOPO_CREATED=()
    return 0
}

# ha_vip_holders ADDR: the firewalls (A, B) that hold ADDR now, space separated
ha_vip_holders() {
    local out="" w
    for w in A B; do
        # (no grep -q on a pipe: with pipefail, ip's SIGPIPE would count)
        if [[ $(nsFW "$w" ip -4 -o addr show 2>/dev/null) == *" inet $1/"* ]]; then out+="$w "; fi
    done
    echo "${out% }"
}
