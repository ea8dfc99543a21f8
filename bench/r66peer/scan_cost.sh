#!/usr/bin/env bash
# What scanning R66 transfers costs proxyd (issue 28): its CPU per MB for
# 10 MB SENDs through an r66 service without <scan> and with one (c-icap's
# virus_scan over clamd, as tests/integration/r66_scan.sh sets them up),
# and the RSS each scanned transfer adds while held at its verdict (a
# scanner that takes the file and never answers). Numbers: docs/CONFIG.md,
# "R66 transfers through the scanner".
#   bench/r66peer/scan_cost.sh [BUILD_DIR]     (default: build)
# Knobs (environment): RUNS=5 (SENDs per service and round, two rounds),
#   NSTALL=20 (transfers held at once), BUF=256k (limits/@buffer); with
#   RUNS=0 only the memory is measured. Try GLIBC_TUNABLES=
#   glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072
#   to see the live memory rather than what glibc keeps.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
export PROXYD=$B/proxyd R66PEER=$B/r66peer
source "$(dirname "$0")/../../tests/integration/lib.sh"
source "$(dirname "$0")/../../tests/integration/r66_lib.sh"
source "$(dirname "$0")/../../tests/integration/scan_lib.sh"
source "$(dirname "$0")/cost_lib.sh"
need_r66peer
setup
need_scanner
scan_dirs
RUNS=${RUNS:-5}
NSTALL=${NSTALL:-20}
cost_file
start_r66_server
write_eicar "$T/eicar.com"; (cd "$T" && sigtool --md5 eicar.com) >"$W/db/test.hdb"
start_scanner
free_port STALL
cat >"$T/stall.py" <<'PY'
import socket, sys, threading
def handle(c):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head, _, buf = buf.partition(b"\r\n\r\n")
            if head.startswith(b"OPTIONS"):
                c.sendall(b'ICAP/1.0 200 OK\r\nMethods: RESPMOD, REQMOD\r\nISTag: "stall"\r\nMax-Connections: 1000\r\nEncapsulated: null-body=0\r\n\r\n')
                continue
            while c.recv(1 << 20):
                pass
            return
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(128)
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
PY
python3 "$T/stall.py" "$STALL" &
track_pid $!
wait_listen "$STALL" 5 || fail "stall server"
R66X='<r66 max-block="1m"><host id="hosta"/><rule name="in out"/></r66>'
write_proxyd_conf "buffer=\"${BUF:-256k}\"" "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"30s\"/>
    <icap name=\"stall\" url=\"icap://127.0.0.1:$STALL/avscan\" timeout=\"120s\" max-connections=\"1000\"/>
  </scanners>"
cost_conf
free_port P_plain; write_r66_service plain "$P_plain" "$R66_SRV_PORT" "$R66X"
free_port P_av; write_r66_service av "$P_av" "$R66_SRV_PORT" "<scan scanner=\"av\"/> $R66X"
free_port P_stall; write_r66_service stall "$P_stall" "$R66_SRV_PORT" "<scan scanner=\"stall\"/> $R66X"
start_proxyd
cost_sends plain av plain av
# memory: NSTALL scanned SENDs held at their verdict
rm -f "$R66_SRV_DIR"/.part.* "$R66_SRV_DIR/10m.bin"
sleep 1
rss0=$(vm_kb "$PROXYD_PID" VmRSS)
pids=()
for ((i = 0; i < NSTALL; i++)); do
    "$R66PEER" client --connect "127.0.0.1:$P_stall" --id hosta:pwA --partner serverb:pwB \
        --timeout 120 --rule in --mode 1 --block 65536 --send "$T/cli/10m.bin" >/dev/null 2>&1 &
    pids+=($!); track_pid $!
done
want=$((BYTES - 65536))
for ((k = 0; k < 600; k++)); do
    n=$(find "$R66_SRV_DIR" -name '.part.*' -size "${want}c" | wc -l)
    ((n == NSTALL)) && break
    sleep 0.1
done
echo "held at verdict: $n of $NSTALL (server files at $want bytes: the last 64 KiB block held)"
sleep 1
rss1=$(vm_kb "$PROXYD_PID" VmRSS)
echo "RSS idle ${rss0} kB, with $NSTALL held: ${rss1} kB, per transfer: $(( (rss1 - rss0) / NSTALL )) kB"
grep VmHWM /proc/$PROXYD_PID/status
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
sleep 2
echo "after the clients left: $(vm_kb "$PROXYD_PID" VmRSS) kB"
