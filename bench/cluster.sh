#!/usr/bin/env bash
# bench/cluster.sh: the `cluster` row (issue 37): proxyd's CPU per request
# on each node of a 3-node cluster (deploy/cluster/lab.sh) against a single
# proxyd's, measured so that only the number of proxyds serving differs:
#   - one lab, `up 3`, for both: the single proxyd is one node of that
#     lab with every new connection routed to it (a router rule marks
#     them for that node's table, as the lab's data port rules do), the
#     other two running idle; the cluster is the same lab with the rule
#     gone (ECMP over the 3 nodes). Same processes, namespaces, router,
#     server, same policy, same background load of the machine. The
#     single node is node K mod 3 in round K: a round leaves its nodes
#     the TIME_WAIT sockets of its connections (60 s; the single node all
#     of them), and with node 1 alone in every single round it cost more
#     each round (53 to 86 µs) and more than nodes 2 and 3 in the cluster
#     rounds: rotated, no node carries more of them into the cluster
#     rounds than another;
#   - interleaved rounds: single, cluster, single, cluster... (-r ROUNDS
#     of each), so that whatever else the machine does (other builds and
#     tests) falls on both alike; the row is the medians, and each round's
#     ratio to the single round before it is printed too;
#   - the same work in each round: N HTTP requests without keep-alive
#     (ab, a 4 KB file, the http service on port 80) at ab -c C, default
#     1: one request at a time, so each proxyd, alone or one of three,
#     handles one connection per wake-up (no batching for one side only)
#     and ab, nginx and the proxyds never ask for more than the 2 cores;
#   - per node: the CPU of its proxyd's threads (the first field of
#     /proc/PID/task/*/schedstat, ns, before and after the round) divided
#     by the requests that node served in the round (responses 200 of its
#     http service, from its own /metrics; not assumed N/3). "net" takes
#     off the node's idle CPU (its supervisor's health checks scrape
#     /metrics every second, timers), measured over 3 s with no traffic
#     before the rounds and scaled to each round's duration.
# Prints the rounds, then one table: the single proxyd, each node and the
# 3 nodes summed, µs per request (medians) and the ratio to the single
# proxyd (the target: each node within 10 % of it); "paired" is the median
# over the rounds of each cluster round's ratio to the single round just
# before it (the machine's load drifts less within a pair than over a run).
#
#   bench/cluster.sh [--quick] [-n N] [-c C] [-r ROUNDS] [--md FILE]
#                 (root; --quick: N=3000, else 20000 per round; ROUNDS 5;
#                 --md: the table in markdown too, into FILE)
# PROXYD: the binary (default build/proxyd), R66PEER as lab.sh.
# bench/run runs it (its cluster row, BENCH_CLUSTER=1, -n BENCH_CLUSTER_N)
# and adds the markdown table to its results.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LAB=$REPO/deploy/cluster/lab.sh
N=20000 C=1 R=5 MD=""
usage() { echo "usage: bench/cluster.sh [--quick] [-n N] [-c C] [-r ROUNDS] [--md FILE]" >&2; exit 2; }
while (($#)); do
    case $1 in
    --quick) N=3000 ;;
    -n) N=$2; shift ;;
    -c) C=$2; shift ;;
    -r) R=$2; shift ;;
    --md) MD=$2; shift ;;
    *) usage ;;
    esac
    shift
done
[[ $N =~ ^[1-9][0-9]*$ && $C =~ ^[1-9][0-9]*$ && $R =~ ^[1-9][0-9]*$ ]] || usage
[[ $EUID == 0 ]] || { echo "bench/cluster.sh: needs root (network namespaces)" >&2; exit 2; }
export PROXYD=${PROXYD:-$REPO/build/proxyd} R66PEER=${R66PEER:-$REPO/build/r66peer}
export LAB_ID=bc$$ LAB_DIR=/run/proxyd-lab/bc$$
trap '"$LAB" down >/dev/null 2>&1 || true' EXIT

cpu_ns() { # I: node I's proxyd threads' CPU so far, ns
    local f t=0 a
    for f in /proc/"$(cat "$LAB_DIR/n$1/proxyd.pid")"/task/*/schedstat; do
        read -r a _ <"$f" || continue
        t=$((t + a))
    done
    echo "$t"
}
served() { # I: responses 200 of node I's http service
    "$LAB" node "$1" curl -s --max-time 3 http://127.0.0.1:9180/metrics |
        awk '/^proxyd_http_responses_total\{/ && /service="http"/ && /code="200"/ { s += $NF } END { printf "%d\n", s }'
}
# single -I|-D I: every new connection to the service address to node I
# (mark I: the router's table 100+I, the lab's pinning table for node I),
# or no more
single() {
    "$LAB" router iptables -w -t mangle "$1" PREROUTING -i r0 -d 198.18.0.80 -p tcp --dport 80 \
        -m conntrack --ctstate NEW -m comment --comment "bench: single proxyd" -j MARK --set-mark "$2"
}
med() { # [FORMAT] < numbers: their median (FORMAT: printf's, default %.1f)
    sort -g | awk -v f="${1:-%.1f}\n" '{ v[NR] = $1 } END { printf f, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
us() { awk -v c="$1" -v r="$2" 'BEGIN { printf "%.1f", r ? c / r / 1000 : 0 }'; } # NS REQUESTS

out=$("$LAB" up 3 2>/dev/null)
SRV=$(sed -n 's/^server=//p' <<<"$out")
head -c 4096 /dev/urandom >"$(sed -n 's/^root=//p' <<<"$out")/f.bin"
"$LAB" client ab -q -n 500 -c 3 "http://$SRV/f.bin" >/dev/null # warm up
declare -A IDLE=()  # node I's idle CPU, ns per second
for i in 1 2 3; do IDLE[$i]=$(cpu_ns "$i"); done
t0=$(date +%s%N)
sleep 3
dt=$(($(date +%s%N) - t0))
for i in 1 2 3; do IDLE[$i]=$(awk -v a="${IDLE[$i]}" -v b="$(cpu_ns "$i")" -v d="$dt" 'BEGIN { printf "%d", (b - a) / (d / 1e9) }'); done

# round MODE K: N requests, single (node K mod 3 alone) or cluster;
# appends "raw net requests cpu netcpu" (µs per request, ns) to
# $T_/MODE.node.I for each node that served any, and to $T_/single.all
T_=$(mktemp -d /tmp/bench-cluster.XXXXXX)
trap '"$LAB" down >/dev/null 2>&1 || true; rm -rf "$T_"' EXIT
round() {
    local mode=$1 k=$2 i c0=() r0=() t0 dt cpu req net line="" ratio one=$((($2 - 1) % 3 + 1))
    [[ $mode == cluster ]] || single -I "$one"
    for i in 1 2 3; do c0[i]=$(cpu_ns "$i") r0[i]=$(served "$i"); done
    t0=$(date +%s%N)
    "$LAB" client ab -q -n "$N" -c "$C" "http://$SRV/f.bin" >"$T_/ab.out"
    dt=$(($(date +%s%N) - t0))
    [[ $mode == cluster ]] || single -D "$one"
    grep -q "^Failed requests: *0$" "$T_/ab.out" || { echo "ab failed: $(grep Failed "$T_/ab.out")" >&2; exit 1; }
    for i in 1 2 3; do
        cpu=$(($(cpu_ns "$i") - c0[i]))
        req=$(($(served "$i") - r0[i]))
        net=$(awk -v c="$cpu" -v z="${IDLE[$i]}" -v d="$dt" 'BEGIN { printf "%d", c - z * d / 1e9 }')
        line+=" n$i: $req req $(us "$cpu" "$req")/$(us "$net" "$req") µs"
        ((req)) || continue
        echo "$(us "$cpu" "$req") $(us "$net" "$req") $req $cpu $net" >>"$T_/$mode.node.$i"
        if [[ $mode == single ]]; then
            tail -n 1 "$T_/$mode.node.$i" >>"$T_/single.all"
            continue
        fi
        # this round's ratio to the single round before it
        ratio=$(awk -v a="$(us "$cpu" "$req")" -v b="$LAST_SINGLE" 'BEGIN { printf "%.2f", a / b }')
        line+=" (x$ratio)"
        echo "$ratio" >>"$T_/ratio.node.$i"
    done
    [[ $mode == cluster ]] || LAST_SINGLE=$(tail -n 1 "$T_/single.all" | cut -d' ' -f1)
    printf 'round %d %-7s %5.1f s%s\n' "$k" "$mode" "$(awk -v d="$dt" 'BEGIN { printf "%.1f", d / 1e9 }')" "$line"
    WALL[$mode]=$(awk -v a="${WALL[$mode]:-0}" -v d="$dt" 'BEGIN { printf "%.1f", a + d / 1e9 }')
}
declare -A WALL=()
LAST_SINGLE=0
echo "N=$N requests a round (ab -c $C, no keep-alive, 4 KB), $R rounds each, interleaved; lab.sh up 3, single = node K mod 3 alone in round K; µs/req raw/net"
for ((k = 1; k <= R; k++)); do
    round single "$k"
    round cluster "$k"
done

col() { # FILE FIELD: the median of FIELD (1 raw, 2 net) over the rounds in FILE
    cut -d' ' -f"$2" "$T_/$1" | med
}
summed() { # FIELD (4 cpu, 5 net cpu): the cluster rounds' median of all 3 nodes' CPU / N, µs
    local k
    for ((k = 1; k <= R; k++)); do
        awk -v f="$1" -v k="$k" -v n="$N" '{ c[FNR] = $f } FNR == k { s += c[FNR] } END { printf "%.1f\n", s / n / 1000 }' \
            "$T_/cluster.node.1" "$T_/cluster.node.2" "$T_/cluster.node.3"
    done | med
}
ONE_RAW=$(col single.all 1) ONE_NET=$(col single.all 2)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
ROWS=("one proxyd|$(($(cut -d' ' -f3 "$T_/single.all" | paste -sd+)))|$ONE_RAW|$ONE_NET|1.00")
for i in 1 2 3; do
    ROWS+=("3 nodes: node $i|$(($(cut -d' ' -f3 "$T_/cluster.node.$i" | paste -sd+)))|$(col "cluster.node.$i" 1)|$(col "cluster.node.$i" 2)|$(med %.2f <"$T_/ratio.node.$i")")
done
ROWS+=("3 nodes: summed|$((N * R))|$(summed 4)|$(summed 5)|-")
echo "wall: single ${WALL[single]} s, cluster ${WALL[cluster]} s (all rounds); requests: all rounds; µs/req: medians of the rounds"
printf '%-8s %-18s %9s %10s %6s %10s %6s %7s\n' row proxyd requests "raw µs/req" "vs 1" "net µs/req" "vs 1" paired
for r in "${ROWS[@]}"; do
    IFS='|' read -r name req raw net paired <<<"$r"
    printf '%-8s %-18s %9s %10s %6s %10s %6s %7s\n' cluster "$name" "$req" "$raw" "$(ratio "$raw" "$ONE_RAW")" \
        "$net" "$(ratio "$net" "$ONE_NET")" "$paired"
done
if [[ -n $MD ]]; then
    {
        echo "## Cluster (issue 37): proxyd CPU per request, one proxyd vs 3 lab nodes"
        echo
        echo "One lab (deploy/cluster/lab.sh up 3): single = every connection routed to one node (node K mod 3 in round K), cluster = ECMP over the 3 nodes; $R rounds of each, interleaved, N=$N HTTP requests a round (ab -c $C, no keep-alive, 4 KB); each node's CPU (schedstat) over the requests it served (its /metrics), medians of the rounds. Target: each node within 10 % of one proxyd (vs 1 <= 1.10). net: the node's idle CPU taken off; paired: the median of each cluster round's ratio to the single round before it."
        echo
        echo "| row | requests | raw us/req | vs 1 | net us/req | vs 1 | paired |"
        echo "|---|---|---|---|---|---|---|"
        for r in "${ROWS[@]}"; do
            IFS='|' read -r name req raw net paired <<<"$r"
            echo "| $name | $req | $raw | $(ratio "$raw" "$ONE_RAW") | $net | $(ratio "$net" "$ONE_NET") | $paired |"
        done
    } >"$MD"
fi
