#!/usr/bin/env bash
# R66 throughput, direct vs through proxyd (r66 analyser, fixed mode), from
# one run: transfers/s for 250 KB SENDs with 10 parallel clients and MB/s for
# one 500 MB SEND. See bench/r66peer/README.md.
#   bench/r66peer/bench.sh [BUILD_DIR]      (default: build)
# Knobs (environment): R66B_CLIENTS=10 R66B_PER_CLIENT=50 R66B_BIG_MB=500
#   R66B_BLOCK=65536 R66B_MODE=1 R66B_WORKERS=1
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
PEER=$B/r66peer
PX=$B/proxyd
[[ -x $PEER && -x $PX ]] || { echo "build $B first (targets proxyd r66peer)" >&2; exit 1; }
CLIENTS=${R66B_CLIENTS:-10}
PER=${R66B_PER_CLIENT:-50}
BIG=${R66B_BIG_MB:-500}
BLOCK=${R66B_BLOCK:-65536}
MODE=${R66B_MODE:-1}
WORKERS=${R66B_WORKERS:-1}
base=/tmp
[[ -d /dev/shm ]] && base=/dev/shm
W=$(mktemp -d "$base/r66bench.XXXXXX")
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -n ${R66B_KEEP:-} ]] || rm -rf "$W"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

SP=$(port); PP=$(port); AP=$(port)
mkdir -p "$W/srv" "$W/cli" "$W/policy"
head -c 250K /dev/urandom >"$W/cli/f250k"
head -c "${BIG}M" /dev/urandom >"$W/cli/big"
"$PEER" server --listen "127.0.0.1:$SP" --dir "$W/srv" --id serverb:pwB \
    --partner hosta:pwA --block 1048576 --quiet >"$W/server.log" 2>&1 &
pids+=($!)
cat >"$W/proxyd.xml" <<XML
<proxyd>
  <workers>$WORKERS</workers>
  <log target="stderr" level="warning"/>
  <admin listen="127.0.0.1:$AP"/>
  <policies dir="policy"/>
</proxyd>
XML
cat >"$W/policy/r66.xml" <<XML
<service name="r66" analyser="r66">
  <listen address="127.0.0.1" port="$PP"/>
  <target address="127.0.0.1" port="$SP"/>
  <r66 max-block="1m"><host id="hosta"/><rule name="bench"/></r66>
</service>
XML
"$PX" -c "$W/proxyd.xml" >"$W/proxyd.log" 2>&1 &
pxpid=$!
pids+=($pxpid)
for ((i = 0; i < 50; i++)); do
    python3 -c "import socket; socket.create_connection((\"127.0.0.1\", $PP), 0.2).close()" 2>/dev/null && break
    sleep 0.1
done
kill -0 "$pxpid" 2>/dev/null || { cat "$W/proxyd.log" >&2; exit 1; }

# many PORT: CLIENTS clients x PER SENDs of 250 KB, one connection each
many() {
    local t0 t1 i cp=()
    t0=$(now)
    for ((i = 0; i < CLIENTS; i++)); do
        "$PEER" client --connect "127.0.0.1:$1" --id hosta:pwA --partner serverb:pwB \
            --rule bench --mode "$MODE" --block "$BLOCK" --count "$PER" --quiet \
            --send "$W/cli/f250k" 2>>"$W/client.err" &
        cp+=($!)
    done
    for i in "${cp[@]}"; do wait "$i" || { echo "client failed: $(tail -3 "$W/client.err")" >&2; exit 1; }; done
    t1=$(now)
    python3 -c "print('%.0f' % ($CLIENTS * $PER / ($t1 - $t0)))"
}

# big PORT: one SEND of the big file
big() {
    local t0 t1
    t0=$(now)
    "$PEER" client --connect "127.0.0.1:$1" --id hosta:pwA --partner serverb:pwB \
        --rule bench --mode "$MODE" --block "$BLOCK" --quiet --send "$W/cli/big" \
        2>>"$W/client.err" || { echo "big transfer failed" >&2; exit 1; }
    t1=$(now)
    rm -f "$W/srv/big"
    python3 -c "print('%.0f' % ($BIG * 1048576 / 1e6 / ($t1 - $t0)))"
}

echo "r66 bench: $CLIENTS clients x $PER SENDs of 250 KB; one ${BIG} MB SEND;"
echo "mode $MODE, block $BLOCK, proxyd workers $WORKERS, files on $base, $(nproc) cores"
printf '%-8s %16s %10s\n' path "250KB xfers/s" "MB/s"
for path in direct proxyd; do
    p=$SP
    [[ $path == proxyd ]] && p=$PP
    m=$(many "$p"); rm -f "$W"/srv/f250k*
    b=$(big "$p")
    printf '%-8s %16s %10s\n' "$path" "$m" "$b"
done
n=$(grep -c "r66-transfer" "$W/proxyd.log" || true)
echo "(proxyd log: $n transfer lines at level warning: expected 0; denials: $(grep -c verdict=deny "$W/proxyd.log" || true))"
