#!/usr/bin/env bash
# Cluster-wide state in the cluster lab (deploy/cluster/lab.sh):
#   1. `lab.sh up 3`: every node says its own name (proxyd_node_info) and
#      shows the three members up, as the router's bgpd knows them (the
#      lab's members file, <cluster members-file>), in /metrics and /status.
#   2. A per-partner quota across the nodes: each node's ftp service gets
#      quota-transfers=QUOTA for anonymous (a reload), then PARALLEL
#      downloads at once from the client, spread over the nodes by the
#      router: exactly QUOTA of them are served (the quota store on the
#      router counts for all nodes: never more than the quota plus one
#      transfer), the others get a 550, each refusal logged (by=cluster) on
#      the node that refused it, and the nodes' counts add up.
#   3. `lab.sh drain 2`: nodes 1 and 3 show node 2 draining (its BGP
#      session up, nothing announced); `lab.sh kill 3`: node 1 shows node 3
#      gone.
#   4. `lab.sh down` leaves no namespace.
# Needs root, FRR (frr), nginx, vsftpd, redis-server, curl, python3,
# bench/r66peer; ~20 s.
set -euo pipefail
# shellcheck source=cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
QUOTA=6
PARALLEL=24
cluster_setup s redis-server

lab_diag_more() {
    echo "# members file"; cat "$LAB_DIR/members" 2>&1
    echo "# members poller"; tail -n 5 "$LAB_DIR/router/members.log" 2>&1
}

# members_of I: the members node I shows, "NAME=STATE ...", sorted
members_of() {
    node_metrics "$1" | sed -nE 's/^proxyd_cluster_member\{node="([^"]*)",state="([^"]*)"\} 1$/\1=\2/p' |
        sort | tr '\n' ' '
}
# wait_members I WANT: node I shows WANT within 10 s
wait_members() {
    local k got
    for ((k = 0; k < 100; k++)); do
        got=$(members_of "$1")
        [[ $got == "$2" ]] && return 0
        sleep 0.1
    done
    fail "node $1 shows members '$got', not '$2'"
}
n() { echo "$LAB_ID-n$1"; }

# ---- 1. three nodes, each knows the others
lab_up 3
for i in 1 2 3; do
    # (its admin endpoint answers within a scrape or two of lab.sh up)
    for ((k = 0; k < 50; k++)); do
        node_metrics "$i" | grep -qx "proxyd_node_info{node=\"$(n "$i")\"} 1" && break
        sleep 0.2
    done
    ((k < 50)) || fail "node $i does not say its name"
    wait_members "$i" "$(n 1)=up $(n 2)=up $(n 3)=up "
done
lab node 1 curl -s --max-time 2 "http://127.0.0.1:9180/status" >"$T/status.json"
python3 - "$T/status.json" "$(n 1)" "$LAB_ID" <<'EOF' || fail "node 1's /status: $(cat "$T/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["node"] == sys.argv[2], d["node"]
got = [(m["node"], m["state"]) for m in d["cluster"]["members"]]
assert got == [("%s-n%d" % (sys.argv[3], i), "up") for i in (1, 2, 3)], got
EOF
info "every node shows the three members up (the router's bgpd)"

# ---- 2. one quota for the whole cluster
head -c 64K /dev/urandom >"$ROOT/q.bin"
chmod 644 "$ROOT/q.bin"
for i in 1 2 3; do
    f=$LAB_DIR/n$i/policy/ftp.xml
    grep -q '/>$' <(grep '<ftp ' "$f") || fail "node $i's ftp.xml: no <ftp .../> to add a rule to"
    sed -i -E "s|(<ftp [^>]*)/>|\\1><user name=\"anonymous\" quota-transfers=\"$QUOTA\" action=\"accept\"/></ftp>|" "$f"
    before=$(grep -c 'reload done' "$LAB_DIR/n$i/proxyd.log" || true)
    kill -HUP "$(cat "$LAB_DIR/n$i/proxyd.pid")"
    for ((k = 0; k < 100; k++)); do
        (($(grep -c 'reload done' "$LAB_DIR/n$i/proxyd.log" || true) > before)) && break
        sleep 0.05
    done
    ((k < 100)) || fail "node $i did not reload"
done
lab client timeout 60 python3 "$CLUSTER_LIB_DIR/../integration/ftp_parallel.py" "$SERVER" 21 q.bin "$PARALLEL" |
    cut -d" " -f2 >"$T/codes"
info "replies: $(sort "$T/codes" | uniq -c | tr '\n' ' ')"
served=$(grep -c '^226$' "$T/codes" || true)
refused=$(grep -c '^550$' "$T/codes" || true)
assert_eq "$((served + refused))" "$PARALLEL" "every download served or refused with 550"
((served <= QUOTA + 1)) || fail "the cluster served $served downloads, quota $QUOTA (+1)"
assert_eq "$served" "$QUOTA" "downloads the cluster served"
logged=0 ok=0 nodes_refusing=0
for i in 1 2 3; do
    # the log thread writes within 50 ms: bounded wait for the last lines
    for ((k = 0; k < 40; k++)); do
        r=$(grep -cE "node=$(n "$i") .*ftp-quota user=anonymous kind=transfers used=$QUOTA limit=$QUOTA cmd=RETR verdict=refused by=cluster" \
            "$LAB_DIR/n$i/proxyd.log" || true)
        c=$(node_metrics "$i" | awk '$1 == "proxyd_quota_store_requests_total{result=\"refused\"}" { print $2 }')
        [[ $r == "${c:-x}" ]] && break
        sleep 0.05
    done
    assert_eq "$r" "$c" "node $i: refusals logged and counted"
    o=$(node_metrics "$i" | awk '$1 == "proxyd_quota_store_requests_total{result=\"ok\"}" { print $2 }')
    info "node $i: ${o:-0} counted, $r refused"
    logged=$((logged + r)) ok=$((ok + ${o:-0}))
    ((r > 0)) && nodes_refusing=$((nodes_refusing + 1))
done
assert_eq "$logged" "$refused" "refusals logged over the nodes"
assert_eq "$ok" "$QUOTA" "transfers the store counted over the nodes"
((nodes_refusing >= 2)) || fail "only $nodes_refusing node(s) refused: the downloads did not spread"

# ---- 3. drain node 2, kill node 3
lab drain 2 5 >/dev/null || fail "lab.sh drain 2 failed"
wait_members 1 "$(n 1)=up $(n 2)=draining $(n 3)=up "
wait_members 3 "$(n 1)=up $(n 2)=draining $(n 3)=up "
info "nodes 1 and 3 show node 2 draining"
lab kill 3 2>/dev/null
wait_members 1 "$(n 1)=up $(n 2)=draining $(n 3)=gone "
info "node 1 shows node 3 gone"

# ---- 4. down
lab_down
info "ok"
