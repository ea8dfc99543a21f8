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
#   - interleaved rounds: single, cluster, split, single, cluster... (-r
#     ROUNDS of each; split below), so that whatever else the machine does
#     (other builds and tests) falls on all alike; the row is the medians,
#     and each round's ratio to the single round of its cycle is printed
#     too;
#   - the same work in each round: N HTTP requests without keep-alive
#     (ab, a 4 KB file, the http service on port 80) at ab -c C, default
#     1: one request at a time, so each proxyd, alone or one of three,
#     handles one connection per wake-up (no batching for one side only)
#     and ab, nginx and the proxyds never ask for more than the 2 cores
#     (but in the split rounds, below: three such chains at once);
#   - a third kind of round, "split": the cluster at the single proxyd's
#     load per node, one ab -c C per node (ab i binds the client address
#     198.18.1.(10+i), which a router rule sends to node i; N/3 requests
#     each, at once). At ab -c 1 over the 3 nodes a node gets a third of
#     the connections with the other nodes' requests in between, while the
#     single proxyd gets them back to back, and a proxyd's CPU per request
#     depends on that, cluster or not (bench/README.md: one node given
#     the same gaps without any cluster costs as much per request); here
#     each node gets its connections as the single proxyd does. Both are
#     printed: the cluster rounds (the issue's comparison, same total
#     load) and the split rounds (same load per proxyd);
#   - --gaps (not in bench/run): two more rounds a cycle, one node alone
#     with a client (bench/paced.py, N/3 requests) that sends them back
#     to back ("b2b"), then with a pause after each ("gaps") of twice the
#     cluster round's wall time per request (what the other two nodes'
#     requests take between two of one node's): no cluster, no other
#     proxyd, only the spacing of a node's requests; printed against b2b;
#   - per node: the CPU of its proxyd's threads (the first field of
#     /proc/PID/task/*/schedstat, ns, before and after the round) divided
#     by the requests that node served in the round (responses 200 of its
#     http service, from its own /metrics; not assumed N/3). "net" takes
#     off the node's idle CPU (its supervisor's health checks scrape
#     /metrics every second, timers), measured over 3 s with no traffic
#     before the rounds and scaled to each round's duration.
# Prints the rounds, then one table: the single proxyd, each node and the
# 3 nodes summed (cluster rounds), each node of the split rounds, µs per
# request (medians) and the ratio to the single proxyd (the target: each
# node within 10 % of it); "paired" is the median over the rounds of each
# cluster or split round's ratio to the single round of its cycle (the
# machine's load drifts less within a cycle than over a run).
#
#   bench/cluster.sh [--quick] [-n N] [-c C] [-r ROUNDS] [--gaps] [--md FILE]
#                 (root; --quick: N=3000, else 20000 per round; ROUNDS 5;
#                 --md: the table in markdown too, into FILE)
# PROXYD: the binary (default build/proxyd), R66PEER as lab.sh.
# bench/run runs it (its cluster row, BENCH_CLUSTER=1, -n BENCH_CLUSTER_N)
# and adds the markdown table to its results.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
LAB=$REPO/deploy/cluster/lab.sh
N=20000 C=1 R=5 MD="" GAPS=0
usage() { echo "usage: bench/cluster.sh [--quick] [-n N] [-c C] [-r ROUNDS] [--gaps] [--md FILE]" >&2; exit 2; }
while (($#)); do
    case $1 in
    --quick) N=3000 ;;
    -n) N=$2; shift ;;
    -c) C=$2; shift ;;
    -r) R=$2; shift ;;
    --md) MD=$2; shift ;;
    --gaps) GAPS=1 ;;
    *) usage ;;
    esac
    shift
done
[[ $N =~ ^[1-9][0-9]*$ && $C =~ ^[1-9][0-9]*$ && $R =~ ^[1-9][0-9]*$ ]] || usage
((N >= 3)) || usage
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
# split -I|-D: the split rounds' router rules: a new connection from
# 198.18.1.(10+I) to node I
split() {
    local i
    for i in 1 2 3; do
        "$LAB" router iptables -w -t mangle "$1" PREROUTING -i r0 -s "198.18.1.$((10 + i))" -d 198.18.0.80 \
            -p tcp --dport 80 -m conntrack --ctstate NEW -m comment --comment "bench: an ab per node" \
            -j MARK --set-mark "$i"
    done
}
med() { # [FORMAT] < numbers: their median (FORMAT: printf's, default %.1f)
    sort -g | awk -v f="${1:-%.1f}\n" '{ v[NR] = $1 } END { printf f, NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
us() { awk -v c="$1" -v r="$2" 'BEGIN { printf "%.1f", r ? c / r / 1000 : 0 }'; } # NS REQUESTS

out=$("$LAB" up 3 2>/dev/null)
SRV=$(sed -n 's/^server=//p' <<<"$out")
head -c 4096 /dev/urandom >"$(sed -n 's/^root=//p' <<<"$out")/f.bin"
for i in 1 2 3; do "$LAB" client ip addr add "198.18.1.$((10 + i))/32" dev c0; done # split rounds' ab
"$LAB" client ab -q -n 500 -c 3 "http://$SRV/f.bin" >/dev/null # warm up
declare -A IDLE=()  # node I's idle CPU, ns per second
for i in 1 2 3; do IDLE[$i]=$(cpu_ns "$i"); done
t0=$(date +%s%N)
sleep 3
dt=$(($(date +%s%N) - t0))
for i in 1 2 3; do IDLE[$i]=$(awk -v a="${IDLE[$i]}" -v b="$(cpu_ns "$i")" -v d="$dt" 'BEGIN { printf "%d", (b - a) / (d / 1e9) }'); done

# round MODE K: N requests, single (node K mod 3 alone), cluster or split
# (an ab per node); appends "raw net requests cpu netcpu" (µs per request,
# ns) to $T_/MODE.node.I for each node that served any, and to
# $T_/single.all
T_=$(mktemp -d /tmp/bench-cluster.XXXXXX)
trap '"$LAB" down >/dev/null 2>&1 || true; rm -rf "$T_"' EXIT
round() {
    local mode=$1 k=$2 i c0=() r0=() t0 dt cpu req net line="" ratio pause one=$((($2 - 1) % 3 + 1))
    [[ $mode != single && $mode != b2b && $mode != gaps ]] || single -I "$one"
    [[ $mode != split ]] || split -I
    # served first: its /metrics scrape (about 2 million instructions) is
    # not the round's; the one after the round is read after the CPU
    for i in 1 2 3; do r0[i]=$(served "$i") c0[i]=$(cpu_ns "$i"); done
    t0=$(date +%s%N)
    if [[ $mode == split ]]; then
        for i in 1 2 3; do
            "$LAB" client ab -q -n "$((N / 3))" -c "$C" -B "198.18.1.$((10 + i))" "http://$SRV/f.bin" >"$T_/ab.out.$i" &
        done
        wait
    elif [[ $mode == b2b || $mode == gaps ]]; then
        pause=0
        [[ $mode == b2b ]] || pause=$GAP
        "$LAB" client python3 "$HERE/paced.py" "http://$SRV/f.bin" "$((N / 3))" "$pause" >"$T_/paced.out" ||
            { echo "paced.py failed: $(cat "$T_/paced.out")" >&2; exit 1; }
        line+=" pause $pause µs, $(sed -n 's/.*us_per_request=//p' "$T_/paced.out") µs a request (wall);"
    else
        "$LAB" client ab -q -n "$N" -c "$C" "http://$SRV/f.bin" >"$T_/ab.out"
    fi
    dt=$(($(date +%s%N) - t0))
    [[ $mode != single && $mode != b2b && $mode != gaps ]] || single -D "$one"
    [[ $mode != split ]] || split -D
    for i in "$T_"/ab.out*; do
        [[ -e $i ]] || continue
        grep -q "^Failed requests: *0$" "$i" || { echo "ab failed: $(grep Failed "$i")" >&2; exit 1; }
    done
    rm -f "$T_"/ab.out*
    for i in 1 2 3; do
        cpu=$(($(cpu_ns "$i") - c0[i]))
        req=$(($(served "$i") - r0[i]))
        net=$(awk -v c="$cpu" -v z="${IDLE[$i]}" -v d="$dt" 'BEGIN { printf "%d", c - z * d / 1e9 }')
        line+=" n$i: $req req $(us "$cpu" "$req")/$(us "$net" "$req") µs"
        ((req)) || continue
        echo "$(us "$cpu" "$req") $(us "$net" "$req") $req $cpu $net" >>"$T_/$mode.node.$i"
        if [[ $mode == single || $mode == b2b ]]; then
            tail -n 1 "$T_/$mode.node.$i" >>"$T_/$mode.all"
            continue
        fi
        # this round's ratio to the single (gaps: b2b) round of its cycle
        ratio=$(awk -v a="$(us "$cpu" "$req")" -v b="$([[ $mode == gaps ]] && echo "$LAST_B2B" || echo "$LAST_SINGLE")" \
            'BEGIN { printf "%.2f", a / b }')
        line+=" (x$ratio)"
        echo "$ratio" >>"$T_/$mode.ratio.node.$i"
    done
    [[ $mode != single ]] || LAST_SINGLE=$(tail -n 1 "$T_/single.all" | cut -d' ' -f1)
    [[ $mode != b2b ]] || LAST_B2B=$(tail -n 1 "$T_/b2b.all" | cut -d' ' -f1)
    # the gaps round's pause: what the other two nodes' requests take
    # between two of one node's in this cluster round
    [[ $mode != cluster ]] || GAP=$((2 * dt / N / 1000))
    printf 'round %d %-7s %5.1f s%s\n' "$k" "$mode" "$(awk -v d="$dt" 'BEGIN { printf "%.1f", d / 1e9 }')" "$line"
    WALL[$mode]=$(awk -v a="${WALL[$mode]:-0}" -v d="$dt" 'BEGIN { printf "%.1f", a + d / 1e9 }')
}
declare -A WALL=()
LAST_SINGLE=0 LAST_B2B=0 GAP=0
echo "N=$N requests a round (ab -c $C, no keep-alive, 4 KB), $R rounds each, interleaved; lab.sh up 3, single = node K mod 3 alone in round K; split = an ab -c $C per node, N/3 each; µs/req raw/net"
for ((k = 1; k <= R; k++)); do
    round single "$k"
    round cluster "$k"
    round split "$k"
    if ((GAPS)); then
        round b2b "$k"
        round gaps "$k"
    fi
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
    ROWS+=("3 nodes: node $i|$(($(cut -d' ' -f3 "$T_/cluster.node.$i" | paste -sd+)))|$(col "cluster.node.$i" 1)|$(col "cluster.node.$i" 2)|$(med %.2f <"$T_/cluster.ratio.node.$i")")
done
ROWS+=("3 nodes: summed|$((N * R))|$(summed 4)|$(summed 5)|-")
for i in 1 2 3; do
    ROWS+=("an ab each: node $i|$(($(cut -d' ' -f3 "$T_/split.node.$i" | paste -sd+)))|$(col "split.node.$i" 1)|$(col "split.node.$i" 2)|$(med %.2f <"$T_/split.ratio.node.$i")")
done
if ((GAPS)); then
    B2B_RAW=$(col b2b.all 1)
    B2B_NET=$(col b2b.all 2)
    ROWS+=("paced.py, no pause|$(($(cut -d' ' -f3 "$T_/b2b.all" | paste -sd+)))|$B2B_RAW|$B2B_NET|1.00|$B2B_RAW|$B2B_NET")
    ROWS+=("paced.py, pauses|$(($(cat "$T_"/gaps.node.* | cut -d' ' -f3 | paste -sd+)))|$(cat "$T_"/gaps.node.* | cut -d' ' -f1 | med)|$(cat "$T_"/gaps.node.* | cut -d' ' -f2 | med)|$(cat "$T_"/gaps.ratio.node.* | med %.2f)|$B2B_RAW|$B2B_NET")
fi
echo "wall: single ${WALL[single]} s, cluster ${WALL[cluster]} s, split ${WALL[split]} s (all rounds); requests: all rounds; µs/req: medians of the rounds"
((GAPS == 0)) || echo "paced.py rows (one node alone, --gaps): compared with the paced.py rounds without pauses, not with ab's"
printf '%-8s %-18s %9s %10s %6s %10s %6s %7s\n' row proxyd requests "raw µs/req" "vs 1" "net µs/req" "vs 1" paired
for r in "${ROWS[@]}"; do
    IFS='|' read -r name req raw net paired rraw rnet <<<"$r"
    printf '%-8s %-18s %9s %10s %6s %10s %6s %7s\n' cluster "$name" "$req" "$raw" "$(ratio "$raw" "${rraw:-$ONE_RAW}")" \
        "$net" "$(ratio "$net" "${rnet:-$ONE_NET}")" "$paired"
done
if [[ -n $MD ]]; then
    {
        echo "## Cluster (issue 37): proxyd CPU per request, one proxyd vs 3 lab nodes"
        echo
        echo "One lab (deploy/cluster/lab.sh up 3): single = every connection routed to one node (the nodes in turn), cluster = ECMP over the 3 nodes (the same total load: a node gets a third of the connections, the other nodes' requests in between), split = an ab per node, pinned to it (the same load per proxyd as single: each node gets its connections back to back; three chains of requests at once on the machine's cores); rounds interleaved (single, cluster, split; $R of each), N=$N HTTP requests a round (ab -c $C, no keep-alive, 4 KB; split: N/3 for each of the 3 ab at once); each node's CPU (schedstat) over the requests it served (its /metrics), medians of the rounds. Target: each node within 10 % of one proxyd (vs 1 <= 1.10). net: the node's idle CPU taken off; paired: the median of each cluster or split round's ratio to the single round of its cycle.$( ((GAPS == 0)) || echo " paced.py rows (--gaps): one node alone, a client sending N/3 requests back to back, then with a pause after each of twice the cluster round's wall time per request; their vs 1 and paired are against paced.py without pauses.")"
        echo
        echo "| row | requests | raw us/req | vs 1 | net us/req | vs 1 | paired |"
        echo "|---|---|---|---|---|---|---|"
        for r in "${ROWS[@]}"; do
            IFS='|' read -r name req raw net paired rraw rnet <<<"$r"
            echo "| $name | $req | $raw | $(ratio "$raw" "${rraw:-$ONE_RAW}") | $net | $(ratio "$net" "${rnet:-$ONE_NET}") | $paired |"
        done
    } >"$MD"
fi
