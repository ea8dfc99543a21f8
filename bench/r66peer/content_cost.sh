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
source "$(dirname "$0")/cost_lib.sh"
need_r66peer
setup
RUNS=${RUNS:-5}
cost_file
start_r66_server
R66X='<r66 max-block="1m"><host id="hosta"/><rule name="in out"/></r66>'
write_proxyd_conf "buffer=\"${BUF:-256k}\"" "<audit target=\"file:$T/audit.json\"/>"
cost_conf
DENY='<content type="application/x-executable" action="deny"/>'
free_port P_plain; write_r66_service plain "$P_plain" "$R66_SRV_PORT" "$R66X"
free_port P_audit; write_r66_service audit "$P_audit" "$R66_SRV_PORT" "<audit/> $R66X"
free_port P_both; write_r66_service both "$P_both" "$R66_SRV_PORT" "$DENY <audit/> $R66X"
start_proxyd
cost_sends plain audit both plain audit both
# (written by the log thread: the last one may take a moment)
for ((i = 0; i < 40; i++)); do
    (($(wc -l <"$T/audit.json") >= 4 * RUNS)) && break
    sleep 0.05
done
echo "audit records: $(wc -l <"$T/audit.json") (want $((4 * RUNS)))"
