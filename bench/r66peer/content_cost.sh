#!/usr/bin/env bash
# What <content> and <audit> cost proxyd on R66 (issue 28): its CPU per MB
# for 10 MB SENDs (64 KiB blocks) through an r66 service with neither
# (spliced), with <audit> (the blocks through user space, hashed), and
# with <content> and <audit> (the first 4 KiB judged by libmagic too).
# Numbers: docs/CONFIG.md, "R66 files by content, audit records".
#   bench/r66peer/content_cost.sh [BUILD_DIR]     (default: build)
# Knobs: RUNS=5 (SENDs per service and round, two rounds), BUF=256k.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
export PROXYD=$B/proxyd R66PEER=$B/r66peer
source "$(dirname "$0")/../../tests/integration/lib.sh"
source "$(dirname "$0")/../../tests/integration/r66_lib.sh"
need_r66peer
setup
RUNS=${RUNS:-5}
mkdir -p "$T/cli"
head -c 10M /dev/urandom >"$T/cli/10m.bin"
start_r66_server
R66X='<r66 max-block="1m"><host id="hosta"/><rule name="in out"/></r66>'
write_proxyd_conf "buffer=\"${BUF:-256k}\"" "<audit target=\"file:$T/audit.json\"/>"
sed -i 's|<workers>auto</workers>|<workers>1</workers>|; s|level="info"|level="warning"|' "$PROXYD_CONF"
DENY='<content type="application/x-executable" action="deny"/>'
free_port P_plain; write_r66_service plain "$P_plain" "$R66_SRV_PORT" "$R66X"
free_port P_audit; write_r66_service audit "$P_audit" "$R66_SRV_PORT" "<audit/> $R66X"
free_port P_both; write_r66_service both "$P_both" "$R66_SRV_PORT" "$DENY <audit/> $R66X"
start_proxyd
cpu_ns() { # all proxyd threads
    local t s=0 v
    for t in /proc/$PROXYD_PID/task/*/schedstat; do
        read -r v _ <"$t" || continue
        s=$((s + v))
    done
    echo "$s"
}
BYTES=$(stat -c %s "$T/cli/10m.bin")
for svc in plain audit both plain audit both; do
    port="P_$svc"
    line="$svc:"
    for ((i = 0; i < RUNS; i++)); do
        rm -f "$R66_SRV_DIR/10m.bin"
        c0=$(cpu_ns); t0=$(now_ms)
        r66c "${!port}" hosta:pwA --rule in --mode 1 --block 65536 --send "$T/cli/10m.bin"
        c1=$(cpu_ns); t1=$(now_ms)
        [[ $R66_RC == 0 ]] || fail "send via $svc: $(cat "$T/client.err")"
        # microseconds per 10^6 bytes
        line+=" $(( (c1 - c0) / 1000 * 1000000 / BYTES ))us/MB($((t1 - t0))ms)"
    done
    echo "$line"
done
# (written by the log thread: the last one may take a moment)
for ((i = 0; i < 40; i++)); do
    (($(wc -l <"$T/audit.json") >= 4 * RUNS)) && break
    sleep 0.05
done
echo "audit records: $(wc -l <"$T/audit.json") (want $((4 * RUNS)))"
