#!/usr/bin/env bash
# inline-tproxy.sh: put proxyd inline on a Linux router/firewall.
#
# Divert TCP connections that are being forwarded through this host to a
# proxyd listener, either with TPROXY (proxyd service in mode="transparent")
# or with REDIRECT/DNAT (proxyd service in mode="redirect"); and remove it all
# again.  Every rule this script installs is printed as it is applied, so the
# output doubles as the documentation of the setup (see deploy/README.md).
#
#   inline-tproxy.sh tproxy   --port 80 --proxy-port 50080
#   inline-tproxy.sh redirect --port 8080 --proxy-port 50081
#   inline-tproxy.sh redirect --port 80 --proxy-port 50081 --to 198.18.1.1 --to6 2001:db8:1::1   # DNAT
#   inline-tproxy.sh clear
#   inline-tproxy.sh status
#
# Options (tproxy / redirect):
#   --port P[,P...]     destination port(s) of the connections to divert (required)
#   --proxy-port P      port of the proxyd listener (required)
#   --family 4|6|both   which IP versions get rules (default both)
#   --in-iface IF       divert only connections arriving on interface IF
#                       (default: any interface; a router usually names its
#                       inside interface so that its own traffic is not diverted)
#   --to ADDR           redirect: DNAT to ADDR:proxy-port instead of REDIRECT
#   --to6 ADDR          redirect: IPv6 DNAT address (with --to, for --family 6/both)
#   --no-conntrack      tproxy: do not add the rule that keeps conntrack on (deploy/README.md)
#   --upstream-mark M   tproxy: the mark= of the proxyd services that spoof the
#                       client's address (default 0x40000000; none = no zone rules):
#                       their connections get their own conntrack zone, so they
#                       cannot clash with the clients' own flows (deploy/README.md)
#   --ct-zone Z         tproxy: that conntrack zone (default 1)
#   --data-ports LO:HI  tproxy: also divert connections to these ports, each
#                       to proxyd's own listener on that same port (the ftp
#                       analyser's passive data-ports in transparent mode)
# Options (all commands):
#   --mark N            fwmark for diverted packets (default 1)
#   --table N           routing table for the local route (default 100)
#   --dry-run           print the commands, change nothing
#
# Needs root, iptables/ip6tables (legacy or nft backend), iproute2, sysctl.
# Idempotent: running the same command twice adds nothing twice.  `clear`
# removes only what this script added (its own chains, the jumps to them, the
# ip rules for --mark and the routes of --table); sysctls are left as they are.
# Chains: mangle PROXYD, PROXYD_DIVERT; nat PROXYD; raw PROXYD, PROXYD_OUT.

set -euo pipefail

PROG=${0##*/}
CHAIN=PROXYD             # our chains: mangle PROXYD, mangle PROXYD_DIVERT, nat PROXYD,
DIVERT=PROXYD_DIVERT     # raw PROXYD (PREROUTING), raw PROXYD_OUT (OUTPUT)
RAW_OUT=PROXYD_OUT

usage() { # EXIT_STATUS: the header comment; to stderr unless asked for
    if [[ ${1:-0} == 0 ]]; then
        sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0" | sed '$d'
    else
        sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0" | sed '$d' >&2
    fi
    exit "${1:-0}"
}

die() { echo "$PROG: $*" >&2; exit 1; }

DRY=0
run() { # print and execute one command
    local a out="+"
    for a in "$@"; do
        if [[ $a == *[[:space:]]* ]]; then out+=" \"$a\""; else out+=" $a"; fi
    done
    echo "$out"
    ((DRY)) || "$@"
}

# ---------------------------------------------------------------- arguments

CMD=${1:-}
[[ -n $CMD ]] || usage 2
shift
case $CMD in
    -h | --help | help) usage 0 ;;
    tproxy | redirect | clear | status) ;;
    *) echo "$PROG: unknown command '$CMD'" >&2; usage 2 ;;
esac

PORTS="" PROXY_PORT="" FAMILY=both IN_IFACE="" TO4="" TO6="" MARK=1 TABLE=100 CONNTRACK=1
UPSTREAM_MARK=0x40000000 CT_ZONE=1 DATA_PORTS=""
while (($#)); do
    case $1 in
        --port) PORTS=${2:?--port needs a value}; shift 2 ;;
        --proxy-port) PROXY_PORT=${2:?--proxy-port needs a value}; shift 2 ;;
        --family) FAMILY=${2:?--family needs 4, 6 or both}; shift 2 ;;
        --in-iface) IN_IFACE=${2:?--in-iface needs an interface}; shift 2 ;;
        --to) TO4=${2:?--to needs an IPv4 address}; shift 2 ;;
        --to6) TO6=${2:?--to6 needs an IPv6 address}; shift 2 ;;
        --mark) MARK=${2:?--mark needs a number}; shift 2 ;;
        --table) TABLE=${2:?--table needs a number}; shift 2 ;;
        --no-conntrack) CONNTRACK=0; shift ;;
        --upstream-mark) UPSTREAM_MARK=${2:?--upstream-mark needs a mark or none}; shift 2 ;;
        --ct-zone) CT_ZONE=${2:?--ct-zone needs a number}; shift 2 ;;
        --data-ports) DATA_PORTS=${2:?--data-ports needs LO:HI}; shift 2 ;;
        --dry-run) DRY=1; shift ;;
        -h | --help) usage 0 ;;
        *) die "unknown option '$1' (try --help)" ;;
    esac
done

case $FAMILY in
    4) FAMS=(4) ;;
    6) FAMS=(6) ;;
    both) FAMS=(4 6) ;;
    *) die "--family must be 4, 6 or both" ;;
esac
valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= 65535)); }
if [[ $CMD == tproxy || $CMD == redirect ]]; then
    [[ -n $PORTS ]] || die "$CMD: --port is required"
    [[ -n $PROXY_PORT ]] || die "$CMD: --proxy-port is required"
    valid_port "$PROXY_PORT" || die "bad --proxy-port '$PROXY_PORT'"
    IFS=, read -ra _p <<<"$PORTS"
    for p in "${_p[@]}"; do valid_port "$p" || die "bad --port '$p'"; done
    ((${#_p[@]} <= 15)) || die "at most 15 ports per rule (multiport)"
fi
[[ $MARK =~ ^(0x[0-9a-fA-F]+|[0-9]+)$ ]] || die "bad --mark '$MARK'"
[[ $TABLE =~ ^[0-9]+$ ]] || die "bad --table '$TABLE'"
[[ $UPSTREAM_MARK =~ ^(0x[0-9a-fA-F]+|[0-9]+|none)$ ]] || die "bad --upstream-mark '$UPSTREAM_MARK'"
[[ $CT_ZONE =~ ^[0-9]+$ ]] && ((CT_ZONE >= 1 && CT_ZONE <= 65535)) || die "bad --ct-zone '$CT_ZONE' (1..65535)"
[[ $CMD != tproxy || (-z $TO4 && -z $TO6) ]] || die "--to/--to6 only apply to redirect"
if [[ -n $DATA_PORTS ]]; then
    [[ $CMD == tproxy ]] || die "--data-ports only applies to tproxy"
    _lo=${DATA_PORTS%%:*} _hi=${DATA_PORTS#*:}
    [[ $DATA_PORTS == *:* ]] && valid_port "$_lo" && valid_port "$_hi" && ((_lo <= _hi)) ||
        die "bad --data-ports '$DATA_PORTS' (LO:HI, 1..65535)"
fi
((DRY)) || [[ $EUID == 0 ]] || die "must run as root (or use --dry-run)"

# ---------------------------------------------------------------- helpers

ipt() { # FAMILY ARGS...: iptables or ip6tables
    local f=$1
    shift
    if [[ $f == 4 ]]; then run iptables -w "$@"; else run ip6tables -w "$@"; fi
}
ipt_q() { # quiet check, never printed (used for "does it exist already")
    local f=$1
    shift
    if [[ $f == 4 ]]; then iptables -w "$@" >/dev/null 2>&1; else ip6tables -w "$@" >/dev/null 2>&1; fi
}
# ensure FAMILY TABLE CHAIN RULE...: append RULE to CHAIN unless it is there already
ensure() {
    local f=$1 t=$2 c=$3
    shift 3
    ipt_q "$f" -t "$t" -C "$c" "$@" || ipt "$f" -t "$t" -A "$c" "$@"
}
# ensure_chain FAMILY TABLE CHAIN [HOOK]: create CHAIN, and jump to it from HOOK
ensure_chain() {
    local f=$1 t=$2 c=$3 hook=${4:-}
    ipt_q "$f" -t "$t" -nL "$c" || ipt "$f" -t "$t" -N "$c"
    if [[ -n $hook ]]; then
        ipt_q "$f" -t "$t" -C "$hook" -j "$c" || ipt "$f" -t "$t" -I "$hook" 1 -j "$c"
    fi
}
# match options for the diverted connections: -p tcp [-i IF] --dport P | -m multiport --dports P,P
port_match() {
    MATCH=(-p tcp)
    [[ -n $IN_IFACE ]] && MATCH+=(-i "$IN_IFACE")
    if [[ $PORTS == *,* ]]; then
        MATCH+=(-m multiport --dports "$PORTS")
    else
        MATCH+=(--dport "$PORTS")
    fi
}
setsys() { # KEY VALUE: set a sysctl unless it already has that value
    local cur
    cur=$(sysctl -n "$1" 2>/dev/null) || die "sysctl $1 not available"
    [[ $cur == "$2" ]] || run sysctl -qw "$1=$2"
}

# ---------------------------------------------------------------- sysctls

sysctls() {
    local f
    for f in "${FAMS[@]}"; do
        if [[ $f == 4 ]]; then
            # forward what is not diverted (every other port), as a router does
            setsys net.ipv4.ip_forward 1
            # (rp_filter needs no change, strict or loose: on this path every
            # packet's source routes back out of the interface it came in on,
            # and proxyd's spoofed packets are sent locally, which rp_filter
            # does not check)
        else
            setsys net.ipv6.conf.all.forwarding 1
        fi
    done
}

# ---------------------------------------------------------------- policy routing

# has_rule FAMILY: the "fwmark MARK lookup TABLE" rule exists
has_rule() {
    ip -"$1" rule show | grep -qE "fwmark $(printf '0x%x' "$MARK")(/0xffffffff)? lookup $TABLE( |\$)"
}

# Packets marked MARK (TPROXY'd connections, and replies to proxyd's own
# transparent sockets) are routed with table TABLE, which says "every address
# is local": they are delivered to this host's sockets instead of forwarded.
routing() {
    local f
    for f in "${FAMS[@]}"; do
        if [[ $f == 4 ]]; then
            has_rule 4 ||
                run ip -4 rule add fwmark "$MARK" lookup "$TABLE"
            ip -4 route show table "$TABLE" 2>/dev/null | grep -q '^local default dev lo' ||
                run ip -4 route add local 0.0.0.0/0 dev lo table "$TABLE"
        else
            has_rule 6 ||
                run ip -6 rule add fwmark "$MARK" lookup "$TABLE"
            ip -6 route show table "$TABLE" 2>/dev/null | grep -q '^local default dev lo' ||
                run ip -6 route add local ::/0 dev lo table "$TABLE"
        fi
    done
}

# ---------------------------------------------------------------- tproxy

tproxy() {
    local f
    sysctls
    port_match
    for f in "${FAMS[@]}"; do
        echo "# IPv$f: mangle PREROUTING -> $CHAIN"
        ensure_chain "$f" mangle "$DIVERT"
        # DIVERT: mark the packet (=> routed locally by table $TABLE) and stop here
        ensure "$f" mangle "$DIVERT" -j MARK --set-mark "$MARK"
        ensure "$f" mangle "$DIVERT" -j ACCEPT
        ensure_chain "$f" mangle "$CHAIN" PREROUTING
        # 1. a packet that belongs to an existing transparent socket of this host
        #    goes to it: both the rest of a diverted client connection and the
        #    server's replies to proxyd's spoofed-source upstream connection (this
        #    rule is what keeps those replies from being forwarded to the client).
        #    Wildcard-bound listeners are not matched (no --nowildcard).
        #    Not for SYNs: a client reusing the ports of a connection the proxy
        #    has in TIME_WAIT would be handed to that dead socket (answered
        #    with an ACK, then RST and a SYN retransmission: 1 s stalls under
        #    short-connection load); rule 2 hands new SYNs to the listener.
        ensure "$f" mangle "$CHAIN" -p tcp ! --syn -m socket --transparent -j "$DIVERT"
        # 2. new connections to the diverted port(s): hand them to the proxyd
        #    listener (IP_TRANSPARENT, bound to the wildcard address) without
        #    changing their destination; proxyd reads it with getsockname().
        ensure "$f" mangle "$CHAIN" "${MATCH[@]}" -j TPROXY --on-port "$PROXY_PORT" --tproxy-mark "$MARK/$MARK"
        # 2b. --data-ports: connections to a port range proxyd listens on
        #    itself, one port each (FTP passive data in transparent mode): the
        #    destination port is kept (--on-port 0). SYNs only: the rest of a
        #    diverted connection is rule 1's, and anything else to these ports
        #    is a reply to a connection made from one of them (a server's or a
        #    client's ephemeral port in the range, an active-mode data
        #    connection): diverted, its SYN-ACK would find no socket here and
        #    the connection would stall; it must be forwarded.
        if [[ -n $DATA_PORTS ]]; then
            ensure "$f" mangle "$CHAIN" -p tcp --syn ${IN_IFACE:+-i "$IN_IFACE"} --dport "$DATA_PORTS" \
                -m comment --comment "proxyd: data ports" -j TPROXY --on-port 0 --tproxy-mark "$MARK/$MARK"
        fi
        # 3. TPROXY itself needs no connection tracking, but proxyd's /sessions
        #    view (flows) and `conntrack -L` only see connections once some rule
        #    in the namespace uses conntrack.  This rule matches every state and
        #    has no target: it changes no verdict, and rules that later runs
        #    append (more ports, other services) are still reached.
        if ((CONNTRACK)); then
            ensure "$f" mangle "$CHAIN" -m conntrack --ctstate NEW,ESTABLISHED,RELATED,INVALID,UNTRACKED \
                -m comment --comment "proxyd: keep conntrack on"
        fi
        # 4. spoof-source: proxyd's connection to the server carries the
        #    client's address, and the kernel picks its port; the same 4-tuple
        #    may still be one of the client's own flows in conntrack, which then
        #    drops the SYN (1 s stall). A conntrack zone of their own for the
        #    proxy's marked connections, both ways, avoids that: packets it
        #    sends (raw OUTPUT, by the socket's SO_MARK) and the server's
        #    replies (raw PREROUTING: the socket they belong to, its mark).
        if [[ $UPSTREAM_MARK != none ]]; then
            echo "# IPv$f: raw OUTPUT -> $RAW_OUT, raw PREROUTING -> $CHAIN: conntrack zone $CT_ZONE for mark $UPSTREAM_MARK"
            ensure_chain "$f" raw "$RAW_OUT" OUTPUT
            ensure "$f" raw "$RAW_OUT" -p tcp -m mark --mark "$UPSTREAM_MARK" -j CT --zone "$CT_ZONE"
            ensure_chain "$f" raw "$CHAIN" PREROUTING
            ensure "$f" raw "$CHAIN" -p tcp ! --syn -m socket --transparent --restore-skmark \
                -m mark --mark "$UPSTREAM_MARK" -j CT --zone "$CT_ZONE"
        fi
    done
    routing
}

# ---------------------------------------------------------------- redirect / dnat

redirect() {
    local f
    sysctls
    port_match
    for f in "${FAMS[@]}"; do
        echo "# IPv$f: nat PREROUTING -> $CHAIN"
        ensure_chain "$f" nat "$CHAIN" PREROUTING
        if [[ $f == 4 && -n $TO4 ]]; then
            # DNAT to a given address of this host (conntrack keeps the original)
            ensure 4 nat "$CHAIN" "${MATCH[@]}" -j DNAT --to-destination "$TO4:$PROXY_PORT"
        elif [[ $f == 6 && -n $TO6 ]]; then
            ensure 6 nat "$CHAIN" "${MATCH[@]}" -j DNAT --to-destination "[$TO6]:$PROXY_PORT"
        elif [[ -n $TO4 || -n $TO6 ]]; then
            echo "# IPv$f: no DNAT address given (--to/--to6): no rule for IPv$f" >&2
        else
            # REDIRECT: DNAT to the address of the interface the packet came in on
            ensure "$f" nat "$CHAIN" "${MATCH[@]}" -j REDIRECT --to-ports "$PROXY_PORT"
        fi
    done
}

# ---------------------------------------------------------------- clear

clear_all() {
    local f t hook
    for f in 4 6; do
        for t in mangle nat raw; do
            if ipt_q "$f" -t "$t" -nL "$CHAIN"; then
                while ipt_q "$f" -t "$t" -C PREROUTING -j "$CHAIN"; do
                    ipt "$f" -t "$t" -D PREROUTING -j "$CHAIN"
                done
                ipt "$f" -t "$t" -F "$CHAIN"
                ipt "$f" -t "$t" -X "$CHAIN"
            fi
        done
        if ipt_q "$f" -t raw -nL "$RAW_OUT"; then
            while ipt_q "$f" -t raw -C OUTPUT -j "$RAW_OUT"; do
                ipt "$f" -t raw -D OUTPUT -j "$RAW_OUT"
            done
            ipt "$f" -t raw -F "$RAW_OUT"
            ipt "$f" -t raw -X "$RAW_OUT"
        fi
        if ipt_q "$f" -t mangle -nL "$DIVERT"; then
            ipt "$f" -t mangle -F "$DIVERT"
            ipt "$f" -t mangle -X "$DIVERT"
        fi
        while has_rule "$f"; do
            run ip -"$f" rule del fwmark "$MARK" lookup "$TABLE"
        done
        if ip -"$f" route show table "$TABLE" 2>/dev/null | grep -q .; then
            run ip -"$f" route flush table "$TABLE"
        fi
    done
}

# ---------------------------------------------------------------- status

show_chain() { # FAMILY TABLE CHAIN: list it with counters, if it exists
    ipt_q "$1" -t "$2" -nL "$3" || return 0
    echo "# table $2"
    if [[ $1 == 4 ]]; then iptables -w -t "$2" -nvL "$3"; else ip6tables -w -t "$2" -nvL "$3"; fi
}

status() {
    local f
    for f in 4 6; do
        echo "=== IPv$f"
        show_chain "$f" mangle "$CHAIN"
        show_chain "$f" mangle "$DIVERT"
        show_chain "$f" nat "$CHAIN"
        show_chain "$f" raw "$CHAIN"
        show_chain "$f" raw "$RAW_OUT"
        ip -"$f" rule show | grep -E "lookup $TABLE( |\$)" || true
        ip -"$f" route show table "$TABLE" 2>/dev/null || true
    done
}

case $CMD in
    tproxy) tproxy ;;
    redirect) redirect ;;
    clear) clear_all ;;
    status) status ;;
esac
