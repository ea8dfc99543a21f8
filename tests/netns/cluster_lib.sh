# cluster_lib.sh: what the tests of the cluster lab (deploy/cluster/lab.sh)
# share, sourced by them: the checks and the lab's own folder and name
# (cluster_setup), lab, a bounded wait (wait_cond), lab_up, held
# connections (hold_start, cluster_hold.py), and the
# cleanup that prints the lab's state when a test fails and takes the lab
# down.  A test may define lab_diag_more (more state to print on failure).
# Sources integration/lib.sh.
# shellcheck shell=bash
CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../integration/lib.sh
source "$CLUSTER_LIB_DIR/../integration/lib.sh"

LAB=${LAB:-$REPO_DIR/deploy/cluster/lab.sh}   # (LAB=: another lab.sh, e.g. an older one)
FRR_DIR=${FRR_DIR:-/usr/lib/frr}
: "${R66PEER:=$REPO_DIR/build/r66peer}"

# cluster_setup LETTER CMD...: root, FRR, r66peer, lab.sh and CMD... are
# there (else skip or fail, as integration/lib.sh's setup would), then
# setup; the lab is named LETTER and this shell's pid (LAB_ID), under $T
# (LAB_DIR); the cleanup trap is set
cluster_setup() {
    local letter=$1
    shift
    [[ $EUID == 0 ]] || skip "needs root (network namespaces, FRR, vsftpd)"
    need_cmds ip iptables curl nginx vsftpd vtysh python3 sha256sum "$@"
    [[ -x $FRR_DIR/bgpd && -x $FRR_DIR/zebra ]] || skip "FRR not installed ($FRR_DIR/bgpd; Debian package frr)"
    [[ -x $R66PEER ]] || fail "r66peer not found: $R66PEER (build target r66peer, or set R66PEER=)"
    [[ -x $LAB ]] || fail "lab script not found or not executable: $LAB"
    setup
    export LAB_ID="$letter$$" LAB_DIR="$T/lab" PROXYD R66PEER
    PFX=pxcl-$LAB_ID
    ! ip netns list | grep -q "^$PFX-" || fail "namespaces $PFX-* exist already"
    trap lab_cleanup EXIT
}

lab() { "$LAB" "$@"; }

# lab_up ARGS...: lab.sh up ARGS; sets SERVER, ROOT, R66DIR from what it prints
lab_up() {
    lab up "$@" >"$T/up.out" 2>"$T/up.err" || fail "lab.sh up $*: $(tail -n 5 "$T/up.err")"
    SERVER=$(sed -n 's/^server=//p' "$T/up.out")
    ROOT=$(sed -n 's/^root=//p' "$T/up.out")
    R66DIR=$(sed -n 's/^r66dir=//p' "$T/up.out")
    [[ -n $SERVER && -d $ROOT && -d $R66DIR ]] ||
        fail "lab.sh up $* printed no server=, and no root= and r66dir= that exist: $(cat "$T/up.out")"
}

wait_cond() { # TIMEOUT_MS CMD...: bounded wait, 20 ms steps; sets WAITED_MS
    local t=$1 t0
    shift
    t0=$(now_ms)
    until "$@"; do
        (($(now_ms) - t0 < t)) || return 1
        sleep 0.02
    done
    # shellcheck disable=SC2034 # the tests read it
    WAITED_MS=$(($(now_ms) - t0))
}

# r66_round K: an R66 SEND of $T/cli/up.bin (partner hosta, rule in) and a
# RECV of down.bin from r66dir= into $T/out (hostb, rule out) from the
# client, each whole at the other end (sha256)
r66_round() {
    local k=$1
    lab client "$R66PEER" client --connect "$SERVER:6666" --id hosta:pwA --partner serverb:pwB \
        --timeout 30 --rule in --mode 1 --send "$T/cli/up.bin" >"$T/r66.out" 2>&1 ||
        fail "R66 SEND $k: $(tail -n 3 "$T/r66.out")"
    assert_eq "$(sha256sum <"$R66DIR/up.bin" | cut -d' ' -f1)" "$(sha256sum <"$T/cli/up.bin" | cut -d' ' -f1)" "R66 SEND $k: sha256 at the server"
    rm -f "$R66DIR/up.bin"
    lab client "$R66PEER" client --connect "$SERVER:6666" --id hostb:pwb --partner serverb:pwB \
        --timeout 30 --rule out --mode 2 --recv down.bin --dir "$T/out" >"$T/r66.out" 2>&1 ||
        fail "R66 RECV $k: $(tail -n 3 "$T/r66.out")"
    assert_eq "$(sha256sum <"$T/out/down.bin" | cut -d' ' -f1)" "$(sha256sum <"$R66DIR/down.bin" | cut -d' ' -f1)" "R66 RECV $k: sha256 at the client"
    rm -f "$T/out/down.bin"
}

# node_metrics I: node I's /metrics
# hold_start N: N keep-alive connections from the client namespace
# through the plug service (cluster_hold.py), each with one request
# answered, all of them before it returns (HOLD=N); touching $T/go makes
# each ask again, and $T/hold.out ends with "ok=K broken=B".
hold_start() {
    HOLD=$1
    lab client python3 "$CLUSTER_LIB_DIR/cluster_hold.py" "$SERVER" "$HOLD" "$T/go" >"$T/hold.out" 2>"$T/hold.err" &
    track_pid $!
    held() { grep -q '^ready' "$T/hold.out"; }
    wait_cond 10000 held || fail "the $HOLD held connections did not all get an answer: $(cat "$T/hold.err")"
}

node_metrics() { lab node "$1" curl -s --max-time 2 "http://127.0.0.1:9180/metrics"; }

lab_diag() {
    local d
    {
        echo "---- [$TEST_NAME] lab state"
        lab status 2>&1
        echo "# router: ip route"; lab router ip route 2>&1
        echo "# router: mangle rules"; lab router iptables -w -t mangle -L -v -n -x 2>&1
        echo "# router: ip rule"; lab router ip rule 2>&1
        for d in "$LAB_DIR"/n*; do
            [[ -d $d ]] || continue
            echo "# $d: proxyd.log (last 15)"; tail -n 15 "$d/proxyd.log" 2>/dev/null
        done
        echo "# vsftpd.log (last 10)"; tail -n 10 "$LAB_DIR/server/logs/vsftpd.log" 2>/dev/null
        echo "# r66peer.log (last 10)"; tail -n 10 "$LAB_DIR/server/logs/r66peer.log" 2>/dev/null
        for d in "$T"/*.err; do [[ -f $d ]] && echo "# $d" && tail -n 5 "$d"; done
        if declare -F lab_diag_more >/dev/null; then lab_diag_more; fi
    } >&2 2>&1
}

lab_cleanup() {
    local rc=$?
    set +e
    trap - EXIT TERM INT
    if ((rc != 0 && rc != 77)); then lab_diag; fi
    LAB_KEEP=1 lab down >/dev/null 2>&1
    (exit "$rc")
    _cleanup
}

# lab_down: lab.sh down leaves none of the lab's namespaces
lab_down() {
    local left
    LAB_KEEP=1 lab down
    left=$(ip netns list | awk -v p="$PFX-" 'index($1, p) == 1 { print $1 }' | tr '\n' ' ')
    [[ -z $left ]] || fail "namespaces left after lab.sh down: $left"
}
