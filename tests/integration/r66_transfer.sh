#!/usr/bin/env bash
# r66peer client -> proxyd (r66, fixed) -> r66peer server: SEND and RECV of
# 1 KB, 250 KB and a large file (500 MB; 64 MB in the ASan build) in modes
# 1-4 with SHA-256 and SHA-512 global digests. Every file must arrive with
# the same sha256, each transfer must get its r66-transfer log line and the
# transfers counter must count them. First, a control frame trickled one
# byte per segment: held, not forwarded, in about the memory it takes; and
# a Data frame's head alone is judged (a block is never held whole).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl
need_r66peer
setup

BIG=500M
[[ -n ${PROXYD_SANITIZE:-} ]] && BIG=64M
mkdir -p "$T/cli" "$T/out"
head -c 1K /dev/urandom >"$T/cli/a1k.bin"
head -c 250K /dev/urandom >"$T/cli/b250k.bin"
info "creating the $BIG file"
head -c "$BIG" /dev/urandom >"$T/cli/big.bin"

start_r66_server
free_port R66_PORT
write_proxyd_conf
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 max-block="1m"><host id="hosta hostb"/><rule name="in out"/>
     <mode allow="send recv sendmd5 recvmd5"/>
     <file pattern="*.bin" max-size="1g"/></r66>'
start_proxyd

# A Request frame head (11 KB, under the 16 KB cap of control frames),
# then its bytes one TCP segment each: r66 holds the partial frame (nothing
# reaches the server) in about as much memory as it holds, not one
# read-sized buffer per segment.
info "a frame trickled one byte per segment"
cat >"$T/trickle.py" <<'PY'
import socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
hl, ml = 9 + 1000, 10000
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(struct.pack(">IIIBIIIB", 13 + hl + ml, 0x80000000, 0x11111111, 7,
                      hl, ml, 0, 7))
for _ in range(n):
    s.sendall(b"x")
    time.sleep(0.0002)
time.sleep(0.5)
print(n)
s.close()
PY
rss0=$(vm_kb "$PROXYD_PID" VmRSS)
python3 "$T/trickle.py" "$R66_PORT" 4000 >/dev/null &
tpid=$!
track_pid "$tpid"
sleep 0.2
grown=0
while proc_alive "$tpid"; do
    rss=$(vm_kb "$PROXYD_PID" VmRSS)
    (( rss - rss0 > grown )) && grown=$((rss - rss0))
    sleep 0.1
done
wait "$tpid" || fail "trickle client failed"
info "RSS grew by at most $grown kB while holding 4026 bytes"
assert_log "session-end service=r66 analyser=r66 verdict=accept .* to-server=0 to-client=0 .* end=client-closed"
if [[ -z ${PROXYD_SANITIZE:-} ]]; then
    assert_lt "$grown" 4096 "RSS growth (kB) while a 4026-byte partial frame is held"
fi

# The head of a 1 MB Data frame and 100 bytes of its block: judged at once
# (no channel: refused), not held until the megabyte is there.
info "a Data frame is judged on its head"
python3 - "$R66_PORT" <<'PY' || fail "data-head client failed"
import socket, struct, sys
ml = 1048576
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(struct.pack(">IIIBIIIBI", 26 + ml, 0x80000000, 0x22222222, 3,
                      13, ml, 0, 3, 0) + b"y" * 100)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
sys.exit(0 if len(got) > 0 else 1)
PY
assert_log "r66 protocol violation from client: channel opened by a non-opening packet"
assert_log "session-end service=r66 analyser=r66 verdict=deny .* to-server=0 .*channel opened by a non-opening packet"

n=0
# xfer MODE DIGEST send|recv NAME [BLOCK]
xfer() {
    local mode=$1 dig=$2 dir=$3 name=$4 block=${5:-65536} want got
    if [[ $dir == send ]]; then
        r66c "$R66_PORT" hosta:pwA --rule in --mode "$mode" --digest "$dig" \
            --block "$block" --send "$T/cli/$name"
        [[ $R66_RC == 0 ]] || fail "SEND $name mode $mode: rc=$R66_RC: $(cat "$T/client.err")"
        want=$(sha256_of "$T/cli/$name")
        got=$(sha256_of "$R66_SRV_DIR/$name")
    else
        r66c "$R66_PORT" hostb:pwb --rule out --mode "$mode" --digest "$dig" \
            --block "$block" --recv "$name" --dir "$T/out"
        [[ $R66_RC == 0 ]] || fail "RECV $name mode $mode: rc=$R66_RC: $(cat "$T/client.err")"
        want=$(sha256_of "$R66_SRV_DIR/$name")
        got=$(sha256_of "$T/out/$name")
    fi
    assert_eq "$got" "$want" "sha256 of $name after $dir mode $mode ($dig)"
    assert_grep "$T/client.out" "^ok $dir file=$name size=$(stat -c %s "$T/cli/$name") "
    n=$((n + 1))
    info "$dir $name mode=$mode $dig block=$block: ok"
}

xfer 1 SHA-256 send a1k.bin
xfer 3 SHA-512 send b250k.bin
xfer 2 SHA-512 recv a1k.bin
xfer 4 SHA-256 recv b250k.bin
xfer 3 SHA-256 send b250k.bin 1000      # 250 blocks with MD5 keys of SHA-256 length
t0=$(now_ms)
xfer 1 SHA-256 send big.bin 1048576
t1=$(now_ms)
info "SEND $BIG through proxyd: $((t1 - t0)) ms"
xfer 4 SHA-512 recv big.bin 1048576
info "RECV $BIG through proxyd: $(($(now_ms) - t1)) ms"
rm -f "$T/out/big.bin" "$T/cli/big.bin"

# one log line per transfer, with what the policy saw
assert_log "r66-transfer host=hosta rule=in mode=send file=a1k.bin size=1024 blocks=1 digest=SHA-256 verdict=accept"
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=b250k.bin size=256000 blocks=4 digest=SHA-512 verdict=accept"
assert_log "r66-transfer host=hostb rule=out mode=recv file=a1k.bin size=1024 blocks=1 digest=SHA-256 verdict=accept"
assert_log "r66-transfer host=hostb rule=out mode=recvmd5 file=b250k.bin size=256000 blocks=4 digest=SHA-256 verdict=accept"
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=b250k.bin size=256000 blocks=256 digest=SHA-256 verdict=accept"
big_bytes=$(( ${BIG%M} * 1048576 ))
assert_log "r66-transfer host=hosta rule=in mode=send file=big.bin size=$big_bytes blocks=${BIG%M} digest=SHA-256 verdict=accept"
assert_log "r66-transfer host=hostb rule=out mode=recvmd5 file=big.bin size=$big_bytes blocks=${BIG%M} digest=SHA-256 verdict=accept"
lines=$(grep -c "r66-transfer .*verdict=accept" "$PROXYD_LOG")
assert_eq "$lines" "$n" "accepted r66-transfer lines"
bad=$(grep -E "verdict=deny|violation" "$PROXYD_LOG" |
    grep -vc "channel opened by a non-opening packet" || true)
assert_eq "$bad" 0 "denials in the transfer test besides the bare Data head"
# 1 MB blocks come in many reads: each block's bytes after its head are
# spliced, none copied through user space.
assert_log "r66-transfer host=hosta rule=in mode=send file=big.bin .* verdict=accept payload=splice"
assert_log "r66-transfer host=hostb rule=out mode=recvmd5 file=big.bin .* verdict=accept payload=splice"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' "$n"
# the bare Data head above is the one violation
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="violations"' 1
r66_finish
info "all $n transfers ok"
