#!/usr/bin/env bash
# A 1 GB clean file through the scanner on R66 (issue 28: "clean files of
# 0 B, 1 KB, 10 MB and 1 GB pass with sha256 intact"; the small ones are in
# r66_scan, HTTP at 1 GB in scan_big). r66peer client -> proxyd (r66
# service with <scan direction="both" max-size="2g"> and <audit>) ->
# r66peer server: one SEND of the file, then one RECV of what the server
# stored, cut to its first 256 MB (big_shrink, scan_lib.sh). c-icap and
# clamd are set as in scan_big, so that the file is really scanned, not
# waved through as too big:
#  - c-icap: the service alias has sizelimit=off (scan_lib.sh), its
#    virus_scan.MaxObjectSize is set to 2000M all the same;
#  - clamd's MaxFileSize and MaxScanSize 2000M (defaults 100M and 400M)
#    with AlertExceedsMax yes: a file over either limit comes back
#    "Heuristics.Limits.Exceeded", the transfer refused, so a clean verdict
#    means clamd read all of it; LogClean yes: clamd logs each clean scan;
#    DisableCache yes: without it clamd finds the RECV's file in its cache
#    of clean files (by md5) and does not scan it again.
# The peers wait up to 300 s on a read (--timeout): the last block is held
# by proxyd until the verdict, and clamd starts only once c-icap has the
# whole file (some 30 s of CPU for 1 GB of random bytes).
# Asserts, for each transfer:
#  - the client exits 0, the received file's sha256 is the source's (the
#    peers also check the global SHA-256 digest of the transfer);
#  - proxyd logs r66-scan verdict=clean with size=1073741824 (RECV:
#    268435456) and the
#    accepted r66-transfer; clamd logs one more clean scan (": OK": it
#    logs no size), c-icap's access log (a LogFormat of the test's) one
#    REQMOD (SEND) or RESPMOD (RECV) answered 204 whose body had all
#    the bytes;
#  - the audit record of the transfer has that sha256 and size, complete,
#    scan_verdict clean;
#  - proxyd's RSS, sampled every 0.2 s through the transfer, stays within
#    64 MB of its RSS before it (blocks are streamed to the scanner and the
#    receiver; only the last Data frame is held);
# and prints each transfer's duration, the CPU of proxyd, c-icap and clamd,
# and the RSS peak. Under a sanitizer (PROXYD_SANITIZE set) 128 MB, and the
# RSS bound is not asserted (ASan keeps what is freed in quarantine).
# SCAN_BIG_R66_RECV=0 leaves the RECV out; SCAN_BIG_R66_CLAMD replaces the
# clamd.conf lines above (to see the test fail with clamd's default limits:
# SCAN_BIG_R66_CLAMD="AlertExceedsMax yes").
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds openssl python3 sha256sum
need_r66peer
setup
need_scanner
scan_dirs

BLOCK=65536 # Waarp's default block size
mkdir -p "$T/cli" "$T/out"
big_setup "$T/cli/big.bin"
CLAMD_EXTRA=${SCAN_BIG_R66_CLAMD:-$CLAMD_EXTRA}
# c-icap logs each request's method, status and body bytes received
ICAP_EXTRA="LogFormat sized \"%im %is %Ib\"
AccessLog $W/sized.log sized"
start_scanner
start_r66_server --timeout 300

write_proxyd_conf "" "<audit target=\"file:$T/audit.json\"/><scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"300s\"/>
  </scanners>"
free_port PORT
write_r66_service big "$PORT" "$R66_SRV_PORT" \
    '<scan scanner="av" direction="both" max-size="2g"/><audit/>
  <r66 max-block="1m"><host id="hosta"/><rule name="in out"/>
     <mode allow="send recv sendmd5 recvmd5"/></r66>'
start_proxyd

# r66_client ARGS...: an r66peer client to the service (for sampled, in
# the background: exec, so its pid is the client's)
r66_client() {
    exec "$R66PEER" client --connect "127.0.0.1:$PORT" --id hosta:pwA \
        --partner serverb:pwB --timeout 300 --block "$BLOCK" "$@"
}
# c-icap's METHOD requests answered 204 with all SIZE bytes: N of them
# (waited for: 5 s)
icap_bodies() {
    local i n
    for ((i = 0; i < 50; i++)); do
        n=$(grep -c "^$1 204 $SIZE\$" "$W/sized.log" 2>/dev/null || true)
        ((n == $2)) && return 0
        sleep 0.1
    done
    fail "c-icap's $1 requests with $SIZE bytes: $n, expected $2: $(cat "$W/sized.log")"
}
# audit_record DIRECTION: the big service's record of that direction has
# the file's sha256 and size, complete, scanned clean (written once the
# channel ended: waited for, 5 s)
audit_record() {
    local i
    for ((i = 0; i < 50; i++)); do
        grep "\"direction\":\"$1\"" "$T/audit.json" >/dev/null 2>&1 && break
        sleep 0.1
    done
    python3 - "$T/audit.json" "$1" "$WANT" "$SIZE" <<'PY' || fail "the $1 audit record: $(cat "$T/audit.json")"
import json, sys
path, direction, sha, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
recs = [json.loads(l) for l in open(path).read().splitlines()]
recs = [r for r in recs if r["service"] == "big" and r["direction"] == direction]
assert len(recs) == 1, recs
r = recs[0]
assert r["file"] == "big.bin" and r["user"] == "hosta", r
assert r["sha256"] == sha, (r["sha256"], sha)
assert r["size"] == size and r["announced_size"] == size, r
assert r["complete"] is True and r["verdict"] == "accept", r
assert r["scan_verdict"] == "clean" and r["threat"] is None, r
PY
}

# ---- SEND (upload), then RECV (download) of what the server stored. One
# after the other: clamd scans each only once c-icap has the whole file.
scans0=$(clean_scans)
sampled send r66_client --rule in --mode 1 --send "$T/cli/big.bin"
assert_grep "$T/send.out" "^ok send file=big\.bin size=$SIZE "
assert_eq "$(sha256_of "$R66_SRV_DIR/big.bin")" "$WANT" "sha256 of the big SEND on the server"
assert_log "r66-scan verdict=clean scanner=av file=big\.bin host=hosta rule=in dir=upload size=$SIZE istag="
assert_log "r66-transfer host=hosta rule=in mode=send file=big\.bin size=$SIZE blocks=$((SIZE / BLOCK)) digest=SHA-256 verdict=accept payload=copy"
wait_clean_scan "$scans0"
icap_bodies REQMOD 1
audit_record upload
info "SEND: ok"

if [[ ${SCAN_BIG_R66_RECV:-1} == 1 ]]; then
    big_shrink "$R66_SRV_DIR/big.bin"
    scans0=$(clean_scans)
    sampled recv r66_client --rule out --mode 2 --recv big.bin --dir "$T/out"
    assert_grep "$T/recv.out" "^ok recv file=big\.bin size=$SIZE "
    assert_eq "$(sha256_of "$T/out/big.bin")" "$WANT" "sha256 of the big RECV"
    assert_log "r66-scan verdict=clean scanner=av file=big\.bin host=hosta rule=out dir=download size=$SIZE istag="
    assert_log "r66-transfer host=hosta rule=out mode=recv file=big\.bin size=$SIZE blocks=[0-9]+ digest=SHA-256 verdict=accept payload=copy"
    wait_clean_scan "$scans0"
    icap_bodies RESPMOD 1
    audit_record download
    info "RECV: ok"
fi
assert_metric eq proxyd_scan_total 'service="big",scanner="av",verdict="clean"' "$((1 + ${SCAN_BIG_R66_RECV:-1}))"
r66_finish
info "ok"
