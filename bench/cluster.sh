#!/usr/bin/env bash
# bench/cluster.sh: the `cluster` row (issue 37): proxyd's CPU per request
# in the cluster lab (deploy/cluster/lab.sh) with three nodes vs one, for
# the same fixed work: N HTTP requests without keep-alive (ab -c 8) through
# the http service on port 80. CPU: the sum over each node's proxyd threads
# of /proc/PID/task/*/schedstat's first field (ns) before and after the
# run; requests per node: its /metrics (responses 200 of the http service).
# Prints one table: per node and summed, µs per request and the ratio to
# the single proxyd (the target: each node within 10 % of it); "raw" is all
# the CPU during the run, "net" takes off what the node spends idle over
# as long a time (measured right after, no traffic: its supervisor's
# health checks scrape /metrics every second, timers), which a node
# taking a third of the requests pays per request three times over.
#
# The three nodes get -c 3C between them (C each, as the one proxyd gets
# C): a process's CPU per request depends on how many connections each
# wake-up finds, so the nodes are compared at the one proxyd's load;
# --same-total gives them C in all instead.
#
#   bench/cluster.sh [--quick] [-n N] [-c C] [--same-total] [--md FILE]
#                 (root; --quick: N=3000, else 20000; --md: the table in
#                 markdown too, into FILE)
# PROXYD: the binary (default build/proxyd), R66PEER as lab.sh.
# bench/run runs it (its cluster row, BENCH_CLUSTER=1, -n BENCH_CLUSTER_N)
# and adds the markdown table to its results.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LAB=$REPO/deploy/cluster/lab.sh
N=20000 C=8 MD="" SAME_TOTAL=0
while (($#)); do
    case $1 in
    --quick) N=3000 ;;
    -n) N=$2; shift ;;
    -c) C=$2; shift ;;
    --md) MD=$2; shift ;;
    --same-total) SAME_TOTAL=1 ;;
    *) echo "usage: bench/cluster.sh [--quick] [-n N] [-c C] [--same-total] [--md FILE]" >&2; exit 2 ;;
    esac
    shift
done
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

# run K: lab with K nodes, N requests; sets US[I] (µs/req of node I), REQ[I], SUM_US
declare -A US=() REQ=() CPU=() NET=() WALL=()
run() {
    local k=$1 i out srv c0 r0 cpu tot=0 ntot=0 t0 dt idle c=$C
    ((SAME_TOTAL)) || c=$((C * k))
    out=$("$LAB" up "$k" 2>/dev/null)
    srv=$(sed -n 's/^server=//p' <<<"$out")
    head -c 4096 /dev/urandom >"$(sed -n 's/^root=//p' <<<"$out")/f.bin"
    "$LAB" client ab -q -n 500 -c 8 "http://$srv/f.bin" >/dev/null # warm up
    declare -A c0=() r0=()
    for ((i = 1; i <= k; i++)); do c0[$i]=$(cpu_ns "$i") r0[$i]=$(served "$i"); done
    t0=$(date +%s%N)
    "$LAB" client ab -q -n "$N" -c "$c" "http://$srv/f.bin" >"/tmp/bench-cluster-$k.ab"
    dt=$(($(date +%s%N) - t0))
    grep -q "^Failed requests: *0$" "/tmp/bench-cluster-$k.ab" || { echo "ab failed: $(grep Failed "/tmp/bench-cluster-$k.ab")" >&2; exit 1; }
    for ((i = 1; i <= k; i++)); do
        cpu=$(($(cpu_ns "$i") - c0[$i]))
        REQ[$k.$i]=$(($(served "$i") - r0[$i]))
        CPU[$k.$i]=$cpu
        US[$k.$i]=$(awk -v c="$cpu" -v r="${REQ[$k.$i]}" 'BEGIN { printf "%.1f", r ? c / r / 1000 : 0 }')
        tot=$((tot + cpu))
    done
    US[$k.sum]=$(awk -v c="$tot" -v r="$N" 'BEGIN { printf "%.1f", c / r / 1000 }')
    # idle: as long as the run took, no traffic
    for ((i = 1; i <= k; i++)); do c0[$i]=$(cpu_ns "$i"); done
    sleep "$(awk -v d="$dt" 'BEGIN { printf "%.3f", d / 1e9 }')"
    for ((i = 1; i <= k; i++)); do
        idle=$(($(cpu_ns "$i") - c0[$i]))
        NET[$k.$i]=$(awk -v c="${CPU[$k.$i]}" -v z="$idle" -v r="${REQ[$k.$i]}" 'BEGIN { printf "%.1f", r ? (c - z) / r / 1000 : 0 }')
        ntot=$((ntot + CPU[$k.$i] - idle))
    done
    NET[$k.sum]=$(awk -v c="$ntot" -v r="$N" 'BEGIN { printf "%.1f", c / r / 1000 }')
    WALL[$k]=$(awk -v d="$dt" 'BEGIN { printf "%.1f", d / 1e9 }')
    "$LAB" down >/dev/null 2>&1
}
run 1
run 3
row() { # NAME REQUESTS RAW NET
    printf '%-8s %-18s %9s %10s %6s %10s %6s\n' cluster "$1" "$2" "$3" \
        "$(awk -v a="$3" -v b="${US[1.1]}" 'BEGIN { printf "%.2f", a / b }')" "$4" \
        "$(awk -v a="$4" -v b="${NET[1.1]}" 'BEGIN { printf "%.2f", a / b }')"
}
CONC="ab -c $C for one proxyd, -c $((SAME_TOTAL ? C : 3 * C)) for 3 nodes"
echo "N=$N requests ($CONC, no keep-alive, 4 KB); wall: one proxyd ${WALL[1]} s, 3 nodes ${WALL[3]} s"
printf '%-8s %-18s %9s %10s %6s %10s %6s\n' row proxyd requests "raw µs/req" "vs 1" "net µs/req" "vs 1"
row "one proxyd" "${REQ[1.1]}" "${US[1.1]}" "${NET[1.1]}"
for i in 1 2 3; do row "3 nodes: node $i" "${REQ[3.$i]}" "${US[3.$i]}" "${NET[3.$i]}"; done
row "3 nodes: summed" "$N" "${US[3.sum]}" "${NET[3.sum]}"
if [[ -n $MD ]]; then
    mdrow() { # NAME REQUESTS RAW NET
        printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" \
            "$(awk -v a="$3" -v b="${US[1.1]}" 'BEGIN { printf "%.2f", a / b }')" "$4" \
            "$(awk -v a="$4" -v b="${NET[1.1]}" 'BEGIN { printf "%.2f", a / b }')"
    }
    {
        echo "## Cluster (issue 37): proxyd CPU per request, one proxyd vs 3 lab nodes"
        echo
        echo "N=$N HTTP requests ($CONC, no keep-alive, 4 KB) through deploy/cluster/lab.sh; wall: one proxyd ${WALL[1]} s, 3 nodes ${WALL[3]} s. Target: each node within 10 % of one proxyd (vs 1 <= 1.10). net: the node's idle CPU over as long a time taken off."
        echo
        echo "| row | requests | raw us/req | vs 1 | net us/req | vs 1 |"
        echo "|---|---|---|---|---|---|"
        mdrow "one proxyd" "${REQ[1.1]}" "${US[1.1]}" "${NET[1.1]}"
        for i in 1 2 3; do mdrow "3 nodes: node $i" "${REQ[3.$i]}" "${US[3.$i]}" "${NET[3.$i]}"; done
        mdrow "3 nodes: summed" "$N" "${US[3.sum]}" "${NET[3.sum]}"
    } >"$MD"
fi
