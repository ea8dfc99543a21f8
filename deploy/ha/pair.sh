#!/usr/bin/env bash
# pair.sh: one box of an active/backup proxyd pair, with keepalived (VRRP)
# and conntrackd (FTFW).  Run it on each of the two boxes with the same
# virtual addresses and each other's addresses as peers.
#
#   pair.sh up --priority 150 \
#       --in-iface f0  --in-vip 198.18.1.1/24  --in-peer 198.18.1.12 \
#       --out-iface f1 --out-vip 198.19.2.1/24 --out-peer 198.19.2.12 \
#       --sync-iface sync0 --sync-peer 198.18.3.2
#   pair.sh down          # stop the keepalived and conntrackd it started
#   pair.sh status        # VRRP state, virtual addresses, conntrackd caches
#   pair.sh supervise     # run keepalived, restart it when it dies or
#                         # hangs (what
#                         # `up` starts in the background; the ExecStart of
#                         # proxyd-ha.service)
#   pair.sh cleanup       # what supervise does when keepalived died: drop
#                         # the virtual addresses, state "stop"
#
# It writes keepalived.conf, conntrackd.conf and notify.sh into --dir, checks
# them (keepalived -t), and starts (or, if a config changed, reloads) the two
# daemons: conntrackd, and keepalived under a supervisor.  Every file it
# installs and every command it runs is printed, so the output doubles as
# the documentation of the setup (deploy/README.md).
# Running `up` twice with the same options changes nothing; with other
# options it rewrites the files and reloads keepalived / restarts conntrackd.
#
# What it sets up:
#   - two VRRP instances, inside (--in-*) and outside (--out-*), in one sync
#     group so that both virtual addresses move together; unicast adverts to
#     the peer; both boxes start as BACKUP with nopreempt: the box that is
#     live stays live when the other comes back (no second interruption);
#   - a health check of proxyd's admin endpoint (GET /status), not of the
#     process: a proxyd that is hung, or has no admin endpoint, fails over;
#     either interface down (each instance tracks its own, the group both)
#     moves both addresses;
#   - notify.sh: logs each transition, writes the state to --state-file
#     (proxyd's <admin ha-state-file=>: proxyd_ha_state in /metrics),
#     drives conntrackd as conntrack-tools' primary-backup.sh does, and on
#     leaving MASTER has proxyd reset the sessions it can no longer serve
#     (POST /sessions/reset?reason=ha);
#   - a supervisor of keepalived: when keepalived dies, however (kill -9),
#     it removes the virtual addresses keepalived left behind, runs
#     notify.sh with "fault" (so proxyd and /metrics know) and starts
#     keepalived again a second later, as BACKUP: without it, the peer
#     takes over and both boxes hold both addresses, for good.  The same
#     when keepalived hangs (kill -STOP, a process stuck): its VRRP process
#     touches DIR/heartbeat every second (a tracked vrrp_script); with no
#     heartbeat for 3 s the supervisor says so and kills it (kill -9), then
#     goes on as for a death: a stopped master sends no adverts, so the
#     peer takes over, while it keeps the addresses;
#   - conntrackd in FTFW mode over UDP on the sync link, with an external
#     cache that the new master commits to its kernel table.
#
# Options (up):
#   --in-iface IF, --out-iface IF   the client-side and server-side interfaces
#   --in-vip A/LEN, --out-vip A/LEN virtual gateway addresses (IPv4)
#   --in-peer A, --out-peer A       the other box's own address on each side
#   --in-src A, --out-src A         this box's own address (default: the
#                                   interface's first IPv4 address)
#   --sync-iface IF --sync-peer A   dedicated link for conntrackd, and the
#   [--sync-src A]                  peer's address on it
#   --priority N                    1..254; give the preferred box the higher
#                                   one (default 100)
#   --vrid N                        inside virtual router id; outside is N+1
#                                   (default 51)
#   --advert S                      VRRP advert interval, seconds (default 0.5;
#                                   a dead box is noticed after 3 x S)
#   --check-interval S              health check period (default 1)
#   --check-fall N --check-rise N   failures to fail over / successes to come
#                                   back (default 2 / 2)
#   --check-timeout S               one check's limit (default 2): a check
#                                   that only had to wait for the box (a
#                                   loaded CPU, a binary read back from disk)
#                                   must not count as a failed proxyd
#   --admin ADDR:PORT               proxyd's admin endpoint (default 127.0.0.1:9180)
#   --state-file PATH               default /run/proxyd/ha-state
#   --dir DIR                       configs, notify script, pid files, logs
#                                   (default /etc/proxyd/ha); keepalived refuses
#                                   scripts in a directory others can write
#   --name NAME                     router_id (default: the host name)
#   --systemd                       start the supervisor as proxyd-ha.service
#                                   (systemctl enable --now) rather than in
#                                   the background
# All commands: --dir DIR, --dry-run (print, change nothing).
#
# Needs root, keepalived, conntrackd (conntrack-tools), curl, iproute2.

set -euo pipefail

PROG=${0##*/}
die() { echo "$PROG: $*" >&2; exit 1; }
usage() {
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0" | sed '$d' >&"$((${1:-0} == 0 ? 1 : 2))"
    exit "${1:-0}"
}

DRY=0
run() { # print and execute one command
    local a out="+"
    for a in "$@"; do
        if [[ $a == *[[:space:]]* ]]; then out+=" \"$a\""; else out+=" $a"; fi
    done
    echo "$out"
    ((DRY)) || "$@"
}

CMD=${1:-}
[[ -n $CMD ]] || usage 2
shift
case $CMD in
    -h | --help | help) usage 0 ;;
    up | down | status | supervise | cleanup) ;;
    *) echo "$PROG: unknown command '$CMD'" >&2; usage 2 ;;
esac

IN_IF="" OUT_IF="" IN_VIP="" OUT_VIP="" IN_PEER="" OUT_PEER="" IN_SRC="" OUT_SRC=""
SYNC_IF="" SYNC_PEER="" SYNC_SRC="" PRIO=100 VRID=51 ADVERT=0.5
CHECK_INT=1 CHECK_FALL=2 CHECK_RISE=2 CHECK_TIMEOUT=2 ADMIN=127.0.0.1:9180
STATE_FILE=/run/proxyd/ha-state DIR=/etc/proxyd/ha NAME="" SYSTEMD=0
while (($#)); do
    case $1 in
        --in-iface) IN_IF=${2:?}; shift 2 ;;
        --out-iface) OUT_IF=${2:?}; shift 2 ;;
        --in-vip) IN_VIP=${2:?}; shift 2 ;;
        --out-vip) OUT_VIP=${2:?}; shift 2 ;;
        --in-peer) IN_PEER=${2:?}; shift 2 ;;
        --out-peer) OUT_PEER=${2:?}; shift 2 ;;
        --in-src) IN_SRC=${2:?}; shift 2 ;;
        --out-src) OUT_SRC=${2:?}; shift 2 ;;
        --sync-iface) SYNC_IF=${2:?}; shift 2 ;;
        --sync-peer) SYNC_PEER=${2:?}; shift 2 ;;
        --sync-src) SYNC_SRC=${2:?}; shift 2 ;;
        --priority) PRIO=${2:?}; shift 2 ;;
        --vrid) VRID=${2:?}; shift 2 ;;
        --advert) ADVERT=${2:?}; shift 2 ;;
        --check-interval) CHECK_INT=${2:?}; shift 2 ;;
        --check-fall) CHECK_FALL=${2:?}; shift 2 ;;
        --check-rise) CHECK_RISE=${2:?}; shift 2 ;;
        --check-timeout) CHECK_TIMEOUT=${2:?}; shift 2 ;;
        --admin) ADMIN=${2:?}; shift 2 ;;
        --state-file) STATE_FILE=${2:?}; shift 2 ;;
        --dir) DIR=${2:?}; shift 2 ;;
        --name) NAME=${2:?}; shift 2 ;;
        --systemd) SYSTEMD=1; shift ;;
        --dry-run) DRY=1; shift ;;
        -h | --help) usage 0 ;;
        *) die "unknown option '$1' (try --help)" ;;
    esac
done
((DRY)) || [[ $EUID == 0 ]] || die "must run as root (or use --dry-run)"
[[ $DIR == /* ]] || die "--dir must be an absolute path"
((SYSTEMD == 0)) || [[ $DIR == /etc/proxyd/ha ]] ||
    die "--systemd: proxyd-ha.service reads /etc/proxyd/ha, not $DIR"

KA_CONF=$DIR/keepalived.conf
CT_CONF=$DIR/conntrackd.conf
NOTIFY=$DIR/notify.sh
KA_PID=$DIR/keepalived.pid
KA_VRRP_PID=$DIR/keepalived-vrrp.pid
KA_LOG=$DIR/keepalived.log
CT_LOG=$DIR/conntrackd.log
CT_LOCK=$DIR/conntrackd.lock
CT_SOCK=$DIR/conntrackd.ctl
HA_LOG=$DIR/transitions.log
HEARTBEAT=$DIR/heartbeat
SUP_PID=$DIR/supervisor.pid
SELF=$(readlink -f "$0")

ipv4() { [[ $1 =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}$ ]]; }
# first IPv4 address of interface IF that is not VIP (keepalived's own
# addresses come and go; the box's own one is the stable one)
own_addr() {
    ip -4 -o addr show dev "$1" 2>/dev/null | awk -v vip="${2%/*}" '
        { split($4, a, "/"); if (a[1] != vip) { print a[1]; exit } }'
}
# PID runs (a zombie does not: keepalived's VRRP child, its parent killed,
# may wait a while for whatever reaps orphans here)
running() {
    local st
    st=$(sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}
alive() { local p; [[ -r $1 ]] && p=$(cat "$1" 2>/dev/null) && [[ $p =~ ^[0-9]+$ ]] && running "$p"; }

# ---------------------------------------------------------------- files

keepalived_conf() {
    cat <<EOF
# written by deploy/ha/pair.sh: one box of a proxyd pair
global_defs {
    router_id ${NAME:-$(hostname)}
    vrrp_version 3              # sub-second adverts
    script_user root
    enable_script_security
    # gratuitous ARP on becoming master, repeated: the neighbours' caches
    # follow the virtual addresses at once
    vrrp_garp_master_delay 1
    vrrp_garp_master_repeat 3
    vrrp_garp_master_refresh 60
}

# proxyd answers on its admin endpoint (its main thread runs, the config is
# loaded), not merely "a process exists"
vrrp_script proxyd_admin {
    script "/usr/bin/curl -fsS -o /dev/null --max-time $CHECK_TIMEOUT http://$ADMIN/status"
    interval $CHECK_INT
    timeout $((CHECK_TIMEOUT + 1))
    fall $CHECK_FALL
    rise $CHECK_RISE
}

# keepalived's VRRP process runs (its scheduler, not only the process):
# pair.sh's supervisor kills a keepalived whose heartbeat is $((HANG_MS / 1000)) s old
# (stopped or stuck: a master that no longer adverts but keeps the
# addresses while the peer takes over). Tracked, else keepalived would not
# run it; a touch that fails is a fault of the box
vrrp_script heartbeat {
    script "/usr/bin/touch $HEARTBEAT"
    interval 1
}

# both virtual gateways move together: a box is master on both sides or on neither
vrrp_sync_group PROXYD {
    group {
        PROXYD_IN
        PROXYD_OUT
    }
    track_script {
        proxyd_admin
        heartbeat
    }
    # no track_interface: each instance tracks its own interface already
    # (keepalived -t refuses it here again), and the group makes either
    # link down a FAULT of both: with the server side gone the box cannot
    # serve the clients it would still attract
    notify "$NOTIFY"
}

vrrp_instance PROXYD_IN {
    state BACKUP
    nopreempt
    interface $IN_IF
    virtual_router_id $VRID
    priority $PRIO
    advert_int $ADVERT
    unicast_src_ip $IN_SRC
    unicast_peer {
        $IN_PEER
    }
    virtual_ipaddress {
        $IN_VIP dev $IN_IF
    }
}

vrrp_instance PROXYD_OUT {
    state BACKUP
    nopreempt
    interface $OUT_IF
    virtual_router_id $((VRID + 1))
    priority $PRIO
    advert_int $ADVERT
    unicast_src_ip $OUT_SRC
    unicast_peer {
        $OUT_PEER
    }
    virtual_ipaddress {
        $OUT_VIP dev $OUT_IF
    }
}
EOF
}

conntrackd_conf() {
    cat <<EOF
# written by deploy/ha/pair.sh: FTFW (reliable) flow sync with the peer
Sync {
    Mode FTFW {
        # the backup keeps the peer's flows in an external cache; the
        # notify script commits them to the kernel on becoming master
        DisableExternalCache Off
        CommitTimeout 1800
        PurgeTimeout 5
    }
    UDP {
        IPv4_address $SYNC_SRC
        IPv4_Destination_Address $SYNC_PEER
        Port 3780
        Interface $SYNC_IF
        SndSocketBuffer 1249280
        RcvSocketBuffer 1249280
        Checksum on
    }
}
General {
    HashSize 32768
    HashLimit 131072
    LogFile $CT_LOG
    Syslog off
    LockFile $CT_LOCK
    UNIX {
        Path $CT_SOCK
    }
    NetlinkBufferSize 2097152
    NetlinkBufferSizeMaxGrowth 8388608
    Filter From Userspace {
        Protocol Accept {
            TCP
            UDP
            ICMP
        }
        # flows of the box itself (proxyd's connections to servers, the sync
        # link, VRRP) mean nothing to the peer
        Address Ignore {
            IPv4_address 127.0.0.1
            IPv4_address ${IN_VIP%/*}
            IPv4_address ${OUT_VIP%/*}
            IPv4_address $IN_SRC
            IPv4_address $OUT_SRC
            IPv4_address $SYNC_SRC
        }
    }
}
EOF
}

notify_sh() {
    cat <<EOF
#!/bin/sh
# written by deploy/ha/pair.sh. keepalived calls it on each transition of
# the sync group:  notify.sh GROUP NAME STATE PRIORITY
# 1. the state goes to $STATE_FILE (proxyd: <admin ha-state-file=>),
#    rewritten only here, so its mtime is the time of the transition;
# 2. one line per transition in $HA_LOG;
# 3. leaving MASTER: proxyd resets its live sessions (their packets go to
#    the peer now; a client waiting for data would wait for the idle
#    timeout); the log says end=ha: left master;
# 4. conntrackd, as conntrack-tools' primary-backup.sh: the new master puts
#    the peer's flows into its kernel table and takes over the sync.
# Also run by pair.sh's supervisor when keepalived died (GROUP "SUPERVISOR").
state=\$(echo "\$3" | tr 'A-Z' 'a-z')
case \$state in master|backup|fault|stop) ;; *) state=unknown ;; esac
# a sync group's notify gets no priority: the configured one
prio=\${4:-0}
[ "\$prio" != 0 ] || prio=$PRIO
prev=\$(cut -d' ' -f1 "$STATE_FILE" 2>/dev/null)
mkdir -p "$(dirname "$STATE_FILE")"
tmp="$STATE_FILE.tmp.\$\$"
printf '%s %s %s\n' "\$state" "\$(date +%s)" "\$2" >"\$tmp" && chmod 644 "\$tmp" && mv -f "\$tmp" "$STATE_FILE"
echo "\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) \$1 \$2 -> \$state (priority \$prio)" >>"$HA_LOG"
if [ "\$prev" = master ] && [ "\$state" != master ]; then
    r=\$(/usr/bin/curl -sS --max-time 2 -X POST -d '' "http://$ADMIN/sessions/reset?reason=ha" 2>&1)
    echo "\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) proxyd sessions reset: \$r" >>"$HA_LOG"
fi
ct() {
    /usr/sbin/conntrackd -C "$CT_CONF" "\$@" >>"$HA_LOG" 2>&1 ||
        echo "\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) conntrackd \$* failed" >>"$HA_LOG"
}
case \$state in
master)
    ct -c   # commit the external cache (the peer's flows) to the kernel
    ct -f   # flush both caches
    ct -R   # resync the internal cache with the kernel table
    ct -B   # bulk update to the peer
    ;;
backup)
    ct -t   # shorten the kernel timers of flows that are now the peer's
    ct -n   # ask the master for a full resync
    ;;
fault)
    ct -t
    ;;
esac
exit 0
EOF
}

# install FILE MODE GENERATOR: print the file; write it if it differs.
# CHANGED lists what was (re)written.
CHANGED=()
install_file() {
    local f=$1 mode=$2 gen=$3 new
    new=$("$gen")
    echo "# ---- $f (mode $mode)"
    sed 's/^/    /' <<<"$new"
    if [[ -f $f ]] && [[ $(cat "$f") == "$new" ]] && [[ $(stat -c %a "$f") == "$mode" ]]; then
        echo "# ---- unchanged"
        return 0
    fi
    CHANGED+=("$f")
    ((DRY)) && return 0
    printf '%s\n' "$new" >"$f.tmp"
    chmod "$mode" "$f.tmp"
    mv -f "$f.tmp" "$f"
}

changed() { local c; for c in "${CHANGED[@]}"; do [[ $c == "$1" ]] && return 0; done; return 1; }

# ---------------------------------------------------------------- up

up() {
    local v
    for v in IN_IF OUT_IF IN_VIP OUT_VIP IN_PEER OUT_PEER SYNC_IF SYNC_PEER; do
        [[ -n ${!v} ]] || die "up: --$(tr 'A-Z_' 'a-z-' <<<"$v" | sed 's/-if$/-iface/') is required"
    done
    [[ $IN_VIP == */* && $OUT_VIP == */* ]] || die "--in-vip/--out-vip take ADDRESS/PREFIXLEN"
    ipv4 "${IN_VIP%/*}" && ipv4 "${OUT_VIP%/*}" || die "virtual addresses must be IPv4 (see deploy/README.md for IPv6)"
    ipv4 "$IN_PEER" && ipv4 "$OUT_PEER" && ipv4 "$SYNC_PEER" || die "peers must be IPv4 addresses"
    [[ $PRIO =~ ^[0-9]+$ ]] && ((PRIO >= 1 && PRIO <= 254)) || die "bad --priority '$PRIO' (1..254)"
    [[ $VRID =~ ^[0-9]+$ ]] && ((VRID >= 1 && VRID <= 254)) || die "bad --vrid '$VRID' (1..254)"
    [[ $ADVERT =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad --advert '$ADVERT'"
    [[ $CHECK_INT =~ ^[0-9]+$ && $CHECK_FALL =~ ^[0-9]+$ && $CHECK_RISE =~ ^[0-9]+$ &&
        $CHECK_TIMEOUT =~ ^[0-9]+$ ]] && ((CHECK_TIMEOUT >= 1)) ||
        die "--check-interval, --check-fall, --check-rise, --check-timeout take whole numbers"
    [[ -n $IN_SRC ]] || IN_SRC=$(own_addr "$IN_IF" "$IN_VIP")
    [[ -n $OUT_SRC ]] || OUT_SRC=$(own_addr "$OUT_IF" "$OUT_VIP")
    [[ -n $SYNC_SRC ]] || SYNC_SRC=$(own_addr "$SYNC_IF" "")
    [[ -n $IN_SRC && -n $OUT_SRC && -n $SYNC_SRC ]] ||
        die "no IPv4 address of this box on $IN_IF, $OUT_IF or $SYNC_IF (give --in-src/--out-src/--sync-src)"
    command -v keepalived >/dev/null || die "keepalived not found (apt-get install keepalived)"
    command -v conntrackd >/dev/null || die "conntrackd not found (apt-get install conntrackd)"

    ((DRY)) || { mkdir -p "$DIR"; chmod 755 "$DIR"; }
    install_file "$NOTIFY" 755 notify_sh
    install_file "$CT_CONF" 644 conntrackd_conf
    install_file "$KA_CONF" 644 keepalived_conf
    if ! ((DRY)); then
        # keepalived -t prints nothing on success; its complaints are fatal here
        if ! keepalived -t -f "$KA_CONF" >"$DIR/keepalived-check.out" 2>&1; then
            cat "$DIR/keepalived-check.out" >&2
            die "keepalived -t rejects $KA_CONF"
        fi
    fi

    # conntrackd first: the notify script of the first transition talks to it
    if ((DRY)) || ! alive_ct; then
        [[ -e $CT_LOCK ]] && ! alive_ct && run rm -f "$CT_LOCK"   # left by a crash
        run conntrackd -C "$CT_CONF" -d
        ((DRY)) || wait_for alive_ct 5 || die "conntrackd did not start (log: $CT_LOG)"
    elif changed "$CT_CONF"; then
        run conntrackd -C "$CT_CONF" -k
        wait_for not_alive_ct 5 || die "conntrackd did not stop"
        run conntrackd -C "$CT_CONF" -d
        wait_for alive_ct 5 || die "conntrackd did not restart (log: $CT_LOG)"
        # its caches went with it: ask the peer for its flows again
        run conntrackd -C "$CT_CONF" -n
    else
        echo "# conntrackd already running with this config"
    fi

    if ! ((DRY)) && ! alive "$SUP_PID" && alive "$KA_PID"; then
        die "keepalived (pid $(cat "$KA_PID")) runs without pair.sh's supervisor: pair.sh down, then up"
    fi
    if ((DRY)) || ! alive "$SUP_PID"; then
        if ((SYSTEMD)); then
            run systemctl enable --now proxyd-ha.service
        else
            # the supervisor runs keepalived (-n: in the foreground, its
            # output, -l, in the log file) and restarts it when it dies
            echo "+ setsid $SELF supervise --dir $DIR >>$KA_LOG 2>&1 &"
            ((DRY)) || setsid "$SELF" supervise --dir "$DIR" >>"$KA_LOG" 2>&1 </dev/null &
        fi
        ((DRY)) || wait_for ka_running 5 || die "keepalived did not start (log: $KA_LOG)"
    elif changed "$KA_CONF" || changed "$NOTIFY"; then
        run kill -HUP "$(cat "$KA_PID")"
    else
        echo "# keepalived already running with this config"
    fi
}

alive_ct() { conntrackd -C "$CT_CONF" -s >/dev/null 2>&1; }
not_alive_ct() { ! alive_ct; }
ka_running() { alive "$KA_PID" && alive "$KA_VRRP_PID"; }
wait_for() { # PREDICATE SECONDS
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        "$1" && return 0
        sleep 0.05
    done
    return 1
}

# ---------------------------------------------------------------- down

down() {
    local pid i
    if alive "$SUP_PID"; then
        pid=$(cat "$SUP_PID")
        # it stops keepalived, which removes its virtual addresses; under
        # systemd, through systemd (which would start it again)
        if [[ $(systemctl show -p MainPID --value proxyd-ha.service 2>/dev/null) == "$pid" ]]; then
            run systemctl stop proxyd-ha.service
        else
            run kill -TERM "$pid"
        fi
        for ((i = 0; i < 200; i++)); do running "$pid" || break; sleep 0.05; done
        running "$pid" && die "the supervisor (pid $pid) did not stop within 10 s"
    fi
    if alive "$KA_PID"; then
        pid=$(cat "$KA_PID")
        # keepalived removes its virtual addresses as it stops
        run kill -TERM "$pid"
        for ((i = 0; i < 100; i++)); do running "$pid" || break; sleep 0.05; done
        running "$pid" && die "keepalived (pid $pid) did not stop within 5 s"
    fi
    if [[ -f $CT_CONF ]] && alive_ct; then
        run conntrackd -C "$CT_CONF" -k
        wait_for not_alive_ct 5 || die "conntrackd did not stop"
    fi
    return 0
}

# ---------------------------------------------------------------- status

status() {
    echo "=== keepalived: $(ka_running && echo "running (pid $(cat "$KA_PID"))" || echo "not running")," \
        "supervisor: $(alive "$SUP_PID" && echo "running (pid $(cat "$SUP_PID"))" || echo "not running")"
    [[ -f $STATE_FILE ]] && echo "state file $STATE_FILE: $(cat "$STATE_FILE")"
    [[ -f $HA_LOG ]] && { echo "last transitions:"; tail -n 5 "$HA_LOG"; }
    [[ -f $KA_CONF ]] && awk '/^vrrp_instance/ { i = $2 } /dev / && i { print "  " i ": " $1 " on " $3 }' "$KA_CONF" |
        while read -r name addr _ dev; do
            if [[ $(ip -4 -o addr show dev "$dev" 2>/dev/null) == *" inet $addr "* ]]; then
                echo "  $name $addr on $dev: held here"
            else
                echo "  $name $addr on $dev: not here"
            fi
        done
    echo "=== conntrackd: $(alive_ct && echo running || echo "not running")"
    if alive_ct; then
        conntrackd -C "$CT_CONF" -s cache 2>/dev/null | sed 's/^/  /' | head -n 20
    fi
}

# ---------------------------------------------------------------- supervise

say() { echo "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) pair.sh supervise: $*"; }

# keepalived's liveness (keepalived.conf's vrrp_script heartbeat): a
# keepalived whose VRRP process has not touched HEARTBEAT for HANG_MS (or
# not yet, START_MS after it was started) is hung. Times are read from
# /proc/uptime (monotonic: a step of the wall clock kills nothing); the
# heartbeat's mtime is only compared with its previous value.
HANG_MS=3000
START_MS=10000
uptime_ms() { local up; read -r up _ </proc/uptime; echo $((10#${up//[.,]/} * 10)); }
hb_mtime() { stat -c %.9Y "$HEARTBEAT" 2>/dev/null || echo none; }

# the virtual addresses of keepalived.conf, as "ADDR/LEN DEV" lines
vips() { awk '/^vrrp_instance/ { i = 1 } i && /dev / && $1 ~ /\// { print $1, $3 }' "$KA_CONF"; }

# After keepalived died: its VRRP child, if it outlived it, would go on
# advertising; the addresses it left would stay (two masters once the peer
# takes over). STATE: what notify.sh is told (fault: died; stop: stopped).
ka_cleanup() {
    local state=$1 pid i addr dev
    if alive "$KA_VRRP_PID"; then
        pid=$(cat "$KA_VRRP_PID")
        # a child that got its parent's death signal is leaving by itself
        for ((i = 0; i < 20; i++)); do running "$pid" || break; sleep 0.05; done
        if running "$pid" && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == keepalived ]]; then
            run kill -KILL "$pid"
        fi
    fi
    # keepalived takes a pid file naming a process, even a zombie, for a
    # keepalived already running, and exits: the restart would fail
    alive "$KA_PID" || rm -f "$KA_PID"
    alive "$KA_VRRP_PID" || rm -f "$KA_VRRP_PID"
    [[ -f $KA_CONF ]] || return 0
    while read -r addr dev; do
        if [[ $(ip -4 -o addr show dev "$dev" 2>/dev/null) == *" inet $addr "* ]]; then
            run ip addr del "$addr" dev "$dev" || true
        fi
    done < <(vips)
    if [[ -x $NOTIFY ]] && [[ $(cut -d' ' -f1 "$STATE_FILE_NOW" 2>/dev/null) != "$state" ]]; then
        run "$NOTIFY" SUPERVISOR PROXYD "$state" || true
    fi
}

# the state file notify.sh writes (from notify.sh itself: supervise and
# cleanup take only --dir)
state_file_of() { sed -nE 's/^tmp="(.*)\.tmp\.\$\$"$/\1/p' "$NOTIFY" 2>/dev/null || true; }

supervise() {
    local ka="" rc stopping=0 n=0 since watch hung hb hb_last t t_last limit vp
    [[ -f $KA_CONF ]] || die "no $KA_CONF: run pair.sh up first"
    if alive "$SUP_PID" && [[ $(cat "$SUP_PID") != "$$" ]]; then
        die "a supervisor runs already (pid $(cat "$SUP_PID"))"
    fi
    echo "$$" >"$SUP_PID"
    trap 'stopping=1; [[ -z $ka ]] || kill -TERM "$ka" 2>/dev/null' TERM INT
    since=$SECONDS
    while :; do
        say "starting keepalived"
        keepalived -n -l -D -G -P -f "$KA_CONF" -p "$KA_PID" -r "$KA_VRRP_PID" </dev/null &
        ka=$!
        # its heartbeat is watched if its config has one (a keepalived.conf
        # of an older pair.sh has not: run up again)
        watch=0 hung=0
        grep -q '^vrrp_script heartbeat {$' "$KA_CONF" && watch=1
        hb_last=$(hb_mtime) t_last=$(uptime_ms) limit=$START_MS
        # until it exits (a zombie: not running), also while stopping: a
        # hung keepalived ignores the SIGTERM
        while running "$ka"; do
            # (wait returns early when a signal is trapped)
            sleep 0.25 &
            wait $! || true
            ((watch && !hung)) || continue
            hb=$(hb_mtime) t=$(uptime_ms)
            if [[ $hb != "$hb_last" ]]; then
                hb_last=$hb t_last=$t limit=$HANG_MS
                continue
            fi
            ((t - t_last > limit)) || continue
            say "keepalived (pid $ka) not answering: no heartbeat for $(((t - t_last) / 1000)).$(((t - t_last) % 1000 / 100)) s: killing it"
            hung=1
            vp=$(cat "$KA_VRRP_PID" 2>/dev/null || true)
            if [[ $vp =~ ^[0-9]+$ ]] && running "$vp" && [[ $(cat "/proc/$vp/comm" 2>/dev/null) == keepalived ]]; then
                run kill -KILL "$ka" "$vp" || true
            else
                run kill -KILL "$ka" || true
            fi
        done
        rc=0; wait "$ka" || rc=$?
        ka=""
        if ((stopping)); then
            say "keepalived stopped (status $rc)"
            ka_cleanup stop
            break
        fi
        if ((hung)); then
            say "keepalived killed, hung (status $rc): removing its addresses, state fault"
        else
            say "keepalived died (status $rc): removing its addresses, state fault"
        fi
        ka_cleanup fault
        # 1 s, as systemd's RestartSec; 10 s after 5 deaths within a minute
        ((SECONDS - since < 60)) || { n=0; since=$SECONDS; }
        n=$((n + 1))
        sleep "$( ((n > 5)) && echo 10 || echo 1)" &
        wait $! || true
        ((stopping)) && break
    done
    rm -f "$SUP_PID"
}

STATE_FILE_NOW=$(state_file_of)

case $CMD in
    up) up ;;
    down) down ;;
    status) status ;;
    supervise) supervise ;;
    cleanup) ka_cleanup stop ;;
esac
