#!/usr/bin/env bash
# Each <r66> refusal answered with the right ErrorPacket and nothing written
# on the server: host id (A), rule (n), mode (n), file name (a), path trick
# (a), block size (d), file size (d), per-block digest required (M), an
# information request for a refused rule (n), a JSON command and a Shutdown
# (U), a Data block over the negotiated size in mid-transfer (d, the
# connection ends, the server drops its partial file); then malformed
# frames (type byte != code, a frame over max-block) answered with a
# ConnectionError. Log lines and counters are asserted for each.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/r66_lib.sh"
need_cmds python3 sha256sum curl
need_r66peer
setup

mkdir -p "$T/cli"
head -c 10K /dev/urandom >"$T/cli/ok.bin"
head -c 10K /dev/urandom >"$T/cli/tool.exe"
head -c 400K /dev/urandom >"$T/cli/large.bin"

start_r66_server
free_port R66_PORT
free_port DIG_PORT
free_port ABORT_PORT
write_proxyd_conf
write_r66_service r66 "$R66_PORT" "$R66_SRV_PORT" \
    '<r66 max-block="64k">
       <host id="hosta"/>
       <rule name="in"/>
       <mode allow="sendmd5 recvmd5 recv"/>
       <file pattern="*.bin" max-size="300k"/>
       <file pattern="*" action="deny"/>
     </r66>'
write_r66_service r66dig "$DIG_PORT" "$R66_SRV_PORT" '<r66 require-digest="yes"/>'
write_r66_service r66abort "$ABORT_PORT" "$R66_SRV_PORT" \
    '<r66><host id="hostz" action="abort"/></r66>'
start_proxyd

# the policy is not a blanket refusal: one accepted transfer first
r66c "$R66_PORT" hosta:pwA --rule in --mode 3 --send "$T/cli/ok.bin"
[[ $R66_RC == 0 ]] || fail "accepted transfer failed: $(cat "$T/client.err")"
assert_eq "$(sha256_of "$R66_SRV_DIR/ok.bin")" "$(sha256_of "$T/cli/ok.bin")" "ok.bin on the server"
rm -f "$R66_SRV_DIR/ok.bin"

# denied PORT CODE COUNTER LOGRE -- CLIENT_ARGS...
denied() {
    local port=$1 code=$2 counter=$3 re=$4 before after
    shift 5
    before=$(r66_event "$counter")
    [[ $before == NA ]] && before=0
    r66c "$port" "$@"
    assert_eq "$R66_RC" 2 "client exit status for a refusal ($counter)"
    assert_grep "$T/client.err" "error packet from server: code=$code action=3 msg=Denied by proxy" \
        "ErrorPacket code $code for $counter"
    assert_log "$re"
    assert_metric eq proxyd_analyser_events_total "analyser=\"r66\",event=\"$counter\"" $((before + 1))
    after=$(ls -A "$R66_SRV_DIR")
    assert_eq "$after" "" "files on the server after the $counter refusal"
    assert_eq "$(grep -c '^ok received' "$T/r66server.log")" 1 "transfers stored by the server (only the accepted one)"
    info "$counter refused with code $code"
}

denied "$R66_PORT" A denied_host "r66 denied host=hostz: host" -- \
    hostz:pwZ --rule in --mode 3 --send "$T/cli/ok.bin"
assert_log "session-end service=r66 analyser=r66 verdict=deny .* end=denied: r66 host"
assert_no_grep "$T/r66server.log" "hostz" "the server never saw hostz"
denied "$R66_PORT" n denied_rule "r66-transfer host=hosta rule=secret mode=sendmd5 file=ok.bin size=0 blocks=0 digest=none verdict=deny reason=rule" -- \
    hosta:pwA --rule secret --mode 3 --send "$T/cli/ok.bin"
denied "$R66_PORT" n denied_mode "r66-transfer host=hosta rule=in mode=send file=ok.bin .* verdict=deny reason=mode" -- \
    hosta:pwA --rule in --mode 1 --send "$T/cli/ok.bin"
denied "$R66_PORT" a denied_file "r66-transfer host=hosta rule=in mode=sendmd5 file=tool.exe .* verdict=deny reason=file-name" -- \
    hosta:pwA --rule in --mode 3 --send "$T/cli/tool.exe"
denied "$R66_PORT" a denied_file 'r66-transfer host=hosta rule=in mode=recv file=\.\./etc/x\.bin .* verdict=deny reason=file-name' -- \
    hosta:pwA --rule in --mode 2 --recv ../etc/x.bin --dir "$T/cli"
denied "$R66_PORT" d denied_block "r66-transfer host=hosta rule=in mode=sendmd5 file=ok.bin .* verdict=deny reason=block-size" -- \
    hosta:pwA --rule in --mode 3 --block 131072 --send "$T/cli/ok.bin"
denied "$R66_PORT" d denied_size "r66-transfer host=hosta rule=in mode=sendmd5 file=large.bin .* verdict=deny reason=file-size" -- \
    hosta:pwA --rule in --mode 3 --send "$T/cli/large.bin"
denied "$DIG_PORT" M denied_digest "r66-transfer host=hosta rule=any mode=send file=ok.bin .* verdict=deny reason=digest-required" -- \
    hosta:pwA --rule any --mode 1 --send "$T/cli/ok.bin"
# the server was told about the refused channels it had seen
assert_grep "$T/r66server.log" "error packet from client: code=n action=3 msg=Denied by proxy: rule not allowed"

# raw frames from python: an administrative packet, then malformed frames
cat >"$T/raw.py" <<'PY'
import hashlib, socket, struct, sys
port, what = int(sys.argv[1]), sys.argv[2]
NC = 0x80000000
def frame(dst, src, code, h=b"", m=b"", e=b"", typ=None):
    body = struct.pack(">III", len(h) + 9, len(m), len(e)) + bytes([code if typ is None else typ]) + h + m + e
    return struct.pack(">IIIB", len(body) + 9, dst, src, code) + body
def readframe(s):
    hdr = b""
    while len(hdr) < 4:
        c = s.recv(4 - len(hdr))
        if not c: return None
        hdr += c
    n = struct.unpack(">I", hdr)[0]
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c: return None
        body += c
    dst, src, code = struct.unpack(">IIB", body[:9])
    hl, ml, el = struct.unpack(">III", body[9:21])
    h = body[22:22 + hl - 9]; m = body[22 + hl - 9:22 + hl - 9 + ml]
    return dst, src, code, h, m
s = socket.create_connection(("127.0.0.1", port), timeout=10)
key = hashlib.md5(b"pwAGoldenGate" * 16).digest()
c = 0x11111111
if what == "admin":
    # KeepAlive and NoOp pass both ways: the server answers the KeepAlive
    s.sendall(frame(NC, NC, 23) + frame(NC, NC, 21, b"", b"\0"))
    ka = readframe(s)
    assert ka is not None and ka[2] == 21 and ka[4] == b"\1", ka
    print("keepalive answered")
    caps = b'3.1.0.{"HOSTID":"hosta","DIGESTALGO":"MD5","R66VERSION":"3.6.2"}'
    s.sendall(frame(NC, c, 1, b"hosta", key, struct.pack(">IB", c, 0) + caps))
    dst, src, code, h, m = readframe(s)
    assert code == 1 and dst == c, (code, dst)
    # later channels reuse the authentication; each refusal keeps the
    # connection: an information request for a refused rule, a JSON
    # command outside the allow list, then a Shutdown
    s.sendall(frame(NC, c + 1, 18, b"secret", b"\0", b"*"))
    f = readframe(s)
    print("info", hex(f[0]), f[2], f[3].decode(), f[4].decode())
    s.sendall(frame(NC, c + 2, 25, b'{"@class":"org.waarp.openr66.protocol.localhandler.packet.json.ConfigImportJsonPacket"}', b"", b"\x0c"))
    f = readframe(s)
    print("json", hex(f[0]), f[2], f[3].decode(), f[4].decode())
    s.sendall(frame(src, c, 8, key))          # Shutdown on the channel
elif what == "bigblock":
    # a Data block larger than the block size the request negotiated
    caps = b'3.1.0.{"HOSTID":"hosta","DIGESTALGO":"SHA-256","R66VERSION":"3.6.2"}'
    s.sendall(frame(NC, c, 1, b"hosta", key, struct.pack(">IB", c, 0) + caps))
    dst, src, code, h, m = readframe(s)
    assert code == 1, code
    req = b'\0{"filename":"mid.bin","block":1000,"rank":0,"id":7,"code":105,"length":5000,"limit":0}'
    s.sendall(frame(src, c, 7, b'{"rule":"in","mode":3}', req))
    f = readframe(s)
    assert f[2] == 7 and b'"block":1000' in f[4], f
    blk = b"x" * 1000
    s.sendall(frame(src, c, 3, struct.pack(">I", 0), blk, hashlib.sha256(blk).digest()))
    blk = b"y" * 2000
    s.sendall(frame(src, c, 3, struct.pack(">I", 1), blk, hashlib.sha256(blk).digest()))
elif what == "type":
    s.sendall(frame(NC, c, 1, b"hosta", key, struct.pack(">IB", c, 0) + b"3.1.0", typ=3))
elif what == "big":
    s.sendall(struct.pack(">IIIB", 200000, NC, c, 3) + b"\0" * 100)
elif what == "cut":
    # the first half of an Authent frame, then the client's FIN
    caps = b'3.1.0.{"HOSTID":"hosta","DIGESTALGO":"MD5","R66VERSION":"3.6.2"}'
    whole = frame(NC, c, 1, b"hosta", key, struct.pack(">IB", c, 0) + caps)
    s.sendall(whole[:len(whole) // 2])
    s.shutdown(socket.SHUT_WR)
f = readframe(s)
print("frame", None if f is None else (hex(f[0]), hex(f[1]), f[2], f[3].decode(), f[4].decode()))
if what != "admin":
    print("then", readframe(s))     # the proxy closes after a violation
PY
python3 "$T/raw.py" "$R66_PORT" admin >"$T/raw.out"
info "admin: $(cat "$T/raw.out" | tr '\n' ' ')"
assert_grep "$T/raw.out" "^keepalive answered"
assert_grep "$T/raw.out" "^frame \('0x11111111', '0x[0-9a-f]+', 5, 'Denied by proxy: administrative request not allowed', 'U'\)"
assert_grep "$T/raw.out" "^info 0x11111112 5 Denied by proxy: rule not allowed n"
assert_grep "$T/raw.out" "^json 0x11111113 5 Denied by proxy: JSON command not allowed U"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_admin"' 2
assert_log "r66 denied host=hosta: json-command"
assert_no_grep "$T/r66server.log" "shutdown|Shutdown" "the server never saw the shutdown"

python3 "$T/raw.py" "$R66_PORT" bigblock >"$T/raw.out"
info "bigblock: $(cat "$T/raw.out" | tr '\n' ' ')"
assert_grep "$T/raw.out" "^frame \('0x11111111', '0x[0-9a-f]+', 5, 'Denied by proxy: block size over the limit', 'd'\)"
assert_grep "$T/raw.out" "^then None"
assert_log "r66-transfer host=hosta rule=in mode=sendmd5 file=mid.bin size=1000 blocks=1 digest=none verdict=deny reason=block-size"
assert_log "end=denied: r66 block-size"
for ((k = 0; k < 50; k++)); do [[ -z $(ls -A "$R66_SRV_DIR") ]] && break; sleep 0.1; done
assert_eq "$(ls -A "$R66_SRV_DIR")" "" "the server dropped its partial file"

v0=$(r66_event violations)
python3 "$T/raw.py" "$R66_PORT" type >"$T/raw.out"
info "type: $(cat "$T/raw.out" | tr '\n' ' ')"
assert_grep "$T/raw.out" "^frame \('0x80000000', '0x80000000', 6, 'Protocol violation \(proxy\)', ''\)"
assert_grep "$T/raw.out" "^then None"
assert_log "r66 protocol violation from client: type byte differs from frame code"
assert_log "verdict=deny .* end=denied: r66 protocol violation: type byte differs from frame code"
python3 "$T/raw.py" "$R66_PORT" big >"$T/raw.out"
assert_grep "$T/raw.out" "^frame \('0x80000000', '0x80000000', 6, "
assert_log "r66 protocol violation from client: frame of 200004 bytes over max-block"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="violations"' $((v0 + 2))
# a frame cut by the client's close: the analyser sees the end (its held
# partial frame is logged and dropped, never passed on)
python3 "$T/raw.py" "$R66_PORT" cut >"$T/raw.out"
assert_log "r66: client closed in the middle of a frame"

# action="abort": a reset, no ErrorPacket, and a policy verdict (not an
# analyser error) in the session-end line
r66c "$ABORT_PORT" hostz:pwZ --rule in --mode 3 --send "$T/cli/ok.bin"
[[ $R66_RC != 0 ]] || fail "an aborted host's transfer succeeded"
assert_no_grep "$T/client.err" "Denied by proxy" "an ErrorPacket was sent for action=abort"
assert_log "session-end service=r66abort analyser=r66 verdict=deny .* by=policy phase=data end=aborted: r66 host"

assert_eq "$(ls -A "$R66_SRV_DIR")" "" "files on the server at the end"
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="transfers"' 1
assert_metric eq proxyd_analyser_events_total 'analyser="r66",event="denied_block"' 2
proc_alive "$PROXYD_PID" || fail "proxyd died"
r66_finish
info "all refusals ok"
