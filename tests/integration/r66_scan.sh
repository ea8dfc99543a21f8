#!/usr/bin/env bash
# R66 files through an ICAP scanner (<scan> on an r66 service): r66peer
# client -> proxyd (r66) -> r66peer server, c-icap's virus_scan over clamd,
# the signatures written here (EICAR, and a random 1 MB file "infected" by
# its md5).
#  - EICAR and the 1 MB file in a SEND and a RECV: blocked, the threat in
#    the r66-scan line, the sender gets an ErrorPacket code=a naming it,
#    the receiver an ErrorPacket and never the whole file (no file, the
#    peers write to a temporary one until size and digest check out);
#  - clean 0 B, 1 KB and 10 MB both ways: sha256 intact, one verdict=clean
#    line each;
#  - direction="download" leaves SENDs alone (EICAR goes through), still
#    blocks RECVs;
#  - max-size with over-size block (refused at the request, code=d) and
#    allow (passed unscanned);
#  - an infected SEND ends its channel only: the next SEND on the same
#    connection completes (a server that keeps its connection, as Waarp);
#  - TLS on both sides: EICAR blocked both ways, a clean 10 MB intact;
#  - a scanner that never answers, once it has the whole file: the server
#    has none of it (held until the verdict, the default), or 15 of 16
#    blocks with deliver="tail"; the client leaving then drops the held
#    rest;
#  - c-icap killed in the middle of two SENDs: on-error block refuses its
#    transfer, on-error allow lets its one complete intact; with c-icap
#    down, new transfers are refused (block) or pass (allow);
#  - <scan> with <content> and <audit>: an ELF refused by type never gets
#    a verdict, EICAR refused by the scanner, a clean 10 MB file passes;
#    their records carry both verdicts;
#  - proxyd_scan_total counts the verdicts.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
source "$(dirname "$0")/scan_lib.sh"
need_cmds python3 sha256sum
need_r66peer
setup
need_scanner
scan_dirs

mkdir -p "$T/cli" "$T/out"
start_r66_server
write_eicar "$T/cli/eicar.com"
head -c 1M /dev/urandom >"$T/cli/bad-1m.bin"
: >"$T/cli/empty.bin"
head -c 1K /dev/urandom >"$T/cli/1k.bin"
head -c 10M /dev/urandom >"$T/cli/10m.bin"
(cd "$T/cli" && sigtool --md5 eicar.com && sigtool --md5 bad-1m.bin) >"$W/db/test.hdb"
# What the server side sends (RECV): the same files under other names
# (the same signatures: the threat keeps its name).
for f in eicar.com bad-1m.bin empty.bin 1k.bin 10m.bin; do
    cp "$T/cli/$f" "$R66_SRV_DIR/dl-$f"
done
start_scanner
# A scanner that takes the whole file and never answers.
free_port STALL_PORT
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
                c.sendall(b'ICAP/1.0 200 OK\r\nMethods: RESPMOD, REQMOD\r\nISTag: "stall"\r\nEncapsulated: null-body=0\r\n\r\n')
                continue
            # the body's end: told in a file named after the ICAP port
            tail = buf
            while True:
                d = c.recv(65536)
                if not d:
                    break
                tail = (tail + d)[-5:]
                if tail == b"0\r\n\r\n":
                    open(sys.argv[2], "a").write("whole\n")
            return
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
s.settimeout(120)
for _ in range(16):
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    threading.Thread(target=handle, args=(c,), daemon=True).start()
PY
python3 "$T/stall.py" "$STALL_PORT" "$T/stall.whole" 2>>"$T/stall.err" &
track_pid $!
wait_listen "$STALL_PORT" 5 || fail "the stalling scanner did not start"

R66X='<r66 max-block="1m"><host id="hosta"/><rule name="in out"/>
     <mode allow="send recv sendmd5 recvmd5"/></r66>'
write_proxyd_conf 'buffer="256k"' "<audit target=\"file:$T/audit.json\"/><scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
    <icap name=\"av-open\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\" on-error=\"allow\"/>
    <icap name=\"stall\" url=\"icap://127.0.0.1:$STALL_PORT/avscan\" timeout=\"60s\"/>
  </scanners>"
# shellcheck disable=SC2154 # PORT_NAME variables are set by svc's eval
svc() { # NAME SCAN_XML [SERVER_PORT]
    local p
    free_port p
    write_r66_service "$1" "$p" "${3:-$R66_SRV_PORT}" "$2 $R66X"
    eval "PORT_${1//-/_}=$p"
}
svc r66 '<scan scanner="av"/>'
svc open '<scan scanner="av-open" direction="both"/>'
svc down '<scan scanner="av" direction="download"/>'
svc small '<scan scanner="av" max-size="100k"/>'
svc small-open '<scan scanner="av" max-size="100k" over-size="allow"/>'
svc held '<scan scanner="stall"/>'
svc held-tail '<scan scanner="stall" deliver="tail"/>'
# the scanner with <content> and <audit>: a denied type never reaches it
svc typed '<scan scanner="av"/>
  <content type="application/x-executable" action="deny"/><audit/>'
# a server that, as Waarp, ends only the channel of a failed transfer
start_r66_server_at keep --keep-on-error
KEEP_SRV_DIR=$R66_AT_DIR
svc keep '<scan scanner="av"/>' "$R66_AT_PORT"
# TLS on both sides (Waarp's 6667): the blocks are in user space anyway
P=$T/pki
r66_pki "$P"
r66_pki_leaf "$P" front r66.test "DNS:r66.test,IP:127.0.0.1" serverAuth
r66_pki_leaf "$P" serverb serverb.test "DNS:serverb.test" serverAuth
start_r66_server_at tls --tls-cert "$P/serverb.pem" --tls-key "$P/serverb.key"
TLS_SRV_DIR=$R66_AT_DIR
cp "$T/cli/eicar.com" "$TLS_SRV_DIR/dl-eicar.com"
svc tls "<tls side=\"client\" mode=\"terminate\" cert=\"$P/front.pem\" key=\"$P/front.key\"/>
  <tls side=\"server\" mode=\"originate\" ca=\"$P/ca.pem\" sni=\"serverb.test\"/>
  <scan scanner=\"av\"/>" "$R66_AT_PORT"
start_proxyd

# send SERVICE FILE [MODE]: SEND $T/cli/FILE as hosta (64 KiB blocks)
send() {
    local port="PORT_${1//-/_}"
    r66c "${!port}" hosta:pwA --rule in --mode "${3:-1}" --block 65536 --send "$T/cli/$2"
}
# recv SERVICE NAME [MODE]: RECV NAME into $T/out
recv() {
    local port="PORT_${1//-/_}"
    r66c "${!port}" hosta:pwA --rule out --mode "${3:-2}" --block 65536 --recv "$2" --dir "$T/out"
}
same() { # FILE ORIG MESSAGE
    assert_eq "$(sha256_of "$1")" "$(sha256_of "$2")" "$3: sha256"
}
# blocked_send FILE: refused, the server never has FILE (nor its temporary)
blocked_send() {
    [[ $R66_RC == 2 ]] || fail "SEND $1: expected the client to fail, rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
    [[ ! -e $R66_SRV_DIR/$1 ]] || fail "SEND $1: the server has the file"
    # (it drops its temporary file once it has the ErrorPacket)
    local i
    for ((i = 0; i < 100; i++)); do
        compgen -G "$R66_SRV_DIR/.part.*" >/dev/null || break
        sleep 0.05
    done
    if compgen -G "$R66_SRV_DIR/.part.*" >/dev/null; then
        fail "SEND $1: a temporary file is left on the server: $(ls -la "$R66_SRV_DIR")"
    fi
    [[ ! -e $R66_SRV_DIR/$1 ]] || fail "SEND $1: the server has the file"
}
blocked_recv() {
    [[ $R66_RC == 2 ]] || fail "RECV $1: expected the client to fail, rc=$R66_RC: $(cat "$T/client.out" "$T/client.err")"
    [[ ! -e $T/out/$1 && ! -e $T/out/$1.part ]] || fail "RECV $1: the client has the file"
}

# ---- infected, both ways
info "EICAR SEND"
send r66 eicar.com
blocked_send eicar.com
assert_grep "$T/client.err" "error packet from server: code=a action=3 msg=Denied by proxy: virus found: eicar\.com\.UNOFFICIAL"
assert_log "r66-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=eicar\.com host=hosta rule=in dir=upload size=68 istag=\"CI0001-[A-Za-z0-9+/=-]+\""
assert_log "r66-transfer host=hosta rule=in mode=send file=eicar\.com size=68 blocks=1 .*verdict=deny reason=scan-infected policy-rule=scan"
# the receiver heard of it
wait_grep "$T/r66server.log" "error packet from client: code=a action=3 msg=Denied by proxy: virus found" 5 ||
    fail "the server was not told: $(cat "$T/r66server.log")"

info "EICAR RECV"
recv r66 dl-eicar.com
blocked_recv dl-eicar.com
assert_grep "$T/client.err" "error packet from server: code=a action=3 msg=Denied by proxy: virus found: eicar\.com\.UNOFFICIAL"
assert_log "r66-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=dl-eicar\.com host=hosta rule=out dir=download size=68 "

info "1 MB infected SEND (16 blocks: the first 15 reach the server, never the 16th)"
send r66 bad-1m.bin 3
blocked_send bad-1m.bin
assert_grep "$T/client.err" "virus found: bad-1m\.bin\.UNOFFICIAL"
assert_log "r66-scan verdict=infected threat=\"bad-1m\.bin\.UNOFFICIAL\" scanner=av file=bad-1m\.bin host=hosta rule=in dir=upload size=1048576 "
wait_grep "$T/r66server.log" "error packet from client: code=a action=3 msg=Denied by proxy: virus found: bad-1m\.bin" 5 ||
    fail "the server was not told of bad-1m.bin: $(cat "$T/r66server.log")"
assert_no_grep "$T/r66server.log" "ok received file=bad-1m\.bin" "the server took the infected file"
info "1 MB infected RECV"
recv r66 dl-bad-1m.bin 4
blocked_recv dl-bad-1m.bin
assert_log "r66-scan verdict=infected threat=\"bad-1m\.bin\.UNOFFICIAL\" scanner=av file=dl-bad-1m\.bin host=hosta rule=out dir=download size=1048576 "

# ---- a refusal ends its channel, not the connection: an infected SEND
# then a clean one on the same connection
info "EICAR then a clean file on one connection"
r66c "$PORT_keep" hosta:pwA --rule in --mode 1 --block 65536 --continue \
    --send "$T/cli/eicar.com" --send "$T/cli/1k.bin"
[[ $R66_RC == 2 ]] || fail "two SENDs, the first infected: rc=$R66_RC"
assert_grep "$T/client.err" "virus found: eicar\.com\.UNOFFICIAL"
assert_grep "$T/client.out" "^ok send file=1k\.bin size=1024 "
same "$KEEP_SRV_DIR/1k.bin" "$T/cli/1k.bin" "clean SEND after an infected one on one connection"
[[ ! -e $KEEP_SRV_DIR/eicar.com ]] || fail "the keep server has eicar.com"
assert_log "session-end service=keep analyser=r66 verdict=accept "

# ---- over TLS
info "TLS both sides"
TLSC=(--tls --tls-ca "$P/ca.pem" --tls-name r66.test)
r66c "$PORT_tls" hosta:pwA "${TLSC[@]}" --rule in --mode 3 --block 65536 --send "$T/cli/eicar.com"
[[ $R66_RC == 2 ]] || fail "TLS SEND EICAR: rc=$R66_RC"
assert_grep "$T/client.err" "error packet from server: code=a action=3 msg=Denied by proxy: virus found: eicar\.com\.UNOFFICIAL"
[[ ! -e $TLS_SRV_DIR/eicar.com ]] || fail "TLS SEND EICAR: the server has the file"
r66c "$PORT_tls" hosta:pwA "${TLSC[@]}" --rule out --mode 4 --block 65536 --recv dl-eicar.com --dir "$T/out"
blocked_recv dl-eicar.com
r66c "$PORT_tls" hosta:pwA "${TLSC[@]}" --rule in --mode 3 --block 65536 --send "$T/cli/10m.bin"
[[ $R66_RC == 0 ]] || fail "TLS SEND 10m.bin: rc=$R66_RC: $(cat "$T/client.err")"
same "$TLS_SRV_DIR/10m.bin" "$T/cli/10m.bin" "clean TLS SEND"
assert_metric eq proxyd_scan_total 'service="tls",scanner="av",verdict="infected"' 2
assert_metric eq proxyd_scan_total 'service="tls",scanner="av",verdict="clean"' 1

# ---- clean files, both ways
for f in empty.bin 1k.bin 10m.bin; do
    size=$(stat -c %s "$T/cli/$f")
    send r66 "$f"
    [[ $R66_RC == 0 ]] || fail "SEND $f: rc=$R66_RC: $(cat "$T/client.err")"
    same "$R66_SRV_DIR/$f" "$T/cli/$f" "clean SEND $f"
    assert_log "r66-scan verdict=clean scanner=av file=$f host=hosta rule=in dir=upload size=$size istag="
    recv r66 "dl-$f" 4
    [[ $R66_RC == 0 ]] || fail "RECV dl-$f: rc=$R66_RC: $(cat "$T/client.err")"
    same "$T/out/dl-$f" "$T/cli/$f" "clean RECV $f"
    assert_log "r66-scan verdict=clean scanner=av file=dl-$f host=hosta rule=out dir=download size=$size istag="
    info "clean $f both ways: ok"
done
assert_log "r66-transfer host=hosta rule=in mode=send file=10m\.bin size=10485760 blocks=160 digest=SHA-256 verdict=accept payload=copy"
# A type c-icap does not scan: its 204 to the preview passes the file (a
# 200 returning it unchanged, without a preview, used to refuse it).
{ printf '%%PDF-1.4\n'; head -c 1M /dev/urandom; } >"$T/cli/doc.pdf"
send r66 doc.pdf
[[ $R66_RC == 0 ]] || fail "SEND doc.pdf: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/doc.pdf" "$T/cli/doc.pdf" "clean SEND doc.pdf"
assert_log "r66-scan verdict=clean scanner=av file=doc\.pdf .*note=\"204 to the preview \(1024 bytes\): the rest not scanned\""

# ---- <scan> with <content> and <audit>
info "scanner, <content> and <audit> together"
python3 - "$T/cli/prog.elf" <<'PY'
import os, struct, sys
elf = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) +
       struct.pack("<HHIQQQIHHHHHH", 2, 0x3e, 1, 0x401000, 64, 0, 0, 64,
                   56, 1, 64, 0, 0))
open(sys.argv[1], "wb").write(elf + os.urandom(200000))
PY
send typed prog.elf
blocked_send prog.elf
assert_grep "$T/client.err" "code=a action=3 msg=Denied by proxy: file type not allowed: application/x-executable"
assert_log "r66-content type=application/x-executable action=deny rule=[^ ]+typed\.xml:[0-9]+ file=prog\.elf host=hosta r66-rule=in dir=upload"
assert_no_grep "$PROXYD_LOG" "r66-scan verdict=[a-z]+ scanner=av file=prog\.elf" "a file denied by type got a scanner's verdict"
send typed eicar.com
blocked_send eicar.com
assert_log "r66-scan verdict=infected threat=\"eicar\.com\.UNOFFICIAL\" scanner=av file=eicar\.com host=hosta rule=in dir=upload size=68 "
send typed 10m.bin
[[ $R66_RC == 0 ]] || fail "SEND 10m.bin, scanner and content: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/10m.bin" "$T/cli/10m.bin" "SEND 10m.bin, scanner and content"
for ((i = 0; i < 100; i++)); do
    (($(wc -l <"$T/audit.json" 2>/dev/null || echo 0) >= 3)) && break
    sleep 0.05
done
python3 - "$T/audit.json" "$(sha256_of "$T/cli/10m.bin")" <<'PY' || fail "the typed service's records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
recs = [r for r in recs if r["service"] == "typed"]
assert len(recs) == 3, recs
elf, eicar, big = recs
assert elf["content_action"] == "deny" and elf["scan_verdict"] is None, elf
assert elf["verdict"] == "deny" and elf["reason"] == "content-type", elf
assert eicar["scan_verdict"] == "infected" and eicar["threat"] == "eicar.com.UNOFFICIAL", eicar
assert eicar["verdict"] == "deny" and eicar["reason"] == "scan-infected", eicar
assert eicar["content_type"] == "text/plain" and eicar["rule"] == "scan", eicar
assert big["scan_verdict"] == "clean" and big["verdict"] == "accept", big
assert big["sha256"] == sys.argv[2] and big["size"] == 10485760 and big["complete"], big
PY

# ---- direction="download": SENDs are not scanned
info "direction=download"
rm -f "$R66_SRV_DIR/eicar.com"
n0=$(grep -c "r66-scan verdict=infected .*file=eicar\.com .*dir=upload" "$PROXYD_LOG")
send down eicar.com
[[ $R66_RC == 0 ]] || fail "SEND through direction=download: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/eicar.com" "$T/cli/eicar.com" "SEND EICAR, direction=download"
rm -f "$R66_SRV_DIR/eicar.com"
recv down dl-eicar.com
blocked_recv dl-eicar.com
n=$(grep -c "r66-scan verdict=infected .*file=eicar\.com .*dir=upload" "$PROXYD_LOG")
assert_eq "$n" "$n0" "upload EICAR verdicts (the direction=download SEND is not scanned)"

# ---- max-size
info "max-size"
send small bad-1m.bin
[[ $R66_RC == 2 ]] || fail "SEND over max-size: rc=$R66_RC"
assert_grep "$T/client.err" "code=d action=3 msg=Denied by proxy: file over the scanner's max-size"
[[ ! -e $R66_SRV_DIR/bad-1m.bin ]] || fail "SEND over max-size: the server has the file"
assert_log "r66-scan verdict=over-size scanner=av file=bad-1m\.bin host=hosta rule=in dir=upload size=1048576 max-size=102400 over-size=block"
send small-open bad-1m.bin
[[ $R66_RC == 0 ]] || fail "SEND over max-size, allow: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/bad-1m.bin" "$T/cli/bad-1m.bin" "over max-size, allow (unscanned)"
rm -f "$R66_SRV_DIR/bad-1m.bin"
send small 1k.bin
[[ $R66_RC == 0 ]] || fail "SEND under max-size: rc=$R66_RC: $(cat "$T/client.err")"

# ---- held until the verdict: the scanner has the whole 1 MB file and
# thinks; the server has none of it (deliver="tail": 15 of its 16 blocks);
# the client leaving then ends it there (what was held never goes)
info "held until the verdict"
head -c 1M /dev/urandom >"$T/cli/held.bin"
cp "$T/cli/held.bin" "$R66_SRV_DIR/dl-held.bin"
held_case() { # SERVICE send|recv BYTES_THE_RECEIVER_HAS
    local svc=$1 op=$2 want=$3 port="PORT_${1//-/_}" hp n i dir args pat
    if [[ $op == send ]]; then
        dir=$R66_SRV_DIR pat='.part.*'
        args=(--rule in --mode 1 --send "$T/cli/held.bin")
    else
        dir=$T/out pat='dl-held.bin.part'
        args=(--rule out --mode 2 --recv dl-held.bin --dir "$T/out")
    fi
    rm -f "$dir"/$pat "$T/stall.whole"
    "$R66PEER" client --connect "127.0.0.1:${!port}" --id hosta:pwA --partner serverb:pwB \
        --timeout 60 --block 65536 "${args[@]}" \
        >"$T/held.out" 2>"$T/held.err" &
    hp=$!
    track_pid "$hp"
    for ((i = 0; i < 100; i++)); do
        [[ -s $T/stall.whole ]] && break
        sleep 0.1
    done
    [[ -s $T/stall.whole ]] || fail "$svc $op: the scanner did not get the whole file"
    for ((i = 0; i < 100; i++)); do
        n=$(find "$dir" -name "$pat" -size "${want}c" | wc -l)
        ((n == 1)) && break
        ((want == 0)) && [[ -z $(find "$dir" -name "$pat") ]] && break
        sleep 0.1
    done
    # nothing more moves while the verdict is awaited
    n=$(find "$dir" -name "$pat" -printf '%s\n')
    [[ ${n:-0} == "$want" ]] || fail "$svc $op: the receiver has ${n:-0} bytes of held.bin while the scanner thinks, expected $want"
    kill -KILL "$hp"
    wait_exit "$hp" 5 || true
}
held_case held send 0
assert_log "r66-scan verdict=none reason=\"the client closed before the verdict\" scanner=stall file=held\.bin host=hosta rule=in dir=upload"
wait_grep "$T/r66server.log" "connection closed during the transfer" 10 ||
    fail "the server did not see the transfer cut: $(cat "$T/r66server.log")"
held_case held-tail send $((1048576 - 65536))
held_case held recv 0
held_case held-tail recv $((1048576 - 65536))
assert_no_grep "$T/r66server.log" "ok received file=held\.bin" "the server completed held.bin"
[[ ! -e $R66_SRV_DIR/held.bin ]] || fail "the server has held.bin"

# ---- counters so far (clean: 3 files both ways, and doc.pdf)
assert_metric eq proxyd_scan_total 'service="r66",scanner="av",verdict="infected"' 4
assert_metric eq proxyd_scan_total 'service="r66",scanner="av",verdict="clean"' 7
assert_metric eq proxyd_scan_total 'service="down",scanner="av",verdict="infected"' 1
assert_metric eq proxyd_scan_total 'service="keep",scanner="av",verdict="infected"' 1
assert_metric eq proxyd_scan_total 'service="keep",scanner="av",verdict="clean"' 1
assert_metric eq proxyd_scan_total 'service="small",scanner="av",verdict="over-size"' 1
assert_metric eq proxyd_scan_total 'service="small-open",scanner="av",verdict="over-size-allowed"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_scan"' 10
bad=$(grep -c "violation" "$PROXYD_LOG" || true)
assert_eq "$bad" 0 "protocol violations"

# ---- the scanner killed in the middle of two SENDs (2 MB/s each: 5 s)
info "c-icap killed mid-transfer"
kill -TERM "$PROXYD_PID"
wait_exit "$PROXYD_PID" 15 || fail "proxyd did not stop"
write_proxyd_conf 'buffer="256k" session-bandwidth="2m"' "<scanners>
    <icap name=\"av\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\"/>
    <icap name=\"av-open\" url=\"icap://127.0.0.1:$ICAP_PORT/avscan\" timeout=\"10s\" on-error=\"allow\"/>
    <icap name=\"stall\" url=\"icap://127.0.0.1:$STALL_PORT/avscan\" timeout=\"60s\"/>
  </scanners>"
start_proxyd
cp "$T/cli/10m.bin" "$T/cli/mid-block.bin"
cp "$T/cli/10m.bin" "$T/cli/mid-allow.bin"
rm -f "$R66_SRV_DIR"/.part.*
"$R66PEER" client --connect "127.0.0.1:$PORT_r66" --id hosta:pwA --partner serverb:pwB \
    --timeout 60 --rule in --mode 1 --block 65536 --send "$T/cli/mid-block.bin" \
    >"$T/mid-block.out" 2>"$T/mid-block.err" &
mb=$!
"$R66PEER" client --connect "127.0.0.1:$PORT_open" --id hosta:pwA --partner serverb:pwB \
    --timeout 60 --rule in --mode 1 --block 65536 --send "$T/cli/mid-allow.bin" \
    >"$T/mid-allow.out" 2>"$T/mid-allow.err" &
ma=$!
track_pid "$mb"
track_pid "$ma"
# both under way: each client has read 2 MB of its file (what it sent is
# held by proxyd until the verdict: the server has none of it yet)
rchar() { awk '/^rchar:/ {print $2}' "/proc/$1/io" 2>/dev/null || echo 0; }
for ((i = 0; i < 100; i++)); do
    (($(rchar "$mb") > 2000000 && $(rchar "$ma") > 2000000)) && break
    sleep 0.1
done
(($(rchar "$mb") > 2000000 && $(rchar "$ma") > 2000000)) || fail "the two SENDs did not get under way"
n=$(find "$R66_SRV_DIR" -name '.part.*' -size +0 | wc -l)
assert_eq "$n" 0 "files the server has bytes of while the verdicts are awaited"
kill_scanner
rc=0; wait "$mb" || rc=$?
assert_eq "$rc" 2 "SEND through on-error=block, scanner killed: client exit status"
assert_grep "$T/mid-block.err" "error packet from server: code=a action=3 msg=Denied by proxy: the file could not be scanned"
[[ ! -e $R66_SRV_DIR/mid-block.bin ]] || fail "on-error block: the server has the file"
rc=0; wait "$ma" || rc=$?
assert_eq "$rc" 0 "SEND through on-error=allow, scanner killed: client exit status ($(cat "$T/mid-allow.err"))"
same "$R66_SRV_DIR/mid-allow.bin" "$T/cli/mid-allow.bin" "on-error allow, scanner killed"
assert_log "r66-scan verdict=error reason=\"[^\"]+\" scanner=av file=mid-block\.bin host=hosta rule=in dir=upload on-error=block"
assert_log "r66-scan verdict=error reason=\"[^\"]+\" scanner=av-open file=mid-allow\.bin host=hosta rule=in dir=upload on-error=allow"
assert_metric eq proxyd_scan_total 'service="r66",scanner="av",verdict="error"' 1
assert_metric eq proxyd_scan_total 'service="open",scanner="av-open",verdict="error-allowed"' 1

# with the scanner down, a new transfer: refused (block), passed (allow)
send r66 1k.bin
[[ $R66_RC == 2 ]] || fail "SEND with the scanner down, on-error block: rc=$R66_RC"
rm -f "$R66_SRV_DIR/1k.bin"
send open 1k.bin
[[ $R66_RC == 0 ]] || fail "SEND with the scanner down, on-error allow: rc=$R66_RC: $(cat "$T/client.err")"
same "$R66_SRV_DIR/1k.bin" "$T/cli/1k.bin" "scanner down, on-error allow"
r66_finish
info "ok"
